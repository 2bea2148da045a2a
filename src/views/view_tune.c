/* sublet views — the tuning documents, `sublet tune --json` and the text of
 * `sublet tune`: the settings that need the smallest device and the fewest
 * device calls (PyTorch's knobs only, and with sublet's own), each checked
 * on the user's device, the current settings' evaluation, the warm-up plan
 * and the Pareto trade-offs; both rendered from one tuning result. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
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

static void print_json(FILE *out, const char *const *paths, sublet_trace_stream *const *traces,
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
        sl_json_kv_u64(&w, "events", r->current.per_trace[i].events);
        const char *rec = sublet_trace_stream_settings(traces[i]);
        sl_json_key(&w, "recorded_settings");
        if (rec)
            sl_json_string(&w, rec);
        else
            sl_json_null(&w);
        sl_json_kv_u64(&w, "recorded_device_memory", sublet_trace_stream_device_memory(traces[i]));
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


/* ---- the text: `sublet tune` ------------------------------------------------------------- */

static const char *fmt_gib(uint64_t n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.2f GiB", (double)n / (double)((uint64_t)1 << 30));
    return buf;
}

/* Print s left-aligned in `width` columns (UTF-8 aware), then a space. */
static void cell(FILE *out, const char *s, int width)
{
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        w += (*p & 0xc0) != 0x80;
    fputs(s, out);
    for (; w < width; w++)
        fputc(' ', out);
    fputc(' ', out);
}

static void row(FILE *out, const char *label, const char *a, const char *b, const char *c)
{
    fputs("  ", out);
    cell(out, label, 28);
    cell(out, a, 20);
    cell(out, b, 20);
    fputs(c, out);
    fputc('\n', out);
}

static const char *show_conf(const char *c) { return c && *c ? c : "\"\" (PyTorch's defaults)"; }

static void row_size(FILE *out, const char *label, uint64_t a, uint64_t b, uint64_t c)
{
    char x[32], y[32], z[32];
    row(out, label, sl_fmt_mib(a, x, sizeof x), sl_fmt_mib(b, y, sizeof y), sl_fmt_mib(c, z, sizeof z));
}

static void row_u64(FILE *out, const char *label, uint64_t a, uint64_t b, uint64_t c)
{
    char x[32], y[32], z[32];
    snprintf(x, sizeof x, "%" PRIu64, a);
    snprintf(y, sizeof y, "%" PRIu64, b);
    snprintf(z, sizeof z, "%" PRIu64, c);
    row(out, label, x, y, z);
}

static void vs_current(FILE *out, const sublet_tune_eval *a, const sublet_tune_eval *cur)
{
    char b1[32], b2[32];
    int64_t dm = (int64_t)a->min_capacity_bytes - (int64_t)cur->min_capacity_bytes;
    double dc = a->cost_us - cur->cost_us;
    fprintf(out, "  vs current: min capacity %s%s (%+.2f %%), cost %s%s",
            dm < 0 ? "-" : "+", sl_fmt_mib((uint64_t)(dm < 0 ? -dm : dm), b1, sizeof b1),
            cur->min_capacity_bytes ? 100.0 * (double)dm / (double)cur->min_capacity_bytes : 0.0,
            dc < 0 ? "-" : "+", sl_fmt_us(dc < 0 ? -dc : dc, b2, sizeof b2));
    if (cur->cost_us > 0 && a->cost_us > 1.5 * cur->cost_us)
        fprintf(out, " (%.1fx: a trade-off, memory for device calls)", a->cost_us / cur->cost_us);
    fprintf(out, "\n");
}

