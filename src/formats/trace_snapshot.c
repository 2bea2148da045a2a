/* sublet — PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, pickle
 * or JSON) to a trace.  See sublet/trace.h (sublet_trace_parse) for what is
 * produced, and shared/traces/README.md ("How the CSVs were derived") for the
 * prelude rebuild this reproduces exactly.
 *
 * Every value is checked before use: a missing key or a wrong type gives
 * SUBLET_ERR_PARSE with a path such as "device_traces[0][12].size: expected a
 * non-negative int, found str". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "formats/trace_readers.h"

#define PATH_MAX_LEN 160
#define MiB ((uint64_t)1 << 20)

typedef struct snap {
    char *err;
    size_t cap;
    trace_extras *x;
    trace_frame_in *fbuf; /* scratch for one stack */
    size_t fbuf_cap;
    /* stacks already interned, by pyval node (pickle memo / JSON sharing) */
    const pyval **seen_node;
    uint32_t *seen_id;
    size_t seen_cap, seen_n;
} snap;

static const char *type_of(const pyval *v) { return pv_type_name(pv_typeof(v)); }

static sublet_status bad(snap *s, const char *path, const char *key, const char *what,
                         const pyval *v)
{
    if (v && pv_typeof(v) == PV_INT && !(v->flags & PV_F_UINT64) && v->u.i < 0)
        sl_msg(s->err, s->cap, "%s%s%s: expected %s, found %lld", path, key ? "." : "",
               key ? key : "", what, (long long)v->u.i);
    else
        sl_msg(s->err, s->cap, "%s%s%s: %s%s%s%s", path, key ? "." : "", key ? key : "",
               v ? "expected " : "missing (expected ", what, v ? ", found " : ")",
               v ? type_of(v) : "");
    return SUBLET_ERR_PARSE;
}

static sublet_status nomem(snap *s)
{
    sl_msg(s->err, s->cap, "out of memory");
    return SUBLET_ERR_NO_MEMORY;
}

/* d[key] as a non-negative integer; absent -> *present = false when allowed. */
static sublet_status get_u64(snap *s, const pyval *d, const char *path, const char *key,
                             bool required, uint64_t *out, bool *present)
{
    const pyval *v = pv_dict_get(d, key);
    if (present)
        *present = v != NULL;
    if (!v) {
        *out = 0;
        return required ? bad(s, path, key, "a non-negative int", NULL) : SUBLET_OK;
    }
    if (!pv_as_uint64(v, out))
        return bad(s, path, key, "a non-negative int", v);
    return SUBLET_OK;
}

static sublet_status get_dict(snap *s, const pyval *v, const char *path)
{
    return pv_typeof(v) == PV_DICT ? SUBLET_OK : bad(s, path, NULL, "a dict", v);
}

static bool is_seq(const pyval *v) { return pv_typeof(v) == PV_LIST || pv_typeof(v) == PV_TUPLE; }

bool sl_snapshot_pool_id(const pyval *v, uint64_t out[2])
{
    out[0] = out[1] = 0;
    if (!v || pv_typeof(v) == PV_NONE)
        return true;
    if (!is_seq(v) || pv_list_len(v) != 2 || !pv_as_uint64(pv_list_at(v, 0), &out[0]) ||
        !pv_as_uint64(pv_list_at(v, 1), &out[1])) {
        out[0] = out[1] = 0;
        return false;
    }
    return true;
}

static sublet_status get_pool_id(snap *s, const pyval *d, const char *path, const char *key,
                                 uint64_t out[2])
{
    const pyval *v = pv_dict_get(d, key);
    return sl_snapshot_pool_id(v, out) ? SUBLET_OK
                                       : bad(s, path, key, "a pair of non-negative ints", v);
}

