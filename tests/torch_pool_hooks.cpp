/* sublet — libsublet_torch.so's private-pool hooks, called as PyTorch's
 * CUDAPluggableAllocator calls them (ctest torch_pool_hooks on the sim
 * backend; tests/cli_cuda_fake.sh runs it on the fake CUDA driver).
 *
 * PyTorch's Python binding takes each hook's address as an integer, casts it
 * to void(int, MempoolId_t, std::function<bool(cudaStream_t)>) (begin) or
 * void(int, MempoolId_t) (end, release) and keeps it in a std::function;
 * this program does the same from dlsym, then drives what PyTorch drives:
 * a graph capture on one stream (the filter picks that stream), a second
 * begin on the same pool (refused), a filter that throws, use_mem_pool's
 * thread filter with another thread allocating, the graph's reset
 * (release), empty_cache.  Every routing is checked through the plugin's
 * own per-pool statistics (sublet_torch_pool_stats) and device statistics.
 *
 * usage: torch_pool_hooks PATH/libsublet_torch.so   (exit 0: every check passed) */
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <thread>
#include <utility>

struct CUstream_st;
typedef CUstream_st *cudaStream_t;
using MempoolId = std::pair<unsigned long long, unsigned long long>; /* c10::cuda::MempoolId_t */
using Filter = std::function<bool(cudaStream_t)>;
/* PyTorch's FuncType of each setter (torch/csrc/cuda/Module.cpp) */
using BeginFn = void(int, MempoolId, Filter);
using PoolFn = void(int, MempoolId);
using MallocFn = void *(ssize_t, int, cudaStream_t);
using FreeFn = void(void *, ssize_t, int, cudaStream_t);
using ResetFn = void();
using TextFn = long long(int, char *, size_t);
using PoolTextFn = long long(int, unsigned long long, unsigned long long, char *, size_t);
using ErrFn = size_t(char *, size_t);

static int failures;

#define EXPECT(cond, ...)                                                                   \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            std::fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);             \
            std::fprintf(stderr, __VA_ARGS__);                                               \
            std::fprintf(stderr, "\n");                                                      \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

namespace {

void *lib;

template <typename F> F *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        std::fprintf(stderr, "missing %s: %s\n", name, dlerror());
        std::exit(1);
    }
    return reinterpret_cast<F *>(p);
}

/* held as PyTorch holds them: std::function over the raw address */
std::function<BeginFn> begin_fn;
std::function<PoolFn> end_fn, release_fn;
MallocFn *malloc_fn;
FreeFn *free_fn;
ResetFn *reset_fn;
TextFn *stats_fn;
PoolTextFn *pool_stats_fn;
ErrFn *err_fn;

cudaStream_t stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

std::string last_error()
{
    char buf[1024];
    err_fn(buf, sizeof buf);
    return buf;
}

/* value of `key` in flat "key value" text, -1 when absent */
long long lookup(const std::string &text, const char *key)
{
    std::string k = std::string(key) + " ";
    size_t at = 0;
    while ((at = text.find(k, at)) != std::string::npos) {
        if (at == 0 || text[at - 1] == '\n')
            return std::atoll(text.c_str() + at + k.size());
        at++;
    }
    return -1;
}

std::string device_stats()
{
    char buf[1 << 16];
    long long n = stats_fn(0, buf, sizeof buf);
    return n < 0 ? std::string() : std::string(buf);
}

/* the pool's statistics text, "" for an unknown pool */
std::string pool_stats(MempoolId id)
{
    char buf[1 << 16];
    long long n = pool_stats_fn(0, id.first, id.second, buf, sizeof buf);
    return n < 0 ? std::string() : std::string(buf);
}

long long pool_stat(MempoolId id, const char *key) { return lookup(pool_stats(id), key); }

