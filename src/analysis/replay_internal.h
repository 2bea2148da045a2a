/* sublet — what the replay driver (replay.c) shares with its fidelity
 * bookkeeping (replay_fidelity.c): what the engine did during one call, the
 * recorded oracle of an alloc, the comparison of releases, and the check that
 * a trace recorded under expandable segments can be replayed at all. */
#ifndef SUBLET_REPLAY_INTERNAL_H
#define SUBLET_REPLAY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "formats/trace_readers.h" /* sl_ranges */
#include "sublet/replay.h"

/* What the engine emitted during one call (a malloc, an empty_cache). */
typedef struct rf_call {
    uint64_t seg_allocs, seg_alloc_addr, seg_alloc_size;
    uint64_t seg_maps, seg_map_addr, seg_map_bytes; /* first map's address, total bytes */
    uint64_t seg_frees, seg_unmaps;
    int collect;                /* keep each release (an empty_cache being judged) */
    sublet_replay_release *rel; /* the releases kept */
    size_t nrel, rel_cap;
    int nomem; /* a release could not be kept */
    /* (rf_call_begin resets the fields one by one: a new one needs its line there) */
} rf_call;

/* Start a call: counters zeroed, the kept releases dropped. */
void rf_call_begin(rf_call *c, int collect);
/* rf_call_event's out-of-line part: the segment events, which it counts. */
void rf_call_segment_event(rf_call *c, sublet_action act, uint64_t addr, uint64_t size);
/* The engine trace events a call counts nothing of: its allocs and frees,
 * most of its events (the replay asks the engine not to send them at all
 * when nothing else wants them: sublet_trace_set_actions). */
#define RF_CALL_UNCOUNTED                                                      \
    ((1u << SUBLET_ACT_ALLOC) | (1u << SUBLET_ACT_FREE_REQUESTED) |            \
     (1u << SUBLET_ACT_FREE_COMPLETED))
/* One engine trace event (from the replay's trace callback); inline, since
 * most are of the uncounted kinds. */
static inline void rf_call_event(rf_call *c, sublet_action act, uint64_t addr, uint64_t size)
{
    if (!(RF_CALL_UNCOUNTED >> act & 1u))
        rf_call_segment_event(c, act, addr, size);
}
void rf_call_fini(rf_call *c);

/* What PyTorch did for the alloc at row i: the rows just before it. */
enum { RF_NONE = 0, RF_SEGMENT = 1, RF_MAP = 2 };
typedef struct rf_oracle {
    int kind;          /* RF_NONE, RF_SEGMENT (a segment_alloc row), RF_MAP (segment_map rows) */
    uint64_t addr;     /* the segment's / first map's address */
    uint64_t bytes;    /* segment size / bytes mapped */
    size_t first_row;  /* first of those rows (i when none) */
} rf_oracle;
rf_oracle rf_oracle_of(const sublet_trace_event *ev, size_t i);

/* What one alloc's judgement added to the totals (the per-pool counters
 * add the same, replay_pools.c). */
typedef struct rf_judged {
    uint8_t decision, size, rec_seg, eng_seg, address; /* each 0 or 1 */
} rf_judged;

/* Compare the engine's call with the oracle and count it in *f. */
rf_judged rf_judge_alloc(sublet_replay_fidelity *f, size_t i, const rf_oracle *rec,
                         const rf_call *c);

/* Is kind a release row (segment_free / segment_unmap)?  (Inline: the
 * driver asks it of every row.) */
static inline int rf_is_release(uint32_t kind)
{
    return kind == SUBLET_ACT_SEGMENT_FREE || kind == SUBLET_ACT_SEGMENT_UNMAP;
}
/* Number of consecutive release rows from row i on. */
size_t rf_release_run(const sublet_trace_event *ev, size_t n, size_t i);
/* Compare the releases kept in *c with the run of `run` rows at `rows`
 * (row i of the trace and the ones after it) and count it in *f.  0, or -1
 * when out of memory. */
int rf_judge_release(sublet_replay_fidelity *f, const sublet_trace_event *rows, size_t i,
                     size_t run, rf_call *c);

/* The prelude a trace recorded under expandable segments needs: SUBLET_OK
 * when it can be replayed with the prelude mode the caller asked for
 * (`mode`, before AUTO is resolved: only an explicit SUBLET_PRELUDE_ALLOCATE
 * accepts the approximation of a mid-run recording), else
 * SUBLET_ERR_UNSUPPORTED with the reason in why (SUBLET_ERR_NO_MEMORY when
 * the check ran out of memory). */
