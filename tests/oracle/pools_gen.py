#!/usr/bin/env python3
"""Write a random private-pool scenario for pools_torch / pools_sublet (tests/oracle/).

    pools_gen.py SEED [STEPS] [mempool] > SCENARIO

Two graph pools (ids (1,0) and (2,0)) captured on streams 1 and 2 (sometimes both on one
stream, sometimes one after the other on a shared pool), default-pool traffic on streams
0-2 in between, frees of any live block from any pool, pool release (graph reset) and
empty_cache when no capture is under way (PyTorch 2.6 asserts otherwise), on a device small
enough that the OOM path runs.  Every line is valid for both allocators.

With `mempool` (sublet only: tests/cli_replay_pools.sh; pools_torch has no MemPool), MemPools
too: `M` creates one (ids (0, 1), (0, 2)), `U K` enters use_mem_pool(K) (the thread's
allocations go to it), `X K` leaves it, `D K` deletes it (releasePool, then emptyCache of that
pool); one use_mem_pool at a time, empty_cache only outside every capture and use_mem_pool."""
import random
import sys

seed = int(sys.argv[1])
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
mempool = len(sys.argv) > 3 and sys.argv[3] == "mempool"
rng = random.Random(seed)
MiB = 1 << 20
print(f"capacity {rng.choice([96, 160, 256, 1024]) * MiB}")
live = []
next_id = 0
uses = {1: 0, 2: 0}      # use counts as the scenario sees them
active = {}              # pool -> stream being captured
dead = set()             # released to 0 (freeable): never begun again
mps = 0                  # MemPools created
mp_dead = set()          # MemPools deleted
mp_active = None         # the MemPool under use_mem_pool
def size():
    r = rng.random()
    if r < 0.45:
        return rng.randint(1, 1 * MiB)
    if r < 0.85:
        return rng.randint(1 * MiB + 1, 12 * MiB)
    return rng.randint(12 * MiB, 48 * MiB)
def mempool_step():
    global mps, mp_active
    live_mps = [k for k in range(1, mps + 1) if k not in mp_dead]
    r = rng.random()
    if r < 0.25 and mps < 2:
        print("M")
        mps += 1
    elif r < 0.6 and mp_active is None and live_mps:
        mp_active = rng.choice(live_mps)
        print(f"U {mp_active}")
    elif r < 0.85 and mp_active is not None:
        print(f"X {mp_active}")
        mp_active = None
    elif mp_active is None and live_mps:
        k = rng.choice(live_mps)
        print(f"D {k}")
        mp_dead.add(k)
for _ in range(steps):
    if mempool and rng.random() < 0.1:
        mempool_step()
        continue
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
    elif not active and mp_active is None:
        print("c")
for p in sorted(active):
    print(f"e {p}")
if mp_active is not None:
    print(f"X {mp_active}")
for i in live:
    print(f"f {i}")
for p in (1, 2):
    while uses[p] > 0:
        print(f"r {p}")
        uses[p] -= 1
for k in range(1, mps + 1):
    if k not in mp_dead:
        print(f"D {k}")
print("c")
