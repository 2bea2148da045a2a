/* sublet — the engine: PyTorch's native caching allocator, decision for
 * decision (docs/rules.md §1–§4, §7.3).  The malloc ladder is
 *   process events → best fit → GC → device alloc (within the fraction)
 *   → release oversize blocks and retry → release all cached and retry → OOM.
 * Every state change happens under the allocator's one lock; the hot path
 * (a cached malloc or free) is O(1) in the number of blocks when a free block
 * of the rounded size exists (the free index's size map, index.c) and
 * touches O(log n) index nodes otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/events.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/pools_internal.h"
#include "engine/release.h"
#include "engine/segs.h"
#include "engine/stitch.h"
#include "engine/history_internal.h"

/* ---- small helpers ------------------------------------------------------------- */


static inline void stat_inc(sublet_stat *s, int64_t x)
{
    s->current += x;
    if (s->current > s->peak)
        s->peak = s->current;
    s->allocated += x;
}

static inline void stat_dec(sublet_stat *s, int64_t x)
{
    s->current -= x;
    s->freed += x;
}

/* Apply to the aggregate entry and the pool kind's entry. */
static inline void arr_inc(sublet_stat *arr, int kind, int64_t x)
{
    stat_inc(&arr[SUBLET_POOL_ALL], x);
    stat_inc(&arr[kind], x);
}

static inline void arr_dec(sublet_stat *arr, int kind, int64_t x)
{
    stat_dec(&arr[SUBLET_POOL_ALL], x);
    stat_dec(&arr[kind], x);
}

static inline void arr_net(sublet_stat *arr, int kind, int64_t x)
{
    if (x > 0)
        arr_inc(arr, kind, x);
    else if (x < 0)
        arr_dec(arr, kind, -x);
}

/* The same on a pool's own statistics too when the pool is private. */
#define P_INC(field, pool, x)                                           \
    do {                                                                \
        arr_inc(a->stats.field, (pool)->kind, (x));                     \
        if ((pool)->owner)                                              \
            arr_inc((pool)->owner->stats.field, (pool)->kind, (x));     \
    } while (0)
#define P_DEC(field, pool, x)                                           \
    do {                                                                \
        arr_dec(a->stats.field, (pool)->kind, (x));                     \
        if ((pool)->owner)                                              \
            arr_dec((pool)->owner->stats.field, (pool)->kind, (x));     \
    } while (0)
#define P_NET(field, pool, x)                                           \
    do {                                                                \
        arr_net(a->stats.field, (pool)->kind, (x));                     \
        if ((pool)->owner)                                              \
            arr_net((pool)->owner->stats.field, (pool)->kind, (x));     \
    } while (0)

void sl_stat_inc(sublet_stat *s, int64_t x) { stat_inc(s, x); }
void sl_arr_inc(sublet_stat *arr, int kind, int64_t x) { arr_inc(arr, kind, x); }
void sl_arr_dec(sublet_stat *arr, int kind, int64_t x) { arr_dec(arr, kind, x); }

static inline void emit(sublet_allocator *a, sublet_action act, uint64_t addr, uint64_t size,
                        sublet_stream stream, uint32_t stack)
{
    if (a->history || a->event_fn)
        sl_history_event(a, act, addr, size, stream, stack);
    if (a->trace_fn && (a->trace_actions >> act & 1u))
        a->trace_fn(a->trace_user, act, addr, size, stream);
}

void sl_emit(sublet_allocator *a, sublet_action act, uint64_t addr, uint64_t size,
             sublet_stream stream, uint32_t stack)
{
    emit(a, act, addr, size, stream, stack);
}

bool sl_block_active(const sl_block *b)
{
    return b->allocated || b->event_count > 0 || b->nuses > 0;
}

/* ---- segments (the set of them: segs.c) ------------------------------------ */

/* Create a segment of `size` bytes with one whole block (not yet indexed).
 * Counts it in the statistics (segment, reserved_bytes, oversize_segments). */
