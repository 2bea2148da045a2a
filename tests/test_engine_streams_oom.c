/* sublet — engine tests: streams and events (record_stream, the trace of
 * free_requested / free_completed), the OOM path and its messages, misuse of
 * free, and fault injection in the backend.
 *
 * Ports of test_record_stream, test_record_stream_on_shifted_view,
 * test_caching_allocator_record_stream_oom, test_out_of_memory,
 * test_out_of_memory_retry, test_raises_oom and test_notifies_oom (reference
 * docs/rules.md §10).  sublet_check() runs after every operation (support/harness.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/forward.h"
#include "support/harness.h"

#define SIM_BIG (80 * GiB)

static const char OOM_TAIL[] =
    "If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/"
    "cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";

static const char *oom_msg(sublet_allocator *a)
{
    static char buf[4096];
    size_t n = sublet_oom_message(a, buf, sizeof buf);
    assert_true(n < sizeof buf);
    return buf;
}

/* ---- trace recorder --------------------------------------------------------------- */

typedef struct trace_ev {
    sublet_action act;
    uint64_t addr, size;
    sublet_stream stream;
} trace_ev;

typedef struct trace_log {
    trace_ev ev[256];
    size_t n;
} trace_log;

static void trace_cb(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    trace_log *t = user;
    if (t->n < 256)
        t->ev[t->n] = (trace_ev){act, addr, size, stream};
    t->n++;
}

static size_t trace_count(const trace_log *t, sublet_action act)
{
    size_t c = 0;
    for (size_t i = 0; i < t->n && i < 256; i++)
        c += t->ev[i].act == act;
    return c;
}

/* ---- record_stream (§4.1–§4.4) -------------------------------------------------------- */

