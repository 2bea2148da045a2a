/* sublet — the tuner's search (sublet_tune steps 1–4): merging settings that
 * provably replay identically, the rounding lower bound, the tasks (cost runs
 * and probes) run in batches whose results are folded in in a fixed order,
 * the bisection from the best known bounds, and the Pareto walk of a family
 * with its answer, the cheapest setting within the band of the best M. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_internal.h"

/* ---- the search state --------------------------------------------------------------- */

/* The progress of x, with `pending` replays and `pending_events` events run
 * but not folded in yet. */
static void progress_at(tctx *x, uint64_t pending, uint64_t pending_events)
{
    uint64_t done = x->replays + pending;
    uint64_t est = x->replays_est > done ? x->replays_est : done;
    if (x->o->progress)
        x->o->progress(x->o->progress_user, done, est);
    if (!x->o->progress_to)
        return;
    sublet_tune_progress p;
    memset(&p, 0, sizeof p);
    p.phase = x->phase ? x->phase : "";
    p.replays = done;
    p.replays_est = est;
    p.events = x->events + pending_events;
    p.candidates_left = x->left;
    p.seconds = tn_now_s() - x->t0;
    p.seconds_left = done ? p.seconds * (double)(est - done) / (double)done : -1.0;
    x->o->progress_to(x->o->progress_user, &p);
}

void tn_progress(tctx *x) { progress_at(x, 0, 0); }

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

int tn_cancelled(tctx *x)
{
    if (!x->o->cancel || !x->o->cancel(x->o->cancel_user))
        return 0;
    set_error(x, SUBLET_ERR_CANCELLED, "cancelled");
    return 1;
}

/* ---- merging settings that replay identically ------------------------------------------ */

void tn_settings_of(const char *version, const char *conf, sublet_settings *s)
{
    char vbuf[TN_CONF_V_MAX];
    sublet_settings_default(s);
    (void)sublet_settings_parse(s, tn_conf_v(version, conf, vbuf, sizeof vbuf), NULL, 0);
}

/* For each roundup value: the first value that rounds every request size of
 * every trace (allocs and pre_allocs) alike, and the largest rounded and
 * allocated sizes, in one pass over the events (no copy of the sizes). */
typedef struct ru_scan {
    sublet_settings s[N_RU];
    unsigned char alike[N_RU][N_RU];
    uint64_t *max_round, *max_alloc;
    uint64_t last;
} ru_scan;

static int scan_roundup(void *user, const sublet_trace_event *ev, size_t n, uint64_t first)
{
    (void)first;
    ru_scan *q = user;
    for (size_t i = 0; i < n; i++) {
        if ((ev[i].kind != SUBLET_ACT_ALLOC && ev[i].kind != SUBLET_TRACE_PRE_ALLOC) ||
            !ev[i].size || ev[i].size == q->last)
            continue;
        q->last = ev[i].size;
        uint64_t rs[N_RU];
        for (unsigned r = 0; r < N_RU; r++) {
            rs[r] = sublet_round_size(&q->s[r], q->last);
            uint64_t as = sublet_allocation_size(&q->s[r], rs[r]);
            if (rs[r] > q->max_round[r])
                q->max_round[r] = rs[r];
            if (as > q->max_alloc[r])
                q->max_alloc[r] = as;
            for (unsigned k = 0; k < r; k++)
                q->alike[k][r] &= rs[k] == rs[r];
        }
    }
    return 0;
}

sublet_status tn_roundup_classes(const tctx *x, unsigned *cls, uint64_t *max_round,
                                 uint64_t *max_alloc, char *err, size_t err_cap)
{
    ru_scan q;
    memset(q.alike, 1, sizeof q.alike);
    q.max_round = max_round;
    q.max_alloc = max_alloc;
    q.last = 0;
    for (unsigned r = 0; r < N_RU; r++) {
        char conf[128] = "";
        if (r)
            snprintf(conf, sizeof conf, "roundup_power2_divisions:%s", tn_ru_conf[r]);
        tn_settings_of(x->o->pytorch_version, conf, &q.s[r]);
        max_round[r] = max_alloc[r] = 0;
    }
    for (size_t t = 0; t < x->nt; t++) {
        sublet_status st = tn_rows_each(&x->f[t], scan_roundup, &q, err, err_cap);
        if (st != SUBLET_OK)
            return st;
    }
    unsigned char (*alike)[N_RU] = q.alike;
    for (unsigned r = 0; r < N_RU; r++) {
        cls[r] = r;
        for (unsigned k = 0; k < r; k++)
            if (cls[k] == k && alike[k][r]) {
                cls[r] = k;
                break;
            }
    }
    return SUBLET_OK;
}

