/* sublet — looking inside: the invariant checker and the segment walk.
 *
 * sublet_check() recounts everything from the blocks themselves and compares
 * it with what the engine keeps incrementally: block tiling, merge state, the
 * free index, the pointer map, pending events and every current statistic
 * (reserved bytes count every physical page once: policy:stitch's alias
 * pages are mapped but not reserved), and policy:stitch's aliases: every
 * physical byte usable through exactly one view (stitch.c).  Tests call it
 * after every operation. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/segs.h"
#include "engine/stitch.h"

/* A recount of the pool-split statistics (sublet/stats.h's one list). */
#define RC_FIELD(key, title, bytes) int64_t key;
typedef struct recount {
    SUBLET_STAT_ARRAYS(RC_FIELD)
} recount;
#undef RC_FIELD

/* rc[SUBLET_POOL_ALL] = the small and large pools' recounts added. */
static void recount_total(recount *rc)
{
    for (int k = SUBLET_POOL_SMALL; k <= SUBLET_POOL_LARGE; k++) {
#define RC_ADD(key, title, bytes) rc[SUBLET_POOL_ALL].key += rc[k].key;
        SUBLET_STAT_ARRAYS(RC_ADD)
#undef RC_ADD
    }
}

/* The first pool-split statistic of st whose current value is not the
 * recount's (kind by kind, in the list's order): 1 and where, or 0. */
static int recount_mismatch(const sublet_stats *st, const recount *rc, const char **name,
                            int *kind, int64_t *have, int64_t *want)
{
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) {
#define RC_CMP(key, title, bytes)                                                          \
        if (st->key[k].current != rc[k].key) {                                             \
            *name = #key;                                                                  \
            *kind = k;                                                                     \
            *have = st->key[k].current;                                                    \
            *want = rc[k].key;                                                             \
            return 1;                                                                      \
        }
        SUBLET_STAT_ARRAYS(RC_CMP)
#undef RC_CMP
    }
    return 0;
}

/* sl_fail with the status every check here reports */
static sublet_status fail(char *msg, size_t cap, const char *fmt, ...) SL_PRINTF(3, 4);
static sublet_status fail(char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_vmsg(msg, cap, fmt, ap);
    va_end(ap);
    return SUBLET_ERR_CORRUPT;
}

/* Index of a BlockPool in the per-pool tallies: the default small and
 * large pools, then each private pool's small and large. */
static size_t pool_slot(const sl_pool *p)
{
    if (!p->owner)
        return p->is_small ? 0 : 1;
    return 2 + 2 * p->owner->slot + (p->is_small ? 0 : 1);
}

static void recount_block(recount *r, const sl_segment *seg, const sl_block *b)
{
    if (!b->mapped || b->shadow)
        return;
    if (seg->expandable)
        r->reserved_bytes += (int64_t)b->size;
    if (b->allocated) {
        r->allocation++;
        r->allocated_bytes += (int64_t)b->size;
    }
    if (sl_block_active(b)) {
        r->active++;
        r->active_bytes += (int64_t)b->size;
        r->requested_bytes += (int64_t)b->requested;
    } else if (!seg->expandable && (seg->head != b || b->next)) {
        r->inactive_split++;
        r->inactive_split_bytes += (int64_t)b->size;
    }
}

/* The private pools: their blocks only in their own index, their counts
 * and statistics against a recount. */
