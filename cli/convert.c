/* sublet CLI — `sublet convert IN OUT`: any readable trace or snapshot to a
 * snapshot pickle, a snapshot JSON or an events CSV.
 *
 * How each pair is done:
 *   snapshot -> snapshot   the value tree is copied as is (pickle <-> JSON,
 *                          gzip or not): nothing is lost.
 *   anything -> CSV        read as a trace (sublet_trace_parse: prelude
 *                          rebuilt, one device), written by
 *                          sublet_trace_write_csv; stacks and block sizes have
 *                          no column and are dropped (a note says so).
 *   trace -> snapshot      replayed through the engine with recording on
 *                          (sublet_replay_run + sublet_snapshot_take): the
 *                          segments and blocks are the replayed allocator's,
 *                          the events its recorded ones, with the trace's
 *                          times and stacks — the same as the trace's own
 *                          wherever the replay matches PyTorch's decisions.
 *                          With --direct, or when the trace cannot be replayed
 *                          (expandable segments) or has rows in private pools
 *                          (their pool_id would be lost), the snapshot is built from
 *                          the trace alone (sublet_snapshot_from_trace: the
 *                          events verbatim, blocks approximated).
 * An events CSV or an event log streams (sublet/trace_stream.h): to a CSV a
 * chunk of rows at a time; to a snapshot replayed from its binary copy (the
 * recording and the snapshot hold every event: not O(live), but no trace
 * array nor file buffer beside them). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "cli.h"

void cli_convert_usage(FILE *out)
{
    fputs("usage: sublet convert IN OUT [options]\n"
          "  Convert a trace or snapshot (any format `sublet replay` reads) to\n"
          "    OUT.pickle, OUT.pkl  a PyTorch memory snapshot pickle (as _dump_snapshot;\n"
          "                         pytorch.org/memory_viz opens it)\n"
          "    OUT.json             the same snapshot as JSON\n"
          "    OUT.csv              an events CSV (seq,action,addr,size,stream,time_us;\n"
          "                         a trace with private pools adds a pool column)\n"
          "  each optionally followed by .gz.  A snapshot converted to a snapshot is\n"
          "  copied as is.  A trace (events CSV, RMM log, Kineto) converted to a snapshot\n"
          "  is replayed through the engine with recording on: segments and blocks are\n"
          "  the replayed allocator's, the events its recording (with the trace's times\n"
          "  and stacks).  The CSV has no column for stacks: they are dropped.  An events\n"
          "  CSV or an event log is read as a stream: to a CSV a chunk of rows at a time;\n"
          "  to a snapshot replayed from a stream (the snapshot holds every event, so its\n"
          "  memory still grows with the trace, but without the trace loaded beside it).\n"
          "options:\n"
          "  --device N            device of a multi-device source (default: the one\n"
          "                        with the most events)\n"
          "  --conf STR            settings for the replay (default: the trace's, else\n"
          "                        PyTorch's defaults)\n"
          "  --device-memory SIZE  simulated device capacity for the replay (default: the\n"
          "                        trace's, else 80GiB)\n"
          "  --direct              build the snapshot from the trace without replaying it\n"
          "                        (the events verbatim; block sizes approximated); also\n"
          "                        used when the trace cannot be replayed or has rows in\n"
          "                        private pools\n"
          "  --no-placement-hints  let the sim place new segments itself\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet convert: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    cli_convert_usage(stderr);
    return CLI_USAGE;
}

static int is_csv_path(const char *p)
{
    size_t n = strlen(p);
    if (n >= 3 && strcmp(p + n - 3, ".gz") == 0)
        n -= 3;
    return n >= 4 && strncmp(p + n - 4, ".csv", 4) == 0;
}

typedef struct dev_seen {
    int64_t max_dev;
    uint64_t mask; /* devices 0..63 that own segments */
} dev_seen;

static void note_device(void *user, int64_t device, const sublet_segment_view *seg)
{
    (void)seg;
    dev_seen *d = user;
    if (device >= 0 && device < 64)
        d->mask |= (uint64_t)1 << device;
    if (device > d->max_dev)
        d->max_dev = device;
}

