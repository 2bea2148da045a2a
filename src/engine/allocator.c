/* sublet — the allocator object: creation and teardown, settings, memory
 * fraction, statistics, and seeding the state of a replay that began
 * mid-run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "engine/engine.h"
#include "engine/events.h"
#include "engine/expandable.h"
#include "engine/index.h"
#include "engine/pools_internal.h"
#include "engine/reserve.h"
#include "engine/segs.h"
#include "engine/stitch.h"
#include "engine/history_internal.h"
#include "sublet/frag_state.h"

const char *sublet_version(void) { return "0.1.0"; }

const char *sublet_action_name(sublet_action act)
{
    static const char *const names[] = {
#define SUBLET_X_ACTNAME(e, name) name,
        SUBLET_ACTION_LIST(SUBLET_X_ACTNAME)
#undef SUBLET_X_ACTNAME
    };
    return (unsigned)act < SUBLET_ACT_COUNT ? names[act] : "unknown";
}

/* Settings this allocator cannot honour are refused with a reason, never
 * silently ignored. */
static sublet_status check_supported(const sublet_backend *b, const sublet_settings *s, char *err,
                                     size_t err_cap)
{
    const char *why = NULL;
    if (s->backend_async)
        why = "backend:cudaMallocAsync is not supported by sublet (it is the native allocator)";
    else if ((s->expandable_segments || s->policy == SUBLET_POLICY_STITCH) && (!b->ops->va_reserve || !b->ops->va_map ||
                                        !b->ops->va_unmap || !b->ops->va_release))
        why = "expandable_segments not supported on this platform: the backend has no virtual "
              "memory support";
    if (!why)
        return SUBLET_OK;
    return sl_fail(err, err_cap, SUBLET_ERR_UNSUPPORTED, "%s", why);
}

/* torch.cuda.set_per_process_memory_fraction (and the option of 2.9+): a limit
 * is in effect below 1.0; a call (`call`) before 2.9 puts one in effect at any
 * value (docs/rules.md §4.8, docs/versions.md). */
static void set_fraction(sublet_allocator *a, double f, uint64_t total, int call)
{
    a->fraction = f;
    a->limit_in_effect =
        f < 1.0 || (call && !sublet_settings_since(&a->settings, SUBLET_PYTORCH_VERSION(2, 9)));
    a->allowed_memory_maximum = a->limit_in_effect ? (uint64_t)(f * (double)total) : total;
}

/* ---- the size from which a run goes alike (sublet_replay_result.same_from) ---- */

/* Would an allocator created on a device of x bytes have granted every
 * request the memory fraction's limit granted, and kept every collector
 * check under its threshold, as set_fraction and sl_garbage_collect
 * compute them? */
static int limit_alike(const sublet_allocator *a, uint64_t x)
{
    uint64_t allowed = a->limit_in_effect ? (uint64_t)(a->fraction * (double)x) : x;
    if (a->limit_in_effect && a->cap_limit_need > allowed)
        return 0;
    uint64_t thr = (uint64_t)(a->settings.garbage_collection_threshold * (double)allowed);
    return a->cap_gc_need <= thr;
}

