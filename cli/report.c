/* sublet CLI — `sublet report FILE -o OUT.html`: the options, then the page
 * (sublet_report_html, src/views/report.c: one self-contained HTML page of
 * the trace's memory and fragmentation over time) written atomically. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "formats/atomic_write.h"
#include "cli.h"
#include "sublet/views.h"

void cli_report_usage(FILE *out)
{
    fputs("usage: sublet report FILE -o OUT.html [options]\n"
          "  One self-contained HTML page (no network, no server): memory over time\n"
          "  (allocated, reserved, live requested bytes), fragmentation over time, the\n"
          "  segment map at the peak, at each OOM and at the end (hover a block for its\n"
          "  size, stream and allocation stack), the request sizes, the top pinning\n"
          "  segments and the OOM diagnosis; private pools each as their own group.\n"
          "  FILE: any trace or snapshot sublet reads (a snapshot whose trace cannot be\n"
          "  replayed, as a mid-run one with memory in private pools: its segments).\n"
          "  An events CSV or an event log is read once into a binary copy on disk (64\n"
          "  bytes an event, in $TMPDIR) that every replay reads, the series reduced to\n"
          "  the buckets as they are measured: memory for the live blocks, not the trace\n"
          "  (--tune too: it replays the same copy).\n"
          "options:\n"
          "  -o, --output FILE     the page to write (atomically)\n"
          "  --device-memory SIZE  simulated device capacity (default: the trace's, else 80GiB)\n"
          "  --conf STR            settings for the replay (default: the trace's)\n"
          "  --buckets N           points drawn per series (default 2000; each keeps min/max)\n"
          "  --oom-maps N          segment maps of the first N OOMs (default 3)\n"
          "  --no-diagnosis        skip the replays under candidate settings after an OOM\n"
          "  --device N            device of a multi-device snapshot (default: the one\n"
          "                        with the most events)\n"
          "  --tune                add the tuning result (as `sublet tune`): both answers with\n"
          "                        what they fix, the evidence, the Pareto trade-offs and the\n"
          "                        warm-up plan; --device-memory is your device, --conf the\n"
          "                        current settings\n"
          "  --cost-model M        with --tune: as `sublet tune --cost-model`\n"
          "  --band PCT            with --tune: as `sublet tune --band` (default 0.5)\n"
          "  --prelude MODE        with --tune: as `sublet tune --prelude` (default auto)\n"
          "  --threads N           with --tune: parallel replays (default: every online\n"
          "                        core)\n"
          "  --cost-cutoff F       with --tune: as `sublet tune --cost-cutoff` (default 32)\n"
          "  --no-warmup           with --tune: skip the warm-up plan\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

/* ---- the command -------------------------------------------------------------------------- */

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet report: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    cli_report_usage(stderr);
    return CLI_USAGE;
}

static void print_note(void *user, const char *note)
{
    (void)user;
    fprintf(stderr, "sublet report: note: %s\n", note);
}

