/* bench_policies — min-capacity overhead of the allocator policies on real
 * traces, as a Markdown table (docs/policies.md's).
 *
 * For every trace in TRACE_DIR (default ../shared/traces/pytorch_snapshot
 * relative to the current directory, then to its parent) the smallest
 * simulated device on which the trace replays without an OOM is found by
 * bisection at 2 MiB resolution (sublet_replay_min_capacity) under four
 * settings:
 *
 *   PyTorch's default          ""
 *   max_split_size_mb:128
 *   expandable_segments:True   PyTorch's expandable segments (§6)
 *   policy:stitch              sublet's policy (docs/policies.md)
 *
 * and reported as the overhead over the trace's peak of live requested
 * bytes (min_capacity / peak_live - 1).  For the last two, the device calls
 * of the replay at the minimum (maps, unmaps, address reserves; for
 * policy:stitch also how many of the maps were alias maps, a physical page
 * mapped a second time) and the share of the allocs during which the
 * device was called at all (from a second, recorded replay at the minimum).  A trace comes as NAME.pickle.gz
 * (the recording) and/or NAME.events.csv (derived from it); one of each NAME
 * is used, the pickle when both are there.
 *
 * Then the median per setting and the bar of issue 6: "sublet's policy
 * <= 1 % median and <= 2 % on every trace, and never worse than
 * expandable_segments:True on any trace" (compared in bytes), PASS or FAIL.
 *
 * Usage: bench_policies [TRACE_DIR] [--out FILE] [--strict]
 *   --out FILE  also write the Markdown to FILE
 *   --strict    exit 1 when the bar fails
 * Exit 0 with a note on stderr when TRACE_DIR does not exist (nothing to
 * measure), 1 on an error (or a failed bar with --strict). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sublet/replay.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#define NSET 4
static const char *const SETTINGS[NSET] = {"", "max_split_size_mb:128",
                                           "expandable_segments:True", "policy:stitch"};
static const char *const LABELS[NSET] = {"default", "max_split_size_mb:128",
                                         "expandable_segments:True", "policy:stitch"};
enum { S_DEFAULT = 0, S_MAXSPLIT = 1, S_EXP = 2, S_STITCH = 3 };

typedef struct row {
    char name[256];
    char path[4096];
    uint64_t peak_live, allocs;
    uint64_t min_cap[NSET];
    double overhead[NSET];
    sublet_sim_ops ops[NSET];
    uint64_t retries[NSET];
    uint64_t allocs_with_call[NSET]; /* recorded allocs during which the device was called */
} row;

/* on_finish of the recorded replay at the minimum: count the allocs whose
 * malloc called the device (a segment_alloc/map/unmap/free entry since the
 * previous alloc or free entry; empty_cache's are not an alloc's). */
static void count_calls(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    (void)st;
    uint64_t *out = user;
    if (!a)
        return;
    size_t n = sublet_history_count(a);
    sublet_trace_entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return;
    n = sublet_history_copy(a, e, n);
    int pending = 0;
    for (size_t i = 0; i < n; i++) {
        switch (e[i].action) {
        case SUBLET_ACT_SEGMENT_ALLOC:
        case SUBLET_ACT_SEGMENT_MAP:
        case SUBLET_ACT_SEGMENT_UNMAP:
        case SUBLET_ACT_SEGMENT_FREE:
            pending = 1;
            break;
        case SUBLET_ACT_ALLOC:
            *out += (uint64_t)pending;
            pending = 0;
            break;
        case SUBLET_ACT_FREE_REQUESTED:
        case SUBLET_ACT_FREE_COMPLETED:
            pending = 0;
            break;
        default:
            break;
        }
    }
    free(e);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The trace files of dir: one per NAME, NAME.pickle.gz preferred over
 * NAME.events.csv.  Returns the count; *out holds malloc'd rows. */
static size_t list_traces(const char *dir, row **out)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".pickle.gz") && !ends_with(e->d_name, ".events.csv"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = realloc(names, cap * sizeof *names);
            if (!names) {
                closedir(d);
                return 0;
            }
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    row *rows = calloc(n ? n : 1, sizeof *rows);
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        char stem[256];
        const char *nm = names[i];
        size_t sl = strlen(nm) - (ends_with(nm, ".pickle.gz") ? strlen(".pickle.gz")
                                                              : strlen(".events.csv"));
        if (sl >= sizeof stem)
            continue;
        memcpy(stem, nm, sl);
        stem[sl] = 0;
        row *r = NULL;
        for (size_t j = 0; j < nr; j++)
            if (strcmp(rows[j].name, stem) == 0)
                r = &rows[j];
        if (!r) {
            r = &rows[nr++];
            snprintf(r->name, sizeof r->name, "%s", stem);
        } else if (!ends_with(nm, ".pickle.gz")) {
            continue; /* the pickle is already there */
        }
        snprintf(r->path, sizeof r->path, "%s/%s", dir, nm);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    *out = rows;
    return nr;
}

