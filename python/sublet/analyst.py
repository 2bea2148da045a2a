"""sublet's analyst from Python: each function is one call of the C library
(sublet/views.h), whose JSON document (the one `sublet ... --json` prints)
becomes a result object.  Nothing is computed here.

    import sublet
    t = sublet.load("run.pickle.gz")           # a path, bytes, or the dict of
                                               # torch.cuda.memory._snapshot()
    r = sublet.replay(t, device_memory="24GiB")
    r.peak_reserved_bytes, r.ooms, r.memory_summary_at_peak, r.to_dict()
    sublet.min_capacity(t).min_capacity_bytes
    sublet.frag(t, at=1000).fragmentation
    sublet.diagnose(t, device_memory="16GiB").diagnosis
    best = sublet.tune(t)                      # best.pytorch_conf, best.sublet_conf
    sublet.report(t, tune=True).save("run.html")   # or show it in a notebook

The C calls release the GIL (ctypes does for every call of a CDLL), so
threads may analyse at once.  Long calls (tune, report with tune=True) take
progress=callable(done, total); by default a progress line is shown when
stderr is a terminal.
"""

from __future__ import annotations

import ctypes
import html
import json
import os
import pickle
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from sublet import _loader
from sublet.errors import (ArgumentError, ConfigError, Error, LibraryError, ReplayError, TraceError,
                           TuneError)

__all__ = [
    "Trace",
    "load",
    "replay",
    "min_capacity",
    "frag",
    "diagnose",
    "tune",
    "report",
    "library_path",
    "ReplayResult",
    "MinCapacityResult",
    "FragResult",
    "DiagnoseResult",
    "TuneResult",
    "Report",
]

LIB_NAME = "libsublet.so"
ALL = (1 << 64) - 1  # SUBLET_REPLAY_ALL
VIEW_SUMMARIES = 1
VIEW_TUNE = 2
ERR_CAP = 4096

_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)


class _InputBytes(ctypes.Structure):
    """sublet_input_bytes (sublet/views.h): the bytes to read and their name."""
    _fields_ = [("buf", ctypes.c_void_p), ("len", ctypes.c_size_t), ("name", ctypes.c_char_p)]


