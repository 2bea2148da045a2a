#!/usr/bin/env bash
# sublet — replay and min capacity on a shared trace recorded mid-run
# (../shared/traces/pytorch_snapshot/hf_lora8bit_finetune_notebook): the min
# capacity honours --prelude (the device it reports runs under the same
# options, one step less does not), and with an OOM each one is listed once
# and `events` counts past its index.  Skips (77) without the shared folder.
# $1 is the CLI.
set -u
cli=${1:?usage: cli_replay_shared.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
shared=${SUBLET_SHARED:-$here/../../shared}
trace=$shared/traces/pytorch_snapshot/hf_lora8bit_finetune_notebook.pickle.gz
[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$trace" ] || { echo "no shared trace at $trace: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# 6291456000 bytes, the answer when --prelude was ignored, OOMs under
# --prelude allocate (PyTorch agrees); the answer under it is larger
old=6291456000
for how in "mincap" "replay --min-capacity"; do
    # shellcheck disable=SC2086
    "$cli" $how "$trace" --prelude allocate --json >"$tmp/m.json" 2>"$tmp/err" ||
        fail "$how --prelude allocate: $(cat "$tmp/err")"
done
x=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["min_capacity_bytes"])' "$tmp/m.json")
[ "$x" -gt $old ] || fail "min capacity under --prelude allocate: $x, want > $old"
ooms_at() {
    "$cli" replay "$trace" --prelude allocate --device-memory "$1" --stop-on-oom --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["ooms"])'
}
[ "$(ooms_at "$x")" = 0 ] || fail "an OOM at the min capacity $x"
[ "$(ooms_at $((x - 2097152)))" = 1 ] || fail "no OOM one step below the min capacity $x"

# each OOM once; with --stop-on-oom, events counts the OOMed row (prelude rows included)
for stop in "" "--stop-on-oom"; do
    # shellcheck disable=SC2086
    "$cli" replay "$trace" --prelude allocate --device-memory $old $stop --json >"$tmp/r.json" ||
        fail "replay at $old $stop"
    python3 - "$tmp/r.json" "$stop" <<'PY' || fail "OOM events $stop"
import json, sys
d = json.load(open(sys.argv[1]))
keys = [(o["event"], o["line"], o["message"]) for o in d["oom_events"]]
assert d["ooms"] >= 1 and len(keys) == d["ooms"] == len(set(keys)), [k[:2] for k in keys]
assert d["events"] > max(o["event"] for o in d["oom_events"]), d["events"]
if sys.argv[2]:
    assert d["stopped_on_oom"] and d["events"] == d["oom_events"][-1]["event"] + 1
    assert d["last_event"] == d["oom_events"][-1]["event"]
PY
done
"$cli" replay "$trace" --prelude allocate --device-memory $old >"$tmp/r.txt" || fail "text replay"
n=$(grep -c '^event [0-9]*: alloc of .* failed' "$tmp/r.txt")
[ "$n" -eq 1 ] || fail "the OOM printed $n times"

[ $fails -eq 0 ] || exit 1
echo "cli_replay_shared: ok"
