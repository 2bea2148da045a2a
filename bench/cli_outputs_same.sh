#!/usr/bin/env bash
# sublet — the CLI's outputs before and after a change that must not change
# them (a move of code between layers, a renderer merged): every affected
# command on every input, its stdout, stderr, exit status and any file it
# writes, saved by one CLI and compared, byte for byte, with another's.
#
#   bench/cli_outputs_same.sh record DIR SUBLET   # outputs of SUBLET into DIR
#   bench/cli_outputs_same.sh compare DIR SUBLET  # SUBLET's against DIR's
#
# e.g. build main's CLI, record, build the change, compare:
#   git worktree add /tmp/base main && cmake -S /tmp/base -B /tmp/base/build &&
#   cmake --build /tmp/base/build --target sublet_cli
#   bench/cli_outputs_same.sh record /tmp/outputs /tmp/base/build/sublet
#   bench/cli_outputs_same.sh compare /tmp/outputs build/sublet
# (in bench/, not tests/: ctest runs every tests/cli_*.sh with the CLI alone)  The inputs:
# tests/data/* and ../shared/traces/pytorch_snapshot/* (SUBLET_SHARED_TRACES
# names another folder; absent: tests/data only).  The lines that carry a
# measured time are masked before saving (mask() below names each); nothing
# else is.  `tune` runs on the small inputs only (it is slow).
# compare prints each difference and "N outputs compared, M differ"; exit 1
# when one differs.
set -u
mode=${1:?usage: cli_outputs_same.sh record|compare DIR SUBLET}
dir=${2:?usage: cli_outputs_same.sh record|compare DIR SUBLET}
cli=${3:?usage: cli_outputs_same.sh record|compare DIR SUBLET}
root=$(cd "$(dirname "$0")/.." && pwd)
cli=$(cd "$(dirname "$cli")" && pwd)/$(basename "$cli")
shared=${SUBLET_SHARED_TRACES:-$root/../shared/traces/pytorch_snapshot}
case $mode in
record) rm -rf "$dir" && mkdir -p "$dir" || exit 2; out=$dir ;;
compare) [ -d "$dir" ] || { echo "no $dir: record first" >&2; exit 2; }
         out=$(mktemp -d) ;;
*) echo "usage: cli_outputs_same.sh record|compare DIR SUBLET" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"; [ "$mode" = compare ] && rm -rf "$out"' EXIT

# The only measured times in these outputs, masked: `tune`'s text ("N
# replays, 1.23 s"), its JSON ("seconds": 1.23) and the report's tuning
# section ("N replays, 1.23 s, on a").
mask() {
    sed -E -e 's/( replays, )[0-9]+\.[0-9]+ s(,|$)/\1<time> s\2/' \
        -e 's/("seconds": ?)[-+0-9.eE]+/\1<time>/'
}

