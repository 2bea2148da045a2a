/* sublet — replaying a recorded trace through the engine.
 *
 * sublet_replay_run() builds a fresh `sim` backend and allocator, rebuilds the
 * trace's prelude (pre-existing segments and live blocks), then drives every
 * recorded event through the engine:
 *
 *   alloc           sublet_malloc(size, stream); the trace address is mapped
 *                   to the engine's (addresses are reused over time).
 *   free_requested  sublet_free.  When the trace's free_completed for that
 *                   address is not the very next event, PyTorch had pending
 *                   record_stream uses: the block is first marked used on a
 *                   fresh synthetic stream, so it stays pending...
 *   free_completed  ...until this row completes that stream, and the engine
 *                   finishes the free right there (sublet_process_events):
 *                   blocks come back in the order of these rows, as
 *                   PyTorch's process_events gave them back.
 *   segment_free, segment_unmap  a run of consecutive rows (of either kind)
 *                   is one release: sublet_empty_cache(); but a run right
 *                   before an oom row is that failed request's release, and
 *                   one right before a segment_alloc and its alloc, while
 *                   the garbage collector is over its threshold, is that
 *                   malloc's collection: the request is driven there.
 *   segment_alloc, segment_map  not driven (the engine decides); remembered
 *                   as the oracle for the alloc that follows them.
 *   snapshot, oom   ignored.
 *
 * Private pools (rows with a pool_id, docs/pools.md, docs/replay.md): an
 * alloc row in pool P is driven as PyTorch served it during a capture or
 * under use_mem_pool: the pool is created at its first row (use count 1),
 * and the malloc runs between sublet_pool_begin_allocate(P, stream filter,
 * the row's stream) and sublet_pool_end_allocate (+ release of that use),
 * so that it, and only it, goes to P with process_events and the OOM
 * path's release-all skipped as under a capture.  Frees return the block to
 * its own pool (the engine's rule).  Releasing a pool (graph reset, a
 * MemPool deleted) is not recorded; its trace is the segment_free of its
 * segments by a later empty_cache, which only frees a freeable pool's: so
 * before a release run that frees a segment of pool P, the replay drops P's
 * use (P freeable; its later rows are errors).  A prelude in a private pool
 * is allocated (SUBLET_PRELUDE_ALLOCATE) through its pool; it cannot be
 * adopted (refused, SUBLET_ERR_UNSUPPORTED).
 *
 * Fidelity: for every alloc, PyTorch's decision is what came just before it:
 * a segment_alloc row (a new segment), a run of segment_map rows (pages
 * mapped into an expandable segment, docs/rules.md §6.3) or neither (served from the
 * cache); the engine's is what it emitted during that malloc.  The decision
 * matches when both did the same of the three; the segment size matches when
 * both created a segment of the same size, the map size when both mapped the
 * same number of bytes.  Each release (a run of segment_free / segment_unmap
 * rows) matches when the engine freed and unmapped the very same set of
 * (kind, address, size) as the recording.
 *
 * Expandable segments: a trace recorded with expandable_segments:True
 * replays under it when the caller's settings say so (the CLI uses the
 * trace's recorded settings by default).  With placement hints, the
 * reservation the engine creates for an alloc is placed at the address of
 * the recorded first map (a reservation's first map is at its start).  A
 * trace recorded mid-run under expandable segments is refused with
 * SUBLET_PRELUDE_AUTO / _ADOPT (SUBLET_ERR_UNSUPPORTED, the reason in err):
 * a snapshot does not record where each reservation begins and ends, and
 * PyTorch maps new pages at the lowest unmapped address of it (§6.3), so the
 * state its decisions depend on cannot be rebuilt.  SUBLET_PRELUDE_ALLOCATE
 * replays it from an approximation (the live blocks allocated afresh).
 *
 * The library never prints: OOMs are reported through a callback, errors
 * through the err buffer and the result. */
#ifndef SUBLET_REPLAY_H
#define SUBLET_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/history.h"
#include "sublet/stats.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SUBLET_REPLAY_ALL UINT64_MAX  /* stop_after: drive every event */
#define SUBLET_REPLAY_NONE UINT64_MAX /* an event index that does not exist */
#define SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY (UINT64_C(80) << 30)

/* Called for each OOM, after the engine returned SUBLET_ERR_OOM: the event's
 * index in the trace, its source line, the requested size and stream, and
 * the engine's full OOM message. */
