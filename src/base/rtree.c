/* sublet — disjoint address ranges in a B+tree augmented for first fit
 * (see rtree.h): the sim's address space, the engine's segment index.
 *
 * Leaves hold up to LEAF_CAP ranges sorted by address, the gap before each
 * (gap[i], measured from the end of range i-1, or from `prev_end`, the end
 * of the previous leaf's last range, for i = 0) and are linked in address
 * order.  Inner nodes hold up to INNER_CAP children, each child's largest
 * gap, and routing keys: child j receives the addresses in
 * [key[j], key[j+1]) (key[0] is not used: child 0 takes everything below
 * key[1]).  A key stays valid when ranges are removed, so only a split
 * writes one.  Every node knows its parent and its largest gap, which
 * changes are carried up (push_up) until a node's largest gap is unchanged.
 *
 * Insert: one descent, a shift inside the leaf; a full leaf splits in two
 * halves first (and a full parent with it).  The nodes a split may need are
 * taken before anything changes, so an insert either succeeds or changes
 * nothing.  Remove: one descent, a shift; an empty node leaves its parent,
 * and a node under a quarter full merges with a neighbour (same parent)
 * when the two fit in three quarters of one.  A root with one child hands
 * over to it.  All leaves stay at the same depth.
 *
 * Gaps only ever split in two (insert: both parts are no larger) or join
 * (remove: the join is no smaller than either part), so a leaf's largest
 * gap is usually updated in O(1); a rescan of LEAF_CAP or INNER_CAP
 * contiguous values is needed only when the largest one shrank. */
#include "base/rtree.h"

#include <stdlib.h>
#include <string.h>

#define LEAF_CAP 32
#define INNER_CAP 32
#define LEAF_MIN (LEAF_CAP / 4) /* below it a node tries to merge */
#define INNER_MIN (INNER_CAP / 4)
#define LEAF_MERGE (LEAF_CAP * 3 / 4) /* a merged node holds at most this */
#define INNER_MERGE (INNER_CAP * 3 / 4)
#define SLAB_MIN 8     /* nodes in the first slab; each next one doubles */
#define SLAB_MAX 1024

typedef struct sl_rtree_node rnode;

struct sl_rtree_node {
    rnode *parent; /* NULL: the root (a free node: the next free one) */
    uint32_t n;    /* ranges (leaf) or children (inner) */
    uint16_t leaf;
    uint16_t slot; /* its index among its parent's children */
    uint64_t max_gap; /* the largest gap in this subtree */
    union {
        struct {
            rnode *prev, *next;
            uint64_t prev_end; /* end of the range before r[0]; 0: none */
            uint64_t gap[LEAF_CAP];
            sl_rtree_entry r[LEAF_CAP];
        } l;
        struct {
            uint64_t key[INNER_CAP];
            uint64_t gap[INNER_CAP]; /* child[j]->max_gap */
            rnode *child[INNER_CAP];
        } in;
    } u;
};

static inline uint64_t range_end(const sl_rtree_entry *r) { return r->addr + r->size; }

/* x rounded up to a multiple of a (a power of two, 0 counting as 1); 0
 * when that wraps. */
static inline int align_up(uint64_t x, uint64_t a, uint64_t *out)
{
    if (a <= 1) {
        *out = x;
        return 1;
    }
    if (x > UINT64_MAX - (a - 1))
        return 0;
    *out = (x + (a - 1)) & ~(a - 1);
    return 1;
}

/* The first candidate at `align` after a range ending at pred_end. */
static inline int gap_start(const sl_rtree *t, uint64_t pred_end, uint64_t align, uint64_t *c)
{
    return align_up(pred_end > t->floor ? pred_end : t->floor, align, c);
}

/* The gap before a range at addr whose predecessor ends at pred_end. */
static inline uint64_t gap_of(const sl_rtree *t, uint64_t pred_end, uint64_t addr)
{
    uint64_t c;
    if (!t->gaps || !gap_start(t, pred_end, t->align, &c) || c >= addr)
        return 0;
    return addr - c;
}

static uint64_t max_in(const uint64_t *g, uint32_t n)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        m = g[i] > m ? g[i] : m;
    return m;
}

