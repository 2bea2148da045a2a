/* sublet — traces read as streams (sublet/trace_stream.h): the public entry
 * points, which dispatch through the stream's table of functions, one table
 * a kind (trace_stream_kinds.h: a trace in memory, the binary copy, the
 * events CSV, the event log, the RMM log, the Kineto trace, each in a file
 * of its own; what they share is in trace_stream_util.c); what the trace
 * records, in one pass (_info). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/errmsg.h"
#include "formats/trace_stream_kinds.h"

#define DETECT_BYTES ((size_t)1 << 16) /* what sublet_trace_detect looks at */

/* ---- starting a stream: its source opened, its kind picked ---------------------------------- */

#define DEFAULT_CHUNK ((size_t)1 << 20)

/* Whether to read with a thread: the stream_thread option; by default for a
 * source larger than the first read, as the kind has it (the event log's
 * thread_default). */
static int use_thread(const sublet_trace_stream *s)
{
    if (s->opt.stream_thread == SUBLET_STREAM_THREAD_NEVER)
        return 0;
    if (s->opt.stream_thread == SUBLET_STREAM_THREAD_ALWAYS)
        return 1;
    if (s->src.eof)
        return 0;
    return s->m->thread_default ? s->m->thread_default(s) : 1;
}

void sl_stream_close_source(sublet_trace_stream *s, int keep)
{
    sl_prefetch_stop(s);
    trace_extras_destroy(s->tx);
    s->tx = NULL;
    if (s->src.gz)
        gzclose((gzFile)s->src.gz);
    free(s->src.buf);
    memset(&s->src, 0, sizeof s->src);
    if (s->m->release)
        s->m->release(s);
    trace_vec_free(&s->pre);
    if (keep && s->x) {
        trace_extras **r = realloc(s->retired, (s->nretired + 1) * sizeof *r);
        if (r) {
            s->retired = r;
            s->retired[s->nretired++] = s->x;
            s->x = NULL;
        }
    }
    trace_extras_destroy(s->x);
    s->x = NULL;
    s->has_pend = 0;
}

sublet_status sl_stream_start(sublet_trace_stream *s)
{
    int is_stdin = strcmp(s->path, "-") == 0;
    int fd = is_stdin ? dup(0) : -1;
    s->src.gz = is_stdin ? (fd >= 0 ? gzdopen(fd, "rb") : NULL) : gzopen(s->path, "rb");
    if (!s->src.gz) {
        char why[300];
        snprintf(why, sizeof why, "cannot open: %s", errno ? strerror(errno) : "out of memory");
        if (fd >= 0)
            close(fd);
        return sl_stream_fail(s, SUBLET_ERR_IO, why);
    }
    s->src.chunk = s->opt.read_chunk ? s->opt.read_chunk : DEFAULT_CHUNK;
    size_t zbuf = s->src.chunk < 8192 ? 8192 : s->src.chunk > DEFAULT_CHUNK ? DEFAULT_CHUNK
                                                                             : s->src.chunk;
    gzbuffer((gzFile)s->src.gz, (unsigned)zbuf);
    s->rows = 0;
    s->lineno = 0;
    if (sl_src_fill(&s->src, DETECT_BYTES) != 0)
        return sl_stream_src_fail(s, &s->e);
    sublet_trace_format f = sublet_trace_detect(s->src.buf + s->src.beg, s->src.end - s->src.beg);
    if (f == SUBLET_FORMAT_EVENTS_CSV || f == SUBLET_FORMAT_EVENT_LOG ||
        (f == SUBLET_FORMAT_RMM_CSV && !is_stdin) ||
        (f == SUBLET_FORMAT_KINETO_JSON && !is_stdin && !s->opt.max_tree_bytes)) {
        /* (an RMM log and a Kineto trace are read twice: not standard input; a
         * limit on the parsed tree asks for the whole read, which has one) */
        if (!(s->x = trace_extras_new()))
            return sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        trace_extras_set_format(s->x, f);
        s->m = f == SUBLET_FORMAT_EVENTS_CSV    ? &sl_stream_csv_methods
               : f == SUBLET_FORMAT_RMM_CSV     ? &sl_stream_rmm_methods
               : f == SUBLET_FORMAT_KINETO_JSON ? &sl_stream_kineto_methods
                                                : &sl_stream_log_methods;
        int thread = use_thread(s);
        sublet_status st = s->m->start(s, thread);
        if (st == SUBLET_ERR_UNSUPPORTED && s->m->whole_if_unsupported) {
            /* not a document the stream can follow: read whole, from the start */
            s->m->release(s);
            trace_extras_destroy(s->x);
            s->x = NULL;
            if (sl_src_rewind(&s->src) != 0)
                return sl_stream_src_fail(s, &s->e);
            goto whole;
        }
        if (st != SUBLET_OK)
            return st;
        s->rows = s->pre.n;
        if (thread && s->has_pend && sl_prefetch_start(s) == 0)
            return SUBLET_OK;
        if (thread && s->m->no_thread) /* no thread after all (none to read, or it failed) */
            s->m->no_thread(s);
        return SUBLET_OK;
    }
whole: /* read whole: what is in the buffer, then the rest */
    s->m = &sl_stream_mem_methods;
    while (!s->src.eof)
        if (sl_src_fill(&s->src, s->src.end - s->src.beg + s->src.chunk) != 0)
            return sl_stream_src_fail(s, &s->e);
    char why[512];
    sublet_status st = sublet_trace_parse(s->src.buf + s->src.beg, s->src.end - s->src.beg,
                                          &s->opt, &s->owned, why, sizeof why);
    sl_stream_close_source(s, 0);
    if (st != SUBLET_OK)
        return sl_stream_fail(s, st, why);
    s->t = s->owned;
    s->pos = sublet_trace_prelude_count(s->t);
    s->rows = s->pos;
    return SUBLET_OK;
}

