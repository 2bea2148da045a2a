/* sublet — private pools (docs/rules.md §2.3, §4.5; PyTorch's PrivatePool,
 * beginAllocateToPool, endAllocateToPool, releasePool, MemPool).
 *
 * A private pool is two more sl_pools (small, large) whose blocks point back
 * to it through sl_pool.owner: the free index, the split and merge rules and
 * the malloc ladder of engine.c serve it unchanged, and no block ever moves
 * to another pool.  While a redirection is active (a->nredirects != 0, the
 * one test the default hot path pays), get_pool asks the redirections'
 * filters: a stream (graph capture), a thread (use_mem_pool) or a caller's
 * predicate (a drop-in's std::function).  Releasing
 * (release_cached_blocks with freeable pools) lives in engine.c. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/index.h"
#include "engine/pools_internal.h"
#include "engine/release.h"
#include "engine/segs.h"

static bool id_eq(sublet_pool_id x, sublet_pool_id y)
{
    return x.first == y.first && x.second == y.second;
}

static bool id_default(sublet_pool_id id) { return id.first == 0 && id.second == 0; }

sl_private *sl_private_find(const sublet_allocator *a, sublet_pool_id id)
{
    for (size_t i = 0; i < a->nprivs; i++)
        if (id_eq(a->privs[i]->id, id))
            return a->privs[i];
    return NULL;
}

static bool redirect_accepts(const sl_redirect *r, sublet_stream stream)
{
    if (r->filter == SUBLET_POOL_FILTER_STREAM)
        return r->stream == stream;
    if (r->filter == SUBLET_POOL_FILTER_CALLBACK)
        return r->fn(r->user, stream) != 0;
    return pthread_equal(r->thread, pthread_self()) != 0;
}

sl_pool *sl_redirect_pool(sublet_allocator *a, uint64_t size, sublet_stream stream)
{
    /* PyTorch 2.6 walks captures_underway from its oldest entry; later
     * releases from the most recent one (§1.4) */
    bool newest_first = sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 9));
    for (size_t k = 0; k < a->nredirects; k++) {
        const sl_redirect *r = &a->redirects[newest_first ? a->nredirects - 1 - k : k];
        if (redirect_accepts(r, stream)) /* policy:stitch: one pool, as sl_pool_for */
            return sl_rule_small(size) && a->settings.policy != SUBLET_POLICY_STITCH
                       ? &r->pool->small
                       : &r->pool->large;
    }
    return NULL;
}

sl_private *sl_thread_pool(const sublet_allocator *a)
{
    for (size_t k = a->nredirects; k-- > 0;)
        if (a->redirects[k].filter == SUBLET_POOL_FILTER_THREAD &&
            pthread_equal(a->redirects[k].thread, pthread_self()))
            return a->redirects[k].pool;
    return NULL;
}

static bool redirected(const sublet_allocator *a, const sl_private *p)
{
    for (size_t k = 0; k < a->nredirects; k++)
        if (a->redirects[k].pool == p)
            return true;
    return false;
}

/* A new pool record with use count 1 (ensure_exists_and_incref_pool). */
static sl_private *private_new(sublet_allocator *a, sublet_pool_id id,
                               const sublet_pool_options *o)
{
    if (a->nprivs == a->privs_cap) {
        size_t nc = a->privs_cap ? a->privs_cap * 2 : 4;
        sl_private **n = realloc(a->privs, nc * sizeof *n);
        if (!n)
            return NULL;
        a->privs = n;
        a->privs_cap = nc;
    }
    sl_private *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->id = id;
    p->small = (sl_pool){.is_small = true, .kind = SUBLET_POOL_SMALL, .owner = p};
    p->large = (sl_pool){.is_small = false, .kind = SUBLET_POOL_LARGE, .owner = p};
    p->use_count = 1;
    if (o) {
        p->use_on_oom = o->use_on_oom != 0;
        p->no_split = o->no_split != 0;
        p->alloc_fn = o->alloc;
        p->free_fn = o->free;
        p->alloc_user = o->user;
    }
    p->stats.version = SUBLET_STATS_VERSION;
    p->stats.struct_size = sizeof(sublet_stats);
    p->stats.max_split_size = a->stats.max_split_size;
    p->slot = a->nprivs;
    a->privs[a->nprivs++] = p;
    return p;
}

