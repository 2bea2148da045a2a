/* sublet — the `cuda` backend: the CUDA driver API, loaded at run time.
 *
 * Loading.  The first use loads libcuda.so.1 (dlopen, once per process,
 * never closed), looks up cuGetProcAddress_v2 (or the older cuGetProcAddress)
 * with dlsym and every other entry point through it, asking for the ABI
 * version whose PFN_* typedef (cudaTypedefs.h) this file calls through; an
 * entry point the driver does not give that way is looked up by its exported
 * name.  Then cuInit(0).  The outcome (and its message) is kept, so every
 * later create answers the same way without retrying.
 *
 * Context.  Each backend retains its device's primary context, the one the
 * runtime API uses, so pointers and streams are shared with cudart programs
 * and PyTorch.  A call that needs a context makes it current for the call
 * only (push/pop) when the calling thread has a different one.
 *
 * VMM.  A reservation keeps one handle slot per granule (the page→handle
 * map); va_map creates and maps one physical granule per page and then sets
 * read-write access for the device on the whole range; va_unmap synchronises
 * the context (the engine tells no stream: this is the conservative form of
 * PyTorch's stream synchronise before unmapping) and unmaps and releases page
 * by page.  A failure part-way undoes the pages of that call.  va_map_alias
 * (policy:stitch) maps the physical granules already mapped at one address
 * a second time: per granule cuMemRetainAllocationHandle of the source
 * address (a new reference to its allocation) and cuMemMap at the
 * destination, then one cuMemSetAccess; the retained handle is kept in the
 * destination's page slot, so va_unmap releases it like any other
 * (cuMemUnmap + cuMemRelease) and the granule's memory is freed when its
 * last mapping goes.
 *
 * The library never prints and never aborts: driver errors come back as a
 * sublet_status and as the backend's last-error text. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "sublet/backend_cuda.h"

#ifdef SUBLET_HAVE_CUDA_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <unistd.h>

#include "backends/nvml_query.h"

#define CUDA_EVENT_MAGIC UINT64_C(0x6375646145766e74) /* "cudaEvnt" */

/* ---- the driver ---------------------------------------------------------------------
 * X(field, PFN type, name for cuGetProcAddress, ABI version, exported name, required):
 * required 1: the backend needs it; 0: VMM needs it; 2: va_map_alias needs it;
 * 3: the device view's per-process figure needs it (process_mem); 4: used when the
 * driver has it */