/* The stack under d["frames"] (absent, None or [] -> 0). */
static sublet_status get_frames(snap *s, const pyval *d, const char *path, uint32_t *id)
{
    *id = 0;
    const pyval *fr = pv_dict_get(d, "frames");
    if (!fr || pv_typeof(fr) == PV_NONE)
        return SUBLET_OK;
    if (!is_seq(fr))
        return bad(s, path, "frames", "a list", fr);
    size_t n = pv_list_len(fr);
    if (n == 0)
        return SUBLET_OK;
    for (size_t i = 0; i < s->seen_n; i++) /* recent nodes only: see below */
        if (s->seen_node[i] == fr) {
            *id = s->seen_id[i];
            return SUBLET_OK;
        }
    if (n > s->fbuf_cap) {
        trace_frame_in *nb = n <= SIZE_MAX / sizeof *nb ? realloc(s->fbuf, n * sizeof *nb) : NULL;
        if (!nb)
            return nomem(s);
        s->fbuf = nb;
        s->fbuf_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        const pyval *f = pv_list_at(fr, i);
        char fp[PATH_MAX_LEN + 40];
        snprintf(fp, sizeof fp, "%s.frames[%zu]", path, i);
        if (pv_typeof(f) != PV_DICT)
            return bad(s, fp, NULL, "a dict", f);
        trace_frame_in *o = &s->fbuf[i];
        memset(o, 0, sizeof *o);
        const pyval *fn = pv_dict_get(f, "filename"), *nm = pv_dict_get(f, "name"),
                    *ln = pv_dict_get(f, "line");
        if (fn && !(o->file = pv_str(fn, &o->file_len)))
            return bad(s, fp, "filename", "a str", fn);
        if (nm && !(o->name = pv_str(nm, &o->name_len)))
            return bad(s, fp, "name", "a str", nm);
        if (ln && !pv_as_int(ln, &o->line))
            return bad(s, fp, "line", "an int", ln);
    }
    if (trace_extras_intern_stack(s->x, s->fbuf, n, id) != SUBLET_OK)
        return nomem(s);
    /* A small cache of the last nodes seen: memo-shared lists repeat nearby. */
    if (!s->seen_cap) {
        s->seen_cap = 8;
        s->seen_node = calloc(s->seen_cap, sizeof *s->seen_node);
        s->seen_id = calloc(s->seen_cap, sizeof *s->seen_id);
        if (!s->seen_node || !s->seen_id)
            return nomem(s);
    }
    size_t slot = s->seen_n < s->seen_cap ? s->seen_n++ : (size_t)(*id % s->seen_cap);
    s->seen_node[slot] = fr;
    s->seen_id[slot] = *id;
    return SUBLET_OK;
}

/* ---- allocator_settings -> a PYTORCH_CUDA_ALLOC_CONF string ---------------------------- */

/* Append ",ITEM" (the first without the comma) until the text is full. */
static void sb_add(sl_text *b, const char *fmt, ...) SL_TEXT_PRINTF(2, 3);
static void sb_add(sl_text *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    if (b->len)
        sl_text_putn(b, ",", 1);
    va_list ap;
    va_start(ap, fmt);
    sl_text_vprintf(b, fmt, ap);
    va_end(ap);
}

