#!/usr/bin/env python3
"""What a PyTorch user does with a GPU, done on the null device (run under
`sublet nullgpu --memory 24GiB --name "sublet test GPU"`).  Each check prints
"ok NAME" or raises; the last line is "nullgpu_check: N checks passed".

  nullgpu_check.py [--settings SUBLET]

--settings SUBLET: also run a short workload under each allocator setting
sublet knows, each in a child forked before CUDA starts (PyTorch reads
PYTORCH_CUDA_ALLOC_CONF once), and check that PyTorch took it (its snapshot's
allocator_settings) and that sublet, under pytorch_version: this release,
takes the same string."""
import ctypes
import os
import pickle
import subprocess
import sys
import tempfile

import alloc_conf

passed = []


def ok(name):
    passed.append(name)
    print("ok", name, flush=True)


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def basics(torch):
    assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
    assert torch.cuda.device_count() == 1
    p = torch.cuda.get_device_properties(0)
    assert p.name == "sublet test GPU", p.name
    assert p.total_memory == 24 << 30, p.total_memory
    assert (p.major, p.minor) == (9, 0)
    free, total = torch.cuda.mem_get_info()
    assert total == 24 << 30 and free == total, (free, total)
    ok("device: is_available, name, memory, capability, mem_get_info")

    x = torch.empty(1000, device="cuda")
    assert x.is_cuda and torch.cuda.memory_allocated() == 4096
    assert torch.cuda.memory_reserved() == 2 << 20
    del x
    assert torch.cuda.memory_allocated() == 0
    ok("torch.empty, del")

    before = rss_bytes()
    big = torch.empty(20 << 30, dtype=torch.uint8, device="cuda")
    assert torch.cuda.mem_get_info()[0] < 4 << 30
    assert rss_bytes() - before < 256 << 20, "device memory became resident on the host"
    del big
    ok("a 20 GiB tensor holds no host memory")

    y = torch.ones(16, device="cuda")
    assert float(y.cpu().sum()) == 0.0, "kernels ran or a copy read device memory"
    h = torch.arange(8, dtype=torch.float32)
    assert torch.equal(h.cuda().cpu(), torch.zeros(8)), "a copy to the host must read zeros"
    ok("kernels accepted, not run; copies to the host read zeros")


def streams_events(torch):
    s = torch.cuda.Stream()
    e = torch.cuda.Event(enable_timing=True)
    e0 = torch.cuda.Event(enable_timing=True)
    e0.record()
    with torch.cuda.stream(s):
        a = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    e.record(s)
    torch.cuda.current_stream().wait_event(e)
    e.synchronize()
    assert e.query()
    assert e0.elapsed_time(e) >= 0.0
    b = torch.empty(25 << 20, dtype=torch.uint8, device="cuda")
    b.record_stream(s)
    del b
    torch.cuda.synchronize()
    del a
    ok("streams, events, record_stream")
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 0, torch.cuda.memory_reserved()
    ok("empty_cache")


def fraction_and_oom(torch):
    torch.cuda.set_per_process_memory_fraction(0.25)
    try:
        torch.empty(7 << 30, dtype=torch.uint8, device="cuda")
        raise AssertionError("no OOM past the memory fraction")
    except torch.OutOfMemoryError as ex:
        assert "6.00 GiB allowed" in str(ex), str(ex)
    torch.cuda.set_per_process_memory_fraction(1.0)
    try:
        torch.empty(30 << 30, dtype=torch.uint8, device="cuda")
        raise AssertionError("no OOM past the device's memory")
    except torch.OutOfMemoryError as ex:
        assert "GPU 0 has a total capacity of 24.00 GiB" in str(ex), str(ex)
    st = torch.cuda.memory_stats()
    assert st["num_ooms"] == 2, st["num_ooms"]
    ok("set_per_process_memory_fraction, OOMs")


