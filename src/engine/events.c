/* sublet — the engine's events: the frees that wait for other streams'
 * work (record_stream, docs/rules.md §4.2-4.6).
 *
 * A block freed after record_stream gets one event a stream it was used on
 * (insert_events) and is freed for good once all have completed; the events
 * wait in one FIFO a stream, PyTorch's cuda_events map, which
 * process_events drains at each malloc (§4.3).  During a graph capture the
 * events wait too (insert_events_deferred_until_no_capture, §4.5; the
 * capture's own stream uses need none, §4.6).
 *
 * The queues live in one array, a->evqs, whose order is the order in which
 * process_events walks them (a dropped queue's place is taken by the last
 * one): the order of the frees a walk completes.  An index from stream to
 * queue (open addressing, positions + 1, 0 marks an empty slot; load at most
 * 1/2; deletion by backward shift) finds a stream's queue without walking
 * the array: a replay gives every deferred free a stream of its own, and a
 * trace with many frees in flight (gradients waiting for their all-reduce)
 * would otherwise pay for a walk of all of them at each record.
 *
 * process_events asks the backend what can have changed: nothing while its
 * event_epoch has not moved since a walk found every queue's head
 * incomplete; only the queues of the streams it names when it has
 * event_completions (the sim does); every queue otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "engine/pools_internal.h"

/* ---- PyTorch's map of the queues (ska::flat_hash_map, c10/util/flat_hash_map.h) ---- */

/* The same table of streams as PyTorch's cuda_events, when the user gives
 * the streams' keys: robin-hood open addressing, fibonacci hashing
 * (index = key * 11400714819323198485 >> shift), at most half full, grown
 * by doubling (at least 4 slots; rehash reinserts in slot order) and never
 * shrunk, max_lookups = max(4, log2(slots)) probes, backward-shift erase.
 * Its slots are the order of PyTorch's process_events walk. */
static size_t ska_total(const sublet_allocator *a) /* slots walked (the sentinel excluded) */
{
    return a->ska_buckets ? a->ska_buckets + (size_t)a->ska_maxlk - 1 : 0;
}

static bool ska_emplace(sublet_allocator *a, sublet_stream s);

static bool ska_rehash(sublet_allocator *a, size_t nb)
{
    size_t need = a->ska_n * 2;
    if (nb < need)
        nb = need;
    size_t p = 2;
    while (p < nb)
        p *= 2;
    if (p == a->ska_buckets)
        return true;
    int lg = 0;
    while (((size_t)1 << lg) < p)
        lg++;
    int maxlk = lg > 4 ? lg : 4;
    struct sl_ska_slot *n = malloc((p + (size_t)maxlk) * sizeof *n);
    if (!n)
        return false;
    for (size_t i = 0; i < p + (size_t)maxlk; i++)
        n[i] = (struct sl_ska_slot){0, -1};
    n[p + (size_t)maxlk - 1].dist = 0; /* the sentinel */
    struct sl_ska_slot *old = a->ska;
    size_t oldtotal = ska_total(a);
    a->ska = n;
    a->ska_buckets = p;
    a->ska_maxlk = maxlk;
    a->ska_shift = 64 - lg;
    a->ska_n = 0;
    bool ok = true;
    for (size_t i = 0; i < oldtotal; i++)
        if (old[i].dist >= 0)
            ok = ska_emplace(a, old[i].stream) && ok;
    free(old);
    return ok;
}

static bool ska_grow(sublet_allocator *a)
{
    return ska_rehash(a, a->ska_buckets * 2 > 4 ? a->ska_buckets * 2 : 4);
}

