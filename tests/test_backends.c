/* sublet — tests of the sim, host and fault-injection backends. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/backend.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static sublet_backend *new_sim(uint64_t capacity)
{
    sublet_backend *b = NULL;
    assert_int_equal(sublet_sim_create(capacity, &b), SUBLET_OK);
    assert_non_null(b);
    return b;
}

static sublet_backend *new_host(uint64_t capacity)
{
    sublet_backend *b = NULL;
    assert_int_equal(sublet_host_create(capacity, &b), SUBLET_OK);
    assert_non_null(b);
    return b;
}

static uint64_t seg_alloc(sublet_backend *b, uint64_t size, uint64_t hint)
{
    uint64_t addr = 0;
    assert_int_equal(b->ops->segment_alloc(b, size, hint, &addr), SUBLET_OK);
    assert_true(addr != 0);
    return addr;
}

static void seg_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    assert_int_equal(b->ops->segment_free(b, addr, size), SUBLET_OK);
}

static int ranges_overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return a < b + bs && b < a + as;
}

/* ---- creation --------------------------------------------------------------- */

static void test_create_args(void **state)
{
    (void)state;
    sublet_backend *b = NULL;
    assert_int_equal(sublet_sim_create(GiB, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_sim_create(0, &b), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_host_create(GiB, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_host_create(0, &b), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_fault_create(NULL, &b), SUBLET_ERR_INVALID_ARGUMENT);
    assert_null(b);

    sublet_backend *sim = new_sim(GiB);
    assert_string_equal(sim->name, "sim");
    assert_int_equal(sim->device, 0);
    assert_int_equal(sublet_fault_create(sim, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_backend *host = new_host(GiB);
    assert_string_equal(host->name, "host");
    assert_int_equal(host->device, 0);
    sublet_backend_destroy(host);
    sublet_backend_destroy(sim);
    sublet_backend_destroy(NULL); /* NULL-safe */
}

/* ---- sim: addresses ---------------------------------------------------------- */

static void sim_script(sublet_backend *b, uint64_t out[8])
{
    out[0] = seg_alloc(b, 2 * MiB, 0);
    out[1] = seg_alloc(b, 20 * MiB, 0);
    out[2] = seg_alloc(b, 3 * MiB + 512, 0);
    seg_free(b, out[1], 20 * MiB);
    out[3] = seg_alloc(b, 4 * MiB, 0); /* first fit: into the hole */
    out[4] = seg_alloc(b, 64 * MiB, 0);
    uint64_t va = 0;
    assert_int_equal(b->ops->va_reserve(b, 128 * MiB, 0, &va), SUBLET_OK);
    out[5] = va;
    out[6] = seg_alloc(b, 512, 0);      /* into the hole, after out[3] */
    out[7] = seg_alloc(b, 14 * MiB, 0); /* the rest of the hole, 2 MiB aligned */
}

static void test_sim_deterministic(void **state)
{
    (void)state;
    sublet_backend *a = new_sim(8 * GiB);
    sublet_backend *b = new_sim(8 * GiB);
    uint64_t xa[8], xb[8];
    sim_script(a, xa);
    sim_script(b, xb);
    for (int i = 0; i < 8; i++) {
        assert_true(xa[i] == xb[i]);
        assert_true(xa[i] >= UINT64_C(0x7f0000000000));
        assert_int_equal(xa[i] % (2 * MiB), 0); /* placements are 2 MiB aligned */
    }
    /* First fit reuses the lowest hole. */
    assert_true(xa[3] == xa[1]);
    assert_true(xa[0] == UINT64_C(0x7f0000000000));
    assert_true(xa[1] == xa[0] + 2 * MiB);
    assert_true(xa[6] == xa[3] + 4 * MiB);
    assert_true(xa[7] == xa[3] + 6 * MiB);
    assert_true(xa[5] > xa[4]); /* the reservation went past everything */
    /* Nothing live overlaps. */
    const uint64_t sizes[8] = {2 * MiB, 0, 3 * MiB + 512, 4 * MiB, 64 * MiB, 128 * MiB, 512, 14 * MiB};
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++)
            if (sizes[i] && sizes[j])
                assert_false(ranges_overlap(xa[i], sizes[i], xa[j], sizes[j]));
    assert_int_equal(sublet_sim_segments(a), 6);
    assert_int_equal(sublet_sim_used(a), 2 * MiB + 3 * MiB + 512 + 4 * MiB + 64 * MiB + 512 + 14 * MiB);
    sublet_backend_destroy(a);
    sublet_backend_destroy(b);
}

static void test_sim_hints(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(8 * GiB);
    const uint64_t h = UINT64_C(0x7f3c5e000000);
    assert_true(seg_alloc(b, 20 * MiB, h) == h);
    /* Overlapping the hinted segment: refused, placed elsewhere. */
    uint64_t other = seg_alloc(b, 4 * MiB, h + 2 * MiB);
    assert_true(other != h + 2 * MiB);
    assert_false(ranges_overlap(other, 4 * MiB, h, 20 * MiB));
    /* Ending inside it: refused too. */
    uint64_t below = seg_alloc(b, 4 * MiB, h - 2 * MiB);
    assert_true(below != h - 2 * MiB);
    assert_false(ranges_overlap(below, 4 * MiB, h, 20 * MiB));
    /* Adjacent on both sides: honoured. */
    assert_true(seg_alloc(b, 4 * MiB, h - 4 * MiB) == h - 4 * MiB);
    assert_true(seg_alloc(b, 2 * MiB, h + 20 * MiB) == h + 20 * MiB);
    /* A hint below the base and an unaligned one are honoured as given. */
    assert_true(seg_alloc(b, 1 * MiB, UINT64_C(0x10000)) == UINT64_C(0x10000));
    assert_true(seg_alloc(b, 1 * MiB, h + 100 * MiB + 512) == h + 100 * MiB + 512);
    /* Auto placement skips the hinted segments. */
    uint64_t any = seg_alloc(b, 2 * GiB, 0);
    assert_false(ranges_overlap(any, 2 * GiB, h - 4 * MiB, 200 * MiB));
    /* A hint over a VA reservation is refused. */
    uint64_t va = 0;
    assert_int_equal(b->ops->va_reserve(b, 64 * MiB, 0, &va), SUBLET_OK);
    uint64_t x = seg_alloc(b, 2 * MiB, va + 2 * MiB);
    assert_false(ranges_overlap(x, 2 * MiB, va, 64 * MiB));
    /* The freed hint address can be taken again. */
    seg_free(b, h, 20 * MiB);
    assert_true(seg_alloc(b, 20 * MiB, h) == h);
    sublet_backend_destroy(b);
}

static void test_sim_capacity(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(100 * MiB);
    uint64_t addr = 0, fr = 0, tot = 0;
    assert_int_equal(b->ops->segment_alloc(b, 0, 0, &addr), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->segment_alloc(b, MiB, 0, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    uint64_t s1 = seg_alloc(b, 60 * MiB, 0);
    uint64_t s2 = seg_alloc(b, 40 * MiB, 0); /* exactly full */
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 0);
    assert_int_equal(tot, 100 * MiB);
    assert_int_equal(b->ops->segment_alloc(b, 512, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(b->ops->segment_alloc(b, UINT64_MAX, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    seg_free(b, s1, 60 * MiB);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 60 * MiB);
    assert_int_equal(b->ops->segment_alloc(b, 61 * MiB, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    uint64_t s3 = seg_alloc(b, 60 * MiB, 0); /* recovered */
    assert_true(s3 == s1);
    assert_int_equal(sublet_sim_used(b), 100 * MiB);
    /* Shrinking the capacity below use: free reads 0, allocation fails. */
    sublet_sim_set_capacity(b, 50 * MiB);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 0);
    assert_int_equal(tot, 50 * MiB);
    assert_int_equal(b->ops->segment_alloc(b, 512, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    seg_free(b, s2, 40 * MiB);
    seg_free(b, s3, 60 * MiB);
    assert_int_equal(sublet_sim_used(b), 0);
    assert_int_equal(sublet_sim_segments(b), 0);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 50 * MiB);
    sublet_backend_destroy(b);
}

static void test_sim_bad_free(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(GiB);
    uint64_t s = seg_alloc(b, 4 * MiB, 0);
    assert_int_equal(b->ops->segment_free(b, s, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->segment_free(b, s + 512, 4 * MiB - 512), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->segment_free(b, 0x1234, 4 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    uint64_t va = 0;
    assert_int_equal(b->ops->va_reserve(b, 8 * MiB, 0, &va), SUBLET_OK);
    /* A reservation is not a segment. */
    assert_int_equal(b->ops->segment_free(b, va, 8 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_sim_segments(b), 1);
    seg_free(b, s, 4 * MiB);
    assert_int_equal(b->ops->segment_free(b, s, 4 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_sim_segments(b), 0);
    assert_int_equal(b->ops->va_release(b, va, 8 * MiB), SUBLET_OK);
    sublet_backend_destroy(b);
}

/* ---- sim: events --------------------------------------------------------------- */

static int query(sublet_backend *b, sublet_event *ev)
{
    int done = -1;
    assert_int_equal(b->ops->event_query(b, ev, &done), SUBLET_OK);
    assert_true(done == 0 || done == 1);
    return done;
}

static void test_sim_events(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(GiB);
    sublet_event *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
    assert_int_equal(b->ops->event_create(b, &e1), SUBLET_OK);
    assert_int_equal(b->ops->event_create(b, &e2), SUBLET_OK);
    assert_int_equal(b->ops->event_create(b, &e3), SUBLET_OK);
    assert_int_equal(b->ops->event_create(b, &e4), SUBLET_OK);
    assert_int_equal(b->ops->event_create(b, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->event_query(b, e1, NULL), SUBLET_ERR_INVALID_ARGUMENT);

    assert_true(query(b, e1)); /* never recorded: done */
    const sublet_stream s1 = 0x1000, s2 = UINT64_C(0xdeadbeef00000000);
    assert_int_equal(b->ops->event_record(b, e1, s1), SUBLET_OK);
    assert_int_equal(b->ops->event_record(b, e2, s1), SUBLET_OK);
    assert_int_equal(b->ops->event_record(b, e3, s2), SUBLET_OK);
    assert_false(query(b, e1));
    assert_false(query(b, e2));
    assert_false(query(b, e3));

    /* Completing one stream leaves the other pending. */
    sublet_sim_stream_complete(b, s1);
    assert_true(query(b, e1));
    assert_true(query(b, e2));
    assert_false(query(b, e3));
    sublet_sim_stream_complete(b, 0x9999); /* unknown stream: no-op */

    /* Records after a completion are pending again; synchronize on a later
     * event completes the earlier ones on its stream, not later ones. */
    assert_int_equal(b->ops->event_record(b, e1, s1), SUBLET_OK);
    assert_int_equal(b->ops->event_record(b, e2, s1), SUBLET_OK);
    assert_int_equal(b->ops->event_record(b, e4, s1), SUBLET_OK);
    assert_false(query(b, e1));
    assert_int_equal(b->ops->event_synchronize(b, e2), SUBLET_OK);
    assert_true(query(b, e1));
    assert_true(query(b, e2));
    assert_false(query(b, e4));
    assert_false(query(b, e3));
    /* Synchronizing an already complete event changes nothing. */
    assert_int_equal(b->ops->event_synchronize(b, e1), SUBLET_OK);
    assert_false(query(b, e4));

    /* Re-recording moves an event to another stream. */
    assert_int_equal(b->ops->event_record(b, e1, s2), SUBLET_OK);
    assert_false(query(b, e1));
    sublet_sim_stream_complete(b, s1);
    assert_true(query(b, e4));
    assert_false(query(b, e1));

    sublet_sim_complete_all(b);
    assert_true(query(b, e1));
    assert_true(query(b, e3));

    /* The default stream (0) is a stream like any other. */
    assert_int_equal(b->ops->event_record(b, e3, 0), SUBLET_OK);
    assert_false(query(b, e3));
    sublet_sim_stream_complete(b, 0);
    assert_true(query(b, e3));

    /* Many streams. */
    for (uint64_t i = 0; i < 500; i++)
        assert_int_equal(b->ops->event_record(b, e1, i * 7919 + 3), SUBLET_OK);
    assert_false(query(b, e1));
    sublet_sim_stream_complete(b, 499 * 7919 + 3);
    assert_true(query(b, e1));

    /* A completed stream is forgotten (a replay uses one per deferred free):
     * when it is recorded on again, what it completed before stays done. */
    const sublet_stream s3 = 0x3000;
    assert_int_equal(b->ops->event_record(b, e2, s3), SUBLET_OK);
    sublet_sim_stream_complete(b, s3);
    assert_true(query(b, e2));
    assert_int_equal(b->ops->event_record(b, e4, s3), SUBLET_OK);
    assert_true(query(b, e2));
    assert_false(query(b, e4));
    assert_int_equal(b->ops->event_synchronize(b, e4), SUBLET_OK); /* completes s3 again */
    assert_true(query(b, e4));
    assert_int_equal(b->ops->event_record(b, e2, s3), SUBLET_OK);
    assert_true(query(b, e4));
    assert_false(query(b, e2));
    assert_int_equal(b->ops->event_synchronize(b, e4), SUBLET_OK); /* already done */
    assert_false(query(b, e2));
    sublet_sim_complete_all(b);
    assert_true(query(b, e2));

    assert_int_equal(b->ops->event_destroy(b, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->event_destroy(b, e1), SUBLET_OK);
    assert_int_equal(b->ops->event_destroy(b, e2), SUBLET_OK);
    assert_int_equal(b->ops->event_destroy(b, e3), SUBLET_OK);
    assert_int_equal(b->ops->event_destroy(b, e4), SUBLET_OK);
    sublet_backend_destroy(b);
}

/* event_completions: the streams of the completions since an epoch, in order; SIZE_MAX
 * when they are more than the caller's room or than the sim remembers (64), or after a
 * complete_all; the same through the fault wrapper; the host backend has none.  Many
 * streams recorded and completed in any order (the hash table's growth and its
 * deletions) keep every other stream's events as they were. */
static void test_sim_event_completions(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(GiB);
    assert_non_null(b->ops->event_completions);
    enum { N = 300 };
    sublet_event *ev[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(b->ops->event_create(b, &ev[i]), SUBLET_OK);
        assert_int_equal(b->ops->event_record(b, ev[i], 1000 + (sublet_stream)i), SUBLET_OK);
    }
    uint64_t ep = b->ops->event_epoch(b);
    sublet_stream out[80];
    size_t n = 0;
    assert_int_equal(b->ops->event_completions(b, ep, out, 80, &n), ep);
    assert_int_equal(n, 0);
    /* complete every third stream, from the end */
    int done[N] = {0};
    for (int i = N - 1; i >= 0; i -= 3) {
        sublet_sim_stream_complete(b, 1000 + (sublet_stream)i);
        done[i] = 1;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(query(b, ev[i]), done[i]);
    uint64_t now = b->ops->event_epoch(b);
    assert_int_equal(now - ep, 100);
    assert_int_equal(b->ops->event_completions(b, ep, out, 80, &n), now);
    assert_true(n == SIZE_MAX); /* 100 completions: more than 64 remembered */
    assert_int_equal(b->ops->event_completions(b, now - 10, out, 80, &n), now);
    assert_int_equal(n, 10);
    for (size_t k = 0; k < 10; k++) /* the last ten completed: streams 1029, 1026, ..., 1002 */
        assert_int_equal(out[k], 1000 + 29 - 3 * (sublet_stream)k);
    assert_int_equal(b->ops->event_completions(b, now - 10, out, 9, &n), now);
    assert_true(n == SIZE_MAX); /* more than the caller's room */
    assert_int_equal(b->ops->event_synchronize(b, ev[1]), SUBLET_OK);
    assert_int_equal(b->ops->event_completions(b, now, out, 80, &n), now + 1);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 1001);

    sublet_backend *f = NULL;
    assert_int_equal(sublet_fault_create(b, &f), SUBLET_OK);
    assert_non_null(f->ops->event_completions);
    assert_int_equal(f->ops->event_completions(f, now, out, 80, &n), now + 1);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 1001);
    sublet_backend_destroy(f);

    sublet_sim_complete_all(b);
    for (int i = 0; i < N; i++)
        assert_true(query(b, ev[i]));
    uint64_t all = b->ops->event_epoch(b);
    assert_int_equal(b->ops->event_completions(b, now + 1, out, 80, &n), all);
    assert_true(n == SIZE_MAX); /* every stream at once */
    assert_int_equal(b->ops->event_completions(b, all, out, 80, &n), all);
    assert_int_equal(n, 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(b->ops->event_destroy(b, ev[i]), SUBLET_OK);
    sublet_backend_destroy(b);

    sublet_backend *h = NULL;
    assert_int_equal(sublet_host_create(GiB, &h), SUBLET_OK);
    assert_null(h->ops->event_completions);
    sublet_backend_destroy(h);
}

/* event_epoch: unchanged while nothing completes (recording included), changed by
 * every completion (a stream, an event synchronised, all streams), the same through the
 * fault wrapper; the host backend has none. */
static void test_sim_event_epoch(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(GiB);
    assert_non_null(b->ops->event_epoch);
    sublet_event *e1 = NULL, *e2 = NULL;
    assert_int_equal(b->ops->event_create(b, &e1), SUBLET_OK);
    assert_int_equal(b->ops->event_create(b, &e2), SUBLET_OK);
    uint64_t ep = b->ops->event_epoch(b);
    assert_int_equal(b->ops->event_record(b, e1, 1), SUBLET_OK);
    assert_int_equal(b->ops->event_record(b, e2, 2), SUBLET_OK);
    assert_false(query(b, e1));
    assert_int_equal(b->ops->event_epoch(b), ep); /* recorded incomplete: no change */
    sublet_sim_stream_complete(b, 3);             /* a stream with nothing recorded */
    assert_int_equal(b->ops->event_epoch(b), ep);
    sublet_sim_stream_complete(b, 1);
    assert_true(query(b, e1));
    assert_false(query(b, e2));
    uint64_t ep1 = b->ops->event_epoch(b);
    assert_true(ep1 != ep);
    assert_int_equal(b->ops->event_synchronize(b, e2), SUBLET_OK);
    uint64_t ep2 = b->ops->event_epoch(b);
    assert_true(ep2 != ep1);
    assert_int_equal(b->ops->event_synchronize(b, e2), SUBLET_OK); /* already complete */
    assert_int_equal(b->ops->event_epoch(b), ep2);
    sublet_sim_complete_all(b); /* nothing pending */
    assert_int_equal(b->ops->event_epoch(b), ep2);
    assert_int_equal(b->ops->event_record(b, e1, 5), SUBLET_OK);
    sublet_sim_complete_all(b);
    assert_true(b->ops->event_epoch(b) != ep2);
    assert_true(query(b, e1));

    sublet_backend *f = NULL;
    assert_int_equal(sublet_fault_create(b, &f), SUBLET_OK);
    assert_non_null(f->ops->event_epoch);
    assert_int_equal(f->ops->event_epoch(f), b->ops->event_epoch(b));
    assert_int_equal(f->ops->event_record(f, e2, 7), SUBLET_OK);
    sublet_sim_stream_complete(b, 7);
    assert_int_equal(f->ops->event_epoch(f), b->ops->event_epoch(b));
    sublet_backend_destroy(f);

    assert_int_equal(b->ops->event_destroy(b, e1), SUBLET_OK);
    assert_int_equal(b->ops->event_destroy(b, e2), SUBLET_OK);
    sublet_backend_destroy(b);

    sublet_backend *h = NULL;
    assert_int_equal(sublet_host_create(GiB, &h), SUBLET_OK);
    assert_null(h->ops->event_epoch);
    sublet_backend_destroy(h);
}

static void test_sim_event_foreign(void **state)
{
    (void)state;
    sublet_backend *a = new_sim(GiB);
    sublet_backend *h = new_host(GiB);
    sublet_event *ea = NULL, *eh = NULL;
    assert_int_equal(a->ops->event_create(a, &ea), SUBLET_OK);
    assert_int_equal(h->ops->event_create(h, &eh), SUBLET_OK);
    int done = 0;
    /* An event belongs to the backend that made it. */
    assert_int_equal(a->ops->event_record(a, eh, 1), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(h->ops->event_query(h, ea, &done), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(a->ops->event_destroy(a, ea), SUBLET_OK);
    assert_int_equal(h->ops->event_destroy(h, eh), SUBLET_OK);
    sublet_backend_destroy(a);
    sublet_backend_destroy(h);
}

/* ---- sim: virtual memory --------------------------------------------------------- */

static void test_sim_vmm(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(100 * MiB);
    uint64_t va = 0, va2 = 0, fr = 0, tot = 0;
    assert_non_null(b->ops->va_reserve);
    assert_int_equal(b->ops->va_reserve(b, 0, 0, &va), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_reserve(b, MiB, 3 * MiB, &va), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_reserve(b, MiB, 0, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    /* A reservation far larger than capacity costs nothing. */
    assert_int_equal(b->ops->va_reserve(b, 8 * GiB, 0, &va), SUBLET_OK);
    assert_int_equal(va % (2 * MiB), 0);
    assert_int_equal(sublet_sim_used(b), 0);
    assert_int_equal(b->ops->va_reserve(b, 64 * MiB, GiB, &va2), SUBLET_OK);
    assert_int_equal(va2 % GiB, 0);
    assert_false(ranges_overlap(va, 8 * GiB, va2, 64 * MiB));
    /* Segments never land in a reservation. */
    uint64_t s = seg_alloc(b, 2 * MiB, 0);
    assert_false(ranges_overlap(s, 2 * MiB, va, 8 * GiB));
    assert_false(ranges_overlap(s, 2 * MiB, va2, 64 * MiB));

    /* Mapping counts toward use. */
    assert_int_equal(b->ops->va_map(b, va, 20 * MiB), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, va + 20 * MiB, 20 * MiB), SUBLET_OK);
    assert_int_equal(sublet_sim_used(b), 42 * MiB);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 58 * MiB);
    /* Errors: already mapped, partly mapped, outside any reservation,
     * straddling the end of a reservation, size 0. */
    assert_int_equal(b->ops->va_map(b, va, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, va + 38 * MiB, 4 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, s, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, 0x1000, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, va2 + 62 * MiB, 4 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, va + 40 * MiB, 0), SUBLET_ERR_INVALID_ARGUMENT);
    /* Over capacity. */
    assert_int_equal(b->ops->va_map(b, va + 40 * MiB, 60 * MiB), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(sublet_sim_used(b), 42 * MiB);
    assert_int_equal(b->ops->va_map(b, va2, 58 * MiB), SUBLET_OK); /* exactly full */
    uint64_t addr = 0;
    assert_int_equal(b->ops->segment_alloc(b, 512, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(b->ops->va_unmap(b, va2, 58 * MiB), SUBLET_OK);

    /* Release refused while mapped; bad sizes refused. */
    assert_int_equal(b->ops->va_release(b, va, 8 * GiB), SUBLET_ERR_BUSY);
    assert_int_equal(b->ops->va_release(b, va, 4 * GiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_release(b, s, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);

    /* Unmap: not mapped, a gap, past the end: refused. */
    assert_int_equal(b->ops->va_unmap(b, va + 40 * MiB, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_unmap(b, va + 30 * MiB, 20 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_sim_used(b), 42 * MiB);
    /* Unmap from the middle of one mapping (splits it), then across two. */
    assert_int_equal(b->ops->va_unmap(b, va + 4 * MiB, 2 * MiB), SUBLET_OK);
    assert_int_equal(sublet_sim_used(b), 40 * MiB);
    assert_int_equal(b->ops->va_unmap(b, va + 4 * MiB, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, va + 4 * MiB, 2 * MiB), SUBLET_OK); /* remap the hole */
    assert_int_equal(b->ops->va_unmap(b, va + 10 * MiB, 20 * MiB), SUBLET_OK);
    assert_int_equal(sublet_sim_used(b), 22 * MiB);
    assert_int_equal(b->ops->va_unmap(b, va, 10 * MiB), SUBLET_OK);
    assert_int_equal(b->ops->va_unmap(b, va + 30 * MiB, 10 * MiB), SUBLET_OK);
    assert_int_equal(sublet_sim_used(b), 2 * MiB);
    assert_int_equal(b->ops->va_release(b, va, 8 * GiB), SUBLET_OK);
    assert_int_equal(b->ops->va_release(b, va, 8 * GiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_release(b, va2, 64 * MiB), SUBLET_OK);
    /* The released range is placeable again. */
    assert_true(seg_alloc(b, 2 * MiB, va) == va);
    seg_free(b, va, 2 * MiB);
    seg_free(b, s, 2 * MiB);
    assert_int_equal(sublet_sim_used(b), 0);
    sublet_backend_destroy(b);
}

/* ---- host ------------------------------------------------------------------------ */

static void test_host_segments(void **state)
{
    (void)state;
    sublet_backend *b = new_host(8 * MiB);
    uint64_t fr = 0, tot = 0, addr = 0;
    uint64_t s1 = seg_alloc(b, 3 * MiB + 100, 0);
    uint64_t s2 = seg_alloc(b, 512, 0xdead000); /* hint ignored */
    assert_int_equal(s1 % 512, 0);
    assert_int_equal(s2 % 512, 0);
    memset((void *)(uintptr_t)s1, 0xab, 3 * MiB + 100);
    memset((void *)(uintptr_t)s2, 0xcd, 512);
    const unsigned char *p = (const unsigned char *)(uintptr_t)s1;
    assert_int_equal(p[0], 0xab);
    assert_int_equal(p[3 * MiB + 99], 0xab);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot, 8 * MiB);
    assert_int_equal(fr, 8 * MiB - 3 * MiB - 100 - 512);
    assert_int_equal(b->ops->segment_alloc(b, 5 * MiB, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(b->ops->segment_alloc(b, 0, 0, &addr), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->segment_alloc(b, UINT64_MAX, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    /* Bad frees never reach free(). */
    assert_int_equal(b->ops->segment_free(b, s1, 3 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->segment_free(b, s1 + 512, 512), SUBLET_ERR_INVALID_ARGUMENT);
    seg_free(b, s1, 3 * MiB + 100);
    assert_int_equal(b->ops->segment_free(b, s1, 3 * MiB + 100), SUBLET_ERR_INVALID_ARGUMENT);
    uint64_t s3 = seg_alloc(b, 5 * MiB, 0); /* recovered */
    memset((void *)(uintptr_t)s3, 0x11, 5 * MiB);
    seg_free(b, s3, 5 * MiB);
    seg_free(b, s2, 512);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 8 * MiB);
    sublet_backend_destroy(b);
}

static void test_host_events(void **state)
{
    (void)state;
    sublet_backend *b = new_host(MiB);
    sublet_event *ev = NULL;
    assert_int_equal(b->ops->event_create(b, &ev), SUBLET_OK);
    assert_true(query(b, ev));
    assert_int_equal(b->ops->event_record(b, ev, 7), SUBLET_OK);
    assert_true(query(b, ev));
    assert_int_equal(b->ops->event_synchronize(b, ev), SUBLET_OK);
    assert_true(query(b, ev));
    assert_int_equal(b->ops->event_destroy(b, ev), SUBLET_OK);
    sublet_backend_destroy(b);
}

static void test_host_vmm(void **state)
{
    (void)state;
    sublet_backend *b = new_host(8 * MiB);
    if (!b->ops->va_reserve) {
        /* No anonymous mmap here: all four must be absent together. */
        assert_null(b->ops->va_map);
        assert_null(b->ops->va_unmap);
        assert_null(b->ops->va_release);
        sublet_backend_destroy(b);
        skip();
    }
    uint64_t va = 0;
    assert_int_equal(b->ops->va_reserve(b, 64 * MiB, 2 * MiB, &va), SUBLET_OK);
    assert_int_equal(va % (2 * MiB), 0);
    assert_int_equal(b->ops->va_map(b, va, 4 * MiB), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, va + 4 * MiB, 2 * MiB), SUBLET_OK);
    memset((void *)(uintptr_t)va, 0x5a, 6 * MiB); /* every mapped byte is writable */
    assert_int_equal(((unsigned char *)(uintptr_t)va)[6 * MiB - 1], 0x5a);
    uint64_t fr = 0, tot = 0;
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 2 * MiB);
    assert_int_equal(b->ops->va_map(b, va + 6 * MiB, 4 * MiB), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(b->ops->va_map(b, va, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, va + 62 * MiB, 4 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map(b, va + 6 * MiB + 1, 4096), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_release(b, va, 64 * MiB), SUBLET_ERR_BUSY);
    assert_int_equal(b->ops->va_unmap(b, va + 2 * MiB, 2 * MiB), SUBLET_OK); /* split */
    assert_int_equal(b->ops->va_unmap(b, va + 2 * MiB, 2 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    /* Remapped memory is fresh (zero-filled). */
    assert_int_equal(b->ops->va_map(b, va + 2 * MiB, 2 * MiB), SUBLET_OK);
    assert_int_equal(((unsigned char *)(uintptr_t)va)[2 * MiB], 0);
    assert_int_equal(((unsigned char *)(uintptr_t)va)[0], 0x5a);
    assert_int_equal(b->ops->va_unmap(b, va, 6 * MiB), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, 8 * MiB);
    assert_int_equal(b->ops->va_release(b, va, 32 * MiB), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_release(b, va, 64 * MiB), SUBLET_OK);
    /* A reservation left behind is unmapped by destroy. */
    assert_int_equal(b->ops->va_reserve(b, 4 * MiB, 0, &va), SUBLET_OK);
    sublet_backend_destroy(b);
}

/* ---- fault wrapper ------------------------------------------------------------------ */

static void test_fault_nth(void **state)
{
    (void)state;
    sublet_backend *sim = new_sim(GiB);
    sublet_backend *f = NULL;
    assert_int_equal(sublet_fault_create(sim, &f), SUBLET_OK);
    assert_string_equal(f->name, "fault");
    assert_int_equal(f->device, sim->device);
    uint64_t addr[6] = {0};

    sublet_fault_fail_nth(f, SUBLET_FAULT_SEGMENT_ALLOC, 3);
    for (int i = 0; i < 6; i++) {
        sublet_status st = f->ops->segment_alloc(f, 2 * MiB, 0, &addr[i]);
        assert_int_equal(st, i == 2 ? SUBLET_ERR_DEVICE_OOM : SUBLET_OK);
    }
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_SEGMENT_ALLOC), 6);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_SEGMENT_ALLOC), 1);
    assert_int_equal(sublet_sim_segments(sim), 5); /* the failed call never reached it */
    /* Other ops unaffected and uncounted by this rule. */
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_EVENT_CREATE), 0);
    for (int i = 0; i < 6; i++)
        if (i != 2)
            assert_int_equal(f->ops->segment_free(f, addr[i], 2 * MiB), SUBLET_OK);
    assert_int_equal(sublet_sim_segments(sim), 0);

    /* Resetting the rule restarts the counts. */
    sublet_fault_fail_nth(f, SUBLET_FAULT_SEGMENT_ALLOC, 1);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_SEGMENT_ALLOC), 0);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_SEGMENT_ALLOC), 0);
    assert_int_equal(f->ops->segment_alloc(f, MiB, 0, &addr[0]), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(f->ops->segment_alloc(f, MiB, 0, &addr[0]), SUBLET_OK);
    assert_int_equal(f->ops->segment_free(f, addr[0], MiB), SUBLET_OK);
    sublet_fault_fail_nth(f, SUBLET_FAULT_SEGMENT_ALLOC, 0);
    assert_int_equal(f->ops->segment_alloc(f, MiB, 0, &addr[0]), SUBLET_OK);
    assert_int_equal(f->ops->segment_free(f, addr[0], MiB), SUBLET_OK);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_SEGMENT_ALLOC), 0);

    /* event_create fails with SUBLET_ERR_BACKEND. */
    sublet_fault_fail_nth(f, SUBLET_FAULT_EVENT_CREATE, 2);
    sublet_event *e1 = NULL, *e2 = NULL, *e3 = NULL;
    assert_int_equal(f->ops->event_create(f, &e1), SUBLET_OK);
    assert_int_equal(f->ops->event_create(f, &e2), SUBLET_ERR_BACKEND);
    assert_int_equal(f->ops->event_create(f, &e3), SUBLET_OK);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_EVENT_CREATE), 3);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_EVENT_CREATE), 1);
    /* Events pass straight through. */
    assert_int_equal(f->ops->event_record(f, e1, 5), SUBLET_OK);
    assert_false(query(f, e1));
    sublet_sim_stream_complete(sim, 5);
    assert_true(query(f, e1));
    assert_int_equal(f->ops->event_record(f, e3, 5), SUBLET_OK);
    assert_int_equal(f->ops->event_synchronize(f, e3), SUBLET_OK);
    assert_true(query(f, e3));
    assert_int_equal(f->ops->event_destroy(f, e1), SUBLET_OK);
    assert_int_equal(f->ops->event_destroy(f, e3), SUBLET_OK);

    /* Out-of-range ops are ignored. */
    sublet_fault_fail_nth(f, SUBLET_FAULT_OP_COUNT, 1);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_OP_COUNT), 0);
    /* The fault API on a non-fault backend is a no-op. */
    sublet_fault_fail_nth(sim, SUBLET_FAULT_SEGMENT_ALLOC, 1);
    assert_int_equal(sublet_fault_calls(sim, SUBLET_FAULT_SEGMENT_ALLOC), 0);

    sublet_backend_destroy(f);
    sublet_backend_destroy(sim); /* the wrapper did not own it */
}

static void test_fault_every(void **state)
{
    (void)state;
    sublet_backend *sim = new_sim(GiB);
    sublet_backend *f = NULL;
    assert_int_equal(sublet_fault_create(sim, &f), SUBLET_OK);
    uint64_t va = 0;
    assert_non_null(f->ops->va_map);
    assert_int_equal(f->ops->va_reserve(f, 64 * MiB, 0, &va), SUBLET_OK);
    sublet_fault_fail_every(f, SUBLET_FAULT_VA_MAP, 3);
    int ok = 0;
    for (uint64_t i = 0; i < 10; i++) {
        sublet_status st = f->ops->va_map(f, va + i * 2 * MiB, 2 * MiB);
        if ((i + 1) % 3 == 0) {
            assert_int_equal(st, SUBLET_ERR_DEVICE_OOM);
        } else {
            assert_int_equal(st, SUBLET_OK);
            ok++;
        }
    }
    assert_int_equal(ok, 7);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_VA_MAP), 10);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_VA_MAP), 3);
    assert_int_equal(sublet_sim_used(sim), 14 * MiB);
    uint64_t fr = 0, tot = 0;
    assert_int_equal(f->ops->mem_info(f, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot, GiB);
    assert_int_equal(fr, GiB - 14 * MiB);
    for (uint64_t i = 0; i < 10; i++)
        if ((i + 1) % 3 != 0)
            assert_int_equal(f->ops->va_unmap(f, va + i * 2 * MiB, 2 * MiB), SUBLET_OK);
    assert_int_equal(f->ops->va_release(f, va, 64 * MiB), SUBLET_OK);

    /* fail_every on segment_alloc, combined with fail_nth. */
    sublet_fault_fail_every(f, SUBLET_FAULT_SEGMENT_ALLOC, 4);
    sublet_fault_fail_nth(f, SUBLET_FAULT_SEGMENT_ALLOC, 1);
    uint64_t addr[12];
    int failed = 0;
    for (int i = 0; i < 12; i++) {
        sublet_status st = f->ops->segment_alloc(f, MiB, 0, &addr[i]);
        const int expect_fail = (i + 1) == 1 || (i + 1) % 4 == 0;
        assert_int_equal(st, expect_fail ? SUBLET_ERR_DEVICE_OOM : SUBLET_OK);
        if (expect_fail)
            failed++;
        else
            assert_int_equal(f->ops->segment_free(f, addr[i], MiB), SUBLET_OK);
    }
    assert_int_equal(failed, 4);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_SEGMENT_ALLOC), 4);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_SEGMENT_ALLOC), 12);
    sublet_fault_fail_every(f, SUBLET_FAULT_SEGMENT_ALLOC, 0);
    sublet_fault_fail_nth(f, SUBLET_FAULT_SEGMENT_ALLOC, 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(f->ops->segment_alloc(f, MiB, 0, &addr[0]), SUBLET_OK);
        assert_int_equal(f->ops->segment_free(f, addr[0], MiB), SUBLET_OK);
    }
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_SEGMENT_ALLOC), 0);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_SEGMENT_ALLOC), 5);
    sublet_backend_destroy(f);
    sublet_backend_destroy(sim);
}

static sublet_status no_alloc(sublet_backend *b, uint64_t size, uint64_t hint, uint64_t *addr_out)
{
    (void)b;
    (void)size;
    (void)hint;
    (void)addr_out;
    return SUBLET_ERR_UNSUPPORTED;
}

static void no_destroy(sublet_backend *b)
{
    (void)b;
}

/* va_map_alias (policy:stitch) on sim and host: the physical bytes behind a
 * mapped range mapped a second time.  Memory is counted once, stays while
 * either view maps it and goes with the last; on host the two views are
 * the same bytes. */
static void alias_checks(sublet_backend *b, int host)
{
    const uint64_t P = 2 * MiB;
    uint64_t va = 0, vb = 0, fr = 0, tot = 0;
    assert_non_null(b->ops->va_map_alias);
    assert_int_equal(b->ops->va_reserve(b, 32 * MiB, P, &va), SUBLET_OK);
    assert_int_equal(b->ops->va_reserve(b, 16 * MiB, P, &vb), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, va, 2 * P), SUBLET_OK);
    assert_int_equal(b->ops->va_map(b, va + 2 * P, P), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot - fr, 3 * P);
    /* an alias spanning two maps, in another reservation: no new memory */
    assert_int_equal(b->ops->va_map_alias(b, vb, va + P, 2 * P), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot - fr, 3 * P);
    if (!host)
        assert_int_equal(sublet_sim_used(b), 3 * P);
    unsigned char *x = (unsigned char *)(uintptr_t)va, *y = (unsigned char *)(uintptr_t)vb;
    if (host) {
        x[P] = 0x11;                 /* through the first view */
        x[3 * P - 1] = 0x22;
        assert_int_equal(y[0], 0x11); /* read through the second */
        assert_int_equal(y[2 * P - 1], 0x22);
        y[P + 7] = 0x33;
        assert_int_equal(x[2 * P + 7], 0x33);
    }
    /* refused: destination mapped, source not mapped in full, outside a
     * reservation, size 0; nothing changes */
    assert_int_equal(b->ops->va_map_alias(b, vb + P, va, P), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map_alias(b, vb + 4 * P, va + 2 * P, 2 * P),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map_alias(b, va + 30 * MiB, va, 2 * P),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(b->ops->va_map_alias(b, vb + 4 * P, va, 0), SUBLET_ERR_INVALID_ARGUMENT);
    /* the first view goes: the aliased bytes stay, the rest is freed */
    assert_int_equal(b->ops->va_unmap(b, va, 3 * P), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot - fr, 2 * P);
    if (host)
        assert_int_equal(y[0], 0x11);
    assert_int_equal(b->ops->va_release(b, vb, 16 * MiB), SUBLET_ERR_BUSY);
    /* an alias of an alias, then part of one view, then the rest */
    assert_int_equal(b->ops->va_map_alias(b, va + 8 * P, vb + P, P), SUBLET_OK);
    assert_int_equal(b->ops->va_unmap(b, vb + P, P), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot - fr, 2 * P);
    if (host)
        assert_int_equal(x[8 * P + 7], 0x33);
    assert_int_equal(b->ops->va_unmap(b, vb, P), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(tot - fr, P);
    assert_int_equal(b->ops->va_unmap(b, va + 8 * P, P), SUBLET_OK);
    assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, tot);
    /* memory taken again reads as new (host: the freed pages were dropped) */
    assert_int_equal(b->ops->va_map(b, va, P), SUBLET_OK);
    if (host)
        assert_int_equal(x[7], 0);
    assert_int_equal(b->ops->va_unmap(b, va, P), SUBLET_OK);
    assert_int_equal(b->ops->va_release(b, va, 32 * MiB), SUBLET_OK);
    assert_int_equal(b->ops->va_release(b, vb, 16 * MiB), SUBLET_OK);
}

static void test_sim_alias(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(64 * MiB);
    alias_checks(b, 0);
    sublet_sim_ops o;
    sublet_sim_ops_read(b, &o);
    assert_int_equal(o.va_maps, 5);
    assert_int_equal(o.va_aliases, 2); /* counted among the maps */
    assert_int_equal(o.va_unmaps, 5);
    assert_int_equal(sublet_sim_used(b), 0);
    sublet_backend_destroy(b);
}

static void test_host_alias(void **state)
{
    (void)state;
    sublet_backend *b = new_host(64 * MiB);
    if (!b->ops->va_reserve) {
        sublet_backend_destroy(b);
        skip();
    }
    alias_checks(b, 1);
    sublet_backend_destroy(b);
}

static void test_fault_alias(void **state)
{
    (void)state;
    sublet_backend *sim = new_sim(64 * MiB), *f = NULL;
    assert_int_equal(sublet_fault_create(sim, &f), SUBLET_OK);
    uint64_t va = 0;
    assert_int_equal(f->ops->va_reserve(f, 32 * MiB, 0, &va), SUBLET_OK);
    assert_int_equal(f->ops->va_map(f, va, 2 * MiB), SUBLET_OK);
    sublet_fault_fail_nth(f, SUBLET_FAULT_VA_MAP_ALIAS, 2);
    assert_int_equal(f->ops->va_map_alias(f, va + 4 * MiB, va, 2 * MiB), SUBLET_OK);
    assert_int_equal(f->ops->va_map_alias(f, va + 8 * MiB, va, 2 * MiB), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_VA_MAP_ALIAS), 2);
    assert_int_equal(sublet_fault_injected(f, SUBLET_FAULT_VA_MAP_ALIAS), 1);
    sublet_sim_ops o;
    sublet_sim_ops_read(sim, &o);
    assert_int_equal(o.va_aliases, 1); /* the injected failure never reached the sim */
    assert_int_equal(f->ops->va_unmap(f, va, 2 * MiB), SUBLET_OK);
    assert_int_equal(f->ops->va_unmap(f, va + 4 * MiB, 2 * MiB), SUBLET_OK);
    assert_int_equal(sublet_sim_used(sim), 0);
    assert_int_equal(f->ops->va_release(f, va, 32 * MiB), SUBLET_OK);
    sublet_backend_destroy(f);
    sublet_backend_destroy(sim);
}

static void test_fault_null_vmm(void **state)
{
    (void)state;
    /* A minimal backend with no VMM ops. */
    static const sublet_backend_ops bare_ops = {.segment_alloc = no_alloc, .destroy = no_destroy};
    sublet_backend bare = {.ops = &bare_ops, .name = "bare", .device = 3};
    sublet_backend *f = NULL;
    assert_int_equal(sublet_fault_create(&bare, &f), SUBLET_OK);
    assert_int_equal(f->device, 3);
    assert_null(f->ops->va_reserve);
    assert_null(f->ops->va_release);
    assert_null(f->ops->va_map);
    assert_null(f->ops->va_unmap);
    assert_null(f->ops->segment_free);
    assert_non_null(f->ops->segment_alloc);
    assert_non_null(f->ops->destroy);
    uint64_t addr = 0;
    assert_int_equal(f->ops->segment_alloc(f, MiB, 0, &addr), SUBLET_ERR_UNSUPPORTED);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_SEGMENT_ALLOC), 1);

    /* Wrapping a backend with VMM exposes it; two wrappers are independent. */
    sublet_backend *sim = new_sim(GiB);
    sublet_backend *f1 = NULL, *f2 = NULL;
    assert_int_equal(sublet_fault_create(sim, &f1), SUBLET_OK);
    assert_int_equal(sublet_fault_create(f1, &f2), SUBLET_OK); /* wrapper of a wrapper */
    assert_non_null(f2->ops->va_map);
    assert_true(f->ops != f1->ops);
    sublet_fault_fail_nth(f1, SUBLET_FAULT_SEGMENT_ALLOC, 1);
    assert_int_equal(f2->ops->segment_alloc(f2, MiB, 0, &addr), SUBLET_ERR_DEVICE_OOM);
    assert_int_equal(sublet_fault_injected(f1, SUBLET_FAULT_SEGMENT_ALLOC), 1);
    assert_int_equal(sublet_fault_injected(f2, SUBLET_FAULT_SEGMENT_ALLOC), 0);
    assert_int_equal(sublet_fault_calls(f2, SUBLET_FAULT_SEGMENT_ALLOC), 1);
    sublet_backend_destroy(f2);
    sublet_backend_destroy(f1);
    sublet_backend_destroy(sim);
    sublet_backend_destroy(f);
}

