/* sublet — libsublet_torch.so: sublet as PyTorch's CUDA allocator.
 *
 * torch.cuda.memory.CUDAPluggableAllocator(path, "sublet_torch_malloc",
 * "sublet_torch_free") loads the two entry points below; the optional hooks
 * are given to the allocator object's set_*_fn methods by
 * python/sublet/torch.py (install()).  Signatures, as PyTorch calls them
 * (torch/csrc/cuda/CUDAPluggableAllocator.h):
 *
 *   void* malloc(size_t size, int device, cudaStream_t stream)
 *   void  free(void* ptr, size_t size, int device, cudaStream_t stream)
 *   void  init(int device_count)                        set_init_fn
 *   void  reset(void)                                   set_reset_fn (torch.cuda.empty_cache)
 *   void  memory_fraction(double fraction, int device)  set_memory_fraction_fn
 *   void* base_alloc(void* ptr, size_t* size)           set_base_alloc_fn
 *   void  record_stream(void* ptr, cudaStream_t stream) set_record_stream_fn
 *
 *   void  begin(int device, MempoolId_t id, std::function<bool(cudaStream_t)> filter)
 *                                                       set_begin_allocate_to_pool
 *   void  end(int device, MempoolId_t id)               set_end_allocate_to_pool_fn
 *   void  release(int device, MempoolId_t id)           set_release_pool
 *
 * The last three (CUDA graphs' private pools) take C++ types by value, so
 * they are in plugins/torch_pools.cpp, built when CMake finds a C++
 * compiler; without it PyTorch treats them as unset (no-ops) and captures
 * allocate from sublet's default pools.
 *
 * One allocator per device, created on first use (registry.c) on the cuda
 * backend (SUBLET_TORCH_BACKEND=sim gives a simulated device of
 * SUBLET_TORCH_SIM_MEMORY bytes instead: addresses only, for tests without
 * a GPU).  Settings: SUBLET_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, else
 * PYTORCH_ALLOC_CONF.
 *
 * SUBLET_LOG=path logs every event of each device's allocator from its
 * creation on (sublet/log.h; device N to path with ".devN" before the
 * extension); sublet_torch_log_open/flush/close/status do it at run time
 * (sublet.torch.log_open).  A log that stops on a write error says so once
 * in last_error().
 *
 * PyTorch's interface has no error channel: a failed malloc returns NULL
 * (PyTorch then fails at the first use of the tensor) and a failed free or
 * record_stream returns nothing.  The reason is kept and
 * sublet_torch_last_error() gives it (sublet.torch.last_error()).  Nothing
 * here prints. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/errmsg.h"
#include "registry.h"
#include "torch_internal.h"
#include "sublet/history.h"
#include "sublet/pool.h"
#include "sublet/stats.h"
#include "sublet/sublet.h"

#define SLT_EXPORT __attribute__((visibility("default")))

/* ---- exported entry points (declared here: this library has no header) --- */
SLT_EXPORT void *sublet_torch_malloc(ssize_t size, int device, void *stream);
SLT_EXPORT void sublet_torch_free(void *ptr, ssize_t size, int device, void *stream);
SLT_EXPORT void sublet_torch_init(int device_count);
SLT_EXPORT void sublet_torch_reset(void);
SLT_EXPORT void sublet_torch_memory_fraction(double fraction, int device);
SLT_EXPORT void *sublet_torch_base_alloc(void *ptr, size_t *size);
SLT_EXPORT void sublet_torch_record_stream(void *ptr, void *stream);
SLT_EXPORT int sublet_torch_stream_id(void *stream, long long id);
SLT_EXPORT long long sublet_torch_stats(int device, char *buf, size_t cap);
SLT_EXPORT long long sublet_torch_pool_stats(int device, unsigned long long first,
                                            unsigned long long second, char *buf, size_t cap);
SLT_EXPORT long long sublet_torch_summary(int device, int abbreviated, char *buf, size_t cap);
SLT_EXPORT int sublet_torch_snapshot(int device, const char *path);
SLT_EXPORT long long sublet_torch_max_allocatable(int device, unsigned long long stream);
SLT_EXPORT int sublet_torch_empty_cache(int device);
SLT_EXPORT int sublet_torch_reset_peak_stats(int device);
SLT_EXPORT int sublet_torch_record_history(int device, int enabled, unsigned long long max_entries);
SLT_EXPORT int sublet_torch_device_count(void);
SLT_EXPORT size_t sublet_torch_last_error(char *buf, size_t cap);
SLT_EXPORT const char *sublet_torch_version(void);
SLT_EXPORT int sublet_torch_log_open(int device, const char *path);
SLT_EXPORT int sublet_torch_log_flush(int device);
SLT_EXPORT int sublet_torch_log_close(int device);
SLT_EXPORT long long sublet_torch_log_status(int device, char *buf, size_t cap);

