#!/usr/bin/env python3
"""The newest PyTorch as a second oracle: randomized programs (program.py) run in
a real PyTorch on the null device (`sublet nullgpu`) under PyTorch's own
allocator, then each recorded snapshot is replayed by sublet under
`pytorch_version:` that release, the same settings and the same device size.
Every decision and address, every segment allocation and release, every OOM
(and its message), the peaks and each pool must agree, and so must every
`torch.cuda.memory_stats()` key that sublet keeps.

  differential.py --sublet SUBLET --python PY [--programs N] [--first K] [--jobs J]
                  [--out DIR] [--version X.Y] [--quiet]

Program i runs setting MATRIX[i % len(MATRIX)] on the device size
SIZES[(i // len(MATRIX)) % len(SIZES)], with seed i; every third program makes
allocations that cannot fit (OOMs), programs capture CUDA graphs and use
MemPools by turns.  Prints one line per mismatching program and a table;
exit 0 when all agree, 1 when not, 2 when a program could not run."""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GiB = 1 << 30

def _oracle_matrix():
    """The 2.6 oracle's matrix of settings (tests/oracle/differential.py): one list for both."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("oracle_differential",
                                                  os.path.join(os.path.dirname(HERE), "oracle", "differential.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MATRIX


# (name, PYTORCH_CUDA_ALLOC_CONF, memory fraction or None)
MATRIX = _oracle_matrix()

SIZES = [8 * GiB, 24 * GiB, 80 * GiB, 2 * GiB]
# where the null device's address range starts (plugins/nullgpu/device.c)
NULLGPU_BASE = "0x200000000000"
# keys of memory_stats() whose value is not the allocator's alone
STATS_SKIP = {"num_sync_all_streams"}
NVML_SENTENCE = re.compile(r"Including non-PyTorch memory, this process has [0-9.]+ [KMGT]?i?B memory in use\. ")


def plan(i):
    name, conf, fraction = MATRIX[i % len(MATRIX)]
    size = SIZES[(i // len(MATRIX)) % len(SIZES)]
    flags = []
    if i % 3 == 0:
        flags.append("--oom")
    if i % 2 == 0:
        flags.append("--graphs")
    flags += ["--mempool", ["torch", "none", "torch"][i % 3]]
    return name, conf, fraction, size, flags


def sublet_conf(version, conf, fraction):
    parts = ["pytorch_version:%s" % version] + ([conf] if conf else [])
    if fraction is not None:
        parts.append("memory_fraction:%g" % fraction)
    return ",".join(parts)


def program_job(a, i, work):
    """Program i's arguments and environment for program.py --batch."""
    name, conf, fraction, size, flags = plan(i)
    if a.no_pools:
        flags = [f for f in flags if f != "--graphs"]
        if "--mempool" in flags:
            k = flags.index("--mempool")
            del flags[k:k + 2]
    argv = ["--seed", str(i), "--out", os.path.join(work, "p%04d" % i), "--ops", str(a.ops)] + flags
    if fraction is not None:
        argv += ["--fraction", str(fraction)]
    return {"argv": argv, "env": {"PYTORCH_CUDA_ALLOC_CONF": conf, "SUBLET_NULLGPU_MEMORY": str(size)}}


def run_jobs(a, path, indices, jobs, env):
    """Programs `indices` (their program.py --batch entries `jobs`) in one process on the null
    device, with environment `env`: {i: (exit code, the process's stderr)}."""
    with open(path, "w") as f:
        json.dump(jobs, f)
    p = subprocess.run([a.sublet, "nullgpu", "--", a.python, os.path.join(HERE, "program.py"), "--batch", path],
                       env=env, capture_output=True, text=True, timeout=3600)
    codes = {}
    for line in p.stdout.splitlines():
        j, code = line.split()
        codes[indices[int(j)]] = int(code)
    return {i: (codes.get(i, p.returncode or -1), p.stderr) for i in indices}


def run_batch(a, work, k, indices):
    env = dict(os.environ)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    return run_jobs(a, os.path.join(work, "batch%d.json" % k), indices,
                    [program_job(a, i, work) for i in indices], env)


