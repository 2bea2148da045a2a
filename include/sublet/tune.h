/* sublet — tuning the allocator settings from recorded traces.
 *
 * sublet_tune() replays one or more traces under every setting of a fixed,
 * documented search space and recommends two settings strings: the best one
 * made of PyTorch's own knobs only (for PYTORCH_CUDA_ALLOC_CONF, PyTorch's
 * allocator kept) and the best one overall, sublet's policies included (for
 * SUBLET_ALLOC_CONF).  docs/tune.md walks through the workflow.
 *
 * The search space (sublet_tune_space enumerates it, simplest first):
 *
 *   base                     native | expandable_segments:True | policy:stitch
 *   max_split_size_mb        unset, 32, 64, 128, 256, 512, 1024
 *   max_non_split_rounding_mb  default (20), 64, 256, 1024 — only with
 *                            max_split_size_mb set (it has no effect otherwise)
 *   roundup_power2_divisions off, 2, 4, 8, 16, [256:1,512:2,1024:4,>:8],
 *                            [64:8,128:2,256:2,512:2,1024:1,>:1]
 *   garbage_collection_threshold  off, 0.6, 0.8, 0.95, each with
 *                            per_process_memory_fraction:0.999 (PyTorch runs
 *                            the collector only under a memory fraction below
 *                            1) — native base only: the collector never
 *                            touches virtual-memory segments, so with
 *                            expandable segments or policy:stitch it would
 *                            only lower the limit.
 *
 * That is 700 native, 175 expandable and 175 stitch settings; the PyTorch
 * answer is searched among the first 875, the sublet answer among all 1050.
 *
 * Private pools (CUDA graphs, MemPool: rows with a pool id, docs/pools.md)
 * are structure, not a setting: every candidate replays each allocation in
 * the pool it was recorded in (sublet/replay.h), so no setting moves memory
 * between pools.  policy:stitch does not take private pools: with any trace
 * in private pools the space is the first 875 settings.
 *
 * The objective, for a set of traces T and a setting c:
 *
 *   M(c)    = max over t in T of mincap_t(c), where mincap_t is the smallest
 *             device (a multiple of 2 MiB) on which trace t replays under c
 *             without an OOM (the bisection of sublet_replay_min_capacity).
 *             Several traces are several ranks or several batch shapes of one
 *             job: the device must hold each of them, so the maximum.
 *   cost(c) = sum over t in T of the cost of replaying t under c on the
 *             user's device (device_memory): every device call the run makes
 *             (cudaMalloc/cudaFree, VA reserve/release, page map/unmap) and
 *             every allocation retry, weighted by the cost model below.  The
 *             calls that rebuild the trace's prelude (the state that existed
 *             before recording began) are not counted.  The sum: the calls of
 *             every rank or every shape are all paid.
 *
 *   A setting that does not run a trace on the user's device is not
 *   recommended (unless none does: then only M is compared).  Among the
 *   rest, the recommendation is the cheapest setting whose M is within
 *   `band` (0.5 %) of the best M of its family; ties go to the smaller M,
 *   then to the simpler setting (earlier in the enumeration).  Settings that
 *   trade memory for device calls are reported as the Pareto set of
 *   (M, cost), never silently preferred.
 *
 * The search is exact over the space (the answer is what an exhaustive
 * evaluation of every setting gives, up to the monotonicity that the
 * bisection itself assumes) but does far fewer replays: settings that
 * provably replay identically are merged (roundup values that round every
 * request of the traces the same, max_split_size_mb values above every
 * block the run can hold, max_non_split_rounding_mb when no request reaches
 * max_split_size_mb, a garbage collector that never fires on the user's
 * device); a lower bound on M (the peak of the live requests rounded as the
 * setting rounds them) discards settings without a replay; the Pareto walk
 * visits settings cheapest first and probes each one once at the best M
 * found so far, bisecting only those that beat it, from the best known
 * bounds; replays run in `threads` threads.  The library is thread-safe and
 * never prints.
 *
 * With the answer it also derives a warm-up plan (sublet_tune_plan below):
 * the segments to reserve when the allocator is created (the `warmup` option,
 * sublet_reserve) so that the run makes no device allocation at all. */
