#!/usr/bin/env python3
"""sublet's drop-ins under a real PyTorch on the null device (issue 28, point 4):
the randomized programs of program.py run twice in the same settings, once
with PyTorch's own allocator and once with a sublet drop-in, and their
memory_stats() must be equal, key by key.

  dropin.py --sublet SUBLET --python PY --mode MODE [--programs N] [--jobs J]

MODE:
  install   sublet.torch.install(): sublet is PyTorch's allocator
            (CUDAPluggableAllocator, sublet's cuda backend on the null device's
            driver API); graph captures go through the pool hooks.  Compared:
            sublet.torch.memory_stats() with PyTorch's torch.cuda.memory_stats().
  mempool   sublet.torch.MemPool() under use_mem_pool (PyTorch's allocator keeps
            the pool; its segments come from sublet) against torch.cuda.MemPool():
            torch.cuda.memory_stats() of both.
  preload   libsublet_preload.so serves PyTorch's cudaMalloc/cudaFree: PyTorch's
            memory_stats() with and without it.
Exit 0 when every program agrees, 1 when one differs, 2 when one cannot run."""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import differential as D  # noqa: E402  (the matrix and its plan)

REPO = os.path.dirname(os.path.dirname(HERE))
# an empty_cache that frees nothing syncs PyTorch's streams; sublet's drop-in
# counts only its own (memory_stats' num_sync_all_streams): compared in preload/mempool modes only
SKIP = {"install": {"num_sync_all_streams"}, "mempool": set(), "preload": set()}
# keys of PyTorch's memory_stats() that sublet does not report (docs/versions.md says why)
NOT_REPORTED = {"num_oom_rejections"}
# A difference the test names on its own, and fails on (docs/nullgpu.md): when
# one process_events finishes deferred frees of several streams whose blocks
# neighbour, PyTorch gives them back in the order of its hash map of streams,
# and sublet's engine must walk them the same way (sublet_set_stream_key): in
# another order the same blocks merge the same, but a block that was an
# inactive split for a moment in one order is not in the other, and only
# these counters differ.
ORDER_KEYS = ("inactive_split.", "inactive_split_bytes.")


def order_only(diffs_keys, ops):
    return (ops.get("record_stream", 0) > 0 and diffs_keys and
            all(k.startswith(ORDER_KEYS) and k.endswith((".allocated", ".freed")) for k in diffs_keys))


def jobs_for(a, i, work, side):
    """(argv, env) of program i for one side ("ref" or "sub") of the comparison."""
    name, conf, fraction, size, flags = D.plan(i)
    flags = [f for f in flags if f != "--oom"]  # a pluggable allocator has no OOM error channel
    if "--mempool" in flags:
        k = flags.index("--mempool")
        del flags[k:k + 2]
    if a.mode == "mempool":
        flags += ["--mempool", "sublet" if side == "sub" else "torch"]
    if a.mode == "install" and side == "sub":
        flags.append("--dropin")
    argv = ["--seed", str(i), "--out", os.path.join(work, "%s%04d" % (side, i)), "--ops", str(a.ops)] + flags
    if fraction is not None:
        argv += ["--fraction", str(fraction)]
    env = {"PYTORCH_CUDA_ALLOC_CONF": conf, "SUBLET_NULLGPU_MEMORY": str(size),
           "SUBLET_ALLOC_CONF": ",".join(["pytorch_version:%s" % a.version] + ([conf] if conf else []))}
    return {"argv": argv, "env": env}


def run_side(a, work, side, k, indices):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), SUBLET_TORCH_LIB=a.torch_lib)
    for v in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "SUBLET_ALLOC_CONF"):
        env.pop(v, None)
    if a.mode == "preload" and side == "sub":
        env["LD_PRELOAD"] = a.preload_lib
        env["SUBLET_PRELOAD_FREE_SYNC"] = "0"
    return D.run_jobs(a, os.path.join(work, "%s-batch%d.json" % (side, k)), indices,
                      [jobs_for(a, i, work, side) for i in indices], env)