const long long MiB = 1 << 20;

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s PATH/libsublet_torch.so\n", argv[0]);
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    begin_fn = sym<BeginFn>("sublet_torch_begin_allocate_to_pool");
    end_fn = sym<PoolFn>("sublet_torch_end_allocate_to_pool");
    release_fn = sym<PoolFn>("sublet_torch_release_pool");
    malloc_fn = sym<MallocFn>("sublet_torch_malloc");
    free_fn = sym<FreeFn>("sublet_torch_free");
    reset_fn = sym<ResetFn>("sublet_torch_reset");
    stats_fn = sym<TextFn>("sublet_torch_stats");
    pool_stats_fn = sym<PoolTextFn>("sublet_torch_pool_stats");
    err_fn = sym<ErrFn>("sublet_torch_last_error");

    const cudaStream_t deflt = stream(0), captured = stream(0x10), other = stream(0x20);
    const MempoolId graph{1, 0}, graph2{2, 0}, user{0, 1};

    void *before = malloc_fn(1 * MiB, 0, captured); /* before any capture: default pool */
    EXPECT(before, "%s", last_error().c_str());

    /* ---- a graph capture on `captured` (CUDAGraph::capture_begin's filter) ---- */
    int calls = 0;
    auto sentinel = std::make_shared<int>(0); /* counts the copies of the filter alive */
    begin_fn(0, graph, [&calls, sentinel, captured](cudaStream_t s) {
        calls++;
        return s == captured;
    });
    EXPECT(sentinel.use_count() == 2, "the plugin keeps one copy of the filter (%ld)",
           sentinel.use_count());
    EXPECT(pool_stat(graph, "pool_allocating") == 1, "%s", pool_stats(graph).c_str());
    EXPECT(pool_stat(graph, "pool_use_count") == 1, "use count");
    void *in = malloc_fn(3 * MiB, 0, captured);
    void *small_in = malloc_fn(1000, 0, captured);
    void *out = malloc_fn(3 * MiB, 0, other);
    EXPECT(in && small_in && out, "%s", last_error().c_str());
    EXPECT(calls >= 3, "the filter was asked (%d calls)", calls);
    EXPECT(pool_stat(graph, "allocated_bytes.all.current") == 3 * MiB + 1024,
           "pool allocated %lld", pool_stat(graph, "allocated_bytes.all.current"));
    EXPECT(pool_stat(graph, "reserved_bytes.large_pool.current") == 20 * MiB, "large");
    EXPECT(pool_stat(graph, "reserved_bytes.small_pool.current") == 2 * MiB, "small");
    EXPECT(pool_stat(graph, "pool_device_segments") == 2, "segments");
    EXPECT(lookup(device_stats(), "allocated_bytes.all.current") == 7 * MiB + 1024,
           "device allocated %lld", lookup(device_stats(), "allocated_bytes.all.current"));

    /* a second begin on the same pool: refused (use count raised, as PyTorch's) */
    begin_fn(0, graph, [](cudaStream_t) { return true; });
    EXPECT(last_error().find("begin_allocate_to_pool(device 0, pool (1, 0))") !=
               std::string::npos,
           "%s", last_error().c_str());
    EXPECT(pool_stat(graph, "pool_use_count") == 2, "use count after a refused begin");
    void *still_out = malloc_fn(3 * MiB, 0, other); /* the refused filter is not in use */
    EXPECT(pool_stat(graph, "allocated_bytes.all.current") == 3 * MiB + 1024, "refused filter");

    /* capture_end: the filter copy is dropped, `captured` goes to the default pool */
    end_fn(0, graph);
    EXPECT(sentinel.use_count() == 1, "the filter's copy is freed at end (%ld)",
           sentinel.use_count());
    EXPECT(pool_stat(graph, "pool_allocating") == 0, "allocating after end");
    int calls_at_end = calls;
    void *after = malloc_fn(3 * MiB, 0, captured);
    EXPECT(calls == calls_at_end, "no filter after end");
    EXPECT(pool_stat(graph, "allocated_bytes.all.current") == 3 * MiB + 1024, "after end");
    end_fn(0, graph); /* a second end: refused, told */
    EXPECT(last_error().find("end_allocate_to_pool") != std::string::npos, "%s",
           last_error().c_str());

    /* ---- a filter that throws: not the pool, the reason kept ---- */
    begin_fn(0, graph2, [](cudaStream_t) -> bool { throw std::runtime_error("capture info failed"); });
    void *thrown = malloc_fn(5000, 0, captured);
    EXPECT(thrown, "%s", last_error().c_str());
    EXPECT(last_error() == "capture info failed", "%s", last_error().c_str());
    EXPECT(pool_stat(graph2, "allocated_bytes.all.current") == 0, "throwing filter");
    end_fn(0, graph2);
    release_fn(0, graph2);

    /* ---- use_mem_pool: the calling thread's allocations only ---- */
    const std::thread::id me = std::this_thread::get_id();
    begin_fn(0, user, [me](cudaStream_t) { return std::this_thread::get_id() == me; });
    void *mine = malloc_fn(2 * MiB, 0, deflt);
    void *theirs = nullptr;
    std::thread t([&theirs, deflt] { theirs = malloc_fn(2 * MiB, 0, deflt); });
    t.join();
    EXPECT(mine && theirs, "%s", last_error().c_str());
    EXPECT(pool_stat(user, "allocated_bytes.all.current") == 2 * MiB,
           "use_mem_pool: %lld", pool_stat(user, "allocated_bytes.all.current"));
    end_fn(0, user);
    release_fn(0, user);
    EXPECT(pool_stat(user, "pool_use_count") == 0, "released");

    /* ---- frees, the graph's reset, empty_cache ---- */
    for (void *p : {in, small_in, out, still_out, after, thrown, mine, theirs, before})
        free_fn(p, 0, 0, deflt);
    EXPECT(lookup(device_stats(), "allocated_bytes.all.current") == 0, "all freed");
    release_fn(0, graph); /* the refused begin's use */
    EXPECT(pool_stat(graph, "pool_use_count") == 1, "one use left");
    reset_fn(); /* torch.cuda.empty_cache(): the graph's pool is still live */
    EXPECT(pool_stat(graph, "reserved_bytes.all.current") == 22 * MiB, "live pool kept");
    EXPECT(pool_stats(user).empty(), "the freed MemPool's pool is forgotten");
    release_fn(0, graph); /* CUDAGraph::reset */
    reset_fn();
    EXPECT(pool_stats(graph).empty(), "the graph's pool is forgotten");
    EXPECT(last_error().find("no pool (1, 0)") != std::string::npos, "%s", last_error().c_str());
    EXPECT(lookup(device_stats(), "reserved_bytes.all.current") == 0, "reserved %lld",
           lookup(device_stats(), "reserved_bytes.all.current"));
    release_fn(0, graph); /* unknown now: refused, told */
    EXPECT(last_error().find("release_pool(device 0, pool (1, 0))") != std::string::npos, "%s",
           last_error().c_str());

    if (failures) {
        std::fprintf(stderr, "torch_pool_hooks: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("torch_pool_hooks: ok\n");
    return 0;
}