static sublet_status read_settings(snap *s, const pyval *root)
{
    const pyval *as = pv_dict_get(root, "allocator_settings");
    if (!as || pv_typeof(as) == PV_NONE)
        return SUBLET_OK;
    if (pv_typeof(as) != PV_DICT)
        return bad(s, "allocator_settings", NULL, "a dict", as);
    size_t rn = 0;
    const char *raw = pv_str(pv_dict_get(as, "PYTORCH_CUDA_ALLOC_CONF"), &rn);
    if (raw && rn)
        return trace_extras_set_settings(s->x, raw, rn) ? nomem(s) : SUBLET_OK;
    char conf[1024];
    sl_text b;
    sl_text_fixed(&b, conf, sizeof conf);
    int64_t mss;
    if (pv_as_int(pv_dict_get(as, "max_split_size"), &mss) && mss > 0)
        sb_add(&b, "max_split_size_mb:%llu", (unsigned long long)((uint64_t)mss / MiB));
    const pyval *rd = pv_dict_get(as, "roundup_power2_divisions");
    if (pv_typeof(rd) == PV_DICT) {
        char items[600];
        size_t o = 0;
        bool any = false;
        for (unsigned k = 0; k < 16; k++) {
            char key[8];
            snprintf(key, sizeof key, "%u", 1u << k);
            int64_t v = 0;
            if (!pv_as_int(pv_dict_get(rd, key), &v) || v < 0)
                v = 0;
            any |= v != 0;
            int w = snprintf(items + o, sizeof items - o, "%s%u:%lld", k ? "," : "", 1u << k,
                             (long long)v);
            if (w > 0 && (size_t)w < sizeof items - o)
                o += (size_t)w;
        }
        if (any)
            sb_add(&b, "roundup_power2_divisions:[%s]", items);
    }
    double gc;
    if (pv_as_double(pv_dict_get(as, "garbage_collection_threshold"), &gc) && gc > 0 && gc < 1)
        sb_add(&b, "garbage_collection_threshold:%.17g", gc);
    static const char *const bools[] = {"expandable_segments", "release_lock_on_cudamalloc",
                                        "pinned_use_cuda_host_register",
                                        "graph_capture_record_stream_reuse"};
    for (size_t i = 0; i < sizeof bools / sizeof *bools; i++) {
        bool v;
        if (pv_as_bool(pv_dict_get(as, bools[i]), &v) && v)
            sb_add(&b, "%s:True", bools[i]);
    }
    int64_t th;
    if (pv_as_int(pv_dict_get(as, "pinned_num_register_threads"), &th) && th > 1)
        sb_add(&b, "pinned_num_register_threads:%lld", (long long)th);
    size_t n = b.len < sizeof conf ? b.len : sizeof conf - 1; /* cut when full */
    return trace_extras_set_settings(s->x, conf, n) ? nomem(s) : SUBLET_OK;
}

/* ---- the event walk ------------------------------------------------------------------------ */

typedef struct walk {
    trace_vec events, pre_seg, pre_alloc;
    u64set live_alloc, live_seg;
    /* segment_map / segment_unmap rows, in trace order */
    struct mapev {
        uint64_t addr, size;
        sublet_stream stream;
        bool map;
    } * maps;
    size_t nmaps, maps_cap;
    sl_ranges mapped; /* the final expandable segments' mapped runs, then the prelude's */
    size_t my_segments; /* final segments on the device read */
    /* the final segments of the device in private pools (segment_pool_id
     * other than (0, 0)), sorted by address once read */
    struct privseg {
        uint64_t addr, pool[2];
        int done; /* tag_private_segments met its segment_alloc */
    } * priv;
    size_t npriv, priv_cap;
    /* events whose entry has a pool_id of its own (the newest PyTorch records
     * one in every entry, (0, 0) for the default pools) */
    size_t keyed;
} walk;

static void walk_free(walk *w)
{
    trace_vec_free(&w->events);
    trace_vec_free(&w->pre_seg);
    trace_vec_free(&w->pre_alloc);
    u64set_free(&w->live_alloc);
    u64set_free(&w->live_seg);
    free(w->maps);
    free(w->priv);
    sl_ranges_free(&w->mapped);
}

static sublet_status add_priv(walk *w, uint64_t addr, const uint64_t pool[2])
{
    if (w->npriv == w->priv_cap) {
        size_t nc = w->priv_cap ? w->priv_cap * 2 : 8;
        void *n = nc <= SIZE_MAX / sizeof *w->priv ? realloc(w->priv, nc * sizeof *w->priv) : NULL;
        if (!n)
            return SUBLET_ERR_NO_MEMORY;
        w->priv = n;
        w->priv_cap = nc;
    }
    w->priv[w->npriv++] = (struct privseg){addr, {pool[0], pool[1]}, 0};
    return SUBLET_OK;
}

