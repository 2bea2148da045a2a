/* The size from which a replay runs alike (sublet_replay_result.same_from)
 * and the min capacity search that answers probes by it
 * (sublet_replay_min_capacity_ex): a replay on same_from, and on any larger
 * size, is the very same run (every call, every statistic); one byte less
 * is not; what reads the capacity (expandable segments), refuses a call (a
 * retry) or runs out has none; and the search finds the same answer, probes
 * and monotonicity as sublet_replay_min_capacity with fewer replays. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/replay.h"
#include "sublet/trace.h"
#include "test_data.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static sublet_trace *load(const char *name)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", testdata_dir(), name);
    sublet_trace *t = NULL;
    if (sublet_trace_load_csv(path, &t, err, sizeof err) != SUBLET_OK)
        fail_msg("cannot load %s: %s", path, err);
    return t;
}

static sublet_replay_result run(const sublet_trace *t, const char *conf, uint64_t cap)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    o.device_memory = cap;
    sublet_replay_result r;
    char err[512];
    if (sublet_replay_run(t, &o, &r, err, sizeof err) != SUBLET_OK)
        fail_msg("replay %s on %llu bytes: %s", conf, (unsigned long long)cap, err);
    return r;
}

/* Two replays that are the same run: every count and statistic alike. */
static void assert_alike(const sublet_replay_result *a, const sublet_replay_result *b)
{
    assert_int_equal(a->events, b->events);
    assert_int_equal(a->ooms, b->ooms);
    assert_int_equal(a->errors, b->errors);
    assert_int_equal(a->peak_reserved_bytes, b->peak_reserved_bytes);
    assert_int_equal(a->peak_reserved_event, b->peak_reserved_event);
    assert_int_equal(a->final_reserved_bytes, b->final_reserved_bytes);
    assert_int_equal(a->alloc_retries, b->alloc_retries);
    assert_memory_equal(&a->device_ops, &b->device_ops, sizeof a->device_ops);
    assert_memory_equal(&a->fidelity, &b->fidelity, sizeof a->fidelity);
    assert_memory_equal(&a->stats_end.reserved_bytes, &b->stats_end.reserved_bytes,
                        sizeof a->stats_end.reserved_bytes);
    assert_memory_equal(&a->stats_end.allocated_bytes, &b->stats_end.allocated_bytes,
                        sizeof a->stats_end.allocated_bytes);
    assert_int_equal(a->stats_end.num_device_alloc, b->stats_end.num_device_alloc);
}

/* On 80 GiB: a same_from for conf; the replays on it and above it alike;
 * one byte below, not. */
static void check_alike(const sublet_trace *t, const char *conf)
{
    sublet_replay_result big = run(t, conf, 80 * GiB);
    uint64_t s = big.same_from;
    if (s == SUBLET_REPLAY_NONE)
        fail_msg("%s: no same_from", conf);
    assert_true(s <= 80 * GiB);
    assert_true(s >= big.peak_reserved_bytes / 2); /* not a made-up number */
    uint64_t sizes[] = {s, s + 1, s + (80 * GiB - s) / 3};
    for (size_t i = 0; i < 3; i++) {
        sublet_replay_result r = run(t, conf, sizes[i]);
        assert_alike(&big, &r);
        assert_int_equal(r.same_from, s);
        sublet_replay_result_free(&r);
    }
    sublet_replay_result below = run(t, conf, s - 1);
    /* one byte less: a call refused (a retry, an OOM) or the collector at
     * work, so not alike and not known */
    assert_int_equal(below.same_from, SUBLET_REPLAY_NONE);
    sublet_replay_result_free(&below);
    sublet_replay_result_free(&big);
}

static void test_same_from_alike(void **state)
{
    (void)state;
    const char *traces[] = {"cs336_attention_microbench.events.csv", "nonmonotone.events.csv"};
    const char *confs[] = {"", "max_split_size_mb:64,roundup_power2_divisions:4",
                           "garbage_collection_threshold:0.8,per_process_memory_fraction:0.999",
                           "per_process_memory_fraction:0.5"};
    for (size_t i = 0; i < 2; i++) {
        sublet_trace *t = load(traces[i]);
        for (size_t c = 0; c < 4; c++)
            check_alike(t, confs[c]);
        sublet_trace_free(t);
    }
}

