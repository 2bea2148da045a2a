/* fuzz_ops — operation sequences on one allocator, with sublet_check() after
 * every step.
 *
 * Input: byte 0 picks the backend (bit 0: sim with 256 MiB, or host with
 * 64 MiB, so that the OOM paths are reached) and the creation settings (a
 * small table of valid strings).  Every following chunk of bytes is one
 * operation: malloc (skewed sizes, three streams), free of a live block,
 * free of a bogus / interior / freed pointer, record_stream, completion of a
 * stream's events (sim), process_events, empty_cache, memory fraction
 * (valid and invalid), settings apply (table strings and raw input bytes),
 * stats resets, sim capacity changes and the text reports, and private
 * pools (sublet/pool.h): a pool id (graph or user space), a MemPool with
 * use_on_oom / no_split and maybe its own allocator (the harness's, with a
 * 96 MiB cap), incref, begin_allocate with a stream or a thread filter (the
 * thread filter from this thread, or from a helper thread that then exits),
 * end_allocate, release, the pool's empty_cache, the pool's info and
 * statistics, and a stream waiting for another during a capture (with
 * graph_capture_record_stream_reuse, deferred frees are then reused).
 *
 * The harness keeps its own model of the live blocks and checks, besides
 * sublet_check():
 *   - every status is one the API documents for that case;
 *   - a refused call (bogus free, bad record_stream, invalid fraction or
 *     settings) changes nothing: the statistics compare equal with memcmp;
 *   - a new block starts at the pointer, holds the request, is a multiple
 *     of 512 and overlaps no live block; on host every live block carries a
 *     pattern that is verified before it is freed (and at the end);
 *   - allocation / allocated_bytes match the model, all = small + large,
 *     peak >= current, the segment bytes seen through the trace callback
 *     equal reserved_bytes (and on sim the backend's own count);
 *   - every pool call returns what its state (sublet_pool_info_read before
 *     the call) makes it return, and leaves the use count / redirection as
 *     documented; a new block lies in the pool the harness's list of active
 *     redirections names (oldest first before pytorch_version 2.9, most
 *     recent first after), else in the default pools or (2.9+) a use_on_oom
 *     pool, and it is still that pool's when it is freed; each pool's
 *     allocation / allocated_bytes equal the model's blocks in it;
 *   - at the end, after ending every redirection, releasing every pool, freeing
 *     everything, empty_cache and completing all streams, the backend and the
 *     pools' own allocator hold nothing. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/pool.h"
#include "sublet/sublet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MiB ((uint64_t)1 << 20)
#define MAX_LIVE 128
#define FREED_RING 16
#define SIM_CAPACITY (256 * MiB)
#define HOST_CAPACITY (64 * MiB)

static void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_ops: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

/* ---- input reader --------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t rd8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t rdn(reader *r, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)rd8(r) << (8 * i);
    return v;
}

/* ---- tables ----------------------------------------------------------------- */

static const char *const create_confs[] = {
    "",
    "max_split_size_mb:20",
    "max_split_size_mb:40",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "roundup_power2_divisions:[1:8,2:4,>:2]",
    "garbage_collection_threshold:0.5,per_process_memory_fraction:0.75",
    "garbage_collection_threshold:0.8,per_process_memory_fraction:0.5,max_split_size_mb:40",
    "max_split_size_mb:20,max_non_split_rounding_mb:30,roundup_power2_divisions:2",
    "large_segment_size_mb:12",
    "per_process_memory_fraction:0.25",
    "expandable_segments:True",
    "expandable_segments:True,garbage_collection_threshold:0.5,per_process_memory_fraction:0.75",
    "expandable_segments:True,max_split_size_mb:40",
    "policy:stitch",
    "pytorch_version:2.6",
    "pytorch_version:2.6,expandable_segments:True",
    "pytorch_version:2.6,max_split_size_mb:40,garbage_collection_threshold:0.5,memory_fraction:0.75",
    "graph_capture_record_stream_reuse:True",
    "graph_capture_record_stream_reuse:True,expandable_segments:True",
    "policy:stitch,per_process_memory_fraction:0.5",
};
#define N_CONFS (sizeof create_confs / sizeof create_confs[0])

typedef struct conf_case {
    const char *conf;
    int valid;      /* 1: must be accepted (see split_mb); 0: must be refused */
    unsigned split_mb; /* max_split_size_mb named in it (0: none): valid only when
                        * >= the large segment size in effect, which persists
                        * across parses unless the string names it */
    unsigned large_mb; /* large_segment_size_mb named in it (0: none) */
} conf_case;

