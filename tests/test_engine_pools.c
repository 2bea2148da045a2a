/* sublet — engine tests: private pools (CUDA graphs' pools and MemPools,
 * docs/rules.md §2.3, §3.5, §4.5; sublet/pool.h).
 *
 * Ports of test_graph_memory_stats_and_use_result_after_destroy_graph,
 * test_graph_two_successive, test_graph_capture_oom and the allocator side
 * of TestMemPool (with_allocator, no_split, use_on_oom, nested,
 * ctx_multithread, empty_cache inside use_mem_pool) (docs/rules.md §10), plus
 * capture-time frees with stream uses and misuse.  A graph capture on
 * stream s is sublet_pool_begin_allocate(id, STREAM, s) ...  end_allocate;
 * deleting the graph is sublet_pool_release; use_mem_pool is begin with the
 * THREAD filter, then end and release; a MemPool's destruction is release
 * followed by sublet_pool_empty_cache.  sublet_check() runs after every
 * allocator operation (support/harness.c) and checks each pool's index,
 * counts and statistics. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/pool.h"
#include "support/harness.h"

#define SIM_BIG (80 * GiB)

/* The tests registered again under expandable_segments:True and policy:stitch compose their
 * settings with vconf: those whose assertions do not depend on native segments' sizes and
 * counts (test_graph_memory_stats, test_graph_capture_oom and test_mempool_with_allocator
 * count native segments; test_mempool_ctx_multithread's 20 MiB page is not stitch's). */
static const char *variant = "";

static const char *vconf(const char *base)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s%s%s", base, base[0] && variant[0] ? "," : "", variant);
    return buf;
}

static int use_native(void **state)
{
    (void)state;
    variant = "";
    return 0;
}

static int use_expandable(void **state)
{
    (void)state;
    variant = "expandable_segments:True";
    return 0;
}

static int use_stitch(void **state)
{
    (void)state;
    variant = "policy:stitch";
    return 0;
}

static sublet_pool_id graph_id(sublet_allocator *a)
{
    sublet_pool_id id;
    assert_int_equal(sublet_pool_handle(a, SUBLET_POOL_ID_GRAPH, &id), SUBLET_OK);
    return id;
}

static void begin_capture(sublet_allocator *a, sublet_pool_id id, sublet_stream s)
{
    assert_int_equal(sublet_pool_begin_allocate(a, id, SUBLET_POOL_FILTER_STREAM, s), SUBLET_OK);
    CHECK(a);
}

static void end_capture(sublet_allocator *a, sublet_pool_id id)
{
    assert_int_equal(sublet_pool_end_allocate(a, id), SUBLET_OK);
    CHECK(a);
}

static void release(sublet_allocator *a, sublet_pool_id id)
{
    assert_int_equal(sublet_pool_release(a, id), SUBLET_OK);
    CHECK(a);
}

static sublet_pool_info info(sublet_allocator *a, sublet_pool_id id)
{
    sublet_pool_info i;
    assert_int_equal(sublet_pool_info_read(a, id, &i), SUBLET_OK);
    return i;
}

static int64_t pool_stat(sublet_allocator *a, sublet_pool_id id, const char *key)
{
    sublet_stats s;
    assert_int_equal(sublet_pool_stats_read(a, id, &s), SUBLET_OK);
    int64_t v = 0;
    assert_int_equal(sublet_stats_lookup(&s, key, &v), 0);
    return v;
}

static const char *oom_text(sublet_allocator *a)
{
    static char buf[4096];
    assert_true(sublet_oom_message(a, buf, sizeof buf) < sizeof buf);
    return buf;
}

/* ---- test_graph_memory_stats_and_use_result_after_destroy_graph ----------------------- */

typedef struct graph_case {
    uint64_t bytes;        /* numel * 4 */
    int64_t segments;      /* delta of segment.<pool>.current after capture */
    int64_t reserved;      /* delta of reserved_bytes */
    int64_t reserved_post; /* after the graph is deleted and the cache emptied */
    const char *pool;      /* "small_pool" or "large_pool" */
} graph_case;

static int64_t delta(sublet_allocator *a, const char *stat, const char *pool, int64_t before)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s.current", stat, pool);
    return h_stat(a, key) - before;
}

static int64_t now(sublet_allocator *a, const char *stat, const char *pool)
{
    return delta(a, stat, pool, 0);
}