/* address -> rounded size of the live allocations: open addressing with
 * linear probing, grown at a load of 1/2, deletion by backward shift, so its
 * size follows the live allocations, not the length of the trace. */
typedef struct livemap {
    uint64_t *keys, *vals;
    unsigned char *used;
    size_t cap, n;
} livemap;

static size_t lm_slot(const livemap *m, uint64_t addr)
{
    size_t j = (size_t)((addr * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (m->cap - 1);
    while (m->used[j] && m->keys[j] != addr)
        j = (j + 1) & (m->cap - 1);
    return j;
}

static int lm_init(livemap *m, size_t cap)
{
    m->cap = cap;
    m->n = 0;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    m->used = calloc(cap, 1);
    return m->keys && m->vals && m->used;
}

static void lm_free(livemap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
}

static int lm_grow(livemap *m)
{
    livemap g;
    if (!lm_init(&g, m->cap * 2)) {
        lm_free(&g);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) {
            size_t j = lm_slot(&g, m->keys[i]);
            g.used[j] = 1;
            g.keys[j] = m->keys[i];
            g.vals[j] = m->vals[i];
            g.n++;
        }
    lm_free(m);
    *m = g;
    return 1;
}

/* Remove slot j, shifting back the entries of its probe run. */
static void lm_delete(livemap *m, size_t j)
{
    size_t mask = m->cap - 1, i = j;
    m->used[j] = 0;
    m->n--;
    for (;;) {
        i = (i + 1) & mask;
        if (!m->used[i])
            return;
        size_t home = (size_t)((m->keys[i] * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & mask;
        /* the entry at i may move to j when its home is not in (j, i] */
        if ((j < i) ? (home <= j || home > i) : (home <= j && home > i)) {
            m->keys[j] = m->keys[i];
            m->vals[j] = m->vals[i];
            m->used[j] = 1;
            m->used[i] = 0;
            j = i;
        }
    }
}

typedef struct rb_scan {
    const sublet_settings *s;
    livemap m;
    uint64_t live, peak;
    int failed;
} rb_scan;

static int scan_bound(void *user, const sublet_trace_event *ev, size_t n, uint64_t first)
{
    (void)first;
    rb_scan *q = user;
    livemap *m = &q->m;
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *e = &ev[i];
        int add = e->kind == SUBLET_ACT_ALLOC || e->kind == SUBLET_TRACE_PRE_ALLOC;
        int del = e->kind == SUBLET_ACT_FREE_COMPLETED;
        if (!add && !del)
            continue;
        if (add && !e->size)
            continue;
        size_t j = lm_slot(m, e->addr);
        if (add) {
            uint64_t v = e->kind == SUBLET_TRACE_PRE_ALLOC ? e->size : sublet_round_size(q->s, e->size);
            if (m->used[j]) {
                q->live -= m->vals[j]; /* a reused address: the earlier one is gone */
            } else {
                if (2 * (m->n + 1) > m->cap) {
                    if (!lm_grow(m)) {
                        q->failed = 1;
                        return 1;
                    }
                    j = lm_slot(m, e->addr);
                }
                m->used[j] = 1;
                m->keys[j] = e->addr;
                m->n++;
            }
            m->vals[j] = v;
            q->live += v;
            if (q->live > q->peak)
                q->peak = q->live;
        } else if (m->used[j]) {
            q->live -= m->vals[j];
            lm_delete(m, j);
        }
    }
    return 0;
}

/* The rounding lower bound of each roundup class, per trace: the peak of the
 * live requests rounded as the class rounds them (pre_allocs at their
 * requested size, since an adopted block keeps its recorded size); 0 (no
 * bound) when it cannot be found. */
uint64_t tn_rounding_bound(const tfacts *f, const sublet_settings *s)
{
    rb_scan q = {.s = s};
    if (!lm_init(&q.m, 1024)) {
        lm_free(&q.m);
        return 0;
    }
    char err[256];
    sublet_status st = tn_rows_each(f, scan_bound, &q, err, sizeof err);
    lm_free(&q.m);
    return st == SUBLET_OK && !q.failed ? q.peak : 0;
}

/* ---- tasks ----------------------------------------------------------------------- */

/* Batches of more tasks than this tell the progress as each task finishes. */
#define PROGRESS_BATCH 8

typedef struct tbatch {
    tctx *x;
    task *t;
    /* a walk's probes (probe_batch): the index of the first that passed so
     * far (SIZE_MAX: none); the tasks after it are not started, and those
     * running are stopped, since the walk keeps its results up to the first
     * pass only */
    int first_pass_only;
    _Atomic size_t first_pass;
} tbatch;

/* The cost task: every trace on the user's device (and, when it does not
 * fit, the reference errors from a big device). */
static void do_cost(tctx *x, task *k)
{
    cand *c = &x->c[k->c];
    char err[512] = "";
    double so_far = 0; /* the cost of the traces before */
    for (size_t t = 0; t < x->nt; t++) {
        if (tn_cancelled(x))
            return;
        sublet_status st =
            tn_cost_run(&(trun){&x->f[t], c->conf, x->dev, x->o->prelude}, &x->o->cost,
                        x->cost_limit - so_far, &k->d[t], &k->replays, err, sizeof err);
        k->events += k->d[t].events;
        if (st != SUBLET_OK) {
            set_error(x, st, err);
            return;
        }
        if (k->d[t].over) {
            k->over = 1;
            return;
        }
        so_far += k->d[t].cost;
        k->errors_allowed[t] = k->d[t].errors;
        if (!k->d[t].fits) {
            drun big;
            uint64_t bd = tn_big_device(&x->f[t]);
            st = tn_cost_run(&(trun){&x->f[t], c->conf, bd > x->dev ? bd : 2 * x->dev, x->o->prelude},
                             &x->o->cost, INFINITY, &big, &k->replays, err, sizeof err);
            k->events += big.events;
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

static void do_probe(tctx *x, task *k, const tn_unwanted *unwanted)
{
    cand *c = &x->c[k->c];
    char err[512] = "";
    /* traces most likely to fail first: the highest known failure */
    size_t order[MAX_TRACES];
    size_t nt = x->nt < MAX_TRACES ? x->nt : MAX_TRACES;
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
        if (s->same_from <= k->x) { /* a clean run's very replay: it runs */
            k->ran[t] = 1;
            k->same_from[t] = NONE; /* nothing new */
            continue;
        }
        int ok, stopped;
        if (tn_cancelled(x)) {
            k->ok = 0;
            return;
        }
        sublet_status st = tn_probe_run(&(trun){&x->f[t], c->conf, k->x, x->o->prelude},
                                        s->errors_allowed, unwanted, &ok, &stopped,
                                        &k->same_from[t], &k->events, err, sizeof err);
        k->replays++;
        if (st != SUBLET_OK) {
            set_error(x, st, err);
            k->ok = 0;
            return;
        }
        if (stopped) { /* no longer wanted: nothing learnt */
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

/* A probe of a walk's batch after the first that passed so far: its
 * result would be dropped. */
typedef struct batch_at {
    tbatch *b;
    size_t i;
} batch_at;

static int after_pass(void *user)
{
    const batch_at *p = user;
    return p->i > atomic_load_explicit(&p->b->first_pass, memory_order_relaxed);
}

static void task_fn(void *arg, size_t i)
{
    tbatch *b = arg;
    task *k = &b->t[i];
    if (has_error(b->x))
        return;
    batch_at at = {b, i};
    if (b->first_pass_only && after_pass(&at))
        return; /* not started */
    if (k->kind == 0) {
        do_cost(b->x, k);
    } else {
        tn_unwanted u = {b->first_pass_only ? after_pass : NULL, &at};
        do_probe(b->x, k, &u);
        size_t f = atomic_load_explicit(&b->first_pass, memory_order_relaxed);
        while (b->first_pass_only && k->ok && i < f &&
               !atomic_compare_exchange_weak_explicit(&b->first_pass, &f, i,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
            ;
    }
}

/* The results of task k into its candidate (its counts into x). */
static void fold_task(tctx *x, const task *k)
{
    cand *c = &x->c[k->c];
    x->replays += k->replays;
    x->events += k->events;
    if (k->kind == 0 && k->over) {
        /* walked after every finished run (tn_walk_family), its cost
         * completed when a walk reaches it (resolve_over); a probe may pass
         * on more row errors than its own run has: a pass sends it there */
        c->costed = c->cost_ran = 0;
        c->over = 1;
        c->cost = INFINITY;
        c->fits = 1;
        c->calls = c->retries = c->peak_reserved = 0;
        for (size_t tr = 0; tr < x->nt; tr++)
            c->ts[tr].errors_allowed = UINT64_MAX;
    } else if (k->kind == 0) {
        c->over = 0;
        c->costed = 1;
        c->cost_ran = 1;
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
            if (k->d[tr].same_from < c->ts[tr].same_from)
                c->ts[tr].same_from = k->d[tr].same_from;
            if (!k->d[tr].fits && x->dev > c->ts[tr].fail_at)
                c->ts[tr].fail_at = x->dev;
        }
    } else {
        for (size_t tr = 0; tr < x->nt && tr < 64; tr++) {
            tstate *s = &c->ts[tr];
            if (k->ran[tr] == 1 && k->x < s->ok_at)
                s->ok_at = k->x;
            if (k->ran[tr] == 1 && k->same_from[tr] < s->same_from)
                s->same_from = k->same_from[tr];
            if (k->ran[tr] == -1 && k->x > s->fail_at)
                s->fail_at = k->x;
        }
    }
}

/* A batch's progress: told as each task finishes (from the caller's thread). */
typedef struct tdone {
    tctx *x;
    const task *t;
    size_t n, ndone, left;
    uint64_t pending, pending_events;
} tdone;

static void task_done(void *arg, size_t i)
{
    tdone *d = arg;
    d->pending += d->t[i].replays;
    d->pending_events += d->t[i].events;
    d->ndone++;
    if (d->n > PROGRESS_BATCH) {
        d->x->left = d->left > d->ndone ? d->left - d->ndone : 0;
        progress_at(d->x, d->pending, d->pending_events);
    }
}

/* Run the tasks on every thread, the progress told as each finishes when
 * they are many; 0 after a hard error or a cancel.  Nothing is folded in.
 * first_pass_only (probes): the tasks after the first that passes are not
 * started (they are left as they were: not ok, no replay). */
static int run_tasks_ex(tctx *x, task *t, size_t n, int first_pass_only)
{
    unsigned th = tn_threads(x->o->threads);
    tbatch b = {.x = x, .t = t, .first_pass_only = first_pass_only};
    atomic_init(&b.first_pass, SIZE_MAX);
    tdone d = {.x = x, .t = t, .n = n, .left = x->left};
    tn_parallel_for_watch(th, n, task_fn, &b, task_done, &d);
    x->left = n > PROGRESS_BATCH ? (d.left > n ? d.left - n : 0) : d.left;
    return !has_error(x);
}

static int run_tasks(tctx *x, task *t, size_t n) { return run_tasks_ex(x, t, n, 0); }

/* Run the tasks, then fold their results in, in order. */
void tn_run_tasks(tctx *x, task *t, size_t n)
{
    if (!run_tasks(x, t, n))
        return; /* a hard error or a cancel: the batch is not folded in */
    for (size_t i = 0; i < n; i++)
        fold_task(x, &t[i]);
    tn_progress(x);
}

/* Does c's cost run, stopped past the limit, need its end?  Not when c is
 * known to fail at `bound` (0: every one needs it): the walk passes it by
 * wherever its cost puts it. */
static int needs_cost(const tctx *x, const cand *c, uint64_t bound)
{
    return c->over && (!bound || known(x, c, bound) >= 0);
}

/* The cost runs of w->order[from..) that need their end run to it (no limit
 * from now on); 0 on an error. */
static int resolve_over(tctx *x, const walk *w, size_t from, uint64_t bound)
{
    size_t n = 0;
    for (size_t q = from; q < w->n; q++)
        n += needs_cost(x, &x->c[w->order[q]], bound);
    x->cost_limit = INFINITY;
    if (!n)
        return 1;
    task *tk = calloc(n, sizeof *tk);
    drun *d = calloc(n * x->nt, sizeof *d);
    uint64_t *e = calloc(n * x->nt, sizeof *e);
    if (!tk || !d || !e) {
        free(tk);
        free(d);
        free(e);
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        return 0;
    }
    size_t k = 0;
    for (size_t q = from; q < w->n; q++) {
        if (!needs_cost(x, &x->c[w->order[q]], bound))
            continue;
        tk[k] = (task){.c = w->order[q], .kind = 0, .d = &d[k * x->nt],
                       .errors_allowed = &e[k * x->nt]};
        k++;
    }
    tn_run_tasks(x, tk, n);
    x->completed += n;
    free(tk);
    free(d);
    free(e);
    return x->st == SUBLET_OK;
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
        tn_run_tasks(x, &k, 1);
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
    unsigned th = tn_threads(x->o->threads);
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
        tn_run_tasks(x, k, n);
        if (x->st != SUBLET_OK)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (k[i].ok && k[i].x < hi)
                hi = k[i].x;
    }
}

/* ---- the walk ------------------------------------------------------------------- */

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

/* The family's distinct candidates, in enumeration order, into w->order:
 * only those that fit on the user's device when any does; 1 when any does. */
static int walk_members(const tctx *x, int pytorch_only, walk *w)
{
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
    return any_fits;
}

/* The costs saved (when nothing fits) put back, and the copy freed. */
static void restore_costs(tctx *x, double *saved)
{
    if (!saved)
        return;
    for (size_t q = 0; q < x->nc; q++)
        x->c[q].cost = saved[q];
    free(saved);
}

/* w->order[from..) cheapest first, then in enumeration order; 0: out of
 * memory. */
static int sort_from(const tctx *x, walk *w, size_t from)
{
    size_t n = w->n - from;
    okey *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return 0;
    for (size_t q = 0; q < n; q++)
        keys[q] = (okey){x->c[w->order[from + q]].cost, w->order[from + q]};
    qsort(keys, n, sizeof *keys, cmp_okey);
    for (size_t q = 0; q < n; q++)
        w->order[from + q] = keys[q].i;
    free(keys);
    return 1;
}

/* One batch of probes at `bound` (up to th): the next candidates from
 * order[i] on that might beat the best, up to a candidate whose cost run
 * stopped past the limit (TAIL when that is the first).  Returns the index
 * in order of the first that does (NONE: none); *next: where the batch
 * stopped.  The results are folded in up to that first one only (those
 * after it, probed at a bound the walk leaves, are dropped, and stopped as
 * soon as it passes: the walk is the same whatever the number of threads).
 * (Batches of more probes than threads, each thread taking the next as it
 * finishes one, cost more than they saved on the 10^7-event log: the
 * probes run after a long one that then passes are all dropped, and two
 * replays at once run slower each than one alone.) */
#define TAIL (NONE - 1)
static size_t probe_batch(tctx *x, const walk *w, size_t i, uint64_t bound, unsigned th,
                          size_t *next)
{
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
        if (c->over) {
            if (!n) {
                *next = j;
                return TAIL;
            }
            break;
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
    size_t hit = NONE, nfold = n;
    if (n && run_tasks_ex(x, k, n, 1)) {
        for (size_t q = 0; q < n && hit == NONE; q++)
            if (k[q].ok) {
                hit = idx[q];
                nfold = q + 1;
            }
        for (size_t q = 0; q < nfold; q++)
            fold_task(x, &k[q]);
        tn_progress(x);
    }
    if (hit == NONE && known_hit)
        hit = j;
    *next = j;
    return hit;
}

/* The candidates from order[i] on are all of cost runs stopped past the
 * limit, so after every finished one: each is probed at `bound`, as the walk
 * would probe them one after the other while none passes.  None passes:
 * their results folded in, the walk is over (returns w->n).  One does: the
 * results are dropped, the stopped runs of those not known to fail at
 * `bound` are run to their end, the stopped ones sorted by their costs
 * (those still stopped last), and the walk goes on from the first of them
 * (returned; NONE on an error). */
static size_t walk_tail(tctx *x, walk *w, size_t i, uint64_t bound)
{
    size_t m = 0;
    for (size_t q = i; q < w->n; q++)
        m += known(x, &x->c[w->order[q]], bound) >= 0;
    task *k = calloc(m ? m : 1, sizeof *k);
    if (!k) {
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        return NONE;
    }
    int pass = 0;
    size_t n = 0;
    for (size_t q = i; q < w->n; q++) {
        int kn = known(x, &x->c[w->order[q]], bound);
        pass |= kn > 0;
        if (kn == 0)
            k[n++] = (task){.c = w->order[q], .kind = 1, .x = bound};
    }
    if (!run_tasks(x, k, n)) {
        free(k);
        return NONE;
    }
    for (size_t q = 0; q < n; q++)
        pass |= k[q].ok;
    if (!pass) {
        for (size_t q = 0; q < n; q++) {
            /* a trace that ran (on more row errors than its own run may
             * have had): not kept as known to run */
            for (size_t t = 0; t < x->nt && t < MAX_TRACES; t++)
                if (k[q].ran[t] == 1)
                    k[q].ran[t] = 0;
            fold_task(x, &k[q]);
        }
        free(k);
        tn_progress(x);
        return w->n;
    }
    for (size_t q = 0; q < n; q++) { /* counted, not folded */
        x->replays += k[q].replays;
        x->events += k[q].events;
    }
    free(k);
    /* the stopped ones the walk skipped before i (known to fail) go back
     * into the order too */
    while (i > 0 && x->c[w->order[i - 1]].over)
        i--;
    if (!resolve_over(x, w, i, bound))
        return NONE;
    size_t kept = i; /* a member that does not fit the device no longer walks */
    for (size_t q = i; q < w->n; q++)
        if (x->c[w->order[q]].fits)
            w->order[kept++] = w->order[q];
    w->n = kept;
    if (!sort_from(x, w, i)) {
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        return NONE;
    }
    return i;
}

/* The walk proper: the Pareto set of (M, cost), cheapest first; each setting
 * probed at the best M so far minus one step, bisected when it passes. */
static void walk_pareto(tctx *x, walk *w, unsigned th)
{
    uint64_t res = x->res;
    w->best = NONE;
    size_t i = 0;
    while (i < w->n && x->st == SUBLET_OK) {
        x->left = w->n - i;
        if (w->best == NONE) {
            uint64_t m = bisect(x, w->order[i]);
            if (m) {
                w->pareto[w->np++] = (point){w->order[i], m};
                w->best = m;
            }
            i++;
            continue;
        }
        size_t j;
        size_t hit = probe_batch(x, w, i, w->best - res, th, &j);
        if (hit == TAIL) {
            i = walk_tail(x, w, j, w->best - res);
            continue;
        }
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
    x->left = 0;
}

typedef struct band { /* the search for the answer within the band */
    uint64_t x;        /* the band's top: every M up to it is in */
    int group_open;    /* the cheapest cost in the band is known: */
    double group_cost; /* that cost */
} band;

/* A batch: the undecided candidates from order[i] on (up to th probes),
 * stopping after one already known to be in the band; returns where it
 * stopped. */
static size_t band_batch(tctx *x, const walk *w, const band *b, size_t i, unsigned th)
{
    task k[8];
    size_t n = 0, j = i;
    while (j < w->n && n < th) {
        const cand *c = &x->c[w->order[j]];
        if (c->over || (b->group_open && c->cost != b->group_cost))
            break; /* a stopped cost run: after the best's, so never reached */
        int kn = known(x, c, b->x);
        j++;
        if (kn > 0)
            break;
        if (kn < 0)
            continue;
        memset(&k[n], 0, sizeof k[n]);
        k[n].c = w->order[j - 1];
        k[n].kind = 1;
        k[n].x = b->x;
        n++;
    }
    if (n)
        tn_run_tasks(x, k, n);
    return j;
}

/* The batch order[i..j) folded into the answer: in the band, the first one
 * opens its cost group; within the group the smallest M wins (exact M needed
 * to compare).  1: a candidate of another cost closed the group. */
static int band_fold(tctx *x, walk *w, band *b, size_t i, size_t j)
{
    for (size_t q = i; q < j && x->st == SUBLET_OK; q++) {
        size_t ci = w->order[q];
        const cand *c = &x->c[ci];
        if (b->group_open && c->cost != b->group_cost)
            return 1;
        if (known(x, c, b->x) <= 0)
            continue;
        uint64_t m = 0;
        for (size_t p = 0; p < w->np; p++)
            if (w->pareto[p].c == ci)
                m = w->pareto[p].m;
        if (!b->group_open) {
            b->group_open = 1;
            b->group_cost = c->cost;
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
    return 0;
}

/* The answer: the cheapest setting within the band of the best M. */
static void walk_answer(tctx *x, walk *w, unsigned th)
{
    uint64_t res = x->res;
    band b = {0, 0, 0};
    b.x = (uint64_t)((double)w->best * (1.0 + (x->o->band > 0 ? x->o->band : DEFAULT_BAND))) /
          res * res;
    if (b.x < w->best)
        b.x = w->best;
    w->answer = NONE;
    for (size_t i = 0; i < w->n && x->st == SUBLET_OK;) {
        if (b.group_open && x->c[w->order[i]].cost != b.group_cost)
            break;
        size_t j = band_batch(x, w, &b, i, th);
        if (band_fold(x, w, &b, i, j) || j == i)
            break;
        i = j;
    }
    if (w->answer != NONE && !w->answer_m)
        w->answer_m = bisect(x, w->answer);
}

int tn_walk_family(tctx *x, int pytorch_only, walk *w)
{
    memset(w, 0, sizeof *w);
    w->order = malloc(x->nc * sizeof *w->order);
    w->pareto = malloc(x->nc * sizeof *w->pareto);
    if (!w->order || !w->pareto) {
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        return 0;
    }
    int any_fits = walk_members(x, pytorch_only, w);
    int finished_fits = 0, any_over = 0;
    for (size_t q = 0; q < w->n; q++) {
        finished_fits |= !x->c[w->order[q]].over && x->c[w->order[q]].fits;
        any_over |= x->c[w->order[q]].over;
    }
    if (any_over && !finished_fits) {
        /* whether any fits, and so who walks, needs their runs whole */
        if (!resolve_over(x, w, 0, 0))
            return 0;
        w->n = 0;
        any_fits = walk_members(x, pytorch_only, w);
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
    if (!sort_from(x, w, 0)) {
        set_error(x, SUBLET_ERR_NO_MEMORY, "out of host memory");
        restore_costs(x, saved);
        return 0;
    }
    unsigned th = tn_threads(x->o->threads);
    if (th > 8)
        th = 8;
    x->phase = pytorch_only ? "search (PyTorch knobs)" : "search (all)";
    walk_pareto(x, w, th);
    if (x->st != SUBLET_OK || !w->np) {
        restore_costs(x, saved);
        return x->st == SUBLET_OK ? -1 : 0;
    }
    walk_answer(x, w, th);
    restore_costs(x, saved);
    return x->st == SUBLET_OK && w->answer != NONE ? 1 : (x->st == SUBLET_OK ? -1 : 0);
}

void tn_walk_free(walk *w)
{
    free(w->order);
    free(w->pareto);
}
