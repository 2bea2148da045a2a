/* sublet — policy:stitch's OOM path: moving free pages, and stitching the
 * free parts of partly used pages into a new virtual range
 * (docs/policies.md, "policy:stitch").
 *
 * Two steps, both taken only when a request cannot be mapped for lack of
 * device memory (never on the common path):
 *
 *   sl_stitch_release_some  unmap the whole free pages of as few cached
 *                           blocks as the request is short of, so that they
 *                           can be mapped again where the request grows;
 *   sl_stitch_alloc         serve the request from a new run whose first
 *                           and/or last page maps, a second time, the
 *                           physical page of a partly used page elsewhere
 *                           (backend op va_map_alias), its other pages
 *                           fresh: the free part of a page that also holds
 *                           live bytes serves a request it cannot hold in
 *                           place.
 *
 * The bookkeeping of a stitch.  An alias page A maps the physical page of
 * its owner page O (a page mapped by va_map, never itself an alias).  Of
 * its bytes, [off, off+len) -- the page's free tail (off = P - len: A is
 * the first page of the run) or its free head (off = 0: A is the last) --
 * are usable through A; the same bytes in O are a shadow block (mapped,
 * never free, never allocated, never merged), and the rest of A is a
 * shadow block too.  So every physical byte is usable through exactly one
 * view; reserved_bytes counts O's page once and A's not at all.  The
 * allocator's alias table (sorted by A) holds, per alias page, O, off, len
 * and its two shadow blocks.  A stitch is undone ("returned") when every
 * usable byte of A is free: A is unmapped (the physical page stays, O still
 * maps it) and O's shadow becomes free again.  That happens in
 * release_cached_blocks (empty_cache, the OOM path's full release), between
 * two passes that unmap whole free pages: the first leaves the usable part
 * of an alias page a free block of its own, the second gives back an owner
 * page whose lent part came back wholly free.  Trace events describe usable memory: a stitch
 * emits segment_unmap for each lent range in its owner and one segment_map
 * for the run's usable bytes (fresh pages and lent ranges), a return the
 * reverse; their sum stays reserved_bytes.
 *
 * Private pools (docs/pools.md): everything here acts within the pool of the
 * request (its free index, its unmapped ranges, its reservations): an alias
 * page and its owner are always of one pool and one stream, so no block and
 * no byte ever moves to another pool.  A pool with its own allocator never
 * maps pages and is never stitched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/segs.h"
#include "engine/stitch.h"

static inline bool is_free(const sl_block *b)
{
    return b && b->mapped && !b->shadow && !b->allocated && b->event_count == 0 &&
           b->nuses == 0;
}

static inline uint64_t page_floor(const sl_segment *seg, uint64_t x)
{
    return seg->addr + (x - seg->addr) / seg->page * seg->page;
}

/* ---- the alias table ------------------------------------------------------------------ */

static size_t alias_lower(const sublet_allocator *a, uint64_t page)
{
    size_t lo = 0, hi = a->naliases;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->aliases[mid].page < page)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool sl_stitch_is_alias(const sublet_allocator *a, uint64_t page)
{
    size_t i = alias_lower(a, page);
    return i < a->naliases && a->aliases[i].page == page;
}

static bool alias_reserve(sublet_allocator *a, size_t extra)
{
    if (a->naliases + extra <= a->aliases_cap)
        return true;
    size_t nc = a->aliases_cap ? a->aliases_cap * 2 : 8;
    while (nc < a->naliases + extra)
        nc *= 2;
    sl_alias *n = realloc(a->aliases, nc * sizeof *n);
    if (!n)
        return false;
    a->aliases = n;
    a->aliases_cap = nc;
    return true;
}

static void alias_insert(sublet_allocator *a, sl_alias e) /* room reserved */
{
    size_t i = alias_lower(a, e.page);
    memmove(&a->aliases[i + 1], &a->aliases[i], (a->naliases - i) * sizeof *a->aliases);
    a->aliases[i] = e;
    a->naliases++;
}

