/* policy:stitch (docs/policies.md): virtual-memory segments with 2 MiB pages
 * for every request and one pool per stream, so a small request maps a page
 * of the same reservation as the large ones; unmapping on empty_cache; on
 * the OOM path the free pages of as few cached blocks as needed are unmapped
 * and fresh pages mapped where the request needs them, then partly free
 * pages are stitched into a new run by mapping their physical pages a second
 * time (va_map_alias: the free part of a page that holds live bytes serves
 * the request); no device call on the common path.  sublet_check() runs
 * after every operation (tests/support); it verifies that every physical
 * byte is usable through one view only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/harness.h"

#define PAGE (2 * MiB)
#define SIM_CAP (8 * GiB)

typedef struct rec {
    int n;
    sublet_action act[64];
    uint64_t addr[64], size[64];
} rec;

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    (void)stream;
    rec *r = user;
    if (act != SUBLET_ACT_SEGMENT_MAP && act != SUBLET_ACT_SEGMENT_UNMAP &&
        act != SUBLET_ACT_SEGMENT_ALLOC && act != SUBLET_ACT_SEGMENT_FREE)
        return;
    if (r->n < 64) {
        r->act[r->n] = act;
        r->addr[r->n] = addr;
        r->size[r->n] = size;
    }
    r->n++;
}

static uintptr_t u(const void *p) { return (uintptr_t)p; }

static sublet_sim_ops ops(const h_env *e)
{
    sublet_sim_ops o;
    sublet_sim_ops_read(e->inner, &o);
    return o;
}

static void check_seg(void *user, const sublet_segment_view *s)
{
    int *n = user;
    assert_true(s->is_expandable);
    assert_false(s->is_small); /* one pool: everything is in the large one */
    n[0]++;
}

static void test_settings(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "policy:stitch");
    sublet_settings s;
    sublet_settings_get(e.a, &s);
    assert_int_equal(s.policy, SUBLET_POLICY_STITCH);
    assert_false(s.expandable_segments); /* its own policy, not PyTorch's option */
    h_env_fini(&e);
}

/* A 1 KiB request maps one 2 MiB page of the large pool's reservation; the
 * next requests, small or large, grow the same reservation. */
static void test_one_pool(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "policy:stitch");
    rec r = {0};
    sublet_trace_set(e.a, on_trace, &r);

    void *p = h_malloc(e.a, 1000, 0);
    assert_int_equal(h_block_size(e.a, p), 1024);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), PAGE);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 0);
    assert_int_equal(h_stat(e.a, "allocated_bytes.large_pool.current"), 1024);
    assert_int_equal(h_stat(e.a, "segment.all.current"), 0); /* mapping is not a segment */
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.act[0], SUBLET_ACT_SEGMENT_MAP);
    assert_int_equal(r.addr[0], u(p));
    assert_int_equal(r.size[0], PAGE);
    sublet_sim_ops o = ops(&e);
    assert_int_equal(o.va_reserves, 1);
    assert_int_equal(o.va_maps, 1);
    assert_int_equal(o.segment_allocs, 0); /* never cudaMalloc */

    /* 3 MiB: the free rest of the page plus one more page, same reservation */
    void *q = h_malloc(e.a, 3 * MiB, 0);
    assert_int_equal(u(q), u(p) + 1024);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 2 * PAGE);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.addr[1], u(p) + PAGE);
    assert_int_equal(r.size[1], PAGE);
    /* a small request takes the sub-page rest after q: no device call */
    void *s = h_malloc(e.a, 100, 0);
    assert_int_equal(u(s), u(q) + 3 * MiB);
    o = ops(&e);
    assert_int_equal(o.va_reserves, 1);
    assert_int_equal(o.va_maps, 2);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 0);
    int n[1] = {0};
    sublet_segments_walk(e.a, check_seg, n);
    assert_int_equal(n[0], 1); /* one mapped run */
    /* never counted as inactive_split (docs/rules.md §6.5) */
    assert_int_equal(h_stat(e.a, "inactive_split.all.current"), 0);

    h_free(e.a, p);
    h_free(e.a, q);
    h_free(e.a, s);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_nsegments(e.a), 0);
    o = ops(&e);
    assert_int_equal(o.va_releases, 1);
    h_env_fini(&e);
}

