#!/usr/bin/env python3
"""Write a random private-pool scenario for pools_torch / pools_sublet (tests/oracle/).

    pools_gen.py SEED [STEPS] > SCENARIO

Two graph pools (ids (1,0) and (2,0)) captured on streams 1 and 2 (sometimes both on one
stream, sometimes one after the other on a shared pool), default-pool traffic on streams
0-2 in between, frees of any live block from any pool, pool release (graph reset) and
empty_cache when no capture is under way (PyTorch 2.6 asserts otherwise), on a device small
enough that the OOM path runs.  Every line is valid for both allocators."""
import random
import sys

seed = int(sys.argv[1])
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
rng = random.Random(seed)
MiB = 1 << 20
print(f"capacity {rng.choice([96, 160, 256, 1024]) * MiB}")
live = []
next_id = 0
uses = {1: 0, 2: 0}      # use counts as the scenario sees them
active = {}              # pool -> stream being captured
dead = set()             # released to 0 (freeable): never begun again
def size():
    r = rng.random()
    if r < 0.45:
        return rng.randint(1, 1 * MiB)
    if r < 0.85:
        return rng.randint(1 * MiB + 1, 12 * MiB)
    return rng.randint(12 * MiB, 48 * MiB)
for _ in range(steps):
    r = rng.random()
    if r < 0.45:
        print(f"a {next_id} {size()} {rng.choice([0, 1, 2, 1, 2])}")
        live.append(next_id)
        next_id += 1
    elif r < 0.80 and live:
        print(f"f {live.pop(rng.randrange(len(live)))}")
    elif r < 0.87:
        cands = [p for p in (1, 2) if p not in active and p not in dead]
        if cands:
            p = rng.choice(cands)
            print(f"b {p} {rng.choice([1, 2])}")
            uses[p] += 1
            active[p] = True
    elif r < 0.93 and active:
        p = rng.choice(sorted(active))
        print(f"e {p}")
        del active[p]
    elif r < 0.97:
        cands = [p for p in (1, 2) if p not in active and uses[p] > 0]
        if cands:
            p = rng.choice(cands)
            print(f"r {p}")
            uses[p] -= 1
            if uses[p] == 0:
                dead.add(p)
    elif not active:
        print("c")
for p in sorted(active):
    print(f"e {p}")
for i in live:
    print(f"f {i}")
for p in (1, 2):
    while uses[p] > 0:
        print(f"r {p}")
        uses[p] -= 1
print("c")
