/* sublet — the one text buffer of every layer (text.c).
 *
 * One struct, two ways to use it:
 *   - into a caller's buffer (sl_text_fixed): snprintf's semantics.  len is
 *     the full length of everything written, also past the end; buf always
 *     holds a NUL-terminated prefix of it when cap > 0; nothing is
 *     allocated, so the caller compares len with cap to see a cut;
 *   - growable (sl_text_growable): buf is malloc'd (64 KiB, then doubling)
 *     and always holds all of the text, NUL-terminated; when growing fails
 *     oom is set and later output is dropped.  sl_text_free releases it.
 * Used by the engine's texts (stats_format.c, frag*.c), the formats and the
 * analyses and the views (the report page, its escaped JSON and HTML). */
#ifndef SUBLET_BASE_TEXT_H
#define SUBLET_BASE_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__GNUC__)
#define SL_TEXT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SL_TEXT_PRINTF(f, a)
#endif

typedef struct sl_text {
    char *buf;
    size_t cap, len;
    bool grow; /* buf is the text's own, malloc'd */
    bool oom;  /* growable: growing failed, output since dropped */
} sl_text;

void sl_text_fixed(sl_text *t, char *buf, size_t cap);
void sl_text_growable(sl_text *t);
void sl_text_free(sl_text *t);

void sl_text_putn(sl_text *t, const char *s, size_t n);
void sl_text_puts(sl_text *t, const char *s);
/* n copies of c */
void sl_text_repeat(sl_text *t, char c, size_t n);
void sl_text_printf(sl_text *t, const char *fmt, ...) SL_TEXT_PRINTF(2, 3);
void sl_text_vprintf(sl_text *t, const char *fmt, va_list ap) SL_TEXT_PRINTF(2, 0);

#endif
