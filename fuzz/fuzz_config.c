/* fuzz_config — the PYTORCH_CUDA_ALLOC_CONF parser and sublet_parse_size.
 *
 * Input: byte 0 picks the settings the string is parsed on top of (defaults
 * or the result of a fixed valid string) and the size of the error buffer;
 * the rest, NUL-terminated, is the settings string.
 *
 * Checked (abort on violation):
 *   - the status is SUBLET_OK, SUBLET_ERR_CONFIG or SUBLET_ERR_NO_MEMORY;
 *   - the error buffer is always NUL-terminated within its capacity, and a
 *     SUBLET_ERR_CONFIG comes with a message (when there is room for one);
 *   - on error the settings are byte-identical to before (atomicity);
 *   - on success the values are in their documented ranges, `raw` holds the
 *     string (cut to fit), and parsing the same string again on the result
 *     succeeds and changes nothing (a parse is idempotent);
 *   - size rounding under the parsed settings: round_size(n) >= n, a
 *     multiple of 512, and allocation_size(round_size(n)) >= round_size(n);
 *   - sublet_parse_size leaves *out alone on failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/config.h"
#include "sublet/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_FAIL(...)                                                 \
    do {                                                               \
        fprintf(stderr, "fuzz_config: " __VA_ARGS__);                  \
        fprintf(stderr, "\n");                                         \
        abort();                                                       \
    } while (0)

static const char *const bases[] = {
    NULL, /* defaults */
    "large_segment_size_mb:64,pinned_num_register_threads:8,release_lock_on_cudamalloc:True",
    "max_split_size_mb:40,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],"
    "garbage_collection_threshold:0.5,per_process_memory_fraction:0.5",
    "expandable_segments:True,backend:cudaMallocAsync,pinned_reserve_segment_size_mb:7",
};

static const size_t err_caps[] = {0, 1, 2, 16, 64, 256, 1024, 1024};

static int is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

static void check_err_buf(const char *err, size_t cap)
{
    if (cap > 0 && memchr(err, '\0', cap) == NULL)
        FUZZ_FAIL("error buffer of %zu bytes not NUL-terminated", cap);
}

static void check_ranges(const sublet_settings *s, const char *conf)
{
    double g = s->garbage_collection_threshold;
    if (!(g == 0.0 || (g > 0.0 && g < 1.0)))
        FUZZ_FAIL("garbage_collection_threshold %g out of range for \"%s\"", g, conf);
    double f = s->per_process_memory_fraction;
    if (!(f >= 0.0 && f <= 1.0))
        FUZZ_FAIL("per_process_memory_fraction %g out of range for \"%s\"", f, conf);
    if (!is_pow2(s->pinned_num_register_threads) || s->pinned_num_register_threads > 128)
        FUZZ_FAIL("pinned_num_register_threads %u invalid for \"%s\"",
                  s->pinned_num_register_threads, conf);
    if (s->large_segment_size <= ((uint64_t)10 << 20) || s->large_segment_size % (1u << 20))
        FUZZ_FAIL("large_segment_size %llu invalid for \"%s\"",
                  (unsigned long long)s->large_segment_size, conf);
    if (s->max_split_size != SUBLET_SIZE_UNLIMITED && s->max_split_size % (1u << 20))
        FUZZ_FAIL("max_split_size %llu not whole MiB for \"%s\"",
                  (unsigned long long)s->max_split_size, conf);
    for (int i = 0; i < SUBLET_ROUNDUP_BUCKETS; i++) {
        uint32_t d = s->roundup_power2_divisions[i];
        if (d != 0 && !is_pow2(d))
            FUZZ_FAIL("roundup bucket %d = %u is not a power of two for \"%s\"", i, d, conf);
    }
    if (s->backend_async != 0 && s->backend_async != 1)
        FUZZ_FAIL("backend_async %d for \"%s\"", s->backend_async, conf);
    if (s->policy != SUBLET_POLICY_NATIVE && s->policy != SUBLET_POLICY_STITCH)
        FUZZ_FAIL("policy %d for \"%s\"", (int)s->policy, conf);
    if (memchr(s->raw, '\0', sizeof s->raw) == NULL)
        FUZZ_FAIL("raw not NUL-terminated");
    size_t len = strlen(conf);
    size_t keep = len < SUBLET_CONF_RAW_MAX - 1 ? len : SUBLET_CONF_RAW_MAX - 1;
    if (strlen(s->raw) != keep || memcmp(s->raw, conf, keep) != 0)
        FUZZ_FAIL("raw \"%s\" does not hold the string \"%s\"", s->raw, conf);
}

