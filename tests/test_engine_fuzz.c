/* sublet — randomized engine tests.
 *
 * test_allocator_fuzz is PyTorch's test of the same name (docs/rules.md §10):
 * 10,000 seeded random steps of alloc (2–20 MB, plus some small requests),
 * free and empty_cache, here on the host backend so that the blocks are real
 * memory: every block is filled with its own byte and checked when freed, no
 * two live blocks overlap, and sublet_check() passes after every step.
 *
 * The second test drives two streams on the sim backend with record_stream
 * and random stream completion, checking that a block whose free waits on a
 * stream is never handed out again before that stream's work is done. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "support/harness.h"

#define FUZZ_STEPS 10000
#define HOST_FUZZ_STEPS (H_UNDER_TSAN ? 1000 : FUZZ_STEPS)
#define MODEL_SCALE (H_UNDER_TSAN ? 4 : 1)
#define MAX_LIVE 4096

typedef struct live_blk {
    uint8_t *ptr;
    uint64_t n;          /* requested */
    uint64_t base, size; /* the block */
    uint8_t pattern;
    sublet_stream stream;
} live_blk;

static int overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return a < b + bs && b < a + as;
}

/* Check that [base, base+size) overlaps none of the n blocks. */
static void assert_disjoint(const live_blk *v, size_t n, uint64_t base, uint64_t size)
{
    for (size_t i = 0; i < n; i++)
        if (overlaps(base, size, v[i].base, v[i].size))
            fail_msg("block [0x%llx, +%llu) overlaps live block [0x%llx, +%llu)",
                     (unsigned long long)base, (unsigned long long)size,
                     (unsigned long long)v[i].base, (unsigned long long)v[i].size);
}

/* Under TSan, whose interceptors make a 40 GB memset crawl, the pattern goes
 * into the first 8 bytes of every 512-byte granule and the last 8 bytes: a
 * block handed out twice still shows (every block starts on a granule), and
 * the normal and ASan builds fill and check every byte.  TSan also pays for
 * every large host allocation with its shadow, so the host fuzz runs fewer
 * steps there; it is single-threaded and gains nothing from TSan. */
#if H_UNDER_TSAN
#define PATTERN_SPARSE 1
#endif

#ifdef PATTERN_SPARSE
static void fill(uint8_t *p, uint64_t n, uint8_t byte)
{
    for (uint64_t off = 0; off < n; off += 512)
        memset(p + off, byte, (size_t)(n - off < 8 ? n - off : 8));
    memset(p + (n > 8 ? n - 8 : 0), byte, (size_t)(n > 8 ? 8 : n));
}

static void verify(const uint8_t *p, uint64_t n, uint8_t byte)
{
    for (uint64_t off = 0; off < n; off += 512)
        for (uint64_t i = off; i < off + 8 && i < n; i++)
            if (p[i] != byte)
                fail_msg("byte %llu of a %llu-byte block is 0x%02x, not 0x%02x",
                         (unsigned long long)i, (unsigned long long)n, p[i], byte);
    for (uint64_t i = n > 8 ? n - 8 : 0; i < n; i++)
        if (p[i] != byte)
            fail_msg("byte %llu of a %llu-byte block is 0x%02x, not 0x%02x",
                     (unsigned long long)i, (unsigned long long)n, p[i], byte);
}
#else
static void fill(uint8_t *p, uint64_t n, uint8_t byte) { memset(p, byte, (size_t)n); }

static void verify(const uint8_t *p, uint64_t n, uint8_t byte)
{
    static uint8_t ref[64 * 1024];
    memset(ref, byte, sizeof ref);
    for (uint64_t off = 0; off < n; off += sizeof ref) {
        size_t len = (size_t)(n - off < sizeof ref ? n - off : sizeof ref);
        if (memcmp(p + off, ref, len) != 0)
            for (size_t i = 0; i < len; i++)
                if (p[off + i] != byte)
                    fail_msg("byte %llu of a %llu-byte block is 0x%02x, not 0x%02x",
                             (unsigned long long)(off + i), (unsigned long long)n, p[off + i],
                             byte);
    }
}
#endif

