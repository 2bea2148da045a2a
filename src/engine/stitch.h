/* sublet — policy:stitch's OOM path (stitch.c, docs/policies.md). */
#ifndef SUBLET_ENGINE_STITCH_H
#define SUBLET_ENGINE_STITCH_H

#include "engine/engine.h"

/* Unmap the whole free pages of as few cached blocks as `size` is short of;
 * true when the device now has room for it. */
bool sl_stitch_release_some(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                            uint64_t size);
/* Serve `size` from a new run stitched from partly free pages (alias maps)
 * and fresh ones; SUBLET_ERR_DEVICE_OOM when nothing fits.  The block is out
 * of the free index. */
sublet_status sl_stitch_alloc(sublet_allocator *a, sl_pool *pool, sublet_stream stream,
                              uint64_t size, sl_block **out);
/* Give back every alias page whose usable bytes are all free. */
sublet_status sl_stitch_return_all(sublet_allocator *a);
bool sl_stitch_is_alias(const sublet_allocator *a, uint64_t page);
/* Bytes of alias pages in pool `kind`'s reservations (mapped, not reserved). */
uint64_t sl_stitch_alias_bytes(const sublet_allocator *a, int kind);
/* The alias invariants; `shadows` is the number of shadow blocks seen. */
sublet_status sl_stitch_verify(sublet_allocator *a, size_t shadows, char *msg, size_t cap);
void sl_stitch_fini(sublet_allocator *a);

#endif
