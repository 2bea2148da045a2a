"""sublet.torch: sublet as PyTorch's CUDA allocator (ctypes, no build step).

    import sublet.torch
    sublet.torch.install()          # before the first CUDA tensor
    ...                             # train as usual
    print(sublet.torch.memory_summary())
    stats = sublet.torch.memory_stats()          # torch.cuda.memory_stats() keys
    sublet.torch.snapshot("run.pickle")          # pytorch.org/memory_viz reads it
    sublet.torch.max_allocatable()               # largest request served from cache
    sublet.torch.log_open("run.slog")            # every event from now on, to a file
                                                 # `sublet replay run.slog` reads

install() loads libsublet_torch.so (built by CMake next to the `sublet`
CLI) through torch.cuda.memory.CUDAPluggableAllocator with the entry points
"sublet_torch_malloc" / "sublet_torch_free", gives the optional hooks (init,
reset = torch.cuda.empty_cache, memory fraction =
torch.cuda.set_per_process_memory_fraction, base allocation, record_stream)
to the allocator object, and makes it current with
torch.cuda.memory.change_current_allocator.  It must run before PyTorch's
first CUDA allocation (PyTorch cannot swap an allocator in use).

Settings come from SUBLET_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF (the
PyTorch grammar: "max_split_size_mb:128,garbage_collection_threshold:0.6").
The library is found as sublet's analyst library is (sublet._loader): from
`lib_path`, $SUBLET_TORCH_LIB, the library bundled with the installed package,
the checkout's build/ (never a sanitizer build unless named), or the system's
library path.

Importing this module needs neither PyTorch nor a GPU: the functions raise
RuntimeError("sublet.torch: PyTorch is not installed") or
RuntimeError("sublet.torch: no CUDA device found") instead.  Run
``python -m sublet.torch --check`` for a one-line status.

CUDA graphs: install() also gives PyTorch the private-pool hooks
(set_begin_allocate_to_pool, set_end_allocate_to_pool_fn, set_release_pool;
plugins/torch_pools.cpp, present when the library was built with a C++
compiler), so a torch.cuda.graph capture allocates from a sublet private pool
of its own, released when the graph is reset; pool_stats(graph.pool()) gives
that pool's statistics.  PyTorch's CUDAPluggableAllocator does not support
torch.cuda.MemPool (ensureExistsAndIncrefPool): with sublet installed,
creating one fails in PyTorch.

The other way round, MemPool() gives a torch.cuda.MemPool whose memory comes
from sublet while PyTorch's own allocator stays in charge of the rest of the
program:

    pool = sublet.torch.MemPool()
    with torch.cuda.use_mem_pool(pool):
        x = torch.empty(n, device="cuda")   # a segment of `pool`, from sublet
    sublet.torch.memory_stats()             # sublet's side: those segments

PyTorch's allocator keeps the pool (its blocks, splits and caching) and asks
sublet for each of its segments (raw_alloc / raw_delete of a
CUDAPluggableAllocator over sublet_torch_malloc / sublet_torch_free), so
sublet's allocator of the device holds exactly the MemPools' segments.

A failed allocation returns NULL to PyTorch (its pluggable interface has no
error channel); last_error() tells why.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from sublet import _loader

if TYPE_CHECKING:  # pragma: no cover
    import torch as _torch_module

__all__ = [
    "install",
    "is_installed",
    "MemPool",
    "pool_stats",
    "set_hooks",
    "memory_stats",
    "memory_summary",
    "snapshot",
    "max_allocatable",
    "empty_cache",
    "reset_peak_memory_stats",
    "record_memory_history",
    "last_error",
    "find_library",
    "load_library",
    "Library",
    "check",
]

LIB_NAME = "libsublet_torch.so"
MALLOC_FN = "sublet_torch_malloc"
FREE_FN = "sublet_torch_free"
# PyTorch's _CUDAPluggableAllocator setter -> the entry point given to it.
HOOKS = {
    "set_init_fn": "sublet_torch_init",
    "set_reset_fn": "sublet_torch_reset",
    "set_memory_fraction_fn": "sublet_torch_memory_fraction",
    "set_base_alloc_fn": "sublet_torch_base_alloc",
    "set_record_stream_fn": "sublet_torch_record_stream",
}
# The private-pool hooks (C++ signatures: plugins/torch_pools.cpp), given when
# both this PyTorch has the setter and the library the entry point.
POOL_HOOKS = {
    "set_begin_allocate_to_pool": "sublet_torch_begin_allocate_to_pool",
    "set_end_allocate_to_pool_fn": "sublet_torch_end_allocate_to_pool",
    "set_release_pool": "sublet_torch_release_pool",
}

NO_TORCH = "sublet.torch: PyTorch is not installed"
NO_GPU = "sublet.torch: no CUDA device found"
NOT_INSTALLED = (
    "sublet.torch: sublet is not PyTorch's allocator in this process: "
    "call sublet.torch.install() before the first CUDA allocation "
    "(or route part of the program to sublet with sublet.torch.MemPool())"
)


# ---- finding and loading the library ------------------------------------------------------


def _candidates(lib_path: Optional[str]):
    return _loader.candidates(LIB_NAME, "SUBLET_TORCH_LIB", lib_path)


def find_library(lib_path: Optional[str] = None) -> str:
    """Path of libsublet_torch.so (sublet._loader's search: the given path,
    $SUBLET_TORCH_LIB, the bundled library, the build folders, the system);
    RuntimeError when none is found."""
    return _loader.find(LIB_NAME, "SUBLET_TORCH_LIB", lib_path, who="sublet.torch")


def _parse_stats(text: str) -> Dict[str, Union[int, float]]:
    out: Dict[str, Union[int, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        key, value = parts
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                continue
    return out


class Library:
    """libsublet_torch.so through ctypes.  Usable without PyTorch (tests use
    it with SUBLET_TORCH_BACKEND=sim); the module-level functions use the
    instance that install() loaded."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._dll = ctypes.CDLL(path)
        except OSError as e:
            raise RuntimeError(_loader.load_error(path, "SUBLET_TORCH_LIB", e, "sublet.torch",
                                                  arg="lib_path")) from None
        d = self._dll
        c = ctypes
        d.sublet_torch_malloc.argtypes = [c.c_ssize_t, c.c_int, c.c_void_p]
        d.sublet_torch_malloc.restype = c.c_void_p
        d.sublet_torch_free.argtypes = [c.c_void_p, c.c_ssize_t, c.c_int, c.c_void_p]
        d.sublet_torch_free.restype = None
        d.sublet_torch_init.argtypes = [c.c_int]
        d.sublet_torch_init.restype = None
        d.sublet_torch_reset.argtypes = []
        d.sublet_torch_reset.restype = None
        d.sublet_torch_memory_fraction.argtypes = [c.c_double, c.c_int]
        d.sublet_torch_memory_fraction.restype = None
        d.sublet_torch_base_alloc.argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
        d.sublet_torch_base_alloc.restype = c.c_void_p
        d.sublet_torch_record_stream.argtypes = [c.c_void_p, c.c_void_p]
        d.sublet_torch_record_stream.restype = None
        for name in ("sublet_torch_stats",):
            getattr(d, name).argtypes = [c.c_int, c.c_char_p, c.c_size_t]
            getattr(d, name).restype = c.c_longlong
        d.sublet_torch_summary.argtypes = [c.c_int, c.c_int, c.c_char_p, c.c_size_t]
        d.sublet_torch_summary.restype = c.c_longlong
        d.sublet_torch_snapshot.argtypes = [c.c_int, c.c_char_p]
        d.sublet_torch_snapshot.restype = c.c_int
        d.sublet_torch_max_allocatable.argtypes = [c.c_int, c.c_ulonglong]
        d.sublet_torch_max_allocatable.restype = c.c_longlong
        d.sublet_torch_empty_cache.argtypes = [c.c_int]
        d.sublet_torch_empty_cache.restype = c.c_int
        d.sublet_torch_reset_peak_stats.argtypes = [c.c_int]
        d.sublet_torch_reset_peak_stats.restype = c.c_int
        d.sublet_torch_record_history.argtypes = [c.c_int, c.c_int, c.c_ulonglong]
        d.sublet_torch_record_history.restype = c.c_int
        d.sublet_torch_device_count.argtypes = []
        d.sublet_torch_device_count.restype = c.c_int
        d.sublet_torch_last_error.argtypes = [c.c_char_p, c.c_size_t]
        d.sublet_torch_last_error.restype = c.c_size_t
        d.sublet_torch_version.argtypes = []
        d.sublet_torch_version.restype = c.c_char_p
        d.sublet_torch_log_open.argtypes = [c.c_int, c.c_char_p]
        d.sublet_torch_log_open.restype = c.c_int
        for name in ("sublet_torch_log_flush", "sublet_torch_log_close"):
            getattr(d, name).argtypes = [c.c_int]
            getattr(d, name).restype = c.c_int
        d.sublet_torch_log_status.argtypes = [c.c_int, c.c_char_p, c.c_size_t]
        d.sublet_torch_log_status.restype = c.c_longlong
        if self.has("sublet_torch_pool_stats"):
            d.sublet_torch_pool_stats.argtypes = [c.c_int, c.c_ulonglong, c.c_ulonglong,
                                                  c.c_char_p, c.c_size_t]
            d.sublet_torch_pool_stats.restype = c.c_longlong

    def has(self, name: str) -> bool:
        """Whether the library exports `name` (the pool hooks need a C++ build)."""
        try:
            getattr(self._dll, name)
        except AttributeError:
            return False
        return True

    # -- raw access
    def address(self, name: str) -> int:
        """Address of an exported entry point (what PyTorch's set_*_fn take)."""
        return ctypes.cast(getattr(self._dll, name), ctypes.c_void_p).value

    @property
    def dll(self):
        return self._dll

    def version(self) -> str:
        return self._dll.sublet_torch_version().decode()

    def last_error(self) -> str:
        n = self._dll.sublet_torch_last_error(None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        self._dll.sublet_torch_last_error(buf, n + 1)
        return buf.value.decode(errors="replace")

    def _fail(self, what: str):
        raise RuntimeError("sublet.torch: %s: %s" % (what, self.last_error()))

    def _text(self, fn, *args) -> str:
        n = fn(*args, None, 0)
        while True:
            if n < 0:
                self._fail(fn.__name__)
            buf = ctypes.create_string_buffer(n + 1)
            m = fn(*args, buf, n + 1)
            if m < 0:
                self._fail(fn.__name__)
            if m <= n:
                return buf.value.decode(errors="replace")
            n = m  # grew in between

    # -- queries
    def memory_stats(self, device: int = 0) -> Dict[str, Union[int, float]]:
        return _parse_stats(self._text(self._dll.sublet_torch_stats, device))

    def pool_stats(self, pool_id: Tuple[int, int], device: int = 0) -> Dict[str, Union[int, float]]:
        """A private pool's statistics (the memory_stats keys, its blocks and
        segments only) and pool_use_count, pool_device_segments,
        pool_allocating, pool_free_bytes."""
        if not self.has("sublet_torch_pool_stats"):
            raise RuntimeError("sublet.torch: %s has no private-pool support" % self.path)
        first, second = (int(x) for x in pool_id)
        return _parse_stats(self._text(self._dll.sublet_torch_pool_stats, device, first, second))

    def memory_summary(self, device: int = 0, abbreviated: bool = False) -> str:
        return self._text(self._dll.sublet_torch_summary, device, 1 if abbreviated else 0)

    def snapshot(self, path: str, device: int = 0) -> None:
        if self._dll.sublet_torch_snapshot(device, os.fsencode(path)) != 0:
            self._fail("snapshot")

    def max_allocatable(self, device: int = 0, stream: int = 0) -> int:
        v = self._dll.sublet_torch_max_allocatable(device, stream)
        if v < 0:
            self._fail("max_allocatable")
        return int(v)

    def empty_cache(self, device: int = 0) -> None:
        if self._dll.sublet_torch_empty_cache(device) != 0:
            self._fail("empty_cache")

    def reset_peak_memory_stats(self, device: int = 0) -> None:
        if self._dll.sublet_torch_reset_peak_stats(device) != 0:
            self._fail("reset_peak_memory_stats")

    def record_memory_history(self, enabled: bool = True, device: int = 0,
                              max_entries: int = 0) -> None:
        if self._dll.sublet_torch_record_history(device, 1 if enabled else 0, max_entries) != 0:
            self._fail("record_memory_history")

    # -- the event log (sublet/log.h)
    def log_open(self, path: str, device: int = 0) -> None:
        if self._dll.sublet_torch_log_open(device, os.fsencode(path)) != 0:
            self._fail("log_open")

    def log_flush(self, device: int = 0) -> None:
        if self._dll.sublet_torch_log_flush(device) != 0:
            self._fail("log_flush")

    def log_close(self, device: int = 0) -> None:
        if self._dll.sublet_torch_log_close(device) != 0:
            self._fail("log_close")

    def log_status(self, device: int = 0) -> Dict[str, Union[int, str]]:
        """{"events", "lost", "stacks", "blocks", "bytes": int, "status": "ok" or the
        error that stopped the log}; {} when the device has no log."""
        text = self._text(self._dll.sublet_torch_log_status, device)
        if not text:
            return {}
        head, _, status = text.partition(" status ")
        words = head.split()
        out: Dict[str, Union[int, str]] = {k: int(v) for k, v in zip(words[::2], words[1::2])}
        out["status"] = status
        return out


_lock = threading.Lock()
_loaded: Dict[str, Library] = {}


def load_library(lib_path: Optional[str] = None) -> Library:
    """Load libsublet_torch.so (once per path) without touching PyTorch."""
    path = find_library(lib_path)
    with _lock:
        lib = _loaded.get(path)
        if lib is None:
            lib = Library(path)
            _loaded[path] = lib
        return lib


# ---- PyTorch -------------------------------------------------------------------------------


class _State:
    lib: Optional[Library] = None
    allocator: Any = None  # keeps PyTorch's allocator object alive
    hooks: Tuple[str, ...] = ()
    segments: Any = None  # MemPool's CUDAPluggableAllocator (PyTorch's allocator stays)


_state = _State()


def _torch():
    try:
        import torch  # noqa: F401  (the top-level package, not this module)
    except ImportError:
        raise RuntimeError(NO_TORCH) from None
    return torch


def _require_cuda(torch) -> None:
    try:
        ok = torch.cuda.is_available() and torch.cuda.device_count() > 0
    except Exception:  # a broken driver install reports here
        ok = False
    if not ok:
        raise RuntimeError(NO_GPU)


def install(lib_path: Optional[str] = None):
    """Make sublet PyTorch's CUDA allocator.  Returns PyTorch's
    CUDAPluggableAllocator object.  Idempotent."""
    torch = _torch()
    _require_cuda(torch)
    with _lock:
        if _state.allocator is not None:
            return _state.allocator
    lib = load_library(lib_path)
    memory = torch.cuda.memory
    if not hasattr(memory, "CUDAPluggableAllocator"):
        raise RuntimeError(
            "sublet.torch: this PyTorch (%s) has no torch.cuda.memory.CUDAPluggableAllocator"
            % getattr(torch, "__version__", "?")
        )
    alloc = memory.CUDAPluggableAllocator(lib.path, MALLOC_FN, FREE_FN)
    hooks = set_hooks(lib, getattr(alloc, "_allocator", None))
    try:
        memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError(
            "sublet.torch: install() must run before PyTorch's first CUDA allocation "
            "(PyTorch says: %s)" % e
        ) from None
    _tell_stream_ids(lib, torch)
    with _lock:
        _state.lib = lib
        _state.allocator = alloc
        _state.hooks = tuple(hooks)
    return alloc


def _tell_stream_ids(lib: Library, torch) -> None:
    """Tell the library PyTorch's ids of its pool streams: PyTorch walks the
    frees waiting for events in the order of a hash map keyed by the stream
    (its id, not its handle), and sublet follows that order.  Each pool
    hands out its 32 streams round robin: taking 32 from each leaves every
    pool's next stream as it was."""
    if not lib.has("sublet_torch_stream_id"):
        return
    fn = lib.dll.sublet_torch_stream_id
    fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong]
    fn.restype = ctypes.c_int
    lo, hi = 0, -1
    try:
        lo, hi = torch.cuda.Stream.priority_range()
    except Exception:  # noqa: BLE001 (older PyTorch: two priorities)
        pass
    priorities = sorted({max(min(p, lo), hi) for p in range(hi, lo + 1)} | {0})
    for device in range(torch.cuda.device_count()):
        for p in priorities:
            for _ in range(32):
                s = torch.cuda.Stream(device=device, priority=p)
                if s.cuda_stream:
                    fn(ctypes.c_void_p(s.cuda_stream), s.stream_id)


