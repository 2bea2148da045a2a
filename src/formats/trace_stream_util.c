/* sublet — what the stream kinds share (trace_stream_kinds.h): their errors,
 * named by the stream's file, and the buffer rows are lent from when a kind
 * has no array of its own.  Below every kind and the entry points
 * (trace_stream.c): it calls none of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "formats/trace_stream_kinds.h"

const char *sl_stream_shown(const sublet_trace_stream *s)
{
    return !s->path ? "trace" : strcmp(s->path, "-") == 0 ? "stdin" : s->path;
}

sublet_status sl_stream_efail(const sublet_trace_stream *s, serr *e, sublet_status st,
                              const char *why)
{
    e->st = st;
    snprintf(e->msg, sizeof e->msg, "%s: %s", sl_stream_shown(s), why);
    return st;
}

sublet_status sl_stream_fail(sublet_trace_stream *s, sublet_status st, const char *why)
{
    return sl_stream_efail(s, &s->e, st, why);
}

sublet_status sl_stream_src_fail(const sublet_trace_stream *s, serr *e)
{
    return sl_stream_efail(s, e, s->src.ioerr[0] ? SUBLET_ERR_IO : SUBLET_ERR_NO_MEMORY,
                           s->src.ioerr[0] ? s->src.ioerr : "out of memory");
}

sublet_status sl_stream_borrow_buffer(sublet_trace_stream *s, const sublet_trace_event *keep,
                                      size_t nkeep, sublet_trace_event **dst, char *err,
                                      size_t err_cap)
{
    if (!s->bb && !(s->bb = malloc((SL_STREAM_KEEP + SL_BORROW_ROWS) * sizeof *s->bb))) {
        sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        sl_msg(err, err_cap, "%s", s->e.msg);
        return s->e.st;
    }
    *dst = s->bb + SL_STREAM_KEEP;
    if (nkeep)
        memmove(*dst - nkeep, keep, nkeep * sizeof *keep);
    return SUBLET_OK;
}

/* Apply the log's journal (the STACK and INFO records read since the last
 * time, sl_log_stream_set_extras) to the extras shown. */
sublet_status sl_stream_apply_journal(sublet_trace_stream *s, const uint8_t *p, size_t n)
{
    char why[300];
    sublet_status st = n ? sl_log_journal_apply(s->x, p, n, why, sizeof why) : SUBLET_OK;
    return st == SUBLET_OK ? st : sl_stream_fail(s, st, why);
}

sublet_status sl_stream_first_event(sublet_trace_stream *s)
{
    size_t k;
    if (s->m->produce(s, &s->pend, 1, &k, &s->e) != SUBLET_OK)
        return s->e.st;
    s->has_pend = k == 1;
    return SUBLET_OK;
}
