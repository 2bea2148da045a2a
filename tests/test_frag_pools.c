/* sublet — the fragmentation state per pool (docs/pools.md, "Fragmentation,
 * diagnosis and report"): a state built through the engine's pool API
 * (a CUDA graph capture, a MemPool under use_mem_pool, default-pool traffic
 * in between) records each segment's pool, and sublet_frag_pools() gives
 * each pool's totals.  Every figure is held to the engine's own per-pool
 * statistics (sublet_pool_stats_read, sublet_pool_info_read) and the default
 * pools to the allocator's totals less the private pools'; sublet_check runs
 * after every step.  Then the texts and flat keys show each private pool as
 * its own group (and a state without one stays as before), a snapshot of the
 * allocator gives the same pools, and the OOM diagnosis names the pool a
 * request went to and the free memory that sits in another pool. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/frag.h"
#include "sublet/pool.h"
#include "sublet/snapshot.h"
#include "support/harness.h"

typedef struct scene {
    h_env e;
    sublet_pool_id graph, user;
    void *keep[6];
    size_t nkeep;
} scene;

/* Default traffic, a graph capture on stream 7, more default traffic, then a
 * MemPool under use_mem_pool with one block kept and one freed. */
static void scene_init(scene *s, uint64_t capacity)
{
    memset(s, 0, sizeof *s);
    h_env_init(&s->e, H_SIM, capacity, "");
    sublet_allocator *a = s->e.a;
    s->keep[s->nkeep++] = h_malloc(a, 4 * MiB, 0);
    void *tmp = h_malloc(a, 6 * MiB, 0);
    CHECK(a);
    assert_int_equal(sublet_pool_handle(a, SUBLET_POOL_ID_GRAPH, &s->graph), SUBLET_OK);
    assert_int_equal(sublet_pool_begin_allocate(a, s->graph, SUBLET_POOL_FILTER_STREAM, 7),
                     SUBLET_OK);
    s->keep[s->nkeep++] = h_malloc(a, 3 * MiB, 7);
    s->keep[s->nkeep++] = h_malloc(a, 512, 7);
    void *g = h_malloc(a, 2 * MiB, 7);
    h_free(a, g);
    void *other = h_malloc(a, 1000, 0); /* another stream: the default pools */
    assert_int_equal(sublet_pool_end_allocate(a, s->graph), SUBLET_OK);
    CHECK(a);
    h_free(a, tmp);
    s->keep[s->nkeep++] = other;
    assert_int_equal(sublet_pool_create(a, NULL, &s->user), SUBLET_OK);
    assert_int_equal(sublet_pool_begin_allocate(a, s->user, SUBLET_POOL_FILTER_THREAD, 0),
                     SUBLET_OK);
    s->keep[s->nkeep++] = h_malloc(a, 5 * MiB, 0);
    void *u = h_malloc(a, 12 * MiB, 0);
    h_free(a, u);
    /* leaving use_mem_pool: endAllocateToPool, then releasePool */
    assert_int_equal(sublet_pool_end_allocate(a, s->user), SUBLET_OK);
    assert_int_equal(sublet_pool_release(a, s->user), SUBLET_OK);
    CHECK(a);
}

static void scene_fini(scene *s)
{
    for (size_t i = 0; i < s->nkeep; i++)
        if (s->keep[i])
            h_free(s->e.a, s->keep[i]);
    CHECK(s->e.a);
    h_env_fini(&s->e);
}

static sublet_frag_state *capture(sublet_allocator *a)
{
    sublet_frag_state *st = NULL;
    assert_int_equal(sublet_frag_capture(a, &st), SUBLET_OK);
    return st;
}

static const sublet_frag_pool *find_pool(const sublet_frag_pool *p, size_t n, sublet_pool_id id)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].pool_id[0] == id.first && p[i].pool_id[1] == id.second)
            return &p[i];
    return NULL;
}

/* Each pool's totals against the engine's: a private pool's against its own
 * statistics and info, the default pools' against the allocator's totals less
 * the private pools', the free bytes of the default pools against the live
 * free index (sublet_frag_read counts the default pools' free blocks). */
