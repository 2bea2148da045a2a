/* sublet CLI — `sublet frag FILE`: the fragmentation of a trace or snapshot at
 * any event (metrics, free blocks by size, pinning segments, segment map), and
 * `sublet diagnose FILE`: every OOM of a replay explained, with the settings
 * that would have avoided it.  Also the helpers other commands use to show the
 * same things (cli.h: cli_frag_*, cli_diagnosis_*). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sublet/frag.h"

void cli_frag_usage(FILE *out)
{
    fputs("usage: sublet frag FILE [options]\n"
          "  Fragmentation of a trace or snapshot (any format sublet reads, detected by\n"
          "  content) after event N: the metrics per pool and stream, the free blocks by\n"
          "  size, the segments that pin free memory (with their live blocks and\n"
          "  allocation stacks) and a map of every segment drawn to scale ('#'\n"
          "  allocated, '+' pending free, '.' free); private pools (CUDA graphs,\n"
          "  MemPool) each as their own group.  The trace is replayed through the\n"
          "  engine (sim backend); a snapshot without events, or whose trace cannot be\n"
          "  replayed, is read from its segments.  An events CSV or an event log\n"
          "  streams: memory for the live blocks, not the trace (SUBLET_REPLAY_WHOLE=1\n"
          "  loads it whole).\n"
          "options:\n"
          "  --at N                after event N (0-based, prelude rows included;\n"
          "                        default: the last)\n"
          "  --json                one JSON object with the same content\n"
          "  --device-memory SIZE  simulated device capacity (default: the trace's, else 80GiB)\n"
          "  --conf STR            settings for the replay (default: the trace's)\n"
          "  --width N             columns of the segment map (default 64)\n"
          "  --top N               pinning segments shown (default 5)\n"
          "  --device N            device of a multi-device snapshot (default: the one\n"
          "                        with the most events)\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

void cli_diagnose_usage(FILE *out)
{
    fputs("usage: sublet diagnose FILE [options]\n"
          "  Replay a trace and explain every OOM: fragmentation (the free bytes would\n"
          "  suffice, no block does) or exhaustion, the segments that pin free memory\n"
          "  with their live blocks and stacks, and which settings avoid it: the trace\n"
          "  is replayed on the same device under each candidate (max_split_size_mb\n"
          "  128/256/512, roundup_power2_divisions, expandable_segments:True,\n"
          "  policy:stitch, garbage_collection_threshold with a memory fraction).  An\n"
          "  events CSV or an event log is read once into a binary copy on disk (64 bytes\n"
          "  an event, in $TMPDIR) that every replay reads: memory for the live blocks.\n"
          "options:\n"
          "  --device-memory SIZE  simulated device capacity (default: the trace's, else 80GiB)\n"
          "  --conf STR            base settings (default: the trace's)\n"
          "  --candidate STR       try this setting (repeatable; replaces the list above)\n"
          "  --detailed N          OOMs diagnosed with their pinning segments (default 3)\n"
          "  --json                one JSON object\n"
          CLI_HELP_PYTORCH_VERSION
          "  -h, --help            this text\n",
          out);
}

/* ---- loading ------------------------------------------------------------------------- */

void cli_frag_replay_options(const sublet_trace *t, const char *conf, uint64_t device_memory,
                             sublet_replay_options *o, int *conf_from_trace)
{
    sublet_replay_options_init(o);
    o->conf = cli_conf_for(t, conf, conf_from_trace);
    o->device_memory = sublet_view_device_memory(t, device_memory);
}

void cli_frag_stream_options(sublet_trace_stream *ts, const char *conf, uint64_t device_memory,
                             sublet_replay_options *o, int *conf_from_trace)
{
    sublet_replay_options_init(o);
    o->conf = cli_conf_for_settings(sublet_trace_stream_settings(ts), conf, conf_from_trace);
    uint64_t dm = sublet_trace_stream_device_memory(ts);
    o->device_memory = device_memory ? device_memory
                       : dm          ? dm
                                     : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
}

/* ---- argument parsing shared by both commands ---------------------------------------------- */

typedef struct fargs {
    const char *path, *conf;
    uint64_t at, device_memory, width, top, detailed;
    int json;
    sublet_trace_load_options lo;
    const char **cands;
    size_t ncands;
} fargs;

