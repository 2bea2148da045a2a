/* sublet — pre-allocation: sublet_reserve() and the warm-up plan.
 *
 * sublet_reserve creates cached, free device memory ahead of the requests
 * that will use it, through the same device path as an allocation (memory
 * fraction, statistics, trace events), so that a run which reserved what it
 * needs at start makes no device call later.  Under the native policy it is
 * one segment of exactly the size asked (a size the pool itself could have
 * created); with expandable segments it maps pages at the growable end of
 * the stream's reservation; policy:stitch is refused (it maps pages where it
 * stitches them).
 *
 * The warm-up plan (the `warmup` option, sublet_settings.warmup) lists such
 * reservations for the default stream.  sl_warmup_apply makes sure the
 * allocator holds them: at creation everything is reserved; on a later
 * sublet_settings_apply only what is missing (segments of the plan's sizes
 * already held count, as do pages already mapped), so applying the same
 * string twice reserves nothing more.  `sublet tune` derives plans that make
 * a recorded run do no device allocation after them (docs/tune.md §7). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/reserve.h"
#include "base/errmsg.h"
#include "engine/history_internal.h"

static const char *pool_name(int kind) { return kind == SUBLET_POOL_SMALL ? "small" : "large"; }

/* The device's free bytes, and what the memory fraction still allows
 * (UINT64_MAX when no fraction is set). */
static void headroom(sublet_allocator *a, uint64_t *dev_free, uint64_t *dev_total,
                     uint64_t *allowed)
{
    if (a->backend->ops->mem_info(a->backend, dev_free, dev_total) != SUBLET_OK)
        *dev_free = *dev_total = 0;
    *allowed = !a->limit_in_effect ? UINT64_MAX
               : a->allowed_memory_maximum > a->total_allocated_memory
                   ? a->allowed_memory_maximum - a->total_allocated_memory
                   : 0;
}

/* The OOM message of a refused reservation (lock held). */
static void refused(sublet_allocator *a, uint64_t size, sublet_stream stream, int kind)
{
    uint64_t dev_free, dev_total, allowed;
    headroom(a, &dev_free, &dev_total, &allowed);
    char fs[48], ff[48], ft[48], fa[48];
    sublet_format_size(size, fs, sizeof fs);
    sublet_format_size(dev_free, ff, sizeof ff);
    sublet_format_size(dev_total, ft, sizeof ft);
    char frac[96] = "";
    if (allowed != UINT64_MAX) {
        sublet_format_size(allowed, fa, sizeof fa);
        snprintf(frac, sizeof frac, "; the memory fraction allows %s more", fa);
    }
    snprintf(a->oom_msg, sizeof a->oom_msg,
             "sublet_reserve: cannot reserve %s in the %s pool for stream %llu: GPU %d has a "
             "total capacity of %s of which %s is free%s. A reservation never frees cached "
             "memory to make room.",
             fs, pool_name(kind), (unsigned long long)stream, a->device, ft, ff, frac);
}

/* The stream's free mapped run at the growable end of its reservation in
 * `pool` (what find_expandable_block starts from), in bytes. */
static uint64_t growable_run(const sl_pool *pool, sublet_stream stream)
{
    for (size_t i = 0; i < pool->nunmapped; i++) {
        const sl_block *u = pool->unmapped[i];
        if (u->stream != stream)
            continue;
        const sl_block *p = u->prev;
        return p && p->mapped && !sl_block_active(p) ? p->size : 0;
    }
    return 0;
}

/* The work of sublet_reserve, lock held, arguments checked.  *made (may be
 * NULL) receives the new segment's block under the native policy. */
static sublet_status reserve_locked(sublet_allocator *a, uint64_t size, sublet_stream stream,
                                    int kind, sl_block **made)
{
    sl_pool *pool = kind == SUBLET_POOL_SMALL ? &a->small : &a->large;
    if (made)
        *made = NULL;
    if (!sl_pool_tree(pool, stream, true))
        return SUBLET_ERR_NO_MEMORY;
    if (a->limit_in_effect && a->total_allocated_memory + size > a->allowed_memory_maximum) {
        a->cap_limit_refused = true;
        refused(a, size, stream, kind);
        return SUBLET_ERR_OOM;
    }
    if (a->limit_in_effect && a->total_allocated_memory + size > a->cap_limit_need)
        a->cap_limit_need = a->total_allocated_memory + size;
    a->cur_stack =
        a->history && sl_history_context(a) >= SUBLET_CONTEXT_STATE ? sl_stack_capture(a) : 0;
    sublet_status st;
    sl_block *b = NULL;
    if (a->settings.expandable_segments) {
        uint64_t run = growable_run(pool, stream);
        st = sl_exp_allocate(a, pool, stream, run + size, &b);
        if (st == SUBLET_OK)
            sl_free_insert(pool, b); /* mapped, and left free */
    } else {
        st = sl_segment_new(a, pool, stream, size, &b);
        if (st == SUBLET_OK) {
            sl_free_insert(pool, b);
            if (made)
                *made = b;
        }
    }
    a->cur_stack = 0;
    if (st == SUBLET_ERR_DEVICE_OOM || st == SUBLET_ERR_OOM) {
        refused(a, size, stream, kind);
        st = SUBLET_ERR_OOM;
    }
    return st;
}

