#!/usr/bin/env bash
# sublet — the `sublet replay` command line: JSON keys and values on the
# committed attention trace, the text report, and the exit codes
# (2 = usage, 1 = error).  $1 is the built CLI.
set -u
cli=${1:?usage: cli_replay.sh PATH_TO_SUBLET}
data=${SUBLET_TESTDATA:-$(dirname "$0")/data}
trace=$data/cs336_attention_microbench.events.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$trace" ] || { echo "no test trace at $trace" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }

# --version and help
"$cli" --version | grep -q '^sublet [0-9]' || fail "--version"
"$cli" help | grep -q 'sublet replay' || fail "help lists replay"

# --json: exactly one JSON object with the documented keys and values
"$cli" replay "$trace" --json --check >"$tmp/out.json" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "--json exit code $rc: $(cat "$tmp/err")"
python3 - "$tmp/out.json" <<'PY' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))          # one object, nothing after it
for k in ["events", "allocs", "peak_requested_bytes", "peak_reserved_bytes",
          "device_allocs", "device_frees", "alloc_retries", "ooms", "fidelity"]:
    assert k in d, k
f = d["fidelity"]
for k in ["allocs_compared", "decisions_matched", "segment_sizes_matched",
          "recorded_peak_reserved_bytes"]:
    assert k in f, k
assert d["events"] == 97, d["events"]
assert d["allocs"] == 36
assert d["ooms"] == 0 and d["alloc_retries"] == 0
assert d["device_allocs"] == 9 and d["device_frees"] == 0
assert f["allocs_compared"] == 36 and f["decisions_matched"] == 36
assert f["segment_sizes_matched"] == 9
assert d["peak_reserved_bytes"] == f["recorded_peak_reserved_bytes"] == 3781165056
assert d["peak_requested_bytes"] == 3249143816
assert d["error"] is None
assert isinstance(d["memory_stats_at_end"], dict)
assert d["memory_stats_at_end"]["reserved_bytes.all.peak"] == 3781165056
PY

# the same from stdin, with the options spelled --opt=value
"$cli" replay --json --device-memory=80GiB --conf= - <"$trace" >"$tmp/stdin.json" ||
    fail "replay from stdin"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["fidelity"]["decisions_matched"] == 36' \
    "$tmp/stdin.json" || fail "stdin JSON"

# OOMs: named by event index and request, the replay goes on
"$cli" replay "$trace" --device-memory 3GiB >"$tmp/oom.txt" 2>&1 || fail "OOM replay exit code"
grep -q '^event 50: alloc of 536870912 bytes on stream 0 failed: CUDA out of memory' "$tmp/oom.txt" ||
    fail "OOM line"
"$cli" replay "$trace" --device-memory 3GiB --json >"$tmp/oom.json" || fail "OOM --json"
python3 - "$tmp/oom.json" <<'PY' || fail "OOM JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ooms"] == 2, d["ooms"]
assert d["oom_events"][0]["event"] == 50 and d["oom_events"][0]["size"] == 536870912
# each OOM once (the replays behind the fragmentation report do not add theirs)
keys = [(o["event"], o["line"], o["message"]) for o in d["oom_events"]]
assert len(keys) == d["ooms"] == len(set(keys)), keys
assert d["events"] == 97 and all(o["event"] < d["events"] for o in d["oom_events"])
PY
[ "$(grep -c '^event [0-9]*: alloc of .* failed' "$tmp/oom.txt")" -eq 2 ] || fail "each OOM printed once"
"$cli" replay "$trace" --device-memory 3GiB --stop-on-oom --json >"$tmp/stop.json" || fail "--stop-on-oom"
python3 - "$tmp/stop.json" <<'PY' || fail "--stop-on-oom JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["events"] == 51 and d["stopped_on_oom"] and d["ooms"] == 1
assert [o["event"] for o in d["oom_events"]] == [50] == [d["last_event"]], d["oom_events"]
assert d["events"] > d["oom_events"][-1]["event"]  # the OOMed row is counted
PY
# with a prelude: events counts its rows, as event indices do
printf 'seq,action,addr,size,stream,time_us\n0,pre_segment,140000000000000,20971520,0,\n1,pre_alloc,140000000000000,10485760,0,\n2,segment_alloc,140000020971520,20971520,0,\n3,alloc,140000020971520,20971520,0,\n4,free_requested,140000020971520,20971520,0,\n5,free_completed,140000020971520,20971520,0,\n' >"$tmp/pre.csv"
"$cli" replay "$tmp/pre.csv" --prelude adopt --device-memory 30MiB --stop-on-oom --json \
    >"$tmp/pre.json" || fail "prelude adopt --stop-on-oom"
python3 - "$tmp/pre.json" <<'PY' || fail "prelude adopt --stop-on-oom JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert [o["event"] for o in d["oom_events"]] == [3], d["oom_events"]
assert d["events"] == 4 and d["last_event"] == 3 and d["stopped_on_oom"], d["events"]
PY
# an OOM allocating the prelude is reported by its pre_alloc row, and stops it
"$cli" replay "$tmp/pre.csv" --prelude allocate --device-memory 8MiB --stop-on-oom --json \
    >"$tmp/pre.json" || fail "prelude allocate --stop-on-oom"
