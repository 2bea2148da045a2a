/* sublet CLI — `sublet replay TRACE [options]`: drive a recorded trace (any
 * format sublet_trace_parse reads, detected by content) through the engine
 * on the sim backend and report memory, counts and fidelity against
 * PyTorch's own decisions; optionally write the replayed allocator's
 * snapshot. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "cli.h"
#include "sublet/replay.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

void cli_replay_usage(FILE *out)
{
    fputs("usage: sublet replay TRACE [options]\n"
          "  Replay a recorded allocation trace through the engine (sim backend) and\n"
          "  compare every decision with PyTorch's.  TRACE is an events CSV, a PyTorch\n"
          "  snapshot (pickle or JSON), an RMM log or a Kineto trace, gzip'd or not\n"
          "  (detected by content); '-' reads stdin.\n"
          "options:\n"
          "  --conf STR            allocator settings (PYTORCH_CUDA_ALLOC_CONF grammar);\n"
          "                        default: the settings the trace recorded, else PyTorch's\n"
          "                        defaults (the environment is not read)\n"
          "  --snapshot-out FILE   record the replay and write the replayed allocator's\n"
          "                        snapshot (segments, blocks and trace) after the last\n"
          "                        event: FILE.pickle/.pkl or FILE.json, optionally .gz\n"
          "  --device-memory SIZE  simulated device capacity, e.g. 80GiB, 24GB (default 80GiB)\n"
          "  --json                print one JSON object instead of the text report\n"
          "  --at N                stop after event N (0-based index, prelude rows included)\n"
          "  --stop-on-oom         stop at the first OOM\n"
          "  --replay-ooms         ask the engine again each request PyTorch recorded as\n"
          "                        an OOM (a snapshot's oom rows); it must fail too (use\n"
          "                        the recording's device size and settings)\n"
          "  --device-base ADDR    the simulated device's addresses start at ADDR (hex or\n"
          "                        decimal; default far from any recording's): what no\n"
          "                        row places goes at the lowest free address from\n"
          "                        there; 0x200000000000 for a recording made on sublet's\n"
          "                        null device (sublet nullgpu)\n"
          "  --min-capacity        find by bisection (2 MiB steps) the smallest simulated\n"
          "                        device that runs the trace without OOM under these\n"
          "                        options (--conf, --prelude, --at, placement), and its\n"
          "                        overhead over peak live bytes (as `sublet mincap`)\n"
          "  --check               verify every allocator invariant after each event\n"
          "  --no-placement-hints  let the sim place new segments itself instead of at\n"
          "                        the recorded addresses\n"
          "  --prelude MODE        the state before a mid-run recording's first event:\n"
          "                        'adopt' PyTorch's segments and blocks as recorded,\n"
          "                        'allocate' the live blocks through the engine, or\n"
          "                        'auto': adopt under the native policy without\n"
          "                        expandable segments, allocate otherwise (default auto;\n"
          "                        a trace recorded mid-run under expandable segments is\n"
          "                        refused unless 'allocate' is given)\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

/* ---- the report: one view, text or JSON ------------------------------------------------- */

typedef struct write_ctx {
    const char *path;
    sublet_view_options *v;
    char werr[1024];
    size_t segments, entries; /* of the snapshot written */
} write_ctx;

/* After the last event: the replayed allocator's snapshot, written to
 * --snapshot-out (then named in the document). */
static void write_at_finish(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    (void)last_event;
    (void)st;
    write_ctx *c = user;
    sublet_snapshot *snap = NULL;
    sublet_status ts = a ? sublet_snapshot_take(a, &snap) : SUBLET_ERR_INVALID_ARGUMENT;
    if (ts != SUBLET_OK) {
        sl_msg(c->werr, sizeof c->werr, "%s: no snapshot was taken: %s", c->path,
               sublet_status_text(ts));
    } else if (sublet_snapshot_write(snap, c->path, SUBLET_SNAPSHOT_AUTO, c->werr,
                                     sizeof c->werr) == SUBLET_OK) {
        c->v->snapshot_out = c->path;
        c->segments = sublet_snapshot_segment_count(snap);
        c->entries = sublet_snapshot_trace_count(snap, sublet_snapshot_device_count(snap) - 1);
    }
    sublet_snapshot_free(snap);
}

