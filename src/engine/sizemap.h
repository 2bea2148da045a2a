/* sublet — the size map of a free-index tree (sizemap.c): exact size ->
 * the first free block of that size, open addressing in sl_tree.sizes.
 * An accelerator of index.c, never its source of truth (see there).  The
 * lookup is inline: best fit and every insert and removal run it. */
#ifndef SUBLET_ENGINE_SIZEMAP_H
#define SUBLET_ENGINE_SIZEMAP_H

#include "engine/engine.h"

static inline size_t sl_smap_hash(uint64_t size, size_t cap)
{
    return (size_t)((size * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static inline sl_size_slot *sl_smap_find(const sl_tree *t, uint64_t size)
{
    if (!t->nsizes || size == 0) /* 0 marks an empty slot */
        return NULL;
    size_t mask = t->size_cap - 1;
    for (size_t i = sl_smap_hash(size, t->size_cap);; i = (i + 1) & mask) {
        sl_size_slot *s = &t->sizes[i];
        if (s->size == size)
            return s;
        if (s->size == 0)
            return NULL;
    }
}

/* Record b as the lowest block of its (absent) size; when the map cannot
 * grow the size stays out of it and the tree is marked partial. */
void sl_smap_add(sl_tree *t, sl_block *b);
/* Remove the entry at slot. */
void sl_smap_del(sl_tree *t, sl_size_slot *slot);

#endif
