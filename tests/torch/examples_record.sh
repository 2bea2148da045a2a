#!/usr/bin/env bash
# The two example models recorded with no GPU (issue 29, point 5): for
# examples/gpt2_train.py and examples/resnet50_train.py, each at two batch
# sizes, `sublet record --no-gpu` runs the training steps on the null device
# under PyTorch's own allocator and writes the trace.  Checked, apart from
# record's own check (exit 0, "check: equal"):
#   - the peaks the program itself printed (torch.cuda.max_memory_allocated()
#     and max_memory_reserved(), read by the program, not by the hook) equal
#     sublet's replay of the recording (`sublet replay FILE --json` at the
#     null device's memory, its address base and PyTorch 2.14's rules), and
#     the segment counts (allocated, peak) equal PyTorch's memory_stats();
#   - a second replay from the events CSV `sublet convert` writes gives the
#     same peaks (the trace survives a format change);
#   - `sublet tune` and `sublet report` take the recording.
# $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"

mem=81559MiB
runs=(
  "gpt2 gpt2_train.py --batch 2 --steps 2"
  "gpt2 gpt2_train.py --batch 6 --steps 2"
  "resnet50 resnet50_train.py --batch 16 --steps 2"
  "resnet50 resnet50_train.py --batch 48 --steps 2 --amp --channels-last"
)
for run in "${runs[@]}"; do
  set -- $run
  name=$1 script=$2
  shift 2
  tag="$name $*"
  file="$tmp/$name.pickle"
  rm -f "$file" "$file.stats.json"
  "$cli" record --no-gpu --memory $mem -o "$file" -- "$py" "$repo/examples/$script" "$@" >"$tmp/out" 2>&1
  rc=$?
  if [ $rc != 0 ] || ! grep -q "^check: *equal$" "$tmp/out"; then
    cat "$tmp/out" >&2
    fail "$tag: sublet record exited $rc without 'check: equal'"
    continue
  fi
  read -r p_alloc p_res < <(sed -n "s/^$name: max_memory_allocated \([0-9]*\) max_memory_reserved \([0-9]*\)$/\1 \2/p" "$tmp/out")
  [ -n "${p_res:-}" ] || { cat "$tmp/out" >&2; fail "$tag: the program did not print its peaks"; continue; }
  "$cli" replay "$file" --json --device-memory $mem --device-base 0x200000000000 \
    --pytorch-version 2.14 >"$tmp/replay.json" || { fail "$tag: sublet replay failed"; continue; }
  "$py" - "$tmp/replay.json" "$file.stats.json" "$p_alloc" "$p_res" "$tag" <<'PY' || fail "$tag: the replay differs (above)"
import json, sys
r = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))["memory_stats"]
p_alloc, p_res, tag = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
at_end = r["memory_stats_at_end"]
pairs = [
    ("max_memory_reserved (the program's)", p_res, r["peak_reserved_bytes"]),
    ("max_memory_allocated (the program's)", p_alloc, at_end["allocated_bytes.all.peak"]),
    ("segment.all.allocated", s["segment.all.allocated"], r["device_allocs"]),
    ("segment.all.peak", s["segment.all.peak"], at_end["segment.all.peak"]),
    ("num_ooms", s["num_ooms"], r["ooms"]),
]
bad = [(k, a, b) for k, a, b in pairs if a != b]
for k, a, b in bad:
    print(f"{tag}: {k}: PyTorch {a}, sublet's replay {b}", file=sys.stderr)
print(f"{tag}: peak reserved {p_res}, peak allocated {p_alloc}, {s['segment.all.allocated']} segments: "
      f"{'equal' if not bad else 'DIFFERENT'}")
sys.exit(1 if bad else 0)
PY
  "$cli" convert "$file" "$tmp/$name.csv" >/dev/null 2>&1 || fail "$tag: sublet convert to CSV failed"
  "$cli" replay "$tmp/$name.csv" --json --device-memory $mem --pytorch-version 2.14 >"$tmp/replay_csv.json" ||
    fail "$tag: the replay of the CSV failed"
  "$py" -c "
import json, sys
a = json.load(open('$tmp/replay.json')); b = json.load(open('$tmp/replay_csv.json'))
sys.exit(0 if a['peak_reserved_bytes'] == b['peak_reserved_bytes'] and a['device_allocs'] == b['device_allocs'] else 1)" ||
    fail "$tag: the CSV's replay gives other peaks than the snapshot's"
  "$cli" tune "$file" --pytorch-version 2.14 >"$tmp/tune.txt" 2>&1 || { cat "$tmp/tune.txt" >&2; fail "$tag: sublet tune failed"; }
  grep -q "^PYTORCH_CUDA_ALLOC_CONF=\|^PYTORCH_ALLOC_CONF=" "$tmp/tune.txt" || fail "$tag: sublet tune printed no setting"
  "$cli" report "$file" -o "$tmp/$name.html" >/dev/null 2>&1 || fail "$tag: sublet report failed"
  [ -s "$tmp/$name.html" ] || fail "$tag: sublet report wrote no page"
done
[ $fails = 0 ] && echo "examples_record: all passed"
exit $((fails > 0))