typedef void (*sublet_replay_oom_fn)(void *user, uint64_t event_index, uint64_t line,
                                     uint64_t size, sublet_stream stream, const char *message);

typedef struct sublet_replay_options {
    /* Settings string (PyTorch grammar).  NULL or "" = PyTorch's defaults;
     * the environment is never read. */
    const char *conf;
    /* Simulated device capacity in bytes; 0 = 80 GiB. */
    uint64_t device_memory;
    /* Drive events with index <= stop_after only (index into the trace,
     * prelude included); SUBLET_REPLAY_ALL for the whole trace. */
    uint64_t stop_after;
    int stop_on_oom;     /* stop after the first OOM */
    int capture_summary; /* fill summary_peak / summary_end (memory_summary text) */
    int check;           /* sublet_check() after the prelude and after every event */
    /* Place each new segment at the address the trace recorded for it when
     * that range is free in the simulated device (default on).  Where the
     * driver put a segment is outside the allocator's control, but best fit
     * breaks ties between equal free blocks by address, so following the
     * recording keeps the engine on PyTorch's path. */
    int placement_hints;
    /* The prelude (state that existed before recording began): adopt
     * PyTorch's segments and blocks as recorded, or allocate the live
     * blocks through the engine under the replay's own settings (what a run
     * that used those settings from the start would hold).  AUTO adopts
     * under PyTorch's native policy without expandable segments, and
     * allocates otherwise; a trace recorded mid-run under expandable
     * segments is replayed only with ALLOCATE given explicitly. */
    enum { SUBLET_PRELUDE_AUTO = 0, SUBLET_PRELUDE_ADOPT = 1, SUBLET_PRELUDE_ALLOCATE = 2 } prelude;
    sublet_replay_oom_fn on_oom;
    void *oom_user;
    /* Recording the replayed allocator (sublet/history.h), e.g. to write its
     * snapshot.  With record != SUBLET_RECORD_OFF the driver records with
     * (record, record_context, record_max_entries) from the first recorded
     * event on (the prelude's seeding is not in the history); the allocator's
     * clock reads the time_us of the trace row each engine event stands for
     * (the segment_alloc row before an alloc, the free_completed row after a
     * free_requested, each row of a segment_free run), and its stacks are the
     * trace's own frames (sublet_trace_stack of the row being driven), not
     * backtrace().  A deferred free_completed row is completed at its row
     * (as without record), so its entry lands where the row was, and a
     * `snapshot` row records the marker taking a snapshot records.  Off by
     * default (zeroes). */
    sublet_record record;
    sublet_context record_context;
    size_t record_max_entries;
    /* Called once after the last event driven (also when an error stopped the
     * replay: st is then that error), before the allocator is destroyed; a is
     * NULL when it could not be created.  last_event as in the result. */
    void (*on_finish)(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st);
    void *finish_user;
    /* With record on and a prelude that is allocated (SUBLET_PRELUDE_ALLOCATE,
     * or AUTO resolving to it): keep the prelude's allocations in the history
     * instead of restarting it after them, so that the history (and a
     * snapshot of it) is a trace of the replay from an empty allocator. */
    int record_prelude;
    /* Observing the replay event by event (tests, tools); NULL: not called.
     * before_event runs just before row `index` is driven and after_event
     * just after it, for every recorded row and for each pre_alloc row an
     * allocated prelude mallocs; `a` may be read there (sublet_segments_walk,
     * sublet_stats_read, sublet_check, ...) but an observer that changes it
     * changes the replay.  `trace` receives every trace event the engine
     * emits (forwarded by the replay's own trace callback, under the
     * allocator's lock: it must not call back into the allocator). */
    void (*before_event)(void *user, sublet_allocator *a, uint64_t index,
                         const sublet_trace_event *ev);
    void (*after_event)(void *user, sublet_allocator *a, uint64_t index,
                        const sublet_trace_event *ev);
    sublet_trace_fn trace;
    void *observer_user;
    /* Ask the engine again each request PyTorch recorded as an OOM (the
     * "oom" rows of a snapshot): it must fail too (fidelity.recorded_ooms,
     * ooms_matched).  Meaningful at the recording's device size and
     * settings; a request the engine serves is freed at once, but the
     * segment it made stays cached and later decisions may differ.  A run
     * of releases just before an oom row (of the default pools) is the
     * request's own: the request is asked there, its first try before the
     * releases as PyTorch's (under expandable segments it may map pages,
     * the segment_map rows before the run that no alloc took, and reserve
     * an address range), and its releases are judged against the run's,
     * instead of an empty_cache.  Off by default: an oom row is then only
     * counted. */
    int replay_ooms;
    /* Where the simulated device's address space starts (0: sublet's own
     * base, far from any recording's).  A segment or reservation that no row
     * places (a failed request's reservation: PyTorch records none) goes at
     * the lowest free address from there; a recording made on sublet's null
     * device (`sublet nullgpu`: 0x200000000000) replayed with its base gets
     * the addresses the null device gave. */
    uint64_t device_base;
    /* With record on: each history entry's time_us is the index of the row
     * (prelude included) the clock above takes its time from, instead of
     * that row's time, so that a consumer of the history (taken as it grows,
     * sublet_history_take in after_event) maps entries to rows without a
     * copy of the trace stamped with row numbers.  Off by default. */
    int record_row_times;
    /* Stopping early on a condition of the caller's: every `stop_if_every`
     * recorded rows (0: 4096) stop_if is asked, with the allocator (read
     * it, sublet_stats_read, but do not change it) and the simulated
     * device's calls so far; nonzero stops the replay after that row
     * (stopped_early in the result, which then holds the run so far, as
     * stop_after does).  NULL: never asked.  sublet_tune stops a cost run
     * as soon as its cost passes the bound it needs (docs/tune.md §9). */
    int (*stop_if)(void *user, sublet_allocator *a, const sublet_sim_ops *ops);
    void *stop_if_user;
    uint64_t stop_if_every;
} sublet_replay_options;

