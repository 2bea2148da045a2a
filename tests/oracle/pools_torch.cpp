// Runs a private-pool scenario (tests/oracle/pools_gen.py writes them) through PyTorch's own c10
// CUDA caching allocator built on the CPU (../README.md) and prints one line per step: what
// pools_sublet prints for the same file under pytorch_version:2.6 (tests/cli_oracle_pools.sh
// compares the two).  Graph pool P is MempoolId_t (P, 0); a capture on stream S is
// beginAllocateToPool with a filter accepting S only, as CUDAGraph::capture_begin's.
//   pools_torch SCENARIO
// Scenario lines: "capacity N", "a ID SIZE STREAM" (malloc), "f ID" (free), "b P STREAM"
// (beginAllocateToPool), "e P" (endAllocateToPool), "r P" (releasePool), "c" (emptyCache).
#include <c10/cuda/CUDACachingAllocator.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include "fake_control.h"

using namespace c10::cuda::CUDACachingAllocator;

static std::string oom_figures(const std::string &msg) {  // "Of the allocated ... unallocated."
  size_t a = msg.find("Of the allocated memory"), b = msg.find("unallocated.");
  return a == std::string::npos || b == std::string::npos ? msg : msg.substr(a, b + 12 - a);
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: pools_torch SCENARIO\n"); return 2; }
  std::ifstream in(argv[1]);
  std::string line;
  std::map<long, void *> live;
  CUDAAllocator *A = nullptr;
  long step = 0;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string op; ss >> op;
    if (op.empty() || op[0] == '#') continue;
    if (op == "capacity") {
      unsigned long long c; ss >> c; fake_set_capacity(c);
      A = get(); A->init(1);
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
      } else { fprintf(stderr, "pools_torch: bad line: %s\n", line.c_str()); return 2; }
    } catch (const c10::Error &e) {
      fprintf(stderr, "pools_torch: step %ld (%s): %s\n", step, line.c_str(), e.what_without_backtrace());
      return 1;
    }
    auto s = A->getDeviceStats(0);
    std::map<unsigned long long, long long[3]> pools;  // per pool: reserved, allocated, segments
    for (const auto &seg : A->snapshot().segments) {
      if (seg.owner_private_pool_id.first == 0 && seg.owner_private_pool_id.second == 0) continue;
      auto &v = pools[seg.owner_private_pool_id.first];
      v[0] += seg.total_size; v[1] += seg.allocated_size; v[2] += 1;
    }
    printf("{\"i\": %ld, \"op\": \"%s\", \"ptr\": %llu, \"reserved\": %ld, \"allocated\": %ld, "
           "\"segments\": %ld, \"small_segments\": %ld, \"device_allocs\": %ld, \"device_frees\": %ld, "
           "\"retries\": %ld, \"ooms\": %ld, \"syncs\": %ld, \"pools\": {",
           step, op.c_str(), ptr, s.reserved_bytes[0].current, s.allocated_bytes[0].current,
           s.segment[0].current, s.segment[1].current, s.num_device_alloc, s.num_device_free,
           s.num_alloc_retries, s.num_ooms, s.num_sync_all_streams);
    bool first = true;
    for (auto &kv : pools) {
      printf("%s\"%llu\": [%lld, %lld, %lld]", first ? "" : ", ", kv.first, kv.second[0], kv.second[1], kv.second[2]);
      first = false;
    }
    printf("}%s%s%s}\n", oom.empty() ? "" : ", \"oom\": \"", oom.c_str(), oom.empty() ? "" : "\"");
    step++;
  }
  return 0;
}
