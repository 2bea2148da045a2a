/* sublet — the tuner's replays: one replay of a trace under a setting, the
 * cost run on the user's device (minus the calls that rebuild the prelude),
 * the probe that stops at the first OOM, the plain evaluation of one
 * setting (sublet_tune_evaluate), and the parallel for the search runs them
 * on. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "tune/tune_internal.h"

/* ---- per trace facts ---------------------------------------------------------------- */

/* The options of one replay of trace f under conf on a device of `cap`
 * bytes (vbuf: TN_CONF_V_MAX bytes for the settings). */
void tn_replay_init(const trun *w, int stop_on_oom, uint64_t stop_after, sublet_replay_options *o,
                    char *vbuf, size_t vcap)
{
    sublet_replay_options_init(o);
    o->conf = tn_conf_v(w->f->version, w->conf, vbuf, vcap);
    o->device_memory = w->cap;
    o->stop_on_oom = stop_on_oom;
    o->stop_after = stop_after;
    o->prelude = w->prelude;
}

/* One replay of trace f under conf on a device of `cap` bytes. */
sublet_status tn_replay(const trun *w, int stop_on_oom, uint64_t stop_after,
                        sublet_replay_result *r, char *err, size_t err_cap)
{
    sublet_replay_options o;
    char vbuf[TN_CONF_V_MAX];
    tn_replay_init(w, stop_on_oom, stop_after, &o, vbuf, sizeof vbuf);
    return tn_replay_options(w->f, &o, r, err, err_cap);
}

const char *tn_conf_v(const char *version, const char *conf, char *buf, size_t cap)
{
    if (!version || !*version)
        return conf;
    int n = snprintf(buf, cap, "pytorch_version:%s%s", version, *conf ? "," : "");
    if (n < 0 || (size_t)n >= cap)
        return conf;
    /* A release without the option per_process_memory_fraction (before 2.9)
     * gets the same fraction through the call it stands for,
     * set_per_process_memory_fraction (sublet's memory_fraction option). */
    double f;
    if (tn_conf_release(version, conf, SUBLET_TUNE_FOR_SUBLET, buf + n, cap - (size_t)n, &f) != 0)
        return conf;
    return buf;
}

/* Page sizes of the virtual-memory modes of conf (0: conf uses cudaMalloc). */
void tn_page_sizes(const char *conf, uint64_t *small_page, uint64_t *large_page)
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

/* The calls made between the device's calls ops0 with statistics st0 (after
 * the prelude) and ops with st. */
static void calls_of(const char *conf, const sublet_sim_ops *ops, const sublet_stats *st,
                     const sublet_sim_ops *ops0, const sublet_stats *st0, sublet_tune_calls *c)
{
    uint64_t sp, lp;
    tn_page_sizes(conf, &sp, &lp);
    memset(c, 0, sizeof *c);
    c->segment_allocs = tn_sub0(ops->segment_allocs, ops0->segment_allocs);
    c->segment_frees = tn_sub0(ops->segment_frees, ops0->segment_frees);
    c->va_reserves = tn_sub0(ops->va_reserves, ops0->va_reserves);
    c->va_releases = tn_sub0(ops->va_releases, ops0->va_releases);
    c->va_maps = tn_sub0(ops->va_maps, ops0->va_maps);
    c->va_unmaps = tn_sub0(ops->va_unmaps, ops0->va_unmaps);
    c->retries = tn_sub0((uint64_t)st->num_alloc_retries, (uint64_t)st0->num_alloc_retries);
    const sublet_stat *res = st->reserved_bytes, *res0 = st0->reserved_bytes;
    if (sp) {
        uint64_t sa = tn_sub0((uint64_t)res[SUBLET_POOL_SMALL].allocated,
                              (uint64_t)res0[SUBLET_POOL_SMALL].allocated);
        uint64_t la = tn_sub0((uint64_t)res[SUBLET_POOL_LARGE].allocated,
                              (uint64_t)res0[SUBLET_POOL_LARGE].allocated);
        uint64_t sf = tn_sub0((uint64_t)res[SUBLET_POOL_SMALL].freed,
                              (uint64_t)res0[SUBLET_POOL_SMALL].freed);
        uint64_t lf = tn_sub0((uint64_t)res[SUBLET_POOL_LARGE].freed,
                              (uint64_t)res0[SUBLET_POOL_LARGE].freed);
        c->map_pages = (sa + sp - 1) / sp + (la + lp - 1) / lp;
        c->unmap_pages = (sf + sp - 1) / sp + (lf + lp - 1) / lp;
    } else {
        c->malloc_bytes = tn_sub0((uint64_t)res[SUBLET_POOL_ALL].allocated,
                                  (uint64_t)res0[SUBLET_POOL_ALL].allocated);
    }
}