#ifndef SUBLET_TUNE_H
#define SUBLET_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/replay.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SUBLET_TUNE_CONF_MAX 256
#define SUBLET_TUNE_CAUSE_MAX 1024

/* ---- the cost model (microseconds) ----------------------------------------
 * Defaults and where they come from: docs/tune.md.  In short: a cudaMalloc
 * costs 35 µs plus 64 µs per GiB (RMM PRs #283/#284: ≈33–38 µs per
 * cudaMalloc/cudaFree of ≤ 2 MiB; ray PR #56882: 0.63 ms for a new 10 GB
 * segment), a cudaFree 35 µs, an allocation retry 1000 µs for the device-wide
 * synchronisation it starts with (assumed), a VA reserve or release 10 µs
 * (assumed), and each physical page mapped or unmapped 35 µs (PyTorch PR
 * #96995: the cost is per physical chunk, ten 2 MiB pages cost ten times one
 * 20 MiB chunk). */
typedef struct sublet_tune_cost_model {
    double malloc_us;         /* per cudaMalloc call */
    double malloc_us_per_gib; /* plus this per GiB it allocates */
    double free_us;           /* per cudaFree call */
    double retry_us;          /* per allocation retry (synchronize all streams) */
    double reserve_us;        /* per cuMemAddressReserve */
    double release_us;        /* per cuMemAddressFree */
    double map_us;            /* per physical page created and mapped */
    double unmap_us;          /* per physical page unmapped and released */
} sublet_tune_cost_model;

SUBLET_API void sublet_tune_cost_model_default(sublet_tune_cost_model *m);
/* Apply "key=value,key=value" (also newline- or space-separated; '#' starts a
 * comment to the end of the line) on top of *m.  Keys are the field names
 * above.  SUBLET_ERR_PARSE with the reason in err; *m unchanged then. */
SUBLET_API sublet_status sublet_tune_cost_model_parse(sublet_tune_cost_model *m, const char *text,
                                                      char *err, size_t err_cap);

/* ---- the search space --------------------------------------------------------- */
#define SUBLET_TUNE_PYTORCH_ONLY 1u /* leave policy:stitch out */

/* The settings strings of the search space, in enumeration order (simplest
 * first; index 0 is "", PyTorch's defaults).  Writes up to cap of them to
 * confs (which may be NULL) and returns how many there are. */
SUBLET_API size_t sublet_tune_space(unsigned flags, char (*confs)[SUBLET_TUNE_CONF_MAX],
                                    size_t cap);

/* ---- options ------------------------------------------------------------------- */
/* Where a search stands, for a progress line (sublet_tune_options.progress_to). */
typedef struct sublet_tune_progress {
    const char *phase;       /* "cost", "search PyTorch", "search sublet", "check", "plan" */
    uint64_t replays;        /* replays run so far (partial ones included) */
    uint64_t replays_est;    /* an estimate of the total (never below replays) */
    uint64_t events;         /* events replayed so far, over every replay */
    size_t candidates_left;  /* settings the phase has still to decide */
    double seconds;          /* since sublet_tune began */
    double seconds_left;     /* an estimate (replays left at the rate so far); < 0: unknown */
} sublet_tune_progress;

