/* sublet — the null device: the cuBLAS computations PyTorch calls (see blas.h).
 *
 * gemm (S, D, C, Z, SgemmEx, GemmEx), its strided-batched and
 * pointer-array batched forms, gemv, dot (and DotEx), trsm (and its batched
 * form) and the batched LU, QR and least-squares solvers.  Each checks its
 * arguments in cuBLAS's order (the handle, then each parameter: a negative
 * dimension, an operation not N/T/C, a leading dimension below its rows, a
 * zero increment, a missing scalar are CUBLAS_STATUS_INVALID_VALUE, named
 * on stderr as cuBLAS names them), returns at once when there is nothing
 * to do, checks that the matrices lie in device memory, and counts as a
 * kernel launch on the handle's stream.  Nothing is computed: a dot product
 * into host memory reads 0. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "blas.h"
#include "nullgpu.h"

#define MAX1(x) ((x) > 1 ? (x) : 1)

static int op_ok(int op)
{
    return op == ND_OP_N || op == ND_OP_T || op == ND_OP_C;
}

/* One gemm, batched or not; A, B and C are NULL for the pointer-array form
 * (arrays: the three device arrays of pointers). */
typedef struct nd_gemm {
    const char *call;
    const void *handle;
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldc, batch;
    int64_t sa, sb, sc;           /* strides between matrices, elements */
    const void *alpha, *beta;
    const void *A, *B, *C;
    const void *const *arrays;    /* pointer-array batched: A, B, C arrays */
    size_t ea, eb, ec;            /* element sizes, 0: unknown */
} nd_gemm;

static int gemm_args(const nd_gemm *g)
{
    if (!nd_blas_valid(g->handle))
        return ND_BLAS_NOT_INITIALIZED;
    if (!op_ok(g->ta))
        return nd_blas_bad(g->call, "transa", g->ta);
    if (!op_ok(g->tb))
        return nd_blas_bad(g->call, "transb", g->tb);
    if (g->m < 0)
        return nd_blas_bad(g->call, "m", g->m);
    if (g->n < 0)
        return nd_blas_bad(g->call, "n", g->n);
    if (g->k < 0)
        return nd_blas_bad(g->call, "k", g->k);
    if (g->lda < MAX1(g->ta == ND_OP_N ? g->m : g->k))
        return nd_blas_bad(g->call, "lda", g->lda);
    if (g->ldb < MAX1(g->tb == ND_OP_N ? g->k : g->n))
        return nd_blas_bad(g->call, "ldb", g->ldb);
    if (g->ldc < MAX1(g->m))
        return nd_blas_bad(g->call, "ldc", g->ldc);
    if (g->batch < 0)
        return nd_blas_bad(g->call, "batchCount", g->batch);
    if (!g->alpha)
        return nd_blas_bad(g->call, "alpha", 0);
    if (!g->beta)
        return nd_blas_bad(g->call, "beta", 0);
    return ND_BLAS_SUCCESS;
}

static int gemm(const nd_gemm *g)
{
    uint64_t stream = 0;
    int e = gemm_args(g);
    if (e || g->m == 0 || g->n == 0 || g->batch == 0)
        return e;
    if (g->arrays) {
        if ((e = nd_blas_array(g->call, "Aarray", g->arrays[0], g->batch)) ||
            (e = nd_blas_array(g->call, "Barray", g->arrays[1], g->batch)) ||
            (e = nd_blas_array(g->call, "Carray", g->arrays[2], g->batch)))
            return e;
    } else {
        int64_t ar = g->ta == ND_OP_N ? g->m : g->k, ac = g->ta == ND_OP_N ? g->k : g->m;
        int64_t br = g->tb == ND_OP_N ? g->k : g->n, bc = g->tb == ND_OP_N ? g->n : g->k;
        if ((e = nd_blas_matrix(g->call, "A", g->A, &(nd_layout){g->ea, ar, ac, g->lda, g->batch, g->sa})) ||
            (e = nd_blas_matrix(g->call, "B", g->B, &(nd_layout){g->eb, br, bc, g->ldb, g->batch, g->sb})) ||
            (e = nd_blas_matrix(g->call, "C", g->C, &(nd_layout){g->ec, g->m, g->n, g->ldc, g->batch, g->sc})))
            return e;
    }
    nd_blas_settings(g->handle, &stream, NULL);
    return nd_blas_launch(g->call, stream);
}

