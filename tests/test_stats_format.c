/* sublet — tests for the statistics formatters (src/stats_format.c):
 * flat memory_stats() keys, JSON, key lookup, memory_summary text and
 * format_size, including snprintf-style truncation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/stats.h"

#define MiB (INT64_C(1) << 20)

/* 9 arrays x 12 + 2 singles x 4 + 5 counters + max_split_size. */
enum { EXPECTED_KEYS = 9 * 12 + 2 * 4 + 5 + 1 };

static void set_stat(sublet_stat *st, int64_t cur, int64_t peak, int64_t alloc, int64_t freed)
{
    st->current = cur;
    st->peak = peak;
    st->allocated = alloc;
    st->freed = freed;
}

static void init_stats(sublet_stats *s)
{
    memset(s, 0, sizeof *s);
    s->version = SUBLET_STATS_VERSION;
    s->struct_size = (uint32_t)sizeof *s;
    s->max_split_size = -1;
}

/* Every field gets a distinct value, in X-macro order: 1, 2, 3, ... */
static void fill_distinct(sublet_stats *s)
{
    int64_t v = 1;
    init_stats(s);
#define T_X_ARR(key, title, bytes)                                \
    for (int p = 0; p < SUBLET_POOL_KINDS; p++) {                 \
        set_stat(&s->key[p], v, v + 1, v + 2, v + 3);             \
        v += 4;                                                   \
    }
    SUBLET_STAT_ARRAYS(T_X_ARR)
#undef T_X_ARR
#define T_X_ONE(key, title)                 \
    set_stat(&s->key, v, v + 1, v + 2, v + 3); \
    v += 4;
    SUBLET_STAT_SINGLES(T_X_ONE)
#undef T_X_ONE
#define T_X_CNT(key) s->key = v++;
    SUBLET_STAT_COUNTERS(T_X_CNT)
#undef T_X_CNT
    s->max_split_size = v;
}

/* The values of the hand-computed summary below. */
static void fill_sample(sublet_stats *s)
{
    init_stats(s);
    s->num_ooms = 3;
    s->num_alloc_retries = 12345678;
    set_stat(&s->allocated_bytes[SUBLET_POOL_ALL], 1536 * MiB, 2048 * MiB, 10240 * MiB, 8704 * MiB);
    set_stat(&s->allocated_bytes[SUBLET_POOL_LARGE], 1534 * MiB, 2046 * MiB, 10200 * MiB, 8666 * MiB);
    set_stat(&s->allocated_bytes[SUBLET_POOL_SMALL], 2 * MiB, 2 * MiB, 40 * MiB, 38 * MiB);
    /* 1 MiB reference -> KiB column; a negative pool value floors (-1 // 1024 == -1). */
    set_stat(&s->active_bytes[SUBLET_POOL_ALL], 1048576, 1048576, 3072, 2048);
    set_stat(&s->active_bytes[SUBLET_POOL_LARGE], 524288, -1, 0, 0);
    set_stat(&s->active_bytes[SUBLET_POOL_SMALL], 524288, 1048576, 3072, 2048);
    /* The 768 KiB / 768 MiB boundaries. */
    set_stat(&s->requested_bytes[SUBLET_POOL_ALL], 786432, 786431, 805306368, 805306367);
    set_stat(&s->requested_bytes[SUBLET_POOL_LARGE], 786432, 786431, 805306368, 805306367);
    /* TiB, PiB, and PiB as the last unit even for INT64_MAX. */
    set_stat(&s->reserved_bytes[SUBLET_POOL_ALL], INT64_C(1) << 60, INT64_MAX, INT64_C(1) << 50, 0);
    set_stat(&s->reserved_bytes[SUBLET_POOL_LARGE], INT64_C(1) << 59, INT64_C(1) << 62,
             INT64_C(1) << 49, 0);
    set_stat(&s->reserved_bytes[SUBLET_POOL_SMALL], 1000, 0, 0, 0);
    set_stat(&s->inactive_split_bytes[SUBLET_POOL_ALL], -5, 0, 0, 0);
    set_stat(&s->allocation[SUBLET_POOL_ALL], 12, 40, 1234000, 1233999);
    set_stat(&s->allocation[SUBLET_POOL_LARGE], 10, 30, 600000, 599999);
    set_stat(&s->allocation[SUBLET_POOL_SMALL], 2, 10, 634000, 634000);
    /* The 750000 count boundaries. */
    set_stat(&s->active[SUBLET_POOL_ALL], 750000, 749999, 750000000, 749999999);
    set_stat(&s->active[SUBLET_POOL_LARGE], 1, 1, 1, 1);
    set_stat(&s->segment[SUBLET_POOL_ALL], 3, 5, 7, 4);
    set_stat(&s->segment[SUBLET_POOL_LARGE], 2, 3, 4, 2);
    set_stat(&s->segment[SUBLET_POOL_SMALL], 1, 2, 3, 2);
    set_stat(&s->oversize_allocations, 1, 750000, 2000000000, 0);
}