static int measure(row *r)
{
    sublet_trace *t = NULL;
    char err[512];
    sublet_status st = sublet_trace_load(r->path, NULL, &t, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "bench_policies: %s\n", err);
        return -1;
    }
    sublet_trace_info info;
    sublet_trace_info_get(t, &info);
    r->allocs = info.allocs;
    for (int s = 0; s < NSET; s++) {
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.conf = SETTINGS[s];
        sublet_mincap_result m;
        st = sublet_replay_min_capacity(t, &o, 0, &m, err, sizeof err);
        if (st != SUBLET_OK) {
            fprintf(stderr, "bench_policies: %s under '%s': %s\n", r->path, LABELS[s], err);
            sublet_mincap_result_free(&m);
            sublet_trace_extras_release(t);
            sublet_trace_free(t);
            return -1;
        }
        r->peak_live = m.peak_requested_bytes;
        r->min_cap[s] = m.min_capacity_bytes;
        r->overhead[s] = 100.0 * m.overhead;
        r->ops[s] = m.at_min.device_ops;
        r->retries[s] = m.at_min.alloc_retries;
        /* the replay at the minimum again, recorded, to see which allocs
         * called the device */
        sublet_replay_options ro = o;
        ro.device_memory = m.min_capacity_bytes;
        ro.record = SUBLET_RECORD_ALL;
        ro.record_context = SUBLET_CONTEXT_NONE;
        ro.on_finish = count_calls;
        ro.finish_user = &r->allocs_with_call[s];
        sublet_replay_result rr;
        if (sublet_replay_run(t, &ro, &rr, err, sizeof err) != SUBLET_OK || rr.ooms) {
            fprintf(stderr, "bench_policies: %s under '%s': the recorded replay at the minimum "
                            "differs: %s\n", r->path, LABELS[s], err);
            sublet_replay_result_free(&rr);
            sublet_mincap_result_free(&m);
            sublet_trace_extras_release(t);
            sublet_trace_free(t);
            return -1;
        }
        sublet_replay_result_free(&rr);
        fprintf(stderr, "  %-32s %-26s %7.2f %%  (%" PRIu64 " replays)\n", r->name, LABELS[s],
                r->overhead[s], m.replays);
        sublet_mincap_result_free(&m);
    }
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
    return 0;
}

static double median(const row *rows, size_t n, int s)
{
    double v[256];
    size_t k = n < 256 ? n : 256;
    for (size_t i = 0; i < k; i++)
        v[i] = rows[i].overhead[s];
    qsort(v, k, sizeof *v, cmp_double);
    return k == 0 ? 0.0 : k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2.0;
}

static void calls(FILE *f, const row *r, int s)
{
    const sublet_sim_ops *o = &r->ops[s];
    fprintf(f, " %" PRIu64, o->va_maps);
    if (s == S_STITCH)
        fprintf(f, " (%" PRIu64 ")", o->va_aliases);
    fprintf(f, " / %" PRIu64 " / %" PRIu64 " | %.1f %% |", o->va_unmaps, o->va_reserves,
            r->allocs ? 100.0 * (double)r->allocs_with_call[s] / (double)r->allocs : 0.0);
}

