/* bench_tune — checks and times `sublet tune` (sublet_tune, sublet/tune.h).
 *
 *   bench_tune grid [--threads N] [--set] TRACE...
 *       The exhaustive grid: every setting of the search space
 *       (sublet_tune_space) evaluated the plain way (sublet_tune_evaluate:
 *       sublet_replay_min_capacity per trace, one replay on the device), then
 *       sublet_tune's two answers checked against it: the answer's min
 *       capacity within the band (0.5 %) of the grid's best, and its cost no
 *       more than the cheapest grid setting within that band.  Each TRACE is
 *       checked on its own; --set checks them together as one multi-trace
 *       tuning.  Exit status 1 when a check fails.
 *   bench_tune speed [--events N] [TRACE...]
 *       Time sublet_tune on each TRACE (default: the shared
 *       cs336_lm_fullstep_fp32_ctx128) and on a synthetic trace of N events
 *       (default 100000); exit status 1 when one takes 30 s or more.
 *   bench_tune synth N OUT.csv
 *       Write the synthetic trace as an events CSV (for `sublet tune`).
 *   bench_tune phases [--threads N] TRACE
 *       Where sublet_tune's time goes: per phase (cost runs, the two walks,
 *       the plain check, the explanation, the plan), the replays, the events
 *       they drove and the wall and CPU seconds, from the progress reports
 *       (sublet_tune_options.progress_to).
 *
 * The synthetic trace: a training loop of a 24-layer model whose sequence
 * length changes from step to step (so the activation sizes do), with
 * parameters allocated first, activations freed in reverse during the
 * backward pass, gradients, optimizer temporaries and small allocations. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sublet/tune.h"

#define MIB ((uint64_t)1 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread): divided by the threads it
 * is what the wall time would be on an otherwise idle machine. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the synthetic trace ------------------------------------------------------------ */

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

typedef struct synth {
    sublet_trace *t;
    uint64_t next_addr;
    size_t events, target;
} synth;

static void emit(synth *s, uint32_t kind, uint64_t addr, uint64_t size)
{
    sublet_trace_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    e.line = s->events + 2;
    sublet_trace_append(s->t, &e);
    s->events++;
}

static uint64_t salloc(synth *s, uint64_t size)
{
    uint64_t a = s->next_addr;
    s->next_addr += (size + 511) / 512 * 512 + 512;
    emit(s, SUBLET_ACT_ALLOC, a, size);
    return a;
}

static void sfree(synth *s, uint64_t addr, uint64_t size)
{
    emit(s, SUBLET_ACT_FREE_REQUESTED, addr, size);
    emit(s, SUBLET_ACT_FREE_COMPLETED, addr, size);
}

#define LAYERS 24
#define ACTS 8

static sublet_trace *synthetic(size_t target)
{
    synth s = {.next_addr = 0x7f0000000000ULL, .target = target};
    if (sublet_trace_create(&s.t) != SUBLET_OK)
        return NULL;
    const uint64_t hidden = 2048;
    uint64_t params[LAYERS * 4], psize[LAYERS * 4];
    for (int i = 0; i < LAYERS * 4; i++) {
        psize[i] = (i % 4 == 3 ? 4 * hidden : hidden) * hidden * 2;
        params[i] = salloc(&s, psize[i]);
    }
    uint64_t grads[LAYERS * 4] = {0};
    while (s.events < target) {
        uint64_t seq = 128 + (rnd() % 15) * 64; /* batch shape changes per step */
        uint64_t batch = 8;
        uint64_t act[LAYERS][ACTS], asz[LAYERS][ACTS];
        for (int l = 0; l < LAYERS; l++)
            for (int k = 0; k < ACTS; k++) {
                uint64_t base = batch * seq * hidden * 2;
                uint64_t sz = k == 3 ? batch * 16 * seq * seq * 2 /* attention scores */
                              : k == 5 ? base * 4                   /* MLP */
                              : k == 7 ? 4096 + rnd() % 60000       /* small */
                                       : base;
                asz[l][k] = sz;
                act[l][k] = salloc(&s, sz);
                if (k == 4) { /* a short-lived temporary */
                    uint64_t tmp = salloc(&s, base / 2 + rnd() % (1 << 20));
                    sfree(&s, tmp, base / 2);
                }
            }
        for (int l = LAYERS - 1; l >= 0; l--) {
            for (int k = ACTS - 1; k >= 0; k--) {
                if (k == 2) {
                    uint64_t g = salloc(&s, asz[l][k] * 2);
                    sfree(&s, g, asz[l][k] * 2);
                }
                sfree(&s, act[l][k], asz[l][k]);
            }
            for (int p = 0; p < 4; p++)
                if (!grads[l * 4 + p])
                    grads[l * 4 + p] = salloc(&s, psize[l * 4 + p]);
        }
        for (int i = 0; i < LAYERS * 4; i++) { /* optimizer step temporaries */
            uint64_t tmp = salloc(&s, psize[i]);
            sfree(&s, tmp, psize[i]);
        }
        if (rnd() % 4 == 0) /* zero_grad(set_to_none=True) now and then */
            for (int i = 0; i < LAYERS * 4; i++) {
                sfree(&s, grads[i], psize[i]);
                grads[i] = 0;
            }
    }
    (void)params;
    return s.t;
}