static void test_graph_memory_stats(void **state)
{
    (void)state;
    const uint64_t small_size = 1 * MiB, small_buffer = 2 * MiB, large_buffer = 20 * MiB;
    const uint64_t min_large = 10 * MiB, round_large = 2 * MiB;
    const uint64_t r5 = round_large * ((min_large + 512 + round_large - 1) / round_large);
    const graph_case cases[] = {
        {512, 1, (int64_t)small_buffer, (int64_t)small_buffer, "small_pool"},
        {small_size, 2, 2 * (int64_t)small_buffer, (int64_t)small_buffer, "small_pool"},
        {small_size + 512, 1, (int64_t)large_buffer, (int64_t)large_buffer, "large_pool"},
        {min_large - 512, 2, 2 * (int64_t)large_buffer, (int64_t)large_buffer, "large_pool"},
        {min_large + 512, 3, 3 * (int64_t)r5, (int64_t)r5, "large_pool"},
    };
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    sublet_allocator *a = e.a;
    const sublet_stream s = 7;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const graph_case *k = &cases[c];
        bool small = strcmp(k->pool, "small_pool") == 0;
        /* small: b plus the graph's two one-element RNG holders (512 B each) */
        int64_t d_active = small ? 3 : 1;
        int64_t d_active_bytes = (int64_t)k->bytes + (small ? 1024 : 0);

        void *x = h_malloc(a, k->bytes, s); /* a = torch.ones(...) on s */
        int64_t pre_seg = now(a, "segment", k->pool), pre_res = now(a, "reserved_bytes", k->pool);
        int64_t pre_act = now(a, "active", k->pool), pre_ab = now(a, "active_bytes", k->pool);

        sublet_pool_id g = graph_id(a);
        begin_capture(a, g, s);
        void *seed = h_malloc(a, 8, s), *offset = h_malloc(a, 8, s);
        void *b = h_malloc(a, k->bytes, s); /* b = a.clone() */
        for (int i = 0; i < 5; i++) {       /* b = b.clone() + 1 */
            void *t = h_malloc(a, k->bytes, s);
            void *r = h_malloc(a, k->bytes, s);
            h_free(a, t);
            h_free(a, b);
            b = r;
        }
        end_capture(a, g);
        for (int i = 0; i < 2; i++) { /* before and after an empty_cache */
            assert_int_equal(delta(a, "segment", k->pool, pre_seg), k->segments);
            assert_int_equal(delta(a, "reserved_bytes", k->pool, pre_res), k->reserved);
            assert_int_equal(delta(a, "active", k->pool, pre_act), d_active);
            assert_int_equal(delta(a, "active_bytes", k->pool, pre_ab), d_active_bytes);
            /* the pool's own statistics hold exactly the capture's share */
            char key[96];
            snprintf(key, sizeof key, "reserved_bytes.%s.current", k->pool);
            assert_int_equal(pool_stat(a, g, key), k->reserved);
            assert_int_equal(info(a, g).device_segments, (small ? 0 : 1) + k->segments);
            if (i == 0)
                h_empty_cache(a);
        }
        /* del g: the RNG holders go with it, then the pool is released */
        h_free(a, seed);
        h_free(a, offset);
        release(a, g);
        assert_true(info(a, g).freeable);
        h_empty_cache(a);
        /* b is the only live block of the graph's pool */
        assert_int_equal(delta(a, "segment", k->pool, pre_seg), 1);
        assert_int_equal(delta(a, "reserved_bytes", k->pool, pre_res), k->reserved_post);
        assert_int_equal(delta(a, "active", k->pool, pre_act), 1);
        assert_int_equal(delta(a, "active_bytes", k->pool, pre_ab), (int64_t)k->bytes);
        sublet_pool_id owner;
        assert_int_equal(sublet_pool_of(a, b, &owner), SUBLET_OK);
        assert_true(owner.first == g.first && owner.second == g.second);
        assert_true(info(a, g).exists);
        h_free(a, x);
        h_free(a, b);
        h_empty_cache(a);
        assert_false(info(a, g).exists); /* its last segment went: the pool is forgotten */
        assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    }
    h_env_fini(&e);
}

/* ---- test_graph_two_successive ----------------------------------------------------------- */

/* func_with_temps(t, val): x = t.clone() + val; y = t.clone() + val; x + y */
static void *func_with_temps(sublet_allocator *a, void *t, uint64_t n, sublet_stream s)
{
    (void)t;
    void *c1 = h_malloc(a, n, s), *x = h_malloc(a, n, s);
    h_free(a, c1);
    void *c2 = h_malloc(a, n, s), *y = h_malloc(a, n, s);
    h_free(a, c2);
    void *r = h_malloc(a, n, s);
    h_free(a, x);
    h_free(a, y);
    return r;
}

static void test_graph_two_successive(void **state)
{
    (void)state;
    const uint64_t n = 1000 * 4;
    const sublet_stream s = 5, main_stream = 0;
    int64_t reserved_no_sharing = 0;
    for (int share = 0; share < 3; share++) { /* don't, via pool(), via graph_pool_handle() */
        h_env e;
        h_env_init(&e, H_SIM, SIM_BIG, vconf(""));
        sublet_allocator *a = e.a;
        void *x = h_malloc(a, n, main_stream);
        sublet_pool_id g0, g1;
        if (share == 2)
            assert_int_equal(sublet_pool_handle(a, SUBLET_POOL_ID_USER, &g0), SUBLET_OK);
        else
            g0 = graph_id(a);
        begin_capture(a, g0, s);
        void *b = h_malloc(a, n, s);
        for (int i = 0; i < 5; i++) {
            void *r = func_with_temps(a, b, n, s);
            h_free(a, b);
            b = r;
        }
        end_capture(a, g0);
        g1 = share == 0 ? graph_id(a) : g0;
        begin_capture(a, g1, s);
        for (int i = 0; i < 5; i++) {
            void *r = func_with_temps(a, b, n, s);
            h_free(a, b);
            b = r;
        }
        end_capture(a, g1);
        assert_int_equal(info(a, g0).use_count, share == 0 ? 1 : 2);
        void *c = h_malloc(a, n, main_stream);
        for (int i = 0; i < 6; i++) {
            void *r = func_with_temps(a, c, n, main_stream);
            h_free(a, c);
            c = r;
        }
        int64_t reserved = h_stat(a, "reserved_bytes.all.current");
        if (share == 0)
            reserved_no_sharing = reserved;
        else
            assert_int_equal(reserved_no_sharing - reserved, (int64_t)(2 * MiB));
        h_free(a, x);
        h_free(a, b);
        h_free(a, c);
        release(a, g0);
        release(a, g1);
        h_empty_cache(a);
        assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
        assert_false(info(a, g0).exists);
        h_env_fini(&e);
    }
}

/* ---- test_graph_capture_oom and the OOM message's private-pool figure ------------------ */

