/* Tests of pytorch_version (docs/versions.md): each rule that a PyTorch release selects, in
 * the parser (src/engine/config.c) and in the engine (the memory fraction's limit, GC). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/harness.h"
#include "sublet/config.h"

static sublet_settings parsed(const char *conf)
{
    sublet_settings s;
    char err[256] = "";
    sublet_settings_default(&s);
    if (sublet_settings_parse(&s, conf, err, sizeof err) != SUBLET_OK)
        fail_msg("parse of \"%s\" failed: %s", conf, err);
    return s;
}

static void expect_error(const char *conf, const char *want)
{
    sublet_settings s;
    char err[256] = "";
    sublet_settings_default(&s);
    assert_int_equal(sublet_settings_parse(&s, conf, err, sizeof err), SUBLET_ERR_CONFIG);
    assert_string_equal(err, want);
}

static void test_version_values(void **state)
{
    (void)state;
    sublet_settings s;
    sublet_settings_default(&s);
    assert_int_equal(s.pytorch_version, SUBLET_PYTORCH_NEWEST);
    assert_true(sublet_settings_since(&s, SUBLET_PYTORCH_VERSION(2, 9)));
    assert_int_equal(parsed("pytorch_version:2.6").pytorch_version, 206);
    assert_int_equal(parsed("pytorch_version:2.6.0").pytorch_version, 206);
    assert_int_equal(parsed("pytorch_version:2.10").pytorch_version, 210);
    assert_int_equal(parsed("pytorch_version:newest").pytorch_version, SUBLET_PYTORCH_NEWEST);
    s = parsed("pytorch_version:2.8");
    assert_false(sublet_settings_since(&s, SUBLET_PYTORCH_VERSION(2, 9)));
    assert_true(sublet_settings_since(&s, SUBLET_PYTORCH_VERSION(2, 8)));
    expect_error("pytorch_version:2.5", "pytorch_version 2.5: sublet follows PyTorch 2.6 and later");
    expect_error("pytorch_version:2", "Invalid value '2' for pytorch_version: expected a PyTorch "
                                      "release such as 2.6 or 'newest'");
    expect_error("pytorch_version:2.x", "Invalid value '2.x' for pytorch_version: expected a "
                                        "PyTorch release such as 2.6 or 'newest'");
    /* kept by a later parse unless named again */
    s = parsed("pytorch_version:2.6");
    assert_int_equal(sublet_settings_parse(&s, "max_split_size_mb:64", NULL, 0), SUBLET_OK);
    assert_int_equal(s.pytorch_version, 206);
    assert_int_equal(sublet_settings_parse(&s, "pytorch_version:newest", NULL, 0), SUBLET_OK);
    assert_int_equal(s.pytorch_version, SUBLET_PYTORCH_NEWEST);
}

/* roundup_power2_divisions:[...,>:v]: 2.6-2.8 fill from the last listed bucket itself */
static void test_roundup_fill(void **state)
{
    (void)state;
    const char *list = "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]";
    char conf[128];
    sublet_settings newest = parsed(list);
    snprintf(conf, sizeof conf, "%s,pytorch_version:2.8", list); /* its place does not matter */
    sublet_settings old = parsed(conf);
    for (int k = 0; k < SUBLET_ROUNDUP_BUCKETS; k++) {
        uint32_t want_new = k <= 8 ? 1 : k == 9 ? 2 : k == 10 ? 4 : 8;
        uint32_t want_old = k <= 8 ? 1 : k == 9 ? 2 : 8; /* bucket 10 (1024) overwritten */
        assert_int_equal(newest.roundup_power2_divisions[k], want_new);
        assert_int_equal(old.roundup_power2_divisions[k], want_old);
    }
    /* a 1.5 GiB request (bucket 10): 4 divisions in 2.9+, 8 before */
    uint64_t n = 1536 * ((uint64_t)1 << 20) + 1;
    assert_int_equal(sublet_round_size(&newest, n), 1792ull << 20);
    assert_int_equal(sublet_round_size(&old, n), 1664ull << 20);
    /* '>' alone fills every bucket before 2.9, buckets 1-15 after */
    assert_int_equal(parsed("pytorch_version:2.6,roundup_power2_divisions:[>:4]")
                         .roundup_power2_divisions[0],
                     4);
    assert_int_equal(parsed("roundup_power2_divisions:[>:4]").roundup_power2_divisions[0], 0);
}

