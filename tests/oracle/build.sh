#!/usr/bin/env bash
# Build the PyTorch-allocator oracle (tests/oracle/README.md): PyTorch 2.6's c10 sources from
# Debian's `pytorch` source package (downloaded at build time, never committed), our fake CUDA
# runtime and driver, the replay driver.
#   tests/oracle/build.sh [OUT]     OUT default: build/oracle under the repository
# Prints OUT/replay_torch.  Reuses what OUT already holds: the downloaded source (OUT/src) and
# the build (OUT/build).  Exits 1 with the reason on stderr when it cannot build.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE/../../build/oracle}
mkdir -p "$OUT/src"
OUT=$(cd "$OUT" && pwd)
die() { echo "tests/oracle/build.sh: $*" >&2; exit 1; }
cuda_inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
[ -f "$cuda_inc/cuda_runtime_api.h" ] && [ -f "$cuda_inc/cuda.h" ] ||
  die "no CUDA headers in $cuda_inc (cuda_runtime_api.h, cuda.h): set CUDA_INCLUDE"
if [ ! -d "$OUT/src/pytorch/c10" ]; then
  command -v apt-get >/dev/null || die "apt-get is needed to fetch Debian's pytorch source package"
  f=/etc/apt/sources.list.d/oracle-src.sources   # Debian 13's source index, added once
  [ -f $f ] || printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >$f ||
    die "cannot write $f (root is needed once)"
  apt-get update -qq >"$OUT/apt.log" 2>&1 || die "apt-get update failed (see $OUT/apt.log)"
  rm -rf "$OUT/src/pytorch" "$OUT/src/pytorch-v"*
  (cd "$OUT/src" && apt-get source --download-only pytorch=2.6.0+dfsg-7) >>"$OUT/apt.log" 2>&1 ||
    (cd "$OUT/src" && apt-get source --download-only pytorch) >>"$OUT/apt.log" 2>&1 ||
    die "cannot download Debian's pytorch source package (see $OUT/apt.log)"
  (cd "$OUT/src" && tar -xJf pytorch_2.6.0*.orig.tar.xz --wildcards '*/c10/*' && mv pytorch-v* pytorch) ||
    die "cannot unpack the pytorch source package in $OUT/src"
fi
[ -f "$OUT/src/pytorch/c10/cuda/CUDACachingAllocator.cpp" ] || die "$OUT/src/pytorch lacks c10/cuda"
need=()
dpkg -s libfmt-dev >/dev/null 2>&1 || need+=(libfmt-dev)
dpkg -s g++ >/dev/null 2>&1 || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq "${need[@]}" >>"$OUT/apt.log" 2>&1 || die "cannot install ${need[*]}"
fi
cmake -S "$HERE" -B "$OUT/build" -DPT="$OUT/src/pytorch" -DCUDA_INCLUDE="$cuda_inc" \
  -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 || die "cmake failed (see $OUT/build.log)"
cmake --build "$OUT/build" -j"${SUBLET_ORACLE_JOBS:-2}" >>"$OUT/build.log" 2>&1 ||
  die "build failed (see $OUT/build.log)"
ln -sf "$OUT/build/replay_torch" "$OUT/replay_torch"
ln -sf "$OUT/build/pools_torch" "$OUT/pools_torch"
echo "$OUT/replay_torch"
