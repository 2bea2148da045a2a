#!/usr/bin/env bash
# sublet — the `sublet tune` command line on the committed attention trace:
# the text report (both answers, the cause, the Pareto set), --json, the cost
# model override, several traces, and the exit codes (2 = usage, 1 = error).
# $1 is the built CLI; exit 77 = skipped.
set -u
cli=${1:?usage: cli_tune.sh PATH_TO_SUBLET}
data=${SUBLET_TESTDATA:-$(dirname "$0")/data}
trace=$data/cs336_attention_microbench.events.csv
pickle=$data/cs336_attention_microbench.pickle.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$trace" ] || { echo "no test trace at $trace" >&2; exit 77; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }

"$cli" help | grep -q 'tune TRACE' || fail "help lists tune"
"$cli" help tune | grep -q -- '--cost-model' || fail "help tune"

# the text report
"$cli" tune "$trace" >"$tmp/out.txt" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "text exit code $rc: $(cat "$tmp/err")"
grep -q '^PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:' "$tmp/out.txt" || fail "PyTorch answer"
grep -q '^SUBLET_ALLOC_CONF=' "$tmp/out.txt" || fail "sublet answer"
grep -q 'fixes: a cached 512 MiB block split by a 2 MiB request at event 35' "$tmp/out.txt" ||
    fail "the cause, tied to the trace"
grep -q '+16.37 %' "$tmp/out.txt" || fail "the current overhead"
grep -q 'policy:stitch.*saves .* for .*x the cost' "$tmp/out.txt" || fail "the trade-off line"
[ -s "$tmp/err" ] && fail "no progress bar when stderr is not a terminal: $(cat "$tmp/err")"

# --json: one object with the documented keys
"$cli" tune "$trace" --json --device-memory 24GiB >"$tmp/out.json" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "--json exit code $rc: $(cat "$tmp/err")"
python3 - "$tmp/out.json" <<'PY' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ["traces", "device_memory", "cost_model_us", "search", "current", "pytorch",
          "sublet", "pareto"]:
    assert k in d, k
assert d["device_memory"] == 24 << 30
p = d["pytorch"]
assert p["env"].startswith("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:"), p["env"]
e = p["evaluation"]
assert e["pytorch_knobs_only"] is True
assert e["overhead"] < 0.01, e["overhead"]
assert e["fits"] is True
assert len(e["per_trace"]) == 1
t = e["per_trace"][0]
for k in ["min_capacity_bytes", "peak_requested_bytes", "peak_reserved_bytes", "cost_us",
          "calls", "ooms"]:
    assert k in t, k
for k in ["cudaMalloc", "cudaFree", "map_pages", "unmap_pages", "retries"]:
    assert k in t["calls"], k
assert "event 35" in p["fixes"], p["fixes"]
c = d["current"]["evaluation"]
assert abs(c["overhead"] - 0.1637) < 0.0005, c["overhead"]
assert d["current"]["recorded"] is False
assert d["sublet"]["env"].startswith("SUBLET_ALLOC_CONF=")
assert len(d["pareto"]["sublet"]) >= 2
assert d["search"]["settings"] == 1050
assert d["cost_model_us"]["malloc_us"] == 35
PY

# the cost model: a key=value list and a file
"$cli" tune "$trace" --json --cost-model malloc_us=100,malloc_us_per_gib=0 >"$tmp/cm.json" ||
    fail "--cost-model list"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cost_model_us"]["malloc_us"] == 100
e = d["pytorch"]["evaluation"]
assert e["cost_us"] == 100 * e["per_trace"][0]["calls"]["cudaMalloc"], e["cost_us"]
' "$tmp/cm.json" || fail "cost model applied"
printf '# my GPU\nmap_us = 5\nunmap_us = 5\n' >"$tmp/model.txt"
"$cli" tune "$trace" --json --cost-model "$tmp/model.txt" >"$tmp/cm2.json" ||
    fail "--cost-model file"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cost_model_us"]["map_us"] == 5 and d["cost_model_us"]["unmap_us"] == 5
' "$tmp/cm2.json" || fail "cost model file applied"

# several traces: the recorded pickle and the CSV of the same run
"$cli" tune "$trace" "$pickle" >"$tmp/two.txt" 2>"$tmp/err" || fail "two traces: $(cat "$tmp/err")"
grep -q 'per trace' "$tmp/two.txt" || fail "per-trace results"
grep -q '\[1\] .*pickle.gz' "$tmp/two.txt" || fail "second trace listed"

# --current
"$cli" tune "$trace" --current max_split_size_mb:256 >"$tmp/cur.txt" || fail "--current"
grep -q 'max_split_size_mb:256' "$tmp/cur.txt" || fail "--current shown"

