/* sublet — tests of the tuner's warm-up plan (sublet_tune_plan_derive and
 * sublet_tune_result.plan, sublet/tune.h): on the committed attention trace
 * the plan makes an independent replay (sublet_check after every event) do
 * no device allocation beyond the plan's own, under the native policy and
 * with expandable segments; its bytes and calls are reported; sublet_tune
 * derives it for its answer, deterministically; what a plan cannot remove
 * (an empty_cache in the trace, other streams, a device too small) is
 * counted and said; policy:stitch has none.  The shared snapshots are used
 * when ../shared is present, and skipped cleanly otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sublet/config.h"
#include "sublet/replay.h"
#include "sublet/trace.h"
#include "sublet/tune.h"
#include "test_data.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static sublet_trace *load(const char *dir, const char *name)
{
    char path[4096], err[512];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        fail_msg("path too long: %s/%s", dir, name);
    sublet_trace *t = NULL;
    if (sublet_trace_load(path, NULL, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("cannot load %s: %s", path, err);
    return t;
}

static sublet_trace *attention(void)
{
    return load(testdata_dir(), "cs336_attention_microbench.events.csv");
}

static uint64_t plan_segments(const sublet_tune_plan *p)
{
    uint64_t n = 0;
    for (size_t i = 0; i < p->nentries; i++)
        n += p->entries[i].count;
    return n;
}

/* Replay t under the plan's SUBLET_ALLOC_CONF string, checking every
 * invariant after every event; returns the device allocations beyond the
 * plan's own `plan_allocs`. */
static uint64_t replay_with(const sublet_trace *t, const char *env, uint64_t dev,
                            uint64_t plan_allocs, uint64_t *peak_reserved)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = env;
    o.device_memory = dev;
    o.check = 1;
    sublet_replay_result r;
    char err[512];
    sublet_status st = sublet_replay_run(t, &o, &r, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("replay under '%s': %s", env, err);
    assert_int_equal(r.ooms, 0);
    assert_int_equal(r.errors, 0);
    *peak_reserved = r.peak_reserved_bytes;
    uint64_t allocs = (uint64_t)r.stats_end.num_device_alloc;
    sublet_replay_result_free(&r);
    assert_true(allocs >= plan_allocs);
    return allocs - plan_allocs;
}

/* ---- the plan on the attention trace ------------------------------------------------- */

static void test_plan_attention(void **state)
{
    (void)state;
    sublet_trace *t = attention();
    const sublet_trace *tt = t;
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    sublet_tune_plan p;
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "max_split_size_mb:512", &o, &p), SUBLET_OK);
    assert_string_equal(p.conf, "max_split_size_mb:512");
    assert_string_equal(p.option, "warmup:[large:512MiB*6,large:20MiB*2,small:2MiB]");
    assert_string_equal(p.env,
                        "max_split_size_mb:512,warmup:[large:512MiB*6,large:20MiB*2,small:2MiB]");
    assert_int_equal(p.nentries, 3);
    assert_int_equal(plan_segments(&p), 9);
    /* its bytes: the run's own peak reserved, nothing more */
    assert_int_equal(p.plan_bytes, 3114 * MiB);
    assert_int_equal(p.peak_reserved_bytes, 3114 * MiB);
    assert_int_equal(p.peak_reserved_with_plan, 3114 * MiB);
    /* what it saves, and what it costs once */
    assert_int_equal(p.device_allocs_before, 9);
    assert_int_equal(p.device_allocs_after, 0);
    assert_int_equal(p.device_calls_before, 9);
    assert_int_equal(p.device_calls_after, 0);
    assert_true(p.cost_before_us > 500 && p.cost_after_us == 0);
    assert_int_equal(p.plan_calls, 9);
    assert_true(p.plan_cost_us > 500);
    assert_true(p.fits);
    assert_true(p.rounds >= 1);
    assert_string_equal(p.note, "");
    /* an independent replay: no device allocation beyond the plan's nine */
    uint64_t peak;
    assert_int_equal(replay_with(t, p.env, 80 * GiB, 9, &peak), 0);
    assert_int_equal(peak, 3114 * MiB);
    /* without the plan the same replay allocates nine times */
    assert_int_equal(replay_with(t, "max_split_size_mb:512", 80 * GiB, 0, &peak), 9);

    /* PyTorch's defaults: the seven 512 MiB segments the split blocks cost */
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "", &o, &p), SUBLET_OK);
    assert_string_equal(p.env, "warmup:[large:512MiB*7,large:20MiB,small:2MiB]");
    assert_int_equal(p.plan_bytes, 3606 * MiB);
    assert_int_equal(p.device_allocs_after, 0);
    assert_int_equal(replay_with(t, p.env, 80 * GiB, 9, &peak), 0);

    /* expandable segments: pages mapped ahead, one run per pool */
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "expandable_segments:True", &o, &p),
                     SUBLET_OK);
    assert_string_equal(p.option, "warmup:[large:3620MiB,small:2MiB]");
    assert_int_equal(p.plan_bytes, 3622 * MiB);
    assert_int_equal(p.device_allocs_before, 10);
    assert_int_equal(p.device_allocs_after, 0);
    assert_int_equal(p.plan_calls, 4); /* two VA reserves, two maps */
    assert_int_equal(replay_with(t, p.env, 80 * GiB, 2, &peak), 0);
    assert_int_equal(peak, 3622 * MiB);

    /* policy:stitch has none */
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "policy:stitch", &o, &p),
                     SUBLET_ERR_UNSUPPORTED);
    assert_non_null(strstr(p.note, "policy:stitch"));
    assert_int_equal(p.nentries, 0);
    /* errors */
    assert_int_equal(sublet_tune_plan_derive(NULL, 1, "", &o, &p), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "max_split_size_mb:2", &o, &p),
                     SUBLET_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(p.note, "max_split_size_mb"));
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "", &o, NULL), SUBLET_ERR_INVALID_ARGUMENT);
    sublet_trace_free(t);
}