/* ---- last error ------------------------------------------------------------- */

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_err[768];
static int device_count = -1; /* from init(); -1 = not told */

__attribute__((format(printf, 1, 2))) static void set_errf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&err_lock);
    sl_vmsg(last_err, sizeof last_err, fmt, ap);
    pthread_mutex_unlock(&err_lock);
    va_end(ap);
}

static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

/* The event log stopped (a full disk) or could not be opened: said once per
 * log through last_error(); allocations go on. */
static void log_error(int device, const char *msg)
{
    set_errf("sublet: device %d: %s", device, msg);
}

static void configure(void)
{
    slp_configure("SUBLET_TORCH_BACKEND", "SUBLET_TORCH_SIM_MEMORY");
    slp_log_configure(log_error);
}

void slt_set_error(const char *msg)
{
    set_errf("%s", msg);
}

/* PyTorch's ids of its pool streams (sublet.torch tells them at install),
 * for the key of PyTorch's cuda_events map (sublet_set_stream_key): the
 * hash of a CUDAStream is CUDA (1) << 56 | device << 48 | its id's low 48
 * bits; a stream not told (the default stream, 0; an external one) has its
 * handle as its id, as PyTorch's external streams do. */
#define SLT_MAX_STREAM_IDS 4096
static struct slt_stream_id {
    uint64_t stream;
    long long id;
} stream_ids[SLT_MAX_STREAM_IDS];
static size_t nstream_ids;
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;

int sublet_torch_stream_id(void *stream, long long id)
{
    int rc = 0;
    pthread_mutex_lock(&ids_lock);
    size_t k = 0;
    while (k < nstream_ids && stream_ids[k].stream != (uint64_t)(uintptr_t)stream)
        k++;
    if (k < nstream_ids)
        stream_ids[k].id = id;
    else if (nstream_ids < SLT_MAX_STREAM_IDS)
        stream_ids[nstream_ids++] = (struct slt_stream_id){(uint64_t)(uintptr_t)stream, id};
    else
        rc = -1;
    pthread_mutex_unlock(&ids_lock);
    return rc;
}

static uint64_t torch_stream_key(void *user, sublet_stream stream)
{
    uint64_t id = stream;
    pthread_mutex_lock(&ids_lock);
    for (size_t k = 0; k < nstream_ids; k++)
        if (stream_ids[k].stream == stream) {
            id = (uint64_t)stream_ids[k].id;
            break;
        }
    pthread_mutex_unlock(&ids_lock);
    uint64_t device = (uint64_t)(uintptr_t)user & 0xff;
    return 1ull << 56 | device << 48 | (id & ((1ull << 48) - 1));
}

sublet_allocator *slt_get(int device)
{
    pthread_once(&conf_once, configure);
    sublet_allocator *a = slp_peek(device);
    if (a)
        return a;
    char why[512] = "";
    a = slp_get(device, why, sizeof why);
    if (!a)
        set_errf("sublet: device %d: %s", device, why);
    else
        sublet_set_stream_key(a, torch_stream_key, (void *)(uintptr_t)device);
    return a;
}

/* The allocator that holds ptr (the hooks that get no device argument). */
static sublet_allocator *owner_of(const void *ptr, int *device_out)
{
    for (int d = 0; d < SLP_MAX_DEVICES; d++) {
        sublet_allocator *a = slp_peek(d);
        uint64_t base, size, req;
        if (a && sublet_block_info(a, ptr, &base, &size, &req) == SUBLET_OK) {
            if (device_out)
                *device_out = d;
            return a;
        }
    }
    return NULL;
}

/* ---- the PyTorch hooks ------------------------------------------------------- */

void *sublet_torch_malloc(ssize_t size, int device, void *stream)
{
    if (size < 0) {
        set_errf("sublet_torch_malloc: negative size %lld", (long long)size);
        return NULL;
    }
    sublet_allocator *a = slt_get(device);
    if (!a)
        return NULL;
    void *p = NULL;
    sublet_status st = sublet_malloc(a, (uint64_t)size, (sublet_stream)(uintptr_t)stream, &p);
    if (st != SUBLET_OK) {
        char msg[700];
        if (st == SUBLET_ERR_OOM)
            sublet_oom_message(a, msg, sizeof msg);
        else
            sl_msg(msg, sizeof msg, "%s", sublet_status_text(st));
        set_errf("sublet_torch_malloc(%lld) on device %d: %s",
                 (long long)size, device, msg);
        return NULL;
    }
    return p;
}