static int cmp_priv(const void *x, const void *y)
{
    const struct privseg *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* A recorded segment_alloc / segment_map without a pool_id of its own, of a
 * final private-pool segment's address, is that pool's (the allocator cannot
 * move a segment between pools) if it is of the final segment itself: the
 * last segment_alloc at that address and what follows it.  An earlier
 * segment at the same address (freed, the address used again) may have been
 * another pool's: walking backwards, the search for an address ends at its
 * last segment_alloc. */
static void tag_private_segments(walk *w)
{
    if (!w->npriv)
        return;
    qsort(w->priv, w->npriv, sizeof *w->priv, cmp_priv);
    for (size_t i = w->events.n; i-- > 0;) {
        sublet_trace_event *e = &w->events.v[i];
        if (e->kind != SUBLET_ACT_SEGMENT_ALLOC && e->kind != SUBLET_ACT_SEGMENT_MAP)
            continue;
        struct privseg key = {.addr = e->addr};
        struct privseg *p = bsearch(&key, w->priv, w->npriv, sizeof *w->priv, cmp_priv);
        if (!p || p->done)
            continue;
        if (!e->pool_id[0] && !e->pool_id[1]) {
            e->pool_id[0] = p->pool[0];
            e->pool_id[1] = p->pool[1];
        }
        p->done = e->kind == SUBLET_ACT_SEGMENT_ALLOC;
    }
}

/* Pool membership of the rows that do not carry a pool_id (every PyTorch
 * before the newest): a block belongs to the pool of the segment holding
 * it, and a segment to the pool of its segment_alloc (tagged above from the
 * final segments) or pre_segment row.  So, walking the prelude and then the
 * events in order with the live private segments and the live blocks in
 * them: an alloc inside a private segment is that pool's, its free_requested
 * and free_completed are the block's pool's, a segment_free / segment_unmap
 * of a private segment is its pool's.  Nothing happens for a trace without
 * a private pool.  0, or -1 when out of memory. */
typedef struct pool_walk {
    struct pseg {
        uint64_t addr, size, pool[2];
    } * seg;
    size_t nseg, seg_cap;
    struct palloc {
        uint64_t addr, pool[2];
    } * live;
    size_t nlive, live_cap;
} pool_walk;

static int has_pool(const sublet_trace_event *e) { return e->pool_id[0] || e->pool_id[1]; }

static int pw_grow(void **v, size_t *cap, size_t n, size_t each)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = nc <= SIZE_MAX / each ? realloc(*v, nc * each) : NULL;
    if (!p)
        return -1;
    *v = p;
    *cap = nc;
    return 0;
}

static const struct pseg *pw_seg_of(const pool_walk *p, uint64_t addr)
{
    for (size_t i = 0; i < p->nseg; i++)
        if (addr >= p->seg[i].addr && addr - p->seg[i].addr < p->seg[i].size)
            return &p->seg[i];
    return NULL;
}

static int pw_add_seg(pool_walk *p, const sublet_trace_event *e)
{
    if (pw_grow((void **)&p->seg, &p->seg_cap, p->nseg, sizeof *p->seg))
        return -1;
    p->seg[p->nseg++] = (struct pseg){e->addr, e->size, {e->pool_id[0], e->pool_id[1]}};
    return 0;
}

/* the pool of a row at a block's address: a live private block's, else
 * the private segment's holding it; (0, 0) when neither */
static void pw_tag(const pool_walk *p, sublet_trace_event *e, int from_block)
{
    if (from_block)
        for (size_t i = 0; i < p->nlive; i++)
            if (p->live[i].addr == e->addr) {
                e->pool_id[0] = p->live[i].pool[0];
                e->pool_id[1] = p->live[i].pool[1];
                return;
            }
    const struct pseg *g = pw_seg_of(p, e->addr);
    if (g) {
        e->pool_id[0] = g->pool[0];
        e->pool_id[1] = g->pool[1];
    }
}

