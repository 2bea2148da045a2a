/* sublet — fragmentation offline: the state of a snapshot's segments, the
 * state of a replayed trace at any event, and memory and fragmentation after
 * every event.
 *
 * The replay driver (analysis/replay.c) hands out its allocator once, after the
 * last event driven (on_finish).  A state at event N is therefore a replay
 * stopped after N.  The series after every event comes from the engine's own
 * record instead: the trace is replayed once with recording on, the clock
 * reading the index of the row whose engine call each entry stands for
 * (sl_replay_stream_stamped), the record taken after every row (so that it
 * holds a row's entries, not the run's), and a mirror of the blocks is driven by the recorded entries
 * (segment_alloc/map/unmap/free, alloc, free_requested, free_completed).
 * The mirror decides nothing the entries do not say, except how an alloc
 * splits the free block it starts (the engine's should_split, sizes rounded
 * by sublet_round_size); at the end it is checked against the replayed
 * allocator (sublet_frag_read), and the series says whether it agreed. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "engine/rules.h"
#include "engine/frag_internal.h"
#include "analysis/replay_internal.h"
#include "sublet/frag.h"

/* ---- the state of a snapshot's segments ----------------------------------------------- */

typedef struct snap_walk {
    sl_frag_builder b;
    int64_t device; /* the device kept; -1 = every one */
} snap_walk;

static void snap_cb(void *user, int64_t device, const sublet_segment_view *sv)
{
    snap_walk *w = user;
    if (w->device < 0 || device == w->device)
        sl_frag_add_segment(&w->b, sv);
}

sublet_status sublet_frag_from_snapshot(const sublet_snapshot *s, int64_t device,
                                        sublet_frag_state **out)
{
    if (!s || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    sublet_frag_state *st = calloc(1, sizeof *st);
    if (!st)
        return SUBLET_ERR_NO_MEMORY;
    sublet_settings_default(&st->settings);
    const char *conf = sublet_snapshot_conf(s);
    if (conf) {
        sublet_settings parsed = st->settings;
        if (sublet_settings_parse(&parsed, conf, NULL, 0) == SUBLET_OK)
            st->settings = parsed;
    }
    snap_walk w = {.b = {.st = st}, .device = device};
    sublet_status rc = sublet_snapshot_segments_walk(s, snap_cb, &w);
    if (rc == SUBLET_OK && w.b.oom)
        rc = SUBLET_ERR_NO_MEMORY;
    for (size_t i = 0; i < st->nblocks; i++)
        st->blocks[i].stack = 0;
    if (rc != SUBLET_OK) {
        sublet_frag_state_free(st);
        return rc;
    }
    *out = st;
    return SUBLET_OK;
}

/* ---- the state at one event -------------------------------------------------------- */

typedef struct at_ctx {
    sublet_frag_state *st;
    sublet_status st_status;
} at_ctx;

static void at_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    (void)st;
    at_ctx *c = user;
    c->st_status = a ? sublet_frag_capture(a, &c->st) : SUBLET_ERR_INVALID_ARGUMENT;
}

sublet_status sublet_frag_state_at(const sublet_trace *t, const sublet_replay_options *o,
                                   uint64_t event, sublet_frag_state **out, sublet_replay_result *r,
                                   char *err, size_t err_cap)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_from_trace(t, &ts) != SUBLET_OK) {
        *out = NULL;
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_status st = sublet_frag_state_at_stream(ts, o, event, out, r, err, err_cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_frag_state_at_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                          uint64_t event, sublet_frag_state **out,
                                          sublet_replay_result *r, char *err, size_t err_cap)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    sublet_replay_options ro;
    if (o)
        ro = *o;
    else
        sublet_replay_options_init(&ro);
    ro.stop_after = event;
    ro.record = SUBLET_RECORD_STATE;
    ro.record_context =
        sublet_trace_stream_stack_count(t) ? SUBLET_CONTEXT_STATE : SUBLET_CONTEXT_NONE;
    ro.record_max_entries = 0;
    at_ctx c = {NULL, SUBLET_OK};
    ro.on_finish = at_finish;
    ro.finish_user = &c;
    sublet_replay_result local;
    sublet_replay_result *rr = r ? r : &local;
    sublet_status st = sublet_trace_stream_rewind(t, err, err_cap);
    if (st != SUBLET_OK) {
        memset(rr, 0, sizeof *rr);
        return st;
    }
    st = sublet_replay_stream(t, &ro, rr, err, err_cap);
    if (!r)
        sublet_replay_result_free(&local);
    if (st == SUBLET_OK && c.st_status != SUBLET_OK) {
        st = c.st_status;
        sl_msg(err, err_cap, "cannot copy the state: %s", sublet_status_text(st));
    }
    if (st != SUBLET_OK) {
        sublet_frag_state_free(c.st);
        return st;
    }
    *out = c.st;
    return SUBLET_OK;
}

