/* sublet CLI — helpers the subcommands share: reading inputs of any format,
 * option parsing, and replaying a trace with recording on to get the
 * replayed allocator's snapshot. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sublet/history.h"

int cli_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t cap)
{
    *buf = NULL;
    *len = 0;
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t n = 0, bcap = 1 << 16;
    uint8_t *b = malloc(bcap);
    int rc = b ? 0 : -1;
    while (rc == 0) {
        if (n == bcap) {
            uint8_t *nb = bcap <= SIZE_MAX / 2 ? realloc(b, bcap * 2) : NULL;
            if (!nb) {
                rc = -1;
                break;
            }
            b = nb;
            bcap *= 2;
        }
        size_t got = fread(b + n, 1, bcap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (rc != 0)
        snprintf(err, cap, "%s: out of memory reading the file", is_stdin ? "stdin" : path);
    else if (ferror(f)) {
        snprintf(err, cap, "%s: read error: %s", is_stdin ? "stdin" : path, strerror(errno));
        rc = -1;
    }
    if (!is_stdin)
        fclose(f);
    if (rc != 0) {
        free(b);
        return -1;
    }
    *buf = b;
    *len = n;
    return 0;
}

sublet_status cli_parse_trace(const uint8_t *buf, size_t n, const char *name,
                              const sublet_trace_load_options *opt, sublet_trace **out, char *err,
                              size_t cap)
{
    *out = NULL;
    char inner[1024];
    sublet_status st;
    if (sublet_trace_detect(buf, n) == SUBLET_FORMAT_UNKNOWN && n && buf[0] != 0x1f) {
        /* Nothing matched: read it as the events CSV, whose errors name the line. */
        st = sublet_trace_parse_csv((const char *)buf, n, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            snprintf(err, cap, "%s: not a recognised trace format; as an events CSV: %s", name,
                     inner);
    } else {
        st = sublet_trace_parse(buf, n, opt, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            snprintf(err, cap, "%s: %s", name, inner);
        else if (sublet_trace_notice(*out)) /* an event log's torn tail, lost events */
            fprintf(stderr, "sublet: %s: warning: %s\n", name, sublet_trace_notice(*out));
    }
    return st;
}

sublet_status cli_load_trace(const char *path, const sublet_trace_load_options *opt,
                             sublet_trace **out, char *err, size_t cap)
{
    *out = NULL;
    uint8_t *buf;
    size_t n;
    if (cli_read_file(path, &buf, &n, err, cap) != 0)
        return SUBLET_ERR_IO;
    sublet_status st =
        cli_parse_trace(buf, n, strcmp(path, "-") == 0 ? "stdin" : path, opt, out, err, cap);
    free(buf);
    return st;
}

void cli_trace_free(sublet_trace *t)
{
    if (!t)
        return;
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

int cli_parse_prelude(const char *s, int *mode)
{
    if (!s)
        return -1;
    if (strcmp(s, "auto") == 0)
        *mode = SUBLET_PRELUDE_AUTO;
    else if (strcmp(s, "adopt") == 0)
        *mode = SUBLET_PRELUDE_ADOPT;
    else if (strcmp(s, "allocate") == 0)
        *mode = SUBLET_PRELUDE_ALLOCATE;
    else
        return -1;
    return 0;
}

const char *cli_prelude_name(int mode)
{
    return mode == SUBLET_PRELUDE_ADOPT ? "adopt" : mode == SUBLET_PRELUDE_ALLOCATE ? "allocate"
                                                                                   : "auto";
}

int cli_parse_index(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - 1 - d) / 10) /* UINT64_MAX means "all" */
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *matched)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    *matched = 0;
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=') {
        *matched = 1;
        return a + n + 1;
    }
    if (a[n] != '\0')
        return NULL;
    *matched = 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

/* ---- replay with recording ------------------------------------------------------------ */

typedef struct snap_ctx {
    sublet_snapshot *snap;
    sublet_status st;
    uint64_t dropped;
} snap_ctx;

static void take_at_finish(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)last_event;
    (void)st;
    snap_ctx *c = user;
    if (!a) {
        c->st = SUBLET_ERR_INVALID_ARGUMENT;
        return;
    }
    c->dropped = sublet_history_dropped(a);
    c->st = sublet_snapshot_take(a, &c->snap);
}

void cli_record_options(const sublet_trace *t, sublet_replay_options *o)
{
    o->record = SUBLET_RECORD_ALL;
    /* PyTorch's default context "all" when the trace has stacks to give */
    o->record_context = sublet_trace_stack_count(t) ? SUBLET_CONTEXT_ALL : SUBLET_CONTEXT_NONE;
    /* room for every event: nothing falls out of the ring buffer */
    size_t n = sublet_trace_count(t);
    o->record_max_entries = n + n / 4 + 1024;
    /* an allocated prelude is the engine's own doing: keep it, so that the
     * snapshot's trace runs from an empty allocator and replays soundly */
    o->record_prelude = 1;
}

