/* sublet — replaying traces recorded with expandable_segments:True.
 *
 * Ground truth without a GPU comes in two forms:
 *   - tests/data/expandable_by_hand.json, a snapshot whose every row was
 *     worked out by hand from docs/rules.md §6 (the walk-through is in
 *     tests/data/README.md): maps that grow a free tail, the §6.4 walk that
 *     prefers a hole that cannot grow over the growable tail, two maps for
 *     one alloc, unmaps of the whole pages of free blocks, a reservation per
 *     (stream, pool) released when nothing of it stays mapped;
 *   - traces recorded by sublet's own engine under expandable_segments:True
 *     (a replay of every committed and shared trace, and of a synthetic
 *     workload with empty_cache calls, recorded and written as a snapshot
 *     pickle), which must replay at 100 %: decisions, map sizes, addresses,
 *     release sets and peak reserved bytes.
 * A trace recorded mid-run under expandable segments is refused with its
 * reason (test_replay.c has the small cases; here: the engine's own). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sublet/history.h"
#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"
#include "support/harness.h"
#include "test_data.h"

#define EXPANDABLE "expandable_segments:True"

static const char *testdata(const char *name)
{
    static char path[4096];
    const char *d = getenv("SUBLET_TESTDATA");
    snprintf(path, sizeof path, "%s/%s", (d && *d) ? d : "tests/data", name);
    return path;
}

static sublet_trace *load(const char *path)
{
    sublet_trace *t = NULL;
    char err[1024];
    if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("load %s: %s", path, err);
    return t;
}

static sublet_replay_result replay(const sublet_trace *t, sublet_replay_options *o)
{
    sublet_replay_result r;
    char err[1024];
    sublet_status st = sublet_replay_run(t, o, &r, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("replay failed (%s): %s", sublet_status_name(st), err);
    return r;
}

/* Everything as recorded: decisions, sizes, addresses, placements, release
 * sets, peak and final reserved bytes. */
static void assert_exact(const char *name, const sublet_trace *t, const sublet_replay_result *r)
{
    const sublet_replay_fidelity *f = &r->fidelity;
    print_message("%s: %llu events, decisions %llu/%llu, addresses %llu, maps %llu/%llu "
                  "(engine %llu, placed %llu), releases %llu/%llu (%llu unmaps), peak reserved "
                  "%llu vs %llu\n",
                  name, (unsigned long long)r->events, (unsigned long long)f->decisions_matched,
                  (unsigned long long)f->allocs_compared, (unsigned long long)f->addresses_matched,
                  (unsigned long long)f->map_sizes_matched,
                  (unsigned long long)f->recorded_segment_maps,
                  (unsigned long long)f->engine_segment_maps,
                  (unsigned long long)f->maps_placed_as_recorded,
                  (unsigned long long)f->empty_cache_sets_matched,
                  (unsigned long long)f->empty_caches_compared,
                  (unsigned long long)f->engine_segment_unmaps,
                  (unsigned long long)r->peak_reserved_bytes,
                  (unsigned long long)f->recorded_peak_reserved_bytes);
    assert_int_equal(r->errors, 0);
    assert_int_equal(r->ooms, 0);
    assert_int_equal(f->allocs_compared, sublet_trace_count_kind(t, SUBLET_ACT_ALLOC));
    assert_int_equal(f->decisions_matched, f->allocs_compared);
    assert_int_equal(f->first_decision_mismatch, SUBLET_REPLAY_NONE);
    assert_int_equal(f->addresses_matched, f->allocs_compared);
    assert_int_equal(f->first_address_mismatch, SUBLET_REPLAY_NONE);
    assert_int_equal(f->first_size_mismatch, SUBLET_REPLAY_NONE);
    assert_int_equal(f->engine_segment_maps, f->recorded_segment_maps);
    assert_int_equal(f->map_sizes_matched, f->recorded_segment_maps);
    assert_int_equal(f->maps_placed_as_recorded, f->recorded_segment_maps);
    assert_int_equal(f->engine_segment_allocs, f->recorded_segment_allocs);
    assert_int_equal(f->segment_sizes_matched, f->recorded_segment_allocs);
    assert_int_equal(f->empty_cache_sets_matched, f->empty_caches_compared);
    assert_int_equal(f->first_empty_cache_mismatch, SUBLET_REPLAY_NONE);
    assert_int_equal(f->engine_segment_unmaps, f->recorded_segment_unmaps);
    assert_int_equal(f->recorded_segment_unmaps,
                     sublet_trace_count_kind(t, SUBLET_ACT_SEGMENT_UNMAP));
    assert_int_equal(r->peak_reserved_bytes, f->recorded_peak_reserved_bytes);
    assert_int_equal(r->final_reserved_bytes, f->recorded_final_reserved_bytes);
}

