/* sublet — views: the analyst's results as documents.
 *
 * Each call runs an analysis of the layers below (a replay, a min-capacity
 * search, the fragmentation state, the OOM diagnosis, the tuning) and
 * renders its result as one document: the JSON object that `sublet replay
 * --json`, `mincap --json`, `frag --json`, `diagnose --json` and `tune
 * --json` print, or the self-contained HTML page of `sublet report`.  The
 * document is returned as an allocated, NUL-terminated string (free it with
 * sublet_string_free); the CLI prints it, bindings (python/sublet) parse it,
 * so both show the same fields from the same code.  Nothing is printed.
 *
 * Two sets of entry points:
 *   - sublet_replay_json, sublet_mincap_json, sublet_frag_json,
 *     sublet_diagnose_json, sublet_tune_json, sublet_report_html take the
 *     analyses' own option structs (the CLI; sublet_replay_stream_json is
 *     replay's over a trace stream);
 *   - sublet_view_replay, _mincap, _frag, _diagnose, _tune, _report take
 *     one struct of plain arguments (sublet_view_args: names, settings,
 *     sizes) with the CLI's defaults (bindings: one small struct to mirror,
 *     none of the analyses').
 * Every call is reentrant: different threads may render at once (a trace is
 * only read). */
#ifndef SUBLET_VIEWS_H
#define SUBLET_VIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/error.h"
#include "sublet/frag.h"
#include "sublet/replay.h"
#include "sublet/snapshot.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"
#include "sublet/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Frees a string a views call returned (NULL is fine). */
SUBLET_API void sublet_string_free(char *s);

/* ---- inputs ---------------------------------------------------------------------------- */

/* Bytes to read as an input (zero-initialized: none, named "input"). */
typedef struct sublet_input_bytes {
    const void *buf;  /* len bytes (may be NULL when len is 0) */
    size_t len;
    const char *name; /* starts every message; NULL: "input" */
} sublet_input_bytes;

/* Read an input of any format sublet reads (detected by content, gzip'd or
 * not) from bytes (in): a PyTorch snapshot (pickle or JSON) gives its trace
 * and, when snap is not NULL, the snapshot itself in *snap (NULL for other
 * formats); input that matches no format is read as the events CSV, so the
 * message names its line.  Free *t with sublet_trace_free, *snap with
 * sublet_snapshot_free. */
SUBLET_API sublet_status sublet_input_parse(const sublet_input_bytes *in,
                                            const sublet_trace_load_options *lo, sublet_trace **t,
                                            sublet_snapshot **snap, char *err, size_t cap);
/* The same from a file ("-": stdin); messages start with the path. */
SUBLET_API sublet_status sublet_input_load(const char *path, const sublet_trace_load_options *lo,
                                           sublet_trace **t, sublet_snapshot **snap, char *err,
                                           size_t cap);
/* A whole file ("-": stdin) into a malloc'd buffer (free()); SUBLET_ERR_IO
 * or SUBLET_ERR_NO_MEMORY with the reason, naming the path, in err. */
SUBLET_API sublet_status sublet_input_read(const char *path, uint8_t **buf, size_t *len, char *err,
                                           size_t cap);

/* The settings a replay of t uses: `given` when not NULL, else those the
 * trace recorded (*from_trace = 1 when from_trace is not NULL), else "". */
SUBLET_API const char *sublet_view_conf(const sublet_trace *t, const char *given, int *from_trace);
/* The simulated device of `sublet frag`, `diagnose` and `report`: `given`
 * when not 0, else the trace's recorded capacity, else 80 GiB. */
SUBLET_API uint64_t sublet_view_device_memory(const sublet_trace *t, uint64_t given);
/* A prelude mode's name: "auto", "adopt" or "allocate". */
SUBLET_API const char *sublet_prelude_name(int mode);

/* ---- documents from the analyses' options ------------------------------------------------ */

enum {
    /* replay: the JSON also carries "memory_summary_at_peak" and
     * "memory_summary_at_end", memory_summary()'s texts (the CLI's
     * --json has neither) */
    SUBLET_VIEW_SUMMARIES = 1u << 0,
    /* report: add the tuning section (sublet_report_options.tune) */
    SUBLET_VIEW_TUNE = 1u << 1,
    /* the texts: the replay's settings (o->conf) are those the trace
     * recorded, and the text says so */
    SUBLET_VIEW_CONF_RECORDED = 1u << 2,
};

