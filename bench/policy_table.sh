#!/usr/bin/env bash
# bench/policy_table.sh — the policy table of README and docs/policies.md.
#
# Builds bench_policies (bench/bench_policies.c) and runs it on every trace
# in ../shared/traces/pytorch_snapshot (or TRACE_DIR): min-capacity overhead
# over the peak of live requested bytes under PyTorch's default,
# max_split_size_mb:128, expandable_segments:True and policy:stitch, the map,
# unmap and reserve calls of the last two, the median per setting and the
# bar of issue 6 (PASS/FAIL).  Writes bench/results/policies.md and prints it,
# and refreshes the copy of the table in README.md (between its
# "policy-table" markers).
#
# usage: bench/policy_table.sh [TRACE_DIR]
#   SUBLET_BUILD_DIR  build directory (default: build-policies in the source root)
#   --strict is passed through when POLICY_STRICT=1: exit 1 when the bar fails.
# Exits 0 with a note when the trace directory is absent (nothing to measure).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SUBLET_BUILD_DIR:-$root/build-policies}
traces=${1:-$root/../shared/traces/pytorch_snapshot}
if [ ! -d "$traces" ]; then
    echo "policy_table: $traces: no trace directory, skipped" >&2
    exit 0
fi
traces=$(cd "$traces" && pwd)
cmake -S "$root" -B "$build" -DSUBLET_BUILD_TESTS=OFF -DSUBLET_BUILD_DROPINS=OFF -DSUBLET_WERROR=ON >/dev/null
cmake --build "$build" --target bench_policies -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
mkdir -p "$root/bench/results"
out=$root/bench/results/policies.md
strict=()
[ "${POLICY_STRICT:-0}" = 1 ] && strict=(--strict)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
rc=0
"$build/bench_policies" "$traces" "${strict[@]}" >"$tmp" || rc=$?
if [ "$rc" -ne 0 ] && [ ! -s "$tmp" ]; then
    exit "$rc"
fi
{
    echo "<!-- produced by bench/policy_table.sh (bench/bench_policies.c) on the traces in"
    echo "     ../shared/traces/pytorch_snapshot; rerun it to refresh this file -->"
    echo
    cat "$tmp"
} >"$out"
cat "$out"
echo "written: bench/results/policies.md" >&2
# docs/policies.md's copy of the table, between its policy-table markers
page=$root/docs/policies.md
if [ -f "$page" ] && grep -q '^<!-- policy-table' "$page"; then
    awk -v tbl="$tmp" '
        /^<!-- policy-table/ { print; while ((getline l < tbl) > 0) if (l ~ /^\|/) print l; skip = 1; next }
        /^<!-- \/policy-table -->/ { skip = 0 }
        !skip { print }' "$page" >"$page.tmp" && mv "$page.tmp" "$page"
    echo "written: docs/policies.md (policy table)" >&2
fi
exit "$rc"