void tn_calls_between(const char *conf, const sublet_replay_result *r,
                      const sublet_replay_result *r0, sublet_tune_calls *c)
{
    calls_of(conf, &r->device_ops, &r->stats_end, &r0->device_ops, &r0->stats_end, c);
}

/* The cost run's bound (tn_cost_run's limit): the cost so far, every
 * stop_if_every rows; a count only grows, so a cost past the limit stays
 * past it. */
typedef struct cost_bound {
    const char *conf;
    const sublet_replay_result *r0;
    const sublet_tune_cost_model *m;
    double limit;
    sublet_stats st;
} cost_bound;

static int cost_past(void *user, sublet_allocator *a, const sublet_sim_ops *ops)
{
    cost_bound *b = user;
    sublet_tune_calls c;
    sublet_stats_read(a, &b->st);
    calls_of(b->conf, ops, &b->st, &b->r0->device_ops, &b->r0->stats_end, &c);
    return sublet_tune_calls_cost(&c, b->m) > b->limit;
}

/* The cost replay: the whole trace on `cap` bytes, minus the prelude's
 * calls; stopped (out->over) once its cost passes `limit` (INFINITY: never). */
sublet_status tn_cost_run(const trun *w, const sublet_tune_cost_model *m, double limit, drun *out,
                          uint64_t *replays, char *err, size_t err_cap)
{
    const tfacts *f = w->f;
    const char *conf = w->conf;
    memset(out, 0, sizeof *out);
    out->first_oom = out->same_from = NONE;
    sublet_replay_result r, r0;
    memset(&r0, 0, sizeof r0);
    if (f->npre) { /* the prelude's own calls, first: the bound counts without them */
        sublet_status st0 = tn_replay(w, 0, f->npre - 1, &r0, NULL, 0);
        (*replays)++;
        if (st0 != SUBLET_OK) {
            sublet_replay_result_free(&r0);
            memset(&r0, 0, sizeof r0);
        }
    }
    sublet_replay_options o;
    char vbuf[TN_CONF_V_MAX];
    tn_replay_init(w, 0, SUBLET_REPLAY_ALL, &o, vbuf, sizeof vbuf);
    cost_bound *b = NULL;
    if (limit < INFINITY) {
        b = malloc(sizeof *b);
        if (!b) {
            sublet_replay_result_free(&r0);
            return sl_fail(err, err_cap, SUBLET_ERR_NO_MEMORY, "out of memory");
        }
        *b = (cost_bound){.conf = conf, .r0 = &r0, .m = m, .limit = limit};
        o.stop_if = cost_past;
        o.stop_if_user = b;
    }
    sublet_status st = tn_replay_options(f, &o, &r, err, err_cap);
    free(b);
    (*replays)++;
    if (st != SUBLET_OK && st != SUBLET_ERR_OOM && st != SUBLET_ERR_DEVICE_OOM) {
        sublet_replay_result_free(&r);
        sublet_replay_result_free(&r0);
        return st;
    }
    if (st != SUBLET_OK) { /* the prelude does not fit this device */
        out->fits = 0;
        out->ooms = 1;
        sublet_replay_result_free(&r);
        sublet_replay_result_free(&r0);
        return SUBLET_OK;
    }
    sublet_tune_calls *c = &out->calls;
    tn_calls_between(conf, &r, &r0, c);
    sublet_replay_result_free(&r0);
    out->over = r.stopped_early;
    out->fits = r.ooms == 0;
    out->ooms = r.ooms;
    out->first_oom = r.first_oom_event;
    out->errors = r.errors;
    out->peak_reserved = r.peak_reserved_bytes;
    out->segments = c->segment_allocs + c->va_maps;
    out->cost = sublet_tune_calls_cost(c, m);
    out->events = r.events;
    out->same_from = out->fits && !out->over ? r.same_from : NONE;
    sublet_replay_result_free(&r);
    return SUBLET_OK;
}

