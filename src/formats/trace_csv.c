/* sublet — reader of the `.events.csv` trace form
 * (`seq,action,addr,size,stream,time_us`, see shared/traces/README.md), with
 * an optional seventh column `pool` (empty, or FIRST:SECOND for a row in a
 * private pool; docs/pools.md).
 *
 * The reader is strict and total: every byte sequence either parses into a
 * trace or gives SUBLET_ERR_PARSE with "line N: reason" (N 1-based).  It
 * never reads outside the buffer and never trusts a length it did not
 * measure, so it can be fuzzed directly through sublet_trace_parse_csv. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/trace.h"
#include "base/errmsg.h"
#include "formats/trace_readers.h"

#define CSV_HEADER "seq,action,addr,size,stream,time_us"
#define CSV_POOL_HEADER CSV_HEADER ",pool"
#define CSV_COLUMNS 7 /* with the optional pool column */
#define SHOW_MAX 40 /* bytes of an offending field quoted in a message */

enum { COL_SEQ, COL_ACTION, COL_ADDR, COL_SIZE, COL_STREAM, COL_TIME, COL_POOL };
static const char *const k_col_names[CSV_COLUMNS] = {"seq",    "action",  "addr", "size",
                                                      "stream", "time_us", "pool"};

typedef struct field {
    const char *p;
    size_t n;
} field;

/* Quote at most SHOW_MAX bytes of a field, escaping anything unprintable,
 * so a message stays one readable line whatever the input holds. */
