// Replays an .events.csv trace through PyTorch's own c10 CUDA caching allocator (built from
// PyTorch's source against fake_cudart.cpp) and prints one JSON line: the oracle for settings no
// recorded trace used.  Settings come from PYTORCH_CUDA_ALLOC_CONF in the environment (PyTorch
// reads it during static initialisation).
//   replay_torch TRACE.events.csv [--capacity BYTES] [--fraction F] [--at N] [--no-hints]
//                [--bench N]
// --fraction F calls setMemoryFraction(F) before the first allocation, also for F = 1 (which in
// 2.6 still puts a limit in effect); --at N stops after row N (0-based, header not counted: the
// index `sublet replay --at` takes).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
#include "fake_control.h"

using namespace c10::cuda::CUDACachingAllocator;
struct Row { std::string act; uint64_t addr = 0, size = 0, stream = 0; };

static std::vector<Row> load(const char *path) {
  std::ifstream in(path); std::string line; std::vector<Row> rows;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream ss(line); std::string f[6]; int i = 0;
    while (i < 6 && std::getline(ss, f[i], ',')) i++;
    Row r; r.act = f[1];
    r.addr = f[2].empty() ? 0 : std::stoull(f[2]); r.size = f[3].empty() ? 0 : std::stoull(f[3]);
    r.stream = f[4].empty() ? 0 : std::stoull(f[4]);
    rows.push_back(r);
  }
  return rows;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: replay_torch TRACE [--capacity B] [--fraction F] [--at N] [--no-hints] [--bench N]\n"); return 2; }
  uint64_t cap = 80ull << 30; double fraction = -1.0; bool hints = true; long bench = 0;
  size_t at = (size_t)-1;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--capacity")) cap = strtoull(argv[++i], 0, 10);
    else if (!strcmp(argv[i], "--fraction")) fraction = atof(argv[++i]);
    else if (!strcmp(argv[i], "--no-hints")) hints = false;
    else if (!strcmp(argv[i], "--bench")) bench = atol(argv[++i]);
    else if (!strcmp(argv[i], "--at")) at = strtoull(argv[++i], 0, 10);
    else { fprintf(stderr, "replay_torch: unknown option %s\n", argv[i]); return 2; }
  }
  fake_set_capacity(cap);
  CUDAAllocator *A = get();
  A->init(1);
  if (fraction >= 0.0) A->setMemoryFraction(fraction, 0);

  if (bench) {  // cached malloc+free pairs with `bench` live blocks held: ns per pair
    std::vector<void *> held;
    for (long i = 0; i < bench; i++) held.push_back(A->raw_alloc_with_stream(512 * (1 + i % 64), 0));
    for (long i = 0; i < bench; i += 2) { A->raw_delete(held[i]); held[i] = nullptr; }
    const long N = 1 << 20; void *p;
    for (long i = 0; i < 1000; i++) { p = A->raw_alloc_with_stream(512 * (1 + i % 64), 0); A->raw_delete(p); }
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < N; i++) { p = A->raw_alloc_with_stream(512 * (1 + i % 64), 0); A->raw_delete(p); }
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N;
    printf("{\"live\": %ld, \"ns_per_pair\": %.1f}\n", bench, ns);
    return 0;
  }

  std::vector<Row> rows = load(argv[1]);
  std::unordered_map<uint64_t, void *> ptr;            // trace address -> allocator pointer
  std::unordered_map<uint64_t, std::vector<void *>> pending;  // deferred frees' events
  uint64_t allocs = 0, dec_eq = 0, addr_eq = 0, empty_caches = 0, live_req = 0, peak_req = 0;
  std::unordered_map<uint64_t, uint64_t> req;
  auto other = c10::cuda::getStreamFromExternal((cudaStream_t)0xdead0, 0);
  for (size_t i = 0; i < rows.size() && i <= at; i++) {
    const Row &r = rows[i];
    if (r.act == "pre_alloc" || r.act == "alloc") {
      bool trace_new = i > 0 && rows[i - 1].act == "segment_alloc";
      if (hints && trace_new) fake_set_hint(rows[i - 1].addr);
      auto before = A->getDeviceStats(0).segment[0].allocated;
      void *p = nullptr;
      try { p = A->raw_alloc_with_stream(r.size, (cudaStream_t)r.stream); }
      catch (const c10::OutOfMemoryError &) { p = nullptr; }
      catch (const c10::Error &e) { fprintf(stderr, "replay_torch: row %zu: %s\n", i, e.what_without_backtrace()); return 1; }
      fake_set_hint(0);
      bool model_new = A->getDeviceStats(0).segment[0].allocated != before;
      if (r.act == "alloc") { allocs++; dec_eq += (model_new == trace_new); addr_eq += ((uint64_t)p == r.addr); }
      ptr[r.addr] = p;
      if (p) { req[r.addr] = r.size; live_req += r.size; if (live_req > peak_req) peak_req = live_req; }
    } else if (r.act == "free_requested") {
      auto it = ptr.find(r.addr); if (it == ptr.end() || !it->second) continue;
      void *p = it->second;
      bool deferred = !(i + 1 < rows.size() && rows[i + 1].act == "free_completed" && rows[i + 1].addr == r.addr);
      if (deferred) {
        A->recordStream(c10::DataPtr(p, p, nullptr, c10::Device(c10::DeviceType::CUDA, 0)), other);
        fake_set_hold(1); A->raw_delete(p); fake_set_hold(0);
        void *ev[64]; size_t n = fake_take_recorded(ev, 64);
        pending[r.addr].assign(ev, ev + n);
      } else {
        A->raw_delete(p);
      }
      live_req -= req[r.addr]; ptr.erase(it);
    } else if (r.act == "free_completed") {
      auto it = pending.find(r.addr);
      if (it != pending.end()) { for (void *e : it->second) fake_complete(e); pending.erase(it); }
    } else if (r.act == "segment_free") {
      if (i > 0 && rows[i - 1].act == "segment_free") continue;  // one empty_cache per cluster
      A->emptyCache(); empty_caches++;
    }
  }
  auto s = A->getDeviceStats(0);
  printf("{\"allocs\": %lu, \"decisions_matched\": %lu, \"addresses_matched\": %lu, \"peak_requested_bytes\": %lu, "
         "\"peak_reserved_bytes\": %ld, \"final_reserved_bytes\": %ld, \"device_allocs\": %ld, \"device_frees\": %ld, "
         "\"alloc_retries\": %ld, \"ooms\": %ld, \"empty_caches\": %lu}\n",
         allocs, dec_eq, addr_eq, peak_req, s.reserved_bytes[0].peak, s.reserved_bytes[0].current,
         s.segment[0].allocated, s.segment[0].freed, s.num_alloc_retries, s.num_ooms, empty_caches);
  return 0;
}
