/* sublet — engine policy tests: rounding, segment sizes and pools, best fit,
 * split and merge rules, max_split_size, the OOM-path releases, garbage
 * collection, the memory fraction, empty_cache and the docs/rules.md §7.3 statistics.
 *
 * Ports of the assertions of PyTorch's test_cuda.py tests that apply to an
 * allocator without CUDA graphs, expandable segments or MemPools (reference
 * §10).  sublet_check() runs after every operation (support/harness.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/harness.h"

#define SIM_BIG (80 * GiB)

static uint64_t blk_requested(sublet_allocator *a, void *p)
{
    uint64_t req = 0;
    h_block_at(a, p, NULL, NULL, &req, __FILE__, __LINE__);
    return req;
}

/* ---- rounding (test_allocator_settings, §1.2) ------------------------------------ */

static void test_rounding_default(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    static const struct {
        uint64_t n, block;
        int small;
    } cases[] = {
        {1, 512, 1},
        {511, 512, 1},
        {512, 512, 1},
        {513, 1024, 1},
        {1200, 1536, 1},
        {9000, 9216, 1},
        {MiB, MiB, 1}, /* exactly 1 MiB: small pool (§1.4) */
        {MiB + 1, MiB + 512, 0},
        {84 * MiB, 84 * MiB, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t req0 = h_stat(e.a, "requested_bytes.all.current");
        int64_t alloc0 = h_stat(e.a, "allocated_bytes.all.current");
        void *p = h_malloc(e.a, cases[i].n, 0);
        assert_int_equal(h_block_size(e.a, p), cases[i].block);
        assert_int_equal(blk_requested(e.a, p), cases[i].n);
        assert_int_equal(h_stat(e.a, "requested_bytes.all.current") - req0, cases[i].n);
        assert_int_equal(h_stat(e.a, "allocated_bytes.all.current") - alloc0, cases[i].block);
        assert_int_equal(h_segment_of(e.a, h_addr(p)).is_small, cases[i].small);
        h_free(e.a, p);
        h_empty_cache(e.a);
        assert_int_equal(sublet_sim_used(e.inner), 0);
    }
    h_env_fini(&e);
}

static void test_rounding_power2_divisions(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "roundup_power2_divisions:4");
    static const struct {
        uint64_t n, block;
    } cases[] = {
        {84 * MiB, 96 * MiB}, /* 64 + 2 × 16 */
        {1200, 1536},         /* guard: 1200 <= 512 × 4 */
        {9000, 10240},
        {64 * MiB, 64 * MiB}, /* a power of two is unchanged */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t req0 = h_stat(e.a, "requested_bytes.all.current");
        int64_t alloc0 = h_stat(e.a, "allocated_bytes.all.current");
        void *p = h_malloc(e.a, cases[i].n, 0);
        assert_int_equal(h_block_size(e.a, p), cases[i].block);
        /* requested_bytes is unaffected by rounding */
        assert_int_equal(h_stat(e.a, "requested_bytes.all.current") - req0, cases[i].n);
        assert_int_equal(h_stat(e.a, "allocated_bytes.all.current") - alloc0, cases[i].block);
        h_free(e.a, p);
        h_empty_cache(e.a);
    }

    /* list form */
    char err[256];
    assert_int_equal(sublet_settings_apply(e.a,
                                           "roundup_power2_divisions:[64:8,128:2,256:2,512:2,"
                                           "1024:1,>:1]",
                                           err, sizeof err),
                     SUBLET_OK);
    void *p = h_malloc(e.a, 84 * MiB, 0);
    assert_int_equal(h_block_size(e.a, p), 88 * MiB);
    void *q = h_malloc(e.a, 400 * MiB, 0);
    assert_int_equal(h_block_size(e.a, q), 512 * MiB);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.current"), 484 * MiB);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 600 * MiB);
    h_free(e.a, p);
    h_free(e.a, q);
    h_empty_cache(e.a);

    /* reset on parse: another option alone removes the rounding */
    assert_int_equal(sublet_settings_apply(e.a, "roundup_power2_divisions:4", err, sizeof err),
                     SUBLET_OK);
    p = h_malloc(e.a, 84 * MiB, 0);
    assert_int_equal(h_block_size(e.a, p), 96 * MiB);
    h_free(e.a, p);
    h_empty_cache(e.a);
    assert_int_equal(sublet_settings_apply(e.a, "garbage_collection_threshold:0.5", err,
                                           sizeof err),
                     SUBLET_OK);
    p = h_malloc(e.a, 84 * MiB, 0);
    assert_int_equal(h_block_size(e.a, p), 84 * MiB);
    h_free(e.a, p);
    h_empty_cache(e.a);

    /* a rejected string changes nothing */
    assert_int_equal(sublet_settings_apply(e.a, "roundup_power2_divisions:4", err, sizeof err),
                     SUBLET_OK);
    assert_int_not_equal(sublet_settings_apply(e.a, "max_split_size_mb:2", err, sizeof err),
                         SUBLET_OK);
    p = h_malloc(e.a, 84 * MiB, 0);
    assert_int_equal(h_block_size(e.a, p), 96 * MiB);
    h_free(e.a, p);
    h_env_fini(&e);
}

/* test_memory_allocation and test_cachingAllocator_raw_alloc */
static void test_raw_alloc_stats(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    int64_t allocated0 = h_stat(e.a, "allocated_bytes.all.current");
    void *p = h_malloc(e.a, 1, 0);
    assert_true(h_stat(e.a, "allocated_bytes.all.current") > allocated0);
    h_free(e.a, p);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), allocated0);

    int64_t req_acc0 = h_stat(e.a, "requested_bytes.all.allocated");
    p = h_malloc(e.a, MiB, 0);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.allocated") - req_acc0, MiB);
    h_free(e.a, p);
    h_env_fini(&e);
}

/* ---- segment sizes and pools (test_graph_memory_stats_and_use_result_after_
 * destroy_graph, without the graph: the capture's private pool becomes a
 * separate stream, whose blocks are likewise never shared, §2.4) ------------ */

