#!/usr/bin/env bash
# Issue 31, point 0, for the newest release: every PyTorch-side string
# `sublet tune` prints without --pytorch-version (the answer and the Pareto
# points) on the committed traces tune takes, the collector's answer among
# them (tests/data/offload_gc.events.csv), is taken by a real PyTorch on the
# null device (tests/torch/tune_strings.py); for 2.6 the oracle's parser
# checks them (tests/cli_tune_release.sh).  $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"

n=0
for f in cs336_attention_microbench.events.csv offload_gc.events.csv decomfl_opt_zo_fl.pickle.gz \
         nonmonotone.events.csv; do
  "$cli" tune "$repo/tests/data/$f" --json --threads 2 >"$tmp/$f.json" 2>"$tmp/err" ||
    fail "sublet tune $f: $(cat "$tmp/err")"
  n=$((n + 1))
done
grep -q '"garbage_collection_threshold' "$tmp/offload_gc.events.csv.json" ||
  fail "offload_gc: no collector answer to check"
"$cli" nullgpu --memory 24GiB -- "$py" "$repo/tests/torch/tune_strings.py" "$tmp"/*.json >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc = 0 ] || fail "tune_strings.py exited $rc"
grep -q "^tune_strings: \([0-9]*\) of \1 strings taken by PyTorch" "$tmp/out" || fail "not every string taken"
[ $fails = 0 ] && echo "tune_strings: $n traces" 
exit $((fails > 0))
