/* sublet — fragmentation: the metrics against hand-computed values, the live
 * counters (sublet_frag_read) against the walk-based computation at every
 * event of the committed trace (and at chosen events of every shared trace),
 * sublet_max_allocatable checked by allocating, the series after every event,
 * the texts, and the OOM diagnosis (live and in replay, with the settings the
 * replay shows avoid the OOM).
 *
 * SUBLET_TESTDATA: tests/data.  SUBLET_SHARED: ../shared (optional). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sublet/frag.h"
#include "sublet/replay.h"
#include "support/harness.h"
#include "test_data.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* ---- helpers ----------------------------------------------------------------------------- */

static sublet_frag_state *capture(sublet_allocator *a)
{
    sublet_frag_state *st = NULL;
    assert_int_equal(sublet_frag_capture(a, &st), SUBLET_OK);
    return st;
}

/* Every field of two metric sets (spread up to rounding: the engine sums
 * squares incrementally). */
static void same_stats(const sublet_frag_stats *live, const sublet_frag_stats *off,
                       const char *what)
{
#define EQ(f)                                                                                      \
    if (live->f != off->f)                                                                         \
        fail_msg("%s: " #f " live %llu, from the blocks %llu", what, (unsigned long long)live->f,  \
                 (unsigned long long)off->f);
    EQ(reserved_bytes)
    EQ(allocated_bytes)
    EQ(active_bytes)
    EQ(requested_bytes)
    EQ(inactive_split_bytes)
    EQ(unallocated_bytes)
    EQ(free_bytes)
    EQ(free_blocks)
    EQ(largest_free_block)
    EQ(internal_waste_bytes)
#undef EQ
    if (!NEAR(live->external, off->external) || !NEAR(live->unused, off->unused) ||
        fabs(live->spread - off->spread) > 1e-6)
        fail_msg("%s: ratios live %g/%g/%g, from the blocks %g/%g/%g", what, live->external,
                 live->unused, live->spread, off->external, off->unused, off->spread);
}

/* sublet_frag_read and sublet_frag_compute for every pool and every stream,
 * and max_allocatable, on the allocator's current state. */
static void live_vs_walk(sublet_allocator *a, const char *where)
{
    sublet_frag_state *st = capture(a);
    sublet_stream streams[64];
    size_t ns = sublet_frag_streams(st, streams, 64);
    assert_true(ns <= 64);
    char what[160];
    for (int k = SUBLET_POOL_ALL; k <= SUBLET_POOL_LARGE; k++) {
        for (size_t i = 0; i <= ns; i++) {
            sublet_stream s = i < ns ? streams[i] : SUBLET_STREAM_ALL;
            sublet_frag_stats live, off;
            assert_int_equal(sublet_frag_read(a, k, s, &live), SUBLET_OK);
            assert_int_equal(sublet_frag_compute(st, k, s, &off), SUBLET_OK);
            snprintf(what, sizeof what, "%s, pool %d, stream %llu", where, k,
                     (unsigned long long)s);
            same_stats(&live, &off, what);
        }
    }
    for (size_t i = 0; i < ns; i++)
        if (sublet_max_allocatable(a, streams[i]) != sublet_frag_max_allocatable(st, streams[i]))
            fail_msg("%s: max_allocatable(stream %llu) live %llu, from the blocks %llu", where,
                     (unsigned long long)streams[i],
                     (unsigned long long)sublet_max_allocatable(a, streams[i]),
                     (unsigned long long)sublet_frag_max_allocatable(st, streams[i]));
    sublet_frag_state_free(st);
}

/* Allocating max_allocatable succeeds without a device allocation; 512 more
 * needs one (or fails). */
static void check_max_allocatable(h_env *e, sublet_stream s)
{
    uint64_t m = sublet_max_allocatable(e->a, s);
    if (!m)
        return;
    int64_t before = h_stat(e->a, "num_device_alloc");
    void *p = NULL;
    assert_int_equal(h_try_malloc(e->a, m, s, &p), SUBLET_OK);
    assert_int_equal(h_stat(e->a, "num_device_alloc"), before);
    h_free(e->a, p);
    before = h_stat(e->a, "num_device_alloc");
    sublet_status st = h_try_malloc(e->a, m + 512, s, &p);
    if (st == SUBLET_OK) {
        if (h_stat(e->a, "num_device_alloc") == before)
            fail_msg("a request of max_allocatable + 512 = %llu was served from the cache",
                     (unsigned long long)(m + 512));
        h_free(e->a, p);
    } else {
        assert_int_equal(st, SUBLET_ERR_OOM);
    }
}

