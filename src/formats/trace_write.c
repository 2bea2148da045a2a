/* sublet — a trace written out, without an engine: as the `.events.csv`
 * form, and as PyTorch's snapshot dict built from the trace alone (see
 * sublet/snapshot.h).
 *
 * The CSV is the exact text shared/traces derives from a snapshot, so a
 * snapshot read with sublet_trace_parse and written here reproduces its
 * committed CSV byte for byte.  The direct snapshot keeps the trace's events
 * verbatim and rebuilds the final segments from the events: which segments
 * and allocations are live at the end is found by sorting the events by
 * (address, index) and looking at each address's last event. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rules.h" /* kSmallBuffer, kSmallSize */
#include "base/errmsg.h"
#include "formats/atomic_write.h"
#include "formats/snapshot_internal.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

/* ---- events CSV ------------------------------------------------------------------------------- */

#define CSV_HEADER "seq,action,addr,size,stream,time_us\r\n"
#define CSV_POOL_HEADER "seq,action,addr,size,stream,time_us,pool\r\n"
#define CSV_PRE_SEGMENT_EXPANDABLE "pre_segment_expandable"

/* a row: 7 numbers of at most 20 digits, an action name, separators */
enum { ROW_MAX = 7 * 20 + 32 + 10 };

static int private_row(const sublet_trace_event *e) { return e->pool_id[0] || e->pool_id[1]; }

/* Row i as text at p (at most ROW_MAX bytes); its length.  pool: the CSV
 * has the pool column (empty for the default pools, FIRST:SECOND else). */
static size_t csv_row(char *p, uint64_t i, const sublet_trace_event *e, int pool)
{
    char *p0 = p;
    /* the expandable flag rides in the action name: the CSV has no
     * column for it, and the shared traces' CSVs never need it */
    const char *action = sublet_trace_kind_name(e->kind);
    if (e->kind == SUBLET_TRACE_PRE_SEGMENT && (e->flags & SUBLET_TRACE_EXPANDABLE))
        action = CSV_PRE_SEGMENT_EXPANDABLE;
    int k = snprintf(p, ROW_MAX, "%" PRIu64 ",%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", i, action,
                     e->addr, e->size, (uint64_t)e->stream);
    p += k > 0 ? k : 0;
    if (e->flags & SUBLET_TRACE_HAS_TIME) {
        k = snprintf(p, 24, "%" PRIu64, e->time_us);
        p += k > 0 ? k : 0;
    }
    if (pool) {
        *p++ = ',';
        if (private_row(e)) {
            k = snprintf(p, 44, "%" PRIu64 ":%" PRIu64, e->pool_id[0], e->pool_id[1]);
            p += k > 0 ? k : 0;
        }
    }
    *p++ = '\r';
    *p++ = '\n';
    return (size_t)(p - p0);
}

sublet_status sublet_trace_encode_csv(const sublet_trace *t, char **out, size_t *out_len,
                                      char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!t || !out || !out_len) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    }
    *out = NULL;
    *out_len = 0;
    size_t n = sublet_trace_count(t);
    const sublet_trace_event *ev = sublet_trace_events(t);
    /* the pool column only when a row is in a private pool (docs/pools.md):
     * every other trace is written exactly as before */
    int pool = 0;
    for (size_t i = 0; i < n && !pool; i++)
        pool = private_row(&ev[i]);
    size_t cap_bytes = sizeof CSV_POOL_HEADER + n * (size_t)ROW_MAX;
    if (n > (SIZE_MAX - sizeof CSV_POOL_HEADER) / ROW_MAX || !(*out = malloc(cap_bytes))) {
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    char *p = *out;
    const char *hdr = pool ? CSV_POOL_HEADER : CSV_HEADER;
    memcpy(p, hdr, strlen(hdr));
    p += strlen(hdr);
    for (size_t i = 0; i < n; i++)
        p += csv_row(p, i, &ev[i], pool);
    *out_len = (size_t)(p - *out);
    return SUBLET_OK;
}