static void alias_remove_at(sublet_allocator *a, size_t i)
{
    memmove(&a->aliases[i], &a->aliases[i + 1], (a->naliases - i - 1) * sizeof *a->aliases);
    a->naliases--;
}

uint64_t sl_stitch_alias_bytes(const sublet_allocator *a, int kind)
{
    uint64_t n = 0;
    for (size_t i = 0; i < a->naliases; i++)
        if (a->aliases[i].vshadow->pool->kind == kind)
            n += a->aliases[i].vshadow->seg->page;
    return n;
}

void sl_stitch_fini(sublet_allocator *a)
{
    free(a->aliases);
    a->aliases = NULL;
    a->naliases = a->aliases_cap = 0;
}

/* ---- spare blocks: every host allocation is made before a device call -------------- */

typedef struct spares {
    sl_block *b[10];
    int n;
} spares;

static bool spares_get(sublet_allocator *a, spares *s, int n)
{
    s->n = 0;
    while (s->n < n) {
        if (!(s->b[s->n] = sl_block_new(&a->slab)))
            return false;
        s->n++;
    }
    return true;
}

static sl_block *spare_take(spares *s) { return s->b[--s->n]; }

static void spares_put(sublet_allocator *a, spares *s)
{
    while (s->n)
        sl_block_delete(&a->slab, s->b[--s->n]);
}

/* A block of `seg` for [addr, addr+size), linked after `after` (NULL: at
 * the segment's head). */
static sl_block *link_after(spares *s, sl_segment *seg, sl_block *after, uint64_t addr,
                            uint64_t size)
{
    sl_block *n = spare_take(s);
    n->addr = addr;
    n->size = size;
    n->stream = seg->stream;
    n->seg = seg;
    n->pool = seg->pool;
    n->mapped = true;
    n->prev = after;
    n->next = after ? after->next : seg->head;
    if (n->next)
        n->next->prev = n;
    if (after)
        after->next = n;
    else
        seg->head = n;
    return n;
}

static void unlink_delete(sublet_allocator *a, sl_block *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        b->seg->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    if (b->seg->stack_holder == b)
        b->seg->stack_holder = NULL;
    sl_block_delete(&a->slab, b);
}

/* ---- moving whole free pages (the first step) -------------------------------------- */

/* Whole pages inside a free block of a virtual segment: what unmapping it
 * gives back. */
static uint64_t whole_pages(const sl_block *b)
{
    uint64_t page = b->seg->page, off = b->addr - b->seg->addr;
    uint64_t begin = (off + page - 1) / page * page, end = (off + b->size) / page * page;
    return end > begin ? end - begin : 0;
}

/* Unmap the free pages of as few cached blocks as the request is short of
 * (the smallest block whose whole pages cover what is missing, else the
 * largest, and look again), never those of the run the request will be
 * mapped into.  The pages it does not need stay mapped where they are, so
 * a repeated workload near the device's capacity finds its layout again in
 * the next iteration instead of mapping everything anew
 * (release_cached_blocks unmaps every free page).  True when the device now
 * has room for the plan. */
bool sl_stitch_release_some(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                            uint64_t size)
{
    for (int round = 0; round < 64; round++) {
        uint64_t lo, hi, dev_free, dev_total;
        uint64_t need = sl_exp_plan(pool, stream, size, &lo, &hi);
        if (a->backend->ops->mem_info(a->backend, &dev_free, &dev_total) != SUBLET_OK)
            return false;
        if (need <= dev_free)
            return round > 0; /* round 0: the device was not what failed */
        uint64_t missing = need - dev_free;
        size_t n;
        bool oom;
        sl_block **all = sl_free_collect(pool, &n, &oom);
        if (!all)
            return false;
        sl_block *best = NULL, *largest = NULL;
        uint64_t best_pages = 0, largest_pages = 0;
        for (size_t i = 0; i < n; i++) {
            sl_block *b = all[i];
            if (!b->seg->expandable || (b->addr < hi && b->addr + b->size > lo))
                continue;
            uint64_t w = whole_pages(b);
            if (w >= missing && (!best || w < best_pages)) {
                best = b;
                best_pages = w;
            }
            if (w > largest_pages) {
                largest = b;
                largest_pages = w;
            }
        }
        free(all);
        sl_block *pick = best ? best : largest;
        if (!pick || sl_exp_unmap_block(a, pick) != SUBLET_OK)
            return false;
    }
    return false;
}

