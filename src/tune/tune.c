/* sublet — tuning the allocator settings from recorded traces (sublet/tune.h).
 *
 * Outline of sublet_tune(), one static function a step (step_space,
 * step_cost, step_walks, step_check, step_explain, step_plan):
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
 *      replays;
 *   6. the warm-up plan of the SUBLET_ALLOC_CONF answer is derived by replay
 *      to a fixed point (tune_plan.c).
 * Probes run in batches on `threads` threads; a batch's results are folded
 * in in a fixed order, so the outcome does not depend on the scheduling.
 * The steps live in tune_space.c (cost model, space), tune_eval.c (replays),
 * tune_search.c (merging, bisection, the walk), tune_explain.c (the fixes
 * sentence) and tune_plan.c (the plan); tune_internal.h lists them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "tune/tune_internal.h"

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

/* After a cancel: the cheapest Pareto point of each walk within the band of
 * the smallest M it knows, into r->pytorch / r->sublet (r->partial). */
static void best_so_far(const tctx *x, const walk *wp, const walk *ws, sublet_tune_result *r)
{
    for (int w = 0; w < 2; w++) {
        const walk *k = w == 0 ? wp : ws;
        sublet_tune_eval *e = w == 0 ? &r->pytorch : &r->sublet;
        if (!k->np)
            continue;
        point pt;
        if (k->answer != NONE && k->answer_m) { /* the walk was done */
            pt = (point){k->answer, k->answer_m};
        } else {
            uint64_t best = k->pareto[k->np - 1].m;
            uint64_t band_x = (uint64_t)((double)best * (1.0 + x->o->band)) / x->res * x->res;
            size_t p = 0;
            while (p + 1 < k->np && k->pareto[p].m > band_x)
                p++;
            pt = k->pareto[p];
        }
        if (x->c[pt.c].over) /* a cost not known: the finished point before it */
            for (size_t p = 0; p < k->np && !x->c[k->pareto[p].c].over; p++)
                pt = k->pareto[p];
        if (x->c[pt.c].over)
            continue;
        sublet_tune_eval_free(e);
        fill_point(x, &pt, e);
        r->partial |= 1u << w;
    }
}

typedef struct final_job {
    const tctx *x;
    const char *conf[3][MAX_TRACES];
    const drun *known[3][MAX_TRACES]; /* the search's cost run of that very replay, or NULL */
    signed char same_as[3][MAX_TRACES]; /* an earlier job of the same trace and settings (-1: none) */
    sublet_tune_eval *ev[3];
    sublet_status st[3][MAX_TRACES];
    char err[3][MAX_TRACES][256];
    uint64_t replays[3][MAX_TRACES];
} final_job;

/* Job i: the SUBLET_ALLOC_CONF answer's first, then the PyTorch answer's,
 * then the current settings' (the longest searches first, most often: an
 * answer under expandable segments or policy:stitch has no same_from to
 * answer its probes by, the current settings' cost run answers many), so
 * that the threads finish together; the results do not depend on it. */
static void final_fn(void *arg, size_t i)
{
    final_job *j = arg;
    size_t which = 2 - i / j->x->nt, t = i % j->x->nt;
    uint64_t rp = 0;
    if (j->same_as[which][t] >= 0)
        return; /* the same evaluation as an earlier job's: copied after */
    if (j->x->o->cancel && j->x->o->cancel(j->x->o->cancel_user)) {
        j->st[which][t] = SUBLET_ERR_CANCELLED;
        snprintf(j->err[which][t], sizeof j->err[which][t], "cancelled");
        return;
    }
    j->st[which][t] = tn_eval_one(&j->x->f[t], j->conf[which][t], j->x->dev, j->x->o,
                                  j->known[which][t], &j->ev[which]->per_trace[t], &rp,
                                  j->err[which][t], sizeof j->err[which][t]);
    j->replays[which][t] = rp;
}