/* The replay of t (loaded whole) or of ts (a stream: an events CSV or an
 * event log, read in chunks; its notice told) under o, its report on stdout:
 * sublet_replay_text or _json, byte for byte the same either way.  A stream's
 * malformed row is reported as when loading (nothing on stdout). */
static int report(const char *path, const sublet_trace *t, sublet_trace_stream *ts,
                  sublet_replay_options *o, int conf_from_trace, const char *snap_out, int json)
{
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = path;
    v.flags = conf_from_trace ? SUBLET_VIEW_CONF_RECORDED : 0;
    write_ctx wc = {snap_out, &v, "", 0, 0};
    if (snap_out && t) {
        cli_record_options(t, o);
        o->on_finish = write_at_finish;
        o->finish_user = &wc;
    }
    char *doc = NULL, err[1024] = "";
    sublet_status st = t ? (json ? sublet_replay_json : sublet_replay_text)(t, o, &v, &doc, err,
                                                                            sizeof err)
                         : (json ? sublet_replay_stream_json : sublet_replay_stream_text)(
                               ts, o, &v, &doc, err, sizeof err);
    if (!doc) {
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
        return CLI_ERROR;
    }
    if (ts && sublet_trace_stream_notice(ts)) /* an event log's torn tail, lost events */
        fprintf(stderr, "sublet: %s: warning: %s\n", strcmp(path, "-") ? path : "stdin",
                sublet_trace_stream_notice(ts));
    fputs(doc, stdout);
    sublet_string_free(doc);
    if (!json && v.snapshot_out)
        printf("snapshot of the replayed allocator: %s (%zu segments, %zu trace entries)\n",
               snap_out, wc.segments, wc.entries);
    if (err[0] || st != SUBLET_OK)
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
    else if (snap_out && !v.snapshot_out && !wc.werr[0])
        sl_msg(wc.werr, sizeof wc.werr, "%s: no snapshot was taken", snap_out);
    if (wc.werr[0])
        fprintf(stderr, "sublet replay: --snapshot-out: %s\n", wc.werr);
    fflush(stdout);
    return st != SUBLET_OK || wc.werr[0] ? CLI_ERROR : CLI_OK;
}

/* `sublet replay` over a stream (an events CSV or an event log, without
 * --snapshot-out or --min-capacity): the same report, byte for byte, as
 * from the trace loaded whole, in memory that grows with the live blocks. */
static int replay_streamed(const char *path, const char *conf, sublet_replay_options o, int json)
{
    char err[1024];
    sublet_trace_stream *ts = NULL, *file = NULL;
    sublet_status st = sublet_trace_stream_open(path, NULL, &ts, err, sizeof err);
    if (st == SUBLET_OK && strcmp(path, "-") == 0) {
        /* standard input is read once, into its binary copy, which rewinds
         * (the fragmentation state and the diagnosis replay it again) */
        file = ts;
        ts = NULL;
        st = sublet_trace_stream_copy(file, &ts, err, sizeof err);
    }
    int rc = CLI_ERROR;
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
    } else {
        int conf_from_trace;
        o.conf = cli_conf_for_settings(sublet_trace_stream_settings(ts), conf, &conf_from_trace);
        rc = report(path, NULL, ts, &o, conf_from_trace, NULL, json);
    }
    sublet_trace_stream_close(ts);
    sublet_trace_stream_close(file);
    return rc;
}

/* ---- arguments ------------------------------------------------------------------------ */

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet replay: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    cli_replay_usage(stderr);
    return CLI_USAGE;
}