class _ViewArgs(ctypes.Structure):
    """sublet_view_args (sublet/views.h), the sublet_view_* calls' arguments;
    filled by sublet_view_args_init (the library's defaults) first."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("conf", ctypes.c_char_p),
        ("device_memory", ctypes.c_uint64),
        ("at", ctypes.c_uint64),
        ("flags", ctypes.c_uint),
        ("threads", ctypes.c_uint),
        ("snapshot", ctypes.c_void_p),
        ("pytorch_version", ctypes.c_char_p),
        ("progress", _PROGRESS),
        ("progress_user", ctypes.c_void_p),
    ]

# ---- the library ------------------------------------------------------------------------------

_lock = threading.Lock()
_lib = None
_lib_path: Optional[str] = None


def _declare(dll) -> None:
    c = ctypes
    vp, cp, u64, sz, st = c.c_void_p, c.c_char_p, c.c_uint64, c.c_size_t, c.c_int
    out = c.POINTER(c.c_void_p)
    args = c.POINTER(_ViewArgs)
    sigs = {
        "sublet_version": (cp, []),
        "sublet_status_name": (cp, [st]),
        "sublet_string_free": (None, [vp]),
        "sublet_parse_size": (c.c_int, [cp, c.POINTER(u64)]),
        "sublet_input_parse": (st, [c.POINTER(_InputBytes), vp, out, out, cp, sz]),
        "sublet_input_load": (st, [cp, vp, out, out, cp, sz]),
        "sublet_trace_free": (None, [vp]),
        "sublet_snapshot_free": (None, [vp]),
        "sublet_trace_count": (sz, [vp]),
        "sublet_trace_settings": (cp, [vp]),
        "sublet_trace_device_memory": (u64, [vp]),
        "sublet_trace_source_format": (c.c_int, [vp]),
        "sublet_trace_format_name": (cp, [c.c_int]),
        "sublet_view_args_init": (None, [args]),
        "sublet_view_replay": (st, [vp, args, out, cp, sz]),
        "sublet_view_mincap": (st, [vp, args, out, cp, sz]),
        "sublet_view_frag": (st, [vp, args, out, cp, sz]),
        "sublet_view_diagnose": (st, [vp, args, out, cp, sz]),
        "sublet_view_tune": (st, [c.POINTER(vp), c.POINTER(cp), sz, args, out, cp, sz]),
        "sublet_view_tune_paths": (st, [c.POINTER(cp), c.POINTER(cp), sz, args, out, cp, sz]),
        "sublet_view_report": (st, [vp, args, out, c.POINTER(sz), cp, sz]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(dll, name)
        fn.restype = res
        fn.argtypes = args


def _library():
    """libsublet.so, loaded once (sublet._loader's search: $SUBLET_LIBRARY,
    the bundled library, the checkout's build folders, the system)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            try:
                path = _loader.find(LIB_NAME, "SUBLET_LIBRARY", who="sublet")
            except RuntimeError as e:
                raise LibraryError(str(e), "SUBLET_ERR_IO") from None
            try:
                dll = ctypes.CDLL(path)
                _declare(dll)
            except (OSError, AttributeError) as e:
                raise LibraryError(_loader.load_error(path, "SUBLET_LIBRARY", e),
                                   "SUBLET_ERR_IO") from None
            _lib_path = path
            _lib = dll
    return _lib


def library_path() -> str:
    """The path of the libsublet.so in use."""
    _library()
    return _lib_path or ""


def c_version() -> str:
    return _library().sublet_version().decode()


def _status_name(code: int) -> str:
    name = _library().sublet_status_name(code)
    return name.decode() if name else "SUBLET_ERR_%d" % code


def _raise(code: int, err, kind=Error, **kw):
    status = _status_name(code)
    msg = err.value.decode("utf-8", "replace") if err is not None else ""
    msg = msg or status
    if status == "SUBLET_ERR_CONFIG":
        raise ConfigError(msg, status)
    if status == "SUBLET_ERR_NO_MEMORY":
        raise MemoryError(msg)
    if status == "SUBLET_ERR_INVALID_ARGUMENT" and kind is not TraceError:
        raise ArgumentError(msg, status)
    raise kind(msg, status, **kw)


def _take(p: ctypes.c_void_p) -> Optional[str]:
    """The library's string at p, freed."""
    if not p.value:
        return None
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace")
    finally:
        _library().sublet_string_free(p)


def _enc(s: Optional[str], what: str) -> Optional[bytes]:
    if s is None:
        return None
    if not isinstance(s, str):
        raise TypeError("sublet: %s must be a str, not %s" % (what, type(s).__name__))
    return s.encode()


def _size(v: Union[None, int, str], what: str) -> int:
    """A size in bytes: an int, or a string such as "80GiB"; None: 0."""
    if v is None:
        return 0
    if isinstance(v, bool):
        raise TypeError("sublet: %s must be an int or a size string" % what)
    if isinstance(v, int):
        if v <= 0 or v >= ALL:
            raise ValueError("sublet: %s must be a positive number of bytes, not %d" % (what, v))
        return v
    if isinstance(v, str):
        out = ctypes.c_uint64()
        if _library().sublet_parse_size(v.encode(), ctypes.byref(out)) != 0 or out.value == 0:
            raise ValueError("sublet: %s: '%s' is not a size (e.g. 80GiB)" % (what, v))
        return out.value
    raise TypeError("sublet: %s must be an int or a size string, not %s" % (what, type(v).__name__))


def _index(v: Optional[int], what: str = "at") -> int:
    if v is None:
        return ALL
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("sublet: %s must be an event index (int), not %s" % (what, type(v).__name__))
    if v < 0 or v >= ALL:
        raise ValueError("sublet: %s must be an event index >= 0, not %d" % (what, v))
    return v


# ---- traces -----------------------------------------------------------------------------------


class Trace:
    """A recorded run read by the C library (any format it reads); the
    snapshot too when the input is one.  Only read by the analyses, so one
    trace may be analysed from several threads at once."""

    def __init__(self, _t: int, _snap: Optional[int], name: str):
        self._t = _t
        self._snap = _snap
        self.name = name

    def _handle(self) -> int:
        if not self._t:
            raise Error("sublet: the trace is closed", "SUBLET_ERR_INVALID_ARGUMENT")
        return self._t

    def close(self) -> None:
        """Free the trace now (it is freed when collected otherwise)."""
        t, s = self._t, self._snap
        self._t = self._snap = None
        if t or s:
            lib = _library()
            if t:
                lib.sublet_trace_free(t)
            if s:
                lib.sublet_snapshot_free(s)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self) -> int:
        return _library().sublet_trace_count(self._handle())

    @property
    def events(self) -> int:
        """The number of rows (prelude included)."""
        return len(self)

    @property
    def format(self) -> str:
        lib = _library()
        return lib.sublet_trace_format_name(lib.sublet_trace_source_format(self._handle())).decode()

    @property
    def settings(self) -> Optional[str]:
        """The allocator settings the run recorded, or None."""
        s = _library().sublet_trace_settings(self._handle())
        return s.decode() if s is not None else None

    @property
    def device_memory(self) -> int:
        """The recorded device capacity in bytes, 0 when unknown."""
        return _library().sublet_trace_device_memory(self._handle())

    def __repr__(self) -> str:
        if not self._t:
            return "<sublet.Trace %s (closed)>" % self.name
        return "<sublet.Trace %s: %d events, %s>" % (self.name, len(self), self.format)


