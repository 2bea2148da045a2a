/* sublet — fragmentation of a state: a copy of the segments and blocks of a
 * live allocator (or of a snapshot or a replayed trace, sublet/frag.h), its
 * metrics, free-block histogram, pinning segments and texts, and the
 * diagnosis of an OOM on a live allocator.
 *
 * This is the engine's part of sublet/frag.h (which includes it): the
 * summary's fragmentation section (SUBLET_SUMMARY_FRAGMENTATION) is made
 * here.  The library never prints: texts go to the caller's buffer with
 * snprintf semantics. */
#ifndef SUBLET_FRAG_STATE_H
#define SUBLET_FRAG_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/config.h"
#include "sublet/sublet.h"

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
    /* The owning pool (sublet/pool.h's sublet_pool_id: first, second): (0, 0)
     * for the default pools, else a private pool's (a CUDA graph's, a
     * MemPool's).  A block never moves to another pool. */
    uint64_t pool_id[2];
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
SUBLET_API sublet_status sublet_frag_capture(sublet_allocator *a, sublet_frag_state **out);
SUBLET_API void sublet_frag_state_free(sublet_frag_state *st);

/* sublet_frag_read()'s metrics computed from the blocks, with its meaning:
 * free-block counts, bytes, largest and spread for the pool kind
 * (SUBLET_POOL_ALL/SMALL/LARGE) and stream (SUBLET_STREAM_ALL: every
 * stream); reserved, allocated, active, requested and inactive-split bytes
 * for the pool whatever the stream. */
SUBLET_API sublet_status sublet_frag_compute(const sublet_frag_state *st, int pool_kind,
                                             sublet_stream stream, sublet_frag_stats *out);
/* The distinct streams of the segments, ascending: fills up to cap, returns
 * how many there are. */
SUBLET_API size_t sublet_frag_streams(const sublet_frag_state *st, sublet_stream *out, size_t cap);
/* sublet_max_allocatable() computed from the blocks under st->settings: a
 * request to the default pools, so the blocks of private pools, which it
 * cannot take, are left out (as the engine's). */
SUBLET_API uint64_t sublet_frag_max_allocatable(const sublet_frag_state *st, sublet_stream stream);

/* ---- per pool: the default pools and each private pool -------------------------- */
/* The totals of one pool's segments (docs/pools.md).  Free memory cached in
 * one pool serves only requests to that pool: a default-pool request cannot
 * use a private pool's free blocks, and the other way round. */
typedef struct sublet_frag_pool {
    uint64_t pool_id[2];         /* (0, 0): the default pools */
    size_t segments;             /* segments (mapped runs of expandable ones) */
    size_t pinned_segments;      /* segments holding a live block: empty_cache cannot
                                  * release them */
    uint64_t reserved_bytes, allocated_bytes, active_bytes, requested_bytes;
    uint64_t free_bytes;         /* inactive blocks */
    uint64_t free_blocks;
    uint64_t largest_free_block;
    uint64_t pinned_free_bytes;  /* free bytes inside pinned segments */
} sublet_frag_pool;

/* The pools of the state: the default pools first (always, even without a
 * segment), then each private pool that holds a segment, by ascending id.
 * Fills up to cap; returns how many there are. */
SUBLET_API size_t sublet_frag_pools(const sublet_frag_state *st, sublet_frag_pool *out, size_t cap);
/* Whether any segment of the state belongs to a private pool (then the texts
 * and documents show each pool as its own group; without one they are as
 * they were before pools were shown). */
SUBLET_API int sublet_frag_has_private_pools(const sublet_frag_state *st);
/* sublet_frag_max_allocatable() for the requests to pool `pool_id`. */
SUBLET_API uint64_t sublet_frag_max_allocatable_in(const sublet_frag_state *st,
                                                   const uint64_t pool_id[2], sublet_stream stream);
