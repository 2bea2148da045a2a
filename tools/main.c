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
            "  replay TRACE.events.csv [options]  replay a recorded trace through the engine\n"
            "  help [COMMAND]                     this text, or a command's options\n"
            "  --version                          print the version\n\n");
    cli_replay_usage(out);
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
        else if (argc > 2) {
            fprintf(stderr, "sublet: no such command '%s'\n", argv[2]);
            usage(stderr);
            return CLI_USAGE;
        } else
            usage(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "replay") == 0)
        return cli_replay(argc - 1, argv + 1);
    fprintf(stderr, "sublet: unknown command '%s'\n", cmd);
    usage(stderr);
    return CLI_USAGE;
}
