/* sublet CLI — `sublet fit [options] -- COMMAND ... {batch} ...`: the largest
 * value of the placeholder for which the program runs without an OOM on the
 * target device, under the current settings and under the settings `sublet
 * tune` recommends for the recording.
 *
 * Each probe records the program on the null device (record_run.c) with more
 * memory than the target (twice, by default), so that the recording holds
 * the whole run, then asks the library about the target: a replay at the
 * target under the settings the program ran with (fits now), the min
 * capacity under them, and sublet_tune at the target (fits tuned).  A
 * program that runs out of memory even on the larger device fits under no
 * setting.  The search, per answer: from --min, doubling until a value does
 * not fit, then bisection; once two probes are known, the min capacity is
 * taken as an affine function of the value and the next probe is where it
 * reaches the target (a few times, then bisection), so that most searches end
 * in a handful of probes, on a verified pair: v fits and v+1 does not, or
 * v = --max. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "cli.h"
#include "views/json_writer.h"
#include "sublet/config.h"
#include "sublet/tune.h"
#include "sublet/views.h"

#define FIT_MAX_PROBES 64
#define FIT_ESTIMATES 4 /* affine jumps per answer before plain bisection */

void cli_fit_usage(FILE *out)
{
    fputs("usage: sublet fit [options] -- COMMAND ... {batch} ...\n"
          "  The largest integer value of the placeholder (any {name} in the command's\n"
          "  arguments) for which the PyTorch program runs without an OOM on the target\n"
          "  device: (a) under the settings it runs with, (b) under the settings `sublet\n"
          "  tune` recommends for its recording.  Each probe records the program on the\n"
          "  null device with twice the target's memory (`sublet record`), then replays\n"
          "  the recording at the target: fits now, the min capacity, and `sublet tune`\n"
          "  at the target (fits tuned).  A value that runs out of memory even on the\n"
          "  larger device fits under no setting.  Probes start at --min and double, or\n"
          "  jump where the min capacity, taken as affine in the value, reaches the\n"
          "  target; bisection ends each answer on v that fits and v+1 that does not (or\n"
          "  v = --max).  Prints each probe and the answers.\n"
          "options:\n"
          "  --device-memory SIZE   the target device (default 81559MiB, an H100 80GB)\n"
          "  --probe-memory SIZE    the null device the probes run on (default: twice the\n"
          "                         target)\n"
          "  --conf SETTINGS        PYTORCH_ALLOC_CONF for the program (default: as\n"
          "                         inherited)\n"
          "  --min N                the smallest value searched (default 1)\n"
          "  --max N                the largest value searched (default 1048576)\n"
          "  --pytorch-version V    the release the replays follow (default: the one\n"
          "                         the program ran)\n"
          "  -o, --output FILE      the probes and answers as JSON\n"
          "  --keep DIR             keep each probe's recording in DIR/VALUE/\n"
          "                         (snapshot.pickle, stats.json, program.log)\n"
          "  --max-entries N        each recording's ring buffer (default 1000000)\n"
          "  -h, --help             this text\n"
          "exit status: 0 answered (also when no value fits: the answer is then none),\n"
          "  1 a probe failed for another reason than an OOM, 2 usage.\n",
          out);
}

typedef struct fit_probe {
    long long v;
    int oom_big;                /* ran out of memory on the probe device */
    int64_t peak_alloc, peak_reserved, frag;
    uint64_t mincap, tuned_mincap; /* 0: not known */
    int now, tuned;
    char tuned_conf[SUBLET_TUNE_CONF_MAX];
    char torch_version[64];
} fit_probe;

typedef struct fit_ctx {
    cli_rec_setup s;
    uint64_t target, probe_memory;
    long long min, max;
    const char *version; /* --pytorch-version, NULL: the recorded one */
    const char *out, *keep;
    char **cmd;          /* the command, placeholders in it */
    int cmd_n;
    char placeholder[64]; /* "{name}" */
    char work[PATH_MAX];
    fit_probe probes[FIT_MAX_PROBES];
    int nprobes;
} fit_ctx;

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet fit: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    return CLI_USAGE;
}

static int parse_count(const char *v, long long *out)
{
    char *end;
    long long n;
    if (!v || !*v)
        return -1;
    n = strtoll(v, &end, 10);
    if (*end || n < 0 || n > (1ll << 40))
        return -1;
    *out = n;
    return 0;
}