/* ---- stitching partly free pages (the second step) --------------------------------- */

/* A partly free page of an owner page: its free tail (the first page of a
 * free block that starts inside it) or its free head (the last page of a
 * free block that ends inside it). */
typedef struct piece {
    sl_block *src; /* the free block; NULL: none */
    uint64_t page; /* the owner page */
    uint64_t avail; /* free bytes at the page's end (tail) or start (head) */
} piece;

static bool piece_tail(const sublet_allocator *a, sl_block *b, piece *out)
{
    const sl_segment *seg = b->seg;
    uint64_t q = page_floor(seg, b->addr);
    if (q == b->addr || q + seg->page > b->addr + b->size || sl_stitch_is_alias(a, q))
        return false;
    *out = (piece){b, q, q + seg->page - b->addr};
    return true;
}

static bool piece_head(const sublet_allocator *a, sl_block *b, piece *out)
{
    const sl_segment *seg = b->seg;
    uint64_t end = b->addr + b->size, r = page_floor(seg, end);
    if (r == end || r < b->addr || sl_stitch_is_alias(a, r))
        return false;
    *out = (piece){b, r, end - r};
    return true;
}

/* A way to serve the request: the run starts at unmapped block u (in a
 * reservation of the request's stream): an alias page (tail) or, in place,
 * the free block c before u (or nothing); then k fresh pages; then an
 * alias page (head) or nothing. */
typedef struct plan {
    sl_block *u, *c;
    piece tail, head;
    uint64_t k, t_used, h_used;
    uint64_t lent, slack;
    int naliases;
    bool valid;
} plan;

static bool plan_better(const plan *p, const plan *best)
{
    if (!best->valid)
        return true;
    if (p->lent != best->lent)
        return p->lent < best->lent;
    if (p->naliases != best->naliases)
        return p->naliases < best->naliases;
    if (p->k != best->k)
        return p->k < best->k;
    if (p->slack != best->slack)
        return p->slack < best->slack;
    return false;
}

/* The partly free piece with the least avail >= want (best fit: larger
 * pieces stay for larger requests), other than `not_src`'s and page
 * `not_page`'s. */
static const piece *best_piece(const piece *v, size_t n, uint64_t want, const sl_block *not_src,
                               uint64_t not_page)
{
    const piece *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (v[i].avail >= want && v[i].src != not_src && v[i].page != not_page &&
            (!best || v[i].avail < best->avail))
            best = &v[i];
    return best;
}

static uint64_t div_up(uint64_t x, uint64_t y) { return (x + y - 1) / y; }

/* The free tails and heads a plan may alias (heads NULL: no aliasing). */
typedef struct pieces {
    const piece *tails;
    size_t ntails;
    const piece *heads;
    size_t nheads;
} pieces;

