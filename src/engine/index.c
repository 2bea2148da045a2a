/* sublet — the engine's indexes: the free index, the pointer map of
 * allocated blocks and the block slab.
 *
 * The free index keeps one tree per stream in each pool, ordered by (size,
 * segment order, address) as PyTorch's std::set of blocks is ordered by
 * (stream, size, address), and from 2.14 on by (stream, size, registration
 * counter, address): the segment order (sl_segment.order) is 0 in every
 * segment before 2.14, so that "the first" of a size is then its
 * lowest-address block.  Each tree is two structures over the same blocks:
 *
 *   - red-black trees threaded through the blocks themselves (parent, left,
 *     right, colour), so that inserting never allocates: one per size class
 *     (32 an octave), with a bitmap of the classes that hold blocks ("the
 *     bins" below), so that a descent walks a few levels, not the dozen or
 *     more of one tree of all the blocks;
 *   - a size map: exact size -> the first free block of that size.
 *
 * The size map makes the operations of a cached malloc+free independent of
 * the number of blocks: best fit for a size that is present is one probe
 * (the smallest block >= want is then the first block of size
 * want); a block below the lowest block of its size (what a malloc took and
 * its free gives back) is inserted as that block's in-order predecessor (a
 * walk down the right spine of its left subtree, then the red-black
 * fix-up, amortised O(1)); removal starts at the block.  Only a size absent
 * from the tree, or a block above the lowest of its size, costs a descent,
 * and that in its class's tree.  Workloads repeat exact sizes, so the first
 * cases are the common ones.
 *
 * The size map is an accelerator, never the source of truth: an entry, when
 * there is one, is exact; when it cannot grow (out of host memory) a size is
 * simply left out (`sizes_partial`) and its lookups take the descent.  So no
 * insert can fail.  Nor is it kept where it does not pay: when few best-fit
 * lookups find their exact size (every size distinct), the map is dropped
 * for that tree and rebuilt once they would again (smap_judge).
 * sl_free_verify checks both structures and every counter against a
 * recount. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/index.h"

/* ---- red-black tree with parent links, keyed by (size, order, addr) --------- */

/* The key (size, segment order, address): the order is 0 in every segment
 * before PyTorch 2.14 (sl_segment_order), so that the address alone breaks
 * a tie of sizes there. */
static inline bool key_less(uint64_t s1, uint64_t o1, uint64_t a1, uint64_t s2, uint64_t o2,
                            uint64_t a2)
{
    /* bitwise, not short-circuit: a descent compares unpredictable keys, and
     * a flag computed without a branch lets the compiler pick the child
     * with a conditional move */
    return (s1 < s2) | ((s1 == s2) & ((o1 < o2) | ((o1 == o2) & (a1 < a2))));
}

static inline bool block_less(const sl_block *x, const sl_block *y)
{
    return key_less(x->size, x->seg->order, x->addr, y->size, y->seg->order, y->addr);
}

static inline bool is_red(const sl_block *n) { return n && n->red; }

/* Put `c` where `old` hangs under `parent` (NULL: the root, *root). */
static inline void replace_child(sl_block **root, sl_block *parent, const sl_block *old,
                                 sl_block *c)
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

static void rot_right(sl_block **root, sl_block *n)
{
    sl_block *l = n->left;
    replace_child(root, n->parent, n, l);
    n->left = l->right;
    if (n->left)
        n->left->parent = n;
    l->right = n;
    n->parent = l;
}

static void rot_left(sl_block **root, sl_block *n)
{
    sl_block *r = n->right;
    replace_child(root, n->parent, n, r);
    n->right = r->left;
    if (n->right)
        n->right->parent = n;
    r->left = n;
    n->parent = r;
}

/* Hang the red leaf b at *link under parent, then restore the colours: a
 * red parent with a red uncle is recoloured and the walk goes up two levels;
 * otherwise at most two rotations end it.  Amortised O(1) per insert, also
 * when inserts and removals alternate at the same place (an AVL tree then
 * climbs to the root every time: the split and merge of a cached pair did
 * exactly that). */
static void attach(sl_block **root, sl_block *parent, sl_block **link, sl_block *b)
{
    *link = b;
    b->parent = parent;
    b->left = b->right = NULL;
    b->red = true;
    sl_block *p;
    while ((p = b->parent) && p->red) {
        sl_block *g = p->parent; /* a red node is never the root */
        if (p == g->left) {
            sl_block *u = g->right;
            if (is_red(u)) {
                p->red = u->red = false;
                g->red = true;
                b = g;
                continue;
            }
            if (b == p->right) {
                rot_left(root, p);
                p = b;
            }
            p->red = false;
            g->red = true;
            rot_right(root, g);
        } else {
            sl_block *u = g->left;
            if (is_red(u)) {
                p->red = u->red = false;
                g->red = true;
                b = g;
                continue;
            }
            if (b == p->left) {
                rot_right(root, p);
                p = b;
            }
            p->red = false;
            g->red = true;
            rot_left(root, g);
        }
        break;
    }
    (*root)->red = false;
}