static sublet_status segment_create(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                                    uint64_t size, uint64_t hint, bool seeded, sl_block **out)
{
    if (!sl_segs_reserve(a))
        return SUBLET_ERR_NO_MEMORY;
    sl_segment *seg = malloc(sizeof *seg);
    sl_block *b = sl_block_new(&a->slab);
    if (!seg || !b) {
        free(seg);
        if (b)
            sl_block_delete(&a->slab, b);
        return SUBLET_ERR_NO_MEMORY;
    }
    uint64_t addr = 0;
    sl_private *owner = pool->owner;
    sublet_status st = owner && owner->alloc_fn ? owner->alloc_fn(owner->alloc_user, size, &addr)
                                                : a->backend->ops->segment_alloc(a->backend, size,
                                                                                 hint, &addr);
    if (st != SUBLET_OK && owner && owner->alloc_fn)
        st = SUBLET_ERR_DEVICE_OOM; /* a failing pool allocator is an OOM (§3.3) */
    if (st == SUBLET_OK && seeded && addr != hint) {
        /* a seeded segment must sit where the trace recorded it */
        a->backend->ops->segment_free(a->backend, addr, size);
        st = SUBLET_ERR_UNSUPPORTED;
    }
    if (st != SUBLET_OK) {
        free(seg);
        sl_block_delete(&a->slab, b);
        return st;
    }
    *seg = (sl_segment){.addr = addr, .size = size, .stream = stream, .pool = pool, .head = b,
                        .order = sl_segment_order(a)};
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    b->seg = seg;
    b->pool = pool;
    sl_segs_insert(a, seg);
    a->total_allocated_memory += size;
    P_INC(segment, pool, 1);
    P_INC(reserved_bytes, pool, (int64_t)size);
    seg->oversize = size >= a->settings.max_split_size;
    if (seg->oversize)
        stat_inc(&a->stats.oversize_segments, 1);
    if (owner) {
        owner->malloc_count++;
        if (seg->oversize)
            stat_inc(&owner->stats.oversize_segments, 1);
        owner->stats.num_device_alloc++;
    }
    if (!seeded) { /* seeds are not part of the recorded run */
        a->stats.num_device_alloc++;
        seg->stack = a->cur_stack;
        seg->stack_holder = b;
        emit(a, SUBLET_ACT_SEGMENT_ALLOC, addr, size, stream, seg->stack);
    }
    *out = b;
    return SUBLET_OK;
}

sublet_status sl_segment_adopt(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                               uint64_t size, uint64_t hint, sl_block **out)
{
    return segment_create(a, pool, stream, size, hint, true, out);
}

/* release_block: return a free whole segment to the backend. */
static sublet_status release_block(sublet_allocator *a, sl_block *b)
{
    sl_segment *seg = b->seg;
    sl_pool *pool = b->pool;
    emit(a, SUBLET_ACT_SEGMENT_FREE, b->addr, b->size, b->stream, a->op_stack ? a->op_stack : seg->stack);
    sl_private *owner = pool->owner;
    sublet_status st = SUBLET_OK;
    if (owner && owner->free_fn)
        owner->free_fn(owner->alloc_user, b->addr, b->size);
    else
        st = a->backend->ops->segment_free(a->backend, b->addr, b->size);
    if (st != SUBLET_OK)
        return st; /* the segment stays cached and counted */
    a->stats.num_device_free++;
    a->total_allocated_memory -= b->size;
    P_DEC(segment, pool, 1);
    P_DEC(reserved_bytes, pool, (int64_t)b->size);
    if (seg->oversize)
        stat_dec(&a->stats.oversize_segments, 1);
    if (owner) {
        owner->malloc_count--;
        owner->stats.num_device_free++;
        if (seg->oversize)
            stat_dec(&owner->stats.oversize_segments, 1);
    }
    if (b->in_free)
        sl_free_remove(pool, b);
    sl_segs_remove(a, seg);
    free(seg);
    sl_block_delete(&a->slab, b);
    return SUBLET_OK;
}

/* sublet_reserve (reserve.c): a segment through the device path, and back. */
sublet_status sl_segment_new(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                             uint64_t size, sl_block **out)
{
    return segment_create(a, pool, stream, size, 0, false, out);
}

