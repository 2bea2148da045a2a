/* sublet — red-black trees with parent links threaded through the blocks
 * (sl_block's parent, kid[] and red), keyed by (size, segment order,
 * address): the trees of the free index's size classes (index.c).  Inserting
 * never allocates.  The comparisons and the walks to an end are inline: the
 * free index's descents run them at every level. */
#ifndef SUBLET_ENGINE_RBTREE_H
#define SUBLET_ENGINE_RBTREE_H

#include "engine/engine.h"

/* The key (size, segment order, address): the order is 0 in every segment
 * before PyTorch 2.14 (sl_segment_order), so that the address alone breaks
 * a tie of sizes there. */
static inline bool sl_rb_key_less(uint64_t s1, uint64_t o1, uint64_t a1, uint64_t s2,
                                  uint64_t o2, uint64_t a2)
{
    /* bitwise, not short-circuit: a descent compares unpredictable keys, and
     * a flag computed without a branch lets the compiler pick the child
     * with a conditional move */
    return (s1 < s2) | ((s1 == s2) & ((o1 < o2) | ((o1 == o2) & (a1 < a2))));
}

static inline bool sl_rb_less(const sl_block *x, const sl_block *y)
{
    return sl_rb_key_less(x->size, x->seg->order, x->addr, y->size, y->seg->order, y->addr);
}

static inline bool sl_rb_is_red(const sl_block *n) { return n && n->red; }

/* Put `c` where `old` hangs under `parent` (NULL: the root, *root). */
static inline void sl_rb_replace_child(sl_block **root, sl_block *parent,
                                       const sl_block *old, sl_block *c)
{
    if (!parent)
        *root = c;
    else if (parent->left == old)
        parent->left = c;
    else
        parent->right = c;
    if (c)
        c->parent = parent;
}

static inline sl_block *sl_rb_first(sl_block *n)
{
    while (n && n->left)
        n = n->left;
    return n;
}

static inline sl_block *sl_rb_last(sl_block *n)
{
    while (n && n->right)
        n = n->right;
    return n;
}

/* Insert b by descent from the root; returns b's in-order predecessor. */
sl_block *sl_rb_insert(sl_block **root, sl_block *b);
/* Insert b as the in-order predecessor of m (nothing lies between them). */
void sl_rb_insert_before(sl_block **root, sl_block *m, sl_block *b);
void sl_rb_remove(sl_block **root, sl_block *b);
/* In-order successor and predecessor, or NULL. */
sl_block *sl_rb_next(sl_block *n);
sl_block *sl_rb_prev(sl_block *n);

#endif