static void test_segment_sizes_and_pools(void **state)
{
    (void)state;
    const uint64_t kSmallSize = MiB, kSmallBuffer = 2 * MiB, kLargeBuffer = 20 * MiB;
    const uint64_t kMinLargeAlloc = 10 * MiB, kRoundLarge = 2 * MiB;
    const uint64_t big = kRoundLarge * ((kMinLargeAlloc + 512 + kRoundLarge - 1) / kRoundLarge);
    static const char *const pool_names[2] = {"small_pool", "large_pool"};
    const struct {
        uint64_t bytes;
        int64_t d_segments, d_bytes, d_bytes_post;
        int large;
    } cases[] = {
        {512, 1, kSmallBuffer, kSmallBuffer, 0},
        {kSmallSize, 2, 2 * kSmallBuffer, kSmallBuffer, 0},
        {kSmallSize + 512, 1, kLargeBuffer, kLargeBuffer, 1},
        {kMinLargeAlloc - 512, 2, 2 * kLargeBuffer, kLargeBuffer, 1},
        {kMinLargeAlloc + 512, 3, 3 * (int64_t)big, (int64_t)big, 1},
    };
    const sublet_stream s = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_BIG, "");
        const char *pool = pool_names[cases[i].large];
        char k_seg[64], k_res[64], k_act[64], k_actb[64];
        snprintf(k_seg, sizeof k_seg, "segment.%s.current", pool);
        snprintf(k_res, sizeof k_res, "reserved_bytes.%s.current", pool);
        snprintf(k_act, sizeof k_act, "active.%s.current", pool);
        snprintf(k_actb, sizeof k_actb, "active_bytes.%s.current", pool);

        void *a = h_malloc(e.a, cases[i].bytes, 0);
        int64_t seg0 = h_stat(e.a, k_seg), res0 = h_stat(e.a, k_res);
        int64_t act0 = h_stat(e.a, k_act), actb0 = h_stat(e.a, k_actb);

        /* b = a.clone(); for 5: b = b.clone() + 1 */
        void *b = h_malloc(e.a, cases[i].bytes, s);
        for (int k = 0; k < 5; k++) {
            void *t = h_malloc(e.a, cases[i].bytes, s);
            void *nb = h_malloc(e.a, cases[i].bytes, s);
            h_free(e.a, t);
            h_free(e.a, b);
            b = nb;
        }
        assert_int_equal(h_stat(e.a, k_seg) - seg0, cases[i].d_segments);
        assert_int_equal(h_stat(e.a, k_res) - res0, cases[i].d_bytes);
        assert_int_equal(h_stat(e.a, k_act) - act0, 1);
        assert_int_equal(h_stat(e.a, k_actb) - actb0, cases[i].bytes);

        /* the other pool is untouched */
        char k_other[64];
        snprintf(k_other, sizeof k_other, "segment.%s.current", pool_names[!cases[i].large]);
        assert_int_equal(h_stat(e.a, k_other), 0);

        /* only the segment holding b stays after empty_cache */
        h_empty_cache(e.a);
        assert_int_equal(h_stat(e.a, k_seg) - seg0, 1);
        assert_int_equal(h_stat(e.a, k_res) - res0, cases[i].d_bytes_post);

        h_free(e.a, b);
        h_free(e.a, a);
        h_empty_cache(e.a);
        assert_int_equal(h_stat(e.a, k_seg), 0);
        assert_int_equal(h_stat(e.a, k_res), 0);
        assert_int_equal(h_stat(e.a, "active.all.current"), 0);
        assert_int_equal(sublet_sim_used(e.inner), 0);
        h_env_fini(&e);
    }
}

static void test_segment_size_table(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    static const struct {
        uint64_t n, seg;
        int small;
    } cases[] = {
        {512, 2 * MiB, 1},          {MiB, 2 * MiB, 1},
        {MiB + 512, 20 * MiB, 0},   {10 * MiB - 512, 20 * MiB, 0},
        {10 * MiB, 10 * MiB, 0},    {10 * MiB + 512, 12 * MiB, 0},
        {19 * MiB + 1, 20 * MiB, 0}, {100 * MiB, 100 * MiB, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t dev0 = h_stat(e.a, "num_device_alloc");
        void *p = h_malloc(e.a, cases[i].n, 0);
        h_seginfo si = h_segment_of(e.a, h_addr(p));
        assert_int_equal(si.size, cases[i].seg);
        assert_int_equal(si.is_small, cases[i].small);
        assert_int_equal(h_stat(e.a, "num_device_alloc") - dev0, 1);
        assert_int_equal(h_stat(e.a, cases[i].small ? "reserved_bytes.small_pool.current"
                                                    : "reserved_bytes.large_pool.current"),
                         cases[i].seg);
        h_free(e.a, p);
        h_empty_cache(e.a);
    }
    h_env_fini(&e);
}

/* ---- best fit (§2.4) ---------------------------------------------------------------- */

static void test_best_fit(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    /* one 20 MiB segment: A2 B3 C2 D4 E2 | 7 MiB free tail */
    void *A = h_malloc(e.a, 2 * MiB, 0), *B = h_malloc(e.a, 3 * MiB, 0);
    void *C = h_malloc(e.a, 2 * MiB, 0), *D = h_malloc(e.a, 4 * MiB, 0);
    void *E = h_malloc(e.a, 2 * MiB, 0);
    assert_int_equal(h_nsegments(e.a), 1);
    uint64_t base = h_addr(A);
    assert_int_equal(h_addr(B), base + 2 * MiB);
    assert_int_equal(h_addr(E), base + 11 * MiB);
    h_free(e.a, B);
    h_free(e.a, D);
    /* free: B 3 MiB, D 4 MiB, tail 7 MiB: smallest sufficient wins */
    void *x = h_malloc(e.a, 3 * MiB, 0);
    assert_ptr_equal(x, B);
    assert_int_equal(h_block_size(e.a, x), 3 * MiB);
    void *y = h_malloc(e.a, 3 * MiB + MiB / 2, 0);
    assert_ptr_equal(y, D); /* 4 MiB block, remainder 0.5 MiB: not split */
    assert_int_equal(h_block_size(e.a, y), 4 * MiB);

    /* equal sizes: lowest address first (x and y keep A and C apart) */
    h_free(e.a, A);
    h_free(e.a, C);
    void *z1 = h_malloc(e.a, 2 * MiB, 0);
    assert_ptr_equal(z1, A);
    void *z2 = h_malloc(e.a, 2 * MiB, 0);
    assert_ptr_equal(z2, C);
    h_free(e.a, z1);
    h_free(e.a, z2);
    h_free(e.a, x);
    h_free(e.a, y);

    /* never a block of another stream */
    size_t nseg = h_nsegments(e.a);
    void *w = h_malloc(e.a, 2 * MiB, 7);
    assert_int_equal(h_nsegments(e.a), nseg + 1);
    h_seginfo si = h_segment_of(e.a, h_addr(w));
    assert_int_equal(si.stream, 7);
    assert_true(h_addr(w) < base || h_addr(w) >= base + 20 * MiB);
    /* and stream 7's cached blocks never serve stream 0 */
    h_free(e.a, w);
    void *v = h_malloc(e.a, 16 * MiB, 0);
    assert_int_equal(h_segment_of(e.a, h_addr(v)).stream, 0);
    assert_int_equal(h_nsegments(e.a), nseg + 2);
    h_free(e.a, v);
    h_free(e.a, E);

    /* small pool: 512 B blocks, the smallest sufficient one */
    void *s[6];
    for (int i = 0; i < 6; i++)
        s[i] = h_malloc(e.a, 512 * (uint64_t)(i % 2 + 1), 0); /* 512, 1024, ... */
    h_free(e.a, s[1]); /* 1024 */
    h_free(e.a, s[4]); /* 512 */
    void *t = h_malloc(e.a, 100, 0);
    assert_ptr_equal(t, s[4]);
    void *u = h_malloc(e.a, 600, 0);
    assert_ptr_equal(u, s[1]);
    h_free(e.a, t);
    h_free(e.a, u);
    for (int i = 0; i < 6; i++)
        if (i != 1 && i != 4)
            h_free(e.a, s[i]);
    h_env_fini(&e);
}

/* ---- split rules (§2.6) --------------------------------------------------------------- */

static void test_split_rules(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    /* large pool: 19.5 MiB in a 20 MiB segment, remainder 0.5 MiB: whole block */
    int64_t req0 = h_stat(e.a, "requested_bytes.all.current");
    void *p = h_malloc(e.a, 19 * MiB + MiB / 2, 0);
    assert_int_equal(h_block_size(e.a, p), 20 * MiB);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 20 * MiB);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.current") - req0, 19 * MiB + MiB / 2);
    assert_int_equal(h_stat(e.a, "inactive_split.all.current"), 0);
    h_free(e.a, p);
    /* remainder exactly 1 MiB: not split (strictly more than 1 MiB needed) */
    p = h_malloc(e.a, 19 * MiB, 0);
    assert_int_equal(h_block_size(e.a, p), 20 * MiB);
    assert_int_equal(h_nsegments(e.a), 1);
    h_free(e.a, p);
    /* remainder 1 MiB + 512: split */
    p = h_malloc(e.a, 19 * MiB - 512, 0);
    assert_int_equal(h_block_size(e.a, p), 19 * MiB - 512);
    assert_int_equal(h_stat(e.a, "inactive_split.large_pool.current"), 1);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.large_pool.current"), MiB + 512);
    h_free(e.a, p);
    /* a cached 20 MiB segment serving 5 MiB is split */
    p = h_malloc(e.a, 5 * MiB, 0);
    assert_int_equal(h_block_size(e.a, p), 5 * MiB);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.large_pool.current"), 15 * MiB);
    assert_int_equal(h_nsegments(e.a), 1);
    h_free(e.a, p);

    /* small pool: any remainder (>= 512) is split off */
    void *q1 = h_malloc(e.a, 1536, 0);
    void *q2 = h_malloc(e.a, 512, 0);
    h_free(e.a, q1); /* free 1536 block, q2 pins it apart from the tail */
    void *q3 = h_malloc(e.a, 1024, 0);
    assert_ptr_equal(q3, q1);
    assert_int_equal(h_block_size(e.a, q3), 1024);
    assert_int_equal(h_stat(e.a, "inactive_split.small_pool.current"), 2); /* 512 + tail */
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.small_pool.current"),
                     2 * MiB - 1536);
    void *q4 = h_malloc(e.a, 1, 0);
    assert_int_equal(h_addr(q4), h_addr(q1) + 1024);
    assert_int_equal(h_block_size(e.a, q4), 512);
    h_free(e.a, q2);
    h_free(e.a, q3);
    h_free(e.a, q4);
    assert_int_equal(h_stat(e.a, "inactive_split.all.current"), 0);
    h_env_fini(&e);
}