def _parse(buf: bytes, name: str) -> Trace:
    lib = _library()
    t, s = ctypes.c_void_p(), ctypes.c_void_p()
    err = ctypes.create_string_buffer(ERR_CAP)
    data = ctypes.c_char_p(buf) if buf else None  # the bytes' own storage, not a copy
    inp = _InputBytes(ctypes.cast(data, ctypes.c_void_p) if buf else None, len(buf),
                      name.encode())
    rc = lib.sublet_input_parse(ctypes.byref(inp), None, ctypes.byref(t), ctypes.byref(s), err,
                                ERR_CAP)
    if rc != 0:
        _raise(rc, err, TraceError)
    return Trace(t.value, s.value, name)


def load(source) -> Trace:
    """Read a trace: a path (str or os.PathLike; any format sublet reads,
    gzip'd or not), bytes (the file's content), or the dict
    torch.cuda.memory._snapshot() returns (serialized in memory, no file)."""
    if isinstance(source, Trace):
        source._handle()
        return source
    if isinstance(source, dict):
        try:
            buf = pickle.dumps(source, protocol=4)
        except Exception as e:
            raise TypeError("sublet: the snapshot dict cannot be pickled: %s" % e) from None
        return _parse(buf, "<snapshot dict>")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _parse(bytes(source), "<bytes>")
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        lib = _library()
        t, s = ctypes.c_void_p(), ctypes.c_void_p()
        err = ctypes.create_string_buffer(ERR_CAP)
        rc = lib.sublet_input_load(os.fsencode(path), None, ctypes.byref(t), ctypes.byref(s),
                                   err, ERR_CAP)
        if rc != 0:
            _raise(rc, err, TraceError)
        return Trace(t.value, s.value, path)
    raise TypeError("sublet: a trace is a path, bytes, a snapshot dict or a sublet.Trace, not %s"
                    % type(source).__name__)


class _Using:
    """`with _Using(source) as t`: the trace, loaded here (and freed after)
    unless it is a Trace already."""

    def __init__(self, source):
        self.own = not isinstance(source, Trace)
        self.t = load(source)

    def __enter__(self) -> Trace:
        return self.t

    def __exit__(self, *exc):
        if self.own:
            self.t.close()


