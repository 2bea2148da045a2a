#!/usr/bin/env python3
"""The differential test: every trace through sublet (`sublet replay`, settings
pytorch_version:2.6) and through PyTorch 2.6's own allocator (replay_torch), under a matrix of
settings, at the default device size and at tight ones around the smallest device that runs
the trace.  Peak and final reserved bytes, segment allocations and frees, retries and OOMs,
and the decisions and addresses that match the trace must be equal; on a trace recorded from
an empty allocator, under its own settings at the default size, every decision and address
must match the trace on both sides.  A mismatch prints the setting, the capacity and the
first row where the two differ (found by bisecting on --at).

  differential.py SUBLET REPLAY_TORCH TRACE.events.csv...   (exit 0 = all equal, 1 = not)
Environment: SUBLET_ORACLE_JOBS (parallel replays, default 2), SUBLET_ORACLE_TIGHT=0 (only
the default device size)."""
import concurrent.futures as cf
import threading
import json
import os
import subprocess
import sys
import time

MiB = 1 << 20
DEFAULT = 80 << 30
# (name, PYTORCH_CUDA_ALLOC_CONF, memory fraction or None)
MATRIX = [
    ("defaults", "", None),
    ("max_split 64", "max_split_size_mb:64", None),
    ("max_split 256", "max_split_size_mb:256", None),
    ("non_split_rounding 64", "max_non_split_rounding_mb:64", None),
    ("max_split 128 + non_split 256", "max_split_size_mb:128,max_non_split_rounding_mb:256", None),
    ("roundup 4", "roundup_power2_divisions:4", None),
    ("roundup list", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", None),
    ("gc 0.6, fraction 0.8", "garbage_collection_threshold:0.6", 0.8),
    ("gc 0.8, fraction 0.5", "garbage_collection_threshold:0.8", 0.5),
    ("gc 0.5, fraction 1.0", "garbage_collection_threshold:0.5", 1.0),
    ("expandable", "expandable_segments:True", None),
    ("expandable + roundup 4", "expandable_segments:True,roundup_power2_divisions:4", None),
    ("expandable + gc 0.6, fraction 0.9", "expandable_segments:True,garbage_collection_threshold:0.6", 0.9),
    ("max_split 64 + roundup 2 + gc 0.7, fraction 0.9",
     "max_split_size_mb:64,roundup_power2_divisions:2,garbage_collection_threshold:0.7", 0.9),
]
BISECTIONS = threading.Semaphore(5)  # bisect the first few mismatches only: each costs ~30 runs
FIELDS = ["peak_reserved_bytes", "final_reserved_bytes", "device_allocs", "device_frees",
          "alloc_retries", "ooms", "decisions_matched", "addresses_matched"]


def sublet_conf(conf, fraction):
    parts = ["pytorch_version:2.6"] + ([conf] if conf else [])
    if fraction is not None:
        parts.append("memory_fraction:%g" % fraction)
    return ",".join(parts)


def run_sublet(cli, trace, conf, fraction, cap, at=None, mincap=False):
    cmd = [cli, "replay", trace, "--json", "--prelude", "allocate", "--conf",
           sublet_conf(conf, fraction), "--device-memory", str(cap)]
    if at is not None:
        cmd += ["--at", str(at)]
    if mincap:
        cmd += ["--min-capacity"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1) or not p.stdout.strip():
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    d = json.loads(p.stdout)
    if mincap:
        return d
    f = d.get("fidelity") or {}
    out = {k: d.get(k) for k in FIELDS[:6]}
    out["decisions_matched"] = f.get("decisions_matched")
    out["addresses_matched"] = f.get("addresses_matched")
    out["allocs"] = f.get("allocs_compared")
    return out


def run_torch(oracle, trace, conf, fraction, cap, at=None):
    cmd = [oracle, trace, "--capacity", str(cap)]
    if fraction is not None:
        cmd += ["--fraction", repr(fraction)]
    if at is not None:
        cmd += ["--at", str(at)]
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
    env.pop("PYTORCH_ALLOC_CONF", None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)


# Under expandable segments PyTorch 2.6 counts no segment (its `segment` stat stays 0), so
# replay_torch's segment counts and its decisions (read off that stat) say nothing there; the
# reserved bytes, retries and OOMs are compared.
EXPANDABLE_FIELDS = ["peak_reserved_bytes", "final_reserved_bytes", "alloc_retries", "ooms"]


def differs(a, b, conf="", cap=DEFAULT):
    fields = EXPANDABLE_FIELDS if "expandable_segments:True" in conf else FIELDS
    if cap != DEFAULT:
        # on a tight device a segment cannot always go to its recorded address; where it goes
        # then is the device's choice (the fake's first fit, sublet's simulator), not the
        # allocator's: only the default size compares addresses
        fields = [k for k in fields if k != "addresses_matched"]
    return [k for k in fields if a.get(k) != b.get(k)]


def first_row(cli, oracle, trace, conf, fraction, cap, nrows):
    """The smallest N such that the replays stopped after row N differ (bisection)."""
    lo, hi = 0, nrows - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if differs(run_sublet(cli, trace, conf, fraction, cap, mid),
                   run_torch(oracle, trace, conf, fraction, cap, mid), conf, cap):
            hi = mid
        else:
            lo = mid + 1
    return lo


def compare(cli, oracle, trace, rows, setting, cap, from_empty):
    name, conf, fraction = setting
    s = run_sublet(cli, trace, conf, fraction, cap)
    t = run_torch(oracle, trace, conf, fraction, cap)
    bad = differs(s, t, conf, cap)
    if from_empty and cap == DEFAULT and conf == "" and fraction is None:
        for side, d, n in (("sublet", s, s["allocs"]), ("PyTorch", t, t["allocs"])):
            if d["decisions_matched"] != n or d["addresses_matched"] != n:
                bad.append("%s matches %s/%s decisions, %s/%s addresses of the trace" % (
                    side, d["decisions_matched"], n, d["addresses_matched"], n))
    if not bad:
        return None
    msg = ["MISMATCH %s | setting '%s' (%s) | capacity %d | %s" % (
        os.path.basename(trace), name, sublet_conf(conf, fraction), cap, ", ".join(bad))]
    msg.append("  sublet:  " + json.dumps({k: s.get(k) for k in FIELDS}))
    msg.append("  PyTorch: " + json.dumps({k: t.get(k) for k in FIELDS}))
    if any(k in FIELDS for k in bad) and BISECTIONS.acquire(blocking=False):
        n = first_row(cli, oracle, trace, conf, fraction, cap, len(rows))
        msg.append("  first differing row: %d (sublet replay --at %d): %s" % (n, n, rows[n]))
    return "\n".join(msg)


def main():
    cli, oracle, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    jobs = int(os.environ.get("SUBLET_ORACLE_JOBS", "2"))
    tight = os.environ.get("SUBLET_ORACLE_TIGHT", "1") != "0"
    start = time.time()
    pool = cf.ThreadPoolExecutor(jobs)
    work, errors = [], []
    for trace in traces:
        with open(trace) as f:
            rows = [l.rstrip("\n") for l in f][1:]
        # a PyTorch recording from an empty allocator: no prelude, and the segment rows that
        # show PyTorch's decisions (a synthetic trace without them, such as
        # tests/data/nonmonotone.events.csv, is held to the figures alone)
        actions = {r.split(",")[1] for r in rows if "," in r}
        from_empty = not actions & {"pre_alloc", "pre_segment"} and "segment_alloc" in actions
        caps = {}
        if tight:
            futs = {st: pool.submit(run_sublet, cli, trace, st[1], st[2], DEFAULT, None, True)
                    for st in MATRIX}
            for st, fu in futs.items():
                try:
                    m = fu.result()["min_capacity_bytes"]
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append("%s | %s | min capacity: %s" % (os.path.basename(trace), st[0], e))
                    continue
                caps[st] = [c for c in (m - 64 * MiB, m - 2 * MiB, m, m + 2 * MiB) if c > 0]
        for st in MATRIX:
            for cap in [DEFAULT] + caps.get(st, []):
                work.append(((trace, st[0], cap),
                             pool.submit(compare, cli, oracle, trace, rows, st, cap, from_empty)))
    mismatches = 0
    for key, fu in work:
        try:
            r = fu.result()
        except Exception as e:  # noqa: BLE001 - a failed run is a failure of the test
            errors.append("%s | %s | capacity %d: %s" % (os.path.basename(key[0]), key[1], key[2], e))
            continue
        if r:
            mismatches += 1
            print(r)
    for e in errors:
        print("ERROR " + e)
    n = len(work)
    print("oracle: %d traces x %d settings, %d comparisons (default size and %s), %d equal, "
          "%d mismatches, %d errors, %.0f s" % (
              len(traces), len(MATRIX), n, "4 tight sizes each" if tight else "no tight sizes",
              n - mismatches - len([e for e in errors if "min capacity" not in e]),
              mismatches, len(errors), time.time() - start))
    return 1 if mismatches or errors else 0


if __name__ == "__main__":
    sys.exit(main())
