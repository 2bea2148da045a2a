/* sublet — the free index of each pool (index.c): free blocks by stream,
 * ordered by (size, segment order, address), PyTorch's BlockPool.blocks. */
#ifndef SUBLET_ENGINE_INDEX_H
#define SUBLET_ENGINE_INDEX_H

#include "engine/engine.h"

sl_tree *sl_pool_tree(sl_pool *p, sublet_stream stream, bool create);
void sl_free_insert(sl_pool *p, sl_block *b);
void sl_free_remove(sl_pool *p, sl_block *b);
/* b, in the index, now has the key (b->size, b->addr) instead of its old
 * one, of size old_size: kept in place when its neighbours allow, else moved
 * to where the new key goes. */
void sl_free_rekey(sl_pool *p, sl_block *b, uint64_t old_size);
/* nw takes old's place in the index (same stream and pool); old leaves it.
 * Until the sl_free_rekey(p, nw, old->size) that must follow,
 * only nw's fields may change and nothing may search the index. */
void sl_free_replace(sl_pool *p, sl_block *old, sl_block *nw);
/* Smallest free block of `stream` with size >= want (the first in (segment
 * order, address) among equals), or NULL. */
sl_block *sl_free_lower_bound(sl_pool *p, sublet_stream stream, uint64_t want);
/* Largest free block of `stream` ordered strictly before block k's key
 * (size, segment order, address). */
sl_block *sl_free_before(sl_pool *p, sublet_stream stream, const sl_block *k);
/* Smallest free block of `stream` ordered strictly after k's key. */
sl_block *sl_free_after(sl_pool *p, sublet_stream stream, const sl_block *k);
/* Largest free block of `stream`. */
sl_block *sl_free_max(sl_pool *p, sublet_stream stream);
/* The root of the tree of size's class (tests), or NULL. */
sl_block *sl_free_bin_root(const sl_tree *t, uint64_t size);
/* All free blocks of the pool in PyTorch's (stream, size, addr) order.
 * Returns a malloc'd array (caller frees) or NULL when empty/out of memory;
 * *n receives the count, *oom is set on allocation failure. */
sl_block **sl_free_collect(sl_pool *p, size_t *n, bool *oom);
void sl_pool_fini(sl_pool *p);
/* Sum of the squared sizes of a tree's free blocks (spread metric). */
double sl_tree_squares(const sl_tree *t);
/* Check every tree against a recount: links, red-black colours, (size,
 * order, addr) order, membership, count, bytes, squares and the size map.  *count
 * receives the number of free blocks. */
bool sl_free_verify(sl_pool *p, size_t *count, char *msg, size_t cap);

#endif
