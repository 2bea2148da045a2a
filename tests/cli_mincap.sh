#!/usr/bin/env bash
# sublet — `sublet mincap`: the min-capacity report (text and JSON) on the
# committed attention trace under PyTorch's default, expandable_segments and
# policy:stitch, `sublet diagnose`'s verdict (the same figures) and its groups
# of alike OOMs, and the exit codes (2 = usage, 1 = error).  $1 is the CLI.
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

# the replay options that change the outcome are honoured: a trace recorded
# mid-run whose prelude, adopted, leaves room in its 40 MiB segment for the
# 30 MiB request, but allocated afresh (a 2 MiB block in a 20 MiB segment)
# needs a second segment: 50 MiB
cat >"$tmp/pre.csv" <<'CSV'
seq,action,addr,size,stream,time_us
0,pre_segment,140000000000000,41943040,0,
1,pre_alloc,140000000000000,2097152,0,
2,alloc,140000002097152,31457280,0,
3,free_requested,140000002097152,31457280,0,
4,free_completed,140000002097152,31457280,0,
CSV
for case in "auto 41943040" "adopt 41943040" "allocate 52428800"; do
    set -- $case
    for how in "mincap" "replay --min-capacity"; do
        # shellcheck disable=SC2086
        "$cli" $how "$tmp/pre.csv" --prelude "$1" --json >"$tmp/pre.json" 2>"$tmp/err" ||
            fail "$how --prelude $1: $(cat "$tmp/err")"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["min_capacity_bytes"] == int(sys.argv[2]) and d["prelude"] == sys.argv[3], d' \
            "$tmp/pre.json" "$2" "$1" || fail "$how --prelude $1: min capacity, want $2"
    done
    # the answer runs under the same options, one step less does not (an
    # OOM, or an adopted segment that does not fit)
    "$cli" replay "$tmp/pre.csv" --prelude "$1" --device-memory "$2" --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ooms"] == d["errors"] == 0' ||
        fail "--prelude $1 at $2"
    "$cli" replay "$tmp/pre.csv" --prelude "$1" --device-memory $(($2 - 2097152)) --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ooms"] + d["errors"] > 0' ||
        fail "--prelude $1 below $2"
done
# --at: the rows up to it only (the prelude allocated: one 20 MiB segment)
"$cli" mincap "$tmp/pre.csv" --prelude allocate --at 1 --json >"$tmp/at.json" || fail "mincap --at"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["min_capacity_bytes"] == 20971520 and d["stop_after"] == 1 and d["peak_requested_bytes"] == 2097152, d' \
    "$tmp/at.json" || fail "mincap --at JSON"
"$cli" replay "$tmp/pre.csv" --prelude allocate --at 1 --min-capacity >"$tmp/at.txt" || fail "replay --at --min-capacity"
grep -q '^min capacity: *20971520 bytes' "$tmp/at.txt" || fail "replay --at --min-capacity text"
grep -q '^prelude: *allocate$' "$tmp/at.txt" || fail "prelude line"

# not monotone: tests/data/nonmonotone.events.csv runs on 60-68 MiB, fails on
# 70-78 MiB (a cached segment kept, README there): the min capacity is the
# smallest size with no failure probed above it, 80 MiB, and the report says so
nm=$data/nonmonotone.events.csv
"$cli" mincap "$nm" >"$tmp/nm.txt" 2>"$tmp/err" || fail "non-monotone text: $(cat "$tmp/err")"
grep -q '^min capacity: *83886080 bytes' "$tmp/nm.txt" || fail "non-monotone min capacity"
grep -q '^monotone: *NO: [0-9]* probed sizes\? failed above 62914560 bytes' "$tmp/nm.txt" ||
    fail "non-monotone line: $(grep monotone "$tmp/nm.txt")"
"$cli" replay "$nm" --min-capacity --json >"$tmp/nm.json" || fail "non-monotone JSON"
python3 - "$tmp/nm.json" <<'PY' || fail "non-monotone JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
M = 1 << 20
assert d["min_capacity_bytes"] == 80 * M and d["monotone"] is False, d
assert d["smallest_ok_bytes"] == 60 * M, d["smallest_ok_bytes"]
f = d["failed_sizes_bytes"]
assert f and all(70 * M <= x < 80 * M for x in f), f
p = d["probes"]
assert [x["bytes"] for x in p] == sorted(x["bytes"] for x in p)
assert all(x["ok"] for x in p if x["bytes"] >= d["min_capacity_bytes"])  # the definition
above = [x["bytes"] for x in p if x["bytes"] > d["min_capacity_bytes"]]
assert 82 * M in above and 160 * M in above, above  # +1 step ... +100 %
assert any(x["checked"] for x in p)
PY
# ... and each figure is what a replay at that size gives
for mib in 60 76 80; do
    "$cli" replay "$nm" --device-memory ${mib}MiB --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ooms"])' >"$tmp/o"
    want=0; [ $mib = 76 ] && want=1
    [ "$(cat "$tmp/o")" = $want ] || fail "replay of the non-monotone trace on $mib MiB: $(cat "$tmp/o") OOMs"
done
# a monotone trace says so
grep -q '^monotone: *yes' "$tmp/out.txt" || fail "the attention trace is monotone"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["monotone"] is True and d["failed_sizes_bytes"] == []' \
    "$tmp/expandable_segments:True.json" || fail "monotone JSON"