def compare(a, i, work, ran):
    out = {"i": i, "diffs": []}
    for side in ("ref", "sub"):
        code, err = ran[side][i]
        if code != 0:
            out["error"] = "%s run failed (%d): %s" % (side, code, err.strip()[-3000:])
            return out
    ref = json.load(open(os.path.join(work, "ref%04d" % i, "result.json")))
    sub = json.load(open(os.path.join(work, "sub%04d" % i, "result.json")))
    keys = sorted(set(ref["memory_stats"]) & set(sub["memory_stats"]))
    out["keys"] = len(keys)
    missing = sorted(k for k in ref["memory_stats"] if k not in sub["memory_stats"] and k not in NOT_REPORTED
                     and not k.startswith("reserved_bytes_by_private_pools"))
    if a.mode == "install" and missing:
        out["diffs"].append("keys PyTorch has and sublet lacks: %s" % ", ".join(missing[:8]))
    differing = [k for k in keys if k not in SKIP[a.mode] and ref["memory_stats"][k] != sub["memory_stats"][k]]
    out["ops"] = ref["ops"]
    if a.mode == "install" and not out["diffs"] and order_only(differing, ref["ops"]):
        out["order_only"] = True
        return out
    for k in differing:
        out["diffs"].append("%s: PyTorch %s, %s %s" % (k, ref["memory_stats"][k], a.mode, sub["memory_stats"][k]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sublet", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--mode", choices=["install", "mempool", "preload"], required=True)
    ap.add_argument("--programs", type=int, default=28)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--ops", type=int, default=150)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--version", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    bindir = os.path.dirname(os.path.abspath(a.sublet))
    a.torch_lib = os.path.join(bindir, "libsublet_torch.so")
    a.preload_lib = os.path.join(bindir, "libsublet_preload.so")
    if a.version is None:
        v = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                           text=True, check=True).stdout.strip()
        a.version = ".".join(v.split("+")[0].split(".")[:2])
    work = a.out or tempfile.mkdtemp(prefix="sublet-dropin-")
    os.makedirs(work, exist_ok=True)
    indices = list(range(a.first, a.first + a.programs))
    if a.mode == "mempool":
        # PyTorch gives a MemPool with an allocator of its own (sublet's) plain segments from that
        # allocator even under expandable_segments, and a torch.cuda.MemPool expandable ones: the
        # two are different programs there, not one program on two allocators.
        skipped = [i for i in indices if "expandable_segments:True" in D.plan(i)[1]]
        if skipped:
            print("mempool: programs %s not compared: under expandable_segments PyTorch maps a "
                  "torch.cuda.MemPool's pages but asks sublet.torch.MemPool's allocator for whole segments"
                  % ", ".join(map(str, skipped)))
        indices = [i for i in indices if i not in skipped]
    ran = {"ref": {}, "sub": {}}
    tasks = [(side, k, indices[k::a.jobs]) for side in ("ref", "sub") for k in range(a.jobs)]
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for (side, _, _), part in zip(tasks, ex.map(lambda t: run_side(a, work, *t), tasks)):
            ran[side].update(part)
    results = [compare(a, i, work, ran) for i in indices]
    bad = [r for r in results if r.get("diffs")]
    errors = [r for r in results if r.get("error")]
    for r in bad + errors:
        name, conf, fraction, size, flags = D.plan(r["i"])
        print("program %d (%s, %d GiB): %s" % (r["i"], name, size >> 30, r.get("error") or "\n  ".join(r["diffs"][:12])))
    keys = sum(r.get("keys", 0) for r in results)
    order = [r["i"] for r in results if r.get("order_only")]
    if order:
        print("%s: programs %s differ only in inactive_split allocated/freed counts: the order in which one "
              "process_events gives back neighbouring blocks of several streams (docs/nullgpu.md)"
              % (a.mode, ", ".join(map(str, order))))
    graphs = sum(r.get("ops", {}).get("graph", 0) for r in results)
    pools = sum(r.get("ops", {}).get("pool", 0) for r in results)
    print("%s: %d programs, %d equal, %d differ, %d failed to run; %d memory_stats values compared, "
          "%d graph captures, %d MemPools" % (a.mode, len(results), len(results) - len(bad) - len(errors) - len(order),
                                            len(bad), len(errors), keys, graphs, pools))
    with open(os.path.join(work, "summary-%s.json" % a.mode), "w") as f:
        json.dump({"mode": a.mode, "programs": len(results), "equal": len(results) - len(bad) - len(errors) - len(order),
                   "order_only": len(order), "differ": len(bad), "failed": len(errors), "values": keys, "graphs": graphs, "mempools": pools}, f)
    return 2 if errors else 1 if bad or order else 0


if __name__ == "__main__":
    sys.exit(main())