/* How many devices have events or segments; the list in `which`. */
static int devices_in(const sublet_snapshot *s, char *which, size_t cap)
{
    dev_seen d = {-1, 0};
    sublet_snapshot_segments_walk(s, note_device, &d);
    for (size_t i = 0; i < sublet_snapshot_device_count(s) && i < 64; i++)
        if (sublet_snapshot_trace_count(s, i))
            d.mask |= (uint64_t)1 << i;
    int n = 0;
    size_t o = 0;
    which[0] = '\0';
    for (int i = 0; i < 64; i++)
        if (d.mask >> i & 1) {
            int k = snprintf(which + o, cap - o, "%s%d", n ? ", " : "", i);
            if (k > 0 && (size_t)k < cap - o)
                o += (size_t)k;
            n++;
        }
    return n;
}

/* An events CSV or an event log (in, a file) to an events CSV: the same
 * file, messages and exit status as from the trace loaded whole, except
 * that the notice and the stacks note come after the rows are read. */
static int convert_streamed(const char *in, const char *out, const sublet_trace_load_options *lo)
{
    char err[1024];
    sublet_trace_stream *ts = NULL;
    sublet_status st = sublet_trace_stream_open(in, lo, &ts, err, sizeof err);
    if (st == SUBLET_OK)
        st = sublet_trace_stream_write_csv(ts, out, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet convert: %s\n", err[0] ? err : sublet_status_text(st));
        sublet_trace_stream_close(ts);
        return CLI_ERROR;
    }
    if (sublet_trace_stream_notice(ts)) /* an event log's torn tail, lost events */
        fprintf(stderr, "sublet: %s: warning: %s\n", in, sublet_trace_stream_notice(ts));
    if (sublet_trace_stream_stack_count(ts))
        fprintf(stderr, "sublet convert: note: an events CSV has no column for stacks; "
                        "%u distinct stacks were dropped\n",
                sublet_trace_stream_stack_count(ts));
    const sublet_trace_event *pre;
    printf("%s (%s) -> %s (events CSV): %zu rows (%zu prelude)\n", in,
           sublet_trace_format_name(sublet_trace_stream_format(ts)), out,
           (size_t)sublet_trace_stream_rows(ts), sublet_trace_stream_prelude(ts, &pre));
    sublet_trace_stream_close(ts);
    return CLI_OK;
}

static const char *snapshot_kind(sublet_snapshot_format f)
{
    return f == SUBLET_SNAPSHOT_JSON ? "snapshot JSON" : "snapshot pickle";
}

static size_t last_trace_count(const sublet_snapshot *s)
{
    size_t nd = sublet_snapshot_device_count(s);
    return nd ? sublet_snapshot_trace_count(s, nd - 1) : 0;
}

/* What a replay into a snapshot could not do, as notes. */
static void replay_notes(const sublet_replay_result *r)
{
    if (r->errors)
        fprintf(stderr, "sublet convert: note: %" PRIu64 " rows could not be replayed "
                        "(first: %s); the snapshot is the engine's state\n",
                r->errors, r->first_error);
    if (r->ooms)
        fprintf(stderr, "sublet convert: note: %" PRIu64 " allocations ran out of the "
                        "simulated device's memory (--device-memory)\n",
                r->ooms);
}

/* An events CSV or an event log (in, a file) to a snapshot, replayed from a
 * stream (its binary copy) with recording on: the same file and messages as
 * from the trace loaded whole, in memory for the recording and the snapshot
 * (which hold every event: not the live blocks only), not for the trace
 * too.  -1 when the trace needs the whole-trace path (it maps expandable
 * segments the settings do not enable, or has rows in private pools, whose
 * snapshot is built from the trace: nothing printed yet). */