/* A min capacity whose probes were not monotone (docs/replay.md): said. */
static void print_monotone(FILE *out, const sublet_tune_eval *e, size_t n)
{
    char b1[32], b2[32], which[48] = "";
    for (size_t i = 0; i < e->ntraces; i++) {
        const sublet_tune_trace_eval *t = &e->per_trace[i];
        if (t->monotone || !t->min_capacity_bytes)
            continue;
        if (n > 1)
            snprintf(which, sizeof which, " of trace [%zu]", i);
        fprintf(out, "  min capacity%s not monotone: %s ran, but sizes between it and %s failed "
                "(`sublet mincap` lists them)\n",
                which, sl_fmt_mib(t->smallest_ok_bytes, b1, sizeof b1),
                sl_fmt_mib(t->min_capacity_bytes, b2, sizeof b2));
    }
}

/* The answer checked on the user's device (its evaluation replayed the
 * whole trace there), and a min capacity that is not monotone. */
static void print_check(FILE *out, const sublet_tune_eval *e, const sublet_tune_result *r, size_t n)
{
    char b1[32], b2[32];
    const char *src = r->device_source == SUBLET_TUNE_DEVICE_GIVEN ? "--device-memory"
                      : r->device_source == SUBLET_TUNE_DEVICE_RECORDED
                          ? "recorded in the trace"
                          : "the default: none given or recorded";
    fprintf(out, "  on your device (%s, %s): ", fmt_gib(r->device_memory, b1, sizeof b1), src);
    if (e->fits) {
        fprintf(out, "checked, the whole run replayed without an OOM (peak reserved %s)\n",
                sl_fmt_mib(e->peak_reserved_bytes, b2, sizeof b2));
    } else {
        fprintf(out, "OUT OF MEMORY");
        for (size_t i = 0; i < e->ntraces; i++) {
            const sublet_tune_trace_eval *t = &e->per_trace[i];
            if (t->fits)
                continue;
            if (t->first_oom_event != SUBLET_REPLAY_NONE)
                fprintf(out, " at event %" PRIu64, t->first_oom_event);
            else
                fprintf(out, " rebuilding the prelude");
            if (n > 1)
                fprintf(out, " of trace [%zu]", i);
            break;
        }
        fprintf(out, ": NOT recommended for this device (no setting searched runs there; this one "
                "needs %s)\n", sl_fmt_mib(e->min_capacity_bytes, b2, sizeof b2));
    }
    print_monotone(out, e, n);
}

static void print_cause(FILE *out, const char *cause, size_t trace, size_t n, const sublet_tune_eval *a,
                        const sublet_tune_eval *cur)
{
    if (cause[0] && n > 1)
        fprintf(out, "  fixes, in trace [%zu]: %s\n", trace, cause);
    else if (cause[0])
        fprintf(out, "  fixes: %s\n", cause);
    else if (strcmp(a->conf, cur->conf) == 0)
        fprintf(out, "  fixes: nothing: the current settings are already the answer\n");
    else
        fprintf(out, "  fixes: no difference in segments or at the minimum device was found\n");
}

