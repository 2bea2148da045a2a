#!/usr/bin/env python3
"""Side-by-side cost of a cached alloc+free pair: PyTorch's caching allocator
(a small C++ extension, built with torch.utils.cpp_extension.load_inline,
calling c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete in a loop)
against sublet's C API (sublet_malloc / sublet_free on the cuda backend), on
the same stream and the same stream of sizes, in the same extension.

    python3 scripts/gpu/bench_alloc.py OUT_DIR --build BUILD_DIR [--passes N]

Patterns: "pairs" (alloc, free immediately: the cache's fast path) and
"window16" (sixteen live blocks, the oldest freed at each alloc: splits and
merges).  Sizes: 4096 deterministic pseudo-random sizes, 60% in [512 B, 1 MiB)
and 40% in [1 MiB, 64 MiB), log-uniform.  Each side is warmed up with one
pass first, so that every later request is served from the cache.
Writes OUT_DIR/bench.json; prints ns per pair and the ratio sublet/PyTorch.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>
#include "sublet/sublet.h"
#include "sublet/backend_cuda.h"

using clk = std::chrono::steady_clock;

static double run_torch(const std::vector<int64_t>& sizes, int64_t passes, int64_t window) {
  std::vector<void*> live(window > 0 ? window : 1, nullptr);
  auto one_pass = [&]() {
    size_t k = 0;
    for (int64_t s : sizes) {
      if (window <= 0) {
        void* p = c10::cuda::CUDACachingAllocator::raw_alloc((size_t)s);
        c10::cuda::CUDACachingAllocator::raw_delete(p);
      } else {
        if (live[k]) c10::cuda::CUDACachingAllocator::raw_delete(live[k]);
        live[k] = c10::cuda::CUDACachingAllocator::raw_alloc((size_t)s);
        k = (k + 1) % live.size();
      }
    }
  };
  one_pass();  // warm the cache
  auto t0 = clk::now();
  for (int64_t i = 0; i < passes; i++) one_pass();
  double ns = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
  for (void*& p : live) if (p) { c10::cuda::CUDACachingAllocator::raw_delete(p); p = nullptr; }
  return ns / (double)(passes * (int64_t)sizes.size());
}

static double run_sublet(const std::vector<int64_t>& sizes, int64_t passes, int64_t window) {
  c10::DeviceIndex device = c10::cuda::current_device();
  char err[512];
  sublet_backend* b = nullptr;
  if (sublet_cuda_create((int)device, &b, err, sizeof err) != SUBLET_OK)
    throw std::runtime_error(std::string("sublet_cuda_create: ") + err);
  sublet_options o{};
  o.backend = b;
  o.device = (int)device;
  o.conf = "";
  sublet_allocator* a = nullptr;
  if (sublet_allocator_create(&o, &a, err, sizeof err) != SUBLET_OK) {
    sublet_backend_destroy(b);
    throw std::runtime_error(std::string("sublet_allocator_create: ") + err);
  }
  sublet_stream stream = (sublet_stream)(uintptr_t)c10::cuda::getCurrentCUDAStream(device).stream();
  std::vector<void*> live(window > 0 ? window : 1, nullptr);
  bool ok = true;
  auto one_pass = [&]() {
    size_t k = 0;
    for (int64_t s : sizes) {
      void* p = nullptr;
      if (window <= 0) {
        ok &= sublet_malloc(a, (uint64_t)s, stream, &p) == SUBLET_OK;
        ok &= sublet_free(a, p) == SUBLET_OK;
      } else {
        if (live[k]) ok &= sublet_free(a, live[k]) == SUBLET_OK;
        ok &= sublet_malloc(a, (uint64_t)s, stream, &live[k]) == SUBLET_OK;
        k = (k + 1) % live.size();
      }
    }
  };
  one_pass();
  auto t0 = clk::now();
  for (int64_t i = 0; i < passes; i++) one_pass();
  double ns = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
  for (void*& p : live) if (p) { sublet_free(a, p); p = nullptr; }
  sublet_allocator_destroy(a);
  sublet_backend_destroy(b);
  if (!ok) throw std::runtime_error("a sublet call failed");
  return ns / (double)(passes * (int64_t)sizes.size());
}

double bench_torch(std::vector<int64_t> sizes, int64_t passes, int64_t window) {
  return run_torch(sizes, passes, window);
}
double bench_sublet(std::vector<int64_t> sizes, int64_t passes, int64_t window) {
  return run_sublet(sizes, passes, window);
}
"""


def sizes(n=4096, seed=12345):
    import math
    import random

    r = random.Random(seed)
    out = []
    for _ in range(n):
        if r.random() < 0.6:
            lo, hi = 512, 1 << 20
        else:
            lo, hi = 1 << 20, 64 << 20
        out.append(int(math.exp(r.uniform(math.log(lo), math.log(hi)))))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--build", required=True, help="sublet's build directory (libsublet.so)")
    ap.add_argument("--passes", type=int, default=50)
    a = ap.parse_args(argv)
    os.makedirs(a.out_dir, exist_ok=True)
    import torch
    from torch.utils.cpp_extension import load_inline

    build = os.path.abspath(a.build)
    ext_dir = os.path.join(os.path.abspath(a.out_dir), "ext")
    os.makedirs(ext_dir, exist_ok=True)
    ext = load_inline(
        name="sublet_bench_ext",
        cpp_sources=[CPP],
        functions=["bench_torch", "bench_sublet"],
        extra_include_paths=[os.path.join(ROOT, "include")],
        extra_ldflags=["-L" + build, "-lsublet", "-Wl,-rpath," + build],
        extra_cflags=["-O2"],
        build_directory=ext_dir,
        with_cuda=True,
        verbose=False,
    )
    torch.cuda.init()
    s = sizes()
    result = {"sizes": len(s), "passes": a.passes, "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "patterns": {}}
    for pattern, window in (("pairs", 0), ("window16", 16)):
        t = ext.bench_torch(s, a.passes, window)
        m = ext.bench_sublet(s, a.passes, window)
        result["patterns"][pattern] = {"pytorch_ns_per_pair": t, "sublet_ns_per_pair": m,
                                       "ratio_sublet_over_pytorch": m / t if t else None}
        print("%-9s PyTorch %8.1f ns/pair   sublet %8.1f ns/pair   ratio %.2f" % (pattern, t, m, m / t))
    with open(os.path.join(a.out_dir, "bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