# `sublet diagnose`'s verdict: the device needed under the base settings and
# under the best setting tried are the figures `sublet mincap` prints for the
# same trace and settings; alike OOMs are grouped (text and JSON).  The
# committed trace has no stacks: its five 512 MiB OOMs on 2 GiB are one group;
# with ../shared, hf_lora8bit_finetune_notebook on 2 GiB: 2,025 OOMs.
here=$(cd "$(dirname "$0")" && pwd)
shared=${SUBLET_SHARED:-$here/../../shared}
hf=$shared/traces/pytorch_snapshot/hf_lora8bit_finetune_notebook.pickle.gz
# (both traces were recorded by releases before 2.14, whose best fit breaks a tie of sizes
# by address: docs/versions.md)
diag_check() {  # diag_check NAME TRACE OOMS GROUPS BASE_BYTES BEST_SETTING BEST_BYTES
    local name=$1 f=$2
    "$cli" diagnose "$f" --pytorch-version 2.13 --device-memory 2GiB --json \
        >"$tmp/$name.diag.json" 2>"$tmp/err" ||
        { fail "$name: diagnose --json: $(cat "$tmp/err")"; return; }
    "$cli" diagnose "$f" --pytorch-version 2.13 --device-memory 2GiB >"$tmp/$name.diag.txt" 2>"$tmp/err" ||
        { fail "$name: diagnose: $(cat "$tmp/err")"; return; }
    python3 - "$tmp/$name.diag.json" "$3" "$4" "$5" "$6" "$7" >"$tmp/$name.confs" <<'PY' || fail "$name: diagnose JSON"
import json, sys
d = json.load(open(sys.argv[1]))["diagnosis"]
ooms, groups, base, best, best_bytes = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
assert d["ooms"] == ooms and d["oom_groups_all"] == groups, (d["ooms"], d["oom_groups_all"])
g = d["oom_groups"]
assert len(g) == min(groups, 32)
# every OOM of a listed group once, ascending, and the list's OOMs in their groups
events = [e for x in g for e in x["events"]]
assert len(events) == len(set(events)) and all(x["events"] == sorted(x["events"]) for x in g)
assert sum(x["count"] for x in g) == len(events) <= ooms
assert all(x["count"] == len(x["events"]) and x["events"][0] == x["first_event"] for x in g)
for o in d["oom_list"]:
    x = g[o["group"]]
    assert o["event"] in x["events"] and (o["size"], o["kind"]) == (x["size"], x["kind"])
    assert (o["diagnosis"] is not None) == (o["event"] == x["first_event"] and x["diagnosis"] is not None)
m = d["min_capacity"]
assert m["base_bytes"] == base, m
assert m["best_setting"] == best and m["best_bytes"] == best_bytes, m
assert m["saved_bytes"] == base - best_bytes
c = [x for x in d["candidates"] if x["setting"] == best][0]
assert c["min_capacity_bytes"] == best_bytes
print(d["conf"])
for x in d["candidates"]:
    print(x["conf"], x["min_capacity_bytes"])
PY
    [ -s "$tmp/$name.confs" ] || return
    # each figure is what `sublet mincap --conf CONF` prints
    local base_conf conf want got
    base_conf=$(head -1 "$tmp/$name.confs")
    got=$("$cli" mincap "$f" --pytorch-version 2.13 --conf "$base_conf" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["min_capacity_bytes"])')
    [ "$got" = "$5" ] || fail "$name: mincap under the base settings: $got, diagnose: $5"
    tail -n +2 "$tmp/$name.confs" | while read -r conf want; do
        got=$("$cli" mincap "$f" --pytorch-version 2.13 --conf "$conf" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["min_capacity_bytes"])')
        [ "$got" = "$want" ] || { echo "FAIL: $name: mincap --conf $conf: $got, diagnose: $want" >&2; exit 1; }
    done || fails=$((fails + 1))
    grep -q "^Device needed (as \`sublet mincap\` finds it): .* ($5 bytes) under the base settings, more than this 2.00 GiB device; .* ($7 bytes) with $6, the best setting tried: " \
        "$tmp/$name.diag.txt" || fail "$name: the verdict's device needed: $(grep '^Device needed' "$tmp/$name.diag.txt")"
}
diag_check attention "$trace" 5 1 3781165056 policy:stitch 3252682752
grep -q '^  and 4 more like it (the same kind, size, stream, pool) at events 48, 50, 52, 69$' \
    "$tmp/attention.diag.txt" || fail "attention: the four OOMs like the first"
[ "$(grep -c '^OOM [0-9]* of 5:' "$tmp/attention.diag.txt")" = 1 ] || fail "attention: one OOM shown"
if [ -f "$hf" ]; then
    diag_check hf "$hf" 2025 103 6291456000 policy:stitch 5882511360
    grep -q '^  and 32 more like it (the same kind, size, stream, pool and stack) at events 1499, 1508, ' \
        "$tmp/hf.diag.txt" || fail "hf: the OOMs like the first"
    [ "$(grep -c '^OOM [0-9]* of 2025:' "$tmp/hf.diag.txt")" = 32 ] || fail "hf: 32 kinds shown"
    grep -q '^(71 more kinds of OOM, 1410 OOMs, not listed)$' "$tmp/hf.diag.txt" || fail "hf: the kinds not listed"
fi

# exit codes
"$cli" mincap >/dev/null 2>&1; [ $? -eq 2 ] || fail "no trace: exit 2"
"$cli" mincap "$trace" --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: exit 2"
"$cli" mincap "$trace" --prelude sometimes >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --prelude: exit 2"
"$cli" mincap "$trace" --at x >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --at: exit 2"
"$cli" mincap "$trace" --conf 'policy:nope' >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "bad conf: exit 2"
grep -q -- "--conf: .*policy" "$tmp/err" || fail "bad conf message names the option and the value"
"$cli" mincap "$tmp/none.csv" >/dev/null 2>&1; [ $? -eq 1 ] || fail "missing file: exit 1"
"$cli" mincap --help | grep -q 'usage: sublet mincap' || fail "--help"

[ $fails -eq 0 ] || exit 1
echo "cli_mincap: ok"
