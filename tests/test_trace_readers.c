/* sublet — tests of the trace readers: PyTorch snapshots (pickle, gzip, JSON)
 * with the prelude rebuilt from the final state, RMM CSV logs, Kineto chrome
 * traces, content detection, and malformed / truncated input.
 *
 * SUBLET_TESTDATA: tests/data (the committed attention and DeComFL snapshots
 *                  and the attention .events.csv).
 * SUBLET_SHARED:   ../shared; every snapshot of traces/pytorch_snapshot must
 *                  give exactly the events of its derived .events.csv, and the
 *                  Kineto trace those of its derived CSV.  Those tests skip
 *                  when the directory is absent. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "formats/json_codec.h"
#include "formats/pickle.h"
#include "formats/pyval.h"
#include "sublet/config.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"
#include "test_data.h"

static const char *const k_snapshots[] = {"cs336_attention_microbench",
                                          "cs336_lm_forward_mixed_ctx256",
                                          "cs336_lm_fullstep_fp32_ctx128",
                                          "cs336_lm_win",
                                          "decomfl_opt_zo_fl",
                                          "hf_lora8bit_finetune_notebook",
                                          "small_cnn_counterfactual"};

/* ---- helpers ------------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void drop(sublet_trace *t)
{
    sublet_trace_extras_release(t);
    sublet_trace_free(t);
}

static sublet_trace *load_any(const char *path, const sublet_trace_load_options *opt)
{
    char err[600];
    sublet_trace *t = NULL;
    sublet_status st = sublet_trace_load(path, opt, &t, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("cannot load %s: %s", path, err);
    return t;
}

static sublet_trace *parse_ok(const void *buf, size_t len, const sublet_trace_load_options *opt)
{
    char err[600];
    sublet_trace *t = NULL;
    sublet_status st = sublet_trace_parse(buf, len, opt, &t, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("parse failed (%d): %s", (int)st, err);
    assert_non_null(t);
    return t;
}

static sublet_trace *parse_str(const char *s) { return parse_ok(s, strlen(s), NULL); }

/* Parsing fails with `want` and a message holding `needle`. */
static void expect_error(const void *buf, size_t len, const sublet_trace_load_options *opt,
                         sublet_status want, const char *needle)
{
    char err[600] = "";
    sublet_trace *t = (sublet_trace *)1;
    sublet_status st = sublet_trace_parse(buf, len, opt, &t, err, sizeof err);
    if (st != want || t != NULL || !strstr(err, needle))
        fail_msg("expected status %d with '%s'; got %d: '%s'", (int)want, needle, (int)st, err);
}

static void expect_parse_error(const char *s, const char *needle)
{
    expect_error(s, strlen(s), NULL, SUBLET_ERR_PARSE, needle);
}

/* Same events, field by field (line, block_size and frames aside). */
static void assert_same_events(const sublet_trace *a, const sublet_trace *b, const char *what)
{
    if (sublet_trace_count(a) != sublet_trace_count(b) ||
        sublet_trace_prelude_count(a) != sublet_trace_prelude_count(b))
        fail_msg("%s: %zu events (%zu prelude) vs %zu (%zu)", what, sublet_trace_count(a),
                 sublet_trace_prelude_count(a), sublet_trace_count(b),
                 sublet_trace_prelude_count(b));
    for (size_t i = 0; i < sublet_trace_count(a); i++) {
        const sublet_trace_event *x = sublet_trace_at(a, i), *y = sublet_trace_at(b, i);
        if (x->kind != y->kind || x->addr != y->addr || x->size != y->size ||
            x->stream != y->stream ||
            (x->flags & SUBLET_TRACE_HAS_TIME) != (y->flags & SUBLET_TRACE_HAS_TIME) ||
            x->time_us != y->time_us)
            fail_msg("%s: event %zu differs: %s %" PRIu64 " %" PRIu64 " s%" PRIu64 " t%" PRIu64
                     " vs %s %" PRIu64 " %" PRIu64 " s%" PRIu64 " t%" PRIu64,
                     what, i, sublet_trace_kind_name(x->kind), x->addr, x->size, x->stream,
                     x->time_us, sublet_trace_kind_name(y->kind), y->addr, y->size, y->stream,
                     y->time_us);
    }
}

static void assert_event(const sublet_trace *t, size_t i, uint32_t kind, uint64_t addr,
                         uint64_t size, uint64_t stream)
{
    const sublet_trace_event *e = sublet_trace_at(t, i);
    assert_non_null(e);
    if (e->kind != kind || e->addr != addr || e->size != size || e->stream != stream)
        fail_msg("event %zu: %s %" PRIu64 " %" PRIu64 " s%" PRIu64 ", expected %s %" PRIu64
                 " %" PRIu64 " s%" PRIu64,
                 i, sublet_trace_kind_name(e->kind), e->addr, e->size, e->stream,
                 sublet_trace_kind_name(kind), addr, size, stream);
}

static uint8_t *gzip_of(const void *p, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    uint8_t *o = malloc(cap);
    assert_non_null(o);
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)n;
    z.next_out = o;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return o;
}

/* Value tree -> pickle bytes (via the JSON codec for the input text). */
static uint8_t *pickle_of_json(const char *json, size_t *len)
{
    pv_arena *a = pv_arena_create();
    pyval *root = NULL;
    char err[300];
    if (pv_json_parse((const uint8_t *)json, strlen(json), a, &root, err, sizeof err))
        fail_msg("test JSON does not parse: %s", err);
    pv_buf b = {0};
    if (pv_pickle_write(root, 0, &b, err, sizeof err))
        fail_msg("pickle_write: %s", err);
    pv_arena_destroy(a);
    *len = b.len;
    return b.data;
}

/* Parsing every prefix of buf must give OK or PARSE, never a crash. */
static void truncations(const void *buf, size_t len, size_t stride)
{
    for (size_t n = 0; n <= len; n += (n + 600 > len || n < 4096) ? 1 : stride) {
        char err[300];
        sublet_trace *t = NULL;
        sublet_status st = sublet_trace_parse(buf, n, NULL, &t, err, sizeof err);
        if (st == SUBLET_OK)
            drop(t);
        else if (st != SUBLET_ERR_PARSE)
            fail_msg("prefix of %zu bytes: status %d (%s)", n, (int)st, err);
        else
            assert_true(err[0] != '\0');
    }
}

