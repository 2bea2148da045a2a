/* sublet — the free index, the pointer map and the block slab (src/index.c)
 * on their own, against a plain reference model.
 *
 * The reference is a sorted array of (stream, size, addr) keys; every query
 * of the index (best fit, before, after, max, the full walk) is compared with
 * it after every change, and sl_free_verify — which recounts the tree, its
 * links, order, counters and the size map — must pass each time.  Covered:
 * equal sizes (lowest address first; under segment orders, the first
 * segment's blocks first), many streams, removal of arbitrary
 * blocks (roots, inner nodes, the lowest block of a size), best fit at the
 * boundaries, the size map's fallback when it is partial, the map dropped
 * and rebuilt as its lookups stop and start hitting, exact 128-bit sums
 * of squares, keys changed in place (sl_free_rekey, sl_free_replace), and
 * the pointer map's probe chains. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/index.h"
#include "support/harness.h"

/* ---- reference model ------------------------------------------------------------------ */

typedef struct ref {
    sl_block **v; /* sorted by (stream, size, segment order, addr) */
    size_t n, cap;
} ref;

static int key_cmp(const sl_block *x, sublet_stream stream, uint64_t size, uint64_t order,
                   uint64_t addr)
{
    if (x->stream != stream)
        return x->stream < stream ? -1 : 1;
    if (x->size != size)
        return x->size < size ? -1 : 1;
    if (x->seg->order != order)
        return x->seg->order < order ? -1 : 1;
    if (x->addr != addr)
        return x->addr < addr ? -1 : 1;
    return 0;
}

/* First index whose key is >= (stream, size, order, addr). */
static size_t ref_lb(const ref *r, sublet_stream stream, uint64_t size, uint64_t order,
                     uint64_t addr)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (key_cmp(r->v[mid], stream, size, order, addr) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void ref_insert(ref *r, sl_block *b)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->v = realloc(r->v, r->cap * sizeof *r->v);
        assert_non_null(r->v);
    }
    size_t i = ref_lb(r, b->stream, b->size, b->seg->order, b->addr);
    memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
    r->v[i] = b;
    r->n++;
}

static void ref_remove(ref *r, const sl_block *b)
{
    size_t i = ref_lb(r, b->stream, b->size, b->seg->order, b->addr);
    assert_true(i < r->n && r->v[i] == b);
    memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof *r->v);
    r->n--;
}

/* Expected answers, each restricted to one stream. */
static sl_block *ref_lower_bound(const ref *r, sublet_stream s, uint64_t want)
{
    size_t i = ref_lb(r, s, want, 0, 0);
    return i < r->n && r->v[i]->stream == s ? r->v[i] : NULL;
}

static sl_block *ref_after(const ref *r, sublet_stream s, const sl_block *k)
{
    size_t i = ref_lb(r, s, k->size, k->seg->order, k->addr);
    if (i < r->n && key_cmp(r->v[i], s, k->size, k->seg->order, k->addr) == 0)
        i++;
    return i < r->n && r->v[i]->stream == s ? r->v[i] : NULL;
}

static sl_block *ref_before(const ref *r, sublet_stream s, const sl_block *k)
{
    size_t i = ref_lb(r, s, k->size, k->seg->order, k->addr);
    return i > 0 && r->v[i - 1]->stream == s ? r->v[i - 1] : NULL;
}

static sl_block *ref_max(const ref *r, sublet_stream s)
{
    size_t i = ref_lb(r, s + 1, 0, 0, 0); /* streams in the tests stay far below UINT64_MAX */
    return i > 0 && r->v[i - 1]->stream == s ? r->v[i - 1] : NULL;
}

/* ---- fixture -------------------------------------------------------------------------- */

/* The segment of every block of the tests but test_segment_order: order 0,
 * so that equal sizes are ordered by their addresses (releases before 2.14). */
static sl_segment seg_unordered;

typedef struct fx {
    sl_pool pool;
    sl_slab slab;
    ref r;
    uint64_t rng;
} fx;

