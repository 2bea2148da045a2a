/* sublet views — a small streaming JSON writer (see json_writer.h).
 *
 * The writer tracks how many values each open object/array holds, so commas
 * and indentation come out right without the caller's help.  Strings are
 * checked as UTF-8: control characters are escaped, and any byte that does
 * not start a well-formed sequence is written as \ufffd. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "views/json_writer.h"

void sl_json_init(sl_json_writer *w, FILE *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
}

static void indent(sl_json_writer *w)
{
    fputc('\n', w->out);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->out);
}

/* Before any value or key: the separator and the line break. */
static void before_value(sl_json_writer *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth > 0) {
        if (w->count[w->depth - 1]++ > 0)
            fputc(',', w->out);
        indent(w);
    }
}

static void open_level(sl_json_writer *w, char c)
{
    before_value(w);
    fputc(c, w->out);
    if (w->depth < SL_JSON_MAX_DEPTH)
        w->count[w->depth] = 0;
    w->depth++;
}

static void close_level(sl_json_writer *w, char c)
{
    if (w->depth <= 0)
        return;
    w->depth--;
    if (w->depth < SL_JSON_MAX_DEPTH && w->count[w->depth] > 0)
        indent(w);
    fputc(c, w->out);
}

void sl_json_object_begin(sl_json_writer *w) { open_level(w, '{'); }
void sl_json_object_end(sl_json_writer *w) { close_level(w, '}'); }
void sl_json_array_begin(sl_json_writer *w) { open_level(w, '['); }
void sl_json_array_end(sl_json_writer *w) { close_level(w, ']'); }

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80)
            return 0;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

void sl_json_write_escaped(FILE *out, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    fputc('"', out);
    while (*s) {
        unsigned c = *s;
        switch (c) {
        case '"': fputs("\\\"", out); s++; continue;
        case '\\': fputs("\\\\", out); s++; continue;
        case '\n': fputs("\\n", out); s++; continue;
        case '\r': fputs("\\r", out); s++; continue;
        case '\t': fputs("\\t", out); s++; continue;
        case '\b': fputs("\\b", out); s++; continue;
        case '\f': fputs("\\f", out); s++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            s++;
            continue;
        }
        /* utf8_len reads at most 3 bytes past s; a NUL stops every check
         * before the next byte is read, so this never passes the end. */
        size_t n = utf8_len(s);
        if (n == 0) {
            fputs("\\ufffd", out);
            s++;
            continue;
        }
        fwrite(s, 1, n, out);
        s += n;
    }
    fputc('"', out);
}

void sl_json_key(sl_json_writer *w, const char *key)
{
    before_value(w);
    sl_json_write_escaped(w->out, key);
    fputs(": ", w->out);
    w->after_key = 1;
}

void sl_json_string(sl_json_writer *w, const char *s)
{
    before_value(w);
    sl_json_write_escaped(w->out, s);
}

void sl_json_u64(sl_json_writer *w, uint64_t v)
{
    before_value(w);
    fprintf(w->out, "%" PRIu64, v);
}

void sl_json_i64(sl_json_writer *w, int64_t v)
{
    before_value(w);
    fprintf(w->out, "%" PRId64, v);
}

void sl_json_double(sl_json_writer *w, double v)
{
    before_value(w);
    if (isfinite(v))
        fprintf(w->out, "%.10g", v);
    else
        fputs("null", w->out);
}

void sl_json_bool(sl_json_writer *w, int v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->out);
}

void sl_json_null(sl_json_writer *w)
{
    before_value(w);
    fputs("null", w->out);
}

void sl_json_raw(sl_json_writer *w, const char *text)
{
    before_value(w);
    fputs(text, w->out);
}

void sl_json_kv_u64(sl_json_writer *w, const char *key, uint64_t v)
{
    sl_json_key(w, key);
    sl_json_u64(w, v);
}

void sl_json_kv_string(sl_json_writer *w, const char *key, const char *s)
{
    sl_json_key(w, key);
    sl_json_string(w, s);
}

void sl_json_kv_double(sl_json_writer *w, const char *key, double v)
{
    sl_json_key(w, key);
    sl_json_double(w, v);
}

void sl_json_kv_bool(sl_json_writer *w, const char *key, int v)
{
    sl_json_key(w, key);
    sl_json_bool(w, v);
}

void sl_json_finish(sl_json_writer *w)
{
    fputc('\n', w->out);
    fflush(w->out);
}