static sublet_trace *load(const char *dir, const char *name)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sublet_trace *t = NULL;
    if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("cannot load %s: %s", path, err);
    return t;
}

static void trace_free(sublet_trace *t)
{
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

/* ---- hand-computed states ---------------------------------------------------------------- */

/* One 20 MiB large segment: A 2 | B 2 | C 3 | D 2 | E 4 | 7 free; B and D freed:
 * three free blocks of 2, 2 and 7 MiB. */
static void test_three_free_blocks(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 1 * GiB, "");
    void *a = h_malloc(e.a, 2 * MiB, 0), *b = h_malloc(e.a, 2 * MiB, 0);
    void *c = h_malloc(e.a, 3 * MiB, 0), *d = h_malloc(e.a, 2 * MiB, 0);
    void *x = h_malloc(e.a, 4 * MiB - 100, 0);
    assert_int_equal(h_nsegments(e.a), 1);
    h_free(e.a, b);
    h_free(e.a, d);
    sublet_frag_stats m;
    assert_int_equal(sublet_frag_read(e.a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &m), SUBLET_OK);
    assert_int_equal(m.reserved_bytes, 20 * MiB);
    assert_int_equal(m.allocated_bytes, 9 * MiB);
    assert_int_equal(m.requested_bytes, 9 * MiB - 100);
    assert_int_equal(m.internal_waste_bytes, 100);
    assert_int_equal(m.free_blocks, 3);
    assert_int_equal(m.free_bytes, 11 * MiB);
    assert_int_equal(m.largest_free_block, 7 * MiB);
    assert_int_equal(m.inactive_split_bytes, 11 * MiB);
    assert_true(NEAR(m.external, 1.0 - 7.0 / 11.0));
    assert_true(fabs(m.spread - (1.0 - (4.0 + 4.0 + 49.0) / 121.0)) < 1e-9);
    assert_true(NEAR(m.unused, 1.0 - 9.0 / 20.0));
    live_vs_walk(e.a, "three free blocks");

    sublet_frag_state *st = capture(e.a);
    sublet_frag_histogram h;
    sublet_frag_histogram_of(st, SUBLET_POOL_ALL, &h);
    assert_int_equal(h.count[21], 2); /* [2 MiB, 4 MiB) */
    assert_int_equal(h.bytes[21], 4 * MiB);
    assert_int_equal(h.count[22], 1); /* [4 MiB, 8 MiB) */
    size_t top[4];
    assert_int_equal(sublet_frag_pinning(st, top, 4), 1);
    assert_int_equal(st->segments[top[0]].size - st->segments[top[0]].active_size, 11 * MiB);
    char row[21];
    sublet_frag_map_row(st, 0, 20, row); /* 1 MiB a column */
    assert_string_equal(row, "##..###..####.......");
    sublet_frag_map_row(st, 0, 10, row); /* 2 MiB: a tie shows the allocated bytes */
    assert_string_equal(row, "#.#####...");
    char flat[8192];
    size_t n = sublet_frag_format_flat(st, flat, sizeof flat);
    assert_true(n < sizeof flat);
    assert_non_null(strstr(flat, "fragmentation.all.free_blocks 3\n"));
    assert_non_null(strstr(flat, "fragmentation.large_pool.largest_free_block 7340032\n"));
    assert_non_null(strstr(flat, "fragmentation.stream_0.max_allocatable 7340032\n"));
    sublet_frag_state_free(st);

    assert_int_equal(sublet_max_allocatable(e.a, 0), 7 * MiB);
    check_max_allocatable(&e, 0);
    h_free(e.a, a);
    h_free(e.a, c);
    h_free(e.a, x);
    h_env_fini(&e);
}

