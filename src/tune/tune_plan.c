/* sublet — the warm-up plan (sublet_tune_plan_derive, sublet/tune.h): the
 * segments to reserve at start so that a recorded run makes no device
 * allocation after them, found by replay to a fixed point.
 *
 * A round replays every trace with the plan so far reserved first (the
 * `warmup` option, applied by sublet_reserve when the replay's allocator is
 * created) and reads what the allocator holds at the end on the default
 * stream, leaving out the segments a mid-run trace adopted as its prelude:
 * under the native policy each segment's (pool, size), with expandable
 * segments the pages mapped per pool.  The next plan holds, per (pool, size),
 * the most that the plan or any trace held.  Round 0 runs without a plan, so
 * the first plan is what the run itself created; later rounds add what a run
 * that starts from the plan still creates (best fit treats segments made
 * ahead differently from segments made on demand).  The plan only grows, so
 * it settles; at most 8 rounds.  The last round's replays are the
 * verification: the device allocations they make beyond the plan's own are
 * counted (0 when the plan is complete), and what keeps them from 0 is said:
 * segments the run gives back to the device and allocates again, segments of
 * other streams, a device the plan does not fit.
 *
 * Costs follow the cost model (the calls after the prelude); the plan's own
 * reservations are priced once, as they happen once per process. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_internal.h"

#define MAX_ROUNDS 8

typedef struct kcount { /* count segments of size bytes in pool (expandable: bytes, count 1) */
    int pool;
    uint64_t size, count;
} kcount;

typedef struct kset {
    kcount *v;
    size_t n, cap;
    int oom;
} kset;

static kcount *kset_find(kset *s, int pool, uint64_t size)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].pool == pool && s->v[i].size == size)
            return &s->v[i];
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 16;
        kcount *nv = realloc(s->v, nc * sizeof *nv);
        if (!nv) {
            s->oom = 1;
            return NULL;
        }
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n] = (kcount){pool, size, 0};
    return &s->v[s->n++];
}

static void kset_free(kset *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Large pool first, larger first: the order the plan reserves in. */
static int cmp_kcount(const void *a, const void *b)
{
    const kcount *x = a, *y = b;
    if (x->pool != y->pool)
        return x->pool == SUBLET_POOL_LARGE ? -1 : 1;
    return (x->size < y->size) - (x->size > y->size);
}

static int kset_equal(const kset *a, const kset *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        size_t j = 0;
        while (j < b->n && !(b->v[j].pool == a->v[i].pool && b->v[j].size == a->v[i].size))
            j++;
        if (j == b->n || b->v[j].count != a->v[i].count)
            return 0;
    }
    return 1;
}

/* ---- one replay, and what it left --------------------------------------------------------- */

/* What the allocator holds when a replay ends. */
typedef struct fin {
    const uint64_t *adopted; /* sorted addresses of the segments the prelude adopted */
    size_t nadopted;
    kset held;               /* default stream, adopted ones left out: native (pool, size)
                              * counts; expandable (pool, 0) with count = mapped bytes */
    uint64_t other_segments; /* held on other streams */
} fin;

static int is_adopted(const fin *f, uint64_t addr)
{
    size_t i = tn_lower_bound(f->adopted, f->nadopted, addr);
    return i < f->nadopted && f->adopted[i] == addr;
}

static void seg_cb(void *user, const sublet_segment_view *v)
{
    fin *f = user;
    if (!v->is_expandable && is_adopted(f, v->addr))
        return;
    if (v->stream != 0) {
        f->other_segments++;
        return;
    }
    int pool = v->is_small ? SUBLET_POOL_SMALL : SUBLET_POOL_LARGE;
    kcount *k = kset_find(&f->held, pool, v->is_expandable ? 0 : v->total_size);
    if (k) /* an expandable segment shows as one view per mapped run: they add up */
        k->count += v->is_expandable ? v->total_size : 1;
}

static void on_finish(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)last_event, (void)st;
    if (a)
        sublet_segments_walk(a, seg_cb, user);
}

