/* sublet — sublet_check()'s recount of the statistics (src/engine/inspect.c).
 *
 * The checker recounts every pool-split statistic of sublet/stats.h's list
 * (SUBLET_STAT_ARRAYS) from the blocks, for the allocator and for each
 * private pool, and reports the first that disagrees.  Here each statistic
 * of each kind is put one off in turn, in the allocator's totals and in a
 * private pool's: the checker must name it (key, kind and both values), and
 * pass again once it is put back.  A state with small and large blocks,
 * allocated, cached and split, in the default pools and in one private pool,
 * so that no recount is zero by accident. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "sublet/pool.h"
#include "support/harness.h"

#define MiB (UINT64_C(1) << 20)

typedef struct world {
    h_env e;
    void *keep[8];
} world;

/* Small and large allocations in the default pools and in pool (1, 0), some
 * freed again (cached, leaving split segments behind). */
static void build(world *w)
{
    h_env_init(&w->e, H_SIM, 8ull << 30, "");
    sublet_allocator *a = w->e.a;
    w->keep[0] = h_malloc_at(a, 1000, 0, __FILE__, __LINE__);
    void *s2 = h_malloc_at(a, 3000, 0, __FILE__, __LINE__);
    w->keep[1] = h_malloc_at(a, 5 * MiB, 0, __FILE__, __LINE__);
    void *l2 = h_malloc_at(a, 3 * MiB, 0, __FILE__, __LINE__);
    h_free_at(a, s2, __FILE__, __LINE__);
    h_free_at(a, l2, __FILE__, __LINE__);
    sublet_pool_id id = {1, 0};
    assert_int_equal(sublet_pool_incref(a, id), SUBLET_OK);
    assert_int_equal(sublet_pool_begin_allocate(a, id, SUBLET_POOL_FILTER_STREAM, 0), SUBLET_OK);
    w->keep[2] = h_malloc_at(a, 700, 0, __FILE__, __LINE__);
    void *p2 = h_malloc_at(a, 2000, 0, __FILE__, __LINE__);
    w->keep[3] = h_malloc_at(a, 4 * MiB, 0, __FILE__, __LINE__);
    void *p4 = h_malloc_at(a, 2 * MiB, 0, __FILE__, __LINE__);
    assert_int_equal(sublet_pool_end_allocate(a, id), SUBLET_OK);
    h_free_at(a, p2, __FILE__, __LINE__);
    h_free_at(a, p4, __FILE__, __LINE__);
    CHECK(a);
}

/* One statistic of `st` (the allocator's or a pool's) off by one, by name. */
typedef struct stat_ref {
    const char *key;
    sublet_stat *arr;
} stat_ref;

static size_t stat_refs(sublet_stats *st, stat_ref *out)
{
    size_t n = 0;
#define REF(key, title, bytes) out[n++] = (stat_ref){#key, st->key};
    SUBLET_STAT_ARRAYS(REF)
#undef REF
    return n;
}

/* Put each statistic of st one off in turn: sublet_check names it with
 * `prefix` (the pool for a private pool's), then passes once restored. */
static void each_stat_off(sublet_allocator *a, sublet_stats *st, const char *prefix)
{
    stat_ref refs[16];
    size_t n = stat_refs(st, refs);
    assert_int_equal(n, 9);
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < SUBLET_POOL_KINDS; k++) {
            int64_t was = refs[i].arr[k].current;
            refs[i].arr[k].current = was + 1;
            char msg[512], want[256];
            assert_int_equal(sublet_check(a, msg, sizeof msg), SUBLET_ERR_CORRUPT);
            snprintf(want, sizeof want, "%sstat %s[%d].current = %lld but a recount gives %lld",
                     prefix, refs[i].key, k, (long long)(was + 1), (long long)was);
            if (strcmp(msg, want) != 0)
                fail_msg("got \"%s\", want \"%s\"", msg, want);
            refs[i].arr[k].current = was;
            CHECK(a);
        }
    }
}

static void test_allocator_stats_recounted(void **state)
{
    (void)state;
    world w = {0};
    build(&w);
    sublet_allocator *a = w.e.a;
    /* every recount is above zero, so an off-by-one is not hidden by a 0 */
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) {
        assert_true(a->stats.allocation[k].current > 0);
        assert_true(a->stats.inactive_split[k].current > 0);
    }
    each_stat_off(a, &a->stats, "");
    h_env_fini(&w.e);
}

static void test_private_pool_stats_recounted(void **state)
{
    (void)state;
    world w = {0};
    build(&w);
    sublet_allocator *a = w.e.a;
    assert_int_equal(a->nprivs, 1);
    sl_private *p = a->privs[0];
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) {
        assert_true(p->stats.allocation[k].current > 0);
        assert_true(p->stats.inactive_split[k].current > 0);
    }
    each_stat_off(a, &p->stats, "pool (1,0) ");
    h_env_fini(&w.e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocator_stats_recounted),
        cmocka_unit_test(test_private_pool_stats_recounted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
