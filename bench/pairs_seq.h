/* pairs_seq.h — the malloc+free pair sequences that bench_pairs.c (sublet) and
 * torch_pairs.cpp (PyTorch's allocator, through the oracle's library) both time,
 * generated here, in one place, so the two sides run exactly the same calls.
 * Valid C11 and C++17; header-only (static functions).
 *
 * A sequence is a setup and a timed part, for N live blocks:
 *
 *   trace  (bench_hotpath's sequence)  setup: 2N blocks of sizes drawn from
 *          bench/data/decomfl_alloc_sizes.txt (splitmix64, seed 0x5eed0000 + N);
 *          then every other one *in address order* is freed (positions 1, 3, ...
 *          of the address-sorted list), so N stay live and N sit cached between
 *          them.  Timed: 2^20 pairs whose sizes are drawn from the same file
 *          (seed 0x0b5e55ed).
 *   split  setup: 2N blocks, block 2j of 512 B x (1 + j % 64) and block 2j+1 of
 *          512 B x (65 + j % 64); the odd ones are freed (by index), so N stay
 *          live and N cached free blocks, each larger than any timed request, sit
 *          between them.  Timed: 2^20 pairs of 512 B x (1 + i % 64), all in the
 *          small pool: no setup block has a request's size, so each malloc
 *          best-fits a cached block (a segment's leftover free tail or a
 *          512 B x 65 block, whichever is the smallest that fits), splits it,
 *          and its free merges the two back: a split and a merge on every pair
 *          but the few that fit a leftover tail exactly (bench_pairs counts
 *          them for N <= 10^5: 122 to 128 of 128).
 *
 * Both drivers: one untimed warm-up pass over the timed sizes (any device
 * allocation happens there), then PASSES timed passes; the median pass is
 * reported.  Then an untimed check pass hashes every returned address as an
 * offset from the lowest setup address (pairs_mix): equal hashes on both sides
 * mean the same block was handed out for every pair (the same decisions, the
 * same work). */
#ifndef SUBLET_BENCH_PAIRS_SEQ_H
#define SUBLET_BENCH_PAIRS_SEQ_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAIRS_TIMED ((size_t)1 << 20) /* pairs per timed pass */
#define PAIRS_PASSES 5
#define PAIRS_SIZES_DEFAULT "bench/data/decomfl_alloc_sizes.txt"
#define PAIRS_CAPACITY ((uint64_t)1 << 50) /* 1 PiB of (never touched) device address space */

enum pairs_kind { PAIRS_TRACE = 0, PAIRS_SPLIT = 1 };

static inline uint64_t pairs_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline double pairs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t pairs_mix(uint64_t h, uint64_t x)
{
    return (h ^ x) * UINT64_C(0x100000001b3) + UINT64_C(0x9E3779B97F4A7C15);
}

static int pairs_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int pairs_cmp_ptr(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t) * (void *const *)x, b = (uintptr_t) * (void *const *)y;
    return (a > b) - (a < b);
}

static inline double pairs_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, pairs_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline int pairs_kind_parse(const char *s, int *kind)
{
    if (!strcmp(s, "trace"))
        *kind = PAIRS_TRACE;
    else if (!strcmp(s, "split"))
        *kind = PAIRS_SPLIT;
    else
        return -1;
    return 0;
}

/* The sizes file: one size per line; zeros and non-numbers skipped. */
static inline int pairs_load_sizes(const char *path, uint64_t **v, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "pairs: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 8192;
    *n = 0;
    *v = (uint64_t *)malloc(cap * sizeof **v);
    char line[64];
    while (*v && fgets(line, sizeof line, f)) {
        char *end;
        unsigned long long x = strtoull(line, &end, 10);
        if (end == line || x == 0)
            continue;
        if (*n == cap) {
            cap *= 2;
            uint64_t *nv = (uint64_t *)realloc(*v, cap * sizeof *nv);
            if (!nv) {
                free(*v);
                *v = NULL;
                break;
            }
            *v = nv;
        }
        (*v)[(*n)++] = x;
    }
    fclose(f);
    if (!*v || *n == 0) {
        fprintf(stderr, "pairs: no sizes read from %s\n", path);
        free(*v);
        *v = NULL;
        return -1;
    }
    return 0;
}

/* Sizes of the 2N setup blocks, in allocation order. */
static inline void pairs_setup_sizes(int kind, size_t n_live, const uint64_t *sz, size_t nsz,
                                     uint64_t *out)
{
    uint64_t rng = UINT64_C(0x5eed0000) + n_live;
    for (size_t i = 0; i < 2 * n_live; i++)
        out[i] = kind == PAIRS_TRACE ? sz[pairs_splitmix64(&rng) % nsz]
                                     : UINT64_C(512) * ((i & 1) * 64 + 1 + (i / 2) % 64);
}

/* Which setup blocks are freed: `ptrs` holds the 2N setup pointers in
 * allocation order; on return ptrs[0..N) are the ones to free and
 * ptrs[N..2N) the ones that stay live. */
static inline void pairs_pick_frees(int kind, size_t n_live, void **ptrs)
{
    size_t total = 2 * n_live;
    if (kind == PAIRS_TRACE)
        qsort(ptrs, total, sizeof *ptrs, pairs_cmp_ptr);
    /* odd positions (address order for trace, allocation order for split) go first */
    void **tmp = (void **)malloc(total * sizeof *tmp);
    if (!tmp)
        abort();
    for (size_t i = 0; i < n_live; i++) {
        tmp[i] = ptrs[2 * i + 1];
        tmp[n_live + i] = ptrs[2 * i];
    }
    memcpy(ptrs, tmp, total * sizeof *ptrs);
    free(tmp);
}

/* The sizes of the timed pairs (the same for every pass). */
static inline void pairs_timed_sizes(int kind, const uint64_t *sz, size_t nsz, uint64_t *out,
                                     size_t m)
{
    uint64_t rng = UINT64_C(0x0b5e55ed);
    for (size_t i = 0; i < m; i++)
        out[i] = kind == PAIRS_TRACE ? sz[pairs_splitmix64(&rng) % nsz]
                                     : UINT64_C(512) * (1 + i % 64);
}

/* One line on stdout, the same keys from both drivers (bench_vs_pytorch.sh reads it). */
static inline void pairs_report(const char *impl, int kind, size_t n_live, double ns,
                                const double *pass_ns, int passes, uint64_t hash,
                                int64_t segments, int64_t reserved, int64_t timed_dev_allocs,
                                double setup_s)
{
    printf("impl=%s seq=%s live=%zu ns_per_pair=%.1f passes=", impl,
           kind == PAIRS_TRACE ? "trace" : "split", n_live, ns);
    for (int i = 0; i < passes; i++)
        printf("%s%.1f", i ? "," : "", pass_ns[i]);
    printf(" addr_hash=%016llx segments=%lld reserved=%lld timed_device_allocs=%lld setup_s=%.2f\n",
           (unsigned long long)hash, (long long)segments, (long long)reserved,
           (long long)timed_dev_allocs, setup_s);
    fflush(stdout);
}

#endif
