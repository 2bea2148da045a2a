/* sublet — misuse gets a defined error and the allocator stays intact
 * (issue 8, item 4).
 *
 * Every refused call is made through refused(): it asserts the status, then
 * that sublet_check() passes and that the statistics are byte-identical to
 * before (memcmp of sublet_stats_read).  The cases, with their errors:
 *
 *   double free (plain, after a merge, while the first free waits on a
 *     stream)                                   SUBLET_ERR_DOUBLE_FREE
 *   a pointer into cached free memory            SUBLET_ERR_DOUBLE_FREE
 *   a pointer not from this allocator: random addresses, host pointers, a
 *     freed segment's address, the all-ones address
 *                                                SUBLET_ERR_INVALID_POINTER
 *   a pointer of another device's allocator      SUBLET_ERR_INVALID_POINTER
 *   an interior pointer                          SUBLET_ERR_INTERIOR_POINTER
 *   a request >= 2^60 bytes (UINT64_MAX, SIZE_MAX, 2^60 ...): nothing
 *     counted, PyTorch's "more than 1EB" text    SUBLET_ERR_OOM
 *   a request just below 2^60 (and anything the device cannot hold): an
 *     ordinary OOM, num_ooms + 1, never a wrapped small block
 *                                                SUBLET_ERR_OOM
 *   record_stream on a freed block               SUBLET_ERR_DOUBLE_FREE
 *     (cached) / SUBLET_ERR_INVALID_POINTER (returned to the device)
 *   backend:cudaMallocAsync (create or apply)    SUBLET_ERR_UNSUPPORTED
 *   expandable_segments:True or policy:stitch on a backend without virtual
 *     memory (create or apply)                   SUBLET_ERR_UNSUPPORTED
 *   a malformed settings string                  SUBLET_ERR_CONFIG
 *   a memory fraction outside [0, 1] or NaN      SUBLET_ERR_INVALID_ARGUMENT
 *   a NULL allocator or out pointer              SUBLET_ERR_INVALID_ARGUMENT
 *   malloc(0)                                    SUBLET_OK, NULL, nothing recorded
 *
 * Settings PyTorch lets a program change while blocks are live
 * (max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold,
 * expandable_segments, the memory fraction; and sublet's policy:stitch) are
 * accepted, and the allocator
 * keeps working with sublet_check() after every operation across each
 * change.  Refused settings leave the settings untouched. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/harness.h"

#define SIM_CAP (4 * GiB)
#define TWO60 (UINT64_C(1) << 60)

static const char EB_MSG[] = "CUDA out of memory. Tried to allocate more than 1EB memory.";

/* ---- helpers ---------------------------------------------------------------------------- */

typedef enum { OP_FREE, OP_RECORD } misuse_op;

/* The call is refused with `want`; nothing changed. */
static void refused_at(sublet_allocator *a, misuse_op op, void *ptr, sublet_status want,
                       const char *file, int line)
{
    sublet_stats before, after;
    sublet_stats_read(a, &before);
    sublet_status st = op == OP_FREE ? sublet_free(a, ptr) : sublet_record_stream(a, ptr, 7);
    if (st != want)
        fail_msg("%s:%d: %s(%p) returned %s, want %s", file, line,
                 op == OP_FREE ? "free" : "record_stream", ptr, sublet_status_name(st),
                 sublet_status_name(want));
    h_check_at(a, file, line);
    sublet_stats_read(a, &after);
    if (memcmp(&before, &after, sizeof before) != 0)
        h_stats_equal_at(&before, &after, file, line); /* names the stat */
}
#define refused_free(a, p, want) refused_at((a), OP_FREE, (p), (want), __FILE__, __LINE__)
#define refused_record(a, p, want) refused_at((a), OP_RECORD, (p), (want), __FILE__, __LINE__)

static void expect_stats_identical(sublet_allocator *a, const sublet_stats *before)
{
    sublet_stats after;
    sublet_stats_read(a, &after);
    if (memcmp(before, &after, sizeof after) != 0)
        h_stats_equal(before, &after);
}

/* Trace events, to show that a refused call records nothing. */
static void count_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                        sublet_stream stream)
{
    (void)act;
    (void)addr;
    (void)size;
    (void)stream;
    (*(int *)user)++;
}

/* Everything back: nothing allocated, nothing reserved, the sim empty. */
static void expect_all_returned(h_env *e)
{
    sublet_sim_complete_all(e->inner);
    h_process_events(e->a);
    h_empty_cache(e->a);
    assert_int_equal(h_stat(e->a, "allocation.all.current"), 0);
    assert_int_equal(h_stat(e->a, "active.all.current"), 0);
    assert_int_equal(h_stat(e->a, "reserved_bytes.all.current"), 0);
    assert_int_equal(sublet_sim_used(e->inner), 0);
}

