/* sublet — the null device: what its cuBLAS (blas.c) and cuBLASLt
 * (blaslt.c) share.
 *
 * Our own declarations of the few facts of the two APIs the emulation
 * needs (statuses, operations, data types), from the public documentation;
 * the libraries' headers are not used.  Handles are handle numbers
 * (nullgpu.h), a cuBLAS handle being also a cuBLASLt one, as in the real
 * library.  A call is checked as cuBLAS checks it, does no work and counts
 * as a launch on its stream (a node when the stream is capturing). */
#ifndef SUBLET_NULLGPU_BLAS_H
#define SUBLET_NULLGPU_BLAS_H

#include <stddef.h>
#include <stdint.h>

/* cublasStatus_t */
enum {
    ND_BLAS_SUCCESS = 0,
    ND_BLAS_NOT_INITIALIZED = 1,
    ND_BLAS_ALLOC_FAILED = 3,
    ND_BLAS_INVALID_VALUE = 7,
    ND_BLAS_EXECUTION_FAILED = 13,
    ND_BLAS_NOT_SUPPORTED = 15,
};

/* The libraries the wheel of PyTorch 2.14.1 (CUDA 13) ships: nvidia-cublas
 * 13.1.1.3, built against the CUDA 13.0 runtime (what the real
 * cublasGetVersion, cublasLtGetVersion and cublasLtGetCudartVersion answer). */
#define ND_BLAS_VERSION 130101
#define ND_BLAS_MAJOR 13
#define ND_BLAS_MINOR 1
#define ND_BLAS_PATCH 1
#define ND_BLAS_CUDART 13000

/* cublasOperation_t */
enum { ND_OP_N = 0, ND_OP_T = 1, ND_OP_C = 2 };
/* cublasPointerMode_t */
enum { ND_POINTER_HOST = 0, ND_POINTER_DEVICE = 1 };

/* The size in bytes of an element of a cudaDataType (sub-byte types round
 * up to 1); 0 when the type is not one of CUDA's. */
size_t nd_blas_type_size(int type);

/* A parameter cuBLAS rejects: named on stderr (as cuBLAS's own "On entry
 * to ... had an illegal value" line) and CUBLAS_STATUS_INVALID_VALUE. */
int nd_blas_bad(const char *call, const char *param, long long value);

/* A status's name (CUBLAS_STATUS_...) or, text != 0, its description. */
const char *nd_blas_status_name(int status, int text);

/* 1 when h is a live cuBLAS (or cuBLASLt) handle. */
int nd_blas_valid(const void *h);
/* A handle's settings, copied; 0 when it is not live. */
int nd_blas_settings(const void *h, uint64_t *stream, int *pointer_mode);

/* A matrix's layout: rows x cols elements of `size` bytes, leading
 * dimension ld, `batch` of them `stride` elements apart. */
typedef struct nd_layout {
    size_t size;
    int64_t rows, cols, ld, batch, stride;
} nd_layout;

/* A matrix of layout l at p must lie in device memory; else it is named on
 * stderr and the call fails as its kernel would
 * (CUBLAS_STATUS_EXECUTION_FAILED).  size 0: not checked. */
int nd_blas_matrix(const char *call, const char *which, const void *p, const nd_layout *l);
/* An array of n device pointers (the batched calls'). */
int nd_blas_array(const char *call, const char *which, const void *p, int64_t n);

/* The launch of a call's kernel on `stream`: a stream destroyed since is an
 * execution failure; the work counts as a node when the stream captures. */
int nd_blas_launch(const char *call, uint64_t stream);

#endif
