/* sublet — tests of the range B+tree (src/rtree.c) against a model: a sorted
 * array of ranges whose first fit is the linear scan the sim used before
 * the tree.  After every operation the tree's answer must equal the
 * model's, every invariant must hold (sl_rtree_verify) and the tree's
 * entries, walked in order, must be the model's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/rtree.h"
#include "support/harness.h"

#define BASE UINT64_C(0x7f0000000000)
#define ALIGN (UINT64_C(2) << 20)

/* ---- the model ------------------------------------------------------------------------ */

typedef struct mrange {
    uint64_t addr, size;
    uintptr_t tag;
} mrange;

typedef struct model {
    mrange *v;
    size_t n, cap;
    uint64_t floor, align;
} model;

static size_t m_lower(const model *m, uint64_t a) /* first index with addr >= a */
{
    size_t i = 0;
    while (i < m->n && m->v[i].addr < a)
        i++;
    return i;
}

static int m_overlaps(const model *m, uint64_t a, uint64_t s)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].addr < a + s && a < m->v[i].addr + m->v[i].size)
            return 1;
    return 0;
}

static sublet_status m_insert(model *m, uint64_t a, uint64_t s, uintptr_t tag)
{
    if (s == 0 || a + s < a || m_overlaps(m, a, s))
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        assert_non_null(m->v);
    }
    size_t i = m_lower(m, a);
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i] = (mrange){a, s, tag};
    m->n++;
    return SUBLET_OK;
}

static int m_remove(model *m, uint64_t a, uint64_t s, uintptr_t tag)
{
    size_t i = m_lower(m, a);
    if (i == m->n || m->v[i].addr != a || m->v[i].size != s || m->v[i].tag != tag)
        return 0;
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
    m->n--;
    return 1;
}

static const mrange *m_containing(const model *m, uint64_t a)
{
    for (size_t i = 0; i < m->n; i++)
        if (a >= m->v[i].addr && a - m->v[i].addr < m->v[i].size)
            return &m->v[i];
    return NULL;
}

static uint64_t m_align_up(uint64_t x, uint64_t a) /* 0 when it wraps */
{
    uint64_t r = (x + (a - 1)) & ~(a - 1);
    return r < x ? 0 : r;
}

/* The sim's first fit before the tree, word for word. */
static uint64_t m_first_fit(const model *m, uint64_t size, uint64_t align)
{
    if (align < m->align)
        align = m->align;
    uint64_t cand = m_align_up(m->floor, align);
    if (cand == 0)
        return 0;
    size_t i = 0;
    while (i < m->n && m->v[i].addr + m->v[i].size <= cand)
        i++;
    for (; i < m->n; i++) {
        const mrange *r = &m->v[i];
        if (cand + size < cand)
            return 0;
        if (cand + size <= r->addr)
            return cand;
        uint64_t end = r->addr + r->size;
        if (end > cand) {
            cand = m_align_up(end, align);
            if (cand == 0)
                return 0;
        }
    }
    if (cand + size < cand)
        return 0;
    return cand;
}

/* ---- comparing ----------------------------------------------------------------------- */

typedef struct walker {
    const model *m;
    size_t i;
} walker;

static void walk_one(void *user, const sl_rtree_entry *e)
{
    walker *w = user;
    assert_true(w->i < w->m->n);
    const mrange *r = &w->m->v[w->i++];
    assert_true(e->addr == r->addr && e->size == r->size && e->tag == r->tag);
}