typedef struct at_chain {
    at_ctx at;
    void (*fn)(void *user, sublet_allocator *a, uint64_t last, sublet_status st);
    void *user;
} at_chain;

/* The state as a recording replay leaves it: recording, the driver runs
 * process_events at each free_completed row (so that its entry lands there);
 * without, the frees whose events completed since the last malloc are still
 * queued.  Processing them now gives the same blocks (each free merges with
 * whatever free neighbours it has, in any order); the replay's figures were
 * taken before this. */
static void at_finish_chain(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    at_chain *c = user;
    if (c->fn)
        c->fn(c->user, a, last, st);
    if (a)
        (void)sublet_process_events(a);
    at_finish(&c->at, a, last, st);
}

sublet_status sublet_frag_replay_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                        sublet_replay_result *r, sublet_frag_state **frag,
                                        char *err, size_t err_cap)
{
    if (!t || !o || !r || !frag)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *frag = NULL;
    if (o->record != SUBLET_RECORD_OFF || sublet_trace_stream_stack_count(t)) {
        /* the live blocks' stacks need a recording replay, which changes the
         * figures (see at_finish_chain); or the caller's recording decides
         * what the history holds: two passes */
        sublet_status st = sublet_replay_stream(t, o, r, err, err_cap);
        sublet_replay_options fo = *o; /* the callbacks have seen this replay */
        fo.on_oom = NULL;
        fo.oom_user = NULL;
        fo.on_finish = NULL;
        fo.finish_user = NULL;
        if (st == SUBLET_OK && sublet_frag_state_at_stream(t, &fo, o->stop_after, frag, NULL,
                                                           NULL, 0) != SUBLET_OK)
            *frag = NULL;
        return st;
    }
    sublet_replay_options ro = *o;
    at_chain c = {{NULL, SUBLET_OK}, o->on_finish, o->finish_user};
    ro.on_finish = at_finish_chain;
    ro.finish_user = &c;
    sublet_status st = sublet_replay_stream(t, &ro, r, err, err_cap);
    if (st == SUBLET_OK && c.at.st_status == SUBLET_OK)
        *frag = c.at.st;
    else
        sublet_frag_state_free(c.at.st);
    return st;
}

/* ---- the mirror ------------------------------------------------------------------------- */

#define NIL UINT32_MAX
enum { M_FREE = 0, M_ALLOC = 1, M_PENDING = 2, M_DEAD = 3 };

typedef struct mblk {
    uint64_t addr, size, requested;
    uint32_t seg, ver;
    uint8_t state;
} mblk;

typedef struct hmap { /* address -> block, linear probing, backward-shift deletion */
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, count;
} hmap;

typedef struct heap_ent {
    uint64_t size;
    uint32_t idx, ver;
} heap_ent;

typedef struct mirror {
    mblk *b;
    size_t nb, cap;
    uint32_t free_list; /* dead blocks, chained through seg */
    uint32_t next_seg;
    hmap starts, ends;
    heap_ent *heap;
    size_t nheap, heap_cap;
    uint64_t allocated, reserved, requested, active, free_bytes, free_blocks;
    sublet_settings set;
    int bad; /* an entry did not fit the mirror: no longer exact */
    char why[200];
} mirror;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static int hm_init(hmap *m, size_t cap)
{
    m->cap = cap;
    m->count = 0;
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    if (!m->keys || !m->vals)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->vals[i] = NIL;
    return 0;
}

