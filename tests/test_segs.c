/* sublet — the engine's set of segments (src/segs.c) against a model: a
 * plain list.  segs[] must always hold exactly the live segments, each at
 * its slot; sl_segment_find must answer as a scan of the model does whether
 * the index is current or far behind (long runs of changes with no lookup
 * in between, which the index catches up on later); sl_segs_sort must put
 * segs[] in address order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/segs.h"
#include "support/harness.h"

#define SEG (UINT64_C(2) << 20)

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

typedef struct world {
    sublet_allocator *a;
    sl_segment **live; /* the model */
    size_t n, cap;
} world;

static const sl_segment *model_find(const world *w, uint64_t addr)
{
    for (size_t i = 0; i < w->n; i++)
        if (addr >= w->live[i]->addr && addr - w->live[i]->addr < w->live[i]->size)
            return w->live[i];
    return NULL;
}

/* segs[] holds the model's segments, each at its slot. */
static void check_set(const world *w)
{
    const sublet_allocator *a = w->a;
    assert_int_equal(a->nsegs, w->n);
    for (size_t i = 0; i < a->nsegs; i++)
        assert_int_equal(a->segs[i]->slot, i);
    for (size_t i = 0; i < w->n; i++) {
        size_t k = w->live[i]->slot;
        assert_true(k < a->nsegs && a->segs[k] == w->live[i]);
    }
}

static int overlaps_live(const world *w, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->live[i]->addr < addr + size && addr < w->live[i]->addr + w->live[i]->size)
            return 1;
    return 0;
}

static void add(world *w, uint64_t addr, uint64_t size)
{
    assert_true(sl_segs_reserve(w->a));
    sl_segment *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->addr = addr;
    s->size = size;
    sl_segs_insert(w->a, s);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->live = realloc(w->live, w->cap * sizeof *w->live);
        assert_non_null(w->live);
    }
    w->live[w->n++] = s;
}

static void drop(world *w, size_t i)
{
    sl_segment *s = w->live[i];
    sl_segs_remove(w->a, s);
    free(s); /* the index must never look at a freed segment */
    w->live[i] = w->live[--w->n];
}

static void lookups(const world *w, uint64_t *s, uint64_t span)
{
    for (int q = 0; q < 8; q++) {
        uint64_t x = SEG * 64 + rng(s) % span;
        assert_ptr_equal(sl_segment_find(w->a, x), model_find(w, x));
    }
    if (w->n) {
        const sl_segment *g = w->live[rng(s) % w->n];
        assert_ptr_equal(sl_segment_find(w->a, g->addr), g);
        assert_ptr_equal(sl_segment_find(w->a, g->addr + g->size - 1), g);
        assert_ptr_equal(sl_segment_find(w->a, g->addr + g->size), model_find(w, g->addr + g->size));
    }
}

static void sorted(world *w)
{
    sl_segs_sort(w->a);
    check_set(w);
    for (size_t i = 1; i < w->a->nsegs; i++)
        assert_true(w->a->segs[i - 1]->addr < w->a->segs[i]->addr);
}

static void test_against_model(void **state)
{
    (void)state;
    world w = {.a = calloc(1, sizeof(sublet_allocator))};
    assert_non_null(w.a);
    uint64_t s = 42, span = SEG * 20000;
    int steps = H_UNDER_TSAN ? 4000 : 30000;
    for (int step = 0; step < steps; step++) {
        /* phases: runs of changes with no lookup (the log grows past its
         * bound), then changes and lookups interleaved */
        int quiet = (step / 3000) % 2 == 0;
        int grow = (step / 1500) % 3 != 2;
        if (rng(&s) % 100 < (grow ? 60u : 35u) || w.n == 0) {
            uint64_t addr = SEG * 64 + (rng(&s) % (span / SEG)) * SEG;
            uint64_t size = (1 + rng(&s) % 4) * SEG;
            if (!overlaps_live(&w, addr, size))
                add(&w, addr, size);
        } else {
            drop(&w, rng(&s) % w.n);
        }
        if (step % 97 == 0)
            check_set(&w);
        if (!quiet)
            lookups(&w, &s, span);
        if (step % 1000 == 999)
            sorted(&w);
        /* room to log the removal of every live segment, and a log that
         * never runs far past twice the segments */
        assert_true(w.a->seg_log_cap >= w.a->seg_log_n + w.n);
        assert_true(w.a->seg_log_n <= 3 * w.n + 3000);
    }
    check_set(&w);
    lookups(&w, &s, span);
    sorted(&w);
    while (w.n)
        drop(&w, rng(&s) % w.n);
    assert_null(sl_segment_find(w.a, SEG * 100));
    check_set(&w);
    sl_segs_fini(w.a);
    free(w.a);
    free(w.live);
}

/* Segments added in address order (a seeded prelude) leave segs[] sorted:
 * sl_segs_sort has nothing to do, and removing the last keeps it so. */
static void test_in_order_stays_sorted(void **state)
{
    (void)state;
    world w = {.a = calloc(1, sizeof(sublet_allocator))};
    assert_non_null(w.a);
    for (uint64_t i = 0; i < 3000; i++) {
        add(&w, SEG * (1 + 3 * i), SEG);
        assert_ptr_equal(sl_segment_find(w.a, SEG * (1 + 3 * i) + 5), w.live[w.n - 1]);
        assert_null(sl_segment_find(w.a, SEG * (2 + 3 * i)));
    }
    assert_false(w.a->segs_unsorted);
    drop(&w, w.n - 1);
    assert_false(w.a->segs_unsorted);
    drop(&w, 0); /* the last moves into slot 0 */
    assert_true(w.a->segs_unsorted);
    sorted(&w);
    assert_false(w.a->segs_unsorted);
    while (w.n)
        drop(&w, w.n - 1);
    sl_segs_fini(w.a);
    free(w.a);
    free(w.live);
}

/* A segment overlapping a live one (a misbehaving backend) stays in segs[]
 * and is seen by the sort, though the index leaves it out. */
static void test_overlap_sorted_by_scan(void **state)
{
    (void)state;
    world w = {.a = calloc(1, sizeof(sublet_allocator))};
    assert_non_null(w.a);
    add(&w, 10 * SEG, 4 * SEG);
    add(&w, 2 * SEG, SEG);
    add(&w, 11 * SEG, SEG); /* inside the first */
    sorted(&w);
    assert_true(w.a->segs[0]->addr == 2 * SEG && w.a->segs[1]->addr == 10 * SEG &&
                w.a->segs[2]->addr == 11 * SEG);
    assert_ptr_equal(sl_segment_find(w.a, 10 * SEG), w.live[0]);
    assert_ptr_equal(sl_segment_find(w.a, 2 * SEG), w.live[1]);
    while (w.n)
        drop(&w, 0);
    sl_segs_fini(w.a);
    free(w.a);
    free(w.live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_in_order_stays_sorted),
        cmocka_unit_test(test_overlap_sorted_by_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
