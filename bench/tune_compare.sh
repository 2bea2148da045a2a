#!/usr/bin/env bash
# `sublet tune` against a reference binary: every line it prints (text and
# --json) must be byte-identical, except the timing (the header's seconds, the
# JSON's "seconds").  The inputs: the shared PyTorch snapshots, the committed
# tests/data traces that tune takes, and any FILE given.
#   bench/tune_compare.sh OLD_SUBLET NEW_SUBLET [FILE...]
# Prints one line a case (SAME / DIFF, with a diff of the first difference) and
# exits 1 when any differs.  SUBLET_TUNE_COMPARE_ARGS: extra tune options for
# both (e.g. "--threads 1").  The replay count (the header's "N replays", the
# JSON's "replays") is masked too: it measures the work, not the answers, and
# issue 31 cuts it.
set -u
old=${1:?usage: tune_compare.sh OLD_SUBLET NEW_SUBLET [FILE...]}
new=${2:?usage: tune_compare.sh OLD_SUBLET NEW_SUBLET [FILE...]}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    for f in "$here"/../shared/traces/pytorch_snapshot/*.pickle.gz \
             "$here"/tests/data/cs336_attention_microbench.events.csv \
             "$here"/tests/data/decomfl_opt_zo_fl.pickle.gz \
             "$here"/tests/data/nonmonotone.events.csv \
             "$here"/tests/data/offload_gc.events.csv; do
        [ -f "$f" ] && files+=("$f")
    done
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# strip the timing and the work: "..., 510 replays, 153.15 s", "seconds": 1.23
# and "replays": 510
norm() {
    sed -E -e '1s/, [0-9]+ replays, [0-9.]+ s$/, R replays, T s/' \
        -e 's/"seconds": ?[-0-9.e+]+/"seconds": T/' -e 's/"replays": ?[0-9]+/"replays": R/'
}
status=0
for f in "${files[@]}"; do
    for mode in text json; do
        extra=()
        [ $mode = json ] && extra=(--json)
        # shellcheck disable=SC2086
        "$old" tune "$f" "${extra[@]}" ${SUBLET_TUNE_COMPARE_ARGS:-} 2>"$tmp/oe" | norm >"$tmp/o"
        ro=${PIPESTATUS[0]}
        # shellcheck disable=SC2086
        "$new" tune "$f" "${extra[@]}" ${SUBLET_TUNE_COMPARE_ARGS:-} 2>"$tmp/ne" | norm >"$tmp/n"
        rn=${PIPESTATUS[0]}
        if [ "$ro" = "$rn" ] && cmp -s "$tmp/o" "$tmp/n" && cmp -s "$tmp/oe" "$tmp/ne"; then
            echo "SAME $mode $(basename "$f") (exit $ro)"
        else
            echo "DIFF $mode $(basename "$f") (exit $ro vs $rn)"
            diff "$tmp/o" "$tmp/n" | head -8
            diff "$tmp/oe" "$tmp/ne" | head -4
            status=1
        fi
    done
done
exit $status
