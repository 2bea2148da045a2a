/* sublet — seeding the state of a replay that began mid-run.
 *
 * PyTorch records into a ring buffer, so most real traces start with
 * segments and live blocks already in place.  These two calls rebuild that
 * state directly in the engine's structures, with the same statistics the
 * engine would have counted had it made those allocations itself. */
#include <string.h>

#include "engine/engine.h"
#include "engine/index.h"
#include "engine/segs.h"

sublet_status sublet_seed_segment(sublet_allocator *a, uint64_t addr, uint64_t size,
                                  sublet_stream stream, int is_small)
{
    if (!a || size == 0 || size % SL_MIN_BLOCK || addr % SL_MIN_BLOCK || addr + size < addr)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    sl_lock(a);
    sl_pool *pool = is_small ? &a->small : &a->large;
    if (sl_segment_find(a, addr) || sl_segment_find(a, addr + size - 1)) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
        goto out;
    }
    if (!sl_pool_tree(pool, stream, true)) {
        st = SUBLET_ERR_NO_MEMORY;
        goto out;
    }
    sl_block *b = NULL;
    st = sl_segment_adopt(a, pool, stream, size, addr, &b);
    if (st == SUBLET_OK)
        sl_free_insert(pool, b);
out:
    sl_unlock(a);
    return st;
}

static sl_block *piece(sublet_allocator *a, sl_block *like, uint64_t addr, uint64_t size)
{
    sl_block *p = sl_block_new(&a->slab);
    if (p) {
        p->addr = addr;
        p->size = size;
        p->stream = like->stream;
        p->seg = like->seg;
        p->pool = like->pool;
    }
    return p;
}

sublet_status sublet_seed_block(sublet_allocator *a, uint64_t addr, uint64_t size,
                                uint64_t requested, sublet_stream stream)
{
    if (!a || size == 0 || size % SL_MIN_BLOCK || addr % SL_MIN_BLOCK)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    sl_lock(a);
    sl_segment *seg = sl_segment_find(a, addr);
    sl_block *b = seg ? seg->head : NULL;
    while (b && !(addr >= b->addr && addr < b->addr + b->size))
        b = b->next;
    if (!b || !b->in_free || stream != b->stream || addr + size > b->addr + b->size ||
        addr + size < addr) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
        goto out;
    }
    sl_pool *pool = b->pool;
    int kind = pool->kind;
    uint64_t head_size = addr - b->addr, tail_size = b->addr + b->size - (addr + size);
    sl_block *hb = head_size ? piece(a, b, b->addr, head_size) : NULL;
    sl_block *tb = tail_size ? piece(a, b, addr + size, tail_size) : NULL;
    if ((head_size && !hb) || (tail_size && !tb) || !sl_ptrmap_put(&a->ptrs, addr, b)) {
        if (hb)
            sl_block_delete(&a->slab, hb);
        if (tb)
            sl_block_delete(&a->slab, tb);
        st = SUBLET_ERR_NO_MEMORY;
        goto out;
    }
    int64_t before_n = (b->prev || b->next) ? 1 : 0;
    int64_t before_bytes = before_n ? (int64_t)b->size : 0;
    sl_free_remove(pool, b);
    if (hb) {
        hb->prev = b->prev;
        if (hb->prev)
            hb->prev->next = hb;
        else
            seg->head = hb;
        hb->next = b;
        b->prev = hb;
    }
    if (tb) {
        tb->next = b->next;
        if (tb->next)
            tb->next->prev = tb;
        tb->prev = b;
        b->next = tb;
    }
    b->addr = addr;
    b->size = size;
    b->allocated = true;
    b->requested = requested;
    int64_t after_n = 0, after_bytes = 0;
    sl_block *free_pieces[2] = {hb, tb};
    for (int i = 0; i < 2; i++)
        if (free_pieces[i]) {
            sl_free_insert(pool, free_pieces[i]);
            after_n++;
            after_bytes += (int64_t)free_pieces[i]->size;
        }
    int64_t dn = after_n - before_n, db = after_bytes - before_bytes;
    if (dn > 0)
        sl_arr_inc(a->stats.inactive_split, kind, dn);
    else if (dn < 0)
        sl_arr_dec(a->stats.inactive_split, kind, -dn);
    if (db > 0)
        sl_arr_inc(a->stats.inactive_split_bytes, kind, db);
    else if (db < 0)
        sl_arr_dec(a->stats.inactive_split_bytes, kind, -db);
    sl_arr_inc(a->stats.allocation, kind, 1);
    sl_arr_inc(a->stats.allocated_bytes, kind, (int64_t)size);
    sl_arr_inc(a->stats.active, kind, 1);
    sl_arr_inc(a->stats.active_bytes, kind, (int64_t)size);
    sl_arr_inc(a->stats.requested_bytes, kind, (int64_t)requested);
    b->oversize = size >= a->settings.max_split_size;
    if (b->oversize)
        sl_stat_inc(&a->stats.oversize_allocations, 1);
out:
    sl_unlock(a);
    return st;
}
