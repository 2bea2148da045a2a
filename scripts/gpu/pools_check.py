#!/usr/bin/env python3
"""Private pools on a GPU (scripts/gpu-check step "pools"; docs/gpu.md):

  graph-pytorch   a CUDA graph capture of a few allocations under PyTorch's own
                  allocator: memory_stats() deltas after the capture, after the
                  graph is reset and after empty_cache()
  graph-sublet    the same under sublet.torch.install() (the private-pool hooks):
                  sublet's deltas, and the graph's own pool (pool_stats(g.pool()))
  mempool         PyTorch's allocator with a sublet.torch.MemPool() under
                  torch.cuda.use_mem_pool: the pool's segments (PyTorch's
                  snapshot) are sublet's blocks (sublet's statistics, base
                  addresses), the tensors work, and destroying the pool gives
                  them back to sublet

Each check runs in its own process (install() must precede the first CUDA
allocation; a MemPool needs PyTorch's allocator), with a time limit; a check
that fails is reported and the others still run.  Prints the figures, writes
OUT_DIR/pools.json; exit status 0 when every check passed and the graph
figures of the two allocators agree.

    python3 scripts/gpu/pools_check.py OUT_DIR [--lib PATH/libsublet_torch.so]
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1 << 20
# (bytes) a small-pool block, two large ones, an oversize-ish one
SIZES = [4000, 3 * MiB, 7 * MiB + 12345, 30 * MiB]
KEYS = ["allocated_bytes.all.current", "reserved_bytes.all.current", "segment.all.current",
        "active_bytes.all.current", "allocation.all.current", "reserved_bytes.small_pool.current",
        "reserved_bytes.large_pool.current"]


def clean_env():
    env = dict(os.environ)
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "SUBLET_ALLOC_CONF", "SUBLET_LOG"):
        env.pop(k, None)
    return env


# ---- the child: one check, one JSON line on stdout ------------------------------------------------


def pick(stats):
    return {k: int(stats.get(k, 0)) for k in KEYS}


def delta(after, before):
    return {k: after[k] - before[k] for k in KEYS}


def safe(fn, *args):
    """fn(*args), or {"error": why}: a figure that cannot be read is reported, and
    the check goes on."""
    try:
        return fn(*args)
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}


def child_graph(allocator, lib):
    import torch
    st = None
    if allocator == "sublet":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import sublet.torch as st
        alloc = st.install(lib)
        hooks = list(st._state.hooks)
        if "set_begin_allocate_to_pool" not in hooks:
            raise RuntimeError("the pool hooks were not given to PyTorch (hooks: %s; library %s)"
                               % (hooks, st._state.lib.path if st._state.lib else "?"))
        del alloc

    def stats():
        torch.cuda.synchronize()
        return pick(st.memory_stats(0) if st else torch.cuda.memory_stats(0))

    res = {"allocator": allocator, "torch": torch.__version__}
    side = torch.cuda.Stream()
    # warm-up on a side stream, as PyTorch's graph docs ask
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        w = torch.ones(1024, device="cuda") * 2
    torch.cuda.current_stream().wait_stream(side)
    del w
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = stats()
    res["base"] = base
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ts = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in SIZES]
        [x.fill_(7) for x in ts]  # no name outlives `del ts` below
    res["pool_id"] = list(g.pool())
    g.replay()
    torch.cuda.synchronize()
    res["replay_ok"] = all(int(t[0].item()) == 7 and int(t[-1].item()) == 7 for t in ts)
    cap = stats()
    res["after_capture"] = delta(cap, base)
    if st is not None:
        ps = safe(st.pool_stats, g.pool(), 0)
        res["pool"] = ps if "error" in ps else {
            k: int(ps.get(k, -1))
            for k in KEYS + ["pool_use_count", "pool_device_segments", "pool_allocating"]}
        res["sublet_last_error"] = st.last_error()
    del ts
    res["after_free"] = delta(stats(), base)
    g.reset()
    del g
    res["after_reset"] = delta(stats(), base)
    torch.cuda.empty_cache()
    res["after_empty_cache"] = delta(stats(), base)
    if st is not None:
        try:
            st.pool_stats(res["pool_id"], 0)
            res["pool_forgotten"] = False
        except RuntimeError:
            res["pool_forgotten"] = True
    return res


def child_mempool(lib):
    import ctypes
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import sublet.torch as st
    res = {"torch": torch.__version__}
    torch.cuda.init()
    pool = st.MemPool(lib_path=lib)
    res["pool_id"] = list(pool.id)
    native_before = pick(torch.cuda.memory_stats(0))
    with torch.cuda.use_mem_pool(pool):
        ts = [torch.full((n,), 3, dtype=torch.uint8, device="cuda") for n in SIZES]
    outside = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")  # PyTorch's own pools
    torch.cuda.synchronize()
    res["values_ok"] = all(int(t.sum().item()) == 3 * t.numel() for t in ts)
    segs = [s for s in torch.cuda.memory._snapshot()["segments"]
            if tuple(s.get("segment_pool_id", (0, 0))) == tuple(pool.id)]
    res["pool_segments"] = len(segs)
    res["pool_segment_bytes"] = sum(int(s["total_size"]) for s in segs)
    lib_ = st.load_library(lib)
    owned = 0
    for s in segs:
        size = ctypes.c_size_t(0)
        lib_.dll.sublet_torch_base_alloc(ctypes.c_void_p(int(s["address"])), ctypes.byref(size))
        owned += 1 if size.value > 0 else 0
    res["pool_segments_in_sublet"] = owned
    res["outside_in_sublet"] = 0
    size = ctypes.c_size_t(0)
    lib_.dll.sublet_torch_base_alloc(ctypes.c_void_p(outside.data_ptr()), ctypes.byref(size))
    res["outside_in_sublet"] = 1 if size.value > 0 else 0
    def sublet_stats():
        return pick(st.memory_stats(0))

    res["sublet_with_pool"] = safe(sublet_stats)
    res["native_delta"] = delta(pick(torch.cuda.memory_stats(0)), native_before)
    del ts
    torch.cuda.synchronize()
    del pool  # releasePool, then PyTorch empties the pool: its segments go back to sublet
    import gc
    gc.collect()
    torch.cuda.synchronize()
    res["sublet_after_pool_deleted"] = safe(sublet_stats)
    res["sublet_empty_cache"] = safe(st.empty_cache, 0)
    res["sublet_after_empty_cache"] = safe(sublet_stats)
    res["sublet_last_error"] = safe(st.last_error)
    del outside
    return res


def child(argv):
    kind, lib = argv[0], (argv[1] or None) if len(argv) > 1 else None
    try:
        if kind == "mempool":
            res = child_mempool(lib)
        else:
            res = child_graph(kind.split("-", 1)[1], lib)
        res["ok"] = True
    except Exception as e:  # report, do not die silently
        import traceback
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e),
               "traceback": traceback.format_exc()[-2000:]}
    print("POOLS_JSON " + json.dumps(res))
    return 0


# ---- the parent -------------------------------------------------------------------------------------


def run_check(kind, lib, limit):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, lib or ""]
    try:
        r = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "timed out after %ds" % limit}
    for line in r.stdout.splitlines():
        if line.startswith("POOLS_JSON "):
            return json.loads(line[len("POOLS_JSON "):])
    return {"ok": False, "error": "exit status %d, no result" % r.returncode,
            "stderr": r.stderr[-2000:]}


def verdicts(results):
    """The claims, each True/False; a claim whose figures are missing is False."""
    v = {}
    gp, gs, mp = (results.get(k, {}) for k in ("graph-pytorch", "graph-sublet", "mempool"))
    phases = ("after_capture", "after_free", "after_reset", "after_empty_cache")
    if gp.get("ok") and gs.get("ok"):
        for phase in phases:
            v["graph %s deltas equal" % phase] = gp.get(phase) == gs.get(phase)
        v["graph replay ok (both)"] = bool(gp.get("replay_ok") and gs.get("replay_ok"))
    if gs.get("ok"):
        pool = gs.get("pool", {})
        got = pool.get("allocated_bytes.all.current")
        v["graph allocations in sublet's graph pool"] = (
            isinstance(got, int) and got > 0
            and got == gs.get("after_capture", {}).get("allocated_bytes.all.current"))
        v["graph pool forgotten after reset + empty_cache"] = (
            isinstance(got, int) and got > 0 and gs.get("pool_forgotten") is True)
    if mp.get("ok"):
        w = mp.get("sublet_with_pool", {})
        after = mp.get("sublet_after_pool_deleted", {})
        emptied = mp.get("sublet_after_empty_cache", {})
        n = mp.get("pool_segments", 0)
        v["mempool tensors ok"] = bool(mp.get("values_ok"))
        v["mempool segments are sublet blocks"] = n > 0 and mp.get("pool_segments_in_sublet") == n
        v["mempool: sublet holds exactly the pool's segments"] = (
            w.get("allocated_bytes.all.current") == mp.get("pool_segment_bytes")
            and w.get("allocation.all.current") == n)
        v["mempool: outside tensor not sublet's"] = mp.get("outside_in_sublet") == 0
        v["mempool: deleted pool's segments back to sublet"] = (
            after.get("allocated_bytes.all.current") == 0)
        v["mempool: sublet empty_cache releases them"] = (
            emptied.get("reserved_bytes.all.current") == 0)
    return v


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--lib", help="libsublet_torch.so (default: found by sublet.torch)")
    ap.add_argument("--limit", type=int, default=60, help="seconds per check")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for kind in ("graph-pytorch", "graph-sublet", "mempool"):
        res = run_check(kind, a.lib, a.limit)
        results[kind] = res
        if res.get("ok"):
            print("== %s" % kind)
            for k, val in res.items():
                if k not in ("ok", "traceback"):
                    print("  %s: %s" % (k, json.dumps(val)))
        else:
            print("== %s FAILED: %s" % (kind, res.get("error")))
            for k in ("traceback", "stderr"):
                if res.get(k):
                    print("  " + res[k].replace("\n", "\n  "))
    v = verdicts(results)
    print("== verdicts")
    for k, ok in v.items():
        print("  %-55s %s" % (k, "yes" if ok else "NO"))
    with open(os.path.join(a.out, "pools.json"), "w") as f:
        json.dump({"results": results, "verdicts": v}, f, indent=1)
    every = all(r.get("ok") for r in results.values()) and v and all(v.values())
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
