/* sublet — tuning the allocator settings from recorded traces (sublet/tune.h).
 *
 * Outline of sublet_tune():
 *   1. enumerate the search space and merge the settings that provably replay
 *      identically (same rounding of every request, max_split_size above
 *      every block, max_non_split_rounding without oversize requests);
 *   2. replay every distinct setting once on the user's device: its cost
 *      (minus the calls that rebuild the prelude) and whether it fits;
 *   3. per family (PyTorch knobs only; everything), walk the settings
 *      cheapest first keeping the Pareto set of (M, cost): each setting is
 *      probed once at the best M so far minus one step and bisected only
 *      when it passes; a lower bound from rounding skips many without a
 *      replay;
 *   4. the answer is the cheapest setting within the band of the best M;
 *   5. the answers and the current settings are evaluated exactly and
 *      plainly (sublet_tune_evaluate: sublet_replay_min_capacity per trace),
 *      and the default-vs-answer difference is explained from two recorded
 *      replays.
 * Probes run in batches on `threads` threads; a batch's results are folded
 * in in a fixed order, so the outcome does not depend on the scheduling. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sublet/config.h"
#include "sublet/history.h"
#include "sublet/tune.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define DEFAULT_RESOLUTION (2 * MIB)
#define DEFAULT_BAND 0.005
#define NONE UINT64_MAX
#define MAX_THREADS 64

/* ---- the cost model ------------------------------------------------------------ */

void sublet_tune_cost_model_default(sublet_tune_cost_model *m)
{
    if (!m)
        return;
    m->malloc_us = 35.0;
    m->malloc_us_per_gib = 64.0;
    m->free_us = 35.0;
    m->retry_us = 1000.0;
    m->reserve_us = 10.0;
    m->release_us = 10.0;
    m->map_us = 35.0;
    m->unmap_us = 35.0;
}

static const struct {
    const char *name;
    size_t off;
} cost_keys[] = {
    {"malloc_us", offsetof(sublet_tune_cost_model, malloc_us)},
    {"malloc_us_per_gib", offsetof(sublet_tune_cost_model, malloc_us_per_gib)},
    {"free_us", offsetof(sublet_tune_cost_model, free_us)},
    {"retry_us", offsetof(sublet_tune_cost_model, retry_us)},
    {"reserve_us", offsetof(sublet_tune_cost_model, reserve_us)},
    {"release_us", offsetof(sublet_tune_cost_model, release_us)},
    {"map_us", offsetof(sublet_tune_cost_model, map_us)},
    {"unmap_us", offsetof(sublet_tune_cost_model, unmap_us)},
};

sublet_status sublet_tune_cost_model_parse(sublet_tune_cost_model *m, const char *text, char *err,
                                           size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!m || !text)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_tune_cost_model work = *m;
    const char *p = text;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',' || *p == ';'))
            p++;
        if (*p == '#') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (!*p)
            break;
        const char *k = p;
        while (*p && *p != '=' && *p != ',' && *p != '#' && !isspace((unsigned char)*p))
            p++;
        size_t klen = (size_t)(p - k);
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != '=') {
            if (err && err_cap)
                snprintf(err, err_cap, "cost model: expected key=value at '%.*s'", (int)klen, k);
            return SUBLET_ERR_PARSE;
        }
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t i;
        for (i = 0; i < sizeof cost_keys / sizeof cost_keys[0]; i++)
            if (strlen(cost_keys[i].name) == klen && memcmp(cost_keys[i].name, k, klen) == 0)
                break;
        if (i == sizeof cost_keys / sizeof cost_keys[0]) {
            if (err && err_cap)
                snprintf(err, err_cap,
                         "cost model: unknown key '%.*s' (keys: malloc_us, malloc_us_per_gib, "
                         "free_us, retry_us, reserve_us, release_us, map_us, unmap_us)",
                         (int)klen, k);
            return SUBLET_ERR_PARSE;
        }
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0) {
            if (err && err_cap)
                snprintf(err, err_cap, "cost model: '%.*s' needs a non-negative number",
                         (int)klen, k);
            return SUBLET_ERR_PARSE;
        }
        if (*end && !isspace((unsigned char)*end) && *end != ',' && *end != ';' && *end != '#') {
            if (err && err_cap)
                snprintf(err, err_cap, "cost model: '%.*s': trailing characters after the number",
                         (int)klen, k);
            return SUBLET_ERR_PARSE;
        }
        *(double *)((char *)&work + cost_keys[i].off) = v;
        p = end;
    }
    *m = work;
    return SUBLET_OK;
}

uint64_t sublet_tune_calls_total(const sublet_tune_calls *c)
{
    return c->segment_allocs + c->segment_frees + c->va_reserves + c->va_releases + c->va_maps +
           c->va_unmaps;
}

double sublet_tune_calls_cost(const sublet_tune_calls *c, const sublet_tune_cost_model *m)
{
    return m->malloc_us * (double)c->segment_allocs +
           m->malloc_us_per_gib * ((double)c->malloc_bytes / (double)GIB) +
           m->free_us * (double)c->segment_frees + m->retry_us * (double)c->retries +
           m->reserve_us * (double)c->va_reserves + m->release_us * (double)c->va_releases +
           m->map_us * (double)c->map_pages + m->unmap_us * (double)c->unmap_pages;
}

/* ---- the search space ------------------------------------------------------------ */

enum { BASE_NATIVE, BASE_EXPANDABLE, BASE_STITCH, NBASE };
static const char *const base_conf[NBASE] = {"", "expandable_segments:True", "policy:stitch"};
/* least intrusive first: ties go to the earlier value */
static const unsigned ms_mb[] = {0, 1024, 512, 256, 128, 64, 32};
static const unsigned nsr_mb[] = {0, 64, 256, 1024};
static const char *const ru_conf[] = {"",  "16", "8", "4", "2", "[256:1,512:2,1024:4,>:8]",
                                      "[64:8,128:2,256:2,512:2,1024:1,>:1]"};
static const char *const gc_conf[] = {"", "0.95", "0.8", "0.6"};
#define GC_FRACTION "0.999"
#define N_MS (sizeof ms_mb / sizeof ms_mb[0])
#define N_NSR (sizeof nsr_mb / sizeof nsr_mb[0])
#define N_RU (sizeof ru_conf / sizeof ru_conf[0])
#define N_GC (sizeof gc_conf / sizeof gc_conf[0])

typedef struct knobs {
    unsigned char base, ms, nsr, ru, gc;
} knobs;

static int knobs_complexity(const knobs *k)
{
    return (k->base != BASE_NATIVE) + (k->ms != 0) + (k->nsr != 0) + (k->ru != 0) + (k->gc != 0);
}

static void knobs_conf(const knobs *k, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
#define ADD(...)                                                                      \
    do {                                                                              \
        if (n < cap)                                                                  \
            n += (size_t)snprintf(out + n, cap - n, "%s", n ? "," : "");             \
        if (n < cap)                                                                  \
            n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__);                    \
    } while (0)
    if (k->base != BASE_NATIVE)
        ADD("%s", base_conf[k->base]);
    if (k->ms)
        ADD("max_split_size_mb:%u", ms_mb[k->ms]);
    if (k->nsr)
        ADD("max_non_split_rounding_mb:%u", nsr_mb[k->nsr]);
    if (k->ru)
        ADD("roundup_power2_divisions:%s", ru_conf[k->ru]);
    if (k->gc)
        ADD("garbage_collection_threshold:%s,per_process_memory_fraction:" GC_FRACTION,
            gc_conf[k->gc]);
#undef ADD
}

static int cmp_knobs(const void *a, const void *b)
{
    const knobs *x = a, *y = b;
    int cx = knobs_complexity(x), cy = knobs_complexity(y);
    if (cx != cy)
        return cx < cy ? -1 : 1;
    if (x->base != y->base)
        return x->base < y->base ? -1 : 1;
    if (x->ms != y->ms)
        return x->ms < y->ms ? -1 : 1;
    if (x->nsr != y->nsr)
        return x->nsr < y->nsr ? -1 : 1;
    if (x->ru != y->ru)
        return x->ru < y->ru ? -1 : 1;
    return (x->gc > y->gc) - (x->gc < y->gc);
}

/* All settings of the space in enumeration order; returns the count. */
static size_t space_knobs(unsigned flags, knobs *out)
{
    size_t n = 0;
    for (unsigned b = 0; b < NBASE; b++) {
        if (b == BASE_STITCH && (flags & SUBLET_TUNE_PYTORCH_ONLY))
            continue;
        for (unsigned ms = 0; ms < N_MS; ms++)
            for (unsigned nsr = 0; nsr < N_NSR; nsr++) {
                if (!ms && nsr)
                    continue;
                for (unsigned ru = 0; ru < N_RU; ru++)
                    for (unsigned gc = 0; gc < N_GC; gc++) {
                        if (gc && b != BASE_NATIVE)
                            continue;
                        if (out)
                            out[n] = (knobs){(unsigned char)b, (unsigned char)ms,
                                             (unsigned char)nsr, (unsigned char)ru,
                                             (unsigned char)gc};
                        n++;
                    }
            }
    }
    if (out)
        qsort(out, n, sizeof *out, cmp_knobs);
    return n;
}

size_t sublet_tune_space(unsigned flags, char (*confs)[SUBLET_TUNE_CONF_MAX], size_t cap)
{
    size_t n = space_knobs(flags, NULL);
    if (!confs || !cap)
        return n;
    knobs *k = malloc(n * sizeof *k);
    if (!k)
        return n;
    space_knobs(flags, k);
    for (size_t i = 0; i < n && i < cap; i++)
        knobs_conf(&k[i], confs[i], SUBLET_TUNE_CONF_MAX);
    free(k);
    return n;
}

/* ---- options, results ------------------------------------------------------------- */

