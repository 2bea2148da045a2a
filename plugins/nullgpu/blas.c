/* sublet — the null device: cuBLAS handles (see blas.h).
 *
 * A handle is a handle number holding its settings: the stream, the
 * workspace the program gives it (cublasSetWorkspace: PyTorch's, from its
 * caching allocator), the math, pointer and atomics modes and the SM count
 * target.  The null device never allocates device memory for cuBLAS: a
 * real cuBLAS with no workspace set allocates its own with cudaMallocAsync
 * (PyTorch always sets one); that is not modelled.  Versions are those of
 * the real libcublas.so.13 PyTorch's wheel ships. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "blas.h"
#include "nullgpu.h"

static uint64_t hv(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* ---- shared with blaslt.c and blas_calls.c ----------------------------------------- */

size_t nd_blas_type_size(int type)
{
    switch (type) {
    case 0: /* CUDA_R_32F */
    case 10: /* CUDA_R_32I */
    case 6: /* CUDA_C_16F */
    case 15: /* CUDA_C_16BF */
    case 12: /* CUDA_R_32U */
        return 4;
    case 1: /* CUDA_R_64F */
    case 4: /* CUDA_C_32F */
    case 11: /* CUDA_C_32I */
    case 20: /* CUDA_R_64I */
    case 22: /* CUDA_R_64U */
        return 8;
    case 5: /* CUDA_C_64F */
        return 16;
    case 2: /* CUDA_R_16F */
    case 14: /* CUDA_R_16BF */
    case 7: /* CUDA_C_8I */
    case 9: /* CUDA_C_8U */
    case 26: /* CUDA_R_16I */
    case 24: /* CUDA_R_16U */
        return 2;
    case 3: /* CUDA_R_8I */
    case 8: /* CUDA_R_8U */
    case 16: /* CUDA_R_4I */
    case 18: /* CUDA_R_4U */
    case 28: /* CUDA_R_8F_E4M3 */
    case 29: /* CUDA_R_8F_E5M2 */
    case 30: /* CUDA_R_8F_UE8M0 */
    case 31: /* CUDA_R_6F_E2M3 */
    case 32: /* CUDA_R_6F_E3M2 */
    case 33: /* CUDA_R_4F_E2M1 */
        return 1;
    default:
        return 0;
    }
}

int nd_blas_bad(const char *call, const char *param, long long value)
{
    fprintf(stderr, "sublet nullgpu: cuBLAS call %s: parameter %s had an illegal value (%lld): "
                    "CUBLAS_STATUS_INVALID_VALUE\n", call, param, value);
    return ND_BLAS_INVALID_VALUE;
}

int nd_blas_settings(const void *h, uint64_t *stream, int *pointer_mode)
{
    nd_device *d = nd_dev();
    nd_slot *s;
    nd_lock(d);
    s = nd_handle_get(d, hv(h), ND_BLAS);
    if (s) {
        if (stream)
            *stream = s->u.blas.stream;
        if (pointer_mode)
            *pointer_mode = s->u.blas.pointer_mode;
    }
    nd_unlock(d);
    return s != NULL;
}

int nd_blas_valid(const void *h)
{
    return nd_blas_settings(h, NULL, NULL);
}

static int not_device(const char *call, const char *which, const void *p, uint64_t bytes)
{
    fprintf(stderr, "sublet nullgpu: cuBLAS call %s: %s [%p, +%llu bytes) is not device memory: "
                    "its kernel would fault (CUBLAS_STATUS_EXECUTION_FAILED)\n", call, which, p,
            (unsigned long long)bytes);
    return ND_BLAS_EXECUTION_FAILED;
}

int nd_blas_matrix(const char *call, const char *which, const void *p, const nd_layout *l)
{
    size_t size = l->size;
    int64_t rows = l->rows, cols = l->cols, ld = l->ld, batch = l->batch, stride = l->stride;
    uint64_t n;
    if (size == 0 || rows <= 0 || cols <= 0 || batch <= 0)
        return ND_BLAS_SUCCESS;
    if (stride < 0 || ld < rows) /* a layout the caller has checked otherwise: no extent to check */
        return ND_BLAS_SUCCESS;
    n = (uint64_t)(cols - 1) * (uint64_t)ld + (uint64_t)rows + (uint64_t)(batch - 1) * (uint64_t)stride;
    if (!p || !nd_is_device(nd_dev(), p, n * size))
        return not_device(call, which, p, n * size);
    return ND_BLAS_SUCCESS;
}

int nd_blas_array(const char *call, const char *which, const void *p, int64_t n)
{
    if (n > 0 && (!p || !nd_is_device(nd_dev(), p, (uint64_t)n * sizeof(void *))))
        return not_device(call, which, p, (uint64_t)n * sizeof(void *));
    return ND_BLAS_SUCCESS;
}