static void test_allocator_fuzz(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_HOST, 512 * MiB, "");
    static live_blk mem[MAX_LIVE];
    size_t nmem = 0;
    uint64_t rng = 123, total = 0, c = 0;
    int ooms = 0, allocs = 0, frees = 0, empties = 0;
    const uint64_t limit = (uint64_t)(1024.0 * 1024 * 1024 / (4 * 10)); /* elements */

    for (int step = 0; step < HOST_FUZZ_STEPS; step++) {
        /* while total >= 1 GiB / 40 elements: free (action 1); then one of
         * alloc, free, empty_cache with weights 1, 1 (if any), 0.1 */
        int action = 1;
        if (total < limit) {
            uint64_t r = h_rand_range(&rng, 0, nmem ? 21 : 11);
            action = r < 10 ? 0 : (r == 10 ? 2 : 1);
        } else {
            step--; /* forced frees are not steps */
        }
        if (action == 0 && nmem < MAX_LIVE) {
            uint64_t elems = h_rand_range(&rng, 0, 5) == 0
                                 ? h_rand_range(&rng, 1, 16 * 1024)                      /* small */
                                 : h_rand_range(&rng, 2 * 1024 * 1024 / 4, 20 * 1024 * 1024 / 4);
            uint64_t n = elems * 4;
            void *p = NULL;
            sublet_status st = h_try_malloc(e.a, n, 0, &p);
            if (st == SUBLET_ERR_OOM) { /* a 512 MiB "device" may run out */
                ooms++;
                continue;
            }
            assert_int_equal(st, SUBLET_OK);
            live_blk b = {.ptr = p, .n = n, .pattern = (uint8_t)(c * 37 + 1), .stream = 0};
            h_block_at(e.a, p, &b.base, &b.size, NULL, __FILE__, __LINE__);
            assert_int_equal(b.base, h_addr(p));
            assert_true(b.size >= n);
            assert_disjoint(mem, nmem, b.base, b.size);
            fill(b.ptr, n, b.pattern);
            mem[nmem++] = b;
            c++;
            total += elems;
            allocs++;
        } else if (action == 1 && nmem) {
            size_t idx = (size_t)h_rand_range(&rng, 0, nmem);
            live_blk b = mem[idx];
            memmove(&mem[idx], &mem[idx + 1], (nmem - idx - 1) * sizeof mem[0]);
            nmem--;
            verify(b.ptr, b.n, b.pattern);
            if (h_rand_range(&rng, 0, 10) == 0) /* a cross-stream use */
                h_record(e.a, b.ptr, 1);
            h_free(e.a, b.ptr);
            total -= b.n / 4;
            frees++;
        } else if (action == 2) {
            h_empty_cache(e.a);
            empties++;
        }
    }
    for (size_t i = 0; i < nmem; i++) {
        verify(mem[i].ptr, mem[i].n, mem[i].pattern);
        h_free(e.a, mem[i].ptr);
    }
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "reserved_bytes.all.current"), 0);
    assert_int_equal(h_stat(e.a, "allocation.all.current"), 0);
    print_message("fuzz: %d allocs, %d frees, %d empty_cache, %d OOM, %lld device allocs\n",
                  allocs, frees, empties, ooms, (long long)h_stat(e.a, "num_device_alloc"));
    h_env_fini(&e);
}

/* ---- two streams with record_stream on the sim ------------------------------------------ */

typedef struct pending_blk {
    uint64_t base, size;
    unsigned waiting; /* bit per stream whose work is not yet known done */
} pending_blk;

