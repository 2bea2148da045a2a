/* sublet — allocator settings and the PYTORCH_CUDA_ALLOC_CONF grammar.
 *
 * One parser, driven by one option table, for PyTorch's grammar
 * ("key:value,key:[k:v,...]").  A string is applied whole or not at all: on
 * error the settings passed in are untouched and the message names the
 * offending option (PyTorch's texts). */
#ifndef SUBLET_CONFIG_H
#define SUBLET_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SUBLET_ROUNDUP_BUCKETS 16
#define SUBLET_SIZE_UNLIMITED UINT64_MAX
#define SUBLET_CONF_RAW_MAX 1024
#define SUBLET_WARMUP_MAX 64 /* entries of a warm-up plan */

/* A PyTorch release as sublet_settings.pytorch_version holds it: 2.6 is 206.
 * SUBLET_PYTORCH_NEWEST (0, the default) is the newest behaviour (current
 * main); docs/versions.md lists every rule a version selects. */
#define SUBLET_PYTORCH_VERSION(major, minor) ((uint32_t)(major) * 100u + (uint32_t)(minor))
#define SUBLET_PYTORCH_NEWEST 0u
#define SUBLET_PYTORCH_OLDEST SUBLET_PYTORCH_VERSION(2, 6) /* the oldest accepted */
/* The release SUBLET_PYTORCH_NEWEST is taken as: its rules, and those of every
 * later release sublet is given, are the newest ones. */
#define SUBLET_PYTORCH_NEWEST_AS SUBLET_PYTORCH_VERSION(2, 10)

typedef enum sublet_policy {
    SUBLET_POLICY_NATIVE = 0, /* PyTorch's native caching allocator */
    /* sublet's: every segment is virtual memory backed by 2 MiB pages (both
     * pools), so free pages anywhere can back a request anywhere; see
     * docs/policies.md. */
    SUBLET_POLICY_STITCH = 1,
} sublet_policy;

/* One entry of a warm-up plan (the `warmup` option): `count` segments of
 * `size` bytes in the pool `pool` (SUBLET_POOL_SMALL = 1 or SUBLET_POOL_LARGE
 * = 2, sublet/stats.h), reserved on the default stream by sublet_reserve. */
typedef struct sublet_warmup_entry {
    int pool;
    uint32_t count;
    uint64_t size;
} sublet_warmup_entry;

typedef struct sublet_settings {
    /* PyTorch options (docs/rules.md §5.3). */
    uint64_t max_split_size;         /* bytes; SUBLET_SIZE_UNLIMITED = unset */
    uint64_t max_non_split_rounding; /* bytes; default = large_segment_size */
    uint32_t roundup_power2_divisions[SUBLET_ROUNDUP_BUCKETS]; /* 0 = off */
    double garbage_collection_threshold; /* 0 = off, else in (0,1) */
    bool expandable_segments;
    bool release_lock_on_cudamalloc;
    bool pinned_use_cuda_host_register;
    uint32_t pinned_num_register_threads; /* default 1 */
    bool pinned_use_background_threads;
    uint64_t pinned_reserve_segment_size_mb;
    bool graph_capture_record_stream_reuse;
    double per_process_memory_fraction; /* default 1.0 */
    uint64_t large_segment_size;        /* bytes; default 20 MiB */
    bool throw_on_cudamalloc_oom;
    bool pinned_free_catch_all;
    int backend_async;                   /* 0 native, 1 cudaMallocAsync */
    /* sublet options. */
    sublet_policy policy;
    /* pytorch_version:2.6 — whose rules to follow where PyTorch changed them
     * between releases (SUBLET_PYTORCH_VERSION; SUBLET_PYTORCH_NEWEST = the
     * newest).  Applied before every other entry of its string, whatever its
     * place; kept by later parses unless named again. */
    uint32_t pytorch_version;
    /* memory_fraction:F — the call torch.cuda.set_per_process_memory_fraction(F)
     * made before the first allocation (the option per_process_memory_fraction
     * exists only in 2.9+; the call in every version, and before 2.9 it puts a
     * limit in effect even at 1.0).  Negative: not called.  Kept by later
     * parses unless named again. */
    double memory_fraction;
    /* warmup:[pool:size*count,...] — the warm-up plan: segments the allocator
     * reserves on the default stream when it is created, and that
     * sublet_settings_apply makes sure it holds (docs/tune.md §7).  Reset on
     * every parse, like max_split_size: a string without it has no plan. */
    sublet_warmup_entry warmup[SUBLET_WARMUP_MAX];
    uint32_t nwarmup;
    /* The last raw string applied (reported in snapshots). */
    char raw[SUBLET_CONF_RAW_MAX];
} sublet_settings;