/* Pages are 2 MiB for large requests too (expandable_segments: 20 MiB). */
static void test_pages_are_2mib(void **state)
{
    (void)state;
    const char *confs[2] = {"policy:stitch", "expandable_segments:True"};
    const uint64_t want[2] = {22 * MiB, 40 * MiB};
    for (int i = 0; i < 2; i++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_CAP, confs[i]);
        rec r = {0};
        sublet_trace_set(e.a, on_trace, &r);
        void *p = h_malloc(e.a, 21 * MiB, 0);
        assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), want[i]);
        assert_int_equal(r.n, 1);
        assert_int_equal(r.size[0], want[i]);
        assert_int_equal(sublet_sim_used(e.inner), want[i]);
        sublet_trace_set(e.a, NULL, NULL);
        h_free(e.a, p);
        h_env_fini(&e);
    }
}

/* One reservation per stream. */
static void test_one_reservation_per_stream(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "policy:stitch");
    void *a = h_malloc(e.a, 1000, 0);
    void *b = h_malloc(e.a, 50 * MiB, 0);
    void *c = h_malloc(e.a, 1000, 7);
    void *d = h_malloc(e.a, 50 * MiB, 7);
    sublet_sim_ops o = ops(&e);
    assert_int_equal(o.va_reserves, 2);
    assert_int_equal(h_segment_of(e.a, u(a)).stream, 0);
    assert_int_equal(h_segment_of(e.a, u(c)).stream, 7);
    assert_int_equal(u(b), u(a) + 1024);
    assert_int_equal(u(d), u(c) + 1024);
    h_free(e.a, a);
    h_free(e.a, b);
    h_free(e.a, c);
    h_free(e.a, d);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

/* empty_cache unmaps the whole free pages; a live small block keeps only
 * its own page. */
static void test_empty_cache_unmaps(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "policy:stitch");
    void *small = h_malloc(e.a, 1000, 0);   /* page 0 */
    void *big = h_malloc(e.a, 10 * MiB, 0); /* [1 KiB, 10 MiB + 1 KiB): pages 0..5 */
    assert_int_equal(u(big), u(small) + 1024);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 6 * PAGE);
    h_free(e.a, big);
    rec r = {0};
    sublet_trace_set(e.a, on_trace, &r);
    int64_t frees = h_stat(e.a, "num_device_free");
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), PAGE);
    assert_int_equal(h_stat(e.a, "num_device_free"), frees + 1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.act[0], SUBLET_ACT_SEGMENT_UNMAP);
    assert_int_equal(r.addr[0], u(small) + PAGE);
    assert_int_equal(r.size[0], 5 * PAGE);
    assert_int_equal(sublet_sim_used(e.inner), PAGE);
    sublet_trace_set(e.a, NULL, NULL);
    /* the reservation stays while a page is mapped */
    assert_int_equal(ops(&e).va_releases, 0);
    h_free(e.a, small);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_nsegments(e.a), 0);
    assert_int_equal(ops(&e).va_releases, 1);
    h_env_fini(&e);
}

/* The OOM path: the free pages of one cached block elsewhere are unmapped
 * and mapped where the request grows; the other cached block stays mapped
 * (PyTorch's release_cached_blocks would unmap it too). */
