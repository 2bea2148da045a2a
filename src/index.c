/* sublet — the engine's indexes: the free index (one AVL tree per stream in
 * each pool, ordered by (size, address) as PyTorch's std::set of blocks is
 * ordered by (stream, size, address)), the pointer map of allocated blocks
 * (open addressing), and the block slab.  Every hot-path operation here is
 * O(log n) or O(1): none walks the live blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* ---- AVL tree keyed by (size, addr) --------------------------------------- */

static inline int key_cmp(uint64_t s1, uint64_t a1, uint64_t s2, uint64_t a2)
{
    if (s1 != s2)
        return s1 < s2 ? -1 : 1;
    if (a1 != a2)
        return a1 < a2 ? -1 : 1;
    return 0;
}

static inline int32_t h(const sl_block *n) { return n ? n->height : 0; }

static inline void fix_height(sl_block *n)
{
    int32_t hl = h(n->left), hr = h(n->right);
    n->height = (hl > hr ? hl : hr) + 1;
}

static sl_block *rot_right(sl_block *n)
{
    sl_block *l = n->left;
    n->left = l->right;
    l->right = n;
    fix_height(n);
    fix_height(l);
    return l;
}

static sl_block *rot_left(sl_block *n)
{
    sl_block *r = n->right;
    n->right = r->left;
    r->left = n;
    fix_height(n);
    fix_height(r);
    return r;
}

static sl_block *balance(sl_block *n)
{
    fix_height(n);
    int32_t bf = h(n->left) - h(n->right);
    if (bf > 1) {
        if (h(n->left->left) < h(n->left->right))
            n->left = rot_left(n->left);
        return rot_right(n);
    }
    if (bf < -1) {
        if (h(n->right->right) < h(n->right->left))
            n->right = rot_right(n->right);
        return rot_left(n);
    }
    return n;
}

static sl_block *avl_insert(sl_block *root, sl_block *b)
{
    if (!root) {
        b->left = b->right = NULL;
        b->height = 1;
        return b;
    }
    /* a subtree whose height did not change leaves every ancestor balanced:
     * stop rebalancing there (the common case) */
    if (key_cmp(b->size, b->addr, root->size, root->addr) < 0) {
        int32_t was = h(root->left);
        root->left = avl_insert(root->left, b);
        if (h(root->left) == was)
            return root;
    } else {
        int32_t was = h(root->right);
        root->right = avl_insert(root->right, b);
        if (h(root->right) == was)
            return root;
    }
    return balance(root);
}

static sl_block *avl_remove_min(sl_block *n, sl_block **min_out)
{
    if (!n->left) {
        *min_out = n;
        return n->right;
    }
    n->left = avl_remove_min(n->left, min_out);
    return balance(n);
}

static sl_block *avl_remove(sl_block *root, const sl_block *b)
{
    if (!root)
        return NULL;
    int c = key_cmp(b->size, b->addr, root->size, root->addr);
    if (c < 0) {
        int32_t was = h(root->left);
        root->left = avl_remove(root->left, b);
        if (h(root->left) == was)
            return root;
    } else if (c > 0) {
        int32_t was = h(root->right);
        root->right = avl_remove(root->right, b);
        if (h(root->right) == was)
            return root;
    } else {
        sl_block *l = root->left, *r = root->right;
        if (!r)
            return l;
        sl_block *m;
        sl_block *rest = avl_remove_min(r, &m);
        m->right = rest;
        m->left = l;
        return balance(m);
    }
    return balance(root);
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
    memmove(&p->trees[lo + 1], &p->trees[lo], (p->ntrees - lo) * sizeof *p->trees);
    p->trees[lo] = (sl_tree){.stream = stream};
    p->ntrees++;
    p->last_tree = lo;
    return &p->trees[lo];
}