/* ---- recording the engine ------------------------------------------------------ */

typedef struct taken {
    sublet_snapshot *snap;
    uint64_t dropped;
} taken;

static void take(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    taken *k = user;
    assert_int_equal(st, SUBLET_OK);
    assert_non_null(a);
    k->dropped = sublet_history_dropped(a);
    assert_int_equal(sublet_snapshot_take(a, &k->snap), SUBLET_OK);
}

/* Replay t under expandable segments with recording on and return what the
 * engine recorded, as a trace read back from its snapshot pickle. */
static sublet_trace *record_expandable(const sublet_trace *t, int record_prelude)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = EXPANDABLE;
    o.record = SUBLET_RECORD_ALL;
    o.record_context = SUBLET_CONTEXT_NONE;
    o.record_max_entries = 2 * sublet_trace_count(t) + 1024;
    o.record_prelude = record_prelude;
    taken k = {NULL, 0};
    o.on_finish = take;
    o.finish_user = &k;
    sublet_replay_result r = replay(t, &o);
    sublet_replay_result_free(&r);
    assert_non_null(k.snap);
    assert_int_equal(k.dropped, 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[1024];
    assert_int_equal(sublet_snapshot_encode(k.snap, SUBLET_SNAPSHOT_PICKLE, 0, &buf, &len, err,
                                            sizeof err),
                     SUBLET_OK);
    sublet_snapshot_free(k.snap);
    sublet_trace *back = NULL;
    if (sublet_trace_parse(buf, len, NULL, &back, err, sizeof err) != SUBLET_OK)
        fail_msg("reading the engine's snapshot back: %s", err);
    free(buf);
    return back;
}

/* The recording replays at 100 % under the settings it recorded. */
static void replay_recording(const char *name, const sublet_trace *rec)
{
    assert_non_null(sublet_trace_settings(rec));
    assert_string_equal(sublet_trace_settings(rec), EXPANDABLE);
    assert_int_equal(sublet_trace_prelude_count(rec), 0); /* from an empty allocator */
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = sublet_trace_settings(rec);
    o.check = 1;
    sublet_replay_result r = replay(rec, &o);
    assert_exact(name, rec, &r);
    assert_true(r.fidelity.recorded_segment_maps > 0);
    assert_int_equal(r.stats_end.segment[0].peak, 0); /* maps never count as segments */
    sublet_replay_result_free(&r);
}

/* ---- the hand-written trace ----------------------------------------------------------- */