/* ---- merge on free (§2.7) --------------------------------------------------------------- */

static void test_merge_on_free(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    void *A = h_malloc(e.a, 2 * MiB, 0), *B = h_malloc(e.a, 2 * MiB, 0);
    void *C = h_malloc(e.a, 2 * MiB, 0);
    h_seginfo si = h_segment_of(e.a, h_addr(A));
    assert_int_equal(si.nblocks, 4);
    h_free(e.a, A); /* no free neighbour */
    assert_int_equal(h_segment_of(e.a, h_addr(B)).nblocks, 4);
    assert_int_equal(h_stat(e.a, "inactive_split.large_pool.current"), 2);
    h_free(e.a, C); /* merges with the tail */
    assert_int_equal(h_segment_of(e.a, h_addr(B)).nblocks, 3);
    assert_int_equal(h_stat(e.a, "inactive_split.large_pool.current"), 2);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.large_pool.current"), 18 * MiB);
    h_free(e.a, B); /* merges with both: one whole segment */
    assert_int_equal(h_segment_of(e.a, h_addr(A)).nblocks, 1);
    assert_int_equal(h_stat(e.a, "inactive_split.large_pool.current"), 0);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.large_pool.current"), 0);
    /* the merged block serves a request larger than any piece */
    void *D = h_malloc(e.a, 19 * MiB, 0);
    assert_ptr_equal(D, A);
    h_free(e.a, D);
    h_env_fini(&e);
}

/* ---- max_split_size (§2.5, §2.6) ---------------------------------------------------- */

static void test_max_split_size(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "max_split_size_mb:40");
    assert_int_equal(h_stat(e.a, "max_split_size"), 40 * MiB);
    void *big = h_malloc(e.a, 100 * MiB, 0);
    assert_int_equal(h_stat(e.a, "oversize_allocations.current"), 1);
    assert_int_equal(h_stat(e.a, "oversize_segments.current"), 1);
    h_free(e.a, big);
    assert_int_equal(h_stat(e.a, "oversize_allocations.current"), 0);
    assert_int_equal(h_stat(e.a, "oversize_allocations.freed"), 1);
    assert_int_equal(h_stat(e.a, "oversize_segments.current"), 1);

    /* a normal request never takes the cached oversize block */
    void *n30 = h_malloc(e.a, 30 * MiB, 0);
    assert_ptr_not_equal(n30, big);
    assert_int_equal(h_nsegments(e.a), 2);
    assert_int_equal(h_stat(e.a, "oversize_allocations.current"), 0);
    void *n5 = h_malloc(e.a, 5 * MiB, 0);
    assert_int_equal(h_nsegments(e.a), 3);
    h_free(e.a, n5);
    h_free(e.a, n30);

    /* an oversize request reuses it when the waste is < 20 MiB, unsplit */
    int64_t alloc0 = h_stat(e.a, "allocated_bytes.all.current");
    void *o90 = h_malloc(e.a, 90 * MiB, 0);
    assert_ptr_equal(o90, big);
    assert_int_equal(h_block_size(e.a, o90), 100 * MiB);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current") - alloc0, 100 * MiB);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.current"), 90 * MiB);
    assert_int_equal(h_stat(e.a, "inactive_split.all.current"), 0);
    assert_int_equal(h_stat(e.a, "oversize_allocations.current"), 1);
    h_free(e.a, o90);
    /* waste 20 MiB (not < 20): a new segment */
    void *o80 = h_malloc(e.a, 80 * MiB, 0);
    assert_ptr_not_equal(o80, big);
    assert_int_equal(h_block_size(e.a, o80), 80 * MiB);
    assert_int_equal(h_stat(e.a, "oversize_segments.current"), 2);
    h_free(e.a, o80);
    /* an oversize request is never split off a larger block: 81 MiB takes the
     * 100 MiB block whole (81 MiB segment would also be oversize) */
    void *o81 = h_malloc(e.a, 81 * MiB, 0);
    assert_ptr_equal(o81, big);
    assert_int_equal(h_block_size(e.a, o81), 100 * MiB);
    h_free(e.a, o81);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "oversize_segments.current"), 0);
    assert_int_equal(h_stat(e.a, "oversize_segments.freed"), 2);
    h_env_fini(&e);

    /* max_non_split_rounding_mb widens the allowed waste */
    h_env_init(&e, H_SIM, SIM_BIG, "max_split_size_mb:40,max_non_split_rounding_mb:50");
    big = h_malloc(e.a, 100 * MiB, 0);
    h_free(e.a, big);
    void *o60 = h_malloc(e.a, 60 * MiB, 0);
    assert_ptr_equal(o60, big);
    h_free(e.a, o60);
    void *o50 = h_malloc(e.a, 50 * MiB, 0); /* waste exactly 50: no */
    assert_ptr_not_equal(o50, big);
    h_free(e.a, o50);
    h_env_fini(&e);

    /* with max_split_size_mb:20 the 20 MiB large buffers are oversize too */
    h_env_init(&e, H_SIM, SIM_BIG, "max_split_size_mb:20");
    void *m5 = h_malloc(e.a, 5 * MiB, 0);
    assert_int_equal(h_segment_of(e.a, h_addr(m5)).size, 20 * MiB);
    assert_int_equal(h_stat(e.a, "oversize_segments.current"), 1);
    assert_int_equal(h_stat(e.a, "oversize_allocations.current"), 0);
    void *m6 = h_malloc(e.a, 6 * MiB, 0); /* the 15 MiB remainder is < MS: reused */
    assert_int_equal(h_nsegments(e.a), 1);
    h_free(e.a, m5);
    h_free(e.a, m6);
    void *m7 = h_malloc(e.a, 7 * MiB, 0); /* the whole 20 MiB block is >= MS: not */
    assert_int_equal(h_nsegments(e.a), 2);
    h_free(e.a, m7);
    h_env_fini(&e);
}