sublet_status sl_segment_release(sublet_allocator *a, sl_block *b) { return release_block(a, b); }

/* ---- free path ---------------------------------------------------------------- */

/* try_merge_blocks: absorb `src` into `dst` when it is free and idle. */
static inline bool can_merge(const sl_block *dst, const sl_block *src)
{
    return src && !src->allocated && src->event_count == 0 && src->nuses == 0 &&
           dst->mapped == src->mapped && !src->shadow;
}

/* dst absorbs its neighbour src, which is out of every index; returns src's size. */
static uint64_t absorb(sublet_allocator *a, sl_block *dst, sl_block *src)
{
    if (src->seg->stack_holder == src) /* absorbing prev moves it; next loses it */
        src->seg->stack_holder = dst->prev == src ? dst : NULL;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        else
            dst->seg->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    uint64_t sz = src->size;
    dst->size += sz;
    sl_block_delete(&a->slab, src);
    return sz;
}

uint64_t sl_try_merge(sublet_allocator *a, sl_block *dst, sl_block *src)
{
    if (!can_merge(dst, src))
        return 0;
    if (src->in_free)
        sl_free_remove(src->pool, src);
    else if (!src->mapped)
        sl_unmapped_remove(src->pool, src);
    return absorb(a, dst, src);
}

/* free_block (§4.4): the block's memory returns to the pool. */
void sl_free_block(sublet_allocator *a, sl_block *b)
{
    sl_pool *pool = b->pool;
    emit(a, SUBLET_ACT_FREE_COMPLETED, b->addr, b->requested, b->stream,
         a->op_stack ? a->op_stack : b->stack);
    b->stack = 0;
    uint64_t orig = b->size, req = b->requested;
    int64_t net_n = 0, net_bytes = 0;
    /* b takes the index node of a free neighbour it absorbs (the first one
     * in the index; the other, if any, leaves the index first), then moves
     * to its merged key: in place when nothing lies between, else straight
     * to its class's tree (sl_free_rekey) */
    sl_block *cand[2] = {b->prev, b->next};
    int keep = -1;
    for (int i = 0; i < 2; i++) {
        if (!can_merge(b, cand[i]))
            continue;
        if (keep < 0 && cand[i]->in_free) {
            keep = i;
            continue;
        }
        net_n -= 1;
        net_bytes -= (int64_t)sl_try_merge(a, b, cand[i]);
    }
    if (keep >= 0) {
        sl_block *src = cand[keep];
        uint64_t old_size = src->size;
        sl_free_replace(pool, src, b);
        net_n -= 1;
        net_bytes -= (int64_t)absorb(a, b, src);
        sl_free_rekey(pool, b, old_size);
    } else {
        sl_free_insert(pool, b);
    }
    if (sl_is_split(b)) {
        net_n += 1;
        net_bytes += (int64_t)b->size;
    }
    if (!b->seg->expandable) { /* §4.4: expandable blocks are never inactive_split */
        P_NET(inactive_split, pool, net_n);
        P_NET(inactive_split_bytes, pool, net_bytes);
    }
    P_DEC(active, pool, 1);
    P_DEC(active_bytes, pool, (int64_t)orig);
    P_DEC(requested_bytes, pool, (int64_t)req);
}

/* ---- malloc ---------------------------------------------------------------------- */

/* get_free_block (§2.4–2.5).  take: the block leaves the free index; else
 * it stays there for alloc_found_block. */
static sl_block *get_free_block(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                                uint64_t size, bool take)
{
    if (sl_gc_active(a))
        pool->clock++;
    sl_block *b = sl_free_lower_bound(pool, stream, size);
    if (!b)
        return NULL;
    if (b->seg->expandable) {
        if (sl_virtual(a)) {
            /* prefer a block that cannot grow over the growable tail (§6.4) */
            for (sl_block *n = sl_free_after(pool, stream, b);
                 b->seg->expandable && n && sl_exp_size(n) < sl_exp_size(b);
                 n = sl_free_after(pool, stream, n))
                b = n;
        } else {
            /* expandable mode was switched off: skip its blocks */
            do
                b = sl_free_after(pool, stream, b);
            while (b && b->seg->expandable);
            if (!b)
                return NULL;
        }
    }
    uint64_t ms = a->settings.max_split_size;
    if (size < ms && b->size >= ms)
        return NULL;
    if (size >= ms && b->size >= size + a->settings.max_non_split_rounding)
        return NULL;
    if (take)
        sl_free_remove(pool, b);
    return b;
}

