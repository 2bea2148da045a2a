/* The continuous event log (sublet/log.h): what it writes reads back event
 * for event as the engine's own history saw it, stacks included; a log cut
 * at any byte reads up to its last whole block and reports the torn tail;
 * a corrupt block in the middle is an error; a full disk stops the log and
 * not the allocator. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/event_log_format.h"
#include "support/harness.h"
#include "sublet/history.h"
#include "sublet/log.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"

static char tmpdir[] = "/tmp/sublet_test_log_XXXXXX";

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* ---- a deterministic workload with stacks and a clock --------------------------------------- */

static uint64_t fake_clock = 1700000000000000ull;

static uint64_t tick(void *user)
{
    (void)user;
    return fake_clock += 7;
}

static int stack_variant;

static size_t frames_fn(void *user, sublet_frame *out, size_t cap)
{
    (void)user;
    static const char *files[] = {"train.py", "model.py", "layers.py"};
    size_t n = (size_t)(stack_variant % 3) + 1;
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++) {
        out[i].filename = files[i];
        out[i].name = i == 0 ? (stack_variant & 4 ? "forward" : "backward") : "step";
        out[i].line = (int)(10 * i + (size_t)stack_variant);
    }
    return n;
}

/* Mallocs, frees, a cross-stream free, empty_cache and an OOM. */
static void workload(sublet_allocator *a, int rounds)
{
    void *keep[16] = {0};
    for (int r = 0; r < rounds; r++) {
        stack_variant = r;
        uint64_t sz = (uint64_t)(r % 5 + 1) * (r & 1 ? 700 * KiB : 3 * MiB) + (uint64_t)r;
        void *p = h_malloc(a, sz, (sublet_stream)(r % 3 == 2 ? 0x77 : 0));
        if (keep[r % 16])
            h_free(a, keep[r % 16]);
        keep[r % 16] = p;
        if (r % 7 == 3)
            h_record(a, p, 0x99);
        if (r % 11 == 10)
            h_empty_cache(a);
    }
    void *big = NULL;
    assert_int_equal(sublet_malloc(a, 900 * GiB, 0, &big), SUBLET_ERR_OOM);
    for (int i = 0; i < 16; i++)
        if (keep[i])
            h_free(a, keep[i]);
    h_process_events(a);
    h_empty_cache(a);
}

static void setup_recording(sublet_allocator *a)
{
    fake_clock = 1700000000000000ull;
    sublet_clock_set(a, tick, NULL);
    sublet_stack_source_set(a, frames_fn, NULL);
    assert_int_equal(sublet_history_record(a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_ALL, 0),
                     SUBLET_OK);
}

