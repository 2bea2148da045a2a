/* sublet — the events CSV as a stream (trace_stream_kinds.h): its prelude
 * (the pre_segment / pre_alloc rows at the start) read ahead at open, then
 * row by row.
 *
 * The events CSV here and sublet_trace_parse_csv share the header and row
 * parsers (trace_csv.c), and the line splitting follows the same rules: a
 * line ends at LF, one CR before it is dropped, the last line may lack its
 * LF, an empty line is an error.  So a stream gives the same rows, lines and
 * error texts as the whole-file reader. */
#include <stdio.h>
#include <string.h>

#include "formats/trace_stream_kinds.h"

/* The next CSV line: sl_src_line, its error in *e. */
static int csv_line(sublet_trace_stream *s, const char **lp, size_t *ln, serr *e)
{
    int got = sl_src_line(&s->src, lp, ln);
    if (got < 0)
        sl_stream_src_fail(s, e);
    return got;
}

/* The next CSV row into *ev: 1, 0 at the end, -1 on error (in *e). */
static int csv_row(sublet_trace_stream *s, sublet_trace_event *ev, serr *e)
{
    const char *lp;
    size_t ln;
    int got = csv_line(s, &lp, &ln, e);
    if (got <= 0)
        return got;
    s->lineno++;
    char why[400];
    sublet_status st = sl_csv_row(lp, ln, s->csv_cols, s->lineno, ev, why, sizeof why);
    if (st != SUBLET_OK) {
        sl_stream_efail(s, e, st, why);
        return -1;
    }
    return 1;
}

/* Header and prelude, up to the first recorded row (kept in pend). */
static sublet_status csv_start(sublet_trace_stream *s, int thread)
{
    (void)thread;
    sl_src *src = &s->src;
    if (sl_src_fill(src, 3) != 0)
        return sl_stream_src_fail(s, &s->e);
    if (src->end - src->beg >= 3 && memcmp(src->buf + src->beg, "\xef\xbb\xbf", 3) == 0)
        sl_src_take(src, 3); /* UTF-8 byte-order mark */
    const char *lp;
    size_t ln;
    int got = csv_line(s, &lp, &ln, &s->e);
    if (got < 0)
        return s->e.st;
    char why[400];
    sublet_status st = sl_csv_header(got ? lp : NULL, got ? ln : 0, &s->csv_cols, why, sizeof why);
    if (st != SUBLET_OK)
        return sl_stream_fail(s, st, why);
    s->lineno = 1;
    for (;;) {
        sublet_trace_event ev;
        got = csv_row(s, &ev, &s->e);
        if (got < 0)
            return s->e.st;
        if (got == 0)
            return SUBLET_OK;
        if (!sublet_trace_kind_is_prelude(ev.kind)) {
            s->pend = ev;
            s->has_pend = 1;
            return SUBLET_OK;
        }
        if (trace_vec_push(&s->pre, &ev) != SUBLET_OK) {
            snprintf(why, sizeof why, "line %llu: out of memory", (unsigned long long)s->lineno);
            return sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, why);
        }
    }
}

/* The rows after the prelude (a prelude row among them: an error). */
static sublet_status csv_produce(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                                 size_t *k, serr *e)
{
    size_t n = 0;
    while (n < cap) {
        int got = csv_row(s, &ev[n], e);
        if (got < 0) {
            *k = n;
            return e->st;
        }
        if (got == 0)
            break;
        if (sublet_trace_kind_is_prelude(ev[n].kind)) {
            char why[200];
            snprintf(why, sizeof why, "line %llu: %s row after the first recorded event",
                     (unsigned long long)s->lineno, sublet_trace_kind_name(ev[n].kind));
            *k = n;
            return sl_stream_efail(s, e, SUBLET_ERR_PARSE, why);
        }
        n++;
    }
    *k = n;
    return SUBLET_OK;
}

/* The events CSV's table: the file sources' functions, its own start and
 * produce. */
const sl_stream_methods sl_stream_csv_methods = {
    .name = "csv",
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
    .start = csv_start,
    .produce = csv_produce,
};
