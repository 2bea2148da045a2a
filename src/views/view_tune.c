/* sublet views — the tuning document, `sublet tune --json`: the settings
 * that need the smallest device and the fewest device calls (PyTorch's
 * knobs only, and with sublet's own), each checked on the user's device,
 * the current settings' evaluation, the warm-up plan and the Pareto
 * trade-offs; and the number formats the tuning's texts share. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "views/views_internal.h"

const char *sl_view_device_source(const sublet_tune_result *r)
{
    return r->device_source == SUBLET_TUNE_DEVICE_GIVEN      ? "given"
           : r->device_source == SUBLET_TUNE_DEVICE_RECORDED ? "recorded"
                                                             : "default";
}

int sl_view_plan_helps(const sublet_tune_plan *p)
{
    return p->status == SUBLET_OK && p->nentries && p->fits &&
           p->device_allocs_after < p->device_allocs_before;
}

const char *sl_view_fraction_code(const sublet_tune_eval *e, char *buf, size_t cap)
{
    if (!(e->fraction_call > 0))
        return NULL;
    snprintf(buf, cap, "torch.cuda.set_per_process_memory_fraction(%g)", e->fraction_call);
    return buf;
}

const char *sl_view_release_note(const sublet_tune_eval *e, const char *version, char *buf,
                                 size_t cap)
{
    unsigned v = e->oldest_release;
    if (version && *version)
        snprintf(buf, cap, "for PyTorch %s (--pytorch-version)%s", version,
                 e->fraction_call > 0 ? ", which has no per_process_memory_fraction option: "
                                        "the fraction the collector needs is set by the call"
                                      : "");
    else if (v == SUBLET_PYTORCH_OLDEST)
        snprintf(buf, cap, "for PyTorch %u.%u and later, under the newest release's rules: "
                 "for yours, tune with --pytorch-version X",
                 v / 100, v % 100);
    else if (v)
        snprintf(buf, cap, "for PyTorch %u.%u and later only (older releases refuse it at the "
                 "first CUDA allocation), under the newest release's rules: for yours, tune "
                 "with --pytorch-version X",
                 v / 100, v % 100);
    else
        snprintf(buf, cap, "no PyTorch release sublet follows takes it");
    return buf;
}

void sl_tune_calls_sum(const sublet_tune_eval *e, sublet_tune_calls *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; e->per_trace && i < e->ntraces; i++) {
        const sublet_tune_calls *c = &e->per_trace[i].calls;
        out->segment_allocs += c->segment_allocs;
        out->segment_frees += c->segment_frees;
        out->malloc_bytes += c->malloc_bytes;
        out->va_reserves += c->va_reserves;
        out->va_releases += c->va_releases;
        out->va_maps += c->va_maps;
        out->va_unmaps += c->va_unmaps;
        out->map_pages += c->map_pages;
        out->unmap_pages += c->unmap_pages;
        out->retries += c->retries;
    }
}

static void json_calls(sl_json_writer *w, const sublet_tune_calls *c)
{
    sl_json_object_begin(w);
    sl_json_kv_u64(w, "cudaMalloc", c->segment_allocs);
    sl_json_kv_u64(w, "cudaFree", c->segment_frees);
    sl_json_kv_u64(w, "cudaMalloc_bytes", c->malloc_bytes);
    sl_json_kv_u64(w, "va_reserve", c->va_reserves);
    sl_json_kv_u64(w, "va_release", c->va_releases);
    sl_json_kv_u64(w, "map_calls", c->va_maps);
    sl_json_kv_u64(w, "unmap_calls", c->va_unmaps);
    sl_json_kv_u64(w, "map_pages", c->map_pages);
    sl_json_kv_u64(w, "unmap_pages", c->unmap_pages);
    sl_json_kv_u64(w, "retries", c->retries);
    sl_json_object_end(w);
}

static void json_eval(sl_json_writer *w, const sublet_tune_eval *e)
{
    sl_json_object_begin(w);
    sl_json_kv_string(w, "conf", e->conf);
    sl_json_key(w, "memory_fraction_call"); /* torch.cuda.set_per_process_memory_fraction */
    if (e->fraction_call > 0)
        sl_json_double(w, e->fraction_call);
    else
        sl_json_null(w);
    sl_json_kv_bool(w, "pytorch_knobs_only", e->pytorch);
    sl_json_kv_u64(w, "min_capacity_bytes", e->min_capacity_bytes);
    sl_json_kv_u64(w, "peak_requested_bytes", e->peak_requested_bytes);
    sl_json_kv_double(w, "overhead", e->overhead);
    sl_json_kv_u64(w, "peak_reserved_bytes", e->peak_reserved_bytes);
    sl_json_kv_bool(w, "fits", e->fits);
    if (e->per_trace)
        sl_json_kv_bool(w, "monotone", e->monotone);
    sl_json_kv_double(w, "cost_us", e->cost_us);
    sl_json_kv_u64(w, "device_calls", e->device_calls);
    sl_json_kv_u64(w, "retries", e->retries);
    if (e->per_trace) {
        sl_json_key(w, "per_trace");
        sl_json_array_begin(w);
        for (size_t i = 0; i < e->ntraces; i++) {
            const sublet_tune_trace_eval *t = &e->per_trace[i];
            sl_json_object_begin(w);
            sl_json_kv_u64(w, "min_capacity_bytes", t->min_capacity_bytes);
            sl_json_kv_u64(w, "peak_requested_bytes", t->peak_requested_bytes);
            sl_json_kv_double(w, "overhead", t->overhead);
            sl_json_kv_u64(w, "peak_reserved_bytes", t->peak_reserved_bytes);
            sl_json_kv_bool(w, "fits", t->fits);
            sl_json_kv_u64(w, "ooms", t->ooms);
            sl_json_key(w, "first_oom_event");
            if (t->first_oom_event == SUBLET_REPLAY_NONE)
                sl_json_null(w);
            else
                sl_json_u64(w, t->first_oom_event);
            sl_json_kv_bool(w, "monotone", t->monotone);
            sl_json_kv_u64(w, "smallest_ok_bytes", t->smallest_ok_bytes);
            sl_json_kv_double(w, "cost_us", t->cost_us);
            sl_json_key(w, "calls");
            json_calls(w, &t->calls);
            sl_json_object_end(w);
        }
        sl_json_array_end(w);
    }
    sl_json_object_end(w);
}

