/* sublet — fragmentation of any state: a live allocator, a trace replayed to
 * any event, or a snapshot's segments.
 *
 * The engine keeps the metrics of sublet_frag_read() live (sublet/sublet.h).
 * This header computes the same metrics, and more, from a copy of the
 * segments and blocks (a "state"):
 *
 *   - sublet_frag_compute():   sublet_frag_stats per pool and per stream, with
 *                              sublet_frag_read()'s meaning, from the blocks;
 *   - sublet_frag_histogram(): free blocks by size, log2 buckets;
 *   - sublet_frag_pinning():   the segments that pin memory: mostly free, yet
 *                              held by a few live blocks;
 *   - sublet_frag_format_*():  the fragmentation section of the summary, the
 *                              segment map drawn in text, flat "key value"
 *                              lines;
 *   - sublet_oom_diagnose():   after an OOM, why (fragmentation or
 *                              exhaustion) and which segments pin the memory,
 *                              with their live blocks and allocation stacks;
 *   - sublet_frag_series_run(): memory and fragmentation after every event of
 *                              a replayed trace, reduced to min/max buckets;
 *   - sublet_frag_diagnose_trace(): every OOM of a replay, and which settings
 *                              would have avoided it (the trace replayed under
 *                              each candidate).
 *
 * The library never prints: texts go to the caller's buffer with snprintf
 * semantics (the length that was, or would have been, written). */
#ifndef SUBLET_FRAG_H
#define SUBLET_FRAG_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/config.h"
#include "sublet/frag_state.h"
#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The state, its metrics and texts, and the OOM diagnosis of a live allocator:
 * sublet/frag_state.h (included above).  Here: the states of snapshots and
 * replayed traces, the series, and which settings avoid a trace's OOMs. */

/* ---- a snapshot's state --------------------------------------------------------- */
/* The segments of one device of a snapshot (no stacks: they are in its trace;
 * a replay of sublet_snapshot_trace() recovers them).  Settings from the
 * snapshot's allocator_settings. */
SUBLET_API sublet_status sublet_frag_from_snapshot(const sublet_snapshot *s, int64_t device,
                                                   sublet_frag_state **out);

/* ---- over a replayed trace -------------------------------------------------------- */
/* Each call over a whole trace here is its _stream twin over a stream of the
 * in-memory array (sublet_trace_stream_from_trace): one body per pair. */
/* The state after event `event` (SUBLET_REPLAY_ALL: the last one) of a replay
 * of t under o (NULL: defaults; o's stop_after, on_finish and recording are
 * replaced), with allocation stacks when the trace has them.  *r (optional)
 * receives the replay's result (free it with sublet_replay_result_free). */
SUBLET_API sublet_status sublet_frag_state_at(const sublet_trace *t, const sublet_replay_options *o,
                                              uint64_t event, sublet_frag_state **out,
                                              sublet_replay_result *r, char *err, size_t err_cap);

/* The same over a stream (sublet/trace_stream.h), replayed from its first
 * row (it is rewound first): memory bounded by the live state. */
SUBLET_API sublet_status sublet_frag_state_at_stream(sublet_trace_stream *t,
                                                     const sublet_replay_options *o,
                                                     uint64_t event, sublet_frag_state **out,
                                                     sublet_replay_result *r, char *err,
                                                     size_t err_cap);

/* sublet_replay_stream (from where the stream stands: it is not rewound) and,
 * in the same pass, the state at the replay's end into *frag: what
 * sublet_frag_state_at_stream(t, o, o->stop_after, ...) gives after it, for
 * one replay instead of two.  *frag is NULL when the replay fails or the
 * state cannot be copied (the replay's status is returned either way).
 * o->on_finish, when set, is called first, on the allocator as the replay
 * left it.  A trace with stacks (the state names the live blocks' stacks,
 * which takes a recording replay) or o->record on: the state comes from a
 * second pass, as sublet_frag_state_at_stream. */
SUBLET_API sublet_status sublet_frag_replay_stream(sublet_trace_stream *t,
                                                   const sublet_replay_options *o,
                                                   sublet_replay_result *r,
                                                   sublet_frag_state **frag,
                                                   char *err, size_t err_cap);