#define SL_CUDA_FUNCTIONS(X)                                                                    \
    X(GetErrorName, PFN_cuGetErrorName_v6000, "cuGetErrorName", 6000, "cuGetErrorName", 1)     \
    X(GetErrorString, PFN_cuGetErrorString_v6000, "cuGetErrorString", 6000,                    \
      "cuGetErrorString", 1)                                                                    \
    X(Init, PFN_cuInit_v2000, "cuInit", 2000, "cuInit", 1)                                      \
    X(DriverGetVersion, PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion", 2020,              \
      "cuDriverGetVersion", 1)                                                                  \
    X(DeviceGetCount, PFN_cuDeviceGetCount_v2000, "cuDeviceGetCount", 2000, "cuDeviceGetCount", \
      1)                                                                                        \
    X(DeviceGet, PFN_cuDeviceGet_v2000, "cuDeviceGet", 2000, "cuDeviceGet", 1)                  \
    X(DeviceGetName, PFN_cuDeviceGetName_v2000, "cuDeviceGetName", 2000, "cuDeviceGetName", 1)  \
    X(DeviceGetPCIBusId, PFN_cuDeviceGetPCIBusId_v4010, "cuDeviceGetPCIBusId", 4010,          \
      "cuDeviceGetPCIBusId", 3)                                                                 \
    X(DeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000, "cuDeviceGetAttribute", 2000,        \
      "cuDeviceGetAttribute", 1)                                                                \
    X(DevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain",  \
      7000, "cuDevicePrimaryCtxRetain", 1)                                                      \
    X(DevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000,                           \
      "cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2", 1)                    \
    X(CtxGetCurrent, PFN_cuCtxGetCurrent_v4000, "cuCtxGetCurrent", 4000, "cuCtxGetCurrent", 1)  \
    X(CtxPushCurrent, PFN_cuCtxPushCurrent_v4000, "cuCtxPushCurrent", 4000,                    \
      "cuCtxPushCurrent_v2", 1)                                                                 \
    X(CtxPopCurrent, PFN_cuCtxPopCurrent_v4000, "cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2",  \
      1)                                                                                        \
    X(CtxSynchronize, PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize", 2000, "cuCtxSynchronize", \
      1)                                                                                        \
    X(MemAlloc, PFN_cuMemAlloc_v3020, "cuMemAlloc", 3020, "cuMemAlloc_v2", 1)                   \
    X(MemFree, PFN_cuMemFree_v3020, "cuMemFree", 3020, "cuMemFree_v2", 1)                       \
    X(MemGetInfo, PFN_cuMemGetInfo_v3020, "cuMemGetInfo", 3020, "cuMemGetInfo_v2", 1)           \
    X(EventCreate, PFN_cuEventCreate_v2000, "cuEventCreate", 2000, "cuEventCreate", 1)          \
    X(EventDestroy, PFN_cuEventDestroy_v4000, "cuEventDestroy", 4000, "cuEventDestroy_v2", 1)   \
    X(EventRecord, PFN_cuEventRecord_v2000, "cuEventRecord", 2000, "cuEventRecord", 1)          \
    X(EventQuery, PFN_cuEventQuery_v2000, "cuEventQuery", 2000, "cuEventQuery", 1)              \
    X(EventSynchronize, PFN_cuEventSynchronize_v2000, "cuEventSynchronize", 2000,              \
      "cuEventSynchronize", 1)                                                                  \
    X(MemAddressReserve, PFN_cuMemAddressReserve_v10020, "cuMemAddressReserve", 10020,         \
      "cuMemAddressReserve", 0)                                                                 \
    X(MemAddressFree, PFN_cuMemAddressFree_v10020, "cuMemAddressFree", 10020,                  \
      "cuMemAddressFree", 0)                                                                    \
    X(MemCreate, PFN_cuMemCreate_v10020, "cuMemCreate", 10020, "cuMemCreate", 0)                \
    X(MemRelease, PFN_cuMemRelease_v10020, "cuMemRelease", 10020, "cuMemRelease", 0)            \
    X(MemMap, PFN_cuMemMap_v10020, "cuMemMap", 10020, "cuMemMap", 0)                            \
    X(MemUnmap, PFN_cuMemUnmap_v10020, "cuMemUnmap", 10020, "cuMemUnmap", 0)                    \
    X(MemSetAccess, PFN_cuMemSetAccess_v10020, "cuMemSetAccess", 10020, "cuMemSetAccess", 0)    \
    X(MemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020,                   \
      "cuMemGetAllocationGranularity", 10020, "cuMemGetAllocationGranularity", 0)               \
    X(MemRetainAllocationHandle, PFN_cuMemRetainAllocationHandle_v11000,                       \
      "cuMemRetainAllocationHandle", 11000, "cuMemRetainAllocationHandle", 2)                   \
    X(ThreadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010,            \
      "cuThreadExchangeStreamCaptureMode", 10010, "cuThreadExchangeStreamCaptureMode", 4)

typedef struct cuda_driver {
    void *lib;
    sublet_status status; /* of loading + cuInit; SUBLET_OK: usable */
    int no_device;        /* cuInit said CUDA_ERROR_NO_DEVICE */
    int version;          /* cuDriverGetVersion */
    int has_vmm_api;      /* every VMM entry point was found */
    char msg[512];        /* why not usable */
#define SL_X_FIELD(field, type, name, ver, exported, req) type field;
    SL_CUDA_FUNCTIONS(SL_X_FIELD)
#undef SL_X_FIELD
} cuda_driver;

static cuda_driver drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

_Static_assert(sizeof(void *) == sizeof(PFN_cuInit_v2000), "function pointers must be data-sized");

static void drv_error_text(CUresult r, const char **name, const char **desc)
{
    *name = NULL;
    *desc = NULL;
    if (drv.GetErrorName && drv.GetErrorName(r, name) != CUDA_SUCCESS)
        *name = NULL;
    if (drv.GetErrorString && drv.GetErrorString(r, desc) != CUDA_SUCCESS)
        *desc = NULL;
}

/* "call: CUDA_ERROR_X (description)" into buf. */
static void format_cu_error(char *buf, size_t cap, const char *call, CUresult r)
{
    const char *name, *desc;
    drv_error_text(r, &name, &desc);
    char num[32];
    if (!name) {
        snprintf(num, sizeof num, "CUDA error %d", (int)r);
        name = num;
    }
    if (desc)
        snprintf(buf, cap, "%s: %s (%s)", call, name, desc);
    else
        snprintf(buf, cap, "%s: %s", call, name);
}

static void *drv_lookup(void *gpa2, void *gpa1, const char *name, int version,
                        const char *exported)
{
    void *p = NULL;
    if (gpa2) {
        PFN_cuGetProcAddress_v12000 f;
        memcpy(&f, &gpa2, sizeof f);
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (f(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS &&
            q == CU_GET_PROC_ADDRESS_SUCCESS && p)
            return p;
    } else if (gpa1) {
        PFN_cuGetProcAddress_v11030 f;
        memcpy(&f, &gpa1, sizeof f);
        if (f(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS && p)
            return p;
    }
    p = dlsym(drv.lib, exported);
    return p;
}

static void drv_load(void)
{
    drv.status = SUBLET_ERR_UNSUPPORTED;
    drv.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv.lib) {
        const char *why = dlerror();
        snprintf(drv.msg, sizeof drv.msg, "no CUDA driver (libcuda.so.1) found: %s",
                 why ? why : "dlopen failed");
        return;
    }
    void *gpa2 = dlsym(drv.lib, "cuGetProcAddress_v2");
    void *gpa1 = gpa2 ? NULL : dlsym(drv.lib, "cuGetProcAddress");
    int vmm = 1;
#define SL_X_RESOLVE(field, type, name, ver, exported, req)                                     \
    do {                                                                                        \
        void *p_ = drv_lookup(gpa2, gpa1, name, ver, exported);                                 \
        if (!p_ && (req) == 1) {                                                                \
            snprintf(drv.msg, sizeof drv.msg,                                                   \
                     "no usable CUDA driver: libcuda.so.1 lacks %s (driver too old?)", name);    \
            return;                                                                             \
        }                                                                                       \
        if (!p_ && (req) == 0)                                                                  \
            vmm = 0;                                                                            \
        memcpy(&drv.field, &p_, sizeof p_);                                                     \
    } while (0);
    SL_CUDA_FUNCTIONS(SL_X_RESOLVE)
#undef SL_X_RESOLVE
    drv.has_vmm_api = vmm;
    CUresult r = drv.Init(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        drv.no_device = 1;
        format_cu_error(drv.msg, sizeof drv.msg, "no CUDA device: cuInit", r);
        return;
    }
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        /* The stub may not even name its own error. */
        snprintf(drv.msg, sizeof drv.msg,
                 "no CUDA driver (libcuda.so.1) found: the library loaded is the CUDA "
                 "toolkit's stub (cuInit: CUDA_ERROR_STUB_LIBRARY); is the NVIDIA driver "
                 "installed?");
        return;
    }
    if (r != CUDA_SUCCESS) {
        format_cu_error(drv.msg, sizeof drv.msg, "the CUDA driver failed to initialise: cuInit",
                        r);
        return;
    }
    int v = 0;
    if (drv.DriverGetVersion(&v) == CUDA_SUCCESS)
        drv.version = v;
    drv.status = SUBLET_OK;
}

static sublet_status drv_ready(char *err, size_t cap)
{
    pthread_once(&drv_once, drv_load);
    if (drv.status != SUBLET_OK && err && cap)
        sl_msg(err, cap, "%s", drv.msg);
    return drv.status;
}

/* ---- the backend ----------------------------------------------------------------------- */

typedef struct va_resv {
    uint64_t addr;
    uint64_t size;  /* reserved bytes (a multiple of the granularity) */
    uint64_t asked; /* size the caller asked for (va_release must repeat it) */
    size_t npages;
    size_t mapped; /* pages with a handle */
    CUmemGenericAllocationHandle *pages;
    unsigned char *used; /* 1 where pages[i] is live */
} va_resv;

typedef struct cuda_backend {
    sublet_backend base; /* first: the engine casts */
    CUdevice dev;
    CUcontext ctx;
    int vmm;
    uint64_t gran;
    pthread_mutex_t lock; /* last_err and the reservations */
    char last_err[320];
    va_resv *resv; /* sorted by addr */
    size_t nresv, cap_resv;
    char devname[128];
    char pci_bus_id[32]; /* for NVML (process_mem); "" when unknown */
} cuda_backend;

struct sublet_event {
    uint64_t magic;
    const cuda_backend *owner;
    CUevent ev;
};

static const sublet_backend_ops cuda_ops;
static const sublet_backend_ops cuda_ops_vmm;

static cuda_backend *as_cuda(sublet_backend *b)
{
    return (b && (b->ops == &cuda_ops || b->ops == &cuda_ops_vmm)) ? (cuda_backend *)b : NULL;
}

static sublet_status map_cu(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return SUBLET_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return SUBLET_ERR_DEVICE_OOM;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return SUBLET_ERR_INVALID_ARGUMENT;
    case CUDA_ERROR_NOT_SUPPORTED:
        return SUBLET_ERR_UNSUPPORTED;
    default:
        return SUBLET_ERR_BACKEND;
    }
}

