#!/usr/bin/env bash
# sublet — `sublet frag`, `diagnose` and `report` over a stream (an events CSV
# or an event log, read once into its binary copy) give the same stdout,
# stderr, exit status and page, byte for byte, as over the trace loaded whole
# (SUBLET_REPLAY_WHOLE=1): the committed traces, the event logs of the fuzz
# seeds (a torn one and one with stacks included), a gzip'd CSV, the shared
# traces when ../shared is there, under several options (--at, a small device
# with OOMs, --json, the report's buckets, diagnosis and tuning); and malformed or
# truncated CSVs give the same error (with its line), nothing on stdout and no
# page.  $1 is the CLI.
set -u
cli=${1:?usage: cli_frag_stream.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checked=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# same TRACE COMMAND OPTIONS...: a report writes $tmp/page.html both times
same() {
    local f=$1 cmd=$2
    shift 2
    local extra=()
    [ "$cmd" = report ] && extra=(-o "$tmp/page.html")
    rm -f "$tmp/page.html"
    "$cli" "$cmd" "$f" "${extra[@]}" "$@" >"$tmp/s.out" 2>"$tmp/s.err"
    local a=$?
    [ -f "$tmp/page.html" ] && mv "$tmp/page.html" "$tmp/s.html"
    SUBLET_REPLAY_WHOLE=1 "$cli" "$cmd" "$f" "${extra[@]}" "$@" >"$tmp/w.out" 2>"$tmp/w.err"
    local b=$?
    [ -f "$tmp/page.html" ] && mv "$tmp/page.html" "$tmp/w.html"
    checked=$((checked + 1))
    if [ "$cmd" = report ]; then
        # the page's size follows the tuning's wall time (--tune: "9.87 s"
        # or "10.02 s"); the pages themselves are compared below
        sed -i -E 's/\([0-9]+ bytes\)/(N bytes)/' "$tmp/s.out" "$tmp/w.out"
    fi
    if [ $a != $b ] || ! cmp -s "$tmp/s.out" "$tmp/w.out" || ! cmp -s "$tmp/s.err" "$tmp/w.err"; then
        fail "$cmd $f $*: streamed (rc $a) and whole (rc $b) differ"
        diff "$tmp/s.out" "$tmp/w.out" | head -5 >&2
        diff "$tmp/s.err" "$tmp/w.err" | head -5 >&2
    fi
    if [ "$cmd" = report ]; then
        if [ -f "$tmp/s.html" ] || [ -f "$tmp/w.html" ]; then
            # the tuning's wall time is the one thing that differs (--tune)
            cmp -s <(sed -E 's/ replays, [0-9.]+ s, / replays, /' "$tmp/s.html" 2>/dev/null) \
                   <(sed -E 's/ replays, [0-9.]+ s, / replays, /' "$tmp/w.html" 2>/dev/null) ||
                fail "report $f $*: the pages differ"
        fi
        rm -f "$tmp/s.html" "$tmp/w.html"
    fi
}

traces=("$data"/*.events.csv "$here"/../fuzz/seeds/fuzz_trace_log/*.slog)
gzip -c "$data/nonmonotone.events.csv" >"$tmp/nonmonotone.events.csv.gz"
traces+=("$tmp/nonmonotone.events.csv.gz")
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    traces+=("$shared"/traces/pytorch_snapshot/*.events.csv "$shared"/traces/tf_bfc/*.events.csv)
else
    echo "no shared traces at $shared: the committed ones only"
fi
for f in "${traces[@]}"; do
    [ -f "$f" ] || continue
    same "$f" frag
    same "$f" frag --at 300 --json --width 40 --top 3
    same "$f" frag --at 5 --json # live blocks with their stacks (stacks.slog)
    same "$f" frag --at 40 --device-memory 1GiB
    same "$f" frag --json --device-memory 1GiB --conf expandable_segments:True
    same "$f" diagnose --device-memory 1GiB
    same "$f" diagnose --device-memory 1GiB --json --candidate max_split_size_mb:256
    same "$f" report --device-memory 1GiB
    same "$f" report --buckets 50 --no-diagnosis --conf garbage_collection_threshold:0.5
done
# the report's tuning over the stream too (sublet_tune_streams on its copy)
for f in "$data"/*.events.csv "$here"/../fuzz/seeds/fuzz_trace_log/stacks.slog; do
    [ -f "$f" ] || continue
    same "$f" report --tune --threads 2
done
same "$data/cs336_attention_microbench.events.csv" report --tune --device-memory 4GiB --no-warmup
# a report with a page of OOM maps from the committed trace, and an --at past the end
same "$data/cs336_attention_microbench.events.csv" report --device-memory 600MiB --oom-maps 5
same "$data/cs336_attention_microbench.events.csv" frag --at 100000

# malformed and truncated inputs: the same error, from the same line
csv=$data/cs336_attention_microbench.events.csv
head -c 3000 "$csv" >"$tmp/cut.events.csv"                      # cut inside a row
{ head -n 40 "$csv"; echo "41,alloc,12,x,0,"; tail -n +42 "$csv"; } >"$tmp/bad.events.csv"
{ head -n 40 "$csv"; echo "40,pre_alloc,12,512,0,"; tail -n +41 "$csv"; } >"$tmp/pre.events.csv"
{ cat "$csv"; echo "999999,alloc,12"; } >"$tmp/last.events.csv"
for f in cut bad pre last; do
    for cmd in frag diagnose report; do
        same "$tmp/$f.events.csv" $cmd
        grep -q ": line [0-9]*: " "$tmp/s.err" || fail "$f $cmd: no line in the error: $(cat "$tmp/s.err")"
        [ -s "$tmp/s.out" ] && fail "$f $cmd: output on stdout"
    done
done
same "$tmp/bad.events.csv" report --tune
grep -q ": line [0-9]*: " "$tmp/s.err" || fail "bad report --tune: no line in the error: $(cat "$tmp/s.err")"

[ $fails -eq 0 ] || exit 1
echo "cli_frag_stream: ok ($checked comparisons)"
