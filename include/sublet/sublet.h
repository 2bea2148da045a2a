/* sublet — a caching device allocator with PyTorch's native policy.
 *
 * One allocator object per device, passed explicitly; every call is
 * thread-safe.  The library never prints: it reports through return codes,
 * messages the caller asks for, and callbacks. */
#ifndef SUBLET_SUBLET_H
#define SUBLET_SUBLET_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/backend.h"
#include "sublet/config.h"
#include "sublet/error.h"
#include "sublet/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SUBLET_VERSION_MAJOR 0
#define SUBLET_VERSION_MINOR 1
#define SUBLET_VERSION_PATCH 0
SUBLET_API const char *sublet_version(void);

typedef struct sublet_allocator sublet_allocator;

/* Trace actions, PyTorch's names (snapshot device_traces). */
#define SUBLET_ACTION_LIST(X)        \
    X(SUBLET_ACT_ALLOC, "alloc")     \
    X(SUBLET_ACT_FREE_REQUESTED, "free_requested") \
    X(SUBLET_ACT_FREE_COMPLETED, "free_completed") \
    X(SUBLET_ACT_SEGMENT_ALLOC, "segment_alloc")   \
    X(SUBLET_ACT_SEGMENT_FREE, "segment_free")     \
    X(SUBLET_ACT_SEGMENT_MAP, "segment_map")       \
    X(SUBLET_ACT_SEGMENT_UNMAP, "segment_unmap")   \
    X(SUBLET_ACT_OOM, "oom")                       \
    X(SUBLET_ACT_SNAPSHOT, "snapshot")

typedef enum sublet_action {
#define SUBLET_X_ACT(e, name) e,
    SUBLET_ACTION_LIST(SUBLET_X_ACT)
#undef SUBLET_X_ACT
    SUBLET_ACT_COUNT
} sublet_action;
SUBLET_API const char *sublet_action_name(sublet_action a);

/* Called with the allocator's lock held, for every trace event, in order.
 * For SUBLET_ACT_OOM, addr is the device's free bytes and size the rounded
 * request (PyTorch's convention).  Must not call back into the allocator. */
typedef void (*sublet_trace_fn)(void *user, sublet_action action, uint64_t addr,
                                uint64_t size, sublet_stream stream);

/* Called after an OOM, without the lock: (device, alloc_size, limit or total,
 * device free) as PyTorch's OOM observers. */
typedef void (*sublet_oom_fn)(void *user, int device, uint64_t alloc_size, uint64_t limit,
                              uint64_t device_free);

typedef struct sublet_options {
    sublet_backend *backend; /* required; not owned */
    int device;              /* device index, for messages (default backend's) */
    /* Settings string applied at creation (PyTorch grammar).  NULL: read the
     * environment (SUBLET_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF,
     * PYTORCH_ALLOC_CONF).  "" : PyTorch defaults, environment ignored. */
    const char *conf;
} sublet_options;

/* Create an allocator.  On a configuration error returns SUBLET_ERR_CONFIG
 * and, if err is not NULL, PyTorch's error text. */
SUBLET_API sublet_status sublet_allocator_create(const sublet_options *opts, sublet_allocator **out,
                                                 char *err, size_t err_cap);
/* The device index the allocator reports (options.device). */
SUBLET_API int sublet_allocator_device(sublet_allocator *a);
/* Releases every segment the allocator still holds and frees it. */
SUBLET_API void sublet_allocator_destroy(sublet_allocator *a);

/* ---- allocation --------------------------------------------------------- */
/* n == 0 gives *ptr = NULL and SUBLET_OK with nothing recorded (as PyTorch).
 * On OOM: SUBLET_ERR_OOM, *ptr = NULL; sublet_oom_message() has the text. */
SUBLET_API sublet_status sublet_malloc(sublet_allocator *a, uint64_t n, sublet_stream stream,
                                       void **ptr);
/* Free a pointer from sublet_malloc.  NULL is a no-op.  Unknown pointers,
 * double frees and interior pointers return an error and change nothing. */
SUBLET_API sublet_status sublet_free(sublet_allocator *a, void *ptr);
/* Mark that `ptr`'s block is used on `stream`: its memory is not reused until
 * work queued on `stream` before the free has completed (events). */
SUBLET_API sublet_status sublet_record_stream(sublet_allocator *a, void *ptr, sublet_stream stream);