static sublet_status check_private(sublet_allocator *a, char *msg, size_t cap)
{
    for (size_t i = 0; i < a->nprivs; i++) {
        sl_private *p = a->privs[i];
        if (p->slot != i || p->small.owner != p || p->large.owner != p)
            return fail(msg, cap, "private pool %zu is misfiled", i);
        if (p->use_count < 0 || p->freeable != (p->use_count == 0))
            return fail(msg, cap, "pool (%llu,%llu): use count %d, freeable %d",
                        (unsigned long long)p->id.first, (unsigned long long)p->id.second,
                        p->use_count, (int)p->freeable);
        for (size_t j = 0; j < i; j++)
            if (a->privs[j]->id.first == p->id.first && a->privs[j]->id.second == p->id.second)
                return fail(msg, cap, "two pools share an id");
        recount rc[SUBLET_POOL_KINDS];
        memset(rc, 0, sizeof rc);
        int64_t segs = 0, oa = 0, os = 0;
        bool expandable = false;
        if (p->malloc_count < 0)
            return fail(msg, cap, "pool (%llu,%llu): cudaMalloc_count %d",
                        (unsigned long long)p->id.first, (unsigned long long)p->id.second,
                        p->malloc_count);
        for (size_t s = 0; s < a->nsegs; s++) {
            sl_segment *seg = a->segs[s];
            if (seg->pool->owner != p)
                continue;
            recount *r = &rc[seg->pool->kind];
            if (seg->expandable) {
                expandable = true;
            } else {
                segs++;
                r->segment++;
                r->reserved_bytes += (int64_t)seg->size;
                os += seg->oversize;
            }
            for (sl_block *b = seg->head; b; b = b->next) {
                recount_block(r, seg, b);
                oa += b->allocated && b->oversize;
            }
        }
        if (!p->expandable_seen && (expandable || p->malloc_count != segs))
            return fail(msg, cap, "pool (%llu,%llu): cudaMalloc_count %d for %lld segments",
                        (unsigned long long)p->id.first, (unsigned long long)p->id.second,
                        p->malloc_count, (long long)segs);
        recount_total(rc);
        const char *name;
        int kind;
        int64_t have, want;
        if (recount_mismatch(&p->stats, rc, &name, &kind, &have, &want))
            return fail(msg, cap, "pool (%llu,%llu) stat %s[%d].current = %lld but a recount "
                        "gives %lld", (unsigned long long)p->id.first,
                        (unsigned long long)p->id.second, name, kind, (long long)have,
                        (long long)want);
        if (p->stats.oversize_allocations.current != oa ||
            p->stats.oversize_segments.current != os)
            return fail(msg, cap, "pool (%llu,%llu): oversize stats disagree with a recount",
                        (unsigned long long)p->id.first, (unsigned long long)p->id.second);
    }
    for (size_t k = 0; k < a->nredirects; k++) {
        sl_private *p = a->redirects[k].pool;
        if (p->slot >= a->nprivs || a->privs[p->slot] != p || p->use_count <= 0)
            return fail(msg, cap, "redirection %zu names a pool that is not live", k);
    }
    for (size_t k = 0; k < a->ndeferred; k++)
        if (a->deferred[k]->allocated || !a->deferred[k]->nuses)
            return fail(msg, cap, "deferred free %zu is allocated or has no stream use", k);
    for (size_t i = 0; i < a->ncap_marks; i++) {
        size_t k = 0;
        while (k < a->ndeferred && a->deferred[k] != a->cap_marks[i].block)
            k++;
        if (k == a->ndeferred)
            return fail(msg, cap, "free marker %zu names no deferred free", i);
    }
    return SUBLET_OK;
}

static sublet_status check_core(sublet_allocator *a, size_t *free_blocks, size_t *unmapped,
                                char *msg, size_t cap);

static sublet_status check_locked(sublet_allocator *a, char *msg, size_t cap)
{
    size_t npools = 2 + 2 * a->nprivs;
    size_t *free_blocks = calloc(2 * npools, sizeof *free_blocks);
    if (!free_blocks)
        return SUBLET_ERR_NO_MEMORY;
    sublet_status st = check_core(a, free_blocks, free_blocks + npools, msg, cap);
    free(free_blocks);
    if (st == SUBLET_OK)
        st = check_private(a, msg, cap);
    if (st == SUBLET_OK && msg && cap)
        msg[0] = '\0';
    return st;
}

/* What check_core recounts from the blocks. */
typedef struct tally {
    recount rc[SUBLET_POOL_KINDS];
    int64_t oversize_allocs, oversize_segs;
    size_t allocated, pending, shadows;
    uint64_t reserved;
    size_t *free_blocks, *unmapped; /* per BlockPool (pool_slot) */
} tally;

/* An unmapped block b (after prev) of an expandable segment. */
static sublet_status check_unmapped(const sl_segment *seg, const sl_block *prev,
                                    const sl_block *b, bool active, tally *t, char *msg,
                                    size_t cap)
{
    if (!seg->expandable || active || b->in_free || !sl_unmapped_contains(seg->pool, b) ||
        (b->addr - seg->addr) % seg->page || b->size % seg->page)
        return fail(msg, cap, "unmapped block 0x%llx is misplaced or misindexed",
                    (unsigned long long)b->addr);
    if (prev && !prev->mapped)
        return fail(msg, cap, "adjacent unmapped blocks 0x%llx and 0x%llx",
                    (unsigned long long)prev->addr, (unsigned long long)b->addr);
    t->unmapped[pool_slot(seg->pool)]++;
    return SUBLET_OK;
}