void sublet_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    (void)stream; /* the block remembers its stream */
    if (!ptr)
        return;
    sublet_allocator *a = slp_peek(device);
    sublet_status st = a ? sublet_free(a, ptr) : SUBLET_ERR_INVALID_POINTER;
    if (st == SUBLET_ERR_INVALID_POINTER) { /* freed with another current device? */
        int d = -1;
        sublet_allocator *o = owner_of(ptr, &d);
        if (o)
            st = sublet_free(o, ptr);
    }
    if (st != SUBLET_OK) {
        set_errf("sublet_torch_free(%p) on device %d: %s", ptr,
                 device, sublet_status_text(st));
    }
}

void sublet_torch_init(int count)
{
    pthread_once(&conf_once, configure);
    pthread_mutex_lock(&err_lock);
    device_count = count;
    pthread_mutex_unlock(&err_lock);
}

static void empty_one(void *user, int device, sublet_allocator *a)
{
    (void)user;
    sublet_status st = sublet_empty_cache(a);
    if (st != SUBLET_OK) {
        set_errf("empty_cache on device %d: %s", device,
                 sublet_status_text(st));
    }
}

void sublet_torch_reset(void)
{
    slp_each(empty_one, NULL);
}

void sublet_torch_memory_fraction(double fraction, int device)
{
    sublet_allocator *a = slt_get(device);
    if (!a)
        return;
    sublet_status st = sublet_memory_fraction_set(a, fraction);
    if (st != SUBLET_OK) {
        set_errf("memory fraction %g on device %d: %s", fraction,
                 device, sublet_status_text(st));
    }
}

typedef struct seg_find {
    uint64_t addr;
    uint64_t base, size;
    int found;
} seg_find;

static void seg_visit(void *user, const sublet_segment_view *seg)
{
    seg_find *f = user;
    if (!f->found && f->addr >= seg->addr && f->addr < seg->addr + seg->total_size) {
        f->base = seg->addr;
        f->size = seg->total_size;
        f->found = 1;
    }
}

void *sublet_torch_base_alloc(void *ptr, size_t *size)
{
    /* PyTorch's getBaseAllocation: the start and size of the device
     * allocation (segment) holding ptr; used for IPC. */
    seg_find f = {.addr = (uint64_t)(uintptr_t)ptr};
    for (int d = 0; d < SLP_MAX_DEVICES && !f.found; d++) {
        sublet_allocator *a = slp_peek(d);
        if (a)
            sublet_segments_walk(a, seg_visit, &f);
    }
    if (!f.found) {
        set_errf("sublet_torch_base_alloc: unknown pointer %p", ptr);
        return ptr;
    }
    if (size)
        *size = (size_t)f.size;
    return (void *)(uintptr_t)f.base;
}

void sublet_torch_record_stream(void *ptr, void *stream)
{
    sublet_status st = SUBLET_ERR_INVALID_POINTER;
    for (int d = 0; d < SLP_MAX_DEVICES && st != SUBLET_OK; d++) {
        sublet_allocator *a = slp_peek(d);
        if (a)
            st = sublet_record_stream(a, ptr, (sublet_stream)(uintptr_t)stream);
    }
    if (st != SUBLET_OK) {
        set_errf("sublet_torch_record_stream(%p, %p): %s", ptr,
                 stream, sublet_status_text(st));
    }
}

/* ---- queries for Python (sublet.torch) ------------------------------------------ */

static long long copy_out(char *text, char *buf, size_t cap)
{
    if (!text)
        return -1;
    size_t n = strlen(text);
    if (buf && cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, text, k);
        buf[k] = '\0';
    }
    free(text);
    return (long long)n;
}

static sublet_allocator *existing(int device)
{
    sublet_allocator *a = slp_peek(device);
    if (!a)
        set_errf("sublet: no allocator for device %d (sublet has not allocated there; is it "
                 "installed?)",
                 device);
    return a;
}

long long sublet_torch_stats(int device, char *buf, size_t cap)
{
    if (!existing(device))
        return -1;
    return copy_out(slp_stats_text(device), buf, cap);
}

/* A private pool's statistics (sublet_pool_stats_read) as flat keys, then
 * pool_use_count, pool_device_segments, pool_allocating and
 * pool_free_bytes (sublet_pool_info_read); -1 for an unknown pool. */