def set_hooks(lib: Library, raw: Any) -> List[str]:
    """Give PyTorch's allocator object (CUDAPluggableAllocator._allocator)
    every optional hook that both it has a setter for and the library
    exports, as the entry point's address (what the setters take); returns
    the setters called."""
    done = []
    for table in (HOOKS, POOL_HOOKS):
        for setter, symbol in table.items():
            fn = getattr(raw, setter, None)
            if fn is not None and lib.has(symbol):
                fn(lib.address(symbol))
                done.append(setter)
    return done


def is_installed() -> bool:
    return _state.allocator is not None


def _installed() -> Library:
    """The library serving PyTorch: install()'s, or MemPool()'s."""
    if _state.lib is None:
        torch = _torch()
        _require_cuda(torch)
        raise RuntimeError(NOT_INSTALLED)
    return _state.lib


def _device(device) -> int:
    if device is None:
        return int(_torch().cuda.current_device())
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)  # torch.device
    if index is not None:
        return int(index)
    if isinstance(device, str) and ":" in device:
        return int(device.split(":", 1)[1])
    return int(_torch().cuda.current_device())


def memory_stats(device=None) -> Dict[str, Union[int, float]]:
    """torch.cuda.memory_stats() keys (flat, e.g. "allocated_bytes.all.peak")
    for sublet's allocator of the device, plus the driver's view of the
    device: device_total_bytes, device_free_bytes, device_used_bytes,
    device_reserved_bytes, device_cached_bytes, device_outside_bytes and,
    when the backend can tell (NVML), device_process_bytes,
    device_process_other_bytes and device_others_bytes."""
    lib = _installed()
    return lib.memory_stats(_device(device))


