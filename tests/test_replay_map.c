/* sublet — the replay's address map (src/analysis/replay_addrs.c: trace
 * address -> engine address, and trace address -> a deferred free's stream),
 * through replays of made-up traces.  Placement hints are off in the first
 * tests, so the engine's addresses are not the trace's and every free must
 * be looked up to be right; the last replays a live allocator's rows, placed
 * as recorded (the identity, no table), with wrong frees added, until an
 * alloc placed elsewhere makes the replay build its table.  Addresses
 * include 0 (kept beside the table), neighbours 512 bytes apart (one hash
 * cluster after another), frees of addresses never allocated (errors, and a
 * table sized too small from the rows, which then grows), and frees left
 * pending on a stream until a later free_completed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sublet/replay.h"
#include "sublet/trace.h"
#include "support/harness.h"

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void row_on(sublet_trace *t, uint32_t kind, uint64_t addr, uint64_t size,
                   sublet_stream stream)
{
    sublet_trace_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    e.stream = stream;
    e.line = sublet_trace_count(t) + 1;
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
}

static void row(sublet_trace *t, uint32_t kind, uint64_t addr, uint64_t size)
{
    row_on(t, kind, addr, size, 0);
}

typedef struct expect {
    uint64_t allocs, frees, errors, deferred, live;
} expect;

/* Replay t under o (the invariant checker on) and check the counts. */
static void replay_expecting(const sublet_trace *t, sublet_replay_options *o, const expect *x,
                             sublet_replay_result *r)
{
    o->check = 1;
    char err[256];
    assert_int_equal(sublet_replay_run(t, o, r, err, sizeof err), SUBLET_OK);
    assert_int_equal(r->allocs, x->allocs);
    assert_int_equal(r->frees, x->frees);
    assert_int_equal(r->errors, x->errors);
    assert_int_equal(r->deferred_frees, x->deferred);
    assert_int_equal(r->stats_end.allocation[SUBLET_POOL_ALL].current, (int64_t)x->live);
}

static void replay_and_check(const sublet_trace *t, const expect *x)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.placement_hints = 0;
    sublet_replay_result r;
    replay_expecting(t, &o, x, &r);
    sublet_replay_result_free(&r);
}

/* Allocs and frees at random among a few thousand trace addresses. */
static void test_random_addresses(void **state)
{
    (void)state;
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    enum { SLOTS = 3000 };
    static uint64_t addr[SLOTS];
    static int live[SLOTS], pending[SLOTS];
    uint64_t s = 7;
    for (size_t i = 0; i < SLOTS; i++) /* clusters of neighbours, and 0 */
        addr[i] = i == 0 ? 0 : UINT64_C(0x7f0000000000) + (i / 16) * (UINT64_C(1) << 24) +
                                   (i % 16) * 512;
    expect x = {0};
    size_t just_deferred = SLOTS;
    int steps = H_UNDER_TSAN ? 3000 : 12000;
    for (int step = 0; step < steps; step++) {
        size_t i = rng(&s) % SLOTS;
        uint64_t r = rng(&s) % 100;
        if (i == just_deferred)
            continue; /* completing it on the next row would free it at once */
        just_deferred = SLOTS;
        if (pending[i]) { /* its deferred free completes */
            row(t, SUBLET_ACT_FREE_COMPLETED, addr[i], 512);
            pending[i] = 0;
        } else if (!live[i]) {
            if (r < 90) {
                row(t, SUBLET_ACT_ALLOC, addr[i], 512 * (1 + rng(&s) % 8));
                live[i] = 1;
                x.allocs++;
                x.live++;
            } else { /* a free of an address not allocated */
                row(t, SUBLET_ACT_FREE_REQUESTED, addr[i], 512);
                x.errors++;
            }
        } else {
            row(t, SUBLET_ACT_FREE_REQUESTED, addr[i], 512);
            live[i] = 0;
            x.frees++;
            x.live--;
            if (r < 80) {
                row(t, SUBLET_ACT_FREE_COMPLETED, addr[i], 512);
            } else { /* left pending on a stream of its own */
                pending[i] = 1;
                just_deferred = i;
                x.deferred++;
            }
        }
    }
    replay_and_check(t, &x);
    sublet_trace_free(t);
}