long long sublet_torch_pool_stats(int device, unsigned long long first, unsigned long long second,
                                  char *buf, size_t cap)
{
    sublet_allocator *a = existing(device);
    if (!a)
        return -1;
    sublet_pool_id id = {first, second};
    sublet_stats s;
    sublet_pool_info info;
    if (sublet_pool_stats_read(a, id, &s) != SUBLET_OK ||
        sublet_pool_info_read(a, id, &info) != SUBLET_OK) {
        set_errf("sublet: device %d has no pool (%llu, %llu)", device, first, second);
        return -1;
    }
    size_t n = sublet_stats_format_flat(&s, NULL, 0);
    size_t extra = 256;
    char *text = malloc(n + extra);
    if (!text) {
        set_errf("sublet_torch_pool_stats: out of host memory");
        return -1;
    }
    sublet_stats_format_flat(&s, text, n + 1);
    snprintf(text + n, extra,
             "pool_use_count %d\npool_device_segments %d\npool_allocating %d\n"
             "pool_free_bytes %llu\n",
             info.use_count, info.device_segments, info.allocating,
             (unsigned long long)info.free_bytes);
    return copy_out(text, buf, cap);
}

long long sublet_torch_summary(int device, int abbreviated, char *buf, size_t cap)
{
    if (!existing(device))
        return -1;
    return copy_out(slp_summary_text(device, abbreviated), buf, cap);
}

int sublet_torch_snapshot(int device, const char *path)
{
    if (!existing(device))
        return -1;
    char err[600] = "";
    sublet_status st = slp_write_report(device, path, err, sizeof err);
    if (st != SUBLET_OK) {
        set_errf("snapshot of device %d to %s: %s", device,
                 path ? path : "(null)", err[0] ? err : sublet_status_text(st));
        return -1;
    }
    return 0;
}

long long sublet_torch_max_allocatable(int device, unsigned long long stream)
{
    sublet_allocator *a = existing(device);
    if (!a)
        return -1;
    return (long long)sublet_max_allocatable(a, (sublet_stream)stream);
}

int sublet_torch_empty_cache(int device)
{
    sublet_allocator *a = existing(device);
    if (!a)
        return -1;
    return sublet_empty_cache(a) == SUBLET_OK ? 0 : -1;
}

int sublet_torch_reset_peak_stats(int device)
{
    sublet_allocator *a = existing(device);
    if (!a)
        return -1;
    sublet_stats_reset_peak(a);
    return 0;
}

int sublet_torch_record_history(int device, int enabled, unsigned long long max_entries)
{
    sublet_allocator *a = slt_get(device);
    if (!a)
        return -1;
    sublet_status st =
        sublet_history_record(a, enabled ? SUBLET_RECORD_ALL : SUBLET_RECORD_OFF,
                              enabled ? SUBLET_CONTEXT_ALLOC : SUBLET_CONTEXT_NONE,
                              (size_t)max_entries);
    if (st != SUBLET_OK) {
        set_errf("record_history on device %d: %s", device, sublet_status_text(st));
        return -1;
    }
    return 0;
}

/* ---- the event log (SUBLET_LOG=path at start-up, or these) ------------------------------ */

int sublet_torch_log_open(int device, const char *path)
{
    if (!slt_get(device))
        return -1;
    char err[512] = "";
    if (slp_log_open(device, path, err, sizeof err) != SUBLET_OK) {
        set_errf("log_open on device %d: %s", device, err);
        return -1;
    }
    return 0;
}

int sublet_torch_log_flush(int device)
{
    sublet_status st = slp_log_flush(device);
    if (st != SUBLET_OK) {
        set_errf("log_flush on device %d: %s", device,
                 st == SUBLET_ERR_INVALID_ARGUMENT ? "no event log open" : sublet_status_text(st));
        return -1;
    }
    return 0;
}

int sublet_torch_log_close(int device)
{
    sublet_status st = slp_log_close(device);
    if (st != SUBLET_OK) {
        set_errf("log_close on device %d: %s", device,
                 st == SUBLET_ERR_INVALID_ARGUMENT ? "no event log open" : sublet_status_text(st));
        return -1;
    }
    return 0;
}

long long sublet_torch_log_status(int device, char *buf, size_t cap)
{
    return (long long)slp_log_status_text(device, buf, cap);
}

int sublet_torch_device_count(void)
{
    pthread_mutex_lock(&err_lock);
    int n = device_count;
    pthread_mutex_unlock(&err_lock);
    return n;
}

size_t sublet_torch_last_error(char *buf, size_t cap)
{
    pthread_mutex_lock(&err_lock);
    int n = snprintf(buf, cap, "%s", last_err);
    pthread_mutex_unlock(&err_lock);
    return n < 0 ? 0 : (size_t)n;
}

const char *sublet_torch_version(void)
{
    return sublet_version();
}