static int pw_row(pool_walk *p, sublet_trace_event *e)
{
    int given = has_pool(e);
    switch (e->kind) {
    case SUBLET_TRACE_PRE_SEGMENT:
    case SUBLET_ACT_SEGMENT_ALLOC:
    case SUBLET_ACT_SEGMENT_MAP:
        if (!given && e->kind == SUBLET_ACT_SEGMENT_MAP)
            pw_tag(p, e, 0); /* pages of a private expandable segment */
        return has_pool(e) ? pw_add_seg(p, e) : 0;
    case SUBLET_ACT_SEGMENT_FREE:
    case SUBLET_ACT_SEGMENT_UNMAP:
        if (!given)
            pw_tag(p, e, 0);
        for (size_t i = 0; e->kind == SUBLET_ACT_SEGMENT_FREE && i < p->nseg; i++)
            if (p->seg[i].addr == e->addr) {
                p->seg[i] = p->seg[--p->nseg];
                break;
            }
        return 0;
    case SUBLET_TRACE_PRE_ALLOC:
    case SUBLET_ACT_ALLOC:
        if (!given)
            pw_tag(p, e, 0);
        if (!has_pool(e))
            return 0;
        if (pw_grow((void **)&p->live, &p->live_cap, p->nlive, sizeof *p->live))
            return -1;
        p->live[p->nlive++] = (struct palloc){e->addr, {e->pool_id[0], e->pool_id[1]}};
        return 0;
    case SUBLET_ACT_FREE_REQUESTED:
    case SUBLET_ACT_FREE_COMPLETED:
        if (!given)
            pw_tag(p, e, 1);
        for (size_t i = 0; e->kind == SUBLET_ACT_FREE_COMPLETED && i < p->nlive; i++)
            if (p->live[i].addr == e->addr) {
                p->live[i] = p->live[--p->nlive];
                break;
            }
        return 0;
    default:
        return 0;
    }
}

static int rebuild_pools(walk *w)
{
    int any = 0;
    for (size_t i = 0; i < w->pre_seg.n && !any; i++)
        any = has_pool(&w->pre_seg.v[i]);
    for (size_t i = 0; i < w->events.n && !any; i++)
        any = has_pool(&w->events.v[i]);
    if (!any)
        return 0;
    pool_walk p;
    memset(&p, 0, sizeof p);
    int rc = 0;
    for (size_t i = 0; i < w->pre_seg.n && !rc; i++)
        rc = pw_row(&p, &w->pre_seg.v[i]);
    for (size_t i = 0; i < w->pre_alloc.n && !rc; i++)
        rc = pw_row(&p, &w->pre_alloc.v[i]);
    for (size_t i = 0; i < w->events.n && !rc; i++)
        rc = pw_row(&p, &w->events.v[i]);
    free(p.seg);
    free(p.live);
    return rc;
}

/* One trace entry (d = device_traces[dev][i]); *skip for entries that are not
 * allocator events (annotate). */
static sublet_status read_event(snap *s, const pyval *e, const char *path, uint64_t recno,
                                sublet_trace_event *ev, bool *skip)
{
    *skip = false;
    memset(ev, 0, sizeof *ev);
    ev->line = recno;
    sublet_status st = get_dict(s, e, path);
    if (st)
        return st;
    const pyval *act = pv_dict_get(e, "action");
    size_t an = 0;
    const char *as = pv_str(act, &an);
    if (!as)
        return bad(s, path, "action", "a str", act);
    if (sublet_trace_kind_parse(as, an, &ev->kind) != 0 || ev->kind >= SUBLET_ACT_COUNT) {
        if (an == 8 && !memcmp(as, "annotate", 8)) {
            *skip = true;
            return SUBLET_OK;
        }
        char shown[200];
        trace_show(as, an, shown, sizeof shown);
        sl_msg(s->err, s->cap, "%s.action: unknown action '%s'", path, shown);
        return SUBLET_ERR_PARSE;
    }
    bool has;
    if (ev->kind == SUBLET_ACT_OOM) {
        if ((st = get_u64(s, e, path, "device_free", false, &ev->addr, &has)))
            return st;
        if (!has && (st = get_u64(s, e, path, "addr", false, &ev->addr, NULL)))
            return st;
    } else if ((st = get_u64(s, e, path, "addr", true, &ev->addr, NULL))) {
        return st;
    }
    if ((st = get_u64(s, e, path, "size", true, &ev->size, NULL)) ||
        (st = get_u64(s, e, path, "stream", true, &ev->stream, NULL)))
        return st;
    if ((st = get_pool_id(s, e, path, "pool_id", ev->pool_id)))
        return st;
    const pyval *tv = pv_dict_get(e, "time_us");
    if (tv && pv_typeof(tv) != PV_NONE) {
        double d;
        if (pv_as_uint64(tv, &ev->time_us)) {
            ev->flags |= SUBLET_TRACE_HAS_TIME;
        } else if (pv_typeof(tv) == PV_FLOAT && pv_as_double(tv, &d) && d >= 0 && d < 1.8e19) {
            ev->time_us = (uint64_t)d;
            ev->flags |= SUBLET_TRACE_HAS_TIME;
        } else {
            return bad(s, path, "time_us", "a non-negative number", tv);
        }
    }
    return get_frames(s, e, path, &ev->frames);
}

