#!/usr/bin/env python3
"""Write a random private-pool scenario for pools_torch / pools_sublet (tests/oracle/).

    pools_gen.py SEED [STEPS [graphs|mempool]] > SCENARIO

Two graph pools (ids (1,0) and (2,0)) captured on streams 1 and 2 (sometimes both on one
stream, sometimes one after the other on a shared pool), default-pool traffic on streams
0-2 in between, frees of any live block from any pool, pool release (graph reset) and
empty_cache, on a device small enough that the OOM path runs.  Depending on the seed, also:

- MemPools (c10::cuda::MemPool, ids (0, K)): created, entered and left like
  `torch.cuda.use_mem_pool` (a redirection with a filter accepting this thread, the pool
  made the thread's MemPoolContext; leaving ends it and releases the use, as PyTorch's
  later `use_mem_pool` does), `empty_cache` inside one (that pool only), destroyed
  (`releasePool`, then `emptyCache` under the pool's context), interleaved with captures;
- record_stream on live blocks of any pool (the frees then wait on events, deferred while
  a capture is under way) and "every pending event completes";
- settings: expandable_segments:True (2.6 gives private pools expandable segments too),
  max_split_size_mb:40, roundup_power2_divisions:4.

PyTorch 2.6 asserts when events are synchronised during a capture, so `empty_cache` outside
a MemPool context and a MemPool's destruction happen only when nothing is being allocated to.
Every line is valid for both allocators.  The first line is `conf SETTINGS` (maybe empty):
pools_sublet appends it to `pytorch_version:2.6,`, cli_oracle_pools.sh hands it to PyTorch
as PYTORCH_CUDA_ALLOC_CONF.

A third argument asks for a scenario to be recorded and replayed (tests/cli_replay_pools.sh:
pools_sublet writes its run as a trace): `graphs` (graph pools only) or `mempool` (MemPools
too), both under the default settings, without record_stream, with one use_mem_pool at a time
and empty_cache only outside every capture and use_mem_pool (what a replay can follow)."""
import random
import sys

seed = int(sys.argv[1])
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
rng = random.Random(seed)
MiB = 1 << 20
# streams 1 and 2 are written as 0x1000 and 0x2000: PyTorch takes an even value only as an
# external stream (recordStream needs one)
mode = sys.argv[3] if len(sys.argv) > 3 else ""
if mode not in ("", "graphs", "mempool"):
    sys.exit(f"pools_gen.py: unknown mode {mode!r} (graphs, mempool)")
replay = mode != ""
mempools = seed % 4 in (1, 3) if not replay else mode == "mempool"
records = seed % 4 in (2, 3) and not replay
conf = rng.choice(["", "", "", "expandable_segments:True", "expandable_segments:True",
                   "max_split_size_mb:40", "roundup_power2_divisions:4"])
if replay:
    conf = ""
print(f"conf {conf}")
print(f"capacity {rng.choice([96, 160, 256, 1024]) * MiB}")
live = []
next_id = 0
uses = {1: 0, 2: 0}      # graph pools' use counts as the scenario sees them
active = {}              # graph pool -> being captured
dead = set()             # released to 0 (freeable): never begun again
mp_alive = []            # MemPools not destroyed yet (K)
mp_next = 1
ctx = []                 # MemPools entered (use_mem_pool), innermost last


def size():
    r = rng.random()
    if r < 0.45:
        return rng.randint(1, 1 * MiB)
    if r < 0.85:
        return rng.randint(1 * MiB + 1, 12 * MiB)
    return rng.randint(12 * MiB, 48 * MiB)


for _ in range(steps):
    r = rng.random()
    if r < 0.40:
        print(f"a {next_id} {size()} {rng.choice([0, 1, 2, 1, 2]) << 12}")
        live.append(next_id)
        next_id += 1
    elif r < 0.72 and live:
        print(f"f {live.pop(rng.randrange(len(live)))}")
    elif r < 0.78:
        cands = [p for p in (1, 2) if p not in active and p not in dead]
        if cands:
            p = rng.choice(cands)
            print(f"b {p} {rng.choice([1, 2]) << 12}")
            uses[p] += 1
            active[p] = True
    elif r < 0.83 and active:
        p = rng.choice(sorted(active))
        print(f"e {p}")
        del active[p]
    elif r < 0.86:
        cands = [p for p in (1, 2) if p not in active and uses[p] > 0]
        if cands:
            p = rng.choice(cands)
            print(f"r {p}")
            uses[p] -= 1
            if uses[p] == 0:
                dead.add(p)
    elif r < 0.88:
        if (ctx and not replay) or (not active and not ctx):
            print("c")
    elif r < 0.95 and mempools:
        k = rng.random()
        if k < 0.25 and len(mp_alive) < 4:
            print(f"m {mp_next}")
            mp_alive.append(mp_next)
            mp_next += 1
        elif k < 0.6 and mp_alive:
            cands = [m for m in mp_alive if m not in ctx]
            if cands and not (replay and ctx):
                m = rng.choice(cands)
                print(f"u {m}")
                ctx.append(m)
        elif k < 0.85 and ctx:
            print(f"x {ctx.pop()}")
        elif mp_alive and not active and not ctx:
            m = mp_alive.pop(rng.randrange(len(mp_alive)))
            print(f"d {m}")
    elif records and live:
        if rng.random() < 0.7:
            print(f"R {rng.choice(live)} {rng.choice([0, 1, 2]) << 12}")
        else:
            print("s")
while ctx:
    print(f"x {ctx.pop()}")
for p in sorted(active):
    print(f"e {p}")
for i in live:
    print(f"f {i}")
for m in mp_alive:
    print(f"d {m}")
for p in (1, 2):
    while uses[p] > 0:
        print(f"r {p}")
        uses[p] -= 1
print("s")
print("c")