/* A mapped block b of seg (after prev) that is not a shadow, counted into
 * its pool kind's recount. */
static sublet_status check_mapped(sublet_allocator *a, const sl_segment *seg,
                                  const sl_block *prev, const sl_block *b, tally *t, char *msg,
                                  size_t cap)
{
    recount *r = &t->rc[seg->pool->kind];
    bool active = sl_block_active(b);
    if (active == b->in_free)
        return fail(msg, cap, "block 0x%llx is %s but %s the free index",
                    (unsigned long long)b->addr, active ? "active" : "free",
                    b->in_free ? "in" : "not in");
    if (!active && prev && !sl_block_active(prev) && prev->mapped == b->mapped && !prev->shadow)
        return fail(msg, cap, "adjacent free blocks 0x%llx and 0x%llx were not merged",
                    (unsigned long long)prev->addr, (unsigned long long)b->addr);
    if (b->allocated) {
        t->allocated++;
        if (sl_ptrmap_get(&a->ptrs, b->addr) != b)
            return fail(msg, cap, "allocated block 0x%llx missing from the pointer map",
                        (unsigned long long)b->addr);
        r->allocation++;
        r->allocated_bytes += (int64_t)b->size;
        t->oversize_allocs += b->oversize;
    } else if (b->oversize) {
        return fail(msg, cap, "free block 0x%llx still counted oversize",
                    (unsigned long long)b->addr);
    }
    if (active) {
        r->active++;
        r->active_bytes += (int64_t)b->size;
        r->requested_bytes += (int64_t)b->requested;
    } else {
        t->free_blocks[pool_slot(seg->pool)]++;
        if (!seg->expandable && (seg->head != b || b->next)) {
            r->inactive_split++;
            r->inactive_split_bytes += (int64_t)b->size;
        }
    }
    t->pending += b->event_count;
    return SUBLET_OK;
}

/* Block b of seg (after prev), already found where the tiling puts it. */
static sublet_status check_block(sublet_allocator *a, const sl_segment *seg, const sl_block *prev,
                                 const sl_block *b, tally *t, char *msg, size_t cap)
{
    recount *r = &t->rc[seg->pool->kind];
    if (b->size == 0 || b->size % SL_MIN_BLOCK)
        return fail(msg, cap, "block 0x%llx has size %llu", (unsigned long long)b->addr,
                    (unsigned long long)b->size);
    if (b->seg != seg || b->pool != seg->pool || b->stream != seg->stream)
        return fail(msg, cap, "block 0x%llx disagrees with its segment",
                    (unsigned long long)b->addr);
    bool active = sl_block_active(b);
    if (!b->mapped)
        return check_unmapped(seg, prev, b, active, t, msg, cap);
    if (seg->expandable) {
        r->reserved_bytes += (int64_t)b->size;
        t->reserved += b->size;
    }
    if (b->shadow) { /* bytes usable through another view (stitch.c) */
        if (!seg->expandable || active || b->in_free || b->oversize)
            return fail(msg, cap, "shadow block 0x%llx is %s", (unsigned long long)b->addr,
                        !seg->expandable ? "in a native segment"
                        : b->in_free     ? "in the free index"
                                         : "active");
        t->shadows++;
        return SUBLET_OK;
    }
    return check_mapped(a, seg, prev, b, t, msg, cap);
}

/* One segment: its counts, and blocks that tile it. */
static sublet_status check_segment(sublet_allocator *a, const sl_segment *seg, tally *t,
                                   char *msg, size_t cap)
{
    recount *r = &t->rc[seg->pool->kind];
    if (!seg->expandable) { /* expandable reservations count mapped pages only */
        r->segment++;
        r->reserved_bytes += (int64_t)seg->size;
        t->reserved += seg->size;
        t->oversize_segs += seg->oversize;
    }
    uint64_t expect = seg->addr;
    const sl_block *prev = NULL;
    for (const sl_block *b = seg->head; b; prev = b, b = b->next) {
        if (b->addr != expect || b->prev != prev)
            return fail(msg, cap, "blocks do not tile segment 0x%llx at 0x%llx",
                        (unsigned long long)seg->addr, (unsigned long long)b->addr);
        sublet_status st = check_block(a, seg, prev, b, t, msg, cap);
        if (st != SUBLET_OK)
            return st;
        expect = b->addr + b->size;
    }
    if (expect != seg->addr + seg->size)
        return fail(msg, cap, "blocks of segment 0x%llx end at 0x%llx, not 0x%llx",
                    (unsigned long long)seg->addr, (unsigned long long)expect,
                    (unsigned long long)(seg->addr + seg->size));
    return SUBLET_OK;
}