/* Record a failed driver call (lock held). */
static void set_err_locked(cuda_backend *c, const char *call, CUresult r)
{
    format_cu_error(c->last_err, sizeof c->last_err, call, r);
}

/* Record a failed driver call and return its status (lock not held).  fmt
 * takes two unsigned long long arguments (or ignores them). */
static sublet_status cu_fail(cuda_backend *c, CUresult r, const char *fmt, uint64_t a,
                             uint64_t b)
{
    char call[128];
    snprintf(call, sizeof call, fmt, (unsigned long long)a, (unsigned long long)b);
    pthread_mutex_lock(&c->lock);
    set_err_locked(c, call, r);
    pthread_mutex_unlock(&c->lock);
    return map_cu(r);
}

/* Make the primary context current for a call; *pushed tells leave() to pop. */
static sublet_status ctx_enter(cuda_backend *c, int *pushed)
{
    CUcontext cur = NULL;
    *pushed = 0;
    if (drv.CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c->ctx)
        return SUBLET_OK;
    CUresult r = drv.CtxPushCurrent(c->ctx);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuCtxPushCurrent(device %llu)", (uint64_t)c->base.device, 0);
    *pushed = 1;
    return SUBLET_OK;
}

static void ctx_leave(cuda_backend *c, int pushed)
{
    (void)c;
    if (pushed) {
        CUcontext popped = NULL;
        (void)drv.CtxPopCurrent(&popped);
    }
}

/* ---- segments ------------------------------------------------------------------------ */

/* A graph capture in the global mode forbids "potentially unsafe" calls,
 * cuMemAlloc among them, from every thread whose own mode is not relaxed:
 * the call fails and the capture is invalidated.  PyTorch takes memory
 * during a capture with the calling thread's mode relaxed, and so does the
 * backend, around the calls that take device memory. */
