#!/usr/bin/env bash
# sublet — private pools in `sublet frag` (text and --json), from a snapshot
# with segment_pool_id: fuzz/seeds/fuzz_trace_snapshot/private_pools.json,
# written by tests/test_snapshot_pools.c from an allocator with the default
# pools, a CUDA graph's pool (1,0) and a MemPool (0,1).  Its copy with the
# trace dropped (a recording begun mid-run: the prelude in private pools
# cannot be adopted, so the replay is refused) gives the state from the
# snapshot's segments; the JSON's per-pool totals are held to the sums of its
# own segments, pool by pool; the text shows the same groups.  The snapshot
# itself replays pool by pool (docs/replay.md): the same pools and totals,
# from the replay.  A trace without private pools (tests/data) shows none of
# it.  $1 is the built CLI.
set -u
cli=${1:?usage: cli_frag_pools.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
snap=$here/../fuzz/seeds/fuzz_trace_snapshot/private_pools.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }
[ -f "$snap" ] || { echo "no snapshot at $snap" >&2; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3" >&2; exit 77; }
full=$snap
snap=$tmp/midrun.json
python3 - "$full" "$snap" <<'PY' || { echo "cannot write the mid-run copy" >&2; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["device_traces"]:
    t.clear()
json.dump(d, open(sys.argv[2], "w"))
PY

# ---- text ----------------------------------------------------------------------------
"$cli" frag "$snap" >"$tmp/frag.txt" 2>"$tmp/err" || fail "frag: $(cat "$tmp/err")"
grep -q "the state comes from the snapshot's segments" "$tmp/err" || fail "frag: no note on the source"
grep -q "^  per pool (" "$tmp/frag.txt" || fail "frag: no per-pool group"
for p in "default pools (0,0)" "private pool (0,1)" "private pool (1,0)"; do
    grep -q "^    $p  " "$tmp/frag.txt" || fail "frag: no per-pool row for $p"
    grep -q "^ $p: " "$tmp/frag.txt" || fail "frag: no segment-map group for $p"
done
grep -q "(private pool (1,0): large pool, stream 7)" "$tmp/frag.txt" ||
    fail "frag: a pinning segment of the graph pool is not named with its pool"

# ---- JSON: every pool's totals are the sums of its segments ----------------------------
"$cli" frag "$snap" --json >"$tmp/frag.json" 2>"$tmp/err" || fail "frag --json: $(cat "$tmp/err")"
python3 - "$tmp/frag.json" "$tmp/frag.txt" <<'PY' || fail "frag --json: per-pool totals"
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
assert d["source"] == "segments", d["source"]
pools = d["fragmentation"]["pools"]
ids = [tuple(p["pool_id"]) for p in pools]
assert ids == [(0, 0), (0, 1), (1, 0)], ids
segs = d["segments"]
assert all("pool_id" in s for s in segs)
for p in pools:
    mine = [s for s in segs if tuple(s["pool_id"]) == tuple(p["pool_id"])]
    want = {
        "segments": len(mine),
        "reserved_bytes": sum(s["size"] for s in mine),
        "allocated_bytes": sum(s["allocated_bytes"] for s in mine),
        "active_bytes": sum(s["active_bytes"] for s in mine),
        "free_bytes": sum(s["free_bytes"] for s in mine),
        "largest_free_block": max([s["largest_free_block"] for s in mine] or [0]),
        "pinned_segments": sum(1 for s in mine if s["live_blocks"]),
        "pinned_free_bytes": sum(s["free_bytes"] for s in mine if s["live_blocks"]),
        "free_blocks": sum(1 for s in mine for b in s["blocks"] if b["state"] == "inactive"),
    }
    for k, v in want.items():
        assert p[k] == v, (p["name"], k, p[k], v)
    assert p["segments"] > 0 and p["name"] in text, p["name"]
# the pools add up to the totals of every pool kind
assert sum(p["reserved_bytes"] for p in pools) == d["fragmentation"]["all"]["reserved_bytes"]
assert sum(p["free_bytes"] for p in pools) == d["fragmentation"]["all"]["free_bytes"]
# the pinning list names each segment's pool
assert d["pinning"] and all("pool_id" in s for s in d["pinning"])
PY

# ---- the whole snapshot replays pool by pool: the same pools and totals ----------------
"$cli" frag "$full" --json >"$tmp/replayed.json" 2>"$tmp/err" || fail "frag (replayed): $(cat "$tmp/err")"
python3 - "$tmp/replayed.json" "$tmp/frag.json" <<'PY' || fail "frag (replayed): per-pool totals"
import json, sys
r, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["source"] == "replay", r["source"]
keys = ("pool_id", "segments", "reserved_bytes", "allocated_bytes", "free_bytes")
rp = [{k: p[k] for k in keys} for p in r["fragmentation"]["pools"]]
sp = [{k: p[k] for k in keys} for p in s["fragmentation"]["pools"]]
assert rp == sp, (rp, sp)
PY

# ---- without private pools: nothing of it ---------------------------------------------
pkl=$data/cs336_attention_microbench.pickle.gz
"$cli" frag "$pkl" >"$tmp/plain.txt" 2>/dev/null || fail "frag $pkl"
"$cli" frag "$pkl" --json >"$tmp/plain.json" 2>/dev/null || fail "frag $pkl --json"
grep -q "per pool\|pools (0,0)\|private pool" "$tmp/plain.txt" && fail "frag $pkl: a pool group without private pools"
grep -q '"pools"\|"pool_id"' "$tmp/plain.json" && fail "frag $pkl --json: pool keys without private pools"

[ $fails = 0 ] && echo "cli_frag_pools: OK"
exit $((fails > 0))
