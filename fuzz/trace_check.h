/* Checks shared by the trace-reader fuzz targets (included by each target;
 * every function is static).  On a violated property they print the reason
 * and abort().
 *
 *   fz_check_trace  the model invariants of any trace a reader returned:
 *                   prelude first, kinds known and their names parse back,
 *                   flags, per-kind counts, sublet_trace_at/events agree,
 *                   sublet_trace_info_get equal to a recount done here;
 *   fz_csv_round_trip  the trace written as `.events.csv` and read back by
 *                   sublet_trace_parse_csv gives the same events;
 *   fz_replay       the trace replayed through the engine (sim backend) with
 *                   sublet_check() after every event: no violated invariant;
 *   fz_check_streamed  the bytes written to a file and read as a stream
 *                   (sublet/trace_stream.h) give what the whole read gave:
 *                   prelude, events, status, error text, notice. */
#ifndef SUBLET_FUZZ_TRACE_CHECK_H
#define SUBLET_FUZZ_TRACE_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

#ifndef FZ_NAME
#define FZ_NAME "fuzz"
#endif

#define FZ_FAIL(...)                                    \
    do {                                                \
        fprintf(stderr, FZ_NAME ": " __VA_ARGS__);      \
        fprintf(stderr, "\n");                          \
        abort();                                        \
    } while (0)

static inline uint64_t fz_add_sat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }
static inline uint64_t fz_sub_sat(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

static inline void fz_check_info(const sublet_trace *t)
{
    sublet_trace_info info;
    sublet_status st = sublet_trace_info_get(t, &info);
    if (st != SUBLET_OK && st != SUBLET_ERR_NO_MEMORY)
        FZ_FAIL("trace_info_get: %s", sublet_status_name(st));
    size_t n = sublet_trace_count(t);
    const sublet_trace_event *ev = sublet_trace_events(t);
    sublet_trace_info want;
    memset(&want, 0, sizeof want);
    uint64_t reserved = 0, requested = 0;
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *e = &ev[i];
        switch (e->kind) {
        case SUBLET_TRACE_PRE_SEGMENT:
            want.pre_segments++;
            want.pre_segment_bytes = fz_add_sat(want.pre_segment_bytes, e->size);
            reserved = fz_add_sat(reserved, e->size);
            break;
        case SUBLET_TRACE_PRE_ALLOC:
            want.pre_allocs++;
            requested = fz_add_sat(requested, e->size);
            break;
        case SUBLET_ACT_ALLOC:
            want.allocs++;
            requested = fz_add_sat(requested, e->size);
            break;
        case SUBLET_ACT_FREE_REQUESTED:
            want.frees_requested++;
            break;
        case SUBLET_ACT_FREE_COMPLETED:
            want.frees_completed++;
            requested = fz_sub_sat(requested, e->size);
            break;
        case SUBLET_ACT_SEGMENT_ALLOC:
            want.segment_allocs++;
            reserved = fz_add_sat(reserved, e->size);
            break;
        case SUBLET_ACT_SEGMENT_MAP:
            reserved = fz_add_sat(reserved, e->size);
            break;
        case SUBLET_ACT_SEGMENT_FREE:
            want.segment_frees++;
            reserved = fz_sub_sat(reserved, e->size);
            break;
        case SUBLET_ACT_SEGMENT_UNMAP:
            reserved = fz_sub_sat(reserved, e->size);
            break;
        case SUBLET_ACT_OOM:
            want.ooms++;
            break;
        case SUBLET_ACT_SNAPSHOT:
            want.snapshots++;
            break;
        default:
            break;
        }
        if (reserved > want.peak_reserved_bytes) {
            want.peak_reserved_bytes = reserved;
            want.peak_reserved_event = i;
        }
        if (requested > want.peak_requested_bytes)
            want.peak_requested_bytes = requested;
    }
    want.final_reserved_bytes = reserved;
    want.final_requested_bytes = requested;
#define FZ_SAME(f)                                                                          \
    if (info.f != want.f)                                                                   \
    FZ_FAIL("trace_info." #f " = %llu, a recount gives %llu", (unsigned long long)info.f,   \
            (unsigned long long)want.f)
    FZ_SAME(pre_segments);
    FZ_SAME(pre_allocs);
    FZ_SAME(pre_segment_bytes);
    FZ_SAME(allocs);
    FZ_SAME(frees_requested);
    FZ_SAME(frees_completed);
    FZ_SAME(segment_allocs);
    FZ_SAME(segment_frees);
    FZ_SAME(ooms);
    FZ_SAME(snapshots);
    FZ_SAME(peak_reserved_bytes);
    FZ_SAME(final_reserved_bytes);
    FZ_SAME(peak_requested_bytes);
    FZ_SAME(final_requested_bytes);
    if (want.peak_reserved_bytes)
        FZ_SAME(peak_reserved_event);
#undef FZ_SAME
    if (st == SUBLET_OK && (n ? (info.streams < 1 || info.streams > n) : info.streams != 0))
        FZ_FAIL("trace_info.streams = %llu for %zu events", (unsigned long long)info.streams, n);
}