static CUstreamCaptureMode capture_relax(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (drv.ThreadExchangeStreamCaptureMode && drv.ThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
        m = CU_STREAM_CAPTURE_MODE_RELAXED;
    return m;
}

static void capture_restore(CUstreamCaptureMode m)
{
    if (drv.ThreadExchangeStreamCaptureMode && m != CU_STREAM_CAPTURE_MODE_RELAXED)
        (void)drv.ThreadExchangeStreamCaptureMode(&m);
}

static sublet_status cuda_segment_alloc(sublet_backend *b, uint64_t size, uint64_t hint,
                                        uint64_t *addr_out)
{
    (void)hint; /* cuMemAlloc places memory itself */
    cuda_backend *c = as_cuda(b);
    if (!c || !addr_out || size == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    CUdeviceptr p = 0;
    CUstreamCaptureMode mode = capture_relax();
    CUresult r = drv.MemAlloc(&p, (size_t)size);
    capture_restore(mode);
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuMemAlloc(%llu)", size, 0);
    *addr_out = (uint64_t)p;
    return SUBLET_OK;
}

static sublet_status cuda_segment_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    cuda_backend *c = as_cuda(b);
    if (!c || addr == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    CUresult r = drv.MemFree((CUdeviceptr)addr);
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuMemFree(0x%llx) of %llu bytes", addr, size);
    return SUBLET_OK;
}

/* ---- events -------------------------------------------------------------------------- */

static int event_ok(const cuda_backend *c, const sublet_event *ev)
{
    return ev && ev->magic == CUDA_EVENT_MAGIC && ev->owner == c;
}

static sublet_status cuda_event_create(sublet_backend *b, sublet_event **ev_out)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !ev_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return SUBLET_ERR_NO_MEMORY;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK) {
        free(ev);
        return st;
    }
    CUresult r = drv.EventCreate(&ev->ev, CU_EVENT_DISABLE_TIMING);
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS) {
        free(ev);
        return cu_fail(c, r, "cuEventCreate(CU_EVENT_DISABLE_TIMING)", 0, 0);
    }
    ev->magic = CUDA_EVENT_MAGIC;
    ev->owner = c;
    *ev_out = ev;
    return SUBLET_OK;
}

static sublet_status cuda_event_destroy(sublet_backend *b, sublet_event *ev)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !event_ok(c, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    CUresult r = CUDA_SUCCESS;
    if (st == SUBLET_OK) {
        r = drv.EventDestroy(ev->ev);
        ctx_leave(c, pushed);
    }
    ev->magic = 0;
    free(ev);
    if (st != SUBLET_OK)
        return st;
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuEventDestroy", 0, 0);
    return SUBLET_OK;
}

static sublet_status cuda_event_record(sublet_backend *b, sublet_event *ev, sublet_stream stream)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !event_ok(c, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    CUresult r = drv.EventRecord(ev->ev, (CUstream)(uintptr_t)stream);
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuEventRecord(stream 0x%llx)", stream, 0);
    return SUBLET_OK;
}

static sublet_status cuda_event_query(sublet_backend *b, sublet_event *ev, int *done_out)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !event_ok(c, ev) || !done_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    CUresult r = drv.EventQuery(ev->ev);
    ctx_leave(c, pushed);
    if (r == CUDA_SUCCESS) {
        *done_out = 1;
        return SUBLET_OK;
    }
    if (r == CUDA_ERROR_NOT_READY) {
        *done_out = 0;
        return SUBLET_OK;
    }
    return cu_fail(c, r, "cuEventQuery", 0, 0);
}

static sublet_status cuda_event_synchronize(sublet_backend *b, sublet_event *ev)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !event_ok(c, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    CUresult r = drv.EventSynchronize(ev->ev);
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuEventSynchronize", 0, 0);
    return SUBLET_OK;
}

/* ---- memory info --------------------------------------------------------------------- */

static sublet_status cuda_mem_info(sublet_backend *b, uint64_t *free_out, uint64_t *total_out)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !free_out || !total_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    size_t fr = 0, tot = 0;
    CUresult r = drv.MemGetInfo(&fr, &tot);
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuMemGetInfo", 0, 0);
    *free_out = fr;
    *total_out = tot;
    return SUBLET_OK;
}

/* This process's use of the device, from NVML (src/nvml_query.c). */
static sublet_status cuda_process_mem(sublet_backend *b, uint64_t *used_out)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !used_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (!c->pci_bus_id[0])
        return SUBLET_ERR_UNSUPPORTED;
    char why[160] = "";
    return sl_nvml_process_used(c->pci_bus_id, (uint64_t)getpid(), used_out, why, sizeof why);
}

/* ---- virtual memory ------------------------------------------------------------------ */

