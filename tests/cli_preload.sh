#!/usr/bin/env bash
# libsublet_preload.so serves a CUDA program's cudaMalloc/cudaFree (and the
# async forms, cudaMemGetInfo, cudaDeviceReset) from sublet.  Without a GPU:
# the program runs against a fake CUDA runtime built here (libcudart.so.13,
# which reports every call that reaches it), and the preload library uses the
# sim backend (SUBLET_PRELOAD_BACKEND=sim).  Checks that the calls go
# through sublet, that the rest passes through, that SUBLET_SNAPSHOT writes
# the summary or a snapshot at exit, that a statically linked runtime is
# reported, and that without a usable backend everything passes through.
set -euo pipefail
cli=$1
build=$(cd "$(dirname "$cli")" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
pre=$build/libsublet_preload.so
[ -f "$pre" ] || { echo "missing $pre"; exit 1; }
if nm -D "$pre" | grep -E ' U __(asan|tsan)_' >/dev/null; then
  echo "sanitizer build: an instrumented library cannot be LD_PRELOADed into an uninstrumented program; skipped"
  exit 77
fi
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "no C compiler: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fake=$src/tests/fake
unset SUBLET_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF SUBLET_SNAPSHOT \
      SUBLET_PRELOAD_FREE_SYNC LD_PRELOAD

# Exports: the interposed runtime calls (nothing else: tests/cli_exports.sh).
nm -D --defined-only "$pre" | awk '{print $NF}' > "$tmp/exports"
for sym in cudaMalloc cudaFree cudaMallocAsync cudaFreeAsync cudaMemGetInfo cudaDeviceReset; do
  grep -qx "$sym" "$tmp/exports" || { echo "libsublet_preload.so does not export $sym"; exit 1; }
done

# The fake runtime and the programs.
mkdir -p "$tmp/lib"
"$CC" -shared -fPIC -O1 -o "$tmp/lib/libcudart.so.13" "$fake/fake_cudart.c" \
  -Wl,-soname,libcudart.so.13 -Wl,--version-script="$fake/cudart.map"
"$CC" -O1 -o "$tmp/prog" "$fake/preload_prog.c" -L"$tmp/lib" -l:libcudart.so.13 \
  -Wl,-rpath,"$tmp/lib"
"$CC" -O1 -DSTATIC_RUNTIME -o "$tmp/prog_static" "$fake/preload_prog.c"
# The program's references are versioned, as with the real runtime.
nm -D "$tmp/prog" | grep 'cudaMalloc@libcudart.so.13' >/dev/null ||
  { echo "the test program does not reference cudaMalloc@libcudart.so.13"; nm -D "$tmp/prog"; exit 1; }

val() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
ptr() { awk -v k="$1" '$1 == k {print $3}' "$2"; }
is_sim() { case "$1" in 0x7f[0-9a-f]*) return 0 ;; *) return 1 ;; esac; }

# ---- 1. without the preload library: the fake runtime gets every call -----------------
"$tmp/prog" > "$tmp/plain.out" 2> "$tmp/plain.err"
grep -q 'fake-cudart: cudaMalloc 1000' "$tmp/plain.err" || { cat "$tmp/plain.err"; exit 1; }
case $(ptr malloc_a "$tmp/plain.out") in 0xdead*) ;; *) echo "sentinel expected"; exit 1 ;; esac

# ---- 2. with it: cudaMalloc/cudaFree go through sublet --------------------------------
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=sim SUBLET_SNAPSHOT="$tmp/summary.txt" \
  "$tmp/prog" > "$tmp/pre.out" 2> "$tmp/pre.err"
cat "$tmp/pre.out"
if grep -E 'fake-cudart: (cudaMalloc|cudaMallocAsync|cudaFreeAsync|cudaMemGetInfo) ' "$tmp/pre.err"; then
  echo "FAIL: calls reached the runtime instead of sublet"; exit 1
fi
grep -q 'fake-cudart: cudaMemGetInfo' "$tmp/pre.err" && { echo "FAIL: cudaMemGetInfo passed through"; exit 1; }
if grep -q '^sublet_preload:' "$tmp/pre.err"; then
  echo "FAIL: unexpected message"; cat "$tmp/pre.err"; exit 1