static void test_fuzz_streams(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, GiB, "");
    static live_blk live[MAX_LIVE];
    static pending_blk pend[MAX_LIVE * 2];
    static unsigned uses[MAX_LIVE]; /* recorded streams of live[i], bitmask */
    size_t nlive = 0, npend = 0;
    uint64_t rng = 2024;
    int ooms = 0;
    for (int step = 0; step < FUZZ_STEPS; step++) {
        uint64_t op = h_rand_range(&rng, 0, 100);
        uint64_t live_bytes = 0;
        for (size_t i = 0; i < nlive; i++)
            live_bytes += live[i].size;
        if (op < 45 && live_bytes > 850 * MiB)
            op = 50; /* keep the 1 GiB device from filling up with live blocks */
        if (op < 45 && nlive < MAX_LIVE) {
            sublet_stream s = h_rand_range(&rng, 0, 2);
            uint64_t n = h_rand_range(&rng, 0, 3) == 0 ? h_rand_range(&rng, 1, MiB + 1)
                                                       : h_rand_range(&rng, 2 * MiB, 20 * MiB);
            int64_t sync0 = h_stat(e.a, "num_sync_all_streams");
            void *p = NULL;
            sublet_status st = h_try_malloc(e.a, n, s, &p);
            if (h_stat(e.a, "num_sync_all_streams") != sync0)
                npend = 0; /* the OOM path waited for every stream */
            if (st == SUBLET_ERR_OOM) {
                ooms++;
                continue;
            }
            assert_int_equal(st, SUBLET_OK);
            live_blk b = {.ptr = p, .n = n, .stream = s};
            h_block_at(e.a, p, &b.base, &b.size, NULL, __FILE__, __LINE__);
            assert_true(b.size >= n);
            assert_int_equal(h_segment_of(e.a, b.base).stream, s);
            assert_disjoint(live, nlive, b.base, b.size);
            for (size_t i = 0; i < npend; i++)
                if (overlaps(b.base, b.size, pend[i].base, pend[i].size))
                    fail_msg("step %d: block 0x%llx reused before its streams completed", step,
                             (unsigned long long)pend[i].base);
            uses[nlive] = 0;
            live[nlive++] = b;
        } else if (op < 80 && nlive) {
            size_t idx = (size_t)h_rand_range(&rng, 0, nlive);
            live_blk b = live[idx];
            unsigned u = uses[idx];
            if (h_rand_range(&rng, 0, 2) == 0) {
                sublet_stream other = 1 - b.stream;
                h_record(e.a, b.ptr, other);
                u |= 1u << other;
            }
            live[idx] = live[nlive - 1];
            uses[idx] = uses[nlive - 1];
            nlive--;
            h_free(e.a, b.ptr);
            if (u)
                pend[npend++] = (pending_blk){b.base, b.size, u};
        } else if (op < 88 && nlive) {
            /* record a use through an interior pointer */
            size_t idx = (size_t)h_rand_range(&rng, 0, nlive);
            sublet_stream other = 1 - live[idx].stream;
            h_record(e.a, live[idx].ptr + h_rand_range(&rng, 0, live[idx].n), other);
            uses[idx] |= 1u << other;
        } else if (op < 97) {
            sublet_stream s = h_rand_range(&rng, 0, 2);
            sublet_sim_stream_complete(e.inner, s);
            for (size_t i = 0; i < npend;) {
                pend[i].waiting &= ~(1u << s);
                if (!pend[i].waiting)
                    pend[i] = pend[--npend];
                else
                    i++;
            }
            if (h_rand_range(&rng, 0, 2) == 0)
                h_process_events(e.a);
        } else {
            h_empty_cache(e.a);
            npend = 0;
        }
    }
    for (size_t i = 0; i < nlive; i++)
        h_free(e.a, live[i].ptr);
    h_empty_cache(e.a);
    assert_int_equal(h_stat(e.a, "active.all.current"), 0);
    assert_int_equal(sublet_sim_used(e.inner), 0);
    print_message("stream fuzz: %d OOM, %lld syncs, %lld device allocs\n", ooms,
                  (long long)h_stat(e.a, "num_sync_all_streams"),
                  (long long)h_stat(e.a, "num_device_alloc"));
    h_env_fini(&e);
}

/* ---- a reference model, in lockstep ------------------------------------------------------
 *
 * A naive re-statement of the rules' policy (docs/rules.md §1–§4, §7.3): blocks in
 * per-segment arrays, linear best-fit search, its own sim backend for
 * segment addresses (the sim is deterministic, so the same sequence of
 * segment allocs and frees gives the same addresses).  Driven with the same
 * random operations as the engine, it must return the same pointers and
 * statuses, hold the same segments and blocks, and count the same statistics.
 * Only inactive_split{,_bytes} peak/allocated/freed are not compared: they
 * depend on the order in which completed events of different streams are
 * processed, which PyTorch leaves unspecified (an unordered_map). */

typedef struct mblock {
    uint64_t addr, size, req, gc_base;
    int allocated, nev, oversize;
    unsigned uses; /* bit per stream (0, 1) */
} mblock;

typedef struct mseg {
    uint64_t addr, size;
    uint64_t order; /* creation order under PyTorch 2.14 and later, else 0 */
    sublet_stream stream;
    int small, oversize;
    mblock *b;
    size_t nb, cap;
} mseg;

typedef struct mevent {
    uint64_t seq, block;
} mevent;

#define MQ 4096
typedef struct mmodel {
    sublet_backend *sim;
    uint64_t ms, R, capacity;
    double gc_thr;
    int limit;
    uint64_t allowed, total;
    uint64_t clock[2]; /* [0] small pool, [1] large pool */
    mseg segs[512];
    size_t nsegs;
    uint64_t made; /* segments created (their order, from 2.14 on) */
    mevent q[2][MQ];
    size_t qn[2];
    uint64_t recorded[2], completed[2];
    sublet_stats st;
    const sublet_settings *set;
    long gc_frees, avail_frees; /* coverage counters */
} mmodel;

static int mk(const mseg *g) { return g->small ? SUBLET_POOL_SMALL : SUBLET_POOL_LARGE; }
static int m_gc_active(const mmodel *m) { return m->limit && m->gc_thr > 0.0; }
static int m_free_blk(const mblock *b) { return !b->allocated && b->nev == 0 && !b->uses; }

