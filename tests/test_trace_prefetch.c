/* sublet — the streamed readers' reader thread (src/formats/trace_stream.c,
 * the open options' stream_thread): with the thread and without it, a stream gives the
 * same events, rows, stacks, notice and errors in the same order as the trace
 * loaded whole: over chunk boundaries (4,096 events), with stacks recorded
 * mid-stream, a malformed CSV row or a corrupt log block after thousands of
 * good events (the events before it first, then the error), a torn tail (the
 * notice), gzip'd input; the same through the reads the replay makes, which
 * borrow the rows where the thread decoded them (sl_trace_stream_borrow, rows
 * kept in front of them); and a stream closed or rewound while the thread is
 * ahead.  Inputs are built here (a CSV by printf, a log with the log's own
 * block framing), so each case is exact and fast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "formats/event_log_format.h"
#include "formats/trace_readers.h" /* sl_trace_stream_borrow */
#include "sublet/replay.h"
#include "sublet/trace_stream.h"

/* The open options: the reader thread always (on), or never. */
static sublet_trace_load_options thread_opts(int on)
{
    sublet_trace_load_options lo = {0};
    lo.stream_thread = on ? SUBLET_STREAM_THREAD_ALWAYS : SUBLET_STREAM_THREAD_NEVER;
    return lo;
}

static char *tmp_path(const char *suffix)
{
    static char buf[4][128];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 128, "/tmp/sublet_prefetch_%d_%d%s", (int)getpid(), k, suffix);
    return p;
}

/* ---- inputs ------------------------------------------------------------------------------------ */

/* An events CSV of n recorded rows (alloc, free_requested, free_completed in
 * turn) after two prelude rows; row `bad` (1-based among the recorded rows,
 * 0: none) has a size that is not a number.  gz: written through gzip. */
