// cudaMalloc+cudaFree (and cudaMallocAsync+cudaFreeAsync) pairs, timed: run
// with and without LD_PRELOAD=libsublet_preload.so (scripts/gpu-check).
// Build with a shared runtime, or the preload library cannot intercept:
//   nvcc -O2 -cudart shared -o bench_cudamalloc bench_cudamalloc.cu
// Usage: bench_cudamalloc [PAIRS]   prints "name ns_per_pair" lines.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

static int check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        std::fprintf(stderr, "bench_cudamalloc: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
    return 0;
}

__global__ void touch(char *p, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = (char)i;
}

int main(int argc, char **argv)
{
    int pairs = argc > 1 ? std::atoi(argv[1]) : 5000;
    // Sizes of a typical mix: small activations and larger buffers.
    std::vector<size_t> sizes;
    unsigned x = 12345;
    for (int i = 0; i < 256; i++) {
        x = x * 1103515245u + 12345u;
        size_t s = (x >> 8) % 4 == 0 ? ((size_t)(x % 48) + 1) << 20 : ((size_t)(x % 1024) + 1) << 10;
        sizes.push_back(s);
    }
    check(cudaFree(nullptr), "cudaFree(0) (context)");
    // Correctness: the memory works (a kernel writes it, the host reads it back).
    char *p = nullptr;
    check(cudaMalloc((void **)&p, 1 << 20), "cudaMalloc");
    touch<<<(1 << 20) / 256, 256>>>(p, 1 << 20);
    char host[16];
    check(cudaMemcpy(host, p + 100, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (host[0] != (char)100) {
        std::fprintf(stderr, "bench_cudamalloc: wrong data read back\n");
        return 1;
    }
    check(cudaFree(p), "cudaFree");

    size_t fr = 0, tot = 0;
    check(cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo");
    std::printf("meminfo_free %zu\nmeminfo_total %zu\n", fr, tot);

    for (size_t s : sizes) { // warm-up: one pass
        check(cudaMalloc((void **)&p, s), "cudaMalloc");
        check(cudaFree(p), "cudaFree");
    }
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs; i++) {
        check(cudaMalloc((void **)&p, sizes[i % sizes.size()]), "cudaMalloc");
        check(cudaFree(p), "cudaFree");
    }
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("cudaMalloc_cudaFree_ns_per_pair %.1f\n", ns / pairs);

    cudaStream_t st;
    check(cudaStreamCreate(&st), "cudaStreamCreate");
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs; i++) {
        check(cudaMallocAsync((void **)&p, sizes[i % sizes.size()], st), "cudaMallocAsync");
        check(cudaFreeAsync(p, st), "cudaFreeAsync");
    }
    check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("cudaMallocAsync_cudaFreeAsync_ns_per_pair %.1f\n", ns / pairs);
    check(cudaStreamDestroy(st), "cudaStreamDestroy");
    return 0;
}