/* The MemPool fallback (§3.2 step 4c, PyTorch after 2.6): a cached block
 * of a pool flagged use_on_oom, first hit in creation order.  The block
 * stays in its pool. */
static sublet_status use_on_oom_block(sublet_allocator *a, sublet_stream stream, uint64_t size,
                                      sl_block **out)
{
    for (size_t i = 0; i < a->nprivs; i++) {
        sl_private *p = a->privs[i];
        if (!p->use_on_oom)
            continue;
        sl_pool *pool = sl_rule_small(size) && a->settings.policy != SUBLET_POLICY_STITCH
                            ? &p->small
                            : &p->large;
        if (!sl_pool_tree(pool, stream, true))
            return SUBLET_ERR_NO_MEMORY;
        sl_block *b = get_free_block(a, pool, stream, size, true);
        if (b) {
            *out = b;
            return SUBLET_OK;
        }
    }
    return SUBLET_ERR_DEVICE_OOM;
}

/* alloc_block (§3.3). */
static sublet_status alloc_block(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                                 uint64_t size, uint64_t alloc_size, bool is_retry,
                                 sl_block **out)
{
    if (is_retry)
        a->stats.num_alloc_retries++;
    if (a->limit_in_effect) {
        if (a->total_allocated_memory + alloc_size > a->allowed_memory_maximum) {
            a->cap_limit_refused = true;
            return SUBLET_ERR_DEVICE_OOM;
        }
        if (a->total_allocated_memory + alloc_size > a->cap_limit_need)
            a->cap_limit_need = a->total_allocated_memory + alloc_size;
    }
    /* a pool with its own allocator never maps pages (PyTorch after 2.6) */
    if (sl_virtual(a) && !(pool->owner && pool->owner->alloc_fn))
        return sl_exp_allocate(a, pool, stream, size, out);
    return segment_create(a, pool, stream, alloc_size, 0, false, out);
}

static bool should_split(const sublet_allocator *a, const sl_block *b, uint64_t size)
{
    uint64_t remaining = b->size - size;
    if (b->pool->owner && b->pool->owner->no_split &&
        sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 9)))
        return false;
    return sl_rule_split(b->pool->is_small || sl_virtual(a), size, remaining,
                         a->settings.max_split_size);
}

/* alloc_found_block (§3.9).  `b` is out of the free index, or in it when
 * `indexed`: a split's remainder then keeps b's node (sl_free_rekey); on an
 * error nothing has changed. */