/* Index of the reservation containing [addr, addr+size), or SIZE_MAX.  Lock held. */
static size_t resv_containing(const cuda_backend *c, uint64_t addr, uint64_t size)
{
    size_t lo = 0, hi = c->nresv;
    while (lo < hi) { /* first reservation with addr > `addr` */
        size_t mid = lo + (hi - lo) / 2;
        if (c->resv[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return SIZE_MAX;
    const va_resv *r = &c->resv[lo - 1];
    if (addr + size < addr || addr + size > r->addr + r->size)
        return SIZE_MAX;
    return lo - 1;
}

static void resv_free_arrays(va_resv *r)
{
    free(r->pages);
    free(r->used);
    r->pages = NULL;
    r->used = NULL;
}

static sublet_status cuda_va_reserve(sublet_backend *b, uint64_t size, uint64_t align,
                                     uint64_t *addr_out)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !c->vmm || !addr_out || size == 0 || (align & (align - 1)) != 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    const uint64_t g = c->gran;
    uint64_t rsize = (size + g - 1) / g * g;
    if (rsize < size)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (align < g)
        align = g;
    va_resv nr = {0};
    nr.size = rsize;
    nr.asked = size;
    nr.npages = (size_t)(rsize / g);
    nr.pages = calloc(nr.npages, sizeof nr.pages[0]);
    nr.used = calloc(nr.npages, 1);
    if (!nr.pages || !nr.used) {
        resv_free_arrays(&nr);
        return SUBLET_ERR_NO_MEMORY;
    }
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK) {
        resv_free_arrays(&nr);
        return st;
    }
    pthread_mutex_lock(&c->lock);
    if (c->nresv == c->cap_resv) {
        size_t cap = c->cap_resv ? c->cap_resv * 2 : 8;
        va_resv *v = realloc(c->resv, cap * sizeof *v);
        if (!v) {
            st = SUBLET_ERR_NO_MEMORY;
            goto out;
        }
        c->resv = v;
        c->cap_resv = cap;
    }
    CUdeviceptr p = 0;
    CUresult r = drv.MemAddressReserve(&p, (size_t)rsize, (size_t)align, 0, 0);
    if (r != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "cuMemAddressReserve(%llu, align %llu)",
                 (unsigned long long)rsize, (unsigned long long)align);
        set_err_locked(c, call, r);
        st = map_cu(r);
        goto out;
    }
    nr.addr = (uint64_t)p;
    size_t i = 0;
    while (i < c->nresv && c->resv[i].addr < nr.addr)
        i++;
    memmove(&c->resv[i + 1], &c->resv[i], (c->nresv - i) * sizeof c->resv[0]);
    c->resv[i] = nr;
    c->nresv++;
    nr.pages = NULL; /* owned by the table now */
    nr.used = NULL;
out:
    pthread_mutex_unlock(&c->lock);
    ctx_leave(c, pushed);
    resv_free_arrays(&nr);
    if (st != SUBLET_OK)
        return st;
    *addr_out = nr.addr;
    return SUBLET_OK;
}

static sublet_status cuda_va_release(sublet_backend *b, uint64_t addr, uint64_t size)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !c->vmm)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    size_t i = resv_containing(c, addr, 1);
    va_resv r = {0};
    if (i == SIZE_MAX || c->resv[i].addr != addr || c->resv[i].asked != size) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
    } else if (c->resv[i].mapped != 0) {
        st = SUBLET_ERR_BUSY;
    } else {
        r = c->resv[i];
        CUresult cr = drv.MemAddressFree((CUdeviceptr)r.addr, (size_t)r.size);
        if (cr != CUDA_SUCCESS) {
            char call[96];
            snprintf(call, sizeof call, "cuMemAddressFree(0x%llx, %llu)",
                     (unsigned long long)r.addr, (unsigned long long)r.size);
            set_err_locked(c, call, cr);
            st = map_cu(cr);
            r.pages = NULL;
            r.used = NULL;
        } else {
            memmove(&c->resv[i], &c->resv[i + 1], (c->nresv - i - 1) * sizeof c->resv[0]);
            c->nresv--;
        }
    }
    pthread_mutex_unlock(&c->lock);
    ctx_leave(c, pushed);
    resv_free_arrays(&r);
    return st;
}

/* Unmap and release pages [first, last) of r that are live.  Context current,
 * lock held.  Goes on past a failure; returns the first (recorded). */
static sublet_status unmap_pages(cuda_backend *c, va_resv *r, size_t first, size_t last)
{
    sublet_status st = SUBLET_OK;
    const uint64_t g = c->gran;
    char call[96];
    for (size_t p = first; p < last; p++) {
        if (!r->used[p])
            continue;
        uint64_t pa = r->addr + (uint64_t)p * g;
        CUresult cr = drv.MemUnmap((CUdeviceptr)pa, (size_t)g);
        if (cr != CUDA_SUCCESS) {
            snprintf(call, sizeof call, "cuMemUnmap(0x%llx, %llu)", (unsigned long long)pa,
                     (unsigned long long)g);
            set_err_locked(c, call, cr);
            if (st == SUBLET_OK)
                st = map_cu(cr);
            continue;
        }
        cr = drv.MemRelease(r->pages[p]);
        r->used[p] = 0;
        r->pages[p] = 0;
        r->mapped--;
        if (cr != CUDA_SUCCESS) {
            snprintf(call, sizeof call, "cuMemRelease(page 0x%llx)", (unsigned long long)pa);
            set_err_locked(c, call, cr);
            if (st == SUBLET_OK)
                st = map_cu(cr);
        }
    }
    return st;
}

/* The pages [first, last) of the reservation holding [addr, addr+size), or
 * SIZE_MAX when the range is misaligned or not inside one reservation. */
static size_t page_range(cuda_backend *c, uint64_t addr, uint64_t size, size_t *first,
                         size_t *last)
{
    const uint64_t g = c->gran;
    if (size == 0 || addr % g != 0 || size % g != 0)
        return SIZE_MAX;
    size_t i = resv_containing(c, addr, size);
    if (i == SIZE_MAX)
        return SIZE_MAX;
    *first = (size_t)((addr - c->resv[i].addr) / g);
    *last = *first + (size_t)(size / g);
    return i;
}