static void test_record_stream(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    const sublet_stream side = 1, cur = 0;
    /* tmp allocated on the side stream, used on the current one */
    void *tmp = h_malloc(e.a, 16, side);
    uint64_t ptr = h_addr(tmp);
    h_record(e.a, tmp, cur);
    h_free(e.a, tmp);
    assert_int_equal(h_stat(e.a, "allocation.all.current"), 0);
    assert_int_equal(h_stat(e.a, "active.all.current"), 1);
    void *tmp2 = h_malloc(e.a, 16, side);
    assert_int_not_equal(h_addr(tmp2), ptr); /* "allocation re-used to soon" */
    /* the current stream's work completes: reused on its own stream */
    sublet_sim_stream_complete(e.inner, cur);
    void *tmp3 = h_malloc(e.a, 16, side);
    assert_int_equal(h_addr(tmp3), ptr); /* "allocation not re-used" */
    h_free(e.a, tmp2);
    h_free(e.a, tmp3);

    /* recording the allocation stream itself is ignored: freed at once */
    void *x = h_malloc(e.a, 16, side);
    h_record(e.a, x, side);
    h_free(e.a, x);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);
    void *y = h_malloc(e.a, 16, side);
    assert_ptr_equal(y, x);
    h_free(e.a, y);

    /* several streams: reusable only when all of them are done; recording the
     * same stream twice makes one use */
    void *z = h_malloc(e.a, 16, side);
    h_record(e.a, z, 2);
    h_record(e.a, z, 3);
    h_record(e.a, z, 2);
    h_free(e.a, z);
    sublet_sim_stream_complete(e.inner, 2);
    void *w = h_malloc(e.a, 16, side);
    assert_ptr_not_equal(w, z);
    assert_int_equal(h_stat(e.a, "active.all.current"), 2);
    sublet_sim_stream_complete(e.inner, 3);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 1);
    void *v = h_malloc(e.a, 16, side);
    assert_ptr_equal(v, z);
    h_free(e.a, v);
    h_free(e.a, w);

    /* work queued after the record is not waited for: completion of the
     * stream before the free still leaves the free's event pending */
    void *u = h_malloc(e.a, 16, side);
    h_record(e.a, u, 4);
    sublet_sim_stream_complete(e.inner, 4);
    h_free(e.a, u); /* the event is recorded now */
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 1);
    sublet_sim_stream_complete(e.inner, 4);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);

    /* empty_cache waits for pending frees */
    void *q = h_malloc(e.a, 16, side);
    h_record(e.a, q, 5);
    h_free(e.a, q);
    int64_t sync0 = h_stat(e.a, "num_sync_all_streams");
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), sync0 + 1);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);
    assert_int_equal(h_stat(e.a, "segment.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

static void test_record_stream_on_shifted_view(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    const sublet_stream stream_alloc = 1, stream_record = 2;
    void *base = h_malloc(e.a, 400, stream_alloc);
    void *view = (char *)base + 20; /* storage offset > 0 */
    h_record(e.a, view, stream_record);
    h_free(e.a, base);
    sublet_sim_stream_complete(e.inner, stream_alloc); /* stream_alloc.synchronize() */
    void *try_realloc = h_malloc(e.a, 400, stream_alloc);
    assert_ptr_not_equal(try_realloc, base);
    sublet_sim_stream_complete(e.inner, stream_record);
    void *again = h_malloc(e.a, 400, stream_alloc);
    assert_ptr_equal(again, base);
    h_free(e.a, again);
    h_free(e.a, try_realloc);
    h_env_fini(&e);
}

/* sublet_trace_set_actions: only the actions asked for reach the callback,
 * in the order they happen; all of them again with SUBLET_TRACE_ALL. */
static void test_trace_actions(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    trace_log t = {.n = 0};
    sublet_trace_set(e.a, trace_cb, &t);
    sublet_trace_set_actions(e.a, 1u << SUBLET_ACT_SEGMENT_ALLOC | 1u << SUBLET_ACT_SEGMENT_FREE);
    void *p = h_malloc(e.a, 1000, 0), *q = h_malloc(e.a, 3 * MiB, 0);
    h_free(e.a, p);
    h_free(e.a, q);
    h_empty_cache(e.a);
    assert_int_equal(t.n, 4);
    assert_int_equal(t.ev[0].act, SUBLET_ACT_SEGMENT_ALLOC);
    assert_int_equal(t.ev[0].size, 2 * MiB);
    assert_int_equal(t.ev[1].act, SUBLET_ACT_SEGMENT_ALLOC);
    assert_int_equal(t.ev[1].size, 20 * MiB);
    assert_int_equal(t.ev[2].act, SUBLET_ACT_SEGMENT_FREE);
    assert_int_equal(t.ev[3].act, SUBLET_ACT_SEGMENT_FREE);
    t.n = 0;
    sublet_trace_set_actions(e.a, 0);
    h_free(e.a, h_malloc(e.a, 1000, 0));
    assert_int_equal(t.n, 0);
    sublet_trace_set_actions(e.a, SUBLET_TRACE_ALL);
    h_free(e.a, h_malloc(e.a, 1000, 0));
    assert_int_equal(t.n, 3); /* alloc, free_requested, free_completed: the segment is cached */
    assert_int_equal(t.ev[0].act, SUBLET_ACT_ALLOC);
    assert_int_equal(t.ev[2].act, SUBLET_ACT_FREE_COMPLETED);
    sublet_trace_set(e.a, NULL, NULL);
    h_env_fini(&e);
}

static void test_trace_free_requested_completed(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    trace_log t = {.n = 0};
    sublet_trace_set(e.a, trace_cb, &t);
    void *p = h_malloc(e.a, 1000, 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.ev[0].act, SUBLET_ACT_SEGMENT_ALLOC);
    assert_int_equal(t.ev[0].size, 2 * MiB);
    assert_int_equal(t.ev[1].act, SUBLET_ACT_ALLOC);
    assert_int_equal(t.ev[1].addr, h_addr(p));
    assert_int_equal(t.ev[1].size, 1000); /* the requested size */

    /* without stream uses: both at once, in order */
    h_free(e.a, p);
    assert_int_equal(t.n, 4);
    assert_int_equal(t.ev[2].act, SUBLET_ACT_FREE_REQUESTED);
    assert_int_equal(t.ev[2].addr, h_addr(p));
    assert_int_equal(t.ev[2].size, 1000);
    assert_int_equal(t.ev[3].act, SUBLET_ACT_FREE_COMPLETED);
    assert_int_equal(t.ev[3].addr, h_addr(p));

    /* with a pending use: free_completed waits for the event */
    void *q = h_malloc(e.a, 3000, 0);
    h_record(e.a, q, 8);
    t.n = 0;
    h_free(e.a, q);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.ev[0].act, SUBLET_ACT_FREE_REQUESTED);
    h_process_events(e.a);
    assert_int_equal(t.n, 1);
    sublet_sim_stream_complete(e.inner, 8);
    assert_int_equal(t.n, 1); /* nothing happens until the allocator looks */
    void *r = h_malloc(e.a, 100, 0); /* malloc processes events first */
    assert_int_equal(t.n, 3);
    assert_int_equal(t.ev[1].act, SUBLET_ACT_FREE_COMPLETED);
    assert_int_equal(t.ev[1].addr, h_addr(q));
    assert_int_equal(t.ev[1].size, 3000);
    assert_int_equal(t.ev[2].act, SUBLET_ACT_ALLOC);
    h_free(e.a, r);

    t.n = 0;
    h_empty_cache(e.a);
    assert_int_equal(trace_count(&t, SUBLET_ACT_SEGMENT_FREE), 1);
    assert_int_equal(t.ev[t.n - 1].act, SUBLET_ACT_SEGMENT_FREE);
    sublet_trace_set(e.a, NULL, NULL);
    h_env_fini(&e);
}

/* test_caching_allocator_record_stream_oom: the OOM path synchronises the
 * events and frees the pending blocks */
static void test_record_stream_oom(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 2 * GiB, "");
    const sublet_stream stream = 1;
    const uint64_t sz = 40 * 1024 * 1024 * 4; /* 160 MiB */
    void *y = h_malloc(e.a, sz, stream);
    for (int i = 0; i < 100; i++) {
        void *x = h_malloc(e.a, sz, 0);
        h_record(e.a, x, stream);
        h_free(e.a, x);
    }
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    assert_true(h_stat(e.a, "num_alloc_retries") > 0);
    assert_true(h_stat(e.a, "num_sync_all_streams") > 0);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), sz);
    h_free(e.a, y);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

