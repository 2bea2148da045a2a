#!/usr/bin/env python3
"""Write the committed seed corpora of the fuzz targets (fuzz/seeds/<target>/).

Run from anywhere: python3 fuzz/make_seeds.py.  The seeds are small and
synthetic (no recorded trace is copied here); scripts/fuzz adds the traces of
tests/data and ../shared/traces to the working corpus at run time.

fuzz_ops byte layout (see fuzz/fuzz_ops.c): byte 0 = backend (bit 0: 0 sim,
1 host) | conf index << 1; then ops, each `op % 28` followed by its argument
bytes (18-27: private pools)."""
import os
import pickle
import struct
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(ROOT, "seeds")


def write(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_config: mode byte + settings string ---------------------------------
CONFIGS = {
    "default_split20": (0x00, "max_split_size_mb:20"),
    "roundup_list": (0x05, "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"),
    "gc_expandable": (0x12, "garbage_collection_threshold:0.6,expandable_segments:True"),
    "large_segment": (0x03, "large_segment_size_mb:64,max_split_size_mb:64,max_non_split_rounding_mb:128"),
    "pinned": (0x0d, "pinned_num_register_threads:8,pinned_use_background_threads:True,"
                     "pinned_reserve_segment_size_mb:16,backend:native,policy:native"),
    "aliases": (0x16, "release_lock_on_hipmalloc:True,pinned_use_hip_host_register:False,"
                      "per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True"),
    "ignored_list": (0x1a, "expandable_segments_reserve:[a:1,b:2],graph_capture_record_stream_reuse:True"),
    "size_gib": (0x00, "80GiB"),
    "size_frac": (0x04, " 1.5 GB "),
    "bad_trailing": (0x1c, "max_split_size_mb:20,,roundup_power2_divisions:3"),
}

# ---- fuzz_ops ------------------------------------------------------------------
N_OPS = 28


def malloc(cat, value, stream=0):
    """cat: 'tiny' (<512), 'small' (<1 MiB), 'mid' (1-10 MiB), 'large'
    (10-100 MiB) or 'special' (value = index in the table)."""
    if cat == "tiny":
        return bytes([0, 0]) + struct.pack("<H", value) + bytes([stream])
    if cat == "small":
        return bytes([0, 11]) + struct.pack("<I", value)[:3] + bytes([stream])
    if cat == "mid":
        return bytes([0, 20]) + struct.pack("<I", value)[:3] + bytes([stream])
    if cat == "large":
        return bytes([0, 25]) + struct.pack("<I", value) + bytes([stream])
    return bytes([0, 29, value, stream])


def free(i):
    return bytes([4, i])


def bogus_free(kind, *args):
    return bytes([7, kind, *args])


def record(i, stream):
    return bytes([8, i, stream])


def complete(k):
    return bytes([10, k])


PROCESS = bytes([11])
EMPTY = bytes([12])


def fraction(k):
    return bytes([13, k])


def settings(k):
    return bytes([14, k])


def reset(acc):
    return bytes([15, acc])


def capacity(k):
    return bytes([16, k])


def report(k, arg=0):
    return bytes([17, k, arg, 1])


def pool_handle(space):
    return bytes([18, space])


def pool_create(use_on_oom=0, no_split=0, custom=0):
    return bytes([19, use_on_oom | no_split << 1 | custom << 2])


def pool_incref(slot):
    return bytes([20, slot])


def pool_begin(slot, k):
    """k % 4: 0-2 stream filter on streams[k % 4], 3 thread filter; k | 4 with
    the thread filter: begun by a helper thread."""
    return bytes([21, slot, k])


def pool_end(slot):
    return bytes([23, slot])


def pool_release(slot):
    return bytes([24, slot])


def pool_empty(slot):
    return bytes([25, slot])


def pool_bogus(k):
    return bytes([26, k])


def stream_wait(waiter, signaler):
    return bytes([27, waiter + 3 * signaler])


OPS = {
    "sim_basic": bytes([0]) + malloc("tiny", 100) + malloc("small", 300000) + malloc("mid", 3000000)
    + free(1) + malloc("tiny", 200, 1) + free(0) + EMPTY + report(1),
    "sim_streams": bytes([2]) + malloc("small", 4096, 0) + record(0, 1) + record(0, 2) + free(0)
    + malloc("small", 4096, 0) + complete(1) + PROCESS + complete(2) + malloc("small", 4096, 0)
    + EMPTY,
    "sim_oom": bytes([4]) + malloc("large", 80 << 20) + malloc("large", 80 << 20)
    + malloc("large", 80 << 20) + malloc("large", 80 << 20) + free(0) + malloc("special", 17)
    + report(3),
    "sim_gc_fraction": bytes([12]) + malloc("large", 30 << 20) + free(0) + malloc("mid", 5 << 20)
    + fraction(0x10) + malloc("large", 50 << 20) + fraction(3) + fraction(7) + free(0) + EMPTY,
    "sim_bogus": bytes([6]) + malloc("mid", 2 << 20) + malloc("tiny", 64) + bogus_free(1, 0, 5, 0, 0, 0)
    + bogus_free(2, 1) + free(1) + bogus_free(0, 0) + bogus_free(5, 2) + bytes([9, 1, 0, 9, 9, 9, 9])
    + bogus_free(4),
    "sim_settings": bytes([8]) + malloc("mid", 7 << 20) + settings(1) + malloc("large", 21 << 20)
    + settings(12) + settings(17) + bytes([14, 230, 20]) + b"max_split_size_mb:25,"
    + free(0) + settings(0) + reset(0) + reset(1) + capacity(4) + malloc("large", 40 << 20),
    "host_basic": bytes([1]) + malloc("tiny", 100) + malloc("small", 300000) + malloc("mid", 3000000)
    + free(1) + record(0, 2) + free(0) + PROCESS + free(0) + EMPTY,
    "host_oom": bytes([3]) + malloc("large", 40 << 20) + malloc("large", 30 << 20) + free(0)
    + malloc("large", 60 << 20) + malloc("special", 14) + report(0, 40),
    # private pools: a graph capture on stream 1 with a deferred free, then reset
    "sim_pools_graph": bytes([0]) + pool_handle(0) + pool_begin(0, 1) + malloc("small", 5000, 1)
    + malloc("large", 30 << 20, 1) + malloc("small", 7000, 0) + record(0, 2) + free(0)
    + malloc("small", 5000, 1) + pool_end(0) + PROCESS + pool_release(0) + free(0) + free(0)
    + complete(3) + EMPTY + pool_empty(0) + pool_bogus(1) + pool_bogus(10) + pool_bogus(3),
    # MemPools (newest rules): one with its own allocator, use_on_oom and no_split entered by
    # this thread, one entered by a helper thread; empty_cache inside use_mem_pool; an OOM
    # that takes the use_on_oom pool's cached block
    "sim_pools_mempool": bytes([0]) + pool_create(1, 1, 1) + pool_begin(0, 3)
    + malloc("mid", 3 << 20) + malloc("small", 9000) + free(0) + EMPTY + pool_create()
    + pool_begin(1, 7) + malloc("tiny", 100, 2) + pool_end(0) + capacity(4)
    + malloc("large", 40 << 20) + malloc("large", 20 << 20) + malloc("small", 9000)
    + pool_incref(0) + pool_release(0) + pool_end(1) + pool_release(1) + pool_release(0)
    + pool_empty(0) + pool_empty(1),
    # two nested captures (streams 1 and 2) under 2.6's rules with expandable segments
    "sim_pools_expandable_v26": bytes([16 << 1]) + pool_handle(0) + pool_handle(1)
    + pool_begin(0, 1) + pool_begin(1, 2) + pool_begin(0, 1) + malloc("mid", 5 << 20, 1)
    + malloc("small", 3000, 2) + malloc("mid", 2 << 20, 0) + pool_end(0) + malloc("mid", 5 << 20, 1)
    + free(0) + pool_end(1) + pool_release(0) + pool_release(0) + EMPTY,
    # graph_capture_record_stream_reuse: a block used by stream 1 is reused on stream 0 once
    # stream 0 has waited for stream 1 (conf 18)
    "sim_pools_reclaim": bytes([18 << 1]) + pool_handle(0) + pool_begin(0, 0)
    + malloc("tiny", 32, 0) + stream_wait(1, 0) + malloc("tiny", 64, 0) + record(1, 1) + free(1)
    + malloc("tiny", 32, 0) + stream_wait(0, 1) + malloc("tiny", 32, 0) + pool_end(0)
    + pool_release(0) + complete(3) + EMPTY,
    "host_pools": bytes([1]) + pool_create(0, 0, 1) + pool_begin(0, 3) + malloc("small", 4096)
    + malloc("mid", 2 << 20) + free(0) + pool_end(0) + pool_release(0) + pool_empty(0)
    + pool_handle(1) + pool_begin(1, 0) + malloc("tiny", 300, 0) + pool_end(1),
    "host_split": bytes([5]) + b"".join(malloc("small", 2000 + 37 * i) for i in range(12))
    + b"".join(free(i) for i in (3, 1, 4, 1, 5)) + b"".join(malloc("tiny", 500 - i) for i in range(5)),
}

# ---- fuzz_trace_csv: small synthetic `.events.csv` files ------------------------
HEADER = "seq,action,addr,size,stream,time_us\n"
CSV = {
    "prelude_and_events.csv": HEADER
    + "0,pre_segment,140000000000000,20971520,0,\n"
    + "1,pre_alloc,140000000000000,1048576,0,\n"
    + "2,alloc,140000001048576,4096,0,1700000000000001\n"
    + "3,free_requested,140000001048576,4096,0,1700000000000002\n"
    + "4,free_completed,140000001048576,4096,0,1700000000000003\n"
    + "5,segment_alloc,140000020971520,2097152,7,1700000000000004\n"
    + "6,alloc,140000020971520,512,7,1700000000000005\n"
    + "7,snapshot,0,0,0,1700000000000006\n"
    + "8,free_requested,140000020971520,512,7,1700000000000007\n"
    + "9,free_completed,140000020971520,512,7,1700000000000008\n"
    + "10,segment_free,140000020971520,2097152,7,1700000000000009\n",
    "crlf_no_time.csv": HEADER.replace("\n", "\r\n")
    + "0,segment_alloc,47397732352,155189248,0,\r\n"
    + "1,alloc,47397732352,154435584,0,\r\n"
    + "2,oom,0,20971520,0,\r\n"
    + "3,segment_map,47552921600,2097152,0,\r\n"
    + "4,segment_unmap,47552921600,2097152,0,",
    "bom.csv": "\ufeff" + HEADER + "0,alloc,1024,1,18446744073709551615,18446744073709551615\n",
    "header_only.csv": HEADER,
    "bad_row.csv": HEADER + "0,alloc,1,2,3\n",
    # a graph pool (1, 0) captured on stream 7 and a MemPool (0, 1): the pool column
    "pools.csv": HEADER.replace("\n", ",pool\n")
    + "0,segment_alloc,140000000000000,20971520,7,,1:0\n"
    + "1,alloc,140000000000000,3145728,7,,1:0\n"
    + "2,segment_alloc,140000020971520,2097152,0,,\n"
    + "3,alloc,140000020971520,1000,0,,\n"
    + "4,segment_alloc,140000041943040,20971520,0,,0:1\n"
    + "5,alloc,140000041943040,5242880,0,,0:1\n"
    + "6,free_requested,140000000000000,3145728,7,,1:0\n"
    + "7,free_completed,140000000000000,3145728,7,,1:0\n"
    + "8,segment_free,140000000000000,20971520,7,,1:0\n"
    + "9,free_requested,140000020971520,1000,0,,\n"
    + "10,free_completed,140000020971520,1000,0,,\n",
}


def pickles():
    """A tiny snapshot-shaped object, as protocol 2 and protocol 4."""
    snap = {
        "segments": [{
            "device": 0, "address": 139781763760128, "total_size": 20971520,
            "allocated_size": 2097152, "active_size": 2097152, "requested_size": 2000000,
            "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [],
            "blocks": [
                {"address": 139781763760128, "size": 2097152, "requested_size": 2000000,
                 "state": "active_allocated", "frames": [
                     {"filename": "TMP/x.py", "line": 3, "name": "f"}]},
                {"address": 139781765857280, "size": 18874368, "requested_size": 0,
                 "state": "inactive", "frames": []},
            ],
        }],
        "device_traces": [[
            {"action": "segment_alloc", "addr": 139781763760128, "size": 20971520,
             "stream": 0, "time_us": 1772688692031317, "frames": []},
            {"action": "alloc", "addr": 139781763760128, "size": 2000000, "stream": 0,
             "time_us": 1772688692031319, "frames": [
                 {"filename": "TMP/x.py", "line": 3, "name": "f"}]},
            {"action": "free_requested", "addr": 139781763760128, "size": 2000000,
             "stream": 0, "time_us": 1772688692031400, "frames": []},
        ]],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:20",
                               "max_split_size": -1, "garbage_collection_threshold": 0.0,
                               "expandable_segments": False, "roundup_power2_divisions": {"1": 0}},
        "external_annotations": [],
    }
    misc = {"misc": [True, None, 2 ** 70, -(2 ** 40), -1.5e300, b"bytes", bytearray(b"ba"), (1,),
                     frozenset(), set([1]), "\u00e9\u4e2d"], "segments": None}
    return {
        "snapshot_p2.pickle": pickle.dumps(snap, protocol=2),
        "snapshot_p4.pickle": pickle.dumps(snap, protocol=4),
        "list_p0.pickle": pickle.dumps([1, 2.5, "x", None], protocol=0),
        "misc_p2.pickle": pickle.dumps(misc, protocol=2),
        "misc_p4.pickle": pickle.dumps(misc, protocol=4),
        "memo_p4.pickle": pickle.dumps([snap["segments"][0]["blocks"]] * 3, protocol=4),
    }


