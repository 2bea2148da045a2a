/* sublet views — the replay documents: `sublet replay --json` (the replay
 * of a trace on a simulated device: memory, counts, fidelity against
 * PyTorch's own decisions, memory_stats() at the peak and at the end, the
 * fragmentation after the last event, each OOM and its diagnosis) and
 * `sublet mincap --json` (the smallest device that runs it). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/sublet.h"
#include "sublet/trace_stream.h"
#include "views/views_internal.h"

typedef struct rp_ctx {
    sl_oom_list ooms;
    sublet_replay_oom_fn chain; /* the caller's on_oom */
    void *chain_user;
    sublet_frag_state *frag;    /* the state after the last event driven */
    sublet_frag_diagnosis diag; /* when the replay had OOMs */
    int have_diag;
} rp_ctx;

static void on_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                   const char *message)
{
    rp_ctx *c = user;
    if (c->chain)
        c->chain(c->chain_user, event, line, size, stream, message);
    sl_oom_list_push(&c->ooms, event, line, size, stream, message);
}

static void ctx_free(rp_ctx *c)
{
    sl_oom_list_free(&c->ooms);
    sublet_frag_state_free(c->frag);
    if (c->have_diag)
        sublet_frag_diagnosis_free(&c->diag);
}

static void json_stats(sl_json_writer *w, const char *key, const sublet_stats *s)
{
    size_t n = sublet_stats_format_json(s, NULL, 0);
    char *buf = malloc(n + 1);
    sl_json_key(w, key);
    if (!buf) {
        sl_json_null(w);
        return;
    }
    sublet_stats_format_json(s, buf, n + 1);
    sl_json_raw(w, buf);
    free(buf);
}

static void json_index(sl_json_writer *w, const char *key, uint64_t idx)
{
    sl_json_key(w, key);
    if (idx == SUBLET_REPLAY_NONE)
        sl_json_null(w);
    else
        sl_json_u64(w, idx);
}

static void json_release(sl_json_writer *w, const char *key, const sublet_replay_release *x)
{
    sl_json_key(w, key);
    if (x->kind == SUBLET_ACT_COUNT) {
        sl_json_null(w);
        return;
    }
    sl_json_object_begin(w);
    sl_json_kv_string(w, "action", sublet_action_name((sublet_action)x->kind));
    sl_json_kv_u64(w, "addr", x->addr);
    sl_json_kv_u64(w, "size", x->size);
    sl_json_object_end(w);
}

/* What the document says about the input, gathered while the stream (over
 * a file, or over a trace in memory) was replayed: the row of the first
 * empty_cache mismatch kept as it was driven, by keep_named_row. */
typedef struct rp_facts {
    sublet_trace_format format;
    uint64_t rows;
    const sublet_replay_result *r; /* the result being filled */
    uint64_t kept_idx;
    sublet_trace_event kept;
    int have_kept;
} rp_facts;

static const sublet_trace_event *facts_at(const rp_facts *f, uint64_t idx)
{
    return f->have_kept && f->kept_idx == idx ? &f->kept : NULL;
}

/* after_event of a streamed replay: keep the row the document names. */
static void keep_named_row(void *user, sublet_allocator *a, uint64_t index,
                           const sublet_trace_event *ev)
{
    (void)a;
    rp_facts *f = user;
    if (!f->have_kept && f->r->fidelity.first_empty_cache_mismatch == index) {
        f->kept_idx = index;
        f->kept = *ev;
        f->have_kept = 1;
    }
}

/* What a pool id names: PyTorch's id spaces (sublet/pool.h). */
static const char *sl_pool_kind_name(const uint64_t id[2])
{
    if (!id[0] && !id[1])
        return "default";
    return id[1] == 0 ? "graph" : id[0] == 0 ? "mempool" : "other";
}

/* "pools": each pool's fidelity (sublet_replay_pool_fidelity), the default
 * pools first; "pools_dropped" beyond SUBLET_REPLAY_MAX_POOLS. */
