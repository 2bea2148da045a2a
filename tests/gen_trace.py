#!/usr/bin/env python3
"""sublet — a synthetic allocation trace in the `.events.csv` form.

    gen_trace.py N OUT.csv [--seed S]

N recorded events (alloc / free_requested / free_completed rows) from a
deterministic PRNG: a training-loop-like mix of long-lived weights, per-step
activations freed in reverse order and short-lived temporaries of every size
from 512 bytes to 256 MiB, on two streams.  Used by tests/cli_report.sh to
check that `sublet report` stays small and fast on a 10^6-event trace."""
import random
import sys


def main():
    args = sys.argv[1:]
    seed = 1
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    n, out = int(args[0]), args[1]
    rng = random.Random(seed)
    addr = 1 << 40
    live = []          # temporaries: (addr, size, stream)
    acts = []          # activations of the current step (freed in reverse)
    rows = []
    t = 1_700_000_000_000_000

    def emit(action, a, size, stream):
        nonlocal t
        t += rng.randint(1, 40)
        rows.append(f"{len(rows)},{action},{a},{size},{stream},{t}\r\n")

    def alloc(size, stream):
        nonlocal addr
        a = addr
        addr += (size + 511) // 512 * 512 + 4096   # unique trace addresses
        emit("alloc", a, size, stream)
        return a

    def free(a, size, stream):
        emit("free_requested", a, size, stream)
        emit("free_completed", a, size, stream)

    for _ in range(40):                     # weights, never freed
        alloc(rng.choice([4, 16, 64]) << 20, 0)
    while len(rows) < n - 3:
        r = rng.random()
        if len(acts) > 120 or (r < 0.05 and acts):   # backward: free in reverse
            for _ in range(min(len(acts), rng.randint(1, 24))):
                free(*acts.pop())
        elif r < 0.35:                                 # activation of this step
            size = rng.choice([1 << 20, 3 << 20, 12 << 20, 48 << 20]) + rng.randrange(0, 1 << 16)
            acts.append((alloc(size, 0), size, 0))
        elif r < 0.68 and len(live) < 300:            # temporary, any size
            size = max(1, int(2 ** rng.uniform(9, 28)))
            stream = 0 if rng.random() < 0.85 else 7
            live.append((alloc(size, stream), size, stream))
        elif live:                                     # free a random temporary
            i = rng.randrange(len(live))
            live[i], live[-1] = live[-1], live[i]
            free(*live.pop())
    with open(out, "w", newline="") as f:
        f.write("seq,action,addr,size,stream,time_us\r\n")
        f.writelines(rows[:n])


if __name__ == "__main__":
    main()