static void print_pareto(FILE *out, const char *title, const sublet_tune_eval *p, size_t n,
                         const sublet_tune_eval *answer)
{
    char b1[32], b2[32], b3[32], code[96];
    fprintf(out, "  %s\n", title);
    fprintf(out, "    ");
    cell(out, "min capacity", 12);
    cell(out, "overhead", 9);
    cell(out, "cost", 10);
    cell(out, "calls", 6);
    fprintf(out, "settings\n");
    for (size_t i = 0; i < n; i++) {
        int is = strcmp(p[i].conf, answer->conf) == 0;
        char ov[32], calls[32];
        snprintf(ov, sizeof ov, "%+.2f %%", p[i].overhead * 100);
        snprintf(calls, sizeof calls, "%" PRIu64, p[i].device_calls);
        fprintf(out, "  %s ", is ? "*" : " ");
        cell(out, sl_fmt_mib(p[i].min_capacity_bytes, b1, sizeof b1), 12);
        cell(out, ov, 9);
        cell(out, sl_fmt_us(p[i].cost_us, b2, sizeof b2), 10);
        cell(out, calls, 6);
        fprintf(out, "%s", p[i].conf[0] ? p[i].conf : "\"\"");
        if (sl_view_fraction_code(&p[i], code, sizeof code))
            fprintf(out, " + %s", code);
        if (!is && answer->min_capacity_bytes) {
            if (p[i].min_capacity_bytes < answer->min_capacity_bytes && answer->cost_us > 0)
                fprintf(out, "   saves %s for %.1fx the cost",
                        sl_fmt_mib(answer->min_capacity_bytes - p[i].min_capacity_bytes, b3,
                                sizeof b3),
                        p[i].cost_us / answer->cost_us);
            else if (p[i].min_capacity_bytes > answer->min_capacity_bytes &&
                     p[i].cost_us < answer->cost_us)
                fprintf(out, "   %s cheaper, needs %s more",
                        sl_fmt_us(answer->cost_us - p[i].cost_us, b2, sizeof b2),
                        sl_fmt_mib(p[i].min_capacity_bytes - answer->min_capacity_bytes, b3,
                                sizeof b3));
            else if (p[i].min_capacity_bytes > answer->min_capacity_bytes && answer->cost_us > 0)
                /* a point past the answer whose walk bisected it above the
                 * answer's plain minimum (a minimum that is not monotone) */
                fprintf(out, "   needs %s more for %.1fx the cost",
                        sl_fmt_mib(p[i].min_capacity_bytes - answer->min_capacity_bytes, b3,
                                   sizeof b3),
                        p[i].cost_us / answer->cost_us);
        }
        fprintf(out, "\n");
    }
}

static void print_plan(FILE *out, const sublet_tune_plan *p, const sublet_tune_result *r,
                       const sublet_tune_options *o)
{
    if (!o->warmup)
        return;
    char b1[32], b2[32], b3[32];
    const char *whose = strcmp(p->conf, r->sublet.conf) == 0 ? "" : " (for the PyTorch answer)";
    if (!sl_view_plan_helps(p)) {
        fprintf(out, "\nwarm-up plan%s: none helps here%s%s\n", whose, p->note[0] ? ": " : "",
                p->note);
        return;
    }
    fprintf(out, "\nwarm-up plan%s: reserve it at start-up, and the run makes no device allocation\n"
            "  SUBLET_ALLOC_CONF=%s\n",
            whose, p->env);
    uint64_t segs = 0;
    for (size_t i = 0; i < p->nentries; i++)
        segs += p->entries[i].count;
    sublet_settings ps;
    sublet_settings_default(&ps);
    (void)sublet_settings_parse(&ps, p->conf, NULL, 0);
    fprintf(out, "  reserved at start: %s %s %" PRIu64 " %s (the run's peak reserved: %s without the "
            "plan, %s with it)\n",
            sl_fmt_mib(p->plan_bytes, b1, sizeof b1), ps.expandable_segments ? "of pages in" : "in",
            segs,
            ps.expandable_segments ? (segs == 1 ? "pool" : "pools")
                                  : (segs == 1 ? "segment" : "segments"),
            sl_fmt_mib(p->peak_reserved_bytes, b2, sizeof b2),
            sl_fmt_mib(p->peak_reserved_with_plan, b3, sizeof b3));
    fprintf(out, "  device allocations during the run: %" PRIu64 " -> %" PRIu64 " (checked by replay)\n",
            p->device_allocs_before, p->device_allocs_after);
    fprintf(out, "  device calls during the run: %" PRIu64 " -> %" PRIu64 ", cost %s -> %s; the plan's "
            "own: %" PRIu64 " call%s, %s, once at start-up\n",
            p->device_calls_before, p->device_calls_after, sl_fmt_us(p->cost_before_us, b1, sizeof b1),
            sl_fmt_us(p->cost_after_us, b2, sizeof b2), p->plan_calls, p->plan_calls == 1 ? "" : "s",
            sl_fmt_us(p->plan_cost_us, b3, sizeof b3));
    fprintf(out, "  fits your device (%s): yes\n", fmt_gib(r->device_memory, b1, sizeof b1));
    if (p->note[0])
        fprintf(out, "  note: %s\n", p->note);
}

