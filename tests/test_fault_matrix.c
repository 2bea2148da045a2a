/* sublet — the fault-injection matrix (issue 8, item 2).
 *
 * One fixed, seeded workload (mallocs of every size class on four streams,
 * frees, record_stream with later stream completion, empty_cache, memory
 * fraction changes, a request no device could hold) runs under five
 * configurations:
 *
 *   default | max_split_size_mb:40 | garbage_collection_threshold:0.5 with a
 *   memory fraction | expandable_segments:True | policy:stitch | policy:stitch
 *   with requests of a few pages on a 64 MiB device (so that the OOM path
 *   stitches partly free pages and empty_cache gives them back often)
 *
 * on the sim backend wrapped by the fault-injection backend.  For each
 * configuration a clean run first counts the calls of each fault op
 * (segment alloc, event create, va_map, and policy:stitch's alias map
 * va_map_alias); then, for every N from 1 to that
 * count and separately for each op, a fresh allocator runs the workload with
 * the N-th call of that op failing (plus N = count + 1, which must not fire
 * and must end byte-identical to the clean run), and once more with every
 * 1st, 2nd and 3rd call failing.
 *
 * After every operation:
 *   - sublet_check() passes (it recounts every statistic from the blocks);
 *   - a malloc either succeeds (a block of at least the request, at its
 *     start) or is SUBLET_ERR_OOM with PyTorch's message, num_ooms one
 *     higher and the OOM observer called once;
 *   - a free either succeeds or returns the backend's error (event create
 *     failed): then the statistics are byte-identical to before (memcmp) and
 *     the block is still allocated, intact; it is freed again later;
 *   - allocation.all.current and allocated_bytes.all.current equal the
 *     test's own count of live blocks and their sizes; num_ooms equals the
 *     OOMs seen.
 * Before the N-th call the faulted run is the clean run (the sim is
 * deterministic), so exactly one failure is injected per run.
 * At the end, after freeing everything, completing the streams and
 * empty_cache: nothing allocated, active or reserved, every segment and
 * virtual reservation back with the backend (sublet_sim_used == 0). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/harness.h"

/* TSan (about 10x slower here) runs a shorter workload: fewer device calls,
 * so fewer runs, each cheaper. */
#if H_UNDER_TSAN
#define FM_STEPS 600
#else
#define FM_STEPS 1500
#endif

#define FM_CAPACITY (512 * MiB)
#define FM_SLOTS 48
#define FM_STREAMS 4      /* streams the workload allocates on */
#define FM_USE_STREAMS 10 /* streams blocks are recorded on (0..9) */

typedef struct fm_config {
    const char *name;
    const char *conf;
    double fraction; /* set after creation; 1.0 = none */
    double fractions[4]; /* what the workload's fraction changes pick from */
    uint64_t capacity;   /* 0: FM_CAPACITY */
    int page_sizes;      /* requests of a few pages (pick_page_size), not pick_size */
} fm_config;

static const fm_config CONFIGS[] = {
    {"default", "", 1.0, {1.0, 0.9, 0.6, 0.4}, 0, 0},
    {"max_split_size_mb:40", "max_split_size_mb:40", 1.0, {1.0, 0.9, 0.6, 0.4}, 0, 0},
    {"gc:0.5+fraction", "garbage_collection_threshold:0.5", 0.8, {0.8, 0.9, 0.6, 0.5}, 0, 0},
    {"expandable_segments:True", "expandable_segments:True", 1.0, {1.0, 0.9, 0.6, 0.4}, 0, 0},
    {"policy:stitch", "policy:stitch", 1.0, {1.0, 0.9, 0.6, 0.4}, 0, 0},
    /* requests of a few 2 MiB pages on a small device: the OOM path often
     * stitches partly free pages (va_map_alias) and gives them back */
    {"policy:stitch/pages", "policy:stitch", 1.0, {1.0, 0.9, 0.8, 0.7}, 64 * MiB, 1},
};
#define NCONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

static const char *const OP_NAMES[SUBLET_FAULT_OP_COUNT] = {"segment_alloc", "event_create",
                                                            "va_map", "va_map_alias"};

typedef struct fm_slot {
    void *p;
    uint64_t size; /* the block's size */
} fm_slot;

typedef struct fm_result {
    int64_t ooms;          /* malloc calls that returned SUBLET_ERR_OOM */
    int64_t free_errors;   /* free calls that returned the backend's error */
    uint64_t injected[SUBLET_FAULT_OP_COUNT]; /* failures injected before the cleanup */
    int64_t leftover_reservations; /* never-mapped reservations after empty_cache */
    sublet_stats end;      /* statistics after the final empty_cache */
} fm_result;

