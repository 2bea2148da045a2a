/* sublet — the null device: the CUDA runtime's device, memory, stream and
 * event calls (see nullgpu.h; kernels in launch.c, captures and graphs in
 * graphs.c).
 *
 * One device, number 0.  Memory: cudaMalloc places a segment in the
 * device's address space (2 MiB pages, as the driver rounds large
 * allocations) and counts it; cudaMemGetInfo answers from that count.
 * Copies and memsets do not touch device memory: a copy from the device to
 * the host writes zeros, one from host to host copies, anything else only
 * checks its arguments.  Pinned host memory (cudaHostAlloc, cudaMallocHost)
 * is real host memory.  Streams and events are handles; work is done the
 * moment it is queued, so an event is complete once recorded (unless
 * SUBLET_NULLGPU_EVENT_POLLS asks for "not ready" answers first), and
 * synchronisation returns at once.  Inside a capture the runtime's rules
 * hold: a potentially unsafe call (cudaMalloc, cudaFree, a synchronisation,
 * a query) from a thread whose capture mode forbids it fails with
 * cudaErrorStreamCaptureUnsupported and invalidates the capture, and an
 * event recorded in a capture cannot be queried or waited on from the host. */
#define _GNU_SOURCE
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nullgpu.h"

static _Thread_local cudaError_t last_error;

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

int nd_rt_fail(int e)
{
    return (int)ret((cudaError_t)e);
}

/* A stream argument: 0 (legacy), cudaStreamLegacy, cudaStreamPerThread or a
 * live handle. */
static int stream_ok(nd_device *d, cudaStream_t s)
{
    uint64_t h = (uint64_t)(uintptr_t)s;
    return h <= 2 || nd_handle_get(d, h, ND_STREAM) != NULL;
}

/* ---- errors ------------------------------------------------------------------- */

static const struct {
    int code;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not initiated in this stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
};

const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e)
            return errors[i].name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e)
            return errors[i].text;
    return "unrecognized error code";
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

