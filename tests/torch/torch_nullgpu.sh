#!/usr/bin/env bash
# The null device under a real PyTorch (issue 28, points 1, 2 and 5): `sublet
# nullgpu` runs tests/torch/nullgpu_check.py, which does what a PyTorch user
# does with a GPU and checks each answer (the device and its memory, tensors,
# no host memory behind device memory, kernels not run, streams, events,
# record_stream, empty_cache, the memory fraction, OOMs, graph capture and
# replay, MemPool, memory_stats/summary/snapshot/history, every allocator
# setting taken by PyTorch and by sublet alike); a call not emulated fails
# and is named once on stderr; a stray host access of device memory faults;
# the null device refuses to start beside a real driver unless forced; the
# command's errors.  $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"

export SUBLET_TESTDATA_TRACE=$repo/tests/data/cs336_attention_microbench.events.csv
"$cli" nullgpu --memory 24GiB --name "sublet test GPU" -- "$py" "$repo/tests/torch/nullgpu_check.py" \
  --settings "$cli" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ $rc = 0 ] || { cat "$tmp/err" >&2; fail "nullgpu_check.py exited $rc"; }
grep -q "^nullgpu_check: 12 checks passed$" "$tmp/out" || fail "not every check passed"
n=$(grep -c "call cudaGraphicsUnregisterResource is not emulated" "$tmp/err")
[ "$n" = 1 ] || fail "the call not emulated is named $n times on stderr, not once"
grep -q "CUDA driver call cuArrayCreate_v2 is not emulated" "$tmp/err" || fail "the driver stub is not named"
if grep "is not emulated" "$tmp/err" | grep -v -e cudaGraphicsUnregisterResource -e cuArrayCreate_v2; then
  fail "PyTorch made calls the null device does not emulate (above)"
fi

# a host read of a device address faults instead of reading garbage
{ "$cli" nullgpu -- "$py" -c '
import ctypes, torch
x = torch.empty(64, device="cuda")
print("read", ctypes.string_at(x.data_ptr(), 8))' >"$tmp/out" 2>&1; } 2>/dev/null
rc=$?
{ [ $rc = 139 ] || [ $rc = 134 ] || [ $rc -ge 128 ]; } && ! grep -q "^read" "$tmp/out" ||
  fail "a host read of device memory did not fault (exit $rc): $(tail -2 "$tmp/out")"

# refused beside a real driver: a library named libcuda.so.1 loaded first
mkdir -p "$tmp/real"
printf 'int cuInit(unsigned f) { (void)f; return 0; }\n' >"$tmp/real/drv.c"
if cc -shared -fPIC -o "$tmp/real/libcuda.so.1" "$tmp/real/drv.c" 2>"$tmp/cc.err"; then
  LD_PRELOAD=$tmp/real/libcuda.so.1 "$cli" nullgpu -- "$py" -c 'print("started")' >"$tmp/out" 2>&1
  rc=$?
  [ $rc = 70 ] || fail "beside a real driver the null device must refuse (exit 70), got $rc"
  grep -q "a real CUDA driver is loaded in this process ($tmp/real/libcuda.so.1)" "$tmp/out" ||
    fail "the refusal does not name the driver: $(cat "$tmp/out")"
  grep -q started "$tmp/out" && fail "the program ran beside a real driver"
  LD_PRELOAD=$tmp/real/libcuda.so.1 "$cli" nullgpu --force -- "$py" -c 'print("started")' >"$tmp/out" 2>&1 ||
    fail "--force did not start the null device: $(cat "$tmp/out")"
else
  fail "cannot build the stand-in driver: $(cat "$tmp/cc.err")"
fi

# a layout without the nullgpu/ links (a wheel keeps none): the command makes them in its cache
mkdir -p "$tmp/wheel/_bin"
cp "$cli" "$bindir/libsublet_nullgpu.so" "$tmp/wheel/_bin/"
XDG_CACHE_HOME=$tmp/cache "$tmp/wheel/_bin/sublet" nullgpu -- "$py" -c '
import torch; assert torch.cuda.is_available(); print("links", torch.cuda.mem_get_info()[1])' >"$tmp/out" 2>&1 ||
  fail "sublet nullgpu from a folder without links: $(tail -3 "$tmp/out")"
ls "$tmp"/cache/sublet/nullgpu/*/libcuda.so.1 >/dev/null 2>&1 || fail "no links made under XDG_CACHE_HOME"

# the command's errors
expect() {  # expect RC PATTERN ARGS...: sublet ARGS exits RC and says PATTERN
  local want=$1 pat=$2
  shift 2
  "$cli" "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ $rc = "$want" ] || fail "sublet $* exited $rc, not $want"
  grep -q -- "$pat" "$tmp/out" || fail "sublet $*: no '$pat' in: $(cat "$tmp/out")"
}
expect 2 "no command" nullgpu --memory 8GiB
expect 2 "--memory '1K' is not a size of at least 2MiB" nullgpu --memory 1K -- true
expect 2 "--cc '9' is not a compute capability" nullgpu --cc 9 -- true
expect 2 "unknown option '--gpu'" nullgpu --gpu -- true
expect 2 "--sms '0' is not a count of at least 1" nullgpu --sms 0 -- true
expect 1 "--lib /nonexistent: no such file" nullgpu --lib /nonexistent -- true
expect 127 "cannot run 'no-such-program-here'" nullgpu -- no-such-program-here
expect 0 "usage: sublet nullgpu" help nullgpu
[ $fails = 0 ] && echo "torch_nullgpu: all passed"
exit $((fails > 0))
