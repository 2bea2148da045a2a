/* sublet views — the replay documents: `sublet replay` (the replay of a
 * trace on a simulated device: memory, counts, fidelity against PyTorch's
 * own decisions, memory_stats() at the peak and at the end, the
 * fragmentation after the last event, each OOM and its diagnosis) and
 * `sublet mincap` (the smallest device that runs it), each as JSON and as
 * the CLI's text.  A replay is run once, over a stream (a file read in
 * chunks, or a trace in memory), into one result (rp_run); both renderers
 * read that. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "sublet/sublet.h"
#include "sublet/trace_stream.h"
#include "views/views_internal.h"

/* What the documents say about the input, gathered while the stream (over
 * a file, or over a trace in memory) was replayed: the rows the documents
 * name (the first mismatches) kept as they were driven, by keep_named_rows. */
typedef struct rp_facts {
    sublet_trace_format format;
    uint64_t rows, prelude, pre_segments, pre_allocs;
    const sublet_replay_result *r; /* the result being filled */
    uint64_t kept_idx[4];
    sublet_trace_event kept[4];
    int nkept;
} rp_facts;

/* One replay, everything either document shows. */
typedef struct rp_run {
    rp_facts facts;
    sublet_replay_result r;
    sublet_status status;       /* the replay's */
    const char *failure;        /* its error (NULL: it ran) */
    char rerr[1024];
    sl_oom_list ooms;
    sublet_replay_oom_fn chain; /* the caller's on_oom */
    void *chain_user;
    sublet_frag_state *frag;    /* the state after the last event driven */
    sublet_frag_diagnosis diag; /* when the replay had OOMs */
    int have_diag;
} rp_run;

static void on_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                   const char *message)
{
    rp_run *c = user;
    if (c->chain)
        c->chain(c->chain_user, event, line, size, stream, message);
    sl_oom_list_push(&c->ooms, event, line, size, stream, message);
}

