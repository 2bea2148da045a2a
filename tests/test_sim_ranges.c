/* sublet — the sim backend's placement against a model of it: the sorted
 * array and linear first fit the sim had before its address space became a
 * tree (src/rtree.c).  Random segment allocs (with a hint of their own, the
 * one-shot next hint, or none), frees (neighbours freed so that gaps merge),
 * virtual reservations with coarse alignments, maps that use up capacity,
 * releases refused while mapped, and capacity changes: after every call the
 * sim's status and address must be the model's, as must its used bytes and
 * segment count.  Replays assert that addresses match PyTorch's 100 %, so
 * not one placement may differ. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sublet/backend.h"
#include "support/harness.h"

#define SIM_BASE UINT64_C(0x7f0000000000)
#define SEG_ALIGN (UINT64_C(2) << 20)

enum { SEG = 1, RES = 2 };

typedef struct mr {
    uint64_t addr, size;
    int kind;
    uint64_t mapped; /* RES: bytes mapped from its start (one map each) */
} mr;

typedef struct msim {
    mr *v;
    size_t n, cap;
    uint64_t capacity, seg_bytes, map_bytes, segments, next_hint;
} msim;

static uint64_t m_used(const msim *m) { return m->seg_bytes + m->map_bytes; }

static int m_overlaps(const msim *m, uint64_t a, uint64_t s)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].addr < a + s && a < m->v[i].addr + m->v[i].size)
            return 1;
    return 0;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    uint64_t r = (x + (a - 1)) & ~(a - 1);
    return r < x ? 0 : r;
}

/* The old place(): the hint when free, else first fit from SIM_BASE. */
static uint64_t m_place(const msim *m, uint64_t size, uint64_t hint, uint64_t align)
{
    if (hint != 0 && hint + size > hint && !m_overlaps(m, hint, size))
        return hint;
    uint64_t cand = align_up(SIM_BASE, align);
    size_t i = 0;
    while (i < m->n && m->v[i].addr + m->v[i].size <= cand)
        i++;
    for (; i < m->n; i++) {
        const mr *r = &m->v[i];
        if (cand + size < cand)
            return 0;
        if (cand + size <= r->addr)
            return cand;
        uint64_t end = r->addr + r->size;
        if (end > cand) {
            cand = align_up(end, align);
            if (cand == 0)
                return 0;
        }
    }
    if (cand + size < cand)
        return 0;
    return cand;
}

static void m_add(msim *m, uint64_t a, uint64_t s, int kind)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        assert_non_null(m->v);
    }
    size_t i = 0;
    while (i < m->n && m->v[i].addr < a)
        i++;
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i] = (mr){a, s, kind, 0};
    m->n++;
}

static mr *m_at(msim *m, uint64_t a)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].addr == a)
            return &m->v[i];
    return NULL;
}

static void m_drop(msim *m, mr *r)
{
    size_t i = (size_t)(r - m->v);
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
    m->n--;
}

static sublet_status m_segment_alloc(msim *m, uint64_t size, uint64_t hint, uint64_t *out)
{
    if (!hint)
        hint = m->next_hint;
    m->next_hint = 0;
    if (size > m->capacity || m_used(m) > m->capacity - size)
        return SUBLET_ERR_DEVICE_OOM;
    uint64_t a = m_place(m, size, hint, SEG_ALIGN);
    if (a == 0)
        return SUBLET_ERR_DEVICE_OOM;
    m_add(m, a, size, SEG);
    m->seg_bytes += size;
    m->segments++;
    *out = a;
    return SUBLET_OK;
}

static sublet_status m_segment_free(msim *m, uint64_t a, uint64_t size)
{
    mr *r = m_at(m, a);
    if (!r || r->kind != SEG || r->size != size)
        return SUBLET_ERR_INVALID_ARGUMENT;
    m_drop(m, r);
    m->seg_bytes -= size;
    m->segments--;
    return SUBLET_OK;
}

static sublet_status m_va_reserve(msim *m, uint64_t size, uint64_t align, uint64_t *out)
{
    if (align < SEG_ALIGN)
        align = SEG_ALIGN;
    uint64_t hint = m->next_hint;
    m->next_hint = 0;
    uint64_t a = m_place(m, size, hint, align);
    if (a == 0)
        return SUBLET_ERR_DEVICE_OOM;
    m_add(m, a, size, RES);
    *out = a;
    return SUBLET_OK;
}

static sublet_status m_va_release(msim *m, uint64_t a, uint64_t size)
{
    mr *r = m_at(m, a);
    if (!r || r->kind != RES || r->size != size)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (r->mapped)
        return SUBLET_ERR_BUSY;
    m_drop(m, r);
    return SUBLET_OK;
}

