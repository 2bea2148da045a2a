/* sublet — traces as streams (sublet/trace_stream.h) and the replay over one
 * (sublet_replay_stream): the same events, prelude, extras and replay result
 * as the trace loaded whole, at every chunk size down to one byte a read
 * and one event a call (with and without the reader thread: the open
 * options' stream_thread); the same error texts for malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sublet/replay.h"
#include "sublet/trace_stream.h"

static char *path_of(const char *name)
{
    const char *dir = getenv("SUBLET_TESTDATA");
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 1024, "%s/%s", dir ? dir : "tests/data", name);
    return p;
}

static const char *k_traces[] = {
    "cs336_attention_microbench.events.csv",
    "nonmonotone.events.csv",
    "../../fuzz/seeds/fuzz_trace_log/stacks.slog",
    "../../fuzz/seeds/fuzz_trace_log/plain.slog",
    "../../fuzz/seeds/fuzz_trace_log/torn.slog",
    "rmm_synthetic.rmm.csv",
    "kineto_synthetic.trace.json",
};

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Every event, the prelude and the extras of the stream equal the trace's. */
static void check_stream_equals(const char *path, const sublet_trace *t, size_t chunk, size_t cap,
                                int thread)
{
    sublet_trace_load_options lo = {0};
    lo.read_chunk = chunk;
    lo.stream_thread = thread ? SUBLET_STREAM_THREAD_ALWAYS : SUBLET_STREAM_THREAD_NEVER;
    sublet_trace_stream *ts = NULL;
    char err[512];
    assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err), SUBLET_OK);
    assert_true(sublet_trace_stream_bounded(ts));
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(ts, &pre);
    assert_int_equal(npre, sublet_trace_prelude_count(t));
    if (npre)
        assert_memory_equal(pre, sublet_trace_events(t), npre * sizeof *pre);
    assert_int_equal(sublet_trace_stream_format(ts), sublet_trace_source_format(t));
    assert_true(same_str(sublet_trace_stream_settings(ts), sublet_trace_settings(t)));
    assert_int_equal(sublet_trace_stream_device_memory(ts), sublet_trace_device_memory(t));
    assert_int_equal(sublet_trace_stream_device(ts), sublet_trace_device(t));
    sublet_trace_event *buf = malloc(cap * sizeof *buf);
    assert_non_null(buf);
    size_t at = npre, n;
    do {
        assert_int_equal(sublet_trace_stream_next(ts, buf, cap, &n, err, sizeof err), SUBLET_OK);
        assert_true(at + n <= sublet_trace_count(t));
        for (size_t k = 0; k < n; k++) {
            const sublet_trace_event *w = sublet_trace_at(t, at + k);
            assert_memory_equal(&buf[k], w, sizeof *w);
            /* a stack is known by the time an event names it */
            const sublet_trace_frame *fs, *fw;
            size_t ns = sublet_trace_stream_stack(ts, buf[k].frames, &fs);
            size_t nw = sublet_trace_stack(t, w->frames, &fw);
            assert_int_equal(ns, nw);
            for (size_t j = 0; j < ns; j++) {
                assert_string_equal(fs[j].filename, fw[j].filename);
                assert_string_equal(fs[j].name, fw[j].name);
                assert_int_equal(fs[j].line, fw[j].line);
            }
        }
        at += n;
    } while (n);
    assert_int_equal(at, sublet_trace_count(t));
    assert_int_equal(sublet_trace_stream_rows(ts), sublet_trace_count(t));
    assert_true(same_str(sublet_trace_stream_notice(ts), sublet_trace_notice(t)));
    assert_int_equal(sublet_trace_stream_stack_count(ts), sublet_trace_stack_count(t));
    free(buf);
    sublet_trace_stream_close(ts);
}

static void test_events_at_every_chunk_size(void **state)
{
    (void)state;
    const size_t chunks[] = {1, 2, 3, 7, 61, 4096, 0};
    const size_t caps[] = {1, 3, 1000};
    for (size_t f = 0; f < sizeof k_traces / sizeof *k_traces; f++) {
        const char *path = path_of(k_traces[f]);
        if (access(path, R_OK) != 0)
            continue;
        sublet_trace *t = NULL;
        char err[512];
        assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
        /* without and with the reader thread (these files are small: none by default) */
        for (int thread = 0; thread < 2; thread++)
            for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
                check_stream_equals(path, t, chunks[c], caps[c % 3], thread);
        sublet_trace_free(t);
    }
}

