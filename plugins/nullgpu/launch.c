/* sublet — the null device: kernels (see nullgpu.h).
 *
 * The fat binaries a program registers at start-up are accepted and
 * forgotten (a library like PyTorch's registers thousands of kernels before
 * main).  A launch checks its stream and its configuration, is counted as a
 * node when the stream is capturing, and runs nothing.  Function attributes
 * and occupancy give an H100's answers for a kernel with no registers or
 * shared memory of its own.  Host functions queued on a stream run at once
 * (the stream has no work before them), or become a node of a capture. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <string.h>

#include "nullgpu.h"

/* Not in cuda_runtime_api.h: the compiler's launch and registration hooks
 * (crt/host_runtime.h and crt/device_functions.h declare them for C++). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int threadLimit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global);
char __cudaInitModule(void **handle);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);

static void *fatbin_handle = &fatbin_handle; /* one for all: nothing is kept */

void **__cudaRegisterFatBinary(void *fatCubin)
{
    (void)fatCubin;
    return &fatbin_handle;
}

void __cudaRegisterFatBinaryEnd(void **handle)
{
    (void)handle;
}

void __cudaUnregisterFatBinary(void **handle)
{
    (void)handle;
}

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int threadLimit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)threadLimit;
    (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global)
{
    (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName, (void)ext;
    (void)size, (void)constant, (void)global;
}

void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)handle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName, (void)ext;
    (void)size, (void)constant, (void)global;
}

char __cudaInitModule(void **handle)
{
    (void)handle;
    return 1;
}

/* The configuration of the launch a <<<...>>> is about to make, per thread
 * (launches nest only through the push/pop pair). */
static _Thread_local struct {
    dim3 grid, block;
    size_t shared;
    void *stream;
    int pushed;
} conf;

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream)
{
    conf.grid = gridDim;
    conf.block = blockDim;
    conf.shared = sharedMem;
    conf.stream = stream;
    conf.pushed = 1;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    if (!conf.pushed)
        return cudaErrorMissingConfiguration;
    conf.pushed = 0;
    *gridDim = conf.grid;
    *blockDim = conf.block;
    *sharedMem = conf.shared;
    *(void **)stream = conf.stream;
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun)
{
    if (!kernel || !fun)
        return cudaErrorInvalidValue;
    *kernel = (cudaKernel_t)fun; /* opaque to the caller: the host stub's address */
    return cudaSuccess;
}

static cudaError_t launch(dim3 grid, dim3 block, size_t shared, cudaStream_t s)
{
    nd_device *d = nd_dev();
    uint64_t h = (uint64_t)(uintptr_t)s;
    cudaError_t e = cudaSuccess;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
        (uint64_t)block.x * block.y * block.z > 1024 || block.z > 64 || grid.y > 65535 || grid.z > 65535 ||
        shared > 232448)
        return nd_rt_fail(cudaErrorInvalidConfiguration);
    nd_lock(d);
    if (h > 2 && !nd_handle_get(d, h, ND_STREAM))
        e = cudaErrorInvalidResourceHandle;
    else
        nd_stream_work(d, h);
    nd_unlock(d);
    return nd_rt_fail(e);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream)
{
    (void)kernel, (void)args;
    return launch(gridDim, blockDim, sharedMem, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream)
{
    return __cudaLaunchKernel(kernel, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                             cudaStream_t stream)
{
    (void)func, (void)args;
    return launch(gridDim, blockDim, sharedMem, stream);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                        size_t sharedMem, cudaStream_t stream)
{
    return cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)func, (void)args;
    if (!config)
        return cudaErrorInvalidValue;
    return launch(config->gridDim, config->blockDim, config->dynamicSmemBytes, config->stream);
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *func)
{
    if (!a || !func)
        return cudaErrorInvalidDeviceFunction;
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = 90;
    a->binaryVersion = 90;
    a->maxDynamicSharedSizeBytes = 49152;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    (void)attr, (void)value;
    return func ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache config)
{
    (void)config;
    return func ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int blockSize,
                                                                   size_t smem, unsigned int flags)
{
    (void)func, (void)flags;
    if (!n || blockSize <= 0 || blockSize > 1024)
        return cudaErrorInvalidValue;
    *n = 2048 / blockSize;
    if (*n > 32)
        *n = 32;
    if (smem && (int)(233472 / smem) < *n)
        *n = (int)(233472 / smem);
    return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int blockSize,
                                                          size_t smem)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, blockSize, smem, 0);
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr, int value,
                                            int device)
{
    (void)attr, (void)value;
    if (!kernel)
        return cudaErrorInvalidDeviceFunction;
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

/* Device symbols (__device__ variables): a copy to or from one moves nothing. */
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    (void)offset, (void)kind;
    return symbol && (src || !count) ? cudaSuccess : cudaErrorInvalidSymbol;
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}

/* ---- host functions -------------------------------------------------------------- */

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user)
{
    nd_device *d = nd_dev();
    uint64_t h = (uint64_t)(uintptr_t)s;
    int capturing, ok;
    if (!fn)
        return cudaErrorInvalidValue;
    nd_lock(d);
    ok = h <= 2 || nd_handle_get(d, h, ND_STREAM);
    capturing = ok && nd_capturing(d, h) != NULL;
    if (ok)
        nd_stream_work(d, h);
    nd_unlock(d);
    if (!ok)
        return cudaErrorInvalidResourceHandle;
    if (!capturing)
        fn(user);
    return cudaSuccess;
}

cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *user, unsigned int flags)
{
    nd_device *d = nd_dev();
    uint64_t h = (uint64_t)(uintptr_t)s;
    int ok;
    if (!cb || flags != 0)
        return cudaErrorInvalidValue;
    nd_lock(d);
    ok = h <= 2 || nd_handle_get(d, h, ND_STREAM);
    if (ok && nd_capturing(d, h)) {
        nd_unlock(d);
        return cudaErrorStreamCaptureUnsupported;
    }
    nd_unlock(d);
    if (!ok)
        return cudaErrorInvalidResourceHandle;
    cb(s, cudaSuccess, user);
    return cudaSuccess;
}