/* ---- release_available_cached_blocks (§3.4) and the full release (§3.5) ------------ */

static void test_release_available_cached_blocks(void **state)
{
    (void)state;
    h_env e;
    /* (a) walk down from the largest oversize block, releasing just enough */
    h_env_init(&e, H_SIM, GiB, "max_split_size_mb:40");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK); /* 512 MiB */
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = h_malloc(e.a, 100 * MiB, 0);
    for (int i = 0; i < 4; i++)
        h_free(e.a, p[i]);
    sublet_stats_reset_accumulated(e.a);
    void *q = h_malloc(e.a, 150 * MiB, 0);
    assert_int_equal(h_stat(e.a, "num_device_free"), 2);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 0);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 350 * MiB);
    /* the largest by (size, address) went first: the two highest addresses
     * (the sim placed p[0..3] in increasing order and reuses the lowest
     * free range first, so q now starts where p[2] was) */
    assert_true(h_addr(p[0]) < h_addr(p[1]) && h_addr(p[1]) < h_addr(p[2]) &&
                h_addr(p[2]) < h_addr(p[3]));
    for (int k = 0; k < 2; k++) {
        h_seginfo si = h_segment_of(e.a, h_addr(p[k]));
        assert_int_equal(si.addr, h_addr(p[k]));
        assert_int_equal(si.size, 100 * MiB);
    }
    assert_int_equal(h_segment_of(e.a, h_addr(q)).size, 150 * MiB);
    assert_int_equal(h_nsegments(e.a), 3);
    h_free(e.a, q);
    h_env_fini(&e);

    /* (b) one cached block >= the key: release it alone */
    h_env_init(&e, H_SIM, GiB, "max_split_size_mb:40");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    void *b100 = h_malloc(e.a, 100 * MiB, 0), *b300 = h_malloc(e.a, 300 * MiB, 0);
    h_free(e.a, b100);
    h_free(e.a, b300);
    sublet_stats_reset_accumulated(e.a);
    q = h_malloc(e.a, 150 * MiB, 0); /* 300 >= 150 + 20: not reused */
    assert_int_equal(h_stat(e.a, "num_device_free"), 1);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 0);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 250 * MiB);
    assert_int_equal(h_segment_of(e.a, h_addr(b100)).size, 100 * MiB);
    h_free(e.a, q);
    h_env_fini(&e);

    /* (c) not enough oversize blocks: those released stay released, then the
     * full release (sync + every whole segment) and a counted retry */
    h_env_init(&e, H_SIM, GiB, "max_split_size_mb:40");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    void *live = h_malloc(e.a, 300 * MiB, 0);
    void *c100 = h_malloc(e.a, 100 * MiB, 0), *c5 = h_malloc(e.a, 5 * MiB, 0);
    h_free(e.a, c100);
    h_free(e.a, c5);
    sublet_stats_reset_accumulated(e.a);
    q = h_malloc(e.a, 150 * MiB, 0);
    assert_int_equal(h_stat(e.a, "num_device_free"), 2);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 1);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 1);
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 450 * MiB);

    /* (d) nothing left to release: OOM after one counted retry */
    void *r = NULL;
    assert_int_equal(h_try_malloc(e.a, 100 * MiB, 0, &r), SUBLET_ERR_OOM);
    assert_null(r);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 2);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 2);
    assert_int_equal(h_stat(e.a, "num_ooms"), 1);
    h_free(e.a, q);
    h_free(e.a, live);
    h_env_fini(&e);

    /* (f) only the request's stream is searched: an oversize block cached on
     * another stream is left to the full release */
    h_env_init(&e, H_SIM, GiB, "max_split_size_mb:40");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    void *f0 = h_malloc(e.a, 100 * MiB, 0), *f1 = h_malloc(e.a, 100 * MiB, 1);
    void *fl = h_malloc(e.a, 200 * MiB, 0);
    h_free(e.a, f0);
    h_free(e.a, f1);
    sublet_stats_reset_accumulated(e.a);
    q = h_malloc(e.a, 150 * MiB, 0); /* 400 + 150 > 512 */
    assert_int_equal(h_stat(e.a, "num_device_free"), 2);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 1);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 1);
    h_free(e.a, q);
    h_free(e.a, fl);
    h_env_fini(&e);

    /* (e) without max_split_size the step does not exist: full release */
    h_env_init(&e, H_SIM, GiB, "");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    for (int i = 0; i < 4; i++)
        p[i] = h_malloc(e.a, 100 * MiB, 0);
    for (int i = 0; i < 4; i++)
        h_free(e.a, p[i]);
    sublet_stats_reset_accumulated(e.a);
    q = h_malloc(e.a, 150 * MiB, 0); /* 100s split? 150 > 100: no fit */
    assert_int_equal(h_stat(e.a, "num_device_free"), 4);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 1);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 1);
    h_free(e.a, q);
    h_env_fini(&e);
}