static sublet_status add_map(walk *w, const sublet_trace_event *ev)
{
    if (w->nmaps == w->maps_cap) {
        size_t nc = w->maps_cap ? w->maps_cap * 2 : 16;
        void *n = nc <= SIZE_MAX / sizeof *w->maps ? realloc(w->maps, nc * sizeof *w->maps) : NULL;
        if (!n)
            return SUBLET_ERR_NO_MEMORY;
        w->maps = n;
        w->maps_cap = nc;
    }
    w->maps[w->nmaps++] =
        (struct mapev){ev->addr, ev->size, ev->stream, ev->kind == SUBLET_ACT_SEGMENT_MAP};
    return SUBLET_OK;
}

static sublet_status walk_events(snap *s, walk *w, const pyval *list, size_t dev)
{
    size_t n = pv_list_len(list);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX_LEN];
        snprintf(path, sizeof path, "device_traces[%zu][%zu]", dev, i);
        sublet_trace_event ev;
        bool skip;
        sublet_status st = read_event(s, pv_list_at(list, i), path, i + 1, &ev, &skip);
        if (st)
            return st;
        if (skip)
            continue;
        const pyval *pid = pv_dict_get(pv_list_at(list, i), "pool_id");
        w->keyed += pid && pv_typeof(pid) != PV_NONE;
        bool oom = false;
        switch (ev.kind) {
        case SUBLET_ACT_ALLOC: oom = u64set_add(&w->live_alloc, ev.addr) != 0; break;
        case SUBLET_ACT_FREE_COMPLETED:
            if (!u64set_remove(&w->live_alloc, ev.addr)) {
                sublet_trace_event p = ev;
                p.flags = 0;
                p.time_us = 0;
                oom = trace_vec_push(&w->pre_alloc, &p) != SUBLET_OK;
            }
            break;
        case SUBLET_ACT_SEGMENT_ALLOC: oom = u64set_add(&w->live_seg, ev.addr) != 0; break;
        case SUBLET_ACT_SEGMENT_FREE:
            if (!u64set_remove(&w->live_seg, ev.addr)) {
                sublet_trace_event p = ev;
                p.flags = 0;
                p.time_us = 0;
                oom = trace_vec_push(&w->pre_seg, &p) != SUBLET_OK;
            }
            break;
        case SUBLET_ACT_SEGMENT_MAP:
        case SUBLET_ACT_SEGMENT_UNMAP:
            oom = add_map(w, &ev) != SUBLET_OK;
            break;
        default: break;
        }
        if (oom || trace_vec_push(&w->events, &ev) != SUBLET_OK)
            return nomem(s);
    }
    return SUBLET_OK;
}

static uint64_t range_end(uint64_t addr, uint64_t size)
{
    return addr + size < addr ? UINT64_MAX : addr + size;
}

/* Expandable segments: the pages mapped when recording began.  Start from
 * the final mapped runs and undo the trace's segment_map / segment_unmap rows
 * from the last to the first (a map's pages were not mapped before it, an
 * unmap's were); what is left is the prelude's, one pre_segment per
 * contiguous range (pages unmapped during the trace included). */
static sublet_status expandable_prelude(snap *s, walk *w)
{
    for (size_t k = w->nmaps; k-- > 0;) {
        const struct mapev *m = &w->maps[k];
        uint64_t hi = range_end(m->addr, m->size);
        if ((m->map ? sl_ranges_sub(&w->mapped, m->addr, hi)
                    : sl_ranges_add(&w->mapped, m->addr, hi, m->stream)) != 0)
            return nomem(s);
    }
    for (size_t k = 0; k < w->mapped.n; k++) {
        const sl_range *r = &w->mapped.v[k];
        sublet_trace_event p = {.addr = r->lo, .size = r->hi - r->lo, .stream = r->stream,
                                .flags = SUBLET_TRACE_EXPANDABLE};
        if (trace_vec_push(&w->pre_seg, &p) != SUBLET_OK)
            return nomem(s);
    }
    return SUBLET_OK;
}

