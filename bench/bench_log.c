/* bench_log — the cost of the continuous event log (sublet/log.h) on the
 * allocator's hot path: a cached malloc+free pair with the log off, with the
 * writer-thread log (the default: the allocating thread only appends to a
 * ring, and writes it itself only when the writer is behind and it is full),
 * with SUBLET_LOG_DROP (never writes: drops instead), and with SUBLET_LOG_SYNC (the allocating thread writes the blocks
 * itself when its buffer is half full).
 *
 * Requirement: a logged pair costs at most 2x an unlogged one, and the
 * allocating thread does not wait on I/O.  A pair is 3 events (alloc,
 * free_requested, free_completed), each with a clock reading.
 *
 * Usage:  bench_log [DIR [PAIRS]]
 *   DIR: where the log files go (default /tmp); PAIRS per timed pass
 *   (default 2^20).  Sim backend, PyTorch's default settings, 1000 live
 *   blocks; the pair's size cycles over 16 sizes from 512 B to 3 MiB, every
 *   pair served from the cache (checked).
 *
 * Output (stdout):
 *   mode=off ns_per_pair=<X> wall_ns_per_pair=<W>
 *   mode=thread ns_per_pair=<Y> ratio=<Y/X> wall_ns_per_pair=<W> max_pair_us=<M>
 *              bytes_per_event=<B> lost=<L>
 *   mode=sync ... (the same fields)
 *   mode=drop ...  (writer thread, SUBLET_LOG_DROP: a full ring drops events)
 * ns_per_pair is the allocating thread's CPU time (CLOCK_THREAD_CPUTIME_ID:
 * what the hot path costs, also on a loaded machine, and the I/O it does
 * itself in the sync mode), wall_ns_per_pair the elapsed time.  Each mode:
 * a warm-up pass, then 5 timed passes; the medians are reported, and the
 * slowest single pair seen (1 in 64 timed: the I/O or preemption a pair
 * waited on).
 * Exit status 1 when a call failed.
 *
 * Figures (2-core VM under a load average of 15, 2^18 pairs, three runs;
 * wall times are preemption noise there): off 183-208 ns of CPU per pair;
 * thread 304-328 (ratio 1.46-1.77); sync 325-569 (1.56-3.07: its writes
 * are on the pair's thread); drop 272-398 (1.31-2.17, and it lost up to
 * 97k events of 3.1M when the starved writer fell behind).  16 bytes per
 * event.  On a quiet 2-core Intel VM (2026-12-02, 2^18 pairs, three runs):
 * off 98-100 ns; thread 184-192 (1.88-1.93); sync 218-262 (2.17-2.68);
 * drop 187-189 (1.88-1.92). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sublet/log.h"
#include "sublet/sublet.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: what the allocating thread spends, not
 * the time it waited for a CPU (the figure that holds on a loaded machine) */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const uint64_t sizes[16] = {512,     1000,    4096,    8192,   65536,   100000,
                                   500000,  1 << 20, 1500000, 2 << 20, 3 << 20, 777,
                                   3000000, 12345,   200000,  2500000};

/* One pass of `pairs` pairs; the slowest pair into *max_s (sampled). */
static int pass(sublet_allocator *a, size_t pairs, double *max_s)
{
    for (size_t i = 0; i < pairs; i++) {
        void *p = NULL;
        double t0 = (i & 63) == 0 ? now_s() : 0;
        if (sublet_malloc(a, sizes[i & 15], 0, &p) != SUBLET_OK || sublet_free(a, p) != SUBLET_OK)
            return -1;
        if ((i & 63) == 0) {
            double d = now_s() - t0;
            if (d > *max_s)
                *max_s = d;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    size_t pairs = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)1 << 20;
    double base = 0;
    for (int mode = 0; mode < 4; mode++) {
        sublet_backend *be = NULL;
        sublet_allocator *a = NULL;
        if (sublet_sim_create((uint64_t)1 << 40, &be) != SUBLET_OK)
            return 1;
        sublet_options o = {be, 0, ""};
        char err[256];
        if (sublet_allocator_create(&o, &a, err, sizeof err) != SUBLET_OK)
            return 1;
        void *live[1000];
        for (int i = 0; i < 1000; i++)
            if (sublet_malloc(a, sizes[i & 15] + 7, 0, &live[i]) != SUBLET_OK)
                return 1;
        sublet_log *lg = NULL;
        char path[512];
        snprintf(path, sizeof path, "%s/bench_log_%d.slog", dir, mode);
        if (mode) {
            sublet_log_options lo = {0};
            lo.flags = mode == 2 ? SUBLET_LOG_SYNC : mode == 3 ? SUBLET_LOG_DROP : 0;
            if (sublet_log_open(a, path, &lo, &lg, err, sizeof err) != SUBLET_OK) {
                fprintf(stderr, "bench_log: %s\n", err);
                return 1;
            }
        }
        double max_s = 0, t[5], c[5];
        if (pass(a, pairs, &max_s)) /* warm-up: every size cached */
            return 1;
        sublet_stats st0, st1;
        sublet_stats_read(a, &st0);
        max_s = 0;
        for (int r = 0; r < 5; r++) {
            double t0 = now_s(), c0 = cpu_s();
            if (pass(a, pairs, &max_s))
                return 1;
            t[r] = now_s() - t0;
            c[r] = cpu_s() - c0;
        }
        sublet_stats_read(a, &st1);
        if (st1.num_device_alloc != st0.num_device_alloc) {
            fprintf(stderr, "bench_log: a timed pair was not served from the cache\n");
            return 1;
        }
        qsort(t, 5, sizeof t[0], cmp_d);
        qsort(c, 5, sizeof c[0], cmp_d);
        double ns = c[2] / (double)pairs * 1e9, wall = t[2] / (double)pairs * 1e9;
        static const char *names[4] = {"off", "thread", "sync", "drop"};
        if (mode == 0) {
            base = ns;
            printf("mode=off ns_per_pair=%.1f wall_ns_per_pair=%.1f\n", ns, wall);
        } else {
            sublet_log_status ls;
            sublet_log_flush(lg);
            sublet_log_status_read(lg, &ls);
            if (sublet_log_close(lg) != SUBLET_OK)
                return 1;
            struct stat sb;
            double bpe = stat(path, &sb) == 0 && ls.events
                             ? (double)sb.st_size / (double)(ls.events + ls.events_lost)
                             : 0;
            printf("mode=%s ns_per_pair=%.1f ratio=%.2f wall_ns_per_pair=%.1f max_pair_us=%.0f "
                   "bytes_per_event=%.1f lost=%llu\n",
                   names[mode], ns, ns / base, wall, max_s * 1e6, bpe,
                   (unsigned long long)ls.events_lost);
            remove(path);
        }
        fflush(stdout);
        for (int i = 0; i < 1000; i++)
            sublet_free(a, live[i]);
        sublet_allocator_destroy(a);
        sublet_backend_destroy(be);
    }
    return 0;
}
