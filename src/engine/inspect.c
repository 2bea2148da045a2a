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

#include "engine/engine.h"

typedef struct recount {
    int64_t allocation, allocated_bytes, active, active_bytes, requested_bytes;
    int64_t segment, reserved_bytes, inactive_split, inactive_split_bytes;
} recount;

static sublet_status fail(char *msg, size_t cap, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return SUBLET_ERR_CORRUPT;
}

#define CHECK_STAT(name, kind, want)                                                      \
    do {                                                                                   \
        if (a->stats.name[kind].current != (want))                                         \
            return fail(msg, cap, "stat %s[%d].current = %lld but a recount gives %lld",   \
                        #name, kind, (long long)a->stats.name[kind].current,               \
                        (long long)(want));                                                \
    } while (0)

static sublet_status check_locked(sublet_allocator *a, char *msg, size_t cap)
{
    recount rc[SUBLET_POOL_KINDS];
    memset(rc, 0, sizeof rc);
    int64_t oversize_allocs = 0, oversize_segs = 0;
    size_t free_blocks[SUBLET_POOL_KINDS] = {0}, unmapped[SUBLET_POOL_KINDS] = {0};
    size_t allocated = 0, pending = 0, shadows = 0;
    uint64_t reserved = 0;

    sl_segs_sort(a);
    for (size_t i = 0; i < a->nsegs; i++) {
        sl_segment *seg = a->segs[i];
        if (i && a->segs[i - 1]->addr + a->segs[i - 1]->size > seg->addr)
            return fail(msg, cap, "segments 0x%llx and 0x%llx overlap",
                        (unsigned long long)a->segs[i - 1]->addr, (unsigned long long)seg->addr);
        int k = seg->pool->kind;
        recount *r = &rc[k];
        if (!seg->expandable) { /* expandable reservations count mapped pages only */
            r->segment++;
            r->reserved_bytes += (int64_t)seg->size;
            reserved += seg->size;
            oversize_segs += seg->oversize;
        }
        uint64_t expect = seg->addr;
        sl_block *prev = NULL;
        for (sl_block *b = seg->head; b; prev = b, b = b->next) {
            if (b->addr != expect || b->prev != prev)
                return fail(msg, cap, "blocks do not tile segment 0x%llx at 0x%llx",
                            (unsigned long long)seg->addr, (unsigned long long)b->addr);
            if (b->size == 0 || b->size % SL_MIN_BLOCK)
                return fail(msg, cap, "block 0x%llx has size %llu", (unsigned long long)b->addr,
                            (unsigned long long)b->size);
            if (b->seg != seg || b->pool != seg->pool || b->stream != seg->stream)
                return fail(msg, cap, "block 0x%llx disagrees with its segment",
                            (unsigned long long)b->addr);
            expect = b->addr + b->size;
            bool active = sl_block_active(b);
            if (!b->mapped) {
                if (!seg->expandable || active || b->in_free ||
                    !sl_unmapped_contains(seg->pool, b) || (b->addr - seg->addr) % seg->page ||
                    b->size % seg->page)
                    return fail(msg, cap, "unmapped block 0x%llx is misplaced or misindexed",
                                (unsigned long long)b->addr);
                if (prev && !prev->mapped)
                    return fail(msg, cap, "adjacent unmapped blocks 0x%llx and 0x%llx",
                                (unsigned long long)prev->addr, (unsigned long long)b->addr);
                unmapped[k]++;
                continue;
            }
            if (seg->expandable) {
                r->reserved_bytes += (int64_t)b->size;
                reserved += b->size;
            }
            if (b->shadow) { /* bytes usable through another view (stitch.c) */
                if (!seg->expandable || active || b->in_free || b->oversize)
                    return fail(msg, cap, "shadow block 0x%llx is %s",
                                (unsigned long long)b->addr,
                                !seg->expandable ? "in a native segment"
                                : b->in_free     ? "in the free index"
                                                 : "active");
                shadows++;
                continue;
            }
            if (active == b->in_free)
                return fail(msg, cap, "block 0x%llx is %s but %s the free index",
                            (unsigned long long)b->addr, active ? "active" : "free",
                            b->in_free ? "in" : "not in");
            if (!active && prev && !sl_block_active(prev) && prev->mapped == b->mapped &&
                !prev->shadow)
                return fail(msg, cap, "adjacent free blocks 0x%llx and 0x%llx were not merged",
                            (unsigned long long)prev->addr, (unsigned long long)b->addr);
            if (b->allocated) {
                allocated++;
                if (sl_ptrmap_get(&a->ptrs, b->addr) != b)
                    return fail(msg, cap, "allocated block 0x%llx missing from the pointer map",
                                (unsigned long long)b->addr);
                r->allocation++;
                r->allocated_bytes += (int64_t)b->size;
                oversize_allocs += b->oversize;
            } else if (b->oversize) {
                return fail(msg, cap, "free block 0x%llx still counted oversize",
                            (unsigned long long)b->addr);
            }
            if (active) {
                r->active++;
                r->active_bytes += (int64_t)b->size;
                r->requested_bytes += (int64_t)b->requested;
            } else {
                free_blocks[k]++;
                if (!seg->expandable && (seg->head != b || b->next)) {
                    r->inactive_split++;
                    r->inactive_split_bytes += (int64_t)b->size;
                }
            }
            pending += b->event_count;
        }
        if (expect != seg->addr + seg->size)
            return fail(msg, cap, "blocks of segment 0x%llx end at 0x%llx, not 0x%llx",
                        (unsigned long long)seg->addr, (unsigned long long)expect,
                        (unsigned long long)(seg->addr + seg->size));
    }

    sl_pool *pools[2] = {&a->small, &a->large};
    for (int p = 0; p < 2; p++) {
        size_t n;
        if (!sl_free_verify(pools[p], &n, msg, cap))
            return SUBLET_ERR_CORRUPT;
        if (n != free_blocks[pools[p]->kind])
            return fail(msg, cap, "%s pool free index holds %zu blocks, segments hold %zu free",
                        p ? "large" : "small", n, free_blocks[pools[p]->kind]);
        if (pools[p]->nunmapped != unmapped[pools[p]->kind])
            return fail(msg, cap, "%s pool unmapped index holds %zu blocks, segments hold %zu",
                        p ? "large" : "small", pools[p]->nunmapped, unmapped[pools[p]->kind]);
    }
    /* alias pages map physical pages their owners count */
    for (int k = SUBLET_POOL_SMALL; k <= SUBLET_POOL_LARGE; k++) {
        uint64_t alias = sl_stitch_alias_bytes(a, k);
        rc[k].reserved_bytes -= (int64_t)alias;
        reserved -= alias;
    }
    if (sl_stitch_verify(a, shadows, msg, cap) != SUBLET_OK)
        return SUBLET_ERR_CORRUPT;
    if (a->ptrs.count != allocated)
        return fail(msg, cap, "pointer map holds %zu entries for %zu allocated blocks",
                    a->ptrs.count, allocated);
    size_t queued = 0;
    for (size_t i = 0; i < a->nevqs; i++)
        queued += a->evqs[i].count;
    if (pending != a->pending_events || queued != pending)
        return fail(msg, cap, "pending events: blocks %zu, counter %zu, queues %zu", pending,
                    a->pending_events, queued);
    if (reserved != a->total_allocated_memory)
        return fail(msg, cap, "reserved %llu != total_allocated_memory %llu",
                    (unsigned long long)reserved, (unsigned long long)a->total_allocated_memory);

    for (int k = SUBLET_POOL_SMALL; k <= SUBLET_POOL_LARGE; k++) {
        rc[SUBLET_POOL_ALL].allocation += rc[k].allocation;
        rc[SUBLET_POOL_ALL].allocated_bytes += rc[k].allocated_bytes;
        rc[SUBLET_POOL_ALL].active += rc[k].active;
        rc[SUBLET_POOL_ALL].active_bytes += rc[k].active_bytes;
        rc[SUBLET_POOL_ALL].requested_bytes += rc[k].requested_bytes;
        rc[SUBLET_POOL_ALL].segment += rc[k].segment;
        rc[SUBLET_POOL_ALL].reserved_bytes += rc[k].reserved_bytes;
        rc[SUBLET_POOL_ALL].inactive_split += rc[k].inactive_split;
        rc[SUBLET_POOL_ALL].inactive_split_bytes += rc[k].inactive_split_bytes;
    }
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) {
        CHECK_STAT(allocation, k, rc[k].allocation);
        CHECK_STAT(allocated_bytes, k, rc[k].allocated_bytes);
        CHECK_STAT(active, k, rc[k].active);
        CHECK_STAT(active_bytes, k, rc[k].active_bytes);
        CHECK_STAT(requested_bytes, k, rc[k].requested_bytes);
        CHECK_STAT(segment, k, rc[k].segment);
        CHECK_STAT(reserved_bytes, k, rc[k].reserved_bytes);
        CHECK_STAT(inactive_split, k, rc[k].inactive_split);
        CHECK_STAT(inactive_split_bytes, k, rc[k].inactive_split_bytes);
    }
    if (a->stats.oversize_allocations.current != oversize_allocs ||
        a->stats.oversize_segments.current != oversize_segs)
        return fail(msg, cap, "oversize stats %lld/%lld, recount %lld/%lld",
                    (long long)a->stats.oversize_allocations.current,
                    (long long)a->stats.oversize_segments.current, (long long)oversize_allocs,
                    (long long)oversize_segs);
#define SUBLET_X_PEAK(key, title, bytes)                                             \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++)                                       \
        if (a->stats.key[k].peak < a->stats.key[k].current)                           \
            return fail(msg, cap, "stat %s[%d] peak below current", #key, k);
    SUBLET_STAT_ARRAYS(SUBLET_X_PEAK)
#undef SUBLET_X_PEAK
    if (msg && cap)
        msg[0] = '\0';
    return SUBLET_OK;
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
        /* an expandable segment shows as one segment per mapped run (§6.5);
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
