#!/usr/bin/env bash
# sublet — the streamed consumers of a long trace beside `sublet replay`:
# peak RSS and seconds of `replay --json`, `frag`, `frag --at N`, `diagnose`
# and `report` (each in its own process) on synthetic event logs of each
# size, to show that their memory follows the live blocks, not the length.
#
#   bench/bench_stream_cli.sh BUILD_DIR [EVENTS...]    default: 100000 1000000
#
# Traces from bench_stream_gen (<= 2,000 live blocks, a second stream,
# empty_caches) under $SUBLET_BENCH_DIR (default /tmp/sublet-stream-bench).
# replay, frag and report run on the default device (80 GiB: no OOM); then
# diagnose and the report again on 1 GiB, where ~7 % of the allocs OOM, so
# that they have OOMs to explain (replays under every candidate included;
# what they keep per OOM is an event index, 8 bytes a candidate).  Each
# line: "EVENTS COMMAND seconds peak_RSS_MiB"; SUBLET_REPLAY_WHOLE=1 gives
# the same lines with the trace loaded whole.
set -eu
build=${1:?usage: bench_stream_cli.sh BUILD_DIR [EVENTS...]}
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
dir=${SUBLET_BENCH_DIR:-/tmp/sublet-stream-bench}
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
echo "# machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); whole: ${SUBLET_REPLAY_WHOLE:-0}"
run() { # run EVENTS LABEL CMD...
    local n=$1 label=$2
    shift 2
    /usr/bin/time -v "$@" >"$dir/cli.out" 2>"$dir/cli.time" || { cat "$dir/cli.time" >&2; exit 1; }
    awk -F': ' -v n="$n" -v label="$label" '
        /Elapsed \(wall clock\)/ {k=split($2,a,":"); t=0; for(i=1;i<=k;i++) t=t*60+a[i]}
        /Maximum resident set size/ {r=$2}
        END {printf "%9d %-12s %8.2f s %8.1f MiB\n", n, label, t, r/1024}' "$dir/cli.time"
}
for n in "${sizes[@]}"; do
    p=$dir/synth_$n
    [ -f "$p.slog" ] || "$build/bench_stream_gen" "$n" "$p" >/dev/null
    f=$p.slog
    dm=(--device-memory 1GiB)
    run "$n" replay "$build/sublet" replay "$f" --json
    run "$n" frag "$build/sublet" frag "$f"
    run "$n" frag_at "$build/sublet" frag "$f" --at $((n / 2)) --json
    run "$n" report "$build/sublet" report "$f" -o "$dir/report.html"
    run "$n" diagnose_1g "$build/sublet" diagnose "$f" "${dm[@]}"
    run "$n" report_1g "$build/sublet" report "$f" -o "$dir/report.html" "${dm[@]}"
done
