#!/usr/bin/env python3
"""sublet — tests/data/offload_gc.events.csv, a synthetic multi-stream offload trace.

    gen_offload_trace.py > tests/data/offload_gc.events.csv

Not a recording: 60 GiB of weights (eight blocks on stream 0, never freed), then 60 steps,
each a large transient prefetch buffer on the copy stream (1) and a large transient
activation on the compute stream (0), of 2 to 7 GiB, both freed at the end of the step.
Each stream caches what it freed; on an 80 GiB device a request finds the other stream's
cached segments in the way, and PyTorch's defaults free them only on a failed cudaMalloc
(an allocation retry: a device-wide synchronisation), while
garbage_collection_threshold:0.95 under a memory fraction frees them before: the tuner's
answer there is the collector with its fraction (tests/cli_tune_release.sh)."""
import sys

GiB, MiB = 1 << 30, 1 << 20
SIZES_MIB = [2048, 3072, 4096, 5120, 6144, 7168]
rows = []
addr = 1 << 44


def emit(action, a, size, stream):
    rows.append("%d,%s,%d,%d,%d,%d\n" % (len(rows), action, a, size, stream, 10 * len(rows)))


def alloc(size, stream):
    global addr
    a = addr
    addr += size + 2 * MiB  # unique trace addresses
    emit("alloc", a, size, stream)
    return a


def free(a, size, stream):
    emit("free_requested", a, size, stream)
    emit("free_completed", a, size, stream)


for _ in range(8):
    alloc(60 * GiB // 8, 0)
for k in range(60):
    s1 = SIZES_MIB[k % len(SIZES_MIB)] * MiB
    s0 = SIZES_MIB[(3 * k + 1) % len(SIZES_MIB)] * MiB
    p = alloc(s1, 1)
    a = alloc(s0, 0)
    free(p, s1, 1)
    free(a, s0, 0)
sys.stdout.write("seq,action,addr,size,stream,time_us\n" + "".join(rows))
