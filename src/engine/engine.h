/* sublet — the engine's data model and engine.c's shared steps.
 *
 * What it holds: the records every engine file works on (sl_block,
 * sl_segment, sl_pool with its free-index trees, sl_private, the capture
 * records, the allocator object struct sublet_allocator), the inline tests
 * on them (sl_virtual, sl_is_split, sl_gc_active, sl_segment_order, ...),
 * and the functions of engine.c that other engine files call (the lock,
 * statistics, trace emission, merge, segment creation and release,
 * free_block).  Host-side metadata only: nothing here is ever written to
 * device memory.
 *
 * What it does not: each other file's functions are declared in that
 * file's own header, included where they are called:
 *   rules.h            PyTorch's constants and size rules (rules.c; included here)
 *   index.h            the free index (index.c; its parts rbtree.h, sizemap.h)
 *   ptrmap.h, slab.h   the pointer map and the block slab (included here:
 *                      the allocator object embeds them)
 *   segs.h             the set of segments (segs.c)
 *   pools_internal.h   private pools, redirections, get_pool (pools.c)
 *   release.h          release paths, garbage collector, OOM report (release.c)
 *   events.h           cross-stream frees (events.c)
 *   reserve.h          the warm-up plan (reserve.c)
 *   expandable.h       expandable segments (expandable.c)
 *   stitch.h           policy:stitch's OOM path (stitch.c)
 *   frag_internal.h, history_internal.h   fragmentation and recording
 *
 * Who includes it: the engine files that work on these records (and the headers
 * above), src/analysis/replay.c (the garbage collector's state, read
 * between events) and the unit tests of the index and the segments
 * (tests/test_index.c, test_segs.c, test_check.c).  § numbers in the
 * engine's comments are headings of docs/rules.md. */
#ifndef SUBLET_ENGINE_H
#define SUBLET_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/mutex.h"
#include "base/rtree.h"
#include "engine/rules.h" /* PyTorch's constants and size rules */
#include "sublet/history.h"
#include "sublet/pool.h"
#include "sublet/sublet.h"

typedef struct sl_segment sl_segment;
typedef struct sl_pool sl_pool;
typedef struct sl_private sl_private;

/* One contiguous byte range of a segment (PyTorch's Block). */
typedef struct sl_block {
    /* The first 64 bytes are what a descent of the free index reads at each
     * node (key, links, colour) and what the cached malloc+free pair checks;
     * blocks are 64-byte aligned in the slab (slab.c), so a node visit
     * touches one cache line. */
    _Alignas(64) uint64_t addr;
    uint64_t size;
    /* free index: red-black tree keyed by (size, seg->order, addr) within
     * the pool's stream tree, threaded through the blocks (rbtree.c, index.c) */
    struct sl_block *parent;
    union { /* kid[0] == left, kid[1] == right: a descent indexes by a flag */
        struct {
            struct sl_block *left, *right;
        };
        struct sl_block *kid[2];
    };
    bool red;
    bool allocated;
    bool in_free;           /* in the pool's free index */
    bool mapped;            /* always true until expandable segments */
    bool shadow;            /* policy:stitch: mapped bytes whose physical memory is
                             * usable through another mapping (stitch.c); never
                             * free, never allocated, never merged */
    bool oversize;          /* counted in oversize_allocations */
    uint32_t event_count;   /* outstanding end-of-use events */
    uint32_t stack;         /* interned allocation stack (recording), 0 = none */
    sublet_stream stream;   /* allocation stream */
    struct sl_block *prev;  /* neighbours inside the segment */
    struct sl_block *next;
    sl_segment *seg;
    sl_pool *pool;
    uint64_t requested;     /* unrounded size of the last request served */
    uint64_t gc_count_base; /* pool clock when it entered the free index */
    /* streams recorded with record_stream (other than `stream`), sl_uses():
     * the first in the block, more in a heap array.  The last fields: a new
     * one goes above them and into sl_block_new.  The block is two cache
     * lines, 128 bytes: a replay's ~4,000 blocks take 500 KiB, not 750. */
    uint32_t nuses, uses_cap; /* uses_cap 1: the one in use1 */
    union {
        sublet_stream use1;        /* uses_cap == 1 */
        sublet_stream *uses_heap;  /* uses_cap > 1 */
    };
} sl_block;
_Static_assert(offsetof(sl_block, kid[1]) == offsetof(sl_block, right) &&
                   offsetof(sl_block, kid[0]) == offsetof(sl_block, left),
               "a descent indexes kid[] by a flag: kid[0] is left, kid[1] right");

/* The streams recorded on b (b->nuses of them, room for b->uses_cap). */
static inline sublet_stream *sl_uses(sl_block *b)
{
    return b->uses_cap > 1 ? b->uses_heap : &b->use1;
}

