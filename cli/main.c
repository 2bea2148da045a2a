/* sublet — the command-line tool: subcommand dispatch. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/atomic_write.h" /* sublet_atomic_write_fail_after */
#include "sublet/sublet.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sublet COMMAND [options]\n"
            "commands:\n"
            "  replay TRACE [options]     replay a recorded trace through the engine\n"
            "  convert IN OUT [options]   convert a trace or snapshot to a snapshot pickle,\n"
            "                             snapshot JSON or events CSV\n"
            "  summary SNAPSHOT [--json]  memory_summary() and memory_stats() of a snapshot\n"
            "  mincap TRACE [options]     smallest simulated device that runs the trace\n"
            "  frag FILE [options]        fragmentation at any event: metrics, free blocks,\n"
            "                             pinning segments, segment map\n"
            "  diagnose FILE [options]    explain every OOM and the settings that avoid it\n"
            "  report FILE -o OUT.html    one self-contained HTML page: memory and\n"
            "                             fragmentation over time, segment maps\n"
            "  tune TRACE... [options]    the allocator settings that need the smallest\n"
            "                             device and the fewest device calls\n"
            "  nullgpu [opts] -- COMMAND  run a CUDA program or PyTorch on the null device:\n"
            "                             a GPU that is not there (no GPU needed)\n"
            "  record -o FILE -- COMMAND  run a PyTorch program and write its trace, checked\n"
            "                             against PyTorch's own figures\n"
            "  fit [opts] -- COMMAND {n}  the largest {n} that runs without an OOM on a device,\n"
            "                             now and under `sublet tune`'s settings\n"
            "  help [COMMAND]             this text, or a command's options\n"
            "  --version                  print the version\n"
            "Every command that takes --conf, and tune, also take --pytorch-version X: follow\n"
            "PyTorch release X's rules where they changed (2.6, 2.7, ...; default the\n"
            "newest), the setting pytorch_version:X (docs/versions.md).\n\n");
    cli_replay_usage(out);
    fputc('\n', out);
    cli_convert_usage(out);
    fputc('\n', out);
    cli_summary_usage(out);
}

/* The commands: name, entry point, help text, and whether it takes
 * --pytorch-version X (read here, before the command's own options). */
typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *out);
    bool takes_version;
} command;

static const command commands[] = {
    {"replay", cli_replay, cli_replay_usage, true},     {"convert", cli_convert, cli_convert_usage, true},
    {"summary", cli_summary, cli_summary_usage, true},  {"mincap", cli_mincap, cli_mincap_usage, true},
    {"frag", cli_frag, cli_frag_usage, true},           {"diagnose", cli_diagnose, cli_diagnose_usage, true},
    {"report", cli_report, cli_report_usage, true},     {"tune", cli_tune, cli_tune_usage, true},
    {"nullgpu", cli_nullgpu, cli_nullgpu_usage, false}, {"record", cli_record, cli_record_usage, false},
    {"fit", cli_fit, cli_fit_usage, false},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

/* The test hook of every file the CLI writes (formats/atomic_write.h): its
 * shell tests simulate a full disk with SUBLET_TEST_FAIL_WRITE_AFTER=N. */
static void test_hooks(void)
{
    const char *e = getenv("SUBLET_TEST_FAIL_WRITE_AFTER");
    if (!e || !*e)
        return;
    char *end;
    errno = 0;
    long long v = strtoll(e, &end, 10);
    if (!errno && !*end && v >= 0)
        sublet_atomic_write_fail_after(v);
}

int main(int argc, char **argv)
{
    test_hooks();
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("sublet %s\n", sublet_version());
        return CLI_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc <= 2) {
            usage(stdout);
            return CLI_OK;
        }
        const command *c = find_command(argv[2]);
        if (c == NULL) {
            fprintf(stderr, "sublet: no such command '%s'\n", argv[2]);
            usage(stderr);
            return CLI_USAGE;
        }
        c->usage(stdout);
        return CLI_OK;
    }
    const command *c = find_command(cmd);
    if (c != NULL) {
        if (c->takes_version) {
            int sub_argc = argc - 1;
            int rc = cli_take_pytorch_version(cmd, &sub_argc, argv + 1);
            if (rc != 0)
                return rc;
            argc = sub_argc + 1;
        }
        return c->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "sublet: unknown command '%s'\n", cmd);
    usage(stderr);
    return CLI_USAGE;
}