static void pools_match_engine(sublet_allocator *a, const sublet_frag_state *st,
                               const sublet_pool_id *ids, size_t nids)
{
    sublet_frag_pool pools[8];
    size_t n = sublet_frag_pools(st, pools, 8);
    assert_int_equal(n, nids + 1);
    assert_int_equal(pools[0].pool_id[0], 0);
    assert_int_equal(pools[0].pool_id[1], 0);
    sublet_stats all;
    sublet_stats_read(a, &all);
    uint64_t reserved = (uint64_t)all.reserved_bytes[SUBLET_POOL_ALL].current;
    uint64_t allocated = (uint64_t)all.allocated_bytes[SUBLET_POOL_ALL].current;
    uint64_t active = (uint64_t)all.active_bytes[SUBLET_POOL_ALL].current;
    uint64_t requested = (uint64_t)all.requested_bytes[SUBLET_POOL_ALL].current;
    for (size_t i = 0; i < nids; i++) {
        const sublet_frag_pool *p = find_pool(pools, n, ids[i]);
        assert_non_null(p);
        sublet_stats ps;
        sublet_pool_info info;
        assert_int_equal(sublet_pool_stats_read(a, ids[i], &ps), SUBLET_OK);
        assert_int_equal(sublet_pool_info_read(a, ids[i], &info), SUBLET_OK);
        assert_true(info.exists);
        assert_int_equal(p->reserved_bytes, ps.reserved_bytes[SUBLET_POOL_ALL].current);
        assert_int_equal(p->allocated_bytes, ps.allocated_bytes[SUBLET_POOL_ALL].current);
        assert_int_equal(p->active_bytes, ps.active_bytes[SUBLET_POOL_ALL].current);
        assert_int_equal(p->requested_bytes, ps.requested_bytes[SUBLET_POOL_ALL].current);
        assert_int_equal(p->segments, ps.segment[SUBLET_POOL_ALL].current);
        assert_int_equal(p->segments, info.device_segments);
        assert_int_equal(p->free_bytes, info.free_bytes);
        assert_int_equal(p->free_bytes, p->reserved_bytes - p->active_bytes);
        reserved -= p->reserved_bytes;
        allocated -= p->allocated_bytes;
        active -= p->active_bytes;
        requested -= p->requested_bytes;
    }
    assert_int_equal(pools[0].reserved_bytes, reserved);
    assert_int_equal(pools[0].allocated_bytes, allocated);
    assert_int_equal(pools[0].active_bytes, active);
    assert_int_equal(pools[0].requested_bytes, requested);
    sublet_frag_stats live;
    assert_int_equal(sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &live), SUBLET_OK);
    assert_int_equal(pools[0].free_bytes, live.free_bytes);
    assert_int_equal(pools[0].free_blocks, live.free_blocks);
    assert_int_equal(pools[0].largest_free_block, live.largest_free_block);
    /* pinned: the segments with a live block, and the free bytes inside them */
    for (size_t k = 0; k < n; k++) {
        size_t pinned = 0, segs = 0;
        uint64_t pinned_free = 0, largest = 0;
        for (size_t i = 0; i < st->nsegments; i++) {
            const sublet_frag_segment *s = &st->segments[i];
            if (s->pool_id[0] != pools[k].pool_id[0] || s->pool_id[1] != pools[k].pool_id[1])
                continue;
            segs++;
            if (s->largest_free > largest)
                largest = s->largest_free;
            if (s->live_blocks) {
                pinned++;
                pinned_free += s->free_size;
            }
        }
        assert_int_equal(pools[k].segments, segs);
        assert_int_equal(pools[k].pinned_segments, pinned);
        assert_int_equal(pools[k].pinned_free_bytes, pinned_free);
        assert_int_equal(pools[k].largest_free_block, largest);
    }
    /* the default pools' max allocatable is the engine's, private pools or not */
    for (sublet_stream sm = 0; sm < 8; sm += 7)
        assert_int_equal(sublet_frag_max_allocatable(st, sm), sublet_max_allocatable(a, sm));
}

static void test_pools_against_engine(void **state)
{
    (void)state;
    scene s;
    scene_init(&s, 80 * GiB);
    sublet_allocator *a = s.e.a;
    sublet_pool_id ids[2] = {s.graph, s.user};
    sublet_frag_state *st = capture(a);
    assert_true(sublet_frag_has_private_pools(st));
    pools_match_engine(a, st, ids, 2);
    sublet_frag_pool pools[4];
    assert_int_equal(sublet_frag_pools(st, pools, 4), 3);
    const sublet_frag_pool *u = find_pool(pools, 3, s.user);
    assert_int_equal(u->pinned_segments, 1); /* the 5 MiB block's segment */
    assert_true(u->free_bytes > 0);
    sublet_frag_state_free(st);

    /* the MemPool's last live block freed: nothing pins it any more */
    h_free(a, s.keep[4]);
    s.keep[4] = NULL;
    CHECK(a);
    st = capture(a);
    pools_match_engine(a, st, ids, 2);
    assert_int_equal(sublet_frag_pools(st, pools, 4), 3);
    u = find_pool(pools, 3, s.user);
    assert_int_equal(u->pinned_segments, 0);
    assert_int_equal(u->pinned_free_bytes, 0);
    assert_int_equal(u->allocated_bytes, 0);
    sublet_frag_state_free(st);

    /* the MemPool deleted (releasePool, then emptyCache under it): gone from the state */
    assert_int_equal(sublet_pool_release(a, s.user), SUBLET_OK);
    assert_int_equal(sublet_pool_empty_cache(a, s.user), SUBLET_OK);
    CHECK(a);
    st = capture(a);
    pools_match_engine(a, st, ids, 1);
    assert_int_equal(sublet_frag_pools(st, pools, 4), 2);
    assert_null(find_pool(pools, 2, s.user));
    sublet_frag_state_free(st);
    scene_fini(&s);
}