static inline void fz_check_trace(const sublet_trace *t)
{
    size_t n = sublet_trace_count(t), pre = sublet_trace_prelude_count(t);
    if (pre > n)
        FZ_FAIL("prelude %zu > count %zu", pre, n);
    size_t by_kind = 0;
    for (uint32_t k = 0; k < SUBLET_TRACE_KIND_COUNT; k++) {
        by_kind += sublet_trace_count_kind(t, k);
        uint32_t back = UINT32_MAX;
        const char *name = sublet_trace_kind_name(k);
        if (sublet_trace_kind_parse(name, strlen(name), &back) != 0 || back != k)
            FZ_FAIL("kind %u name '%s' does not parse back", k, name);
    }
    if (by_kind != n)
        FZ_FAIL("per-kind counts sum to %zu, count is %zu", by_kind, n);
    if ((n == 0) != (sublet_trace_events(t) == NULL))
        FZ_FAIL("trace_events NULL-ness wrong for %zu events", n);
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        if (!e || e != &sublet_trace_events(t)[i])
            FZ_FAIL("trace_at(%zu) wrong", i);
        if (e->kind >= SUBLET_TRACE_KIND_COUNT)
            FZ_FAIL("event %zu: kind %u", i, e->kind);
        if ((i < pre) != (sublet_trace_kind_is_prelude(e->kind) != 0))
            FZ_FAIL("event %zu (%s): prelude boundary %zu", i, sublet_trace_kind_name(e->kind),
                    pre);
        if (e->flags & ~(SUBLET_TRACE_HAS_TIME | SUBLET_TRACE_EXPANDABLE))
            FZ_FAIL("event %zu: flags 0x%x", i, e->flags);
        if ((e->flags & SUBLET_TRACE_EXPANDABLE) && e->kind != SUBLET_TRACE_PRE_SEGMENT)
            FZ_FAIL("event %zu (%s): expandable flag off a pre_segment", i,
                    sublet_trace_kind_name(e->kind));
    }
    if (sublet_trace_at(t, n) != NULL)
        FZ_FAIL("trace_at(count) is not NULL");
    fz_check_info(t);
}

/* The first event in a private pool (pool_id other than (0, 0)), or the count. */
static inline size_t fz_first_private(const sublet_trace *t)
{
    size_t n = sublet_trace_count(t);
    for (size_t i = 0; i < n; i++)
        if (sublet_trace_at(t, i)->pool_id[0] || sublet_trace_at(t, i)->pool_id[1])
            return i;
    return n;
}

/* Written out by sublet_trace_encode_csv and read back: same events, flags and pools included
 * (time_us compared when HAS_TIME; an expandable pre_segment is written as the action
 * pre_segment_expandable; the pool column is there when a row is in a private pool, and only
 * then). */
static inline void fz_csv_round_trip(const sublet_trace *t)
{
    size_t len = 0;
    char *csv = NULL, err[512];
    sublet_status st = sublet_trace_encode_csv(t, &csv, &len, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        return;
    int priv = fz_first_private(t) < sublet_trace_count(t);
    static const char pool_header[] = "seq,action,addr,size,stream,time_us,pool";
    if (st == SUBLET_OK &&
        priv != (len >= sizeof pool_header - 1 && !memcmp(csv, pool_header, sizeof pool_header - 1)))
        FZ_FAIL("sublet_trace_encode_csv: the pool column %s a private pool",
                priv ? "missing with" : "without");
    if (st != SUBLET_OK)
        FZ_FAIL("sublet_trace_encode_csv: %s: %s", sublet_status_name(st), err);
    sublet_trace *u = NULL;
    st = sublet_trace_parse_csv(csv, len, &u, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY) {
        free(csv);
        return;
    }
    if (st != SUBLET_OK)
        FZ_FAIL("re-reading the trace written as CSV: %s: %s", sublet_status_name(st), err);
    size_t n = sublet_trace_count(t);
    if (sublet_trace_count(u) != n || sublet_trace_prelude_count(u) != sublet_trace_prelude_count(t))
        FZ_FAIL("CSV round trip: %zu events (%zu prelude) became %zu (%zu)", n,
                sublet_trace_prelude_count(t), sublet_trace_count(u),
                sublet_trace_prelude_count(u));
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *a = sublet_trace_at(t, i), *b = sublet_trace_at(u, i);
        int timed = (a->flags & SUBLET_TRACE_HAS_TIME) != 0;
        if (a->kind != b->kind || a->flags != b->flags || a->addr != b->addr ||
            a->size != b->size || a->stream != b->stream || (timed && a->time_us != b->time_us) ||
            b->line != i + 2 || b->pool_id[0] != a->pool_id[0] || b->pool_id[1] != a->pool_id[1])
            FZ_FAIL("CSV round trip: event %zu (%s) differs", i, sublet_trace_kind_name(a->kind));
    }
    sublet_trace_extras_release(u);
    sublet_trace_free(u);
    free(csv);
}

