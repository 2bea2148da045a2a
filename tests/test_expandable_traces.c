/* sublet — "the expandable mode's decisions, on every trace in
 * ../shared/traces/pytorch_snapshot, follow §6 step by step".
 *
 * Every shared trace and every trace of tests/data is replayed under
 * expandable_segments:True with sublet_check() after every event, while a
 * checker built from docs/rules.md §6's text watches from outside: the engine's
 * trace events (forwarded by the replay's `trace` observer) and a segment
 * walk (sublet_segments_walk) before each decision.  The checker is an
 * oracle of the spec's rules, not a second allocator: it keeps no blocks of
 * its own, only the virtual reservations it has seen created (the first map
 * of a (stream, pool) is at its reservation's start, §6.3, and a reservation
 * is 9/8 of the device rounded up to whole pages, §6.2), and derives each
 * expectation from the walk.  For each alloc:
 *   - §2.4 + §6.4: best fit among the free mapped blocks of that pool and
 *     stream, then the walk forward while the next candidate's expandable
 *     size (own size + the unmapped block after it) is smaller, then the
 *     oversize rules of §2.5.  A block found: no map, the alloc at its
 *     address;
 *   - §6.3: otherwise find_expandable_block: the unmapped blocks of that
 *     pool and stream in address order, each started from its free mapped
 *     predecessor when there is one, the first start from which consecutive
 *     allocatable blocks hold the request; then map_block on each unmapped
 *     block of the run, in whole pages (2 MiB small pool, large_segment_size
 *     large), the page-rounded shortfall, merging with the free neighbours.
 *     Expected: those very segment_map events (address, size) and the alloc
 *     at the start of the run; none found: one map at the start of a new
 *     reservation outside every known one;
 *   - §2.6: the block handed out is split iff at least 512 bytes remain.
 * After every event: num_device_alloc and num_device_free moved by the maps
 * and unmaps emitted (§6.5), reserved bytes by their sizes, the segment
 * count not at all (§6.3), and inactive_split counts no expandable block
 * (§6.5).  For each empty_cache the replay drives: after the pending frees
 * complete, exactly one segment_unmap per free block of an expandable
 * segment that spans a whole page, of exactly its whole pages (§6.6), and
 * nothing else; a reservation left without mapped pages is released (§3.5),
 * so the checker forgets it (test_replay_expandable.c counts the
 * va_release).  The checker reports per trace how many decisions it
 * checked.
 *
 * Under ASan and TSan the large traces are checked on a prefix. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sublet/replay.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"
#include "support/harness.h"
#include "test_data.h"

#define SMALL_PAGE (UINT64_C(2) << 20)
#define MIN_BLOCK UINT64_C(512)
#define DEVICE_MEMORY (UINT64_C(80) << 30)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#define SANITIZED_PREFIX 2500 /* recorded events checked per trace under a sanitizer */

/* ---- what the walk shows ------------------------------------------------------------ */

typedef struct mblk {
    uint64_t addr, size;
    int state; /* sublet_block_state */
} mblk;

typedef struct mrun { /* one segment view: a whole segment, or a mapped run */
    uint64_t addr, end;
    sublet_stream stream;
    int small, exp;
    size_t b0, nb;
} mrun;

typedef struct model {
    mrun *r;
    size_t nr, rcap;
    mblk *b;
    size_t nb, bcap;
} model;

typedef struct resv { /* a virtual reservation seen created */
    uint64_t lo, hi;
    sublet_stream stream;
    int small;
} resv;

typedef struct item { /* one block of a reservation, mapped or not */
    uint64_t addr, size;
    int mapped, allocatable;
} item;

typedef struct tev { /* an engine trace event */
    sublet_action act;
    uint64_t addr, size;
} tev;

