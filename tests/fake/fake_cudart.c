/* A fake CUDA runtime (libcudart.so.13) for tests/cli_preload.sh.  Every call
 * that reaches it says so on stderr ("fake-cudart: NAME ..."), so the test
 * sees which calls libsublet_preload.so served and which it passed through.
 * cudaMalloc hands out a sentinel (0xdead0000 + n), never an address of the
 * sim backend.  Symbols carry the version node libcudart.so.13, as the real
 * runtime's do, so the program's references are versioned. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef void *cudaStream_t;

int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t n, cudaStream_t s);
int cudaFreeAsync(void *p, cudaStream_t s);
int cudaMemGetInfo(size_t *f, size_t *t);
int cudaGetDevice(int *d);
int cudaSetDevice(int d);
int cudaDeviceSynchronize(void);
int cudaDeviceReset(void);

static _Thread_local int device;
static uintptr_t next = 0xdead0000u;

int cudaMalloc(void **p, size_t n)
{
    fprintf(stderr, "fake-cudart: cudaMalloc %zu\n", n);
    *p = (void *)(next += 0x1000);
    return 0;
}

int cudaFree(void *p)
{
    fprintf(stderr, "fake-cudart: cudaFree %p\n", p);
    return p == NULL || ((uintptr_t)p & ~(uintptr_t)0xffff) == 0xdead0000u ? 0 : 1;
}

int cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    fprintf(stderr, "fake-cudart: cudaMallocAsync %zu %p\n", n, s);
    *p = (void *)(next += 0x1000);
    return 0;
}

int cudaFreeAsync(void *p, cudaStream_t s)
{
    fprintf(stderr, "fake-cudart: cudaFreeAsync %p %p\n", p, s);
    return 0;
}

int cudaMemGetInfo(size_t *f, size_t *t)
{
    fprintf(stderr, "fake-cudart: cudaMemGetInfo\n");
    *f = 111;
    *t = 222;
    return 0;
}

int cudaGetDevice(int *d)
{
    *d = device;
    return 0;
}

int cudaSetDevice(int d)
{
    device = d;
    return 0;
}

int cudaDeviceSynchronize(void)
{
    fprintf(stderr, "fake-cudart: cudaDeviceSynchronize\n");
    return 0;
}

int cudaDeviceReset(void)
{
    fprintf(stderr, "fake-cudart: cudaDeviceReset\n");
    return 0;
}
