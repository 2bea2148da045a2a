/* bench_hotpath — the cost of a cached malloc+free pair against the number
 * of live blocks.
 *
 * Requirement: the cost of a cached malloc+free must not grow with the
 * number of live blocks.  For each N in {10, 10^3, 10^5, 10^6} this program
 * builds an allocator (sim backend, 1 PiB of address space, PyTorch default
 * settings) holding N live blocks and about as many cached free blocks of
 * mixed sizes beside them, then times malloc+free pairs whose sizes are drawn
 * from a real trace (bench/data/decomfl_alloc_sizes.txt).  Every timed pair
 * must be served from the cache: the device-allocation counter is checked
 * before and after the timed passes.
 *
 * Usage:  bench_hotpath [SIZES_FILE [N...]]
 *   SIZES_FILE defaults to bench/data/decomfl_alloc_sizes.txt relative to the
 *   current directory, then ../bench/data/decomfl_alloc_sizes.txt (so it runs
 *   from the source root or from a build directory inside it).  Further
 *   arguments replace the list of N (for profiling one point); the ratio
 *   lines are printed only when both 10 and 1000000 were measured.
 *
 * Output (stdout), one line per point, then the ratios:
 *   live=<N> ns_per_pair=<X>
 *   peer=glibc_malloc_small live=<N> peer_ns_per_pair=<Y> ratio_vs_peer=<X/Y>
 *   ratio_1e6_vs_10=<X(10^6)/X(10)>
 *   peer_ratio_1e6_vs_10=<Y(10^6)/Y(10)>
 * Setup details (block and segment counts, setup and teardown times) go
 * to stderr, as lines starting with '#'.
 *
 * The peer, measured in the same run, is glibc malloc+free of the same size
 * sequence taken modulo 64 KiB (0 becomes 1), beside N live 64-byte host
 * blocks and N freed ones: host memory for 10^6 live blocks of the trace's
 * megabyte sizes is not available, so the peer cannot hold the same bytes;
 * it holds the same number of blocks.
 *
 * Each point: one warm-up pass over the size sequence, then 5 timed passes
 * of 2^20 pairs (CLOCK_MONOTONIC); the median pass is reported.  Exit status
 * 1 if any timed pair was not served from the cache or any call failed.
 *
 * Runtime is about 4 s on a quiet 2-core machine: building the 10^6 point
 * (about 230k segments in the sim, placed first fit in O(log n)) takes
 * about 1 s. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sublet/sublet.h"

#define SIZES_DEFAULT "bench/data/decomfl_alloc_sizes.txt"
#define SIZES_PARENT "../bench/data/decomfl_alloc_sizes.txt"
#define SIM_CAPACITY (UINT64_C(1) << 50) /* 1 PiB: the sim is address space only */
#define PAIRS ((size_t)1 << 20)          /* timed pairs per pass */
#define REPS 5
#define PEER_MOD UINT64_C(65536)

typedef struct sizes {
    uint64_t *v;
    size_t n;
} sizes;

/* ---- helpers -------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int cmp_ptr(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t) * (void *const *)x, b = (uintptr_t) * (void *const *)y;
    return (a > b) - (a < b);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Keep the compiler from proving a malloc/free pair dead. */
static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static FILE *open_sizes(const char *arg, const char **used)
{
    const char *cands[2] = {SIZES_DEFAULT, SIZES_PARENT};
    if (arg) {
        *used = arg;
        return fopen(arg, "r");
    }
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(cands[i], "r");
        if (f) {
            *used = cands[i];
            return f;
        }
    }
    *used = SIZES_DEFAULT;
    return NULL;
}

static int load_sizes(const char *arg, sizes *out)
{
    const char *path;
    FILE *f = open_sizes(arg, &path);
    if (!f) {
        fprintf(stderr, "bench_hotpath: cannot open %s: %s (pass the sizes file as argv[1])\n",
                path, strerror(errno));
        return -1;
    }
    size_t cap = 8192;
    out->v = malloc(cap * sizeof *out->v);
    out->n = 0;
    char line[64];
    while (out->v && fgets(line, sizeof line, f)) {
        char *end;
        unsigned long long x = strtoull(line, &end, 10);
        if (end == line)
            continue;
        if (x == 0)
            continue;
        if (out->n == cap) {
            cap *= 2;
            uint64_t *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) {
                free(out->v);
                out->v = NULL;
                break;
            }
            out->v = nv;
        }
        out->v[out->n++] = x;
    }
    fclose(f);
    if (!out->v || out->n == 0) {
        fprintf(stderr, "bench_hotpath: no sizes read from %s\n", path);
        free(out->v);
        return -1;
    }
    fprintf(stderr, "# sizes: %zu from %s\n", out->n, path);
    return 0;
}