static void show(const char *p, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    size_t lim = n < SHOW_MAX ? n : SHOW_MAX;
    for (size_t i = 0; i < lim && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (n > lim && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    if (cap)
        out[o < cap ? o : cap - 1] = '\0';
}

/* Digits at p (before e) as a number of 1..19 digits (no overflow possible):
 * the byte after them, or NULL. */
static inline const char *digits19(const char *p, const char *e, uint64_t *out)
{
    const char *s = p;
    uint64_t v = 0;
    unsigned d;
    while (p < e && (d = (unsigned)(unsigned char)*p - '0') <= 9) {
        v = v * 10 + d;
        p++;
    }
    if (p == s || p - s > 19)
        return NULL;
    *out = v;
    return p;
}

/* Unsigned decimal, digits only.  0 ok, -1 not a number, -2 overflow. */
static int parse_u64(const field *f, uint64_t *out)
{
    if (f->n == 0)
        return -1;
    if (f->n <= 19) /* below 10^19 < 2^64: no overflow to test for */
        return digits19(f->p, f->p + f->n, out) == f->p + f->n ? 0 : -1;
    uint64_t v = 0;
    for (size_t i = 0; i < f->n; i++) {
        unsigned char c = (unsigned char)f->p[i];
        if (c < '0' || c > '9')
            return -1;
        unsigned d = c - '0';
        if (v > (UINT64_MAX - d) / 10)
            return -2;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static sublet_status number(const field *f, int col, uint64_t lineno, uint64_t *out, char *err,
                            size_t cap)
{
    int r = parse_u64(f, out);
    if (r == 0)
        return SUBLET_OK;
    char shown[SHOW_MAX * 4 + 8];
    show(f->p, f->n, shown, sizeof shown);
    if (f->n == 0)
        sl_msg(err, cap, "line %llu: %s is empty", (unsigned long long)lineno, k_col_names[col]);
    else if (r == -2)
        sl_msg(err, cap, "line %llu: %s '%s' overflows 64 bits", (unsigned long long)lineno,
                k_col_names[col], shown);
    else
        sl_msg(err, cap, "line %llu: %s '%s' is not an unsigned decimal integer",
                (unsigned long long)lineno, k_col_names[col], shown);
    return SUBLET_ERR_PARSE;
}

/* Split one line (no line end) at commas.  Returns the number of fields
 * found; at most CSV_COLUMNS are stored. */
static size_t split(const char *p, size_t n, field *f)
{
    size_t count = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == ',') {
            if (count < CSV_COLUMNS)
                f[count] = (field){p + start, i - start};
            count++;
            start = i + 1;
        }
    }
    return count;
}

/* The pool column: empty (the default pools) or FIRST:SECOND, two unsigned
 * decimal integers (sublet_pool_id; docs/pools.md). */
static sublet_status pool_field(const field *f, uint64_t lineno, uint64_t out[2], char *err,
                                size_t cap)
{
    out[0] = out[1] = 0;
    if (f->n == 0)
        return SUBLET_OK;
    const char *colon = memchr(f->p, ':', f->n);
    if (colon) {
        field a = {f->p, (size_t)(colon - f->p)};
        field b = {colon + 1, f->n - a.n - 1};
        if (parse_u64(&a, &out[0]) == 0 && parse_u64(&b, &out[1]) == 0)
            return SUBLET_OK;
    }
    char shown[SHOW_MAX * 4 + 8];
    show(f->p, f->n, shown, sizeof shown);
    sl_msg(err, cap, "line %llu: pool '%s' is not empty or FIRST:SECOND (two unsigned decimal "
           "integers)", (unsigned long long)lineno, shown);
    return SUBLET_ERR_PARSE;
}

/* The common row in one pass: numbers of 1..19 digits, an action by its name, the time
 * present or empty, the pool column (if any) empty.  1 when it is one (*ev filled as
 * parse_row fills it), 0 when the general path must look (it gives the message). */
static int fast_row(const char *p, size_t n, int cols, uint64_t lineno, sublet_trace_event *ev)
{
    const char *e = p + n, *q;
    uint64_t seq, addr, size, stream, t = 0;
    if (!(q = digits19(p, e, &seq)) || q == e || *q != ',')
        return 0;
    const char *act = q + 1;
    const char *c = memchr(act, ',', (size_t)(e - act));
    uint32_t kind;
    if (!c || sublet_trace_kind_parse(act, (size_t)(c - act), &kind) != 0)
        return 0;
    if (!(q = digits19(c + 1, e, &addr)) || q == e || *q != ',' ||
        !(q = digits19(q + 1, e, &size)) || q == e || *q != ',' ||
        !(q = digits19(q + 1, e, &stream)) || q == e || *q != ',')
        return 0;
    q++;
    int has_time = q < e && *q != ',';
    if (has_time && !(q = digits19(q, e, &t)))
        return 0;
    if (cols == 7) {
        if (q == e || *q != ',')
            return 0;
        q++; /* an empty pool only */
    }
    if (q != e)
        return 0;
    (void)seq;
    memset(ev, 0, sizeof *ev);
    ev->line = lineno;
    ev->kind = kind;
    ev->addr = addr;
    ev->size = size;
    ev->stream = stream;
    if (has_time) {
        ev->time_us = t;
        ev->flags = SUBLET_TRACE_HAS_TIME;
    }
    return 1;
}

/* One data row of a CSV of `cols` columns (6, or 7 with the pool) into *ev. */
static sublet_status parse_row(const char *p, size_t n, int cols, uint64_t lineno,
                               sublet_trace_event *ev, char *err, size_t cap)
{
    if (n == 0) {
        sl_msg(err, cap, "line %llu: empty line", (unsigned long long)lineno);
        return SUBLET_ERR_PARSE;
    }
    if (fast_row(p, n, cols, lineno, ev))
        return SUBLET_OK;
    field f[CSV_COLUMNS];
    size_t nf = split(p, n, f);
    if (nf != (size_t)cols) {
        sl_msg(err, cap, "line %llu: expected %d columns (%s), found %zu",
                (unsigned long long)lineno, cols, cols == 7 ? CSV_POOL_HEADER : CSV_HEADER, nf);
        return SUBLET_ERR_PARSE;
    }
    memset(ev, 0, sizeof *ev);
    ev->line = lineno;
    uint64_t seq;
    sublet_status st = number(&f[COL_SEQ], COL_SEQ, lineno, &seq, err, cap);
    if (st != SUBLET_OK)
        return st;
    static const char pre_exp[] = "pre_segment_expandable";
    if (f[COL_ACTION].n == sizeof pre_exp - 1 &&
        memcmp(f[COL_ACTION].p, pre_exp, sizeof pre_exp - 1) == 0) {
        ev->kind = SUBLET_TRACE_PRE_SEGMENT;
        ev->flags |= SUBLET_TRACE_EXPANDABLE;
    } else if (sublet_trace_kind_parse(f[COL_ACTION].p, f[COL_ACTION].n, &ev->kind) != 0) {
        char shown[SHOW_MAX * 4 + 8];
        show(f[COL_ACTION].p, f[COL_ACTION].n, shown, sizeof shown);
        sl_msg(err, cap, "line %llu: unknown action '%s'", (unsigned long long)lineno, shown);
        return SUBLET_ERR_PARSE;
    }
    if ((st = number(&f[COL_ADDR], COL_ADDR, lineno, &ev->addr, err, cap)) != SUBLET_OK ||
        (st = number(&f[COL_SIZE], COL_SIZE, lineno, &ev->size, err, cap)) != SUBLET_OK ||
        (st = number(&f[COL_STREAM], COL_STREAM, lineno, &ev->stream, err, cap)) != SUBLET_OK)
        return st;
    if (f[COL_TIME].n) {
        if ((st = number(&f[COL_TIME], COL_TIME, lineno, &ev->time_us, err, cap)) != SUBLET_OK)
            return st;
        ev->flags |= SUBLET_TRACE_HAS_TIME;
    }
    if (cols == 7)
        return pool_field(&f[COL_POOL], lineno, ev->pool_id, err, cap);
    return SUBLET_OK;
}

sublet_status sl_csv_header(const char *p, size_t n, int *cols, char *err, size_t cap)
{
    if (!p) {
        sl_msg(err, cap, "line 1: empty input; expected the header '" CSV_HEADER "'");
        return SUBLET_ERR_PARSE;
    }
    if (n == strlen(CSV_HEADER) && memcmp(p, CSV_HEADER, n) == 0) {
        *cols = 6;
        return SUBLET_OK;
    }
    if (n == strlen(CSV_POOL_HEADER) && memcmp(p, CSV_POOL_HEADER, n) == 0) {
        *cols = 7;
        return SUBLET_OK;
    }
    char shown[SHOW_MAX * 4 + 8];
    show(p, n, shown, sizeof shown);
    sl_msg(err, cap, "line 1: expected the header '" CSV_HEADER "' (or with ',pool'), found '%s'",
           shown);
    return SUBLET_ERR_PARSE;
}

sublet_status sl_csv_row(const char *p, size_t n, int cols, uint64_t lineno,
                         sublet_trace_event *ev, char *err, size_t cap)
{
    return parse_row(p, n, cols, lineno, ev, err, cap);
}

/* The next line of buf[*pos, len): its bytes without the line end (one
 * trailing CR is dropped with the LF).  Returns 0 at the end of input. */
static int next_line(const char *buf, size_t len, size_t *pos, const char **lp, size_t *ln)
{
    if (*pos >= len)
        return 0;
    const char *start = buf + *pos;
    size_t rest = len - *pos;
    const char *nl = memchr(start, '\n', rest);
    size_t n = nl ? (size_t)(nl - start) : rest;
    *pos += nl ? n + 1 : n;
    if (n && start[n - 1] == '\r')
        n--;
    *lp = start;
    *ln = n;
    return 1;
}

sublet_status sublet_trace_parse_csv(const char *buf, size_t len, sublet_trace **out, char *err,
                                     size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!out || (!buf && len))
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    size_t pos = 0;
    if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
        pos = 3; /* UTF-8 byte-order mark */
    const char *lp;
    size_t ln;
    int cols = 6;
    sublet_status hst = next_line(buf, len, &pos, &lp, &ln)
                            ? sl_csv_header(lp, ln, &cols, err, err_cap)
                            : sl_csv_header(NULL, 0, &cols, err, err_cap);
    if (hst != SUBLET_OK)
        return hst;
    sublet_trace *t = NULL;
    sublet_status st = sublet_trace_create(&t);
    if (st != SUBLET_OK) {
        sl_msg(err, err_cap, "out of memory");
        return st;
    }
    uint64_t lineno = 1;
    while (next_line(buf, len, &pos, &lp, &ln)) {
        lineno++;
        sublet_trace_event ev;
        st = parse_row(lp, ln, cols, lineno, &ev, err, err_cap);
        if (st != SUBLET_OK)
            break;
        if (sublet_trace_kind_is_prelude(ev.kind) &&
            sublet_trace_prelude_count(t) != sublet_trace_count(t)) {
            sl_msg(err, err_cap, "line %llu: %s row after the first recorded event",
                    (unsigned long long)lineno, sublet_trace_kind_name(ev.kind));
            st = SUBLET_ERR_PARSE;
            break;
        }
        st = sublet_trace_append(t, &ev);
        if (st != SUBLET_OK) {
            sl_msg(err, err_cap, "line %llu: out of memory", (unsigned long long)lineno);
            break;
        }
    }
    if (st != SUBLET_OK) {
        sublet_trace_free(t);
        return st;
    }
    *out = t;
    return SUBLET_OK;
}

sublet_status sublet_trace_read_csv(FILE *f, sublet_trace **out, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!f || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        sl_msg(err, err_cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    for (;;) {
        if (n == cap) {
            char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                sl_msg(err, err_cap, "out of memory reading the trace");
                return SUBLET_ERR_NO_MEMORY;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        sl_msg(err, err_cap, "read error: %s", e ? strerror(e) : "unknown");
        return SUBLET_ERR_IO;
    }
    sublet_status st = sublet_trace_parse_csv(buf, n, out, err, err_cap);
    free(buf);
    return st;
}

sublet_status sublet_trace_load_csv(const char *path, sublet_trace **out, char *err,
                                    size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!path || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        sl_msg(err, err_cap, "cannot open '%s': %s", path, strerror(errno));
        return SUBLET_ERR_IO;
    }
    char inner[512];
    sublet_status st = sublet_trace_read_csv(f, out, inner, sizeof inner);
    fclose(f);
    if (st != SUBLET_OK)
        sl_msg(err, err_cap, "%s: %s", path, inner);
    return st;
}