/* The best plan for `size` with at most `fresh` fresh pages. */
static plan find_plan(const sl_pool *pool, sublet_stream stream, uint64_t size, uint64_t fresh,
                      const pieces *pc, uint64_t page)
{
    const piece *tails = pc->tails, *heads = pc->heads;
    size_t ntails = pc->ntails, nheads = pc->nheads;
    plan best = {.valid = false};
    /* in place: the run grows from the free block before an unmapped one */
    sl_block *room = NULL; /* lowest unmapped block with room for a new run */
    uint64_t k1 = div_up(size, page) - 1; /* fresh pages beside one alias page */
    if (k1 > fresh)
        k1 = fresh;
    for (size_t i = 0; i < pool->nunmapped; i++) {
        sl_block *u = pool->unmapped[i];
        if (u->stream != stream || u->seg->page != page)
            continue;
        uint64_t upages = u->size / page;
        if (!room && upages >= k1 + 2)
            room = u;
        sl_block *c = is_free(u->prev) ? u->prev : NULL;
        uint64_t cap = c ? c->size : 0;
        if (cap >= size)
            continue;
        uint64_t k0 = div_up(size - cap, page);
        if (k0 <= fresh && k0 <= upages) {
            plan p = {.u = u, .c = c, .k = k0, .slack = cap + k0 * page - size, .valid = true};
            if (plan_better(&p, &best))
                best = p;
            continue;
        }
        if (!heads || k0 - 1 > fresh || k0 > upages)
            continue;
        uint64_t need = size - cap - (k0 - 1) * page;
        const piece *h = best_piece(heads, nheads, need, c, 0);
        if (!h)
            continue;
        plan p = {.u = u, .c = c, .head = *h, .k = k0 - 1, .h_used = need, .lent = need,
                  .slack = h->avail - need, .naliases = 1, .valid = true};
        if (plan_better(&p, &best))
            best = p;
    }
    /* a new run whose first page is an alias of a free tail */
    uint64_t need = size - k1 * page;
    for (size_t i = 0; i < ntails; i++) {
        const piece *t = &tails[i];
        plan p = {.u = room, .tail = *t, .k = k1, .lent = need, .valid = true};
        if (t->avail >= need) {
            p.t_used = need;
            p.slack = t->avail - need;
            p.naliases = 1;
        } else {
            const piece *h = best_piece(heads, nheads, need - t->avail, NULL, t->page);
            if (!h)
                continue;
            p.head = *h;
            p.t_used = t->avail;
            p.h_used = need - t->avail;
            p.slack = h->avail - p.h_used;
            p.naliases = 2;
        }
        if (plan_better(&p, &best))
            best = p;
    }
    return best;
}

/* Carve [lo, hi) out of free block b as a shadow block: b keeps what lies
 * before (when anything does), a new free block what lies after.  Returns
 * the shadow. */
static sl_block *lend(sl_block *b, uint64_t lo, uint64_t hi, spares *s)
{
    sl_pool *pool = b->pool;
    uint64_t end = b->addr + b->size;
    sl_free_remove(pool, b);
    sl_block *sh = b;
    if (lo > b->addr) {
        sh = link_after(s, b->seg, b, lo, hi - lo);
        b->size = lo - b->addr;
        sl_free_insert(pool, b);
    }
    if (hi < end)
        sl_free_insert(pool, link_after(s, b->seg, sh, hi, end - hi));
    sh->addr = lo;
    sh->size = hi - lo;
    sh->shadow = true;
    if (sh->seg->stack_holder == sh)
        sh->seg->stack_holder = NULL;
    return sh;
}

/* Carry out plan p.  Device calls first (undone on failure), then the
 * blocks, the alias table, the statistics and the trace events. */