uint64_t sl_same_from(const sublet_allocator *a, const sublet_backend *sim, uint64_t info0,
                      uint64_t cap)
{
    uint64_t peak, calls, refusals;
    sublet_sim_capacity_use(sim, &peak, &calls, &refusals);
    /* a read of the capacity past creation, a collection, or a call the
     * device or the limit refused (a larger device would grant it): the run
     * depended on the size in ways not followed here */
    if (calls != info0 || refusals || a->cap_limit_refused || a->cap_gc_acted ||
        !limit_alike(a, cap) || peak > cap)
        return UINT64_MAX;
    uint64_t lo = peak ? peak : 1, hi = cap; /* hi alike; the smallest alike in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (limit_alike(a, mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    return hi;
}

sublet_status sublet_allocator_create(const sublet_options *opts, sublet_allocator **out,
                                      char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!opts || !out || !opts->backend)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    sublet_settings settings;
    sublet_settings_default(&settings);
    const char *conf = opts->conf ? opts->conf : sublet_settings_env(NULL);
    if (conf) {
        sublet_status st = sublet_settings_parse(&settings, conf, err, err_cap);
        if (st != SUBLET_OK)
            return st;
    }
    sublet_status st = check_supported(opts->backend, &settings, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    uint64_t dev_free = 0, dev_total = 0;
    st = opts->backend->ops->mem_info(opts->backend, &dev_free, &dev_total);
    if (st != SUBLET_OK)
        return st;

    sublet_allocator *a = calloc(1, sizeof *a);
    if (!a)
        return SUBLET_ERR_NO_MEMORY;
    if (!sl_ptrmap_init(&a->ptrs)) {
        free(a);
        return SUBLET_ERR_NO_MEMORY;
    }
    sl_mutex_init(&a->lock);
    a->backend = opts->backend;
    a->device = opts->device ? opts->device : opts->backend->device;
    a->settings = settings;
    a->small = (sl_pool){.is_small = true, .kind = SUBLET_POOL_SMALL};
    a->large = (sl_pool){.is_small = false, .kind = SUBLET_POOL_LARGE};
    a->next_pool_id[0] = a->next_pool_id[1] = 1; /* (0, 0) is the default pools */
    _Static_assert(SUBLET_ACT_COUNT <= 32, "an action is a bit of trace_actions");
    a->trace_actions = SUBLET_TRACE_ALL;
    a->stats.version = SUBLET_STATS_VERSION;
    a->stats.struct_size = sizeof(sublet_stats);
    a->stats.max_split_size =
        settings.max_split_size == SUBLET_SIZE_UNLIMITED ? -1 : (int64_t)settings.max_split_size;
    set_fraction(a, settings.per_process_memory_fraction, dev_total, 0);
    if (settings.memory_fraction >= 0.0) /* the call, before the first allocation */
        set_fraction(a, settings.memory_fraction, dev_total, 1);
    /* the warm-up plan (reserve.c): all of it, or no allocator */
    sl_lock(a);
    st = sl_warmup_apply(a, err, err_cap);
    sl_unlock(a);
    if (st != SUBLET_OK) {
        sublet_allocator_destroy(a);
        return st;
    }
    *out = a;
    return SUBLET_OK;
}

void sublet_allocator_destroy(sublet_allocator *a)
{
    if (!a)
        return;
    /* Return every segment, live or cached: the caller is done with it. */
    sl_evq_fini(a);
    for (size_t i = 0; i < a->nevent_pool; i++)
        a->backend->ops->event_destroy(a->backend, a->event_pool[i]);
    free(a->event_pool);
    /* segs[] is in no set order (segs.c); the sim removes each in O(log n) */
    for (size_t i = a->nsegs; i-- > 0;) {
        sl_segment *seg = a->segs[i];
        if (seg->expandable)
            sl_exp_destroy_segment(a, seg);
        else if (seg->pool->owner && seg->pool->owner->free_fn)
            seg->pool->owner->free_fn(seg->pool->owner->alloc_user, seg->addr, seg->size);
        else
            a->backend->ops->segment_free(a->backend, seg->addr, seg->size);
        for (sl_block *b = seg->head; b;) {
            sl_block *n = b->next;
            sl_uses_free(b);
            b = n;
        }
        free(seg);
    }
    sl_segs_fini(a);
    sl_stitch_fini(a);
    sl_pool_fini(&a->small);
    sl_pool_fini(&a->large);
    sl_pools_fini(a);
    sl_slab_fini(&a->slab);
    sl_ptrmap_fini(&a->ptrs);
    sl_history_fini(a);
    sl_mutex_destroy(&a->lock);
    free(a);
}

/* ---- settings ---------------------------------------------------------------------- */

sublet_status sublet_settings_apply(sublet_allocator *a, const char *conf, char *err,
                                    size_t err_cap)
{
    if (!a || !conf)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_lock(a);
    sublet_settings next = a->settings;
    sublet_status st = sublet_settings_parse(&next, conf, err, err_cap);
    if (st == SUBLET_OK)
        st = check_supported(a->backend, &next, err, err_cap);
    if (st == SUBLET_OK) {
        sublet_settings prev = a->settings;
        a->settings = next;
        st = sl_warmup_apply(a, err, err_cap); /* what the plan still misses */
        if (st != SUBLET_OK)
            a->settings = prev;
    }
    sl_unlock(a);
    return st;
}

void sublet_settings_get(sublet_allocator *a, sublet_settings *out)
{
    sl_lock(a);
    *out = a->settings;
    sl_unlock(a);
}

