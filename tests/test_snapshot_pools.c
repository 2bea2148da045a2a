/* sublet — tests of private pools in snapshots and traces (docs/pools.md,
 * "Snapshots and traces"): the engine's segment view carries the pool id,
 * sublet_snapshot_take writes it as PyTorch's segment_pool_id tuple, pickle
 * and JSON round trips keep it, the snapshot reader puts it on the rebuilt
 * prelude and on the recorded segment_alloc of a private segment, and
 * rebuilds the pool of every row from the segments' (alloc, free, segment
 * rows); the events CSV keeps it in its pool column (pickle -> JSON -> CSV ->
 * pickle keeps every row's pool); the replay drives each pool and reports
 * its fidelity (whole and streamed, the same), and refuses a prelude in a
 * private pool unless the prelude is allocated.
 *
 * SUBLET_SEED_OUT: when set, the round trip's JSON snapshot is written there
 * (the fuzz seed fuzz/seeds/fuzz_trace_snapshot/private_pools.json). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sublet/history.h"
#include "sublet/pool.h"
#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"
#include "support/harness.h"

/* ---- segments as (address, pool id) ---------------------------------------------------- */

typedef struct seglist {
    size_t n;
    uint64_t addr[64], pool[64][2];
    int small[64];
} seglist;

static void add_seg(seglist *l, const sublet_segment_view *sv)
{
    assert_true(l->n < 64);
    l->addr[l->n] = sv->addr;
    l->pool[l->n][0] = sv->pool_id[0];
    l->pool[l->n][1] = sv->pool_id[1];
    l->small[l->n] = sv->is_small;
    l->n++;
}

static void on_engine_seg(void *user, const sublet_segment_view *sv) { add_seg(user, sv); }

static void on_snap_seg(void *user, int64_t device, const sublet_segment_view *sv)
{
    assert_int_equal(device, 0);
    add_seg(user, sv);
}

static void seglist_equal(const seglist *a, const seglist *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->addr[i], b->addr[i]);
        assert_int_equal(a->pool[i][0], b->pool[i][0]);
        assert_int_equal(a->pool[i][1], b->pool[i][1]);
        assert_int_equal(a->small[i], b->small[i]);
    }
}

static seglist snap_segs(const sublet_snapshot *s)
{
    seglist l;
    memset(&l, 0, sizeof l);
    assert_int_equal(sublet_snapshot_segments_walk(s, on_snap_seg, &l), SUBLET_OK);
    return l;
}

static sublet_snapshot *reparse(const void *buf, size_t n)
{
    sublet_snapshot *s = NULL;
    char err[512];
    if (sublet_snapshot_parse(buf, n, &s, err, sizeof err) != SUBLET_OK)
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

/* Replay t whole and streamed: both refuse with SUBLET_ERR_UNSUPPORTED and a
 * message naming `pool` (NULL: both succeed). */
static void replay_expect(const sublet_trace *t, const char *pool)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    for (int streamed = 0; streamed < 2; streamed++) {
        sublet_replay_result r;
        char err[1024] = "";
        sublet_status st;
        if (streamed) {
            sublet_trace_stream *ts = NULL;
            assert_int_equal(sublet_trace_stream_from_trace(t, &ts), SUBLET_OK);
            st = sublet_replay_stream(ts, &o, &r, err, sizeof err);
            sublet_trace_stream_close(ts);
        } else {
            st = sublet_replay_run(t, &o, &r, err, sizeof err);
        }
        if (!pool) {
            if (st != SUBLET_OK)
                fail_msg("replay (%s): %s", streamed ? "stream" : "whole", err);
        } else {
            assert_int_equal(st, SUBLET_ERR_UNSUPPORTED);
            if (!strstr(err, pool) || !strstr(err, "private pool"))
                fail_msg("replay (%s) refusal without '%s': %s", streamed ? "stream" : "whole",
                         pool, err);
        }
        sublet_replay_result_free(&r);
    }
}

/* Replay t (whole and streamed, the same result) under `prelude`: every pool
 * fidelity at 100 % (decisions, sizes, addresses), no row error; returns
 * the number of pools of the per-pool table and, in *priv_allocs, the
 * allocs compared in private pools. */
