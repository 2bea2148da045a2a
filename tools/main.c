/* sublet — the command-line tool. */
#include <stdio.h>
#include <string.h>

#include "sublet/sublet.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("sublet %s\n", sublet_version());
        return 0;
    }
    fprintf(stderr, "usage: sublet replay TRACE [options]\n");
    return 2;
}