/* ---- the device ------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return ret(cudaErrorInvalidValue);
    *count = nd_dev()->ok ? 1 : 0;
    return nd_dev()->ok ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return ret(cudaErrorInvalidValue);
    *device = 0;
    return nd_dev()->ok ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    if (!nd_dev()->ok)
        return ret(cudaErrorNoDevice);
    return device == 0 ? cudaSuccess : ret(cudaErrorInvalidDevice);
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    (void)deviceFlags;
    (void)flags;
    return cudaSetDevice(device);
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    (void)flags;
    return nd_dev()->ok ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
    if (!flags)
        return ret(cudaErrorInvalidValue);
    *flags = 0;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v)
        return ret(cudaErrorInvalidValue);
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v)
        return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    nd_device *d = nd_dev();
    if (!p)
        return ret(cudaErrorInvalidValue);
    if (device != 0 || !d->ok)
        return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", d->name);
    memcpy(p->uuid.bytes, "sublet-nullgpu-0", 16);
    p->totalGlobalMem = d->total;
    p->sharedMemPerBlock = 49152;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = d->major;
    p->minor = d->minor;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = d->sms;
    p->canMapHostMemory = 1;
    p->surfaceAlignment = 512;
    p->concurrentKernels = 1;
    p->ECCEnabled = 1;
    p->pciBusID = 0x1b;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 << 20;
    p->persistingL2CacheMaxSize = 30 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->computePreemptionSupported = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = 232448;
    p->maxBlocksPerMultiProcessor = 32;
    p->accessPolicyMaxWindowSize = 134213632;
    p->reservedSharedMemPerBlock = 1024;
    p->hostRegisterSupported = 1;
    p->memoryPoolsSupported = 1;
    p->clusterLaunch = 1;
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    nd_device *d = nd_dev();
    struct cudaDeviceProp p;
    if (!value)
        return ret(cudaErrorInvalidValue);
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess)
        return ret(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = d->major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = d->minor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = 0; break;
    case cudaDevAttrPciDomainId: *value = 0; break;
    case cudaDevAttrClockRate: *value = 1980000; break;
    case cudaDevAttrMemoryClockRate: *value = 2619000; break;
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrManagedMemory:
    case cudaDevAttrCooperativeLaunch:
    case cudaDevAttrComputePreemptionSupported:
    case cudaDevAttrStreamPrioritiesSupported:
    case cudaDevAttrGlobalL1CacheSupported:
    case cudaDevAttrLocalL1CacheSupported:
    case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrHostRegisterSupported:
    case cudaDevAttrEccEnabled:
    case cudaDevAttrClusterLaunch:
        *value = 1;
        break;
    case cudaDevAttrIntegrated:
    case cudaDevAttrKernelExecTimeout:
    case cudaDevAttrTccDriver:
    case cudaDevAttrIsMultiGpuBoard:
    case cudaDevAttrPageableMemoryAccess:
    case cudaDevAttrConcurrentManagedAccess:
    case cudaDevAttrDirectManagedMemAccessFromHost:
    case cudaDevAttrComputeMode:
    case cudaDevAttrGPUDirectRDMASupported:
    case cudaDevAttrIpcEventSupport:
        *value = 0;
        break;
    default: {
        char what[64];
        snprintf(what, sizeof what, "cudaDeviceGetAttribute(attribute %d)", (int)attr);
        nd_unsupported("CUDA runtime", what);
        return ret(cudaErrorNotSupported);
    }
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pci, int len, int device)
{
    if (!pci || len <= 0)
        return ret(cudaErrorInvalidValue);
    if (device != 0)
        return ret(cudaErrorInvalidDevice);
    snprintf(pci, (size_t)len, "0000:1B:00.0");
    return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pci)
{
    if (!device || !pci)
        return ret(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    if (!can)
        return ret(cudaErrorInvalidValue);
    if (device != 0 || peer != 0)
        return ret(cudaErrorInvalidDevice);
    *can = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    (void)peer;
    (void)flags;
    return ret(cudaErrorPeerAccessUnsupported);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    if (least)
        *least = 0;
    if (greatest)
        *greatest = -5;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    nd_device *d = nd_dev();
    cudaError_t e = cudaSuccess;
    nd_lock(d);
    if (nd_capture_forbids(d))
        e = cudaErrorStreamCaptureUnsupported;
    nd_unlock(d);
    return ret(e);
}

cudaError_t cudaDeviceReset(void)
{
    return cudaSuccess;
}

cudaError_t cudaProfilerStart(void)
{
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void)
{
    return cudaSuccess;
}

/* ---- device memory ----------------------------------------------------------------- */