fi
for k in malloc_a malloc_b malloc_async malloc_dev1 malloc_after_reset; do
  [ "$(val "$k" "$tmp/pre.out")" = 0 ] || { echo "FAIL: $k failed"; exit 1; }
  is_sim "$(ptr "$k" "$tmp/pre.out")" || { echo "FAIL: $k is not a sublet (sim) address"; exit 1; }
done
[ "$(ptr malloc_a "$tmp/pre.out")" != "$(ptr malloc_b "$tmp/pre.out")" ]
for k in free_a free_b free_async free_dev1 reset_dev1 free_after_reset init; do
  [ "$(val "$k" "$tmp/pre.out")" = 0 ] || { echo "FAIL: $k returned $(val "$k" "$tmp/pre.out")"; exit 1; }
done
[ "$(val malloc_zero "$tmp/pre.out")" = 0 ] && [ "$(ptr malloc_zero "$tmp/pre.out")" = "(nil)" ] ||
  { echo "FAIL: cudaMalloc(0)"; exit 1; }
# A double free is cudaErrorInvalidValue (1); a pointer sublet never gave
# out goes to the runtime (the fake accepts its own sentinels).
[ "$(val free_a_again "$tmp/pre.out")" = 1 ] || { echo "FAIL: double free"; exit 1; }
grep -q 'fake-cudart: cudaFree 0xdead0042' "$tmp/pre.err" || { echo "FAIL: foreign free not passed"; exit 1; }
grep -q 'fake-cudart: cudaFree (nil)' "$tmp/pre.err" || { echo "FAIL: cudaFree(NULL) not passed"; exit 1; }
grep -q 'fake-cudart: cudaDeviceReset' "$tmp/pre.err" || { echo "FAIL: cudaDeviceReset not passed"; exit 1; }
# No device to wait for on the sim (cli_cuda_fake.sh checks the sync on the cuda backend).
grep -q 'fake-cudart: cudaDeviceSynchronize' "$tmp/pre.err" && { echo "FAIL: synced a sim"; exit 1; }
# cudaMemGetInfo: the sim's 80 GiB; free = driver free + sublet's cached bytes.
total=$((80 << 30))
set -- $(awk '$1 == "meminfo_live" {print $2, $3, $4}' "$tmp/pre.out")
[ "$1" = 0 ] && [ "$3" = "$total" ] || { echo "FAIL: meminfo total $3"; exit 1; }
# live: the 1000-byte block (1024 bytes of a 2 MiB small segment, the rest
# of which sublet could hand out) and the 50 MiB block of its own segment
[ "$2" = $((total - 1024 - (50 << 20))) ] || { echo "FAIL: meminfo free while live: $2"; exit 1; }
set -- $(awk '$1 == "meminfo_cached" {print $2, $3, $4}' "$tmp/pre.out")
[ "$2" = "$total" ] || { echo "FAIL: meminfo free with everything cached: $2 (want $total)"; exit 1; }
# The summary at exit: device 0 at the path, device 1 next to it.
grep -q 'PyTorch CUDA memory summary' "$tmp/summary.txt" || { echo "FAIL: no summary"; exit 1; }
grep -q 'Device view (driver), device 0' "$tmp/summary.txt" || { echo "FAIL: no device view"; exit 1; }
[ -f "$tmp/summary.dev1.txt" ] || { echo "FAIL: no summary for device 1"; ls "$tmp"; exit 1; }
echo "routing through sublet: ok"

# ---- 3. a snapshot at exit -------------------------------------------------------------------
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=sim \
  SUBLET_SNAPSHOT="$tmp/snap.pickle" "$tmp/prog" > "$tmp/snap.out" 2> "$tmp/snap.err"
[ -s "$tmp/snap.pickle" ] || { echo "FAIL: no snapshot written"; exit 1; }
"$cli" summary "$tmp/snap.pickle" > "$tmp/snap.txt"
grep -q 'PyTorch CUDA memory summary' "$tmp/snap.txt" || { cat "$tmp/snap.txt"; exit 1; }
"$cli" convert "$tmp/snap.pickle" "$tmp/snap.events.csv" >/dev/null
grep -q ',alloc,' "$tmp/snap.events.csv" || { echo "FAIL: the snapshot has no trace"; exit 1; }
echo "snapshot at exit: ok"