/* ---- threads ------------------------------------------------------------------------ */

#define N_THREADS 4
#define N_ROUNDS 2000

typedef struct worker_arg {
    sublet_backend *b;
    int id;
    int failures;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    sublet_backend *b = w->b;
    uint64_t held[8] = {0}, sizes[8] = {0};
    sublet_event *ev = NULL;
    if (b->ops->event_create(b, &ev) != SUBLET_OK) {
        w->failures++;
        return NULL;
    }
    unsigned seed = (unsigned)w->id * 2654435761u + 1u;
    for (int r = 0; r < N_ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)((seed >> 8) % 8);
        if (held[slot]) {
            if (b->ops->segment_free(b, held[slot], sizes[slot]) != SUBLET_OK)
                w->failures++;
            held[slot] = 0;
        } else {
            sizes[slot] = (uint64_t)(1 + (seed >> 16) % 16) * 512 * KiB;
            if (b->ops->segment_alloc(b, sizes[slot], 0, &held[slot]) != SUBLET_OK) {
                w->failures++;
                held[slot] = 0;
            }
        }
        int done = 0;
        if (b->ops->event_record(b, ev, (sublet_stream)w->id) != SUBLET_OK ||
            b->ops->event_query(b, ev, &done) != SUBLET_OK)
            w->failures++;
        if ((r & 63) == 0 && b->ops->event_synchronize(b, ev) != SUBLET_OK)
            w->failures++;
    }
    for (int i = 0; i < 8; i++)
        if (held[i] && b->ops->segment_free(b, held[i], sizes[i]) != SUBLET_OK)
            w->failures++;
    if (b->ops->event_destroy(b, ev) != SUBLET_OK)
        w->failures++;
    return NULL;
}