static int oom_observer_calls;

static void oom_observer(void *user, int device, uint64_t alloc_size, uint64_t limit,
                         uint64_t device_free)
{
    (void)user;
    (void)device_free;
    assert_int_equal(device, 0);
    assert_true(alloc_size > 0);
    assert_true(limit > 0);
    oom_observer_calls++;
}

/* A request from one of the size classes. */
static uint64_t pick_size(uint64_t *rng)
{
    switch (h_rand_range(rng, 0, 12)) {
    case 0: return h_rand_range(rng, 1, 513);                  /* tiny */
    case 1:
    case 2: return h_rand_range(rng, 513, MiB);                /* small pool */
    case 3: return h_rand_range(rng, 0, 2) ? MiB : MiB + 1;    /* the pool boundary */
    case 4:
    case 5: return h_rand_range(rng, MiB + 1, 10 * MiB);       /* large pool, 20 MiB segs */
    case 6:
    case 7: return h_rand_range(rng, 10 * MiB, 40 * MiB);      /* own segment */
    case 8: return h_rand_range(rng, 40 * MiB, 120 * MiB);     /* oversize at 40 MB */
    case 9: return 2 * MiB * h_rand_range(rng, 1, 16);         /* whole pages */
    case 10: return h_rand_range(rng, 1, 64) * 512;             /* exact multiples */
    default: return h_rand_range(rng, 1, 4 * KiB);
    }
}

/* A request of up to a few pages, seldom a whole number of them. */
static uint64_t pick_page_size(uint64_t *rng)
{
    switch (h_rand_range(rng, 0, 8)) {
    case 0: return h_rand_range(rng, 1, 64 * KiB);                  /* sub-page */
    case 1: return h_rand_range(rng, 64 * KiB, 2 * MiB);
    case 2: return 2 * MiB * h_rand_range(rng, 1, 4);              /* whole pages */
    default: return h_rand_range(rng, 1, 12 * 1024) * 512;         /* up to 6 MiB */
    }
}

static void expect_oom(h_env *e, int64_t *ooms)
{
    char msg[4096];
    size_t n = sublet_oom_message(e->a, msg, sizeof msg);
    assert_true(n > 0 && n < sizeof msg);
    assert_true(strncmp(msg, "CUDA out of memory. Tried to allocate ", 38) == 0);
    (*ooms)++;
    assert_int_equal(h_stat(e->a, "num_ooms"), *ooms);
    assert_int_equal(oom_observer_calls, *ooms);
}

/* The model: live blocks counted and summed by the test. */
static void expect_model(h_env *e, const fm_slot *slots, int64_t ooms)
{
    int64_t n = 0, bytes = 0;
    for (int i = 0; i < FM_SLOTS; i++)
        if (slots[i].p) {
            n++;
            bytes += (int64_t)slots[i].size;
        }
    sublet_stats s;
    sublet_stats_read(e->a, &s);
    assert_int_equal(s.allocation[SUBLET_POOL_ALL].current, n);
    assert_int_equal(s.allocated_bytes[SUBLET_POOL_ALL].current, bytes);
    assert_true(s.active_bytes[SUBLET_POOL_ALL].current >= bytes);
    assert_true(s.reserved_bytes[SUBLET_POOL_ALL].current >=
                s.active_bytes[SUBLET_POOL_ALL].current);
    assert_int_equal(s.num_ooms, ooms);
}

/* Free slot i: success, or the backend's error with nothing changed. */
static void fm_free(h_env *e, fm_slot *slots, int i, fm_result *r)
{
    sublet_stats before, after;
    sublet_stats_read(e->a, &before);
    uint64_t inj0 = sublet_fault_injected(e->fault, SUBLET_FAULT_EVENT_CREATE);
    sublet_status st = h_try_free(e->a, slots[i].p);
    if (st == SUBLET_OK) {
        slots[i].p = NULL;
        return;
    }
    assert_int_equal(st, SUBLET_ERR_BACKEND);
    /* only an injected event-create failure may cause it */
    assert_true(sublet_fault_injected(e->fault, SUBLET_FAULT_EVENT_CREATE) > inj0);
    sublet_stats_read(e->a, &after);
    assert_memory_equal(&before, &after, sizeof before);
    uint64_t base = 0, size = 0;
    h_block_at(e->a, slots[i].p, &base, &size, NULL, __FILE__, __LINE__);
    assert_int_equal(base, h_addr(slots[i].p));
    assert_int_equal(size, slots[i].size);
    r->free_errors++;
}

