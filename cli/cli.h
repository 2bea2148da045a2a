/* sublet CLI — subcommands and the small JSON writer they share. */
#ifndef SUBLET_CLI_H
#define SUBLET_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"

/* Exit codes of every subcommand. */
enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

/* `sublet replay ...`: argv[0] is "replay". */
int cli_replay(int argc, char **argv);
/* The replay part of `sublet help`. */
void cli_replay_usage(FILE *out);
/* `sublet convert IN OUT ...` (convert.c). */
int cli_convert(int argc, char **argv);
void cli_convert_usage(FILE *out);
/* `sublet summary SNAPSHOT ...` (summary.c). */
int cli_summary(int argc, char **argv);
void cli_summary_usage(FILE *out);
/* `sublet mincap TRACE ...` (mincap.c): the smallest simulated device on
 * which the trace runs, by bisection (sublet_replay_min_capacity). */
int cli_mincap(int argc, char **argv);
void cli_mincap_usage(FILE *out);
/* The min-capacity report (`sublet replay TRACE --min-capacity`, `sublet
 * mincap`): text or one JSON object on `out`; errors go to stderr.  Every
 * replay option of `o` that changes the outcome is honoured (conf, prelude,
 * placement_hints, stop_after); its device_memory is what the search varies.
 * path (may be NULL) names the trace in the report; resolution 0 = 2 MiB.
 * Returns CLI_OK or CLI_ERROR. */
int cli_min_capacity(const sublet_trace *t, const char *path, const sublet_replay_options *o,
                     uint64_t resolution, int json, FILE *out);
/* The same over a stream when `path` is an events CSV or an event log (and
 * SUBLET_REPLAY_WHOLE is not set): conf as cli_conf_for; errors prefixed
 * with prog.  -1 when the file does not stream (the caller loads it). */
int cli_min_capacity_streamed(const char *prog, const char *path, const char *conf,
                              const sublet_replay_options *o, uint64_t resolution, int json,
                              FILE *out);

/* `sublet frag FILE ...` and `sublet diagnose FILE ...` (frag.c). */
int cli_frag(int argc, char **argv);
void cli_frag_usage(FILE *out);
int cli_diagnose(int argc, char **argv);
void cli_diagnose_usage(FILE *out);
/* `sublet report FILE -o OUT.html` (report.c). */
int cli_report(int argc, char **argv);
void cli_report_usage(FILE *out);
/* `sublet tune TRACE...` (tune.c). */
int cli_tune(int argc, char **argv);
void cli_tune_usage(FILE *out);

/* ---- shared helpers (cli_util.c) ------------------------------------------------------- */
/* Read a whole file ("-": stdin) into a malloc'd buffer; -1 with the reason
 * (naming the path) in err. */
int cli_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t cap);
/* Load a trace of any format ("-": stdin), detected by content; input that
 * matches no format is read as the events CSV so the error names its line.
 * Messages start with the path.  Free with cli_trace_free. */
sublet_status cli_load_trace(const char *path, const sublet_trace_load_options *opt,
                             sublet_trace **out, char *err, size_t cap);
/* The same from bytes already read (name: for messages). */
sublet_status cli_parse_trace(const uint8_t *buf, size_t n, const char *name,
                              const sublet_trace_load_options *opt, sublet_trace **out, char *err,
                              size_t cap);
void cli_trace_free(sublet_trace *t);
/* --prelude's value: "auto", "adopt" or "allocate" into *mode
 * (SUBLET_PRELUDE_*); 0 or -1. */
int cli_parse_prelude(const char *s, int *mode);
/* Its name, for reports. */
const char *cli_prelude_name(int mode);
/* A decimal event index (below UINT64_MAX); 0 or -1. */
int cli_parse_index(const char *s, uint64_t *out);
/* "--opt VALUE" or "--opt=VALUE": the value, or NULL (missing); *matched
 * tells whether argv[*i] is this option.  *i advances past a separate value. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *matched);
/* Recording options for a replay whose allocator's snapshot is wanted: every
 * event, stacks from the trace (context "all") when it has any. */
void cli_record_options(const sublet_trace *t, sublet_replay_options *o);
/* sublet_replay_run with recording on, taking the allocator's snapshot after
 * the last event (*snap, NULL when the replay could not create it). */
sublet_status cli_replay_snapshot(const sublet_trace *t, sublet_replay_options *o,
                                  sublet_replay_result *r, sublet_snapshot **snap, char *err,
                                  size_t cap);
/* The settings a replay of t uses: `given` (--conf) when not NULL, else the
 * settings the trace recorded (*from_trace = 1), else ""; under
 * --pytorch-version X the latter two begin with "pytorch_version:X,". */
