/* sublet views — the documents from plain arguments (sublet/views.h,
 * "the same from plain arguments"): the options each CLI command starts
 * from, with the few arguments a binding passes, so that a binding (the
 * Python package) needs no struct of the library and gets the CLI's
 * defaults from the same code. */
#include <stdio.h>
#include <string.h>

#include "sublet/config.h"

#include "views/views_internal.h"

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

#define CHECK_ARGS(t)                                                                     \
    do {                                                                                  \
        if (!out)                                                                         \
            return SUBLET_ERR_INVALID_ARGUMENT;                                           \
        *out = NULL;                                                                      \
        if (!(t))                                                                         \
            return SUBLET_ERR_INVALID_ARGUMENT;                                           \
        sublet_status cs_ = check_conf(conf, err, cap);                                   \
        if (cs_ != SUBLET_OK)                                                             \
            return cs_;                                                                   \
    } while (0)

sublet_status sublet_view_replay(const sublet_trace *t, const char *name, const char *conf,
                                 uint64_t device_memory, uint64_t at, unsigned flags, char **out,
                                 char *err, size_t cap)
{
    CHECK_ARGS(t);
    sublet_replay_options o;
    replay_options(t, conf, device_memory, at, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = name;
    v.flags = flags & SUBLET_VIEW_SUMMARIES;
    return sublet_replay_json(t, &o, &v, out, err, cap);
}

sublet_status sublet_view_mincap(const sublet_trace *t, const char *name, const char *conf,
                                 uint64_t at, char **out, char *err, size_t cap)
{
    CHECK_ARGS(t);
    sublet_replay_options o;
    replay_options(t, conf, 0, at, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = name;
    return sublet_mincap_json(t, &o, &v, out, err, cap);
}

sublet_status sublet_view_frag(const sublet_trace *t, const sublet_snapshot *snap,
                               const char *name, const char *conf, uint64_t device_memory,
                               uint64_t at, char **out, char *err, size_t cap)
{
    CHECK_ARGS(t);
    sublet_replay_options o;
    frag_options(t, conf, device_memory, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = name;
    v.at = at;
    v.snapshot = snap;
    return sublet_frag_json(t, &o, &v, out, err, cap);
}

sublet_status sublet_view_diagnose(const sublet_trace *t, const char *name, const char *conf,
                                   uint64_t device_memory, char **out, char *err, size_t cap)
{
    CHECK_ARGS(t);
    sublet_replay_options o;
    frag_options(t, conf, device_memory, &o);
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = name;
    return sublet_diagnose_json(t, &o, NULL, &v, out, err, cap);
}

sublet_status sublet_view_tune(const sublet_trace *const *traces, const char *const *names,
                               size_t n, const char *current, uint64_t device_memory,
                               unsigned threads, sublet_progress_fn progress, void *user,
                               char **out, char *err, size_t cap)
{
    const char *conf = current;
    CHECK_ARGS(traces);
    if (n == 0 || n > 64) {
        snprintf(err, cap, "tune takes 1 to 64 traces, not %zu", n);
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++)
        if (!traces[i])
            return SUBLET_ERR_INVALID_ARGUMENT;
    const char *cur[64];
    for (size_t i = 0; i < n; i++)
        cur[i] = current;
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    o.device_memory = device_memory;
    o.threads = threads;
    o.current = cur;
    o.progress = progress;
    o.progress_user = user;
    return sublet_tune_json(traces, names, n, &o, out, err, cap);
}

sublet_status sublet_view_report(const sublet_trace *t, const char *name, const char *conf,
                                 uint64_t device_memory, unsigned flags,
                                 sublet_progress_fn progress, void *user, char **out,
                                 size_t *len, char *err, size_t cap)
{
    CHECK_ARGS(t);
    sublet_replay_options o;
    frag_options(t, conf, device_memory, &o);
    sublet_tune_options to;
    sublet_tune_options_init(&to);
    /* your device and your current settings, as the page's replay */
    to.device_memory = device_memory;
    const char *cur[1] = {conf};
    to.current = cur;
    to.progress = progress;
    to.progress_user = user;
    sublet_report_options ro;
    sublet_report_options_init(&ro);
    ro.tune = &to;
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = name;
    v.flags = flags & SUBLET_VIEW_TUNE;
    sublet_report_info info;
    sublet_status st = sublet_report_html(t, &o, &ro, &v, out, &info, err, cap);
    if (len)
        *len = st == SUBLET_OK ? info.len : 0;
    return st;
}