static void check_rounding(const sublet_settings *s, const uint8_t *data, size_t size)
{
    uint64_t probes[6] = {1, 511, 513, (1u << 20) + 1, ((uint64_t)10 << 20) - 1, 0};
    uint64_t x = 0;
    for (size_t i = 0; i < size && i < 8; i++)
        x = (x << 8) | data[i];
    probes[5] = x >> (x & 63 ? (x & 63) : 1); /* some arbitrary magnitude */
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        uint64_t n = probes[i];
        if (n == 0 || n >= ((uint64_t)1 << 60))
            continue;
        uint64_t r = sublet_round_size(s, n);
        if (r < n || r % 512 != 0)
            FUZZ_FAIL("round_size(%llu) = %llu", (unsigned long long)n, (unsigned long long)r);
        uint64_t seg = sublet_allocation_size(s, r);
        if (seg < r)
            FUZZ_FAIL("allocation_size(%llu) = %llu", (unsigned long long)r,
                      (unsigned long long)seg);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;

    char *conf = malloc(size + 1);
    if (!conf)
        return 0;
    memcpy(conf, data, size);
    conf[size] = '\0';

    /* The settings to parse on top of. */
    sublet_settings s;
    memset(&s, 0, sizeof s);
    sublet_settings_default(&s);
    const char *base = bases[mode % (sizeof bases / sizeof bases[0])];
    if (base && sublet_settings_parse(&s, base, NULL, 0) != SUBLET_OK)
        FUZZ_FAIL("base string \"%s\" refused", base);

    size_t cap = err_caps[(mode >> 2) % (sizeof err_caps / sizeof err_caps[0])];
    char *err = cap ? malloc(cap) : NULL; /* exact size: ASan sees an overrun */
    if (cap && !err) {
        free(conf);
        return 0;
    }
    if (err)
        memset(err, 'x', cap);

    sublet_settings before;
    memcpy(&before, &s, sizeof s);
    sublet_status st = sublet_settings_parse(&s, conf, err, cap);
    if (err)
        check_err_buf(err, cap);
    switch (st) {
    case SUBLET_OK:
        check_ranges(&s, conf);
        {
            sublet_settings again;
            memcpy(&again, &s, sizeof s);
            char err2[256];
            sublet_status st2 = sublet_settings_parse(&again, conf, err2, sizeof err2);
            if (st2 != SUBLET_OK)
                FUZZ_FAIL("\"%s\" accepted once, then refused on its own result: %s", conf,
                          err2);
            if (memcmp(&again, &s, sizeof s) != 0)
                FUZZ_FAIL("parsing \"%s\" twice is not idempotent", conf);
        }
        check_rounding(&s, data, size);
        break;
    case SUBLET_ERR_CONFIG:
    case SUBLET_ERR_NO_MEMORY:
        if (memcmp(&before, &s, sizeof s) != 0)
            FUZZ_FAIL("settings changed by a refused string (%s) \"%s\"",
                      sublet_status_name(st), conf);
        if (st == SUBLET_ERR_CONFIG && cap >= 2 && err[0] == '\0')
            FUZZ_FAIL("SUBLET_ERR_CONFIG without a message for \"%s\"", conf);
        break;
    default:
        FUZZ_FAIL("unexpected status %s for \"%s\"", sublet_status_name(st), conf);
    }

    /* The size parser on the same text. */
    uint64_t v = UINT64_C(0x5a5a5a5a5a5a5a5a);
    int rc = sublet_parse_size(conf, &v);
    if (rc != 0 && rc != -1)
        FUZZ_FAIL("sublet_parse_size returned %d", rc);
    if (rc != 0 && v != UINT64_C(0x5a5a5a5a5a5a5a5a))
        FUZZ_FAIL("sublet_parse_size changed *out on failure for \"%s\"", conf);
    if (rc == 0) {
        uint64_t v2 = 0;
        if (sublet_parse_size(conf, &v2) != 0 || v2 != v)
            FUZZ_FAIL("sublet_parse_size not deterministic for \"%s\"", conf);
    }

    free(err);
    free(conf);
    return 0;
}
