#!/usr/bin/env bash
# cmake --install puts the library, headers, CLI, pkg-config file and CMake
# package where a consumer finds them; a program builds against each.
set -euo pipefail
cli=$1
build=$(dirname "$cli")
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in bin/sublet include/sublet/sublet.h include/sublet/backend.h; do
  [ -e "$tmp/prefix/$f" ] || { echo "missing $f"; exit 1; }
done
libdir=$(dirname "$(find "$tmp/prefix" -name sublet.pc)")/..
ls "$libdir"/libsublet.a "$libdir"/libsublet.so >/dev/null
"$tmp/prefix/bin/sublet" --version | grep -q '^sublet '
cat > "$tmp/use.c" <<'C'
#include <sublet/sublet.h>
#include <stdio.h>
int main(void) {
    sublet_backend *sim; sublet_allocator *a; void *p;
    if (sublet_sim_create((uint64_t)1 << 30, &sim)) return 1;
    sublet_options o = {.backend = sim, .conf = ""};
    if (sublet_allocator_create(&o, &a, NULL, 0)) return 1;
    if (sublet_malloc(a, 1000, 0, &p) || !p) return 1;
    if (sublet_free(a, p)) return 1;
    sublet_allocator_destroy(a);
    sublet_backend_destroy(sim);
    puts("ok");
    return 0;
}
C
# A sanitizer build's library needs its runtime in the consumer too.
san=${SUBLET_SANITIZE_FLAGS:-}
# pkg-config
PKG_CONFIG_PATH="$libdir/pkgconfig" cc $san "$tmp/use.c" -o "$tmp/use_pc" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs --static sublet) -Wl,-rpath,"$libdir"
[ "$("$tmp/use_pc")" = ok ]
# CMake package
mkdir -p "$tmp/consumer"
cp "$tmp/use.c" "$tmp/consumer/use.c"
cat > "$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(sublet REQUIRED)
add_executable(use use.c)
target_link_libraries(use PRIVATE sublet::sublet)
CM
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
[ "$("$tmp/consumer/build/use")" = ok ]
echo "install: ok"
