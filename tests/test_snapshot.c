/* sublet — tests of snapshots: sublet_snapshot_take against the allocator's
 * own view, pickle and JSON round trips, the replay's recording hook (the
 * read-back trace equals the recorded one, times included), the direct
 * build from a trace, the statistics from segments, the CSV writer, parse
 * errors, and the atomic write (a failing write leaves the old file intact).
 *
 * SUBLET_TESTDATA: tests/data (the committed attention trace, CSV and pickle). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_write.h"
#include "sublet/history.h"
#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static const char *testdata(const char *name)
{
    static char path[4096];
    const char *d = getenv("SUBLET_TESTDATA");
    snprintf(path, sizeof path, "%s/%s", (d && *d) ? d : "tests/data", name);
    return path;
}

/* ---- a flattened view of segments, to compare two sources -------------------------- */

typedef struct flat {
    size_t nseg, nblk;
    uint64_t seg[4096][6]; /* addr, total, allocated, active, requested, stream|small<<63 */
    uint64_t blk[16384][4]; /* addr, size, requested (0 when inactive), state */
    int64_t device[4096];
} flat;

static void flat_segment(flat *f, int64_t device, const sublet_segment_view *s)
{
    if (f->nseg >= 4096)
        return;
    f->device[f->nseg] = device;
    uint64_t *r = f->seg[f->nseg++];
    r[0] = s->addr;
    r[1] = s->total_size;
    r[2] = s->allocated_size;
    r[3] = s->active_size;
    r[4] = s->requested_size;
    r[5] = s->stream | ((uint64_t)(s->is_small != 0) << 63);
    for (size_t i = 0; i < s->nblocks && f->nblk < 16384; i++) {
        uint64_t *b = f->blk[f->nblk++];
        b[0] = s->blocks[i].addr;
        b[1] = s->blocks[i].size;
        b[2] = s->blocks[i].state == SUBLET_BLOCK_INACTIVE ? 0 : s->blocks[i].requested_size;
        b[3] = (uint64_t)s->blocks[i].state;
    }
}

static void on_alloc_seg(void *user, const sublet_segment_view *s) { flat_segment(user, 0, s); }
static void on_snap_seg(void *user, int64_t device, const sublet_segment_view *s)
{
    flat_segment(user, device, s);
}

static flat *flat_of_allocator(sublet_allocator *a)
{
    flat *f = calloc(1, sizeof *f);
    assert_non_null(f);
    sublet_segments_walk(a, on_alloc_seg, f);
    return f;
}

static flat *flat_of_snapshot(const sublet_snapshot *s)
{
    flat *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(sublet_snapshot_segments_walk(s, on_snap_seg, f), SUBLET_OK);
    return f;
}

static void flat_equal(const flat *a, const flat *b)
{
    assert_int_equal(a->nseg, b->nseg);
    assert_int_equal(a->nblk, b->nblk);
    for (size_t i = 0; i < a->nseg; i++)
        for (int k = 0; k < 6; k++)
            if (a->seg[i][k] != b->seg[i][k])
                fail_msg("segment %zu field %d: %llu vs %llu", i, k,
                         (unsigned long long)a->seg[i][k], (unsigned long long)b->seg[i][k]);
    for (size_t i = 0; i < a->nblk; i++)
        for (int k = 0; k < 4; k++)
            if (a->blk[i][k] != b->blk[i][k])
                fail_msg("block %zu field %d: %llu vs %llu", i, k,
                         (unsigned long long)a->blk[i][k], (unsigned long long)b->blk[i][k]);
}

/* ---- helpers ---------------------------------------------------------------------------- */

typedef struct env {
    sublet_backend *sim;
    sublet_allocator *a;
} env;

static void env_init(env *e, int device)
{
    assert_int_equal(sublet_sim_create(8 * GiB, &e->sim), SUBLET_OK);
    sublet_options o = {.backend = e->sim, .device = device, .conf = ""};
    assert_int_equal(sublet_allocator_create(&o, &e->a, NULL, 0), SUBLET_OK);
}

static void env_fini(env *e)
{
    sublet_allocator_destroy(e->a);
    sublet_backend_destroy(e->sim);
}

static uint64_t g_now = 1700000000000000ull;
static uint64_t test_clock(void *user)
{
    (void)user;
    return ++g_now;
}

static size_t test_stack(void *user, sublet_frame *out, size_t cap)
{
    (void)user;
    static const sublet_frame fr[2] = {{"model.py", 42, "forward"}, {"train.py", 7, "main"}};
    size_t n = cap < 2 ? cap : 2;
    memcpy(out, fr, n * sizeof *out);
    return n;
}

