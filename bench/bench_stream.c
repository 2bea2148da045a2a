/* sublet — one replay of a trace, read whole or as a stream, timed with its
 * parsing, and the process's peak RSS (bench/bench_stream.sh runs both
 * modes, each in its own process, and prints their ratios).
 *
 *   bench_stream whole|stream|read TRACE
 *
 * read: the stream read to its end, nothing replayed (the readers' own rate).
 * SUBLET_STREAM_THREAD=0|1 in the environment chooses the reader thread of
 * stream and read (passed as the open options' stream_thread: the library
 * reads no environment for it; docs/replay.md).
 *
 * Prints `mode=<m> trace=<path> events=<n> seconds=<s> events_per_s=<x>
 * maxrss_kib=<k> replay_thread_cpu_s=<c>`: seconds from open to the end of
 * the replay (read, parse and replay; default options, 80 GiB), maxrss from
 * getrusage, and the CPU time of the replaying thread alone (the reader
 * thread's decoding is not in it: how far the replaying thread is from the
 * 100 ns an event the bar needs).  On this project's VM both move
 * by 15 % and more between runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sublet/replay.h"
#include "sublet/trace_stream.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* The open options: SUBLET_STREAM_THREAD=0|1 as stream_thread (unset: the default). */
static const sublet_trace_load_options *stream_opts(void)
{
    static sublet_trace_load_options lo;
    const char *v = getenv("SUBLET_STREAM_THREAD");
    lo.stream_thread = v && strcmp(v, "0") == 0   ? SUBLET_STREAM_THREAD_NEVER
                       : v && strcmp(v, "1") == 0 ? SUBLET_STREAM_THREAD_ALWAYS
                                                  : SUBLET_STREAM_THREAD_AUTO;
    return &lo;
}

static int read_only(const char *path)
{
    char err[1024];
    double t0 = now_s();
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_open(path, stream_opts(), &ts, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    static sublet_trace_event ev[8192];
    size_t got;
    uint64_t n = 0;
    sublet_status st;
    while ((st = sublet_trace_stream_next(ts, ev, 8192, &got, err, sizeof err)) == SUBLET_OK && got)
        n += got;
    sublet_trace_stream_close(ts);
    double dt = now_s() - t0;
    if (st != SUBLET_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("mode=read trace=%s events=%llu seconds=%.3f events_per_s=%.0f maxrss_kib=%ld\n", path,
           (unsigned long long)n, dt, (double)n / dt, ru.ru_maxrss);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "whole") && strcmp(argv[1], "stream") &&
                      strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: bench_stream whole|stream|read TRACE\n");
        return 2;
    }
    if (strcmp(argv[1], "read") == 0)
        return read_only(argv[2]);
    int whole = strcmp(argv[1], "whole") == 0;
    char err[1024];
    sublet_replay_result r;
    sublet_status st;
    double t0 = now_s(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    if (whole) {
        sublet_trace *t = NULL;
        if (sublet_trace_load(argv[2], NULL, &t, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.conf = sublet_trace_settings(t) ? sublet_trace_settings(t) : "";
        st = sublet_replay_run(t, &o, &r, err, sizeof err);
        sublet_trace_free(t);
    } else {
        sublet_trace_stream *ts = NULL;
        if (sublet_trace_stream_open(argv[2], stream_opts(), &ts, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        const char *rec = sublet_trace_stream_settings(ts);
        o.conf = rec ? rec : "";
        st = sublet_replay_stream(ts, &o, &r, err, sizeof err);
        sublet_trace_stream_close(ts);
    }
    double dt = now_s() - t0, dc = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    if (st != SUBLET_OK) {
        fprintf(stderr, "replay: %s\n", err);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("mode=%s trace=%s events=%llu seconds=%.3f events_per_s=%.0f maxrss_kib=%ld "
           "replay_thread_cpu_s=%.3f\n",
           argv[1], argv[2], (unsigned long long)r.events, dt, (double)r.events / dt,
           ru.ru_maxrss, dc);
    sublet_replay_result_free(&r);
    return 0;
}