static void same(const sl_rtree *t, const model *m)
{
    assert_int_equal(sl_rtree_verify(t), 0);
    assert_int_equal(sl_rtree_count(t), m->n);
    walker w = {m, 0};
    sl_rtree_walk(t, walk_one, &w);
    assert_int_equal(w.i, m->n);
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Every query at x answers as the model does. */
static void probe(const sl_rtree *t, const model *m, uint64_t x)
{
    const sl_rtree_entry *e = sl_rtree_find(t, x);
    size_t i = m_lower(m, x);
    int found = i < m->n && m->v[i].addr == x;
    assert_int_equal(e != NULL, found);
    if (e)
        assert_true(e->size == m->v[i].size && e->tag == m->v[i].tag);
    const sl_rtree_entry *c = sl_rtree_containing(t, x);
    const mrange *mc = m_containing(m, x);
    assert_int_equal(c != NULL, mc != NULL);
    if (c)
        assert_true(c->addr == mc->addr);
    const sl_rtree_entry *ce = sl_rtree_ceil(t, x);
    assert_int_equal(ce != NULL, i < m->n);
    if (ce)
        assert_true(ce->addr == m->v[i].addr);
}

static void fits(const sl_rtree *t, const model *m, uint64_t size)
{
    const uint64_t aligns[] = {0, 1, ALIGN, 2 * ALIGN, 8 * ALIGN, UINT64_C(1) << 36,
                               UINT64_C(1) << 45};
    for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++)
        assert_true(sl_rtree_first_fit(t, size, aligns[k]) == m_first_fit(m, size, aligns[k]));
}

/* ---- the tests ----------------------------------------------------------------------- */

/* Random inserts and removes (overlapping, duplicate, mismatched ones too)
 * over a narrow window, so leaves split, merge and empty; all queries and
 * first fits compared after each. */
static void run_random(uint64_t seed, int steps, uint64_t window, uint64_t grain, uint64_t floor)
{
    sl_rtree t;
    sl_rtree_init(&t, floor, ALIGN);
    model m = {.floor = floor, .align = ALIGN};
    uint64_t s = seed;
    for (int step = 0; step < steps; step++) {
        uint64_t r = rng(&s);
        int op = (int)(r % 100);
        /* the live count drifts up, then down: inserts win in the first half */
        int insert_pct = step < steps / 2 ? 60 : 35;
        if (op < insert_pct || m.n == 0) {
            uint64_t a = BASE - window / 4 + (rng(&s) % (window / grain)) * grain;
            uint64_t sz = (1 + rng(&s) % 6) * grain;
            uintptr_t tag = (uintptr_t)(rng(&s) % 3);
            sublet_status want = m_insert(&m, a, sz, tag);
            assert_int_equal(sl_rtree_insert(&t, a, sz, tag), want);
        } else if (op < 90) {
            const mrange *v = &m.v[rng(&s) % m.n];
            uint64_t a = v->addr, sz = v->size;
            uintptr_t tag = v->tag;
            if (op % 7 == 0)
                sz += grain; /* a mismatch: nothing removed */
            else if (op % 11 == 0)
                tag ^= 1;
            int want = m_remove(&m, a, sz, tag);
            assert_int_equal(sl_rtree_remove(&t, a, sz, tag), want);
        } else {
            uint64_t a = BASE - window / 4 + rng(&s) % window;
            assert_int_equal(sl_rtree_remove(&t, a, grain, 0), m_remove(&m, a, grain, 0));
        }
        same(&t, &m);
        for (int q = 0; q < 3; q++) {
            uint64_t x = BASE - window / 4 + rng(&s) % (window + window / 2);
            probe(&t, &m, x);
            assert_int_equal(sl_rtree_overlaps(&t, x, grain), m_overlaps(&m, x, grain));
        }
        if (m.n) {
            const mrange *v = &m.v[rng(&s) % m.n];
            probe(&t, &m, v->addr);
            probe(&t, &m, v->addr + v->size - 1);
            probe(&t, &m, v->addr + v->size);
        }
        fits(&t, &m, (1 + rng(&s) % 8) * grain);
        fits(&t, &m, 1);
    }
    /* and empty it again */
    while (m.n) {
        const mrange v = m.v[rng(&s) % m.n];
        assert_int_equal(sl_rtree_remove(&t, v.addr, v.size, v.tag), 1);
        m_remove(&m, v.addr, v.size, v.tag);
        if (m.n % 16 == 0)
            same(&t, &m);
    }
    same(&t, &m);
    fits(&t, &m, ALIGN);
    sl_rtree_fini(&t);
    free(m.v);
}

