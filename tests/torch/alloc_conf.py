"""Whether a real PyTorch takes an allocator settings string: the string is
set as PYTORCH_CUDA_ALLOC_CONF in a child forked before CUDA starts (PyTorch
reads it once, at its first CUDA allocation), the child allocates and sends
back what its snapshot's allocator_settings report.  Shared by the tests
that check settings strings on the null device (nullgpu_check.py,
tune_strings.py)."""
import os


def taken(torch, conf, fraction=None):
    """(exit status of the child, the string PyTorch reports or "ERROR why");
    fraction: torch.cuda.set_per_process_memory_fraction(fraction) first."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
        try:
            if fraction is not None:
                torch.cuda.set_per_process_memory_fraction(float(fraction))
            torch.cuda.memory._record_memory_history(max_entries=100)
            x = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
            del x
            got = torch.cuda.memory._snapshot()["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"]
            os.write(w, got.encode())
            os._exit(0)
        except BaseException as ex:  # noqa: BLE001
            os.write(w, ("ERROR " + str(ex)).encode())
            os._exit(1)
    os.close(w)
    got = os.read(r, 65536).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return status, got