static void m_insert_block(mseg *g, size_t at, mblock b)
{
    if (g->nb == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->b = realloc(g->b, g->cap * sizeof *g->b);
        assert_non_null(g->b);
    }
    memmove(&g->b[at + 1], &g->b[at], (g->nb - at) * sizeof *g->b);
    g->b[at] = b;
    g->nb++;
}

static void m_remove_block(mseg *g, size_t at)
{
    memmove(&g->b[at], &g->b[at + 1], (g->nb - at - 1) * sizeof *g->b);
    g->nb--;
}

/* The segment and block holding addr; 0 (and both indices 0) when none does. */
static int m_find(mmodel *m, uint64_t addr, size_t *gi, size_t *bi)
{
    *gi = *bi = 0;
    for (size_t i = 0; i < m->nsegs; i++) {
        mseg *g = &m->segs[i];
        if (addr < g->addr || addr >= g->addr + g->size)
            continue;
        for (size_t k = 0; k < g->nb; k++)
            if (addr >= g->b[k].addr && addr < g->b[k].addr + g->b[k].size) {
                *gi = i;
                *bi = k;
                return 1;
            }
    }
    return 0;
}

/* §4.4 */
static void m_free_block(mmodel *m, size_t gi, size_t bi)
{
    mseg *g = &m->segs[gi];
    int kind = mk(g);
    int64_t orig = (int64_t)g->b[bi].size, req = (int64_t)g->b[bi].req, dn = 0, db = 0;
    if (bi > 0 && m_free_blk(&g->b[bi - 1])) { /* prev */
        dn--;
        db -= (int64_t)g->b[bi - 1].size;
        g->b[bi].addr = g->b[bi - 1].addr;
        g->b[bi].size += g->b[bi - 1].size;
        m_remove_block(g, bi - 1);
        bi--;
    }
    if (bi + 1 < g->nb && m_free_blk(&g->b[bi + 1])) { /* next */
        dn--;
        db -= (int64_t)g->b[bi + 1].size;
        g->b[bi].size += g->b[bi + 1].size;
        m_remove_block(g, bi + 1);
    }
    if (g->nb > 1) {
        dn++;
        db += (int64_t)g->b[bi].size;
    }
    g->b[bi].gc_base = m->clock[!g->small];
    h_arr_add(m->st.inactive_split, kind, dn);
    h_arr_add(m->st.inactive_split_bytes, kind, db);
    h_arr_add(m->st.active, kind, -1);
    h_arr_add(m->st.active_bytes, kind, -orig);
    h_arr_add(m->st.requested_bytes, kind, -req);
}

static void m_release_seg(mmodel *m, size_t gi)
{
    mseg *g = &m->segs[gi];
    assert_int_equal(m->sim->ops->segment_free(m->sim, g->addr, g->size), SUBLET_OK);
    m->st.num_device_free++;
    m->total -= g->size;
    h_arr_add(m->st.segment, mk(g), -1);
    h_arr_add(m->st.reserved_bytes, mk(g), -(int64_t)g->size);
    if (g->oversize)
        h_stat_dec(&m->st.oversize_segments, 1);
    free(g->b);
    m->segs[gi] = m->segs[--m->nsegs];
}

static void m_process(mmodel *m)
{
    for (int s = 0; s < 2; s++)
        while (m->qn[s] && m->q[s][0].seq <= m->completed[s]) {
            uint64_t blk = m->q[s][0].block;
            memmove(&m->q[s][0], &m->q[s][1], (m->qn[s] - 1) * sizeof m->q[s][0]);
            m->qn[s]--;
            size_t gi, bi;
            assert_true(m_find(m, blk, &gi, &bi));
            if (--m->segs[gi].b[bi].nev == 0)
                m_free_block(m, gi, bi);
        }
}

/* §3.5: synchronize every event, then every free whole segment */
static void m_release_cached(mmodel *m)
{
    m->st.num_sync_all_streams++;
    for (int s = 0; s < 2; s++)
        if (m->qn[s] && m->q[s][m->qn[s] - 1].seq > m->completed[s])
            m->completed[s] = m->q[s][m->qn[s] - 1].seq;
    m_process(m);
    for (size_t i = 0; i < m->nsegs;)
        if (m->segs[i].nb == 1 && m_free_blk(&m->segs[i].b[0]))
            m_release_seg(m, i);
        else
            i++;
}

/* Is (s1, o1, a1) before (s2, o2, a2): size, then segment order (from 2.14
 * on; 0 before), then address. */
static int m_key_less(uint64_t s1, uint64_t o1, uint64_t a1, uint64_t s2, uint64_t o2,
                      uint64_t a2)
{
    return s1 != s2 ? s1 < s2 : o1 != o2 ? o1 < o2 : a1 < a2;
}