/* The texts show each pool as its own group; without a private pool they
 * carry none of it. */
static void test_texts(void **state)
{
    (void)state;
    scene s;
    scene_init(&s, 80 * GiB);
    sublet_allocator *a = s.e.a;
    sublet_frag_state *st = capture(a);
    sublet_frag_format_options fo = {.sections = SUBLET_FRAG_SECTION_ALL};
    size_t n = sublet_frag_format_text(st, &fo, NULL, 0);
    char *text = malloc(n + 1);
    assert_non_null(text);
    assert_int_equal(sublet_frag_format_text(st, &fo, text, n + 1), n);
    assert_non_null(strstr(text, "  per pool ("));
    const char *map = strstr(text, "segment map (");
    assert_non_null(map);
    /* the map: a heading per pool, the default pools first, every segment once */
    const char *h0 = strstr(map, "\n default pools (0,0): ");
    const char *h1 = strstr(map, "\n private pool (0,1): ");
    const char *h2 = strstr(map, "\n private pool (1,0): ");
    assert_true(h0 && h1 && h2 && h0 < h1 && h1 < h2);
    size_t rows = 0;
    for (const char *p = map; (p = strstr(p, "\n  0x")); p++)
        rows++;
    assert_int_equal(rows, st->nsegments);
    /* a pinning segment of a private pool is named with its pool */
    assert_non_null(strstr(text, "(private pool (1,0): large pool, stream 7)"));
    free(text);

    /* flat keys: every pool's totals, as the engine counts them */
    n = sublet_frag_format_flat(st, NULL, 0);
    char *flat = malloc(n + 1);
    assert_non_null(flat);
    sublet_frag_format_flat(st, flat, n + 1);
    sublet_stats gs;
    assert_int_equal(sublet_pool_stats_read(a, s.graph, &gs), SUBLET_OK);
    char want[128];
    snprintf(want, sizeof want, "\nfragmentation.pool_1_0.reserved_bytes %" PRId64 "\n",
             gs.reserved_bytes[SUBLET_POOL_ALL].current);
    assert_non_null(strstr(flat, want));
    assert_non_null(strstr(flat, "\nfragmentation.pool_0_0.segments "));
    assert_non_null(strstr(flat, "\nfragmentation.pool_0_1.pinned_segments 1\n"));
    free(flat);
    sublet_frag_state_free(st);
    scene_fini(&s);

    /* default pools only: no per-pool group anywhere */
    h_env e;
    h_env_init(&e, H_SIM, 80 * GiB, "");
    void *p = h_malloc(e.a, 4 * MiB, 0);
    st = capture(e.a);
    assert_false(sublet_frag_has_private_pools(st));
    assert_int_equal(sublet_frag_pools(st, NULL, 0), 1);
    n = sublet_frag_format_text(st, &fo, NULL, 0);
    text = malloc(n + 1);
    assert_non_null(text);
    sublet_frag_format_text(st, &fo, text, n + 1);
    assert_null(strstr(text, "per pool"));
    assert_null(strstr(text, "default pools (0,0)"));
    free(text);
    n = sublet_frag_format_flat(st, NULL, 0);
    flat = malloc(n + 1);
    assert_non_null(flat);
    sublet_frag_format_flat(st, flat, n + 1);
    assert_null(strstr(flat, ".pool_"));
    free(flat);
    sublet_frag_state_free(st);
    h_free(e.a, p);
    CHECK(e.a);
    h_env_fini(&e);
}