static sublet_status alloc_found_block(sublet_allocator *a, sl_block *b, bool indexed,
                                       uint64_t size, uint64_t orig, sublet_stream stream,
                                       sl_block **out)
{
    sl_pool *pool = b->pool;
    bool already_split = sl_is_split(b);
    bool exp = b->seg->expandable; /* never counted as inactive_split (§6.5) */
    sl_block *blk = b;
    if (should_split(a, b, size)) {
        sl_block *nb = sl_block_new(&a->slab);
        if (!nb)
            return SUBLET_ERR_NO_MEMORY;
        uint64_t old_size = b->size;
        nb->addr = b->addr;
        nb->size = size;
        nb->stream = stream;
        nb->seg = b->seg;
        nb->pool = pool;
        nb->prev = b->prev;
        if (nb->prev)
            nb->prev->next = nb;
        else
            b->seg->head = nb;
        nb->next = b;
        b->prev = nb;
        b->addr += size;
        b->size -= size;
        if (indexed)
            sl_free_rekey(pool, b, old_size);
        else
            sl_free_insert(pool, b);
        if (!exp && already_split) {
            P_DEC(inactive_split_bytes, pool, (int64_t)size);
        } else if (!exp) {
            P_INC(inactive_split_bytes, pool, (int64_t)b->size);
            P_INC(inactive_split, pool, 1);
        }
        blk = nb;
    } else {
        if (indexed)
            sl_free_remove(pool, b);
        if (already_split && !exp) {
            P_DEC(inactive_split_bytes, pool, (int64_t)b->size);
            P_DEC(inactive_split, pool, 1);
        }
    }
    blk->allocated = true;
    blk->requested = orig;
    P_INC(allocation, pool, 1);
    P_INC(allocated_bytes, pool, (int64_t)blk->size);
    P_INC(active, pool, 1);
    P_INC(active_bytes, pool, (int64_t)blk->size);
    P_INC(requested_bytes, pool, (int64_t)orig);
    blk->oversize = blk->size >= a->settings.max_split_size;
    if (blk->oversize) {
        stat_inc(&a->stats.oversize_allocations, 1);
        if (pool->owner)
            stat_inc(&pool->owner->stats.oversize_allocations, 1);
    }
    blk->stack = a->cur_stack;
    emit(a, SUBLET_ACT_ALLOC, blk->addr, orig, stream, blk->stack);
    *out = blk;
    return SUBLET_OK;
}

/* Put a block taken from the free index (or a fresh segment) back when a
 * later step of malloc failed for lack of host memory. */
static void undo_take(sl_block *b) { sl_free_insert(b->pool, b); }


sublet_status sublet_malloc(sublet_allocator *a, uint64_t n, sublet_stream stream, void **ptr)
{
    if (!a || !ptr)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *ptr = NULL;
    if (n == 0)
        return SUBLET_OK;
    sl_lock(a);
    if (n >= SL_MAX_REQUEST) {
        snprintf(a->oom_msg, sizeof a->oom_msg,
                 "CUDA out of memory. Tried to allocate more than 1EB memory.");
        sl_unlock(a);
        return SUBLET_ERR_OOM;
    }
    /* no event may be queried while a capture may be under way (§3.2) */
    sublet_status st = SUBLET_OK;
    if (!a->nredirects)
        st = sl_events_poll(a);
    else if (a->ncap_marks)
        sl_capture_reclaim(a, stream);
    if (st != SUBLET_OK)
        goto out;
    a->cur_stack = a->history && sl_history_context(a) >= SUBLET_CONTEXT_STATE ? sl_stack_capture(a) : 0;
    a->op_stack = a->cur_stack; /* PyTorch passes malloc's context to what it frees */
    uint64_t size = sublet_round_size(&a->settings, n);
    sl_pool *pool = sl_pool_for(a, size, stream);
    uint64_t alloc_size = sublet_allocation_size(&a->settings, size);
    if (!sl_pool_tree(pool, stream, true) || !sl_ptrmap_reserve(&a->ptrs)) {
        st = SUBLET_ERR_NO_MEMORY;
        goto out;
    }

    sl_block *b = get_free_block(a, pool, stream, size, false);
    bool indexed = b != NULL;
    if (!b) {
        if (sl_gc_active(a))
            sl_garbage_collect(a);
        st = alloc_block(a, pool, stream, size, alloc_size, false, &b);
        if (st == SUBLET_ERR_DEVICE_OOM && !pool->owner && a->nprivs &&
            sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 9)))
            st = use_on_oom_block(a, stream, size, &b);
        if (st == SUBLET_ERR_DEVICE_OOM && sl_release_available(a, pool, stream, size))
            st = alloc_block(a, pool, stream, size, alloc_size, false, &b);
        /* policy:stitch: move whole free pages, then stitch partly free
         * ones, before PyTorch's full release (and once more after it) */
        bool stitch = a->settings.policy == SUBLET_POLICY_STITCH &&
                      !(pool->owner && pool->owner->alloc_fn);
        if (st == SUBLET_ERR_DEVICE_OOM && stitch) {
            if (sl_stitch_release_some(a, pool, stream, size))
                st = alloc_block(a, pool, stream, size, alloc_size, true, &b);
            if (st == SUBLET_ERR_DEVICE_OOM)
                st = sl_stitch_alloc(a, pool, stream, size, &b);
        }
        if (st == SUBLET_ERR_DEVICE_OOM && !a->nredirects) {
            st = sl_release_cached(a, NULL);
            if (st == SUBLET_OK)
                st = alloc_block(a, pool, stream, size, alloc_size, true, &b);
        }
        if (st == SUBLET_ERR_DEVICE_OOM && stitch)
            st = sl_stitch_alloc(a, pool, stream, size, &b);
        if (st == SUBLET_ERR_DEVICE_OOM) {
            uint64_t limit, dev_free;
            sl_oom_report(a, alloc_size, size, stream, &limit, &dev_free);
            sublet_oom_fn fn = a->oom_fn;
            void *user = a->oom_user;
            int device = a->device;
            a->cur_stack = a->op_stack = 0;
            sl_unlock(a);
            if (fn)
                fn(user, device, alloc_size, limit, dev_free);
            return SUBLET_ERR_OOM;
        }
        if (st != SUBLET_OK)
            goto out;
    }
    sl_block *blk;
    st = alloc_found_block(a, b, indexed, size, n, stream, &blk);
    if (st != SUBLET_OK) {
        if (!indexed)
            undo_take(b);
        goto out;
    }
    sl_ptrmap_insert(&a->ptrs, blk->addr, blk); /* room reserved above */
    *ptr = (void *)(uintptr_t)blk->addr;