void sl_private_delete(sublet_allocator *a, sl_private *p)
{
    size_t i = p->slot;
    memmove(a->privs + i, a->privs + i + 1, (a->nprivs - i - 1) * sizeof *a->privs);
    a->nprivs--;
    for (; i < a->nprivs; i++)
        a->privs[i]->slot = i;
    sl_pool_fini(&p->small);
    sl_pool_fini(&p->large);
    free(p);
}

/* ---- graph_capture_record_stream_reuse (§4.6) ---------------------------------------
 *
 * PyTorch walks the capture graph back from a stream's terminal nodes; sublet
 * knows of the graph only what sublet_pool_stream_wait tells it, and keeps it
 * as clocks: each stream's count of free markers put on it, and for each
 * (waiter, signaler) the count of the signaler the waiter has waited for,
 * directly or through other streams.  A marker (T, n) is an ancestor of S's
 * current work when S is T, or S has seen T up to n or later. */

static sl_cap_stream *cap_stream(sublet_allocator *a, sublet_stream s, bool create)
{
    for (size_t i = 0; i < a->ncap_streams; i++)
        if (a->cap_streams[i].stream == s)
            return &a->cap_streams[i];
    if (!create)
        return NULL;
    if (a->ncap_streams == a->cap_streams_cap) {
        size_t nc = a->cap_streams_cap ? a->cap_streams_cap * 2 : 8;
        sl_cap_stream *n = realloc(a->cap_streams, nc * sizeof *n);
        if (!n)
            return NULL;
        a->cap_streams = n;
        a->cap_streams_cap = nc;
    }
    a->cap_streams[a->ncap_streams] = (sl_cap_stream){.stream = s};
    return &a->cap_streams[a->ncap_streams++];
}

static uint64_t seen_upto(const sublet_allocator *a, sublet_stream waiter, sublet_stream signaler)
{
    for (size_t i = 0; i < a->ncap_seen; i++)
        if (a->cap_seen[i].waiter == waiter && a->cap_seen[i].signaler == signaler)
            return a->cap_seen[i].upto;
    return 0;
}

/* Raise what `waiter` has seen of `signaler` to `upto`. */
static bool see(sublet_allocator *a, sublet_stream waiter, sublet_stream signaler, uint64_t upto)
{
    if (waiter == signaler)
        return true;
    for (size_t i = 0; i < a->ncap_seen; i++)
        if (a->cap_seen[i].waiter == waiter && a->cap_seen[i].signaler == signaler) {
            if (a->cap_seen[i].upto < upto)
                a->cap_seen[i].upto = upto;
            return true;
        }
    if (a->ncap_seen == a->cap_seen_cap) {
        size_t nc = a->cap_seen_cap ? a->cap_seen_cap * 2 : 8;
        sl_cap_seen *n = realloc(a->cap_seen, nc * sizeof *n);
        if (!n)
            return false;
        a->cap_seen = n;
        a->cap_seen_cap = nc;
    }
    a->cap_seen[a->ncap_seen++] = (sl_cap_seen){waiter, signaler, upto};
    return true;
}

/* Is `s` part of a capture: a capture's own stream, or one that waited on a
 * capturing stream (a stream joins a capture that way in CUDA)?  Redirections
 * with the thread filter (use_mem_pool) capture nothing. */
static bool capturing(const sublet_allocator *a, sublet_stream s)
{
    for (size_t k = 0; k < a->nredirects; k++)
        if (a->redirects[k].filter == SUBLET_POOL_FILTER_STREAM && a->redirects[k].stream == s)
            return true;
    for (size_t i = 0; i < a->ncap_streams; i++)
        if (a->cap_streams[i].stream == s)
            return a->cap_streams[i].joined;
    return false;
}