static int write_csv(const sublet_trace *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "seq,action,addr,size,stream,time_us\n");
    size_t n = sublet_trace_count(t);
    const sublet_trace_event *ev = sublet_trace_events(t);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%zu,%s,%llu,%llu,%llu,\n", i, sublet_trace_kind_name(ev[i].kind),
                (unsigned long long)ev[i].addr, (unsigned long long)ev[i].size,
                (unsigned long long)ev[i].stream);
    return fclose(f);
}

/* ---- the grid ------------------------------------------------------------------------ */

typedef struct grid {
    const sublet_trace *const *traces;
    size_t nt;
    char (*confs)[SUBLET_TUNE_CONF_MAX];
    sublet_tune_eval *ev;
    sublet_status *st;
    size_t n, next;
    pthread_mutex_t lock;
} grid;

static void *grid_worker(void *arg)
{
    grid *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->lock);
        size_t i = g->next++;
        pthread_mutex_unlock(&g->lock);
        if (i >= g->n)
            return NULL;
        sublet_tune_options o;
        sublet_tune_options_init(&o);
        char err[256];
        g->st[i] = sublet_tune_evaluate(g->traces, g->nt, g->confs[i], &o, &g->ev[i], err,
                                        sizeof err);
    }
}

/* What the grid says for one family: the best M and the cheapest setting
 * within the band. */
typedef struct verdict {
    size_t best, cheapest;
    uint64_t best_m, band_x;
    double cheapest_cost;
} verdict;

static verdict grid_verdict(const grid *g, int pytorch_only)
{
    verdict v = {(size_t)-1, (size_t)-1, UINT64_MAX, 0, 0};
    int any_fits = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->st[i] == SUBLET_OK && (!pytorch_only || g->ev[i].pytorch))
            any_fits |= g->ev[i].fits;
    for (size_t i = 0; i < g->n; i++) {
        const sublet_tune_eval *e = &g->ev[i];
        if (g->st[i] != SUBLET_OK || (pytorch_only && !e->pytorch) || (any_fits && !e->fits))
            continue;
        if (e->min_capacity_bytes < v.best_m) {
            v.best_m = e->min_capacity_bytes;
            v.best = i;
        }
    }
    v.band_x = (uint64_t)((double)v.best_m * 1.005) / (2 * MIB) * (2 * MIB);
    for (size_t i = 0; i < g->n; i++) {
        const sublet_tune_eval *e = &g->ev[i];
        if (g->st[i] != SUBLET_OK || (pytorch_only && !e->pytorch) || (any_fits && !e->fits))
            continue;
        if (e->min_capacity_bytes > v.band_x)
            continue;
        double c = any_fits ? e->cost_us : 0.0;
        if (v.cheapest == (size_t)-1 || c < v.cheapest_cost) {
            v.cheapest = i;
            v.cheapest_cost = c;
        }
    }
    return v;
}

static size_t find_conf(const grid *g, const char *conf)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->confs[i], conf) == 0)
            return i;
    return (size_t)-1;
}

