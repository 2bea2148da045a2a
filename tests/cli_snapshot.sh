#!/usr/bin/env bash
# sublet — snapshots from the command line: `replay --snapshot-out`, `convert`
# between every pair of formats, `summary`, and the atomic write.  $1 is the
# built CLI; $SUBLET_TESTDATA holds the committed attention trace (CSV and the
# original PyTorch pickle), $SUBLET_SHARED the shared traces (optional).
set -u
cli=${1:?usage: cli_snapshot.sh PATH_TO_SUBLET}
data=${SUBLET_TESTDATA:-$(dirname "$0")/data}
shared=${SUBLET_SHARED:-$(dirname "$0")/../../shared}
csv=$data/cs336_attention_microbench.events.csv
pkl=$data/cs336_attention_microbench.pickle.gz
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
# The traces were recorded by PyTorch releases before 2.14, whose best fit breaks a tie
# of sizes by address (docs/versions.md): every command follows such a release.
pre214() { local cmd=$1; shift; "$cli" "$cmd" --pytorch-version 2.13 "$@"; }
[ -f "$csv" ] && [ -f "$pkl" ] || { echo "no test data in $data" >&2; exit 1; }
have_py=0
command -v python3 >/dev/null && have_py=1

# ---- replay --snapshot-out ------------------------------------------------------------
for in in "$csv" "$pkl"; do
    for out in snap.pickle snap.json snap.pickle.gz; do
        pre214 replay "$in" --snapshot-out "$tmp/$out" >"$tmp/replay.txt" 2>"$tmp/err" ||
            fail "replay $in --snapshot-out $out: $(cat "$tmp/err")"
        grep -q "snapshot of the replayed allocator: $tmp/$out (9 segments, 97 trace entries)" \
            "$tmp/replay.txt" || fail "replay $in: snapshot line"
        # read back by sublet itself: the same events, times included
        pre214 convert "$tmp/$out" "$tmp/back.csv" >/dev/null 2>"$tmp/err" ||
            fail "convert $out: $(cat "$tmp/err")"
        cmp -s "$tmp/back.csv" "$csv" || fail "$in -> $out -> csv differs from the original"
    done
    cp "$tmp/snap.pickle" "$tmp/from_$(basename "$in").pickle"
    cp "$tmp/snap.json" "$tmp/from_$(basename "$in").json"
done
pre214 replay "$csv" --json --snapshot-out "$tmp/j.json" >"$tmp/out.json" || fail "replay --json --snapshot-out"
if [ $have_py = 1 ]; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["snapshot_out"] == sys.argv[2], d["snapshot_out"]; assert d["format"] == "events-csv"' \
        "$tmp/out.json" "$tmp/j.json" || fail "replay --json snapshot_out key"
fi

# --at N: the snapshot of the allocator after event N
pre214 replay "$csv" --at 10 --snapshot-out "$tmp/at.json" >/dev/null || fail "--at with --snapshot-out"
# --stop-on-oom: the OOM is in the snapshot's trace, as PyTorch writes it
pre214 replay "$csv" --device-memory 3GiB --stop-on-oom --snapshot-out "$tmp/oom.pickle" \
    >/dev/null || fail "--stop-on-oom with --snapshot-out"

if [ $have_py = 1 ]; then
python3 - "$tmp" "$csv" "$pkl" <<'PY' || fail "snapshot content (python)"
import csv, gzip, json, pickle, pickletools, sys
tmp, csvpath, pklpath = sys.argv[1:4]
allowed = {"PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
           "EMPTY_LIST", "LIST", "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2",
           "TUPLE3", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "NONE", "NEWTRUE",
           "NEWFALSE", "SHORT_BINUNICODE", "BINUNICODE", "MEMOIZE", "BINPUT", "LONG_BINPUT",
           "BINGET", "LONG_BINGET"}

