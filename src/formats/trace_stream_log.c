/* sublet — sublet's event log as a stream (trace_stream_kinds.h): block by
 * block (a block's payload is at most 64 MiB), records decoded as they are
 * handed out (trace_log.c).  With the reader thread, the log applies its
 * STACK and INFO records to extras of the thread's own (tx) and keeps them
 * as a journal, which the caller applies to x before the events after them
 * (trace_stream_thread.c). */
#include <stdio.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/trace_stream_kinds.h"

/* The header and the first event (the records before it, settings and device
 * memory, applied).  With `journal`, the log applies its records to a private
 * tx (the reader thread's), and what it applied is applied to x here. */
static sublet_status log_first(sublet_trace_stream *s, int journal)
{
    char why[400];
    if (journal && !(s->tx = trace_extras_new()))
        return sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    trace_extras *lx = journal ? s->tx : s->x;
    sublet_status st = sl_log_stream_start(&s->src, lx, &s->log, why, sizeof why);
    if (st != SUBLET_OK)
        return sl_stream_fail(s, st, why);
    trace_extras_set_device(s->x, trace_extras_device(lx));
    sl_log_stream_set_extras(s->log, lx, journal);
    int got;
    st = sl_log_stream_next(s->log, &s->src, &s->pend, &got, why, sizeof why);
    if (st != SUBLET_OK)
        return sl_stream_fail(s, st, why);
    s->has_pend = got;
    if (journal) {
        size_t n;
        const uint8_t *j = sl_log_stream_journal(s->log, &n);
        if ((st = sl_stream_apply_journal(s, j, n)) != SUBLET_OK)
            return st;
        sl_log_stream_journal_clear(s->log);
        if (trace_extras_notice(s->tx) && trace_extras_set_notice(s->x, trace_extras_notice(s->tx)))
            return sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    return SUBLET_OK;
}

/* No thread after all: the log applies its records to x (the same ids). */
static void log_no_thread(sublet_trace_stream *s)
{
    sl_log_stream_set_extras(s->log, s->x, 0);
    trace_extras_destroy(s->tx);
    s->tx = NULL;
}

/* The records after the first: sl_log_stream_read. */
static sublet_status log_produce(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                                 size_t *k, serr *e)
{
    *k = 0;
    char why[400];
    sublet_status st = sl_log_stream_read(s->log, &s->src, ev, cap, k, why, sizeof why);
    return st == SUBLET_OK ? st : sl_stream_efail(s, e, st, why);
}

static void log_release(sublet_trace_stream *s)
{
    sl_log_stream_free(s->log);
    s->log = NULL;
}

/* A plain (not gzip'd) log on a machine with one CPU online: no thread, its
 * decoding there costs less than handing its events across; with a second
 * CPU the log's decoding (a quarter of its replay) runs beside the replay
 * (docs/replay.md). */
static int log_thread_default(const sublet_trace_stream *s)
{
    if (gzdirect((gzFile)s->src.gz))
        return sysconf(_SC_NPROCESSORS_ONLN) > 1;
    return 1;
}

static const uint8_t *log_journal(sublet_trace_stream *s, size_t *len)
{
    return sl_log_stream_journal(s->log, len);
}

static void log_journal_clear(sublet_trace_stream *s) { sl_log_stream_journal_clear(s->log); }

/* The event log's table: the file sources' functions, its own reader. */
const sl_stream_methods sl_stream_log_methods = {
    .name = "log",
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
    .start = log_first,
    .produce = log_produce,
    .no_thread = log_no_thread,
    .release = log_release,
    .thread_default = log_thread_default,
    .journal = log_journal,
    .journal_clear = log_journal_clear,
};