/* ---- garbage collection (§3.6) ----------------------------------------------------------- */

static void gc_script(h_env *e, int64_t *device_frees, int tick_small)
{
    void *warm = h_malloc(e->a, 4096, 7); /* a cached small segment, for the ticks */
    h_free(e->a, warm);
    void *P[5];
    for (int i = 0; i < 5; i++)
        P[i] = h_malloc(e->a, 100 * MiB, 0);
    void *t = h_malloc(e->a, 5 * MiB, 7); /* a 20 MiB segment on stream 7 */
    h_free(e->a, t);
    for (int i = 0; i < 3; i++) {
        h_free(e->a, P[i]); /* A, B, C age differently: */
        for (int k = 0; k < 3; k++) { /* each cached hit ticks the large pool clock */
            void *tk = h_malloc(e->a, tick_small ? 4096 : 5 * MiB, 7);
            h_free(e->a, tk);
        }
    }
    int64_t f0 = h_stat(e->a, "num_device_free");
    void *F = h_malloc(e->a, 200 * MiB, 0);
    *device_frees = h_stat(e->a, "num_device_free") - f0;
    if (!tick_small) { /* the youngest cached segments (C and T's) survive */
        h_seginfo c = h_segment_of(e->a, h_addr(P[2]));
        assert_int_equal(c.addr, h_addr(P[2]));
        assert_int_equal(c.size, 100 * MiB);
        assert_int_equal(h_segment_of(e->a, h_addr(t)).size, 20 * MiB);
    }
    h_free(e->a, F);
    h_free(e->a, P[3]);
    h_free(e->a, P[4]);
}

static void test_garbage_collection(void **state)
{
    (void)state;
    h_env e;
    /* limit 0.8 GiB, threshold 0.5 × limit = 409.6 MiB.  Before F: 522 MiB
     * reserved; cached whole large segments A (age 10), B (7), C (4), T (1):
     * average 5.5, so A and B go (200 MiB >= the 112.4 MiB target). */
    h_env_init(&e, H_SIM, GiB, "garbage_collection_threshold:0.5");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.8), SUBLET_OK);
    int64_t frees = 0;
    gc_script(&e, &frees, 0);
    assert_int_equal(frees, 2);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 0);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 0);
    h_env_fini(&e);

    /* each pool has its own clock: small-pool lookups do not age large
     * blocks, so A, B, C and T are equally old and all four go */
    h_env_init(&e, H_SIM, GiB, "garbage_collection_threshold:0.5");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.8), SUBLET_OK);
    gc_script(&e, &frees, 1);
    assert_int_equal(frees, 4);
    h_env_fini(&e);

    /* without a fraction, GC never runs */
    h_env_init(&e, H_SIM, GiB, "garbage_collection_threshold:0.5");
    gc_script(&e, &frees, 0);
    assert_int_equal(frees, 0);
    h_env_fini(&e);

    /* nor with a threshold of 0 (off) */
    h_env_init(&e, H_SIM, GiB, "");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.8), SUBLET_OK);
    gc_script(&e, &frees, 0);
    assert_int_equal(frees, 0);
    h_env_fini(&e);

    /* GC never touches split segments nor the small pool, and does nothing
     * below the threshold */
    h_env_init(&e, H_SIM, GiB, "garbage_collection_threshold:0.5");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.8), SUBLET_OK);
    void *pin = h_malloc(e.a, 300 * MiB, 0);
    void *s1 = h_malloc(e.a, 5 * MiB, 0), *s2 = h_malloc(e.a, 5 * MiB, 0);
    void *sm = h_malloc(e.a, 4096, 0);
    h_free(e.a, s1); /* split segment with free pieces */
    h_free(e.a, sm); /* whole small segment cached */
    void *w = h_malloc(e.a, 100 * MiB, 0); /* total 322 MiB <= 409.6: no GC */
    assert_int_equal(h_stat(e.a, "num_device_free"), 0);
    void *w2 = h_malloc(e.a, 100 * MiB, 0); /* 422 > 409.6: GC, but nothing whole */
    assert_int_equal(h_stat(e.a, "num_device_free"), 0);
    h_free(e.a, s2);
    h_free(e.a, w);
    h_free(e.a, w2);
    h_free(e.a, pin);
    h_env_fini(&e);
}

/* ---- memory fraction (test_set_per_process_memory_fraction, §4.8) -------------------- */