rows = list(csv.DictReader(open(csvpath, newline="")))
want = [(r["action"], int(r["addr"]), int(r["size"]), int(r["stream"]), int(r["time_us"]))
        for r in rows]
orig = pickle.load(gzip.open(pklpath))

def events(s, dev=0):
    return [(e["action"], e["device_free"] if e["action"] == "oom" else e["addr"], e["size"],
             e["stream"], e["time_us"]) for e in s["device_traces"][dev]]

def layout(s):
    return [(g["device"], g["address"], g["total_size"], g["allocated_size"], g["active_size"],
             g["requested_size"], g["stream"], g["segment_type"],
             [(b["address"], b["size"], b["state"],
               b["requested_size"] if b["state"] != "inactive" else 0) for b in g["blocks"]])
            for g in s["segments"]]

def check_viz_keys(s):
    for g in s["segments"]:
        for k in ("device", "address", "total_size", "stream", "blocks", "segment_type",
                  "segment_pool_id", "frames", "allocated_size", "active_size",
                  "requested_size", "is_expandable"):
            assert k in g, k
        assert sum(b["size"] for b in g["blocks"]) == g["total_size"]
        at = g["address"]
        for b in g["blocks"]:
            for k in ("address", "size", "state", "requested_size", "frames"):
                assert k in b, k
            assert b["address"] == at
            at += b["size"]
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
    assert isinstance(s["device_traces"], list)
    for tr in s["device_traces"]:
        for e in tr:
            for k in ("action", "size", "stream", "frames", "compile_context", "user_metadata"):
                assert k in e, k
            assert ("device_free" if e["action"] == "oom" else "addr") in e
    a = s["allocator_settings"]
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
              "expandable_segments", "pinned_num_register_threads", "release_lock_on_cudamalloc",
              "pinned_use_cuda_host_register", "roundup_power2_divisions",
              "graph_capture_record_stream_reuse"):
        assert k in a, k
    assert list(a["roundup_power2_divisions"]) == [str(1 << i) for i in range(16)]
    assert a["max_split_size"] == -1
    assert s["external_annotations"] == []

for src in ("events.csv", "pickle.gz"):
    raw = open(f"{tmp}/from_cs336_attention_microbench.{src}.pickle", "rb").read()
    assert raw[:2] == b"\x80\x04", raw[:2]
    ops = {op.name for op, arg, pos in pickletools.genops(raw)}
    assert ops <= allowed, ops - allowed
    p = pickle.loads(raw)
    text = open(f"{tmp}/from_cs336_attention_microbench.{src}.json").read()
    j = json.loads(text)
    assert json.dumps(p) == text             # the JSON is json.dumps of the pickle's content
    assert p == j or json.loads(json.dumps(p)) == j
    assert list(p) == ["segments", "device_traces", "allocator_settings", "external_annotations"]
    check_viz_keys(p)
    # recorded from an empty allocator: the read-back trace is the original's, exactly
    assert events(p) == want, "events differ"
    assert events(p) == events(orig)
    # the replayed allocator's segments are PyTorch's final ones
    assert layout(p) == layout(orig), "segments differ"
    if src == "pickle.gz":   # stacks come along: alloc and segment entries carry the trace's
        for e, o in zip(p["device_traces"][0], orig["device_traces"][0]):
            if e["action"] in ("alloc", "segment_alloc"):
                assert e["frames"] == o["frames"]
        assert any(e["frames"] for e in p["device_traces"][0])

at = json.load(open(f"{tmp}/at.json"))
assert events(at) == want[:11], events(at)
oom = pickle.load(open(f"{tmp}/oom.pickle", "rb"))
tr = oom["device_traces"][0]
assert tr[-1]["action"] == "oom" and "device_free" in tr[-1] and "addr" not in tr[-1], tr[-1]
assert tr[-1]["size"] == 536870912
assert events(oom)[:-1] == want[:len(tr) - 1]
PY
fi

