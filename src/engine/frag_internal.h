/* sublet — helpers shared by the fragmentation code: engine/frag_state.c
 * (states, metrics, texts), engine/frag.c (the live metrics),
 * engine/frag_oom.c (an OOM's diagnosis) and analysis/frag_series.c,
 * frag_diagnose.c (a snapshot's state, the series, the diagnosis of a
 * trace).  Internal header. */
#ifndef SUBLET_FRAG_INTERNAL_H
#define SUBLET_FRAG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/text.h" /* sl_text: the texts are built in one */
#include "sublet/frag_state.h"
#include "sublet/history.h" /* sublet_frame */

/* The metrics of o derived from its counted fields (reserved, allocated,
 * requested, active, free bytes, largest free block) and squares, the sum of
 * the free blocks' squared sizes: sublet_frag_read and sublet_frag_compute. */
void sl_frag_derive(sublet_frag_stats *o, double squares);

/* PyTorch's format_size into a static-duration-free buffer of 32 bytes. */
const char *sl_fb_size(uint64_t n, char tmp[32]);

/* Building a state from segment views (sublet_segments_walk, a snapshot's
 * segments): st is filled in the order the segments come; oom is set, and the
 * rest left out, when memory runs out. */
typedef struct sl_frag_builder {
    sublet_frag_state *st;
    size_t seg_cap, blk_cap;
    int oom;
} sl_frag_builder;
void sl_frag_add_segment(sl_frag_builder *b, const sublet_segment_view *sv);

/* The pool kind of a segment. */
static inline int sl_frag_kind(const sublet_frag_segment *s)
{
    return s->is_small ? SUBLET_POOL_SMALL : SUBLET_POOL_LARGE;
}

/* Whether a segment belongs to pool `id`; to a private pool. */
static inline int sl_frag_same_pool(const sublet_frag_segment *s, const uint64_t id[2])
{
    return s->pool_id[0] == id[0] && s->pool_id[1] == id[1];
}
static inline int sl_frag_is_private(const sublet_frag_segment *s)
{
    return s->pool_id[0] || s->pool_id[1];
}

/* sublet_frag_pools() into a new array (*n of them); NULL (and *n = 0) when
 * memory runs out. */
sublet_frag_pool *sl_frag_pools_of(const sublet_frag_state *st, size_t *n);

/* A stack's frames as text: one a line, innermost first, at most 12, the
 * Python frames only when there are some, else without the allocator's own
 * plumbing (sublet_frag_state.stacks); malloc'd, NULL when memory runs out. */
char *sl_frag_stack_text(const sublet_frame *fr, size_t n);

/* Append the pinning segments (top n, each with up to max_live live blocks and
 * max_frames frames of their stacks), indented by `indent` spaces. */
void sl_frag_pinning_text(sl_text *b, const sublet_frag_state *st, size_t n, size_t max_live,
                          size_t max_frames, int indent);

#endif
