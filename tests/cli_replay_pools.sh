#!/usr/bin/env bash
# sublet — replaying traces with private pools (docs/pools.md, docs/replay.md): random two-pool
# scenarios (tests/oracle/pools_gen.py: graph captures on streams, default-pool traffic in
# between, frees across pools, graph resets, empty_cache, OOMs on a small device; every other
# seed with MemPools too: use_mem_pool, deletion) run through the engine by pools_sublet (the
# driver tests/cli_oracle_pools.sh holds equal to PyTorch 2.6, step by step, on the graph
# scenarios), which writes the run as PyTorch records it: a snapshot pickle whose trace entries
# carry pool_id.  `sublet replay` of it must match 100 % of the decisions, segment sizes and addresses
# in every pool, every release set and the peak; the same trace as JSON, as an events CSV (pool
# column) and back to a pickle replays the same per-pool figures; the text report lists the
# pools; mincap and tune take a pool trace.  Also: a recording cut mid-run whose entries lack
# pool_id (PyTorch 2.6: segment_pool_id only) gets its pools rebuilt from the final segments.
# $1 is the CLI.
#   SUBLET_POOL_REPLAY_SEEDS=N  scenarios (default 16; the format round trips on the first 4)
set -u
cli=${1:?usage: cli_replay_pools.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
bindir=$(cd "$(dirname "$cli")" && pwd)
driver=$bindir/pools_sublet
[ -x "$driver" ] || { echo "FAIL: no pools_sublet at $driver" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# The replay's JSON: every pool exact; prints "pools allocs_in_private_pools released_pools
# allocs_in_mempools".
check_json() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = d["fidelity"]
assert d["error"] is None and d["errors"] == 0, (d["error"], d["first_error"])
assert f["decisions_matched"] == f["allocs_compared"], "decisions"
assert f["addresses_matched"] == f["allocs_compared"], "addresses"
assert f["segment_sizes_matched"] == f["recorded_segment_allocs"] == f["engine_segment_allocs"]
assert f["empty_cache_sets_matched"] == f["empty_caches_compared"], "release sets"
assert f["recorded_segment_frees"] == f["engine_segment_frees"]
assert d["peak_reserved_bytes"] == f["recorded_peak_reserved_bytes"], "peak"
pools = f.get("pools", [])
assert not pools or pools[0]["pool_id"] == [0, 0] and pools[0]["kind"] == "default"
assert sum(p["allocs_compared"] for p in pools) == (f["allocs_compared"] if pools else 0)
priv = released = mem = 0
for p in pools:
    n = p["allocs_compared"]
    assert p["decisions_matched"] == n and p["addresses_matched"] == n, p
    assert p["segment_sizes_matched"] == p["recorded_segment_allocs"] == p["engine_segment_allocs"], p
    assert p["first_decision_mismatch"] is None and p["first_address_mismatch"] is None, p
    if p["pool_id"] != [0, 0]:
        graph = p["kind"] == "graph" and p["pool_id"][1] == 0
        assert graph or p["kind"] == "mempool" and p["pool_id"][0] == 0, p
        priv += n
        mem += 0 if graph else n
        released += p["released_at"] is not None
print(len(pools), priv, released, mem)
PY
}
# The replay's fidelity object alone.
fidelity() {
    python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['fidelity']))" "$1"
}

seeds=${SUBLET_POOL_REPLAY_SEEDS:-16}
total_priv=0 total_released=0 total_mem=0 with_pools=0
for seed in $(seq 1 "$seeds"); do
    mode=graphs
    [ $((seed % 2)) = 0 ] && mode=mempool
    python3 "$here/oracle/pools_gen.py" "$seed" 250 $mode >"$tmp/s.txt"
    cap=$(sed -n 's/^capacity //p' "$tmp/s.txt")
    "$driver" "$tmp/s.txt" "$tmp/t.pickle" >/dev/null || { fail "seed $seed: pools_sublet"; continue; }
    "$cli" replay "$tmp/t.pickle" --json --check --device-memory "$cap" >"$tmp/r.json" 2>"$tmp/err" ||
        { fail "seed $seed: replay: $(cat "$tmp/err")"; continue; }
    got=$(check_json "$tmp/r.json" 2>"$tmp/err") ||
        { fail "seed $seed (python3 tests/oracle/pools_gen.py $seed 250 $mode): $(tail -1 "$tmp/err")"; continue; }
    set -- $got
    [ "$1" -gt 1 ] && with_pools=$((with_pools + 1))
    total_priv=$((total_priv + $2))
    total_released=$((total_released + $3))
    total_mem=$((total_mem + $4))
    [ "$seed" -le 4 ] || continue
    fidelity "$tmp/r.json" >"$tmp/fid.pickle"
    # the same trace as JSON, as an events CSV (pool column) and back to a pickle
    "$cli" convert "$tmp/t.pickle" "$tmp/t.json" >/dev/null 2>&1 &&
        "$cli" convert "$tmp/t.json" "$tmp/t.events.csv" >/dev/null 2>&1 &&
        "$cli" convert "$tmp/t.events.csv" "$tmp/t2.pickle" >/dev/null 2>&1 ||
        { fail "seed $seed: convert pickle -> JSON -> CSV -> pickle"; continue; }
    if [ "$1" -gt 1 ]; then
        head -1 "$tmp/t.events.csv" | grep -q '^seq,action,addr,size,stream,time_us,pool' ||
            fail "seed $seed: the CSV lacks the pool column"
    fi
    "$cli" convert "$tmp/t2.pickle" "$tmp/t2.events.csv" >/dev/null 2>&1 &&
        cmp -s "$tmp/t.events.csv" "$tmp/t2.events.csv" || fail "seed $seed: CSV -> pickle -> CSV differs"
    # CSV -> CSV is streamed: the writer meets the first private row and starts again with the column
    "$cli" convert "$tmp/t.events.csv" "$tmp/t3.events.csv" >/dev/null 2>&1 &&
        cmp -s "$tmp/t.events.csv" "$tmp/t3.events.csv" || fail "seed $seed: streamed CSV -> CSV differs"
    for form in t.json t.events.csv t2.pickle; do
        "$cli" replay "$tmp/$form" --json --device-memory "$cap" >"$tmp/r2.json" 2>/dev/null
        fidelity "$tmp/r2.json" >"$tmp/fid.other" 2>/dev/null
        cmp -s "$tmp/fid.pickle" "$tmp/fid.other" || fail "seed $seed: $form replays differently"
    done
    # streamed from standard input: the same
    "$cli" replay - --json --device-memory "$cap" <"$tmp/t.events.csv" >"$tmp/r3.json" 2>/dev/null
    fidelity "$tmp/r3.json" >"$tmp/fid.other" 2>/dev/null
    cmp -s "$tmp/fid.pickle" "$tmp/fid.other" || fail "seed $seed: the streamed CSV replays differently"