def _pool_id(pool: Any) -> Tuple[int, int]:
    ident = getattr(pool, "id", pool)  # torch.cuda.MemPool, or an id (graph.pool())
    first, second = ident
    return int(first), int(second)


def pool_stats(pool: Any, device=None) -> Dict[str, Union[int, float]]:
    """Statistics of one of sublet's private pools, with sublet installed:
    `pool` is a pool id, e.g. a CUDA graph's ``graph.pool()``.  The
    torch.cuda.memory_stats() keys counted over the pool's own blocks and
    segments, and pool_use_count, pool_device_segments (segments held),
    pool_allocating (1 during a capture) and pool_free_bytes (cached).
    RuntimeError when sublet has no such pool (never used, or released and
    emptied)."""
    lib = _installed()
    return lib.pool_stats(_pool_id(pool), _device(device))


def MemPool(use_on_oom: bool = False, no_split: bool = False,  # noqa: N802 (a class to the user)
            lib_path: Optional[str] = None) -> "_torch_module.cuda.MemPool":
    """A torch.cuda.MemPool whose segments come from sublet, for
    ``with torch.cuda.use_mem_pool(pool):`` while PyTorch's own allocator
    serves the rest of the program.  PyTorch manages the pool's blocks and
    asks sublet (sublet_torch_malloc / sublet_torch_free through a
    CUDAPluggableAllocator) for each segment; memory_stats(),
    memory_summary(), snapshot() and log_open() then show sublet's side,
    and empty_cache() returns the segments PyTorch gave back (when a pool
    is destroyed) to the driver.  use_on_oom / no_split are PyTorch's
    (newer releases only).  Not with install(): PyTorch does not support a
    MemPool under a CUDAPluggableAllocator."""
    torch = _torch()
    _require_cuda(torch)
    if _state.allocator is not None:
        raise RuntimeError(
            "sublet.torch.MemPool: sublet is already PyTorch's allocator (install()), and "
            "PyTorch's CUDAPluggableAllocator does not support torch.cuda.MemPool; "
            "CUDA graphs' pools are sublet's already")
    pool_cls = getattr(torch.cuda, "MemPool", None)
    if pool_cls is None:
        raise RuntimeError("sublet.torch.MemPool: this PyTorch (%s) has no torch.cuda.MemPool"
                           % getattr(torch, "__version__", "?"))
    lib = load_library(lib_path)
    with _lock:
        if _state.segments is None:
            _state.segments = torch.cuda.memory.CUDAPluggableAllocator(lib.path, MALLOC_FN,
                                                                      FREE_FN)
        segments = _state.segments
        if _state.lib is None:
            _state.lib = lib
    kwargs: Dict[str, bool] = {}
    for name, value in (("use_on_oom", use_on_oom), ("no_split", no_split)):
        if value:
            kwargs[name] = True
    try:
        return pool_cls(segments._allocator, **kwargs)
    except TypeError as e:
        raise RuntimeError("sublet.torch.MemPool: this PyTorch (%s) does not take %s: %s" % (
            getattr(torch, "__version__", "?"), ", ".join(sorted(kwargs)) or "an allocator",
            e)) from None


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """torch.cuda.memory_summary() text, then the driver's view of the device."""
    lib = _installed()
    return lib.memory_summary(_device(device), abbreviated)