static void test_same_from_unknown(void **state)
{
    (void)state;
    sublet_trace *t = load("cs336_attention_microbench.events.csv");
    /* expandable segments size their reservations by the device */
    sublet_replay_result r = run(t, "expandable_segments:True", 80 * GiB);
    assert_int_equal(r.ooms, 0);
    assert_int_equal(r.same_from, SUBLET_REPLAY_NONE);
    sublet_replay_result_free(&r);
    /* so does policy:stitch's plan */
    r = run(t, "policy:stitch", 80 * GiB);
    assert_int_equal(r.same_from, SUBLET_REPLAY_NONE);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
    /* a retry (a call the device refused, which a larger one grants: a
     * larger device does worse on this trace) and an OOM */
    t = load("nonmonotone.events.csv");
    r = run(t, "", 62 * MiB);
    assert_int_equal(r.ooms, 0);
    assert_true(r.alloc_retries > 0);
    assert_int_equal(r.same_from, SUBLET_REPLAY_NONE);
    sublet_replay_result_free(&r);
    r = run(t, "", 40 * MiB);
    assert_true(r.ooms > 0);
    assert_int_equal(r.same_from, SUBLET_REPLAY_NONE);
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
}

static void assert_same_search(const sublet_mincap_result *a, const sublet_mincap_result *b)
{
    assert_int_equal(a->min_capacity_bytes, b->min_capacity_bytes);
    assert_int_equal(a->peak_requested_bytes, b->peak_requested_bytes);
    assert_true(a->overhead == b->overhead);
    assert_int_equal(a->monotone, b->monotone);
    assert_int_equal(a->smallest_ok_bytes, b->smallest_ok_bytes);
    assert_int_equal(a->failed_above, b->failed_above);
    assert_int_equal(a->nprobes, b->nprobes);
    assert_memory_equal(a->probes, b->probes, a->nprobes * sizeof *a->probes);
    assert_true(b->replays <= a->replays);
}

/* The plain search against the inferring one, without and with the
 * caller's run on 80 GiB as a seed, and with at_min kept. */
static uint64_t check_search(const sublet_trace *t, const char *conf)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = conf;
    char err[512];
    sublet_mincap_result plain, inf, seeded, kept;
    assert_int_equal(sublet_replay_min_capacity(t, &o, 0, &plain, err, sizeof err), SUBLET_OK);
    assert_int_equal(sublet_replay_min_capacity_ex(t, &o, 0,
                                                   SUBLET_MINCAP_INFER | SUBLET_MINCAP_NO_AT_MIN,
                                                   SUBLET_REPLAY_NONE, &inf, err, sizeof err),
                     SUBLET_OK);
    sublet_replay_result big = run(t, conf, 80 * GiB);
    assert_int_equal(sublet_replay_min_capacity_ex(t, &o, 0,
                                                   SUBLET_MINCAP_INFER | SUBLET_MINCAP_NO_AT_MIN,
                                                   big.same_from, &seeded, err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(sublet_replay_min_capacity_ex(t, &o, 0, SUBLET_MINCAP_INFER,
                                                   big.same_from, &kept, err, sizeof err),
                     SUBLET_OK);
    assert_same_search(&plain, &inf);
    assert_same_search(&plain, &seeded);
    assert_same_search(&plain, &kept);
    assert_int_equal(inf.at_min.events, 0); /* NO_AT_MIN */
    assert_alike(&plain.at_min, &kept.at_min);
    uint64_t saved = plain.replays - seeded.replays;
    sublet_replay_result_free(&big);
    sublet_mincap_result_free(&plain);
    sublet_mincap_result_free(&inf);
    sublet_mincap_result_free(&seeded);
    sublet_mincap_result_free(&kept);
    return saved;
}

static void test_mincap_ex_same(void **state)
{
    (void)state;
    const char *traces[] = {"cs336_attention_microbench.events.csv", "offload_gc.events.csv",
                            "nonmonotone.events.csv"};
    const char *confs[] = {"", "garbage_collection_threshold:0.6,per_process_memory_fraction:0.999",
                           "expandable_segments:True", "max_split_size_mb:64"};
    uint64_t saved = 0;
    for (size_t i = 0; i < 3; i++) {
        sublet_trace *t = load(traces[i]);
        for (size_t c = 0; c < 4; c++)
            saved += check_search(t, confs[c]);
        sublet_trace_free(t);
    }
    assert_true(saved > 0); /* it does answer probes without replaying */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_from_alike),
        cmocka_unit_test(test_same_from_unknown),
        cmocka_unit_test(test_mincap_ex_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