static void test_graph_capture_oom(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 40 * MiB, "");
    sublet_allocator *a = e.a;
    const sublet_stream s = 3;
    sublet_pool_id g = graph_id(a);
    begin_capture(a, g, s);
    void *p = h_malloc(a, 10 * MiB + 512, s); /* a 12 MiB segment of the pool */
    h_free(a, p);
    void *q = NULL;
    assert_int_equal(h_try_malloc(a, 30 * MiB, s, &q), SUBLET_ERR_OOM);
    assert_null(q);
    const char *m = oom_text(a);
    assert_non_null(strstr(m, "CUDA out of memory. Tried to allocate 30.00 MiB."));
    assert_non_null(strstr(m, "Of the allocated memory 12.00 MiB is allocated by PyTorch, with "
                              "12.00 MiB allocated in private pools (e.g., CUDA Graphs), and 0 "
                              "bytes is reserved by PyTorch but unallocated."));
    /* no full release during a capture: no retry, the pool keeps its segment */
    assert_int_equal(h_stat(a, "num_alloc_retries"), 0);
    assert_int_equal(h_stat(a, "num_sync_all_streams"), 0);
    assert_int_equal(info(a, g).device_segments, 1);
    end_capture(a, g);
    /* the graph is gone: the OOM path releases its freeable pool and retries */
    release(a, g);
    q = h_malloc(a, 30 * MiB, s);
    assert_int_equal(h_stat(a, "num_alloc_retries"), 1);
    assert_false(info(a, g).exists);
    h_free(a, q);
    h_env_fini(&e);
}

/* ---- MemPool ------------------------------------------------------------------------------ */

typedef struct bump {
    uint64_t next;
    int allocs, frees;
    uint64_t live;
} bump;

static sublet_status bump_alloc(void *user, uint64_t size, uint64_t *addr)
{
    bump *b = user;
    *addr = b->next;
    b->next += size;
    b->allocs++;
    b->live += size;
    return SUBLET_OK;
}

static void bump_free(void *user, uint64_t addr, uint64_t size)
{
    (void)addr;
    bump *b = user;
    b->frees++;
    b->live -= size;
}

static void use_mem_pool_begin(sublet_allocator *a, sublet_pool_id id)
{
    assert_int_equal(sublet_pool_begin_allocate(a, id, SUBLET_POOL_FILTER_THREAD, 0), SUBLET_OK);
    CHECK(a);
}

static void use_mem_pool_end(sublet_allocator *a, sublet_pool_id id)
{
    assert_int_equal(sublet_pool_end_allocate(a, id), SUBLET_OK);
    release(a, id);
}

static void mempool_destroy(sublet_allocator *a, sublet_pool_id id)
{
    assert_int_equal(info(a, id).use_count, 1);
    release(a, id);
    assert_int_equal(sublet_pool_empty_cache(a, id), SUBLET_OK);
    CHECK(a);
}

static void test_mempool_with_allocator(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    sublet_allocator *a = e.a;
    bump bp = {.next = UINT64_C(0x500000000000)};
    sublet_pool_options o = {.alloc = bump_alloc, .free = bump_free, .user = &bp};
    sublet_pool_id id;
    assert_int_equal(sublet_pool_create(a, &o, &id), SUBLET_OK);
    assert_int_equal(id.first, 0);
    assert_int_equal(id.second, 1);
    assert_int_equal(info(a, id).use_count, 1);
    use_mem_pool_begin(a, id);
    assert_int_equal(info(a, id).use_count, 2);
    void *t1 = h_malloc(a, 1 * MiB, 0), *t2 = h_malloc(a, 1 * MiB, 0);
    assert_int_equal(bp.allocs, 1); /* two 1 MiB tensors share a 2 MiB segment */
    void *t3 = h_malloc(a, 1 * MiB, 0);
    assert_int_equal(bp.allocs, 2);
    assert_true(h_addr(t1) >= UINT64_C(0x500000000000));
    use_mem_pool_end(a, id);
    assert_int_equal(info(a, id).use_count, 1);
    assert_int_equal(info(a, id).device_segments, 2);
    assert_int_equal(pool_stat(a, id, "segment.small_pool.current"), 2);
    assert_int_equal(pool_stat(a, id, "allocation.all.current"), 3);
    /* outside the context: the default pool, the backend's memory */
    void *d = h_malloc(a, 1 * MiB, 0);
    assert_true(h_addr(d) < UINT64_C(0x500000000000) || h_addr(d) >= bp.next);
    h_free(a, t1);
    h_free(a, t2);
    h_free(a, t3);
    h_empty_cache(a); /* not freeable: the pool keeps its segments */
    assert_int_equal(bp.frees, 0);
    mempool_destroy(a, id);
    assert_int_equal(bp.frees, 2);
    assert_int_equal(bp.live, 0);
    assert_false(info(a, id).exists);
    assert_int_equal(h_stat(a, "segment.all.current"), 1); /* d's, untouched */
    h_free(a, d);
    h_env_fini(&e);
}

static void test_mempool_no_split(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_BIG, vconf(v ? "" : "pytorch_version:2.6"));
        sublet_allocator *a = e.a;
        sublet_pool_options o = {.no_split = 1};
        sublet_pool_id id;
        assert_int_equal(sublet_pool_create(a, &o, &id), SUBLET_OK);
        use_mem_pool_begin(a, id);
        void *p[3];
        for (int i = 0; i < 3; i++)
            p[i] = h_malloc(a, 1 * KiB, 0);
        use_mem_pool_end(a, id);
        /* newest: one block per segment; 2.6 has no no_split and splits */
        assert_int_equal(info(a, id).device_segments, v ? 3 : 1);
        assert_int_equal(h_block_size(a, p[0]), v ? 2 * MiB : 1 * KiB);
        for (int i = 0; i < 3; i++)
            h_free(a, p[i]);
        mempool_destroy(a, id);
        assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
        h_env_fini(&e);
    }
}