sublet_status sublet_reserve(sublet_allocator *a, uint64_t size, sublet_stream stream,
                             int pool_kind)
{
    if (!a)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_status st = sublet_warmup_check(&a->settings, pool_kind, size, NULL, 0);
    if (st == SUBLET_OK)
        st = reserve_locked(a, size, stream, pool_kind, NULL);
    sl_unlock(a);
    return st;
}

/* ---- the warm-up plan ----------------------------------------------------------------- */

/* Segments of the default stream the allocator holds of (kind, size). */
static uint64_t held_segments(const sublet_allocator *a, int kind, uint64_t size)
{
    uint64_t n = 0;
    for (size_t i = 0; i < a->nsegs; i++) {
        const sl_segment *s = a->segs[i];
        n += !s->expandable && s->stream == 0 && s->pool->kind == kind && s->size == size;
    }
    return n;
}

/* Mapped bytes of the default stream's reservations in `kind`. */
static uint64_t held_pages(const sublet_allocator *a, int kind)
{
    uint64_t n = 0;
    for (size_t i = 0; i < a->nsegs; i++) {
        const sl_segment *s = a->segs[i];
        if (s->expandable && s->stream == 0 && s->pool->kind == kind)
            for (const sl_block *b = s->head; b; b = b->next)
                n += b->mapped ? b->size : 0;
    }
    return n;
}

/* One reservation the plan still needs. */
typedef struct want {
    int kind;
    uint64_t size, count; /* native: count segments; expandable: count 1 of size bytes */
} want;

sublet_status sl_warmup_apply(sublet_allocator *a, char *err, size_t err_cap)
{
    const sublet_settings *s = &a->settings;
    if (!s->nwarmup)
        return SUBLET_OK;
    want w[SUBLET_WARMUP_MAX];
    size_t nw = 0;
    uint64_t need = 0;
    if (s->expandable_segments) {
        for (int kind = SUBLET_POOL_SMALL; kind <= SUBLET_POOL_LARGE; kind++) {
            uint64_t bytes = 0;
            for (uint32_t i = 0; i < s->nwarmup; i++)
                if (s->warmup[i].pool == kind)
                    bytes += s->warmup[i].size * s->warmup[i].count;
            uint64_t have = held_pages(a, kind);
            if (bytes > have) {
                w[nw++] = (want){kind, bytes - have, 1};
                need += bytes - have;
            }
        }
    } else {
        /* entries of one (pool, size) add up; what is held counts once */
        for (uint32_t i = 0; i < s->nwarmup; i++) {
            const sublet_warmup_entry *e = &s->warmup[i];
            size_t k = 0;
            while (k < nw && !(w[k].kind == e->pool && w[k].size == e->size))
                k++;
            if (k == nw)
                w[nw++] = (want){e->pool, e->size, 0};
            w[k].count += e->count;
        }
        size_t m = 0;
        for (size_t k = 0; k < nw; k++) {
            uint64_t have = held_segments(a, w[k].kind, w[k].size);
            if (w[k].count > have) {
                w[m] = w[k];
                w[m].count -= have;
                need += w[m].size * w[m].count;
                m++;
            }
        }
        nw = m;
    }
    if (!nw)
        return SUBLET_OK;
    /* all or nothing when the device can tell in advance */
    uint64_t dev_free, dev_total, allowed;
    headroom(a, &dev_free, &dev_total, &allowed);
    if (need > dev_free || need > allowed) {
        char fn[48], ff[48];
        sublet_format_size(need, fn, sizeof fn);
        sublet_format_size(need > allowed ? allowed : dev_free, ff, sizeof ff);
        sl_msg(err, err_cap, "warmup: the plan needs %s more on GPU %d, which has %s %s", fn,
            a->device, ff, need > allowed ? "left within the memory fraction" : "free");
        return SUBLET_ERR_OOM;
    }
    size_t nmade = 0, cap_made = 16;
    sl_block **made = malloc(cap_made * sizeof *made);
    sublet_status st = made ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
    for (size_t k = 0; k < nw && st == SUBLET_OK; k++) {
        for (uint64_t c = 0; c < w[k].count && st == SUBLET_OK; c++) {
            sl_block *b = NULL;
            st = reserve_locked(a, w[k].size, 0, w[k].kind, &b);
            if (st != SUBLET_OK) {
                char fs[48];
                sublet_format_size(w[k].size, fs, sizeof fs);
                sl_msg(err, err_cap, "warmup: reserving %s in the %s pool: %s", fs,
                    pool_name(w[k].kind),
                    st == SUBLET_ERR_OOM ? a->oom_msg : sublet_status_text(st));
                break;
            }
            if (!b)
                continue;
            if (nmade == cap_made) {
                sl_block **n = realloc(made, 2 * cap_made * sizeof *n);
                if (!n) {
                    (void)sl_segment_release(a, b);
                    st = SUBLET_ERR_NO_MEMORY;
                    sl_msg(err, err_cap, "warmup: out of host memory");
                    break;
                }
                made = n;
                cap_made *= 2;
            }
            made[nmade++] = b;
        }
    }
    if (st != SUBLET_OK)
        for (size_t i = nmade; i > 0; i--)
            (void)sl_segment_release(a, made[i - 1]); /* still free and whole */
    free(made);
    return st;
}
