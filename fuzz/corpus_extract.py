#!/usr/bin/env python3
"""Cut a large recorded trace down to a small *valid* fuzz corpus entry.

    corpus_extract.py snapshot SRC DEST_PREFIX MAXBYTES
        SRC: a snapshot pickle (optionally .gz).  Writes DEST_PREFIX.pickle
        (protocol 4) and DEST_PREFIX.json holding the first segments and the
        first events of each device trace, as many as fit in MAXBYTES.
    corpus_extract.py kineto SRC DEST MAXBYTES
        SRC: a Kineto chrome trace (.json, optionally .gz).  Writes DEST: the
        trace with its first "[memory]" events and a few others.

Used by scripts/fuzz when it assembles build-fuzz/corpus/<target>/ from
../shared/traces; the results stay in the build tree (never committed).
Only plain data is involved (snapshots are dicts, lists, ints and strings)."""
import gzip
import json
import pickle
import sys


def load_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def shrink_snapshot(snap, nseg, nev):
    out = dict(snap) if isinstance(snap, dict) else {"segments": snap}
    segs = out.get("segments") or []
    out["segments"] = segs[:nseg]
    traces = out.get("device_traces")
    if isinstance(traces, list):
        out["device_traces"] = [t[:nev] if isinstance(t, list) else t for t in traces]
    return out


def fit(snap, encode, maxbytes):
    """The largest cut (halving both counts) whose encoding fits, or None."""
    nseg, nev = 64, 400
    while True:
        try:
            data = encode(shrink_snapshot(snap, nseg, nev))
        except (TypeError, ValueError):
            return None
        if len(data) <= maxbytes:
            return data
        if nseg <= 1 and nev <= 1:
            return None
        nseg, nev = max(1, nseg // 2), max(1, nev // 2)


def snapshot(src, dest, maxbytes):
    snap = pickle.loads(load_bytes(src))
    data = fit(snap, lambda v: pickle.dumps(v, protocol=4), maxbytes)
    if data is not None:
        with open(dest + ".pickle", "wb") as f:
            f.write(data)
    data = fit(snap, lambda v: json.dumps(v).encode(), maxbytes)
    if data is not None:
        with open(dest + ".json", "wb") as f:
            f.write(data)


def kineto(src, dest, maxbytes):
    doc = json.loads(load_bytes(src))
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    mem = [e for e in events if isinstance(e, dict) and e.get("name") == "[memory]"]
    other = [e for e in events if isinstance(e, dict) and e.get("name") != "[memory]"]
    n = 400
    while True:
        keep = other[:10] + mem[:n]
        small = dict(doc) if isinstance(doc, dict) else {}
        small["traceEvents"] = keep
        text = json.dumps(small)
        if len(text) <= maxbytes or n <= 1:
            break
        n //= 2
    with open(dest, "w") as f:
        f.write(text)


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("snapshot", "kineto"):
        sys.exit(__doc__)
    kind, src, dest, maxbytes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    (snapshot if kind == "snapshot" else kineto)(src, dest, maxbytes)


if __name__ == "__main__":
    main()
