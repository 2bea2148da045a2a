/* sublet — the engine's set of segments.
 *
 * segs[] holds every segment, each knowing its slot, so adding one appends
 * and removing one moves the last into its slot: O(1) (a sorted array moved
 * half of itself each time, and its binary search chased a pointer per
 * step).  Its order is set only by sl_segs_sort, for the walks that report
 * segments in address order (sublet_check, sublet_segments_walk).
 *
 * Lookups by address (sl_segment_find: seeding, record_stream through a
 * view, block_info, telling an interior pointer from a bad one) go through
 * seg_index, a B+tree (rtree.c).  The index is brought up to date only when
 * a lookup needs it: every change is logged, and a lookup first applies the
 * log, in order, O(log n) a change.  A replay, or any run of allocations and
 * frees that looks nothing up in between, so pays O(1) a change; the index
 * is never worse than one kept up to date, and it catches up whenever the
 * log grows past twice the segments (so the log stays small).
 *
 * Nothing here can fail after sl_segs_reserve: the log always has room for
 * the next insert and for removing every live segment, and an index that
 * cannot get the memory to catch up is bypassed (a scan of segs[]) until it
 * can.  Callers hold the allocator's lock. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/segs.h"

#define LOG_SLACK 256 /* the log may run this far past twice the segments */

/* Apply the logged changes to the index, in order; true when it is then
 * current (false: out of memory, the rest of the log kept). */
static bool catch_up(sublet_allocator *a)
{
    size_t i = 0, n = a->seg_log_n;
    for (; i < n; i++) {
        const sl_seg_change *c = &a->seg_log[i];
        if (!c->add) {
            (void)sl_rtree_remove(&a->seg_index, c->addr, c->size, (uintptr_t)c->seg);
            continue;
        }
        if (!sl_rtree_reserve(&a->seg_index))
            break;
        /* a backend that handed out a range overlapping a live segment
         * leaves it out of the index; sl_segs_sort then sorts segs[] */
        (void)sl_rtree_insert(&a->seg_index, c->addr, c->size, (uintptr_t)c->seg);
    }
    if (i == 0)
        return n == 0;
    memmove(a->seg_log, &a->seg_log[i], (n - i) * sizeof a->seg_log[0]);
    a->seg_log_n = n - i;
    return a->seg_log_n == 0;
}

static void log_change(sublet_allocator *a, const sl_segment *s, bool add)
{
    if (a->seg_log_n == a->seg_log_cap) /* not after sl_segs_reserve */
        (void)catch_up(a);
    if (a->seg_log_n < a->seg_log_cap) {
        a->seg_log[a->seg_log_n++] =
            (sl_seg_change){.addr = s->addr, .size = s->size, .seg = (sl_segment *)s, .add = add};
        return;
    }
    if (add) /* no room anywhere: straight into the index, if it can be */
        (void)(sl_rtree_reserve(&a->seg_index) &&
               sl_rtree_insert(&a->seg_index, s->addr, s->size, (uintptr_t)s) == SUBLET_OK);
    else
        (void)sl_rtree_remove(&a->seg_index, s->addr, s->size, (uintptr_t)s);
}

sl_segment *sl_segment_find(const sublet_allocator *ca, uint64_t addr)
{
    /* catching the index up changes no segment, only how they are found */
    sublet_allocator *a = (sublet_allocator *)ca;
    if (catch_up(a)) {
        const sl_rtree_entry *e = sl_rtree_containing(&a->seg_index, addr);
        if (e || sl_rtree_count(&a->seg_index) == a->nsegs)
            return e ? (sl_segment *)e->tag : NULL;
    }
    for (size_t i = 0; i < a->nsegs; i++) /* the index is short of memory */
        if (addr - a->segs[i]->addr < a->segs[i]->size)
            return a->segs[i];
    return NULL;
}

bool sl_segs_reserve(sublet_allocator *a)
{
    if (a->seg_log_n >= 2 * a->nsegs + LOG_SLACK)
        (void)catch_up(a); /* out of memory: the log just stays longer */
    /* this insert, and the removal of every segment then live */
    size_t need = a->seg_log_n + a->nsegs + 2;
    if (need > a->seg_log_cap) {
        size_t nc = a->seg_log_cap ? a->seg_log_cap * 2 : 64;
        while (nc < need)
            nc *= 2;
        sl_seg_change *n = realloc(a->seg_log, nc * sizeof *n);
        if (!n)
            return false;
        a->seg_log = n;
        a->seg_log_cap = nc;
    }
    if (a->nsegs < a->segs_cap)
        return true;
    size_t nc = a->segs_cap ? a->segs_cap * 2 : 64;
    sl_segment **n = realloc(a->segs, nc * sizeof *n);
    if (!n)
        return false;
    a->segs = n;
    a->segs_cap = nc;
    return true;
}

void sl_segs_insert(sublet_allocator *a, sl_segment *s)
{
    log_change(a, s, true);
    if (a->nsegs && a->segs[a->nsegs - 1]->addr >= s->addr)
        a->segs_unsorted = true;
    s->slot = a->nsegs;
    a->segs[a->nsegs++] = s;
}

void sl_segs_remove(sublet_allocator *a, sl_segment *s)
{
    log_change(a, s, false);
    sl_segment *last = a->segs[--a->nsegs];
    if (last != s) {
        a->segs[s->slot] = last;
        last->slot = s->slot;
        a->segs_unsorted = true;
    }
}

typedef struct seg_sorter {
    sublet_allocator *a;
    size_t n;
} seg_sorter;

static void seg_put(void *user, const sl_rtree_entry *e)
{
    seg_sorter *so = user;
    sl_segment *s = (sl_segment *)e->tag;
    s->slot = so->n;
    so->a->segs[so->n++] = s;
}

static int seg_cmp(const void *x, const void *y)
{
    const sl_segment *p = *(sl_segment *const *)x, *q = *(sl_segment *const *)y;
    return p->addr < q->addr ? -1 : p->addr > q->addr;
}

void sl_segs_sort(sublet_allocator *a)
{
    if (!a->segs_unsorted)
        return;
    if (catch_up(a) && sl_rtree_count(&a->seg_index) == a->nsegs) {
        seg_sorter so = {a, 0}; /* the index's leaves, in O(n) */
        sl_rtree_walk(&a->seg_index, seg_put, &so);
    } else { /* segments that overlap, or no memory: only a sort sees them all */
        qsort(a->segs, a->nsegs, sizeof *a->segs, seg_cmp);
        for (size_t i = 0; i < a->nsegs; i++)
            a->segs[i]->slot = i;
    }
    a->segs_unsorted = false;
}

void sl_segs_fini(sublet_allocator *a)
{
    sl_rtree_fini(&a->seg_index);
    free(a->segs);
    free(a->seg_log);
    a->segs = NULL;
    a->seg_log = NULL;
    a->nsegs = a->segs_cap = a->seg_log_n = a->seg_log_cap = 0;
}