static void hm_fini(hmap *m)
{
    free(m->keys);
    free(m->vals);
}

static uint32_t hm_get(const hmap *m, uint64_t k)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)mix(k) & mask;; i = (i + 1) & mask) {
        if (m->vals[i] == NIL)
            return NIL;
        if (m->keys[i] == k)
            return m->vals[i];
    }
}

static int hm_put(hmap *m, uint64_t k, uint32_t v);

static int hm_grow(hmap *m)
{
    hmap n;
    if (hm_init(&n, m->cap * 2) != 0) {
        hm_fini(&n);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i] != NIL)
            hm_put(&n, m->keys[i], m->vals[i]);
    hm_fini(m);
    *m = n;
    return 0;
}

static int hm_put(hmap *m, uint64_t k, uint32_t v)
{
    if ((m->count + 1) * 2 > m->cap && hm_grow(m) != 0)
        return -1;
    size_t mask = m->cap - 1;
    size_t i = (size_t)mix(k) & mask;
    while (m->vals[i] != NIL && m->keys[i] != k)
        i = (i + 1) & mask;
    if (m->vals[i] == NIL)
        m->count++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

static void hm_del(hmap *m, uint64_t k)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)mix(k) & mask;
    while (m->vals[i] != NIL && m->keys[i] != k)
        i = (i + 1) & mask;
    if (m->vals[i] == NIL)
        return;
    m->vals[i] = NIL;
    m->count--;
    for (size_t j = (i + 1) & mask; m->vals[j] != NIL; j = (j + 1) & mask) {
        size_t home = (size_t)mix(m->keys[j]) & mask;
        int reachable = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (reachable)
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->vals[j] = NIL;
        i = j;
    }
}

static void mm_fail(mirror *m, const char *fmt, uint64_t addr)
{
    if (!m->bad)
        snprintf(m->why, sizeof m->why, fmt, addr);
    m->bad = 1;
}

static void heap_push(mirror *m, uint64_t size, uint32_t idx, uint32_t ver)
{
    if (m->nheap == m->heap_cap) {
        size_t nc = m->heap_cap ? m->heap_cap * 2 : 1024;
        heap_ent *h = realloc(m->heap, nc * sizeof *h);
        if (!h) {
            mm_fail(m, "out of memory%.0" PRIu64, 0);
            return;
        }
        m->heap = h;
        m->heap_cap = nc;
    }
    size_t i = m->nheap++;
    heap_ent e = {size, idx, ver};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (m->heap[p].size >= size)
            break;
        m->heap[i] = m->heap[p];
        i = p;
    }
    m->heap[i] = e;
}

static void heap_pop(mirror *m)
{
    heap_ent last = m->heap[--m->nheap];
    size_t i = 0, n = m->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && m->heap[c + 1].size > m->heap[c].size)
            c++;
        if (m->heap[c].size <= last.size)
            break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (n)
        m->heap[i] = last;
}

static int heap_valid(const mirror *m, const heap_ent *e)
{
    const mblk *b = &m->b[e->idx];
    return b->state == M_FREE && b->ver == e->ver;
}

static uint64_t largest_free(mirror *m)
{
    while (m->nheap && !heap_valid(m, &m->heap[0]))
        heap_pop(m);
    if (m->nheap > 4 * m->free_blocks + 4096) { /* drop the stale entries */
        size_t n = m->nheap;
        m->nheap = 0;
        heap_ent *old = m->heap;
        m->heap = NULL;
        m->heap_cap = 0;
        for (size_t i = 0; i < n; i++)
            if (heap_valid(m, &old[i]))
                heap_push(m, old[i].size, old[i].idx, old[i].ver);
        free(old);
    }
    return m->nheap ? m->heap[0].size : 0;
}

