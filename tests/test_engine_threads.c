/* sublet — the engine under concurrent use.
 *
 * Four worker threads × 20,000 operations of malloc/free on their own
 * streams, handing a share of their blocks to the next worker through a
 * mutex-protected queue (so frees cross threads), recording uses on other
 * threads' streams; one more thread runs empty_cache, completes the sim's
 * streams, reads statistics and runs sublet_check() until the workers are
 * done.  Workers check the invariants after every operation.  At the end:
 * sublet_check() passes and nothing is allocated.  Sized for TSan.  § numbers are docs/rules.md's.
 *
 * cmocka's assertions are not thread-safe, so the threads record the first
 * failure and the main thread reports it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mutex.h"
#include "support/harness.h"

#define NWORKERS 4
#define OPS_PER_WORKER 20000
#define QCAP 256
#define MAX_OWN 24

/* Workers run sublet_check() after every operation.  Under TSan, whose job
 * here is the races, a check (a full recount under the lock) costs ~100 µs,
 * so there they check after every 16th operation: the invariants themselves
 * are covered op by op by the same test in the normal and ASan builds. */
#if H_UNDER_TSAN
#define CHECK_EVERY 16
#endif
#ifndef CHECK_EVERY
#define CHECK_EVERY 1
#endif

typedef struct handoff {
    pthread_mutex_t lock;
    void *items[QCAP];
    size_t head, count;
} handoff;

typedef struct shared {
    sublet_allocator *a;
    sublet_backend *sim;
    handoff q[NWORKERS];
    atomic_int done;
    atomic_int failed;
    pthread_mutex_t fail_lock;
    char fail_msg[512];
} shared;

typedef struct worker_arg {
    shared *sh;
    int id;
} worker_arg;

static void record_failure(shared *sh, const char *fmt, ...)
{
    pthread_mutex_lock(&sh->fail_lock);
    if (!atomic_load(&sh->failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->fail_msg, sizeof sh->fail_msg, fmt, ap);
        va_end(ap);
        atomic_store(&sh->failed, 1);
    }
    pthread_mutex_unlock(&sh->fail_lock);
}

static int check(shared *sh, const char *what)
{
    static _Thread_local unsigned calls;
    if (++calls % CHECK_EVERY != 0)
        return 1;
    char msg[256];
    if (sublet_check(sh->a, msg, sizeof msg) != SUBLET_OK) {
        record_failure(sh, "sublet_check after %s: %s", what, msg);
        return 0;
    }
    return 1;
}

