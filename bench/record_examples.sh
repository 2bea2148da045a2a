#!/usr/bin/env bash
# bench/record_examples.sh [BUILD] — the two example models recorded with no
# GPU (issue 29, points 4 and 5): for each, `sublet record --no-gpu` at its
# default batch on the null device (an H100 80GB), timed with /usr/bin/time
# (wall seconds and the largest resident set of the whole process tree, in
# MiB), beside what other estimators say of the same model and batch
# (examples/estimate_memory.py: PyTorch's FakeTensor-based MemTracker, run
# under the null device so that its fake tensors are CUDA ones, and the
# model-states count of DeepSpeed's and Accelerate's estimators).  The bars:
# at most 60 s and 2 GiB of host memory a recording.  Prints a Markdown
# table (README's "How much will my training step take?") and writes it to
# bench/results/record_examples.md.  Needs the PyTorch of scripts/torch-env.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cli=$build/sublet
py=${SUBLET_TORCH_PYTHON:-$("$root/scripts/torch-env")}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$root/bench/results/record_examples.md
mkdir -p "$(dirname "$out")"

row() {  # NAME SCRIPT ARGS...: one recording, one estimate, one table row
  local name=$1 script=$2
  shift 2
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$cli" record --no-gpu -o "$tmp/$name.pickle" -- \
    "$py" "$root/examples/$script" "$@" >"$tmp/rec.out" 2>&1 ||
    { cat "$tmp/rec.out" >&2; echo "record_examples: $name: sublet record failed" >&2; return 1; }
  grep -q "^check: *equal$" "$tmp/rec.out" || { cat "$tmp/rec.out" >&2; return 1; }
  "$cli" nullgpu -- "$py" "$root/examples/estimate_memory.py" "$name" "$@" >"$tmp/est.json" 2>/dev/null ||
    { echo "record_examples: $name: estimate_memory.py failed" >&2; return 1; }
  "$py" - "$tmp/time" "$tmp/$name.pickle.stats.json" "$tmp/est.json" "$name $*" <<'PY'
import json, sys
wall, rss_kib = open(sys.argv[1]).read().split()[-2:]
s = json.load(open(sys.argv[2]))["memory_stats"]
e = json.load(open(sys.argv[3]))
gib = lambda b: "%.2f GiB" % (b / 2**30)
mt = e["mem_tracker"]
print("| %s | %s | %s | %s | %s | %s | %.1f s | %d MiB |" % (
    sys.argv[4], gib(s["reserved_bytes.all.peak"]), gib(s["allocated_bytes.all.peak"]),
    s["segment.all.allocated"], gib(mt["peak_bytes"]) if mt.get("available") else "n/a",
    gib(e["model_states"]["bytes"]), float(wall), int(rss_kib) // 1024))
PY
}

{
  echo "<!-- bench/record_examples.sh, $(date -u +%Y-%m-%d), $(git -C "$root" rev-parse --short HEAD), $(nproc) CPUs -->"
  echo "| example and batch | peak reserved (sublet = PyTorch) | peak allocated | segments | PyTorch's MemTracker | model states only | record: wall | record: host RSS |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  row gpt2 gpt2_train.py --batch 8
  row resnet50 resnet50_train.py --batch 32
} | tee "$out"
echo "written: bench/results/record_examples.md" >&2
