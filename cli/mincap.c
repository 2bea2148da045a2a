/* sublet CLI — the smallest simulated device on which a trace runs.
 *
 * `sublet mincap TRACE [--conf STR] [--prelude MODE] [--at N]
 * [--no-placement-hints] [--resolution SIZE] [--json]`, and the report behind
 * `sublet replay TRACE --min-capacity` (cli_min_capacity, under the replay's
 * options):
 * bisection over device sizes (sublet_replay_min_capacity), then the min
 * capacity, the floor (peak of live requested bytes), the overhead over it,
 * the replays the search ran, and the device calls of the replay at the
 * minimum: segment allocs/frees (cudaMalloc/cudaFree), virtual reserves,
 * releases, maps and unmaps (expandable segments, policy:stitch), and the
 * engine's alloc retries (the OOM path: free cached memory, try again). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sublet/replay.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

void cli_mincap_usage(FILE *out)
{
    fputs("usage: sublet mincap TRACE [options]\n"
          "  Find by bisection the smallest simulated device (2 MiB resolution) on which\n"
          "  TRACE replays without an OOM, and report it with the overhead over the peak\n"
          "  of live requested bytes and the device calls at that size.  Also available\n"
          "  as `sublet replay TRACE --min-capacity`, under the same replay options.\n"
          "options:\n"
          "  --conf STR            allocator settings (PYTORCH_CUDA_ALLOC_CONF grammar, plus\n"
          "                        sublet's policy:stitch); default: the settings the trace\n"
          "                        recorded, else PyTorch's defaults\n"
          "  --prelude MODE        the state before a mid-run recording: auto, adopt or\n"
          "                        allocate (as `sublet replay --prelude`; default auto)\n"
          "  --at N                the trace up to event N only (as `sublet replay --at`)\n"
          "  --no-placement-hints  let the sim place new segments itself\n"
          "  --resolution SIZE     search step (default 2MiB)\n"
          "  --json                print one JSON object instead of the text report\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

/* The search over t, or over ts when t is NULL; prog: the command, for a
 * stream's error (a malformed row: reported as loading reports it). */
static int min_capacity(const sublet_trace *t, sublet_trace_stream *ts, const char *prog,
                        const char *path, const sublet_replay_options *base, uint64_t resolution,
                        int json, FILE *out)
{
    sublet_replay_options o = *base;
    if (!o.conf)
        o.conf = "";
    sublet_mincap_result m;
    char err[512] = "";
    sublet_status st = t ? sublet_replay_min_capacity(t, &o, resolution, &m, err, sizeof err)
                         : sublet_replay_min_capacity_stream(ts, &o, resolution, &m, err,
                                                             sizeof err);
    size_t none;
    char serr[1024];
    if (st != SUBLET_OK && ts && sublet_trace_stream_next(ts, NULL, 0, &none, serr, sizeof serr) !=
                                     SUBLET_OK) {
        /* the file's error (a malformed row), reported as loading reports it */
        fprintf(stderr, "%s: %s\n", prog, serr);
        sublet_mincap_result_free(&m);
        return CLI_ERROR;
    }
    /* the stream was read to its end (into the search's copy): an event
     * log's notice is known, printed as loading prints it */
    if (ts && sublet_trace_stream_notice(ts))
        fprintf(stderr, "sublet: %s: warning: %s\n", path, sublet_trace_stream_notice(ts));
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet: min capacity%s%s: %s\n", path ? " of " : "", path ? path : "",
                err[0] ? err : sublet_status_text(st));
        sublet_mincap_result_free(&m);
        return CLI_ERROR;
    }
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = path;
    v.resolution = resolution;
    char *doc = NULL;
    st = (json ? sublet_mincap_result_json : sublet_mincap_result_text)(&m, &o, &v, &doc);
    if (st == SUBLET_OK)
        fputs(doc, out);
    sublet_string_free(doc);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet: min capacity: %s\n", sublet_status_text(st));
        sublet_mincap_result_free(&m);
        return CLI_ERROR;
    }
    sublet_mincap_result_free(&m);
    return ferror(out) ? CLI_ERROR : CLI_OK;
}

