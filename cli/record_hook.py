# sublet record's Python startup hook (cli/record_hook.py, embedded in the CLI
# at build time and written as sitecustomize.py into a folder that
# `sublet record` puts first on the child's PYTHONPATH).
#
# Every Python process started under `sublet record` runs it.  It first
# chains to the sitecustomize the user would have had (the next one on
# sys.path), then acts only when SUBLET_RECORD_DIR is set, and only in the
# first process that claims the recording (O_EXCL on DIR/claim): a
# subprocess, a spawned DataLoader worker or a forked child leaves it alone.
# The claimant imports torch and starts the allocator's history
# (torch.cuda.memory._record_memory_history) before the program makes any
# CUDA allocation; at exit (atexit: also after an uncaught exception, such as
# torch.OutOfMemoryError) it writes DIR/snapshot.pickle
# (torch.cuda.memory._snapshot()) and DIR/stats.json, PyTorch's own figures:
# the release, the device, the allocator settings, torch.cuda.memory_stats().
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import importlib.machinery
        import importlib.util

        path = [p for p in sys.path if os.path.abspath(p or ".") != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:  # the user's own hook failed: say so, as Python would
        sys.stderr.write("Error in sitecustomize (chained by sublet record): %r\n" % (e,))


def _claim(folder):
    try:
        fd = os.open(os.path.join(folder, "claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False
    os.write(fd, ("%d\n" % os.getpid()).encode())
    os.close(fd)
    return True


def _write_json(path, obj):
    import json

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _start(folder):
    import atexit
    import pickle
    import time

    import torch

    max_entries = int(os.environ.get("SUBLET_RECORD_MAX_ENTRIES", "1000000"))
    stacks = os.environ.get("SUBLET_RECORD_STACKS", "python")
    if stacks == "none":
        torch.cuda.memory._record_memory_history("all", context=None, max_entries=max_entries)
    else:
        torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks=stacks)
    pid = os.getpid()
    failure = {}
    previous_hook = sys.excepthook

    def excepthook(kind, value, tb):
        failure["exception"] = kind.__name__
        failure["message"] = str(value)[:2000]
        previous_hook(kind, value, tb)

    sys.excepthook = excepthook

    def finish():
        if os.getpid() != pid:
            return
        dev = torch.cuda.current_device()
        snap = torch.cuda.memory._snapshot()
        with open(os.path.join(folder, "snapshot.pickle.tmp"), "wb") as f:
            pickle.dump(snap, f)
        os.replace(os.path.join(folder, "snapshot.pickle.tmp"), os.path.join(folder, "snapshot.pickle"))
        traces = snap.get("device_traces") or []
        props = torch.cuda.get_device_properties(dev)
        settings = snap.get("allocator_settings") or {}
        conf = settings.get("PYTORCH_CUDA_ALLOC_CONF")
        if conf is None:
            conf = os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
        fraction = None
        get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
        if get_fraction is not None:
            try:
                fraction = float(get_fraction(dev))
            except Exception:
                fraction = None
        stats = {k: v for k, v in torch.cuda.memory_stats(dev).items() if isinstance(v, (int, float))}
        _write_json(os.path.join(folder, "stats.json"), {
            "torch_version": torch.__version__,
            "device": dev,
            "device_name": props.name,
            "total_memory": int(props.total_memory),
            "allocator_conf": conf or "",
            "memory_fraction": fraction,
            "max_entries": max_entries,
            "stacks": stacks,
            "trace_entries": len(traces[dev]) if dev < len(traces) else 0,
            "exception": failure.get("exception"),
            "exception_message": failure.get("message"),
            "memory_stats": stats,
        })
        # Let PyTorch's autograd device threads drop their last references to
        # finished graph tasks (which takes the GIL) before the interpreter is
        # finalized: on a loaded machine one can still hold one, and a thread
        # that asks for the GIL during finalization aborts the process
        # ("terminate called without an active exception"; the snapshot above
        # is complete either way).
        time.sleep(0.05)

    atexit.register(finish)


_chain()
_folder = os.environ.get("SUBLET_RECORD_DIR")
if _folder and _claim(_folder):
    try:
        _start(_folder)
    except Exception as e:
        sys.stderr.write("sublet record: the recording could not start: %r\n" % (e,))
        with open(os.path.join(_folder, "failed"), "w") as f:
            f.write("%r\n" % (e,))