/* ---- gemm: S, D, C, Z, strided batched, batched ----------------------------------- */

#define GEMM(T, SIZE)                                                                                   \
    int cublas##T##gemm_v2(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, \
                           int lda, const void *B, int ldb, const void *beta, void *C, int ldc);         \
    int cublas##T##gemm_v2(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, \
                           int lda, const void *B, int ldb, const void *beta, void *C, int ldc)          \
    {                                                                                                   \
        nd_gemm g = {"cublas" #T "gemm_v2", h, ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0,               \
                     alpha, beta, A, B, C, NULL, SIZE, SIZE, SIZE};                                     \
        return gemm(&g);                                                                                \
    }                                                                                                   \
    int cublas##T##gemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const void *alpha,  \
                                      const void *A, int lda, long long sa, const void *B, int ldb,     \
                                      long long sb, const void *beta, void *C, int ldc, long long sc,   \
                                      int batch);                                                       \
    int cublas##T##gemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const void *alpha,  \
                                      const void *A, int lda, long long sa, const void *B, int ldb,     \
                                      long long sb, const void *beta, void *C, int ldc, long long sc,   \
                                      int batch)                                                        \
    {                                                                                                   \
        nd_gemm g = {"cublas" #T "gemmStridedBatched", h, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, \
                     sc, alpha, beta, A, B, C, NULL, SIZE, SIZE, SIZE};                                 \
        return gemm(&g);                                                                                \
    }                                                                                                   \
    int cublas##T##gemmBatched(void *h, int ta, int tb, int m, int n, int k, const void *alpha,         \
                               const void *A, int lda, const void *B, int ldb, const void *beta,        \
                               void *C, int ldc, int batch);                                            \
    int cublas##T##gemmBatched(void *h, int ta, int tb, int m, int n, int k, const void *alpha,         \
                               const void *A, int lda, const void *B, int ldb, const void *beta,        \
                               void *C, int ldc, int batch)                                             \
    {                                                                                                   \
        const void *arrays[3] = {A, B, C};                                                              \
        nd_gemm g = {"cublas" #T "gemmBatched", h, ta, tb, m, n, k, lda, ldb, ldc, batch, 0, 0, 0,      \
                     alpha, beta, NULL, NULL, NULL, arrays, SIZE, SIZE, SIZE};                          \
        return gemm(&g);                                                                                \
    }

GEMM(S, 4)
GEMM(D, 8)
GEMM(C, 8)
GEMM(Z, 16)

/* cublasComputeType_t: 16F 64, 16F_PEDANTIC 65, 32F 68, 32F_PEDANTIC 69,
 * 64F 70, 64F_PEDANTIC 71, 32I 72, 32I_PEDANTIC 73, 32F_FAST_16F 74,
 * 32F_FAST_16BF 75, 32F_FAST_TF32 77, 32F_EMULATED_16BFX9 78,
 * 64F_EMULATED_FIXEDPOINT 79. */
static int compute_ok(int c)
{
    return (c >= 64 && c <= 75) || (c >= 77 && c <= 79);
}

static int types_ok(const char *call, int at, int bt, int ct, int *e)
{
    *e = ND_BLAS_SUCCESS;
    if (!nd_blas_type_size(at))
        *e = nd_blas_bad(call, "Atype", at);
    else if (!nd_blas_type_size(bt))
        *e = nd_blas_bad(call, "Btype", bt);
    else if (!nd_blas_type_size(ct))
        *e = nd_blas_bad(call, "Ctype", ct);
    return *e == ND_BLAS_SUCCESS;
}

