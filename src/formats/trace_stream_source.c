/* sublet — what the file sources of a stream share (trace_stream_kinds.h): a
 * buffered source over a file (plain or gzip'd, through zlib's gzread), its
 * format detected at open, the prelude and the first recorded row read
 * there by the kind's start (the start itself, which picks the kind, is in
 * trace_stream.c); then rows handed out from the kind's produce, or through
 * the reader thread (trace_stream_thread.c); the extras (x) the accessors
 * read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/errmsg.h"
#include "formats/trace_stream_kinds.h"


/* ---- the file sources' table entries ---------------------------------------------------------- */

sublet_status sl_source_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                             size_t *k)
{
    size_t n = 0;
    if (s->has_pend && cap) {
        ev[n++] = s->pend;
        s->has_pend = 0;
    }
    size_t m = 0;
    if (s->pf)
        sl_prefetch_next(s, ev + n, cap - n, &m);
    else if (n < cap)
        s->m->produce(s, ev + n, cap - n, &m, &s->e);
    *k = n + m;
    return s->e.st;
}

sublet_status sl_source_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                               size_t nkeep, const sublet_trace_event **ev, size_t *n, char *err,
                               size_t err_cap)
{
    if (s->pf && !s->has_pend) {
        sublet_status st = sl_prefetch_borrow(s, keep, nkeep, ev, n);
        s->rows += *n;
        if (st != SUBLET_OK) {
            *ev = NULL;
            *n = 0;
            sl_msg(err, err_cap, "%s", s->e.msg);
        }
        return st;
    }
    /* without the thread: into the stream's buffer, after the kept rows */
    sublet_trace_event *dst;
    sublet_status st = sl_stream_borrow_buffer(s, keep, nkeep, &dst, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    if (s->has_pend) { /* the first recorded row, alone (the thread's chunks follow) */
        dst[0] = s->pend;
        s->has_pend = 0;
        *n = 1;
        s->rows++;
    } else {
        /* as the thread: the rows before an error, then (next borrow) the error */
        s->m->produce(s, dst, SL_BORROW_ROWS, n, &s->e);
        s->rows += *n;
        if (!*n)
            st = s->e.st;
    }
    if (st == SUBLET_OK)
        *ev = dst;
    else
        sl_msg(err, err_cap, "%s", s->e.msg);
    return st;
}

/* The source itself is the stream's, freed by sublet_trace_stream_close. */
void sl_source_close(sublet_trace_stream *s) { (void)s; }

size_t sl_source_prelude(const sublet_trace_stream *s, const sublet_trace_event **ev)
{
    if (ev)
        *ev = s->pre.v;
    return s->pre.n;
}

int sl_source_bounded(const sublet_trace_stream *s)
{
    (void)s;
    return 1;
}

const sublet_trace *sl_source_trace(const sublet_trace_stream *s)
{
    (void)s;
    return NULL;
}

sublet_trace_format sl_source_format(const sublet_trace_stream *s)
{
    return trace_extras_format(s->x);
}

int64_t sl_source_device(const sublet_trace_stream *s) { return trace_extras_device(s->x); }

const char *sl_source_settings(const sublet_trace_stream *s)
{
    return trace_extras_settings(s->x);
}

uint64_t sl_source_device_memory(const sublet_trace_stream *s)
{
    return trace_extras_memory(s->x);
}

const char *sl_source_notice(const sublet_trace_stream *s) { return trace_extras_notice(s->x); }

uint32_t sl_source_stack_count(const sublet_trace_stream *s)
{
    return trace_extras_stack_count(s->x);
}

size_t sl_source_stack(const sublet_trace_stream *s, uint32_t id, const sublet_trace_frame **out)
{
    const sublet_trace_frame *f = NULL;
    size_t n = trace_extras_stack(s->x, id, &f);
    if (out)
        *out = f;
    return n;
}