static sublet_status commit(sublet_allocator *a, plan *p, uint64_t size, sl_block **out)
{
    sl_pool *pool = p->u->pool;
    sl_segment *seg = p->u->seg;
    const uint64_t page = seg->page;
    const bool fa = p->tail.src != NULL, la = p->head.src != NULL;
    const uint64_t npages = (uint64_t)fa + p->k + (uint64_t)la;
    const uint64_t start = p->u->addr, fresh_at = start + (fa ? page : 0);
    spares sp;
    if (!spares_get(a, &sp, 10) || !alias_reserve(a, 2) || !sl_unmapped_reserve(pool, 1)) {
        spares_put(a, &sp);
        return SUBLET_ERR_NO_MEMORY;
    }
    const sublet_backend_ops *ops = a->backend->ops;
    sublet_status st = SUBLET_OK;
    int done = 0; /* device calls made: 1 fresh, 2 fresh + first alias */
    if (p->k && (st = ops->va_map(a->backend, fresh_at, p->k * page)) != SUBLET_OK)
        goto undo;
    done = 1;
    if (fa && (st = ops->va_map_alias(a->backend, start, p->tail.page, page)) != SUBLET_OK)
        goto undo;
    done = 2;
    if (la && (st = ops->va_map_alias(a->backend, fresh_at + p->k * page, p->head.page, page)) !=
                  SUBLET_OK)
        goto undo;

    /* the owners: the lent ranges become shadow blocks (the head first: when
     * both come from one free block, the tail lies in what stays of it) */
    sl_block *h_own = NULL, *t_own = NULL;
    if (la) {
        sl_emit(a, SUBLET_ACT_SEGMENT_UNMAP, p->head.page, p->h_used, p->head.src->stream,
                a->cur_stack);
        h_own = lend(p->head.src, p->head.page, p->head.page + p->h_used, &sp);
    }
    if (fa) {
        uint64_t tend = p->tail.page + page;
        sl_emit(a, SUBLET_ACT_SEGMENT_UNMAP, tend - p->t_used, p->t_used, p->tail.src->stream,
                a->cur_stack);
        t_own = lend(p->tail.src, tend - p->t_used, tend, &sp);
    }

    /* the run: [tail shadow] block [free rest | head shadow], then what is
     * left of u stays unmapped */
    sl_block *u = p->u;
    sl_unmapped_remove(pool, u);
    uint64_t run_end = start + npages * page, u_end = u->addr + u->size;
    sl_block *before = u->prev;
    sl_block *t_sh = NULL, *h_sh = NULL, *blk;
    uint64_t usable_lo = start;
    if (fa) {
        t_sh = link_after(&sp, seg, before, start, page - p->t_used);
        t_sh->shadow = true;
        before = t_sh;
        usable_lo = start + page - p->t_used;
    }
    if (p->c) {
        blk = p->c;
        sl_free_remove(pool, blk);
        blk->size = size;
    } else {
        blk = link_after(&sp, seg, before, usable_lo, size);
    }
    uint64_t blk_end = blk->addr + size;
    sl_block *rest = NULL;
    if (la) {
        h_sh = link_after(&sp, seg, blk, blk_end, run_end - blk_end);
        h_sh->shadow = true;
    } else if (blk_end < run_end) {
        rest = link_after(&sp, seg, blk, blk_end, run_end - blk_end);
    }
    /* u itself: the rest of the unmapped range, or gone */
    if (run_end < u_end) {
        u->addr = run_end;
        u->size = u_end - run_end;
        sl_unmapped_insert(pool, u);
    } else {
        unlink_delete(a, u);
    }
    if (rest) { /* the free rest of the last page meets what follows u */
        sl_try_merge(a, rest, rest->next);
        sl_free_insert(pool, rest);
    }
    if (fa)
        alias_insert(a, (sl_alias){.page = start, .owner = p->tail.page, .off = page - p->t_used,
                                   .len = p->t_used, .vshadow = t_sh, .oshadow = t_own});
    if (la)
        alias_insert(a, (sl_alias){.page = run_end - page, .owner = p->head.page, .off = 0,
                                   .len = p->h_used, .vshadow = h_sh, .oshadow = h_own});
    uint64_t fresh = p->k * page;
    a->total_allocated_memory += fresh;
    if (fresh)
        sl_arr_inc(a->stats.reserved_bytes, pool->kind, (int64_t)fresh);
    a->stats.num_device_alloc += (uint64_t)(p->k > 0) + (uint64_t)fa + (uint64_t)la;
    if (pool->owner) { /* a private pool's share; one cudaMalloc_count, as an
                        * allocation that maps (expandable.c) */
        if (fresh)
            sl_arr_inc(pool->owner->stats.reserved_bytes, pool->kind, (int64_t)fresh);
        pool->owner->stats.num_device_alloc += (uint64_t)(p->k > 0) + (uint64_t)fa + (uint64_t)la;
        pool->owner->malloc_count++;
    }
    uint64_t usable_hi = la ? run_end - page + p->h_used : run_end;
    sl_emit(a, SUBLET_ACT_SEGMENT_MAP, usable_lo, usable_hi - usable_lo, seg->stream,
            a->cur_stack);
    spares_put(a, &sp);
    *out = blk;
    return SUBLET_OK;

undo:
    if (done >= 2 && fa)
        (void)ops->va_unmap(a->backend, start, page);
    if (done >= 1 && p->k)
        (void)ops->va_unmap(a->backend, fresh_at, p->k * page);
    spares_put(a, &sp);
    return st == SUBLET_ERR_NO_MEMORY ? st : SUBLET_ERR_DEVICE_OOM;
}

