/* sublet — the tuner's traces as sources it reads again and again: each is
 * a stream read again cheaply (sublet_trace_stream_rereadable: a trace in
 * memory, or a binary copy of any other stream made once, 64 bytes a row
 * on disk), and every replay, pass and lookup of the search reads it
 * through a reader of its own (sublet_trace_stream_reader), so that the
 * tuner's memory follows the live blocks, not the length of the traces,
 * and its threads read one copy at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "tune/tune_internal.h"

#define CHUNK 4096

void tn_sources_close(tn_sources *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->owned[i])
            sublet_trace_stream_close(s->src[i]);
    memset(s, 0, sizeof *s);
}

/* Source i: the stream given when it is read again cheaply, else a binary
 * copy of it (owned). */
static sublet_status source_put(tn_sources *s, size_t i, sublet_trace_stream *in, int owned,
                                char *err, size_t err_cap)
{
    sublet_status st = SUBLET_OK;
    if (!in)
        st = sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "trace %zu is NULL", i);
    else if (sublet_trace_stream_rereadable(in))
        s->src[i] = in;
    else if ((st = sublet_trace_stream_copy(in, &s->src[i], err, err_cap)) == SUBLET_OK)
        owned = 1;
    if (st != SUBLET_OK) {
        if (owned)
            sublet_trace_stream_close(in);
        tn_sources_close(s);
        return st;
    }
    s->owned[i] = (unsigned char)owned;
    s->n = i + 1;
    return SUBLET_OK;
}

sublet_status tn_sources_of_traces(tn_sources *s, const sublet_trace *const *traces, size_t n)
{
    memset(s, 0, sizeof *s);
    if (n > MAX_TRACES)
        return SUBLET_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++) {
        sublet_trace_stream *in = NULL;
        sublet_status st = traces[i] ? sublet_trace_stream_from_trace(traces[i], &in)
                                     : SUBLET_ERR_INVALID_ARGUMENT;
        if (st != SUBLET_OK) {
            tn_sources_close(s);
            return st;
        }
        if ((st = source_put(s, i, in, 1, NULL, 0)) != SUBLET_OK)
            return st;
    }
    return SUBLET_OK;
}

sublet_status tn_sources_of_streams(tn_sources *s, sublet_trace_stream *const *in, size_t n,
                                    char *err, size_t err_cap)
{
    memset(s, 0, sizeof *s);
    if (n > MAX_TRACES)
        return SUBLET_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++) {
        sublet_status st = source_put(s, i, in[i], 0, err, err_cap);
        if (st != SUBLET_OK)
            return st;
    }
    return SUBLET_OK;
}

sublet_status tn_reader(const tfacts *f, sublet_trace_stream **r)
{
    return sublet_trace_stream_reader(f->src, r);
}