typedef struct expect {
    /* EX_NONE, EX_CACHE (a free block), EX_MAP (a known run), EX_NEW (a new reservation) */
    int kind;
    uint64_t addr;   /* the alloc's address (EX_CACHE, EX_MAP) */
    uint64_t block;  /* the block handed out */
    uint64_t rounded;
    int small;
    sublet_stream stream;
    tev maps[64];
    size_t nmaps;
} expect;
enum { EX_NONE = 0, EX_CACHE, EX_MAP, EX_NEW };

typedef struct checker {
    const sublet_trace *t;
    sublet_settings set;
    model m;
    int dirty; /* the model no longer shows the allocator */
    resv *rv;
    size_t nrv, rvcap;
    tev *ev;
    size_t nev, evcap;
    sublet_stats before;
    expect ex;
    tev *rel_expect; /* the releases an empty_cache must make */
    size_t nrel, relcap;
    int release; /* this row drives an empty_cache */
    char fail[1024];
    /* what was checked */
    uint64_t allocs, from_cache, by_map, new_resv, maps, releases, unmaps, events, skipped, zero;
} checker;

static void ck_fail(checker *c, uint64_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ck_fail(checker *c, uint64_t i, const char *fmt, ...)
{
    if (c->fail[0])
        return;
    const sublet_trace_event *e = sublet_trace_at(c->t, (size_t)i);
    int n = snprintf(c->fail, sizeof c->fail, "event %llu (line %llu, %s of %llu at %llu): ",
                     (unsigned long long)i, (unsigned long long)(e ? e->line : 0),
                     e ? sublet_trace_kind_name(e->kind) : "?",
                     (unsigned long long)(e ? e->size : 0), (unsigned long long)(e ? e->addr : 0));
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof c->fail)
        vsnprintf(c->fail + n, sizeof c->fail - (size_t)n, fmt, ap);
    va_end(ap);
}

#define GROW(ptr, n, cap)                                                        \
    do {                                                                         \
        if ((n) == (cap)) {                                                      \
            (cap) = (cap) ? (cap) * 2 : 64;                                      \
            void *grown = realloc((ptr), (cap) * sizeof *(ptr));                 \
            assert_non_null(grown);                                              \
            (ptr) = grown;                                                       \
        }                                                                        \
    } while (0)

static void on_segment(void *user, const sublet_segment_view *sv)
{
    model *m = user;
    GROW(m->r, m->nr, m->rcap);
    m->r[m->nr++] = (mrun){sv->addr, sv->addr + sv->total_size, sv->stream, sv->is_small,
                           sv->is_expandable, m->nb, sv->nblocks};
    for (size_t k = 0; k < sv->nblocks; k++) {
        GROW(m->b, m->nb, m->bcap);
        m->b[m->nb++] = (mblk){sv->blocks[k].addr, sv->blocks[k].size, (int)sv->blocks[k].state};
    }
}

static void refresh(checker *c, sublet_allocator *a)
{
    if (!c->dirty)
        return;
    c->m.nr = c->m.nb = 0;
    sublet_segments_walk(a, on_segment, &c->m);
    c->dirty = 0;
}

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    (void)stream;
    checker *c = user;
    GROW(c->ev, c->nev, c->evcap);
    c->ev[c->nev++] = (tev){act, addr, size};
    c->dirty = 1;
}

static uint64_t page_of(const checker *c, int small)
{
    return small ? SMALL_PAGE : c->set.large_segment_size;
}

/* §6.2: max_handles = ceil((total + total/8) / page) pages. */
static uint64_t reservation_size(const checker *c, int small)
{
    uint64_t page = page_of(c, small), want = DEVICE_MEMORY + DEVICE_MEMORY / 8;
    return (want + page - 1) / page * page;
}

static const resv *resv_of(const checker *c, uint64_t addr)
{
    for (size_t k = 0; k < c->nrv; k++)
        if (addr >= c->rv[k].lo && addr < c->rv[k].hi)
            return &c->rv[k];
    return NULL;
}