typedef struct sublet_view_options {
    const char *name;         /* the input's name in the document; NULL: "" */
    unsigned flags;           /* SUBLET_VIEW_* */
    /* replay: echoed as "snapshot_out" (NULL: null).  Read after the replay,
     * so the caller's on_finish may set it once it has written the file. */
    const char *snapshot_out;
    uint64_t resolution;      /* mincap: bisection step, 0 = 2 MiB */
    uint64_t at;              /* frag: the state after this event; SUBLET_REPLAY_ALL: the end */
    unsigned map_width;       /* frag: segment map width, 0 = 64 */
    size_t top_pinning;       /* frag: pinning segments listed, 0 = 5 */
    /* frag: the snapshot the trace came from (may be NULL): when the replay
     * to the end stops, the state comes from its segments (of `device`, -1:
     * the trace's) and `note` (when not NULL) says why. */
    const sublet_snapshot *snapshot;
    int64_t device;
    char *note;
    size_t note_cap;
} sublet_view_options;

SUBLET_API void sublet_view_options_init(sublet_view_options *v);

/* `sublet replay --json`: the replay of t under o (its on_oom, when set, is
 * called too, its observers are not: it is sublet_replay_stream_json over a
 * stream of t; o->capture_summary is implied by SUBLET_VIEW_SUMMARIES), then
 * the fragmentation state after the last event and, when it OOMed, the
 * diagnosis.  Returns the replay's status: *out is the document also when
 * the replay failed (its "error" says why); NULL only on
 * SUBLET_ERR_NO_MEMORY or bad arguments. */
SUBLET_API sublet_status sublet_replay_json(const sublet_trace *t, const sublet_replay_options *o,
                                            const sublet_view_options *v, char **out, char *err,
                                            size_t cap);

/* The same document from a stream (sublet/trace_stream.h: an events CSV or
 * an event log read in bounded chunks), byte for byte what
 * sublet_replay_json gives for the trace loaded whole: the rows after the
 * replay's last are read too, to count and check them.  A stream that fails
 * (a malformed row, a read error) gives no document: its status, the
 * message in err.  o's observers (before_event, after_event, trace) are not
 * called; its on_oom is.  The stream is read to its end (rewind it to read
 * it again); its notice (sublet_trace_stream_notice) is the caller's to
 * tell. */
SUBLET_API sublet_status sublet_replay_stream_json(sublet_trace_stream *ts,
                                                   const sublet_replay_options *o,
                                                   const sublet_view_options *v, char **out,
                                                   char *err, size_t cap);

/* `sublet replay` (without --json): the same replay as sublet_replay_json
 * (one run, one result; o's on_oom called, its observers not), rendered as
 * the CLI's text: the header (v->name, the settings, recorded when
 * SUBLET_VIEW_CONF_RECORDED, the device), each OOM, memory_summary() at the
 * peak and at the end, the counts, the fidelity, the fragmentation after
 * the last event and the OOMs' diagnosis.  Status and *out as there. */
SUBLET_API sublet_status sublet_replay_text(const sublet_trace *t, const sublet_replay_options *o,
                                            const sublet_view_options *v, char **out, char *err,
                                            size_t cap);
/* The same text from a stream, byte for byte that of the trace loaded whole
 * (as sublet_replay_stream_json). */
SUBLET_API sublet_status sublet_replay_stream_text(sublet_trace_stream *ts,
                                                   const sublet_replay_options *o,
                                                   const sublet_view_options *v, char **out,
                                                   char *err, size_t cap);

/* `sublet mincap --json` (and `replay --min-capacity --json`): the smallest
 * simulated device that runs t under o (sublet_replay_min_capacity). */
SUBLET_API sublet_status sublet_mincap_json(const sublet_trace *t, const sublet_replay_options *o,
                                            const sublet_view_options *v, char **out, char *err,
                                            size_t cap);
/* The same document for a search already run (sublet_mincap_result, e.g. of
 * sublet_replay_min_capacity_stream over a file read in chunks): o as the
 * search ran, v->name and v->resolution as above. */
SUBLET_API sublet_status sublet_mincap_result_json(const sublet_mincap_result *m,
                                                   const sublet_replay_options *o,
                                                   const sublet_view_options *v, char **out);

/* `sublet mincap` (without --json): the same search's text report. */
SUBLET_API sublet_status sublet_mincap_result_text(const sublet_mincap_result *m,
                                                   const sublet_replay_options *o,
                                                   const sublet_view_options *v, char **out);

/* `sublet frag --json`: the fragmentation state after v->at (metrics, the
 * free-block histogram, pinning segments, the segment map). */
SUBLET_API sublet_status sublet_frag_json(const sublet_trace *t, const sublet_replay_options *o,
                                          const sublet_view_options *v, char **out, char *err,
                                          size_t cap);

/* `sublet diagnose --json`: every OOM of the replay explained, and the
 * settings that avoid it (d may be NULL: the defaults). */
SUBLET_API sublet_status sublet_diagnose_json(const sublet_trace *t, const sublet_replay_options *o,
                                              const sublet_frag_diagnose_options *d,
                                              const sublet_view_options *v, char **out, char *err,
                                              size_t cap);