/* ---- double free, foreign and interior pointers ---------------------------------------- */

static void double_free_cases(const char *conf)
{
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, conf);
    void *a = h_malloc(e.a, 5 * MiB, 0), *b = h_malloc(e.a, 5 * MiB, 0);
    void *c = h_malloc(e.a, 5 * MiB, 0);
    void *s = h_malloc(e.a, 700, 0), *t = h_malloc(e.a, 700, 0);
    /* plain */
    h_free(e.a, a);
    refused_free(e.a, a, SUBLET_ERR_DOUBLE_FREE);
    refused_free(e.a, a, SUBLET_ERR_DOUBLE_FREE); /* a third time */
    /* after the block merged with its free neighbour: b's start is now
     * inside the merged free block */
    h_free(e.a, b);
    refused_free(e.a, b, SUBLET_ERR_DOUBLE_FREE);
    refused_free(e.a, (char *)b + 4096, SUBLET_ERR_DOUBLE_FREE); /* into cached free memory */
    /* while the first free waits on another stream */
    h_record(e.a, s, 4);
    h_free(e.a, s);
    assert_int_equal(h_stat(e.a, "active.all.current"), 3); /* c, t and the pending s */
    refused_free(e.a, s, SUBLET_ERR_DOUBLE_FREE);
    sublet_sim_stream_complete(e.inner, 4);
    h_process_events(e.a);
    refused_free(e.a, s, SUBLET_ERR_DOUBLE_FREE);
    /* the live blocks are untouched by all this */
    assert_int_equal(h_block_size(e.a, c), 5 * MiB);
    assert_int_equal(h_block_size(e.a, t), 1024);
    h_free(e.a, c);
    h_free(e.a, t);
    refused_free(e.a, c, SUBLET_ERR_DOUBLE_FREE);
    refused_free(e.a, t, SUBLET_ERR_DOUBLE_FREE);
    /* once the segments went back to the device the pointers are unknown */
    h_empty_cache(e.a);
    refused_free(e.a, a, SUBLET_ERR_INVALID_POINTER);
    refused_free(e.a, s, SUBLET_ERR_INVALID_POINTER);
    expect_all_returned(&e);
    h_env_fini(&e);
}

static void test_double_free(void **state)
{
    (void)state;
    double_free_cases("");
    double_free_cases("max_split_size_mb:40");
}

static void test_double_free_expandable(void **state)
{
    (void)state;
    double_free_cases("expandable_segments:True");
}

static void test_foreign_pointers(void **state)
{
    (void)state;
    static const char *const confs[] = {"", "expandable_segments:True", "policy:stitch"};
    for (size_t k = 0; k < sizeof confs / sizeof confs[0]; k++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_CAP, confs[k]);
        void *live[4];
        for (int i = 0; i < 4; i++)
            live[i] = h_malloc(e.a, (uint64_t)(i + 1) * 3 * MiB, 0);
        h_seginfo segs[16];
        size_t nseg = h_segments(e.a, segs, 16);
        assert_true(nseg >= 1);
        /* host pointers: a stack variable, a heap block, a function */
        int local = 0;
        char *heap = malloc(64);
        assert_non_null(heap);
        refused_free(e.a, &local, SUBLET_ERR_INVALID_POINTER);
        refused_free(e.a, heap, SUBLET_ERR_INVALID_POINTER);
        refused_free(e.a, (void *)(uintptr_t)&test_foreign_pointers, SUBLET_ERR_INVALID_POINTER);
        refused_record(e.a, heap, SUBLET_ERR_INVALID_POINTER);
        free(heap);
        /* small and huge addresses, just past a segment, just before one */
        refused_free(e.a, (void *)(uintptr_t)0x1234, SUBLET_ERR_INVALID_POINTER);
        refused_free(e.a, (void *)(uintptr_t)(UINTPTR_MAX - 1), SUBLET_ERR_INVALID_POINTER);
        refused_free(e.a, (void *)(uintptr_t)(UINTPTR_MAX - 511), SUBLET_ERR_INVALID_POINTER);
        /* UINTPTR_MAX itself: test_all_ones_pointer */
        refused_free(e.a, (void *)(uintptr_t)(segs[nseg - 1].addr + segs[nseg - 1].size),
                     SUBLET_ERR_INVALID_POINTER);
        refused_free(e.a, (void *)(uintptr_t)(segs[0].addr - 512), SUBLET_ERR_INVALID_POINTER);
        /* random addresses: outside every segment → invalid; inside one →
         * interior or cached-free (never a success) */
        uint64_t rng = 0xf00d + k;
        for (int i = 0; i < 2000; i++) {
            uint64_t addr = i % 2 ? h_rand(&rng)
                                  : segs[0].addr - 64 * GiB + h_rand_range(&rng, 0, 128 * GiB);
            addr &= ~(uint64_t)7;
            if (addr == 0)
                continue;
            bool is_live = false;
            for (int j = 0; j < 4; j++)
                is_live |= addr == h_addr(live[j]);
            if (is_live)
                continue;
            bool inside = false;
            for (size_t j = 0; j < nseg && j < 16; j++)
                inside |= addr >= segs[j].addr && addr < segs[j].addr + segs[j].size;
            sublet_stats before;
            sublet_stats_read(e.a, &before);
            sublet_status st = sublet_free(e.a, (void *)(uintptr_t)addr);
            if (inside)
                assert_true(st == SUBLET_ERR_INTERIOR_POINTER || st == SUBLET_ERR_DOUBLE_FREE ||
                            st == SUBLET_ERR_INVALID_POINTER);
            else if (st != SUBLET_ERR_INVALID_POINTER)
                fail_msg("free(0x%llx) outside every segment: %s", (unsigned long long)addr,
                         sublet_status_name(st));
            expect_stats_identical(e.a, &before);
            if (i % 64 == 0)
                CHECK(e.a);
        }
        CHECK(e.a);
        for (int i = 0; i < 4; i++)
            h_free(e.a, live[i]);
        expect_all_returned(&e);
        h_env_fini(&e);
    }
}

