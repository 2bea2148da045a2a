/* Expandable segments (docs/rules.md §6): mapping page by page, the changed
 * lookup and split rules, unmapping on empty_cache, statistics and trace
 * events.  sublet_check() runs after every operation (tests/support). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "support/harness.h"

#define PAGE (20 * MiB) /* large-pool page */
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
    if (act != SUBLET_ACT_SEGMENT_MAP && act != SUBLET_ACT_SEGMENT_UNMAP)
        return;
    if (r->n < 64) {
        r->act[r->n] = act;
        r->addr[r->n] = addr;
        r->size[r->n] = size;
    }
    r->n++;
}

static uintptr_t u(const void *p) { return (uintptr_t)p; }

static void test_map_on_demand_and_grow_in_place(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    rec r = {0};
    sublet_trace_set(e.a, on_trace, &r);

    void *p1 = h_malloc(e.a, 3 * MiB, 0);
    /* one page mapped, no segment counted, the block split with the >= 512 rule */
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), PAGE);
    assert_int_equal(h_stat(e.a, "segment.all.current"), 0);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(h_block_size(e.a, p1), 3 * MiB);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.act[0], SUBLET_ACT_SEGMENT_MAP);
    assert_int_equal(r.addr[0], u(p1));
    assert_int_equal(r.size[0], PAGE);

    /* 30 MiB grows the same reservation: the free 17 MiB tail plus one new page */
    void *p2 = h_malloc(e.a, 30 * MiB, 0);
    assert_int_equal(u(p2), u(p1) + 3 * MiB);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 2 * PAGE);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 2);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.addr[1], u(p1) + PAGE);
    assert_int_equal(r.size[1], PAGE);
    /* never counted as inactive_split (§6.5) */
    assert_int_equal(h_stat(e.a, "inactive_split.all.current"), 0);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.all.current"), 0);

    /* a small request maps a 2 MiB page of its own reservation */
    void *s = h_malloc(e.a, 1000, 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 2 * MiB);
    assert_int_equal(h_block_size(e.a, s), 1024);

    h_free(e.a, p1);
    h_free(e.a, p2);
    h_free(e.a, s);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_nsegments(e.a), 0); /* reservations released */
    h_env_fini(&e);
}

/* §6.4: a block that cannot grow is preferred over the growable tail. */
static void test_lookup_prefers_block_that_cannot_grow(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    void *a = h_malloc(e.a, 12 * MiB, 0); /* [0,12)          page 0 mapped */
    void *b = h_malloc(e.a, 2 * MiB, 0);  /* [12,14)                        */
    void *c = h_malloc(e.a, 16 * MiB, 0); /* [14,30), page 1 mapped; tail [30,40) free */
    assert_int_equal(u(b), u(a) + 12 * MiB);
    assert_int_equal(u(c), u(a) + 14 * MiB);
    h_free(e.a, a); /* M: 12 MiB free at 0, bounded by b: cannot grow */
    /* best fit by size alone would take the 10 MiB tail; §6.4 walks to M */
    void *d = h_malloc(e.a, 9 * MiB, 0);
    assert_int_equal(u(d), u(a));
    assert_int_equal(h_block_size(e.a, d), 9 * MiB);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 2); /* nothing new mapped */
    h_free(e.a, b);
    h_free(e.a, c);
    h_free(e.a, d);
    h_env_fini(&e);
}

/* §2.6 with expandable segments: large blocks split when the rest is >= 512 B. */
static void test_split_rule(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    void *p = h_malloc(e.a, 20 * MiB - 512 * KiB, 0);
    assert_int_equal(h_block_size(e.a, p), 20 * MiB - 512 * KiB);
    void *q = h_malloc(e.a, 512 * KiB - 512, 0); /* small pool: its own 2 MiB page */
    assert_int_equal(h_stat(e.a, "reserved_bytes.small_pool.current"), 2 * MiB);
    h_free(e.a, q);
    /* a larger request grows from the 512 KiB tail into a second page */
    void *t = h_malloc(e.a, 1 * MiB + 512, 0);
    assert_int_equal(h_stat(e.a, "reserved_bytes.large_pool.current"), 2 * PAGE);
    h_free(e.a, t);
    h_free(e.a, p);
    h_env_fini(&e);
}