/* Small and large pools on two streams, a pending free, max_allocatable in each. */
static void test_pools_streams(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 1 * GiB, "");
    void *s0[6], *s1[3];
    for (int i = 0; i < 6; i++)
        s0[i] = h_malloc(e.a, 100 * KiB + (uint64_t)i * 1000, 0);
    for (int i = 0; i < 3; i++)
        s1[i] = h_malloc(e.a, 5 * MiB, 1);
    h_free(e.a, s0[1]);
    h_free(e.a, s0[3]);
    h_record(e.a, s1[1], 2); /* freed while stream 2 uses it: pending */
    h_free(e.a, s1[1]);
    live_vs_walk(e.a, "pools and streams");
    sublet_frag_stats sm;
    sublet_frag_read(e.a, SUBLET_POOL_SMALL, 0, &sm);
    assert_int_equal(sm.free_blocks, 3); /* two holes and the tail of the 2 MiB segment */
    sublet_frag_state *st = capture(e.a);
    int pending = 0;
    for (size_t i = 0; i < st->nblocks; i++)
        pending += st->blocks[i].state == SUBLET_BLOCK_ACTIVE_PENDING_FREE;
    assert_int_equal(pending, 1);
    sublet_frag_state_free(st);
    assert_true(sublet_max_allocatable(e.a, 0) > 0);
    assert_true(sublet_max_allocatable(e.a, 0) <= 1 * MiB); /* small pool only on stream 0 */
    check_max_allocatable(&e, 0);
    check_max_allocatable(&e, 1);
    assert_int_equal(sublet_max_allocatable(e.a, 9), 0);
    /* nothing free at all */
    h_env f;
    h_env_init(&f, H_SIM, 1 * GiB, "");
    void *whole = h_malloc(f.a, 20 * MiB, 0);
    assert_int_equal(sublet_max_allocatable(f.a, 0), 0);
    h_free(f.a, whole);
    assert_int_equal(sublet_max_allocatable(f.a, 0), 20 * MiB);
    check_max_allocatable(&f, 0);
    h_env_fini(&f);
    sublet_sim_stream_complete(e.inner, 2);
    h_process_events(e.a);
    for (int i = 0; i < 6; i++)
        if (i != 1 && i != 3)
            h_free(e.a, s0[i]);
    h_free(e.a, s1[0]);
    h_free(e.a, s1[2]);
    h_env_fini(&e);
}

/* Random operations under several settings: live against the walk after each. */
static void test_random_states(void **state)
{
    (void)state;
    static const char *const confs[] = {"", "max_split_size_mb:40", "roundup_power2_divisions:4",
                                        "expandable_segments:True", "policy:stitch"};
    for (size_t c = 0; c < sizeof confs / sizeof confs[0]; c++) {
        h_env e;
        h_env_init(&e, H_SIM, 2 * GiB, confs[c]);
        uint64_t rng = 42 + c;
        void *live[64] = {0};
        for (int step = 0; step < (H_UNDER_TSAN ? 100 : 600); step++) {
            int i = (int)h_rand_range(&rng, 0, 64);
            if (live[i]) {
                h_free(e.a, live[i]);
                live[i] = NULL;
            } else {
                uint64_t n = h_rand_range(&rng, 0, 4) == 0 ? h_rand_range(&rng, 1, 1 * MiB)
                                                           : h_rand_range(&rng, 1 * MiB, 60 * MiB);
                if (h_try_malloc(e.a, n, h_rand_range(&rng, 0, 3), &live[i]) != SUBLET_OK)
                    live[i] = NULL;
            }
            if (step % 7 == 0) {
                char where[64];
                snprintf(where, sizeof where, "conf '%s' step %d", confs[c], step);
                live_vs_walk(e.a, where);
            }
            if (step % 97 == 0)
                for (sublet_stream s = 0; s < 3; s++)
                    check_max_allocatable(&e, s);
        }
        for (int i = 0; i < 64; i++)
            if (live[i])
                h_free(e.a, live[i]);
        h_env_fini(&e);
    }
}

/* sublet_summary: flag 1 still abbreviates; flag 2 appends the section. */
static void test_summary_flags(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 1 * GiB, "");
    void *p = h_malloc(e.a, 3 * MiB, 0);
    char full[16384], abbr[16384], frag[65536];
    size_t n0 = sublet_summary(e.a, 0, full, sizeof full);
    size_t n1 = sublet_summary(e.a, SUBLET_SUMMARY_ABBREVIATED, abbr, sizeof abbr);
    size_t n2 = sublet_summary(e.a, SUBLET_SUMMARY_FRAGMENTATION, frag, sizeof frag);
    assert_true(n1 < n0);
    assert_true(n2 > n0);
    assert_int_equal(strncmp(full, frag, n0), 0);
    assert_non_null(strstr(frag + n0, "fragmentation (1 segments"));
    assert_non_null(strstr(frag + n0, "segments pinning free memory"));
    assert_int_equal(sublet_summary(e.a, SUBLET_SUMMARY_FRAGMENTATION, NULL, 0), n2);
    char small[100];
    assert_int_equal(sublet_summary(e.a, 3, small, sizeof small), sublet_summary(e.a, 3, NULL, 0));
    assert_int_equal(strlen(small), sizeof small - 1);
    h_free(e.a, p);
    h_env_fini(&e);
}

/* ---- the committed trace: every event ------------------------------------------------------- */

typedef struct at_check {
    const char *name;
    sublet_frag_stats all;
    int got;
} at_check;