static char *encode(const sublet_snapshot *s, sublet_snapshot_format f, size_t *len)
{
    uint8_t *buf = NULL;
    char err[256];
    if (sublet_snapshot_encode(s, f, 0, &buf, len, err, sizeof err) != SUBLET_OK)
        fail_msg("encode: %s", err);
    return (char *)buf;
}

static sublet_snapshot *reparse(const void *buf, size_t len)
{
    sublet_snapshot *s = NULL;
    char err[512];
    if (sublet_snapshot_parse(buf, len, &s, err, sizeof err) != SUBLET_OK)
        fail_msg("parse: %s", err);
    return s;
}

static sublet_trace *trace_of(const sublet_snapshot *s)
{
    sublet_trace *t = NULL;
    char err[512];
    if (sublet_snapshot_trace(s, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("snapshot trace: %s", err);
    return t;
}

static void trace_release(sublet_trace *t)
{
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

/* The recorded events of two traces are equal (kind, addr, size, stream, time). */
static void events_equal(const sublet_trace *a, const sublet_trace *b)
{
    assert_int_equal(sublet_trace_count(a), sublet_trace_count(b));
    for (size_t i = 0; i < sublet_trace_count(a); i++) {
        const sublet_trace_event *x = sublet_trace_at(a, i), *y = sublet_trace_at(b, i);
        if (x->kind != y->kind || x->addr != y->addr || x->size != y->size ||
            x->stream != y->stream || (x->flags & SUBLET_TRACE_HAS_TIME) !=
                (y->flags & SUBLET_TRACE_HAS_TIME) || x->time_us != y->time_us)
            fail_msg("event %zu: %s %llu %llu %llu t%llu vs %s %llu %llu %llu t%llu", i,
                     sublet_trace_kind_name(x->kind), (unsigned long long)x->addr,
                     (unsigned long long)x->size, (unsigned long long)x->stream,
                     (unsigned long long)x->time_us, sublet_trace_kind_name(y->kind),
                     (unsigned long long)y->addr, (unsigned long long)y->size,
                     (unsigned long long)y->stream, (unsigned long long)y->time_us);
    }
}

/* ---- taking ----------------------------------------------------------------------------- */

static void test_take_without_recording(void **state)
{
    (void)state;
    env e;
    env_init(&e, 0);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_take(e.a, &s), SUBLET_OK);
    assert_int_equal(sublet_snapshot_segment_count(s), 0);
    assert_int_equal(sublet_snapshot_device_count(s), 1);
    assert_int_equal(sublet_snapshot_trace_count(s, 0), 0);
    size_t n;
    char *json = encode(s, SUBLET_SNAPSHOT_JSON, &n);
    const char *want = "{\"segments\": [], \"device_traces\": [[]], \"allocator_settings\": "
                       "{\"PYTORCH_CUDA_ALLOC_CONF\": \"\", \"max_split_size\": -1, "
                       "\"garbage_collection_threshold\": 0.0, \"expandable_segments\": false, "
                       "\"pinned_num_register_threads\": 1, \"release_lock_on_cudamalloc\": false, "
                       "\"pinned_use_cuda_host_register\": false, \"roundup_power2_divisions\": "
                       "{\"1\": 0, \"2\": 0, \"4\": 0, \"8\": 0, \"16\": 0, \"32\": 0, \"64\": 0, "
                       "\"128\": 0, \"256\": 0, \"512\": 0, \"1024\": 0, \"2048\": 0, \"4096\": 0, "
                       "\"8192\": 0, \"16384\": 0, \"32768\": 0}, "
                       "\"graph_capture_record_stream_reuse\": false}, "
                       "\"external_annotations\": []}";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(json, want, n);
    free(json);
    sublet_snapshot_free(s);
    env_fini(&e);
}

static void test_settings_reported(void **state)
{
    (void)state;
    env e;
    env_init(&e, 0);
    const char *conf = "max_split_size_mb:256,roundup_power2_divisions:[64:8,>:4],"
                       "garbage_collection_threshold:0.5";
    assert_int_equal(sublet_settings_apply(e.a, conf, NULL, 0), SUBLET_OK);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_take(e.a, &s), SUBLET_OK);
    assert_string_equal(sublet_snapshot_conf(s), conf);
    size_t n;
    char *json = encode(s, SUBLET_SNAPSHOT_JSON, &n);
    assert_non_null(strstr(json, "\"max_split_size\": 268435456"));
    assert_non_null(strstr(json, "\"garbage_collection_threshold\": 0.5"));
    assert_non_null(strstr(json, "\"32\": 8, \"64\": 8, \"128\": 4"));
    free(json);
    /* the trace view reports the settings string */
    sublet_trace *t = trace_of(s);
    assert_string_equal(sublet_trace_settings(t), conf);
    trace_release(t);
    sublet_snapshot_free(s);
    env_fini(&e);
}

static void test_take_matches_allocator(void **state)
{
    (void)state;
    env e;
    env_init(&e, 0);
    sublet_clock_set(e.a, test_clock, NULL);
    sublet_stack_source_set(e.a, test_stack, NULL);
    assert_int_equal(sublet_history_record(e.a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_ALL, 0),
                     SUBLET_OK);
    void *p[8];
    static const uint64_t sizes[8] = {1000, 3 * MiB, 700, 25 * MiB, 512, 4 * MiB, 100, 9 * MiB};
    for (int i = 0; i < 8; i++)
        assert_int_equal(sublet_malloc(e.a, sizes[i], i == 5 ? 7 : 0, &p[i]), SUBLET_OK);
    assert_int_equal(sublet_free(e.a, p[1]), SUBLET_OK);
    assert_int_equal(sublet_free(e.a, p[2]), SUBLET_OK);
    /* a pending free: used on another stream */
    assert_int_equal(sublet_record_stream(e.a, p[3], 99), SUBLET_OK);
    assert_int_equal(sublet_free(e.a, p[3]), SUBLET_OK);

    size_t nhist = sublet_history_count(e.a);
    assert_true(nhist > 0);
    sublet_trace_entry *h = calloc(nhist + 16, sizeof *h);
    assert_int_equal(sublet_history_copy(e.a, h, nhist + 16), nhist);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_take(e.a, &s), SUBLET_OK);
    flat *fa = flat_of_allocator(e.a), *fs = flat_of_snapshot(s);
    flat_equal(fa, fs);
    int pending = 0;
    for (size_t i = 0; i < fs->nblk; i++)
        pending += fs->blk[i][3] == SUBLET_BLOCK_ACTIVE_PENDING_FREE;
    assert_int_equal(pending, 1);
    /* the trace: every history entry (the snapshot's own entry is not in it) */
    assert_int_equal(sublet_snapshot_trace_count(s, 0), nhist);
    sublet_trace *t = trace_of(s);
    size_t pre = sublet_trace_prelude_count(t);
    assert_int_equal(pre, 0);
    assert_int_equal(sublet_trace_count(t), nhist);
    for (size_t i = 0; i < nhist; i++) {
        const sublet_trace_event *ev = sublet_trace_at(t, i);
        assert_int_equal(ev->kind, h[i].action);
        assert_int_equal(ev->addr, h[i].addr);
        assert_int_equal(ev->size, h[i].size);
        assert_int_equal(ev->stream, h[i].stream);
        assert_int_equal(ev->time_us, h[i].time_us);
        assert_true(ev->flags & SUBLET_TRACE_HAS_TIME);
        /* stacks: the two frames of test_stack, innermost first */
        const sublet_trace_frame *fr = NULL;
        assert_int_equal(sublet_trace_stack(t, ev->frames, &fr), 2);
        assert_string_equal(fr[0].filename, "model.py");
        assert_string_equal(fr[0].name, "forward");
        assert_int_equal(fr[0].line, 42);
        assert_string_equal(fr[1].filename, "train.py");
    }
    /* frames in the JSON: {filename, line, name} */
    size_t n;
    char *json = encode(s, SUBLET_SNAPSHOT_JSON, &n);
    assert_non_null(strstr(json, "{\"filename\": \"model.py\", \"line\": 42, \"name\": "
                                 "\"forward\"}"));
    assert_non_null(strstr(json, "\"compile_context\": \"N/A\", \"user_metadata\": \"\""));
    assert_non_null(strstr(json, "\"segment_type\": \"small\""));
    assert_non_null(strstr(json, "\"segment_type\": \"large\""));
    assert_non_null(strstr(json, "\"segment_pool_id\": [0, 0]"));
    assert_non_null(strstr(json, "\"state\": \"active_pending_free\""));
    free(json);
    trace_release(t);
    free(fa);
    free(fs);
    free(h);
    sublet_snapshot_free(s);
    for (int i = 0; i < 8; i++)
        if (i < 1 || i > 3)
            assert_int_equal(sublet_free(e.a, p[i]), SUBLET_OK);
    env_fini(&e);
}