int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo);
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo)
{
    nd_gemm g = {"cublasGemmEx", h, ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, alpha, beta, A, B, C, NULL,
                 nd_blas_type_size(at), nd_blas_type_size(bt), nd_blas_type_size(ct)};
    int e;
    (void)algo;
    if (nd_blas_valid(h) && !types_ok(g.call, at, bt, ct, &e))
        return e;
    if (nd_blas_valid(h) && !compute_ok(compute))
        return nd_blas_bad(g.call, "computeType", compute);
    return gemm(&g);
}

int cublasSgemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                  const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc);
int cublasSgemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                  const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc)
{
    nd_gemm g = {"cublasSgemmEx", h, ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, alpha, beta, A, B, C, NULL,
                 nd_blas_type_size(at), nd_blas_type_size(bt), nd_blas_type_size(ct)};
    int e;
    if (nd_blas_valid(h) && !types_ok(g.call, at, bt, ct, &e))
        return e;
    return gemm(&g);
}

int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                               int at, int lda, long long sa, const void *B, int bt, int ldb, long long sb,
                               const void *beta, void *C, int ct, int ldc, long long sc, int batch, int compute,
                               int algo);
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                               int at, int lda, long long sa, const void *B, int bt, int ldb, long long sb,
                               const void *beta, void *C, int ct, int ldc, long long sc, int batch, int compute,
                               int algo)
{
    nd_gemm g = {"cublasGemmStridedBatchedEx", h, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, alpha, beta,
                 A, B, C, NULL, nd_blas_type_size(at), nd_blas_type_size(bt), nd_blas_type_size(ct)};
    int e;
    (void)algo;
    if (nd_blas_valid(h) && !types_ok(g.call, at, bt, ct, &e))
        return e;
    if (nd_blas_valid(h) && !compute_ok(compute))
        return nd_blas_bad(g.call, "computeType", compute);
    return gemm(&g);
}

/* ---- gemv ----------------------------------------------------------------------------- */

/* One gemv: y = alpha op(A) x + beta y, elements of `size` bytes. */
typedef struct nd_gemv {
    const char *call;
    void *h;
    int trans, m, n;
    const void *alpha, *A;
    int lda;
    const void *x;
    int incx;
    const void *beta;
    void *y;
    int incy;
    size_t size;
} nd_gemv;

static int gemv(const nd_gemv *g)
{
    const char *call = g->call;
    void *h = g->h;
    int trans = g->trans, m = g->m, n = g->n, lda = g->lda, incx = g->incx, incy = g->incy;
    const void *alpha = g->alpha, *A = g->A, *x = g->x, *beta = g->beta;
    void *y = g->y;
    size_t size = g->size;
    uint64_t stream = 0;
    int64_t lx = trans == ND_OP_N ? n : m, ly = trans == ND_OP_N ? m : n;
    int e;
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (!op_ok(trans))
        return nd_blas_bad(call, "trans", trans);
    if (m < 0)
        return nd_blas_bad(call, "m", m);
    if (n < 0)
        return nd_blas_bad(call, "n", n);
    if (lda < MAX1(m))
        return nd_blas_bad(call, "lda", lda);
    if (incx == 0)
        return nd_blas_bad(call, "incx", incx);
    if (incy == 0)
        return nd_blas_bad(call, "incy", incy);
    if (!alpha || !beta)
        return nd_blas_bad(call, alpha ? "beta" : "alpha", 0);
    if (m == 0 || n == 0)
        return ND_BLAS_SUCCESS;
    if ((e = nd_blas_matrix(call, "A", A, &(nd_layout){size, m, n, lda, 1, 0})) ||
        (e = nd_blas_matrix(call, "x", x, &(nd_layout){size, 1, lx, incx < 0 ? -incx : incx, 1, 0})) ||
        (e = nd_blas_matrix(call, "y", y, &(nd_layout){size, 1, ly, incy < 0 ? -incy : incy, 1, 0})))
        return e;
    nd_blas_settings(h, &stream, NULL);
    return nd_blas_launch(call, stream);
}

