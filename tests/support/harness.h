/* sublet — shared helpers for the engine tests (cmocka).
 *
 * Every helper that changes allocator state (malloc, free, record_stream,
 * empty_cache, process_events) runs sublet_check() right after the call and
 * fails the test, with the checker's message and the caller's file:line,
 * when an invariant is broken.  Include <cmocka.h> (with its prerequisites)
 * before this header. */
#ifndef SUBLET_TEST_HARNESS_H
#define SUBLET_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sublet/sublet.h"
#include "sublet/trace.h"

/* 1 in a ThreadSanitizer build.  TSan is there for the threads test; the
 * single-threaded randomized tests scale themselves down under it. */
#if defined(__SANITIZE_THREAD__)
#define H_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define H_UNDER_TSAN 1
#endif
#endif
#ifndef H_UNDER_TSAN
#define H_UNDER_TSAN 0
#endif

#ifndef KiB
#define KiB (UINT64_C(1) << 10)
#endif
#ifndef MiB
#define MiB (UINT64_C(1) << 20)
#endif
#ifndef GiB
#define GiB (UINT64_C(1) << 30)
#endif

/* One allocator on a backend.  `inner` is the sim or host backend; `fault`
 * wraps it when asked for; `be` is what the allocator was given. */
typedef struct h_env {
    sublet_backend *inner;
    sublet_backend *fault;
    sublet_backend *be;
    sublet_allocator *a;
} h_env;

/* Backend kinds for h_env_init. */
enum { H_SIM = 0, H_HOST = 1, H_SIM_FAULT = 2 };

/* Create backend + allocator with `conf` (NULL is turned into "", so the
 * environment never leaks into a test).  Asserts success. */
void h_env_init_at(h_env *e, int kind, uint64_t capacity, const char *conf, const char *file,
                   int line);
#define h_env_init(e, kind, cap, conf) h_env_init_at((e), (kind), (cap), (conf), __FILE__, __LINE__)
/* Destroy the allocator (checked first) and the backends. */
void h_env_fini(h_env *e);

/* sublet_check(), failing the test with its message. */
void h_check_at(sublet_allocator *a, const char *file, int line);
#define CHECK(a) h_check_at((a), __FILE__, __LINE__)

/* Checked operations.  The h_try_* forms return the status; the others assert
 * SUBLET_OK (and, for malloc, a non-NULL pointer). */
sublet_status h_try_malloc_at(sublet_allocator *a, uint64_t n, sublet_stream s, void **p,
                              const char *file, int line);
void *h_malloc_at(sublet_allocator *a, uint64_t n, sublet_stream s, const char *file, int line);
sublet_status h_try_free_at(sublet_allocator *a, void *p, const char *file, int line);
void h_free_at(sublet_allocator *a, void *p, const char *file, int line);
sublet_status h_try_record_at(sublet_allocator *a, void *p, sublet_stream s, const char *file,
                              int line);
void h_record_at(sublet_allocator *a, void *p, sublet_stream s, const char *file, int line);
void h_empty_cache_at(sublet_allocator *a, const char *file, int line);
void h_process_events_at(sublet_allocator *a, const char *file, int line);
#define h_try_malloc(a, n, s, p) h_try_malloc_at((a), (n), (s), (p), __FILE__, __LINE__)
#define h_malloc(a, n, s) h_malloc_at((a), (n), (s), __FILE__, __LINE__)
#define h_try_free(a, p) h_try_free_at((a), (p), __FILE__, __LINE__)
#define h_free(a, p) h_free_at((a), (p), __FILE__, __LINE__)
#define h_try_record(a, p, s) h_try_record_at((a), (p), (s), __FILE__, __LINE__)
#define h_record(a, p, s) h_record_at((a), (p), (s), __FILE__, __LINE__)
#define h_empty_cache(a) h_empty_cache_at((a), __FILE__, __LINE__)
#define h_process_events(a) h_process_events_at((a), __FILE__, __LINE__)

/* One flat stat ("allocated_bytes.all.current", "num_ooms", ...) through
 * sublet_stats_read + sublet_stats_lookup; an unknown key fails the test. */
int64_t h_stat_at(sublet_allocator *a, const char *key, const char *file, int line);
#define h_stat(a, key) h_stat_at((a), (key), __FILE__, __LINE__)

/* Block of a live pointer (asserts it is known). */
void h_block_at(sublet_allocator *a, const void *p, uint64_t *base, uint64_t *size,
                uint64_t *requested, const char *file, int line);
uint64_t h_block_size_at(sublet_allocator *a, const void *p, const char *file, int line);
#define h_block_size(a, p) h_block_size_at((a), (p), __FILE__, __LINE__)

/* Segment layout through sublet_segments_walk: number of segments, and the
 * segment (index in address order) holding an address, or -1. */
size_t h_nsegments(sublet_allocator *a);
typedef struct h_seginfo {
    uint64_t addr, size;
    size_t nblocks;
    int is_small;
    sublet_stream stream;
} h_seginfo;
/* Fills up to cap entries, returns the number of segments. */
size_t h_segments(sublet_allocator *a, h_seginfo *out, size_t cap);
/* The segment containing addr (asserts there is one). */
h_seginfo h_segment_of_at(sublet_allocator *a, uint64_t addr, const char *file, int line);
#define h_segment_of(a, addr) h_segment_of_at((a), (addr), __FILE__, __LINE__)

/* Compare two stats structures field by field (every stat of every pool,
 * current/peak/allocated/freed, the singles and the counters); on the first
 * difference the test fails naming the flat key. */
void h_stats_equal_at(const sublet_stats *want, const sublet_stats *got, const char *file,
                      int line);
#define h_stats_equal(w, g) h_stats_equal_at((w), (g), __FILE__, __LINE__)

/* A docs/rules.md §7.1 Stat model for expected values. */
void h_stat_inc(sublet_stat *s, int64_t x);
void h_stat_dec(sublet_stat *s, int64_t x);
/* all + the pool kind's entry (SUBLET_POOL_SMALL / SUBLET_POOL_LARGE); x may
 * be negative (a decrease). */
void h_arr_add(sublet_stat *arr, int kind, int64_t x);

/* Deterministic PRNG (splitmix64). */
uint64_t h_rand(uint64_t *state);
/* Uniform in [lo, hi). */
uint64_t h_rand_range(uint64_t *state, uint64_t lo, uint64_t hi);

/* Address helper. */
static inline uint64_t h_addr(const void *p) { return (uint64_t)(uintptr_t)p; }

/* A synthetic allocation trace for the replay tests: the rows a training-like
 * program might record, with no segment rows of its own except segment_free
 * rows that make the replay call empty_cache().
 * `rows` rows drawn from `seed`: allocs of 512 bytes to 100 MiB (plus up to
 * 4 KiB of odd bytes) on `streams` streams (0, 9, 18, ...), at most 64 live;
 * frees, one in five of them completed by a later row (a stream use); and
 * about one row in fifty a segment_free, which the replay drives as one
 * empty_cache().  Addresses are unique per alloc.  Asserts on failure. */
sublet_trace *h_synthetic_trace(uint64_t seed, int rows, int streams);

#endif