/* sublet_history_take hands out the oldest entries and drops them: what it
 * takes, in chunks, is what a copy held, also when the ring has wrapped; the
 * entries recorded after a take land after the ones left. */
static void test_history_take(void **state)
{
    (void)state;
    env e;
    env_init(&e, 0);
    assert_int_equal(sublet_history_record(e.a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_NONE, 8),
                     SUBLET_OK);
    sublet_trace_entry ref[8], got[8];
    void *p[2];
    for (int round = 0; round < 3; round++) {
        /* 6 entries (2 allocs, 2 x free_requested + free_completed), 7 with
         * the first round's segment_alloc: the ring of 8 keeps them all */
        for (int i = 0; i < 2; i++)
            assert_int_equal(sublet_malloc(e.a, (uint64_t)(i + 1) * 4096, 0, &p[i]), SUBLET_OK);
        for (int i = 0; i < 2; i++)
            assert_int_equal(sublet_free(e.a, p[i]), SUBLET_OK);
        size_t n = sublet_history_count(e.a);
        assert_int_equal(n, round ? 6u : 7u);
        assert_int_equal(sublet_history_copy(e.a, ref, 8), n);
        /* three, then the rest */
        assert_int_equal(sublet_history_take(e.a, got, 3), 3);
        assert_int_equal(sublet_history_count(e.a), n - 3);
        assert_int_equal(sublet_history_take(e.a, got + 3, 8), n - 3);
        assert_int_equal(sublet_history_count(e.a), 0);
        assert_int_equal(sublet_history_take(e.a, got, 8), 0);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(got[i].action, ref[i].action);
            assert_int_equal(got[i].addr, ref[i].addr);
            assert_int_equal(got[i].size, ref[i].size);
        }
        /* the last entry of each round: the second free's completion */
        assert_int_equal(got[n - 1].action, SUBLET_ACT_FREE_COMPLETED);
        assert_int_equal(got[n - 1].addr, (uint64_t)(uintptr_t)p[1]);
    }
    /* take leaves the rest in order: two entries, take one, record more */
    assert_int_equal(sublet_malloc(e.a, 4096, 0, &p[0]), SUBLET_OK);
    assert_int_equal(sublet_free(e.a, p[0]), SUBLET_OK);
    size_t n = sublet_history_count(e.a);
    assert_int_equal(sublet_history_copy(e.a, ref, 8), n);
    assert_int_equal(sublet_history_take(e.a, got, 1), 1);
    assert_int_equal(got[0].action, ref[0].action);
    assert_int_equal(sublet_malloc(e.a, 8192, 0, &p[1]), SUBLET_OK);
    assert_int_equal(sublet_history_copy(e.a, got, 8), sublet_history_count(e.a));
    assert_int_equal(got[0].action, ref[1].action);
    assert_int_equal(got[0].addr, ref[1].addr);
    assert_int_equal(got[sublet_history_count(e.a) - 1].action, SUBLET_ACT_ALLOC);
    assert_int_equal(got[sublet_history_count(e.a) - 1].size, 8192);
    assert_int_equal(sublet_history_dropped(e.a), 0);
    assert_int_equal(sublet_free(e.a, p[1]), SUBLET_OK);
    env_fini(&e);
}