void sublet_tune_options_init(sublet_tune_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    sublet_tune_cost_model_default(&o->cost);
    o->threads = 2;
    o->resolution = DEFAULT_RESOLUTION;
    o->band = DEFAULT_BAND;
    o->diagnose = 1;
}

void sublet_tune_eval_free(sublet_tune_eval *e)
{
    if (!e)
        return;
    free(e->per_trace);
    e->per_trace = NULL;
}

void sublet_tune_result_free(sublet_tune_result *r)
{
    if (!r)
        return;
    sublet_tune_eval_free(&r->current);
    sublet_tune_eval_free(&r->pytorch);
    sublet_tune_eval_free(&r->sublet);
    free(r->pareto_pytorch);
    free(r->pareto_sublet);
    r->pareto_pytorch = r->pareto_sublet = NULL;
    r->npareto_pytorch = r->npareto_sublet = 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- per trace facts ---------------------------------------------------------------- */

typedef struct tfacts {
    const sublet_trace *t;
    size_t npre;
    uint64_t peak_requested;   /* peak live requested bytes */
    uint64_t recorded_reserved; /* peak reserved as recorded */
    uint64_t max_pre_segment;   /* largest pre_segment / pre_alloc block */
} tfacts;

/* One replay of trace f under conf on a device of `cap` bytes. */
static sublet_status replay(const tfacts *f, const char *conf, uint64_t cap, int prelude,
                            int stop_on_oom, uint64_t stop_after, sublet_replay_result *r,
                            char *err, size_t err_cap)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    o.device_memory = cap;
    o.stop_on_oom = stop_on_oom;
    o.stop_after = stop_after;
    o.prelude = prelude;
    return sublet_replay_run(f->t, &o, r, err, err_cap);
}

/* Page sizes of the virtual-memory modes of conf (0: conf uses cudaMalloc). */
static void page_sizes(const char *conf, uint64_t *small_page, uint64_t *large_page)
{
    sublet_settings s;
    sublet_settings_default(&s);
    *small_page = *large_page = 0;
    if (sublet_settings_parse(&s, conf, NULL, 0) != SUBLET_OK)
        return;
    if (s.policy == SUBLET_POLICY_STITCH) {
        *small_page = *large_page = 2 * MIB;
    } else if (s.expandable_segments) {
        *small_page = 2 * MIB;
        *large_page = s.large_segment_size ? s.large_segment_size : 20 * MIB;
    }
}

static uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* What one run on the user's device measured. */
typedef struct drun {
    int fits;
    uint64_t ooms, errors, peak_reserved, segments;
    sublet_tune_calls calls;
    double cost;
} drun;

/* The cost replay: the whole trace on `cap` bytes, minus the prelude's calls. */
static sublet_status cost_run(const tfacts *f, const char *conf, uint64_t cap, int prelude,
                              const sublet_tune_cost_model *m, drun *out, uint64_t *replays,
                              char *err, size_t err_cap)
{
    memset(out, 0, sizeof *out);
    sublet_replay_result r, r0;
    memset(&r0, 0, sizeof r0);
    sublet_status st = replay(f, conf, cap, prelude, 0, SUBLET_REPLAY_ALL, &r, err, err_cap);
    (*replays)++;
    if (st != SUBLET_OK && st != SUBLET_ERR_OOM && st != SUBLET_ERR_DEVICE_OOM) {
        sublet_replay_result_free(&r);
        return st;
    }
    if (st != SUBLET_OK) { /* the prelude does not fit this device */
        out->fits = 0;
        out->ooms = 1;
        sublet_replay_result_free(&r);
        return SUBLET_OK;
    }
    if (f->npre) {
        sublet_status st0 = replay(f, conf, cap, prelude, 0, f->npre - 1, &r0, NULL, 0);
        (*replays)++;
        if (st0 != SUBLET_OK)
            memset(&r0, 0, sizeof r0);
        sublet_replay_result_free(&r0);
    }
    uint64_t sp, lp;
    page_sizes(conf, &sp, &lp);
    sublet_tune_calls *c = &out->calls;
    c->segment_allocs = sub0(r.device_ops.segment_allocs, r0.device_ops.segment_allocs);
    c->segment_frees = sub0(r.device_ops.segment_frees, r0.device_ops.segment_frees);
    c->va_reserves = sub0(r.device_ops.va_reserves, r0.device_ops.va_reserves);
    c->va_releases = sub0(r.device_ops.va_releases, r0.device_ops.va_releases);
    c->va_maps = sub0(r.device_ops.va_maps, r0.device_ops.va_maps);
    c->va_unmaps = sub0(r.device_ops.va_unmaps, r0.device_ops.va_unmaps);
    c->retries = sub0((uint64_t)r.stats_end.num_alloc_retries,
                      (uint64_t)r0.stats_end.num_alloc_retries);
    const sublet_stat *res = r.stats_end.reserved_bytes, *res0 = r0.stats_end.reserved_bytes;
    if (sp) {
        uint64_t sa = sub0((uint64_t)res[SUBLET_POOL_SMALL].allocated,
                           (uint64_t)res0[SUBLET_POOL_SMALL].allocated);
        uint64_t la = sub0((uint64_t)res[SUBLET_POOL_LARGE].allocated,
                           (uint64_t)res0[SUBLET_POOL_LARGE].allocated);
        uint64_t sf = sub0((uint64_t)res[SUBLET_POOL_SMALL].freed,
                           (uint64_t)res0[SUBLET_POOL_SMALL].freed);
        uint64_t lf = sub0((uint64_t)res[SUBLET_POOL_LARGE].freed,
                           (uint64_t)res0[SUBLET_POOL_LARGE].freed);
        c->map_pages = (sa + sp - 1) / sp + (la + lp - 1) / lp;
        c->unmap_pages = (sf + sp - 1) / sp + (lf + lp - 1) / lp;
    } else {
        c->malloc_bytes = sub0((uint64_t)res[SUBLET_POOL_ALL].allocated,
                               (uint64_t)res0[SUBLET_POOL_ALL].allocated);
    }
    out->fits = r.ooms == 0;
    out->ooms = r.ooms;
    out->errors = r.errors;
    out->peak_reserved = r.peak_reserved_bytes;
    out->segments = c->segment_allocs + c->va_maps;
    out->cost = sublet_tune_calls_cost(c, m);
    sublet_replay_result_free(&r);
    return SUBLET_OK;
}

/* A probe: does trace f run on `cap` bytes without an OOM (and without more
 * row errors than the reference)?  Stops at the first OOM. */
static sublet_status probe_run(const tfacts *f, const char *conf, uint64_t cap, int prelude,
                               uint64_t errors_allowed, int *ok, char *err, size_t err_cap)
{
    sublet_replay_result r;
    sublet_status st = replay(f, conf, cap, prelude, 1, SUBLET_REPLAY_ALL, &r, err, err_cap);
    *ok = st == SUBLET_OK && r.ooms == 0 && r.errors <= errors_allowed;
    sublet_replay_result_free(&r);
    if (st == SUBLET_ERR_OOM || st == SUBLET_ERR_DEVICE_OOM)
        st = SUBLET_OK; /* the prelude does not fit: a failure to run */
    return st;
}

/* Bytes of the big device used as the reference when the user's is too
 * small (as sublet_replay_min_capacity). */
static uint64_t big_device(const tfacts *f)
{
    uint64_t b = f->recorded_reserved > f->peak_requested ? f->recorded_reserved
                                                          : f->peak_requested;
    return b * 4 + GIB;
}

/* ---- the exact, plain evaluation ------------------------------------------------------ */

static sublet_status facts_get(const sublet_trace *t, tfacts *f)
{
    memset(f, 0, sizeof *f);
    f->t = t;
    f->npre = sublet_trace_prelude_count(t);
    sublet_trace_info info;
    sublet_status st = sublet_trace_info_get(t, &info);
    if (st != SUBLET_OK)
        return st;
    f->peak_requested = info.peak_requested_bytes;
    f->recorded_reserved = info.peak_reserved_bytes;
    const sublet_trace_event *ev = sublet_trace_events(t);
    for (size_t i = 0; i < f->npre; i++) {
        uint64_t s = ev[i].kind == SUBLET_TRACE_PRE_SEGMENT ? ev[i].size : ev[i].block_size;
        if (s > f->max_pre_segment)
            f->max_pre_segment = s;
    }
    return SUBLET_OK;
}

static uint64_t default_device(const sublet_trace *const *traces, size_t n)
{
    uint64_t d = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t m = sublet_trace_device_memory(traces[i]);
        if (m > d)
            d = m;
    }
    return d ? d : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
}

static void eval_fold(sublet_tune_eval *e)
{
    e->min_capacity_bytes = e->peak_requested_bytes = e->peak_reserved_bytes = 0;
    e->cost_us = 0;
    e->device_calls = e->retries = 0;
    e->fits = 1;
    for (size_t i = 0; i < e->ntraces; i++) {
        const sublet_tune_trace_eval *p = &e->per_trace[i];
        if (p->min_capacity_bytes > e->min_capacity_bytes)
            e->min_capacity_bytes = p->min_capacity_bytes;
        if (p->peak_requested_bytes > e->peak_requested_bytes)
            e->peak_requested_bytes = p->peak_requested_bytes;
        if (p->peak_reserved_bytes > e->peak_reserved_bytes)
            e->peak_reserved_bytes = p->peak_reserved_bytes;
        e->cost_us += p->cost_us;
        e->device_calls += sublet_tune_calls_total(&p->calls);
        e->retries += p->calls.retries;
        e->fits &= p->fits;
    }
    e->overhead = e->peak_requested_bytes
                      ? (double)e->min_capacity_bytes / (double)e->peak_requested_bytes - 1.0
                      : 0.0;
}

static int conf_is_pytorch(const char *conf)
{
    sublet_settings s;
    sublet_settings_default(&s);
    if (sublet_settings_parse(&s, conf, NULL, 0) != SUBLET_OK)
        return 0;
    return s.policy == SUBLET_POLICY_NATIVE;
}

