#!/usr/bin/env bash
# `sublet record` and `sublet fit` under a real PyTorch on the null device
# (issue 29, points 1 and 3), with tests/torch/rec_prog.py (tensors whose
# sizes grow with its argument).  record: each format is written and read
# back by replay, report and tune; the check (sublet's replay against
# PyTorch's own memory_stats) passes, under settings, without stacks, and
# for a program that runs out of memory (its OOM counted alike); a bad
# --conf, an overflowing ring buffer and a failing program are said and
# exit as documented; a subprocess that imports torch leaves the recording
# alone.  fit: its answers agree with PyTorch's own allocator run at the
# target (the answer runs, the answer + 1 runs out of memory).  $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"
prog=$repo/tests/torch/rec_prog.py
cd "$tmp" || exit 1
export XDG_CACHE_HOME=$tmp/cache

record() {  # record OUT_FILE_OF_OUTPUT ARGS...: sublet record ARGS, output to the file, exit status echoed
  local out=$1
  shift
  "$cli" record "$@" >"$out" 2>&1
  echo $?
}

# the formats, each read back by the other commands
for f in a.pickle b.json c.csv d.pickle.gz l.slog; do
  rc=$(record "$tmp/out" --no-gpu -o "$tmp/$f" -- "$py" "$prog" 6)
  [ "$rc" = 0 ] || { cat "$tmp/out" >&2; fail "record -o $f exited $rc"; continue; }
  grep -q "^check: *equal$" "$tmp/out" || fail "record -o $f: the check is not equal: $(cat "$tmp/out")"
  grep -q "^program: *exit status 0$" "$tmp/out" || fail "record -o $f: no program line"
  [ -s "$tmp/$f" ] && [ -s "$tmp/$f.stats.json" ] || fail "record -o $f: the file or its sidecar is missing"
  "$cli" replay "$tmp/$f" >/dev/null 2>"$tmp/err" || fail "sublet replay $f: $(cat "$tmp/err")"
done
# the event log: PyTorch's run as sublet's engine made it, stacks and times kept
"$cli" convert "$tmp/l.slog" "$tmp/l.json" >/dev/null 2>"$tmp/err" || fail "convert l.slog: $(cat "$tmp/err")"
"$py" - "$tmp/l.json" "$tmp/b.json" <<'EOF' || fail "the event log's events are not the snapshot's"
import json, sys
log, snap = (json.load(open(p))["device_traces"][0] for p in sys.argv[1:3])
key = lambda e: (e["action"], e["size"], e["addr"] - 0x200000000000 if e["addr"] else 0)
assert [key(e) for e in log] == [key(e) for e in snap], "actions, sizes or addresses differ"
assert any(e.get("frames") for e in log) and all(e.get("time_us") for e in log), "no stacks or times"
EOF
"$cli" record --no-gpu -o "$tmp/x.slog.gz" -- "$py" "$prog" 6 >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q "must end in" "$tmp/out" || fail "record -o x.slog.gz is not refused as usage: $(cat "$tmp/out")"
"$cli" report "$tmp/a.pickle" -o "$tmp/a.html" >/dev/null 2>"$tmp/err" || fail "sublet report: $(cat "$tmp/err")"
"$cli" tune "$tmp/a.pickle" --threads 2 >/dev/null 2>"$tmp/err" || fail "sublet tune: $(cat "$tmp/err")"
"$py" - "$tmp/a.pickle.stats.json" <<'EOF' || fail "the sidecar lacks PyTorch's figures"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["torch_version"] and s["total_memory"] == 81559 << 20, s
assert s["memory_stats"]["reserved_bytes.all.peak"] > 0 and "num_ooms" in s["memory_stats"], s
EOF

# settings, no stacks, a name
rc=$(record "$tmp/out" --no-gpu --conf expandable_segments:True --stacks none --name "sublet test GPU" \
  -o "$tmp/e.pickle" -- "$py" "$prog" 6)
[ "$rc" = 0 ] && grep -q "^check: *equal$" "$tmp/out" || fail "record --conf expandable_segments:True (exit $rc): $(cat "$tmp/out")"
grep -q "replayed under: *pytorch_version:[0-9.]*,expandable_segments:True$" "$tmp/out" ||
  fail "the settings recorded are not those replayed: $(grep replayed "$tmp/out")"
grep -q "sublet test GPU" "$tmp/out" || fail "--name did not reach the null device"