/* `sublet tune`'s text: the three settings side by side, per trace, both
 * answers with what they fix, the warm-up plan and the Pareto trade-offs. */
static void tune_text(FILE *out, const char *const *paths, size_t n, const sublet_tune_result *r,
                      const sublet_tune_options *o)
{
    const sublet_tune_eval *c = &r->current, *p = &r->pytorch, *s = &r->sublet;
    char b1[32], b2[32], b3[32], x[32], y[32], z[32];
    fprintf(out, "sublet tune: %zu trace%s, device %s%s; %zu settings (%zu distinct), %" PRIu64
            " replays, %.2f s\n",
            n, n == 1 ? "" : "s", fmt_gib(r->device_memory, b1, sizeof b1),
            o->device_memory ? "" : " (default)", r->space, r->distinct, r->replays, r->seconds);
    fprintf(out, "cost model (µs): cudaMalloc %g + %g/GiB, cudaFree %g, retry %g, VA reserve %g, "
            "release %g, map %g/page, unmap %g/page\n\n",
            o->cost.malloc_us, o->cost.malloc_us_per_gib, o->cost.free_us, o->cost.retry_us,
            o->cost.reserve_us, o->cost.release_us, o->cost.map_us, o->cost.unmap_us);
    if (o->pytorch_version)
        fprintf(out, "every replay under PyTorch %s's rules (--pytorch-version; docs/versions.md)\n\n",
                o->pytorch_version);
    if (r->private_pool_traces)
        fprintf(out, "private pools (CUDA graphs, MemPool) in %zu of the traces: kept as recorded, every "
                "allocation replayed in its own pool under every setting; policy:stitch (no "
                "private pools) left out\n\n",
                r->private_pool_traces);
    row(out, "", "current", "PyTorch knobs", "sublet");
    row(out, "settings recorded", r->current_recorded ? "yes" : "no", "", "");
    row_size(out, n > 1 ? "min capacity (max of traces)" : "min capacity", c->min_capacity_bytes,
             p->min_capacity_bytes, s->min_capacity_bytes);
    char lbl[64];
    snprintf(lbl, sizeof lbl, "  over peak live %s", sl_fmt_mib(c->peak_requested_bytes, b1, sizeof b1));
    snprintf(x, sizeof x, "%+.2f %%", c->overhead * 100);
    snprintf(y, sizeof y, "%+.2f %%", p->overhead * 100);
    snprintf(z, sizeof z, "%+.2f %%", s->overhead * 100);
    row(out, lbl, x, y, z);
    snprintf(lbl, sizeof lbl, "peak reserved on %s", fmt_gib(r->device_memory, b1, sizeof b1));
    row_size(out, lbl, c->peak_reserved_bytes, p->peak_reserved_bytes, s->peak_reserved_bytes);
    sublet_tune_calls cc, pc, sc;
    sl_tune_calls_sum(c, &cc);
    sl_tune_calls_sum(p, &pc);
    sl_tune_calls_sum(s, &sc);
    row_u64(out, "device calls", c->device_calls, p->device_calls, s->device_calls);
#define ROW2(label, f1, f2)                                                                 \
    do {                                                                                    \
        snprintf(x, sizeof x, "%" PRIu64 " / %" PRIu64, cc.f1, cc.f2);                     \
        snprintf(y, sizeof y, "%" PRIu64 " / %" PRIu64, pc.f1, pc.f2);                     \
        snprintf(z, sizeof z, "%" PRIu64 " / %" PRIu64, sc.f1, sc.f2);                     \
        row(out, label, x, y, z);                                                                \
    } while (0)
    ROW2("  cudaMalloc / cudaFree", segment_allocs, segment_frees);
    ROW2("  VA reserve / release", va_reserves, va_releases);
    ROW2("  map / unmap calls", va_maps, va_unmaps);
    ROW2("  pages mapped / unmapped", map_pages, unmap_pages);
#undef ROW2
    row_u64(out, "allocation retries", c->retries, p->retries, s->retries);
    row(out, "cost (model)", sl_fmt_us(c->cost_us, x, sizeof x), sl_fmt_us(p->cost_us, y, sizeof y),
        sl_fmt_us(s->cost_us, z, sizeof z));
    row(out, "runs on your device", c->fits ? "yes" : "NO", p->fits ? "yes" : "NO",
        s->fits ? "yes" : "NO");

    if (n > 1) {
        fprintf(out, "\nper trace (min capacity / cost):\n");
        for (size_t i = 0; i < n; i++) {
            const sublet_tune_trace_eval *ct = &c->per_trace[i], *pt = &p->per_trace[i],
                                         *st = &s->per_trace[i];
            fprintf(out, "  [%zu] %s\n", i, paths[i]);
            fprintf(out, "      peak live %s; current %s (%+.2f %%) %s; PyTorch knobs %s (%+.2f %%) "
                    "%s; sublet %s (%+.2f %%) ",
                    sl_fmt_mib(ct->peak_requested_bytes, b1, sizeof b1),
                    sl_fmt_mib(ct->min_capacity_bytes, b2, sizeof b2), ct->overhead * 100,
                    sl_fmt_us(ct->cost_us, b3, sizeof b3),
                    sl_fmt_mib(pt->min_capacity_bytes, x, sizeof x), pt->overhead * 100,
                    sl_fmt_us(pt->cost_us, y, sizeof y),
                    sl_fmt_mib(st->min_capacity_bytes, z, sizeof z), st->overhead * 100);
            fprintf(out, "%s\n", sl_fmt_us(st->cost_us, b3, sizeof b3));
        }
    }

    fprintf(out, "\ncurrent:\n  %s\n", show_conf(c->conf));
    print_monotone(out, c, n);
    fprintf(out, "\nPYTORCH_CUDA_ALLOC_CONF=%s\n", p->conf);
    char code[96], note[512];
    if (sl_view_fraction_code(p, code, sizeof code))
        fprintf(out, "  and before the first CUDA allocation: %s\n", code);
    fprintf(out, "  %s\n", sl_view_release_note(p, o->pytorch_version, note, sizeof note));
    if (!p->conf[0])
        fprintf(out, "  (PyTorch's defaults are already the best of the PyTorch knobs here)\n");
    vs_current(out, p, c);
    print_check(out, p, r, n);
    print_cause(out, r->pytorch_cause, r->pytorch_cause_trace, n, p, c);
    fprintf(out, "\nSUBLET_ALLOC_CONF=%s\n", s->conf);
    vs_current(out, s, c);
    print_check(out, s, r, n);
    print_cause(out, r->sublet_cause, r->sublet_cause_trace, n, s, c);

    print_plan(out, &r->plan, r, o);

    fprintf(out, "\ntrade-offs: min capacity against cost, the Pareto set (* = the answer)\n");
    print_pareto(out, "PyTorch knobs:", r->pareto_pytorch, r->npareto_pytorch, p);
    print_pareto(out, "all (SUBLET_ALLOC_CONF):", r->pareto_sublet, r->npareto_sublet, s);
}