sublet_status rf_expandable_prelude(const sublet_trace *t, int mode, char *why, size_t cap);

/* The same check row by row, for a stream: begin with the recorded settings
 * and the prelude (it may refuse there), then each recorded row (only
 * segment_map / segment_unmap rows and rows in a private pool matter; a
 * refusal comes at the row that shows it, with the text
 * rf_expandable_prelude gives).
 *
 * Both also refuse a prelude row in a private pool (sublet_trace_event.pool_id
 * other than (0, 0)) unless the prelude is allocated: adopted segments are
 * seeded into the default pools only (docs/pools.md). */
typedef struct rf_xcheck {
    int active;     /* rows still need looking at */
    int mapping;    /* segment_map / segment_unmap rows still need looking at */
    int expandable; /* known to be recorded under expandable segments */
    size_t npre;
    uint64_t pre_segs, pre_bytes, pre_allocs;
    sl_ranges mapped; /* npre == 0: the pages the trace mapped so far */
} rf_xcheck;
sublet_status rf_xcheck_begin(rf_xcheck *x, const char *settings, const sublet_trace_event *pre,
                              size_t npre, int mode, char *why, size_t cap);
sublet_status rf_xcheck_map_row(rf_xcheck *x, const sublet_trace_event *e, size_t i, char *why,
                                size_t cap);
/* Row i, before it is driven: only segment_map / segment_unmap rows are
 * looked at (rf_xcheck_map_row, out of line); the others pass here. */
static inline sublet_status rf_xcheck_row(rf_xcheck *x, const sublet_trace_event *e, size_t i,
                                          char *why, size_t cap)
{
    if (!x->active || !x->mapping ||
        (e->kind != SUBLET_ACT_SEGMENT_MAP && e->kind != SUBLET_ACT_SEGMENT_UNMAP))
        return SUBLET_OK;
    return rf_xcheck_map_row(x, e, i, why, cap);
}
void rf_xcheck_fini(rf_xcheck *x);

/* sublet_replay_stream (one body with it in replay.c, a flag apart), with
 * the allocator's clock (o->record) reading each row's stamp instead of its
 * time: the index of the row whose engine call the entry stands for (a segment_alloc row before an alloc: the alloc's; a
 * free_completed right after its free_requested: the request's; a run of
 * segment_free rows: its first row's; any other row: its own).  The
 * fragmentation series (frag_series.c) places each entry of the record by
 * it. */
sublet_status sl_replay_stream_stamped(sublet_trace_stream *ts, const sublet_replay_options *o,
                                       sublet_replay_result *r, char *err, size_t err_cap);

/* ---- the address map (replay_addrs.c) ----------------------------------------------------- */

/* A hash map uint64 -> uint64: linear probing at a load of at most 1/2,
 * backward-shift deletion.  Key and value side by side, so that a probe
 * touches one slot; key 0 marks an empty slot, so an entry for key 0 itself
 * is kept beside the table. */
typedef struct rf_slot {
    uint64_t key, val;
} rf_slot;

typedef struct rf_map {
    rf_slot *slots;
    size_t cap, count; /* cap is a power of two; count includes key 0's entry */
    unsigned shift;    /* 64 - log2(cap): a hash's top bits pick the home slot */
    int has_zero;
    uint64_t zero_val;
} rf_map;

/* An empty map of cap slots (a power of two); 0 when out of memory. */
int rf_map_alloc(rf_map *m, size_t cap);
void rf_map_fini(rf_map *m);
/* Insert or overwrite; 0 when out of memory (the map unchanged). */
int rf_map_put(rf_map *m, uint64_t key, uint64_t val);
/* Look key up and remove it: 1 (and *val) when it was there. */
int rf_map_take(rf_map *m, uint64_t key, uint64_t *val);

/* Where each live recorded allocation is in the engine: recorded address
 * -> engine address (0: its alloc failed, nothing to free).
 *
 * While every allocation so far was placed at its recorded address (a
 * faithful replay: the identity), no map is kept: the recorded allocations
 * alive are exactly the blocks the engine holds allocated, so the engine's
 * own pointer map answers.  The first allocation placed elsewhere (or
 * failed) builds the map from the engine's allocated blocks, and the map is
 * kept from then on.  The identity is only tried under the native policy
 * (policy:stitch's shadow blocks are not all in sublet_segments_walk). */