/* ---- PyTorch snapshots vs their derived CSVs -------------------------------------- */

static void check_snapshot_vs_csv(const char *dir, const char *id)
{
    char p[4096], c[4096], err[600];
    snprintf(p, sizeof p, "%s/%s.pickle.gz", dir, id);
    snprintf(c, sizeof c, "%s/%s.events.csv", dir, id);
    sublet_trace *t = load_any(p, NULL), *csv = NULL;
    if (sublet_trace_load_csv(c, &csv, err, sizeof err) != SUBLET_OK)
        fail_msg("%s", err);
    assert_same_events(t, csv, id);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_SNAPSHOT_PICKLE);
    assert_int_equal(sublet_trace_device(t), 0);
    /* pre_allocs from the final state know their block; block >= request. */
    for (size_t i = 0; i < sublet_trace_prelude_count(t); i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        assert_int_equal(e->time_us, 0);
        if (e->kind == SUBLET_TRACE_PRE_ALLOC && e->block_size)
            assert_true(e->block_size >= e->size && e->block_size % 512 == 0);
    }
    /* Stacks: ids in range, frames readable. */
    uint32_t nst = sublet_trace_stack_count(t);
    size_t with = 0;
    for (size_t i = 0; i < sublet_trace_count(t); i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        assert_true(e->frames <= nst);
        if (e->frames) {
            const sublet_trace_frame *f = NULL;
            size_t n = sublet_trace_stack(t, e->frames, &f);
            assert_true(n > 0);
            assert_non_null(f);
            assert_non_null(f[0].filename);
            assert_non_null(f[0].name);
            with++;
        }
    }
    assert_true(with > 0);
    drop(csv);
    drop(t);
}

static void test_snapshot_testdata(void **state)
{
    (void)state;
    const char *d = testdata_dir();
    check_snapshot_vs_csv(d, "cs336_attention_microbench");

    char p[4096];
    snprintf(p, sizeof p, "%s/decomfl_opt_zo_fl.pickle.gz", d);
    sublet_trace *t = load_any(p, NULL);
    assert_int_equal(sublet_trace_count(t), 23105);
    assert_int_equal(sublet_trace_prelude_count(t), 0);
    assert_int_equal(sublet_trace_count_kind(t, SUBLET_ACT_SEGMENT_ALLOC), 61);
    assert_int_equal(sublet_trace_count_kind(t, SUBLET_ACT_ALLOC), 7946);
    assert_int_equal(sublet_trace_count_kind(t, SUBLET_ACT_FREE_COMPLETED), 7549);
    for (size_t i = 0; i < sublet_trace_count(t); i++) /* every DeComFL entry has a stack */
        assert_true(sublet_trace_at(t, i)->frames != 0);
    assert_true(sublet_trace_stack_count(t) < sublet_trace_count(t)); /* interned */
    const char *set = sublet_trace_settings(t);
    assert_non_null(set);
    assert_string_equal(set, ""); /* recorded with the defaults */
    assert_int_equal(sublet_trace_device_memory(t), 0);
    sublet_trace_info info;
    assert_int_equal(sublet_trace_info_get(t, &info), SUBLET_OK);
    assert_int_equal(info.peak_reserved_bytes, 1897922560);
    drop(t);
}

static void test_snapshot_shared_all(void **state)
{
    (void)state;
    const char *dir = shared_dir("pytorch_snapshot");
    if (!dir)
        skip();
    for (size_t i = 0; i < sizeof k_snapshots / sizeof *k_snapshots; i++)
        check_snapshot_vs_csv(dir, k_snapshots[i]);
    /* hf_lora8bit: older PyTorch, no allocator_settings and no time_us. */
    char p[4096];
    snprintf(p, sizeof p, "%s/hf_lora8bit_finetune_notebook.pickle.gz", dir);
    sublet_trace *t = load_any(p, NULL);
    assert_null(sublet_trace_settings(t));
    assert_int_equal(sublet_trace_at(t, sublet_trace_count(t) - 1)->flags & SUBLET_TRACE_HAS_TIME,
                     0);
    drop(t);
}

/* The JSON form of a snapshot gives the same trace as its pickle. */
static void json_matches_pickle(const char *path)
{
    size_t gzlen;
    uint8_t *gz = slurp(path, &gzlen);
    pv_arena *a = pv_arena_create();
    pyval *root = NULL;
    char err[600];
    if (pv_pickle_parse(gz, gzlen, a, &root, err, sizeof err))
        fail_msg("%s", err);
    pv_buf js = {0};
    if (pv_json_write(root, PV_JSON_SPACES, &js, err, sizeof err))
        fail_msg("%s", err);
    sublet_trace *tp = parse_ok(gz, gzlen, NULL), *tj = parse_ok(js.data, js.len, NULL);
    assert_int_equal(sublet_trace_source_format(tj), SUBLET_FORMAT_SNAPSHOT_JSON);
    assert_int_equal(sublet_trace_detect(js.data, js.len), SUBLET_FORMAT_SNAPSHOT_JSON);
    assert_same_events(tp, tj, path);
    assert_int_equal(sublet_trace_stack_count(tp), sublet_trace_stack_count(tj));
    for (size_t i = 0; i < sublet_trace_count(tp); i++) {
        const sublet_trace_event *x = sublet_trace_at(tp, i), *y = sublet_trace_at(tj, i);
        assert_int_equal(x->block_size, y->block_size);
        const sublet_trace_frame *fx, *fy;
        size_t nx = sublet_trace_stack(tp, x->frames, &fx),
               ny = sublet_trace_stack(tj, y->frames, &fy);
        assert_int_equal(nx, ny);
        for (size_t k = 0; k < nx; k++) {
            assert_string_equal(fx[k].filename, fy[k].filename);
            assert_string_equal(fx[k].name, fy[k].name);
            assert_int_equal(fx[k].line, fy[k].line);
        }
    }
    /* gzip'd JSON too */
    size_t zlen;
    uint8_t *z = gzip_of(js.data, js.len, &zlen);
    sublet_trace *tz = parse_ok(z, zlen, NULL);
    assert_same_events(tp, tz, "gzip json");
    assert_int_equal(sublet_trace_detect(z, zlen), SUBLET_FORMAT_SNAPSHOT_JSON);
    drop(tz);
    free(z);
    drop(tp);
    drop(tj);
    pv_buf_free(&js);
    pv_arena_destroy(a);
    free(gz);
}