/* A sim backend that says it is device `device`: its allocator's pointers
 * are freed in the other device's allocator. */
static void test_other_device(void **state)
{
    (void)state;
    h_env e0, e1;
    h_env_init(&e0, H_SIM, SIM_CAP, "");
    memset(&e1, 0, sizeof e1);
    assert_int_equal(sublet_sim_create(SIM_CAP, &e1.inner), SUBLET_OK);
    e1.inner->device = 1;
    e1.be = e1.inner;
    sublet_options o = {.backend = e1.inner, .device = 1, .conf = ""};
    char err[256];
    assert_int_equal(sublet_allocator_create(&o, &e1.a, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_allocator_device(e0.a), 0);
    assert_int_equal(sublet_allocator_device(e1.a), 1);
    /* Two sims number their address spaces alike; real devices (unified
     * addressing) never share an address.  Put device 1's memory elsewhere. */
    void *p0 = h_malloc(e0.a, 3 * MiB, 0), *s0 = h_malloc(e0.a, 800, 0);
    sublet_sim_next_hint(e1.inner, h_addr(p0) + 256 * GiB);
    void *p1 = h_malloc(e1.a, 3 * MiB, 0);
    sublet_sim_next_hint(e1.inner, h_addr(p0) + 512 * GiB);
    void *s1 = h_malloc(e1.a, 800, 0);
    assert_true(h_addr(p1) >= h_addr(p0) + 256 * GiB);
    /* each one's pointers, freed or recorded in the other */
    refused_free(e1.a, p0, SUBLET_ERR_INVALID_POINTER);
    refused_free(e1.a, s0, SUBLET_ERR_INVALID_POINTER);
    refused_free(e0.a, p1, SUBLET_ERR_INVALID_POINTER);
    refused_free(e0.a, s1, SUBLET_ERR_INVALID_POINTER);
    refused_record(e1.a, p0, SUBLET_ERR_INVALID_POINTER);
    refused_record(e0.a, s1, SUBLET_ERR_INVALID_POINTER);
    /* and neither allocator noticed anything */
    CHECK(e0.a);
    CHECK(e1.a);
    assert_int_equal(h_stat(e0.a, "allocation.all.current"), 2);
    assert_int_equal(h_stat(e1.a, "allocation.all.current"), 2);
    h_free(e0.a, p0);
    h_free(e0.a, s0);
    h_free(e1.a, p1);
    h_free(e1.a, s1);
    expect_all_returned(&e0);
    expect_all_returned(&e1);
    h_env_fini(&e1);
    h_env_fini(&e0);
}

static void test_interior_pointer(void **state)
{
    (void)state;
    static const char *const confs[] = {"", "max_split_size_mb:40", "expandable_segments:True",
                                        "policy:stitch"};
    for (size_t k = 0; k < sizeof confs / sizeof confs[0]; k++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_CAP, confs[k]);
        void *big = h_malloc(e.a, 50 * MiB, 0);
        void *mid = h_malloc(e.a, 5 * MiB, 0);
        void *small = h_malloc(e.a, 700, 0);
        uint64_t bsz = h_block_size(e.a, big), ssz = h_block_size(e.a, small);
        refused_free(e.a, (char *)big + 1, SUBLET_ERR_INTERIOR_POINTER);
        refused_free(e.a, (char *)big + 512, SUBLET_ERR_INTERIOR_POINTER);
        refused_free(e.a, (char *)big + bsz / 2, SUBLET_ERR_INTERIOR_POINTER);
        refused_free(e.a, (char *)big + bsz - 1, SUBLET_ERR_INTERIOR_POINTER);
        refused_free(e.a, (char *)mid + 2 * MiB, SUBLET_ERR_INTERIOR_POINTER);
        refused_free(e.a, (char *)small + 1, SUBLET_ERR_INTERIOR_POINTER);
        refused_free(e.a, (char *)small + ssz - 1, SUBLET_ERR_INTERIOR_POINTER);
        /* record_stream through a view of a live block is PyTorch's
         * (test_record_stream_on_shifted_view): allowed, protects the block */
        h_record(e.a, (char *)mid + 4096, 3);
        h_free(e.a, big);
        h_free(e.a, mid);
        h_free(e.a, small);
        assert_int_equal(h_stat(e.a, "active.all.current"), 1); /* mid waits on stream 3 */
        expect_all_returned(&e);
        h_env_fini(&e);
    }
}

