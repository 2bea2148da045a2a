#!/usr/bin/env bash
# sublet's drop-ins under a real PyTorch on the null device (issue 28,
# point 4): the randomized programs with sublet.torch.install() (sublet is
# PyTorch's allocator, its cuda backend on the null device's driver API;
# graph captures through the pool hooks), with sublet.torch.MemPool() under
# use_mem_pool, and under libsublet_preload.so, each against the same program
# on PyTorch's own allocator: memory_stats() equal key by key
# (tests/torch/dropin.py).  $1 is the CLI.
#   SUBLET_TORCH_DROPIN_PROGRAMS=N   programs per drop-in (default 28: two of each setting)
set -u
source "$(dirname "$0")/env.sh"
[ -f "$bindir/libsublet_torch.so" ] && [ -f "$bindir/libsublet_preload.so" ] ||
  skip "this build has no drop-in libraries (-DSUBLET_BUILD_DROPINS=OFF)"
for mode in install mempool preload; do
  "$py" "$repo/tests/torch/dropin.py" --sublet "$cli" --python "$py" --mode "$mode" \
    --programs "${SUBLET_TORCH_DROPIN_PROGRAMS:-28}" --jobs "$(nproc)" --out "$tmp/$mode" ||
    fail "$mode: the drop-in's memory_stats differ from PyTorch's (above)"
done
[ $fails = 0 ] && echo "torch_dropin: all passed"
exit $((fails > 0))