static void test_snapshot_json(void **state)
{
    (void)state;
    char p[4096];
    snprintf(p, sizeof p, "%s/cs336_attention_microbench.pickle.gz", testdata_dir());
    json_matches_pickle(p);
    const char *dir = shared_dir("pytorch_snapshot");
    if (dir) {
        snprintf(p, sizeof p, "%s/cs336_lm_win.pickle.gz", dir);
        json_matches_pickle(p);
    }
}

/* ---- a hand-made snapshot: every rule of the prelude rebuild -------------------------- */

static const char k_snap[] =
    "{\"segments\": ["
    " {\"device\": 1, \"address\": 1048576, \"total_size\": 2097152, \"stream\": 0,"
    "  \"is_expandable\": false, \"frames\": [], \"blocks\": ["
    "   {\"address\": 1048576, \"size\": 1024, \"requested_size\": 1000, \"state\": "
    "\"active_allocated\","
    "    \"frames\": [{\"filename\": \"a.py\", \"line\": 3, \"name\": \"f\"}]},"
    "   {\"address\": 1049600, \"size\": 512, \"requested_size\": 500, \"state\": "
    "\"active_allocated\", \"frames\": []},"
    "   {\"address\": 1050112, \"size\": 2096128, \"requested_size\": 0, \"state\": \"inactive\", "
    "\"frames\": []}]},"
    " {\"device\": 1, \"address\": 8388608, \"total_size\": 4194304, \"stream\": 7, \"blocks\": ["
    "   {\"address\": 8388608, \"size\": 4194304, \"requested_size\": 4194304, \"state\": "
    "\"active_pending_free\"}]},"
    " {\"device\": 0, \"address\": 999, \"total_size\": 512, \"stream\": 0, \"blocks\": ["
    "   {\"address\": 999, \"size\": 512, \"state\": \"active_allocated\"}]},"
    " {\"device\": 1, \"address\": 33554432, \"total_size\": 6291456, \"stream\": 0, "
    "\"is_expandable\": true,"
    "  \"blocks\": [{\"address\": 33554432, \"size\": 6291456, \"requested_size\": 0, \"state\": "
    "\"inactive\"}]}],"
    " \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 5, \"size\": 5, \"stream\": 0}], ["
    "  {\"action\": \"free_requested\", \"addr\": 4096, \"size\": 100, \"stream\": 3, \"time_us\": "
    "10,"
    "   \"frames\": [{\"filename\": \"b.py\", \"line\": 1, \"name\": \"g\"}]},"
    "  {\"action\": \"free_completed\", \"addr\": 4096, \"size\": 100, \"stream\": 3, \"time_us\": "
    "11,"
    "   \"frames\": [{\"filename\": \"b.py\", \"line\": 1, \"name\": \"g\"}]},"
    "  {\"action\": \"segment_free\", \"addr\": 65536, \"size\": 2097152, \"stream\": 0, "
    "\"time_us\": 12},"
    "  {\"action\": \"annotate\", \"stage\": \"x\"},"
    "  {\"action\": \"segment_alloc\", \"addr\": 8388608, \"size\": 4194304, \"stream\": 7, "
    "\"time_us\": 13},"
    "  {\"action\": \"alloc\", \"addr\": 8388608, \"size\": 4194304, \"stream\": 7, \"time_us\": "
    "14},"
    "  {\"action\": \"free_requested\", \"addr\": 8388608, \"size\": 4194304, \"stream\": 7, "
    "\"time_us\": 15},"
    "  {\"action\": \"alloc\", \"addr\": 1049600, \"size\": 500, \"stream\": 0, \"time_us\": 16,"
    "   \"frames\": [{\"filename\": \"b.py\", \"line\": 1, \"name\": \"g\"}]},"
    "  {\"action\": \"segment_map\", \"addr\": 35651584, \"size\": 2097152, \"stream\": 0, "
    "\"time_us\": 17},"
    "  {\"action\": \"oom\", \"device_free\": 123456, \"size\": 999424, \"stream\": 0, "
    "\"time_us\": 18},"
    "  {\"action\": \"snapshot\", \"addr\": 0, \"size\": 0, \"stream\": 0, \"frames\": null}]],"
    " \"allocator_settings\": {\"PYTORCH_CUDA_ALLOC_CONF\": \"\", \"max_split_size\": 209715200,"
    "  \"garbage_collection_threshold\": 0.0, \"expandable_segments\": true,"
    "  \"roundup_power2_divisions\": {\"1\": 4, \"2\": 4, \"4\": 0}}}";