/* Taking a snapshot records PyTorch's `snapshot` entry (size = active bytes),
 * which appears in the next dump, never in its own. */
static void test_snapshot_marker(void **state)
{
    (void)state;
    env e;
    env_init(&e, 0);
    sublet_clock_set(e.a, test_clock, NULL);
    assert_int_equal(sublet_history_record(e.a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_NONE, 0),
                     SUBLET_OK);
    void *p;
    assert_int_equal(sublet_malloc(e.a, 3000, 0, &p), SUBLET_OK);
    sublet_snapshot *s1 = NULL, *s2 = NULL;
    assert_int_equal(sublet_snapshot_take(e.a, &s1), SUBLET_OK);
    assert_int_equal(sublet_snapshot_take(e.a, &s2), SUBLET_OK);
    size_t n1 = sublet_snapshot_trace_count(s1, 0), n2 = sublet_snapshot_trace_count(s2, 0);
    assert_int_equal(n2, n1 + 1);
    sublet_trace *t1 = trace_of(s1), *t2 = trace_of(s2);
    assert_int_equal(sublet_trace_count_kind(t1, SUBLET_ACT_SNAPSHOT), 0);
    const sublet_trace_event *last = sublet_trace_at(t2, n2 - 1);
    assert_int_equal(last->kind, SUBLET_ACT_SNAPSHOT);
    assert_int_equal(last->addr, 0);
    assert_int_equal(last->size, 3072); /* the active bytes */
    assert_true(last->time_us > sublet_trace_at(t2, n2 - 2)->time_us);
    trace_release(t1);
    trace_release(t2);
    sublet_snapshot_free(s1);
    sublet_snapshot_free(s2);
    assert_int_equal(sublet_free(e.a, p), SUBLET_OK);
    env_fini(&e);
}