def jsons():
    import json
    snap = pickle.loads(pickles()["snapshot_p4.pickle"])
    snap["segments"][0]["segment_pool_id"] = list(snap["segments"][0]["segment_pool_id"])
    return {
        "snapshot.json": json.dumps(snap),
        "snapshot_compact.json": json.dumps(snap, separators=(",", ":"), ensure_ascii=False),
        "timeline_raw.json": "[[1700000000000, 1, 1024, 0], [1700000000100, 2, 4096, 4], "
                             "[1700000000200, 3, -4096, 4], [1700000000200, 3, 4096, 4], "
                             "[1700000000300, 4, -1024, 0]]",
        "kineto_fragment.json": json.dumps({
            "schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 34089730048}],
            "traceEvents": [
                {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                 "ts": 1669783687404093.5, "args": {"Total Reserved": 12782141440, "Total Allocated": 4121780224,
                                                    "Bytes": 25165824, "Addr": 139920404381696,
                                                    "Device Id": 1, "Device Type": 1}}]}),
        "edge_numbers.json": '{"a": NaN, "b": Infinity, "c": -Infinity, "d": 18446744073709551616, '
                             '"e": -9223372036854775809, "f": 1e400, "g": -0.0, "h": 5e-324, '
                             '"i": 18446744073709551615, "j": 1.7976931348623157e308}',
        "edge_strings.json": '\ufeff["\\ud83d\\ude00", "\\ud800", "\\u0000\\n\\t\\"\\\\\\/", '
                             '"\u00e9\u4e2d", {"k": 1, "k": 2, "": []}, [[[[]]]], true, false, null]',
    }


