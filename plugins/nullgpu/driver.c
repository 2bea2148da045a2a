/* sublet — the null device: the driver API (see nullgpu.h).
 *
 * The entry points a runtime program finds through
 * cudaGetDriverEntryPointByVersion (PyTorch's expandable segments: the
 * virtual-memory calls) and those a library binds from libcuda.so.1 by
 * name.  The virtual-memory rules are the driver's: reservations, physical
 * allocations and mappings in 2 MiB granules; a mapping maps a whole
 * allocation inside a reservation without overlap; an unmap covers whole
 * mappings; a physical allocation counts against the device's memory from
 * cuMemCreate until its last reference is released and its mapping
 * unmapped; cuMemRetainAllocationHandle adds a reference.  One device
 * (CUdevice 0) with one context, its primary one, current in every thread. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "nullgpu.h"

#define ND_CONTEXT ((CUcontext)(uintptr_t)0x5c0000000010ull)

static CUresult drv_init(nd_device **d)
{
    *d = nd_dev();
    return (*d)->ok ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* ---- initialisation, versions, errors ------------------------------------------------ */

CUresult cuInit(unsigned int flags)
{
    nd_device *d;
    return flags ? CUDA_ERROR_INVALID_VALUE : drv_init(&d);
}

CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult e, const char **s)
{
    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "operation not supported"; break;
    case CUDA_ERROR_ALREADY_MAPPED: *s = "resource already mapped"; break;
    case CUDA_ERROR_NOT_MAPPED: *s = "resource not mapped"; break;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult e, const char **s)
{
    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_ALREADY_MAPPED: *s = "CUDA_ERROR_ALREADY_MAPPED"; break;
    case CUDA_ERROR_NOT_MAPPED: *s = "CUDA_ERROR_NOT_MAPPED"; break;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---- the device and its context ---------------------------------------------------------- */

CUresult cuDeviceGetCount(int *n)
{
    nd_device *d;
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = drv_init(&d) == CUDA_SUCCESS ? 1 : 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    nd_device *d;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (drv_init(&d) != CUDA_SUCCESS)
        return CUDA_ERROR_NO_DEVICE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    nd_device *d;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (drv_init(&d) != CUDA_SUCCESS || dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    nd_device *d;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (drv_init(&d) != CUDA_SUCCESS || dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = d->total;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    memcpy(uuid->bytes, "sublet-nullgpu-0", 16);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
        *value = 1;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
        *value = 0;
        return CUDA_SUCCESS;
    default:
        /* the runtime's attributes share the driver's numbers */
        if (cudaDeviceGetAttribute(value, (enum cudaDeviceAttr)attr, 0) == cudaSuccess)
            return CUDA_SUCCESS;
        (void)cudaGetLastError();
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = 1;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = ND_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = ND_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    return ctx == NULL || ctx == ND_CONTEXT ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return ctx == ND_CONTEXT ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxPopCurrent(CUcontext *ctx)
{
    if (ctx)
        *ctx = ND_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    return cudaDeviceSynchronize() == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* ---- memory -------------------------------------------------------------------------------- */

CUresult cuMemGetInfo(size_t *free_out, size_t *total_out)
{
    return cudaMemGetInfo(free_out, total_out) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuMemAlloc(CUdeviceptr *p, size_t n)
{
    void *v;
    cudaError_t e;
    if (!p || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    e = cudaMalloc(&v, n);
    (void)cudaGetLastError();
    if (e == cudaErrorStreamCaptureUnsupported)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (e != cudaSuccess)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)v;
    return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p)
{
    cudaError_t e = cudaFree((void *)(uintptr_t)p);
    (void)cudaGetLastError();
    return e == cudaSuccess ? CUDA_SUCCESS
           : e == cudaErrorStreamCaptureUnsupported ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                                                    : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    nd_device *d = nd_dev();
    const sl_rtree_entry *e;
    uint64_t b = 0, s = 0;
    nd_lock(d);
    e = sl_rtree_containing(&d->ranges, p);
    if (e && e->tag == ND_RANGE_SEGMENT) {
        b = e->addr;
        s = e->size;
    } else if ((e = sl_rtree_containing(&d->maps, p)) != NULL) {
        b = e->addr;
        s = e->size;
    }
    nd_unlock(d);
    if (!s)
        return CUDA_ERROR_NOT_FOUND;
    if (base)
        *base = b;
    if (size)
        *size = s;
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
    nd_device *d = nd_dev();
    CUdeviceptr b;
    size_t s;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nd_is_device(d, (void *)(uintptr_t)p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_DEVICE; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = p; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = ND_CONTEXT; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        if (cuMemGetAddressRange(&b, &s, p) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *(CUdeviceptr *)data = b;
        else
            *(size_t *)data = s;
        return CUDA_SUCCESS;
    default:
        {
        char what[64];
        snprintf(what, sizeof what, "cuPointerGetAttribute(attribute %d)", (int)attr);
        nd_unsupported("CUDA driver", what);
    }
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* ---- virtual memory ----------------------------------------------------------------------------- */

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    (void)option;
    if (!g || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *g = ND_GRANULE;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags)
{
    nd_device *d;
    uint64_t a = 0;
    CUresult r = CUDA_SUCCESS;
    (void)addr; /* a hint: the placement is first fit */
    if (!ptr || size == 0 || size % ND_GRANULE || (align & (align - 1)) || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (drv_init(&d) != CUDA_SUCCESS)
        return CUDA_ERROR_NO_DEVICE;
    nd_lock(d);
    if (!sl_rtree_reserve(&d->ranges) ||
        d->sim->ops->va_reserve(d->sim, size, align > ND_GRANULE ? align : ND_GRANULE, &a) != SUBLET_OK) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (a + size > d->base + d->span) {
        d->sim->ops->va_release(d->sim, a, size);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        sl_rtree_insert(&d->ranges, a, size, ND_RANGE_VA);
        *ptr = a;
    }
    nd_unlock(d);
    return r;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    nd_device *d = nd_dev();
    const sl_rtree_entry *e;
    CUresult r = CUDA_SUCCESS;
    nd_lock(d);
    e = sl_rtree_find(&d->ranges, ptr);
    if (!e || e->tag != ND_RANGE_VA || e->size != size)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (d->sim->ops->va_release(d->sim, ptr, size) != SUBLET_OK)
        r = CUDA_ERROR_INVALID_VALUE; /* still mapped */
    else
        sl_rtree_remove(&d->ranges, ptr, size, ND_RANGE_VA);
    nd_unlock(d);
    return r;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    nd_device *d;
    uint64_t h;
    CUresult r = CUDA_SUCCESS;
    if (!handle || !prop || size == 0 || size % ND_GRANULE || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (drv_init(&d) != CUDA_SUCCESS)
        return CUDA_ERROR_NO_DEVICE;
    nd_lock(d);
    if (size > d->total || nd_mem_used(d) > d->total - size) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if ((h = nd_handle_new(d, ND_PHYS)) == 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        nd_phys *p = &nd_handle_get(d, h, ND_PHYS)->u.phys;
        p->size = size;
        p->refs = 1;
        d->pending += size;
        *handle = h;
    }
    nd_unlock(d);
    return r;
}

/* Forget a physical allocation once it has no reference and no mapping. */
static void phys_maybe_free(nd_device *d, uint64_t h)
{
    nd_slot *s = nd_handle_get(d, h, ND_PHYS);
    if (s && s->u.phys.refs == 0 && !s->u.phys.mapped) {
        d->pending -= s->u.phys.size;
        nd_handle_free(d, h);
    }
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    nd_device *d = nd_dev();
    nd_slot *s;
    CUresult r = CUDA_SUCCESS;
    nd_lock(d);
    s = nd_handle_get(d, handle, ND_PHYS);
    if (!s || s->u.phys.refs <= 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        s->u.phys.refs--;
        phys_maybe_free(d, handle);
    }
    nd_unlock(d);
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    nd_device *d = nd_dev();
    nd_slot *s;
    const sl_rtree_entry *va;
    CUresult r = CUDA_SUCCESS;
    if (flags || offset || size == 0 || size % ND_GRANULE || ptr % ND_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    nd_lock(d);
    s = nd_handle_get(d, handle, ND_PHYS);
    va = sl_rtree_containing(&d->ranges, ptr);
    if (!s || s->u.phys.refs <= 0 || s->u.phys.size != size)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (s->u.phys.mapped) /* one mapping per allocation here */
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!va || va->tag != ND_RANGE_VA || ptr + size > va->addr + va->size)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (sl_rtree_overlaps(&d->maps, ptr, size))
        r = CUDA_ERROR_ALREADY_MAPPED;
    else if (!sl_rtree_reserve(&d->maps))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        d->pending -= size; /* counted by the sim from here */
        if (d->sim->ops->va_map(d->sim, ptr, size) != SUBLET_OK) {
            d->pending += size;
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            s->u.phys.mapped = ptr;
            sl_rtree_insert(&d->maps, ptr, size, (uintptr_t)handle);
        }
    }
    nd_unlock(d);
    return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    nd_device *d = nd_dev();
    CUresult r = CUDA_SUCCESS;
    uint64_t at = ptr;
    if (size == 0 || size % ND_GRANULE || ptr % ND_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    nd_lock(d);
    /* every byte mapped, by whole mappings only */
    while (at < ptr + size) {
        const sl_rtree_entry *m = sl_rtree_find(&d->maps, at);
        if (!m || m->addr + m->size > ptr + size) {
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        at = m->addr + m->size;
    }
    if (r == CUDA_SUCCESS && d->sim->ops->va_unmap(d->sim, ptr, size) != SUBLET_OK)
        r = CUDA_ERROR_INVALID_VALUE;
    for (at = ptr; r == CUDA_SUCCESS && at < ptr + size;) {
        const sl_rtree_entry *m = sl_rtree_find(&d->maps, at);
        uint64_t h = m->tag, next = m->addr + m->size, msize = m->size;
        nd_slot *s = nd_handle_get(d, h, ND_PHYS);
        sl_rtree_remove(&d->maps, at, msize, (uintptr_t)h);
        if (s) {
            s->u.phys.mapped = 0;
            d->pending += msize; /* back from the sim's count until released */
            phys_maybe_free(d, h);
        }
        at = next;
    }
    nd_unlock(d);
    return r;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    nd_device *d = nd_dev();
    CUresult r = CUDA_SUCCESS;
    uint64_t at = ptr;
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    nd_lock(d);
    while (at < ptr + size) {
        const sl_rtree_entry *m = sl_rtree_containing(&d->maps, at);
        if (!m) {
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        at = m->addr + m->size;
    }
    nd_unlock(d);
    return r;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    nd_device *d = nd_dev();
    const sl_rtree_entry *m;
    CUresult r = CUDA_SUCCESS;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    nd_lock(d);
    m = sl_rtree_containing(&d->maps, (uint64_t)(uintptr_t)addr);
    if (!m) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        nd_slot *s = nd_handle_get(d, m->tag, ND_PHYS);
        s->u.phys.refs++;
        *handle = m->tag;
    }
    nd_unlock(d);
    return r;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    nd_device *d = nd_dev();
    int ok;
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    nd_lock(d);
    ok = nd_handle_get(d, handle, ND_PHYS) != NULL;
    nd_unlock(d);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = 0;
    return CUDA_SUCCESS;
}

/* ---- work on streams ---------------------------------------------------------------------------- */

static CUresult stream_work(CUstream s)
{
    nd_device *d = nd_dev();
    uint64_t h = (uint64_t)(uintptr_t)s;
    CUresult r = CUDA_SUCCESS;
    nd_lock(d);
    if (h > 2 && !nd_handle_get(d, h, ND_STREAM))
        r = CUDA_ERROR_INVALID_HANDLE;
    else
        nd_stream_work(d, h);
    nd_unlock(d);
    return r;
}

CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    (void)value, (void)flags;
    if (!nd_is_device(nd_dev(), (void *)(uintptr_t)addr, 4))
        return CUDA_ERROR_INVALID_VALUE;
    return stream_work(s);
}

CUresult cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s)
{
    (void)v;
    if (n && !nd_is_device(nd_dev(), (void *)(uintptr_t)p, n * 4))
        return CUDA_ERROR_INVALID_VALUE;
    return stream_work(s);
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)v;
    if (n && !nd_is_device(nd_dev(), (void *)(uintptr_t)p, n))
        return CUDA_ERROR_INVALID_VALUE;
    return stream_work(s);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
                        void **extra)
{
    (void)params, (void)extra;
    if (!f || !gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024 || shared > 232448)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_work(s);
}

/* ---- streams, events and captures: the runtime's, in the driver's words ------------------- */

/* The runtime and the driver number their common errors alike (invalid
 * value, out of memory, invalid handle, not ready, the capture errors). */
static CUresult drv_of(cudaError_t e)
{
    (void)cudaGetLastError(); /* a driver call leaves the runtime's last error alone */
    switch ((int)e) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorNoDevice: return CUDA_ERROR_NO_DEVICE;
    default: return (CUresult)e;
    }
}

CUresult cuDeviceGetPCIBusId(char *pci, int len, CUdevice dev)
{
    return drv_of(cudaDeviceGetPCIBusId(pci, len, dev));
}

CUresult cuEventCreate(CUevent *ev, unsigned int flags)
{
    return drv_of(cudaEventCreateWithFlags((cudaEvent_t *)ev, flags));
}

CUresult cuEventDestroy(CUevent ev)
{
    return drv_of(cudaEventDestroy((cudaEvent_t)ev));
}

CUresult cuEventRecord(CUevent ev, CUstream s)
{
    return drv_of(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s));
}

CUresult cuEventRecordWithFlags(CUevent ev, CUstream s, unsigned int flags)
{
    return drv_of(cudaEventRecordWithFlags((cudaEvent_t)ev, (cudaStream_t)s, flags));
}

CUresult cuEventQuery(CUevent ev)
{
    return drv_of(cudaEventQuery((cudaEvent_t)ev));
}

CUresult cuEventSynchronize(CUevent ev)
{
    return drv_of(cudaEventSynchronize((cudaEvent_t)ev));
}

CUresult cuStreamSynchronize(CUstream s)
{
    return drv_of(cudaStreamSynchronize((cudaStream_t)s));
}

CUresult cuStreamQuery(CUstream s)
{
    return drv_of(cudaStreamQuery((cudaStream_t)s));
}

CUresult cuStreamWaitEvent(CUstream s, CUevent ev, unsigned int flags)
{
    return drv_of(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, flags));
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return drv_of(cudaStreamIsCapturing((cudaStream_t)s, (enum cudaStreamCaptureStatus *)status));
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    return drv_of(cudaThreadExchangeStreamCaptureMode((enum cudaStreamCaptureMode *)mode));
}

/* ---- driver logs: none are written, so a callback is never called ---------------------------- */

CUresult cuLogsRegisterCallback(CUlogsCallback cb, void *user, CUlogsCallbackHandle *handle)
{
    (void)user;
    if (!cb || !handle)
        return CUDA_ERROR_INVALID_VALUE;
    *handle = (CUlogsCallbackHandle)(uintptr_t)0x5e0000000010ull;
    return CUDA_SUCCESS;
}

CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle handle)
{
    return handle ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- entry points --------------------------------------------------------------------------------- */

/* The generated stubs' table (stubs.c): every driver entry point not above. */
void *nd_driver_stub(const char *name);

#define E(n) {#n, (void *)n}
static const struct {
    const char *name;
    void *fn;
} entries[] = {
    E(cuInit), E(cuDriverGetVersion), E(cuGetErrorString), E(cuGetErrorName), E(cuDeviceGetCount),
    E(cuDeviceGet), E(cuDeviceGetName), E(cuDeviceTotalMem), E(cuDeviceGetUuid), E(cuDeviceGetAttribute),
    E(cuDevicePrimaryCtxGetState), E(cuDevicePrimaryCtxRetain), E(cuDevicePrimaryCtxRelease),
    E(cuCtxGetCurrent), E(cuCtxSetCurrent), E(cuCtxPushCurrent), E(cuCtxPopCurrent), E(cuCtxGetDevice),
    E(cuCtxSynchronize), E(cuMemGetInfo), E(cuMemAlloc), E(cuMemFree), E(cuMemGetAddressRange),
    E(cuPointerGetAttribute), E(cuMemGetAllocationGranularity), E(cuMemAddressReserve),
    E(cuMemAddressFree), E(cuMemCreate), E(cuMemRelease), E(cuMemMap), E(cuMemUnmap), E(cuMemSetAccess),
    E(cuMemRetainAllocationHandle), E(cuMemGetAllocationPropertiesFromHandle), E(cuStreamWriteValue32),
    E(cuMemsetD32Async), E(cuMemsetD8Async), E(cuLaunchKernel), E(cuGetProcAddress), E(cuLogsRegisterCallback), E(cuLogsUnregisterCallback),
    E(cuDeviceGetPCIBusId), E(cuEventCreate), E(cuEventDestroy), E(cuEventRecord), E(cuEventRecordWithFlags),
    E(cuEventQuery), E(cuEventSynchronize), E(cuStreamSynchronize), E(cuStreamQuery), E(cuStreamWaitEvent),
    E(cuStreamIsCapturing), E(cuThreadExchangeStreamCaptureMode),
};
#undef E

void *nd_driver_symbol(const char *name, int version)
{
    (void)version; /* each entry point here has its newest ABI */
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (strcmp(entries[i].name, name) == 0)
            return entries[i].fn;
    return nd_driver_stub(name);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = nd_driver_symbol(symbol, version);
    if (status)
        *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    (void)flags;
    if (!symbol || !fn)
        return (cudaError_t)nd_rt_fail(cudaErrorInvalidValue);
    *fn = nd_driver_symbol(symbol, (int)version);
    if (status)
        *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

/* Not declared by CUDA 13's header (deprecated there), still exported by its runtime. */
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status)
{
    return cudaGetDriverEntryPointByVersion(symbol, fn, 13000, flags, status);
}