static void json_answer(sl_json_writer *w, const char *key, const char *env,
                        const sublet_tune_eval *e, const char *cause, size_t cause_trace,
                        const sublet_tune_result *r, const char *version)
{
    sl_json_key(w, key);
    sl_json_object_begin(w);
    char line[SUBLET_TUNE_CONF_MAX + 32];
    snprintf(line, sizeof line, "%s=%s", env, e->conf);
    sl_json_kv_string(w, "env", line);
    /* the release the answer is for (null: the newest), the oldest that takes
     * it, and the call that sets the fraction where the release has no option */
    sl_json_key(w, "pytorch_version");
    if (version && *version)
        sl_json_string(w, version);
    else
        sl_json_null(w);
    sl_json_key(w, "oldest_release");
    if (e->oldest_release) {
        snprintf(line, sizeof line, "%u.%u", (unsigned)(e->oldest_release / 100),
                 (unsigned)(e->oldest_release % 100));
        sl_json_string(w, line);
    } else {
        sl_json_null(w);
    }
    sl_json_key(w, "memory_fraction_call");
    if (e->fraction_call > 0)
        sl_json_double(w, e->fraction_call);
    else
        sl_json_null(w);
    sl_json_key(w, "code");
    if (sl_view_fraction_code(e, line, sizeof line))
        sl_json_string(w, line);
    else
        sl_json_null(w);
    char note[512];
    /* PyTorch reads the one answer, sublet the other under its own rules */
    sl_json_kv_string(w, "release_note", strcmp(key, "pytorch") == 0
                                             ? sl_view_release_note(e, version, note, sizeof note)
                                             : "");
    sl_json_key(w, "evaluation");
    json_eval(w, e);
    sl_json_kv_string(w, "fixes", cause);
    sl_json_kv_u64(w, "fixes_trace", cause_trace);
    /* the answer replayed on the user's device: the check */
    sl_json_key(w, "device_check");
    sl_json_object_begin(w);
    sl_json_kv_u64(w, "device_memory_bytes", r->device_memory);
    sl_json_kv_string(w, "source", sl_view_device_source(r));
    sl_json_kv_bool(w, "runs", e->fits);
    uint64_t ooms = 0, first = SUBLET_REPLAY_NONE;
    size_t trace = 0;
    for (size_t i = 0; i < e->ntraces; i++) {
        ooms += e->per_trace[i].ooms;
        if (!e->per_trace[i].fits && first == SUBLET_REPLAY_NONE) {
            first = e->per_trace[i].first_oom_event;
            trace = i;
        }
    }
    sl_json_kv_u64(w, "ooms", ooms);
    sl_json_key(w, "first_oom_event");
    if (first == SUBLET_REPLAY_NONE)
        sl_json_null(w);
    else
        sl_json_u64(w, first);
    sl_json_kv_u64(w, "first_oom_trace", trace);
    sl_json_kv_bool(w, "recommended", e->fits);
    sl_json_object_end(w);
    sl_json_object_end(w);
}