/* One final segment (segments[i]): validate it; when it is on `dev`, add
 * what the trace did not produce to the prelude. */
static sublet_status read_segment(snap *s, walk *w, const pyval *seg, size_t i, int64_t dev)
{
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "segments[%zu]", i);
    sublet_status st = get_dict(s, seg, path);
    if (st)
        return st;
    int64_t sdev = 0;
    const pyval *dv = pv_dict_get(seg, "device");
    if (dv && !pv_as_int(dv, &sdev))
        return bad(s, path, "device", "an int", dv);
    uint64_t addr, total, stream;
    if ((st = get_u64(s, seg, path, "address", true, &addr, NULL)) ||
        (st = get_u64(s, seg, path, "total_size", true, &total, NULL)) ||
        (st = get_u64(s, seg, path, "stream", true, &stream, NULL)))
        return st;
    bool expandable = false;
    const pyval *ex = pv_dict_get(seg, "is_expandable");
    if (ex && pv_typeof(ex) != PV_NONE && !pv_as_bool(ex, &expandable))
        return bad(s, path, "is_expandable", "a bool", ex);
    const pyval *blocks = pv_dict_get(seg, "blocks");
    if (!is_seq(blocks))
        return bad(s, path, "blocks", "a list", blocks);
    uint32_t seg_frames;
    if ((st = get_frames(s, seg, path, &seg_frames)))
        return st;
    uint64_t pool[2];
    if ((st = get_pool_id(s, seg, path, "segment_pool_id", pool)))
        return st;
    bool mine = sdev == dev;
    w->my_segments += mine;
    if (mine && (pool[0] || pool[1]) && add_priv(w, addr, pool) != SUBLET_OK)
        return nomem(s);
    if (mine && expandable && total) {
        /* its mapped pages: what the trace did not map is the prelude's */
        if (sl_ranges_add(&w->mapped, addr, range_end(addr, total), stream) != 0)
            return nomem(s);
    } else if (mine && !u64set_has(&w->live_seg, addr)) {
        sublet_trace_event p = {.addr = addr, .size = total, .stream = stream,
                                .frames = seg_frames, .pool_id = {pool[0], pool[1]}};
        if (trace_vec_push(&w->pre_seg, &p) != SUBLET_OK)
            return nomem(s);
    }
    size_t nb = pv_list_len(blocks);
    for (size_t j = 0; j < nb; j++) {
        const pyval *b = pv_list_at(blocks, j);
        char bp[PATH_MAX_LEN + 32];
        snprintf(bp, sizeof bp, "%s.blocks[%zu]", path, j);
        if ((st = get_dict(s, b, bp)))
            return st;
        uint64_t baddr, bsize, req;
        bool has_req;
        if ((st = get_u64(s, b, bp, "address", true, &baddr, NULL)) ||
            (st = get_u64(s, b, bp, "size", true, &bsize, NULL)) ||
            (st = get_u64(s, b, bp, "requested_size", false, &req, &has_req)))
            return st;
        const pyval *state = pv_dict_get(b, "state");
        size_t sn = 0;
        const char *ss = pv_str(state, &sn);
        if (!ss)
            return bad(s, bp, "state", "a str", state);
        bool active = sn >= 6 && !memcmp(ss, "active", 6);
        uint32_t bf;
        if ((st = get_frames(s, b, bp, &bf)))
            return st;
        if (mine && active && !u64set_has(&w->live_alloc, baddr)) {
            sublet_trace_event p = {.addr = baddr,
                                    .size = has_req ? req : bsize,
                                    .stream = stream,
                                    .block_size = bsize,
                                    .frames = bf,
                                    .pool_id = {pool[0], pool[1]}};
            if (trace_vec_push(&w->pre_alloc, &p) != SUBLET_OK)
                return nomem(s);
        }
    }
    return SUBLET_OK;
}