typedef struct sublet_tune_options {
    /* The user's device in bytes; 0 = the largest device the traces recorded
     * (sublet_trace_device_memory), else 80 GiB. */
    uint64_t device_memory;
    sublet_tune_cost_model cost;
    unsigned threads;    /* replays run in parallel; 0 = every online core */
    uint64_t resolution; /* bisection step; 0 = 2 MiB */
    double band;         /* 0 = 0.005: "within 0.5 % of the best M" */
    /* The replays' prelude mode (sublet_replay_options.prelude). */
    int prelude;
    /* The settings each trace ran with, one per trace (NULL entries, or a NULL
     * array: what the trace recorded, sublet_trace_settings, else ""). */
    const char *const *current;
    /* 1: evaluate every setting fully (no merging, no pruning) — slow; for
     * checking the search. */
    int exhaustive;
    /* 0: skip the fragmentation diagnosis (two recorded replays). */
    int diagnose;
    /* 0: skip the warm-up plan (sublet_tune_result.plan). */
    int warmup;
    /* Progress: called from the calling thread with the replays done and
     * an estimate of the total; may be NULL. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    /* The same moments with more (phase, events, candidates left, time
     * left); called with progress_user from the calling thread; may be NULL. */
    void (*progress_to)(void *user, const sublet_tune_progress *p);
    /* Polled between replays (from any of the search's threads): nonzero
     * stops the search, sublet_tune returns SUBLET_ERR_CANCELLED with the
     * best answers found so far (sublet_tune_result.partial); may be NULL. */
    int (*cancel)(void *user);
    void *cancel_user;
    /* The cost runs (step 2) after the defaults' stop once their cost
     * passes cost_cutoff times the defaults' cost (0: 32; a negative value:
     * never): the walks take them after every finished one and probe them
     * at the best M; when one passes, they are run to their end and the
     * walks go on over their costs: the result is the full runs' (docs/tune.md §9). */
    double cost_cutoff;
    /* The user's PyTorch release ("2.6", ...; NULL: the newest behaviour):
     * every replay runs under pytorch_version:X before the candidate's own
     * settings (docs/versions.md); the answers' strings do not carry it, and
     * are as that release takes them (sublet_tune_conf_adapt). */
    const char *pytorch_version;
} sublet_tune_options;

/* Defaults: device from the traces, default cost model, every core, 2 MiB,
 * 0.5 %, diagnosis and warm-up plan on. */
SUBLET_API void sublet_tune_options_init(sublet_tune_options *o);

/* ---- results -------------------------------------------------------------------- */
typedef struct sublet_tune_calls {
    uint64_t segment_allocs, segment_frees; /* cudaMalloc / cudaFree calls */
    uint64_t malloc_bytes;                  /* bytes asked of cudaMalloc */
    uint64_t va_reserves, va_releases;      /* cuMemAddressReserve / Free */
    uint64_t va_maps, va_unmaps;            /* map / unmap calls */
    uint64_t map_pages, unmap_pages;        /* physical pages behind them */
    uint64_t retries;                       /* allocation retries (sync + free all) */
} sublet_tune_calls;

/* Every device call (allocs, frees, reserves, releases, maps, unmaps). */
SUBLET_API uint64_t sublet_tune_calls_total(const sublet_tune_calls *c);
/* The cost of c under m, in microseconds. */
SUBLET_API double sublet_tune_calls_cost(const sublet_tune_calls *c,
                                         const sublet_tune_cost_model *m);

/* One trace under one setting. */
typedef struct sublet_tune_trace_eval {
    uint64_t events;               /* rows of the trace, the prelude's included */
    uint64_t peak_requested_bytes; /* peak live requested bytes: the floor */
    uint64_t min_capacity_bytes;   /* smallest device that runs it (0: not computed) */
    double overhead;               /* min_capacity / peak_requested - 1 */
    /* the min capacity's probes were monotone (sublet_mincap_result) and
     * the smallest size that ran (below min_capacity_bytes when not) */
    int monotone;
    uint64_t smallest_ok_bytes;
    /* On the user's device (a whole replay there: the check of an answer): */
    int fits;                      /* ran without an OOM */
    uint64_t ooms;
    uint64_t first_oom_event;      /* its row index; SUBLET_REPLAY_NONE: none (or the
                                    * prelude did not fit) */
    uint64_t peak_reserved_bytes;
    uint64_t segments_created;     /* cudaMalloc + map calls after the prelude */
    sublet_tune_calls calls;       /* after the prelude */
    double cost_us;
} sublet_tune_trace_eval;

