/* sublet — tests of the trace model, the `.events.csv` reader and the replay
 * driver, against real PyTorch recordings.
 *
 * SUBLET_TESTDATA: tests/data (the committed attention trace).
 * SUBLET_SHARED:   ../shared; the traces in traces/pytorch_snapshot are used
 *                  when present, and those tests skip cleanly otherwise. */
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

#include "sublet/replay.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"
#include "test_data.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static sublet_trace *load(const char *dir, const char *name)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sublet_trace *t = NULL;
    sublet_status st = sublet_trace_load_csv(path, &t, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("cannot load %s: %s", path, err);
    return t;
}

static sublet_trace *parse(const char *csv)
{
    char err[512];
    sublet_trace *t = NULL;
    sublet_status st = sublet_trace_parse_csv(csv, strlen(csv), &t, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("parse failed: %s", err);
    return t;
}

/* Expect a parse error whose message names `line`. */
static void expect_parse_error(const char *csv, size_t len, unsigned line, const char *word)
{
    char err[512], want[32];
    sublet_trace *t = (sublet_trace *)(uintptr_t)1;
    assert_int_equal(sublet_trace_parse_csv(csv, len, &t, err, sizeof err), SUBLET_ERR_PARSE);
    assert_null(t);
    snprintf(want, sizeof want, "line %u:", line);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("expected '%s...', got '%s'", want, err);
    if (word && !strstr(err, word))
        fail_msg("expected '%s' in '%s'", word, err);
}

static void expect_parse_error_s(const char *csv, unsigned line, const char *word)
{
    expect_parse_error(csv, strlen(csv), line, word);
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

static void print_context(const sublet_trace *t, uint64_t idx)
{
    size_t lo = idx > 8 ? (size_t)idx - 8 : 0, hi = (size_t)idx + 3;
    for (size_t i = lo; i < hi && i < sublet_trace_count(t); i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        print_message("%s %zu line %llu: %s addr=%llu size=%llu stream=%llu\n",
                      i == idx ? ">>" : "  ", i, (unsigned long long)e->line,
                      sublet_trace_kind_name(e->kind), (unsigned long long)e->addr,
                      (unsigned long long)e->size, (unsigned long long)e->stream);
    }
}

/* Every decision and size as recorded; peak reserved exact. */
static void assert_full_fidelity(const char *name, const sublet_trace *t,
                                 const sublet_replay_result *r)
{
    const sublet_replay_fidelity *f = &r->fidelity;
    print_message("%s: decisions %llu/%llu, sizes %llu/%llu (engine %llu), peak reserved %llu "
                  "vs recorded %llu\n", name, (unsigned long long)f->decisions_matched,
                  (unsigned long long)f->allocs_compared,
                  (unsigned long long)f->segment_sizes_matched,
                  (unsigned long long)f->recorded_segment_allocs,
                  (unsigned long long)f->engine_segment_allocs,
                  (unsigned long long)r->peak_reserved_bytes,
                  (unsigned long long)f->recorded_peak_reserved_bytes);
    if (f->first_decision_mismatch != SUBLET_REPLAY_NONE)
        print_context(t, f->first_decision_mismatch);
    assert_int_equal(r->errors, 0);
    assert_int_equal(r->ooms, 0);
    assert_int_equal(f->allocs_compared, sublet_trace_count_kind(t, SUBLET_ACT_ALLOC));
    assert_int_equal(f->decisions_matched, f->allocs_compared);
    assert_int_equal(f->recorded_segment_allocs, sublet_trace_count_kind(t, SUBLET_ACT_SEGMENT_ALLOC));
    assert_int_equal(f->segment_sizes_matched, f->recorded_segment_allocs);
    assert_int_equal(f->engine_segment_allocs, f->recorded_segment_allocs);
    assert_int_equal(f->engine_segment_frees, f->recorded_segment_frees);
    /* every empty_cache released the very segments PyTorch released */
    if (f->first_empty_cache_mismatch != SUBLET_REPLAY_NONE)
        print_context(t, f->first_empty_cache_mismatch);
    assert_int_equal(f->empty_cache_sets_matched, f->empty_caches_compared);
    assert_int_equal(f->first_empty_cache_mismatch, SUBLET_REPLAY_NONE);
    assert_int_equal(r->peak_reserved_bytes, f->recorded_peak_reserved_bytes);
    assert_int_equal(r->final_reserved_bytes, f->recorded_final_reserved_bytes);
}

/* ---- the trace model ---------------------------------------------------------- */

static void test_kind_names(void **state)
{
    (void)state;
    for (uint32_t k = 0; k < SUBLET_TRACE_KIND_COUNT; k++) {
        const char *n = sublet_trace_kind_name(k);
        uint32_t back = 999;
        assert_int_equal(sublet_trace_kind_parse(n, strlen(n), &back), 0);
        assert_int_equal(back, k);
    }
    assert_string_equal(sublet_trace_kind_name(SUBLET_TRACE_PRE_SEGMENT), "pre_segment");
    assert_string_equal(sublet_trace_kind_name(SUBLET_TRACE_PRE_ALLOC), "pre_alloc");
    assert_string_equal(sublet_trace_kind_name(SUBLET_ACT_FREE_COMPLETED), "free_completed");
    assert_string_equal(sublet_trace_kind_name(SUBLET_TRACE_KIND_COUNT), "unknown");
    assert_int_equal(sublet_trace_kind_parse("allocx", 6, NULL), -1);
    assert_int_equal(sublet_trace_kind_parse("alloc", 4, NULL), -1);
    assert_true(sublet_trace_kind_is_prelude(SUBLET_TRACE_PRE_ALLOC));
    assert_false(sublet_trace_kind_is_prelude(SUBLET_ACT_ALLOC));
}

static void test_model_append(void **state)
{
    (void)state;
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    assert_int_equal(sublet_trace_count(t), 0);
    assert_null(sublet_trace_events(t));
    assert_null(sublet_trace_at(t, 0));
    sublet_trace_event e = {.kind = SUBLET_TRACE_PRE_SEGMENT, .addr = 4 * MiB, .size = 2 * MiB};
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
    e = (sublet_trace_event){.kind = SUBLET_TRACE_PRE_ALLOC, .addr = 4 * MiB, .size = 100};
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
    for (int i = 0; i < 1000; i++) {
        e = (sublet_trace_event){.kind = i % 2 ? SUBLET_ACT_FREE_REQUESTED : SUBLET_ACT_ALLOC,
                                 .addr = 8 * MiB, .size = 512, .line = (uint64_t)i + 4};
        assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
    }
    /* the prelude comes first */
    e = (sublet_trace_event){.kind = SUBLET_TRACE_PRE_ALLOC, .addr = 4 * MiB, .size = 1};
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_ERR_INVALID_ARGUMENT);
    e.kind = SUBLET_TRACE_KIND_COUNT;
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_trace_count(t), 1002);
    assert_int_equal(sublet_trace_prelude_count(t), 2);
    assert_int_equal(sublet_trace_count_kind(t, SUBLET_ACT_ALLOC), 500);
    assert_int_equal(sublet_trace_at(t, 1001)->line, 1003);
    sublet_trace_free(t);
    sublet_trace_free(NULL);
}

