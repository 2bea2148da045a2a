/* sublet CLI — running a PyTorch program under the recording hook, shared by
 * `sublet record` and `sublet fit`.
 *
 * The hook (cli/record_hook.py, embedded at build time) is written as
 * sitecustomize.py into $XDG_CACHE_HOME/sublet/record/ (else
 * ~/.cache/sublet/record/, else /tmp/sublet-record-UID/), a folder put first
 * on the child's PYTHONPATH.  The child gets SUBLET_RECORD_DIR (a fresh work
 * folder: the hook writes snapshot.pickle and stats.json there, the claim
 * file keeps every other Python process out), SUBLET_RECORD_MAX_ENTRIES and
 * SUBLET_RECORD_STACKS; on the null device also the SUBLET_NULLGPU_* settings
 * and the preload (cli_nullgpu_prepare).  Nothing here parses a trace: the
 * snapshot is read and written by the library. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "formats/atomic_write.h"
#include "formats/json_codec.h"
#include "record_assets.h"
#include "base/errmsg.h"
#include "sublet/backend_cuda.h"
#include "sublet/log.h"
#include "sublet/views.h"

int cli_record_have_gpu(void)
{
    int n = 0;
    char err[256];
    if (!sublet_cuda_built())
        return 0;
    return sublet_cuda_device_count(&n, err, sizeof err) == SUBLET_OK && n > 0;
}

static int make_dirs(char *path)
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

/* Write the hook into its folder (unless it is there already, unchanged). */
static int write_hook(const char *prog, char *dir, size_t cap)
{
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char path[PATH_MAX + 32], err[512];
    uint8_t *old = NULL;
    size_t n = 0;
    int k;
    if (cache && *cache)
        k = snprintf(dir, cap, "%s/sublet/record", cache);
    else if (home && *home)
        k = snprintf(dir, cap, "%s/.cache/sublet/record", home);
    else
        k = snprintf(dir, cap, "/tmp/sublet-record-%ld", (long)getuid());
    if (k <= 0 || (size_t)k >= cap || make_dirs(dir) != 0) {
        fprintf(stderr, "sublet %s: cannot make the hook's folder %s: %s\n", prog, dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/sitecustomize.py", dir);
    if (sublet_input_read(path, &old, &n, err, sizeof err) == SUBLET_OK && n == sl_record_record_hook_py_len &&
        memcmp(old, sl_record_record_hook_py, n) == 0) {
        free(old);
        return 0;
    }
    free(old);
    if (sublet_atomic_write(path, sl_record_record_hook_py, sl_record_record_hook_py_len, err, sizeof err) !=
        SUBLET_OK) {
        fprintf(stderr, "sublet %s: cannot write the hook: %s\n", prog, err);
        return -1;
    }
    return 0;
}

static int prepend(const char *var, const char *value)
{
    const char *old = getenv(var);
    char *s;
    int rc;
    if (!old || !*old)
        return setenv(var, value, 1);
    if (asprintf(&s, "%s:%s", value, old) < 0)
        return -1;
    rc = setenv(var, s, 1);
    free(s);
    return rc;
}

int cli_record_env(const cli_rec_setup *s)
{
    char dir[PATH_MAX], num[32];
    if (write_hook(s->prog, dir, sizeof dir) != 0)
        return CLI_ERROR;
    snprintf(num, sizeof num, "%zu", s->max_entries);
    if (prepend("PYTHONPATH", dir) != 0 || setenv("SUBLET_RECORD_MAX_ENTRIES", num, 1) != 0 ||
        setenv("SUBLET_RECORD_STACKS", s->stacks, 1) != 0)
        return CLI_ERROR;
    /* PyTorch 2.9 and later read PYTORCH_ALLOC_CONF first, older ones
     * PYTORCH_CUDA_ALLOC_CONF only: both, the same */
    if (s->conf && (setenv("PYTORCH_ALLOC_CONF", s->conf, 1) != 0 ||
                    setenv("PYTORCH_CUDA_ALLOC_CONF", s->conf, 1) != 0))
        return CLI_ERROR;
    if (!s->null_device)
        return CLI_OK;
    if (s->name && setenv("SUBLET_NULLGPU_NAME", s->name, 1) != 0)
        return CLI_ERROR;
    return cli_nullgpu_prepare(s->prog, NULL);
}

int cli_record_run(const cli_rec_setup *s, const char *dir, char *const *cmd, const char *log,
                   int *code)
{
    pid_t pid;
    int status;
    if (setenv("SUBLET_RECORD_DIR", dir, 1) != 0 ||
        (s->null_device && s->memory && setenv("SUBLET_NULLGPU_MEMORY", s->memory, 1) != 0))
        return CLI_ERROR;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "sublet %s: fork: %s\n", s->prog, strerror(errno));
        return CLI_ERROR;
    }
    if (pid == 0) {
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                _exit(126);
            close(fd);
        }
        execvp(cmd[0], cmd);
        fprintf(stderr, "sublet %s: cannot run '%s': %s\n", s->prog, cmd[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "sublet %s: waitpid: %s\n", s->prog, strerror(errno));
            return CLI_ERROR;
        }
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return CLI_OK;
}

