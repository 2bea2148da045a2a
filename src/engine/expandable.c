/* sublet — expandable segments, exactly as PyTorch's (docs/rules.md §6).
 *
 * One virtual reservation per (stream, pool kind), 9/8 of the device's
 * memory, backed page by page on demand: 2 MiB pages for the small pool,
 * large_segment_size (20 MiB) pages for the large pool.  Blocks tile the
 * whole reservation; the ones without physical pages are "unmapped" and live
 * in the pool's unmapped index, ordered by (stream, address).  Mapping adds
 * reserved bytes (segment_map), unmapping on release removes them
 * (segment_unmap); neither changes the segment count. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/segs.h"

/* ---- the unmapped index: sorted array of (stream, addr) -------------------------- */

static int unmapped_cmp(sublet_stream s1, uint64_t a1, const sl_block *b)
{
    if (s1 != b->stream)
        return s1 < b->stream ? -1 : 1;
    if (a1 != b->addr)
        return a1 < b->addr ? -1 : 1;
    return 0;
}

static size_t unmapped_lower_bound(const sl_pool *p, sublet_stream stream, uint64_t addr)
{
    size_t lo = 0, hi = p->nunmapped;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (unmapped_cmp(stream, addr, p->unmapped[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool sl_unmapped_reserve(sl_pool *p, size_t extra)
{
    if (p->nunmapped + extra <= p->unmapped_cap)
        return true;
    size_t nc = p->unmapped_cap ? p->unmapped_cap * 2 : 16;
    while (nc < p->nunmapped + extra)
        nc *= 2;
    sl_block **n = realloc(p->unmapped, nc * sizeof *n);
    if (!n)
        return false;
    p->unmapped = n;
    p->unmapped_cap = nc;
    return true;
}

/* Room must have been reserved (sl_unmapped_reserve). */
void sl_unmapped_insert(sl_pool *p, sl_block *b)
{
    size_t i = unmapped_lower_bound(p, b->stream, b->addr);
    memmove(&p->unmapped[i + 1], &p->unmapped[i], (p->nunmapped - i) * sizeof *p->unmapped);
    p->unmapped[i] = b;
    p->nunmapped++;
}

void sl_unmapped_remove(sl_pool *p, sl_block *b)
{
    size_t i = unmapped_lower_bound(p, b->stream, b->addr);
    if (i < p->nunmapped && p->unmapped[i] == b) {
        memmove(&p->unmapped[i], &p->unmapped[i + 1],
                (p->nunmapped - i - 1) * sizeof *p->unmapped);
        p->nunmapped--;
    }
}

bool sl_unmapped_contains(const sl_pool *p, const sl_block *b)
{
    size_t i = unmapped_lower_bound(p, b->stream, b->addr);
    return i < p->nunmapped && p->unmapped[i] == b;
}

/* ---- segments ----------------------------------------------------------------------- */

static inline bool allocatable(const sl_block *b)
{
    return b && !b->allocated && b->event_count == 0 && b->nuses == 0 && !b->shadow;
}

static bool has_address_space(const sl_block *b, uint64_t size)
{
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
    }
    return bytes >= size;
}

/* A new reservation for (stream, pool): one unmapped block covering it. */
sublet_status sl_exp_new_segment(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                                 sl_block **out)
{
    uint64_t dev_free, dev_total;
    sublet_status st = a->backend->ops->mem_info(a->backend, &dev_free, &dev_total);
    if (st != SUBLET_OK)
        return st;
    /* PyTorch: 2 MiB pages for the small pool, large_segment_size for the
     * large one; policy:stitch uses 2 MiB pages for both */
    uint64_t page = pool->is_small || a->settings.policy == SUBLET_POLICY_STITCH
                        ? SL_SMALL_BUFFER
                        : a->settings.large_segment_size;
    uint64_t want = dev_total + dev_total / 8;
    uint64_t pages = (want + page - 1) / page;
    if (pages == 0)
        pages = 1;
    uint64_t size = pages * page;
    if (!sl_segs_reserve(a) || !sl_unmapped_reserve(pool, 1))
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
    st = a->backend->ops->va_reserve(a->backend, size, SL_SMALL_BUFFER, &addr);
    if (st != SUBLET_OK) {
        free(seg);
        sl_block_delete(&a->slab, b);
        return st;
    }
    *seg = (sl_segment){.addr = addr, .size = size, .stream = stream, .pool = pool, .head = b,
                        .expandable = true, .page = page, .order = sl_segment_order(a)};
    if (pool->owner)
        pool->owner->expandable_seen = true;
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    b->seg = seg;
    b->pool = pool;
    b->mapped = false;
    sl_segs_insert(a, seg);
    sl_unmapped_insert(pool, b);
    *out = b;
    return SUBLET_OK;
}

/* find_expandable_block (§6.3 step 1): lowest usable address wins. */
static sublet_status find_expandable_block(sublet_allocator *a, sl_pool *pool,
                                           sublet_stream stream, uint64_t size, sl_block **out)
{
    for (size_t i = unmapped_lower_bound(pool, stream, 0);
         i < pool->nunmapped && pool->unmapped[i]->stream == stream; i++) {
        sl_block *c = pool->unmapped[i];
        /* a free mapped block just before the unmapped one is used first */
        if (allocatable(c->prev))
            c = c->prev;
        if (has_address_space(c, size)) {
            *out = c;
            return SUBLET_OK;
        }
    }
    return sl_exp_new_segment(a, pool, stream, out);
}

/* policy:stitch's OOM path: what sl_exp_allocate would map for `size` on
 * `stream` right now.  Mirrors find_expandable_block without creating a
 * reservation: the run it would choose, whose unmapped parts are mapped in
 * whole pages as map_block rounds them.  [*lo, *hi) is the part of the run
 * the request would occupy (0, 0 when no run has room and a new reservation
 * would take the whole request). */
uint64_t sl_exp_plan(const sl_pool *pool, sublet_stream stream, uint64_t size, uint64_t *lo,
                     uint64_t *hi)
{
    *lo = *hi = 0;
    for (size_t i = unmapped_lower_bound(pool, stream, 0);
         i < pool->nunmapped && pool->unmapped[i]->stream == stream; i++) {
        const sl_block *c = pool->unmapped[i];
        if (allocatable(c->prev))
            c = c->prev;
        if (!has_address_space(c, size))
            continue;
        uint64_t got = 0, need = 0, page = c->seg->page;
        for (const sl_block *x = c; x && got < size; x = x->next) {
            if (x->mapped) {
                got += x->size;
                continue;
            }
            uint64_t m = (size - got + page - 1) / page * page;
            if (m > x->size)
                m = x->size;
            need += m;
            got += m;
        }
        *lo = c->addr;
        *hi = c->addr + got;
        return need;
    }
    return (size + SL_SMALL_BUFFER - 1) / SL_SMALL_BUFFER * SL_SMALL_BUFFER;
}

/* map_block (§6.3): back the first `size` bytes of an unmapped block. */
static bool map_block(sublet_allocator *a, sl_block *b, uint64_t size)
{
    sl_segment *seg = b->seg;
    sl_pool *pool = b->pool;
    uint64_t page = seg->page;
    uint64_t mapped = (size + page - 1) / page * page; /* whole pages from b->addr */
    if (mapped > b->size)
        mapped = b->size;
    sl_block *rest = NULL;
    if (mapped < b->size && !(rest = sl_block_new(&a->slab)))
        return false;
    if (!sl_unmapped_reserve(pool, 1) ||
        !sl_pool_tree(pool, b->stream, true) ||
        a->backend->ops->va_map(a->backend, b->addr, mapped) != SUBLET_OK) {
        if (rest)
            sl_block_delete(&a->slab, rest);
        return false;
    }
    sl_unmapped_remove(pool, b);
    uint64_t at = b->addr;
    b->mapped = true;
    if (rest) {
        rest->addr = b->addr + mapped;
        rest->size = b->size - mapped;
        rest->stream = b->stream;
        rest->seg = seg;
        rest->pool = pool;
        rest->mapped = false;
        rest->prev = b;
        rest->next = b->next;
        if (rest->next)
            rest->next->prev = rest;
        b->next = rest;
        b->size = mapped;
        sl_unmapped_insert(pool, rest);
    }
    sl_try_merge(a, b, b->prev);
    sl_try_merge(a, b, b->next);
    sl_free_insert(pool, b);
    a->total_allocated_memory += mapped;
    sl_arr_inc(a->stats.reserved_bytes, pool->kind, (int64_t)mapped);
    a->stats.num_device_alloc++;
    if (pool->owner) { /* cudaMalloc_count: once per sl_exp_allocate, below */
        sl_arr_inc(pool->owner->stats.reserved_bytes, pool->kind, (int64_t)mapped);
        pool->owner->stats.num_device_alloc++;
    }
    sl_emit(a, SUBLET_ACT_SEGMENT_MAP, at, mapped, b->stream, a->cur_stack);
    if (!b->prev && !seg->stack) {
        seg->stack = a->cur_stack;
        seg->stack_holder = b;
    }
    return true;
}

sublet_status sl_exp_allocate(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                              uint64_t size, sl_block **out)
{
    sl_block *c;
    sublet_status st = find_expandable_block(a, pool, stream, size, &c);
    if (st != SUBLET_OK)
        return st;
    if (!c->mapped && !map_block(a, c, c->size < size ? c->size : size))
        return SUBLET_ERR_DEVICE_OOM;
    while (c->size < size) {
        /* invariant: free -> unmapped -> ... */
        uint64_t remaining = size - c->size;
        sl_block *n = c->next;
        if (!map_block(a, n, remaining < n->size ? remaining : n->size))
            return SUBLET_ERR_DEVICE_OOM;
        c = n; /* n absorbed c when it merged with its free prev */
    }
    sl_free_remove(pool, c);
    if (pool->owner) {
        /* PyTorch 2.6 counts one cudaMalloc_count per alloc_block that found
         * expandable room, however many mappings it took (§3.3 step 4) */
        pool->owner->malloc_count++;
    }
    *out = c;
    return SUBLET_OK;
}

/* unmap_block (§6.6): give back the whole pages inside a free block. */
sublet_status sl_exp_unmap_block(sublet_allocator *a, sl_block *b)
{
    sl_segment *seg = b->seg;
    sl_pool *pool = b->pool;
    uint64_t page = seg->page;
    uint64_t off = b->addr - seg->addr;
    uint64_t begin = seg->addr + (off + page - 1) / page * page;        /* segmentRight */
    uint64_t end = seg->addr + (off + b->size) / page * page;           /* segmentLeft */
    if (begin >= end)
        return SUBLET_OK;
    uint64_t before = begin - b->addr, after = b->addr + b->size - end;
    sl_block *bf = before ? sl_block_new(&a->slab) : NULL;
    sl_block *af = after ? sl_block_new(&a->slab) : NULL;
    if ((before && !bf) || (after && !af) || !sl_unmapped_reserve(pool, 1)) {
        if (bf)
            sl_block_delete(&a->slab, bf);
        if (af)
            sl_block_delete(&a->slab, af);
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_status st = a->backend->ops->va_unmap(a->backend, begin, end - begin);
    if (st != SUBLET_OK) {
        if (bf)
            sl_block_delete(&a->slab, bf);
        if (af)
            sl_block_delete(&a->slab, af);
        return st;
    }
    sl_free_remove(pool, b);
    if (bf) {
        *bf = (sl_block){.addr = b->addr, .size = before, .stream = b->stream, .seg = seg,
                         .pool = pool, .mapped = true, .prev = b->prev, .next = b,
                         .uses_cap = 1};
        if (bf->prev)
            bf->prev->next = bf;
        else
            seg->head = bf;
        b->prev = bf;
        sl_free_insert(pool, bf);
    }
    if (af) {
        *af = (sl_block){.addr = end, .size = after, .stream = b->stream, .seg = seg,
                         .pool = pool, .mapped = true, .prev = b, .next = b->next,
                         .uses_cap = 1};
        if (af->next)
            af->next->prev = af;
        b->next = af;
        sl_free_insert(pool, af);
    }
    b->addr = begin;
    b->size = end - begin;
    b->mapped = false;
    sl_try_merge(a, b, b->prev);
    sl_try_merge(a, b, b->next);
    sl_unmapped_insert(pool, b);
    a->total_allocated_memory -= end - begin;
    sl_arr_dec(a->stats.reserved_bytes, pool->kind, (int64_t)(end - begin));
    a->stats.num_device_free++;
    if (pool->owner) { /* and one fewer per unmapping (§6.6) */
        sl_arr_dec(pool->owner->stats.reserved_bytes, pool->kind, (int64_t)(end - begin));
        pool->owner->stats.num_device_free++;
        /* and one fewer per unmapping (§6.6), which need not pair with the
         * allocations: PyTorch asserts > 0 here, sublet stops at 0 */
        if (pool->owner->malloc_count > 0)
            pool->owner->malloc_count--;
    }
    sl_emit(a, SUBLET_ACT_SEGMENT_UNMAP, begin, end - begin, b->stream,
            a->op_stack ? a->op_stack : seg->stack);
    return SUBLET_OK;
}

/* release_expandable_segment: the reservation holds no pages any more. */
sublet_status sl_exp_release_segment(sublet_allocator *a, sl_block *b)
{
    sl_segment *seg = b->seg;
    sublet_status st = a->backend->ops->va_release(a->backend, seg->addr, seg->size);
    if (st != SUBLET_OK)
        return st;
    sl_unmapped_remove(b->pool, b);
    sl_segs_remove(a, seg);
    free(seg);
    sl_block_delete(&a->slab, b);
    return SUBLET_OK;
}

/* Teardown: unmap whatever is mapped, run by run (a run's ends are page
 * boundaries; its blocks' need not be), and drop the reservation. */
void sl_exp_destroy_segment(sublet_allocator *a, sl_segment *seg)
{
    for (sl_block *b = seg->head; b;) {
        if (!b->mapped) {
            b = b->next;
            continue;
        }
        uint64_t at = b->addr;
        while (b && b->mapped)
            b = b->next;
        uint64_t end = b ? b->addr : seg->addr + seg->size;
        a->backend->ops->va_unmap(a->backend, at, end - at);
    }
    a->backend->ops->va_release(a->backend, seg->addr, seg->size);
}

/* Expandable size for best fit (§6.4): own size plus a following unmapped block. */
uint64_t sl_exp_size(const sl_block *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}