/* Series measured after every event, in SUBLET_FRAG_SERIES_* order. */
enum {
    SUBLET_FRAG_SERIES_ALLOCATED = 0, /* allocated_bytes (rounded blocks) */
    SUBLET_FRAG_SERIES_RESERVED,      /* reserved_bytes */
    SUBLET_FRAG_SERIES_REQUESTED,     /* live requested bytes: the lower bound */
    SUBLET_FRAG_SERIES_ACTIVE,        /* active_bytes */
    SUBLET_FRAG_SERIES_LARGEST_FREE,  /* largest free block */
    SUBLET_FRAG_SERIES_FREE_BLOCKS,   /* number of free blocks */
    SUBLET_FRAG_SERIES_EXTERNAL,      /* 1 - largest free / free */
    SUBLET_FRAG_SERIES_UNUSED,        /* 1 - active / reserved */
    SUBLET_FRAG_SERIES_COUNT
};
SUBLET_API const char *sublet_frag_series_name(int series);

typedef struct sublet_frag_series {
    uint64_t events;   /* trace events covered: indices 0 .. events-1 */
    size_t nbuckets;   /* bucket k covers events [k*events/nbuckets, (k+1)*events/nbuckets) */
    /* [series * nbuckets + k]: the smallest, largest and last value measured
     * in bucket k (every event, and every step inside an event, counts). */
    double *min, *max, *last;
    uint64_t *oom_events; /* events whose alloc failed, ascending */
    size_t nooms;
    /* The series is computed from the engine's own event record; at the end it
     * is checked against the replayed allocator's state (sublet_frag_read):
     * exact = 1 when every total and free-block count agreed. */
    int exact;
    char mismatch[256];
} sublet_frag_series;

/* Replay t under o (NULL: defaults; o's recording, on_finish and observers
 * are replaced, its on_oom is still called) and measure the series after every event,
 * reduced to at most max_buckets buckets (0: 2000).  *r (optional) receives
 * the replay's result. */
SUBLET_API sublet_status sublet_frag_series_run(const sublet_trace *t,
                                                const sublet_replay_options *o,
                                                size_t max_buckets, sublet_frag_series *out,
                                                sublet_replay_result *r, char *err, size_t err_cap);
/* The same over a stream (sublet/trace_stream.h), in memory for the live
 * state and the buckets: one pass counts its rows (none when it has a trace
 * behind it), then it is rewound for the prelude's state and the replay.
 * o's observers are replaced too. */
SUBLET_API sublet_status sublet_frag_series_run_stream(sublet_trace_stream *ts,
                                                       const sublet_replay_options *o,
                                                       size_t max_buckets, sublet_frag_series *out,
                                                       sublet_replay_result *r, char *err,
                                                       size_t err_cap);
SUBLET_API void sublet_frag_series_free(sublet_frag_series *s);

/* ---- which settings would have avoided the OOMs ------------------------------------ */
/* The candidate settings tried by default, NULL-terminated: the
 * max_split_size_mb values 128, 256 and 512; roundup_power2_divisions 4 and
 * [256:1,512:2,1024:4,>:8]; expandable_segments:True; policy:stitch;
 * garbage_collection_threshold:0.6 with per_process_memory_fraction:0.999 (the
 * threshold acts only under a fraction). */
SUBLET_API const char *const *sublet_frag_default_candidates(void);

typedef struct sublet_frag_candidate {
    const char *setting;           /* the candidate, as listed */
    char conf[512];                /* what was replayed: the base settings, then it */
    sublet_status status;          /* of the replay (SUBLET_ERR_UNSUPPORTED: cannot be replayed) */
    char error[256];
    uint64_t ooms;                 /* OOMs of that replay */
    uint64_t first_oom_event;      /* SUBLET_REPLAY_NONE when none */
    uint64_t peak_reserved_bytes;
    uint64_t *oom_events;          /* ascending */
    size_t noom_events;
    /* The smallest device that runs the trace under `conf`, as `sublet mincap
     * --conf CONF` finds it (sublet_replay_min_capacity); 0 when not searched
     * (no OOM, a replay that failed, or the search failed). */
    uint64_t min_capacity_bytes;
} sublet_frag_candidate;

typedef struct sublet_frag_oom {
    uint64_t event, line, size;    /* the trace event, its source line, the request */
    sublet_stream stream;
    char *message;                 /* the engine's OOM message */
    char *diagnosis;               /* sublet_oom_diagnose() at that point, or NULL
                                    * (only the first max_detailed OOMs) */
    int fragmentation;             /* 1 fragmentation, 0 exhaustion */
    uint64_t pool_id[2];           /* the pool the request went to ((0, 0): the
                                    * default pools) */
    uint32_t frames;               /* the request's stack (sublet_trace_stack), 0: none */
    size_t group;                  /* the index of its group in the diagnosis' groups,
                                    * SIZE_MAX: a group not listed */
} sublet_frag_oom;