sublet_status sublet_pool_stream_wait(sublet_allocator *a, sublet_stream waiter,
                                      sublet_stream signaler)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = SUBLET_OK;
    if (!a->nredirects || waiter == signaler || !a->settings.graph_capture_record_stream_reuse)
        goto out; /* no capture graph to record it in */
    sl_cap_stream *w = cap_stream(a, waiter, true), *g = cap_stream(a, signaler, true);
    if (!w || !g) {
        st = SUBLET_ERR_NO_MEMORY;
        goto out;
    }
    w = cap_stream(a, waiter, false); /* the second call may have moved the array */
    if (capturing(a, signaler))
        w->joined = true;
    uint64_t upto = g->count;
    if (!see(a, waiter, signaler, upto)) {
        st = SUBLET_ERR_NO_MEMORY;
        goto out;
    }
    /* and what the signaler has seen, transitively (the array may grow) */
    for (size_t i = 0; i < a->ncap_seen; i++)
        if (a->cap_seen[i].waiter == signaler &&
            !see(a, waiter, a->cap_seen[i].signaler, a->cap_seen[i].upto)) {
            st = SUBLET_ERR_NO_MEMORY;
            break;
        }
out:
    sl_unlock(a);
    return st;
}

static bool mark_add(sublet_allocator *a, sl_cap_mark m)
{
    if (a->ncap_marks == a->cap_marks_cap) {
        size_t nc = a->cap_marks_cap ? a->cap_marks_cap * 2 : 8;
        sl_cap_mark *n = realloc(a->cap_marks, nc * sizeof *n);
        if (!n)
            return false;
        a->cap_marks = n;
        a->cap_marks_cap = nc;
    }
    a->cap_marks[a->ncap_marks++] = m;
    return true;
}

void sl_capture_mark(sublet_allocator *a, sl_block *b)
{
    const sublet_stream *uses = sl_uses(b);
    bool all = capturing(a, b->stream);
    for (uint32_t i = 0; all && i < b->nuses; i++)
        all = capturing(a, uses[i]);
    if (!all) /* no markers: the block waits for the end of the captures */
        return;
    size_t first = a->ncap_marks;
    for (uint32_t i = 0; i <= b->nuses; i++) {
        sublet_stream s = i < b->nuses ? uses[i] : b->stream;
        sl_cap_stream *c = cap_stream(a, s, true);
        if (!c || !mark_add(a, (sl_cap_mark){.block = b, .stream = s, .at = ++c->count})) {
            a->ncap_marks = first; /* no markers: it waits for the end */
            return;
        }
    }
}

bool sl_capture_ready(const sublet_allocator *a, const sl_block *b, sublet_stream stream)
{
    bool any = false;
    for (size_t i = 0; i < a->ncap_marks; i++) {
        const sl_cap_mark *m = &a->cap_marks[i];
        if (m->block != b)
            continue;
        if (m->stream != stream && seen_upto(a, stream, m->stream) < m->at)
            return false;
        any = true;
    }
    return any;
}

void sl_capture_unmark(sublet_allocator *a, const sl_block *b)
{
    for (size_t i = 0; i < a->ncap_marks;)
        if (a->cap_marks[i].block == b)
            a->cap_marks[i] = a->cap_marks[--a->ncap_marks];
        else
            i++;
}

void sl_capture_graph_reset(sublet_allocator *a)
{
    /* the counts stay: a marker put before never matches a later capture's
     * waits by accident */
    for (size_t i = 0; i < a->ncap_streams; i++)
        a->cap_streams[i].joined = false;
    a->ncap_seen = 0;
}

void sl_pools_fini(sublet_allocator *a)
{
    while (a->nprivs)
        sl_private_delete(a, a->privs[a->nprivs - 1]);
    free(a->privs);
    free(a->redirects);
    free(a->deferred);
    free(a->capture_uses);
    free(a->cap_streams);
    free(a->cap_seen);
    free(a->cap_marks);
    a->cap_streams = NULL;
    a->cap_seen = NULL;
    a->cap_marks = NULL;
    a->privs = NULL;
    a->redirects = NULL;
    a->deferred = NULL;
    a->capture_uses = NULL;
}