# ---- results ----------------------------------------------------------------------------------


class _Result:
    """A document of the C library: its fields as attributes, to_dict() the
    parsed JSON as `sublet ... --json` prints it."""

    _fields: Sequence[str] = ()

    def __init__(self, data: Dict[str, Any]):
        self._data = data

    def to_dict(self) -> Dict[str, Any]:
        return self._data

    def __getattr__(self, key: str):
        data = self.__dict__.get("_data")
        if data is not None and key in data:
            return data[key]
        raise AttributeError("%s has no field %r" % (type(self).__name__, key))

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._data))

    def __eq__(self, other):
        return type(other) is type(self) and other._data == self._data

    def __repr__(self) -> str:
        shown = ", ".join("%s=%r" % (k, self._data[k]) for k in self._fields if k in self._data)
        return "<sublet.%s %s>" % (type(self).__name__, shown)


def _typed(key: str, typ):
    def get(self) -> typ:
        return self._data.get(key)

    get.__name__ = key
    get.__doc__ = "the document's %r (%s)" % (key, getattr(typ, "__name__", typ))
    return property(get)


class ReplayResult(_Result):
    """`sublet replay --json`'s fields, plus memory_summary() at the peak and
    at the end (memory_summary_at_peak, memory_summary_at_end: text)."""

    _fields = ("trace", "events", "peak_reserved_bytes", "ooms", "errors")
    trace = _typed("trace", str)
    format = _typed("format", str)
    conf = _typed("conf", str)
    device_memory_bytes = _typed("device_memory_bytes", int)
    events = _typed("events", int)
    allocs = _typed("allocs", int)
    frees = _typed("frees", int)
    peak_requested_bytes = _typed("peak_requested_bytes", int)
    peak_reserved_bytes = _typed("peak_reserved_bytes", int)
    final_reserved_bytes = _typed("final_reserved_bytes", int)
    device_allocs = _typed("device_allocs", int)
    device_frees = _typed("device_frees", int)
    alloc_retries = _typed("alloc_retries", int)
    ooms = _typed("ooms", int)
    oom_events = _typed("oom_events", list)
    errors = _typed("errors", int)
    fidelity = _typed("fidelity", dict)
    memory_stats_at_peak = _typed("memory_stats_at_peak", dict)
    memory_stats_at_end = _typed("memory_stats_at_end", dict)
    fragmentation = _typed("fragmentation", dict)
    diagnosis = _typed("diagnosis", dict)

    def __init__(self, data: Dict[str, Any]):
        self.memory_summary_at_peak: str = data.pop("memory_summary_at_peak", "")
        self.memory_summary_at_end: str = data.pop("memory_summary_at_end", "")
        super().__init__(data)


class MinCapacityResult(_Result):
    """`sublet mincap --json`'s fields."""

    _fields = ("min_capacity_bytes", "peak_requested_bytes", "overhead", "monotone")
    min_capacity_bytes = _typed("min_capacity_bytes", int)
    peak_requested_bytes = _typed("peak_requested_bytes", int)
    overhead = _typed("overhead", float)
    monotone = _typed("monotone", bool)
    probes = _typed("probes", list)


class FragResult(_Result):
    """`sublet frag --json`'s fields."""

    _fields = ("file", "event", "source", "ooms")
    event = _typed("event", int)
    source = _typed("source", str)
    fragmentation = _typed("fragmentation", dict)
    pinning = _typed("pinning", list)


class DiagnoseResult(_Result):
    """`sublet diagnose --json`'s fields."""

    _fields = ("file",)
    diagnosis = _typed("diagnosis", dict)


