/* sublet — the engine's event queues: one FIFO of (event, block) a stream,
 * the cuda_events map of PyTorch's allocator (§4.2-4.3), and an index from
 * stream to queue.
 *
 * The queues live in one array, a->evqs, whose order is the order in which
 * process_events walks them (a dropped queue's place is taken by the last
 * one, as before this index existed: the walk, hence the order of the frees
 * it completes, is the same).  The index is an open-addressing table of
 * queue positions (+1; 0 marks an empty slot) keyed by the queue's stream,
 * so that finding a stream's queue does not walk the array: a replay gives
 * every deferred free a stream of its own, and a trace with many frees in
 * flight (gradients waiting for their all-reduce) would otherwise pay for a
 * walk of all of them at each record and at each completion.  Its load stays
 * at most 1/2; deletion shifts entries back (no tombstones). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

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
    for (size_t q = 0; q < a->nevqs; q++) {
        size_t i = evq_home(a->evqs[q].stream, nc);
        while (n[i])
            i = (i + 1) & (nc - 1);
        n[i] = (uint32_t)(q + 1);
    }
    return true;
}

sl_evq *sl_evq_find(const sublet_allocator *a, sublet_stream stream)
{
    if (!a->nevqs)
        return NULL;
    size_t i = evq_slot(a, stream);
    return a->evq_index[i] ? &a->evqs[a->evq_index[i] - 1] : NULL;
}

sl_evq *sl_evq_get(sublet_allocator *a, sublet_stream stream)
{
    sl_evq *q = sl_evq_find(a, stream);
    if (q)
        return q;
    if ((a->nevqs + 1) * 2 > a->evq_index_cap && !index_grow(a))
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
    a->evqs[pos] = (sl_evq){.stream = stream, .items = a->evq_spare, .cap = a->evq_spare_cap};
    a->evq_spare = NULL;
    a->evq_spare_cap = 0;
    a->evq_index[evq_slot(a, stream)] = (uint32_t)(pos + 1);
    return &a->evqs[pos];
}

bool sl_evq_push(sl_evq *q, sublet_event *ev, sl_block *b)
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

void sl_evq_pop(sl_evq *q)
{
    q->head = (q->head + 1) & (q->cap - 1);
    q->count--;
}

/* Remove the empty queue at position pos: the last queue takes its place. */
void sl_evq_drop(sublet_allocator *a, size_t pos)
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
    if (!a->evq_spare) { /* kept for the next new queue (a replay makes one a deferred free) */
        a->evq_spare = a->evqs[pos].items;
        a->evq_spare_cap = a->evqs[pos].cap;
    } else {
        free(a->evqs[pos].items);
    }
    size_t last = --a->nevqs;
    if (pos != last) {
        a->evqs[pos] = a->evqs[last];
        a->evq_index[evq_slot(a, a->evqs[pos].stream)] = (uint32_t)(pos + 1);
    }
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
    free(a->evq_spare);
    a->evq_spare = NULL;
    a->evq_spare_cap = 0;
    a->evqs = NULL;
    a->evq_index = NULL;
    a->nevqs = a->evqs_cap = a->evq_index_cap = 0;
}

/* ---- checks (inspect.c) ------------------------------------------------------- */

bool sl_evq_verify(const sublet_allocator *a, char *msg, size_t cap)
{
    size_t used = 0;
    for (size_t i = 0; i < a->evq_index_cap; i++) {
        uint32_t v = a->evq_index[i];
        if (!v)
            continue;
        used++;
        if (v > a->nevqs || sl_evq_find(a, a->evqs[v - 1].stream) != &a->evqs[v - 1]) {
            snprintf(msg, cap, "event queue index: slot %zu names queue %u of %zu", i, v,
                     a->nevqs);
            return false;
        }
    }
    if (used != a->nevqs) {
        snprintf(msg, cap, "event queue index holds %zu queues, the engine %zu", used, a->nevqs);
        return false;
    }
    return true;
}
