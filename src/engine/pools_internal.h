/* sublet — private pools inside the engine (pools.c): redirections,
 * the capture graph of graph_capture_record_stream_reuse, get_pool. */
#ifndef SUBLET_ENGINE_POOLS_INTERNAL_H
#define SUBLET_ENGINE_POOLS_INTERNAL_H

#include "engine/engine.h"

/* The private pool a request of rounded size `size` on `stream` is
 * redirected to (call only when a->nredirects), or NULL. */
sl_pool *sl_redirect_pool(sublet_allocator *a, uint64_t size, sublet_stream stream);
sl_private *sl_private_find(const sublet_allocator *a, sublet_pool_id id);
/* The pool the calling thread is allocating to (use_mem_pool), or NULL. */
sl_private *sl_thread_pool(const sublet_allocator *a);
/* Forget a freeable pool that holds no segment. */
void sl_private_delete(sublet_allocator *a, sl_private *p);
void sl_pools_fini(sublet_allocator *a);

/* pools.c, graph_capture_record_stream_reuse (docs/rules.md §4.6): put the free markers of
 * a block whose free is deferred during a capture (none when out of host
 * memory: the block then waits for the end of the captures, as without the
 * option); is a deferred block allocated on `stream` safe to reuse from
 * `stream` now (every marker an ancestor of its current work); drop its
 * markers; forget the capture graph when the last capture ends. */
void sl_capture_mark(sublet_allocator *a, struct sl_block *b);
bool sl_capture_ready(const sublet_allocator *a, const struct sl_block *b, sublet_stream stream);
void sl_capture_unmark(sublet_allocator *a, const struct sl_block *b);
void sl_capture_graph_reset(sublet_allocator *a);

/* get_pool (§1.4): a redirection's private pool, else the default pool of
 * the size. */
static inline sl_pool *sl_pool_for(sublet_allocator *a, uint64_t rounded, sublet_stream stream)
{
    if (a->nredirects) {
        sl_pool *p = sl_redirect_pool(a, rounded, stream);
        if (p)
            return p;
    }
    /* policy:stitch keeps one pool: with 2 MiB pages a small block pins a
     * page, not a segment, so the small pool's separation buys nothing and
     * costs a partly used page of its own */
    if (a->settings.policy == SUBLET_POLICY_STITCH)
        return &a->large;
    return sl_rule_small(rounded) ? &a->small : &a->large;
}

#endif