/* One trace, one setting: plain min capacity + cost run. */
static sublet_status eval_one(const tfacts *f, const char *conf, uint64_t dev, const
                              sublet_tune_options *o, sublet_tune_trace_eval *out,
                              uint64_t *replays, char *err, size_t err_cap)
{
    memset(out, 0, sizeof *out);
    out->peak_requested_bytes = f->peak_requested;
    drun d;
    sublet_status st = cost_run(f, conf, dev, o->prelude, &o->cost, &d, replays, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    out->fits = d.fits;
    out->ooms = d.ooms;
    out->peak_reserved_bytes = d.peak_reserved;
    out->segments_created = d.segments;
    out->calls = d.calls;
    out->cost_us = d.cost;
    sublet_replay_options ro;
    sublet_replay_options_init(&ro);
    ro.conf = conf;
    ro.prelude = o->prelude;
    sublet_mincap_result m;
    st = sublet_replay_min_capacity(f->t, &ro, o->resolution ? o->resolution : DEFAULT_RESOLUTION,
                                    &m, err, err_cap);
    *replays += m.replays;
    if (st == SUBLET_OK) {
        out->min_capacity_bytes = m.min_capacity_bytes;
        out->overhead = m.overhead;
    }
    sublet_mincap_result_free(&m);
    return st;
}

sublet_status sublet_tune_evaluate(const sublet_trace *const *traces, size_t n, const char *conf,
                                   const sublet_tune_options *o, sublet_tune_eval *out, char *err,
                                   size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!traces || !n || !conf)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_tune_options def;
    if (!o) {
        sublet_tune_options_init(&def);
        o = &def;
    }
    snprintf(out->conf, sizeof out->conf, "%s", conf);
    out->pytorch = conf_is_pytorch(conf);
    out->ntraces = n;
    out->per_trace = calloc(n, sizeof *out->per_trace);
    if (!out->per_trace)
        return SUBLET_ERR_NO_MEMORY;
    uint64_t dev = o->device_memory ? o->device_memory : default_device(traces, n);
    uint64_t replays = 0;
    for (size_t i = 0; i < n; i++) {
        tfacts f;
        sublet_status st = facts_get(traces[i], &f);
        if (st == SUBLET_OK)
            st = eval_one(&f, conf, dev, o, &out->per_trace[i], &replays, err, err_cap);
        if (st != SUBLET_OK) {
            sublet_tune_eval_free(out);
            return st;
        }
    }
    eval_fold(out);
    return SUBLET_OK;
}

/* ---- the search state --------------------------------------------------------------- */

typedef struct tstate { /* one setting on one trace */
    drun d;             /* on the user's device */
    uint64_t errors_allowed;
    uint64_t fail_at; /* largest device known to fail (0: none) */
    uint64_t ok_at;   /* smallest device known to work (NONE: none) */
    uint64_t lb;      /* every device below this fails (rounding bound) */
} tstate;

typedef struct cand {
    knobs k;
    char conf[SUBLET_TUNE_CONF_MAX];
    int pytorch;
    size_t rep;        /* the setting it provably replays like (itself if distinct) */
    size_t gc_sibling; /* the same setting without the collector (GC variants) */
    int costed;
    double cost;
    int fits;
    uint64_t calls, retries, peak_reserved;
    tstate *ts;
} cand;

typedef struct tctx {
    const sublet_tune_options *o;
    size_t nt;
    tfacts *f;
    uint64_t dev, res;
    size_t nc;
    cand *c;
    tstate *ts_all;
    uint64_t replays, replays_est;
    sublet_status st; /* first hard error */
    char err[512];
    pthread_mutex_t lock;
} tctx;

static void progress(tctx *x)
{
    if (x->o->progress)
        x->o->progress(x->o->progress_user, x->replays,
                       x->replays_est > x->replays ? x->replays_est : x->replays);
}

static int has_error(tctx *x)
{
    pthread_mutex_lock(&x->lock);
    int e = x->st != SUBLET_OK;
    pthread_mutex_unlock(&x->lock);
    return e;
}

static void set_error(tctx *x, sublet_status st, const char *msg)
{
    pthread_mutex_lock(&x->lock);
    if (x->st == SUBLET_OK) {
        x->st = st;
        snprintf(x->err, sizeof x->err, "%s", msg && *msg ? msg : sublet_status_text(st));
    }
    pthread_mutex_unlock(&x->lock);
}

/* ---- a tiny parallel for ------------------------------------------------------------ */

typedef struct pfor {
    size_t n, next;
    void (*fn)(void *ctx, size_t i);
    void *ctx;
    pthread_mutex_t lock;
} pfor;

static void *pfor_worker(void *arg)
{
    pfor *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n)
            return NULL;
        p->fn(p->ctx, i);
    }
}

static void parallel_for(unsigned threads, size_t n, void (*fn)(void *, size_t), void *ctx)
{
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads <= 1 || n <= 1) {
        for (size_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    pfor p = {.n = n, .next = 0, .fn = fn, .ctx = ctx};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t th[MAX_THREADS];
    unsigned started = 0;
    for (unsigned i = 1; i < threads && i < n; i++)
        if (pthread_create(&th[started], NULL, pfor_worker, &p) == 0)
            started++;
    pfor_worker(&p);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.lock);
}

/* ---- merging settings that replay identically ------------------------------------------ */

typedef struct sizes {
    uint64_t *v;
    size_t n;
} sizes;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Distinct request sizes of every trace (allocs and pre_allocs). */
static int collect_sizes(const tctx *x, sizes *out)
{
    size_t total = 0;
    for (size_t t = 0; t < x->nt; t++)
        total += sublet_trace_count(x->f[t].t);
    out->v = malloc((total ? total : 1) * sizeof *out->v);
    if (!out->v)
        return 0;
    size_t n = 0;
    for (size_t t = 0; t < x->nt; t++) {
        const sublet_trace_event *ev = sublet_trace_events(x->f[t].t);
        size_t cnt = sublet_trace_count(x->f[t].t);
        for (size_t i = 0; i < cnt; i++)
            if ((ev[i].kind == SUBLET_ACT_ALLOC || ev[i].kind == SUBLET_TRACE_PRE_ALLOC) &&
                ev[i].size)
                out->v[n++] = ev[i].size;
    }
    qsort(out->v, n, sizeof *out->v, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || out->v[m - 1] != out->v[i])
            out->v[m++] = out->v[i];
    out->n = m;
    return 1;
}

static void settings_of(const char *conf, sublet_settings *s)
{
    sublet_settings_default(s);
    (void)sublet_settings_parse(s, conf, NULL, 0);
}

/* For each roundup value: the first value that rounds every size alike. */
static void roundup_classes(const sizes *sz, unsigned *cls, uint64_t *max_round,
                            uint64_t *max_alloc)
{
    sublet_settings s[N_RU];
    for (unsigned r = 0; r < N_RU; r++) {
        char conf[128] = "";
        if (r)
            snprintf(conf, sizeof conf, "roundup_power2_divisions:%s", ru_conf[r]);
        settings_of(conf, &s[r]);
        cls[r] = r;
        max_round[r] = max_alloc[r] = 0;
        for (size_t i = 0; i < sz->n; i++) {
            uint64_t rs = sublet_round_size(&s[r], sz->v[i]);
            uint64_t as = sublet_allocation_size(&s[r], rs);
            if (rs > max_round[r])
                max_round[r] = rs;
            if (as > max_alloc[r])
                max_alloc[r] = as;
        }
        for (unsigned q = 0; q < r; q++) {
            if (cls[q] != q)
                continue;
            size_t i = 0;
            while (i < sz->n && sublet_round_size(&s[q], sz->v[i]) ==
                                    sublet_round_size(&s[r], sz->v[i]))
                i++;
            if (i == sz->n) {
                cls[r] = q;
                break;
            }
        }
    }
}

/* The rounding lower bound of each roundup class, per trace: the peak of the
 * live requests rounded as the class rounds them (pre_allocs at their
 * requested size, since an adopted block keeps its recorded size). */
static uint64_t rounding_bound(const tfacts *f, const sublet_settings *s)
{
    const sublet_trace_event *ev = sublet_trace_events(f->t);
    size_t n = sublet_trace_count(f->t);
    /* address -> rounded size of the live allocations: a small open-addressing map */
    size_t cap = 1024;
    while (cap < 2 * n + 2)
        cap *= 2;
    uint64_t *keys = calloc(cap, sizeof *keys), *vals = calloc(cap, sizeof *vals);
    unsigned char *used = calloc(cap, 1);
    uint64_t live = 0, peak = 0;
    if (!keys || !vals || !used) {
        free(keys);
        free(vals);
        free(used);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *e = &ev[i];
        int add = e->kind == SUBLET_ACT_ALLOC || e->kind == SUBLET_TRACE_PRE_ALLOC;
        int del = e->kind == SUBLET_ACT_FREE_COMPLETED;
        if (!add && !del)
            continue;
        uint64_t h = e->addr * UINT64_C(0x9e3779b97f4a7c15);
        size_t j = (size_t)(h >> 17) & (cap - 1);
        while (used[j] == 1 && keys[j] != e->addr)
            j = (j + 1) & (cap - 1);
        if (add) {
            if (!e->size)
                continue;
            uint64_t v = e->kind == SUBLET_TRACE_PRE_ALLOC ? e->size : sublet_round_size(s, e->size);
            if (used[j] == 1)
                live -= vals[j]; /* a reused address: the earlier one is gone */
            used[j] = 1;
            keys[j] = e->addr;
            vals[j] = v;
            live += v;
            if (live > peak)
                peak = live;
        } else if (used[j] == 1) {
            live -= vals[j];
            vals[j] = 0; /* keep the slot (tombstone-free): value 0 */
        }
    }
    free(keys);
    free(vals);
    free(used);
    return peak;
}