/* Entry `old` of g[0..n) became g: the new maximum, from the old one `max`. */
static inline uint64_t new_max(const uint64_t *g_arr, uint32_t n, uint64_t max, uint64_t old,
                               uint64_t g)
{
    if (g >= max)
        return g;
    if (old < max)
        return max;
    return max_in(g_arr, n); /* the maximum shrank */
}

/* End of the range before r[i] of leaf x. */
static inline uint64_t end_before(const rnode *x, uint32_t i)
{
    return i ? range_end(&x->u.l.r[i - 1]) : x->u.l.prev_end;
}

/* ---- nodes --------------------------------------------------------------------------- */

typedef struct slab {
    struct slab *next;
    rnode nodes[]; /* C99 flexible array member */
} slab;

/* Room for k more nodes: free ones, else a new slab (twice the last). */
static int reserve_nodes(sl_rtree *t, size_t k)
{
    if (t->nspare >= k)
        return 1;
    size_t have = t->nodes + t->nspare, m = have < SLAB_MIN ? SLAB_MIN : have;
    if (m > SLAB_MAX)
        m = SLAB_MAX;
    if (m < k - t->nspare)
        m = k - t->nspare;
    slab *sb = malloc(sizeof *sb + m * sizeof sb->nodes[0]);
    if (!sb)
        return 0;
    sb->next = t->slabs;
    t->slabs = sb;
    for (size_t i = m; i-- > 0;) {
        sb->nodes[i].parent = t->spare;
        t->spare = &sb->nodes[i];
    }
    t->nspare += m;
    return 1;
}

static rnode *node_take(sl_rtree *t, int leaf)
{
    rnode *x = t->spare; /* reserved */
    t->spare = x->parent;
    t->nspare--;
    t->nodes++;
    x->parent = NULL;
    x->n = 0;
    x->leaf = (uint16_t)leaf;
    x->slot = 0;
    x->max_gap = 0;
    if (leaf) {
        x->u.l.prev = x->u.l.next = NULL;
        x->u.l.prev_end = 0;
    }
    return x;
}

static void node_give(sl_rtree *t, rnode *x)
{
    t->nodes--;
    x->parent = t->spare;
    t->spare = x;
    t->nspare++;
}

/* Levels of the tree (0 when empty). */
static size_t depth(const sl_rtree *t)
{
    size_t d = 0;
    for (const rnode *x = t->root; x; x = x->leaf ? NULL : x->u.in.child[0])
        d++;
    return d;
}

int sl_rtree_reserve(sl_rtree *t)
{
    /* the most an insert takes: a split of every level and a new root */
    return reserve_nodes(t, depth(t) + 1);
}

static inline uint32_t slot_of(const rnode *x) { return x->slot; }

/* Children [from, p->n) of p have moved (or arrived): tell them. */
static void adopt_children(rnode *p, uint32_t from)
{
    for (uint32_t j = from; j < p->n; j++) {
        p->u.in.child[j]->parent = p;
        p->u.in.child[j]->slot = (uint16_t)j;
    }
}

/* x's largest gap changed: carry it up while it changes anything. */
static void push_up(rnode *x)
{
    for (rnode *p = x->parent; p; x = p, p = p->parent) {
        uint32_t j = slot_of(x);
        uint64_t old = p->u.in.gap[j], g = x->max_gap;
        if (old == g)
            return;
        p->u.in.gap[j] = g;
        uint64_t m = new_max(p->u.in.gap, p->n, p->max_gap, old, g);
        if (m == p->max_gap)
            return;
        p->max_gap = m;
    }
}

/* Leaf x's gap[i] becomes g; carried up. */
static void leaf_set_gap(rnode *x, uint32_t i, uint64_t g)
{
    uint64_t old = x->u.l.gap[i];
    if (old == g)
        return;
    x->u.l.gap[i] = g;
    uint64_t m = new_max(x->u.l.gap, x->n, x->max_gap, old, g);
    if (m != x->max_gap) {
        x->max_gap = m;
        push_up(x);
    }
}

/* Child j of p whose keys route addr: the last j with key[j] <= addr (0
 * when none).  (A binary search with branches: speculation runs ahead of
 * the loads; a branch-free search or a count was slower on the replays.) */
