"""Finding sublet's shared libraries: one search for every module.

Order, for a library NAME (libsublet.so, libsublet_torch.so):

1. the path given by the caller, else the environment variable named for
   it ($SUBLET_LIBRARY, $SUBLET_TORCH_LIB), when set;
2. the library bundled with the package (installed by ``pip install .``
   next to this file);
3. the checkout's CMake build folders (build*/NAME, newest first), when the
   package is used from the repository (PYTHONPATH=python);
4. $prefix/lib, /usr/local/lib, /usr/local/lib64, then the system's search.
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
    builds = sorted(
        glob.glob(os.path.join(REPO, "build*", name)),
        key=lambda p: os.path.getmtime(p),
        reverse=True,
    )
    for p in builds:
        yield p
    for d in (os.path.join(sys.prefix, "lib"), "/usr/local/lib", "/usr/local/lib64"):
        yield os.path.join(d, name)
    stem = name[3:] if name.startswith("lib") else name
    found = ctypes.util.find_library(stem.split(".so")[0])
    if found:
        yield found


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
