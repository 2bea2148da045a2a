/* sublet — the smallest simulated device on which a trace runs.
 *
 * Bisection over device sizes (multiples of the resolution, 2 MiB by
 * default) between the peak of live requested bytes (no allocator can do
 * with less) and a size that is known to work.  Each probe is a full replay
 * through the engine that stops at the first OOM. */
#include <stdio.h>
#include <string.h>

#include "sublet/replay.h"

#define DEFAULT_RESOLUTION ((uint64_t)2 << 20)
#define MAX_DOUBLINGS 16

/* Runs one probe; *ok is set when the whole trace ran without an OOM and
 * without more row errors than the reference run had. */
static sublet_status probe(const sublet_trace *t, const sublet_replay_options *base, uint64_t cap,
                           uint64_t errors_allowed, int *ok, sublet_replay_result *keep,
                           char *err, size_t err_cap)
{
    sublet_replay_options o = *base;
    o.device_memory = cap;
    o.stop_on_oom = 1;
    o.capture_summary = 0;
    o.on_finish = NULL;
    sublet_replay_result r;
    sublet_status st = sublet_replay_run(t, &o, &r, err, err_cap);
    *ok = st == SUBLET_OK && r.ooms == 0 && r.errors <= errors_allowed;
    /* a failed seeding (the prelude does not fit) is a failure to run, not
     * an error of the trace */
    if (st == SUBLET_ERR_DEVICE_OOM || st == SUBLET_ERR_OOM)
        st = SUBLET_OK;
    if (keep && *ok) {
        sublet_replay_result_free(keep);
        *keep = r;
    } else {
        sublet_replay_result_free(&r);
    }
    return st;
}

sublet_status sublet_replay_min_capacity(const sublet_trace *t, const sublet_replay_options *base,
                                         uint64_t resolution, sublet_mincap_result *out,
                                         char *err, size_t err_cap)
{
    if (!t || !out)
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
    if (!resolution)
        resolution = DEFAULT_RESOLUTION;
    out->resolution = resolution;

    sublet_trace_info info;
    sublet_status st = sublet_trace_info_get(t, &info);
    if (st != SUBLET_OK)
        return st;
    out->peak_requested_bytes = info.peak_requested_bytes;

    /* the reference run: a device far larger than the trace needs */
    uint64_t big = info.peak_reserved_bytes > info.peak_requested_bytes ? info.peak_reserved_bytes
                                                                         : info.peak_requested_bytes;
    big = big * 4 + ((uint64_t)1 << 30);
    sublet_replay_result ref;
    sublet_replay_options ro = o;
    ro.device_memory = big;
    ro.capture_summary = 0;
    ro.on_finish = NULL;
    st = sublet_replay_run(t, &ro, &ref, err, err_cap);
    out->replays++;
    if (st != SUBLET_OK) {
        sublet_replay_result_free(&ref);
        return st;
    }
    uint64_t errors_allowed = ref.errors;
    if (ref.ooms) {
        sublet_replay_result_free(&ref);
        if (err && err_cap)
            snprintf(err, err_cap, "the trace runs out of memory even on a %llu-byte device",
                     (unsigned long long)big);
        return SUBLET_ERR_OOM;
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
        st = probe(t, &o, hi * resolution, errors_allowed, &ok, &out->at_min, err, err_cap);
        out->replays++;
        if (st != SUBLET_OK)
            return st;
        if (ok)
            break;
        lo = hi;
        uint64_t step = hi / 64 > 1 ? hi / 64 : 1; /* +1.6 %, then doubling */
        hi = i < 4 ? hi + step : hi * 2;
    }
    if (!ok) {
        if (err && err_cap)
            snprintf(err, err_cap, "no device size up to %llu bytes runs the trace",
                     (unsigned long long)(hi * resolution));
        return SUBLET_ERR_OOM;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        st = probe(t, &o, mid * resolution, errors_allowed, &ok, &out->at_min, err, err_cap);
        out->replays++;
        if (st != SUBLET_OK)
            return st;
        if (ok)
            hi = mid;
        else
            lo = mid;
    }
    /* hi only ever takes a size that was just probed successfully, so
     * at_min holds the replay at the answer */
    out->min_capacity_bytes = hi * resolution;
    out->overhead = info.peak_requested_bytes
                        ? (double)out->min_capacity_bytes / (double)info.peak_requested_bytes - 1.0
                        : 0.0;
    return SUBLET_OK;
}

void sublet_mincap_result_free(sublet_mincap_result *r)
{
    if (r)
        sublet_replay_result_free(&r->at_min);
}
