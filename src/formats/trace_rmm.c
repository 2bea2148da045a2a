/* sublet — RMM memory-event log (rmm::mr::logging_resource_adaptor) to a
 * trace.
 *
 * The log is CSV: the header `Thread,Time,Action,Pointer,Size,Stream`, then
 * one row per call, e.g.
 *     140386766759744,11:14:32.519226,allocate,0x7fae58000000,1000,0x0
 * Thread: the thread id (not used).  Time: spdlog's "%H:%M:%S.%f" (older
 * releases wrote "%H:%M:%S:%f"; some write seconds since the epoch such as
 * 1634567890.234567); it becomes time_us when it parses (a time of day is
 * counted from the first midnight, and a step back by more than 12 hours is
 * taken as the next day), else the row has no time.  Action: `allocate`,
 * `free` (`deallocate` accepted) or `allocate failure`.  Pointer: hex `0x...`
 * (or decimal; `(nil)` is 0).  Size: decimal bytes.  Stream: hex or decimal.
 *
 * allocate -> alloc; free -> free_requested + free_completed (RMM frees
 * complete at once); allocate failure -> oom (addr 0, size = the request).  A
 * free of a pointer that is not live is an allocation made before logging
 * started: a pre_alloc row (sorted by address).  Blank lines are skipped;
 * anything else malformed gives SUBLET_ERR_PARSE with "line N: reason".
 *
 * One row parser (sl_rmm_row) serves the whole parse and the stream
 * (sl_rmm_stream_*, for trace_stream.c: a first pass over the file for the
 * prelude, then the rows as they are read). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/trace_readers.h"

#define RMM_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define RMM_COLUMNS 6
#define US_PER_DAY 86400000000ull

typedef struct fld {
    const char *p;
    size_t n;
} fld;

static fld trim(const char *p, size_t n)
{
    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    return (fld){p, n};
}

static bool is(fld f, const char *s) { return f.n == strlen(s) && !memcmp(f.p, s, f.n); }

/* Unsigned number: decimal, or hex after 0x/0X.  0 ok, -1 not a number,
 * -2 overflow. */
static int number(fld f, bool allow_hex, uint64_t *out)
{
    unsigned base = 10;
    if (allow_hex && f.n > 2 && f.p[0] == '0' && (f.p[1] == 'x' || f.p[1] == 'X')) {
        base = 16;
        f.p += 2;
        f.n -= 2;
    }
    if (f.n == 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < f.n; i++) {
        unsigned char c = (unsigned char)f.p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        if (v > (UINT64_MAX - d) / base)
            return -2;
        v = v * base + d;
    }
    *out = v;
    return 0;
}

/* Digits at *p (at most max of them); returns how many were read. */
static size_t digits(const char **p, const char *end, size_t max, uint64_t *v)
{
    size_t k = 0;
    *v = 0;
    while (*p < end && k < max && **p >= '0' && **p <= '9') {
        *v = *v * 10 + (uint64_t)(**p - '0');
        (*p)++;
        k++;
    }
    return k;
}

/* Fraction digits as microseconds (extra digits are truncated). */
static bool fraction_us(const char *p, const char *end, uint64_t *us)
{
    size_t k = 0;
    uint64_t v = 0;
    for (; p < end; p++, k++) {
        if (*p < '0' || *p > '9')
            return false;
        if (k < 6)
            v = v * 10 + (uint64_t)(*p - '0');
    }
    if (k == 0)
        return false;
    for (; k < 6; k++)
        v *= 10;
    *us = v;
    return true;
}

/* Time of day "H:M:S[.:]f" -> *tod = 1; epoch seconds "S.f" -> *tod = 0. */
static bool parse_time(fld f, uint64_t *us, bool *tod)
{
    const char *p = f.p, *end = f.p + f.n;
    uint64_t h, m, sec, frac = 0;
    if (digits(&p, end, 2, &h) && p < end && *p == ':') {
        p++;
        if (!digits(&p, end, 2, &m) || p >= end || *p != ':')
            return false;
        p++;
        if (!digits(&p, end, 2, &sec) || h > 23 || m > 59 || sec > 60)
            return false;
        if (p < end) {
            if (*p != '.' && *p != ':')
                return false;
            if (!fraction_us(p + 1, end, &frac))
                return false;
        }
        *us = ((h * 60 + m) * 60 + sec) * 1000000u + frac;
        *tod = true;
        return true;
    }
    p = f.p;
    if (!digits(&p, end, 12, &sec) || (p < end && *p != '.'))
        return false;
    if (p < end && !fraction_us(p + 1, end, &frac))
        return false;
    *us = sec * 1000000u + frac;
    *tod = false;
    return true;
}