cudaError_t cudaMalloc(void **p, size_t n)
{
    nd_device *d = nd_dev();
    uint64_t a = 0;
    int r;
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    if (n == 0)
        return cudaSuccess;
    nd_lock(d);
    if (nd_capture_forbids(d)) {
        nd_unlock(d);
        return ret(cudaErrorStreamCaptureUnsupported);
    }
    r = nd_mem_alloc(d, n, &a);
    nd_unlock(d);
    if (r)
        return ret(cudaErrorMemoryAllocation);
    *p = (void *)(uintptr_t)a;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    nd_device *d = nd_dev();
    int r;
    nd_lock(d);
    if (nd_capture_forbids(d)) {
        nd_unlock(d);
        return ret(cudaErrorStreamCaptureUnsupported);
    }
    r = p ? nd_mem_free(d, (uint64_t)(uintptr_t)p) : 0;
    nd_unlock(d);
    return r ? ret(cudaErrorInvalidValue) : cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    nd_device *d = nd_dev();
    uint64_t a = 0;
    int r;
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    nd_lock(d);
    if (!stream_ok(d, s)) {
        nd_unlock(d);
        return ret(cudaErrorInvalidResourceHandle);
    }
    r = n ? nd_mem_alloc(d, n, &a) : 0;
    nd_stream_work(d, (uint64_t)(uintptr_t)s);
    nd_unlock(d);
    if (r)
        return ret(cudaErrorMemoryAllocation);
    *p = (void *)(uintptr_t)a;
    return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    nd_device *d = nd_dev();
    int r;
    nd_lock(d);
    if (!stream_ok(d, s)) {
        nd_unlock(d);
        return ret(cudaErrorInvalidResourceHandle);
    }
    r = p ? nd_mem_free(d, (uint64_t)(uintptr_t)p) : 0;
    nd_stream_work(d, (uint64_t)(uintptr_t)s);
    nd_unlock(d);
    return r ? ret(cudaErrorInvalidValue) : cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_out, size_t *total_out)
{
    nd_device *d = nd_dev();
    uint64_t used;
    if (!d->ok)
        return ret(cudaErrorNoDevice);
    nd_lock(d);
    used = nd_mem_used(d);
    nd_unlock(d);
    if (free_out)
        *free_out = used < d->total ? d->total - used : 0;
    if (total_out)
        *total_out = d->total;
    return cudaSuccess;
}

/* ---- host memory ------------------------------------------------------------------- */

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    if (n == 0)
        return cudaSuccess;
    if (posix_memalign(p, 4096, n) != 0) {
        *p = NULL;
        return ret(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
    return cudaHostAlloc(p, n, 0);
}

cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t n, unsigned int flags)
{
    (void)flags;
    return p && n ? cudaSuccess : ret(cudaErrorInvalidValue);
}

cudaError_t cudaHostUnregister(void *p)
{
    return p ? cudaSuccess : ret(cudaErrorInvalidValue);
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags)
{
    (void)flags;
    if (!dev || !host)
        return ret(cudaErrorInvalidValue);
    *dev = host;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    nd_device *d = nd_dev();
    if (!a)
        return ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    a->device = 0;
    if (nd_is_device(d, p, 1)) {
        a->type = cudaMemoryTypeDevice;
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
    }
    return cudaSuccess;
}

/* ---- copies and memsets -------------------------------------------------------------- */

/* A copy's effect on the host: zeros from the device, bytes from the host. */
static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    nd_device *d = nd_dev();
    int ddev, sdev;
    if (n == 0)
        return cudaSuccess;
    if (!dst || !src)
        return ret(cudaErrorInvalidValue);
    ddev = nd_is_device(d, dst, n);
    sdev = nd_is_device(d, src, n);
    switch (kind) {
    case cudaMemcpyHostToHost: if (ddev || sdev) return ret(cudaErrorInvalidValue); break;
    case cudaMemcpyHostToDevice: if (!ddev || sdev) return ret(cudaErrorInvalidValue); break;
    case cudaMemcpyDeviceToHost: if (ddev || !sdev) return ret(cudaErrorInvalidValue); break;
    case cudaMemcpyDeviceToDevice: if (!ddev || !sdev) return ret(cudaErrorInvalidValue); break;
    case cudaMemcpyDefault: break;
    default: return ret(cudaErrorInvalidMemcpyDirection);
    }
    if (!ddev && sdev)
        memset(dst, 0, n);
    else if (!ddev && !sdev)
        memmove(dst, src, n);
    return cudaSuccess;
}

