#!/usr/bin/env python3
"""One randomized PyTorch program, run on a CUDA device (the null device under
`sublet nullgpu`, or a GPU): seeded, so that the same seed and options make the
same sequence of allocator calls.

  program.py --seed N --out DIR [--ops K] [--fraction F] [--oom] [--graphs]
             [--mempool {torch,sublet,none}] [--dropin]

Operations, drawn with weights: tensors of sizes from a few bytes to a
sizeable part of the device (log-uniform, with favourite sizes that recur so
that cached blocks are reused), on the default stream or one of three side
streams; frees; record_stream on another stream before a free; empty_cache;
synchronize; allocations past what is free (OOMs, caught); CUDA graph
captures with allocations inside (the graph kept for a while, replayed, then
deleted, which releases its private pool); and MemPool blocks under
use_mem_pool (torch.cuda.MemPool, or sublet.torch.MemPool, whose segments
come from sublet).  --fraction sets torch.cuda.set_per_process_memory_fraction
before the first allocation.  --dropin installs sublet as PyTorch's
allocator first (sublet.torch.install()).

Writes DIR/snapshot.pickle (PyTorch's own history, _dump_snapshot; not with
--dropin) and DIR/result.json: memory_stats() at the end, the OOM messages,
the operations run, the device's memory.

  program.py --batch FILE

runs many programs in one process: FILE holds a JSON list of {"argv": [...],
"env": {...}}; torch is imported once and each program runs in a child forked
before CUDA starts, with its environment (PYTORCH_CUDA_ALLOC_CONF,
SUBLET_NULLGPU_MEMORY) set in the child, so that each has a fresh allocator
and device.  Prints one line "INDEX STATUS" per program.  (The allocator
reads its settings and the null device its memory at their first use, in
the child.)"""
import argparse
import json
import math
import os
import random
import sys


def batch(path):
    import torch  # noqa: F401  (imported once, before the children fork)

    with open(path) as f:
        jobs = json.load(f)
    worst = 0
    for k, job in enumerate(jobs):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.environ.update(job.get("env", {}))
            try:
                rc = main(job["argv"])
            except BaseException:
                import traceback

                traceback.print_exc()
                rc = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print("%d %d" % (k, code), flush=True)
        worst = worst or code
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", type=int, default=150)
    ap.add_argument("--fraction", type=float, default=None)
    ap.add_argument("--oom", action="store_true", help="make allocations that cannot fit")
    ap.add_argument("--graphs", action="store_true", help="capture CUDA graphs")
    ap.add_argument("--mempool", choices=["torch", "sublet", "none"], default="none")
    ap.add_argument("--dropin", action="store_true", help="sublet.torch.install() first")
    a = ap.parse_args(argv)

    import torch

    if a.dropin or a.mempool == "sublet":
        import sublet.torch as st
    if a.dropin:
        st.install()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    total = torch.cuda.get_device_properties(0).total_memory
    if not a.dropin:
        torch.cuda.memory._record_memory_history(max_entries=1 << 20, stacks="python")
    if a.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(a.fraction)
    limit = int(total * (a.fraction if a.fraction is not None else 1.0))

    streams = [torch.cuda.current_stream()] + [torch.cuda.Stream() for _ in range(3)]
    favourites = [rng.choice([512, 4096, 1 << 20, 2 << 20, 3 << 20, 12 << 20, 20 << 20, 40 << 20])
                  for _ in range(6)]
    live = []       # (tensor, stream index)
    graphs = []     # (graph, tensors it keeps)
    pools = []      # (pool, tensors in it)
    ooms = []
    ran = {}
    cap_bytes = max(limit // 6, 4 << 20)

    def size():
        if rng.random() < 0.35:
            return rng.choice(favourites) + rng.choice([0, 0, 1, 511, 4000])
        return max(1, int(math.exp(rng.uniform(0, math.log(cap_bytes)))))

    def alloc(n, si):
        with torch.cuda.stream(streams[si]):
            return torch.empty(n, dtype=torch.uint8, device="cuda")

    def try_alloc(n, si):
        try:
            return alloc(n, si)
        except torch.OutOfMemoryError as e:
            ooms.append(str(e))
            return None

    weights = [("alloc", 40), ("free", 30), ("record_stream", 6), ("empty_cache", 2),
               ("synchronize", 2)]
    if a.oom:
        weights.append(("oom", 3))
    if a.graphs:
        weights += [("graph", 3), ("graph_del", 2)]
    if a.mempool != "none":
        weights += [("pool", 3), ("pool_del", 2)]
    names = [w[0] for w in weights]
    wts = [w[1] for w in weights]

    for _ in range(a.ops):
        op = rng.choices(names, wts)[0]
        ran[op] = ran.get(op, 0) + 1
        if op == "alloc":
            si = rng.choice([0, 0, 0, 1, 2, 3])
            t = try_alloc(size(), si)
            if t is not None:
                live.append((t, si))
        elif op == "free" and live:
            live.pop(rng.randrange(len(live)))
        elif op == "record_stream" and live:
            t, si = live.pop(rng.randrange(len(live)))
            other = rng.choice([i for i in range(len(streams)) if i != si])
            t.record_stream(streams[other])
            del t
        elif op == "empty_cache":
            torch.cuda.empty_cache()
        elif op == "synchronize":
            torch.cuda.synchronize()
        elif op == "oom":
            t = try_alloc(limit + rng.choice([1, 1 << 20, 3 << 30]), 0)
            assert t is None
        elif op == "graph":
            g = torch.cuda.CUDAGraph()
            side = streams[rng.choice([1, 2, 3])]
            side.wait_stream(torch.cuda.current_stream())
            keep = []
            with torch.cuda.stream(side):
                try:
                    with torch.cuda.graph(g, stream=side):
                        tmp = []
                        for _ in range(rng.randint(1, 4)):
                            tmp.append(torch.empty(size(), dtype=torch.uint8, device="cuda"))
                        if tmp and rng.random() < 0.5:
                            tmp.pop(rng.randrange(len(tmp)))
                        keep = tmp
                except torch.OutOfMemoryError as e:
                    ooms.append(str(e))
                    g = None
            torch.cuda.current_stream().wait_stream(side)
            if g is not None:
                g.replay()
                graphs.append((g, keep))
        elif op == "graph_del" and graphs:
            graphs.pop(rng.randrange(len(graphs)))
        elif op == "pool":
            pool = torch.cuda.MemPool() if a.mempool == "torch" else st.MemPool()
            keep = []
            with torch.cuda.use_mem_pool(pool):
                for _ in range(rng.randint(1, 3)):
                    t = try_alloc(size(), 0)
                    if t is not None:
                        keep.append(t)
            pools.append((pool, keep))
        elif op == "pool_del" and pools:
            pool, keep = pools.pop(rng.randrange(len(pools)))
            keep.clear()
            del pool
    torch.cuda.synchronize()
    if not a.dropin:
        torch.cuda.memory._dump_snapshot(os.path.join(a.out, "snapshot.pickle"))
    stats = st.memory_stats() if a.dropin else torch.cuda.memory_stats()
    result = {
        "seed": a.seed,
        "ops": ran,
        "ooms": ooms,
        "total_memory": total,
        "memory_stats": {k: v for k, v in stats.items() if isinstance(v, (int, float))},
        "torch": torch.__version__,
    }
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--batch":
        sys.exit(batch(sys.argv[2]))
    sys.exit(main())