/* Every BlockPool's free and unmapped indexes against the tallies. */
static sublet_status check_indexes(sublet_allocator *a, const tally *t, char *msg, size_t cap)
{
    for (size_t p = 0; p < 2 + 2 * a->nprivs; p++) {
        sl_pool *pool = p < 2 ? (p ? &a->large : &a->small)
                              : (p % 2 ? &a->privs[(p - 2) / 2]->large
                                       : &a->privs[(p - 2) / 2]->small);
        size_t n;
        if (!sl_free_verify(pool, &n, msg, cap))
            return SUBLET_ERR_CORRUPT;
        if (n != t->free_blocks[p])
            return fail(msg, cap, "%s pool %zu's free index holds %zu blocks, segments hold %zu free",
                        pool->is_small ? "small" : "large", p, n, t->free_blocks[p]);
        if (pool->nunmapped != t->unmapped[p])
            return fail(msg, cap, "%s pool %zu's unmapped index holds %zu blocks, segments hold %zu",
                        pool->is_small ? "small" : "large", p, pool->nunmapped, t->unmapped[p]);
    }
    return SUBLET_OK;
}

/* The aliases, the pointer map, pending events and reserved bytes. */
static sublet_status check_totals(sublet_allocator *a, tally *t, char *msg, size_t cap)
{
    /* alias pages map physical pages their owners count */
    for (int k = SUBLET_POOL_SMALL; k <= SUBLET_POOL_LARGE; k++) {
        uint64_t alias = sl_stitch_alias_bytes(a, k);
        t->rc[k].reserved_bytes -= (int64_t)alias;
        t->reserved -= alias;
    }
    if (sl_stitch_verify(a, t->shadows, msg, cap) != SUBLET_OK)
        return SUBLET_ERR_CORRUPT;
    if (a->ptrs.count != t->allocated)
        return fail(msg, cap, "pointer map holds %zu entries for %zu allocated blocks",
                    a->ptrs.count, t->allocated);
    size_t queued = 0;
    for (size_t i = 0; i < a->nevqs; i++)
        queued += a->evqs[i].count;
    if (t->pending != a->pending_events || queued != t->pending)
        return fail(msg, cap, "pending events: blocks %zu, counter %zu, queues %zu", t->pending,
                    a->pending_events, queued);
    if (!sl_evq_verify(a, msg, cap))
        return SUBLET_ERR_CORRUPT;
    if (t->reserved != a->total_allocated_memory)
        return fail(msg, cap, "reserved %llu != total_allocated_memory %llu",
                    (unsigned long long)t->reserved,
                    (unsigned long long)a->total_allocated_memory);
    return SUBLET_OK;
}