out:
    a->cur_stack = a->op_stack = 0;
    sl_unlock(a);
    return st;
}

/* ---- free, record_stream, empty_cache -------------------------------------------- */

/* Classify a pointer that is not an allocated block's start. */
static sublet_status bad_pointer(const sublet_allocator *a, uint64_t addr)
{
    sl_segment *seg = sl_segment_find(a, addr);
    if (!seg)
        return SUBLET_ERR_INVALID_POINTER;
    for (sl_block *b = seg->head; b; b = b->next) {
        if ((!b->mapped || b->shadow) && addr >= b->addr && addr < b->addr + b->size)
            return SUBLET_ERR_INVALID_POINTER;
        if (addr == b->addr)
            return b->allocated ? SUBLET_ERR_INVALID_POINTER : SUBLET_ERR_DOUBLE_FREE;
        if (addr > b->addr && addr < b->addr + b->size)
            return b->allocated ? SUBLET_ERR_INTERIOR_POINTER : SUBLET_ERR_DOUBLE_FREE;
    }
    return SUBLET_ERR_INVALID_POINTER;
}

sublet_status sublet_free(sublet_allocator *a, void *ptr)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (!ptr)
        return SUBLET_OK;
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    sl_lock(a);
    size_t slot = sl_ptrmap_find(&a->ptrs, addr);
    if (slot == SIZE_MAX) {
        sublet_status st = bad_pointer(a, addr);
        sl_unlock(a);
        return st;
    }
    sl_block *b = a->ptrs.slots[slot].b;
    if (b->nuses && !a->nredirects) {
        sublet_status st = sl_insert_events(a, b); /* leaves the pointer map alone */
        if (st != SUBLET_OK) {
            sl_unlock(a);
            return st;
        }
    }
    sl_pool *pool = b->pool;
    if (b->nuses && a->nredirects && !sl_deferred_reserve(a)) {
        sl_unlock(a);
        return SUBLET_ERR_NO_MEMORY;
    }
    b->allocated = false;
    sl_ptrmap_del_at(&a->ptrs, slot);
    P_DEC(allocation, pool, 1);
    P_DEC(allocated_bytes, pool, (int64_t)b->size);
    if (b->oversize) {
        stat_dec(&a->stats.oversize_allocations, 1);
        if (pool->owner)
            stat_dec(&pool->owner->stats.oversize_allocations, 1);
    }
    b->oversize = false;
    a->op_stack = a->history && sl_history_context(a) == SUBLET_CONTEXT_ALL ? sl_stack_capture(a) : 0;
    emit(a, SUBLET_ACT_FREE_REQUESTED, b->addr, b->requested, b->stream,
         a->op_stack ? a->op_stack : b->stack);
    if (b->nuses) { /* during a capture: events wait until none is active (§4.5) */
        a->deferred[a->ndeferred++] = b;
        if (a->settings.graph_capture_record_stream_reuse)
            sl_capture_mark(a, b);
    } else if (b->event_count == 0)
        sl_free_block(a, b);
    a->op_stack = 0;
    sl_unlock(a);
    return SUBLET_OK;
}

