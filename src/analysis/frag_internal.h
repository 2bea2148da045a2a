/* sublet — helpers shared by the fragmentation sources (frag_offline.c,
 * frag_series.c, frag_diagnose.c).  Internal header. */
#ifndef SUBLET_FRAG_INTERNAL_H
#define SUBLET_FRAG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/frag.h"

#if defined(__GNUC__) || defined(__clang__)
#define SL_FB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SL_FB_PRINTF(f, a)
#endif

/* A text builder with snprintf semantics: len is the full logical length;
 * buf always holds a NUL-terminated prefix of the text when cap > 0. */
typedef struct sl_fb {
    char *buf;
    size_t cap, len;
} sl_fb;

void sl_fb_init(sl_fb *b, char *buf, size_t cap);
void sl_fb_puts(sl_fb *b, const char *s);
void sl_fb_printf(sl_fb *b, const char *fmt, ...) SL_FB_PRINTF(2, 3);
/* PyTorch's format_size into a static-duration-free buffer of 32 bytes. */
const char *sl_fb_size(uint64_t n, char tmp[32]);

/* The pool kind of a segment. */
static inline int sl_frag_kind(const sublet_frag_segment *s)
{
    return s->is_small ? SUBLET_POOL_SMALL : SUBLET_POOL_LARGE;
}

/* Append the pinning segments (top n, each with up to max_live live blocks and
 * max_frames frames of their stacks), indented by `indent` spaces. */
void sl_frag_pinning_text(sl_fb *b, const sublet_frag_state *st, size_t n, size_t max_live,
                          size_t max_frames, int indent);

#endif