/* best fit by (size, order, addr) among free blocks of a pool and stream;
 * the predicate selects size >= lo (first) or the largest below a key */
static int m_lower_bound(mmodel *m, int small, sublet_stream s, uint64_t lo, size_t *gi,
                         size_t *bi)
{
    int found = 0;
    uint64_t bs = 0, bo = 0, ba = 0;
    for (size_t i = 0; i < m->nsegs; i++) {
        mseg *g = &m->segs[i];
        if (g->small != small || g->stream != s)
            continue;
        for (size_t k = 0; k < g->nb; k++) {
            mblock *b = &g->b[k];
            if (!m_free_blk(b) || b->size < lo)
                continue;
            if (!found || m_key_less(b->size, g->order, b->addr, bs, bo, ba)) {
                found = 1;
                bs = b->size;
                bo = g->order;
                ba = b->addr;
                *gi = i;
                *bi = k;
            }
        }
    }
    return found;
}

static int m_largest_below(mmodel *m, int small, sublet_stream s, int bounded, uint64_t size,
                           uint64_t order, uint64_t addr, size_t *gi, size_t *bi)
{
    int found = 0;
    uint64_t bs = 0, bo = 0, ba = 0;
    for (size_t i = 0; i < m->nsegs; i++) {
        mseg *g = &m->segs[i];
        if (g->small != small || g->stream != s)
            continue;
        for (size_t k = 0; k < g->nb; k++) {
            mblock *b = &g->b[k];
            if (!m_free_blk(b))
                continue;
            if (bounded && !m_key_less(b->size, g->order, b->addr, size, order, addr))
                continue;
            if (!found || m_key_less(bs, bo, ba, b->size, g->order, b->addr)) {
                found = 1;
                bs = b->size;
                bo = g->order;
                ba = b->addr;
                *gi = i;
                *bi = k;
            }
        }
    }
    return found;
}

/* §3.4 */
static int m_release_available(mmodel *m, int small, sublet_stream s, uint64_t size)
{
    if (m->ms == SUBLET_SIZE_UNLIMITED)
        return 0;
    uint64_t key = size < m->ms ? m->ms : size;
    size_t gi, bi;
    if (m_lower_bound(m, small, s, key, &gi, &bi)) {
        assert_int_equal(m->segs[gi].nb, 1);
        m_release_seg(m, gi);
        m->avail_frees++;
        return 1;
    }
    uint64_t released = 0;
    int have = m_largest_below(m, small, s, 0, 0, 0, 0, &gi, &bi);
    while (have && released < key && m->segs[gi].b[bi].size >= m->ms) {
        uint64_t cs = m->segs[gi].b[bi].size, co = m->segs[gi].order, ca = m->segs[gi].b[bi].addr;
        if (m->segs[gi].nb == 1) {
            m_release_seg(m, gi);
            m->avail_frees++;
            released += cs;
        }
        have = m_largest_below(m, small, s, 1, cs, co, ca, &gi, &bi);
    }
    return released >= key;
}

/* §3.6 */
static void m_gc(mmodel *m)
{
    uint64_t thr = (uint64_t)(m->gc_thr * (double)m->allowed);
    if (m->total <= thr)
        return;
    uint64_t target = m->total - thr, reclaimed = 0, total_age = 0;
    int64_t count = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        if (!m->segs[i].small && m->segs[i].nb == 1 && m_free_blk(&m->segs[i].b[0])) {
            total_age += m->clock[1] - m->segs[i].b[0].gc_base;
            count++;
        }
    int freed = 1;
    while (count > 0 && reclaimed < target && freed) {
        double avg = (double)total_age / (double)count;
        freed = 0;
        for (size_t i = 0; i < m->nsegs;) {
            mseg *g = &m->segs[i];
            if (!g->small && g->nb == 1 && m_free_blk(&g->b[0])) {
                uint64_t age = m->clock[1] - g->b[0].gc_base;
                if ((double)age >= avg) {
                    freed = 1;
                    reclaimed += g->size;
                    total_age -= age;
                    count--;
                    m->gc_frees++;
                    m_release_seg(m, i);
                    continue;
                }
            }
            i++;
        }
    }
}

