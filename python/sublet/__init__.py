"""sublet: a caching GPU allocator with PyTorch's native policy, and its
analyst: replay a recorded run on a simulated GPU of any size, measure its
fragmentation, explain its OOMs, find the settings to use.

    import sublet
    t = sublet.load("run.pickle.gz")    # a path, bytes, or torch.cuda.memory._snapshot()
    sublet.replay(t).peak_reserved_bytes
    sublet.tune(t).pytorch_conf         # the PYTORCH_CUDA_ALLOC_CONF to use
    sublet.report(t)                    # shows inline in a notebook; .save("run.html")

Every result comes from the C library (libsublet.so, bundled with the
installed package): the fields are those of `sublet ... --json`.  Failures
raise sublet.Error and its subclasses (sublet.errors).

Submodules (imported on demand, so that ``import sublet`` never needs
PyTorch or a GPU):

    sublet.torch   make sublet PyTorch's CUDA allocator (install()) and read
                   its statistics, summary and snapshots from Python.
"""

from sublet.analyst import (
    DiagnoseResult,
    FragResult,
    MinCapacityResult,
    ReplayResult,
    Report,
    Trace,
    TuneResult,
    diagnose,
    frag,
    library_path,
    load,
    min_capacity,
    replay,
    report,
    tune,
)
from sublet.errors import (
    ArgumentError,
    ConfigError,
    Error,
    LibraryError,
    ReplayError,
    TraceError,
    TuneError,
)

__all__ = [
    "load", "replay", "min_capacity", "frag", "diagnose", "tune", "report", "library_path",
    "Trace", "ReplayResult", "MinCapacityResult", "FragResult", "DiagnoseResult", "TuneResult",
    "Report", "Error", "TraceError", "ConfigError", "ReplayError", "TuneError", "ArgumentError",
    "LibraryError", "torch",
]
__version__ = "0.1.0"


def __getattr__(name):
    if name == "torch":  # sublet.torch without an explicit import
        import importlib

        return importlib.import_module("sublet.torch")
    raise AttributeError("module 'sublet' has no attribute %r" % name)