/* The trace's CSV is its stream's (sublet_trace_stream_write_csv over a
 * stream of the in-memory array): one writer. */
sublet_status sublet_trace_write_csv(const sublet_trace *t, const char *path, char *err,
                                     size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!path || !*path) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    }
    if (!t)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "%s: invalid argument", path);
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_from_trace(t, &ts) != SUBLET_OK)
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "%s: out of memory", path);
    sublet_status st = sublet_trace_stream_write_csv(ts, path, err, cap);
    sublet_trace_stream_close(ts);
    return st;
}

/* One pass of the streamed CSV writer: with the pool column or without;
 * *restart when a row needs the column the pass does not write (the file
 * is then abandoned). */
static sublet_status write_csv_pass(sublet_trace_stream *ts, const char *path, int pool,
                                    int *restart, char *err, size_t cap)
{
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(ts, &pre);
    size_t len = strlen(path);
    sl_afile *f;
    sublet_status st = sl_afile_open(path, len >= 3 && strcmp(path + len - 3, ".gz") == 0, &f,
                                     err, cap);
    if (st != SUBLET_OK)
        return st;
    enum { ROWS = 1024 };
    sublet_trace_event ev[ROWS];
    char *text = malloc((size_t)ROWS * ROW_MAX);
    if (!text) {
        sl_afile_abort(f);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    const char *hdr = pool ? CSV_POOL_HEADER : CSV_HEADER;
    sl_afile_write(f, hdr, strlen(hdr));
    uint64_t i = 0;
    for (size_t k = 0; k < npre && !*restart;) {
        size_t m = 0;
        for (; k < npre && m < (size_t)ROWS * ROW_MAX - ROW_MAX; k++) {
            *restart |= !pool && private_row(&pre[k]);
            m += csv_row(text + m, i++, &pre[k], pool);
        }
        sl_afile_write(f, text, m);
    }
    size_t got;
    while (!*restart &&
           (st = sublet_trace_stream_next(ts, ev, ROWS, &got, err, cap)) == SUBLET_OK && got) {
        size_t m = 0;
        for (size_t k = 0; k < got; k++) {
            *restart |= !pool && private_row(&ev[k]);
            m += csv_row(text + m, i++, &ev[k], pool);
        }
        sl_afile_write(f, text, m);
    }
    free(text);
    if (st != SUBLET_OK || *restart) {
        sl_afile_abort(f);
        return st;
    }
    return sl_afile_commit(f, err, cap);
}

sublet_status sublet_trace_stream_write_csv(sublet_trace_stream *ts, const char *path, char *err,
                                            size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!ts || !path || !*path) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    }
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(ts, &pre);
    if (sublet_trace_stream_rows(ts) != npre) {
        sublet_status st = sublet_trace_stream_rewind(ts, err, cap);
        if (st != SUBLET_OK)
            return st;
    }
    /* Without the pool column first; a row in a private pool met on the way
     * restarts the file with it (the stream rewound), so a trace of the
     * default pools alone costs one pass and is written as before. */
    sublet_status st = SUBLET_OK;
    for (int pool = 0;; pool = 1) {
        int restart = 0;
        st = write_csv_pass(ts, path, pool, &restart, err, cap);
        if (st != SUBLET_OK || !restart)
            return st;
        if ((st = sublet_trace_stream_rewind(ts, err, cap)) != SUBLET_OK)
            return st;
    }
}

/* ---- a snapshot built from a trace alone ---------------------------------------------------- */

typedef struct lref {
    uint64_t addr;
    size_t idx; /* event index */
} lref;