/* One setting over all the traces. */
typedef struct sublet_tune_eval {
    char conf[SUBLET_TUNE_CONF_MAX];
    int pytorch;                   /* PyTorch knobs only */
    uint64_t min_capacity_bytes;   /* M: the max over the traces */
    uint64_t peak_requested_bytes; /* max over the traces */
    double overhead;               /* M / peak_requested - 1 */
    double cost_us;                /* summed over the traces */
    uint64_t device_calls;         /* summed */
    uint64_t retries;              /* summed */
    uint64_t peak_reserved_bytes;  /* max over the traces, on the user's device */
    int fits;                      /* every trace runs on the user's device */
    int monotone;                  /* every trace's min capacity probes were monotone */
    size_t ntraces;
    sublet_tune_trace_eval *per_trace; /* ntraces entries (malloc'd), or NULL */
    /* An answer or a Pareto point of sublet_tune: conf is as the release of
     * sublet_tune_options.pytorch_version takes it (sublet_tune_conf_adapt);
     * fraction_call > 0: also call torch.cuda.set_per_process_memory_fraction
     * (fraction_call) before the first CUDA allocation (that release has no
     * per_process_memory_fraction option); oldest_release: the oldest release
     * that takes conf, with every later one (SUBLET_PYTORCH_VERSION).  The
     * current settings and sublet_tune_evaluate: conf as given, 0, 0. */
    double fraction_call;
    uint32_t oldest_release;
} sublet_tune_eval;

SUBLET_API void sublet_tune_eval_free(sublet_tune_eval *e);

/* Evaluate one setting exactly, the plain way: per trace,
 * sublet_replay_min_capacity and a replay on the device (the reference the
 * grid check compares sublet_tune with).  `current` in o is ignored. */
SUBLET_API sublet_status sublet_tune_evaluate(const sublet_trace *const *traces, size_t n,
                                              const char *conf,
                                              const sublet_tune_options *o, sublet_tune_eval *out,
                                              char *err, size_t err_cap);

/* ---- an answer as a release takes it ------------------------------------------------
 * The search space spells the collector's memory fraction
 * per_process_memory_fraction:F, an option PyTorch 2.9 added
 * (docs/versions.md): 2.6 to 2.8 refuse the whole string at the first CUDA
 * allocation ("Unrecognized CachingAllocator option:
 * per_process_memory_fraction").  For such a release a PYTORCH_CUDA_ALLOC_CONF
 * answer (SUBLET_TUNE_FOR_PYTORCH) drops the entry, and the fraction becomes
 * the call torch.cuda.set_per_process_memory_fraction(F) made before the first
 * allocation; a SUBLET_ALLOC_CONF answer (SUBLET_TUNE_FOR_SUBLET) spells it
 * sublet's memory_fraction:F, the same call under every release.  A release
 * that has the option keeps the string as it is. */
#define SUBLET_TUNE_FOR_PYTORCH 0 /* PYTORCH_CUDA_ALLOC_CONF, read by PyTorch */
#define SUBLET_TUNE_FOR_SUBLET 1  /* SUBLET_ALLOC_CONF, read by sublet */

typedef struct sublet_tune_conf_form {
    char conf[SUBLET_TUNE_CONF_MAX]; /* the variable's value for the release */
    double fraction_call;            /* > 0: also the call, with this fraction */
    /* the oldest release whose parser takes conf, and every later one's
     * (SUBLET_PYTORCH_VERSION); SUBLET_PYTORCH_NEWEST: the newest refuses it */
    uint32_t oldest_release;
} sublet_tune_conf_form;

/* conf for `target` as release `pytorch_version` ("2.6"; NULL or "": the
 * newest) takes it, checked by sublet's parser under that release.
 * SUBLET_ERR_CONFIG with the parser's text (a bad version, or a string the
 * release refuses for another reason), SUBLET_ERR_INVALID_ARGUMENT for a
 * NULL argument, an unknown target or a result too long; *out is zeroed
 * then. */
SUBLET_API sublet_status sublet_tune_conf_adapt(const char *conf, int target,
                                                const char *pytorch_version,
                                                sublet_tune_conf_form *out, char *err,
                                                size_t err_cap);