static uint32_t blk_new(mirror *m, uint64_t addr, uint64_t size, uint32_t seg, int state)
{
    uint32_t i;
    if (m->free_list != NIL) {
        i = m->free_list;
        m->free_list = m->b[i].seg;
    } else {
        if (m->nb == m->cap) {
            size_t nc = m->cap ? m->cap * 2 : 1024;
            mblk *nbk = nc < NIL ? realloc(m->b, nc * sizeof *nbk) : NULL;
            if (!nbk) {
                mm_fail(m, "out of memory%.0" PRIu64, 0);
                return NIL;
            }
            m->b = nbk;
            m->cap = nc;
        }
        i = (uint32_t)m->nb++;
        m->b[i].ver = 0;
    }
    mblk *b = &m->b[i];
    b->addr = addr;
    b->size = size;
    b->requested = 0;
    b->seg = seg;
    b->ver++;
    b->state = (uint8_t)state;
    if (hm_put(&m->starts, addr, i) != 0 || hm_put(&m->ends, addr + size, i) != 0)
        mm_fail(m, "out of memory%.0" PRIu64, 0);
    if (state == M_FREE) {
        m->free_blocks++;
        m->free_bytes += size;
        heap_push(m, size, i, b->ver);
    }
    return i;
}

static void blk_kill(mirror *m, uint32_t i)
{
    mblk *b = &m->b[i];
    hm_del(&m->starts, b->addr);
    hm_del(&m->ends, b->addr + b->size);
    if (b->state == M_FREE) {
        m->free_blocks--;
        m->free_bytes -= b->size;
    }
    b->state = M_DEAD;
    b->ver++;
    b->seg = m->free_list;
    m->free_list = i;
}

/* Merge free block i with free neighbours of its segment; returns the block. */
static uint32_t merge_free(mirror *m, uint32_t i)
{
    mblk *b = &m->b[i];
    uint32_t p = hm_get(&m->ends, b->addr);
    if (p != NIL && m->b[p].state == M_FREE && m->b[p].seg == b->seg) {
        uint64_t addr = m->b[p].addr, size = m->b[p].size + b->size, seg = b->seg;
        blk_kill(m, p);
        blk_kill(m, i);
        i = blk_new(m, addr, size, (uint32_t)seg, M_FREE);
        if (i == NIL)
            return NIL;
        b = &m->b[i];
    }
    uint32_t n = hm_get(&m->starts, b->addr + b->size);
    if (n != NIL && m->b[n].state == M_FREE && m->b[n].seg == b->seg) {
        uint64_t addr = b->addr, size = b->size + m->b[n].size, seg = b->seg;
        blk_kill(m, n);
        blk_kill(m, i);
        i = blk_new(m, addr, size, (uint32_t)seg, M_FREE);
    }
    return i;
}

static int should_split(const mirror *m, uint64_t rounded, uint64_t block)
{
    uint64_t remaining = block - rounded;
    int virt = m->set.expandable_segments || m->set.policy == SUBLET_POLICY_STITCH;
    int small = m->set.policy != SUBLET_POLICY_STITCH && sl_rule_small(rounded);
    return sl_rule_split(small || virt, rounded, remaining, m->set.max_split_size);
}

static void on_alloc(mirror *m, uint64_t addr, uint64_t req)
{
    uint32_t i = hm_get(&m->starts, addr);
    uint64_t r = sublet_round_size(&m->set, req);
    if (i == NIL || m->b[i].state != M_FREE || m->b[i].size < r) {
        mm_fail(m, "alloc at 0x%" PRIx64 " is not at a free block big enough", addr);
        return;
    }
    uint64_t size = m->b[i].size, seg = m->b[i].seg;
    blk_kill(m, i);
    uint64_t take = should_split(m, r, size) ? r : size;
    uint32_t nb = blk_new(m, addr, take, (uint32_t)seg, M_ALLOC);
    if (nb == NIL)
        return;
    m->b[nb].requested = req;
    if (take < size)
        blk_new(m, addr + take, size - take, (uint32_t)seg, M_FREE);
    m->allocated += take;
    m->active += take;
    m->requested += req;
}

static void on_free_requested(mirror *m, uint64_t addr)
{
    uint32_t i = hm_get(&m->starts, addr);
    if (i == NIL || m->b[i].state != M_ALLOC) {
        mm_fail(m, "free of 0x%" PRIx64 ", which the mirror does not hold allocated", addr);
        return;
    }
    m->b[i].state = M_PENDING;
    m->allocated -= m->b[i].size;
}