/* ---- tasks ----------------------------------------------------------------------- */

typedef struct task {
    size_t c;   /* candidate */
    uint64_t x; /* device size (probe) */
    int kind;   /* 0 cost runs, 1 probe */
    /* results */
    int ok;
    signed char ran[64]; /* per trace: 1 ok, -1 fail, 0 not run */
    uint64_t replays;
    drun *d;                 /* cost tasks: per trace (caller's arrays) */
    uint64_t *errors_allowed;
} task;

typedef struct tbatch {
    tctx *x;
    task *t;
} tbatch;

/* The cost task: every trace on the user's device (and, when it does not
 * fit, the reference errors from a big device). */
static void do_cost(tctx *x, task *k)
{
    cand *c = &x->c[k->c];
    char err[512] = "";
    for (size_t t = 0; t < x->nt; t++) {
        sublet_status st = cost_run(&x->f[t], c->conf, x->dev, x->o->prelude, &x->o->cost,
                                    &k->d[t], &k->replays, err, sizeof err);
        if (st != SUBLET_OK) {
            set_error(x, st, err);
            return;
        }
        k->errors_allowed[t] = k->d[t].errors;
        if (!k->d[t].fits) {
            drun big;
            st = cost_run(&x->f[t], c->conf, big_device(&x->f[t]) > x->dev ? big_device(&x->f[t])
                                                                           : 2 * x->dev,
                          x->o->prelude, &x->o->cost, &big, &k->replays, err, sizeof err);
            if (st != SUBLET_OK) {
                set_error(x, st, err);
                return;
            }
            k->errors_allowed[t] = big.errors;
        }
    }
}

/* Is M(c) <= x known (1), M(c) > x known (-1), or unknown (0)? */
static int known(const tctx *x, const cand *c, uint64_t dev)
{
    int all_ok = 1;
    for (size_t t = 0; t < x->nt; t++) {
        const tstate *s = &c->ts[t];
        if (s->lb > dev || (s->fail_at && s->fail_at >= dev))
            return -1;
        if (!(s->ok_at != NONE && s->ok_at <= dev))
            all_ok = 0;
    }
    return all_ok ? 1 : 0;
}