static int64_t get_int(const pyval *d, const char *key, int64_t dflt)
{
    int64_t v;
    double f;
    const pyval *x = pv_dict_get(d, key);
    if (x && pv_as_int(x, &v))
        return v;
    if (x && pv_as_double(x, &f))
        return (int64_t)f;
    return dflt;
}

static void get_str(const pyval *d, const char *key, char *out, size_t cap)
{
    size_t n = 0;
    const char *s = pv_str(pv_dict_get(d, key), &n);
    if (!s)
        s = "", n = 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

int cli_record_read_stats(const char *prog, const char *path, cli_rec_stats *st)
{
    static const char *const keys[CLI_REC_NSTATS] = {
        "allocated_bytes.all.peak", "reserved_bytes.all.peak", "segment.all.peak",
        "segment.all.allocated", "num_ooms"};
    char err[512];
    uint8_t *buf = NULL;
    size_t n = 0;
    pv_arena *a;
    pyval *root = NULL;
    const pyval *ms, *fr;
    double f;
    memset(st, 0, sizeof *st);
    if (sublet_input_read(path, &buf, &n, err, sizeof err) != SUBLET_OK)
        return CLI_ERROR;
    a = pv_arena_create();
    if (!a || pv_json_parse(buf, n, a, &root, err, sizeof err) != SUBLET_OK ||
        pv_typeof(root) != PV_DICT) {
        fprintf(stderr, "sublet %s: %s: not the hook's figures: %s\n", prog, path, a ? err : "out of memory");
        free(buf);
        pv_arena_destroy(a);
        return CLI_ERROR;
    }
    get_str(root, "torch_version", st->torch_version, sizeof st->torch_version);
    get_str(root, "device_name", st->device_name, sizeof st->device_name);
    get_str(root, "allocator_conf", st->conf, sizeof st->conf);
    get_str(root, "exception", st->exception, sizeof st->exception);
    st->total_memory = (uint64_t)get_int(root, "total_memory", 0);
    st->trace_entries = (uint64_t)get_int(root, "trace_entries", 0);
    st->max_entries = (uint64_t)get_int(root, "max_entries", 0);
    fr = pv_dict_get(root, "memory_fraction");
    st->fraction = fr && pv_as_double(fr, &f) ? f : -1;
    ms = pv_dict_get(root, "memory_stats");
    for (int k = 0; k < CLI_REC_NSTATS; k++) {
        st->name[k] = keys[k];
        st->torch[k] = get_int(ms, keys[k], -1);
    }
    pv_arena_destroy(a);
    free(buf);
    return CLI_OK;
}

/* "pytorch_version:2.14," for "2.14.1+cu130" (cap > 0); "" when it does not read. */
static void version_prefix(const char *torch_version, char *out, size_t cap)
{
    int major, minor;
    out[0] = '\0';
    if (sscanf(torch_version, "%d.%d", &major, &minor) == 2)
        snprintf(out, cap, "pytorch_version:%d.%d,", major, minor);
}

void cli_record_conf(const cli_rec_stats *st, const char *version, const char *conf, char *out,
                     size_t cap)
{
    char pre[64] = "";
    if (version && *version)
        snprintf(pre, sizeof pre, "pytorch_version:%s,", version);
    else if (!version)
        version_prefix(st->torch_version, pre, sizeof pre);
    if (!conf)
        conf = st->conf;
    snprintf(out, cap, "%s%s", pre, conf);
    if (!*conf && *pre)
        out[strlen(out) - 1] = '\0';
    if (st->fraction > 0 && st->fraction < 1) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%smemory_fraction:%g", n ? "," : "", st->fraction);
    }
}

void cli_record_replay_options(const cli_rec_stats *st, const char *conf, int null_device,
                               uint64_t device_memory, sublet_replay_options *o)
{
    sublet_replay_options_init(o);
    o->conf = conf;
    o->device_memory = device_memory ? device_memory : st->total_memory;
    o->replay_ooms = 1;
    /* the null device's addresses start there (plugins/nullgpu/device.c) */
    o->device_base = null_device ? UINT64_C(0x200000000000) : 0;
}

int cli_record_replay_stats(const sublet_trace *t, const sublet_replay_options *o, int64_t *out,
                            uint64_t *events, char *err, size_t cap)
{
    static const char *const keys[CLI_REC_NSTATS] = {
        "allocated_bytes.all.peak", "reserved_bytes.all.peak", "segment.all.peak",
        "segment.all.allocated", "num_ooms"};
    sublet_replay_result r;
    sublet_status st = sublet_replay_run(t, o, &r, err, cap);
    if (st != SUBLET_OK) {
        sublet_replay_result_free(&r);
        return CLI_ERROR;
    }
    for (int k = 0; k < CLI_REC_NSTATS; k++)
        if (sublet_stats_lookup(&r.stats_end, keys[k], &out[k]) != 0)
            out[k] = -1;
    *events = r.events;
    sublet_replay_result_free(&r);
    return CLI_OK;
}

