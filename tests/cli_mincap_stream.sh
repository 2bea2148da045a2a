#!/usr/bin/env bash
# sublet — `sublet mincap` and `sublet replay --min-capacity` over a stream
# (events CSV, event log: each probe rewinds the file) give the same stdout,
# stderr and exit status, byte for byte, as over the trace loaded whole
# (SUBLET_REPLAY_WHOLE=1): the committed traces, the fuzz seeds' event logs,
# a gzip'd CSV, the shared traces when ../shared is there, under options that
# change the answer (--conf, --prelude, --at, --resolution); and a malformed
# row gives the same error.  $1 is the CLI.
set -u
cli=${1:?usage: cli_mincap_stream.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checked=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

same() { # same CMD TRACE OPTIONS...   (CMD: mincap, or replay with --min-capacity)
    local cmd=$1 f=$2
    shift 2
    "$cli" $cmd "$f" "$@" >"$tmp/s.out" 2>"$tmp/s.err"
    local a=$?
    SUBLET_REPLAY_WHOLE=1 "$cli" $cmd "$f" "$@" >"$tmp/w.out" 2>"$tmp/w.err"
    local b=$?
    checked=$((checked + 1))
    if [ $a != $b ] || ! cmp -s "$tmp/s.out" "$tmp/w.out" || ! cmp -s "$tmp/s.err" "$tmp/w.err"; then
        fail "$cmd $f $*: streamed (rc $a) and whole (rc $b) differ"
        diff "$tmp/s.out" "$tmp/w.out" | head -5 >&2
        diff "$tmp/s.err" "$tmp/w.err" | head -5 >&2
    fi
}

traces=("$data"/*.events.csv "$here"/../fuzz/seeds/fuzz_trace_log/*.slog)
gzip -c "$data/nonmonotone.events.csv" >"$tmp/nonmonotone.events.csv.gz"
traces+=("$tmp/nonmonotone.events.csv.gz")
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    traces+=("$shared"/traces/pytorch_snapshot/cs336_lm_win.events.csv
             "$shared"/traces/pytorch_snapshot/small_cnn_counterfactual.events.csv)
else
    echo "no shared traces at $shared: the committed ones only"
fi
for f in "${traces[@]}"; do
    [ -f "$f" ] || continue
    same mincap "$f"
    same mincap "$f" --json --conf expandable_segments:True
    same mincap "$f" --at 300 --no-placement-hints --prelude allocate --json
    same "replay --min-capacity" "$f" --json
done
same mincap "$data/nonmonotone.events.csv" --resolution 1MiB --conf policy:stitch

# a malformed row (after the rows --at replays too), a bad conf
csv=$data/cs336_attention_microbench.events.csv
{ head -n 40 "$csv"; echo "41,alloc,12,x,0,"; tail -n +42 "$csv"; } >"$tmp/bad.events.csv"
same mincap "$tmp/bad.events.csv"
same mincap "$tmp/bad.events.csv" --at 5 --json
same "replay --min-capacity" "$tmp/bad.events.csv"
same mincap "$csv" --conf policy:nope
grep -q 'line 41' "$tmp/s.err" 2>/dev/null || true

[ $fails -eq 0 ] || exit 1
echo "cli_mincap_stream: ok ($checked comparisons)"