/* ---- sublet ----------------------------------------------------------------- */

typedef struct walk_count {
    uint64_t segments, free_blocks, live_blocks;
} walk_count;

static void count_blocks(void *user, const sublet_segment_view *seg)
{
    walk_count *c = user;
    c->segments++;
    for (size_t i = 0; i < seg->nblocks; i++) {
        if (seg->blocks[i].state == SUBLET_BLOCK_INACTIVE)
            c->free_blocks++;
        else
            c->live_blocks++;
    }
}

/* One pass of malloc+free pairs; returns seconds, or a negative value on error. */
static double sublet_pass(sublet_allocator *a, const uint64_t *seq, size_t m)
{
    int bad = 0;
    double t0 = now_s();
    for (size_t i = 0; i < m; i++) {
        void *p;
        bad |= sublet_malloc(a, seq[i], 0, &p) != SUBLET_OK;
        bad |= sublet_free(a, p) != SUBLET_OK;
    }
    double t = now_s() - t0;
    return bad ? -1.0 : t;
}

/* Returns ns per pair, or a negative value on failure. */
static double bench_sublet(size_t n_live, const sizes *sz, const uint64_t *seq, size_t m)
{
    sublet_backend *be = NULL;
    sublet_allocator *a = NULL;
    void **ptrs = NULL;
    double result = -1.0, t0 = 0.0;
    char err[256];
    if (sublet_sim_create(SIM_CAPACITY, &be) != SUBLET_OK) {
        fprintf(stderr, "bench_hotpath: sublet_sim_create failed\n");
        return -1.0;
    }
    sublet_options opts = {.backend = be, .device = 0, .conf = ""};
    if (sublet_allocator_create(&opts, &a, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "bench_hotpath: sublet_allocator_create: %s\n", err);
        goto out;
    }

    /* Setup: 2N blocks of trace sizes; then free every other one in address
     * order, so no two freed blocks are neighbours and none merge with each
     * other (a freed block may still merge with a segment's free tail). */
    t0 = now_s();
    size_t total = 2 * n_live;
    ptrs = malloc(total * sizeof *ptrs);
    if (!ptrs)
        goto out;
    uint64_t rng = UINT64_C(0x5eed0000) + n_live;
    for (size_t i = 0; i < total; i++) {
        uint64_t s = sz->v[splitmix64(&rng) % sz->n];
        if (sublet_malloc(a, s, 0, &ptrs[i]) != SUBLET_OK) {
            fprintf(stderr, "bench_hotpath: setup malloc %zu of %" PRIu64 " bytes failed\n", i, s);
            goto out;
        }
    }
    double t_alloc = now_s() - t0;
    qsort(ptrs, total, sizeof *ptrs, cmp_ptr);
    for (size_t i = 1; i < total; i += 2)
        if (sublet_free(a, ptrs[i]) != SUBLET_OK) {
            fprintf(stderr, "bench_hotpath: setup free failed\n");
            goto out;
        }
    double t_setup = now_s() - t0;
    walk_count wc = {0, 0, 0};
    sublet_segments_walk(a, count_blocks, &wc);
    fprintf(stderr,
            "# live=%zu setup: %.2f s (%.2f s in the %zu mallocs); live blocks %" PRIu64
            ", cached free blocks %" PRIu64 ", segments %" PRIu64 "\n",
            n_live, t_setup, t_alloc, total, wc.live_blocks, wc.free_blocks, wc.segments);

    /* Warm-up: one full pass (any device allocation the sequence needs
     * happens here, and its segment stays cached). */
    if (sublet_pass(a, seq, m) < 0) {
        fprintf(stderr, "bench_hotpath: warm-up pass failed\n");
        goto out;
    }
    sublet_stats st0, st1;
    sublet_stats_read(a, &st0);
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        t[r] = sublet_pass(a, seq, m);
        if (t[r] < 0) {
            fprintf(stderr, "bench_hotpath: a timed malloc or free failed\n");
            goto out;
        }
    }
    sublet_stats_read(a, &st1);
    if (st1.num_device_alloc != st0.num_device_alloc ||
        st1.num_device_free != st0.num_device_free) {
        fprintf(stderr,
                "bench_hotpath: live=%zu: %" PRId64 " device allocs and %" PRId64
                " device frees during the timed passes: pairs were not all cached\n",
                n_live, st1.num_device_alloc - st0.num_device_alloc,
                st1.num_device_free - st0.num_device_free);
        goto out;
    }
    if (st1.allocation[SUBLET_POOL_ALL].current != (int64_t)n_live) {
        fprintf(stderr, "bench_hotpath: live=%zu: %" PRId64 " live allocations after timing\n",
                n_live, st1.allocation[SUBLET_POOL_ALL].current);
        goto out;
    }
    result = median(t, REPS) * 1e9 / (double)m;