static bool ska_emplace(sublet_allocator *a, sublet_stream s)
{
    for (;;) {
        if (!a->ska_buckets) {
            if (!ska_grow(a))
                return false;
            continue;
        }
        uint64_t h = a->ska_key(a->ska_user, s);
        size_t cur = (size_t)((h * 11400714819323198485ull) >> a->ska_shift);
        int d = 0;
        for (; a->ska[cur].dist >= d; cur++, d++)
            if (a->ska[cur].stream == s)
                return true;
        if (d == a->ska_maxlk || (a->ska_n + 1) * 2 > a->ska_buckets) {
            if (!ska_grow(a))
                return false;
            continue;
        }
        if (a->ska[cur].dist < 0) {
            a->ska[cur] = (struct sl_ska_slot){s, (int8_t)d};
            a->ska_n++;
            return true;
        }
        /* robin hood: take the slot, carry its entry on */
        size_t result = cur;
        struct sl_ska_slot carry = a->ska[cur];
        a->ska[cur] = (struct sl_ska_slot){s, (int8_t)d};
        d = carry.dist;
        for (++d, ++cur;; ++cur) {
            if (a->ska[cur].dist < 0) {
                a->ska[cur] = (struct sl_ska_slot){carry.stream, (int8_t)d};
                a->ska_n++;
                return true;
            } else if (a->ska[cur].dist < d) {
                struct sl_ska_slot t = a->ska[cur];
                a->ska[cur] = (struct sl_ska_slot){carry.stream, (int8_t)d};
                carry = t;
                d = t.dist;
                ++d;
            } else {
                ++d;
                if (d == a->ska_maxlk) {
                    /* the new key out again, the carried entry back */
                    sublet_stream again = a->ska[result].stream;
                    a->ska[result].stream = carry.stream;
                    if (!ska_grow(a))
                        return false;
                    s = again;
                    break;
                }
            }
        }
    }
}

static size_t ska_find(const sublet_allocator *a, sublet_stream s)
{
    size_t t = ska_total(a);
    for (size_t i = 0; i < t; i++)
        if (a->ska[i].dist >= 0 && a->ska[i].stream == s)
            return i;
    return SIZE_MAX;
}

static void ska_erase_at(sublet_allocator *a, size_t cur)
{
    a->ska[cur].dist = -1;
    a->ska_n--;
    for (size_t next = cur + 1; a->ska[next].dist > 0; cur++, next++) {
        a->ska[cur] = (struct sl_ska_slot){a->ska[next].stream, (int8_t)(a->ska[next].dist - 1)};
        a->ska[next].dist = -1;
    }
}

void sublet_set_stream_key(sublet_allocator *a, sublet_stream_key_fn key, void *user)
{
    sl_lock(a);
    a->ska_key = key;
    a->ska_user = user;
    sl_unlock(a);
}

/* ---- the queues and their index by stream ------------------------------------------ */