/* Read-write access for this device to [addr, addr + size), just mapped;
 * on failure the call is named in call. */
static CUresult set_access(cuda_backend *c, uint64_t addr, uint64_t size, char *call, size_t cap)
{
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = (int)c->dev;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult cr = drv.MemSetAccess((CUdeviceptr)addr, (size_t)size, &desc, 1);
    if (cr != CUDA_SUCCESS)
        snprintf(call, cap, "cuMemSetAccess(0x%llx, %llu)", (unsigned long long)addr,
                 (unsigned long long)size);
    return cr;
}

static sublet_status cuda_va_map(sublet_backend *b, uint64_t addr, uint64_t size)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !c->vmm || size == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    const uint64_t g = c->gran;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    size_t first = 0, last = 0;
    size_t i = page_range(c, addr, size, &first, &last);
    if (i == SIZE_MAX) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
        goto out;
    }
    va_resv *r = &c->resv[i];
    for (size_t p = first; p < last; p++) {
        if (r->used[p]) {
            st = SUBLET_ERR_INVALID_ARGUMENT; /* already mapped */
            goto out;
        }
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)c->dev;
    CUresult cr = CUDA_SUCCESS;
    char call[96] = "";
    size_t p;
    CUstreamCaptureMode mode = capture_relax();
    for (p = first; p < last; p++) {
        uint64_t pa = r->addr + (uint64_t)p * g;
        CUmemGenericAllocationHandle h = 0;
        cr = drv.MemCreate(&h, (size_t)g, &prop, 0);
        if (cr != CUDA_SUCCESS) {
            snprintf(call, sizeof call, "cuMemCreate(%llu) for page 0x%llx",
                     (unsigned long long)g, (unsigned long long)pa);
            break;
        }
        cr = drv.MemMap((CUdeviceptr)pa, (size_t)g, 0, h, 0);
        if (cr != CUDA_SUCCESS) {
            (void)drv.MemRelease(h);
            snprintf(call, sizeof call, "cuMemMap(0x%llx, %llu)", (unsigned long long)pa,
                     (unsigned long long)g);
            break;
        }
        r->pages[p] = h;
        r->used[p] = 1;
        r->mapped++;
    }
    if (cr == CUDA_SUCCESS)
        cr = set_access(c, addr, size, call, sizeof call);
    capture_restore(mode);
    if (cr != CUDA_SUCCESS) {
        (void)unmap_pages(c, r, first, last); /* undo this call's pages */
        set_err_locked(c, call, cr);          /* the cause, not the undo */
        st = map_cu(cr);
    }
out:
    pthread_mutex_unlock(&c->lock);
    ctx_leave(c, pushed);
    return st;
}

static sublet_status cuda_va_map_alias(sublet_backend *b, uint64_t dst, uint64_t src,
                                       uint64_t size)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !c->vmm || size == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (!drv.MemRetainAllocationHandle)
        return SUBLET_ERR_UNSUPPORTED; /* a driver before CUDA 11.0 */
    const uint64_t g = c->gran;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    size_t first = 0, last = 0, sfirst = 0, slast = 0;
    size_t i = page_range(c, dst, size, &first, &last);
    size_t si = page_range(c, src, size, &sfirst, &slast);
    if (i == SIZE_MAX || si == SIZE_MAX) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
        goto out;
    }
    va_resv *r = &c->resv[i];
    const va_resv *sr = &c->resv[si];
    for (size_t p = 0; p < last - first; p++) {
        if (r->used[first + p] || !sr->used[sfirst + p]) {
            st = SUBLET_ERR_INVALID_ARGUMENT; /* destination mapped or source not */
            goto out;
        }
    }
    CUresult cr = CUDA_SUCCESS;
    char call[96] = "";
    for (size_t p = 0; p < last - first; p++) {
        uint64_t pa = r->addr + (uint64_t)(first + p) * g;
        uint64_t sa = sr->addr + (uint64_t)(sfirst + p) * g;
        CUmemGenericAllocationHandle h = 0;
        cr = drv.MemRetainAllocationHandle(&h, (void *)(uintptr_t)sa);
        if (cr != CUDA_SUCCESS) {
            snprintf(call, sizeof call, "cuMemRetainAllocationHandle(0x%llx)",
                     (unsigned long long)sa);
            break;
        }
        cr = drv.MemMap((CUdeviceptr)pa, (size_t)g, 0, h, 0);
        if (cr != CUDA_SUCCESS) {
            (void)drv.MemRelease(h);
            snprintf(call, sizeof call, "cuMemMap(0x%llx, %llu) of the granule at 0x%llx",
                     (unsigned long long)pa, (unsigned long long)g, (unsigned long long)sa);
            break;
        }
        r->pages[first + p] = h;
        r->used[first + p] = 1;
        r->mapped++;
    }
    if (cr == CUDA_SUCCESS)
        cr = set_access(c, dst, size, call, sizeof call);
    if (cr != CUDA_SUCCESS) {
        (void)unmap_pages(c, r, first, last); /* undo this call's pages (and references) */
        set_err_locked(c, call, cr);
        st = map_cu(cr);
    }