static int check_one(const char *name, const sublet_trace *const *traces, size_t nt,
                     unsigned threads)
{
    grid g;
    memset(&g, 0, sizeof g);
    g.traces = traces;
    g.nt = nt;
    g.n = sublet_tune_space(0, NULL, 0);
    g.confs = calloc(g.n, sizeof *g.confs);
    g.ev = calloc(g.n, sizeof *g.ev);
    g.st = calloc(g.n, sizeof *g.st);
    if (!g.confs || !g.ev || !g.st)
        return 1;
    sublet_tune_space(0, g.confs, g.n);
    pthread_mutex_init(&g.lock, NULL);
    double t0 = now_s();
    pthread_t th[64];
    unsigned started = 0;
    for (unsigned i = 1; i < threads && i < 64; i++)
        if (pthread_create(&th[started], NULL, grid_worker, &g) == 0)
            started++;
    grid_worker(&g);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    double t_grid = now_s() - t0;

    sublet_tune_options o;
    sublet_tune_options_init(&o);
    o.threads = threads;
    o.diagnose = 0;
    sublet_tune_result r;
    t0 = now_s();
    sublet_tune(traces, nt, &o, &r);
    double t_tune = now_s() - t0;
    int fail = 0;
    printf("%s: grid %zu settings in %.1f s; sublet_tune %.2f s (%llu replays)\n", name, g.n,
           t_grid, t_tune, (unsigned long long)r.replays);
    if (r.status != SUBLET_OK) {
        printf("  FAIL: sublet_tune: %s\n", r.error);
        fail = 1;
    }
    for (int fam = 0; fam < 2 && !fail; fam++) {
        verdict v = grid_verdict(&g, fam == 0);
        const sublet_tune_eval *a = fam == 0 ? &r.pytorch : &r.sublet;
        size_t ai = find_conf(&g, a->conf);
        if (v.best == (size_t)-1 || ai == (size_t)-1) {
            printf("  FAIL %s: answer '%s' not in the grid\n", fam ? "sublet" : "pytorch",
                   a->conf);
            fail = 1;
            continue;
        }
        const sublet_tune_eval *ga = &g.ev[ai];
        int ok_m = ga->min_capacity_bytes <= v.band_x;
        int ok_c = !g.ev[v.cheapest].fits || ga->cost_us <= v.cheapest_cost * (1 + 1e-12);
        printf("  %-7s answer %-58s M %9.1f MiB cost %10.0f us | grid best %9.1f MiB (%s) "
               "band-cheapest %10.0f us (%s)  %s\n",
               fam ? "sublet" : "pytorch", a->conf[0] ? a->conf : "\"\"",
               (double)ga->min_capacity_bytes / MIB, ga->cost_us, (double)v.best_m / MIB,
               g.confs[v.best][0] ? g.confs[v.best] : "\"\"", v.cheapest_cost,
               g.confs[v.cheapest][0] ? g.confs[v.cheapest] : "\"\"",
               ok_m && ok_c ? "PASS" : "FAIL");
        fail |= !(ok_m && ok_c);
    }
    sublet_tune_result_free(&r);
    for (size_t i = 0; i < g.n; i++)
        sublet_tune_eval_free(&g.ev[i]);
    free(g.confs);
    free(g.ev);
    free(g.st);
    pthread_mutex_destroy(&g.lock);
    return fail;
}

static int load(const char *path, sublet_trace **t)
{
    char err[512];
    if (sublet_trace_load(path, NULL, t, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "bench_tune: %s\n", err);
        return -1;
    }
    return 0;
}

static void unload(sublet_trace *t)
{
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

static int cmd_grid(int argc, char **argv)
{
    unsigned threads = 2;
    int set = 0;
    sublet_trace *ts[64];
    const char *names[64];
    size_t n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--set") == 0)
            set = 1;
        else if (n < 64) {
            if (load(argv[i], &ts[n]) != 0)
                return 2;
            names[n++] = argv[i];
        }
    }
    if (!n) {
        fprintf(stderr, "usage: bench_tune grid [--threads N] [--set] TRACE...\n");
        return 2;
    }
    int fail = 0;
    if (set)
        fail |= check_one("set", (const sublet_trace *const *)ts, n, threads);
    else
        for (size_t i = 0; i < n; i++) {
            const sublet_trace *one[1] = {ts[i]};
            fail |= check_one(names[i], one, 1, threads);
        }
    for (size_t i = 0; i < n; i++)
        unload(ts[i]);
    printf("%s\n", fail ? "grid check: FAIL" : "grid check: PASS");
    return fail;
}

static int time_one(const char *name, const sublet_trace *t)
{
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    sublet_tune_result r;
    const sublet_trace *one[1] = {t};
    double t0 = now_s(), c0 = cpu_s();
    sublet_tune(one, 1, &o, &r);
    double dt = now_s() - t0, dc = cpu_s() - c0;
    char thr[24];
    if (o.threads)
        snprintf(thr, sizeof thr, "%u", o.threads);
    else
        snprintf(thr, sizeof thr, "%ld online cores", sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-40s %8zu events  %6.2f s wall  %6.2f s CPU (threads: %s)  %6llu replays  "
           "%4zu/%zu distinct  status %s\n"
           "    PYTORCH_CUDA_ALLOC_CONF=%s  (min capacity %.1f MiB, %+.2f %% over peak live)\n"
           "    SUBLET_ALLOC_CONF=%s  (min capacity %.1f MiB, %+.2f %%)\n",
           name, sublet_trace_count(t), dt, dc, thr, (unsigned long long)r.replays,
           r.distinct, r.space,
           sublet_status_name(r.status), r.pytorch.conf,
           (double)r.pytorch.min_capacity_bytes / MIB, r.pytorch.overhead * 100, r.sublet.conf,
           (double)r.sublet.min_capacity_bytes / MIB, r.sublet.overhead * 100);
    int bad = r.status != SUBLET_OK || dt >= 30.0;
    sublet_tune_result_free(&r);
    return bad;
}

