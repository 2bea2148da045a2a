// Runs a private-pool scenario (tests/oracle/pools_gen.py writes them) through PyTorch's own c10
// CUDA caching allocator built on the CPU (../README.md) and prints one line per step: what
// pools_sublet prints for the same file under pytorch_version:2.6 (tests/cli_oracle_pools.sh
// compares the two).  Graph pool P is MempoolId_t (P, 0); a capture on stream S is
// beginAllocateToPool with a filter accepting S only, as CUDAGraph::capture_begin's.
//   pools_torch SCENARIO
// Scenario lines: "conf S" (the settings: PYTORCH_CUDA_ALLOC_CONF must hold S, read by PyTorch
// before main), "capacity N", "a ID SIZE STREAM" (malloc), "f ID" (free), "b P STREAM"
// (beginAllocateToPool), "e P" (endAllocateToPool), "r P" (releasePool), "c" (emptyCache),
// "m K" (the K-th c10::cuda::MemPool, id (0, K)), "u K" (use_mem_pool: the pool made this
// thread's MemPoolContext, beginAllocateToPool with a filter accepting this thread), "x K" (its
// exit: endAllocateToPool, releasePool, the context dropped), "d K" (~MemPool: releasePool,
// then emptyCache under the pool's context), "R ID STREAM" (recordStream), "s" (every pending
// event completes).  Events stay pending until "s" or a synchronisation.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "fake_control.h"

using namespace c10::cuda::CUDACachingAllocator;

namespace c10::cuda::_internal {  // CUDAFunctions.cpp: ATen's CUDAHooks sets it; events need it
C10_CUDA_API void setHasPrimaryContext(bool (*func)(DeviceIndex));
}

