/* sublet views — what the views' files share (not public): the document
 * being written, the JSON pieces several documents carry, and the number
 * formats of the texts.  The CLI uses these too, for its text outputs. */
#ifndef SL_VIEWS_INTERNAL_H
#define SL_VIEWS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sublet/views.h"
#include "views/json_writer.h"

/* A document written through a FILE* into memory (open_memstream). */
typedef struct sl_doc {
    FILE *f;
    char *p;
    size_t n;
} sl_doc;

/* The entry points of the documents: *out = NULL and err emptied, then
 * SUBLET_ERR_INVALID_ARGUMENT when out, the source (a trace or a stream), o
 * or v is NULL. */
sublet_status sl_view_begin(const void *src, const void *o, const void *v, char **out, char *err,
                            size_t cap);
/* The same for a whole-trace entry point (sublet_frag_json and the like,
 * each its _stream form over the trace), which then opens the trace as a
 * stream, *ts, which the caller closes (SUBLET_ERR_NO_MEMORY if it cannot). */
sublet_status sl_view_trace_open(const sublet_trace *t, const void *o, const void *v, char **out,
                                 char *err, size_t cap, sublet_trace_stream **ts);

/* Open: SUBLET_OK or SUBLET_ERR_NO_MEMORY. */
sublet_status sl_doc_open(sl_doc *d);
/* Close; the text in *out (NULL when it failed: SUBLET_ERR_NO_MEMORY). */
sublet_status sl_doc_close(sl_doc *d, char **out);

/* key: {"all": {metrics}, "small_pool": ..., "large_pool": ..., "streams": [...]}
 * (null when st is NULL): the "fragmentation" object of the stats outputs;
 * with private pools also "pools": sl_view_pools_json. */
void sl_view_frag_json(sl_json_writer *w, const char *key, const sublet_frag_state *st);
/* key: [one object per pool (sublet_frag_pools): pool_id [first, second],
 * name, segments, pinned_segments and the byte totals]. */
void sl_view_pools_json(sl_json_writer *w, const char *key, const sublet_frag_state *st);
/* key: [the top pinning segments with their live blocks and stacks]. */
void sl_view_pinning_json(sl_json_writer *w, const char *key, const sublet_frag_state *st,
                          size_t top);
/* The OOM diagnosis of a replay (sublet_frag_diagnose_trace). */
void sl_view_diagnosis_json(sl_json_writer *w, const char *key, const sublet_frag_diagnosis *d);

/* Whether a warm-up plan is worth applying: derived, not empty, it fits the
 * device and it lowers the run's device allocations. */
int sl_view_plan_helps(const sublet_tune_plan *p);
/* The plan as the "warmup" object of `sublet tune --json`. */
void sl_view_plan_json(sl_json_writer *w, const sublet_tune_plan *p);
/* A PYTORCH_CUDA_ALLOC_CONF answer's release (sublet_tune_eval.oldest_release,
 * fraction_call): "for PyTorch 2.6 (--pytorch-version)..." when the tuning
 * named one (version), else the releases that take it and how to name yours. */
const char *sl_view_release_note(const sublet_tune_eval *e, const char *version, char *buf,
                                 size_t cap);
/* "torch.cuda.set_per_process_memory_fraction(F)" for fraction_call > 0, else NULL. */
const char *sl_view_fraction_code(const sublet_tune_eval *e, char *buf, size_t cap);
/* "given", "recorded" or "default": where the tuning's device size came from. */
const char *sl_view_device_source(const sublet_tune_result *r);

/* The OOMs a replay reported (its on_oom), in order, with their messages
 * copied: `sublet replay`'s text and the replay document list them.  A
 * message that cannot be kept sets nomem (and is left out). */
typedef struct sl_oom_rec {
    uint64_t event, line, size;
    sublet_stream stream;
    char *message;
} sl_oom_rec;
typedef struct sl_oom_list {
    sl_oom_rec *v;
    size_t n, cap;
    int nomem;
} sl_oom_list;
void sl_oom_list_push(sl_oom_list *l, uint64_t event, uint64_t line, uint64_t size,
                      sublet_stream stream, const char *message);
void sl_oom_list_free(sl_oom_list *l);

/* n bytes as MiB, exact when whole ("6 MiB", else "6.5 MiB"); returns buf. */
const char *sl_fmt_mib(uint64_t n, char *buf, size_t cap);
/* A modelled cost in microseconds as "12 \xc2\xb5s", "3.4 ms" or "1.25 s"; returns buf. */
const char *sl_fmt_us(double us, char *buf, size_t cap);
/* The device calls of an evaluation summed over its traces. */
void sl_tune_calls_sum(const sublet_tune_eval *e, sublet_tune_calls *out);

#endif
