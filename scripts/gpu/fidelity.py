#!/usr/bin/env python3
"""Ground truth for settings: record PyTorch's own memory history of the
workload under several allocator settings, replay each recording through
sublet under the same settings, and report per-event fidelity.

    python3 scripts/gpu/fidelity.py OUT_DIR --cli build/sublet [--steps N]

Settings: the default; max_split_size_mb:128; roundup_power2_divisions:4;
expandable_segments:True; and a per-process memory fraction (set with
torch.cuda.set_per_process_memory_fraction, chosen as 1.5 x the default run's
peak allocated bytes over the device's total memory) with
garbage_collection_threshold:0.6.  Each recording runs in its own process
(PyTorch reads PYTORCH_CUDA_ALLOC_CONF once); the replay is
`sublet replay SNAPSHOT --json --conf CONF --device-memory TOTAL`.

Writes OUT_DIR/<name>.pickle (PyTorch's snapshot), OUT_DIR/<name>.replay.json
(sublet's report) and OUT_DIR/fidelity.json (one row per setting); prints a
table.  A replay sublet refuses (e.g. a recording that began mid-run under
expandable segments) is reported with its reason, not hidden.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def record(out_dir, name, conf, steps, fraction=None):
    env = dict(os.environ)
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "SUBLET_ALLOC_CONF"):
        env.pop(k, None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    snap = os.path.join(out_dir, name + ".pickle")
    run_json = os.path.join(out_dir, name + ".run.json")
    cmd = [sys.executable, os.path.join(HERE, "workload.py"), "--allocator", "pytorch",
           "--out", run_json, "--steps", str(steps), "--record", snap]
    if fraction is not None:
        cmd += ["--fraction", "%.6f" % fraction]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with open(os.path.join(out_dir, name + ".record.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        return None, "recording failed (exit %d): %s" % (r.returncode, r.stderr.strip()[-500:])
    with open(run_json) as f:
        return json.load(f), None


def replay(cli, out_dir, name, conf, total):
    snap = os.path.join(out_dir, name + ".pickle")
    cmd = [cli, "replay", snap, "--json", "--device-memory", str(total), "--conf", conf]
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(out_dir, name + ".replay.json"), "w") as f:
        f.write(r.stdout)
    with open(os.path.join(out_dir, name + ".replay.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stderr)
    try:
        return json.loads(r.stdout), None if r.returncode == 0 else r.stderr.strip()[-500:]
    except ValueError:
        return None, "replay failed (exit %d): %s" % (r.returncode, r.stderr.strip()[-500:])


def ratio(n, d):
    return None if not d else n / d


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--cli", required=True, help="the sublet command-line tool")
    ap.add_argument("--steps", type=int, default=24)
    a = ap.parse_args(argv)
    os.makedirs(a.out_dir, exist_ok=True)

    settings = [
        ("default", "", None),
        ("max_split_128", "max_split_size_mb:128", None),
        ("roundup_pow2_4", "roundup_power2_divisions:4", None),
        ("expandable", "expandable_segments:True", None),
        ("fraction_gc_0.6", "garbage_collection_threshold:0.6", "fraction"),
    ]
    rows = []
    base_run = None
    for name, conf, special in settings:
        fraction = None
        replay_conf = conf
        if special == "fraction":
            if base_run is None:
                rows.append({"setting": name, "error": "no default run to size the fraction"})
                continue
            peak = base_run["stats"].get("allocated_bytes.all.peak", 0)
            total = base_run["total_memory"]
            fraction = min(0.95, max(1e-4, 1.5 * peak / total))
            # sublet reads the fraction from its settings (PyTorch's option of
            # the same name); PyTorch got it through the API call.
            replay_conf = "%s,per_process_memory_fraction:%.6f" % (conf, fraction)
        run, err = record(a.out_dir, name, conf, a.steps, fraction)
        row = {"setting": name, "pytorch_conf": conf, "replay_conf": replay_conf, "fraction": fraction}
        if err:
            row["error"] = err
            rows.append(row)
            continue
        if name == "default":
            base_run = run
        rep, err = replay(a.cli, a.out_dir, name, replay_conf or "", run["total_memory"])
        if rep is None:
            row["error"] = err
            rows.append(row)
            continue
        f = rep.get("fidelity", {})
        n = f.get("allocs_compared", 0)
        row.update({
            "events": rep.get("events"),
            "allocs_compared": n,
            "decisions_matched": f.get("decisions_matched"),
            "decision_fidelity": ratio(f.get("decisions_matched", 0), n),
            "addresses_matched": f.get("addresses_matched"),
            "address_fidelity": ratio(f.get("addresses_matched", 0), n),
            "segment_sizes_matched": f.get("segment_sizes_matched"),
            "recorded_segment_allocs": f.get("recorded_segment_allocs"),
            "engine_segment_allocs": f.get("engine_segment_allocs"),
            "map_sizes_matched": f.get("map_sizes_matched"),
            "recorded_segment_maps": f.get("recorded_segment_maps"),
            "engine_segment_maps": f.get("engine_segment_maps"),
            "empty_caches_compared": f.get("empty_caches_compared"),
            "empty_cache_sets_matched": f.get("empty_cache_sets_matched"),
            "first_empty_cache_mismatch": f.get("first_empty_cache_mismatch"),
            "recorded_peak_reserved_bytes": f.get("recorded_peak_reserved_bytes"),
            "replayed_peak_reserved_bytes": rep.get("peak_reserved_bytes"),
            "first_decision_mismatch": f.get("first_decision_mismatch"),
            "first_address_mismatch": f.get("first_address_mismatch"),
            "replay_errors": rep.get("errors"),
            "replay_error": rep.get("error") or err,
            "pytorch_peak_reserved": run["stats"].get("reserved_bytes.all.peak"),
            "pytorch_num_alloc_retries": run["stats"].get("num_alloc_retries"),
        })
        rows.append(row)
    with open(os.path.join(a.out_dir, "fidelity.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print("%-16s %8s %10s %10s %16s %16s  %s" % ("setting", "allocs", "decisions", "addresses",
                                                 "peak reserved PT", "peak reserved sl", "note"))
    for r in rows:
        if "allocs_compared" not in r:
            print("%-16s %s" % (r["setting"], r.get("error")))
            continue
        pct = lambda v: "-" if v is None else "%.2f%%" % (100 * v)
        print("%-16s %8s %10s %10s %16s %16s  %s" % (
            r["setting"], r["allocs_compared"], pct(r["decision_fidelity"]), pct(r["address_fidelity"]),
            r["recorded_peak_reserved_bytes"], r["replayed_peak_reserved_bytes"],
            r.get("replay_error") or ""))
    # A recording that failed is a failure of the check; a replay sublet
    # refuses (with its reason) is a result.
    not_recorded = [r for r in rows if "allocs_compared" not in r and
                    not str(r.get("error", "")).startswith("replay")]
    return 1 if not_recorded else 0


if __name__ == "__main__":
    sys.exit(main())