/* After a cancelled search (sublet_tune_options.cancel): the best answers
 * it had found. */
static void tune_best_so_far(FILE *out, const sublet_tune_result *r)
{
    fprintf(out, "interrupted: the best found so far (not checked, no plan)\n");
    for (int w = 0; w < 2; w++) {
        const sublet_tune_eval *e = w == 0 ? &r->pytorch : &r->sublet;
        if (!(r->partial & (1u << w)))
            continue;
        char m[32];
        fprintf(out, "  %s=%s  min capacity %s, cost %.1f ms\n",
                w == 0 ? "PYTORCH_CUDA_ALLOC_CONF" : "SUBLET_ALLOC_CONF", e->conf,
                sl_fmt_mib(e->min_capacity_bytes, m, sizeof m), e->cost_us / 1000.0);
    }
    if (!r->partial)
        fprintf(out, "  none yet (every setting's cost replay comes first)\n");
}

/* The tuning's document, JSON or text; the text of a cancelled search is
 * the best found so far (with SUBLET_ERR_CANCELLED). */
static sublet_status tune_doc(sublet_trace_stream *const *traces, const char *const *names,
                              size_t n, const sublet_tune_options *o, int text, char **out,
                              char *err, size_t cap)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (err && cap)
        err[0] = '\0';
    if (!traces || !n || !o)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_tune_result r;
    sublet_status st = sublet_tune_streams(traces, n, o, &r);
    if (st == SUBLET_ERR_CANCELLED && text) {
        sl_doc doc;
        sublet_status ds = sl_doc_open(&doc);
        if (ds == SUBLET_OK) {
            tune_best_so_far(doc.f, &r);
            ds = sl_doc_close(&doc, out);
        }
        if (ds != SUBLET_OK)
            st = ds;
    } else if (st != SUBLET_OK) {
        sl_msg(err, cap, "%s", r.error[0] ? r.error : sublet_status_text(st));
    } else {
        sl_doc doc;
        st = sl_doc_open(&doc);
        if (st == SUBLET_OK) {
            if (text)
                tune_text(doc.f, names, n, &r, o);
            else
                print_json(doc.f, names, traces, n, &r, o);
            st = sl_doc_close(&doc, out);
        }
    }
    sublet_tune_result_free(&r);
    return st;
}

