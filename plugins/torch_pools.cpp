/* sublet — libsublet_torch.so's private-pool hooks: CUDA graphs' pools under
 * sublet (torch.cuda.graph, CUDAGraph.capture_begin / capture_end / reset).
 *
 * PyTorch's CUDAPluggableAllocator (torch/csrc/cuda/CUDAPluggableAllocator.h,
 * 2.6 to the newest) takes three more hooks from Python, each a function
 * address that it casts to a C++ function type and calls as such:
 *
 *   set_begin_allocate_to_pool(addr)
 *       void(int device, c10::cuda::MempoolId_t id, std::function<bool(cudaStream_t)> filter)
 *   set_end_allocate_to_pool_fn(addr)  void(int device, c10::cuda::MempoolId_t id)
 *   set_release_pool(addr)             void(int device, c10::cuda::MempoolId_t id)
 *
 * where MempoolId_t is std::pair<unsigned long long, unsigned long long>
 * (c10/cuda/CUDAGraphsC10Utils.h) and cudaStream_t is CUstream_st*.  A C
 * function cannot take a std::function by value, hence this C++ file; it
 * declares exactly those types (no PyTorch or CUDA header needed), so the
 * calls match PyTorch's whatever it was built with, as long as both use the
 * same C++ standard library (libstdc++ on Linux: PyTorch's wheels do).
 * The names have C linkage so that Python finds them by name (sublet.torch).
 *
 * Each hook forwards to the engine (sublet/pool.h): begin ->
 * sublet_pool_begin_allocate_fn with PyTorch's filter (a copy, owned here
 * until end) as the callback, end -> sublet_pool_end_allocate, release ->
 * sublet_pool_release.  The engine calls the filter for each allocation
 * while the redirection is active, with its lock held: PyTorch's filters
 * (a capture: cudaStreamGetCaptureInfo on the stream; use_mem_pool: the
 * calling thread) never call back into the allocator.  A filter that
 * throws counts as "not this pool" (the exception must not cross the C
 * engine); the reason goes to sublet_torch_last_error().
 *
 * Ids are PyTorch's own ((n, 0) for graphs, (0, n) for user pools), so the
 * ids in sublet's snapshots and per-pool statistics are the ones PyTorch
 * prints.  PyTorch's interface has no error channel: a refused begin
 * (the pool is already being allocated to, policy:stitch) or end, or an
 * unknown pool, is only told by sublet_torch_last_error(); the allocations
 * then come from the default pools, as with no hook at all. */
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "sublet/pool.h"
#include "torch_internal.h"

struct CUstream_st;
typedef CUstream_st *cudaStream_t;

namespace {

using MempoolId = std::pair<unsigned long long, unsigned long long>;
using StreamFilter = std::function<bool(cudaStream_t)>;

/* An active redirection: PyTorch's filter, kept until end. */
struct Redirect {
    int device;
    MempoolId id;
    StreamFilter *filter;
};

std::mutex redirects_lock;
std::vector<Redirect> redirects;

sublet_pool_id to_id(MempoolId id)
{
    sublet_pool_id out;
    out.first = id.first;
    out.second = id.second;
    return out;
}

void fail(const char *what, int device, MempoolId id, const char *why)
{
    char msg[512];
    std::snprintf(msg, sizeof msg, "sublet_torch_%s(device %d, pool (%llu, %llu)): %s", what,
                  device, id.first, id.second, why);
    slt_set_error(msg);
}

int call_filter(void *user, sublet_stream stream)
{
    StreamFilter *f = static_cast<StreamFilter *>(user);
    try {
        return (*f)(reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(stream))) ? 1 : 0;
    } catch (const std::exception &e) {
        slt_set_error(e.what());
    } catch (...) {
        slt_set_error("sublet_torch: a pool filter threw an exception");
    }
    return 0;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) void
sublet_torch_begin_allocate_to_pool(int device, MempoolId id, StreamFilter filter);
__attribute__((visibility("default"))) void sublet_torch_end_allocate_to_pool(int device,
                                                                              MempoolId id);
__attribute__((visibility("default"))) void sublet_torch_release_pool(int device, MempoolId id);

void sublet_torch_begin_allocate_to_pool(int device, MempoolId id, StreamFilter filter)
{
    sublet_allocator *a = slt_get(device);
    if (!a)
        return;
    if (!filter) {
        fail("begin_allocate_to_pool", device, id, "no filter");
        return;
    }
    StreamFilter *kept = new (std::nothrow) StreamFilter();
    if (!kept) {
        fail("begin_allocate_to_pool", device, id, "out of host memory");
        return;
    }
    *kept = std::move(filter);
    std::lock_guard<std::mutex> guard(redirects_lock);
    try {
        redirects.reserve(redirects.size() + 1);
    } catch (...) {
        delete kept;
        fail("begin_allocate_to_pool", device, id, "out of host memory");
        return;
    }
    sublet_status st = sublet_pool_begin_allocate_fn(a, to_id(id), call_filter, kept);
    if (st != SUBLET_OK) {
        delete kept;
        fail("begin_allocate_to_pool", device, id, sublet_status_text(st));
        return;
    }
    redirects.push_back(Redirect{device, id, kept});
}

void sublet_torch_end_allocate_to_pool(int device, MempoolId id)
{
    sublet_allocator *a = slt_get(device);
    if (!a)
        return;
    std::lock_guard<std::mutex> guard(redirects_lock);
    sublet_status st = sublet_pool_end_allocate(a, to_id(id));
    if (st != SUBLET_OK) {
        fail("end_allocate_to_pool", device, id, sublet_status_text(st));
        return;
    }
    /* the engine no longer calls the filter: free it */
    for (auto it = redirects.begin(); it != redirects.end(); ++it)
        if (it->device == device && it->id == id) {
            delete it->filter;
            redirects.erase(it);
            break;
        }
}

void sublet_torch_release_pool(int device, MempoolId id)
{
    sublet_allocator *a = slt_get(device);
    if (!a)
        return;
    sublet_status st = sublet_pool_release(a, to_id(id));
    if (st != SUBLET_OK)
        fail("release_pool", device, id, sublet_status_text(st));
}

} // extern "C"