done
echo "$seeds scenarios: $with_pools with private pools, $total_priv allocs in private pools" \
     "($total_mem in MemPools), $total_released pools released by the replay, every pool exact"
[ "$with_pools" -gt $((seeds / 2)) ] || fail "only $with_pools scenarios used a private pool"
[ "$total_priv" -gt 0 ] && [ "$total_released" -gt 0 ] && [ "$total_mem" -gt 0 ] ||
    fail "no private-pool alloc, MemPool alloc or release"

# the text report lists the pools (seed 1); the default pools' lines are unchanged
python3 "$here/oracle/pools_gen.py" 1 250 graphs >"$tmp/s.txt"
cap=$(sed -n 's/^capacity //p' "$tmp/s.txt")
"$driver" "$tmp/s.txt" "$tmp/t.pickle" >/dev/null
"$cli" replay "$tmp/t.pickle" --device-memory "$cap" >"$tmp/out.txt" 2>&1 || fail "text replay"
grep -q '^  per pool:' "$tmp/out.txt" || fail "no per-pool section"
grep -Eq '^    pool \(0, 0\) +default +decisions ([0-9]+) / \1,' "$tmp/out.txt" || fail "default pool line"
grep -Eq '^    pool \([12], 0\) +CUDA graph decisions ([0-9]+) / \1,' "$tmp/out.txt" || fail "graph pool line"

# mincap and tune take a pool trace; tune says the pools stay fixed
"$cli" mincap "$tmp/t.pickle" >"$tmp/m.txt" 2>&1 || fail "mincap on a pool trace: $(tail -2 "$tmp/m.txt")"
"$cli" tune "$tmp/t.pickle" --threads 2 >"$tmp/tune.txt" 2>&1 || fail "tune on a pool trace: $(tail -2 "$tmp/tune.txt")"
grep -q 'private pools' "$tmp/tune.txt" || fail "tune does not say it keeps the pools"

# a trace without pool_id entries (PyTorch 2.6): cut the scenario mid-run so that segments of
# both kinds stay, drop every entry's pool_id; the rows in segments still live at the end get
# their pool back from segment_pool_id, no row gets a wrong pool
python3 "$here/oracle/pools_gen.py" 3 250 graphs >"$tmp/full.txt"
head -150 "$tmp/full.txt" >"$tmp/cut.txt"
"$driver" "$tmp/cut.txt" "$tmp/cut.json" >/dev/null || fail "pools_sublet on a cut scenario"
python3 - "$tmp/cut.json" "$tmp/nopool.json" <<'PY' || fail "stripping pool_id"
import json, sys
d = json.load(open(sys.argv[1]))
assert any(s["segment_pool_id"] != [0, 0] for s in d["segments"]), "no private segment left"
for dev in d["device_traces"]:
    for e in dev:
        e.pop("pool_id", None)
json.dump(d, open(sys.argv[2], "w"))
PY
"$cli" convert "$tmp/cut.json" "$tmp/cut.events.csv" >/dev/null 2>&1 || fail "convert the cut trace"
"$cli" convert "$tmp/nopool.json" "$tmp/nopool.events.csv" >/dev/null 2>&1 || fail "convert without pool_id"
python3 - "$tmp/cut.events.csv" "$tmp/nopool.events.csv" <<'PY' || fail "pools rebuilt from segment_pool_id"
import csv, sys
a = list(csv.DictReader(open(sys.argv[1])))
b = list(csv.DictReader(open(sys.argv[2])))
assert len(a) == len(b)
rebuilt = 0
for x, y in zip(a, b):
    assert (x["action"], x["addr"]) == (y["action"], y["addr"])
    assert y["pool"] in ("", x["pool"]), (x, y)      # unknown or right, never wrong
    rebuilt += y["pool"] != ""
assert rebuilt > 0, "no pool rebuilt"
print(rebuilt, "rows' pools rebuilt of", sum(x["pool"] != "" for x in a))
PY

[ "$fails" = 0 ] && echo "cli_replay_pools: all passed"
[ "$fails" = 0 ]