/* Before b's memory is reused or freed: its heap array of streams, if any. */
static inline void sl_uses_free(sl_block *b)
{
    if (b->uses_cap > 1)
        free(b->uses_heap);
    b->uses_cap = 1;
    b->nuses = 0;
}

/* One driver allocation. */
struct sl_segment {
    uint64_t addr;
    uint64_t size;
    sublet_stream stream;
    sl_pool *pool;
    sl_block *head; /* lowest-address block */
    bool oversize;  /* counted in oversize_segments */
    bool expandable; /* a virtual reservation mapped page by page (docs/rules.md §6) */
    uint64_t page;   /* expandable: page size */
    uint32_t stack; /* stack of the device allocation (recording) */
    struct sl_block *stack_holder; /* block carrying it, as PyTorch's Block does */
    size_t slot;    /* its index in the allocator's segs[] */
    /* where equal-sized free blocks of different segments are ordered by
     * the segments' creation (PyTorch 2.14's registration counter, taken
     * at each cudaMalloc and each new expandable segment, inherited by
     * every block cut from it): its place in that order, from 1; else 0,
     * and the free index ties on the address alone (sl_segment_order) */
    uint64_t order;
};

/* A change to the set of segments not yet applied to its index (segs.c). */
typedef struct sl_seg_change {
    uint64_t addr, size;
    sl_segment *seg; /* the index's tag (not dereferenced: it may be freed) */
    bool add;
} sl_seg_change;

/* Size map entry: the first free block of one exact size (in segment order,
 * then address). */
typedef struct sl_size_slot {
    uint64_t size; /* 0 = empty slot */
    sl_block *min;
} sl_size_slot;

/* Free blocks of one stream inside one pool, ordered by (size, segment order,
 * addr): a red-black tree per size class plus a map from each size present to
 * its first block (index.c). */
typedef struct sl_bins sl_bins;
typedef struct sl_tree {
    sublet_stream stream;
    sl_bins *bins; /* the classes' trees and the bitmap of those with blocks */
    size_t count;
    uint64_t bytes;        /* sum of the free blocks' sizes */
    uint64_t sq_hi, sq_lo; /* exact sum of their squared sizes (128-bit) */
    sl_size_slot *sizes;   /* open addressing, size_cap a power of two */
    size_t size_cap, nsizes;
    bool sizes_partial; /* a size was left out when the map could not grow */
    bool sizes_off;     /* the map is not kept: its lookups rarely hit (index.c) */
    size_t probes, hits; /* best-fit lookups in this window, those of an exact size */
} sl_tree;

struct sl_pool {
    bool is_small;
    int kind; /* SUBLET_POOL_SMALL or SUBLET_POOL_LARGE */
    sl_private *owner; /* NULL for the default pools */
    sl_tree *trees;
    size_t ntrees, trees_cap;
    size_t last_tree; /* index of the last tree used (hot path hint) */
    uint64_t clock;   /* get_free_blocks_call_count (GC age clock) */
    /* unmapped blocks of expandable segments, sorted by (stream, addr) */
    sl_block **unmapped;
    size_t nunmapped, unmapped_cap;
};

/* A private pool (PyTorch's PrivatePool, pools.c): a graph's pool or a
 * MemPool's.  Its BlockPools point back to it; blocks never migrate. */
struct sl_private {
    sublet_pool_id id;
    sl_pool small, large;
    int use_count;    /* live users; 0 = freeable */
    int malloc_count; /* cudaMalloc_count: segments held; under expandable
                       * segments PyTorch's count (+1 per allocation that
                       * maps, -1 per unmapping), which need not reach 0 */
    bool freeable;
    bool expandable_seen; /* it has had expandable segments */
    bool use_on_oom, no_split; /* honoured from pytorch_version 2.9 */
    sublet_pool_alloc_fn alloc_fn; /* pool-specific allocator, or NULL */
    sublet_pool_free_fn free_fn;
    void *alloc_user;
    sublet_stats stats; /* this pool's share of the allocator's statistics */
    size_t slot;        /* index in the allocator's privs[] */
};

/* An active redirection (captures_underway's entry). */
typedef struct sl_redirect {
    sl_private *pool;
    int filter; /* SUBLET_POOL_FILTER_STREAM, _THREAD or _CALLBACK */
    sublet_stream stream;
    pthread_t thread;
    sublet_pool_filter_fn fn; /* _CALLBACK */
    void *user;
} sl_redirect;

/* A stream recorded with record_stream while a redirection was active
 * (block_to_cudagraph_stream_uses). */
typedef struct sl_capture_use {
    struct sl_block *block;
    sublet_stream stream;
} sl_capture_use;

/* graph_capture_record_stream_reuse (§4.6, pools.c): a stream's place in the
 * capture graph.  `count` advances at each free marker put on the stream and
 * never goes back; a waiter has seen a signaler up to a count (sl_cap_seen). */
