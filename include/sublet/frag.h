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

#include "sublet/config.h"
#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a state: segments and their blocks ------------------------------------- */
typedef struct sublet_frag_block {
    uint64_t addr, size, requested_size;
    sublet_block_state state;
    uint32_t stack; /* 1-based index into the state's stacks; 0 = none */
} sublet_frag_block;

typedef struct sublet_frag_segment {
    uint64_t addr, size;          /* one mapped run for an expandable segment */
    uint64_t allocated_size;      /* allocated blocks */
    uint64_t active_size;         /* allocated or pending free */
    uint64_t requested_size;      /* requested bytes of the active blocks */
    uint64_t free_size;           /* inactive blocks */
    uint64_t largest_free;        /* its largest inactive block */
    sublet_stream stream;
    int is_small, is_expandable;
    size_t first_block, nblocks;  /* blocks[first_block .. + nblocks), address order */
    size_t live_blocks;           /* active blocks */
} sublet_frag_segment;

typedef struct sublet_frag_state {
    sublet_frag_segment *segments; /* address order */
    size_t nsegments;
    sublet_frag_block *blocks;
    size_t nblocks;
    /* Allocation stacks of the blocks, as text: one frame a line ("file:line
     * name"), innermost first; the Python frames only when the stack has any
     * (PyTorch's stacks start with a few dozen C++ frames), at most 12. */
    char **stacks;
    size_t nstacks;
    /* The settings the allocator used (sublet_frag_max_allocatable); PyTorch's
     * defaults when unknown. */
    sublet_settings settings;
} sublet_frag_state;

/* Copy the segments and blocks of a live allocator (sublet_segments_walk), with
 * the blocks' allocation stacks when they were recorded (sublet/history.h). */
sublet_status sublet_frag_capture(sublet_allocator *a, sublet_frag_state **out);
/* The segments of one device of a snapshot (no stacks: they are in its trace;
 * a replay of sublet_snapshot_trace() recovers them).  Settings from the
 * snapshot's allocator_settings. */
sublet_status sublet_frag_from_snapshot(const sublet_snapshot *s, int64_t device,
                                        sublet_frag_state **out);
void sublet_frag_state_free(sublet_frag_state *st);

/* sublet_frag_read()'s metrics computed from the blocks, with its meaning:
 * free-block counts, bytes, largest and spread for the pool kind
 * (SUBLET_POOL_ALL/SMALL/LARGE) and stream (SUBLET_STREAM_ALL: every
 * stream); reserved, allocated, active, requested and inactive-split bytes
 * for the pool whatever the stream. */
sublet_status sublet_frag_compute(const sublet_frag_state *st, int pool_kind, sublet_stream stream,
                                  sublet_frag_stats *out);
/* The distinct streams of the segments, ascending: fills up to cap, returns
 * how many there are. */
size_t sublet_frag_streams(const sublet_frag_state *st, sublet_stream *out, size_t cap);
/* sublet_max_allocatable() computed from the blocks under st->settings. */
uint64_t sublet_frag_max_allocatable(const sublet_frag_state *st, sublet_stream stream);

/* Free blocks by size: bucket k holds the blocks with 2^k <= size < 2^(k+1). */
#define SUBLET_FRAG_HIST_BUCKETS 64
typedef struct sublet_frag_histogram {
    uint64_t count[SUBLET_FRAG_HIST_BUCKETS];
    uint64_t bytes[SUBLET_FRAG_HIST_BUCKETS];
} sublet_frag_histogram;
void sublet_frag_histogram_of(const sublet_frag_state *st, int pool_kind,
                              sublet_frag_histogram *out);
/* log2 bucket of a size (0 for 0). */
unsigned sublet_frag_bucket(uint64_t size);

/* Pinning segments: those with live blocks and free bytes, ranked by the free
 * bytes held hostage (size - active bytes), ties by fewer live blocks, then
 * address.  Fills up to cap segment indices; returns how many there are. */
size_t sublet_frag_pinning(const sublet_frag_state *st, size_t *out, size_t cap);

/* ---- texts -------------------------------------------------------------------- */
enum {
    SUBLET_FRAG_SECTION_METRICS = 1,   /* per pool and per stream */
    SUBLET_FRAG_SECTION_HISTOGRAM = 2, /* free blocks by size */
    SUBLET_FRAG_SECTION_PINNING = 4,   /* the top pinning segments, live blocks, stacks */
    SUBLET_FRAG_SECTION_MAP = 8,       /* one line per segment, drawn to scale */
    SUBLET_FRAG_SECTION_ALL = 15
};

typedef struct sublet_frag_format_options {
    unsigned sections;      /* SUBLET_FRAG_SECTION_*; 0 = METRICS|HISTOGRAM|PINNING */
    unsigned map_width;     /* columns of the segment map; 0 = 64 */
    size_t top_pinning;     /* pinning segments shown; 0 = 5 */
    size_t max_live_blocks; /* live blocks listed per pinning segment; 0 = 4 */
    size_t max_frames;      /* stack frames per block; 0 = 4 */
} sublet_frag_format_options;

/* The fragmentation section (o may be NULL: defaults). */
size_t sublet_frag_format_text(const sublet_frag_state *st, const sublet_frag_format_options *o,
                               char *buf, size_t cap);
/* The segment map alone, one line per segment: the address, the size, the
 * pool ('L'arge, 'S'mall; 'E' expandable) and stream, then `width` columns
 * drawn to scale: '#' allocated, '+' pending free (freed, waiting on another
 * stream), '.' free (cached); a column shows the state that covers most of
 * it.  Fills line by line into buf. */