static void on_free_completed(mirror *m, uint64_t addr)
{
    uint32_t i = hm_get(&m->starts, addr);
    if (i == NIL || m->b[i].state != M_PENDING) {
        mm_fail(m, "free_completed of 0x%" PRIx64 ", which the mirror does not hold pending", addr);
        return;
    }
    mblk *b = &m->b[i];
    m->active -= b->size;
    m->requested -= b->requested;
    b->state = M_FREE;
    b->ver++;
    m->free_blocks++;
    m->free_bytes += b->size;
    heap_push(m, b->size, i, b->ver);
    merge_free(m, i);
}

static void on_segment_alloc(mirror *m, uint64_t addr, uint64_t size)
{
    m->reserved += size;
    blk_new(m, addr, size, m->next_seg++, M_FREE);
}

static void on_segment_free(mirror *m, uint64_t addr, uint64_t size)
{
    uint32_t i = hm_get(&m->starts, addr);
    if (i == NIL || m->b[i].state != M_FREE || m->b[i].size != size) {
        mm_fail(m, "segment_free of 0x%" PRIx64 ", which is not one free block", addr);
        return;
    }
    m->reserved -= size;
    blk_kill(m, i);
}

static void on_map(mirror *m, uint64_t at, uint64_t size)
{
    m->reserved += size;
    uint32_t p = hm_get(&m->ends, at), n = hm_get(&m->starts, at + size);
    uint32_t seg = p != NIL ? m->b[p].seg : n != NIL ? m->b[n].seg : m->next_seg++;
    uint32_t i = blk_new(m, at, size, seg, M_FREE);
    if (i != NIL)
        merge_free(m, i);
}

static void on_unmap(mirror *m, uint64_t begin, uint64_t size)
{
    uint32_t i = NIL;
    /* the free block that holds `begin` starts less than a page before it */
    for (uint64_t back = 0; back <= (UINT64_C(2) << 20) && back <= begin && i == NIL;
         back += SL_MIN_BLOCK)
        i = hm_get(&m->starts, begin - back);
    if (i == NIL || m->b[i].state != M_FREE || m->b[i].addr + m->b[i].size < begin + size) {
        mm_fail(m, "segment_unmap at 0x%" PRIx64 " is not inside one free block", begin);
        return;
    }
    uint64_t a = m->b[i].addr, e = a + m->b[i].size;
    uint32_t seg = m->b[i].seg;
    blk_kill(m, i);
    m->reserved -= size;
    if (begin > a)
        blk_new(m, a, begin - a, seg, M_FREE);
    /* the part after keeps the segment: a map that fills the hole joins the
     * two sides again, as the engine merges both neighbours */
    if (e > begin + size)
        blk_new(m, begin + size, e - begin - size, seg, M_FREE);
}

static int mirror_init(mirror *m, const sublet_frag_state *pre, const sublet_settings *set)
{
    memset(m, 0, sizeof *m);
    m->free_list = NIL;
    m->set = *set;
    if (hm_init(&m->starts, 4096) != 0 || hm_init(&m->ends, 4096) != 0)
        return -1;
    if (!pre)
        return 0;
    for (size_t s = 0; s < pre->nsegments; s++) {
        const sublet_frag_segment *g = &pre->segments[s];
        uint32_t seg = m->next_seg++;
        m->reserved += g->size;
        for (size_t k = 0; k < g->nblocks; k++) {
            const sublet_frag_block *fb = &pre->blocks[g->first_block + k];
            int state = fb->state == SUBLET_BLOCK_INACTIVE           ? M_FREE
                        : fb->state == SUBLET_BLOCK_ACTIVE_ALLOCATED ? M_ALLOC
                                                                     : M_PENDING;
            uint32_t i = blk_new(m, fb->addr, fb->size, seg, state);
            if (i == NIL)
                return -1;
            if (state != M_FREE) {
                m->b[i].requested = fb->requested_size;
                m->active += fb->size;
                m->requested += fb->requested_size;
                if (state == M_ALLOC)
                    m->allocated += fb->size;
            }
        }
    }
    return m->bad ? -1 : 0;
}

