/* sublet — private pools (reference §2.3, §4.5; PyTorch's PrivatePool,
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
        if (redirect_accepts(r, stream))
            return size <= SL_SMALL_SIZE ? &r->pool->small : &r->pool->large;
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

void sl_pools_fini(sublet_allocator *a)
{
    while (a->nprivs)
        sl_private_delete(a, a->privs[a->nprivs - 1]);
    free(a->privs);
    free(a->redirects);
    free(a->deferred);
    free(a->capture_uses);
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
    sublet_status st = a->settings.policy == SUBLET_POLICY_STITCH ? SUBLET_ERR_UNSUPPORTED
                                                                   : incref(a, id, opts, NULL);
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
    sublet_status st = a->settings.policy == SUBLET_POLICY_STITCH ? SUBLET_ERR_UNSUPPORTED
                                                                   : incref(a, id, NULL, NULL);
    sl_unlock(a);
    return st;
}

static sublet_status begin_allocate(sublet_allocator *a, sublet_pool_id id, sl_redirect r)
{
    sl_lock(a);
    sublet_status st = SUBLET_OK;
    sl_private *p = NULL;
    if (a->settings.policy == SUBLET_POLICY_STITCH) {
        st = SUBLET_ERR_UNSUPPORTED; /* stitching never moves a block across pools: not yet */
        goto out;
    }
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