static void check_synthetic(sublet_trace *t)
{
    assert_int_equal(sublet_trace_device(t), 1);
    assert_int_equal(sublet_trace_count(t), 16);
    assert_int_equal(sublet_trace_prelude_count(t), 6);
    /* pre_segments by address: the orphan segment_free, the final segment the
     * trace never made, and the expandable one less the 2 MiB the trace
     * mapped in its middle: the two ranges on either side. */
    assert_event(t, 0, SUBLET_TRACE_PRE_SEGMENT, 65536, 2097152, 0);
    assert_event(t, 1, SUBLET_TRACE_PRE_SEGMENT, 1048576, 2097152, 0);
    assert_event(t, 2, SUBLET_TRACE_PRE_SEGMENT, 33554432, 2097152, 0);
    assert_int_equal(sublet_trace_at(t, 2)->flags, SUBLET_TRACE_EXPANDABLE);
    assert_int_equal(sublet_trace_at(t, 1)->flags, 0);
    assert_event(t, 3, SUBLET_TRACE_PRE_SEGMENT, 37748736, 2097152, 0);
    /* pre_allocs: the orphan free (no block size), the unproduced final block. */
    assert_event(t, 4, SUBLET_TRACE_PRE_ALLOC, 4096, 100, 3);
    assert_int_equal(sublet_trace_at(t, 4)->block_size, 0);
    assert_event(t, 5, SUBLET_TRACE_PRE_ALLOC, 1048576, 1000, 0);
    assert_int_equal(sublet_trace_at(t, 5)->block_size, 1024);
    assert_event(t, 6, SUBLET_ACT_FREE_REQUESTED, 4096, 100, 3);
    assert_int_equal(sublet_trace_at(t, 6)->time_us, 10);
    assert_int_equal(sublet_trace_at(t, 6)->line, 1);
    assert_event(t, 7, SUBLET_ACT_FREE_COMPLETED, 4096, 100, 3);
    assert_event(t, 8, SUBLET_ACT_SEGMENT_FREE, 65536, 2097152, 0);
    assert_event(t, 9, SUBLET_ACT_SEGMENT_ALLOC, 8388608, 4194304, 7);
    assert_int_equal(sublet_trace_at(t, 9)->line, 5); /* record number, annotate counted */
    assert_event(t, 10, SUBLET_ACT_ALLOC, 8388608, 4194304, 7);
    assert_event(t, 11, SUBLET_ACT_FREE_REQUESTED, 8388608, 4194304, 7);
    assert_event(t, 12, SUBLET_ACT_ALLOC, 1049600, 500, 0);
    assert_event(t, 13, SUBLET_ACT_SEGMENT_MAP, 35651584, 2097152, 0);
    assert_event(t, 14, SUBLET_ACT_OOM, 123456, 999424, 0);
    assert_event(t, 15, SUBLET_ACT_SNAPSHOT, 0, 0, 0);
    assert_int_equal(sublet_trace_at(t, 15)->flags & SUBLET_TRACE_HAS_TIME, 0);
    assert_int_equal(sublet_trace_at(t, 14)->time_us, 18);
    /* stacks: "g" three times is one stack; "f" another. */
    assert_int_equal(sublet_trace_stack_count(t), 2);
    uint32_t g = sublet_trace_at(t, 6)->frames;
    assert_true(g != 0);
    assert_int_equal(sublet_trace_at(t, 4)->frames, g);
    assert_int_equal(sublet_trace_at(t, 7)->frames, g);
    assert_int_equal(sublet_trace_at(t, 12)->frames, g);
    assert_int_equal(sublet_trace_at(t, 8)->frames, 0);
    const sublet_trace_frame *f = NULL;
    assert_int_equal(sublet_trace_stack(t, sublet_trace_at(t, 5)->frames, &f), 1);
    assert_string_equal(f[0].filename, "a.py");
    assert_string_equal(f[0].name, "f");
    assert_int_equal(f[0].line, 3);
    assert_int_equal(sublet_trace_stack(t, 0, &f), 0);
    assert_null(f);
    assert_int_equal(sublet_trace_stack(t, 99, &f), 0);
    assert_string_equal(sublet_trace_settings(t),
                        "max_split_size_mb:200,roundup_power2_divisions:[1:4,2:4,4:0,8:0,16:0,"
                        "32:0,64:0,128:0,256:0,512:0,1024:0,2048:0,4096:0,8192:0,16384:0,"
                        "32768:0],expandable_segments:True");
    sublet_settings set;
    sublet_settings_default(&set);
    char err[300];
    if (sublet_settings_parse(&set, sublet_trace_settings(t), err, sizeof err) != SUBLET_OK)
        fail_msg("rebuilt settings do not parse: %s", err);
    assert_int_equal(set.max_split_size, 200 * (UINT64_C(1) << 20));
    assert_int_equal(set.roundup_power2_divisions[0], 4);
    assert_int_equal(set.roundup_power2_divisions[1], 4);
    assert_int_equal(set.roundup_power2_divisions[2], 0);
    assert_true(set.expandable_segments);
}

static void test_snapshot_synthetic(void **state)
{
    (void)state;
    sublet_trace *t = parse_str(k_snap);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_SNAPSHOT_JSON);
    check_synthetic(t);

    /* As .events.csv and back: every event and flag kept, the expandable
     * pre_segment as the action pre_segment_expandable. */
    char *csv = NULL, cerr[256];
    size_t clen = 0;
    assert_int_equal(sublet_trace_encode_csv(t, &csv, &clen, cerr, sizeof cerr), SUBLET_OK);
    assert_non_null(strstr(csv, "\r\n2,pre_segment_expandable,33554432,2097152,0,\r\n"));
    assert_non_null(strstr(csv, "\r\n1,pre_segment,1048576,2097152,0,\r\n"));
    sublet_trace *u = NULL;
    assert_int_equal(sublet_trace_parse_csv(csv, clen, &u, cerr, sizeof cerr), SUBLET_OK);
    assert_int_equal(sublet_trace_count(u), sublet_trace_count(t));
    for (size_t i = 0; i < sublet_trace_count(t); i++) {
        const sublet_trace_event *a = sublet_trace_at(t, i), *b = sublet_trace_at(u, i);
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(a->flags, b->flags);
        assert_int_equal(a->addr, b->addr);
        assert_int_equal(a->size, b->size);
        assert_int_equal(a->stream, b->stream);
    }
    drop(u);
    free(csv);
    drop(t);

    size_t plen, zlen;
    uint8_t *pk = pickle_of_json(k_snap, &plen);
    t = parse_ok(pk, plen, NULL);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_SNAPSHOT_PICKLE);
    check_synthetic(t);
    drop(t);
    uint8_t *z = gzip_of(pk, plen, &zlen);
    t = parse_ok(z, zlen, NULL);
    check_synthetic(t);
    drop(t);

    /* Device 0 on request: its own events and segments only. */
    sublet_trace_load_options o = {.pick_device = 1, .device = 0};
    t = parse_ok(k_snap, strlen(k_snap), &o);
    assert_int_equal(sublet_trace_count(t), 3);
    assert_event(t, 0, SUBLET_TRACE_PRE_SEGMENT, 999, 512, 0);
    assert_event(t, 1, SUBLET_TRACE_PRE_ALLOC, 999, 512, 0);
    assert_int_equal(sublet_trace_at(t, 1)->block_size, 512);
    assert_event(t, 2, SUBLET_ACT_ALLOC, 5, 5, 0);
    drop(t);
    o.device = 2;
    expect_error(k_snap, strlen(k_snap), &o, SUBLET_ERR_INVALID_ARGUMENT, "device 2");
    o.device = -1;
    expect_error(k_snap, strlen(k_snap), &o, SUBLET_ERR_INVALID_ARGUMENT, "device -1");

    /* The raw config string wins when the snapshot kept one. */
    t = parse_str(
        "{\"segments\": [], \"device_traces\": [], \"allocator_settings\":"
        " {\"PYTORCH_CUDA_ALLOC_CONF\": \"max_split_size_mb:64\", \"max_split_size\": 1}}");
    assert_string_equal(sublet_trace_settings(t), "max_split_size_mb:64");
    assert_int_equal(sublet_trace_count(t), 0);
    drop(t);
    /* memory_snapshot(): a bare list of segments. */
    t = parse_str("[{\"device\": 0, \"address\": 4096, \"total_size\": 2097152, \"stream\": 0,"
                  " \"blocks\": [{\"address\": 4096, \"size\": 2097152, \"requested_size\": 7,"
                  " \"state\": \"active_allocated\"}]}]");
    assert_int_equal(sublet_trace_count(t), 2);
    assert_event(t, 1, SUBLET_TRACE_PRE_ALLOC, 4096, 7, 0);
    assert_null(sublet_trace_settings(t));
    drop(t);
    free(z);
    free(pk);
}

