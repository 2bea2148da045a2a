#!/usr/bin/env bash
# sublet — the function-length check (scripts/long-functions, issue 33): no
# function of src/, cli/ or plugins/ is over 120 lines (none allowed: the
# last ones were split at their steps).  Also, on
# a planted tree: a function of 121 lines fails, named with its file and
# line; one of 120 passes; a function in tests/ is not held to it; an
# allowed name that is short again is noted.  $1 (the CLI) is not used.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/scripts/long-functions
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }

# 1. this tree
"$check" --root "$root" >"$tmp/out" 2>&1 || fail "the tree: $(cat "$tmp/out")"
grep -q '^long-functions: no function over 120 lines' "$tmp/out" || fail "no verdict: $(cat "$tmp/out")"

# 2. a planted tree: fn(n) writes a function of n lines in all
fn() {
    echo "static int $1(int x)"
    echo "{"
    for _ in $(seq 1 $(($2 - 3))); do echo "    x++;"; done
    echo "}"
}
mkdir -p "$tmp/t/src/engine" "$tmp/t/cli" "$tmp/t/tests"
{ echo "/* a file */"; echo; fn fits 120; } >"$tmp/t/src/engine/a.c"
fn in_tests 300 >"$tmp/t/tests/t.c"
"$check" --root "$tmp/t" >"$tmp/out" 2>&1 || fail "120 lines refused: $(cat "$tmp/out")"
{ fn short 10; echo; fn too_long 121; } >"$tmp/t/cli/b.c"
"$check" --root "$tmp/t" >"$tmp/out" 2>&1
[ $? -eq 1 ] || fail "121 lines: exit code"
grep -qx '121 cli/b.c:12 too_long' "$tmp/out" || fail "121 lines: the line: $(cat "$tmp/out")"
grep -q 'fits\|in_tests\|short' "$tmp/out" && fail "a function within the limit listed: $(cat "$tmp/out")"
"$check" --root "$tmp/t" --allow too_long --allow fits >"$tmp/out" 2>&1 ||
    fail "--allow: $(cat "$tmp/out")"
grep -qx 'allowed: 121 cli/b.c:12 too_long' "$tmp/out" || fail "--allow: listed: $(cat "$tmp/out")"
grep -q 'note: --allow fits: within the limit' "$tmp/out" || fail "--allow: note: $(cat "$tmp/out")"
"$check" --root "$tmp/t" --max 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--max 0: exit code"

if [ "$fails" -ne 0 ]; then
    echo "cli_long_functions: $fails failed" >&2
    exit 1
fi
echo "cli_long_functions: ok"
