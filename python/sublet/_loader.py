"""Finding sublet's shared libraries: one search for every module.

Order, for a library NAME (libsublet.so, libsublet_torch.so):

1. the path given by the caller, else the environment variable named for
   it ($SUBLET_LIBRARY, $SUBLET_TORCH_LIB), when set;
2. the library bundled with the package (installed by ``pip install .``
   next to this file);
3. when the package is used from the repository (PYTHONPATH=python), the
   checkout's plain build, build/NAME (what scripts/build makes), then any
   other build*/NAME that is not a sanitizer or fuzzing build (newest first).
   A sanitizer build (build-asan, build-tsan, build-fuzz: SUBLET_SANITIZE or
   SUBLET_FUZZ in its CMakeCache.txt) is never taken by the search: it cannot
   be loaded into a Python that was not started with its runtime preloaded.
   Name it explicitly ($SUBLET_LIBRARY=build-asan/libsublet.so) to use one;
4. $prefix/lib, /usr/local/lib, /usr/local/lib64, then the system's search.

A library found but not loadable is reported by load_error(): its path, and
the variable or argument that chooses another.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
import sys
from typing import Iterator, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # python/sublet -> the checkout


def candidates(name: str, env_var: str, lib_path: Optional[str] = None) -> Iterator[str]:
    """The paths tried for library `name` (e.g. "libsublet.so"), in order."""
    if lib_path:
        yield lib_path
        return
    env = os.environ.get(env_var)
    if env:
        yield env
        return
    yield os.path.join(HERE, name)  # bundled: installed next to the package
    yield os.path.join(REPO, "build", name)  # scripts/build's
    others = [
        p
        for p in glob.glob(os.path.join(REPO, "build?*", name))
        if not instrumented(os.path.dirname(p))
    ]
    for p in sorted(others, key=os.path.getmtime, reverse=True):
        yield p
    for d in (os.path.join(sys.prefix, "lib"), "/usr/local/lib", "/usr/local/lib64"):
        yield os.path.join(d, name)
    stem = name[3:] if name.startswith("lib") else name
    found = ctypes.util.find_library(stem.split(".so")[0])
    if found:
        yield found


def instrumented(build_dir: str) -> bool:
    """Whether the CMake build folder `build_dir` is a sanitizer or fuzzing
    build (its CMakeCache.txt sets SUBLET_SANITIZE or SUBLET_FUZZ), or cannot
    be told (no readable CMakeCache.txt: not taken either)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8",
                  errors="replace") as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                name = key.split(":")[0]
                if name == "SUBLET_SANITIZE" and value:
                    return True
                if name == "SUBLET_FUZZ" and value.upper() in ("ON", "1", "TRUE", "YES"):
                    return True
    except OSError:
        return True
    return False


def load_error(path: str, env_var: str, err: BaseException, who: str = "sublet",
               arg: Optional[str] = None) -> str:
    """The message for library `path` found but not loadable (`err`): the
    file, why, and how to choose another."""
    how = "set %s to another %s" % (env_var, os.path.basename(path))
    if arg:
        how = "pass %s= or %s" % (arg, how)
    return "%s: cannot load %s: %s; %s (from a checkout: build/%s, made by scripts/build)" % (
        who, path, err, how, os.path.basename(path))


def find(name: str, env_var: str, lib_path: Optional[str] = None, who: str = "sublet") -> str:
    """The first existing candidate; RuntimeError naming every path tried."""
    tried = []
    for p in candidates(name, env_var, lib_path):
        tried.append(p)
        if os.path.sep not in p or os.path.exists(p):
            return p
    raise RuntimeError(
        "%s: %s not found (tried %s): install the package (pip install .), build sublet "
        "with CMake (cmake -S . -B build && cmake --build build) or set %s"
        % (who, name, ", ".join(tried) or "nothing", env_var)
    )


def bundled_cli() -> Optional[str]:
    """The `sublet` command installed with the package, or None."""
    p = os.path.join(HERE, "_bin", "sublet")
    return p if os.access(p, os.X_OK) else None