/* The log of `path` against the history of `a`, event for event. */
static void compare_with_history(sublet_allocator *a, const char *path, bool expandable)
{
    size_t n = sublet_history_count(a);
    assert_true(n > 50);
    sublet_trace_entry *h = calloc(n, sizeof *h);
    assert_non_null(h);
    assert_int_equal(sublet_history_copy(a, h, n), n);
    assert_int_equal(sublet_history_dropped(a), 0);
    sublet_trace *t = NULL;
    char err[512];
    assert_int_equal(sublet_trace_load(path, NULL, &t, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_source_format(t), SUBLET_FORMAT_EVENT_LOG);
    assert_string_equal(sublet_trace_format_name(SUBLET_FORMAT_EVENT_LOG), "sublet-log");
    assert_null(sublet_trace_notice(t));
    assert_int_equal(sublet_trace_count(t), n);
    assert_int_equal(sublet_trace_prelude_count(t), 0);
    assert_int_equal(sublet_trace_device(t), sublet_allocator_device(a));
    assert_int_equal(sublet_trace_device_memory(t), 64 * GiB);
    assert_string_equal(sublet_trace_settings(t), "max_split_size_mb:64");
    size_t kinds[SUBLET_TRACE_KIND_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        kinds[e->kind]++;
        assert_int_equal(e->kind, h[i].action);
        assert_int_equal(e->addr, h[i].addr);
        assert_int_equal(e->size, h[i].size);
        assert_int_equal(e->stream, h[i].stream);
        assert_int_equal(e->flags & SUBLET_TRACE_HAS_TIME, SUBLET_TRACE_HAS_TIME);
        assert_int_equal(e->time_us, h[i].time_us);
        /* the stacks survive: same frames */
        const sublet_frame *want = NULL;
        size_t nw = h[i].stack ? sublet_stack_frames(a, h[i].stack, &want) : 0;
        const sublet_trace_frame *got = NULL;
        size_t ng = sublet_trace_stack(t, e->frames, &got);
        assert_int_equal(ng, nw);
        for (size_t j = 0; j < nw; j++) {
            assert_string_equal(got[j].filename, want[j].filename);
            assert_string_equal(got[j].name, want[j].name);
            assert_int_equal(got[j].line, want[j].line);
        }
    }
    assert_true(kinds[SUBLET_ACT_ALLOC] > 0 && kinds[SUBLET_ACT_FREE_REQUESTED] > 0);
    assert_true(kinds[SUBLET_ACT_FREE_COMPLETED] > 0 && kinds[SUBLET_ACT_OOM] == 1);
    if (expandable) {
        assert_true(kinds[SUBLET_ACT_SEGMENT_MAP] > 0 && kinds[SUBLET_ACT_SEGMENT_UNMAP] > 0);
    } else {
        assert_true(kinds[SUBLET_ACT_SEGMENT_ALLOC] > 0 && kinds[SUBLET_ACT_SEGMENT_FREE] > 0);
    }
    assert_true(sublet_trace_stack_count(t) >= 3);

    /* the CSV of the log is the CSV of the history */
    sublet_trace *ht = NULL;
    assert_int_equal(sublet_trace_create(&ht), SUBLET_OK);
    for (size_t i = 0; i < n; i++) {
        sublet_trace_event e = {(uint32_t)h[i].action, SUBLET_TRACE_HAS_TIME, h[i].addr,
                                h[i].size, h[i].stream, h[i].time_us, 0, 0, 0, {0, 0}};
        assert_int_equal(sublet_trace_append(ht, &e), SUBLET_OK);
    }
    char *c1 = NULL, *c2 = NULL;
    size_t l1 = 0, l2 = 0;
    assert_int_equal(sublet_trace_encode_csv(t, &c1, &l1, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_encode_csv(ht, &c2, &l2, err, sizeof err), SUBLET_OK);
    assert_int_equal(l1, l2);
    assert_memory_equal(c1, c2, l1);
    free(c1);
    free(c2);
    sublet_trace_free(ht);
    sublet_trace_free(t);
    free(h);
}

static void run_round_trip(uint32_t flags, const char *conf, const char *name)
{
    h_env e;
    h_env_init(&e, H_SIM, 64 * GiB, conf);
    setup_recording(e.a);
    char path[256], err[256];
    path_of(path, sizeof path, name);
    sublet_log_options o = {0};
    o.flags = flags;
    o.settings = "max_split_size_mb:64";
    o.buffer_bytes = 64 << 10; /* small: many blocks */
    sublet_log *lg = NULL;
    assert_int_equal(sublet_log_open(e.a, path, &o, &lg, err, sizeof err), SUBLET_OK);
    workload(e.a, 400);
    assert_int_equal(sublet_log_flush(lg), SUBLET_OK);
    sublet_log_status st;
    sublet_log_status_read(lg, &st);
    assert_int_equal(st.status, SUBLET_OK);
    assert_int_equal(st.events, sublet_history_count(e.a));
    assert_int_equal(st.events_lost, 0);
    assert_true(st.stacks >= 3);
    assert_int_equal(sublet_log_close(lg), SUBLET_OK);
    compare_with_history(e.a, path, conf[0] != 0);
    h_env_fini(&e);
}

static void test_round_trip_thread(void **state)
{
    (void)state;
    run_round_trip(0, "", "thread.slog");
}

static void test_round_trip_sync(void **state)
{
    (void)state;
    run_round_trip(SUBLET_LOG_SYNC, "", "sync.slog");
}

static void test_round_trip_expandable(void **state)
{
    (void)state;
    run_round_trip(0, "expandable_segments:True", "exp.slog");
}

/* ---- torn tails --------------------------------------------------------------------------------- */

/* A log of several blocks (one per flush), cut at every byte. */
static void test_cut_everywhere(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 64 * GiB, "");
    char path[256], err[512];
    path_of(path, sizeof path, "cut.slog");
    sublet_log *lg = NULL;
    sublet_log_options o = {0};
    o.flags = SUBLET_LOG_SYNC;
    assert_int_equal(sublet_log_open(e.a, path, &o, &lg, err, sizeof err), SUBLET_OK);
    size_t bounds[64], nb = 0, counts[64];
    for (int i = 0; i < 12; i++) {
        void *p = h_malloc(e.a, (uint64_t)(i + 1) * 1000, 0);
        if (i % 2)
            h_free(e.a, p);
        assert_int_equal(sublet_log_flush(lg), SUBLET_OK);
        sublet_log_status st;
        sublet_log_status_read(lg, &st);
        bounds[nb] = st.bytes_written;
        counts[nb++] = st.events;
    }
    assert_int_equal(sublet_log_close(lg), SUBLET_OK);
    size_t n;
    uint8_t *full = slurp(path, &n);
    assert_int_equal(n, bounds[nb - 1]);
    sublet_trace *all = NULL;
    assert_int_equal(sublet_trace_parse(full, n, NULL, &all, err, sizeof err), SUBLET_OK);
    for (size_t cut = 0; cut <= n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, full, cut);
        sublet_trace *t = NULL;
        sublet_status s = sublet_trace_parse_log(copy, cut, &t, err, sizeof err);
        if (cut < SL_LOG_HEADER_SIZE) {
            assert_int_equal(s, SUBLET_ERR_PARSE);
            free(copy);
            continue;
        }
        assert_int_equal(s, SUBLET_OK);
        /* events: those of the whole blocks before the cut; a torn tail
         * reported exactly when the cut is not at a block's end */
        size_t want = 0;
        size_t info_end = SL_LOG_HEADER_SIZE + SL_LOG_BLOCK_HEADER_SIZE +
                          sl_get_u32(full + SL_LOG_HEADER_SIZE + 4);
        bool boundary = cut == SL_LOG_HEADER_SIZE || cut == info_end;
        for (size_t b = 0; b < nb; b++) {
            if (bounds[b] <= cut)
                want = counts[b];
            if (bounds[b] == cut)
                boundary = true;
        }
        const char *note = sublet_trace_notice(t);
        if (boundary) {
            assert_null(note);
        } else {
            assert_non_null(note);
            assert_non_null(strstr(note, "torn tail at byte "));
            assert_non_null(strstr(note, " bytes ignored"));
        }
        assert_int_equal(sublet_trace_count(t), want);
        for (size_t i = 0; i < want; i++)
            assert_memory_equal(sublet_trace_at(t, i), sublet_trace_at(all, i),
                                sizeof(sublet_trace_event));
        sublet_trace_free(t);
        free(copy);
    }
    /* the exact message */
    sublet_trace *t = NULL;
    assert_int_equal(sublet_trace_parse_log(full, n - 3, &t, err, sizeof err), SUBLET_OK);
    char expect[128];
    snprintf(expect, sizeof expect, "torn tail at byte %zu, %zu bytes ignored", bounds[nb - 2],
             n - 3 - bounds[nb - 2]);
    assert_non_null(strstr(sublet_trace_notice(t), expect));
    sublet_trace_free(t);
    /* a bad byte in a middle block is corruption, not a torn tail */
    full[bounds[3] + SL_LOG_BLOCK_HEADER_SIZE + 1] ^= 0x40;
    assert_int_equal(sublet_trace_parse_log(full, n, &t, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "corrupt"));
    /* in the last block: a torn tail */
    full[bounds[3] + SL_LOG_BLOCK_HEADER_SIZE + 1] ^= 0x40;
    full[n - 2] ^= 0x01;
    assert_int_equal(sublet_trace_parse_log(full, n, &t, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_count(t), counts[nb - 2]);
    assert_non_null(sublet_trace_notice(t));
    sublet_trace_free(t);
    sublet_trace_free(all);
    free(full);
    h_env_fini(&e);
}

/* ---- hand-made logs: LOST records, malformed records -------------------------------------------- */

static size_t make_log(uint8_t *out, const uint8_t *payload, size_t n)
{
    sl_log_header h = {SL_LOG_VERSION, 0, 3, 1000};
    sl_log_header_encode(&h, out);
    sl_log_block_seal(out + SL_LOG_HEADER_SIZE, payload, n, 0);
    memcpy(out + SL_LOG_HEADER_SIZE + SL_LOG_BLOCK_HEADER_SIZE, payload, n);
    return SL_LOG_HEADER_SIZE + SL_LOG_BLOCK_HEADER_SIZE + n;
}

static void test_hand_made(void **state)
{
    (void)state;
    uint8_t buf[512], pl[64];
    char err[256];
    sublet_trace *t = NULL;
    /* LOST 5, then alloc at t=1000+3 */
    const uint8_t good[] = {SL_LOG_REC_LOST, 5, SL_LOG_REC_EVENT + SUBLET_ACT_ALLOC, 6, 0x80, 0x10,
                            100, 0, 0};
    size_t n = make_log(buf, good, sizeof good);
    assert_int_equal(sublet_trace_detect(buf, n), SUBLET_FORMAT_EVENT_LOG);
    assert_int_equal(sublet_trace_parse(buf, n, NULL, &t, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_trace_count(t), 1);
    assert_int_equal(sublet_trace_at(t, 0)->addr, 0x800);
    assert_int_equal(sublet_trace_at(t, 0)->time_us, 1003);
    assert_int_equal(sublet_trace_device(t), 3);
    assert_non_null(strstr(sublet_trace_notice(t), "5 events were lost"));
    sublet_trace_free(t);
    /* malformed inside an intact block: an error, never a guess */
    const uint8_t *bad[] = {
        (const uint8_t *)"\x7f",                 /* unknown type */
        (const uint8_t *)"\x10\x01",             /* event cut short */
        (const uint8_t *)"\x10\x00\x00\x00\x00\x05", /* stack 5 never recorded */
        (const uint8_t *)"\x02\x00\x00",         /* stack id 0 */
    };
    const size_t badn[] = {1, 2, 6, 3};
    for (size_t i = 0; i < 4; i++) {
        memcpy(pl, bad[i], badn[i]);
        n = make_log(buf, pl, badn[i]);
        assert_int_equal(sublet_trace_parse_log(buf, n, &t, err, sizeof err), SUBLET_ERR_PARSE);
        assert_non_null(strstr(err, "record at byte"));
    }
    /* a wrong version byte */
    n = make_log(buf, good, sizeof good);
    buf[8] = 2;
    assert_int_equal(sublet_trace_parse_log(buf, n, &t, err, sizeof err), SUBLET_ERR_PARSE);
}

/* ---- errors ------------------------------------------------------------------------------------- */

static int errors_seen;

static void on_error(void *user, sublet_status st, const char *msg)
{
    (void)user;
    (void)msg;
    if (st == SUBLET_ERR_IO)
        errors_seen++;
}

/* A file size limit stands in for a full disk (write fails with EFBIG, the
 * path ENOSPC takes): the log stops with the error, reports it once, and
 * the allocator goes on.  In a child, so that the limit stays there. */
static void test_full_disk(void **state)
{
    (void)state;
    char path[256], err[256];
    sublet_log *lg = NULL;
    h_env e;
    h_env_init(&e, H_SIM, 64 * GiB, "");
    if (access("/dev/full", W_OK) == 0)
        assert_int_equal(sublet_log_open(e.a, "/dev/full", NULL, &lg, err, sizeof err),
                         SUBLET_ERR_IO);
    path_of(path, sizeof path, "full.slog");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {64 << 10, 64 << 10};
        setrlimit(RLIMIT_FSIZE, &rl);
        for (int mode = 0; mode < 2; mode++) {
            errors_seen = 0;
            sublet_log_options o = {0};
            o.flags = mode ? SUBLET_LOG_SYNC : 0;
            o.buffer_bytes = 64 << 10;
            o.on_error = on_error;
            if (sublet_log_open(e.a, path, &o, &lg, err, sizeof err) != SUBLET_OK)
                _exit(10);
            for (int i = 0; i < 20000; i++) {
                void *p = NULL;
                if (sublet_malloc(e.a, (uint64_t)(i % 100 + 1) * 512, 0, &p) != SUBLET_OK ||
                    sublet_free(e.a, p) != SUBLET_OK)
                    _exit(11);
                if (i % 1000 == 0)
                    sublet_log_flush(lg);
            }
            sublet_log_status st;
            sublet_log_status_read(lg, &st);
            if (st.status != SUBLET_ERR_IO || st.error_number != EFBIG || !strstr(st.message, "stopped"))
                _exit(12);
            if (sublet_log_flush(lg) != SUBLET_ERR_IO || sublet_log_close(lg) != SUBLET_ERR_IO)
                _exit(13);
            if (errors_seen != 1)
                _exit(14);
            char msg[256];
            if (sublet_check(e.a, msg, sizeof msg) != SUBLET_OK)
                _exit(15);
            /* what was written reads back, the cut reported */
            sublet_trace *t = NULL;
            if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
                _exit(16);
            if (sublet_trace_count(t) == 0)
                _exit(17);
            sublet_trace_free(t);
        }
        _exit(0);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
    h_env_fini(&e);
}

static void test_misuse(void **state)
{
    (void)state;
    h_env e;
    h_env_init(&e, H_SIM, 64 * GiB, "");
    sublet_log *lg = NULL;
    char err[256];
    sublet_log_options o = {0};
    o.buffer_bytes = 100;
    assert_int_equal(sublet_log_open(e.a, "/tmp/x", &o, &lg, err, sizeof err),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_log_open(e.a, "/nonexistent/dir/x.slog", NULL, &lg, err, sizeof err),
                     SUBLET_ERR_IO);
    assert_non_null(strstr(err, "cannot create"));
    assert_int_equal(sublet_log_close(NULL), SUBLET_OK);
    h_env_fini(&e);
}

int main(void)
{
    if (!mkdtemp(tmpdir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_thread),
        cmocka_unit_test(test_round_trip_sync),
        cmocka_unit_test(test_round_trip_expandable),
        cmocka_unit_test(test_cut_everywhere),
        cmocka_unit_test(test_hand_made),
        cmocka_unit_test(test_full_disk),
        cmocka_unit_test(test_misuse),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
