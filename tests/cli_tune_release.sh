#!/usr/bin/env bash
# sublet — `sublet tune --pytorch-version X` answers that release X takes (docs/tune.md, "Which
# PyTorch release"): on tests/data/offload_gc.events.csv (ours: the collector with its memory
# fraction wins there) the 2.6 answer is a string without per_process_memory_fraction (2.9's
# option; 2.6 terminates on it) and the call torch.cuda.set_per_process_memory_fraction(F),
# without a release the string says which releases take it; and every settings string tune
# prints for 2.6 (text and JSON: both answers, the Pareto points, the warm-up plan) on that
# trace and on the shared snapshots (skipped without ../shared) is taken by sublet's parser
# under pytorch_version:2.6, and each PYTORCH_CUDA_ALLOC_CONF one, with its call, by PyTorch
# 2.6's own parser: the oracle's replay_torch (tests/oracle/README.md) when it is built.
#   SUBLET_ORACLE=DIR    the oracle's build folder (default: oracle/ beside the CLI; without a
#                        replay_torch there that part is skipped; a DIR named without one fails)
#   SUBLET_NO_ORACLE=1   skip the oracle's part
# $1 is the built CLI.
set -u
cli=${1:?usage: cli_tune_release.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
trace=$data/offload_gc.events.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$trace" ] || { echo "no test trace at $trace" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }
oracle=
if [ "${SUBLET_NO_ORACLE:-0}" = 1 ]; then
    echo "SUBLET_NO_ORACLE=1: PyTorch 2.6's own parser is not asked"
elif [ -n "${SUBLET_ORACLE:-}" ]; then
    oracle=$SUBLET_ORACLE/replay_torch
    [ -x "$oracle" ] || { echo "FAIL: SUBLET_ORACLE=$SUBLET_ORACLE holds no replay_torch" >&2; exit 1; }
elif [ -x "$(cd "$(dirname "$cli")" && pwd)/oracle/replay_torch" ]; then
    oracle=$(cd "$(dirname "$cli")" && pwd)/oracle/replay_torch
else
    echo "no oracle beside the CLI (tests/oracle/build.sh builds it): PyTorch 2.6's own parser is not asked"
fi

# PyTorch 2.6's own parser: replay_torch under PYTORCH_CUDA_ALLOC_CONF=$1 (the rest: its
# arguments) ran; its stderr in $tmp/err (a subshell drops the shell's "Aborted")
torch_takes() {
    local conf=$1
    shift
    (PYTORCH_CUDA_ALLOC_CONF=$conf "$oracle" "$@" >/dev/null 2>"$tmp/err"; echo $? >"$tmp/rc") 2>/dev/null
    [ "$(cat "$tmp/rc")" = 0 ]
}

# (a) the trace where the collector wins, for 2.6: a string 2.6 takes, and the call
"$cli" tune "$trace" --pytorch-version 2.6 >"$tmp/v26.txt" 2>"$tmp/err" ||
    fail "tune --pytorch-version 2.6: $(cat "$tmp/err")"
grep -qx 'PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.95' "$tmp/v26.txt" ||
    fail "2.6 answer: $(grep '^PYTORCH_CUDA_ALLOC_CONF=' "$tmp/v26.txt")"
grep -qx '  and before the first CUDA allocation: torch.cuda.set_per_process_memory_fraction(0.999)' \
    "$tmp/v26.txt" || fail "2.6 answer without the call"
grep -q '^  for PyTorch 2.6 (--pytorch-version), which has no per_process_memory_fraction option' \
    "$tmp/v26.txt" || fail "2.6 answer's release line"
"$cli" tune "$trace" --pytorch-version 2.6 --json >"$tmp/v26.json" 2>"$tmp/err" ||
    fail "tune --pytorch-version 2.6 --json: $(cat "$tmp/err")"
python3 - "$tmp/v26.json" <<'PY' || fail "2.6 JSON answer"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["pytorch"]
assert p["env"] == "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.95", p["env"]
assert p["evaluation"]["conf"] == "garbage_collection_threshold:0.95"
assert p["memory_fraction_call"] == 0.999 and p["evaluation"]["memory_fraction_call"] == 0.999
assert p["code"] == "torch.cuda.set_per_process_memory_fraction(0.999)", p["code"]
assert p["pytorch_version"] == "2.6" and p["oldest_release"] == "2.6", p
assert d["sublet"]["evaluation"]["conf"] == "garbage_collection_threshold:0.95,memory_fraction:0.999"
assert d["sublet"]["code"] is None
PY
# without a release: the newest's string, and which releases take it
"$cli" tune "$trace" --no-warmup >"$tmp/newest.txt" 2>"$tmp/err" || fail "tune: $(cat "$tmp/err")"
grep -qx 'PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.95,per_process_memory_fraction:0.999' \
    "$tmp/newest.txt" || fail "newest answer: $(grep '^PYTORCH_CUDA_ALLOC_CONF=' "$tmp/newest.txt")"
grep -q '^  for PyTorch 2.9 and later only (older releases refuse it .*tune with --pytorch-version X$' \
    "$tmp/newest.txt" || fail "newest answer's release line: $(sed -n '/^PYTORCH_CUDA/{n;p}' "$tmp/newest.txt")"
grep -q 'set_per_process_memory_fraction' "$tmp/newest.txt" && fail "a call under the newest release"
"$cli" tune "$data/cs336_attention_microbench.events.csv" --no-warmup >"$tmp/att.txt" ||
    fail "tune on the attention trace"
grep -q '^  for PyTorch 2.6 and later, under the newest release.s rules: for yours, tune with --pytorch-version X$' \
    "$tmp/att.txt" || fail "attention answer's release line: $(sed -n '/^PYTORCH_CUDA/{n;p}' "$tmp/att.txt")"
"$cli" tune "$trace" --no-warmup --pytorch-version 2.9 >"$tmp/v29.txt" || fail "tune 2.9"
grep -qx 'PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.95,per_process_memory_fraction:0.999' \
    "$tmp/v29.txt" || fail "2.9 keeps its option"
# sublet refuses what 2.6 refuses, with PyTorch's text (the string of the issue)
issue=max_split_size_mb:1024,roundup_power2_divisions:16,garbage_collection_threshold:0.95,per_process_memory_fraction:0.999
"$cli" replay "$trace" --pytorch-version 2.6 --conf "$issue" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "replay --pytorch-version 2.6 took per_process_memory_fraction"
grep -q 'Unrecognized CachingAllocator option: per_process_memory_fraction' "$tmp/err" ||
    fail "2.6's text: $(cat "$tmp/err")"
if [ -n "$oracle" ]; then
    torch_takes "$issue" "$trace" && fail "the oracle took per_process_memory_fraction: is it PyTorch 2.6?"
    grep -q 'Unrecognized CachingAllocator option: per_process_memory_fraction' "$tmp/err" ||
        fail "the oracle's text: $(cat "$tmp/err")"
fi

# (b) every string tune prints for 2.6, on that trace and the shared snapshots
traces=("$trace")
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    for t in "$shared"/traces/pytorch_snapshot/*.pickle.gz; do [ -f "$t" ] && traces+=("$t"); done
else
    echo "no $shared/traces/pytorch_snapshot: only $(basename "$trace")"
fi
printf 'seq,action,addr,size,stream,time_us\n0,alloc,140000000000000,1048576,0,\n' >"$tmp/one.csv"
: >"$tmp/strings"
for t in "${traces[@]}"; do
    name=$(basename "$t")
    "$cli" tune "$t" --pytorch-version 2.6 --json >"$tmp/t.json" 2>"$tmp/err" ||
        { fail "$name: tune --json: $(cat "$tmp/err")"; continue; }
    "$cli" tune "$t" --pytorch-version 2.6 >"$tmp/t.txt" 2>"$tmp/err" ||
        { fail "$name: tune: $(cat "$tmp/err")"; continue; }
    # "pytorch|sublet <TAB> conf <TAB> fraction of the call", from the JSON and the text
    python3 - "$tmp/t.json" "$tmp/t.txt" >>"$tmp/strings" <<'PY' || fail "$name: strings"
import json, re, sys
d = json.load(open(sys.argv[1]))
out = set()
def add(kind, conf, call):
    out.add("%s\t%s\t%s" % (kind, conf, "" if call is None else repr(call)))
for kind in ("pytorch", "sublet"):
    a = d[kind]
    env = a["env"].split("=", 1)[1]
    assert env == a["evaluation"]["conf"], (env, a["evaluation"]["conf"])
    add(kind, env, a.get("memory_fraction_call"))
    for e in d["pareto"][kind]:
        add(kind, e["conf"], e.get("memory_fraction_call"))
w = d.get("warmup")
if w and w["env"]:
    add("sublet", w["env"].split("=", 1)[1], None)
    add("sublet", w["conf"], None)
section = None
for line in open(sys.argv[2]):
    line = line.rstrip("\n")
    m = re.match(r"(PYTORCH_CUDA_ALLOC_CONF|SUBLET_ALLOC_CONF)=(.*)$", line.strip())
    if m:
        add("pytorch" if m.group(1)[0] == "P" else "sublet", m.group(2), None)
    m = re.match(r"  and before the first CUDA allocation: "
                 r"torch\.cuda\.set_per_process_memory_fraction\((.*)\)$", line)
    if m:
        add("pytorch", d["pytorch"]["evaluation"]["conf"], float(m.group(1)))
    if line == "  PyTorch knobs:":
        section = "pytorch"
    elif line == "  all (SUBLET_ALLOC_CONF):":
        section = "sublet"
    m = re.match(r"  [* ] \d+(\.\d)? MiB +\S+ % +\S+ \S+ +\d+ +(\S+)", line)
    if section and m:
        conf = "" if m.group(2) == '""' else m.group(2)
        call = re.search(r" \+ torch\.cuda\.set_per_process_memory_fraction\((.*)\)", line)
        add(section, conf, float(call.group(1)) if call else None)
print("\n".join(sorted(out)))
PY
done
sort -u "$tmp/strings" -o "$tmp/strings"
n=0
while IFS=$'\t' read -r kind conf call; do
    n=$((n + 1))
    # sublet's parser under 2.6 (a replay of one allocation: exit 2 on a settings error)
    "$cli" replay "$tmp/one.csv" --pytorch-version 2.6 --conf "$conf" >/dev/null 2>"$tmp/err" ||
        fail "sublet under 2.6 refuses $kind '$conf': $(cat "$tmp/err")"
    case "$conf" in *per_process_memory_fraction*) fail "2.6 $kind string with 2.9's option: $conf" ;; esac
    [ "$kind" = pytorch ] && [ -n "$oracle" ] || continue
    # PyTorch 2.6's own parser, with the call the answer comes with
    frac=()
    [ -n "$call" ] && frac=(--fraction "$call")
    torch_takes "$conf" "$tmp/one.csv" "${frac[@]}" ||
        fail "PyTorch 2.6 refuses '$conf': $(head -3 "$tmp/err")"
done <"$tmp/strings"
echo "$n strings of ${#traces[@]} traces checked under 2.6$([ -n "$oracle" ] && echo ", PyTorch's by its own parser")"
[ "$n" -ge 3 ] || fail "too few strings: $n"
grep -q $'^pytorch\tgarbage_collection_threshold:0.95\t0.999$' "$tmp/strings" ||
    fail "the collector's answer with its call is not among the strings checked"

[ $fails -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "cli_tune_release: all passed"
