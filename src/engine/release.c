/* sublet — the engine's slow paths after a miss: releasing cached memory
 * (release_cached_blocks docs/rules.md §3.5, the oversize blocks of §3.4), the garbage
 * collector (§3.6), and the OOM message (§3.7).  Split from engine.c, whose
 * malloc ladder calls them in this order; nothing here is on the hot path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/events.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/pools_internal.h"
#include "engine/release.h"
#include "engine/stitch.h"

/* ---- releasing cached memory --------------------------------------------------- */

static sublet_status release_blocks(sublet_allocator *a, sl_pool *pool)
{
    size_t n;
    bool oom;
    sl_block **all = sl_free_collect(pool, &n, &oom);
    if (oom)
        return SUBLET_ERR_NO_MEMORY;
    sublet_status st = SUBLET_OK;
    size_t nexp = 0;
    for (size_t i = 0; i < n && st == SUBLET_OK; i++) {
        if (all[i]->seg->expandable)
            all[nexp++] = all[i]; /* unmapped after the walk (§3.5) */
        else if (!sl_is_split(all[i]))
            st = sl_segment_release(a, all[i]);
    }
    for (size_t i = 0; i < nexp && st == SUBLET_OK; i++) {
        sl_block *b = all[i];
        st = sl_exp_unmap_block(a, b);
        if (st == SUBLET_OK && !b->prev && !b->next && !b->mapped)
            st = sl_exp_release_segment(a, b);
    }
    free(all);
    return st;
}

/* A freeable pool's address reservations that hold no page (an allocation
 * reserved one, then could not map) go back too: nothing else would free
 * them once the pool is forgotten.  (PyTorch keeps such a reservation, whose
 * blocks then point to the deleted pool.) */
static sublet_status release_empty_reservations(sublet_allocator *a, const sl_private *p)
{
    for (size_t s = 0; s < a->nsegs;) {
        sl_segment *seg = a->segs[s];
        if (seg->pool->owner == p && seg->expandable && !seg->head->mapped && !seg->head->next) {
            sublet_status st = sl_exp_release_segment(a, seg->head); /* moves the last into s */
            if (st != SUBLET_OK)
                return st;
        } else {
            s++;
        }
    }
    return SUBLET_OK;
}

static bool pool_holds_segments(const sublet_allocator *a, const sl_private *p)
{
    if (!p->expandable_seen)
        return p->malloc_count != 0;
    for (size_t s = 0; s < a->nsegs; s++)
        if (a->segs[s]->pool->owner == p)
            return true;
    return false;
}

/* release_cached_blocks (§3.5) for the default id (`only` NULL) or for one
 * private pool (a MemPool's: only when it is freeable).  The default pools
 * are left alone while a redirection is active (PyTorch 2.6 asserts there;
 * no event may be queried during a capture), and so are the events. */
sublet_status sl_release_cached(sublet_allocator *a, sl_private *only)
{
    sublet_status st = SUBLET_OK;
    if (!only && !a->nredirects) {
        st = sl_sync_free_events(a, NULL);
        if (st == SUBLET_OK)
            st = release_blocks(a, &a->large);
        if (st == SUBLET_OK)
            st = release_blocks(a, &a->small);
        if (st == SUBLET_OK && a->naliases) {
            st = sl_stitch_return_all(a);
            if (st == SUBLET_OK)
                st = release_blocks(a, &a->large);
            if (st == SUBLET_OK)
                st = release_blocks(a, &a->small);
        }
    }
    /* the freeable private pools, in creation order (PyTorch: its hash
     * map's order; only the order of the segment_free events can differ) */
    for (size_t i = 0; i < a->nprivs && st == SUBLET_OK;) {
        sl_private *p = a->privs[i];
        if (!p->freeable || (only && p != only)) {
            i++;
            continue;
        }
        if (only && !a->nredirects)
            st = sl_sync_free_events(a, p);
        if (st == SUBLET_OK)
            st = release_blocks(a, &p->small);
        if (st == SUBLET_OK)
            st = release_blocks(a, &p->large);
        if (st == SUBLET_OK && p->expandable_seen)
            st = release_empty_reservations(a, p);
        /* PyTorch forgets the pool at cudaMalloc_count 0; under expandable
         * segments that count may reach 0 with pages still mapped, or stay
         * above it with none: sublet forgets the pool when it holds no
         * segment (the same moment without expandable segments) */
        if (st == SUBLET_OK && !pool_holds_segments(a, p))
            sl_private_delete(a, p); /* the later pools move down one slot */
        else
            i++;
    }
    return st;
}