/* A device smaller than the plan: said, not hidden. */
static void test_plan_small_device(void **state)
{
    (void)state;
    sublet_trace *t = attention();
    const sublet_trace *tt = t;
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    o.device_memory = 3 * GiB;
    sublet_tune_plan p;
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "max_split_size_mb:512", &o, &p), SUBLET_OK);
    assert_false(p.fits);
    assert_non_null(strstr(p.note, "does not fit your device"));
    sublet_trace_free(t);
}

/* ---- inside sublet_tune ------------------------------------------------------------------ */

static void test_plan_in_tune(void **state)
{
    (void)state;
    sublet_trace *t = attention();
    const sublet_trace *tt = t;
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    o.diagnose = 0;
    sublet_tune_result r1, r4;
    o.threads = 1;
    assert_int_equal(sublet_tune(&tt, 1, &o, &r1), SUBLET_OK);
    o.threads = 4;
    assert_int_equal(sublet_tune(&tt, 1, &o, &r4), SUBLET_OK);
    const sublet_tune_plan *p = &r1.plan;
    assert_int_equal(p->status, SUBLET_OK);
    assert_string_equal(p->conf, r1.sublet.conf); /* the SUBLET_ALLOC_CONF answer's plan */
    assert_int_equal(p->device_allocs_after, 0);
    assert_int_equal(p->plan_bytes, r1.sublet.peak_reserved_bytes);
    assert_memory_equal(&r1.plan, &r4.plan, sizeof r1.plan); /* deterministic */
    sublet_tune_result_free(&r1);
    sublet_tune_result_free(&r4);
    /* off */
    o.warmup = 0;
    assert_int_equal(sublet_tune(&tt, 1, &o, &r1), SUBLET_OK);
    assert_int_equal(r1.plan.nentries, 0);
    assert_string_equal(r1.plan.conf, "");
    sublet_tune_result_free(&r1);
    sublet_trace_free(t);
}

/* Two traces of the same run (the CSV and the pickle): the same plan. */
static void test_plan_several_traces(void **state)
{
    (void)state;
    sublet_trace *a = attention();
    sublet_trace *b = load(testdata_dir(), "cs336_attention_microbench.pickle.gz");
    const sublet_trace *two[2] = {a, b};
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    sublet_tune_plan p;
    assert_int_equal(sublet_tune_plan_derive(two, 2, "max_split_size_mb:512", &o, &p), SUBLET_OK);
    assert_string_equal(p.option, "warmup:[large:512MiB*6,large:20MiB*2,small:2MiB]");
    assert_int_equal(p.device_allocs_before, 18); /* summed over the traces */
    assert_int_equal(p.device_allocs_after, 0);
    sublet_trace_free(a);
    sublet_trace_free(b);
}

/* ---- what a plan cannot remove ---------------------------------------------------------- */

static void ev(sublet_trace *t, uint32_t kind, uint64_t addr, uint64_t size, sublet_stream s)
{
    sublet_trace_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.addr = addr;
    e.size = size;
    e.stream = s;
    e.line = sublet_trace_count(t) + 2;
    assert_int_equal(sublet_trace_append(t, &e), SUBLET_OK);
}

