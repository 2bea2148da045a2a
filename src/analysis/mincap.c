/* sublet — the smallest simulated device on which a trace runs.
 *
 * Bisection over device sizes (multiples of the resolution, 2 MiB by
 * default) between the peak of live requested bytes (no allocator can do
 * with less) and a size that is known to work.  Each probe is a full replay
 * through the engine that stops at the first OOM.
 *
 * A larger device does not always do better: the OOM path releases cached
 * segments only when a device allocation fails, so a smaller device may
 * release (and lay out anew) earlier, and a larger one keep a cached
 * segment that later stands in the way.  The bisection alone would then
 * answer with a size below sizes that fail.  So the answer's neighbourhood is
 * probed (+1 step, +1 %, +5 %, +10 %, +25 %, +50 %, +100 %); when a size
 * there fails, the search bisects again between the highest failure and the
 * next size that ran, and checks the new answer's neighbourhood, until it
 * holds: the answer is the smallest probed size with no failure probed above
 * it, and `monotone` says whether any probed size failed above one that ran.
 *
 * One search over a stream (sublet/trace_stream.h), so that a streamed file
 * is searched in memory for its live blocks: a trace in memory is a stream
 * over its array; a file is read once into a binary copy on disk
 * (sublet_trace_stream_copy), which each replay rewinds and reads again
 * without parsing (measured against re-reading the file itself for each
 * replay: docs/replay.md, "Streaming"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "sublet/replay.h"
#include "sublet/trace_stream.h"

#define DEFAULT_RESOLUTION ((uint64_t)2 << 20)
#define MAX_DOUBLINGS 16
#define MAX_ROUNDS 8 /* re-searches above a failure in the neighbourhood */

typedef struct search {
    sublet_trace_stream *ts;
    const sublet_replay_options *o;
    uint64_t res, errors_allowed;
    sublet_mincap_result *out;
    uint64_t kept; /* the size out->at_min was replayed at (0: none) */
    size_t cap;
    char *err;
    size_t err_cap;
    unsigned flags;     /* SUBLET_MINCAP_INFER, SUBLET_MINCAP_NO_AT_MIN */
    uint64_t same_from; /* INFER: every size from here on runs as a clean run did */
} search;

/* One replay from the stream's first row (rewound when it was read). */
static sublet_status run(sublet_trace_stream *ts, const sublet_replay_options *o,
                         sublet_replay_result *r, char *err, size_t err_cap)
{
    const sublet_trace_event *pre;
    if (sublet_trace_stream_rows(ts) != sublet_trace_stream_prelude(ts, &pre)) {
        sublet_status st = sublet_trace_stream_rewind(ts, err, err_cap);
        if (st != SUBLET_OK) {
            memset(r, 0, sizeof *r);
            return st;
        }
    }
    return sublet_replay_stream(ts, o, r, err, err_cap);
}

static const sublet_mincap_probe *find_probe(const search *s, uint64_t bytes)
{
    for (size_t i = 0; i < s->out->nprobes; i++)
        if (s->out->probes[i].bytes == bytes)
            return &s->out->probes[i];
    return NULL;
}

/* Runs one probe (or answers from an earlier one at the same size); *ok is
 * set when the whole trace ran without an OOM and without more row errors
 * than the reference run had.  keep: put the replay in out->at_min. */
static sublet_status add_probe(search *s, uint64_t cap, int ok, int checked);

static sublet_status probe(search *s, uint64_t units, int checked, int keep, int *ok)
{
    uint64_t cap = units * s->res;
    if (s->flags & SUBLET_MINCAP_NO_AT_MIN)
        keep = 0;
    const sublet_mincap_probe *old = find_probe(s, cap);
    if (old && (!keep || !old->ok || s->kept == cap)) {
        *ok = old->ok;
        return SUBLET_OK;
    }
    if (!old && (s->flags & SUBLET_MINCAP_INFER) && cap >= s->same_from) {
        *ok = 1; /* a clean run's very replay: it ran, with its row errors */
        return add_probe(s, cap, 1, checked);
    }
    sublet_replay_options o = *s->o;
    o.device_memory = cap;
    o.stop_on_oom = 1;
    sublet_replay_result r;
    sublet_status st = run(s->ts, &o, &r, s->err, s->err_cap);
    s->out->replays++;
    *ok = st == SUBLET_OK && r.ooms == 0 && r.errors <= s->errors_allowed;
    if (*ok && r.same_from < s->same_from)
        s->same_from = r.same_from;
    /* a failed seeding (the prelude does not fit) is a failure to run, not
     * an error of the trace */
    if (st == SUBLET_ERR_DEVICE_OOM || st == SUBLET_ERR_OOM)
        st = SUBLET_OK;
    if (keep && *ok) {
        sublet_replay_result_free(&s->out->at_min);
        s->out->at_min = r;
        s->kept = cap;
    } else {
        sublet_replay_result_free(&r);
    }
    if (st != SUBLET_OK || old)
        return st;
    return add_probe(s, cap, *ok, checked);
}

