/* sublet — the release paths (release.c): release_cached_blocks,
 * release_available_cached_blocks, the garbage collector, the OOM report. */
#ifndef SUBLET_ENGINE_RELEASE_H
#define SUBLET_ENGINE_RELEASE_H

#include "engine/engine.h"

/* release.c: release_cached_blocks(id) with `only` the pool (or NULL: all,
 * then policy:stitch's alias pages whose bytes are all free go back to their
 * owners, and the pages that become wholly free there are unmapped too). */
sublet_status sl_release_cached(sublet_allocator *a, sl_private *only);

/* release.c: release_available_cached_blocks (docs/rules.md §3.4): free just enough
 * oversize blocks of `pool` for `size` on `stream` (true: some were). */
bool sl_release_available(sublet_allocator *a, sl_pool *pool, sublet_stream stream, uint64_t size);
/* release.c: the garbage collector (§3.6; call when sl_gc_active). */
void sl_garbage_collect(sublet_allocator *a);
/* release.c: count the OOM, emit its trace event and compose its message
 * (§3.7); the limit and the device's free bytes for the observers. */
void sl_oom_report(sublet_allocator *a, uint64_t alloc_size, uint64_t rounded,
                   sublet_stream stream, uint64_t *limit_out, uint64_t *free_out);

#endif