/* PyTorch keeps the frees waiting for events in a ska::flat_hash_map keyed
 * by CUDAStream, and process_events completes them in the map's slot order
 * (fibonacci hashing of std::hash<CUDAStream>: device type << 56 | device
 * index << 48 | the stream's id, the low 48 bits).  key(user, stream) gives
 * that hash for a stream; once set, the engine keeps the same table and
 * walks the queues in its order (by default: the order the queues were
 * made, a dropped queue's place taken by the last).  Set it before the
 * first record_stream. */
typedef uint64_t (*sublet_stream_key_fn)(void *user, sublet_stream stream);
SUBLET_API void sublet_set_stream_key(sublet_allocator *a, sublet_stream_key_fn key, void *user);
/* Complete any pending cross-stream frees whose events have completed
 * (done at the start of every malloc too). */
SUBLET_API sublet_status sublet_process_events(sublet_allocator *a);
/* torch.cuda.empty_cache(): wait for pending events, release every cached
 * whole segment to the backend. */
SUBLET_API sublet_status sublet_empty_cache(sublet_allocator *a);

/* Pre-allocation: create `size` bytes of cached, free device memory in the
 * pool `pool_kind` (SUBLET_POOL_SMALL or SUBLET_POOL_LARGE) for `stream` now,
 * so that later requests find it without a device call.
 *   Native policy: one new segment of exactly `size` bytes.  A small-pool
 *   segment is 2 MiB; a large-pool one is large_segment_size or a multiple
 *   of 2 MiB of at least 10 MiB (the sizes the pool itself creates:
 *   sublet_warmup_check).
 *   expandable_segments:True: `size` bytes more of pages mapped at the
 *   growable end of the stream's reservation of that pool (creating the
 *   reservation when there is none), left free: a multiple of the pool's page
 *   (2 MiB small, large_segment_size large).
 *   policy:stitch: SUBLET_ERR_UNSUPPORTED (it maps pages where it stitches
 *   them, not ahead).
 * The memory goes through the device path as an allocation's would: within
 * the memory fraction, counted in the statistics (segment, reserved_bytes,
 * num_device_alloc), emitted as segment_alloc (segment_map) to the trace
 * callback and the recorded history, and released by empty_cache, the
 * garbage collector and the OOM path like any cached segment.  It never
 * frees cached memory to make room: when the device or the fraction refuses,
 * SUBLET_ERR_OOM is returned, nothing changes, sublet_oom_message() says why,
 * and neither num_ooms nor the OOM observer counts it (no allocation of the
 * program failed).  SUBLET_ERR_INVALID_ARGUMENT for a pool or size the pool
 * could never create; SUBLET_ERR_NO_MEMORY when host memory runs out.  The
 * SUBLET_ALLOC_CONF option `warmup:[large:512MiB*2,small:2MiB*4]` calls it at
 * creation (docs/tune.md §7; `sublet tune` derives such plans). */
SUBLET_API sublet_status sublet_reserve(sublet_allocator *a, uint64_t size, sublet_stream stream,
                                        int pool_kind);

/* Block lookup: start and size of the allocated block holding `ptr`, and
 * its requested size; SUBLET_ERR_INVALID_POINTER when no allocated block
 * holds it.  A block's own address (what sublet_malloc gave) is found in
 * O(1); an interior pointer walks its segment's blocks. */
SUBLET_API sublet_status sublet_block_info(sublet_allocator *a, const void *ptr, uint64_t *base,
                                           uint64_t *size, uint64_t *requested);

/* ---- settings ----------------------------------------------------------- */
/* Re-parse a complete settings string (PyTorch's _set_allocator_settings). */
SUBLET_API sublet_status sublet_settings_apply(sublet_allocator *a, const char *conf, char *err,
                                               size_t err_cap);
SUBLET_API void sublet_settings_get(sublet_allocator *a, sublet_settings *out);
/* torch.cuda.set_per_process_memory_fraction: 0 <= f <= 1; f == 1 removes
 * the limit.  The limit is f × device total. */
SUBLET_API sublet_status sublet_memory_fraction_set(sublet_allocator *a, double fraction);
SUBLET_API double sublet_memory_fraction_get(sublet_allocator *a);

