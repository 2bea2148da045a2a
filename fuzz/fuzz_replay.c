/* fuzz_replay — a fuzzed `.events.csv` trace replayed through the engine
 * (sublet_replay_run with check on: sublet_check() after the prelude and
 * after every event).
 *
 * Input: byte 0 picks the settings, the simulated device size and the
 * replay flags; the rest is the CSV file.  Inputs that do not parse are
 * dropped (fuzz_trace_csv covers the reader).  Checked (abort on violation):
 *   - the status is SUBLET_OK, SUBLET_ERR_UNSUPPORTED (a trace recorded
 *     mid-run under expandable segments) or SUBLET_ERR_NO_MEMORY;
 *     SUBLET_ERR_CORRUPT (a violated engine
 *     invariant) or anything else aborts with the replay's message;
 *   - the result is coherent: events driven <= trace events, peak >= final
 *     reserved bytes, peak >= current for the statistics at the end, and
 *     the per-row error text is NUL-terminated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/replay.h"
#include "sublet/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_FAIL(...)                                 \
    do {                                               \
        fprintf(stderr, "fuzz_replay: " __VA_ARGS__);  \
        fprintf(stderr, "\n");                         \
        abort();                                       \
    } while (0)

static const char *const confs[] = {
    "",
    "max_split_size_mb:20",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "garbage_collection_threshold:0.6,per_process_memory_fraction:0.5,max_split_size_mb:40",
};

static const uint64_t devices[] = {0, (uint64_t)1 << 30, (uint64_t)64 << 20, (uint64_t)16 << 30};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    sublet_trace *t = NULL;
    char err[512];
    if (sublet_trace_parse_csv((const char *)data + 1, size - 1, &t, err, sizeof err) != SUBLET_OK)
        return 0;

    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.conf = confs[mode % 4];
    o.device_memory = devices[(mode >> 2) % 4];
    o.stop_on_oom = (mode >> 4) & 1;
    o.placement_hints = !((mode >> 5) & 1);
    o.capture_summary = (mode >> 6) & 1;
    o.check = 1;

    sublet_replay_result r;
    memset(err, 'x', sizeof err);
    sublet_status st = sublet_replay_run(t, &o, &r, err, sizeof err);
    if (memchr(err, '\0', sizeof err) == NULL)
        FUZZ_FAIL("error buffer not NUL-terminated");
    if (st != SUBLET_OK && st != SUBLET_ERR_UNSUPPORTED && st != SUBLET_ERR_NO_MEMORY)
        FUZZ_FAIL("replay: %s: %s", sublet_status_name(st), err);
    size_t n = sublet_trace_count(t);
    if (r.events > n)
        FUZZ_FAIL("replay drove %llu events of %zu", (unsigned long long)r.events, n);
    if (r.peak_reserved_bytes < r.final_reserved_bytes)
        FUZZ_FAIL("peak reserved %llu < final %llu", (unsigned long long)r.peak_reserved_bytes,
                  (unsigned long long)r.final_reserved_bytes);
    if (memchr(r.first_error, '\0', sizeof r.first_error) == NULL)
        FUZZ_FAIL("first_error not NUL-terminated");
#define X_PEAK(key, title, isb)                                                          \
    for (int k = 0; k < SUBLET_POOL_KINDS; k++)                                         \
        if (r.stats_end.key[k].peak < r.stats_end.key[k].current)                       \
            FUZZ_FAIL("stats_end.%s[%d]: peak %lld < current %lld", #key, k,            \
                      (long long)r.stats_end.key[k].peak, (long long)r.stats_end.key[k].current);
    SUBLET_STAT_ARRAYS(X_PEAK)
#undef X_PEAK
    sublet_replay_result_free(&r);
    sublet_trace_free(t);
    return 0;
}