# ---- atomic write from the command line -----------------------------------------------
pre214 replay "$csv" --snapshot-out "$tmp/no/such/dir/s.pickle" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "--snapshot-out into a missing directory: exit code"
grep -q "$tmp/no/such/dir/s.pickle: open failed" "$tmp/err" || fail "missing dir message: $(cat "$tmp/err")"
printf 'the old file\n' >"$tmp/keep.pickle"
cp "$tmp/keep.pickle" "$tmp/keep.orig"
SUBLET_TEST_FAIL_WRITE_AFTER=100 pre214 replay "$csv" --snapshot-out "$tmp/keep.pickle" \
    >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "failing write: exit code"
grep -q "$tmp/keep.pickle: write failed: No space left on device" "$tmp/err" ||
    fail "failing write message: $(cat "$tmp/err")"
cmp -s "$tmp/keep.pickle" "$tmp/keep.orig" || fail "failing write changed the old file"
ls -a "$tmp" | grep -q '^\.keep\.pickle\.' && fail "temporary file left behind"
SUBLET_TEST_FAIL_WRITE_AFTER=100 pre214 convert "$csv" "$tmp/keep.pickle" >/dev/null 2>&1 &&
    fail "failing convert write: exit code"
cmp -s "$tmp/keep.pickle" "$tmp/keep.orig" || fail "failing convert changed the old file"
pre214 replay "$csv" --snapshot-out "$tmp/s.txt" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--snapshot-out with an unknown extension: exit code"

# A real full filesystem: an 8 KiB tmpfs (root only; skipped where mounting is
# not permitted).  The JSON snapshot of the trace is about 22 KB.
mnt="$tmp/small_fs"
mkdir -p "$mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=8k tmpfs "$mnt" 2>/dev/null; then
    printf 'the old snapshot\n' >"$mnt/full.json"
    cp "$mnt/full.json" "$tmp/full.orig"
    pre214 replay "$csv" --snapshot-out "$mnt/full.json" >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] || fail "full filesystem: exit code $rc"
    grep -q "$mnt/full.json: .*No space left on device" "$tmp/err" ||
        fail "full filesystem message: $(cat "$tmp/err")"
    cmp -s "$mnt/full.json" "$tmp/full.orig" || fail "full filesystem changed the old file"
    ls -a "$mnt" | grep -q '^\.full\.json\.' && fail "full filesystem: temporary file left behind"
    [ "$(ls -A "$mnt")" = full.json ] || fail "full filesystem: stray files: $(ls -A "$mnt")"
    umount "$mnt" || fail "umount $mnt"
else
    echo "note: a tmpfs could not be mounted here; the full-filesystem case is skipped" >&2
fi

# ---- convert: every pair that can hold the data -----------------------------------------
cp "$csv" "$tmp/in.csv"
cp "$pkl" "$tmp/in.pickle.gz"
gzip -dc "$pkl" >"$tmp/in.pickle"
pre214 convert "$pkl" "$tmp/in.json" >/dev/null || fail "convert pickle.gz -> json"
gzip -c "$tmp/in.json" >"$tmp/in.json.gz"
gzip -c "$csv" >"$tmp/in.csv.gz"
for in in in.csv in.csv.gz in.pickle in.pickle.gz in.json in.json.gz; do
    for out in o.pickle o.pkl o.pickle.gz o.json o.json.gz o.csv o.csv.gz; do
        rm -f "$tmp/$out" "$tmp/rt.csv"
        pre214 convert "$tmp/$in" "$tmp/$out" >"$tmp/cv.txt" 2>"$tmp/err" ||
            { fail "convert $in -> $out: $(cat "$tmp/err")"; continue; }
        grep -q "$tmp/$out" "$tmp/cv.txt" || fail "convert $in -> $out: no report"
        pre214 convert "$tmp/$out" "$tmp/rt.csv" >/dev/null 2>&1 || fail "convert $out -> csv"
        cmp -s "$tmp/rt.csv" "$csv" || fail "$in -> $out -> csv differs from the original"
    done