# a memory fraction set by the program: recorded and replayed (with its OOM)
rc=$(record "$tmp/out" --no-gpu --memory 400MiB -o "$tmp/frac.pickle" -- "$py" "$prog" 30 --fraction 0.5 --catch)
[ "$rc" = 0 ] && grep -q "^check: *equal$" "$tmp/out" || fail "record with a memory fraction (exit $rc): $(cat "$tmp/out")"
grep -q "replayed under: .*memory_fraction:0.5$" "$tmp/out" || fail "the memory fraction is not replayed: $(grep replayed "$tmp/out")"
grep -q "^OOMs *1 *1 *$" "$tmp/out" || fail "under a memory fraction the OOM is not counted alike: $(grep OOMs "$tmp/out")"

# a program that runs out of memory: reported, OOM counted by both
rc=$(record "$tmp/out" --no-gpu --memory 200MiB -o "$tmp/oom.pickle" -- "$py" "$prog" 40)
[ "$rc" = 0 ] || fail "record of an OOM exited $rc: $(cat "$tmp/out")"
grep -q "^program: *exit status 1 (torch.OutOfMemoryError)$" "$tmp/out" || fail "the OOM is not reported: $(cat "$tmp/out")"
grep -q "^OOMs *1 *1 *$" "$tmp/out" || fail "OOMs: PyTorch and the replay differ: $(grep OOMs "$tmp/out")"
grep -q "^check: *equal$" "$tmp/out" || fail "the OOM run does not check equal"
# caught by the program: it exits 0, the OOM still counted
rc=$(record "$tmp/out" --no-gpu --memory 200MiB -o "$tmp/caught.pickle" -- "$py" "$prog" 40 --catch)
[ "$rc" = 0 ] && grep -q "^OOMs *1 *1 *$" "$tmp/out" || fail "a caught OOM (exit $rc): $(cat "$tmp/out")"

# a bad --conf: PyTorch refuses it, said, exit 1
rc=$(record "$tmp/out" --no-gpu --conf bogus_key:1 -o "$tmp/bad.pickle" -- "$py" "$prog" 2)
[ "$rc" = 1 ] || fail "record --conf bogus_key:1 exited $rc, not 1"
grep -q "the recording could not start.*bogus_key" "$tmp/out" || fail "the bad --conf is not named: $(cat "$tmp/out")"

# the ring buffer overflows: refused, naming --max-entries
rc=$(record "$tmp/out" --no-gpu --max-entries 20 -o "$tmp/over.pickle" -- "$py" "$prog" 6)
[ "$rc" = 1 ] && grep -q -- "--max-entries" "$tmp/out" || fail "an overflow (exit $rc): $(cat "$tmp/out")"

# a program failing for another reason: its exit status, the file still written
rc=$(record "$tmp/out" --no-gpu -o "$tmp/fail.pickle" -- "$py" -c \
  'import torch; x = torch.ones(1 << 20, device="cuda"); raise SystemExit(5)')
[ "$rc" = 5 ] || fail "a failing program: record exited $rc, not 5: $(cat "$tmp/out")"
grep -q "the program failed (exit status 5)" "$tmp/out" && [ -s "$tmp/fail.pickle" ] ||
  fail "a failing program is not said, or its file not written: $(cat "$tmp/out")"

# a subprocess that imports torch: the recording stays the parent's
rc=$(record "$tmp/out" --no-gpu -o "$tmp/spawn.pickle" -- "$py" "$prog" 6 --spawn)
[ "$rc" = 0 ] && grep -q "^child " "$tmp/out" || fail "record --spawn (exit $rc): $(cat "$tmp/out")"
n1=$(grep "^events:" "$tmp/out" | awk '{print $2}')
rc=$(record "$tmp/out" --no-gpu -o "$tmp/plain.pickle" -- "$py" "$prog" 6)
n2=$(grep "^events:" "$tmp/out" | awk '{print $2}')
[ -n "$n1" ] && [ "$n1" = "$n2" ] || fail "with a subprocess the recording has $n1 events, without $n2"

# a user's own sitecustomize still runs (chained)
mkdir -p "$tmp/user"
echo 'import os; open(os.environ["USER_HOOK_MARK"], "w").write("ran")' >"$tmp/user/sitecustomize.py"
USER_HOOK_MARK=$tmp/mark PYTHONPATH=$tmp/user "$cli" record --no-gpu -o "$tmp/u.pickle" -- "$py" "$prog" 2 >"$tmp/out" 2>&1 ||
  fail "record with a user sitecustomize: $(cat "$tmp/out")"
