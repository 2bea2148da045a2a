#!/usr/bin/env bash
# The event log survives kill -9: a child logging under load (tests/log_child.c:
# 4 threads on the sim backend, the log flushed every few ms) is killed with
# SIGKILL at random points, 50 times (or as many as fit in about 30 s, 20 at
# least).  Every log must read (sublet convert to an
# events CSV) up to its last whole block, with the torn tail reported when the
# kill cut a block; every allocation read back must be one the child made, in
# each thread's order, with none missing before it (thread t's i-th request is
# 16 * (i % 65536 + 1) + t bytes); every free must match a live allocation of
# the same size; and `sublet replay` must read the log without a parse error.
set -euo pipefail
cli=$1
build=$(cd "$(dirname "$cli")" && pwd)
child=$build/log_child
[ -x "$child" ] || { echo "missing $child"; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=${SUBLET_LOG_CRASH_RUNS:-50}
torn=0 events_total=0 done_runs=0
for run in $(seq 1 "$runs"); do
  # bounded to about 30 s on a loaded machine, after 20 runs at least
  if [ "$SECONDS" -ge 30 ] && [ "$done_runs" -ge 20 ]; then break; fi
  log=$tmp/run$run.slog
  "$child" "$log" 4 30 > "$tmp/ready" &
  pid=$!
  # wait for "ready" (the log is open), then a random 10..400 ms of load
  for _ in $(seq 1 200); do grep -q ready "$tmp/ready" 2>/dev/null && break; sleep 0.01; done
  sleep "0.$(printf '%03d' $((RANDOM % 390 + 10)))"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  if ! "$cli" convert "$log" "$tmp/out.events.csv" > /dev/null 2> "$tmp/err"; then
    echo "run $run: convert failed:"; cat "$tmp/err"; cp "$log" /tmp/sublet_crash_failed.slog; exit 1
  fi
  if grep -q "torn tail at byte [0-9]*, [0-9]* bytes ignored" "$tmp/err"; then
    torn=$((torn + 1))
  elif grep -q warning "$tmp/err"; then
    echo "run $run: unexpected warning:"; cat "$tmp/err"; exit 1
  fi
  n=$(python3 - "$tmp/out.events.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
nexts = {}
live = {}
for r in rows:
    a, addr, size = r["action"], int(r["addr"]), int(r["size"])
    if a == "alloc":
        t = size % 16
        i = nexts.get(t, 0)
        want = 16 * (i % 65536 + 1) + t
        if t >= 4 or size != want:
            sys.exit("seq %s: alloc of %d bytes: thread %d's request %d is %d bytes"
                     % (r["seq"], size, t, i, want))
        nexts[t] = i + 1
        if addr in live:
            sys.exit("seq %s: alloc at live address %#x" % (r["seq"], addr))
        live[addr] = size
    elif a == "free_requested":
        if live.get(addr) != size:
            sys.exit("seq %s: free of %#x (%d bytes) not live" % (r["seq"], addr, size))
    elif a == "free_completed":
        if live.pop(addr, None) != size:
            sys.exit("seq %s: free_completed of %#x not live" % (r["seq"], addr))
    elif a not in ("segment_alloc", "segment_free"):
        sys.exit("seq %s: unexpected action %s" % (r["seq"], a))
print(len(rows))
PY
) || { echo "run $run: the log read back wrong"; cp "$log" /tmp/sublet_crash_failed.slog; exit 1; }
  events_total=$((events_total + n))
  if ! "$cli" replay "$log" > "$tmp/replay.txt" 2> "$tmp/replay.err"; then
    if grep -qi "parse\|cannot read\|malformed" "$tmp/replay.err"; then
      echo "run $run: replay could not read the log:"; cat "$tmp/replay.err"; exit 1
    fi
  fi
  rm -f "$log"
  done_runs=$((done_runs + 1))
done
echo "log crash: $done_runs runs killed, $events_total events read back, $torn torn tails reported"
