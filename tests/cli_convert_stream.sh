#!/usr/bin/env bash
# sublet — `sublet convert IN OUT.csv[.gz]` from an events CSV or an event
# log streams (in memory for a chunk of rows), and `convert IN OUT.pickle /
# .json[.gz]` replays it from a stream; both write the same file, byte
# for byte, with the same stdout, stderr and exit status as from the trace
# loaded whole (SUBLET_REPLAY_WHOLE=1): the committed traces, the fuzz seeds'
# event logs (a torn one, stacks), a gzip'd CSV, the shared CSVs when
# ../shared is there; a malformed row gives the same error and leaves no
# file; a failed write leaves the target as it was.  $1 is the CLI.
set -u
cli=${1:?usage: cli_convert_stream.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checked=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

same() { # same IN EXT [OPTIONS...] (EXT: csv, csv.gz, pickle, json.gz...)
    local f=$1 ext=$2
    shift 2
    rm -f "$tmp/s.$ext" "$tmp/w.$ext"
    "$cli" convert "$f" "$tmp/s.$ext" "$@" >"$tmp/s.out" 2>"$tmp/s.err"
    local a=$?
    SUBLET_REPLAY_WHOLE=1 "$cli" convert "$f" "$tmp/w.$ext" "$@" >"$tmp/w.out" 2>"$tmp/w.err"
    local b=$?
    sed -i "s#$tmp/w\.#$tmp/s.#" "$tmp/w.out" "$tmp/w.err"
    checked=$((checked + 1))
    if [ $a != $b ] || ! cmp -s "$tmp/s.out" "$tmp/w.out" || ! cmp -s "$tmp/s.err" "$tmp/w.err"; then
        fail "$f -> $ext: streamed (rc $a) and whole (rc $b) differ"
        diff "$tmp/s.out" "$tmp/w.out" | head -5 >&2
        diff "$tmp/s.err" "$tmp/w.err" | head -5 >&2
    fi
    if [ -e "$tmp/w.$ext" ] || [ -e "$tmp/s.$ext" ]; then
        cmp -s "$tmp/s.$ext" "$tmp/w.$ext" || fail "$f -> $ext: the files differ"
    fi
}

traces=("$data"/*.events.csv "$here"/../fuzz/seeds/fuzz_trace_log/*.slog)
gzip -c "$data/nonmonotone.events.csv" >"$tmp/nonmonotone.events.csv.gz"
traces+=("$tmp/nonmonotone.events.csv.gz")
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    traces+=("$shared"/traces/pytorch_snapshot/*.events.csv)
else
    echo "no shared traces at $shared: the committed ones only"
fi
for f in "${traces[@]}"; do
    [ -f "$f" ] || continue
    same "$f" csv
    same "$f" csv.gz
    # to a snapshot: replayed from a stream with recording on
    same "$f" pickle
    same "$f" json.gz --device-memory 1GiB
    same "$f" json --conf expandable_segments:True
done
# sublet's CSV converted again is the same file; gunzip'd, the .gz is the CSV
"$cli" convert "$data/nonmonotone.events.csv" "$tmp/once.csv" >/dev/null &&
    "$cli" convert "$tmp/once.csv" "$tmp/twice.csv.gz" >/dev/null &&
    gzip -dc "$tmp/twice.csv.gz" | cmp -s - "$tmp/once.csv" || fail "CSV -> CSV -> CSV.gz changed"

# malformed rows: the same error, and no file
csv=$data/cs336_attention_microbench.events.csv
{ head -n 40 "$csv"; echo "41,alloc,12,x,0,"; tail -n +42 "$csv"; } >"$tmp/bad.events.csv"
{ head -n 40 "$csv"; echo "40,pre_alloc,12,512,0,"; tail -n +41 "$csv"; } >"$tmp/pre.events.csv"
for f in "$tmp/bad.events.csv" "$tmp/pre.events.csv"; do
    for ext in csv pickle; do
        same "$f" $ext
        [ -e "$tmp/s.$ext" ] && fail "$f -> $ext: a file was written"
        grep -q 'line 41' "$tmp/s.err" || fail "$f -> $ext: the error names its line: $(cat "$tmp/s.err")"
    done
done

# a failed write (the test hook: no space after 1000 bytes) leaves the target as it was
echo "before" >"$tmp/keep.csv"
SUBLET_TEST_FAIL_WRITE_AFTER=1000 "$cli" convert "$csv" "$tmp/keep.csv" >/dev/null 2>"$tmp/err"
[ $? = 1 ] || fail "failed write: exit 1"
grep -q 'write failed' "$tmp/err" || fail "failed write: message: $(cat "$tmp/err")"
[ "$(cat "$tmp/keep.csv")" = before ] || fail "failed write: the target changed"
[ "$(ls -A "$tmp" | grep -c '^\.keep')" = 0 ] || fail "failed write: a temporary file is left"

[ $fails -eq 0 ] || exit 1
echo "cli_convert_stream: ok ($checked comparisons)"