static void test_oom_path_moves_only_the_pages_needed(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 10 * MiB, "policy:stitch"); /* 5 pages */
    void *p[5];
    for (int i = 0; i < 5; i++) {
        p[i] = h_malloc(e.a, 2 * MiB, 0);
        assert_int_equal(u(p[i]), u(p[0]) + (uint64_t)i * 2 * MiB);
    }
    assert_int_equal(sublet_sim_used(e.inner), 10 * MiB);
    h_free(e.a, p[0]); /* cached: [0,2) */
    h_free(e.a, p[2]); /* cached: [4,6) */
    h_free(e.a, p[4]); /* cached: [8,10), the growable tail */
    sublet_sim_ops before = ops(&e);
    /* 4 MiB fits no cached block; growing the tail needs one more page and
     * the device is full: the OOM path unmaps [0,2) and maps [10,12) */
    void *d = h_malloc(e.a, 4 * MiB, 0);
    assert_int_equal(u(d), u(p[4]));
    sublet_sim_ops after = ops(&e);
    assert_int_equal(after.va_unmaps - before.va_unmaps, 1);
    assert_int_equal(after.va_maps - before.va_maps, 1);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 1);
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 10 * MiB);
    /* [4,6) is still mapped and cached: served without a device call */
    void *again = h_malloc(e.a, 2 * MiB, 0);
    assert_int_equal(u(again), u(p[2]));
    assert_int_equal(ops(&e).va_maps, after.va_maps);
    h_free(e.a, again);
    h_free(e.a, d);
    h_free(e.a, p[1]);
    h_free(e.a, p[3]);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

/* When freeing a few blocks' pages is not enough, PyTorch's full release
 * runs as before, and a true OOM is still reported. */
static void test_oom_when_nothing_fits(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 10 * MiB, "policy:stitch");
    void *a = h_malloc(e.a, 6 * MiB, 0);
    void *b = NULL;
    assert_int_equal(h_try_malloc(e.a, 6 * MiB, 0, &b), SUBLET_ERR_OOM);
    assert_int_equal(h_stat(e.a, "num_ooms"), 1);
    h_free(e.a, a);
    b = h_malloc(e.a, 10 * MiB, 0);
    h_free(e.a, b);
    h_env_fini(&e);
}

/* After one round of a workload, repeating it makes no device call. */
static void test_common_path_makes_no_device_call(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "policy:stitch");
    const uint64_t sizes[] = {1000, 3 * MiB, 40 * MiB, 100, 512 * KiB, 7 * MiB + 3, 96};
    enum { N = sizeof sizes / sizeof sizes[0] };
    sublet_sim_ops first = {0};
    for (int round = 0; round < 20; round++) {
        void *p[N];
        for (int i = 0; i < N; i++)
            p[i] = h_malloc(e.a, sizes[i], 0);
        for (int i = 0; i < N; i += 2)
            h_free(e.a, p[i]);
        for (int i = 1; i < N; i += 2)
            h_free(e.a, p[i]);
        if (round == 0)
            first = ops(&e);
    }
    sublet_sim_ops o = ops(&e);
    assert_memory_equal(&o, &first, sizeof o);
    h_env_fini(&e);
}

/* Random mallocs and frees on two streams on a device a little larger than
 * the peak, so the OOM path (partial then full release) runs often; every
 * invariant is checked after each operation, and the device never holds
 * more than the mapped bytes the allocator counts. */
static void test_random_tight_device(void **state)
{
    (void)state;
    const int steps = H_UNDER_TSAN ? 2000 : 20000;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        h_env e;
        h_env_init(&e, H_SIM, 64 * MiB, "policy:stitch");
        enum { SLOTS = 48 };
        void *p[SLOTS] = {0};
        uint64_t rng = seed, ooms = 0;
        for (int i = 0; i < steps; i++) {
            int k = (int)h_rand_range(&rng, 0, SLOTS);
            if (p[k]) {
                h_free(e.a, p[k]);
                p[k] = NULL;
                continue;
            }
            uint64_t kind = h_rand_range(&rng, 0, 4), n;
            if (kind == 0)
                n = h_rand_range(&rng, 1, 4096);
            else if (kind == 1)
                n = h_rand_range(&rng, 4096, 1 * MiB);
            else
                n = h_rand_range(&rng, 1 * MiB, 9 * MiB);
            sublet_stream s = h_rand_range(&rng, 0, 4) == 0 ? 5 : 0;
            if (h_try_malloc(e.a, n, s, &p[k]) == SUBLET_ERR_OOM) {
                p[k] = NULL;
                ooms++;
            }
            assert_int_equal((int64_t)sublet_sim_used(e.inner),
                             h_stat(e.a, "reserved_bytes.all.current"));
            if (i % 997 == 0)
                h_empty_cache(e.a);
        }
        print_message("seed %llu: %llu OOMs, %lld retries\n", (unsigned long long)seed, (unsigned long long)ooms, (long long)h_stat(e.a, "num_alloc_retries"));
        assert_true(ooms > 0);                            /* the device was tight */
        assert_true(h_stat(e.a, "num_alloc_retries") > 0); /* and the OOM path ran */
        for (int k = 0; k < SLOTS; k++)
            if (p[k])
                h_free(e.a, p[k]);
        h_empty_cache(e.a);
        assert_int_equal(sublet_sim_used(e.inner), 0);
        h_env_fini(&e);
    }
}

