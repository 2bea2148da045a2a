"""Which libsublet.so the package loads from a checkout (sublet._loader): the
plain build/, never a sanitizer build that happens to be newer (after
scripts/test, build-tsan/libsublet.so is the newest and cannot be loaded into
a Python started without libtsan); a library that cannot be loaded is named,
with the way to choose another.

Each test lays out a checkout of its own in tmp_path (python/sublet/*.py, a
copy of the library in use as build/libsublet.so, a newer build-tsan/ whose
library is not one) and runs a fresh interpreter on it."""

import os
import shutil
import subprocess
import sys

import sublet
from conftest import data

PICKLE_GZ = data("cs336_attention_microbench.pickle.gz")
PKG = os.path.dirname(os.path.abspath(sublet.__file__))


def _checkout(root, builds):
    """A checkout at `root`: the package's sources, then `builds`, a list of
    (folder, {file: bytes or a path to copy}, sanitize) written in that order,
    each later one newer."""
    pkg = root / "python" / "sublet"
    pkg.mkdir(parents=True)
    for f in os.listdir(PKG):
        if f.endswith(".py"):
            shutil.copy(os.path.join(PKG, f), pkg / f)
    for i, (folder, files, sanitize) in enumerate(builds):
        d = root / folder
        d.mkdir()
        (d / "CMakeCache.txt").write_text(
            "SUBLET_FUZZ:BOOL=OFF\nSUBLET_SANITIZE:STRING=%s\n" % sanitize)
        for name, content in files.items():
            if isinstance(content, bytes):
                (d / name).write_bytes(content)
            else:
                shutil.copy(content, d / name)
            t = 1_700_000_000 + 1000 * i
            os.utime(d / name, (t, t))
    return root


def _run(root, code, **env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("SUBLET_LIBRARY", "SUBLET_TORCH_LIB", "LD_PRELOAD")}
    e["PYTHONPATH"] = str(root / "python")
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=e, cwd=str(root))


BROKEN = b"not a shared library\n"


def test_plain_build_over_newer_sanitizer_build(tmp_path):
    lib = sublet.library_path()
    root = _checkout(tmp_path, [
        ("build", {"libsublet.so": lib, "libsublet_torch.so": BROKEN}, ""),
        ("build-release", {"libsublet.so": BROKEN, "libsublet_torch.so": BROKEN}, ""),
        ("build-tsan", {"libsublet.so": BROKEN, "libsublet_torch.so": BROKEN}, "thread"),
    ])
    out = _run(root, "import sublet, sublet.torch\n"
                     "r = sublet.replay(%r)\n"
                     "print(sublet.library_path())\n"
                     "print(sublet.torch.find_library())\n"
                     "print(r.peak_reserved_bytes > 0)\n" % PICKLE_GZ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(root / "build" / "libsublet.so"),
                                  str(root / "build" / "libsublet_torch.so"), "True"]


def test_other_plain_builds_newest_first_never_instrumented(tmp_path):
    lib = sublet.library_path()
    root = _checkout(tmp_path, [
        ("build-clang", {"libsublet.so": BROKEN}, ""),
        ("build-release", {"libsublet.so": lib}, ""),
        ("build-asan", {"libsublet.so": BROKEN}, "address"),
        ("build-tsan", {"libsublet.so": BROKEN}, "thread"),
    ])
    fuzz = root / "build-fuzz"
    fuzz.mkdir()
    (fuzz / "CMakeCache.txt").write_text("SUBLET_FUZZ:BOOL=ON\nSUBLET_SANITIZE:STRING=\n")
    (fuzz / "libsublet.so").write_bytes(BROKEN)
    code = ("from sublet import _loader\n"
            "print('\\n'.join(_loader.candidates('libsublet.so', 'SUBLET_LIBRARY')))\n")
    got = _run(root, code).stdout.splitlines()
    checkout = [p for p in got if p.startswith(str(root))]
    assert checkout == [str(root / "python" / "sublet" / "libsublet.so"),
                        str(root / "build" / "libsublet.so"),
                        str(root / "build-release" / "libsublet.so"),
                        str(root / "build-clang" / "libsublet.so")]
    out = _run(root, "import sublet; print(sublet.library_path())")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(root / "build-release" / "libsublet.so")


def _error_of(root, call, exc, **env):
    """What `call` raises (an `exc`) in a fresh interpreter on the checkout."""
    out = _run(root, "import sublet, sublet.torch\ntry:\n    %s\nexcept %s as e:\n    print(e)\n"
               % (call, exc), **env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_library_that_cannot_load_is_named(tmp_path):
    root = _checkout(tmp_path, [("build-tsan", {"libsublet.so": BROKEN,
                                                "libsublet_torch.so": BROKEN}, "thread")])
    bad = str(root / "build-tsan" / "libsublet.so")
    # asked for explicitly, a sanitizer build is used: here it cannot load
    msg = _error_of(root, "sublet.replay(%r)" % PICKLE_GZ, "sublet.LibraryError",
                    SUBLET_LIBRARY=bad)
    assert "sublet: cannot load %s: " % bad in msg
    assert "set SUBLET_LIBRARY to another libsublet.so" in msg
    assert "build/libsublet.so, made by scripts/build" in msg
    # sublet.torch's library the same way
    tbad = str(root / "build-tsan" / "libsublet_torch.so")
    msg = _error_of(root, "sublet.torch.Library(%r)" % tbad, "RuntimeError")
    assert "sublet.torch: cannot load %s: " % tbad in msg
    assert "pass lib_path= or set SUBLET_TORCH_LIB to another libsublet_torch.so" in msg