/* ---- OOM (§3.7) --------------------------------------------------------------------- */

typedef struct oom_seen {
    int calls;
    int device;
    uint64_t alloc_size, limit, device_free;
} oom_seen;

static void oom_cb(void *user, int device, uint64_t alloc_size, uint64_t limit,
                   uint64_t device_free)
{
    oom_seen *o = user;
    o->calls++;
    o->device = device;
    o->alloc_size = alloc_size;
    o->limit = limit;
    o->device_free = device_free;
}

static void test_out_of_memory(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    oom_seen seen = {0};
    sublet_oom_observer_set(e.a, oom_cb, &seen);
    void *tensor = h_malloc(e.a, 1024, 0);
    void *p = NULL;
    assert_int_equal(h_try_malloc(e.a, UINT64_C(800000000) * GiB, 0, &p), SUBLET_ERR_OOM);
    assert_null(p);
    const char *msg = oom_msg(e.a);
    assert_non_null(strstr(msg, "Tried to allocate 800000000.00 GiB. GPU 0 has a total "
                                "capacity of"));
    assert_true(strncmp(msg, "CUDA out of memory. ", 20) == 0);
    assert_null(strstr(msg, "allowed; "));
    assert_int_equal(h_stat(e.a, "num_ooms"), 1);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.device, 0);
    assert_int_equal(seen.alloc_size, UINT64_C(800000000) * GiB);
    assert_int_equal(seen.limit, SIM_BIG);
    assert_int_equal(seen.device_free, SIM_BIG - 2 * MiB);

    /* >= 2^60: refused before the allocator proper */
    assert_int_equal(h_try_malloc(e.a, UINT64_C(1) << 60, 0, &p), SUBLET_ERR_OOM);
    assert_null(p);
    assert_non_null(strstr(oom_msg(e.a), "Tried to allocate more than 1EB memory"));
    assert_int_equal(h_try_malloc(e.a, UINT64_MAX, 0, &p), SUBLET_ERR_OOM);
    assert_non_null(strstr(oom_msg(e.a), "Tried to allocate more than 1EB memory"));
    /* just below the bound goes through the allocator */
    assert_int_equal(h_try_malloc(e.a, (UINT64_C(1) << 60) - 1, 0, &p), SUBLET_ERR_OOM);
    assert_non_null(strstr(oom_msg(e.a), "Tried to allocate 1073741824.00 GiB"));

    /* the allocator still works (tensor.fill_(1)) */
    void *q = h_malloc(e.a, 1024, 0);
    h_free(e.a, q);
    h_free(e.a, tensor);

    /* test_raises_oom: 1 TiB, also with max_split_size_mb:1024 */
    assert_int_equal(h_try_malloc(e.a, 1024 * GiB, 0, &p), SUBLET_ERR_OOM);
    h_env_fini(&e);
    h_env_init(&e, H_SIM, SIM_BIG, "max_split_size_mb:1024");
    assert_int_equal(h_try_malloc(e.a, 1024 * GiB, 0, &p), SUBLET_ERR_OOM);
    assert_int_equal(h_stat(e.a, "num_ooms"), 1);
    h_env_fini(&e);
}

static void test_oom_message_exact(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 64 * MiB, "");
    oom_seen seen = {0};
    sublet_oom_observer_set(e.a, oom_cb, &seen);
    trace_log t = {.n = 0};
    sublet_trace_set(e.a, trace_cb, &t);
    void *full = h_malloc(e.a, 64 * MiB, 0);
    void *p = NULL;
    t.n = 0;
    assert_int_equal(h_try_malloc(e.a, 1, 0, &p), SUBLET_ERR_OOM);
    char want[1024];
    snprintf(want, sizeof want,
             "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
             "64.00 MiB of which 0 bytes is free. Of the allocated memory 64.00 MiB is "
             "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. %s",
             OOM_TAIL);
    const char *msg = oom_msg(e.a);
    assert_true(strncmp(msg, want, strlen(want)) == 0);
    assert_true(msg[strlen(want)] == '\0' || msg[strlen(want)] == '\n');
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.alloc_size, 2 * MiB);
    assert_int_equal(seen.limit, 64 * MiB);
    assert_int_equal(seen.device_free, 0);
    /* trace: oom with the device's free bytes and the rounded size */
    assert_int_equal(trace_count(&t, SUBLET_ACT_OOM), 1);
    assert_int_equal(t.ev[t.n - 1].act, SUBLET_ACT_OOM);
    assert_int_equal(t.ev[t.n - 1].addr, 0);
    assert_int_equal(t.ev[t.n - 1].size, 512);
    sublet_trace_set(e.a, NULL, NULL);
    h_free(e.a, full);

    /* with a fraction: "<limit> allowed; " and the observer gets the limit */
    h_empty_cache(e.a);
    assert_int_equal(sublet_memory_fraction_set(e.a, 0.5), SUBLET_OK);
    assert_int_equal(h_try_malloc(e.a, 40 * MiB, 0, &p), SUBLET_ERR_OOM);
    msg = oom_msg(e.a);
    assert_non_null(strstr(msg, "Tried to allocate 40.00 MiB. GPU 0 has a total capacity of "
                                "64.00 MiB of which 64.00 MiB is free. 32.00 MiB allowed; Of "
                                "the allocated memory 0 bytes is allocated by PyTorch"));
    assert_int_equal(seen.calls, 2);
    assert_int_equal(seen.limit, 32 * MiB);
    assert_int_equal(seen.device_free, 64 * MiB);
    assert_int_equal(h_stat(e.a, "num_ooms"), 2);
    /* removing the limit removes the phrase */
    assert_int_equal(sublet_memory_fraction_set(e.a, 1.0), SUBLET_OK);
    assert_int_equal(h_try_malloc(e.a, 100 * MiB, 0, &p), SUBLET_ERR_OOM);
    assert_null(strstr(oom_msg(e.a), "allowed; "));
    assert_int_equal(h_stat(e.a, "num_ooms"), 3);
    sublet_oom_observer_set(e.a, NULL, NULL);
    assert_int_equal(h_try_malloc(e.a, 100 * MiB, 0, &p), SUBLET_ERR_OOM);
    assert_int_equal(seen.calls, 3);
    h_env_fini(&e);
}