/* §3.3; returns the new segment's index or -1 */
static long m_alloc_block(mmodel *m, int small, sublet_stream s, uint64_t alloc_size, int retry)
{
    if (retry)
        m->st.num_alloc_retries++;
    if (m->limit && m->total + alloc_size > m->allowed)
        return -1;
    uint64_t addr = 0;
    if (m->sim->ops->segment_alloc(m->sim, alloc_size, 0, &addr) != SUBLET_OK)
        return -1;
    assert_true(m->nsegs < 512);
    mseg *g = &m->segs[m->nsegs];
    *g = (mseg){.addr = addr, .size = alloc_size, .stream = s, .small = small,
                .order = m->set->pytorch_version != SUBLET_PYTORCH_NEWEST &&
                         sublet_settings_since(m->set, SUBLET_PYTORCH_VERSION(2, 14)) ? ++m->made
                                                                                      : 0};
    m_insert_block(g, 0, (mblock){.addr = addr, .size = alloc_size});
    g->oversize = alloc_size >= m->ms;
    m->total += alloc_size;
    h_arr_add(m->st.segment, mk(g), 1);
    h_arr_add(m->st.reserved_bytes, mk(g), (int64_t)alloc_size);
    if (g->oversize)
        h_stat_inc(&m->st.oversize_segments, 1);
    m->st.num_device_alloc++;
    return (long)m->nsegs++;
}

static sublet_status m_malloc(mmodel *m, uint64_t n, sublet_stream s, uint64_t *out)
{
    *out = 0;
    m_process(m);
    uint64_t size = sublet_round_size(m->set, n);
    int small = size <= MiB;
    uint64_t alloc_size = sublet_allocation_size(m->set, size);
    if (m_gc_active(m))
        m->clock[!small]++;
    size_t gi = 0, bi = 0;
    int found = m_lower_bound(m, small, s, size, &gi, &bi);
    if (found) {
        uint64_t cs = m->segs[gi].b[bi].size;
        if ((size < m->ms && cs >= m->ms) || (size >= m->ms && cs >= size + m->R))
            found = 0;
    }
    if (!found) {
        if (m_gc_active(m))
            m_gc(m);
        long ng = m_alloc_block(m, small, s, alloc_size, 0);
        if (ng < 0 && m_release_available(m, small, s, size))
            ng = m_alloc_block(m, small, s, alloc_size, 0);
        if (ng < 0) {
            m_release_cached(m);
            ng = m_alloc_block(m, small, s, alloc_size, 1);
        }
        if (ng < 0) {
            m->st.num_ooms++;
            return SUBLET_ERR_OOM;
        }
        gi = (size_t)ng;
        bi = 0;
    }
    /* §3.9 */
    mseg *g = &m->segs[gi];
    int kind = mk(g);
    int already = g->nb > 1;
    uint64_t remaining = g->b[bi].size - size;
    int split = small ? remaining >= 512 : (size < m->ms && remaining > MiB);
    if (split) {
        mblock rest = g->b[bi];
        rest.addr += size;
        rest.size = remaining;
        rest.gc_base = m->clock[!small];
        g->b[bi].size = size;
        m_insert_block(g, bi + 1, rest);
        if (already) {
            h_arr_add(m->st.inactive_split_bytes, kind, -(int64_t)size);
        } else {
            h_arr_add(m->st.inactive_split, kind, 1);
            h_arr_add(m->st.inactive_split_bytes, kind, (int64_t)remaining);
        }
    } else if (already) {
        h_arr_add(m->st.inactive_split, kind, -1);
        h_arr_add(m->st.inactive_split_bytes, kind, -(int64_t)g->b[bi].size);
    }
    mblock *b = &g->b[bi];
    b->allocated = 1;
    b->req = n;
    b->oversize = b->size >= m->ms;
    h_arr_add(m->st.allocation, kind, 1);
    h_arr_add(m->st.allocated_bytes, kind, (int64_t)b->size);
    h_arr_add(m->st.active, kind, 1);
    h_arr_add(m->st.active_bytes, kind, (int64_t)b->size);
    h_arr_add(m->st.requested_bytes, kind, (int64_t)n);
    if (b->oversize)
        h_stat_inc(&m->st.oversize_allocations, 1);
    *out = b->addr;
    return SUBLET_OK;
}

static void m_free(mmodel *m, uint64_t addr)
{
    size_t gi, bi;
    assert_true(m_find(m, addr, &gi, &bi));
    mseg *g = &m->segs[gi];
    mblock *b = &g->b[bi];
    assert_true(b->allocated && b->addr == addr);
    b->allocated = 0;
    h_arr_add(m->st.allocation, mk(g), -1);
    h_arr_add(m->st.allocated_bytes, mk(g), -(int64_t)b->size);
    if (b->oversize)
        h_stat_dec(&m->st.oversize_allocations, 1);
    b->oversize = 0;
    if (!b->uses) {
        m_free_block(m, gi, bi);
        return;
    }
    for (int s = 0; s < 2; s++)
        if (b->uses & (1u << s)) {
            assert_true(m->qn[s] < MQ);
            m->q[s][m->qn[s]++] = (mevent){++m->recorded[s], addr};
            b->nev++;
        }
    b->uses = 0;
}