out:
    pthread_mutex_unlock(&c->lock);
    ctx_leave(c, pushed);
    return st;
}

static sublet_status cuda_va_unmap(sublet_backend *b, uint64_t addr, uint64_t size)
{
    cuda_backend *c = as_cuda(b);
    if (!c || !c->vmm || size == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    size_t first = 0, last = 0;
    size_t i = page_range(c, addr, size, &first, &last);
    if (i == SIZE_MAX) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
        goto out;
    }
    va_resv *r = &c->resv[i];
    for (size_t p = first; p < last; p++) {
        if (!r->used[p]) {
            st = SUBLET_ERR_INVALID_ARGUMENT; /* not (all) mapped */
            goto out;
        }
    }
    CUresult cr = drv.CtxSynchronize();
    if (cr != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "cuCtxSynchronize before cuMemUnmap(0x%llx, %llu)",
                 (unsigned long long)addr, (unsigned long long)size);
        set_err_locked(c, call, cr);
        st = map_cu(cr);
        goto out;
    }
    st = unmap_pages(c, r, first, last);
out:
    pthread_mutex_unlock(&c->lock);
    ctx_leave(c, pushed);
    return st;
}

/* ---- lifetime -------------------------------------------------------------------------- */

static void cuda_destroy(sublet_backend *b)
{
    cuda_backend *c = as_cuda(b);
    if (!c)
        return;
    int pushed = 0;
    int have_ctx = ctx_enter(c, &pushed) == SUBLET_OK;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nresv; i++) {
        va_resv *r = &c->resv[i];
        if (have_ctx) {
            (void)unmap_pages(c, r, 0, r->npages);
            (void)drv.MemAddressFree((CUdeviceptr)r->addr, (size_t)r->size);
        }
        resv_free_arrays(r);
    }
    free(c->resv);
    pthread_mutex_unlock(&c->lock);
    if (have_ctx)
        ctx_leave(c, pushed);
    (void)drv.DevicePrimaryCtxRelease(c->dev);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static const sublet_backend_ops cuda_ops = {
    .segment_alloc = cuda_segment_alloc,
    .segment_free = cuda_segment_free,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .mem_info = cuda_mem_info,
    .process_mem = cuda_process_mem,
    .destroy = cuda_destroy,
};

static const sublet_backend_ops cuda_ops_vmm = {
    .segment_alloc = cuda_segment_alloc,
    .segment_free = cuda_segment_free,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .mem_info = cuda_mem_info,
    .process_mem = cuda_process_mem,
    .va_reserve = cuda_va_reserve,
    .va_release = cuda_va_release,
    .va_map = cuda_va_map,
    .va_unmap = cuda_va_unmap,
    .va_map_alias = cuda_va_map_alias,
    .destroy = cuda_destroy,
};

int sublet_cuda_built(void)
{
    return 1;
}

int sublet_cuda_driver_version(void)
{
    return drv_ready(NULL, 0) == SUBLET_OK ? drv.version : 0;
}

sublet_status sublet_cuda_device_count(int *count, char *err, size_t err_cap)
{
    if (!count)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *count = 0;
    sublet_status st = drv_ready(err, err_cap);
    if (st != SUBLET_OK)
        return drv.no_device ? SUBLET_OK : st;
    int n = 0;
    CUresult r = drv.DeviceGetCount(&n);
    if (r != CUDA_SUCCESS) {
        if (err && err_cap)
            format_cu_error(err, err_cap, "cuDeviceGetCount", r);
        return SUBLET_ERR_BACKEND;
    }
    *count = n;
    return SUBLET_OK;
}

sublet_status sublet_cuda_create(int device, sublet_backend **out, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!out || device < 0) {
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "sublet_cuda_create: %s",
                       out ? "negative device ordinal" : "NULL out");
    }
    *out = NULL;
    sublet_status st = drv_ready(err, err_cap);
    if (st != SUBLET_OK)
        return st;
    int n = 0;
    CUresult r = drv.DeviceGetCount(&n);
    if (r != CUDA_SUCCESS) {
        if (err && err_cap)
            format_cu_error(err, err_cap, "cuDeviceGetCount", r);
        return map_cu(r) == SUBLET_ERR_BACKEND ? SUBLET_ERR_BACKEND : SUBLET_ERR_UNSUPPORTED;
    }
    if (n == 0 || device >= n) {
        if (err && err_cap) {
            if (n == 0)
                sl_msg(err, err_cap, "no CUDA device: the driver reports none");
            else
                sl_msg(err, err_cap, "no CUDA device %d: the driver reports %d device%s",
                       device, n, n == 1 ? "" : "s");
        }
        return SUBLET_ERR_UNSUPPORTED;
    }
    cuda_backend *c = calloc(1, sizeof *c);
    if (!c)
        return SUBLET_ERR_NO_MEMORY;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return SUBLET_ERR_NO_MEMORY;
    }
    r = drv.DeviceGet(&c->dev, device);
    if (r == CUDA_SUCCESS)
        r = drv.DevicePrimaryCtxRetain(&c->ctx, c->dev);
    if (r != CUDA_SUCCESS) {
        if (err && err_cap) {
            char call[64];
            snprintf(call, sizeof call, "cuDevicePrimaryCtxRetain(device %d)", device);
            format_cu_error(err, err_cap, call, r);
        }
        pthread_mutex_destroy(&c->lock);
        free(c);
        return map_cu(r) == SUBLET_ERR_DEVICE_OOM ? SUBLET_ERR_DEVICE_OOM : SUBLET_ERR_BACKEND;
    }
    if (drv.DeviceGetName(c->devname, (int)sizeof c->devname, c->dev) != CUDA_SUCCESS)
        snprintf(c->devname, sizeof c->devname, "CUDA device %d", device);
    c->devname[sizeof c->devname - 1] = '\0';
    if (!drv.DeviceGetPCIBusId ||
        drv.DeviceGetPCIBusId(c->pci_bus_id, (int)sizeof c->pci_bus_id, c->dev) != CUDA_SUCCESS)
        c->pci_bus_id[0] = '\0';
    c->pci_bus_id[sizeof c->pci_bus_id - 1] = '\0';
    int vmm = 0;
    if (drv.has_vmm_api &&
        drv.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                               c->dev) == CUDA_SUCCESS &&
        vmm) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = (int)c->dev;
        size_t g = 0;
        if (drv.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                CUDA_SUCCESS &&
            g != 0 && (g & (g - 1)) == 0) {
            c->vmm = 1;
            c->gran = g;
        }
    }
    c->base.ops = c->vmm ? &cuda_ops_vmm : &cuda_ops;
    c->base.name = "cuda";
    c->base.device = device;
    *out = &c->base;
    return SUBLET_OK;
}