/* A file source's rewind: opened and started again. */
static sublet_status restart(sublet_trace_stream *s, char *err, size_t err_cap)
{
    if (strcmp(s->path, "-") == 0) {
        sl_msg(err, err_cap, "standard input cannot be read again");
        return SUBLET_ERR_UNSUPPORTED;
    }
    sl_stream_close_source(s, 1);
    s->e.st = SUBLET_OK;
    errno = 0;
    sublet_status st = sl_stream_start(s);
    if (st != SUBLET_OK)
        sl_msg(err, err_cap, "%s", s->e.msg);
    return st;
}

/* A stream's table until start knows its source: only close is called. */
static void none_close(sublet_trace_stream *s) { (void)s; }
static const sl_stream_methods none_methods = {.name = "none", .close = none_close};

/* A kind with no borrow of its own: through _next into the stream's buffer. */
static sublet_status borrow_via_next(sublet_trace_stream *s, const sublet_trace_event *keep,
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
    return st;
}

/* ---- the entry points -------------------------------------------------------------------------- */

sublet_status sublet_trace_stream_open(const char *path, const sublet_trace_load_options *opt,
                                       sublet_trace_stream **out, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!path || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (opt && (opt->stream_thread < SUBLET_STREAM_THREAD_AUTO ||
                opt->stream_thread > SUBLET_STREAM_THREAD_NEVER)) {
        sl_msg(err, err_cap, "stream_thread %d: not a sublet_stream_thread", opt->stream_thread);
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    sublet_trace_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        sl_msg(err, err_cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    s->m = &none_methods; /* until the source is known */
    if (opt)
        s->opt = *opt;
    errno = 0;
    sublet_status st = sl_stream_start(s);
    if (st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        sublet_trace_stream_close(s);
        return st;
    }
    *out = s;
    return SUBLET_OK;
}

sublet_trace_format sublet_trace_detect_path(const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return SUBLET_FORMAT_UNKNOWN;
    gzFile g = gzopen(path, "rb");
    if (!g)
        return SUBLET_FORMAT_UNKNOWN;
    uint8_t *head = malloc(DETECT_BYTES);
    int got = head ? gzread(g, head, (unsigned)DETECT_BYTES) : -1;
    gzclose(g);
    sublet_trace_format f =
        got > 0 ? sublet_trace_detect(head, (size_t)got) : SUBLET_FORMAT_UNKNOWN;
    free(head);
    return f;
}

void sublet_trace_stream_close(sublet_trace_stream *s)
{
    if (!s)
        return;
    sl_stream_close_source(s, 0);
    for (size_t i = 0; i < s->nretired; i++)
        trace_extras_destroy(s->retired[i]);
    free(s->retired);
    s->m->close(s);
    free(s->bb);
    free(s->path);
    free(s);
}

sublet_status sublet_trace_stream_rewind(sublet_trace_stream *s, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!s)
        return SUBLET_ERR_INVALID_ARGUMENT;
    return (s->m->rewind ? s->m->rewind : restart)(s, err, err_cap);
}

sublet_status sublet_trace_stream_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                                       size_t *n, char *err, size_t err_cap)
{
    if (n)
        *n = 0;
    if (!s || !n || (!ev && cap))
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (s->e.st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        return s->e.st;
    }
    size_t k = 0;
    sublet_status st = s->m->next(s, ev, cap, &k);
    s->rows += k;
    if (st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        return st;
    }
    *n = k;
    return SUBLET_OK;
}