static size_t split(const char *p, size_t n, fld *f)
{
    size_t count = 0, start = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || p[i] == ',') {
            if (count < RMM_COLUMNS)
                f[count] = trim(p + start, i - start);
            count++;
            start = i + 1;
        }
    return count;
}

struct sl_rmm {
    u64set live;
    uint64_t day_offset, last_tod;
    bool have_tod;
    /* the stream's */
    uint64_t lineno; /* last line read */
    sl_held held;    /* a free's free_completed, for the next read */
};

sl_rmm *sl_rmm_new(void) { return calloc(1, sizeof(sl_rmm)); }

void sl_rmm_free(sl_rmm *s)
{
    if (!s)
        return;
    u64set_free(&s->live);
    free(s);
}

void sl_rmm_reset(sl_rmm *s)
{
    u64set_free(&s->live);
    memset(s, 0, sizeof *s);
}

bool sl_rmm_blank(const char *p, size_t n) { return trim(p, n).n == 0; }

sublet_status sl_rmm_header(const char *p, size_t n, char *err, size_t cap)
{
    if (!p) {
        sl_msg(err, cap, "line 1: empty input; expected the header '" RMM_HEADER "'");
        return SUBLET_ERR_PARSE;
    }
    fld h = trim(p, n);
    if (is(h, RMM_HEADER))
        return SUBLET_OK;
    char shown[200];
    trace_show(h.p, h.n, shown, sizeof shown);
    sl_msg(err, cap, "line 1: expected the header '" RMM_HEADER "', found '%s'", shown);
    return SUBLET_ERR_PARSE;
}

static sublet_status field_number(fld f, const char *name, bool hex, uint64_t lineno, uint64_t *v,
                                  char *err, size_t cap)
{
    int r = number(f, hex, v);
    if (r == 0)
        return SUBLET_OK;
    char shown[200];
    trace_show(f.p, f.n, shown, sizeof shown);
    sl_msg(err, cap, "line %llu: %s '%s' %s", (unsigned long long)lineno, name, shown,
              r == -2 ? "does not fit 64 bits"
              : hex   ? "is not a hex (0x...) or decimal number"
                      : "is not a decimal number");
    return SUBLET_ERR_PARSE;
}

