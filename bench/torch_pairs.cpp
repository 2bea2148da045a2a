// torch_pairs — PyTorch's side of bench/bench_vs_pytorch.sh: ns per cached malloc+free pair
// of PyTorch 2.6's own CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, built on the
// CPU by the test oracle: libc10.a and its fake libcuda.so.1) on the sequences of
// bench/pairs_seq.h, the ones bench_pairs times through sublet.
//
//   torch_pairs SEQ N [SIZES_FILE]        (SEQ: trace or split; settings: PyTorch's defaults,
//                                          PYTORCH_CUDA_ALLOC_CONF is expected unset)
//
// The calls are raw_alloc_with_stream(size, stream 0) and raw_delete(p), PyTorch's own C++
// entry points for a raw device pointer (what sublet_malloc/sublet_free are).  The fake
// runtime has 1 PiB of capacity (fake_set_capacity), and every cudaMalloc of the setup and
// warm-up is hinted at the end of what is mapped (fake_set_hint), which is where its first fit
// would put it anyway, without its linear walk over 10^5 segments.  Every timed pair must be
// served from the cache: PyTorch's segment counters and num_alloc_retries, and the fake's
// mapped bytes, must not move during the timed passes (exit status 1 otherwise).
//
// Built by bench_vs_pytorch.sh with g++ -O2, as libc10.a is (the oracle's CMakeLists.txt).
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "pairs_seq.h"

extern "C" {  // the fake runtime's controls (the oracle's fake_control.h)
void fake_set_capacity(uint64_t c);
void fake_set_hint(uint64_t a);
uint64_t fake_used(void);
}

using namespace c10::cuda::CUDACachingAllocator;

static const uint64_t kFakeBase = 0x7f0000000000ull;  // the fake cudaMalloc's first address

static double pass(CUDAAllocator *A, const uint64_t *seq, size_t m) {
  double t0 = pairs_now();
  for (size_t i = 0; i < m; i++) {
    void *p = A->raw_alloc_with_stream(seq[i], nullptr);
    A->raw_delete(p);
  }
  return pairs_now() - t0;
}

int main(int argc, char **argv) {
  int kind;
  if (argc < 3 || pairs_kind_parse(argv[1], &kind) != 0) {
    fprintf(stderr, "usage: torch_pairs trace|split N [SIZES_FILE]\n");
    return 2;
  }
  char *end = nullptr;
  unsigned long long nl = strtoull(argv[2], &end, 10);
  if (*end || nl == 0 || nl > 100000000) {
    fprintf(stderr, "torch_pairs: bad N '%s'\n", argv[2]);
    return 2;
  }
  size_t n_live = (size_t)nl, total = 2 * n_live, m = PAIRS_TIMED;
  const char *path = argc > 3 ? argv[3] : PAIRS_SIZES_DEFAULT;
  if (argc <= 3) {
    FILE *probe = fopen(path, "r");
    if (probe) fclose(probe);
    else path = "../" PAIRS_SIZES_DEFAULT;
  }
  uint64_t *sz = nullptr;
  size_t nsz = 0;
  if (pairs_load_sizes(path, &sz, &nsz) != 0) return 2;
  std::vector<uint64_t> setup(total), seq(m);
  std::vector<void *> ptrs(total);
  pairs_setup_sizes(kind, n_live, sz, nsz, setup.data());
  pairs_timed_sizes(kind, sz, nsz, seq.data(), m);

  fake_set_capacity(PAIRS_CAPACITY);
  CUDAAllocator *A = get();
  A->init(1);

  try {
    double t0 = pairs_now();
    for (size_t i = 0; i < total; i++) {
      fake_set_hint(kFakeBase + fake_used());
      ptrs[i] = A->raw_alloc_with_stream(setup[i], nullptr);
    }
    uintptr_t base = UINTPTR_MAX;
    for (void *p : ptrs) if ((uintptr_t)p < base) base = (uintptr_t)p;
    pairs_pick_frees(kind, n_live, ptrs.data());
    for (size_t i = 0; i < n_live; i++) A->raw_delete(ptrs[i]);
    double setup_s = pairs_now() - t0;

    // warm-up, with the hint (a device allocation it needs lands where first fit puts it)
    for (size_t i = 0; i < m; i++) {
      fake_set_hint(kFakeBase + fake_used());
      A->raw_delete(A->raw_alloc_with_stream(seq[i], nullptr));
    }
    fake_set_hint(0);
    auto s0 = A->getDeviceStats(0);
    uint64_t used0 = fake_used();
    double t[PAIRS_PASSES], ns[PAIRS_PASSES];
    for (int r = 0; r < PAIRS_PASSES; r++) {
      t[r] = pass(A, seq.data(), m);
      ns[r] = t[r] * 1e9 / (double)m;
    }
    auto s1 = A->getDeviceStats(0);
    int64_t dev = (s1.segment[0].allocated - s0.segment[0].allocated) +
                  (s1.segment[0].freed - s0.segment[0].freed) +
                  (s1.num_alloc_retries - s0.num_alloc_retries) + (fake_used() != used0);
    if (dev != 0) {
      fprintf(stderr, "torch_pairs: %lld device calls during the timed passes\n", (long long)dev);
      return 1;
    }
    if (s1.allocation[0].current != (int64_t)n_live) {
      fprintf(stderr, "torch_pairs: %lld live allocations after timing, not %zu\n",
              (long long)s1.allocation[0].current, n_live);
      return 1;
    }
    uint64_t hash = 0;  // the check pass (untimed)
    for (size_t i = 0; i < m; i++) {
      void *p = A->raw_alloc_with_stream(seq[i], nullptr);
      hash = pairs_mix(hash, (uint64_t)((uintptr_t)p - base));
      A->raw_delete(p);
    }
    double med = pairs_median(t, PAIRS_PASSES) * 1e9 / (double)m;
    pairs_report("pytorch", kind, n_live, med, ns, PAIRS_PASSES, hash, s1.segment[0].current,
                 s1.reserved_bytes[0].current, dev, setup_s);
  } catch (const c10::Error &e) {
    fprintf(stderr, "torch_pairs: %s\n", e.what_without_backtrace());
    return 1;
  }
  free(sz);
  // no teardown: at 10^6 live blocks PyTorch's static allocator would take its time to unwind
  fflush(stdout);
  _Exit(0);
}