static const conf_case apply_confs[] = {
    {"", 1, 0, 0},
    {"max_split_size_mb:20", 1, 20, 0},
    {"max_split_size_mb:40", 1, 40, 0},
    {"max_split_size_mb:200", 1, 200, 0},
    {"roundup_power2_divisions:4", 1, 0, 0},
    {"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", 1, 0, 0},
    {"garbage_collection_threshold:0.5", 1, 0, 0},
    {"garbage_collection_threshold:0.9,max_split_size_mb:30", 1, 30, 0},
    {"max_non_split_rounding_mb:64,max_split_size_mb:20", 1, 20, 0},
    {"large_segment_size_mb:12", 1, 0, 12},
    {"large_segment_size_mb:20", 1, 0, 20},
    {"large_segment_size_mb:40,max_split_size_mb:40", 1, 40, 40},
    {"release_lock_on_cudamalloc:True,pinned_num_register_threads:4", 1, 0, 0},
    {"max_split_size_mb:1", 0, 0, 0},
    {"garbage_collection_threshold:1.5", 0, 0, 0},
    {"garbage_collection_threshold:0", 0, 0, 0},
    {"roundup_power2_divisions:3", 0, 0, 0},
    {"roundup_power2_divisions:[256:1,", 0, 0, 0},
    {"expandable_segments:True", 1, 0, 0},
    {"expandable_segments:False", 1, 0, 0},
    {"policy:stitch", 1, 0, 0},
    {"policy:native", 1, 0, 0},
    {"policy:gmlake", 0, 0, 0},
    {"backend:cudaMallocAsync", 0, 0, 0},
    {"max_split_size_mb:", 0, 0, 0},
    {"bogus_option:1", 0, 0, 0},
    {"max_split_size_mb:20,,", 0, 0, 0},
    {"large_segment_size_mb:10", 0, 0, 0},
    {"per_process_memory_fraction:2", 0, 0, 0},
    {":", 0, 0, 0},
    {"[", 0, 0, 0},
};
#define N_APPLY (sizeof apply_confs / sizeof apply_confs[0])

static const double good_fractions[] = {0.0, 0.05, 0.25, 0.5, 0.75, 0.9, 1.0};
#define N_GOOD_FRACTIONS (sizeof good_fractions / sizeof good_fractions[0])

static const sublet_stream streams[3] = {0, 1, UINT64_C(0x7f00deadbe00)};

/* ---- state -------------------------------------------------------------------- */

typedef struct live_block {
    uint64_t addr, n, bsize;
    uint32_t tag;
    sublet_pool_id pool; /* where it was placed ((0, 0): the default pools) */
} live_block;

#define MAX_POOLS 6
#define MAX_REDIRECTS 8
#define MAX_CUSTOM 64
#define CUSTOM_CAP (96 * MiB)

/* A pool id the harness knows (made by handle or create). */
typedef struct pool_slot {
    sublet_pool_id id;
    int use_on_oom; /* created with it */
} pool_slot;

/* An active redirection as the harness expects it. */
typedef struct redirect_model {
    sublet_pool_id id;
    int filter;
    sublet_stream stream;
    int mine; /* thread filter begun by this thread */
} redirect_model;

/* The pools' own allocator: real memory (patterns are written on host) up
 * to CUSTOM_CAP, every segment remembered. */
typedef struct custom_seg {
    void *mem;
    uint64_t size;
} custom_seg;

typedef struct fuzz_state {
    sublet_backend *be;
    sublet_allocator *a;
    int is_sim;
    live_block live[MAX_LIVE];
    size_t nlive;
    uint64_t freed[FREED_RING];
    size_t nfreed;
    uint32_t next_tag;
    /* From the trace callback. */
    int64_t seg_bytes;
    uint64_t ev_alloc, ev_free_requested;
    uint64_t mallocs_ok, frees_ok;
    /* private pools */
    pool_slot pools[MAX_POOLS];
    size_t npools;
    redirect_model redirects[MAX_REDIRECTS];
    size_t nredirects;
    custom_seg custom[MAX_CUSTOM];
    size_t ncustom;
    uint64_t custom_bytes;
} fuzz_state;

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    fuzz_state *fs = user;
    (void)addr;
    (void)stream;
    switch (act) {
    case SUBLET_ACT_SEGMENT_ALLOC:
    case SUBLET_ACT_SEGMENT_MAP:
        fs->seg_bytes += (int64_t)size;
        break;
    case SUBLET_ACT_SEGMENT_FREE:
    case SUBLET_ACT_SEGMENT_UNMAP:
        fs->seg_bytes -= (int64_t)size;
        break;
    case SUBLET_ACT_ALLOC:
        fs->ev_alloc++;
        break;
    case SUBLET_ACT_FREE_REQUESTED:
        fs->ev_free_requested++;
        break;
    default:
        break;
    }
}

static int id_eq(sublet_pool_id x, sublet_pool_id y)
{
    return x.first == y.first && x.second == y.second;
}

/* ---- host patterns --------------------------------------------------------------- */

static uint64_t pat(uint32_t tag, uint64_t off)
{
    return ((uint64_t)tag << 32) ^ (off * UINT64_C(0x9E3779B97F4A7C15));
}

#define GRID 65536u

/* Write (verify == 0) or check the block's pattern: every byte of a small
 * block; for a larger one, 8-byte words at its start, its end and every
 * 64 KiB-aligned address inside, so two overlapping blocks of more than 64 KiB
 * share a word. */