def replay_program(a, i, work, code, stderr):
    name, conf, fraction, size, flags = plan(i)
    out = os.path.join(work, "p%04d" % i)
    if code != 0:
        return {"i": i, "name": name, "size": size, "error": "program failed (%d): %s" % (code, stderr.strip()[-3000:])}
    with open(os.path.join(out, "result.json")) as f:
        res = json.load(f)
    # the null device's addresses start at NULLGPU_BASE: what no row places (a failed
    # request's reservation) is placed by the replay as the null device placed it
    rc = subprocess.run([a.sublet, "replay", os.path.join(out, "snapshot.pickle"), "--json", "--replay-ooms",
                         "--device-memory", str(size), "--device-base", NULLGPU_BASE,
                         "--conf", sublet_conf(a.version, conf, fraction)],
                        capture_output=True, text=True, timeout=600)
    if rc.returncode not in (0, 1) or not rc.stdout.strip():
        return {"i": i, "name": name, "size": size, "error": "sublet replay failed (%d): %s" % (
            rc.returncode, rc.stderr.strip()[-2000:])}
    rep = json.loads(rc.stdout)
    return {"i": i, "name": name, "size": size, "res": res, "rep": rep,
            "diffs": compare(res, rep), "unstable": stderr_gaps(stderr)}


def stderr_gaps(text):
    """The calls the null device named as not emulated."""
    return sorted(set(re.findall(r"sublet nullgpu: .* call (\S+) is not emulated", text)))