void sl_view_plan_json(sl_json_writer *w, const sublet_tune_plan *p)
{
    sl_json_object_begin(w);
    sl_json_kv_string(w, "status", sublet_status_name(p->status));
    sl_json_kv_bool(w, "helps", sl_view_plan_helps(p));
    sl_json_kv_string(w, "conf", p->conf);
    sl_json_kv_string(w, "option", p->option);
    char line[SUBLET_TUNE_PLAN_MAX + SUBLET_TUNE_CONF_MAX + 32];
    snprintf(line, sizeof line, "SUBLET_ALLOC_CONF=%s", p->env);
    sl_json_kv_string(w, "env", p->nentries ? line : "");
    sl_json_key(w, "entries");
    sl_json_array_begin(w);
    for (size_t i = 0; i < p->nentries; i++) {
        sl_json_object_begin(w);
        sl_json_kv_string(w, "pool", p->entries[i].pool == SUBLET_POOL_SMALL ? "small" : "large");
        sl_json_kv_u64(w, "size", p->entries[i].size);
        sl_json_kv_u64(w, "count", p->entries[i].count);
        sl_json_object_end(w);
    }
    sl_json_array_end(w);
    sl_json_kv_u64(w, "plan_bytes", p->plan_bytes);
    sl_json_kv_u64(w, "plan_calls", p->plan_calls);
    sl_json_kv_double(w, "plan_cost_us", p->plan_cost_us);
    sl_json_kv_u64(w, "peak_reserved_bytes", p->peak_reserved_bytes);
    sl_json_kv_u64(w, "peak_reserved_with_plan_bytes", p->peak_reserved_with_plan);
    sl_json_kv_u64(w, "device_allocs_before", p->device_allocs_before);
    sl_json_kv_u64(w, "device_allocs_after", p->device_allocs_after);
    sl_json_kv_u64(w, "device_calls_before", p->device_calls_before);
    sl_json_kv_u64(w, "device_calls_after", p->device_calls_after);
    sl_json_kv_double(w, "cost_before_us", p->cost_before_us);
    sl_json_kv_double(w, "cost_after_us", p->cost_after_us);
    sl_json_kv_bool(w, "fits", p->fits);
    sl_json_kv_u64(w, "rounds", p->rounds);
    sl_json_kv_u64(w, "frees_after", p->frees_after);
    sl_json_kv_u64(w, "other_stream_segments", p->other_stream_segments);
    sl_json_kv_u64(w, "prelude_segments", p->prelude_segments);
    sl_json_kv_u64(w, "prelude_bytes", p->prelude_bytes);
    sl_json_kv_string(w, "note", p->note);
    sl_json_object_end(w);
}

