/* sublet views — what the views' files share (not public): the JSON pieces
 * several documents carry (view_frag.c, view_tune.c) and, through
 * view_common.h, the ground every view stands on.  The CLI does not use
 * them: its texts come from the views too (sublet_*_text). */
#ifndef SL_VIEWS_INTERNAL_H
#define SL_VIEWS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sublet/views.h"
#include "views/json_writer.h"
#include "views/view_common.h"

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
/* The same as text (sublet_frag_diagnosis_format) on out. */
void sl_view_diagnosis_text(FILE *out, const sublet_frag_diagnosis *d);

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

/* The device calls of an evaluation summed over its traces. */
void sl_tune_calls_sum(const sublet_tune_eval *e, sublet_tune_calls *out);

#endif
