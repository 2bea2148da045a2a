#!/usr/bin/env bash
# sublet — replaying long traces whole and as a stream (sublet/trace_stream.h):
# peak RSS and events/s of each, and their ratios, measured in the same run.
#
#   bench/bench_stream.sh BUILD_DIR [EVENTS...]     default EVENTS: 1000000 10000000
#
# For each size and workload, bench_stream_gen writes a synthetic trace (<= 2,000
# live blocks, a second stream, empty_caches) as an events CSV and as an event log
# under $SUBLET_BENCH_DIR (default /tmp/sublet-stream-bench; a 10^8-event CSV
# takes ~6 GB, its log ~1.7 GB: check `df -h`).  Then, each in its own process:
#   bench_stream whole|stream FILE      the library: load + sublet_replay_run
#                                       against stream + sublet_replay_stream
#   sublet replay FILE --json           the CLI, whole (SUBLET_REPLAY_WHOLE=1)
#                                       against streamed (it replays twice:
#                                       the report and the fragmentation state)
# Peak RSS from /usr/bin/time -v (Debian's `time` package).  The whole-trace
# runs are skipped above SUBLET_BENCH_WHOLE_MAX events (default 10^7: at 10^8
# they need ~12 GB).
#
# Workloads ($SUBLET_BENCH_WORKLOADS, default "random steps"; bench_stream_gen
# describes them): random (log-uniform sizes, files synth_N.*) and steps (a
# training loop whose shapes repeat, files steps_N.*).
#
# The 10^8 run, when the disk allows (streams only):
#   SUBLET_BENCH_WHOLE_MAX=0 bench/bench_stream.sh build 100000000
set -eu
build=${1:?usage: bench_stream.sh BUILD_DIR [EVENTS...]}
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
dir=${SUBLET_BENCH_DIR:-/tmp/sublet-stream-bench}
whole_max=${SUBLET_BENCH_WHOLE_MAX:-10000000}
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
echo "# machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# run LABEL CMD...: prints "LABEL seconds rss_kib cpu_seconds" (cpu: user + system, which a
# loaded machine inflates far less than the wall time)
run() {
    local label=$1
    shift
    /usr/bin/time -v "$@" >"$dir/out" 2>"$dir/time" || { cat "$dir/time" >&2; exit 1; }
    local s rss cpu
    s=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); t=0; for(i=1;i<=n;i++) t=t*60+a[i]; print t}' "$dir/time")
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time")
    cpu=$(awk -F': ' '/User time|System time/ {t += $2} END {print t}' "$dir/time")
    echo "$label $s $rss $cpu"
}

workloads=${SUBLET_BENCH_WORKLOADS:-random steps}
for n in "${sizes[@]}"; do
  for w in $workloads; do
    case $w in
    random) p=$dir/synth_$n ;;
    steps) p=$dir/steps_$n ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
    esac
    [ -f "$p.slog" ] && [ -f "$p.events.csv" ] || "$build/bench_stream_gen" "$n" "$p" 0 "$w" >/dev/null
    for f in "$p.events.csv" "$p.slog"; do
        kind=${f##*.}
        lines=()
        if [ "$n" -le "$whole_max" ]; then
            lines+=("$(run lib_whole "$build/bench_stream" whole "$f")")
        fi
        lines+=("$(run lib_stream "$build/bench_stream" stream "$f")")
        if [ "$n" -le "$whole_max" ]; then
            lines+=("$(SUBLET_REPLAY_WHOLE=1 run cli_whole "$build/sublet" replay "$f" --json)")
        fi
        lines+=("$(run cli_stream "$build/sublet" replay "$f" --json)")
        printf '%s\n' "${lines[@]}" | awk -v n="$n" -v w="$w" -v kind="$kind" -v size="$(stat -c %s "$f")" '
            { s[$1] = $2; r[$1] = $3; c[$1] = $4 }
            END {
                printf "events=%d workload=%s format=%s file_mb=%.0f\n", n, w, kind, size / 1e6
                split("lib_whole lib_stream cli_whole cli_stream", k, " ")
                for (i = 1; i <= 4; i++) if (k[i] in s)
                    printf "  %-10s %8.2f s  %10.2f Mevents/s  peak RSS %8.1f MiB  cpu %8.2f s  %10.2f Mevents/cpu-s\n",
                        k[i], s[k[i]], n / s[k[i]] / 1e6, r[k[i]] / 1024, c[k[i]],
                        (c[k[i]] > 0 ? n / c[k[i]] / 1e6 : 0)
                if ("lib_whole" in s)
                    printf "  library: stream/whole  time x%.2f  RSS x%.3f\n",
                        s["lib_stream"] / s["lib_whole"], r["lib_stream"] / r["lib_whole"]
                if ("cli_whole" in s)
                    printf "  CLI:     stream/whole  time x%.2f  RSS x%.3f\n",
                        s["cli_stream"] / s["cli_whole"], r["cli_stream"] / r["cli_whole"]
            }'
    done
  done
done
