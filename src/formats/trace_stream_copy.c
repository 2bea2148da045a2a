/* sublet — the binary copy of a stream (sublet_trace_stream_copy,
 * trace_stream_kinds.h): the recorded rows as sublet_trace_event records of
 * 64 bytes in an unnamed temporary file, handed out as a stream of its own:
 * rewinding it is a position, reading it a read of fixed records, no parsing.
 * Its prelude and extras are those of the stream copied (a copy's copy: the
 * first stream's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "formats/trace_stream_kinds.h"

/* Positional reads (pread: the file's offset is never moved), so that the
 * readers of one copy (sublet_trace_stream_reader), each at its own pos,
 * read it from several threads at once. */
static sublet_status copy_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                               size_t *k)
{
    int fd = fileno(s->raw);
    size_t want = cap * sizeof *ev, got = 0;
    while (got < want) {
        ssize_t r = pread(fd, (char *)ev + got, want - got,
                          (off_t)(s->pos * sizeof *ev + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *k = 0; /* not counted */
            return sl_stream_fail(s, SUBLET_ERR_IO, "copy: read error");
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    *k = got / sizeof *ev;
    s->pos += *k;
    return SUBLET_OK;
}

/* Into the stream's buffer, through _next. */
static sublet_status copy_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                                 size_t nkeep, const sublet_trace_event **ev, size_t *n,
                                 char *err, size_t err_cap)
{
    sublet_trace_event *dst;
    sublet_status st = sl_stream_borrow_buffer(s, keep, nkeep, &dst, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    st = sublet_trace_stream_next(s, dst, SL_BORROW_ROWS, n, err, err_cap);
    if (st == SUBLET_OK)
        *ev = dst;
    else
        sl_msg(err, err_cap, "%s", s->e.msg);
    return st;
}

/* Back to the first recorded row: a position, nothing read. */
static sublet_status copy_rewind(sublet_trace_stream *s, char *err, size_t err_cap)
{
    (void)err;
    (void)err_cap;
    s->rows = sublet_trace_stream_prelude(s, NULL);
    s->e.st = SUBLET_OK;
    s->pos = 0;
    return SUBLET_OK;
}

static void copy_close(sublet_trace_stream *s)
{
    if (s->raw && !s->raw_shared)
        fclose(s->raw);
}

/* ---- the prelude and the extras: the origin's ------------------------------------------------- */

static size_t copy_prelude(const sublet_trace_stream *s, const sublet_trace_event **ev)
{
    return sublet_trace_stream_prelude(s->origin, ev);
}

static int copy_bounded(const sublet_trace_stream *s)
{
    (void)s;
    return 1;
}

static const sublet_trace *copy_trace(const sublet_trace_stream *s)
{
    (void)s;
    return NULL;
}

static sublet_trace_format copy_format(const sublet_trace_stream *s)
{
    return sublet_trace_stream_format(s->origin);
}

static int64_t copy_device(const sublet_trace_stream *s)
{
    return sublet_trace_stream_device(s->origin);
}

static const char *copy_settings(const sublet_trace_stream *s)
{
    return sublet_trace_stream_settings(s->origin);
}

static uint64_t copy_device_memory(const sublet_trace_stream *s)
{
    return sublet_trace_stream_device_memory(s->origin);
}

static const char *copy_notice(const sublet_trace_stream *s)
{
    return sublet_trace_stream_notice(s->origin);
}

static uint32_t copy_stack_count(const sublet_trace_stream *s)
{
    return sublet_trace_stream_stack_count(s->origin);
}

static size_t copy_stack(const sublet_trace_stream *s, uint32_t id,
                         const sublet_trace_frame **out)
{
    return sublet_trace_stream_stack(s->origin, id, out);
}

const sl_stream_methods sl_stream_copy_methods = {
    .name = "copy",
    .next = copy_next,
    .borrow = copy_borrow,
    .rewind = copy_rewind,
    .close = copy_close,
    .prelude = copy_prelude,
    .bounded = copy_bounded,
    .trace = copy_trace,
    .format = copy_format,
    .device = copy_device,
    .settings = copy_settings,
    .device_memory = copy_device_memory,
    .notice = copy_notice,
    .stack_count = copy_stack_count,
    .stack = copy_stack,
};

/* ---- making the copy ------------------------------------------------------------------------------ */

sublet_status sublet_trace_stream_copy(sublet_trace_stream *s, sublet_trace_stream **out,
                                       char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!s || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(s, &pre);
    if (s->rows != npre) {
        sublet_status st = sublet_trace_stream_rewind(s, err, err_cap);
        if (st != SUBLET_OK)
            return st;
        npre = sublet_trace_stream_prelude(s, &pre);
    }
    sublet_trace_stream *c = calloc(1, sizeof *c);
    if (!c) {
        sl_msg(err, err_cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    c->m = &sl_stream_copy_methods;
    c->origin = s;
    c->rows = npre;
    errno = 0;
    c->raw = tmpfile();
    if (!c->raw) {
        sl_msg(err, err_cap, "%s: cannot make a temporary copy: %s", sl_stream_shown(s),
               errno ? strerror(errno) : "out of memory");
        free(c);
        return SUBLET_ERR_IO;
    }
    sublet_trace_event buf[1024];
    size_t got;
    sublet_status st;
    while ((st = sublet_trace_stream_next(s, buf, 1024, &got, err, err_cap)) == SUBLET_OK && got)
        if (fwrite(buf, sizeof *buf, got, c->raw) != got) {
            sl_msg(err, err_cap, "%s: temporary copy: write failed: %s", sl_stream_shown(s),
                   strerror(errno));
            st = SUBLET_ERR_IO;
            break;
        }
    if (st == SUBLET_OK && fflush(c->raw) != 0) {
        sl_msg(err, err_cap, "%s: temporary copy: write failed: %s", sl_stream_shown(s),
               strerror(errno));
        st = SUBLET_ERR_IO;
    }
    if (st != SUBLET_OK) {
        sublet_trace_stream_close(c);
        return st;
    }
    *out = c;
    return SUBLET_OK;
}

/* ---- readers ----------------------------------------------------------------------------------- */

int sublet_trace_stream_rereadable(const sublet_trace_stream *s)
{
    return s && (s->m == &sl_stream_mem_methods || s->m == &sl_stream_copy_methods);
}

sublet_status sublet_trace_stream_reader(sublet_trace_stream *s, sublet_trace_stream **out)
{
    if (!s || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!sublet_trace_stream_rereadable(s))
        return SUBLET_ERR_UNSUPPORTED;
    if (s->m == &sl_stream_mem_methods)
        return sublet_trace_stream_from_trace(s->t, out);
    sublet_trace_stream *c = calloc(1, sizeof *c);
    if (!c)
        return SUBLET_ERR_NO_MEMORY;
    c->m = &sl_stream_copy_methods;
    c->origin = s->origin;
    c->raw = s->raw;
    c->raw_shared = 1;
    c->rows = sublet_trace_stream_prelude(s, NULL);
    *out = c;
    return SUBLET_OK;
}
