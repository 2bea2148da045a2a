/* sublet — the set of segments (segs.c): segs[] and the address index. */
#ifndef SUBLET_ENGINE_SEGS_H
#define SUBLET_ENGINE_SEGS_H

#include "engine/engine.h"

/* The segment holding addr, or NULL. */
sl_segment *sl_segment_find(const sublet_allocator *a, uint64_t addr);
/* The set of segments (segs.c): room for one sl_segs_insert (false: out
 * of memory); add, remove (neither can fail); segs[] in address order
 * until the next change; free it all. */
bool sl_segs_reserve(sublet_allocator *a);
void sl_segs_insert(sublet_allocator *a, sl_segment *s);
void sl_segs_remove(sublet_allocator *a, sl_segment *s);
void sl_segs_sort(sublet_allocator *a);
void sl_segs_fini(sublet_allocator *a);

#endif