sublet_status sl_rmm_row(sl_rmm *s, const char *p, size_t n, uint64_t lineno, sl_rmm_rows *out,
                         char *err, size_t cap)
{
    sublet_trace_event *ev2 = out->ev, *pre = &out->pre;
    size_t *nev = &out->nev;
    bool *has_pre = &out->has_pre;
    *nev = 0;
    *has_pre = false;
    memset(ev2, 0, 2 * sizeof *ev2); /* padding included: rows are compared as bytes */
    fld f[RMM_COLUMNS];
    size_t nf = split(p, n, f);
    if (nf != RMM_COLUMNS) {
        sl_msg(err, cap, "line %llu: expected %d columns (" RMM_HEADER "), found %zu",
                  (unsigned long long)lineno, RMM_COLUMNS, nf);
        return SUBLET_ERR_PARSE;
    }
    sublet_trace_event *evp = &ev2[0], ev;
    memset(&ev, 0, sizeof ev);
    ev.line = lineno;
    fld a = f[2];
    bool is_free = is(a, "free") || is(a, "deallocate");
    if (is(a, "allocate")) {
        ev.kind = SUBLET_ACT_ALLOC;
    } else if (is_free) {
        ev.kind = SUBLET_ACT_FREE_REQUESTED;
    } else if (is(a, "allocate failure") || is(a, "allocate_failure")) {
        ev.kind = SUBLET_ACT_OOM;
    } else {
        char shown[200];
        trace_show(a.p, a.n, shown, sizeof shown);
        sl_msg(err, cap,
                  "line %llu: unknown action '%s' (expected allocate, free or allocate failure)",
                  (unsigned long long)lineno, shown);
        return SUBLET_ERR_PARSE;
    }
    sublet_status st;
    if (ev.kind != SUBLET_ACT_OOM && !is(f[3], "(nil)") && !is(f[3], "nullptr") &&
        (st = field_number(f[3], "pointer", true, lineno, &ev.addr, err, cap)))
        return st;
    if ((st = field_number(f[4], "size", false, lineno, &ev.size, err, cap)))
        return st;
    if (!is(f[5], "(nil)") && !is(f[5], "nullptr") &&
        (st = field_number(f[5], "stream", true, lineno, &ev.stream, err, cap)))
        return st;
    uint64_t us;
    bool tod;
    if (parse_time(f[1], &us, &tod)) {
        if (tod) {
            if (s->have_tod && us + US_PER_DAY / 2 < s->last_tod)
                s->day_offset += US_PER_DAY;
            s->have_tod = true;
            s->last_tod = us;
            us += s->day_offset;
        }
        ev.time_us = us;
        ev.flags = SUBLET_TRACE_HAS_TIME;
    }
    bool oom = false;
    if (ev.kind == SUBLET_ACT_ALLOC) {
        oom = u64set_add(&s->live, ev.addr) != 0;
    } else if (is_free && !u64set_remove(&s->live, ev.addr)) {
        memset(pre, 0, sizeof *pre);
        pre->addr = ev.addr;
        pre->size = ev.size;
        pre->stream = ev.stream;
        *has_pre = true;
    }
    if (oom) {
        sl_msg(err, cap, "line %llu: out of memory", (unsigned long long)lineno);
        return SUBLET_ERR_NO_MEMORY;
    }
    memcpy(evp, &ev, sizeof ev);
    *nev = 1;
    if (is_free) {
        memcpy(&ev2[1], &ev, sizeof ev);
        ev2[1].kind = SUBLET_ACT_FREE_COMPLETED;
        *nev = 2;
    }
    return SUBLET_OK;
}

/* One data row of the whole parse: its events and prelude row pushed. */
static sublet_status row(sl_rmm *s, trace_vec *events, trace_vec *pre_alloc, const char *p,
                         size_t n, uint64_t lineno, char *err, size_t cap)
{
    sl_rmm_rows r;
    sublet_status st = sl_rmm_row(s, p, n, lineno, &r, err, cap);
    if (st != SUBLET_OK)
        return st;
    bool oom = r.has_pre && trace_vec_push(pre_alloc, &r.pre) != SUBLET_OK;
    for (size_t i = 0; i < r.nev && !oom; i++)
        oom = trace_vec_push(events, &r.ev[i]) != SUBLET_OK;
    if (oom) {
        sl_msg(err, cap, "line %llu: out of memory", (unsigned long long)lineno);
        return SUBLET_ERR_NO_MEMORY;
    }
    return SUBLET_OK;
}

sublet_status sublet_trace_parse_rmm(const char *buf, size_t len, sublet_trace **out, char *err,
                                     size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!out || (!buf && len))
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    size_t pos = len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3) ? 3 : 0;
    sl_rmm s;
    memset(&s, 0, sizeof s);
    trace_vec events = {0}, pre_seg = {0}, pre_alloc = {0};
    sublet_status st = SUBLET_OK;
    uint64_t lineno = 0;
    while (st == SUBLET_OK && pos < len) {
        const char *lp = buf + pos;
        const char *nl = memchr(lp, '\n', len - pos);
        size_t ln = nl ? (size_t)(nl - lp) : len - pos;
        pos += nl ? ln + 1 : ln;
        if (ln && lp[ln - 1] == '\r')
            ln--;
        lineno++;
        if (lineno == 1)
            st = sl_rmm_header(lp, ln, err, cap);
        else if (!sl_rmm_blank(lp, ln))
            st = row(&s, &events, &pre_alloc, lp, ln, lineno, err, cap);
    }
    if (st == SUBLET_OK && lineno == 0)
        st = sl_rmm_header(NULL, 0, err, cap);
    if (st == SUBLET_OK && (st = trace_assemble(&pre_seg, &pre_alloc, &events, out)))
        sl_msg(err, cap, "out of memory");
    trace_vec_free(&events);
    trace_vec_free(&pre_seg);
    trace_vec_free(&pre_alloc);
    u64set_free(&s.live);
    if (st == SUBLET_OK) {
        trace_extras *x = trace_extras_new();
        if (x)
            trace_extras_set_format(x, SUBLET_FORMAT_RMM_CSV);
        st = x ? trace_extras_attach(*out, x) : SUBLET_ERR_NO_MEMORY;
        if (st) {
            sublet_trace_free(*out);
            *out = NULL;
            sl_msg(err, cap, "out of memory");
        }
    }
    return st;
}