static void do_probe(tctx *x, task *k)
{
    cand *c = &x->c[k->c];
    char err[512] = "";
    /* traces most likely to fail first: the highest known failure */
    size_t order[64];
    size_t nt = x->nt < 64 ? x->nt : 64;
    for (size_t t = 0; t < nt; t++)
        order[t] = t;
    for (size_t i = 1; i < nt; i++)
        for (size_t j = i; j > 0 && c->ts[order[j]].fail_at > c->ts[order[j - 1]].fail_at; j--) {
            size_t tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    k->ok = 1;
    for (size_t i = 0; i < nt; i++) {
        size_t t = order[i];
        const tstate *s = &c->ts[t];
        if (s->ok_at != NONE && s->ok_at <= k->x)
            continue;
        if (s->lb > k->x || (s->fail_at && s->fail_at >= k->x)) {
            k->ok = 0;
            return;
        }
        int ok;
        sublet_status st = probe_run(&x->f[t], c->conf, k->x, x->o->prelude, s->errors_allowed,
                                     &ok, err, sizeof err);
        k->replays++;
        if (st != SUBLET_OK) {
            set_error(x, st, err);
            k->ok = 0;
            return;
        }
        k->ran[t] = ok ? 1 : -1;
        if (!ok) {
            k->ok = 0;
            return;
        }
    }
}

static void task_fn(void *arg, size_t i)
{
    tbatch *b = arg;
    task *k = &b->t[i];
    if (has_error(b->x))
        return;
    if (k->kind == 0)
        do_cost(b->x, k);
    else
        do_probe(b->x, k);
}

/* Run the tasks, then fold their results in, in order. */
static void run_tasks(tctx *x, task *t, size_t n)
{
    tbatch b = {x, t};
    parallel_for(x->o->threads ? x->o->threads : 2, n, task_fn, &b);
    for (size_t i = 0; i < n; i++) {
        task *k = &t[i];
        cand *c = &x->c[k->c];
        x->replays += k->replays;
        if (k->kind == 0) {
            c->costed = 1;
            c->cost = 0;
            c->fits = 1;
            c->calls = c->retries = c->peak_reserved = 0;
            for (size_t tr = 0; tr < x->nt; tr++) {
                c->ts[tr].d = k->d[tr];
                c->ts[tr].errors_allowed = k->errors_allowed[tr];
                c->cost += k->d[tr].cost;
                c->fits &= k->d[tr].fits;
                c->calls += sublet_tune_calls_total(&k->d[tr].calls);
                c->retries += k->d[tr].calls.retries;
                if (k->d[tr].peak_reserved > c->peak_reserved)
                    c->peak_reserved = k->d[tr].peak_reserved;
                if (k->d[tr].fits && x->dev < c->ts[tr].ok_at)
                    c->ts[tr].ok_at = x->dev;
                if (!k->d[tr].fits && x->dev > c->ts[tr].fail_at)
                    c->ts[tr].fail_at = x->dev;
            }
        } else {
            for (size_t tr = 0; tr < x->nt && tr < 64; tr++) {
                tstate *s = &c->ts[tr];
                if (k->ran[tr] == 1 && k->x < s->ok_at)
                    s->ok_at = k->x;
                if (k->ran[tr] == -1 && k->x > s->fail_at)
                    s->fail_at = k->x;
            }
        }
    }
    progress(x);
}

/* ---- bisection ------------------------------------------------------------------- */

/* The smallest multiple of res known to run every trace, searching upward
 * when none is known yet.  0 when none up to the limit works. */
static uint64_t find_upper(tctx *x, size_t ci)
{
    cand *c = &x->c[ci];
    uint64_t res = x->res;
    uint64_t hi = 0;
    int all = 1;
    for (size_t t = 0; t < x->nt; t++) {
        if (c->ts[t].ok_at == NONE)
            all = 0;
        else if (c->ts[t].ok_at > hi)
            hi = c->ts[t].ok_at;
    }
    if (all)
        return hi;
    /* start from the peak reserved on the user's device (a run that never
     * needed more than that works on that much), else from the floor */
    uint64_t start = 0;
    for (size_t t = 0; t < x->nt; t++) {
        uint64_t s = c->ts[t].d.fits ? c->ts[t].d.peak_reserved : c->ts[t].lb;
        if (c->k.gc)
            s = (uint64_t)((double)s / 0.999) + res;
        if (s > start)
            start = s;
    }
    uint64_t cur = (start + res - 1) / res;
    if (cur == 0)
        cur = 1;
    for (int i = 0; i <= 20 && x->st == SUBLET_OK; i++) {
        task k;
        memset(&k, 0, sizeof k);
        k.c = ci;
        k.kind = 1;
        k.x = cur * res;
        run_tasks(x, &k, 1);
        if (k.ok)
            return k.x;
        uint64_t step = cur / 64 > 1 ? cur / 64 : 1;
        cur = i < 4 ? cur + step : cur * 2;
    }
    return 0;
}

/* Exact M(c): bisection from the best known bounds, `threads` probes a round.
 * Returns 0 when no device works. */
static uint64_t bisect(tctx *x, size_t ci)
{
    cand *c = &x->c[ci];
    uint64_t res = x->res;
    uint64_t hi = find_upper(x, ci);
    if (!hi || x->st != SUBLET_OK)
        return 0;
    unsigned th = x->o->threads ? x->o->threads : 2;
    if (th > 8)
        th = 8;
    for (;;) {
        /* lo: the largest device known to fail, in units of res */
        uint64_t lo = 0;
        for (size_t t = 0; t < x->nt; t++) {
            uint64_t l = c->ts[t].fail_at / res;
            if (c->ts[t].lb) {
                uint64_t lb = (c->ts[t].lb - 1) / res; /* lb*... below the bound fails */
                if (lb > l)
                    l = lb;
            }
            if (l > lo)
                lo = l;
        }
        uint64_t h = hi / res;
        if (lo >= h) /* not monotone: trust the smallest working size */
            return hi;
        if (h - lo <= 1)
            return hi;
        task k[8];
        size_t n = 0;
        uint64_t span = h - lo;
        for (unsigned i = 1; i <= th; i++) {
            uint64_t p = lo + span * i / (th + 1);
            if (p <= lo || p >= h || (n && k[n - 1].x == p * res))
                continue;
            memset(&k[n], 0, sizeof k[n]);
            k[n].c = ci;
            k[n].kind = 1;
            k[n].x = p * res;
            n++;
        }
        if (!n) {
            memset(&k[0], 0, sizeof k[0]);
            k[0].c = ci;
            k[0].kind = 1;
            k[0].x = (lo + span / 2) * res;
            n = 1;
        }
        run_tasks(x, k, n);
        if (x->st != SUBLET_OK)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (k[i].ok && k[i].x < hi)
                hi = k[i].x;
    }
}

/* ---- the walk ------------------------------------------------------------------- */

typedef struct point {
    size_t c;
    uint64_t m;
} point;

typedef struct walk {
    size_t *order; /* distinct candidates of the family, cheapest first */
    size_t n;
    point *pareto;
    size_t np;
    uint64_t best;
    size_t answer;
    uint64_t answer_m;
} walk;

typedef struct okey { /* sort key of the walk: cheapest first, then enumeration order */
    double cost;
    size_t i;
} okey;

static int cmp_okey(const void *a, const void *b)
{
    const okey *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int walk_family(tctx *x, int pytorch_only, walk *w)
{
    memset(w, 0, sizeof *w);
    w->order = malloc(x->nc * sizeof *w->order);
    w->pareto = malloc(x->nc * sizeof *w->pareto);
    if (!w->order || !w->pareto) {
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        return 0;
    }
    int any_fits = 0;
    for (size_t i = 0; i < x->nc; i++) {
        const cand *c = &x->c[i];
        if (c->rep != i || (pytorch_only && !c->pytorch))
            continue;
        any_fits |= c->fits;
    }
    for (size_t i = 0; i < x->nc; i++) {
        const cand *c = &x->c[i];
        if (c->rep != i || (pytorch_only && !c->pytorch))
            continue;
        if (any_fits && !c->fits)
            continue;
        w->order[w->n++] = i;
    }
    /* when nothing fits, memory alone decides: every cost counts as equal */
    double *saved = NULL;
    if (!any_fits) {
        saved = malloc(x->nc * sizeof *saved);
        if (!saved) {
            set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
            return 0;
        }
        for (size_t i = 0; i < x->nc; i++) {
            saved[i] = x->c[i].cost;
            x->c[i].cost = 0;
        }
    }
    okey *keys = malloc((w->n ? w->n : 1) * sizeof *keys);
    if (!keys) {
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        if (saved) {
            for (size_t q = 0; q < x->nc; q++)
                x->c[q].cost = saved[q];
            free(saved);
        }
        return 0;
    }
    for (size_t q = 0; q < w->n; q++)
        keys[q] = (okey){x->c[w->order[q]].cost, w->order[q]};
    qsort(keys, w->n, sizeof *keys, cmp_okey);
    for (size_t q = 0; q < w->n; q++)
        w->order[q] = keys[q].i;
    free(keys);

    unsigned th = x->o->threads ? x->o->threads : 2;
    if (th > 8)
        th = 8;
    uint64_t res = x->res;
    w->best = NONE;
    size_t i = 0;
    while (i < w->n && x->st == SUBLET_OK) {
        if (w->best == NONE) {
            uint64_t m = bisect(x, w->order[i]);
            if (m) {
                w->pareto[w->np++] = (point){w->order[i], m};
                w->best = m;
            }
            i++;
            continue;
        }
        uint64_t bound = w->best - res;
        /* the next candidates that might beat the best */
        task k[8];
        size_t n = 0, idx[8];
        size_t j = i;
        int known_hit = 0;
        while (j < w->n && n < th) {
            const cand *c = &x->c[w->order[j]];
            int kn = known(x, c, bound);
            if (kn < 0) {
                j++;
                continue;
            }
            if (kn > 0) {
                known_hit = 1;
                break;
            }
            memset(&k[n], 0, sizeof k[n]);
            k[n].c = w->order[j];
            k[n].kind = 1;
            k[n].x = bound;
            idx[n++] = j;
            j++;
        }
        if (n)
            run_tasks(x, k, n);
        size_t hit = NONE;
        for (size_t q = 0; q < n; q++)
            if (k[q].ok) {
                hit = idx[q];
                break;
            }
        if (hit == NONE && known_hit)
            hit = j;
        if (hit == NONE) {
            i = j;
            continue;
        }
        size_t ci = w->order[hit];
        uint64_t m = bisect(x, ci);
        if (m && m < w->best) {
            if (w->np && x->c[w->pareto[w->np - 1].c].cost == x->c[ci].cost)
                w->np--; /* same cost, less memory: it replaces the last point */
            w->pareto[w->np++] = (point){ci, m};
            w->best = m;
        }
        i = hit + 1;
    }
    if (x->st != SUBLET_OK || !w->np) {
        if (saved) {
            for (size_t q = 0; q < x->nc; q++)
                x->c[q].cost = saved[q];
            free(saved);
        }
        return x->st == SUBLET_OK ? -1 : 0;
    }

    /* the answer: the cheapest setting within the band of the best M */
    uint64_t band_x = (uint64_t)((double)w->best * (1.0 + (x->o->band > 0 ? x->o->band
                                                                            : DEFAULT_BAND))) /
                      res * res;
    if (band_x < w->best)
        band_x = w->best;
    double group_cost = 0;
    int group_open = 0;
    w->answer = NONE;
    for (i = 0; i < w->n && x->st == SUBLET_OK;) {
        if (group_open && x->c[w->order[i]].cost != group_cost)
            break;
        /* a batch: the undecided candidates from i on (up to th probes),
         * stopping after one already known to be in the band */
        task k[8];
        size_t n = 0, j = i;
        while (j < w->n && n < th) {
            const cand *c = &x->c[w->order[j]];
            if (group_open && c->cost != group_cost)
                break;
            int kn = known(x, c, band_x);
            j++;
            if (kn > 0)
                break;
            if (kn < 0)
                continue;
            memset(&k[n], 0, sizeof k[n]);
            k[n].c = w->order[j - 1];
            k[n].kind = 1;
            k[n].x = band_x;
            n++;
        }
        if (n)
            run_tasks(x, k, n);
        int stop = 0;
        for (size_t q = i; q < j && !stop && x->st == SUBLET_OK; q++) {
            size_t ci = w->order[q];
            const cand *c = &x->c[ci];
            if (group_open && c->cost != group_cost) {
                stop = 1;
                break;
            }
            if (known(x, c, band_x) <= 0)
                continue;
            /* in the band: the first one opens its cost group; within the
             * group the smallest M wins (exact M needed to compare) */
            uint64_t m = 0;
            for (size_t p = 0; p < w->np; p++)
                if (w->pareto[p].c == ci)
                    m = w->pareto[p].m;
            if (!group_open) {
                group_open = 1;
                group_cost = c->cost;
                w->answer = ci;
                w->answer_m = m;
                continue;
            }
            if (!w->answer_m)
                w->answer_m = bisect(x, w->answer);
            if (!m)
                m = bisect(x, ci);
            if (m && m < w->answer_m) {
                w->answer = ci;
                w->answer_m = m;
            }
        }
        if (stop)
            break;
        i = j;
    }
    if (w->answer != NONE && !w->answer_m)
        w->answer_m = bisect(x, w->answer);
    if (saved) {
        for (size_t q = 0; q < x->nc; q++)
            x->c[q].cost = saved[q];
        free(saved);
    }
    return x->st == SUBLET_OK && w->answer != NONE ? 1 : (x->st == SUBLET_OK ? -1 : 0);
}

static void walk_free(walk *w)
{
    free(w->order);
    free(w->pareto);
}

/* ---- the diagnosis: what the answer fixes, in one sentence --------------------------- */

static void fmt_size(uint64_t b, char *out, size_t cap)
{
    if (b >= GIB && b % GIB == 0)
        snprintf(out, cap, "%llu GiB", (unsigned long long)(b / GIB));
    else if (b >= GIB)
        snprintf(out, cap, "%.2f GiB", (double)b / (double)GIB);
    else if (b >= MIB && b % MIB == 0)
        snprintf(out, cap, "%llu MiB", (unsigned long long)(b / MIB));
    else if (b >= MIB)
        snprintf(out, cap, "%.2f MiB", (double)b / (double)MIB);
    else if (b >= 1024)
        snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(out, cap, "%llu bytes", (unsigned long long)b);
}

static void fmt_events(uint64_t lo, uint64_t hi, char *out, size_t cap)
{
    if (lo == hi)
        snprintf(out, cap, "event %llu", (unsigned long long)lo);
    else
        snprintf(out, cap, "events %llu–%llu", (unsigned long long)lo, (unsigned long long)hi);
}

/* What the answer's settings do differently from the current ones. */
static void mechanism(const char *from, const char *to, char *out, size_t cap)
{
    sublet_settings a, b;
    settings_of(from, &a);
    settings_of(to, &b);
    size_t n = 0;
    out[0] = '\0';
#define SAY(...)                                                                  \
    do {                                                                          \
        if (n < cap)                                                              \
            n += (size_t)snprintf(out + n, cap - n, "%s", n ? "; " : "");        \
        if (n < cap)                                                              \
            n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__);                \
    } while (0)
    if (b.policy == SUBLET_POLICY_STITCH && a.policy != SUBLET_POLICY_STITCH)
        SAY("policy:stitch backs every block with 2 MiB pages, so free pages anywhere serve "
            "any request");
    else if (b.expandable_segments && !a.expandable_segments)
        SAY("expandable_segments:True grows one segment per stream page by page, so freed "
            "pages serve later requests of any size");
    else if (!b.expandable_segments && a.expandable_segments)
        SAY("without expandable segments requests get whole segments of their own");
    if (b.max_split_size != a.max_split_size) {
        if (b.max_split_size == SUBLET_SIZE_UNLIMITED)
            SAY("without max_split_size_mb every cached block may be split");
        else
            SAY("max_split_size_mb:%llu keeps cached blocks of %llu MiB or more whole: only "
                "requests of that size take them",
                (unsigned long long)(b.max_split_size / MIB),
                (unsigned long long)(b.max_split_size / MIB));
    }
    if (b.max_non_split_rounding != a.max_non_split_rounding &&
        b.max_split_size != SUBLET_SIZE_UNLIMITED)
        SAY("max_non_split_rounding_mb:%llu lets an oversize request take a cached block up "
            "to %llu MiB larger",
            (unsigned long long)(b.max_non_split_rounding / MIB),
            (unsigned long long)(b.max_non_split_rounding / MIB));
    if (memcmp(a.roundup_power2_divisions, b.roundup_power2_divisions,
               sizeof a.roundup_power2_divisions) != 0) {
        int any = 0;
        for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
            any |= b.roundup_power2_divisions[i] > 1;
        if (any)
            SAY("roundup_power2_divisions rounds requests up to a few sizes per power of two, "
                "so freed blocks fit later requests of nearby sizes");
        else
            SAY("without roundup_power2_divisions requests are rounded to 512 bytes only");
    }
    if (b.garbage_collection_threshold > 0 && b.per_process_memory_fraction < 1.0 &&
        !(a.garbage_collection_threshold > 0 && a.per_process_memory_fraction < 1.0))
        SAY("garbage_collection_threshold:%g frees the least recently used cached segments "
            "once %g %% of the memory limit is reserved, instead of freeing the whole cache "
            "on a failed allocation",
            b.garbage_collection_threshold, b.garbage_collection_threshold * 100.0);
    if (!n)
        SAY("the settings differ only in options that did not matter here");
#undef SAY
}

typedef struct hist {
    sublet_trace_entry *e;
    size_t n;
    uint64_t last_event;
    sublet_frag_stats frag; /* at the end of the run */
    int have_frag;
} hist;

static void copy_history(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)st;
    hist *h = user;
    h->last_event = last_event;
    if (!a)
        return;
    if (sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &h->frag) == SUBLET_OK)
        h->have_frag = 1;
    size_t n = sublet_history_count(a);
    h->e = malloc((n ? n : 1) * sizeof *h->e);
    if (h->e)
        h->n = sublet_history_copy(a, h->e, n);
}

