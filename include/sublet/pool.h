/* sublet — private pools: CUDA graphs' pools and torch.cuda.MemPool
 * (docs/rules.md §2.3, §3.5, §4.5; docs/pools.md).
 *
 * A private pool holds its own small and large free blocks; blocks never
 * migrate between pools.  While a pool is being allocated to
 * (sublet_pool_begin_allocate), every allocation its filter accepts (a
 * stream: a graph capture; the calling thread: use_mem_pool) is served from
 * it.  A pool whose use count drops to 0 becomes freeable: its free whole
 * segments go back by the next empty_cache or OOM path, and the pool itself
 * is forgotten once it holds no segment.  Every call takes the allocator's
 * lock. */
#ifndef SUBLET_POOL_H
#define SUBLET_POOL_H

#include <stdint.h>

#include "sublet/api.h"
#include "sublet/sublet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's MempoolId_t: (0, 0) is the default pools.  Graph pools made by a
 * capture are (n, 0); user-created ones (MemPool, graph_pool_handle()) are
 * (0, n); n counts from 1 in each space, per allocator. */
typedef struct sublet_pool_id {
    uint64_t first, second;
} sublet_pool_id;

enum { SUBLET_POOL_ID_GRAPH = 0, SUBLET_POOL_ID_USER = 1 };

/* A pool-specific allocator (PyTorch: a MemPool's CUDAPluggableAllocator):
 * replaces the backend's segment allocation for this pool's segments.
 * alloc returns SUBLET_OK and *addr, or any error for "out of memory" (the
 * allocator then goes on down its OOM ladder). */
typedef sublet_status (*sublet_pool_alloc_fn)(void *user, uint64_t size, uint64_t *addr);
typedef void (*sublet_pool_free_fn)(void *user, uint64_t addr, uint64_t size);

typedef struct sublet_pool_options {
    /* PyTorch after 2.6 (pytorch_version 2.9 and later here): */
    int use_on_oom; /* the default pools may take this pool's cached blocks
                     * when a device allocation fails (§3.2 step 4c) */
    int no_split;   /* this pool's blocks are never split */
    sublet_pool_alloc_fn alloc; /* both or neither */
    sublet_pool_free_fn free;
    void *user;
} sublet_pool_options;

/* A new id in space `space` (SUBLET_POOL_ID_GRAPH or _USER) without creating
 * the pool: torch.cuda.graph_pool_handle(). */
SUBLET_API sublet_status sublet_pool_handle(sublet_allocator *a, int space, sublet_pool_id *out);
/* torch.cuda.MemPool(...): a new user id, its pool created with use count 1
 * (opts may be NULL). */
SUBLET_API sublet_status sublet_pool_create(sublet_allocator *a, const sublet_pool_options *opts,
                                            sublet_pool_id *out);
/* ensureExistsAndIncrefPool: create `id`'s pool (use count 1) or add a use. */
SUBLET_API sublet_status sublet_pool_incref(sublet_allocator *a, sublet_pool_id id);

/* The redirection filter of sublet_pool_begin_allocate. */
enum {
    SUBLET_POOL_FILTER_STREAM = 0,  /* allocations on `stream` (graph capture) */
    SUBLET_POOL_FILTER_THREAD = 1,  /* allocations by the calling thread (use_mem_pool) */
    SUBLET_POOL_FILTER_CALLBACK = 2 /* a caller's predicate (sublet_pool_begin_allocate_fn) */
};

/* beginAllocateToPool: create the pool or add a use, then redirect the
 * allocations the filter accepts to it.  SUBLET_ERR_BUSY when `id` is
 * already being allocated to (the use count stays raised, as PyTorch's).
 * Under policy:stitch a pool's pages are stitched within the pool only.
 * Several redirections may be
 * active at once: PyTorch 2.6-2.8 asks the oldest first, later releases the
 * most recent first. */
SUBLET_API sublet_status sublet_pool_begin_allocate(sublet_allocator *a, sublet_pool_id id,
                                                    int filter, sublet_stream stream);
/* A caller's filter: nonzero when an allocation on `stream` goes to the
 * pool.  It is called with the allocator's lock held, by the thread that
 * allocates, for every allocation while the redirection is active (and only
 * then): it must not call into this allocator. */