n=0
# run NAME ARGS...: the CLI's stdout, stderr and status under NAME, with any
# file it wrote into $work (report pages) appended to stdout's record.
run() {
    local name=$1
    shift
    rm -rf "$work"/* 2>/dev/null
    (cd "$work" && "$cli" "$@" >"$work/.stdout" 2>"$work/.stderr")
    local rc=$?
    {
        mask <"$work/.stdout"
        echo "== exit $rc"
        for f in "$work"/*; do
            [ -f "$f" ] || continue
            echo "== file $(basename "$f")"
            mask <"$f"
        done
    } >"$out/$name.out"
    mask <"$work/.stderr" >"$out/$name.err"
    n=$((n + 1))
}

inputs=()
for f in "$root"/tests/data/*; do
    case $f in *.md) continue ;; esac
    inputs+=("$f")
done
if [ -d "$shared" ]; then
    for f in "$shared"/*; do inputs+=("$f"); done
fi

small() {  # the inputs tune runs on
    case $(basename "$1") in
    cs336_attention_microbench.* | nonmonotone.* | offload_gc.* | rmm_synthetic.* | expandable_by_hand.*) return 0 ;;
    esac
    return 1
}

for t in "${inputs[@]}"; do
    b=$(basename "$(dirname "$t")")_$(basename "$t")
    run "$b.replay" replay "$t"
    run "$b.replay-json" replay "$t" --json
    run "$b.replay-2g" replay "$t" --device-memory 2GiB
    run "$b.replay-2g-json" replay "$t" --device-memory 2GiB --json
    run "$b.replay-at" replay "$t" --at 100
    run "$b.replay-stop" replay "$t" --device-memory 1GiB --stop-on-oom
    run "$b.replay-mincap" replay "$t" --min-capacity
    run "$b.replay-mincap-json" replay "$t" --min-capacity --json
    run "$b.replay-snap" replay "$t" --snapshot-out s.json
    run "$b.replay-snap-json" replay "$t" --snapshot-out s.json --json
    run "$b.replay-conf" replay "$t" --conf expandable_segments:True --no-placement-hints --check
    run "$b.replay-ooms" replay "$t" --replay-ooms --prelude allocate
    SUBLET_REPLAY_WHOLE=1 run "$b.replay-whole" replay "$t"
    SUBLET_REPLAY_WHOLE=1 run "$b.replay-whole-json" replay "$t" --json
    SUBLET_REPLAY_WHOLE=1 run "$b.mincap-whole" mincap "$t"
    run "$b.frag" frag "$t"
    run "$b.frag-at" frag "$t" --at 100
    run "$b.frag-json" frag "$t" --json
    run "$b.frag-2g" frag "$t" --device-memory 2GiB --width 32 --top 2
    run "$b.mincap" mincap "$t"
    run "$b.mincap-json" mincap "$t" --json
    run "$b.mincap-at" mincap "$t" --at 100 --resolution 8MiB
    run "$b.mincap-conf" mincap "$t" --conf expandable_segments:True --no-placement-hints
    run "$b.frag-conf" frag "$t" --conf max_split_size_mb:64
    run "$b.diagnose-cand" diagnose "$t" --device-memory 3GiB --candidate expandable_segments:True --detailed 1
    run "$b.diagnose" diagnose "$t"
    run "$b.diagnose-2g" diagnose "$t" --device-memory 2GiB
    run "$b.summary" summary "$t"
    run "$b.report" report "$t" -o x.html
    if small "$t"; then
        run "$b.tune" tune "$t" --threads 1
        run "$b.tune-json" tune "$t" --threads 1 --json
        run "$b.tune-2g" tune "$t" --threads 1 --device-memory 2GiB --no-warmup
        run "$b.report-tune" report "$t" -o x.html --tune --threads 1
    fi
done
# the attention trace on devices too small for it: OOMs and their diagnosis
a=$root/tests/data/cs336_attention_microbench.pickle.gz
for m in 3GiB 3500MiB 4GiB; do
    run "attention.replay-$m" replay "$a" --device-memory "$m"
    run "attention.replay-json-$m" replay "$a" --device-memory "$m" --json
    run "attention.diagnose-$m" diagnose "$a" --device-memory "$m"
    run "attention.diagnose-json-$m" diagnose "$a" --device-memory "$m" --json
    run "attention.frag-$m" frag "$a" --device-memory "$m"
done
run "attention.tune-2traces" tune "$a" "$root/tests/data/nonmonotone.events.csv" --threads 1
run "stdin.replay" replay - <"$root/tests/data/nonmonotone.events.csv"
run "missing.replay" replay /nonexistent.csv
run "missing.frag" frag /nonexistent.csv
run "missing.mincap" mincap /nonexistent.csv
run "missing.tune" tune /nonexistent.csv

if [ "$mode" = record ]; then
    echo "cli_outputs_same: $n commands recorded in $dir"
    exit 0
fi
differ=0
compared=0
for f in "$dir"/*; do
    compared=$((compared + 1))
    g=$out/$(basename "$f")
    if ! cmp -s "$f" "$g"; then
        differ=$((differ + 1))
        echo "DIFFERS: $(basename "$f")"
        diff "$f" "$g" | head -20
    fi
done
for g in "$out"/*; do
    [ -e "$dir/$(basename "$g")" ] || { differ=$((differ + 1)); echo "NEW: $(basename "$g")"; }
done
echo "cli_outputs_same: $compared outputs compared ($n commands, stdout+files and stderr each), $differ differ"
[ "$differ" = 0 ]
