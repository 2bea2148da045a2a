#!/usr/bin/env python3
"""Run the workload (workload.py) once with PyTorch's allocator and once with
sublet installed, each in its own process, and compare: the losses must be
equal to the bit; the memory statistics are compared key by key.

    python3 scripts/gpu/train_compare.py OUT_DIR [--steps N] [--lib PATH]

Writes OUT_DIR/pytorch.json, OUT_DIR/sublet.json and OUT_DIR/compare.json,
prints a short report; exit status 0 when the losses match, 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Statistics both allocators report with PyTorch's meaning.
KEYS = [
    "allocated_bytes.all.peak",
    "allocated_bytes.all.allocated",
    "allocated_bytes.all.current",
    "active_bytes.all.peak",
    "requested_bytes.all.peak",
    "reserved_bytes.all.peak",
    "reserved_bytes.all.current",
    "inactive_split_bytes.all.peak",
    "allocation.all.allocated",
    "allocation.all.peak",
    "segment.all.peak",
    "segment.all.allocated",
    "segment.all.current",
    "segment.small_pool.peak",
    "segment.large_pool.peak",
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
    "num_device_free",
    "num_sync_all_streams",
    "oversize_allocations.peak",
]


def clean_env():
    env = dict(os.environ)
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "SUBLET_ALLOC_CONF"):
        env.pop(k, None)
    return env


def run(allocator, out_dir, steps, lib):
    path = os.path.join(out_dir, allocator + ".json")
    cmd = [sys.executable, os.path.join(HERE, "workload.py"), "--allocator", allocator,
           "--out", path, "--steps", str(steps)]
    if lib:
        cmd += ["--lib", lib]
    r = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True)
    with open(os.path.join(out_dir, allocator + ".log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit("workload with %s failed (exit %d):\n%s" % (allocator, r.returncode, r.stderr[-3000:]))
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lib")
    a = ap.parse_args(argv)
    os.makedirs(a.out_dir, exist_ok=True)
    base = run("pytorch", a.out_dir, a.steps, a.lib)
    mine = run("sublet", a.out_dir, a.steps, a.lib)
    same = base["losses_hex"] == mine["losses_hex"]
    first_diff = next((i for i, (x, y) in enumerate(zip(base["losses_hex"], mine["losses_hex"])) if x != y), None)
    rows = []
    for k in KEYS:
        b, m = base["stats"].get(k), mine["stats"].get(k)
        rows.append({"key": k, "pytorch": b, "sublet": m, "equal": b == m})
    result = {
        "losses_bitwise_equal": same,
        "first_loss_difference": first_diff,
        "steps": a.steps,
        "final_loss": {"pytorch": base["losses"][-1], "sublet": mine["losses"][-1]},
        "wall_s": {"pytorch": base["wall_s"], "sublet": mine["wall_s"]},
        "stats": rows,
        "stats_equal": sum(r["equal"] for r in rows if r["pytorch"] is not None),
        "stats_compared": sum(1 for r in rows if r["pytorch"] is not None),
        "device": base["device"],
        "torch": base["torch"],
        "cuda": base["cuda"],
    }
    with open(os.path.join(a.out_dir, "compare.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("losses over %d steps: %s (final %r vs %r)" % (
        a.steps, "bitwise equal" if same else "DIFFERENT from step %s" % first_diff,
        base["losses"][-1], mine["losses"][-1]))
    print("memory stats equal: %d of %d" % (result["stats_equal"], result["stats_compared"]))
    for r in rows:
        if r["pytorch"] is not None:
            print("  %-34s %14s %14s %s" % (r["key"], r["pytorch"], r["sublet"], "" if r["equal"] else "DIFF"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