/* "default pools (0,0)" or "private pool (1,0)" into buf (48 bytes suffice). */
SUBLET_API const char *sublet_frag_pool_name(const uint64_t pool_id[2], char *buf, size_t cap);
/* The pool a request of `request` bytes on `stream`, made now by the calling
 * thread, goes to (PyTorch's get_pool: an active redirection's private pool,
 * else the default pools): its id into out[0], out[1]. */
SUBLET_API sublet_status sublet_frag_request_pool(sublet_allocator *a, uint64_t request,
                                                  sublet_stream stream, uint64_t out[2]);

/* Free blocks by size: bucket k holds the blocks with 2^k <= size < 2^(k+1). */
#define SUBLET_FRAG_HIST_BUCKETS 64
typedef struct sublet_frag_histogram {
    uint64_t count[SUBLET_FRAG_HIST_BUCKETS];
    uint64_t bytes[SUBLET_FRAG_HIST_BUCKETS];
} sublet_frag_histogram;
SUBLET_API void sublet_frag_histogram_of(const sublet_frag_state *st, int pool_kind,
                                         sublet_frag_histogram *out);
/* log2 bucket of a size (0 for 0). */
SUBLET_API unsigned sublet_frag_bucket(uint64_t size);

/* Pinning segments: those with live blocks and free bytes, ranked by the free
 * bytes held hostage (size - active bytes), ties by fewer live blocks, then
 * address.  Fills up to cap segment indices; returns how many there are. */
SUBLET_API size_t sublet_frag_pinning(const sublet_frag_state *st, size_t *out, size_t cap);

/* ---- texts -------------------------------------------------------------------- */
enum {
    SUBLET_FRAG_SECTION_METRICS = 1,   /* per pool kind and per stream (and per
                                        * private pool when there is one) */
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
SUBLET_API size_t sublet_frag_format_text(const sublet_frag_state *st,
                                          const sublet_frag_format_options *o,
                                          char *buf, size_t cap);
/* The segment map alone, one line per segment: the address, the size, the
 * pool ('L'arge, 'S'mall; 'E' expandable) and stream, then `width` columns
 * drawn to scale: '#' allocated, '+' pending free (freed, waiting on another
 * stream), '.' free (cached); a column shows the state that covers most of
 * it.  With private pools, the segments come grouped by pool (the default
 * pools first), each group under a line naming it.  Fills line by line into
 * buf. */
SUBLET_API size_t sublet_frag_format_map(const sublet_frag_state *st, unsigned width, char *buf,
                                         size_t cap);
/* The column characters of one segment's map (width chars and a NUL). */
SUBLET_API void sublet_frag_map_row(const sublet_frag_state *st, size_t segment, unsigned width,
                                    char *row);
/* Flat "key value" lines, sorted: fragmentation.{all,large_pool,small_pool}.
 * <metric> and fragmentation.stream_<id>.<metric> (stream_<id> for the free-block
 * metrics and max_allocatable), as sublet_stats_format_flat; with private
 * pools also fragmentation.pool_<first>_<second>.<total> (sublet_frag_pool's
 * fields, the default pools as pool_0_0). */
SUBLET_API size_t sublet_frag_format_flat(const sublet_frag_state *st, char *buf, size_t cap);

/* ---- OOM diagnosis ------------------------------------------------------------- */
/* After sublet_malloc(a, request, stream) returned SUBLET_ERR_OOM: whether it is
 * fragmentation (the free bytes of the pool, plus what the device or the memory
 * fraction still grants, would suffice; no block does) or exhaustion, the
 * pool the request went to and, when private pools hold segments, where the
 * free memory sits, pool by pool (free memory cached in another pool cannot
 * serve the request: it does not count towards "would suffice"), the
 * largest request that would succeed without a device allocation, and the
 * segments pinning the most free memory, each with its live blocks (address,
 * size, stream, and the allocation stack when recorded), then settings that
 * usually help.  The first line starts "sublet diagnosis: fragmentation" or
 * "sublet diagnosis: exhaustion". */
SUBLET_API size_t sublet_oom_diagnose(sublet_allocator *a, uint64_t request, sublet_stream stream,
                                      char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
