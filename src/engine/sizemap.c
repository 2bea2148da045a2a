/* sublet — the size map of a free-index tree: insertion, deletion and
 * resizing.  See sizemap.h. */
#include <stdlib.h>

#include "engine/sizemap.h"

static void smap_raw_put(sl_size_slot *slots, size_t cap, uint64_t size, sl_block *b)
{
    size_t i = sl_smap_hash(size, cap);
    while (slots[i].size)
        i = (i + 1) & (cap - 1);
    slots[i] = (sl_size_slot){size, b};
}

static bool smap_resize(sl_tree *t, size_t nc)
{
    sl_size_slot *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return false;
    for (size_t i = 0; i < t->size_cap; i++)
        if (t->sizes[i].size)
            smap_raw_put(ns, nc, t->sizes[i].size, t->sizes[i].min);
    free(t->sizes);
    t->sizes = ns;
    t->size_cap = nc;
    return true;
}

/* Record b as the lowest block of its (absent) size; when the map cannot
 * grow the size stays out of it and the tree is marked partial.  The load
 * stays between 1/8 and 1/2 (sl_smap_del shrinks). */
void sl_smap_add(sl_tree *t, sl_block *b)
{
    if (t->sizes_off)
        return;
    if ((t->nsizes + 1) * 2 > t->size_cap &&
        !smap_resize(t, t->size_cap ? t->size_cap * 2 : 16)) {
        t->sizes_partial = true;
        return;
    }
    smap_raw_put(t->sizes, t->size_cap, b->size, b);
    t->nsizes++;
}

void sl_smap_del(sl_tree *t, sl_size_slot *slot)
{
    size_t mask = t->size_cap - 1, i = (size_t)(slot - t->sizes), j = i;
    /* backward-shift deletion keeps probe chains intact without tombstones */
    for (;;) {
        j = (j + 1) & mask;
        if (t->sizes[j].size == 0)
            break;
        size_t k = sl_smap_hash(t->sizes[j].size, t->size_cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            t->sizes[i] = t->sizes[j];
            i = j;
        }
    }
    t->sizes[i] = (sl_size_slot){0, NULL};
    t->nsizes--;
    if (t->size_cap > 64 && t->nsizes * 8 < t->size_cap)
        (void)smap_resize(t, t->size_cap / 2); /* when it fails the map stays as it is */
}