/* ---- record_stream on a freed block ------------------------------------------------------ */

static void test_record_stream_on_freed_block(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "");
    /* freed and cached as a block of its own */
    void *keep = h_malloc(e.a, 3 * MiB, 0);
    void *p = h_malloc(e.a, 3 * MiB, 0);
    void *q = h_malloc(e.a, 3 * MiB, 0);
    h_free(e.a, p);
    refused_record(e.a, p, SUBLET_ERR_DOUBLE_FREE);
    refused_record(e.a, (char *)p + 4096, SUBLET_ERR_DOUBLE_FREE);
    /* the record attached nothing: the memory is reused at once and its free
     * completes without waiting on stream 7 */
    void *again = h_malloc(e.a, 3 * MiB, 0);
    assert_ptr_equal(again, p);
    h_free(e.a, again);
    assert_int_equal(h_stat(e.a, "active.all.current"), 2);
    /* freed and merged into a neighbour */
    h_free(e.a, q);
    refused_record(e.a, q, SUBLET_ERR_DOUBLE_FREE);
    /* freed while its free waits on another stream */
    void *w = h_malloc(e.a, 700, 0);
    h_record(e.a, w, 5);
    h_free(e.a, w);
    refused_record(e.a, w, SUBLET_ERR_DOUBLE_FREE);
    sublet_sim_stream_complete(e.inner, 5);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 1); /* only keep */
    /* freed and given back to the device */
    h_free(e.a, keep);
    h_empty_cache(e.a);
    refused_record(e.a, p, SUBLET_ERR_INVALID_POINTER);
    refused_record(e.a, keep, SUBLET_ERR_INVALID_POINTER);
    refused_record(e.a, w, SUBLET_ERR_INVALID_POINTER);
    assert_int_equal(h_try_record(e.a, NULL, 3), SUBLET_OK);
    expect_all_returned(&e);
    h_env_fini(&e);
}

/* ---- size overflow in rounding ------------------------------------------------------------ */

static void size_overflow_cases(const char *conf)
{
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, conf);
    int traced = 0;
    void *live = h_malloc(e.a, 5 * MiB, 0);
    sublet_settings st;
    sublet_settings_get(e.a, &st);

    /* >= 2^60: refused up front, as PyTorch (nothing counted, nothing traced) */
    static const uint64_t eb[] = {UINT64_MAX,         UINT64_MAX - 1,     UINT64_MAX - 511,
                                  (uint64_t)SIZE_MAX, (uint64_t)SIZE_MAX - 512,
                                  UINT64_C(1) << 63,  (UINT64_C(1) << 62) + 1, TWO60,
                                  TWO60 + 1,          TWO60 + 511};
    for (size_t i = 0; i < sizeof eb / sizeof eb[0]; i++) {
        sublet_stats before;
        sublet_stats_read(e.a, &before);
        sublet_trace_set(e.a, count_trace, &traced);
        void *p = (void *)&p;
        assert_int_equal(h_try_malloc(e.a, eb[i], 0, &p), SUBLET_ERR_OOM);
        sublet_trace_set(e.a, NULL, NULL);
        assert_null(p);
        assert_int_equal(traced, 0);
        expect_stats_identical(e.a, &before);
        char msg[256];
        sublet_oom_message(e.a, msg, sizeof msg);
        assert_string_equal(msg, EB_MSG);
        /* rounding itself saturates, never wraps */
        uint64_t r = sublet_round_size(&st, eb[i]);
        assert_true(r >= eb[i]);
        assert_true(sublet_allocation_size(&st, r) >= r);
    }

    /* just below 2^60 (and other sizes no device holds): an ordinary OOM,
     * never a wrapped small block */
    static const uint64_t big[] = {TWO60 - 1,     TWO60 - 512,          TWO60 - 513,
                                   (TWO60 >> 1) + 1, UINT64_C(1) << 40, 80 * GiB + 1,
                                   SIM_CAP + 1,   SIM_CAP - 511};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        uint64_t r = sublet_round_size(&st, big[i]);
        assert_true(r >= big[i]);
        assert_true(r <= TWO60);
        assert_true(sublet_allocation_size(&st, r) >= r);
        sublet_stats before, after;
        sublet_stats_read(e.a, &before);
        void *p = (void *)&p;
        assert_int_equal(h_try_malloc(e.a, big[i], 0, &p), SUBLET_ERR_OOM);
        assert_null(p);
        sublet_stats_read(e.a, &after);
        assert_int_equal(after.num_ooms, before.num_ooms + 1);
        assert_int_equal(after.allocation[SUBLET_POOL_ALL].current,
                         before.allocation[SUBLET_POOL_ALL].current);
        assert_int_equal(after.allocated_bytes[SUBLET_POOL_ALL].current,
                         before.allocated_bytes[SUBLET_POOL_ALL].current);
        assert_int_equal(after.allocated_bytes[SUBLET_POOL_ALL].allocated,
                         before.allocated_bytes[SUBLET_POOL_ALL].allocated);
        char msg[4096];
        sublet_oom_message(e.a, msg, sizeof msg);
        assert_true(strncmp(msg, "CUDA out of memory. Tried to allocate ", 38) == 0);
        assert_null(strstr(msg, "1EB"));
    }
    /* the allocator still serves, and the live block is intact */
    assert_int_equal(h_block_size(e.a, live), 5 * MiB);
    void *p = h_malloc(e.a, 100 * MiB, 0);
    h_free(e.a, p);
    h_free(e.a, live);
    expect_all_returned(&e);
    h_env_fini(&e);
}