sublet_status sublet_record_stream(sublet_allocator *a, void *ptr, sublet_stream stream)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (!ptr)
        return SUBLET_OK;
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    sublet_status st = SUBLET_OK;
    sl_lock(a);
    sl_block *b = sl_ptrmap_get(&a->ptrs, addr);
    if (!b) {
        /* PyTorch records through views: an interior pointer of a live
         * block protects that block (test_record_stream_on_shifted_view). */
        sl_segment *seg = sl_segment_find(a, addr);
        for (sl_block *x = seg ? seg->head : NULL; x; x = x->next)
            if (addr >= x->addr && addr < x->addr + x->size) {
                b = x->allocated ? x : NULL;
                break;
            }
        if (!b) {
            st = bad_pointer(a, addr);
            if (st == SUBLET_ERR_INTERIOR_POINTER)
                st = SUBLET_ERR_INVALID_POINTER;
            goto out;
        }
    }
    if (stream == b->stream)
        goto out;
    sublet_stream *uses = sl_uses(b);
    for (uint32_t i = 0; i < b->nuses; i++)
        if (uses[i] == stream) {
            if (a->nredirects && !sl_capture_use_add(a, b, stream))
                st = SUBLET_ERR_NO_MEMORY;
            goto out;
        }
    if (b->nuses == b->uses_cap) {
        uint32_t nc = b->uses_cap * 2;
        sublet_stream *n = malloc(nc * sizeof *n);
        if (!n) {
            st = SUBLET_ERR_NO_MEMORY;
            goto out;
        }
        memcpy(n, uses, b->nuses * sizeof *n);
        if (b->uses_cap > 1)
            free(b->uses_heap);
        b->uses_heap = n;
        b->uses_cap = nc;
    }
    if (a->nredirects && !sl_capture_use_add(a, b, stream)) {
        st = SUBLET_ERR_NO_MEMORY;
        goto out;
    }
    sl_uses(b)[b->nuses++] = stream;
out:
    sl_unlock(a);
    return st;
}

sublet_status sublet_process_events(sublet_allocator *a)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = a->nredirects ? SUBLET_OK : sl_process_events(a);
    sl_unlock(a);
    return st;
}

sublet_status sublet_empty_cache(sublet_allocator *a)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    a->op_stack = a->history && sl_history_context(a) == SUBLET_CONTEXT_ALL ? sl_stack_capture(a) : 0;
    /* under use_mem_pool the thread's pool only (§3.5) */
    sublet_status st = sl_release_cached(a, a->nredirects ? sl_thread_pool(a) : NULL);
    a->op_stack = 0;
    sl_unlock(a);
    return st;
}

int sublet_allocator_device(sublet_allocator *a) { return a ? a->device : -1; }

sublet_status sublet_block_info(sublet_allocator *a, const void *ptr, uint64_t *base,
                                uint64_t *size, uint64_t *requested)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    sublet_status st = SUBLET_ERR_INVALID_POINTER;
    sl_lock(a);
    /* a block's own address (the pointer malloc gave): the pointer map */
    sl_block *held = sl_ptrmap_get(&a->ptrs, addr);
    sl_segment *seg = held ? NULL : sl_segment_find(a, addr);
    for (sl_block *b = held ? held : seg ? seg->head : NULL; b; b = b->next)
        if (addr >= b->addr && addr < b->addr + b->size) {
            if (b->allocated) {
                if (base)
                    *base = b->addr;
                if (size)
                    *size = b->size;
                if (requested)
                    *requested = b->requested;
                st = SUBLET_OK;
            }
            break;
        }
    sl_unlock(a);
    return st;
}