static void write_csv(const char *path, size_t n, size_t bad, int gz)
{
    size_t cap = 64 * (n + 4), len = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    len += (size_t)snprintf(b + len, cap - len, "seq,action,addr,size,stream,time_us\n"
                                                "0,pre_segment,0,1073741824,0,\n"
                                                "1,pre_alloc,0,512,0,\n");
    for (size_t i = 1; i <= n; i++) {
        static const char *const acts[] = {"alloc", "free_requested", "free_completed"};
        unsigned long long addr = 4096 + 4096 * ((i - 1) / 3 % 1000);
        if (i == bad)
            len += (size_t)snprintf(b + len, cap - len, "%zu,alloc,%llu,12x,0,\n", i + 1, addr);
        else
            len += (size_t)snprintf(b + len, cap - len, "%zu,%s,%llu,%zu,%zu,%zu\n", i + 1,
                                    acts[(i - 1) % 3], addr, 512 + (i / 3) % 77, i % 2, 1000 + i);
    }
    if (gz) {
        gzFile g = gzopen(path, "wb1");
        assert_non_null(g);
        assert_int_equal(gzwrite(g, b, (unsigned)len), (int)len);
        assert_int_equal(gzclose(g), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
    free(b);
}

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_varint(bytes *b, uint64_t v)
{
    uint8_t t[10];
    put(b, t, sl_put_varint(t, v));
}

static void put_string(bytes *b, const char *s)
{
    put_varint(b, strlen(s));
    put(b, s, strlen(s));
}

/* An event log of `blocks` blocks of `per` events each, an INFO record first,
 * a new stack recorded at the start of every block (events name the stacks
 * recorded so far; stack 4 has no frames), a LOST record in block 1.
 * *offs gets each block's file offset (blocks + 1 entries, the last: the
 * file's length). */
static bytes make_log_bad(int blocks, int per, size_t *offs, uint64_t bad);

static bytes make_log(int blocks, int per, size_t *offs)
{
    return make_log_bad(blocks, per, offs, UINT64_MAX);
}

/* The same, event number `bad` (0-based) with an address of more than 64 bits. */
static bytes make_log_bad(int blocks, int per, size_t *offs, uint64_t bad)
{
    bytes f = {0};
    uint8_t hdr[SL_LOG_HEADER_SIZE];
    sl_log_header h = {SL_LOG_VERSION, 0, 3, 1700000000000000ull};
    sl_log_header_encode(&h, hdr);
    put(&f, hdr, sizeof hdr);
    uint64_t dt = 0;
    for (int b = 0; b < blocks; b++) {
        bytes pl = {0};
        if (b == 0) {
            static const char conf[] = "max_split_size_mb:64";
            uint8_t t = SL_LOG_REC_INFO;
            put(&pl, &t, 1);
            put_varint(&pl, 80ull << 30);
            put_string(&pl, conf);
        }
        if (b == 1) {
            uint8_t t = SL_LOG_REC_LOST;
            put(&pl, &t, 1);
            put_varint(&pl, 5);
        }
        uint8_t t = SL_LOG_REC_STACK;
        put(&pl, &t, 1);
        put_varint(&pl, (uint64_t)b + 1);
        int nframes = b + 1 == 4 ? 0 : 1 + b % 3;
        put_varint(&pl, (uint64_t)nframes);
        for (int k = 0; k < nframes; k++) {
            char file[64], name[64];
            snprintf(file, sizeof file, "model_%d.py", b);
            snprintf(name, sizeof name, "layer_%d", k);
            put_string(&pl, file);
            put_string(&pl, name);
            put_varint(&pl, sl_zigzag(10 * b + k));
        }
        for (int i = 0; i < per; i++) {
            uint64_t n = (uint64_t)b * (uint64_t)per + (uint64_t)i;
            uint8_t type = (uint8_t)(SL_LOG_REC_EVENT + (n % 3 == 0   ? SUBLET_ACT_ALLOC
                                                         : n % 3 == 1 ? SUBLET_ACT_FREE_REQUESTED
                                                                      : SUBLET_ACT_FREE_COMPLETED));
            put(&pl, &type, 1);
            dt += 1 + n % 5;
            put_varint(&pl, sl_zigzag((int64_t)dt));
            if (n == bad) {
                static const uint8_t over[10] = {0x80, 0x80, 0x80, 0x80, 0x80,
                                                 0x80, 0x80, 0x80, 0x80, 0x02};
                put(&pl, over, sizeof over);
            } else {
                put_varint(&pl, 0x7f0000000000ull + 512 * (n / 3 % 4096));
            }
            put_varint(&pl, n % 7 == 0 ? (1ull << 40) : 512 + n % 1000); /* long and short */
            put_varint(&pl, n % 2 ? 0x5555aaaa5555ull : 0);
            put_varint(&pl, n % 4 == 0 ? 0 : 1 + n % (uint64_t)(b + 1));
        }
        uint8_t bh[SL_LOG_BLOCK_HEADER_SIZE];
        sl_log_block_seal(bh, pl.p, pl.n, (uint64_t)b);
        if (offs)
            offs[b] = f.n;
        put(&f, bh, sizeof bh);
        put(&f, pl.p, pl.n);
        free(pl.p);
    }
    if (offs)
        offs[blocks] = f.n;
    return f;
}

static void write_bytes(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* ---- reading ----------------------------------------------------------------------------------- */

typedef struct run {
    sublet_trace_event *ev;
    size_t n;
    sublet_status open_st, st; /* at open; the last _next */
    char err[600];
    uint64_t rows;
    char *notice;
    uint32_t stacks;
} run;

static void run_free(run *r)
{
    free(r->ev);
    free(r->notice);
}

/* Stream path to its end (or error), `cap` events a call; each event's stack
 * is checked against the trace loaded whole (t, when it loaded) as it is
 * handed out. */
static run read_stream(const char *path, int thread, size_t cap, size_t read_chunk,
                       const sublet_trace *t)
{
    run r = {0};
    sublet_trace_load_options lo = thread_opts(thread);
    lo.read_chunk = read_chunk;
    sublet_trace_stream *ts = NULL;
    r.open_st = sublet_trace_stream_open(path, &lo, &ts, r.err, sizeof r.err);
    if (r.open_st != SUBLET_OK)
        return r;
    sublet_trace_event *buf = malloc(cap * sizeof *buf);
    assert_non_null(buf);
    size_t got, evcap = 0, npre = sublet_trace_stream_prelude(ts, NULL);
    while ((r.st = sublet_trace_stream_next(ts, buf, cap, &got, r.err, sizeof r.err)) ==
               SUBLET_OK &&
           got) {
        if (r.n + got > evcap) {
            evcap = (r.n + got) * 2;
            r.ev = realloc(r.ev, evcap * sizeof *r.ev);
            assert_non_null(r.ev);
        }
        memcpy(r.ev + r.n, buf, got * sizeof *buf);
        for (size_t k = 0; t && k < got; k++) {
            const sublet_trace_frame *fs, *fw;
            size_t ns = sublet_trace_stream_stack(ts, buf[k].frames, &fs);
            size_t nw = sublet_trace_stack(t, sublet_trace_at(t, npre + r.n + k)->frames, &fw);
            assert_int_equal(ns, nw);
            for (size_t j = 0; j < ns; j++) {
                assert_string_equal(fs[j].filename, fw[j].filename);
                assert_string_equal(fs[j].name, fw[j].name);
                assert_int_equal(fs[j].line, fw[j].line);
            }
        }
        r.n += got;
    }
    /* sticky: the same error again */
    if (r.st != SUBLET_OK) {
        char again[600];
        assert_int_equal(sublet_trace_stream_next(ts, buf, cap, &got, again, sizeof again), r.st);
        assert_int_equal(got, 0);
        assert_string_equal(again, r.err);
    }
    r.rows = sublet_trace_stream_rows(ts);
    const char *note = sublet_trace_stream_notice(ts);
    r.notice = note ? strdup(note) : NULL;
    r.stacks = sublet_trace_stream_stack_count(ts);
    free(buf);
    sublet_trace_stream_close(ts);
    return r;
}

static void assert_runs_equal(const run *a, const run *b)
{
    assert_int_equal(a->open_st, b->open_st);
    assert_int_equal(a->st, b->st);
    assert_string_equal(a->err, b->err);
    assert_int_equal(a->n, b->n);
    if (a->n)
        assert_memory_equal(a->ev, b->ev, a->n * sizeof *a->ev);
    assert_int_equal(a->rows, b->rows);
    assert_true((!a->notice && !b->notice) ||
                (a->notice && b->notice && strcmp(a->notice, b->notice) == 0));
    assert_int_equal(a->stacks, b->stacks);
}

/* Stream path to its end (or error) by borrowing (sl_trace_stream_borrow,
 * the replay's reads), keeping 0, 1, 5 or SL_STREAM_KEEP of the rows last
 * lent in front of the next ones, each time checked to be those rows. */
static run read_borrowed(const char *path, int thread)
{
    run r = {0};
    sublet_trace_load_options lo = thread_opts(thread);
    sublet_trace_stream *ts = NULL;
    r.open_st = sublet_trace_stream_open(path, &lo, &ts, r.err, sizeof r.err);
    if (r.open_st != SUBLET_OK)
        return r;
    static const size_t keeps[] = {0, 1, 5, SL_STREAM_KEEP};
    const sublet_trace_event *p = NULL;
    size_t got = 0, front = 0, evcap = 0, nk = 0;
    for (size_t call = 0;; call++) {
        nk = keeps[call % 4] < front + got ? keeps[call % 4] : front + got;
        const sublet_trace_event *keep = nk ? p + got - nk : NULL;
        r.st = sl_trace_stream_borrow(ts, keep, nk, &p, &got, r.err, sizeof r.err);
        if (r.st != SUBLET_OK)
            break;
        for (size_t k = 0; k < nk; k++)
            assert_memory_equal(p - nk + k, r.ev + r.n - nk + k, sizeof *p);
        if (!got)
            break;
        if (r.n + got > evcap) {
            evcap = (r.n + got) * 2;
            r.ev = realloc(r.ev, evcap * sizeof *r.ev);
            assert_non_null(r.ev);
        }
        memcpy(r.ev + r.n, p, got * sizeof *p);
        r.n += got;
        front = nk;
    }
    if (r.st != SUBLET_OK) { /* sticky */
        char again[600];
        assert_int_equal(sl_trace_stream_borrow(ts, NULL, 0, &p, &got, again, sizeof again),
                         r.st);
        assert_int_equal(got, 0);
        assert_null(p);
        assert_string_equal(again, r.err);
    } else { /* at the end: nothing more, the kept rows still in front */
        assert_int_equal(sl_trace_stream_borrow(ts, nk ? p - nk : NULL, nk, &p, &got, NULL, 0),
                         SUBLET_OK);
        assert_int_equal(got, 0);
        for (size_t k = 0; k < nk; k++)
            assert_memory_equal(p - nk + k, r.ev + r.n - nk + k, sizeof *p);
    }
    r.rows = sublet_trace_stream_rows(ts);
    const char *note = sublet_trace_stream_notice(ts);
    r.notice = note ? strdup(note) : NULL;
    r.stacks = sublet_trace_stream_stack_count(ts);
    sublet_trace_stream_close(ts);
    return r;
}

/* A run read to its end equals the trace loaded whole (t): its events after
 * the prelude, rows, notice and stacks. */
static void assert_run_whole(const run *r, const sublet_trace *t)
{
    size_t npre = sublet_trace_prelude_count(t);
    assert_int_equal(r->n, sublet_trace_count(t) - npre);
    assert_memory_equal(r->ev, sublet_trace_events(t) + npre, r->n * sizeof *r->ev);
    assert_int_equal(r->rows, sublet_trace_count(t));
    const char *nw = sublet_trace_notice(t);
    assert_true((!nw && !r->notice) || (nw && r->notice && !strcmp(nw, r->notice)));
    assert_int_equal(r->stacks, sublet_trace_stack_count(t));
}

/* The stream with and without the thread at several caps against the trace
 * loaded whole: its events (all of them when it loads; else as many as the
 * stream gave, then the whole load's error text), rows and notice. */
static void check_file(const char *path, size_t want_events)
{
    sublet_trace *t = NULL;
    char ew[600] = "";
    sublet_status sw = sublet_trace_load(path, NULL, &t, ew, sizeof ew);
    static const size_t caps[] = {1, 1000, 4096, 10000};
    for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
        size_t read_chunk = c == 0 ? 4093 : 0;
        run off = read_stream(path, 0, caps[c], read_chunk, t);
        run on = read_stream(path, 1, caps[c], read_chunk, t);
        assert_runs_equal(&off, &on);
        assert_int_equal(on.st, sw);
        if (sw == SUBLET_OK) {
            assert_int_equal(on.n, want_events);
            assert_run_whole(&on, t);
        } else {
            assert_string_equal(on.err, ew);
            /* every event before the bad one was handed out (as many as whole calls of
             * `cap` hold: the call that meets the error hands out none of its own) */
            assert_int_equal(on.n, want_events / caps[c] * caps[c]);
        }
        run_free(&off);
        run_free(&on);
    }
    /* borrowed: the same rows, every one before an error, with the thread and without */
    run off = read_borrowed(path, 0), on = read_borrowed(path, 1);
    assert_runs_equal(&off, &on);
    assert_int_equal(on.st, sw);
    assert_int_equal(on.n, want_events);
    if (sw == SUBLET_OK)
        assert_run_whole(&on, t);
    else
        assert_string_equal(on.err, ew);
    run_free(&off);
    run_free(&on);
    sublet_trace_free(t);
}

/* ---- the tests ----------------------------------------------------------------------------------- */

static void test_csv_same_with_and_without_thread(void **state)
{
    (void)state;
    const char *plain = tmp_path(".events.csv"), *gz = tmp_path(".events.csv.gz");
    write_csv(plain, 20000, 0, 0);
    check_file(plain, 20000);
    write_csv(gz, 9000, 0, 1);
    check_file(gz, 9000);
    /* a malformed row after 12,345 good ones; the same in gzip */
    write_csv(plain, 20000, 12346, 0);
    check_file(plain, 12345);
    write_csv(gz, 20000, 8193, 1);
    check_file(gz, 8192);
    unlink(plain);
    unlink(gz);
}

static void test_log_same_with_and_without_thread(void **state)
{
    (void)state;
    const char *path = tmp_path(".slog");
    size_t offs[9];
    bytes f = make_log(8, 3000, offs);
    write_bytes(path, f.p, f.n);
    check_file(path, 8 * 3000);
    /* gzip'd (read with the thread by default) */
    const char *gz = tmp_path(".slog.gz");
    gzFile g = gzopen(gz, "wb1");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, f.p, (unsigned)f.n), (int)f.n);
    assert_int_equal(gzclose(g), Z_OK);
    check_file(gz, 8 * 3000);
    unlink(gz);

    /* torn tail: the last block cut in its payload (the notice, after the end) */
    write_bytes(path, f.p, offs[8] - 100);
    check_file(path, 7 * 3000);

    /* a corrupt block followed by an intact one: the events of the blocks before
     * it, then the error */
    uint8_t *bad = malloc(f.n);
    assert_non_null(bad);
    memcpy(bad, f.p, f.n);
    bad[offs[5] + SL_LOG_BLOCK_HEADER_SIZE + 200] ^= 0x40;
    write_bytes(path, bad, f.n);
    check_file(path, 5 * 3000);
    free(bad);
    unlink(path);
    free(f.p);
}

