/* sublet — statistics, with PyTorch's torch.cuda.memory_stats() meaning.
 *
 * One list drives everything: the struct below, the flat "key value" text,
 * the JSON form and the memory_summary rows are all generated from these
 * X-macros.  Order of SUBLET_STAT_ARRAYS is the memory_summary order. */
#ifndef SUBLET_STATS_H
#define SUBLET_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A PyTorch Stat: current, peak, allocated (sum of increases), freed (sum of
 * decreases). */
typedef struct sublet_stat {
    int64_t current;
    int64_t peak;
    int64_t allocated;
    int64_t freed;
} sublet_stat;

enum { SUBLET_POOL_ALL = 0, SUBLET_POOL_SMALL = 1, SUBLET_POOL_LARGE = 2, SUBLET_POOL_KINDS = 3 };

/* X(key, summary title, is_bytes) — per-pool stat arrays, summary order. */
#define SUBLET_STAT_ARRAYS(X)                                  \
    X(allocated_bytes, "Allocated memory", 1)                 \
    X(active_bytes, "Active memory", 1)                       \
    X(requested_bytes, "Requested memory", 1)                 \
    X(reserved_bytes, "GPU reserved memory", 1)               \
    X(inactive_split_bytes, "Non-releasable memory", 1)       \
    X(allocation, "Allocations", 0)                           \
    X(active, "Active allocs", 0)                             \
    X(segment, "GPU reserved segments", 0)                    \
    X(inactive_split, "Non-releasable allocs", 0)

/* X(key, summary title) — single stats without pool split. */
#define SUBLET_STAT_SINGLES(X)                          \
    X(oversize_allocations, "Oversize allocations")    \
    X(oversize_segments, "Oversize GPU segments")

/* X(key) — plain counters. */
#define SUBLET_STAT_COUNTERS(X) \
    X(num_alloc_retries)        \
    X(num_ooms)                 \
    X(num_sync_all_streams)     \
    X(num_device_alloc)         \
    X(num_device_free)

#define SUBLET_STATS_VERSION 1

typedef struct sublet_stats {
    uint32_t version;     /* SUBLET_STATS_VERSION */
    uint32_t struct_size; /* sizeof(sublet_stats) of the library */
#define SUBLET_X_ARR(key, title, bytes) sublet_stat key[SUBLET_POOL_KINDS];
    SUBLET_STAT_ARRAYS(SUBLET_X_ARR)
#undef SUBLET_X_ARR
#define SUBLET_X_ONE(key, title) sublet_stat key;
    SUBLET_STAT_SINGLES(SUBLET_X_ONE)
#undef SUBLET_X_ONE
#define SUBLET_X_CNT(key) int64_t key;
    SUBLET_STAT_COUNTERS(SUBLET_X_CNT)
#undef SUBLET_X_CNT
    int64_t max_split_size; /* -1 when unlimited, frozen at creation */
} sublet_stats;

/* Flat PyTorch keys ("allocated_bytes.all.current" ...) sorted by key, as
 * torch.cuda.memory_stats() returns them.  Each line "key value\n".
 * Returns the length that was (or would have been) written, like snprintf. */
SUBLET_API size_t sublet_stats_format_flat(const sublet_stats *s, char *buf, size_t cap);
/* The same keys as one flat JSON object {"key": value, ...}. */
SUBLET_API size_t sublet_stats_format_json(const sublet_stats *s, char *buf, size_t cap);
/* Look up one flat key; returns 0 and sets *out, or -1 for an unknown key. */
SUBLET_API int sublet_stats_lookup(const sublet_stats *s, const char *key, int64_t *out);

/* The newest PyTorch's per-pool keys (docs/rules.md §7):
 * reserved_bytes_by_private_pools.<a>_<b>.<pool>.<metric>, one group of 12
 * per private pool (a, b), from that pool's reserved_bytes (sublet/pool.h's
 * sublet_pool_reserved_read fills them, under the release that has them). */
typedef struct sublet_pool_reserved {
    uint64_t id[2];
    sublet_stat reserved_bytes[SUBLET_POOL_KINDS];
} sublet_pool_reserved;
/* sublet_stats_format_flat / _json with those keys added, in their sorted
 * places; npools 0 gives the same text as the plain ones. */
SUBLET_API size_t sublet_stats_format_flat_pools(const sublet_stats *s,
                                                 const sublet_pool_reserved *pools,
                                                 size_t npools, char *buf, size_t cap);
SUBLET_API size_t sublet_stats_format_json_pools(const sublet_stats *s,
                                                 const sublet_pool_reserved *pools,
                                                 size_t npools, char *buf, size_t cap);

/* torch.cuda.memory_summary(device, abbreviated) text, byte for byte. */
SUBLET_API size_t sublet_stats_format_summary(const sublet_stats *s, int device, int abbreviated,
                                              char *buf, size_t cap);

/* PyTorch's format_size (OOM messages): "1024 bytes", "2.00 MiB", ... */
SUBLET_API size_t sublet_format_size(uint64_t n, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
