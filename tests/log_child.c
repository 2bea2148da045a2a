/* log_child — a process that logs under load until it is killed
 * (tests/cli_log_crash.sh kills it with SIGKILL at random points).
 *
 *   log_child PATH [THREADS] [SECONDS]
 *
 * THREADS threads (default 4) allocate and free through one allocator on
 * the sim backend with the event log on (writer thread, flushed every
 * 2 ms, and by thread 0 every 64 of its pairs).  Thread t's i-th request
 * is 16 * (i % 65536 + 1) + t bytes, so a reader can check that the
 * allocations of each thread it reads back are exactly that sequence's
 * first ones (nothing lost, nothing invented, nothing misread).  Each
 * thread holds up to 8 blocks at a time and frees them in a scrambled
 * order, and sleeps 1 ms every 8 pairs (about 30k events a second per
 * thread: each killed run's log stays quick to check).  It prints "ready" once the log is open, then runs for SECONDS
 * (default 30) and exits 0 (killed long before, as a rule). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sublet/log.h"
#include "sublet/sublet.h"

static sublet_allocator *a;
static sublet_log *lg;
static atomic_int stop_all;

static void *worker(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    void *held[8] = {0};
    uint64_t rnd = 0x9E3779B97F4A7C15ull * (t + 1);
    for (uint64_t i = 0; !stop_all; i++) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 7;
        rnd ^= rnd << 17;
        size_t slot = (size_t)(rnd & 7);
        if (held[slot] && sublet_free(a, held[slot]) != SUBLET_OK)
            exit(3);
        held[slot] = NULL;
        if (sublet_malloc(a, 16 * (i % 65536 + 1) + t, 0, &held[slot]) != SUBLET_OK)
            exit(4);
        if (t == 0 && i % 64 == 63)
            sublet_log_flush(lg);
        if (i % 8 == 7) { /* paced: a few tens of thousands of events per run */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: log_child PATH [THREADS] [SECONDS]\n");
        return 2;
    }
    int nthreads = argc > 2 ? atoi(argv[2]) : 4;
    int seconds = argc > 3 ? atoi(argv[3]) : 30;
    if (nthreads < 1 || nthreads > 16)
        return 2;
    sublet_backend *be = NULL;
    if (sublet_sim_create((uint64_t)1 << 40, &be) != SUBLET_OK)
        return 1;
    sublet_options o = {be, 0, ""};
    char err[256];
    if (sublet_allocator_create(&o, &a, err, sizeof err) != SUBLET_OK)
        return 1;
    sublet_log_options lo = {0};
    lo.flush_ms = 2;
    lo.buffer_bytes = 256 << 10;
    if (sublet_log_open(a, argv[1], &lo, &lg, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "log_child: %s\n", err);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    pthread_t th[16];
    for (int t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    struct timespec ts = {seconds, 0};
    nanosleep(&ts, NULL);
    stop_all = 1;
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    return sublet_log_close(lg) == SUBLET_OK ? 0 : 1;
}
