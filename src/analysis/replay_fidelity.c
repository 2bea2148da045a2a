/* sublet — the replay's fidelity bookkeeping (see sublet/replay.h): what the
 * engine did during each call, compared with what PyTorch recorded.
 *
 * Allocs.  PyTorch's decision for an alloc is in the rows just before it: a
 * segment_alloc row (cudaMalloc of a new segment, docs/rules.md §3.3), a run of
 * segment_map rows (pages mapped into an expandable segment, §6.3: one row
 * per unmapped block the request grows into, all before the alloc row), or
 * neither (served from the cache).  The engine's is what it emitted during
 * the malloc.
 *
 * Releases.  empty_cache() emits one segment_free per whole free segment and
 * one segment_unmap per free block of an expandable segment that spans whole
 * pages (§3.5, §6.6), in the order of the pools' free sets; the order is an
 * implementation detail, the set is the decision.  So each run of
 * consecutive segment_free / segment_unmap rows is compared, as a set of
 * (kind, address, size), with what the engine's sublet_empty_cache()
 * released.
 *
 * Expandable preludes.  A trace that began mid-run under expandable segments
 * would need its expandable segments rebuilt: where each virtual reservation
 * starts and ends, and which of its pages are mapped.  A snapshot reports one
 * segment per contiguous mapped run (§6.5) and nothing about the
 * reservation, yet find_expandable_block (§6.3) maps new pages at the lowest
 * unmapped address of the reservation, which may lie below every mapped run
 * (pages released by an earlier empty_cache).  So such a trace is refused
 * unless the caller asks for the prelude to be allocated afresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "analysis/replay_internal.h"
#include "sublet/config.h"

/* ---- one call ------------------------------------------------------------------------ */

void rf_call_begin(rf_call *c, int collect)
{
    /* field by field: a whole-struct assignment compiles to `rep stos`, whose
     * start-up alone cost this call ~3 % of a replay's time (perf) */
    c->seg_allocs = c->seg_alloc_addr = c->seg_alloc_size = 0;
    c->seg_maps = c->seg_map_addr = c->seg_map_bytes = 0;
    c->seg_frees = c->seg_unmaps = 0;
    c->collect = collect;
    c->nrel = 0;
    c->nomem = 0;
}

void rf_call_fini(rf_call *c)
{
    free(c->rel);
    memset(c, 0, sizeof *c);
}

static void keep_release(rf_call *c, sublet_action act, uint64_t addr, uint64_t size)
{
    if (!c->collect || c->nomem)
        return;
    if (c->nrel == c->rel_cap) {
        size_t nc = c->rel_cap ? c->rel_cap * 2 : 64;
        sublet_replay_release *n = realloc(c->rel, nc * sizeof *n);
        if (!n) {
            c->nomem = 1;
            return;
        }
        c->rel = n;
        c->rel_cap = nc;
    }
    c->rel[c->nrel++] = (sublet_replay_release){(uint32_t)act, addr, size};
}

void rf_call_segment_event(rf_call *c, sublet_action act, uint64_t addr, uint64_t size)
{
    switch (act) {
    case SUBLET_ACT_SEGMENT_ALLOC:
        c->seg_allocs++;
        c->seg_alloc_addr = addr;
        c->seg_alloc_size = size;
        break;
    case SUBLET_ACT_SEGMENT_MAP:
        if (c->seg_maps++ == 0)
            c->seg_map_addr = addr;
        c->seg_map_bytes += size;
        break;
    case SUBLET_ACT_SEGMENT_FREE:
        c->seg_frees++;
        keep_release(c, act, addr, size);
        break;
    case SUBLET_ACT_SEGMENT_UNMAP:
        c->seg_unmaps++;
        keep_release(c, act, addr, size);
        break;
    default:
        break;
    }
}

/* ---- allocs ---------------------------------------------------------------------------- */

rf_oracle rf_oracle_of(const sublet_trace_event *ev, size_t i)
{
    rf_oracle o = {RF_NONE, 0, 0, i};
    if (i == 0)
        return o;
    if (ev[i - 1].kind == SUBLET_ACT_SEGMENT_ALLOC) {
        o = (rf_oracle){RF_SEGMENT, ev[i - 1].addr, ev[i - 1].size, i - 1};
    } else if (ev[i - 1].kind == SUBLET_ACT_SEGMENT_MAP) {
        size_t j = i - 1;
        while (j > 0 && ev[j - 1].kind == SUBLET_ACT_SEGMENT_MAP)
            j--;
        o = (rf_oracle){RF_MAP, ev[j].addr, 0, j};
        for (size_t k = j; k < i; k++)
            o.bytes += ev[k].size;
    }
    return o;
}