/* Defaults: conf "", 80 GiB, every event, placement hints on, rest off. */
SUBLET_API void sublet_replay_options_init(sublet_replay_options *o);

/* One segment release: a segment_free (cudaFree of a whole segment) or a
 * segment_unmap (pages of an expandable segment). */
typedef struct sublet_replay_release {
    uint32_t kind; /* SUBLET_ACT_SEGMENT_FREE / _UNMAP; SUBLET_ACT_COUNT: none */
    uint64_t addr, size;
} sublet_replay_release;

/* How the engine's release differed from the recorded one. */
typedef struct sublet_replay_release_diff {
    uint64_t recorded, engine;           /* releases in each set */
    uint64_t only_recorded, only_engine; /* in one set and not in the other */
    /* the lowest-addressed release of each difference (kind SUBLET_ACT_COUNT
     * when there is none) */
    sublet_replay_release first_only_recorded, first_only_engine;
} sublet_replay_release_diff;

typedef struct sublet_replay_fidelity {
    uint64_t allocs_compared;       /* alloc rows driven */
    uint64_t decisions_matched;     /* both made a segment, both mapped pages, or neither */
    uint64_t segment_sizes_matched; /* both created a segment, same size */
    uint64_t recorded_segment_allocs; /* allocs that PyTorch served with a new segment */
    uint64_t engine_segment_allocs;   /* allocs the engine served with a new segment */
    uint64_t recorded_segment_frees;  /* segment_free rows driven */
    uint64_t engine_segment_frees;    /* segments the engine released in those empty_caches */
    uint64_t recorded_peak_reserved_bytes; /* pre_segments + segment_alloc − segment_free */
    uint64_t recorded_final_reserved_bytes;
    uint64_t segments_placed_as_recorded; /* new segments at the recorded address */
    /* Allocs the engine served at the very address PyTorch recorded.  With
     * placement hints every segment sits where PyTorch's did, so this counts
     * the allocs where best fit also chose PyTorch's block (and offset). */
    uint64_t addresses_matched;
    uint64_t first_address_mismatch; /* event index, or SUBLET_REPLAY_NONE */
    uint64_t first_decision_mismatch;     /* event index, or SUBLET_REPLAY_NONE */
    uint64_t first_size_mismatch;         /* event index, or SUBLET_REPLAY_NONE */
    /* Expandable segments (§6): allocs served by mapping pages. */
    uint64_t recorded_segment_maps;   /* allocs PyTorch served with segment_map rows */
    uint64_t engine_segment_maps;     /* allocs the engine served by mapping pages */
    uint64_t map_sizes_matched;       /* both mapped, the same number of bytes */
    uint64_t maps_placed_as_recorded; /* both mapped, the first map at the same address */
    uint64_t recorded_segment_unmaps; /* segment_unmap rows driven */
    uint64_t engine_segment_unmaps;   /* page ranges the engine unmapped in those releases */
    /* Releases (empty_cache, or the release of an OOM path PyTorch recorded):
     * each run of consecutive segment_free / segment_unmap rows, compared as
     * sets of (kind, address, size). */
    uint64_t empty_caches_compared;
    uint64_t empty_cache_sets_matched;
    uint64_t first_empty_cache_mismatch; /* its first row, or SUBLET_REPLAY_NONE */
    sublet_replay_release_diff empty_cache_mismatch; /* what differed there */
    /* OOMs PyTorch recorded (snapshots' "oom" rows): each request asked
     * again, in its pool and on its stream; the engine must refuse it too. */
    uint64_t recorded_ooms;
    uint64_t ooms_matched;
    uint64_t first_oom_mismatch; /* event index, or SUBLET_REPLAY_NONE */
} sublet_replay_fidelity;