static void check_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)st;
    at_check *c = user;
    char where[128];
    snprintf(where, sizeof where, "%s after event %llu", c->name, (unsigned long long)last);
    live_vs_walk(a, where);
    sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &c->all);
    c->got = 1;
}

static void test_trace_every_event(void **state)
{
    (void)state;
    sublet_trace *t = load(testdata_dir(), "cs336_attention_microbench.events.csv");
    size_t n = sublet_trace_count(t);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    /* the series with one bucket per event: its last value is the state after it */
    sublet_frag_series s;
    char err[512];
    assert_int_equal(sublet_frag_series_run(t, &o, n, &s, NULL, err, sizeof err), SUBLET_OK);
    assert_int_equal(s.nbuckets, n);
    assert_true(s.exact);
    for (size_t i = 0; i < n; i++) {
        at_check c = {"attention", {0}, 0};
        sublet_replay_options ro = o;
        ro.stop_after = i;
        ro.record = SUBLET_RECORD_STATE; /* as the series: frees complete at their rows */
        ro.on_finish = check_finish;
        ro.finish_user = &c;
        sublet_replay_result r;
        assert_int_equal(sublet_replay_run(t, &ro, &r, err, sizeof err), SUBLET_OK);
        sublet_replay_result_free(&r);
        assert_true(c.got);
        const double *last = s.last;
        size_t nb = s.nbuckets;
        if (last[SUBLET_FRAG_SERIES_RESERVED * nb + i] != (double)c.all.reserved_bytes ||
            last[SUBLET_FRAG_SERIES_ALLOCATED * nb + i] != (double)c.all.allocated_bytes ||
            last[SUBLET_FRAG_SERIES_REQUESTED * nb + i] != (double)c.all.requested_bytes ||
            last[SUBLET_FRAG_SERIES_ACTIVE * nb + i] != (double)c.all.active_bytes ||
            last[SUBLET_FRAG_SERIES_FREE_BLOCKS * nb + i] != (double)c.all.free_blocks ||
            last[SUBLET_FRAG_SERIES_LARGEST_FREE * nb + i] != (double)c.all.largest_free_block ||
            !NEAR(last[SUBLET_FRAG_SERIES_EXTERNAL * nb + i], c.all.external))
            fail_msg("series after event %zu: reserved %.0f allocated %.0f free blocks %.0f; "
                     "engine %llu %llu %llu",
                     i, last[SUBLET_FRAG_SERIES_RESERVED * nb + i],
                     last[SUBLET_FRAG_SERIES_ALLOCATED * nb + i],
                     last[SUBLET_FRAG_SERIES_FREE_BLOCKS * nb + i],
                     (unsigned long long)c.all.reserved_bytes,
                     (unsigned long long)c.all.allocated_bytes,
                     (unsigned long long)c.all.free_blocks);
    }
    sublet_frag_series_free(&s);
    /* decimated: min <= last <= max in every bucket, and the reserved peak kept */
    sublet_replay_result r;
    assert_int_equal(sublet_frag_series_run(t, &o, 10, &s, &r, err, sizeof err), SUBLET_OK);
    double peak = 0;
    for (size_t k = 0; k < s.nbuckets; k++)
        for (int q = 0; q < SUBLET_FRAG_SERIES_COUNT; q++) {
            size_t at = (size_t)q * s.nbuckets + k;
            assert_true(s.min[at] <= s.last[at] && s.last[at] <= s.max[at]);
            if (q == SUBLET_FRAG_SERIES_RESERVED && s.max[at] > peak)
                peak = s.max[at];
        }
    assert_true(peak == (double)r.peak_reserved_bytes);
    sublet_replay_result_free(&r);
    sublet_frag_series_free(&s);
    trace_free(t);
}

/* Every shared trace, at chosen events: the largest free block and the number
 * of free blocks recounted here from the block list, against the engine. */
typedef struct recount_ctx {
    uint64_t largest, nfree;
    sublet_frag_stats live;
} recount_ctx;

static void recount_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    (void)st;
    recount_ctx *c = user;
    sublet_frag_state *fs = capture(a);
    c->largest = c->nfree = 0;
    for (size_t i = 0; i < fs->nblocks; i++)
        if (fs->blocks[i].state == SUBLET_BLOCK_INACTIVE) {
            c->nfree++;
            if (fs->blocks[i].size > c->largest)
                c->largest = fs->blocks[i].size;
        }
    sublet_frag_state_free(fs);
    sublet_frag_read(a, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &c->live);
    live_vs_walk(a, "shared trace");
}