/* The first "{name}" of the command (name: a letter or '_', then letters,
 * digits, '_'); 0, or -1 when there is none. */
static int find_placeholder(fit_ctx *c)
{
    for (int k = 0; k < c->cmd_n; k++)
        for (const char *p = strchr(c->cmd[k], '{'); p; p = strchr(p + 1, '{')) {
            const char *q = p + 1;
            if (!isalpha((unsigned char)*q) && *q != '_')
                continue;
            while (isalnum((unsigned char)*q) || *q == '_')
                q++;
            if (*q == '}' && (size_t)(q - p + 1) < sizeof c->placeholder) {
                memcpy(c->placeholder, p, (size_t)(q - p + 1));
                c->placeholder[q - p + 1] = '\0';
                return 0;
            }
        }
    return -1;
}

static int parse_args(int argc, char **argv, fit_ctx *c)
{
    int i;
    c->s.prog = "fit";
    c->s.null_device = 1;
    c->s.max_entries = 1000000;
    c->s.stacks = "none";
    c->target = UINT64_C(81559) << 20;
    c->min = 1;
    c->max = 1 << 20;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *v, *arg = argv[i];
        int m = 0;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_fit_usage(stdout);
            return -1;
        }
        if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", arg);
            c->out = argv[++i];
        } else if ((v = cli_opt_value(argc, argv, &i, "--device-memory", &m)) || m) {
            if (!v || sublet_parse_size(v, &c->target) != SUBLET_OK || c->target < (UINT64_C(2) << 20))
                return usage_error("--device-memory '%s' is not a size of at least 2MiB", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--probe-memory", &m)) || m) {
            if (!v || sublet_parse_size(v, &c->probe_memory) != SUBLET_OK)
                return usage_error("--probe-memory '%s' is not a size", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--conf", &m)) || m) {
            if (!v)
                return usage_error("%s", "--conf needs a value");
            c->s.conf = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--min", &m)) || m) {
            if (parse_count(v, &c->min))
                return usage_error("--min '%s' is not a count", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--max", &m)) || m) {
            if (parse_count(v, &c->max))
                return usage_error("--max '%s' is not a count", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--max-entries", &m)) || m) {
            long long n;
            if (parse_count(v, &n) || n < 1 || n > (1ll << 31))
                return usage_error("--max-entries '%s' is not a count from 1 to 2^31", v ? v : "");
            c->s.max_entries = (size_t)n;
        } else if ((v = cli_opt_value(argc, argv, &i, "--pytorch-version", &m)) || m) {
            if (!v || !*v)
                return usage_error("%s", "--pytorch-version needs a value (e.g. 2.14)");
            c->version = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--keep", &m)) || m) {
            if (!v || !*v)
                return usage_error("%s", "--keep needs a folder");
            c->keep = v;
        } else {
            usage_error("unknown option '%s' (the command goes after --)", arg);
            cli_fit_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (i + 1 >= argc)
        return usage_error("%s", "no command: sublet fit [options] -- COMMAND ... {batch} ...");
    c->cmd = argv + i + 1;
    c->cmd_n = argc - i - 1;
    if (find_placeholder(c) != 0)
        return usage_error("%s", "no placeholder in the command: put {batch} (any {name}) where the value goes");
    if (c->min > c->max)
        return usage_error("%s", "--min is above --max");
    if (!c->probe_memory)
        c->probe_memory = 2 * c->target;
    if (c->probe_memory <= c->target)
        return usage_error("%s", "--probe-memory must be above --device-memory");
    return 0;
}

/* The command with every placeholder replaced by v (malloc'd strings). */
static char **command_for(const fit_ctx *c, long long v)
{
    char **argv = calloc((size_t)c->cmd_n + 1, sizeof *argv), num[32];
    size_t pl = strlen(c->placeholder);
    if (!argv)
        return NULL;
    snprintf(num, sizeof num, "%lld", v);
    for (int k = 0; k < c->cmd_n; k++) {
        const char *src = c->cmd[k], *p;
        size_t n = 0, cap = strlen(src) + 1;
        for (p = strstr(src, c->placeholder); p; p = strstr(p + pl, c->placeholder))
            cap += strlen(num);
        argv[k] = malloc(cap);
        if (!argv[k])
            return argv; /* the caller sees the NULL entry */
        while ((p = strstr(src, c->placeholder))) {
            memcpy(argv[k] + n, src, (size_t)(p - src));
            n += (size_t)(p - src);
            memcpy(argv[k] + n, num, strlen(num));
            n += strlen(num);
            src = p + pl;
        }
        strcpy(argv[k] + n, src);
    }
    return argv;
}

static void free_command(char **argv, int n)
{
    if (!argv)
        return;
    for (int k = 0; k < n; k++)
        free(argv[k]);
    free(argv);
}

/* "2.14" from "2.14.1+cu130". */
static void release_of(const char *torch_version, char *out, size_t cap)
{
    int major, minor;
    out[0] = '\0';
    if (sscanf(torch_version, "%d.%d", &major, &minor) == 2)
        snprintf(out, cap, "%d.%d", major, minor);
}

/* The library's questions about one recording at the target. */
static int ask(const fit_ctx *c, const sublet_trace *t, const cli_rec_stats *st, fit_probe *p)
{
    char conf[1200], plain[1200], rel[32], err[1024];
    const char *version = c->version;
    const char *cur[1];
    sublet_replay_options o;
    sublet_replay_result r;
    sublet_mincap_result m;
    sublet_tune_options to;
    sublet_tune_result tr;
    sublet_status st_m;
    release_of(st->torch_version, rel, sizeof rel);
    if (!version)
        version = rel;
    cli_record_conf(st, version, NULL, conf, sizeof conf);
    cli_record_conf(st, "", NULL, plain, sizeof plain);
    cli_record_replay_options(st, conf, 1, c->probe_memory, &o);
    if (sublet_replay_run(t, &o, &r, err, sizeof err) != SUBLET_OK)
        goto fail;
    p->peak_reserved = (int64_t)r.peak_reserved_bytes;
    (void)sublet_stats_lookup(&r.stats_end, "allocated_bytes.all.peak", &p->peak_alloc);
    /* reserved beyond the live bytes' peak: the cache's overhead (reserved
     * minus allocated when reserved peaked would count, on the larger probe
     * device, cache that the target's release paths would have freed) */
    p->frag = p->peak_reserved - p->peak_alloc;
    if (p->peak_reserved != st->torch[1] || p->peak_alloc != st->torch[0])
        fprintf(stderr, "sublet fit: value %lld: sublet's replay does not give PyTorch's peaks on the "
                        "probe device (reserved %" PRId64 " against %" PRId64 ", allocated %" PRId64
                        " against %" PRId64 "): `sublet record` shows the difference\n",
                p->v, p->peak_reserved, st->torch[1], p->peak_alloc, st->torch[0]);
    sublet_replay_result_free(&r);
    o.device_memory = c->target;
    o.replay_ooms = 0;
    if (sublet_replay_run(t, &o, &r, err, sizeof err) != SUBLET_OK)
        goto fail;
    p->now = r.ooms == 0 && r.errors == 0;
    sublet_replay_result_free(&r);
    st_m = sublet_replay_min_capacity(t, &o, 0, &m, err, sizeof err);
    p->mincap = m.min_capacity_bytes;
    sublet_mincap_result_free(&m);
    if (st_m != SUBLET_OK)
        goto fail_quiet;
    sublet_tune_options_init(&to);
    to.device_memory = c->target;
    to.threads = 0; /* every online core */
    to.diagnose = 0;
    to.warmup = 0;
    to.pytorch_version = *version ? version : NULL;
    cur[0] = plain;
    to.current = cur;
    if (sublet_tune(&t, 1, &to, &tr) == SUBLET_OK) {
        p->tuned = tr.pytorch.fits;
        p->tuned_mincap = tr.pytorch.min_capacity_bytes;
        snprintf(p->tuned_conf, sizeof p->tuned_conf, "%s", tr.pytorch.conf);
    } else if (tr.status != SUBLET_ERR_OOM) {
        sl_msg(err, sizeof err, "%s", tr.error);
        sublet_tune_result_free(&tr);
        goto fail_quiet;
    }
    sublet_tune_result_free(&tr);
    return CLI_OK;
fail:
    sublet_replay_result_free(&r);
fail_quiet:
    fprintf(stderr, "sublet fit: value %lld: the replay under '%s' failed: %s\n", p->v, conf, err);
    return CLI_ERROR;
}

static void print_log_tail(const char *log)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    char err[256];
    if (sublet_input_read(log, &buf, &n, err, sizeof err) != SUBLET_OK)
        return;
    fprintf(stderr, "--- the program's last output (%s) ---\n%s", log,
            (const char *)buf + (n > 2000 ? n - 2000 : 0));
    free(buf);
}

/* Record the program at v and ask about it; the probe is added. */
static int probe(fit_ctx *c, long long v)
{
    char dir[PATH_MAX + 32], path[PATH_MAX + 64], log[PATH_MAX + 64], mem[32];
    fit_probe *p = &c->probes[c->nprobes];
    char **argv;
    cli_rec_stats st;
    sublet_trace *t = NULL;
    int code = 0, rc, oom;
    if (c->nprobes == FIT_MAX_PROBES) {
        fprintf(stderr, "sublet fit: %d probes and no answer: the program's memory is not monotone "
                        "in the value?\n", FIT_MAX_PROBES);
        return CLI_ERROR;
    }
    memset(p, 0, sizeof *p);
    p->v = v;
    snprintf(dir, sizeof dir, "%s/%lld", c->work, v);
    cli_record_rmdir(dir); /* a probe of an earlier --keep run */
    if (mkdir(dir, 0755) != 0) {
        fprintf(stderr, "sublet fit: cannot make %s\n", dir);
        return CLI_ERROR;
    }
    snprintf(log, sizeof log, "%s/program.log", dir);
    snprintf(mem, sizeof mem, "%" PRIu64, c->probe_memory);
    c->s.memory = mem;
    if (!(argv = command_for(c, v)))
        return CLI_ERROR;
    fprintf(stderr, "sublet fit: probing %s = %lld\n", c->placeholder, v);
    rc = cli_record_run(&c->s, dir, argv, log, &code);
    free_command(argv, c->cmd_n);
    if (rc != CLI_OK)
        return rc;
    snprintf(path, sizeof path, "%s/stats.json", dir);
    if (cli_record_read_stats("fit", path, &st) != CLI_OK) {
        fprintf(stderr, "sublet fit: value %lld: the program (exit status %d) left no recording\n", v, code);
        print_log_tail(log);
        return CLI_ERROR;
    }
    oom = strcmp(st.exception, "OutOfMemoryError") == 0 || (code != 0 && !*st.exception && st.torch[4] > 0);
    if (code != 0 && !oom) {
        fprintf(stderr, "sublet fit: value %lld: the program failed (exit status %d%s%s)\n", v, code,
                *st.exception ? ", " : "", st.exception);
        print_log_tail(log);
        return CLI_ERROR;
    }
    if (st.max_entries && st.trace_entries >= st.max_entries) {
        fprintf(stderr, "sublet fit: value %lld: the history's ring buffer overflowed (%" PRIu64
                        " entries): give a larger --max-entries\n", v, st.max_entries);
        return CLI_ERROR;
    }
    snprintf(p->torch_version, sizeof p->torch_version, "%s", st.torch_version);
    p->peak_alloc = st.torch[0];
    p->peak_reserved = st.torch[1];
    c->nprobes++;
    if (oom || st.torch[4] > 0) {
        p->oom_big = 1;
        return CLI_OK;
    }
    snprintf(path, sizeof path, "%s/snapshot.pickle", dir);
    if (cli_load_input(path, NULL, &t, NULL, log, sizeof log) != SUBLET_OK) {
        fprintf(stderr, "sublet fit: value %lld: %s\n", v, log);
        return CLI_ERROR;
    }
    rc = ask(c, t, &st, p);
    cli_trace_free(t);
    return rc;
}

static int fits(const fit_probe *p, int which)
{
    return which ? p->tuned : p->now;
}

/* Where the min capacity, affine in the value through the two probes nearest
 * the boundary (lo and hi), reaches the target; -1 when it cannot tell. */
static long long estimate(const fit_ctx *c, int which, long long lo, long long hi)
{
    const fit_probe *a = NULL, *b = NULL;
    double slope, m_a, m_b;
    for (int k = 0; k < c->nprobes; k++) {
        const fit_probe *p = &c->probes[k];
        if (p->oom_big || !(which ? p->tuned_mincap : p->mincap))
            continue;
        if (p->v == lo)
            a = p;
        else if (p->v == hi)
            b = p;
    }
    for (int k = c->nprobes - 1; k >= 0 && (!a || !b); k--) { /* the latest others */
        const fit_probe *p = &c->probes[k];
        if (p->oom_big || !(which ? p->tuned_mincap : p->mincap) || p == a || p == b)
            continue;
        if (!a)
            a = p;
        else if (!b && p->v != a->v)
            b = p;
    }
    if (!a || !b || a->v == b->v)
        return -1;
    m_a = (double)(which ? a->tuned_mincap : a->mincap);
    m_b = (double)(which ? b->tuned_mincap : b->mincap);
    slope = (m_b - m_a) / (double)(b->v - a->v);
    if (!(slope > 0))
        return -1;
    return a->v + (long long)floor(((double)c->target - m_a) / slope);
}

/* The largest value that fits (which: 0 now, 1 tuned) into *answer (-1:
 * none, not even --min). */
static int search(fit_ctx *c, int which, long long *answer)
{
    int estimates = 0;
    for (;;) {
        long long lo = -1, hi = LLONG_MAX, cand;
        for (int k = 0; k < c->nprobes; k++)
            if (!fits(&c->probes[k], which) && c->probes[k].v < hi)
                hi = c->probes[k].v;
        for (int k = 0; k < c->nprobes; k++)
            if (fits(&c->probes[k], which) && c->probes[k].v > lo && c->probes[k].v < hi)
                lo = c->probes[k].v;
        if (hi == c->min) {
            *answer = -1;
            return CLI_OK;
        }
        if (lo >= 0 && (hi == lo + 1 || lo == c->max)) {
            *answer = lo;
            return CLI_OK;
        }
        if (lo < 0)
            cand = c->min;
        else {
            long long top = hi == LLONG_MAX ? c->max : hi - 1, e = -1;
            if (estimates < FIT_ESTIMATES)
                e = estimate(c, which, lo, hi);
            if (e >= 0 && hi != LLONG_MAX && e > top)
                e = -1; /* past a value already known not to fit: bisect instead */
            if (e >= 0) {
                estimates++;
                cand = e <= lo ? lo + 1 : e > top ? top : e;
            } else if (hi == LLONG_MAX)
                cand = lo * 2 > lo && lo * 2 <= c->max ? lo * 2 : c->max;
            else
                cand = lo + (hi - lo) / 2;
        }
        if (probe(c, cand) != CLI_OK)
            return CLI_ERROR;
    }
}

static int by_value(const void *x, const void *y)
{
    const fit_probe *a = x, *b = y;
    return (a->v > b->v) - (a->v < b->v);
}

static const char *size_text(int64_t v, char *buf, size_t cap)
{
    if (v < 0)
        return "?";
    sublet_format_size((uint64_t)v, buf, cap);
    return buf;
}

static void print_table(const fit_ctx *c)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("%-12s %-14s %-14s %-14s %-14s %-5s %-5s %s\n", c->placeholder, "peak alloc", "peak reserved",
           "fragmentation", "min capacity", "now", "tuned", "tuned settings");
    for (int k = 0; k < c->nprobes; k++) {
        const fit_probe *p = &c->probes[k];
        if (p->oom_big) {
            printf("%-12lld %-14s %-14s %-14s %-14s %-5s %-5s (out of memory on the %s probe device)\n",
                   p->v, size_text(p->peak_alloc, b1, sizeof b1), size_text(p->peak_reserved, b2, sizeof b2),
                   "-", "-", "no", "no", size_text((int64_t)c->probe_memory, b3, sizeof b3));
            continue;
        }
        printf("%-12lld %-14s %-14s %-14s %-14s %-5s %-5s %s\n", p->v,
               size_text(p->peak_alloc, b1, sizeof b1), size_text(p->peak_reserved, b2, sizeof b2),
               size_text(p->frag, b3, sizeof b3), size_text((int64_t)p->mincap, b4, sizeof b4),
               p->now ? "yes" : "no", p->tuned ? "yes" : "no", *p->tuned_conf ? p->tuned_conf : "\"\"");
    }
}

static const fit_probe *probe_at(const fit_ctx *c, long long v)
{
    for (int k = 0; k < c->nprobes; k++)
        if (c->probes[k].v == v)
            return &c->probes[k];
    return NULL;
}

static void print_answer(const fit_ctx *c, const char *what, long long v, int which)
{
    const fit_probe *p = v >= 0 ? probe_at(c, v) : NULL;
    if (v < 0) {
        printf("%s none: %s = %lld does not fit\n", what, c->placeholder, c->min);
        return;
    }
    printf("%s %s = %lld%s", what, c->placeholder, v, v == c->max ? " (--max)" : "");
    if (which && p)
        printf(" with PYTORCH_ALLOC_CONF='%s'", p->tuned_conf);
    putchar('\n');
}

static int write_json(const fit_ctx *c, long long now, long long tuned)
{
    FILE *f = fopen(c->out, "w");
    sl_json_writer w;
    const fit_probe *p = tuned >= 0 ? probe_at(c, tuned) : NULL;
    if (!f) {
        fprintf(stderr, "sublet fit: cannot write %s\n", c->out);
        return CLI_ERROR;
    }
    sl_json_init(&w, f);
    sl_json_object_begin(&w);
    sl_json_kv_string(&w, "placeholder", c->placeholder);
    sl_json_kv_u64(&w, "device_memory", c->target);
    sl_json_kv_u64(&w, "probe_memory", c->probe_memory);
    sl_json_key(&w, "fits_now");
    now >= 0 ? sl_json_i64(&w, now) : sl_json_null(&w);
    sl_json_key(&w, "fits_tuned");
    tuned >= 0 ? sl_json_i64(&w, tuned) : sl_json_null(&w);
    sl_json_kv_string(&w, "tuned_conf", p ? p->tuned_conf : "");
    sl_json_key(&w, "probes");
    sl_json_array_begin(&w);
    for (int k = 0; k < c->nprobes; k++) {
        p = &c->probes[k];
        sl_json_object_begin(&w);
        sl_json_key(&w, "value");
        sl_json_i64(&w, p->v);
        sl_json_key(&w, "peak_allocated");
        sl_json_i64(&w, p->peak_alloc);
        sl_json_key(&w, "peak_reserved");
        sl_json_i64(&w, p->peak_reserved);
        sl_json_kv_bool(&w, "oom_on_probe_device", p->oom_big);
        if (!p->oom_big) {
            sl_json_key(&w, "fragmentation");
            sl_json_i64(&w, p->frag);
            sl_json_kv_u64(&w, "min_capacity", p->mincap);
            sl_json_kv_u64(&w, "tuned_min_capacity", p->tuned_mincap);
            sl_json_kv_string(&w, "tuned_conf", p->tuned_conf);
        }
        sl_json_kv_bool(&w, "fits_now", p->now);
        sl_json_kv_bool(&w, "fits_tuned", p->tuned);
        sl_json_kv_string(&w, "torch_version", p->torch_version);
        sl_json_object_end(&w);
    }
    sl_json_array_end(&w);
    sl_json_object_end(&w);
    sl_json_finish(&w);
    if (fclose(f) != 0) {
        fprintf(stderr, "sublet fit: cannot write %s\n", c->out);
        return CLI_ERROR;
    }
    return CLI_OK;
}

/* Remove the probes' folders (not under --keep). */
static void clean(const fit_ctx *c)
{
    char dir[PATH_MAX + 32];
    for (int k = 0; k < c->nprobes + 1 && k < FIT_MAX_PROBES; k++) {
        snprintf(dir, sizeof dir, "%s/%lld", c->work, c->probes[k].v);
        cli_record_rmdir(dir);
    }
    (void)rmdir(c->work);
}

int cli_fit(int argc, char **argv)
{
    static fit_ctx c;
    char b1[32], b2[32];
    long long now = -1, tuned = -1;
    int rc = parse_args(argc, argv, &c);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    if (c.keep) {
        if (mkdir(c.keep, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "sublet fit: cannot make --keep %s\n", c.keep);
            return CLI_ERROR;
        }
        snprintf(c.work, sizeof c.work, "%s", c.keep);
    } else if (cli_record_workdir("fit", c.work, sizeof c.work) != CLI_OK)
        return CLI_ERROR;
    if (cli_record_env(&c.s) != CLI_OK)
        return CLI_ERROR;
    rc = search(&c, 0, &now);
    if (rc == CLI_OK)
        rc = search(&c, 1, &tuned);
    qsort(c.probes, (size_t)c.nprobes, sizeof c.probes[0], by_value);
    printf("target device %s; each probe on a null device of %s\n",
           size_text((int64_t)c.target, b1, sizeof b1), size_text((int64_t)c.probe_memory, b2, sizeof b2));
    print_table(&c);
    if (rc == CLI_OK) {
        print_answer(&c, "fits now:  ", now, 0);
        print_answer(&c, "fits tuned:", tuned, 1);
        if (c.out)
            rc = write_json(&c, now, tuned);
    }
    if (!c.keep)
        clean(&c);
    return rc;
}