/* Fidelity of one pool (a trace whose rows carry pool ids: CUDA graphs'
 * pools, MemPools; sublet_trace_event.pool_id, docs/pools.md).  Counted as
 * the fields of the same names in sublet_replay_fidelity, for the allocs
 * of this pool only; recorded_segment_frees counts the pool's segment_free
 * rows. */
typedef struct sublet_replay_pool_fidelity {
    uint64_t pool_id[2]; /* (0, 0): the default pools */
    uint64_t allocs_compared, decisions_matched, segment_sizes_matched, addresses_matched;
    uint64_t recorded_segment_allocs, engine_segment_allocs;
    uint64_t recorded_segment_frees;
    uint64_t first_decision_mismatch, first_address_mismatch; /* or SUBLET_REPLAY_NONE */
    /* the replay released the pool (made it freeable) before the release
     * run at this row, the first that frees one of its segments;
     * SUBLET_REPLAY_NONE while it is live */
    uint64_t released_at;
} sublet_replay_pool_fidelity;

#define SUBLET_REPLAY_MAX_POOLS 32

typedef struct sublet_replay_result {
    /* Trace rows driven, counted as event indices are (prelude rows
     * included): all the prelude's rows once it is seeded, then each
     * recorded row driven, the one whose OOM stopped the replay included.
     * Every event index the replay reports (an OOM's, last_event) is below
     * it; events - sublet_trace_prelude_count() are the recorded rows. */
    uint64_t events;
    uint64_t last_event;      /* index of the last event driven, SUBLET_REPLAY_NONE if none */
    uint64_t pre_segments, pre_allocs; /* prelude rows seeded */
    uint64_t allocs, frees, deferred_frees, empty_caches;
    uint64_t peak_requested_bytes; /* engine's requested_bytes.all.peak */
    uint64_t peak_reserved_bytes;  /* engine's reserved_bytes.all.peak */
    uint64_t peak_reserved_event;  /* first event index at that peak */
    uint64_t final_reserved_bytes;
    uint64_t device_allocs, device_frees, alloc_retries, ooms;
    uint64_t first_oom_event;      /* SUBLET_REPLAY_NONE when none */
    int stopped_on_oom;
    int stopped_early; /* stop_if asked to stop (options) */
    /* Rows the replay could not apply (a free of an unknown address, a
     * prelude block that does not fit); the replay goes on. */
    uint64_t errors;
    char first_error[256];
    sublet_replay_fidelity fidelity; /* every pool together */
    /* Per pool, when a row of the trace is in a private pool: pools[0] is
     * the default pools, then the private pools in order of first
     * appearance (npools counts them all, 0 for a trace of the default
     * pools only).  Pools beyond SUBLET_REPLAY_MAX_POOLS are replayed and
     * counted in `fidelity` but not here (pools_dropped of them). */
    size_t npools;
    uint64_t pools_dropped;
    sublet_replay_pool_fidelity pools[SUBLET_REPLAY_MAX_POOLS];
    sublet_sim_ops device_ops; /* the simulated device's calls, by kind */
    sublet_stats stats_peak; /* statistics when reserved first reached its peak */
    sublet_stats stats_end;  /* statistics after the last event */
    /* memory_summary() texts (capture_summary); malloc'd, NULL otherwise. */
    char *summary_peak;
    char *summary_end;
    /* The smallest device size on which this replay would have run exactly
     * alike, every call and result the same (SUBLET_REPLAY_NONE: not known):
     * known when it ran to its end (or stop_after) without an OOM, the
     * device's capacity was read only at the allocator's creation (not by
     * expandable segments or policy:stitch, which size reservations and
     * plans by it), neither the device nor the memory fraction's limit
     * refused a call (which a larger device might grant: a retry) and the
     * collector never collected.  Then it is the
     * smallest size at least the peak of device memory in use whose memory
     * fraction's limit (per_process_memory_fraction) still grants every
     * request that was granted and keeps every collector check under its
     * threshold.  Every larger size runs alike too: sublet_replay_min_capacity_ex
     * answers probes by it. */
    uint64_t same_from;
} sublet_replay_result;

