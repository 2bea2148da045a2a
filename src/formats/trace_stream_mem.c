/* sublet — a trace in memory served as a stream (trace_stream_kinds.h):
 * sublet_trace_stream_from_trace's (the trace borrowed), or a format
 * sublet_trace_stream_open reads whole (snapshot pickles and JSON, an RMM
 * log or a Kineto trace on standard input, a Kineto trace the stream
 * cannot follow: the trace owned).  Its events are copied out of the trace;
 * its prelude and extras are the trace's. */
#include <stdlib.h>
#include <string.h>

#include "formats/trace_stream_kinds.h"

static sublet_status mem_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                              size_t *k)
{
    size_t total = sublet_trace_count(s->t);
    *k = total - s->pos < cap ? total - s->pos : cap;
    if (*k)
        memcpy(ev, sublet_trace_events(s->t) + s->pos, *k * sizeof *ev);
    s->pos += *k;
    return SUBLET_OK;
}

static sublet_status mem_rewind(sublet_trace_stream *s, char *err, size_t err_cap)
{
    (void)err;
    (void)err_cap;
    s->pos = s->rows = sublet_trace_prelude_count(s->t);
    s->e.st = SUBLET_OK;
    return SUBLET_OK;
}

static void mem_close(sublet_trace_stream *s)
{
    if (s->owned) {
        sublet_trace_extras_release(s->owned);
        sublet_trace_free(s->owned);
    }
}

static size_t mem_prelude(const sublet_trace_stream *s, const sublet_trace_event **ev)
{
    if (ev)
        *ev = sublet_trace_events(s->t);
    return sublet_trace_prelude_count(s->t);
}

static int mem_bounded(const sublet_trace_stream *s) { return !s->owned; }
static const sublet_trace *mem_trace(const sublet_trace_stream *s) { return s->t; }

static sublet_trace_format mem_format(const sublet_trace_stream *s)
{
    return sublet_trace_source_format(s->t);
}

static int64_t mem_device(const sublet_trace_stream *s) { return sublet_trace_device(s->t); }

static const char *mem_settings(const sublet_trace_stream *s)
{
    return sublet_trace_settings(s->t);
}

static uint64_t mem_device_memory(const sublet_trace_stream *s)
{
    return sublet_trace_device_memory(s->t);
}

static const char *mem_notice(const sublet_trace_stream *s) { return sublet_trace_notice(s->t); }

static uint32_t mem_stack_count(const sublet_trace_stream *s)
{
    return sublet_trace_stack_count(s->t);
}

static size_t mem_stack(const sublet_trace_stream *s, uint32_t id, const sublet_trace_frame **out)
{
    return sublet_trace_stack(s->t, id, out);
}

const sl_stream_methods sl_stream_mem_methods = {
    .name = "mem",
    .next = mem_next,
    .borrow = NULL, /* through _next into the stream's buffer (trace_stream.c) */
    .rewind = mem_rewind,
    .close = mem_close,
    .prelude = mem_prelude,
    .bounded = mem_bounded,
    .trace = mem_trace,
    .format = mem_format,
    .device = mem_device,
    .settings = mem_settings,
    .device_memory = mem_device_memory,
    .notice = mem_notice,
    .stack_count = mem_stack_count,
    .stack = mem_stack,
};

sublet_status sublet_trace_stream_from_trace(const sublet_trace *t, sublet_trace_stream **out)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return SUBLET_ERR_NO_MEMORY;
    (*out)->m = &sl_stream_mem_methods;
    (*out)->t = t;
    (*out)->pos = (*out)->rows = sublet_trace_prelude_count(t);
    return SUBLET_OK;
}