typedef int (*sublet_pool_filter_fn)(void *user, sublet_stream stream);
/* beginAllocateToPool with an arbitrary filter (PyTorch's
 * std::function<bool(cudaStream_t)>: a drop-in forwards it here); otherwise
 * as sublet_pool_begin_allocate.  `user` must stay valid until
 * sublet_pool_end_allocate(id) has returned; the redirection is
 * SUBLET_POOL_FILTER_CALLBACK (sublet_empty_cache does not treat it as the
 * calling thread's pool). */
SUBLET_API sublet_status sublet_pool_begin_allocate_fn(sublet_allocator *a, sublet_pool_id id,
                                                       sublet_pool_filter_fn fn, void *user);
/* endAllocateToPool (the use count is unchanged: see sublet_pool_release). */
SUBLET_API sublet_status sublet_pool_end_allocate(sublet_allocator *a, sublet_pool_id id);
/* releasePool (graph reset, end of use_mem_pool, MemPool destruction): one
 * use fewer; at 0 the pool is freeable. */
SUBLET_API sublet_status sublet_pool_release(sublet_allocator *a, sublet_pool_id id);
/* release_cached_blocks(id): what torch.cuda.empty_cache() does under
 * use_mem_pool(pool) and what MemPool's destructor does after releasePool:
 * when `id` is freeable, its events are synchronised and its free whole
 * segments released (the pool forgotten when none is left); the default
 * pools are untouched.  sublet_empty_cache() called by a thread that is
 * allocating to a pool (SUBLET_POOL_FILTER_THREAD) does the same for it. */
SUBLET_API sublet_status sublet_pool_empty_cache(sublet_allocator *a, sublet_pool_id id);

/* Stream `waiter` waits for the work captured so far on `signaler`
 * (Stream.wait_stream, cudaStreamWaitEvent) during a capture; waiting on a
 * capturing stream makes `waiter` part of the capture.  Recorded only with
 * graph_capture_record_stream_reuse:True (pytorch_version 2.9 and later) while
 * a redirection is active, a no-op otherwise: a block freed during a capture
 * with record_stream uses, all on capturing streams, is reused by a later
 * allocation on its own stream once that stream has waited for every stream
 * that used it since the free (§4.6; PyTorch walks the capture graph). */
SUBLET_API sublet_status sublet_pool_stream_wait(sublet_allocator *a, sublet_stream waiter,
                                                 sublet_stream signaler);

typedef struct sublet_pool_info {
    int exists;          /* the allocator knows the pool */
    int use_count;       /* PyTorch's use_count */
    int device_segments; /* cudaMalloc_count: segments (mapped ranges) held */
    int freeable;
    int allocating;      /* being allocated to */
    uint64_t free_bytes; /* cached free blocks of the pool */
} sublet_pool_info;
/* SUBLET_OK with exists = 0 for an unknown id. */
SUBLET_API sublet_status sublet_pool_info_read(sublet_allocator *a, sublet_pool_id id,
                                               sublet_pool_info *out);
/* The pool's own statistics: the stat arrays (all/small/large), the
 * oversize stats and num_device_alloc / num_device_free, counted as in the
 * allocator's but for this pool's blocks and segments only (the rest are 0).
 * SUBLET_ERR_INVALID_ARGUMENT for an unknown id. */
SUBLET_API sublet_status sublet_pool_stats_read(sublet_allocator *a, sublet_pool_id id,
                                                sublet_stats *out);

/* The newest PyTorch's reserved_bytes_by_private_pools (sublet/stats.h's
 * sublet_stats_format_flat_pools / _json_pools): every private pool the
 * allocator knows, in the order of their ids, with its reserved_bytes.
 * Writes min(*n, cap) entries and sets *n to the number of pools; 0 under a
 * pytorch_version before `newest` (the releases without these keys). */
SUBLET_API sublet_status sublet_pool_reserved_read(sublet_allocator *a, sublet_pool_reserved *out,
                                                   size_t cap, size_t *n);

/* The pool of the segment holding `ptr` ((0, 0): a default pool). */
SUBLET_API sublet_status sublet_pool_of(sublet_allocator *a, const void *ptr, sublet_pool_id *out);

#ifdef __cplusplus
}
#endif
#endif