static void pattern(const live_block *l, int verify)
{
    unsigned char *p = (unsigned char *)(uintptr_t)l->addr;
    if (l->n <= 1024) {
        for (uint64_t i = 0; i < l->n; i++) {
            unsigned char want = (unsigned char)pat(l->tag, i);
            if (!verify)
                p[i] = want;
            else if (p[i] != want)
                fuzz_fail("host block 0x%llx (tag %u, %llu B): byte %llu overwritten",
                          (unsigned long long)l->addr, l->tag, (unsigned long long)l->n,
                          (unsigned long long)i);
        }
        return;
    }
    /* Word offsets: 0, then the grid points that overlap neither end word,
     * then n - 8. */
    uint64_t last = l->n - 8;
    uint64_t off = (GRID - l->addr % GRID) % GRID;
    if (off < 8)
        off += GRID;
    for (int phase = 0; phase < 3;) {
        uint64_t at;
        if (phase == 0) {
            at = 0;
            phase = 1;
        } else if (phase == 1) {
            if (off + 8 > last) {
                phase = 2;
                continue;
            }
            at = off;
            off += GRID;
        } else {
            at = last;
            phase = 3;
        }
        uint64_t want = pat(l->tag, at), got;
        if (!verify) {
            memcpy(p + at, &want, 8);
        } else {
            memcpy(&got, p + at, 8);
            if (got != want)
                fuzz_fail("host block 0x%llx (tag %u, %llu B): word at +%llu overwritten",
                          (unsigned long long)l->addr, l->tag, (unsigned long long)l->n,
                          (unsigned long long)at);
        }
    }
}

/* ---- model checks -------------------------------------------------------------------- */

static void check_pools(fuzz_state *fs, const sublet_stats *all, const char *after);

static void check_all(fuzz_state *fs, const char *after)
{
    char msg[512];
    msg[0] = '\0';
    sublet_status st = sublet_check(fs->a, msg, sizeof msg);
    if (st != SUBLET_OK)
        fuzz_fail("sublet_check after %s: %s: %s", after, sublet_status_name(st), msg);

    sublet_stats s;
    sublet_stats_read(fs->a, &s);
    uint64_t bytes = 0;
    for (size_t i = 0; i < fs->nlive; i++)
        bytes += fs->live[i].bsize;
    if (s.allocation[SUBLET_POOL_ALL].current != (int64_t)fs->nlive)
        fuzz_fail("after %s: allocation.all.current %lld, model has %zu live blocks", after,
                  (long long)s.allocation[SUBLET_POOL_ALL].current, fs->nlive);
    if (s.allocated_bytes[SUBLET_POOL_ALL].current != (int64_t)bytes)
        fuzz_fail("after %s: allocated_bytes.all.current %lld, model has %llu", after,
                  (long long)s.allocated_bytes[SUBLET_POOL_ALL].current,
                  (unsigned long long)bytes);
#define X_CHECK_ARR(key, title, isb)                                                       \
    do {                                                                                   \
        const sublet_stat *v = s.key;                                                      \
        if (v[0].current != v[1].current + v[2].current)                                   \
            fuzz_fail("after %s: %s all %lld != small %lld + large %lld", after, #key,     \
                      (long long)v[0].current, (long long)v[1].current,                   \
                      (long long)v[2].current);                                            \
        for (int k = 0; k < SUBLET_POOL_KINDS; k++)                                        \
            if (v[k].current < 0 || v[k].peak < v[k].current)                              \
                fuzz_fail("after %s: %s[%d] current %lld peak %lld", after, #key, k,       \
                          (long long)v[k].current, (long long)v[k].peak);                  \
    } while (0);
    SUBLET_STAT_ARRAYS(X_CHECK_ARR)
#undef X_CHECK_ARR
    if (s.reserved_bytes[0].current < s.active_bytes[0].current ||
        s.active_bytes[0].current < s.allocated_bytes[0].current)
        fuzz_fail("after %s: reserved %lld < active %lld or active < allocated %lld", after,
                  (long long)s.reserved_bytes[0].current, (long long)s.active_bytes[0].current,
                  (long long)s.allocated_bytes[0].current);
    if (fs->seg_bytes != s.reserved_bytes[SUBLET_POOL_ALL].current)
        fuzz_fail("after %s: segment events sum to %lld bytes, reserved_bytes is %lld", after,
                  (long long)fs->seg_bytes, (long long)s.reserved_bytes[0].current);
    if (fs->ev_alloc != fs->mallocs_ok || fs->ev_free_requested != fs->frees_ok)
        fuzz_fail("after %s: %llu alloc / %llu free_requested events for %llu mallocs / %llu "
                  "frees",
                  after, (unsigned long long)fs->ev_alloc,
                  (unsigned long long)fs->ev_free_requested,
                  (unsigned long long)fs->mallocs_ok, (unsigned long long)fs->frees_ok);
    if (fs->is_sim) {
        uint64_t used = sublet_sim_used(fs->be) + fs->custom_bytes;
        uint64_t segs = sublet_sim_segments(fs->be) + fs->ncustom;
        if ((int64_t)used != s.reserved_bytes[0].current || (int64_t)segs != s.segment[0].current)
            fuzz_fail("after %s: sim and the pools' allocator hold %llu B in %llu segments, "
                      "stats say %lld B in %lld",
                      after, (unsigned long long)used, (unsigned long long)segs,
                      (long long)s.reserved_bytes[0].current, (long long)s.segment[0].current);
    }
    check_pools(fs, &s, after);
}

static void expect_stats_unchanged(fuzz_state *fs, const sublet_stats *before, const char *what)
{
    sublet_stats now;
    sublet_stats_read(fs->a, &now);
    if (memcmp(before, &now, sizeof now) != 0)
        fuzz_fail("%s changed the statistics", what);
}