/* One run of sublet_tune: the search state and what each step hands on. */
typedef struct tune_run {
    tctx x;
    sublet_tune_options opt; /* the caller's, with the defaults filled in */
    tn_sources src; /* the traces, read again through readers */
    size_t n;
    sublet_tune_result *r;
    knobs *all; /* the space, in enumeration order */
    size_t nall;
    walk wp, ws; /* the walks: PyTorch knobs only; everything */
} tune_run;

/* The rounding classes of the space, and each class's lower bound per trace. */
typedef struct ru_info {
    unsigned cls[N_RU];
    uint64_t max_round[N_RU], max_alloc[N_RU];
    uint64_t max_pre; /* largest pre_segment / pre_alloc block of the traces */
    uint64_t lb[N_RU][MAX_TRACES];
} ru_info;

/* Out of host memory (unless an error came first); returns 1 (stop). */
static int no_memory(tctx *x)
{
    if (x->st == SUBLET_OK) {
        x->st = SUBLET_ERR_NO_MEMORY;
        snprintf(x->err, sizeof x->err, "out of host memory");
    }
    return 1;
}

static sublet_status check_args(const void *const *traces, size_t n, sublet_tune_result *r)
{
    if (!traces || !n || n > MAX_TRACES)
        return r->status = sl_fail(r->error, sizeof r->error, SUBLET_ERR_INVALID_ARGUMENT, "%s",
                                   !n ? "no traces" : "at most 64 traces");
    for (size_t i = 0; i < n; i++)
        if (!traces[i])
            return r->status = sl_fail(r->error, sizeof r->error, SUBLET_ERR_INVALID_ARGUMENT,
                                       "trace %zu is NULL", i);
    return SUBLET_OK;
}

/* The options with their defaults, the device, and the context. */
static void run_init(tune_run *u, size_t n, const sublet_tune_options *o, sublet_tune_result *r,
                     double t0)
{
    memset(u, 0, sizeof *u);
    u->n = n;
    u->r = r;
    sublet_tune_options def;
    if (!o) {
        sublet_tune_options_init(&def);
        o = &def;
    }
    u->opt = *o;
    u->opt.threads = tn_threads(u->opt.threads);
    if (!u->opt.resolution)
        u->opt.resolution = DEFAULT_RESOLUTION;
    if (!(u->opt.band > 0))
        u->opt.band = DEFAULT_BAND;

    tctx *x = &u->x;
    x->t0 = t0;
    x->o = &u->opt;
    x->nt = n;
    x->res = u->opt.resolution;
    x->cost_limit = INFINITY;
    pthread_mutex_init(&x->lock, NULL);
    r->ntraces = n;
}

/* The facts of each trace; 1: stop. */
static int load_facts(tune_run *u)
{
    tctx *x = &u->x;
    x->f = calloc(u->n, sizeof *x->f);
    if (!x->f)
        return no_memory(x);
    for (size_t t = 0; t < u->n; t++) {
        char err[512] = "";
        sublet_status st = tn_facts_get(u->src.src[t], &x->f[t], err, sizeof err);
        x->f[t].version = u->opt.pytorch_version;
        if (st != SUBLET_OK) {
            x->st = st;
            snprintf(x->err, sizeof x->err, "trace %zu: %s", t,
                     err[0] ? err : sublet_status_text(st));
            return 1;
        }
    }
    /* the device: the user's, else the one recorded, else 80 GiB */
    sublet_tune_result *r = u->r;
    x->dev = u->opt.device_memory ? u->opt.device_memory : tn_default_device(x->f, u->n);
    r->device_source =
        u->opt.device_memory ? SUBLET_TUNE_DEVICE_GIVEN : SUBLET_TUNE_DEVICE_DEFAULT;
    for (size_t t = 0; t < u->n && !u->opt.device_memory; t++)
        if (x->f[t].device_memory)
            r->device_source = SUBLET_TUNE_DEVICE_RECORDED;
    r->device_memory = x->dev;
    return 0;
}

static size_t count_private_pool_traces(const tctx *x)
{
    size_t k = 0;
    for (size_t t = 0; t < x->nt; t++)
        k += x->f[t].private_pools != 0;
    return k;
}