/* OOMs alike: the same kind, size, stream, pool and stack (the stack when the
 * trace has them).  `first` is the first of them, diagnosed with its pinning
 * segments for the first max_detailed groups; `stack` its stack as text (one
 * frame a line, innermost first; NULL: none). */
typedef struct sublet_frag_oom_group {
    sublet_frag_oom first;
    char *stack;
    uint64_t number;               /* first's place among all the OOMs, from 1 */
    uint64_t count;                /* OOMs in the group, first included */
    uint64_t *events;              /* the event of each, ascending (count entries) */
} sublet_frag_oom_group;

typedef struct sublet_frag_diagnosis {
    char conf[512];                /* the base settings */
    uint64_t device_memory;
    uint64_t ooms;                 /* OOMs of the base replay */
    uint64_t peak_reserved_bytes;  /* of the base replay */
    sublet_frag_oom *oom;          /* the first max_listed of them */
    size_t noom;
    sublet_frag_candidate *candidates;
    size_t ncandidates;
    sublet_frag_oom_group *groups; /* the first max_listed groups of alike OOMs,
                                    * by their first OOM */
    size_t ngroups;
    uint64_t groups_all;           /* groups in all (more than ngroups: some not listed) */
    /* The smallest device that runs the trace under the base settings (as
     * `sublet mincap --conf CONF` finds it; 0: not searched: no OOM, or
     * dopt's no_min_capacity, or the search failed), and the candidate with
     * the smallest one (SIZE_MAX: none searched). */
    uint64_t min_capacity_bytes;
    size_t best_capacity;
} sublet_frag_diagnosis;

typedef struct sublet_frag_diagnose_options {
    const char *const *candidates; /* NULL-terminated; NULL = the default list */
    size_t max_detailed;           /* groups of OOMs whose first OOM is diagnosed with its
                                    * pinning segments; 0 = 3 */
    size_t max_listed;             /* OOMs listed, and groups of OOMs; 0 = 32 */
    int no_min_capacity;           /* 1: no search of the device needed */
} sublet_frag_diagnose_options;

/* Replay t under o (NULL: defaults; stop_after, on_oom, on_finish, the
 * observers and recording are replaced), list its OOMs and group the alike
 * ones, diagnose the first OOM of the first groups at the state it left (a
 * replay to each), then replay t under every candidate, on the same device,
 * and record which OOMs each one avoids; last, unless dopt says not to, find
 * the smallest device that runs the trace under the base settings and under
 * each candidate (sublet_replay_min_capacity, 2 MiB resolution).  *d is
 * filled even without OOMs (then no candidate is tried).  Free with
 * sublet_frag_diagnosis_free. */
SUBLET_API sublet_status sublet_frag_diagnose_trace(const sublet_trace *t,
                                                    const sublet_replay_options *o,
                                                    const sublet_frag_diagnose_options *dopt,
                                                    sublet_frag_diagnosis *d, char *err,
                                                    size_t err_cap);
/* The same over a stream, rewound before each of its replays. */
SUBLET_API sublet_status sublet_frag_diagnose_stream(sublet_trace_stream *t,
                                                     const sublet_replay_options *o,
                                                     const sublet_frag_diagnose_options *dopt,
                                                     sublet_frag_diagnosis *d, char *err,
                                                     size_t err_cap);
/* Does candidate c avoid OOM number k of d (its event has no OOM there)? */
SUBLET_API int sublet_frag_candidate_avoids(const sublet_frag_candidate *c, uint64_t event);
/* The report: each group of alike OOMs (its first OOM's message and
 * diagnosis, the events of the others), then a table of the candidates (OOMs
 * avoided, peak reserved, device needed) and the verdict, with the device
 * needed under the base settings and under the best candidate. */
SUBLET_API size_t sublet_frag_diagnosis_format(const sublet_frag_diagnosis *d, char *buf,
                                               size_t cap);
SUBLET_API void sublet_frag_diagnosis_free(sublet_frag_diagnosis *d);

#ifdef __cplusplus
}
#endif
#endif