static void test_info(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,pre_segment,1048576,2097152,0,\n"
                            "1,pre_alloc,1048576,1000,0,\n"
                            "2,segment_alloc,41943040,20971520,7,5\n"
                            "3,alloc,41943040,4194304,7,6\n"
                            "4,free_requested,41943040,4194304,7,7\n"
                            "5,free_completed,41943040,4194304,7,8\n"
                            "6,segment_free,41943040,20971520,7,9\n"
                            "7,snapshot,0,0,0,10\n");
    sublet_trace_info in;
    assert_int_equal(sublet_trace_info_get(t, &in), SUBLET_OK);
    assert_int_equal(in.pre_segments, 1);
    assert_int_equal(in.pre_allocs, 1);
    assert_int_equal(in.allocs, 1);
    assert_int_equal(in.segment_allocs, 1);
    assert_int_equal(in.segment_frees, 1);
    assert_int_equal(in.snapshots, 1);
    assert_int_equal(in.peak_reserved_bytes, 22 * MiB);
    assert_int_equal(in.peak_reserved_event, 2);
    assert_int_equal(in.final_reserved_bytes, 2 * MiB);
    assert_int_equal(in.peak_requested_bytes, 1000 + 4 * MiB);
    assert_int_equal(in.final_requested_bytes, 1000);
    assert_int_equal(in.streams, 2);
    const sublet_trace_event *e = sublet_trace_at(t, 0);
    assert_int_equal(e->line, 2);
    assert_int_equal(e->flags & SUBLET_TRACE_HAS_TIME, 0);
    e = sublet_trace_at(t, 3);
    assert_int_equal(e->flags & SUBLET_TRACE_HAS_TIME, SUBLET_TRACE_HAS_TIME);
    assert_int_equal(e->time_us, 6);
    assert_int_equal(e->stream, 7);
    sublet_trace_free(t);
}

/* ---- the CSV reader -------------------------------------------------------------- */

static void test_csv_forms(void **state)
{
    (void)state;
    /* CRLF, no trailing newline, a byte-order mark, empty time_us, 2^64-1 */
    const char *forms[] = {
        "seq,action,addr,size,stream,time_us\r\n0,alloc,1,2,3,4\r\n1,free_requested,1,2,3,\r\n",
        "seq,action,addr,size,stream,time_us\n0,alloc,1,2,3,4\n1,free_requested,1,2,3,",
        ("\xef\xbb\xbfseq,action,addr,size,stream,time_us\n0,alloc,1,2,3,4\n"
         "1,free_requested,1,2,3,\r\n"),
    };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        sublet_trace *t = parse(forms[i]);
        assert_int_equal(sublet_trace_count(t), 2);
        const sublet_trace_event *e = sublet_trace_at(t, 1);
        assert_int_equal(e->kind, SUBLET_ACT_FREE_REQUESTED);
        assert_int_equal(e->addr, 1);
        assert_int_equal(e->size, 2);
        assert_int_equal(e->stream, 3);
        assert_int_equal(e->flags, 0);
        assert_int_equal(e->line, 3);
        sublet_trace_free(t);
    }
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,alloc,18446744073709551615,1,18446744073709551615,0\n");
    assert_int_equal(sublet_trace_at(t, 0)->addr, UINT64_MAX);
    assert_int_equal(sublet_trace_at(t, 0)->stream, UINT64_MAX);
    sublet_trace_free(t);
    t = parse("seq,action,addr,size,stream,time_us\n"); /* header only */
    assert_int_equal(sublet_trace_count(t), 0);
    sublet_trace_free(t);
    t = parse("seq,action,addr,size,stream,time_us");
    assert_int_equal(sublet_trace_count(t), 0);
    sublet_trace_free(t);
}

static void test_csv_errors(void **state)
{
    (void)state;
    const char *h = "seq,action,addr,size,stream,time_us\n";
    char buf[512];
    expect_parse_error("", 0, 1, "header");
    expect_parse_error_s("seq,action,addr,size,stream\n0,alloc,1,2,3\n", 1, "header");
    expect_parse_error_s("Seq,action,addr,size,stream,time_us\n", 1, "header");
    expect_parse_error_s("seq,action,addr,size,stream,time_us,extra\n", 1, "header");
#define BAD(row, line, word)                             \
    do {                                                 \
        snprintf(buf, sizeof buf, "%s%s", h, row);       \
        expect_parse_error_s(buf, line, word);           \
    } while (0)
    BAD("0,alloc,1,2,3\n", 2, "columns");                       /* short row */
    BAD("0,alloc,1,2,3,4,5\n", 2, "columns");                   /* long row */
    BAD("0,alloc,1,2,3,4\n1,alloc,1,2\n", 3, "columns");
    BAD("0,alloc,12x,2,3,4\n", 2, "addr");                       /* non-number */
    BAD("0,alloc,1,,3,4\n", 2, "size");                          /* empty */
    BAD("0,alloc,1,-2,3,4\n", 2, "size");                        /* signed */
    BAD("0,alloc,1,+2,3,4\n", 2, "size");
    BAD("0,alloc,1,2, 3,4\n", 2, "stream");                      /* space */
    BAD("0,alloc,1,2,3,4.5\n", 2, "time_us");
    BAD("x,alloc,1,2,3,4\n", 2, "seq");
    BAD("0,alloc,18446744073709551616,2,3,4\n", 2, "overflow");  /* 2^64 */
    BAD("0,alloc,1,99999999999999999999999,3,4\n", 2, "overflow");
    BAD("0,malloc,1,2,3,4\n", 2, "unknown action 'malloc'");     /* unknown action */
    BAD("0,Alloc,1,2,3,4\n", 2, "unknown action");
    BAD("0,,1,2,3,4\n", 2, "unknown action");
    BAD("0,alloc,1,2,3,4\n1,pre_alloc,1,2,3,\n", 3, "pre_alloc row after");
    BAD("0,pre_segment,0,2097152,0,\n1,alloc,1,2,3,4\n2,pre_segment,1,2,3,\n", 4, "after");
    BAD("0,alloc,1,2,3,4\n1,pre_segment_expandable,1,2,3,\n", 3, "after");
    BAD("0,pre_segment_expandabl,0,2097152,0,\n", 2, "unknown action");
    BAD("0,pre_segment_expandable_,0,2097152,0,\n", 2, "unknown action");
    BAD("0,alloc,1,2,3,4\n\n1,alloc,1,2,3,4\n", 3, "empty line");
    BAD("0,alloc,1,2,3,4\n\n", 3, "empty line");
    BAD("0,alloc,1,2,3,4\r\r\n", 2, "time_us");                  /* stray CR */
    BAD("0,alloc,1,2,3,4\r1,alloc,1,2,3,4\n", 2, "columns");     /* CR only */
#undef BAD
    /* NUL bytes and other binary junk are quoted, not printed raw */
    static const char nul[] = "seq,action,addr,size,stream,time_us\n0,al\0loc,1,2,3,4\n";
    expect_parse_error(nul, sizeof nul - 1, 2, "unknown action 'al\\x00loc'");
    static const char junk[] = "seq,action,addr,size,stream,time_us\n0,alloc,\x01\xff,2,3,4\n";
    expect_parse_error(junk, sizeof junk - 1, 2, "'\\x01\\xff'");
    /* a long offending field is cut short */
    char longrow[600];
    memset(longrow, 'z', sizeof longrow);
    memcpy(longrow, "0,", 2);
    memcpy(longrow + sizeof longrow - 10, ",1,2,3,4\n", 10);
    snprintf(buf, sizeof buf, "%s", h);
    char *whole = malloc(strlen(h) + sizeof longrow);
    assert_non_null(whole);
    strcpy(whole, h);
    strcat(whole, longrow);
    expect_parse_error_s(whole, 2, "...'");
    free(whole);
    /* the message fits whatever buffer it is given */
    char tiny[8];
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_parse_csv("bad", 3, &t, tiny, sizeof tiny), SUBLET_ERR_PARSE);
    assert_string_equal(tiny, "line 1:");
    assert_int_equal(sublet_trace_parse_csv("bad", 3, &t, NULL, 0), SUBLET_ERR_PARSE);
    assert_int_equal(sublet_trace_parse_csv(NULL, 3, &t, NULL, 0), SUBLET_ERR_INVALID_ARGUMENT);
}