static void fm_malloc(h_env *e, fm_slot *slots, int i, uint64_t n, sublet_stream s,
                      fm_result *r)
{
    void *p = (void *)&p;
    sublet_status st = h_try_malloc(e->a, n, s, &p);
    if (st == SUBLET_ERR_OOM) {
        assert_null(p);
        expect_oom(e, &r->ooms);
        return;
    }
    assert_int_equal(st, SUBLET_OK);
    assert_non_null(p);
    uint64_t base = 0, size = 0, req = 0;
    h_block_at(e->a, p, &base, &size, &req, __FILE__, __LINE__);
    assert_int_equal(base, h_addr(p));
    assert_true(size >= n);
    assert_int_equal(req, n);
    for (int k = 0; k < FM_SLOTS; k++)
        if (slots[k].p) {
            uint64_t a0 = h_addr(slots[k].p), b0 = h_addr(p);
            assert_true(a0 + slots[k].size <= b0 || b0 + size <= a0); /* no overlap */
        }
    slots[i].p = p;
    slots[i].size = size;
}

/* The workload.  `e` is fresh; rules may already be set on e->fault.  With
 * `clear_rules`, the rules are cleared before the final cleanup (a
 * fail-every rule would otherwise refuse every free that needs an event). */
static void workload(h_env *e, const fm_config *c, fm_result *r, bool clear_rules)
{
    memset(r, 0, sizeof *r);
    oom_observer_calls = 0;
    sublet_oom_observer_set(e->a, oom_observer, NULL);
    if (c->fraction < 1.0)
        assert_int_equal(sublet_memory_fraction_set(e->a, c->fraction), SUBLET_OK);
    fm_slot slots[FM_SLOTS];
    memset(slots, 0, sizeof slots);
    uint64_t rng = 0x5eed0008;
    for (int step = 0; step < FM_STEPS; step++) {
        int i = (int)h_rand_range(&rng, 0, FM_SLOTS);
        uint64_t op = h_rand_range(&rng, 0, 100);
        sublet_stream s = h_rand_range(&rng, 0, FM_STREAMS);
        if (op < 50) {
            if (slots[i].p) {
                fm_free(e, slots, i, r);
            } else {
                uint64_t n = c->page_sizes ? pick_page_size(&rng) : pick_size(&rng);
                fm_malloc(e, slots, i, n, s, r);
            }
        } else if (op < 66) {
            if (slots[i].p) {
                /* used on one to three other streams, then (mostly) freed:
                 * the free waits for those streams */
                uint64_t uses = h_rand_range(&rng, 1, 4);
                for (uint64_t k = 0; k < uses; k++)
                    h_record(e->a, slots[i].p, h_rand_range(&rng, 0, FM_USE_STREAMS));
                if (h_rand_range(&rng, 0, 4) != 0)
                    fm_free(e, slots, i, r);
            }
        } else if (op < 76) {
            sublet_sim_stream_complete(e->inner, h_rand_range(&rng, 0, FM_USE_STREAMS));
            h_process_events(e->a);
        } else if (op < 84) {
            h_empty_cache(e->a);
        } else if (op < 90) {
            double f = c->fractions[h_rand_range(&rng, 0, 4)];
            sublet_stats before, after;
            sublet_stats_read(e->a, &before);
            assert_int_equal(sublet_memory_fraction_set(e->a, f), SUBLET_OK);
            CHECK(e->a);
            sublet_stats_read(e->a, &after);
            assert_memory_equal(&before, &after, sizeof before);
        } else if (op < 92) {
            /* more than the device holds: always an OOM */
            void *p = NULL;
            assert_int_equal(h_try_malloc(e->a, 2 * GiB + h_rand_range(&rng, 0, GiB), s, &p),
                             SUBLET_ERR_OOM);
            expect_oom(e, &r->ooms);
        } else {
            if (!slots[i].p)
                fm_malloc(e, slots, i,
                          c->page_sizes ? h_rand_range(&rng, 6 * MiB, 24 * MiB)
                                        : h_rand_range(&rng, 20 * MiB, 90 * MiB),
                          s, r);
            else
                fm_free(e, slots, i, r);
        }
        expect_model(e, slots, r->ooms);
    }

    /* the end: everything freed (a failed free is retried), streams
     * completed, cache emptied */
    for (int op = 0; op < SUBLET_FAULT_OP_COUNT; op++) {
        r->injected[op] = sublet_fault_injected(e->fault, (sublet_fault_op)op);
        if (clear_rules) {
            sublet_fault_fail_every(e->fault, (sublet_fault_op)op, 0);
            sublet_fault_fail_nth(e->fault, (sublet_fault_op)op, 0);
        }
    }
    for (int i = 0; i < FM_SLOTS; i++)
        for (int tries = 0; slots[i].p && tries < 4; tries++)
            fm_free(e, slots, i, r);
    for (int i = 0; i < FM_SLOTS; i++)
        if (slots[i].p)
            fail_msg("%s: slot %d (%p) cannot be freed: %s", c->name, i, slots[i].p,
                     sublet_status_name(sublet_free(e->a, slots[i].p)));
    expect_model(e, slots, r->ooms);
    sublet_sim_complete_all(e->inner);
    h_process_events(e->a);
    h_empty_cache(e->a);
    sublet_stats_read(e->a, &r->end);
    static const char *const zero[] = {
        "allocation.all.current",      "allocated_bytes.all.current",
        "active.all.current",          "active_bytes.all.current",
        "requested_bytes.all.current", "reserved_bytes.all.current",
        "segment.all.current",         "inactive_split.all.current",
        "inactive_split_bytes.all.current", "oversize_allocations.current",
        "oversize_segments.current",
    };
    for (size_t k = 0; k < sizeof zero / sizeof zero[0]; k++) {
        int64_t v = h_stat(e->a, zero[k]);
        if (v != 0)
            fail_msg("%s: %s = %lld at the end", c->name, zero[k], (long long)v);
    }
    assert_int_equal(sublet_sim_used(e->inner), 0);
    assert_int_equal(sublet_sim_segments(e->inner), 0);
    sublet_sim_ops ops;
    sublet_sim_ops_read(e->inner, &ops);
    assert_int_equal(ops.segment_allocs, ops.segment_frees);
    assert_int_equal(ops.va_maps > 0, ops.va_unmaps > 0);
    /* What the allocator may still hold: virtual reservations with nothing
     * mapped (a va_map that failed right after the reservation was made, or
     * a request larger than a whole reservation): no bytes, no statistic,
     * no segment in the walk.  PyTorch keeps those too (release_blocks
     * walks the mapped free blocks only); they go back at destroy. */
    assert_int_equal(h_nsegments(e->a), 0);
    r->leftover_reservations = (int64_t)(ops.va_reserves - ops.va_releases);
    sublet_oom_observer_set(e->a, NULL, NULL);
    sublet_allocator_destroy(e->a);
    e->a = NULL;
    sublet_sim_ops_read(e->inner, &ops);
    assert_int_equal(ops.va_reserves, ops.va_releases);
    assert_int_equal(sublet_sim_used(e->inner), 0);
}

