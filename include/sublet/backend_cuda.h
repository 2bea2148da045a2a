/* sublet — the `cuda` backend: a real NVIDIA GPU through the CUDA driver API.
 *
 * The driver (libcuda.so.1) is loaded at run time with dlopen and its entry
 * points are looked up with cuGetProcAddress, so neither the library nor a
 * program using it links against CUDA: on a machine without a driver or
 * without a device, sublet_cuda_create() returns SUBLET_ERR_UNSUPPORTED with
 * a message saying which ("no CUDA driver (libcuda.so.1) found: ...",
 * "no CUDA device: ...") and nothing else changes.  When sublet was built
 * without the toolkit's cuda.h, the backend is a stub whose create always
 * returns SUBLET_ERR_UNSUPPORTED and says so.
 *
 * What it does, per backend (one device):
 *   segments   cuMemAlloc / cuMemFree in the device's primary context (the
 *              context the CUDA runtime, hence PyTorch, uses), made current
 *              around each call when the calling thread has another one;
 *   events     cuEventCreate(CU_EVENT_DISABLE_TIMING), cuEventRecord on the
 *              stream (a cudaStream_t / CUstream as an integer), cuEventQuery
 *              (CUDA_ERROR_NOT_READY = not done), cuEventSynchronize;
 *   mem_info   cuMemGetInfo;
 *   VMM        when the device supports it: cuMemAddressReserve /
 *              cuMemAddressFree for reservations, and for va_map one physical
 *              page (cuMemCreate of the allocation granularity, pinned device
 *              memory, no shareable handle) per granule, cuMemMap'd one by one
 *              and made read-write with cuMemSetAccess; va_unmap synchronises
 *              the context and then cuMemUnmap + cuMemRelease page by page, so
 *              any page-aligned sub-range can be unmapped.  Ranges passed to
 *              va_map/va_unmap must be multiples of sublet_cuda_granularity().
 *
 * Errors: the driver's CUresult is mapped to a sublet_status
 * (CUDA_ERROR_OUT_OF_MEMORY -> SUBLET_ERR_DEVICE_OOM, CUDA_ERROR_INVALID_VALUE
 * / _HANDLE -> SUBLET_ERR_INVALID_ARGUMENT, CUDA_ERROR_NOT_SUPPORTED ->
 * SUBLET_ERR_UNSUPPORTED, anything else -> SUBLET_ERR_BACKEND) and the call,
 * the error's name (cuGetErrorName) and description are kept in the
 * backend's last-error text.  Nothing here prints or aborts. */
#ifndef SUBLET_BACKEND_CUDA_H
#define SUBLET_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build of sublet has the cuda backend (cuda.h was found at
 * configure time), 0 when the backend is a stub. */
SUBLET_API int sublet_cuda_built(void);

/* Number of CUDA devices.  SUBLET_ERR_UNSUPPORTED, with the reason in err,
 * when there is no driver (or only the toolkit's stub library); a driver
 * with no device gives SUBLET_OK and *count = 0. */
SUBLET_API sublet_status sublet_cuda_device_count(int *count, char *err, size_t err_cap);

/* Create the backend for `device` (an ordinal as cudaSetDevice takes).  Retains
 * the device's primary context (released by sublet_backend_destroy).
 * SUBLET_ERR_UNSUPPORTED with a clear message in err when there is no driver
 * or no such device; SUBLET_ERR_BACKEND with the driver's error name when the
 * driver fails; SUBLET_ERR_INVALID_ARGUMENT for a NULL out. */
SUBLET_API sublet_status sublet_cuda_create(int device, sublet_backend **out, char *err,
                                            size_t err_cap);

/* Is `b` a cuda backend? */
SUBLET_API int sublet_is_cuda(const sublet_backend *b);

/* The last driver error seen by this backend ("cuMemAlloc(1073741824):
 * CUDA_ERROR_OUT_OF_MEMORY (out of memory)"), "" when none.  snprintf
 * semantics; thread-safe. */
SUBLET_API size_t sublet_cuda_last_error(sublet_backend *b, char *buf, size_t cap);

/* Device name as the driver reports it ("NVIDIA H200"); snprintf semantics. */
SUBLET_API size_t sublet_cuda_device_name(sublet_backend *b, char *buf, size_t cap);

/* VMM: 1 when the device supports virtual memory management (the va_* ops
 * are then present), and the page size used by va_map (the allocation
 * granularity, typically 2 MiB); 0 without VMM. */
SUBLET_API int sublet_cuda_has_vmm(const sublet_backend *b);
SUBLET_API uint64_t sublet_cuda_granularity(const sublet_backend *b);

/* Wait for all work on the device (cuCtxSynchronize in the primary context). */
SUBLET_API sublet_status sublet_cuda_synchronize(sublet_backend *b);

/* Driver version as cuDriverGetVersion reports it (e.g. 13000), 0 when no
 * driver could be loaded. */
SUBLET_API int sublet_cuda_driver_version(void);

#ifdef __cplusplus
}
#endif
#endif
