/* sublet — the replay driver: a recorded trace through the engine on the
 * `sim` backend, with PyTorch's own decisions as the oracle (see
 * sublet/replay.h for what each row becomes).
 *
 * Rebuilding the prelude.  pre_segment rows become seeded segments (small
 * pool iff the segment is exactly 2 MiB: small-pool segments are always
 * kSmallBuffer, large-pool ones at least 10 MiB).  A pre_alloc row whose
 * source knew the block's size (block_size, from a snapshot's final blocks)
 * is seeded at that size.  Otherwise (the CSV form) it carries only the
 * requested size, so the block is round_size(requested) under the replay's
 * settings, with one correction: in a large-pool segment PyTorch
 * splits a block only when more than 1 MiB (kSmallSize) would remain, and
 * every block of a large pool is larger than 1 MiB, so a free gap of at most
 * 1 MiB between the end of the rounded block and the next live block (or the
 * segment end) cannot exist in PyTorch's state: it is the unsplit tail of
 * this block, and the seeded block extends over it.  Small-pool blocks are
 * split whenever 512 bytes remain, so their rounded size is exact.  (On the
 * shared traces this rebuilds PyTorch's final allocated and inactive-split
 * bytes exactly; without it 130 blocks of the cs336 traces come out short.
 * The rule assumes the recording's settings split normally: an oversize
 * block under max_split_size would own any tail.)
 *
 * Placement.  With placement_hints, the replay asks the sim (one-shot hint) for
 * the address the trace recorded for the segment about to be created (the
 * segment_alloc row just before the alloc); the sim honours it when the
 * range is free.  Best fit orders equal-sized free blocks by address, so
 * the recorded placement keeps ties broken the way PyTorch broke them.  The
 * same hint, the address of the recorded first segment_map before an alloc,
 * places a virtual reservation the engine creates for that alloc: an
 * expandable segment's first map is at its reservation's start (docs/rules.md §6.3).
 *
 * Private pools.  A row with a pool id (sublet_trace_event.pool_id) is driven
 * in that pool, and a release run of private pools' segments releases those
 * pools: replay_pools.c, with the per-pool fidelity (result.pools).
 *
 * What is compared (decisions, sizes, release sets) is in replay_fidelity.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "engine/engine.h"          /* the garbage collector's state (malloc_releases) */
#include "engine/history_internal.h" /* the snapshot marker */
#include "engine/rules.h"            /* kSmallBuffer, kSmallSize */
#include "analysis/replay_internal.h"
#include "formats/trace_readers.h" /* sl_trace_stream_borrow */
#include "sublet/replay.h"

#define SYNTHETIC_STREAM_BASE UINT64_C(0xFFFF000000000000)

/* ---- the replay state ---------------------------------------------------------- */


typedef struct rp {
    /* The rows: the prelude pre[0, npre) and a window of recorded rows,
     * ev[0, n) being rows [base, base + n).  Over an in-memory trace the
     * window is the whole array (base 0, prelude included); over a stream it
     * is the rows the stream lends, from keep_from on (fill_to), so that the
     * rows an event looks at (the segment_alloc or segment_map run before an
     * alloc, the free_completed after a free_requested, a run of releases)
     * are there and nothing older is kept. */
    const sublet_trace_event *pre;
    size_t npre;
    const sublet_trace_event *ev;
    size_t base, n;
    int in_place;               /* ev is the trace's own array */
    int eof;                    /* the stream has no more rows */
    sublet_trace_event *own;    /* the window's own buffer (streams: a long run, fill_to) */
    size_t own_cap;
    size_t keep_from;           /* the oldest row still needed */
    size_t map_run;             /* first row of the run of segment_map rows ending at the last row driven */
    int in_map_run;
    sublet_trace_stream *ts;
    sublet_status rd_st;        /* a read error of the stream */
    char rd_err[600];
    rf_xcheck xc;               /* the expandable-prelude check, row by row (streams) */
    const sublet_replay_options *o;
    sublet_replay_result *r;
    char *err;
    size_t err_cap;
    sublet_backend *sim;
    bool placement_hints; /* ask the sim to place segments as recorded */
    int reserved_grew;    /* a segment_alloc/map since the last observe */
    sublet_allocator *a;
    rf_addrs addrs; /* trace address -> engine address (replay_addrs.c) */
    rf_map pending; /* trace address -> synthetic stream of a deferred free */
    uint64_t next_stream;
    size_t oom_done; /* the oom row whose request a release run drove (else 0) */
    /* a release run the next alloc's malloc makes itself (malloc_releases):
     * its first row + 1 (else 0) and its length, judged at that alloc */
    size_t own_run, own_run_len;
    uint64_t recorded_reserved;
    int64_t best_reserved;
    /* statistics read at each rise of reserved bytes: best holds those of
     * the peak so far, the other buffer the latest read (a new peak swaps
     * them, where a copy would cost more than the event) */
    sublet_stats stats_buf[2];
    sublet_stats *stats_best, *stats_read;
    rf_call pr; /* what the engine emitted during the current call */
    rf_pools pools; /* the pools the rows named (replay_pools.c) */
    /* recording (o->record): the rows [clk_first, clk_first + clk_count) give
     * the times of the engine events of the current call, in order; stacks
     * come from row `cur` */
    size_t clk_first, clk_count, clk_pos, cur;
    /* sl_replay_stream_stamped: the clock reads each row's stamp instead of
     * its time (the last stamp of a segment_free run kept, so that a long
     * run is not walked again for each of its rows) */
    int row_clock;
    uint64_t info0; /* the sim's mem_info calls after setup (sl_same_from) */
    size_t stamp_row, stamp_val;
    uint64_t since_poll, poll_every; /* rows since stop_if was asked; how many between */
} rp;

/* ---- the rows -------------------------------------------------------------------------- */

/* Is row i at hand (the prelude, or in the window)? */
static inline int at_hand(const rp *s, size_t i)
{
    return i < s->npre || (i >= s->base && i - s->base < s->n);
}

/* Row i, which is at hand. */
static inline const sublet_trace_event *row(const rp *s, size_t i)
{
    return i < s->npre ? &s->pre[i] : &s->ev[i - s->base];
}

static int fill_to(rp *s, size_t i);

/* Is row i (a recorded row) in the window, or can it be read into it? */
static inline int have(rp *s, size_t i)
{
    return i - s->base < s->n || fill_to(s, i);
}