/* The same two documents from a stream (sublet/trace_stream.h), byte for
 * byte those of the trace loaded whole, in memory for the live state: read
 * from its start (rewound) once to count its rows (not when a trace is
 * behind it), then for each replay (the diagnosis replays it several
 * times: a file is best read from its binary copy, sublet_trace_stream_copy).
 * A malformed row is the stream's error and text. */
SUBLET_API sublet_status sublet_frag_json_stream(sublet_trace_stream *ts,
                                                 const sublet_replay_options *o,
                                                 const sublet_view_options *v, char **out,
                                                 char *err, size_t cap);
SUBLET_API sublet_status sublet_diagnose_json_stream(sublet_trace_stream *ts,
                                                     const sublet_replay_options *o,
                                                     const sublet_frag_diagnose_options *dopt,
                                                     const sublet_view_options *v, char **out,
                                                     char *err, size_t cap);

/* The same two as the CLI's text (`sublet frag`, `sublet diagnose` without
 * --json): the header (v->name, where the state comes from, the settings,
 * recorded when SUBLET_VIEW_CONF_RECORDED, the device), then
 * sublet_frag_format_text's sections (v->map_width, v->top_pinning); the
 * diagnosis as sublet_frag_diagnosis_format writes it. */
SUBLET_API sublet_status sublet_frag_text_stream(sublet_trace_stream *ts,
                                                 const sublet_replay_options *o,
                                                 const sublet_view_options *v, char **out,
                                                 char *err, size_t cap);
SUBLET_API sublet_status sublet_diagnose_text_stream(sublet_trace_stream *ts,
                                                     const sublet_replay_options *o,
                                                     const sublet_frag_diagnose_options *dopt,
                                                     const sublet_view_options *v, char **out,
                                                     char *err, size_t cap);

/* `sublet tune --json`: sublet_tune over n traces, names[i] naming each
 * (may be NULL).  On a failed tuning the message is in err. */
SUBLET_API sublet_status sublet_tune_json(const sublet_trace *const *traces,
                                          const char *const *names,
                                          size_t n, const sublet_tune_options *o, char **out,
                                          char *err, size_t cap);

/* `sublet tune` (without --json): the same tuning's text report (names[i]
 * listed per trace when n > 1).  A search cancelled (o->cancel) returns
 * SUBLET_ERR_CANCELLED with *out the best answers it had found. */
SUBLET_API sublet_status sublet_tune_text(const sublet_trace *const *traces,
                                          const char *const *names,
                                          size_t n, const sublet_tune_options *o, char **out,
                                          char *err, size_t cap);
/* The same documents over streams (sublet_tune_streams: a stream that is
 * not read again cheaply is copied once to a temporary binary file; memory
 * follows the live blocks, not the events); the whole-trace calls above are
 * these over streams of the arrays. */
SUBLET_API sublet_status sublet_tune_json_streams(sublet_trace_stream *const *traces,
                                                  const char *const *names, size_t n,
                                                  const sublet_tune_options *o, char **out,
                                                  char *err, size_t cap);
SUBLET_API sublet_status sublet_tune_text_streams(sublet_trace_stream *const *traces,
                                                  const char *const *names, size_t n,
                                                  const sublet_tune_options *o, char **out,
                                                  char *err, size_t cap);

/* What a report holds, for the line that announces it. */
typedef struct sublet_report_info {
    size_t len;                   /* the page's length in bytes */
    size_t nmaps;                 /* segment maps drawn */
    int exact;                    /* the series are exact, not approximate */
    uint64_t ooms;                /* of the page's replay */
    uint64_t peak_reserved_bytes;
} sublet_report_info;

typedef struct sublet_report_options {
    size_t buckets;        /* points drawn per series, 0 = 2000 */
    size_t oom_maps;       /* segment maps of the first OOMs, default 3 */
    int diagnose;          /* explain the OOMs (more replays), default 1 */
    /* with SUBLET_VIEW_TUNE: the tuning's options (its device_memory and
     * current settings are the page's; NULL: the defaults) */
    const sublet_tune_options *tune;
    /* each segment map that could not be made, told (may be NULL) */
    void (*on_note)(void *user, const char *note);
    void *note_user;
    /* what the page holds (NULL: not asked), zeroed first, filled when the
     * page was made */
    sublet_report_info *info;
} sublet_report_options;

SUBLET_API void sublet_report_options_init(sublet_report_options *r);

/* `sublet report`: the self-contained HTML page (no network) of t replayed
 * under o; ro (NULL: the defaults) how, and *ro->info what it holds. */
SUBLET_API sublet_status sublet_report_html(const sublet_trace *t, const sublet_replay_options *o,
                                            const sublet_report_options *ro,
                                            const sublet_view_options *v, char **out, char *err,
                                            size_t cap);