void sl_free_insert(sl_pool *p, sl_block *b)
{
    /* The tree for the stream exists: the engine creates it (and handles the
     * out-of-memory case) before any state changes; see sl_pool_tree. */
    sl_tree *t = sl_pool_tree(p, b->stream, false);
    t->root = avl_insert(t->root, b);
    t->count++;
    t->bytes += b->size;
    t->squares += (double)b->size * (double)b->size;
    b->in_free = true;
    b->gc_count_base = p->clock;
}

void sl_free_remove(sl_pool *p, sl_block *b)
{
    sl_tree *t = sl_pool_tree(p, b->stream, false);
    t->root = avl_remove(t->root, b);
    t->count--;
    t->bytes -= b->size;
    t->squares -= (double)b->size * (double)b->size;
    if (t->count == 0)
        t->squares = 0.0; /* no drift left behind by rounding */
    b->in_free = false;
    b->left = b->right = NULL;
}

sl_block *sl_free_lower_bound(sl_pool *p, sublet_stream stream, uint64_t want)
{
    sl_tree *t = sl_pool_tree(p, stream, false);
    if (!t)
        return NULL;
    sl_block *n = t->root, *best = NULL;
    while (n) {
        if (n->size >= want) { /* (size, addr) >= (want, 0) */
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

sl_block *sl_free_before(sl_pool *p, sublet_stream stream, uint64_t size, uint64_t addr)
{
    sl_tree *t = sl_pool_tree(p, stream, false);
    if (!t)
        return NULL;
    sl_block *n = t->root, *best = NULL;
    while (n) {
        if (key_cmp(n->size, n->addr, size, addr) < 0) {
            best = n;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best;
}

sl_block *sl_free_max(sl_pool *p, sublet_stream stream)
{
    sl_tree *t = sl_pool_tree(p, stream, false);
    sl_block *n = t ? t->root : NULL;
    while (n && n->right)
        n = n->right;
    return n;
}

static void collect(sl_block *n, sl_block **out, size_t *i)
{
    while (n) { /* in order; recursion depth bounded by the AVL height */
        collect(n->left, out, i);
        out[(*i)++] = n;
        n = n->right;
    }
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
        collect(p->trees[i].root, out, n);
    return out;
}

sl_block *sl_free_after(sl_pool *p, sublet_stream stream, uint64_t size, uint64_t addr)
{
    sl_tree *t = sl_pool_tree(p, stream, false);
    if (!t)
        return NULL;
    sl_block *n = t->root, *best = NULL;
    while (n) {
        if (key_cmp(n->size, n->addr, size, addr) > 0) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

void sl_pool_fini(sl_pool *p)
{
    free(p->unmapped);
    p->unmapped = NULL;
    p->nunmapped = p->unmapped_cap = 0;
    free(p->trees);
    p->trees = NULL;
    p->ntrees = p->trees_cap = 0;
}

static bool verify_node(const sl_block *n, const sl_block *lo, const sl_block *hi,
                        sublet_stream stream, size_t *count, char *msg, size_t cap)
{
    if (!n)
        return true;
    (*count)++;
    if (!n->in_free || n->allocated || n->stream != stream) {
        snprintf(msg, cap, "free index holds block 0x%llx that is not free on its stream",
                 (unsigned long long)n->addr);
        return false;
    }
    if ((lo && key_cmp(lo->size, lo->addr, n->size, n->addr) >= 0) ||
        (hi && key_cmp(n->size, n->addr, hi->size, hi->addr) >= 0)) {
        snprintf(msg, cap, "free index out of order at block 0x%llx", (unsigned long long)n->addr);
        return false;
    }
    int32_t hl = h(n->left), hr = h(n->right);
    if (n->height != (hl > hr ? hl : hr) + 1 || hl - hr > 1 || hr - hl > 1) {
        snprintf(msg, cap, "free index unbalanced at block 0x%llx", (unsigned long long)n->addr);
        return false;
    }
    return verify_node(n->left, lo, n, stream, count, msg, cap) &&
           verify_node(n->right, n, hi, stream, count, msg, cap);
}

static void sum_bytes(const sl_block *n, uint64_t *out)
{
    for (; n; n = n->right) {
        sum_bytes(n->left, out);
        *out += n->size;
    }
}

bool sl_free_verify(sl_pool *p, size_t *count, char *msg, size_t cap)
{
    *count = 0;
    for (size_t i = 0; i < p->ntrees; i++) {
        size_t c = 0;
        if (i && p->trees[i - 1].stream >= p->trees[i].stream) {
            snprintf(msg, cap, "stream trees out of order");
            return false;
        }
        if (!verify_node(p->trees[i].root, NULL, NULL, p->trees[i].stream, &c, msg, cap))
            return false;
        if (c != p->trees[i].count) {
            snprintf(msg, cap, "free index count %zu != %zu nodes", p->trees[i].count, c);
            return false;
        }
        uint64_t bytes = 0;
        sum_bytes(p->trees[i].root, &bytes);
        if (bytes != p->trees[i].bytes) {
            snprintf(msg, cap, "free index bytes %llu != %llu recounted",
                     (unsigned long long)p->trees[i].bytes, (unsigned long long)bytes);
            return false;
        }
        *count += c;
    }
    return true;
}

/* ---- pointer map ---------------------------------------------------------------- */

#define PTR_EMPTY UINT64_MAX

static inline size_t ptr_hash(uint64_t addr, size_t cap)
{
    uint64_t x = (addr >> 9) * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

static bool ptrmap_alloc(sl_ptrmap *m, size_t cap)
{
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        return false;
    }
    for (size_t i = 0; i < cap; i++)
        m->keys[i] = PTR_EMPTY;
    m->cap = cap;
    m->count = 0;
    return true;
}

bool sl_ptrmap_init(sl_ptrmap *m) { return ptrmap_alloc(m, 1024); }

void sl_ptrmap_fini(sl_ptrmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

sl_block *sl_ptrmap_get(const sl_ptrmap *m, uint64_t addr)
{
    if (addr == PTR_EMPTY) /* the empty-slot marker is no block's address */
        return NULL;
    for (size_t i = ptr_hash(addr, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == addr)
            return m->vals[i];
        if (m->keys[i] == PTR_EMPTY)
            return NULL;
    }
}

static void ptrmap_raw_put(sl_ptrmap *m, uint64_t addr, sl_block *b)
{
    size_t i = ptr_hash(addr, m->cap);
    while (m->keys[i] != PTR_EMPTY)
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = addr;
    m->vals[i] = b;
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
            if (old.keys[i] != PTR_EMPTY)
                ptrmap_raw_put(m, old.keys[i], old.vals[i]);
        free(old.keys);
        free(old.vals);
    }
    return true;
}

bool sl_ptrmap_put(sl_ptrmap *m, uint64_t addr, sl_block *b)
{
    if (!sl_ptrmap_reserve(m))
        return false;
    ptrmap_raw_put(m, addr, b);
    return true;
}

void sl_ptrmap_del(sl_ptrmap *m, uint64_t addr)
{
    if (addr == PTR_EMPTY)
        return;
    size_t mask = m->cap - 1, i = ptr_hash(addr, m->cap);
    while (m->keys[i] != addr) {
        if (m->keys[i] == PTR_EMPTY)
            return;
        i = (i + 1) & mask;
    }
    /* backward-shift deletion keeps probe chains intact without tombstones */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (m->keys[j] == PTR_EMPTY)
            break;
        size_t k = ptr_hash(m->keys[j], m->cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = PTR_EMPTY;
    m->count--;
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
        sl_block *chunk = malloc(SLAB_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        s->chunks[s->nchunks++] = chunk;
        for (size_t i = 0; i < SLAB_CHUNK; i++) {
            chunk[i].next = s->free_list;
            s->free_list = &chunk[i];
        }
    }
    sl_block *b = s->free_list;
    s->free_list = b->next;
    memset(b, 0, sizeof *b);
    b->mapped = true;
    b->uses = b->uses_inline;
    b->uses_cap = 2;
    return b;
}

void sl_block_delete(sl_slab *s, sl_block *b)
{
    if (b->uses != b->uses_inline)
        free(b->uses);
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