# ---- 4. a statically linked runtime is reported, once ------------------------------------
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=sim "$tmp/prog_static" > /dev/null 2> "$tmp/static.err"
cat "$tmp/static.err"
grep -q '^sublet_preload: this program links the CUDA runtime statically; cudaMalloc calls cannot be intercepted. Relink with -cudart shared.$' "$tmp/static.err" ||
  { echo "FAIL: no warning for a static runtime"; exit 1; }
[ "$(grep -c '^sublet_preload:' "$tmp/static.err")" = 1 ] || { echo "FAIL: more than one message"; exit 1; }
# ... and not for the dynamically linked program (checked in 2), nor for a
# program that does not use CUDA at all.
LD_PRELOAD=$pre /bin/true 2> "$tmp/true.err"
[ ! -s "$tmp/true.err" ] || { echo "FAIL: message for a non-CUDA program"; cat "$tmp/true.err"; exit 1; }
echo "static runtime detection: ok"

# ---- 5. no usable backend (no GPU here): one message, then everything passes through -----
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=cuda LD_LIBRARY_PATH="$tmp/lib" \
    "$tmp/prog" > "$tmp/none.out" 2> "$tmp/none.err"
  grep -q '^sublet_preload: sublet cannot serve this program, CUDA calls pass through to the runtime: no CUDA' "$tmp/none.err" ||
    { echo "FAIL: no pass-through message"; cat "$tmp/none.err"; exit 1; }
  [ "$(grep -c '^sublet_preload:' "$tmp/none.err")" = 1 ] || { echo "FAIL: message repeated"; exit 1; }
  grep -q 'fake-cudart: cudaMalloc 1000' "$tmp/none.err" || { echo "FAIL: not passed through"; exit 1; }
  case $(ptr malloc_a "$tmp/none.out") in 0xdead*) ;; *) echo "FAIL: pointer not the runtime's"; exit 1 ;; esac
  echo "pass-through without a GPU: ok"
fi
# An unknown backend name is reported the same way.
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=tpu "$tmp/prog" > /dev/null 2> "$tmp/bad.err"
grep -q 'SUBLET_PRELOAD_BACKEND=tpu: unknown backend' "$tmp/bad.err" || { cat "$tmp/bad.err"; exit 1; }
# Bad settings too.
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=sim SUBLET_ALLOC_CONF=max_split_size_mb:banana \
  "$tmp/prog" > /dev/null 2> "$tmp/conf.err"
grep -q '^sublet_preload: .*allocator for device 0' "$tmp/conf.err" || { cat "$tmp/conf.err"; exit 1; }
# SUBLET_LOG: every event of each allocator from its creation, read by the CLI
# (device 1 to .dev1, device 0 again after cudaDeviceReset to .reset1)
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=sim SUBLET_LOG="$tmp/run.slog" "$tmp/prog" \
  > "$tmp/log.out" 2> "$tmp/log.err"
grep -q '^sublet_preload:' "$tmp/log.err" && { echo "FAIL: unexpected message"; cat "$tmp/log.err"; exit 1; }
n=0
for f in "$tmp"/run*.slog; do
  "$cli" convert "$f" "$tmp/log.events.csv" > /dev/null || { echo "FAIL: $f does not read"; exit 1; }
  n=$((n + $(grep -c ',alloc,' "$tmp/log.events.csv")))
  "$cli" replay "$f" > /dev/null || { echo "FAIL: replay of $f"; exit 1; }
done
[ "$(val malloc_a "$tmp/log.out")" = 0 ] && [ "$n" -ge 4 ] && [ -f "$tmp/run.dev1.slog" ] ||
  { echo "FAIL: logs: $(ls "$tmp"), $n allocs"; exit 1; }
# A log that cannot be created: one line, the program goes on.
LD_PRELOAD=$pre SUBLET_PRELOAD_BACKEND=sim SUBLET_LOG=/nonexistent/run.slog "$tmp/prog" \
  > "$tmp/nolog.out" 2> "$tmp/nolog.err"
grep -q '^sublet_preload: device 0: event log of device 0: /nonexistent/run.slog: cannot create' \
  "$tmp/nolog.err" || { echo "FAIL: no log error"; cat "$tmp/nolog.err"; exit 1; }
[ "$(val malloc_a "$tmp/nolog.out")" = 0 ] || { echo "FAIL: malloc failed without its log"; exit 1; }
echo "preload event log: ok ($n allocs logged)"
echo "preload: ok"