/* ---- stitching partly free pages ---------------------------------------------------- */

/* Owner pages of a partly live layout on an 8 MiB device, every page mapped:
 *   page 0: p[0] (1 MiB, live) | hole (1 MiB, its free tail)
 *   page 1: p[2] (2 MiB, live)
 *   page 2: hole (1 MiB, its free head) | p[4] (3 MiB, live, into page 3)
 * Both holes are in pages that hold live bytes, so no page can be unmapped;
 * at[0] and at[1] are the holes' addresses. */
static void partly_live(h_env *e, void *p[5], uint64_t at[2])
{
    const uint64_t sizes[5] = {1 * MiB, 1 * MiB, 2 * MiB, 1 * MiB, 3 * MiB};
    for (int i = 0; i < 5; i++) {
        p[i] = h_malloc(e->a, sizes[i], 0);
        if (i)
            assert_int_equal(u(p[i]), u(p[i - 1]) + sizes[i - 1]);
    }
    at[0] = u(p[1]);
    at[1] = u(p[3]);
    h_free(e->a, p[1]);
    h_free(e->a, p[3]);
    p[1] = p[3] = NULL;
    assert_int_equal(h_stat(e->a, "reserved_bytes.all.current"), 8 * MiB);
}

static void free_all(h_env *e, void **p, int n)
{
    for (int i = 0; i < n; i++)
        if (p[i]) {
            h_free(e->a, p[i]);
            p[i] = NULL;
        }
}

/* A 1.5 MiB request on a full device: no free block holds it and no page is
 * wholly free, but the two holes' pages can be mapped again as the first and
 * the last page of a new run: 1 MiB of page 0's tail, then 0.5 MiB of page
 * 2's head.  No memory is taken; the lent bytes are no longer free in their
 * pages; the rest of page 2's hole still serves a small request; empty_cache
 * gives the stitch back, and everything goes back at the end. */