static int cmp_resv(const void *a, const void *b)
{
    const resv *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The blocks of every reservation of (stream, pool), unmapped gaps
 * included, in address order; *bounds[k] = first item of reservation k. */
static size_t pool_items(const checker *c, sublet_stream stream, int small, item **out,
                         size_t **res_end)
{
    size_t n = 0, cap = 0, nres = 0;
    item *v = NULL;
    size_t *ends = malloc((c->nrv + 1) * sizeof *ends);
    assert_non_null(ends);
    for (size_t k = 0; k < c->nrv; k++) {
        const resv *r = &c->rv[k];
        if (r->stream != stream || r->small != small)
            continue;
        uint64_t cur = r->lo;
        for (size_t j = 0; j < c->m.nr; j++) {
            const mrun *u = &c->m.r[j];
            if (!u->exp || u->addr < r->lo || u->addr >= r->hi)
                continue;
            if (u->addr > cur) {
                GROW(v, n, cap);
                v[n++] = (item){cur, u->addr - cur, 0, 1};
            }
            for (size_t b = u->b0; b < u->b0 + u->nb; b++) {
                GROW(v, n, cap);
                v[n++] = (item){c->m.b[b].addr, c->m.b[b].size, 1,
                                c->m.b[b].state == SUBLET_BLOCK_INACTIVE};
            }
            cur = u->end;
        }
        if (cur < r->hi) {
            GROW(v, n, cap);
            v[n++] = (item){cur, r->hi - cur, 0, 1};
        }
        ends[nres++] = n;
    }
    *out = v;
    *res_end = ends;
    return nres;
}

/* §6.4: own size + the unmapped block that follows it in its reservation. */
static uint64_t expandable_size(const checker *c, const mrun *u, const mblk *b)
{
    if (!u->exp || b != &c->m.b[u->b0 + u->nb - 1])
        return b->size;
    const resv *r = resv_of(c, u->addr);
    if (!r || u->end >= r->hi)
        return b->size;
    uint64_t next = r->hi;
    for (size_t j = 0; j < c->m.nr; j++)
        if (c->m.r[j].addr >= u->end && c->m.r[j].addr < next && c->m.r[j].addr < r->hi)
            next = c->m.r[j].addr;
    return b->size + (next - u->end);
}

typedef struct cand {
    const mrun *u;
    const mblk *b;
} cand;

static int cmp_cand(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    if (a->b->size != b->b->size)
        return a->b->size < b->b->size ? -1 : 1;
    return a->b->addr < b->b->addr ? -1 : a->b->addr > b->b->addr;
}

/* §2.4–2.5 and §6.4: the cached block for s, or NULL. */
static const mblk *best_fit(const checker *c, sublet_stream stream, int small, uint64_t s)
{
    cand *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t j = 0; j < c->m.nr; j++) {
        const mrun *u = &c->m.r[j];
        if (u->stream != stream || u->small != small)
            continue;
        for (size_t b = u->b0; b < u->b0 + u->nb; b++)
            if (c->m.b[b].state == SUBLET_BLOCK_INACTIVE) {
                GROW(v, n, cap);
                v[n++] = (cand){u, &c->m.b[b]};
            }
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_cand);
    size_t it = 0;
    while (it < n && v[it].b->size < s)
        it++;
    const mblk *pick = NULL;
    if (it < n) {
        while (v[it].u->exp && it + 1 < n &&
               expandable_size(c, v[it + 1].u, v[it + 1].b) < expandable_size(c, v[it].u, v[it].b))
            it++;
        pick = v[it].b;
        uint64_t ms = c->set.max_split_size;
        if ((s < ms && pick->size >= ms) ||
            (s >= ms && pick->size >= s + c->set.max_non_split_rounding))
            pick = NULL;
    }
    free(v);
    return pick;
}

static uint64_t split_block(uint64_t have, uint64_t s)
{
    return have - s >= MIN_BLOCK ? s : have;
}