/* The results of the two replays, summaries compared as texts. */
static void assert_results_equal(sublet_replay_result *a, sublet_replay_result *b)
{
    assert_true(same_str(a->summary_peak, b->summary_peak));
    assert_true(same_str(a->summary_end, b->summary_end));
    sublet_replay_result x = *a, y = *b;
    x.summary_peak = x.summary_end = y.summary_peak = y.summary_end = NULL;
    assert_memory_equal(&x, &y, sizeof x);
}

typedef struct ooms {
    uint64_t event[64], line[64];
    size_t n;
} ooms;

static void on_oom(void *user, uint64_t event, uint64_t line, uint64_t size, sublet_stream stream,
                   const char *message)
{
    (void)size;
    (void)stream;
    (void)message;
    ooms *o = user;
    if (o->n < 64) {
        o->event[o->n] = event;
        o->line[o->n++] = line;
    }
}

static void test_replay_stream_equals_run(void **state)
{
    (void)state;
    const uint64_t memories[] = {0, (uint64_t)1 << 30, (uint64_t)64 << 20};
    const uint64_t stops[] = {SUBLET_REPLAY_ALL, 10, 250};
    for (size_t f = 0; f < sizeof k_traces / sizeof *k_traces; f++) {
        const char *path = path_of(k_traces[f]);
        if (access(path, R_OK) != 0)
            continue;
        sublet_trace *t = NULL;
        char err[512];
        assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
        for (size_t m = 0; m < 3; m++) {
            for (size_t k = 0; k < 3; k++) {
                sublet_replay_options o;
                sublet_replay_options_init(&o);
                o.conf = sublet_trace_settings(t) ? sublet_trace_settings(t) : "";
                o.device_memory = memories[m];
                o.stop_after = stops[k];
                o.capture_summary = 1;
                o.check = m == 2;
                o.on_oom = on_oom;
                ooms wo = {0}, so = {0};
                o.oom_user = &wo;
                sublet_replay_result rw, rs;
                char ew[512], es[512];
                sublet_status sw = sublet_replay_run(t, &o, &rw, ew, sizeof ew);
                sublet_trace_load_options lo = {0};
                lo.read_chunk = k == 0 ? 5 : 0; /* tiny reads too */
                sublet_trace_stream *ts = NULL;
                assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err),
                                 SUBLET_OK);
                o.oom_user = &so;
                sublet_status ss = sublet_replay_stream(ts, &o, &rs, es, sizeof es);
                assert_int_equal(ss, sw);
                if (sw != SUBLET_OK)
                    assert_string_equal(es, ew);
                assert_results_equal(&rs, &rw);
                assert_int_equal(so.n, wo.n);
                assert_memory_equal(so.event, wo.event, sizeof so.event);
                assert_memory_equal(so.line, wo.line, sizeof so.line);
                sublet_replay_result_free(&rw);
                sublet_replay_result_free(&rs);
                sublet_trace_stream_close(ts);
            }
        }
        sublet_trace_free(t);
    }
}

