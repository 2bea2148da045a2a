#!/usr/bin/env bash
# What the shared libraries export (nm -D).  libsublet.so: exactly the public
# API, the functions declared in include/sublet/*.h (all named sublet_*, each
# marked SUBLET_API); no internal name (sl_, pv_, tn_, rf_, trace_, snap_, ...)
# and no sublet_* helper left out of the headers.  libsublet_preload.so and
# libsublet_torch.so: their entry points only (version scripts in plugins/;
# the names each must have are checked by tests/cli_preload.sh and
# tests/cli_torch_exports.sh).  libsublet_nullgpu.so, when built: the CUDA
# runtime's, driver's, NVML's, cuBLAS's and cuBLASLt's names (the last two
# with their libraries' version nodes), none of sublet's.  $1 is the CLI
# (its folder is the build).
set -euo pipefail
cli=${1:?usage: cli_exports.sh PATH_TO_SUBLET}
build=$(cd "$(dirname "$cli")" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
command -v nm >/dev/null || { echo "nm (binutils) is needed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The defined dynamic symbols of a library, less the linker's own
# (_init, _fini, _edata, _end, __bss_start) and a version node's name (type A);
# a name's version (cudaMalloc@@libcudart.so.13) is dropped.
exports() {
  nm -D --defined-only "$1" |
    awk '$2 != "A" {n = $NF; sub(/@.*/, "", n); print n}' |
    grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' |
    sort -u || true
}
# Lists a file's lines, at most 20, indented.
show() { head -20 "$1" | sed 's/^/    /'; [ "$(wc -l < "$1")" -le 20 ] || echo "    ... ($(wc -l < "$1") in all)"; }

# ---- the public API: declared in include/sublet/*.h, marked SUBLET_API ------------------
# A declaration starts at column 0 on the line naming its function (the
# headers' style); a comment or a struct member is indented.
grep -hE '^[A-Za-z_].*\bsublet_[a-z0-9_]+[[:space:]]*\(' "$src"/include/sublet/*.h |
  grep -Ev '^(typedef|#)' > "$tmp/decl_lines" || true
sed -E 's/^[^(]*\b(sublet_[a-z0-9_]+)[[:space:]]*\(.*/\1/' "$tmp/decl_lines" | sort -u > "$tmp/public"
[ "$(wc -l < "$tmp/public")" -ge 100 ] || fail "found only $(wc -l < "$tmp/public") public declarations"
grep -v '^SUBLET_API ' "$tmp/decl_lines" > "$tmp/unmarked" || true
[ -s "$tmp/unmarked" ] && { fail "public declarations without SUBLET_API:"; show "$tmp/unmarked"; }

# ---- libsublet.so ------------------------------------------------------------------------
lib=$build/libsublet.so
[ -f "$lib" ] || { echo "missing $lib"; exit 1; }
exports "$lib" > "$tmp/lib"
grep -v '^sublet_' "$tmp/lib" > "$tmp/internal" || true
[ -s "$tmp/internal" ] && { fail "libsublet.so exports $(wc -l < "$tmp/internal") names not sublet_*:"; show "$tmp/internal"; }
comm -23 <(grep '^sublet_' "$tmp/lib") "$tmp/public" > "$tmp/extra"
[ -s "$tmp/extra" ] && { fail "libsublet.so exports sublet_* names no public header declares:"; show "$tmp/extra"; }
comm -13 "$tmp/lib" "$tmp/public" > "$tmp/missing"
[ -s "$tmp/missing" ] && { fail "libsublet.so does not export these public functions:"; show "$tmp/missing"; }
echo "libsublet.so: $(wc -l < "$tmp/lib") exports, $(wc -l < "$tmp/public") public declarations"

# ---- the drop-ins: their entry points, nothing else ---------------------------------------
check_plugin() {  # NAME PATTERN (an extended regex for every name it may export)
  local so=$build/$1
  if [ ! -f "$so" ]; then echo "$1: not built (SUBLET_BUILD_DROPINS=OFF?)"; return; fi
  exports "$so" > "$tmp/$1"
  [ -s "$tmp/$1" ] || fail "$1 exports nothing"
  grep -Ev "$2" "$tmp/$1" > "$tmp/$1.bad" || true
  [ -s "$tmp/$1.bad" ] && { fail "$1 exports more than its entry points:"; show "$tmp/$1.bad"; }
  echo "$1: $(wc -l < "$tmp/$1") exports"
}
check_plugin libsublet_torch.so '^sublet_torch_'
check_plugin libsublet_preload.so '^cuda[A-Z][A-Za-z0-9_]*$'
# the null device: the CUDA runtime, driver, NVML, cuBLAS, cuBLASLt and cuDNN (so
# none of sublet's sublet_* or sl_* names)
if [ -f "$build/libsublet_nullgpu.so" ]; then
  check_plugin libsublet_nullgpu.so '^(cuda|__cuda|cu[A-Z]|nvml|cublas|cudnn)'
  nm -D --defined-only "$build/libsublet_nullgpu.so" > "$tmp/nullgpu.versions"
  for v in cublasCreate_v2@@libcublas.so.13 cublasLtMatmul@@libcublasLt.so.13 cudnnCreate@@libcudnn.so.9 cudaMalloc@@libcudart.so.13; do
    grep -q " $v\$" "$tmp/nullgpu.versions" || fail "libsublet_nullgpu.so does not export $v"
  done
  grep -qx cudaMalloc "$tmp/libsublet_nullgpu.so" || fail "libsublet_nullgpu.so does not export cudaMalloc"
  grep -qx cuMemAlloc_v2 "$tmp/libsublet_nullgpu.so" || fail "libsublet_nullgpu.so does not export cuMemAlloc_v2"
  grep -qx nvmlInit_v2 "$tmp/libsublet_nullgpu.so" || fail "libsublet_nullgpu.so does not export nvmlInit_v2"
else
  echo "libsublet_nullgpu.so: not built (no cuda_runtime_api.h)"
fi

[ "$fails" -eq 0 ] || { echo "exports: $fails failure(s)"; exit 1; }
echo "exports: ok"