static int q_push(handoff *q, void *p)
{
    int ok = 0;
    pthread_mutex_lock(&q->lock);
    if (q->count < QCAP) {
        q->items[(q->head + q->count) % QCAP] = p;
        q->count++;
        ok = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static void *q_pop(handoff *q)
{
    void *p = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->count) {
        p = q->items[q->head];
        q->head = (q->head + 1) % QCAP;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return p;
}

static void *worker(void *argp)
{
    worker_arg *arg = argp;
    shared *sh = arg->sh;
    const sublet_stream my_stream = (sublet_stream)arg->id;
    void *own[MAX_OWN];
    size_t nown = 0;
    uint64_t rng = 1000 + (uint64_t)arg->id;
    for (int op = 0; op < OPS_PER_WORKER && !atomic_load(&sh->failed); op++) {
        uint64_t r = h_rand_range(&rng, 0, 100);
        if (r < 45 && nown < MAX_OWN) {
            uint64_t n = h_rand_range(&rng, 0, 8) == 0 ? h_rand_range(&rng, MiB, 24 * MiB)
                                                       : h_rand_range(&rng, 1, 64 * KiB);
            void *p = NULL;
            sublet_status st = sublet_malloc(sh->a, n, my_stream, &p);
            if (!check(sh, "malloc"))
                break;
            if (st == SUBLET_ERR_OOM)
                continue;
            if (st != SUBLET_OK || !p) {
                record_failure(sh, "malloc(%llu): %s", (unsigned long long)n,
                               sublet_status_name(st));
                break;
            }
            uint64_t base = 0, size = 0;
            if (sublet_block_info(sh->a, p, &base, &size, NULL) != SUBLET_OK ||
                base != h_addr(p) || size < n) {
                record_failure(sh, "block_info of a fresh block");
                break;
            }
            own[nown++] = p;
        } else if (r < 70 && nown) {
            size_t i = (size_t)h_rand_range(&rng, 0, nown);
            void *p = own[i];
            own[i] = own[--nown];
            if (h_rand_range(&rng, 0, 4) == 0) {
                sublet_stream other = (my_stream + 1) % NWORKERS;
                if (sublet_record_stream(sh->a, p, other) != SUBLET_OK) {
                    record_failure(sh, "record_stream");
                    break;
                }
            }
            sublet_status st = sublet_free(sh->a, p);
            if (!check(sh, "free"))
                break;
            if (st != SUBLET_OK) {
                record_failure(sh, "free: %s", sublet_status_name(st));
                break;
            }
        } else if (r < 85 && nown) {
            /* hand a block to the next worker, who frees it */
            size_t i = (size_t)h_rand_range(&rng, 0, nown);
            if (q_push(&sh->q[(arg->id + 1) % NWORKERS], own[i]))
                own[i] = own[--nown];
        } else {
            void *p = q_pop(&sh->q[arg->id]);
            if (p) {
                sublet_status st = sublet_free(sh->a, p);
                if (!check(sh, "cross-thread free"))
                    break;
                if (st != SUBLET_OK) {
                    record_failure(sh, "cross-thread free: %s", sublet_status_name(st));
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < nown; i++)
        if (sublet_free(sh->a, own[i]) != SUBLET_OK)
            record_failure(sh, "final free");
    atomic_fetch_add(&sh->done, 1);
    return NULL;
}

static void *janitor(void *argp)
{
    shared *sh = argp;
    uint64_t rng = 77;
    long rounds = 0;
    while (atomic_load(&sh->done) < NWORKERS && !atomic_load(&sh->failed)) {
        uint64_t r = h_rand_range(&rng, 0, 4);
        if (r == 0) {
            if (sublet_empty_cache(sh->a) != SUBLET_OK)
                record_failure(sh, "empty_cache");
        } else if (r == 1) {
            sublet_sim_complete_all(sh->sim);
            if (sublet_process_events(sh->a) != SUBLET_OK)
                record_failure(sh, "process_events");
        } else {
            sublet_stats s;
            sublet_stats_read(sh->a, &s);
            if (s.active[SUBLET_POOL_ALL].current < s.allocation[SUBLET_POOL_ALL].current ||
                s.reserved_bytes[SUBLET_POOL_ALL].current <
                    s.active_bytes[SUBLET_POOL_ALL].current +
                        s.inactive_split_bytes[SUBLET_POOL_ALL].current ||
                s.allocated_bytes[SUBLET_POOL_ALL].current >
                    s.active_bytes[SUBLET_POOL_ALL].current)
                record_failure(sh, "stats invariants (§7.3) broken in a snapshot");
        }
        check(sh, "janitor step");
        rounds++;
        struct timespec ts = {0, 100 * 1000}; /* let the workers have the lock */
        nanosleep(&ts, NULL);
    }
    return (void *)(intptr_t)rounds;
}

static void test_threads(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 4 * GiB, "");
    static shared sh;
    memset(&sh, 0, sizeof sh);
    sh.a = e.a;
    sh.sim = e.inner;
    pthread_mutex_init(&sh.fail_lock, NULL);
    for (int i = 0; i < NWORKERS; i++)
        pthread_mutex_init(&sh.q[i].lock, NULL);
    pthread_t th[NWORKERS], jt;
    worker_arg args[NWORKERS];
    for (int i = 0; i < NWORKERS; i++) {
        args[i] = (worker_arg){&sh, i};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    assert_int_equal(pthread_create(&jt, NULL, janitor, &sh), 0);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    void *rounds = NULL;
    pthread_join(jt, &rounds);
    /* blocks still in the queues */
    for (int i = 0; i < NWORKERS; i++) {
        void *p;
        while ((p = q_pop(&sh.q[i])) != NULL)
            h_free(e.a, p);
    }
    if (atomic_load(&sh.failed))
        fail_msg("%s", sh.fail_msg);
    CHECK(e.a);
    sublet_sim_complete_all(e.inner);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "allocation.all.current"), 0);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 0);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.current"), 0);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    print_message("threads: janitor ran %ld rounds, %lld device allocs, %lld OOMs\n",
                  (long)(intptr_t)rounds, (long long)h_stat(e.a, "num_device_alloc"),
                  (long long)h_stat(e.a, "num_ooms"));
    for (int i = 0; i < NWORKERS; i++)
        pthread_mutex_destroy(&sh.q[i].lock);
    pthread_mutex_destroy(&sh.fail_lock);
    h_env_fini(&e);
}

/* The allocator's lock (src/base/mutex.h) on its own: threads that add to
 * one plain counter under it, some holding it long enough that the others
 * spin out and sleep in the futex, lose no increment. */
#define MUTEX_THREADS 4
#define MUTEX_ROUNDS (H_UNDER_TSAN ? 20000 : 200000)

typedef struct mutex_ctx {
    sl_mutex m;
    uint64_t counter; /* only under m */
} mutex_ctx;

static void *mutex_worker(void *arg)
{
    mutex_ctx *c = arg;
    for (int i = 0; i < MUTEX_ROUNDS; i++) {
        sl_mutex_lock(&c->m);
        uint64_t v = c->counter;
        if (i % 1000 == 0) { /* a long hold: waiters go to sleep */
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
        c->counter = v + 1;
        sl_mutex_unlock(&c->m);
    }
    return NULL;
}

static void test_mutex(void **state)
{
    (void)state;
    mutex_ctx c = {.counter = 0};
    sl_mutex_init(&c.m);
    pthread_t t[MUTEX_THREADS];
    for (int i = 0; i < MUTEX_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, mutex_worker, &c), 0);
    for (int i = 0; i < MUTEX_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(c.counter, (uint64_t)MUTEX_THREADS * MUTEX_ROUNDS);
    sl_mutex_destroy(&c.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_mutex),
    };
    if (getenv("SUBLET_TEST_FILTER")) /* e.g. SUBLET_TEST_FILTER='test_model_*' */
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