/* Every current statistic against the recount; no peak below current. */
static sublet_status check_stats(sublet_allocator *a, tally *t, char *msg, size_t cap)
{
    recount_total(t->rc);
    const char *name;
    int kind;
    int64_t have, want;
    if (recount_mismatch(&a->stats, t->rc, &name, &kind, &have, &want))
        return fail(msg, cap, "stat %s[%d].current = %lld but a recount gives %lld", name, kind,
                    (long long)have, (long long)want);
    if (a->stats.oversize_allocations.current != t->oversize_allocs ||
        a->stats.oversize_segments.current != t->oversize_segs)
        return fail(msg, cap, "oversize stats %lld/%lld, recount %lld/%lld",
                    (long long)a->stats.oversize_allocations.current,
                    (long long)a->stats.oversize_segments.current, (long long)t->oversize_allocs,
                    (long long)t->oversize_segs);
#define SUBLET_X_PEAK(key, title, bytes)                                             \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++)                                       \
        if (a->stats.key[k].peak < a->stats.key[k].current)                           \
            return fail(msg, cap, "stat %s[%d] peak below current", #key, k);
    SUBLET_STAT_ARRAYS(SUBLET_X_PEAK)
#undef SUBLET_X_PEAK
    return SUBLET_OK;
}

/* free_blocks[] and unmapped[] tally per BlockPool (pool_slot). */
static sublet_status check_core(sublet_allocator *a, size_t *free_blocks, size_t *unmapped,
                                char *msg, size_t cap)
{
    tally t;
    memset(&t, 0, sizeof t);
    t.free_blocks = free_blocks;
    t.unmapped = unmapped;
    sl_segs_sort(a);
    for (size_t i = 0; i < a->nsegs; i++) {
        sl_segment *seg = a->segs[i];
        if (i && a->segs[i - 1]->addr + a->segs[i - 1]->size > seg->addr)
            return fail(msg, cap, "segments 0x%llx and 0x%llx overlap",
                        (unsigned long long)a->segs[i - 1]->addr, (unsigned long long)seg->addr);
        sublet_status st = check_segment(a, seg, &t, msg, cap);
        if (st != SUBLET_OK)
            return st;
    }
    sublet_status st = check_indexes(a, &t, msg, cap);
    if (st == SUBLET_OK)
        st = check_totals(a, &t, msg, cap);
    if (st == SUBLET_OK)
        st = check_stats(a, &t, msg, cap);
    if (st == SUBLET_OK && msg && cap)
        msg[0] = '\0';
    return st;
}

sublet_status sublet_check(sublet_allocator *a, char *msg, size_t cap)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = check_locked(a, msg, cap);
    sl_unlock(a);
    return st;
}

/* Report blocks [first, last] as one segment view. */
static void walk_run(sl_segment *seg, sl_block *first, sl_block *stop, sublet_block_view *views,
                     sublet_segment_fn fn, void *user)
{
    sublet_segment_view sv = {.addr = first->addr,
                              .stream = seg->stream,
                              .is_small = seg->pool->is_small,
                              .is_expandable = seg->expandable,
                              /* PyTorch keeps the segment's stack on one Block:
                               * shown only while that block is the head */
                              .stack = seg->stack_holder == first ? seg->stack : 0,
                              .blocks = views};
    sublet_pool_id pid = sl_pool_id_of(seg->pool);
    sv.pool_id[0] = pid.first;
    sv.pool_id[1] = pid.second;
    size_t n = 0;
    for (sl_block *b = first; b != stop; b = b->next, n++) {
        sublet_block_state state = b->allocated         ? SUBLET_BLOCK_ACTIVE_ALLOCATED
                                   : sl_block_active(b) ? SUBLET_BLOCK_ACTIVE_PENDING_FREE
                                                        : SUBLET_BLOCK_INACTIVE;
        views[n] = (sublet_block_view){b->addr, b->size, b->requested, state, b->stack};
        sv.total_size += b->size;
        if (b->allocated)
            sv.allocated_size += b->size;
        if (state != SUBLET_BLOCK_INACTIVE) {
            sv.active_size += b->size;
            sv.requested_size += b->requested;
        }
    }
    sv.nblocks = n;
    fn(user, &sv);
}

void sublet_segments_walk(sublet_allocator *a, sublet_segment_fn fn, void *user)
{
    sl_lock(a);
    sublet_block_view *views = NULL;
    size_t views_cap = 0;
    sl_segs_sort(a);
    for (size_t i = 0; i < a->nsegs; i++) {
        sl_segment *seg = a->segs[i];
        size_t n = 0;
        for (sl_block *b = seg->head; b; b = b->next)
            n++;
        if (n > views_cap) {
            sublet_block_view *nv = realloc(views, n * sizeof *nv);
            if (!nv)
                break;
            views = nv;
            views_cap = n;
        }
        /* an expandable segment shows as one segment per mapped run (docs/rules.md §6.5);
         * a stitched run's shadow blocks (stitch.c) are usable elsewhere, so
         * they end a run too */
        for (sl_block *b = seg->head; b;) {
            if (!b->mapped || b->shadow) {
                b = b->next;
                continue;
            }
            sl_block *end = b;
            while (end && end->mapped && !end->shadow)
                end = end->next;
            walk_run(seg, b, end, views, fn, user);
            b = end;
        }
    }
    free(views);
    sl_unlock(a);
}