int nd_blas_launch(const char *call, uint64_t stream)
{
    nd_device *d = nd_dev();
    int ok;
    nd_lock(d);
    ok = stream <= 2 || nd_handle_get(d, stream, ND_STREAM) != NULL;
    if (ok)
        nd_stream_work(d, stream);
    nd_unlock(d);
    if (ok)
        return ND_BLAS_SUCCESS;
    fprintf(stderr, "sublet nullgpu: cuBLAS call %s: its stream %#llx is not a live stream "
                    "(CUBLAS_STATUS_EXECUTION_FAILED)\n", call, (unsigned long long)stream);
    return ND_BLAS_EXECUTION_FAILED;
}

/* ---- handles ---------------------------------------------------------------------- */

int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);
int cublasSetStream_v2(void *handle, void *stream);
int cublasGetStream_v2(void *handle, void **stream);
int cublasSetWorkspace_v2(void *handle, void *workspace, size_t size);
int cublasSetMathMode(void *handle, int mode);
int cublasGetMathMode(void *handle, int *mode);
int cublasSetPointerMode_v2(void *handle, int mode);
int cublasGetPointerMode_v2(void *handle, int *mode);
int cublasSetAtomicsMode(void *handle, int mode);
int cublasGetAtomicsMode(void *handle, int *mode);
int cublasSetSmCountTarget(void *handle, int count);
int cublasGetSmCountTarget(void *handle, int *count);
int cublasGetVersion_v2(void *handle, int *version);
int cublasGetProperty(int type, int *value);
size_t cublasGetCudartVersion(void);
const char *cublasGetStatusName(int status);
const char *cublasGetStatusString(int status);

int cublasCreate_v2(void **handle)
{
    nd_device *d = nd_dev();
    uint64_t h;
    if (!handle)
        return ND_BLAS_INVALID_VALUE;
    if (!d->ok)
        return ND_BLAS_NOT_INITIALIZED;
    nd_lock(d);
    h = nd_handle_new(d, ND_BLAS);
    nd_unlock(d);
    if (!h)
        return ND_BLAS_ALLOC_FAILED;
    *handle = (void *)(uintptr_t)h;
    return ND_BLAS_SUCCESS;
}

int cublasDestroy_v2(void *handle)
{
    nd_device *d = nd_dev();
    int ok;
    nd_lock(d);
    ok = nd_handle_get(d, hv(handle), ND_BLAS) != NULL;
    if (ok)
        nd_handle_free(d, hv(handle));
    nd_unlock(d);
    return ok ? ND_BLAS_SUCCESS : ND_BLAS_NOT_INITIALIZED;
}

/* The handle's settings under the lock, or NULL (the lock then released). */
static nd_blas *settings(nd_device *d, void *handle)
{
    nd_slot *s;
    nd_lock(d);
    s = nd_handle_get(d, hv(handle), ND_BLAS);
    if (!s) {
        nd_unlock(d);
        return NULL;
    }
    return &s->u.blas;
}

/* Any value is taken, as by cuBLAS: a stream that is not live fails the
 * calls that launch on it (nd_blas_launch). */
int cublasSetStream_v2(void *handle, void *stream)
{
    nd_device *d = nd_dev();
    nd_blas *b = settings(d, handle);
    if (!b)
        return ND_BLAS_NOT_INITIALIZED;
    b->stream = hv(stream);
    nd_unlock(d);
    return ND_BLAS_SUCCESS;
}

int cublasGetStream_v2(void *handle, void **stream)
{
    nd_device *d = nd_dev();
    nd_blas *b;
    if (!stream)
        return ND_BLAS_INVALID_VALUE;
    if (!(b = settings(d, handle)))
        return ND_BLAS_NOT_INITIALIZED;
    *stream = (void *)(uintptr_t)b->stream;
    nd_unlock(d);
    return ND_BLAS_SUCCESS;
}

/* cuBLAS takes a workspace 256-byte aligned (else CUBLAS_STATUS_INVALID_VALUE);
 * here it must also be device memory. */
int cublasSetWorkspace_v2(void *handle, void *workspace, size_t size)
{
    nd_device *d = nd_dev();
    nd_blas *b;
    if (!nd_blas_valid(handle))
        return ND_BLAS_NOT_INITIALIZED;
    if (size && !workspace)
        return nd_blas_bad("cublasSetWorkspace_v2", "workspace", 0);
    if (hv(workspace) % 256)
        return nd_blas_bad("cublasSetWorkspace_v2", "workspace (not 256-byte aligned)", (long long)hv(workspace));
    if (size && !nd_is_device(d, workspace, size))
        return nd_blas_matrix("cublasSetWorkspace_v2", "workspace", workspace,
                              &(nd_layout){1, (int64_t)size, 1, (int64_t)size, 1, 0});
    if (!(b = settings(d, handle)))
        return ND_BLAS_NOT_INITIALIZED;
    b->workspace = size ? hv(workspace) : 0;
    b->workspace_size = size;
    nd_unlock(d);
    return ND_BLAS_SUCCESS;
}

