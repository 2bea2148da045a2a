/* sublet — per-device allocators for the drop-in libraries (see registry.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "formats/atomic_write.h"
#include "registry.h"
#include "sublet/backend_cuda.h"
#include "sublet/log.h"
#include "sublet/snapshot.h"

typedef struct slp_dev {
    _Atomic(sublet_allocator *) alloc;
    sublet_backend *backend;
    int failed;
    char why[512];
    sublet_log *log; /* the event log, when one is open (lock held to change) */
} slp_dev;

static slp_dev devs[SLP_MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *backend_var = "SUBLET_BACKEND";
static const char *sim_memory_var = "SUBLET_SIM_MEMORY";
static const char *log_var = "SUBLET_LOG";
static void (*log_report)(int device, const char *msg);
static int log_devices[SLP_MAX_DEVICES]; /* the device of each log's error callback */
static int log_generation[SLP_MAX_DEVICES]; /* allocators created per device (resets) */

static sublet_status log_open_locked(int d, sublet_allocator *a, const char *path, char *err,
                                     size_t cap);

void slp_configure(const char *backend_env, const char *sim_memory_env)
{
    pthread_mutex_lock(&lock);
    if (backend_env)
        backend_var = backend_env;
    if (sim_memory_env)
        sim_memory_var = sim_memory_env;
    pthread_mutex_unlock(&lock);
}

/* Create device d's backend and allocator.  Lock held. */
static sublet_allocator *create(int d, char *why, size_t cap)
{
    const char *kind = getenv(backend_var);
    sublet_backend *be = NULL;
    sublet_status st;
    if (!kind || !*kind || strcmp(kind, "cuda") == 0) {
        st = sublet_cuda_create(d, &be, why, cap);
        if (st != SUBLET_OK) {
            if (!why[0])
                sl_msg(why, cap, "cuda backend for device %d: %s", d, sublet_status_text(st));
            return NULL;
        }
    } else if (strcmp(kind, "sim") == 0) {
        uint64_t capacity = UINT64_C(80) << 30;
        const char *m = getenv(sim_memory_var);
        if (m && *m && (sublet_parse_size(m, &capacity) != 0 || capacity == 0)) {
            sl_msg(why, cap, "%s=%s: not a size (e.g. 80GiB)", sim_memory_var, m);
            return NULL;
        }
        st = sublet_sim_create(capacity, &be);
        if (st != SUBLET_OK) {
            sl_msg(why, cap, "sim backend: %s", sublet_status_text(st));
            return NULL;
        }
        be->device = d;
    } else {
        sl_msg(why, cap, "%s=%s: unknown backend (cuda or sim)", backend_var, kind);
        return NULL;
    }
    sublet_options o;
    memset(&o, 0, sizeof o);
    o.backend = be;
    o.device = d;
    o.conf = NULL; /* SUBLET_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF */
    sublet_allocator *a = NULL;
    char cerr[400] = "";
    st = sublet_allocator_create(&o, &a, cerr, sizeof cerr);
    if (st != SUBLET_OK) {
        sl_msg(why, cap, "allocator for device %d: %s%s%s", d, sublet_status_text(st),
               cerr[0] ? ": " : "", cerr);
        sublet_backend_destroy(be);
        return NULL;
    }
    devs[d].backend = be;
    const char *lp = getenv(log_var);
    if (lp && *lp) {
        char path[4096], lerr[512] = "";
        slp_device_path(path, sizeof path, lp, d);
        if (log_generation[d]++ > 0) { /* recreated after a reset: keep the first log */
            char first[4096];
            snprintf(first, sizeof first, "%s", path);
            const char *slash = strrchr(first, '/');
            const char *base = slash ? slash + 1 : first;
            const char *dot = strchr(base[0] == '.' ? base + 1 : base, '.');
            int n = dot ? (int)(dot - first) : (int)strlen(first);
            snprintf(path, sizeof path, "%.*s.reset%d%s", n, first, log_generation[d] - 1,
                     dot ? dot : "");
        }
        /* before the allocator is published: the log misses no event */
        if (log_open_locked(d, a, path, lerr, sizeof lerr) != SUBLET_OK && log_report)
            log_report(d, lerr);
    }
    return a;
}

void slp_device_path(char *out, size_t cap, const char *path, int device)
{
    if (device == 0) {
        snprintf(out, cap, "%s", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strchr(base[0] == '.' ? base + 1 : base, '.');
    if (!dot)
        snprintf(out, cap, "%s.dev%d", path, device);
    else
        snprintf(out, cap, "%.*s.dev%d%s", (int)(dot - path), path, device, dot);
}

/* ---- the event log ----------------------------------------------------------------- */

void slp_log_configure(void (*report)(int device, const char *msg))
{
    pthread_mutex_lock(&lock);
    log_report = report;
    pthread_mutex_unlock(&lock);
}

static void on_log_error(void *user, sublet_status st, const char *msg)
{
    (void)st;
    if (log_report)
        log_report(*(const int *)user, msg);
}

/* lock held */
static sublet_status log_open_locked(int d, sublet_allocator *a, const char *path, char *err,
                                     size_t cap)
{
    slp_dev *s = &devs[d];
    if (s->log) {
        sublet_log_close(s->log);
        s->log = NULL;
    }
    log_devices[d] = d;
    sublet_log_options o;
    memset(&o, 0, sizeof o);
    o.settings = sublet_settings_env(NULL);
    o.on_error = on_log_error;
    o.error_user = &log_devices[d];
    char inner[400] = "";
    sublet_status st = sublet_log_open(a, path, &o, &s->log, inner, sizeof inner);
    if (st != SUBLET_OK)
        sl_msg(err, cap, "event log of device %d: %s", d, inner);
    return st;
}

sublet_status slp_log_open(int device, const char *path, char *err, size_t err_cap)
{
    if (!slp_peek(device) || !path || !*path) {
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "%s",
                       !path || !*path ? "empty path" : "no allocator for that device");
    }
    pthread_mutex_lock(&lock);
    sublet_status st = log_open_locked(device, slp_peek(device), path, err, err_cap);
    pthread_mutex_unlock(&lock);
    return st;
}

sublet_status slp_log_flush(int device)
{
    if (device < 0 || device >= SLP_MAX_DEVICES)
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lock);
    sublet_status st = devs[device].log ? sublet_log_flush(devs[device].log)
                                        : SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_unlock(&lock);
    return st;
}

sublet_status slp_log_close(int device)
{
    if (device < 0 || device >= SLP_MAX_DEVICES)
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lock);
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    if (devs[device].log) {
        st = sublet_log_close(devs[device].log);
        devs[device].log = NULL;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

size_t slp_log_status_text(int device, char *buf, size_t cap)
{
    if (device < 0 || device >= SLP_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&lock);
    sublet_log_status ls;
    int have = devs[device].log != NULL;
    if (have)
        sublet_log_status_read(devs[device].log, &ls);
    pthread_mutex_unlock(&lock);
    if (!have)
        return 0;
    int n = snprintf(buf, cap, "events %llu lost %llu stacks %llu blocks %llu bytes %llu status %s",
                     (unsigned long long)ls.events, (unsigned long long)ls.events_lost,
                     (unsigned long long)ls.stacks, (unsigned long long)ls.blocks,
                     (unsigned long long)ls.bytes_written,
                     ls.status == SUBLET_OK ? "ok" : ls.message);
    return n < 0 ? 0 : (size_t)n;
}

/* The logs hold at most flush_ms of events in memory: write them at exit
 * (the allocators themselves are left alone). */
__attribute__((destructor)) static void slp_logs_fini(void)
{
    for (int d = 0; d < SLP_MAX_DEVICES; d++)
        (void)slp_log_flush(d);
}

sublet_allocator *slp_get(int device, char *err, size_t err_cap)
{
    if (device < 0 || device >= SLP_MAX_DEVICES) {
        sl_msg(err, err_cap, "device %d out of range (0..%d)", device, SLP_MAX_DEVICES - 1);
        return NULL;
    }
    slp_dev *s = &devs[device];
    sublet_allocator *a = atomic_load_explicit(&s->alloc, memory_order_acquire);
    if (a)
        return a;
    pthread_mutex_lock(&lock);
    a = atomic_load_explicit(&s->alloc, memory_order_relaxed);
    if (!a && !s->failed) {
        s->why[0] = '\0';
        a = create(device, s->why, sizeof s->why);
        if (a)
            atomic_store_explicit(&s->alloc, a, memory_order_release);
        else
            s->failed = 1;
    }
    if (!a)
        sl_msg(err, err_cap, "%s", s->why);
    pthread_mutex_unlock(&lock);
    return a;
}

sublet_allocator *slp_peek(int device)
{
    if (device < 0 || device >= SLP_MAX_DEVICES)
        return NULL;
    return atomic_load_explicit(&devs[device].alloc, memory_order_acquire);
}

sublet_backend *slp_backend(int device)
{
    if (!slp_peek(device))
        return NULL;
    return devs[device].backend;
}

void slp_drop(int device)
{
    if (device < 0 || device >= SLP_MAX_DEVICES)
        return;
    pthread_mutex_lock(&lock);
    slp_dev *s = &devs[device];
    if (s->log) {
        sublet_log_close(s->log);
        s->log = NULL;
    }
    sublet_allocator *a = atomic_exchange_explicit(&s->alloc, NULL, memory_order_acq_rel);
    if (a)
        sublet_allocator_destroy(a);
    if (s->backend)
        sublet_backend_destroy(s->backend);
    s->backend = NULL;
    s->failed = 0;
    s->why[0] = '\0';
    pthread_mutex_unlock(&lock);
}

void slp_each(void (*fn)(void *user, int device, sublet_allocator *a), void *user)
{
    for (int d = 0; d < SLP_MAX_DEVICES; d++) {
        sublet_allocator *a = slp_peek(d);
        if (a)
            fn(user, d, a);
    }
}

uint64_t slp_cached_free(sublet_allocator *a)
{
    sublet_stats st;
    memset(&st, 0, sizeof st);
    sublet_stats_read(a, &st);
    int64_t r = st.reserved_bytes[SUBLET_POOL_ALL].current;
    int64_t act = st.active_bytes[SUBLET_POOL_ALL].current;
    return r > act ? (uint64_t)(r - act) : 0;
}

char *slp_summary_text(int device, int abbreviated)
{
    sublet_allocator *a = slp_peek(device);
    if (!a)
        return NULL;
    int flags = (abbreviated ? SUBLET_SUMMARY_ABBREVIATED : 0) | SUBLET_SUMMARY_DEVICE;
    size_t n = sublet_summary(a, flags, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf)
        return NULL;
    /* the device view may have grown by a digit since: cut, never overrun */
    sublet_summary(a, flags, buf, n + 1);
    return buf;
}

char *slp_stats_text(int device)
{
    sublet_allocator *a = slp_peek(device);
    if (!a)
        return NULL;
    sublet_stats st;
    memset(&st, 0, sizeof st);
    sublet_stats_read(a, &st);
    sublet_device_view v;
    int has_view = sublet_device_view_read(a, &v) == SUBLET_OK;
    size_t n = sublet_stats_format_flat(&st, NULL, 0);
    size_t m = has_view ? sublet_device_view_format_flat(&v, NULL, 0) : 0;
    char *buf = malloc(n + m + 1);
    if (!buf)
        return NULL;
    sublet_stats_format_flat(&st, buf, n + 1);
    if (has_view)
        sublet_device_view_format_flat(&v, buf + n, m + 1);
    return buf;
}

sublet_status slp_write_report(int device, const char *path, char *err, size_t err_cap)
{
    sublet_allocator *a = slp_peek(device);
    if (!a) {
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT,
                       "no allocator for device %d (nothing was allocated there)", device);
    }
    if (!path || !*path) {
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "empty path");
    }
    int gz = 0;
    if (sublet_snapshot_format_of_path(path, &gz) != SUBLET_SNAPSHOT_AUTO) {
        sublet_snapshot *snap = NULL;
        sublet_status st = sublet_snapshot_take(a, &snap);
        if (st != SUBLET_OK) {
            return sl_fail(err, err_cap, st, "snapshot of device %d: %s", device,
                           sublet_status_text(st));
        }
        st = sublet_snapshot_write(snap, path, SUBLET_SNAPSHOT_AUTO, err, err_cap);
        sublet_snapshot_free(snap);
        return st;
    }
    char *text = slp_summary_text(device, 0);
    if (!text) {
        return sl_fail(err, err_cap, SUBLET_ERR_NO_MEMORY, "out of host memory");
    }
    sublet_status st = sublet_atomic_write(path, text, strlen(text), err, err_cap);
    free(text);
    return st;
}