# exit codes
"$cli" tune >/dev/null 2>&1
[ $? -eq 2 ] || fail "no trace: exit 2"
"$cli" tune "$trace" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown option: exit 2"
"$cli" tune "$trace" --device-memory lots >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad size: exit 2"
"$cli" tune "$trace" --current max_split_size_mb:2 >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad --current: exit 2"
"$cli" tune "$trace" --cost-model free_us=-3 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "bad cost model: exit 1"
grep -q 'free_us' "$tmp/err" || fail "bad cost model message"
"$cli" tune "$tmp/missing.csv" >/dev/null 2>&1
[ $? -eq 1 ] || fail "missing file: exit 1"

# each answer is checked on the user's device, and said when it OOMs there;
# a min capacity that is not monotone is said (tests/data/nonmonotone.events.csv
# runs on 60-68 MiB, OOMs on 70-78 MiB, runs from 80 MiB on)
nm=$data/nonmonotone.events.csv
"$cli" tune "$nm" --device-memory 76MiB --no-warmup >"$tmp/nm76.txt" 2>"$tmp/err" || fail "tune 76MiB: $(cat "$tmp/err")"
[ "$(grep -c '^  on your device (0.07 GiB, --device-memory): checked, the whole run replayed without an OOM' "$tmp/nm76.txt")" -eq 2 ] ||
    fail "device check lines: $(grep 'on your device' "$tmp/nm76.txt")"
grep -q '^  min capacity not monotone: 60 MiB ran, but sizes between it and 80 MiB failed' "$tmp/nm76.txt" ||
    fail "current's min capacity not monotone"
"$cli" tune "$nm" --device-memory 50MiB --no-warmup >"$tmp/nm50.txt" 2>"$tmp/err" || fail "tune 50MiB: $(cat "$tmp/err")"
grep -q '^  on your device (0.05 GiB, --device-memory): OUT OF MEMORY at event [0-9]*: NOT recommended for this device' "$tmp/nm50.txt" ||
    fail "OOM on the device said: $(grep 'on your device' "$tmp/nm50.txt")"
for dev in 76MiB 50MiB; do
    "$cli" tune "$nm" --device-memory $dev --no-warmup --json >"$tmp/nm.json" 2>"$tmp/err" || fail "tune --json $dev"
    python3 - "$tmp/nm.json" $dev <<'PY' || fail "device_check JSON $dev"
import json, sys
d = json.load(open(sys.argv[1]))
fits = sys.argv[2] == "76MiB"
assert d["device_source"] == "given"
for k in ("pytorch", "sublet"):
    c = d[k]["device_check"]
    assert c["device_memory_bytes"] == int(sys.argv[2][:2]) << 20 and c["source"] == "given", c
    assert c["runs"] is fits and c["recommended"] is fits and c["runs"] == d[k]["evaluation"]["fits"], c
    assert (c["first_oom_event"] is None) == fits and (c["ooms"] == 0) == fits, c
cur = d["current"]["evaluation"]
assert cur["monotone"] is False and cur["min_capacity_bytes"] == 80 << 20, cur
assert cur["per_trace"][0]["smallest_ok_bytes"] == 60 << 20 and cur["per_trace"][0]["monotone"] is False
PY
done
"$cli" tune "$trace" --no-warmup --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["device_source"] == "default" and d["sublet"]["device_check"]["runs"] and d["sublet"]["evaluation"]["monotone"]' ||
    fail "default device check"

# --pytorch-version: every replay under that release's rules, said in the report;
# a release sublet does not follow is a usage error
"$cli" tune "$trace" --no-warmup --pytorch-version 2.6 >"$tmp/v26.txt" 2>"$tmp/err" ||
    fail "--pytorch-version 2.6: $(cat "$tmp/err")"
grep -q "^every replay under PyTorch 2.6's rules" "$tmp/v26.txt" || fail "--pytorch-version line"
grep -q '^  min capacity' "$tmp/v26.txt" || fail "--pytorch-version 2.6: no report"
"$cli" tune "$trace" --pytorch-version 1.0 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--pytorch-version 1.0 should be a usage error"
grep -q 'follows PyTorch 2.6 and later' "$tmp/err" || fail "--pytorch-version 1.0 message: $(cat "$tmp/err")"

# --cost-cutoff: the cost runs stopped early or not, every line the same but
# the header's replays and seconds; a value that is no number is a usage error
for c in 0 1 4; do
    "$cli" tune "$trace" --no-warmup --cost-cutoff $c >"$tmp/cc$c.txt" 2>"$tmp/err" ||
        fail "--cost-cutoff $c: $(cat "$tmp/err")"
done
"$cli" tune "$trace" --no-warmup >"$tmp/cc.txt" 2>/dev/null
for c in 0 1 4; do
    cmp -s <(sed 1d "$tmp/cc.txt") <(sed 1d "$tmp/cc$c.txt") || fail "--cost-cutoff $c changed the answers"
done
"$cli" tune "$trace" --cost-cutoff x >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--cost-cutoff x should be a usage error"
grep -q -- '--cost-cutoff needs a number' "$tmp/err" || fail "--cost-cutoff x message: $(cat "$tmp/err")"

[ $fails -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "cli_tune: all passed"
