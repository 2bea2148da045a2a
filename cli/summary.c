/* sublet CLI — `sublet summary SNAPSHOT`: torch.cuda.memory_summary() and the
 * flat memory_stats() of the allocator state a snapshot records.
 *
 * With recorded events, the snapshot's trace (prelude rebuilt from its
 * segments) is replayed through the engine, and the statistics are the
 * engine's after the last event: current values, and peaks and totals over
 * the recorded window.  Without events (memory_snapshot()'s bare segment
 * list, or an empty trace) the current values are computed from the segments
 * (sublet_snapshot_stats: peak = current).  Any other trace format is
 * accepted too and replayed. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "cli.h"
#include "views/json_writer.h"

void cli_summary_usage(FILE *out)
{
    fputs("usage: sublet summary SNAPSHOT [options]\n"
          "  memory_summary() and the flat memory_stats() keys of a snapshot (pickle or\n"
          "  JSON, gzip'd or not; any trace format is accepted too).  When it holds\n"
          "  recorded events they are replayed through the engine (the prelude seeded\n"
          "  from the segments) and the statistics are the engine's after the last one;\n"
          "  otherwise the current values are computed from the segments.\n"
          "options:\n"
          "  --json                one JSON object: snapshot, device, source, summary,\n"
          "                        stats\n"
          "  --device N            device of a multi-device snapshot (default: the one\n"
          "                        with the most events)\n"
          "  --segments            compute from the segments even when there are events\n"
          "  --conf STR            settings for the replay (default: the snapshot's)\n"
          "  --device-memory SIZE  simulated device capacity for the replay (default: the\n"
          "                        snapshot's, else 80GiB)\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet summary: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    cli_summary_usage(stderr);
    return CLI_USAGE;
}

static char *format_alloc(size_t (*fn)(const sublet_stats *, char *, size_t),
                          const sublet_stats *s)
{
    size_t n = fn(s, NULL, 0);
    char *b = malloc(n + 1);
    if (b)
        fn(s, b, n + 1);
    return b;
}

static char *summary_alloc(const sublet_stats *s, int device)
{
    size_t n = sublet_stats_format_summary(s, device, 0, NULL, 0);
    char *b = malloc(n + 1);
    if (b)
        sublet_stats_format_summary(s, device, 0, b, n + 1);
    return b;
}

/* What the command line asks for. */
typedef struct summary_args {
    const char *path, *conf;
    sublet_trace_load_options lo;
    sublet_replay_options o;
    int json, only_segments;
} summary_args;

/* The options into a; -1 when they are sound, else the exit status (usage
 * errors reported, --help printed). */