/* ---- malformed snapshots ---------------------------------------------------------------- */

static const struct {
    const char *json, *msg;
} k_bad_snaps[] = {
    {"{\"segments\": 5, \"device_traces\": []}", "segments: expected a list, found int"},
    {"{\"device_traces\": []}", "segments: missing"},
    {"{\"segments\": []}", "device_traces: missing"},
    {"{\"segments\": [], \"device_traces\": [{}]}",
     "device_traces[0]: expected a list, found dict"},
    {"{\"segments\": [], \"device_traces\": [[7]]}",
     "device_traces[0][0]: expected a dict, found int"},
    {"{\"segments\": [], \"device_traces\": [[{\"addr\": 1, \"size\": 2, \"stream\": 0}]]}",
     "device_traces[0][0].action: missing"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": 3, \"addr\": 1, \"size\": 2, "
     "\"stream\": 0}]]}",
     "device_traces[0][0].action: expected a str, found int"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"bogus\", \"addr\": 1, \"size\": 2, "
     "\"stream\": 0}]]}",
     "device_traces[0][0].action: unknown action 'bogus'"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"pre_alloc\", \"addr\": 1, \"size\": "
     "2, \"stream\": 0}]]}",
     "device_traces[0][0].action: unknown action 'pre_alloc'"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 2, "
     "\"stream\": 0},"
     " {\"action\": \"alloc\", \"addr\": 1, \"size\": -5, \"stream\": 0}]]}",
     "device_traces[0][1].size: expected a non-negative int, found -5"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": "
     "\"9\", \"stream\": 0}]]}",
     "device_traces[0][0].size: expected a non-negative int, found str"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"stream\": "
     "0}]]}",
     "device_traces[0][0].size: missing"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"size\": 1, \"stream\": "
     "0}]]}",
     "device_traces[0][0].addr: missing"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 1}]]}",
     "device_traces[0][0].stream: missing"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 1, "
     "\"stream\": 0,"
     " \"time_us\": \"x\"}]]}",
     "device_traces[0][0].time_us: expected a non-negative number, found str"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 1, "
     "\"stream\": 0,"
     " \"frames\": [{\"filename\": 3}]}]]}",
     "device_traces[0][0].frames[0].filename: expected a str, found int"},
    {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 1, "
     "\"stream\": 0,"
     " \"frames\": 4}]]}",
     "device_traces[0][0].frames: expected a list, found int"},
    {"{\"segments\": [{\"device\": 0, \"address\": 0, \"total_size\": 1, \"stream\": 0, "
     "\"blocks\": 7}],"
     " \"device_traces\": []}",
     "segments[0].blocks: expected a list, found int"},
    {"{\"segments\": [{\"device\": 0, \"address\": 0, \"total_size\": 1, \"stream\": 0,"
     " \"blocks\": [{\"address\": 0, \"size\": 1}]}], \"device_traces\": []}",
     "segments[0].blocks[0].state: missing"},
    {"{\"segments\": [{\"device\": \"0\", \"address\": 0, \"total_size\": 1, \"stream\": 0, "
     "\"blocks\": []}],"
     " \"device_traces\": []}",
     "segments[0].device: expected an int, found str"},
    {"{\"segments\": [{\"device\": 0, \"total_size\": 1, \"stream\": 0, \"blocks\": []}], "
     "\"device_traces\": []}",
     "segments[0].address: missing"},
    {"{\"segments\": [], \"device_traces\": [], \"allocator_settings\": 3}",
     "allocator_settings: expected a dict, found int"},
};

static void test_snapshot_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_bad_snaps / sizeof *k_bad_snaps; i++) {
        expect_parse_error(k_bad_snaps[i].json, k_bad_snaps[i].msg);
        size_t n;
        uint8_t *pk = pickle_of_json(k_bad_snaps[i].json, &n); /* same path from a pickle */
        expect_error(pk, n, NULL, SUBLET_ERR_PARSE, k_bad_snaps[i].msg);
        free(pk);
    }
    /* A pickle of something that is not a snapshot. */
    size_t n;
    uint8_t *pk = pickle_of_json("5", &n);
    expect_error(pk, n, NULL, SUBLET_ERR_PARSE,
                 "snapshot: expected a dict (or a list of segments), found int");
    free(pk);
    /* Truncated pickle (inflated) and gzip: byte offsets. */
    char p[4096];
    snprintf(p, sizeof p, "%s/cs336_attention_microbench.pickle.gz", testdata_dir());
    size_t zlen;
    uint8_t *z = slurp(p, &zlen);
    expect_error(z, zlen / 2, NULL, SUBLET_ERR_PARSE, "gzip byte");
    free(z);
    pk = pickle_of_json(k_snap, &n);
    expect_error(pk, n / 2, NULL, SUBLET_ERR_PARSE, "pickle: byte ");
    free(pk);
    /* JSON syntax errors name line, column and byte. */
    expect_parse_error("{\"segments\": [", "byte 14");
    expect_parse_error("{\"segments\": [], \"device_traces\": [] x}", "byte");
    expect_parse_error("{\"foo\": 1}", "none of the keys traceEvents");
    expect_parse_error("[]", "empty top-level list");
    expect_parse_error("[1, 2]", "neither a list of snapshot segments nor of trace events");
}

/* ---- RMM --------------------------------------------------------------------------------- */