/* ---- driving both ---------------------------------------------------------------- */

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void same(const sublet_backend *b, const msim *m)
{
    assert_true(sublet_sim_used(b) == m_used(m));
    assert_true(sublet_sim_segments(b) == m->segments);
}

/* A hint near the live ranges: a recently freed start, a live one (taken),
 * one just past a range (a gap's start), or anywhere. */
static uint64_t pick_hint(const msim *m, uint64_t *s, const uint64_t *freed, size_t nfreed)
{
    uint64_t r = rng(s) % 10;
    if (r < 3 && nfreed)
        return freed[rng(s) % (nfreed < 64 ? nfreed : 64)];
    if (r < 5 && m->n)
        return m->v[rng(s) % m->n].addr;
    if (r < 7 && m->n) {
        const mr *x = &m->v[rng(s) % m->n];
        return x->addr + x->size;
    }
    if (r < 8)
        return SIM_BASE + (rng(s) % 4096) * SEG_ALIGN + (r & 1 ? 0 : 512);
    return 0;
}

static void run(uint64_t seed, int steps, uint64_t capacity)
{
    sublet_backend *b = NULL;
    assert_int_equal(sublet_sim_create(capacity, &b), SUBLET_OK);
    msim m = {.capacity = capacity};
    uint64_t s = seed, freed[64] = {0};
    size_t nfreed = 0;
    for (int step = 0; step < steps; step++) {
        int op = (int)(rng(&s) % 100);
        int grow = step % 2000 < 1200; /* phases of growth and of freeing */
        if (op < (grow ? 45 : 25)) { /* segment alloc */
            uint64_t size = (1 + rng(&s) % (rng(&s) % 4 == 0 ? 64 : 6)) * SEG_ALIGN;
            if (rng(&s) % 8 == 0)
                size += 512 * (1 + rng(&s) % 100); /* off the 2 MiB grid */
            uint64_t hint = 0;
            int how = (int)(rng(&s) % 3);
            uint64_t h = pick_hint(&m, &s, freed, nfreed);
            if (how == 1) {
                hint = h;
            } else if (how == 2) {
                sublet_sim_next_hint(b, h);
                m.next_hint = h;
            }
            uint64_t got = 0, want = 0;
            sublet_status st = b->ops->segment_alloc(b, size, hint, &got);
            assert_int_equal(st, m_segment_alloc(&m, size, hint, &want));
            if (st == SUBLET_OK)
                assert_true(got == want);
        } else if (op < (grow ? 70 : 75)) { /* segment free: neighbours too */
            if (!m.n)
                continue;
            size_t i = rng(&s) % m.n;
            for (int k = 0; k < 1 + (int)(rng(&s) % 3) && i < m.n; k++) {
                mr r = m.v[i];
                if (r.kind != SEG) {
                    i++;
                    continue;
                }
                uint64_t sz = rng(&s) % 16 == 0 ? r.size + SEG_ALIGN : r.size; /* wrong size */
                sublet_status st = b->ops->segment_free(b, r.addr, sz);
                assert_int_equal(st, m_segment_free(&m, r.addr, sz));
                if (st == SUBLET_OK)
                    freed[nfreed++ % 64] = r.addr;
                else
                    i++;
            }
        } else if (op < 80) { /* reserve, maybe at the one-shot hint */
            uint64_t size = (1 + rng(&s) % 32) * SEG_ALIGN;
            uint64_t align = (uint64_t)1 << (rng(&s) % 30 + 12); /* 4 KiB .. 2 TiB */
            if (rng(&s) % 2) {
                uint64_t h = pick_hint(&m, &s, freed, nfreed);
                sublet_sim_next_hint(b, h);
                m.next_hint = h;
            }
            uint64_t got = 0, want = 0;
            sublet_status st = b->ops->va_reserve(b, size, align, &got);
            assert_int_equal(st, m_va_reserve(&m, size, align, &want));
            if (st == SUBLET_OK)
                assert_true(got == want);
        } else if (op < 88) { /* map the start of a reservation, or unmap it */
            size_t k = m.n ? rng(&s) % m.n : 0;
            while (k < m.n && m.v[k].kind != RES)
                k++;
            if (k == m.n)
                continue;
            mr *r = &m.v[k];
            if (r->mapped) {
                assert_int_equal(b->ops->va_unmap(b, r->addr, r->mapped), SUBLET_OK);
                m.map_bytes -= r->mapped;
                r->mapped = 0;
            } else {
                uint64_t len = (1 + rng(&s) % (r->size / SEG_ALIGN)) * SEG_ALIGN;
                sublet_status want = len > m.capacity || m_used(&m) > m.capacity - len
                                         ? SUBLET_ERR_DEVICE_OOM
                                         : SUBLET_OK;
                assert_int_equal(b->ops->va_map(b, r->addr, len), want);
                if (want == SUBLET_OK) {
                    r->mapped = len;
                    m.map_bytes += len;
                }
            }
        } else if (op < 96) { /* release: refused while mapped */
            size_t k = m.n ? rng(&s) % m.n : 0;
            while (k < m.n && m.v[k].kind != RES)
                k++;
            if (k == m.n)
                continue;
            mr r = m.v[k];
            sublet_status st = b->ops->va_release(b, r.addr, r.size);
            assert_int_equal(st, m_va_release(&m, r.addr, r.size));
            if (st == SUBLET_OK)
                freed[nfreed++ % 64] = r.addr;
        } else { /* capacity changes, under and over what is used */
            uint64_t c = rng(&s) % 2 ? capacity : m_used(&m) + rng(&s) % (8 * SEG_ALIGN);
            sublet_sim_set_capacity(b, c);
            m.capacity = c;
        }
        same(b, &m);
    }
    /* the hint is one-shot: a set hint not used by an alloc is gone after it */
    sublet_sim_next_hint(b, SIM_BASE);
    uint64_t got = 0, want = 0;
    sublet_sim_set_capacity(b, capacity);
    m.capacity = capacity;
    sublet_status st = b->ops->segment_alloc(b, SEG_ALIGN, 0, &got);
    assert_int_equal(st, m_segment_alloc(&m, SEG_ALIGN, SIM_BASE, &want));
    if (st == SUBLET_OK)
        assert_true(got == want);
    assert_int_equal(b->ops->segment_alloc(b, SEG_ALIGN, 0, &got),
                     m_segment_alloc(&m, SEG_ALIGN, 0, &want));
    assert_true(got == want);
    same(b, &m);
    sublet_backend_destroy(b);
    free(m.v);
}