out:
    free(ptrs);
    t0 = now_s();
    if (a)
        sublet_allocator_destroy(a);
    sublet_backend_destroy(be);
    if (result > 0)
        fprintf(stderr, "# live=%zu teardown: %.2f s\n", n_live, now_s() - t0);
    return result;
}

/* ---- the peer: glibc malloc ------------------------------------------------------ */

static double peer_pass(const size_t *seq, size_t m)
{
    double t0 = now_s();
    for (size_t i = 0; i < m; i++) {
        void *p = malloc(seq[i]);
        escape(p);
        free(p);
    }
    return now_s() - t0;
}

static double bench_peer(size_t n_live, const uint64_t *seq_dev, size_t m)
{
    size_t total = 2 * n_live;
    void **ptrs = malloc(total * sizeof *ptrs);
    size_t *seq = malloc(m * sizeof *seq);
    double result = -1.0;
    size_t got = 0;
    if (!ptrs || !seq)
        goto out;
    for (size_t i = 0; i < m; i++) {
        size_t s = (size_t)(seq_dev[i] % PEER_MOD);
        seq[i] = s ? s : 1;
    }
    for (; got < total; got++)
        if (!(ptrs[got] = malloc(64)))
            goto out;
    for (size_t i = 1; i < total; i += 2) {
        free(ptrs[i]);
        ptrs[i] = NULL;
    }
    peer_pass(seq, m);
    double t[REPS];
    for (int r = 0; r < REPS; r++)
        t[r] = peer_pass(seq, m);
    result = median(t, REPS) * 1e9 / (double)m;
    for (size_t i = 0; i < total; i += 2)
        free(ptrs[i]);
    got = 0;
out:
    for (size_t i = 0; i < got; i++)
        free(ptrs[i]);
    free(seq);
    free(ptrs);
    return result;
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    enum { MAXPOINTS = 16 };
    size_t points[MAXPOINTS] = {10, 1000, 100000, 1000000};
    size_t npoints = 4;
    if (argc > 2) {
        npoints = 0;
        for (int i = 2; i < argc && npoints < MAXPOINTS; i++) {
            char *end;
            unsigned long long v = strtoull(argv[i], &end, 10);
            if (*end || v == 0 || v > 100000000) {
                fprintf(stderr, "bench_hotpath: bad N '%s'\n", argv[i]);
                return 2;
            }
            points[npoints++] = (size_t)v;
        }
    }
    sizes sz;
    if (load_sizes(argc > 1 ? argv[1] : NULL, &sz) != 0)
        return 2;
    /* The timed size sequence: trace sizes drawn with a fixed seed, made
     * before any timing so the generator is outside the timed loops. */
    uint64_t *seq = malloc(PAIRS * sizeof *seq);
    if (!seq)
        return 2;
    uint64_t rng = UINT64_C(0x0b5e55ed);
    for (size_t i = 0; i < PAIRS; i++)
        seq[i] = sz.v[splitmix64(&rng) % sz.n];

    double x[MAXPOINTS], y[MAXPOINTS];
    int rc = 0;
    double t0 = now_s();
    for (size_t k = 0; k < npoints; k++) {
        x[k] = bench_sublet(points[k], &sz, seq, PAIRS);
        y[k] = bench_peer(points[k], seq, PAIRS);
        if (x[k] < 0 || y[k] < 0) {
            fprintf(stderr, "bench_hotpath: live=%zu: measurement failed\n", points[k]);
            rc = 1;
            continue;
        }
        printf("live=%zu ns_per_pair=%.1f\n", points[k], x[k]);
        printf("peer=glibc_malloc_small live=%zu peer_ns_per_pair=%.1f ratio_vs_peer=%.2f\n",
               points[k], y[k], x[k] / y[k]);
        fflush(stdout);
    }
    size_t k10 = npoints, k1e6 = npoints;
    for (size_t k = 0; k < npoints; k++) {
        if (points[k] == 10 && x[k] > 0 && y[k] > 0)
            k10 = k;
        if (points[k] == 1000000 && x[k] > 0 && y[k] > 0)
            k1e6 = k;
    }
    if (k10 < npoints && k1e6 < npoints) {
        printf("ratio_1e6_vs_10=%.2f\n", x[k1e6] / x[k10]);
        printf("peer_ratio_1e6_vs_10=%.2f\n", y[k1e6] / y[k10]);
    }
    fprintf(stderr, "# total %.1f s\n", now_s() - t0);
    free(seq);
    free(sz.v);
    return rc;
}