static size_t replay_pools_exact(const sublet_trace *t, int prelude, uint64_t *priv_allocs)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.prelude = prelude;
    o.check = 1;
    sublet_replay_result r[2];
    for (int streamed = 0; streamed < 2; streamed++) {
        char err[1024] = "";
        sublet_status st;
        if (streamed) {
            sublet_trace_stream *ts = NULL;
            assert_int_equal(sublet_trace_stream_from_trace(t, &ts), SUBLET_OK);
            st = sublet_replay_stream(ts, &o, &r[1], err, sizeof err);
            sublet_trace_stream_close(ts);
        } else {
            st = sublet_replay_run(t, &o, &r[0], err, sizeof err);
        }
        if (st != SUBLET_OK)
            fail_msg("replay (%s): %s", streamed ? "stream" : "whole", err);
        if (r[streamed].errors)
            fail_msg("replay (%s): row errors, first: %s", streamed ? "stream" : "whole",
                     r[streamed].first_error);
    }
    assert_int_equal(r[0].npools, r[1].npools);
    assert_memory_equal(r[0].pools, r[1].pools, sizeof r[0].pools);
    assert_memory_equal(&r[0].fidelity, &r[1].fidelity, sizeof r[0].fidelity);
    *priv_allocs = 0;
    uint64_t allocs = 0;
    for (size_t k = 0; k < r[0].npools; k++) {
        const sublet_replay_pool_fidelity *p = &r[0].pools[k];
        assert_int_equal(p->decisions_matched, p->allocs_compared);
        assert_int_equal(p->addresses_matched, p->allocs_compared);
        assert_int_equal(p->segment_sizes_matched, p->recorded_segment_allocs);
        assert_int_equal(p->engine_segment_allocs, p->recorded_segment_allocs);
        assert_int_equal(p->pool_id[0] | p->pool_id[1], k ? p->pool_id[0] | p->pool_id[1] : 0);
        if (k)
            *priv_allocs += p->allocs_compared;
        allocs += p->allocs_compared;
    }
    if (r[0].npools)
        assert_int_equal(allocs, r[0].fidelity.allocs_compared);
    for (int i = 0; i < 2; i++)
        sublet_replay_result_free(&r[i]);
    return r[0].npools;
}

/* Every row's pool, in order. */
static void pools_equal(const sublet_trace *a, const sublet_trace *b)
{
    assert_int_equal(sublet_trace_count(a), sublet_trace_count(b));
    for (size_t i = 0; i < sublet_trace_count(a); i++) {
        const sublet_trace_event *x = sublet_trace_at(a, i), *y = sublet_trace_at(b, i);
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->addr, y->addr);
        assert_int_equal(x->pool_id[0], y->pool_id[0]);
        assert_int_equal(x->pool_id[1], y->pool_id[1]);
    }
}

/* ---- an allocator with the default pools, a graph pool and a MemPool -------------------- */

typedef struct three {
    h_env e;
    sublet_pool_id graph, user;
    void *p[5];
} three;

static void three_init(three *t)
{
    h_env_init(&t->e, H_SIM, 80 * GiB, "");
    sublet_allocator *a = t->e.a;
    assert_int_equal(sublet_history_record(a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_NONE, 0),
                     SUBLET_OK);
    t->p[0] = h_malloc(a, 4 * MiB, 0); /* default large */
    t->p[1] = h_malloc(a, 1000, 0);    /* default small */
    /* a graph capture on stream 7 */
    assert_int_equal(sublet_pool_handle(a, SUBLET_POOL_ID_GRAPH, &t->graph), SUBLET_OK);
    assert_int_equal(sublet_pool_begin_allocate(a, t->graph, SUBLET_POOL_FILTER_STREAM, 7),
                     SUBLET_OK);
    t->p[2] = h_malloc(a, 3 * MiB, 7);
    t->p[3] = h_malloc(a, 512, 7);
    assert_int_equal(sublet_pool_end_allocate(a, t->graph), SUBLET_OK);
    /* a MemPool under use_mem_pool */
    assert_int_equal(sublet_pool_create(a, NULL, &t->user), SUBLET_OK);
    assert_int_equal(sublet_pool_begin_allocate(a, t->user, SUBLET_POOL_FILTER_THREAD, 0),
                     SUBLET_OK);
    t->p[4] = h_malloc(a, 5 * MiB, 0);
    assert_int_equal(sublet_pool_end_allocate(a, t->user), SUBLET_OK);
    CHECK(a);
}

static void three_fini(three *t)
{
    for (int i = 0; i < 5; i++)
        h_free(t->e.a, t->p[i]);
    h_env_fini(&t->e);
}