def snapshot_rich():
    """A two-device snapshot recorded mid-run: pre-existing segments and
    blocks, expandable segment map/unmap, oom, frames."""
    fr = [{"filename": "TMP/train.py", "line": 10, "name": "step"}]
    base = 139800000000000
    seg = lambda dev, addr, total, blocks, exp=False: {
        "device": dev, "address": addr, "total_size": total, "stream": 0,
        "segment_type": "large" if total > (2 << 20) else "small", "segment_pool_id": (0, 0),
        "is_expandable": exp, "frames": fr,
        "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
        "requested_size": sum(b["requested_size"] for b in blocks if b["state"] != "inactive"),
        "blocks": blocks}
    blk = lambda addr, size, req, state: {"address": addr, "size": size, "requested_size": req,
                                          "state": state, "frames": fr}
    segments = [
        seg(0, base, 20 << 20, [blk(base, 2 << 20, 2000000, "active_allocated"),
                                blk(base + (2 << 20), 18 << 20, 0, "inactive")]),
        seg(0, base + (64 << 20), 2 << 20, [blk(base + (64 << 20), 512, 100, "active_pending_free"),
                                            blk(base + (64 << 20) + 512, (2 << 20) - 512, 0, "inactive")]),
        seg(1, base + (1 << 30), 4 << 20, [blk(base + (1 << 30), 4 << 20, 4 << 20, "active_allocated")], True),
    ]
    ev = lambda action, addr, size, t, stream=0: {"action": action, "addr": addr, "size": size,
                                                  "stream": stream, "time_us": t, "frames": fr}
    traces = [
        [ev("free_requested", base + 4096, 100, 1), ev("free_completed", base + 4096, 100, 2),
         ev("segment_alloc", base + (128 << 20), 20 << 20, 3), ev("alloc", base + (128 << 20), 6297600, 4),
         ev("alloc", base + (2 << 20), 1 << 20, 5, 7), ev("free_requested", base + (2 << 20), 1 << 20, 6, 7),
         ev("oom", 1 << 20, 80 << 30, 7), ev("snapshot", 0, 0, 8),
         ev("free_requested", base + (128 << 20), 6297600, 9), ev("free_completed", base + (128 << 20), 6297600, 10),
         ev("segment_free", base + (128 << 20), 20 << 20, 11), ev("free_completed", base + (2 << 20), 1 << 20, 12)],
        [ev("segment_map", base + (1 << 30), 2 << 20, 1), ev("alloc", base + (1 << 30), 4 << 20, 2),
         ev("segment_unmap", base + (1 << 30) + (4 << 20), 2 << 20, 3)],
    ]
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:40,garbage_collection_threshold:0.5",
                                   "max_split_size": 40 << 20, "garbage_collection_threshold": 0.5,
                                   "expandable_segments": False,
                                   "roundup_power2_divisions": {"1": 0, "2": 4}},
            "external_annotations": [{"device": 0, "stage": "START", "name": "fwd", "time_us": 1}]}