static inline uint32_t route(const rnode *p, uint64_t addr)
{
    uint32_t lo = 1, hi = p->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p->u.in.key[mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

static rnode *leaf_for(const sl_rtree *t, uint64_t addr)
{
    /* at or after the last leaf's first range: the last leaf, whatever the
     * keys above say (they route there too); ranges added in address order
     * and removed from the top (a teardown) take no descent */
    const rnode *last = t->last;
    if (last->n && addr >= last->u.l.r[0].addr)
        return t->last;
    rnode *x = t->root;
    while (!x->leaf)
        x = x->u.in.child[route(x, addr)];
    return x;
}

/* The number of ranges of leaf x starting below addr (or_equal: at or
 * below it). */
static inline uint32_t leaf_rank(const rnode *x, uint64_t addr, int or_equal)
{
    uint32_t lo = 0, hi = x->n;
    if (hi == 0)
        return 0;
    /* at or past the last entry (appends, teardowns from the top): no search */
    uint64_t top = x->u.l.r[hi - 1].addr;
    if (top < addr || (or_equal && top == addr))
        return hi;
    if (top == addr)
        return hi - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        uint64_t k = x->u.l.r[mid].addr;
        if (k < addr || (or_equal && k == addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- insert -------------------------------------------------------------------------- */

static void insert_child(sl_rtree *t, rnode *left, rnode *right, uint64_t key);

/* Split inner node p (full) in two halves; the right half joins p's parent. */
static void split_inner(sl_rtree *t, rnode *p)
{
    rnode *q = node_take(t, 0);
    uint32_t h = INNER_CAP / 2, m = p->n - h;
    memcpy(q->u.in.key, &p->u.in.key[h], m * sizeof p->u.in.key[0]);
    memcpy(q->u.in.gap, &p->u.in.gap[h], m * sizeof p->u.in.gap[0]);
    memcpy(q->u.in.child, &p->u.in.child[h], m * sizeof p->u.in.child[0]);
    q->n = m;
    p->n = h;
    adopt_children(q, 0);
    q->max_gap = max_in(q->u.in.gap, q->n);
    p->max_gap = max_in(p->u.in.gap, p->n);
    insert_child(t, p, q, q->u.in.key[0]);
}

/* Hang `right` (new) just after `left` under left's parent, routing the
 * addresses from key on to it; left's largest gap may have changed too. */
static void insert_child(sl_rtree *t, rnode *left, rnode *right, uint64_t key)
{
    rnode *p = left->parent;
    if (!p) { /* left was the root */
        p = node_take(t, 0);
        p->n = 2;
        p->u.in.child[0] = left;
        p->u.in.child[1] = right;
        p->u.in.key[0] = 0;
        p->u.in.key[1] = key;
        p->u.in.gap[0] = left->max_gap;
        p->u.in.gap[1] = right->max_gap;
        p->max_gap = max_in(p->u.in.gap, 2);
        adopt_children(p, 0);
        t->root = p;
        return;
    }
    if (p->n == INNER_CAP) {
        split_inner(t, p);
        p = left->parent; /* either half */
    }
    uint32_t j = slot_of(left) + 1, m = p->n - j;
    memmove(&p->u.in.key[j + 1], &p->u.in.key[j], m * sizeof p->u.in.key[0]);
    memmove(&p->u.in.gap[j + 1], &p->u.in.gap[j], m * sizeof p->u.in.gap[0]);
    memmove(&p->u.in.child[j + 1], &p->u.in.child[j], m * sizeof p->u.in.child[0]);
    p->u.in.key[j] = key;
    p->u.in.child[j] = right;
    p->u.in.gap[j] = right->max_gap;
    p->u.in.gap[j - 1] = left->max_gap;
    p->n++;
    adopt_children(p, j);
    uint64_t mx = max_in(p->u.in.gap, p->n);
    if (mx != p->max_gap) {
        p->max_gap = mx;
        push_up(p);
    }
}

/* Split leaf x (full) in two halves; returns the right one. */
static rnode *split_leaf(sl_rtree *t, rnode *x)
{
    rnode *r = node_take(t, 1);
    uint32_t h = LEAF_CAP / 2, m = x->n - h;
    memcpy(r->u.l.r, &x->u.l.r[h], m * sizeof x->u.l.r[0]);
    memcpy(r->u.l.gap, &x->u.l.gap[h], m * sizeof x->u.l.gap[0]);
    r->n = m;
    x->n = h;
    r->u.l.prev_end = range_end(&x->u.l.r[h - 1]);
    r->u.l.prev = x;
    r->u.l.next = x->u.l.next;
    if (x->u.l.next)
        x->u.l.next->u.l.prev = r;
    else
        t->last = r;
    x->u.l.next = r;
    r->max_gap = max_in(r->u.l.gap, r->n);
    x->max_gap = max_in(x->u.l.gap, x->n);
    insert_child(t, x, r, r->u.l.r[0].addr);
    return r;
}

sublet_status sl_rtree_insert(sl_rtree *t, uint64_t addr, uint64_t size, uintptr_t tag)
{
    if (size == 0 || addr + size < addr)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (!t->root) {
        if (!reserve_nodes(t, 1))
            return SUBLET_ERR_NO_MEMORY;
        t->root = t->first = t->last = node_take(t, 1);
    }
    rnode *x = leaf_for(t, addr);
    uint32_t i = leaf_rank(x, addr, 0);
    uint64_t pred_end = end_before(x, i);
    if (pred_end > addr)
        return SUBLET_ERR_INVALID_ARGUMENT; /* overlaps the range before */
    const sl_rtree_entry *succ = i < x->n ? &x->u.l.r[i] : x->u.l.next ? &x->u.l.next->u.l.r[0] : NULL;
    if (succ && addr + size > succ->addr)
        return SUBLET_ERR_INVALID_ARGUMENT; /* overlaps the range after */
    if (x->n == LEAF_CAP) {
        /* nodes for the split: this leaf, each full ancestor, a new root */
        size_t k = 1;
        const rnode *p = x->parent;
        while (p && p->n == INNER_CAP) {
            k++;
            p = p->parent;
        }
        if (!p)
            k++;
        if (!reserve_nodes(t, k))
            return SUBLET_ERR_NO_MEMORY;
        rnode *r = split_leaf(t, x);
        if (i > x->n) {
            i -= x->n;
            x = r;
        }
    }
    uint32_t m = x->n - i;
    memmove(&x->u.l.r[i + 1], &x->u.l.r[i], m * sizeof x->u.l.r[0]);
    memmove(&x->u.l.gap[i + 1], &x->u.l.gap[i], m * sizeof x->u.l.gap[0]);
    x->u.l.r[i] = (sl_rtree_entry){.addr = addr, .size = size, .tag = tag};
    x->n++;
    t->count++;
    uint64_t g = gap_of(t, pred_end, addr);
    if (i + 1 < x->n) {
        /* the gap before the next range splits in two, neither larger */
        uint64_t old = x->u.l.gap[i + 1], g2 = gap_of(t, addr + size, x->u.l.r[i + 1].addr);
        x->u.l.gap[i] = g;
        x->u.l.gap[i + 1] = g2;
        if (old >= x->max_gap && g < old && g2 < old) { /* the largest shrank */
            x->max_gap = max_in(x->u.l.gap, x->n);
            push_up(x);
        }
    } else {
        x->u.l.gap[i] = g;
        if (g > x->max_gap) {
            x->max_gap = g;
            push_up(x);
        }
        rnode *nx = x->u.l.next;
        if (nx) {
            nx->u.l.prev_end = addr + size;
            leaf_set_gap(nx, 0, gap_of(t, addr + size, nx->u.l.r[0].addr));
        }
    }
    return SUBLET_OK;
}

/* ---- remove -------------------------------------------------------------------------- */

static void node_shrunk(sl_rtree *t, rnode *x);

/* Remove child j of inner node p (the child is freed by the caller). */
static void drop_child(sl_rtree *t, rnode *p, uint32_t j)
{
    uint32_t m = p->n - j - 1;
    uint64_t old = p->u.in.gap[j];
    memmove(&p->u.in.key[j], &p->u.in.key[j + 1], m * sizeof p->u.in.key[0]);
    memmove(&p->u.in.gap[j], &p->u.in.gap[j + 1], m * sizeof p->u.in.gap[0]);
    memmove(&p->u.in.child[j], &p->u.in.child[j + 1], m * sizeof p->u.in.child[0]);
    p->n--;
    adopt_children(p, j);
    if (old >= p->max_gap && old > 0) { /* the largest may be gone */
        uint64_t mx = max_in(p->u.in.gap, p->n);
        if (mx != p->max_gap) {
            p->max_gap = mx;
            push_up(p);
        }
    }
    node_shrunk(t, p);
}

/* Remove node x (empty) from the tree. */
static void unhang(sl_rtree *t, rnode *x)
{
    rnode *p = x->parent;
    if (x->leaf) {
        rnode *pv = x->u.l.prev, *nx = x->u.l.next;
        if (pv)
            pv->u.l.next = nx;
        else
            t->first = nx;
        if (nx)
            nx->u.l.prev = pv;
        else
            t->last = pv;
    }
    if (!p) {
        t->root = NULL;
        node_give(t, x);
        return;
    }
    uint32_t j = slot_of(x);
    node_give(t, x);
    drop_child(t, p, j);
}

/* Append b (the right neighbour of a under the same parent, child jb) to a. */
static void merge(sl_rtree *t, rnode *a, rnode *b, uint32_t jb)
{
    rnode *p = a->parent;
    if (a->leaf) {
        memcpy(&a->u.l.r[a->n], b->u.l.r, b->n * sizeof b->u.l.r[0]);
        memcpy(&a->u.l.gap[a->n], b->u.l.gap, b->n * sizeof b->u.l.gap[0]);
        a->u.l.next = b->u.l.next;
        if (b->u.l.next)
            b->u.l.next->u.l.prev = a;
        else
            t->last = a;
    } else {
        memcpy(&a->u.in.key[a->n], b->u.in.key, b->n * sizeof b->u.in.key[0]);
        a->u.in.key[a->n] = p->u.in.key[jb]; /* b's own routing key */
        memcpy(&a->u.in.gap[a->n], b->u.in.gap, b->n * sizeof b->u.in.gap[0]);
        memcpy(&a->u.in.child[a->n], b->u.in.child, b->n * sizeof b->u.in.child[0]);
    }
    uint32_t from = a->n;
    a->n += b->n;
    if (!a->leaf)
        adopt_children(a, from);
    if (b->max_gap > a->max_gap)
        a->max_gap = b->max_gap;
    p->u.in.gap[jb - 1] = a->max_gap; /* p's largest gap is unchanged */
    node_give(t, b);
    drop_child(t, p, jb);
}

/* x lost an entry: leave the tree when it has none, merge it with a
 * neighbour when it has become small, or hand the root over to its only
 * child. */
static void node_shrunk(sl_rtree *t, rnode *x)
{
    if (x->n == 0) {
        unhang(t, x);
        return;
    }
    rnode *p = x->parent;
    if (!p) {
        if (!x->leaf && x->n == 1) {
            rnode *c = x->u.in.child[0];
            c->parent = NULL;
            c->slot = 0;
            t->root = c;
            node_give(t, x);
        }
        return;
    }
    uint32_t lim = x->leaf ? LEAF_MIN : INNER_MIN, fit = x->leaf ? LEAF_MERGE : INNER_MERGE;
    if (x->n >= lim)
        return;
    uint32_t j = slot_of(x);
    if (j > 0 && p->u.in.child[j - 1]->n + x->n <= fit)
        merge(t, p->u.in.child[j - 1], x, j);
    else if (j + 1 < p->n && x->n + p->u.in.child[j + 1]->n <= fit)
        merge(t, x, p->u.in.child[j + 1], j + 1);
}

int sl_rtree_remove(sl_rtree *t, uint64_t addr, uint64_t size, uintptr_t tag)
{
    if (!t->root)
        return 0;
    rnode *x = leaf_for(t, addr);
    uint32_t i = leaf_rank(x, addr, 0);
    if (i >= x->n || x->u.l.r[i].addr != addr || x->u.l.r[i].size != size ||
        x->u.l.r[i].tag != tag)
        return 0;
    uint64_t pred_end = end_before(x, i), old = x->u.l.gap[i];
    uint32_t m = x->n - i - 1;
    memmove(&x->u.l.r[i], &x->u.l.r[i + 1], m * sizeof x->u.l.r[0]);
    memmove(&x->u.l.gap[i], &x->u.l.gap[i + 1], m * sizeof x->u.l.gap[0]);
    x->n--;
    t->count--;
    if (i < x->n) {
        /* the gaps before and after the range join: no smaller than either */
        uint64_t g = gap_of(t, pred_end, x->u.l.r[i].addr);
        x->u.l.gap[i] = g;
        if (g > x->max_gap) {
            x->max_gap = g;
            push_up(x);
        }
    } else {
        if (old >= x->max_gap && old > 0) { /* the largest may be gone */
            uint64_t mx = max_in(x->u.l.gap, x->n);
            if (mx != x->max_gap) {
                x->max_gap = mx;
                push_up(x);
            }
        }
        rnode *nx = x->u.l.next;
        if (nx) {
            nx->u.l.prev_end = pred_end;
            leaf_set_gap(nx, 0, gap_of(t, pred_end, nx->u.l.r[0].addr));
        }
    }
    node_shrunk(t, x);
    return 1;
}

/* ---- the set and its lookups --------------------------------------------------------- */

void sl_rtree_init(sl_rtree *t, uint64_t floor, uint64_t align)
{
    memset(t, 0, sizeof *t);
    t->floor = floor;
    t->align = align;
    t->gaps = 1;
}

void sl_rtree_fini(sl_rtree *t)
{
    for (slab *sb = t->slabs; sb;) {
        slab *next = sb->next;
        free(sb);
        sb = next;
    }
    uint64_t floor = t->floor, align = t->align;
    int gaps = t->gaps;
    memset(t, 0, sizeof *t);
    t->floor = floor;
    t->align = align;
    t->gaps = gaps;
}

size_t sl_rtree_count(const sl_rtree *t) { return t->count; }

const sl_rtree_entry *sl_rtree_find(const sl_rtree *t, uint64_t addr)
{
    if (!t->root)
        return NULL;
    const rnode *x = leaf_for(t, addr);
    uint32_t i = leaf_rank(x, addr, 0);
    return i < x->n && x->u.l.r[i].addr == addr ? &x->u.l.r[i] : NULL;
}

/* The range with the greatest addr below `addr` (or_equal: at or below). */
static const sl_rtree_entry *floor_range(const sl_rtree *t, uint64_t addr, int or_equal)
{
    if (!t->root)
        return NULL;
    const rnode *x = leaf_for(t, addr);
    uint32_t i = leaf_rank(x, addr, or_equal);
    if (i > 0)
        return &x->u.l.r[i - 1];
    /* every range of the leaves before x lies below x's routing key */
    const rnode *pv = x->u.l.prev;
    return pv ? &pv->u.l.r[pv->n - 1] : NULL;
}

const sl_rtree_entry *sl_rtree_containing(const sl_rtree *t, uint64_t addr)
{
    const sl_rtree_entry *r = floor_range(t, addr, 1);
    return r && range_end(r) > addr ? r : NULL;
}

const sl_rtree_entry *sl_rtree_ceil(const sl_rtree *t, uint64_t addr)
{
    if (!t->root)
        return NULL;
    const rnode *x = leaf_for(t, addr);
    uint32_t i = leaf_rank(x, addr, 0);
    if (i < x->n)
        return &x->u.l.r[i];
    const rnode *nx = x->u.l.next;
    return nx ? &nx->u.l.r[0] : NULL;
}

int sl_rtree_overlaps(const sl_rtree *t, uint64_t addr, uint64_t size)
{
    /* ranges are disjoint, so their ends are sorted too: only the last range
     * starting before addr+size can reach into [addr, addr+size) */
    const sl_rtree_entry *r = floor_range(t, addr + size, 0);
    return r && range_end(r) > addr;
}

void sl_rtree_walk(const sl_rtree *t, void (*fn)(void *user, const sl_rtree_entry *e),
                   void *user)
{
    for (const rnode *x = t->first; x; x = x->u.l.next)
        for (uint32_t i = 0; i < x->n; i++)
            fn(user, &x->u.l.r[i]);
}

/* ---- first fit --------------------------------------------------------------------- */

/* The lowest fit at `align` in the gaps of x's subtree. */
static int fit_in(const sl_rtree *t, const rnode *x, uint64_t size, uint64_t align,
                  uint64_t *out)
{
    if (!x->leaf) {
        for (uint32_t j = 0; j < x->n; j++)
            if (x->u.in.gap[j] >= size && fit_in(t, x->u.in.child[j], size, align, out))
                return 1; /* at the base alignment the first such child holds it */
        return 0;
    }
    for (uint32_t i = 0; i < x->n; i++) {
        uint64_t c, a = x->u.l.r[i].addr;
        if (x->u.l.gap[i] >= size && gap_start(t, end_before(x, i), align, &c) && c < a &&
            a - c >= size) {
            *out = c;
            return 1;
        }
    }
    return 0;
}

uint64_t sl_rtree_first_fit(const sl_rtree *t, uint64_t size, uint64_t align)
{
    if (size == 0 || !t->gaps)
        return 0;
    if (align < t->align)
        align = t->align;
    uint64_t c;
    if (t->root && t->root->max_gap >= size && fit_in(t, t->root, size, align, &c))
        return c;
    /* after the last range */
    uint64_t last_end = t->last ? range_end(&t->last->u.l.r[t->last->n - 1]) : 0;
    if (!gap_start(t, last_end, align, &c) || c + size < c)
        return 0;
    return c;
}

/* ---- verification ------------------------------------------------------------------ */

typedef struct vstate {
    const rnode *prev_leaf;
    uint64_t prev_end;
    size_t ranges, nodes;
    int leaf_depth;
} vstate;

/* x's subtree: addresses in [lo, hi) (has_hi 0: no upper bound). */
static int verify_at(const sl_rtree *t, const rnode *x, const rnode *parent, uint64_t lo,
                     uint64_t hi, int has_hi, int depth, vstate *v)
{
    if (x->parent != parent || x->n == 0 || ++v->nodes > t->nodes ||
        (parent && (x->slot >= parent->n || parent->u.in.child[x->slot] != x)))
        return -1;
    if (x->leaf) {
        if (x->n > LEAF_CAP || (v->leaf_depth >= 0 && v->leaf_depth != depth))
            return -1;
        v->leaf_depth = depth;
        if (x->u.l.prev != v->prev_leaf || x->u.l.prev_end != v->prev_end ||
            (!v->prev_leaf && t->first != x))
            return -1;
        uint64_t mx = 0;
        for (uint32_t i = 0; i < x->n; i++) {
            const sl_rtree_entry *r = &x->u.l.r[i];
            if (r->size == 0 || range_end(r) < r->addr || r->addr < v->prev_end ||
                r->addr < lo || (has_hi && r->addr >= hi))
                return -1;
            if (x->u.l.gap[i] != gap_of(t, v->prev_end, r->addr))
                return -1;
            mx = x->u.l.gap[i] > mx ? x->u.l.gap[i] : mx;
            v->prev_end = range_end(r);
            v->ranges++;
        }
        if (x->max_gap != mx)
            return -1;
        v->prev_leaf = x;
        return 0;
    }
    if (x->n > INNER_CAP || (!parent && x->n < 2))
        return -1;
    for (uint32_t j = 0; j < x->n; j++) {
        uint64_t clo = j ? x->u.in.key[j] : lo;
        if (j && (x->u.in.key[j] < lo || (has_hi && x->u.in.key[j] >= hi) ||
                  (j > 1 && x->u.in.key[j] <= x->u.in.key[j - 1])))
            return -1;
        int chas = j + 1 < x->n ? 1 : has_hi;
        uint64_t chi = j + 1 < x->n ? x->u.in.key[j + 1] : hi;
        const rnode *c = x->u.in.child[j];
        if (!c || x->u.in.gap[j] != c->max_gap ||
            verify_at(t, c, x, clo, chi, chas, depth + 1, v) != 0)
            return -1;
    }
    return x->max_gap == max_in(x->u.in.gap, x->n) ? 0 : -1;
}

int sl_rtree_verify(const sl_rtree *t)
{
    size_t nspare = 0;
    for (const rnode *x = t->spare; x && nspare <= t->nspare; x = x->parent)
        nspare++;
    if (nspare != t->nspare)
        return -1;
    if (!t->root)
        return t->count == 0 && t->nodes == 0 && !t->first && !t->last ? 0 : -1;
    vstate v = {.leaf_depth = -1};
    if (verify_at(t, t->root, NULL, 0, 0, 0, 0, &v) != 0)
        return -1;
    if (v.prev_leaf != t->last || t->last->u.l.next || v.ranges != t->count || v.nodes != t->nodes)
        return -1;
    return 0;
}
