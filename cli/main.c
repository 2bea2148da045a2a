/* sublet — the command-line tool: subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
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

int main(int argc, char **argv)
{
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
        if (argc > 2 && strcmp(argv[2], "replay") == 0)
            cli_replay_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "convert") == 0)
            cli_convert_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "summary") == 0)
            cli_summary_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "frag") == 0)
            cli_frag_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "diagnose") == 0)
            cli_diagnose_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "report") == 0)
            cli_report_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "tune") == 0)
            cli_tune_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "nullgpu") == 0)
            cli_nullgpu_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "record") == 0)
            cli_record_usage(stdout);
        else if (argc > 2 && strcmp(argv[2], "fit") == 0)
            cli_fit_usage(stdout);
        else if (argc > 2) {
            fprintf(stderr, "sublet: no such command '%s'\n", argv[2]);
            usage(stderr);
            return CLI_USAGE;
        } else
            usage(stdout);
        return CLI_OK;
    }
    static const char *const with_conf[] = {"replay", "convert",  "summary", "mincap",
                                            "frag",   "diagnose", "report",  "tune"};
    for (size_t i = 0; i < sizeof with_conf / sizeof with_conf[0]; i++)
        if (strcmp(cmd, with_conf[i]) == 0) {
            int sub_argc = argc - 1;
            int rc = cli_take_pytorch_version(cmd, &sub_argc, argv + 1);
            if (rc != 0)
                return rc;
            argc = sub_argc + 1;
        }
    if (strcmp(cmd, "replay") == 0)
        return cli_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0)
        return cli_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "summary") == 0)
        return cli_summary(argc - 1, argv + 1);
    if (strcmp(cmd, "mincap") == 0)
        return cli_mincap(argc - 1, argv + 1);
    if (strcmp(cmd, "frag") == 0)
        return cli_frag(argc - 1, argv + 1);
    if (strcmp(cmd, "diagnose") == 0)
        return cli_diagnose(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return cli_report(argc - 1, argv + 1);
    if (strcmp(cmd, "tune") == 0)
        return cli_tune(argc - 1, argv + 1);
    if (strcmp(cmd, "nullgpu") == 0)
        return cli_nullgpu(argc - 1, argv + 1);
    if (strcmp(cmd, "record") == 0)
        return cli_record(argc - 1, argv + 1);
    if (strcmp(cmd, "fit") == 0)
        return cli_fit(argc - 1, argv + 1);
    fprintf(stderr, "sublet: unknown command '%s'\n", cmd);
    usage(stderr);
    return CLI_USAGE;
}