static void env_for(h_env *e, const fm_config *c)
{
    h_env_init(e, H_SIM_FAULT, c->capacity ? c->capacity : FM_CAPACITY, c->conf);
}

static void run_config(const fm_config *c)
{
    h_env e;
    fm_result clean, r;
    uint64_t calls[SUBLET_FAULT_OP_COUNT];
    env_for(&e, c);
    workload(&e, c, &clean, false);
    for (int op = 0; op < SUBLET_FAULT_OP_COUNT; op++) {
        calls[op] = sublet_fault_calls(e.fault, (sublet_fault_op)op);
        assert_int_equal(sublet_fault_injected(e.fault, (sublet_fault_op)op), 0);
    }
    assert_int_equal(clean.free_errors, 0);
    h_env_fini(&e);

    /* the workload must reach what each configuration can fail */
    bool stitch = strstr(c->conf, "stitch") != NULL;
    bool virt = strstr(c->conf, "expandable") || stitch;
    assert_true(calls[SUBLET_FAULT_EVENT_CREATE] > 0);
    if (virt) {
        assert_true(calls[SUBLET_FAULT_VA_MAP] > 10);
        assert_int_equal(calls[SUBLET_FAULT_SEGMENT_ALLOC], 0);
    } else {
        assert_true(calls[SUBLET_FAULT_SEGMENT_ALLOC] > 10);
        assert_int_equal(calls[SUBLET_FAULT_VA_MAP], 0);
    }
    /* only policy:stitch maps a physical page a second time (stitch.c) */
    if (!stitch)
        assert_int_equal(calls[SUBLET_FAULT_VA_MAP_ALIAS], 0);
    else if (c->page_sizes)
        assert_true(calls[SUBLET_FAULT_VA_MAP_ALIAS] > (H_UNDER_TSAN ? 2u : 10u));

    int64_t runs = 0, ooms = 0, free_errors = 0, leftover = 0;
    for (int op = 0; op < SUBLET_FAULT_OP_COUNT; op++) {
        for (uint64_t n = 1; n <= calls[op] + 1; n++) {
            env_for(&e, c);
            sublet_fault_fail_nth(e.fault, (sublet_fault_op)op, n);
            workload(&e, c, &r, false);
            uint64_t injected = sublet_fault_injected(e.fault, (sublet_fault_op)op);
            if (injected != (n <= calls[op] ? 1u : 0u))
                fail_msg("%s: fail %s #%llu: %llu failures injected", c->name, OP_NAMES[op],
                         (unsigned long long)n, (unsigned long long)injected);
            if (n == calls[op] + 1) {
                /* no failure: the clean run again, to the byte */
                assert_int_equal(r.ooms, clean.ooms);
                assert_memory_equal(&r.end, &clean.end, sizeof r.end);
            }
            runs++;
            ooms += r.ooms;
            free_errors += r.free_errors;
            leftover += r.leftover_reservations;
            h_env_fini(&e);
        }
        if (calls[op] == 0)
            continue;
        for (uint64_t every = 1; every <= 3 && every <= calls[op]; every++) {
            env_for(&e, c);
            sublet_fault_fail_every(e.fault, (sublet_fault_op)op, every);
            workload(&e, c, &r, true);
            assert_true(r.injected[op] > 0);
            runs++;
            h_env_fini(&e);
        }
    }
    print_message("fault matrix %-26s %d steps: segment_alloc %3llu, event_create %3llu, "
                  "va_map %3llu, va_map_alias %3llu calls; %lld runs, %lld OOMs, %lld refused "
                  "frees, %lld never-mapped reservations left to destroy\n",
                  c->name, FM_STEPS, (unsigned long long)calls[0],
                  (unsigned long long)calls[1], (unsigned long long)calls[2],
                  (unsigned long long)calls[3], (long long)runs,
                  (long long)ooms, (long long)free_errors, (long long)leftover);
}