typedef struct sl_cap_stream {
    sublet_stream stream;
    uint64_t count;
    bool joined; /* waited on a capturing stream during the current captures */
} sl_cap_stream;

typedef struct sl_cap_seen {
    sublet_stream waiter, signaler;
    uint64_t upto;
} sl_cap_seen;

/* A free marker of a deferred block: `stream`'s position at the free (a
 * block with none waits for the end of the captures). */
typedef struct sl_cap_mark {
    struct sl_block *block;
    sublet_stream stream;
    uint64_t at;
} sl_cap_mark;

#include "engine/ptrmap.h"
#include "engine/slab.h"

/* ---- the allocator object --------------------------------------------------- */
typedef struct sl_evq_entry {
    sublet_event *ev;
    sl_block *block;
} sl_evq_entry;

/* policy:stitch: a page of a stitched run that maps the physical page of
 * another (its owner) a second time (stitch.c).  [off, off+len) of it is
 * usable here and is `oshadow` in the owner; the rest of it is `vshadow`. */
typedef struct sl_alias {
    uint64_t page;  /* the alias page */
    uint64_t owner; /* the page whose physical memory it maps */
    uint64_t off, len;
    struct sl_block *vshadow, *oshadow;
} sl_alias;

typedef struct sl_evq { /* FIFO of (event, block) for one stream (events.c) */
    sublet_stream stream;
    sl_evq_entry *items;
    size_t head, count, cap;
    bool hot; /* process_events: its stream had a completion */
} sl_evq;

struct sublet_allocator {
    sl_mutex lock; /* base/mutex.h */
    sublet_backend *backend;
    int device;
    sublet_settings settings;
    sl_pool small, large;
    /* private pools (pools.c), in creation order; redirections in the order
     * they began; frees deferred while one is active */
    sl_private **privs;
    size_t nprivs, privs_cap;
    sl_redirect *redirects;
    size_t nredirects, redirects_cap;
    struct sl_block **deferred;
    size_t ndeferred, deferred_cap;
    sl_capture_use *capture_uses;
    size_t ncapture_uses, capture_uses_cap;
    /* graph_capture_record_stream_reuse: the capture graph's order, and the
     * free markers of deferred blocks */
    sl_cap_stream *cap_streams;
    size_t ncap_streams, cap_streams_cap;
    sl_cap_seen *cap_seen;
    size_t ncap_seen, cap_seen_cap;
    sl_cap_mark *cap_marks;
    size_t ncap_marks, cap_marks_cap;
    uint64_t next_pool_id[2]; /* graph space, user space */
    sl_slab slab;
    sl_ptrmap ptrs; /* allocated blocks by address */
    /* every segment (segs.c): segs[] in no set order (O(1) to add or
     * remove; address order after sl_segs_sort), seg_index by address for
     * lookups, behind by the changes in seg_log until a lookup needs it */
    sl_segment **segs;
    size_t nsegs, segs_cap;
    bool segs_unsorted;
    sl_rtree seg_index; /* tag: the sl_segment */
    sl_seg_change *seg_log;
    size_t seg_log_n, seg_log_cap;
    uint64_t total_allocated_memory; /* bytes reserved from the backend */
    uint64_t segments_made; /* segments created so far (sl_segment_order) */
    /* policy:stitch's alias pages, sorted by page (stitch.c) */
    sl_alias *aliases;
    size_t naliases, aliases_cap;
    /* memory fraction */
    double fraction;
    bool limit_in_effect;
    uint64_t allowed_memory_maximum;
    /* what the fraction's limit has decided so far (sl_replay_same_from):
     * the most bytes a passing limit check asked for (total + size), whether
     * one failed, the most bytes the collector found at or under its
     * threshold, and whether it ever found more (and collected) */
    uint64_t cap_limit_need, cap_gc_need;
    bool cap_limit_refused, cap_gc_acted;
    /* events */
    sl_evq *evqs; /* in process_events' walk order (events.c) */
    size_t nevqs, evqs_cap;
    uint32_t *evq_index; /* stream -> position + 1 in evqs (events.c) */
    size_t evq_index_cap;
    /* dropped queues' buffers, for the next new queues (a replay makes a
     * queue for each deferred free; a training step has ~100 at once) */
    struct sl_evq_buf {
        sl_evq_entry *items;
        size_t cap;
    } *evq_spares;
    size_t nevq_spares, evq_spares_cap;
    size_t pending_events;
    /* PyTorch's cuda_events map (ska::flat_hash_map keyed by CUDAStream),
     * mirrored slot by slot when the user gives each stream its key
     * (sublet_set_stream_key): process_events then walks the queues in the
     * map's slot order, as PyTorch does (events.c) */
    sublet_stream_key_fn ska_key;
    void *ska_user;
    struct sl_ska_slot {
        sublet_stream stream;
        int8_t dist; /* -1: empty */
    } *ska;
    size_t ska_buckets; /* 0 until the first insert, then a power of 2 */
    int ska_maxlk, ska_shift;
    size_t ska_n;
    /* process_events found every queue's head incomplete at the backend's
     * event_epoch ev_epoch, and no queue has changed since (see there) */
    bool ev_clean;
    uint64_t ev_epoch;
    sublet_event **event_pool;
    size_t nevent_pool, event_pool_cap;
    /* statistics */
    sublet_stats stats;
    /* callbacks */
    sublet_trace_fn trace_fn;
    void *trace_user;
    uint32_t trace_actions; /* bit (1u << action): delivered to trace_fn */
    sublet_event_fn event_fn; /* sublet_event_set: time and stack with each event */
    void *event_user;
    sublet_oom_fn oom_fn;
    void *oom_user;
    char oom_msg[2048];
    /* recording (src/history.c); history is NULL when off */
    struct sl_history *history;
    uint32_t cur_stack; /* stack of the malloc in progress (lock held) */
    uint32_t op_stack;  /* context of the API call in progress, for what it frees */
    struct sl_stacks *stacks;
    sublet_stack_fn stack_fn;
    void *stack_user;
    sublet_clock_fn clock_fn;
    void *clock_user;
    uint64_t now_cache; /* the real-time clock read once per locked call, 0 = not yet */
};

