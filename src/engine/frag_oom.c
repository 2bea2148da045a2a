/* sublet — the diagnosis of an OOM on a live allocator (sublet_oom_diagnose):
 * fragmentation or exhaustion, the pool the request went to and, with private
 * pools, where the free memory sits pool by pool, the segments pinning free
 * memory, and settings that usually help.  Split from engine/frag_state.c
 * (the state, its metrics and texts, which this reads). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/pools_internal.h"
#include "engine/frag_internal.h"
#include "sublet/frag_state.h"

/* ---- OOM diagnosis on a live allocator ------------------------------------------------------ */

sublet_status sublet_frag_request_pool(sublet_allocator *a, uint64_t request, sublet_stream stream,
                                       uint64_t out[2])
{
    if (!a || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    uint64_t rounded = sublet_round_size(&a->settings, request ? request : 1);
    sublet_pool_id id = sl_pool_id_of(sl_pool_for(a, rounded, stream));
    sl_unlock(a);
    out[0] = id.first;
    out[1] = id.second;
    return SUBLET_OK;
}

/* The free blocks of one pool's kind on one stream, from a state. */
static void pool_free_blocks(const sublet_frag_state *st, const uint64_t pool[2], int kind,
                             sublet_stream stream, sublet_frag_stats *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        if (!sl_frag_same_pool(s, pool) || sl_frag_kind(s) != kind || s->stream != stream)
            continue;
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            if (b->state != SUBLET_BLOCK_INACTIVE)
                continue;
            o->free_blocks++;
            o->free_bytes += b->size;
            if (b->size > o->largest_free_block)
                o->largest_free_block = b->size;
        }
    }
}

/* What the device (or the memory fraction) still grants: as the engine's OOM. */
static uint64_t device_headroom(sublet_allocator *a)
{
    uint64_t dev_free = 0, dev_total = 0;
    sl_lock(a);
    if (a->backend->ops->mem_info(a->backend, &dev_free, &dev_total) != SUBLET_OK)
        dev_free = 0;
    uint64_t headroom = dev_free;
    if (a->limit_in_effect) {
        uint64_t room = a->allowed_memory_maximum > a->total_allocated_memory
                            ? a->allowed_memory_maximum - a->total_allocated_memory
                            : 0;
        if (room < headroom)
            headroom = room;
    }
    sl_unlock(a);
    return headroom;
}

/* The failed request as the diagnosis sees it. */
typedef struct oom_req {
    uint64_t request, rounded; /* asked, and once rounded */
    sublet_stream stream;
    int kind;                  /* the pool kind it needs: SUBLET_POOL_SMALL or _LARGE */
    uint64_t target[2];        /* the pool it went to ({0, 0}: the default pools) */
    uint64_t headroom;         /* what the device still grants */
} oom_req;

/* The first paragraph when private pools are involved: which pool the request
 * went to and where the free memory sits, pool by pool.  Only the request's
 * own pool counts towards "would suffice".  Returns 1 for fragmentation. */
static int pooled_verdict(sl_text *b, sublet_allocator *a, const sublet_frag_state *st,
                          const oom_req *rq)
{
    uint64_t request = rq->request, rounded = rq->rounded, headroom = rq->headroom;
    sublet_stream stream = rq->stream;
    int kind = rq->kind;
    const uint64_t *target = rq->target;
    size_t np = 0;
    sublet_frag_pool *pools = sl_frag_pools_of(st, &np);
    uint64_t free_target = 0, free_other = 0;
    for (size_t p = 0; p < np; p++) {
        if (pools[p].pool_id[0] == target[0] && pools[p].pool_id[1] == target[1])
            free_target = pools[p].free_bytes;
        else
            free_other += pools[p].free_bytes;
    }
    sublet_frag_stats f;
    pool_free_blocks(st, target, kind, stream, &f);
    int frag = free_target + headroom >= rounded;
    int dflt = !target[0] && !target[1];
    uint64_t maxa = dflt ? sublet_max_allocatable(a, stream)
                         : sublet_frag_max_allocatable_in(st, target, stream);
    char pn[48], t1[32], t2[32], t3[32], t4[32], t5[32], t6[32];
    sublet_frag_pool_name(target, pn, sizeof pn);
    sl_text_printf(b,
                   "sublet diagnosis: %s. The request of %s (%s once rounded) on stream %" PRIu64
                 " went to the %s and needs one free block of its %s pool; that pool holds %" PRIu64
                   " free blocks on this stream, %s in all, the largest %s. %s is free in the %s "
                   "and the device grants %s more: ",
                   frag ? "fragmentation" : "exhaustion", sl_fb_size(request, t1),
                 sl_fb_size(rounded, t2), stream, pn, kind == SUBLET_POOL_SMALL ? "small" : "large",
                 f.free_blocks, sl_fb_size(f.free_bytes, t3), sl_fb_size(f.largest_free_block, t4),
                   sl_fb_size(free_target, t5), pn, sl_fb_size(headroom, t6));
    if (frag)
        sl_text_puts(b, "enough bytes, but no free block or device allocation big enough.");
    else
        sl_text_printf(b, "%s short even if every free byte of that pool were one block.",
                       sl_fb_size(rounded - free_target - headroom, t1));
    sl_text_printf(b,
                   " The largest request to the %s that would succeed now without a device "
                   "allocation is %s.\n",
                   pn, sl_fb_size(maxa, t1));
    sl_text_puts(b, "Where the free memory sits:");
    for (size_t p = 0; p < np; p++) {
        const sublet_frag_pool *q = &pools[p];
        int mine = q->pool_id[0] == target[0] && q->pool_id[1] == target[1];
        sl_text_printf(b, "%s %s free in %s%s (%zu segment%s, %zu pinned by live blocks)",
                       p ? ";" : "", sl_fb_size(q->free_bytes, t1),
                       sublet_frag_pool_name(q->pool_id, pn, sizeof pn),
                       mine ? ", the request's pool" : "", q->segments, q->segments == 1 ? "" : "s",
                       q->pinned_segments);
    }
    sl_text_puts(b, ".");
    if (free_other)
        sl_text_printf(b,
                       " The %s free in other pools cannot serve this request: a block never moves "
                       "to another pool (%s).",
                       sl_fb_size(free_other, t1),
                       dflt ? "a private pool's free memory goes back only once the pool is "
                       "released (graph reset, MemPool deleted) and emptied"
                       : "the default pools' free memory serves only requests made outside "
                       "the capture or use_mem_pool");
    sl_text_puts(b, "\n");
    free(pools);
    return frag;
}