[ -f "$tmp/mark" ] || fail "the user's sitecustomize did not run"

# usage errors
expect() {  # expect RC PATTERN ARGS...
  local want=$1 pat=$2
  shift 2
  "$cli" "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ $rc = "$want" ] || fail "sublet $* exited $rc, not $want"
  grep -q -- "$pat" "$tmp/out" || fail "sublet $*: no '$pat' in: $(cat "$tmp/out")"
}
expect 2 "-o FILE is required" record -- true
expect 2 "must end in .pickle" record -o x.txt -- true
expect 2 "no command" record -o x.pickle
expect 2 "--stacks 'all'" record --stacks all -o x.pickle -- true
expect 2 "no placeholder" fit -- "$py" "$prog" 3
expect 2 "--min is above --max" fit --min 5 --max 3 -- "$py" "$prog" {n}
expect 0 "usage: sublet record" help record
expect 0 "usage: sublet fit" help fit

# fit: the answers, checked against PyTorch's own allocator at the target
"$cli" fit --device-memory 200MiB --max 64 -o "$tmp/fit.json" --keep "$tmp/keep" -- "$py" "$prog" {batch} >"$tmp/fit" 2>&1 ||
  fail "sublet fit exited $?: $(cat "$tmp/fit")"
cat "$tmp/fit"
n=$(grep -c "^sublet fit: probing" "$tmp/fit")
[ "$n" -le 8 ] || fail "fit made $n probes for a program linear in its value (at most 8 expected)"
ls "$tmp"/keep/1/snapshot.pickle "$tmp"/keep/1/stats.json >/dev/null 2>&1 || fail "--keep kept no probe"
read -r now tuned tconf tnext < <("$py" - "$tmp/fit.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
nxt = [p["tuned_conf"] for p in r["probes"] if p["value"] == r["fits_tuned"] + 1]
print(r["fits_now"], r["fits_tuned"], r["tuned_conf"] or "-", (nxt or ["-"])[0] or "-")
EOF
)
[ -n "$now" ] && [ "$now" != None ] && [ "$now" -gt 1 ] || fail "fit: no answer now ($now)"
conf_of() { [ "$1" = - ] && echo "" || echo "$1"; }
if [ -n "$now" ] && [ "$now" != None ]; then
  rc=$(record "$tmp/out" --no-gpu --memory 200MiB -o "$tmp/f1.pickle" -- "$py" "$prog" "$now")
  grep -q "^program: *exit status 0$" "$tmp/out" || fail "fit says $now fits now, PyTorch ran out of memory"
  rc=$(record "$tmp/out" --no-gpu --memory 200MiB -o "$tmp/f2.pickle" -- "$py" "$prog" $((now + 1)))
  grep -q "torch.OutOfMemoryError" "$tmp/out" || fail "fit says $((now + 1)) does not fit now, PyTorch ran it"
  rc=$(record "$tmp/out" --no-gpu --memory 200MiB --conf "$(conf_of "$tconf")" -o "$tmp/f3.pickle" -- "$py" "$prog" "$tuned")
  grep -q "^program: *exit status 0$" "$tmp/out" || fail "fit says $tuned fits under '$tconf', PyTorch ran out of memory"
  [ "$tuned" -ge "$now" ] || fail "the tuned answer $tuned is below the current one $now"
  if [ "$tnext" != - ] || grep -q "\"value\": $((tuned + 1))," "$tmp/fit.json"; then
    rc=$(record "$tmp/out" --no-gpu --memory 200MiB --conf "$(conf_of "$tnext")" -o "$tmp/f4.pickle" -- "$py" "$prog" $((tuned + 1)))
    grep -q "torch.OutOfMemoryError" "$tmp/out" || fail "fit says $((tuned + 1)) does not fit under '$tnext', PyTorch ran it"
  fi
fi
# a program that runs out of memory even on the probe device: no value fits, under any setting
"$cli" fit --device-memory 100MiB --min 30 --max 64 -- "$py" "$prog" {n} >"$tmp/fit" 2>&1 ||
  fail "sublet fit (nothing fits) exited $?: $(cat "$tmp/fit")"
grep -q "^fits now: *none: {n} = 30 does not fit$" "$tmp/fit" && grep -q "^fits tuned: *none" "$tmp/fit" &&
  grep -q "out of memory on the 200.00 MiB probe device" "$tmp/fit" || fail "fit where nothing fits: $(cat "$tmp/fit")"
[ $fails = 0 ] && echo "record_check: all passed"
exit $((fails > 0))