static void test_mempool_use_on_oom(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        h_env e;
        h_env_init(&e, H_SIM, 64 * MiB, vconf(v ? "" : "pytorch_version:2.6"));
        sublet_allocator *a = e.a;
        sublet_pool_options o = {.use_on_oom = 1};
        sublet_pool_id id;
        assert_int_equal(sublet_pool_create(a, &o, &id), SUBLET_OK);
        use_mem_pool_begin(a, id);
        void *p = h_malloc(a, 40 * MiB, 0);
        uint64_t at = h_addr(p);
        h_free(a, p);
        use_mem_pool_end(a, id);
        void *q = NULL;
        sublet_status st = h_try_malloc(a, 40 * MiB, 0, &q);
        if (v) { /* the pool's cached block serves the default pool, and stays the pool's */
            assert_int_equal(st, SUBLET_OK);
            assert_int_equal(h_addr(q), at);
            sublet_pool_id owner;
            assert_int_equal(sublet_pool_of(a, q, &owner), SUBLET_OK);
            assert_int_equal(owner.second, id.second);
            assert_int_equal(pool_stat(a, id, "allocation.all.current"), 1);
            h_free(a, q);
        } else { /* 2.6: no fallback; the live pool is not released */
            assert_int_equal(st, SUBLET_ERR_OOM);
            assert_non_null(strstr(oom_text(a), "with 40.00 MiB allocated in private pools"));
        }
        mempool_destroy(a, id);
        assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
        h_env_fini(&e);
    }
}

static void test_nested_mempool(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_BIG, vconf(v ? "" : "pytorch_version:2.6"));
        sublet_allocator *a = e.a;
        sublet_pool_id p1, p2, owner;
        assert_int_equal(sublet_pool_create(a, NULL, &p1), SUBLET_OK);
        assert_int_equal(sublet_pool_create(a, NULL, &p2), SUBLET_OK);
        assert_int_equal(p2.second, p1.second + 1);
        use_mem_pool_begin(a, p1);
        void *x = h_malloc(a, 4 * MiB, 0);
        use_mem_pool_begin(a, p2);
        void *y = h_malloc(a, 4 * MiB, 0);
        /* newest asks the most recent redirection first, 2.6 the oldest */
        assert_int_equal(sublet_pool_of(a, y, &owner), SUBLET_OK);
        assert_int_equal(owner.second, v ? p2.second : p1.second);
        use_mem_pool_end(a, p2);
        void *z = h_malloc(a, 4 * MiB, 0);
        assert_int_equal(sublet_pool_of(a, z, &owner), SUBLET_OK);
        assert_int_equal(owner.second, p1.second);
        use_mem_pool_end(a, p1);
        void *w = h_malloc(a, 4 * MiB, 0);
        assert_int_equal(sublet_pool_of(a, w, &owner), SUBLET_OK);
        assert_int_equal(owner.second, 0);
        h_free(a, x);
        h_free(a, y);
        h_free(a, z);
        h_free(a, w);
        mempool_destroy(a, p2);
        mempool_destroy(a, p1);
        h_empty_cache(a);
        assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
        h_env_fini(&e);
    }
}

typedef struct thread_arg {
    sublet_allocator *a;
    void *p;
} thread_arg;

static void *other_thread(void *arg)
{
    thread_arg *t = arg;
    if (sublet_malloc(t->a, 2 * MiB, 0, &t->p) != SUBLET_OK)
        t->p = NULL;
    return NULL;
}

static void test_mempool_ctx_multithread(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, vconf(""));
    sublet_allocator *a = e.a;
    sublet_pool_id id, owner;
    assert_int_equal(sublet_pool_create(a, NULL, &id), SUBLET_OK);
    use_mem_pool_begin(a, id);
    thread_arg t = {a, NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    CHECK(a);
    assert_non_null(t.p);
    assert_int_equal(sublet_pool_of(a, t.p, &owner), SUBLET_OK);
    assert_int_equal(owner.second, 0); /* another thread: the default pool */
    assert_int_equal(h_stat(a, "active_bytes.all.current"), (int64_t)(2 * MiB));
    assert_int_equal(pool_stat(a, id, "active_bytes.all.current"), 0);
    /* empty_cache inside use_mem_pool acts on that pool only */
    h_free(a, t.p);
    int64_t syncs = h_stat(a, "num_sync_all_streams");
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), (int64_t)(20 * MiB));
    assert_int_equal(h_stat(a, "num_sync_all_streams"), syncs);
    use_mem_pool_end(a, id);
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    mempool_destroy(a, id);
    h_env_fini(&e);
}

/* ---- frees with stream uses during a capture (§4.5) ---------------------------------------- */

static void test_capture_deferred_free(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, vconf(""));
    sublet_allocator *a = e.a;
    const sublet_stream s = 1, other = 2, during = 3;
    void *x = h_malloc(a, 4 * MiB, s); /* a default-pool block */
    h_record(a, x, other);             /* used on `other` before the capture */
    sublet_pool_id g = graph_id(a);
    begin_capture(a, g, s);
    void *y = h_malloc(a, 4 * MiB, s); /* the pool's */
    h_record(a, y, during);            /* used on `during` inside the capture */
    h_free(a, x);
    h_free(a, y);
    /* no events during a capture: both stay active, nothing is queried */
    assert_int_equal(h_stat(a, "active.all.current"), 2);
    assert_int_equal(h_stat(a, "allocation.all.current"), 0);
    void *z = h_malloc(a, 4 * MiB, s); /* cannot reuse either */
    assert_true(h_addr(z) != h_addr(x) && h_addr(z) != h_addr(y));
    h_free(a, z);
    end_capture(a, g);
    /* the next process_events: y's capture-time use needs no event (freed at
     * once), x waits on an event recorded on `other` */
    h_process_events(a);
    assert_int_equal(h_stat(a, "active.all.current"), 1);
    h_empty_cache(a); /* synchronises x's event */
    assert_int_equal(h_stat(a, "active.all.current"), 0);
    release(a, g);
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* ---- blocks never migrate; misuse ------------------------------------------------------------ */