sublet_status tn_rows_each(const tfacts *f, tn_rows_fn fn, void *user, char *err,
                           size_t err_cap)
{
    sublet_trace_stream *r = NULL;
    sublet_status st = tn_reader(f, &r);
    if (st != SUBLET_OK)
        return sl_fail(err, err_cap, st, "cannot read the trace again: %s",
                       sublet_status_text(st));
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(r, &pre);
    int stop = npre ? fn(user, pre, npre, 0) : 0;
    sublet_trace_event *buf = stop ? NULL : malloc(CHUNK * sizeof *buf);
    if (!stop && !buf)
        st = sl_fail(err, err_cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    uint64_t at = npre;
    size_t got;
    while (buf && !stop &&
           (st = sublet_trace_stream_next(r, buf, CHUNK, &got, err, err_cap)) == SUBLET_OK && got) {
        stop = fn(user, buf, got, at);
        at += got;
    }
    free(buf);
    sublet_trace_stream_close(r);
    return st;
}

sublet_status tn_replay_options(const tfacts *f, const sublet_replay_options *o,
                                sublet_replay_result *r, char *err, size_t err_cap)
{
    sublet_trace_stream *rd = NULL;
    sublet_status st = tn_reader(f, &rd);
    if (st != SUBLET_OK) {
        memset(r, 0, sizeof *r);
        return sl_fail(err, err_cap, st, "cannot read the trace again: %s",
                       sublet_status_text(st));
    }
    st = sublet_replay_stream(rd, o, r, err, err_cap);
    sublet_trace_stream_close(rd);
    return st;
}

typedef struct fetch {
    const uint64_t *idx;
    size_t n, k;
    sublet_trace_event *out;
} fetch;

static int fetch_rows(void *user, const sublet_trace_event *ev, size_t n, uint64_t first)
{
    fetch *q = user;
    while (q->k < q->n && q->idx[q->k] < first + n) {
        if (q->idx[q->k] >= first)
            q->out[q->k] = ev[q->idx[q->k] - first];
        q->k++;
    }
    return q->k == q->n;
}

sublet_status tn_rows_fetch(const tfacts *f, const uint64_t *idx, size_t n,
                            sublet_trace_event *out, char *err, size_t err_cap)
{
    if (!n)
        return SUBLET_OK;
    memset(out, 0, n * sizeof *out);
    fetch q = {idx, n, 0, out};
    return tn_rows_each(f, fetch_rows, &q, err, err_cap);
}

/* ---- the facts of a trace ----------------------------------------------------------- */

static int scan_facts(void *user, const sublet_trace_event *ev, size_t n, uint64_t first)
{
    tfacts *f = user;
    for (size_t i = 0; i < n; i++) {
        if (first + i < f->npre) {
            uint64_t s = ev[i].kind == SUBLET_TRACE_PRE_SEGMENT ? ev[i].size : ev[i].block_size;
            if (s > f->max_pre_segment)
                f->max_pre_segment = s;
        }
        if (ev[i].pool_id[0] || ev[i].pool_id[1])
            f->private_pools = 1;
    }
    f->rows = first + n;
    return 0;
}

sublet_status tn_facts_get(sublet_trace_stream *src, tfacts *f, char *err, size_t err_cap)
{
    memset(f, 0, sizeof *f);
    f->src = src;
    f->npre = sublet_trace_stream_prelude(src, &f->pre);
    f->settings = sublet_trace_stream_settings(src);
    f->device_memory = sublet_trace_stream_device_memory(src);
    sublet_trace_stream *r = NULL;
    sublet_status st = tn_reader(f, &r);
    if (st != SUBLET_OK)
        return sl_fail(err, err_cap, st, "cannot read the trace again: %s",
                       sublet_status_text(st));
    sublet_trace_info info;
    const sublet_trace *t = sublet_trace_stream_trace(r);
    st = t ? sublet_trace_info_get(t, &info) : sublet_trace_stream_info(r, &info, err, err_cap);
    sublet_trace_stream_close(r);
    if (st != SUBLET_OK)
        return st;
    f->peak_requested = info.peak_requested_bytes;
    f->recorded_reserved = info.peak_reserved_bytes;
    f->rows = f->npre;
    return tn_rows_each(f, scan_facts, f, err, err_cap);
}

sublet_status tn_facts_of_traces(const sublet_trace *const *traces, size_t n, const char *version,
                                 tn_sources *src, tfacts **out, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    *out = NULL;
    tfacts *f = calloc(n ? n : 1, sizeof *f);
    sublet_status st = f ? tn_sources_of_traces(src, traces, n) : SUBLET_ERR_NO_MEMORY;
    if (st != SUBLET_OK) {
        free(f);
        return st;
    }
    for (size_t i = 0; i < n && st == SUBLET_OK; i++) {
        st = tn_facts_get(src->src[i], &f[i], err, err_cap);
        f[i].version = version;
    }
    if (st != SUBLET_OK) {
        if (err && err_cap && !err[0])
            sl_msg(err, err_cap, "%s", sublet_status_text(st));
        free(f);
        tn_sources_close(src);
        return st;
    }
    *out = f;
    return SUBLET_OK;
}

uint64_t tn_default_device(const tfacts *f, size_t n)
{
    uint64_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (f[i].device_memory > d)
            d = f[i].device_memory;
    return d ? d : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
}