static void test_bounds_and_reset(void **state)
{
    (void)state;
    /* max_split_size_mb / max_non_split_rounding_mb: > 20 before 2.9, >= 20 after */
    assert_int_equal(parsed("max_split_size_mb:20").max_split_size, 20ull << 20);
    expect_error("pytorch_version:2.6,max_split_size_mb:20",
                 "CachingAllocator option max_split_size_mb too small, must be > 20");
    expect_error("max_non_split_rounding_mb:20,pytorch_version:2.7",
                 "CachingAllocator option max_non_split_rounding_mb too small, must be > 20");
    expect_error("max_split_size_mb:19",
                 "CachingAllocator option max_split_size_mb too small, must be >= 20");
    assert_int_equal(parsed("pytorch_version:2.6,max_split_size_mb:21").max_split_size,
                     21ull << 20);
    /* max_non_split_rounding: reset by every parse in 2.9+, kept before */
    sublet_settings s = parsed("pytorch_version:2.6,max_non_split_rounding_mb:64");
    assert_int_equal(sublet_settings_parse(&s, "max_split_size_mb:128", NULL, 0), SUBLET_OK);
    assert_int_equal(s.max_non_split_rounding, 64ull << 20);
    s = parsed("max_non_split_rounding_mb:64");
    assert_int_equal(sublet_settings_parse(&s, "max_split_size_mb:128", NULL, 0), SUBLET_OK);
    assert_int_equal(s.max_non_split_rounding, 20ull << 20);
}

static void test_texts_and_options(void **state)
{
    (void)state;
    /* which options exist */
    expect_error("pytorch_version:2.6,per_process_memory_fraction:0.5",
                 "Unrecognized CachingAllocator option: per_process_memory_fraction");
    expect_error("pytorch_version:2.8,graph_capture_record_stream_reuse:True",
                 "Unrecognized CachingAllocator option: graph_capture_record_stream_reuse");
    expect_error("pytorch_version:2.7,pinned_reserve_segment_size_mb:8",
                 "Unrecognized CachingAllocator option: pinned_reserve_segment_size_mb");
    assert_int_equal(parsed("pytorch_version:2.8,pinned_reserve_segment_size_mb:8")
                         .pinned_reserve_segment_size_mb,
                     8);
    assert_true(parsed("pytorch_version:2.9,per_process_memory_fraction:0.5")
                    .per_process_memory_fraction == 0.5);
    expect_error("pytorch_version:2.9,large_segment_size_mb:64",
                 "Unrecognized key 'large_segment_size_mb' in CUDA allocator config.");
    assert_int_equal(parsed("large_segment_size_mb:64").large_segment_size, 64ull << 20);
    expect_error("pytorch_version:2.6,foo:1", "Unrecognized CachingAllocator option: foo");
    /* the error texts of 2.6 */
    expect_error("pytorch_version:2.6,garbage_collection_threshold:0",
                 "garbage_collect_threshold too small, set it 0.0~1.0");
    expect_error("pytorch_version:2.6,garbage_collection_threshold:1.2",
                 "garbage_collect_threshold too big, set it 0.0~1.0");
    expect_error("garbage_collection_threshold:1.2",
                 "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    expect_error("pytorch_version:2.6,expandable_segments:yes",
                 "Expected a single True/False argument for expandable_segments");
    expect_error("pytorch_version:2.6,release_lock_on_hipmalloc:1",
                 "Expected a single True/False argument for release_lock_on_cudamalloc");
    expect_error("pytorch_version:2.6,roundup_power2_divisions:3",
                 "For roundups, the divisons has to be power of 2 ");
    expect_error("pytorch_version:2.6,roundup_power2_divisions:[3:4]",
                 "For roundups, the intervals have to be power of 2 ");
    expect_error("pytorch_version:2.6,pinned_num_register_threads:3",
                 "Number of register threads has to be power of 2 ");
    expect_error("pytorch_version:2.6,pinned_num_register_threads:256",
                 "Number of register threads should be less than or equal to 128");
    /* 2.6's tokenizer drops only ' ': a tab stays in the key */
    assert_int_equal(parsed("\tmax_split_size_mb : 64").max_split_size, 64ull << 20);
    expect_error("pytorch_version:2.6,\tmax_split_size_mb:64",
                 "Unrecognized CachingAllocator option: ?max_split_size_mb");
    assert_int_equal(parsed("pytorch_version:2.6, max_split_size_mb : 64").max_split_size,
                     64ull << 20);
    /* sublet's memory_fraction (the call) exists in every version */
    assert_true(parsed("pytorch_version:2.6,memory_fraction:1").memory_fraction == 1.0);
    assert_true(parsed("").memory_fraction < 0.0);
    expect_error("memory_fraction:1.5", "Invalid fraction value: 1.5. Allowed range: 0~1");
}