int cli_min_capacity(const sublet_trace *t, const char *path, const sublet_replay_options *base,
                     uint64_t resolution, int json, FILE *out)
{
    return min_capacity(t, NULL, NULL, path, base, resolution, json, out);
}

int cli_min_capacity_streamed(const char *prog, const char *path, const char *conf,
                              const sublet_replay_options *base, uint64_t resolution, int json,
                              FILE *out)
{
    const char *whole = getenv("SUBLET_REPLAY_WHOLE");
    if (whole && *whole && strcmp(whole, "0") != 0)
        return -1;
    sublet_trace_format f = sublet_trace_detect_path(path);
    if (!cli_format_streams(f, path))
        return -1;
    char err[1024];
    sublet_trace_stream *ts = NULL;
    sublet_status st = sublet_trace_stream_open(path, NULL, &ts, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "%s: %s\n", prog, err[0] ? err : sublet_status_text(st));
        return CLI_ERROR;
    }
    sublet_replay_options o = *base;
    int from_trace;
    o.conf = cli_conf_for_settings(sublet_trace_stream_settings(ts), conf, &from_trace);
    int rc = min_capacity(NULL, ts, prog, path, &o, resolution, json, out);
    sublet_trace_stream_close(ts);
    return rc;
}

int cli_mincap(int argc, char **argv)
{
    const char *path = NULL, *conf = NULL;
    uint64_t resolution = 0;
    int json = 0;
    sublet_replay_options o;
    sublet_replay_options_init(&o);
    for (int i = 1; i < argc; i++) {
        int m = 0;
        const char *v;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            cli_mincap_usage(stdout);
            return CLI_OK;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            continue;
        }
        char why[160];
        int src = cli_source_option(argc, argv, &i, &conf, NULL, NULL, why, sizeof why);
        if (src < 0) {
            fprintf(stderr, "sublet mincap: %s\n", why);
            return CLI_USAGE;
        }
        if (src > 0)
            continue;
        if (strcmp(argv[i], "--no-placement-hints") == 0) {
            o.placement_hints = 0;
            continue;
        }
        v = cli_opt_value(argc, argv, &i, "--prelude", &m);
        if (m) {
            int mode;
            if (cli_parse_prelude(v, &mode) != 0) {
                fprintf(stderr, "sublet mincap: --prelude needs auto, adopt or allocate\n");
                return CLI_USAGE;
            }
            o.prelude = mode;
            continue;
        }
        v = cli_opt_value(argc, argv, &i, "--at", &m);
        if (m) {
            if (cli_parse_index(v, &o.stop_after) != 0) {
                fprintf(stderr, "sublet mincap: --at needs an event index\n");
                return CLI_USAGE;
            }
            continue;
        }
        v = cli_opt_value(argc, argv, &i, "--resolution", &m);
        if (m) {
            if (!v || sublet_parse_size(v, &resolution) != 0 || resolution == 0) {
                fprintf(stderr, "sublet mincap: --resolution needs a size, e.g. 2MiB\n");
                return CLI_USAGE;
            }
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "sublet mincap: unknown option '%s'\n", argv[i]);
            cli_mincap_usage(stderr);
            return CLI_USAGE;
        }
        if (path) {
            fprintf(stderr, "sublet mincap: more than one trace given\n");
            return CLI_USAGE;
        }
        path = argv[i];
    }
    if (!path) {
        cli_mincap_usage(stderr);
        return CLI_USAGE;
    }
    if (conf && cli_check_conf("mincap", "--conf", conf) != 0)
        return CLI_USAGE;
    /* an events CSV or an event log streams, as in `sublet replay` */
    int rc = cli_min_capacity_streamed("sublet mincap", path, conf, &o, resolution, json, stdout);
    if (rc >= 0)
        return rc;
    sublet_trace *t = NULL;
    char err[512];
    sublet_status st = cli_load_input(path, NULL, &t, NULL, err, sizeof err);
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet mincap: %s\n", err);
        return CLI_ERROR;
    }
    int from_trace;
    o.conf = cli_conf_for(t, conf, &from_trace);
    rc = cli_min_capacity(t, path, &o, resolution, json, stdout);
    cli_trace_free(t);
    return rc;
}