/* "|" + 75 + "|" + "\n". */
enum { LINE_BYTES = 78 };

#define RULE_EQ "|===========================================================================|\n"
#define RULE_DASH "|---------------------------------------------------------------------------|\n"

/* Computed by hand from the rules of the spec, docs/rules.md §8. */
static const char k_sample_summary[] =
    RULE_EQ
    "|                  PyTorch CUDA memory summary, device ID 7                 |\n"
    RULE_DASH
    "|            CUDA OOMs: 3            |        cudaMalloc retries: 12345678  |\n"
    RULE_EQ
    "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
    RULE_DASH
    "| Allocated memory      |   1536 MiB |   2048 MiB |  10240 MiB |   8704 MiB |\n"
    "|       from large pool |   1534 MiB |   2046 MiB |  10200 MiB |   8666 MiB |\n"
    "|       from small pool |      2 MiB |      2 MiB |     40 MiB |     38 MiB |\n"
    RULE_DASH
    "| Active memory         |   1024 KiB |   1024 KiB |   3072 B   |   2048 B   |\n"
    "|       from large pool |    512 KiB |     -1 KiB |      0 B   |      0 B   |\n"
    "|       from small pool |    512 KiB |   1024 KiB |   3072 B   |   2048 B   |\n"
    RULE_DASH
    "| Requested memory      |    768 KiB | 786431 B   |    768 MiB | 786431 KiB |\n"
    "|       from large pool |    768 KiB | 786431 B   |    768 MiB | 786431 KiB |\n"
    "|       from small pool |      0 KiB |      0 B   |      0 MiB |      0 KiB |\n"
    RULE_DASH
    "| GPU reserved memory   |   1024 PiB |   8191 PiB |   1024 TiB |      0 B   |\n"
    "|       from large pool |    512 PiB |   4096 PiB |    512 TiB |      0 B   |\n"
    "|       from small pool |      0 PiB |      0 PiB |      0 TiB |      0 B   |\n"
    RULE_DASH
    "| Non-releasable memory |     -5 B   |      0 B   |      0 B   |      0 B   |\n"
    "|       from large pool |      0 B   |      0 B   |      0 B   |      0 B   |\n"
    "|       from small pool |      0 B   |      0 B   |      0 B   |      0 B   |\n"
    RULE_DASH
    "| Allocations           |      12    |      40    |    1234 K  |    1233 K  |\n"
    "|       from large pool |      10    |      30    |     600 K  |     599 K  |\n"
    "|       from small pool |       2    |      10    |     634 K  |     634 K  |\n"
    RULE_DASH
    "| Active allocs         |     750 K  |  749999    |     750 M  |  749999 K  |\n"
    "|       from large pool |       0 K  |       1    |       0 M  |       0 K  |\n"
    "|       from small pool |       0 K  |       0    |       0 M  |       0 K  |\n"
    RULE_DASH
    "| GPU reserved segments |       3    |       5    |       7    |       4    |\n"
    "|       from large pool |       2    |       3    |       4    |       2    |\n"
    "|       from small pool |       1    |       2    |       3    |       2    |\n"
    RULE_DASH
    "| Non-releasable allocs |       0    |       0    |       0    |       0    |\n"
    "|       from large pool |       0    |       0    |       0    |       0    |\n"
    "|       from small pool |       0    |       0    |       0    |       0    |\n"
    RULE_DASH
    "| Oversize allocations  |       1    |     750 K  |    2000 M  |       0    |\n"
    RULE_DASH
    "| Oversize GPU segments |       0    |       0    |       0    |       0    |\n"
    RULE_EQ;