sublet_status sublet_memory_fraction_set(sublet_allocator *a, double fraction)
{
    if (!a || isnan(fraction) || fraction < 0.0 || fraction > 1.0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    uint64_t dev_free, dev_total;
    sl_lock(a);
    sublet_status st = a->backend->ops->mem_info(a->backend, &dev_free, &dev_total);
    if (st == SUBLET_OK)
        set_fraction(a, fraction, dev_total, 1);
    sl_unlock(a);
    return st;
}

double sublet_memory_fraction_get(sublet_allocator *a)
{
    sl_lock(a);
    double f = a->fraction;
    sl_unlock(a);
    return f;
}

/* ---- statistics --------------------------------------------------------------------- */

void sublet_stats_read(sublet_allocator *a, sublet_stats *out)
{
    sl_lock(a);
    *out = a->stats;
    sl_unlock(a);
}

static void reset_peak(sublet_stat *s) { s->peak = s->current; }
static void reset_acc(sublet_stat *s) { s->allocated = s->freed = 0; }

static void stats_reset_peak(sublet_stats *s)
{
#define SUBLET_X_RP(key, title, bytes)        \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) \
        reset_peak(&s->key[k]);
    SUBLET_STAT_ARRAYS(SUBLET_X_RP)
#undef SUBLET_X_RP
#define SUBLET_X_RP1(key, title) reset_peak(&s->key);
    SUBLET_STAT_SINGLES(SUBLET_X_RP1)
#undef SUBLET_X_RP1
}

static void stats_reset_accumulated(sublet_stats *s)
{
#define SUBLET_X_RA(key, title, bytes)        \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++) \
        reset_acc(&s->key[k]);
    SUBLET_STAT_ARRAYS(SUBLET_X_RA)
#undef SUBLET_X_RA
#define SUBLET_X_RA1(key, title) reset_acc(&s->key);
    SUBLET_STAT_SINGLES(SUBLET_X_RA1)
#undef SUBLET_X_RA1
#define SUBLET_X_RC(key) s->key = 0;
    SUBLET_STAT_COUNTERS(SUBLET_X_RC)
#undef SUBLET_X_RC
}

/* Both resets reach the private pools' own statistics too. */
void sublet_stats_reset_peak(sublet_allocator *a)
{
    sl_lock(a);
    stats_reset_peak(&a->stats);
    for (size_t i = 0; i < a->nprivs; i++)
        stats_reset_peak(&a->privs[i]->stats);
    sl_unlock(a);
}

void sublet_stats_reset_accumulated(sublet_allocator *a)
{
    sl_lock(a);
    stats_reset_accumulated(&a->stats);
    for (size_t i = 0; i < a->nprivs; i++)
        stats_reset_accumulated(&a->privs[i]->stats);
    sl_unlock(a);
}

size_t sublet_summary(sublet_allocator *a, int flags, char *buf, size_t cap)
{
    sublet_stats s;
    sublet_stats_read(a, &s);
    size_t n = sublet_stats_format_summary(&s, a->device, flags & SUBLET_SUMMARY_ABBREVIATED,
                                           buf, cap);
    if (flags & SUBLET_SUMMARY_FRAGMENTATION) {
        /* sublet's fragmentation section after PyTorch's table (sublet/frag.h) */
        sublet_frag_state *st = NULL;
        if (sublet_frag_capture(a, &st) == SUBLET_OK) {
            size_t off = buf && n < cap ? n : (buf && cap ? cap - 1 : 0);
            n += sublet_frag_format_text(st, NULL, buf ? buf + off : NULL, buf ? cap - off : 0);
            sublet_frag_state_free(st);
        }
    }
    sublet_device_view v;
    if ((flags & SUBLET_SUMMARY_DEVICE) && sublet_device_view_read(a, &v) == SUBLET_OK) {
        size_t off = buf && n < cap ? n : (buf && cap ? cap - 1 : 0);
        n += sublet_device_view_format_text(&v, a->device, buf ? buf + off : NULL,
                                            buf ? cap - off : 0);
    }
    return n;
}

void sublet_trace_set(sublet_allocator *a, sublet_trace_fn fn, void *user)
{
    sl_lock(a);
    a->trace_fn = fn;
    a->trace_user = user;
    sl_unlock(a);
}

void sublet_trace_set_actions(sublet_allocator *a, uint32_t actions)
{
    sl_lock(a);
    a->trace_actions = actions;
    sl_unlock(a);
}

void sublet_oom_observer_set(sublet_allocator *a, sublet_oom_fn fn, void *user)
{
    sl_lock(a);
    a->oom_fn = fn;
    a->oom_user = user;
    sl_unlock(a);
}
