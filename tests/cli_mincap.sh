#!/usr/bin/env bash
# sublet — `sublet mincap`: the min-capacity report (text and JSON) on the
# committed attention trace under PyTorch's default, expandable_segments and
# policy:stitch, and the exit codes (2 = usage, 1 = error).  $1 is the CLI.
set -u
cli=${1:?usage: cli_mincap.sh PATH_TO_SUBLET}
data=${SUBLET_TESTDATA:-$(dirname "$0")/data}
trace=$data/cs336_attention_microbench.events.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$trace" ] || { echo "no test trace at $trace" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }

# text: the figures of docs/policies.md for this trace
"$cli" mincap "$trace" >"$tmp/out.txt" 2>"$tmp/err" || fail "text exit code: $(cat "$tmp/err")"
grep -q '^min capacity: *3781165056 bytes' "$tmp/out.txt" || fail "default min capacity"
grep -q '^peak live requested: *3249143816 bytes' "$tmp/out.txt" || fail "peak live"
grep -q '^overhead: *16.37 %' "$tmp/out.txt" || fail "default overhead"
grep -q '^  maps: *0$' "$tmp/out.txt" || fail "native maps nothing"

# JSON, one object per setting
for conf in expandable_segments:True policy:stitch; do
    "$cli" mincap "$trace" --conf "$conf" --json >"$tmp/$conf.json" 2>"$tmp/err" ||
        fail "$conf: exit code: $(cat "$tmp/err")"
done
python3 - "$tmp/expandable_segments:True.json" "$tmp/policy:stitch.json" <<'PY' || fail "JSON content"
import json, sys
e, s = (json.load(open(p)) for p in sys.argv[1:3])
for d in (e, s):
    for k in ["conf", "resolution_bytes", "min_capacity_bytes", "min_capacity_gib",
              "peak_requested_bytes", "overhead", "overhead_percent", "replays",
              "device_calls"]:
        assert k in d, k
    for k in ["segment_allocs", "segment_frees", "va_reserves", "va_releases", "maps",
              "unmaps", "alloc_retries"]:
        assert k in d["device_calls"], k
    assert d["resolution_bytes"] == 2 << 20
    assert d["min_capacity_bytes"] % (2 << 20) == 0
    assert d["peak_requested_bytes"] == 3249143816
    assert d["device_calls"]["segment_allocs"] == 0  # virtual memory only
assert e["conf"] == "expandable_segments:True" and s["conf"] == "policy:stitch"
assert round(e["overhead_percent"], 2) == 1.40, e["overhead_percent"]
assert round(s["overhead_percent"], 2) == 0.11, s["overhead_percent"]
assert e["device_calls"]["alias_maps"] == 0  # PyTorch's policy never maps a page twice
assert s["device_calls"]["alias_maps"] == 2  # stitched: two partly free pages mapped again
assert s["min_capacity_bytes"] <= e["min_capacity_bytes"]
assert s["device_calls"]["va_reserves"] >= 1 and s["device_calls"]["maps"] >= 1
PY

# exit codes
"$cli" mincap >/dev/null 2>&1; [ $? -eq 2 ] || fail "no trace: exit 2"
"$cli" mincap "$trace" --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: exit 2"
"$cli" mincap "$trace" --conf 'policy:nope' >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "bad conf: exit 1"
grep -q 'policy' "$tmp/err" || fail "bad conf message names the option"
"$cli" mincap "$tmp/none.csv" >/dev/null 2>&1; [ $? -eq 1 ] || fail "missing file: exit 1"
"$cli" mincap --help | grep -q 'usage: sublet mincap' || fail "--help"

[ $fails -eq 0 ] || exit 1
echo "cli_mincap: ok"