static void test_device_padding(void **state)
{
    (void)state;
    env e;
    env_init(&e, 2);
    assert_int_equal(sublet_history_record(e.a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_NONE, 0),
                     SUBLET_OK);
    void *p;
    assert_int_equal(sublet_malloc(e.a, 5 * MiB, 0, &p), SUBLET_OK);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_take(e.a, &s), SUBLET_OK);
    assert_int_equal(sublet_snapshot_device_count(s), 3);
    assert_int_equal(sublet_snapshot_trace_count(s, 0), 0);
    assert_int_equal(sublet_snapshot_trace_count(s, 1), 0);
    assert_int_equal(sublet_snapshot_trace_count(s, 2), sublet_history_count(e.a) ? 2 : 0);
    flat *f = flat_of_snapshot(s);
    assert_int_equal(f->nseg, 1);
    assert_int_equal(f->device[0], 2);
    free(f);
    sublet_trace *t = trace_of(s);
    assert_int_equal(sublet_trace_device(t), 2);
    trace_release(t);
    sublet_snapshot_free(s);
    assert_int_equal(sublet_free(e.a, p), SUBLET_OK);
    env_fini(&e);
}

/* ---- round trips ------------------------------------------------------------------------ */

typedef struct finish_ctx {
    sublet_snapshot *snap;
    flat *f;
    sublet_stats stats;
} finish_ctx;

static void at_finish(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    finish_ctx *c = user;
    assert_int_equal(st, SUBLET_OK);
    assert_non_null(a);
    assert_int_equal(sublet_history_dropped(a), 0);
    assert_int_equal(sublet_snapshot_take(a, &c->snap), SUBLET_OK);
    c->f = flat_of_allocator(a);
    sublet_stats_read(a, &c->stats);
}

static sublet_trace *load_any(const char *path)
{
    sublet_trace *t = NULL;
    char err[512];
    if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("load %s: %s", path, err);
    return t;
}

static void replay_recorded(const sublet_trace *t, finish_ctx *c)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    /* the traces were recorded by releases before 2.14, whose best fit breaks
     * a tie of sizes by address (docs/versions.md) */
    o.conf = "pytorch_version:2.13";
    o.record = SUBLET_RECORD_ALL;
    o.record_context = sublet_trace_stack_count(t) ? SUBLET_CONTEXT_ALL : SUBLET_CONTEXT_NONE;
    o.record_max_entries = sublet_trace_count(t) * 2 + 16;
    o.on_finish = at_finish;
    o.finish_user = c;
    sublet_replay_result r;
    char err[512];
    if (sublet_replay_run(t, &o, &r, err, sizeof err) != SUBLET_OK)
        fail_msg("replay: %s", err);
    assert_int_equal(r.errors, 0);
    sublet_replay_result_free(&r);
    assert_non_null(c->snap);
}

/* The committed trace, recorded from an empty allocator: replayed with
 * recording, its snapshot reads back as the very same events (times
 * included), in pickle and in JSON, and the same segments as the allocator. */
static void test_replay_round_trip(void **state)
{
    (void)state;
    static const char *const inputs[] = {"cs336_attention_microbench.events.csv",
                                         "cs336_attention_microbench.pickle.gz"};
    for (size_t k = 0; k < 2; k++) {
        sublet_trace *orig = load_any(testdata(inputs[k]));
        finish_ctx c = {0};
        replay_recorded(orig, &c);
        flat *fs = flat_of_snapshot(c.snap);
        flat_equal(c.f, fs);
        free(fs);
        for (int f = SUBLET_SNAPSHOT_PICKLE; f <= SUBLET_SNAPSHOT_JSON; f++) {
            size_t n;
            char *buf = encode(c.snap, (sublet_snapshot_format)f, &n);
            sublet_snapshot *back = reparse(buf, n);
            free(buf);
            flat *fb = flat_of_snapshot(back);
            flat_equal(c.f, fb);
            free(fb);
            sublet_trace *t = trace_of(back);
            events_equal(orig, t);
            trace_release(t);
            sublet_snapshot_free(back);
        }
        /* segment statistics equal the allocator's current values */
        sublet_stats seg;
        sublet_snapshot_stats(c.snap, 0, &seg);
#define SUBLET_X_ARR(key, title, bytes)                                        \
    for (int p = 0; p < SUBLET_POOL_KINDS; p++)                               \
        if (seg.key[p].current != c.stats.key[p].current)                      \
            fail_msg("%s[%d]: %lld vs %lld", #key, p, (long long)seg.key[p].current, \
                     (long long)c.stats.key[p].current);
        SUBLET_STAT_ARRAYS(SUBLET_X_ARR)
#undef SUBLET_X_ARR
        free(c.f);
        sublet_snapshot_free(c.snap);
        trace_release(orig);
    }
}