/* release_available_cached_blocks (§3.4): free just enough oversize blocks. */
bool sl_release_available(sublet_allocator *a, sl_pool *pool,
                                            sublet_stream stream, uint64_t size)
{
    uint64_t ms = a->settings.max_split_size;
    if (ms == SUBLET_SIZE_UNLIMITED)
        return false;
    uint64_t key = size < ms ? ms : size;
    sl_block *b = sl_free_lower_bound(pool, stream, key);
    if (b && !b->seg->expandable) {
        /* a split block can only be this large if max_split_size changed
         * after it was carved; it is not a segment and cannot be freed */
        return !sl_is_split(b) && sl_segment_release(a, b) == SUBLET_OK;
    }
    uint64_t released = 0;
    b = sl_free_max(pool, stream);
    while (b && released < key && b->size >= ms) {
        sl_block *below = sl_free_before(pool, stream, b);
        if (!sl_is_split(b) && !b->seg->expandable) {
            uint64_t sz = b->size;
            if (sl_segment_release(a, b) == SUBLET_OK)
                released += sz;
        }
        b = below;
    }
    return released >= key;
}

/* garbage_collect_cached_blocks (§3.6). */
void sl_garbage_collect(sublet_allocator *a)
{
    uint64_t threshold = (uint64_t)(a->settings.garbage_collection_threshold *
                                    (double)a->allowed_memory_maximum);
    if (a->total_allocated_memory <= threshold) {
        if (a->total_allocated_memory > a->cap_gc_need)
            a->cap_gc_need = a->total_allocated_memory;
        return;
    }
    a->cap_gc_acted = true;
    uint64_t target = a->total_allocated_memory - threshold, reclaimed = 0;
    size_t n;
    bool oom;
    sl_block **all = sl_free_collect(&a->large, &n, &oom);
    if (!all)
        return;
    uint64_t total_age = 0;
    int64_t count = 0;
    /* GC never frees expandable blocks (§3.6); before 2.9 their whole free
     * blocks still count in the average age (PyTorch 2.6), later not */
    bool count_expandable = !sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 9));
    for (size_t i = 0; i < n; i++) {
        bool expandable = all[i]->seg->expandable;
        if (!sl_is_split(all[i]) && (!expandable || count_expandable)) {
            total_age += a->large.clock - all[i]->gc_count_base;
            count++;
        }
        if (expandable)
            all[i] = NULL;
    }
    bool freed = true;
    while (count > 0 && reclaimed < target && freed) {
        double age_threshold = (double)total_age / (double)count;
        freed = false;
        for (size_t i = 0; i < n; i++) {
            sl_block *b = all[i];
            if (!b || sl_is_split(b))
                continue;
            uint64_t age = a->large.clock - b->gc_count_base;
            if ((double)age >= age_threshold) {
                uint64_t sz = b->size;
                if (sl_segment_release(a, b) != SUBLET_OK)
                    continue;
                all[i] = NULL;
                freed = true;
                reclaimed += sz;
                total_age -= age;
                count--;
            }
        }
    }
    free(all);
}

/* ---- OOM message (§3.7) ---------------------------------------------------------------- */