static int has_suffix(const char *p, const char *suffix)
{
    size_t n = strlen(p), k = strlen(suffix);
    if (n >= 3 && strcmp(p + n - 3, ".gz") == 0)
        n -= 3;
    return n > k && strncmp(p + n - k, suffix, k) == 0;
}

int cli_record_format_ok(const char *path)
{
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".slog") == 0)
        return 1;
    return has_suffix(path, ".pickle") || has_suffix(path, ".pkl") || has_suffix(path, ".json") ||
           has_suffix(path, ".csv");
}

/* The event log of a recording: the recording replayed as in the check (its
 * device, settings, release, addresses; its clock and stacks the trace's own)
 * with a log open on the replaying allocator from the first recorded row on,
 * so that the file holds the engine's events of the run PyTorch made. */
typedef struct slog_writer {
    const char *path, *settings;
    sublet_log *log;
    sublet_status st;
    char err[512];
} slog_writer;

static void slog_open(void *user, sublet_allocator *a, uint64_t index, const sublet_trace_event *ev)
{
    slog_writer *w = user;
    sublet_log_options lo = {.flags = SUBLET_LOG_SYNC, .settings = *w->settings ? w->settings : NULL};
    (void)index;
    (void)ev;
    if (!w->log && w->st == SUBLET_OK)
        w->st = sublet_log_open(a, w->path, &lo, &w->log, w->err, sizeof w->err);
}

static void slog_close(void *user, sublet_allocator *a, uint64_t last_event, sublet_status st)
{
    slog_writer *w = user;
    (void)a;
    (void)last_event;
    (void)st;
    if (w->log) {
        sublet_status cs = sublet_log_close(w->log);
        w->log = NULL;
        if (cs != SUBLET_OK && w->st == SUBLET_OK)
            w->st = sl_fail(w->err, sizeof w->err, cs, "%s", sublet_status_text(cs));
    }
}

static sublet_status write_slog(const char *snapshot, const char *path, const cli_rec_stats *rs,
                                int null_device, char *err, size_t cap)
{
    char conf[1200];
    sublet_trace *t = NULL;
    sublet_replay_options o;
    sublet_replay_result r;
    slog_writer w = {.path = path, .settings = conf, .st = SUBLET_OK};
    sublet_status st = sublet_trace_load(snapshot, NULL, &t, err, cap);
    if (st != SUBLET_OK)
        return st;
    cli_record_conf(rs, NULL, NULL, conf, sizeof conf);
    cli_record_replay_options(rs, conf, null_device, 0, &o);
    o.record = SUBLET_RECORD_ALL;
    o.record_context = SUBLET_CONTEXT_ALLOC;
    o.record_max_entries = 1; /* the clock and the stacks; the log keeps every event */
    o.before_event = slog_open;
    o.observer_user = &w;
    o.on_finish = slog_close;
    o.finish_user = &w;
    st = sublet_replay_run(t, &o, &r, err, cap);
    sublet_replay_result_free(&r);
    cli_trace_free(t);
    if (st == SUBLET_OK && w.st == SUBLET_OK && r.events == 0)
        st = sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "the recording has no events to log");
    if (st == SUBLET_OK && w.st != SUBLET_OK)
        st = sl_fail(err, cap, w.st, "%s", w.err);
    if (st != SUBLET_OK)
        (void)unlink(path);
    return st;
}

int cli_record_write(const char *prog, const char *snapshot, const char *path,
                     const cli_rec_stats *rs, int null_device)
{
    char err[1024];
    sublet_status st;
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".slog") == 0) {
        st = write_slog(snapshot, path, rs, null_device, err, sizeof err);
    } else if (has_suffix(path, ".csv")) {
        sublet_trace *t = NULL;
        st = sublet_trace_load(snapshot, NULL, &t, err, sizeof err);
        if (st == SUBLET_OK)
            st = sublet_trace_write_csv(t, path, err, sizeof err);
        cli_trace_free(t);
    } else {
        sublet_snapshot *s = NULL;
        st = sublet_snapshot_load(snapshot, &s, err, sizeof err);
        if (st == SUBLET_OK)
            st = sublet_snapshot_write(s, path, SUBLET_SNAPSHOT_AUTO, err, sizeof err);
        sublet_snapshot_free(s);
    }
    if (st != SUBLET_OK) {
        fprintf(stderr, "sublet %s: cannot write %s: %s\n", prog, path, err);
        return CLI_ERROR;
    }
    return CLI_OK;
}

int cli_record_workdir(const char *prog, char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if (snprintf(dir, cap, "%s/sublet-record-XXXXXX", tmp) >= (int)cap || !mkdtemp(dir)) {
        fprintf(stderr, "sublet %s: cannot make a work folder in %s: %s\n", prog, tmp, strerror(errno));
        return CLI_ERROR;
    }
    return CLI_OK;
}

void cli_record_rmdir(const char *dir)
{
    static const char *const names[] = {"snapshot.pickle", "snapshot.pickle.tmp", "stats.json",
                                        "stats.json.tmp", "claim", "failed", "program.log"};
    char p[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        (void)unlink(p);
    }
    (void)rmdir(dir);
}
