/* The views (sublet/views.h): inputs from bytes and files, the documents of
 * each analysis made by one call, their errors, and the same documents from
 * several threads at once; the CLI's texts, made by the same calls.  (That the CLI prints exactly these documents is
 * checked by the cli_*.sh tests; that Python reads them, by cli_python.sh.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sublet/views.h"
#include "test_data.h"

static char *data_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", testdata_dir(), name);
    return path;
}

static sublet_trace *load(const char *name, sublet_snapshot **snap)
{
    sublet_trace *t = NULL;
    char err[1024] = "";
    assert_int_equal(sublet_input_load(data_path(name), NULL, &t, snap, err, sizeof err),
                     SUBLET_OK);
    assert_non_null(t);
    return t;
}

/* The views' plain arguments: name, settings, device, the event to stop after. */
static sublet_view_args va(const char *name, const char *conf, uint64_t device_memory,
                           uint64_t at)
{
    sublet_view_args a;
    sublet_view_args_init(&a);
    a.name = name;
    a.conf = conf;
    a.device_memory = device_memory;
    a.at = at;
    return a;
}

static void test_input_errors(void **state)
{
    (void)state;
    sublet_trace *t = (sublet_trace *)1;
    sublet_snapshot *s = (sublet_snapshot *)1;
    char err[1024];
    const char junk[] = "\x81\xa5 not a trace";
    sublet_input_bytes in = {junk, sizeof junk - 1, "<junk>"};
    assert_int_not_equal(sublet_input_parse(&in, NULL, &t, &s, err, sizeof err), SUBLET_OK);
    assert_null(t);
    assert_null(s);
    assert_non_null(strstr(err, "<junk>: not a recognised trace format"));
    assert_non_null(strstr(err, "line 1"));
    assert_int_equal(sublet_input_load("/nonexistent/x.csv", NULL, &t, NULL, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.csv: cannot open"));
    in = (sublet_input_bytes){NULL, 5, "x"};
    assert_int_equal(sublet_input_parse(&in, NULL, &t, NULL, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_input_parse(NULL, NULL, &t, NULL, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    /* a truncated gzip names the byte */
    uint8_t *buf;
    size_t n;
    assert_int_equal(sublet_input_read(data_path("cs336_attention_microbench.pickle.gz"), &buf,
                                       &n, err, sizeof err),
                     SUBLET_OK);
    in = (sublet_input_bytes){buf, n / 2, "cut"};
    assert_int_not_equal(sublet_input_parse(&in, NULL, &t, &s, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(err, "cut: gzip byte"));
    /* the whole file: the trace and its snapshot */
    in = (sublet_input_bytes){buf, n, "whole"};
    assert_int_equal(sublet_input_parse(&in, NULL, &t, &s, err, sizeof err), SUBLET_OK);
    assert_non_null(t);
    assert_non_null(s);
    assert_int_equal(sublet_trace_count(t), 97);
    sublet_trace_free(t);
    sublet_snapshot_free(s);
    free(buf);
}

static void test_documents(void **state)
{
    (void)state;
    sublet_snapshot *snap = NULL;
    sublet_trace *t = load("cs336_attention_microbench.pickle.gz", &snap);
    char *doc = NULL, err[1024] = "";
    sublet_view_args a = va("name", NULL, 0, SUBLET_REPLAY_ALL);
    a.flags = SUBLET_VIEW_SUMMARIES;
    assert_int_equal(sublet_view_replay(t, &a, &doc, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(doc, "\"trace\": \"name\""));
    assert_non_null(strstr(doc, "\"events\": 97,"));
    assert_non_null(strstr(doc, "\"memory_summary_at_peak\": \"|====="));
    assert_non_null(strstr(doc, "\"memory_stats_at_peak\": {"));
    assert_int_equal(doc[strlen(doc) - 1], '\n');
    sublet_string_free(doc);
    /* without the flag, no summaries (the CLI's --json) */
    a = va(NULL, NULL, 70u << 20, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_replay(t, &a, &doc, err, sizeof err), SUBLET_OK);
    assert_null(strstr(doc, "memory_summary_at_peak"));
    assert_non_null(strstr(doc, "\"diagnosis\": {")); /* it OOMs on 70 MiB */
    sublet_string_free(doc);
    a = va("n", NULL, 0, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_mincap(t, &a, &doc, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(doc, "\"min_capacity_bytes\": "));
    sublet_string_free(doc);
    a = va("n", NULL, 0, 10);
    a.snapshot = snap;
    assert_int_equal(sublet_view_frag(t, &a, &doc, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(doc, "\"event\": 10,"));
    sublet_string_free(doc);
    a = va("n", NULL, 70u << 20, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_diagnose(t, &a, &doc, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(doc, "\"diagnosis\": {"));
    sublet_string_free(doc);
    const sublet_trace *ts[1] = {t};
    const char *names[1] = {"n"};
    a = va(NULL, NULL, 0, SUBLET_REPLAY_ALL);
    a.threads = 1;
    assert_int_equal(sublet_view_tune(ts, names, 1, &a, &doc, err, sizeof err), SUBLET_OK);
    assert_non_null(strstr(doc, "\"pytorch\": {"));
    sublet_string_free(doc);
    size_t len = 0;
    a = va("dir/n.pickle", NULL, 0, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_report(t, &a, &doc, &len, err, sizeof err), SUBLET_OK);
    assert_int_equal(len, strlen(doc));
    assert_memory_equal(doc, "<!DOCTYPE html>", 15);
    sublet_string_free(doc);
    sublet_trace_free(t);
    sublet_snapshot_free(snap);
}

static void test_document_errors(void **state)
{
    (void)state;
    sublet_trace *t = load("cs336_attention_microbench.events.csv", NULL);
    char *doc = (char *)1, err[1024] = "";
    sublet_view_args a = va("n", "max_split_size_mb:foo", 0, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_replay(t, &a, &doc, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_null(doc);
    assert_non_null(strstr(err, "Invalid value 'foo' for max_split_size_mb"));
    a = va("n", NULL, 0, 1000000);
    assert_int_equal(sublet_view_frag(t, &a, &doc, err, sizeof err), SUBLET_ERR_INVALID_ARGUMENT);
    assert_null(doc);
    assert_non_null(strstr(err, "the trace has 97 events"));
    a = va(NULL, NULL, 0, SUBLET_REPLAY_ALL);
    a.threads = 1;
    assert_int_equal(sublet_view_tune(NULL, NULL, 0, &a, &doc, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    a = va("n", NULL, 0, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_replay(NULL, &a, &doc, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    /* no arguments: the defaults */
    assert_int_equal(sublet_view_replay(NULL, NULL, &doc, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    sublet_trace_free(t);
    /* a replay that fails still gives its document, its error said */
    const char mid[] = "seq,action,addr,size,stream,time_us\n"
                       "0,pre_segment,140000000000000,20971520,0,\n"
                       "1,pre_alloc,140000000000000,4194304,0,\n"
                       "2,segment_map,140000020971520,20971520,0,\n"
                       "3,alloc,140000020971520,20971520,0,\n";
    sublet_input_bytes in = {mid, sizeof mid - 1, "mid"};
    assert_int_equal(sublet_input_parse(&in, NULL, &t, NULL, err, sizeof err), SUBLET_OK);
    a = va("mid", "expandable_segments:True", 0, SUBLET_REPLAY_ALL);
    sublet_status st = sublet_view_replay(t, &a, &doc, err, sizeof err);
    assert_int_not_equal(st, SUBLET_OK);
    assert_non_null(doc);
    assert_non_null(strstr(doc, "\"error\": \"the trace was recorded mid-run"));
    assert_non_null(strstr(err, "recorded mid-run under expandable segments"));
    sublet_string_free(doc);
    sublet_trace_free(t);
}

typedef struct job {
    const sublet_trace *t;
    const char *want;
    int same;
} job;

/* sublet_replay_stream_json gives the whole trace's document, byte for
 * byte (a fitting device and one that OOMs); a cut row is an error and no
 * document. */
static void test_stream_document(void **state)
{
    (void)state;
    static const char *const names[] = {"cs336_attention_microbench.events.csv",
                                        "nonmonotone.events.csv"};
    static const uint64_t devices[] = {0, (uint64_t)64 << 20};
    char err[1024];
    for (size_t i = 0; i < 2; i++) {
        sublet_trace *t = load(names[i], NULL);
        for (size_t d = 0; d < 2; d++) {
            sublet_replay_options o;
            sublet_replay_options_init(&o);
            o.conf = sublet_view_conf(t, NULL, NULL);
            if (devices[d])
                o.device_memory = devices[d];
            sublet_view_options v;
            sublet_view_options_init(&v);
            v.name = names[i];
            for (int text = 0; text < 2; text++) { /* the JSON, then the text */
                char *whole = NULL, *streamed = NULL;
                sublet_status ws = (text ? sublet_replay_text : sublet_replay_json)(
                    t, &o, &v, &whole, err, sizeof err);
                sublet_trace_stream *ts = NULL;
                assert_int_equal(sublet_trace_stream_open(data_path(names[i]), NULL, &ts, err,
                                                          sizeof err),
                                 SUBLET_OK);
                assert_int_equal((text ? sublet_replay_stream_text : sublet_replay_stream_json)(
                                     ts, &o, &v, &streamed, err, sizeof err),
                                 ws);
                assert_non_null(whole);
                assert_non_null(streamed);
                assert_string_equal(streamed, whole);
                if (text) /* the header names the input */
                    assert_true(strncmp(whole, "sublet replay ", 14) == 0);
                sublet_string_free(whole);
                sublet_string_free(streamed);
                sublet_trace_stream_close(ts);
            }
        }
        sublet_trace_free(t);
    }
    /* a row cut short after the replay's last: no document */
    char tmp[] = "/tmp/test_views_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    FILE *in = fopen(data_path("nonmonotone.events.csv"), "r");
    assert_non_null(in);
    char line[4096];
    while (fgets(line, sizeof line, in))
        fputs(line, f);
    fclose(in);
    fputs("alloc,oops\n", f);
    fclose(f);
    sublet_trace_stream *ts = NULL;
    assert_int_equal(sublet_trace_stream_open(tmp, NULL, &ts, err, sizeof err), SUBLET_OK);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.stop_after = 3;
    sublet_view_options v;
    sublet_view_options_init(&v);
    char *doc = (char *)1;
    assert_int_not_equal(sublet_replay_stream_json(ts, &o, &v, &doc, err, sizeof err), SUBLET_OK);
    assert_null(doc);
    assert_true(err[0] != '\0');
    sublet_trace_stream_close(ts);
    remove(tmp);
}

/* The tuning's wall time in a document or a page ("seconds": N, or
 * "replays, N s,") taken out, the one thing two tunings differ in. */
static void cut_after(char *doc, const char *key, char stop)
{
    size_t k = strlen(key);
    for (char *p = doc; (p = strstr(p, key)) != NULL; p += k) {
        char *q = p + k;
        while (*q && *q != stop && *q != '\n' && *q != '}')
            q++;
        memmove(p + k, q, strlen(q) + 1);
    }
}

static void no_seconds(char *doc)
{
    cut_after(doc, "\"seconds\": ", ',');
    cut_after(doc, " replays, ", ',');
}

/* sublet_view_tune_paths: each file as `sublet tune` opens it (a CSV
 * streamed, a snapshot loaded whole), the document sublet_view_tune gives
 * for the traces loaded; a file missing or malformed is the input's error.
 * sublet_report_html_stream with its tuning over a stream of a file (no
 * trace behind it): the page of the trace loaded whole. */
static void test_tune_streams(void **state)
{
    (void)state;
    static const char *const files[] = {"cs336_attention_microbench.events.csv",
                                        "nonmonotone.events.csv",
                                        "cs336_attention_microbench.pickle.gz"};
    char err[1024] = "";
    sublet_trace *t[3];
    const char *paths[3];
    char pathbuf[3][4096];
    for (size_t i = 0; i < 3; i++) {
        t[i] = load(files[i], NULL);
        snprintf(pathbuf[i], sizeof pathbuf[i], "%s", data_path(files[i]));
        paths[i] = pathbuf[i];
    }
    const sublet_trace *tt[3] = {t[0], t[1], t[2]};
    sublet_view_args a = va(NULL, NULL, 0, SUBLET_REPLAY_ALL);
    a.threads = 2;
    for (size_t k = 0; k < 2; k++) { /* two CSVs together; the snapshot alone */
        const sublet_trace *const *tk = k ? tt + 2 : tt;
        const char *const *pk = k ? paths + 2 : paths;
        size_t n = k ? 1 : 2;
        char *whole = NULL, *streamed = NULL;
        assert_int_equal(sublet_view_tune(tk, pk, n, &a, &whole, err, sizeof err), SUBLET_OK);
        assert_int_equal(sublet_view_tune_paths(pk, NULL, n, &a, &streamed, err, sizeof err),
                         SUBLET_OK);
        no_seconds(whole);
        no_seconds(streamed);
        assert_string_equal(streamed, whole);
        assert_non_null(strstr(streamed, "\"pytorch\": {"));
        sublet_string_free(whole);
        sublet_string_free(streamed);
    }
    char *doc = (char *)1;
    const char *missing[1] = {"/nonexistent/t.events.csv"};
    assert_int_equal(sublet_view_tune_paths(missing, NULL, 1, &a, &doc, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_null(doc);
    assert_non_null(strstr(err, "/nonexistent/t.events.csv"));
    assert_int_equal(sublet_view_tune_paths(NULL, NULL, 1, &a, &doc, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);

    /* the report's tuning over a stream with no trace behind it */
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = sublet_view_conf(t[0], NULL, NULL);
    sublet_tune_options to;
    sublet_tune_options_init(&to);
    to.threads = 1;
    sublet_report_options ro;
    sublet_report_options_init(&ro);
    ro.tune = &to;
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = files[0];
    v.flags = SUBLET_VIEW_TUNE;
    char *whole = NULL, *streamed = NULL;
    assert_int_equal(sublet_report_html(t[0], &o, &ro, &v, &whole, err, sizeof err), SUBLET_OK);
    sublet_trace_stream *ts = NULL;
    assert_int_equal(sublet_trace_stream_open(paths[0], NULL, &ts, err, sizeof err), SUBLET_OK);
    assert_null(sublet_trace_stream_trace(ts));
    assert_int_equal(sublet_report_html_stream(ts, &o, &ro, &v, &streamed, err, sizeof err),
                     SUBLET_OK);
    sublet_trace_stream_close(ts);
    no_seconds(whole);
    no_seconds(streamed);
    assert_string_equal(streamed, whole);
    assert_non_null(strstr(streamed, "1050 settings searched"));
    sublet_string_free(whole);
    sublet_string_free(streamed);
    for (size_t i = 0; i < 3; i++)
        sublet_trace_free(t[i]);
}

/* The texts of the CLI (sublet_*_text): each from the same analysis as its
 * JSON, starting as the command prints it; no document without out. */
static void test_texts(void **state)
{
    (void)state;
    const char *name = "cs336_attention_microbench.events.csv";
    sublet_trace *t = load(name, NULL);
    char err[1024], *doc = NULL;
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = sublet_view_conf(t, NULL, NULL);
    o.device_memory = (uint64_t)3 << 30; /* it OOMs there */
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = name;
    sublet_trace_stream *ts = NULL;
    assert_int_equal(sublet_trace_stream_from_trace(t, &ts), SUBLET_OK);
    assert_int_equal(sublet_frag_text_stream(ts, &o, &v, &doc, err, sizeof err), SUBLET_OK);
    assert_true(strncmp(doc, "sublet frag cs336_attention_microbench.events.csv\n", 50) == 0);
    sublet_string_free(doc);
    assert_int_equal(sublet_diagnose_text_stream(ts, &o, NULL, &v, &doc, err, sizeof err),
                     SUBLET_OK);
    assert_true(strncmp(doc, "sublet diagnose cs336_attention_microbench.events.csv\n", 54) == 0);
    sublet_string_free(doc);
    assert_int_equal(sublet_frag_text_stream(ts, &o, &v, NULL, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    sublet_trace_stream_close(ts);

    sublet_mincap_result m;
    assert_int_equal(sublet_replay_min_capacity(t, &o, 0, &m, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_mincap_result_text(&m, &o, &v, &doc), SUBLET_OK);
    assert_non_null(strstr(doc, "\nmin capacity:         "));
    sublet_string_free(doc);
    assert_int_equal(sublet_mincap_result_text(&m, &o, &v, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_mincap_result_free(&m);

    sublet_tune_options to;
    sublet_tune_options_init(&to);
    to.threads = 1;
    const sublet_trace *ts1[1] = {t};
    const char *names[1] = {name};
    assert_int_equal(sublet_tune_text(ts1, names, 1, &to, &doc, err, sizeof err), SUBLET_OK);
    assert_true(strncmp(doc, "sublet tune: 1 trace, device ", 29) == 0);
    sublet_string_free(doc);
    sublet_trace_free(t);
}

static void *replay_job(void *arg)
{
    job *j = arg;
    j->same = 1;
    for (int i = 0; i < 4; i++) {
        char *doc = NULL, err[512];
        sublet_view_args a = va("n", NULL, 70u << 20, SUBLET_REPLAY_ALL);
        if (sublet_view_replay(j->t, &a, &doc, err, sizeof err) != SUBLET_OK ||
            strcmp(doc, j->want) != 0)
            j->same = 0;
        sublet_string_free(doc);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    sublet_trace *t = load("cs336_attention_microbench.events.csv", NULL);
    char *want = NULL, err[512];
    sublet_view_args a = va("n", NULL, 70u << 20, SUBLET_REPLAY_ALL);
    assert_int_equal(sublet_view_replay(t, &a, &want, err, sizeof err), SUBLET_OK);
    pthread_t th[4];
    job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){t, want, 0};
        assert_int_equal(pthread_create(&th[i], NULL, replay_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(jobs[i].same);
    }
    sublet_string_free(want);
    sublet_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input_errors),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_document_errors),
        cmocka_unit_test(test_stream_document),
        cmocka_unit_test(test_tune_streams),
        cmocka_unit_test(test_texts),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
