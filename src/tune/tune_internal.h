/* sublet — internals of the settings tuner (sublet/tune.h), shared by its
 * sources, one concern each:
 *
 *   tune_space.c    the cost model, the search space, options and results
 *   tune_source.c   the traces as sources read again: readers, passes, facts
 *   tune_eval.c     replays: the cost run, the probe, the plain evaluation,
 *                   a tiny parallel for
 *   tune_search.c   the search: merging settings that replay identically,
 *                   the rounding bound, tasks, bisection, the Pareto walk
 *   tune_explain.c  the "fixes" sentence, from two recorded replays
 *   tune_plan.c     the warm-up plan (sublet_tune_warmup)
 *   tune.c          sublet_tune: the steps in order
 *
 * Internal header: names here are tn_-prefixed (functions, tables). */
#ifndef SUBLET_TUNE_INTERNAL_H
#define SUBLET_TUNE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "sublet/config.h"
#include "sublet/replay.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"
#include "sublet/tune.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define DEFAULT_RESOLUTION (2 * MIB)
#define DEFAULT_BAND 0.005
#define NONE UINT64_MAX
#define MAX_THREADS 64
#define MAX_TRACES 64 /* traces one tune takes (checked at entry) */

/* ---- the search space (tune_space.c) ------------------------------------------------ */

enum { BASE_NATIVE, BASE_EXPANDABLE, BASE_STITCH, NBASE };
#define N_MS 7
#define N_NSR 4
#define N_RU 7
#define N_GC 4
#define GC_FRACTION "0.999"
/* least intrusive first: ties go to the earlier value */
extern const char *const tn_base_conf[NBASE];
extern const unsigned tn_ms_mb[N_MS];
extern const unsigned tn_nsr_mb[N_NSR];
extern const char *const tn_ru_conf[N_RU];
extern const char *const tn_gc_conf[N_GC];

typedef struct knobs {
    unsigned char base, ms, nsr, ru, gc;
} knobs;

void tn_knobs_conf(const knobs *k, char *out, size_t cap);
/* All settings of the space in enumeration order; returns the count. */
size_t tn_space_knobs(unsigned flags, knobs *out);
double tn_now_s(void);

/* ---- replays (tune_eval.c) ----------------------------------------------------------- */

typedef struct tfacts {
    sublet_trace_stream *src;       /* the rows, read through readers (tune_source.c) */
    const sublet_trace_event *pre;  /* the prelude (src's) */
    size_t npre;
    uint64_t rows;                  /* rows of the trace, the prelude's included */
    uint64_t peak_requested;    /* peak live requested bytes */
    uint64_t recorded_reserved; /* peak reserved as recorded */
    uint64_t max_pre_segment;   /* largest pre_segment / pre_alloc block */
    uint64_t device_memory;     /* as recorded (0: not) */
    const char *settings;       /* as recorded (NULL: not) */
    int private_pools;          /* a row names a private pool */
    const char *version;        /* sublet_tune_options.pytorch_version */
} tfacts;