static void test_random_roomy(void **state)
{
    (void)state;
    run(11, H_UNDER_TSAN ? 3000 : 20000, UINT64_C(1) << 50); /* address space only */
}

static void test_random_tight(void **state)
{
    (void)state;
    run(12, H_UNDER_TSAN ? 3000 : 20000, UINT64_C(40) << 30); /* OOMs throughout */
}

/* Segments packed from SIM_BASE, every other one freed: each gap is one
 * segment wide, so a wider request goes past them all until neighbours are
 * freed and their gaps merge. */
static void test_gaps_merge(void **state)
{
    (void)state;
    sublet_backend *b = NULL;
    assert_int_equal(sublet_sim_create(UINT64_C(1) << 50, &b), SUBLET_OK);
    enum { N = 4000 };
    static uint64_t a[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(b->ops->segment_alloc(b, SEG_ALIGN, 0, &a[i]), SUBLET_OK);
        assert_true(a[i] == SIM_BASE + (uint64_t)i * SEG_ALIGN);
    }
    for (int i = 0; i < N; i += 2)
        assert_int_equal(b->ops->segment_free(b, a[i], SEG_ALIGN), SUBLET_OK);
    uint64_t x = 0;
    assert_int_equal(b->ops->segment_alloc(b, 2 * SEG_ALIGN, 0, &x), SUBLET_OK);
    assert_true(x == SIM_BASE + (uint64_t)N * SEG_ALIGN); /* no gap is wide enough */
    assert_int_equal(b->ops->segment_free(b, a[2001], SEG_ALIGN), SUBLET_OK);
    assert_int_equal(b->ops->segment_alloc(b, 3 * SEG_ALIGN, 0, &x), SUBLET_OK);
    assert_true(x == a[2000]); /* 2000..2002 merged */
    assert_int_equal(b->ops->segment_alloc(b, SEG_ALIGN, 0, &x), SUBLET_OK);
    assert_true(x == a[0]); /* lowest first */
    /* a[1] and a[2] free: a 4 MiB-aligned reservation starts at a[2], where
     * 2 MiB alignment would take a[1] */
    assert_int_equal(b->ops->segment_free(b, a[1], SEG_ALIGN), SUBLET_OK);
    assert_int_equal(b->ops->va_reserve(b, SEG_ALIGN, 2 * SEG_ALIGN, &x), SUBLET_OK);
    assert_true(x == a[2] && x % (2 * SEG_ALIGN) == 0);
    assert_int_equal(b->ops->segment_alloc(b, SEG_ALIGN, 0, &x), SUBLET_OK);
    assert_true(x == a[1]);
    sublet_backend_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_roomy),
        cmocka_unit_test(test_random_tight),
        cmocka_unit_test(test_gaps_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