#define GEMV(T, SIZE)                                                                                   \
    int cublas##T##gemv_v2(void *h, int trans, int m, int n, const void *alpha, const void *A, int lda,  \
                           const void *x, int incx, const void *beta, void *y, int incy);                \
    int cublas##T##gemv_v2(void *h, int trans, int m, int n, const void *alpha, const void *A, int lda,  \
                           const void *x, int incx, const void *beta, void *y, int incy)                 \
    {                                                                                                   \
        nd_gemv g = {"cublas" #T "gemv_v2", h, trans, m, n, alpha, A, lda, x, incx, beta, y, incy,     \
                     SIZE};                                                                             \
        return gemv(&g);                                                                                \
    }

GEMV(S, 4)
GEMV(D, 8)
GEMV(C, 8)
GEMV(Z, 16)

/* ---- dot ------------------------------------------------------------------------------ */

/* The result goes to host memory (written now: 0) or, in device pointer
 * mode, to device memory (by the kernel: nothing written). */
/* A vector of a dot: at p, elements of `size` bytes, `inc` apart. */
typedef struct nd_vec {
    const void *p;
    size_t size;
    int inc;
} nd_vec;

static int dot(const char *call, void *h, int n, const nd_vec *vx, const nd_vec *vy, void *result,
               size_t rs)
{
    const void *x = vx->p, *y = vy->p;
    size_t xs = vx->size, ys = vy->size;
    int incx = vx->inc, incy = vy->inc;
    uint64_t stream = 0;
    int mode = ND_POINTER_HOST, e;
    if (!nd_blas_settings(h, &stream, &mode))
        return ND_BLAS_NOT_INITIALIZED;
    if (!result)
        return nd_blas_bad(call, "result", 0);
    if (mode == ND_POINTER_DEVICE && !nd_is_device(nd_dev(), result, rs))
        return nd_blas_matrix(call, "result", result, &(nd_layout){rs, 1, 1, 1, 1, 0});
    if (mode == ND_POINTER_HOST)
        memset(result, 0, rs);
    if (n > 0 && ((e = nd_blas_matrix(call, "x", x, &(nd_layout){xs, 1, n, incx < 0 ? -incx : incx ? incx : 1, 1, 0})) ||
                  (e = nd_blas_matrix(call, "y", y, &(nd_layout){ys, 1, n, incy < 0 ? -incy : incy ? incy : 1, 1, 0}))))
        return e;
    return nd_blas_launch(call, stream);
}