static const char k_rmm[] =
    "Thread,Time,Action,Pointer,Size,Stream\n"
    "140386766759744,11:14:32.519226,allocate,0x7fae58000000,1000,0x0\n"
    "140386766759744,11:14:32.519300,allocate,0x7fae58000400,2048,0x5a\r\n"
    "140386766759744,11:14:32.519400,free,0x7fae58000000,1000,0x0\n"
    "\n"
    "140386766759745,11:14:32.5195,free,0x7fae00000000,64,0\n"
    "140386766759744,23:59:59.999999,allocate failure,(nil),1099511627776,0x0\n"
    "140386766759744,00:00:00:000001,free,0x7fae58000400,2048,0x5a";

static void test_rmm(void **state)
{
    (void)state;
    sublet_trace *t = parse_str(k_rmm);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_RMM_CSV);
    assert_int_equal(sublet_trace_detect(k_rmm, strlen(k_rmm)), SUBLET_FORMAT_RMM_CSV);
    assert_int_equal(sublet_trace_count(t), 10);
    assert_int_equal(sublet_trace_prelude_count(t), 1);
    assert_event(t, 0, SUBLET_TRACE_PRE_ALLOC, 0x7fae00000000, 64, 0);
    assert_event(t, 1, SUBLET_ACT_ALLOC, 0x7fae58000000, 1000, 0);
    assert_int_equal(sublet_trace_at(t, 1)->time_us, UINT64_C(40472519226));
    assert_int_equal(sublet_trace_at(t, 1)->line, 2);
    assert_event(t, 2, SUBLET_ACT_ALLOC, 0x7fae58000400, 2048, 0x5a);
    assert_event(t, 3, SUBLET_ACT_FREE_REQUESTED, 0x7fae58000000, 1000, 0);
    assert_event(t, 4, SUBLET_ACT_FREE_COMPLETED, 0x7fae58000000, 1000, 0);
    assert_event(t, 5, SUBLET_ACT_FREE_REQUESTED, 0x7fae00000000, 64, 0);
    assert_int_equal(sublet_trace_at(t, 5)->time_us, UINT64_C(40472519500));
    assert_event(t, 6, SUBLET_ACT_FREE_COMPLETED, 0x7fae00000000, 64, 0);
    assert_event(t, 7, SUBLET_ACT_OOM, 0, UINT64_C(1099511627776), 0);
    assert_event(t, 8, SUBLET_ACT_FREE_REQUESTED, 0x7fae58000400, 2048, 0x5a);
    assert_event(t, 9, SUBLET_ACT_FREE_COMPLETED, 0x7fae58000400, 2048, 0x5a);
    assert_int_equal(sublet_trace_at(t, 9)->time_us, UINT64_C(86400000000) + 1); /* next day */
    assert_int_equal(sublet_trace_at(t, 9)->line, 8);
    drop(t);

    /* Epoch-seconds times; unparsable times are simply absent. */
    t = parse_str("Thread,Time,Action,Pointer,Size,Stream\n"
                  "1,1634567890.234567,allocate,0x10,16,0x0\n"
                  "1,noon,deallocate,0x10,16,0x0\n");
    assert_int_equal(sublet_trace_count(t), 3);
    assert_int_equal(sublet_trace_at(t, 0)->time_us, UINT64_C(1634567890234567));
    assert_int_equal(sublet_trace_at(t, 1)->flags & SUBLET_TRACE_HAS_TIME, 0);
    drop(t);
    /* Header only: an empty trace. */
    t = parse_str("Thread,Time,Action,Pointer,Size,Stream\r\n");
    assert_int_equal(sublet_trace_count(t), 0);
    drop(t);

    const char *h = "Thread,Time,Action,Pointer,Size,Stream\n";
    char buf[512];
    static const struct {
        const char *row, *msg;
    } bad[] = {
        {"1,11:00:00.0,allocate,0x10,16\n", "line 2: expected 6 columns"},
        {"1,11:00:00.0,allocate,0x10,16,0,7\n", "line 2: expected 6 columns"},
        {"1,11:00:00.0,malloc,0x10,16,0\n", "line 2: unknown action 'malloc'"},
        {"1,11:00:00.0,allocate,0xZZ,16,0\n", "line 2: pointer '0xZZ'"},
        {"1,11:00:00.0,allocate,0x10,-1,0\n", "line 2: size '-1' is not a decimal number"},
        {"1,11:00:00.0,allocate,0x10,99999999999999999999,0\n",
         "line 2: size '99999999999999999999' does not fit"},
        {"1,11:00:00.0,allocate,0x10,1,0\n1,x,free,0x10,1,s\n", "line 3: stream 's'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(buf, sizeof buf, "%s%s", h, bad[i].row);
        expect_parse_error(buf, bad[i].msg);
    }
    char e[300];
    sublet_trace *o = NULL;
    assert_int_equal(sublet_trace_parse_rmm("Thread,Time\n", 12, &o, e, sizeof e),
                     SUBLET_ERR_PARSE);
    assert_non_null(strstr(e, "line 1: expected the header"));
    assert_int_equal(sublet_trace_parse_rmm("", 0, &o, e, sizeof e), SUBLET_ERR_PARSE);
    assert_non_null(strstr(e, "line 1: empty input"));
    assert_null(o);
}

/* ---- Kineto ---------------------------------------------------------------------------------- */

static const char k_kineto[] =
    "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"totalGlobalMem\": 1000},"
    " {\"id\": 1, \"totalGlobalMem\": 34089730048}], \"traceEvents\": ["
    " {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"ts\": 5, \"dur\": 3, "
    "\"args\": {}},"
    " {\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 20, \"args\": {\"Ev Idx\": 7, \"Device "
    "Type\": 1,"
    "  \"Device Id\": 1, \"Addr\": 4096, \"Bytes\": 512, \"Total Allocated\": 1, \"Total "
    "Reserved\": 2}},"
    " {\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 20, \"args\": {\"Ev Idx\": 5, \"Device "
    "Type\": 1,"
    "  \"Device Id\": 1, \"Addr\": 8192, \"Bytes\": -256}},"
    " {\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 10.5, \"args\": {\"Ev Idx\": 9, \"Device "
    "Type\": 0,"
    "  \"Device Id\": -1, \"Addr\": 1, \"Bytes\": 64}},"
    " {\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 30, \"args\": {\"Ev Idx\": 8, \"Device "
    "Type\": 1,"
    "  \"Device Id\": 1, \"Addr\": 4096, \"Bytes\": -512}},"
    " {\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 25, \"args\": {\"Ev Idx\": 1, \"Device "
    "Type\": 1,"
    "  \"Device Id\": 0, \"Addr\": 777, \"Bytes\": 100}},"
    " {\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 15.75, \"args\": {\"Ev Idx\": 2, \"Device "
    "Type\": 1,"
    "  \"Device Id\": 1, \"Addr\": 12288, \"Bytes\": 1024}}]}";