/* ---- statistics and reports -------------------------------------------- */
SUBLET_API void sublet_stats_read(sublet_allocator *a, sublet_stats *out);
SUBLET_API void sublet_stats_reset_peak(sublet_allocator *a);
SUBLET_API void sublet_stats_reset_accumulated(sublet_allocator *a);
/* torch.cuda.memory_summary() text into buf (snprintf semantics).  flags:
 * SUBLET_SUMMARY_ABBREVIATED (1) is PyTorch's abbreviated=True;
 * SUBLET_SUMMARY_FRAGMENTATION (2) appends sublet's fragmentation section
 * after PyTorch's table (metrics per pool and stream, free blocks by size,
 * the pinning segments: sublet/frag.h). */
#define SUBLET_SUMMARY_ABBREVIATED 1
#define SUBLET_SUMMARY_FRAGMENTATION 2
/* SUBLET_SUMMARY_DEVICE (4) appends the device view (sublet_device_view_read)
 * when the backend can tell: what nvidia-smi shows beside what the cache
 * holds. */
#define SUBLET_SUMMARY_DEVICE 4
SUBLET_API size_t sublet_summary(sublet_allocator *a, int flags, char *buf, size_t cap);
/* The full message of the most recent OOM on this allocator ("" if none). */
SUBLET_API size_t sublet_oom_message(sublet_allocator *a, char *buf, size_t cap);

/* Callbacks (NULL to remove). */
SUBLET_API void sublet_trace_set(sublet_allocator *a, sublet_trace_fn fn, void *user);
/* Which actions the trace callback receives: bit (1u << action) of
 * `actions` for each; all of them by default (SUBLET_TRACE_ALL).  A
 * consumer that counts only segment events, say, spares the engine a call
 * at every malloc and free.  The choice stays when sublet_trace_set installs
 * another callback. */
#define SUBLET_TRACE_ALL UINT32_MAX
SUBLET_API void sublet_trace_set_actions(sublet_allocator *a, uint32_t actions);
SUBLET_API void sublet_oom_observer_set(sublet_allocator *a, sublet_oom_fn fn, void *user);

/* ---- inspection --------------------------------------------------------- */
/* Verify every invariant: blocks tile each segment, no two adjacent free
 * blocks, the free index matches the blocks, the pointer map matches the
 * allocated blocks, the statistics equal a recount.  Returns SUBLET_OK or
 * SUBLET_ERR_CORRUPT with a description in msg. */
SUBLET_API sublet_status sublet_check(sublet_allocator *a, char *msg, size_t cap);

typedef enum sublet_block_state {
    SUBLET_BLOCK_INACTIVE = 0,
    SUBLET_BLOCK_ACTIVE_ALLOCATED = 1,
    SUBLET_BLOCK_ACTIVE_PENDING_FREE = 2
} sublet_block_state;

typedef struct sublet_block_view {
    uint64_t addr, size, requested_size;
    sublet_block_state state;
    uint32_t stack; /* allocation stack when recorded (sublet/history.h), 0 = none */
} sublet_block_view;

typedef struct sublet_segment_view {
    uint64_t addr, total_size, allocated_size, active_size, requested_size;
    sublet_stream stream;
    int is_small; /* "small" or "large" pool */
    int is_expandable;
    uint32_t stack; /* stack of the device allocation when recorded, 0 = none */
    size_t nblocks;
    const sublet_block_view *blocks; /* valid during the callback only */
    /* The owning pool's id (sublet/pool.h's sublet_pool_id: first, second);
     * (0, 0) for the default pools.  PyTorch's snapshot segment_pool_id. */
    uint64_t pool_id[2];
} sublet_segment_view;

/* Walk the segments in address order under the lock. */
typedef void (*sublet_segment_fn)(void *user, const sublet_segment_view *seg);
SUBLET_API void sublet_segments_walk(sublet_allocator *a, sublet_segment_fn fn, void *user);

/* ---- fragmentation (kept live by the engine; no walk of the blocks) ----- */
#define SUBLET_STREAM_ALL UINT64_MAX