static void mirror_fini(mirror *m)
{
    free(m->b);
    free(m->heap);
    hm_fini(&m->starts);
    hm_fini(&m->ends);
}

/* ---- buckets ------------------------------------------------------------------------------ */

typedef struct series_ctx {
    sublet_frag_series *s;
    mirror m;
    int mirror_ok;
    const sublet_frag_state *pre;
    uint64_t row; /* the row in progress */
    uint64_t npre;
    uint64_t ooms_cap;
    sublet_replay_oom_fn user_oom;
    void *user_oom_user;
    sublet_status st;
} series_ctx;

static size_t bucket_of(const sublet_frag_series *s, uint64_t row)
{
    return (size_t)(row * (uint64_t)s->nbuckets / s->events);
}

/* Measure the mirror now, into bucket k. */
static void sample(series_ctx *c, size_t k)
{
    sublet_frag_series *s = c->s;
    mirror *m = &c->m;
    double v[SUBLET_FRAG_SERIES_COUNT];
    uint64_t largest = largest_free(m);
    v[SUBLET_FRAG_SERIES_ALLOCATED] = (double)m->allocated;
    v[SUBLET_FRAG_SERIES_RESERVED] = (double)m->reserved;
    v[SUBLET_FRAG_SERIES_REQUESTED] = (double)m->requested;
    v[SUBLET_FRAG_SERIES_ACTIVE] = (double)m->active;
    v[SUBLET_FRAG_SERIES_LARGEST_FREE] = (double)largest;
    v[SUBLET_FRAG_SERIES_FREE_BLOCKS] = (double)m->free_blocks;
    v[SUBLET_FRAG_SERIES_EXTERNAL] =
        m->free_bytes ? 1.0 - (double)largest / (double)m->free_bytes : 0.0;
    v[SUBLET_FRAG_SERIES_UNUSED] =
        m->reserved ? 1.0 - (double)m->active / (double)m->reserved : 0.0;
    for (int q = 0; q < SUBLET_FRAG_SERIES_COUNT; q++) {
        size_t at = (size_t)q * s->nbuckets + k;
        if (v[q] < s->min[at])
            s->min[at] = v[q];
        if (v[q] > s->max[at])
            s->max[at] = v[q];
        s->last[at] = v[q];
    }
}

/* Rows [from, to) hold the current state: one sample in each of their buckets. */
static void fill(series_ctx *c, uint64_t from, uint64_t to)
{
    if (to > c->s->events)
        to = c->s->events;
    if (from >= to)
        return;
    size_t k0 = bucket_of(c->s, from), k1 = bucket_of(c->s, to - 1);
    for (size_t k = k0; k <= k1; k++)
        sample(c, k);
}

static void apply(mirror *m, const sublet_trace_entry *e)
{
    switch (e->action) {
    case SUBLET_ACT_ALLOC:
        on_alloc(m, e->addr, e->size);
        break;
    case SUBLET_ACT_FREE_REQUESTED:
        on_free_requested(m, e->addr);
        break;
    case SUBLET_ACT_FREE_COMPLETED:
        on_free_completed(m, e->addr);
        break;
    case SUBLET_ACT_SEGMENT_ALLOC:
        on_segment_alloc(m, e->addr, e->size);
        break;
    case SUBLET_ACT_SEGMENT_FREE:
        on_segment_free(m, e->addr, e->size);
        break;
    case SUBLET_ACT_SEGMENT_MAP:
        on_map(m, e->addr, e->size);
        break;
    case SUBLET_ACT_SEGMENT_UNMAP:
        on_unmap(m, e->addr, e->size);
        break;
    default:
        break;
    }
}