size_t sublet_frag_format_map(const sublet_frag_state *st, unsigned width, char *buf, size_t cap);
/* The column characters of one segment's map (width chars and a NUL). */
void sublet_frag_map_row(const sublet_frag_state *st, size_t segment, unsigned width, char *row);
/* Flat "key value" lines, sorted: fragmentation.{all,large_pool,small_pool}.
 * <metric> and fragmentation.stream_<id>.<metric> (stream_<id> for the free-block
 * metrics and max_allocatable), as sublet_stats_format_flat. */
size_t sublet_frag_format_flat(const sublet_frag_state *st, char *buf, size_t cap);

/* ---- OOM diagnosis ------------------------------------------------------------- */
/* After sublet_malloc(a, request, stream) returned SUBLET_ERR_OOM: whether it is
 * fragmentation (the free bytes of the pool, plus what the device or the memory
 * fraction still grants, would suffice; no block does) or exhaustion, the
 * largest request that would succeed without a device allocation, and the
 * segments pinning the most free memory, each with its live blocks (address,
 * size, stream, and the allocation stack when recorded), then settings that
 * usually help.  The first line starts "sublet diagnosis: fragmentation" or
 * "sublet diagnosis: exhaustion". */
size_t sublet_oom_diagnose(sublet_allocator *a, uint64_t request, sublet_stream stream, char *buf,
                           size_t cap);

/* ---- over a replayed trace -------------------------------------------------------- */
/* The state after event `event` (SUBLET_REPLAY_ALL: the last one) of a replay
 * of t under o (NULL: defaults; o's stop_after, on_finish and recording are
 * replaced), with allocation stacks when the trace has them.  *r (optional)
 * receives the replay's result (free it with sublet_replay_result_free). */
sublet_status sublet_frag_state_at(const sublet_trace *t, const sublet_replay_options *o,
                                   uint64_t event, sublet_frag_state **out,
                                   sublet_replay_result *r, char *err, size_t err_cap);

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
const char *sublet_frag_series_name(int series);

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

/* Replay t under o (NULL: defaults; o's recording and on_finish are replaced,
 * its on_oom is still called) and measure the series after every event,
 * reduced to at most max_buckets buckets (0: 2000).  *r (optional) receives
 * the replay's result. */
sublet_status sublet_frag_series_run(const sublet_trace *t, const sublet_replay_options *o,
                                     size_t max_buckets, sublet_frag_series *out,
                                     sublet_replay_result *r, char *err, size_t err_cap);
void sublet_frag_series_free(sublet_frag_series *s);

/* ---- which settings would have avoided the OOMs ------------------------------------ */
/* The candidate settings tried by default, NULL-terminated: the
 * max_split_size_mb values 128, 256 and 512; roundup_power2_divisions 4 and
 * [256:1,512:2,1024:4,>:8]; expandable_segments:True; policy:stitch;
 * garbage_collection_threshold:0.6 with per_process_memory_fraction:0.999 (the
 * threshold acts only under a fraction). */
const char *const *sublet_frag_default_candidates(void);

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
} sublet_frag_candidate;

typedef struct sublet_frag_oom {
    uint64_t event, line, size;    /* the trace event, its source line, the request */
    sublet_stream stream;
    char *message;                 /* the engine's OOM message */
    char *diagnosis;               /* sublet_oom_diagnose() at that point, or NULL
                                    * (only the first max_detailed OOMs) */
    int fragmentation;             /* 1 fragmentation, 0 exhaustion */
} sublet_frag_oom;

typedef struct sublet_frag_diagnosis {
    char conf[512];                /* the base settings */
    uint64_t device_memory;
    uint64_t ooms;                 /* OOMs of the base replay */
    uint64_t peak_reserved_bytes;  /* of the base replay */
    sublet_frag_oom *oom;          /* the first max_listed of them */
    size_t noom;
    sublet_frag_candidate *candidates;
    size_t ncandidates;
} sublet_frag_diagnosis;

typedef struct sublet_frag_diagnose_options {
    const char *const *candidates; /* NULL-terminated; NULL = the default list */
    size_t max_detailed;           /* OOMs diagnosed with their pinning segments; 0 = 3 */
    size_t max_listed;             /* OOMs listed; 0 = 32 */
} sublet_frag_diagnose_options;

/* Replay t under o (NULL: defaults; stop_after, on_oom, on_finish and
 * recording are replaced), list its OOMs, diagnose the first ones at the
 * state they left (a replay to each), then replay t under every candidate,
 * on the same device, and record which OOMs each one avoids.  *d is filled
 * even without OOMs (then no candidate is tried).  Free with
 * sublet_frag_diagnosis_free. */
sublet_status sublet_frag_diagnose_trace(const sublet_trace *t, const sublet_replay_options *o,
                                         const sublet_frag_diagnose_options *dopt,
                                         sublet_frag_diagnosis *d, char *err, size_t err_cap);
/* Does candidate c avoid OOM number k of d (its event has no OOM there)? */
int sublet_frag_candidate_avoids(const sublet_frag_candidate *c, uint64_t event);
/* The report: each OOM (message, diagnosis), then a table of the candidates
 * (OOMs avoided, peak reserved) and the verdict. */
size_t sublet_frag_diagnosis_format(const sublet_frag_diagnosis *d, char *buf, size_t cap);
void sublet_frag_diagnosis_free(sublet_frag_diagnosis *d);

#ifdef __cplusplus
}
#endif
#endif