static void test_shared_traces(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int traces = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 10 || strcmp(de->d_name + len - 10, ".pickle.gz") != 0)
            continue;
        sublet_trace *t = load(dir, de->d_name);
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        const char *conf = sublet_trace_settings(t);
        o.conf = conf ? conf : "";
        size_t n = sublet_trace_count(t), npre = sublet_trace_prelude_count(t);
        sublet_frag_series s;
        sublet_replay_result r;
        char err[1024];
        assert_int_equal(sublet_frag_series_run(t, &o, 500, &s, &r, err, sizeof err), SUBLET_OK);
        if (!s.exact)
            fail_msg("%s: series not exact: %s", de->d_name, s.mismatch);
        uint64_t events[8] = {
            npre,  npre + (n - npre) / 4, npre + (n - npre) / 2, npre + 3 * (n - npre) / 4,
            n - 1, r.peak_reserved_event};
        sublet_frag_series_free(&s);
        sublet_replay_result_free(&r);
        /* the series stays exact under other settings too */
        static const char *const others[] = {"expandable_segments:True", "policy:stitch",
                                             "max_split_size_mb:128"};
        for (size_t k = 0; k < 3; k++) {
            sublet_replay_options oo = o;
            oo.conf = others[k];
            assert_int_equal(sublet_frag_series_run(t, &oo, 100, &s, NULL, err, sizeof err),
                             SUBLET_OK);
            if (!s.exact)
                fail_msg("%s under %s: series not exact: %s", de->d_name, others[k], s.mismatch);
            sublet_frag_series_free(&s);
        }
        for (size_t k = 0; k < 6; k++) {
            if (events[k] >= n)
                continue;
            recount_ctx c;
            memset(&c, 0, sizeof c);
            sublet_replay_options ro = o;
            ro.stop_after = events[k];
            ro.on_finish = recount_finish;
            ro.finish_user = &c;
            assert_int_equal(sublet_replay_run(t, &ro, &r, err, sizeof err), SUBLET_OK);
            sublet_replay_result_free(&r);
            if (c.live.largest_free_block != c.largest || c.live.free_blocks != c.nfree)
                fail_msg("%s after event %llu: engine %llu free blocks, largest %llu; block list "
                         "%llu, largest %llu",
                         de->d_name, (unsigned long long)events[k],
                         (unsigned long long)c.live.free_blocks,
                         (unsigned long long)c.live.largest_free_block, (unsigned long long)c.nfree,
                         (unsigned long long)c.largest);
        }
        trace_free(t);
        traces++;
    }
    closedir(d);
    assert_true(traces > 0);
}

/* ---- OOM diagnosis ----------------------------------------------------------------------------
 */

/* A 20 MiB segment: x 8 | pin 2 | y 8 | 2 free; x and y freed: 18 MiB free,
 * pinned by 2 MiB.  The device (36 MiB) has 16 MiB left: a 24 MiB request
 * fails although 18 + 16 MiB would suffice. */
static const uint64_t frag_sizes[3] = {8 * MiB, 2 * MiB, 8 * MiB};

static void test_oom_diagnosis_live(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 36 * MiB, "");
    sublet_history_record(e.a, SUBLET_RECORD_STATE, SUBLET_CONTEXT_STATE, 0);
    void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = h_malloc(e.a, frag_sizes[i], 0);
    h_free(e.a, p[0]);
    h_free(e.a, p[2]);
    void *big = NULL;
    assert_int_equal(h_try_malloc(e.a, 24 * MiB, 0, &big), SUBLET_ERR_OOM);
    char msg[2048], diag[8192], want[160];
    sublet_oom_message(e.a, msg, sizeof msg);
    assert_non_null(strstr(msg, "sublet: fragmentation"));
    size_t n = sublet_oom_diagnose(e.a, 24 * MiB, 0, diag, sizeof diag);
    assert_true(n < sizeof diag);
    assert_int_equal(strncmp(diag, "sublet diagnosis: fragmentation", 31), 0);
    uint64_t base, size, req;
    assert_int_equal(sublet_block_info(e.a, p[1], &base, &size, &req), SUBLET_OK);
    h_seginfo seg = h_segment_of(e.a, base);
    snprintf(want, sizeof want,
             "1. segment 0x%llx (large pool, stream 0), 20.00 MiB: 18.00 MiB free",
             (unsigned long long)seg.addr);
    if (!strstr(diag, want))
        fail_msg("expected '%s' in:\n%s", want, diag);
    snprintf(want, sizeof want, "live block 0x%llx: 2.00 MiB", (unsigned long long)base);
    assert_non_null(strstr(diag, want));
    assert_non_null(strstr(diag, "allocated at:")); /* the stack was recorded */
    assert_non_null(strstr(diag, "expandable_segments:True"));
    /* exhaustion: more than every free byte and the device together */
    assert_int_equal(h_try_malloc(e.a, 40 * MiB, 0, &big), SUBLET_ERR_OOM);
    sublet_oom_diagnose(e.a, 40 * MiB, 0, diag, sizeof diag);
    assert_int_equal(strncmp(diag, "sublet diagnosis: exhaustion", 28), 0);
    h_free(e.a, p[1]);
    h_env_fini(&e);
}