/* A copy of t whose time stamps are the row indices, so that the recorded
 * history of a replay says which row each engine event stands for. */
static sublet_trace *indexed_copy(const sublet_trace *t)
{
    sublet_trace *c;
    if (sublet_trace_create(&c) != SUBLET_OK)
        return NULL;
    size_t n = sublet_trace_count(t);
    const sublet_trace_event *ev = sublet_trace_events(t);
    for (size_t i = 0; i < n; i++) {
        sublet_trace_event e = ev[i];
        e.time_us = i;
        e.flags |= SUBLET_TRACE_HAS_TIME;
        e.frames = 0;
        if (sublet_trace_append(c, &e) != SUBLET_OK) {
            sublet_trace_free(c);
            return NULL;
        }
    }
    return c;
}

static int record_run(const sublet_trace *ix, const char *conf, uint64_t cap, int prelude,
                      int stop_on_oom, hist *h, sublet_replay_result *r)
{
    memset(h, 0, sizeof *h);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    o.device_memory = cap;
    o.prelude = prelude;
    o.stop_on_oom = stop_on_oom;
    o.record = SUBLET_RECORD_ALL;
    o.record_context = SUBLET_CONTEXT_NONE;
    o.record_max_entries = 4 * sublet_trace_count(ix) + 1024;
    o.on_finish = copy_history;
    o.finish_user = h;
    sublet_status st = sublet_replay_run(ix, &o, r, NULL, 0);
    return st == SUBLET_OK && h->e;
}

/* The row an entry stands for: allocations carry the time of the recorded
 * segment_alloc row before them when there was one. */
static uint64_t entry_event(const sublet_trace_event *ev, size_t n, const sublet_trace_entry *e)
{
    uint64_t i = e->time_us;
    if (i < n && ev[i].kind == SUBLET_ACT_SEGMENT_ALLOC &&
        (e->action == SUBLET_ACT_ALLOC || e->action == SUBLET_ACT_SEGMENT_ALLOC ||
         e->action == SUBLET_ACT_SEGMENT_MAP))
        i++;
    return i;
}

/* Bytes of new device memory (segments or mapped pages) per row. */
static uint64_t *new_memory_per_row(const hist *h, const sublet_trace_event *ev, size_t n)
{
    uint64_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < h->n; i++) {
        const sublet_trace_entry *e = &h->e[i];
        if (e->action != SUBLET_ACT_SEGMENT_ALLOC && e->action != SUBLET_ACT_SEGMENT_MAP)
            continue;
        uint64_t r = entry_event(ev, n, e);
        if (r < n)
            v[r] += e->size;
    }
    return v;
}

/* A sorted set of uint64 (a plain array; the sets here hold live blocks and
 * segments, thousands at most). */
typedef struct uset {
    uint64_t *k, *v;
    size_t n, cap;
} uset;

static size_t uset_lb(const uset *s, uint64_t key)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->k[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int uset_put(uset *s, uint64_t key, uint64_t val)
{
    size_t i = uset_lb(s, key);
    if (i < s->n && s->k[i] == key) {
        s->v[i] = val;
        return 1;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        uint64_t *k = realloc(s->k, nc * sizeof *k);
        if (!k)
            return 0;
        s->k = k;
        uint64_t *v = realloc(s->v, nc * sizeof *v);
        if (!v)
            return 0;
        s->v = v;
        s->cap = nc;
    }
    memmove(s->k + i + 1, s->k + i, (s->n - i) * sizeof *s->k);
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
    s->k[i] = key;
    s->v[i] = val;
    s->n++;
    return 1;
}

static void uset_del(uset *s, uint64_t key)
{
    size_t i = uset_lb(s, key);
    if (i < s->n && s->k[i] == key) {
        memmove(s->k + i, s->k + i + 1, (s->n - i - 1) * sizeof *s->k);
        memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
        s->n--;
    }
}

static void uset_free(uset *s)
{
    free(s->k);
    free(s->v);
    memset(s, 0, sizeof *s);
}

typedef struct split {
    uint64_t event, request, rounded, taken;
} split;

/* The large-pool splits of the current run: an allocation served from a
 * cached block larger than it (the block starts where the allocation does,
 * and ends at the next live block or the segment's end). */
static size_t find_splits(const hist *h, const sublet_trace *t, const sublet_settings *s,
                          split **out)
{
    const sublet_trace_event *ev = sublet_trace_events(t);
    size_t n = sublet_trace_count(t), npre = sublet_trace_prelude_count(t);
    uset segs = {0}, live = {0};
    size_t ns = 0, cap = 0;
    split *v = NULL;
    for (size_t i = 0; i < npre; i++) {
        if (ev[i].kind == SUBLET_TRACE_PRE_SEGMENT)
            uset_put(&segs, ev[i].addr, ev[i].size);
        else
            uset_put(&live, ev[i].addr, ev[i].size);
    }
    uint64_t fresh = NONE; /* a segment just created: the next alloc there is no split */
    for (size_t i = 0; i < h->n; i++) {
        const sublet_trace_entry *e = &h->e[i];
        switch (e->action) {
        case SUBLET_ACT_SEGMENT_ALLOC:
            uset_put(&segs, e->addr, e->size);
            fresh = e->addr;
            break;
        case SUBLET_ACT_SEGMENT_FREE:
            uset_del(&segs, e->addr);
            break;
        case SUBLET_ACT_FREE_COMPLETED:
            uset_del(&live, e->addr);
            break;
        case SUBLET_ACT_ALLOC: {
            uint64_t a = e->addr;
            uint64_t rounded = sublet_round_size(s, e->size ? e->size : 1);
            int was_fresh = fresh == a;
            fresh = NONE;
            if (!was_fresh && rounded > MIB) {
                size_t si = uset_lb(&segs, a + 1);
                if (si > 0 && a - segs.k[si - 1] < segs.v[si - 1]) {
                    uint64_t end = segs.k[si - 1] + segs.v[si - 1];
                    size_t li = uset_lb(&live, a + 1);
                    if (li < live.n && live.k[li] < end)
                        end = live.k[li];
                    uint64_t taken = end > a ? end - a : 0;
                    if (taken > rounded + MIB) {
                        if (ns == cap) {
                            cap = cap ? cap * 2 : 64;
                            split *nv = realloc(v, cap * sizeof *v);
                            if (!nv)
                                goto done;
                            v = nv;
                        }
                        v[ns++] = (split){entry_event(ev, n, e), e->size, rounded, taken};
                    }
                }
            }
            uset_put(&live, a, e->size);
            break;
        }
        default:
            break;
        }
    }
done:
    uset_free(&segs);
    uset_free(&live);
    *out = v;
    return ns;
}

typedef struct pair {
    uint64_t a, b;
} pair;

static int cmp_pair(const void *x, const void *y)
{
    const pair *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* The most frequent pair (ties: the largest). */
static pair pair_mode(pair *v, size_t n)
{
    pair best = {0, 0};
    if (!n)
        return best;
    qsort(v, n, sizeof *v, cmp_pair);
    size_t bc = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].a == v[i].a && v[j].b == v[i].b)
            j++;
        if (j - i >= bc) {
            bc = j - i;
            best = v[i];
        }
        i = j;
    }
    return best;
}