static void m_record(mmodel *m, uint64_t addr, sublet_stream s)
{
    size_t gi, bi;
    if (m_find(m, addr, &gi, &bi) && m->segs[gi].b[bi].allocated && m->segs[gi].stream != s)
        m->segs[gi].b[bi].uses |= 1u << s;
}

typedef struct cmp_ctx {
    mmodel *m;
    size_t seen;
    int step;
} cmp_ctx;

static void cmp_seg(void *user, const sublet_segment_view *sv)
{
    cmp_ctx *c = user;
    mseg *g = NULL;
    for (size_t i = 0; i < c->m->nsegs && !g; i++)
        if (c->m->segs[i].addr == sv->addr)
            g = &c->m->segs[i];
    if (!g || g->size != sv->total_size || g->nb != sv->nblocks || g->small != sv->is_small ||
        g->stream != sv->stream)
        fail_msg("step %d: segment 0x%llx differs from the model", c->step,
                 (unsigned long long)sv->addr);
    for (size_t k = 0; k < sv->nblocks; k++) {
        const sublet_block_view *v = &sv->blocks[k];
        const mblock *b = &g->b[k];
        sublet_block_state want = b->allocated ? SUBLET_BLOCK_ACTIVE_ALLOCATED
                                  : m_free_blk(b) ? SUBLET_BLOCK_INACTIVE
                                                  : SUBLET_BLOCK_ACTIVE_PENDING_FREE;
        if (v->addr != b->addr || v->size != b->size || v->state != want)
            fail_msg("step %d: block %zu of segment 0x%llx: engine 0x%llx+%llu state %d, "
                     "model 0x%llx+%llu state %d",
                     c->step, k, (unsigned long long)sv->addr, (unsigned long long)v->addr,
                     (unsigned long long)v->size, (int)v->state, (unsigned long long)b->addr,
                     (unsigned long long)b->size, (int)want);
    }
    c->seen++;
}

static void compare_model(h_env *e, mmodel *m, int step)
{
    sublet_stats got;
    sublet_stats_read(e->a, &got);
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) { /* order-dependent, see above */
        got.inactive_split[k].peak = m->st.inactive_split[k].peak;
        got.inactive_split[k].allocated = m->st.inactive_split[k].allocated;
        got.inactive_split[k].freed = m->st.inactive_split[k].freed;
        got.inactive_split_bytes[k].peak = m->st.inactive_split_bytes[k].peak;
        got.inactive_split_bytes[k].allocated = m->st.inactive_split_bytes[k].allocated;
        got.inactive_split_bytes[k].freed = m->st.inactive_split_bytes[k].freed;
    }
    h_stats_equal(&m->st, &got);
    cmp_ctx c = {m, 0, step};
    sublet_segments_walk(e->a, cmp_seg, &c);
    if (c.seen != m->nsegs)
        fail_msg("step %d: engine has %zu segments, model %zu", step, c.seen, m->nsegs);
}