/* sublet's addendum: fragmentation vs exhaustion */
static void test_oom_diagnosis(void **state)
{
    (void)state;
    h_env e;
    /* 5 × 20 MiB segments fill the device, each [9 | 9 | 2 free] */
    h_env_init(&e, H_SIM, 100 * MiB, "");
    void *p[10];
    for (int i = 0; i < 10; i++)
        p[i] = h_malloc(e.a, 9 * MiB, 0);
    assert_int_equal(h_nsegments(e.a), 5);
    assert_int_equal(sublet_sim_used(e.inner), 100 * MiB);
    void *r = NULL;
    assert_int_equal(h_try_malloc(e.a, 30 * MiB, 0, &r), SUBLET_ERR_OOM);
    const char *msg = oom_msg(e.a);
    assert_non_null(strstr(msg, "\nsublet: exhaustion"));
    assert_null(strstr(msg, "fragmentation:"));
    /* free the first block of each segment: 55 MiB free, largest piece 9 MiB */
    for (int i = 0; i < 10; i += 2)
        h_free(e.a, p[i]);
    assert_int_equal(h_stat(e.a, "inactive_split_bytes.all.current"), 55 * MiB);
    assert_int_equal(h_try_malloc(e.a, 30 * MiB, 0, &r), SUBLET_ERR_OOM);
    msg = oom_msg(e.a);
    assert_non_null(strstr(msg, "\nsublet: fragmentation"));
    assert_non_null(strstr(msg, "the largest free block of its pool and stream is 9.00 MiB"));
    assert_non_null(strstr(msg, "(10 free blocks there)"));
    assert_non_null(strstr(msg, "and 55.00 MiB is reserved by PyTorch but unallocated"));
    /* but 9 MiB fits a free piece */
    void *fit = h_malloc(e.a, 9 * MiB, 0);
    h_free(e.a, fit);
    for (int i = 1; i < 10; i += 2)
        h_free(e.a, p[i]);
    h_empty_cache(e.a);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

/* test_out_of_memory_retry */
static void test_out_of_memory_retry(void **state)
{
    (void)state;
    const uint64_t C = 8 * GiB;
    h_env e;
    h_env_init(&e, H_SIM, C, "");
    void *context = h_malloc(e.a, 1, 0); /* stands for the CUDA context */
    h_empty_cache(e.a);
    uint64_t size = (uint64_t)((double)C * 0.5);
    void *a = h_malloc(e.a, size, 0);
    void *b = NULL;
    assert_int_equal(h_try_malloc(e.a, size, 0, &b), SUBLET_ERR_OOM);
    assert_non_null(strstr(oom_msg(e.a), "Tried to allocate"));
    h_free(e.a, a);
    b = h_malloc(e.a, size, 0);
    h_free(e.a, b);
    h_empty_cache(e.a);
    sublet_stats_reset_peak(e.a);
    h_free(e.a, context);
    h_env_fini(&e);
}

/* ---- zero-size and misuse ---------------------------------------------------------------- */

static void test_zero_size(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    trace_log t = {.n = 0};
    sublet_trace_set(e.a, trace_cb, &t);
    sublet_stats before, after;
    sublet_stats_read(e.a, &before);
    void *p = (void *)&t;
    assert_int_equal(h_try_malloc(e.a, 0, 0, &p), SUBLET_OK);
    assert_null(p);
    assert_int_equal(h_try_malloc(e.a, 0, 3, &p), SUBLET_OK);
    assert_null(p);
    assert_int_equal(h_try_free(e.a, NULL), SUBLET_OK);
    sublet_stats_read(e.a, &after);
    h_stats_equal(&before, &after);
    assert_int_equal(t.n, 0);
    assert_int_equal(h_nsegments(e.a), 0);
    sublet_trace_set(e.a, NULL, NULL);
    h_env_fini(&e);
}

static void expect_misuse(h_env *e, void *ptr, sublet_status want)
{
    sublet_stats before, after;
    sublet_stats_read(e->a, &before);
    assert_int_equal(h_try_free(e->a, ptr), want);
    sublet_stats_read(e->a, &after);
    h_stats_equal(&before, &after);
}

static void test_misuse(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    void *a = h_malloc(e.a, 5 * MiB, 0), *b = h_malloc(e.a, 5 * MiB, 0);
    void *s = h_malloc(e.a, 700, 0);
    /* unknown pointers */
    expect_misuse(&e, (void *)(uintptr_t)0x1234, SUBLET_ERR_INVALID_POINTER);
    expect_misuse(&e, (char *)a + 40 * MiB, SUBLET_ERR_INVALID_POINTER);
    /* interior pointers */
    expect_misuse(&e, (char *)a + 512, SUBLET_ERR_INTERIOR_POINTER);
    expect_misuse(&e, (char *)b + 5 * MiB - 1, SUBLET_ERR_INTERIOR_POINTER);
    expect_misuse(&e, (char *)s + 1, SUBLET_ERR_INTERIOR_POINTER);
    /* double free, plain */
    h_free(e.a, a);
    expect_misuse(&e, a, SUBLET_ERR_DOUBLE_FREE);
    /* double free after the block merged into a neighbour */
    h_free(e.a, b);
    expect_misuse(&e, b, SUBLET_ERR_DOUBLE_FREE);
    expect_misuse(&e, a, SUBLET_ERR_DOUBLE_FREE);
    /* double free while the first free waits on another stream */
    h_record(e.a, s, 4);
    h_free(e.a, s);
    expect_misuse(&e, s, SUBLET_ERR_DOUBLE_FREE);
    /* after the segment went back to the device the pointer is unknown */
    h_empty_cache(e.a);
    expect_misuse(&e, a, SUBLET_ERR_INVALID_POINTER);
    expect_misuse(&e, s, SUBLET_ERR_INVALID_POINTER);
    assert_int_equal(h_nsegments(e.a), 0);
    /* record_stream on memory the allocator does not own changes nothing */
    sublet_stats before, after;
    sublet_stats_read(e.a, &before);
    (void)h_try_record(e.a, (void *)(uintptr_t)0x1234, 3);
    (void)h_try_record(e.a, a, 3);
    sublet_stats_read(e.a, &after);
    h_stats_equal(&before, &after);
    assert_int_equal(h_try_record(e.a, NULL, 3), SUBLET_OK);
    h_env_fini(&e);
}

/* ---- fault injection ------------------------------------------------------------------ */

/* A workload of mixed sizes, frees and empty_cache; every malloc must
 * succeed or report OOM, the invariants hold after every step, and in the
 * end everything goes back to the device. */
static int fault_workload(h_env *e)
{
    int ooms = 0;
    static const uint64_t sizes[] = {100,      4096,     MiB,      3 * MiB, 12 * MiB,
                                     700,      30 * MiB, 5 * MiB,  2 * MiB, 64 * MiB,
                                     MiB + 1,  9000,     18 * MiB, 512,     7 * MiB};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    void *live[32] = {0};
    uint64_t rng = 42;
    for (int step = 0; step < 200; step++) {
        size_t slot = (size_t)h_rand_range(&rng, 0, 32);
        uint64_t op = h_rand_range(&rng, 0, 20);
        if (op == 0) {
            h_empty_cache(e->a);
        } else if (live[slot]) {
            if (op == 1) /* a pending free now and then */
                h_record(e->a, live[slot], 5);
            h_free(e->a, live[slot]);
            live[slot] = NULL;
            if (op == 2)
                sublet_sim_stream_complete(e->inner, 5);
        } else {
            uint64_t n = sizes[h_rand_range(&rng, 0, nsizes)];
            sublet_stream s = h_rand_range(&rng, 0, 4) == 0 ? 2 : 0;
            void *p = NULL;
            sublet_status st = h_try_malloc(e->a, n, s, &p);
            assert_true(st == SUBLET_OK || st == SUBLET_ERR_OOM);
            ooms += st == SUBLET_ERR_OOM;
            if (st == SUBLET_OK) {
                uint64_t size = 0;
                h_block_at(e->a, p, NULL, &size, NULL, __FILE__, __LINE__);
                assert_true(size >= n);
            }
            live[slot] = p;
        }
    }
    for (int i = 0; i < 32; i++)
        if (live[i])
            h_free(e->a, live[i]);
    h_empty_cache(e->a);
    assert_int_equal(h_stat(e->a, "segment.all.current"), 0);
    assert_int_equal(h_stat(e->a, "allocation.all.current"), 0);
    assert_int_equal(h_stat(e->a, "active.all.current"), 0);
    assert_int_equal(sublet_sim_used(e->inner), 0);
    assert_int_equal(sublet_sim_segments(e->inner), 0);
    return ooms;
}

static void test_fault_segment_alloc(void **state)
{
    (void)state;
    h_env e;
    /* a clean run counts the segment allocations */
    h_env_init(&e, H_SIM_FAULT, 256 * MiB, "");
    int clean_ooms = fault_workload(&e);
    uint64_t calls = sublet_fault_calls(e.fault, SUBLET_FAULT_SEGMENT_ALLOC);
    assert_true(calls > 10);
    h_env_fini(&e);

    uint64_t total_injected = 0;
    for (uint64_t n = 1; n <= calls + 1; n++) {
        h_env_init(&e, H_SIM_FAULT, 256 * MiB, "");
        sublet_fault_fail_nth(e.fault, SUBLET_FAULT_SEGMENT_ALLOC, n);
        fault_workload(&e);
        total_injected += sublet_fault_injected(e.fault, SUBLET_FAULT_SEGMENT_ALLOC);
        h_env_fini(&e);
    }
    assert_true(total_injected >= calls);
    print_message("fault workload: %llu segment allocations, %d OOMs when clean\n",
                  (unsigned long long)calls, clean_ooms);
    for (uint64_t n = 1; n <= 5; n++) {
        h_env_init(&e, H_SIM_FAULT, 256 * MiB, "max_split_size_mb:40");
        sublet_fault_fail_every(e.fault, SUBLET_FAULT_SEGMENT_ALLOC, n);
        int ooms = fault_workload(&e);
        assert_true(sublet_fault_injected(e.fault, SUBLET_FAULT_SEGMENT_ALLOC) > 0);
        if (n == 1)
            assert_true(ooms > clean_ooms);
        h_env_fini(&e);
    }
}

/* A failed device allocation is retried after the full release */
static void test_fault_retry_counts(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM_FAULT, GiB, "");
    void *c = h_malloc(e.a, 5 * MiB, 0);
    h_free(e.a, c); /* a cached segment for the release to free */
    sublet_fault_fail_nth(e.fault, SUBLET_FAULT_SEGMENT_ALLOC, 1);
    sublet_stats_reset_accumulated(e.a);
    void *p = h_malloc(e.a, 30 * MiB, 0);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 1);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 1);
    assert_int_equal(h_stat(e.a, "num_device_free"), 1);
    assert_int_equal(h_stat(e.a, "num_device_alloc"), 1);
    assert_int_equal(h_stat(e.a, "num_ooms"), 0);
    h_free(e.a, p);
    /* both attempts fail: OOM */
    sublet_fault_fail_every(e.fault, SUBLET_FAULT_SEGMENT_ALLOC, 1);
    void *q = NULL;
    assert_int_equal(h_try_malloc(e.a, 50 * MiB, 0, &q), SUBLET_ERR_OOM);
    assert_int_equal(sublet_fault_injected(e.fault, SUBLET_FAULT_SEGMENT_ALLOC), 2);
    assert_int_equal(h_stat(e.a, "num_ooms"), 1);
    /* cached blocks still serve */
    sublet_fault_fail_every(e.fault, SUBLET_FAULT_SEGMENT_ALLOC, 0);
    h_env_fini(&e);
}