void sl_oom_report(sublet_allocator *a, uint64_t alloc_size, uint64_t rounded,
                       sublet_stream stream, uint64_t *limit_out, uint64_t *free_out)
{
    uint64_t dev_free = 0, dev_total = 0;
    if (a->backend->ops->mem_info(a->backend, &dev_free, &dev_total) != SUBLET_OK)
        dev_free = dev_total = 0;
    sl_emit(a, SUBLET_ACT_OOM, dev_free, rounded, stream, a->cur_stack);
    a->stats.num_ooms++;
    *limit_out = a->limit_in_effect ? a->allowed_memory_maximum : dev_total;
    *free_out = dev_free;

    int64_t allocated = a->stats.allocated_bytes[SUBLET_POOL_ALL].current;
    int64_t reserved = a->stats.reserved_bytes[SUBLET_POOL_ALL].current;
    /* §3.7: the free cached bytes of every private pool, freeable or not */
    int64_t private_bytes = 0;
    for (size_t i = 0; i < a->nprivs; i++)
        for (int k = 0; k < 2; k++) {
            sl_pool *p = k ? &a->privs[i]->large : &a->privs[i]->small;
            for (size_t t = 0; t < p->ntrees; t++)
                private_bytes += (int64_t)p->trees[t].bytes;
        }
    char private_msg[112] = "";
    if (private_bytes > 0) {
        char fs_private[48];
        sublet_format_size((uint64_t)private_bytes, fs_private, sizeof fs_private);
        snprintf(private_msg, sizeof private_msg,
                 "with %s allocated in private pools (e.g., CUDA Graphs), ", fs_private);
    }
    char fs_alloc[48], fs_total[48], fs_free[48], fs_limit[48], fs_used[48], fs_unalloc[48];
    sublet_format_size(alloc_size, fs_alloc, sizeof fs_alloc);
    sublet_format_size(dev_total, fs_total, sizeof fs_total);
    sublet_format_size(dev_free, fs_free, sizeof fs_free);
    sublet_format_size((uint64_t)(allocated + private_bytes), fs_used, sizeof fs_used);
    sublet_format_size((uint64_t)(reserved - allocated - private_bytes), fs_unalloc,
                       sizeof fs_unalloc);
    char allowed[80] = "";
    if (a->limit_in_effect) {
        sublet_format_size(a->allowed_memory_maximum, fs_limit, sizeof fs_limit);
        snprintf(allowed, sizeof allowed, "%s allowed; ", fs_limit);
    }

    /* The advice to turn expandable segments on: PyTorch 2.14 gives it only
     * while they are off (docs/versions.md). */
    const char *hint =
        a->settings.expandable_segments &&
                sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 14))
            ? ""
            : " If reserved but unallocated memory is large try setting "
              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
              "documentation for Memory Management  (https://docs.pytorch.org/docs/stable/"
              "notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";

    /* sublet's diagnosis: the free blocks of the request's pool and stream,
     * and the headroom the device (or the fraction) still grants. */
    uint64_t largest = 0, nfree = 0, free_bytes = 0;
    sl_pool *pool = sl_pool_for(a, rounded, stream);
    sl_tree *t = sl_pool_tree(pool, stream, false);
    if (t) {
        sl_block *mx = sl_free_max(pool, stream);
        largest = mx ? mx->size : 0;
        nfree = t->count;
    }
    free_bytes = (uint64_t)(reserved - a->stats.active_bytes[SUBLET_POOL_ALL].current);
    uint64_t headroom = dev_free;
    if (a->limit_in_effect) {
        uint64_t lim_room = a->allowed_memory_maximum > a->total_allocated_memory
                                ? a->allowed_memory_maximum - a->total_allocated_memory
                                : 0;
        if (lim_room < headroom)
            headroom = lim_room;
    }
    bool fragmentation = free_bytes + headroom >= rounded;
    char fs_largest[48], fs_freeb[48], fs_round[48];
    sublet_format_size(largest, fs_largest, sizeof fs_largest);
    sublet_format_size(free_bytes, fs_freeb, sizeof fs_freeb);
    sublet_format_size(rounded, fs_round, sizeof fs_round);

    snprintf(a->oom_msg, sizeof a->oom_msg,
             "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of "
             "which %s is free. %sOf the allocated memory %s is allocated by PyTorch, %sand %s "
             "is reserved by PyTorch but unallocated.%s\n"
             "sublet: %s. The request needs %s in one block; the largest free block of its "
             "pool and stream is %s (%llu free blocks there); %s is reserved but unallocated "
             "in all pools.",
             fs_alloc, a->device, fs_total, fs_free, allowed, fs_used, private_msg, fs_unalloc,
             hint,
             fragmentation ? "fragmentation: the free bytes would suffice, but no free block "
                             "or device allocation is big enough"
                           : "exhaustion: the free bytes would not suffice even if they were "
                             "contiguous",
             fs_round, fs_largest, (unsigned long long)nfree, fs_freeb);
}

size_t sublet_oom_message(sublet_allocator *a, char *buf, size_t cap)
{
    sl_lock(a);
    size_t n = (size_t)snprintf(buf, cap, "%s", a->oom_msg);
    sl_unlock(a);
    return n;
}