/* The prelude's segments and allocations in address order (replay_addrs.c):
 * sorted only when they do not come so; the segment holding addr, or NULL. */
typedef struct rf_seg_ref {
    uint64_t addr, size;
    int small;
} rf_seg_ref;
void rf_sort_segs_by_addr(rf_seg_ref *v, size_t n);
void rf_sort_rows_by_addr(const sublet_trace_event **v, size_t n);
const rf_seg_ref *rf_seg_containing(const rf_seg_ref *v, size_t n, uint64_t addr);

typedef struct rf_addrs {
    rf_map map;   /* unused (no table) while identity */
    int identity;
    size_t cap;   /* the table's size when it is built */
} rf_addrs;

/* identity: try the identity first; cap: the map's size (a power of two).
 * 0 when out of memory. */
int rf_addrs_init(rf_addrs *m, size_t cap, int identity);
void rf_addrs_fini(rf_addrs *m);
/* The allocation recorded at rec is at eng in the engine (0: not made), as
 * `a` holds it now.  0 when out of memory.  (Inline: the identity's case,
 * every alloc of a faithful replay, is one comparison.) */
int rf_addrs_put_table(rf_addrs *m, sublet_allocator *a, uint64_t rec, uint64_t eng);
static inline int rf_addrs_put(rf_addrs *m, sublet_allocator *a, uint64_t rec, uint64_t eng)
{
    if (m->identity && eng == rec && eng != 0)
        return 1;
    return rf_addrs_put_table(m, a, rec, eng);
}
/* The allocation recorded at rec, forgotten: 1 and *eng when there is one. */
int rf_addrs_take(rf_addrs *m, sublet_allocator *a, uint64_t rec, uint64_t *eng);

/* ---- private pools (replay_pools.c) ------------------------------------------------------ */

/* A pool the trace's rows named (index 0: the default pools). */
typedef struct rf_pool {
    uint64_t id[2];
    int created;  /* the engine holds it (incref'd: the replay's own use) */
    int released; /* the replay dropped that use: freeable, no more allocs */
    int slot;     /* index in result.pools, -1 beyond SUBLET_REPLAY_MAX_POOLS */
    size_t run;   /* the release run (its first row + 1) that last freed its segments */
} rf_pool;

typedef struct rf_pools {
    rf_pool *v; /* v[0]: the default pools, then the private ones as met */
    size_t n, cap;
} rf_pools;

/* The pool of row e (an index into p->v; 0: the default pools), added (and
 * given its row in r->pools) when first met; -1 when out of memory. */
long rf_pools_of_private(rf_pools *p, sublet_replay_result *r, const sublet_trace_event *e);
static inline long rf_pools_of(rf_pools *p, sublet_replay_result *r, const sublet_trace_event *e)
{
    return e->pool_id[0] || e->pool_id[1] ? rf_pools_of_private(p, r, e) : 0;
}

/* The alloc at row i in pool k: what its judgement added to r->fidelity
 * (j, its address's match included), counted in the pool's row of r->pools. */
void rf_pools_judge(const rf_pools *p, sublet_replay_result *r, long k, size_t i, rf_judged j);

/* The malloc of row e (an alloc, or an allocated pre_alloc) in its pool; *k
 * the pool's index (-1 with SUBLET_ERR_NO_MEMORY when the table could not
 * grow).  SUBLET_ERR_BUSY when the replay released the pool already. */
sublet_status rf_pool_malloc(rf_pools *p, sublet_replay_result *r, sublet_allocator *a,
                             const sublet_trace_event *e, uint64_t size, long *k, void **out);
/* Before the release run rows[0, run) (row i of the trace on): each private
 * pool it frees a segment of drops the replay's use (freeable) and is marked
 * for rf_pools_empty_cache; segment_free rows counted per pool; *dflt when a
 * row is the default pools'.  SUBLET_ERR_NO_MEMORY, or the engine's error
 * releasing pool failed[]. */
sublet_status rf_pools_release(rf_pools *p, sublet_replay_result *r, sublet_allocator *a,
                               const sublet_trace_event *rows, size_t i, size_t run, int *dflt,
                               uint64_t failed[2]);
/* The release the run at row i stands for: empty_cache when it has a
 * default-pool row (or no private pool was met), else each marked pool's
 * own release. */
sublet_status rf_pools_empty_cache(const rf_pools *p, sublet_allocator *a, size_t i, int dflt);
void rf_pools_fini(rf_pools *p);

#endif
