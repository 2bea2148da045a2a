/* sublet CLI — the subcommands and the helpers they share. */
#ifndef SUBLET_CLI_H
#define SUBLET_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"
#include "sublet/views.h"

/* Exit codes of every subcommand. */
enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

/* `sublet nullgpu [options] -- COMMAND...` (nullgpu.c): COMMAND on the null device. */
int cli_nullgpu(int argc, char **argv);
void cli_nullgpu_usage(FILE *out);
/* The environment of a program run on the null device, set in this process
 * for a child to inherit: libsublet_nullgpu.so (lib_arg, else found beside
 * this program) last in LD_PRELOAD, the folder of its other names first in
 * LD_LIBRARY_PATH.  The device's settings are the caller's SUBLET_NULLGPU_*
 * variables.  CLI_OK, or CLI_ERROR after saying why (prefixed "sublet prog"). */
int cli_nullgpu_prepare(const char *prog, const char *lib_arg);
/* `sublet record [options] -o FILE -- COMMAND...` (record.c). */
int cli_record(int argc, char **argv);
void cli_record_usage(FILE *out);
/* `sublet fit [options] -- COMMAND ... {batch} ...` (fit.c). */
int cli_fit(int argc, char **argv);
void cli_fit_usage(FILE *out);
/* ---- recording a PyTorch program (record_run.c), shared by record and fit ---------------- */
/* Exit code of `sublet record` when sublet's replay of the recording differs
 * from PyTorch's own figures. */
enum { CLI_RECORD_MISMATCH = 3 };
typedef struct cli_rec_setup {
    const char *prog;     /* "record" or "fit", for messages */
    int null_device;      /* run on the null device */
    const char *memory;   /* its memory (NULL: its default) */
    const char *name;     /* its name (NULL: its default) */
    const char *conf;     /* PYTORCH_ALLOC_CONF for the child; NULL: inherited */
    size_t max_entries;   /* the history's ring buffer */
    const char *stacks;   /* "none" or "python" */
} cli_rec_setup;
/* The figures the hook wrote (stats.json): PyTorch's own. */
#define CLI_REC_NSTATS 5
typedef struct cli_rec_stats {
    char torch_version[64], device_name[256], conf[1024], exception[128];
    uint64_t total_memory, trace_entries, max_entries;
    double fraction; /* the memory fraction in force; -1: not known */
    /* allocated_bytes.all.peak, reserved_bytes.all.peak, segment.all.peak,
     * segment.all.allocated, num_ooms (-1: absent) */
    const char *name[CLI_REC_NSTATS];
    int64_t torch[CLI_REC_NSTATS];
} cli_rec_stats;
/* 1 when a real CUDA driver and device are found (sublet's cuda backend). */
int cli_record_have_gpu(void);
/* This process's environment for the children: the hook written and on
 * PYTHONPATH, its settings, conf, the null device.  CLI_OK or CLI_ERROR. */
int cli_record_env(const cli_rec_setup *s);
/* Run cmd with the hook recording into dir (made by cli_record_workdir);
 * its output to the file log (NULL: this process's).  *code: its exit code,
 * 128 + the signal that killed it.  CLI_OK, or CLI_ERROR when not run. */
int cli_record_run(const cli_rec_setup *s, const char *dir, char *const *cmd, const char *log,
                   int *code);
int cli_record_workdir(const char *prog, char *dir, size_t cap);
void cli_record_rmdir(const char *dir);
/* Read the hook's stats.json at path.  CLI_OK or CLI_ERROR (said). */
int cli_record_read_stats(const char *prog, const char *path, cli_rec_stats *st);
/* The settings to replay a recording with: "pytorch_version:V," (V: version;
 * NULL: the recorded release's; "": none), then conf (NULL: the recorded
 * settings) and the recorded memory fraction below 1. */
void cli_record_conf(const cli_rec_stats *st, const char *version, const char *conf, char *out,
                     size_t cap);
/* Replay options at device_memory (0: the recorded device's), recorded OOMs
 * asked again, the null device's address base when null_device. */
void cli_record_replay_options(const cli_rec_stats *st, const char *conf, int null_device,
                               uint64_t device_memory, sublet_replay_options *o);
/* Replay t: sublet's figures for the keys of cli_rec_stats into out, the
 * rows driven in *events.  CLI_OK, or CLI_ERROR with the reason in err. */
int cli_record_replay_stats(const sublet_trace *t, const sublet_replay_options *o, int64_t *out,
                            uint64_t *events, char *err, size_t cap);
/* 1 when path's extension is one record writes (.pickle, .pkl, .json, .csv;
 * + .gz; .slog). */
int cli_record_format_ok(const char *path);
/* The hook's snapshot pickle written as path (by its extension); an event
 * log (.slog) is the recording replayed as recorded (rs, null_device) with
 * sublet's log on the replaying allocator. */
int cli_record_write(const char *prog, const char *snapshot, const char *path,
                     const cli_rec_stats *rs, int null_device);

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
/* Free a trace (its reader's extras first). */
void cli_trace_free(sublet_trace *t);
/* --prelude's value: "auto", "adopt" or "allocate" into *mode
 * (SUBLET_PRELUDE_*); 0 or -1. */
/* The --pytorch-version line of the usage of each command that takes --conf
 * (cli/main.c takes the option before the command sees its arguments). */