class TuneResult(_Result):
    """`sublet tune --json`'s fields, and the answers:

    pytorch_conf   the best PYTORCH_CUDA_ALLOC_CONF (PyTorch's knobs only), as the
                   release tuned for (pytorch_version) takes it
    pytorch_code   None, or the call to make beside it before the first CUDA
                   allocation ("torch.cuda.set_per_process_memory_fraction(0.999)":
                   releases before 2.9 have no per_process_memory_fraction option)
    release_note   the release the answer is for, or (none named) which releases
                   take it and how to name yours
    sublet_conf    the best SUBLET_ALLOC_CONF (with sublet's own policies)
    evidence       the current settings and each answer, evaluated: min
                   capacity, overhead, modelled cost, whether it runs on the
                   device (and what each answer fixes)
    warmup_plan    the warm-up plan (None with warmup off)
    pareto         the trade-offs of min capacity against cost, per family"""

    _fields = ("pytorch_conf", "sublet_conf", "device_memory")
    device_memory = _typed("device_memory", int)
    pareto = _typed("pareto", dict)

    @property
    def pytorch_conf(self) -> str:
        return self._data["pytorch"]["evaluation"]["conf"]

    @property
    def pytorch_code(self) -> Optional[str]:
        return self._data["pytorch"]["code"]

    @property
    def release_note(self) -> str:
        return self._data["pytorch"]["release_note"]

    @property
    def sublet_conf(self) -> str:
        return self._data["sublet"]["evaluation"]["conf"]

    @property
    def pytorch_env(self) -> str:
        """"PYTORCH_CUDA_ALLOC_CONF=..." as a shell line."""
        return self._data["pytorch"]["env"]

    @property
    def sublet_env(self) -> str:
        return self._data["sublet"]["env"]

    @property
    def evidence(self) -> Dict[str, Any]:
        d = self._data
        return {
            "current": d["current"]["evaluation"],
            "pytorch": dict(d["pytorch"]["evaluation"], fixes=d["pytorch"]["fixes"],
                            device_check=d["pytorch"]["device_check"]),
            "sublet": dict(d["sublet"]["evaluation"], fixes=d["sublet"]["fixes"],
                           device_check=d["sublet"]["device_check"]),
        }

    @property
    def warmup_plan(self) -> Optional[Dict[str, Any]]:
        return self._data.get("warmup")

    def __getattr__(self, key):
        return _Result.__getattr__(self, key)

    def __repr__(self) -> str:
        return "<sublet.TuneResult pytorch_conf=%r sublet_conf=%r>" % (self.pytorch_conf,
                                                                       self.sublet_conf)


class Report:
    """The self-contained HTML page of `sublet report` (no network).

    save(path) writes it; in a notebook the page shows inline, isolated in a
    sandboxed <iframe srcdoc> (scripts allowed, nothing shared with the
    notebook's page)."""

    def __init__(self, page: str, name: str):
        self.html = page
        self.name = name

    def save(self, path: Union[str, os.PathLike]) -> str:
        """Write the page (to a temporary name, then renamed); returns the path."""
        path = os.fspath(path)
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.html)
        os.replace(tmp, path)
        return path

    def _repr_html_(self) -> str:
        return ('<iframe title="sublet report: %s" sandbox="allow-scripts" '
                'style="width:100%%;height:900px;border:1px solid #ccc" srcdoc="%s"></iframe>'
                % (html.escape(self.name), html.escape(self.html, quote=True)))

    def __len__(self) -> int:
        return len(self.html)

    def __repr__(self) -> str:
        return "<sublet.Report %s: %d bytes>" % (self.name, len(self.html))


# ---- the calls --------------------------------------------------------------------------------


def _view_args(name: Optional[str] = None, conf: Optional[bytes] = None, device_memory: int = 0,
               at: int = ALL, flags: int = 0, **more) -> _ViewArgs:
    """A sublet_view_args: the library's defaults, then these (more: threads,
    snapshot, pytorch_version, progress)."""
    a = _ViewArgs()
    _library().sublet_view_args_init(ctypes.byref(a))
    a.name = name.encode() if name is not None else None
    a.conf = conf
    a.device_memory = device_memory
    a.at = at
    a.flags = flags
    for k, v in more.items():
        setattr(a, k, v)
    return a


