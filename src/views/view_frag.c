/* sublet views — the fragmentation documents: `sublet frag --json` (the
 * state at any event: metrics, free blocks by size, pinning segments,
 * segment map) and `sublet diagnose --json` (every OOM explained, with the
 * settings that avoid it), and the pieces other documents carry (the
 * "fragmentation" object, the diagnosis). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "views/views_internal.h"

/* ---- JSON pieces ----------------------------------------------------------------------- */

static void json_metrics(sl_json_writer *w, const sublet_frag_stats *m)
{
    sl_json_object_begin(w);
    sl_json_kv_u64(w, "reserved_bytes", m->reserved_bytes);
    sl_json_kv_u64(w, "allocated_bytes", m->allocated_bytes);
    sl_json_kv_u64(w, "active_bytes", m->active_bytes);
    sl_json_kv_u64(w, "requested_bytes", m->requested_bytes);
    sl_json_kv_u64(w, "inactive_split_bytes", m->inactive_split_bytes);
    sl_json_kv_u64(w, "unallocated_bytes", m->unallocated_bytes);
    sl_json_kv_u64(w, "internal_waste_bytes", m->internal_waste_bytes);
    sl_json_kv_u64(w, "free_bytes", m->free_bytes);
    sl_json_kv_u64(w, "free_blocks", m->free_blocks);
    sl_json_kv_u64(w, "largest_free_block", m->largest_free_block);
    sl_json_kv_double(w, "external", m->external);
    sl_json_kv_double(w, "unused", m->unused);
    sl_json_kv_double(w, "spread", m->spread);
    sl_json_object_end(w);
}

void sl_view_frag_json(sl_json_writer *w, const char *key, const sublet_frag_state *st)
{
    static const char *const pools[3] = {"all", "small_pool", "large_pool"};
    sl_json_key(w, key);
    if (!st) {
        sl_json_null(w);
        return;
    }
    sl_json_object_begin(w);
    for (int k = 0; k < 3; k++) {
        sublet_frag_stats m;
        sublet_frag_compute(st, k, SUBLET_STREAM_ALL, &m);
        sl_json_key(w, pools[k]);
        json_metrics(w, &m);
    }
    sl_json_key(w, "streams");
    sl_json_array_begin(w);
    size_t ns = sublet_frag_streams(st, NULL, 0);
    sublet_stream *streams = ns ? malloc(ns * sizeof *streams) : NULL;
    if (streams) {
        sublet_frag_streams(st, streams, ns);
        for (size_t i = 0; i < ns; i++) {
            sublet_frag_stats m;
            sublet_frag_compute(st, SUBLET_POOL_ALL, streams[i], &m);
            sl_json_object_begin(w);
            sl_json_kv_u64(w, "stream", streams[i]);
            sl_json_kv_u64(w, "free_blocks", m.free_blocks);
            sl_json_kv_u64(w, "free_bytes", m.free_bytes);
            sl_json_kv_u64(w, "largest_free_block", m.largest_free_block);
            sl_json_kv_double(w, "external", m.external);
            sl_json_kv_double(w, "spread", m.spread);
            sl_json_kv_u64(w, "max_allocatable", sublet_frag_max_allocatable(st, streams[i]));
            sl_json_object_end(w);
        }
        free(streams);
    }
    sl_json_array_end(w);
    if (sublet_frag_has_private_pools(st))
        sl_view_pools_json(w, "pools", st);
    sl_json_object_end(w);
}

static void json_pool_id(sl_json_writer *w, const char *key, const uint64_t id[2])
{
    sl_json_key(w, key);
    sl_json_array_begin(w);
    sl_json_u64(w, id[0]);
    sl_json_u64(w, id[1]);
    sl_json_array_end(w);
}