/* Replay `t`.  Fills *r (zeroed first) and returns SUBLET_OK when every
 * event was driven (OOMs and per-row errors included).  Otherwise:
 * SUBLET_ERR_CONFIG / SUBLET_ERR_UNSUPPORTED for the settings,
 * SUBLET_ERR_CORRUPT when `check` found a violated invariant,
 * SUBLET_ERR_UNSUPPORTED for a trace recorded mid-run under expandable
 * segments or with a prelude in a private pool (unless the prelude is
 * allocated; docs/pools.md), SUBLET_ERR_NO_MEMORY;
 * err receives the reason (with the event index), and *r holds what was
 * measured so far.  Release *r with sublet_replay_result_free.  This is
 * sublet_replay_stream over a stream of the in-memory array
 * (sublet_trace_stream_from_trace): one body. */
SUBLET_API sublet_status sublet_replay_run(const sublet_trace *t, const sublet_replay_options *o,
                                           sublet_replay_result *r, char *err, size_t err_cap);
/* The same replay over a stream (sublet/trace_stream.h), reading it in
 * bounded chunks: the same result, byte for byte, as sublet_replay_run on
 * the trace loaded whole (sublet_replay_run is this call over a stream of
 * the in-memory array, whose array is then the window).  Memory: the prelude, the engine's state, the address
 * map (the live allocations) and a window of rows (those the stream's
 * reader holds: a few thousand, more only while one release run or
 * segment_map run is longer), whatever the
 * length of the trace.  Rows are read up to the last one driven (and the
 * ones it looks ahead at: the row after a free_requested, the rest of a
 * release run): the caller may read the rest (sublet_trace_stream_next) to
 * count or check it.  Differences, all about errors: a malformed row stops
 * the replay when it is reached (the error as the whole-trace reader gives
 * it, in err, with *r as measured so far), and a trace recorded mid-run
 * under expandable segments is refused at the first row that shows it,
 * after the observers (on_oom, before_event, ...) saw the rows before it;
 * *r is then reset as if refused before the first row.  Stacks (recording
 * with SUBLET_CONTEXT_*) come from sublet_trace_stream_stack. */
SUBLET_API sublet_status sublet_replay_stream(sublet_trace_stream *ts,
                                              const sublet_replay_options *o,
                                              sublet_replay_result *r, char *err, size_t err_cap);
/* Free the summary texts (the struct itself belongs to the caller). */
SUBLET_API void sublet_replay_result_free(sublet_replay_result *r);

/* ---- min capacity ---------------------------------------------------------- */
/* One device size the search replayed the trace on. */
typedef struct sublet_mincap_probe {
    uint64_t bytes;
    int ok;      /* ran without an OOM (and without extra row errors) */
    int checked; /* a neighbourhood probe above an answer, not a bisection step */
} sublet_mincap_probe;