/* A file of `text`; returns its path (static buffer). */
static const char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/sublet_stream_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_malformed_same_error(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "seq,action,addr,size,stream\n",
        "seq,action,addr,size,stream,time_us\n0,pre_segment,0,2097152,0,\n1,alloc,0,512,0,\n"
        "2,alloc,512,x,0,\n",
        "seq,action,addr,size,stream,time_us\n0,alloc,0,512,0,\n1,pre_alloc,0,512,0,\n",
        "seq,action,addr,size,stream,time_us\n0,alloc,0,512,0,\n\n1,alloc,1024,512,0,\n",
        "seq,action,addr,size,stream,time_us\n0,alloc,0,512,0,\n1,free_requested,0,512,0,\n"
        "2,free_completed,0,512",
        "seq,action,addr,size,stream,time_us\r\n0,alloc,0,512,0,1\r\n1,bogus,0,512,0,\r\n",
        /* RMM logs (read twice: the prelude first): a bad first row, a bad row after a
         * free that implies a prelude row, a bad row after the last free */
        "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:01.5,allocate,0x100,x,0x0\n",
        "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:01.5,free,0x900,512,0x0\n"
        "1,00:00:01.6,allocate,0x100,512,0x0\n1,00:00:01.7,allocate,zz,512,0x0\n",
        "Thread,Time,Action,Pointer,Size,Stream\r\n1,1.5,allocate,0x100,512,0x0\r\n"
        "1,1.6,free,0x100,512,0x0\r\n\r\n1,1.7,reallocate,0x100,512,0x0\r\n",
        "Thread,Time,Action,Pointer,Size\n1,1.5,allocate,0x100,512\n",
        /* Kineto traces the stream cannot follow are read whole: a syntax error after
         * memory events, a memory event the reader refuses, a second traceEvents */
        "{\"traceEvents\":[{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":1,\"args\":{\"Device "
        "Type\":1,\"Device Id\":0,\"Addr\":4096,\"Bytes\":512}},{\"ph\":\"X\",\"name\":]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":1,\"args\":{\"Device "
        "Type\":1,\"Device Id\":0,\"Addr\":4096}}]}",
        "{\"traceEvents\":[{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":1,\"args\":{\"Device "
        "Type\":1,\"Device Id\":0,\"Addr\":4096,\"Bytes\":512}}],\"traceEvents\":[]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *path = write_tmp(bad[i]);
        sublet_trace *t = NULL;
        char ew[512] = "", es[512] = "";
        sublet_status sw = sublet_trace_load(path, NULL, &t, ew, sizeof ew);
        sublet_trace_stream *ts = NULL;
        sublet_trace_load_options lo = {0};
        lo.read_chunk = 1 + i % 3;
        sublet_status ss = sublet_trace_stream_open(path, &lo, &ts, es, sizeof es);
        if (ss == SUBLET_OK) {
            sublet_replay_result r;
            ss = sublet_replay_stream(ts, NULL, &r, es, sizeof es);
            sublet_replay_result_free(&r);
            if (ss == SUBLET_OK) { /* the replay ended early: the rest still reads */
                sublet_trace_event ev[8];
                size_t n = 1;
                while (ss == SUBLET_OK && n)
                    ss = sublet_trace_stream_next(ts, ev, 8, &n, es, sizeof es);
            }
            sublet_trace_stream_close(ts);
        }
        assert_int_equal(ss, sw);
        if (sw != SUBLET_OK)
            assert_string_equal(es, ew);
        sublet_trace_free(t);
        unlink(path);
    }
}