static void test_fault_event_create(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM_FAULT, GiB, "");
    void *p = h_malloc(e.a, 3 * MiB, 0);
    h_record(e.a, p, 5);
    h_record(e.a, p, 6);
    sublet_fault_fail_nth(e.fault, SUBLET_FAULT_EVENT_CREATE, 2);
    sublet_stats before, after;
    sublet_stats_read(e.a, &before);
    sublet_status st = h_try_free(e.a, p);
    assert_int_not_equal(st, SUBLET_OK);
    sublet_stats_read(e.a, &after);
    h_stats_equal(&before, &after);
    /* still allocated and intact */
    uint64_t base = 0, size = 0, req = 0;
    h_block_at(e.a, p, &base, &size, &req, __FILE__, __LINE__);
    assert_int_equal(base, h_addr(p));
    assert_int_equal(size, 3 * MiB);
    assert_int_equal(req, 3 * MiB);
    void *other = h_malloc(e.a, 3 * MiB, 0);
    assert_ptr_not_equal(other, p);
    h_free(e.a, other);
    sublet_fault_fail_nth(e.fault, SUBLET_FAULT_EVENT_CREATE, 0);
    /* a later free succeeds; the block waits for both streams */
    h_free(e.a, p);
    assert_int_equal(h_stat(e.a, "allocation.all.current"), 0);
    assert_int_equal(h_stat(e.a, "active.all.current"), 1);
    sublet_sim_stream_complete(e.inner, 5);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 1);
    sublet_sim_stream_complete(e.inner, 6);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);

    /* a single use, first create fails */
    void *q = h_malloc(e.a, 100, 0);
    h_record(e.a, q, 7);
    sublet_fault_fail_every(e.fault, SUBLET_FAULT_EVENT_CREATE, 1);
    /* the pool holds the two events used above: they serve without a create */
    h_free(e.a, q);
    sublet_sim_stream_complete(e.inner, 7);
    h_process_events(e.a);
    void *r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = h_malloc(e.a, 100, 0);
        for (sublet_stream s = 10; s < 13; s++)
            h_record(e.a, r[i], s);
    }
    /* three uses, two pooled events: the third needs a create, which fails */
    sublet_stats_read(e.a, &before);
    assert_int_not_equal(h_try_free(e.a, r[0]), SUBLET_OK);
    sublet_stats_read(e.a, &after);
    h_stats_equal(&before, &after);
    sublet_fault_fail_every(e.fault, SUBLET_FAULT_EVENT_CREATE, 0);
    for (int i = 0; i < 4; i++)
        h_free(e.a, r[i]);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

