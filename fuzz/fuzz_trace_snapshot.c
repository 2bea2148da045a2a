/* fuzz_trace_snapshot — the PyTorch memory snapshot readers: a pickle or JSON snapshot (or a gzip
 * of one) through sublet_trace_parse (format detection, pickle/JSON parse,
 * sublet_trace_from_snapshot with its prelude reconstruction).
 *
 * The input is the file, as an exact-size buffer.  Reader options (device
 * choice, tree-size limit) come from the input length.  Checked (abort on
 * violation, see trace_check.h): the status is SUBLET_OK, SUBLET_ERR_PARSE
 * (with a message, *out NULL) or SUBLET_ERR_NO_MEMORY; a returned trace
 * satisfies the model invariants, survives a CSV round trip, and replays
 * through the engine with sublet_check() after every event. */
#include <stdint.h>
#include <string.h>

#include "sublet/trace.h"

#define FZ_NAME "fuzz_trace_snapshot"
#include "trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sublet_trace_load_options opt;
    fz_load_options(size, &opt);
    (void)sublet_trace_detect(data, size);
    sublet_trace *t = NULL;
    char err[512];
    memset(err, 'x', sizeof err);
    sublet_status st = sublet_trace_parse(size ? data : NULL, size, &opt, &t, err, sizeof err);
    fz_check_loaded(st, t, err, sizeof err, &opt);
    return 0;
}