static int settings_equal(const sublet_settings *x, const sublet_settings *y)
{
    return x->max_split_size == y->max_split_size &&
           x->max_non_split_rounding == y->max_non_split_rounding &&
           memcmp(x->roundup_power2_divisions, y->roundup_power2_divisions,
                  sizeof x->roundup_power2_divisions) == 0 &&
           x->garbage_collection_threshold == y->garbage_collection_threshold &&
           x->expandable_segments == y->expandable_segments &&
           x->release_lock_on_cudamalloc == y->release_lock_on_cudamalloc &&
           x->pinned_use_cuda_host_register == y->pinned_use_cuda_host_register &&
           x->pinned_num_register_threads == y->pinned_num_register_threads &&
           x->pinned_use_background_threads == y->pinned_use_background_threads &&
           x->pinned_reserve_segment_size_mb == y->pinned_reserve_segment_size_mb &&
           x->graph_capture_record_stream_reuse == y->graph_capture_record_stream_reuse &&
           x->per_process_memory_fraction == y->per_process_memory_fraction &&
           x->large_segment_size == y->large_segment_size &&
           x->throw_on_cudamalloc_oom == y->throw_on_cudamalloc_oom &&
           x->pinned_free_catch_all == y->pinned_free_catch_all &&
           x->backend_async == y->backend_async && x->policy == y->policy &&
           strncmp(x->raw, y->raw, sizeof x->raw) == 0;
}

/* ---- where an address falls ------------------------------------------------------------ */

static long live_find_start(const fuzz_state *fs, uint64_t addr)
{
    for (size_t i = 0; i < fs->nlive; i++)
        if (fs->live[i].addr == addr)
            return (long)i;
    return -1;
}

static long live_find_containing(const fuzz_state *fs, uint64_t addr)
{
    for (size_t i = 0; i < fs->nlive; i++)
        if (addr >= fs->live[i].addr && addr - fs->live[i].addr < fs->live[i].bsize)
            return (long)i;
    return -1;
}

typedef struct seg_probe {
    uint64_t addr;
    int inside;
} seg_probe;

static void seg_probe_fn(void *user, const sublet_segment_view *seg)
{
    seg_probe *p = user;
    if (p->addr >= seg->addr && p->addr - seg->addr < seg->total_size)
        p->inside = 1;
}

static int in_some_segment(fuzz_state *fs, uint64_t addr)
{
    seg_probe p = {addr, 0};
    sublet_segments_walk(fs->a, seg_probe_fn, &p);
    return p.inside;
}

/* ---- operations ------------------------------------------------------------------------ */

static uint64_t pick_size(reader *r)
{
    static const uint64_t special[] = {
        0,
        (uint64_t)1 << 60,
        ((uint64_t)1 << 60) - 1,
        UINT64_MAX,
        (uint64_t)1 << 63,
        512,
        513,
        MiB,
        MiB + 1,
        2 * MiB,
        10 * MiB - 1,
        10 * MiB,
        20 * MiB,
        20 * MiB + 1,
        40 * MiB,
        64 * MiB,
        200 * MiB,
        256 * MiB,
        256 * MiB + 1,
        (uint64_t)1 << 40,
    };
    uint8_t cat = rd8(r) % 32;
    if (cat < 11)
        return 1 + rdn(r, 2) % 512;
    if (cat < 20)
        return 1 + rdn(r, 3) % MiB;
    if (cat < 25)
        return MiB + rdn(r, 3) % (9 * MiB);
    if (cat < 29)
        return 10 * MiB + rdn(r, 4) % (90 * MiB);
    return special[rd8(r) % (sizeof special / sizeof special[0])];
}

static void forget_live(fuzz_state *fs, size_t i)
{
    if (fs->nfreed < FREED_RING)
        fs->freed[fs->nfreed++] = fs->live[i].addr;
    else
        fs->freed[fs->live[i].tag % FREED_RING] = fs->live[i].addr;
    fs->live[i] = fs->live[--fs->nlive];
}

static void op_free_live(fuzz_state *fs, size_t i)
{
    live_block l = fs->live[i];
    if (!fs->is_sim)
        pattern(&l, 1);
    sublet_pool_id now = {UINT64_MAX, UINT64_MAX};
    if (sublet_pool_of(fs->a, (void *)(uintptr_t)l.addr, &now) != SUBLET_OK ||
        !id_eq(now, l.pool))
        fuzz_fail("block 0x%llx placed in pool (%llu,%llu) is now in (%llu,%llu)",
                  (unsigned long long)l.addr, (unsigned long long)l.pool.first,
                  (unsigned long long)l.pool.second, (unsigned long long)now.first,
                  (unsigned long long)now.second);
    sublet_status st = sublet_free(fs->a, (void *)(uintptr_t)l.addr);
    if (st != SUBLET_OK)
        fuzz_fail("free of live block 0x%llx: %s", (unsigned long long)l.addr,
                  sublet_status_name(st));
    fs->frees_ok++;
    forget_live(fs, i);
}

static int newest_first(fuzz_state *fs)
{
    sublet_settings set;
    sublet_settings_get(fs->a, &set);
    return sublet_settings_since(&set, SUBLET_PYTORCH_VERSION(2, 9));
}

/* The pool a request on `stream` from this thread goes to, as the
 * redirections say; *found = 0 when none accepts it. */