def snapshot(path: str, device=None) -> None:
    """Write the allocator's state: a PyTorch snapshot for .pickle/.pkl/.json
    (optionally .gz; pytorch.org/memory_viz reads the pickle), else the
    summary text."""
    lib = _installed()
    lib.snapshot(path, _device(device))


def max_allocatable(device=None, stream: int = 0) -> int:
    """The largest request that would be served from sublet's cache right
    now, without asking the driver (0 when none)."""
    lib = _installed()
    return lib.max_allocatable(_device(device), stream)


def empty_cache(device=None) -> None:
    lib = _installed()
    lib.empty_cache(_device(device))


def reset_peak_memory_stats(device=None) -> None:
    lib = _installed()
    lib.reset_peak_memory_stats(_device(device))


def record_memory_history(enabled: bool = True, device=None, max_entries: int = 0) -> None:
    """Record a trace of every event (for snapshot()), as
    torch.cuda.memory._record_memory_history(enabled="all") does."""
    lib = _installed()
    lib.record_memory_history(enabled, _device(device), max_entries)


def log_open(path: str, device=None) -> None:
    """Log every allocator event of `device` from now on to `path` (a compact
    binary log that `sublet replay`, `frag`, `report` and `convert` read;
    stacks while record_memory_history is on).  Open it before the first
    allocation for a log that replays from an empty device; SUBLET_LOG=path
    in the environment does that for every device at start-up.  A full disk
    stops the log, not the program: log_status() and last_error() say so."""
    lib = _installed()
    lib.log_open(path, _device(device))


