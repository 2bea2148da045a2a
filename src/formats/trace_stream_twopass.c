/* sublet — the RMM log and the Kineto trace as streams (trace_stream_kinds.h):
 * each read twice (a file, not standard input).
 *   - the RMM log: a free of an address never allocated before it is an
 *     allocation made before the log began, a prelude row, so open reads the
 *     file once for the prelude (the live pointers and the prelude in memory,
 *     not the rows), then reads it again from the start, the rows as they
 *     are handed out (trace_rmm.c);
 *   - the Kineto trace: one element of traceEvents at a time, its memory
 *     events put in time order by a window of 65,536 events a device; one
 *     whose events are further out of order, or that the first pass cannot
 *     follow, is read whole (trace_kineto.c). */
#include "formats/trace_stream_kinds.h"

/* An RMM log: its prelude by a first pass (sl_rmm_stream_open), then its
 * first event. */
static sublet_status rmm_start(sublet_trace_stream *s, int thread)
{
    (void)thread;
    char why[400];
    if (!(s->rmm = sl_rmm_new()))
        return sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    sublet_status st = sl_rmm_stream_open(s->rmm, &s->src, &s->pre, why, sizeof why);
    return st == SUBLET_OK ? sl_stream_first_event(s) : sl_stream_fail(s, st, why);
}

/* A Kineto trace: its first pass (sl_kineto_stream_open; SUBLET_ERR_UNSUPPORTED:
 * the caller reads it whole), then its first event. */
static sublet_status kineto_start(sublet_trace_stream *s, int thread)
{
    (void)thread;
    char why[400];
    int64_t dev;
    uint64_t mem;
    sublet_status st =
        sl_kineto_stream_open(&s->src, &s->opt, &s->pre, &dev, &mem, &s->kin, why, sizeof why);
    if (st == SUBLET_ERR_UNSUPPORTED)
        return st;
    if (st != SUBLET_OK)
        return sl_stream_fail(s, st, why);
    trace_extras_set_device(s->x, dev);
    trace_extras_set_memory(s->x, mem);
    return sl_stream_first_event(s);
}

/* The rows of the second pass. */
static sublet_status rmm_produce(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                                 size_t *k, serr *e)
{
    *k = 0;
    char why[400];
    sublet_status st = sl_rmm_stream_read(s->rmm, &s->src, ev, cap, k, why, sizeof why);
    return st == SUBLET_OK ? st : sl_stream_efail(s, e, st, why);
}

/* The memory events of the second pass, in time order. */
static sublet_status kineto_produce(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                                    size_t *k, serr *e)
{
    *k = 0;
    char why[400];
    sublet_status st = sl_kineto_stream_read(s->kin, &s->src, ev, cap, k, why, sizeof why);
    return st == SUBLET_OK ? st : sl_stream_efail(s, e, st, why);
}

static void rmm_release(sublet_trace_stream *s)
{
    sl_rmm_free(s->rmm);
    s->rmm = NULL;
}

static void kineto_release(sublet_trace_stream *s)
{
    sl_kineto_free(s->kin);
    s->kin = NULL;
}

/* The RMM log's table: the file sources' functions, its own reader. */
const sl_stream_methods sl_stream_rmm_methods = {
    .name = "rmm",
    .next = sl_source_next,
    .borrow = sl_source_borrow,
    .rewind = NULL, /* the source opened and started again (trace_stream.c) */
    .close = sl_source_close,
    .prelude = sl_source_prelude,
    .bounded = sl_source_bounded,
    .trace = sl_source_trace,
    .format = sl_source_format,
    .device = sl_source_device,
    .settings = sl_source_settings,
    .device_memory = sl_source_device_memory,
    .notice = sl_source_notice,
    .stack_count = sl_source_stack_count,
    .stack = sl_source_stack,
    .start = rmm_start,
    .produce = rmm_produce,
    .release = rmm_release,
};

/* The Kineto trace's table: as the RMM log's; a trace its first pass
 * cannot follow is read whole. */
const sl_stream_methods sl_stream_kineto_methods = {
    .name = "kineto",
    .next = sl_source_next,
    .borrow = sl_source_borrow,
    .rewind = NULL, /* the source opened and started again (trace_stream.c) */
    .close = sl_source_close,
    .prelude = sl_source_prelude,
    .bounded = sl_source_bounded,
    .trace = sl_source_trace,
    .format = sl_source_format,
    .device = sl_source_device,
    .settings = sl_source_settings,
    .device_memory = sl_source_device_memory,
    .notice = sl_source_notice,
    .stack_count = sl_source_stack_count,
    .stack = sl_source_stack,
    .start = kineto_start,
    .whole_if_unsupported = 1,
    .produce = kineto_produce,
    .release = kineto_release,
};