#define CLI_HELP_PYTORCH_VERSION                                                    \
    "  --pytorch-version X   follow PyTorch release X's rules where they changed\n" \
    "                        (2.6, 2.7, ...; default the newest; docs/versions.md)\n"
int cli_parse_prelude(const char *s, int *mode);
/* 0 when conf parses as settings; else prints "sublet CMD: OPTION: why"
 * on stderr and returns CLI_USAGE. */
int cli_check_conf(const char *cmd, const char *option, const char *conf);
/* A decimal event index (below UINT64_MAX); 0 or -1. */
int cli_parse_index(const char *s, uint64_t *out);
/* "--opt VALUE" or "--opt=VALUE": the value, or NULL (missing); *matched
 * tells whether argv[*i] is this option.  *i advances past a separate value. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *matched);
/* The options that say what a trace ran on, for the commands that take them
 * (a NULL target: not taken): --conf S, --device-memory SIZE, --device N
 * (the trace's device, lo->pick_device).  1: argv[*i] was one (consumed); 0:
 * it was not; -1: its value is missing or wrong, said in why. */
int cli_source_option(int argc, char **argv, int *i, const char **conf, uint64_t *device_memory,
                      sublet_trace_load_options *lo, char *why, size_t cap);
/* Recording options for a replay whose allocator's snapshot is wanted: every
 * event, stacks from the trace (context "all") when it has any. */
void cli_record_options(const sublet_trace *t, sublet_replay_options *o);
/* sublet_replay_run with recording on, taking the allocator's snapshot after
 * the last event (*snap, NULL when the replay could not create it). */
sublet_status cli_replay_snapshot(const sublet_trace *t, sublet_replay_options *o,
                                  sublet_replay_result *r, sublet_snapshot **snap, char *err,
                                  size_t cap);
/* The same over a stream of `rows` rows (rewound first; its stacks). */
sublet_status cli_replay_snapshot_stream(sublet_trace_stream *ts, uint64_t rows,
                                         sublet_replay_options *o, sublet_replay_result *r,
                                         sublet_snapshot **snap, char *err, size_t cap);
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
/* --pytorch-version's value (NULL: not given): `sublet tune` and `report
 * --tune` replay every candidate under it (sublet_tune_options). */
const char *cli_pytorch_version(void);

/* sublet_input_load and sublet_input_parse (sublet/views.h), then a
 * trace's notice (an event log's torn tail, lost events) printed as a
 * warning naming the input. */
sublet_status cli_load_input(const char *path, const sublet_trace_load_options *lo,
                             sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap);
sublet_status cli_parse_input(const sublet_input_bytes *in, const sublet_trace_load_options *lo,
                              sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap);

/* An input that `frag`, `diagnose` and `report` read several times: an
 * events CSV, an event log or an RMM log (cli_stream_wanted) read once into its binary
 * copy (sublet_trace_stream_copy) and streamed from it; any other input (and
 * "-") loaded whole (cli_load_input) and streamed from memory.  ts is what
 * to read either way; the notice (an event log's torn tail) is told as
 * cli_load_input does. */
typedef struct cli_input {
    int streamed;
    sublet_trace *t;              /* loaded whole, else NULL */
    sublet_snapshot *snap;        /* a snapshot's (loaded whole) */
    sublet_trace_stream *file;    /* streamed: the file */
    sublet_trace_stream *ts;      /* the copy, or a stream over t */
} cli_input;
/* 1 when a file of format f at `path` streams (sublet/trace_stream.h reads
 * it in bounded memory): an events CSV, an event log, or an RMM log or a
 * Kineto trace that is not standard input (read twice: a first pass finds
 * the prelude; a Kineto trace the stream cannot follow is read whole). */
int cli_format_streams(sublet_trace_format f, const char *path);
/* 1 when `path` streams (cli_format_streams) and SUBLET_REPLAY_WHOLE (=1:
 * load every input whole) is not set. */
int cli_stream_wanted(const char *path);
/* CLI_OK, or CLI_ERROR with the message printed (prefixed with prog);
 * may_stream 0: loaded whole whatever the format. */
int cli_input_open(const char *prog, const char *path, const sublet_trace_load_options *lo,
                   int may_stream, cli_input *in);
void cli_input_close(cli_input *in);
/* The input's rows, prelude included (sublet_trace_count). */
uint64_t cli_input_rows(cli_input *in);

/* ---- fragmentation helpers (frag.c) ---------------------------------------------------- */
#include "sublet/frag.h"
/* Replay options for t: conf (NULL: the trace's), device_memory (0: the
 * trace's, else 80 GiB). */
void cli_frag_replay_options(const sublet_trace *t, const char *conf, uint64_t device_memory,
                             sublet_replay_options *o, int *conf_from_trace);
/* The same for a stream (its recorded settings and device memory). */
void cli_frag_stream_options(sublet_trace_stream *ts, const char *conf, uint64_t device_memory,
                             sublet_replay_options *o, int *conf_from_trace);

/* ---- tuning helpers (tune.c), shared with `sublet report --tune` ----------------------- */
#include "sublet/tune.h"
/* The search options both commands take (--cost-model, --band, --prelude,
 * --threads, --no-warmup): 1 when argv[*i] was one (its value consumed), 0
 * when not, -CLI_USAGE or -CLI_ERROR (the message printed, prefixed with
 * prog). */
int cli_tune_option(const char *prog, int argc, char **argv, int *i, sublet_tune_options *o);

#endif