/* A snapshot of the allocator gives the same pools as the live state. */
static void test_snapshot_state(void **state)
{
    (void)state;
    scene s;
    scene_init(&s, 80 * GiB);
    sublet_frag_state *live = capture(s.e.a);
    sublet_snapshot *snap = NULL;
    assert_int_equal(sublet_snapshot_take(s.e.a, &snap), SUBLET_OK);
    sublet_frag_state *off = NULL;
    assert_int_equal(sublet_frag_from_snapshot(snap, 0, &off), SUBLET_OK);
    sublet_frag_pool a[4], b[4];
    size_t na = sublet_frag_pools(live, a, 4), nb = sublet_frag_pools(off, b, 4);
    assert_int_equal(na, 3);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(a[i].pool_id[0], b[i].pool_id[0]);
        assert_int_equal(a[i].pool_id[1], b[i].pool_id[1]);
        assert_int_equal(a[i].segments, b[i].segments);
        assert_int_equal(a[i].pinned_segments, b[i].pinned_segments);
        assert_int_equal(a[i].reserved_bytes, b[i].reserved_bytes);
        assert_int_equal(a[i].allocated_bytes, b[i].allocated_bytes);
        assert_int_equal(a[i].free_bytes, b[i].free_bytes);
        assert_int_equal(a[i].largest_free_block, b[i].largest_free_block);
    }
    sublet_frag_state_free(off);
    sublet_frag_state_free(live);
    sublet_snapshot_free(snap);
    scene_fini(&s);
}

static char *diagnose(sublet_allocator *a, uint64_t request, sublet_stream stream)
{
    size_t n = sublet_oom_diagnose(a, request, stream, NULL, 0);
    char *text = malloc(n + 1);
    assert_non_null(text);
    assert_int_equal(sublet_oom_diagnose(a, request, stream, text, n + 1), n);
    return text;
}

/* An OOM of a default-pool request while a MemPool caches 30 MiB: the
 * diagnosis names the pool the request went to and says where the free
 * memory sits; the MemPool's free memory does not count towards "would
 * suffice" (it cannot serve the request), so this is exhaustion. */
static void test_oom_diagnosis(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 64 * MiB, "");
    sublet_allocator *a = e.a;
    void *d = h_malloc(a, 4 * MiB, 0); /* a 20 MiB default segment */
    sublet_pool_id user;
    assert_int_equal(sublet_pool_create(a, NULL, &user), SUBLET_OK);
    assert_int_equal(sublet_pool_begin_allocate(a, user, SUBLET_POOL_FILTER_THREAD, 0), SUBLET_OK);
    void *u = h_malloc(a, 30 * MiB, 0);
    h_free(a, u); /* cached in the MemPool */
    assert_int_equal(sublet_pool_end_allocate(a, user), SUBLET_OK);
    assert_int_equal(sublet_pool_release(a, user), SUBLET_OK); /* use count back to 1 */
    CHECK(a);
    uint64_t target[2] = {9, 9};
    assert_int_equal(sublet_frag_request_pool(a, 40 * MiB, 0, target), SUBLET_OK);
    assert_int_equal(target[0], 0);
    assert_int_equal(target[1], 0);
    void *p = NULL;
    assert_int_equal(sublet_malloc(a, 40 * MiB, 0, &p), SUBLET_ERR_OOM);
    CHECK(a);
    sublet_pool_info info;
    assert_int_equal(sublet_pool_info_read(a, user, &info), SUBLET_OK);
    assert_int_equal(info.free_bytes, 30 * MiB); /* the OOM path left it there */
    char *text = diagnose(a, 40 * MiB, 0);
    if (strncmp(text, "sublet diagnosis: exhaustion.", 29) != 0 ||
        !strstr(text, " went to the default pools (0,0) ") ||
        !strstr(text, "16.00 MiB free in default pools (0,0), the request's pool") ||
        !strstr(text, "30.00 MiB free in private pool (0,1) (1 segment, 0 pinned") ||
        !strstr(text, "The 30.00 MiB free in other pools cannot serve this request"))
        fail_msg("default-pool diagnosis:\n%s", text);
    free(text);

    /* the same request inside use_mem_pool goes to the MemPool */
    assert_int_equal(sublet_pool_begin_allocate(a, user, SUBLET_POOL_FILTER_THREAD, 0), SUBLET_OK);
    assert_int_equal(sublet_frag_request_pool(a, 40 * MiB, 0, target), SUBLET_OK);
    assert_int_equal(target[0], user.first);
    assert_int_equal(target[1], user.second);
    assert_int_equal(sublet_malloc(a, 40 * MiB, 0, &p), SUBLET_ERR_OOM);
    CHECK(a);
    text = diagnose(a, 40 * MiB, 0);
    if (!strstr(text, " went to the private pool (0,1) ") ||
        !strstr(text, "free in private pool (0,1), the request's pool") ||
        !strstr(text, "16.00 MiB free in default pools (0,0) (1 segment, 1 pinned"))
        fail_msg("MemPool diagnosis:\n%s", text);
    free(text);
    assert_int_equal(sublet_pool_end_allocate(a, user), SUBLET_OK);
    assert_int_equal(sublet_pool_release(a, user), SUBLET_OK);
    h_free(a, d);
    CHECK(a);
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pools_against_engine),
        cmocka_unit_test(test_texts),
        cmocka_unit_test(test_snapshot_state),
        cmocka_unit_test(test_oom_diagnosis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