/* ---- helpers ---------------------------------------------------------------- */
typedef size_t (*stats_writer)(const sublet_stats *s, char *buf, size_t cap);

static char *format_alloc(stats_writer w, const sublet_stats *s)
{
    size_t n = w(s, NULL, 0);
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    assert_int_equal(w(s, buf, n + 1), n);
    assert_int_equal(strlen(buf), n);
    return buf;
}

static size_t summary_full(const sublet_stats *s, char *buf, size_t cap)
{
    return sublet_stats_format_summary(s, 7, 0, buf, cap);
}

static size_t summary_abbrev(const sublet_stats *s, char *buf, size_t cap)
{
    return sublet_stats_format_summary(s, 7, 1, buf, cap);
}

static const sublet_stats *g_size_arg;
static uint64_t g_size_value;
static size_t size_writer(const sublet_stats *s, char *buf, size_t cap)
{
    (void)s;
    return sublet_format_size(g_size_value, buf, cap);
}

/* Asserts every line is "|" + 75 chars + "|" + "\n" (77 characters and the
 * newline, 78 bytes); returns the line count. */
static size_t check_summary_lines(const char *text)
{
    size_t lines = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_int_equal((size_t)(nl - p), 77);
        assert_int_equal(p[0], '|');
        assert_int_equal(nl[-1], '|');
        lines++;
        p = nl + 1;
    }
    return lines;
}

/* ---- flat keys -------------------------------------------------------------- */
static void test_flat_keys_sorted_unique(void **state)
{
    (void)state;
    sublet_stats s;
    fill_distinct(&s);
    char *text = format_alloc(sublet_stats_format_flat, &s);

    char prev[128] = "";
    size_t count = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char key[128];
        int64_t value = 0, looked = 0;
        assert_int_equal(sscanf(line, "%127s %" SCNd64, key, &value), 2);
        if (count > 0)
            assert_true(strcmp(prev, key) < 0);
        if (count == 0)
            assert_string_equal(key, "active.all.allocated");
        assert_int_equal(sublet_stats_lookup(&s, key, &looked), 0);
        assert_int_equal(looked, value);
        strcpy(prev, key);
        count++;
    }
    assert_int_equal(count, EXPECTED_KEYS);
    assert_string_equal(prev, "segment.small_pool.peak");
    free(text);
}

static void test_flat_sort_is_strcmp_order(void **state)
{
    (void)state;
    sublet_stats s;
    init_stats(&s);
    char *text = format_alloc(sublet_stats_format_flat, &s);
    /* '.' (0x2e) sorts before '_' (0x5f) and 'e' before 'i'. */
    assert_non_null(strstr(text, "active.small_pool.peak 0\nactive_bytes.all.allocated 0\n"));
    assert_non_null(strstr(text, "allocated_bytes.small_pool.peak 0\nallocation.all.allocated 0\n"));
    assert_non_null(strstr(text, "inactive_split.small_pool.peak 0\ninactive_split_bytes.all.allocated 0\n"));
    assert_non_null(strstr(text, "max_split_size -1\nnum_alloc_retries 0\n"));
    assert_non_null(strstr(text, "num_sync_all_streams 0\noversize_allocations.allocated 0\n"));
    assert_non_null(strstr(text, "oversize_segments.peak 0\nrequested_bytes.all.allocated 0\n"));
    assert_non_null(strstr(text, "active.all.allocated 0\nactive.all.current 0\nactive.all.freed 0\n"
                                 "active.all.peak 0\nactive.large_pool.allocated 0\n"));
    free(text);
}