static sublet_pool_id expected_pool(fuzz_state *fs, sublet_stream stream, int *found)
{
    int nf = newest_first(fs);
    for (size_t k = 0; k < fs->nredirects; k++) {
        const redirect_model *m = &fs->redirects[nf ? fs->nredirects - 1 - k : k];
        if (m->filter == SUBLET_POOL_FILTER_STREAM ? m->stream == stream : m->mine) {
            *found = 1;
            return m->id;
        }
    }
    *found = 0;
    return (sublet_pool_id){0, 0};
}

static void op_malloc(fuzz_state *fs, reader *r)
{
    uint64_t n = pick_size(r);
    sublet_stream stream = streams[rd8(r) % 3];
    if (fs->nlive == MAX_LIVE)
        op_free_live(fs, 0);
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    void *p = (void *)1;
    sublet_status st = sublet_malloc(fs->a, n, stream, &p);
    if (n == 0) {
        if (st != SUBLET_OK || p != NULL)
            fuzz_fail("malloc(0): %s, %p", sublet_status_name(st), p);
        expect_stats_unchanged(fs, &before, "malloc(0)");
        return;
    }
    if (n >= ((uint64_t)1 << 60)) {
        if (st != SUBLET_ERR_OOM || p != NULL)
            fuzz_fail("malloc(%llu): %s, %p", (unsigned long long)n, sublet_status_name(st), p);
        return;
    }
    if (st == SUBLET_ERR_OOM) {
        char m[8];
        if (p != NULL)
            fuzz_fail("OOM malloc left %p", p);
        if (sublet_oom_message(fs->a, m, sizeof m) == 0)
            fuzz_fail("OOM malloc(%llu) without a message", (unsigned long long)n);
        return;
    }
    if (st != SUBLET_OK || p == NULL)
        fuzz_fail("malloc(%llu): %s, %p", (unsigned long long)n, sublet_status_name(st), p);
    fs->mallocs_ok++;
    uint64_t addr = (uint64_t)(uintptr_t)p, base = 0, bsize = 0, req = 0;
    st = sublet_block_info(fs->a, p, &base, &bsize, &req);
    if (st != SUBLET_OK || base != addr || bsize < n || bsize % 512 != 0 || req != n)
        fuzz_fail("block_info(%p) after malloc(%llu): %s base 0x%llx size %llu requested %llu",
                  p, (unsigned long long)n, sublet_status_name(st), (unsigned long long)base,
                  (unsigned long long)bsize, (unsigned long long)req);
    sublet_settings set;
    sublet_settings_get(fs->a, &set);
    if (bsize < sublet_round_size(&set, n))
        fuzz_fail("malloc(%llu) gave a %llu B block, less than round_size %llu",
                  (unsigned long long)n, (unsigned long long)bsize,
                  (unsigned long long)sublet_round_size(&set, n));
    for (size_t i = 0; i < fs->nlive; i++) {
        const live_block *o = &fs->live[i];
        if (addr < o->addr + o->bsize && o->addr < addr + bsize)
            fuzz_fail("new block [0x%llx,+%llu) overlaps live block [0x%llx,+%llu)",
                      (unsigned long long)addr, (unsigned long long)bsize,
                      (unsigned long long)o->addr, (unsigned long long)o->bsize);
    }
    int redirected = 0;
    sublet_pool_id want = expected_pool(fs, stream, &redirected), got = {UINT64_MAX, 0};
    if (sublet_pool_of(fs->a, p, &got) != SUBLET_OK)
        fuzz_fail("pool_of(%p) after malloc failed", p);
    if (!id_eq(got, want)) {
        int ok = 0; /* a default-pool request may take a use_on_oom pool's block (2.9+) */
        for (size_t k = 0; !redirected && k < fs->npools; k++)
            ok |= fs->pools[k].use_on_oom && id_eq(fs->pools[k].id, got) && newest_first(fs);
        if (!ok)
            fuzz_fail("malloc(%llu) on stream %llu placed in pool (%llu,%llu), expected "
                      "(%llu,%llu)",
                      (unsigned long long)n, (unsigned long long)stream,
                      (unsigned long long)got.first, (unsigned long long)got.second,
                      (unsigned long long)want.first, (unsigned long long)want.second);
    }
    live_block *l = &fs->live[fs->nlive++];
    l->pool = got;
    l->addr = addr;
    l->n = n;
    l->bsize = bsize;
    l->tag = ++fs->next_tag;
    if (!fs->is_sim)
        pattern(l, 0);
}

