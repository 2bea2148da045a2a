/* A replay's history with row indices as times (record_row_times), taken as
 * it grows (sublet_history_take after every row): the very entries a replay
 * of the trace restamped with its row indices records whole, for traces with
 * segment_alloc rows, segment_map rows (expandable segments), release runs
 * and a prelude, under settings that change the engine's decisions.  The
 * tuner's diagnosis (src/tune/tune_explain.c) reads histories this way. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/history.h"
#include "sublet/replay.h"
#include "sublet/trace.h"
#include "test_data.h"

static sublet_trace *load(const char *name)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", testdata_dir(), name);
    sublet_trace *t = NULL;
    if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("cannot load %s: %s", path, err);
    return t;
}

/* t with every row's time its index (and no stacks). */
static sublet_trace *restamped(const sublet_trace *t)
{
    sublet_trace *c = NULL;
    assert_int_equal(sublet_trace_create(&c), SUBLET_OK);
    const sublet_trace_event *ev = sublet_trace_events(t);
    for (size_t i = 0, n = sublet_trace_count(t); i < n; i++) {
        sublet_trace_event e = ev[i];
        e.time_us = i;
        e.flags |= SUBLET_TRACE_HAS_TIME;
        e.frames = 0;
        assert_int_equal(sublet_trace_append(c, &e), SUBLET_OK);
    }
    return c;
}

typedef struct hist {
    sublet_trace_entry *e;
    size_t n, cap;
    size_t npre;
    size_t takes, most; /* rows taken after; the most entries one take found */
} hist;

static void put(hist *h, const sublet_trace_entry *e, size_t k)
{
    if (h->n + k > h->cap) {
        h->cap = (h->n + k) * 2;
        h->e = realloc(h->e, h->cap * sizeof *h->e);
        assert_non_null(h->e);
    }
    memcpy(h->e + h->n, e, k * sizeof *e);
    h->n += k;
}

static void take_all(hist *h, sublet_allocator *a)
{
    sublet_trace_entry buf[64];
    size_t k, got = 0;
    while ((k = sublet_history_take(a, buf, 64)) > 0) {
        put(h, buf, k);
        got += k;
    }
    h->takes++;
    if (got > h->most)
        h->most = got;
}

static void after_row(void *user, sublet_allocator *a, uint64_t index, const sublet_trace_event *ev)
{
    (void)ev;
    hist *h = user;
    if (index >= h->npre)
        take_all(h, a);
}

static void at_end_take(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    (void)st;
    if (a)
        take_all(user, a);
}

static void at_end_copy(void *user, sublet_allocator *a, uint64_t last, sublet_status st)
{
    (void)last;
    (void)st;
    hist *h = user;
    if (!a)
        return;
    size_t n = sublet_history_count(a);
    h->e = malloc((n ? n : 1) * sizeof *h->e);
    assert_non_null(h->e);
    h->n = sublet_history_copy(a, h->e, n);
}

static void record(const sublet_trace *t, const char *conf, uint64_t cap, int rows, hist *h,
                   sublet_replay_result *r)
{
    memset(h, 0, sizeof *h);
    h->npre = sublet_trace_prelude_count(t);
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    o.device_memory = cap;
    o.check = 1;
    o.record = SUBLET_RECORD_ALL;
    o.record_context = SUBLET_CONTEXT_NONE;
    o.record_max_entries = 4 * sublet_trace_count(t) + 1024;
    o.record_row_times = rows;
    if (rows) {
        o.after_event = after_row;
        o.observer_user = h;
    }
    o.on_finish = rows ? at_end_take : at_end_copy;
    o.finish_user = h;
    char err[512];
    if (sublet_replay_run(t, &o, r, err, sizeof err) != SUBLET_OK)
        fail_msg("replay under '%s': %s", conf, err);
}

static void same_history(const char *name, const char *conf, uint64_t cap)
{
    sublet_trace *t = load(name), *ix = restamped(t);
    hist a, b;
    sublet_replay_result ra, rb;
    record(ix, conf, cap, 0, &a, &ra);
    record(t, conf, cap, 1, &b, &rb);
    assert_int_equal(ra.events, rb.events);
    assert_int_equal(ra.ooms, rb.ooms);
    assert_int_equal(ra.peak_reserved_bytes, rb.peak_reserved_bytes);
    assert_true(a.n > 0);
    if (a.n != b.n)
        fail_msg("%s under '%s': %zu entries recorded whole, %zu taken row by row", name, conf,
                 a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        const sublet_trace_entry *x = &a.e[i], *y = &b.e[i];
        if (x->action != y->action || x->addr != y->addr || x->size != y->size ||
            x->stream != y->stream || x->time_us != y->time_us)
            fail_msg("%s under '%s': entry %zu: %d %llx %llu t%llu whole, %d %llx %llu t%llu "
                     "taken", name, conf, i, (int)x->action, (unsigned long long)x->addr,
                     (unsigned long long)x->size, (unsigned long long)x->time_us, (int)y->action,
                     (unsigned long long)y->addr, (unsigned long long)y->size,
                     (unsigned long long)y->time_us);
    }
    /* taken as it grew: once a row, each take a row's entries, never the run */
    assert_true(b.takes >= sublet_trace_count(t) - b.npre);
    assert_true(b.most < a.n || a.n <= 2);
    free(a.e);
    free(b.e);
    sublet_replay_result_free(&ra);
    sublet_replay_result_free(&rb);
    sublet_trace_free(ix);
    sublet_trace_free(t);
}

static const char *const settings[] = {
    "",
    "expandable_segments:True",
    "max_split_size_mb:64",
    "roundup_power2_divisions:4,garbage_collection_threshold:0.6,per_process_memory_fraction:0.9",
    "policy:stitch",
};

static void check_all(const char *name, uint64_t cap)
{
    for (size_t s = 0; s < sizeof settings / sizeof *settings; s++)
        same_history(name, settings[s], cap);
}

static void test_attention(void **state)
{
    (void)state;
    check_all("cs336_attention_microbench.events.csv", 0);
    check_all("cs336_attention_microbench.events.csv", (uint64_t)1 << 30); /* OOMs, collections */
}

static void test_offload_gc(void **state)
{
    (void)state;
    check_all("offload_gc.events.csv", 0);
}

static void test_expandable(void **state)
{
    (void)state;
    check_all("expandable_by_hand.json", 0);
}

static void test_prelude(void **state)
{
    (void)state;
    check_all("decomfl_opt_zo_fl.pickle.gz", 0);
    check_all("nonmonotone.events.csv", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_offload_gc),
        cmocka_unit_test(test_expandable),
        cmocka_unit_test(test_prelude),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
