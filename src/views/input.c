/* sublet views — the entry of the views (sublet/views.h): reading an input
 * of any format (a trace or a snapshot, detected by content), the defaults
 * every view shares, the strings the views return, and the documents from
 * plain arguments (sublet_view_args): the options each CLI command starts
 * from, with the few arguments a binding passes, so that a binding (the
 * Python package) mirrors one small struct, none of the analyses', and gets
 * the CLI's defaults from the same code (sublet_view_args_init). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "base/read_file.h"
#include "sublet/config.h"
#include "views/views_internal.h"

sublet_status sublet_input_read(const char *path, uint8_t **buf, size_t *len, char *err,
                                size_t cap)
{
    return sl_read_file(path, 1, buf, len, err, cap);
}

/* A trace of any format; nothing matched: read as the events CSV, whose
 * errors name the line. */
static sublet_status parse_trace(const uint8_t *buf, size_t n, const char *name,
                                 const sublet_trace_load_options *opt, sublet_trace **out,
                                 char *err, size_t cap)
{
    char inner[1024];
    sublet_status st;
    if (sublet_trace_detect(buf, n) == SUBLET_FORMAT_UNKNOWN && n && buf[0] != 0x1f) {
        st = sublet_trace_parse_csv((const char *)buf, n, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            sl_msg(err, cap, "%s: not a recognised trace format; as an events CSV: %s", name,
                   inner);
    } else {
        st = sublet_trace_parse(buf, n, opt, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            sl_msg(err, cap, "%s: %s", name, inner);
    }
    return st;
}

sublet_status sublet_input_parse(const sublet_input_bytes *in, const sublet_trace_load_options *lo,
                                 sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap)
{
    if (!t || !in || (!in->buf && in->len))
        return SUBLET_ERR_INVALID_ARGUMENT;
    const void *buf = in->buf;
    size_t n = in->len;
    const char *name = in->name;
    *t = NULL;
    if (snap)
        *snap = NULL;
    if (!name)
        name = "input";
    const uint8_t *b = buf ? buf : (const uint8_t *)"";
    if (!snap)
        return parse_trace(b, n, name, lo, t, err, cap);
    sublet_trace_format f = sublet_trace_detect(b, n);
    if (f != SUBLET_FORMAT_SNAPSHOT_PICKLE && f != SUBLET_FORMAT_SNAPSHOT_JSON)
        return parse_trace(b, n, name, lo, t, err, cap);
    char inner[1024];
    sublet_status st = sublet_snapshot_parse(b, n, snap, inner, sizeof inner);
    if (st == SUBLET_OK)
        st = sublet_snapshot_trace(*snap, lo, t, inner, sizeof inner);
    if (st != SUBLET_OK) {
        sl_msg(err, cap, "%s: %s", name, inner);
        sublet_snapshot_free(*snap);
        *snap = NULL;
    }
    return st;
}

sublet_status sublet_input_load(const char *path, const sublet_trace_load_options *lo,
                                sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap)
{
    if (!path || !t)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *t = NULL;
    if (snap)
        *snap = NULL;
    uint8_t *buf;
    size_t n;
    sublet_status st = sublet_input_read(path, &buf, &n, err, cap);
    if (st != SUBLET_OK)
        return st;
    sublet_input_bytes in = {buf, n, strcmp(path, "-") == 0 ? "stdin" : path};
    st = sublet_input_parse(&in, lo, t, snap, err, cap);
    free(buf);
    return st;
}

const char *sublet_view_conf(const sublet_trace *t, const char *given, int *from_trace)
{
    if (from_trace)
        *from_trace = 0;
    if (given)
        return given;
    const char *rec = sublet_trace_settings(t);
    if (rec && *rec) {
        if (from_trace)
            *from_trace = 1;
        return rec;
    }
    return "";
}

uint64_t sublet_view_device_memory(const sublet_trace *t, uint64_t given)
{
    uint64_t dm = sublet_trace_device_memory(t);
    return given ? given : dm ? dm : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
}

/* ---- the documents from plain arguments ------------------------------------------------ */

/* A settings string the library can parse, or the message. */
static sublet_status check_conf(const char *conf, char *err, size_t cap)
{
    if (!conf)
        return SUBLET_OK;
    sublet_settings probe;
    sublet_settings_default(&probe);
    return sublet_settings_parse(&probe, conf, err, cap);
}

/* `sublet replay`'s options: 80 GiB unless given, the trace's settings. */
static void replay_options(const sublet_trace *t, const char *conf, uint64_t device_memory,
                           uint64_t at, sublet_replay_options *o)
{
    sublet_replay_options_init(o);
    o->conf = sublet_view_conf(t, conf, NULL);
    if (device_memory)
        o->device_memory = device_memory;
    o->stop_after = at;
}

/* `sublet frag`'s, `diagnose`'s and `report`'s: the trace's device unless given. */
static void frag_options(const sublet_trace *t, const char *conf, uint64_t device_memory,
                         sublet_replay_options *o)
{
    sublet_replay_options_init(o);
    o->conf = sublet_view_conf(t, conf, NULL);
    o->device_memory = sublet_view_device_memory(t, device_memory);
}

void sublet_view_args_init(sublet_view_args *a)
{
    memset(a, 0, sizeof *a);
    a->at = SUBLET_REPLAY_ALL;
}

/* *a, or the defaults when a is NULL. */
static sublet_view_args args_of(const sublet_view_args *a)
{
    sublet_view_args d;
    sublet_view_args_init(&d);
    return a ? *a : d;
}

#define CHECK_ARGS(t)                                                                     \
    do {                                                                                  \
        if (!out)                                                                         \
            return SUBLET_ERR_INVALID_ARGUMENT;                                           \
        *out = NULL;                                                                      \
        if (!(t))                                                                         \
            return SUBLET_ERR_INVALID_ARGUMENT;                                           \
        sublet_status cs_ = check_conf(a.conf, err, cap);                                 \
        if (cs_ != SUBLET_OK)                                                             \
            return cs_;                                                                   \
    } while (0)

sublet_status sublet_view_replay(const sublet_trace *t, const sublet_view_args *args, char **out,
                                 char *err, size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(t);
    sublet_replay_options o;
    replay_options(t, a.conf, a.device_memory, a.at, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = a.name;
    v.flags = a.flags & SUBLET_VIEW_SUMMARIES;
    return sublet_replay_json(t, &o, &v, out, err, cap);
}

sublet_status sublet_view_mincap(const sublet_trace *t, const sublet_view_args *args, char **out,
                                 char *err, size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(t);
    sublet_replay_options o;
    replay_options(t, a.conf, 0, a.at, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = a.name;
    return sublet_mincap_json(t, &o, &v, out, err, cap);
}

sublet_status sublet_view_frag(const sublet_trace *t, const sublet_view_args *args, char **out,
                               char *err, size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(t);
    sublet_replay_options o;
    frag_options(t, a.conf, a.device_memory, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = a.name;
    v.at = a.at;
    v.snapshot = a.snapshot;
    return sublet_frag_json(t, &o, &v, out, err, cap);
}

sublet_status sublet_view_diagnose(const sublet_trace *t, const sublet_view_args *args,
                                   char **out, char *err, size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(t);
    sublet_replay_options o;
    frag_options(t, a.conf, a.device_memory, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = a.name;
    return sublet_diagnose_json(t, &o, NULL, &v, out, err, cap);
}

/* tune's options from the view's arguments (cur: n slots for the current
 * settings). */
static void tune_options(const sublet_view_args *a, size_t n, const char **cur,
                         sublet_tune_options *o)
{
    for (size_t i = 0; i < n; i++)
        cur[i] = a->conf;
    sublet_tune_options_init(o);
    o->device_memory = a->device_memory;
    o->threads = a->threads;
    o->current = cur;
    o->progress = a->progress;
    o->progress_user = a->progress_user;
    o->pytorch_version = a->pytorch_version;
}

static sublet_status tune_count(size_t n, const void *const *items, char *err, size_t cap)
{
    if (n == 0 || n > 64) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "tune takes 1 to 64 traces, not %zu",
                       n);
    }
    for (size_t i = 0; i < n; i++)
        if (!items[i])
            return SUBLET_ERR_INVALID_ARGUMENT;
    return SUBLET_OK;
}

sublet_status sublet_view_tune(const sublet_trace *const *traces, const char *const *names,
                               size_t n, const sublet_view_args *args, char **out, char *err,
                               size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(traces);
    sublet_status st = tune_count(n, (const void *const *)traces, err, cap);
    if (st != SUBLET_OK)
        return st;
    const char *cur[64];
    sublet_tune_options o;
    tune_options(&a, n, cur, &o);
    return sublet_tune_json(traces, names, n, &o, out, err, cap);
}

/* One input of sublet_view_tune_paths, as `sublet tune` opens it: a format
 * that streams (an events CSV, an event log, an RMM log, a Kineto trace)
 * as a stream, another (a snapshot) loaded whole with a stream over it. */
typedef struct tune_input {
    sublet_trace_stream *ts;
    sublet_trace *t;
    sublet_snapshot *snap;
} tune_input;

static sublet_status tune_input_open(const char *path, tune_input *in, char *err, size_t cap)
{
    sublet_trace_format f = sublet_trace_detect_path(path);
    if (strcmp(path, "-") != 0 &&
        (f == SUBLET_FORMAT_EVENTS_CSV || f == SUBLET_FORMAT_EVENT_LOG ||
         f == SUBLET_FORMAT_RMM_CSV || f == SUBLET_FORMAT_KINETO_JSON))
        return sublet_trace_stream_open(path, NULL, &in->ts, err, cap);
    sublet_status st = sublet_input_load(path, NULL, &in->t, &in->snap, err, cap);
    if (st == SUBLET_OK && sublet_trace_stream_from_trace(in->t, &in->ts) != SUBLET_OK)
        st = sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    return st;
}

static void tune_input_close(tune_input *in)
{
    sublet_trace_stream_close(in->ts);
    if (in->t) {
        sublet_trace_extras_release(in->t);
        sublet_trace_free(in->t);
    }
    sublet_snapshot_free(in->snap);
}

sublet_status sublet_view_tune_paths(const char *const *paths, const char *const *names,
                                     size_t n, const sublet_view_args *args, char **out,
                                     char *err, size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(paths);
    sublet_status st = tune_count(n, (const void *const *)paths, err, cap);
    if (st != SUBLET_OK)
        return st;
    tune_input in[64];
    memset(in, 0, sizeof in);
    sublet_trace_stream *ts[64];
    const char *shown[64];
    for (size_t i = 0; i < n && st == SUBLET_OK; i++) {
        shown[i] = names && names[i] ? names[i] : paths[i];
        st = tune_input_open(paths[i], &in[i], err, cap);
        ts[i] = in[i].ts;
    }
    if (st == SUBLET_OK) {
        const char *cur[64];
        sublet_tune_options o;
        tune_options(&a, n, cur, &o);
        st = sublet_tune_json_streams(ts, shown, n, &o, out, err, cap);
    }
    for (size_t i = 0; i < n; i++)
        tune_input_close(&in[i]);
    return st;
}

sublet_status sublet_view_report(const sublet_trace *t, const sublet_view_args *args, char **out,
                                 size_t *len, char *err, size_t cap)
{
    sublet_view_args a = args_of(args);
    CHECK_ARGS(t);
    sublet_replay_options o;
    frag_options(t, a.conf, a.device_memory, &o);
    sublet_tune_options to;
    sublet_tune_options_init(&to);
    /* your device and your current settings, as the page's replay */
    to.device_memory = a.device_memory;
    const char *cur[1] = {a.conf};
    to.current = cur;
    to.progress = a.progress;
    to.progress_user = a.progress_user;
    sublet_report_options ro;
    sublet_report_options_init(&ro);
    ro.tune = &to;
    sublet_report_info info;
    ro.info = &info;
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = a.name;
    v.flags = a.flags & SUBLET_VIEW_TUNE;
    sublet_status st = sublet_report_html(t, &o, &ro, &v, out, err, cap);
    if (len)
        *len = st == SUBLET_OK ? info.len : 0;
    return st;
}