/* Free (or record_stream on) an address that is not a live block's start. */
static void op_bogus(fuzz_state *fs, reader *r, int record)
{
    uint8_t kind = rd8(r) % 6;
    uint64_t addr = 0;
    switch (kind) {
    case 0: /* a pointer freed earlier */
        if (fs->nfreed == 0)
            return;
        addr = fs->freed[rd8(r) % fs->nfreed];
        break;
    case 1: /* interior of a live block */
    case 2: /* one past a live block's end */
        if (fs->nlive == 0)
            return;
        {
            const live_block *l = &fs->live[rd8(r) % fs->nlive];
            addr = kind == 1 ? l->addr + 1 + rdn(r, 4) % (l->bsize - 1) : l->addr + l->bsize;
        }
        break;
    case 3: /* just before a live block */
        if (fs->nlive == 0)
            return;
        addr = fs->live[rd8(r) % fs->nlive].addr - 1 - rd8(r);
        break;
    case 4: /* NULL */
        addr = 0;
        break;
    default: { /* arbitrary values */
        static const uint64_t odd[] = {8, 0x1000, UINT64_C(0x7f0000000000), UINT64_MAX - 511,
                                       ((uint64_t)1 << 47) - 512};
        addr = odd[rd8(r) % (sizeof odd / sizeof odd[0])];
        break;
    }
    }
    if (addr != 0 && live_find_start(fs, addr) >= 0)
        return; /* that is a live block after all: not a bogus call */

    sublet_status want;
    long in_live = addr ? live_find_containing(fs, addr) : -1;
    if (addr == 0)
        want = SUBLET_OK;
    else if (in_live >= 0)
        want = record ? SUBLET_OK : SUBLET_ERR_INTERIOR_POINTER;
    else if (in_some_segment(fs, addr))
        want = SUBLET_ERR_DOUBLE_FREE;
    else
        want = SUBLET_ERR_INVALID_POINTER;

    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    sublet_stream stream = streams[rd8(r) % 3];
    void *p = (void *)(uintptr_t)addr;
    sublet_status st = record ? sublet_record_stream(fs->a, p, stream) : sublet_free(fs->a, p);
    int ok;
    if (record && want != SUBLET_OK)
        ok = st == SUBLET_ERR_INVALID_POINTER || st == SUBLET_ERR_DOUBLE_FREE;
    else
        ok = st == want;
    if (!ok)
        fuzz_fail("%s(0x%llx) (kind %u): %s, expected %s", record ? "record_stream" : "free",
                  (unsigned long long)addr, kind, sublet_status_name(st),
                  sublet_status_name(want));
    expect_stats_unchanged(fs, &before, record ? "record_stream of a bogus pointer"
                                               : "free of a bogus pointer");
    if (!fs->is_sim && in_live >= 0)
        pattern(&fs->live[in_live], 1);
}

static void op_record(fuzz_state *fs, reader *r)
{
    if (fs->nlive == 0)
        return;
    const live_block *l = &fs->live[rd8(r) % fs->nlive];
    sublet_stream stream = streams[rd8(r) % 3];
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    sublet_status st = sublet_record_stream(fs->a, (void *)(uintptr_t)l->addr, stream);
    if (st != SUBLET_OK)
        fuzz_fail("record_stream(0x%llx): %s", (unsigned long long)l->addr,
                  sublet_status_name(st));
    expect_stats_unchanged(fs, &before, "record_stream");
}

static void op_fraction(fuzz_state *fs, reader *r)
{
    uint8_t k = rd8(r);
    double f;
    int valid = 1;
    if (k % 4 != 3) {
        f = good_fractions[(k / 4) % N_GOOD_FRACTIONS];
    } else {
        static const double bad[] = {-0.5, 1.0000001, 2.0, -1e-300, 1e300};
        switch ((k / 4) % 7) {
        case 5:
            f = NAN;
            break;
        case 6:
            f = INFINITY;
            break;
        default:
            f = bad[(k / 4) % 7];
            break;
        }
        valid = 0;
    }
    double old = sublet_memory_fraction_get(fs->a);
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    sublet_status st = sublet_memory_fraction_set(fs->a, f);
    if (valid) {
        if (st != SUBLET_OK || sublet_memory_fraction_get(fs->a) != f)
            fuzz_fail("memory_fraction_set(%g): %s, now %g", f, sublet_status_name(st),
                      sublet_memory_fraction_get(fs->a));
    } else {
        double now = sublet_memory_fraction_get(fs->a);
        if (st != SUBLET_ERR_INVALID_ARGUMENT || now != old)
            fuzz_fail("memory_fraction_set(%g): %s, fraction %g -> %g", f,
                      sublet_status_name(st), old, now);
    }
    expect_stats_unchanged(fs, &before, "memory_fraction_set");
}

static void apply_conf(fuzz_state *fs, const char *conf, int want_valid)
{
    sublet_settings old, now;
    sublet_settings_get(fs->a, &old);
    sublet_stats before;
    sublet_stats_read(fs->a, &before);
    char err[256];
    sublet_status st = sublet_settings_apply(fs->a, conf, err, sizeof err);
    sublet_settings_get(fs->a, &now);
    if (want_valid == 1 && st != SUBLET_OK)
        fuzz_fail("settings_apply(\"%s\") refused: %s: %s", conf, sublet_status_name(st), err);
    if (want_valid == 0 && st == SUBLET_OK)
        fuzz_fail("settings_apply(\"%s\") accepted", conf);
    if (st != SUBLET_OK) {
        if (st != SUBLET_ERR_CONFIG && st != SUBLET_ERR_UNSUPPORTED &&
            st != SUBLET_ERR_NO_MEMORY)
            fuzz_fail("settings_apply(\"%s\"): unexpected %s", conf, sublet_status_name(st));
        if (!settings_equal(&old, &now))
            fuzz_fail("refused settings_apply(\"%s\") changed the settings", conf);
        if (err[0] == '\0')
            fuzz_fail("refused settings_apply(\"%s\") without a message", conf);
    } else {
        size_t len = strlen(conf);
        size_t keep = len < SUBLET_CONF_RAW_MAX - 1 ? len : SUBLET_CONF_RAW_MAX - 1;
        if (strlen(now.raw) != keep || memcmp(now.raw, conf, keep) != 0)
            fuzz_fail("settings_apply(\"%s\") left raw \"%s\"", conf, now.raw);
    }
    expect_stats_unchanged(fs, &before, "settings_apply");
}