static void alloc_free(sublet_trace *t, uint64_t addr, uint64_t size, sublet_stream s)
{
    ev(t, SUBLET_ACT_ALLOC, addr, size, s);
    ev(t, SUBLET_ACT_FREE_REQUESTED, addr, size, s);
    ev(t, SUBLET_ACT_FREE_COMPLETED, addr, size, s);
}

static void test_plan_limits(void **state)
{
    (void)state;
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    sublet_tune_plan p;
    /* an empty_cache between two uses of a 100 MiB segment */
    sublet_trace *t;
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    const uint64_t A = UINT64_C(0x7f1000000000);
    alloc_free(t, A, 100 * MiB, 0);
    ev(t, SUBLET_ACT_SEGMENT_FREE, A, 100 * MiB, 0);
    alloc_free(t, A, 100 * MiB, 0);
    const sublet_trace *tt = t;
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "", &o, &p), SUBLET_OK);
    assert_string_equal(p.option, "warmup:[large:100MiB]");
    assert_int_equal(p.device_allocs_before, 2);
    assert_int_equal(p.device_allocs_after, 1); /* the one after the empty_cache */
    assert_int_equal(p.frees_after, 1);
    assert_non_null(strstr(p.note, "empty_cache() 1 time"));
    sublet_trace_free(t);

    /* another stream's segment is not covered */
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    ev(t, SUBLET_ACT_ALLOC, A, 30 * MiB, 0);
    ev(t, SUBLET_ACT_ALLOC, A + GiB, 30 * MiB, 5);
    ev(t, SUBLET_ACT_FREE_REQUESTED, A, 30 * MiB, 0);
    ev(t, SUBLET_ACT_FREE_COMPLETED, A, 30 * MiB, 0);
    alloc_free(t, A + 2 * GiB, 1000, 0);
    tt = t;
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "", &o, &p), SUBLET_OK);
    assert_string_equal(p.option, "warmup:[large:30MiB,small:2MiB]");
    assert_int_equal(p.device_allocs_before, 3);
    assert_int_equal(p.device_allocs_after, 1);
    assert_int_equal(p.other_stream_segments, 1);
    assert_non_null(strstr(p.note, "1 segment of other streams is not covered"));
    sublet_trace_free(t);

    /* nothing to plan: a trace whose every request fits the segments it adopted */
    assert_int_equal(sublet_trace_create(&t), SUBLET_OK);
    ev(t, SUBLET_TRACE_PRE_SEGMENT, A, 20 * MiB, 0);
    alloc_free(t, A, 8 * MiB, 0);
    tt = t;
    assert_int_equal(sublet_tune_plan_derive(&tt, 1, "", &o, &p), SUBLET_OK);
    assert_int_equal(p.nentries, 0);
    assert_int_equal(p.device_allocs_before, 0);
    assert_non_null(strstr(p.note, "needs no plan"));
    sublet_trace_free(t);
}

/* ---- the shared snapshots ----------------------------------------------------------------- */

static void test_plan_shared(void **state)
{
    (void)state;
    const char *d = getenv("SUBLET_SHARED");
    char dir[4096];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s/traces/pytorch_snapshot", d && *d ? d : "/nonexistent");
    if (!d || !*d || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        print_message("no shared traces: skipped\n");
        skip();
    }
    static const char *const names[] = {
        "cs336_lm_win.pickle.gz", "decomfl_opt_zo_fl.pickle.gz",
        "hf_lora8bit_finetune_notebook.pickle.gz", "small_cnn_counterfactual.pickle.gz",
        "cs336_lm_fullstep_fp32_ctx128.pickle.gz", "cs336_lm_forward_mixed_ctx256.pickle.gz"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sublet_trace *t = load(dir, names[i]);
        const sublet_trace *tt = t;
        sublet_tune_options o;
        sublet_tune_options_init(&o);
        sublet_tune_plan p;
        assert_int_equal(sublet_tune_plan_derive(&tt, 1, "expandable_segments:True", &o, &p),
                         SUBLET_OK);
        /* complete, unless the trace empties the cache itself */
        if (strstr(names[i], "forward_mixed")) {
            assert_true(p.device_allocs_after > 0);
            assert_non_null(strstr(p.note, "empty_cache()"));
        } else {
            if (p.device_allocs_after != 0)
                fail_msg("%s: %llu allocations remain: %s", names[i],
                         (unsigned long long)p.device_allocs_after, p.note);
            assert_true(p.device_allocs_before > 0);
            assert_int_equal(p.plan_bytes, p.peak_reserved_bytes);
        }
        sublet_trace_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_attention),   cmocka_unit_test(test_plan_small_device),
        cmocka_unit_test(test_plan_in_tune),     cmocka_unit_test(test_plan_several_traces),
        cmocka_unit_test(test_plan_limits),      cmocka_unit_test(test_plan_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