static void append(sublet_trace *t, uint32_t kind, uint64_t addr, uint64_t size)
{
    sublet_trace_event ev = {.kind = kind, .addr = addr, .size = size};
    assert_int_equal(sublet_trace_append(t, &ev), SUBLET_OK);
}

static void free_rows(sublet_trace *t, uint64_t addr, uint64_t size)
{
    append(t, SUBLET_ACT_FREE_REQUESTED, addr, size);
    append(t, SUBLET_ACT_FREE_COMPLETED, addr, size);
}

/* The suggestions of the live text that the replay shows to avoid the OOM. */
static int suggested(const char *setting)
{
    return strncmp(setting, "max_split_size_mb:", 18) == 0 ||
           strcmp(setting, "expandable_segments:True") == 0 ||
           strcmp(setting, "policy:stitch") == 0;
}

static void test_oom_diagnosis_replay(void **state)
{
    (void)state;
    sublet_trace *t;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    const uint64_t A = 0x10000000;
    for (int i = 0; i < 3; i++)
        append(t, SUBLET_ACT_ALLOC, A + (uint64_t)i * 16 * MiB, frag_sizes[i]);
    free_rows(t, A, frag_sizes[0]);
    free_rows(t, A + 32 * MiB, frag_sizes[2]);
    append(t, SUBLET_ACT_ALLOC, A + 64 * MiB, 24 * MiB);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.device_memory = 36 * MiB;
    sublet_frag_diagnosis d;
    char err[512];
    assert_int_equal(sublet_frag_diagnose_trace(t, &o, NULL, &d, err, sizeof err), SUBLET_OK);
    assert_int_equal(d.ooms, 1);
    assert_int_equal(d.noom, 1);
    assert_int_equal(d.oom[0].event, 7);
    assert_true(d.oom[0].fragmentation);
    assert_non_null(d.oom[0].diagnosis);
    assert_non_null(strstr(d.oom[0].diagnosis, "1. segment 0x"));
    assert_non_null(strstr(d.oom[0].diagnosis, "held by 1 live block"));
    int avoided = 0;
    for (size_t i = 0; i < d.ncandidates; i++)
        if (suggested(d.candidates[i].setting) &&
            sublet_frag_candidate_avoids(&d.candidates[i], d.oom[0].event) &&
            d.candidates[i].ooms == 0)
            avoided++;
    assert_true(avoided > 0);
    size_t n = sublet_frag_diagnosis_format(&d, NULL, 0);
    char *text = malloc(n + 1);
    assert_non_null(text);
    assert_int_equal(sublet_frag_diagnosis_format(&d, text, n + 1), n);
    assert_non_null(strstr(text, "(fragmentation)"));
    assert_non_null(strstr(text, "avoided"));
    assert_non_null(strstr(text, "Verdict: "));
    free(text);
    sublet_frag_diagnosis_free(&d);
    sublet_trace_free(t);
}

static char *diagnosis_text(const sublet_frag_diagnosis *d)
{
    size_t n = sublet_frag_diagnosis_format(d, NULL, 0);
    char *text = malloc(n + 1);
    assert_non_null(text);
    assert_int_equal(sublet_frag_diagnosis_format(d, text, n + 1), n);
    return text;
}

/* The min capacity `sublet mincap` finds for t under conf. */
static uint64_t mincap_of(const sublet_trace *t, const char *conf)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    sublet_mincap_result m;
    char err[512];
    if (sublet_replay_min_capacity(t, &o, 0, &m, err, sizeof err) != SUBLET_OK)
        fail_msg("mincap under \"%s\": %s", conf, err);
    uint64_t bytes = m.min_capacity_bytes;
    sublet_mincap_result_free(&m);
    return bytes;
}

/* The verdict's device needed: the base settings' and each candidate's min
 * capacity as sublet mincap finds it, the best the smallest. */
static void check_capacities(const sublet_trace *t, const sublet_frag_diagnosis *d)
{
    assert_int_equal(d->min_capacity_bytes, mincap_of(t, d->conf));
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < d->ncandidates; i++) {
        const sublet_frag_candidate *c = &d->candidates[i];
        assert_int_equal(c->status, SUBLET_OK);
        assert_int_equal(c->min_capacity_bytes, mincap_of(t, c->conf));
        if (best == SIZE_MAX || c->min_capacity_bytes < d->candidates[best].min_capacity_bytes)
            best = i;
    }
    assert_int_equal(d->best_capacity, best);
}

