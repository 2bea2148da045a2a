#!/usr/bin/env bash
# `sublet tune` on long generated logs (issue 31): wall time, CPU time and
# peak RSS of a reference binary (main's, "before") and of this build
# ("after"), each in its own process, and whether they print the same
# (everything but the header's replay count and seconds, which measure the
# work).
#
#   bench/tune_stream.sh BUILD_DIR OLD_SUBLET [EVENTS...]   default EVENTS: 1000000 10000000
#
# The log: bench_stream_gen's `random` workload (seed 0) as an event log,
# $SUBLET_BENCH_DIR/synth_N.slog (default /tmp/sublet-stream-bench, shared
# with bench/bench_stream.sh).  Peak RSS from /usr/bin/time -v.  On a loaded
# machine compare the CPU seconds (user + system), which the load inflates
# far less than the wall time.  SUBLET_TUNE_ARGS: extra tune options for both.
# SUBLET_TUNE_REUSE_BEFORE=1: keep the reference's output and timing from an
# earlier run of this script when they are there (the reference does not
# change between runs).
set -eu
build=${1:?usage: tune_stream.sh BUILD_DIR OLD_SUBLET [EVENTS...]}
old=${2:?usage: tune_stream.sh BUILD_DIR OLD_SUBLET [EVENTS...]}
shift 2
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
dir=${SUBLET_BENCH_DIR:-/tmp/sublet-stream-bench}
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
echo "# $(date -u +%Y-%m-%d) machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
printf '%-10s %-7s %10s %10s %10s %8s  %s\n' events binary wall_s cpu_s rss_mib replays output
status=0
for n in "${sizes[@]}"; do
    log=$dir/synth_$n.slog
    [ -f "$log" ] || "$build/bench_stream_gen" "$n" "$dir/synth_$n" 0 random >/dev/null
    rm -f "$dir/synth_$n.events.csv"
    for which in before after; do
        bin=$old
        [ $which = after ] && bin=$build/sublet
        if [ $which = before ] && [ -n "${SUBLET_TUNE_REUSE_BEFORE:-}" ] &&
           [ -s "$dir/tune_before.$n.txt" ] && [ -s "$dir/tune_before.$n.time" ]; then
            :
        else
        # shellcheck disable=SC2086
        /usr/bin/time -v "$bin" tune "$log" ${SUBLET_TUNE_ARGS:-} >"$dir/tune_$which.$n.txt" \
            2>"$dir/tune_$which.$n.time" || true
        fi
        t=$dir/tune_$which.$n.time
        wall=$(awk -F': ' '/Elapsed/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$t")
        cpu=$(awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {printf "%.2f", u + s}' "$t")
        rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$t")
        reps=$(head -1 "$dir/tune_$which.$n.txt" | grep -oE '[0-9]+ replays' | cut -d' ' -f1)
        same=-
        if [ $which = after ]; then
            if cmp -s <(sed -E '1s/, [0-9]+ replays, [0-9.]+ s$//' "$dir/tune_before.$n.txt") \
                      <(sed -E '1s/, [0-9]+ replays, [0-9.]+ s$//' "$dir/tune_after.$n.txt"); then
                same=same
            else
                same=DIFFERENT
                status=1
            fi
        fi
        printf '%-10s %-7s %10s %10s %10s %8s  %s\n' "$n" $which "$wall" "$cpu" "$rss" "${reps:--}" $same
    done
done
exit $status
