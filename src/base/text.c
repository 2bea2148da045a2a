/* sublet — the text buffer.  See text.h. */
#include "base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_text_fixed(sl_text *t, char *buf, size_t cap)
{
    t->buf = buf;
    t->cap = buf ? cap : 0;
    t->len = 0;
    t->grow = t->oom = false;
    if (t->cap)
        buf[0] = '\0';
}

void sl_text_growable(sl_text *t)
{
    t->buf = NULL;
    t->cap = t->len = 0;
    t->grow = true;
    t->oom = false;
}

void sl_text_free(sl_text *t)
{
    if (t->grow)
        free(t->buf);
    t->buf = NULL;
    t->cap = t->len = 0;
}

static bool room_for(sl_text *t, size_t n)
{
    if (t->len + n + 1 <= t->cap)
        return true;
    size_t nc = t->cap ? t->cap : (size_t)1 << 16;
    while (nc < t->len + n + 1)
        nc *= 2;
    char *q = realloc(t->buf, nc);
    if (!q) {
        t->oom = true;
        return false;
    }
    t->buf = q;
    t->cap = nc;
    return true;
}

void sl_text_putn(sl_text *t, const char *s, size_t n)
{
    if (t->grow) {
        if (t->oom || !room_for(t, n))
            return;
        memcpy(t->buf + t->len, s, n);
        t->len += n;
        t->buf[t->len] = '\0';
        return;
    }
    if (t->len + 1 < t->cap) {
        size_t room = t->cap - t->len - 1;
        size_t k = n < room ? n : room;
        memcpy(t->buf + t->len, s, k);
        t->buf[t->len + k] = '\0';
    }
    t->len += n;
}

void sl_text_puts(sl_text *t, const char *s) { sl_text_putn(t, s, strlen(s)); }

void sl_text_repeat(sl_text *t, char c, size_t n)
{
    char chunk[32];
    memset(chunk, c, sizeof chunk);
    while (n > 0) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        sl_text_putn(t, chunk, k);
        n -= k;
    }
}

void sl_text_vprintf(sl_text *t, const char *fmt, va_list ap)
{
    char small[512];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(again);
        return;
    }
    if ((size_t)n < sizeof small) {
        sl_text_putn(t, small, (size_t)n);
        va_end(again);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        if (t->grow)
            t->oom = true;
        else
            t->len += (size_t)n; /* the length stays right; the text is cut */
        va_end(again);
        return;
    }
    vsnprintf(big, (size_t)n + 1, fmt, again);
    va_end(again);
    sl_text_putn(t, big, (size_t)n);
    free(big);
}

void sl_text_printf(sl_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_text_vprintf(t, fmt, ap);
    va_end(ap);
}