static void test_size_overflow(void **state)
{
    (void)state;
    size_overflow_cases("");
    size_overflow_cases("roundup_power2_divisions:4");
    size_overflow_cases("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    size_overflow_cases("max_split_size_mb:40,roundup_power2_divisions:4");
    size_overflow_cases("max_split_size_mb:40,max_non_split_rounding_mb:512");
    size_overflow_cases("expandable_segments:True,roundup_power2_divisions:4");
    size_overflow_cases("policy:stitch");
}

/* ---- zero-size malloc -------------------------------------------------------------------- */

static void test_zero_size(void **state)
{
    (void)state;
    static const char *const confs[] = {"", "expandable_segments:True", "policy:stitch",
                                        "roundup_power2_divisions:4"};
    for (size_t k = 0; k < sizeof confs / sizeof confs[0]; k++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_CAP, confs[k]);
        int traced = 0;
        sublet_trace_set(e.a, count_trace, &traced);
        sublet_stats before;
        sublet_stats_read(e.a, &before);
        sublet_sim_ops ops0, ops1;
        sublet_sim_ops_read(e.inner, &ops0);
        for (sublet_stream s = 0; s < 4; s++) {
            void *p = (void *)&p;
            assert_int_equal(h_try_malloc(e.a, 0, s, &p), SUBLET_OK);
            assert_null(p);
        }
        assert_int_equal(h_try_free(e.a, NULL), SUBLET_OK);
        expect_stats_identical(e.a, &before);
        sublet_sim_ops_read(e.inner, &ops1);
        assert_memory_equal(&ops0, &ops1, sizeof ops0);
        assert_int_equal(traced, 0);
        assert_int_equal(h_nsegments(e.a), 0);
        sublet_trace_set(e.a, NULL, NULL);
        h_env_fini(&e);
    }
}

