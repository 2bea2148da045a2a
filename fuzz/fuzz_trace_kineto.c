/* fuzz_trace_kineto — the Kineto (PyTorch profiler chrome trace) reader: the JSON (or a gzip
 * of it) through sublet_trace_parse (format detection, JSON parse,
 * sublet_trace_from_kineto).
 *
 * The input is the file, as an exact-size buffer.  Reader options (device
 * choice, tree-size limit) come from the input length.  Checked (abort on
 * violation, see trace_check.h): the status is SUBLET_OK, SUBLET_ERR_PARSE
 * (with a message, *out NULL) or SUBLET_ERR_NO_MEMORY; a returned trace
 * satisfies the model invariants, survives a CSV round trip, and replays
 * through the engine with sublet_check() after every event; an input whose
 * content reads as Kineto streams (sublet_trace_stream) to the same prelude,
 * events and error text as the whole read. */
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
    /* streamed (two passes over the document, or read whole when it cannot
     * follow it) when the content says Kineto, against a whole read without
     * the tree-size limit, which a stream has no tree for (not gzip'd: a
     * corrupt gzip is told by zlib's gzread there, with its own text) */
    if (size >= 2 && !(data[0] == 0x1f && data[1] == 0x8b) &&
        sublet_trace_detect(data, size) == SUBLET_FORMAT_KINETO_JSON) {
        sublet_trace_load_options o2 = opt;
        o2.max_tree_bytes = 0;
        sublet_trace *w = NULL;
        char werr[512];
        memset(werr, 'x', sizeof werr);
        sublet_status ws = sublet_trace_parse(data, size, &o2, &w, werr, sizeof werr);
        fz_check_streamed(data, size, data[0], data[1], &o2, ws, w, werr);
        sublet_trace_extras_release(w);
        sublet_trace_free(w);
    }
    fz_check_loaded(st, t, err, sizeof err, &opt);
    return 0;
}
