/* sublet — thread stress (issue 8, item 3).
 *
 * Eight threads share one allocator on the sim backend and each runs OPS
 * operations from one seeded mix:
 *   - malloc on the thread's own stream (small, medium and large requests);
 *   - free of its own blocks, a share of them first recorded on another
 *     thread's stream or on a side stream (the free then waits for events);
 *   - handing a block to whichever thread takes it next through one shared
 *     queue; the taker records it on its own stream now and then and frees
 *     it (frees cross threads);
 *   - record_stream on a live block;
 *   - completing a stream on the sim and process_events;
 *   - empty_cache, concurrently with everything else;
 *   - reads: sublet_stats_read, sublet_frag_read, sublet_max_allocatable and
 *     sublet_summary, each checked for internal consistency (one read is
 *     one locked snapshot);
 *   - sublet_check() every OPS/2000 operations (a full recount under the
 *     lock).
 * A striped ownership table holds every live block the test knows of: a
 * malloc that returns an address some thread still holds fails the test,
 * and so does a free of a block the table does not hold.  After a malloc,
 * sublet_block_info must give the block's start, a size >= the request and
 * the request.  At the end: every block freed, streams completed,
 * sublet_check() passes, nothing is allocated or active, and empty_cache
 * gives every byte back (sublet_sim_used == 0).
 *
 * OPS per thread: env SUBLET_STRESS_OPS, default 20,000.
 * scripts/stress runs 8 x 1,000,000 under TSan.
 *
 * cmocka's assertions are not thread-safe: threads record the first failure
 * and the main thread reports it. */
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

#include "support/harness.h"

#define NTHREADS 8
#define MAX_OWN 32
#define QCAP 2048
#define NSTRIPES 64
#define SIDE_STREAMS 4 /* streams 100..103: used, never allocated on */

#define DEFAULT_OPS 20000 /* per thread; about 4 s under TSan */

/* ---- the ownership table ------------------------------------------------------ */

typedef struct stripe {
    pthread_mutex_t lock;
    uint64_t *addr;
    size_t n, cap;
} stripe;

typedef struct shared {
    sublet_allocator *a;
    sublet_backend *sim;
    long ops;
    long check_every;
    /* one handoff queue for all threads */
    pthread_mutex_t qlock;
    void *q[QCAP];
    size_t qhead, qcount;
    stripe owners[NSTRIPES];
    atomic_int failed;
    pthread_mutex_t fail_lock;
    char fail_msg[512];
    /* totals */
    atomic_long n_malloc, n_oom, n_free, n_cross, n_record, n_complete, n_empty, n_reads,
        n_summary, n_check;
} shared;

typedef struct thread_arg {
    shared *sh;
    int id;
} thread_arg;

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

static stripe *stripe_of(shared *sh, uint64_t addr)
{
    uint64_t h = (addr >> 9) * UINT64_C(0x9E3779B97F4A7C15);
    return &sh->owners[h >> 58]; /* 64 stripes */
}

