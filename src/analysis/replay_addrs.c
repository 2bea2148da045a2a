/* sublet — the replay's address map: where each live recorded allocation
 * is in the engine (replay_internal.h, rf_addrs).
 *
 * A faithful replay places every block at its recorded address, so the map
 * is the identity and a table of it costs an insert at each alloc and a
 * lookup and delete at each free, both in a table as large as the live
 * blocks, for nothing: the engine's pointer map already knows which
 * addresses it holds.  So the map starts as the identity, kept by no table:
 *
 *   - an alloc placed at its recorded address adds nothing;
 *   - a free asks the engine whether it holds the address as an allocated
 *     block (sublet_block_info; the replay's immediate frees let
 *     sublet_free itself answer, which changes nothing when it does not);
 *   - the first alloc placed elsewhere, or not made (an OOM, a released
 *     pool), builds the table from the engine's allocated blocks, each
 *     mapped to itself, and the table is kept from then on.
 *
 * While the identity holds, the recorded allocations alive and the blocks
 * the engine holds allocated are the same set: each recorded alloc made
 * one block at its own address, each recorded free of a live one freed
 * that block (a deferred free's block is no longer allocated either), and
 * nothing else allocates in the replay's engine (its observers only read
 * it, sublet/replay.h).  A recorded free of anything else (never allocated,
 * freed twice, inside a block) finds no allocated block there, as it would
 * find no entry in the table.  The build checks that it met as many blocks
 * as the engine counts allocations. */
#include <stdlib.h>
#include <string.h>

#include "analysis/replay_internal.h"
#include "sublet/sublet.h"

/* ---- the hash map -------------------------------------------------------------------- */

/* Fibonacci hashing: the top bits of key * 2^64/phi depend on every key bit,
 * so addresses that differ only above their alignment spread evenly. */
static inline size_t map_home(const rf_map *m, uint64_t key)
{
    return (size_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> m->shift);
}

void rf_map_fini(rf_map *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

int rf_map_alloc(rf_map *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots)
        return 0;
    m->cap = cap;
    m->shift = 64;
    for (size_t c = cap; c > 1; c >>= 1)
        m->shift--;
    return 1;
}

/* The slot holding key (nonzero), or the empty slot where it would go. */
static inline rf_slot *map_slot(const rf_map *m, uint64_t key)
{
    size_t mask = m->cap - 1, i = map_home(m, key);
    while (m->slots[i].key != key && m->slots[i].key != 0)
        i = (i + 1) & mask;
    return &m->slots[i];
}

static int map_grow(rf_map *m)
{
    rf_map old = *m;
    if (!rf_map_alloc(m, old.cap ? old.cap * 2 : 1024)) {
        *m = old;
        return 0;
    }
    m->has_zero = old.has_zero;
    m->zero_val = old.zero_val;
    m->count = old.has_zero;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key != 0)
            rf_map_put(m, old.slots[i].key, old.slots[i].val);
    rf_map_fini(&old);
    return 1;
}

int rf_map_put(rf_map *m, uint64_t key, uint64_t val)
{
    if (key == 0) {
        m->count += !m->has_zero;
        m->has_zero = 1;
        m->zero_val = val;
        return 1;
    }
    /* load <= 1/2: a miss (every alloc's put) probes ~2.5 slots, not ~8.5 */
    if ((m->count + 1) * 2 > m->cap && !map_grow(m))
        return 0;
    rf_slot *e = map_slot(m, key);
    if (e->key == 0) {
        e->key = key;
        m->count++;
    }
    e->val = val;
    return 1;
}

int rf_map_take(rf_map *m, uint64_t key, uint64_t *val)
{
    if (!m->count) /* also covers no table yet (cap 0) */
        return 0;
    if (key == 0) {
        if (!m->has_zero)
            return 0;
        *val = m->zero_val;
        m->has_zero = 0;
        m->count--;
        return 1;
    }
    rf_slot *e = map_slot(m, key);
    if (e->key == 0)
        return 0;
    *val = e->val;
    m->count--;
    /* Shift back every later entry of the cluster that may now be unreachable. */
    size_t mask = m->cap - 1, i = (size_t)(e - m->slots);
    for (size_t j = (i + 1) & mask; m->slots[j].key != 0; j = (j + 1) & mask) {
        size_t home = map_home(m, m->slots[j].key);
        int reachable = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (reachable)
            continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].key = 0;
    return 1;
}

