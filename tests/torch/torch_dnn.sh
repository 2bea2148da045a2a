#!/usr/bin/env bash
# cuDNN on the null device (issue 29, point 1): `sublet nullgpu` runs
# tests/torch/dnn_check.py, a ResNet-50-shaped net trained and evaluated
# under PyTorch's defaults (cuDNN's backend API through cudnn_frontend) with
# benchmark off and on, fp32 and bf16 autocast, contiguous and channels_last;
# convolution variants; the workspaces and the batch norm reserve space, of
# the documented sizes, in PyTorch's memory history; cuDNN attention; then
# the convolutions again through the legacy API (TORCH_CUDNN_V8_API_DISABLED=1);
# and a call not emulated fails, named once on stderr.  $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"

run() {  # run NAME ARGS...: dnn_check.py ARGS under the null device; its output in $tmp/NAME.{out,err}
  local name=$1
  shift
  "$cli" nullgpu --memory 24GiB -- "$py" "$repo/tests/torch/dnn_check.py" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  cat "$tmp/$name.out"
  [ $rc = 0 ] || { cat "$tmp/$name.err" >&2; fail "dnn_check.py $* exited $rc"; }
  grep -q "^dnn_check: [0-9]* checks passed$" "$tmp/$name.out" || fail "dnn_check.py $*: not every check passed"
}

run backend
grep -q "^dnn_check: sdpa backend CUDNN_ATTENTION$" "$tmp/backend.out" ||
  echo "note: scaled_dot_product_attention did not pick cuDNN attention here (above)"
TORCH_CUDNN_V8_API_DISABLED=1 run v7 --v7
if cat "$tmp/backend.err" "$tmp/v7.err" | grep "is not emulated"; then
  fail "PyTorch made cuDNN or CUDA calls the null device does not emulate (above)"
fi

run stub --stub
n=$(grep -c "cuDNN call cudnnCreatePoolingDescriptor is not emulated by the null device" "$tmp/stub.err")
[ "$n" = 1 ] || fail "the cuDNN call not emulated is named $n times on stderr, not once"
[ $fails = 0 ] && echo "torch_dnn: all passed"
exit $((fails > 0))
