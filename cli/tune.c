/* sublet CLI — `sublet tune TRACE... [options]`: search the allocator settings
 * for the smallest device that runs the traces and the fewest device calls
 * (sublet_tune, sublet/tune.h; the workflow in docs/tune.md). */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "sublet/tune.h"

void cli_tune_usage(FILE *out)
{
    fputs("usage: sublet tune TRACE... [options]\n"
          "  Search PyTorch's allocator knobs (max_split_size_mb, max_non_split_rounding_mb,\n"
          "  roundup_power2_divisions, garbage_collection_threshold with a memory fraction,\n"
          "  expandable_segments) and sublet's policies for the settings that run the\n"
          "  traces on the smallest device (2 MiB steps), then with the fewest device calls\n"
          "  on yours.  Prints the best PYTORCH_CUDA_ALLOC_CONF (PyTorch's allocator) and\n"
          "  SUBLET_ALLOC_CONF strings with the evidence, beside the current settings.\n"
          "  Several TRACEs (ranks, batch shapes) get one answer that is safe for all.\n"
          "  TRACE is a PyTorch snapshot (pickle or JSON), an events CSV, an RMM log or a\n"
          "  Kineto trace, gzip'd or not.  A TRACE that streams (events CSV, event log,\n"
          "  RMM log, Kineto trace file) is copied once to a temporary binary file (64\n"
          "  bytes an event, on disk) and every replay reads it from there: memory follows\n"
          "  the live blocks; snapshots are loaded whole.  Each is replayed a few hundred\n"
          "  times: 10^6 events take ~25 CPU-seconds (docs/tune.md, \"Long traces\").\n"
          "options:\n"
          "  --device-memory SIZE  your device (cost is measured there), e.g. 80GiB, 24GB;\n"
          "                        default: the device the traces recorded, else 80GiB\n"
          "  --cost-model M        a FILE of key=value lines, or a key=value,... list, on top\n"
          "                        of the defaults (µs): malloc_us=35 malloc_us_per_gib=64\n"
          "                        free_us=35 retry_us=1000 reserve_us=10 release_us=10\n"
          "                        map_us=35 unmap_us=35 (per page); see docs/tune.md\n"
          "  --current CONF        the settings the run used (default: what the trace\n"
          "                        recorded, else PyTorch's defaults)\n"
          "  --band PCT            memory within PCT % of the best counts as best\n"
          "                        (default 0.5)\n"
          "  --prelude MODE        state before the recording: adopt (PyTorch's segments as\n"
          "                        recorded), allocate (live blocks allocated under each\n"
          "                        setting) or auto: adopt under the native policy without\n"
          "                        expandable segments, allocate otherwise (default auto)\n"
          "  --threads N           parallel replays (default: every online core)\n"
          "  --cost-cutoff F       stop a cost run once its cost passes F times the\n"
          "                        defaults' (the search then takes it last; the same\n"
          "                        answers); 0 or less: never (default 32; docs/tune.md)\n"
          "  --pytorch-version X   replay every candidate under PyTorch release X's rules\n"
          "                        and answer with strings X takes (2.6, ...; default the\n"
          "                        newest; docs/versions.md, docs/tune.md)\n"
          "  --no-warmup           skip the warm-up plan (the segments to reserve at start so\n"
          "                        that the run makes no device allocation: the `warmup`\n"
          "                        option of SUBLET_ALLOC_CONF)\n"
          "  --json                print one JSON object instead of the text report\n"
          "  -h, --help            this text\n",
          out);
}

/* The progress line (stderr on a terminal only): phase, events replayed,
 * candidates left, time left. */
static void progress(void *user, const sublet_tune_progress *p)
{
    (void)user;
    char left[32] = "?";
    if (p->seconds_left >= 0)
        snprintf(left, sizeof left, "%.0f s", p->seconds_left);
    fprintf(stderr, "\r\033[Ktuning: %s, %" PRIu64 " replays, %.1fM events, %zu candidates left, ~%s left",
            p->phase, p->replays, (double)p->events / 1e6, p->candidates_left, left);
    fflush(stderr);
}

/* Ctrl-C: the flag the search polls (a signal handler can only reach a
 * static); a second Ctrl-C ends the process at once (SA_RESETHAND). */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int cancel_poll(void *user)
{
    (void)user;
    return interrupted != 0;
}