/* The engine's walk shows each segment's pool, as sublet_pool_of does. */
static void test_engine_segment_view(void **state)
{
    (void)state;
    three t;
    three_init(&t);
    seglist l;
    memset(&l, 0, sizeof l);
    sublet_segments_walk(t.e.a, on_engine_seg, &l);
    assert_int_equal(l.n, 5);
    int graph = 0, user = 0, dflt = 0;
    for (size_t i = 0; i < l.n; i++) {
        sublet_pool_id id;
        assert_int_equal(sublet_pool_of(t.e.a, (void *)(uintptr_t)l.addr[i], &id), SUBLET_OK);
        assert_int_equal(l.pool[i][0], id.first);
        assert_int_equal(l.pool[i][1], id.second);
        graph += id.first == t.graph.first && id.second == t.graph.second;
        user += id.first == t.user.first && id.second == t.user.second;
        dflt += id.first == 0 && id.second == 0;
    }
    assert_int_equal(graph, 2); /* a small and a large segment */
    assert_int_equal(user, 1);
    assert_int_equal(dflt, 2);
    assert_int_equal(t.graph.first, 1);
    assert_int_equal(t.graph.second, 0);
    assert_int_equal(t.user.first, 0);
    assert_int_equal(t.user.second, 1);
    three_fini(&t);
}

/* sublet_snapshot_take -> pickle and JSON -> parse: the same pool ids; the
 * JSON holds PyTorch's form; the trace read back carries them and is
 * refused by the replay; the CSV writer refuses; the direct snapshot from
 * the trace keeps them. */