def kineto():
    import json
    evs = [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5.0, "dur": 3.0}]
    addr = 139920404381696
    live = []
    for i in range(12):
        if i % 3 == 2 and live:
            a, b = live.pop(0)
            bytes_ = -b
        else:
            a, b = addr + i * (1 << 21), 512 * (i + 1)
            live.append((a, b))
            bytes_ = b
        evs.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                    "pid": 1, "tid": 1, "ts": 1669783687404093 + (i // 2),
                    "args": {"Total Reserved": 12782141440, "Total Allocated": 4121780224 + i,
                             "Bytes": bytes_, "Addr": a, "Device Id": i % 2, "Device Type": 1,
                             "Ev Idx": 100 - i}})
    evs.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                "ts": 1669783687404099, "args": {"Bytes": 64, "Addr": 1234, "Device Id": -1, "Device Type": 0}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "totalGlobalMem": 34089730048}],
           "traceEvents": evs, "traceName": "TMP/x.json"}
    return {"kineto_small.json": json.dumps(doc), "kineto_bare_list.json": json.dumps(evs[1:6]),
            "kineto_gz.json.gz": __import__("gzip").compress(json.dumps(doc).encode(), mtime=0)}


RMM = {
    "rmm_basic.csv": "Thread,Time,Action,Pointer,Size,Stream\n"
    "140386766759744,11:14:32.519226,allocate,0x7fae58000000,1000,0x0\n"
    "140386766759744,11:14:32.519300,allocate,0x7fae58000400,2048,0x7f00\n"
    "140386766759744,11:14:32.519400,free,0x7fae58000000,1000,0x0\n"
    "140386766759744,11:14:33.000001,allocate failure,(nil),99999999999,0x0\n"
    "140386766759744,11:14:34.000000,deallocate,0x7fae5ffff000,64,0x0\n",
    "rmm_times.csv": "Thread,Time,Action,Pointer,Size,Stream\r\n"
    "1,23:59:59:999999,allocate,4096,512,0\r\n"
    "\r\n"
    "1,00:00:00:000001,free,4096,512,0\r\n"
    "2,1634567890.234567,allocate,0xffffffffffffffff,1,18446744073709551615\r\n"
    "2,garbage,free,0xffffffffffffffff,1,0x1",
}