static void test_null_arguments(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "");
    void *p = NULL;
    assert_int_equal(sublet_malloc(NULL, 100, 0, &p), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_malloc(e.a, 100, 0, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_free(NULL, &p), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_record_stream(NULL, &p, 1), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_empty_cache(NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_process_events(NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_settings_apply(e.a, NULL, NULL, 0), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_allocator *a = (sublet_allocator *)&p;
    assert_int_equal(sublet_allocator_create(NULL, &a, NULL, 0), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_options o = {.backend = NULL, .conf = ""};
    assert_int_equal(sublet_allocator_create(&o, &a, NULL, 0), SUBLET_ERR_INVALID_ARGUMENT);
    CHECK(e.a);
    h_env_fini(&e);
}

/* ---- settings changed while blocks are live ---------------------------------------------- */

typedef struct churn_state {
    void *live[24];
    uint64_t rng;
} churn_state;

/* Random mallocs and frees (some recorded on another stream), checked after
 * every one (harness); OOM is allowed. */
static void churn(h_env *e, churn_state *c, int steps)
{
    for (int i = 0; i < steps; i++) {
        size_t k = (size_t)h_rand_range(&c->rng, 0, 24);
        if (c->live[k]) {
            if (h_rand_range(&c->rng, 0, 4) == 0)
                h_record(e->a, c->live[k], 9);
            h_free(e->a, c->live[k]);
            c->live[k] = NULL;
        } else {
            uint64_t r = h_rand_range(&c->rng, 0, 10);
            uint64_t n = r < 5   ? h_rand_range(&c->rng, 1, MiB)
                         : r < 8 ? h_rand_range(&c->rng, MiB, 30 * MiB)
                                 : h_rand_range(&c->rng, 30 * MiB, 200 * MiB);
            void *p = NULL;
            sublet_status st = h_try_malloc(e->a, n, h_rand_range(&c->rng, 0, 2), &p);
            assert_true(st == SUBLET_OK || st == SUBLET_ERR_OOM);
            if (st == SUBLET_OK)
                assert_true(h_block_size(e->a, p) >= n);
            c->live[k] = p;
        }
        if (i % 50 == 49) {
            sublet_sim_stream_complete(e->inner, 9);
            h_process_events(e->a);
        }
    }
}

static void apply_ok(h_env *e, const char *conf)
{
    char err[512];
    sublet_stats before;
    sublet_stats_read(e->a, &before);
    sublet_status st = sublet_settings_apply(e->a, conf, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("settings_apply(\"%s\"): %s: %s", conf, sublet_status_name(st), err);
    CHECK(e->a);
    expect_stats_identical(e->a, &before); /* a settings change moves no memory */
    sublet_settings s;
    sublet_settings_get(e->a, &s);
    assert_string_equal(s.raw, conf);
}

/* The settings after a refused call equal those before it. */
static void expect_settings_equal(const sublet_settings *x, const sublet_settings *y)
{
    assert_int_equal(x->max_split_size, y->max_split_size);
    assert_int_equal(x->max_non_split_rounding, y->max_non_split_rounding);
    assert_memory_equal(x->roundup_power2_divisions, y->roundup_power2_divisions,
                        sizeof x->roundup_power2_divisions);
    assert_true(x->garbage_collection_threshold == y->garbage_collection_threshold);
    assert_int_equal(x->expandable_segments, y->expandable_segments);
    assert_int_equal(x->backend_async, y->backend_async);
    assert_int_equal(x->policy, y->policy);
    assert_true(x->per_process_memory_fraction == y->per_process_memory_fraction);
    assert_string_equal(x->raw, y->raw);
}

static void apply_refused(h_env *e, const char *conf, sublet_status want, const char *in_msg)
{
    char err[512] = "";
    sublet_stats before;
    sublet_settings s0, s1;
    sublet_stats_read(e->a, &before);
    sublet_settings_get(e->a, &s0);
    sublet_status st = sublet_settings_apply(e->a, conf, err, sizeof err);
    if (st != want)
        fail_msg("settings_apply(\"%s\"): %s, want %s (%s)", conf, sublet_status_name(st),
                 sublet_status_name(want), err);
    if (in_msg && !strstr(err, in_msg))
        fail_msg("settings_apply(\"%s\"): message \"%s\" lacks \"%s\"", conf, err, in_msg);
    assert_true(err[0] != '\0');
    CHECK(e->a);
    expect_stats_identical(e->a, &before);
    sublet_settings_get(e->a, &s1);
    expect_settings_equal(&s0, &s1);
}

static void test_settings_while_live(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "");
    churn_state c = {.rng = 0xc0ffee};
    churn(&e, &c, 300);
    /* what PyTorch allows at run time (torch.cuda.memory._set_allocator_settings
     * and set_per_process_memory_fraction), sublet allows */
    static const char *const allowed[] = {
        "max_split_size_mb:40",
        "max_split_size_mb:40,roundup_power2_divisions:4",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
        "max_split_size_mb:100,max_non_split_rounding_mb:40",
        "garbage_collection_threshold:0.6",
        "expandable_segments:True",
        "expandable_segments:True,max_split_size_mb:40",
        "expandable_segments:False",
        "expandable_segments:True,roundup_power2_divisions:8",
        "expandable_segments:False,garbage_collection_threshold:0.8,max_split_size_mb:60",
        /* sublet's own policy switch: its blocks and the native ones coexist */
        "policy:stitch",
        "policy:native,max_split_size_mb:40",
        "policy:stitch,expandable_segments:True",
        "",
    };
    static const double fractions[] = {0.7, 1.0, 0.5, 0.9, 1.0};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        apply_ok(&e, allowed[i]);
        churn(&e, &c, 300);
        sublet_stats before;
        sublet_stats_read(e.a, &before);
        assert_int_equal(sublet_memory_fraction_set(e.a, fractions[i % 5]), SUBLET_OK);
        expect_stats_identical(e.a, &before);
        CHECK(e.a);
        churn(&e, &c, 200);
        if (i % 3 == 2)
            h_empty_cache(e.a);
    }
    /* max_split_size in the statistics stays what it was at creation */
    assert_int_equal(h_stat(e.a, "max_split_size"), -1);

    /* what sublet cannot do right, it refuses: nothing changes */
    apply_refused(&e, "backend:cudaMallocAsync", SUBLET_ERR_UNSUPPORTED, "cudaMallocAsync");
    apply_refused(&e, "expandable_segments:True,backend:cudaMallocAsync", SUBLET_ERR_UNSUPPORTED,
                  "cudaMallocAsync");
    apply_refused(&e, "max_split_size_mb:1", SUBLET_ERR_CONFIG, NULL);
    apply_refused(&e, "roundup_power2_divisions:3", SUBLET_ERR_CONFIG, NULL);
    apply_refused(&e, "garbage_collection_threshold:1.5", SUBLET_ERR_CONFIG, NULL);
    apply_refused(&e, "no_such_option:1", SUBLET_ERR_CONFIG, NULL);
    apply_refused(&e, "expandable_segments:maybe", SUBLET_ERR_CONFIG, NULL);
    /* and so are impossible fractions */
    static const double bad_fractions[] = {-0.1, 1.0000001, 2.0, -INFINITY, INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad_fractions / sizeof bad_fractions[0]; i++) {
        sublet_stats before;
        sublet_stats_read(e.a, &before);
        double f0 = sublet_memory_fraction_get(e.a);
        assert_int_equal(sublet_memory_fraction_set(e.a, bad_fractions[i]),
                         SUBLET_ERR_INVALID_ARGUMENT);
        assert_true(sublet_memory_fraction_get(e.a) == f0);
        expect_stats_identical(e.a, &before);
        CHECK(e.a);
    }
    churn(&e, &c, 300);
    for (int k = 0; k < 24; k++)
        if (c.live[k])
            h_free(e.a, c.live[k]);
    expect_all_returned(&e);
    h_env_fini(&e);
}

static void test_cuda_malloc_async_refused_at_create(void **state)
{
    (void)state;
    sublet_backend *sim = NULL;
    assert_int_equal(sublet_sim_create(SIM_CAP, &sim), SUBLET_OK);
    sublet_options o = {.backend = sim, .conf = "backend:cudaMallocAsync"};
    sublet_allocator *a = (sublet_allocator *)&o;
    char err[512] = "";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    assert_null(a);
    assert_non_null(strstr(err, "cudaMallocAsync"));
    o.conf = "backend:native";
    assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err), SUBLET_OK);
    sublet_allocator_destroy(a);
    assert_int_equal(sublet_sim_used(sim), 0);
    sublet_backend_destroy(sim);
}

/* ---- a backend without virtual memory ---------------------------------------------------- */

/* Forwards everything but the VMM ops (NULL) to a sim. */
typedef struct novmm_backend {
    sublet_backend base;
    sublet_backend *sim;
} novmm_backend;

static sublet_backend *sim_of(sublet_backend *b) { return ((novmm_backend *)b)->sim; }

static sublet_status nv_segment_alloc(sublet_backend *b, uint64_t size, uint64_t hint,
                                      uint64_t *addr_out)
{
    sublet_backend *s = sim_of(b);
    return s->ops->segment_alloc(s, size, hint, addr_out);
}

static sublet_status nv_segment_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sublet_backend *s = sim_of(b);
    return s->ops->segment_free(s, addr, size);
}