static int usage_error(const char *cmd, void (*usage)(FILE *), const char *fmt, const char *arg)
{
    fprintf(stderr, "sublet %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    usage(stderr);
    return CLI_USAGE;
}

static int parse_args(int argc, char **argv, const char *cmd, void (*usage)(FILE *), fargs *a,
                      int diagnose)
{
    memset(a, 0, sizeof *a);
    a->at = SUBLET_REPLAY_ALL;
    int only_positional = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int m, src;
        const char *v;
        if (only_positional || s[0] != '-' || strcmp(s, "-") == 0) {
            if (a->path)
                return usage_error(cmd, usage, "more than one input given ('%s')", s);
            a->path = s;
        } else if (strcmp(s, "--") == 0) {
            only_positional = 1;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout);
            return -1;
        } else if (strcmp(s, "--json") == 0) {
            a->json = 1;
        } else if ((src = cli_source_option(argc, argv, &i, &a->conf, &a->device_memory, &a->lo,
                                            why, sizeof why)) != 0) {
            if (src < 0)
                return usage_error(cmd, usage, "%s", why);
        } else if (!diagnose && ((v = cli_opt_value(argc, argv, &i, "--at", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->at) != 0)
                return usage_error(cmd, usage, "--at: '%s' is not an event index", v ? v : "");
        } else if (!diagnose && ((v = cli_opt_value(argc, argv, &i, "--width", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->width) != 0 || a->width < 8 || a->width > 1000)
                return usage_error(cmd, usage, "--width: '%s' is not in 8..1000", v ? v : "");
        } else if (!diagnose && ((v = cli_opt_value(argc, argv, &i, "--top", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->top) != 0 || a->top < 1 || a->top > 64)
                return usage_error(cmd, usage, "--top: '%s' is not in 1..64", v ? v : "");
        } else if (diagnose && ((v = cli_opt_value(argc, argv, &i, "--detailed", &m)) || m)) {
            if (!v || cli_parse_index(v, &a->detailed) != 0 || a->detailed < 1)
                return usage_error(cmd, usage, "--detailed: '%s' is not a count", v ? v : "");
        } else if (diagnose && ((v = cli_opt_value(argc, argv, &i, "--candidate", &m)) || m)) {
            if (!v)
                return usage_error(cmd, usage, "%s needs a value", "--candidate");
            const char **n = realloc(a->cands, (a->ncands + 2) * sizeof *n);
            if (!n)
                return usage_error(cmd, usage, "%s", "out of memory");
            a->cands = n;
            a->cands[a->ncands++] = v;
            a->cands[a->ncands] = NULL;
        } else {
            return usage_error(cmd, usage, "unknown option '%s'", s);
        }
    }
    if (!a->path)
        return usage_error(cmd, usage, "%s", "no input given");
    if (a->conf && cli_check_conf(cmd, "--conf", a->conf) != 0)
        return CLI_USAGE;
    for (size_t c = 0; c < a->ncands; c++)
        if (cli_check_conf(cmd, "--candidate", a->cands[c]) != 0)
            return CLI_USAGE;
    return 0;
}

/* ---- sublet frag ------------------------------------------------------------------------- */

int cli_frag(int argc, char **argv)
{
    fargs a;
    int pr = parse_args(argc, argv, "frag", cli_frag_usage, &a, 0);
    if (pr)
        return pr < 0 ? CLI_OK : pr;
    cli_input in;
    if (cli_input_open("sublet frag", a.path, &a.lo, 1, &in) != CLI_OK)
        return CLI_ERROR;
    sublet_trace_stream *ts = in.ts;
    sublet_replay_options o;
    int from_trace = 0;
    cli_frag_stream_options(ts, a.conf, a.device_memory, &o, &from_trace);
    uint64_t n = cli_input_rows(&in);
    if (a.at != SUBLET_REPLAY_ALL && a.at >= n) {
        fprintf(stderr, "sublet frag: --at %" PRIu64 ": the trace has %" PRIu64 " events (0..%" PRIu64
                ")\n", a.at, n, n ? n - 1 : 0);
        cli_input_close(&in);
        return CLI_USAGE;
    }
    sublet_view_options v;
    sublet_view_options_init(&v);
    char note[1200] = "", rerr[1024] = "";
    v.name = a.path;
    v.flags = from_trace ? SUBLET_VIEW_CONF_RECORDED : 0;
    v.at = a.at;
    v.map_width = a.width ? (unsigned)a.width : 64;
    v.top_pinning = a.top ? (size_t)a.top : 5;
    v.snapshot = in.snap;
    v.device = a.lo.pick_device ? a.lo.device : -1;
    v.note = note;
    v.note_cap = sizeof note;
    char *doc = NULL;
    sublet_status js = (a.json ? sublet_frag_json_stream : sublet_frag_text_stream)(
        ts, &o, &v, &doc, rerr, sizeof rerr);
    if (note[0])
        fprintf(stderr, "sublet frag: note: %s\n", note);
    if (js != SUBLET_OK)
        fprintf(stderr, "sublet frag: %s: %s\n", a.path, rerr[0] ? rerr : sublet_status_text(js));
    else
        fputs(doc, stdout);
    sublet_string_free(doc);
    cli_input_close(&in);
    return js == SUBLET_OK ? CLI_OK : CLI_ERROR;
}

/* ---- sublet diagnose ----------------------------------------------------------------------- */

int cli_diagnose(int argc, char **argv)
{
    fargs a;
    int pr = parse_args(argc, argv, "diagnose", cli_diagnose_usage, &a, 1);
    if (pr) {
        free(a.cands);
        return pr < 0 ? CLI_OK : pr;
    }
    char err[1600];
    cli_input in;
    if (cli_input_open("sublet diagnose", a.path, &a.lo, 1, &in) != CLI_OK) {
        free(a.cands);
        return CLI_ERROR;
    }
    sublet_replay_options o;
    int from_trace = 0;
    cli_frag_stream_options(in.ts, a.conf, a.device_memory, &o, &from_trace);
    sublet_frag_diagnose_options dopt = {.candidates = a.cands, .max_detailed = (size_t)a.detailed};
    sublet_view_options v;
    sublet_view_options_init(&v);
    v.name = a.path;
    char *doc = NULL;
    sublet_status st = (a.json ? sublet_diagnose_json_stream : sublet_diagnose_text_stream)(
        in.ts, &o, &dopt, &v, &doc, err, sizeof err);
    int rc = CLI_OK;
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet diagnose: %s: %s\n", a.path, err[0] ? err : sublet_status_text(st));
        rc = CLI_ERROR;
    } else {
        fputs(doc, stdout);
    }
    sublet_string_free(doc);
    cli_input_close(&in);
    free(a.cands);
    return rc;
}