/* 0 when addr was already held (the allocator handed it out twice). */
static int own_insert(shared *sh, uint64_t addr)
{
    stripe *s = stripe_of(sh, addr);
    int ok = 1;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n; i++)
        if (s->addr[i] == addr)
            ok = 0;
    if (ok) {
        if (s->n == s->cap) {
            size_t nc = s->cap ? s->cap * 2 : 64;
            uint64_t *n = realloc(s->addr, nc * sizeof *n);
            if (!n) {
                pthread_mutex_unlock(&s->lock);
                return -1;
            }
            s->addr = n;
            s->cap = nc;
        }
        s->addr[s->n++] = addr;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

/* 0 when addr was not held. */
static int own_remove(shared *sh, uint64_t addr)
{
    stripe *s = stripe_of(sh, addr);
    int ok = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n; i++)
        if (s->addr[i] == addr) {
            s->addr[i] = s->addr[--s->n];
            ok = 1;
            break;
        }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static size_t own_count(shared *sh)
{
    size_t n = 0;
    for (int i = 0; i < NSTRIPES; i++) {
        pthread_mutex_lock(&sh->owners[i].lock);
        n += sh->owners[i].n;
        pthread_mutex_unlock(&sh->owners[i].lock);
    }
    return n;
}

/* ---- the handoff queue --------------------------------------------------------------- */

static int q_push(shared *sh, void *p)
{
    int ok = 0;
    pthread_mutex_lock(&sh->qlock);
    if (sh->qcount < QCAP) {
        sh->q[(sh->qhead + sh->qcount) % QCAP] = p;
        sh->qcount++;
        ok = 1;
    }
    pthread_mutex_unlock(&sh->qlock);
    return ok;
}

static void *q_pop(shared *sh)
{
    void *p = NULL;
    pthread_mutex_lock(&sh->qlock);
    if (sh->qcount) {
        p = sh->q[sh->qhead];
        sh->qhead = (sh->qhead + 1) % QCAP;
        sh->qcount--;
    }
    pthread_mutex_unlock(&sh->qlock);
    return p;
}

/* ---- operations --------------------------------------------------------------------- */

static int do_check(shared *sh, const char *what, int id, long op)
{
    char msg[256];
    atomic_fetch_add(&sh->n_check, 1);
    if (sublet_check(sh->a, msg, sizeof msg) != SUBLET_OK) {
        record_failure(sh, "thread %d op %ld: sublet_check after %s: %s", id, op, what, msg);
        return 0;
    }
    return 1;
}

static uint64_t pick_size(uint64_t *rng)
{
    uint64_t r = h_rand_range(rng, 0, 100);
    if (r < 70)
        return h_rand_range(rng, 1, 64 * KiB);
    if (r < 90)
        return h_rand_range(rng, 64 * KiB, 2 * MiB);
    if (r < 98)
        return h_rand_range(rng, 2 * MiB, 12 * MiB);
    return h_rand_range(rng, 12 * MiB, 40 * MiB);
}

/* Free p (which this thread holds), maybe after recording it on `use`. */
static int do_free(shared *sh, void *p, int id, long op, const char *what)
{
    if (!own_remove(sh, h_addr(p))) {
        record_failure(sh, "thread %d op %ld: %s of %p, which nobody holds", id, op, what, p);
        return 0;
    }
    sublet_status st = sublet_free(sh->a, p);
    if (st != SUBLET_OK) {
        record_failure(sh, "thread %d op %ld: %s(%p): %s", id, op, what, p,
                       sublet_status_name(st));
        return 0;
    }
    atomic_fetch_add(&sh->n_free, 1);
    return 1;
}

static int do_record(shared *sh, void *p, sublet_stream s, int id, long op)
{
    sublet_status st = sublet_record_stream(sh->a, p, s);
    if (st != SUBLET_OK) {
        record_failure(sh, "thread %d op %ld: record_stream(%p, %llu): %s", id, op, p,
                       (unsigned long long)s, sublet_status_name(st));
        return 0;
    }
    atomic_fetch_add(&sh->n_record, 1);
    return 1;
}

static int read_stats(shared *sh, int id, long op, uint64_t which, sublet_stream stream)
{
    atomic_fetch_add(&sh->n_reads, 1);
    if (which == 0) {
        sublet_stats s;
        sublet_stats_read(sh->a, &s);
        for (int k = 0; k < SUBLET_POOL_KINDS; k++) {
            if (s.allocated_bytes[k].current < 0 ||
                s.allocated_bytes[k].current > s.active_bytes[k].current ||
                s.active_bytes[k].current > s.reserved_bytes[k].current ||
                s.allocation[k].current > s.active[k].current ||
                s.requested_bytes[k].current > s.active_bytes[k].current ||
                s.reserved_bytes[k].peak < s.reserved_bytes[k].current) {
                record_failure(sh, "thread %d op %ld: inconsistent stats snapshot (pool %d)", id,
                               op, k);
                return 0;
            }
        }
        if (s.allocation[SUBLET_POOL_ALL].current !=
                s.allocation[SUBLET_POOL_SMALL].current + s.allocation[SUBLET_POOL_LARGE].current ||
            s.reserved_bytes[SUBLET_POOL_ALL].current !=
                s.reserved_bytes[SUBLET_POOL_SMALL].current +
                    s.reserved_bytes[SUBLET_POOL_LARGE].current) {
            record_failure(sh, "thread %d op %ld: pool totals do not add up", id, op);
            return 0;
        }
    } else if (which == 1) {
        sublet_frag_stats f;
        int kind = (int)(op % SUBLET_POOL_KINDS);
        if (sublet_frag_read(sh->a, kind, SUBLET_STREAM_ALL, &f) != SUBLET_OK) {
            record_failure(sh, "thread %d op %ld: frag_read failed", id, op);
            return 0;
        }
        /* one locked snapshot: every reserved byte is active or cached free */
        if (f.reserved_bytes != f.active_bytes + f.free_bytes ||
            f.allocated_bytes > f.active_bytes || f.largest_free_block > f.free_bytes ||
            (f.free_blocks == 0) != (f.free_bytes == 0) || f.external < 0.0 ||
            f.external > 1.0 || f.unused < 0.0 || f.unused > 1.0) {
            record_failure(sh,
                           "thread %d op %ld: frag pool %d: reserved %llu active %llu free "
                           "%llu largest %llu blocks %llu",
                           id, op, kind, (unsigned long long)f.reserved_bytes,
                           (unsigned long long)f.active_bytes, (unsigned long long)f.free_bytes,
                           (unsigned long long)f.largest_free_block,
                           (unsigned long long)f.free_blocks);
            return 0;
        }
        sublet_frag_stats fs;
        if (sublet_frag_read(sh->a, SUBLET_POOL_ALL, stream, &fs) != SUBLET_OK) {
            record_failure(sh, "thread %d op %ld: frag_read(stream) failed", id, op);
            return 0;
        }
    } else {
        uint64_t m = sublet_max_allocatable(sh->a, stream);
        if (m > 64 * GiB) {
            record_failure(sh, "thread %d op %ld: max_allocatable %llu", id, op,
                           (unsigned long long)m);
            return 0;
        }
    }
    return 1;
}

static int read_summary(shared *sh, int id, long op)
{
    static _Thread_local char buf[32768];
    atomic_fetch_add(&sh->n_summary, 1);
    size_t n = sublet_summary(sh->a, (int)(op & 1), buf, sizeof buf);
    if (n == 0 || n >= sizeof buf || !strstr(buf, "PyTorch CUDA memory summary")) {
        record_failure(sh, "thread %d op %ld: summary of %zu bytes", id, op, n);
        return 0;
    }
    return 1;
}

static void *worker(void *argp)
{
    thread_arg *arg = argp;
    shared *sh = arg->sh;
    const int id = arg->id;
    const sublet_stream mine = (sublet_stream)id;
    void *own[MAX_OWN];
    size_t nown = 0;
    uint64_t rng = UINT64_C(0x57e55) + (uint64_t)id * 7919;
    for (long op = 0; op < sh->ops; op++) {
        if ((op & 255) == 0 && atomic_load(&sh->failed))
            break;
        uint64_t r = h_rand_range(&rng, 0, 1000);
        if (r < 420 && nown < MAX_OWN) {
            uint64_t n = pick_size(&rng);
            void *p = NULL;
            sublet_status st = sublet_malloc(sh->a, n, mine, &p);
            atomic_fetch_add(&sh->n_malloc, 1);
            if (st == SUBLET_ERR_OOM && !p) {
                atomic_fetch_add(&sh->n_oom, 1);
                continue;
            }
            if (st != SUBLET_OK || !p) {
                record_failure(sh, "thread %d op %ld: malloc(%llu): %s", id, op,
                               (unsigned long long)n, sublet_status_name(st));
                break;
            }
            uint64_t base = 0, size = 0, req = 0;
            if (sublet_block_info(sh->a, p, &base, &size, &req) != SUBLET_OK ||
                base != h_addr(p) || size < n || req != n) {
                record_failure(sh, "thread %d op %ld: block_info of a fresh block", id, op);
                break;
            }
            int ins = own_insert(sh, h_addr(p));
            if (ins != 1) {
                record_failure(sh, "thread %d op %ld: malloc returned %p, %s", id, op, p,
                               ins == 0 ? "which another holder still holds" : "no memory");
                break;
            }
            own[nown++] = p;
        } else if (r < 640 && nown) {
            size_t i = (size_t)h_rand_range(&rng, 0, nown);
            void *p = own[i];
            own[i] = own[--nown];
            if (h_rand_range(&rng, 0, 10) < 3) {
                uint64_t k = h_rand_range(&rng, 0, NTHREADS + SIDE_STREAMS);
                sublet_stream s = k < NTHREADS ? (sublet_stream)k : 100 + (k - NTHREADS);
                if (!do_record(sh, p, s, id, op))
                    break;
            }
            if (!do_free(sh, p, id, op, "free"))
                break;
        } else if (r < 760 && nown) {
            size_t i = (size_t)h_rand_range(&rng, 0, nown);
            if (q_push(sh, own[i]))
                own[i] = own[--nown];
        } else if (r < 880) {
            void *p = q_pop(sh);
            if (p) {
                if (h_rand_range(&rng, 0, 2) == 0 && !do_record(sh, p, mine, id, op))
                    break;
                if (!do_free(sh, p, id, op, "cross-thread free"))
                    break;
                atomic_fetch_add(&sh->n_cross, 1);
            }
        } else if (r < 920 && nown) {
            uint64_t k = h_rand_range(&rng, 0, NTHREADS + SIDE_STREAMS);
            sublet_stream s = k < NTHREADS ? (sublet_stream)k : 100 + (k - NTHREADS);
            if (!do_record(sh, own[h_rand_range(&rng, 0, nown)], s, id, op))
                break;
        } else if (r < 955) {
            uint64_t k = h_rand_range(&rng, 0, NTHREADS + SIDE_STREAMS);
            sublet_sim_stream_complete(sh->sim, k < NTHREADS ? k : 100 + (k - NTHREADS));
            atomic_fetch_add(&sh->n_complete, 1);
            sublet_status st = sublet_process_events(sh->a);
            if (st != SUBLET_OK) {
                record_failure(sh, "thread %d op %ld: process_events: %s", id, op,
                               sublet_status_name(st));
                break;
            }
        } else if (r < 960) {
            atomic_fetch_add(&sh->n_empty, 1);
            sublet_status st = sublet_empty_cache(sh->a);
            if (st != SUBLET_OK) {
                record_failure(sh, "thread %d op %ld: empty_cache: %s", id, op,
                               sublet_status_name(st));
                break;
            }
        } else if (r < 999) {
            if (!read_stats(sh, id, op, h_rand_range(&rng, 0, 3),
                            (sublet_stream)h_rand_range(&rng, 0, NTHREADS)))
                break;
        } else {
            if (!read_summary(sh, id, op))
                break;
        }
        if (op % sh->check_every == 0 && !do_check(sh, "an operation", id, op))
            break;
    }
    for (size_t i = 0; i < nown; i++)
        if (!do_free(sh, own[i], id, -1, "final free"))
            break;
    return NULL;
}

static long env_ops(void)
{
    const char *v = getenv("SUBLET_STRESS_OPS");
    if (v && *v) {
        char *end = NULL;
        long n = strtol(v, &end, 10);
        if (end && *end == '\0' && n > 0)
            return n;
    }
    return DEFAULT_OPS;
}

static void test_stress(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 16 * GiB, "");
    static shared sh;
    memset(&sh, 0, sizeof sh);
    sh.a = e.a;
    sh.sim = e.inner;
    sh.ops = env_ops();
    sh.check_every = sh.ops / 2000 > 0 ? sh.ops / 2000 : 1;
    pthread_mutex_init(&sh.fail_lock, NULL);
    pthread_mutex_init(&sh.qlock, NULL);
    for (int i = 0; i < NSTRIPES; i++)
        pthread_mutex_init(&sh.owners[i].lock, NULL);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th[NTHREADS];
    thread_arg args[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        args[i] = (thread_arg){&sh, i};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (atomic_load(&sh.failed))
        fail_msg("%s", sh.fail_msg);

    /* blocks still in the queue */
    void *p;
    while ((p = q_pop(&sh)) != NULL) {
        assert_true(own_remove(&sh, h_addr(p)));
        h_free(e.a, p);
    }
    assert_int_equal(own_count(&sh), 0);
    CHECK(e.a);
    assert_int_equal(h_stat(e.a, "allocation.all.current"), 0);
    assert_int_equal(h_stat(e.a, "allocated_bytes.all.current"), 0);
    sublet_sim_complete_all(e.inner);
    h_process_events(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);
    assert_int_equal(h_stat(e.a, "active_bytes.all.current"), 0);
    assert_int_equal(h_stat(e.a, "requested_bytes.all.current"), 0);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(h_stat(e.a, "segment.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    assert_int_equal(sublet_sim_segments(e.inner), 0);

    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    print_message("stress: %d threads x %ld ops in %.2f s: %ld mallocs (%ld OOM), %ld frees "
                  "(%ld cross-thread), %ld record_stream, %ld completions, %ld empty_cache, "
                  "%ld reads, %ld summaries, %ld checks; %lld device allocs\n",
                  NTHREADS, sh.ops, secs, atomic_load(&sh.n_malloc), atomic_load(&sh.n_oom),
                  atomic_load(&sh.n_free), atomic_load(&sh.n_cross), atomic_load(&sh.n_record),
                  atomic_load(&sh.n_complete), atomic_load(&sh.n_empty),
                  atomic_load(&sh.n_reads), atomic_load(&sh.n_summary),
                  atomic_load(&sh.n_check), (long long)h_stat(e.a, "num_device_alloc"));
    for (int i = 0; i < NSTRIPES; i++) {
        free(sh.owners[i].addr);
        pthread_mutex_destroy(&sh.owners[i].lock);
    }
    pthread_mutex_destroy(&sh.qlock);
    pthread_mutex_destroy(&sh.fail_lock);
    h_env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress),
    };
    if (getenv("SUBLET_TEST_FILTER"))
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