sublet_status sl_trace_stream_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                                     size_t nkeep, const sublet_trace_event **ev, size_t *n,
                                     char *err, size_t err_cap)
{
    if (n)
        *n = 0;
    if (ev)
        *ev = NULL;
    if (!s || !ev || !n || nkeep > SL_STREAM_KEEP || (nkeep && !keep))
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (s->e.st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        return s->e.st;
    }
    return (s->m->borrow ? s->m->borrow : borrow_via_next)(s, keep, nkeep, ev, n, err, err_cap);
}

/* ---- the accessors ----------------------------------------------------------------------------- */

size_t sublet_trace_stream_prelude(const sublet_trace_stream *s, const sublet_trace_event **ev)
{
    if (ev)
        *ev = NULL;
    return s ? s->m->prelude(s, ev) : 0;
}

uint64_t sublet_trace_stream_rows(const sublet_trace_stream *s) { return s ? s->rows : 0; }

int sublet_trace_stream_bounded(const sublet_trace_stream *s) { return s && s->m->bounded(s); }

const sublet_trace *sublet_trace_stream_trace(const sublet_trace_stream *s)
{
    return s ? s->m->trace(s) : NULL;
}

sublet_trace_format sublet_trace_stream_format(const sublet_trace_stream *s)
{
    return s ? s->m->format(s) : SUBLET_FORMAT_UNKNOWN;
}

int64_t sublet_trace_stream_device(const sublet_trace_stream *s)
{
    return s ? s->m->device(s) : -1;
}

const char *sublet_trace_stream_settings(const sublet_trace_stream *s)
{
    return s ? s->m->settings(s) : NULL;
}

uint64_t sublet_trace_stream_device_memory(const sublet_trace_stream *s)
{
    return s ? s->m->device_memory(s) : 0;
}

const char *sublet_trace_stream_notice(const sublet_trace_stream *s)
{
    return s ? s->m->notice(s) : NULL;
}

uint32_t sublet_trace_stream_stack_count(const sublet_trace_stream *s)
{
    return s ? s->m->stack_count(s) : 0;
}

size_t sublet_trace_stream_stack(const sublet_trace_stream *s, uint32_t id,
                                 const sublet_trace_frame **out)
{
    if (out)
        *out = NULL;
    return s ? s->m->stack(s, id, out) : 0;
}

/* ---- what the trace records, in one pass ------------------------------------------------------- */

/* Add v to the sorted set (*set)[0, *n): 0, or -1 when out of memory. */
static int set_add(uint64_t **set, size_t *n, size_t *cap, uint64_t v)
{
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((*set)[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < *n && (*set)[lo] == v)
        return 0;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        uint64_t *ns = realloc(*set, nc * sizeof *ns);
        if (!ns)
            return -1;
        *set = ns;
        *cap = nc;
    }
    memmove(*set + lo + 1, *set + lo, (*n - lo) * sizeof **set);
    (*set)[lo] = v;
    (*n)++;
    return 0;
}

sublet_status sublet_trace_stream_info(sublet_trace_stream *s, sublet_trace_info *out, char *err,
                                       size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!s)
        return SUBLET_ERR_INVALID_ARGUMENT;
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(s, &pre);
    if (s->rows != npre) {
        sublet_status st = sublet_trace_stream_rewind(s, err, err_cap);
        if (st != SUBLET_OK)
            return st;
        npre = sublet_trace_stream_prelude(s, &pre);
    }
    uint64_t reserved = 0, requested = 0;
    uint64_t *set = NULL;
    size_t nset = 0, capset = 0;
    int nomem = 0;
    size_t i = 0;
    for (; i < npre; i++) {
        sl_trace_info_step(out, &reserved, &requested, &pre[i], i);
        nomem |= set_add(&set, &nset, &capset, pre[i].stream);
    }
    sublet_trace_event buf[1024];
    size_t got;
    sublet_status st;
    while ((st = sublet_trace_stream_next(s, buf, 1024, &got, err, err_cap)) == SUBLET_OK && got)
        for (size_t k = 0; k < got; k++, i++) {
            sl_trace_info_step(out, &reserved, &requested, &buf[k], i);
            nomem |= set_add(&set, &nset, &capset, buf[k].stream);
        }
    free(set);
    out->final_reserved_bytes = reserved;
    out->final_requested_bytes = requested;
    out->streams = nset;
    if (st != SUBLET_OK)
        return st;
    return nomem ? SUBLET_ERR_NO_MEMORY : SUBLET_OK;
}
