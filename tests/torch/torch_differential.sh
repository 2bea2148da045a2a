#!/usr/bin/env bash
# The newest PyTorch as a second oracle (issue 28, point 3): randomized
# programs (tests/torch/program.py) under PyTorch's own allocator on the null
# device, each snapshot replayed by sublet under pytorch_version: that release,
# every decision, address, release, OOM (and its text), pool, peak and
# memory_stats value equal (tests/torch/differential.py).  $1 is the CLI.
#   SUBLET_TORCH_PROGRAMS=N   programs (default 210: 15 of each setting)
set -u
source "$(dirname "$0")/env.sh"
"$py" "$repo/tests/torch/differential.py" --sublet "$cli" --python "$py" \
  --programs "${SUBLET_TORCH_PROGRAMS:-210}" --jobs "$(nproc)" --out "$tmp/runs"