/* many streams on one block (the uses list and the event batch grow past
 * their inline sizes); events come back to the pool and are reused */
static void test_record_many_streams(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM_FAULT, SIM_BIG, "");
    for (int round = 0; round < 2; round++) {
        void *p = h_malloc(e.a, 5 * MiB, 0);
        for (sublet_stream s = 1; s <= 12; s++)
            h_record(e.a, p, s);
        h_record(e.a, p, 0); /* its own stream: ignored */
        uint64_t creates0 = sublet_fault_calls(e.fault, SUBLET_FAULT_EVENT_CREATE);
        h_free(e.a, p);
        /* 12 events: created in round 0, all taken from the pool in round 1 */
        assert_int_equal(sublet_fault_calls(e.fault, SUBLET_FAULT_EVENT_CREATE) - creates0,
                         round == 0 ? 12 : 0);
        for (sublet_stream s = 12; s >= 2; s--) {
            sublet_sim_stream_complete(e.inner, s);
            h_process_events(e.a);
            assert_int_equal(h_stat(e.a, "active.all.current"), 1);
            void *q = h_malloc(e.a, 5 * MiB, 0);
            assert_ptr_not_equal(q, p);
            h_free(e.a, q);
        }
        sublet_sim_stream_complete(e.inner, 1);
        void *r = h_malloc(e.a, 5 * MiB, 0);
        assert_ptr_equal(r, p);
        assert_int_equal(h_stat(e.a, "active.all.current"), 1);
        h_free(e.a, r);
    }
    h_env_fini(&e);
}