static void test_random_2mib(void **state)
{
    (void)state;
    int steps = H_UNDER_TSAN ? 1500 : 6000;
    run_random(1, steps, UINT64_C(4) << 30, ALIGN, BASE);
    run_random(2, steps, UINT64_C(64) << 30, ALIGN, BASE);
}

static void test_random_unaligned(void **state)
{
    (void)state;
    /* ranges that start and end off the 2 MiB grid: gaps rounded up */
    int steps = H_UNDER_TSAN ? 1500 : 6000;
    run_random(3, steps, UINT64_C(256) << 20, UINT64_C(768) << 10, BASE);
    run_random(4, steps, UINT64_C(1) << 30, 4096, BASE + 12345);
}

/* Thousands of ranges: a tree three and four levels deep, built in order
 * (the prelude), at random, and taken down from the top (a teardown). */
static void test_deep(void **state)
{
    (void)state;
    sl_rtree t;
    sl_rtree_init(&t, BASE, ALIGN);
    model m = {.floor = BASE, .align = ALIGN};
    const size_t n = H_UNDER_TSAN ? 3000 : 20000;
    for (size_t i = 0; i < n; i++) { /* ascending, every third slot left free */
        uint64_t a = BASE + (uint64_t)i * 3 * ALIGN;
        assert_int_equal(sl_rtree_insert(&t, a, 2 * ALIGN, i), SUBLET_OK);
        m_insert(&m, a, 2 * ALIGN, i);
    }
    same(&t, &m);
    fits(&t, &m, ALIGN);     /* the first hole */
    fits(&t, &m, 2 * ALIGN); /* after the last */
    uint64_t s = 99;
    for (size_t k = 0; k < n / 2; k++) { /* holes at random */
        const mrange v = m.v[rng(&s) % m.n];
        assert_int_equal(sl_rtree_remove(&t, v.addr, v.size, v.tag), 1);
        m_remove(&m, v.addr, v.size, v.tag);
        if (k % 512 == 0) {
            same(&t, &m);
            fits(&t, &m, 3 * ALIGN);
            fits(&t, &m, 5 * ALIGN);
        }
    }
    same(&t, &m);
    for (int k = 0; k < 200; k++) { /* first fits fill holes in order */
        uint64_t sz = (1 + rng(&s) % 4) * ALIGN;
        uint64_t a = sl_rtree_first_fit(&t, sz, ALIGN);
        assert_true(a == m_first_fit(&m, sz, ALIGN));
        assert_int_equal(sl_rtree_insert(&t, a, sz, 7), SUBLET_OK);
        m_insert(&m, a, sz, 7);
    }
    same(&t, &m);
    while (m.n) { /* from the top */
        const mrange v = m.v[m.n - 1];
        assert_int_equal(sl_rtree_remove(&t, v.addr, v.size, v.tag), 1);
        m_remove(&m, v.addr, v.size, v.tag);
        if (m.n % 1000 == 0)
            same(&t, &m);
    }
    same(&t, &m);
    sl_rtree_fini(&t);
    free(m.v);
}