static int probe_unwanted(void *user, sublet_allocator *a, const sublet_sim_ops *ops)
{
    (void)a;
    (void)ops;
    const tn_unwanted *u = user;
    return u->fn(u->user);
}

/* A probe: does trace f run on `cap` bytes without an OOM (and without more
 * row errors than the reference)?  Stops at the first OOM. */
sublet_status tn_probe_run(const trun *w, uint64_t errors_allowed, const tn_unwanted *unwanted,
                           int *ok, int *stopped, uint64_t *same_from, uint64_t *events,
                           char *err, size_t err_cap)
{
    sublet_replay_options o;
    char vbuf[TN_CONF_V_MAX];
    tn_replay_init(w, 1, SUBLET_REPLAY_ALL, &o, vbuf, sizeof vbuf);
    if (unwanted && unwanted->fn) {
        o.stop_if = probe_unwanted;
        o.stop_if_user = (void *)unwanted;
        o.stop_if_every = 512; /* an atomic load: asked often, it frees the thread soon */
    }
    sublet_replay_result r;
    sublet_status st = tn_replay_options(w->f, &o, &r, err, err_cap);
    *stopped = st == SUBLET_OK && r.stopped_early;
    *ok = st == SUBLET_OK && !*stopped && r.ooms == 0 && r.errors <= errors_allowed;
    *same_from = *ok ? r.same_from : NONE;
    if (events)
        *events += r.events;
    sublet_replay_result_free(&r);
    if (st == SUBLET_ERR_OOM || st == SUBLET_ERR_DEVICE_OOM)
        st = SUBLET_OK; /* the prelude does not fit: a failure to run */
    return st;
}

/* Bytes of the big device used as the reference when the user's is too
 * small (as sublet_replay_min_capacity). */
uint64_t tn_big_device(const tfacts *f)
{
    uint64_t b = f->recorded_reserved > f->peak_requested ? f->recorded_reserved
                                                          : f->peak_requested;
    return b * 4 + GIB;
}

/* ---- the exact, plain evaluation ------------------------------------------------------ */

void tn_eval_fold(sublet_tune_eval *e)
{
    e->min_capacity_bytes = e->peak_requested_bytes = e->peak_reserved_bytes = 0;
    e->cost_us = 0;
    e->device_calls = e->retries = 0;
    e->fits = 1;
    e->monotone = 1;
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
        e->monotone &= p->monotone;
    }
    e->overhead = e->peak_requested_bytes
                      ? (double)e->min_capacity_bytes / (double)e->peak_requested_bytes - 1.0
                      : 0.0;
}

int tn_conf_is_pytorch(const char *conf)
{
    sublet_settings s;
    sublet_settings_default(&s);
    if (sublet_settings_parse(&s, conf, NULL, 0) != SUBLET_OK)
        return 0;
    return s.policy == SUBLET_POLICY_NATIVE;
}

/* One trace, one setting: plain min capacity + cost run (from `known` when
 * the search ran it already). */