static void catch_sigint(sublet_tune_options *o)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) == 0) {
        o->cancel = cancel_poll;
        o->cancel_user = NULL;
    }
}

/* ---- the command ------------------------------------------------------------------- */

static int read_cost_model(const char *prog, const char *arg, sublet_tune_cost_model *m)
{
    char err[512];
    uint8_t *buf = NULL;
    size_t len = 0;
    const char *text = arg;
    FILE *f = strchr(arg, '=') ? NULL : fopen(arg, "rb");
    if (f) {
        fclose(f);
        if (sublet_input_read(arg, &buf, &len, err, sizeof err) != SUBLET_OK) {
            fprintf(stderr, "%s: %s\n", prog, err);
            return -1;
        }
        char *t = realloc(buf, len + 1);
        if (!t) {
            free(buf);
            fprintf(stderr, "%s: out of memory\n", prog);
            return -1;
        }
        t[len] = '\0';
        buf = (uint8_t *)t;
        text = t;
    } else if (!strchr(arg, '=')) {
        fprintf(stderr, "%s: --cost-model: no such file, and not a key=value list: %s\n", prog,
                arg);
        return -1;
    }
    sublet_status st = sublet_tune_cost_model_parse(m, text, err, sizeof err);
    free(buf);
    if (st != SUBLET_OK) {
        const char *why = strncmp(err, "cost model: ", 12) == 0 ? err + 12 : err;
        fprintf(stderr, "%s: --cost-model '%s': %s\n", prog, arg, why);
        return -1;
    }
    return 0;
}

/* The search options `sublet tune` and `sublet report --tune` share: 1 when
 * argv[*i] was one (its value consumed), 0 when not, -CLI_USAGE or
 * -CLI_ERROR (the message printed, prefixed with prog). */
int cli_tune_option(const char *prog, int argc, char **argv, int *i, sublet_tune_options *o)
{
    int m = 0;
    const char *v;
    if (strcmp(argv[*i], "--no-warmup") == 0) {
        o->warmup = 0;
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--cost-model", &m)) || m) {
        if (!v) {
            fprintf(stderr, "%s: --cost-model needs a value\n", prog);
            return -CLI_USAGE;
        }
        return read_cost_model(prog, v, &o->cost) == 0 ? 1 : -CLI_ERROR;
    }
    if ((v = cli_opt_value(argc, argv, i, "--band", &m)) || m) {
        char *end = NULL;
        double b = v ? strtod(v, &end) : -1;
        if (!v || end == v || *end || !(b > 0) || b >= 100) {
            fprintf(stderr, "%s: --band needs a percentage in (0, 100)\n", prog);
            return -CLI_USAGE;
        }
        o->band = b / 100.0;
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--prelude", &m)) || m) {
        if (v && strcmp(v, "auto") == 0)
            o->prelude = SUBLET_PRELUDE_AUTO;
        else if (v && strcmp(v, "adopt") == 0)
            o->prelude = SUBLET_PRELUDE_ADOPT;
        else if (v && strcmp(v, "allocate") == 0)
            o->prelude = SUBLET_PRELUDE_ALLOCATE;
        else {
            fprintf(stderr, "%s: --prelude needs auto, adopt or allocate\n", prog);
            return -CLI_USAGE;
        }
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--cost-cutoff", &m)) || m) {
        char *end = NULL;
        double f = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || f != f) {
            fprintf(stderr, "%s: --cost-cutoff needs a number (0 or less: never)\n", prog);
            return -CLI_USAGE;
        }
        o->cost_cutoff = f > 0 ? f : -1;
        return 1;
    }
    if ((v = cli_opt_value(argc, argv, i, "--threads", &m)) || m) {
        char *end = NULL;
        long t = v ? strtol(v, &end, 10) : 0;
        if (!v || end == v || *end || t < 1 || t > 64) {
            fprintf(stderr, "%s: --threads needs a number from 1 to 64\n", prog);
            return -CLI_USAGE;
        }
        o->threads = (unsigned)t;
        return 1;
    }
    return 0;
}

/* Open the traces (streamed where the format streams: copied once to a
 * temporary binary file, read through readers; else loaded whole), run the
 * tuning view and print it. */
