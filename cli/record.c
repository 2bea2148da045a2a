/* sublet CLI — `sublet record [options] -o FILE -- COMMAND [ARGS...]`: run a
 * PyTorch program and write its allocation trace, then check it: sublet's
 * replay of FILE must give PyTorch's own peaks, segment counts and OOMs.
 *
 * The program runs on the GPU when a real driver and device are found, else
 * (and with --no-gpu) on the null device.  The recording is PyTorch's own
 * (torch.cuda.memory._record_memory_history from a startup hook,
 * record_run.c); FILE is its snapshot written by the library in the format
 * FILE's extension names, and FILE.stats.json keeps PyTorch's figures. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/atomic_write.h"
#include "sublet/config.h"
#include "sublet/views.h"

void cli_record_usage(FILE *out)
{
    fputs("usage: sublet record [options] -o FILE -- COMMAND [ARGS...]\n"
          "  Run a PyTorch program and write its allocation trace to FILE, then check\n"
          "  it: sublet replays FILE (the device's memory, the settings and the PyTorch\n"
          "  release recorded) and its peak allocated, peak reserved, segments and OOMs\n"
          "  must equal PyTorch's own (torch.cuda.memory_stats() at exit).  The program\n"
          "  runs on the GPU when a CUDA driver and device are found, else on the null\n"
          "  device (`sublet nullgpu`).  Every Python process of COMMAND gets a startup\n"
          "  hook; the first one records (torch.cuda.memory._record_memory_history from\n"
          "  its start), the others (subprocesses, DataLoader workers) do not.\n"
          "  FILE's extension picks the format:\n"
          "    .pickle, .pkl   PyTorch's memory snapshot (pytorch.org/memory_viz opens it)\n"
          "    .json           the same snapshot as JSON\n"
          "    .csv            an events CSV (no stacks)\n"
          "  each optionally followed by .gz, or\n"
          "    .slog           sublet's continuous event log (docs/replay.md): the\n"
          "                    recording replayed as recorded, every event logged\n"
          "  PyTorch's figures go to FILE.stats.json.\n"
          "options:\n"
          "  -o, --output FILE   the trace to write (required)\n"
          "  --no-gpu            run on the null device even where a GPU is found\n"
          "  --memory SIZE       the null device's memory (default 81559MiB, an H100)\n"
          "  --name NAME         the null device's name\n"
          "  --conf SETTINGS     PYTORCH_ALLOC_CONF (and PYTORCH_CUDA_ALLOC_CONF) for the\n"
          "                      program (default: as inherited)\n"
          "  --max-entries N     the history's ring buffer (default 1000000); a run that\n"
          "                      fills it is refused: give a larger N\n"
          "  --stacks MODE       python: record Python stacks with each event, or none\n"
          "                      (default python)\n"
          "  -h, --help          this text\n"
          "exit status: 0 the recording replays as PyTorch ran (an OOM of the program\n"
          "  included), 3 sublet's replay differs (FILE is kept), 1 no recording (the\n"
          "  ring buffer overflowed, the program never used CUDA, an error), 2 usage;\n"
          "  a program that fails for another reason than an OOM: its own exit status\n"
          "  (FILE written as far as it went).\n",
          out);
}

typedef struct rec_args {
    cli_rec_setup s;
    const char *out;
    int no_gpu;
    char **cmd;
} rec_args;

static int usage_error(const char *fmt, const char *arg)
{
    fputs("sublet record: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    return CLI_USAGE;
}

static int parse_args(int argc, char **argv, rec_args *a)
{
    int i;
    memset(a, 0, sizeof *a);
    a->s.prog = "record";
    a->s.max_entries = 1000000;
    a->s.stacks = "python";
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *v, *arg = argv[i];
        int m = 0;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_record_usage(stdout);
            return -1;
        }
        if (strcmp(arg, "--no-gpu") == 0) {
            a->no_gpu = 1;
            continue;
        }
        if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", arg);
            a->out = argv[++i];
            continue;
        }
        if ((v = cli_opt_value(argc, argv, &i, "--memory", &m)) || m) {
            uint64_t n;
            if (!v || sublet_parse_size(v, &n) != SUBLET_OK || n < (UINT64_C(2) << 20))
                return usage_error("--memory '%s' is not a size of at least 2MiB (e.g. 24GiB)", v ? v : "");
            a->s.memory = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--name", &m)) || m) {
            if (!v || !*v || strlen(v) > 255)
                return usage_error("%s", "--name needs 1 to 255 characters");
            a->s.name = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--conf", &m)) || m) {
            if (!v)
                return usage_error("%s", "--conf needs a value");
            a->s.conf = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--max-entries", &m)) || m) {
            char *end;
            unsigned long long n = v ? strtoull(v, &end, 10) : 0;
            if (!v || !*v || *end || n < 1 || n > (1ull << 31))
                return usage_error("--max-entries '%s' is not a count from 1 to 2^31", v ? v : "");
            a->s.max_entries = (size_t)n;
        } else if ((v = cli_opt_value(argc, argv, &i, "--stacks", &m)) || m) {
            if (!v || (strcmp(v, "none") != 0 && strcmp(v, "python") != 0))
                return usage_error("--stacks '%s': none or python", v ? v : "");
            a->s.stacks = v;
        } else {
            usage_error("unknown option '%s' (the command goes after --)", arg);
            cli_record_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (i + 1 >= argc)
        return usage_error("%s", "no command: sublet record [options] -o FILE -- COMMAND [ARGS...]");
    if (!a->out)
        return usage_error("%s", "-o FILE is required");
    if (!cli_record_format_ok(a->out))
        return usage_error("-o %s: the name must end in .pickle, .pkl, .json or .csv (optionally .gz), or .slog",
                           a->out);
    a->cmd = argv + i + 1;
    return 0;
}

static void print_size(FILE *out, int64_t v)
{
    char buf[64];
    if (v < 0) {
        fputs("?", out);
        return;
    }
    sublet_format_size((uint64_t)v, buf, sizeof buf);
    fprintf(out, "%s", buf);
}

/* Replay FILE as recorded and compare; prints the summary.  CLI_OK (equal),
 * CLI_RECORD_MISMATCH, or CLI_ERROR. */