/* Insert by descent from the root; returns b's in-order predecessor. */
static sl_block *tree_insert(sl_block **root, sl_block *b)
{
    sl_block *parent = NULL, *pred = NULL, **link = root;
    while (*link) {
        parent = *link;
        bool right = !block_less(b, parent);
        pred = right ? parent : pred;
        link = &parent->kid[right];
    }
    attach(root, parent, link, b);
    return pred;
}

/* Insert b as the in-order predecessor of m (nothing lies between them). */
static void tree_insert_before(sl_block **root, sl_block *m, sl_block *b)
{
    sl_block *parent = m, **link = &m->left;
    while (*link) {
        parent = *link;
        link = &parent->right;
    }
    attach(root, parent, link, b);
}

/* After a black node left the subtree of `parent` on x's side (x may be
 * NULL): that side is one black short.  Recolouring moves the deficit up;
 * at most three rotations end it. */
static void remove_fixup(sl_block **root, sl_block *x, sl_block *parent)
{
    while (parent && !is_red(x)) {
        if (x == parent->left) {
            sl_block *w = parent->right; /* not NULL: that side has a black more */
            if (w->red) {
                w->red = false;
                parent->red = true;
                rot_left(root, parent);
                w = parent->right;
            }
            if (!is_red(w->left) && !is_red(w->right)) {
                w->red = true;
                x = parent;
                parent = x->parent;
                continue;
            }
            if (!is_red(w->right)) {
                w->left->red = false;
                w->red = true;
                rot_right(root, w);
                w = parent->right;
            }
            w->red = parent->red;
            parent->red = false;
            w->right->red = false;
            rot_left(root, parent);
        } else {
            sl_block *w = parent->left;
            if (w->red) {
                w->red = false;
                parent->red = true;
                rot_right(root, parent);
                w = parent->left;
            }
            if (!is_red(w->left) && !is_red(w->right)) {
                w->red = true;
                x = parent;
                parent = x->parent;
                continue;
            }
            if (!is_red(w->left)) {
                w->right->red = false;
                w->red = true;
                rot_left(root, w);
                w = parent->left;
            }
            w->red = parent->red;
            parent->red = false;
            w->left->red = false;
            rot_right(root, parent);
        }
        x = *root;
        break;
    }
    if (x)
        x->red = false;
}

static void tree_remove(sl_block **root, sl_block *b)
{
    sl_block *child, *parent;
    bool removed_red;
    if (b->left && b->right) {
        /* the successor s takes b's place and colour; s's old place loses
         * s's colour */
        sl_block *s = b->right;
        while (s->left)
            s = s->left;
        child = s->right;
        removed_red = s->red;
        if (s->parent == b) {
            parent = s;
        } else {
            parent = s->parent;
            parent->left = child;
            if (child)
                child->parent = parent;
            s->right = b->right;
            s->right->parent = s;
        }
        s->left = b->left;
        s->left->parent = s;
        s->red = b->red;
        replace_child(root, b->parent, b, s);
    } else {
        child = b->left ? b->left : b->right;
        parent = b->parent;
        removed_red = b->red;
        replace_child(root, parent, b, child);
    }
    b->parent = b->left = b->right = NULL;
    if (!removed_red)
        remove_fixup(root, child, parent);
}

static sl_block *tree_next(sl_block *n)
{
    if (n->right) {
        for (n = n->right; n->left;)
            n = n->left;
        return n;
    }
    while (n->parent && n->parent->right == n)
        n = n->parent;
    return n->parent;
}

static sl_block *tree_prev(sl_block *n)
{
    if (n->left) {
        for (n = n->left; n->right;)
            n = n->right;
        return n;
    }
    while (n->parent && n->parent->left == n)
        n = n->parent;
    return n->parent;
}

static sl_block *tree_first(sl_block *n)
{
    while (n && n->left)
        n = n->left;
    return n;
}

/* ---- the bins: one red-black tree per size class ------------------------------ */

/* A stream tree's blocks are spread over size classes, 32 an octave from
 * 512 bytes to 2^48 (smaller sizes in the first class, larger in the
 * last), each class a red-black tree of its own, and a bitmap (two levels)
 * of the classes that have blocks.  Classes are ordered as sizes are, so the
 * in-order sequence of the classes in turn is the (size, address) order of
 * the whole tree; a descent only walks one class's tree, a few levels where
 * one tree of all the blocks is a dozen or more (each a dependent load, the
 * cost of best fit when sizes do not repeat), and the next class with
 * blocks is a bit scan. */
#define BIN_SUB 5  /* log2 of the classes an octave: 32 (16: ~5 % slower on
                    * the random benchmark, 64: ~2 % faster for twice the
                    * memory, 20 KiB a tree) */