/* An event naming a stack that was never recorded, 2,000 events into a block
 * after two good blocks: the 8,000 + 2,000 events, then the error; the same
 * for a field of more than 64 bits. */
static void test_log_bad_record_mid_block(void **state)
{
    (void)state;
    const char *path = tmp_path(".slog");
    size_t offs[4];
    bytes f = make_log(3, 4000, offs);
    /* find the 2,001st event record of block 2 and make its stack id 99 */
    const uint8_t *pl = f.p + offs[2] + SL_LOG_BLOCK_HEADER_SIZE;
    size_t len = offs[3] - offs[2] - SL_LOG_BLOCK_HEADER_SIZE, pos = 0;
    sl_log_frame frames[SL_LOG_MAX_FRAMES];
    sl_log_rec r;
    r.frames = frames;
    char why[200];
    int events = 0;
    size_t at = 0;
    while (sl_log_record_next(pl, len, &pos, &r, why, sizeof why) == 1)
        if (r.type == SL_LOG_REC_EVENT && ++events == 2001) {
            at = pos - 1; /* the stack id: the record's last byte (one byte) */
            break;
        }
    assert_int_equal(events, 2001);
    assert_true(pl[at] < 0x80);
    f.p[offs[2] + SL_LOG_BLOCK_HEADER_SIZE + at] = 99;
    uint8_t bh[SL_LOG_BLOCK_HEADER_SIZE];
    sl_log_block_seal(bh, pl, len, 2);
    memcpy(f.p + offs[2], bh, sizeof bh);
    write_bytes(path, f.p, f.n);
    check_file(path, 2 * 4000 + 2000);
    free(f.p);
    /* an address of more than 64 bits, the 7,778th event */
    f = make_log_bad(3, 4000, NULL, 7777);
    write_bytes(path, f.p, f.n);
    check_file(path, 7777);
    unlink(path);
    free(f.p);
}

