#!/usr/bin/env bash
# The exhaustive grid check of `sublet tune` on every shared PyTorch snapshot:
# each trace's 1050 settings evaluated plainly (sublet_replay_min_capacity +
# one replay on the device) against sublet_tune's two answers (bench_tune
# grid; see bench/bench_tune.c).  About a minute on two cores.
#   bench/tune_grid.sh [BUILD_DIR] [SHARED_DIR]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shared=${2:-$here/../shared}
dir=$shared/traces/pytorch_snapshot
[ -x "$build/bench_tune" ] || { echo "no $build/bench_tune: build the project first" >&2; exit 2; }
[ -d "$dir" ] || { echo "no shared traces at $dir" >&2; exit 77; }
status=0
for f in "$dir"/*.pickle.gz; do
    "$build/bench_tune" grid "$f" || status=1
done
exit $status