static sublet_status add_probe(search *s, uint64_t cap, int ok, int checked)
{
    if (s->out->nprobes == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 32;
        sublet_mincap_probe *n = realloc(s->out->probes, nc * sizeof *n);
        if (!n)
            return SUBLET_ERR_NO_MEMORY;
        s->out->probes = n;
        s->cap = nc;
    }
    s->out->probes[s->out->nprobes++] = (sublet_mincap_probe){cap, ok, checked};
    return SUBLET_OK;
}

/* Bisection of (lo, hi] in units of the resolution, lo failing and hi
 * running; returns the new hi. */
static sublet_status bisect(search *s, uint64_t lo, uint64_t *hi)
{
    while (*hi - lo > 1) {
        uint64_t mid = lo + (*hi - lo) / 2;
        int ok;
        sublet_status st = probe(s, mid, 0, 1, &ok);
        if (st != SUBLET_OK)
            return st;
        if (ok)
            *hi = mid;
        else
            lo = mid;
    }
    return SUBLET_OK;
}

/* The neighbourhood of the answer hi: *fail receives the highest probed
 * size above hi that failed (0: none), in units. */
static sublet_status check_above(search *s, uint64_t hi, uint64_t *fail)
{
    static const unsigned permille[] = {0, 10, 50, 100, 250, 500, 1000};
    for (size_t i = 0; i < sizeof permille / sizeof *permille; i++) {
        uint64_t u = permille[i] ? hi + (hi * permille[i] + 999) / 1000 : hi + 1;
        int ok;
        sublet_status st = probe(s, u, 1, 0, &ok);
        if (st != SUBLET_OK)
            return st;
    }
    *fail = 0;
    for (size_t i = 0; i < s->out->nprobes; i++) {
        const sublet_mincap_probe *p = &s->out->probes[i];
        if (!p->ok && p->bytes > hi * s->res && p->bytes / s->res > *fail)
            *fail = p->bytes / s->res;
    }
    return SUBLET_OK;
}

/* The smallest size known to run above `fail` (units), probing upward when
 * none is; 0 when none up to the limit runs. */
static sublet_status next_ok_above(search *s, uint64_t fail, uint64_t *hi)
{
    *hi = 0;
    for (size_t i = 0; i < s->out->nprobes; i++) {
        const sublet_mincap_probe *p = &s->out->probes[i];
        uint64_t u = p->bytes / s->res;
        if (p->ok && u > fail && (!*hi || u < *hi))
            *hi = u;
    }
    uint64_t u = fail * 2;
    for (int i = 0; !*hi && i < MAX_DOUBLINGS; i++, u *= 2) {
        int ok;
        sublet_status st = probe(s, u, 0, 1, &ok);
        if (st != SUBLET_OK)
            return st;
        if (ok)
            *hi = u;
    }
    return SUBLET_OK;
}