static sublet_status nv_event_create(sublet_backend *b, sublet_event **ev)
{
    sublet_backend *s = sim_of(b);
    return s->ops->event_create(s, ev);
}

static sublet_status nv_event_destroy(sublet_backend *b, sublet_event *ev)
{
    sublet_backend *s = sim_of(b);
    return s->ops->event_destroy(s, ev);
}

static sublet_status nv_event_record(sublet_backend *b, sublet_event *ev, sublet_stream st)
{
    sublet_backend *s = sim_of(b);
    return s->ops->event_record(s, ev, st);
}

static sublet_status nv_event_query(sublet_backend *b, sublet_event *ev, int *done)
{
    sublet_backend *s = sim_of(b);
    return s->ops->event_query(s, ev, done);
}

static sublet_status nv_event_synchronize(sublet_backend *b, sublet_event *ev)
{
    sublet_backend *s = sim_of(b);
    return s->ops->event_synchronize(s, ev);
}

static sublet_status nv_mem_info(sublet_backend *b, uint64_t *free_out, uint64_t *total_out)
{
    sublet_backend *s = sim_of(b);
    return s->ops->mem_info(s, free_out, total_out);
}

static void nv_destroy(sublet_backend *b) { (void)b; }

static const sublet_backend_ops NOVMM_OPS = {
    .segment_alloc = nv_segment_alloc,
    .segment_free = nv_segment_free,
    .event_create = nv_event_create,
    .event_destroy = nv_event_destroy,
    .event_record = nv_event_record,
    .event_query = nv_event_query,
    .event_synchronize = nv_event_synchronize,
    .mem_info = nv_mem_info,
    .destroy = nv_destroy, /* va_reserve, va_release, va_map, va_unmap: NULL */
};