def log_flush(device=None) -> None:
    """Write out what the log holds in memory (at most ~200 ms of events)."""
    lib = _installed()
    lib.log_flush(_device(device))


def log_close(device=None) -> None:
    lib = _installed()
    lib.log_close(_device(device))


def log_status(device=None) -> Dict[str, Union[int, str]]:
    lib = _installed()
    return lib.log_status(_device(device))


def last_error() -> str:
    """Why the last malloc/free/hook failed ("" when none)."""
    lib = _installed()
    return lib.last_error()


# ---- python -m sublet.torch --check ----------------------------------------------------------


def check(lib_path: Optional[str] = None):
    """(ok, one-line status)."""
    try:
        path = find_library(lib_path)
        where = "library %s" % path
    except RuntimeError as e:
        path = None
        where = str(e).replace("sublet.torch: ", "")
    try:
        torch = _torch()
    except RuntimeError as e:
        return False, "%s; %s" % (e, where)
    version = getattr(torch, "__version__", "?")
    try:
        _require_cuda(torch)
    except RuntimeError as e:
        return False, "%s (PyTorch %s, CUDA build %s); %s" % (
            e, version, getattr(torch.version, "cuda", None), where)
    if path is None:
        return False, "sublet.torch: %s" % where
    try:
        load_library(path)
    except RuntimeError as e:
        return False, str(e)
    n = torch.cuda.device_count()
    name = torch.cuda.get_device_name(0)
    return True, "sublet.torch: ready: PyTorch %s, %d CUDA device%s (%s), %s" % (
        version, n, "" if n == 1 else "s", name, where)


def _main(argv) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m sublet.torch --check [LIB_PATH]")
        return 0 if argv else 2
    if argv[0] != "--check":
        print("usage: python -m sublet.torch --check [LIB_PATH]", file=sys.stderr)
        return 2
    ok, msg = check(argv[1] if len(argv) > 1 else None)
    print(msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