/* ---- completions: drained by name or by a walk, the same frees in the same order ---- */

typedef struct order_log {
    trace_ev *ev;
    size_t n, cap;
} order_log;

static void order_cb(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    order_log *t = user;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
        assert_non_null(t->ev);
    }
    t->ev[t->n++] = (trace_ev){act, addr, size, stream};
}

/* Blocks freed after a record_stream on streams of their own, completed in
 * batches of 1 to 48 streams in a random order (so that the completions
 * either fit the engine's list of 32 or overflow it), with mallocs between
 * them: the trace of every engine event must be the same whether the engine
 * drains the queues the sim names or walks them all. */
static void run_completions(uint64_t seed, int walk_only_backend, order_log *out)
{
    sublet_backend *sim = NULL;
    assert_int_equal(sublet_sim_create(SIM_BIG, &sim), SUBLET_OK);
    sublet_backend *be = sim;
    h_fwd wo; /* the sim naming no completed streams: the engine walks every queue */
    if (walk_only_backend) {
        h_fwd_init(&wo, sim, "walk-only");
        wo.ops.event_completions = NULL;
        be = &wo.base;
    }
    sublet_allocator *a = NULL;
    sublet_options ao = {.backend = be, .device = 0, .conf = ""};
    char err[256];
    assert_int_equal(sublet_allocator_create(&ao, &a, err, sizeof err), SUBLET_OK);
    sublet_trace_set(a, order_cb, out);
    uint64_t rng = seed;
    enum { N = 160 };
    void *live[N];
    sublet_stream pending[N];
    size_t nlive = 0, npending = 0;
    sublet_stream next_stream = 100;
    for (int step = 0; step < (H_UNDER_TSAN ? 300 : 3000); step++) {
        uint64_t r = h_rand_range(&rng, 0, 100);
        if (r < 45 && nlive < N) {
            uint64_t size = h_rand_range(&rng, 1, 5) * (h_rand_range(&rng, 0, 2) ? KiB : MiB);
            live[nlive++] = h_malloc(a, size, 0);
        } else if (r < 90 && nlive) {
            size_t k = (size_t)h_rand_range(&rng, 0, nlive);
            void *p = live[k];
            live[k] = live[--nlive];
            if (npending < N && h_rand_range(&rng, 0, 2)) {
                sublet_stream s = next_stream++;
                h_record(a, p, s);
                if (h_rand_range(&rng, 0, 4) == 0)
                    h_record(a, p, next_stream++); /* a second use, completed apart */
                pending[npending++] = s;
            }
            h_free(a, p);
        } else {
            /* complete a batch of the pending streams, in a random order
             * (a second use's stream is completed with its first's
             * neighbour or never: its block then waits) */
            size_t batch = (size_t)h_rand_range(&rng, 1, 49);
            for (size_t b = 0; b < batch && npending; b++) {
                size_t k = (size_t)h_rand_range(&rng, 0, npending);
                sublet_sim_stream_complete(sim, pending[k]);
                sublet_sim_stream_complete(sim, pending[k] + 1);
                pending[k] = pending[--npending];
            }
            if (h_rand_range(&rng, 0, 2))
                h_process_events(a);
        }
    }
    sublet_sim_complete_all(sim);
    h_process_events(a);
    sublet_trace_set(a, NULL, NULL);
    sublet_allocator_destroy(a);
    sublet_backend_destroy(sim);
}