int cli_report(int argc, char **argv)
{
    const char *path = NULL, *outp = NULL, *conf = NULL;
    uint64_t device_memory = 0, buckets = 2000, oom_maps = 3;
    int diagnose = 1, only_positional = 0, tune = 0, tune_opts = 0;
    sublet_trace_load_options lo = {0};
    sublet_tune_options to;
    sublet_tune_options_init(&to);
    to.pytorch_version = cli_pytorch_version();
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m, src;
        const char *v;
        if (only_positional || a[0] != '-' || strcmp(a, "-") == 0) {
            if (path)
                return usage_error("more than one input given ('%s')", a);
            path = a;
        } else if (strcmp(a, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_report_usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--no-diagnosis") == 0) {
            diagnose = 0;
        } else if (strcmp(a, "--tune") == 0) {
            tune = 1;
        } else if ((m = cli_tune_option("sublet report", argc, argv, &i, &to)) != 0) {
            if (m < 0)
                return m == -CLI_USAGE ? usage_error("%s", "bad tuning option") : -m;
            tune_opts = 1;
        } else if (((v = cli_opt_value(argc, argv, &i, "-o", &m)) || m) ||
                   ((v = cli_opt_value(argc, argv, &i, "--output", &m)) || m)) {
            if (!v)
                return usage_error("%s needs a value: the page to write, e.g. OUT.html", argv[i]);
            outp = v;
        } else if ((src = cli_source_option(argc, argv, &i, &conf, &device_memory, &lo, why,
                                            sizeof why)) != 0) {
            if (src < 0)
                return usage_error("%s", why);
        } else if ((v = cli_opt_value(argc, argv, &i, "--buckets", &m)) || m) {
            if (!v || cli_parse_index(v, &buckets) != 0 || buckets < 10 || buckets > 100000)
                return usage_error("--buckets: '%s' is not in 10..100000", v ? v : "");
        } else if ((v = cli_opt_value(argc, argv, &i, "--oom-maps", &m)) || m) {
            if (!v || cli_parse_index(v, &oom_maps) != 0 || oom_maps > 16)
                return usage_error("--oom-maps: '%s' is not in 0..16", v ? v : "");
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!path)
        return usage_error("%s", "no input given");
    if (!outp)
        return usage_error("%s", "no output given (-o OUT.html)");
    if (tune_opts && !tune)
        return usage_error("%s", "--cost-model, --band, --prelude, --threads and --no-warmup "
                                 "go with --tune");
    char err[1600];
    if (conf) {
        sublet_settings probe;
        sublet_settings_default(&probe);
        if (sublet_settings_parse(&probe, conf, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "sublet report: --conf: %s\n", err);
            return CLI_USAGE;
        }
    }
    /* an events CSV or an event log streams (from its binary copy), the
     * tuning too */
    cli_input in;
    if (cli_input_open("sublet report", path, &lo, 1, &in) != CLI_OK)
        return CLI_ERROR;
    sublet_replay_options o;
    int from_trace = 0;
    cli_frag_stream_options(in.ts, conf, device_memory, &o, &from_trace);

    int rc = CLI_OK;
    sublet_report_options ro;
    sublet_report_options_init(&ro);
    ro.buckets = (size_t)buckets;
    ro.oom_maps = (size_t)oom_maps;
    ro.diagnose = diagnose;
    ro.on_note = print_note;
    sublet_report_info info;
    ro.info = &info;
    /* your device and your current settings, as the page's replay */
    to.device_memory = device_memory;
    const char *cur[1] = {conf};
    to.current = cur;
    ro.tune = &to;
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = path;
    v.flags = tune ? SUBLET_VIEW_TUNE : 0;
    v.snapshot = in.snap; /* its segments when its trace cannot be replayed */
    v.device = lo.pick_device ? lo.device : -1;
    char *page = NULL;
    sublet_status st = sublet_report_html_stream(in.ts, &o, &ro, &v, &page, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY) {
        fprintf(stderr, "sublet report: out of memory\n");
        rc = CLI_ERROR;
    } else if (st != SUBLET_OK) {
        fprintf(stderr, "sublet report: %s: %s\n", path, err[0] ? err : sublet_status_text(st));
        rc = CLI_ERROR;
    } else if ((st = sublet_atomic_write(outp, page, info.len, err, sizeof err)) != SUBLET_OK) {
        fprintf(stderr, "sublet report: %s\n", err[0] ? err : sublet_status_text(st));
        rc = CLI_ERROR;
    } else {
        char t1[48];
        sublet_format_size(info.peak_reserved_bytes, t1, sizeof t1);
        printf("report: %s (%zu bytes): %" PRIu64 " events, %" PRIu64 " OOMs, peak reserved %s, "
               "%zu segment maps%s\n",
               outp, info.len, cli_input_rows(&in), info.ooms, t1, info.nmaps,
               info.exact ? "" : "; note: the series are approximate");
    }
    sublet_string_free(page);
    cli_input_close(&in);
    return rc;
}