static inline size_t evq_home(sublet_stream s, size_t cap)
{
    return (size_t)(((uint64_t)s * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* The index slot of stream s, or of the empty slot where it would go. */
static size_t evq_slot(const sublet_allocator *a, sublet_stream s)
{
    size_t mask = a->evq_index_cap - 1;
    size_t i = evq_home(s, a->evq_index_cap);
    while (a->evq_index[i] && a->evqs[a->evq_index[i] - 1].stream != s)
        i = (i + 1) & mask;
    return i;
}

static bool index_grow(sublet_allocator *a)
{
    size_t nc = a->evq_index_cap ? a->evq_index_cap * 2 : 16;
    uint32_t *n = calloc(nc, sizeof *n);
    if (!n)
        return false;
    free(a->evq_index);
    a->evq_index = n;
    a->evq_index_cap = nc;
    for (size_t q = 0; q < a->nevqs; q++) /* streams are distinct: each finds an empty slot */
        a->evq_index[evq_slot(a, a->evqs[q].stream)] = (uint32_t)(q + 1);
    return true;
}

static sl_evq *evq_find(const sublet_allocator *a, sublet_stream stream)
{
    if (!a->nevqs)
        return NULL;
    size_t i = evq_slot(a, stream);
    return a->evq_index[i] ? &a->evqs[a->evq_index[i] - 1] : NULL;
}

static sl_evq *evq_get(sublet_allocator *a, sublet_stream stream)
{
    sl_evq *q = evq_find(a, stream);
    if (q)
        return q;
    if ((a->nevqs + 1) * 2 > a->evq_index_cap && !index_grow(a))
        return NULL;
    if (a->ska_key && !ska_emplace(a, stream))
        return NULL;
    if (a->nevqs == a->evqs_cap) {
        size_t nc = a->evqs_cap ? a->evqs_cap * 2 : 4;
        sl_evq *n = realloc(a->evqs, nc * sizeof *n);
        if (!n)
            return NULL;
        a->evqs = n;
        a->evqs_cap = nc;
    }
    size_t pos = a->nevqs++;
    a->evqs[pos] = (sl_evq){.stream = stream};
    if (a->nevq_spares) {
        struct sl_evq_buf sp = a->evq_spares[--a->nevq_spares];
        a->evqs[pos].items = sp.items;
        a->evqs[pos].cap = sp.cap;
    }
    a->evq_index[evq_slot(a, stream)] = (uint32_t)(pos + 1);
    return &a->evqs[pos];
}

static bool evq_push(sl_evq *q, sublet_event *ev, sl_block *b)
{
    if (q->count == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 8;
        sl_evq_entry *n = malloc(nc * sizeof *n);
        if (!n)
            return false;
        for (size_t i = 0; i < q->count; i++)
            n[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = n;
        q->head = 0;
        q->cap = nc;
    }
    q->items[(q->head + q->count) & (q->cap - 1)] = (sl_evq_entry){ev, b}; /* cap: 8 << k */
    q->count++;
    return true;
}

static void evq_pop(sl_evq *q)
{
    q->head = (q->head + 1) & (q->cap - 1);
    q->count--;
}

#define MAX_EVQ_SPARES 1024 /* buffers kept at the most ... */
#define MAX_SPARE_CAP 64     /* ... each of 64 entries at the most: 1 MiB in all */

/* A dropped queue's buffer, kept for a new queue (freed when it is large,
 * when the spares are many, or when there is no room to keep it). */
static void keep_spare(sublet_allocator *a, sl_evq_entry *items, size_t cap)
{
    if (!items)
        return;
    if (cap > MAX_SPARE_CAP) {
        free(items);
        return;
    }
    if (a->nevq_spares == a->evq_spares_cap && a->evq_spares_cap < MAX_EVQ_SPARES) {
        size_t nc = a->evq_spares_cap ? a->evq_spares_cap * 2 : 16;
        struct sl_evq_buf *n = realloc(a->evq_spares, nc * sizeof *n);
        if (n) {
            a->evq_spares = n;
            a->evq_spares_cap = nc;
        }
    }
    if (a->nevq_spares == a->evq_spares_cap) {
        free(items);
        return;
    }
    a->evq_spares[a->nevq_spares++] = (struct sl_evq_buf){items, cap};
}

/* Remove the empty queue at position pos: the last queue takes its place. */
static void evq_drop(sublet_allocator *a, size_t pos)
{
    size_t mask = a->evq_index_cap - 1, i = evq_slot(a, a->evqs[pos].stream);
    /* backward-shift deletion of its index slot */
    for (size_t j = (i + 1) & mask; a->evq_index[j]; j = (j + 1) & mask) {
        size_t home = evq_home(a->evqs[a->evq_index[j] - 1].stream, a->evq_index_cap);
        bool reachable = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (reachable)
            continue;
        a->evq_index[i] = a->evq_index[j];
        i = j;
    }
    a->evq_index[i] = 0;
    if (a->ska_key) {
        size_t at = ska_find(a, a->evqs[pos].stream);
        if (at != SIZE_MAX)
            ska_erase_at(a, at);
    }
    keep_spare(a, a->evqs[pos].items, a->evqs[pos].cap);
    size_t last = --a->nevqs;
    if (pos != last) {
        a->evqs[pos] = a->evqs[last];
        a->evq_index[evq_slot(a, a->evqs[pos].stream)] = (uint32_t)(pos + 1);
    }
}

/* ---- events (§4.2-4.6) ----------------------------------------------------------- */

static sublet_status event_get(sublet_allocator *a, sublet_event **ev)
{
    if (a->nevent_pool) {
        *ev = a->event_pool[--a->nevent_pool];
        return SUBLET_OK;
    }
    return a->backend->ops->event_create(a->backend, ev);
}

static void event_put(sublet_allocator *a, sublet_event *ev)
{
    if (a->nevent_pool == a->event_pool_cap) {
        size_t nc = a->event_pool_cap ? a->event_pool_cap * 2 : 16;
        sublet_event **n = realloc(a->event_pool, nc * sizeof *n);
        if (!n) {
            a->backend->ops->event_destroy(a->backend, ev);
            return;
        }
        a->event_pool = n;
        a->event_pool_cap = nc;
    }
    a->event_pool[a->nevent_pool++] = ev;
}

static void forget_capture_uses(sublet_allocator *a, sl_block *b);

/* insert_events (§4.2).  Events are obtained and recorded before anything
 * changes, so a failing backend leaves the block allocated and intact. */
sublet_status sl_insert_events(sublet_allocator *a, sl_block *b)
{
    /* (ev_clean stays: an event recorded here is not complete until the
     * backend's event_epoch changes, backend.h) */
    sublet_event *evs_inline[8];
    sublet_event **evs = evs_inline;
    if (b->nuses > 8 && !(evs = malloc(b->nuses * sizeof *evs)))
        return SUBLET_ERR_NO_MEMORY;
    sublet_status st = SUBLET_OK;
    const sublet_stream *uses = sl_uses(b);
    uint32_t got = 0;
    for (; got < b->nuses; got++) {
        if ((st = event_get(a, &evs[got])) != SUBLET_OK)
            break;
        if ((st = a->backend->ops->event_record(a->backend, evs[got], uses[got])) != SUBLET_OK) {
            event_put(a, evs[got]);
            break;
        }
        if (!evq_get(a, uses[got])) {
            event_put(a, evs[got]);
            st = SUBLET_ERR_NO_MEMORY;
            break;
        }
    }
    for (uint32_t i = 0; st == SUBLET_OK && i < b->nuses; i++)
        if (!evq_push(evq_find(a, uses[i]), evs[i], b)) {
            /* undo the pushes already made */
            for (uint32_t j = 0; j < i; j++)
                evq_find(a, uses[j])->count--;
            st = SUBLET_ERR_NO_MEMORY;
        }
    if (st != SUBLET_OK) {
        for (uint32_t i = 0; i < got; i++)
            event_put(a, evs[i]);
    } else {
        b->event_count += b->nuses;
        a->pending_events += b->nuses;
        b->nuses = 0;
        if (a->ncapture_uses)
            forget_capture_uses(a, b);
    }
    if (evs != evs_inline)
        free(evs);
    return st;
}

static void event_done(sublet_allocator *a, sl_evq_entry e)
{
    event_put(a, e.ev);
    a->pending_events--;
    if (--e.block->event_count == 0)
        sl_free_block(a, e.block);
}

/* Room for one more deferred free (sublet_free, lock held). */
bool sl_deferred_reserve(sublet_allocator *a)
{
    if (a->ndeferred < a->deferred_cap)
        return true;
    size_t nc = a->deferred_cap ? a->deferred_cap * 2 : 8;
    sl_block **n = realloc(a->deferred, nc * sizeof *n);
    if (!n)
        return false;
    a->deferred = n;
    a->deferred_cap = nc;
    return true;
}

bool sl_capture_use_add(sublet_allocator *a, sl_block *b, sublet_stream s)
{
    if (a->ncapture_uses == a->capture_uses_cap) {
        size_t nc = a->capture_uses_cap ? a->capture_uses_cap * 2 : 8;
        sl_capture_use *n = realloc(a->capture_uses, nc * sizeof *n);
        if (!n)
            return false;
        a->capture_uses = n;
        a->capture_uses_cap = nc;
    }
    a->capture_uses[a->ncapture_uses++] = (sl_capture_use){b, s};
    return true;
}

/* remove_cudagraph_stream_uses: the streams recorded during a capture need
 * no event (the capture orders them); forget them and the records. */
static void drop_capture_uses(sublet_allocator *a, sl_block *b)
{
    for (size_t i = 0; i < a->ncapture_uses;) {
        if (a->capture_uses[i].block != b) {
            i++;
            continue;
        }
        sublet_stream *uses = sl_uses(b);
        for (uint32_t k = 0; k < b->nuses; k++)
            if (uses[k] == a->capture_uses[i].stream) {
                uses[k] = uses[--b->nuses];
                break;
            }
        a->capture_uses[i] = a->capture_uses[--a->ncapture_uses];
    }
}

/* Forget a block's capture-time records once its uses became events. */
static void forget_capture_uses(sublet_allocator *a, sl_block *b)
{
    for (size_t i = 0; i < a->ncapture_uses;)
        if (a->capture_uses[i].block == b)
            a->capture_uses[i] = a->capture_uses[--a->ncapture_uses];
        else
            i++;
}

/* insert_events_deferred_until_no_capture (§4.5). */
static sublet_status insert_deferred(sublet_allocator *a)
{
    while (a->ndeferred) {
        sl_block *b = a->deferred[0];
        if (a->ncap_marks)
            sl_capture_unmark(a, b);
        drop_capture_uses(a, b);
        sublet_status st = sl_insert_events(a, b);
        if (st != SUBLET_OK)
            return st;
        memmove(a->deferred, a->deferred + 1, --a->ndeferred * sizeof *a->deferred);
        if (b->event_count == 0)
            sl_free_block(a, b);
    }
    return SUBLET_OK;
}

/* graph_capture_record_stream_reuse (§4.6): during a capture, the deferred
 * frees of blocks allocated on `stream` whose free markers all precede the
 * stream's current work are done now, without events. */
void sl_capture_reclaim(sublet_allocator *a, sublet_stream stream)
{
    for (size_t k = 0; k < a->ndeferred;) {
        sl_block *b = a->deferred[k];
        if (b->stream != stream || !sl_capture_ready(a, b, stream)) {
            k++;
            continue;
        }
        memmove(a->deferred + k, a->deferred + k + 1, (a->ndeferred - k - 1) * sizeof *a->deferred);
        a->ndeferred--;
        sl_capture_unmark(a, b);
        forget_capture_uses(a, b);
        b->nuses = 0;
        if (b->event_count == 0)
            sl_free_block(a, b);
    }
}

/* Complete the frees at the head of queue i whose events are done; an
 * emptied queue is dropped (*dropped), the last one taking place i. */
static sublet_status drain_queue(sublet_allocator *a, size_t i, bool *dropped)
{
    sl_evq *q = &a->evqs[i];
    *dropped = false;
    while (q->count) {
        sl_evq_entry e = q->items[q->head];
        int done = 0;
        sublet_status st = a->backend->ops->event_query(a->backend, e.ev, &done);
        if (st != SUBLET_OK)
            return st;
        if (!done)
            break;
        evq_pop(q);
        event_done(a, e);
    }
    if (q->count == 0) {
        evq_drop(a, i);
        *dropped = true;
    }
    return SUBLET_OK;
}

#define SL_COMPLETIONS_MAX 32

/* process_events after a clean walk, when the backend names the streams
 * with completions since (event_completions): only their queues are
 * drained.  They are visited in the order of the whole walk, a queue that
 * takes the place of a dropped one included, so that the frees complete in
 * the same order as the walk's (the queues it would query and find
 * incomplete are those whose streams had no completion). */
static sublet_status drain_completed(sublet_allocator *a, const sublet_stream *done, size_t n,
                                     uint64_t ep)
{
    size_t at[SL_COMPLETIONS_MAX], m = 0;
    for (size_t k = 0; k < n; k++) {
        sl_evq *q = evq_find(a, done[k]);
        if (!q || q->hot)
            continue;
        q->hot = true;
        size_t pos = (size_t)(q - a->evqs), j = m++;
        for (; j > 0 && at[j - 1] > pos; j--)
            at[j] = at[j - 1];
        at[j] = pos;
    }
    a->ev_clean = false;
    sublet_status st = SUBLET_OK;
    for (size_t k = 0; k < m && st == SUBLET_OK; k++)
        for (size_t i = at[k]; i < a->nevqs && a->evqs[i].hot;) {
            a->evqs[i].hot = false;
            bool dropped;
            if ((st = drain_queue(a, i, &dropped)) != SUBLET_OK || !dropped)
                break;
        }
    if (st != SUBLET_OK) {
        for (size_t i = 0; i < a->nevqs; i++)
            a->evqs[i].hot = false;
        return st;
    }
    a->ev_clean = true;
    a->ev_epoch = ep;
    return SUBLET_OK;
}

/* process_events (§4.3): complete frees whose events have completed. */
sublet_status sl_process_events(sublet_allocator *a)
{
    if (a->ndeferred) {
        sublet_status st = insert_deferred(a);
        if (st != SUBLET_OK)
            return st;
    }
    if (!a->pending_events)
        return SUBLET_OK;
    /* Nothing can have completed since the last walk found every head
     * incomplete: the walk would query the same heads and stop at each. */
    const sublet_backend_ops *ops = a->backend->ops;
    uint64_t ep = ops->event_epoch ? ops->event_epoch(a->backend) : 0;
    if (a->ev_clean && ep == a->ev_epoch)
        return SUBLET_OK;
    if (a->ska_key) { /* PyTorch's walk: the map's slots in order */
        a->ev_clean = false;
        for (size_t i = 0; i < ska_total(a);) {
            if (a->ska[i].dist < 0) {
                i++;
                continue;
            }
            sl_evq *q = evq_find(a, a->ska[i].stream);
            bool dropped = false;
            sublet_status st = q ? drain_queue(a, (size_t)(q - a->evqs), &dropped) : SUBLET_OK;
            if (st != SUBLET_OK)
                return st;
            if (!dropped) /* a dropped queue's slot now holds the next entry, if any */
                i++;
        }
        a->ev_clean = ops->event_epoch != NULL;
        a->ev_epoch = ep;
        return SUBLET_OK;
    }
    if (a->ev_clean && ops->event_completions) {
        sublet_stream done[SL_COMPLETIONS_MAX];
        size_t n = 0;
        uint64_t now = ops->event_completions(a->backend, a->ev_epoch, done, SL_COMPLETIONS_MAX, &n);
        if (n != SIZE_MAX)
            return drain_completed(a, done, n, now);
    }
    a->ev_clean = false;
    for (size_t i = 0; i < a->nevqs;) {
        bool dropped;
        sublet_status st = drain_queue(a, i, &dropped);
        if (st != SUBLET_OK)
            return st;
        if (!dropped)
            i++;
    }
    /* (ep was read before the walk: a completion during it changes the
     * epoch seen next time) */
    a->ev_clean = ops->event_epoch != NULL;
    a->ev_epoch = ep;
    return SUBLET_OK;
}

/* synchronize_and_free_events(pool): only the events of `only`'s blocks. */
static sublet_status synchronize_pool_events(sublet_allocator *a, sl_private *only)
{
    a->ev_clean = false;
    for (size_t i = 0; i < a->nevqs;) {
        sl_evq *q = &a->evqs[i];
        size_t keep = 0, n = q->count;
        for (size_t k = 0; k < n; k++) {
            sl_evq_entry e = q->items[(q->head + k) % q->cap];
            if (e.block->pool->owner != only) {
                q->items[(q->head + keep++) % q->cap] = e;
                continue;
            }
            sublet_status st = a->backend->ops->event_synchronize(a->backend, e.ev);
            if (st != SUBLET_OK) { /* keep the rest queued, in order */
                for (; k < n; k++)
                    q->items[(q->head + keep++) % q->cap] = q->items[(q->head + k) % q->cap];
                q->count = keep;
                return st;
            }
            event_done(a, e);
        }
        q->count = keep;
        if (keep == 0)
            evq_drop(a, i);
        else
            i++;
    }
    return SUBLET_OK;
}

/* synchronize_and_free_events (§3.5 step 1). */
sublet_status sl_sync_free_events(sublet_allocator *a, sl_private *only)
{
    a->stats.num_sync_all_streams++;
    a->ev_clean = false;
    if (a->ndeferred) {
        sublet_status st = insert_deferred(a);
        if (st != SUBLET_OK)
            return st;
    }
    if (only)
        return synchronize_pool_events(a, only);
    while (a->nevqs) {
        sl_evq *q = &a->evqs[0];
        while (q->count) {
            sl_evq_entry e = q->items[q->head];
            sublet_status st = a->backend->ops->event_synchronize(a->backend, e.ev);
            if (st != SUBLET_OK)
                return st;
            evq_pop(q);
            event_done(a, e);
        }
        evq_drop(a, 0);
    }
    return SUBLET_OK;
}

void sl_evq_fini(sublet_allocator *a)
{
    for (size_t i = 0; i < a->nevqs; i++) {
        sl_evq *q = &a->evqs[i];
        for (size_t k = 0; k < q->count; k++)
            a->backend->ops->event_destroy(a->backend, q->items[(q->head + k) % q->cap].ev);
        free(q->items);
    }
    free(a->evqs);
    free(a->evq_index);
    free(a->ska);
    a->ska = NULL;
    a->ska_buckets = a->ska_n = 0;
    for (size_t i = 0; i < a->nevq_spares; i++)
        free(a->evq_spares[i].items);
    free(a->evq_spares);
    a->evq_spares = NULL;
    a->nevq_spares = a->evq_spares_cap = 0;
    a->evqs = NULL;
    a->evq_index = NULL;
    a->nevqs = a->evqs_cap = a->evq_index_cap = 0;
}

/* ---- teardown and checks (allocator.c, inspect.c) -------------------------------- */

bool sl_evq_verify(const sublet_allocator *a, char *msg, size_t cap)
{
    size_t used = 0;
    for (size_t i = 0; i < a->evq_index_cap; i++) {
        uint32_t v = a->evq_index[i];
        if (!v)
            continue;
        used++;
        if (v > a->nevqs || evq_find(a, a->evqs[v - 1].stream) != &a->evqs[v - 1]) {
            sl_msg(msg, cap, "event queue index: slot %zu names queue %u of %zu", i, v,
                   a->nevqs);
            return false;
        }
    }
    if (used != a->nevqs) {
        sl_msg(msg, cap, "event queue index holds %zu queues, the engine %zu", used, a->nevqs);
        return false;
    }
    return true;
}
