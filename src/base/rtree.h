/* sublet — a B+tree of disjoint address ranges, augmented for first fit
 * (src/rtree.c): the sim backend's address space (segments and VA
 * reservations) and the engine's segment index.
 *
 *   - an exact lookup, a containing lookup or an overlap test is one descent
 *     of a few wide nodes (none at all at or above the last leaf);
 *   - insert and remove are O(log n): a shift inside one leaf, a split or a
 *     merge now and then;
 *   - first fit (the lowest `align`-aligned address >= floor at which `size`
 *     bytes overlap no range) is O(log n) when `align` is the base
 *     alignment, and descends only into subtrees that hold a gap of `size`
 *     bytes at the base alignment otherwise.
 *
 * The gap before a range runs from the end of the previous range (or from
 * `floor`, whichever is higher) rounded up to the base alignment, to the
 * range's start.  Every leaf keeps the gap before each of its ranges and
 * every node the largest gap in its subtree; a coarser alignment (a multiple
 * of the base) can only shrink a gap, so those maxima bound it exactly.
 * Addresses are decided by the sequence of calls alone, exactly as a scan of
 * a sorted array would decide them.
 *
 * Nodes come from slabs the tree keeps until sl_rtree_fini.  A pointer to an
 * entry stays valid until the next insert or remove.  No locking: the
 * owner's lock guards it. */
#ifndef SUBLET_RTREE_H
#define SUBLET_RTREE_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

typedef struct sl_rtree_entry {
    uint64_t addr, size; /* [addr, addr+size); size > 0, no wrap */
    uintptr_t tag;       /* the owner's: a kind, a pointer */
} sl_rtree_entry;

struct sl_rtree_node;

typedef struct sl_rtree {
    struct sl_rtree_node *root;         /* NULL when empty */
    struct sl_rtree_node *first, *last; /* the leaves, linked in address order */
    struct sl_rtree_node *spare;        /* free nodes, linked through .parent */
    void *slabs;                        /* where nodes come from */
    size_t count;                       /* entries */
    size_t nodes, nspare;               /* nodes in the tree, free nodes */
    uint64_t floor;                     /* nothing is placed below it */
    uint64_t align;                     /* base alignment of placements */
    int gaps;                           /* gaps kept (first fit): sl_rtree_init */
} sl_rtree;

/* An empty tree that keeps gaps for first fit; `align` a power of two (0
 * counts as 1), floor >= 1 (so that first fit's answers are told from
 * "none").  A zeroed sl_rtree is an empty tree that keeps no gaps: lookups
 * only (first fit answers 0), each change a little cheaper. */
void sl_rtree_init(sl_rtree *t, uint64_t floor, uint64_t align);
void sl_rtree_fini(sl_rtree *t);
size_t sl_rtree_count(const sl_rtree *t);

/* Make the next insert unable to fail for lack of memory: 0 when the
 * memory for that cannot be had. */
int sl_rtree_reserve(sl_rtree *t);
/* Add [addr, addr+size).  SUBLET_ERR_INVALID_ARGUMENT when size is 0, it
 * wraps or it overlaps an entry; SUBLET_ERR_NO_MEMORY (nothing changed). */
sublet_status sl_rtree_insert(sl_rtree *t, uint64_t addr, uint64_t size, uintptr_t tag);
/* Remove the entry [addr, addr+size) with that tag: 1, or 0 (nothing
 * changed) when no entry starts at addr or it differs in size or tag. */
int sl_rtree_remove(sl_rtree *t, uint64_t addr, uint64_t size, uintptr_t tag);

/* The entry starting exactly at addr, or NULL. */
const sl_rtree_entry *sl_rtree_find(const sl_rtree *t, uint64_t addr);
/* The entry holding the byte at addr, or NULL. */
const sl_rtree_entry *sl_rtree_containing(const sl_rtree *t, uint64_t addr);
/* The first entry starting at or after addr, or NULL. */
const sl_rtree_entry *sl_rtree_ceil(const sl_rtree *t, uint64_t addr);
/* 1 when some byte of [addr, addr+size) lies in an entry; size > 0, no wrap. */
int sl_rtree_overlaps(const sl_rtree *t, uint64_t addr, uint64_t size);
/* Every entry in address order. */
void sl_rtree_walk(const sl_rtree *t, void (*fn)(void *user, const sl_rtree_entry *e),
                   void *user);

/* First fit: the lowest multiple x of `align` (a power of two, raised to the
 * base alignment if below it) with x >= floor, x+size <= UINT64_MAX and
 * [x, x+size) free; 0 when there is none.  size > 0. */
uint64_t sl_rtree_first_fit(const sl_rtree *t, uint64_t size, uint64_t align);

/* Check every invariant (order, disjointness, routing keys, parent and leaf
 * links, equal leaf depth, the stored ends and gaps, the counts); 0 when all
 * hold (tests). */
int sl_rtree_verify(const sl_rtree *t);

#endif