/* Replay with sublet_check() after every event (traces of at most
 * max_events events; conf NULL or "" for the defaults). */
static inline void fz_replay(const sublet_trace *t, const char *conf, uint64_t device_memory,
                      size_t max_events)
{
    if (sublet_trace_count(t) > max_events)
        return;
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    o.device_memory = device_memory;
    o.check = 1;
    sublet_replay_result r;
    char err[512];
    sublet_status st = sublet_replay_run(t, &o, &r, err, sizeof err);
    /* a prelude in a private pool cannot be adopted (the default prelude mode here) */
    if (fz_first_private(t) < sublet_trace_prelude_count(t) && st != SUBLET_ERR_UNSUPPORTED &&
        st != SUBLET_ERR_NO_MEMORY && !(st == SUBLET_ERR_CONFIG && conf && *conf))
        FZ_FAIL("replay of a trace with a prelude in a private pool: %s: %s",
                sublet_status_name(st), err);
    if (st != SUBLET_OK && st != SUBLET_ERR_UNSUPPORTED && st != SUBLET_ERR_NO_MEMORY &&
        !(st == SUBLET_ERR_CONFIG && conf && *conf))
        FZ_FAIL("replay (conf \"%s\"): %s: %s", conf ? conf : "", sublet_status_name(st), err);
    if (r.events > sublet_trace_count(t))
        FZ_FAIL("replay drove %llu events of %zu", (unsigned long long)r.events,
                sublet_trace_count(t));
    if (r.peak_reserved_bytes < r.final_reserved_bytes)
        FZ_FAIL("replay: peak reserved %llu < final %llu",
                (unsigned long long)r.peak_reserved_bytes,
                (unsigned long long)r.final_reserved_bytes);
    sublet_replay_result_free(&r);
}

/* Options from the input length, so the corpus holds plain trace files. */
static inline void fz_load_options(size_t size, sublet_trace_load_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->pick_device = size % 3 == 1;
    opt->device = (int64_t)(size / 3 % 2);
    opt->max_inflated = (size_t)64 << 20;
    opt->max_tree_bytes = size % 5 == 0 ? (size_t)1 << 20 : 0;
}

/* What every reader promises about its result; then the model checks, the
 * CSV round trip, the extras and a checked replay (conf: the settings the
 * trace recorded when they parse, else the defaults). */