static void test_memory_fraction(void **state)
{
    (void)state;
    const uint64_t C = 8 * GiB;
    h_env e;
    h_env_init(&e, H_SIM, C, "");
    assert_true(sublet_memory_fraction_get(e.a) == 1.0);
    assert_int_equal(sublet_memory_fraction_set(e.a, -0.1), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_memory_fraction_set(e.a, 2.0), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_memory_fraction_set(e.a, NAN), SUBLET_ERR_INVALID_ARGUMENT);
    assert_true(sublet_memory_fraction_get(e.a) == 1.0);

    void *tensor = h_malloc(e.a, 1024 * 4, 0);
    h_empty_cache(e.a);
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    uint64_t application =
        (uint64_t)((double)C * 0.499) - (uint64_t)h_stat(e.a, "reserved_bytes.all.peak");
    void *tmp = h_malloc(e.a, application, 0);
    h_free(e.a, tmp);
    h_empty_cache(e.a);

    application = (uint64_t)((double)C * 0.5);
    void *r = NULL;
    assert_int_equal(h_try_malloc(e.a, application, 0, &r), SUBLET_ERR_OOM);
    char msg[2048];
    sublet_oom_message(e.a, msg, sizeof msg);
    assert_non_null(strstr(msg, "out of memory"));
    assert_non_null(strstr(msg, "4.00 GiB allowed; "));
    /* the OOM left everything usable */
    void *after = h_malloc(e.a, MiB, 0);
    h_free(e.a, after);
    h_free(e.a, tensor);

    /* get returns exactly what was set */
    const double fs[] = {0.0, 1.0, 0.5, 0.123456789, 0.987654321, 1.0 / 3.0, 0.7};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        assert_int_equal(sublet_memory_fraction_set(e.a, fs[i]), SUBLET_OK);
        assert_true(sublet_memory_fraction_get(e.a) == fs[i]);
    }
    /* 0.0: nothing can be allocated from the device */
    h_empty_cache(e.a);
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.0), SUBLET_OK);
    assert_int_equal(h_try_malloc(e.a, 1, 0, &r), SUBLET_ERR_OOM);
    /* 1.0 removes the limit */
    assert_int_equal(sublet_memory_fraction_set(e.a, 1.0), SUBLET_OK);
    tmp = h_malloc(e.a, 6 * GiB, 0);
    h_free(e.a, tmp);
    h_env_fini(&e);

    /* test_allocator_memory_fraction_setting: the option round-trips */
    const double opt[] = {0.0, 0.5, 1.0};
    for (size_t i = 0; i < 3; i++) {
        char conf[64];
        snprintf(conf, sizeof conf, "per_process_memory_fraction:%g", opt[i]);
        h_env_init(&e, H_SIM, C, conf);
        assert_true(sublet_memory_fraction_get(e.a) == opt[i]);
        h_env_fini(&e);
    }
    sublet_options o = {.backend = NULL, .conf = "per_process_memory_fraction:-0.1"};
    assert_int_equal(sublet_sim_create(C, &o.backend), SUBLET_OK);
    char err[256];
    sublet_allocator *bad = NULL;
    assert_int_equal(sublet_allocator_create(&o, &bad, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_non_null(strstr(err, "per_process_memory_fraction is invalid"));
    o.conf = "per_process_memory_fraction:1.1";
    assert_int_equal(sublet_allocator_create(&o, &bad, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_non_null(strstr(err, "per_process_memory_fraction is invalid"));
    sublet_backend_destroy(o.backend);

    /* the option sets the initial fraction */
    h_env_init(&e, H_SIM, C, "per_process_memory_fraction:0.25");
    assert_true(sublet_memory_fraction_get(e.a) == 0.25);
    tmp = h_malloc(e.a, 2 * GiB, 0);
    assert_int_equal(h_try_malloc(e.a, 2 * MiB, 0, &r), SUBLET_ERR_OOM);
    h_free(e.a, tmp);
    h_env_fini(&e);
}

/* ---- empty_cache (§4.7, §2.8) ------------------------------------------------------------ */

static void test_empty_cache(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    h_empty_cache(e.a); /* nothing to do, still a sync */
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 1);
    assert_int_equal(h_stat(e.a, "num_device_free"), 0);

    void *a1 = h_malloc(e.a, 5 * MiB, 0), *a2 = h_malloc(e.a, 5 * MiB, 0); /* split seg */
    void *w = h_malloc(e.a, 30 * MiB, 0);                                  /* own seg */
    void *s1 = h_malloc(e.a, 1000, 0), *s2 = h_malloc(e.a, 1000, 0);       /* small seg */
    void *s3 = h_malloc(e.a, MiB, 0);
    void *s4 = h_malloc(e.a, MiB, 0); /* a second small segment */
    h_free(e.a, a1);
    h_free(e.a, w);
    h_free(e.a, s1);
    h_free(e.a, s4);
    int64_t split_bytes = h_stat(e.a, "inactive_split_bytes.all.current");
    int64_t active_bytes = h_stat(e.a, "active_bytes.all.current");
    h_empty_cache(e.a);
    /* only the two whole free segments went */
    assert_int_equal(h_stat(e.a, "num_device_free"), 2);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 20 * MiB);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 2 * MiB);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.all.current"), split_bytes);
    assert_int_equal(h_stat(e.a, "active_bytes.all.current"), active_bytes);
    assert_int_equal(sublet_sim_used(e.inner), 22 * MiB);
    h_free(e.a, a2);
    h_free(e.a, s2);
    h_free(e.a, s3);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_stat(e.a, "segment.all.current"), 0);
    h_env_fini(&e);
}

/* ---- statistics, step by step (§7.3) ----------------------------------------------------- */

typedef struct model {
    sublet_stats s;
} model;

static void m_handout(model *m, int kind, int64_t size, int64_t req, int oversize)
{
    h_arr_add(m->s.allocation, kind, 1);
    h_arr_add(m->s.allocated_bytes, kind, size);
    h_arr_add(m->s.active, kind, 1);
    h_arr_add(m->s.active_bytes, kind, size);
    h_arr_add(m->s.requested_bytes, kind, req);
    if (oversize)
        h_stat_inc(&m->s.oversize_allocations, 1);
}

static void m_user_free(model *m, int kind, int64_t size, int oversize)
{
    h_arr_add(m->s.allocation, kind, -1);
    h_arr_add(m->s.allocated_bytes, kind, -size);
    if (oversize)
        h_stat_dec(&m->s.oversize_allocations, 1);
}

static void m_block_free(model *m, int kind, int64_t size, int64_t req, int64_t d_split,
                         int64_t d_split_bytes)
{
    h_arr_add(m->s.inactive_split, kind, d_split);
    h_arr_add(m->s.inactive_split_bytes, kind, d_split_bytes);
    h_arr_add(m->s.active, kind, -1);
    h_arr_add(m->s.active_bytes, kind, -size);
    h_arr_add(m->s.requested_bytes, kind, -req);
}

static void m_segment(model *m, int kind, int64_t size, int oversize)
{
    h_arr_add(m->s.segment, kind, size > 0 ? 1 : -1);
    h_arr_add(m->s.reserved_bytes, kind, size);
    if (size > 0) {
        m->s.num_device_alloc++;
        if (oversize)
            h_stat_inc(&m->s.oversize_segments, 1);
    } else {
        m->s.num_device_free++;
        if (oversize)
            h_stat_dec(&m->s.oversize_segments, 1);
    }
}

static void m_reset_peak(model *m)
{
#define X(key, title, bytes)                  \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) \
        m->s.key[k].peak = m->s.key[k].current;
    SUBLET_STAT_ARRAYS(X)
#undef X
    m->s.oversize_allocations.peak = m->s.oversize_allocations.current;
    m->s.oversize_segments.peak = m->s.oversize_segments.current;
}

static void m_reset_acc(model *m)
{
#define X(key, title, bytes)                  \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) \
        m->s.key[k].allocated = m->s.key[k].freed = 0;
    SUBLET_STAT_ARRAYS(X)
#undef X
    m->s.oversize_allocations.allocated = m->s.oversize_allocations.freed = 0;
    m->s.oversize_segments.allocated = m->s.oversize_segments.freed = 0;
    m->s.num_alloc_retries = m->s.num_ooms = m->s.num_sync_all_streams = 0;
    m->s.num_device_alloc = m->s.num_device_free = 0;
}

#define VERIFY(m, a)                          \
    do {                                      \
        sublet_stats got_;                    \
        sublet_stats_read((a), &got_);        \
        h_stats_equal(&(m)->s, &got_);        \
    } while (0)