typedef struct sublet_mincap_result {
    uint64_t resolution;           /* search step in bytes (2 MiB by default) */
    /* The answer: the smallest probed size c (a multiple of the resolution)
     * such that c and every size probed above c ran without an OOM. */
    uint64_t min_capacity_bytes;
    uint64_t peak_requested_bytes; /* peak of live requested bytes: the floor */
    double overhead;               /* min_capacity / peak_requested - 1 */
    uint64_t replays;              /* replays the search ran */
    sublet_replay_result at_min;   /* the replay at min_capacity_bytes */
    /* Monotonicity, as far as the probes tell: 0 when some probed size
     * failed although a smaller one ran (the OOM path's releases and the
     * collector depend on the device size, so a larger device can do
     * worse).  smallest_ok_bytes is the smallest size that ran (below the
     * answer when not monotone), failed_above the probed sizes above it
     * that failed. */
    int monotone;
    uint64_t smallest_ok_bytes;
    uint64_t failed_above;
    /* Every probe, by ascending size (malloc'd, nprobes entries): the
     * bisection's and the neighbourhood checked above each answer found
     * (+1 step, +1 %, +5 %, +10 %, +25 %, +50 %, +100 %). */
    sublet_mincap_probe *probes;
    size_t nprobes;
} sublet_mincap_result;

/* Find the min capacity of `t` under `o`'s options (a multiple of
 * `resolution`, 0 = 2 MiB): bisection between the floor (the peak of live
 * requested bytes) and a size that runs, then a check of the answer's
 * neighbourhood (the sizes above listed in sublet_mincap_result); when a
 * size there fails, the search goes on above the highest failure (bisection
 * between it and the next size that ran) until the neighbourhood of the
 * answer runs, so that the answer is the smallest probed size with no
 * failure probed above it.  `o` may be NULL (defaults); every option that
 * changes the outcome is honoured (conf, prelude, placement_hints,
 * stop_after); device_memory is the searched variable, each probe stops at
 * its first OOM, check and the observers are not used.  Release with
 * sublet_mincap_result_free.  This is sublet_replay_min_capacity_stream over
 * a stream of the in-memory array. */
SUBLET_API sublet_status sublet_replay_min_capacity(const sublet_trace *t,
                                                    const sublet_replay_options *o,
                                                    uint64_t resolution, sublet_mincap_result *out,
                                                    char *err, size_t err_cap);
/* The same search over a stream (sublet/trace_stream.h), in memory for the
 * live blocks, whatever the length of the trace: one pass for the trace's
 * peaks (sublet_trace_stream_info), then each replay rewinds the stream
 * (standard input, once read, cannot be: SUBLET_ERR_UNSUPPORTED).  The same
 * answer, probes and at_min as sublet_replay_min_capacity on the trace
 * loaded whole; a malformed row anywhere is an error (the stream's text). */
/* sublet_replay_min_capacity, with less replaying.  flags:
 * SUBLET_MINCAP_INFER: a probe on a size at or above the smallest same_from
 * (sublet_replay_result) of the runs that ran clean so far (the search's own,
 * and `same_from` when the reference run is on a size at or above it: the
 * same_from of a run of the caller's under these very options, else
 * SUBLET_REPLAY_NONE) is answered without a replay: that run and this probe
 * would be the same run.  SUBLET_MINCAP_NO_AT_MIN: at_min is left empty (no
 * replay kept, none run again for it).  The answer, the probes and the
 * monotonicity are sublet_replay_min_capacity's; replays counts fewer. */
#define SUBLET_MINCAP_INFER 1u
#define SUBLET_MINCAP_NO_AT_MIN 2u
SUBLET_API sublet_status sublet_replay_min_capacity_ex(const sublet_trace *t,
                                                       const sublet_replay_options *o,
                                                       uint64_t resolution, unsigned flags,
                                                       uint64_t same_from,
                                                       sublet_mincap_result *out, char *err,
                                                       size_t err_cap);
SUBLET_API sublet_status sublet_replay_min_capacity_stream(sublet_trace_stream *ts,
                                                           const sublet_replay_options *o,
                                                           uint64_t resolution,
                                                           sublet_mincap_result *out,
                                                           char *err, size_t err_cap);
/* sublet_replay_min_capacity_ex over a stream (the whole-trace call is this
 * over a stream of the array); a stream read again cheaply (a binary copy,
 * sublet_trace_stream_rereadable) is searched as it is, another copied
 * first. */
SUBLET_API sublet_status sublet_replay_min_capacity_stream_ex(sublet_trace_stream *ts,
                                                              const sublet_replay_options *o,
                                                              uint64_t resolution, unsigned flags,
                                                              uint64_t same_from,
                                                              sublet_mincap_result *out,
                                                              char *err, size_t err_cap);
SUBLET_API void sublet_mincap_result_free(sublet_mincap_result *r);

#ifdef __cplusplus
}
#endif
#endif
