/* sublet — `sublet nullgpu [options] -- COMMAND [ARGS...]`: run COMMAND
 * with the null device (plugins/nullgpu), a CUDA GPU that is not there:
 * the CUDA runtime, the driver's entry points and NVML answered for one
 * device whose memory is address space only.  PyTorch's own allocator, and
 * sublet's, run on it unchanged; kernels are accepted and not run.
 *
 * The command is exec'd with libsublet_nullgpu.so last in LD_PRELOAD (it
 * stands for libcudart.so.13; an interposer preloaded before it, such as
 * libsublet_preload.so, still comes first and reaches it), the folder of its other names (libcuda.so.1,
 * libnvidia-ml.so.1) first in LD_LIBRARY_PATH, and the device's settings in
 * SUBLET_NULLGPU_* variables.  The library is found next to this program
 * (a build folder), in ../lib or ../lib64 (an install), or at --lib. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "sublet/config.h"

#define NULLGPU_LIB "libsublet_nullgpu.so"

void cli_nullgpu_usage(FILE *out)
{
    fprintf(out,
            "usage: sublet nullgpu [options] -- COMMAND [ARGS...]\n"
            "Run COMMAND on the null device: a CUDA GPU that is not there.  CUDA programs\n"
            "and PyTorch see one device (an H100 80GB by default) whose memory is address\n"
            "space only; allocators, streams, events and graphs behave as on a GPU, kernels\n"
            "are accepted and not run, copies to the host read zeros.  A CUDA call it does\n"
            "not emulate fails and is named on stderr.\n"
            "  --memory SIZE       device memory (default 81559MiB, an H100 80GB HBM3)\n"
            "  --name NAME         device name (default \"NVIDIA H100 80GB HBM3\")\n"
            "  --cc M.m            compute capability (default 9.0)\n"
            "  --sms N             multiprocessors (default 132)\n"
            "  --event-polls N     queries an event answers \"not ready\" after each record\n"
            "                      (default 0: work completes at once)\n"
            "  --force             run even where a real CUDA driver gets loaded\n"
            "  --lib PATH          libsublet_nullgpu.so to use (default: next to sublet)\n");
}

/* The folder of this executable, with a trailing '/'. */
static int exe_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    char *slash;
    if (n <= 0 || (size_t)n >= cap - 1)
        return -1;
    out[n] = '\0';
    slash = strrchr(out, '/');
    if (!slash)
        return -1;
    slash[1] = '\0';
    return 0;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The library: --lib, else beside this program, in ../lib or ../lib64. */
static int find_lib(const char *given, char *lib, size_t cap)
{
    static const char *const rel[] = {"", "../lib/", "../lib64/"};
    char dir[PATH_MAX];
    if (given) {
        if (!realpath(given, lib) || !is_file(lib)) {
            fprintf(stderr, "sublet nullgpu: --lib %s: no such file\n", given);
            return -1;
        }
        return 0;
    }
    if (exe_dir(dir, sizeof dir) == 0)
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            char p[PATH_MAX + 64];
            snprintf(p, sizeof p, "%s%s%s", dir, rel[i], NULLGPU_LIB);
            if (is_file(p) && realpath(p, lib) && strlen(lib) < cap)
                return 0;
        }
    fprintf(stderr,
            "sublet nullgpu: %s is not next to this program, nor in ../lib: this build has no "
            "null device (it needs the CUDA toolkit's headers, cuda_runtime_api.h, at build time); "
            "give one with --lib PATH\n",
            NULLGPU_LIB);
    return -1;
}

/* Add `value` to the colon-separated variable `var`, before (first != 0)
 * or after what it holds. */
static int add_to(const char *var, const char *value, int first)
{
    const char *old = getenv(var);
    char *s;
    int rc;
    if (!old || !*old)
        return setenv(var, value, 1);
    if (asprintf(&s, "%s:%s", first ? value : old, first ? old : value) < 0)
        return -1;
    rc = setenv(var, s, 1);
    free(s);
    return rc;
}

static int need_value(int i, int argc, char **argv)
{
    if (i + 1 < argc)
        return 0;
    fprintf(stderr, "sublet nullgpu: %s needs a value\n", argv[i]);
    return -1;
}