/* ---- the warm-up plan ------------------------------------------------------------
 * The segments to reserve at start (the `warmup` option of SUBLET_ALLOC_CONF,
 * applied with sublet_reserve when the allocator is created) so that the run
 * makes no device allocation after them, derived exactly by replay under
 * one setting:
 *
 *   1. replay every trace under the setting: the segments it holds at the end
 *      on the default stream (native policy: each segment's pool and size;
 *      expandable segments: the pages mapped in each pool) are the plan;
 *   2. replay with the plan reserved first: segments the run still creates
 *      (best fit may use the plan's segments differently from segments made
 *      on demand) are added, per (pool, size) the most any trace holds;
 *   3. repeat until the plan stops growing (at most 8 rounds).
 *
 * The goal is the stronger one: no device allocation at all after the plan,
 * from the first event on (not only after a first iteration), checked by a
 * last replay that counts them.  What a plan cannot remove is counted and
 * said: segments the run returns to the device (its empty_cache calls, the
 * OOM path, the garbage collector) and allocates again, and those of other
 * streams (a stream is a cudaStream_t, not the same value in another run:
 * the plan reserves for the default stream only).  A trace recorded mid-run
 * under the adopt prelude starts with the segments it adopted: the plan adds
 * what the recorded part needs on top of them.  policy:stitch maps pages
 * where it stitches them and has no plan (SUBLET_ERR_UNSUPPORTED). */
#define SUBLET_TUNE_PLAN_MAX 2048

typedef struct sublet_tune_plan {
    sublet_status status; /* SUBLET_OK: derived; else why not (see note) */
    char note[512];       /* why not derived, or why allocations remain; "" */
    char conf[SUBLET_TUNE_CONF_MAX];  /* the setting the plan goes with (after sublet_tune:
                                        * as the release takes it, sublet_tune_conf_adapt) */
    char option[SUBLET_TUNE_PLAN_MAX]; /* "warmup:[large:512MiB*2,...]" */
    /* conf and option together: the SUBLET_ALLOC_CONF value to use */
    char env[SUBLET_TUNE_PLAN_MAX + SUBLET_TUNE_CONF_MAX];
    size_t nentries;
    sublet_warmup_entry entries[SUBLET_WARMUP_MAX];
    /* What applying it costs, once per process (at allocator creation): */
    uint64_t plan_bytes;   /* reserved */
    uint64_t plan_calls;   /* device calls it makes (cudaMalloc, or VA reserve + map) */
    double plan_cost_us;   /* their cost under the cost model */
    /* Over the traces (peaks: the max; counts and costs: the sum), the run
     * without the plan and with it, after the prelude as the cost model: */
    uint64_t peak_reserved_bytes;      /* without the plan */
    uint64_t peak_reserved_with_plan;  /* with (the plan included) */
    uint64_t device_allocs_before;     /* cudaMalloc calls and page maps */
    uint64_t device_allocs_after;      /* beyond the plan's own: 0 when complete */
    uint64_t device_calls_before, device_calls_after; /* every device call */
    double cost_before_us, cost_after_us; /* the run's calls (the plan's not included) */
    int fits;              /* with the plan every trace runs on the user's device */
    unsigned rounds;       /* replay rounds to the fixed point */
    uint64_t frees_after;  /* segments (or unmaps) returned to the device with the plan */
    uint64_t other_stream_segments; /* held on other streams at the end: not covered */
    uint64_t prelude_segments, prelude_bytes; /* adopted at recording start: not in the plan */
} sublet_tune_plan;

/* The plan for the setting `conf` over the traces (o as for sublet_tune:
 * device_memory, prelude, cost; NULL for the defaults).  Returns out->status:
 * SUBLET_ERR_UNSUPPORTED for policy:stitch, SUBLET_ERR_INVALID_ARGUMENT,
 * a replay's error; out->note says why.  Deterministic. */
SUBLET_API sublet_status sublet_tune_plan_derive(const sublet_trace *const *traces, size_t n,
                                                 const char *conf, const sublet_tune_options *o,
                                                 sublet_tune_plan *out);

