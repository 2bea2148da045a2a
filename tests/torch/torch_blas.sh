#!/usr/bin/env bash
# cuBLAS and cuBLASLt on the null device under a real PyTorch (issue 29,
# point 1): `sublet nullgpu` runs tests/torch/blas_check.py, which runs
# PyTorch's matmuls (mm, addmm with its bias epilogue, bmm, baddbmm, matmul,
# F.linear, nn.Linear forward and backward in fp32, fp16 and bf16, autocast,
# tf32), checks the workspaces PyTorch allocates for cuBLAS and cuBLASLt
# under each setting, a capture, a training step, and low-level calls: an
# invalid gemm and a call not emulated fail, named on stderr.  $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"

"$cli" nullgpu -- "$py" "$repo/tests/torch/blas_check.py" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ $rc = 0 ] || { cat "$tmp/err" >&2; fail "blas_check.py exited $rc"; }
grep -q "^blas_check: 8 checks passed$" "$tmp/out" || fail "not every check passed"
grep -q "cuBLAS call cublasSgemm_v2: parameter lda had an illegal value (32)" "$tmp/err" ||
  fail "the gemm with lda < m is not named on stderr"
grep -q "cuBLAS call cublasSgemm_v2: A \[.*) is not device memory" "$tmp/err" ||
  fail "the gemm reading host memory is not named on stderr"
n=$(grep -c "cuBLAS call cublasSrot_v2 is not emulated by the null device" "$tmp/err")
[ "$n" = 1 ] || fail "the cuBLAS call not emulated is named $n times on stderr, not once"
if grep "is not emulated" "$tmp/err" | grep -v cublasSrot_v2; then
  fail "PyTorch made calls the null device does not emulate (above)"
fi
[ $fails = 0 ] && echo "torch_blas: all passed"
exit $((fails > 0))
