/* bench_codecs — pickle parse throughput on the shared PyTorch snapshots.
 *
 * usage: bench_codecs [DIR|FILE.pickle.gz ...] [--seconds S]
 * Default DIR: ../shared/traces/pytorch_snapshot relative to the repository
 * root (found from this source file's location, then from the working
 * directory).  Each pickle is gunzipped once in memory, then parsed
 * repeatedly (arena created and destroyed each time) for about S seconds
 * (default 1) per file.  Prints one line per file and then
 *   parse_mb_per_s=<Y>        total pickle bytes parsed / total parse time
 *   write_mb_per_s=<Y>        pv_pickle_write of the parsed tree
 *   json_write_mb_per_s=<Y>   JSON text bytes written / time
 *   json_parse_mb_per_s=<Y>   JSON text bytes parsed / time
 * The requirement is parse_mb_per_s >= 100.  Exit 0 also when no input is
 * found (a "skip" message is printed). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "formats/gz.h"
#include "formats/json_codec.h"
#include "formats/pickle.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, len = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    *n = len;
    return b;
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

typedef struct totals {
    double parse_bytes, parse_s, write_bytes, write_s, jw_bytes, jw_s, jp_bytes, jp_s;
    int files;
} totals;

static int bench_file(const char *path, double seconds, totals *t) {
    size_t n;
    uint8_t *raw = slurp(path, &n);
    if (!raw) {
        fprintf(stderr, "bench_codecs: cannot read %s\n", path);
        return 1;
    }
    char err[256];
    sl_inflated in;
    if (sublet_gunzip_if_needed(raw, n, 0, &in, err, sizeof err)) {
        fprintf(stderr, "bench_codecs: %s: %s\n", path, err);
        free(raw);
        return 1;
    }
    const uint8_t *data = in.data;
    size_t len = in.len;
    uint8_t *owned = in.owned;
    int iters = 0, rc = 0;
    double t0 = now(), el = 0;
    while (el < seconds || iters < 3) {
        pv_arena *a = pv_arena_create();
        pyval *v;
        if (pv_pickle_parse(data, len, a, &v, err, sizeof err)) {
            fprintf(stderr, "bench_codecs: %s: %s\n", path, err);
            pv_arena_destroy(a);
            rc = 1;
            break;
        }
        pv_arena_destroy(a);
        iters++;
        el = now() - t0;
    }
    double parse_s = el;
    pv_arena *a = pv_arena_create();
    pyval *v = NULL;
    if (!rc && pv_pickle_parse(data, len, a, &v, err, sizeof err))
        rc = 1;
    double w_s = 0, jw_s = 0, jp_s = 0;
    size_t wlen = 0, jlen = 0;
    if (!rc) {
        pv_buf out = {0}, js = {0};
        double s0 = now();
        pv_pickle_write(v, 0, &out, err, sizeof err);
        w_s = now() - s0;
        wlen = out.len;
        s0 = now();
        pv_json_write(v, 0, &js, err, sizeof err);
        jw_s = now() - s0;
        jlen = js.len;
        pv_arena *a2 = pv_arena_create();
        pyval *v2;
        s0 = now();
        if (pv_json_parse(js.data, js.len, a2, &v2, err, sizeof err))
            fprintf(stderr, "bench_codecs: %s: JSON reparse: %s\n", path, err);
        jp_s = now() - s0;
        pv_arena_destroy(a2);
        pv_buf_free(&out);
        pv_buf_free(&js);
        const char *base = strrchr(path, '/');
        printf("%-40s pickle %9zu B  parse %8.1f MB/s (%d runs)  write %7.1f MB/s  "
               "json %10zu B  json write %6.1f MB/s  json parse %6.1f MB/s\n",
               base ? base + 1 : path, len, (double)len * iters / parse_s / 1e6, iters,
               (double)wlen / w_s / 1e6, jlen, (double)jlen / jw_s / 1e6,
               (double)jlen / jp_s / 1e6);
        t->parse_bytes += (double)len * iters;
        t->parse_s += parse_s;
        t->write_bytes += (double)wlen;
        t->write_s += w_s;
        t->jw_bytes += (double)jlen;
        t->jw_s += jw_s;
        t->jp_bytes += (double)jlen;
        t->jp_s += jp_s;
        t->files++;
    }
    pv_arena_destroy(a);
    free(owned);
    free(raw);
    return rc;
}

static int bench_dir(const char *dir, double seconds, totals *t) {
    DIR *d = opendir(dir);
    if (!d)
        return 1;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 10 && strcmp(e->d_name + l - 10, ".pickle.gz") == 0) {
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    int rc = 0;
    for (size_t i = 0; i < n; i++) { /* a stable order */
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *tmp = names[i];
                names[i] = names[j];
                names[j] = tmp;
            }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc |= bench_file(path, seconds, t);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    double seconds = 1.0;
    totals t = {0};
    int rc = 0, inputs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
            continue;
        }
        inputs++;
        rc |= is_dir(argv[i]) ? bench_dir(argv[i], seconds, &t) : bench_file(argv[i], seconds, &t);
    }
    if (!inputs) {
        char here[4096];
        const char *src = __FILE__, *slash = strrchr(src, '/');
        const char *cands[3] = {NULL, "../shared/traces/pytorch_snapshot",
                                "../../shared/traces/pytorch_snapshot"};
        if (slash && (size_t)(slash - src) < sizeof here - 64) {
            snprintf(here, sizeof here, "%.*s/../../shared/traces/pytorch_snapshot",
                     (int)(slash - src), src);
            cands[0] = here;
        }
        const char *dir = NULL;
        for (int k = 0; k < 3 && !dir; k++)
            if (cands[k] && is_dir(cands[k]))
                dir = cands[k];
        if (!dir) {
            printf("bench_codecs: skip: no snapshot directory (pass a path)\n");
            return 0;
        }
        rc |= bench_dir(dir, seconds, &t);
    }
    if (!t.files) {
        printf("bench_codecs: skip: no *.pickle.gz parsed\n");
        return rc;
    }
    printf("parse_mb_per_s=%.1f\n", t.parse_bytes / t.parse_s / 1e6);
    printf("write_mb_per_s=%.1f\n", t.write_bytes / t.write_s / 1e6);
    printf("json_write_mb_per_s=%.1f\n", t.jw_bytes / t.jw_s / 1e6);
    printf("json_parse_mb_per_s=%.1f\n", t.jp_bytes / t.jp_s / 1e6);
    return rc;
}
