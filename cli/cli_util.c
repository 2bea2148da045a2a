/* sublet CLI — helpers the subcommands share: reading inputs of any format,
 * option parsing, and replaying a trace with recording on to get the
 * replayed allocator's snapshot. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "cli.h"
#include "sublet/history.h"

/* A trace's notice (an event log's torn tail, lost events) as a warning. */
static void tell_notice(const char *name, const sublet_trace *t)
{
    if (t && sublet_trace_notice(t))
        fprintf(stderr, "sublet: %s: warning: %s\n", name, sublet_trace_notice(t));
}

sublet_status cli_load_input(const char *path, const sublet_trace_load_options *lo,
                             sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap)
{
    sublet_status st = sublet_input_load(path, lo, t, snap, err, cap);
    if (st == SUBLET_OK)
        tell_notice(strcmp(path, "-") == 0 ? "stdin" : path, *t);
    return st;
}

sublet_status cli_parse_input(const sublet_input_bytes *in, const sublet_trace_load_options *lo,
                              sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap)
{
    sublet_status st = sublet_input_parse(in, lo, t, snap, err, cap);
    if (st == SUBLET_OK)
        tell_notice(in->name ? in->name : "input", *t);
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

int cli_check_conf(const char *cmd, const char *option, const char *conf)
{
    sublet_settings probe;
    sublet_settings_default(&probe);
    char err[512];
    if (sublet_settings_parse(&probe, conf, err, sizeof err) == SUBLET_OK)
        return 0;
    fprintf(stderr, "sublet %s: %s: %s\n", cmd, option, err);
    return CLI_USAGE;
}

int cli_source_option(int argc, char **argv, int *i, const char **conf, uint64_t *device_memory,
                      sublet_trace_load_options *lo, char *why, size_t cap)
{
    int m;
    const char *v;
    if (conf && ((v = cli_opt_value(argc, argv, i, "--conf", &m)) || m)) {
        if (!v) {
            sl_msg(why, cap, "--conf needs a value");
            return -1;
        }
        *conf = v;
        return 1;
    }
    if (device_memory && ((v = cli_opt_value(argc, argv, i, "--device-memory", &m)) || m)) {
        if (!v || sublet_parse_size(v, device_memory) != 0 || *device_memory == 0) {
            sl_msg(why, cap, "--device-memory: '%s' is not a size (e.g. 80GiB)", v ? v : "");
            return -1;
        }
        return 1;
    }
    if (lo && ((v = cli_opt_value(argc, argv, i, "--device", &m)) || m)) {
        uint64_t d;
        if (!v || cli_parse_index(v, &d) != 0 || d > INT32_MAX) {
            sl_msg(why, cap, "--device: '%s' is not a device number", v ? v : "");
            return -1;
        }
        lo->pick_device = 1;
        lo->device = (int64_t)d;
        return 1;
    }
    return 0;
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

/* Recording for a snapshot of a replay of n rows, stacks from the trace
 * when it has any. */
static void record_options(uint32_t stacks, uint64_t n, sublet_replay_options *o)
{
    o->record = SUBLET_RECORD_ALL;
    /* PyTorch's default context "all" when the trace has stacks to give */
    o->record_context = stacks ? SUBLET_CONTEXT_ALL : SUBLET_CONTEXT_NONE;
    /* room for every event: nothing falls out of the ring buffer */
    o->record_max_entries = (size_t)(n + n / 4 + 1024);
    /* an allocated prelude is the engine's own doing: keep it, so that the
     * snapshot's trace runs from an empty allocator and replays soundly */
    o->record_prelude = 1;
}

void cli_record_options(const sublet_trace *t, sublet_replay_options *o)
{
    record_options(sublet_trace_stack_count(t), sublet_trace_count(t), o);
}

/* The replay of the trace behind ts (a stream over it when t is NULL), with
 * the snapshot taken at its end. */
static sublet_status replay_snapshot(const sublet_trace *t, sublet_trace_stream *ts,
                                     sublet_replay_options *o, sublet_replay_result *r,
                                     sublet_snapshot **snap, char *err, size_t cap)
{
    *snap = NULL;
    snap_ctx c = {NULL, SUBLET_OK, 0};
    o->on_finish = take_at_finish;
    o->finish_user = &c;
    sublet_status st = t ? sublet_replay_run(t, o, r, err, cap)
                         : sublet_replay_stream(ts, o, r, err, cap);
    o->on_finish = NULL;
    o->finish_user = NULL;
    if (c.st != SUBLET_OK) {
        if (st == SUBLET_OK)
            sl_msg(err, cap, "cannot take the snapshot: %s", sublet_status_text(c.st));
        sublet_snapshot_free(c.snap);
        return st != SUBLET_OK ? st : c.st;
    }
    *snap = c.snap;
    return st;
}

sublet_status cli_replay_snapshot(const sublet_trace *t, sublet_replay_options *o,
                                  sublet_replay_result *r, sublet_snapshot **snap, char *err,
                                  size_t cap)
{
    cli_record_options(t, o);
    return replay_snapshot(t, NULL, o, r, snap, err, cap);
}

sublet_status cli_replay_snapshot_stream(sublet_trace_stream *ts, uint64_t rows,
                                         sublet_replay_options *o, sublet_replay_result *r,
                                         sublet_snapshot **snap, char *err, size_t cap)
{
    record_options(sublet_trace_stream_stack_count(ts), rows, o);
    sublet_status st = sublet_trace_stream_rewind(ts, err, cap);
    if (st != SUBLET_OK) {
        *snap = NULL;
        memset(r, 0, sizeof *r);
        return st;
    }
    return replay_snapshot(NULL, ts, o, r, snap, err, cap);
}

/* --pytorch-version's value, NULL when not given */
static const char *pytorch_version;

/* The strings with_version made, each kept for the process's life and
 * reachable from here (so no leak checker takes them for lost). */
typedef struct versioned {
    struct versioned *next;
    char text[];
} versioned;
static versioned *made;

/* "pytorch_version:V,conf" (or without the comma when conf is empty), kept for
 * the process's life; NULL when out of memory. */
static char *with_version(const char *conf)
{
    size_t n = strlen(pytorch_version) + strlen(conf) + 20;
    versioned *v = malloc(sizeof *v + n);
    if (!v)
        return NULL;
    snprintf(v->text, n, "pytorch_version:%s%s%s", pytorch_version, *conf ? "," : "", conf);
    v->next = made;
    made = v;
    return v->text;
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
            argv[i] = arg;
        } else {
            argv[i] = nv;
        }
    }
    return 0;
}