python3 - "$tmp/pre.json" <<'PY' || fail "prelude allocate --stop-on-oom JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert [o["event"] for o in d["oom_events"]] == [1], d["oom_events"]
assert d["events"] == 2 and d["allocs"] == 0 and d["stopped_on_oom"], d
PY
# --device-base: without placement hints the first segment goes at the base (and far from it
# without); a base that is not a non-zero multiple of 2 MiB is a usage error
printf 'seq,action,addr,size,stream,time_us\n0,segment_alloc,35184372088832,2097152,0,\n1,alloc,35184372088832,512,0,\n' >"$tmp/base.csv"
for b in 0x200000000000 ""; do
    "$cli" replay "$tmp/base.csv" --no-placement-hints ${b:+--device-base $b} --json \
        >"$tmp/base.json" || fail "--device-base '$b'"
    python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["fidelity"]; assert f["addresses_matched"] == (1 if sys.argv[2] else 0), f' \
        "$tmp/base.json" "$b" || fail "--device-base '$b' JSON"
done
"$cli" replay "$tmp/base.csv" --device-base 0x100000 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'aligned to 2 MiB' "$tmp/err" || fail "--device-base 0x100000: $(cat "$tmp/err")"
"$cli" replay "$trace" --at 10 --json >"$tmp/at.json" || fail "--at"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["events"] == 11 and d["last_event"] == 10' \
    "$tmp/at.json" || fail "--at JSON"

# the text report: both summaries, the counts, the fidelity lines
"$cli" replay "$trace" >"$tmp/out.txt" || fail "text exit code"
grep -q 'memory_summary at peak reserved' "$tmp/out.txt" || fail "peak summary"
grep -q 'memory_summary at the end' "$tmp/out.txt" || fail "end summary"
[ "$(grep -c 'PyTorch CUDA memory summary' "$tmp/out.txt")" -eq 2 ] || fail "two summaries"
grep -q 'decisions matched: *36 / 36' "$tmp/out.txt" || fail "decisions line"
grep -q 'segment sizes matched: *9 / 9' "$tmp/out.txt" || fail "sizes line"
grep -q 'peak reserved: .*3781165056 engine vs 3781165056 recorded.*exact' "$tmp/out.txt" ||
    fail "peak line"

# empty_cache: the set of segments each released, compared with the recording's
cat >"$tmp/sets.csv" <<'CSV'
seq,action,addr,size,stream,time_us
0,segment_alloc,140000000000000,2097152,0,
1,alloc,140000000000000,512,0,
2,segment_alloc,140000020971520,20971520,0,
3,alloc,140000020971520,2097152,0,
4,free_requested,140000020971520,2097152,0,
5,free_requested,140000000000000,512,0,
6,free_completed,140000020971520,2097152,0,
7,segment_free,140000020971520,20971520,0,
8,free_completed,140000000000000,512,0,
CSV
"$cli" replay "$tmp/sets.csv" --json >"$tmp/sets.json" || fail "sets replay"
python3 - "$tmp/sets.json" <<'PY' || fail "release set JSON"
import json, sys
f = json.load(open(sys.argv[1]))["fidelity"]
assert f["empty_caches_compared"] == 1 and f["empty_cache_sets_matched"] == 0, f
m = f["first_empty_cache_mismatch"]
assert m["event"] == 7 and m["line"] == 9, m
assert m["recorded"] == 1 and m["engine"] == 2 and m["only_recorded"] == 0 and m["only_engine"] == 1
assert m["first_only_recorded"] is None
assert m["first_only_engine"] == {"action": "segment_free", "addr": 140000000000000, "size": 2097152}
PY
"$cli" replay "$tmp/sets.csv" >"$tmp/sets.txt" || fail "sets text"
grep -q 'empty_cache releases: *0 / 1 released the recorded set' "$tmp/sets.txt" || fail "release line"
grep -q 'first release mismatch: event 7 (line 9): recorded 1, engine 2; 0 only recorded, 1 only by the engine (first: segment_free of 2097152 bytes at 140000000000000)' \
    "$tmp/sets.txt" || fail "release mismatch line: $(grep release "$tmp/sets.txt")"
"$cli" replay "$trace" --json | python3 -c 'import json,sys; f=json.load(sys.stdin)["fidelity"]; assert f["empty_caches_compared"] == 0 and f["first_empty_cache_mismatch"] is None' ||
    fail "no empty_cache in the attention trace"

