#!/usr/bin/env bash
# sublet — the warm-up plan from the command line: `sublet tune` prints a
# "warm-up plan" section with the exact SUBLET_ALLOC_CONF string and its
# "warmup" object in --json; that string, given back to `sublet replay`,
# makes the replay do no device allocation of its own (every segment comes
# from the plan); --no-warmup leaves the plan out; a bad plan in --conf is a
# usage error naming it.  $1 is the built CLI; exit 77 = skipped.
set -u
cli=${1:?usage: cli_tune_plan.sh PATH_TO_SUBLET}
data=${SUBLET_TESTDATA:-$(dirname "$0")/data}
trace=$data/cs336_attention_microbench.events.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$trace" ] || { echo "no test trace at $trace" >&2; exit 77; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }

"$cli" help tune | grep -q -- '--no-warmup' || fail "help tune lists --no-warmup"

# the text section
"$cli" tune "$trace" >"$tmp/out.txt" 2>"$tmp/err" || fail "tune: $(cat "$tmp/err")"
want='SUBLET_ALLOC_CONF=max_split_size_mb:512,warmup:[large:512MiB*6,large:20MiB*2,small:2MiB]'
grep -q '^warm-up plan: reserve it at start-up' "$tmp/out.txt" || fail "no warm-up plan section"
grep -qF "  $want" "$tmp/out.txt" || fail "the plan's string: $(grep -A1 '^warm-up' "$tmp/out.txt")"
grep -q 'reserved at start: 3114 MiB in 9 segments' "$tmp/out.txt" || fail "the plan's bytes"
grep -q 'device allocations during the run: 9 -> 0 (checked by replay)' "$tmp/out.txt" ||
    fail "the allocations it saves"
grep -q "the plan's own: 9 calls" "$tmp/out.txt" || fail "the plan's own calls"

# the string works: a replay under it allocates nothing beyond the plan
env=${want#SUBLET_ALLOC_CONF=}
"$cli" replay "$trace" --json --conf "$env" >"$tmp/replay.json" 2>"$tmp/err" ||
    fail "replay under the plan: $(cat "$tmp/err")"
python3 - "$tmp/replay.json" <<'PY' || fail "the replay under the plan"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["fidelity"]
assert f["engine_segment_allocs"] == 0, f   # no segment made during the run
assert d["device_allocs"] == 9, d["device_allocs"]  # the plan's nine, at creation
assert d["ooms"] == 0
PY

# --json
"$cli" tune "$trace" --json >"$tmp/out.json" 2>"$tmp/err" || fail "--json: $(cat "$tmp/err")"
python3 - "$tmp/out.json" "$want" <<'PY' || fail "the JSON warmup object"
import json, sys
d = json.load(open(sys.argv[1]))
w = d["warmup"]
assert w["status"] == "SUBLET_OK" and w["helps"] is True, w
assert w["env"] == sys.argv[2], w["env"]
assert w["conf"] == d["sublet"]["evaluation"]["conf"]
assert w["option"] == "warmup:[large:512MiB*6,large:20MiB*2,small:2MiB]"
assert [(e["pool"], e["size"] >> 20, e["count"]) for e in w["entries"]] == \
    [("large", 512, 6), ("large", 20, 2), ("small", 2, 1)], w["entries"]
assert w["plan_bytes"] == 3114 << 20
assert w["peak_reserved_bytes"] == 3114 << 20
assert w["device_allocs_before"] == 9 and w["device_allocs_after"] == 0
assert w["plan_calls"] == 9 and w["plan_cost_us"] > 0
assert w["fits"] is True
PY

# --no-warmup
"$cli" tune "$trace" --no-warmup >"$tmp/nw.txt" || fail "--no-warmup"
grep -q 'warm-up plan' "$tmp/nw.txt" && fail "--no-warmup still prints a plan"
"$cli" tune "$trace" --no-warmup --json | python3 -c '
import json, sys
assert "warmup" not in json.load(sys.stdin)' || fail "--no-warmup --json"

# a small device: said, not recommended
"$cli" tune "$trace" --device-memory 3GiB >"$tmp/small.txt" || fail "3GiB"
grep -q '^warm-up plan.*none helps here: the run does not fit your device' "$tmp/small.txt" ||
    fail "small device: $(grep '^warm-up' "$tmp/small.txt")"

# a bad plan is refused whole, naming it
"$cli" replay "$trace" --conf 'warmup:[small:4MiB]' >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] || fail "a bad plan was accepted"
grep -q 'warmup: entry 1 (small:4194304 bytes): a small-pool segment is 2 MiB' "$tmp/err" ||
    fail "bad plan message: $(cat "$tmp/err")"

[ $fails -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "cli_tune_plan: all passed"