/* What the alloc of `size` on `stream` must do, from the walk. */
static void expect_alloc(checker *c, uint64_t size, sublet_stream stream)
{
    expect *x = &c->ex;
    memset(x, 0, sizeof *x);
    uint64_t s = sublet_round_size(&c->set, size);
    x->rounded = s;
    x->stream = stream;
    x->small = s <= MiB; /* §1.4 */
    const mblk *b = best_fit(c, stream, x->small, s);
    if (b) {
        x->kind = EX_CACHE;
        x->addr = b->addr;
        x->block = split_block(b->size, s);
        return;
    }
    uint64_t page = page_of(c, x->small);
    item *v;
    size_t *ends;
    size_t nres = pool_items(c, stream, x->small, &v, &ends);
    size_t lo = 0;
    for (size_t r = 0; r < nres && x->kind == EX_NONE; lo = ends[r++]) {
        for (size_t k = lo; k < ends[r] && x->kind == EX_NONE; k++) {
            if (v[k].mapped)
                continue;
            size_t start = (k > lo && v[k - 1].mapped && v[k - 1].allocatable) ? k - 1 : k;
            uint64_t bytes = 0;
            for (size_t j = start; j < ends[r] && bytes < s && v[j].allocatable; j++)
                bytes += v[j].size;
            if (bytes < s)
                continue;
            /* map_block on each unmapped block of the run, merging */
            uint64_t got = 0;
            size_t j = start;
            if (v[j].mapped)
                got += v[j++].size;
            while (got < s) {
                assert_false(v[j].mapped); /* free -> unmapped -> ... */
                uint64_t want = s - got < v[j].size ? s - got : v[j].size;
                uint64_t m = (want + page - 1) / page * page;
                if (m > v[j].size)
                    m = v[j].size;
                assert_true(x->nmaps < sizeof x->maps / sizeof *x->maps);
                x->maps[x->nmaps++] = (tev){SUBLET_ACT_SEGMENT_MAP, v[j].addr, m};
                got += m;
                if (m < v[j].size)
                    break;
                j++;
                if (j < ends[r] && v[j].mapped && v[j].allocatable)
                    got += v[j++].size; /* merged with the free block after it */
            }
            x->kind = EX_MAP;
            x->addr = v[start].addr;
            x->block = split_block(got, s);
        }
    }
    free(v);
    free(ends);
    if (x->kind == EX_NONE) { /* a new reservation, mapped from its start */
        uint64_t cap = reservation_size(c, x->small);
        uint64_t m = (s + page - 1) / page * page;
        x->kind = EX_NEW;
        x->maps[0] = (tev){SUBLET_ACT_SEGMENT_MAP, 0, m < cap ? m : cap};
        x->nmaps = 1;
        x->block = split_block(x->maps[0].size, s);
    }
}

static int is_release(uint32_t k)
{
    return k == SUBLET_ACT_SEGMENT_FREE || k == SUBLET_ACT_SEGMENT_UNMAP;
}