/* The first index of the ascending v[0..n) whose value is >= key (n: none). */
static inline size_t tn_lower_bound(const uint64_t *v, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- the traces as sources (tune_source.c) ------------------------------------------ */

/* The traces of one call, each a stream read again cheaply: the caller's
 * own when it is one, else a binary copy made here (owned). */
typedef struct tn_sources {
    sublet_trace_stream *src[MAX_TRACES];
    unsigned char owned[MAX_TRACES];
    size_t n;
} tn_sources;
sublet_status tn_sources_of_traces(tn_sources *s, const sublet_trace *const *traces, size_t n);
sublet_status tn_sources_of_streams(tn_sources *s, sublet_trace_stream *const *in, size_t n,
                                    char *err, size_t err_cap);
void tn_sources_close(tn_sources *s);
/* The facts of the trace src holds (two passes over it). */
sublet_status tn_facts_get(sublet_trace_stream *src, tfacts *f, char *err, size_t err_cap);
/* A reader of f's rows of its own (close it). */
sublet_status tn_reader(const tfacts *f, sublet_trace_stream **r);
/* sublet_replay_stream of f under o, through a reader of its own. */
sublet_status tn_replay_options(const tfacts *f, const sublet_replay_options *o,
                                sublet_replay_result *r, char *err, size_t err_cap);
/* One pass over f's rows: the prelude, then the recorded rows in chunks;
 * fn(user, rows, count, index of the first) returns nonzero to stop. */
typedef int (*tn_rows_fn)(void *user, const sublet_trace_event *ev, size_t n, uint64_t first);
sublet_status tn_rows_each(const tfacts *f, tn_rows_fn fn, void *user, char *err,
                           size_t err_cap);
/* The rows at the n indices idx (ascending, below f->rows) into out, in one pass. */
sublet_status tn_rows_fetch(const tfacts *f, const uint64_t *idx, size_t n,
                            sublet_trace_event *out, char *err, size_t err_cap);
/* The facts of whole traces (each a stream over its array) under release
 * `version`: *out (free it) and src (close it).  On an error nothing is
 * held: the sources could not be made (err empty), or a trace's facts (err
 * says why). */
sublet_status tn_facts_of_traces(const sublet_trace *const *traces, size_t n, const char *version,
                                 tn_sources *src, tfacts **out, char *err, size_t err_cap);
/* The device recorded with the traces (the largest), else 80 GiB. */
uint64_t tn_default_device(const tfacts *f, size_t n);

/* The settings a replay of f runs under: conf, after "pytorch_version:V,"
 * when the user gave a version (into buf), else conf itself. */
#define TN_CONF_V_MAX (SUBLET_TUNE_CONF_MAX + 48)
const char *tn_conf_v(const char *version, const char *conf, char *buf, size_t cap);

/* ---- the answers as the release takes them (tune_release.c) ---------------------- */
/* conf as release `version` (NULL: the newest) takes it for `target`
 * (SUBLET_TUNE_FOR_PYTORCH / _SUBLET) into out (cap bytes); *fraction: the
 * fraction of the call that replaces the entry, or 0.  -1: too long. */
int tn_conf_release(const char *version, const char *conf, int target, char *out, size_t cap,
                    double *fraction);
/* The answers, the Pareto points and the warm-up plan of r, in place. */
void tn_release_forms(sublet_tune_result *r, const char *version);

/* What one run on the user's device measured. */
typedef struct drun {
    int fits;
    uint64_t ooms, errors, peak_reserved, segments;
    uint64_t first_oom; /* row index, NONE: none */
    sublet_tune_calls calls;
    double cost;
    uint64_t events; /* events the replays behind it drove */
    uint64_t same_from; /* the run's sublet_replay_result.same_from */
    int over; /* stopped once its cost passed the limit: the rest is the run so far */
} drun;

static inline uint64_t tn_sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* What a replay of tune runs: trace f under conf on a device of `cap`
 * bytes, its prelude as sublet_replay_options.prelude. */
typedef struct trun {
    const tfacts *f;
    const char *conf;
    uint64_t cap;
    int prelude;
} trun;

/* The options of that replay (vbuf: TN_CONF_V_MAX bytes for the settings). */
void tn_replay_init(const trun *w, int stop_on_oom, uint64_t stop_after, sublet_replay_options *o,
                    char *vbuf, size_t vcap);
/* One replay of w (stopping as sublet_replay_options' stop_on_oom and
 * stop_after). */
sublet_status tn_replay(const trun *w, int stop_on_oom, uint64_t stop_after,
                        sublet_replay_result *r, char *err, size_t err_cap);
/* Page sizes of the virtual-memory modes of conf (0: conf uses cudaMalloc). */
void tn_page_sizes(const char *conf, uint64_t *small_page, uint64_t *large_page);
/* The calls a replay made between r0 (after the prelude) and r (the end). */
void tn_calls_between(const char *conf, const sublet_replay_result *r,
                      const sublet_replay_result *r0, sublet_tune_calls *c);
/* The cost replay: the whole trace on `cap` bytes, minus the prelude's
 * calls; stopped (out->over) as soon as its cost passes `limit` (INFINITY:
 * never). */
sublet_status tn_cost_run(const trun *w, const sublet_tune_cost_model *m, double limit, drun *out,
                          uint64_t *replays, char *err, size_t err_cap);
/* A probe: does trace f run on `cap` bytes without an OOM (and without more
 * row errors than the reference)?  Stops at the first OOM, and when
 * unwanted->fn(unwanted->user) says its answer is no longer needed (asked
 * every 512 rows; NULL or no fn: never), then *ok 0 and *stopped 1. */
typedef struct tn_unwanted {
    int (*fn)(void *user);
    void *user;
} tn_unwanted;
sublet_status tn_probe_run(const trun *w, uint64_t errors_allowed, const tn_unwanted *unwanted,
                           int *ok, int *stopped, uint64_t *same_from, uint64_t *events,
                           char *err, size_t err_cap);
/* Bytes of the big device used as the reference when the user's is too
 * small (as sublet_replay_min_capacity). */
uint64_t tn_big_device(const tfacts *f);
void tn_eval_fold(sublet_tune_eval *e);
int tn_conf_is_pytorch(const char *conf);
/* One trace, one setting: plain min capacity + cost run (the cost run taken
 * from `known` when the search ran that very replay already: the same trace,
 * settings, device, prelude and cost model; NULL: replayed here). */
sublet_status tn_eval_one(const tfacts *f, const char *conf, uint64_t dev,
                          const sublet_tune_options *o, const drun *known,
                          sublet_tune_trace_eval *out, uint64_t *replays, char *err,
                          size_t err_cap);
/* fn(ctx, i) for i in [0, n) on `threads` threads (the caller's included). */
void tn_parallel_for(unsigned threads, size_t n, void (*fn)(void *, size_t), void *ctx);
/* tn_parallel_for on `threads` threads of its own while the caller calls
 * done(dctx, i) for each task i as it finishes (in the order they finish,
 * one at a time): the caller reports progress without a barrier between
 * rounds of tasks.  With one thread, fn then done for each in turn. */
void tn_parallel_for_watch(unsigned threads, size_t n, void (*fn)(void *, size_t), void *ctx,
                           void (*done)(void *, size_t), void *dctx);
/* `threads` as asked, or every online core for 0 (at most 64). */
unsigned tn_threads(unsigned threads);

/* ---- the search (tune_search.c) ------------------------------------------------------- */

typedef struct tstate { /* one setting on one trace */
    drun d;             /* on the user's device */
    uint64_t errors_allowed;
    uint64_t fail_at; /* largest device known to fail (0: none) */
    uint64_t ok_at;   /* smallest device known to work (NONE: none) */
    uint64_t lb;      /* every device below this fails (rounding bound) */
    /* every device from here on replays as a clean run did, so runs it (the
     * smallest sublet_replay_result.same_from of its clean replays; NONE) */
    uint64_t same_from;
} tstate;

typedef struct cand {
    knobs k;
    char conf[SUBLET_TUNE_CONF_MAX];
    int pytorch;
    size_t rep;        /* the setting it provably replays like (itself if distinct) */
    size_t gc_sibling; /* the same setting without the collector (GC variants) */
    int costed;
    int cost_ran; /* its cost run was replayed (not copied from a sibling) */
    /* its cost run stopped past x->cost_limit: the cost is above it (cost
     * INFINITY, walked last), fits and the rest unknown */
    int over;
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
    double cost_limit; /* cost runs stop past it (INFINITY: never) */
    size_t completed;  /* cost runs stopped past it, run to their end later */
    uint64_t replays, replays_est;
    uint64_t events;   /* events replayed (progress) */
    const char *phase; /* progress: the step running */
    size_t left;       /* progress: candidates the step has still to decide */
    double t0;         /* progress: when sublet_tune began */
    sublet_status st; /* first hard error (SUBLET_ERR_CANCELLED: cancelled) */
    char err[512];
    pthread_mutex_t lock;
} tctx;

typedef struct task {
    size_t c;   /* candidate */
    uint64_t x; /* device size (probe) */
    int kind;   /* 0 cost runs, 1 probe */
    /* results */
    int ok;
    signed char ran[MAX_TRACES]; /* per trace: 1 ok, -1 fail, 0 not run */
    uint64_t same_from[MAX_TRACES]; /* per trace: a clean run's same_from (NONE) */
    uint64_t replays, events;
    drun *d;                 /* cost tasks: per trace (caller's arrays) */
    uint64_t *errors_allowed;
    int over;                /* cost task: stopped past x->cost_limit */
} task;

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

void tn_progress(tctx *x);
/* Polls sublet_tune_options.cancel: 1 (and x->st SUBLET_ERR_CANCELLED) when
 * the search is to stop. */
int tn_cancelled(tctx *x);
/* conf parsed over the defaults, under the user's PyTorch version (NULL: newest) */
void tn_settings_of(const char *version, const char *conf, sublet_settings *s);
/* For each roundup value: the first value that rounds every request size of
 * the traces alike; the largest rounded and allocated sizes of each. */
sublet_status tn_roundup_classes(const tctx *x, unsigned *cls, uint64_t *max_round,
                                 uint64_t *max_alloc, char *err, size_t err_cap);
/* The peak of the live requests rounded as s rounds them. */
uint64_t tn_rounding_bound(const tfacts *f, const sublet_settings *s);
/* Run the tasks, then fold their results in, in order. */
void tn_run_tasks(tctx *x, task *t, size_t n);
/* The Pareto walk of one family and its answer: 1 found, -1 nothing runs,
 * 0 a hard error (x->st). */
int tn_walk_family(tctx *x, int pytorch_only, walk *w);
void tn_walk_free(walk *w);

/* ---- the explanation (tune_explain.c) -------------------------------------------------- */

void tn_fmt_size(uint64_t b, char *out, size_t cap);
/* One sentence: what `to` fixes in trace f compared with `from` (its two
 * recorded runs on `threads` threads). */
void tn_diagnose(const tfacts *f, const char *from, const char *to, uint64_t dev,
                 uint64_t to_mincap, int prelude, unsigned threads, char *out, size_t cap);

/* ---- the warm-up plan (tune_plan.c) ---------------------------------------------------- */

/* The plan for `conf` over the traces on the device `dev`, progress and
 * replays counted in *replays (see sublet_tune_plan_derive). */
sublet_status tn_plan(const tfacts *f, size_t n, const char *conf, uint64_t dev,
                      const sublet_tune_options *o, sublet_tune_plan *out, uint64_t *replays);

#endif
