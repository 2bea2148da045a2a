#!/usr/bin/env bash
# sublet — the layer check (scripts/check-layers): it passes on this tree,
# includes and compiled objects both, and fails, naming the file and line, on
# each kind of upward dependency planted in a copy of the tree: an engine
# file including an analysis header, a public header of the engine including
# tune's, cli including a plugin's header, an unknown folder, and (in the
# objects) an engine function calling a tune function through an extern
# declaration, with no include at all; and no two files of a layer make a
# circle: two that include each other's headers, two (objects) that call
# each other through one shared header.  $1 is the CLI (its folder is the build).
set -u
cli=${1:?usage: cli_layers.sh PATH_TO_SUBLET}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$(dirname "$cli")" && pwd)
check=$root/scripts/check-layers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }
command -v nm >/dev/null || { echo "nm (binutils) is needed" >&2; exit 77; }

# 1. this tree: every include and every object's symbol points down
"$check" --root "$root" --objects "$build" >"$tmp/out" 2>&1 || fail "the tree: $(cat "$tmp/out")"
grep -q 'every dependency points down' "$tmp/out" || fail "no verdict line: $(cat "$tmp/out")"

# a fresh copy of the layer folders for each planted violation
copy() {
    rm -rf "$tmp/t"
    mkdir -p "$tmp/t/include"
    cp -r "$root/src" "$root/cli" "$root/plugins" "$tmp/t/"
    cp -r "$root/include/sublet" "$tmp/t/include/"
}
expect_fail() {  # expect_fail WHAT PATTERN [ARGS...]: the check exits 1 and prints PATTERN
    local what=$1 pat=$2
    shift 2
    "$check" --root "$tmp/t" "$@" >"$tmp/out" 2>&1
    local rc=$?
    [ "$rc" = 1 ] || fail "$what: exit code $rc, expected 1: $(cat "$tmp/out")"
    grep -q -- "$pat" "$tmp/out" || fail "$what: expected '$pat' in: $(cat "$tmp/out")"
    [ "$(grep -c 'an arrow pointing up\|in no layer\|not in a layer folder' "$tmp/out")" = 1 ] ||
        fail "$what: expected exactly one finding: $(cat "$tmp/out")"
}

# 2. the engine includes an analysis header (line 3 of engine.c)
copy
sed -i '3i #include "analysis/replay_internal.h"' "$tmp/t/src/engine/engine.c"
expect_fail "engine -> analysis" 'src/engine/engine.c:3: engine includes analysis/replay_internal.h (analysis)'

# 3. a same-folder include resolves to that folder: still fine
copy
sed -i '3i #include "engine.h"' "$tmp/t/src/engine/index.c"
"$check" --root "$tmp/t" >"$tmp/out" 2>&1 || fail "engine -> engine.h (same folder): $(cat "$tmp/out")"

# 4. a public engine header includes tune's public header
copy
line=$(grep -n '#include "sublet/stats.h"' "$tmp/t/include/sublet/sublet.h" | cut -d: -f1)
sed -i "${line}a #include \"sublet/tune.h\"" "$tmp/t/include/sublet/sublet.h"
expect_fail "sublet.h -> tune.h" "include/sublet/sublet.h:$((line + 1)): engine includes sublet/tune.h (tune)"

# 5. the backends include the engine's private header
copy
sed -i '2i #include "engine/engine.h"' "$tmp/t/src/backends/vmem.c"
expect_fail "backends -> engine" 'src/backends/vmem.c:2: backends includes engine/engine.h (engine)'

# 6. cli and plugins are both on top, and neither includes the other
copy
sed -i '2i #include "../plugins/registry.h"' "$tmp/t/cli/main.c"
expect_fail "cli -> plugins" 'cli/main.c:2: cli includes ../plugins/registry.h (plugins)'

# 7. a source folder that is no layer
copy
mkdir "$tmp/t/src/misc" && echo 'int sl_misc;' >"$tmp/t/src/misc/misc.c"
expect_fail "unknown folder" 'src/misc/misc.c:1: not in a layer folder'