static cudaError_t queued(cudaStream_t s)
{
    nd_device *d = nd_dev();
    cudaError_t e = cudaSuccess;
    nd_lock(d);
    if (!stream_ok(d, s))
        e = cudaErrorInvalidResourceHandle;
    else
        nd_stream_work(d, (uint64_t)(uintptr_t)s);
    nd_unlock(d);
    return ret(e);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return copy(dst, src, n, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    cudaError_t e = queued(s);
    return e ? e : copy(dst, src, n, kind);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    cudaError_t e = queued(s);
    if (e)
        return e;
    if (width > dpitch || width > spitch)
        return ret(cudaErrorInvalidValue);
    for (size_t r = 0; r < height && !e; r++)
        e = copy((char *)dst + r * dpitch, (const char *)src + r * spitch, width, kind);
    return e;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n,
                                cudaStream_t s)
{
    cudaError_t e = queued(s);
    if (e)
        return e;
    if (ddev != 0 || sdev != 0)
        return ret(cudaErrorInvalidDevice);
    return copy(dst, src, n, cudaMemcpyDeviceToDevice);
}

static cudaError_t set(void *p, size_t n)
{
    if (n && !nd_is_device(nd_dev(), p, n))
        return ret(cudaErrorInvalidValue);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
    (void)v;
    return set(p, n);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    cudaError_t e = queued(s);
    (void)v;
    return e ? e : set(p, n);
}

/* ---- streams -------------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority)
{
    nd_device *d = nd_dev();
    uint64_t h;
    if (!s)
        return ret(cudaErrorInvalidValue);
    nd_lock(d);
    h = d->ok ? nd_handle_new(d, ND_STREAM) : 0;
    if (h) {
        nd_stream *st = &nd_handle_get(d, h, ND_STREAM)->u.stream;
        st->flags = flags;
        st->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
    }
    nd_unlock(d);
    if (!h)
        return ret(cudaErrorMemoryAllocation);
    *s = (cudaStream_t)(uintptr_t)h;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    return cudaStreamCreateWithPriority(s, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithPriority(s, 0, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    nd_device *d = nd_dev();
    uint64_t h = (uint64_t)(uintptr_t)s;
    cudaError_t e = cudaSuccess;
    nd_lock(d);
    if (!nd_handle_get(d, h, ND_STREAM))
        e = cudaErrorInvalidResourceHandle;
    else
        nd_handle_free(d, h);
    nd_unlock(d);
    return ret(e);
}

cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    if (!priority)
        return ret(cudaErrorInvalidValue);
    nd_lock(d);
    sl = nd_handle_get(d, (uint64_t)(uintptr_t)s, ND_STREAM);
    *priority = sl ? sl->u.stream.priority : 0;
    nd_unlock(d);
    return stream_ok(d, s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    if (!flags)
        return ret(cudaErrorInvalidValue);
    nd_lock(d);
    sl = nd_handle_get(d, (uint64_t)(uintptr_t)s, ND_STREAM);
    *flags = sl ? sl->u.stream.flags : 0;
    nd_unlock(d);
    return stream_ok(d, s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device)
{
    if (!device)
        return ret(cudaErrorInvalidValue);
    *device = 0;
    return stream_ok(nd_dev(), s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

/* A host-side wait on (or query of) a stream: its work is done at once, so
 * both answer alike; refused on a capturing stream, which it invalidates. */
static cudaError_t host_wait(cudaStream_t s)
{
    nd_device *d = nd_dev();
    cudaError_t e = cudaSuccess;
    nd_stream *st;
    nd_lock(d);
    if (!stream_ok(d, s))
        e = cudaErrorInvalidResourceHandle;
    else if ((st = nd_capturing(d, (uint64_t)(uintptr_t)s)) != NULL) {
        st->capture = ND_CAPTURE_INVALIDATED;
        e = cudaErrorStreamCaptureUnsupported;
    } else if (nd_capture_forbids(d))
        e = cudaErrorStreamCaptureUnsupported;
    nd_unlock(d);
    return ret(e);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return host_wait(s);
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    return host_wait(s);
}

/* ---- events ---------------------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    nd_device *d = nd_dev();
    uint64_t h;
    if (!ev)
        return ret(cudaErrorInvalidValue);
    nd_lock(d);
    h = d->ok ? nd_handle_new(d, ND_EVENT) : 0;
    if (h)
        nd_handle_get(d, h, ND_EVENT)->u.event.flags = flags;
    nd_unlock(d);
    if (!h)
        return ret(cudaErrorMemoryAllocation);
    *ev = (cudaEvent_t)(uintptr_t)h;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    return cudaEventCreateWithFlags(ev, 0);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    nd_device *d = nd_dev();
    uint64_t h = (uint64_t)(uintptr_t)ev;
    cudaError_t e = cudaSuccess;
    nd_lock(d);
    if (!nd_handle_get(d, h, ND_EVENT))
        e = cudaErrorInvalidResourceHandle;
    else
        nd_handle_free(d, h);
    nd_unlock(d);
    return ret(e);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t s, unsigned int flags)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    cudaError_t e = cudaSuccess;
    (void)flags;
    nd_lock(d);
    sl = nd_handle_get(d, (uint64_t)(uintptr_t)ev, ND_EVENT);
    if (!sl || !stream_ok(d, s)) {
        e = cudaErrorInvalidResourceHandle;
    } else if (nd_capturing(d, (uint64_t)(uintptr_t)s)) {
        sl->u.event.in_capture = 1; /* a node of the graph, not a host-visible record */
        sl->u.event.capture_stream = (uint64_t)(uintptr_t)s;
        nd_stream_work(d, (uint64_t)(uintptr_t)s);
    } else {
        sl->u.event.in_capture = 0;
        sl->u.event.recorded = 1;
        sl->u.event.polls_left = d->event_polls;
    }
    nd_unlock(d);
    return ret(e);
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    return cudaEventRecordWithFlags(ev, s, 0);
}

