/* sublet — live fragmentation metrics and max_allocatable.
 *
 * Everything here is read from counters the free index keeps on every
 * insert and remove (count, bytes, sum of squares per stream tree) and from
 * the tree maxima: O(streams × log n), never a walk of the blocks. */
#include "engine/engine.h"
#include "engine/index.h"
#include "engine/frag_internal.h"

static void add_tree(sublet_frag_stats *o, double *squares, sl_pool *p, const sl_tree *t)
{
    o->free_bytes += t->bytes;
    o->free_blocks += t->count;
    *squares += sl_tree_squares(t);
    sl_block *mx = t->count ? sl_free_max(p, t->stream) : NULL;
    if (mx && mx->size > o->largest_free_block)
        o->largest_free_block = mx->size;
}

void sl_frag_derive(sublet_frag_stats *o, double squares)
{
    o->unallocated_bytes = o->reserved_bytes - o->allocated_bytes;
    o->internal_waste_bytes = o->allocated_bytes - o->requested_bytes;
    if (o->free_bytes) {
        double f = (double)o->free_bytes;
        o->external = 1.0 - (double)o->largest_free_block / f;
        o->spread = 1.0 - squares / (f * f);
        if (o->spread < 0.0)
            o->spread = 0.0;
    }
    if (o->reserved_bytes)
        o->unused = 1.0 - (double)o->active_bytes / (double)o->reserved_bytes;
}

sublet_status sublet_frag_read(sublet_allocator *a, int pool_kind, sublet_stream stream,
                               sublet_frag_stats *o)
{
    if (!a || !o || pool_kind < SUBLET_POOL_ALL || pool_kind > SUBLET_POOL_LARGE)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *o = (sublet_frag_stats){0};
    double squares = 0.0;
    sl_lock(a);
    sl_pool *pools[2] = {&a->small, &a->large};
    for (int i = 0; i < 2; i++) {
        sl_pool *p = pools[i];
        if (pool_kind != SUBLET_POOL_ALL && pool_kind != p->kind)
            continue;
        for (size_t k = 0; k < p->ntrees; k++)
            if (stream == SUBLET_STREAM_ALL || p->trees[k].stream == stream)
                add_tree(o, &squares, p, &p->trees[k]);
    }
    const sublet_stats *s = &a->stats;
    o->reserved_bytes = (uint64_t)s->reserved_bytes[pool_kind].current;
    o->allocated_bytes = (uint64_t)s->allocated_bytes[pool_kind].current;
    o->active_bytes = (uint64_t)s->active_bytes[pool_kind].current;
    o->requested_bytes = (uint64_t)s->requested_bytes[pool_kind].current;
    o->inactive_split_bytes = (uint64_t)s->inactive_split_bytes[pool_kind].current;
    sl_unlock(a);
    sl_frag_derive(o, squares);
    return SUBLET_OK;
}

/* The largest n whose rounded size fits in `block` (round_size is monotone). */
static uint64_t largest_fitting(const sublet_settings *st, uint64_t block, uint64_t lo)
{
    if (block < lo || sublet_round_size(st, lo) > block)
        return 0;
    uint64_t hi = block; /* round_size(n) >= n, so n <= block */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (sublet_round_size(st, mid) <= block)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

uint64_t sublet_max_allocatable(sublet_allocator *a, sublet_stream stream)
{
    if (!a)
        return 0;
    sl_lock(a);
    uint64_t best = 0;
    /* Large pool: a request s takes the smallest block >= round(s).  A block
     * at or over max_split_size serves a request of its own size (waste 0 <
     * max_non_split_rounding), so the largest block decides; skip blocks the
     * lookup would not hand out (expandable ones when the mode is off). */
    sl_block *b = sl_free_max(&a->large, stream);
    while (b && b->seg->expandable && !sl_virtual(a))
        b = sl_free_before(&a->large, stream, b);
    if (b)
        best = largest_fitting(&a->settings, b->size, SL_SMALL_SIZE + 1);
    if (!best) {
        sl_block *sb = sl_free_max(&a->small, stream);
        while (sb && sb->seg->expandable && !sl_virtual(a))
            sb = sl_free_before(&a->small, stream, sb);
        if (sb) {
            uint64_t cap = sb->size < SL_SMALL_SIZE ? sb->size : SL_SMALL_SIZE;
            best = largest_fitting(&a->settings, cap, 1);
        }
    }
    sl_unlock(a);
    return best;
}
