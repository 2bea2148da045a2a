/* fuzz_trace_rmm — the RMM logging_resource_adaptor CSV reader (sublet_trace_parse_rmm).
 *
 * The input is the file, as an exact-size buffer.  Checked (abort on
 * violation, see trace_check.h): the status is SUBLET_OK, SUBLET_ERR_PARSE
 * (with a message, *out NULL) or SUBLET_ERR_NO_MEMORY; a returned trace
 * satisfies the model invariants, survives a CSV round trip, and replays
 * through the engine with sublet_check() after every event; an input whose
 * content reads as an RMM log streams (sublet_trace_stream: the prelude by a
 * first pass, then the rows) to the same prelude, events and error text. */
#include <stdint.h>
#include <string.h>

#include "sublet/trace.h"

#define FZ_NAME "fuzz_trace_rmm"
#include "trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)sublet_trace_detect(data, size);
    sublet_trace *t = NULL;
    char err[512];
    memset(err, 'x', sizeof err);
    sublet_status st = sublet_trace_parse_rmm(size ? (const char *)data : NULL, size, &t, err, sizeof err);
    /* streamed (two passes) when the content says RMM, as a stream opens it (not
     * gzip'd: this reader takes the bytes as they are, a stream inflates them) */
    if (size >= 2 && !(data[0] == 0x1f && data[1] == 0x8b) &&
        sublet_trace_detect(data, size) == SUBLET_FORMAT_RMM_CSV)
        fz_check_streamed(data, size, data[0], data[1], NULL, st, t, err);
    fz_check_loaded(st, t, err, sizeof err, NULL);
    return 0;
}
