#!/usr/bin/env bash
# sublet — `sublet replay` over a stream (events CSV, event log) gives the
# same stdout, stderr and exit status, byte for byte, as over the trace loaded
# whole (SUBLET_REPLAY_WHOLE=1), from a file and from standard input ('-'):
# the committed traces, the event logs of the fuzz seeds (a torn one included), a gzip'd CSV, the shared traces when
# ../shared is there, under several options (OOMs and their diagnosis, --at,
# --stop-on-oom, --check); and malformed or truncated CSVs give the same error
# (with its line) and nothing on stdout.  $1 is the CLI.
set -u
cli=${1:?usage: cli_replay_stream.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checked=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

same() { # same TRACE OPTIONS...
    local f=$1
    shift
    "$cli" replay "$f" "$@" >"$tmp/s.out" 2>"$tmp/s.err"
    local a=$?
    SUBLET_REPLAY_WHOLE=1 "$cli" replay "$f" "$@" >"$tmp/w.out" 2>"$tmp/w.err"
    local b=$?
    checked=$((checked + 1))
    if [ $a != $b ] || ! cmp -s "$tmp/s.out" "$tmp/w.out" || ! cmp -s "$tmp/s.err" "$tmp/w.err"; then
        fail "$f $*: streamed (rc $a) and whole (rc $b) differ"
        diff "$tmp/s.out" "$tmp/w.out" | head -5 >&2
        diff "$tmp/s.err" "$tmp/w.err" | head -5 >&2
    fi
}

traces=("$data"/*.events.csv "$here"/../fuzz/seeds/fuzz_trace_log/*.slog)
gzip -c "$data/nonmonotone.events.csv" >"$tmp/nonmonotone.events.csv.gz"
traces+=("$tmp/nonmonotone.events.csv.gz")
# RMM logs and Kineto traces: streamed in two passes (the prelude, then the rows), plain
# and gzip'd
gzip -c "$data/rmm_synthetic.rmm.csv" >"$tmp/rmm_synthetic.rmm.csv.gz"
gzip -c "$data/kineto_synthetic.trace.json" >"$tmp/kineto_synthetic.trace.json.gz"
traces+=("$data"/*.rmm.csv "$tmp/rmm_synthetic.rmm.csv.gz" "$data"/*.trace.json
    "$tmp/kineto_synthetic.trace.json.gz")
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    traces+=("$shared"/traces/pytorch_snapshot/*.events.csv)
    # the shared Kineto trace (42 MB of JSON, each path ~25 s under ASan): one comparison,
    # and none under a sanitizer (scripts/test sets ASAN_OPTIONS there)
    [ -n "${ASAN_OPTIONS:-}" ] || kineto=("$shared"/traces/kineto/*.json.gz)
else
    echo "no shared traces at $shared: the committed ones only"
fi
for f in "${traces[@]}"; do
    [ -f "$f" ] || continue
    same "$f"
    same "$f" --json
    same "$f" --at 300 --json
    same "$f" --device-memory 1GiB
    same "$f" --device-memory 1GiB --stop-on-oom --json
    same "$f" --no-placement-hints --prelude allocate --json
done
same "$data/nonmonotone.events.csv" --check
for f in ${kineto[@]+"${kineto[@]}"}; do
    [ -f "$f" ] || continue
    same "$f" --device-memory 1GiB --stop-on-oom --json
done

# standard input ('-'): streamed through its binary copy (any format; those
# that do not stream are read whole by the stream), against loaded whole
same_stdin() { # same_stdin TRACE OPTIONS...
    local f=$1
    shift
    "$cli" replay - "$@" <"$f" >"$tmp/s.out" 2>"$tmp/s.err"
    local a=$?
    SUBLET_REPLAY_WHOLE=1 "$cli" replay - "$@" <"$f" >"$tmp/w.out" 2>"$tmp/w.err"
    local b=$?
    checked=$((checked + 1))
    if [ $a != $b ] || ! cmp -s "$tmp/s.out" "$tmp/w.out" || ! cmp -s "$tmp/s.err" "$tmp/w.err"; then
        fail "stdin < $f $*: streamed (rc $a) and whole (rc $b) differ"
        diff "$tmp/s.out" "$tmp/w.out" | head -5 >&2
        diff "$tmp/s.err" "$tmp/w.err" | head -5 >&2
    fi
}
for f in "$data"/*.events.csv "$data"/*.pickle.gz "$here"/../fuzz/seeds/fuzz_trace_log/*.slog \
    "$tmp/nonmonotone.events.csv.gz" "$data"/*.rmm.csv "$data"/*.trace.json; do
    same_stdin "$f"
    same_stdin "$f" --json --device-memory 1GiB
    same_stdin "$f" --at 30
done

# malformed and truncated inputs: the same error, from the same line
csv=$data/cs336_attention_microbench.events.csv
head -c 3000 "$csv" >"$tmp/cut.events.csv"                      # cut inside a row
{ head -n 40 "$csv"; echo "41,alloc,12,x,0,"; tail -n +42 "$csv"; } >"$tmp/bad.events.csv"
{ head -n 40 "$csv"; echo; tail -n +41 "$csv"; } >"$tmp/empty.events.csv"
{ head -n 40 "$csv"; echo "40,pre_alloc,12,512,0,"; tail -n +41 "$csv"; } >"$tmp/pre.events.csv"
{ cat "$csv"; echo "999999,alloc,12"; } >"$tmp/last.events.csv"   # past --at 10 too
for f in cut bad empty pre last; do
    for opts in "" "--json --at 10"; do
        # shellcheck disable=SC2086
        same "$tmp/$f.events.csv" $opts
        grep -q ": line [0-9]*: " "$tmp/s.err" || fail "$f $opts: no line in the error: $(cat "$tmp/s.err")"
        [ -s "$tmp/s.out" ] && fail "$f $opts: output on stdout"
        # shellcheck disable=SC2086
        same_stdin "$tmp/$f.events.csv" $opts
        grep -q "^sublet replay: stdin: line [0-9]*: " "$tmp/s.err" ||
            fail "stdin < $f $opts: no line in the error: $(cat "$tmp/s.err")"
    done
done

# the same for an RMM log: a bad row after frees that imply prelude rows, a cut row
rmm=$data/rmm_synthetic.rmm.csv
{ head -n 50 "$rmm"; echo "1,00:00:01.000000,allocate,0xzz,512,0x0"; tail -n +51 "$rmm"; } \
    >"$tmp/bad.rmm.csv"
head -c 5000 "$rmm" >"$tmp/cut.rmm.csv"
for f in bad cut; do
    for opts in "" "--json --at 10"; do
        # shellcheck disable=SC2086
        same "$tmp/$f.rmm.csv" $opts
        [ "$f" = cut ] && continue # a cut row is a row with fewer columns, or a shorter one
        grep -q ": line 51: " "$tmp/s.err" || fail "$f.rmm.csv $opts: not line 51: $(cat "$tmp/s.err")"
        # shellcheck disable=SC2086
        same_stdin "$tmp/$f.rmm.csv" $opts
    done
done

[ $fails -eq 0 ] || exit 1
echo "cli_replay_stream: ok ($checked comparisons)"