/* ---- the address map ------------------------------------------------------------------ */

int rf_addrs_init(rf_addrs *m, size_t cap, int identity)
{
    memset(m, 0, sizeof *m);
    m->cap = cap;
    m->identity = identity != 0;
    return m->identity || rf_map_alloc(&m->map, cap);
}

void rf_addrs_fini(rf_addrs *m)
{
    rf_map_fini(&m->map);
    m->identity = 0;
}

typedef struct build {
    rf_map *map;
    uint64_t blocks;
    int nomem;
} build;

static void put_allocated(void *user, const sublet_segment_view *seg)
{
    build *b = user;
    for (size_t i = 0; i < seg->nblocks; i++) {
        if (seg->blocks[i].state != SUBLET_BLOCK_ACTIVE_ALLOCATED)
            continue;
        b->blocks++;
        if (!rf_map_put(b->map, seg->blocks[i].addr, seg->blocks[i].addr))
            b->nomem = 1;
    }
}

/* The table of the identity: every block `a` holds allocated, to itself. */
static int leave_identity(rf_addrs *m, sublet_allocator *a)
{
    if (!rf_map_alloc(&m->map, m->cap))
        return 0;
    build b = {&m->map, 0, 0};
    sublet_segments_walk(a, put_allocated, &b);
    sublet_stats st;
    sublet_stats_read(a, &st);
    /* (a walk that could not hold a segment's blocks skips the rest) */
    if (b.nomem || b.blocks != (uint64_t)st.allocation[SUBLET_POOL_ALL].current) {
        rf_map_fini(&m->map);
        return 0;
    }
    m->identity = 0;
    return 1;
}

int rf_addrs_put_table(rf_addrs *m, sublet_allocator *a, uint64_t rec, uint64_t eng)
{
    if (m->identity) {
        if (eng == rec && eng != 0)
            return 1;
        if (!leave_identity(m, a))
            return 0;
        /* the table holds eng, allocated just now, as a recorded address of
         * its own: it is rec's */
        uint64_t unused;
        if (eng != 0)
            rf_map_take(&m->map, eng, &unused);
    }
    return rf_map_put(&m->map, rec, eng);
}

int rf_addrs_take(rf_addrs *m, sublet_allocator *a, uint64_t rec, uint64_t *eng)
{
    if (!m->identity)
        return rf_map_take(&m->map, rec, eng);
    uint64_t base = 0;
    if (rec == 0 || sublet_block_info(a, (const void *)(uintptr_t)rec, &base, NULL, NULL) !=
                        SUBLET_OK || base != rec)
        return 0;
    *eng = rec;
    return 1;
}

/* ---- the prelude's rows in address order ---------------------------------------- */

static int cmp_seg(const void *a, const void *b)
{
    const rf_seg_ref *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_ev_addr(const void *a, const void *b)
{
    const sublet_trace_event *x = *(const sublet_trace_event *const *)a;
    const sublet_trace_event *y = *(const sublet_trace_event *const *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Recorded preludes come sorted by address: then the sorts are skipped.
 * The order is the one a stable sort would leave; ties (two prelude rows at
 * one address, which no consistent prelude has) keep their trace order. */
void rf_sort_segs_by_addr(rf_seg_ref *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i].addr < v[i - 1].addr) {
            qsort(v, n, sizeof *v, cmp_seg);
            return;
        }
}

void rf_sort_rows_by_addr(const sublet_trace_event **v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i]->addr < v[i - 1]->addr) {
            qsort(v, n, sizeof *v, cmp_ev_addr);
            return;
        }
}

const rf_seg_ref *rf_seg_containing(const rf_seg_ref *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || addr - v[lo - 1].addr >= v[lo - 1].size)
        return NULL;
    return &v[lo - 1];
}