static void test_csv_files(void **state)
{
    (void)state;
    char err[512];
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_load_csv("/nonexistent/x.events.csv", &t, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.events.csv"));
    assert_null(t);
    /* through a FILE* */
    FILE *f = tmpfile();
    assert_non_null(f);
    fputs("seq,action,addr,size,stream,time_us\n0,alloc,1,2,3,4\n1,bogus,1,2,3,4\n", f);
    rewind(f);
    assert_int_equal(sublet_trace_read_csv(f, &t, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "line 3"));
    fclose(f);
}

/* Every prefix and many single-byte mutations of a real trace either parse
 * or fail with SUBLET_ERR_PARSE naming a line: never anything else. */
static void test_csv_robust(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/cs336_attention_microbench.events.csv", testdata_dir());
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    assert_true(n > 1000);
    char err[256];
    for (size_t len = 0; len <= n; len += (len < 200 ? 1 : 97)) {
        sublet_trace *t = NULL;
        sublet_status st = sublet_trace_parse_csv(buf, len, &t, err, sizeof err);
        assert_true(st == SUBLET_OK || st == SUBLET_ERR_PARSE);
        if (st == SUBLET_ERR_PARSE)
            assert_non_null(strstr(err, "line "));
        sublet_trace_free(t);
    }
    static const char pool[] = ",\r\n0919-+ a\xff\x00";
    uint64_t rng = 12345;
    for (int it = 0; it < 3000; it++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t at = (size_t)(rng >> 33) % n;
        char saved = buf[at];
        buf[at] = pool[(rng >> 20) % (sizeof pool - 1)];
        sublet_trace *t = NULL;
        sublet_status st = sublet_trace_parse_csv(buf, n, &t, err, sizeof err);
        assert_true(st == SUBLET_OK || st == SUBLET_ERR_PARSE);
        if (st == SUBLET_ERR_PARSE)
            assert_non_null(strstr(err, "line "));
        sublet_trace_free(t);
        buf[at] = saved;
    }
    free(buf);
}

/* ---- the replay driver on the committed trace ----------------------------------- */

/* The committed and shared traces were recorded by PyTorch releases before
 * 2.14, which break a tie of free block sizes by address (docs/versions.md). */
#define PRE_2_14 "pytorch_version:2.13"

static void test_attention_committed(void **state)
{
    (void)state;
    sublet_trace *t = load(testdata_dir(), "cs336_attention_microbench.events.csv");
    for (int hints = 1; hints >= 0; hints--) {
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.conf = PRE_2_14;
        o.check = 1;
        o.capture_summary = 1;
        o.placement_hints = hints;
        sublet_replay_result r = replay(t, &o);
        assert_full_fidelity("cs336_attention_microbench", t, &r);
        assert_int_equal(r.events, 97);
        assert_int_equal(r.last_event, 96);
        assert_int_equal(r.allocs, 36);
        assert_int_equal(r.frees, 26);
        assert_int_equal(r.fidelity.allocs_compared, 36);
        assert_int_equal(r.fidelity.segment_sizes_matched, 9);
        assert_int_equal(r.peak_reserved_bytes, UINT64_C(3781165056));
        assert_int_equal(r.fidelity.recorded_peak_reserved_bytes, UINT64_C(3781165056));
        assert_int_equal(r.peak_requested_bytes, UINT64_C(3249143816)); /* summary.json */
        assert_int_equal(r.device_allocs, 9);
        assert_int_equal(r.device_frees, 0);
        assert_int_equal(r.alloc_retries, 0);
        if (hints) { /* every segment and block where PyTorch put it */
            assert_int_equal(r.fidelity.segments_placed_as_recorded, 9);
            assert_int_equal(r.fidelity.addresses_matched, 36);
            assert_int_equal(r.fidelity.first_address_mismatch, SUBLET_REPLAY_NONE);
        }
        assert_non_null(r.summary_peak);
        assert_non_null(r.summary_end);
        assert_non_null(strstr(r.summary_end, "PyTorch CUDA memory summary"));
        assert_int_equal(r.stats_peak.reserved_bytes[SUBLET_POOL_ALL].current,
                         (int64_t)UINT64_C(3781165056));
        sublet_replay_result_free(&r);
        assert_null(r.summary_peak);
    }
    sublet_trace_free(t);
}

static void test_stop_after(void **state)
{
    (void)state;
    sublet_trace *t = load(testdata_dir(), "cs336_attention_microbench.events.csv");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.stop_after = 10;
    sublet_replay_result r = replay(t, &o);
    assert_int_equal(r.events, 11);
    assert_int_equal(r.last_event, 10);
    assert_int_equal(r.allocs, 6); /* events 1,2,3,5,6,8 */
    assert_int_equal(r.fidelity.decisions_matched, 6);
    assert_int_equal(r.fidelity.recorded_peak_reserved_bytes, 20 * MiB + 1024 * MiB);
    assert_int_equal(r.peak_reserved_bytes, r.fidelity.recorded_peak_reserved_bytes);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* The environment's settings never reach a replay. */
static void test_env_ignored(void **state)
{
    (void)state;
    sublet_trace *t = load(testdata_dir(), "cs336_attention_microbench.events.csv");
    setenv("PYTORCH_CUDA_ALLOC_CONF", "roundup_power2_divisions:4,max_split_size_mb:40", 1);
    setenv("SUBLET_ALLOC_CONF", "not_an_option:1", 1);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = NULL;
    sublet_replay_result r = replay(t, &o);
    assert_int_equal(r.fidelity.decisions_matched, 36);
    assert_int_equal(r.peak_reserved_bytes, UINT64_C(3781165056));
    sublet_replay_result_free(&r);
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    unsetenv("SUBLET_ALLOC_CONF");
    sublet_trace_free(t);
}

static void test_conf_error(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = "max_split_size_mb:banana";
    sublet_replay_result r;
    char err[512] = "";
    assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_true(err[0] != '\0');
    sublet_replay_result_free(&r);
    /* a settings string that changes decisions is applied */
    o.conf = "max_split_size_mb:20";
    r = replay(t, &o);
    assert_int_equal(r.stats_end.max_split_size, (int64_t)(20 * MiB));
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* ---- replay semantics on small traces --------------------------------------------- */

/* free_requested whose free_completed comes later: the block stays pending
 * (a new segment for the next alloc) until the completion row. */
static void test_deferred_free(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_alloc,140000000000000,2097152,0,\n"
                            "1,alloc,140000000000000,1048576,0,\n"
                            "2,alloc,140000001048576,1048576,0,\n"
                            "3,free_requested,140000000000000,1048576,0,\n"
                            "4,segment_alloc,140000002097152,2097152,0,\n"
                            "5,alloc,140000002097152,1048576,0,\n"
                            "6,free_completed,140000000000000,1048576,0,\n"
                            "7,alloc,140000000000000,1048576,0,\n"
                            "8,free_requested,140000002097152,1048576,0,\n"
                            "9,free_completed,140000002097152,1048576,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    sublet_replay_result r = replay(t, &o);
    assert_full_fidelity("deferred", t, &r);
    assert_int_equal(r.deferred_frees, 1);
    assert_int_equal(r.fidelity.decisions_matched, 4);
    assert_int_equal(r.peak_reserved_bytes, 4 * MiB);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* Deferred frees complete in the order of their free_completed rows, each at its row (as
 * PyTorch's process_events freed them): a split block's statistics show the order.  Block A
 * (512 bytes at the segment's start) is freed before its neighbour B although B's free was
 * asked first: A comes back split (inactive_split + 1), then B merges with A and the rest
 * (- 2).  In the other order B would take the rest (- 1 + 1) and A the whole segment (- 1).
 * C, in a segment of its own, is freed at once between the requests and the completions. */
static void test_deferred_free_order(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_alloc,140000000000000,2097152,1,\n"
                            "1,alloc,140000000000000,7,1,\n"
                            "2,alloc,140000000000512,8096,1,\n"
                            "3,segment_alloc,140000002097152,2097152,2,\n"
                            "4,alloc,140000002097152,512,2,\n"
                            "5,free_requested,140000000000512,8096,1,\n"
                            "6,free_requested,140000000000000,7,1,\n"
                            "7,free_requested,140000002097152,512,2,\n"
                            "8,free_completed,140000002097152,512,2,\n"
                            "9,free_completed,140000000000000,7,1,\n"
                            "10,free_completed,140000000000512,8096,1,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    sublet_replay_result r = replay(t, &o);
    assert_full_fidelity("deferred order", t, &r);
    assert_int_equal(r.deferred_frees, 2);
    const sublet_stat *split = &r.stats_end.inactive_split[SUBLET_POOL_SMALL];
    assert_int_equal(split->current, 0);
    assert_int_equal(split->allocated, 3); /* the two rests, then A */
    assert_int_equal(split->freed, 3);     /* C's rest, then A and the rest with B */
    assert_int_equal(r.stats_end.active[SUBLET_POOL_SMALL].current, 0);
    /* after row 9 only A (and C) are free */
    o.stop_after = 9;
    sublet_replay_result_free(&r);
    r = replay(t, &o);
    assert_int_equal(r.stats_end.active[SUBLET_POOL_SMALL].current, 1);
    assert_int_equal(r.stats_end.inactive_split[SUBLET_POOL_SMALL].current, 2);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* A release run right before a request that makes a segment, while the
 * garbage collector is over its threshold, is that request's own collection
 * (docs/rules.md §3.6), not an empty_cache: it frees only the oldest free segment.  On a
 * 1 GiB device at fraction 0.5 and threshold 0.5 (256 MiB), 310 MiB are
 * reserved; A (100 MiB) was freed before D (30 MiB) was taken and given back
 * and before B (100 MiB) was freed, so when 120 MiB misses the cache A is
 * 2 lookups old, B and D 1 (average 4/3): A alone goes (the 2.14 differential's
 * programs 55 and 162). */
static void test_gc_release_run(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_alloc,140000000000000,104857600,0,\n"
                            "1,alloc,140000000000000,104857600,0,\n"
                            "2,segment_alloc,140000104857600,104857600,0,\n"
                            "3,alloc,140000104857600,104857600,0,\n"
                            "4,segment_alloc,140000209715200,83886080,0,\n"
                            "5,alloc,140000209715200,83886080,0,\n"
                            "6,segment_alloc,140000293601280,31457280,0,\n"
                            "7,alloc,140000293601280,31457280,0,\n"
                            "8,free_requested,140000293601280,31457280,0,\n"
                            "9,free_completed,140000293601280,31457280,0,\n"
                            "10,free_requested,140000000000000,104857600,0,\n"
                            "11,free_completed,140000000000000,104857600,0,\n"
                            "12,alloc,140000293601280,31457280,0,\n"
                            "13,free_requested,140000293601280,31457280,0,\n"
                            "14,free_completed,140000293601280,31457280,0,\n"
                            "15,free_requested,140000104857600,104857600,0,\n"
                            "16,free_completed,140000104857600,104857600,0,\n"
                            "17,segment_free,140000000000000,104857600,0,\n"
                            "18,segment_alloc,140000325058560,125829120,0,\n"
                            "19,alloc,140000325058560,125829120,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = "garbage_collection_threshold:0.5,memory_fraction:0.5";
    o.device_memory = 1024 * MiB;
    o.check = 1;
    sublet_replay_result r = replay(t, &o);
    assert_full_fidelity("gc release run", t, &r);
    assert_int_equal(r.empty_caches, 0);
    assert_int_equal(r.fidelity.empty_caches_compared, 1);
    assert_int_equal(r.fidelity.recorded_segment_frees, 1);
    assert_int_equal(r.fidelity.addresses_matched, 6);
    /* without the collector (no fraction) the run is an empty_cache: all three go */
    o.conf = "garbage_collection_threshold:0.5";
    sublet_replay_result_free(&r);
    r = replay(t, &o);
    assert_int_equal(r.empty_caches, 1);
    assert_int_equal(r.fidelity.engine_segment_frees, 3);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* A run of segment_free rows is one empty_cache(). */
static void test_empty_cache_run(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_alloc,140000000000000,2097152,0,\n"
                            "1,alloc,140000000000000,512,0,\n"
                            "2,free_requested,140000000000000,512,0,\n"
                            "3,free_completed,140000000000000,512,0,\n"
                            "4,segment_alloc,140000020971520,20971520,0,\n"
                            "5,alloc,140000020971520,2097152,0,\n"
                            "6,free_requested,140000020971520,2097152,0,\n"
                            "7,free_completed,140000020971520,2097152,0,\n"
                            "8,segment_free,140000000000000,2097152,0,\n"
                            "9,segment_free,140000020971520,20971520,0,\n"
                            "10,snapshot,0,0,0,\n"
                            "11,segment_alloc,140000000000000,2097152,0,\n"
                            "12,alloc,140000000000000,512,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    sublet_replay_result r = replay(t, &o);
    assert_full_fidelity("empty_cache", t, &r);
    assert_int_equal(r.empty_caches, 1);
    assert_int_equal(r.fidelity.recorded_segment_frees, 2);
    assert_int_equal(r.fidelity.engine_segment_frees, 2);
    assert_int_equal(r.fidelity.empty_caches_compared, 1);
    assert_int_equal(r.fidelity.empty_cache_sets_matched, 1);
    assert_int_equal(r.device_frees, 2);
    assert_int_equal(r.peak_reserved_bytes, 22 * MiB);
    assert_int_equal(r.final_reserved_bytes, 2 * MiB);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* The set an empty_cache released, not only how many: here the recording
 * lists one segment where the engine (which completes the pending free at
 * row 5 first, as PyTorch's synchronize_and_free_events does) releases two,
 * and another run lists a segment the engine still holds. */
static void test_empty_cache_set_mismatch(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_alloc,140000000000000,2097152,0,\n"
                            "1,alloc,140000000000000,512,0,\n"
                            "2,segment_alloc,140000020971520,20971520,0,\n"
                            "3,alloc,140000020971520,2097152,0,\n"
                            "4,free_requested,140000020971520,2097152,0,\n"
                            "5,free_requested,140000000000000,512,0,\n"
                            "6,free_completed,140000020971520,2097152,0,\n"
                            "7,segment_free,140000020971520,20971520,0,\n"
                            "8,free_completed,140000000000000,512,0,\n"
                            "9,segment_alloc,140000041943040,20971520,0,\n"
                            "10,alloc,140000041943040,4194304,0,\n"
                            "11,segment_free,140000041943040,20971520,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    sublet_replay_result r = replay(t, &o);
    const sublet_replay_fidelity *f = &r.fidelity;
    assert_int_equal(r.errors, 0);
    assert_int_equal(f->decisions_matched, 3);
    assert_int_equal(f->empty_caches_compared, 2);
    assert_int_equal(f->empty_cache_sets_matched, 0);
    assert_int_equal(f->recorded_segment_frees, 2);
    assert_int_equal(f->engine_segment_frees, 2);     /* the same count... */
    assert_int_equal(f->first_empty_cache_mismatch, 7); /* ...not the same set */
    const sublet_replay_release_diff *d = &f->empty_cache_mismatch;
    assert_int_equal(d->recorded, 1);
    assert_int_equal(d->engine, 2);
    assert_int_equal(d->only_recorded, 0);
    assert_int_equal(d->only_engine, 1);
    assert_int_equal(d->first_only_recorded.kind, SUBLET_ACT_COUNT);
    assert_int_equal(d->first_only_engine.kind, SUBLET_ACT_SEGMENT_FREE);
    assert_int_equal(d->first_only_engine.addr, UINT64_C(140000000000000));
    assert_int_equal(d->first_only_engine.size, 2 * MiB);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* Rows that cannot be applied are counted; the replay goes on. */
static void test_unknown_free(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,free_requested,777,512,0,\n"
                            "1,free_completed,777,512,0,\n"
                            "2,free_completed,888,512,0,\n"
                            "3,segment_alloc,140000000000000,2097152,0,\n"
                            "4,alloc,140000000000000,512,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.check = 1;
    sublet_replay_result r;
    char err[256];
    assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_OK);
    assert_int_equal(r.errors, 2); /* the free_requested and the orphan free_completed */
    assert_non_null(strstr(r.first_error, "event 0 (line 2)"));
    assert_int_equal(r.events, 5);
    assert_int_equal(r.fidelity.decisions_matched, 1);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

typedef struct oom_seen {
    int calls;
    uint64_t event, line, size;
    char msg[64];
} oom_seen;

static void on_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                   const char *message)
{
    (void)stream;
    oom_seen *s = user;
    s->calls++;
    s->event = event;
    s->line = line;
    s->size = size;
    snprintf(s->msg, sizeof s->msg, "%s", message);
}

static void test_oom(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_alloc,140000000000000,20971520,0,\n"
                            "1,alloc,140000000000000,2097152,0,\n"
                            "2,free_requested,140000000000000,2097152,0,\n"
                            "3,free_completed,140000000000000,2097152,0,\n"
                            "4,segment_alloc,140000020971520,2097152,0,\n"
                            "5,alloc,140000020971520,512,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.device_memory = 4 * MiB;
    o.check = 1;
    oom_seen seen = {0};
    o.on_oom = on_oom;
    o.oom_user = &seen;
    sublet_replay_result r = replay(t, &o);
    assert_int_equal(r.ooms, 1);
    assert_int_equal(r.first_oom_event, 1);
    assert_int_equal(r.errors, 0); /* the free of the failed alloc is expected */
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.event, 1);
    assert_int_equal(seen.line, 3);
    assert_int_equal(seen.size, 2 * MiB);
    assert_non_null(strstr(seen.msg, "CUDA out of memory"));
    assert_int_equal(r.events, 6);
    assert_int_equal(r.fidelity.allocs_compared, 2);
    assert_int_equal(r.fidelity.decisions_matched, 1);
    assert_int_equal(r.fidelity.first_decision_mismatch, 1);
    assert_int_equal(r.stats_end.num_ooms, 1);
    sublet_replay_result_free(&r);

    o.stop_on_oom = 1;
    r = replay(t, &o);
    assert_true(r.stopped_on_oom);
    assert_int_equal(r.events, 2);
    assert_int_equal(r.last_event, 1);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* Each OOM is reported once, by its row's index, and `events` counts the
 * prelude's rows: every reported index is below it, also when the replay
 * stops at the OOM, and also for an OOM while allocating the prelude. */
static void test_oom_events_prelude(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,pre_segment,140000000000000,20971520,0,\n"
                            "1,pre_alloc,140000000000000,10485760,0,\n"
                            "2,segment_alloc,140000020971520,20971520,0,\n"
                            "3,alloc,140000020971520,20971520,0,\n"
                            "4,free_requested,140000020971520,20971520,0,\n"
                            "5,free_completed,140000020971520,20971520,0,\n");
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.device_memory = 30 * MiB; /* the adopted 20 MiB segment + 20 MiB do not fit */
    o.check = 1;
    oom_seen seen = {0};
    o.on_oom = on_oom;
    o.oom_user = &seen;
    for (int stop = 0; stop < 2; stop++) {
        memset(&seen, 0, sizeof seen);
        o.stop_on_oom = stop;
        sublet_replay_result r = replay(t, &o);
        assert_int_equal(r.ooms, 1);
        assert_int_equal(seen.calls, 1);
        assert_int_equal(seen.event, 3);
        assert_int_equal(r.first_oom_event, 3);
        assert_int_equal(r.stopped_on_oom, stop);
        assert_int_equal(r.events, stop ? 4 : 6); /* 2 prelude rows, then rows 2.. */
        assert_int_equal(r.last_event, stop ? 3 : 5);
        assert_true(r.events > seen.event);
        sublet_replay_result_free(&r);
    }
    /* the prelude allocated on a device too small for its block: the OOM is
     * the pre_alloc row's, reported like any other; stop_on_oom stops there */
    o.prelude = SUBLET_PRELUDE_ALLOCATE;
    o.device_memory = 8 * MiB;
    for (int stop = 0; stop < 2; stop++) {
        memset(&seen, 0, sizeof seen);
        o.stop_on_oom = stop;
        sublet_replay_result r = replay(t, &o);
        assert_int_equal(r.first_oom_event, 1);
        assert_int_equal(r.ooms, stop ? 1 : 2);
        assert_int_equal(seen.calls, stop ? 1 : 2);
        assert_int_equal(seen.event, stop ? 1 : 3); /* the last one seen */
        assert_int_equal(r.allocs, stop ? 0 : 1);   /* no recorded row after the stop */
        assert_int_equal(r.events, stop ? 2 : 6);
        assert_true(r.events > r.first_oom_event);
        sublet_replay_result_free(&r);
    }
    sublet_trace_free(t);
}

/* Prelude: pre_alloc blocks are round_size(requested), extended over a
 * large-pool tail of at most 1 MiB (PyTorch would not have split it). */
static void test_prelude(void **state)
{
    (void)state;
    const char *fmt = "seq,action,addr,size,stream,time_us\n"
                      "0,pre_segment,140000000000000,20971520,0,\n"
                      "1,pre_segment,140000041943040,2097152,0,\n"
                      "2,pre_alloc,140000000000000,%llu,0,\n"
                      "3,pre_alloc,140000041943040,1000,0,\n"
                      "4,pre_alloc,140000041944064,512,0,\n"
                      "5,alloc,140000041944576,1000,0,\n";
    struct {
        uint64_t requested, block;
    } cases[] = {
        {19 * MiB + 256 * KiB, 20 * MiB},                 /* tail 0.75 MiB: one block */
        {19 * MiB, 20 * MiB},                             /* tail exactly 1 MiB: one block */
        {19 * MiB - 512, 19 * MiB - 512},                 /* tail 1 MiB + 512: split */
        {18 * MiB + 512 * KiB + 1, 18 * MiB + 512 * KiB + 512}, /* 512-rounded */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char csv[1024];
        snprintf(csv, sizeof csv, fmt, (unsigned long long)cases[i].requested);
        sublet_trace *t = parse(csv);
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.check = 1;
        o.stop_after = 4; /* the prelude only */
        sublet_replay_result r = replay(t, &o);
        assert_int_equal(r.events, 5); /* its rows count as driven */
        assert_int_equal(r.last_event, SUBLET_REPLAY_NONE); /* no recorded row */
        assert_int_equal(r.pre_segments, 2);
        assert_int_equal(r.pre_allocs, 3);
        assert_int_equal(r.errors, 0);
        assert_int_equal(r.stats_end.allocated_bytes[SUBLET_POOL_LARGE].current,
                         (int64_t)cases[i].block);
        assert_int_equal(r.stats_end.allocated_bytes[SUBLET_POOL_SMALL].current, 1024 + 512);
        assert_int_equal(r.stats_end.requested_bytes[SUBLET_POOL_ALL].current,
                         (int64_t)(cases[i].requested + 1512));
        assert_int_equal(r.peak_reserved_bytes, 22 * MiB);
        assert_int_equal(r.fidelity.recorded_peak_reserved_bytes, 22 * MiB);
        assert_int_equal(r.device_allocs, 0); /* seeds are not device allocs */
        sublet_replay_result_free(&r);
        /* the alloc right after the prelude fits the small segment's rest */
        o.stop_after = SUBLET_REPLAY_ALL;
        r = replay(t, &o);
        assert_int_equal(r.fidelity.decisions_matched, 1);
        assert_int_equal(r.fidelity.engine_segment_allocs, 0);
        sublet_replay_result_free(&r);
        sublet_trace_free(t);
    }
    /* a reader that knew the block's size (a snapshot) is believed */
    {
        sublet_trace *m = NULL;
        assert_int_equal(sublet_trace_create(&m), SUBLET_OK);
        sublet_trace_event e = {.kind = SUBLET_TRACE_PRE_SEGMENT, .addr = 140000000000000,
                                .size = 20 * MiB};
        assert_int_equal(sublet_trace_append(m, &e), SUBLET_OK);
        e = (sublet_trace_event){.kind = SUBLET_TRACE_PRE_ALLOC, .addr = 140000000000000,
                                 .size = 3 * MiB / 2, .block_size = 4 * MiB};
        assert_int_equal(sublet_trace_append(m, &e), SUBLET_OK);
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.check = 1;
        sublet_replay_result r = replay(m, &o);
        assert_int_equal(r.errors, 0);
        assert_int_equal(r.stats_end.allocated_bytes[SUBLET_POOL_ALL].current, 4 * MiB);
        assert_int_equal(r.stats_end.requested_bytes[SUBLET_POOL_ALL].current, 3 * MiB / 2);
        sublet_replay_result_free(&r);
        sublet_trace_free(m);
    }
    /* a pre_alloc outside every segment is reported, not fatal */
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,pre_segment,140000000000000,2097152,0,\n"
                            "1,pre_alloc,150000000000000,512,0,\n");
    sublet_replay_result r = replay(t, NULL);
    assert_int_equal(r.errors, 1);
    assert_int_equal(r.pre_allocs, 0);
    assert_non_null(strstr(r.first_error, "pre_alloc"));
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* segment_map / segment_unmap rows replay (tests/test_replay_expandable.c
 * has the rest); a trace recorded mid-run under expandable segments is
 * refused with the reason, unless the prelude is allocated afresh. */
static void test_expandable_rows(void **state)
{
    (void)state;
    sublet_trace *t = parse("seq,action,addr,size,stream,time_us\n"
                            "0,segment_map,140000000000000,2097152,0,\n");
    sublet_replay_result r = replay(t, NULL);
    assert_int_equal(r.events, 1);
    assert_int_equal(r.fidelity.allocs_compared, 0);
    assert_int_equal(r.fidelity.recorded_peak_reserved_bytes, 2 * MiB);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);

    static const char *const midrun[] = {
        "seq,action,addr,size,stream,time_us\n"
        "0,pre_segment,140000000000000,20971520,0,\n"
        "1,pre_alloc,140000000000000,4194304,0,\n"
        "2,segment_map,140000020971520,20971520,0,\n"
        "3,alloc,140000020971520,20971520,0,\n",
        "seq,action,addr,size,stream,time_us\n"
        "0,segment_map,140000000000000,20971520,0,\n"
        "1,alloc,140000000000000,20971520,0,\n"
        "2,free_requested,140000000000000,20971520,0,\n"
        "3,free_completed,140000000000000,20971520,0,\n"
        "4,segment_unmap,140000041943040,20971520,0,\n"};
    static const char *const reason[] = {"1 segment(s) of 20971520 bytes and 1 live block(s)",
                                         "event 4 (line 6) unmaps 20971520 bytes"};
    for (int k = 0; k < 2; k++) {
        t = parse(midrun[k]);
        char err[1024];
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        for (int conf = 0; conf < 2; conf++) {
            o.conf = conf ? "expandable_segments:True" : "";
            o.prelude = SUBLET_PRELUDE_AUTO;
            assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
            assert_non_null(strstr(err, "recorded mid-run under expandable segments"));
            assert_non_null(strstr(err, reason[k]));
            assert_non_null(strstr(err, "reservation"));
            assert_int_equal(r.events, 0);
            sublet_replay_result_free(&r);
            o.prelude = SUBLET_PRELUDE_ADOPT;
            assert_int_equal(sublet_replay_run(t, &o, &r, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
            sublet_replay_result_free(&r);
            o.prelude = SUBLET_PRELUDE_ALLOCATE; /* the approximation, when asked for */
            o.check = 1;
            r = replay(t, &o);
            assert_int_equal(r.events, k ? 5 : 4); /* 2 prelude rows + 2 */
            sublet_replay_result_free(&r);
        }
        sublet_trace_free(t);
    }
    assert_int_equal(sublet_replay_run(NULL, NULL, &r, NULL, 0), SUBLET_ERR_INVALID_ARGUMENT);
}

/* Random, mostly nonsensical traces: the replay never crashes, never leaves
 * the engine inconsistent (check after every event), and reports rows it
 * cannot apply instead of failing. */
static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void test_replay_random(void **state)
{
    (void)state;
    uint64_t rng = 0x5eed;
#define RND() lcg(&rng)
    static const uint64_t sizes[] = {1, 512, 1000, 1048576, 1048577, 2097152, 6297600,
                                     10485760, 20971520, 154435584, 536870912};
    const uint64_t base = UINT64_C(0x7f1000000000);
    uint64_t ooms = 0, retries = 0, deferred = 0, caches = 0, errors = 0, seeded = 0;
    for (int it = 0; it < 120; it++) {
        sublet_trace *t = NULL;
        assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
        int npre = (int)(RND() % 6);
        for (int i = 0; i < npre; i++) {
            /* one draw per statement: the order of evaluation is fixed */
            sublet_trace_event e = {.kind = SUBLET_TRACE_PRE_SEGMENT};
            e.addr = base + (RND() % 8) * 20 * MiB;
            e.size = RND() % 2 ? 2 * MiB : 20 * MiB;
            assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
        }
        for (int i = 0; i < npre; i++) {
            sublet_trace_event e = {.kind = SUBLET_TRACE_PRE_ALLOC};
            e.addr = base + (RND() % 8) * 20 * MiB;
            e.addr += (RND() % 4) * 512;
            e.size = sizes[RND() % 5];
            assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
        }
        for (int i = 0; i < 300; i++) {
            static const uint32_t kinds[] = {
                SUBLET_ACT_ALLOC, SUBLET_ACT_ALLOC, SUBLET_ACT_ALLOC, SUBLET_ACT_FREE_REQUESTED,
                SUBLET_ACT_FREE_REQUESTED, SUBLET_ACT_FREE_COMPLETED, SUBLET_ACT_SEGMENT_ALLOC,
                SUBLET_ACT_SEGMENT_FREE, SUBLET_ACT_SNAPSHOT, SUBLET_ACT_OOM};
            sublet_trace_event e = {.kind = kinds[RND() % 10]};
            e.addr = base + (RND() % 16) * 2 * MiB;
            e.size = sizes[RND() % 11];
            e.stream = RND() % 5 == 0 ? 7 : 0;
            assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
        }
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.check = 1;
        o.placement_hints = it % 2;
        o.device_memory = it % 3 == 0 ? 64 * MiB : (it % 3 == 1 ? GiB : 0);
        o.conf = it % 4 == 0 ? "max_split_size_mb:40,roundup_power2_divisions:4" : "";
        sublet_replay_result r;
        char err[512];
        sublet_status st = sublet_replay_run(t, &o, &r, err, sizeof err);
        if (st != SUBLET_OK)
            fail_msg("iteration %d: %s: %s", it, sublet_status_name(st), err);
        assert_int_equal(r.events, 300 + 2 * npre); /* the prelude's rows count */
        ooms += r.ooms;
        retries += r.alloc_retries;
        deferred += r.deferred_frees;
        caches += r.empty_caches;
        errors += r.errors;
        seeded += r.pre_allocs;
        sublet_replay_result_free(&r);
        sublet_trace_free(t);
    }
    print_message("random replays: %llu OOMs, %llu retries, %llu deferred frees, %llu "
                  "empty_cache, %llu rows not applied, %llu pre_allocs seeded\n",
                  (unsigned long long)ooms, (unsigned long long)retries,
                  (unsigned long long)deferred, (unsigned long long)caches,
                  (unsigned long long)errors, (unsigned long long)seeded);
    assert_true(ooms > 0 && deferred > 0 && caches > 0 && seeded > 0);
#undef RND
}

/* ---- the shared traces ------------------------------------------------------------------ */

/* The state each snapshot ended in (sums over the pickle's final `segments`):
 * bytes of active_allocated blocks and of inactive blocks of split segments.
 * The prelude's block sizes come from the pre_alloc heuristic; these check it. */
static const struct {
    const char *name;
    int64_t allocated, inactive_split;
} k_final[] = {
    {"cs336_attention_microbench.events.csv", 31719936, 528219648},
    {"cs336_lm_forward_mixed_ctx256.events.csv", 28387884032, 450053120},
    {"cs336_lm_fullstep_fp32_ctx128.events.csv", 54873829888, 174312960},
    {"cs336_lm_win.events.csv", 1377753600, 1029776896},
    {"decomfl_opt_zo_fl.events.csv", 1014430208, 233375232},
    {"hf_lora8bit_finetune_notebook.events.csv", 2297283072, 1616002560},
    {"small_cnn_counterfactual.events.csv", 48760832, 37222400},
};

/* Replay one shared trace: every decision must match (checked first, with
 * the context of the first mismatch printed); then, when `full`, every size
 * and the peak reserved bytes too. */
static void replay_shared(const char *dir, const char *name, int full)
{
    sublet_trace *t = load(dir, name);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = PRE_2_14;
    o.check = 1;
    sublet_replay_result r = replay(t, &o);
    const sublet_replay_fidelity *f = &r.fidelity;
    if (f->decisions_matched != f->allocs_compared) {
        print_message("%s: decisions %llu/%llu; first mismatch:\n", name,
                      (unsigned long long)f->decisions_matched,
                      (unsigned long long)f->allocs_compared);
        print_context(t, f->first_decision_mismatch);
    }
    assert_int_equal(r.errors, 0);
    assert_int_equal(f->allocs_compared, sublet_trace_count_kind(t, SUBLET_ACT_ALLOC));
    assert_int_equal(f->decisions_matched, f->allocs_compared);
    if (full) {
        assert_full_fidelity(name, t, &r);
        /* with the recorded placement, best fit picks PyTorch's very block */
        if (f->first_address_mismatch != SUBLET_REPLAY_NONE) {
            print_message("%s: first alloc at another address than PyTorch's:\n", name);
            print_context(t, f->first_address_mismatch);
        }
        assert_int_equal(f->segments_placed_as_recorded, f->engine_segment_allocs);
        assert_int_equal(f->addresses_matched, f->allocs_compared);
        for (size_t k = 0; k < sizeof k_final / sizeof *k_final; k++)
            if (strcmp(k_final[k].name, name) == 0) {
                const sublet_stats *e = &r.stats_end;
                assert_int_equal(e->allocated_bytes[SUBLET_POOL_ALL].current, k_final[k].allocated);
                assert_int_equal(e->inactive_split_bytes[SUBLET_POOL_ALL].current,
                                 k_final[k].inactive_split);
            }
    }
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

/* cs336_lm_forward_mixed_ctx256 starts with an empty_cache() that releases
 * 459 segments: the engine releases exactly those (addresses and sizes). */
static void test_shared_empty_cache_sets(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    sublet_trace *t = load(dir, "cs336_lm_forward_mixed_ctx256.events.csv");
    sublet_replay_result r = replay(t, NULL);
    const sublet_replay_fidelity *f = &r.fidelity;
    print_message("cs336_lm_forward_mixed_ctx256: %llu/%llu empty_cache sets matched, %llu "
                  "segments released (recorded %llu)\n",
                  (unsigned long long)f->empty_cache_sets_matched,
                  (unsigned long long)f->empty_caches_compared,
                  (unsigned long long)f->engine_segment_frees,
                  (unsigned long long)f->recorded_segment_frees);
    assert_int_equal(f->empty_caches_compared, 1);
    assert_int_equal(f->empty_cache_sets_matched, 1);
    assert_int_equal(f->first_empty_cache_mismatch, SUBLET_REPLAY_NONE);
    assert_int_equal(f->recorded_segment_frees, 459);
    assert_int_equal(f->engine_segment_frees, 459);
    assert_int_equal(r.empty_caches, 1);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

static void test_shared_decomfl(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    replay_shared(dir, "decomfl_opt_zo_fl.events.csv", 1);
    replay_shared(dir, "cs336_attention_microbench.events.csv", 1);
}

/* Every other recorded trace: the decisions match.  (Today sizes and peak
 * reserved match exactly as well, and that is asserted too.) */
static void test_shared_all(void **state)
{
    (void)state;
    const char *dir = shared_traces_dir();
    if (!dir)
        skip();
    static const char *const suf[] = {".events.csv"};
    char *names[64];
    size_t n = list_dir(dir, suf, 1, names, 64);
    assert_true(n >= 2);
    for (size_t i = 0; i < n; i++) {
        replay_shared(dir, names[i], 1);
        free(names[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_model_append),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_csv_forms),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_csv_files),
        cmocka_unit_test(test_csv_robust),
        cmocka_unit_test(test_attention_committed),
        cmocka_unit_test(test_stop_after),
        cmocka_unit_test(test_env_ignored),
        cmocka_unit_test(test_conf_error),
        cmocka_unit_test(test_deferred_free),
        cmocka_unit_test(test_deferred_free_order),
        cmocka_unit_test(test_empty_cache_run),
        cmocka_unit_test(test_gc_release_run),
        cmocka_unit_test(test_unknown_free),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_oom_events_prelude),
        cmocka_unit_test(test_prelude),
        cmocka_unit_test(test_expandable_rows),
        cmocka_unit_test(test_empty_cache_set_mismatch),
        cmocka_unit_test(test_replay_random),
        cmocka_unit_test(test_shared_empty_cache_sets),
        cmocka_unit_test(test_shared_decomfl),
        cmocka_unit_test(test_shared_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