/* The original PyTorch pickle: its own segments equal those of the replayed
 * allocator's snapshot, and sublet's pickle of the parsed tree reads back
 * equal. */
static void test_pytorch_pickle(void **state)
{
    (void)state;
    sublet_snapshot *orig = NULL;
    char err[512];
    if (sublet_snapshot_load(testdata("cs336_attention_microbench.pickle.gz"), &orig, err,
                             sizeof err) != SUBLET_OK)
        fail_msg("%s", err);
    assert_int_equal(sublet_snapshot_segment_count(orig), 9);
    assert_int_equal(sublet_snapshot_trace_count(orig, 0), 97);
    sublet_trace *t = trace_of(orig);
    finish_ctx c = {0};
    replay_recorded(t, &c);
    flat *fo = flat_of_snapshot(orig);
    flat_equal(c.f, fo);
    /* the direct build from the trace gives the same segments here too */
    sublet_snapshot *direct = NULL;
    assert_int_equal(sublet_snapshot_from_trace(t, NULL, &direct, err, sizeof err), SUBLET_OK);
    flat *fd = flat_of_snapshot(direct);
    flat_equal(fo, fd);
    sublet_trace *td = trace_of(direct);
    events_equal(t, td);
    trace_release(td);
    free(fd);
    sublet_snapshot_free(direct);
    /* transcoding the parsed tree keeps everything */
    size_t n;
    char *buf = encode(orig, SUBLET_SNAPSHOT_PICKLE, &n);
    sublet_snapshot *back = reparse(buf, n);
    free(buf);
    flat *fb = flat_of_snapshot(back);
    flat_equal(fo, fb);
    sublet_trace *tb = trace_of(back);
    events_equal(t, tb);
    assert_int_equal(sublet_trace_stack_count(tb), sublet_trace_stack_count(t));
    trace_release(tb);
    free(fb);
    free(fo);
    free(c.f);
    sublet_snapshot_free(back);
    sublet_snapshot_free(c.snap);
    trace_release(t);
    sublet_snapshot_free(orig);
}

static void test_csv_writer(void **state)
{
    (void)state;
    const char *path = testdata("cs336_attention_microbench.events.csv");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char want[1 << 16];
    size_t wn = fread(want, 1, sizeof want, f);
    fclose(f);
    sublet_trace *t = load_any(testdata("cs336_attention_microbench.pickle.gz"));
    char *text = NULL;
    size_t n = 0;
    assert_int_equal(sublet_trace_encode_csv(t, &text, &n, NULL, 0), SUBLET_OK);
    assert_int_equal(n, wn);
    assert_memory_equal(text, want, n); /* byte for byte, CRLF included */
    /* and it parses back to the same events */
    sublet_trace *back = NULL;
    assert_int_equal(sublet_trace_parse_csv(text, n, &back, NULL, 0), SUBLET_OK);
    events_equal(t, back);
    sublet_trace_free(back);
    free(text);
    /* prelude rows: no time */
    sublet_trace *p = NULL;
    assert_int_equal(sublet_trace_create(&p), SUBLET_OK);
    sublet_trace_event e = {.kind = SUBLET_TRACE_PRE_SEGMENT, .addr = 4 * MiB, .size = 2 * MiB};
    assert_int_equal(sublet_trace_append(p, &e), SUBLET_OK);
    e = (sublet_trace_event){.kind = SUBLET_ACT_ALLOC, .flags = SUBLET_TRACE_HAS_TIME,
                             .addr = 4 * MiB, .size = 100, .stream = 3, .time_us = 55};
    assert_int_equal(sublet_trace_append(p, &e), SUBLET_OK);
    assert_int_equal(sublet_trace_encode_csv(p, &text, &n, NULL, 0), SUBLET_OK);
    const char *w2 = "seq,action,addr,size,stream,time_us\r\n0,pre_segment,4194304,2097152,0,"
                     "\r\n1,alloc,4194304,100,3,55\r\n";
    assert_int_equal(n, strlen(w2));
    assert_memory_equal(text, w2, n);
    free(text);
    sublet_trace_free(p);
    trace_release(t);
}

/* ---- parsing errors ----------------------------------------------------------------------- */