static cudaError_t event_wait(cudaEvent_t ev, int query)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    cudaError_t e = cudaSuccess;
    nd_lock(d);
    sl = nd_handle_get(d, (uint64_t)(uintptr_t)ev, ND_EVENT);
    if (!sl)
        e = cudaErrorInvalidResourceHandle;
    else if (sl->u.event.in_capture)
        e = cudaErrorCapturedEvent;
    else if (nd_capture_forbids(d))
        e = cudaErrorStreamCaptureUnsupported;
    else if (query && sl->u.event.polls_left > 0) {
        sl->u.event.polls_left--;
        e = cudaErrorNotReady;
    } else
        sl->u.event.polls_left = 0;
    nd_unlock(d);
    /* NOT_READY is an answer, not an error: it does not stick as the last error */
    return e == cudaErrorNotReady ? e : ret(e);
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    return event_wait(ev, 1);
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    return event_wait(ev, 0);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    nd_device *d = nd_dev();
    nd_slot *x, *y;
    cudaError_t e = cudaSuccess;
    if (!ms)
        return ret(cudaErrorInvalidValue);
    nd_lock(d);
    x = nd_handle_get(d, (uint64_t)(uintptr_t)a, ND_EVENT);
    y = nd_handle_get(d, (uint64_t)(uintptr_t)b, ND_EVENT);
    if (!x || !y || (x->u.event.flags & cudaEventDisableTiming) || (y->u.event.flags & cudaEventDisableTiming))
        e = cudaErrorInvalidResourceHandle;
    else if (!x->u.event.recorded || !y->u.event.recorded)
        e = cudaErrorInvalidResourceHandle;
    nd_unlock(d);
    *ms = 0.0f; /* nothing runs: no time passes on the device */
    return ret(e);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    nd_device *d = nd_dev();
    cudaError_t e = cudaSuccess;
    (void)flags;
    nd_lock(d);
    if (!stream_ok(d, s) || !nd_handle_get(d, (uint64_t)(uintptr_t)ev, ND_EVENT)) {
        e = cudaErrorInvalidResourceHandle;
    } else {
        nd_capture_join(d, (uint64_t)(uintptr_t)s, (uint64_t)(uintptr_t)ev);
        nd_stream_work(d, (uint64_t)(uintptr_t)s);
    }
    nd_unlock(d);
    return ret(e);
}