static uint64_t rnd(fx *f)
{
    uint64_t z = (f->rng += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static fx *fx_new(uint64_t seed)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->pool = (sl_pool){.is_small = false, .kind = SUBLET_POOL_LARGE};
    f->rng = seed;
    return f;
}

static void fx_free(fx *f)
{
    sl_pool_fini(&f->pool);
    sl_slab_fini(&f->slab);
    free(f->r.v);
    free(f);
}

static sl_block *blk(fx *f, sublet_stream stream, uint64_t size, uint64_t addr)
{
    sl_block *b = sl_block_new(&f->slab);
    assert_non_null(b);
    b->stream = stream;
    b->size = size;
    b->addr = addr;
    b->pool = &f->pool;
    b->seg = &seg_unordered;
    return b;
}

static void verify(fx *f)
{
    size_t n = 0;
    char msg[256] = "";
    if (!sl_free_verify(&f->pool, &n, msg, sizeof msg))
        fail_msg("sl_free_verify: %s", msg);
    assert_int_equal(n, f->r.n);
}

static void put(fx *f, sl_block *b)
{
    assert_non_null(sl_pool_tree(&f->pool, b->stream, true));
    sl_free_insert(&f->pool, b);
    assert_true(b->in_free);
    ref_insert(&f->r, b);
    verify(f);
}

static void take(fx *f, sl_block *b)
{
    sl_free_remove(&f->pool, b);
    assert_false(b->in_free);
    ref_remove(&f->r, b);
    verify(f);
}

/* Every query at the key (size, seg's order, addr) and at its neighbours. */
static void check_key(fx *f, sublet_stream s, uint64_t size, sl_segment *seg, uint64_t addr)
{
    sl_block k = {.size = size, .addr = addr, .seg = seg};
    assert_ptr_equal(sl_free_lower_bound(&f->pool, s, size), ref_lower_bound(&f->r, s, size));
    assert_ptr_equal(sl_free_after(&f->pool, s, &k), ref_after(&f->r, s, &k));
    assert_ptr_equal(sl_free_before(&f->pool, s, &k), ref_before(&f->r, s, &k));
}

static void check_at(fx *f, sublet_stream s, uint64_t size, uint64_t addr)
{
    check_key(f, s, size, &seg_unordered, addr);
}

static void check_all(fx *f, const sublet_stream *streams, size_t ns)
{
    size_t n = 0;
    bool oom = true;
    sl_block **all = sl_free_collect(&f->pool, &n, &oom);
    assert_false(oom);
    assert_int_equal(n, f->r.n);
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(all[i], f->r.v[i]);
    free(all);
    for (size_t k = 0; k < ns; k++) {
        sublet_stream s = streams[k];
        assert_ptr_equal(sl_free_max(&f->pool, s), ref_max(&f->r, s));
        sl_tree *t = sl_pool_tree(&f->pool, s, false);
        size_t count = 0;
        uint64_t bytes = 0;
        double sq = 0.0;
        for (size_t i = 0; i < f->r.n; i++)
            if (f->r.v[i]->stream == s) {
                count++;
                bytes += f->r.v[i]->size;
                sq += (double)f->r.v[i]->size * (double)f->r.v[i]->size;
            }
        if (!t) {
            assert_int_equal(count, 0);
            continue;
        }
        assert_int_equal(t->count, count);
        assert_int_equal(t->bytes, bytes);
        assert_true(sl_tree_squares(t) == sq || (sq > 0 && (sl_tree_squares(t) - sq) / sq < 1e-12 &&
                                                 (sq - sl_tree_squares(t)) / sq < 1e-12));
    }
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_empty(void **state)
{
    (void)state;
    fx *f = fx_new(1);
    assert_null(sl_free_lower_bound(&f->pool, 0, 512));
    assert_null(sl_free_max(&f->pool, 0));
    sl_block k = {.size = 512, .seg = &seg_unordered};
    assert_null(sl_free_before(&f->pool, 0, &k));
    assert_null(sl_free_after(&f->pool, 0, &k));
    size_t n = 7;
    bool oom = true;
    assert_null(sl_free_collect(&f->pool, &n, &oom));
    assert_int_equal(n, 0);
    assert_false(oom);
    assert_non_null(sl_pool_tree(&f->pool, 5, true)); /* an empty tree is fine too */
    assert_null(sl_free_lower_bound(&f->pool, 5, 0));
    assert_null(sl_free_max(&f->pool, 5));
    verify(f);
    fx_free(f);
}

/* Many blocks of one size: best fit is always the lowest address. */
static void test_equal_sizes(void **state)
{
    (void)state;
    fx *f = fx_new(2);
    enum { N = 300 };
    sl_block *b[N];
    for (int i = 0; i < N; i++) /* addresses inserted in a scrambled order */
        b[i] = blk(f, 0, 4096, (uint64_t)((i * 7919) % N) * 8192 + 65536);
    for (int i = 0; i < N; i++) {
        put(f, b[i]);
        check_at(f, 0, 4096, b[i]->addr);
    }
    sl_block *lo = ref_lower_bound(&f->r, 0, 4096);
    assert_int_equal(lo->addr, 65536);
    assert_ptr_equal(sl_free_lower_bound(&f->pool, 0, 1), lo);
    assert_ptr_equal(sl_free_lower_bound(&f->pool, 0, 4096), lo);
    assert_null(sl_free_lower_bound(&f->pool, 0, 4097));
    /* take the lowest repeatedly: the next lowest follows */
    for (int i = 0; i < N / 2; i++) {
        sl_block *x = sl_free_lower_bound(&f->pool, 0, 4096);
        assert_int_equal(x->addr, 65536 + (uint64_t)i * 8192);
        take(f, x);
    }
    /* put one back below everything, then one in the middle */
    sl_block *x = ref_lower_bound(&f->r, 0, 4096);
    sl_block *low = blk(f, 0, 4096, 512);
    put(f, low);
    assert_ptr_equal(sl_free_lower_bound(&f->pool, 0, 4096), low);
    take(f, low);
    assert_ptr_equal(sl_free_lower_bound(&f->pool, 0, 4096), x);
    sublet_stream s0 = 0;
    check_all(f, &s0, 1);
    while (f->r.n)
        take(f, f->r.v[rnd(f) % f->r.n]);
    check_all(f, &s0, 1);
    fx_free(f);
}

/* The size classes' edges (index.c, "the bins"): sizes below the first
 * class (under 512 bytes), at each boundary of a class and of an octave, and
 * above the last (2^49 and up, to 2^56 - 512: the sums of squares stay
 * within their 128 bits), every query at each of them and
 * one byte around, as the blocks come and go; lookups that must cross empty
 * classes to find the next or previous block. */
static void test_class_edges(void **state)
{
    (void)state;
    fx *f = fx_new(21);
    uint64_t sizes[] = {1, 511, 512, 527, 528, 543, 544, 1023, 1024, 1056, 1088,
                        (UINT64_C(1) << 20) - 1, UINT64_C(1) << 20,
                        (UINT64_C(1) << 20) + (UINT64_C(1) << 15) - 1,
                        (UINT64_C(1) << 20) + (UINT64_C(1) << 15),
                        (UINT64_C(1) << 20) + (UINT64_C(1) << 16),
                        (UINT64_C(1) << 49) - 1, UINT64_C(1) << 49, UINT64_C(1) << 55,
                        (UINT64_C(1) << 56) - 512};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    sl_block *b[NS][2];
    sublet_stream s0 = 0;
    for (size_t i = 0; i < NS; i++)
        for (int k = 0; k < 2; k++) {
            b[i][k] = blk(f, 0, sizes[i], (UINT64_C(1) << 40) + (2 * i + (size_t)k) * 4096);
            put(f, b[i][k]);
        }
    for (size_t round = 0; round < 3; round++) {
        for (size_t i = 0; i < NS; i++) {
            uint64_t w[] = {sizes[i] - 1, sizes[i], sizes[i] + 1};
            for (int k = 0; k < 3; k++)
                for (int a = 0; a < 3; a++)
                    check_at(f, 0, w[k], (UINT64_C(1) << 40) + (2 * i + (size_t)a) * 4096 - 1);
        }
        check_all(f, &s0, 1);
        /* empty every other class, then every class but the ends */
        for (size_t i = round % 2; i < NS; i += 2)
            for (int k = 0; k < 2; k++)
                if (b[i][k]->in_free)
                    take(f, b[i][k]);
        if (round == 1)
            for (size_t i = 1; i + 1 < NS; i++)
                for (int k = 0; k < 2; k++)
                    if (b[i][k]->in_free)
                        take(f, b[i][k]);
    }
    for (size_t i = 0; i < NS; i++) /* and back */
        for (int k = 0; k < 2; k++)
            if (!b[i][k]->in_free)
                put(f, b[i][k]);
    check_all(f, &s0, 1);
    for (size_t i = 0; i < NS; i++)
        check_at(f, 0, sizes[i], 0);
    fx_free(f);
}

/* Best fit at the edges: exact sizes, one byte over and under, nothing big
 * enough, and want = 0. */
/* PyTorch 2.14 orders equal sizes by the creation of their segments, then by
 * address (sl_segment.order): the older segment's block is the best fit
 * even at a higher address, before/after step through (size, order,
 * address), and the size map names the first block in that order. */
static void test_segment_order(void **state)
{
    (void)state;
    fx *f = fx_new(12);
    /* made in the order new, old, middle at rising addresses: the oldest
     * segment sits in the middle */
    sl_segment seg[3] = {{.order = 3}, {.order = 1}, {.order = 2}};
    enum { PER = 40 };
    sl_block *b[3 * PER];
    for (int i = 0; i < 3 * PER; i++) {
        int k = (i * 37) % (3 * PER); /* scrambled */
        int s = k / PER;
        uint64_t size = k % 4 == 0 ? 8192 : 4096;
        b[i] = blk(f, 0, size, (uint64_t)s * (1 << 24) + (uint64_t)(k % PER) * 16384 + 65536);
        b[i]->seg = &seg[s];
    }
    for (int i = 0; i < 3 * PER; i++) {
        put(f, b[i]);
        for (int j = 0; j <= i; j++)
            check_key(f, 0, b[j]->size, b[j]->seg, b[j]->addr);
        check_all(f, (sublet_stream[]){0}, 1);
    }
    sl_block *first = sl_free_lower_bound(&f->pool, 0, 4096);
    assert_ptr_equal(first->seg, &seg[1]);
    assert_int_equal(first->addr, (uint64_t)1 << 24 | 65536 | 16384);
    /* a key between the segments' orders */
    sl_segment between = {.order = 2};
    check_key(f, 0, 4096, &between, 0);
    check_key(f, 0, 8192, &between, UINT64_MAX);
    /* take the best fit repeatedly: segment 1's blocks, then 2's, then 0's */
    uint64_t last_order = 0;
    for (int i = 0; i < 3 * PER; i++) {
        sl_block *x = sl_free_lower_bound(&f->pool, 0, 4096);
        assert_ptr_equal(x, ref_lower_bound(&f->r, 0, 4096));
        if (x->size == 4096) {
            assert_true(x->seg->order >= last_order);
            last_order = x->seg->order;
        }
        take(f, x);
    }
    fx_free(f);
}

static void test_lower_bound_boundaries(void **state)
{
    (void)state;
    fx *f = fx_new(3);
    uint64_t sizes[] = {512, 1024, 1536, 4096, 1048576, 2097152, UINT64_C(1) << 40};
    size_t ns = sizeof sizes / sizeof sizes[0];
    for (size_t i = 0; i < ns; i++)
        for (uint64_t k = 0; k < 3; k++)
            put(f, blk(f, 0, sizes[i], (UINT64_C(1) << 44) + (3 * i + k) * (UINT64_C(1) << 41)));
    for (size_t i = 0; i < ns; i++) {
        uint64_t w[] = {sizes[i] - 1, sizes[i], sizes[i] + 1};
        for (int k = 0; k < 3; k++)
            check_at(f, 0, w[k], 0);
        sl_block *x = sl_free_lower_bound(&f->pool, 0, sizes[i]);
        assert_int_equal(x->size, sizes[i]);
        assert_ptr_equal(x, ref_lower_bound(&f->r, 0, sizes[i]));
    }
    assert_int_equal(sl_free_lower_bound(&f->pool, 0, 0)->size, 512);
    assert_null(sl_free_lower_bound(&f->pool, 0, (UINT64_C(1) << 40) + 1));
    assert_null(sl_free_lower_bound(&f->pool, 0, UINT64_MAX));
    assert_null(sl_free_lower_bound(&f->pool, 1, 0)); /* no tree for stream 1 */
    /* once a size is gone its lookups go to the next size up */
    while ((ref_lower_bound(&f->r, 0, 1024))->size == 1024)
        take(f, ref_lower_bound(&f->r, 0, 1024));
    assert_int_equal(sl_free_lower_bound(&f->pool, 0, 1024)->size, 1536);
    assert_int_equal(sl_free_lower_bound(&f->pool, 0, 600)->size, 1536);
    sublet_stream s0 = 0;
    check_all(f, &s0, 1);
    fx_free(f);
}

/* Random inserts and removals of arbitrary blocks on several streams,
 * compared with the reference after every change. */
static void run_random(fx *f, int ops, uint64_t nsizes, const sublet_stream *streams, size_t nst)
{
    size_t cap = 4096, nfree = 0;
    sl_block **pool_of_blocks = calloc(cap, sizeof *pool_of_blocks);
    assert_non_null(pool_of_blocks);
    uint64_t next_addr = 1 << 20;
    for (int op = 0; op < ops; op++) {
        uint64_t r = rnd(f);
        if (f->r.n == 0 || r % 100 < 55) {
            sublet_stream s = streams[r % nst];
            uint64_t size = 512 * (1 + (rnd(f) % nsizes));
            /* addresses unique; sometimes below what is there already */
            uint64_t addr = (r >> 20) % 4 == 0 ? (next_addr += 512) : (next_addr += 512) << 8;
            sl_block *b = nfree ? pool_of_blocks[--nfree] : sl_block_new(&f->slab);
            assert_non_null(b);
            *b = (sl_block){.stream = s, .size = size, .addr = addr, .pool = &f->pool,
                            .seg = &seg_unordered, .mapped = true, .uses_cap = 1};
            put(f, b);
        } else {
            sl_block *b = f->r.v[rnd(f) % f->r.n];
            take(f, b);
            if (nfree < cap)
                pool_of_blocks[nfree++] = b;
        }
        if (op % 7 == 0) {
            sublet_stream s = streams[rnd(f) % nst];
            uint64_t want = rnd(f) % (512 * (nsizes + 2));
            check_at(f, s, want, rnd(f) % (next_addr << 8));
            if (f->r.n) {
                const sl_block *x = f->r.v[rnd(f) % f->r.n];
                check_at(f, x->stream, x->size, x->addr);
                check_at(f, x->stream, x->size + 1, x->addr);
            }
        }
        if (op % 101 == 0)
            check_all(f, streams, nst);
    }
    check_all(f, streams, nst);
    while (f->r.n) /* drain in random order */
        take(f, f->r.v[rnd(f) % f->r.n]);
    check_all(f, streams, nst);
    for (size_t i = 0; i < f->pool.ntrees; i++) { /* the size maps shrank back */
        assert_int_equal(f->pool.trees[i].nsizes, 0);
        assert_true(f->pool.trees[i].size_cap <= 64);
    }
    free(pool_of_blocks);
}

static void test_random_one_stream(void **state)
{
    (void)state;
    sublet_stream s[] = {0};
    int ops = H_UNDER_TSAN ? 2000 : 20000;
    for (uint64_t seed = 10; seed < 13; seed++) {
        fx *f = fx_new(seed);
        run_random(f, ops, seed == 10 ? 3 : seed == 11 ? 40 : 4000, s, 1);
        fx_free(f);
    }
}

static void test_random_many_streams(void **state)
{
    (void)state;
    sublet_stream s[] = {0, 7, 3, 0x7f0000001234ull, 9, 1, 42, 5};
    fx *f = fx_new(20);
    run_random(f, H_UNDER_TSAN ? 2000 : 20000, 16, s, sizeof s / sizeof s[0]);
    /* the trees stay sorted by stream */
    for (size_t i = 1; i < f->pool.ntrees; i++)
        assert_true(f->pool.trees[i - 1].stream < f->pool.trees[i].stream);
    fx_free(f);
}

/* Removing the root, inner nodes with two children, and the lowest block of
 * a size (its successor of the same size takes over in the size map, or the
 * size leaves it). */
static void test_remove_shapes(void **state)
{
    (void)state;
    fx *f = fx_new(4);
    enum { N = 127 };
    sl_block *b[N];
    /* sizes of one size class (1 MiB + less than 32 KiB): one tree of 127 */
    for (int i = 0; i < N; i++) {
        b[i] = blk(f, 0, (1 << 20) + 512 * (uint64_t)(i / 4), 4096 * (uint64_t)(N - i));
        put(f, b[i]);
    }
    sl_tree *t = sl_pool_tree(&f->pool, 0, false);
    for (int k = 0; k < 40; k++) {
        sl_block *root = sl_free_bin_root(t, 1 << 20);
        assert_non_null(root);
        take(f, root);
        put(f, root); /* back in, now a leaf */
        root = sl_free_bin_root(t, 1 << 20);
        sl_block *inner = root->left && root->left->right ? root->left : root;
        take(f, inner);
        assert_ptr_equal(sl_free_lower_bound(&f->pool, 0, inner->size),
                         ref_lower_bound(&f->r, 0, inner->size));
        put(f, inner);
    }
    for (int i = 0; i < N; i += 3) { /* lowest of its size, repeatedly */
        sl_block *lo = sl_free_lower_bound(&f->pool, 0, b[i]->size);
        take(f, lo);
        check_at(f, 0, lo->size, lo->addr);
        put(f, lo);
    }
    sublet_stream s0 = 0;
    check_all(f, &s0, 1);
    fx_free(f);
}

/* A size map that could not grow: lookups of the sizes it lacks take the
 * descent and stay exact, and the tree heals as it empties. */
static void test_partial_size_map(void **state)
{
    (void)state;
    fx *f = fx_new(5);
    /* unique addresses: i -> i * 7919 mod a prime is one to one */
    uint64_t k = 0;
    for (int i = 0; i < 200; i++, k++)
        put(f, blk(f, 0, 512 * (uint64_t)(1 + rnd(f) % 9), 8192 * ((k * 7919 + 13) % 100003)));
    sl_tree *t = sl_pool_tree(&f->pool, 0, false);
    /* what smap_add does when calloc fails, for every size at once */
    memset(t->sizes, 0, t->size_cap * sizeof *t->sizes);
    t->nsizes = 0;
    t->sizes_partial = true;
    verify(f);
    sublet_stream s0 = 0;
    check_all(f, &s0, 1);
    for (uint64_t w = 0; w < 512 * 11; w += 256)
        check_at(f, 0, w, 0);
    /* new lowest blocks of a size are mapped again; others are not */
    put(f, blk(f, 0, 512 * 4, 1));
    put(f, blk(f, 0, 512 * 50, 1 << 30)); /* a size of its own */
    assert_non_null(t->nsizes ? t->sizes : NULL);
    for (int i = 0; i < 400; i++) {
        if (rnd(f) % 2 && f->r.n)
            take(f, f->r.v[rnd(f) % f->r.n]);
        else
            put(f, blk(f, 0, 512 * (uint64_t)(1 + rnd(f) % 9), 8192 * ((k++ * 7919 + 13) % 100003)));
        check_at(f, 0, 512 * (1 + rnd(f) % 10), 0);
    }
    while (f->r.n)
        take(f, f->r.v[rnd(f) % f->r.n]);
    assert_false(t->sizes_partial);
    assert_int_equal(t->nsizes, 0);
    fx_free(f);
}

/* The size map is dropped for a tree whose best-fit lookups rarely find
 * their exact size, and rebuilt once they do again; every answer, the
 * verification and the reference agree throughout, with inserts and
 * removals in both states. */
static void test_size_map_off_and_on(void **state)
{
    (void)state;
    fx *f = fx_new(9);
    uint64_t k = 0;
    for (int i = 0; i < 300; i++, k++) /* 300 blocks, sizes 512 * (2 + 3j): all distinct */
        put(f, blk(f, 0, 512 * (2 + 3 * (uint64_t)i), 8192 * ((k * 7919 + 13) % 100003)));
    sl_tree *t = sl_pool_tree(&f->pool, 0, false);
    assert_false(t->sizes_off);
    assert_int_equal(t->nsizes, 300);
    /* lookups between the sizes: none is exact */
    for (int i = 0; i < 1100; i++) {
        check_at(f, 0, 512 * (3 + 3 * (rnd(f) % 300)), 0);
        if (i % 50 == 0) { /* a removal and an insert of a new distinct size, either state */
            take(f, f->r.v[rnd(f) % f->r.n]);
            put(f, blk(f, 0, 512 * (2 + 3 * (300 + (uint64_t)i)), 8192 * ((k++ * 7919 + 13) % 100003)));
        }
    }
    assert_true(t->sizes_off);
    assert_int_equal(t->nsizes, 0);
    assert_null(t->sizes);
    sublet_stream s0 = 0;
    check_all(f, &s0, 1);
    /* equal sizes below a mapped lowest block while off: plain inserts */
    for (int i = 0; i < 40; i++)
        put(f, blk(f, 0, f->r.v[rnd(f) % f->r.n]->size, 8192 * ((k++ * 7919 + 13) % 100003)));
    assert_true(t->sizes_off);
    /* lookups of sizes present: the map comes back, complete */
    for (int i = 0; i < 1100; i++)
        check_at(f, 0, f->r.v[rnd(f) % f->r.n]->size, 0);
    assert_false(t->sizes_off);
    assert_false(t->sizes_partial);
    size_t distinct = 0;
    for (size_t i = 0; i < f->r.n; i++)
        distinct += i == 0 || f->r.v[i]->size != f->r.v[i - 1]->size;
    assert_int_equal(t->nsizes, distinct);
    verify(f);
    check_all(f, &s0, 1);
    while (f->r.n)
        take(f, f->r.v[rnd(f) % f->r.n]);
    fx_free(f);

    /* a tree larger than 1,024 blocks is judged after as many lookups as
     * it has blocks (its rebuild's walk amortised over them) */
    f = fx_new(10);
    k = 0;
    for (int i = 0; i < 1500; i++, k++)
        put(f, blk(f, 0, 512 * (2 + 3 * (uint64_t)i), 8192 * ((k * 7919 + 13) % 100003)));
    t = sl_pool_tree(&f->pool, 0, false);
    for (int i = 0; i < 1499; i++)
        check_at(f, 0, 512 * (3 + 3 * (rnd(f) % 1500)), 0);
    assert_false(t->sizes_off);
    assert_int_equal(t->nsizes, 1500);
    check_at(f, 0, 512 * 3, 0);
    assert_true(t->sizes_off);
    verify(f);
    while (f->r.n)
        take(f, f->r.v[rnd(f) % f->r.n]);
    fx_free(f);
}

/* sl_free_rekey and sl_free_replace, the split and merge of a cached pair:
 * a block in the index gets a new key (small moves that stay between its
 * neighbours are made in place, the others reinsert), or a block out of the
 * index takes a free block's node and then its own key; after each change the
 * index equals the reference and verifies (tree, order, size map, counters). */
static void rekey_to(fx *f, sl_block *b, uint64_t size, uint64_t addr)
{
    ref_remove(&f->r, b);
    uint64_t os = b->size;
    b->size = size;
    b->addr = addr;
    sl_free_rekey(&f->pool, b, os);
    assert_true(b->in_free);
    ref_insert(&f->r, b);
    verify(f);
}

static void test_rekey_replace(void **state)
{
    (void)state;
    sublet_stream s0 = 0;
    for (uint64_t seed = 30; seed < 35; seed++) {
        fx *f = fx_new(seed);
        uint64_t nsizes = seed == 30 ? 3 : seed == 31 ? 12 : 300;
        uint64_t k = 0;
        /* addresses are unique: each block owns the window [k*2^20, (k+1)*2^20) */
        for (int i = 0; i < 300; i++, k++)
            put(f, blk(f, 0, 512 * (1 + rnd(f) % nsizes), k << 20));
        sl_tree *t = sl_pool_tree(&f->pool, 0, false);
        if (seed == 34) { /* the same with the size map dropped: lookups that never hit */
            for (int i = 0; i < 1024; i++)
                check_at(f, 0, 512 * (1 + rnd(f) % nsizes) + 1, 0);
            assert_true(t->sizes_off);
        }
        int ops = H_UNDER_TSAN ? 1000 : 6000;
        for (int op = 0; op < ops; op++) {
            if (seed == 34 && op == ops / 2) /* < 1024 lookups since: still off */
                assert_true(t->sizes_off);
            sl_block *b = f->r.v[rnd(f) % f->r.n];
            uint64_t window = b->addr & ~(uint64_t)((1 << 20) - 1);
            uint64_t r = rnd(f) % 4;
            if (r == 0) {
                /* a split: the remainder above what was taken keeps the node */
                if (b->size <= 512)
                    continue;
                uint64_t cut = 512 * (1 + rnd(f) % (b->size / 512 - 1));
                rekey_to(f, b, b->size - cut, b->addr + cut);
            } else if (r == 1) {
                /* a merge: a block out of the index takes b's node, then
                 * covers b and more (below or above it in the window) */
                sl_block *nw = blk(f, 0, 512, 0);
                uint64_t os = b->size, oa = b->addr;
                ref_remove(&f->r, b);
                sl_free_replace(&f->pool, b, nw);
                assert_true(nw->in_free);
                assert_false(b->in_free);
                uint64_t grow = 512 * (rnd(f) % 4);
                nw->addr = rnd(f) % 2 && oa - window >= grow ? oa - grow : oa;
                nw->size = os + grow;
                sl_free_rekey(&f->pool, nw, os);
                ref_insert(&f->r, nw);
                verify(f);
                sl_block_delete(&f->slab, b);
            } else {
                /* an arbitrary new size inside the block's window */
                uint64_t size = 512 * (1 + rnd(f) % nsizes);
                uint64_t addr = window + 512 * (rnd(f) % ((1 << 20) / 512 - 512));
                rekey_to(f, b, size, addr);
            }
            if (op % 13 == 0) {
                const sl_block *x = f->r.v[rnd(f) % f->r.n];
                check_at(f, 0, x->size, x->addr);
                check_at(f, 0, x->size + 1, x->addr);
                check_at(f, 0, 512 * (1 + rnd(f) % (nsizes + 1)), 0);
            }
            if (op % 257 == 0)
                check_all(f, &s0, 1);
        }
        check_all(f, &s0, 1);
        while (f->r.n)
            take(f, f->r.v[rnd(f) % f->r.n]);
        assert_int_equal(t->nsizes, 0);
        fx_free(f);
    }
}

/* Sums of squares stay exact however large the blocks are. */
static void test_squares_exact(void **state)
{
    (void)state;
    fx *f = fx_new(6);
    uint64_t big = UINT64_C(1) << 59;
    sl_block *x = blk(f, 0, big, 0), *y = blk(f, 0, 512, big), *z = blk(f, 0, big + 512, 2 * big);
    put(f, x);
    put(f, y);
    put(f, z);
    sl_tree *t = sl_pool_tree(&f->pool, 0, false);
    /* 2^118 + 512^2 + (2^59 + 512)^2 = 2^119 + 2^69 + 2^19, exactly, in 128 bits */
    assert_int_equal(t->sq_hi, (UINT64_C(1) << 55) + 32);
    assert_int_equal(t->sq_lo, UINT64_C(1) << 19);
    take(f, x);
    take(f, z);
    assert_int_equal(t->sq_hi, 0);
    assert_int_equal(t->sq_lo, UINT64_C(512) * 512);
    assert_true(sl_tree_squares(t) == 262144.0);
    take(f, y);
    assert_int_equal(t->sq_hi | t->sq_lo, 0);
    fx_free(f);
}

/* ---- pointer map and slab ----------------------------------------------------------------- */

static void test_ptrmap(void **state)
{
    (void)state;
    sl_ptrmap m;
    assert_true(sl_ptrmap_init(&m));
    enum { N = 5000 };
    static sl_block blocks[N];
    static bool in[N];
    memset(in, 0, sizeof in);
    uint64_t rng = 99;
    /* addresses that collide: multiples of 512 from a few clusters */
    for (int op = 0; op < 40000; op++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)((rng >> 33) % N);
        uint64_t addr = ((uint64_t)(i % 5) << 40) + (uint64_t)i * 512;
        if (!in[i]) {
            assert_true(sl_ptrmap_put(&m, addr, &blocks[i]));
            in[i] = true;
        } else if ((rng >> 20) % 2) {
            sl_ptrmap_del(&m, addr);
            in[i] = false;
        } else {
            size_t slot = sl_ptrmap_find(&m, addr);
            assert_true(slot != SIZE_MAX);
            assert_ptr_equal(m.slots[slot].b, &blocks[i]);
            sl_ptrmap_del_at(&m, slot);
            in[i] = false;
        }
        if (op % 997 == 0) {
            size_t count = 0;
            for (int k = 0; k < N; k++) {
                uint64_t a = ((uint64_t)(k % 5) << 40) + (uint64_t)k * 512;
                assert_ptr_equal(sl_ptrmap_get(&m, a), in[k] ? &blocks[k] : NULL);
                count += in[k];
            }
            assert_int_equal(m.count, count);
        }
    }
    assert_null(sl_ptrmap_get(&m, UINT64_MAX));
    assert_true(sl_ptrmap_find(&m, UINT64_MAX) == SIZE_MAX);
    sl_ptrmap_del(&m, 12345); /* absent: nothing happens */
    sl_ptrmap_fini(&m);
}

static void test_slab(void **state)
{
    (void)state;
    sl_slab s = {0};
    enum { N = 1500 };
    sl_block *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = sl_block_new(&s);
        assert_non_null(b[i]);
        assert_true(b[i]->mapped && b[i]->nuses == 0 && b[i]->uses_cap == 1 && b[i]->use1 == 0);
        assert_null(b[i]->parent);
        assert_false(b[i]->in_free);
        b[i]->size = 512;
    }
    for (int i = 0; i < N; i += 2)
        sl_block_delete(&s, b[i]);
    for (int i = 0; i < N; i += 2) { /* reused, and cleared */
        sl_block *x = sl_block_new(&s);
        assert_int_equal(x->size, 0);
    }
    sl_slab_fini(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_equal_sizes),
        cmocka_unit_test(test_segment_order),
        cmocka_unit_test(test_lower_bound_boundaries),
        cmocka_unit_test(test_class_edges),
        cmocka_unit_test(test_random_one_stream),
        cmocka_unit_test(test_random_many_streams),
        cmocka_unit_test(test_remove_shapes),
        cmocka_unit_test(test_partial_size_map),
        cmocka_unit_test(test_size_map_off_and_on),
        cmocka_unit_test(test_rekey_replace),
        cmocka_unit_test(test_squares_exact),
        cmocka_unit_test(test_ptrmap),
        cmocka_unit_test(test_slab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