static void test_pool_isolation_and_misuse(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, vconf(""));
    sublet_allocator *a = e.a;
    sublet_pool_id g = graph_id(a);
    assert_int_equal(g.first, 1);
    assert_int_equal(g.second, 0);
    assert_false(info(a, g).exists); /* a handle creates nothing */
    begin_capture(a, g, 1);
    void *p = h_malloc(a, 1000, 1);
    h_free(a, p); /* cached in the pool */
    /* refused: a second redirection to the same pool (the use stays, as PyTorch's) */
    assert_int_equal(sublet_pool_begin_allocate(a, g, SUBLET_POOL_FILTER_STREAM, 2),
                     SUBLET_ERR_BUSY);
    assert_int_equal(info(a, g).use_count, 2);
    void *q = h_malloc(a, 1000, 2); /* stream 2 is not captured: the default pool */
    assert_true(h_addr(q) != h_addr(p));
    end_capture(a, g);
    assert_int_equal(sublet_pool_end_allocate(a, g), SUBLET_ERR_INVALID_ARGUMENT);
    void *r = h_malloc(a, 1000, 1); /* same stream, after the capture: not the pool's block */
    assert_true(h_addr(r) != h_addr(p));
    sublet_pool_id zero = {0, 0}, unknown = {0, 99};
    assert_int_equal(sublet_pool_begin_allocate(a, zero, SUBLET_POOL_FILTER_STREAM, 1),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_pool_release(a, unknown), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_stats st;
    assert_int_equal(sublet_pool_stats_read(a, unknown, &st), SUBLET_ERR_INVALID_ARGUMENT);
    release(a, g);
    release(a, g);
    assert_int_equal(sublet_pool_release(a, g), SUBLET_ERR_INVALID_ARGUMENT); /* freeable */
    assert_int_equal(sublet_pool_begin_allocate(a, g, SUBLET_POOL_FILTER_STREAM, 1),
                     SUBLET_ERR_INVALID_ARGUMENT); /* no longer live */
    h_free(a, q);
    h_free(a, r);
    h_empty_cache(a);
    assert_false(info(a, g).exists);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);

}

/* ---- policy:stitch stitches within one pool ------------------------------------------------- */

static uint64_t addr_of(void *p) { return (uint64_t)(uintptr_t)p; }

/* A graph's pool holds two 1 MiB holes in partly used 2 MiB pages (page 0's tail, page 2's
 * head: tests/test_policy_stitch.c's layout) on a full device.  A default-pool request of
 * 1.5 MiB cannot use them: an OOM, the pool's blocks untouched.  The same request during a
 * second capture into the pool is stitched from them (two alias pages, no memory taken), and
 * stays the pool's; empty_cache gives the stitch back and the released pool is forgotten. */
static void test_pool_stitch(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 10 * MiB, "policy:stitch");
    sublet_allocator *a = e.a;
    sublet_pool_id g = graph_id(a), owner;
    const uint64_t sizes[5] = {1 * MiB, 1 * MiB, 2 * MiB, 1 * MiB, 3 * MiB};
    void *p[5];
    begin_capture(a, g, 0);
    for (int i = 0; i < 5; i++) {
        p[i] = h_malloc(a, sizes[i], 0);
        if (i)
            assert_int_equal(addr_of(p[i]), addr_of(p[i - 1]) + sizes[i - 1]);
    }
    end_capture(a, g);
    h_free(a, p[1]);
    h_free(a, p[3]);
    void *d = h_malloc(a, 2 * MiB, 0); /* the default pool maps the device's last page */
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), (int64_t)(10 * MiB));
    sublet_sim_ops before, after;
    sublet_sim_ops_read(e.inner, &before);
    void *q = NULL;
    assert_int_equal(sublet_malloc(a, 1536 * KiB, 0, &q), SUBLET_ERR_OOM);
    CHECK(a);
    sublet_sim_ops_read(e.inner, &after);
    assert_int_equal(after.va_aliases, before.va_aliases);
    assert_int_equal(info(a, g).free_bytes, 2 * MiB);
    assert_int_equal(pool_stat(a, g, "allocated_bytes.all.current"), (int64_t)(6 * MiB));

    begin_capture(a, g, 0);
    q = h_malloc(a, 1536 * KiB, 0);
    end_capture(a, g);
    sublet_sim_ops_read(e.inner, &after);
    assert_int_equal(after.va_aliases - before.va_aliases, 2);
    assert_int_equal(sublet_pool_of(a, q, &owner), SUBLET_OK);
    assert_true(owner.first == g.first && owner.second == g.second);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), (int64_t)(10 * MiB));
    assert_int_equal(pool_stat(a, g, "reserved_bytes.all.current"), (int64_t)(8 * MiB));
    assert_int_equal(pool_stat(a, g, "allocated_bytes.all.current"), (int64_t)(7680 * KiB));
    assert_int_equal(sublet_sim_used(e.inner), 10 * MiB);

    h_free(a, q);
    h_free(a, d);
    for (int i = 0; i < 5; i += 2)
        h_free(a, p[i]);
    release(a, g);
    release(a, g);
    h_empty_cache(a);
    assert_false(info(a, g).exists);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    h_env_fini(&e);
}