def graphs_pools(torch):
    static_in = torch.zeros(1000, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        static_out = static_in * 2
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = static_in * 2
        tmp = torch.empty(5 << 20, device="cuda")
    g.replay()
    g.replay()
    pool_id = g.pool()
    snap = torch.cuda.memory._snapshot()
    pools = {tuple(s["segment_pool_id"]) for s in snap["segments"]}
    assert tuple(pool_id) in pools, (pool_id, pools)
    del g, tmp, static_out
    ok("torch.cuda.graph capture and replay, its private pool")
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        m = torch.empty(1 << 20, device="cuda")
    segs = [s for s in torch.cuda.memory._snapshot()["segments"] if tuple(s["segment_pool_id"]) == tuple(pool.id)]
    assert segs and segs[0]["allocated_size"] == 4 << 20, segs
    del m, pool
    ok("torch.cuda.MemPool, use_mem_pool")


def introspection(torch, out):
    torch.cuda.memory._record_memory_history(max_entries=10000)
    x = torch.empty(12345, device="cuda")
    del x
    st = torch.cuda.memory_stats()
    assert st["allocation.all.allocated"] > 0 and "reserved_bytes.all.peak" in st
    text = torch.cuda.memory_summary()
    assert "PyTorch CUDA memory summary, device ID 0" in text
    snap = torch.cuda.memory._snapshot()
    acts = [e["action"] for e in snap["device_traces"][0]]
    assert "alloc" in acts and "free_completed" in acts, acts
    path = os.path.join(out, "check.pickle")
    torch.cuda.memory._dump_snapshot(path)
    with open(path, "rb") as f:
        assert pickle.load(f)["segments"]
    torch.cuda.memory._record_memory_history(enabled=None)
    ok("memory_stats, memory_summary, memory_snapshot, _record_memory_history, _dump_snapshot")


def unknown_call():
    rt = ctypes.CDLL(None)
    f = rt.cudaGraphicsUnregisterResource  # not emulated: an error, named on stderr once
    assert f(None) == 801 and f(None) == 801
    last = rt.cudaGetLastError()
    assert last == 801, last
    fn = ctypes.c_void_p()
    status = ctypes.c_int()
    assert rt.cudaGetDriverEntryPointByVersion(b"cuArrayCreate", ctypes.byref(fn), 13000, 0, ctypes.byref(status)) == 0
    assert status.value == 0 and fn.value
    assert ctypes.CFUNCTYPE(ctypes.c_int)(fn.value)() == 801
    assert rt.cudaGetDriverEntryPointByVersion(b"cuNoSuchCall", ctypes.byref(fn), 13000, 0, ctypes.byref(status)) == 0
    assert status.value == 1 and not fn.value  # cudaDriverEntryPointSymbolNotFound
    ok("calls not emulated fail with 801 and are named")


SETTINGS = [
    "max_split_size_mb:64",
    "max_non_split_rounding_mb:256",
    "garbage_collection_threshold:0.7",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "expandable_segments:True",
    "expandable_segments:True,roundup_power2_divisions:2",
    "backend:native",
    "release_lock_on_cudamalloc:True",
    "pinned_use_cuda_host_register:True,pinned_num_register_threads:4",
    "pinned_use_background_threads:True",
    "pinned_reserve_segment_size_mb:64",
    "graph_capture_record_stream_reuse:True",
    "per_process_memory_fraction:0.5",
]


def settings(torch, sublet):
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    for conf in SETTINGS:
        status, got = alloc_conf.taken(torch, conf)
        assert status == 0 and got == conf, "PyTorch %s with %s: %s" % (version, conf, got)
        p = subprocess.run([sublet, "replay", os.environ["SUBLET_TESTDATA_TRACE"], "--conf",
                            "pytorch_version:%s,%s" % (version, conf), "--json"], capture_output=True, text=True)
        assert p.returncode == 0, "sublet refuses %s under pytorch_version:%s: %s" % (conf, version, p.stderr)
    ok("PyTorch %s and sublet take every setting: %s" % (version, "; ".join(SETTINGS)))


def main():
    import torch

    out = tempfile.mkdtemp(prefix="nullgpu-check-")
    if len(sys.argv) == 3 and sys.argv[1] == "--settings":
        settings(torch, sys.argv[2])  # before CUDA starts in this process
    basics(torch)
    streams_events(torch)
    fraction_and_oom(torch)
    graphs_pools(torch)
    introspection(torch, out)
    unknown_call()
    print("nullgpu_check: %d checks passed" % len(passed))


if __name__ == "__main__":
    main()