/* The whole-trace documents: the streamed ones over streams of the arrays. */
static sublet_status tune_doc_traces(const sublet_trace *const *traces, const char *const *names,
                                     size_t n, const sublet_tune_options *o, int text, char **out,
                                     char *err, size_t cap)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!traces || !n || n > 64 || !o)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *s[64] = {0};
    sublet_status st = SUBLET_OK;
    for (size_t i = 0; i < n && st == SUBLET_OK; i++)
        st = traces[i] ? sublet_trace_stream_from_trace(traces[i], &s[i])
                       : SUBLET_ERR_INVALID_ARGUMENT;
    if (st == SUBLET_OK)
        st = tune_doc(s, names, n, o, text, out, err, cap);
    for (size_t i = 0; i < n; i++)
        sublet_trace_stream_close(s[i]);
    return st;
}

sublet_status sublet_tune_json(const sublet_trace *const *traces, const char *const *names,
                               size_t n, const sublet_tune_options *o, char **out, char *err,
                               size_t cap)
{
    return tune_doc_traces(traces, names, n, o, 0, out, err, cap);
}

sublet_status sublet_tune_text(const sublet_trace *const *traces, const char *const *names,
                               size_t n, const sublet_tune_options *o, char **out, char *err,
                               size_t cap)
{
    return tune_doc_traces(traces, names, n, o, 1, out, err, cap);
}

sublet_status sublet_tune_json_streams(sublet_trace_stream *const *traces,
                                       const char *const *names, size_t n,
                                       const sublet_tune_options *o, char **out, char *err,
                                       size_t cap)
{
    return tune_doc(traces, names, n, o, 0, out, err, cap);
}

sublet_status sublet_tune_text_streams(sublet_trace_stream *const *traces,
                                       const char *const *names, size_t n,
                                       const sublet_tune_options *o, char **out, char *err,
                                       size_t cap)
{
    return tune_doc(traces, names, n, o, 1, out, err, cap);
}