static void test_kineto_synthetic(void **state)
{
    (void)state;
    assert_int_equal(sublet_trace_detect(k_kineto, strlen(k_kineto)), SUBLET_FORMAT_KINETO_JSON);
    sublet_trace *t = parse_str(k_kineto);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_KINETO_JSON);
    assert_int_equal(sublet_trace_device(t), 1);
    assert_int_equal(sublet_trace_device_memory(t), UINT64_C(34089730048));
    assert_int_equal(sublet_trace_count(t), 7);
    assert_int_equal(sublet_trace_prelude_count(t), 1);
    assert_event(t, 0, SUBLET_TRACE_PRE_ALLOC, 8192, 256, 0);
    assert_event(t, 1, SUBLET_ACT_ALLOC, 12288, 1024, 0);
    assert_int_equal(sublet_trace_at(t, 1)->time_us, 15);
    assert_event(t, 2, SUBLET_ACT_FREE_REQUESTED, 8192, 256, 0);
    assert_event(t, 3, SUBLET_ACT_FREE_COMPLETED, 8192, 256, 0);
    assert_event(t, 4, SUBLET_ACT_ALLOC, 4096, 512, 0);
    assert_event(t, 5, SUBLET_ACT_FREE_REQUESTED, 4096, 512, 0);
    assert_event(t, 6, SUBLET_ACT_FREE_COMPLETED, 4096, 512, 0);
    assert_int_equal(sublet_trace_at(t, 6)->time_us, 30);
    drop(t);
    sublet_trace_load_options o = {.pick_device = 1, .device = 0};
    t = parse_ok(k_kineto, strlen(k_kineto), &o);
    assert_int_equal(sublet_trace_count(t), 1);
    assert_event(t, 0, SUBLET_ACT_ALLOC, 777, 100, 0);
    assert_int_equal(sublet_trace_device_memory(t), 1000);
    drop(t);
    /* The bare-array form of a chrome trace. */
    t = parse_str(
        "[{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 1, \"args\": {\"Device Type\": 1,"
        " \"Device Id\": 0, \"Addr\": 64, \"Bytes\": 8}},"
        " {\"ph\": \"i\", \"name\": \"[memory]\", \"args\": {\"Device Type\": 1,"
        " \"Device Id\": 0, \"Addr\": 64, \"Bytes\": -8}}]");
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_KINETO_JSON);
    /* No ts sorts as 0 (first), and has no time: here a free before any alloc. */
    assert_int_equal(sublet_trace_count(t), 4);
    assert_int_equal(sublet_trace_prelude_count(t), 1);
    assert_event(t, 1, SUBLET_ACT_FREE_REQUESTED, 64, 8, 0);
    assert_int_equal(sublet_trace_at(t, 1)->flags & SUBLET_TRACE_HAS_TIME, 0);
    assert_event(t, 3, SUBLET_ACT_ALLOC, 64, 8, 0);
    assert_int_equal(sublet_trace_at(t, 3)->time_us, 1);
    drop(t);

    expect_parse_error("{\"traceEvents\": {}}", "traceEvents: expected a list, found dict");
    expect_parse_error("{\"traceEvents\": [3]}", "traceEvents[0]: expected a dict, found int");
    expect_parse_error(
        "{\"traceEvents\": [{\"name\": \"[memory]\", \"ts\": 1, \"args\": {\"Device Type\": 1,"
        " \"Device Id\": 0, \"Addr\": \"x\", \"Bytes\": 1}}]}",
        "traceEvents[0].args.Addr: expected a non-negative int, found str");
    expect_parse_error(
        "{\"traceEvents\": [{\"name\": \"x\"}, {\"name\": \"[memory]\", \"ts\": 1, \"args\":"
        " {\"Device Type\": 1, \"Device Id\": 0, \"Addr\": 5}}]}",
        "traceEvents[1].args.Bytes: missing");
    expect_parse_error(
        "{\"traceEvents\": [{\"name\": \"[memory]\", \"ts\": \"x\", \"args\": {\"Device Type\": 1,"
        " \"Device Id\": 0, \"Addr\": 5, \"Bytes\": 1}}]}",
        "traceEvents[0].ts: expected a number, found str");
    expect_parse_error("{\"traceEvents\": [{\"name\": \"[memory]\", \"ts\": 1}]}",
                       "traceEvents[0].args: missing");
}

static void test_kineto_shared(void **state)
{
    (void)state;
    const char *dir = shared_dir("kineto");
    if (!dir)
        skip();
    char p[4096];
    snprintf(p, sizeof p, "%s/ddp_training_v100_rank1.pt.trace.json.gz", dir);
    sublet_trace *t = load_any(p, NULL);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_KINETO_JSON);
    assert_int_equal(sublet_trace_device(t), 1);
    assert_int_equal(sublet_trace_device_memory(t), UINT64_C(34089730048));
    snprintf(p, sizeof p, "%s/ddp_training_v100_rank1.gpu_events.csv", dir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char line[512];
    assert_non_null(fgets(line, sizeof line, f)); /* header */
    size_t i = sublet_trace_prelude_count(t), rows = 0;
    assert_int_equal(i, 0);
    while (fgets(line, sizeof line, f)) {
        char act[16];
        uint64_t addr, size, ts;
        if (sscanf(line, "%*[^,],%15[^,],%" SCNu64 ",%" SCNu64 ",%*[^,],%*[^,],%*[^,],%" SCNu64,
                   act, &addr, &size, &ts) != 4)
            fail_msg("bad CSV line %s", line);
        rows++;
        if (!strcmp(act, "alloc")) {
            assert_event(t, i, SUBLET_ACT_ALLOC, addr, size, 0);
            assert_int_equal(sublet_trace_at(t, i++)->time_us, ts);
        } else {
            assert_string_equal(act, "free");
            assert_event(t, i, SUBLET_ACT_FREE_REQUESTED, addr, size, 0);
            assert_int_equal(sublet_trace_at(t, i++)->time_us, ts);
            assert_event(t, i++, SUBLET_ACT_FREE_COMPLETED, addr, size, 0);
        }
    }
    fclose(f);
    assert_int_equal(rows, 26770);
    assert_int_equal(i, sublet_trace_count(t));
    drop(t);
}