/* The rounding classes, and the rounding bound of each class on each trace. */
static sublet_status rounding_info(const tune_run *u, ru_info *ri, char *err, size_t err_cap)
{
    const tctx *x = &u->x;
    sublet_status st = tn_roundup_classes(x, ri->cls, ri->max_round, ri->max_alloc, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    ri->max_pre = 0;
    for (size_t t = 0; t < u->n; t++)
        if (x->f[t].max_pre_segment > ri->max_pre)
            ri->max_pre = x->f[t].max_pre_segment;
    for (unsigned q = 0; q < N_RU; q++) {
        if (ri->cls[q] != q)
            continue;
        char conf[128] = "";
        if (q)
            snprintf(conf, sizeof conf, "roundup_power2_divisions:%s", tn_ru_conf[q]);
        sublet_settings s;
        tn_settings_of(u->opt.pytorch_version, conf, &s);
        for (size_t t = 0; t < u->n; t++)
            ri->lb[q][t] = tn_rounding_bound(&x->f[t], &s);
    }
    return SUBLET_OK;
}

/* Candidate i: its settings, the setting it provably replays like, its GC
 * sibling and its per-trace state; 1 when it is distinct. */
static int cand_init(tune_run *u, const ru_info *ri, size_t i)
{
    tctx *x = &u->x;
    size_t n = u->n;
    cand *c = &x->c[i];
    c->k = u->all[i];
    tn_knobs_conf(&c->k, c->conf, sizeof c->conf);
    c->pytorch = c->k.base != BASE_STITCH;
    c->ts = &x->ts_all[i * n];
    knobs kk = c->k;
    kk.ru = (unsigned char)ri->cls[kk.ru];
    uint64_t maxseg = ri->max_alloc[kk.ru] > ri->max_pre ? ri->max_alloc[kk.ru] : ri->max_pre;
    if (kk.ms && kk.base == BASE_NATIVE && (uint64_t)tn_ms_mb[kk.ms] * MIB > maxseg)
        kk.ms = kk.nsr = 0; /* no block can be oversize */
    if (kk.ms && ri->max_round[kk.ru] < (uint64_t)tn_ms_mb[kk.ms] * MIB)
        kk.nsr = 0; /* no request is oversize */
    c->rep = knobs_index(u->all, u->nall, &kk);
    if (c->rep == NONE)
        c->rep = i;
    knobs sib = c->k;
    sib.gc = 0;
    c->gc_sibling = knobs_index(u->all, u->nall, &sib);
    for (size_t t = 0; t < n; t++) {
        tstate *s = &c->ts[t];
        s->ok_at = s->same_from = NONE;
        s->lb = ri->lb[kk.ru][t];
        if (c->k.gc)
            s->lb += s->lb / 1000; /* the limit is 0.999 of the device */
    }
    return c->rep == i;
}

/* 1. the space, and the settings that replay identically; the pools of a
 * trace with private pools stay as recorded, and policy:stitch, which has
 * none, is left out.  1: stop. */
static int step_space(tune_run *u)
{
    tctx *x = &u->x;
    sublet_tune_result *r = u->r;
    size_t n = u->n;
    r->private_pool_traces = count_private_pool_traces(x);
    unsigned space = r->private_pool_traces ? SUBLET_TUNE_PYTORCH_ONLY : 0;
    size_t nall = tn_space_knobs(space, NULL);
    u->all = malloc(nall * sizeof *u->all);
    x->c = calloc(nall, sizeof *x->c);
    x->ts_all = calloc(nall * n, sizeof *x->ts_all);
    if (!u->all || !x->c || !x->ts_all)
        return no_memory(x);
    tn_space_knobs(space, u->all);
    u->nall = nall;
    x->nc = nall;
    ru_info ri;
    char err[512] = "";
    sublet_status st = rounding_info(u, &ri, err, sizeof err);
    if (st != SUBLET_OK) {
        x->st = st;
        snprintf(x->err, sizeof x->err, "%s", err[0] ? err : sublet_status_text(st));
        return 1;
    }
    size_t distinct = 0;
    for (size_t i = 0; i < nall; i++)
        distinct += (size_t)cand_init(u, &ri, i);
    r->space = nall;
    r->distinct = distinct;
    x->replays_est = distinct * (2 * n + 1);
    x->phase = "cost";
    x->left = distinct;
    return 0;
}

/* A collector setting whose collector never fires (its sibling without one
 * fits, never retries and stays under the threshold) replays like the
 * sibling: its results are copied.  1: copied. */
static int cost_from_sibling(tctx *x, cand *c)
{
    const cand *sib = &x->c[x->c[c->gc_sibling].rep];
    double thr_frac = strtod(tn_gc_conf[c->k.gc], NULL);
    uint64_t allowed = (uint64_t)(0.999 * (double)x->dev);
    uint64_t thr = (uint64_t)(thr_frac * (double)allowed);
    int same = sib->costed;
    for (size_t t = 0; t < x->nt && same; t++)
        same = sib->ts[t].d.fits && sib->ts[t].d.calls.retries == 0 &&
               sib->ts[t].d.peak_reserved <= thr;
    if (!same)
        return 0;
    c->costed = 1;
    c->cost = sib->cost;
    c->fits = sib->fits;
    c->calls = sib->calls;
    c->retries = sib->retries;
    c->peak_reserved = sib->peak_reserved;
    for (size_t t = 0; t < x->nt; t++) {
        c->ts[t].d = sib->ts[t].d;
        c->ts[t].errors_allowed = sib->ts[t].errors_allowed;
        c->ts[t].ok_at = x->dev;
    }
    return 1;
}

#define COST_CUTOFF 32.0 /* sublet_tune_options.cost_cutoff's default */

/* Cost tasks for the distinct candidates `pick` selects, run and folded in
 * (tk, tk_d, tk_e: room for every distinct candidate). */
static void cost_tasks(tune_run *u, int (*pick)(tctx *x, cand *c, size_t i, int pass), task *tk,
                       drun *tk_d, uint64_t *tk_e)
{
    tctx *x = &u->x;
    size_t n = u->n;
    for (int pass = 0; pass < 2 && x->st == SUBLET_OK; pass++) {
        size_t nt = 0;
        for (size_t i = 0; i < u->nall; i++) {
            cand *c = &x->c[i];
            if (c->rep != i || !pick(x, c, i, pass))
                continue;
            memset(&tk[nt], 0, sizeof tk[nt]);
            tk[nt].c = i;
            tk[nt].kind = 0;
            tk[nt].d = &tk_d[nt * n];
            tk[nt].errors_allowed = &tk_e[nt * n];
            nt++;
        }
        tn_run_tasks(x, tk, nt);
    }
}

/* The defaults (conf ""), alone. */
static int pick_defaults(tctx *x, cand *c, size_t i, int pass)
{
    (void)x;
    (void)i;
    return pass == 0 && c->k.gc == 0 && c->conf[0] == '\0';
}

/* Every other: collector-free ones first (a collector that never fires
 * replays like its sibling: copied). */
static int pick_rest(tctx *x, cand *c, size_t i, int pass)
{
    (void)i;
    if (c->costed || (pass == 0) != (c->k.gc == 0))
        return 0;
    return !(pass == 1 && cost_from_sibling(x, c));
}

/* 2. every distinct setting on the user's device; the defaults' first, then
 * the others stopped once past cost_cutoff times the defaults' cost.  1: stop. */
static int step_cost(tune_run *u)
{
    tctx *x = &u->x;
    size_t n = u->n, distinct = u->r->distinct ? u->r->distinct : 1;
    task *tk = calloc(distinct, sizeof *tk);
    drun *tk_d = calloc(distinct * n, sizeof *tk_d);
    uint64_t *tk_e = calloc(distinct * n, sizeof *tk_e);
    if (!tk || !tk_d || !tk_e) {
        free(tk);
        free(tk_d);
        free(tk_e);
        return no_memory(x);
    }
    double f = u->opt.cost_cutoff == 0 ? COST_CUTOFF : u->opt.cost_cutoff;
    if (f > 0) {
        cost_tasks(u, pick_defaults, tk, tk_d, tk_e);
        for (size_t i = 0; i < u->nall; i++)
            if (x->c[i].rep == i && pick_defaults(x, &x->c[i], i, 0) && x->c[i].cost > 0)
                x->cost_limit = f * x->c[i].cost;
    }
    cost_tasks(u, pick_rest, tk, tk_d, tk_e);
    free(tk);
    free(tk_d);
    free(tk_e);
    return x->st != SUBLET_OK;
}

/* 3–4. the walks, their Pareto sets and the settings the bound pruned.
 * 1: stop. */
static int step_walks(tune_run *u)
{
    tctx *x = &u->x;
    sublet_tune_result *r = u->r;
    size_t n = u->n;
    for (size_t i = 0; i < u->nall; i++)
        r->cost_runs_cut += x->c[i].rep == i && x->c[i].over;
    int wr = tn_walk_family(x, 1, &u->wp);
    if (wr == 0)
        return 1;
    int wr2 = tn_walk_family(x, 0, &u->ws);
    r->cost_runs_completed = x->completed;
    if (wr2 == 0)
        return 1;
    if (wr < 0 || wr2 < 0) {
        x->st = SUBLET_ERR_OOM;
        snprintf(x->err, sizeof x->err,
                 "no setting of the search space runs the trace%s on any device tried",
                 n > 1 ? "s" : "");
        return 1;
    }
    r->pareto_pytorch = calloc(u->wp.np, sizeof *r->pareto_pytorch);
    r->pareto_sublet = calloc(u->ws.np, sizeof *r->pareto_sublet);
    if (!r->pareto_pytorch || !r->pareto_sublet)
        return no_memory(x);
    for (size_t i = 0; i < u->wp.np; i++)
        fill_point(x, &u->wp.pareto[i], &r->pareto_pytorch[i]);
    r->npareto_pytorch = u->wp.np;
    for (size_t i = 0; i < u->ws.np; i++)
        fill_point(x, &u->ws.pareto[i], &r->pareto_sublet[i]);
    r->npareto_sublet = u->ws.np;
    for (size_t i = 0; i < u->nall; i++) {
        const cand *c = &x->c[i];
        if (c->rep != i)
            continue;
        for (size_t t = 0; t < n; t++)
            if (c->ts[t].lb > u->ws.best - x->res) {
                r->bound_pruned++;
                break;
            }
    }
    return 0;
}

/* The current settings of trace t: as the caller gave them, else as
 * recorded, else NULL. */
static const char *current_conf(const tune_run *u, size_t t)
{
    const char *cur = u->opt.current && u->opt.current[t] ? u->opt.current[t] : NULL;
    return cur ? cur : u->x.f[t].settings;
}

/* The cost run the search replayed for trace t under exactly `conf` (the
 * same call as tn_eval_one's: trace, settings, device, prelude and cost
 * model), or NULL: a setting whose results were copied from its sibling
 * without a collector is replayed again. */
static const drun *known_cost_run(const tune_run *u, const char *conf, size_t t)
{
    for (size_t i = 0; i < u->nall; i++) {
        const cand *c = &u->x.c[i];
        if (c->rep == i && c->cost_ran && strcmp(c->conf, conf) == 0)
            return &c->ts[t].d;
    }
    return NULL;
}

/* The jobs of step 5: the current settings and both answers on every trace;
 * 1: out of memory. */
static int final_setup(tune_run *u, final_job *j)
{
    sublet_tune_result *r = u->r;
    size_t n = u->n;
    j->x = &u->x;
    j->ev[0] = &r->current;
    j->ev[1] = &r->pytorch;
    j->ev[2] = &r->sublet;
    r->current_recorded = 1;
    for (size_t t = 0; t < n; t++) {
        const char *cur = current_conf(u, t);
        if (!cur) {
            r->current_recorded = 0;
            cur = "";
        }
        j->conf[0][t] = cur;
        j->conf[1][t] = u->x.c[u->wp.answer].conf;
        j->conf[2][t] = u->x.c[u->ws.answer].conf;
        for (int w = 0; w < 3; w++) {
            j->known[w][t] = known_cost_run(u, j->conf[w][t], t);
            int same = -1;
            for (int v = 0; v < w && same < 0; v++)
                if (strcmp(j->conf[v][t], j->conf[w][t]) == 0)
                    same = v;
            j->same_as[w][t] = (signed char)same;
        }
    }
    int fail = 0;
    for (int w = 0; w < 3; w++) {
        j->ev[w]->ntraces = n;
        j->ev[w]->per_trace = calloc(n, sizeof *j->ev[w]->per_trace);
        fail |= !j->ev[w]->per_trace;
        snprintf(j->ev[w]->conf, sizeof j->ev[w]->conf, "%s", j->conf[w][0]);
        j->ev[w]->pytorch = tn_conf_is_pytorch(j->conf[w][0]);
    }
    return fail;
}

/* The jobs' replays and first error into x, and their evaluations folded
 * (the evaluations of settings that are another job's on the same trace, an
 * answer that is the current settings or both answers alike, copied). */
static void final_collect(tctx *x, final_job *j)
{
    for (int w = 0; w < 3; w++)
        for (size_t t = 0; t < x->nt; t++) {
            int v = j->same_as[w][t];
            if (v < 0)
                continue;
            j->ev[w]->per_trace[t] = j->ev[v]->per_trace[t];
            j->st[w][t] = j->st[v][t];
            memcpy(j->err[w][t], j->err[v][t], sizeof j->err[w][t]);
        }
    for (int w = 0; w < 3 && x->st == SUBLET_OK; w++)
        for (size_t t = 0; t < x->nt; t++) {
            x->replays += j->replays[w][t];
            if (j->st[w][t] == SUBLET_ERR_CANCELLED && x->st == SUBLET_OK) {
                x->st = SUBLET_ERR_CANCELLED;
                snprintf(x->err, sizeof x->err, "cancelled");
            } else if (j->st[w][t] != SUBLET_OK && x->st == SUBLET_OK) {
                x->st = j->st[w][t];
                snprintf(x->err, sizeof x->err, "%s%s: %s", w == 0 ? "current settings " : "",
                         j->conf[w][t], j->err[w][t]);
            }
        }
    for (int w = 0; w < 3; w++)
        tn_eval_fold(j->ev[w]);
}

/* 5. the answers and the current settings, evaluated plainly.  1: stop. */
static int step_check(tune_run *u)
{
    tctx *x = &u->x;
    x->phase = "check";
    x->left = 3;
    if (tn_cancelled(x))
        return 1;
    final_job *j = calloc(1, sizeof *j);
    if (!j)
        return no_memory(x);
    if (final_setup(u, j)) {
        free(j);
        return no_memory(x);
    }
    tn_parallel_for(u->opt.threads, 3 * u->n, final_fn, j);
    final_collect(x, j);
    free(j);
    tn_progress(x);
    return x->st != SUBLET_OK;
}

/* One sentence of step 6: answer w (0: PyTorch's, 1: sublet's) against the
 * current settings on the trace where it gains the most. */
static void explain_one(tune_run *u, size_t w)
{
    sublet_tune_result *r = u->r;
    const sublet_tune_eval *a = w == 0 ? &r->pytorch : &r->sublet;
    size_t best = 0;
    int64_t gain = INT64_MIN;
    for (size_t t = 0; t < u->n; t++) {
        int64_t g = (int64_t)r->current.per_trace[t].min_capacity_bytes -
                    (int64_t)a->per_trace[t].min_capacity_bytes;
        if (g > gain) {
            gain = g;
            best = t;
        }
    }
    const char *cur = current_conf(u, best);
    if (!cur)
        cur = "";
    char *dst = w == 0 ? r->pytorch_cause : r->sublet_cause;
    tn_diagnose(&u->x.f[best], cur, a->conf, u->x.dev, a->per_trace[best].min_capacity_bytes,
                u->opt.prelude, u->opt.threads, dst, SUBLET_TUNE_CAUSE_MAX);
    if (w == 0)
        r->pytorch_cause_trace = best;
    else
        r->sublet_cause_trace = best;
}

/* 6. what each answer fixes, on the trace where it gains the most (one
 * after the other, each its two recorded runs at once: each holds the
 * current settings' splits of cached blocks, which grow with the run, ~60
 * MB at 10^8 events).  1: stop. */
static int step_explain(tune_run *u)
{
    tctx *x = &u->x;
    x->phase = "explain";
    x->left = 2;
    if (tn_cancelled(x))
        return 1;
    if (!u->opt.diagnose)
        return 0;
    for (size_t w = 0; w < 2; w++)
        explain_one(u, w);
    tn_progress(x);
    return 0;
}

/* 7. the warm-up plan, for the SUBLET_ALLOC_CONF answer (policy:stitch has
 * none: then for the PyTorch answer) */
static void step_plan(tune_run *u)
{
    tctx *x = &u->x;
    sublet_tune_result *r = u->r;
    x->phase = "plan";
    x->left = 1;
    if (!u->opt.warmup || tn_cancelled(x))
        return;
    sublet_settings ss;
    tn_settings_of(u->opt.pytorch_version, r->sublet.conf, &ss);
    const char *pc = ss.policy == SUBLET_POLICY_STITCH ? r->pytorch.conf : r->sublet.conf;
    tn_plan(x->f, u->n, pc, x->dev, &u->opt, &r->plan, &x->replays);
    tn_progress(x);
}

/* The outcome into r (8. the answers as the user's release takes them), and
 * the run's memory freed. */
static sublet_status run_finish(tune_run *u)
{
    tctx *x = &u->x;
    sublet_tune_result *r = u->r;
    if (x->st == SUBLET_ERR_CANCELLED)
        best_so_far(x, &u->wp, &u->ws, r);
    if (x->st == SUBLET_OK || x->st == SUBLET_ERR_CANCELLED)
        tn_release_forms(r, u->opt.pytorch_version);
    r->replays = x->replays;
    r->status = x->st;
    if (x->st != SUBLET_OK)
        sl_msg(r->error, sizeof r->error, "%s", x->err);
    tn_walk_free(&u->wp);
    tn_walk_free(&u->ws);
    free(u->all);
    free(x->c);
    free(x->ts_all);
    free(x->f);
    pthread_mutex_destroy(&x->lock);
    return r->status;
}

sublet_status sublet_tune_streams(sublet_trace_stream *const *traces, size_t n,
                                  const sublet_tune_options *o, sublet_tune_result *r)
{
    if (!r)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(r, 0, sizeof *r);
    double t0 = tn_now_s();
    if (check_args((const void *const *)traces, n, r) != SUBLET_OK)
        return r->status;
    tune_run u;
    run_init(&u, n, o, r, t0);
    sublet_status st = tn_sources_of_streams(&u.src, traces, n, u.x.err, sizeof u.x.err);
    if (st != SUBLET_OK)
        u.x.st = st;
    else if (!load_facts(&u) && !step_space(&u) && !step_cost(&u) && !step_walks(&u) &&
             !step_check(&u) && !step_explain(&u))
        step_plan(&u);
    run_finish(&u);
    tn_sources_close(&u.src);
    r->seconds = tn_now_s() - t0;
    return r->status;
}

sublet_status sublet_tune(const sublet_trace *const *traces, size_t n, const sublet_tune_options *o,
                          sublet_tune_result *r)
{
    if (!r)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(r, 0, sizeof *r);
    if (check_args((const void *const *)traces, n, r) != SUBLET_OK)
        return r->status;
    tn_sources s;
    sublet_status st = tn_sources_of_traces(&s, traces, n);
    if (st != SUBLET_OK)
        return r->status = sl_fail(r->error, sizeof r->error, st, "%s", sublet_status_text(st));
    st = sublet_tune_streams(s.src, n, o, r);
    tn_sources_close(&s);
    return st;
}