const char *cli_conf_for(const sublet_trace *t, const char *given, int *from_trace)
{
    int rec;
    const char *conf = sublet_view_conf(t, given, &rec);
    if (from_trace)
        *from_trace = rec;
    if (given || !pytorch_version)
        return conf; /* --conf: cli_take_pytorch_version put the version in */
    char *v = with_version(conf);
    return v ? v : conf;
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

/* ---- an input read several times, loaded whole or streamed ---------------------------- */

int cli_format_streams(sublet_trace_format f, const char *path)
{
    return f == SUBLET_FORMAT_EVENTS_CSV || f == SUBLET_FORMAT_EVENT_LOG ||
           ((f == SUBLET_FORMAT_RMM_CSV || f == SUBLET_FORMAT_KINETO_JSON) &&
            strcmp(path, "-") != 0);
}

int cli_stream_wanted(const char *path)
{
    const char *whole = getenv("SUBLET_REPLAY_WHOLE");
    if (whole && *whole && strcmp(whole, "0") != 0)
        return 0;
    return cli_format_streams(sublet_trace_detect_path(path), path);
}

int cli_input_open(const char *prog, const char *path, const sublet_trace_load_options *lo,
                   int may_stream, cli_input *in)
{
    memset(in, 0, sizeof *in);
    char err[1600] = "";
    sublet_status st;
    if (may_stream && strcmp(path, "-") != 0 && cli_stream_wanted(path)) {
        in->streamed = 1;
        st = sublet_trace_stream_open(path, lo, &in->file, err, sizeof err);
        if (st == SUBLET_OK)
            st = sublet_trace_stream_copy(in->file, &in->ts, err, sizeof err);
        if (st == SUBLET_OK && sublet_trace_stream_notice(in->file))
            fprintf(stderr, "sublet: %s: warning: %s\n", path,
                    sublet_trace_stream_notice(in->file));
    } else {
        st = cli_load_input(path, lo, &in->t, &in->snap, err, sizeof err);
        if (st == SUBLET_OK && sublet_trace_stream_from_trace(in->t, &in->ts) != SUBLET_OK) {
            st = sl_fail(err, sizeof err, SUBLET_ERR_NO_MEMORY, "out of memory");
        }
    }
    if (st != SUBLET_OK) {
        fprintf(stderr, "%s: %s\n", prog, err[0] ? err : sublet_status_text(st));
        cli_input_close(in);
        return CLI_ERROR;
    }
    return CLI_OK;
}

void cli_input_close(cli_input *in)
{
    sublet_trace_stream_close(in->ts);
    sublet_trace_stream_close(in->file);
    cli_trace_free(in->t);
    sublet_snapshot_free(in->snap);
    memset(in, 0, sizeof *in);
}

uint64_t cli_input_rows(cli_input *in)
{
    if (in->t)
        return sublet_trace_count(in->t);
    return sublet_trace_stream_rows(in->file); /* read to its end by the copy */
}
