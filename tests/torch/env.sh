# Sourced by the tests labelled "torch": finds what they need, or skips (exit
# 77) saying why.  Sets: cli (the sublet CLI, $1), py (PyTorch's python),
# bindir, repo, tmp (removed at exit).
cli=${1:?usage: TEST.sh PATH_TO_SUBLET}
bindir=$(cd "$(dirname "$cli")" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
case "${SUBLET_SANITIZE_FLAGS:-}" in
  *sanitize*) skip "a sanitizer build: its libsublet_nullgpu.so cannot be preloaded into an uninstrumented python" ;;
esac
[ -f "$bindir/libsublet_nullgpu.so" ] || skip "this build has no null device (the CUDA toolkit's cuda_runtime_api.h was not found at build time)"
py=${SUBLET_TORCH_PYTHON:-}
if [ -z "$py" ]; then
  py=$("$repo/scripts/torch-env" --check 2>/dev/null) ||
    skip "no PyTorch environment: scripts/test makes one (scripts/torch-env); it could not be made here"
fi
[ -x "$py" ] || skip "SUBLET_TORCH_PYTHON=$py is not executable"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