/* ---- expandable segments: a graph's pool maps its own pages ---------------------------------- */

static void test_pool_expandable(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "expandable_segments:True");
    sublet_allocator *a = e.a;
    sublet_pool_id g = graph_id(a), owner;
    void *d = h_malloc(a, 30 * MiB, 1);
    begin_capture(a, g, 1);
    void *p = h_malloc(a, 30 * MiB, 1);
    end_capture(a, g);
    assert_int_equal(sublet_pool_of(a, p, &owner), SUBLET_OK);
    assert_int_equal(owner.first, g.first);
    assert_int_equal(pool_stat(a, g, "reserved_bytes.large_pool.current"), (int64_t)(40 * MiB));
    assert_int_equal(info(a, g).device_segments, 1);
    h_free(a, p);
    release(a, g);
    h_empty_cache(a);
    assert_false(info(a, g).exists);
    h_free(a, d);
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* ---- a caller's filter (sublet_pool_begin_allocate_fn: PyTorch's std::function) -------------- */

typedef struct counting_filter {
    sublet_stream accept; /* the stream the filter takes */
    int calls;
} counting_filter;

static int filter_accepts(void *user, sublet_stream stream)
{
    counting_filter *f = user;
    f->calls++;
    return stream == f->accept;
}

static void test_pool_callback_filter(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "");
    sublet_allocator *a = e.a;
    sublet_pool_id g = graph_id(a), owner;
    counting_filter f = {.accept = 5};
    void *before = h_malloc(a, 1000, 5); /* no redirection: the filter is not asked */
    assert_int_equal(f.calls, 0);
    assert_int_equal(sublet_pool_begin_allocate_fn(a, g, filter_accepts, &f), SUBLET_OK);
    CHECK(a);
    assert_int_equal(info(a, g).allocating, 1);
    void *in = h_malloc(a, 3 * MiB, 5);  /* accepted: the pool's */
    void *out = h_malloc(a, 3 * MiB, 6); /* refused: the default pool */
    assert_true(f.calls >= 2);
    assert_int_equal(sublet_pool_of(a, in, &owner), SUBLET_OK);
    assert_true(owner.first == g.first && owner.second == g.second);
    assert_int_equal(sublet_pool_of(a, out, &owner), SUBLET_OK);
    assert_true(owner.first == 0 && owner.second == 0);
    assert_int_equal(pool_stat(a, g, "allocated_bytes.all.current"), (int64_t)(3 * MiB));
    assert_int_equal(pool_stat(a, g, "reserved_bytes.all.current"), (int64_t)(20 * MiB));
    /* a second begin on the same pool is refused whatever its filter */
    assert_int_equal(sublet_pool_begin_allocate_fn(a, g, filter_accepts, &f), SUBLET_ERR_BUSY);
    assert_int_equal(sublet_pool_begin_allocate_fn(a, g, NULL, &f), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_pool_id zero = {0, 0};
    assert_int_equal(sublet_pool_begin_allocate_fn(a, zero, filter_accepts, &f),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_pool_begin_allocate(a, g, SUBLET_POOL_FILTER_CALLBACK, 5),
                     SUBLET_ERR_INVALID_ARGUMENT); /* only through _fn */
    end_capture(a, g);
    int calls = f.calls;
    void *after = h_malloc(a, 3 * MiB, 5); /* ended: default pool, filter not asked */
    assert_int_equal(f.calls, calls);
    assert_int_equal(sublet_pool_of(a, after, &owner), SUBLET_OK);
    assert_true(owner.first == 0 && owner.second == 0);
    h_free(a, in);
    h_free(a, out);
    h_free(a, after);
    h_free(a, before);
    release(a, g); /* the refused begin's use */
    release(a, g);
    h_empty_cache(a);
    assert_false(info(a, g).exists);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* PyTorch 2.6 counts one cudaMalloc_count per allocation that maps pages and one fewer per
 * unmapping, and forgets a freeable pool at 0: here while a page of it is still mapped under a
 * live block (PyTorch then crashes on the block's free).  sublet keeps the pool until it holds
 * no segment.  Found by fuzz_ops and by cli_oracle_pools (seed 9: PyTorch's segfault).  Under
 * ASan the old deletion was a use after free. */
static void test_pool_expandable_count(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "pytorch_version:2.6,expandable_segments:True");
    sublet_allocator *a = e.a;
    sublet_pool_id g = graph_id(a);
    begin_capture(a, g, 1);
    void *x = h_malloc(a, 30 * MiB, 1); /* maps pages 0 and 1 in one allocation: count 1 */
    void *y = h_malloc(a, 5 * MiB, 1);  /* from page 1's cached rest: no mapping */
    void *z = h_malloc(a, 15 * MiB, 1); /* page 1's last 5 MiB and page 2: count 2 */
    end_capture(a, g);
    assert_int_equal(info(a, g).device_segments, 2);
    assert_int_equal(pool_stat(a, g, "reserved_bytes.all.current"), (int64_t)(60 * MiB));
    h_free(a, x);
    h_free(a, z);
    release(a, g);
    h_empty_cache(a); /* unmaps page 0, then page 2: count 0, page 1 still mapped under y */
    sublet_pool_info i = info(a, g);
    assert_true(i.exists);
    assert_int_equal(i.device_segments, 0);
    assert_int_equal(pool_stat(a, g, "reserved_bytes.all.current"), (int64_t)(20 * MiB));
    assert_int_equal(pool_stat(a, g, "allocated_bytes.all.current"), (int64_t)(5 * MiB));
    h_free(a, y);
    CHECK(a);
    h_empty_cache(a);
    assert_false(info(a, g).exists);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);

    /* an allocation that reserved address space and could not map leaves a reservation
     * without pages: the freeable pool gives it back and is forgotten (fuzz_ops) */
    h_env_init(&e, H_SIM, 64 * MiB, "expandable_segments:True");
    a = e.a;
    g = graph_id(a);
    begin_capture(a, g, 1);
    void *p = NULL;
    assert_int_equal(sublet_malloc(a, 100 * MiB, 1, &p), SUBLET_ERR_OOM);
    CHECK(a);
    end_capture(a, g);
    assert_true(info(a, g).exists);
    release(a, g);
    h_empty_cache(a);
    assert_false(info(a, g).exists);
    h_env_fini(&e);
}

/* ---- graph_capture_record_stream_reuse (§4.6) -------------------------------------------------- */

static void wait_stream(sublet_allocator *a, sublet_stream waiter, sublet_stream signaler)
{
    assert_int_equal(sublet_pool_stream_wait(a, waiter, signaler), SUBLET_OK);
    CHECK(a);
}

/* PyTorch's test_graph_capture_reclaim_2_streams and _4_streams: data1, allocated on s1 in a
 * capture, is used by s2 (s3, s4) that forked from s1, and freed; it is reused on s1 only once
 * s1 has joined every stream that used it.  `nuse` streams use it; `join_all` 0 stops after
 * joining all but the last.  Returns whether the last allocation reused data1. */
static int reclaim_case(const char *conf, int nuse, int join_all)
{
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, conf);
    sublet_allocator *a = e.a;
    const sublet_stream s1 = 1, users[3] = {2, 3, 4};
    sublet_pool_id g = graph_id(a);
    begin_capture(a, g, s1);
    void *sink1 = h_malloc(a, 32, s1);
    void *data1 = h_malloc(a, 32, s1);
    void *bufs[3];
    for (int i = 0; i < nuse; i++) {
        wait_stream(a, users[i], s1); /* the fork: users[i] joins the capture */
        bufs[i] = h_malloc(a, 32, users[i]);
        h_record(a, data1, users[i]);
    }
    h_free(a, data1);
    for (int i = 0; i + 1 < nuse; i++)
        wait_stream(a, s1, users[i]);
    void *data2 = h_malloc(a, 32, s1); /* not all joined yet: never data1 */
    assert_ptr_not_equal(data2, data1);
    if (join_all)
        wait_stream(a, s1, users[nuse - 1]);
    void *data3 = h_malloc(a, 32, s1);
    int reused = data3 == data1;
    end_capture(a, g);
    h_free(a, data3);
    h_free(a, data2);
    h_free(a, sink1);
    for (int i = 0; i < nuse; i++)
        h_free(a, bufs[i]);
    sublet_sim_complete_all(e.be);
    release(a, g);
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
    return reused;
}