/* ensure_exists_and_incref_pool */
static sublet_status incref(sublet_allocator *a, sublet_pool_id id, const sublet_pool_options *o,
                            sl_private **out)
{
    sl_private *p = sl_private_find(a, id);
    if (p) {
        if (p->use_count <= 0) /* PyTorch asserts: the pool is no longer live */
            return SUBLET_ERR_INVALID_ARGUMENT;
        p->use_count++;
    } else if (!(p = private_new(a, id, o))) {
        return SUBLET_ERR_NO_MEMORY;
    }
    if (out)
        *out = p;
    return SUBLET_OK;
}

static bool options_ok(const sublet_pool_options *o)
{
    return !o || (!o->alloc == !o->free);
}

sublet_status sublet_pool_handle(sublet_allocator *a, int space, sublet_pool_id *out)
{
    if (!a || !out || (space != SUBLET_POOL_ID_GRAPH && space != SUBLET_POOL_ID_USER))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    uint64_t n = a->next_pool_id[space]++;
    *out = space == SUBLET_POOL_ID_GRAPH ? (sublet_pool_id){n, 0} : (sublet_pool_id){0, n};
    sl_unlock(a);
    return SUBLET_OK;
}

sublet_status sublet_pool_create(sublet_allocator *a, const sublet_pool_options *opts,
                                 sublet_pool_id *out)
{
    if (!a || !out || !options_ok(opts))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_pool_id id = {0, a->next_pool_id[SUBLET_POOL_ID_USER]};
    sublet_status st = incref(a, id, opts, NULL);
    if (st == SUBLET_OK) {
        a->next_pool_id[SUBLET_POOL_ID_USER]++;
        *out = id;
    }
    sl_unlock(a);
    return st;
}

sublet_status sublet_pool_incref(sublet_allocator *a, sublet_pool_id id)
{
    if (!a || id_default(id))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = incref(a, id, NULL, NULL);
    sl_unlock(a);
    return st;
}

static sublet_status begin_allocate(sublet_allocator *a, sublet_pool_id id, sl_redirect r)
{
    sl_lock(a);
    sublet_status st = SUBLET_OK;
    sl_private *p = NULL;
    if (a->nredirects == a->redirects_cap) {
        size_t nc = a->redirects_cap ? a->redirects_cap * 2 : 4;
        sl_redirect *n = realloc(a->redirects, nc * sizeof *n);
        if (!n) {
            st = SUBLET_ERR_NO_MEMORY;
            goto out;
        }
        a->redirects = n;
        a->redirects_cap = nc;
    }
    if ((st = incref(a, id, NULL, &p)) != SUBLET_OK)
        goto out;
    /* PyTorch checks after the incref: a refused begin keeps the use */
    if (redirected(a, p)) {
        st = SUBLET_ERR_BUSY; /* beginAllocateToPool: already recording to mempool_id */
        goto out;
    }
    r.pool = p;
    r.thread = pthread_self();
    a->redirects[a->nredirects++] = r;
out:
    sl_unlock(a);
    return st;
}

sublet_status sublet_pool_begin_allocate(sublet_allocator *a, sublet_pool_id id, int filter,
                                         sublet_stream stream)
{
    if (!a || id_default(id) ||
        (filter != SUBLET_POOL_FILTER_STREAM && filter != SUBLET_POOL_FILTER_THREAD))
        return SUBLET_ERR_INVALID_ARGUMENT;
    return begin_allocate(a, id, (sl_redirect){.filter = filter, .stream = stream});
}

sublet_status sublet_pool_begin_allocate_fn(sublet_allocator *a, sublet_pool_id id,
                                            sublet_pool_filter_fn fn, void *user)
{
    if (!a || id_default(id) || !fn)
        return SUBLET_ERR_INVALID_ARGUMENT;
    return begin_allocate(a, id,
                          (sl_redirect){.filter = SUBLET_POOL_FILTER_CALLBACK, .fn = fn,
                                        .user = user});
}

sublet_status sublet_pool_end_allocate(sublet_allocator *a, sublet_pool_id id)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT; /* not currently recording to mempool_id */
    for (size_t k = 0; k < a->nredirects; k++)
        if (id_eq(a->redirects[k].pool->id, id)) {
            memmove(a->redirects + k, a->redirects + k + 1,
                    (a->nredirects - k - 1) * sizeof *a->redirects);
            a->nredirects--;
            if (!a->nredirects)
                sl_capture_graph_reset(a);
            st = SUBLET_OK;
            break;
        }
    sl_unlock(a);
    return st;
}