def _document(fn, *args) -> Dict[str, Any]:
    """Call a sublet_view_* function (its last three arguments: the
    document, the message buffer, its size); the parsed document."""
    out = ctypes.c_void_p()
    err = ctypes.create_string_buffer(ERR_CAP)
    rc = fn(*args, ctypes.byref(out), err, ERR_CAP)
    text = _take(out)
    if rc != 0:
        _raise(rc, err, ReplayError, result=json.loads(text) if text else None)
    return json.loads(text)


def replay(source, conf: Optional[str] = None, device_memory: Union[None, int, str] = None,
           at: Optional[int] = None) -> ReplayResult:
    """Replay a trace on a simulated device (as `sublet replay --json`):
    conf the settings (default: the trace's, else PyTorch's defaults),
    device_memory (default 80 GiB), at: stop after this event."""
    cconf, dm, idx = _enc(conf, "conf"), _size(device_memory, "device_memory"), _index(at)
    with _Using(source) as t:
        lib = _library()
        try:
            a = _view_args(t.name, cconf, dm, idx, VIEW_SUMMARIES)
            return ReplayResult(_document(lib.sublet_view_replay, t._handle(), ctypes.byref(a)))
        except ReplayError as e:
            if isinstance(e.result, dict):
                e.result = ReplayResult(e.result)
            raise


def min_capacity(source, conf: Optional[str] = None, at: Optional[int] = None) -> MinCapacityResult:
    """The smallest simulated device that runs the trace (`sublet mincap --json`)."""
    cconf, idx = _enc(conf, "conf"), _index(at)
    with _Using(source) as t:
        lib = _library()
        a = _view_args(t.name, cconf, at=idx)
        return MinCapacityResult(_document(lib.sublet_view_mincap, t._handle(), ctypes.byref(a)))


def frag(source, at: Optional[int] = None, conf: Optional[str] = None,
         device_memory: Union[None, int, str] = None) -> FragResult:
    """The fragmentation state after event `at` (default: the end), as
    `sublet frag --json`."""
    cconf, dm, idx = _enc(conf, "conf"), _size(device_memory, "device_memory"), _index(at)
    with _Using(source) as t:
        lib = _library()
        a = _view_args(t.name, cconf, dm, idx, snapshot=t._snap)
        return FragResult(_document(lib.sublet_view_frag, t._handle(), ctypes.byref(a)))


def diagnose(source, device_memory: Union[None, int, str] = None,
             conf: Optional[str] = None) -> DiagnoseResult:
    """Every OOM of the replay explained, with the settings that avoid it
    (`sublet diagnose --json`); device_memory default: the trace's."""
    cconf, dm = _enc(conf, "conf"), _size(device_memory, "device_memory")
    with _Using(source) as t:
        lib = _library()
        a = _view_args(t.name, cconf, dm)
        return DiagnoseResult(_document(lib.sublet_view_diagnose, t._handle(), ctypes.byref(a)))


class _Progress:
    """The C progress callback: the caller's function, else a line on a
    terminal's stderr, else none."""

    def __init__(self, progress: Optional[Callable[[int, int], Any]], what: str):
        self.fn = progress
        self.line = progress is None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.what = what
        self.error: Optional[BaseException] = None
        self.c = _PROGRESS(self._call) if (self.fn or self.line) else _PROGRESS()

    def _call(self, _user, done, total):
        if self.error is not None:
            return
        try:
            if self.fn:
                self.fn(int(done), int(total))
            else:
                sys.stderr.write("\rsublet: %s: %d / ~%d replays" % (self.what, done, total))
                sys.stderr.flush()
        except BaseException as e:  # raised again after the call
            self.error = e

    def done(self):
        if self.line:
            sys.stderr.write("\r%60s\r" % "")
            sys.stderr.flush()
        if self.error is not None:
            raise self.error