static int run_tune(char **paths, size_t n, const char *current, int json,
                    sublet_tune_options *o)
{
    int rc = CLI_OK;
    cli_input *in = calloc(n, sizeof *in);
    sublet_trace_stream **ts = calloc(n, sizeof *ts);
    const char **cur = calloc(n, sizeof *cur);
    if (!in || !ts || !cur) {
        free(in);
        free(ts);
        free(cur);
        return CLI_ERROR;
    }
    size_t opened = 0;
    for (size_t i = 0; i < n && rc == CLI_OK; i++) {
        rc = cli_input_open("sublet tune", paths[i], NULL, 1, &in[i]);
        if (rc == CLI_OK) {
            opened++;
            ts[i] = in[i].ts;
        }
        cur[i] = current;
    }
    if (rc == CLI_OK) {
        o->current = cur;
        if (!json && isatty(STDERR_FILENO)) {
            o->progress_to = progress;
            o->progress_user = NULL;
        }
        if (!json)
            catch_sigint(o);
        char *doc = NULL, err[1024] = "";
        sublet_status st = (json ? sublet_tune_json_streams : sublet_tune_text_streams)(
            ts, (const char *const *)paths, n, o, &doc, err, sizeof err);
        if (o->progress_to)
            fprintf(stderr, "\r\033[K");
        if (st == SUBLET_ERR_CANCELLED && doc) { /* the best found so far */
            fputs(doc, stdout);
            rc = CLI_ERROR;
        } else if (st != SUBLET_OK) {
            fprintf(stderr, "sublet tune: %s\n", err[0] ? err : sublet_status_text(st));
            rc = CLI_ERROR;
        } else {
            fputs(doc, stdout);
        }
        sublet_string_free(doc);
    }
    for (size_t i = 0; i < opened; i++)
        cli_input_close(&in[i]);
    free(in);
    free(ts);
    free(cur);
    return rc;
}

int cli_tune(int argc, char **argv)
{
    sublet_tune_options o;
    sublet_tune_options_init(&o);
    o.pytorch_version = cli_pytorch_version();
    int json = 0;
    const char *current = NULL;
    char **paths = calloc((size_t)argc, sizeof *paths);
    if (!paths)
        return CLI_ERROR;
    size_t n = 0;
    int rc = CLI_OK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m = 0;
        const char *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_tune_usage(stdout);
            free(paths);
            return CLI_OK;
        }
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        char why[160];
        int src = cli_source_option(argc, argv, &i, NULL, &o.device_memory, NULL, why, sizeof why);
        if (src < 0) {
            fprintf(stderr, "sublet tune: %s\n", why);
            rc = CLI_USAGE;
            break;
        }
        if (src > 0)
            continue;
        int tr = cli_tune_option("sublet tune", argc, argv, &i, &o);
        if (tr < 0) {
            rc = -tr;
            break;
        }
        if (tr > 0)
            continue;
        if ((v = cli_opt_value(argc, argv, &i, "--current", &m)) || m) {
            if (!v) {
                fprintf(stderr, "sublet tune: --current needs a settings string\n");
                rc = CLI_USAGE;
                break;
            }
            sublet_settings s;
            sublet_settings_default(&s);
            char err[256];
            if (sublet_settings_parse(&s, v, err, sizeof err) != SUBLET_OK) {
                fprintf(stderr, "sublet tune: --current: %s\n", err);
                rc = CLI_USAGE;
                break;
            }
            current = v;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "sublet tune: unknown option '%s'\n", a);
            rc = CLI_USAGE;
            break;
        }
        paths[n++] = argv[i];
    }
    if (rc == CLI_OK && n == 0) {
        fprintf(stderr, "sublet tune: no trace given\n");
        rc = CLI_USAGE;
    }
    if (rc == CLI_OK && n > 64) {
        fprintf(stderr, "sublet tune: at most 64 traces\n");
        rc = CLI_USAGE;
    }
    if (rc != CLI_OK) {
        if (rc == CLI_USAGE)
            cli_tune_usage(stderr);
        free(paths);
        return rc;
    }
    rc = run_tune(paths, n, current, json, &o);
    free(paths);
    return rc;
}
