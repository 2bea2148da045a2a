#!/usr/bin/env bash
# sublet for Python users: build the wheel from (a copy of) the checkout the
# way README says (pip install --no-build-isolation, Debian's setuptools and
# wheel, no package index), install it into a fresh venv of Debian's Python,
# then run tests/python/test_*.py with Debian's pytest from that venv: the
# CLI on PATH, the bundled library, every analyst call against the CLI's
# JSON, the errors, threads, the report in headless Chromium, the notebook
# example.  Exit 77 only when Debian's python3-venv / python3-pytest cannot be
# installed; a sanitizer build is skipped (the wheel is a normal build, the
# test would only repeat the normal build's).
set -u
cli=${1:?usage: cli_python.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -n "${SUBLET_SANITIZE_FLAGS:-}" ]; then
    echo "sanitizer build: the wheel test runs in the normal build only"
    exit 77
fi
[ -x "$py" ] || { echo "SKIP: no Debian python3 at $py"; exit 77; }

need=()
$py -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
$py -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
$py -c 'import setuptools' 2>/dev/null || need+=(python3-setuptools)
$py -c 'import wheel' 2>/dev/null || need+=(python3-wheel)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing ${need[*]} (apt-get) ..." >&2
        (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}") \
            >"$tmp/apt.log" 2>&1 || true
    fi
    for m in ensurepip pytest setuptools wheel; do
        $py -c "import $m" 2>/dev/null || { echo "SKIP: Debian's $m is missing"; exit 77; }
    done
fi

# a copy of the tree (no build folders), so the build writes nothing here
mkdir "$tmp/src"
tar -C "$src" --exclude=./.git --exclude='./build*' --exclude='*.egg-info' -cf - . |
    tar -C "$tmp/src" -xf - || { echo "FAIL: cannot copy the tree"; exit 1; }

start=$SECONDS
$py -m venv --system-site-packages "$tmp/venv" || { echo "FAIL: python3 -m venv"; exit 1; }
if ! (cd "$tmp/src" && SUBLET_WHEEL_BUILD_DIR="$tmp/cmake" PIP_NO_INDEX=1 \
        "$tmp/venv/bin/pip" wheel --no-build-isolation --no-deps -w "$tmp/dist" . \
        >"$tmp/wheel.log" 2>&1); then
    tail -30 "$tmp/wheel.log"
    echo "FAIL: the wheel did not build"
    exit 1
fi
whl=$(ls "$tmp"/dist/sublet-*.whl)
PIP_NO_INDEX=1 "$tmp/venv/bin/pip" install --no-deps "$whl" >"$tmp/install.log" 2>&1 ||
    { tail -20 "$tmp/install.log"; echo "FAIL: the wheel did not install"; exit 1; }
echo "wheel: $(basename "$whl") built and installed in $((SECONDS - start)) s"

# from outside the checkout, with nothing pointing at a library: what the
# package finds is its own
cd "$tmp"
env -u SUBLET_LIBRARY -u SUBLET_TORCH_LIB -u LD_LIBRARY_PATH -u PYTHONPATH \
    PATH="$tmp/venv/bin:$PATH" SUBLET_TESTDATA="$src/tests/data" \
    "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python"