size_t sublet_oom_diagnose(sublet_allocator *a, uint64_t request, sublet_stream stream, char *buf,
                           size_t cap)
{
    sl_text b;
    sl_text_fixed(&b, buf, cap);
    if (!a)
        return 0;
    sublet_settings set;
    sublet_settings_get(a, &set);
    uint64_t rounded = sublet_round_size(&set, request ? request : 1);
    uint64_t target[2] = {0, 0};
    sublet_frag_request_pool(a, request, stream, target);
    int kind = set.policy == SUBLET_POLICY_STITCH ? SUBLET_POOL_LARGE
               : rounded <= SL_SMALL_SIZE         ? SUBLET_POOL_SMALL
                                                  : SUBLET_POOL_LARGE;
    sublet_frag_stats pool, all;
    sublet_frag_read(a, kind, stream, &pool);
    sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &all);
    uint64_t headroom = device_headroom(a);
    sublet_frag_state *st = NULL;
    if (sublet_frag_capture(a, &st) != SUBLET_OK)
        st = NULL;
    int frag;
    char t1[32], t2[32], t3[32], t4[32], t5[32], t6[32];
    if (st && (target[0] || target[1] || sublet_frag_has_private_pools(st))) {
        oom_req q = {request, rounded, stream, kind, {target[0], target[1]}, headroom};
        frag = pooled_verdict(&b, a, st, &q);
    } else {
        uint64_t free_all = all.reserved_bytes - all.active_bytes;
        frag = free_all + headroom >= rounded;
        uint64_t maxa = sublet_max_allocatable(a, stream);
        sl_text_printf(&b,
                     "sublet diagnosis: %s. The request of %s (%s once rounded) on stream %" PRIu64
                       " needs one free block of the %s pool; that pool holds %" PRIu64
                       " free blocks on this stream, %s in all, the largest %s. %s is free in all "
                       "pools and the device grants %s more: ",
                       frag ? "fragmentation" : "exhaustion", sl_fb_size(request, t1),
                     sl_fb_size(rounded, t2), stream, kind == SUBLET_POOL_SMALL ? "small" : "large",
                       pool.free_blocks, sl_fb_size(pool.free_bytes, t3),
                       sl_fb_size(pool.largest_free_block, t4), sl_fb_size(free_all, t5),
                       sl_fb_size(headroom, t6));
        if (frag)
            sl_text_puts(&b, "enough bytes, but no free block or device allocation big enough.");
        else
            sl_text_printf(&b, "%s short even if every free byte were one block.",
                           sl_fb_size(rounded - free_all - headroom, t1));
        sl_text_printf(&b,
                       " The largest request that would succeed now without a device allocation "
                       "is %s.\n",
                       sl_fb_size(maxa, t1));
    }
    if (st) {
        size_t total = sublet_frag_pinning(st, NULL, 0);
        sl_text_printf(&b,
                       "Segments pinning free memory (mostly free, yet held by live blocks; "
                       "top %zu of %zu):\n",
                       total < 3 ? total : (size_t)3, total);
        sl_frag_pinning_text(&b, st, 3, 4, 4, 2);
        sublet_frag_state_free(st);
    }
    if (frag)
        sl_text_puts(&b, "Settings that often avoid fragmentation OOMs: expandable_segments:True "
                     "(free pages anywhere can back one request), max_split_size_mb:N (big "
                     "cached blocks are not split for small requests), policy:stitch (sublet). "
                     "Replay a recorded trace with `sublet diagnose` to see which one does.\n");
    else
        sl_text_printf(&b,
                       "Live tensors hold %s (requested): the work needs a larger device, a "
                       "smaller batch or fewer live tensors; settings cannot make room.\n",
                       sl_fb_size(all.requested_bytes, t1));
    return b.len;
}