# expandable segments: the hand-written trace replays under its recorded
# settings, every decision, map and release as recorded
hand=$data/expandable_by_hand.json
"$cli" replay "$hand" --check >"$tmp/hand.txt" 2>&1 || fail "expandable replay: $(tail -3 "$tmp/hand.txt")"
grep -q 'settings: *expandable_segments:True (recorded in the trace)' "$tmp/hand.txt" || fail "recorded settings used"
grep -q 'decisions matched: *16 / 16' "$tmp/hand.txt" || fail "expandable decisions"
grep -q 'addresses matched: *16 / 16' "$tmp/hand.txt" || fail "expandable addresses"
grep -q 'map sizes matched: *8 / 8 allocs PyTorch served by mapping pages (engine mapped for 8)' "$tmp/hand.txt" || fail "map sizes line"
grep -q 'maps placed as recorded: 8 / 8' "$tmp/hand.txt" || fail "maps placed line"
grep -q 'empty_cache releases: *3 / 3 released the recorded set (engine: 0 segment frees, 4 unmaps; recorded: 0 segment_free, 4 segment_unmap rows)' \
    "$tmp/hand.txt" || fail "expandable release line"
"$cli" replay "$hand" --json >"$tmp/hand.json" || fail "expandable --json"
python3 - "$tmp/hand.json" <<'PY' || fail "expandable JSON"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["fidelity"]
assert d["conf"] == "expandable_segments:True" and d["prelude"] == "auto"
assert f["decisions_matched"] == f["allocs_compared"] == f["addresses_matched"] == 16
assert f["recorded_segment_maps"] == f["engine_segment_maps"] == f["map_sizes_matched"] == 8
assert f["maps_placed_as_recorded"] == 8
assert f["recorded_segment_unmaps"] == f["engine_segment_unmaps"] == 4
assert f["empty_caches_compared"] == f["empty_cache_sets_matched"] == 3
assert d["peak_reserved_bytes"] == f["recorded_peak_reserved_bytes"] == 109051904
assert d["device_allocs"] == 9 and d["device_frees"] == 4
PY

# the engine's own recording under expandable segments replays at 100 %
"$cli" replay "$trace" --conf expandable_segments:True --snapshot-out "$tmp/exp.pickle" >/dev/null ||
    fail "recording under expandable segments"
"$cli" replay "$tmp/exp.pickle" --json >"$tmp/exp.json" || fail "replay of the recording"
python3 - "$tmp/exp.json" <<'PY' || fail "recording JSON"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["fidelity"]
assert d["conf"] == "expandable_segments:True", d["conf"]
assert f["decisions_matched"] == f["allocs_compared"] == f["addresses_matched"] == 36, f
assert f["recorded_segment_maps"] == f["map_sizes_matched"] == f["maps_placed_as_recorded"] == 10, f
assert d["peak_reserved_bytes"] == f["recorded_peak_reserved_bytes"]
PY

# recorded mid-run under expandable segments: refused with the reason,
# unless the prelude is allocated
printf 'seq,action,addr,size,stream,time_us\n0,pre_segment,140000000000000,20971520,0,\n1,pre_alloc,140000000000000,4194304,0,\n2,segment_map,140000020971520,20971520,0,\n3,alloc,140000020971520,20971520,0,\n' >"$tmp/midrun.csv"
"$cli" replay "$tmp/midrun.csv" --conf expandable_segments:True >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "mid-run expandable exit code"
grep -q 'recorded mid-run under expandable segments' "$tmp/err" || fail "mid-run reason: $(cat "$tmp/err")"
"$cli" replay "$tmp/midrun.csv" --conf expandable_segments:True --prelude allocate --json >"$tmp/mid.json" ||
    fail "--prelude allocate"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["events"] == 4 and d["prelude"] == "allocate"' \
    "$tmp/mid.json" || fail "--prelude allocate JSON"

# usage errors: exit 2
for args in "--bogus" "--device-memory" "--device-memory lots" "--at x" "" "a.csv b.csv" \
    "--conf max_split_size_mb:banana" "--prelude sometimes" "--prelude"; do
    # shellcheck disable=SC2086
    "$cli" replay $args "$trace" >/dev/null 2>"$tmp/err"
    rc=$?
    [ -z "$args" ] && { "$cli" replay >/dev/null 2>"$tmp/err"; rc=$?; }
    [ $rc -eq 2 ] || fail "'replay $args' exit code $rc, want 2"
    [ -s "$tmp/err" ] || fail "'replay $args' printed nothing on stderr"
done
"$cli" frobnicate >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown command exit code"
"$cli" >/dev/null 2>&1
[ $? -eq 2 ] || fail "no command exit code"

# errors: exit 1, the reason on stderr
"$cli" replay "$tmp/missing.events.csv" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "missing file exit code"
grep -q 'missing.events.csv' "$tmp/err" || fail "missing file message"
printf 'seq,action,addr,size,stream,time_us\n0,alloc,1,2,0,\n1,alloc,1,two,0,\n' >"$tmp/bad.csv"
"$cli" replay "$tmp/bad.csv" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "malformed file exit code"
grep -q 'line 3' "$tmp/err" || fail "malformed file message: $(cat "$tmp/err")"
printf 'seq,action,addr,size,stream\n' >"$tmp/bad2.csv"
"$cli" replay "$tmp/bad2.csv" --json >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || fail "bad header exit code"
grep -q 'line 1' "$tmp/err" || fail "bad header message"
[ -s "$tmp/out" ] && fail "output on stdout after a parse error"

if [ $fails -ne 0 ]; then
    echo "$fails check(s) failed" >&2
    exit 1
fi
echo "cli_replay: all checks passed"
