#!/usr/bin/env bash
# libsublet_torch.so exports every entry point PyTorch's CUDAPluggableAllocator
# loads (and nothing else); python/sublet/torch.py imports without PyTorch or
# a GPU and says which is missing; the hooks, called through ctypes as PyTorch
# calls them, work on a simulated device (SUBLET_TORCH_BACKEND=sim).
set -euo pipefail
cli=$1
build=$(cd "$(dirname "$cli")" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
lib=$build/libsublet_torch.so
[ -f "$lib" ] || { echo "missing $lib"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- exports ---------------------------------------------------------------------
nm -D --defined-only "$lib" | awk '{print $NF}' | sort > "$tmp/exports"
for sym in sublet_torch_malloc sublet_torch_free sublet_torch_init sublet_torch_reset \
           sublet_torch_memory_fraction sublet_torch_record_stream sublet_torch_base_alloc \
           sublet_torch_stats sublet_torch_summary sublet_torch_snapshot \
           sublet_torch_max_allocatable sublet_torch_empty_cache sublet_torch_reset_peak_stats \
           sublet_torch_record_history sublet_torch_last_error sublet_torch_version \
           sublet_torch_log_open sublet_torch_log_flush sublet_torch_log_close \
           sublet_torch_log_status; do
  grep -qx "$sym" "$tmp/exports" || { echo "libsublet_torch.so does not export $sym"; exit 1; }
done
# The private-pool hooks (plugins/torch_pools.cpp) when the build had a C++ compiler.
if grep -q '^SUBLET_TORCH_POOL_HOOKS:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  for sym in sublet_torch_begin_allocate_to_pool sublet_torch_end_allocate_to_pool \
             sublet_torch_release_pool sublet_torch_pool_stats; do
    grep -qx "$sym" "$tmp/exports" || { echo "libsublet_torch.so does not export $sym"; exit 1; }
  done
  # C linkage (found by name), defined as functions in the text section
  nm -D --defined-only "$lib" | grep -Eq ' T sublet_torch_begin_allocate_to_pool$' ||
    { echo "sublet_torch_begin_allocate_to_pool is not a function"; exit 1; }
  # no C++ symbol (libstdc++ instantiations, typeinfo) leaks out
  if grep -E '^_Z' "$tmp/exports"; then echo "libsublet_torch.so exports C++ symbols"; exit 1; fi
  echo "pool hooks exported"
fi
# Only the entry points, no copy of the library's names: tests/cli_exports.sh.
echo "exports: ok ($(grep -c '^sublet_torch_' "$tmp/exports") entry points)"

# ---- a sanitizer build cannot be loaded into an uninstrumented python ----------------
if nm -D "$lib" | grep -E ' U __(asan|tsan)_' >/dev/null; then
  echo "sanitizer build: the Python checks are skipped (python3 is not instrumented)"
  exit 77
fi
command -v python3 >/dev/null || { echo "python3 not found: Python checks skipped"; exit 77; }
export PYTHONPATH=$src/python SUBLET_TORCH_LIB=$lib
unset SUBLET_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF

# ---- import without PyTorch / without a GPU --------------------------------------------
python3 -c 'import sublet, sublet.torch' || { echo "import sublet.torch failed"; exit 1; }
set +e
out=$(python3 -m sublet.torch --check 2>&1); rc=$?
set -e
echo "$out"
if python3 -c 'import torch' 2>/dev/null; then
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    [ $rc -eq 0 ] && grep -q 'sublet.torch: ready' <<<"$out" || { echo "expected ready"; exit 1; }
  else
    [ $rc -eq 1 ] && grep -q 'sublet.torch: no CUDA device found' <<<"$out" ||
      { echo "expected 'no CUDA device found'"; exit 1; }
  fi
  want_msg=$(python3 -c 'import torch; print("ready" if torch.cuda.is_available() else "sublet.torch: no CUDA device found")')
else
  [ $rc -eq 1 ] && grep -q '^sublet.torch: PyTorch is not installed' <<<"$out" ||
    { echo "expected 'PyTorch is not installed' and exit status 1"; exit 1; }
  want_msg="sublet.torch: PyTorch is not installed"
fi
python3 - "$want_msg" <<'PY'
import sys
import sublet.torch as st
want = sys.argv[1]
if want != "ready":
    for name, call in [("install", lambda: st.install()),
                       ("memory_stats", lambda: st.memory_stats()),
                       ("memory_summary", lambda: st.memory_summary()),
                       ("snapshot", lambda: st.snapshot("/nonexistent/x.pickle")),
                       ("max_allocatable", lambda: st.max_allocatable()),
                       ("MemPool", lambda: st.MemPool()),
                       ("pool_stats", lambda: st.pool_stats((1, 0)))]:
        try:
            call()
        except RuntimeError as e:
            assert str(e) == want, (name, str(e))
        else:
            raise SystemExit("%s did not raise" % name)
    assert not st.is_installed()
print("python without GPU: ok (%s)" % want)
PY

# ---- the hooks through ctypes, as PyTorch calls them, on a simulated device -----------
# (the pool hooks take C++ arguments: tests/torch_pool_hooks.cpp calls them)
WANT_POOL_HOOKS=0
grep -q '^SUBLET_TORCH_POOL_HOOKS:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null && WANT_POOL_HOOKS=1
export WANT_POOL_HOOKS
SUBLET_TORCH_BACKEND=sim SUBLET_TORCH_SIM_MEMORY=4GiB python3 - "$tmp" <<'PY'
import ctypes, os, sys
import sublet.torch as st
tmp = sys.argv[1]
lib = st.load_library()
d = lib.dll
d.sublet_torch_init(2)
assert d.sublet_torch_device_count() == 2
# PyTorch: malloc(size, device, stream) / free(ptr, size, device, stream)
p = d.sublet_torch_malloc(1000, 0, None)
q = d.sublet_torch_malloc(3 << 20, 0, ctypes.c_void_p(0x2))
r = d.sublet_torch_malloc(512, 1, None)        # device 1: its own allocator
assert p and q and r, lib.last_error()
assert p >= 0x7f0000000000, hex(p)            # the sim's address space
assert d.sublet_torch_malloc(0, 0, None) is None
s = lib.memory_stats(0)
assert s["allocated_bytes.all.current"] == 1024 + (3 << 20), s["allocated_bytes.all.current"]
assert s["allocation.all.current"] == 2
assert s["device_total_bytes"] == 4 << 30
# the device view: the sim is this process's alone
assert s["device_reserved_bytes"] == s["reserved_bytes.all.current"] == (2 << 20) + (20 << 20), s
assert s["device_used_bytes"] == s["device_total_bytes"] - s["device_free_bytes"]
assert s["device_process_bytes"] == s["device_used_bytes"] and s["device_others_bytes"] == 0, s
assert s["device_cached_bytes"] == s["reserved_bytes.all.current"] - s["active_bytes.all.current"]
assert lib.memory_stats(1)["allocated_bytes.all.current"] == 512
# base_alloc: the segment holding an interior pointer
size = ctypes.c_size_t(0)
base = d.sublet_torch_base_alloc(ctypes.c_void_p(p + 100), ctypes.byref(size))
assert base == p and size.value == 2 << 20, (hex(base or 0), size.value)
# record_stream, then free: the block waits for the other stream
d.sublet_torch_record_stream(ctypes.c_void_p(p), ctypes.c_void_p(0x1234))
d.sublet_torch_free(ctypes.c_void_p(p), 1000, 0, None)
assert lib.memory_stats(0)["active_bytes.all.current"] == 1024 + (3 << 20)
d.sublet_torch_free(ctypes.c_void_p(q), 3 << 20, 0, ctypes.c_void_p(0x2))
d.sublet_torch_free(ctypes.c_void_p(r), 512, 1, None)
# an unknown pointer: no crash, a reason
d.sublet_torch_free(ctypes.c_void_p(0x1000), 1, 0, None)
assert "sublet_torch_free" in lib.last_error(), lib.last_error()
# memory fraction: a limit of 0.25 x 4 GiB
d.sublet_torch_memory_fraction(0.25, 0)
assert d.sublet_torch_malloc(2 << 30, 0, None) is None
assert "out of memory" in lib.last_error().lower(), lib.last_error()
d.sublet_torch_memory_fraction(1.0, 0)
# reset = torch.cuda.empty_cache(): whole free segments go back (the one held
# by the pending free stays until its event completes)
d.sublet_torch_reset()
assert lib.memory_stats(1)["reserved_bytes.all.current"] == 0
# queries
summary = lib.memory_summary(0)
assert "PyTorch CUDA memory summary" in summary, summary[:200]
assert "Device view (driver), device 0 (sim backend)" in summary
assert "used by other processes:" in summary and "reserved by sublet:" in summary, summary
assert lib.max_allocatable(0) >= 0
lib.record_memory_history(True, 0)
x = d.sublet_torch_malloc(4096, 0, None)
d.sublet_torch_free(ctypes.c_void_p(x), 4096, 0, None)
lib.snapshot(os.path.join(tmp, "snap.pickle"), 0)
lib.snapshot(os.path.join(tmp, "summary.txt"), 0)
assert open(os.path.join(tmp, "snap.pickle"), "rb").read(2) == b"\x80\x04"
assert "PyTorch CUDA memory summary" in open(os.path.join(tmp, "summary.txt")).read()
try:
    lib.snapshot(os.path.join(tmp, "snap.pickle"), 7)
except RuntimeError as e:
    assert "no allocator for device 7" in str(e), str(e)
else:
    raise SystemExit("snapshot of an unused device did not fail")
lib.reset_peak_memory_stats(0)
# the event log: every event from log_open on, with the stacks of the history
lib.log_open(os.path.join(tmp, "run.slog"), 0)
ptrs = [d.sublet_torch_malloc(1 << k, 0, None) for k in range(10, 22)]
for p in ptrs:
    d.sublet_torch_free(ctypes.c_void_p(p), 0, 0, None)
lib.log_flush(0)
st_ = lib.log_status(0)
assert st_["status"] == "ok" and st_["events"] >= 36 and st_["lost"] == 0, st_
assert st_["stacks"] >= 1, st_  # record_memory_history is on: stacks
lib.log_close(0)
assert lib.log_status(0) == {}
try:
    lib.log_flush(0)
except RuntimeError as e:
    assert "no event log open" in str(e), str(e)
else:
    raise SystemExit("log_flush without a log did not fail")
# install()'s hook table: every setter PyTorch's allocator object has, given the
# address of the entry point (the pool hooks when the library has them)
class Raw:
    def __init__(self, setters):
        self.got = {}
        for name in setters:
            setattr(self, name, lambda addr, name=name: self.got.__setitem__(name, addr))
every = list(st.HOOKS) + list(st.POOL_HOOKS)
raw = Raw(every)
done = st.set_hooks(lib, raw)
pool_hooks = lib.has("sublet_torch_begin_allocate_to_pool")
assert pool_hooks == (os.environ["WANT_POOL_HOOKS"] == "1"), pool_hooks
want = list(st.HOOKS) + (list(st.POOL_HOOKS) if pool_hooks else [])
assert done == want, (done, want)
for setter, addr in raw.got.items():
    table = st.HOOKS if setter in st.HOOKS else st.POOL_HOOKS
    assert addr == lib.address(table[setter]) and addr, (setter, addr)
old = Raw(list(st.HOOKS))          # a PyTorch without the pool setters: not asked
assert st.set_hooks(lib, old) == list(st.HOOKS)
if pool_hooks:
    try:
        lib.pool_stats((1, 0), 0)
    except RuntimeError as e:
        assert "no pool (1, 0)" in str(e), str(e)
    else:
        raise SystemExit("pool_stats of an unknown pool did not fail")
print("hooks on the sim device: ok")
PY
# The log reads back with the CLI: 12 allocs, their frees.
"$cli" convert "$tmp/run.slog" "$tmp/run.events.csv" > /dev/null
[ "$(grep -c ',alloc,' "$tmp/run.events.csv")" -eq 12 ] || { cat "$tmp/run.events.csv"; exit 1; }
[ "$(grep -c ',free_completed,' "$tmp/run.events.csv")" -eq 12 ] || exit 1
# SUBLET_LOG at start-up: the log has every event from the allocator's creation
SUBLET_LOG=$tmp/env.slog SUBLET_TORCH_BACKEND=sim SUBLET_TORCH_SIM_MEMORY=4GiB python3 - <<'PY'
import ctypes
import sublet.torch as st
d = st.load_library().dll
p = d.sublet_torch_malloc(5000, 0, None)
d.sublet_torch_free(ctypes.c_void_p(p), 5000, 0, None)
PY
"$cli" convert "$tmp/env.slog" "$tmp/env.events.csv" > /dev/null
grep -q ',alloc,.*,5000,' "$tmp/env.events.csv" || { cat "$tmp/env.events.csv"; exit 1; }
"$cli" replay "$tmp/env.slog" > /dev/null || { echo "replay of the SUBLET_LOG log failed"; exit 1; }
# The snapshot reads back with the CLI.
"$cli" summary "$tmp/snap.pickle" > "$tmp/snap.txt" || { echo "sublet summary failed"; exit 1; }
grep -q "PyTorch CUDA memory summary" "$tmp/snap.txt" || { cat "$tmp/snap.txt"; exit 1; }
echo "torch exports: ok"