done
# the tree is copied as is between snapshot forms; a trace is replayed or built directly
pre214 convert "$tmp/in.pickle" "$tmp/copy.pickle" | grep -q 'copied' || fail "snapshot copy"
pre214 convert "$csv" "$tmp/rep.json" | grep -q 'replayed through the engine' || fail "replayed"
pre214 convert "$csv" "$tmp/dir.json" --direct | grep -q 'built from the trace' || fail "--direct"
if [ $have_py = 1 ]; then
    python3 - "$tmp" <<'PY' || fail "convert content"
import json, pickle, sys
t = sys.argv[1]
a = pickle.load(open(f"{t}/in.pickle", "rb"))
assert pickle.load(open(f"{t}/copy.pickle", "rb")) == a       # lossless, frames included
assert json.load(open(f"{t}/in.json")) == json.loads(json.dumps(a))
r, d = json.load(open(f"{t}/rep.json")), json.load(open(f"{t}/dir.json"))
lay = lambda s: [(g["address"], g["total_size"], [(b["address"], b["size"], b["state"])
                  for b in g["blocks"]]) for g in s["segments"]]
assert lay(r) == lay(d) == lay(a)
PY
fi
# formats that cannot hold the data: a clear error, exit 2
pre214 convert "$csv" "$tmp/o.txt" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "convert to .txt: exit code"
grep -q "cannot write '$tmp/o.txt'" "$tmp/err" || fail "convert to .txt: message"
pre214 convert "$csv" "$tmp/o.rmm.csv.bz2" >/dev/null 2>&1
[ $? -eq 2 ] || fail "convert to .bz2: exit code"
pre214 convert "$tmp/missing.pickle" "$tmp/o.json" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "convert of a missing file: exit code"
grep -q 'missing.pickle' "$tmp/err" || fail "convert of a missing file: message"
pre214 convert "$csv" >/dev/null 2>&1
[ $? -eq 2 ] || fail "convert without OUT: exit code"
# a snapshot with two devices: an events CSV holds one, chosen with --device
if [ $have_py = 1 ]; then
    python3 - "$tmp" <<'PY' || fail "two-device snapshot"
import json, sys
t = sys.argv[1]
s = json.load(open(f"{t}/in.json"))
s["device_traces"].append([dict(e) for e in s["device_traces"][0][:3]])
s["segments"].append(dict(s["segments"][0], device=1))
json.dump(s, open(f"{t}/two.json", "w"))
PY
    pre214 convert "$tmp/two.json" "$tmp/two.csv" >/dev/null 2>"$tmp/err"
    [ $? -eq 1 ] || fail "two devices to CSV without --device: exit code"
    grep -q 'holds 2 devices (0, 1).*--device' "$tmp/err" || fail "two devices: message"
    pre214 convert "$tmp/two.json" "$tmp/two.csv" --device 0 >/dev/null 2>&1 || fail "--device 0"
    cmp -s "$tmp/two.csv" "$csv" || fail "--device 0 CSV"
    pre214 convert "$tmp/two.json" "$tmp/two1.csv" --device 1 >/dev/null 2>&1 || fail "--device 1"
    [ "$(grep -c ',alloc,\|,segment_alloc,' "$tmp/two1.csv")" -eq 3 ] || fail "--device 1 rows"
fi

# ---- summary ---------------------------------------------------------------------------------
for s in "$pkl" "$tmp/from_cs336_attention_microbench.events.csv.json"; do
    pre214 summary "$s" >"$tmp/sum.txt" 2>"$tmp/err" || fail "summary $s: $(cat "$tmp/err")"
    grep -q 'PyTorch CUDA memory summary, device ID 0' "$tmp/sum.txt" || fail "summary title"
    [ "$(grep -c '^|=\{75\}|$' "$tmp/sum.txt")" -ge 3 ] || fail "summary: 75-wide rules"
    awk '/^\|/ && length($0) != 77 { bad = 1 } END { exit bad }' "$tmp/sum.txt" ||
        fail "summary: table lines are not 75 wide between the bars"
    grep -q '^reserved_bytes.all.current 3781165056$' "$tmp/sum.txt" || fail "summary: flat stats"
    grep -q '^reserved_bytes.all.peak 3781165056$' "$tmp/sum.txt" || fail "summary: peak"
    grep -q 'replay ends with 3781165056 / 31719936: equal' "$tmp/sum.txt" || fail "summary check line"