/* policy:stitch's second step (see the top of this file).  SUBLET_OK with
 * *out out of the free index (as sl_exp_allocate), SUBLET_ERR_DEVICE_OOM
 * when no plan fits the device or a device call failed (nothing changed). */
sublet_status sl_stitch_alloc(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                              uint64_t size, sl_block **out)
{
    uint64_t dev_free = 0, dev_total = 0;
    sublet_status st = a->backend->ops->mem_info(a->backend, &dev_free, &dev_total);
    if (st != SUBLET_OK)
        return st;
    if (a->limit_in_effect) {
        uint64_t room = a->allowed_memory_maximum > a->total_allocated_memory
                            ? a->allowed_memory_maximum - a->total_allocated_memory
                            : 0;
        if (room < dev_free)
            dev_free = room;
    }
    const uint64_t page = SL_SMALL_BUFFER; /* policy:stitch's page, every request class */
    const uint64_t fresh = dev_free / page;
    bool alias = a->backend->ops->va_map_alias != NULL;
    piece *tails = NULL, *heads = NULL;
    size_t ntails = 0, nheads = 0, n = 0;
    sl_block **all = NULL;
    if (alias) {
        bool oom = false;
        all = sl_free_collect(pool, &n, &oom);
        if (oom)
            return SUBLET_ERR_NO_MEMORY;
        tails = malloc((n ? n : 1) * sizeof *tails);
        heads = malloc((n ? n : 1) * sizeof *heads);
        if (!tails || !heads) {
            free(all);
            free(tails);
            free(heads);
            return SUBLET_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i < n; i++) {
            sl_block *b = all[i];
            if (b->stream != stream || !b->seg->expandable || b->seg->page != page)
                continue;
            ntails += piece_tail(a, b, &tails[ntails]);
            nheads += piece_head(a, b, &heads[nheads]);
        }
        free(all);
    }
    pieces pc = {tails, ntails, alias ? heads : NULL, nheads};
    plan p = find_plan(pool, stream, size, fresh, &pc, page);
    free(tails);
    free(heads);
    if (!p.valid)
        return SUBLET_ERR_DEVICE_OOM;
    if (!p.u) { /* no unmapped range with room: a new reservation */
        st = sl_exp_new_segment(a, pool, stream, &p.u);
        if (st != SUBLET_OK)
            return st;
        if (p.u->size / page < (uint64_t)(p.tail.src != NULL) + p.k + (p.head.src != NULL))
            return SUBLET_ERR_DEVICE_OOM;
    }
    return commit(a, &p, size, out);
}

/* ---- giving stitched pages back -------------------------------------------------------- */

/* Return alias i when every usable byte of it is free: unmap the alias page
 * (its physical page stays with the owner), make the owner's shadow free.
 * *returned tells whether it was. */