static void json_pools(sl_json_writer *w, const sublet_replay_result *r)
{
    sl_json_key(w, "pools");
    sl_json_array_begin(w);
    for (size_t k = 0; k < r->npools; k++) {
        const sublet_replay_pool_fidelity *p = &r->pools[k];
        sl_json_object_begin(w);
        sl_json_key(w, "pool_id");
        sl_json_array_begin(w);
        sl_json_u64(w, p->pool_id[0]);
        sl_json_u64(w, p->pool_id[1]);
        sl_json_array_end(w);
        sl_json_kv_string(w, "kind", sl_pool_kind_name(p->pool_id));
        sl_json_kv_u64(w, "allocs_compared", p->allocs_compared);
        sl_json_kv_u64(w, "decisions_matched", p->decisions_matched);
        sl_json_kv_u64(w, "segment_sizes_matched", p->segment_sizes_matched);
        sl_json_kv_u64(w, "addresses_matched", p->addresses_matched);
        sl_json_kv_u64(w, "recorded_segment_allocs", p->recorded_segment_allocs);
        sl_json_kv_u64(w, "engine_segment_allocs", p->engine_segment_allocs);
        sl_json_kv_u64(w, "recorded_segment_frees", p->recorded_segment_frees);
        json_index(w, "first_decision_mismatch", p->first_decision_mismatch);
        json_index(w, "first_address_mismatch", p->first_address_mismatch);
        json_index(w, "released_at", p->released_at);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
    sl_json_kv_u64(w, "pools_dropped", r->pools_dropped);
}

static void print_json(FILE *out, const char *path, const rp_facts *t,
                       const sublet_replay_options *o, const sublet_replay_result *r,
                       const rp_ctx *c, const char *error, const char *snapshot_out,
                       int summaries)
{
    const sublet_replay_fidelity *f = &r->fidelity;
    sl_json_writer w;
    sl_json_init(&w, out);
    sl_json_object_begin(&w);
    sl_json_kv_string(&w, "trace", path);
    sl_json_kv_string(&w, "format", sublet_trace_format_name(t->format));
    sl_json_kv_string(&w, "conf", o->conf);
    sl_json_kv_u64(&w, "device_memory_bytes", o->device_memory);
    json_index(&w, "stop_after", o->stop_after);
    sl_json_kv_bool(&w, "placement_hints", o->placement_hints);
    sl_json_kv_string(&w, "prelude", sublet_prelude_name(o->prelude));
    sl_json_kv_u64(&w, "trace_events", t->rows);
    sl_json_kv_u64(&w, "events", r->events);
    json_index(&w, "last_event", r->last_event);
    sl_json_kv_u64(&w, "prelude_segments", r->pre_segments);
    sl_json_kv_u64(&w, "prelude_allocs", r->pre_allocs);
    sl_json_kv_u64(&w, "allocs", r->allocs);
    sl_json_kv_u64(&w, "frees", r->frees);
    sl_json_kv_u64(&w, "deferred_frees", r->deferred_frees);
    sl_json_kv_u64(&w, "empty_caches", r->empty_caches);
    sl_json_kv_u64(&w, "peak_requested_bytes", r->peak_requested_bytes);
    sl_json_kv_u64(&w, "peak_reserved_bytes", r->peak_reserved_bytes);
    json_index(&w, "peak_reserved_event", r->peak_reserved_event);
    sl_json_kv_u64(&w, "final_reserved_bytes", r->final_reserved_bytes);
    sl_json_kv_u64(&w, "device_allocs", r->device_allocs);
    sl_json_kv_u64(&w, "device_frees", r->device_frees);
    sl_json_kv_u64(&w, "alloc_retries", r->alloc_retries);
    sl_json_kv_u64(&w, "ooms", r->ooms);
    sl_json_kv_bool(&w, "stopped_on_oom", r->stopped_on_oom);
    sl_json_key(&w, "oom_events");
    sl_json_array_begin(&w);
    for (size_t i = 0; i < c->ooms.n; i++) {
        sl_json_object_begin(&w);
        sl_json_kv_u64(&w, "event", c->ooms.v[i].event);
        sl_json_kv_u64(&w, "line", c->ooms.v[i].line);
        sl_json_kv_u64(&w, "size", c->ooms.v[i].size);
        sl_json_kv_u64(&w, "stream", c->ooms.v[i].stream);
        sl_json_kv_string(&w, "message", c->ooms.v[i].message);
        sl_json_object_end(&w);
    }
    sl_json_array_end(&w);
    sl_json_kv_u64(&w, "errors", r->errors);
    sl_json_key(&w, "first_error");
    if (r->errors)
        sl_json_string(&w, r->first_error);
    else
        sl_json_null(&w);
    sl_json_key(&w, "fidelity");
    sl_json_object_begin(&w);
    sl_json_kv_u64(&w, "allocs_compared", f->allocs_compared);
    sl_json_kv_u64(&w, "decisions_matched", f->decisions_matched);
    sl_json_kv_u64(&w, "segment_sizes_matched", f->segment_sizes_matched);
    sl_json_kv_u64(&w, "recorded_segment_allocs", f->recorded_segment_allocs);
    sl_json_kv_u64(&w, "engine_segment_allocs", f->engine_segment_allocs);
    sl_json_kv_u64(&w, "recorded_segment_frees", f->recorded_segment_frees);
    sl_json_kv_u64(&w, "engine_segment_frees", f->engine_segment_frees);
    sl_json_kv_u64(&w, "segments_placed_as_recorded", f->segments_placed_as_recorded);
    sl_json_kv_u64(&w, "addresses_matched", f->addresses_matched);
    json_index(&w, "first_address_mismatch", f->first_address_mismatch);
    sl_json_kv_u64(&w, "recorded_peak_reserved_bytes", f->recorded_peak_reserved_bytes);
    sl_json_kv_u64(&w, "recorded_final_reserved_bytes", f->recorded_final_reserved_bytes);
    json_index(&w, "first_decision_mismatch", f->first_decision_mismatch);
    json_index(&w, "first_size_mismatch", f->first_size_mismatch);
    sl_json_kv_u64(&w, "recorded_segment_maps", f->recorded_segment_maps);
    sl_json_kv_u64(&w, "engine_segment_maps", f->engine_segment_maps);
    sl_json_kv_u64(&w, "map_sizes_matched", f->map_sizes_matched);
    sl_json_kv_u64(&w, "maps_placed_as_recorded", f->maps_placed_as_recorded);
    sl_json_kv_u64(&w, "recorded_segment_unmaps", f->recorded_segment_unmaps);
    sl_json_kv_u64(&w, "engine_segment_unmaps", f->engine_segment_unmaps);
    sl_json_kv_u64(&w, "recorded_ooms", f->recorded_ooms);
    sl_json_kv_u64(&w, "ooms_matched", f->ooms_matched);
    json_index(&w, "first_oom_mismatch", f->first_oom_mismatch);
    sl_json_kv_u64(&w, "empty_caches_compared", f->empty_caches_compared);
    sl_json_kv_u64(&w, "empty_cache_sets_matched", f->empty_cache_sets_matched);
    sl_json_key(&w, "first_empty_cache_mismatch");
    if (f->first_empty_cache_mismatch == SUBLET_REPLAY_NONE) {
        sl_json_null(&w);
    } else {
        const sublet_replay_release_diff *d = &f->empty_cache_mismatch;
        const sublet_trace_event *e = facts_at(t, f->first_empty_cache_mismatch);
        sl_json_object_begin(&w);
        sl_json_kv_u64(&w, "event", f->first_empty_cache_mismatch);
        sl_json_kv_u64(&w, "line", e ? e->line : 0);
        sl_json_kv_u64(&w, "recorded", d->recorded);
        sl_json_kv_u64(&w, "engine", d->engine);
        sl_json_kv_u64(&w, "only_recorded", d->only_recorded);
        sl_json_kv_u64(&w, "only_engine", d->only_engine);
        json_release(&w, "first_only_recorded", &d->first_only_recorded);
        json_release(&w, "first_only_engine", &d->first_only_engine);
        sl_json_object_end(&w);
    }
    if (r->npools) /* a trace with private pools: the same, per pool */
        json_pools(&w, r);
    sl_json_object_end(&w);
    json_stats(&w, "memory_stats_at_peak", &r->stats_peak);
    json_stats(&w, "memory_stats_at_end", &r->stats_end);
    if (c->frag)
        sl_view_frag_json(&w, "fragmentation", c->frag);
    if (c->have_diag)
        sl_view_diagnosis_json(&w, "diagnosis", &c->diag);
    if (summaries) {
        sl_json_kv_string(&w, "memory_summary_at_peak", r->summary_peak ? r->summary_peak : "");
        sl_json_kv_string(&w, "memory_summary_at_end", r->summary_end ? r->summary_end : "");
    }
    sl_json_key(&w, "snapshot_out");
    if (snapshot_out)
        sl_json_string(&w, snapshot_out);
    else
        sl_json_null(&w);
    sl_json_key(&w, "error");
    if (error)
        sl_json_string(&w, error);
    else
        sl_json_null(&w);
    sl_json_object_end(&w);
    sl_json_finish(&w);
}

static void json_report(FILE *out, const char *path, const sublet_replay_options *o,
                        const sublet_mincap_result *m)
{
    const sublet_replay_result *r = &m->at_min;
    const sublet_sim_ops *d = &r->device_ops;
    sl_json_writer w;
    sl_json_init(&w, out);
    sl_json_object_begin(&w);
    if (path)
        sl_json_kv_string(&w, "trace", path);
    sl_json_kv_string(&w, "conf", o->conf ? o->conf : "");
    sl_json_kv_string(&w, "prelude", sublet_prelude_name(o->prelude));
    sl_json_kv_bool(&w, "placement_hints", o->placement_hints);
    sl_json_key(&w, "stop_after");
    if (o->stop_after == SUBLET_REPLAY_ALL)
        sl_json_null(&w);
    else
        sl_json_u64(&w, o->stop_after);
    sl_json_kv_u64(&w, "resolution_bytes", m->resolution);
    sl_json_kv_u64(&w, "min_capacity_bytes", m->min_capacity_bytes);
    sl_json_kv_double(&w, "min_capacity_gib", (double)m->min_capacity_bytes / (double)(UINT64_C(1) << 30));
    sl_json_kv_u64(&w, "peak_requested_bytes", m->peak_requested_bytes);
    sl_json_kv_double(&w, "overhead", m->overhead);
    sl_json_kv_double(&w, "overhead_percent", 100.0 * m->overhead);
    sl_json_kv_u64(&w, "replays", m->replays);
    sl_json_kv_bool(&w, "monotone", m->monotone);
    sl_json_kv_u64(&w, "smallest_ok_bytes", m->smallest_ok_bytes);
    sl_json_key(&w, "failed_sizes_bytes"); /* probed sizes above smallest_ok that failed */
    sl_json_array_begin(&w);
    for (size_t i = 0; i < m->nprobes; i++)
        if (!m->probes[i].ok && m->probes[i].bytes > m->smallest_ok_bytes)
            sl_json_u64(&w, m->probes[i].bytes);
    sl_json_array_end(&w);
    sl_json_key(&w, "probes");
    sl_json_array_begin(&w);
    for (size_t i = 0; i < m->nprobes; i++) {
        sl_json_object_begin(&w);
        sl_json_kv_u64(&w, "bytes", m->probes[i].bytes);
        sl_json_kv_bool(&w, "ok", m->probes[i].ok);
        sl_json_kv_bool(&w, "checked", m->probes[i].checked);
        sl_json_object_end(&w);
    }
    sl_json_array_end(&w);
    sl_json_kv_u64(&w, "peak_reserved_bytes", r->peak_reserved_bytes);
    sl_json_kv_u64(&w, "final_reserved_bytes", r->final_reserved_bytes);
    sl_json_kv_u64(&w, "events", r->events);
    sl_json_key(&w, "device_calls");
    sl_json_object_begin(&w);
    sl_json_kv_u64(&w, "segment_allocs", d->segment_allocs);
    sl_json_kv_u64(&w, "segment_frees", d->segment_frees);
    sl_json_kv_u64(&w, "va_reserves", d->va_reserves);
    sl_json_kv_u64(&w, "va_releases", d->va_releases);
    sl_json_kv_u64(&w, "maps", d->va_maps);
    sl_json_kv_u64(&w, "alias_maps", d->va_aliases);
    sl_json_kv_u64(&w, "unmaps", d->va_unmaps);
    sl_json_kv_u64(&w, "alloc_retries", r->alloc_retries);
    sl_json_object_end(&w);
    sl_json_object_end(&w);
    sl_json_finish(&w);
}


/* The stream's error, when it has one (a malformed row, a read error). */
static sublet_status stream_status(sublet_trace_stream *ts, char *err, size_t cap)
{
    size_t n;
    return sublet_trace_stream_next(ts, NULL, 0, &n, err, cap);
}

sublet_status sublet_replay_stream_json(sublet_trace_stream *ts, const sublet_replay_options *o,
                                        const sublet_view_options *v, char **out, char *err,
                                        size_t cap)
{
    sublet_status args = sl_view_begin(ts, o, v, out, err, cap);
    if (args != SUBLET_OK)
        return args;
    rp_ctx c = {.chain = o->on_oom, .chain_user = o->oom_user};
    rp_facts tf = {.format = sublet_trace_stream_format(ts)};
    sublet_replay_options ro = *o;
    if (!ro.conf)
        ro.conf = "";
    ro.on_oom = on_oom;
    ro.oom_user = &c;
    if (v->flags & SUBLET_VIEW_SUMMARIES)
        ro.capture_summary = 1;
    ro.before_event = NULL;
    ro.trace = NULL;
    ro.after_event = keep_named_row;
    ro.observer_user = &tf;
    sublet_replay_result r;
    tf.r = &r;
    char rerr[1024] = "";
    /* the state at the end comes from the same pass */
    sublet_frag_state *end_state = NULL;
    sublet_status st = sublet_frag_replay_stream(ts, &ro, &r, &end_state, rerr, sizeof rerr);
    ro.after_event = NULL;
    ro.observer_user = NULL;
    /* the rest of the rows: counted and checked, as loading does */
    sublet_trace_event *rest = malloc(4096 * sizeof *rest);
    char serr[1024] = "";
    sublet_status ss = rest ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
    if (!rest)
        snprintf(serr, sizeof serr, "out of memory");
    size_t got = 1;
    while (ss == SUBLET_OK && (ss = stream_status(ts, serr, sizeof serr)) == SUBLET_OK && got)
        ss = sublet_trace_stream_next(ts, rest, 4096, &got, serr, sizeof serr);
    free(rest);
    if (ss != SUBLET_OK) {
        if (err && cap)
            snprintf(err, cap, "%s", serr[0] ? serr : sublet_status_text(ss));
        sublet_frag_state_free(end_state);
        sublet_replay_result_free(&r);
        ctx_free(&c);
        return ss;
    }
    tf.rows = sublet_trace_stream_rows(ts);
    const char *failure = st == SUBLET_OK ? NULL : (rerr[0] ? rerr : sublet_status_text(st));
    if (!failure) {
        char ferr[512];
        c.frag = end_state;
        end_state = NULL;
        sublet_replay_options dopt = ro;
        dopt.on_finish = NULL;
        dopt.finish_user = NULL;
        if (r.ooms && sublet_frag_diagnose_stream(ts, &dopt, NULL, &c.diag, ferr, sizeof ferr) ==
                          SUBLET_OK)
            c.have_diag = 1;
    }
    sl_doc doc;
    sublet_status ds = sl_doc_open(&doc);
    if (ds == SUBLET_OK) {
        print_json(doc.f, v->name ? v->name : "", &tf, &ro, &r, &c, failure, v->snapshot_out,
                   (v->flags & SUBLET_VIEW_SUMMARIES) != 0);
        ds = sl_doc_close(&doc, out);
    }
    if (failure && err && cap)
        snprintf(err, cap, "%s", failure);
    else if (c.ooms.nomem && err && cap)
        snprintf(err, cap, "out of memory recording OOM events; some are missing");
    sublet_frag_state_free(end_state); /* kept only when the replay succeeded */
    sublet_replay_result_free(&r);
    ctx_free(&c);
    return ds != SUBLET_OK ? ds : st;
}

/* The trace's document is the stream's over it: the same replay driver, and
 * no row is kept beside the array (the one the document names is read as it
 * is driven). */
sublet_status sublet_replay_json(const sublet_trace *t, const sublet_replay_options *o,
                                 const sublet_view_options *v, char **out, char *err, size_t cap)
{
    sublet_trace_stream *ts = NULL;
    sublet_status st = sl_view_trace_open(t, o, v, out, err, cap, &ts);
    if (st != SUBLET_OK)
        return st;
    st = sublet_replay_stream_json(ts, o, v, out, err, cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_mincap_result_json(const sublet_mincap_result *m,
                                        const sublet_replay_options *o,
                                        const sublet_view_options *v, char **out)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!m || !o || !v)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_replay_options oo = *o;
    if (!oo.conf)
        oo.conf = "";
    sl_doc doc;
    sublet_status st = sl_doc_open(&doc);
    if (st == SUBLET_OK) {
        json_report(doc.f, v->name, &oo, m);
        st = sl_doc_close(&doc, out);
    }
    return st;
}

sublet_status sublet_mincap_json(const sublet_trace *t, const sublet_replay_options *base,
                                 const sublet_view_options *v, char **out, char *err, size_t cap)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (err && cap)
        err[0] = '\0';
    if (!t || !base || !v)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_replay_options o = *base;
    if (!o.conf)
        o.conf = "";
    sublet_mincap_result m;
    sublet_status st = sublet_replay_min_capacity(t, &o, v->resolution, &m, err, cap);
    if (st == SUBLET_OK) {
        sl_doc doc;
        st = sl_doc_open(&doc);
        if (st == SUBLET_OK) {
            json_report(doc.f, v->name, &o, &m);
            st = sl_doc_close(&doc, out);
        }
    }
    sublet_mincap_result_free(&m);
    return st;
}