/* One trace under one plan. */
typedef struct meas {
    sublet_status st;
    char err[256];
    int created; /* an allocator with the plan could be created: the plan fits */
    uint64_t plan_allocs, plan_bytes;
    sublet_tune_calls plan_calls;
    int fits;
    uint64_t errors, peak_reserved;
    uint64_t allocs;         /* device allocations after the prelude (cudaMalloc, maps) */
    uint64_t prelude_allocs; /* allocations rebuilding the prelude, beyond the plan's */
    uint64_t frees;          /* device frees during the run */
    uint64_t empty_caches;   /* empty_cache() calls the trace makes */
    sublet_tune_calls calls;
    double cost;
    fin fin;
    uint64_t replays;
} meas;

static void measure(const tfacts *f, const char *conf, int has_plan, uint64_t dev,
                    const sublet_tune_options *o, meas *m)
{
    sublet_replay_result base, zero, r, r0;
    char vbuf[TN_CONF_V_MAX];
    const char *vconf = tn_conf_v(f->version, conf, vbuf, sizeof vbuf);
    memset(&base, 0, sizeof base);
    memset(&zero, 0, sizeof zero);
    if (has_plan) { /* the plan alone: what creating the allocator does */
        sublet_backend *sim = NULL;
        sublet_allocator *a = NULL;
        m->st = sublet_sim_create(dev, &sim);
        if (m->st != SUBLET_OK)
            return;
        sublet_options ao = {.backend = sim, .device = 0, .conf = vconf};
        sublet_status st = sublet_allocator_create(&ao, &a, m->err, sizeof m->err);
        if (st == SUBLET_OK) {
            sublet_stats_read(a, &base.stats_end);
            sublet_sim_ops_read(sim, &base.device_ops);
            sublet_allocator_destroy(a);
        }
        sublet_backend_destroy(sim);
        if (st == SUBLET_ERR_OOM)
            return; /* created = 0: the plan does not fit the device */
        if (st != SUBLET_OK) {
            m->st = st;
            return;
        }
    }
    m->created = 1;
    m->plan_allocs = (uint64_t)base.stats_end.num_device_alloc;
    m->plan_bytes = (uint64_t)base.stats_end.reserved_bytes[SUBLET_POOL_ALL].current;
    tn_calls_between(conf, &base, &zero, &m->plan_calls);

    sublet_replay_options ro;
    sublet_replay_options_init(&ro);
    ro.conf = vconf;
    ro.device_memory = dev;
    ro.prelude = o->prelude;
    ro.on_finish = on_finish;
    ro.finish_user = &m->fin;
    sublet_status st = tn_replay_options(f, &ro, &r, m->err, sizeof m->err);
    m->replays++;
    sublet_replay_result_free(&r);
    if (st == SUBLET_ERR_OOM || st == SUBLET_ERR_DEVICE_OOM)
        return; /* the prelude does not fit: fits = 0 */
    if (st != SUBLET_OK) {
        m->st = st;
        return;
    }
    r0 = base;
    if (f->npre) {
        if (tn_replay(&(trun){f, conf, dev, o->prelude}, 0, f->npre - 1, &r0, NULL, 0) != SUBLET_OK)
            r0 = base;
        sublet_replay_result_free(&r0);
        m->replays++;
    }
    tn_calls_between(conf, &r, &r0, &m->calls);
    m->cost = sublet_tune_calls_cost(&m->calls, &o->cost);
    m->fits = r.ooms == 0;
    m->errors = r.errors;
    m->peak_reserved = r.peak_reserved_bytes;
    m->allocs = m->calls.segment_allocs + m->calls.va_maps;
    m->prelude_allocs = tn_sub0((uint64_t)r0.stats_end.num_device_alloc, m->plan_allocs);
    m->empty_caches = r.empty_caches;
    m->frees = tn_sub0((uint64_t)r.stats_end.num_device_free,
                       (uint64_t)r0.stats_end.num_device_free);
}

typedef struct round_job {
    const tfacts *f;
    const char *conf;
    int has_plan;
    uint64_t dev;
    const sublet_tune_options *o;
    meas *m;
} round_job;