static void test_by_hand(void **state)
{
    (void)state;
    sublet_trace *t = load(testdata("expandable_by_hand.json"));
    assert_string_equal(sublet_trace_settings(t), EXPANDABLE);
    assert_int_equal(sublet_trace_prelude_count(t), 0);
    assert_int_equal(sublet_trace_count(t), 47);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = sublet_trace_settings(t);
    o.check = 1;
    o.record = SUBLET_RECORD_ALL;
    o.record_max_entries = 256;
    taken k = {NULL, 0};
    o.on_finish = take;
    o.finish_user = &k;
    sublet_replay_result r = replay(t, &o);
    assert_exact("expandable_by_hand", t, &r);
    const sublet_replay_fidelity *f = &r.fidelity;
    assert_int_equal(f->allocs_compared, 16);
    assert_int_equal(f->recorded_segment_maps, 8); /* 9 map rows: one alloc needs two */
    assert_int_equal(f->recorded_segment_unmaps, 4);
    assert_int_equal(f->empty_caches_compared, 3);
    assert_int_equal(f->recorded_segment_allocs, 0);
    assert_int_equal(r.peak_reserved_bytes, 104 * MiB);
    assert_int_equal(r.device_allocs, 9); /* num_device_alloc counts maps (§6.5) */
    assert_int_equal(r.device_frees, 4);
    assert_int_equal(r.device_ops.va_maps, 9);
    assert_int_equal(r.device_ops.va_unmaps, 4);
    /* (stream 0, small), (0, large), (7, small), and (7, small) again after
     * its only pages were unmapped */
    assert_int_equal(r.device_ops.va_reserves, 4);
    assert_int_equal(r.device_ops.va_releases, 1);
    assert_int_equal(r.device_ops.segment_allocs, 0);
    assert_int_equal(r.stats_end.segment[0].peak, 0);
    assert_int_equal(r.stats_end.inactive_split[0].peak, 0);
    assert_int_equal(r.stats_end.reserved_bytes[0].current, 104 * MiB);
    sublet_replay_result_free(&r);

    /* what the engine recorded is the hand-written trace, row for row */
    assert_non_null(k.snap);
    sublet_trace *back = NULL;
    char err[1024];
    assert_int_equal(sublet_snapshot_trace(k.snap, NULL, &back, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_count(back), sublet_trace_count(t));
    for (size_t i = 0; i < sublet_trace_count(t); i++) {
        const sublet_trace_event *x = sublet_trace_at(t, i), *y = sublet_trace_at(back, i);
        if (x->kind != y->kind || x->addr != y->addr || x->size != y->size ||
            x->stream != y->stream)
            fail_msg("row %zu: recorded %s %llu at %llu, engine %s %llu at %llu", i,
                     sublet_trace_kind_name(x->kind), (unsigned long long)x->size,
                     (unsigned long long)x->addr, sublet_trace_kind_name(y->kind),
                     (unsigned long long)y->size, (unsigned long long)y->addr);
    }
    sublet_trace_free(back);
    sublet_snapshot_free(k.snap);

    /* without placement hints the reservations land elsewhere: every
     * decision and map size still matches, the addresses do not */
    sublet_replay_options_init(&o);
    o.conf = sublet_trace_settings(t);
    o.placement_hints = 0;
    r = replay(t, &o);
    assert_int_equal(r.fidelity.decisions_matched, 16);
    assert_int_equal(r.fidelity.map_sizes_matched, 8);
    assert_int_equal(r.fidelity.maps_placed_as_recorded, 0);
    assert_int_equal(r.fidelity.addresses_matched, 0);
    assert_int_equal(r.fidelity.empty_cache_sets_matched, 0);
    sublet_replay_result_free(&r);

    /* under the native policy the same rows are other decisions */
    sublet_replay_options_init(&o);
    r = replay(t, &o);
    assert_true(r.fidelity.decisions_matched < 16);
    assert_int_equal(r.fidelity.engine_segment_maps, 0);
    assert_true(r.fidelity.engine_segment_allocs > 0);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* ---- traces recorded by the engine ----------------------------------------------------- */

static void round_trip(const char *name, const sublet_trace *t)
{
    sublet_trace *rec = record_expandable(t, 1);
    replay_recording(name, rec);
    sublet_trace_free(rec);
}

static void test_round_trip_committed(void **state)
{
    (void)state;
    static const char *const names[] = {"cs336_attention_microbench.events.csv",
                                        "cs336_attention_microbench.pickle.gz",
                                        "decomfl_opt_zo_fl.pickle.gz"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        sublet_trace *t = load(testdata(names[i]));
        round_trip(names[i], t);
        sublet_trace_free(t);
    }
}

/* Every shared snapshot; those recorded mid-run are allocated first, and
 * with record_prelude those allocations are part of the recording. */
static void test_round_trip_shared(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    static const char *const suf[] = {".pickle.gz"};
    char *names[64];
    size_t n = list_dir(dir, suf, 1, names, 64);
    assert_true(n >= 2);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        sublet_trace *t = load(path);
        round_trip(names[i], t);
        sublet_trace_free(t);
        free(names[i]);
    }
}

/* A synthetic workload (two streams, sizes from 512 bytes to 100 MiB, frees
 * deferred by a stream use, an empty_cache every few hundred rows): its
 * recording under expandable segments is full of unmaps, maps that grow
 * free blocks and reservations released and made again. */
static void test_round_trip_synthetic(void **state)
{
    (void)state;
    sublet_trace *t = h_synthetic_trace(0xe5ba7d, 6000, 2);
    sublet_trace *rec = record_expandable(t, 1);
    size_t unmaps = sublet_trace_count_kind(rec, SUBLET_ACT_SEGMENT_UNMAP);
    size_t maps = sublet_trace_count_kind(rec, SUBLET_ACT_SEGMENT_MAP);
    print_message("synthetic: %zu rows, recorded %zu maps and %zu unmaps\n",
                  sublet_trace_count(rec), maps, unmaps);
    assert_true(unmaps > 50 && maps > 100);
    replay_recording("synthetic", rec);
    sublet_trace_free(rec);
    sublet_trace_free(t);
}

/* The engine's recording of a mid-run trace, when the prelude's allocations
 * are left out of it (record_prelude off), is itself mid-run: refused by
 * default, with the reason; replayed when the prelude is allocated. */
static void test_midrun_refused(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    char path[4096];
    snprintf(path, sizeof path, "%s/cs336_lm_win.pickle.gz", dir);
    sublet_trace *t = load(path);
    assert_true(sublet_trace_prelude_count(t) > 0);
    sublet_trace *rec = record_expandable(t, 0);
    assert_true(sublet_trace_prelude_count(rec) > 0);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = sublet_trace_settings(rec);
    sublet_replay_result r;
    char err[2048];
    assert_int_equal(sublet_replay_run(rec, &o, &r, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    print_message("refused: %s\n", err);
    assert_non_null(strstr(err, "mid-run under expandable segments"));
    assert_non_null(strstr(err, "live block(s) existed before the first recorded event"));
    sublet_replay_result_free(&r);
    o.prelude = SUBLET_PRELUDE_ALLOCATE;
    o.check = 1;
    r = replay(rec, &o);
    assert_int_equal(r.errors, 0);
    /* the engine allocated its prelude in address order, which is what the
     * allocated prelude does again: the approximation is exact here */
    assert_int_equal(r.fidelity.decisions_matched, r.fidelity.allocs_compared);
    sublet_replay_result_free(&r);
    sublet_trace_free(rec);
    sublet_trace_free(t);
}

/* The snapshot reader's prelude for expandable segments: the final mapped
 * runs with the trace's maps and unmaps undone, last to first. */
static void test_reader_prelude(void **state)
{
    (void)state;
    /* X = 32 MiB.  Final: [X, X+4M) and [X+6M, X+8M) mapped.  The trace
     * unmaps [X+4M, X+6M) (so it was mapped before), then maps [X+6M, X+8M)
     * for an alloc: mapped when recording began is [X, X+6M). */
    static const char snap[] =
        "{\"segments\": ["
        "{\"device\": 0, \"address\": 33554432, \"total_size\": 4194304, \"stream\": 0, "
        "\"segment_type\": \"large\", \"is_expandable\": true, \"blocks\": ["
        "{\"address\": 33554432, \"size\": 1048576, \"requested_size\": 1048576, "
        "\"state\": \"active_allocated\"},"
        "{\"address\": 34603008, \"size\": 3145728, \"requested_size\": 0, \"state\": "
        "\"inactive\"}]},"
        "{\"device\": 0, \"address\": 39845888, \"total_size\": 2097152, \"stream\": 0, "
        "\"segment_type\": \"large\", \"is_expandable\": true, \"blocks\": ["
        "{\"address\": 39845888, \"size\": 2097152, \"requested_size\": 2097152, "
        "\"state\": \"active_allocated\"}]}],"
        "\"device_traces\": [["
        "{\"action\": \"segment_unmap\", \"addr\": 37748736, \"size\": 2097152, \"stream\": 0},"
        "{\"action\": \"segment_map\", \"addr\": 39845888, \"size\": 2097152, \"stream\": 0},"
        "{\"action\": \"alloc\", \"addr\": 39845888, \"size\": 2097152, \"stream\": 0}]],"
        "\"allocator_settings\": {\"PYTORCH_CUDA_ALLOC_CONF\": \"expandable_segments:True\"}}";
    sublet_trace *t = NULL;
    char err[2048];
    assert_int_equal(sublet_trace_parse(snap, strlen(snap), NULL, &t, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_prelude_count(t), 2);
    const sublet_trace_event *e = sublet_trace_at(t, 0);
    assert_int_equal(e->kind, SUBLET_TRACE_PRE_SEGMENT);
    assert_int_equal(e->addr, 32 * MiB);
    assert_int_equal(e->size, 6 * MiB);
    assert_int_equal(e->flags, SUBLET_TRACE_EXPANDABLE);
    e = sublet_trace_at(t, 1);
    assert_int_equal(e->kind, SUBLET_TRACE_PRE_ALLOC);
    assert_int_equal(e->addr, 32 * MiB);
    assert_int_equal(e->block_size, MiB);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = sublet_trace_settings(t);
    sublet_replay_result r;
    assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "1 segment(s) of 6291456 bytes and 1 live block(s)"));
    sublet_replay_result_free(&r);
    o.prelude = SUBLET_PRELUDE_ALLOCATE;
    o.check = 1;
    r = replay(t, &o);
    assert_int_equal(r.pre_allocs, 1);
    assert_int_equal(r.fidelity.recorded_peak_reserved_bytes, 6 * MiB); /* 6 - 2 + 2 */
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* The OOM cases below: an events CSV, replayed under expandable segments on a 100 MiB
 * device (reservations of 6 pages of 20 MiB: 1.125 x 100 MiB) with the oom rows asked. */
static sublet_trace *oom_trace(const char *csv)
{
    sublet_trace *t = NULL;
    char err[512];
    if (sublet_trace_parse_csv(csv, strlen(csv), &t, err, sizeof err) != SUBLET_OK)
        fail_msg("parse: %s", err);
    return t;
}

static void oom_options(sublet_replay_options *o)
{
    sublet_replay_options_init(o);
    o->conf = EXPANDABLE;
    o->device_memory = 100 * MiB;
    o->check = 1;
    o->replay_ooms = 1;
}

/* A request that fails after growing a segment part of the way: PyTorch maps the hole at
 * the segment's start (row 9), the next map fails, the release gives back every free page,
 * the hole's too (row 10, 40 MiB), and the request is refused (row 11).  With the OOM rows
 * replayed, the release run is the request's own: the engine's request maps the hole as
 * well and releases the same set (an empty_cache at the run would find 20 MiB mapped). */
static void test_oom_after_partial_growth(void **state)
{
    (void)state;
    char csv[1024];
    const unsigned long long x = 140000000000000ull, m = MiB;
    snprintf(csv, sizeof csv,
             "seq,action,addr,size,stream,time_us\n"
             "0,segment_map,%llu,%llu,0,\n1,alloc,%llu,%llu,0,\n"
             "2,segment_map,%llu,%llu,0,\n3,alloc,%llu,%llu,0,\n"
             "4,free_requested,%llu,%llu,0,\n5,free_completed,%llu,%llu,0,\n"
             "6,segment_unmap,%llu,%llu,0,\n"
             "7,free_requested,%llu,%llu,0,\n8,free_completed,%llu,%llu,0,\n"
             "9,segment_map,%llu,%llu,0,\n10,segment_unmap,%llu,%llu,0,\n11,oom,0,%llu,0,\n",
             x, 20 * m, x, 20 * m, x + 20 * m, 20 * m, x + 20 * m, 20 * m, x, 20 * m, x,
             20 * m, x, 20 * m, x + 20 * m, 20 * m, x + 20 * m, 20 * m, x, 20 * m, x, 40 * m,
             102 * m);
    sublet_trace *t = oom_trace(csv);
    sublet_replay_options o;
    oom_options(&o);
    sublet_replay_result r = replay(t, &o);
    const sublet_replay_fidelity *f = &r.fidelity;
    assert_int_equal(r.errors, 0);
    assert_int_equal(f->decisions_matched, 2);
    assert_int_equal(f->addresses_matched, 2);
    assert_int_equal(f->ooms_matched, 1);
    assert_int_equal(f->empty_caches_compared, 2);
    assert_int_equal(f->empty_cache_sets_matched, 2);
    assert_int_equal(f->engine_segment_unmaps, 2);
    assert_int_equal(r.device_allocs, 3); /* the hole mapped by the failed request */
    assert_int_equal(r.empty_caches, 1);  /* row 6; rows 10 and 11 are the request */
    assert_int_equal(r.ooms, 1);
    sublet_replay_result_free(&r);
    /* without the OOM rows the run is an empty_cache, as before */
    o.replay_ooms = 0;
    r = replay(t, &o);
    assert_int_equal(r.fidelity.empty_cache_sets_matched, 1);
    assert_int_equal(r.empty_caches, 2);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* The release run before an oom row is the request's own, and the request's first try comes
 * before it: a request on stream 2 finds no reservation of its stream, reserves one (above
 * stream 1's, the lowest free range then), cannot map, releases stream 1's free pages (row 4:
 * its reservation goes back) and is refused (row 5).  Stream 3's new reservation then takes
 * the lowest range, stream 1's old one (row 6), and stream 2 maps in its own (row 8).  Had
 * the run been an empty_cache before the request, the request's reservation would have taken
 * the lowest range.  No row says where a reservation that never mapped went: with the
 * device's addresses starting where the recording's did (device_base), first fit finds it. */
static void test_oom_first_try_reserves(void **state)
{
    (void)state;
    char csv[1024];
    const unsigned long long b = 0x200000000000ull, r2 = b + 0x7800000ull, m = MiB;
    snprintf(csv, sizeof csv,
             "seq,action,addr,size,stream,time_us\n"
             "0,segment_map,%llu,%llu,1,\n1,alloc,%llu,%llu,1,\n"
             "2,free_requested,%llu,%llu,1,\n3,free_completed,%llu,%llu,1,\n"
             "4,segment_unmap,%llu,%llu,1,\n5,oom,0,%llu,2,\n"
             "6,segment_map,%llu,%llu,3,\n7,alloc,%llu,%llu,3,\n"
             "8,segment_map,%llu,%llu,2,\n9,alloc,%llu,%llu,2,\n",
             b, 20 * m, b, 20 * m, b, 20 * m, b, 20 * m, b, 20 * m, 102 * m, b, 20 * m, b,
             20 * m, r2, 20 * m, r2, 20 * m);
    sublet_trace *t = oom_trace(csv);
    sublet_replay_options o;
    oom_options(&o);
    o.device_base = b;
    sublet_replay_result r = replay(t, &o);
    assert_int_equal(r.errors, 0);
    assert_int_equal(r.fidelity.ooms_matched, 1);
    assert_int_equal(r.fidelity.empty_cache_sets_matched, 1);
    assert_int_equal(r.fidelity.allocs_compared, 3);
    assert_int_equal(r.fidelity.addresses_matched, 3);
    assert_int_equal(r.empty_caches, 0);
    sublet_replay_result_free(&r);
    /* at sublet's own base the reservation is far away: stream 2 maps there */
    o.device_base = 0;
    r = replay(t, &o);
    assert_int_equal(r.fidelity.addresses_matched, 2);
    assert_int_equal(r.fidelity.first_address_mismatch, 9);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* The mirror of the case above: the release run right before the oom row is an
 * empty_cache() of its own, not the request's release, when the recording's stacks say so.
 * PyTorch records every row of one malloc (its release's unmaps and its oom row) with the
 * context it gathered once; here the run's stack is empty_cache's and the oom row's the
 * request's.  So the run comes first: stream 1's reservation goes back, the request's
 * reservation takes the lowest range, its retry finds room there (nothing more to release),
 * stream 3's new reservation goes above it (row 6), and stream 2 maps in its own (row 8).
 * (PyTorch 2.11.0, the null device's program 123: an empty_cache() at rows 174-176, then a
 * request of 10 GiB that failed at row 177.)  Rows without a stack are read as before. */
static const char *stack_trace(char *buf, size_t cap, const char *run_stack)
{
    const unsigned long long b = 0x200000000000ull, r2 = b + 0x7800000ull, m = MiB;
    const char *req = "[{\"filename\": \"p.py\", \"line\": 5, \"name\": \"alloc\"}]";
#define ROW(act, stream)                                                                      \
    "{\"action\": \"" act "\", \"addr\": %llu, \"size\": %llu, \"stream\": " stream            \
    ", \"frames\": %s}"
    snprintf(buf, cap,
             "{\"segments\": [], \"device_traces\": [["
             ROW("segment_map", "1") "," ROW("alloc", "1") ","
             ROW("free_requested", "1") "," ROW("free_completed", "1") ","
             ROW("segment_unmap", "1") ","
             "{\"action\": \"oom\", \"size\": %llu, \"stream\": 2, \"device_free\": %llu, "
             "\"frames\": %s},"
             ROW("segment_map", "3") "," ROW("alloc", "3") ","
             ROW("segment_map", "2") "," ROW("alloc", "2") "]], "
             "\"allocator_settings\": {\"PYTORCH_CUDA_ALLOC_CONF\": \"" EXPANDABLE "\"}}",
             b, 20 * m, req, b, 20 * m, req, b, 20 * m, req, b, 20 * m, req, b, 20 * m, run_stack,
             102 * m, 100 * m, req, r2, 20 * m, req, r2, 20 * m, req, b, 20 * m, req, b, 20 * m,
             req);
#undef ROW
    return buf;
}

static void test_oom_after_empty_cache(void **state)
{
    (void)state;
    char snap[8192], err[1024];
    const char *own[] = {"[{\"filename\": \"p.py\", \"line\": 9, \"name\": \"empty_cache\"}]",
                         "[{\"filename\": \"p.py\", \"line\": 5, \"name\": \"alloc\"}]"};
    for (int k = 0; k < 2; k++) {
        stack_trace(snap, sizeof snap, own[k]);
        sublet_trace *t = NULL;
        if (sublet_trace_parse(snap, strlen(snap), NULL, &t, err, sizeof err) != SUBLET_OK)
            fail_msg("parse: %s", err);
        sublet_replay_options o;
        oom_options(&o);
        o.device_base = 0x200000000000ull;
        sublet_replay_result r = replay(t, &o);
        assert_int_equal(r.errors, 0);
        assert_int_equal(r.fidelity.ooms_matched, 1);
        assert_int_equal(r.fidelity.empty_cache_sets_matched, 1);
        assert_int_equal(r.fidelity.allocs_compared, 3);
        if (k == 0) { /* empty_cache's stack: an empty_cache, then the request */
            assert_int_equal(r.empty_caches, 1);
            assert_int_equal(r.fidelity.addresses_matched, 3);
            assert_int_equal(r.fidelity.first_address_mismatch, SUBLET_REPLAY_NONE);
        } else { /* the request's stack: its own release, as the CSV case above */
            assert_int_equal(r.empty_caches, 0);
            assert_int_equal(r.fidelity.addresses_matched, 1);
            assert_int_equal(r.fidelity.first_address_mismatch, 7);
        }
        sublet_replay_result_free(&r);
        sublet_trace_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_round_trip_committed),
        cmocka_unit_test(test_round_trip_synthetic),
        cmocka_unit_test(test_round_trip_shared),
        cmocka_unit_test(test_midrun_refused),
        cmocka_unit_test(test_reader_prelude),
        cmocka_unit_test(test_oom_after_partial_growth),
        cmocka_unit_test(test_oom_first_try_reserves),
        cmocka_unit_test(test_oom_after_empty_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