/* Set one of a handle's int settings (which: its offset) to v when valid. */
static int set_int(void *handle, size_t which, int v, int valid, const char *call, const char *param)
{
    nd_device *d = nd_dev();
    nd_blas *b = settings(d, handle);
    if (!b)
        return ND_BLAS_NOT_INITIALIZED;
    if (valid)
        *(int *)((char *)b + which) = v;
    nd_unlock(d);
    return valid ? ND_BLAS_SUCCESS : nd_blas_bad(call, param, v);
}

static int get_int(void *handle, size_t which, int *v)
{
    nd_device *d = nd_dev();
    nd_blas *b;
    if (!v)
        return ND_BLAS_INVALID_VALUE;
    if (!(b = settings(d, handle)))
        return ND_BLAS_NOT_INITIALIZED;
    *v = *(int *)((char *)b + which);
    nd_unlock(d);
    return ND_BLAS_SUCCESS;
}

/* cublasMath_t: DEFAULT 0, TENSOR_OP 1, PEDANTIC 2, TF32_TENSOR_OP 3,
 * FP32_EMULATED_BF16X9 4, FP64_EMULATED_FIXEDPOINT 8, each may carry
 * DISALLOW_REDUCED_PRECISION_REDUCTION (16). */
int cublasSetMathMode(void *handle, int mode)
{
    int m = mode & ~16;
    int valid = m == 0 || m == 1 || m == 2 || m == 3 || m == 4 || m == 8;
    return set_int(handle, offsetof(nd_blas, math_mode), mode, valid, "cublasSetMathMode", "mode");
}

int cublasGetMathMode(void *handle, int *mode)
{
    return get_int(handle, offsetof(nd_blas, math_mode), mode);
}

int cublasSetPointerMode_v2(void *handle, int mode)
{
    return set_int(handle, offsetof(nd_blas, pointer_mode), mode, mode == 0 || mode == 1,
                   "cublasSetPointerMode_v2", "mode");
}

int cublasGetPointerMode_v2(void *handle, int *mode)
{
    return get_int(handle, offsetof(nd_blas, pointer_mode), mode);
}

int cublasSetAtomicsMode(void *handle, int mode)
{
    return set_int(handle, offsetof(nd_blas, atomics_mode), mode, mode == 0 || mode == 1,
                   "cublasSetAtomicsMode", "mode");
}

int cublasGetAtomicsMode(void *handle, int *mode)
{
    return get_int(handle, offsetof(nd_blas, atomics_mode), mode);
}

/* 0: the device's count; a target above it is taken as it */
int cublasSetSmCountTarget(void *handle, int count)
{
    return set_int(handle, offsetof(nd_blas, sm_count), count, count >= 0, "cublasSetSmCountTarget",
                   "smCountTarget");
}

int cublasGetSmCountTarget(void *handle, int *count)
{
    return get_int(handle, offsetof(nd_blas, sm_count), count);
}

/* ---- versions and names (no handle needed, as in cuBLAS) ---------------------------- */

int cublasGetVersion_v2(void *handle, int *version)
{
    (void)handle;
    if (!version)
        return ND_BLAS_INVALID_VALUE;
    *version = ND_BLAS_VERSION;
    return ND_BLAS_SUCCESS;
}

/* libraryPropertyType: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2 */
int cublasGetProperty(int type, int *value)
{
    static const int v[3] = {ND_BLAS_MAJOR, ND_BLAS_MINOR, ND_BLAS_PATCH};
    if (!value || type < 0 || type > 2)
        return ND_BLAS_INVALID_VALUE;
    *value = v[type];
    return ND_BLAS_SUCCESS;
}

size_t cublasGetCudartVersion(void)
{
    return ND_BLAS_CUDART;
}

static const struct {
    int status;
    const char *name, *text;
} statuses[] = {
    {0, "CUBLAS_STATUS_SUCCESS", "the operation completed successfully"},
    {1, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {3, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {7, "CUBLAS_STATUS_INVALID_VALUE", "an unsupported value or parameter was passed to the function"},
    {8, "CUBLAS_STATUS_ARCH_MISMATCH", "the function requires a feature absent from the device architecture"},
    {11, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {13, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {14, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {15, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {16, "CUBLAS_STATUS_LICENSE_ERROR", "an error was detected when checking the current licensing"},
};

const char *nd_blas_status_name(int status, int text)
{
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].status == status)
            return text ? statuses[i].text : statuses[i].name;
    return text ? "unknown error" : "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusName(int status)
{
    return nd_blas_status_name(status, 0);
}

const char *cublasGetStatusString(int status)
{
    return nd_blas_status_name(status, 1);
}