static void print_json(FILE *out, const char *const *paths, const sublet_trace *const *traces,
                       size_t n, const sublet_tune_result *r, const sublet_tune_options *o)
{
    sl_json_writer w;
    sl_json_init(&w, out);
    sl_json_object_begin(&w);
    sl_json_key(&w, "traces");
    sl_json_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        sl_json_object_begin(&w);
        sl_json_kv_string(&w, "path", paths && paths[i] ? paths[i] : "");
        sl_json_kv_u64(&w, "events", sublet_trace_count(traces[i]));
        const char *rec = sublet_trace_settings(traces[i]);
        sl_json_key(&w, "recorded_settings");
        if (rec)
            sl_json_string(&w, rec);
        else
            sl_json_null(&w);
        sl_json_kv_u64(&w, "recorded_device_memory", sublet_trace_device_memory(traces[i]));
        sl_json_object_end(&w);
    }
    sl_json_array_end(&w);
    if (r->private_pool_traces) /* pools kept fixed, policy:stitch left out (docs/tune.md) */
        sl_json_kv_u64(&w, "private_pool_traces", r->private_pool_traces);
    sl_json_kv_u64(&w, "device_memory", r->device_memory);
    sl_json_kv_string(&w, "device_source", sl_view_device_source(r));
    sl_json_key(&w, "cost_model_us");
    sl_json_object_begin(&w);
    sl_json_kv_double(&w, "malloc_us", o->cost.malloc_us);
    sl_json_kv_double(&w, "malloc_us_per_gib", o->cost.malloc_us_per_gib);
    sl_json_kv_double(&w, "free_us", o->cost.free_us);
    sl_json_kv_double(&w, "retry_us", o->cost.retry_us);
    sl_json_kv_double(&w, "reserve_us", o->cost.reserve_us);
    sl_json_kv_double(&w, "release_us", o->cost.release_us);
    sl_json_kv_double(&w, "map_us", o->cost.map_us);
    sl_json_kv_double(&w, "unmap_us", o->cost.unmap_us);
    sl_json_object_end(&w);
    sl_json_key(&w, "search");
    sl_json_object_begin(&w);
    sl_json_kv_u64(&w, "settings", r->space);
    sl_json_kv_u64(&w, "distinct", r->distinct);
    sl_json_kv_u64(&w, "bound_pruned", r->bound_pruned);
    sl_json_kv_u64(&w, "replays", r->replays);
    sl_json_kv_double(&w, "seconds", r->seconds);
    sl_json_kv_double(&w, "band", o->band);
    sl_json_kv_string(&w, "prelude", o->prelude == SUBLET_PRELUDE_ADOPT      ? "adopt"
                                  : o->prelude == SUBLET_PRELUDE_ALLOCATE ? "allocate"
                                                                          : "auto");
    sl_json_object_end(&w);
    sl_json_key(&w, "current");
    sl_json_object_begin(&w);
    sl_json_kv_bool(&w, "recorded", r->current_recorded);
    sl_json_key(&w, "evaluation");
    json_eval(&w, &r->current);
    sl_json_object_end(&w);
    json_answer(&w, "pytorch", "PYTORCH_CUDA_ALLOC_CONF", &r->pytorch, r->pytorch_cause,
                r->pytorch_cause_trace, r, o->pytorch_version);
    json_answer(&w, "sublet", "SUBLET_ALLOC_CONF", &r->sublet, r->sublet_cause,
                r->sublet_cause_trace, r, o->pytorch_version);
    if (o->warmup) {
        sl_json_key(&w, "warmup");
        sl_view_plan_json(&w, &r->plan);
    }
    sl_json_key(&w, "pareto");
    sl_json_object_begin(&w);
    sl_json_key(&w, "pytorch");
    sl_json_array_begin(&w);
    for (size_t i = 0; i < r->npareto_pytorch; i++)
        json_eval(&w, &r->pareto_pytorch[i]);
    sl_json_array_end(&w);
    sl_json_key(&w, "sublet");
    sl_json_array_begin(&w);
    for (size_t i = 0; i < r->npareto_sublet; i++)
        json_eval(&w, &r->pareto_sublet[i]);
    sl_json_array_end(&w);
    sl_json_object_end(&w);
    sl_json_object_end(&w);
    sl_json_finish(&w);
}


sublet_status sublet_tune_json(const sublet_trace *const *traces, const char *const *names,
                               size_t n, const sublet_tune_options *o, char **out, char *err,
                               size_t cap)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (err && cap)
        err[0] = '\0';
    if (!traces || !n || !o)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_tune_result r;
    sublet_status st = sublet_tune(traces, n, o, &r);
    if (st != SUBLET_OK) {
        snprintf(err, cap, "%s", r.error[0] ? r.error : sublet_status_text(st));
    } else {
        sl_doc doc;
        st = sl_doc_open(&doc);
        if (st == SUBLET_OK) {
            print_json(doc.f, names, traces, n, &r, o);
            st = sl_doc_close(&doc, out);
        }
    }
    sublet_tune_result_free(&r);
    return st;
}