static void test_rewind_and_memory_trace(void **state)
{
    (void)state;
    const char *path = path_of(k_traces[0]);
    sublet_trace_stream *ts = NULL;
    char err[512];
    assert_int_equal(sublet_trace_stream_open(path, NULL, &ts, err, sizeof err), SUBLET_OK);
    sublet_replay_result a, b;
    assert_int_equal(sublet_replay_stream(ts, NULL, &a, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_stream_rewind(ts, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_replay_stream(ts, NULL, &b, err, sizeof err), SUBLET_OK);
    assert_results_equal(&a, &b);
    sublet_trace_stream_close(ts);
    /* a stream over the trace in memory, partly read: the copying window */
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_stream_from_trace(t, &ts), SUBLET_OK);
    assert_int_equal(sublet_trace_stream_trace(ts), t);
    sublet_replay_result c;
    assert_int_equal(sublet_replay_stream(ts, NULL, &c, err, sizeof err), SUBLET_OK);
    assert_results_equal(&a, &c);
    sublet_replay_result_free(&a);
    sublet_replay_result_free(&b);
    sublet_replay_result_free(&c);
    sublet_trace_stream_close(ts);
    sublet_trace_free(t);
    assert_int_equal(sublet_trace_detect_path(path), SUBLET_FORMAT_EVENTS_CSV);
    assert_int_equal(sublet_trace_detect_path("/nonexistent"), SUBLET_FORMAT_UNKNOWN);
    assert_int_not_equal(sublet_trace_stream_open("/nonexistent", NULL, &ts, err, sizeof err),
                         SUBLET_OK);
    assert_non_null(strstr(err, "/nonexistent: cannot open"));
}

/* Runs of releases longer than the rows a borrow keeps in front
 * (SL_STREAM_KEEP, 64) across the stream's chunks (4,096 rows with the
 * thread, 256 without): cycles of `segs` segments of 20 MiB, each made by
 * its alloc, all freed, then an empty_cache (a run of `segs` segment_free
 * rows).  The replay streamed, with the thread and without, equals the
 * replay of the trace loaded whole, which matches every decision and every
 * empty_cache. */
static void test_long_release_runs_across_chunks(void **state)
{
    (void)state;
    const size_t cycles = 24, segs = 150 + 7; /* 5 x 157 rows a cycle: boundaries fall all over */
    const uint64_t seg = (uint64_t)20 << 20, base = (uint64_t)1 << 40;
    size_t cap = 80 * cycles * segs * 5 + 128, len = 0, row = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    len += (size_t)snprintf(b + len, cap - len, "seq,action,addr,size,stream,time_us\n");
    for (size_t c = 0; c < cycles; c++) {
        for (size_t k = 0; k < segs; k++) {
            unsigned long long a = base + (c % 2 * segs + k) * (seg + ((uint64_t)2 << 20));
            len += (size_t)snprintf(b + len, cap - len, "%zu,segment_alloc,%llu,%llu,0,\n", row++,
                                    a, (unsigned long long)seg);
            len += (size_t)snprintf(b + len, cap - len, "%zu,alloc,%llu,%llu,0,\n", row++, a,
                                    (unsigned long long)seg);
        }
        for (size_t k = 0; k < segs; k++) {
            unsigned long long a = base + (c % 2 * segs + k) * (seg + ((uint64_t)2 << 20));
            len += (size_t)snprintf(b + len, cap - len, "%zu,free_requested,%llu,%llu,0,\n",
                                    row++, a, (unsigned long long)seg);
            len += (size_t)snprintf(b + len, cap - len, "%zu,free_completed,%llu,%llu,0,\n",
                                    row++, a, (unsigned long long)seg);
        }
        for (size_t k = 0; k < segs; k++) {
            unsigned long long a = base + (c % 2 * segs + k) * (seg + ((uint64_t)2 << 20));
            len += (size_t)snprintf(b + len, cap - len, "%zu,segment_free,%llu,%llu,0,\n", row++,
                                    a, (unsigned long long)seg);
        }
    }
    assert_true(len < cap);
    b[len] = '\0';
    const char *path = write_tmp(b);
    free(b);
    sublet_trace *t = NULL;
    char err[512];
    assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.capture_summary = 1;
    sublet_replay_result rw;
    assert_int_equal(sublet_replay_run(t, &o, &rw, err, sizeof err), SUBLET_OK);
    assert_int_equal(rw.events, cycles * segs * 5);
    assert_int_equal(rw.fidelity.allocs_compared, cycles * segs);
    assert_int_equal(rw.fidelity.decisions_matched, cycles * segs);
    assert_int_equal(rw.fidelity.empty_caches_compared, cycles);
    assert_int_equal(rw.fidelity.empty_cache_sets_matched, cycles);
    for (int thread = 0; thread < 2; thread++) {
        sublet_trace_load_options lo = {0};
        lo.stream_thread = thread ? SUBLET_STREAM_THREAD_ALWAYS : SUBLET_STREAM_THREAD_NEVER;
        sublet_trace_stream *ts = NULL;
        assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err), SUBLET_OK);
        sublet_replay_result rs;
        assert_int_equal(sublet_replay_stream(ts, &o, &rs, err, sizeof err), SUBLET_OK);
        assert_results_equal(&rs, &rw);
        sublet_replay_result_free(&rs);
        sublet_trace_stream_close(ts);
    }
    sublet_replay_result_free(&rw);
    sublet_trace_free(t);
    unlink(path);
}