/* One sentence: what `to` fixes in trace t compared with `from`. */
static void diagnose(const tfacts *f, const char *from, const char *to, uint64_t dev,
                     uint64_t to_mincap, int prelude, char *out, size_t cap)
{
    out[0] = '\0';
    if (strcmp(from, to) == 0)
        return;
    char mech[320];
    mechanism(from, to, mech, sizeof mech);
    sublet_trace *ix = indexed_copy(f->t);
    if (!ix)
        return;
    const sublet_trace_event *ev = sublet_trace_events(ix);
    size_t n = sublet_trace_count(ix);
    hist hf, ht;
    sublet_replay_result rf, rt;
    int okf = record_run(ix, from, dev, prelude, 0, &hf, &rf);
    int okt = record_run(ix, to, dev, prelude, 0, &ht, &rt);
    uint64_t *sf = okf ? new_memory_per_row(&hf, ev, n) : NULL;
    uint64_t *st = okt ? new_memory_per_row(&ht, ev, n) : NULL;
    if (sf && st) {
        /* the rows where the current settings took new memory that the answer did not */
        uint64_t first = NONE, last = 0, count = 0;
        for (size_t i = 0; i < n; i++) {
            if (sf[i] <= st[i])
                continue;
            if (first == NONE)
                first = i;
            last = i;
            count++;
        }
        uint64_t pf = rf.peak_reserved_bytes, pt = rt.peak_reserved_bytes;
        if (count && pf > pt) {
            sublet_settings fs;
            settings_of(from, &fs);
            int virt = fs.expandable_segments || fs.policy == SUBLET_POLICY_STITCH;
            int adopt = prelude == SUBLET_PRELUDE_ADOPT ||
                        (prelude == SUBLET_PRELUDE_AUTO && !virt);
            split *sp = NULL;
            size_t nsp = adopt && !virt ? find_splits(&hf, ix, &fs, &sp) : 0;
            /* the culprits: splits, before a row where new memory was taken, of
             * blocks that could have held that row's request, by smaller ones */
            uint64_t cf = NONE, cl = 0, cc = 0;
            pair *cp = malloc((nsp ? nsp : 1) * sizeof *cp);
            pair *xp = malloc((count ? count : 1) * sizeof *xp);
            size_t nx = 0;
            for (size_t i = first; i <= last && i < n && cp && xp; i++) {
                if (sf[i] <= st[i])
                    continue;
                xp[nx++] = (pair){sf[i], ev[i].kind == SUBLET_ACT_ALLOC ? ev[i].size : 0};
                if (ev[i].kind != SUBLET_ACT_ALLOC)
                    continue;
                uint64_t need = sublet_round_size(&fs, ev[i].size ? ev[i].size : 1);
                for (size_t q = 0; q < nsp && sp[q].event < i; q++) {
                    if (sp[q].taken < need || sp[q].rounded >= need)
                        continue;
                    if (sp[q].event < cf)
                        cf = sp[q].event;
                    if (sp[q].event > cl)
                        cl = sp[q].event;
                    cp[cc++] = (pair){sp[q].taken, sp[q].request};
                    sp[q].taken = 0; /* counted once */
                }
            }
            free(sp);
            char evs[96], evc[96], a1[32], a2[32], a3[32], a4[32], p1[32], p2[32], seg[160];
            fmt_events(first, last, evs, sizeof evs);
            fmt_size(pf, p1, sizeof p1);
            fmt_size(pt, p2, sizeof p2);
            pair xm = pair_mode(xp, nx);
            fmt_size(xm.a, a3, sizeof a3);
            fmt_size(xm.b, a4, sizeof a4);
            int k;
            if (count == 1)
                k = snprintf(seg, sizeof seg, "a new %s segment at %s for a %s request", a3,
                             evs, a4);
            else
                k = snprintf(seg, sizeof seg,
                             "%llu new segments at %s (most often %s, for a %s request)",
                             (unsigned long long)count, evs, a3, a4);
            if (k < 0)
                seg[0] = '\0';
            if (cc) {
                pair cm = pair_mode(cp, cc);
                fmt_size(cm.a, a1, sizeof a1);
                fmt_size(cm.b, a2, sizeof a2);
                fmt_events(cf, cl, evc, sizeof evc);
                if (cc == 1)
                    k = snprintf(out, cap,
                                 "a cached %s block split by a %s request at %s left no free "
                                 "block large enough later, so the current settings took %s "
                                 "(peak reserved %s; "
                                 "%s with the answer): %s.",
                                 a1, a2, evc, seg, p1, p2, mech);
                else
                    k = snprintf(out, cap,
                                 "%llu cached blocks split by smaller requests at %s (most "
                                 "often a %s block by a %s request) left no free block large "
                                 "enough later, so the current settings took %s (peak reserved "
                                 "%s; %s with the "
                                 "answer): %s.",
                                 (unsigned long long)cc, evc, a1, a2, seg, p1,
                                 p2, mech);
            } else {
                k = snprintf(out, cap,
                             "the current settings took %s where the answer reused cached "
                             "memory (peak reserved "
                             "%s; %s with the answer): %s.",
                             seg, p1, p2, mech);
            }
            if (k < 0)
                out[0] = '\0';
            free(cp);
            free(xp);
        }
    }
    if (!out[0] && to_mincap) {
        /* no difference on the user's device: the difference is at the
         * answer's minimum capacity */
        hist ho;
        sublet_replay_result ro;
        int oko = record_run(ix, from, to_mincap, prelude, 1, &ho, &ro);
        if (oko && ro.ooms && ro.first_oom_event < n) {
            uint64_t e = ro.first_oom_event;
            char dv[32], rq[32], fr[32], lg[32], sp[32];
            fmt_size(to_mincap, dv, sizeof dv);
            fmt_size(ev[e].size, rq, sizeof rq);
            fmt_size(ho.frag.free_bytes, fr, sizeof fr);
            fmt_size(ho.frag.largest_free_block, lg, sizeof lg);
            fmt_size(ho.frag.inactive_split_bytes, sp, sizeof sp);
            if (ho.have_frag && ho.frag.free_bytes)
                snprintf(out, cap,
                         "on a %s device (the answer's minimum) the current settings run out at "
                         "event %llu, a %s "
                         "request, while %s sits cached in %llu free blocks (the largest %s; "
                         "%s of it inside split segments): %s.",
                         dv, (unsigned long long)e, rq, fr,
                         (unsigned long long)ho.frag.free_blocks, lg, sp, mech);
            else
                snprintf(out, cap,
                         "on a %s device (the answer's minimum) the current settings run out at "
                         "event %llu, a %s "
                         "request: %s.",
                         dv, (unsigned long long)e, rq, mech);
        } else if (oko && okf && okt) {
            uint64_t cf = rf.device_ops.segment_allocs + rf.device_ops.va_maps,
                     ct = rt.device_ops.segment_allocs + rt.device_ops.va_maps;
            if (cf > ct)
                snprintf(out, cap,
                         "no fragmentation to fix: the answer needs %llu device allocations "
                         "where the current settings need %llu (%s).",
                         (unsigned long long)ct, (unsigned long long)cf, mech);
        }
        free(ho.e);
        sublet_replay_result_free(&ro);
    }
    free(sf);
    free(st);
    free(hf.e);
    free(ht.e);
    sublet_replay_result_free(&rf);
    sublet_replay_result_free(&rt);
    sublet_trace_free(ix);
}

/* ---- sublet_tune ------------------------------------------------------------------ */

static size_t knobs_index(const knobs *all, size_t n, const knobs *k)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&all[i], k, sizeof *k) == 0)
            return i;
    return NONE;
}

static void fill_point(const tctx *x, const point *p, sublet_tune_eval *e)
{
    const cand *c = &x->c[p->c];
    memset(e, 0, sizeof *e);
    snprintf(e->conf, sizeof e->conf, "%s", c->conf);
    e->pytorch = c->pytorch;
    e->min_capacity_bytes = p->m;
    for (size_t t = 0; t < x->nt; t++)
        if (x->f[t].peak_requested > e->peak_requested_bytes)
            e->peak_requested_bytes = x->f[t].peak_requested;
    e->overhead = e->peak_requested_bytes
                      ? (double)p->m / (double)e->peak_requested_bytes - 1.0
                      : 0.0;
    e->cost_us = c->cost;
    e->device_calls = c->calls;
    e->retries = c->retries;
    e->peak_reserved_bytes = c->peak_reserved;
    e->fits = c->fits;
    e->ntraces = x->nt;
}

typedef struct final_job {
    const tctx *x;
    const char *conf[3][64];
    sublet_tune_eval *ev[3];
    sublet_status st[3][64];
    char err[3][64][256];
    uint64_t replays[3][64];
} final_job;

static void final_fn(void *arg, size_t i)
{
    final_job *j = arg;
    size_t which = i / j->x->nt, t = i % j->x->nt;
    uint64_t rp = 0;
    j->st[which][t] = eval_one(&j->x->f[t], j->conf[which][t], j->x->dev, j->x->o,
                               &j->ev[which]->per_trace[t], &rp, j->err[which][t],
                               sizeof j->err[which][t]);
    j->replays[which][t] = rp;
}