static void run_model(const char *conf, double fraction, uint64_t seed, int steps, size_t maxlive)
{
    const uint64_t cap = GiB;
    h_env e;
    h_env_init(&e, H_SIM, cap, conf);
    static mmodel m;
    memset(&m, 0, sizeof m);
    sublet_settings set;
    sublet_settings_get(e.a, &set);
    m.set = &set;
    m.ms = set.max_split_size;
    m.R = set.max_non_split_rounding;
    m.gc_thr = set.garbage_collection_threshold;
    m.capacity = cap;
    assert_int_equal(sublet_sim_create(cap, &m.sim), SUBLET_OK);
    if (fraction < 1.0) {
        assert_int_equal(sublet_memory_fraction_set(e.a, fraction), SUBLET_OK);
        m.limit = 1;
        m.allowed = (uint64_t)(fraction * (double)cap);
    }
    sublet_stats_read(e.a, &m.st);
    static uint64_t live[64];
    size_t nlive = 0;
    uint64_t rng = seed;
    int ooms = 0;
    steps /= MODEL_SCALE;
    for (int step = 0; step < steps; step++) {
        uint64_t op = h_rand_range(&rng, 0, 100);
        if (op < 40 && nlive < maxlive) {
            sublet_stream s = h_rand_range(&rng, 0, 10) < 3;
            uint64_t cls = h_rand_range(&rng, 0, 10), n;
            if (cls < 3)
                n = h_rand_range(&rng, 1, MiB + 1);
            else if (cls < 7)
                n = h_rand_range(&rng, MiB, 10 * MiB);
            else if (cls < 9)
                n = h_rand_range(&rng, 10 * MiB, 40 * MiB);
            else
                n = h_rand_range(&rng, 40 * MiB, 160 * MiB);
            void *p = NULL;
            sublet_status st = h_try_malloc(e.a, n, s, &p);
            uint64_t mp = 0;
            sublet_status mst = m_malloc(&m, n, s, &mp);
            if (st != mst || h_addr(p) != mp)
                fail_msg("step %d: malloc(%llu, %d): engine %s 0x%llx, model %s 0x%llx", step,
                         (unsigned long long)n, (int)s, sublet_status_name(st),
                         (unsigned long long)h_addr(p), sublet_status_name(mst),
                         (unsigned long long)mp);
            if (st == SUBLET_OK)
                live[nlive++] = mp;
            else
                ooms++;
        } else if (op < 70 && nlive) {
            size_t i = (size_t)h_rand_range(&rng, 0, nlive);
            uint64_t p = live[i];
            live[i] = live[--nlive];
            if (h_rand_range(&rng, 0, 10) < 3) {
                sublet_stream other = h_segment_of(e.a, p).stream ^ 1;
                h_record(e.a, (void *)(uintptr_t)p, other);
                m_record(&m, p, other);
            }
            h_free(e.a, (void *)(uintptr_t)p);
            m_free(&m, p);
        } else if (op < 80 && nlive) {
            size_t i = (size_t)h_rand_range(&rng, 0, nlive);
            sublet_stream s = h_rand_range(&rng, 0, 2);
            uint64_t at = live[i] + 512 * h_rand_range(&rng, 0, 4); /* maybe interior */
            uint64_t base = 0, size = 0;
            h_block_at(e.a, (void *)(uintptr_t)live[i], &base, &size, NULL, __FILE__, __LINE__);
            if (at >= base + size)
                at = base;
            h_record(e.a, (void *)(uintptr_t)at, s);
            m_record(&m, at, s);
        } else if (op < 92) {
            /* complete one stream and look at once, so that completions
             * of different streams are never processed together */
            sublet_stream s = h_rand_range(&rng, 0, 2);
            sublet_sim_stream_complete(e.inner, s);
            m.completed[s] = m.recorded[s];
            h_process_events(e.a);
            m_process(&m);
        } else if (op < 95) {
            h_empty_cache(e.a);
            m_release_cached(&m);
        } else {
            h_process_events(e.a);
            m_process(&m);
        }
        compare_model(&e, &m, step);
    }
    for (size_t i = 0; i < nlive; i++) {
        h_free(e.a, (void *)(uintptr_t)live[i]);
        m_free(&m, live[i]);
    }
    h_empty_cache(e.a);
    m_release_cached(&m);
    compare_model(&e, &m, steps);
    assert_int_equal(m.nsegs, 0);
    print_message("model [%s, fraction %.2f]: %d steps, %d OOM, %lld device allocs, %lld "
                  "retries, %ld GC frees, %ld oversize-release frees\n",
                  conf, fraction, steps, ooms, (long long)m.st.num_device_alloc,
                  (long long)m.st.num_alloc_retries, m.gc_frees, m.avail_frees);
    sublet_backend_destroy(m.sim);
    h_env_fini(&e);
}

static void test_model_default(void **state)
{
    (void)state;
    run_model("", 1.0, 11, 4000, 24);
}

static void test_model_max_split(void **state)
{
    (void)state;
    run_model("max_split_size_mb:40", 0.7, 12, 4000, 24);
    /* under pressure: the OOM path all the time */
    run_model("max_split_size_mb:40", 0.5, 15, 3000, 64);
    /* 2.14 named: equal sizes are taken by segment age, not by address */
    run_model("pytorch_version:2.14,max_split_size_mb:40", 0.5, 15, 3000, 64);
}

static void test_model_gc(void **state)
{
    (void)state;
    run_model("garbage_collection_threshold:0.6", 0.8, 13, 4000, 24);
}

static void test_model_everything(void **state)
{
    (void)state;
    run_model("roundup_power2_divisions:4,max_split_size_mb:64,max_non_split_rounding_mb:30,"
              "garbage_collection_threshold:0.5",
              0.9, 14, 4000, 24);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocator_fuzz),
        cmocka_unit_test(test_fuzz_streams),
        cmocka_unit_test(test_model_default),
        cmocka_unit_test(test_model_max_split),
        cmocka_unit_test(test_model_gc),
        cmocka_unit_test(test_model_everything),
    };
    if (getenv("SUBLET_TEST_FILTER")) /* e.g. SUBLET_TEST_FILTER='test_model_*' */
        cmocka_set_test_filter(getenv("SUBLET_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