static std::string oom_figures(const std::string &msg) {  // "Of the allocated ... unallocated."
  size_t a = msg.find("Of the allocated memory"), b = msg.find("unallocated.");
  return a == std::string::npos || b == std::string::npos ? msg : msg.substr(a, b + 12 - a);
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: pools_torch SCENARIO\n"); return 2; }
  c10::cuda::_internal::setHasPrimaryContext([](c10::DeviceIndex) { return true; });
  std::ifstream in(argv[1]);
  std::string line;
  std::map<long, void *> live;
  std::map<long, c10::cuda::MemPool *> mempools;
  std::vector<c10::cuda::MemPoolContext *> ctx;
  std::vector<void *> events;  // recorded, not yet completed by "s"
  CUDAAllocator *A = nullptr;
  c10::DeleterFnPtr raw_deleter = nullptr;  // the allocator's own, so recordStream takes the block
  long step = 0;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string op; ss >> op;
    if (op.empty() || op[0] == '#' || op == "conf") continue;
    if (op == "capacity") {
      unsigned long long c; ss >> c; fake_set_capacity(c);
      A = get(); A->init(1);
      fake_set_hold(1);
      raw_deleter = A->raw_deleter();
      continue;
    }
    unsigned long long ptr = 0; std::string oom;
    try {
      if (op == "a") {
        long id; unsigned long long size, stream; ss >> id >> size >> stream;
        void *p = nullptr;
        try { p = A->raw_alloc_with_stream(size, (cudaStream_t)stream); }
        catch (const c10::OutOfMemoryError &e) { oom = oom_figures(e.what_without_backtrace()); }
        if (p) live[id] = p;
        ptr = (unsigned long long)p;
      } else if (op == "f") {
        long id; ss >> id; A->raw_delete(live[id]); live.erase(id);
      } else if (op == "b") {
        unsigned long long p, s; ss >> p >> s;
        A->beginAllocateToPool(0, {p, 0}, [s](cudaStream_t t) { return t == (cudaStream_t)s; });
      } else if (op == "e") {
        unsigned long long p; ss >> p; A->endAllocateToPool(0, {p, 0});
      } else if (op == "r") {
        unsigned long long p; ss >> p; A->releasePool(0, {p, 0});
      } else if (op == "c") {
        A->emptyCache();
      } else if (op == "m") {
        long k; ss >> k;
        auto *mp = new c10::cuda::MemPool(nullptr, true);
        if (mp->id() != c10::cuda::MempoolId_t{0, (c10::cuda::CaptureId_t)k}) {
          fprintf(stderr, "pools_torch: MemPool %ld has id (%llu, %llu)\n", k,
                  (unsigned long long)mp->id().first, (unsigned long long)mp->id().second);
          return 1;
        }
        mempools[k] = mp;
      } else if (op == "u") {
        long k; ss >> k;
        ctx.push_back(new c10::cuda::MemPoolContext(mempools[k]));
        auto tid = std::this_thread::get_id();
        A->beginAllocateToPool(0, mempools[k]->id(),
                               [tid](cudaStream_t) { return std::this_thread::get_id() == tid; });
      } else if (op == "x") {
        long k; ss >> k;
        A->endAllocateToPool(0, mempools[k]->id());
        A->releasePool(0, mempools[k]->id());
        delete ctx.back(); ctx.pop_back();
      } else if (op == "d") {
        long k; ss >> k; delete mempools[k]; mempools.erase(k);
      } else if (op == "R") {
        long id; unsigned long long s; ss >> id >> s;
        c10::DataPtr dp(live[id], live[id], raw_deleter, c10::Device(c10::DeviceType::CUDA, 0));
        A->recordStream(dp, c10::cuda::getStreamFromExternal((cudaStream_t)s, 0));
        (void)dp.release_context();  // the block stays live
      } else if (op == "s") {
        void *ev[256]; size_t n;
        while ((n = fake_take_recorded(ev, 256)) > 0) events.insert(events.end(), ev, ev + n);
        for (void *e : events) fake_complete(e);
        events.clear();
      } else { fprintf(stderr, "pools_torch: bad line: %s\n", line.c_str()); return 2; }
    } catch (const c10::Error &e) {
      fprintf(stderr, "pools_torch: step %ld (%s): %s\n", step, line.c_str(), e.what_without_backtrace());
      return 1;
    }
    auto s = A->getDeviceStats(0);
    // per pool: reserved, allocated, active bytes, segments
    std::map<std::pair<unsigned long long, unsigned long long>, long long[4]> pools;
    std::vector<SegmentInfo> segs;
    {  // inside a MemPoolContext snapshot() shows that pool only: step out of it
      c10::cuda::MemPoolContext none(nullptr);
      segs = A->snapshot().segments;
    }
    for (const auto &seg : segs) {
      if (seg.owner_private_pool_id.first == 0 && seg.owner_private_pool_id.second == 0) continue;
      auto &v = pools[{seg.owner_private_pool_id.first, seg.owner_private_pool_id.second}];
      v[0] += seg.total_size; v[1] += seg.allocated_size; v[2] += seg.active_size; v[3] += 1;
    }
    printf("{\"i\": %ld, \"op\": \"%s\", \"ptr\": %llu, \"reserved\": %ld, \"allocated\": %ld, "
           "\"segments\": %ld, \"small_segments\": %ld, \"device_allocs\": %ld, \"device_frees\": %ld, "
           "\"retries\": %ld, \"ooms\": %ld, \"syncs\": %ld, \"active\": %ld, \"pools\": {",
           step, op.c_str(), ptr, s.reserved_bytes[0].current, s.allocated_bytes[0].current,
           s.segment[0].current, s.segment[1].current, s.num_device_alloc, s.num_device_free,
           s.num_alloc_retries, s.num_ooms, s.num_sync_all_streams, s.active_bytes[0].current);
    bool first = true;
    for (auto &kv : pools) {
      printf("%s\"%llu_%llu\": [%lld, %lld, %lld, %lld]", first ? "" : ", ", kv.first.first,
             kv.first.second, kv.second[0], kv.second[1], kv.second[2], kv.second[3]);
      first = false;
    }
    printf("}%s%s%s}\n", oom.empty() ? "" : ", \"oom\": \"", oom.c_str(), oom.empty() ? "" : "\"");
    step++;
  }
  return 0;
}