static void test_round_trip(void **state)
{
    (void)state;
    three t;
    three_init(&t);
    seglist eng;
    memset(&eng, 0, sizeof eng);
    sublet_segments_walk(t.e.a, on_engine_seg, &eng);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_take(t.e.a, &s), SUBLET_OK);
    seglist taken = snap_segs(s);
    seglist_equal(&eng, &taken);
    char err[1024];
    for (int f = SUBLET_SNAPSHOT_PICKLE; f <= SUBLET_SNAPSHOT_JSON; f++) {
        uint8_t *buf = NULL;
        size_t n = 0;
        assert_int_equal(sublet_snapshot_encode(s, (sublet_snapshot_format)f, 0, &buf, &n, err,
                                                sizeof err),
                         SUBLET_OK);
        if (f == SUBLET_SNAPSHOT_JSON) {
            /* json.dumps of the tuples, in the key order of _snapshot() */
            char *text = malloc(n + 1);
            assert_non_null(text);
            memcpy(text, buf, n);
            text[n] = '\0';
            assert_non_null(strstr(text, "\"segment_type\": \"large\", \"segment_pool_id\": "
                                         "[1, 0], \"is_expandable\": false"));
            assert_non_null(strstr(text, "\"segment_pool_id\": [0, 1]"));
            assert_non_null(strstr(text, "\"segment_pool_id\": [0, 0]"));
            const char *seed = getenv("SUBLET_SEED_OUT");
            if (seed && *seed) {
                FILE *fp = fopen(seed, "wb");
                assert_non_null(fp);
                assert_int_equal(fwrite(buf, 1, n, fp), n);
                assert_int_equal(fclose(fp), 0);
            }
            free(text);
        }
        sublet_snapshot *back = reparse(buf, n);
        free(buf);
        seglist got = snap_segs(back);
        seglist_equal(&eng, &got);

        /* the trace: the segment_alloc rows of private segments carry the pool
         * (segment_pool_id), and so do the allocs in them (rebuilt: sublet's
         * own entries have no pool_id) */
        sublet_trace *tr = trace_of(back);
        size_t tagged = 0, allocs_tagged = 0;
        for (size_t i = 0; i < sublet_trace_count(tr); i++) {
            const sublet_trace_event *ev = sublet_trace_at(tr, i);
            if (ev->kind == SUBLET_ACT_ALLOC) {
                sublet_pool_id id;
                assert_int_equal(sublet_pool_of(t.e.a, (void *)(uintptr_t)ev->addr, &id),
                                 SUBLET_OK);
                assert_int_equal(ev->pool_id[0], id.first);
                assert_int_equal(ev->pool_id[1], id.second);
                allocs_tagged += (id.first | id.second) != 0;
                continue;
            }
            if (ev->kind != SUBLET_ACT_SEGMENT_ALLOC) {
                assert_int_equal(ev->pool_id[0] | ev->pool_id[1], 0);
                continue;
            }
            for (size_t k = 0; k < eng.n; k++)
                if (eng.addr[k] == ev->addr) {
                    assert_int_equal(ev->pool_id[0], eng.pool[k][0]);
                    assert_int_equal(ev->pool_id[1], eng.pool[k][1]);
                    tagged += (eng.pool[k][0] | eng.pool[k][1]) != 0;
                }
        }
        assert_int_equal(tagged, 3);
        assert_int_equal(allocs_tagged, 3);
        /* replayed pool by pool: the default pools, (1, 0) and (0, 1), all exact */
        uint64_t priv = 0;
        assert_int_equal(replay_pools_exact(tr, SUBLET_PRELUDE_AUTO, &priv), 3);
        assert_int_equal(priv, 3);

        /* -> CSV (a pool column) -> trace: the same pools; -> pickle -> trace: the same */
        char *csv = NULL;
        size_t cn = 0;
        assert_int_equal(sublet_trace_encode_csv(tr, &csv, &cn, err, sizeof err), SUBLET_OK);
        assert_memory_equal(csv, "seq,action,addr,size,stream,time_us,pool\r\n", 42);
        assert_non_null(strstr(csv, ",1:0\r\n"));
        assert_non_null(strstr(csv, ",0:1\r\n"));
        sublet_trace *fromcsv = NULL;
        assert_int_equal(sublet_trace_parse(csv, cn, NULL, &fromcsv, err, sizeof err),
                         SUBLET_OK);
        free(csv);
        pools_equal(tr, fromcsv);
        sublet_snapshot *again = NULL;
        assert_int_equal(sublet_snapshot_from_trace(fromcsv, NULL, &again, err, sizeof err),
                         SUBLET_OK);
        uint8_t *pk = NULL;
        size_t pn = 0;
        assert_int_equal(sublet_snapshot_encode(again, SUBLET_SNAPSHOT_PICKLE, 0, &pk, &pn, err,
                                                sizeof err),
                         SUBLET_OK);
        sublet_trace *frompk = NULL;
        assert_int_equal(sublet_trace_parse(pk, pn, NULL, &frompk, err, sizeof err), SUBLET_OK);
        free(pk);
        pools_equal(tr, frompk);
        trace_release(frompk);
        sublet_snapshot_free(again);
        trace_release(fromcsv);

        sublet_snapshot *direct = NULL;
        assert_int_equal(sublet_snapshot_from_trace(tr, NULL, &direct, err, sizeof err),
                         SUBLET_OK);
        seglist d = snap_segs(direct);
        seglist_equal(&eng, &d);
        sublet_snapshot_free(direct);
        trace_release(tr);
        sublet_snapshot_free(back);
    }
    sublet_snapshot_free(s);
    three_fini(&t);
}

/* ---- a hand-made PyTorch snapshot -------------------------------------------------------- */

/* Two final segments, no recorded event: a default one and one of MemPool
 * (0, 1), each with a live block; one trace entry with the newest
 * PyTorch's pool_id. */
static const char k_snap[] =
    "{\"segments\": ["
    "{\"device\": 0, \"address\": 1048576000, \"total_size\": 20971520, "
    "\"allocated_size\": 4194304, \"active_size\": 4194304, \"requested_size\": 4000000, "
    "\"stream\": 0, \"segment_type\": \"large\", \"segment_pool_id\": [0, 0], "
    "\"is_expandable\": false, \"blocks\": ["
    "{\"address\": 1048576000, \"size\": 4194304, \"requested_size\": 4000000, "
    "\"state\": \"active_allocated\", \"frames\": []}, "
    "{\"address\": 1052770304, \"size\": 16777216, \"requested_size\": 0, "
    "\"state\": \"inactive\", \"frames\": []}], \"frames\": []}, "
    "{\"device\": 0, \"address\": 2097152000, \"total_size\": 20971520, "
    "\"allocated_size\": 20971520, \"active_size\": 20971520, \"requested_size\": 20971520, "
    "\"stream\": 0, \"segment_type\": \"large\", \"segment_pool_id\": %s, "
    "\"is_expandable\": false, \"blocks\": ["
    "{\"address\": 2097152000, \"size\": 20971520, \"requested_size\": 20971520, "
    "\"state\": \"active_allocated\", \"frames\": []}], \"frames\": []}], "
    "\"device_traces\": [[%s]]}";