/* Each alloc followed by a free of an address never allocated: counting
 * rows, the most live looks like one, so the table starts at its smallest
 * and grows many times while the real count climbs. */
static void test_grows_past_its_estimate(void **state)
{
    (void)state;
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    expect x = {0};
    const uint64_t n = 5000;
    for (uint64_t i = 0; i < n; i++) {
        row(t, SUBLET_ACT_ALLOC, i * 512, 512); /* the first at address 0 */
        row(t, SUBLET_ACT_FREE_REQUESTED, UINT64_C(1) << 40 | i * 512, 512);
        x.allocs++;
        x.errors++;
    }
    x.live = n;
    for (uint64_t i = 0; i < n; i += 2) { /* then every other one freed */
        row(t, SUBLET_ACT_FREE_REQUESTED, i * 512, 512);
        row(t, SUBLET_ACT_FREE_COMPLETED, i * 512, 512);
        x.frees++;
        x.live--;
    }
    replay_and_check(t, &x);
    sublet_trace_free(t);
}

/* ---- the identity (replay_addrs.c): a trace the engine places as recorded ---- */

static void record_row(void *user, sublet_action act, uint64_t addr, uint64_t size,
                       sublet_stream stream)
{
    row_on(user, act, addr, size, stream);
}

typedef struct watch {
    uint64_t row;  /* the row whose engine alloc is wanted */
    int in_row;
    uint64_t addr; /* where the engine put it */
} watch;

static void watch_before(void *user, sublet_allocator *a, uint64_t index,
                         const sublet_trace_event *ev)
{
    (void)a;
    (void)ev;
    watch *w = user;
    w->in_row = index == w->row;
}

static void watch_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                        sublet_stream stream)
{
    (void)size;
    (void)stream;
    watch *w = user;
    if (w->in_row && act == SUBLET_ACT_ALLOC)
        w->addr = addr;
}

/* Replay t with placement hints, check it against x, and return where the
 * engine put the alloc of row `row`. */
static uint64_t replay_hinted(const sublet_trace *t, const expect *x, uint64_t matched,
                              uint64_t row_index)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o); /* placement hints on */
    watch w = {row_index, 0, 0};
    o.before_event = watch_before;
    o.trace = watch_trace;
    o.observer_user = &w;
    sublet_replay_result r;
    replay_expecting(t, &o, x, &r);
    assert_int_equal(r.fidelity.addresses_matched, matched);
    sublet_replay_result_free(&r);
    return w.addr;
}

/* Frees the trace gets wrong while every block is where it was recorded (no
 * table: the engine answers), then an alloc placed elsewhere, after which
 * the table built from the engine's blocks answers.  The rows of a live
 * allocator on the sim (what it emitted), so that the replay places them
 * as recorded; the wrong rows added by hand. */