static int cmp_probe(const void *a, const void *b)
{
    const sublet_mincap_probe *x = a, *y = b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static sublet_status search_all(sublet_trace_stream *ts, const sublet_replay_options *op,
                                uint64_t resolution, const sublet_trace_info *ip,
                                search *s, char *err, size_t err_cap);

sublet_status sublet_replay_min_capacity(const sublet_trace *t, const sublet_replay_options *base,
                                         uint64_t resolution, sublet_mincap_result *out,
                                         char *err, size_t err_cap)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *ts = NULL;
    sublet_status st = sublet_trace_stream_from_trace(t, &ts);
    if (st != SUBLET_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    st = sublet_replay_min_capacity_stream(ts, base, resolution, out, err, err_cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_replay_min_capacity_ex(const sublet_trace *t, const sublet_replay_options *base,
                                            uint64_t resolution, unsigned flags,
                                            uint64_t same_from, sublet_mincap_result *out,
                                            char *err, size_t err_cap)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *ts = NULL;
    sublet_status st = sublet_trace_stream_from_trace(t, &ts);
    if (st != SUBLET_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    st = sublet_replay_min_capacity_stream_ex(ts, base, resolution, flags, same_from, out, err,
                                              err_cap);
    sublet_trace_stream_close(ts);
    return st;
}

sublet_status sublet_replay_min_capacity_stream(sublet_trace_stream *ts,
                                                const sublet_replay_options *base,
                                                uint64_t resolution, sublet_mincap_result *out,
                                                char *err, size_t err_cap)
{
    return sublet_replay_min_capacity_stream_ex(ts, base, resolution, 0, SUBLET_REPLAY_NONE, out,
                                                err, err_cap);
}

sublet_status sublet_replay_min_capacity_stream_ex(sublet_trace_stream *ts,
                                                   const sublet_replay_options *base,
                                                   uint64_t resolution, unsigned flags,
                                                   uint64_t same_from, sublet_mincap_result *out,
                                                   char *err, size_t err_cap)
{
    if (!ts || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    sublet_replay_options o;
    if (base)
        o = *base;
    else
        sublet_replay_options_init(&o);
    /* every option that changes the outcome is kept (conf, prelude,
     * placement_hints, stop_after); what only observes the replay is not
     * called for each probe */
    o.check = 0;
    o.capture_summary = 0;
    o.on_oom = NULL;
    o.on_finish = NULL;
    o.before_event = o.after_event = NULL;
    o.trace = NULL;
    o.record = SUBLET_RECORD_OFF;
    o.record_prelude = 0;
    o.stop_if = NULL; /* a probe runs to its end or its first OOM */
    if (!resolution)
        resolution = DEFAULT_RESOLUTION;
    out->resolution = resolution;

    sublet_trace_info info;
    /* a stream read again cheaply is searched as it is; another is copied
     * once (64 bytes a row on disk) and the copy searched */
    const sublet_trace *t = sublet_trace_stream_trace(ts);
    sublet_trace_stream *copy = NULL;
    sublet_status st = sublet_trace_stream_rereadable(ts)
                           ? SUBLET_OK
                           : sublet_trace_stream_copy(ts, &copy, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    st = t ? sublet_trace_info_get(t, &info)
           : sublet_trace_stream_info(copy ? copy : ts, &info, err, err_cap);
    search srch = {.out = out, .err = err, .err_cap = err_cap, .flags = flags,
                   .same_from = same_from};
    if (st == SUBLET_OK)
        st = search_all(copy ? copy : ts, &o, resolution, &info, &srch, err, err_cap);
    sublet_trace_stream_close(copy);
    return st;
}

/* The search proper over ts (the trace in memory, or the binary copy). */
static sublet_status search_all(sublet_trace_stream *ts, const sublet_replay_options *op,
                                uint64_t resolution, const sublet_trace_info *ip,
                                search *sp, char *err, size_t err_cap)
{
    sublet_mincap_result *out = sp->out;
    sublet_replay_options o = *op;
    sublet_trace_info info = *ip;
    sublet_status st;
    out->peak_requested_bytes = info.peak_requested_bytes;

    /* the reference run: a device far larger than the trace needs */
    uint64_t big = info.peak_reserved_bytes > info.peak_requested_bytes ? info.peak_reserved_bytes
                                                                         : info.peak_requested_bytes;
    big = big * 4 + ((uint64_t)1 << 30);
    sublet_replay_result ref;
    sublet_replay_options ro = o;
    ro.device_memory = big;
    st = run(ts, &ro, &ref, err, err_cap);
    out->replays++;
    if (st != SUBLET_OK) {
        sublet_replay_result_free(&ref);
        return st;
    }
    search s = *sp;
    s.ts = ts;
    s.o = &o;
    s.res = resolution;
    s.errors_allowed = ref.errors;
    /* the caller's run is this one when the reference is on a size it
     * covers; else only the reference's own */
    if (big < s.same_from)
        s.same_from = SUBLET_REPLAY_NONE;
    if (!ref.ooms && ref.same_from < s.same_from)
        s.same_from = ref.same_from;
    if (ref.ooms) {
        sublet_replay_result_free(&ref);
        return sl_fail(err, err_cap, SUBLET_ERR_OOM,
                       "the trace runs out of memory even on a %llu-byte device",
                       (unsigned long long)big);
    }
    /* the floor: the peak of live requested bytes of the rows replayed (the
     * reference run's, with stop_after; below it every device fails) */
    uint64_t floor = info.peak_requested_bytes;
    if (o.stop_after != SUBLET_REPLAY_ALL || ref.peak_requested_bytes < floor) {
        floor = ref.peak_requested_bytes < floor ? ref.peak_requested_bytes : floor;
        if (o.stop_after != SUBLET_REPLAY_ALL)
            out->peak_requested_bytes = ref.peak_requested_bytes;
    }
    sublet_replay_result_free(&ref);

    /* hi: a size that works, starting just above the engine's own peak */
    uint64_t lo = floor / resolution; /* lo * res < peak live: fails */
    if (lo * resolution >= floor && lo > 0)
        lo--;
    uint64_t hi = (floor + resolution - 1) / resolution;
    if (hi <= lo)
        hi = lo + 1;
    int ok = 0;
    for (int i = 0; i <= MAX_DOUBLINGS; i++) {
        st = probe(&s, hi, 0, 1, &ok);
        if (st != SUBLET_OK)
            return st;
        if (ok)
            break;
        lo = hi;
        uint64_t step = hi / 64 > 1 ? hi / 64 : 1; /* +1.6 %, then doubling */
        hi = i < 4 ? hi + step : hi * 2;
    }
    if (!ok) {
        return sl_fail(err, err_cap, SUBLET_ERR_OOM,
                       "no device size up to %llu bytes runs the trace",
                       (unsigned long long)(hi * resolution));
    }
    st = bisect(&s, lo, &hi);
    /* the neighbourhood above the answer; above a failure there, again */
    for (int round = 0; st == SUBLET_OK; round++) {
        uint64_t fail;
        st = check_above(&s, hi, &fail);
        if (st != SUBLET_OK || !fail)
            break;
        if (round == MAX_ROUNDS) {
            return sl_fail(err, err_cap, SUBLET_ERR_OOM,
                           "no answer after %d searches above sizes that failed, "
                           "the last at %llu bytes", MAX_ROUNDS,
                           (unsigned long long)(fail * resolution));
        }
        st = next_ok_above(&s, fail, &hi);
        if (st == SUBLET_OK && !hi) {
            return sl_fail(err, err_cap, SUBLET_ERR_OOM,
                           "no device size above %llu bytes (which failed) runs the " "trace",
                           (unsigned long long)(fail * resolution));
        }
        if (st == SUBLET_OK)
            st = bisect(&s, fail, &hi);
    }
    /* at_min: the replay at the answer */
    if (st == SUBLET_OK && s.kept != hi * resolution)
        st = probe(&s, hi, 0, 1, &ok);
    if (st != SUBLET_OK)
        return st;
    out->min_capacity_bytes = hi * resolution;
    out->overhead = out->peak_requested_bytes
                        ? (double)out->min_capacity_bytes / (double)out->peak_requested_bytes - 1.0
                        : 0.0;
    qsort(out->probes, out->nprobes, sizeof *out->probes, cmp_probe);
    out->smallest_ok_bytes = out->min_capacity_bytes;
    for (size_t i = 0; i < out->nprobes; i++)
        if (out->probes[i].ok) {
            out->smallest_ok_bytes = out->probes[i].bytes;
            break;
        }
    for (size_t i = 0; i < out->nprobes; i++)
        if (!out->probes[i].ok && out->probes[i].bytes > out->smallest_ok_bytes)
            out->failed_above++;
    out->monotone = out->failed_above == 0;
    return SUBLET_OK;
}

void sublet_mincap_result_free(sublet_mincap_result *r)
{
    if (!r)
        return;
    sublet_replay_result_free(&r->at_min);
    free(r->probes);
    r->probes = NULL;
    r->nprobes = 0;
}