/* ---- the stream ------------------------------------------------------------------------------ */

/* A read error of the source, or no memory, as the stream's text. */
static sublet_status src_error(const sl_src *src, char *err, size_t cap)
{
    sl_msg(err, cap, "%s", src->ioerr[0] ? src->ioerr : "out of memory");
    return src->ioerr[0] ? SUBLET_ERR_IO : SUBLET_ERR_NO_MEMORY;
}

/* The byte-order mark and the header, from the file's start. */
static sublet_status stream_header(sl_rmm *s, sl_src *src, char *err, size_t cap)
{
    if (sl_src_fill(src, 3) != 0)
        return src_error(src, err, cap);
    if (src->end - src->beg >= 3 && memcmp(src->buf + src->beg, "\xef\xbb\xbf", 3) == 0)
        sl_src_take(src, 3);
    const char *lp;
    size_t ln;
    int got = sl_src_line(src, &lp, &ln);
    if (got < 0)
        return src_error(src, err, cap);
    s->lineno = 1;
    return sl_rmm_header(got ? lp : NULL, got ? ln : 0, err, cap);
}

sublet_status sl_rmm_stream_open(sl_rmm *s, sl_src *src, trace_vec *pre, char *err, size_t cap)
{
    sublet_status st = stream_header(s, src, err, cap);
    if (st != SUBLET_OK)
        return st;
    const char *lp;
    size_t ln;
    int got;
    while ((got = sl_src_line(src, &lp, &ln)) > 0) {
        s->lineno++;
        if (sl_rmm_blank(lp, ln))
            continue;
        sl_rmm_rows r;
        if (sl_rmm_row(s, lp, ln, s->lineno, &r, err, cap) != SUBLET_OK)
            break; /* the second pass meets it again */
        if (r.has_pre && trace_vec_push(pre, &r.pre) != SUBLET_OK) {
            sl_msg(err, cap, "line %llu: out of memory", (unsigned long long)s->lineno);
            return SUBLET_ERR_NO_MEMORY;
        }
    }
    if (got < 0)
        return src_error(src, err, cap);
    trace_sort_pre(pre, SUBLET_TRACE_PRE_ALLOC);
    sl_rmm_reset(s);
    if (sl_src_rewind(src) != 0)
        return src_error(src, err, cap);
    return stream_header(s, src, err, cap);
}

sublet_status sl_rmm_stream_read(sl_rmm *s, sl_src *src, sublet_trace_event *ev, size_t cap,
                                 size_t *n, char *err, size_t ecap)
{
    size_t k = sl_held_out(&s->held, ev, cap);
    sublet_status st = SUBLET_OK;
    while (k < cap) {
        const char *lp;
        size_t ln;
        int got = sl_src_line(src, &lp, &ln);
        if (got <= 0) {
            if (got < 0)
                st = src_error(src, err, ecap);
            break;
        }
        s->lineno++;
        if (sl_rmm_blank(lp, ln))
            continue;
        sl_rmm_rows r;
        if ((st = sl_rmm_row(s, lp, ln, s->lineno, &r, err, ecap)))
            break;
        sl_rows_out(&s->held, r.ev, r.nev, ev, cap, &k);
    }
    *n = k;
    return st;
}