static int convert_snapshot_streamed(const char *in, const char *out, sublet_snapshot_format sf,
                                     const char *conf, sublet_replay_options o,
                                     const sublet_trace_load_options *lo)
{
    char err[1024] = "", werr[1024] = "";
    sublet_trace_stream *file = NULL, *ts = NULL;
    sublet_status st = sublet_trace_stream_open(in, lo, &file, err, sizeof err);
    if (st == SUBLET_OK)
        st = sublet_trace_stream_copy(file, &ts, err, sizeof err);
    /* the rows that map pages and those in private pools, counted on the copy */
    uint64_t maps = 0, pooled = 0;
    sublet_trace_event *ev = st == SUBLET_OK ? malloc(1024 * sizeof *ev) : NULL;
    if (st == SUBLET_OK && !ev) {
        st = sl_fail(err, sizeof err, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    size_t got;
    while (st == SUBLET_OK &&
           (st = sublet_trace_stream_next(ts, ev, 1024, &got, err, sizeof err)) == SUBLET_OK && got)
        for (size_t i = 0; i < got; i++) {
            maps += ev[i].kind == SUBLET_ACT_SEGMENT_MAP || ev[i].kind == SUBLET_ACT_SEGMENT_UNMAP;
            pooled += ev[i].pool_id[0] != 0 || ev[i].pool_id[1] != 0;
        }
    free(ev);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet convert: %s\n", err[0] ? err : sublet_status_text(st));
        sublet_trace_stream_close(ts);
        sublet_trace_stream_close(file);
        return CLI_ERROR;
    }
    if (pooled) {
        sublet_trace_stream_close(ts);
        sublet_trace_stream_close(file);
        return -1;
    }
    int from_trace;
    o.conf = cli_conf_for_settings(sublet_trace_stream_settings(file), conf, &from_trace);
    if (!o.device_memory) {
        uint64_t dm = sublet_trace_stream_device_memory(file);
        o.device_memory = dm ? dm : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
    }
    if (maps) {
        sublet_settings es;
        sublet_settings_default(&es);
        if (sublet_settings_parse(&es, o.conf, NULL, 0) != SUBLET_OK || !es.expandable_segments) {
            sublet_trace_stream_close(ts);
            sublet_trace_stream_close(file);
            return -1;
        }
    }
    if (sublet_trace_stream_notice(file)) /* an event log's torn tail, lost events */
        fprintf(stderr, "sublet: %s: warning: %s\n", in, sublet_trace_stream_notice(file));
    sublet_replay_result r;
    sublet_snapshot *snap = NULL;
    const char *how = "replayed through the engine";
    int rc = CLI_OK;
    st = cli_replay_snapshot_stream(ts, sublet_trace_stream_rows(file), &o, &r, &snap, err,
                                    sizeof err);
    if (st == SUBLET_OK) {
        replay_notes(&r);
    } else if (st == SUBLET_ERR_UNSUPPORTED) {
        /* built from the trace alone, which needs it whole */
        fprintf(stderr, "sublet convert: note: the replay stopped (%s): building the "
                        "snapshot from the trace alone\n",
                err);
        sublet_snapshot_free(snap);
        snap = NULL;
        how = "built from the trace";
        sublet_trace *t = NULL;
        st = sublet_input_load(in, lo, &t, NULL, err, sizeof err);
        if (st == SUBLET_OK)
            st = sublet_snapshot_from_trace(t, o.conf, &snap, err, sizeof err);
        if (st != SUBLET_OK) {
            fprintf(stderr, "sublet convert: %s: %s\n", in, err);
            rc = CLI_ERROR;
        }
        cli_trace_free(t);
    } else {
        fprintf(stderr, "sublet convert: replay of %s: %s\n", in,
                err[0] ? err : sublet_status_text(st));
        rc = CLI_ERROR;
    }
    sublet_replay_result_free(&r);
    if (rc == CLI_OK && (st = sublet_snapshot_write(snap, out, SUBLET_SNAPSHOT_AUTO, werr,
                                                    sizeof werr)) == SUBLET_OK)
        printf("%s (%s) -> %s (%s, %s): %zu segments, %zu trace entries\n", in,
               sublet_trace_format_name(sublet_trace_stream_format(file)), out,
               snapshot_kind(sf), how, sublet_snapshot_segment_count(snap),
               last_trace_count(snap));
    else if (rc == CLI_OK) {
        fprintf(stderr, "sublet convert: %s\n", werr);
        rc = CLI_ERROR;
    }
    sublet_snapshot_free(snap);
    sublet_trace_stream_close(ts);
    sublet_trace_stream_close(file);
    return rc;
}

/* What the command line asks for. */
typedef struct convert_args {
    const char *in, *out, *conf;
    sublet_trace_load_options lo;
    sublet_replay_options o;
    int direct;                /* --direct */
    int to_csv;                /* OUT is an events CSV ... */
    sublet_snapshot_format sf; /* ... else a snapshot of this format */
} convert_args;

/* The options into a; -1 when they are sound, else the exit status (usage
 * errors reported, --help printed). */
static int parse_args(int argc, char **argv, convert_args *a)
{
    memset(a, 0, sizeof *a);
    sublet_replay_options_init(&a->o);
    a->o.device_memory = 0; /* none given: the trace's, else the default (below) */
    int only_positional = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int src;
        if (only_positional || s[0] != '-' || strcmp(s, "-") == 0) {
            if (!a->in)
                a->in = s;
            else if (!a->out)
                a->out = s;
            else
                return usage_error("too many arguments ('%s')", s);
        } else if (strcmp(s, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            cli_convert_usage(stdout);
            return CLI_OK;
        } else if (strcmp(s, "--direct") == 0) {
            a->direct = 1;
        } else if (strcmp(s, "--no-placement-hints") == 0) {
            a->o.placement_hints = 0;
        } else if ((src = cli_source_option(argc, argv, &i, &a->conf, &a->o.device_memory, &a->lo,
                                            why, sizeof why)) != 0) {
            if (src < 0)
                return usage_error("%s", why);
        } else {
            return usage_error("unknown option '%s'", s);
        }
    }
    if (!a->in || !a->out)
        return usage_error("%s", "IN and OUT are both needed");
    a->to_csv = is_csv_path(a->out);
    a->sf = sublet_snapshot_format_of_path(a->out, NULL);
    if (!a->to_csv && a->sf == SUBLET_SNAPSHOT_AUTO)
        return usage_error("cannot write '%s': sublet writes snapshot pickles (.pickle, .pkl), "
                           "snapshot JSON (.json) and events CSVs (.csv), each optionally .gz",
                           a->out);
    if (a->conf) {
        char err[1024];
        sublet_settings probe;
        sublet_settings_default(&probe);
        if (sublet_settings_parse(&probe, a->conf, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet convert: --conf: %s\n", err);
            return CLI_USAGE;
        }
    }
    return -1;
}

/* The conversions that read the input as a stream; -1 when this one needs
 * it loaded whole (nothing printed yet). */
static int convert_from_stream(const convert_args *a)
{
    if (strcmp(a->in, "-") == 0)
        return -1;
    /* an events CSV, an event log or an RMM log to an events CSV: streamed,
     * in memory for a chunk of rows (SUBLET_REPLAY_WHOLE=1: loaded whole) */
    const char *whole = getenv("SUBLET_REPLAY_WHOLE");
    if (a->to_csv && !(whole && *whole && strcmp(whole, "0") != 0)) {
        sublet_trace_format f = sublet_trace_detect_path(a->in);
        if (cli_format_streams(f, a->in))
            return convert_streamed(a->in, a->out, &a->lo);
    }
    /* ... or to a snapshot (replayed): read from a stream, not loaded */
    if (!a->to_csv && !a->direct && cli_stream_wanted(a->in))
        return convert_snapshot_streamed(a->in, a->out, a->sf, a->conf, a->o, &a->lo);
    return -1;
}

/* Writes snap to OUT and says so (name read as format fmt, the snapshot
 * `how` made). */
static int write_snapshot(const convert_args *a, const char *name, sublet_trace_format fmt,
                          const char *how, const sublet_snapshot *snap)
{
    char werr[1024] = "";
    if (sublet_snapshot_write(snap, a->out, SUBLET_SNAPSHOT_AUTO, werr, sizeof werr) !=
        SUBLET_OK) {
        fprintf(stderr, "sublet convert: %s\n", werr);
        return CLI_ERROR;
    }
    printf("%s (%s) -> %s (%s, %s): %zu segments, %zu trace entries\n", name,
           sublet_trace_format_name(fmt), a->out, snapshot_kind(a->sf), how,
           sublet_snapshot_segment_count(snap), last_trace_count(snap));
    return CLI_OK;
}

/* A snapshot's events as a trace (to be written as a CSV): one device.
 * Frees snap. */
static int snapshot_to_trace(const convert_args *a, const char *name, sublet_snapshot *snap,
                             sublet_trace **t)
{
    char which[256], inner[1024];
    int ndev = devices_in(snap, which, sizeof which);
    if (ndev > 1 && !a->lo.pick_device) {
        fprintf(stderr,
                "sublet convert: %s holds %d devices (%s); an events CSV holds one: choose "
                "it with --device N\n",
                name, ndev, which);
        sublet_snapshot_free(snap);
        return CLI_ERROR;
    }
    sublet_status st = sublet_snapshot_trace(snap, &a->lo, t, inner, sizeof inner);
    sublet_snapshot_free(snap);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet convert: %s: %s\n", name, inner);
        return CLI_ERROR;
    }
    return CLI_OK;
}

/* A trace to an events CSV.  Frees t. */
static int trace_to_csv(const convert_args *a, const char *name, sublet_trace *t)
{
    char werr[1024] = "";
    int rc = CLI_OK;
    if (sublet_trace_stack_count(t))
        fprintf(stderr, "sublet convert: note: an events CSV has no column for stacks; "
                        "%u distinct stacks were dropped\n",
                sublet_trace_stack_count(t));
    if (sublet_trace_write_csv(t, a->out, werr, sizeof werr) == SUBLET_OK)
        printf("%s (%s) -> %s (events CSV): %zu rows (%zu prelude)\n", name,
               sublet_trace_format_name(sublet_trace_source_format(t)), a->out,
               sublet_trace_count(t), sublet_trace_prelude_count(t));
    else {
        fprintf(stderr, "sublet convert: %s\n", werr);
        rc = CLI_ERROR;
    }
    cli_trace_free(t);
    return rc;
}

/* Whether a trace's snapshot must be built from the trace alone though a
 * replay was asked for (a note says why). */
static int needs_direct(const sublet_trace *t, const char *conf)
{
    if (sublet_trace_count_kind(t, SUBLET_ACT_SEGMENT_MAP) ||
        sublet_trace_count_kind(t, SUBLET_ACT_SEGMENT_UNMAP)) {
        sublet_settings es;
        sublet_settings_default(&es);
        if (sublet_settings_parse(&es, conf, NULL, 0) != SUBLET_OK || !es.expandable_segments) {
            fprintf(stderr, "sublet convert: note: the trace maps expandable segments but the "
                            "settings do not enable them (--conf expandable_segments:True "
                            "replays it): building the snapshot from the trace alone\n");
            return 1;
        }
    }
    const sublet_trace_event *ev = sublet_trace_events(t);
    for (size_t i = 0, nev = sublet_trace_count(t); i < nev; i++)
        if (ev[i].pool_id[0] || ev[i].pool_id[1]) {
            fprintf(stderr, "sublet convert: note: the trace has rows in private pools and "
                            "the engine's own recording carries no pool_id: building the "
                            "snapshot from the trace alone, pool ids kept\n");
            return 1;
        }
    return 0;
}

/* A trace replayed into *snap; sets *direct when the replay stopped on
 * what it cannot do (the snapshot is then built from the trace). */
static int replay_into_snapshot(const sublet_trace *t, sublet_replay_options *o,
                                const char *name, sublet_snapshot **snap, int *direct)
{
    sublet_replay_result r;
    char rerr[1024] = "";
    int rc = CLI_OK;
    sublet_status st = cli_replay_snapshot(t, o, &r, snap, rerr, sizeof rerr);
    if (st == SUBLET_OK) {
        replay_notes(&r);
    } else if (st == SUBLET_ERR_UNSUPPORTED) {
        fprintf(stderr, "sublet convert: note: the replay stopped (%s): building the "
                        "snapshot from the trace alone\n",
                rerr);
        sublet_snapshot_free(*snap);
        *snap = NULL;
        *direct = 1;
    } else {
        fprintf(stderr, "sublet convert: replay of %s: %s\n", name,
                rerr[0] ? rerr : sublet_status_text(st));
        sublet_snapshot_free(*snap);
        *snap = NULL;
        rc = CLI_ERROR;
    }
    sublet_replay_result_free(&r);
    return rc;
}

/* A trace (read as inf) to a snapshot: replayed, else built from the trace.
 * Frees t. */
static int trace_to_snapshot(const convert_args *a, const char *name, sublet_trace_format inf,
                             sublet_trace *t)
{
    sublet_replay_options o = a->o;
    int from_trace, direct = a->direct;
    o.conf = cli_conf_for(t, a->conf, &from_trace);
    if (!o.device_memory) {
        uint64_t dm = sublet_trace_device_memory(t);
        o.device_memory = dm ? dm : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
    }
    if (!direct)
        direct = needs_direct(t, o.conf);
    sublet_snapshot *snap = NULL;
    const char *how = "replayed through the engine";
    int rc = CLI_OK;
    if (!direct)
        rc = replay_into_snapshot(t, &o, name, &snap, &direct);
    if (direct && rc == CLI_OK) {
        char err[1024];
        how = "built from the trace";
        if (sublet_snapshot_from_trace(t, o.conf, &snap, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet convert: %s: %s\n", name, err);
            rc = CLI_ERROR;
        }
    }
    if (rc == CLI_OK)
        rc = write_snapshot(a, name,
                            inf == SUBLET_FORMAT_UNKNOWN ? sublet_trace_source_format(t) : inf,
                            how, snap);
    sublet_snapshot_free(snap);
    cli_trace_free(t);
    return rc;
}

/* The input loaded whole: a snapshot copied to a snapshot, else read as a
 * trace and written as a CSV or a snapshot. */
static int convert_loaded(const convert_args *a)
{
    char err[1024];
    uint8_t *buf;
    size_t n;
    if (sublet_input_read(a->in, &buf, &n, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet convert: %s\n", err);
        return CLI_ERROR;
    }
    const char *name = strcmp(a->in, "-") == 0 ? "stdin" : a->in;
    sublet_trace_format inf = sublet_trace_detect(buf, n);
    sublet_trace *t = NULL;
    sublet_status st;
    if (inf == SUBLET_FORMAT_SNAPSHOT_PICKLE || inf == SUBLET_FORMAT_SNAPSHOT_JSON) {
        char inner[1024];
        sublet_snapshot *snap = NULL;
        st = sublet_snapshot_parse(buf, n, &snap, inner, sizeof inner);
        free(buf);
        if (st != SUBLET_OK) {
            fprintf(stderr, "sublet convert: %s: %s\n", name, inner);
            return CLI_ERROR;
        }
        if (!a->to_csv) {
            int rc = write_snapshot(a, name, inf, "copied", snap);
            sublet_snapshot_free(snap);
            return rc;
        }
        int rc = snapshot_to_trace(a, name, snap, &t);
        if (rc != CLI_OK)
            return rc;
    } else {
        sublet_input_bytes bytes = {buf, n, name};
        st = cli_parse_input(&bytes, &a->lo, &t, NULL, err, sizeof err);
        free(buf);
        if (st != SUBLET_OK) {
            fprintf(stderr, "sublet convert: %s\n", err);
            return CLI_ERROR;
        }
    }
    return a->to_csv ? trace_to_csv(a, name, t) : trace_to_snapshot(a, name, inf, t);
}

int cli_convert(int argc, char **argv)
{
    convert_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0)
        rc = convert_from_stream(&a);
    if (rc < 0)
        rc = convert_loaded(&a);
    return rc;
}