static void run_threads(sublet_backend *b)
{
    pthread_t t[N_THREADS];
    worker_arg args[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        args[i].b = b;
        args[i].id = i + 1;
        args[i].failures = 0;
        assert_int_equal(pthread_create(&t[i], NULL, worker, &args[i]), 0);
    }
    /* Meanwhile, poke the test-side API from this thread. */
    uint64_t fr = 0, tot = 0;
    for (int i = 0; i < 200; i++) {
        assert_int_equal(b->ops->mem_info(b, &fr, &tot), SUBLET_OK);
        if (strcmp(b->name, "sim") == 0) {
            sublet_sim_complete_all(b);
            (void)sublet_sim_used(b);
            (void)sublet_sim_segments(b);
        }
    }
    for (int i = 0; i < N_THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(args[i].failures, 0);
    }
}

static void test_threads_sim(void **state)
{
    (void)state;
    sublet_backend *b = new_sim(4 * GiB);
    run_threads(b);
    assert_int_equal(sublet_sim_used(b), 0);
    assert_int_equal(sublet_sim_segments(b), 0);
    sublet_backend_destroy(b);
}

static void test_threads_host_fault(void **state)
{
    (void)state;
    sublet_backend *h = new_host(GiB);
    sublet_backend *f = NULL;
    assert_int_equal(sublet_fault_create(h, &f), SUBLET_OK);
    run_threads(f);
    assert_int_equal(sublet_fault_calls(f, SUBLET_FAULT_EVENT_CREATE), N_THREADS);
    uint64_t fr = 0, tot = 0;
    assert_int_equal(h->ops->mem_info(h, &fr, &tot), SUBLET_OK);
    assert_int_equal(fr, GiB);
    sublet_backend_destroy(f);
    sublet_backend_destroy(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_sim_deterministic),
        cmocka_unit_test(test_sim_hints),
        cmocka_unit_test(test_sim_capacity),
        cmocka_unit_test(test_sim_bad_free),
        cmocka_unit_test(test_sim_events),
        cmocka_unit_test(test_sim_event_epoch),
        cmocka_unit_test(test_sim_event_completions),
        cmocka_unit_test(test_sim_event_foreign),
        cmocka_unit_test(test_sim_vmm),
        cmocka_unit_test(test_host_segments),
        cmocka_unit_test(test_host_events),
        cmocka_unit_test(test_host_vmm),
        cmocka_unit_test(test_sim_alias),
        cmocka_unit_test(test_host_alias),
        cmocka_unit_test(test_fault_alias),
        cmocka_unit_test(test_fault_nth),
        cmocka_unit_test(test_fault_every),
        cmocka_unit_test(test_fault_null_vmm),
        cmocka_unit_test(test_threads_sim),
        cmocka_unit_test(test_threads_host_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