static void expect_parse_error(const char *text, const char *word)
{
    sublet_snapshot *s = (sublet_snapshot *)(uintptr_t)1;
    char err[512];
    assert_int_equal(sublet_snapshot_parse(text, strlen(text), &s, err, sizeof err),
                     SUBLET_ERR_PARSE);
    assert_null(s);
    if (!strstr(err, word))
        fail_msg("expected '%s' in '%s'", word, err);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("seq,action\n", "not a snapshot");
    expect_parse_error("{\"traceEvents\": []}", "neither 'segments' nor 'device_traces'");
    expect_parse_error("{\"segments\": 3}", "segments: expected a list, found int");
    expect_parse_error("{\"segments\": [{\"address\": 1, \"total_size\": 2, \"stream\": 0, "
                       "\"blocks\": [{\"size\": \"x\", \"state\": \"inactive\"}]}]}",
                       "segments[0].blocks[0].size: expected a non-negative int, found str");
    expect_parse_error("{\"segments\": [{\"total_size\": 2, \"stream\": 0, \"blocks\": []}]}",
                       "segments[0].address: missing");
    expect_parse_error("{\"segments\": [], \"device_traces\": [3]}",
                       "device_traces[0]: expected a list");
    expect_parse_error("{\"segments\": [", "JSON:");
    /* the bare segment list of memory_snapshot() is a snapshot without a trace */
    const char *bare = "[{\"device\": 0, \"address\": 1048576, \"total_size\": 2097152, "
                       "\"stream\": 0, \"segment_type\": \"small\", \"blocks\": [{\"size\": 512, "
                       "\"requested_size\": 100, \"state\": \"active_allocated\"}, {\"size\": "
                       "2096640, \"state\": \"inactive\"}]}]";
    sublet_snapshot *s = reparse(bare, strlen(bare));
    assert_int_equal(sublet_snapshot_segment_count(s), 1);
    assert_int_equal(sublet_snapshot_device_count(s), 0);
    flat *f = flat_of_snapshot(s);
    assert_int_equal(f->nblk, 2);
    assert_int_equal(f->blk[1][0], 1048576 + 512); /* addresses follow the sizes */
    assert_int_equal(f->seg[0][2], 512);           /* allocated_size from the blocks */
    free(f);
    sublet_stats st;
    sublet_snapshot_stats(s, 0, &st);
    assert_int_equal(st.allocated_bytes[SUBLET_POOL_SMALL].current, 512);
    assert_int_equal(st.requested_bytes[SUBLET_POOL_ALL].current, 100);
    assert_int_equal(st.inactive_split_bytes[SUBLET_POOL_SMALL].current, 2096640);
    assert_int_equal(st.reserved_bytes[SUBLET_POOL_ALL].peak, 2097152);
    assert_int_equal(st.segment[SUBLET_POOL_SMALL].current, 1);
    sublet_snapshot_free(s);
}

/* ---- writing --------------------------------------------------------------------------------- */

static char g_dir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/sublet_snapshot_test_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char p[512];
                snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(g_dir);
    sublet_atomic_write_fail_after(-1);
    return 0;
}

static size_t dir_entries(void)
{
    size_t n = 0;
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 22];
    *n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    char *out = malloc(*n + 1);
    memcpy(out, buf, *n);
    return out;
}

static void test_write_and_load(void **state)
{
    (void)state;
    sublet_trace *t = load_any(testdata("cs336_attention_microbench.events.csv"));
    finish_ctx c = {0};
    replay_recorded(t, &c);
    static const char *const names[] = {"a.pickle", "a.pkl", "a.json", "a.pickle.gz",
                                        "a.JSON.GZ"};
    for (size_t i = 0; i < 5; i++) {
        char path[512], err[512];
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        if (sublet_snapshot_write(c.snap, path, SUBLET_SNAPSHOT_AUTO, err, sizeof err))
            fail_msg("%s", err);
        sublet_snapshot *back = NULL;
        if (sublet_snapshot_load(path, &back, err, sizeof err))
            fail_msg("%s", err);
        flat *fb = flat_of_snapshot(back);
        flat_equal(c.f, fb);
        free(fb);
        sublet_trace *tb = trace_of(back);
        events_equal(t, tb);
        trace_release(tb);
        sublet_snapshot_free(back);
        size_t n;
        char *bytes = slurp(path, &n);
        int gz = strstr(names[i], ".gz") || strstr(names[i], ".GZ");
        if (gz)
            assert_true((unsigned char)bytes[0] == 0x1f && (unsigned char)bytes[1] == 0x8b);
        else if (strstr(names[i], ".json"))
            assert_int_equal(bytes[0], '{');
        else
            assert_true((unsigned char)bytes[0] == 0x80 && bytes[1] == 4); /* PROTO 4 */
        free(bytes);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_true(sb.st_mode & 0444); /* not mkstemp's 0600 only */
    }
    assert_int_equal(dir_entries(), 5); /* no temporary file left */
    /* an unknown extension, and an explicit format */
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/a.bin", g_dir);
    assert_int_equal(sublet_snapshot_write(c.snap, path, SUBLET_SNAPSHOT_AUTO, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "a.bin"));
    assert_int_equal(sublet_snapshot_write(c.snap, path, SUBLET_SNAPSHOT_JSON, err, sizeof err),
                     SUBLET_OK);
    unlink(path);
    free(c.f);
    sublet_snapshot_free(c.snap);
    trace_release(t);
}