static int cmp_lref(const void *x, const void *y)
{
    const lref *a = x, *b = y;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The events of `kinds` (a bit per kind) sorted by (addr, index). */
static lref *refs_of(const sublet_trace_event *ev, size_t n, unsigned kinds, size_t *nout)
{
    lref *v = malloc((n ? n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (ev[i].kind < 32 && (kinds >> ev[i].kind & 1u))
            v[k++] = (lref){ev[i].addr, i};
    if (v)
        qsort(v, k, sizeof *v, cmp_lref);
    *nout = k;
    return v;
}

#define BIT(k) (1u << (k))

/* Live at the end: for each address, its last event is one of `live` kinds
 * (the last `start` kind before it gives the data).  Writes the index of the
 * starting event into out (sorted by address); *pending for allocations whose
 * last event is a free_requested. */
static size_t live_of(const sublet_trace_event *ev, const lref *r, size_t nr, unsigned start,
                      unsigned keep, size_t *out, bool *pending)
{
    size_t k = 0;
    for (size_t i = 0; i < nr;) {
        size_t j = i;
        while (j + 1 < nr && r[j + 1].addr == r[i].addr)
            j++;
        uint32_t last = ev[r[j].idx].kind;
        if (start >> last & 1u || keep >> last & 1u) {
            size_t s0 = SIZE_MAX;
            for (size_t q = j + 1; q-- > i;)
                if (start >> ev[r[q].idx].kind & 1u) {
                    s0 = r[q].idx;
                    break;
                }
            if (s0 != SIZE_MAX) {
                if (pending)
                    pending[k] = keep >> last & 1u;
                out[k++] = s0;
            }
        }
        i = j + 1;
    }
    return k;
}

static void inactive_block(snap_bld *b, pyval *blocks, uint64_t addr, uint64_t size)
{
    pyval *bd = b->fail ? NULL : snap_new_dict(b);
    if (!bd)
        return;
    snap_set(b, bd, K_ADDRESS, snap_u(b, addr));
    snap_set(b, bd, K_SIZE, snap_u(b, size));
    snap_set(b, bd, K_REQUESTED_SIZE, snap_u(b, 0));
    snap_set(b, bd, K_STATE, b->state[SUBLET_BLOCK_INACTIVE]);
    snap_set(b, bd, K_FRAMES, b->no_frames);
    if (pv_list_append(b->ar, blocks, bd) != SUBLET_OK)
        b->fail = true;
}

/* The segments and allocations live at the end of a trace: the index of
 * each one's starting event, sorted by address. */
typedef struct live_set {
    size_t *segs, ns;
    size_t *allocs, na;
    bool *pending; /* per allocation: its last event is a free_requested */
} live_set;

/* l from the n events ev; false when out of memory (l then empty, its
 * arrays still to free). */
static bool live_find(const sublet_trace_event *ev, size_t n, live_set *l)
{
    size_t nsr = 0, nar = 0;
    unsigned seg_start = BIT(SUBLET_TRACE_PRE_SEGMENT) | BIT(SUBLET_ACT_SEGMENT_ALLOC) |
                         BIT(SUBLET_ACT_SEGMENT_MAP);
    unsigned seg_end = BIT(SUBLET_ACT_SEGMENT_FREE) | BIT(SUBLET_ACT_SEGMENT_UNMAP);
    unsigned al_start = BIT(SUBLET_TRACE_PRE_ALLOC) | BIT(SUBLET_ACT_ALLOC);
    unsigned al_pend = BIT(SUBLET_ACT_FREE_REQUESTED);
    lref *sr = refs_of(ev, n, seg_start | seg_end, &nsr);
    lref *ar = refs_of(ev, n, al_start | al_pend | BIT(SUBLET_ACT_FREE_COMPLETED), &nar);
    l->segs = malloc((nsr ? nsr : 1) * sizeof *l->segs);
    l->allocs = malloc((nar ? nar : 1) * sizeof *l->allocs);
    l->pending = malloc(nar ? nar : 1);
    bool ok = sr && ar && l->segs && l->allocs && l->pending;
    l->ns = ok ? live_of(ev, sr, nsr, seg_start, 0, l->segs, NULL) : 0;
    l->na = ok ? live_of(ev, ar, nar, al_start, al_pend, l->allocs, l->pending) : 0;
    free(sr);
    free(ar);
    return ok;
}

/* device_traces: the recorded events verbatim (NULL and b->fail when out
 * of memory). */
static pyval *traces_of(snap_bld *b, const sublet_trace_event *ev, size_t n)
{
    pyval *traces = pv_new_list(b->ar), *mine = pv_new_list(b->ar);
    b->fail = !traces || !mine;
    for (int64_t d = 0; !b->fail && d < b->device; d++) {
        pyval *empty = pv_new_list(b->ar);
        if (!empty || pv_list_append(b->ar, traces, empty) != SUBLET_OK)
            b->fail = true;
    }
    for (size_t i = 0; !b->fail && i < n; i++) {
        if (sublet_trace_kind_is_prelude(ev[i].kind))
            continue;
        sublet_trace_entry e = {(sublet_action)ev[i].kind, ev[i].addr, ev[i].size, ev[i].stream,
                                (ev[i].flags & SUBLET_TRACE_HAS_TIME) ? ev[i].time_us : 0,
                                ev[i].frames};
        pyval *d = snap_trace_entry(b, &e);
        if (d && (ev[i].pool_id[0] || ev[i].pool_id[1])) /* the newest PyTorch's pool_id */
            snap_set(b, d, K_POOL_ID, snap_pool_id(b, ev[i].pool_id));
        if (!d || pv_list_append(b->ar, mine, d) != SUBLET_OK)
            b->fail = true;
    }
    if (!b->fail && pv_list_append(b->ar, traces, mine) != SUBLET_OK)
        b->fail = true;
    return traces;
}

/* What the segments are built from. */
typedef struct seg_build {
    snap_bld *b;
    const sublet_settings *cfg;
    const sublet_trace_event *ev;
    live_set live;
    size_t ai; /* the next live allocation */
} seg_build;

/* A segment's byte counts. */
typedef struct seg_sums {
    uint64_t alloc, req, active;
} seg_sums;

/* A live allocation e at its end as a block of `size` bytes; false when
 * out of memory. */
static bool live_block(snap_bld *b, pyval *blocks, const sublet_trace_event *e, uint64_t size,
                       bool pending)
{
    pyval *bd = snap_new_dict(b);
    if (!bd)
        return false;
    snap_set(b, bd, K_ADDRESS, snap_u(b, e->addr));
    snap_set(b, bd, K_SIZE, snap_u(b, size));
    snap_set(b, bd, K_REQUESTED_SIZE, snap_u(b, e->size));
    snap_set(b, bd, K_STATE, b->state[pending ? SUBLET_BLOCK_ACTIVE_PENDING_FREE
                                              : SUBLET_BLOCK_ACTIVE_ALLOCATED]);
    snap_set(b, bd, K_FRAMES, snap_frames_of(b, e->frames));
    if (pv_list_append(b->ar, blocks, bd))
        b->fail = true;
    return true;
}

/* The blocks of segment sg: its live allocations (block sizes approximated
 * where the trace has none), inactive between them. */
static void segment_blocks(seg_build *c, const sublet_trace_event *sg, pyval *blocks,
                           seg_sums *sum)
{
    snap_bld *b = c->b;
    const sublet_trace_event *ev = c->ev;
    const size_t *allocs = c->live.allocs;
    size_t na = c->live.na;
    uint64_t lo = sg->addr, hi = sg->addr + sg->size;
    bool small = sg->size == SL_SMALL_BUFFER;
    while (c->ai < na && ev[allocs[c->ai]].addr < lo)
        c->ai++; /* outside every live segment: not shown */
    uint64_t at = lo;
    for (; c->ai < na && ev[allocs[c->ai]].addr < hi && !b->fail; c->ai++) {
        size_t ai = c->ai;
        const sublet_trace_event *e = &ev[allocs[ai]];
        uint64_t limit = ai + 1 < na && ev[allocs[ai + 1]].addr < hi ? ev[allocs[ai + 1]].addr
                                                                     : hi;
        if (e->addr < at)
            continue; /* overlaps the previous block: inconsistent trace */
        if (e->addr > at)
            inactive_block(b, blocks, at, e->addr - at);
        uint64_t room = limit - e->addr;
        uint64_t size = e->block_size ? e->block_size
                                      : sublet_round_size(c->cfg, e->size ? e->size : 1);
        if (size > room || (!small && !e->block_size && room - size <= SL_SMALL_SIZE))
            size = room;
        if (!live_block(b, blocks, e, size, c->live.pending[ai]))
            break;
        sum->alloc += c->live.pending[ai] ? 0 : size;
        sum->active += size;
        sum->req += e->size;
        at = e->addr + size;
    }
    if (at < hi)
        inactive_block(b, blocks, at, hi - at);
}

/* Segment sg, live at the end, with its blocks. */
static void add_segment(seg_build *c, const sublet_trace_event *sg)
{
    snap_bld *b = c->b;
    pyval *d = snap_new_dict(b), *blocks = pv_new_list(b->ar);
    if (!d || !blocks) {
        b->fail = true;
        return;
    }
    seg_sums sum = {0, 0, 0};
    segment_blocks(c, sg, blocks, &sum);
    snap_set(b, d, K_DEVICE, pv_new_int(b->ar, b->device));
    snap_set(b, d, K_ADDRESS, snap_u(b, sg->addr));
    snap_set(b, d, K_TOTAL_SIZE, snap_u(b, sg->size));
    snap_set(b, d, K_ALLOCATED_SIZE, snap_u(b, sum.alloc));
    snap_set(b, d, K_ACTIVE_SIZE, snap_u(b, sum.active));
    snap_set(b, d, K_REQUESTED_SIZE, snap_u(b, sum.req));
    snap_set(b, d, K_STREAM, snap_u(b, sg->stream));
    snap_set(b, d, K_SEGMENT_TYPE, sg->size == SL_SMALL_BUFFER ? b->small : b->large);
    snap_set(b, d, K_SEGMENT_POOL_ID, snap_pool_id(b, sg->pool_id));
    snap_set(b, d, K_IS_EXPANDABLE, pv_bool(sg->kind == SUBLET_ACT_SEGMENT_MAP));
    snap_set(b, d, K_BLOCKS, blocks);
    snap_set(b, d, K_FRAMES, snap_frames_of(b, sg->frames));
    if (pv_list_append(b->ar, b->segs, d) != SUBLET_OK)
        b->fail = true;
}

sublet_status sublet_snapshot_from_trace(const sublet_trace *t, const char *conf,
                                         sublet_snapshot **out, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!t || !out)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    *out = NULL;
    sublet_settings cfg;
    sublet_settings_default(&cfg);
    char why[512];
    if (conf && *conf && sublet_settings_parse(&cfg, conf, why, sizeof why) != SUBLET_OK)
        return sl_fail(err, cap, SUBLET_ERR_CONFIG, "settings '%s': %s", conf, why);
    const sublet_trace_event *ev = sublet_trace_events(t);
    size_t n = sublet_trace_count(t);
    sublet_snapshot *s = calloc(1, sizeof *s);
    snap_bld b;
    memset(&b, 0, sizeof b);
    b.t = t;
    b.device = sublet_trace_device(t) > 0 ? sublet_trace_device(t) : 0;
    if (!s || !(s->arena = b.ar = pv_arena_create()) || !snap_bld_init(&b)) {
        sublet_snapshot_free(s);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    pyval *traces = traces_of(&b, ev, n);
    /* the final segments and live allocations */
    seg_build c = {&b, &cfg, ev, {NULL, 0, NULL, 0, NULL}, 0};
    if (!live_find(ev, n, &c.live))
        b.fail = true;
    for (size_t k = 0; k < c.live.ns && !b.fail; k++)
        add_segment(&c, &ev[c.live.segs[k]]);
    free(c.live.segs);
    free(c.live.allocs);
    free(c.live.pending);
    if (b.fail || !snap_assemble(&b, s, traces, &cfg)) {
        free(b.frames);
        sublet_snapshot_free(s);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    free(b.frames);
    *out = s;
    return SUBLET_OK;
}