static void test_stats_script(void **state)
{
    (void)state;
    const int S = SUBLET_POOL_SMALL, L = SUBLET_POOL_LARGE;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "max_split_size_mb:40");
    model m;
    sublet_stats_read(e.a, &m.s);
    assert_int_equal(m.s.max_split_size, 40 * MiB);
    VERIFY(&m, e.a);

    /* 1: 1 byte — new 2 MiB small segment, split */
    void *p1 = h_malloc(e.a, 1, 0);
    m_segment(&m, S, 2 * MiB, 0);
    h_arr_add(m.s.inactive_split, S, 1);
    h_arr_add(m.s.inactive_split_bytes, S, 2 * MiB - 512);
    m_handout(&m, S, 512, 1, 0);
    VERIFY(&m, e.a);

    /* 2: 1000 bytes from the split remainder: it shrinks, count unchanged */
    void *p2 = h_malloc(e.a, 1000, 0);
    h_arr_add(m.s.inactive_split_bytes, S, -1024);
    m_handout(&m, S, 1024, 1000, 0);
    VERIFY(&m, e.a);

    /* 3: 5 MiB — new 20 MiB large segment, split */
    void *p3 = h_malloc(e.a, 5 * MiB, 0);
    m_segment(&m, L, 20 * MiB, 0);
    h_arr_add(m.s.inactive_split, L, 1);
    h_arr_add(m.s.inactive_split_bytes, L, 15 * MiB);
    m_handout(&m, L, 5 * MiB, 5 * MiB, 0);
    VERIFY(&m, e.a);

    /* 4: free p1 — no free neighbour, still split: +1 inactive split */
    h_free(e.a, p1);
    m_user_free(&m, S, 512, 0);
    m_block_free(&m, S, 512, 1, +1, +512);
    VERIFY(&m, e.a);

    /* 5: free p2 — absorbs p1 and the tail: whole segment again (net) */
    h_free(e.a, p2);
    m_user_free(&m, S, 1024, 0);
    m_block_free(&m, S, 1024, 1000, -2, -(int64_t)(2 * MiB - 1024));
    VERIFY(&m, e.a);

    /* 6: reset_peak */
    sublet_stats_reset_peak(e.a);
    m_reset_peak(&m);
    VERIFY(&m, e.a);

    /* 7: 19.5 MiB — the 15 MiB remainder is too small: new segment, not split */
    void *p4 = h_malloc(e.a, 19 * MiB + MiB / 2, 0);
    m_segment(&m, L, 20 * MiB, 0);
    m_handout(&m, L, 20 * MiB, 19 * MiB + MiB / 2, 0);
    VERIFY(&m, e.a);

    /* 8: 2 MiB from p3's remainder, then free p3: absorbs nothing on the left,
     * the next block is allocated — net +1 split block of 5 MiB */
    void *p5 = h_malloc(e.a, 2 * MiB, 0);
    h_arr_add(m.s.inactive_split_bytes, L, -2 * (int64_t)MiB);
    m_handout(&m, L, 2 * MiB, 2 * MiB, 0);
    VERIFY(&m, e.a);
    h_free(e.a, p3);
    m_user_free(&m, L, 5 * MiB, 0);
    m_block_free(&m, L, 5 * MiB, 5 * MiB, +1, +5 * (int64_t)MiB);
    VERIFY(&m, e.a);

    /* 9: free p5 — absorbs both neighbours: -2 split blocks, whole segment */
    h_free(e.a, p5);
    m_user_free(&m, L, 2 * MiB, 0);
    m_block_free(&m, L, 2 * MiB, 2 * MiB, -2, -(int64_t)(18 * MiB));
    VERIFY(&m, e.a);

    /* 10: reset_accumulated */
    sublet_stats_reset_accumulated(e.a);
    m_reset_acc(&m);
    VERIFY(&m, e.a);

    /* 11: empty_cache — releases p3's 20 MiB segment and the small one */
    h_empty_cache(e.a);
    m.s.num_sync_all_streams++;
    m_segment(&m, L, -20 * (int64_t)MiB, 0);
    m_segment(&m, S, -2 * (int64_t)MiB, 0);
    VERIFY(&m, e.a);

    /* 12: free p4 (whole block, whole segment) */
    h_free(e.a, p4);
    m_user_free(&m, L, 20 * MiB, 0);
    m_block_free(&m, L, 20 * MiB, 19 * MiB + MiB / 2, 0, 0);
    VERIFY(&m, e.a);

    /* 13: 6 MiB reuses p4's cached segment, split */
    void *p6 = h_malloc(e.a, 6 * MiB, 0);
    h_arr_add(m.s.inactive_split, L, 1);
    h_arr_add(m.s.inactive_split_bytes, L, 14 * MiB);
    m_handout(&m, L, 6 * MiB, 6 * MiB, 0);
    VERIFY(&m, e.a);

    /* 14: record on stream 9, free: the user free counts now, the block free
     * only once the stream's work is done */
    h_record(e.a, p6, 9);
    VERIFY(&m, e.a);
    h_free(e.a, p6);
    m_user_free(&m, L, 6 * MiB, 0);
    VERIFY(&m, e.a);
    h_process_events(e.a);
    VERIFY(&m, e.a);
    sublet_sim_stream_complete(e.inner, 9);
    h_process_events(e.a);
    m_block_free(&m, L, 6 * MiB, 6 * MiB, -1, -14 * (int64_t)MiB);
    VERIFY(&m, e.a);

    /* 15: oversize — 50 MiB segment and allocation, never split */
    void *p7 = h_malloc(e.a, 50 * MiB, 0);
    m_segment(&m, L, 50 * MiB, 1);
    m_handout(&m, L, 50 * MiB, 50 * MiB, 1);
    VERIFY(&m, e.a);
    h_free(e.a, p7);
    m_user_free(&m, L, 50 * MiB, 1);
    m_block_free(&m, L, 50 * MiB, 50 * MiB, 0, 0);
    VERIFY(&m, e.a);

    /* 16: a failed allocation: full release, retry, OOM */
    void *r = NULL;
    assert_int_equal(h_try_malloc(e.a, 100 * GiB, 0, &r), SUBLET_ERR_OOM);
    m.s.num_sync_all_streams++;
    m_segment(&m, L, -50 * (int64_t)MiB, 1);
    m_segment(&m, L, -20 * (int64_t)MiB, 0);
    m.s.num_alloc_retries++;
    m.s.num_ooms++;
    VERIFY(&m, e.a);

    /* 17: a zero-byte request records nothing */
    assert_int_equal(h_try_malloc(e.a, 0, 0, &r), SUBLET_OK);
    assert_null(r);
    VERIFY(&m, e.a);
    h_env_fini(&e);
}

/* test_memory_stats */
static void test_memory_stats(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    void *keep = h_malloc(e.a, 3 * MiB, 0); /* unrelated earlier state */
    void *gone = h_malloc(e.a, 40 * MiB, 0);
    h_free(e.a, gone);
    h_empty_cache(e.a);
    sublet_stats_reset_peak(e.a);
    sublet_stats_reset_accumulated(e.a);
    int64_t prev_allocated = h_stat(e.a, "allocated_bytes.all.current");
    int64_t prev_reserved = h_stat(e.a, "reserved_bytes.all.current");
    int64_t prev_max_allocated = h_stat(e.a, "allocated_bytes.all.peak");
    int64_t prev_max_reserved = h_stat(e.a, "reserved_bytes.all.peak");
    assert_int_equal(prev_allocated, prev_max_allocated);
    assert_int_equal(prev_reserved, prev_max_reserved);
    int64_t prev_active = h_stat(e.a, "active_bytes.all.current");
    void *tmp = h_malloc(e.a, 256 * 4, 0);
    assert_int_equal(h_stat(e.a, "active_bytes.all.current"), 1024 + prev_active);
    assert_int_equal(h_stat(e.a, "active_bytes.all.freed"), 0);
    h_free(e.a, tmp);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "active_bytes.all.current"), prev_active);
    assert_int_equal(h_stat(e.a, "active_bytes.all.freed"), 1024);
    sublet_stats_reset_peak(e.a);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.peak"), prev_max_allocated);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.peak"), prev_max_reserved);
    h_free(e.a, keep);
    h_env_fini(&e);
}