/* The Markdown report; returns 1 when the bar holds. */
static int report(FILE *f, const row *rows, size_t n)
{
    fprintf(f, "Min-capacity overhead over the peak of live requested bytes (smallest simulated\n"
               "device, at 2 MiB resolution, on which the trace replays without an OOM).\n"
               "Device calls of the replay at that minimum: maps / unmaps / address reserves\n"
               "(the prelude's included; for policy:stitch, in parentheses, how many of the\n"
               "maps were alias maps: a partly free page's physical page mapped a second\n"
               "time), and the share of the recorded allocs during which the device was\n"
               "called at all (the others were served from the cache).\n\n");
    fprintf(f, "| trace | allocs | peak live (MiB) | default | max_split_size_mb:128 | "
               "expandable_segments:True | policy:stitch | expandable: maps / unmaps / reserves "
               "| allocs with a call | stitch: maps (aliases) / unmaps / reserves "
               "| allocs with a call |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f, "| %s | %" PRIu64 " | %.1f |", r->name, r->allocs,
                (double)r->peak_live / (double)(1 << 20));
        for (int s = 0; s < NSET; s++)
            fprintf(f, " %.2f %% |", r->overhead[s]);
        calls(f, r, S_EXP);
        calls(f, r, S_STITCH);
        fputc('\n', f);
    }
    fprintf(f, "| **median** | | |");
    for (int s = 0; s < NSET; s++)
        fprintf(f, " **%.2f %%** |", median(rows, n, s));
    fprintf(f, " | | | |\n\n");

    double med = median(rows, n, S_STITCH);
    int ok_med = med <= 1.0, ok_each = 1, ok_exp = 1;
    char over2[1024] = "", worse[1024] = "";
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (r->overhead[S_STITCH] > 2.0) {
            ok_each = 0;
            size_t l = strlen(over2);
            snprintf(over2 + l, sizeof over2 - l, "%s%s (%.2f %%)", l ? ", " : "", r->name,
                     r->overhead[S_STITCH]);
        }
        if (r->min_cap[S_STITCH] > r->min_cap[S_EXP]) {
            ok_exp = 0;
            size_t l = strlen(worse);
            snprintf(worse + l, sizeof worse - l, "%s%s (%.2f %% vs %.2f %%, +%" PRIu64 " MiB)",
                     l ? ", " : "", r->name, r->overhead[S_STITCH], r->overhead[S_EXP],
                     (r->min_cap[S_STITCH] - r->min_cap[S_EXP]) >> 20);
        }
    }
    int ok = ok_med && ok_each && ok_exp && n > 0;
    fprintf(f, "Bar (sublet's policy <= 1 %% median and <= 2 %% on every trace, and never worse "
               "than expandable_segments:True on any trace): **%s**\n\n",
            ok ? "PASS" : "FAIL");
    fprintf(f, "- median %.2f %% <= 1 %%: %s\n", med, ok_med ? "yes" : "no");
    fprintf(f, "- every trace <= 2 %%: %s%s%s\n", ok_each ? "yes" : "no", ok_each ? "" : ": ",
            over2);
    fprintf(f, "- never worse than expandable_segments:True: %s%s%s\n", ok_exp ? "yes" : "no",
            ok_exp ? "" : ": ", worse);
    return ok;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *outp = NULL;
    int strict = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            outp = argv[++i];
        else if (strcmp(argv[i], "--strict") == 0)
            strict = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_policies [TRACE_DIR] [--out FILE] [--strict]\n");
            return 2;
        } else
            dir = argv[i];
    }
    if (!dir) {
        dir = "../shared/traces/pytorch_snapshot";
        if (!is_dir(dir))
            dir = "../../shared/traces/pytorch_snapshot";
    }
    if (!is_dir(dir)) {
        fprintf(stderr, "bench_policies: %s: no trace directory, nothing to measure (skipped)\n",
                dir);
        return 0;
    }
    row *rows = NULL;
    size_t n = list_traces(dir, &rows);
    if (n == 0) {
        fprintf(stderr, "bench_policies: %s: no traces (*.pickle.gz, *.events.csv), skipped\n",
                dir);
        free(rows);
        return 0;
    }
    fprintf(stderr, "bench_policies: %zu traces in %s\n", n, dir);
    for (size_t i = 0; i < n; i++)
        if (measure(&rows[i]) != 0) {
            free(rows);
            return 1;
        }
    int ok = report(stdout, rows, n);
    if (outp) {
        FILE *f = fopen(outp, "w");
        if (!f) {
            fprintf(stderr, "bench_policies: %s: %s\n", outp, strerror(errno));
            free(rows);
            return 1;
        }
        report(f, rows, n);
        if (fclose(f) != 0) {
            fprintf(stderr, "bench_policies: %s: write failed\n", outp);
            free(rows);
            return 1;
        }
    }
    free(rows);
    return strict && !ok ? 1 : 0;
}