sublet_status tn_eval_one(const tfacts *f, const char *conf, uint64_t dev,
                          const sublet_tune_options *o, const drun *known,
                          sublet_tune_trace_eval *out, uint64_t *replays, char *err,
                          size_t err_cap)
{
    memset(out, 0, sizeof *out);
    out->events = f->rows;
    out->peak_requested_bytes = f->peak_requested;
    drun d;
    sublet_status st = SUBLET_OK;
    if (known)
        d = *known;
    else
        st = tn_cost_run(&(trun){f, conf, dev, o->prelude}, &o->cost, INFINITY, &d, replays, err,
                         err_cap);
    if (st != SUBLET_OK)
        return st;
    out->fits = d.fits;
    out->ooms = d.ooms;
    out->first_oom_event = d.first_oom;
    out->peak_reserved_bytes = d.peak_reserved;
    out->segments_created = d.segments;
    out->calls = d.calls;
    out->cost_us = d.cost;
    sublet_replay_options ro;
    sublet_replay_options_init(&ro);
    char vbuf[TN_CONF_V_MAX];
    ro.conf = tn_conf_v(f->version, conf, vbuf, sizeof vbuf);
    ro.prelude = o->prelude;
    /* the probes the cost run answers, and those the search's own clean
     * runs do, are not replayed; at_min is not used */
    sublet_mincap_result m;
    sublet_trace_stream *rd = NULL;
    st = tn_reader(f, &rd);
    if (st != SUBLET_OK)
        return sl_fail(err, err_cap, st, "cannot read the trace again: %s",
                       sublet_status_text(st));
    st = sublet_replay_min_capacity_stream_ex(rd, &ro,
                                              o->resolution ? o->resolution : DEFAULT_RESOLUTION,
                                              SUBLET_MINCAP_INFER | SUBLET_MINCAP_NO_AT_MIN,
                                              d.same_from, &m, err, err_cap);
    sublet_trace_stream_close(rd);
    *replays += m.replays;
    if (st == SUBLET_OK) {
        out->min_capacity_bytes = m.min_capacity_bytes;
        out->overhead = m.overhead;
        out->monotone = m.monotone;
        out->smallest_ok_bytes = m.smallest_ok_bytes;
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
    out->pytorch = tn_conf_is_pytorch(conf);
    out->ntraces = n;
    out->per_trace = calloc(n, sizeof *out->per_trace);
    if (!out->per_trace)
        return SUBLET_ERR_NO_MEMORY;
    tn_sources src;
    tfacts *f;
    sublet_status st = tn_facts_of_traces(traces, n, o->pytorch_version, &src, &f, err, err_cap);
    if (st != SUBLET_OK) {
        sublet_tune_eval_free(out);
        return st;
    }
    uint64_t dev = o->device_memory ? o->device_memory : tn_default_device(f, n);
    uint64_t replays = 0;
    for (size_t i = 0; i < n && st == SUBLET_OK; i++)
        st = tn_eval_one(&f[i], conf, dev, o, NULL, &out->per_trace[i], &replays, err, err_cap);
    free(f);
    tn_sources_close(&src);
    if (st != SUBLET_OK) {
        sublet_tune_eval_free(out);
        return st;
    }
    tn_eval_fold(out);
    return SUBLET_OK;
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

unsigned tn_threads(unsigned threads)
{
    if (threads)
        return threads > MAX_THREADS ? MAX_THREADS : threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (unsigned)n;
}

void tn_parallel_for(unsigned threads, size_t n, void (*fn)(void *, size_t), void *ctx)
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

typedef struct pwatch {
    pfor p;
    pthread_cond_t cv;
    size_t *fin, nfin; /* the tasks finished, in the order they did */
} pwatch;

static void *pwatch_worker(void *arg)
{
    pwatch *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->p.lock);
        size_t i = w->p.next++;
        pthread_mutex_unlock(&w->p.lock);
        if (i >= w->p.n)
            return NULL;
        w->p.fn(w->p.ctx, i);
        pthread_mutex_lock(&w->p.lock);
        w->fin[w->nfin++] = i;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->p.lock);
    }
}

void tn_parallel_for_watch(unsigned threads, size_t n, void (*fn)(void *, size_t), void *ctx,
                           void (*done)(void *, size_t), void *dctx)
{
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads > n)
        threads = (unsigned)n;
    pwatch w = {.p = {.n = n, .next = 0, .fn = fn, .ctx = ctx}};
    w.fin = threads > 1 ? malloc(n * sizeof *w.fin) : NULL;
    pthread_t th[MAX_THREADS];
    unsigned started = 0;
    if (w.fin) {
        pthread_mutex_init(&w.p.lock, NULL);
        pthread_cond_init(&w.cv, NULL);
        for (unsigned i = 0; i < threads; i++)
            if (pthread_create(&th[started], NULL, pwatch_worker, &w) == 0)
                started++;
    }
    if (!started) { /* one thread, or none could start: in turn, here */
        for (size_t i = 0; i < n; i++) {
            fn(ctx, i);
            done(dctx, i);
        }
    } else {
        pthread_mutex_lock(&w.p.lock);
        for (size_t rd = 0; rd < n; rd++) {
            while (rd == w.nfin)
                pthread_cond_wait(&w.cv, &w.p.lock);
            size_t i = w.fin[rd];
            pthread_mutex_unlock(&w.p.lock);
            done(dctx, i);
            pthread_mutex_lock(&w.p.lock);
        }
        pthread_mutex_unlock(&w.p.lock);
        for (unsigned i = 0; i < started; i++)
            pthread_join(th[i], NULL);
    }
    if (w.fin) {
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.p.lock);
    }
    free(w.fin);
}