static sublet_trace *parse_snap(const char *pool, const char *entries, sublet_status want,
                                const char *want_err)
{
    char text[4096];
    snprintf(text, sizeof text, k_snap, pool, entries);
    sublet_trace *t = NULL;
    char err[512] = "";
    sublet_status st = sublet_trace_parse(text, strlen(text), NULL, &t, err, sizeof err);
    if (st != want)
        fail_msg("parse %s: %d (%s)", pool, (int)st, err);
    if (want_err && !strstr(err, want_err))
        fail_msg("parse %s: '%s' lacks '%s'", pool, err, want_err);
    sublet_snapshot *s = NULL;
    assert_int_equal(sublet_snapshot_parse(text, strlen(text), &s, err, sizeof err), want);
    if (want_err && !strstr(err, want_err))
        fail_msg("snapshot parse %s: '%s' lacks '%s'", pool, err, want_err);
    sublet_snapshot_free(s);
    return t;
}

static void test_pytorch_private_segment(void **state)
{
    (void)state;
    /* the MemPool's segment: pre_segment and pre_alloc rows keep (0, 1) */
    sublet_trace *t = parse_snap("[0, 1]", "", SUBLET_OK, NULL);
    assert_int_equal(sublet_trace_prelude_count(t), 4);
    for (size_t i = 0; i < 4; i++) {
        const sublet_trace_event *ev = sublet_trace_at(t, i);
        int priv = ev->addr >= 2097152000u;
        assert_int_equal(ev->pool_id[0], 0);
        assert_int_equal(ev->pool_id[1], priv ? 1 : 0);
    }
    /* adopted: refused (seeded segments go to the default pools); allocated:
     * the live block goes through its pool */
    replay_expect(t, "private pool (0, 1), a MemPool");
    uint64_t priv = 0;
    assert_int_equal(replay_pools_exact(t, SUBLET_PRELUDE_ALLOCATE, &priv), 2);
    char err[512];
    char *csv = NULL;
    size_t n = 0;
    assert_int_equal(sublet_trace_encode_csv(t, &csv, &n, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(csv, "pre_alloc,2097152000,20971520,0,,0:1\r\n"));
    free(csv);
    trace_release(t);

    /* a pickle-style tuple parses the same way (None: the default pools) */
    t = parse_snap("null", "", SUBLET_OK, NULL);
    for (size_t i = 0; i < sublet_trace_count(t); i++)
        assert_int_equal(sublet_trace_at(t, i)->pool_id[1], 0);
    replay_expect(t, NULL);
    /* default pools only: the CSV keeps its header */
    assert_int_equal(sublet_trace_encode_csv(t, &csv, &n, err, sizeof err), SUBLET_OK);
    assert_true(n > 37);
    assert_memory_equal(csv, "seq,action,addr,size,stream,time_us\r\n", 37);
    free(csv);
    trace_release(t);

    /* the newest PyTorch's trace entries: pool_id on a recorded row */
    t = parse_snap("[0, 0]",
                   "{\"action\": \"alloc\", \"addr\": 1052770304, \"size\": 1000, "
                   "\"stream\": 0, \"pool_id\": [3, 0], \"frames\": []}",
                   SUBLET_OK, NULL);
    const sublet_trace_event *last = sublet_trace_at(t, sublet_trace_count(t) - 1);
    assert_int_equal(last->kind, SUBLET_ACT_ALLOC);
    assert_int_equal(last->pool_id[0], 3);
    assert_int_equal(last->pool_id[1], 0);
    /* replayed in graph pool (3, 0), which holds nothing yet: the engine makes
     * a segment there (this hand-made entry says PyTorch did not, an address
     * of a default segment's free block): per pool, the mismatch is (3, 0)'s */
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    sublet_replay_result r;
    assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_OK);
    assert_int_equal(r.npools, 2);
    assert_int_equal(r.pools[0].allocs_compared, 0);
    assert_int_equal(r.pools[1].pool_id[0], 3);
    assert_int_equal(r.pools[1].pool_id[1], 0);
    assert_int_equal(r.pools[1].allocs_compared, 1);
    assert_int_equal(r.pools[1].decisions_matched, 0);
    assert_int_equal(r.pools[1].engine_segment_allocs, 1);
    assert_int_equal(r.pools[1].first_decision_mismatch, sublet_trace_count(t) - 1);
    sublet_replay_result_free(&r);
    trace_release(t);

    /* malformed ids */
    assert_null(parse_snap("\"x\"", "", SUBLET_ERR_PARSE, "segments[1].segment_pool_id"));
    assert_null(parse_snap("[1]", "", SUBLET_ERR_PARSE, "segment_pool_id"));
    assert_null(parse_snap("[1, -2]", "", SUBLET_ERR_PARSE, "segment_pool_id"));
}