def main():
    which = set(sys.argv[1:])

    def on(t):
        return not which or t in which

    if on("fuzz_config"):
        for name, (mode, text) in CONFIGS.items():
            write("fuzz_config", name, bytes([mode]) + text.encode())
    if on("fuzz_ops"):
        for name, data in OPS.items():
            write("fuzz_ops", name, data)
    if on("fuzz_trace_csv"):
        for name, text in CSV.items():
            write("fuzz_trace_csv", name, text)
    if on("fuzz_trace_csv"):
        head30 = os.path.join(ROOT, "..", "tests", "data", "cs336_attention_microbench.events.csv")
        if os.path.exists(head30):  # MIT; see tests/data/README.md
            with open(head30, "rb") as f:
                lines = f.read().split(b"\n")
            write("fuzz_trace_csv", "cs336_attention_microbench.head30.csv", b"\n".join(lines[:30]) + b"\n")
    if on("fuzz_replay"):
        # mode byte (settings, device size, flags; see fuzz/fuzz_replay.c) + CSV
        for mode, name in ((0x00, "prelude_and_events.csv"), (0x05, "crlf_no_time.csv"),
                           (0x1a, "bom.csv"), (0x43, "prelude_and_events.csv"),
                           (0x00, "pools.csv")):
            write("fuzz_replay", "m%02x_%s" % (mode, name), bytes([mode]) + CSV[name].encode())
        p = os.path.join(SEEDS, "fuzz_trace_csv", "cs336_attention_microbench.head30.csv")
        if os.path.exists(p):
            with open(p, "rb") as f:
                body = f.read()
            for mode in (0x00, 0x08, 0x31):
                write("fuzz_replay", "m%02x_cs336_attention_microbench.head30.csv" % mode,
                      bytes([mode]) + body)
    if on("fuzz_json"):
        for name, text in jsons().items():
            write("fuzz_json", name, text)
    if on("fuzz_trace_snapshot"):
        import gzip
        import json
        rich = snapshot_rich()
        write("fuzz_trace_snapshot", "rich_p4.pickle", pickle.dumps(rich, protocol=4))
        write("fuzz_trace_snapshot", "rich_p2.pickle.gz", gzip.compress(pickle.dumps(rich, protocol=2), mtime=0))
        jr = json.loads(json.dumps(rich))
        write("fuzz_trace_snapshot", "rich.json", json.dumps(jr))
        write("fuzz_trace_snapshot", "segments_only.json", json.dumps(jr["segments"]))
        write("fuzz_trace_snapshot", "small_p4.pickle", pickles()["snapshot_p4.pickle"])
        write("fuzz_trace_snapshot", "small.json", jsons()["snapshot.json"])
    if on("fuzz_trace_kineto"):
        for name, data in kineto().items():
            write("fuzz_trace_kineto", name, data)
    if on("fuzz_trace_rmm"):
        for name, text in RMM.items():
            write("fuzz_trace_rmm", name, text)
    if on("fuzz_pickle"):
        for name, data in pickles().items():
            write("fuzz_pickle", name, data)


if __name__ == "__main__":
    main()