static inline void fz_check_loaded(sublet_status st, sublet_trace *t, const char *err,
                                   size_t err_cap, const sublet_trace_load_options *opt)
{
    if (memchr(err, '\0', err_cap) == NULL)
        FZ_FAIL("error buffer not NUL-terminated");
    switch (st) {
    case SUBLET_OK:
        break;
    case SUBLET_ERR_PARSE:
        if (t != NULL)
            FZ_FAIL("*out set after a parse error");
        if (err[0] == '\0')
            FZ_FAIL("SUBLET_ERR_PARSE without a message");
        return;
    case SUBLET_ERR_NO_MEMORY:
        if (t != NULL)
            FZ_FAIL("*out set after NO_MEMORY");
        return;
    case SUBLET_ERR_INVALID_ARGUMENT: /* a device that the source does not have */
        if (!opt || !opt->pick_device)
            FZ_FAIL("SUBLET_ERR_INVALID_ARGUMENT without pick_device: %s", err);
        if (t != NULL)
            FZ_FAIL("*out set after INVALID_ARGUMENT");
        return;
    default:
        FZ_FAIL("unexpected status %s: %s", sublet_status_name(st), err);
    }
    if (!t)
        FZ_FAIL("SUBLET_OK without a trace");
    fz_check_trace(t);
    fz_csv_round_trip(t);
    sublet_trace_format f = sublet_trace_source_format(t);
    if ((unsigned)f >= SUBLET_FORMAT_COUNT)
        FZ_FAIL("source format %d", (int)f);
    (void)sublet_trace_format_name(f);
    (void)sublet_trace_device(t);
    const char *conf = sublet_trace_settings(t);
    if (conf) {
        sublet_settings s;
        sublet_settings_default(&s);
        if (sublet_settings_parse(&s, conf, NULL, 0) != SUBLET_OK)
            conf = NULL;
    }
    fz_replay(t, conf, sublet_trace_device_memory(t), 5000);
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

static char fz_stream_path[64];

static void fz_stream_unlink(void) { unlink(fz_stream_path); }

/* bytes (len) written to a file and streamed, against the whole read of
 * them (st, t, err: what the reader gave, with lo_in's options when not
 * NULL): b0 picks the reader thread (bit 0) and the events a call, b1 the
 * bytes a read.  The stream's error text is the whole one after the path. */
static inline void fz_check_streamed(const uint8_t *bytes, size_t len, uint8_t b0, uint8_t b1,
                                     const sublet_trace_load_options *lo_in, sublet_status st,
                                     const sublet_trace *t, const char *err)
{
    if (!fz_stream_path[0]) {
        snprintf(fz_stream_path, sizeof fz_stream_path, "/tmp/" FZ_NAME "_XXXXXX");
        int fd = mkstemp(fz_stream_path);
        if (fd < 0) {
            fz_stream_path[0] = '\0';
            return;
        }
        close(fd);
        atexit(fz_stream_unlink);
    }
    FILE *f = fopen(fz_stream_path, "wb");
    if (!f)
        return;
    int ok = fwrite(bytes, 1, len, f) == len;
    if (fclose(f) != 0 || !ok)
        return;
    sublet_trace_load_options lo;
    memset(&lo, 0, sizeof lo);
    if (lo_in)
        lo = *lo_in;
    lo.read_chunk = 1 + b1 % 97;
    lo.stream_thread = b0 & 1 ? SUBLET_STREAM_THREAD_ALWAYS : SUBLET_STREAM_THREAD_NEVER;
    size_t cap = 1 + (size_t)(b0 >> 1) % 13;
    char serr[700], want[700];
    snprintf(want, sizeof want, "%s: %s", fz_stream_path, err);
    sublet_trace_stream *ts = NULL;
    sublet_status ss = sublet_trace_stream_open(fz_stream_path, &lo, &ts, serr, sizeof serr);
    size_t i = 0, got = 0;
    if (ss == SUBLET_OK) {
        const sublet_trace_event *pre;
        i = sublet_trace_stream_prelude(ts, &pre);
        if (st == SUBLET_OK && (i != sublet_trace_prelude_count(t) ||
                                (i && memcmp(pre, sublet_trace_events(t), i * sizeof *pre))))
            FZ_FAIL("streamed: a prelude of %zu rows differs from the whole read's %zu", i,
                    sublet_trace_prelude_count(t));
    }
    sublet_trace_event ev[13];
    while (ss == SUBLET_OK && (ss = sublet_trace_stream_next(ts, ev, cap, &got, serr,
                                                            sizeof serr)) == SUBLET_OK &&
           got) {
        for (size_t k = 0; k < got; k++, i++)
            if (st == SUBLET_OK &&
                (i >= sublet_trace_count(t) || memcmp(&ev[k], sublet_trace_at(t, i), sizeof *ev)))
                FZ_FAIL("streamed (thread %d, read %zu, cap %zu): event %zu differs", b0 & 1,
                        lo.read_chunk, cap, i);
    }
    if (st != SUBLET_ERR_NO_MEMORY && ss != SUBLET_ERR_NO_MEMORY) {
        if (ss != st)
            FZ_FAIL("streamed: %s, read whole: %s (%s)", sublet_status_name(ss),
                    sublet_status_name(st), st == SUBLET_OK ? serr : err);
        if (st != SUBLET_OK && strcmp(serr, want) != 0)
            FZ_FAIL("streamed: '%s', read whole: '%s'", serr, want);
        if (st == SUBLET_OK) {
            const char *a = sublet_trace_stream_notice(ts), *b = sublet_trace_notice(t);
            if (i != sublet_trace_count(t) || (!a) != (!b) || (a && strcmp(a, b) != 0))
                FZ_FAIL("streamed: %zu events, notice '%s'; whole: %zu, '%s'", i,
                        a ? a : "(none)", sublet_trace_count(t), b ? b : "(none)");
            if (sublet_trace_stream_device(ts) != sublet_trace_device(t) ||
                sublet_trace_stream_device_memory(ts) != sublet_trace_device_memory(t) ||
                sublet_trace_stream_format(ts) != sublet_trace_source_format(t))
                FZ_FAIL("streamed: device %lld, memory %llu, format %d; whole: %lld, %llu, %d",
                        (long long)sublet_trace_stream_device(ts),
                        (unsigned long long)sublet_trace_stream_device_memory(ts),
                        (int)sublet_trace_stream_format(ts), (long long)sublet_trace_device(t),
                        (unsigned long long)sublet_trace_device_memory(t),
                        (int)sublet_trace_source_format(t));
        }
    }
    sublet_trace_stream_close(ts);
}

#endif