static void test_identity_then_table(void **state)
{
    (void)state;
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    h_env env;
    h_env_init(&env, H_SIM, 80 * GiB, "");
    sublet_trace_set(env.a, record_row, t);
    static const uint64_t sizes[10] = {512,     3 * MiB, 4096,   20 * MiB, 700,
                                       2 * MiB, 1536,    9 * MiB, 100,     64 * MiB};
    void *b[10];
    expect x = {0};
    for (int i = 0; i < 10; i++) {
        b[i] = h_malloc(env.a, sizes[i], 0);
        x.allocs++;
        x.live++;
    }
    h_free(env.a, b[1]);
    h_free(env.a, b[3]);
    x.frees += 2;
    x.live -= 2;
    uint64_t matched = x.allocs;
    /* wrong frees under the identity, each an error that changes nothing */
    const uint64_t never = UINT64_C(0x7e0000000000);
    row(t, SUBLET_ACT_FREE_REQUESTED, never, 512); /* never allocated, left pending */
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[1]), sizes[1]); /* freed already, completed */
    row(t, SUBLET_ACT_FREE_COMPLETED, h_addr(b[1]), sizes[1]);
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[2]) + 512, 512); /* inside a live block */
    row(t, SUBLET_ACT_FREE_COMPLETED, h_addr(b[2]) + 512, 512);
    row(t, SUBLET_ACT_FREE_REQUESTED, 0, 512);
    row(t, SUBLET_ACT_FREE_COMPLETED, 0, 512);
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[3]), sizes[3]); /* freed already, pending */
    /* inside a live block, pending: a record_stream would have protected
     * b[4], whose free below would then wait (deferred_frees) */
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[4]) + 256, 256);
    x.errors += 6;
    /* the allocator goes on, and the replay places it as recorded */
    h_free(env.a, b[4]);
    h_free(env.a, b[0]);
    x.frees += 2;
    x.live -= 2;
    b[4] = h_malloc(env.a, 600, 0);
    b[0] = h_malloc(env.a, 5 * MiB, 0);
    x.allocs += 2;
    x.live += 2;
    matched += 2;
    sublet_trace_set(env.a, NULL, NULL);
    /* a free left waiting on a stream when the table is built: its block is
     * not allocated, so the table has no entry for it */
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[5]), sizes[5]);
    x.frees++;
    x.live--;
    x.deferred++;
    /* an alloc the engine places elsewhere: the table is built */
    const uint64_t odd = UINT64_C(0x7d0000000000);
    uint64_t odd_row = sublet_trace_count(t);
    row(t, SUBLET_ACT_ALLOC, odd, 1 * MiB);
    x.allocs++;
    x.live++;
    row(t, SUBLET_ACT_FREE_COMPLETED, h_addr(b[5]), sizes[5]);
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[5]), sizes[5]); /* freed already */
    row(t, SUBLET_ACT_FREE_COMPLETED, h_addr(b[5]), sizes[5]);
    row(t, SUBLET_ACT_FREE_REQUESTED, never, 512);
    row(t, SUBLET_ACT_FREE_COMPLETED, never, 512);
    row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[6]) + 512, 512);
    row(t, SUBLET_ACT_FREE_COMPLETED, h_addr(b[6]) + 512, 512);
    x.errors += 3;
    /* blocks allocated under the identity, and the odd one, freed by the table */
    const int later[] = {0, 2, 4, 6, 7, 8, 9};
    for (size_t k = 0; k < sizeof later / sizeof later[0]; k++) {
        int i = later[k];
        uint64_t n = i == 0 ? 5 * MiB : i == 4 ? 600 : sizes[i];
        row(t, SUBLET_ACT_FREE_REQUESTED, h_addr(b[i]), n);
        row(t, SUBLET_ACT_FREE_COMPLETED, h_addr(b[i]), n);
        x.frees++;
        x.live--;
    }
    /* where the engine put the odd one: not a recorded address */
    uint64_t placed = replay_hinted(t, &x, matched, odd_row);
    assert_true(placed != 0 && placed != odd);
    row(t, SUBLET_ACT_FREE_REQUESTED, placed, 1 * MiB);
    row(t, SUBLET_ACT_FREE_COMPLETED, placed, 1 * MiB);
    x.errors++;
    row(t, SUBLET_ACT_FREE_REQUESTED, odd, 1 * MiB);
    row(t, SUBLET_ACT_FREE_COMPLETED, odd, 1 * MiB);
    x.frees++;
    x.live--;
    assert_int_equal(replay_hinted(t, &x, matched, odd_row), placed);
    h_env_fini(&env);
    sublet_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_addresses),
        cmocka_unit_test(test_grows_past_its_estimate),
        cmocka_unit_test(test_identity_then_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