#define BIN_MIN 9  /* the octave of the first class: 512 bytes */
#define BIN_MAX 48 /* the octave of the last */
#define NBINS ((BIN_MAX - BIN_MIN + 1) << BIN_SUB)
#define NBIN_WORDS ((NBINS + 63) / 64)
_Static_assert(NBIN_WORDS <= 64, "the bitmap's summary is one word");

struct sl_bins {
    uint64_t summary;          /* bit w: map[w] != 0 */
    uint64_t map[NBIN_WORDS];  /* bit c: root[c] != NULL */
    sl_block *root[NBINS];
};

static inline unsigned bin_of(uint64_t size)
{
    if (size < ((uint64_t)1 << BIN_MIN))
        return 0;
    unsigned e = 63u - (unsigned)__builtin_clzll(size);
    if (e > BIN_MAX)
        return NBINS - 1;
    unsigned sub = (unsigned)(size >> (e - BIN_SUB)) & ((1u << BIN_SUB) - 1);
    return ((e - BIN_MIN) << BIN_SUB) | sub;
}

static inline sl_block **bin_root(const sl_tree *t, uint64_t size)
{
    return &t->bins->root[bin_of(size)];
}

static inline void bin_mark(sl_bins *b, unsigned c)
{
    b->map[c >> 6] |= UINT64_C(1) << (c & 63);
    b->summary |= UINT64_C(1) << (c >> 6);
}

/* After a removal from class c: unmark it when it emptied. */
static inline void bin_settle(sl_bins *b, unsigned c)
{
    if (b->root[c])
        return;
    b->map[c >> 6] &= ~(UINT64_C(1) << (c & 63));
    if (!b->map[c >> 6])
        b->summary &= ~(UINT64_C(1) << (c >> 6));
}

/* The first class after c with blocks, or -1. */
static int bin_after(const sl_bins *b, unsigned c)
{
    unsigned w = c >> 6;
    uint64_t m = b->map[w] & (~UINT64_C(0) << (c & 63) << 1);
    if (m)
        return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
    uint64_t s = b->summary & (~UINT64_C(0) << w << 1);
    if (!s)
        return -1;
    w = (unsigned)__builtin_ctzll(s);
    return (int)(w * 64 + (unsigned)__builtin_ctzll(b->map[w]));
}

/* The last class before c with blocks (c == NBINS: the last of all), or -1. */
static int bin_before(const sl_bins *b, unsigned c)
{
    unsigned w = c >> 6;
    if (c < NBINS) {
        uint64_t m = b->map[w] & ((UINT64_C(1) << (c & 63)) - 1);
        if (m)
            return (int)(w * 64 + 63u - (unsigned)__builtin_clzll(m));
    }
    uint64_t s = b->summary & ((UINT64_C(1) << w) - 1);
    if (!s)
        return -1;
    w = 63u - (unsigned)__builtin_clzll(s);
    return (int)(w * 64 + 63u - (unsigned)__builtin_clzll(b->map[w]));
}

static sl_block *tree_last(sl_block *n)
{
    while (n && n->right)
        n = n->right;
    return n;
}

/* The first block of the first class after c with blocks, or NULL. */
static sl_block *first_after(const sl_tree *t, unsigned c)
{
    int d = bin_after(t->bins, c);
    return d < 0 ? NULL : tree_first(t->bins->root[d]);
}

/* The last block of the last class before c with blocks (c == NBINS: of all
 * classes), or NULL. */
static sl_block *last_before(const sl_tree *t, unsigned c)
{
    int d = bin_before(t->bins, c);
    return d < 0 ? NULL : tree_last(t->bins->root[d]);
}

/* The whole tree in (size, order, address) order: its first block, and the block
 * after n. */
static sl_block *all_first(const sl_tree *t)
{
    return t->bins->root[0] ? tree_first(t->bins->root[0]) : first_after(t, 0);
}

static sl_block *all_next(const sl_tree *t, sl_block *n)
{
    sl_block *x = tree_next(n);
    return x ? x : first_after(t, bin_of(n->size));
}

sl_block *sl_free_bin_root(const sl_tree *t, uint64_t size)
{
    return t && t->bins ? *bin_root(t, size) : NULL;
}

/* ---- the size map: exact size -> first free block of that size ------------------ */