typedef struct sublet_tune_result {
    sublet_status status; /* SUBLET_OK, or why the tuning failed (see error) */
    char error[512];
    uint64_t device_memory; /* the user's device the cost was measured on */
    /* where device_memory came from: the options, the traces' recording,
     * or the 80 GiB default */
    enum { SUBLET_TUNE_DEVICE_GIVEN, SUBLET_TUNE_DEVICE_RECORDED, SUBLET_TUNE_DEVICE_DEFAULT }
        device_source;
    size_t ntraces;
    /* Traces with rows in private pools: their pools were kept fixed (and
     * policy:stitch left out of the space). */
    size_t private_pool_traces;
    /* The settings the traces ran with, evaluated the same way; each trace
     * under its own string (current_conf holds the first trace's). */
    sublet_tune_eval current;
    int current_recorded; /* 1 when every trace recorded its settings */
    sublet_tune_eval pytorch; /* the PYTORCH_CUDA_ALLOC_CONF answer */
    sublet_tune_eval sublet;  /* the SUBLET_ALLOC_CONF answer */
    /* What each answer fixes, one sentence tied to the trace (the first
     * trace where the answer changes something); "" when nothing changed. */
    char pytorch_cause[SUBLET_TUNE_CAUSE_MAX];
    char sublet_cause[SUBLET_TUNE_CAUSE_MAX];
    size_t pytorch_cause_trace, sublet_cause_trace; /* the trace each sentence is about */
    /* The warm-up plan for the SUBLET_ALLOC_CONF answer (for the PyTorch
     * answer when that one is policy:stitch, which has none). */
    sublet_tune_plan plan;
    /* The Pareto sets of (M, cost), cheapest first (per_trace NULL). */
    sublet_tune_eval *pareto_pytorch;
    size_t npareto_pytorch;
    sublet_tune_eval *pareto_sublet;
    size_t npareto_sublet;
    /* How the search went. */
    size_t space;        /* settings in the search space */
    size_t distinct;     /* after merging provably identical ones */
    size_t bound_pruned; /* discarded by the rounding lower bound alone */
    /* cost runs stopped past sublet_tune_options.cost_cutoff, and of them
     * those run to their end later (a walk reached one that passed) */
    size_t cost_runs_cut, cost_runs_completed;
    uint64_t replays;    /* replays run (partial ones included) */
    /* After SUBLET_ERR_CANCELLED: which answers hold the best found so far
     * (bit 1: pytorch, bit 2: sublet), from the search alone (conf,
     * min_capacity_bytes, cost and calls; per_trace NULL, no plan, no cause);
     * the cheapest Pareto point known within the band of the smallest M
     * known.  0 otherwise. */
    unsigned partial;
    double seconds;      /* wall time */
} sublet_tune_result;

/* Tune.  Fills *r (zeroed first) and returns r->status; release with
 * sublet_tune_result_free.  SUBLET_ERR_INVALID_ARGUMENT for no traces;
 * the replay's status when a trace cannot be replayed at all; SUBLET_ERR_OOM
 * when no setting runs a trace on any device the search tried. */
SUBLET_API sublet_status sublet_tune(const sublet_trace *const *traces, size_t n,
                                     const sublet_tune_options *o, sublet_tune_result *r);
/* sublet_tune over streams (sublet/trace_stream.h; the whole-trace call is
 * this over streams of the arrays): a stream read again cheaply
 * (sublet_trace_stream_rereadable) is read as it is, another is copied once
 * to a temporary binary file (64 bytes a row on disk; a malformed row is
 * the error, with the stream's text), and every replay, pass and check of
 * the search reads through a reader of its own, so that the memory follows
 * the live blocks, not the length of the traces.  The streams stay open
 * until the call returns; the same answers as sublet_tune on the traces
 * loaded whole. */
SUBLET_API sublet_status sublet_tune_streams(sublet_trace_stream *const *traces, size_t n,
                                             const sublet_tune_options *o,
                                             sublet_tune_result *r);
SUBLET_API void sublet_tune_result_free(sublet_tune_result *r);

#ifdef __cplusplus
}
#endif
#endif