def tune(*sources, device_memory: Union[None, int, str] = None, current: Optional[str] = None,
         threads: int = 0, progress: Optional[Callable[[int, int], Any]] = None,
         pytorch_version: Optional[str] = None) -> TuneResult:
    """The settings that need the smallest device and the fewest device calls
    for these traces (`sublet tune --json`): device_memory your device
    (default: the largest recorded, else 80 GiB), current the settings in use
    (default: each trace's recorded ones), pytorch_version your PyTorch release
    ("2.6", ...; default the newest: `--pytorch-version`).  Paths are read as
    `sublet tune` reads them, a long log as a stream (memory for the live
    blocks); Traces already loaded are tuned as they are."""
    if not sources:
        raise TypeError("sublet.tune: give at least one trace")
    if len(sources) > 64:
        raise ValueError("sublet.tune: at most 64 traces")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise TypeError("sublet.tune: threads must be an int >= 0")
    dm, ccur = _size(device_memory, "device_memory"), _enc(current, "current")
    cver = _enc(pytorch_version, "pytorch_version")
    if all(isinstance(s, (str, os.PathLike)) for s in sources):
        # files read as `sublet tune` reads them (a long log as a stream)
        paths = [os.fsencode(os.fspath(s)) for s in sources]
        arr = (ctypes.c_char_p * len(paths))(*paths)
        return _tune_call("sublet_view_tune_paths", arr, None, len(paths), ccur, dm, cver,
                          threads, progress)
    using = []
    try:
        for s in sources:
            using.append(_Using(s))
        traces = [u.t for u in using]
        n = len(traces)
        arr = (ctypes.c_void_p * n)(*[t._handle() for t in traces])
        names = (ctypes.c_char_p * n)(*[t.name.encode() for t in traces])
        return _tune_call("sublet_view_tune", arr, names, n, ccur, dm, cver, threads, progress)
    finally:
        for u in using:
            u.__exit__(None, None, None)


def _tune_call(fn, arr, names, n, ccur, dm, cver, threads, progress) -> TuneResult:
    """One tuning view of the C library (over traces or over paths); an input
    that cannot be read (paths only) is a TraceError, as load() says it."""
    p = _Progress(progress, "tuning")
    try:
        a = _view_args(None, ccur, dm, threads=threads, pytorch_version=cver, progress=p.c)
        doc = _document(getattr(_library(), fn), arr, names, n, ctypes.byref(a))
    except ReplayError as e:
        if names is None and e.status in ("SUBLET_ERR_IO", "SUBLET_ERR_PARSE"):
            raise TraceError(e.message, e.status) from None
        raise TuneError(e.message, e.status) from None
    finally:
        p.done()
    return TuneResult(doc)


def report(source, tune: bool = False, conf: Optional[str] = None,
           device_memory: Union[None, int, str] = None,
           progress: Optional[Callable[[int, int], Any]] = None) -> Report:
    """The HTML report of `sublet report` (with tune=True its tuning section,
    as `sublet report --tune`)."""
    if not isinstance(tune, bool):
        raise TypeError("sublet.report: tune must be True or False")
    cconf, dm = _enc(conf, "conf"), _size(device_memory, "device_memory")
    with _Using(source) as t:
        lib = _library()
        out = ctypes.c_void_p()
        n = ctypes.c_size_t()
        err = ctypes.create_string_buffer(ERR_CAP)
        p = _Progress(progress if tune else None, "tuning") if tune else None
        cb = p.c if p else _PROGRESS()
        try:
            a = _view_args(t.name, cconf, dm, flags=VIEW_TUNE if tune else 0, progress=cb)
            rc = lib.sublet_view_report(t._handle(), ctypes.byref(a), ctypes.byref(out),
                                        ctypes.byref(n), err, ERR_CAP)
        finally:
            if p:
                p.done()
        page = _take(out)
        if rc != 0:
            _raise(rc, err, ReplayError)
        return Report(page or "", os.path.basename(t.name))


def _views_ok() -> List[str]:  # pragma: no cover - a debugging aid
    return [n for n in dir(_library()) if n.startswith("sublet_view_")]