/* A Kineto trace whose memory events are in time order but for one that
 * comes `late` events after its place: within the stream's window (65,536
 * events) it streams, beyond it the stream reads the file whole; the events
 * are the whole reader's either way. */
static void check_kineto_order(size_t late, int want_bounded)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/sublet_kineto_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("{\"traceEvents\":[", f);
    for (size_t i = 0; i <= late; i++) /* the last one sorts first */
        fprintf(f, "%s{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":%zu,\"args\":{\"Device Type\":1,"
                   "\"Device Id\":0,\"Addr\":%zu,\"Bytes\":512}}",
                i ? "," : "", i < late ? 1000 + i : (size_t)1, 4096 * (i + 1));
    fputs("]}\n", f);
    assert_int_equal(fclose(f), 0);
    sublet_trace *t = NULL;
    char err[512];
    assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
    for (int thread = 0; thread < 2; thread++) {
        sublet_trace_load_options lo = {0};
        lo.stream_thread = thread ? SUBLET_STREAM_THREAD_ALWAYS : SUBLET_STREAM_THREAD_NEVER;
        sublet_trace_stream *ts = NULL;
        assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err), SUBLET_OK);
        assert_int_equal(sublet_trace_stream_bounded(ts), want_bounded);
        assert_int_equal(sublet_trace_stream_format(ts), SUBLET_FORMAT_KINETO_JSON);
        sublet_trace_event ev[1000];
        size_t n, at = sublet_trace_stream_prelude(ts, NULL);
        assert_int_equal(at, sublet_trace_prelude_count(t));
        while (sublet_trace_stream_next(ts, ev, 1000, &n, err, sizeof err) == SUBLET_OK && n) {
            assert_true(at + n <= sublet_trace_count(t));
            assert_memory_equal(ev, sublet_trace_at(t, at), n * sizeof *ev);
            at += n;
        }
        assert_int_equal(at, sublet_trace_count(t));
        assert_int_equal(sublet_trace_count(t), late + 1);
        assert_int_equal(sublet_trace_at(t, 0)->time_us, 1); /* the late one, first */
        sublet_trace_stream_close(ts);
    }
    sublet_trace_free(t);
    unlink(path);
}

static void test_kineto_order_window(void **state)
{
    (void)state;
    check_kineto_order(65536, 1); /* the window's edge: streamed */
    check_kineto_order(65537, 0); /* one more: read whole */
}

/* sublet_trace_stream_info gives sublet_trace_info_get's figures (after a
 * partial read too: it rewinds), a binary copy gives the same rows and
 * extras, and the min-capacity search over a stream gives the whole trace's
 * answer, probes and replay at the minimum. */