/* Make the window's own buffer hold at least `rows` rows. */
static int own_reserve(rp *s, size_t rows)
{
    if (s->own_cap >= rows)
        return 1;
    size_t nc = s->own_cap ? s->own_cap * 2 : 256;
    while (nc < rows)
        nc *= 2;
    sublet_trace_event *nb = realloc(s->own, nc * sizeof *nb);
    if (!nb) {
        s->rd_st = SUBLET_ERR_NO_MEMORY;
        snprintf(s->rd_err, sizeof s->rd_err, "out of memory");
        return 0;
    }
    if (s->ev == s->own)
        s->ev = nb;
    s->own = nb;
    s->own_cap = nc;
    return 1;
}

/* Make row i (a recorded row) part of the window, reading from the stream
 * as needed; rows before keep_from are dropped.  0 when the trace ends
 * before it, or on a read error (rd_st).  have() is the inline test.
 *
 * The window is the rows the stream lends (sl_trace_stream_borrow: where
 * its reader thread decoded them, not copied), with the few rows still
 * needed of the ones before (keep_from on: the row just driven, a run of
 * segment_map rows, a release run read ahead) put in front of them by the
 * borrow.  A longer run of rows still needed (more than SL_STREAM_KEEP)
 * goes into the window's own buffer with the rows after it, until the rows
 * still needed are few again. */
static int fill_to(rp *s, size_t i)
{
    while (i - s->base >= s->n) {
        if (s->eof || s->rd_st != SUBLET_OK)
            return 0;
        size_t drop = s->keep_from > s->base ? s->keep_from - s->base : 0;
        if (drop > s->n)
            drop = s->n;
        size_t nk = s->n - drop; /* rows still needed */
        const sublet_trace_event *p = NULL;
        size_t got = 0;
        if (nk <= SL_STREAM_KEEP) {
            s->rd_st = sl_trace_stream_borrow(s->ts, nk ? s->ev + drop : NULL, nk, &p, &got,
                                              s->rd_err, sizeof s->rd_err);
            if (s->rd_st != SUBLET_OK)
                return 0;
            s->ev = nk ? p - nk : p;
            s->base += drop;
            s->n = nk + got;
            if (!got)
                s->eof = 1;
            continue;
        }
        /* into the own buffer: the rows still needed (before the borrow,
         * which may take back the memory they are in), then what it lends */
        if (s->ev == s->own) {
            memmove(s->own, s->own + drop, nk * sizeof *s->own);
        } else {
            const sublet_trace_event *from = s->ev + drop;
            if (!own_reserve(s, nk))
                return 0;
            memcpy(s->own, from, nk * sizeof *s->own);
            s->ev = s->own;
        }
        s->n = nk;
        s->base += drop;
        s->rd_st = sl_trace_stream_borrow(s->ts, NULL, 0, &p, &got, s->rd_err, sizeof s->rd_err);
        if (s->rd_st != SUBLET_OK)
            return 0;
        if (!got) {
            s->eof = 1;
        } else {
            if (!own_reserve(s, s->n + got))
                return 0;
            memcpy(s->own + s->n, p, got * sizeof *p);
            s->n += got;
        }
    }
    return 1;
}

/* Before row i is driven: the rows after it that it looks at (the next row
 * of a free_requested, the whole run of a release).  0 on a read error. */
static int prefetch(rp *s, size_t i)
{
    uint32_t k = s->ev[i - s->base].kind; /* a recorded row, at hand */
    if (k == SUBLET_ACT_FREE_REQUESTED)
        (void)have(s, i + 1);
    else if (rf_is_release(k) && !(i > 0 && rf_is_release(row(s, i - 1)->kind)))
        for (size_t j = i + 1; have(s, j) && rf_is_release(row(s, j)->kind); j++)
            ;
    return s->rd_st == SUBLET_OK;
}

/* After row i was driven: what the next rows may look back at. */
static void retire(rp *s, size_t i, uint32_t kind)
{
    if (kind == SUBLET_ACT_SEGMENT_MAP) {
        if (!s->in_map_run)
            s->map_run = i;
        s->in_map_run = 1;
    } else {
        s->in_map_run = 0;
    }
    s->keep_from = s->in_map_run ? s->map_run : i;
    if (s->own_run && s->own_run - 1 < s->keep_from)
        s->keep_from = s->own_run - 1; /* the alloc to come judges those rows */
}

/* ---- recording: the trace's clock and stacks -------------------------------------- */

/* The stamp of row k (at hand): the index of the row whose engine call it
 * times (sl_replay_stream_stamped, replay_internal.h). */
static uint64_t row_stamp(rp *s, size_t k)
{
    const sublet_trace_event *e = row(s, k);
    if (e->kind == SUBLET_ACT_SEGMENT_ALLOC && at_hand(s, k + 1) &&
        row(s, k + 1)->kind == SUBLET_ACT_ALLOC)
        return k + 1;
    if (e->kind == SUBLET_ACT_FREE_COMPLETED && k > 0 && at_hand(s, k - 1) &&
        row(s, k - 1)->kind == SUBLET_ACT_FREE_REQUESTED && row(s, k - 1)->addr == e->addr)
        return k - 1;
    if (e->kind == SUBLET_ACT_SEGMENT_FREE) {
        size_t j = k;
        while (j > 0 && at_hand(s, j - 1) && row(s, j - 1)->kind == SUBLET_ACT_SEGMENT_FREE) {
            if (j - 1 == s->stamp_row) {
                j = s->stamp_val;
                break;
            }
            j--;
        }
        s->stamp_row = k;
        s->stamp_val = j;
        return j;
    }
    return k;
}

static uint64_t rec_clock(void *user)
{
    rp *s = user;
    size_t k = s->clk_pos < s->clk_count ? s->clk_pos : (s->clk_count ? s->clk_count - 1 : 0);
    s->clk_pos++;
    if (s->o->record_row_times)
        return s->clk_first + k;
    if (!at_hand(s, s->clk_first + k))
        return 0;
    if (s->row_clock)
        return row_stamp(s, s->clk_first + k);
    const sublet_trace_event *e = row(s, s->clk_first + k);
    return (e->flags & SUBLET_TRACE_HAS_TIME) ? e->time_us : 0;
}