static void test_graph_capture_reclaim(void **state)
{
    (void)state;
    const char *on = "graph_capture_record_stream_reuse:True";
    assert_true(reclaim_case(on, 1, 1));  /* test_graph_capture_reclaim_2_streams */
    assert_true(reclaim_case(on, 3, 1));  /* test_graph_capture_reclaim_4_streams */
    assert_false(reclaim_case(on, 3, 0)); /* s4 never joined */
    /* without the option the block waits for the end of the capture */
    assert_false(reclaim_case("", 1, 1));
    assert_false(reclaim_case("graph_capture_record_stream_reuse:False", 3, 1));
    /* the option does not exist before 2.9 */
    sublet_allocator *a = NULL;
    sublet_backend *be = NULL;
    assert_int_equal(sublet_sim_create(SIM_BIG, &be), SUBLET_OK);
    sublet_options o = {.backend = be,
                        .conf = "pytorch_version:2.6,graph_capture_record_stream_reuse:True"};
    assert_int_equal(sublet_allocator_create(&o, &a, NULL, 0), SUBLET_ERR_CONFIG);
    sublet_backend_destroy(be);
}

/* A stream that never joined the capture, a transitive join, and a free outside a capture. */
static void test_graph_capture_reclaim_joins(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, SIM_BIG, "graph_capture_record_stream_reuse:True");
    sublet_allocator *a = e.a;
    sublet_pool_id g = graph_id(a);
    begin_capture(a, g, 1);
    void *sink = h_malloc(a, 32, 1);
    /* stream 9 is not part of the capture: the block waits for the end */
    void *x = h_malloc(a, 32, 1);
    h_record(a, x, 9);
    h_free(a, x);
    wait_stream(a, 1, 9);
    void *y = h_malloc(a, 32, 1);
    assert_ptr_not_equal(y, x);
    /* transitive: 3 waits for 2 after the free, 1 waits for 3 */
    wait_stream(a, 2, 1);
    void *z = h_malloc(a, 32, 1);
    h_record(a, z, 2);
    h_free(a, z);
    wait_stream(a, 3, 2);
    wait_stream(a, 1, 3);
    void *w = h_malloc(a, 32, 1);
    assert_ptr_equal(w, z);
    /* the waits of an earlier capture do not count in the next one */
    h_record(a, w, 2);
    h_free(a, w);
    end_capture(a, g);
    /* out of a capture: the deferred frees become events; stream 9 and 2 still pending */
    void *v = h_malloc(a, 32, 1);
    assert_ptr_not_equal(v, x);
    assert_ptr_not_equal(v, w);
    h_free(a, v);
    h_free(a, y);
    h_free(a, sink);
    sublet_sim_complete_all(e.be);
    release(a, g);
    h_empty_cache(a);
    assert_int_equal(h_stat(a, "reserved_bytes.all.current"), 0);
    h_env_fini(&e);
}

