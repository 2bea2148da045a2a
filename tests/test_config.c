/* Tests of src/config.c: size arithmetic (docs/rules.md §1.2–1.5), the PYTORCH_CUDA_ALLOC_CONF
 * parser (§5), environment lookup and sublet_parse_size. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/config.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* ---- helpers ---------------------------------------------------------------- */

static sublet_settings parsed_ok(const char *conf)
{
    sublet_settings s;
    char err[256] = "";
    sublet_settings_default(&s);
    sublet_status st = sublet_settings_parse(&s, conf, err, sizeof err);
    if (st != SUBLET_OK)
        fail_msg("parse of \"%s\" failed: %s", conf, err);
    return s;
}

/* Parse `conf` on top of defaults; it must fail with exactly `want`, and leave
 * the settings byte-identical. */
static void expect_error(const char *conf, const char *want)
{
    sublet_settings s, copy;
    char err[512];
    sublet_settings_default(&s);
    memcpy(&copy, &s, sizeof s);
    memset(err, 'x', sizeof err);
    sublet_status st = sublet_settings_parse(&s, conf, err, sizeof err);
    if (st != SUBLET_ERR_CONFIG)
        fail_msg("\"%s\": expected SUBLET_ERR_CONFIG, got %d", conf, (int)st);
    if (strcmp(err, want) != 0)
        fail_msg("\"%s\":\n  want: %s\n  got:  %s", conf, want, err);
    assert_memory_equal(&s, &copy, sizeof s);
}

static void expect_error_prefix(const char *conf, const char *prefix)
{
    sublet_settings s, copy;
    char err[512] = "";
    sublet_settings_default(&s);
    memcpy(&copy, &s, sizeof s);
    sublet_status st = sublet_settings_parse(&s, conf, err, sizeof err);
    if (st != SUBLET_ERR_CONFIG || strncmp(err, prefix, strlen(prefix)) != 0)
        fail_msg("\"%s\": status %d, message \"%s\", wanted prefix \"%s\"", conf, (int)st, err,
                 prefix);
    assert_memory_equal(&s, &copy, sizeof s);
}

static void expect_buckets(const sublet_settings *s, const uint32_t want[SUBLET_ROUNDUP_BUCKETS])
{
    for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
        if (s->roundup_power2_divisions[i] != want[i])
            fail_msg("bucket %d: want %u got %u", i, want[i], s->roundup_power2_divisions[i]);
}

/* ---- defaults and size arithmetic ---------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    sublet_settings s;
    memset(&s, 0xAB, sizeof s);
    sublet_settings_default(&s);
    assert_true(s.max_split_size == SUBLET_SIZE_UNLIMITED);
    assert_true(s.max_non_split_rounding == 20 * MiB);
    for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
        assert_int_equal(s.roundup_power2_divisions[i], 0);
    assert_true(s.garbage_collection_threshold == 0.0);
    assert_false(s.expandable_segments);
    assert_false(s.release_lock_on_cudamalloc);
    assert_false(s.pinned_use_cuda_host_register);
    assert_int_equal(s.pinned_num_register_threads, 1);
    assert_false(s.pinned_use_background_threads);
    assert_int_equal(s.pinned_reserve_segment_size_mb, 0);
    assert_false(s.graph_capture_record_stream_reuse);
    assert_true(s.per_process_memory_fraction == 1.0);
    assert_true(s.large_segment_size == 20 * MiB);
    assert_false(s.throw_on_cudamalloc_oom);
    assert_false(s.pinned_free_catch_all);
    assert_int_equal(s.backend_async, 0);
    assert_int_equal(s.policy, SUBLET_POLICY_NATIVE);
    assert_string_equal(s.raw, "");
}

/* Every row of the §1.2 worked-example table. */
static void test_round_size_table(void **state)
{
    (void)state;
    sublet_settings none, div4, list;
    sublet_settings_default(&none);
    div4 = parsed_ok("roundup_power2_divisions:4");
    list = parsed_ok("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]");

    assert_int_equal(sublet_round_size(&none, 1), 512);
    assert_int_equal(sublet_round_size(&none, 513), 1024);
    assert_int_equal(sublet_round_size(&none, 1048577), 1049088);
    assert_int_equal(sublet_round_size(&none, 84 * MiB), 84 * MiB);
    assert_int_equal(sublet_round_size(&div4, 84 * MiB), 96 * MiB);
    assert_int_equal(sublet_round_size(&list, 84 * MiB), 88 * MiB);
    assert_int_equal(sublet_round_size(&list, 400 * MiB), 512 * MiB);
    assert_int_equal(sublet_round_size(&div4, 1200), 1536);
    assert_int_equal(sublet_round_size(&div4, 9000), 10240);
    assert_int_equal(sublet_round_size(&none, 9000), 9216);
    /* A few more edges: 0, exact multiples, powers of two, NULL settings. */
    assert_int_equal(sublet_round_size(&none, 0), 512);
    assert_int_equal(sublet_round_size(&none, 512), 512);
    assert_int_equal(sublet_round_size(&div4, 64 * MiB), 64 * MiB);
    assert_int_equal(sublet_round_size(&div4, 80 * MiB), 80 * MiB);
    assert_int_equal(sublet_round_size(&div4, 80 * MiB + 1), 96 * MiB);
    assert_int_equal(sublet_round_size(NULL, 513), 1024);
}