static int cmd_speed(int argc, char **argv)
{
    size_t events = 100000;
    int bad = 0, any = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
            events = (size_t)strtoull(argv[++i], NULL, 10);
            continue;
        }
        sublet_trace *t;
        if (load(argv[i], &t) != 0)
            return 2;
        bad |= time_one(argv[i], t);
        unload(t);
        any = 1;
    }
    if (!any) {
        const char *def = "../shared/traces/pytorch_snapshot/cs336_lm_fullstep_fp32_ctx128.events.csv";
        sublet_trace *t;
        if (load(def, &t) == 0) {
            bad |= time_one(def, t);
            unload(t);
        }
    }
    sublet_trace *s = synthetic(events);
    if (!s)
        return 2;
    char name[64];
    snprintf(name, sizeof name, "synthetic (%zu events)", events);
    bad |= time_one(name, s);
    sublet_trace_free(s);
    printf("%s\n", bad ? "speed: FAIL (30 s or more, or an error)" : "speed: PASS (under 30 s each)");
    return bad;
}

/* ---- phases ------------------------------------------------------------------------ */

typedef struct phase_row {
    const char *name;
    uint64_t replays, events;
    double wall, cpu;
} phase_row;

typedef struct phases {
    phase_row row[16];
    size_t n;
    uint64_t replays, events; /* at the last report */
    double wall, cpu;
} phases;

static void on_progress(void *user, const sublet_tune_progress *p)
{
    phases *ph = user;
    phase_row *r = ph->n ? &ph->row[ph->n - 1] : NULL;
    if (!r || strcmp(r->name, p->phase) != 0) {
        if (ph->n == 16)
            return;
        r = &ph->row[ph->n++];
        memset(r, 0, sizeof *r);
        r->name = p->phase;
    }
    double w = now_s(), c = cpu_s();
    r->replays += p->replays - ph->replays;
    r->events += p->events - ph->events;
    r->wall += w - ph->wall;
    r->cpu += c - ph->cpu;
    ph->replays = p->replays;
    ph->events = p->events;
    ph->wall = w;
    ph->cpu = c;
}

static int cmd_phases(int argc, char **argv)
{
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    int i = 0;
    if (argc >= 2 && strcmp(argv[0], "--threads") == 0) {
        o.threads = (unsigned)strtoul(argv[1], NULL, 10);
        i = 2;
    }
    if (i + 1 != argc) {
        fprintf(stderr, "usage: bench_tune phases [--threads N] TRACE\n");
        return 2;
    }
    sublet_trace *t;
    double w0 = now_s(), c0 = cpu_s();
    if (load(argv[i], &t) != 0)
        return 1;
    phases ph;
    memset(&ph, 0, sizeof ph);
    ph.wall = now_s();
    ph.cpu = cpu_s();
    printf("load: %.2f s wall, %.2f s CPU\n", ph.wall - w0, ph.cpu - c0);
    o.progress_to = on_progress;
    o.progress_user = &ph;
    const sublet_trace *ts[1] = {t};
    sublet_tune_result r;
    sublet_status st = sublet_tune(ts, 1, &o, &r);
    on_progress(&ph, &(sublet_tune_progress){.phase = "(rest)", .replays = r.replays,
                                             .events = ph.events});
    printf("%zu settings, %zu distinct, %" PRIu64 " replays, %.2f s: %s\n", r.space, r.distinct,
           r.replays, r.seconds, sublet_status_name(st));
    printf("%-24s %8s %14s %9s %9s\n", "phase", "replays", "events", "wall s", "CPU s");
    for (size_t k = 0; k < ph.n; k++)
        printf("%-24s %8" PRIu64 " %14" PRIu64 " %9.2f %9.2f\n", ph.row[k].name,
               ph.row[k].replays, ph.row[k].events, ph.row[k].wall, ph.row[k].cpu);
    sublet_tune_result_free(&r);
    unload(t);
    return st == SUBLET_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "grid") == 0)
        return cmd_grid(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "speed") == 0)
        return cmd_speed(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "phases") == 0)
        return cmd_phases(argc - 2, argv + 2);
    if (argc == 4 && strcmp(argv[1], "synth") == 0) {
        sublet_trace *s = synthetic((size_t)strtoull(argv[2], NULL, 10));
        int rc = s && write_csv(s, argv[3]) == 0 ? 0 : 1;
        sublet_trace_free(s);
        return rc;
    }
    fprintf(stderr, "usage: bench_tune grid [--threads N] [--set] TRACE...\n"
                    "       bench_tune speed [--events N] [TRACE...]\n"
                    "       bench_tune synth N OUT.csv\n"
                    "       bench_tune phases [--threads N] TRACE\n");
    return 2;
}