/* Virtual-memory segments in use: expandable_segments:True or policy:stitch. */
static inline bool sl_virtual(const sublet_allocator *a)
{
    return a->settings.expandable_segments || a->settings.policy == SUBLET_POLICY_STITCH;
}

static inline bool sl_is_split(const sl_block *b) { return b->prev || b->next; }

/* A new segment's sl_segment.order: PyTorch 2.14 orders equal-sized free
 * blocks by the creation of their segments before their addresses
 * (BlockComparatorSizeCounterAddress, pytorch/pytorch#183591; earlier
 * releases by the address alone: 0 for every segment).  Only where 2.14 or
 * later is named: under `newest` the address decides, as in every release
 * that recorded the traces users replay (docs/versions.md). */
static inline uint64_t sl_segment_order(sublet_allocator *a)
{
    return a->settings.pytorch_version != SUBLET_PYTORCH_NEWEST &&
                   sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 14))
               ? ++a->segments_made
               : 0;
}

/* The smallest device size on which the run so far of a, an allocator over
 * the sim backend `sim` of `cap` bytes, would have gone exactly alike (and so
 * on every larger size), or UINT64_MAX when that is not known: the sim read
 * its capacity past info0 (its mem_info calls when a was created), refused a
 * call, or the limit refused one or the collector collected (allocator.c).
 * The caller rules out runs that ran out of memory. */
uint64_t sl_same_from(const sublet_allocator *a, const sublet_backend *sim, uint64_t info0,
                      uint64_t cap);

static inline bool sl_gc_active(const sublet_allocator *a)
{
    return a->limit_in_effect && a->settings.garbage_collection_threshold > 0.0;
}

/* ---- engine.c: the lock, the shared steps of the allocation path ------------ */
static inline void sl_lock(sublet_allocator *a) { sl_mutex_lock(&a->lock); }
static inline void sl_unlock(sublet_allocator *a)
{
    a->now_cache = 0; /* the next locked call reads the clock again */
    sl_mutex_unlock(&a->lock);
}
bool sl_block_active(const sl_block *b);
sublet_status sl_segment_adopt(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                               uint64_t size, uint64_t hint, sl_block **out);
void sl_stat_inc(sublet_stat *s, int64_t x);
/* a statistic array: the aggregate entry and pool kind `kind`'s */
void sl_arr_inc(sublet_stat *arr, int kind, int64_t x);
void sl_arr_dec(sublet_stat *arr, int kind, int64_t x);
void sl_emit(sublet_allocator *a, sublet_action act, uint64_t addr, uint64_t size,
             sublet_stream stream, uint32_t stack);
uint64_t sl_try_merge(sublet_allocator *a, sl_block *dst, sl_block *src);
/* A new segment of exactly `size` bytes through the device path (counted as
 * a device alloc, segment_alloc emitted; its block not yet indexed), and the
 * release of a free whole segment: sublet_reserve (reserve.c). */
sublet_status sl_segment_new(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                             uint64_t size, sl_block **out);
sublet_status sl_segment_release(sublet_allocator *a, sl_block *b);

/* engine.c: free_block (§4.4): a block's memory returns to its pool. */
void sl_free_block(sublet_allocator *a, struct sl_block *b);

static inline sublet_pool_id sl_pool_id_of(const sl_pool *p)
{
    return p->owner ? p->owner->id : (sublet_pool_id){0, 0};
}

#endif