static void check_exact(series_ctx *c, sublet_allocator *a)
{
    sublet_frag_series *s = c->s;
    sublet_frag_stats live;
    sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &live);
    mirror *m = &c->m;
    if (m->bad) {
        snprintf(s->mismatch, sizeof s->mismatch, "%s", m->why);
        return;
    }
    struct {
        const char *what;
        uint64_t mine, engine;
    } v[] = {{"reserved", m->reserved, live.reserved_bytes},
             {"allocated", m->allocated, live.allocated_bytes},
             {"active", m->active, live.active_bytes},
             {"requested", m->requested, live.requested_bytes},
             {"free blocks", m->free_blocks, live.free_blocks},
             {"free bytes", m->free_bytes, live.free_bytes},
             {"largest free block", largest_free(m), live.largest_free_block}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (v[i].mine != v[i].engine) {
            snprintf(s->mismatch, sizeof s->mismatch,
                     "at the end, %s is %" PRIu64 " in the series but %" PRIu64 " in the engine",
                     v[i].what, v[i].mine, v[i].engine);
            return;
        }
    }
    s->exact = 1;
}

/* Move the record's entries into the mirror, each at its row (its time is
 * the stamp of the row whose engine call it stands for): rows before it
 * hold the state so far, then the entry is applied and measured. */
static void take_entries(series_ctx *c, sublet_allocator *a)
{
    sublet_trace_entry ent[256];
    size_t n;
    while ((n = sublet_history_take(a, ent, sizeof ent / sizeof ent[0])) > 0) {
        for (size_t i = 0; i < n; i++) {
            uint64_t row = ent[i].time_us;
            if (row >= c->s->events)
                row = c->s->events - 1;
            if (row < c->row)
                row = c->row; /* never backwards */
            if (row > c->row) {
                fill(c, c->row, row);
                c->row = row;
            }
            apply(&c->m, &ent[i]);
            sample(c, bucket_of(c->s, row));
        }
    }
}

/* After each recorded row: its entries (those of the prelude's allocations
 * are dropped when recording restarts after the prelude, so they wait). */
static void series_after(void *user, sublet_allocator *a, uint64_t index,
                         const sublet_trace_event *ev)
{
    (void)ev;
    series_ctx *c = user;
    if (index >= c->npre)
        take_entries(c, a);
}

static void series_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    (void)st;
    series_ctx *c = user;
    if (!a) {
        c->st = SUBLET_ERR_INVALID_ARGUMENT;
        return;
    }
    if (sublet_history_dropped(a))
        mm_fail(&c->m, "the engine's record dropped entries%.0" PRIu64, 0);
    take_entries(c, a);
    fill(c, c->row, c->s->events);
    check_exact(c, a);
}

static void series_oom(void *user, uint64_t event, uint64_t line, uint64_t size,
                       sublet_stream stream, const char *message)
{
    series_ctx *c = user;
    sublet_frag_series *s = c->s;
    if (s->nooms == c->ooms_cap) {
        size_t nc = c->ooms_cap ? c->ooms_cap * 2 : 16;
        uint64_t *n = realloc(s->oom_events, nc * sizeof *n);
        if (n) {
            s->oom_events = n;
            c->ooms_cap = nc;
        }
    }
    if (s->nooms < c->ooms_cap)
        s->oom_events[s->nooms++] = event;
    if (c->user_oom)
        c->user_oom(c->user_oom_user, event, line, size, stream, message);
}

const char *sublet_frag_series_name(int q)
{
    static const char *const names[SUBLET_FRAG_SERIES_COUNT] = {
        "allocated",          "reserved",    "requested", "active",
        "largest_free_block", "free_blocks", "external",  "unused"};
    return q >= 0 && q < SUBLET_FRAG_SERIES_COUNT ? names[q] : "unknown";
}

void sublet_frag_series_free(sublet_frag_series *s)
{
    if (!s)
        return;
    free(s->min);
    free(s->max);
    free(s->last);
    free(s->oom_events);
    memset(s, 0, sizeof *s);
}