/* The same page from a stream (sublet/trace_stream.h), byte for byte what
 * sublet_report_html gives for the trace loaded whole, in memory for the
 * live state: the stream is read from its start several times (rewound:
 * the request sizes and the number of rows, the series, each segment map
 * (the peak's among them: a replay to it, as for the trace), the diagnosis'
 * replays), so a file is best streamed from its binary copy
 * (sublet_trace_stream_copy).  SUBLET_VIEW_TUNE tunes the same stream
 * (sublet_tune_streams: a stream read again cheaply as it is, another
 * copied once more). */
SUBLET_API sublet_status sublet_report_html_stream(sublet_trace_stream *ts,
                                                   const sublet_replay_options *o,
                                                   const sublet_report_options *ro,
                                                   const sublet_view_options *v, char **out,
                                                   char *err, size_t cap);

/* ---- the same from a few plain arguments (bindings) ------------------------------------------ */
/* progress (may be NULL): called as the work advances, done of total, from
 * the calling thread or a worker of the tuning. */
typedef void (*sublet_progress_fn)(void *user, uint64_t done, uint64_t total);

/* The arguments of the sublet_view_* calls, each with the CLI's defaults:
 * fill it with sublet_view_args_init, then set what differs (a binding
 * mirrors this struct and calls the init, so the defaults stay the
 * library's; a NULL a: the defaults).  Each call reads the fields it names
 * below, no other. */
typedef struct sublet_view_args {
    const char *name;       /* the input's name in the document (NULL: "") */
    /* the settings: NULL (the init's): the trace's recorded ones, else
     * PyTorch's defaults; tune: the settings in use, NULL each trace's
     * recorded ones */
    const char *conf;
    uint64_t device_memory; /* 0 (the init's): the command's default */
    uint64_t at;            /* stop after this event; SUBLET_REPLAY_ALL (the init's): the end */
    unsigned flags;         /* SUBLET_VIEW_SUMMARIES (replay), SUBLET_VIEW_TUNE (report); 0 */
    unsigned threads;       /* tune: 0 (the init's): every online core */
    /* frag: the snapshot the trace came from (NULL, the init's: none) */
    const sublet_snapshot *snapshot;
    /* tune: the user's PyTorch release (sublet_tune_options.pytorch_version:
     * "2.6", ...; NULL, the init's: the newest), whose rules every replay
     * follows and whose parser takes the answers */
    const char *pytorch_version;
    sublet_progress_fn progress; /* tune, report's tuning (NULL: none) */
    void *progress_user;
} sublet_view_args;

SUBLET_API void sublet_view_args_init(sublet_view_args *a);

/* `sublet replay --json`: name, conf, device_memory, at, flags
 * (SUBLET_VIEW_SUMMARIES only). */
SUBLET_API sublet_status sublet_view_replay(const sublet_trace *t, const sublet_view_args *a,
                                            char **out, char *err, size_t cap);
/* `sublet mincap --json`: name, conf, at. */
SUBLET_API sublet_status sublet_view_mincap(const sublet_trace *t, const sublet_view_args *a,
                                            char **out, char *err, size_t cap);
/* `sublet frag --json`: name, conf, device_memory, at, snapshot. */
SUBLET_API sublet_status sublet_view_frag(const sublet_trace *t, const sublet_view_args *a,
                                          char **out, char *err, size_t cap);
/* `sublet diagnose --json`: name, conf, device_memory. */
SUBLET_API sublet_status sublet_view_diagnose(const sublet_trace *t, const sublet_view_args *a,
                                              char **out, char *err, size_t cap);
/* `sublet tune --json` over n traces (1 to 64), names[i] naming each (may
 * be NULL): conf (the settings in use), device_memory, threads,
 * pytorch_version, progress. */
SUBLET_API sublet_status sublet_view_tune(const sublet_trace *const *traces,
                                          const char *const *names, size_t n,
                                          const sublet_view_args *a, char **out, char *err,
                                          size_t cap);
/* The same over files (any format sublet reads; names may be NULL: the
 * paths), each read as a stream (sublet_tune_streams: an events CSV, an
 * event log, an RMM log or a Kineto trace copied once to a binary file,
 * memory for the live blocks), as `sublet tune` reads its inputs. */
SUBLET_API sublet_status sublet_view_tune_paths(const char *const *paths,
                                                const char *const *names, size_t n,
                                                const sublet_view_args *a, char **out,
                                                char *err, size_t cap);
/* `sublet report`'s page: name, conf, device_memory, flags (SUBLET_VIEW_TUNE
 * only), progress; *len (may be NULL) its length. */
SUBLET_API sublet_status sublet_view_report(const sublet_trace *t, const sublet_view_args *a,
                                            char **out, size_t *len, char *err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