#define DOT(NAME, SIZE)                                                                                 \
    int NAME(void *h, int n, const void *x, int incx, const void *y, int incy, void *result);           \
    int NAME(void *h, int n, const void *x, int incx, const void *y, int incy, void *result)            \
    {                                                                                                   \
        return dot(#NAME, h, n, &(nd_vec){x, SIZE, incx}, &(nd_vec){y, SIZE, incy}, result, SIZE);      \
    }

DOT(cublasSdot_v2, 4)
DOT(cublasDdot_v2, 8)
DOT(cublasCdotu_v2, 8)
DOT(cublasCdotc_v2, 8)
DOT(cublasZdotu_v2, 16)
DOT(cublasZdotc_v2, 16)

int cublasDotEx(void *h, int n, const void *x, int xt, int incx, const void *y, int yt, int incy, void *result,
                int rt, int exec);
int cublasDotEx(void *h, int n, const void *x, int xt, int incx, const void *y, int yt, int incy, void *result,
                int rt, int exec)
{
    const char *call = "cublasDotEx";
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (!nd_blas_type_size(xt) || !nd_blas_type_size(yt) || !nd_blas_type_size(rt) || !nd_blas_type_size(exec))
        return nd_blas_bad(call, "xType/yType/resultType/executionType",
                           !nd_blas_type_size(xt) ? xt : !nd_blas_type_size(yt) ? yt : !nd_blas_type_size(rt) ? rt : exec);
    return dot(call, h, n, &(nd_vec){x, nd_blas_type_size(xt), incx},
               &(nd_vec){y, nd_blas_type_size(yt), incy}, result, nd_blas_type_size(rt));
}

/* ---- trsm ----------------------------------------------------------------------------- */

/* One trsm, batched (`arrays`: A and B are device arrays of pointers) or
 * not, elements of `size` bytes. */
typedef struct nd_trsm {
    const char *call;
    void *h;
    int side, uplo, trans, diag, m, n;
    const void *alpha, *A;
    int lda;
    void *B;
    int ldb, batch, arrays;
    size_t size;
} nd_trsm;

/* The checks of trsm and trsmBatched: side L/R, fill lower/upper, op, diag. */
static int trsm_args(const nd_trsm *t)
{
    const char *call = t->call;
    int side = t->side, uplo = t->uplo, trans = t->trans, diag = t->diag, m = t->m, n = t->n;
    int lda = t->lda, ldb = t->ldb, batch = t->batch;
    if (!nd_blas_valid(t->h))
        return ND_BLAS_NOT_INITIALIZED;
    if (side != 0 && side != 1)
        return nd_blas_bad(call, "side", side);
    if (uplo != 0 && uplo != 1)
        return nd_blas_bad(call, "uplo", uplo);
    if (!op_ok(trans))
        return nd_blas_bad(call, "trans", trans);
    if (diag != 0 && diag != 1)
        return nd_blas_bad(call, "diag", diag);
    if (m < 0)
        return nd_blas_bad(call, "m", m);
    if (n < 0)
        return nd_blas_bad(call, "n", n);
    if (lda < MAX1(side == 0 ? m : n))
        return nd_blas_bad(call, "lda", lda);
    if (ldb < MAX1(m))
        return nd_blas_bad(call, "ldb", ldb);
    if (batch < 0)
        return nd_blas_bad(call, "batchCount", batch);
    if (!t->alpha)
        return nd_blas_bad(call, "alpha", 0);
    return ND_BLAS_SUCCESS;
}

static int trsm(const nd_trsm *t)
{
    const char *call = t->call;
    int m = t->m, n = t->n, lda = t->lda, ldb = t->ldb, batch = t->batch;
    const void *A = t->A;
    void *B = t->B;
    size_t size = t->size;
    uint64_t stream = 0;
    int64_t ka = t->side == 0 ? m : n;
    int e = trsm_args(t);
    if (e || m == 0 || n == 0 || batch == 0)
        return e;
    if (t->arrays ? (e = nd_blas_array(call, "A", A, batch)) || (e = nd_blas_array(call, "B", B, batch))
                  : (e = nd_blas_matrix(call, "A", A, &(nd_layout){size, ka, ka, lda, 1, 0})) ||
                        (e = nd_blas_matrix(call, "B", B, &(nd_layout){size, m, n, ldb, 1, 0})))
        return e;
    nd_blas_settings(t->h, &stream, NULL);
    return nd_blas_launch(call, stream);
}

#define TRSM(T, SIZE)                                                                                   \
    int cublas##T##trsm_v2(void *h, int side, int uplo, int trans, int diag, int m, int n,              \
                           const void *alpha, const void *A, int lda, void *B, int ldb);                 \
    int cublas##T##trsm_v2(void *h, int side, int uplo, int trans, int diag, int m, int n,              \
                           const void *alpha, const void *A, int lda, void *B, int ldb)                  \
    {                                                                                                   \
        nd_trsm t = {"cublas" #T "trsm_v2", h, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb,   \
                     1, 0, SIZE};                                                                       \
        return trsm(&t);                                                                                \
    }                                                                                                   \
    int cublas##T##trsmBatched(void *h, int side, int uplo, int trans, int diag, int m, int n,          \
                               const void *alpha, const void *A, int lda, void *B, int ldb, int batch); \
    int cublas##T##trsmBatched(void *h, int side, int uplo, int trans, int diag, int m, int n,          \
                               const void *alpha, const void *A, int lda, void *B, int ldb, int batch)  \
    {                                                                                                   \
        nd_trsm t = {"cublas" #T "trsmBatched", h, side, uplo, trans, diag, m, n, alpha, A, lda, B,    \
                     ldb, batch, 1, SIZE};                                                              \
        return trsm(&t);                                                                                \
    }

