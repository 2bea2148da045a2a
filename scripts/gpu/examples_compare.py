#!/usr/bin/env python3
"""Compare two recordings of the same program, decision by decision: one made
on a GPU, one on the null device (`sublet record --no-gpu`), both PyTorch
snapshots with their trace entries (`sublet record -o FILE.pickle`).

    python3 scripts/gpu/examples_compare.py GPU.pickle NULL.pickle [--json OUT]

What is compared, entry by entry of device 0's trace: the action, the size,
the stream (numbered by first appearance: a GPU's stream handles are
pointers, the null device's are numbers), and where each block lies (the
segment numbered by creation, and the offset inside it), so that two runs
whose driver placed the segments elsewhere still compare equal when the
allocator made the same decisions.  A *decision* is whether an alloc made
PyTorch reserve memory (a segment_alloc or segment_map right before it).
Prints the counts, the first difference with its neighbours and stacks, and
the peak reserved bytes of both runs; exit status 0 when every entry is
equal, 1 when some differ, 2 when a file cannot be read.  Needs only the
standard library (a snapshot is a plain pickle of dicts and lists).
"""

import argparse
import gzip
import json
import pickle
import sys

SEGMENT_ACTIONS = ("segment_alloc", "segment_map")
RELEASE_ACTIONS = ("segment_free", "segment_unmap")


def load(path):
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        data = gzip.open(f).read() if head == b"\x1f\x8b" else f.read()
    snap = pickle.loads(data)
    traces = snap.get("device_traces") or [[]]
    return snap, list(traces[0]) if traces else []


class Normaliser:
    """Streams by first appearance; addresses as (segment number, offset)."""

    def __init__(self):
        self.streams = {}
        self.segments = []  # (start, size, number), live and released

    def stream(self, s):
        return self.streams.setdefault(s, len(self.streams))

    def where(self, addr):
        for start, size, num in reversed(self.segments):
            if start <= addr < start + size:
                return (num, addr - start)
        return (None, addr)

    def entry(self, e):
        action, addr, size = e.get("action"), e.get("addr", 0), e.get("size", 0)
        if action in SEGMENT_ACTIONS and self.where(addr)[0] is None:
            # a new segment (a map inside an expandable one's range is not)
            self.segments.append((addr, size, len(self.segments)))
        return (action, size, self.stream(e.get("stream", 0)), self.where(addr))


def decisions(norm):
    out, pending = [], False
    for n in norm:
        if n[0] in SEGMENT_ACTIONS:
            pending = True
        elif n[0] == "alloc":
            out.append(pending)
            pending = False
    return out


def peak_reserved(entries):
    cur = peak = 0
    for e in entries:
        a = e.get("action")
        if a in SEGMENT_ACTIONS:
            cur += e.get("size", 0)
        elif a in RELEASE_ACTIONS:
            cur -= e.get("size", 0)
        peak = max(peak, cur)
    return peak


def frames(e, n=3):
    fr = e.get("frames") or []
    py = [f for f in fr if str(f.get("filename", "")).endswith(".py")]
    fr = py or fr  # the Python frames say where in the program; else the C++ ones
    return ["%s:%s %s" % (f.get("filename", "?"), f.get("line", "?"), f.get("name", "?")) for f in fr[:n]]


FREE_ACTIONS = ("free_requested", "free_completed")


def canonical(norm):
    """Each run of frees with nothing else between them in a fixed order:
    PyTorch frees some groups of tensors in the order of a hash table keyed
    by host pointers (autocast's cache of casts when the region ends), which
    differs from run to run; the state after such a run does not depend on
    its order (freed blocks merge with their neighbours either way)."""
    out, run = [], []
    for n in norm + [None]:
        if n is not None and n[0] in FREE_ACTIONS:
            run.append(n)
            continue
        out.extend(sorted(run, key=repr))
        run = []
        if n is not None:
            out.append(n)
    return out


def compare(gpu, null):
    ng, nn = Normaliser(), Normaliser()
    a = canonical([ng.entry(e) for e in gpu])
    b = canonical([nn.entry(e) for e in null])
    equal = 0
    first = None
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y:
            equal += 1
        elif first is None:
            first = i
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    da, db = decisions(a), decisions(b)
    res = {
        "entries": [len(a), len(b)],
        "entries_equal": equal,
        "allocs": [len(da), len(db)],
        "decisions_equal": sum(1 for x, y in zip(da, db) if x == y),
        "segments": [sum(da), sum(db)],
        "peak_reserved_bytes": [peak_reserved(gpu), peak_reserved(null)],
        "first_difference": first,
        "equal": first is None,
    }
    if first is not None:
        res["at_first_difference"] = {
            "gpu": [list(map(str, a[j])) for j in range(max(0, first - 2), min(len(a), first + 3))],
            "null": [list(map(str, b[j])) for j in range(max(0, first - 2), min(len(b), first + 3))],
            # (the stacks of the entries at that index; in a run of frees
            # put in order, the recorded entry there may be another one)
            "gpu_stack": frames(gpu[first]) if first < len(gpu) else [],
            "null_stack": frames(null[first]) if first < len(null) else [],
        }
    return res


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gpu")
    ap.add_argument("null")
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args(argv)
    try:
        _, gpu = load(args.gpu)
        _, null = load(args.null)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as err:
        print("examples_compare: cannot read a recording: %s" % err, file=sys.stderr)
        return 2
    res = compare(gpu, null)
    print("entries: %d (GPU) and %d (null device), %d equal" % (res["entries"][0], res["entries"][1],
                                                               res["entries_equal"]))
    print("decisions: %d of %d allocs equal; segments %d (GPU) and %d (null device)" % (
        res["decisions_equal"], min(res["allocs"]), res["segments"][0], res["segments"][1]))
    print("peak reserved: %d bytes (GPU), %d bytes (null device)" % tuple(res["peak_reserved_bytes"]))
    if not res["equal"]:
        d = res["at_first_difference"]
        print("first difference at entry %d:" % res["first_difference"])
        print("  GPU:         %s" % d["gpu"])
        print("  null device: %s" % d["null"])
        for k in ("gpu_stack", "null_stack"):
            if d[k]:
                print("  %s: %s" % (k, " <- ".join(d[k])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if res["equal"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
