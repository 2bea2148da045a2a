/* sublet — expandable segments (expandable.c): docs/rules.md §6. */
#ifndef SUBLET_ENGINE_EXPANDABLE_H
#define SUBLET_ENGINE_EXPANDABLE_H

#include "engine/engine.h"

bool sl_unmapped_reserve(sl_pool *p, size_t extra);
void sl_unmapped_insert(sl_pool *p, sl_block *b);
void sl_unmapped_remove(sl_pool *p, sl_block *b);
bool sl_unmapped_contains(const sl_pool *p, const sl_block *b);
/* try_allocate_expandable_block: SUBLET_ERR_DEVICE_OOM when pages cannot be
 * mapped; the returned block is out of the free index. */
sublet_status sl_exp_allocate(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                              uint64_t size, sl_block **out);
sublet_status sl_exp_unmap_block(sublet_allocator *a, sl_block *b);
sublet_status sl_exp_release_segment(sublet_allocator *a, sl_block *b);
void sl_exp_destroy_segment(sublet_allocator *a, sl_segment *seg);
/* A new reservation for (stream, pool): one unmapped block covering it. */
sublet_status sl_exp_new_segment(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                                 sl_block **out);
uint64_t sl_exp_size(const sl_block *b);
/* policy:stitch: bytes the next sl_exp_allocate(size) would map, and the
 * address range of the run it would use (expandable.c). */
uint64_t sl_exp_plan(const sl_pool *pool, sublet_stream stream, uint64_t size, uint64_t *lo,
                     uint64_t *hi);

#endif