rf_judged rf_judge_alloc(sublet_replay_fidelity *f, size_t i, const rf_oracle *rec,
                         const rf_call *c)
{
    int made = c->seg_allocs ? RF_SEGMENT : c->seg_maps ? RF_MAP : RF_NONE;
    rf_judged j = {.decision = made == rec->kind, .rec_seg = rec->kind == RF_SEGMENT,
                   .eng_seg = made == RF_SEGMENT};
    f->allocs_compared++;
    f->recorded_segment_allocs += j.rec_seg;
    f->engine_segment_allocs += j.eng_seg;
    f->recorded_segment_maps += rec->kind == RF_MAP;
    f->engine_segment_maps += made == RF_MAP;
    if (j.decision)
        f->decisions_matched++;
    else if (f->first_decision_mismatch == SUBLET_REPLAY_NONE)
        f->first_decision_mismatch = i;
    if (!j.decision || made == RF_NONE)
        return j;
    uint64_t bytes = made == RF_SEGMENT ? c->seg_alloc_size : c->seg_map_bytes;
    uint64_t addr = made == RF_SEGMENT ? c->seg_alloc_addr : c->seg_map_addr;
    if (bytes != rec->bytes) {
        if (f->first_size_mismatch == SUBLET_REPLAY_NONE)
            f->first_size_mismatch = i;
    } else if (made == RF_SEGMENT) {
        f->segment_sizes_matched++;
        j.size = 1;
    } else {
        f->map_sizes_matched++;
    }
    if (made == RF_SEGMENT)
        f->segments_placed_as_recorded += addr == rec->addr;
    else
        f->maps_placed_as_recorded += addr == rec->addr;
    return j;
}

/* ---- releases --------------------------------------------------------------------------- */

size_t rf_release_run(const sublet_trace_event *ev, size_t n, size_t i)
{
    size_t run = 0;
    while (i + run < n && rf_is_release(ev[i + run].kind))
        run++;
    return run;
}

static int cmp_release(const void *a, const void *b)
{
    const sublet_replay_release *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->size < y->size ? -1 : x->size > y->size;
}

int rf_judge_release(sublet_replay_fidelity *f, const sublet_trace_event *rows, size_t i,
                     size_t run, rf_call *c)
{
    f->engine_segment_frees += c->seg_frees;
    f->engine_segment_unmaps += c->seg_unmaps;
    f->empty_caches_compared++;
    if (c->nomem)
        return -1;
    sublet_replay_release *rec = malloc((run ? run : 1) * sizeof *rec);
    if (!rec)
        return -1;
    for (size_t k = 0; k < run; k++)
        rec[k] = (sublet_replay_release){rows[k].kind, rows[k].addr, rows[k].size};
    qsort(rec, run, sizeof *rec, cmp_release);
    if (c->nrel)
        qsort(c->rel, c->nrel, sizeof *c->rel, cmp_release);
    const sublet_replay_release none = {SUBLET_ACT_COUNT, 0, 0};
    sublet_replay_release_diff d = {.recorded = run, .engine = c->nrel,
                                    .first_only_recorded = none, .first_only_engine = none};
    size_t a = 0, b = 0;
    while (a < run || b < c->nrel) {
        int o = a == run ? 1 : b == c->nrel ? -1 : cmp_release(&rec[a], &c->rel[b]);
        if (o == 0) {
            a++;
            b++;
        } else if (o < 0) {
            if (d.only_recorded++ == 0)
                d.first_only_recorded = rec[a];
            a++;
        } else {
            if (d.only_engine++ == 0)
                d.first_only_engine = c->rel[b];
            b++;
        }
    }
    free(rec);
    if (!d.only_recorded && !d.only_engine) {
        f->empty_cache_sets_matched++;
    } else if (f->first_empty_cache_mismatch == SUBLET_REPLAY_NONE) {
        f->first_empty_cache_mismatch = i;
        /* member by member onto zeroed bytes: the result holds no copied
         * padding (a sublet_replay_release has 4 bytes of it), so two equal
         * results are equal as bytes */
        sublet_replay_release_diff *m = &f->empty_cache_mismatch;
        memset(m, 0, sizeof *m);
        m->recorded = d.recorded;
        m->engine = d.engine;
        m->only_recorded = d.only_recorded;
        m->only_engine = d.only_engine;
        m->first_only_recorded.kind = d.first_only_recorded.kind;
        m->first_only_recorded.addr = d.first_only_recorded.addr;
        m->first_only_recorded.size = d.first_only_recorded.size;
        m->first_only_engine.kind = d.first_only_engine.kind;
        m->first_only_engine.addr = d.first_only_engine.addr;
        m->first_only_engine.size = d.first_only_engine.size;
    }
    return 0;
}