int sublet_is_cuda(const sublet_backend *b)
{
    return as_cuda((sublet_backend *)b) != NULL;
}

size_t sublet_cuda_last_error(sublet_backend *b, char *buf, size_t cap)
{
    cuda_backend *c = as_cuda(b);
    if (!c)
        return (size_t)snprintf(buf, cap, "%s", "");
    pthread_mutex_lock(&c->lock);
    int n = snprintf(buf, cap, "%s", c->last_err);
    pthread_mutex_unlock(&c->lock);
    return n < 0 ? 0 : (size_t)n;
}

size_t sublet_cuda_device_name(sublet_backend *b, char *buf, size_t cap)
{
    cuda_backend *c = as_cuda(b);
    int n = snprintf(buf, cap, "%s", c ? c->devname : "");
    return n < 0 ? 0 : (size_t)n;
}

int sublet_cuda_has_vmm(const sublet_backend *b)
{
    const cuda_backend *c = as_cuda((sublet_backend *)b);
    return c ? c->vmm : 0;
}

uint64_t sublet_cuda_granularity(const sublet_backend *b)
{
    const cuda_backend *c = as_cuda((sublet_backend *)b);
    return c && c->vmm ? c->gran : 0;
}

sublet_status sublet_cuda_synchronize(sublet_backend *b)
{
    cuda_backend *c = as_cuda(b);
    if (!c)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pushed;
    sublet_status st = ctx_enter(c, &pushed);
    if (st != SUBLET_OK)
        return st;
    CUresult r = drv.CtxSynchronize();
    ctx_leave(c, pushed);
    if (r != CUDA_SUCCESS)
        return cu_fail(c, r, "cuCtxSynchronize", 0, 0);
    return SUBLET_OK;
}

#else /* !SUBLET_HAVE_CUDA_H: the stub */

#define SL_CUDA_NOT_BUILT                                                                     \
    "no CUDA support in this build of sublet: the CUDA toolkit's cuda.h was not found at "   \
    "configure time (install CUDA and reconfigure with -DSUBLET_CUDA=ON)"

int sublet_cuda_built(void)
{
    return 0;
}

int sublet_cuda_driver_version(void)
{
    return 0;
}

sublet_status sublet_cuda_device_count(int *count, char *err, size_t err_cap)
{
    if (!count)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *count = 0;
    return sl_fail(err, err_cap, SUBLET_ERR_UNSUPPORTED, "%s", SL_CUDA_NOT_BUILT);
}

sublet_status sublet_cuda_create(int device, sublet_backend **out, char *err, size_t err_cap)
{
    (void)device;
    if (out)
        *out = NULL;
    sl_msg(err, err_cap, "%s", SL_CUDA_NOT_BUILT);
    return out ? SUBLET_ERR_UNSUPPORTED : SUBLET_ERR_INVALID_ARGUMENT;
}

int sublet_is_cuda(const sublet_backend *b)
{
    (void)b;
    return 0;
}

size_t sublet_cuda_last_error(sublet_backend *b, char *buf, size_t cap)
{
    (void)b;
    if (buf && cap)
        buf[0] = '\0';
    return 0;
}

size_t sublet_cuda_device_name(sublet_backend *b, char *buf, size_t cap)
{
    (void)b;
    if (buf && cap)
        buf[0] = '\0';
    return 0;
}

int sublet_cuda_has_vmm(const sublet_backend *b)
{
    (void)b;
    return 0;
}

uint64_t sublet_cuda_granularity(const sublet_backend *b)
{
    (void)b;
    return 0;
}

sublet_status sublet_cuda_synchronize(sublet_backend *b)
{
    (void)b;
    return SUBLET_ERR_UNSUPPORTED;
}

#endif