sublet_status sublet_tune(const sublet_trace *const *traces, size_t n, const sublet_tune_options *o,
                          sublet_tune_result *r)
{
    if (!r)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    if (!traces || !n || n > 64) {
        r->status = SUBLET_ERR_INVALID_ARGUMENT;
        snprintf(r->error, sizeof r->error, "%s", !n ? "no traces" : "at most 64 traces");
        return r->status;
    }
    for (size_t i = 0; i < n; i++)
        if (!traces[i]) {
            r->status = SUBLET_ERR_INVALID_ARGUMENT;
            snprintf(r->error, sizeof r->error, "trace %zu is NULL", i);
            return r->status;
        }
    sublet_tune_options def;
    if (!o) {
        sublet_tune_options_init(&def);
        o = &def;
    }
    sublet_tune_options opt = *o;
    if (!opt.threads)
        opt.threads = 2;
    if (!opt.resolution)
        opt.resolution = DEFAULT_RESOLUTION;
    if (!(opt.band > 0))
        opt.band = DEFAULT_BAND;

    tctx x;
    memset(&x, 0, sizeof x);
    x.o = &opt;
    x.nt = n;
    x.res = opt.resolution;
    x.dev = opt.device_memory ? opt.device_memory : default_device(traces, n);
    pthread_mutex_init(&x.lock, NULL);
    r->ntraces = n;
    r->device_memory = x.dev;
    knobs *all = NULL;
    sizes sz = {0};
    walk wp, ws;
    memset(&wp, 0, sizeof wp);
    memset(&ws, 0, sizeof ws);
    x.f = calloc(n, sizeof *x.f);
    if (!x.f)
        goto nomem;
    for (size_t t = 0; t < n; t++) {
        sublet_status st = facts_get(traces[t], &x.f[t]);
        if (st != SUBLET_OK) {
            x.st = st;
            snprintf(x.err, sizeof x.err, "trace %zu: %s", t, sublet_status_text(st));
            goto out;
        }
    }

    /* 1. the space, and the settings that replay identically */
    size_t nall = space_knobs(0, NULL);
    all = malloc(nall * sizeof *all);
    x.c = calloc(nall, sizeof *x.c);
    x.ts_all = calloc(nall * n, sizeof *x.ts_all);
    if (!all || !x.c || !x.ts_all || !collect_sizes(&x, &sz))
        goto nomem;
    space_knobs(0, all);
    x.nc = nall;
    unsigned ru_cls[N_RU];
    uint64_t max_round[N_RU], max_alloc[N_RU];
    roundup_classes(&sz, ru_cls, max_round, max_alloc);
    uint64_t max_pre = 0;
    for (size_t t = 0; t < n; t++)
        if (x.f[t].max_pre_segment > max_pre)
            max_pre = x.f[t].max_pre_segment;
    uint64_t lb[N_RU][64];
    for (unsigned q = 0; q < N_RU; q++) {
        if (ru_cls[q] != q)
            continue;
        char conf[128] = "";
        if (q)
            snprintf(conf, sizeof conf, "roundup_power2_divisions:%s", ru_conf[q]);
        sublet_settings s;
        settings_of(conf, &s);
        for (size_t t = 0; t < n; t++)
            lb[q][t] = rounding_bound(&x.f[t], &s);
    }
    size_t distinct = 0;
    for (size_t i = 0; i < nall; i++) {
        cand *c = &x.c[i];
        c->k = all[i];
        knobs_conf(&c->k, c->conf, sizeof c->conf);
        c->pytorch = c->k.base != BASE_STITCH;
        c->ts = &x.ts_all[i * n];
        knobs kk = c->k;
        kk.ru = (unsigned char)ru_cls[kk.ru];
        uint64_t maxseg = max_alloc[kk.ru] > max_pre ? max_alloc[kk.ru] : max_pre;
        if (kk.ms && kk.base == BASE_NATIVE && (uint64_t)ms_mb[kk.ms] * MIB > maxseg)
            kk.ms = kk.nsr = 0; /* no block can be oversize */
        if (kk.ms && max_round[kk.ru] < (uint64_t)ms_mb[kk.ms] * MIB)
            kk.nsr = 0; /* no request is oversize */
        c->rep = knobs_index(all, nall, &kk);
        if (c->rep == NONE)
            c->rep = i;
        knobs sib = c->k;
        sib.gc = 0;
        c->gc_sibling = knobs_index(all, nall, &sib);
        for (size_t t = 0; t < n; t++) {
            tstate *s = &c->ts[t];
            s->ok_at = NONE;
            s->lb = lb[kk.ru][t];
            if (c->k.gc)
                s->lb += s->lb / 1000; /* the limit is 0.999 of the device */
        }
        if (c->rep == i)
            distinct++;
    }
    r->space = nall;
    r->distinct = distinct;
    x.replays_est = distinct * (2 * n + 1);

    /* 2. every distinct setting on the user's device (collector-free ones first:
     * a collector that never fires replays like its sibling) */
    task *tk = calloc(distinct ? distinct : 1, sizeof *tk);
    drun *tk_d = calloc((distinct ? distinct : 1) * n, sizeof *tk_d);
    uint64_t *tk_e = calloc((distinct ? distinct : 1) * n, sizeof *tk_e);
    if (!tk || !tk_d || !tk_e) {
        free(tk);
        free(tk_d);
        free(tk_e);
        goto nomem;
    }
    for (int pass = 0; pass < 2 && x.st == SUBLET_OK; pass++) {
        size_t nt = 0;
        for (size_t i = 0; i < nall; i++) {
            cand *c = &x.c[i];
            if (c->rep != i || (pass == 0) != (c->k.gc == 0))
                continue;
            if (pass == 1) {
                const cand *sib = &x.c[x.c[c->gc_sibling].rep];
                double thr_frac = strtod(gc_conf[c->k.gc], NULL);
                uint64_t allowed = (uint64_t)(0.999 * (double)x.dev);
                uint64_t thr = (uint64_t)(thr_frac * (double)allowed);
                int same = sib->costed;
                for (size_t t = 0; t < n && same; t++)
                    same = sib->ts[t].d.fits && sib->ts[t].d.calls.retries == 0 &&
                           sib->ts[t].d.peak_reserved <= thr;
                if (same) {
                    c->costed = 1;
                    c->cost = sib->cost;
                    c->fits = sib->fits;
                    c->calls = sib->calls;
                    c->retries = sib->retries;
                    c->peak_reserved = sib->peak_reserved;
                    for (size_t t = 0; t < n; t++) {
                        c->ts[t].d = sib->ts[t].d;
                        c->ts[t].errors_allowed = sib->ts[t].errors_allowed;
                        c->ts[t].ok_at = x.dev;
                    }
                    continue;
                }
            }
            memset(&tk[nt], 0, sizeof tk[nt]);
            tk[nt].c = i;
            tk[nt].kind = 0;
            tk[nt].d = &tk_d[nt * n];
            tk[nt].errors_allowed = &tk_e[nt * n];
            nt++;
        }
        run_tasks(&x, tk, nt);
    }
    free(tk);
    free(tk_d);
    free(tk_e);
    if (x.st != SUBLET_OK)
        goto out;

    /* 3–4. the walks */
    int wr = walk_family(&x, 1, &wp);
    if (wr == 0)
        goto out;
    int wr2 = walk_family(&x, 0, &ws);
    if (wr2 == 0)
        goto out;
    if (wr < 0 || wr2 < 0) {
        x.st = SUBLET_ERR_OOM;
        snprintf(x.err, sizeof x.err,
                 "no setting of the search space runs the trace%s on any device tried",
                 n > 1 ? "s" : "");
        goto out;
    }
    r->pareto_pytorch = calloc(wp.np, sizeof *r->pareto_pytorch);
    r->pareto_sublet = calloc(ws.np, sizeof *r->pareto_sublet);
    if (!r->pareto_pytorch || !r->pareto_sublet)
        goto nomem;
    for (size_t i = 0; i < wp.np; i++)
        fill_point(&x, &wp.pareto[i], &r->pareto_pytorch[i]);
    r->npareto_pytorch = wp.np;
    for (size_t i = 0; i < ws.np; i++)
        fill_point(&x, &ws.pareto[i], &r->pareto_sublet[i]);
    r->npareto_sublet = ws.np;
    for (size_t i = 0; i < nall; i++) {
        const cand *c = &x.c[i];
        if (c->rep != i)
            continue;
        for (size_t t = 0; t < n; t++)
            if (c->ts[t].lb > ws.best - x.res) {
                r->bound_pruned++;
                break;
            }
    }

    /* 5. the answers and the current settings, evaluated plainly */
    {
        final_job *j = calloc(1, sizeof *j);
        if (!j)
            goto nomem;
        j->x = &x;
        j->ev[0] = &r->current;
        j->ev[1] = &r->pytorch;
        j->ev[2] = &r->sublet;
        r->current_recorded = 1;
        for (size_t t = 0; t < n; t++) {
            const char *cur = opt.current && opt.current[t] ? opt.current[t] : NULL;
            if (!cur) {
                cur = sublet_trace_settings(traces[t]);
                if (!cur) {
                    r->current_recorded = 0;
                    cur = "";
                }
            }
            j->conf[0][t] = cur;
            j->conf[1][t] = x.c[wp.answer].conf;
            j->conf[2][t] = x.c[ws.answer].conf;
        }
        int fail = 0;
        for (int w = 0; w < 3; w++) {
            j->ev[w]->ntraces = n;
            j->ev[w]->per_trace = calloc(n, sizeof *j->ev[w]->per_trace);
            fail |= !j->ev[w]->per_trace;
            snprintf(j->ev[w]->conf, sizeof j->ev[w]->conf, "%s", j->conf[w][0]);
            j->ev[w]->pytorch = conf_is_pytorch(j->conf[w][0]);
        }
        if (fail) {
            free(j);
            goto nomem;
        }
        parallel_for(opt.threads, 3 * n, final_fn, j);
        for (int w = 0; w < 3 && x.st == SUBLET_OK; w++)
            for (size_t t = 0; t < n; t++) {
                x.replays += j->replays[w][t];
                if (j->st[w][t] != SUBLET_OK && x.st == SUBLET_OK) {
                    x.st = j->st[w][t];
                    snprintf(x.err, sizeof x.err, "%s%s: %s", w == 0 ? "current settings " : "",
                             j->conf[w][t], j->err[w][t]);
                }
            }
        for (int w = 0; w < 3; w++)
            eval_fold(j->ev[w]);
        free(j);
        progress(&x);
        if (x.st != SUBLET_OK)
            goto out;
    }

    /* 6. what each answer fixes */
    if (opt.diagnose) {
        for (int w = 0; w < 2; w++) {
            const sublet_tune_eval *a = w == 0 ? &r->pytorch : &r->sublet;
            size_t best = 0;
            int64_t gain = INT64_MIN;
            for (size_t t = 0; t < n; t++) {
                int64_t g = (int64_t)r->current.per_trace[t].min_capacity_bytes -
                            (int64_t)a->per_trace[t].min_capacity_bytes;
                if (g > gain) {
                    gain = g;
                    best = t;
                }
            }
            const char *cur = opt.current && opt.current[best] ? opt.current[best] : NULL;
            if (!cur)
                cur = sublet_trace_settings(traces[best]) ? sublet_trace_settings(traces[best])
                                                          : "";
            char *dst = w == 0 ? r->pytorch_cause : r->sublet_cause;
            diagnose(&x.f[best], cur, a->conf, x.dev, a->per_trace[best].min_capacity_bytes,
                     opt.prelude, dst, SUBLET_TUNE_CAUSE_MAX);
            if (w == 0)
                r->pytorch_cause_trace = best;
            else
                r->sublet_cause_trace = best;
        }
    }
    goto out;

nomem:
    if (x.st == SUBLET_OK) {
        x.st = SUBLET_ERR_NO_MEMORY;
        snprintf(x.err, sizeof x.err, "out of host memory");
    }
out:
    r->replays = x.replays;
    r->status = x.st;
    if (x.st != SUBLET_OK)
        snprintf(r->error, sizeof r->error, "%s", x.err);
    walk_free(&wp);
    walk_free(&ws);
    free(sz.v);
    free(all);
    free(x.c);
    free(x.ts_all);
    free(x.f);
    pthread_mutex_destroy(&x.lock);
    r->seconds = now_s() - t0;
    return r->status;
}