done
pre214 summary "$pkl" --segments >"$tmp/seg.txt" || fail "summary --segments"
grep -q '^allocated_bytes.all.current 31719936$' "$tmp/seg.txt" || fail "--segments current"
grep -q '^allocated_bytes.all.peak 31719936$' "$tmp/seg.txt" || fail "--segments peak = current"
pre214 summary "$pkl" --json >"$tmp/sum.json" || fail "summary --json"
if [ $have_py = 1 ]; then
    python3 - "$tmp/sum.json" <<'PY' || fail "summary --json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["source"] == "replay" and d["device"] == 0 and d["segments"] == 9 and d["events"] == 97
assert d["stats"]["reserved_bytes.all.peak"] == 3781165056
assert d["stats"]["allocated_bytes.all.current"] == 31719936
lines = d["summary"].rstrip("\n").split("\n")
assert all(len(l) == 77 for l in lines), set(map(len, lines))
PY
    # a snapshot without a trace (memory_snapshot()'s bare list): from the segments
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); json.dump(s["segments"], open(sys.argv[2],"w"))' \
        "$tmp/in.json" "$tmp/bare.json"
    pre214 summary "$tmp/bare.json" >"$tmp/bare.txt" || fail "summary of a bare segment list"
    grep -q 'computed from the segments' "$tmp/bare.txt" || fail "bare: source"
    grep -q '^reserved_bytes.all.current 3781165056$' "$tmp/bare.txt" || fail "bare: reserved"
fi
pre214 summary "$tmp/missing.pickle" >/dev/null 2>&1
[ $? -eq 1 ] || fail "summary of a missing file: exit code"
pre214 summary >/dev/null 2>&1
[ $? -eq 2 ] || fail "summary without a file: exit code"
"$cli" help | grep -q 'convert IN OUT' || fail "help lists convert"
"$cli" help summary | grep -q 'sublet summary SNAPSHOT' || fail "help summary"

# ---- the shared traces (when present): CSV -> snapshot -> CSV keeps every row, and the
# replayed segments are PyTorch's final ones ---------------------------------------------------
traces=$shared/traces/pytorch_snapshot
if [ -d "$traces" ] && [ $have_py = 1 ]; then
    for f in "$traces"/*.events.csv; do
        id=$(basename "$f" .events.csv)
        pre214 convert "$f" "$tmp/$id.pickle" >/dev/null 2>"$tmp/err" ||
            { fail "convert $id: $(cat "$tmp/err")"; continue; }
        pre214 convert "$tmp/$id.pickle" "$tmp/$id.csv" >/dev/null 2>&1 || fail "convert $id back"
        cmp -s "$f" "$tmp/$id.csv" || fail "$id: CSV -> snapshot -> CSV differs"
        python3 - "$traces/$id.pickle.gz" "$tmp/$id.pickle" <<'PY' ||
import gzip, pickle, sys
lay = lambda s: [(g["address"], g["total_size"], [(k["address"], k["size"], k["state"])
                  for k in g["blocks"]]) for g in s["segments"]]
assert lay(pickle.load(gzip.open(sys.argv[1]))) == lay(pickle.load(open(sys.argv[2], "rb")))
PY
            fail "$id: the replayed snapshot's segments differ from PyTorch's"
    done
fi

if [ $fails -ne 0 ]; then
    echo "$fails check(s) failed" >&2
    exit 1
fi
echo "cli_snapshot: all checks passed"