static void test_info_and_mincap(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof k_traces / sizeof *k_traces; f++) {
        const char *path = path_of(k_traces[f]);
        if (access(path, R_OK) != 0)
            continue;
        sublet_trace *t = NULL;
        char err[512];
        assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
        sublet_trace_stream *ts = NULL;
        sublet_trace_load_options lo = {0};
        lo.read_chunk = 7;
        assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err), SUBLET_OK);
        sublet_trace_event ev[3];
        size_t got;
        assert_int_equal(sublet_trace_stream_next(ts, ev, 3, &got, err, sizeof err), SUBLET_OK);
        sublet_trace_info wi, si;
        assert_int_equal(sublet_trace_info_get(t, &wi), SUBLET_OK);
        assert_int_equal(sublet_trace_stream_info(ts, &si, err, sizeof err), SUBLET_OK);
        assert_memory_equal(&wi, &si, sizeof wi);
        assert_int_equal(sublet_trace_stream_rows(ts), sublet_trace_count(t));

        /* the binary copy: the same rows, twice (rewound), the same extras */
        sublet_trace_stream *c = NULL;
        assert_int_equal(sublet_trace_stream_copy(ts, &c, err, sizeof err), SUBLET_OK);
        for (int pass = 0; pass < 2; pass++) {
            size_t i = sublet_trace_prelude_count(t);
            while (sublet_trace_stream_next(c, ev, 3, &got, err, sizeof err) == SUBLET_OK && got)
                for (size_t k = 0; k < got; k++, i++)
                    assert_memory_equal(&ev[k], sublet_trace_at(t, i), sizeof ev[k]);
            assert_int_equal(i, sublet_trace_count(t));
            assert_int_equal(sublet_trace_stream_rows(c), sublet_trace_count(t));
            assert_int_equal(sublet_trace_stream_rewind(c, err, sizeof err), SUBLET_OK);
        }
        assert_true(same_str(sublet_trace_stream_settings(c), sublet_trace_settings(t)));
        assert_true(same_str(sublet_trace_stream_notice(c), sublet_trace_notice(t)));
        assert_int_equal(sublet_trace_stream_stack_count(c), sublet_trace_stack_count(t));
        assert_int_equal(sublet_trace_stream_bounded(c), 1);
        sublet_trace_stream_close(c);

        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.conf = sublet_trace_settings(t) ? sublet_trace_settings(t) : "";
        sublet_mincap_result mw, ms;
        sublet_status a = sublet_replay_min_capacity(t, &o, 0, &mw, err, sizeof err);
        sublet_status b = sublet_replay_min_capacity_stream(ts, &o, 0, &ms, err, sizeof err);
        assert_int_equal(a, b);
        if (a == SUBLET_OK) {
            assert_int_equal(mw.min_capacity_bytes, ms.min_capacity_bytes);
            assert_int_equal(mw.peak_requested_bytes, ms.peak_requested_bytes);
            assert_int_equal(mw.replays, ms.replays);
            assert_int_equal(mw.nprobes, ms.nprobes);
            for (size_t i = 0; i < mw.nprobes; i++) {
                assert_int_equal(mw.probes[i].bytes, ms.probes[i].bytes);
                assert_int_equal(mw.probes[i].ok, ms.probes[i].ok);
                assert_int_equal(mw.probes[i].checked, ms.probes[i].checked);
            }
            assert_int_equal(mw.monotone, ms.monotone);
            assert_results_equal(&mw.at_min, &ms.at_min);
        }
        sublet_mincap_result_free(&mw);
        sublet_mincap_result_free(&ms);
        sublet_trace_stream_close(ts);
        sublet_trace_free(t);
    }
}

/* Readers of one stream (sublet_trace_stream_reader): of a binary copy,
 * each at its own position (two interleaved, and four threads reading at
 * once), of a trace in memory likewise, the same rows and extras as the
 * trace; a stream that is neither is refused. */
typedef struct rd_job {
    sublet_trace_stream *r;
    const sublet_trace *t;
    int same;
} rd_job;

static int reads_as(sublet_trace_stream *r, const sublet_trace *t, size_t chunk)
{
    sublet_trace_event ev[5];
    char err[256];
    size_t got, i = sublet_trace_prelude_count(t);
    int same = 1;
    while (sublet_trace_stream_next(r, ev, chunk, &got, err, sizeof err) == SUBLET_OK && got)
        for (size_t k = 0; k < got; k++, i++)
            same &= i < sublet_trace_count(t) &&
                    memcmp(&ev[k], sublet_trace_at(t, i), sizeof ev[k]) == 0;
    return same && i == sublet_trace_count(t);
}

static void *rd_thread(void *p)
{
    rd_job *j = p;
    j->same = reads_as(j->r, j->t, 5);
    return NULL;
}