sublet_status cli_replay_snapshot(const sublet_trace *t, sublet_replay_options *o,
                                  sublet_replay_result *r, sublet_snapshot **snap, char *err,
                                  size_t cap)
{
    *snap = NULL;
    snap_ctx c = {NULL, SUBLET_OK, 0};
    cli_record_options(t, o);
    o->on_finish = take_at_finish;
    o->finish_user = &c;
    sublet_status st = sublet_replay_run(t, o, r, err, cap);
    o->on_finish = NULL;
    o->finish_user = NULL;
    if (c.st != SUBLET_OK) {
        if (st == SUBLET_OK)
            snprintf(err, cap, "cannot take the snapshot: %s", sublet_status_text(c.st));
        sublet_snapshot_free(c.snap);
        return st != SUBLET_OK ? st : c.st;
    }
    *snap = c.snap;
    return st;
}

/* --pytorch-version's value, NULL when not given */
static const char *pytorch_version;

/* "pytorch_version:V,conf" (or without the comma when conf is empty), kept for
 * the process's life; NULL when out of memory. */
static char *with_version(const char *conf)
{
    size_t n = strlen(pytorch_version) + strlen(conf) + 20;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "pytorch_version:%s%s%s", pytorch_version, *conf ? "," : "", conf);
    return s;
}

const char *cli_pytorch_version(void) { return pytorch_version; }

int cli_take_pytorch_version(const char *cmd, int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        int m;
        const char *v = cli_opt_value(*argc, argv, &i, "--pytorch-version", &m);
        if (!m) {
            argv[out++] = argv[i];
            continue;
        }
        char probe[64], err[256];
        sublet_settings s;
        sublet_settings_default(&s);
        if (!v || snprintf(probe, sizeof probe, "pytorch_version:%s", v) >= (int)sizeof probe ||
            strchr(v, ',') || sublet_settings_parse(&s, probe, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet %s: --pytorch-version: %s\n", cmd,
                    v ? (strchr(v, ',') ? "expected one release such as 2.6" : err)
                      : "needs a value");
            return CLI_USAGE;
        }
        pytorch_version = v;
    }
    *argc = out;
    argv[out] = NULL;
    if (!pytorch_version)
        return 0;
    for (int i = 1; i < *argc; i++) {
        int m;
        int at = i;
        const char *v = cli_opt_value(*argc, argv, &i, "--conf", &m);
        if (!m || !v)
            continue;
        char *nv = with_version(v);
        if (!nv) {
            fprintf(stderr, "sublet %s: out of memory\n", cmd);
            return CLI_USAGE;
        }
        if (i == at) { /* --conf=V */
            char *arg = malloc(strlen(nv) + 8);
            if (!arg) {
                fprintf(stderr, "sublet %s: out of memory\n", cmd);
                return CLI_USAGE;
            }
            sprintf(arg, "--conf=%s", nv);
            free(nv);
            argv[i] = arg;
        } else {
            argv[i] = nv;
        }
    }
    return 0;
}

const char *cli_conf_for(const sublet_trace *t, const char *given, int *from_trace)
{
    return cli_conf_for_settings(sublet_trace_settings(t), given, from_trace);
}

const char *cli_conf_for_settings(const char *rec, const char *given, int *from_trace)
{
    *from_trace = 0;
    if (given)
        return given; /* --conf: cli_take_pytorch_version put the version in */
    const char *conf = "";
    if (rec && *rec) {
        *from_trace = 1;
        conf = rec;
    }
    if (pytorch_version) {
        char *v = with_version(conf);
        if (v)
            return v;
    }
    return conf;
}

const char *cli_fmt_mib(uint64_t n, char *buf, size_t cap)
{
    if (n % ((uint64_t)1 << 20) == 0)
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(n >> 20));
    else
        snprintf(buf, cap, "%.1f MiB", (double)n / (double)((uint64_t)1 << 20));
    return buf;
}

const char *cli_fmt_us(double us, char *buf, size_t cap)
{
    if (us >= 1e6)
        snprintf(buf, cap, "%.2f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, cap, "%.1f ms", us / 1e3);
    else
        snprintf(buf, cap, "%.0f \xc2\xb5s", us);
    return buf;
}

void cli_tune_calls_sum(const sublet_tune_eval *e, sublet_tune_calls *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; e->per_trace && i < e->ntraces; i++) {
        const sublet_tune_calls *c = &e->per_trace[i].calls;
        out->segment_allocs += c->segment_allocs;
        out->segment_frees += c->segment_frees;
        out->malloc_bytes += c->malloc_bytes;
        out->va_reserves += c->va_reserves;
        out->va_releases += c->va_releases;
        out->va_maps += c->va_maps;
        out->va_unmaps += c->va_unmaps;
        out->map_pages += c->map_pages;
        out->unmap_pages += c->unmap_pages;
        out->retries += c->retries;
    }
}
