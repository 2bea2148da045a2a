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

int cli_summary(int argc, char **argv)
{
    const char *path = NULL, *conf = NULL;
    sublet_trace_load_options lo = {0};
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    o.device_memory = 0; /* none given: the snapshot's, else the default (below) */
    int json = 0, only_segments = 0, only_positional = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int src;
        if (only_positional || a[0] != '-' || strcmp(a, "-") == 0) {
            if (path)
                return usage_error("more than one snapshot given ('%s')", a);
            path = a;
        } else if (strcmp(a, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_summary_usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--segments") == 0) {
            only_segments = 1;
        } else if ((src = cli_source_option(argc, argv, &i, &conf, &o.device_memory, &lo, why,
                                            sizeof why)) != 0) {
            if (src < 0)
                return usage_error("%s", why);
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!path)
        return usage_error("%s", "no snapshot given");
    char err[1600];
    if (conf) {
        sublet_settings probe;
        sublet_settings_default(&probe);
        if (sublet_settings_parse(&probe, conf, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet summary: --conf: %s\n", err);
            return CLI_USAGE;
        }
    }
    uint8_t *buf;
    size_t n;
    if (sublet_input_read(path, &buf, &n, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet summary: %s\n", err);
        return CLI_ERROR;
    }
    const char *name = strcmp(path, "-") == 0 ? "stdin" : path;
    sublet_trace_format f = sublet_trace_detect(buf, n);
    sublet_snapshot *snap = NULL;
    sublet_trace *t = NULL;
    sublet_status st;
    char inner[1024];
    if (f == SUBLET_FORMAT_SNAPSHOT_PICKLE || f == SUBLET_FORMAT_SNAPSHOT_JSON) {
        st = sublet_snapshot_parse(buf, n, &snap, inner, sizeof inner);
        if (st == SUBLET_OK)
            st = sublet_snapshot_trace(snap, &lo, &t, inner, sizeof inner);
        if (st != SUBLET_OK)
            snprintf(err, sizeof err, "%s: %s", name, inner);
    } else {
        st = cli_parse_input(buf, n, name, &lo, &t, NULL, err, sizeof err);
    }
    free(buf);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet summary: %s\n", err);
        sublet_snapshot_free(snap);
        return CLI_ERROR;
    }
    int64_t device = lo.pick_device ? lo.device : sublet_trace_device(t);
    if (device < 0)
        device = 0;
    size_t recorded = sublet_trace_count(t) - sublet_trace_prelude_count(t);
    int from_segments = snap && (only_segments || recorded == 0);
    sublet_stats stats;
    const char *source;
    sublet_replay_result r;
    memset(&r, 0, sizeof r);
    int rc = CLI_OK;
    int from_trace = 0;
    if (from_segments) {
        sublet_snapshot_stats(snap, device, &stats);
        source = "segments";
    } else {
        o.conf = cli_conf_for(t, conf, &from_trace);
        uint64_t dm = sublet_trace_device_memory(t);
        if (!o.device_memory)
            o.device_memory = dm ? dm : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
        char rerr[1024] = "";
        st = sublet_replay_run(t, &o, &r, rerr, sizeof rerr);
        stats = r.stats_end;
        source = "replay";
        if (st != SUBLET_OK && snap) {
            fprintf(stderr, "sublet summary: note: the replay of %s stopped (%s): the values "
                            "come from the segments\n",
                    name, rerr[0] ? rerr : sublet_status_text(st));
            from_segments = 1;
            sublet_snapshot_stats(snap, device, &stats);
            source = "segments";
        } else if (st != SUBLET_OK) {
            fprintf(stderr, "sublet summary: replay of %s: %s\n", name,
                    rerr[0] ? rerr : sublet_status_text(st));
            rc = CLI_ERROR;
        }
    }
    char *summary = summary_alloc(&stats, (int)device);
    if (rc == CLI_OK && json) {
        size_t jn = sublet_stats_format_json(&stats, NULL, 0);
        char *js = malloc(jn + 1);
        if (js)
            sublet_stats_format_json(&stats, js, jn + 1);
        sl_json_writer w;
        sl_json_init(&w, stdout);
        sl_json_object_begin(&w);
        sl_json_kv_string(&w, "snapshot", path);
        sl_json_kv_string(&w, "format", sublet_trace_format_name(f));
        sl_json_key(&w, "device");
        sl_json_i64(&w, device);
        sl_json_kv_string(&w, "source", source);
        sl_json_kv_u64(&w, "segments", snap ? sublet_snapshot_segment_count(snap) : 0);
        sl_json_kv_u64(&w, "events", recorded);
        sl_json_kv_string(&w, "conf", from_segments ? "" : o.conf);
        sl_json_key(&w, "replay_errors");
        sl_json_u64(&w, r.errors);
        sl_json_kv_string(&w, "summary", summary ? summary : "");
        sl_json_key(&w, "stats");
        if (js)
            sl_json_raw(&w, js);
        else
            sl_json_null(&w);
        sl_json_object_end(&w);
        sl_json_finish(&w);
        free(js);
    } else if (rc == CLI_OK) {
        printf("sublet summary %s\n", name);
        printf("  source:   %s, device %" PRId64 ", %zu segments, %zu recorded events\n",
               sublet_trace_format_name(f), device,
               snap ? sublet_snapshot_segment_count(snap) : (size_t)0, recorded);
        if (from_segments)
            printf("  values:   current, computed from the segments (no history: peak = "
                   "current)\n");
        else
            printf("  values:   the engine's after replaying the %zu events (settings: %s%s)\n",
                   recorded, o.conf[0] ? o.conf : "PyTorch defaults",
                   from_trace ? ", recorded" : "");
        if (r.errors)
            printf("  note:     %" PRIu64 " rows could not be replayed (first: %s)\n", r.errors,
                   r.first_error);
        if (snap && !from_segments) {
            sublet_stats seg;
            sublet_snapshot_stats(snap, device, &seg);
            int64_t a = seg.reserved_bytes[SUBLET_POOL_ALL].current,
                    b = stats.reserved_bytes[SUBLET_POOL_ALL].current;
            int64_t c = seg.allocated_bytes[SUBLET_POOL_ALL].current,
                    d = stats.allocated_bytes[SUBLET_POOL_ALL].current;
            printf("  check:    the snapshot's segments hold %" PRId64 " reserved / %" PRId64
                   " allocated bytes; the replay ends with %" PRId64 " / %" PRId64 ": %s\n",
                   a, c, b, d, a == b && c == d ? "equal" : "different");
        }
        printf("\n%s\n", summary ? summary : "");
        char *flat = format_alloc(sublet_stats_format_flat, &stats);
        fputs(flat ? flat : "", stdout);
        free(flat);
    }
    free(summary);
    sublet_replay_result_free(&r);
    sublet_snapshot_free(snap);
    cli_trace_free(t);
    return rc;
}