/* Alike OOMs (kind, size, stream, pool, stack) are one group: the first shown,
 * the others counted with their events.  On a 64 MiB device with 40 MiB live,
 * three 40 MiB requests (events 1, 3, 4) and one of 30 MiB (event 2) fail. */
static void test_oom_diagnosis_groups(void **state)
{
    (void)state;
    sublet_trace *t;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    const uint64_t A = 0x10000000;
    const uint64_t sizes[5] = {40 * MiB, 40 * MiB, 30 * MiB, 40 * MiB, 40 * MiB};
    for (int i = 0; i < 5; i++)
        append(t, SUBLET_ACT_ALLOC, A + (uint64_t)i * 64 * MiB, sizes[i]);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.device_memory = 64 * MiB;
    const char *cands[] = {"expandable_segments:True", "max_split_size_mb:128", NULL};
    sublet_frag_diagnose_options dopt = {.candidates = cands};
    sublet_frag_diagnosis d;
    char err[512];
    assert_int_equal(sublet_frag_diagnose_trace(t, &o, &dopt, &d, err, sizeof err), SUBLET_OK);
    assert_int_equal(d.ooms, 4);
    assert_int_equal(d.noom, 4); /* the list of OOMs as before, each with its group */
    assert_int_equal(d.groups_all, 2);
    assert_int_equal(d.ngroups, 2);
    const sublet_frag_oom_group *g = d.groups;
    assert_int_equal(g[0].number, 1);
    assert_int_equal(g[0].count, 3);
    assert_int_equal(g[0].first.size, 40 * MiB);
    assert_int_equal(g[0].first.fragmentation, 0);
    assert_int_equal(g[0].events[0], 1);
    assert_int_equal(g[0].events[1], 3);
    assert_int_equal(g[0].events[2], 4);
    assert_null(g[0].stack); /* a trace without stacks */
    assert_non_null(g[0].first.diagnosis);
    assert_int_equal(g[1].number, 2);
    assert_int_equal(g[1].count, 1);
    assert_int_equal(g[1].events[0], 2);
    assert_int_equal(g[1].first.size, 30 * MiB);
    const size_t group_of[4] = {0, 1, 0, 0};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(d.oom[i].group, group_of[i]);
    assert_non_null(d.oom[0].diagnosis); /* the first of a group: its diagnosis */
    assert_null(d.oom[2].diagnosis);     /* another of it: the group says it */
    char *text = diagnosis_text(&d);
    assert_non_null(strstr(text, "2 kinds of OOM (alike: "));
    assert_non_null(strstr(text, "\nOOM 1 of 4: event 1 "));
    assert_non_null(strstr(text, "\nOOM 2 of 4: event 2 "));
    assert_null(strstr(text, "\nOOM 3 of 4"));
    assert_non_null(
        strstr(text, "  and 2 more like it (the same kind, size, stream, pool) at events 3, 4\n"));
    /* every 40 MiB request needs its own 40 MiB segment: 190 MiB in all */
    assert_int_equal(d.min_capacity_bytes, 190 * MiB);
    check_capacities(t, &d);
    assert_non_null(strstr(text, "Device needed (as `sublet mincap` finds it): 190.00 MiB "
                                 "(199229440 bytes) under the base settings, more than this "
                                 "64.00 MiB device; no setting tried needs less"));
    free(text);
    sublet_frag_diagnosis_free(&d);

    /* one group listed: the other counted */
    dopt.max_listed = 1;
    dopt.no_min_capacity = 1;
    assert_int_equal(sublet_frag_diagnose_trace(t, &o, &dopt, &d, err, sizeof err), SUBLET_OK);
    assert_int_equal(d.ngroups, 1);
    assert_int_equal(d.groups_all, 2);
    assert_int_equal(d.groups[0].count, 3);
    assert_int_equal(d.noom, 1);
    assert_int_equal(d.min_capacity_bytes, 0);
    assert_int_equal(d.best_capacity, SIZE_MAX);
    text = diagnosis_text(&d);
    assert_non_null(strstr(text, "(1 more kind of OOM, 1 OOM, not listed)"));
    assert_null(strstr(text, "Device needed"));
    free(text);
    sublet_frag_diagnosis_free(&d);
    sublet_trace_free(t);
}