static void stitch_two_holes(int kind)
{
    h_env e;
    h_env_init(&e, kind, 8 * MiB, "policy:stitch");
    void *p[5], *q = NULL, *r = NULL;
    uint64_t at[2];
    partly_live(&e, p, at);
    rec tr = {0};
    sublet_trace_set(e.a, on_trace, &tr);
    q = h_malloc(e.a, 1536 * KiB, 0);
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 8 * MiB); /* nothing new */
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 8 * MiB - 512 * KiB);
    uint64_t a1 = u(q) - 1 * MiB; /* the first page of the run maps page 0 */
    assert_int_equal(a1 % PAGE, 0);
    /* trace: the lent ranges leave their pages, the run's usable bytes come */
    assert_int_equal(tr.n, 3);
    assert_int_equal(tr.act[0], SUBLET_ACT_SEGMENT_UNMAP);
    assert_int_equal(tr.addr[0], at[1]);
    assert_int_equal(tr.size[0], 512 * KiB);
    assert_int_equal(tr.act[1], SUBLET_ACT_SEGMENT_UNMAP);
    assert_int_equal(tr.addr[1], at[0]);
    assert_int_equal(tr.size[1], 1 * MiB);
    assert_int_equal(tr.act[2], SUBLET_ACT_SEGMENT_MAP);
    assert_int_equal(tr.addr[2], u(q));
    assert_int_equal(tr.size[2], 1536 * KiB);
    sublet_trace_set(e.a, NULL, NULL);
    if (kind == H_SIM) {
        sublet_sim_ops o = ops(&e);
        assert_int_equal(o.va_aliases, 2);
        assert_int_equal(sublet_sim_used(e.inner), 8 * MiB); /* each page counted once */
    }
    /* what is left of page 2's hole: 0.5 MiB, not overlapping q's bytes */
    r = h_malloc(e.a, 512 * KiB, 0);
    assert_int_equal(u(r), at[1] + 512 * KiB);
    void *x = NULL;
    assert_int_equal(h_try_malloc(e.a, 1 * MiB, 0, &x), SUBLET_ERR_OOM);
    if (kind == H_HOST) {
        /* one physical page, two views: q's bytes are the holes' bytes */
        unsigned char *qb = q, *h0 = (unsigned char *)(uintptr_t)at[0],
                      *h1 = (unsigned char *)(uintptr_t)at[1];
        for (uint64_t i = 0; i < 1536 * KiB; i += 4096)
            qb[i] = (unsigned char)(i / 4096 * 7 + 1);
        for (uint64_t i = 0; i < 1 * MiB; i += 4096)
            assert_int_equal(h0[i], (unsigned char)(i / 4096 * 7 + 1));
        for (uint64_t i = 0; i < 512 * KiB; i += 4096)
            assert_int_equal(h1[i], (unsigned char)((i + 1 * MiB) / 4096 * 7 + 1));
        h1[0] = 0xab; /* and the other way round */
        assert_int_equal(qb[1 * MiB], 0xab);
        memset(r, 0x5a, 512 * KiB); /* the rest of the hole is r's alone */
        assert_int_equal(qb[1532 * KiB], (unsigned char)((1532 * KiB) / 4096 * 7 + 1));
        memset(p[0], 1, 1 * MiB);
        memset(p[2], 2, 2 * MiB);
        memset(p[4], 4, 3 * MiB);
        assert_int_equal(qb[0], 1);
        assert_int_equal(qb[1 * MiB], 0xab);
    }
    /* q's memory is cached where it is: the same request again, no call */
    h_free(e.a, q);
    void *q2 = h_malloc(e.a, 1536 * KiB, 0);
    assert_ptr_equal(q2, q);
    h_free(e.a, q2);
    h_free(e.a, r);
    if (kind == H_SIM)
        assert_int_equal(ops(&e).va_aliases, 2);
    /* empty_cache gives the stitch back: the holes are free in their pages */
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 8 * MiB);
    x = h_malloc(e.a, 1 * MiB, 0);
    assert_int_equal(u(x), at[0]);
    void *y = h_malloc(e.a, 1 * MiB, 0);
    assert_int_equal(u(y), at[1]);
    h_free(e.a, x);
    h_free(e.a, y);
    free_all(&e, p, 5);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(h_nsegments(e.a), 0);
    if (kind == H_SIM) {
        sublet_sim_ops o = ops(&e);
        assert_int_equal(sublet_sim_used(e.inner), 0);
        assert_int_equal(o.va_aliases, 2); /* one stitch of two alias pages */
        assert_true(o.va_unmaps >= o.va_aliases); /* every alias page given back */
        assert_int_equal(o.va_reserves, o.va_releases); /* every reservation back */
    }
    h_env_fini(&e);
}

static void test_stitch_two_holes_sim(void **state)
{
    (void)state;
    stitch_two_holes(H_SIM);
}

static void test_stitch_two_holes_host(void **state)
{
    (void)state;
    stitch_two_holes(H_HOST);
}

/* One page free on the device, a 3 MiB request: page 0's free 1 MiB tail,
 * mapped again as the first page of a new run, and one fresh page hold it
 * (growing in place would need two fresh pages). */