# 8. objects: an engine file calls a tune function through an extern
# declaration: no include shows it, nm does.
copy
cat >"$tmp/t/src/engine/planted.c" <<'EOF'
extern int sl_planted_tune_answer(void);
int sl_planted_engine(void);
int sl_planted_engine(void) { return sl_planted_tune_answer(); }
EOF
cat >"$tmp/t/src/tune/planted.c" <<'EOF'
int sl_planted_tune_answer(void);
int sl_planted_tune_answer(void) { return 42; }
EOF
ob=$tmp/build/CMakeFiles/sublet_objects.dir
mkdir -p "$ob/src/engine" "$ob/src/tune"
cc=${CC:-cc}
command -v "$cc" >/dev/null || cc=gcc
"$cc" -c "$tmp/t/src/engine/planted.c" -o "$ob/src/engine/planted.c.o" || fail "compile planted.c"
"$cc" -c "$tmp/t/src/tune/planted.c" -o "$ob/src/tune/planted.c.o" || fail "compile tune/planted.c"
"$check" --root "$tmp/t" >"$tmp/out" 2>&1 || fail "includes alone should pass: $(cat "$tmp/out")"
expect_fail "objects: engine -> tune" \
    'src/engine/planted.c: engine uses sl_planted_tune_answer from src/tune/planted.c (tune)' \
    --objects "$tmp/build"

# 9. two files of one layer include each other's headers: a circle
copy
for x in a b; do
    y=$([ $x = a ] && echo b || echo a)
    printf 'int sl_planted_%s(void);\n' $x >"$tmp/t/src/analysis/planted_$x.h"
    printf '#include "analysis/planted_%s.h"\n#include "analysis/planted_%s.h"\nint sl_planted_%s(void) { return 1; }\n' \
        $x $y $x >"$tmp/t/src/analysis/planted_$x.c"
done
"$check" --root "$tmp/t" >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "include circle: exit code $rc, expected 1: $(cat "$tmp/out")"
grep -q 'circle: src/analysis/planted_a -> src/analysis/planted_b -> src/analysis/planted_a (analysis, by includes)' \
    "$tmp/out" || fail "include circle not named: $(cat "$tmp/out")"
[ "$(grep -c '^circle:' "$tmp/out")" = 1 ] || fail "include circle: expected one: $(cat "$tmp/out")"
grep -q 'an arrow pointing up' "$tmp/out" && fail "include circle: an arrow up reported: $(cat "$tmp/out")"

# 10. objects: two files of one layer call each other through one shared
# header (no include between them): the symbols show the circle.
copy
printf 'int sl_planted_c(int);\nint sl_planted_d(int);\n' >"$tmp/t/src/tune/planted_shared.h"
printf '#include "tune/planted_shared.h"\nint sl_planted_c(int n) { return n ? sl_planted_d(n - 1) : 0; }\n' \
    >"$tmp/t/src/tune/planted_c.c"
printf '#include "tune/planted_shared.h"\nint sl_planted_d(int n) { return n ? sl_planted_c(n - 1) : 1; }\n' \
    >"$tmp/t/src/tune/planted_d.c"
rm -rf "$tmp/build"
mkdir -p "$ob/src/tune"
for x in c d; do
    "$cc" -I"$tmp/t/src" -c "$tmp/t/src/tune/planted_$x.c" -o "$ob/src/tune/planted_$x.c.o" ||
        fail "compile planted_$x.c"
done
"$check" --root "$tmp/t" >"$tmp/out" 2>&1 || fail "includes alone should pass: $(cat "$tmp/out")"
"$check" --root "$tmp/t" --objects "$tmp/build" >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "symbol circle: exit code $rc, expected 1: $(cat "$tmp/out")"
grep -q 'circle: src/tune/planted_c -> src/tune/planted_d -> src/tune/planted_c (tune, by symbols)' \
    "$tmp/out" || fail "symbol circle not named: $(cat "$tmp/out")"
[ "$(grep -c '^circle:' "$tmp/out")" = 1 ] || fail "symbol circle: expected one: $(cat "$tmp/out")"

if [ "$fails" -gt 0 ]; then
    echo "cli_layers: $fails failed" >&2
    exit 1
fi
echo "cli_layers: ok"