/* ---- can a trace recorded under expandable segments be replayed? -------------------------- */

/* The refusal's text, with what shows that the recording began mid-run. */
static void refuse(char *why, size_t cap, const char *what)
{
    sl_msg(why, cap,
           "the trace was recorded mid-run under expandable segments (%s): a snapshot "
           "does not record where each expandable segment's virtual reservation begins "
           "and ends, and PyTorch maps new pages at the lowest unmapped address of the "
           "reservation (reference 6.3), which may lie below every mapped range, so the "
           "state its decisions depend on cannot be rebuilt; replay with the prelude "
           "allocated (SUBLET_PRELUDE_ALLOCATE, --prelude allocate) for an approximation",
           what);
}

/* A prelude row in a private pool: refused unless the prelude is allocated
 * (docs/pools.md): the engine seeds adopted segments into the default
 * pools only. */
static sublet_status private_prelude(const sublet_trace_event *e, size_t i, int mode, char *why,
                                     size_t cap)
{
    if ((!e->pool_id[0] && !e->pool_id[1]) || mode == SUBLET_PRELUDE_ALLOCATE)
        return SUBLET_OK;
    return sl_fail(why, cap, SUBLET_ERR_UNSUPPORTED,
                   "prelude row %zu (%s at %llu, line %llu) is in private pool (%llu, %llu), %s: "
                   "the recording began with memory in a private pool, and adopted segments "
                   "go to the default pools only; replay with the prelude allocated "
                   "(SUBLET_PRELUDE_ALLOCATE, --prelude allocate), which allocates the live "
                   "blocks through their pools", i, sublet_trace_kind_name(e->kind),
                   (unsigned long long)e->addr, (unsigned long long)e->line,
                   (unsigned long long)e->pool_id[0], (unsigned long long)e->pool_id[1],
                   e->pool_id[1] == 0 ? "a CUDA graph's pool" : "a MemPool (or graph_pool_handle)");
}

sublet_status rf_expandable_prelude(const sublet_trace *t, int mode, char *why, size_t cap)
{
    const sublet_trace_event *ev = sublet_trace_events(t);
    size_t n = sublet_trace_count(t), npre = sublet_trace_prelude_count(t);
    for (size_t i = 0; i < npre; i++)
        if (private_prelude(&ev[i], i, mode, why, cap) != SUBLET_OK)
            return SUBLET_ERR_UNSUPPORTED;
    int expandable = 0;
    const char *rec = sublet_trace_settings(t);
    if (rec && *rec) {
        sublet_settings set;
        sublet_settings_default(&set);
        expandable = sublet_settings_parse(&set, rec, NULL, 0) == SUBLET_OK &&
                     set.expandable_segments;
    }
    uint64_t pre_segs = 0, pre_bytes = 0, pre_allocs = 0;
    for (size_t i = 0; i < npre; i++) {
        if (ev[i].kind == SUBLET_TRACE_PRE_SEGMENT) {
            pre_segs++;
            pre_bytes += ev[i].size;
            expandable |= (ev[i].flags & SUBLET_TRACE_EXPANDABLE) != 0;
        } else {
            pre_allocs++;
        }
    }
    for (size_t i = npre; i < n && !expandable; i++)
        expandable = ev[i].kind == SUBLET_ACT_SEGMENT_MAP || ev[i].kind == SUBLET_ACT_SEGMENT_UNMAP;
    if (!expandable || mode == SUBLET_PRELUDE_ALLOCATE)
        return SUBLET_OK;

    char what[256] = "";
    if (npre) {
        snprintf(what, sizeof what,
                 "%llu segment(s) of %llu bytes and %llu live block(s) existed before the first "
                 "recorded event", (unsigned long long)pre_segs, (unsigned long long)pre_bytes,
                 (unsigned long long)pre_allocs);
    } else {
        /* no prelude, but an unmap of pages the trace never mapped says
         * that memory was mapped before recording began */
        sl_ranges r = {0};
        for (size_t i = npre; i < n && !what[0]; i++) {
            const sublet_trace_event *e = &ev[i];
            uint64_t hi = e->addr + e->size < e->addr ? UINT64_MAX : e->addr + e->size;
            int oom = 0;
            if (e->kind == SUBLET_ACT_SEGMENT_MAP)
                oom = sl_ranges_add(&r, e->addr, hi, e->stream);
            else if (e->kind == SUBLET_ACT_SEGMENT_UNMAP && !sl_ranges_covers(&r, e->addr, hi))
                snprintf(what, sizeof what,
                         "event %zu (line %llu) unmaps %llu bytes at %llu that the trace "
                         "never mapped", i, (unsigned long long)e->line,
                         (unsigned long long)e->size, (unsigned long long)e->addr);
            else if (e->kind == SUBLET_ACT_SEGMENT_UNMAP)
                oom = sl_ranges_sub(&r, e->addr, hi);
            if (oom) {
                sl_ranges_free(&r);
                return SUBLET_ERR_NO_MEMORY;
            }
        }
        sl_ranges_free(&r);
        if (!what[0])
            return SUBLET_OK; /* recorded from an empty allocator: sound */
    }
    refuse(why, cap, what);
    return SUBLET_ERR_UNSUPPORTED;
}