static void test_matrix_default(void **state)
{
    (void)state;
    run_config(&CONFIGS[0]);
}

static void test_matrix_max_split(void **state)
{
    (void)state;
    run_config(&CONFIGS[1]);
}

static void test_matrix_gc_fraction(void **state)
{
    (void)state;
    run_config(&CONFIGS[2]);
}

static void test_matrix_expandable(void **state)
{
    (void)state;
    run_config(&CONFIGS[3]);
}

static void test_matrix_stitch(void **state)
{
    (void)state;
    run_config(&CONFIGS[4]);
}

static void test_matrix_stitch_pages(void **state)
{
    (void)state;
    run_config(&CONFIGS[5]);
}

/* Pending (SUBLET_TEST_PENDING=1 runs it): with expandable segments, a
 * request no reservation can hold (more than 9/8 of the device) reserves a
 * new virtual range on each attempt (two per malloc: before and after the
 * release-and-retry), fails to map it, and leaves it behind: empty_cache
 * releases only reservations whose blocks were mapped and then unmapped
 * (release_blocks walks the free index; a never-mapped block is not in it).
 * PyTorch does the same (find_expandable_block + release_blocks), so each
 * such OOM costs 9/8 of the device in address space until the allocator is
 * destroyed.  Expected here: after empty_cache no reservation is left. */
static void test_unmapped_reservations_released(void **state)
{
    (void)state;
    if (!getenv("SUBLET_TEST_PENDING"))
        skip();
    h_env e;
    h_env_init(&e, H_SIM, 512 * MiB, "expandable_segments:True");
    for (int i = 0; i < 10; i++) {
        void *p = NULL;
        assert_int_equal(h_try_malloc(e.a, 2 * GiB, 0, &p), SUBLET_ERR_OOM);
    }
    h_empty_cache(e.a);
    sublet_sim_ops ops;
    sublet_sim_ops_read(e.inner, &ops);
    assert_int_equal(ops.va_reserves - ops.va_releases, 0); /* 20 today */
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_default),
        cmocka_unit_test(test_matrix_max_split),
        cmocka_unit_test(test_matrix_gc_fraction),
        cmocka_unit_test(test_matrix_expandable),
        cmocka_unit_test(test_matrix_stitch),
        cmocka_unit_test(test_matrix_stitch_pages),
        cmocka_unit_test(test_unmapped_reservations_released),
    };
    (void)NCONFIGS;
    if (getenv("SUBLET_TEST_FILTER"))
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
