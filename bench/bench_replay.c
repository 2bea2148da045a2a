/* sublet — replay speed: events driven through the engine per second, all
 * formats parsed first (issue: >= 10 million events/s on this machine).
 *
 *   bench_replay [TRACE...]   default: every pickle in ../shared/traces/
 *                             pytorch_snapshot and tests/data (from the
 *                             repository root or the build directory)
 *
 * Prints one `trace=<name> events=<n> reps=<r> replay_events_per_s=<x>`
 * line per trace and a final `replay_events_per_s=<x>` over all of them.
 * Events counted are the rows replayed plus the prelude's seeded segments
 * and blocks; each trace is replayed for at least 0.5 s. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sublet/replay.h"
#include "sublet/trace.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int collect(const char *dir, const char *suffix, char ***paths, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (l > sl && strcmp(e->d_name + l - sl, suffix) == 0) {
            char *p = malloc(strlen(dir) + l + 2);
            if (!p)
                break;
            sprintf(p, "%s/%s", dir, e->d_name);
            char **np = realloc(*paths, (*n + 1) * sizeof *np);
            if (!np) {
                free(p);
                break;
            }
            *paths = np;
            (*paths)[(*n)++] = p;
        }
    }
    closedir(d);
    return 1;
}

int main(int argc, char **argv)
{
    char **paths = NULL;
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        char **np = realloc(paths, (n + 1) * sizeof *np);
        if (!np)
            return 1;
        paths = np;
        paths[n++] = strdup(argv[i]);
    }
    if (n == 0) {
        const char *dirs[] = {"../shared/traces/pytorch_snapshot", "../../shared/traces/pytorch_snapshot"};
        for (size_t i = 0; i < 2 && n == 0; i++)
            collect(dirs[i], ".pickle.gz", &paths, &n);
    }
    if (n == 0) {
        printf("bench_replay: no traces found (pass paths, or run from the repository root "
               "next to ../shared)\n");
        return 0;
    }
    uint64_t total_events = 0;
    double total_s = 0;
    for (size_t i = 0; i < n; i++) {
        sublet_trace *t = NULL;
        char err[512];
        if (sublet_trace_load(paths[i], NULL, &t, err, sizeof err) != SUBLET_OK) {
            printf("bench_replay: %s: %s\n", paths[i], err);
            continue;
        }
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        uint64_t events = 0;
        double t0 = now_s(), el = 0;
        int reps = 0;
        do { /* at least 0.5 s per trace */
            sublet_replay_result r;
            if (sublet_replay_run(t, &o, &r, err, sizeof err) != SUBLET_OK) {
                printf("bench_replay: %s: %s\n", paths[i], err);
                sublet_replay_result_free(&r);
                break;
            }
            events += r.events + r.pre_segments + r.pre_allocs;
            sublet_replay_result_free(&r);
            reps++;
            el = now_s() - t0;
        } while (el < 0.5);
        const char *base = strrchr(paths[i], '/');
        printf("trace=%s events=%llu reps=%d replay_events_per_s=%.0f\n", base ? base + 1 : paths[i],
               (unsigned long long)sublet_trace_count(t), reps, (double)events / el);
        total_events += events;
        total_s += el;
        sublet_trace_free(t);
    }
    if (total_s > 0)
        printf("replay_events_per_s=%.0f\n", (double)total_events / total_s);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return 0;
}