static void test_env_lookup(void **state)
{
    (void)state;
    const char *which = NULL;
    unsetenv("SUBLET_ALLOC_CONF");
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:64", 1);
    assert_string_equal(sublet_settings_env_for(SUBLET_PYTORCH_NEWEST, &which),
                        "max_split_size_mb:64");
    assert_string_equal(which, "PYTORCH_ALLOC_CONF");
    assert_non_null(sublet_settings_env_for(SUBLET_PYTORCH_VERSION(2, 9), NULL));
    assert_null(sublet_settings_env_for(SUBLET_PYTORCH_VERSION(2, 8), &which)); /* not read */
    assert_null(which);
    setenv("PYTORCH_CUDA_ALLOC_CONF", "", 1);
    assert_string_equal(sublet_settings_env_for(SUBLET_PYTORCH_VERSION(2, 6), &which), "");
    assert_string_equal(which, "PYTORCH_CUDA_ALLOC_CONF");
    unsetenv("PYTORCH_ALLOC_CONF");
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
}

/* 400 MiB in four 100 MiB segments, three cached; a 150 MiB request fits none of them, so GC
 * runs (when active) before the device is asked: the number of segments it released. */
static int64_t gc_frees(const char *conf, double call)
{
    h_env e;
    h_env_init(&e, H_SIM, GiB, conf);
    if (call >= 0.0)
        assert_int_equal(sublet_memory_fraction_set(e.a, call), SUBLET_OK);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = h_malloc(e.a, 100 * MiB, 0);
    for (int i = 0; i < 3; i++)
        h_free(e.a, p[i]);
    void *q = h_malloc(e.a, 150 * MiB, 0);
    int64_t frees = h_stat(e.a, "num_device_free");
    h_free(e.a, q);
    h_free(e.a, p[3]);
    h_env_fini(&e);
    return frees;
}

/* A string that parses parses again, to the same settings, on its own result and on
 * settings of any release: pytorch_version's value is read by the tokenizer of the release
 * it selects (fuzz/regressions/fuzz_config/crash-version-cr: "\r\r\r2.8" was taken as 2.8
 * by the newest tokenizer, then refused by 2.8's own, which keeps '\r', on a second parse). */
static void twice_same(const char *conf, const char *base)
{
    sublet_settings s = parsed(base), again;
    char err[256] = "";
    if (sublet_settings_parse(&s, conf, err, sizeof err) != SUBLET_OK)
        fail_msg("parse of \"%s\" on \"%s\" failed: %s", conf, base, err);
    memcpy(&again, &s, sizeof s);
    if (sublet_settings_parse(&again, conf, err, sizeof err) != SUBLET_OK)
        fail_msg("\"%s\" accepted once on \"%s\", then refused: %s", conf, base, err);
    assert_memory_equal(&again, &s, sizeof s);
}

static void test_version_whitespace(void **state)
{
    (void)state;
    const char *bases[] = {"", "pytorch_version:2.6", "pytorch_version:2.9",
                           ("expandable_segments:True,backend:cudaMallocAsync,"
                            "pinned_reserve_segment_size_mb:7")}; /* fuzz_config's 4th */
    const char *cr = "Invalid value '???2.8' for pytorch_version: expected a PyTorch release "
                     "such as 2.6 or 'newest'";
    char err[256];
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        sublet_settings s = parsed(bases[b]), before;
        memcpy(&before, &s, sizeof s);
        /* refused at the first parse, whatever the settings parsed on, unchanged */
        assert_int_equal(sublet_settings_parse(&s, "pytorch_version:\r\r\r2.8", err, sizeof err),
                         SUBLET_ERR_CONFIG);
        assert_string_equal(err, cr);
        assert_int_equal(
            sublet_settings_parse(&s, "max_split_size_mb:64,pytorch_version:2.6\t", err,
                                  sizeof err),
            SUBLET_ERR_CONFIG);
        assert_string_equal(err, "Invalid value '2.6?' for pytorch_version: expected a PyTorch "
                                 "release such as 2.6 or 'newest'");
        assert_memory_equal(&s, &before, sizeof s);
        /* ' ' is dropped by every tokenizer; other whitespace by the newest one only */
        twice_same("pytorch_version: 2.8 ,max_split_size_mb: 64", bases[b]);
        twice_same("pytorch_version:\t2.9,\tmax_split_size_mb:64", bases[b]);
        twice_same("pytorch_version:\r\nnewest\v,expandable_segments:\fTrue", bases[b]);
        twice_same("max_split_size_mb:64", bases[b]);
        assert_int_equal(sublet_settings_parse(&s, "pytorch_version:\t2.9", err, sizeof err),
                         SUBLET_OK);
        assert_int_equal(s.pytorch_version, 209);
    }
}

