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
 * (a build folder, or the Python package's _bin/), in ../lib or ../lib64
 * (an install), or at --lib.  Its other names must be links to the very
 * same file (a copy would load a second device): the folder nullgpu/ beside
 * it when its links lead there (the build and `cmake --install` make it),
 * else one this command makes under $XDG_CACHE_HOME/sublet (a wheel keeps no
 * links). */
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
            "  --lib PATH          libsublet_nullgpu.so to use (default: next to sublet)\n"
            "  -h, --help          this text\n");
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

/* 1 when the file at `path` begins as an ELF object does. */
static int is_elf(const char *path)
{
    unsigned char m[4] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(m, 1, sizeof m, f) : 0;
    if (f)
        fclose(f);
    return n == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
}

/* The library: --lib, else beside this program, in ../lib or ../lib64. */
static int find_lib(const char *prog, const char *given, char *lib, size_t cap)
{
    static const char *const rel[] = {"", "../lib/", "../lib64/"};
    char dir[PATH_MAX];
    if (given) {
        if (!realpath(given, lib) || !is_file(lib)) {
            fprintf(stderr, "sublet %s: --lib %s: no such file\n", prog, given);
            return -1;
        }
        if (!is_elf(lib)) { /* the loader would ignore it, and the program run without the null device */
            fprintf(stderr, "sublet %s: --lib %s: not a shared library (no ELF header): give the "
                            "libsublet_nullgpu.so of a sublet build\n", prog, given);
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
            "sublet %s: %s is not next to this program, nor in ../lib: this build has no "
            "null device (it needs the CUDA toolkit's headers, cuda_runtime_api.h, at build time); "
            "give one with --lib PATH\n",
            prog, NULLGPU_LIB);
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

/* 1 when `link` is a name of the file `lib` is (same device and inode). */
static int same_file(const char *link, const struct stat *lib)
{
    struct stat st;
    return stat(link, &st) == 0 && st.st_dev == lib->st_dev && st.st_ino == lib->st_ino;
}

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* The folder whose libcuda.so.1 and libnvidia-ml.so.1 are names of `lib`
 * (dir holds PATH_MAX bytes). */
static int links_dir(const char *lib, char *dir)
{
    static const char *const names[] = {"libcuda.so.1", "libnvidia-ml.so.1"};
    struct stat st;
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    unsigned long long dev, ino;
    char path[PATH_MAX];
    int ok = 1, n;
    if (stat(lib, &st) != 0)
        return -1;
    dev = (unsigned long long)st.st_dev;
    ino = (unsigned long long)st.st_ino;
    n = snprintf(dir, PATH_MAX, "%.*s/nullgpu", (int)(strrchr(lib, '/') - lib), lib);
    for (size_t k = 0; k < 2 && n > 0 && n < PATH_MAX; k++) {
        int m = snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        ok &= m > 0 && m < PATH_MAX && same_file(path, &st);
    }
    if (ok && n > 0 && n < PATH_MAX)
        return 0;
    if (cache && *cache)
        n = snprintf(dir, PATH_MAX, "%s/sublet/nullgpu/%llx-%llx", cache, dev, ino);
    else if (home && *home)
        n = snprintf(dir, PATH_MAX, "%s/.cache/sublet/nullgpu/%llx-%llx", home, dev, ino);
    else
        n = snprintf(dir, PATH_MAX, "/tmp/sublet-nullgpu-%ld/%llx-%llx", (long)getuid(), dev, ino);
    if (n <= 0 || n >= PATH_MAX - 32 || mkdirs(dir) != 0)
        return -1;
    for (size_t k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%.*s/%s", PATH_MAX - 32, dir, names[k]);
        if (same_file(path, &st))
            continue;
        (void)unlink(path);
        if (symlink(lib, path) != 0 && !same_file(path, &st))
            return -1;
    }
    return 0;
}

int cli_nullgpu_prepare(const char *prog, const char *lib_arg)
{
    char lib[PATH_MAX], dir[PATH_MAX];
    if (find_lib(prog, lib_arg, lib, sizeof lib) != 0)
        return CLI_ERROR;
    if (links_dir(lib, dir) != 0) {
        fprintf(stderr, "sublet %s: cannot make the folder of the null device's other names "
                        "(libcuda.so.1, libnvidia-ml.so.1) at %s: %s\n", prog, dir, strerror(errno));
        return CLI_ERROR;
    }
    if (add_to("LD_PRELOAD", lib, 0) != 0 || add_to("LD_LIBRARY_PATH", dir, 1) != 0) {
        fprintf(stderr, "sublet %s: out of memory\n", prog);
        return CLI_ERROR;
    }
    return CLI_OK;
}

static int need_value(int i, int argc, char **argv)
{
    if (i + 1 < argc && strcmp(argv[i + 1], "--") != 0)
        return 0;
    fprintf(stderr, "sublet nullgpu: %s needs a value%s\n", argv[i],
            i + 1 < argc ? " before '--' (the command follows it)" : "");
    return -1;
}

int cli_nullgpu(int argc, char **argv)
{
    const char *lib_arg = NULL;
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
    if (cli_nullgpu_prepare("nullgpu", lib_arg) != CLI_OK)
        return CLI_ERROR;
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "sublet nullgpu: cannot run '%s': %s\n", argv[i + 1], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
