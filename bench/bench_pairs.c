/* bench_pairs — sublet's side of bench/bench_vs_pytorch.sh: ns per cached
 * malloc+free pair on one sequence of bench/pairs_seq.h at N live blocks.
 * PyTorch's side is bench/torch_pairs.cpp, which runs the same sequence
 * through PyTorch 2.6's own allocator; the script runs both, alternating, and
 * prints the table.
 *
 * Usage:  bench_pairs SEQ N [SIZES_FILE]
 *   SEQ is trace or split (see pairs_seq.h); SIZES_FILE defaults to
 *   bench/data/decomfl_alloc_sizes.txt, then ../bench/data/... .
 *
 * sublet runs on the sim backend (1 PiB of address space, 2 MiB-aligned
 * first-fit placement, as the oracle's fake cudaMalloc), PyTorch's default
 * settings (conf ""), stream 0.  Output: one line (pairs_report), then
 *   check seq=S live=N split_pairs=A/B
 * the number of checked pairs (the first B of the check pass, only when
 * N <= 10^5: a walk of every segment per call) whose malloc split a cached
 * block (one block more after it) and whose free merged it back.
 * Exit status 1 if a call failed, a timed pair was not served from the cache,
 * or the live count is not N afterwards. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pairs_seq.h"
#include "sublet/sublet.h"

#define SPLIT_CHECK_PAIRS 128
#define SPLIT_CHECK_MAX_LIVE 100000

static double pass(sublet_allocator *a, const uint64_t *seq, size_t m)
{
    int bad = 0;
    double t0 = pairs_now();
    for (size_t i = 0; i < m; i++) {
        void *p;
        bad |= sublet_malloc(a, seq[i], 0, &p) != SUBLET_OK;
        bad |= sublet_free(a, p) != SUBLET_OK;
    }
    double t = pairs_now() - t0;
    return bad ? -1.0 : t;
}

static void count_blocks(void *user, const sublet_segment_view *seg)
{
    *(uint64_t *)user += seg->nblocks;
}

static uint64_t nblocks(sublet_allocator *a)
{
    uint64_t n = 0;
    sublet_segments_walk(a, count_blocks, &n);
    return n;
}

int main(int argc, char **argv)
{
    int kind;
    char *end = NULL;
    if (argc < 3 || pairs_kind_parse(argv[1], &kind) != 0) {
        fprintf(stderr, "usage: bench_pairs trace|split N [SIZES_FILE]\n");
        return 2;
    }
    unsigned long long nl = strtoull(argv[2], &end, 10);
    if (*end || nl == 0 || nl > 100000000) {
        fprintf(stderr, "bench_pairs: bad N '%s'\n", argv[2]);
        return 2;
    }
    size_t n_live = (size_t)nl, total = 2 * n_live, m = PAIRS_TIMED;
    uint64_t *sz = NULL;
    size_t nsz = 0;
    const char *path = argc > 3 ? argv[3] : PAIRS_SIZES_DEFAULT;
    FILE *probe = argc > 3 ? NULL : fopen(path, "r");
    if (probe)
        fclose(probe);
    else if (argc <= 3)
        path = "../" PAIRS_SIZES_DEFAULT;
    if (pairs_load_sizes(path, &sz, &nsz) != 0)
        return 2;

    uint64_t *setup = malloc(total * sizeof *setup);
    uint64_t *seq = malloc(m * sizeof *seq);
    void **ptrs = malloc(total * sizeof *ptrs);
    if (!setup || !seq || !ptrs)
        return 2;
    pairs_setup_sizes(kind, n_live, sz, nsz, setup);
    pairs_timed_sizes(kind, sz, nsz, seq, m);

    sublet_backend *be = NULL;
    sublet_allocator *a = NULL;
    char err[256];
    int rc = 1;
    if (sublet_sim_create(PAIRS_CAPACITY, &be) != SUBLET_OK) {
        fprintf(stderr, "bench_pairs: sublet_sim_create failed\n");
        return 1;
    }
    sublet_options opts = {.backend = be, .device = 0, .conf = ""};
    if (sublet_allocator_create(&opts, &a, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "bench_pairs: sublet_allocator_create: %s\n", err);
        goto out;
    }

    double t0 = pairs_now();
    for (size_t i = 0; i < total; i++)
        if (sublet_malloc(a, setup[i], 0, &ptrs[i]) != SUBLET_OK) {
            fprintf(stderr, "bench_pairs: setup malloc %zu of %" PRIu64 " B failed\n", i,
                    setup[i]);
            goto out;
        }
    uintptr_t base = (uintptr_t)-1;
    for (size_t i = 0; i < total; i++)
        if ((uintptr_t)ptrs[i] < base)
            base = (uintptr_t)ptrs[i];
    pairs_pick_frees(kind, n_live, ptrs);
    for (size_t i = 0; i < n_live; i++)
        if (sublet_free(a, ptrs[i]) != SUBLET_OK) {
            fprintf(stderr, "bench_pairs: setup free failed\n");
            goto out;
        }
    double setup_s = pairs_now() - t0;

    if (pass(a, seq, m) < 0) { /* warm-up */
        fprintf(stderr, "bench_pairs: warm-up pass failed\n");
        goto out;
    }
    sublet_stats st0, st1;
    sublet_stats_read(a, &st0);
    double t[PAIRS_PASSES], ns[PAIRS_PASSES];
    for (int r = 0; r < PAIRS_PASSES; r++) {
        t[r] = pass(a, seq, m);
        if (t[r] < 0) {
            fprintf(stderr, "bench_pairs: a timed malloc or free failed\n");
            goto out;
        }
        ns[r] = t[r] * 1e9 / (double)m;
    }
    sublet_stats_read(a, &st1);
    int64_t dev = (st1.num_device_alloc - st0.num_device_alloc) +
                  (st1.num_device_free - st0.num_device_free) +
                  (st1.num_alloc_retries - st0.num_alloc_retries);
    if (dev != 0) {
        fprintf(stderr, "bench_pairs: %" PRId64 " device calls during the timed passes\n", dev);
        goto out;
    }
    if (st1.allocation[SUBLET_POOL_ALL].current != (int64_t)n_live) {
        fprintf(stderr, "bench_pairs: %" PRId64 " live allocations after timing, not %zu\n",
                st1.allocation[SUBLET_POOL_ALL].current, n_live);
        goto out;
    }

    /* The check pass (untimed): every returned address, as an offset. */
    uint64_t hash = 0;
    for (size_t i = 0; i < m; i++) {
        void *p;
        if (sublet_malloc(a, seq[i], 0, &p) != SUBLET_OK) {
            fprintf(stderr, "bench_pairs: check malloc failed\n");
            goto out;
        }
        hash = pairs_mix(hash, (uint64_t)((uintptr_t)p - base));
        sublet_free(a, p);
    }
    double med = pairs_median(t, PAIRS_PASSES) * 1e9 / (double)m;
    pairs_report("sublet", kind, n_live, med, ns, PAIRS_PASSES, hash,
                 st1.segment[SUBLET_POOL_ALL].current, st1.reserved_bytes[SUBLET_POOL_ALL].current,
                 dev, setup_s);

    if (n_live <= SPLIT_CHECK_MAX_LIVE) {
        int split = 0, checked = SPLIT_CHECK_PAIRS;
        for (int i = 0; i < checked; i++) {
            void *p;
            uint64_t b0 = nblocks(a);
            if (sublet_malloc(a, seq[i], 0, &p) != SUBLET_OK)
                goto out;
            uint64_t b1 = nblocks(a);
            sublet_free(a, p);
            uint64_t b2 = nblocks(a);
            split += b1 == b0 + 1 && b2 == b0;
        }
        printf("check seq=%s live=%zu split_pairs=%d/%d\n", argv[1], n_live, split, checked);
    }
    rc = 0;
out:
    if (a)
        sublet_allocator_destroy(a);
    sublet_backend_destroy(be);
    free(ptrs);
    free(seq);
    free(setup);
    free(sz);
    return rc;
}