/* ---- reserved_bytes_by_private_pools (newest PyTorch, docs/rules.md §7) ------------- */

static void test_stats_by_private_pools(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        h_env e;
        h_env_init(&e, H_SIM, SIM_BIG, v ? "" : "pytorch_version:2.6");
        sublet_allocator *a = e.a;
        sublet_pool_id g = graph_id(a), m;
        assert_int_equal(sublet_pool_create(a, NULL, &m), SUBLET_OK);
        begin_capture(a, g, 1);
        void *x = h_malloc(a, 3 * MiB, 1);  /* a 20 MiB large segment */
        void *y = h_malloc(a, 1000, 1);     /* a 2 MiB small one */
        end_capture(a, g);
        use_mem_pool_begin(a, m);
        void *z = h_malloc(a, 12 * MiB, 0); /* 12 MiB */
        use_mem_pool_end(a, m);
        sublet_pool_reserved r[4];
        size_t n = 99;
        assert_int_equal(sublet_pool_reserved_read(a, r, 4, &n), SUBLET_OK);
        sublet_stats s;
        sublet_stats_read(a, &s);
        static char plain[16384], flat[32768], json[32768];
        sublet_stats_format_flat(&s, plain, sizeof plain);
        size_t len = sublet_stats_format_flat_pools(&s, r, n, flat, sizeof flat);
        assert_int_equal(len, strlen(flat));
        sublet_stats_format_json_pools(&s, r, n, json, sizeof json);
        if (!v) { /* 2.6 has no such keys */
            assert_int_equal(n, 0);
            assert_string_equal(flat, plain);
        } else {
            /* ids in order: the MemPool (0, 1), then the graph's (1, 0) */
            assert_int_equal(n, 2);
            assert_true(r[0].id[0] == 0 && r[0].id[1] == m.second);
            assert_true(r[1].id[0] == g.first && r[1].id[1] == 0);
            assert_int_equal(r[1].reserved_bytes[SUBLET_POOL_ALL].current, (int64_t)(22 * MiB));
            assert_int_equal(r[1].reserved_bytes[SUBLET_POOL_SMALL].current, (int64_t)(2 * MiB));
            assert_int_equal(r[0].reserved_bytes[SUBLET_POOL_LARGE].current, (int64_t)(12 * MiB));
            char want[128];
            snprintf(want, sizeof want, "\nreserved_bytes_by_private_pools.%llu_0.all.current %lld\n",
                     (unsigned long long)g.first, (long long)(22 * MiB));
            assert_non_null(strstr(flat, want));
            snprintf(want, sizeof want, "\"reserved_bytes_by_private_pools.0_%llu.large_pool.peak\": %lld",
                     (unsigned long long)m.second, (long long)(12 * MiB));
            assert_non_null(strstr(json, want));
            /* 24 keys more, every line still in sorted order, the plain ones unchanged */
            size_t lines = 0, plines = 0;
            const char *prev = NULL;
            for (char *p = flat; *p; p = strchr(p, '\n') + 1) {
                if (prev)
                    assert_true(strncmp(prev, p, (size_t)(strchr(p, ' ') - p)) < 0);
                prev = p;
                lines++;
            }
            for (const char *p = plain; *p; p = strchr(p, '\n') + 1)
                plines++;
            assert_int_equal(lines, plines + 24);
            assert_non_null(strstr(flat, "\nreserved_bytes.all.current "));
            /* a short buffer: the count, and no entry written beyond it */
            assert_int_equal(sublet_pool_reserved_read(a, r, 1, &n), SUBLET_OK);
            assert_int_equal(n, 2);
        }
        h_free(a, x);
        h_free(a, y);
        h_free(a, z);
        release(a, g);
        mempool_destroy(a, m);
        h_empty_cache(a);
        h_env_fini(&e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_memory_stats),
        cmocka_unit_test(test_graph_two_successive),
        cmocka_unit_test(test_graph_capture_oom),
        cmocka_unit_test(test_mempool_with_allocator),
        cmocka_unit_test(test_mempool_no_split),
        cmocka_unit_test(test_mempool_use_on_oom),
        cmocka_unit_test(test_nested_mempool),
        cmocka_unit_test(test_mempool_ctx_multithread),
        cmocka_unit_test(test_capture_deferred_free),
        cmocka_unit_test(test_pool_isolation_and_misuse),
        cmocka_unit_test(test_pool_expandable),
        cmocka_unit_test(test_pool_callback_filter),
        cmocka_unit_test(test_pool_expandable_count),
        cmocka_unit_test(test_graph_capture_reclaim),
        cmocka_unit_test(test_graph_capture_reclaim_joins),
        cmocka_unit_test(test_pool_stitch),
        cmocka_unit_test(test_stats_by_private_pools),
        cmocka_unit_test_setup_teardown(test_graph_two_successive, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_graph_two_successive, use_stitch, use_native),
        cmocka_unit_test_setup_teardown(test_mempool_no_split, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_mempool_no_split, use_stitch, use_native),
        cmocka_unit_test_setup_teardown(test_mempool_use_on_oom, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_mempool_use_on_oom, use_stitch, use_native),
        cmocka_unit_test_setup_teardown(test_nested_mempool, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_nested_mempool, use_stitch, use_native),
        cmocka_unit_test_setup_teardown(test_mempool_ctx_multithread, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_capture_deferred_free, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_capture_deferred_free, use_stitch, use_native),
        cmocka_unit_test_setup_teardown(test_pool_isolation_and_misuse, use_expandable, use_native),
        cmocka_unit_test_setup_teardown(test_pool_isolation_and_misuse, use_stitch, use_native),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