static sublet_status give_back(sublet_allocator *a, size_t i, bool *returned)
{
    sl_alias e = a->aliases[i];
    sl_block *vs = e.vshadow, *os = e.oshadow;
    sl_segment *seg = vs->seg;
    sl_pool *pool = vs->pool;
    const uint64_t page = seg->page;
    const bool tail = e.off > 0;
    sl_block *u = tail ? vs->next : vs->prev; /* the free block holding the usable bytes */
    *returned = false;
    if (!is_free(u) || !u->in_free || (tail ? u->addr + u->size < e.page + page : u->addr > e.page))
        return SUBLET_OK;
    spares sp;
    if (!spares_get(a, &sp, 1) || !sl_unmapped_reserve(pool, 1) ||
        !sl_pool_tree(pool, vs->stream, true) || !sl_pool_tree(os->pool, os->stream, true)) {
        spares_put(a, &sp);
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_status st = a->backend->ops->va_unmap(a->backend, e.page, page);
    if (st != SUBLET_OK) {
        spares_put(a, &sp);
        return st;
    }
    sl_emit(a, SUBLET_ACT_SEGMENT_UNMAP, e.page + e.off, e.len, vs->stream,
            a->op_stack ? a->op_stack : seg->stack);
    /* the view: u's part inside the page and the shadow become one unmapped
     * block; what u has outside the page stays free */
    sl_free_remove(pool, u);
    if (tail && u->addr + u->size > e.page + page) {
        sl_free_insert(pool, link_after(&sp, seg, u, e.page + page,
                                        u->addr + u->size - (e.page + page)));
        u->size = e.page + page - u->addr;
    } else if (!tail && u->addr < e.page) {
        sl_block *w = link_after(&sp, seg, u->prev, u->addr, e.page - u->addr);
        sl_free_insert(pool, w);
        u->addr = e.page;
        u->size = e.len;
    }
    unlink_delete(a, u);
    vs->addr = e.page;
    vs->size = page;
    vs->shadow = false;
    vs->mapped = false;
    sl_try_merge(a, vs, vs->prev);
    sl_try_merge(a, vs, vs->next);
    /* the owner: the lent bytes are free again there */
    sl_emit(a, SUBLET_ACT_SEGMENT_MAP, os->addr, os->size, os->stream,
            a->op_stack ? a->op_stack : os->seg->stack);
    os->shadow = false;
    sl_try_merge(a, os, os->prev);
    sl_try_merge(a, os, os->next);
    sl_free_insert(os->pool, os);
    alias_remove_at(a, i);
    a->stats.num_device_free++;
    if (pool->owner) {
        pool->owner->stats.num_device_free++;
        if (pool->owner->malloc_count > 0)
            pool->owner->malloc_count--;
    }
    spares_put(a, &sp);
    *returned = true;
    sl_unmapped_insert(pool, vs);
    if (!vs->prev && !vs->next) /* the reservation holds nothing any more */
        return sl_exp_release_segment(a, vs);
    return SUBLET_OK;
}

/* Return every stitch whose usable bytes are all free (release_cached_blocks,
 * before the whole free pages are unmapped). */
sublet_status sl_stitch_return_all(sublet_allocator *a)
{
    sublet_status st = SUBLET_OK;
    for (size_t i = a->naliases; i-- > 0 && st == SUBLET_OK;) {
        bool returned;
        st = give_back(a, i, &returned);
    }
    return st;
}

/* ---- the invariants (sublet_check) ------------------------------------------------------ */

static sublet_status bad(char *msg, size_t cap, const sl_alias *e, const char *what)
{
    if (msg && cap) {
        char buf[160];
        int n = snprintf(buf, sizeof buf, "alias page 0x%llx (owner 0x%llx): %s",
                         (unsigned long long)e->page, (unsigned long long)e->owner, what);
        (void)n;
        size_t len = strlen(buf);
        if (len >= cap)
            len = cap - 1;
        memcpy(msg, buf, len);
        msg[len] = '\0';
    }
    return SUBLET_ERR_CORRUPT;
}

static int cmp_ptr(const void *x, const void *y)
{
    uintptr_t p = (uintptr_t) * (sl_block *const *)x, q = (uintptr_t) * (sl_block *const *)y;
    return p < q ? -1 : p > q;
}

/* Every alias page maps an owner page (not itself an alias) of the same
 * stream and pool; its shadow block and the owner's shadow block are exactly
 * the complement of, and exactly, its usable range; the usable range is
 * covered by usable blocks; no two aliases lend the same bytes; the shadow
 * blocks the tiling walk found (`shadows`) are exactly these.  Together:
 * every physical byte is usable through one view. */
sublet_status sl_stitch_verify(sublet_allocator *a, size_t shadows, char *msg, size_t cap)
{
    if (shadows != 2 * a->naliases) {
        sl_alias none = {0};
        return bad(msg, cap, &none, "shadow blocks do not match the alias table");
    }
    sl_block **own = malloc((a->naliases ? a->naliases : 1) * sizeof *own);
    if (!own)
        return SUBLET_OK; /* nothing to compare with; the rest was checked */
    sublet_status st = SUBLET_OK;
    for (size_t i = 0; i < a->naliases && st == SUBLET_OK; i++) {
        const sl_alias *e = &a->aliases[i];
        const sl_segment *seg = sl_segment_find(a, e->page), *oseg = sl_segment_find(a, e->owner);
        uint64_t page = seg ? seg->page : 0;
        own[i] = e->oshadow;
        if (i && a->aliases[i - 1].page >= e->page)
            st = bad(msg, cap, e, "alias table out of order");
        else if (!seg || !seg->expandable || (e->page - seg->addr) % page ||
                 e->page + page > seg->addr + seg->size)
            st = bad(msg, cap, e, "not a page of a virtual reservation");
        else if (!oseg || !oseg->expandable || oseg->page != page ||
                 (e->owner - oseg->addr) % page || oseg->stream != seg->stream ||
                 oseg->pool != seg->pool || e->owner == e->page ||
                 sl_stitch_is_alias(a, e->owner))
            st = bad(msg, cap, e, "its owner is not a page of the same stream and pool");
        else if (e->len == 0 || e->len >= page || (e->off != 0 && e->off + e->len != page) ||
                 e->len % SL_MIN_BLOCK)
            st = bad(msg, cap, e, "its usable range is neither a page's head nor its tail");
        else if (e->vshadow->seg != seg || !e->vshadow->shadow || !e->vshadow->mapped ||
                 e->vshadow->addr != (e->off ? e->page : e->page + e->len) ||
                 e->vshadow->size != page - e->len)
            st = bad(msg, cap, e, "its shadow block is not the rest of the page");
        else if (e->oshadow->seg != oseg || !e->oshadow->shadow || !e->oshadow->mapped ||
                 e->oshadow->addr != e->owner + e->off || e->oshadow->size != e->len)
            st = bad(msg, cap, e, "the owner's shadow block is not the lent range");
        if (st != SUBLET_OK)
            break;
        /* the usable bytes: mapped blocks of the view that are not shadows */
        uint64_t lo = e->page + e->off, hi = lo + e->len;
        if (e->off) {
            for (const sl_block *b = e->vshadow->next; b && b->addr < hi; b = b->next)
                if (!b->mapped || b->shadow || (b == e->vshadow->next && b->addr != lo))
                    st = bad(msg, cap, e, "its usable bytes are not usable blocks");
            if (!e->vshadow->next)
                st = bad(msg, cap, e, "its usable bytes are not usable blocks");
        } else {
            for (const sl_block *b = e->vshadow->prev; b && b->addr + b->size > lo; b = b->prev)
                if (!b->mapped || b->shadow || (b == e->vshadow->prev && b->addr + b->size != hi))
                    st = bad(msg, cap, e, "its usable bytes are not usable blocks");
            if (!e->vshadow->prev)
                st = bad(msg, cap, e, "its usable bytes are not usable blocks");
        }
    }
    if (st == SUBLET_OK && a->naliases > 1) {
        qsort(own, a->naliases, sizeof *own, cmp_ptr);
        for (size_t i = 1; i < a->naliases; i++)
            if (own[i] == own[i - 1]) {
                sl_alias none = {0};
                st = bad(msg, cap, &none, "two aliases lend the same bytes");
                break;
            }
    }
    free(own);
    return st;
}