int cli_replay(int argc, char **argv)
{
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    const char *path = NULL, *conf = NULL, *snap_out = NULL;
    int json = 0, only_positional = 0, min_capacity = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m, src;
        const char *v;
        if (only_positional || a[0] != '-' || strcmp(a, "-") == 0) {
            if (path)
                return usage_error("more than one trace given ('%s')", a);
            path = a;
        } else if (strcmp(a, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_replay_usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--check") == 0) {
            o.check = 1;
        } else if (strcmp(a, "--stop-on-oom") == 0) {
            o.stop_on_oom = 1;
        } else if (strcmp(a, "--replay-ooms") == 0) {
            o.replay_ooms = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--device-base", &m)) || m) {
            char *end = NULL;
            unsigned long long base = v ? strtoull(v, &end, 0) : 0;
            if (!v || !*v || *end || base == 0 || base % (2u << 20) != 0)
                return usage_error("--device-base: '%s' is not a non-zero address aligned to "
                                   "2 MiB", v ? v : "");
            o.device_base = base;
        } else if (strcmp(a, "--min-capacity") == 0) {
            min_capacity = 1;
        } else if (strcmp(a, "--no-placement-hints") == 0) {
            o.placement_hints = 0;
        } else if ((v = cli_opt_value(argc, argv, &i, "--prelude", &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--prelude");
            int mode;
            if (cli_parse_prelude(v, &mode) != 0)
                return usage_error("--prelude: '%s' is not auto, adopt or allocate", v);
            o.prelude = mode;
        } else if ((src = cli_source_option(argc, argv, &i, &conf, &o.device_memory, NULL, why,
                                            sizeof why)) != 0) {
            if (src < 0)
                return usage_error("%s", why);
        } else if ((v = cli_opt_value(argc, argv, &i, "--snapshot-out", &m)) || m) {
            if (!v || !*v)
                return usage_error("%s needs a value", "--snapshot-out");
            if (sublet_snapshot_format_of_path(v, NULL) == SUBLET_SNAPSHOT_AUTO)
                return usage_error("--snapshot-out: '%s' does not end in .pickle, .pkl or .json "
                                   "(optionally followed by .gz)", v);
            snap_out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--at", &m)) || m) {
            if (!v)
                return usage_error("%s needs a value", "--at");
            if (cli_parse_index(v, &o.stop_after) != 0)
                return usage_error("--at: '%s' is not an event index", v);
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!path)
        return usage_error("%s", "no trace given");

    sublet_settings probe;
    sublet_settings_default(&probe);
    char err[1024];
    if (conf && sublet_settings_parse(&probe, conf, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet replay: --conf: %s\n", err);
        return CLI_USAGE;
    }

    /* an events CSV, an event log or an RMM log streams (SUBLET_REPLAY_WHOLE=1:
     * loaded whole, as every other format is) */
    const char *whole = getenv("SUBLET_REPLAY_WHOLE");
    if (!snap_out && !min_capacity && !(whole && *whole && strcmp(whole, "0") != 0)) {
        sublet_trace_format f = sublet_trace_detect_path(path);
        if (cli_format_streams(f, path) || !strcmp(path, "-"))
            return replay_streamed(path, conf, o, json);
    }
    if (min_capacity) { /* before the load: a streamable file streams */
        int rc = cli_min_capacity_streamed("sublet replay", path, conf, &o, 0, json, stdout);
        if (rc >= 0)
            return rc;
    }
    sublet_trace *t = NULL;
    sublet_status st = cli_load_input(path, NULL, &t, NULL, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet replay: %s\n", err[0] ? err : sublet_status_text(st));
        return CLI_ERROR;
    }
    int conf_from_trace;
    o.conf = cli_conf_for(t, conf, &conf_from_trace);
    if (min_capacity) {
        /* under every option given: conf, prelude, placement, --at */
        int rc = cli_min_capacity(t, path, &o, 0, json, stdout);
        sublet_trace_free(t);
        return rc;
    }

    int rc = report(path, t, NULL, &o, conf_from_trace, snap_out, json);
    cli_trace_free(t);
    return rc;
}
