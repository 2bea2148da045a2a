#!/usr/bin/env bash
# The cuda backend against a fake CUDA driver (tests/fake/fake_libcuda.c,
# built here against the toolkit's cuda.h and found by the backend's
# dlopen("libcuda.so.1") through LD_LIBRARY_PATH).  On a machine without a
# GPU this is the only way the backend's code runs: test_cuda_backend's
# device tests, the example, the preload library and the PyTorch plugin on
# the cuda backend (its private-pool hooks: tests/torch_pool_hooks.cpp).  Also: the toolkit's stub libcuda.so and a driver without
# devices give SUBLET_ERR_UNSUPPORTED with a clear message.
set -euo pipefail
cli=$1
build=$(cd "$(dirname "$cli")" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
inc=$(sed -n 's/^SUBLET_CUDA_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
mode=$(sed -n 's/^SUBLET_CUDA:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ -z "$inc" ] || [ "${inc%NOTFOUND}" != "$inc" ] || [ "$mode" = OFF ] || [ ! -f "$inc/cuda.h" ]; then
  echo "no cuda.h in this build (the cuda backend is a stub): skipped"
  exit 77
fi
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "no C compiler: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset SUBLET_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF SUBLET_SNAPSHOT LD_PRELOAD \
      SUBLET_REQUIRE_GPU SUBLET_PRELOAD_BACKEND SUBLET_TORCH_BACKEND
fake=$src/tests/fake
mkdir -p "$tmp/drv" "$tmp/stub" "$tmp/nodev"
"$CC" -std=gnu11 -shared -fPIC -O1 -isystem "$inc" -o "$tmp/drv/libcuda.so.1" \
  "$fake/fake_libcuda.c" -Wl,-soname,libcuda.so.1 -lpthread

# ---- the backend's own tests, on the fake device ---------------------------------------
LD_LIBRARY_PATH=$tmp/drv SUBLET_FAKE_CUDA=1 FAKE_CUDA_MEMORY=$((256 << 20)) \
  "$build/test_cuda_backend" > "$tmp/t.out" 2>&1 || { cat "$tmp/t.out"; echo "FAIL: test_cuda_backend on the fake driver"; exit 1; }
grep -q 'PASSED.*12 test' "$tmp/t.out" || { cat "$tmp/t.out"; echo "FAIL: not every test ran"; exit 1; }
echo "test_cuda_backend on the fake driver: ok"
# Without VMM support the va_* ops are absent and expandable tests skip.
LD_LIBRARY_PATH=$tmp/drv SUBLET_FAKE_CUDA=1 FAKE_CUDA_NO_VMM=1 \
  "$build/test_cuda_backend" > "$tmp/t2.out" 2>&1 || { cat "$tmp/t2.out"; exit 1; }

# ---- no device, and the toolkit's stub: unsupported, with the reason ---------------------
set +e
LD_LIBRARY_PATH=$tmp/drv FAKE_CUDA_DEVICES=0 "$build/test_cuda_backend" > "$tmp/nodev.out" 2>&1
rc=$?
set -e
[ $rc -eq 77 ] || { cat "$tmp/nodev.out"; echo "FAIL: want exit 77 without a device, got $rc"; exit 1; }
grep -q 'GPU tests skipped: no CUDA device' "$tmp/nodev.out" || { cat "$tmp/nodev.out"; exit 1; }
set +e
LD_LIBRARY_PATH=$tmp/drv FAKE_CUDA_DEVICES=0 SUBLET_REQUIRE_GPU=1 "$build/test_cuda_backend" > /dev/null 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || { echo "FAIL: SUBLET_REQUIRE_GPU=1 must fail without a GPU (got $rc)"; exit 1; }
stub=""
for s in "$inc/../lib64/stubs/libcuda.so" "$inc/../lib/stubs/libcuda.so"; do
  [ -f "$s" ] && { stub=$s; break; }
done
if [ -n "$stub" ]; then
  ln -s "$stub" "$tmp/stub/libcuda.so.1"
  set +e
  LD_LIBRARY_PATH=$tmp/stub "$build/examples/cuda_basic" > "$tmp/stub.out" 2>&1
  rc=$?
  set -e
  [ $rc -eq 77 ] && grep -q "toolkit's stub" "$tmp/stub.out" ||
    { cat "$tmp/stub.out"; echo "FAIL: the stub driver (rc $rc)"; exit 1; }
  echo "stub driver: $(cat "$tmp/stub.out")"
fi

# ---- the example ----------------------------------------------------------------------------
LD_LIBRARY_PATH=$tmp/drv "$build/examples/cuda_basic" > "$tmp/ex.out" 2>&1 ||
  { cat "$tmp/ex.out"; echo "FAIL: cuda_basic on the fake driver"; exit 1; }
grep -q 'Fake CUDA Device 0' "$tmp/ex.out" && grep -q 'PyTorch CUDA memory summary' "$tmp/ex.out" ||
  { cat "$tmp/ex.out"; exit 1; }
echo "cuda_basic on the fake driver: ok"

# ---- the PyTorch plugin's private-pool hooks (a graph capture, use_mem_pool) on the cuda backend ----
if [ -x "$build/torch_pool_hooks" ]; then
  LD_LIBRARY_PATH=$tmp/drv FAKE_CUDA_MEMORY=$((1 << 30)) \
    "$build/torch_pool_hooks" "$build/libsublet_torch.so" > "$tmp/h.out" 2>&1 ||
    { cat "$tmp/h.out"; echo "FAIL: torch_pool_hooks on the fake driver"; exit 1; }
  echo "torch pool hooks on the fake driver: ok"
fi

# ---- the drop-ins on the cuda backend (not in sanitizer builds: see cli_preload.sh) -------------
pre=$build/libsublet_preload.so
torchlib=$build/libsublet_torch.so
if [ -f "$pre" ] && ! nm -D "$pre" | grep -E ' U __(asan|tsan)_' >/dev/null; then
  mkdir -p "$tmp/rt"
  "$CC" -shared -fPIC -O1 -o "$tmp/rt/libcudart.so.13" "$fake/fake_cudart.c" \
    -Wl,-soname,libcudart.so.13 -Wl,--version-script="$fake/cudart.map"
  "$CC" -O1 -o "$tmp/prog" "$fake/preload_prog.c" -L"$tmp/rt" -l:libcudart.so.13 -Wl,-rpath,"$tmp/rt"
  LD_PRELOAD=$pre LD_LIBRARY_PATH=$tmp/drv FAKE_CUDA_DEVICES=2 SUBLET_SNAPSHOT="$tmp/s.txt" \
    "$tmp/prog" > "$tmp/p.out" 2> "$tmp/p.err"
  if grep -E 'fake-cudart: cudaMalloc|^sublet_preload:' "$tmp/p.err"; then
    echo "FAIL: the preload library did not serve the program on the cuda backend"; exit 1
  fi
  case $(awk '$1 == "malloc_b" {print $3}' "$tmp/p.out") in
    0x7e*) ;; *) cat "$tmp/p.out"; echo "FAIL: not a (fake) driver address"; exit 1 ;;
  esac
  grep -q 'Fake CUDA Device 0' "$tmp/s.txt" || { cat "$tmp/s.txt"; exit 1; }
  # cudaFree synchronises the device (as the real one) unless told not to.
  grep -q 'fake-cudart: cudaDeviceSynchronize' "$tmp/p.err" || { echo "FAIL: no sync in cudaFree"; exit 1; }
  LD_PRELOAD=$pre LD_LIBRARY_PATH=$tmp/drv SUBLET_PRELOAD_FREE_SYNC=0 \
    "$tmp/prog" > /dev/null 2> "$tmp/p0.err"
  grep -q 'fake-cudart: cudaDeviceSynchronize' "$tmp/p0.err" && { echo "FAIL: synced"; exit 1; }
  echo "preload on the cuda backend: ok"
  if command -v python3 >/dev/null; then
    LD_LIBRARY_PATH=$tmp/drv PYTHONPATH=$src/python SUBLET_TORCH_LIB=$torchlib \
      FAKE_CUDA_MEMORY=$((1 << 30)) python3 - <<'PY'
import ctypes
import sublet.torch as st
lib = st.load_library()
d = lib.dll
d.sublet_torch_init(1)
p = d.sublet_torch_malloc(5 << 20, 0, None)
assert p and p >= 0x7e0000000000, (p, lib.last_error())
s = lib.memory_stats(0)
assert s["device_total_bytes"] == 1 << 30, s["device_total_bytes"]
assert s["reserved_bytes.all.current"] == 20 << 20
assert "Fake CUDA Device 0" in lib.memory_summary(0)
assert d.sublet_torch_malloc(2 << 30, 0, None) is None
assert "out of memory" in lib.last_error().lower(), lib.last_error()
d.sublet_torch_free(ctypes.c_void_p(p), 5 << 20, 0, None)
d.sublet_torch_reset()
assert lib.memory_stats(0)["reserved_bytes.all.current"] == 0
print("torch plugin on the cuda backend: ok")
PY
  fi
fi
echo "cuda backend on the fake driver: ok"