static void test_expandable_without_vmm(void **state)
{
    (void)state;
    sublet_backend *sim = NULL, *fault = NULL;
    assert_int_equal(sublet_sim_create(SIM_CAP, &sim), SUBLET_OK);
    novmm_backend nv = {.base = {.ops = &NOVMM_OPS, .name = "novmm", .device = 0}, .sim = sim};
    assert_int_equal(sublet_fault_create(&nv.base, &fault), SUBLET_OK);
    assert_null(fault->ops->va_map); /* the wrapper keeps the capability as it is */
    sublet_backend *backends[] = {&nv.base, fault};
    static const char *const need_vmm[] = {"expandable_segments:True", "policy:stitch",
                                           "max_split_size_mb:40,expandable_segments:True"};
    for (size_t b = 0; b < 2; b++) {
        /* at creation */
        for (size_t k = 0; k < sizeof need_vmm / sizeof need_vmm[0]; k++) {
            sublet_options o = {.backend = backends[b], .conf = need_vmm[k]};
            sublet_allocator *a = (sublet_allocator *)&o;
            char err[512] = "";
            assert_int_equal(sublet_allocator_create(&o, &a, err, sizeof err),
                             SUBLET_ERR_UNSUPPORTED);
            assert_null(a);
            assert_non_null(strstr(err, "expandable_segments not supported"));
        }
        /* at run time, with blocks live: refused, nothing changes */
        h_env e = {.inner = sim, .be = backends[b]};
        sublet_options o = {.backend = backends[b], .conf = ""};
        char err[512];
        assert_int_equal(sublet_allocator_create(&o, &e.a, err, sizeof err), SUBLET_OK);
        churn_state c = {.rng = 77 + b};
        churn(&e, &c, 200);
        for (size_t k = 0; k < sizeof need_vmm / sizeof need_vmm[0]; k++)
            apply_refused(&e, need_vmm[k], SUBLET_ERR_UNSUPPORTED,
                          "expandable_segments not supported");
        apply_ok(&e, "max_split_size_mb:40");
        apply_ok(&e, "expandable_segments:False");
        churn(&e, &c, 200);
        for (int k = 0; k < 24; k++)
            if (c.live[k])
                h_free(e.a, c.live[k]);
        expect_all_returned(&e);
        CHECK(e.a);
        sublet_allocator_destroy(e.a);
    }
    sublet_backend_destroy(fault);
    sublet_backend_destroy(sim);
}

/* The all-ones address.  The pointer map (src/index.c) marks its empty
 * slots with the key UINT64_MAX, so sl_ptrmap_get(UINT64_MAX) "finds" the
 * first empty slot of its probe chain and returns that slot's value: never
 * initialised (malloc) or left behind by a backward-shift deletion (a block
 * that moved, maybe live).  sublet_free and sublet_record_stream then act on
 * that block: a crash, or a live block freed / recorded by a pointer that
 * was never its.  Expected: SUBLET_ERR_INVALID_POINTER, nothing changed. */
static void test_all_ones_pointer(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_CAP, "");
    void *live[64];
    for (int i = 0; i < 64; i++) /* fill and churn the map a little */
        live[i] = h_malloc(e.a, (uint64_t)(i + 1) * 4096, 0);
    for (int i = 0; i < 64; i += 2)
        h_free(e.a, live[i]);
    refused_free(e.a, (void *)(uintptr_t)UINTPTR_MAX, SUBLET_ERR_INVALID_POINTER);
    refused_record(e.a, (void *)(uintptr_t)UINTPTR_MAX, SUBLET_ERR_INVALID_POINTER);
    for (int i = 1; i < 64; i += 2)
        h_free(e.a, live[i]);
    expect_all_returned(&e);
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_free),
        cmocka_unit_test(test_double_free_expandable),
        cmocka_unit_test(test_foreign_pointers),
        cmocka_unit_test(test_other_device),
        cmocka_unit_test(test_interior_pointer),
        cmocka_unit_test(test_record_stream_on_freed_block),
        cmocka_unit_test(test_size_overflow),
        cmocka_unit_test(test_zero_size),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_settings_while_live),
        cmocka_unit_test(test_cuda_malloc_async_refused_at_create),
        cmocka_unit_test(test_expandable_without_vmm),
        cmocka_unit_test(test_all_ones_pointer), /* last: it may crash the process */
    };
    if (getenv("SUBLET_TEST_FILTER"))
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