static void test_stitch_tail_and_fresh_page(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 10 * MiB, "policy:stitch");
    void *p[5], *q;
    uint64_t at[2];
    partly_live(&e, p, at);
    /* page 2's hole taken: page 0's tail is the only partly free page */
    void *x = h_malloc(e.a, 1 * MiB, 0), *y = h_malloc(e.a, 1 * MiB, 0);
    assert_int_equal(u(y), at[1]);
    h_free(e.a, x);
    sublet_sim_ops before = ops(&e);
    q = h_malloc(e.a, 3 * MiB, 0);
    sublet_sim_ops after = ops(&e);
    assert_int_equal(after.va_maps - before.va_maps, 2); /* one fresh, one alias */
    assert_int_equal(after.va_aliases - before.va_aliases, 1);
    assert_int_equal(after.va_unmaps, before.va_unmaps);
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    assert_int_equal(u(q) % PAGE, 1 * MiB); /* the tail's place in its page */
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 10 * MiB);
    assert_int_equal(sublet_sim_used(e.inner), 10 * MiB);
    h_free(e.a, q);
    h_free(e.a, y);
    free_all(&e, p, 5);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* Every device call of a stitch failing in turn: the fresh map, the first
 * alias, the second: nothing is left mapped, lent or counted, the request
 * is an OOM (or is served by a later rung), and the next try works. */
static void test_stitch_device_failures(void **state)
{
    (void)state;
    for (int fail_op = 0; fail_op < 3; fail_op++) {
        h_env e;
        h_env_init(&e, H_SIM_FAULT, 10 * MiB, "policy:stitch");
        void *p[5], *q = NULL;
        uint64_t at[2];
        partly_live(&e, p, at);
        /* 3.5 MiB: one fresh page, page 0's tail and page 2's head */
        sublet_stats before;
        sublet_stats_read(e.a, &before);
        if (fail_op == 0)
            sublet_fault_fail_every(e.fault, SUBLET_FAULT_VA_MAP, 1);
        else
            sublet_fault_fail_every(e.fault, SUBLET_FAULT_VA_MAP_ALIAS, fail_op);
        assert_int_equal(h_try_malloc(e.a, 3584 * KiB, 0, &q), SUBLET_ERR_OOM);
        assert_true(sublet_fault_injected(e.fault, fail_op ? SUBLET_FAULT_VA_MAP_ALIAS
                                                           : SUBLET_FAULT_VA_MAP) > 0);
        assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 8 * MiB);
        assert_int_equal(sublet_sim_used(e.inner), 8 * MiB);
        assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"),
                         before.allocated_bytes[0].current);
        /* what the failed stitch mapped is unmapped again */
        sublet_sim_ops o;
        sublet_sim_ops_read(e.inner, &o);
        assert_int_equal(o.va_maps - o.va_unmaps, 4); /* partly_live's four pages */
        sublet_fault_fail_every(e.fault, SUBLET_FAULT_VA_MAP, 0);
        sublet_fault_fail_every(e.fault, SUBLET_FAULT_VA_MAP_ALIAS, 0);
        q = h_malloc(e.a, 3584 * KiB, 0);
        assert_int_equal(sublet_sim_used(e.inner), 10 * MiB);
        h_free(e.a, q);
        free_all(&e, p, 5);
        h_empty_cache(e.a);
        assert_int_equal(sublet_sim_used(e.inner), 0);
        h_env_fini(&e);
    }
}

/* A pattern word for block `tag` at byte offset `off`. */
static uint64_t pat(uint64_t tag, uint64_t off) { return (tag << 32) ^ (off * 0x9E3779B97F4A7C15u); }

/* Write or check words at a block's start, its end and every 4 KiB-aligned
 * address inside.  An alias page maps a whole page at a page-aligned
 * address, so two live blocks sharing a physical byte range of 4 KiB or
 * more would share a grid word. */