static void test_round_size_overflow(void **state)
{
    (void)state;
    sublet_settings none, div4;
    sublet_settings_default(&none);
    div4 = parsed_ok("roundup_power2_divisions:4");
    assert_true(sublet_round_size(&none, UINT64_MAX) == UINT64_MAX);
    assert_true(sublet_round_size(&none, UINT64_MAX - 100) == UINT64_MAX);
    assert_true(sublet_round_size(&none, UINT64_MAX - 511) == UINT64_MAX - 511);
    assert_true(sublet_round_size(&div4, UINT64_MAX) == UINT64_MAX);
    assert_true(sublet_round_size(&div4, ((uint64_t)1 << 63) + 1) ==
                ((uint64_t)1 << 63) + ((uint64_t)1 << 61));
    assert_true(sublet_round_size(&div4, (uint64_t)1 << 63) == (uint64_t)1 << 63);
    assert_true(sublet_allocation_size(&none, UINT64_MAX) == UINT64_MAX);
    assert_true(sublet_allocation_size(&none, UINT64_MAX - 2 * MiB + 1) == UINT64_MAX - 2 * MiB + 1);
}

/* §1.5 examples. */
static void test_allocation_size(void **state)
{
    (void)state;
    sublet_settings s;
    sublet_settings_default(&s);
    assert_int_equal(sublet_allocation_size(&s, 512), 2 * MiB);
    assert_int_equal(sublet_allocation_size(&s, 1 * MiB), 2 * MiB);
    assert_int_equal(sublet_allocation_size(&s, 1 * MiB + 512), 20 * MiB);
    assert_int_equal(sublet_allocation_size(&s, 10 * MiB - 512), 20 * MiB);
    assert_int_equal(sublet_allocation_size(&s, 10 * MiB), 10 * MiB);
    assert_int_equal(sublet_allocation_size(&s, 10 * MiB + 512), 12 * MiB);
    s = parsed_ok("large_segment_size_mb:32");
    assert_int_equal(sublet_allocation_size(&s, 1 * MiB + 512), 32 * MiB);
    assert_int_equal(sublet_allocation_size(&s, 10 * MiB + 512), 12 * MiB);
}

/* ---- parsing ---------------------------------------------------------------- */

/* The ValueError cases of test_allocator_settings (§10), with exact texts. */
static void test_value_errors(void **state)
{
    (void)state;
    expect_error("foo:1,bar:2", "Unrecognized key 'foo' in CUDA allocator config.");
    expect_error("garbage_collection_threshold:1.2",
                 "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    expect_error("max_split_size_mb:2",
                 "CachingAllocator option max_split_size_mb too small, must be >= 20");
    expect_error("release_lock_on_cudamalloc:none",
                 "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'none'");
    expect_error("pinned_use_cuda_host_register:none",
                 "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'none'");
    expect_error("pinned_num_register_threads:none",
                 "Invalid value 'none' for pinned_num_register_threads: expected a non-negative "
                 "integer");
    expect_error("pinned_num_register_threads:1024",
                 "Number of register threads should be less than or equal to 128, got 1024");
}