/* The newest PyTorch gives every trace entry a pool_id, (0, 0) for the default pools: the
 * reader keeps those even where an address is the final segment's of a private pool.  Here
 * the default pools' expandable segment at 0x200000000000 is unmapped (its address range
 * freed), and graph pool (3, 0) reserves the same range again. */
static void test_entry_pool_ids_kept(void **state)
{
    (void)state;
    static const char text[] =
        "{\"segments\": [{\"device\": 0, \"address\": 35184372088832, \"total_size\": 2097152, "
        "\"allocated_size\": 512, \"active_size\": 512, \"requested_size\": 100, \"stream\": 7, "
        "\"segment_type\": \"small\", \"segment_pool_id\": [3, 0], \"is_expandable\": true, "
        "\"blocks\": [{\"address\": 35184372088832, \"size\": 512, \"requested_size\": 100, "
        "\"state\": \"active_allocated\", \"frames\": []}, {\"address\": 35184372089344, "
        "\"size\": 2096640, \"requested_size\": 0, \"state\": \"inactive\", \"frames\": []}], "
        "\"frames\": []}], \"device_traces\": [["
        "{\"action\": \"segment_map\", \"addr\": 35184372088832, \"size\": 2097152, "
        "\"stream\": 7, \"pool_id\": [0, 0], \"frames\": []}, "
        "{\"action\": \"alloc\", \"addr\": 35184372088832, \"size\": 4, \"stream\": 7, "
        "\"pool_id\": [0, 0], \"frames\": []}, "
        "{\"action\": \"free_requested\", \"addr\": 35184372088832, \"size\": 4, \"stream\": 7, "
        "\"pool_id\": [0, 0], \"frames\": []}, "
        "{\"action\": \"free_completed\", \"addr\": 35184372088832, \"size\": 4, \"stream\": 7, "
        "\"pool_id\": [0, 0], \"frames\": []}, "
        "{\"action\": \"segment_unmap\", \"addr\": 35184372088832, \"size\": 2097152, "
        "\"stream\": 7, \"pool_id\": [0, 0], \"frames\": []}, "
        "{\"action\": \"segment_map\", \"addr\": 35184372088832, \"size\": 2097152, "
        "\"stream\": 7, \"pool_id\": [3, 0], \"frames\": []}, "
        "{\"action\": \"alloc\", \"addr\": 35184372088832, \"size\": 100, \"stream\": 7, "
        "\"pool_id\": [3, 0], \"frames\": []}]]}";
    sublet_trace *t = NULL;
    char err[512] = "";
    assert_int_equal(sublet_trace_parse(text, sizeof text - 1, NULL, &t, err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(sublet_trace_prelude_count(t), 0);
    assert_int_equal(sublet_trace_count(t), 7);
    for (size_t i = 0; i < 7; i++) {
        const sublet_trace_event *ev = sublet_trace_at(t, i);
        assert_int_equal(ev->pool_id[0], i < 5 ? 0 : 3);
        assert_int_equal(ev->pool_id[1], 0);
    }
    /* replayed: the default pools' segment is freed by an empty_cache, the pool's alloc
     * is one more (no row error), both at the recorded address */
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    o.conf = "expandable_segments:True";
    o.prelude = SUBLET_PRELUDE_ALLOCATE;
    sublet_replay_result r;
    assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_OK);
    if (r.errors)
        fail_msg("replay: %s", r.first_error);
    assert_int_equal(r.npools, 2);
    assert_int_equal(r.pools[0].allocs_compared, 1);
    assert_int_equal(r.pools[1].allocs_compared, 1);
    assert_int_equal(r.pools[1].released_at, SUBLET_REPLAY_NONE);
    sublet_replay_result_free(&r);
    trace_release(t);
}

/* The events CSV's pool column: read whole and streamed alike; malformed
 * values and column counts are parse errors naming the line. */
static void test_csv_pool_column(void **state)
{
    (void)state;
    static const char good[] = "seq,action,addr,size,stream,time_us,pool\r\n"
                               "0,segment_alloc,4194304,20971520,7,,1:0\r\n"
                               "1,alloc,4194304,1000,7,5,1:0\r\n"
                               "2,alloc,8388608,512,0,,\r\n"
                               "3,alloc,9388608,512,0,,18446744073709551615:2\r\n";
    char err[512];
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_parse_csv(good, strlen(good), &t, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_count(t), 4);
    assert_int_equal(sublet_trace_at(t, 0)->pool_id[0], 1);
    assert_int_equal(sublet_trace_at(t, 1)->pool_id[0], 1);
    assert_int_equal(sublet_trace_at(t, 1)->time_us, 5);
    assert_int_equal(sublet_trace_at(t, 2)->pool_id[0] | sublet_trace_at(t, 2)->pool_id[1], 0);
    assert_int_equal(sublet_trace_at(t, 3)->pool_id[0], UINT64_MAX);
    assert_int_equal(sublet_trace_at(t, 3)->pool_id[1], 2);
    /* detected as an events CSV, and the stream reads the same rows */
    sublet_trace *u = NULL;
    assert_int_equal(sublet_trace_parse(good, strlen(good), NULL, &u, err, sizeof err), SUBLET_OK);
    pools_equal(t, u);
    char path[] = "/tmp/sublet_pool_csv_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(good, 1, strlen(good), fp), strlen(good));
    assert_int_equal(fclose(fp), 0);
    sublet_trace_load_options lo = {.read_chunk = 7}; /* rows cut across reads */
    sublet_trace_stream *ts = NULL;
    assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err), SUBLET_OK);
    sublet_trace_event ev[8];
    size_t got = 0;
    assert_int_equal(sublet_trace_stream_next(ts, ev, 8, &got, err, sizeof err), SUBLET_OK);
    assert_int_equal(got, 4);
    for (size_t i = 0; i < got; i++) {
        assert_int_equal(ev[i].pool_id[0], sublet_trace_at(t, i)->pool_id[0]);
        assert_int_equal(ev[i].pool_id[1], sublet_trace_at(t, i)->pool_id[1]);
    }
    sublet_trace_stream_close(ts);
    unlink(path);
    /* written back: the same text, byte for byte */
    char *csv = NULL;
    size_t n = 0;
    assert_int_equal(sublet_trace_encode_csv(t, &csv, &n, err, sizeof err), SUBLET_OK);
    assert_int_equal(n, strlen(good));
    assert_memory_equal(csv, good, n);
    free(csv);
    trace_release(u);
    trace_release(t);

    static const struct {
        const char *row, *want;
    } bad[] = {
        {"0,alloc,1,2,0,,1\n", "line 2: pool '1' is not empty or FIRST:SECOND"},
        {"0,alloc,1,2,0,,a:b\n", "line 2: pool 'a:b'"},
        {"0,alloc,1,2,0,,1:\n", "line 2: pool '1:'"},
        {"0,alloc,1,2,0,,:1\n", "line 2: pool ':1'"},
        {"0,alloc,1,2,0,,1:2:3\n", "line 2: pool '1:2:3'"},
        {"0,alloc,1,2,0,,18446744073709551616:0\n", "line 2: pool"},
        {"0,alloc,1,2,0,\n", "line 2: expected 7 columns"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[256];
        snprintf(text, sizeof text, "seq,action,addr,size,stream,time_us,pool\n%s", bad[k].row);
        t = NULL;
        err[0] = '\0';
        assert_int_equal(sublet_trace_parse_csv(text, strlen(text), &t, err, sizeof err),
                         SUBLET_ERR_PARSE);
        assert_null(t);
        if (!strstr(err, bad[k].want))
            fail_msg("row '%s': '%s' lacks '%s'", bad[k].row, err, bad[k].want);
    }
    /* a six-column CSV keeps refusing a seventh column */
    static const char six[] = "seq,action,addr,size,stream,time_us\n0,alloc,1,2,0,,1:0\n";
    assert_int_equal(sublet_trace_parse_csv(six, strlen(six), &t, err, sizeof err),
                     SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "line 2: expected 6 columns"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_segment_view),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_pytorch_private_segment),
        cmocka_unit_test(test_entry_pool_ids_kept),
        cmocka_unit_test(test_csv_pool_column),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
