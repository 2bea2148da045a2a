/* sublet — the private pools of a replay (docs/replay.md "Private pools";
 * sublet/replay.h): which pool each row is in, driving an alloc in its pool,
 * releasing a pool when the recording shows it was freeable, and the
 * per-pool fidelity (sublet_replay_result.pools).
 *
 * The pool of a row is the trace's (sublet_trace_event.pool_id: an entry's
 * pool_id, or rebuilt by the snapshot reader from the segments'
 * segment_pool_id).  The engine is driven as PyTorch was:
 *
 *   - an alloc in pool P ran inside a capture or use_mem_pool.  P is created
 *     at its first alloc (sublet_pool_incref: the id as recorded, use count
 *     1, the replay's own use), and the malloc runs between
 *     sublet_pool_begin_allocate(P, stream filter, the row's stream) and
 *     sublet_pool_end_allocate (+ the release of the use the begin added):
 *     that malloc and no other goes to P, with process_events and the OOM
 *     path's release-all skipped, as during a capture;
 *   - a free needs nothing: the engine returns a block to its own pool;
 *   - a pool's release (graph reset, MemPool deleted) is not recorded; only
 *     a freeable pool's segments are ever freed, so before a release run
 *     that frees one of P's segments P drops the replay's use (freeable
 *     from then on; a later alloc in P is the caller's row error);
 *   - a release run with a default-pool segment is empty_cache (or the OOM
 *     path's release: the same set); one of private pools' segments alone is
 *     PyTorch's release with the default pools skipped (a capture or
 *     use_mem_pool active) or of one MemPool (its destructor): each of those
 *     pools is released alone (sublet_pool_empty_cache).
 *
 * The per-pool fidelity of an alloc is the difference its judgement made
 * to the totals (replay_fidelity.c's rf_judge_alloc), so the two never
 * disagree.  pools[0] of the result, the default pools, is counted from
 * the first row on; npools says whether the table is shown (0: no private
 * pool met). */
#include <stdlib.h>
#include <string.h>

#include "analysis/replay_internal.h"
#include "sublet/pool.h"

long rf_pools_of_private(rf_pools *p, sublet_replay_result *r, const sublet_trace_event *e)
{
    for (size_t k = 1; k < p->n; k++)
        if (p->v[k].id[0] == e->pool_id[0] && p->v[k].id[1] == e->pool_id[1])
            return (long)k;
    if (p->n + 2 > p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 8;
        rf_pool *n = realloc(p->v, nc * sizeof *n);
        if (!n)
            return -1;
        p->v = n;
        p->cap = nc;
    }
    if (p->n == 0) { /* the default pools, first of the table */
        p->v[0] = (rf_pool){{0, 0}, 1, 0, 0, 0};
        p->n = 1;
    }
    rf_pool *pl = &p->v[p->n];
    *pl = (rf_pool){{e->pool_id[0], e->pool_id[1]}, 0, 0, -1, 0};
    if (r->npools == 0)
        r->npools = 1; /* pools[0] was counted all along (set up by the driver) */
    if (r->npools < SUBLET_REPLAY_MAX_POOLS) {
        pl->slot = (int)r->npools++;
        sublet_replay_pool_fidelity *pf = &r->pools[pl->slot];
        memset(pf, 0, sizeof *pf);
        pf->pool_id[0] = e->pool_id[0];
        pf->pool_id[1] = e->pool_id[1];
        pf->first_decision_mismatch = pf->first_address_mismatch = pf->released_at =
            SUBLET_REPLAY_NONE;
    } else {
        r->pools_dropped++;
    }
    return (long)p->n++;
}

void rf_pools_judge(const rf_pools *p, sublet_replay_result *r, long k, size_t i, rf_judged j)
{
    int slot = k == 0 ? 0 : p->v[k].slot;
    if (slot < 0)
        return;
    sublet_replay_pool_fidelity *pf = &r->pools[slot];
    pf->allocs_compared++;
    pf->decisions_matched += j.decision;
    pf->segment_sizes_matched += j.size;
    pf->addresses_matched += j.address;
    pf->recorded_segment_allocs += j.rec_seg;
    pf->engine_segment_allocs += j.eng_seg;
    if (!j.decision && pf->first_decision_mismatch == SUBLET_REPLAY_NONE)
        pf->first_decision_mismatch = i;
    if (!j.address && pf->first_address_mismatch == SUBLET_REPLAY_NONE)
        pf->first_address_mismatch = i;
}

sublet_status rf_pool_malloc(rf_pools *p, sublet_replay_result *r, sublet_allocator *a,
                             const sublet_trace_event *e, uint64_t size, long *k, void **out)
{
    *k = rf_pools_of(p, r, e);
    if (*k < 0)
        return SUBLET_ERR_NO_MEMORY;
    if (*k == 0)
        return sublet_malloc(a, size, e->stream, out);
    rf_pool *pl = &p->v[*k];
    if (pl->released)
        return SUBLET_ERR_BUSY;
    sublet_pool_id id = {pl->id[0], pl->id[1]};
    sublet_status st = SUBLET_OK;
    if (!pl->created && (st = sublet_pool_incref(a, id)) != SUBLET_OK)
        return st;
    pl->created = 1;
    if ((st = sublet_pool_begin_allocate(a, id, SUBLET_POOL_FILTER_STREAM, e->stream)) !=
        SUBLET_OK)
        return st;
    st = sublet_malloc(a, size, e->stream, out);
    sublet_status st2 = sublet_pool_end_allocate(a, id);
    if (st2 == SUBLET_OK)
        st2 = sublet_pool_release(a, id); /* the use begin added */
    return st == SUBLET_OK || st == SUBLET_ERR_OOM ? (st2 != SUBLET_OK ? st2 : st) : st;
}

sublet_status rf_pools_release(rf_pools *p, sublet_replay_result *r, sublet_allocator *a,
                               const sublet_trace_event *rows, size_t i, size_t run, int *dflt,
                               uint64_t failed[2])
{
    *dflt = 0;
    for (size_t j = 0; j < run; j++) {
        const sublet_trace_event *e = &rows[j];
        long k = rf_pools_of(p, r, e);
        if (k < 0)
            return SUBLET_ERR_NO_MEMORY;
        *dflt |= k == 0;
        if (k > 0)
            p->v[k].run = i + 1;
        int slot = k == 0 ? 0 : p->v[k].slot;
        if (slot >= 0 && e->kind == SUBLET_ACT_SEGMENT_FREE)
            r->pools[slot].recorded_segment_frees++;
        if (k == 0)
            continue;
        rf_pool *pl = &p->v[k];
        if (pl->released || !pl->created)
            continue;
        pl->released = 1;
        if (slot >= 0)
            r->pools[slot].released_at = i;
        sublet_status st = sublet_pool_release(a, (sublet_pool_id){pl->id[0], pl->id[1]});
        if (st != SUBLET_OK) {
            failed[0] = pl->id[0];
            failed[1] = pl->id[1];
            return st;
        }
    }
    return SUBLET_OK;
}

sublet_status rf_pools_empty_cache(const rf_pools *p, sublet_allocator *a, size_t i, int dflt)
{
    if (dflt || p->n < 2)
        return sublet_empty_cache(a);
    sublet_status st = SUBLET_OK;
    for (size_t k = 1; k < p->n && st == SUBLET_OK; k++)
        if (p->v[k].run == i + 1)
            st = sublet_pool_empty_cache(a, (sublet_pool_id){p->v[k].id[0], p->v[k].id[1]});
    return st;
}

void rf_pools_fini(rf_pools *p)
{
    free(p->v);
    memset(p, 0, sizeof *p);
}