/* Closed while the thread is ahead (after a few events, and before any), and
 * rewound while it is ahead: the second pass equals a fresh read. */
static void test_close_and_rewind_while_ahead(void **state)
{
    (void)state;
    const char *csv = tmp_path(".events.csv"), *log = tmp_path(".slog");
    write_csv(csv, 30000, 0, 0);
    bytes f = make_log(6, 5000, NULL);
    write_bytes(log, f.p, f.n);
    free(f.p);
    const char *paths[] = {csv, log};
    for (int i = 0; i < 2; i++) {
        run fresh = read_stream(paths[i], 0, 777, 0, NULL);
        sublet_trace_load_options on = thread_opts(1), off = thread_opts(0);
        char err[600];
        sublet_trace_event ev[100];
        size_t got;
        for (int reads = 0; reads < 3; reads++) {
            sublet_trace_stream *ts = NULL;
            assert_int_equal(sublet_trace_stream_open(paths[i], &on, &ts, err, sizeof err),
                             SUBLET_OK);
            for (int k = 0; k < reads * 50; k++)
                assert_int_equal(sublet_trace_stream_next(ts, ev, 100, &got, err, sizeof err),
                                 SUBLET_OK);
            sublet_trace_stream_close(ts);
        }
        sublet_trace_stream *ts = NULL;
        assert_int_equal(sublet_trace_stream_open(paths[i], &on, &ts, err, sizeof err), SUBLET_OK);
        for (int pass = 0; pass < 3; pass++) {
            /* a partial read (pass 0: 3 events, 1: 9,000), then rewind; pass 2 reads all */
            size_t want = pass == 0 ? 3 : pass == 1 ? 9000 : SIZE_MAX, n = 0;
            while (n < want) {
                size_t cap = want - n < 100 ? want - n : 100;
                assert_int_equal(sublet_trace_stream_next(ts, ev, cap, &got, err, sizeof err),
                                 SUBLET_OK);
                if (!got)
                    break;
                assert_true(n + got <= fresh.n);
                assert_memory_equal(ev, fresh.ev + n, got * sizeof *ev);
                n += got;
            }
            if (pass == 2) {
                assert_int_equal(n, fresh.n);
                assert_int_equal(sublet_trace_stream_rows(ts), fresh.rows);
                const char *note = sublet_trace_stream_notice(ts);
                assert_true((!note && !fresh.notice) ||
                            (note && fresh.notice && !strcmp(note, fresh.notice)));
            }
            assert_int_equal(sublet_trace_stream_rewind(ts, err, sizeof err), SUBLET_OK);
        }
        /* the replay over the threaded stream gives the unthreaded one's result */
        sublet_replay_result a, b;
        const char *rec = sublet_trace_stream_settings(ts);
        char *conf = strdup(rec ? rec : ""); /* outlives the stream */
        assert_non_null(conf);
        sublet_replay_options o;
        sublet_replay_options_init(&o);
        o.conf = conf;
        assert_int_equal(sublet_replay_stream(ts, &o, &a, err, sizeof err), SUBLET_OK);
        sublet_trace_stream_close(ts);
        assert_int_equal(sublet_trace_stream_open(paths[i], &off, &ts, err, sizeof err), SUBLET_OK);
        assert_int_equal(sublet_replay_stream(ts, &o, &b, err, sizeof err), SUBLET_OK);
        sublet_trace_stream_close(ts);
        assert_int_equal(a.events, b.events);
        assert_int_equal(a.ooms, b.ooms);
        assert_int_equal(a.peak_reserved_bytes, b.peak_reserved_bytes);
        sublet_replay_result_free(&a);
        sublet_replay_result_free(&b);
        free(conf);
        run_free(&fresh);
        unlink(paths[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_same_with_and_without_thread),
        cmocka_unit_test(test_log_same_with_and_without_thread),
        cmocka_unit_test(test_log_bad_record_mid_block),
        cmocka_unit_test(test_close_and_rewind_while_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