def compare(res, rep):
    """Every difference between PyTorch's run and sublet's replay, as text."""
    d = []
    f = rep["fidelity"]
    if rep.get("errors"):
        d.append("replay errors: %s" % rep.get("first_error"))
    pairs = [("decisions_matched", "allocs_compared"), ("addresses_matched", "allocs_compared"),
             ("engine_segment_allocs", "recorded_segment_allocs"),
             ("engine_segment_frees", "recorded_segment_frees"),
             ("engine_segment_maps", "recorded_segment_maps"),
             ("map_sizes_matched", "recorded_segment_maps"),
             ("maps_placed_as_recorded", "recorded_segment_maps"),
             ("engine_segment_unmaps", "recorded_segment_unmaps"),
             ("empty_cache_sets_matched", "empty_caches_compared"),
             ("ooms_matched", "recorded_ooms")]
    for got, want in pairs:
        if f[got] != f[want]:
            d.append("%s %d != %s %d" % (got, f[got], want, f[want]))
    if rep["peak_reserved_bytes"] != f["recorded_peak_reserved_bytes"]:
        d.append("peak reserved %d != recorded %d" % (rep["peak_reserved_bytes"], f["recorded_peak_reserved_bytes"]))
    if rep["final_reserved_bytes"] != f["recorded_final_reserved_bytes"]:
        d.append("final reserved %d != recorded %d" % (rep["final_reserved_bytes"], f["recorded_final_reserved_bytes"]))
    for pool in f.get("pools", []):
        for got, want in [("decisions_matched", "allocs_compared"), ("addresses_matched", "allocs_compared"),
                          ("engine_segment_allocs", "recorded_segment_allocs")]:
            if pool[got] != pool[want]:
                d.append("pool %s: %s %d != %s %d" % (tuple(pool["pool_id"]), got, pool[got], want, pool[want]))
    torch_stats = res["memory_stats"]
    for k, v in sorted(rep["memory_stats_at_end"].items()):
        if k in STATS_SKIP or k not in torch_stats:
            continue
        if torch_stats[k] != v:
            d.append("memory_stats[%s]: PyTorch %s, sublet %s" % (k, torch_stats[k], v))
    theirs = [NVML_SENTENCE.sub("", m) for m in res["ooms"]]
    ours = [o["message"].split("\nsublet:")[0] for o in rep["oom_events"]]
    if len(theirs) != len(ours):
        d.append("OOMs: PyTorch %d, sublet %d" % (len(theirs), len(ours)))
    for j, (t, o) in enumerate(zip(theirs, ours)):
        if t != o:
            d.append("OOM %d text:\n  PyTorch: %s\n  sublet:  %s" % (j, t, o))
            break
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sublet", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--ops", type=int, default=150)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--version", default=None, help="the release's pytorch_version (default: the installed one)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--no-pools", action="store_true",
                    help="no graph captures or MemPools: for releases before 2.14, whose snapshots give "
                         "no pool id on each entry, so that a pool deleted before the end cannot be told")
    a = ap.parse_args()
    if a.version is None:
        v = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                           text=True, check=True).stdout.strip()
        a.version = ".".join(v.split("+")[0].split(".")[:2])
    work = a.out or tempfile.mkdtemp(prefix="sublet-torch-diff-")
    os.makedirs(work, exist_ok=True)
    results = []
    indices = list(range(a.first, a.first + a.programs))
    batches = [indices[k::a.jobs] for k in range(a.jobs)]
    ran = {}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for part in ex.map(lambda kb: run_batch(a, work, kb[0], kb[1]), enumerate(batches)):
            ran.update(part)
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(replay_program, a, i, work, ran[i][0], ran[i][1]) for i in indices]
        for fu in cf.as_completed(futs):
            r = fu.result()
            results.append(r)
            if r.get("error") or r.get("diffs"):
                print("program %d (%s, %d GiB): %s" % (r["i"], r["name"], r["size"] // GiB,
                      r.get("error") or "\n  ".join(r["diffs"])), flush=True)
    results.sort(key=lambda r: r["i"])
    errors = [r for r in results if r.get("error")]
    bad = [r for r in results if r.get("diffs")]
    tot = {"allocs": 0, "decisions": 0, "addresses": 0, "segments": 0, "ooms": 0, "pools": 0, "stats_keys": 0}
    gaps = set()
    for r in results:
        if r.get("error"):
            continue
        f = r["rep"]["fidelity"]
        tot["allocs"] += f["allocs_compared"]
        tot["decisions"] += f["decisions_matched"]
        tot["addresses"] += f["addresses_matched"]
        tot["segments"] += f["recorded_segment_allocs"] + f["recorded_segment_maps"]
        tot["ooms"] += f["recorded_ooms"]
        tot["pools"] += sum(1 for p in f.get("pools", []) if p["kind"] != "default")
        tot["stats_keys"] += sum(1 for k in r["rep"]["memory_stats_at_end"] if k in r["res"]["memory_stats"])
        gaps.update(r["unstable"])
    torch_version = next((r["res"]["torch"] for r in results if not r.get("error")), "?")
    print("torch %s (pytorch_version:%s) on the null device: %d programs, %d equal, %d differ, %d failed to run"
          % (torch_version, a.version, len(results), len(results) - len(bad) - len(errors), len(bad), len(errors)))
    print("  allocs %d (decisions equal %d, addresses equal %d), segments %d, OOMs %d, private pools %d, "
          "memory_stats values compared %d" % (tot["allocs"], tot["decisions"], tot["addresses"], tot["segments"],
                                               tot["ooms"], tot["pools"], tot["stats_keys"]))
    if gaps:
        print("  calls not emulated that the programs made: %s" % ", ".join(sorted(gaps)))
    per = {}
    for r in results:
        name = r["name"]
        row = per.setdefault(name, {"programs": 0, "equal": 0, "allocs": 0, "ooms": 0, "pools": 0})
        row["programs"] += 1
        if not r.get("error") and not r.get("diffs"):
            row["equal"] += 1
        if not r.get("error"):
            f = r["rep"]["fidelity"]
            row["allocs"] += f["allocs_compared"]
            row["ooms"] += f["recorded_ooms"]
            row["pools"] += sum(1 for p in f.get("pools", []) if p["kind"] != "default")
    print("  | setting | programs equal | allocs | OOMs | private pools |")
    print("  |---|---:|---:|---:|---:|")
    for name, _, _ in MATRIX:
        if name in per:
            row = per[name]
            print("  | %s | %d / %d | %d | %d | %d |" % (name, row["equal"], row["programs"], row["allocs"],
                                                       row["ooms"], row["pools"]))
    summary = {"torch": torch_version, "pytorch_version": a.version, "programs": len(results),
               "equal": len(results) - len(bad) - len(errors), "differ": len(bad), "failed": len(errors),
               "totals": tot, "not_emulated": sorted(gaps), "per_setting": per}
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if errors:
        return 2
    return 1 if bad or gaps else 0


if __name__ == "__main__":
    sys.exit(main())