static void test_readers(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof k_traces / sizeof *k_traces; f++) {
        const char *path = path_of(k_traces[f]);
        if (access(path, R_OK) != 0)
            continue;
        sublet_trace *t = NULL;
        char err[512];
        assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
        sublet_trace_stream *ts = NULL, *c = NULL, *m = NULL;
        assert_int_equal(sublet_trace_stream_open(path, NULL, &ts, err, sizeof err), SUBLET_OK);
        if (sublet_trace_stream_bounded(ts)) {
            sublet_trace_stream *no = NULL;
            assert_int_equal(sublet_trace_stream_reader(ts, &no), SUBLET_ERR_UNSUPPORTED);
            assert_null(no);
        }
        assert_int_equal(sublet_trace_stream_copy(ts, &c, err, sizeof err), SUBLET_OK);
        assert_int_equal(sublet_trace_stream_from_trace(t, &m), SUBLET_OK);
        sublet_trace_stream *src[2] = {c, m};
        for (int w = 0; w < 2; w++) {
            /* two readers, interleaved: each keeps its own place */
            sublet_trace_stream *a = NULL, *b = NULL;
            assert_int_equal(sublet_trace_stream_reader(src[w], &a), SUBLET_OK);
            assert_int_equal(sublet_trace_stream_reader(src[w], &b), SUBLET_OK);
            sublet_trace_event ea[2], eb[3];
            size_t ga, gb, i = sublet_trace_prelude_count(t), jb = i;
            for (;;) {
                assert_int_equal(sublet_trace_stream_next(a, ea, 2, &ga, err, sizeof err),
                                 SUBLET_OK);
                assert_int_equal(sublet_trace_stream_next(b, eb, 3, &gb, err, sizeof err),
                                 SUBLET_OK);
                for (size_t k = 0; k < ga; k++, i++)
                    assert_memory_equal(&ea[k], sublet_trace_at(t, i), sizeof ea[k]);
                for (size_t k = 0; k < gb; k++, jb++)
                    assert_memory_equal(&eb[k], sublet_trace_at(t, jb), sizeof eb[k]);
                if (!ga && !gb)
                    break;
            }
            assert_int_equal(i, sublet_trace_count(t));
            assert_int_equal(jb, sublet_trace_count(t));
            assert_int_equal(sublet_trace_stream_rows(a), sublet_trace_count(t));
            const sublet_trace_event *pa, *pt;
            assert_int_equal(sublet_trace_stream_prelude(a, &pa), sublet_trace_prelude_count(t));
            pt = sublet_trace_events(t);
            for (size_t k = 0; k < sublet_trace_prelude_count(t); k++)
                assert_memory_equal(&pa[k], &pt[k], sizeof pa[k]);
            assert_true(same_str(sublet_trace_stream_settings(a), sublet_trace_settings(t)));
            assert_int_equal(sublet_trace_stream_device_memory(a), sublet_trace_device_memory(t));
            /* rewound: the same rows again */
            assert_int_equal(sublet_trace_stream_rewind(a, err, sizeof err), SUBLET_OK);
            assert_true(reads_as(a, t, 4));
            sublet_trace_stream_close(a);
            sublet_trace_stream_close(b);
            /* four threads at once */
            pthread_t th[4];
            rd_job j[4];
            for (int k = 0; k < 4; k++) {
                j[k] = (rd_job){NULL, t, 0};
                assert_int_equal(sublet_trace_stream_reader(src[w], &j[k].r), SUBLET_OK);
                assert_int_equal(pthread_create(&th[k], NULL, rd_thread, &j[k]), 0);
            }
            for (int k = 0; k < 4; k++) {
                pthread_join(th[k], NULL);
                assert_true(j[k].same);
                sublet_trace_stream_close(j[k].r);
            }
        }
        sublet_trace_stream_close(m);
        sublet_trace_stream_close(c);
        sublet_trace_stream_close(ts);
        sublet_trace_free(t);
    }
}

/* The reader thread is an option of the open call: a value that is not a
 * sublet_stream_thread is refused. */
static void test_thread_option(void **state)
{
    (void)state;
    const char *path = path_of(k_traces[0]);
    char err[512];
    sublet_trace_stream *ts = NULL;
    sublet_trace_load_options lo = {0};
    lo.stream_thread = 3;
    assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_null(ts);
    assert_string_equal(err, "stream_thread 3: not a sublet_stream_thread");
    lo.stream_thread = -1;
    assert_int_equal(sublet_trace_stream_open(path, &lo, &ts, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_null(ts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_at_every_chunk_size),
        cmocka_unit_test(test_replay_stream_equals_run),
        cmocka_unit_test(test_malformed_same_error),
        cmocka_unit_test(test_rewind_and_memory_trace),
        cmocka_unit_test(test_info_and_mincap),
        cmocka_unit_test(test_long_release_runs_across_chunks),
        cmocka_unit_test(test_kineto_order_window),
        cmocka_unit_test(test_thread_option),
        cmocka_unit_test(test_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
