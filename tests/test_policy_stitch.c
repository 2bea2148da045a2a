/* policy:stitch (docs/policies.md): virtual-memory segments with 2 MiB pages
 * for every request and one pool per stream, so a small request maps a page
 * of the same reservation as the large ones; unmapping on empty_cache; on
 * the OOM path the free pages of as few cached blocks as needed are unmapped
 * and fresh pages mapped where the request needs them; no device call on the
 * common path.  sublet_check() runs after every operation (tests/support). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
    /* never counted as inactive_split (§6.5) */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