void sl_view_pools_json(sl_json_writer *w, const char *key, const sublet_frag_state *st)
{
    size_t np = sublet_frag_pools(st, NULL, 0);
    sublet_frag_pool *pools = np ? malloc(np * sizeof *pools) : NULL;
    np = pools ? sublet_frag_pools(st, pools, np) : 0;
    sl_json_key(w, key);
    sl_json_array_begin(w);
    for (size_t p = 0; p < np; p++) {
        const sublet_frag_pool *q = &pools[p];
        char name[48];
        sl_json_object_begin(w);
        json_pool_id(w, "pool_id", q->pool_id);
        sl_json_kv_string(w, "name", sublet_frag_pool_name(q->pool_id, name, sizeof name));
        sl_json_kv_u64(w, "segments", q->segments);
        sl_json_kv_u64(w, "pinned_segments", q->pinned_segments);
        sl_json_kv_u64(w, "reserved_bytes", q->reserved_bytes);
        sl_json_kv_u64(w, "allocated_bytes", q->allocated_bytes);
        sl_json_kv_u64(w, "active_bytes", q->active_bytes);
        sl_json_kv_u64(w, "requested_bytes", q->requested_bytes);
        sl_json_kv_u64(w, "free_bytes", q->free_bytes);
        sl_json_kv_u64(w, "free_blocks", q->free_blocks);
        sl_json_kv_u64(w, "largest_free_block", q->largest_free_block);
        sl_json_kv_u64(w, "pinned_free_bytes", q->pinned_free_bytes);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
    free(pools);
}

static const char *state_name(sublet_block_state s)
{
    return s == SUBLET_BLOCK_ACTIVE_ALLOCATED      ? "active_allocated"
           : s == SUBLET_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free"
                                                   : "inactive";
}

static void json_stack(sl_json_writer *w, const sublet_frag_state *st, uint32_t stack)
{
    sl_json_key(w, "stack");
    sl_json_array_begin(w);
    if (stack && stack <= st->nstacks) {
        const char *p = st->stacks[stack - 1];
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1),
                     p);
            sl_json_string(w, line);
            p += len + (e ? 1 : 0);
        }
    }
    sl_json_array_end(w);
}

/* pool_id only when the state has private pools (documents without them
 * stay as they were) */
static void json_segment_head(sl_json_writer *w, const sublet_frag_segment *s, int pool_ids)
{
    sl_json_kv_u64(w, "address", s->addr);
    sl_json_kv_u64(w, "size", s->size);
    sl_json_kv_u64(w, "stream", s->stream);
    sl_json_kv_string(w, "pool", s->is_small ? "small" : "large");
    if (pool_ids)
        json_pool_id(w, "pool_id", s->pool_id);
    sl_json_kv_bool(w, "expandable", s->is_expandable);
    sl_json_kv_u64(w, "allocated_bytes", s->allocated_size);
    sl_json_kv_u64(w, "active_bytes", s->active_size);
    sl_json_kv_u64(w, "requested_bytes", s->requested_size);
    sl_json_kv_u64(w, "free_bytes", s->free_size);
    sl_json_kv_u64(w, "largest_free_block", s->largest_free);
    sl_json_kv_u64(w, "live_blocks", s->live_blocks);
}

void sl_view_pinning_json(sl_json_writer *w, const char *key, const sublet_frag_state *st, size_t top)
{
    sl_json_key(w, key);
    sl_json_array_begin(w);
    size_t *idx = top ? malloc(top * sizeof *idx) : NULL;
    size_t n = idx ? sublet_frag_pinning(st, idx, top) : 0;
    int pool_ids = sublet_frag_has_private_pools(st);
    for (size_t r = 0; r < n && r < top; r++) {
        const sublet_frag_segment *s = &st->segments[idx[r]];
        sl_json_object_begin(w);
        sl_json_kv_u64(w, "rank", r + 1);
        json_segment_head(w, s, pool_ids);
        sl_json_kv_u64(w, "hostage_bytes", s->size - s->active_size);
        sl_json_key(w, "live");
        sl_json_array_begin(w);
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            if (b->state == SUBLET_BLOCK_INACTIVE)
                continue;
            sl_json_object_begin(w);
            sl_json_kv_u64(w, "address", b->addr);
            sl_json_kv_u64(w, "size", b->size);
            sl_json_kv_u64(w, "requested_size", b->requested_size);
            sl_json_kv_u64(w, "stream", s->stream);
            sl_json_kv_string(w, "state", state_name(b->state));
            json_stack(w, st, b->stack);
            sl_json_object_end(w);
        }
        sl_json_array_end(w);
        sl_json_object_end(w);
    }
    free(idx);
    sl_json_array_end(w);
}