static inline size_t size_hash(uint64_t size, size_t cap)
{
    return (size_t)((size * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static sl_size_slot *smap_find(const sl_tree *t, uint64_t size)
{
    if (!t->nsizes || size == 0) /* 0 marks an empty slot */
        return NULL;
    size_t mask = t->size_cap - 1;
    for (size_t i = size_hash(size, t->size_cap);; i = (i + 1) & mask) {
        sl_size_slot *s = &t->sizes[i];
        if (s->size == size)
            return s;
        if (s->size == 0)
            return NULL;
    }
}

static void smap_raw_put(sl_size_slot *slots, size_t cap, uint64_t size, sl_block *b)
{
    size_t i = size_hash(size, cap);
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
 * stays between 1/8 and 1/2 (smap_del shrinks). */
static void smap_add(sl_tree *t, sl_block *b)
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

static void smap_del(sl_tree *t, sl_size_slot *slot)
{
    size_t mask = t->size_cap - 1, i = (size_t)(slot - t->sizes), j = i;
    /* backward-shift deletion keeps probe chains intact without tombstones */
    for (;;) {
        j = (j + 1) & mask;
        if (t->sizes[j].size == 0)
            break;
        size_t k = size_hash(t->sizes[j].size, t->size_cap);
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

/* The map's worth, judged per window of best-fit lookups (at least the
 * tree's count, so that a rebuild's walk is O(1) amortised per lookup): a
 * lookup hits when its answer has the size asked for, which with the map off
 * is what the map would have answered.  Below one hit in eight the map is
 * dropped (its finds, adds and deletions at every insert and removal then
 * cost nothing); above one in two it is rebuilt by an in-order walk.  Which
 * structure answers never changes the answer. */
#define SMAP_WINDOW 1024

static void smap_judge(sl_tree *t)
{
    if (t->probes < t->count)
        return;
    if (!t->sizes_off && t->hits * 8 < t->probes) {
        free(t->sizes);
        t->sizes = NULL;
        t->size_cap = t->nsizes = 0;
        t->sizes_partial = false;
        t->sizes_off = true;
    } else if (t->sizes_off && t->hits * 2 > t->probes) {
        t->sizes_off = false;
        const sl_block *prev = NULL;
        for (sl_block *b = all_first(t); b; prev = b, b = all_next(t, b))
            if (!prev || prev->size != b->size)
                smap_add(t, b); /* may leave the map partial, as ever */
    }
    t->probes = t->hits = 0;
}

/* ---- exact sums of squared sizes (128-bit) ------------------------------------- */

static inline void square128(uint64_t x, uint64_t *hi, uint64_t *lo)
{
    uint64_t a = x >> 32, b = x & 0xffffffffu;
    uint64_t bb = b * b, ab = a * b;
    *lo = bb + (ab << 33);
    *hi = a * a + (ab >> 31) + (*lo < bb);
}

double sl_tree_squares(const sl_tree *t)
{
    return (double)t->sq_hi * 18446744073709551616.0 + (double)t->sq_lo;
}

/* ---- per-pool stream trees ------------------------------------------------- */

sl_tree *sl_pool_tree(sl_pool *p, sublet_stream stream, bool create)
{
    if (p->last_tree < p->ntrees && p->trees[p->last_tree].stream == stream)
        return &p->trees[p->last_tree];
    /* trees are kept sorted by stream so that a walk visits blocks in
     * PyTorch's (stream, size, address) order */
    size_t lo = 0, hi = p->ntrees;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->trees[mid].stream < stream)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->ntrees && p->trees[lo].stream == stream) {
        p->last_tree = lo;
        return &p->trees[lo];
    }
    if (!create)
        return NULL;
    if (p->ntrees == p->trees_cap) {
        size_t nc = p->trees_cap ? p->trees_cap * 2 : 4;
        sl_tree *nt = realloc(p->trees, nc * sizeof *nt);
        if (!nt)
            return NULL;
        p->trees = nt;
        p->trees_cap = nc;
    }
    sl_bins *bins = calloc(1, sizeof *bins);
    if (!bins)
        return NULL;
    memmove(&p->trees[lo + 1], &p->trees[lo], (p->ntrees - lo) * sizeof *p->trees);
    p->trees[lo] = (sl_tree){.stream = stream, .bins = bins};
    p->ntrees++;
    p->last_tree = lo;
    return &p->trees[lo];
}

static inline sl_tree *tree_of(sl_pool *p, sublet_stream stream)
{
    if (p->last_tree < p->ntrees && p->trees[p->last_tree].stream == stream)
        return &p->trees[p->last_tree];
    return sl_pool_tree(p, stream, false);
}

/* b (out of the index, its key set) into class c of t: the tree, the size
 * map, the bitmap and the sum of squares; not the count or bytes. */
static void put(sl_tree *t, sl_block *b, unsigned c)
{
    sl_block **root = &t->bins->root[c];
    sl_size_slot *s = smap_find(t, b->size);
    if (s) {
        if (block_less(b, s->min)) {
            tree_insert_before(root, s->min, b);
            s->min = b;
        } else {
            tree_insert(root, b);
        }
    } else {
        sl_block *pred = tree_insert(root, b);
        /* with a partial map an absent size may still have lower blocks */
        if (!pred || pred->size != b->size)
            smap_add(t, b);
    }
    bin_mark(t->bins, c);
    uint64_t qh, ql;
    square128(b->size, &qh, &ql);
    t->sq_lo += ql;
    t->sq_hi += qh + (t->sq_lo < ql);
}

/* b, of size `size` in class c, out of t: put's reverse.  next: b's
 * in-order successor in its class when the caller has it, else b itself
 * (looked up only when the size map needs it). */
static void take(sl_tree *t, sl_block *b, uint64_t size, unsigned c, sl_block *next)
{
    sl_size_slot *s = smap_find(t, size);
    if (s && s->min == b) {
        if (next == b)
            next = tree_next(b);
        if (next && next->size == size)
            s->min = next;
        else
            smap_del(t, s);
    }
    tree_remove(&t->bins->root[c], b);
    bin_settle(t->bins, c);
    uint64_t qh, ql;
    square128(size, &qh, &ql);
    uint64_t borrow = t->sq_lo < ql;
    t->sq_lo -= ql;
    t->sq_hi -= qh + borrow;
}

void sl_free_insert(sl_pool *p, sl_block *b)
{
    /* The tree for the stream exists: the engine creates it (and handles the
     * out-of-memory case) before any state changes; see sl_pool_tree. */
    sl_tree *t = tree_of(p, b->stream);
    put(t, b, bin_of(b->size));
    t->count++;
    t->bytes += b->size;
    b->in_free = true;
    b->gc_count_base = p->clock;
}

void sl_free_remove(sl_pool *p, sl_block *b)
{
    sl_tree *t = tree_of(p, b->stream);
    take(t, b, b->size, bin_of(b->size), b);
    t->count--;
    t->bytes -= b->size;
    if (t->count == 0)
        t->sizes_partial = false; /* the map is empty, hence complete again */
    b->in_free = false;
}

/* b's key changed from (old_size, its old address) to (b->size, b->addr) while b
 * stayed in the index: a split's remainder (the block a malloc took from the
 * index keeps its node), a free block whose node a merged block took over
 * (sl_free_replace).  When the new key still lies between b's in-order
 * neighbours in its class, the tree stays as it is and only the size map
 * and the counters change; otherwise b leaves its class's tree and enters
 * the tree of its new key's class (the same one or another), the stream
 * tree looked up once. */
void sl_free_rekey(sl_pool *p, sl_block *b, uint64_t old_size)
{
    sl_tree *t = tree_of(p, b->stream);
    uint64_t ns = b->size;
    unsigned oc = bin_of(old_size), nc = ns == old_size ? oc : bin_of(ns);
    /* (neighbours within b's class: the key may only move inside it) */
    sl_block *prev = tree_prev(b), *next = tree_next(b);
    if (nc != oc || (prev && !block_less(prev, b)) || (next && !block_less(b, next))) {
        /* (take() needs the old size only: the tree unlinks by node) */
        take(t, b, old_size, oc, next);
        if (t->count == 1)
            t->sizes_partial = false; /* the map is empty, hence complete again */
        put(t, b, nc);
        t->bytes += ns - old_size;
        b->gc_count_base = p->clock;
        return;
    }
    if (ns != old_size) {
        /* the old size: b was its lowest block or not, and its successor is
         * the next of that size if any is */
        sl_size_slot *s = smap_find(t, old_size);
        if (s && s->min == b) {
            if (next && next->size == old_size)
                s->min = next;
            else
                smap_del(t, s);
        }
        /* the new size: b is its lowest block unless its predecessor has it */
        if (!prev || prev->size != ns) {
            s = smap_find(t, ns);
            if (s)
                s->min = b;
            else
                smap_add(t, b);
        }
        uint64_t qh, ql;
        square128(old_size, &qh, &ql);
        uint64_t borrow = t->sq_lo < ql;
        t->sq_lo -= ql;
        t->sq_hi -= qh + borrow;
        square128(ns, &qh, &ql);
        t->sq_lo += ql;
        t->sq_hi += qh + (t->sq_lo < ql);
        t->bytes += ns - old_size;
    }
    b->gc_count_base = p->clock;
}

/* nw (out of the index) takes old's node, colour and size-map entry; old
 * leaves the index.  nw's key is taken to be old's until sl_free_rekey
 * (nothing may search the tree in between). */
void sl_free_replace(sl_pool *p, sl_block *old, sl_block *nw)
{
    sl_tree *t = tree_of(p, old->stream);
    nw->left = old->left;
    nw->right = old->right;
    nw->red = old->red;
    replace_child(bin_root(t, old->size), old->parent, old, nw);
    if (nw->left)
        nw->left->parent = nw;
    if (nw->right)
        nw->right->parent = nw;
    sl_size_slot *s = smap_find(t, old->size);
    if (s && s->min == old)
        s->min = nw;
    old->parent = old->left = old->right = NULL;
    old->in_free = false;
    nw->in_free = true;
}

sl_block *sl_free_lower_bound(sl_pool *p, sublet_stream stream, uint64_t want)
{
    sl_tree *t = tree_of(p, stream);
    if (!t)
        return NULL;
    sl_size_slot *s = smap_find(t, want);
    sl_block *best = NULL;
    if (s) {
        best = s->min;
    } else {
        unsigned c = bin_of(want);
        for (sl_block *n = t->bins->root[c]; n;) {
            bool ge = n->size >= want; /* (size, order, addr) >= (want, 0, 0) */
            best = ge ? n : best;
            n = n->kid[!ge];
        }
        if (!best) /* every block of want's class is smaller: the next class's first */
            best = first_after(t, c);
    }
    t->hits += best && best->size == want;
    if (++t->probes >= SMAP_WINDOW)
        smap_judge(t);
    return best;
}

sl_block *sl_free_before(sl_pool *p, sublet_stream stream, const sl_block *k)
{
    sl_tree *t = tree_of(p, stream);
    if (!t)
        return NULL;
    unsigned c = bin_of(k->size);
    sl_block *n = t->bins->root[c], *best = NULL;
    while (n) {
        bool lt = block_less(n, k);
        best = lt ? n : best;
        n = n->kid[lt];
    }
    return best ? best : last_before(t, c);
}

sl_block *sl_free_after(sl_pool *p, sublet_stream stream, const sl_block *k)
{
    sl_tree *t = tree_of(p, stream);
    if (!t)
        return NULL;
    unsigned c = bin_of(k->size);
    sl_block *n = t->bins->root[c], *best = NULL;
    while (n) {
        bool gt = block_less(k, n);
        best = gt ? n : best;
        n = n->kid[!gt];
    }
    return best ? best : first_after(t, c);
}

sl_block *sl_free_max(sl_pool *p, sublet_stream stream)
{
    sl_tree *t = tree_of(p, stream);
    return t ? last_before(t, NBINS) : NULL;
}

sl_block **sl_free_collect(sl_pool *p, size_t *n, bool *oom)
{
    size_t total = 0;
    *oom = false;
    for (size_t i = 0; i < p->ntrees; i++)
        total += p->trees[i].count;
    *n = 0;
    if (!total)
        return NULL;
    sl_block **out = malloc(total * sizeof *out);
    if (!out) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < p->ntrees; i++)
        for (sl_block *b = all_first(&p->trees[i]); b; b = all_next(&p->trees[i], b))
            out[(*n)++] = b;
    return out;
}

void sl_pool_fini(sl_pool *p)
{
    free(p->unmapped);
    p->unmapped = NULL;
    p->nunmapped = p->unmapped_cap = 0;
    for (size_t i = 0; i < p->ntrees; i++) {
        free(p->trees[i].sizes);
        free(p->trees[i].bins);
    }
    free(p->trees);
    p->trees = NULL;
    p->ntrees = p->trees_cap = 0;
}

/* ---- verification ---------------------------------------------------------------- */

typedef struct vctx {
    const sl_pool *pool;
    const sl_tree *t;
    unsigned bin;         /* the class being walked */
    const sl_block *prev; /* in-order predecessor of the next node visited */
    size_t count, distinct, mapped_mins;
    uint64_t bytes, sq_hi, sq_lo;
    char *msg;
    size_t cap;
} vctx;

static bool vfail(vctx *c, const char *what, const sl_block *n)
{
    snprintf(c->msg, c->cap, "free index: %s at block 0x%llx", what,
             n ? (unsigned long long)n->addr : 0ull);
    return false;
}

/* In order: links, colours and black heights, order, membership, and the size map
 * for the lowest block of each size. */
static bool verify_node(vctx *c, const sl_block *n, int depth, int *black)
{
    *black = 1; /* a NULL leaf counts as black */
    if (!n)
        return true;
    if (depth > 128)
        return vfail(c, "tree deeper than any red-black tree can be", n);
    if ((n->left && n->left->parent != n) || (n->right && n->right->parent != n))
        return vfail(c, "broken parent link", n);
    if (n->red && (is_red(n->left) || is_red(n->right)))
        return vfail(c, "red block with a red child", n);
    int bl, br;
    if (!verify_node(c, n->left, depth + 1, &bl))
        return false;
    if (!n->in_free || n->allocated || n->stream != c->t->stream || n->pool != c->pool)
        return vfail(c, "block that is not free on this pool and stream", n);
    if (bin_of(n->size) != c->bin)
        return vfail(c, "block in another size class's tree", n);
    if (c->prev && !block_less(c->prev, n))
        return vfail(c, "out of (size, order, address) order", n);
    if (!c->prev || c->prev->size != n->size) {
        c->distinct++;
        const sl_size_slot *s = smap_find(c->t, n->size);
        if (s && s->min != n)
            return vfail(c, "size map names another block as the lowest of this size", n);
        if (!s && !c->t->sizes_partial && !c->t->sizes_off)
            return vfail(c, "size missing from the size map", n);
        c->mapped_mins += s != NULL;
    }
    uint64_t qh, ql;
    square128(n->size, &qh, &ql);
    c->sq_lo += ql;
    c->sq_hi += qh + (c->sq_lo < ql);
    c->bytes += n->size;
    c->count++;
    c->prev = n;
    if (!verify_node(c, n->right, depth + 1, &br))
        return false;
    if (bl != br)
        return vfail(c, "black heights differ below", n);
    *black = bl + !n->red;
    return true;
}

static bool verify_tree(const sl_pool *p, const sl_tree *t, size_t *count, char *msg, size_t cap)
{
    vctx c = {.pool = p, .t = t, .msg = msg, .cap = cap};
    if (!t->bins) {
        snprintf(msg, cap, "free index: a stream tree without its classes");
        return false;
    }
    /* each class in turn: the walk's order check spans them all */
    for (unsigned k = 0; k < NBINS; k++) {
        const sl_block *root = t->bins->root[k];
        bool marked = t->bins->map[k >> 6] >> (k & 63) & 1;
        if (marked != (root != NULL)) {
            snprintf(msg, cap, "free index: size class %u %s but marked %s", k,
                     root ? "has blocks" : "is empty", marked ? "full" : "empty");
            return false;
        }
        if (!root)
            continue;
        if (root->parent)
            return vfail(&c, "root with a parent", root);
        if (root->red)
            return vfail(&c, "red root", root);
        c.bin = k;
        int black;
        if (!verify_node(&c, root, 0, &black))
            return false;
    }
    for (unsigned w = 0; w < NBIN_WORDS; w++)
        if ((t->bins->map[w] != 0) != (t->bins->summary >> w & 1)) {
            snprintf(msg, cap, "free index: class bitmap summary wrong at word %u", w);
            return false;
        }
    if (c.count != t->count) {
        snprintf(msg, cap, "free index count %zu != %zu nodes", t->count, c.count);
        return false;
    }
    if (c.bytes != t->bytes) {
        snprintf(msg, cap, "free index bytes %llu != %llu recounted",
                 (unsigned long long)t->bytes, (unsigned long long)c.bytes);
        return false;
    }
    if (c.sq_hi != t->sq_hi || c.sq_lo != t->sq_lo) {
        snprintf(msg, cap, "free index sum of squares differs from a recount");
        return false;
    }
    /* every entry was met as the lowest block of its size, and none is extra */
    size_t used = 0;
    for (size_t i = 0; i < t->size_cap; i++)
        if (t->sizes[i].size) {
            used++;
            if (smap_find(t, t->sizes[i].size) != &t->sizes[i]) {
                snprintf(msg, cap, "size map probe chain broken for size %llu",
                         (unsigned long long)t->sizes[i].size);
                return false;
            }
        }
    if (used != t->nsizes || c.mapped_mins != t->nsizes ||
        (!t->sizes_partial && !t->sizes_off && t->nsizes != c.distinct)) {
        snprintf(msg, cap, "size map holds %zu entries (%zu counted), tree has %zu sizes, "
                 "%zu of them mapped", t->nsizes, used, c.distinct, c.mapped_mins);
        return false;
    }
    if (t->sizes_off && (t->nsizes || t->sizes_partial)) {
        snprintf(msg, cap, "size map off but holding %zu entries%s", t->nsizes,
                 t->sizes_partial ? ", marked partial" : "");
        return false;
    }
    if (t->count == 0 && t->sizes_partial) {
        snprintf(msg, cap, "empty free tree marked partial");
        return false;
    }
    *count += c.count;
    return true;
}

bool sl_free_verify(sl_pool *p, size_t *count, char *msg, size_t cap)
{
    *count = 0;
    for (size_t i = 0; i < p->ntrees; i++) {
        if (i && p->trees[i - 1].stream >= p->trees[i].stream) {
            snprintf(msg, cap, "stream trees out of order");
            return false;
        }
        if (!verify_tree(p, &p->trees[i], count, msg, cap))
            return false;
    }
    return true;
}

/* ---- pointer map ---------------------------------------------------------------- */

/* Open addressing with linear probing; each slot holds the address and its
 * block side by side, so a lookup reads one cache line. */
#define PTR_EMPTY UINT64_MAX

static inline size_t ptr_hash(uint64_t addr, size_t cap)
{
    uint64_t x = (addr >> 9) * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

static bool ptrmap_alloc(sl_ptrmap *m, size_t cap)
{
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots)
        return false;
    for (size_t i = 0; i < cap; i++)
        m->slots[i] = (sl_ptr_slot){PTR_EMPTY, NULL};
    m->cap = cap;
    m->count = 0;
    return true;
}

bool sl_ptrmap_init(sl_ptrmap *m) { return ptrmap_alloc(m, 1024); }

void sl_ptrmap_fini(sl_ptrmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

size_t sl_ptrmap_find(const sl_ptrmap *m, uint64_t addr)
{
    if (addr == PTR_EMPTY) /* the empty-slot marker is no block's address */
        return SIZE_MAX;
    for (size_t i = ptr_hash(addr, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].addr == addr)
            return i;
        if (m->slots[i].addr == PTR_EMPTY)
            return SIZE_MAX;
    }
}

sl_block *sl_ptrmap_get(const sl_ptrmap *m, uint64_t addr)
{
    size_t i = sl_ptrmap_find(m, addr);
    return i == SIZE_MAX ? NULL : m->slots[i].b;
}

void sl_ptrmap_insert(sl_ptrmap *m, uint64_t addr, sl_block *b)
{
    size_t i = ptr_hash(addr, m->cap);
    while (m->slots[i].addr != PTR_EMPTY)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (sl_ptr_slot){addr, b};
    m->count++;
}

bool sl_ptrmap_reserve(sl_ptrmap *m)
{
    if ((m->count + 1) * 2 > m->cap) {
        sl_ptrmap old = *m;
        if (!ptrmap_alloc(m, old.cap * 2)) {
            *m = old;
            return false;
        }
        for (size_t i = 0; i < old.cap; i++)
            if (old.slots[i].addr != PTR_EMPTY)
                sl_ptrmap_insert(m, old.slots[i].addr, old.slots[i].b);
        free(old.slots);
    }
    return true;
}

bool sl_ptrmap_put(sl_ptrmap *m, uint64_t addr, sl_block *b)
{
    if (!sl_ptrmap_reserve(m))
        return false;
    sl_ptrmap_insert(m, addr, b);
    return true;
}

void sl_ptrmap_del_at(sl_ptrmap *m, size_t i)
{
    size_t mask = m->cap - 1, j = i;
    /* backward-shift deletion keeps probe chains intact without tombstones */
    for (;;) {
        j = (j + 1) & mask;
        if (m->slots[j].addr == PTR_EMPTY)
            break;
        size_t k = ptr_hash(m->slots[j].addr, m->cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (sl_ptr_slot){PTR_EMPTY, NULL};
    m->count--;
}

void sl_ptrmap_del(sl_ptrmap *m, uint64_t addr)
{
    size_t i = sl_ptrmap_find(m, addr);
    if (i != SIZE_MAX)
        sl_ptrmap_del_at(m, i);
}

/* ---- block slab ------------------------------------------------------------------- */

#define SLAB_CHUNK 512

sl_block *sl_block_new(sl_slab *s)
{
    if (!s->free_list) {
        if (s->nchunks == s->chunks_cap) {
            size_t nc = s->chunks_cap ? s->chunks_cap * 2 : 16;
            void **c = realloc(s->chunks, nc * sizeof *c);
            if (!c)
                return NULL;
            s->chunks = c;
            s->chunks_cap = nc;
        }
        sl_block *chunk = aligned_alloc(_Alignof(sl_block), SLAB_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        s->chunks[s->nchunks++] = chunk;
        /* pushed in reverse, so blocks are handed out in address order */
        for (size_t i = SLAB_CHUNK; i-- > 0;) {
            chunk[i].next = s->free_list;
            s->free_list = &chunk[i];
        }
    }
    sl_block *b = s->free_list;
    s->free_list = b->next;
    /* Field by field, not memset: gcc's generic tuning zeroed the block
     * (192 bytes then) with `rep stos`, whose start-up showed in a replay's
     * profile (perf: ~80 % of this function's time).  A new field needs its line
     * here; the assertion below is the reminder. */
    b->addr = b->size = 0;
    b->parent = b->left = b->right = NULL;
    b->red = b->allocated = b->in_free = b->shadow = b->oversize = false;
    b->mapped = true;
    b->event_count = 0;
    b->stream = 0;
    b->prev = b->next = NULL;
    b->seg = NULL;
    b->pool = NULL;
    b->requested = b->gc_count_base = 0;
    b->stack = 0;
    b->nuses = 0;
    b->uses_cap = 1;
    b->use1 = 0;
    return b;
}
#if UINTPTR_MAX == UINT64_MAX
/* (use1 stays the last field, engine.h: a field added before it moves it) */
_Static_assert(offsetof(sl_block, use1) == 120 && sizeof(sl_block) == 128,
               "sl_block changed: sl_block_new sets every field");
#endif

void sl_block_delete(sl_slab *s, sl_block *b)
{
    sl_uses_free(b);
    b->next = s->free_list;
    s->free_list = b;
}

void sl_slab_fini(sl_slab *s)
{
    for (size_t i = 0; i < s->nchunks; i++)
        free(s->chunks[i]);
    free(s->chunks);
    memset(s, 0, sizeof *s);
}