/* ---- detection, unknown input, files ------------------------------------------------------- */

static void test_detect(void **state)
{
    (void)state;
    const char *csv = "seq,action,addr,size,stream,time_us\r\n0,alloc,512,100,0,\r\n";
    assert_int_equal(sublet_trace_detect(csv, strlen(csv)), SUBLET_FORMAT_EVENTS_CSV);
    sublet_trace *t = parse_str(csv);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_EVENTS_CSV);
    assert_int_equal(sublet_trace_count(t), 1);
    drop(t);
    size_t zl;
    uint8_t *z = gzip_of(csv, strlen(csv), &zl);
    assert_int_equal(sublet_trace_detect(z, zl), SUBLET_FORMAT_EVENTS_CSV);
    t = parse_ok(z, zl, NULL);
    assert_int_equal(sublet_trace_count(t), 1);
    drop(t);
    free(z);
    z = gzip_of(k_rmm, strlen(k_rmm), &zl);
    assert_int_equal(sublet_trace_detect(z, zl), SUBLET_FORMAT_RMM_CSV);
    free(z);
    z = gzip_of(k_kineto, strlen(k_kineto), &zl);
    assert_int_equal(sublet_trace_detect(z, zl), SUBLET_FORMAT_KINETO_JSON);
    t = parse_ok(z, zl, NULL);
    assert_int_equal(sublet_trace_count(t), 7);
    drop(t);
    free(z);
    assert_int_equal(sublet_trace_detect(k_snap, strlen(k_snap)), SUBLET_FORMAT_SNAPSHOT_JSON);
    size_t n;
    uint8_t *pk = pickle_of_json(k_snap, &n);
    assert_int_equal(sublet_trace_detect(pk, n), SUBLET_FORMAT_SNAPSHOT_PICKLE);
    free(pk);
    char p[4096];
    snprintf(p, sizeof p, "%s/cs336_attention_microbench.pickle.gz", testdata_dir());
    uint8_t *g = slurp(p, &n);
    assert_int_equal(sublet_trace_detect(g, n), SUBLET_FORMAT_SNAPSHOT_PICKLE);
    free(g);
    /* A protocol-0 pickle (MARK first). */
    const char p0[] = "(dp0\nVsegments\np1\n(lp2\nsVdevice_traces\np3\n(lp4\ns.";
    assert_int_equal(sublet_trace_detect(p0, strlen(p0)), SUBLET_FORMAT_SNAPSHOT_PICKLE);
    t = parse_str(p0);
    assert_int_equal(sublet_trace_count(t), 0);
    drop(t);

    assert_int_equal(sublet_trace_detect("hello", 5), SUBLET_FORMAT_UNKNOWN);
    assert_int_equal(sublet_trace_detect("", 0), SUBLET_FORMAT_UNKNOWN);
    expect_parse_error("hello, world", "unrecognised trace format (first bytes: 'hello, world')");
    expect_error("", 0, NULL, SUBLET_ERR_PARSE, "unrecognised trace format");
    expect_error("\x1f\x8b\x08", 3, NULL, SUBLET_ERR_PARSE, "gzip byte");
    expect_error("\x80\x09", 2, NULL, SUBLET_ERR_PARSE, "unsupported pickle protocol 9");
    assert_string_equal(sublet_trace_format_name(SUBLET_FORMAT_RMM_CSV), "rmm-csv");
    assert_string_equal(sublet_trace_format_name((sublet_trace_format)99), "unknown");

    char err[600];
    t = (sublet_trace *)1;
    assert_int_equal(sublet_trace_load("/nonexistent/trace.pickle", NULL, &t, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_null(t);
    assert_non_null(strstr(err, "/nonexistent/trace.pickle"));
    /* A trace not read by sublet_trace_parse has no extras. */
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_UNKNOWN);
    assert_int_equal(sublet_trace_device(t), -1);
    assert_null(sublet_trace_settings(t));
    assert_int_equal(sublet_trace_stack_count(t), 0);
    drop(t);
    sublet_trace_extras_release(NULL);
}

static void test_truncations(void **state)
{
    (void)state;
    size_t n, zl;
    uint8_t *pk = pickle_of_json(k_snap, &n);
    truncations(pk, n, 1);
    uint8_t *z = gzip_of(pk, n, &zl);
    truncations(z, zl, 1);
    free(z);
    free(pk);
    truncations(k_snap, strlen(k_snap), 1);
    truncations(k_kineto, strlen(k_kineto), 1);
    truncations(k_rmm, strlen(k_rmm), 1);
    const char *csv = "seq,action,addr,size,stream,time_us\n0,pre_segment,0,2097152,0,\n"
                      "1,alloc,512,100,0,17\n2,free_requested,512,100,0,18\n";
    truncations(csv, strlen(csv), 1);
    /* The real attention snapshot: its gzip at every length, the pickle at
     * every length of the first and last few KiB and a stride between. */
    char p[4096];
    snprintf(p, sizeof p, "%s/cs336_attention_microbench.pickle.gz", testdata_dir());
    uint8_t *g = slurp(p, &zl);
    truncations(g, zl, 1);
    pv_arena *a = pv_arena_create();
    pyval *root = NULL;
    char err[300];
    assert_int_equal(pv_pickle_parse(g, zl, a, &root, err, sizeof err), SUBLET_OK);
    pv_buf b = {0};
    assert_int_equal(pv_pickle_write(root, 0, &b, err, sizeof err), SUBLET_OK);
    truncations(b.data, b.len, 97);
    pv_buf_free(&b);
    pv_arena_destroy(a);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_testdata),
        cmocka_unit_test(test_snapshot_shared_all),
        cmocka_unit_test(test_snapshot_json),
        cmocka_unit_test(test_snapshot_synthetic),
        cmocka_unit_test(test_snapshot_malformed),
        cmocka_unit_test(test_rmm),
        cmocka_unit_test(test_kineto_synthetic),
        cmocka_unit_test(test_kineto_shared),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_truncations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