static void test_get_every_field(void **state)
{
    (void)state;
    sublet_stats s;
    fill_distinct(&s);
    int64_t v = 1, out = 0;
    char key[128];
    static const char *const pools[SUBLET_POOL_KINDS] = {"all", "small_pool", "large_pool"};
    static const char *const metrics[4] = {"current", "peak", "allocated", "freed"};
#define T_X_ARR(k, title, bytes)                                                   \
    for (int p = 0; p < SUBLET_POOL_KINDS; p++)                                    \
        for (int m = 0; m < 4; m++) {                                              \
            snprintf(key, sizeof key, "%s.%s.%s", #k, pools[p], metrics[m]);       \
            assert_int_equal(sublet_stats_lookup(&s, key, &out), 0);                  \
            assert_int_equal(out, v);                                              \
            v++;                                                                   \
        }
    SUBLET_STAT_ARRAYS(T_X_ARR)
#undef T_X_ARR
#define T_X_ONE(k, title)                                                   \
    for (int m = 0; m < 4; m++) {                                           \
        snprintf(key, sizeof key, "%s.%s", #k, metrics[m]);                 \
        assert_int_equal(sublet_stats_lookup(&s, key, &out), 0);               \
        assert_int_equal(out, v);                                           \
        v++;                                                                \
    }
    SUBLET_STAT_SINGLES(T_X_ONE)
#undef T_X_ONE
#define T_X_CNT(k)                                        \
    assert_int_equal(sublet_stats_lookup(&s, #k, &out), 0); \
    assert_int_equal(out, v);                            \
    v++;
    SUBLET_STAT_COUNTERS(T_X_CNT)
#undef T_X_CNT
    assert_int_equal(sublet_stats_lookup(&s, "max_split_size", &out), 0);
    assert_int_equal(out, v);

    /* Specific round trips. */
    init_stats(&s);
    s.allocated_bytes[SUBLET_POOL_ALL].current = 1536 * MiB;
    s.reserved_bytes[SUBLET_POOL_LARGE].peak = INT64_MAX;
    s.inactive_split[SUBLET_POOL_SMALL].freed = -7;
    s.oversize_segments.allocated = 42;
    s.num_device_free = 9;
    assert_int_equal(sublet_stats_lookup(&s, "allocated_bytes.all.current", &out), 0);
    assert_int_equal(out, 1536 * MiB);
    assert_int_equal(sublet_stats_lookup(&s, "reserved_bytes.large_pool.peak", &out), 0);
    assert_true(out == INT64_MAX);
    assert_int_equal(sublet_stats_lookup(&s, "inactive_split.small_pool.freed", &out), 0);
    assert_true(out == -7);
    assert_int_equal(sublet_stats_lookup(&s, "oversize_segments.allocated", &out), 0);
    assert_int_equal(out, 42);
    assert_int_equal(sublet_stats_lookup(&s, "num_device_free", &out), 0);
    assert_int_equal(out, 9);
    assert_int_equal(sublet_stats_lookup(&s, "max_split_size", &out), 0);
    assert_true(out == -1);
}

static void test_get_unknown(void **state)
{
    (void)state;
    sublet_stats s;
    fill_distinct(&s);
    static const char *const bad[] = {
        "", "active", "active.", "active.all", "active.all.", "active.all.current.x",
        "active.al.current", "active.all.currentX", "active.all_pool.current",
        "active_bytes.current", "allocated.all.current", "num_ooms.current", "num_oom",
        "num_oom_rejections", "max_split_size.x", "max_split", "oversize_segments",
        "oversize_segments.", "oversize_segments.all.current", "oversize_segments.peakx",
        "segment.small_pool", ".all.current", "ALLOCATION.all.current",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t out = 12345;
        assert_int_equal(sublet_stats_lookup(&s, bad[i], &out), -1);
        assert_int_equal(out, 12345);
    }
    int64_t out = 0;
    assert_int_equal(sublet_stats_lookup(NULL, "num_ooms", &out), -1);
    assert_int_equal(sublet_stats_lookup(&s, NULL, &out), -1);
    assert_int_equal(sublet_stats_lookup(&s, "num_ooms", NULL), -1);
}

/* ---- JSON ------------------------------------------------------------------- */
/* A tiny checker for {"k": int, "k": int}; returns the key count. */
static size_t check_json(const char *p, const char *flat)
{
    size_t count = 0;
    const char *f = flat;
    assert_int_equal(*p++, '{');
    for (;;) {
        assert_int_equal(*p++, '"');
        const char *k = p;
        while (*p && *p != '"')
            p++;
        assert_int_equal(*p, '"');
        size_t klen = (size_t)(p - k);
        p++;
        assert_int_equal(*p++, ':');
        assert_int_equal(*p++, ' ');
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        assert_true(end > p);
        /* Same key, same value, same order as the flat text. */
        char expect[160];
        snprintf(expect, sizeof expect, "%.*s %lld\n", (int)klen, k, v);
        assert_int_equal(strncmp(f, expect, strlen(expect)), 0);
        f += strlen(expect);
        p = end;
        count++;
        if (*p == '}')
            break;
        assert_int_equal(*p++, ',');
        assert_int_equal(*p++, ' ');
    }
    assert_int_equal(p[1], '\0');
    assert_int_equal(*f, '\0');
    return count;
}

static void test_json(void **state)
{
    (void)state;
    sublet_stats s;
    fill_distinct(&s);
    s.inactive_split_bytes[SUBLET_POOL_SMALL].current = -3;
    s.reserved_bytes[SUBLET_POOL_ALL].peak = INT64_MAX;
    char *json = format_alloc(sublet_stats_format_json, &s);
    char *flat = format_alloc(sublet_stats_format_flat, &s);
    assert_int_equal(check_json(json, flat), EXPECTED_KEYS);
    assert_int_equal(strncmp(json, "{\"active.all.allocated\": ", 25), 0);
    assert_non_null(strstr(json, ", \"segment.small_pool.peak\": "));
    assert_non_null(strstr(json, "\"reserved_bytes.all.peak\": 9223372036854775807, "));
    free(json);
    free(flat);

    init_stats(&s);
    json = format_alloc(sublet_stats_format_json, &s);
    assert_non_null(strstr(json, "\"max_split_size\": -1, \"num_alloc_retries\": 0, "));
    static const char tail[] = "\"segment.small_pool.peak\": 0}";
    assert_string_equal(json + strlen(json) - (sizeof tail - 1), tail);
    free(json);
}

/* ---- summary ---------------------------------------------------------------- */
static void test_summary_sample(void **state)
{
    (void)state;
    sublet_stats s;
    fill_sample(&s);
    char *text = format_alloc(summary_full, &s);
    assert_string_equal(text, k_sample_summary);
    assert_int_equal(check_summary_lines(text), 6 + 9 * 4 + 2 * 2 + 1);
    free(text);
}

static void test_summary_abbreviated(void **state)
{
    (void)state;
    sublet_stats s;
    fill_sample(&s);
    char *text = format_alloc(summary_abbrev, &s);
    assert_int_equal(check_summary_lines(text), 6 + 9 * 2 + 2 * 2 + 1);
    /* Abbreviated == the full text without the pool rows. */
    char *expect = malloc(sizeof k_sample_summary);
    assert_non_null(expect);
    size_t n = 0;
    for (const char *p = k_sample_summary; *p; p += LINE_BYTES) {
        if (strncmp(p, "|       from ", 13) != 0) {
            memcpy(expect + n, p, LINE_BYTES);
            n += LINE_BYTES;
        }
    }
    expect[n] = '\0';
    assert_string_equal(text, expect);
    assert_null(strstr(text, "from large pool"));
    free(expect);
    free(text);
}

static void test_summary_zero(void **state)
{
    (void)state;
    sublet_stats s;
    init_stats(&s);
    char buf[8192];
    size_t n = sublet_stats_format_summary(&s, 0, 0, buf, sizeof buf);
    assert_int_equal(n, strlen(buf));
    assert_int_equal(check_summary_lines(buf), 47);
    assert_non_null(strstr(buf, "|                  PyTorch CUDA memory summary, device ID 0"
                                "                 |\n"));
    assert_non_null(strstr(buf, "|            CUDA OOMs: 0            |        cudaMalloc retries: 0"
                                "         |\n"));
    assert_non_null(strstr(buf, "| Active memory         |      0 B   |      0 B   |      0 B   |"
                                "      0 B   |\n"));
    assert_non_null(strstr(buf, "| Oversize GPU segments |       0    |       0    |       0    |"
                                "       0    |\n"));
    /* A negative device index prints like Python's {device:<17d}. */
    n = sublet_stats_format_summary(&s, -1, 1, buf, sizeof buf);
    assert_int_equal(check_summary_lines(buf), 29);
    assert_non_null(strstr(buf, "device ID -1                |\n"));
    assert_int_equal(sublet_stats_format_summary(NULL, 0, 0, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

static void test_summary_unit_boundaries(void **state)
{
    (void)state;
    static const struct {
        int64_t bytes;
        const char *cell;
    } sizes[] = {
        {0, "|      0 B   |"},          {786431, "| 786431 B   |"},
        {786432, "|    768 KiB |"},     {1048576, "|   1024 KiB |"},
        {805306367, "| 786431 KiB |"},  {805306368, "|    768 MiB |"},
        {824633720832, "|    768 GiB |"}, {INT64_C(844424930131968), "|    768 TiB |"},
        {INT64_C(864691128455135232), "|    768 PiB |"},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        sublet_stats s;
        init_stats(&s);
        s.allocated_bytes[SUBLET_POOL_ALL].current = sizes[i].bytes;
        s.allocated_bytes[SUBLET_POOL_SMALL].current = sizes[i].bytes;
        char buf[8192];
        sublet_stats_format_summary(&s, 0, 0, buf, sizeof buf);
        const char *row = strstr(buf, "| Allocated memory      ");
        assert_non_null(row);
        assert_int_equal(strncmp(row + 24, sizes[i].cell, 14), 0);
        /* The small pool row repeats it: same reference, same unit. */
        const char *small = row + 2 * LINE_BYTES;
        assert_int_equal(strncmp(small, "|       from small pool ", 24), 0);
        assert_int_equal(strncmp(small + 24, sizes[i].cell, 14), 0);
    }
    static const struct {
        int64_t n;
        const char *cell;
    } counts[] = {
        {0, "|       0    |"},         {749999, "|  749999    |"},
        {750000, "|     750 K  |"},     {749999999, "|  749999 K  |"},
        {750000000, "|     750 M  |"},  {INT64_C(7500000000000), "| 7500000 M  |"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        sublet_stats s;
        init_stats(&s);
        s.segment[SUBLET_POOL_ALL].peak = counts[i].n;
        s.segment[SUBLET_POOL_LARGE].peak = counts[i].n / 2;
        s.oversize_segments.peak = counts[i].n;
        char buf[8192];
        sublet_stats_format_summary(&s, 0, 0, buf, sizeof buf);
        const char *row = strstr(buf, "| GPU reserved segments ");
        assert_non_null(row);
        assert_int_equal(strncmp(row + 37, counts[i].cell, 14), 0);
        row = strstr(buf, "| Oversize GPU segments ");
        assert_non_null(row);
        assert_int_equal(strncmp(row + 37, counts[i].cell, 14), 0);
    }
    /* Pool rows take the all row's unit, not their own. */
    sublet_stats s;
    init_stats(&s);
    set_stat(&s.allocation[SUBLET_POOL_ALL], 2000000, 0, 0, 0);
    set_stat(&s.allocation[SUBLET_POOL_LARGE], 1999000, 0, 0, 0);
    set_stat(&s.allocation[SUBLET_POOL_SMALL], 1000, 0, 0, 0);
    set_stat(&s.allocated_bytes[SUBLET_POOL_ALL], 100, 0, 0, 0);
    set_stat(&s.allocated_bytes[SUBLET_POOL_SMALL], 2 * MiB, 0, 0, 0);
    char buf[8192];
    sublet_stats_format_summary(&s, 0, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "| Allocations           |    2000 K  |"));
    assert_non_null(strstr(buf, "|       from large pool |    1999 K  |"));
    assert_non_null(strstr(buf, "|       from small pool |       1 K  |"));
    assert_non_null(strstr(buf, "| Allocated memory      |    100 B   |"));
    assert_non_null(strstr(buf, "|       from small pool | 2097152 B   |"));
}

/* ---- format_size ------------------------------------------------------------ */
static void test_format_size(void **state)
{
    (void)state;
    static const struct {
        uint64_t n;
        const char *text;
    } table[] = {
        {0, "0 bytes"},
        {1, "1 bytes"},
        {1024, "1024 bytes"},
        {1025, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {1048576, "1024.00 KiB"},
        {1048577, "1.00 MiB"},
        {2 * 1048576, "2.00 MiB"},
        {20 * 1048576 + 524288, "20.50 MiB"},
        {1073741824, "1024.00 MiB"},
        {1073741825, "1.00 GiB"},
        {UINT64_C(800000000) * 1073741824u, "800000000.00 GiB"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char buf[64];
        size_t n = sublet_format_size(table[i].n, buf, sizeof buf);
        assert_string_equal(buf, table[i].text);
        assert_int_equal(n, strlen(table[i].text));
    }
}

/* ---- truncation --------------------------------------------------------------- */
/* For every cap in [0, full + 2]: the full length comes back, the text is the
 * NUL-terminated prefix, and nothing is written past cap (the buffer is
 * exactly cap bytes on the heap, so ASan catches any overflow). */
static void check_truncation(stats_writer w, const sublet_stats *s, size_t step)
{
    char *full = format_alloc(w, s);
    size_t len = strlen(full);
    assert_int_equal(w(s, NULL, 0), len);
    assert_int_equal(w(s, NULL, 100), len);
    for (size_t cap = 0; cap <= len + 2; cap += (cap < 80 || cap + 80 > len) ? 1 : step) {
        char *buf = malloc(cap + 1);
        assert_non_null(buf);
        memset(buf, 'Z', cap + 1);
        assert_int_equal(w(s, buf, cap), len);
        assert_int_equal(buf[cap], 'Z');
        if (cap > 0) {
            size_t keep = cap - 1 < len ? cap - 1 : len;
            assert_int_equal(strlen(buf), keep);
            assert_memory_equal(buf, full, keep);
        } else {
            assert_int_equal(buf[0], 'Z');
        }
        free(buf);
    }
    free(full);
}

static void test_truncation(void **state)
{
    (void)state;
    sublet_stats s;
    fill_sample(&s);
    check_truncation(sublet_stats_format_flat, &s, 7);
    check_truncation(sublet_stats_format_json, &s, 7);
    check_truncation(summary_full, &s, 5);
    check_truncation(summary_abbrev, &s, 5);
    g_size_arg = &s;
    static const uint64_t sizes[] = {0, 1024, 1025, 1048577, UINT64_C(800000000) * 1073741824u};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        g_size_value = sizes[i];
        check_truncation(size_writer, g_size_arg, 1);
    }
    /* cap 1 always yields "". */
    char one[2] = {'X', 'Y'};
    assert_int_equal(sublet_format_size(1025, one, 1), 8);
    assert_int_equal(one[0], '\0');
    assert_int_equal(one[1], 'Y');
    /* NULL stats: empty text, length 0. */
    char small[4] = "abc";
    assert_int_equal(sublet_stats_format_flat(NULL, small, sizeof small), 0);
    assert_string_equal(small, "");
    assert_int_equal(sublet_stats_format_json(NULL, NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat_keys_sorted_unique),
        cmocka_unit_test(test_flat_sort_is_strcmp_order),
        cmocka_unit_test(test_get_every_field),
        cmocka_unit_test(test_get_unknown),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_summary_sample),
        cmocka_unit_test(test_summary_abbreviated),
        cmocka_unit_test(test_summary_zero),
        cmocka_unit_test(test_summary_unit_boundaries),
        cmocka_unit_test(test_format_size),
        cmocka_unit_test(test_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