static void test_atomic_write_failures(void **state)
{
    (void)state;
    char path[512], err[1024];
    /* a directory that does not exist: the open step fails, naming the path */
    snprintf(path, sizeof path, "%s/no/such/dir/x.pickle", g_dir);
    assert_int_equal(sublet_atomic_write(path, "abc", 3, err, sizeof err), SUBLET_ERR_IO);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "open"));
    assert_non_null(strstr(err, strerror(ENOENT)));

    /* an existing file survives a write that fails midway (ENOSPC) */
    snprintf(path, sizeof path, "%s/keep.json", g_dir);
    const char *old = "the previous snapshot\n";
    assert_int_equal(sublet_atomic_write(path, old, strlen(old), err, sizeof err), SUBLET_OK);
    static char big[200000];
    memset(big, 'x', sizeof big);
    sublet_atomic_write_fail_after(70000);
    assert_int_equal(sublet_atomic_write(path, big, sizeof big, err, sizeof err), SUBLET_ERR_IO);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "write failed"));
    assert_non_null(strstr(err, strerror(ENOSPC)));
    size_t n;
    char *now = slurp(path, &n);
    assert_int_equal(n, strlen(old));
    assert_memory_equal(now, old, n);
    free(now);
    assert_int_equal(dir_entries(), 1); /* the temporary file was removed */

    /* the same through the snapshot writer */
    env e;
    env_init(&e, 0);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_take(e.a, &s), SUBLET_OK);
    sublet_atomic_write_fail_after(10);
    assert_int_equal(sublet_snapshot_write(s, path, SUBLET_SNAPSHOT_AUTO, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_non_null(strstr(err, "write failed"));
    now = slurp(path, &n);
    assert_memory_equal(now, old, n);
    free(now);
    sublet_atomic_write_fail_after(-1);
    assert_int_equal(sublet_snapshot_write(s, path, SUBLET_SNAPSHOT_AUTO, err, sizeof err),
                     SUBLET_OK);
    now = slurp(path, &n);
    assert_int_equal(now[0], '{');
    free(now);
    /* a path that is a directory: rename fails, nothing is left behind */
    assert_int_equal(sublet_snapshot_write(s, g_dir, SUBLET_SNAPSHOT_JSON, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_non_null(strstr(err, "rename"));
    assert_int_equal(dir_entries(), 1);
    sublet_snapshot_free(s);
    env_fini(&e);
}

static void test_format_of_path(void **state)
{
    (void)state;
    int gz = -1;
    assert_int_equal(sublet_snapshot_format_of_path("x.pickle", &gz), SUBLET_SNAPSHOT_PICKLE);
    assert_int_equal(gz, 0);
    assert_int_equal(sublet_snapshot_format_of_path("d/x.pkl.gz", &gz), SUBLET_SNAPSHOT_PICKLE);
    assert_int_equal(gz, 1);
    assert_int_equal(sublet_snapshot_format_of_path("x.json.gz", &gz), SUBLET_SNAPSHOT_JSON);
    assert_int_equal(sublet_snapshot_format_of_path("x.csv", &gz), SUBLET_SNAPSHOT_AUTO);
    assert_int_equal(sublet_snapshot_format_of_path("x.gz", &gz), SUBLET_SNAPSHOT_AUTO);
    assert_int_equal(sublet_snapshot_format_of_path("", &gz), SUBLET_SNAPSHOT_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_without_recording),
        cmocka_unit_test(test_settings_reported),
        cmocka_unit_test(test_take_matches_allocator),
        cmocka_unit_test(test_history_take),
        cmocka_unit_test(test_snapshot_marker),
        cmocka_unit_test(test_device_padding),
        cmocka_unit_test(test_replay_round_trip),
        cmocka_unit_test(test_pytorch_pickle),
        cmocka_unit_test(test_csv_writer),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test_setup_teardown(test_write_and_load, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_atomic_write_failures, setup_dir, teardown_dir),
        cmocka_unit_test(test_format_of_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