sublet_status sublet_frag_series_run(const sublet_trace *t, const sublet_replay_options *o,
                                     size_t max_buckets, sublet_frag_series *out,
                                     sublet_replay_result *r, char *err, size_t err_cap)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_from_trace(t, &ts) != SUBLET_OK) {
        memset(out, 0, sizeof *out);
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_status st = sublet_frag_series_run_stream(ts, o, max_buckets, out, r, err, err_cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_frag_series_run_stream(sublet_trace_stream *ts, const sublet_replay_options *o,
                                            size_t max_buckets, sublet_frag_series *out,
                                            sublet_replay_result *r, char *err, size_t err_cap)
{
    if (!ts || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    sublet_replay_options ro;
    if (o)
        ro = *o;
    else
        sublet_replay_options_init(&ro);
    sublet_settings set;
    sublet_settings_default(&set);
    if (ro.conf && *ro.conf && sublet_settings_parse(&set, ro.conf, err, err_cap) != SUBLET_OK)
        return SUBLET_ERR_CONFIG;
    /* the number of rows: the trace's, or one pass over the stream */
    uint64_t n;
    const sublet_trace_event *pre_rows;
    size_t npre = sublet_trace_stream_prelude(ts, &pre_rows);
    const sublet_trace *t = sublet_trace_stream_trace(ts);
    if (t) {
        n = sublet_trace_count(t);
    } else {
        sublet_trace_info info;
        sublet_status is = sublet_trace_stream_info(ts, &info, err, err_cap);
        if (is != SUBLET_OK)
            return is;
        n = sublet_trace_stream_rows(ts);
    }
    uint64_t events = n;
    if (ro.stop_after != SUBLET_REPLAY_ALL && ro.stop_after + 1 < events)
        events = ro.stop_after + 1;
    out->events = events ? events : 1;
    out->nbuckets = max_buckets ? max_buckets : 2000;
    if (out->nbuckets > out->events)
        out->nbuckets = (size_t)out->events;
    size_t cells = out->nbuckets * SUBLET_FRAG_SERIES_COUNT;
    out->min = calloc(cells, sizeof *out->min);
    out->max = calloc(cells, sizeof *out->max);
    out->last = calloc(cells, sizeof *out->last);
    if (!out->min || !out->max || !out->last) {
        sublet_frag_series_free(out);
        return SUBLET_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < cells; i++) {
        out->min[i] = HUGE_VAL;
        out->max[i] = -HUGE_VAL;
    }

    /* the prelude's state: a replay that drives no recorded event */
    sublet_frag_state *pre = NULL;
    sublet_status st = SUBLET_OK;
    if (npre) {
        sublet_replay_options po = ro;
        po.on_oom = NULL;
        po.before_event = po.after_event = NULL;
        po.trace = NULL;
        st = sublet_frag_state_at_stream(ts, &po, npre - 1, &pre, NULL, err, err_cap);
        if (st != SUBLET_OK) {
            sublet_frag_series_free(out);
            return st;
        }
    }
    series_ctx c;
    memset(&c, 0, sizeof c);
    c.s = out;
    c.st = SUBLET_OK;
    c.npre = npre;
    c.user_oom = ro.on_oom;
    c.user_oom_user = ro.oom_user;
    if (mirror_init(&c.m, pre, &set) != 0) {
        sublet_frag_state_free(pre);
        mirror_fini(&c.m);
        sublet_frag_series_free(out);
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_frag_state_free(pre);
    c.row = 0;

    st = sublet_trace_stream_rewind(ts, err, err_cap);
    if (st == SUBLET_OK) {
        ro.record = SUBLET_RECORD_ALL;
        ro.record_context = SUBLET_CONTEXT_NONE;
        ro.record_max_entries = 2 * (size_t)n + 4096;
        ro.on_finish = series_finish;
        ro.finish_user = &c;
        ro.on_oom = series_oom;
        ro.oom_user = &c;
        ro.before_event = NULL;
        ro.after_event = series_after;
        ro.trace = NULL;
        ro.observer_user = &c;
        sublet_replay_result local;
        sublet_replay_result *rr = r ? r : &local;
        st = sl_replay_stream_stamped(ts, &ro, rr, err, err_cap);
        if (!r)
            sublet_replay_result_free(&local);
    }
    if (st == SUBLET_OK && c.st != SUBLET_OK)
        st = c.st;
    mirror_fini(&c.m);
    if (st != SUBLET_OK)
        sublet_frag_series_free(out);
    return st;
}
