/* sublet — the replay's address map (src/replay.c: trace address -> engine
 * address, and trace address -> a deferred free's stream), through replays
 * of made-up traces.  Placement hints are off, so the engine's addresses are
 * not the trace's and every free must be looked up to be right.  Addresses
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

static void row(sublet_trace *t, uint32_t kind, uint64_t addr, uint64_t size)
{
    sublet_trace_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    e.line = sublet_trace_count(t) + 1;
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
}

typedef struct expect {
    uint64_t allocs, frees, errors, deferred, live;
} expect;

static void replay_and_check(const sublet_trace *t, const expect *x)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.placement_hints = 0;
    o.check = 1;
    sublet_replay_result r;
    char err[256];
    assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_OK);
    assert_int_equal(r.allocs, x->allocs);
    assert_int_equal(r.frees, x->frees);
    assert_int_equal(r.errors, x->errors);
    assert_int_equal(r.deferred_frees, x->deferred);
    assert_int_equal(r.stats_end.allocation[SUBLET_POOL_ALL].current, (int64_t)x->live);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_addresses),
        cmocka_unit_test(test_grows_past_its_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