sublet_status sublet_pool_release(sublet_allocator *a, sublet_pool_id id)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = SUBLET_OK;
    sl_private *p = sl_private_find(a, id);
    if (!p || p->use_count <= 0 || (p->use_count == 1 && redirected(a, p)))
        st = SUBLET_ERR_INVALID_ARGUMENT; /* unknown, already freeable, or still in use */
    else if (--p->use_count == 0)
        p->freeable = true;
    sl_unlock(a);
    return st;
}

sublet_status sublet_pool_empty_cache(sublet_allocator *a, sublet_pool_id id)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    sl_private *p = id_default(id) ? NULL : sl_private_find(a, id);
    if (p)
        st = sl_release_cached(a, p);
    else if (!id_default(id))
        st = SUBLET_OK; /* already forgotten: nothing of it is cached */
    sl_unlock(a);
    return st;
}

static uint64_t pool_free_bytes(const sl_pool *p)
{
    uint64_t n = 0;
    for (size_t t = 0; t < p->ntrees; t++)
        n += p->trees[t].bytes;
    return n;
}

sublet_status sublet_pool_info_read(sublet_allocator *a, sublet_pool_id id,
                                    sublet_pool_info *out)
{
    if (!a || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    sl_lock(a);
    sl_private *p = sl_private_find(a, id);
    if (p) {
        out->exists = 1;
        out->use_count = p->use_count;
        out->device_segments = p->malloc_count;
        out->freeable = p->freeable;
        out->allocating = redirected(a, p);
        out->free_bytes = pool_free_bytes(&p->small) + pool_free_bytes(&p->large);
    }
    sl_unlock(a);
    return SUBLET_OK;
}

sublet_status sublet_pool_stats_read(sublet_allocator *a, sublet_pool_id id, sublet_stats *out)
{
    if (!a || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sl_private *p = sl_private_find(a, id);
    if (p)
        *out = p->stats;
    sl_unlock(a);
    return p ? SUBLET_OK : SUBLET_ERR_INVALID_ARGUMENT;
}

static int reserved_cmp(const void *x, const void *y)
{
    const sublet_pool_reserved *p = x, *q = y;
    if (p->id[0] != q->id[0])
        return p->id[0] < q->id[0] ? -1 : 1;
    return p->id[1] < q->id[1] ? -1 : p->id[1] > q->id[1];
}

sublet_status sublet_pool_reserved_read(sublet_allocator *a, sublet_pool_reserved *out,
                                        size_t cap, size_t *n)
{
    if (!a || !n || (cap && !out))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    /* only the newest release has the keys (docs/rules.md §7) */
    size_t total = a->settings.pytorch_version == SUBLET_PYTORCH_NEWEST ? a->nprivs : 0;
    sublet_pool_reserved *all = total ? malloc(total * sizeof *all) : NULL;
    sublet_status st = total && !all ? SUBLET_ERR_NO_MEMORY : SUBLET_OK;
    if (all) {
        for (size_t i = 0; i < total; i++) {
            all[i].id[0] = a->privs[i]->id.first;
            all[i].id[1] = a->privs[i]->id.second;
            memcpy(all[i].reserved_bytes, a->privs[i]->stats.reserved_bytes,
                   sizeof all[i].reserved_bytes);
        }
        qsort(all, total, sizeof *all, reserved_cmp);
        if (cap)
            memcpy(out, all, (total < cap ? total : cap) * sizeof *all);
        free(all);
    }
    *n = st == SUBLET_OK ? total : 0;
    sl_unlock(a);
    return st;
}

sublet_status sublet_pool_of(sublet_allocator *a, const void *ptr, sublet_pool_id *out)
{
    if (!a || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sl_segment *seg = sl_segment_find(a, (uint64_t)(uintptr_t)ptr);
    if (seg)
        *out = sl_pool_id_of(seg->pool);
    sl_unlock(a);
    return seg ? SUBLET_OK : SUBLET_ERR_INVALID_POINTER;
}