static int check(const rec_args *a, const cli_rec_stats *st, uint64_t *rows)
{
    static const int is_bytes[CLI_REC_NSTATS] = {1, 1, 0, 0, 0};
    static const char *const label[CLI_REC_NSTATS] = {
        "peak allocated", "peak reserved", "segments at peak", "segments allocated", "OOMs"};
    char conf[1200], err[1024];
    sublet_trace *t = NULL;
    sublet_replay_options o;
    int64_t ours[CLI_REC_NSTATS];
    uint64_t events = 0;
    int differ = 0;
    if (cli_load_input(a->out, NULL, &t, NULL, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet record: cannot read back %s: %s\n", a->out, err);
        return CLI_ERROR;
    }
    cli_record_conf(st, NULL, NULL, conf, sizeof conf);
    cli_record_replay_options(st, conf, a->s.null_device, 0, &o);
    if (cli_record_replay_stats(t, &o, ours, &events, err, sizeof err) != CLI_OK) {
        fprintf(stderr, "sublet record: the replay of %s under '%s' failed: %s\n", a->out, conf, err);
        cli_trace_free(t);
        return CLI_ERROR;
    }
    *rows = sublet_trace_count(t) - sublet_trace_prelude_count(t);
    printf("events:             %" PRIu64 "%s\n", *rows,
           sublet_trace_prelude_count(t) ? " (and a prelude: the recording started late)" : "");
    cli_trace_free(t);
    printf("replayed under:     %s\n", *conf ? conf : "(PyTorch's defaults)");
    printf("%-20s%-18s%-18s\n", "", "PyTorch", "sublet's replay");
    for (int k = 0; k < CLI_REC_NSTATS; k++) {
        printf("%-20s", label[k]);
        if (is_bytes[k]) {
            char l[64], r[64];
            if (st->torch[k] >= 0)
                sublet_format_size((uint64_t)st->torch[k], l, sizeof l);
            else
                strcpy(l, "?");
            if (ours[k] >= 0)
                sublet_format_size((uint64_t)ours[k], r, sizeof r);
            else
                strcpy(r, "?");
            printf("%-18s%-18s", l, r);
        } else {
            printf("%-18" PRId64 "%-18" PRId64, st->torch[k], ours[k]);
        }
        if (st->torch[k] != ours[k]) {
            differ++;
            printf("DIFFERS (%+" PRId64 ")", ours[k] - st->torch[k]);
        }
        putchar('\n');
    }
    if (differ) {
        printf("check:              %d figure%s differ%s: %s kept (sublet replay %s --replay-ooms "
               "--conf '%s' --device-memory %" PRIu64 "%s shows the replay)\n",
               differ, differ == 1 ? "" : "s", differ == 1 ? "s" : "", a->out, a->out, conf,
               o.device_memory, a->s.null_device ? " --device-base 0x200000000000" : "");
        return CLI_RECORD_MISMATCH;
    }
    printf("check:              equal\n");
    return CLI_OK;
}

/* After the program: its outcome, FILE and the sidecar written, the check. */
static int finish(const rec_args *a, const char *dir, int code)
{
    char snap[PATH_MAX + 32], stats[PATH_MAX + 32], side[PATH_MAX + 32], err[512];
    cli_rec_stats st;
    uint8_t *buf = NULL;
    size_t n = 0;
    uint64_t rows = 0;
    int oom, rc;
    snprintf(snap, sizeof snap, "%s/snapshot.pickle", dir);
    snprintf(stats, sizeof stats, "%s/stats.json", dir);
    snprintf(side, sizeof side, "%s/failed", dir);
    if (sublet_input_read(side, &buf, &n, err, sizeof err) == SUBLET_OK) {
        fprintf(stderr, "sublet record: the recording could not start in the program (exit status "
                        "%d): %.*s", code, (int)n, (const char *)buf);
        free(buf);
        return CLI_ERROR;
    }
    if (cli_record_read_stats("record", stats, &st) != CLI_OK) {
        fprintf(stderr, "sublet record: the program (exit status %d) left no recording: it never "
                        "started Python with the hook (python -I and -E skip PYTHONPATH), never "
                        "imported torch, or was killed (or left by os._exit) before its exit\n", code);
        return code ? code : CLI_ERROR;
    }
    oom = strcmp(st.exception, "OutOfMemoryError") == 0 || (code != 0 && !*st.exception && st.torch[4] > 0);
    printf("program:            exit status %d%s%s%s\n", code,
           oom ? " (torch.OutOfMemoryError)" : *st.exception ? " (" : "", oom ? "" : st.exception,
           !oom && *st.exception ? ")" : "");
    printf("device:             %s, ", st.device_name);
    print_size(stdout, (int64_t)st.total_memory);
    printf("%s; torch %s\n", a->s.null_device ? " (the null device)" : "", st.torch_version);
    if (st.max_entries && st.trace_entries >= st.max_entries) {
        fprintf(stderr, "sublet record: the history's ring buffer overflowed (%" PRIu64 " entries): "
                        "the first events are lost; record again with a larger --max-entries\n",
                st.max_entries);
        return CLI_ERROR;
    }
    if (cli_record_write("record", snap, a->out, &st, a->s.null_device) != CLI_OK)
        return CLI_ERROR;
    snprintf(side, sizeof side, "%s.stats.json", a->out);
    if (sublet_input_read(stats, &buf, &n, err, sizeof err) != SUBLET_OK ||
        sublet_atomic_write(side, buf, n, err, sizeof err) != SUBLET_OK) {
        fprintf(stderr, "sublet record: cannot write %s: %s\n", side, err);
        free(buf);
        return CLI_ERROR;
    }
    free(buf);
    printf("written:            %s (and %s)\n", a->out, side);
    rc = check(a, &st, &rows);
    if (code != 0 && !oom) {
        fprintf(stderr, "sublet record: the program failed (exit status %d%s%s): %s holds what it "
                        "recorded until then\n", code, *st.exception ? ", " : "", st.exception, a->out);
        return code;
    }
    return rc;
}

int cli_record(int argc, char **argv)
{
    rec_args a;
    char dir[PATH_MAX];
    int rc = parse_args(argc, argv, &a), code = 0;
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    a.s.null_device = a.no_gpu || !cli_record_have_gpu();
    if ((!a.s.null_device) && (a.s.memory || a.s.name))
        fprintf(stderr, "sublet record: a GPU is found: --memory and --name (the null device's) are "
                        "ignored; --no-gpu runs on the null device\n");
    if (cli_record_env(&a.s) != CLI_OK || cli_record_workdir("record", dir, sizeof dir) != CLI_OK)
        return CLI_ERROR;
    rc = cli_record_run(&a.s, dir, a.cmd, NULL, &code);
    if (rc == CLI_OK)
        rc = finish(&a, dir, code);
    cli_record_rmdir(dir);
    return rc;
}
