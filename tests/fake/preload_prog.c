/* A program that allocates with the CUDA runtime (tests/cli_preload.sh).
 * Linked against the fake libcudart.so.13, or (-DSTATIC_RUNTIME) defining
 * the runtime's functions itself, as a program that links cudart statically
 * does.  Prints what it got, one "name value" per line. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef void *cudaStream_t;
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t n, cudaStream_t s);
int cudaFreeAsync(void *p, cudaStream_t s);
int cudaMemGetInfo(size_t *f, size_t *t);
int cudaSetDevice(int d);
int cudaDeviceReset(void);

#ifdef STATIC_RUNTIME
static uintptr_t next = 0xbeef0000u;
int cudaMalloc(void **p, size_t n) { (void)n; *p = (void *)(next += 0x1000); return 0; }
int cudaFree(void *p) { (void)p; return 0; }
int cudaMallocAsync(void **p, size_t n, cudaStream_t s) { (void)s; return cudaMalloc(p, n); }
int cudaFreeAsync(void *p, cudaStream_t s) { (void)s; return cudaFree(p); }
int cudaMemGetInfo(size_t *f, size_t *t) { *f = 1; *t = 2; return 0; }
int cudaSetDevice(int d) { (void)d; return 0; }
int cudaDeviceReset(void) { return 0; }
#endif

int main(void)
{
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *z = (void *)1;
    size_t f = 0, t = 0;
    int r;
    printf("init %d\n", cudaFree(NULL)); /* the context set-up idiom: passed through */
    r = cudaMalloc(&a, 1000);
    printf("malloc_a %d %p\n", r, a);
    r = cudaMalloc(&b, 50u << 20);
    printf("malloc_b %d %p\n", r, b);
    r = cudaMalloc(&z, 0);
    printf("malloc_zero %d %p\n", r, z);
    r = cudaMemGetInfo(&f, &t);
    printf("meminfo_live %d %zu %zu\n", r, f, t);
    printf("free_a %d\n", cudaFree(a));
    printf("free_b %d\n", cudaFree(b));
    printf("free_a_again %d\n", cudaFree(a));
    r = cudaMemGetInfo(&f, &t);
    printf("meminfo_cached %d %zu %zu\n", r, f, t);
    r = cudaMallocAsync(&c, 4096, (cudaStream_t)0x10);
    printf("malloc_async %d %p\n", r, c);
    printf("free_async %d\n", cudaFreeAsync(c, (cudaStream_t)0x20));
    printf("free_foreign %d\n", cudaFree((void *)0xdead0042));
    cudaSetDevice(1);
    r = cudaMalloc(&d, 1u << 20);
    printf("malloc_dev1 %d %p\n", r, d);
    printf("free_dev1 %d\n", cudaFree(d));
    printf("reset_dev1 %d\n", cudaDeviceReset());
    r = cudaMalloc(&d, 1u << 20);
    printf("malloc_after_reset %d %p\n", r, d);
    printf("free_after_reset %d\n", cudaFree(d));
    cudaSetDevice(0);
    return 0;
}