/* ---- seeding a replay that began mid-run (seed.c) ----------------------------------- */

static void test_seed_matches_engine(void **state)
{
    (void)state;
    /* what the engine counts for a 5 MiB block in a fresh 20 MiB segment ... */
    h_env ref;
    h_env_init(&ref, H_SIM, SIM_BIG, "");
    void *p = h_malloc(ref.a, 5 * MiB, 3);
    uint64_t X = h_addr(p);
    sublet_stats want;
    sublet_stats_read(ref.a, &want);
    want.num_device_alloc = 0; /* seeds are not device allocations of the run */
    h_env_fini(&ref);

    /* ... is what seeding the same state counts */
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    assert_int_equal(sublet_seed_segment(e.a, X, 20 * MiB, 3, 0), SUBLET_OK);
    CHECK(e.a);
    assert_int_equal(sublet_seed_block(e.a, X, 5 * MiB, 5 * MiB, 3), SUBLET_OK);
    CHECK(e.a);
    sublet_stats got;
    sublet_stats_read(e.a, &got);
    h_stats_equal(&want, &got);
    assert_int_equal(sublet_sim_used(e.inner), 20 * MiB);

    /* refused: misaligned, overlapping, outside a free block, wrong stream */
    sublet_stats_read(e.a, &want);
    assert_int_equal(sublet_seed_segment(e.a, X + 100, 2 * MiB, 3, 1),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_seed_segment(e.a, X + 4 * MiB, 2 * MiB, 3, 1),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_seed_block(e.a, X + MiB, MiB, MiB, 3), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_seed_block(e.a, X + 6 * MiB, MiB, MiB, 4),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_seed_block(e.a, X + 19 * MiB, 2 * MiB, MiB, 3),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_seed_block(e.a, X + 6 * MiB, 1000, 1000, 3),
                     SUBLET_ERR_INVALID_ARGUMENT);
    CHECK(e.a);
    sublet_stats_read(e.a, &got);
    h_stats_equal(&want, &got);

    /* a block in the middle of the free tail: head and tail pieces */
    assert_int_equal(sublet_seed_block(e.a, X + 8 * MiB, 3 * MiB, 3 * MiB - 100, 3), SUBLET_OK);
    CHECK(e.a);
    assert_int_equal(h_segment_of(e.a, X).nblocks, 4);
    assert_int_equal(h_stat(e.a, "inactive_split.large_pool.current"), 2);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.large_pool.current"), 12 * MiB);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.current"), 8 * MiB - 100);
    /* seeded blocks are ordinary blocks afterwards */
    void *y = h_malloc(e.a, 3 * MiB, 3); /* best fit: the 3 MiB head piece */
    assert_int_equal(h_addr(y), X + 5 * MiB);
    h_free(e.a, (void *)(uintptr_t)(X + 8 * MiB));
    h_free(e.a, (void *)(uintptr_t)X);
    h_free(e.a, y);
    assert_int_equal(h_segment_of(e.a, X).nblocks, 1);
    assert_int_equal(h_stat(e.a, "inactive_split.all.current"), 0);
    /* a seeded small segment */
    uint64_t S = X + 64 * MiB;
    assert_int_equal(sublet_seed_segment(e.a, S, 2 * MiB, 0, 1), SUBLET_OK);
    CHECK(e.a);
    assert_int_equal(sublet_seed_block(e.a, S, 512, 10, 0), SUBLET_OK);
    CHECK(e.a);
    void *z = h_malloc(e.a, 512, 0);
    assert_int_equal(h_addr(z), S + 512);
    h_free(e.a, z);
    h_free(e.a, (void *)(uintptr_t)S);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 0);
    assert_int_equal(h_stat(e.a, "num_device_free"), 2);
    h_env_fini(&e);
}

/* creation and runtime settings */
static void test_settings_scope(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "max_split_size_mb:40");
    char err[256];
    /* max_split_size in the stats is frozen at creation (§7.2) */
    assert_int_equal(sublet_settings_apply(e.a, "max_split_size_mb:100", err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(h_stat(e.a, "max_split_size"), 40 * MiB);
    /* but the policy follows the new value: 60 MiB is no longer oversize */
    void *p = h_malloc(e.a, 60 * MiB, 0);
    assert_int_equal(h_stat(e.a, "oversize_allocations.current"), 0);
    h_free(e.a, p);
    /* cudaMallocAsync is not sublet: refused, settings unchanged */
    assert_int_equal(sublet_settings_apply(e.a, "backend:cudaMallocAsync", err, sizeof err),
                     SUBLET_ERR_UNSUPPORTED);
    sublet_settings st;
    sublet_settings_get(e.a, &st);
    assert_int_equal(st.backend_async, 0);
    assert_int_equal(st.max_split_size, 100 * MiB);
    /* expandable segments may be switched on at run time (the sim has VMM) */
    assert_int_equal(sublet_settings_apply(e.a, "expandable_segments:True", err, sizeof err),
                     SUBLET_OK);
    sublet_settings_get(e.a, &st);
    assert_true(st.expandable_segments);
    h_env_fini(&e);

    sublet_backend *sim = NULL;
    assert_int_equal(sublet_sim_create(GiB, &sim), SUBLET_OK);
    sublet_options o = {.backend = sim, .conf = "backend:cudaMallocAsync"};
    sublet_allocator *a = NULL;
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    assert_null(a);
    o.conf = "max_split_size_mb:2";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_null(a);
    /* unlimited max_split_size reads -1 */
    o.conf = "";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_OK);
    assert_int_equal(h_stat(a, "max_split_size"), -1);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_default),
        cmocka_unit_test(test_rounding_power2_divisions),
        cmocka_unit_test(test_raw_alloc_stats),
        cmocka_unit_test(test_segment_sizes_and_pools),
        cmocka_unit_test(test_segment_size_table),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_merge_on_free),
        cmocka_unit_test(test_max_split_size),
        cmocka_unit_test(test_release_available_cached_blocks),
        cmocka_unit_test(test_garbage_collection),
        cmocka_unit_test(test_memory_fraction),
        cmocka_unit_test(test_empty_cache),
        cmocka_unit_test(test_stats_script),
        cmocka_unit_test(test_memory_stats),
        cmocka_unit_test(test_seed_matches_engine),
        cmocka_unit_test(test_settings_scope),
    };
    if (getenv("SUBLET_TEST_FILTER")) /* e.g. SUBLET_TEST_FILTER='test_model_*' */
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
