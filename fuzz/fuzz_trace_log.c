/* fuzz_trace_log — the event log reader (sublet_trace_parse_log, and
 * sublet_trace_parse's detection of it).
 *
 * Each input is read three ways:
 *   1. as it is: a log file (mostly refused by the header or block checksums);
 *   2. reframed: a valid header, then the input cut into blocks (byte 0
 *      chooses the cut length) each sealed with correct checksums, so that
 *      the record decoder sees the fuzzer's bytes;
 *   3. the reframed log cut short at a point byte 1 chooses.
 * Checked (abort on violation, see trace_check.h): the status is SUBLET_OK,
 * SUBLET_ERR_PARSE (with a message, *out NULL) or SUBLET_ERR_NO_MEMORY; a
 * returned trace satisfies the model invariants and survives a CSV round
 * trip.  Never misread: when the reframed log reads, its cut copy reads too,
 * its events are exactly the events of the whole blocks before the cut (a
 * prefix of the whole log's), and a torn tail is reported exactly when the
 * cut is not at a block's end.
 *   4. the reframed log streamed from a file (sublet_trace_stream: byte 1
 *      chooses the read size, byte 0 the events a call and the reader
 *      thread): the same events, notice, error and text as read whole. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/event_log_format.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

#define FZ_NAME "fuzz_trace_log"
#include "trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reframe data[2..) as blocks of `chunk` bytes: the log's bytes into out
 * (room: a header, and a block header per chunk); the end offset of every
 * block into ends[]. */
static size_t reframe(const uint8_t *data, size_t size, size_t chunk, uint8_t *out, size_t *ends,
                      size_t *nends)
{
    sl_log_header h = {SL_LOG_VERSION, 0, 0, 1700000000000000ull};
    sl_log_header_encode(&h, out);
    size_t o = SL_LOG_HEADER_SIZE, seq = 0;
    *nends = 0;
    for (size_t i = 0; i < size; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        memcpy(out + o + SL_LOG_BLOCK_HEADER_SIZE, data + i, n);
        sl_log_block_seal(out + o, out + o + SL_LOG_BLOCK_HEADER_SIZE, n, seq++);
        o += SL_LOG_BLOCK_HEADER_SIZE + n;
        ends[(*nends)++] = o;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    sublet_trace *t = NULL;

    /* 1. as it is */
    (void)sublet_trace_detect(data, size);
    memset(err, 'x', sizeof err);
    sublet_status st = sublet_trace_parse(size ? data : NULL, size, NULL, &t, err, sizeof err);
    if (st == SUBLET_OK && sublet_trace_source_format(t) != SUBLET_FORMAT_EVENT_LOG &&
        size >= 8 && memcmp(data, SL_LOG_MAGIC, 8) == 0)
        FZ_FAIL("a SUBLETLG file read as %s",
                sublet_trace_format_name(sublet_trace_source_format(t)));
    if (size >= 8 && memcmp(data, SL_LOG_MAGIC, 8) == 0)
        fz_check_loaded(st, t, err, sizeof err, NULL); /* frees t */
    else
        sublet_trace_free(t);
    t = NULL;

    /* 2. reframed */
    if (size < 2)
        return 0;
    size_t chunk = (size_t)data[0] * 4 + 1, body = size - 2;
    size_t nblocks = body / chunk + 1;
    uint8_t *log = malloc(SL_LOG_HEADER_SIZE + nblocks * SL_LOG_BLOCK_HEADER_SIZE + body + 1);
    size_t *ends = malloc(nblocks * sizeof *ends);
    if (!log || !ends) {
        free(log);
        free(ends);
        return 0;
    }
    size_t nends = 0;
    size_t len = reframe(data + 2, body, chunk, log, ends, &nends);
    memset(err, 'x', sizeof err);
    st = sublet_trace_parse_log(log, len, &t, err, sizeof err);
    if (st == SUBLET_OK && sublet_trace_notice(t) && strstr(sublet_trace_notice(t), "torn"))
        FZ_FAIL("a whole log reported a torn tail: %s", sublet_trace_notice(t));
    fz_check_streamed(log, len, data[0], data[1], NULL, st, t, err);

    /* 3. cut short: a prefix of the whole log's events, the tail reported */
    if (st == SUBLET_OK) {
        size_t cut = SL_LOG_HEADER_SIZE + (len - SL_LOG_HEADER_SIZE) * data[1] / 255;
        sublet_trace *c = NULL;
        char err2[512];
        memset(err2, 'x', sizeof err2);
        sublet_status cs = sublet_trace_parse_log(log, cut, &c, err2, sizeof err2);
        if (cs == SUBLET_ERR_NO_MEMORY) {
            sublet_trace_free(t); /* not checked: the cut copy ran out of memory */
            free(log);
            free(ends);
            return 0;
        }
        if (cs != SUBLET_OK)
            FZ_FAIL("the whole log reads, its first %zu bytes do not: %s", cut, err2);
        size_t whole = SL_LOG_HEADER_SIZE;
        for (size_t i = 0; i < nends && ends[i] <= cut; i++)
            whole = ends[i];
        const char *note = sublet_trace_notice(c);
        int torn = note && strstr(note, "torn tail at byte ") != NULL;
        if (torn != (whole != cut))
            FZ_FAIL("cut at %zu (last block end %zu): notice '%s'", cut, whole,
                    note ? note : "(none)");
        /* the events of the blocks before the cut: read them alone */
        sublet_trace *w = NULL;
        if (sublet_trace_parse_log(log, whole, &w, err2, sizeof err2) != SUBLET_OK)
            FZ_FAIL("the whole blocks before a cut do not read: %s", err2);
        size_t n = sublet_trace_count(c);
        if (n != sublet_trace_count(w) || n > sublet_trace_count(t))
            FZ_FAIL("cut log: %zu events, its whole blocks %zu, the log %zu", n,
                    sublet_trace_count(w), sublet_trace_count(t));
        for (size_t i = 0; i < n; i++) {
            const sublet_trace_event *a = sublet_trace_at(c, i), *b = sublet_trace_at(t, i);
            if (a->kind != b->kind || a->addr != b->addr || a->size != b->size ||
                a->stream != b->stream || a->time_us != b->time_us || a->line != b->line)
                FZ_FAIL("cut log: event %zu differs from the whole log's", i);
        }
        sublet_trace_free(w);
        sublet_trace_free(c);
    }
    fz_check_loaded(st, t, err, sizeof err, NULL); /* frees t */
    free(log);
    free(ends);
    return 0;
}