TRSM(S, 4)
TRSM(D, 8)
TRSM(C, 8)
TRSM(Z, 16)

/* ---- batched solvers: getrf, getrs, geqrf, gels ---------------------------------------- */

/* `info` (host) takes -i for the i-th parameter that is wrong, 0 when all are right. */
static int solver_bad(const char *call, const char *param, long long v, int *info, int pos)
{
    if (info)
        *info = -pos;
    return nd_blas_bad(call, param, v);
}

static int not_supported(const char *call, const char *what, long long v, int *info)
{
    if (info)
        *info = 0;
    fprintf(stderr, "sublet nullgpu: cuBLAS call %s: %s (%lld) is not supported by cuBLAS: "
                    "CUBLAS_STATUS_NOT_SUPPORTED\n", call, what, v);
    return ND_BLAS_NOT_SUPPORTED;
}

static int solver_launch(const char *call, void *h, const void *a1, const void *a2, int batch)
{
    uint64_t stream = 0;
    int e;
    if (batch == 0)
        return ND_BLAS_SUCCESS;
    if ((e = nd_blas_array(call, "Aarray", a1, batch)) || (a2 && (e = nd_blas_array(call, "array", a2, batch))))
        return e;
    nd_blas_settings(h, &stream, NULL);
    return nd_blas_launch(call, stream);
}

