/* fuzz_trace_csv — the `.events.csv` trace reader (sublet_trace_parse_csv).
 *
 * The input is the file, passed as an exact-size buffer (no NUL after it, so
 * ASan sees any read past the end).  Checked (abort on violation):
 *   - the status is SUBLET_OK, SUBLET_ERR_PARSE or SUBLET_ERR_NO_MEMORY; on
 *     an error *out is NULL and a parse error says "line N: ..." with N
 *     within the input's line count; the error buffer is NUL-terminated
 *     whatever its size, and a small buffer gives the same status;
 *   - on success: the prelude comes first, every kind is known and its name
 *     parses back to it, lines are increasing from 2, flags hold only
 *     SUBLET_TRACE_HAS_TIME, the per-kind counts add up, and
 *     sublet_trace_info_get agrees with a recount done here;
 *   - writing the trace back out as CSV and parsing that gives the same
 *     events (round trip). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/trace.h"

#define FZ_NAME "fuzz_trace_csv"
#include "trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* CSV specifics: lines increase from 2 and stay within the input, and an
 * event without HAS_TIME has time_us 0. */
static void check_lines(const sublet_trace *t, uint64_t nlines)
{
    uint64_t last_line = 1;
    for (size_t i = 0; i < sublet_trace_count(t); i++) {
        const sublet_trace_event *e = sublet_trace_at(t, i);
        if (!(e->flags & SUBLET_TRACE_HAS_TIME) && e->time_us != 0)
            FZ_FAIL("event %zu: time_us %llu without HAS_TIME", i,
                    (unsigned long long)e->time_us);
        if (e->line <= last_line || e->line > nlines)
            FZ_FAIL("event %zu: line %llu after %llu (input has %llu lines)", i,
                    (unsigned long long)e->line, (unsigned long long)last_line,
                    (unsigned long long)nlines);
        last_line = e->line;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    uint64_t nlines = 1;
    for (size_t i = 0; i < size; i++)
        nlines += data[i] == '\n';

    sublet_trace *t = (sublet_trace *)(uintptr_t)1;
    char err[512];
    memset(err, 'x', sizeof err);
    sublet_status st = sublet_trace_parse_csv(size ? buf : NULL, size, &t, err, sizeof err);
    if (memchr(err, '\0', sizeof err) == NULL)
        FZ_FAIL("error buffer not NUL-terminated");

    /* The same input with a tiny error buffer: same status, still terminated. */
    char small[5];
    memset(small, 'x', sizeof small);
    sublet_trace *t2 = NULL;
    sublet_status st2 = sublet_trace_parse_csv(size ? buf : NULL, size, &t2, small, sizeof small);
    if (memchr(small, '\0', sizeof small) == NULL)
        FZ_FAIL("small error buffer not NUL-terminated");
    if (st2 != st && st2 != SUBLET_ERR_NO_MEMORY && st != SUBLET_ERR_NO_MEMORY)
        FZ_FAIL("status %s with a 512-byte error buffer, %s with 5 bytes",
                  sublet_status_name(st), sublet_status_name(st2));
    sublet_trace_free(t2);

    switch (st) {
    case SUBLET_OK:
        if (!t || t == (sublet_trace *)(uintptr_t)1)
            FZ_FAIL("SUBLET_OK without a trace");
        fz_check_trace(t);
        check_lines(t, nlines);
        fz_csv_round_trip(t);
        sublet_trace_free(t);
        break;
    case SUBLET_ERR_PARSE: {
        unsigned long long line = 0;
        if (t != NULL)
            FZ_FAIL("*out not NULL after a parse error");
        if (sscanf(err, "line %llu: ", &line) != 1 || line < 1 || line > nlines)
            FZ_FAIL("parse error message \"%s\" (input has %llu lines)", err,
                      (unsigned long long)nlines);
        break;
    }
    case SUBLET_ERR_NO_MEMORY:
        if (t != NULL)
            FZ_FAIL("*out not NULL after NO_MEMORY");
        break;
    default:
        FZ_FAIL("unexpected status %s", sublet_status_name(st));
    }
    return 0;
}
