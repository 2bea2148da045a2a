/* sublet — the free index of each pool (index.h).  Its parts have files of
 * their own: the red-black trees (rbtree.c), the size map (sizemap.c); the
 * engine's other indexes are the pointer map (ptrmap.c) and the block slab
 * (slab.c).
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

#include "base/errmsg.h"
#include "engine/engine.h"
#include "engine/index.h"
#include "engine/rbtree.h"
#include "engine/sizemap.h"

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

/* The first block of the first class after c with blocks, or NULL. */
static sl_block *first_after(const sl_tree *t, unsigned c)
{
    int d = bin_after(t->bins, c);
    return d < 0 ? NULL : sl_rb_first(t->bins->root[d]);
}

/* The last block of the last class before c with blocks (c == NBINS: of all
 * classes), or NULL. */
static sl_block *last_before(const sl_tree *t, unsigned c)
{
    int d = bin_before(t->bins, c);
    return d < 0 ? NULL : sl_rb_last(t->bins->root[d]);
}

/* The whole tree in (size, order, address) order: its first block, and the block
 * after n. */
static sl_block *all_first(const sl_tree *t)
{
    return t->bins->root[0] ? sl_rb_first(t->bins->root[0]) : first_after(t, 0);
}

static sl_block *all_next(const sl_tree *t, sl_block *n)
{
    sl_block *x = sl_rb_next(n);
    return x ? x : first_after(t, bin_of(n->size));
}

sl_block *sl_free_bin_root(const sl_tree *t, uint64_t size)
{
    return t && t->bins ? *bin_root(t, size) : NULL;
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
                sl_smap_add(t, b); /* may leave the map partial, as ever */
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
    sl_size_slot *s = sl_smap_find(t, b->size);
    if (s) {
        if (sl_rb_less(b, s->min)) {
            sl_rb_insert_before(root, s->min, b);
            s->min = b;
        } else {
            sl_rb_insert(root, b);
        }
    } else {
        sl_block *pred = sl_rb_insert(root, b);
        /* with a partial map an absent size may still have lower blocks */
        if (!pred || pred->size != b->size)
            sl_smap_add(t, b);
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
    sl_size_slot *s = sl_smap_find(t, size);
    if (s && s->min == b) {
        if (next == b)
            next = sl_rb_next(b);
        if (next && next->size == size)
            s->min = next;
        else
            sl_smap_del(t, s);
    }
    sl_rb_remove(&t->bins->root[c], b);
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
    sl_block *prev = sl_rb_prev(b), *next = sl_rb_next(b);
    if (nc != oc || (prev && !sl_rb_less(prev, b)) || (next && !sl_rb_less(b, next))) {
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
        sl_size_slot *s = sl_smap_find(t, old_size);
        if (s && s->min == b) {
            if (next && next->size == old_size)
                s->min = next;
            else
                sl_smap_del(t, s);
        }
        /* the new size: b is its lowest block unless its predecessor has it */
        if (!prev || prev->size != ns) {
            s = sl_smap_find(t, ns);
            if (s)
                s->min = b;
            else
                sl_smap_add(t, b);
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
    sl_rb_replace_child(bin_root(t, old->size), old->parent, old, nw);
    if (nw->left)
        nw->left->parent = nw;
    if (nw->right)
        nw->right->parent = nw;
    sl_size_slot *s = sl_smap_find(t, old->size);
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
    sl_size_slot *s = sl_smap_find(t, want);
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
        bool lt = sl_rb_less(n, k);
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
        bool gt = sl_rb_less(k, n);
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
    sl_msg(c->msg, c->cap, "free index: %s at block 0x%llx", what,
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
    if (n->red && (sl_rb_is_red(n->left) || sl_rb_is_red(n->right)))
        return vfail(c, "red block with a red child", n);
    int bl, br;
    if (!verify_node(c, n->left, depth + 1, &bl))
        return false;
    if (!n->in_free || n->allocated || n->stream != c->t->stream || n->pool != c->pool)
        return vfail(c, "block that is not free on this pool and stream", n);
    if (bin_of(n->size) != c->bin)
        return vfail(c, "block in another size class's tree", n);
    if (c->prev && !sl_rb_less(c->prev, n))
        return vfail(c, "out of (size, order, address) order", n);
    if (!c->prev || c->prev->size != n->size) {
        c->distinct++;
        const sl_size_slot *s = sl_smap_find(c->t, n->size);
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
        sl_msg(msg, cap, "free index: a stream tree without its classes");
        return false;
    }
    /* each class in turn: the walk's order check spans them all */
    for (unsigned k = 0; k < NBINS; k++) {
        const sl_block *root = t->bins->root[k];
        bool marked = t->bins->map[k >> 6] >> (k & 63) & 1;
        if (marked != (root != NULL)) {
            sl_msg(msg, cap, "free index: size class %u %s but marked %s", k,
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
            sl_msg(msg, cap, "free index: class bitmap summary wrong at word %u", w);
            return false;
        }
    if (c.count != t->count) {
        sl_msg(msg, cap, "free index count %zu != %zu nodes", t->count, c.count);
        return false;
    }
    if (c.bytes != t->bytes) {
        sl_msg(msg, cap, "free index bytes %llu != %llu recounted",
               (unsigned long long)t->bytes, (unsigned long long)c.bytes);
        return false;
    }
    if (c.sq_hi != t->sq_hi || c.sq_lo != t->sq_lo) {
        sl_msg(msg, cap, "free index sum of squares differs from a recount");
        return false;
    }
    /* every entry was met as the lowest block of its size, and none is extra */
    size_t used = 0;
    for (size_t i = 0; i < t->size_cap; i++)
        if (t->sizes[i].size) {
            used++;
            if (sl_smap_find(t, t->sizes[i].size) != &t->sizes[i]) {
                sl_msg(msg, cap, "size map probe chain broken for size %llu",
                       (unsigned long long)t->sizes[i].size);
                return false;
            }
        }
    if (used != t->nsizes || c.mapped_mins != t->nsizes ||
        (!t->sizes_partial && !t->sizes_off && t->nsizes != c.distinct)) {
        sl_msg(msg, cap, "size map holds %zu entries (%zu counted), tree has %zu sizes, "
               "%zu of them mapped", t->nsizes, used, c.distinct, c.mapped_mins);
        return false;
    }
    if (t->sizes_off && (t->nsizes || t->sizes_partial)) {
        sl_msg(msg, cap, "size map off but holding %zu entries%s", t->nsizes,
               t->sizes_partial ? ", marked partial" : "");
        return false;
    }
    if (t->count == 0 && t->sizes_partial) {
        sl_msg(msg, cap, "empty free tree marked partial");
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
            sl_msg(msg, cap, "stream trees out of order");
            return false;
        }
        if (!verify_tree(p, &p->trees[i], count, msg, cap))
            return false;
    }
    return true;
}