/* ---- the same, row by row ---------------------------------------------------------------------- */

static int settings_expandable(const char *rec)
{
    if (!rec || !*rec)
        return 0;
    sublet_settings set;
    sublet_settings_default(&set);
    return sublet_settings_parse(&set, rec, NULL, 0) == SUBLET_OK && set.expandable_segments;
}

static void prelude_what(const rf_xcheck *x, char *what, size_t cap)
{
    snprintf(what, cap,
             "%llu segment(s) of %llu bytes and %llu live block(s) existed before the first "
             "recorded event", (unsigned long long)x->pre_segs, (unsigned long long)x->pre_bytes,
             (unsigned long long)x->pre_allocs);
}

sublet_status rf_xcheck_begin(rf_xcheck *x, const char *settings, const sublet_trace_event *pre,
                              size_t npre, int mode, char *why, size_t cap)
{
    memset(x, 0, sizeof *x);
    x->npre = npre;
    x->expandable = settings_expandable(settings);
    for (size_t i = 0; i < npre; i++) {
        if (private_prelude(&pre[i], i, mode, why, cap) != SUBLET_OK)
            return SUBLET_ERR_UNSUPPORTED;
        if (pre[i].kind == SUBLET_TRACE_PRE_SEGMENT) {
            x->pre_segs++;
            x->pre_bytes += pre[i].size;
            x->expandable |= (pre[i].flags & SUBLET_TRACE_EXPANDABLE) != 0;
        } else {
            x->pre_allocs++;
        }
    }
    if (mode == SUBLET_PRELUDE_ALLOCATE)
        return SUBLET_OK;
    x->active = 1;
    if (npre && x->expandable) {
        char what[256];
        prelude_what(x, what, sizeof what);
        refuse(why, cap, what);
        x->active = 0;
        return SUBLET_ERR_UNSUPPORTED;
    }
    x->mapping = 1;
    return SUBLET_OK;
}

sublet_status rf_xcheck_map_row(rf_xcheck *x, const sublet_trace_event *e, size_t i, char *why,
                                size_t cap)
{
    char what[256];
    if (x->npre) { /* a prelude, and the trace maps pages: refused as soon as seen */
        prelude_what(x, what, sizeof what);
        refuse(why, cap, what);
        x->active = 0;
        return SUBLET_ERR_UNSUPPORTED;
    }
    uint64_t hi = e->addr + e->size < e->addr ? UINT64_MAX : e->addr + e->size;
    int oom = 0;
    if (e->kind == SUBLET_ACT_SEGMENT_MAP) {
        oom = sl_ranges_add(&x->mapped, e->addr, hi, e->stream);
    } else if (!sl_ranges_covers(&x->mapped, e->addr, hi)) {
        snprintf(what, sizeof what,
                 "event %zu (line %llu) unmaps %llu bytes at %llu that the trace never mapped", i,
                 (unsigned long long)e->line, (unsigned long long)e->size,
                 (unsigned long long)e->addr);
        refuse(why, cap, what);
        x->active = 0;
        return SUBLET_ERR_UNSUPPORTED;
    } else {
        oom = sl_ranges_sub(&x->mapped, e->addr, hi);
    }
    if (oom) {
        x->active = 0;
        return SUBLET_ERR_NO_MEMORY;
    }
    return SUBLET_OK;
}

void rf_xcheck_fini(rf_xcheck *x) { sl_ranges_free(&x->mapped); }