static void round_fn(void *arg, size_t i)
{
    round_job *j = arg;
    meas *m = &j->m[i];
    fin keep = m->fin;
    kset_free(&keep.held);
    memset(m, 0, sizeof *m);
    m->fin.adopted = keep.adopted;
    m->fin.nadopted = keep.nadopted;
    measure(&j->f[i], j->conf, j->has_plan, j->dev, j->o, m);
}

/* ---- the fixed point ------------------------------------------------------------------------ */

static void note_add(sublet_tune_plan *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_add(sublet_tune_plan *p, const char *fmt, ...)
{
    size_t len = strlen(p->note);
    if (len + 3 >= sizeof p->note)
        return;
    if (len)
        len += (size_t)snprintf(p->note + len, sizeof p->note - len, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->note + len, sizeof p->note - len, fmt, ap);
    va_end(ap);
}

/* The plan's entries and text from the counts (at most SUBLET_WARMUP_MAX
 * entries: the ones holding the most bytes; the rest counted in *left). */
static void plan_text(sublet_tune_plan *p, const kset *k, int expandable, uint64_t *left_segments,
                      uint64_t *left_bytes)
{
    kcount *v = malloc((k->n ? k->n : 1) * sizeof *v);
    *left_segments = *left_bytes = 0;
    p->nentries = 0;
    if (!v)
        return;
    size_t n = 0;
    for (size_t i = 0; i < k->n; i++)
        if (k->v[i].count)
            v[n++] = expandable ? (kcount){k->v[i].pool, k->v[i].count, 1} : k->v[i];
    qsort(v, n, sizeof *v, cmp_kcount);
    if (n > SUBLET_WARMUP_MAX) { /* keep the biggest holders of bytes, in plan order */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && v[j].size * v[j].count > v[j - 1].size * v[j - 1].count;
                 j--) {
                kcount t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
        for (size_t i = SUBLET_WARMUP_MAX; i < n; i++) {
            *left_segments += v[i].count;
            *left_bytes += v[i].size * v[i].count;
        }
        n = SUBLET_WARMUP_MAX;
        qsort(v, n, sizeof *v, cmp_kcount);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t c = v[i].count > UINT32_MAX ? UINT32_MAX : v[i].count;
        p->entries[p->nentries++] = (sublet_warmup_entry){v[i].pool, (uint32_t)c, v[i].size};
    }
    free(v);
    sublet_warmup_format(p->entries, p->nentries, p->option, sizeof p->option);
    snprintf(p->env, sizeof p->env, "%s%s%s", p->conf, p->conf[0] ? "," : "", p->option);
}

static void fmt(uint64_t b, char *out, size_t cap) { tn_fmt_size(b, out, cap); }

/* One derivation of a plan: its inputs, the per-trace measures and the plan
 * as it grows. */
typedef struct plan_run {
    const tfacts *f;
    size_t n;
    uint64_t dev;
    const sublet_tune_options *o;
    sublet_tune_plan *out;
    uint64_t *replays;
    int expandable;
    meas *m;
    uint64_t **ad;  /* per trace: the sorted addresses of its adopted segments */
    kset plan, next;
    char *conf_p;   /* the settings with the plan, for the next round */
    round_job job;
    int converged;
    int fits_before; /* the run fit the device without a plan */
    uint64_t left_segments, left_bytes; /* what the plan's entries leave out */
    uint64_t prelude_allocs, empty_caches; /* the last round's, over the traces */
} plan_run;

/* The settings parsed into s; else out's status and note, as returned. */
static sublet_status plan_check(const tfacts *f, size_t n, const char *conf, sublet_settings *s,
                                sublet_tune_plan *out)
{
    char err[256] = "";
    sublet_settings_default(s);
    if (!f || !n || !conf || sublet_settings_parse(s, conf, err, sizeof err) != SUBLET_OK) {
        out->status = SUBLET_ERR_INVALID_ARGUMENT;
        snprintf(out->note, sizeof out->note, "%s", err[0] ? err : "no traces or no settings");
        return out->status;
    }
    if (s->policy == SUBLET_POLICY_STITCH) {
        out->status = SUBLET_ERR_UNSUPPORTED;
        snprintf(out->note, sizeof out->note,
                 "policy:stitch maps pages where it stitches them: sublet_reserve cannot "
                 "reserve ahead for it, so it has no warm-up plan");
        return out->status;
    }
    return SUBLET_OK;
}

/* The segments trace t's prelude adopts, sorted, into p->ad[t] and its
 * measure; the largest prelude into out. */
static sublet_status plan_adopt(plan_run *p, size_t t)
{
    const tfacts *f = &p->f[t];
    const sublet_trace_event *ev = f->pre;
    uint64_t segs = 0, bytes = 0;
    uint64_t *ad = p->ad[t] = malloc((f->npre ? f->npre : 1) * sizeof *ad);
    if (!ad)
        return SUBLET_ERR_NO_MEMORY;
    for (size_t i = 0; i < f->npre; i++)
        if (ev[i].kind == SUBLET_TRACE_PRE_SEGMENT) {
            ad[segs++] = ev[i].addr;
            bytes += ev[i].size;
        }
    for (size_t i = 1; i < segs; i++) /* few hundred at most: insertion sort */
        for (size_t j = i; j > 0 && ad[j] < ad[j - 1]; j--) {
            uint64_t x = ad[j];
            ad[j] = ad[j - 1];
            ad[j - 1] = x;
        }
    p->m[t].fin.adopted = ad;
    p->m[t].fin.nadopted = segs;
    if (segs > p->out->prelude_segments)
        p->out->prelude_segments = segs;
    if (bytes > p->out->prelude_bytes)
        p->out->prelude_bytes = bytes;
    return SUBLET_OK;
}

/* One round's replays counted, and its first error into the note. */
static sublet_status plan_round_status(plan_run *p)
{
    sublet_status st = SUBLET_OK;
    for (size_t t = 0; t < p->n; t++) {
        *p->replays += p->m[t].replays;
        if (p->m[t].st != SUBLET_OK && st == SUBLET_OK) {
            st = p->m[t].st;
            snprintf(p->out->note, sizeof p->out->note, "%s",
                     p->m[t].err[0] ? p->m[t].err : sublet_status_text(st));
        }
    }
    return st;
}

/* Round 0: the run as it is. */
static void plan_before(plan_run *p)
{
    sublet_tune_plan *out = p->out;
    for (size_t t = 0; t < p->n; t++) {
        const meas *m = &p->m[t];
        if (m->peak_reserved > out->peak_reserved_bytes)
            out->peak_reserved_bytes = m->peak_reserved;
        out->device_allocs_before += m->allocs;
        out->device_calls_before += sublet_tune_calls_total(&m->calls);
        out->cost_before_us += m->cost;
        p->fits_before &= m->fits;
    }
}

/* The next plan: per (pool, size) the most the plan or any trace held. */
static void plan_next(plan_run *p)
{
    kset_free(&p->next);
    for (size_t i = 0; i < p->plan.n; i++) {
        kcount *k = kset_find(&p->next, p->plan.v[i].pool, p->plan.v[i].size);
        if (k)
            k->count = p->plan.v[i].count;
    }
    for (size_t t = 0; t < p->n; t++) {
        p->next.oom |= p->m[t].fin.held.oom;
        for (size_t i = 0; i < p->m[t].fin.held.n; i++) {
            const kcount *h = &p->m[t].fin.held.v[i];
            kcount *k = kset_find(&p->next, h->pool, h->size);
            if (k && h->count > k->count)
                k->count = h->count;
        }
    }
}

/* The rounds, to the fixed point (or MAX_ROUNDS). */
static sublet_status plan_rounds(plan_run *p)
{
    sublet_tune_plan *out = p->out;
    sublet_status st = SUBLET_OK;
    for (unsigned round = 0; st == SUBLET_OK; round++) {
        tn_parallel_for(tn_threads(p->o->threads), p->n, round_fn, &p->job);
        st = plan_round_status(p);
        if (st != SUBLET_OK)
            break;
        if (round == 0)
            plan_before(p);
        plan_next(p);
        if (p->next.oom) {
            st = SUBLET_ERR_NO_MEMORY;
            break;
        }
        if (round > 0 && kset_equal(&p->next, &p->plan)) {
            p->converged = 1;
            break;
        }
        if (round == MAX_ROUNDS || (round == 0 && p->next.n == 0))
            break;
        kset tmp = p->plan;
        p->plan = p->next;
        p->next = tmp;
        plan_text(out, &p->plan, p->expandable, &p->left_segments, &p->left_bytes);
        snprintf(p->conf_p, sizeof out->env, "%s", out->env);
        p->job.conf = p->conf_p;
        p->job.has_plan = 1;
        out->rounds = round + 1;
    }
    return st;
}

/* The last round's replays verify the plan: its totals into out. */
static void plan_verify(plan_run *p)
{
    sublet_tune_plan *out = p->out;
    out->fits = 1;
    for (size_t t = 0; t < p->n; t++) {
        const meas *x = &p->m[t];
        out->fits &= x->created && x->fits;
        if (x->peak_reserved > out->peak_reserved_with_plan)
            out->peak_reserved_with_plan = x->peak_reserved;
        out->device_allocs_after += x->allocs;
        out->device_calls_after += sublet_tune_calls_total(&x->calls);
        out->cost_after_us += x->cost;
        out->frees_after += x->frees;
        p->prelude_allocs += x->prelude_allocs;
        p->empty_caches += x->empty_caches;
        if (x->fin.other_segments > out->other_stream_segments)
            out->other_stream_segments = x->fin.other_segments;
        if (x->created && x->plan_bytes) {
            out->plan_bytes = x->plan_bytes;
            out->plan_calls = sublet_tune_calls_total(&x->plan_calls);
            out->plan_cost_us = sublet_tune_calls_cost(&x->plan_calls, &p->o->cost);
        }
    }
    if (!out->plan_bytes)
        for (size_t i = 0; i < out->nentries; i++)
            out->plan_bytes += out->entries[i].size * out->entries[i].count;
}

/* What keeps the verified run from making no device allocation, in the note. */
static void plan_notes(const plan_run *p)
{
    sublet_tune_plan *out = p->out;
    uint64_t prelude_allocs = p->prelude_allocs, empty_caches = p->empty_caches;
    char b1[32], b2[32];
    if (!out->fits) {
        fmt(p->dev, b1, sizeof b1);
        fmt(out->plan_bytes, b2, sizeof b2);
        if (p->fits_before)
            note_add(out, "with the plan (%s) the run does not fit your device (%s)", b2, b1);
        else
            note_add(out, "the run does not fit your device (%s), with or without the plan", b1);
    }
    if (out->device_allocs_after && empty_caches)
        note_add(out, "the run calls empty_cache() %llu time%s (its segment_free rows): each "
                      "gives every free cached segment back to the device, the plan's too, "
                      "so the run allocates again",
                 (unsigned long long)empty_caches, empty_caches == 1 ? "" : "s");
    else if (out->device_allocs_after && out->frees_after)
        note_add(out, "the run gives %llu segment%s back to the device (the OOM path or the "
                      "garbage collector) and allocates again",
                 (unsigned long long)out->frees_after, out->frees_after == 1 ? "" : "s");
    if (prelude_allocs)
        note_add(out, "rebuilding the prelude still makes %llu device allocation%s",
                 (unsigned long long)prelude_allocs, prelude_allocs == 1 ? "" : "s");
    if (out->other_stream_segments)
        note_add(out, "%llu segment%s of other streams %s not covered (a stream is a "
                      "handle of one run: the plan reserves for the default stream only)",
                 (unsigned long long)out->other_stream_segments,
                 out->other_stream_segments == 1 ? "" : "s",
                 out->other_stream_segments == 1 ? "is" : "are");
    if (p->left_segments) {
        fmt(p->left_bytes, b1, sizeof b1);
        note_add(out, "%llu segments (%s) of the least-used sizes are left out: a plan "
                      "holds at most %d entries",
                 (unsigned long long)p->left_segments, b1, SUBLET_WARMUP_MAX);
    }
    if (!p->converged && out->device_allocs_after)
        note_add(out, "the plan still grew after %d rounds", MAX_ROUNDS);
    if (out->prelude_segments) {
        fmt(out->prelude_bytes, b1, sizeof b1);
        note_add(out, "the trace starts mid-run holding %llu segments (%s) it adopted: the "
                      "plan adds what the recorded part needs (--prelude allocate plans for "
                      "all of it)",
                 (unsigned long long)out->prelude_segments, b1);
    }
}

static void plan_free(plan_run *p)
{
    for (size_t t = 0; p->m && t < p->n; t++)
        kset_free(&p->m[t].fin.held);
    for (size_t t = 0; p->ad && t < p->n; t++)
        free(p->ad[t]);
    free(p->ad);
    free(p->m);
    free(p->conf_p);
    kset_free(&p->plan);
    kset_free(&p->next);
}

sublet_status tn_plan(const tfacts *f, size_t n, const char *conf, uint64_t dev,
                      const sublet_tune_options *o, sublet_tune_plan *out, uint64_t *replays)
{
    memset(out, 0, sizeof *out);
    snprintf(out->conf, sizeof out->conf, "%s", conf ? conf : "");
    sublet_settings s;
    if (plan_check(f, n, conf, &s, out) != SUBLET_OK)
        return out->status;
    plan_run p;
    memset(&p, 0, sizeof p);
    p.f = f;
    p.n = n;
    p.dev = dev;
    p.o = o;
    p.out = out;
    p.replays = replays;
    p.expandable = s.expandable_segments;
    p.fits_before = 1;
    int adopt = o->prelude == SUBLET_PRELUDE_ADOPT ||
                (o->prelude == SUBLET_PRELUDE_AUTO && !p.expandable);
    p.m = calloc(n, sizeof *p.m);
    p.ad = calloc(n, sizeof *p.ad);
    p.conf_p = malloc(sizeof out->env);
    sublet_status st = p.m && p.ad && p.conf_p ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
    for (size_t t = 0; t < n && st == SUBLET_OK && adopt; t++)
        st = plan_adopt(&p, t);
    p.job = (round_job){f, conf, 0, dev, o, p.m};
    if (st == SUBLET_OK)
        st = plan_rounds(&p);
    if (st == SUBLET_OK && !p.plan.n) {
        snprintf(out->note, sizeof out->note, "%s",
                 out->device_allocs_before
                     ? "the run holds no segment of the default stream at its end: there is "
                       "nothing a plan could reserve that the run would keep"
                     : "the run makes no device allocation after its prelude: it needs no plan");
    } else if (st == SUBLET_OK) {
        plan_verify(&p);
        plan_notes(&p);
    }
    out->status = st;
    plan_free(&p);
    return st;
}

sublet_status sublet_tune_plan_derive(const sublet_trace *const *traces, size_t n,
                                      const char *conf, const sublet_tune_options *o,
                                      sublet_tune_plan *out)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    sublet_tune_options def;
    if (!o) {
        sublet_tune_options_init(&def);
        o = &def;
    }
    if (!traces || !n || n > MAX_TRACES || !conf) {
        out->status = SUBLET_ERR_INVALID_ARGUMENT;
        snprintf(out->note, sizeof out->note, "%s", !traces || !n ? "no traces"
                                                    : !conf       ? "no settings"
                                                                  : "at most 64 traces");
        return out->status;
    }
    tn_sources src;
    tfacts *f;
    char err[256];
    sublet_status st = tn_facts_of_traces(traces, n, o->pytorch_version, &src, &f, err, sizeof err);
    if (st != SUBLET_OK) {
        out->status = st;
        if (st == SUBLET_ERR_INVALID_ARGUMENT)
            snprintf(out->note, sizeof out->note, "a trace is NULL");
        else if (err[0])
            snprintf(out->note, sizeof out->note, "a trace cannot be read: %s", err);
        return out->status;
    }
    uint64_t replays = 0;
    st = tn_plan(f, n, conf, o->device_memory ? o->device_memory : tn_default_device(f, n), o, out,
                 &replays);
    free(f);
    tn_sources_close(&src);
    return st;
}