typedef struct sublet_frag_stats {
    uint64_t reserved_bytes;       /* obtained from the device (mapped pages) */
    uint64_t allocated_bytes;      /* handed out, rounded sizes */
    uint64_t active_bytes;         /* allocated or waiting on other streams */
    uint64_t requested_bytes;      /* what the callers asked for */
    uint64_t inactive_split_bytes; /* free bytes inside split segments */
    uint64_t unallocated_bytes;    /* reserved but not allocated */
    uint64_t free_bytes;           /* cached free blocks (the free index) */
    uint64_t free_blocks;          /* how many */
    uint64_t largest_free_block;   /* the biggest one */
    uint64_t internal_waste_bytes; /* allocated - requested */
    double external;               /* 1 - largest free / free (0 when none) */
    double unused;                 /* 1 - active / reserved (0 when none) */
    double spread;                 /* 1 - sum(free^2) / (sum free)^2 */
} sublet_frag_stats;

/* Metrics for one pool kind (SUBLET_POOL_ALL/SMALL/LARGE) and one stream
 * (SUBLET_STREAM_ALL for every stream).  Byte totals that are not tracked
 * per stream (reserved, allocated, active, requested, inactive split) are
 * given for the pool whatever the stream. */
SUBLET_API sublet_status sublet_frag_read(sublet_allocator *a, int pool_kind, sublet_stream stream,
                                          sublet_frag_stats *out);

/* The largest request on `stream` that would succeed right now without
 * asking the device for memory (cached free blocks only, PyTorch's rounding
 * and oversize rules applied).  0 when none would. */
SUBLET_API uint64_t sublet_max_allocatable(sublet_allocator *a, sublet_stream stream);

/* ---- the device as the driver sees it ------------------------------------- */
/* What nvidia-smi shows, beside what this allocator holds.  Every field is
 * the driver's figure at the moment of the call, except reserved and cached
 * (the allocator's own).  The per-process split needs a backend that can
 * tell (the cuda backend with NVML; sim and host: everything they hold is
 * this process's): has_process is 0 otherwise, and outside_bytes is then
 * the only figure for the memory that is not this allocator's. */
typedef struct sublet_device_view {
    uint64_t total_bytes;    /* the device's memory */
    uint64_t free_bytes;     /* free according to the driver */
    uint64_t used_bytes;     /* total - free: every process on the device */
    uint64_t reserved_bytes; /* held by this allocator (segments, mapped pages) */
    uint64_t cached_bytes;   /* of those, not active: cached free blocks */
    uint64_t outside_bytes;  /* used - reserved: not this allocator's */
    int has_process;         /* the three below are known */
    uint64_t process_bytes;  /* this process (nvidia-smi's per-process figure) */
    uint64_t process_other_bytes; /* this process outside this allocator: its
                                   * CUDA context, other libraries */
    uint64_t others_bytes;   /* other processes: used - process */
    char name[96];           /* the device's name, or "<backend> backend" */
} sublet_device_view;

/* SUBLET_OK, or the backend's error (SUBLET_ERR_UNSUPPORTED when it has no
 * memory information); *out is zeroed first. */
SUBLET_API sublet_status sublet_device_view_read(sublet_allocator *a, sublet_device_view *out);
/* The "Device view" section of the summary, for device index `device`. */
SUBLET_API size_t sublet_device_view_format_text(const sublet_device_view *v, int device, char *buf,
                                                 size_t cap);
/* "key value" lines: device_total_bytes, device_free_bytes, device_used_bytes,
 * device_reserved_bytes, device_cached_bytes, device_outside_bytes, and when
 * known device_process_bytes, device_process_other_bytes, device_others_bytes
 * (snprintf semantics). */
SUBLET_API size_t sublet_device_view_format_flat(const sublet_device_view *v, char *buf,
                                                 size_t cap);

/* ---- replay seeding ------------------------------------------------------ */
/* Adopt a segment that existed before recording started (replay of a trace
 * whose ring buffer began mid-run).  The backend is asked for exactly this
 * address; the segment is cached and free.  Not counted as a device alloc. */
SUBLET_API sublet_status sublet_seed_segment(sublet_allocator *a, uint64_t addr, uint64_t size,
                                             sublet_stream stream, int is_small);
/* Mark [addr, addr+size) inside a seeded segment as an allocated block with
 * the given requested size, splitting the free block around it. */
SUBLET_API sublet_status sublet_seed_block(sublet_allocator *a, uint64_t addr, uint64_t size,
                                           uint64_t requested, sublet_stream stream);

#ifdef __cplusplus
}
#endif
#endif