/* Defaults: PyTorch's. */
SUBLET_API void sublet_settings_default(sublet_settings *s);

/* Parse `conf` on top of `s` (PyTorch semantics: max_split_size, the
 * roundup buckets, garbage_collection_threshold and max_non_split_rounding are
 * reset on every parse; other options keep their values unless named).
 * On success *s is replaced; on error *s is unchanged, SUBLET_ERR_CONFIG is
 * returned and `err` (if not NULL) holds PyTorch's error text. */
SUBLET_API sublet_status sublet_settings_parse(sublet_settings *s, const char *conf, char *err,
                                               size_t err_cap);

/* The environment string sublet uses: SUBLET_ALLOC_CONF, else
 * PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF; NULL if none is set.
 * *which_out (optional) receives the variable's name. */
SUBLET_API const char *sublet_settings_env(const char **which_out);
/* The same for PyTorch release `pytorch_version` (SUBLET_PYTORCH_VERSION, or
 * SUBLET_PYTORCH_NEWEST): before 2.9 PyTorch did not read PYTORCH_ALLOC_CONF. */
SUBLET_API const char *sublet_settings_env_for(uint32_t pytorch_version, const char **which_out);

/* Does `s` follow PyTorch release `version` (SUBLET_PYTORCH_VERSION) or a
 * later one?  Always true under SUBLET_PYTORCH_NEWEST. */
SUBLET_API bool sublet_settings_since(const sublet_settings *s, uint32_t version);

/* Can the pool `pool_kind` (SUBLET_POOL_SMALL / SUBLET_POOL_LARGE) hold a
 * segment of exactly `size` bytes under `s`?  What sublet_reserve and the
 * warmup option accept.  Native policy: a small-pool segment is 2 MiB
 * (kSmallBuffer); a large-pool one is large_segment_size or a multiple of
 * 2 MiB of at least 10 MiB (get_allocation_size).  expandable_segments:True:
 * a multiple of the pool's page (2 MiB small, large_segment_size large).
 * policy:stitch: SUBLET_ERR_UNSUPPORTED.  Otherwise SUBLET_OK, or
 * SUBLET_ERR_INVALID_ARGUMENT; `why` (may be NULL) gets the reason. */
SUBLET_API sublet_status sublet_warmup_check(const sublet_settings *s, int pool_kind, uint64_t size,
                                             char *why, size_t why_cap);
/* A plan as the option's text, "warmup:[large:512MiB*2,small:2MiB*4]"
 * (snprintf semantics: the full length is returned). */
SUBLET_API size_t sublet_warmup_format(const sublet_warmup_entry *plan, size_t n, char *buf,
                                       size_t cap);

/* Round a request as PyTorch's round_size() does under `s` (§1.2). */
SUBLET_API uint64_t sublet_round_size(const sublet_settings *s, uint64_t n);
/* Segment size for a rounded request, PyTorch's get_allocation_size (§1.5). */
SUBLET_API uint64_t sublet_allocation_size(const sublet_settings *s, uint64_t rounded);

/* Parse "80GiB", "1.5GB", "512MiB", "4k", "1048576" into bytes.  KiB/MiB/
 * GiB/TiB (and K/M/G/T) are binary; kB/MB/GB/TB are decimal.  Returns 0 on
 * success, -1 on a malformed value or overflow. */
SUBLET_API int sublet_parse_size(const char *text, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