static void test_empty_cache_unmaps_whole_free_pages_only(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    rec r = {0};
    void *big = h_malloc(e.a, 50 * MiB, 0);   /* pages 0..2 */
    void *live = h_malloc(e.a, 4 * MiB, 0);   /* [50,54) inside page 2 */
    assert_int_equal(u(live), u(big) + 50 * MiB);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 3 * PAGE);
    h_free(e.a, big);
    sublet_trace_set(e.a, on_trace, &r);
    int64_t frees = h_stat(e.a, "num_device_free");
    h_empty_cache(e.a);
    /* pages 0 and 1 are wholly free: one unmap; page 2 holds the live block,
     * and its free [54,60) MiB covers no whole page, so it stays mapped */
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), PAGE);
    assert_int_equal(h_stat(e.a, "num_device_free"), frees + 1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.act[0], SUBLET_ACT_SEGMENT_UNMAP);
    assert_int_equal(r.addr[0], u(big));
    assert_int_equal(r.size[0], 2 * PAGE);
    assert_int_equal(sublet_sim_used(e.inner), PAGE);
    sublet_trace_set(e.a, NULL, NULL);
    /* mapping again reuses the low pages of the same reservation */
    void *again = h_malloc(e.a, 30 * MiB, 0);
    assert_int_equal(u(again), u(big));
    h_free(e.a, again);
    h_free(e.a, live);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(h_nsegments(e.a), 0);
    h_env_fini(&e);
}

static void count_seg(void *user, const sublet_segment_view *s)
{
    int *n = user;
    assert_true(s->is_expandable);
    n[0]++;
    n[1] += (int)s->nblocks;
}

static void test_segments_are_mapped_runs(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    void *a = h_malloc(e.a, 4 * MiB, 0);
    void *hole = h_malloc(e.a, 40 * MiB, 0);
    void *c = h_malloc(e.a, 4 * MiB, 0);
    h_free(e.a, hole);
    h_empty_cache(e.a); /* unmaps the whole page in the middle of the hole */
    int n[2] = {0, 0};
    sublet_segments_walk(e.a, count_seg, n);
    assert_int_equal(n[0], 2); /* two mapped runs of one reservation */
    h_free(e.a, a);
    h_free(e.a, c);
    h_env_fini(&e);
}

/* Switching the mode off: expandable blocks are never used for new
 * non-expandable allocations (§6.4, else branch). */
static void test_mode_switched_off(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "expandable_segments:True");
    void *p = h_malloc(e.a, 8 * MiB, 0);
    h_free(e.a, p); /* a 20 MiB free expandable block stays mapped */
    char err[128];
    assert_int_equal(sublet_settings_apply(e.a, "expandable_segments:False", err, sizeof err),
                     SUBLET_OK);
    void *q = h_malloc(e.a, 8 * MiB, 0);
    assert_int_not_equal(u(q), u(p));
    assert_int_equal(h_stat(e.a, "segment.all.current"), 1); /* a normal 20 MiB segment */
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 2 * PAGE);
    h_free(e.a, q);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* The fraction limit compares the segment size, even in expandable mode (§3.3). */
static void test_fraction_and_oom(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 1 * GiB, "expandable_segments:True");
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.1), SUBLET_OK); /* ~102 MiB */
    void *a = h_malloc(e.a, 60 * MiB, 0);
    void *b = NULL;
    assert_int_equal(h_try_malloc(e.a, 60 * MiB, 0, &b), SUBLET_ERR_OOM);
    assert_int_equal(h_stat(e.a, "num_ooms"), 1);
    h_free(e.a, a);
    b = h_malloc(e.a, 60 * MiB, 0);
    h_free(e.a, b);
    h_env_fini(&e);
}

/* Device exhaustion while mapping: nothing is left half-mapped. */
static void test_device_full(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 100 * MiB, "expandable_segments:True");
    void *a = h_malloc(e.a, 70 * MiB, 0); /* 4 pages = 80 MiB */
    void *b = NULL;
    assert_int_equal(h_try_malloc(e.a, 40 * MiB, 0, &b), SUBLET_ERR_OOM);
    assert_int_equal(sublet_sim_used(e.inner), 4 * PAGE);
    h_free(e.a, a);
    b = h_malloc(e.a, 90 * MiB, 0);
    h_free(e.a, b);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_on_demand_and_grow_in_place),
        cmocka_unit_test(test_lookup_prefers_block_that_cannot_grow),
        cmocka_unit_test(test_split_rule),
        cmocka_unit_test(test_empty_cache_unmaps_whole_free_pages_only),
        cmocka_unit_test(test_segments_are_mapped_runs),
        cmocka_unit_test(test_mode_switched_off),
        cmocka_unit_test(test_fraction_and_oom),
        cmocka_unit_test(test_device_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