int cli_nullgpu(int argc, char **argv)
{
    const char *lib_arg = NULL;
    char lib[PATH_MAX], dir[PATH_MAX + 16], *slash;
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_nullgpu_usage(stdout);
            return CLI_OK;
        }
        if (strcmp(a, "--force") == 0) {
            setenv("SUBLET_NULLGPU_FORCE", "1", 1);
            continue;
        }
        if (strcmp(a, "--memory") == 0 || strcmp(a, "--name") == 0 || strcmp(a, "--cc") == 0 ||
            strcmp(a, "--sms") == 0 || strcmp(a, "--event-polls") == 0 || strcmp(a, "--lib") == 0) {
            const char *v;
            if (need_value(i, argc, argv))
                return CLI_USAGE;
            v = argv[++i];
            if (strcmp(a, "--memory") == 0) {
                uint64_t n;
                if (sublet_parse_size(v, &n) != SUBLET_OK || n < (UINT64_C(2) << 20)) {
                    fprintf(stderr, "sublet nullgpu: --memory '%s' is not a size of at least 2MiB "
                                    "(e.g. 80GiB, 24000MiB)\n", v);
                    return CLI_USAGE;
                }
                setenv("SUBLET_NULLGPU_MEMORY", v, 1);
            } else if (strcmp(a, "--name") == 0) {
                if (!*v || strlen(v) > 255) {
                    fprintf(stderr, "sublet nullgpu: --name needs 1 to 255 characters\n");
                    return CLI_USAGE;
                }
                setenv("SUBLET_NULLGPU_NAME", v, 1);
            } else if (strcmp(a, "--cc") == 0) {
                int major, minor;
                char tail;
                if (sscanf(v, "%d.%d%c", &major, &minor, &tail) != 2 || major < 1 || minor < 0 || minor > 9) {
                    fprintf(stderr, "sublet nullgpu: --cc '%s' is not a compute capability (e.g. 9.0)\n", v);
                    return CLI_USAGE;
                }
                setenv("SUBLET_NULLGPU_CC", v, 1);
            } else if (strcmp(a, "--sms") == 0 || strcmp(a, "--event-polls") == 0) {
                char *end;
                long n = strtol(v, &end, 10);
                int sms = strcmp(a, "--sms") == 0;
                if (*end || !*v || n < (sms ? 1 : 0) || n > 100000) {
                    fprintf(stderr, "sublet nullgpu: %s '%s' is not a count%s\n", a, v, sms ? " of at least 1" : "");
                    return CLI_USAGE;
                }
                setenv(sms ? "SUBLET_NULLGPU_SMS" : "SUBLET_NULLGPU_EVENT_POLLS", v, 1);
            } else {
                lib_arg = v;
            }
            continue;
        }
        fprintf(stderr, "sublet nullgpu: unknown option '%s' (the command goes after --)\n", a);
        cli_nullgpu_usage(stderr);
        return CLI_USAGE;
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "sublet nullgpu: no command: sublet nullgpu [options] -- COMMAND [ARGS...]\n");
        return CLI_USAGE;
    }
    if (find_lib(lib_arg, lib, sizeof lib) != 0)
        return CLI_ERROR;
    snprintf(dir, sizeof dir, "%s", lib);
    slash = strrchr(dir, '/');
    snprintf(slash + 1, sizeof dir - (size_t)(slash + 1 - dir), "nullgpu");
    {
        char probe[PATH_MAX + 64];
        snprintf(probe, sizeof probe, "%s/libcuda.so.1", dir);
        if (!is_file(probe)) {
            fprintf(stderr, "sublet nullgpu: %s is missing (it is made with %s by the build)\n", probe, NULLGPU_LIB);
            return CLI_ERROR;
        }
    }
    if (add_to("LD_PRELOAD", lib, 0) != 0 || add_to("LD_LIBRARY_PATH", dir, 1) != 0) {
        fprintf(stderr, "sublet nullgpu: out of memory\n");
        return CLI_ERROR;
    }
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "sublet nullgpu: cannot run '%s': %s\n", argv[i + 1], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