static void run_free(rp_run *c)
{
    sublet_replay_result_free(&c->r);
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

static const sublet_trace_event *facts_at(const rp_facts *f, uint64_t idx)
{
    for (int k = 0; k < f->nkept; k++)
        if (f->kept_idx[k] == idx)
            return &f->kept[k];
    return NULL;
}

/* after_event of the replay: keep the rows the documents name. */
static void keep_named_rows(void *user, sublet_allocator *a, uint64_t index,
                            const sublet_trace_event *ev)
{
    (void)a;
    rp_facts *f = user;
    const sublet_replay_fidelity *x = &f->r->fidelity;
    const uint64_t named[4] = {x->first_decision_mismatch, x->first_address_mismatch,
                               x->first_size_mismatch, x->first_empty_cache_mismatch};
    for (int k = 0; k < 4; k++) {
        if (named[k] != index || facts_at(f, index) || f->nkept == 4)
            continue;
        f->kept_idx[f->nkept] = index;
        f->kept[f->nkept++] = *ev;
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

/* "fidelity": what matched the recording, the first mismatches, per pool. */
static void json_fidelity(sl_json_writer *w, const rp_facts *t, const sublet_replay_result *r)
{
    const sublet_replay_fidelity *f = &r->fidelity;
    sl_json_key(w, "fidelity");
    sl_json_object_begin(w);
    sl_json_kv_u64(w, "allocs_compared", f->allocs_compared);
    sl_json_kv_u64(w, "decisions_matched", f->decisions_matched);
    sl_json_kv_u64(w, "segment_sizes_matched", f->segment_sizes_matched);
    sl_json_kv_u64(w, "recorded_segment_allocs", f->recorded_segment_allocs);
    sl_json_kv_u64(w, "engine_segment_allocs", f->engine_segment_allocs);
    sl_json_kv_u64(w, "recorded_segment_frees", f->recorded_segment_frees);
    sl_json_kv_u64(w, "engine_segment_frees", f->engine_segment_frees);
    sl_json_kv_u64(w, "segments_placed_as_recorded", f->segments_placed_as_recorded);
    sl_json_kv_u64(w, "addresses_matched", f->addresses_matched);
    json_index(w, "first_address_mismatch", f->first_address_mismatch);
    sl_json_kv_u64(w, "recorded_peak_reserved_bytes", f->recorded_peak_reserved_bytes);
    sl_json_kv_u64(w, "recorded_final_reserved_bytes", f->recorded_final_reserved_bytes);
    json_index(w, "first_decision_mismatch", f->first_decision_mismatch);
    json_index(w, "first_size_mismatch", f->first_size_mismatch);
    sl_json_kv_u64(w, "recorded_segment_maps", f->recorded_segment_maps);
    sl_json_kv_u64(w, "engine_segment_maps", f->engine_segment_maps);
    sl_json_kv_u64(w, "map_sizes_matched", f->map_sizes_matched);
    sl_json_kv_u64(w, "maps_placed_as_recorded", f->maps_placed_as_recorded);
    sl_json_kv_u64(w, "recorded_segment_unmaps", f->recorded_segment_unmaps);
    sl_json_kv_u64(w, "engine_segment_unmaps", f->engine_segment_unmaps);
    sl_json_kv_u64(w, "recorded_ooms", f->recorded_ooms);
    sl_json_kv_u64(w, "ooms_matched", f->ooms_matched);
    json_index(w, "first_oom_mismatch", f->first_oom_mismatch);
    sl_json_kv_u64(w, "empty_caches_compared", f->empty_caches_compared);
    sl_json_kv_u64(w, "empty_cache_sets_matched", f->empty_cache_sets_matched);
    sl_json_key(w, "first_empty_cache_mismatch");
    if (f->first_empty_cache_mismatch == SUBLET_REPLAY_NONE) {
        sl_json_null(w);
    } else {
        const sublet_replay_release_diff *d = &f->empty_cache_mismatch;
        const sublet_trace_event *e = facts_at(t, f->first_empty_cache_mismatch);
        sl_json_object_begin(w);
        sl_json_kv_u64(w, "event", f->first_empty_cache_mismatch);
        sl_json_kv_u64(w, "line", e ? e->line : 0);
        sl_json_kv_u64(w, "recorded", d->recorded);
        sl_json_kv_u64(w, "engine", d->engine);
        sl_json_kv_u64(w, "only_recorded", d->only_recorded);
        sl_json_kv_u64(w, "only_engine", d->only_engine);
        json_release(w, "first_only_recorded", &d->first_only_recorded);
        json_release(w, "first_only_engine", &d->first_only_engine);
        sl_json_object_end(w);
    }
    if (r->npools) /* a trace with private pools: the same, per pool */
        json_pools(w, r);
    sl_json_object_end(w);
}

static void print_json(FILE *out, const char *path, const sublet_replay_options *o,
                       const rp_run *c, const char *snapshot_out, int summaries)
{
    const rp_facts *t = &c->facts;
    const sublet_replay_result *r = &c->r;
    const char *error = c->failure;
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
    json_fidelity(&w, t, r);
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


/* ---- the text: `sublet replay` ------------------------------------------------------------- */

/* Print an engine message on one logical line group: continuation lines are
 * indented under the first. */
static void print_indented(FILE *out, const char *msg)
{
    for (const char *p = msg; *p; p++) {
        fputc(*p, out);
        if (*p == '\n' && p[1])
            fputs("    ", out);
    }
}

/* The deferred OOM lines, as on_oom prints them. */
static void print_ooms(FILE *out, const rp_run *c)
{
    for (size_t i = 0; i < c->ooms.n; i++) {
        const sl_oom_rec *x = &c->ooms.v[i];
        fprintf(out, "event %" PRIu64 ": alloc of %" PRIu64 " bytes on stream %" PRIu64 " failed: ",
                x->event, x->size, x->stream);
        print_indented(out, x->message);
        fputc('\n', out);
    }
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 100.0; }

static const char *fmt_size(uint64_t n, char *buf, size_t cap)
{
    sublet_format_size(n, buf, cap);
    return buf;
}

static void print_event_ref(FILE *out, const rp_facts *t, uint64_t idx)
{
    const sublet_trace_event *e = facts_at(t, idx);
    if (!e) {
        fprintf(out, "none\n");
        return;
    }
    fprintf(out, "event %" PRIu64 " (line %" PRIu64 ": %s of %" PRIu64 " bytes at %" PRIu64 ")\n", idx,
            e->line, sublet_trace_kind_name(e->kind), e->size, e->addr);
}

/* " (first: segment_unmap of N bytes at ADDR)", nothing when there is none. */
static void print_release(FILE *out, const sublet_replay_release *x)
{
    if (x->kind == SUBLET_ACT_COUNT)
        return;
    fprintf(out, " (first: %s of %" PRIu64 " bytes at %" PRIu64 ")",
            sublet_action_name((sublet_action)x->kind), x->size, x->addr);
}

/* A trace with private pools: the fidelity of each pool, the default pools
 * first (sublet_replay_pool_fidelity). */
static void print_pools(FILE *out, const sublet_replay_options *o, const sublet_replay_result *r)
{
    fprintf(out, "  per pool:\n");
    for (size_t k = 0; k < r->npools; k++) {
        const sublet_replay_pool_fidelity *p = &r->pools[k];
        const char *kind = !p->pool_id[0] && !p->pool_id[1] ? "default"
                           : p->pool_id[1] == 0             ? "CUDA graph"
                           : p->pool_id[0] == 0             ? "MemPool"
                                                            : "private";
        char id[64];
        snprintf(id, sizeof id, "(%" PRIu64 ", %" PRIu64 ")", p->pool_id[0], p->pool_id[1]);
        fprintf(out, "    pool %-10s %-10s decisions %" PRIu64 " / %" PRIu64 ", segment sizes %" PRIu64
                " / %" PRIu64 " (engine made %" PRIu64 ")",
                id, kind, p->decisions_matched, p->allocs_compared, p->segment_sizes_matched,
                p->recorded_segment_allocs, p->engine_segment_allocs);
        if (o->placement_hints)
            fprintf(out, ", addresses %" PRIu64 " / %" PRIu64, p->addresses_matched, p->allocs_compared);
        fprintf(out, ", segment_free rows %" PRIu64, p->recorded_segment_frees);
        if (p->released_at != SUBLET_REPLAY_NONE)
            fprintf(out, ", released before event %" PRIu64, p->released_at);
        fprintf(out, "\n");
        if (p->first_decision_mismatch != SUBLET_REPLAY_NONE)
            fprintf(out, "      first decision mismatch at event %" PRIu64 "\n", p->first_decision_mismatch);
        if (o->placement_hints && p->first_address_mismatch != SUBLET_REPLAY_NONE)
            fprintf(out, "      first address mismatch at event %" PRIu64 "\n", p->first_address_mismatch);
    }
    if (r->pools_dropped)
        fprintf(out, "    (%" PRIu64 " more pools not listed)\n", r->pools_dropped);
}

/* The memory summaries and the counts. */
static void print_body(FILE *out, const char *path, const rp_facts *t,
                       const sublet_replay_result *r)
{
    char b1[48];
    fprintf(out, "\n== memory_summary at peak reserved (");
    if (r->peak_reserved_event == SUBLET_REPLAY_NONE)
        fprintf(out, "before the first event) ==\n");
    else
        fprintf(out, "after event %" PRIu64 ") ==\n", r->peak_reserved_event);
    fputs(r->summary_peak ? r->summary_peak : "", out);
    fprintf(out, "\n== memory_summary at the end (");
    if (r->last_event == SUBLET_REPLAY_NONE)
        fprintf(out, "no event driven) ==\n");
    else
        fprintf(out, "after event %" PRIu64 ") ==\n", r->last_event);
    fputs(r->summary_end ? r->summary_end : "", out);

    fprintf(out, "\nreplay of %s\n", path);
    uint64_t npre = t->prelude;
    fprintf(out, "  events driven:          %" PRIu64 " (%" PRIu64 " prelude rows, %" PRIu64
            " allocs, %" PRIu64 " frees, %" PRIu64 " deferred by stream use, %" PRIu64
            " empty_cache)\n",
            r->events, r->events < npre ? r->events : npre, r->allocs, r->frees, r->deferred_frees,
            r->empty_caches);
    fprintf(out, "  peak requested:         %" PRIu64 " bytes (%s)\n", r->peak_requested_bytes,
            fmt_size(r->peak_requested_bytes, b1, sizeof b1));
    fprintf(out, "  peak reserved:          %" PRIu64 " bytes (%s)\n", r->peak_reserved_bytes,
            fmt_size(r->peak_reserved_bytes, b1, sizeof b1));
    fprintf(out, "  final reserved:         %" PRIu64 " bytes (%s)\n", r->final_reserved_bytes,
            fmt_size(r->final_reserved_bytes, b1, sizeof b1));
    fprintf(out, "  device allocs / frees:  %" PRIu64 " / %" PRIu64 "\n", r->device_allocs,
            r->device_frees);
    fprintf(out, "  alloc retries:          %" PRIu64 "\n", r->alloc_retries);
    fprintf(out, "  OOMs:                   %" PRIu64 "%s\n", r->ooms,
            r->stopped_on_oom ? " (stopped at the first)" : "");
    fprintf(out, "  rows not applied:       %" PRIu64 "%s%s\n", r->errors, r->errors ? ", first: " : "",
            r->errors ? r->first_error : "");
}

/* The fidelity against the recording: what matched, the first mismatches. */
static void print_fidelity(FILE *out, const rp_facts *t, const sublet_replay_options *o,
                           const sublet_replay_result *r)
{
    const sublet_replay_fidelity *f = &r->fidelity;
    char b1[48], b2[48];
    fprintf(out, "fidelity against the recording:\n");
    fprintf(out, "  decisions matched:      %" PRIu64 " / %" PRIu64 " allocs (%.2f %%)\n",
            f->decisions_matched, f->allocs_compared, pct(f->decisions_matched, f->allocs_compared));
    fprintf(out, "  segment sizes matched:  %" PRIu64 " / %" PRIu64
            " recorded segment allocs (engine made %" PRIu64 ")\n",
            f->segment_sizes_matched, f->recorded_segment_allocs, f->engine_segment_allocs);
    if (o->placement_hints) {
        fprintf(out, "  placed as recorded:     %" PRIu64 " / %" PRIu64 " new segments\n",
                f->segments_placed_as_recorded, f->engine_segment_allocs);
        fprintf(out, "  addresses matched:      %" PRIu64 " / %" PRIu64 " allocs (at PyTorch's address)\n",
                f->addresses_matched, f->allocs_compared);
    }
    if (f->recorded_segment_maps || f->engine_segment_maps) {
        fprintf(out, "  map sizes matched:      %" PRIu64 " / %" PRIu64
                " allocs PyTorch served by mapping pages (engine mapped for %" PRIu64 ")\n",
                f->map_sizes_matched, f->recorded_segment_maps, f->engine_segment_maps);
        if (o->placement_hints)
            fprintf(out, "  maps placed as recorded: %" PRIu64 " / %" PRIu64 " allocs (first map at "
                    "PyTorch's address)\n",
                    f->maps_placed_as_recorded, f->engine_segment_maps);
    }
    if (f->empty_caches_compared) {
        fprintf(out, "  empty_cache releases:   %" PRIu64 " / %" PRIu64 " released the recorded set "
                "(engine: %" PRIu64 " segment frees, %" PRIu64 " unmaps; recorded: %" PRIu64
                " segment_free, %" PRIu64 " segment_unmap rows)\n",
                f->empty_cache_sets_matched, f->empty_caches_compared, f->engine_segment_frees,
                f->engine_segment_unmaps, f->recorded_segment_frees, f->recorded_segment_unmaps);
    }
    int64_t d = (int64_t)(r->peak_reserved_bytes - f->recorded_peak_reserved_bytes);
    fprintf(out, "  peak reserved:          %" PRIu64 " engine vs %" PRIu64 " recorded (%s vs %s): ",
            r->peak_reserved_bytes, f->recorded_peak_reserved_bytes,
            fmt_size(r->peak_reserved_bytes, b1, sizeof b1),
            fmt_size(f->recorded_peak_reserved_bytes, b2, sizeof b2));
    if (d == 0)
        fprintf(out, "exact\n");
    else
        fprintf(out, "differs by %+" PRId64 " bytes\n", d);
    if (f->first_decision_mismatch != SUBLET_REPLAY_NONE) {
        fprintf(out, "  first decision mismatch: ");
        print_event_ref(out, t, f->first_decision_mismatch);
    }
    if (o->placement_hints && f->first_address_mismatch != SUBLET_REPLAY_NONE) {
        fprintf(out, "  first address mismatch: ");
        print_event_ref(out, t, f->first_address_mismatch);
    }
    if (f->first_size_mismatch != SUBLET_REPLAY_NONE) {
        fprintf(out, "  first size mismatch:    ");
        print_event_ref(out, t, f->first_size_mismatch);
    }
    if (r->npools)
        print_pools(out, o, r);
    if (f->first_empty_cache_mismatch != SUBLET_REPLAY_NONE) {
        const sublet_replay_release_diff *x = &f->empty_cache_mismatch;
        const sublet_trace_event *e = facts_at(t, f->first_empty_cache_mismatch);
        fprintf(out, "  first release mismatch: event %" PRIu64 " (line %" PRIu64 "): recorded %" PRIu64
                ", engine %" PRIu64 "; %" PRIu64 " only recorded",
                f->first_empty_cache_mismatch, e ? e->line : 0, x->recorded, x->engine,
                x->only_recorded);
        print_release(out, &x->first_only_recorded);
        fprintf(out, ", %" PRIu64 " only by the engine", x->only_engine);
        print_release(out, &x->first_only_engine);
        fprintf(out, "\n");
    }
}

static void print_header(FILE *out, const char *path, const rp_facts *t,
                         const sublet_replay_options *o, int conf_from_trace)
{
    fprintf(out, "sublet replay %s\n", path);
    fprintf(out, "  trace:          %" PRIu64 " rows (%" PRIu64 " prelude: %" PRIu64 " pre_segment, %" PRIu64
            " pre_alloc), %s\n", t->rows, t->prelude, t->pre_segments, t->pre_allocs,
            sublet_trace_format_name(t->format));
    fprintf(out, "  settings:       %s%s\n", o->conf[0] ? o->conf : "(PyTorch defaults)",
            conf_from_trace ? " (recorded in the trace)" : "");
    char b[48];
    sublet_format_size(o->device_memory, b, sizeof b);
    fprintf(out, "  device memory:  %s (%" PRIu64 " bytes), sim backend%s\n", b, o->device_memory,
            o->placement_hints ? ", segments placed as recorded when free" : "");
    if (o->stop_after != SUBLET_REPLAY_ALL)
        fprintf(out, "  stopping after: event %" PRIu64 "\n", o->stop_after);
}

/* The fragmentation picture and the OOM diagnosis, as text. */
static void print_frag_text(FILE *out, const rp_run *c)
{
    if (c->frag) {
        size_t n = sublet_frag_format_text(c->frag, NULL, NULL, 0);
        char *txt = malloc(n + 1);
        if (txt) {
            sublet_frag_format_text(c->frag, NULL, txt, n + 1);
            fprintf(out, "\n%s", txt);
            free(txt);
        }
    }
    if (c->have_diag)
        sl_view_diagnosis_text(out, &c->diag);
}

static void print_text(FILE *out, const char *path, const sublet_replay_options *o,
                       const rp_run *c, const sublet_view_options *v)
{
    print_header(out, path, &c->facts, o, (v->flags & SUBLET_VIEW_CONF_RECORDED) != 0);
    print_ooms(out, c);
    print_body(out, path, &c->facts, &c->r);
    print_fidelity(out, &c->facts, o, &c->r);
    print_frag_text(out, c);
}

/* `sublet mincap`'s text. */
static void mincap_text(FILE *out, const char *path, const sublet_replay_options *o,
                        const sublet_mincap_result *m)
{
    const sublet_replay_result *r = &m->at_min;
    const sublet_sim_ops *d = &r->device_ops;
    const char *conf = o->conf;
    char b1[32], b2[32];
    if (path)
        fprintf(out, "trace:                %s\n", path);
    fprintf(out, "settings:             %s\n", conf && *conf ? conf : "(PyTorch defaults)");
    fprintf(out, "prelude:              %s%s\n", sublet_prelude_name(o->prelude),
            o->placement_hints ? "" : ", no placement hints");
    if (o->stop_after != SUBLET_REPLAY_ALL)
        fprintf(out, "up to event:          %" PRIu64 "\n", o->stop_after);
    sublet_format_size(m->min_capacity_bytes, b1, sizeof b1);
    fprintf(out, "min capacity:         %" PRIu64 " bytes (%.4f GiB, %s)\n", m->min_capacity_bytes,
            (double)m->min_capacity_bytes / (double)(UINT64_C(1) << 30), b1);
    sublet_format_size(m->peak_requested_bytes, b1, sizeof b1);
    fprintf(out, "peak live requested:  %" PRIu64 " bytes (%.4f GiB, %s)\n",
            m->peak_requested_bytes,
            (double)m->peak_requested_bytes / (double)(UINT64_C(1) << 30), b1);
    fprintf(out, "overhead:             %.2f %%\n", 100.0 * m->overhead);
    size_t checked = 0;
    for (size_t i = 0; i < m->nprobes; i++)
        checked += m->probes[i].checked;
    if (m->monotone) {
        fprintf(out, "monotone:             yes (no probed size failed above one that ran; %zu "
                     "sizes above the answer checked)\n", checked);
    } else {
        sublet_format_size(m->smallest_ok_bytes, b1, sizeof b1);
        fprintf(out, "monotone:             NO: %" PRIu64 " probed size%s failed above %" PRIu64
                     " bytes (%s), which ran:", m->failed_above, m->failed_above == 1 ? "" : "s",
                m->smallest_ok_bytes, b1);
        for (size_t i = 0; i < m->nprobes; i++)
            if (!m->probes[i].ok && m->probes[i].bytes > m->smallest_ok_bytes)
                fprintf(out, " %" PRIu64, m->probes[i].bytes);
        fprintf(out, "\n                      (the min capacity is the smallest size with no "
                     "failure probed above it)\n");
    }
    sublet_format_size(m->resolution, b1, sizeof b1);
    fprintf(out, "resolution:           %s\n", b1);
    fprintf(out, "replays run:          %" PRIu64 "\n", m->replays);
    sublet_format_size(r->peak_reserved_bytes, b1, sizeof b1);
    sublet_format_size(r->final_reserved_bytes, b2, sizeof b2);
    fprintf(out, "at min capacity:      peak reserved %s, final reserved %s\n", b1, b2);
    fprintf(out, "device calls at min capacity:\n");
    fprintf(out, "  segment allocs:     %" PRIu64 "\n", d->segment_allocs);
    fprintf(out, "  segment frees:      %" PRIu64 "\n", d->segment_frees);
    fprintf(out, "  va reserves:        %" PRIu64 "\n", d->va_reserves);
    fprintf(out, "  va releases:        %" PRIu64 "\n", d->va_releases);
    fprintf(out, "  maps:               %" PRIu64 "\n", d->va_maps);
    fprintf(out, "    of which aliases: %" PRIu64 "\n", d->va_aliases);
    fprintf(out, "  unmaps:             %" PRIu64 "\n", d->va_unmaps);
    fprintf(out, "  alloc retries:      %" PRIu64 "\n", r->alloc_retries);
    fprintf(out, "events driven:        %" PRIu64 " (%" PRIu64 " allocs, %" PRIu64 " frees)\n",
            r->events, r->allocs, r->frees);
}

/* The stream's error, when it has one (a malformed row, a read error). */
static sublet_status stream_status(sublet_trace_stream *ts, char *err, size_t cap)
{
    size_t n;
    return sublet_trace_stream_next(ts, NULL, 0, &n, err, cap);
}

/* The replay of ts under o into *c (observers off, but for the caller's
 * on_oom; summaries captured when the document shows them), then the rows
 * after its last, read to count and check them; then, when it ran, the
 * state after its last event and, with OOMs, their diagnosis.  Returns the
 * stream's status: not SUBLET_OK (a malformed row, a read error; its
 * message in err) gives no document.  c->failure is the replay's own error. */
static sublet_status run_replay(sublet_trace_stream *ts, const sublet_replay_options *o,
                                int summaries, rp_run *c, sublet_replay_options *ro, char *err,
                                size_t cap)
{
    memset(c, 0, sizeof *c);
    c->chain = o->on_oom;
    c->chain_user = o->oom_user;
    rp_facts *tf = &c->facts;
    tf->format = sublet_trace_stream_format(ts);
    const sublet_trace_event *pre;
    tf->prelude = sublet_trace_stream_prelude(ts, &pre);
    for (uint64_t i = 0; i < tf->prelude; i++) {
        tf->pre_segments += pre[i].kind == SUBLET_TRACE_PRE_SEGMENT;
        tf->pre_allocs += pre[i].kind == SUBLET_TRACE_PRE_ALLOC;
    }
    *ro = *o;
    if (!ro->conf)
        ro->conf = "";
    ro->on_oom = on_oom;
    ro->oom_user = c;
    if (summaries)
        ro->capture_summary = 1;
    ro->before_event = NULL;
    ro->trace = NULL;
    ro->after_event = keep_named_rows;
    ro->observer_user = tf;
    tf->r = &c->r;
    /* the state at the end comes from the same pass */
    sublet_frag_state *end_state = NULL;
    sublet_status st =
        sublet_frag_replay_stream(ts, ro, &c->r, &end_state, c->rerr, sizeof c->rerr);
    ro->after_event = NULL;
    ro->observer_user = NULL;
    /* the rest of the rows: counted and checked, as loading does */
    sublet_trace_event *rest = malloc(4096 * sizeof *rest);
    char serr[1024] = "";
    sublet_status ss = rest ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
    if (!rest)
        sl_msg(serr, sizeof serr, "out of memory");
    size_t got = 1;
    while (ss == SUBLET_OK && (ss = stream_status(ts, serr, sizeof serr)) == SUBLET_OK && got)
        ss = sublet_trace_stream_next(ts, rest, 4096, &got, serr, sizeof serr);
    free(rest);
    if (ss != SUBLET_OK) {
        sl_msg(err, cap, "%s", serr[0] ? serr : sublet_status_text(ss));
        sublet_frag_state_free(end_state);
        return ss;
    }
    tf->rows = sublet_trace_stream_rows(ts);
    c->status = st;
    c->failure = st == SUBLET_OK ? NULL : (c->rerr[0] ? c->rerr : sublet_status_text(st));
    if (!c->failure) {
        char ferr[512];
        c->frag = end_state;
        end_state = NULL;
        sublet_replay_options dopt = *ro;
        dopt.on_finish = NULL;
        dopt.finish_user = NULL;
        if (c->r.ooms &&
            sublet_frag_diagnose_stream(ts, &dopt, NULL, &c->diag, ferr, sizeof ferr) == SUBLET_OK)
            c->have_diag = 1;
    }
    sublet_frag_state_free(end_state); /* kept only when the replay succeeded */
    return SUBLET_OK;
}

/* The replay's document, JSON or text, from one run. */
static sublet_status replay_doc(sublet_trace_stream *ts, const sublet_replay_options *o,
                                const sublet_view_options *v, int text, char **out, char *err,
                                size_t cap)
{
    sublet_status args = sl_view_begin(ts, o, v, out, err, cap);
    if (args != SUBLET_OK)
        return args;
    int summaries = text || (v->flags & SUBLET_VIEW_SUMMARIES);
    rp_run c;
    sublet_replay_options ro;
    sublet_status ss = run_replay(ts, o, summaries, &c, &ro, err, cap);
    if (ss != SUBLET_OK) {
        run_free(&c);
        return ss;
    }
    sublet_status rs = c.status;
    sl_doc doc;
    sublet_status ds = sl_doc_open(&doc);
    if (ds == SUBLET_OK) {
        const char *name = v->name ? v->name : "";
        if (text)
            print_text(doc.f, name, &ro, &c, v);
        else
            print_json(doc.f, name, &ro, &c, v->snapshot_out,
                       (v->flags & SUBLET_VIEW_SUMMARIES) != 0);
        ds = sl_doc_close(&doc, out);
    }
    if (c.failure)
        sl_msg(err, cap, "%s", c.failure);
    else if (c.ooms.nomem)
        sl_msg(err, cap, "out of memory recording OOM events; some are missing");
    run_free(&c);
    return ds != SUBLET_OK ? ds : rs;
}

sublet_status sublet_replay_stream_json(sublet_trace_stream *ts, const sublet_replay_options *o,
                                        const sublet_view_options *v, char **out, char *err,
                                        size_t cap)
{
    return replay_doc(ts, o, v, 0, out, err, cap);
}

sublet_status sublet_replay_stream_text(sublet_trace_stream *ts, const sublet_replay_options *o,
                                        const sublet_view_options *v, char **out, char *err,
                                        size_t cap)
{
    return replay_doc(ts, o, v, 1, out, err, cap);
}

/* The trace's documents are the stream's over it: the same replay driver,
 * and no row is kept beside the array (those the documents name are read
 * as they are driven). */
static sublet_status replay_trace_doc(const sublet_trace *t, const sublet_replay_options *o,
                                      const sublet_view_options *v, int text, char **out,
                                      char *err, size_t cap)
{
    sublet_trace_stream *ts = NULL;
    sublet_status st = sl_view_trace_open(t, o, v, out, err, cap, &ts);
    if (st != SUBLET_OK)
        return st;
    st = replay_doc(ts, o, v, text, out, err, cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_replay_json(const sublet_trace *t, const sublet_replay_options *o,
                                 const sublet_view_options *v, char **out, char *err, size_t cap)
{
    return replay_trace_doc(t, o, v, 0, out, err, cap);
}

sublet_status sublet_replay_text(const sublet_trace *t, const sublet_replay_options *o,
                                 const sublet_view_options *v, char **out, char *err, size_t cap)
{
    return replay_trace_doc(t, o, v, 1, out, err, cap);
}

/* The search's document, JSON or text. */
static sublet_status mincap_doc(const sublet_mincap_result *m, const sublet_replay_options *o,
                                const sublet_view_options *v, int text, char **out)
{
    sublet_replay_options oo = *o;
    if (!oo.conf)
        oo.conf = "";
    sl_doc doc;
    sublet_status st = sl_doc_open(&doc);
    if (st == SUBLET_OK) {
        if (text)
            mincap_text(doc.f, v->name, &oo, m);
        else
            json_report(doc.f, v->name, &oo, m);
        st = sl_doc_close(&doc, out);
    }
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
    return mincap_doc(m, o, v, 0, out);
}

sublet_status sublet_mincap_result_text(const sublet_mincap_result *m,
                                        const sublet_replay_options *o,
                                        const sublet_view_options *v, char **out)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!m || !o || !v)
        return SUBLET_ERR_INVALID_ARGUMENT;
    return mincap_doc(m, o, v, 1, out);
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
    if (st == SUBLET_OK)
        st = mincap_doc(&m, &o, v, 0, out);
    sublet_mincap_result_free(&m);
    return st;
}