/* cs336_attention_microbench on a device just smaller than its recorded peak
 * reserved (3,781,165,056 bytes): 3.6 GB. */
static void test_oom_diagnosis_attention(void **state)
{
    (void)state;
    sublet_trace *t = load(testdata_dir(), "cs336_attention_microbench.pickle.gz");
    sublet_trace_info info;
    sublet_trace_info_get(t, &info);
    assert_int_equal(info.peak_reserved_bytes, UINT64_C(3781165056));
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.device_memory = UINT64_C(3600000000);
    /* default policy: fragmented at the peak, well over the live bytes */
    sublet_frag_state *st = NULL;
    sublet_replay_result r;
    char err[512];
    assert_int_equal(sublet_frag_state_at(t, &o, 50, &st, &r, err, sizeof err), SUBLET_OK);
    sublet_frag_stats m;
    sublet_frag_compute(st, SUBLET_POOL_ALL, SUBLET_STREAM_ALL, &m);
    assert_true(m.unused > 0.15);
    assert_true((double)m.reserved_bytes > 1.15 * (double)m.requested_bytes);
    sublet_frag_state_free(st);
    sublet_replay_result_free(&r);

    sublet_frag_diagnosis d;
    assert_int_equal(sublet_frag_diagnose_trace(t, &o, NULL, &d, err, sizeof err), SUBLET_OK);
    assert_true(d.ooms >= 1);
    const sublet_frag_oom *oom = &d.oom[0];
    assert_true(oom->fragmentation);
    assert_non_null(oom->diagnosis);
    assert_int_equal(strncmp(oom->diagnosis, "sublet diagnosis: fragmentation", 31), 0);
    /* the segment pinning the most: 512 MiB held by one small live block */
    assert_non_null(strstr(oom->diagnosis, "1. segment 0x"));
    assert_non_null(
        strstr(oom->diagnosis, "512.00 MiB: 503.88 MiB free (98.4 %) held by 1 live block"));
    int max_split = 0, expandable = 0, stitch = 0;
    for (size_t i = 0; i < d.ncandidates; i++) {
        const sublet_frag_candidate *c = &d.candidates[i];
        int ok =
            c->status == SUBLET_OK && c->ooms == 0 && sublet_frag_candidate_avoids(c, oom->event);
        if (strncmp(c->setting, "max_split_size_mb:", 18) == 0)
            max_split |= ok;
        if (strcmp(c->setting, "expandable_segments:True") == 0)
            expandable = ok;
        if (strcmp(c->setting, "policy:stitch") == 0)
            stitch = ok;
    }
    assert_true(max_split || expandable || stitch);
    assert_true(max_split && expandable && stitch); /* as measured: all three do */
    sublet_frag_diagnosis_free(&d);

    /* On 2 GiB: five OOMs of 512 MiB from four places (events 52 and 69 share a
     * stack), and the device needed: 3,781,165,056 bytes under PyTorch's
     * defaults (tests/cli_mincap.sh), 3,252,682,752 with policy:stitch, the least. */
    o.device_memory = 2 * GiB;
    assert_int_equal(sublet_frag_diagnose_trace(t, &o, NULL, &d, err, sizeof err), SUBLET_OK);
    assert_int_equal(d.ooms, 5);
    assert_int_equal(d.min_capacity_bytes, UINT64_C(3781165056));
    assert_true(d.best_capacity < d.ncandidates);
    assert_string_equal(d.candidates[d.best_capacity].setting, "policy:stitch");
    assert_int_equal(d.candidates[d.best_capacity].min_capacity_bytes, UINT64_C(3252682752));
    check_capacities(t, &d);
    for (size_t i = 0; i < d.ngroups; i++) {
        assert_non_null(d.groups[i].stack);
        assert_int_equal(d.groups[i].first.size, 512 * MiB);
    }
    char *text = diagnosis_text(&d);
    assert_non_null(strstr(text, "under the base settings, more than this 2.00 GiB device; "
                                 "3.03 GiB (3252682752 bytes) with policy:stitch, the best "
                                 "setting tried: 504.00 MiB (14.0 %) less.\n"));
    free(text);
    sublet_frag_diagnosis_free(&d);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_free_blocks),       cmocka_unit_test(test_pools_streams),
        cmocka_unit_test(test_random_states),           cmocka_unit_test(test_summary_flags),
        cmocka_unit_test(test_trace_every_event),       cmocka_unit_test(test_shared_traces),
        cmocka_unit_test(test_oom_diagnosis_live),      cmocka_unit_test(test_oom_diagnosis_replay),
        cmocka_unit_test(test_oom_diagnosis_attention), cmocka_unit_test(test_oom_diagnosis_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