/* Before 2.9 a call of set_per_process_memory_fraction puts a limit in effect even at 1.0,
 * and with it the garbage collector; from 2.9 only a fraction below 1 does. */
static void test_fraction_limit(void **state)
{
    (void)state;
    const char *gc = "garbage_collection_threshold:0.3";
    char conf[128];
    snprintf(conf, sizeof conf, "pytorch_version:2.6,%s,memory_fraction:1", gc);
    assert_true(gc_frees(conf, -1) > 0);
    snprintf(conf, sizeof conf, "%s,memory_fraction:1", gc);
    assert_int_equal(gc_frees(conf, -1), 0);
    snprintf(conf, sizeof conf, "pytorch_version:2.6,%s", gc);
    assert_int_equal(gc_frees(conf, -1), 0); /* no call, no limit */
    assert_true(gc_frees(conf, 1.0) > 0);    /* the API call */
    assert_int_equal(gc_frees(gc, 1.0), 0);
    assert_true(gc_frees(gc, 0.9) > 0);
    snprintf(conf, sizeof conf, "%s,memory_fraction:0.9", gc);
    assert_true(gc_frees(conf, -1) > 0);
}

/* Does the OOM message of a request past the device advise expandable segments? */
static bool oom_advises(const char *conf)
{
    h_env e;
    h_env_init(&e, H_SIM, 1 * GiB, conf);
    void *p = NULL;
    assert_int_equal(h_try_malloc(e.a, 2 * GiB, 0, &p), SUBLET_ERR_OOM);
    char msg[2048];
    assert_true(sublet_oom_message(e.a, msg, sizeof msg) < sizeof msg);
    assert_non_null(strstr(msg, "is reserved by PyTorch but unallocated."));
    bool advises = strstr(msg, "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                               "to avoid fragmentation.  See documentation") != NULL;
    h_env_fini(&e);
    return advises;
}

/* PyTorch 2.14 advises expandable segments in an OOM message only while they are off. */
static void test_oom_advice(void **state)
{
    (void)state;
    assert_true(oom_advises(""));
    assert_true(oom_advises("pytorch_version:2.14"));
    assert_false(oom_advises("expandable_segments:True"));
    assert_false(oom_advises("pytorch_version:2.14,expandable_segments:True"));
    assert_true(oom_advises("pytorch_version:2.13,expandable_segments:True"));
    assert_true(oom_advises("pytorch_version:2.6,expandable_segments:True"));
}

/* Two cached 40 MiB segments, the older at the higher address (the lower one
 * was released and made again): the segment a 12 MiB request is cut from. */
static bool best_fit_takes_older(const char *conf)
{
    h_env e;
    h_env_init(&e, H_SIM, GiB, conf);
    void *x = h_malloc(e.a, 40 * MiB, 0);
    void *older = h_malloc(e.a, 40 * MiB, 0);
    h_free(e.a, x);
    h_empty_cache(e.a);
    void *newer = h_malloc(e.a, 40 * MiB, 0); /* where x was: below `older` */
    assert_ptr_equal(newer, x);
    h_free(e.a, older);
    h_free(e.a, newer);
    void *q = h_malloc(e.a, 12 * MiB, 0);
    assert_true(q == older || q == newer);
    bool took_older = q == older;
    h_free(e.a, q);
    h_env_fini(&e);
    return took_older;
}

/* PyTorch 2.14 breaks a tie of free block sizes by the creation order of their segments
 * (its registration counter), earlier releases by the lower address; `newest` keeps the
 * address unless 2.14 is named (the traces replayed come from earlier releases). */
static void test_best_fit_tie(void **state)
{
    (void)state;
    assert_false(best_fit_takes_older(""));
    assert_true(best_fit_takes_older("pytorch_version:2.14"));
    assert_false(best_fit_takes_older("pytorch_version:2.13"));
    assert_false(best_fit_takes_older("pytorch_version:2.6"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_values),  cmocka_unit_test(test_roundup_fill),
        cmocka_unit_test(test_bounds_and_reset), cmocka_unit_test(test_texts_and_options),
        cmocka_unit_test(test_env_lookup),       cmocka_unit_test(test_fraction_limit),
        cmocka_unit_test(test_oom_advice),       cmocka_unit_test(test_best_fit_tie),
        cmocka_unit_test(test_version_whitespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