static void pattern(void *p, uint64_t n, uint64_t tag, int check)
{
    unsigned char *b = p;
    uint64_t grid = (4096 - (uint64_t)(uintptr_t)p % 4096) % 4096;
    if (grid < 8)
        grid += 4096;
    for (uint64_t off = 0; off + 8 <= n;) {
        uint64_t want = pat(tag, off), got;
        if (!check) {
            memcpy(b + off, &want, 8);
        } else {
            memcpy(&got, b + off, 8);
            if (got != want)
                fail_msg("block %p (%llu B, tag %llu): word at +%llu overwritten", p,
                         (unsigned long long)n, (unsigned long long)tag, (unsigned long long)off);
        }
        if (off + 16 > n || off == n - 8)
            break;
        if (grid + 16 <= n) { /* the next grid word, clear of the last one */
            off = grid;
            grid += 4096;
        } else {
            off = n - 8;
        }
    }
}

/* Random requests of a few pages on a tight host device: stitches happen
 * often; every live block carries its own pattern, checked before it is
 * freed and after every empty_cache, so bytes reached through two views
 * can never serve two blocks; sublet_check() after every operation. */
static void test_random_stitch_host(void **state)
{
    (void)state;
    const int steps = H_UNDER_TSAN ? 2000 : 12000;
    sublet_backend *host, *fault;
    assert_int_equal(sublet_host_create(48 * MiB, &host), SUBLET_OK);
    assert_int_equal(sublet_fault_create(host, &fault), SUBLET_OK);
    sublet_options o = {.backend = fault, .conf = "policy:stitch"};
    sublet_allocator *a;
    char err[256];
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_OK);
    enum { SLOTS = 40 };
    void *p[SLOTS] = {0};
    uint64_t n[SLOTS] = {0}, tag[SLOTS] = {0}, rng = 77, ooms = 0, next_tag = 1;
    for (int i = 0; i < steps; i++) {
        int k = (int)h_rand_range(&rng, 0, SLOTS);
        if (p[k]) {
            pattern(p[k], n[k], tag[k], 1);
            h_free(a, p[k]);
            p[k] = NULL;
        } else {
            uint64_t kind = h_rand_range(&rng, 0, 4);
            n[k] = kind == 0 ? h_rand_range(&rng, 8, 64 * KiB)
                 : kind == 1 ? 2 * MiB * h_rand_range(&rng, 1, 3)
                             : h_rand_range(&rng, 16, 10240) * 512;
            sublet_stream s = h_rand_range(&rng, 0, 5) == 0 ? 3 : 0;
            if (h_try_malloc(a, n[k], s, &p[k]) == SUBLET_ERR_OOM) {
                p[k] = NULL;
                ooms++;
            } else {
                tag[k] = next_tag++;
                pattern(p[k], n[k], tag[k], 0);
            }
        }
        if (i % 499 == 0) {
            h_empty_cache(a);
            for (int j = 0; j < SLOTS; j++)
                if (p[j])
                    pattern(p[j], n[j], tag[j], 1);
        }
    }
    uint64_t stitched = sublet_fault_calls(fault, SUBLET_FAULT_VA_MAP_ALIAS);
    print_message("host: %d steps, %llu OOMs, %llu alias maps\n", steps,
                  (unsigned long long)ooms, (unsigned long long)stitched);
    assert_true(ooms > 0);
    assert_true(stitched > (H_UNDER_TSAN ? 0u : 20u));
    for (int j = 0; j < SLOTS; j++)
        if (p[j]) {
            pattern(p[j], n[j], tag[j], 1);
            h_free(a, p[j]);
        }
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(fault);
    sublet_backend_destroy(host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_one_pool),
        cmocka_unit_test(test_pages_are_2mib),
        cmocka_unit_test(test_one_reservation_per_stream),
        cmocka_unit_test(test_empty_cache_unmaps),
        cmocka_unit_test(test_oom_path_moves_only_the_pages_needed),
        cmocka_unit_test(test_oom_when_nothing_fits),
        cmocka_unit_test(test_common_path_makes_no_device_call),
        cmocka_unit_test(test_random_tight_device),
        cmocka_unit_test(test_stitch_two_holes_sim),
        cmocka_unit_test(test_stitch_two_holes_host),
        cmocka_unit_test(test_stitch_tail_and_fresh_page),
        cmocka_unit_test(test_stitch_device_failures),
        cmocka_unit_test(test_random_stitch_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