static void op_settings(fuzz_state *fs, reader *r)
{
    uint8_t k = rd8(r);
    if (k < 224) {
        const conf_case *c = &apply_confs[k % N_APPLY];
        int valid = c->valid;
        sublet_settings cur;
        sublet_settings_get(fs->a, &cur);
        if (valid && cur.pytorch_version != SUBLET_PYTORCH_NEWEST)
            valid = -1; /* the table follows the newest rules (docs/versions.md) */
        if (valid == 1 && c->split_mb) {
            uint64_t large = c->large_mb ? (uint64_t)c->large_mb * MiB : cur.large_segment_size;
            valid = (uint64_t)c->split_mb * MiB >= large;
        }
        apply_conf(fs, c->conf, valid);
        return;
    }
    /* Raw bytes from the input as the string. */
    char buf[64];
    size_t len = rd8(r) % sizeof buf;
    size_t i = 0;
    for (; i < len && r->n; i++)
        buf[i] = (char)rd8(r);
    buf[i] = '\0';
    apply_conf(fs, buf, -1);
}

static void check_reset(fuzz_state *fs, int accumulated)
{
    sublet_stats s;
    sublet_stats_read(fs->a, &s);
#define X_RESET(key, title, isb)                                                             \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++)                                             \
        if (accumulated ? (s.key[k].allocated != 0 || s.key[k].freed != 0)                  \
                        : s.key[k].peak != s.key[k].current)                                \
            fuzz_fail("%s[%d] not reset", #key, k);
    SUBLET_STAT_ARRAYS(X_RESET)
#undef X_RESET
}

static void op_report(fuzz_state *fs, reader *r)
{
    static char buf[1 << 16];
    uint8_t k = rd8(r) % 4;
    size_t cap = (k & 1) ? sizeof buf : 1u + rd8(r);
    size_t len;
    if (k < 2) {
        len = sublet_summary(fs->a, rd8(r) & 1, buf, cap);
    } else {
        sublet_stats s;
        sublet_stats_read(fs->a, &s);
        len = k == 2 ? sublet_stats_format_flat(&s, buf, cap) : sublet_stats_format_json(&s, buf, cap);
    }
    if (memchr(buf, '\0', cap) == NULL)
        fuzz_fail("report %u not NUL-terminated within %zu", k, cap);
    if (len < cap && strlen(buf) != len)
        fuzz_fail("report %u: returned %zu, wrote %zu", k, len, strlen(buf));
    len = sublet_oom_message(fs->a, buf, sizeof buf);
    if (len >= sizeof buf || strlen(buf) != len)
        fuzz_fail("oom message length %zu", len);
}

#include "ops_pools.h"

static const char *op_name(unsigned op)
{
    static const char *const names[] = {
        "malloc", "malloc", "malloc", "malloc", "free", "free", "free", "bogus free",
        "record_stream", "bogus record_stream", "stream complete", "process_events",
        "empty_cache", "memory fraction", "settings", "stats reset", "sim capacity", "report",
        "pool handle", "pool create", "pool incref", "pool begin", "pool begin", "pool end",
        "pool release", "pool empty_cache", "pool bogus", "stream wait"};
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

#define N_OPS 28

static void run_op(fuzz_state *fs, unsigned op, reader *r)
{
    sublet_status st;
    switch (op) {
    case 0:
    case 1:
    case 2:
    case 3:
        op_malloc(fs, r);
        break;
    case 4:
    case 5:
    case 6:
        if (fs->nlive)
            op_free_live(fs, rd8(r) % fs->nlive);
        break;
    case 7:
        op_bogus(fs, r, 0);
        break;
    case 8:
        op_record(fs, r);
        break;
    case 9:
        op_bogus(fs, r, 1);
        break;
    case 10: {
        uint8_t k = rd8(r);
        if (fs->is_sim) {
            if (k % 4 == 3)
                sublet_sim_complete_all(fs->be);
            else
                sublet_sim_stream_complete(fs->be, streams[k % 4]);
        }
        break;
    }
    case 11:
        if ((st = sublet_process_events(fs->a)) != SUBLET_OK)
            fuzz_fail("process_events: %s", sublet_status_name(st));
        break;
    case 12:
        if ((st = sublet_empty_cache(fs->a)) != SUBLET_OK)
            fuzz_fail("empty_cache: %s", sublet_status_name(st));
        break;
    case 13:
        op_fraction(fs, r);
        break;
    case 14:
        op_settings(fs, r);
        break;
    case 15: {
        int acc = rd8(r) & 1;
        if (acc)
            sublet_stats_reset_accumulated(fs->a);
        else
            sublet_stats_reset_peak(fs->a);
        check_reset(fs, acc);
        break;
    }
    case 16:
        if (fs->is_sim) {
            static const uint64_t caps[] = {64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, 30 * MiB};
            sublet_sim_set_capacity(fs->be, caps[rd8(r) % (sizeof caps / sizeof caps[0])]);
        }
        break;
    case 17:
        op_report(fs, r);
        break;
    case 18:
        op_pool_handle(fs, r);
        break;
    case 19:
        op_pool_create(fs, r);
        break;
    case 20:
        op_pool_incref(fs, r);
        break;
    case 21:
    case 22:
        op_pool_begin(fs, r);
        break;
    case 23:
        op_pool_end(fs, r);
        break;
    case 24:
        op_pool_release(fs, r);
        break;
    case 25:
        op_pool_empty_cache(fs, r);
        break;
    case 26:
        op_pool_bogus(fs, r);
        break;
    default: {
        uint8_t k = rd8(r);
        sublet_stats before;
        sublet_stats_read(fs->a, &before);
        if ((st = sublet_pool_stream_wait(fs->a, streams[k % 3], streams[(k / 3) % 3])) !=
            SUBLET_OK)
            fuzz_fail("pool_stream_wait: %s", sublet_status_name(st));
        expect_stats_unchanged(fs, &before, "pool_stream_wait");
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    reader r = {data + 1, size - 1};
    static fuzz_state fs_storage;
    fuzz_state *fs = &fs_storage;
    memset(fs, 0, sizeof *fs);
    fs->is_sim = (data[0] & 1) == 0;
    const char *conf = create_confs[(data[0] >> 1) % N_CONFS];

    sublet_status st = fs->is_sim ? sublet_sim_create(SIM_CAPACITY, &fs->be)
                                  : sublet_host_create(HOST_CAPACITY, &fs->be);
    if (st != SUBLET_OK)
        fuzz_fail("backend create: %s", sublet_status_name(st));
    sublet_options opts = {.backend = fs->be, .device = 0, .conf = conf};
    char err[256];
    st = sublet_allocator_create(&opts, &fs->a, err, sizeof err);
    if (st != SUBLET_OK)
        fuzz_fail("allocator_create(\"%s\"): %s: %s", conf, sublet_status_name(st), err);
    sublet_trace_set(fs->a, on_trace, fs);
    check_all(fs, "create");

    while (r.n > 0) {
        unsigned op = rd8(&r) % N_OPS;
        run_op(fs, op, &r);
        check_all(fs, op_name(op));
    }

    /* Tear down: every redirection ends, every pool is released (a graph
     * reset, a MemPool's destruction), and everything must go back to the
     * backend and to the pools' allocator. */
    while (fs->nredirects) {
        sublet_pool_id id = fs->redirects[0].id;
        if ((st = sublet_pool_end_allocate(fs->a, id)) != SUBLET_OK)
            fuzz_fail("final pool_end_allocate: %s", sublet_status_name(st));
        memmove(fs->redirects, fs->redirects + 1, (fs->nredirects - 1) * sizeof *fs->redirects);
        fs->nredirects--;
    }
    check_all(fs, "final pool_end_allocate");
    for (size_t k = 0; k < fs->npools; k++) {
        while (pool_info(fs, fs->pools[k].id).use_count > 0)
            if ((st = sublet_pool_release(fs->a, fs->pools[k].id)) != SUBLET_OK)
                fuzz_fail("final pool_release: %s", sublet_status_name(st));
    }
    check_all(fs, "final pool_release");
    while (fs->nlive)
        op_free_live(fs, fs->nlive - 1);
    check_all(fs, "free all");
    if ((st = sublet_empty_cache(fs->a)) != SUBLET_OK)
        fuzz_fail("final empty_cache: %s", sublet_status_name(st));
    if (fs->is_sim)
        sublet_sim_complete_all(fs->be);
    if ((st = sublet_empty_cache(fs->a)) != SUBLET_OK)
        fuzz_fail("final empty_cache: %s", sublet_status_name(st));
    check_all(fs, "final empty_cache");
    for (size_t k = 0; k < fs->npools; k++)
        if (pool_info(fs, fs->pools[k].id).exists)
            fuzz_fail("pool (%llu,%llu) still known after its release and empty_cache",
                      (unsigned long long)fs->pools[k].id.first,
                      (unsigned long long)fs->pools[k].id.second);
    if (fs->ncustom)
        fuzz_fail("the pools' allocator still holds %llu B in %zu segments",
                  (unsigned long long)fs->custom_bytes, fs->ncustom);
    sublet_stats s;
    sublet_stats_read(fs->a, &s);
    if (s.reserved_bytes[SUBLET_POOL_ALL].current != 0 || s.active_bytes[0].current != 0 ||
        s.segment[0].current != 0)
        fuzz_fail("after freeing everything and empty_cache: reserved %lld, active %lld, %lld "
                  "segments",
                  (long long)s.reserved_bytes[0].current, (long long)s.active_bytes[0].current,
                  (long long)s.segment[0].current);
    if (fs->is_sim && (sublet_sim_used(fs->be) != 0 || sublet_sim_segments(fs->be) != 0))
        fuzz_fail("sim still holds %llu B in %llu segments",
                  (unsigned long long)sublet_sim_used(fs->be),
                  (unsigned long long)sublet_sim_segments(fs->be));
    sublet_allocator_destroy(fs->a);
    sublet_backend_destroy(fs->be);
    return 0;
}