/* The device to read: opt's, else the one with the most events. */
static int64_t pick_device(const pyval *traces, const pyval *segs,
                           const sublet_trace_load_options *opt)
{
    if (opt && opt->pick_device)
        return opt->device;
    size_t best = 0, best_n = 0;
    for (size_t d = 0; d < pv_list_len(traces); d++)
        if (pv_list_len(pv_list_at(traces, d)) > best_n) {
            best_n = pv_list_len(pv_list_at(traces, d));
            best = d;
        }
    if (best_n)
        return (int64_t)best;
    int64_t dev = 0;
    if (pv_list_len(segs) && pv_as_int(pv_dict_get(pv_list_at(segs, 0), "device"), &dev))
        return dev;
    return 0;
}

sublet_status sublet_trace_from_snapshot(const pyval *root, const sublet_trace_load_options *opt,
                                         sublet_trace_format fmt, sublet_trace **out, char *err,
                                         size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    snap s = {.err = err, .cap = cap};
    walk w;
    memset(&w, 0, sizeof w);
    const pyval *segs, *traces = NULL;
    sublet_status st = SUBLET_OK;
    if (is_seq(root)) { /* memory_snapshot(): the segments only */
        segs = root;
    } else if (pv_typeof(root) != PV_DICT) {
        sl_msg(err, cap, "snapshot: expected a dict (or a list of segments), found %s",
               type_of(root));
        return SUBLET_ERR_PARSE;
    } else {
        segs = pv_dict_get(root, "segments");
        traces = pv_dict_get(root, "device_traces");
        if (!is_seq(segs))
            return bad(&s, "segments", NULL, "a list", segs);
        if (!is_seq(traces))
            return bad(&s, "device_traces", NULL, "a list", traces);
        for (size_t d = 0; d < pv_list_len(traces); d++)
            if (!is_seq(pv_list_at(traces, d))) {
                char p[64];
                snprintf(p, sizeof p, "device_traces[%zu]", d);
                return bad(&s, p, NULL, "a list", pv_list_at(traces, d));
            }
    }
    int64_t dev = pick_device(traces, segs, opt);
    if (dev < 0) {
        sl_msg(err, cap, "device %lld: no such device", (long long)dev);
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    s.x = trace_extras_new();
    if (!s.x)
        return nomem(&s);
    trace_extras_set_format(s.x, fmt);
    trace_extras_set_device(s.x, dev);
    if (traces && (uint64_t)dev < pv_list_len(traces))
        st = walk_events(&s, &w, pv_list_at(traces, (size_t)dev), (size_t)dev);
    for (size_t i = 0; !st && i < pv_list_len(segs); i++)
        st = read_segment(&s, &w, pv_list_at(segs, i), i, dev);
    if (!st)
        st = expandable_prelude(&s, &w);
    /* Pool ids are rebuilt only where the entries lack them: when every one
     * has its own, (0, 0) is the default pools', even at an address that a
     * private pool's expandable segment held before or after (freed address
     * ranges are reserved again). */
    bool rebuild = w.keyed < w.events.n || !w.events.n;
    if (!st && rebuild)
        tag_private_segments(&w);
    if (!st && rebuild && rebuild_pools(&w) != 0)
        st = nomem(&s);
    if (!st && opt && opt->pick_device && !w.events.n && !w.my_segments) {
        sl_msg(err, cap,
               "device %lld: the snapshot has no events and no segments for it (%zu "
               "device trace(s))",
               (long long)dev, pv_list_len(traces));
        st = SUBLET_ERR_INVALID_ARGUMENT;
    }
    if (!st && pv_typeof(root) == PV_DICT)
        st = read_settings(&s, root);
    if (!st && (st = trace_assemble(&w.pre_seg, &w.pre_alloc, &w.events, out)) != SUBLET_OK)
        nomem(&s);
    if (!st) {
        st = trace_extras_attach(*out, s.x);
        s.x = NULL;
        if (st) {
            sublet_trace_free(*out);
            *out = NULL;
            nomem(&s);
        }
    }
    trace_extras_destroy(s.x);
    free(s.fbuf);
    free(s.seen_node);
    free(s.seen_id);
    walk_free(&w);
    return st;
}