static int parse_args(int argc, char **argv, summary_args *a)
{
    memset(a, 0, sizeof *a);
    sublet_replay_options_init(&a->o);
    a->o.device_memory = 0; /* none given: the snapshot's, else the default (below) */
    int only_positional = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int src;
        if (only_positional || s[0] != '-' || strcmp(s, "-") == 0) {
            if (a->path)
                return usage_error("more than one snapshot given ('%s')", s);
            a->path = s;
        } else if (strcmp(s, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            cli_summary_usage(stdout);
            return CLI_OK;
        } else if (strcmp(s, "--json") == 0) {
            a->json = 1;
        } else if (strcmp(s, "--segments") == 0) {
            a->only_segments = 1;
        } else if ((src = cli_source_option(argc, argv, &i, &a->conf, &a->o.device_memory, &a->lo,
                                            why, sizeof why)) != 0) {
            if (src < 0)
                return usage_error("%s", why);
        } else {
            return usage_error("unknown option '%s'", s);
        }
    }
    if (!a->path)
        return usage_error("%s", "no snapshot given");
    if (a->conf) {
        char err[1600];
        sublet_settings probe;
        sublet_settings_default(&probe);
        if (sublet_settings_parse(&probe, a->conf, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet summary: --conf: %s\n", err);
            return CLI_USAGE;
        }
    }
    return -1;
}

/* What is summarised: the snapshot (NULL for another trace format) and
 * its trace. */
typedef struct summary_input {
    const char *name; /* the path, or "stdin" */
    sublet_trace_format f;
    sublet_snapshot *snap;
    sublet_trace *t;
    int64_t device;
    size_t recorded; /* events past the prelude */
} summary_input;

/* Reads a's input into in; CLI_OK, else CLI_ERROR reported (in holds
 * nothing to free). */
static int load_input(const summary_args *a, summary_input *in)
{
    char err[1600], inner[1024];
    uint8_t *buf;
    size_t n;
    memset(in, 0, sizeof *in);
    if (sublet_input_read(a->path, &buf, &n, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet summary: %s\n", err);
        return CLI_ERROR;
    }
    in->name = strcmp(a->path, "-") == 0 ? "stdin" : a->path;
    in->f = sublet_trace_detect(buf, n);
    sublet_status st;
    if (in->f == SUBLET_FORMAT_SNAPSHOT_PICKLE || in->f == SUBLET_FORMAT_SNAPSHOT_JSON) {
        st = sublet_snapshot_parse(buf, n, &in->snap, inner, sizeof inner);
        if (st == SUBLET_OK)
            st = sublet_snapshot_trace(in->snap, &a->lo, &in->t, inner, sizeof inner);
        if (st != SUBLET_OK)
            sl_msg(err, sizeof err, "%s: %s", in->name, inner);
    } else {
        sublet_input_bytes bytes = {buf, n, in->name};
        st = cli_parse_input(&bytes, &a->lo, &in->t, NULL, err, sizeof err);
    }
    free(buf);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet summary: %s\n", err);
        sublet_snapshot_free(in->snap);
        in->snap = NULL;
        return CLI_ERROR;
    }
    in->device = a->lo.pick_device ? a->lo.device : sublet_trace_device(in->t);
    if (in->device < 0)
        in->device = 0;
    in->recorded = sublet_trace_count(in->t) - sublet_trace_prelude_count(in->t);
    return CLI_OK;
}

/* The statistics summarised and where they come from. */
typedef struct summary_values {
    sublet_stats stats;
    const char *source; /* "segments" or "replay" */
    sublet_replay_result r;
    const char *conf; /* the replay's settings */
    int from_segments, from_trace;
} summary_values;

/* The statistics of in: from its segments, else replayed (back to the
 * segments when the replay stops).  CLI_OK, else CLI_ERROR reported. */
static int compute_values(const summary_args *a, const summary_input *in, summary_values *v)
{
    memset(v, 0, sizeof *v);
    v->from_segments = in->snap && (a->only_segments || in->recorded == 0);
    if (v->from_segments) {
        sublet_snapshot_stats(in->snap, in->device, &v->stats);
        v->source = "segments";
        return CLI_OK;
    }
    sublet_replay_options o = a->o;
    o.conf = v->conf = cli_conf_for(in->t, a->conf, &v->from_trace);
    uint64_t dm = sublet_trace_device_memory(in->t);
    if (!o.device_memory)
        o.device_memory = dm ? dm : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
    char rerr[1024] = "";
    sublet_status st = sublet_replay_run(in->t, &o, &v->r, rerr, sizeof rerr);
    v->stats = v->r.stats_end;
    v->source = "replay";
    if (st != SUBLET_OK && in->snap) {
        fprintf(stderr, "sublet summary: note: the replay of %s stopped (%s): the values "
                        "come from the segments\n",
                in->name, rerr[0] ? rerr : sublet_status_text(st));
        v->from_segments = 1;
        sublet_snapshot_stats(in->snap, in->device, &v->stats);
        v->source = "segments";
    } else if (st != SUBLET_OK) {
        fprintf(stderr, "sublet summary: replay of %s: %s\n", in->name,
                rerr[0] ? rerr : sublet_status_text(st));
        return CLI_ERROR;
    }
    return CLI_OK;
}

/* --json: one object. */
static void print_summary_json(const summary_args *a, const summary_input *in,
                               const summary_values *v, const char *summary)
{
    size_t jn = sublet_stats_format_json(&v->stats, NULL, 0);
    char *js = malloc(jn + 1);
    if (js)
        sublet_stats_format_json(&v->stats, js, jn + 1);
    sl_json_writer w;
    sl_json_init(&w, stdout);
    sl_json_object_begin(&w);
    sl_json_kv_string(&w, "snapshot", a->path);
    sl_json_kv_string(&w, "format", sublet_trace_format_name(in->f));
    sl_json_key(&w, "device");
    sl_json_i64(&w, in->device);
    sl_json_kv_string(&w, "source", v->source);
    sl_json_kv_u64(&w, "segments", in->snap ? sublet_snapshot_segment_count(in->snap) : 0);
    sl_json_kv_u64(&w, "events", in->recorded);
    sl_json_kv_string(&w, "conf", v->from_segments ? "" : v->conf);
    sl_json_key(&w, "replay_errors");
    sl_json_u64(&w, v->r.errors);
    sl_json_kv_string(&w, "summary", summary ? summary : "");
    sl_json_key(&w, "stats");
    if (js)
        sl_json_raw(&w, js);
    else
        sl_json_null(&w);
    sl_json_object_end(&w);
    sl_json_finish(&w);
    free(js);
}

/* The text: a header, memory_summary() and the flat keys. */
static void print_summary_text(const summary_input *in, const summary_values *v,
                               const char *summary)
{
    printf("sublet summary %s\n", in->name);
    printf("  source:   %s, device %" PRId64 ", %zu segments, %zu recorded events\n",
           sublet_trace_format_name(in->f), in->device,
           in->snap ? sublet_snapshot_segment_count(in->snap) : (size_t)0, in->recorded);
    if (v->from_segments)
        printf("  values:   current, computed from the segments (no history: peak = "
               "current)\n");
    else
        printf("  values:   the engine's after replaying the %zu events (settings: %s%s)\n",
               in->recorded, v->conf[0] ? v->conf : "PyTorch defaults",
               v->from_trace ? ", recorded" : "");
    if (v->r.errors)
        printf("  note:     %" PRIu64 " rows could not be replayed (first: %s)\n", v->r.errors,
               v->r.first_error);
    if (in->snap && !v->from_segments) {
        sublet_stats seg;
        sublet_snapshot_stats(in->snap, in->device, &seg);
        int64_t a = seg.reserved_bytes[SUBLET_POOL_ALL].current,
                b = v->stats.reserved_bytes[SUBLET_POOL_ALL].current;
        int64_t c = seg.allocated_bytes[SUBLET_POOL_ALL].current,
                d = v->stats.allocated_bytes[SUBLET_POOL_ALL].current;
        printf("  check:    the snapshot's segments hold %" PRId64 " reserved / %" PRId64
               " allocated bytes; the replay ends with %" PRId64 " / %" PRId64 ": %s\n",
               a, c, b, d, a == b && c == d ? "equal" : "different");
    }
    printf("\n%s\n", summary ? summary : "");
    char *flat = format_alloc(sublet_stats_format_flat, &v->stats);
    fputs(flat ? flat : "", stdout);
    free(flat);
}

int cli_summary(int argc, char **argv)
{
    summary_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    summary_input in;
    if (load_input(&a, &in) != CLI_OK)
        return CLI_ERROR;
    summary_values v;
    rc = compute_values(&a, &in, &v);
    if (rc == CLI_OK) {
        char *summary = summary_alloc(&v.stats, (int)in.device);
        if (a.json)
            print_summary_json(&a, &in, &v, summary);
        else
            print_summary_text(&in, &v, summary);
        free(summary);
    }
    sublet_replay_result_free(&v.r);
    sublet_snapshot_free(in.snap);
    cli_trace_free(in.t);
    return rc;
}