static void test_completions_drain_order(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        order_log named = {0}, walked = {0};
        run_completions(seed, 0, &named);
        run_completions(seed, 1, &walked);
        assert_true(named.n > (H_UNDER_TSAN ? 100 : 1000));
        size_t frees = 0;
        for (size_t i = 0; i < named.n; i++)
            frees += named.ev[i].act == SUBLET_ACT_FREE_COMPLETED;
        assert_true(frees > (H_UNDER_TSAN ? 10 : 100));
        assert_int_equal(named.n, walked.n);
        for (size_t i = 0; i < named.n; i++) {
            const trace_ev *x = &named.ev[i], *y = &walked.ev[i];
            if (x->act != y->act || x->addr != y->addr || x->size != y->size ||
                x->stream != y->stream)
                fail_msg("seed %llu: engine event %zu differs: %s 0x%llx (named) vs %s 0x%llx "
                         "(walked)", (unsigned long long)seed, i,
                         sublet_action_name(named.ev[i].act), (unsigned long long)named.ev[i].addr,
                         sublet_action_name(walked.ev[i].act),
                         (unsigned long long)walked.ev[i].addr);
        }
        free(named.ev);
        free(walked.ev);
    }
}

/* test_max_split_expandable and test_garbage_collect_expandable without the
 * expandable segments: a 120 MiB fraction limit (fraction × capacity exact) */
static void test_fraction_limit_ports(void **state)
{
    (void)state;
    const double f = 120.0 / 1024.0;
    h_env e;
    h_env_init(&e, H_SIM, GiB, "max_split_size_mb:40");
    assert_int_equal(sublet_memory_fraction_set(e.a, f), SUBLET_OK);
    assert_true((uint64_t)(f * (double)GiB) == 120 * MiB);
    void *a = h_malloc(e.a, 40 * MiB, 0), *b = h_malloc(e.a, 40 * MiB, 0);
    void *c = h_malloc(e.a, 40 * MiB, 0), *d = NULL;
    assert_int_equal(h_try_malloc(e.a, 40 * MiB, 0, &d), SUBLET_ERR_OOM);
    h_free(e.a, a);
    h_free(e.a, b);
    h_free(e.a, c);
    sublet_stats_reset_accumulated(e.a);
    void *big = h_malloc(e.a, 120 * MiB, 0); /* the three oversize blocks make room */
    assert_int_equal(h_stat(e.a, "num_device_free"), 3);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 0);
    h_free(e.a, big);
    h_env_fini(&e);

    h_env_init(&e, H_SIM, GiB, "garbage_collection_threshold:0.5");
    assert_int_equal(sublet_memory_fraction_set(e.a, f), SUBLET_OK);
    a = h_malloc(e.a, 40 * MiB, 0);
    b = h_malloc(e.a, 40 * MiB, 0);
    h_free(e.a, a);
    h_free(e.a, b);
    sublet_stats_reset_accumulated(e.a);
    big = h_malloc(e.a, 80 * MiB, 0); /* GC: 80 MiB > 60 MiB; both equally old */
    assert_int_equal(h_stat(e.a, "num_device_free"), 2);
    assert_int_equal(h_stat(e.a, "num_alloc_retries"), 0);
    assert_int_equal(h_stat(e.a, "num_sync_all_streams"), 0);
    h_free(e.a, big);
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_stream),
        cmocka_unit_test(test_record_stream_on_shifted_view),
        cmocka_unit_test(test_record_many_streams),
        cmocka_unit_test(test_completions_drain_order),
        cmocka_unit_test(test_trace_free_requested_completed),
        cmocka_unit_test(test_trace_actions),
        cmocka_unit_test(test_record_stream_oom),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_oom_message_exact),
        cmocka_unit_test(test_oom_diagnosis),
        cmocka_unit_test(test_out_of_memory_retry),
        cmocka_unit_test(test_fraction_limit_ports),
        cmocka_unit_test(test_zero_size),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_fault_segment_alloc),
        cmocka_unit_test(test_fault_retry_counts),
        cmocka_unit_test(test_fault_event_create),
    };
    if (getenv("SUBLET_TEST_FILTER")) /* e.g. SUBLET_TEST_FILTER='test_model_*' */
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