static int cmp_tev(const void *x, const void *y)
{
    const tev *a = x, *b = y;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    if (a->act != b->act)
        return a->act < b->act ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

/* §3.5 + §6.6: what empty_cache must release, once every pending free has
 * completed (synchronize_and_free_events) and merged with its neighbours. */
static void expect_release(checker *c, uint64_t i)
{
    c->nrel = 0;
    for (size_t j = 0; j < c->m.nr; j++) {
        const mrun *u = &c->m.r[j];
        const resv *r = u->exp ? resv_of(c, u->addr) : NULL;
        if (u->exp && !r) {
            ck_fail(c, i, "mapped run 0x%llx lies in no reservation seen created",
                    (unsigned long long)u->addr);
            return;
        }
        uint64_t page = page_of(c, u->small);
        for (size_t b = u->b0; b < u->b0 + u->nb;) {
            if (c->m.b[b].state == SUBLET_BLOCK_ACTIVE_ALLOCATED) {
                b++;
                continue;
            }
            uint64_t lo = c->m.b[b].addr, hi = lo;
            for (; b < u->b0 + u->nb && c->m.b[b].state != SUBLET_BLOCK_ACTIVE_ALLOCATED; b++)
                hi = c->m.b[b].addr + c->m.b[b].size; /* free blocks merged */
            if (!u->exp) {
                if (lo == u->addr && hi == u->end) { /* a whole free segment */
                    GROW(c->rel_expect, c->nrel, c->relcap);
                    c->rel_expect[c->nrel++] = (tev){SUBLET_ACT_SEGMENT_FREE, lo, hi - lo};
                }
                continue;
            }
            uint64_t begin = r->lo + (lo - r->lo + page - 1) / page * page;
            uint64_t end = r->lo + (hi - r->lo) / page * page;
            if (begin < end) {
                GROW(c->rel_expect, c->nrel, c->relcap);
                c->rel_expect[c->nrel++] = (tev){SUBLET_ACT_SEGMENT_UNMAP, begin, end - begin};
            }
        }
    }
}

/* ---- the observer ------------------------------------------------------------------- */

static void before_event(void *user, sublet_allocator *a, uint64_t i, const sublet_trace_event *e)
{
    checker *c = user;
    c->ex.kind = EX_NONE;
    c->release = 0;
    int alloc = e->kind == SUBLET_ACT_ALLOC || e->kind == SUBLET_TRACE_PRE_ALLOC;
    if (alloc) {
        /* malloc's first step (§3.2 step 1), taken here so that the walk
         * shows what the search will see */
        assert_int_equal(sublet_process_events(a), SUBLET_OK);
    }
    c->nev = 0;
    sublet_stats_read(a, &c->before);
    if (c->fail[0])
        return;
    if (alloc && !e->size && e->kind == SUBLET_ACT_ALLOC) {
        c->zero++; /* malloc(0): nothing happens (§3.1) */
    } else if (alloc) {
        refresh(c, a);
        expect_alloc(c, e->kind == SUBLET_TRACE_PRE_ALLOC && !e->size ? 1 : e->size, e->stream);
    } else if (is_release(e->kind) &&
               !(i > 0 && is_release(sublet_trace_at(c->t, (size_t)i - 1)->kind))) {
        refresh(c, a); /* the replay drives one empty_cache for the run */
        c->release = 1;
        expect_release(c, i);
    }
}

static void check_alloc(checker *c, sublet_allocator *a, uint64_t i)
{
    const expect *x = &c->ex;
    const tev *alloc = NULL;
    size_t nmaps = 0, nrel = 0;
    for (size_t k = 0; k < c->nev; k++) {
        if (c->ev[k].act == SUBLET_ACT_ALLOC)
            alloc = &c->ev[k];
        nmaps += c->ev[k].act == SUBLET_ACT_SEGMENT_MAP;
        nrel += is_release(c->ev[k].act) || c->ev[k].act == SUBLET_ACT_SEGMENT_ALLOC;
    }
    if (nrel || !alloc) { /* the OOM path released memory, or an OOM: not a §6 step */
        c->skipped++;
        return;
    }
    c->allocs++;
    if (nmaps != x->nmaps) {
        ck_fail(c, i, "%zu segment_map event(s), §6 expects %zu (%s)", nmaps, x->nmaps,
                x->kind == EX_CACHE ? "a free block of the pool and stream is large enough"
                                    : "no free mapped block is large enough");
        return;
    }
    size_t m = 0;
    uint64_t addr = x->addr;
    for (size_t k = 0; k < c->nev; k++) {
        if (c->ev[k].act != SUBLET_ACT_SEGMENT_MAP)
            continue;
        if (x->kind == EX_NEW)
            addr = c->ev[k].addr; /* the new reservation's start: the alloc's address */
        const tev *want = &x->maps[m++];
        if (c->ev[k].size != want->size || (x->kind != EX_NEW && c->ev[k].addr != want->addr)) {
            ck_fail(c, i, "map %zu: %llu bytes at 0x%llx, §6.3 expects %llu bytes at 0x%llx", m,
                    (unsigned long long)c->ev[k].size, (unsigned long long)c->ev[k].addr,
                    (unsigned long long)want->size, (unsigned long long)want->addr);
            return;
        }
        if (x->kind == EX_NEW) {
            for (size_t r = 0; r < c->nrv; r++)
                if (c->ev[k].addr < c->rv[r].hi && c->rv[r].lo < c->ev[k].addr + c->ev[k].size) {
                    ck_fail(c, i, "a new reservation's first map at 0x%llx lies in a known one",
                            (unsigned long long)c->ev[k].addr);
                    return;
                }
            GROW(c->rv, c->nrv, c->rvcap);
            c->rv[c->nrv++] = (resv){c->ev[k].addr, c->ev[k].addr + reservation_size(c, x->small),
                                     x->stream, x->small};
            qsort(c->rv, c->nrv, sizeof *c->rv, cmp_resv);
            c->new_resv++;
        }
    }
    c->maps += nmaps;
    if (alloc->addr != addr) {
        ck_fail(c, i, "alloc at 0x%llx, §6 expects 0x%llx (%s)", (unsigned long long)alloc->addr,
                (unsigned long long)addr,
                x->kind == EX_CACHE ? "best fit, §6.4" : "the start of the run mapped, §6.3");
        return;
    }
    uint64_t base = 0, bsize = 0, req = 0;
    assert_int_equal(sublet_block_info(a, (void *)(uintptr_t)alloc->addr, &base, &bsize, &req),
                     SUBLET_OK);
    if (base != alloc->addr || bsize != x->block) {
        ck_fail(c, i, "block of %llu bytes for a %llu-byte request, §2.6 (split iff >= 512 "
                "bytes remain) gives %llu", (unsigned long long)bsize,
                (unsigned long long)x->rounded, (unsigned long long)x->block);
        return;
    }
    if (x->kind == EX_CACHE)
        c->from_cache++;
    else
        c->by_map++;
}

static void check_release(checker *c, uint64_t i)
{
    tev *got = NULL;
    size_t n = 0, cap = 0;
    for (size_t k = 0; k < c->nev; k++)
        if (is_release(c->ev[k].act)) {
            GROW(got, n, cap);
            got[n++] = c->ev[k];
        }
    if (n)
        qsort(got, n, sizeof *got, cmp_tev);
    if (c->nrel)
        qsort(c->rel_expect, c->nrel, sizeof *c->rel_expect, cmp_tev);
    size_t k = 0;
    while (k < n && k < c->nrel && cmp_tev(&got[k], &c->rel_expect[k]) == 0)
        k++;
    if (k < n || k < c->nrel) {
        if (k < c->nrel)
            ck_fail(c, i, "empty_cache released %zu range(s), §6.6 expects %zu; first missing or "
                    "different: %s of %llu bytes at 0x%llx", n, c->nrel,
                    sublet_action_name(c->rel_expect[k].act),
                    (unsigned long long)c->rel_expect[k].size,
                    (unsigned long long)c->rel_expect[k].addr);
        else
            ck_fail(c, i, "empty_cache released %zu range(s), §6.6 expects %zu; extra: %s of "
                    "%llu bytes at 0x%llx", n, c->nrel, sublet_action_name(got[k].act),
                    (unsigned long long)got[k].size, (unsigned long long)got[k].addr);
    } else {
        c->releases++;
        for (size_t j = 0; j < n; j++)
            c->unmaps += got[j].act == SUBLET_ACT_SEGMENT_UNMAP;
    }
    free(got);
}

static void after_event(void *user, sublet_allocator *a, uint64_t i, const sublet_trace_event *e)
{
    (void)e;
    checker *c = user;
    c->events++;
    if (c->fail[0])
        return;
    sublet_stats st;
    sublet_stats_read(a, &st);
    int64_t maps = 0, unmaps = 0, segs = 0, frees = 0, up = 0, down = 0;
    for (size_t k = 0; k < c->nev; k++) {
        const tev *v = &c->ev[k];
        maps += v->act == SUBLET_ACT_SEGMENT_MAP;
        unmaps += v->act == SUBLET_ACT_SEGMENT_UNMAP;
        segs += v->act == SUBLET_ACT_SEGMENT_ALLOC;
        frees += v->act == SUBLET_ACT_SEGMENT_FREE;
        if (v->act == SUBLET_ACT_SEGMENT_MAP || v->act == SUBLET_ACT_SEGMENT_ALLOC)
            up += (int64_t)v->size;
        if (v->act == SUBLET_ACT_SEGMENT_UNMAP || v->act == SUBLET_ACT_SEGMENT_FREE)
            down += (int64_t)v->size;
    }
    /* §6.5: device calls count maps and unmaps; §6.3: no segment counter
     * moves on a map */
    if (st.num_device_alloc - c->before.num_device_alloc != maps + segs ||
        st.num_device_free - c->before.num_device_free != unmaps + frees)
        ck_fail(c, i, "num_device_alloc/free moved by %lld/%lld for %lld maps + %lld segments / "
                "%lld unmaps + %lld segment frees",
                (long long)(st.num_device_alloc - c->before.num_device_alloc),
                (long long)(st.num_device_free - c->before.num_device_free), (long long)maps,
                (long long)segs, (long long)unmaps, (long long)frees);
    if (st.segment[SUBLET_POOL_ALL].current - c->before.segment[SUBLET_POOL_ALL].current !=
            segs - frees ||
        st.oversize_segments.current - c->before.oversize_segments.current > segs)
        ck_fail(c, i, "the segment count moved by %lld with %lld segment allocs and %lld frees",
                (long long)(st.segment[SUBLET_POOL_ALL].current -
                            c->before.segment[SUBLET_POOL_ALL].current),
                (long long)segs, (long long)frees);
    if (st.reserved_bytes[SUBLET_POOL_ALL].current -
            c->before.reserved_bytes[SUBLET_POOL_ALL].current != up - down)
        ck_fail(c, i, "reserved bytes moved by %lld, the maps and unmaps by %lld",
                (long long)(st.reserved_bytes[SUBLET_POOL_ALL].current -
                            c->before.reserved_bytes[SUBLET_POOL_ALL].current),
                (long long)(up - down));
    if (c->ex.kind != EX_NONE)
        check_alloc(c, a, i);
    if (c->release)
        check_release(c, i);
    refresh(c, a);
    /* §6.5: inactive_split never counts blocks of expandable segments */
    int64_t isplit = 0, isplit_bytes = 0;
    for (size_t j = 0; j < c->m.nr; j++) {
        const mrun *u = &c->m.r[j];
        if (u->exp || u->nb < 2)
            continue;
        for (size_t b = u->b0; b < u->b0 + u->nb; b++)
            if (c->m.b[b].state == SUBLET_BLOCK_INACTIVE) {
                isplit++;
                isplit_bytes += (int64_t)c->m.b[b].size;
            }
    }
    if (st.inactive_split[SUBLET_POOL_ALL].current != isplit ||
        st.inactive_split_bytes[SUBLET_POOL_ALL].current != isplit_bytes)
        ck_fail(c, i, "inactive_split %lld (%lld bytes), non-expandable split free blocks %lld "
                "(%lld bytes)", (long long)st.inactive_split[SUBLET_POOL_ALL].current,
                (long long)st.inactive_split_bytes[SUBLET_POOL_ALL].current, (long long)isplit,
                (long long)isplit_bytes);
    if (unmaps || frees) { /* §3.5: a reservation with no page mapped is released */
        size_t keep = 0;
        for (size_t r = 0; r < c->nrv; r++) {
            int mapped = 0;
            for (size_t j = 0; j < c->m.nr && !mapped; j++)
                mapped = c->m.r[j].exp && c->m.r[j].addr >= c->rv[r].lo &&
                         c->m.r[j].addr < c->rv[r].hi;
            if (mapped)
                c->rv[keep++] = c->rv[r];
        }
        c->nrv = keep;
    }
}

/* ---- driving the traces -------------------------------------------------------------- */

static void check_loaded(sublet_trace *t, const char *name)
{
    char err[2048];
    checker *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->t = t;
    c->dirty = 1;
    sublet_settings_default(&c->set);
    assert_int_equal(sublet_settings_parse(&c->set, "expandable_segments:True", NULL, 0),
                     SUBLET_OK);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = "expandable_segments:True";
    o.device_memory = DEVICE_MEMORY;
    o.check = 1;
    o.before_event = before_event;
    o.after_event = after_event;
    o.trace = on_trace;
    o.observer_user = c;
    size_t npre = sublet_trace_prelude_count(t);
    if (SANITIZED && sublet_trace_count(t) > npre + SANITIZED_PREFIX)
        o.stop_after = npre + SANITIZED_PREFIX - 1;
    sublet_replay_result r;
    sublet_status st = sublet_replay_run(t, &o, &r, err, sizeof err);
    print_message("%-42s %6llu events: %5llu allocs checked (%llu from the cache, %llu by "
                  "mapping pages: %llu maps, %llu new reservations), %llu empty_cache checked "
                  "(%llu unmaps), %llu skipped%s\n",
                  name, (unsigned long long)c->events, (unsigned long long)c->allocs,
                  (unsigned long long)c->from_cache, (unsigned long long)c->by_map,
                  (unsigned long long)c->maps, (unsigned long long)c->new_resv,
                  (unsigned long long)c->releases, (unsigned long long)c->unmaps,
                  (unsigned long long)c->skipped,
                  o.stop_after != SUBLET_REPLAY_ALL ? " (prefix)" : "");
    if (st != SUBLET_OK)
        fail_msg("%s: replay: %s: %s", name, sublet_status_name(st), err);
    if (c->fail[0])
        fail_msg("%s: %s", name, c->fail);
    assert_int_equal(r.errors, 0);
    /* every alloc was a checked decision: none fell to the OOM path */
    assert_int_equal(c->skipped, 0);
    assert_int_equal(c->allocs + c->zero, r.allocs + r.pre_allocs);
    assert_true(c->by_map > 0);
    sublet_replay_result_free(&r);
    free(c->m.r);
    free(c->m.b);
    free(c->rv);
    free(c->ev);
    free(c->rel_expect);
    free(c);
}

static void check_trace(const char *path, const char *name)
{
    sublet_trace *t = NULL;
    char err[2048];
    if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("load %s: %s", path, err);
    check_loaded(t, name);
    sublet_trace_free(t);
}

/* Every trace file of dir (.events.csv, .pickle.gz, .json). */
static size_t check_dir(const char *dir)
{
    static const char *const sufs[] = {".events.csv", ".pickle.gz", ".json"};
    char *names[64];
    size_t n = list_dir(dir, sufs, 3, names, 64);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        check_trace(path, names[i]);
        free(names[i]);
    }
    return n;
}

static void test_testdata(void **state)
{
    (void)state;
    assert_true(check_dir(testdata_dir()) >= 4);
}

static void test_shared(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    assert_true(check_dir(dir) >= 14);
}

/* The shared traces have few releases under expandable segments (their
 * empty_cache calls find little free whole pages): a synthetic workload on
 * three streams with an empty_cache every fifty rows or so exercises §6.6,
 * unmapped gaps inside reservations and reservations released and made
 * again. */
static void test_synthetic(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        sublet_trace *t = h_synthetic_trace(seed * 0x9e3779b9, SANITIZED ? 2000 : 8000, 3);
        char name[32];
        snprintf(name, sizeof name, "synthetic seed %llu", (unsigned long long)seed);
        check_loaded(t, name);
        sublet_trace_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_testdata),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