static void json_histogram(sl_json_writer *w, const sublet_frag_state *st)
{
    sublet_frag_histogram h;
    sublet_frag_histogram_of(st, SUBLET_POOL_ALL, &h);
    sl_json_key(w, "free_block_histogram");
    sl_json_array_begin(w);
    for (unsigned k = 0; k < SUBLET_FRAG_HIST_BUCKETS; k++) {
        if (!h.count[k])
            continue;
        sl_json_object_begin(w);
        sl_json_kv_u64(w, "min_size", UINT64_C(1) << k);
        sl_json_kv_u64(w, "max_size", k < 63 ? (UINT64_C(1) << (k + 1)) - 1 : UINT64_MAX);
        sl_json_kv_u64(w, "count", h.count[k]);
        sl_json_kv_u64(w, "bytes", h.bytes[k]);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
}

static void json_segments(sl_json_writer *w, const sublet_frag_state *st, unsigned width)
{
    char *row = malloc((size_t)width + 1);
    int pool_ids = sublet_frag_has_private_pools(st);
    sl_json_key(w, "segments");
    sl_json_array_begin(w);
    for (size_t i = 0; row && i < st->nsegments; i++) {
        const sublet_frag_segment *s = &st->segments[i];
        sl_json_object_begin(w);
        json_segment_head(w, s, pool_ids);
        sublet_frag_map_row(st, i, width, row);
        sl_json_kv_string(w, "map", row);
        sl_json_key(w, "blocks");
        sl_json_array_begin(w);
        for (size_t k = 0; k < s->nblocks; k++) {
            const sublet_frag_block *b = &st->blocks[s->first_block + k];
            sl_json_object_begin(w);
            sl_json_kv_u64(w, "address", b->addr);
            sl_json_kv_u64(w, "size", b->size);
            sl_json_kv_u64(w, "requested_size", b->requested_size);
            sl_json_kv_string(w, "state", state_name(b->state));
            sl_json_object_end(w);
        }
        sl_json_array_end(w);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
    free(row);
}

/* ---- diagnosis output -------------------------------------------------------------------- */

/* A byte count, or null for 0 (not searched). */
static void json_bytes_or_null(sl_json_writer *w, const char *key, uint64_t v)
{
    sl_json_key(w, key);
    if (v)
        sl_json_u64(w, v);
    else
        sl_json_null(w);
}

/* What the OOMs and groups share: kind, pool, message, diagnosis. */
static void json_oom_common(sl_json_writer *w, const sublet_frag_oom *o)
{
    sl_json_kv_string(w, "kind", o->fragmentation ? "fragmentation" : "exhaustion");
    if (o->pool_id[0] || o->pool_id[1]) /* only then: documents without pools as before */
        json_pool_id(w, "pool_id", o->pool_id);
    sl_json_kv_string(w, "message", o->message ? o->message : "");
    sl_json_key(w, "diagnosis");
    if (o->diagnosis)
        sl_json_string(w, o->diagnosis);
    else
        sl_json_null(w);
}

/* The groups of alike OOMs (sublet_frag_oom_group), each with every event. */
static void json_oom_groups(sl_json_writer *w, const sublet_frag_diagnosis *d)
{
    sl_json_kv_u64(w, "oom_groups_all", d->groups_all);
    sl_json_key(w, "oom_groups");
    sl_json_array_begin(w);
    for (size_t i = 0; i < d->ngroups; i++) {
        const sublet_frag_oom_group *g = &d->groups[i];
        sl_json_object_begin(w);
        sl_json_kv_u64(w, "first_event", g->first.event);
        sl_json_kv_u64(w, "line", g->first.line);
        sl_json_kv_u64(w, "number", g->number);
        sl_json_kv_u64(w, "count", g->count);
        sl_json_kv_u64(w, "size", g->first.size);
        sl_json_kv_u64(w, "stream", g->first.stream);
        sl_json_key(w, "stack");
        if (g->stack) {
            sl_json_array_begin(w);
            for (const char *p = g->stack; *p;) {
                const char *e = strchr(p, '\n');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                char *line = malloc(len + 1);
                if (line) {
                    memcpy(line, p, len);
                    line[len] = '\0';
                    sl_json_string(w, line);
                    free(line);
                }
                p += len + (e ? 1 : 0);
            }
            sl_json_array_end(w);
        } else {
            sl_json_null(w);
        }
        json_oom_common(w, &g->first);
        sl_json_key(w, "events");
        sl_json_array_begin(w);
        for (uint64_t k = 0; k < g->count; k++)
            sl_json_u64(w, g->events[k]);
        sl_json_array_end(w);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
}

/* The device needed under the base settings and the best candidate's. */
static void json_min_capacity(sl_json_writer *w, const sublet_frag_diagnosis *d)
{
    const sublet_frag_candidate *c =
        d->best_capacity < d->ncandidates ? &d->candidates[d->best_capacity] : NULL;
    sl_json_key(w, "min_capacity");
    sl_json_object_begin(w);
    json_bytes_or_null(w, "base_bytes", d->min_capacity_bytes);
    sl_json_key(w, "best_setting");
    if (c)
        sl_json_string(w, c->setting);
    else
        sl_json_null(w);
    json_bytes_or_null(w, "best_bytes", c ? c->min_capacity_bytes : 0);
    sl_json_key(w, "saved_bytes");
    if (c && d->min_capacity_bytes)
        sl_json_i64(w, (int64_t)d->min_capacity_bytes - (int64_t)c->min_capacity_bytes);
    else
        sl_json_null(w);
    sl_json_object_end(w);
}

void sl_view_diagnosis_text(FILE *out, const sublet_frag_diagnosis *d)
{
    size_t n = sublet_frag_diagnosis_format(d, NULL, 0);
    char *text = malloc(n + 1);
    if (!text)
        return;
    sublet_frag_diagnosis_format(d, text, n + 1);
    fputs(text, out);
    free(text);
}

void sl_view_diagnosis_json(sl_json_writer *w, const char *key, const sublet_frag_diagnosis *d)
{
    sl_json_key(w, key);
    sl_json_object_begin(w);
    sl_json_kv_string(w, "conf", d->conf);
    sl_json_kv_u64(w, "device_memory_bytes", d->device_memory);
    sl_json_kv_u64(w, "ooms", d->ooms);
    sl_json_kv_u64(w, "peak_reserved_bytes", d->peak_reserved_bytes);
    sl_json_key(w, "oom_list");
    sl_json_array_begin(w);
    for (size_t i = 0; i < d->noom; i++) {
        const sublet_frag_oom *o = &d->oom[i];
        sl_json_object_begin(w);
        sl_json_kv_u64(w, "event", o->event);
        sl_json_kv_u64(w, "line", o->line);
        sl_json_kv_u64(w, "size", o->size);
        sl_json_kv_u64(w, "stream", o->stream);
        json_oom_common(w, o);
        sl_json_key(w, "group");
        if (o->group < d->ngroups)
            sl_json_u64(w, o->group);
        else
            sl_json_null(w);
        sl_json_key(w, "avoided_by");
        sl_json_array_begin(w);
        for (size_t c = 0; c < d->ncandidates; c++)
            if (sublet_frag_candidate_avoids(&d->candidates[c], o->event))
                sl_json_string(w, d->candidates[c].setting);
        sl_json_array_end(w);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
    sl_json_key(w, "candidates");
    sl_json_array_begin(w);
    for (size_t i = 0; i < d->ncandidates; i++) {
        const sublet_frag_candidate *c = &d->candidates[i];
        sl_json_object_begin(w);
        sl_json_kv_string(w, "setting", c->setting);
        sl_json_kv_string(w, "conf", c->conf);
        sl_json_kv_bool(w, "replayed", c->status == SUBLET_OK);
        if (c->status != SUBLET_OK)
            sl_json_kv_string(w, "error", c->error[0] ? c->error : sublet_status_text(c->status));
        sl_json_kv_u64(w, "ooms", c->ooms);
        sl_json_key(w, "first_oom_event");
        if (c->first_oom_event == SUBLET_REPLAY_NONE)
            sl_json_null(w);
        else
            sl_json_u64(w, c->first_oom_event);
        sl_json_kv_u64(w, "peak_reserved_bytes", c->peak_reserved_bytes);
        sl_json_kv_bool(w, "avoids_all", c->status == SUBLET_OK && c->ooms == 0);
        json_bytes_or_null(w, "min_capacity_bytes", c->min_capacity_bytes);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
    json_oom_groups(w, d);
    json_min_capacity(w, d);
    sl_json_object_end(w);
}


/* ---- the documents ------------------------------------------------------------------------ */

sublet_status sublet_frag_json(const sublet_trace *t, const sublet_replay_options *o,
                               const sublet_view_options *v, char **out, char *err, size_t cap)
{
    sublet_trace_stream *ts = NULL;
    sublet_status st = sl_view_trace_open(t, o, v, out, err, cap, &ts);
    if (st != SUBLET_OK)
        return st;
    st = sublet_frag_json_stream(ts, o, v, out, err, cap);
    sublet_trace_stream_close(ts);
    return st;
}

/* The rows of the trace behind ts, or of one pass over it. */
static sublet_status rows_of(sublet_trace_stream *ts, uint64_t *n, char *err, size_t cap)
{
    const sublet_trace *t = sublet_trace_stream_trace(ts);
    if (t) {
        *n = sublet_trace_count(t);
        return SUBLET_OK;
    }
    sublet_trace_info info;
    sublet_status st = sublet_trace_stream_info(ts, &info, err, cap);
    *n = sublet_trace_stream_rows(ts);
    return st;
}

/* What the frag documents show: the state, where it came from, the replay to it. */
typedef struct fr_run {
    const sublet_frag_state *st;
    const sublet_replay_result *r;
    const char *source; /* "replay" or "segments" */
    uint64_t rows;
} fr_run;

static void frag_json(FILE *out, sublet_trace_stream *t, const sublet_replay_options *o,
                      const sublet_view_options *v, const fr_run *f)
{
    sl_json_writer w;
    sl_json_init(&w, out);
    sl_json_object_begin(&w);
    sl_json_kv_string(&w, "file", v->name ? v->name : "");
    sl_json_kv_string(&w, "format", sublet_trace_format_name(sublet_trace_stream_format(t)));
    sl_json_kv_string(&w, "source", f->source);
    sl_json_kv_u64(&w, "trace_events", f->rows);
    sl_json_key(&w, "event");
    if (f->r->last_event == SUBLET_REPLAY_NONE)
        sl_json_null(&w);
    else
        sl_json_u64(&w, f->r->last_event);
    sl_json_kv_string(&w, "conf", o->conf ? o->conf : "");
    sl_json_kv_u64(&w, "device_memory_bytes", o->device_memory);
    sl_json_kv_u64(&w, "ooms", f->r->ooms);
    sl_json_kv_u64(&w, "replay_errors", f->r->errors);
    sl_view_frag_json(&w, "fragmentation", f->st);
    json_histogram(&w, f->st);
    sl_view_pinning_json(&w, "pinning", f->st, v->top_pinning ? v->top_pinning : 5);
    json_segments(&w, f->st, v->map_width ? v->map_width : 64);
    sl_json_object_end(&w);
    sl_json_finish(&w);
}

/* `sublet frag`'s text: where the state comes from, then
 * sublet_frag_format_text's sections. */
static sublet_status frag_text(FILE *out, sublet_trace_stream *t, const sublet_replay_options *o,
                               const sublet_view_options *v, const fr_run *f)
{
    const sublet_replay_result *r = f->r;
    const sublet_trace_event *pre;
    fprintf(out, "sublet frag %s\n", v->name ? v->name : "");
    fprintf(out, "  source:   %s, %" PRIu64 " events (%zu of them the prelude); ",
            sublet_trace_format_name(sublet_trace_stream_format(t)), f->rows,
            sublet_trace_stream_prelude(t, &pre));
    if (!strcmp(f->source, "segments"))
        fprintf(out, "the snapshot's segments\n");
    else if (r->last_event == SUBLET_REPLAY_NONE)
        fprintf(out, "state before the first recorded event\n");
    else
        fprintf(out, "state after event %" PRIu64 "\n", r->last_event);
    char t1[48];
    sublet_format_size(o->device_memory, t1, sizeof t1);
    fprintf(out, "  replay:   settings %s%s, device %s\n",
            o->conf && o->conf[0] ? o->conf : "(PyTorch defaults)",
            v->flags & SUBLET_VIEW_CONF_RECORDED ? " (recorded)" : "", t1);
    if (r->ooms)
        fprintf(out, "  OOMs:     %" PRIu64 " up to here (first at event %" PRIu64
                     "); `sublet diagnose` explains them\n",
                r->ooms, r->first_oom_event);
    if (r->errors)
        fprintf(out, "  note:     %" PRIu64 " rows could not be replayed (first: %s)\n", r->errors,
                r->first_error);
    fputc('\n', out);
    sublet_frag_format_options fo = {.sections = SUBLET_FRAG_SECTION_ALL,
                                     .map_width = v->map_width ? v->map_width : 64,
                                     .top_pinning = v->top_pinning ? v->top_pinning : 5};
    size_t len = sublet_frag_format_text(f->st, &fo, NULL, 0);
    char *text = malloc(len + 1);
    if (!text)
        return SUBLET_ERR_NO_MEMORY;
    sublet_frag_format_text(f->st, &fo, text, len + 1);
    fputs(text, out);
    free(text);
    return SUBLET_OK;
}

/* The frag document, JSON or text, of the state after v->at. */
static sublet_status frag_doc(sublet_trace_stream *t, const sublet_replay_options *o,
                              const sublet_view_options *v, int text, char **out, char *err,
                              size_t cap)
{
    sublet_status args = sl_view_begin(t, o, v, out, err, cap);
    if (args != SUBLET_OK)
        return args;
    uint64_t n = 0;
    sublet_status ns = rows_of(t, &n, err, cap);
    if (ns != SUBLET_OK)
        return ns;
    if (v->at != SUBLET_REPLAY_ALL && v->at >= n) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT,
                       "--at %" PRIu64 ": the trace has %" PRIu64 " events (0..%" PRIu64 ")", v->at,
                       n, n ? n - 1 : 0);
    }
    sublet_frag_state *st = NULL;
    sublet_replay_result r;
    memset(&r, 0, sizeof r);
    r.last_event = SUBLET_REPLAY_NONE;
    const char *source = "replay";
    sublet_status rs = sublet_frag_state_at_stream(t, o, v->at, &st, &r, err, cap);
    if (rs != SUBLET_OK && v->snapshot && v->at == SUBLET_REPLAY_ALL) {
        if (v->note && v->note_cap)
            snprintf(v->note, v->note_cap,
                     "the replay stopped (%s): the state comes from the snapshot's segments",
                     err && err[0] ? err : sublet_status_text(rs));
        int64_t dev = v->device >= 0 ? v->device : sublet_trace_stream_device(t);
        rs = sublet_frag_from_snapshot(v->snapshot, dev < 0 ? 0 : dev, &st);
        source = "segments";
        if (rs == SUBLET_OK && err && cap)
            err[0] = '\0';
    }
    sl_doc doc;
    if (rs == SUBLET_OK)
        rs = sl_doc_open(&doc);
    if (rs == SUBLET_OK) {
        fr_run f = {st, &r, source, n};
        sublet_status ts = SUBLET_OK;
        if (text)
            ts = frag_text(doc.f, t, o, v, &f);
        else
            frag_json(doc.f, t, o, v, &f);
        rs = sl_doc_close(&doc, out);
        if (ts != SUBLET_OK && rs == SUBLET_OK) {
            free(*out);
            *out = NULL;
            rs = ts;
        }
    }
    sublet_frag_state_free(st);
    sublet_replay_result_free(&r);
    return rs;
}

sublet_status sublet_frag_json_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                      const sublet_view_options *v, char **out, char *err,
                                      size_t cap)
{
    return frag_doc(t, o, v, 0, out, err, cap);
}

sublet_status sublet_frag_text_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                      const sublet_view_options *v, char **out, char *err,
                                      size_t cap)
{
    return frag_doc(t, o, v, 1, out, err, cap);
}

sublet_status sublet_diagnose_json(const sublet_trace *t, const sublet_replay_options *o,
                                   const sublet_frag_diagnose_options *dopt,
                                   const sublet_view_options *v, char **out, char *err,
                                   size_t cap)
{
    sublet_trace_stream *ts = NULL;
    sublet_status st = sl_view_trace_open(t, o, v, out, err, cap, &ts);
    if (st != SUBLET_OK)
        return st;
    st = sublet_diagnose_json_stream(ts, o, dopt, v, out, err, cap);
    sublet_trace_stream_close(ts);
    return st;
}

/* The diagnosis document, JSON or text. */
static sublet_status diagnose_doc(sublet_trace_stream *t, const sublet_replay_options *o,
                                  const sublet_frag_diagnose_options *dopt,
                                  const sublet_view_options *v, int text, char **out, char *err,
                                  size_t cap)
{
    sublet_status args = sl_view_begin(t, o, v, out, err, cap);
    if (args != SUBLET_OK)
        return args;
    sublet_frag_diagnosis d;
    sublet_status st = sublet_frag_diagnose_stream(t, o, dopt, &d, err, cap);
    if (st != SUBLET_OK) {
        sublet_frag_diagnosis_free(&d);
        return st;
    }
    sl_doc doc;
    st = sl_doc_open(&doc);
    if (st == SUBLET_OK && text) {
        fprintf(doc.f, "sublet diagnose %s\n", v->name ? v->name : "");
        sl_view_diagnosis_text(doc.f, &d);
        st = sl_doc_close(&doc, out);
    } else if (st == SUBLET_OK) {
        sl_json_writer w;
        sl_json_init(&w, doc.f);
        sl_json_object_begin(&w);
        sl_json_kv_string(&w, "file", v->name ? v->name : "");
        sl_view_diagnosis_json(&w, "diagnosis", &d);
        sl_json_object_end(&w);
        sl_json_finish(&w);
        st = sl_doc_close(&doc, out);
    }
    sublet_frag_diagnosis_free(&d);
    return st;
}

sublet_status sublet_diagnose_json_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                          const sublet_frag_diagnose_options *dopt,
                                          const sublet_view_options *v, char **out, char *err,
                                          size_t cap)
{
    return diagnose_doc(t, o, dopt, v, 0, out, err, cap);
}

sublet_status sublet_diagnose_text_stream(sublet_trace_stream *t, const sublet_replay_options *o,
                                          const sublet_frag_diagnose_options *dopt,
                                          const sublet_view_options *v, char **out, char *err,
                                          size_t cap)
{
    return diagnose_doc(t, o, dopt, v, 1, out, err, cap);
}