/* Ranges below and across the floor, and at the top of the address space. */
static void test_floor_and_top(void **state)
{
    (void)state;
    sl_rtree t;
    sl_rtree_init(&t, BASE, ALIGN);
    model m = {.floor = BASE, .align = ALIGN};
    assert_true(sl_rtree_first_fit(&t, ALIGN, ALIGN) == BASE); /* empty */
    /* below the floor: ignored by first fit */
    assert_int_equal(sl_rtree_insert(&t, 4096, ALIGN, 1), SUBLET_OK);
    m_insert(&m, 4096, ALIGN, 1);
    fits(&t, &m, ALIGN);
    /* across the floor: first fit starts after it, rounded up */
    assert_int_equal(sl_rtree_insert(&t, BASE - ALIGN, 2 * ALIGN + 1, 1), SUBLET_OK);
    m_insert(&m, BASE - ALIGN, 2 * ALIGN + 1, 1);
    same(&t, &m);
    fits(&t, &m, ALIGN);
    assert_true(sl_rtree_first_fit(&t, ALIGN, ALIGN) == BASE + 2 * ALIGN);
    /* a range at the very top: fits past it wrap, so none */
    uint64_t top = UINT64_MAX - 3 * ALIGN + 1;
    assert_int_equal(sl_rtree_insert(&t, top, 3 * ALIGN - 1, 2), SUBLET_OK);
    m_insert(&m, top, 3 * ALIGN - 1, 2);
    same(&t, &m);
    fits(&t, &m, ALIGN);
    fits(&t, &m, UINT64_C(1) << 62); /* only below the top range */
    fits(&t, &m, UINT64_MAX - BASE); /* nowhere */
    /* wrapping and empty ranges are refused, and so is an overlap */
    assert_int_equal(sl_rtree_insert(&t, UINT64_MAX, 2, 0), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sl_rtree_insert(&t, BASE + 10 * ALIGN, 0, 0), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sl_rtree_insert(&t, BASE, ALIGN, 0), SUBLET_ERR_INVALID_ARGUMENT);
    probe(&t, &m, UINT64_MAX);
    probe(&t, &m, 0);
    probe(&t, &m, BASE + ALIGN);
    assert_int_equal(sl_rtree_overlaps(&t, UINT64_MAX - 1, 1), 1);
    same(&t, &m);
    sl_rtree_fini(&t);
    free(m.v);
}

/* A zeroed tree keeps no gaps: lookups work, first fit answers 0. */
static void test_zeroed_lookups_only(void **state)
{
    (void)state;
    sl_rtree t;
    memset(&t, 0, sizeof t);
    model m = {.floor = 0, .align = 1};
    uint64_t s = 5;
    for (int i = 0; i < 3000; i++) {
        uint64_t a = (rng(&s) % 100000) * 4096, sz = (1 + rng(&s) % 8) * 4096;
        assert_int_equal(sl_rtree_insert(&t, a, sz, (uintptr_t)i), m_insert(&m, a, sz, (uintptr_t)i));
        if (i % 3 == 0 && m.n) {
            const mrange v = m.v[rng(&s) % m.n];
            assert_int_equal(sl_rtree_remove(&t, v.addr, v.size, v.tag), 1);
            m_remove(&m, v.addr, v.size, v.tag);
        }
        if (i % 64 == 0) {
            same(&t, &m);
            for (int q = 0; q < 16; q++)
                probe(&t, &m, (rng(&s) % 110000) * 4096 + rng(&s) % 4096);
        }
    }
    same(&t, &m);
    assert_true(sl_rtree_first_fit(&t, 4096, 4096) == 0);
    assert_int_equal(sl_rtree_reserve(&t), 1);
    sl_rtree_fini(&t);
    assert_int_equal(sl_rtree_count(&t), 0);
    assert_int_equal(sl_rtree_verify(&t), 0);
    free(m.v);
}

/* After sl_rtree_reserve, an insert takes no new slab, even one that splits
 * a leaf and every level above it. */
static void test_reserve_covers_a_split(void **state)
{
    (void)state;
    sl_rtree t;
    sl_rtree_init(&t, BASE, ALIGN);
    for (uint64_t i = 0; i < 5000; i++) {
        assert_int_equal(sl_rtree_reserve(&t), 1);
        void *slabs = t.slabs;
        assert_int_equal(sl_rtree_insert(&t, BASE + i * ALIGN, ALIGN, 0), SUBLET_OK);
        assert_ptr_equal(t.slabs, slabs);
    }
    assert_int_equal(sl_rtree_verify(&t), 0);
    sl_rtree_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_2mib),
        cmocka_unit_test(test_random_unaligned),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_floor_and_top),
        cmocka_unit_test(test_zeroed_lookups_only),
        cmocka_unit_test(test_reserve_covers_a_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
