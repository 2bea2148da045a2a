/* sublet views — the ground every view stands on (view_common.c): the
 * document being written (a FILE* into memory, or a growable text buffer),
 * the checks every entry point starts with, the OOMs a replay reported, the
 * number formats of the texts, the strings the views return.  It calls no
 * other file of the views, so every one of them may call it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "views/view_common.h"

void sublet_string_free(char *s) { free(s); }

void sublet_view_options_init(sublet_view_options *v)
{
    memset(v, 0, sizeof *v);
    v->at = SUBLET_REPLAY_ALL;
    v->device = -1;
}

/* ---- documents --------------------------------------------------------------------------- */

sublet_status sl_doc_open(sl_doc *d)
{
    d->p = NULL;
    d->n = 0;
    d->f = open_memstream(&d->p, &d->n);
    return d->f ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
}

sublet_status sl_view_begin(const void *src, const void *o, const void *v, char **out, char *err,
                            size_t cap)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (err && cap)
        err[0] = '\0';
    return src && o && v ? SUBLET_OK : SUBLET_ERR_INVALID_ARGUMENT;
}

sublet_status sl_view_trace_open(const sublet_trace *t, const void *o, const void *v, char **out,
                                 char *err, size_t cap, sublet_trace_stream **ts)
{
    *ts = NULL;
    sublet_status st = sl_view_begin(t, o, v, out, err, cap);
    if (st != SUBLET_OK)
        return st;
    return sublet_trace_stream_from_trace(t, ts) == SUBLET_OK ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
}

sublet_status sl_doc_close(sl_doc *d, char **out)
{
    int bad = ferror(d->f);
    if (fclose(d->f) != 0)
        bad = 1;
    d->f = NULL;
    if (bad || !d->p) {
        free(d->p);
        *out = NULL;
        return SUBLET_ERR_NO_MEMORY;
    }
    *out = d->p;
    return SUBLET_OK;
}

/* ---- escaped text into the text buffer ---------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (0: invalid). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* A JSON string literal that is also safe inside <script>: <, > and & are
 * \u-escaped; bytes that are not UTF-8 become U+FFFD. */
void sl_tb_json(sl_text *b, const char *s)
{
    sl_text_putn(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sl_text_putn(b, e, 2);
            p++;
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            if (c == '\n')
                sl_text_puts(b, "\\n");
            else
                sl_text_printf(b, "\\u%04x", c);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n)
                sl_text_putn(b, (const char *)p, n);
            else
                sl_text_puts(b, "\\ufffd");
            p += n ? n : 1;
        }
    }
    sl_text_putn(b, "\"", 1);
}

/* HTML text: &, <, >, " escaped; bytes that are not UTF-8 become U+FFFD. */
void sl_tb_html(sl_text *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned c = *p;
        if (c == '&')
            sl_text_puts(b, "&amp;");
        else if (c == '<')
            sl_text_puts(b, "&lt;");
        else if (c == '>')
            sl_text_puts(b, "&gt;");
        else if (c == '"')
            sl_text_puts(b, "&quot;");
        else if (c < 0x80)
            sl_text_putn(b, (const char *)p, 1);
        else {
            size_t n = utf8_len(p);
            sl_text_putn(b, n ? (const char *)p : "\xef\xbf\xbd", n ? n : 3);
            p += n ? n : 1;
            continue;
        }
        p++;
    }
}

/* ---- the OOMs of a replay ------------------------------------------------------------------ */

void sl_oom_list_push(sl_oom_list *l, uint64_t event, uint64_t line, uint64_t size,
                      sublet_stream stream, const char *message)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        sl_oom_rec *n = realloc(l->v, nc * sizeof *n);
        if (!n) {
            l->nomem = 1;
            return;
        }
        l->v = n;
        l->cap = nc;
    }
    char *m = malloc(strlen(message) + 1);
    if (!m) {
        l->nomem = 1;
        return;
    }
    strcpy(m, message);
    l->v[l->n++] = (sl_oom_rec){event, line, size, stream, m};
}

void sl_oom_list_free(sl_oom_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].message);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* ---- number formats and names ------------------------------------------------------------- */

const char *sl_fmt_mib(uint64_t n, char *buf, size_t cap)
{
    if (n % ((uint64_t)1 << 20) == 0)
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(n >> 20));
    else
        snprintf(buf, cap, "%.1f MiB", (double)n / (double)((uint64_t)1 << 20));
    return buf;
}

const char *sl_fmt_us(double us, char *buf, size_t cap)
{
    if (us >= 1e6)
        snprintf(buf, cap, "%.2f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, cap, "%.1f ms", us / 1e3);
    else
        snprintf(buf, cap, "%.0f \xc2\xb5s", us);
    return buf;
}

const char *sublet_prelude_name(int mode)
{
    return mode == SUBLET_PRELUDE_ADOPT      ? "adopt"
           : mode == SUBLET_PRELUDE_ALLOCATE ? "allocate"
                                             : "auto";
}