const char *cli_conf_for(const sublet_trace *t, const char *given, int *from_trace);
/* The same from the recorded settings string (NULL: none), e.g. a stream's. */
const char *cli_conf_for_settings(const char *recorded, const char *given, int *from_trace);
/* `--pytorch-version X` (or =X), for every command that takes --conf: takes
 * it out of argv (argc shrinks) and puts "pytorch_version:X," before each
 * --conf value, and cli_conf_for before the others.  Returns 0, or CLI_USAGE
 * after printing why (`cmd` names the command). */
int cli_take_pytorch_version(const char *cmd, int *argc, char **argv);

/* ---- JSON writer (json.c) ---------------------------------------------------------- */
/* Writes one JSON document to a FILE*, pretty-printed with two-space
 * indentation.  Keys and strings are escaped; bytes that are not valid UTF-8
 * become U+FFFD, so the output is always valid JSON. */
#define JSON_MAX_DEPTH 32

typedef struct json_writer {
    FILE *out;
    int depth;
    int count[JSON_MAX_DEPTH]; /* values written at each open level */
    int after_key;             /* a key was just written: the value follows inline */
} json_writer;

void json_init(json_writer *w, FILE *out);
void json_object_begin(json_writer *w);
void json_object_end(json_writer *w);
void json_array_begin(json_writer *w);
void json_array_end(json_writer *w);
void json_key(json_writer *w, const char *key);
void json_string(json_writer *w, const char *s);
void json_u64(json_writer *w, uint64_t v);
void json_i64(json_writer *w, int64_t v);
void json_double(json_writer *w, double v);
void json_bool(json_writer *w, int v);
void json_null(json_writer *w);
/* A value that is already JSON text (written as is). */
void json_raw(json_writer *w, const char *text);
/* Convenience: key + value. */
void json_kv_u64(json_writer *w, const char *key, uint64_t v);
void json_kv_string(json_writer *w, const char *key, const char *s);
void json_kv_double(json_writer *w, const char *key, double v);
void json_kv_bool(json_writer *w, const char *key, int v);
/* Finish the document: a newline after the top-level value (which the
 * caller has closed), then flush. */
void json_finish(json_writer *w);
/* Escape `s` as a JSON string literal (with quotes) into out. */
void json_write_escaped(FILE *out, const char *s);

/* n bytes as MiB, exact when whole ("6 MiB", else "6.5 MiB"); returns buf. */
const char *cli_fmt_mib(uint64_t n, char *buf, size_t cap);
/* A modelled cost in microseconds as "12 \xc2\xb5s", "3.4 ms" or "1.25 s"; returns buf. */
const char *cli_fmt_us(double us, char *buf, size_t cap);

/* The device calls of an evaluation summed over its traces. */
#include "sublet/tune.h"
void cli_tune_calls_sum(const sublet_tune_eval *e, sublet_tune_calls *out);

/* ---- fragmentation helpers (frag.c) ---------------------------------------------------- */
#include "sublet/frag.h"
/* Read a trace or snapshot (detected by content); *snap is set for a snapshot
 * (its trace in *t).  Messages start with the path. */
sublet_status cli_frag_load(const char *path, const sublet_trace_load_options *lo,
                            sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap);
/* Replay options for t: conf (NULL: the trace's), device_memory (0: the
 * trace's, else 80 GiB). */
void cli_frag_replay_options(const sublet_trace *t, const char *conf, uint64_t device_memory,
                             sublet_replay_options *o, int *conf_from_trace);
/* key: {"all": {metrics}, "small_pool": ..., "large_pool": ..., "streams": [...]}
 * (null when st is NULL): the "fragmentation" object of the stats outputs. */
void cli_frag_json(json_writer *w, const char *key, const sublet_frag_state *st);
/* key: [the top pinning segments with their live blocks and stacks]. */
void cli_frag_pinning_json(json_writer *w, const char *key, const sublet_frag_state *st,
                           size_t top);
/* The OOM diagnosis of a replay (sublet_frag_diagnose_trace) as text / JSON. */
void cli_print_diagnosis(FILE *out, const sublet_frag_diagnosis *d);
void cli_diagnosis_json(json_writer *w, const char *key, const sublet_frag_diagnosis *d);

/* ---- tuning helpers (tune.c), shared with `sublet report --tune` ----------------------- */
#include "sublet/tune.h"
/* The search options both commands take (--cost-model, --band, --prelude,
 * --threads, --no-warmup): 1 when argv[*i] was one (its value consumed), 0
 * when not, -CLI_USAGE or -CLI_ERROR (the message printed, prefixed with
 * prog). */
int cli_tune_option(const char *prog, int argc, char **argv, int *i, sublet_tune_options *o);
/* Whether a warm-up plan is worth applying: derived, not empty, it fits the
 * device and it lowers the run's device allocations. */
int cli_tune_plan_helps(const sublet_tune_plan *p);
/* The plan as the "warmup" object of `sublet tune --json`. */
void cli_tune_plan_json(json_writer *w, const sublet_tune_plan *p);

#endif