#define SOLVERS(T)                                                                                      \
    int cublas##T##getrfBatched(void *h, int n, void *A, int lda, int *P, int *info, int batch);        \
    int cublas##T##getrfBatched(void *h, int n, void *A, int lda, int *P, int *info, int batch)         \
    {                                                                                                   \
        const char *c = "cublas" #T "getrfBatched";                                                     \
        (void)P;                                                                                        \
        if (!nd_blas_valid(h))                                                                          \
            return ND_BLAS_NOT_INITIALIZED;                                                             \
        if (n < 0 || lda < MAX1(n) || batch < 0)                                                        \
            return nd_blas_bad(c, n < 0 ? "n" : lda < MAX1(n) ? "lda" : "batchSize",                    \
                               n < 0 ? n : lda < MAX1(n) ? lda : batch);                                \
        if (n > 0 && batch > 0 && !nd_is_device(nd_dev(), info, sizeof(int) * (size_t)batch))            \
            return nd_blas_matrix(c, "infoArray", info, &(nd_layout){sizeof(int), 1, batch, 1, 1, 0}); \
        return n == 0 ? ND_BLAS_SUCCESS : solver_launch(c, h, A, NULL, batch);                          \
    }                                                                                                   \
    int cublas##T##getrsBatched(void *h, int trans, int n, int nrhs, const void *A, int lda,            \
                                const int *P, void *B, int ldb, int *info, int batch);                  \
    int cublas##T##getrsBatched(void *h, int trans, int n, int nrhs, const void *A, int lda,            \
                                const int *P, void *B, int ldb, int *info, int batch)                   \
    {                                                                                                   \
        const char *c = "cublas" #T "getrsBatched";                                                     \
        (void)P;                                                                                        \
        if (!nd_blas_valid(h))                                                                          \
            return ND_BLAS_NOT_INITIALIZED;                                                             \
        if (!op_ok(trans))                                                                              \
            return solver_bad(c, "trans", trans, info, 1);                                              \
        if (n < 0 || nrhs < 0)                                                                          \
            return solver_bad(c, n < 0 ? "n" : "nrhs", n < 0 ? n : nrhs, info, n < 0 ? 2 : 3);          \
        if (lda < MAX1(n))                                                                              \
            return solver_bad(c, "lda", lda, info, 5);                                                  \
        if (ldb < MAX1(n))                                                                              \
            return solver_bad(c, "ldb", ldb, info, 8);                                                  \
        if (batch < 0)                                                                                  \
            return solver_bad(c, "batchSize", batch, info, 10);                                         \
        if (info)                                                                                       \
            *info = 0;                                                                                  \
        return n == 0 || nrhs == 0 ? ND_BLAS_SUCCESS : solver_launch(c, h, A, B, batch);                \
    }                                                                                                   \
    int cublas##T##geqrfBatched(void *h, int m, int n, void *A, int lda, void *tau, int *info, int batch); \
    int cublas##T##geqrfBatched(void *h, int m, int n, void *A, int lda, void *tau, int *info, int batch)  \
    {                                                                                                   \
        const char *c = "cublas" #T "geqrfBatched";                                                     \
        if (!nd_blas_valid(h))                                                                          \
            return ND_BLAS_NOT_INITIALIZED;                                                             \
        if (m < 0 || n < 0)                                                                             \
            return solver_bad(c, m < 0 ? "m" : "n", m < 0 ? m : n, info, m < 0 ? 1 : 2);               \
        if (lda < MAX1(m))                                                                              \
            return solver_bad(c, "lda", lda, info, 4);                                                  \
        if (batch < 0)                                                                                  \
            return solver_bad(c, "batchSize", batch, info, 7);                                          \
        if (info)                                                                                       \
            *info = 0;                                                                                  \
        return m == 0 || n == 0 ? ND_BLAS_SUCCESS : solver_launch(c, h, A, tau, batch);                 \
    }                                                                                                   \
    int cublas##T##gelsBatched(void *h, int trans, int m, int n, int nrhs, void *A, int lda, void *C,   \
                               int ldc, int *info, int *dinfo, int batch);                              \
    int cublas##T##gelsBatched(void *h, int trans, int m, int n, int nrhs, void *A, int lda, void *C,   \
                               int ldc, int *info, int *dinfo, int batch)                               \
    {                                                                                                   \
        const char *c = "cublas" #T "gelsBatched";                                                      \
        (void)dinfo;                                                                                    \
        if (!nd_blas_valid(h))                                                                          \
            return ND_BLAS_NOT_INITIALIZED;                                                             \
        if (m < 0 || n < 0 || nrhs < 0)                                                                 \
            return solver_bad(c, m < 0 ? "m" : n < 0 ? "n" : "nrhs", m < 0 ? m : n < 0 ? n : nrhs, info,   \
                              m < 0 ? 2 : n < 0 ? 3 : 4);                                               \
        if (trans != ND_OP_N || m < n) /* cuBLAS solves only overdetermined, untransposed systems */    \
            return not_supported(c, trans != ND_OP_N ? "trans" : "m < n", trans != ND_OP_N ? trans : m, info); \
        if (lda < MAX1(m))                                                                              \
            return solver_bad(c, "lda", lda, info, 6);                                                  \
        if (ldc < MAX1(m))                                                                              \
            return solver_bad(c, "ldc", ldc, info, 8);                                                  \
        if (batch < 0)                                                                                  \
            return solver_bad(c, "batchSize", batch, info, 11);                                         \
        if (info)                                                                                       \
            *info = 0;                                                                                  \
        return m == 0 || n == 0 || nrhs == 0 ? ND_BLAS_SUCCESS : solver_launch(c, h, A, C, batch);      \
    }

SOLVERS(S)
SOLVERS(D)
SOLVERS(C)
SOLVERS(Z)
