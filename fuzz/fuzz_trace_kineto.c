/* fuzz_trace_kineto — the Kineto (PyTorch profiler chrome trace) reader: the JSON (or a gzip
 * of it) through sublet_trace_parse (format detection, JSON parse,
 * sublet_trace_from_kineto).
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

#define FZ_NAME "fuzz_trace_kineto"
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