static size_t rec_stack(void *user, sublet_frame *out, size_t cap)
{
    rp *s = user;
    if (!at_hand(s, s->cur))
        return 0;
    const sublet_trace_frame *fr = NULL;
    size_t n = sublet_trace_stream_stack(s->ts, row(s, s->cur)->frames, &fr);
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++)
        out[i] = (sublet_frame){fr[i].filename, (int)fr[i].line, fr[i].name};
    return n;
}

/* The engine events of the call about to be made for row i take their times
 * from rows [first, first + count). */
static void clock_rows(rp *s, size_t first, size_t count)
{
    s->clk_first = first;
    s->clk_count = count;
    s->clk_pos = 0;
}

static void on_trace(void *user, sublet_action act, uint64_t addr, uint64_t size,
                     sublet_stream stream)
{
    rp *s = user;
    if (act == SUBLET_ACT_SEGMENT_ALLOC || act == SUBLET_ACT_SEGMENT_MAP)
        s->reserved_grew = 1; /* the only events that raise reserved bytes */
    rf_call_event(&s->pr, act, addr, size);
    if (s->o->trace)
        s->o->trace(s->o->observer_user, act, addr, size, stream);
}

/* A row the replay could not apply: counted, the first one kept. */
static void row_error(rp *s, size_t i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void row_error(rp *s, size_t i, const char *fmt, ...)
{
    sublet_replay_result *r = s->r;
    if (r->errors++ == 0) {
        char what[192];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(r->first_error, sizeof r->first_error, "event %zu (line %llu): %s", i,
                 (unsigned long long)row(s, i)->line, what);
    }
}

static sublet_status fatal(rp *s, sublet_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static sublet_status fatal(rp *s, sublet_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_vmsg(s->err, s->err_cap, fmt, ap);
    va_end(ap);
    return st;
}

static const char *kind_of(const rp *s, size_t i) { return sublet_trace_kind_name(row(s, i)->kind); }

static sublet_status run_check(rp *s, size_t i, int after_prelude)
{
    char msg[512];
    if (sublet_check(s->a, msg, sizeof msg) == SUBLET_OK)
        return SUBLET_OK;
    if (after_prelude)
        return fatal(s, SUBLET_ERR_CORRUPT, "after seeding the prelude: %s", msg);
    return fatal(s, SUBLET_ERR_CORRUPT, "event %zu (line %llu, %s): %s", i,
                 (unsigned long long)row(s, i)->line, kind_of(s, i), msg);
}

/* ---- the prelude ------------------------------------------------------------------ */

/* The prelude's live blocks allocated through the engine, lowest address
 * first (SUBLET_PRELUDE_ALLOCATE). */
static sublet_status allocate_prelude(rp *s, size_t npre)
{
    const sublet_trace_event **allocs = malloc((npre ? npre : 1) * sizeof *allocs);
    if (!allocs)
        return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory seeding the prelude");
    size_t nalloc = 0;
    for (size_t i = 0; i < npre; i++) {
        if (s->pre[i].kind == SUBLET_TRACE_PRE_ALLOC)
            allocs[nalloc++] = &s->pre[i];
        else
            s->recorded_reserved += s->pre[i].size;
    }
    rf_sort_rows_by_addr(allocs, nalloc);
    sublet_status fat = SUBLET_OK;
    for (size_t j = 0; j < nalloc && fat == SUBLET_OK; j++) {
        const sublet_trace_event *e = allocs[j];
        size_t i = (size_t)(e - s->pre);
        s->cur = i;
        clock_rows(s, i, 1);
        if (s->o->before_event)
            s->o->before_event(s->o->observer_user, s->a, i, e);
        void *p = NULL;
        long k = 0;
        sublet_status st =
            rf_pool_malloc(&s->pools, s->r, s->a, e, e->size ? e->size : 1, &k, &p);
        if (st == SUBLET_ERR_NO_MEMORY && k < 0) {
            fat = fatal(s, st, "out of memory seeding the prelude");
            break;
        }
        if (s->o->after_event)
            s->o->after_event(s->o->observer_user, s->a, i, e);
        if (st == SUBLET_ERR_OOM) {
            s->r->ooms++;
            if (s->r->first_oom_event == SUBLET_REPLAY_NONE)
                s->r->first_oom_event = i;
            if (s->o->on_oom) { /* reported as any other OOM, by its row */
                char msg[2048];
                sublet_oom_message(s->a, msg, sizeof msg);
                s->o->on_oom(s->o->oom_user, i, e->line, e->size, e->stream, msg);
            }
            if (s->o->stop_on_oom) {
                s->r->stopped_on_oom = 1;
                break;
            }
            continue;
        }
        if (st != SUBLET_OK) {
            row_error(s, i, "pre_alloc of %llu bytes cannot be allocated: %s",
                      (unsigned long long)e->size, sublet_status_text(st));
            continue;
        }
        if (!rf_addrs_put(&s->addrs, s->a, e->addr, (uint64_t)(uintptr_t)p))
            fat = fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory seeding the prelude");
        s->r->pre_allocs++;
    }
    free(allocs);
    return fat;
}

/* The prelude mode, AUTO resolved under the replay's settings. */
static int prelude_mode(rp *s)
{
    sublet_settings set;
    sublet_settings_get(s->a, &set);
    int mode = s->o->prelude;
    if (mode == SUBLET_PRELUDE_AUTO)
        mode = set.expandable_segments || set.policy != SUBLET_POLICY_NATIVE
                   ? SUBLET_PRELUDE_ALLOCATE
                   : SUBLET_PRELUDE_ADOPT;
    return mode;
}

static sublet_status seed_prelude(rp *s, size_t npre, int mode)
{
    sublet_settings set;
    sublet_settings_get(s->a, &set);
    if (mode == SUBLET_PRELUDE_ALLOCATE)
        return allocate_prelude(s, npre);

    rf_seg_ref *segs = malloc((npre ? npre : 1) * sizeof *segs);
    const sublet_trace_event **allocs = malloc((npre ? npre : 1) * sizeof *allocs);
    if (!segs || !allocs) {
        free(segs);
        free(allocs);
        return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory seeding the prelude");
    }
    size_t nseg = 0, nalloc = 0;
    for (size_t i = 0; i < npre; i++) {
        const sublet_trace_event *e = &s->pre[i];
        if (e->kind == SUBLET_TRACE_PRE_ALLOC) {
            allocs[nalloc++] = e;
            continue;
        }
        int small = e->size == SL_SMALL_BUFFER;
        s->recorded_reserved += e->size;
        s->cur = i;
        clock_rows(s, i, 1);
        sublet_status st = sublet_seed_segment(s->a, e->addr, e->size, e->stream, small);
        if (st != SUBLET_OK) {
            row_error(s, i, "pre_segment at %llu of %llu bytes cannot be seeded: %s",
                      (unsigned long long)e->addr, (unsigned long long)e->size,
                      sublet_status_text(st));
            continue;
        }
        segs[nseg++] = (rf_seg_ref){e->addr, e->size, small};
        s->r->pre_segments++;
    }
    rf_sort_segs_by_addr(segs, nseg);
    rf_sort_rows_by_addr(allocs, nalloc);
    sublet_status fat = SUBLET_OK;
    for (size_t j = 0; j < nalloc && fat == SUBLET_OK; j++) {
        const sublet_trace_event *e = allocs[j];
        size_t i = (size_t)(e - s->pre);
        const rf_seg_ref *sg = rf_seg_containing(segs, nseg, e->addr);
        if (!sg) {
            row_error(s, i, "pre_alloc at %llu lies in no seeded segment",
                      (unsigned long long)e->addr);
            continue;
        }
        uint64_t limit = sg->addr + sg->size;
        if (j + 1 < nalloc && allocs[j + 1]->addr < limit)
            limit = allocs[j + 1]->addr;
        uint64_t room = limit - e->addr;
        uint64_t block;
        if (e->block_size) {
            block = e->block_size < room ? e->block_size : room; /* the source knew it */
        } else {
            block = sublet_round_size(&set, e->size ? e->size : 1);
            if (block > room)
                block = room; /* inconsistent prelude: keep the next block intact */
            else if (!sg->small && room - block <= SL_SMALL_SIZE)
                block = room; /* PyTorch would not have split this tail off */
        }
        s->cur = i;
        clock_rows(s, i, 1);
        sublet_status st = block ? sublet_seed_block(s->a, e->addr, block, e->size, e->stream)
                                 : SUBLET_ERR_INVALID_ARGUMENT;
        if (st != SUBLET_OK) {
            row_error(s, i, "pre_alloc at %llu (%llu bytes as a %llu-byte block) cannot be "
                      "seeded: %s", (unsigned long long)e->addr, (unsigned long long)e->size,
                      (unsigned long long)block, sublet_status_text(st));
            continue;
        }
        if (!rf_addrs_put(&s->addrs, s->a, e->addr, e->addr))
            fat = fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory seeding the prelude");
        s->r->pre_allocs++;
    }
    free(segs);
    free(allocs);
    return fat;
}

/* ---- one event each --------------------------------------------------------------- */

/* The engine refused row i's request: count it, tell the caller. */
static void engine_oom(rp *s, size_t i, const sublet_trace_event *e)
{
    sublet_replay_result *r = s->r;
    r->ooms++;
    if (r->first_oom_event == SUBLET_REPLAY_NONE)
        r->first_oom_event = i;
    if (s->o->on_oom) {
        char msg[2048];
        sublet_oom_message(s->a, msg, sizeof msg);
        s->o->on_oom(s->o->oom_user, i, e->line, e->size, e->stream, msg);
    }
    if (s->o->stop_on_oom)
        r->stopped_on_oom = 1;
}

/* An OOM PyTorch recorded: its request (the rounded size, its stream and
 * pool) asked of the engine again, which must refuse it as well.  The
 * releases PyTorch made on the way (its segment_free rows just before) were
 * replayed as such.  A request the engine serves is a mismatch, and the
 * block is freed at once (PyTorch holds none). */
static sublet_status oom_request(rp *s, size_t i, const sublet_trace_event *e, int collect)
{
    sublet_replay_fidelity *f = &s->r->fidelity;
    void *p = NULL;
    long k = 0;
    f->recorded_ooms++;
    rf_call_begin(&s->pr, collect);
    sublet_status st = rf_pool_malloc(&s->pools, s->r, s->a, e, e->size, &k, &p);
    if (st == SUBLET_ERR_NO_MEMORY && k < 0)
        return fatal(s, st, "out of memory");
    if (st == SUBLET_ERR_OOM) {
        f->ooms_matched++;
        engine_oom(s, i, e);
        return SUBLET_OK;
    }
    if (f->first_oom_mismatch == SUBLET_REPLAY_NONE)
        f->first_oom_mismatch = i;
    if (st == SUBLET_OK && p)
        (void)sublet_free(s->a, p);
    return SUBLET_OK;
}

static sublet_status do_oom(rp *s, size_t i, const sublet_trace_event *e)
{
    if (s->oom_done == i && i > 0)
        return SUBLET_OK; /* driven with the release run before it */
    return oom_request(s, i, e, 0);
}

static sublet_status do_alloc(rp *s, size_t i, const sublet_trace_event *e)
{
    sublet_replay_result *r = s->r;
    sublet_replay_fidelity *f = &r->fidelity;
    /* PyTorch's decision: a segment_alloc row, or segment_map rows, before it
     * (the window holds them: keep_from) */
    rf_oracle rec = rf_oracle_of(s->ev, i - s->base);
    rec.first_row += s->base;
    if (s->placement_hints)
        sublet_sim_next_hint(s->sim, rec.kind != RF_NONE ? rec.addr : 0);
    size_t own = s->own_run; /* this malloc makes the release run before it */
    s->own_run = 0;
    if (own)
        clock_rows(s, own - 1, i - own + 2);
    else if (rec.kind != RF_NONE)
        clock_rows(s, rec.first_row, i - rec.first_row + 1);
    rf_call_begin(&s->pr, own != 0);
    void *p = NULL;
    long k = 0;
    sublet_status st = rf_pool_malloc(&s->pools, r, s->a, e, e->size, &k, &p);
    if (s->placement_hints)
        sublet_sim_next_hint(s->sim, 0);
    if (st == SUBLET_ERR_NO_MEMORY && k < 0)
        return fatal(s, st, "out of memory");
    if (st == SUBLET_ERR_BUSY) {
        row_error(s, i, "alloc of %llu bytes in pool (%llu, %llu), which the replay released "
                  "at an earlier empty_cache that freed its segments",
                  (unsigned long long)e->size, (unsigned long long)e->pool_id[0],
                  (unsigned long long)e->pool_id[1]);
        if (!rf_addrs_put(&s->addrs, s->a, e->addr, 0))
            return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        return SUBLET_OK;
    }
    r->allocs++;
    rf_judged j = rf_judge_alloc(f, i, &rec, &s->pr);
    if (own && rf_judge_release(f, row(s, own - 1), own - 1, s->own_run_len, &s->pr) != 0)
        return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");

    if (st == SUBLET_ERR_OOM) {
        engine_oom(s, i, e);
    } else if (st == SUBLET_OK && p) {
        j.address = (uint64_t)(uintptr_t)p == e->addr;
        if (j.address)
            f->addresses_matched++;
        else if (f->first_address_mismatch == SUBLET_REPLAY_NONE)
            f->first_address_mismatch = i;
    }
    rf_pools_judge(&s->pools, r, k, i, j);
    if (st != SUBLET_OK && st != SUBLET_ERR_OOM) {
        if (k > 0) /* e.g. policy:stitch, which has no private pools */
            return fatal(s, st, "event %zu (line %llu): alloc of %llu bytes in private pool "
                         "(%llu, %llu): %s", i, (unsigned long long)e->line,
                         (unsigned long long)e->size, (unsigned long long)e->pool_id[0],
                         (unsigned long long)e->pool_id[1], sublet_status_text(st));
        return fatal(s, st, "event %zu (line %llu): alloc of %llu bytes: %s", i,
                     (unsigned long long)e->line, (unsigned long long)e->size,
                     sublet_status_text(st));
    }
    /* 0 marks an allocation the engine did not make (OOM, or size 0). */
    if (!rf_addrs_put(&s->addrs, s->a, e->addr, (uint64_t)(uintptr_t)p))
        return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    return SUBLET_OK;
}

/* A pointer error of sublet_free: it holds no allocated block there (and
 * changed nothing). */
static int not_held(sublet_status st)
{
    return st == SUBLET_ERR_INVALID_POINTER || st == SUBLET_ERR_DOUBLE_FREE ||
           st == SUBLET_ERR_INTERIOR_POINTER;
}

static sublet_status do_free_requested(rp *s, size_t i, const sublet_trace_event *e)
{
    const sublet_trace_event *nx = i + 1 - s->base < s->n ? e + 1 : NULL; /* recorded rows */
    int now = nx && nx->kind == SUBLET_ACT_FREE_COMPLETED && nx->addr == e->addr;
    /* Under the identity (replay_addrs.c) the free itself tells whether the
     * engine holds the address: a lookup the less for most frees. */
    int asks_free = now && s->addrs.identity && e->addr != 0;
    uint64_t ptr = e->addr;
    if (!asks_free && !rf_addrs_take(&s->addrs, s->a, e->addr, &ptr)) {
        row_error(s, i, "free_requested of %llu, which is not allocated",
                  (unsigned long long)e->addr);
        return SUBLET_OK;
    }
    if (ptr == 0) {
        s->r->frees++;
        return SUBLET_OK; /* its alloc failed: nothing to free */
    }
    void *p = (void *)(uintptr_t)ptr;
    if (now)
        clock_rows(s, i, 2);
    if (!now) {
        sublet_stream syn = SYNTHETIC_STREAM_BASE | ++s->next_stream;
        sublet_status st = sublet_record_stream(s->a, p, syn);
        if (st != SUBLET_OK) {
            row_error(s, i, "record_stream: %s", sublet_status_text(st));
        } else if (!rf_map_put(&s->pending, e->addr, syn)) {
            return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        } else {
            s->r->deferred_frees++;
        }
    }
    sublet_status st = sublet_free(s->a, p);
    if (asks_free && not_held(st)) {
        row_error(s, i, "free_requested of %llu, which is not allocated",
                  (unsigned long long)e->addr);
        return SUBLET_OK;
    }
    s->r->frees++;
    if (st == SUBLET_ERR_NO_MEMORY)
        return fatal(s, st, "event %zu: free: %s", i, sublet_status_text(st));
    if (st != SUBLET_OK)
        row_error(s, i, "free of %llu: %s", (unsigned long long)e->addr, sublet_status_text(st));
    return SUBLET_OK;
}

static void do_free_completed(rp *s, size_t i, const sublet_trace_event *e)
{
    uint64_t syn;
    if (rf_map_take(&s->pending, e->addr, &syn)) {
        /* The block is freed here, as the row: PyTorch's process_events frees
         * the blocks whose events completed in the order of these rows, and
         * where two of them meet (merging, a split block's statistics) the
         * order shows; the engine's next malloc would free all that are
         * ready in its own order.  With record on, its entry lands here. */
        sublet_sim_stream_complete(s->sim, syn);
        (void)sublet_process_events(s->a);
        return;
    }
    if (i > 0 && row(s, i - 1)->kind == SUBLET_ACT_FREE_REQUESTED && row(s, i - 1)->addr == e->addr)
        return; /* completed with its request */
    row_error(s, i, "free_completed of %llu without a pending free", (unsigned long long)e->addr);
}

/* Does the malloc of the alloc recorded at row `next` (after a release run)
 * release cached segments itself before it makes the segment recorded for
 * it?  So it does, PyTorch's garbage collection (§3.6), when the request
 * misses the cache (a segment_alloc row, then the alloc) and the bytes
 * reserved are over the threshold: the run is the collection's, which frees
 * only the older blocks, not an empty_cache. */
static int malloc_releases(rp *s, size_t next)
{
    if (!have(s, next + 1))
        return 0;
    const sublet_trace_event *seg = row(s, next), *al = row(s, next + 1);
    if (seg->kind != SUBLET_ACT_SEGMENT_ALLOC || al->kind != SUBLET_ACT_ALLOC ||
        al->addr != seg->addr)
        return 0;
    const sublet_allocator *a = s->a;
    return sl_gc_active(a) &&
           a->total_allocated_memory > (uint64_t)(a->settings.garbage_collection_threshold *
                                                  (double)a->allowed_memory_maximum);
}

/* Could rows a and b come from one call?  PyTorch records every row of one
 * malloc, its own release_cached_blocks' unmaps and frees and its oom row,
 * with the context it gathered once: rows whose recorded stacks differ come
 * from two calls (a release run of torch.cuda.empty_cache() right before a
 * request that fails without releasing anything, under a stack of its own).
 * Rows without a stack may be either. */
static bool same_call(const sublet_trace_event *a, const sublet_trace_event *b)
{
    return !a->frames || !b->frames || a->frames == b->frames;
}

/* A run of segment_free / segment_unmap rows: one empty_cache(), whose
 * releases are compared with the run's as a set. */
static sublet_status do_release(rp *s, size_t i, const sublet_trace_event *e)
{
    sublet_replay_fidelity *f = &s->r->fidelity;
    if (e->kind == SUBLET_ACT_SEGMENT_FREE)
        f->recorded_segment_frees++;
    else
        f->recorded_segment_unmaps++;
    s->recorded_reserved -= e->size < s->recorded_reserved ? e->size : s->recorded_reserved;
    if (i > 0 && rf_is_release(row(s, i - 1)->kind))
        return SUBLET_OK; /* the same empty_cache() */
    /* the whole run is in the window (prefetch) */
    size_t run = rf_release_run(s->ev, s->n, i - s->base);
    int dflt = 0;
    uint64_t failed[2];
    sublet_status st = rf_pools_release(&s->pools, s->r, s->a, &s->ev[i - s->base], i, run, &dflt,
                                        failed);
    if (st == SUBLET_ERR_NO_MEMORY)
        return fatal(s, st, "out of memory");
    if (st != SUBLET_OK)
        return fatal(s, st, "event %zu: releasing pool (%llu, %llu): %s", i,
                     (unsigned long long)failed[0], (unsigned long long)failed[1],
                     sublet_status_text(st));
    clock_rows(s, i, run);
    /* A run right before an oom row is the failed request's own release
     * (PyTorch's release_cached_blocks between its first try and its
     * retry): the request is driven here, its releases judged against the
     * run's.  Its first try comes before the release, as PyTorch's did: under
     * expandable segments it may map pages (rows before the run that no
     * alloc took) and reserve an address range, where the release has not
     * yet freed the ranges it frees. */
    size_t next = i + run;
    if (s->o->replay_ooms && dflt && have(s, next) && row(s, next)->kind == SUBLET_ACT_OOM &&
        same_call(row(s, i), row(s, next))) {
        const sublet_trace_event *oom = row(s, next);
        if ((st = oom_request(s, next, oom, 1)) != SUBLET_OK)
            return st;
        s->oom_done = next;
        if (rf_judge_release(f, row(s, i), i, run, &s->pr) != 0)
            return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        return SUBLET_OK;
    }
    if (dflt && malloc_releases(s, next)) {
        s->own_run = i + 1;
        s->own_run_len = run;
        return SUBLET_OK;
    }
    rf_call_begin(&s->pr, 1);
    st = rf_pools_empty_cache(&s->pools, s->a, i, dflt);
    s->r->empty_caches++;
    if (rf_judge_release(f, e, i, run, &s->pr) != 0)
        return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    if (st != SUBLET_OK)
        return fatal(s, st, "event %zu (line %llu): empty_cache: %s", i,
                     (unsigned long long)e->line, sublet_status_text(st));
    return SUBLET_OK;
}

static sublet_status do_event(rp *s, size_t i, const sublet_trace_event *e)
{
    switch (e->kind) {
    case SUBLET_ACT_ALLOC:
        return do_alloc(s, i, e);
    case SUBLET_ACT_FREE_REQUESTED:
        return do_free_requested(s, i, e);
    case SUBLET_ACT_FREE_COMPLETED:
        do_free_completed(s, i, e);
        return SUBLET_OK;
    case SUBLET_ACT_SEGMENT_ALLOC:
    case SUBLET_ACT_SEGMENT_MAP:
        s->recorded_reserved += e->size; /* the oracle of the alloc that follows */
        return SUBLET_OK;
    case SUBLET_ACT_SEGMENT_FREE:
    case SUBLET_ACT_SEGMENT_UNMAP:
        return do_release(s, i, e);
    case SUBLET_ACT_SNAPSHOT:
        if (s->o->record != SUBLET_RECORD_OFF)
            sl_history_snapshot_marker(s->a); /* what taking a snapshot records */
        return SUBLET_OK;
    case SUBLET_ACT_OOM:
        if (!s->o->replay_ooms) {
            s->r->fidelity.recorded_ooms++;
            return SUBLET_OK;
        }
        return do_oom(s, i, e);
    default:
        return fatal(s, SUBLET_ERR_INVALID_ARGUMENT, "event %zu (line %llu): %s row after the "
                     "prelude", i, (unsigned long long)e->line, kind_of(s, i));
    }
}

/* Statistics after event i (SIZE_MAX: after the prelude). */
/* After each event: a new peak of reserved bytes keeps the statistics of
 * that moment.  Reserved bytes only rise with a segment_alloc or
 * segment_map, so the statistics are read only then (a copy per event
 * would cost more than the event). */
static void observe(rp *s, size_t i)
{
    sublet_replay_result *r = s->r;
    if (s->recorded_reserved > r->fidelity.recorded_peak_reserved_bytes)
        r->fidelity.recorded_peak_reserved_bytes = s->recorded_reserved;
    if (!s->reserved_grew)
        return;
    s->reserved_grew = 0;
    sublet_stats *st = s->stats_read;
    sublet_stats_read(s->a, st);
    int64_t res = st->reserved_bytes[SUBLET_POOL_ALL].current;
    if (res > s->best_reserved) {
        s->best_reserved = res;
        s->stats_read = s->stats_best;
        s->stats_best = st;
        r->peak_reserved_event = i == SIZE_MAX ? SUBLET_REPLAY_NONE : i;
    }
}

/* ---- the driver --------------------------------------------------------------------- */

void sublet_replay_options_init(sublet_replay_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->conf = "";
    o->device_memory = SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
    o->stop_after = SUBLET_REPLAY_ALL;
    o->placement_hints = 1;
}

void sublet_replay_result_free(sublet_replay_result *r)
{
    if (!r)
        return;
    free(r->summary_peak);
    free(r->summary_end);
    r->summary_peak = r->summary_end = NULL;
}

static char *summary_text(const sublet_stats *st, int device)
{
    size_t n = sublet_stats_format_summary(st, device, 0, NULL, 0);
    char *buf = malloc(n + 1);
    if (buf)
        sublet_stats_format_summary(st, device, 0, buf, n + 1);
    return buf;
}

/* Room in the address map for the most allocations the trace holds live
 * at once (counted from its rows, as if every free matched an alloc), at
 * the map's load of 1/2: growing it while replaying would rehash it
 * several times over. */
static size_t addrs_capacity(const rp *s)
{
    if (!s->in_place)
        return 1024; /* a stream: it grows with the live blocks */
    size_t live = 0, most = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t k = s->ev[i].kind;
        if (k == SUBLET_ACT_ALLOC || k == SUBLET_TRACE_PRE_ALLOC) {
            if (++live > most)
                most = live;
        } else if (k == SUBLET_ACT_FREE_REQUESTED && live > 0) {
            live--;
        }
    }
    size_t cap = 64;
    while (cap < 2 * (most + 1) && cap < ((size_t)1 << 26))
        cap *= 2;
    return cap;
}

static sublet_status setup(rp *s)
{
    const sublet_replay_options *o = s->o;
    uint64_t cap = o->device_memory ? o->device_memory : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
    sublet_status st = o->device_base ? sublet_sim_create_at(cap, o->device_base, &s->sim)
                                      : sublet_sim_create(cap, &s->sim);
    if (st != SUBLET_OK)
        return fatal(s, st, "cannot create the sim backend: %s", sublet_status_text(st));
    sublet_backend *be = s->sim;
    s->placement_hints = o->placement_hints != 0;
    char msg[512] = "";
    sublet_options ao = {.backend = be, .device = 0, .conf = o->conf ? o->conf : ""};
    st = sublet_allocator_create(&ao, &s->a, msg, sizeof msg);
    if (st != SUBLET_OK)
        return fatal(s, st, "%s", msg[0] ? msg : sublet_status_text(st));
    uint64_t peak_used, refusals;
    sublet_sim_capacity_use(be, &peak_used, &s->info0, &refusals);
    sublet_settings set;
    sublet_settings_get(s->a, &set);
    if (!rf_addrs_init(&s->addrs, addrs_capacity(s), set.policy == SUBLET_POLICY_NATIVE) ||
        !rf_map_alloc(&s->pending, 64))
        return fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    sublet_trace_set(s->a, on_trace, s);
    if (!o->trace) /* on_trace then needs only what rf_call_event counts */
        sublet_trace_set_actions(s->a, SUBLET_TRACE_ALL & ~RF_CALL_UNCOUNTED);
    if (o->record != SUBLET_RECORD_OFF) {
        sublet_clock_set(s->a, rec_clock, s);
        sublet_stack_source_set(s->a, rec_stack, s);
        /* on while seeding, so seeded blocks keep their rows' stacks */
        st = sublet_history_record(s->a, o->record, o->record_context, o->record_max_entries);
        if (st != SUBLET_OK)
            return fatal(s, st, "cannot start recording: %s", sublet_status_text(st));
    }
    return SUBLET_OK;
}

static void teardown(rp *s)
{
    if (s->a)
        sublet_allocator_destroy(s->a);
    if (s->sim)
        sublet_backend_destroy(s->sim);
    rf_addrs_fini(&s->addrs);
    rf_map_fini(&s->pending);
    rf_call_fini(&s->pr);
    rf_pools_fini(&s->pools);
}

static void result_init(sublet_replay_result *r)
{
    memset(r, 0, sizeof *r);
    r->last_event = r->peak_reserved_event = r->first_oom_event = SUBLET_REPLAY_NONE;
    r->same_from = SUBLET_REPLAY_NONE;
    r->fidelity.first_decision_mismatch = r->fidelity.first_size_mismatch = SUBLET_REPLAY_NONE;
    r->fidelity.first_address_mismatch = SUBLET_REPLAY_NONE;
    r->fidelity.first_empty_cache_mismatch = SUBLET_REPLAY_NONE;
    r->fidelity.first_oom_mismatch = SUBLET_REPLAY_NONE;
    r->fidelity.empty_cache_mismatch.first_only_recorded.kind = SUBLET_ACT_COUNT;
    r->fidelity.empty_cache_mismatch.first_only_engine.kind = SUBLET_ACT_COUNT;
    /* the default pools' row of the per-pool table, counted from the start */
    r->pools[0].first_decision_mismatch = r->pools[0].first_address_mismatch =
        r->pools[0].released_at = SUBLET_REPLAY_NONE;
}

/* The expandable-prelude check: over an in-memory trace, on the whole trace
 * before anything is driven; over a stream, its prelude part now and the
 * rows as they come (check_row). */
static sublet_status check_expandable(rp *s, const sublet_trace *t)
{
    char why[1024];
    sublet_status st = t ? rf_expandable_prelude(t, s->o->prelude, why, sizeof why)
                         : rf_xcheck_begin(&s->xc, sublet_trace_stream_settings(s->ts), s->pre,
                                           s->npre, s->o->prelude, why, sizeof why);
    if (st != SUBLET_OK)
        st = fatal(s, st, "%s", st == SUBLET_ERR_NO_MEMORY ? "out of memory" : why);
    return st;
}

/* The replay of s->ts: one driver for an in-memory trace (t, whose array is
 * the window) and a stream (t NULL). */
/* Every poll_every rows: does the caller's stop_if stop the replay here? */
static int stop_asked(rp *s)
{
    if (++s->since_poll < s->poll_every)
        return 0;
    s->since_poll = 0;
    sublet_sim_ops ops;
    sublet_sim_ops_read(s->sim, &ops);
    if (!s->o->stop_if(s->o->stop_if_user, s->a, &ops))
        return 0;
    s->r->stopped_early = 1;
    return 1;
}

static sublet_status drive(rp *s, const sublet_trace *t)
{
    const sublet_replay_options *o = s->o;
    sublet_replay_result *r = s->r;
    s->npre = sublet_trace_stream_prelude(s->ts, &s->pre);
    if (t) {
        s->in_place = 1;
        s->ev = sublet_trace_events(t);
        s->n = sublet_trace_count(t);
        s->base = 0;
        s->eof = 1;
    } else {
        s->base = s->keep_from = s->npre;
    }
    s->stats_best = &s->stats_buf[0];
    s->stats_read = &s->stats_buf[1];
    s->poll_every = o->stop_if_every ? o->stop_if_every : 4096;
    size_t npre = s->npre;
    sublet_status st = setup(s);
    int mode = st == SUBLET_OK ? prelude_mode(s) : SUBLET_PRELUDE_ADOPT;
    if (st == SUBLET_OK)
        st = check_expandable(s, t);
    if (st == SUBLET_OK)
        st = seed_prelude(s, npre, mode);
    if (st == SUBLET_OK && o->record != SUBLET_RECORD_OFF &&
        !(o->record_prelude && mode == SUBLET_PRELUDE_ALLOCATE)) {
        /* restart: the history holds recorded events only */
        st = sublet_history_record(s->a, o->record, o->record_context, o->record_max_entries);
        if (st != SUBLET_OK)
            st = fatal(s, st, "cannot start recording: %s", sublet_status_text(st));
    }
    if (st == SUBLET_OK) {
        /* the prelude's rows count as driven once it is seeded, so that
         * every row index reported (an OOM's, last_event) is below events */
        r->events = npre;
        s->reserved_grew = 1; /* the seeded prelude */
        observe(s, npre ? npre - 1 : SIZE_MAX);
        if (o->check)
            st = run_check(s, 0, 1);
    }
    /* an OOM while allocating the prelude stops it there (stop_on_oom) */
    for (size_t i = npre; st == SUBLET_OK && !r->stopped_on_oom && i <= o->stop_after; i++) {
        if (!have(s, i) || !prefetch(s, i))
            break;
        if (s->xc.active) {
            char why[1024];
            sublet_status xs = rf_xcheck_row(&s->xc, row(s, i), i, why, sizeof why);
            if (xs != SUBLET_OK) {
                /* refused as the whole trace is, before any row: start afresh */
                teardown(s);
                result_init(r);
                s->a = NULL;
                s->sim = NULL;
                s->best_reserved = -1;
                s->recorded_reserved = 0;
                s->reserved_grew = 0;
                s->next_stream = 0;
                s->stats_best = &s->stats_buf[0];
                s->stats_read = &s->stats_buf[1];
                st = setup(s);
                if (st == SUBLET_OK)
                    st = fatal(s, xs, "%s", xs == SUBLET_ERR_NO_MEMORY ? "out of memory" : why);
                break;
            }
        }
        /* the row stays put until the next have() */
        const sublet_trace_event *e = &s->ev[i - s->base];
        s->cur = i;
        clock_rows(s, i, 1);
        if (o->before_event)
            o->before_event(o->observer_user, s->a, i, e);
        st = do_event(s, i, e);
        if (o->after_event)
            o->after_event(o->observer_user, s->a, i, e);
        r->events++;
        r->last_event = i;
        observe(s, i);
        if (st == SUBLET_OK && o->check)
            st = run_check(s, i, 0);
        retire(s, i, e->kind);
        if (r->stopped_on_oom)
            break;
        if (o->stop_if && stop_asked(s))
            break;
    }
    if (st == SUBLET_OK && s->rd_st != SUBLET_OK)
        st = fatal(s, s->rd_st, "%s", s->rd_err);
    if (s->best_reserved >= 0)
        r->stats_peak = *s->stats_best;
    if (s->a) {
        sublet_stats_read(s->a, &r->stats_end);
        sublet_stats *e = &r->stats_end;
        r->peak_requested_bytes = (uint64_t)e->requested_bytes[SUBLET_POOL_ALL].peak;
        r->peak_reserved_bytes = (uint64_t)e->reserved_bytes[SUBLET_POOL_ALL].peak;
        r->final_reserved_bytes = (uint64_t)e->reserved_bytes[SUBLET_POOL_ALL].current;
        r->device_allocs = (uint64_t)e->num_device_alloc;
        r->device_frees = (uint64_t)e->num_device_free;
        r->alloc_retries = (uint64_t)e->num_alloc_retries;
        sublet_sim_ops_read(s->sim, &r->device_ops);
        if (st == SUBLET_OK && !r->ooms && !r->stopped_on_oom && !r->stopped_early)
            r->same_from = sl_same_from(s->a, s->sim, s->info0,
                                        o->device_memory ? o->device_memory
                                                         : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY);
        r->fidelity.recorded_final_reserved_bytes = s->recorded_reserved;
        if (o->capture_summary) {
            r->summary_peak = summary_text(&r->stats_peak, 0);
            r->summary_end = summary_text(&r->stats_end, 0);
            if ((!r->summary_peak || !r->summary_end) && st == SUBLET_OK)
                st = fatal(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        }
    }
    if (o->on_finish)
        o->on_finish(o->finish_user, s->a, r->last_event, st);
    teardown(s);
    rf_xcheck_fini(&s->xc);
    free(s->own);
    return st;
}

/* The one replay: sublet_replay_stream (row_clock 0), sl_replay_stream_stamped
 * (row_clock 1), and through the first sublet_replay_run, whose trace is
 * served as a stream (sublet_trace_stream_from_trace). */
static sublet_status replay(sublet_trace_stream *ts, const sublet_replay_options *o,
                            sublet_replay_result *r, char *err, size_t err_cap, int row_clock)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!r)
        return SUBLET_ERR_INVALID_ARGUMENT;
    result_init(r);
    if (!ts)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_replay_options defaults;
    if (!o) {
        sublet_replay_options_init(&defaults);
        o = &defaults;
    }
    /* a stream over an in-memory trace, not read yet: its array is the window */
    const sublet_trace *t = sublet_trace_stream_trace(ts);
    if (t && sublet_trace_stream_rows(ts) != sublet_trace_prelude_count(t))
        t = NULL;
    rp s = {.o = o, .r = r, .err = err, .err_cap = err_cap, .best_reserved = -1, .ts = ts,
            .row_clock = row_clock, .stamp_row = SIZE_MAX};
    return drive(&s, t);
}

sublet_status sublet_replay_run(const sublet_trace *t, const sublet_replay_options *o,
                                sublet_replay_result *r, char *err, size_t err_cap)
{
    if (!t) {
        if (r)
            result_init(r);
        if (err && err_cap)
            err[0] = '\0';
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_from_trace(t, &ts) != SUBLET_OK) {
        if (r)
            result_init(r);
        return sl_fail(err, err_cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    sublet_status st = sublet_replay_stream(ts, o, r, err, err_cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_replay_stream(sublet_trace_stream *ts, const sublet_replay_options *o,
                                   sublet_replay_result *r, char *err, size_t err_cap)
{
    return replay(ts, o, r, err, err_cap, 0);
}

sublet_status sl_replay_stream_stamped(sublet_trace_stream *ts, const sublet_replay_options *o,
                                       sublet_replay_result *r, char *err, size_t err_cap)
{
    return replay(ts, o, r, err, err_cap, 1);
}