static void test_error_texts(void **state)
{
    (void)state;
    expect_error("expandable_segments:True,max_split_size_mb:20,garbage_collection_threshold:0",
                 "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    expect_error("max_non_split_rounding_mb:19",
                 "CachingAllocator option max_non_split_rounding_mb too small, must be >= 20");
    expect_error("large_segment_size_mb:32,max_split_size_mb:31",
                 "CachingAllocator option max_split_size_mb too small, must be >= 32");
    /* large_segment_size_mb is applied first, whatever its position. */
    expect_error("max_split_size_mb:31,large_segment_size_mb:32",
                 "CachingAllocator option max_split_size_mb too small, must be >= 32");
    expect_error("large_segment_size_mb:10",
                 "CachingAllocator option large_segment_size_mb must be > 10 MB");
    expect_error("roundup_power2_divisions:3", "For roundups, the divisions has to be power of 2");
    expect_error("roundup_power2_divisions:0", "For roundups, the divisions has to be power of 2");
    expect_error_prefix("roundup_power2_divisions:[64:3]",
                        "For roundups, the divisions has to be power of 2");
    expect_error("roundup_power2_divisions:[96:2]",
                 "For roundups, the intervals have to be power of 2");
    expect_error("per_process_memory_fraction:1.1",
                 "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
    expect_error("backend:foo", "Unknown allocator backend, options are native and cudaMallocAsync");
    expect_error("policy:x", "Unknown sublet policy 'x', options are native and stitch");
    expect_error("pinned_num_register_threads:3",
                 "Number of register threads has to be power of 2, got 3");
    expect_error("pinned_num_register_threads:0",
                 "Number of register threads has to be power of 2, got 0");
    expect_error("pinned_reserve_segment_size_mb:0",
                 "Pinned reserve segment size has to be greater than 0");
    expect_error("expandable_segments:true",
                 "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'");
    expect_error("max_split_size_mb:100,expandable_segments:yes",
                 "Expected 'True' or 'False' at index 6 in ConfigTokenizer but got 'yes'");
    /* Syntax. */
    expect_error("max_split_size_mb", "Error parsing CachingAllocator settings, expected :");
    expect_error("max_split_size_mb=100", "Unrecognized key 'max_split_size_mb=100' in CUDA "
                                          "allocator config.");
    expect_error("max_split_size_mb:100:", "Error parsing CachingAllocator settings, expected ,");
    expect_error("max_split_size_mb:", "Error parsing CachingAllocator settings, expected a value "
                                       "for max_split_size_mb");
    expect_error("roundup_power2_divisions:[64:8",
                 "Error parsing CachingAllocator settings, expected ]");
    expect_error("roundup_power2_divisions:[64,8]",
                 "Error parsing CachingAllocator settings, expected :");
    expect_error("roundup_power2_divisions:[64:8:2]",
                 "Error parsing CachingAllocator settings, expected ,");
    expect_error(",", "Unrecognized key ',' in CUDA allocator config.");
    /* Numbers. */
    expect_error("max_split_size_mb:abc",
                 "Invalid value 'abc' for max_split_size_mb: expected a non-negative integer");
    expect_error("max_split_size_mb:-1",
                 "Invalid value '-1' for max_split_size_mb: expected a non-negative integer");
    expect_error("max_split_size_mb:20MB",
                 "Invalid value '20MB' for max_split_size_mb: expected a non-negative integer");
    expect_error("max_split_size_mb:99999999999999999999999",
                 "Invalid value '99999999999999999999999' for max_split_size_mb: expected a "
                 "non-negative integer");
    expect_error("max_split_size_mb:17592186044416",
                 "Invalid value '17592186044416' for max_split_size_mb: too large");
    expect_error("garbage_collection_threshold:nan",
                 "Invalid value 'nan' for garbage_collection_threshold: expected a number");
    expect_error("per_process_memory_fraction:1e999",
                 "Invalid value '1e999' for per_process_memory_fraction: expected a number");
    expect_error("roundup_power2_divisions:[x:2]",
                 "Invalid value 'x' for roundup_power2_divisions: expected a power-of-two size "
                 "in MiB or '>'");
    /* Quoted tokens are cut and cleaned. */
    char longkey[300];
    memset(longkey, 'k', sizeof longkey - 3);
    memcpy(longkey + sizeof longkey - 3, ":1", 3);
    char want[200];
    snprintf(want, sizeof want, "Unrecognized key '%.64s...' in CUDA allocator config.", longkey);
    expect_error(longkey, want);
    expect_error("fo\x01o:1", "Unrecognized key 'fo?o' in CUDA allocator config.");
}

static void test_options_and_aliases(void **state)
{
    (void)state;
    sublet_settings s = parsed_ok(
        "max_split_size_mb:100, max_non_split_rounding_mb:40, garbage_collection_threshold:0.6,"
        "expandable_segments:True, release_lock_on_hipmalloc:True,"
        "pinned_use_hip_host_register:True, pinned_num_register_threads:8,"
        "pinned_use_background_threads:True, pinned_reserve_segment_size_mb:64,"
        "graph_capture_record_stream_reuse:True, per_process_memory_fraction:0.25,"
        "large_segment_size_mb:32, throw_on_cudamalloc_oom:True, pinned_free_catch_all:True,"
        "backend:cudaMallocAsync, policy:native, expandable_segments_reserve:0.5,"
        "expandable_segments_reserve_by_class:[big:40G,small:0.1],");
    assert_true(s.max_split_size == 100 * MiB);
    assert_true(s.max_non_split_rounding == 40 * MiB);
    assert_true(s.garbage_collection_threshold == 0.6);
    assert_true(s.expandable_segments);
    assert_true(s.release_lock_on_cudamalloc);
    assert_true(s.pinned_use_cuda_host_register);
    assert_int_equal(s.pinned_num_register_threads, 8);
    assert_true(s.pinned_use_background_threads);
    assert_int_equal(s.pinned_reserve_segment_size_mb, 64);
    assert_true(s.graph_capture_record_stream_reuse);
    assert_true(s.per_process_memory_fraction == 0.25);
    assert_true(s.large_segment_size == 32 * MiB);
    assert_true(s.throw_on_cudamalloc_oom);
    assert_true(s.pinned_free_catch_all);
    assert_int_equal(s.backend_async, 1);
    assert_int_equal(s.policy, SUBLET_POLICY_NATIVE);

    s = parsed_ok("release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False,"
                  "backend:native,expandable_segments:False");
    assert_true(s.release_lock_on_cudamalloc);
    assert_false(s.pinned_use_cuda_host_register);
    assert_int_equal(s.backend_async, 0);
    assert_false(s.expandable_segments);

    /* max_non_split_rounding follows large_segment_size when not given. */
    s = parsed_ok("large_segment_size_mb:64");
    assert_true(s.max_non_split_rounding == 64 * MiB);
    assert_true(s.max_split_size == SUBLET_SIZE_UNLIMITED);
    /* Later entries win. */
    s = parsed_ok("max_split_size_mb:100,max_split_size_mb:200");
    assert_true(s.max_split_size == 200 * MiB);
}

static void test_whitespace_and_empty(void **state)
{
    (void)state;
    sublet_settings s = parsed_ok("  max_split _size_mb : 1 00 ,\texpandable_segments:\nTrue , ");
    assert_true(s.max_split_size == 100 * MiB);
    assert_true(s.expandable_segments);
    assert_string_equal(s.raw, "  max_split _size_mb : 1 00 ,\texpandable_segments:\nTrue , ");

    sublet_settings d;
    sublet_settings_default(&d);
    s = parsed_ok("");
    assert_memory_equal(&s, &d, sizeof s);
    s = parsed_ok(" \t ");
    assert_true(s.max_split_size == SUBLET_SIZE_UNLIMITED);
    s = parsed_ok("roundup_power2_divisions:[]");
    for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
        assert_int_equal(s.roundup_power2_divisions[i], 0);
    /* NULL string: reset only. */
    sublet_settings_default(&s);
    assert_int_equal(sublet_settings_parse(&s, NULL, NULL, 0), SUBLET_OK);
    assert_int_equal(sublet_settings_parse(NULL, "", NULL, 0), SUBLET_ERR_INVALID_ARGUMENT);
}

/* Setting garbage_collection_threshold after roundup_power2_divisions:4
 * removes the rounding (§5.2); other options persist. */
static void test_reset_on_parse(void **state)
{
    (void)state;
    sublet_settings s;
    char err[256];
    sublet_settings_default(&s);
    assert_int_equal(sublet_settings_parse(&s,
                                           "roundup_power2_divisions:4,max_split_size_mb:100,"
                                           "max_non_split_rounding_mb:60,"
                                           "garbage_collection_threshold:0.9,"
                                           "expandable_segments:True,large_segment_size_mb:40,"
                                           "per_process_memory_fraction:0.5",
                                           err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(sublet_round_size(&s, 84 * MiB), 96 * MiB);
    assert_int_equal(sublet_settings_parse(&s, "garbage_collection_threshold:0.5", err, sizeof err),
                     SUBLET_OK);
    assert_int_equal(sublet_round_size(&s, 84 * MiB), 84 * MiB);
    for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
        assert_int_equal(s.roundup_power2_divisions[i], 0);
    assert_true(s.garbage_collection_threshold == 0.5);
    assert_true(s.max_split_size == SUBLET_SIZE_UNLIMITED);
    assert_true(s.max_non_split_rounding == 40 * MiB); /* = large_segment_size */
    assert_true(s.large_segment_size == 40 * MiB);     /* persists */
    assert_true(s.expandable_segments);                /* persists */
    assert_true(s.per_process_memory_fraction == 0.5); /* persists */
    assert_string_equal(s.raw, "garbage_collection_threshold:0.5");

    assert_int_equal(sublet_settings_parse(&s, "", err, sizeof err), SUBLET_OK);
    assert_true(s.garbage_collection_threshold == 0.0);
    assert_string_equal(s.raw, "");
}

static void test_roundup_lists(void **state)
{
    (void)state;
    sublet_settings s = parsed_ok("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    const uint32_t want1[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8};
    expect_buckets(&s, want1);
    /* Current main: '>' starts after the last explicit bucket (legacy overwrote it). */
    s = parsed_ok("roundup_power2_divisions:[256:1,512:2,>:8]");
    const uint32_t want2[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8};
    expect_buckets(&s, want2);
    s = parsed_ok("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]");
    const uint32_t want3[16] = {8, 8, 8, 8, 8, 8, 8, 2, 2, 2, 1, 1, 1, 1, 1, 1};
    expect_buckets(&s, want3);
    /* '>' first fills 1..15; keys beyond 2^15 MiB clamp to bucket 15; 0 is allowed. */
    s = parsed_ok("roundup_power2_divisions:[>:4]");
    const uint32_t want4[16] = {0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    expect_buckets(&s, want4);
    s = parsed_ok("roundup_power2_divisions:[1:2,1048576:16,],");
    const uint32_t want5[16] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16};
    expect_buckets(&s, want5);
    s = parsed_ok("roundup_power2_divisions:[4:0,8:4]");
    const uint32_t want6[16] = {0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_buckets(&s, want6);
    s = parsed_ok("roundup_power2_divisions:8");
    for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++)
        assert_int_equal(s.roundup_power2_divisions[i], 8);
    expect_error_prefix("roundup_power2_divisions:[64:4294967296]",
                        "Invalid value '4294967296' for roundup_power2_divisions");
}

static void test_memory_fraction(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double value;
    } ok[] = {{"0.0", 0.0}, {"0.5", 0.5}, {"1.0", 1.0}, {"0", 0.0}, {"1", 1.0}, {".25", 0.25},
              {"0.123456789", 0.123456789}, {"5e-1", 0.5}, {"-0", 0.0}, {"1.", 1.0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char conf[128];
        snprintf(conf, sizeof conf, "per_process_memory_fraction:%s", ok[i].text);
        sublet_settings s = parsed_ok(conf);
        if (s.per_process_memory_fraction != ok[i].value)
            fail_msg("%s: got %.17g", conf, s.per_process_memory_fraction);
    }
    expect_error("per_process_memory_fraction:-0.1",
                 "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
    expect_error("per_process_memory_fraction:1.1",
                 "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
    expect_error_prefix("per_process_memory_fraction:", "Error parsing CachingAllocator settings");
    expect_error_prefix("per_process_memory_fraction:0.5.5", "Invalid value '0.5.5'");
    expect_error_prefix("per_process_memory_fraction:e5", "Invalid value 'e5'");
    expect_error_prefix("per_process_memory_fraction:1e", "Invalid value '1e'");
    sublet_settings s = parsed_ok("garbage_collection_threshold:0.999999");
    assert_true(s.garbage_collection_threshold == 0.999999);
}

/* A failing string leaves the settings byte-identical, whatever came before. */
static void test_atomicity(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "max_split_size_mb:100,expandable_segments:True,foo:1",
        "expandable_segments:True,roundup_power2_divisions:[64:8,>:3]",
        "large_segment_size_mb:64,max_split_size_mb:32",
        "pinned_num_register_threads:4,garbage_collection_threshold:2",
        "release_lock_on_cudamalloc:True,max_split_size_mb",
        "per_process_memory_fraction:0.2,backend:magic",
    };
    sublet_settings s, copy;
    char err[256];
    sublet_settings_default(&s);
    assert_int_equal(sublet_settings_parse(&s,
                                           "roundup_power2_divisions:[64:8,>:2],"
                                           "garbage_collection_threshold:0.7,"
                                           "max_split_size_mb:300,pinned_num_register_threads:2",
                                           err, sizeof err),
                     SUBLET_OK);
    memcpy(&copy, &s, sizeof s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(sublet_settings_parse(&s, bad[i], err, sizeof err), SUBLET_ERR_CONFIG);
        assert_true(err[0] != '\0');
        assert_memory_equal(&s, &copy, sizeof s);
        /* A NULL or tiny error buffer is fine too. */
        assert_int_equal(sublet_settings_parse(&s, bad[i], NULL, 0), SUBLET_ERR_CONFIG);
        char tiny[4];
        assert_int_equal(sublet_settings_parse(&s, bad[i], tiny, sizeof tiny), SUBLET_ERR_CONFIG);
        assert_true(strlen(tiny) == 3);
        assert_memory_equal(&s, &copy, sizeof s);
    }
}

static void test_raw_string(void **state)
{
    (void)state;
    /* Longer than the raw buffer: accepted, stored cut. */
    size_t n = 3000;
    char *conf = malloc(n + 1);
    assert_non_null(conf);
    size_t len = 0;
    while (len + 40 < n)
        len += (size_t)sprintf(conf + len, "max_split_size_mb:%04zu,", 100 + len % 1000);
    conf[len] = '\0';
    sublet_settings s = parsed_ok(conf);
    assert_int_equal(strlen(s.raw), SUBLET_CONF_RAW_MAX - 1);
    assert_memory_equal(s.raw, conf, SUBLET_CONF_RAW_MAX - 1);
    free(conf);

    /* Over 64 KiB: refused. */
    n = 70000;
    conf = malloc(n + 1);
    assert_non_null(conf);
    memset(conf, ' ', n);
    conf[n] = '\0';
    expect_error_prefix(conf, "CachingAllocator settings string too long");
    free(conf);
}

static void test_env_precedence(void **state)
{
    (void)state;
    const char *which = "junk";
    unsetenv("SUBLET_ALLOC_CONF");
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    unsetenv("PYTORCH_ALLOC_CONF");
    assert_null(sublet_settings_env(&which));
    assert_null(which);
    assert_null(sublet_settings_env(NULL));

    setenv("PYTORCH_ALLOC_CONF", "c", 1);
    assert_string_equal(sublet_settings_env(&which), "c");
    assert_string_equal(which, "PYTORCH_ALLOC_CONF");
    setenv("PYTORCH_CUDA_ALLOC_CONF", "b", 1);
    assert_string_equal(sublet_settings_env(&which), "b");
    assert_string_equal(which, "PYTORCH_CUDA_ALLOC_CONF");
    setenv("SUBLET_ALLOC_CONF", "a", 1);
    assert_string_equal(sublet_settings_env(&which), "a");
    assert_string_equal(which, "SUBLET_ALLOC_CONF");
    /* Set but empty still counts. */
    setenv("SUBLET_ALLOC_CONF", "", 1);
    assert_string_equal(sublet_settings_env(&which), "");
    assert_string_equal(which, "SUBLET_ALLOC_CONF");
    unsetenv("SUBLET_ALLOC_CONF");
    setenv("PYTORCH_CUDA_ALLOC_CONF", "", 1);
    assert_string_equal(sublet_settings_env(&which), "");
    assert_string_equal(which, "PYTORCH_CUDA_ALLOC_CONF");
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    assert_string_equal(sublet_settings_env(NULL), "c");
    unsetenv("PYTORCH_ALLOC_CONF");
    assert_null(sublet_settings_env(&which));
}

static void test_parse_size(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t value;
    } ok[] = {
        {"80GiB", 80 * GiB},
        {"1.5GB", 1500000000ull},
        {"512MiB", 512 * MiB},
        {"4k", 4096},
        {"1048576", 1048576},
        {"4K", 4096},
        {"4KiB", 4096},
        {"4kB", 4000},
        {"4KB", 4000},
        {"2M", 2 * MiB},
        {"3MB", 3000000},
        {"1G", GiB},
        {"2T", 2 * 1024 * GiB},
        {"2TiB", 2 * 1024 * GiB},
        {"2TB", 2000000000000ull},
        {"100B", 100},
        {"0", 0},
        {" 1.5 GiB ", 3 * GiB / 2},
        {".5k", 512},
        {"0.1k", 102},
        {"7.", 7},
        {"1.000000000000000000000001G", GiB},
        {"18446744073709551615", UINT64_MAX},
        {"16777215.999999TiB", UINT64_MAX - 1099511}, /* floor(0.999999 TiB) exactly */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 12345;
        if (sublet_parse_size(ok[i].text, &v) != 0)
            fail_msg("\"%s\" rejected", ok[i].text);
        if (v != ok[i].value)
            fail_msg("\"%s\": want %llu got %llu", ok[i].text, (unsigned long long)ok[i].value,
                     (unsigned long long)v);
    }
    static const char *const bad[] = {
        "", " ", "abc", "GiB", "-1", "-1GiB", "1.5.5G", ".", "1e9", "1 2", "1GiBs", "1PB",
        "1xB", "18446744073709551616", "16777216TiB", "18446744073709551615.5k", "0x10",
        "15.99999999999999999999EiB", "inf", "nan", "1,5G",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 777;
        if (sublet_parse_size(bad[i], &v) != -1)
            fail_msg("\"%s\" accepted as %llu", bad[i], (unsigned long long)v);
        assert_int_equal(v, 777); /* untouched on error */
    }
    uint64_t v;
    assert_int_equal(sublet_parse_size(NULL, &v), -1);
    assert_int_equal(sublet_parse_size("1", NULL), -1);
}

/* Random strings, biased toward the grammar: each either parses or fails with
 * SUBLET_ERR_CONFIG and a message, never crashes, and failures are atomic. */
static void test_random_garbage(void **state)
{
    (void)state;
    static const char *const pieces[] = {
        "max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
        "expandable_segments", "large_segment_size_mb", "per_process_memory_fraction",
        "pinned_num_register_threads", "backend", "policy", "max_non_split_rounding_mb",
        "expandable_segments_reserve_by_class", "True", "False", "native", "cudaMallocAsync",
        ":", ",", "[", "]", ">", "0", "1", "2", "20", "64", "128", "1024", "0.5", "1.2", "-1",
        " ", "\t", "x", "99999999999999999999", "1e308", "\xff", "512:4", "nan",
    };
    srand(12345);
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 5000; iter++) {
        char conf[512];
        size_t len = 0;
        int npieces = rand() % 16;
        for (int k = 0; k < npieces; k++) {
            const char *p;
            char one[2];
            if (rand() % 4 == 0) {
                one[0] = (char)(1 + rand() % 255);
                one[1] = '\0';
                p = one;
            } else {
                p = pieces[(size_t)rand() % (sizeof pieces / sizeof pieces[0])];
            }
            size_t pl = strlen(p);
            if (len + pl >= sizeof conf)
                break;
            memcpy(conf + len, p, pl);
            len += pl;
        }
        conf[len] = '\0';

        sublet_settings s, copy;
        char err[128];
        sublet_settings_default(&s);
        memcpy(&copy, &s, sizeof s);
        err[0] = '\0';
        sublet_status st = sublet_settings_parse(&s, conf, err, sizeof err);
        if (st == SUBLET_OK) {
            ok++;
            (void)sublet_round_size(&s, (uint64_t)rand() * 4099u);
        } else {
            bad++;
            assert_int_equal(st, SUBLET_ERR_CONFIG);
            assert_true(err[0] != '\0');
            assert_memory_equal(&s, &copy, sizeof s);
        }
    }
    assert_true(ok > 0);
    assert_true(bad > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_round_size_table),
        cmocka_unit_test(test_round_size_overflow),
        cmocka_unit_test(test_allocation_size),
        cmocka_unit_test(test_value_errors),
        cmocka_unit_test(test_error_texts),
        cmocka_unit_test(test_options_and_aliases),
        cmocka_unit_test(test_whitespace_and_empty),
        cmocka_unit_test(test_reset_on_parse),
        cmocka_unit_test(test_roundup_lists),
        cmocka_unit_test(test_memory_fraction),
        cmocka_unit_test(test_atomicity),
        cmocka_unit_test(test_raw_string),
        cmocka_unit_test(test_env_precedence),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_random_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
