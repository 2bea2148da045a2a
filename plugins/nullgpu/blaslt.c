/* sublet — the null device: cuBLASLt (see blas.h).
 *
 * A cuBLASLt handle is a cuBLAS handle (blas.c), as in the real library,
 * which lets a program cast one to the other (PyTorch does).  Matmul
 * descriptors, matrix layouts and preferences are handle numbers holding
 * their attributes, each set and read back with the size cuBLASLt gives it.
 * The heuristic answers one algorithm whose workspace fits the preference's
 * maximum; a matmul checks its descriptors (operations, orders, shapes,
 * leading dimensions, batch counts, the epilogue's pointers), that its
 * workspace holds what the algorithm needs and that its matrices lie in
 * device memory, then counts as a launch on its stream.  Nothing is
 * computed and nothing is allocated: the workspace is the caller's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "blas.h"
#include "nullgpu.h"

#define ALGO_MAGIC 0x6e756c6cu /* "null": an algorithm this library initialised */
#define ALGO_WORKSPACE (UINT64_C(1) << 20) /* what the one algorithm would use, at most */

static uint64_t hv(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* The attributes' sizes in bytes by number (0: no such attribute). */
static const uint8_t desc_sizes[ND_LT_ATTRS] = {
    4, 4, 4, 4, 4, 4, 4, 4, 8, 0, 8, 8, 8, 8, 8, 4, 0, 8, 8, 8,
    8, 8, 4, 8, 8, 1, 4, 0, 0, 0, 0, 4, 4, 4, 4, 4, 8, 4, 8, 0,
};
static const uint8_t layout_sizes[ND_LT_ATTRS] = {4, 4, 8, 8, 8, 4, 8, 8, 4};
static const uint8_t pref_sizes[ND_LT_ATTRS] = {4, 8, 0, 4, 0, 4, 4, 4, 4, 4, 0, 0, 8};
static const uint8_t algo_sizes[9] = {4, 4, 4, 4, 4, 4, 4, 2, 2};

enum { D_COMPUTE = 0, D_SCALE = 1, D_POINTER_MODE = 2, D_TRANSA = 3, D_TRANSB = 4, D_FILL = 6, D_EPILOGUE = 7,
       D_BIAS = 8, D_AUX = 11, D_AUX_LD = 12, D_BIAS_TYPE = 26, D_AUX_TYPE = 22 };
enum { L_TYPE = 0, L_ORDER = 1, L_ROWS = 2, L_COLS = 3, L_LD = 4, L_BATCH = 5, L_STRIDE = 6 };
enum { P_MAX_WORKSPACE = 1, P_ALIGN_A = 5, P_ALIGN_D = 8, P_IMPL_MASK = 12 };

/* ---- descriptors ------------------------------------------------------------------- */

static int lt_new(nd_kind kind, void **out, const uint64_t *init, int n)
{
    nd_device *d = nd_dev();
    uint64_t h;
    if (!out)
        return ND_BLAS_INVALID_VALUE;
    nd_lock(d);
    h = nd_handle_new(d, kind);
    if (h)
        for (int i = 0; i < n; i++)
            nd_handle_get(d, h, kind)->u.lt.attr[i] = init[i];
    nd_unlock(d);
    if (!h)
        return ND_BLAS_ALLOC_FAILED;
    *out = (void *)(uintptr_t)h;
    return ND_BLAS_SUCCESS;
}

static int lt_destroy(nd_kind kind, void *desc)
{
    nd_device *d = nd_dev();
    int ok;
    nd_lock(d);
    ok = nd_handle_get(d, hv(desc), kind) != NULL;
    if (ok)
        nd_handle_free(d, hv(desc));
    nd_unlock(d);
    return ok || !desc ? ND_BLAS_SUCCESS : ND_BLAS_INVALID_VALUE;
}

static int lt_set(nd_kind kind, const uint8_t *sizes, void *desc, int attr, const void *buf, size_t n)
{
    nd_device *d = nd_dev();
    nd_slot *s;
    uint64_t v = 0;
    if (attr < 0 || attr >= ND_LT_ATTRS || !sizes[attr] || !buf || n != sizes[attr])
        return ND_BLAS_INVALID_VALUE;
    memcpy(&v, buf, n);
    nd_lock(d);
    s = nd_handle_get(d, hv(desc), kind);
    if (s)
        s->u.lt.attr[attr] = v;
    nd_unlock(d);
    return s ? ND_BLAS_SUCCESS : ND_BLAS_INVALID_VALUE;
}

static int lt_get(nd_kind kind, const uint8_t *sizes, const void *desc, int attr, void *buf, size_t n,
                  size_t *written)
{
    nd_device *d = nd_dev();
    nd_slot *s;
    uint64_t v = 0;
    if (attr < 0 || attr >= ND_LT_ATTRS || !sizes[attr] || (n == 0 && !written) || (n && (!buf || n != sizes[attr])))
        return ND_BLAS_INVALID_VALUE;
    nd_lock(d);
    s = nd_handle_get(d, hv(desc), kind);
    if (s)
        v = s->u.lt.attr[attr];
    nd_unlock(d);
    if (!s)
        return ND_BLAS_INVALID_VALUE;
    if (written)
        *written = sizes[attr];
    if (n)
        memcpy(buf, &v, n);
    return ND_BLAS_SUCCESS;
}

/* A descriptor's attributes, copied; 0 when it is not live. */
static int lt_read(nd_kind kind, const void *desc, nd_lt *out)
{
    nd_device *d = nd_dev();
    nd_slot *s;
    nd_lock(d);
    s = nd_handle_get(d, hv(desc), kind);
    if (s)
        *out = s->u.lt;
    nd_unlock(d);
    return s != NULL;
}

int cublasLtMatmulDescCreate(void **desc, int compute, int scale);
int cublasLtMatmulDescDestroy(void *desc);
int cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf, size_t n);
int cublasLtMatmulDescGetAttribute(void *desc, int attr, void *buf, size_t n, size_t *written);
int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
int cublasLtMatrixLayoutDestroy(void *layout);
int cublasLtMatrixLayoutSetAttribute(void *layout, int attr, const void *buf, size_t n);
int cublasLtMatrixLayoutGetAttribute(void *layout, int attr, void *buf, size_t n, size_t *written);
int cublasLtMatmulPreferenceCreate(void **pref);
int cublasLtMatmulPreferenceDestroy(void *pref);
int cublasLtMatmulPreferenceSetAttribute(void *pref, int attr, const void *buf, size_t n);
int cublasLtMatmulPreferenceGetAttribute(void *pref, int attr, void *buf, size_t n, size_t *written);

int cublasLtMatmulDescCreate(void **desc, int compute, int scale)
{
    uint64_t init[ND_LT_ATTRS] = {0};
    init[D_COMPUTE] = (uint32_t)compute;
    init[D_SCALE] = (uint32_t)scale;
    init[D_FILL] = 2;           /* CUBLAS_FILL_MODE_FULL */
    init[D_EPILOGUE] = 1;       /* CUBLASLT_EPILOGUE_DEFAULT */
    init[D_AUX_TYPE] = UINT32_MAX; /* -1: as D */
    init[D_BIAS_TYPE] = UINT32_MAX;
    if (!(compute >= 64 && compute <= 79) || !nd_blas_type_size(scale))
        return ND_BLAS_INVALID_VALUE;
    return lt_new(ND_LT_MATMUL, desc, init, ND_LT_ATTRS);
}

int cublasLtMatmulDescDestroy(void *desc)
{
    return lt_destroy(ND_LT_MATMUL, desc);
}

int cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf, size_t n)
{
    return lt_set(ND_LT_MATMUL, desc_sizes, desc, attr, buf, n);
}

int cublasLtMatmulDescGetAttribute(void *desc, int attr, void *buf, size_t n, size_t *written)
{
    return lt_get(ND_LT_MATMUL, desc_sizes, desc, attr, buf, n, written);
}

int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    uint64_t init[7] = {(uint32_t)type, 0, rows, cols, (uint64_t)ld, 1, 0};
    if (!nd_blas_type_size(type))
        return ND_BLAS_INVALID_VALUE;
    return lt_new(ND_LT_LAYOUT, layout, init, 7);
}

int cublasLtMatrixLayoutDestroy(void *layout)
{
    return lt_destroy(ND_LT_LAYOUT, layout);
}

int cublasLtMatrixLayoutSetAttribute(void *layout, int attr, const void *buf, size_t n)
{
    return lt_set(ND_LT_LAYOUT, layout_sizes, layout, attr, buf, n);
}

int cublasLtMatrixLayoutGetAttribute(void *layout, int attr, void *buf, size_t n, size_t *written)
{
    return lt_get(ND_LT_LAYOUT, layout_sizes, layout, attr, buf, n, written);
}

int cublasLtMatmulPreferenceCreate(void **pref)
{
    uint64_t init[13] = {0};
    for (int i = P_ALIGN_A; i <= P_ALIGN_D; i++)
        init[i] = 256;
    init[3] = 0xff;           /* CUBLASLT_REDUCTION_SCHEME_MASK: every scheme */
    init[P_IMPL_MASK] = UINT64_MAX;
    return lt_new(ND_LT_PREF, pref, init, 13);
}

int cublasLtMatmulPreferenceDestroy(void *pref)
{
    return lt_destroy(ND_LT_PREF, pref);
}

int cublasLtMatmulPreferenceSetAttribute(void *pref, int attr, const void *buf, size_t n)
{
    return lt_set(ND_LT_PREF, pref_sizes, pref, attr, buf, n);
}

int cublasLtMatmulPreferenceGetAttribute(void *pref, int attr, void *buf, size_t n, size_t *written)
{
    return lt_get(ND_LT_PREF, pref_sizes, pref, attr, buf, n, written);
}

/* ---- the problem: descriptors checked against each other ---------------------------- */

typedef struct lt_problem {
    nd_lt op, a, b, c, d;
} lt_problem;

typedef struct lt_dims {
    int64_t rows, cols;    /* the matrix's */
    int64_t srows, scols;  /* as stored, column-major: a row-major matrix's transpose */
    int64_t ld, batch, stride;
    size_t size;
} lt_dims;

#define MAX1(x) ((x) > 1 ? (x) : 1)

static int dims(const char *call, const char *which, const nd_lt *l, lt_dims *out)
{
    char what[32];
    int order = (int)(int32_t)l->attr[L_ORDER];
    out->rows = (int64_t)l->attr[L_ROWS];
    out->cols = (int64_t)l->attr[L_COLS];
    out->ld = (int64_t)l->attr[L_LD];
    out->batch = (int32_t)l->attr[L_BATCH];
    out->stride = (int64_t)l->attr[L_STRIDE];
    out->size = nd_blas_type_size((int)(int32_t)l->attr[L_TYPE]);
    if (order != 0 && order != 1) {
        fprintf(stderr, "sublet nullgpu: cuBLAS call %s: matrix %s's order %d is not emulated "
                        "(CUBLAS_STATUS_NOT_SUPPORTED)\n", call, which, order);
        return ND_BLAS_NOT_SUPPORTED;
    }
    out->srows = order == 0 ? out->rows : out->cols;
    out->scols = order == 0 ? out->cols : out->rows;
    snprintf(what, sizeof what, "%s rows/cols", which);
    if (out->rows < 0 || out->cols < 0)
        return nd_blas_bad(call, what, out->rows < 0 ? out->rows : out->cols);
    snprintf(what, sizeof what, "%s ld", which);
    if (out->ld < MAX1(out->srows))
        return nd_blas_bad(call, what, out->ld);
    snprintf(what, sizeof what, "%s batch count", which);
    if (out->batch < 1)
        return nd_blas_bad(call, what, out->batch);
    return ND_BLAS_SUCCESS;
}

/* The descriptors of one matmul, read and checked against each other: the
 * operations, D = op(A) op(B) (m x n, k inner) with C as D, the batch
 * counts, the epilogue's pointers.  dm[0..3]: A, B, C, D. */
static int problem(const char *call, const void *h, const void *op, const void *const *layouts, lt_problem *p,
                   lt_dims *dm)
{
    static const char *const names[4] = {"Adesc", "Bdesc", "Cdesc", "Ddesc"};
    nd_lt *l[4] = {&p->a, &p->b, &p->c, &p->d};
    int e, ta, tb;
    int64_t m, n, k;
    uint32_t epi;
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (!lt_read(ND_LT_MATMUL, op, &p->op))
        return nd_blas_bad(call, "computeDesc", (long long)hv(op));
    for (int i = 0; i < 4; i++) {
        if (!lt_read(ND_LT_LAYOUT, layouts[i], l[i]))
            return nd_blas_bad(call, names[i], (long long)hv(layouts[i]));
        if ((e = dims(call, names[i], l[i], &dm[i])))
            return e;
    }
    ta = (int)(int32_t)p->op.attr[D_TRANSA];
    tb = (int)(int32_t)p->op.attr[D_TRANSB];
    if (ta < 0 || ta > 2 || tb < 0 || tb > 2)
        return nd_blas_bad(call, ta < 0 || ta > 2 ? "transa" : "transb", ta < 0 || ta > 2 ? ta : tb);
    m = dm[3].rows, n = dm[3].cols;
    k = ta == ND_OP_N ? dm[0].cols : dm[0].rows;
    if ((ta == ND_OP_N ? dm[0].rows : dm[0].cols) != m)
        return nd_blas_bad(call, "Adesc rows (op(A) must have D's rows)", ta == ND_OP_N ? dm[0].rows : dm[0].cols);
    if ((tb == ND_OP_N ? dm[1].rows : dm[1].cols) != k || (tb == ND_OP_N ? dm[1].cols : dm[1].rows) != n)
        return nd_blas_bad(call, "Bdesc (op(B) must be k x n)", tb == ND_OP_N ? dm[1].rows : dm[1].cols);
    if (dm[2].rows != m || dm[2].cols != n)
        return nd_blas_bad(call, "Cdesc (C must have D's shape)", dm[2].rows);
    for (int i = 0; i < 3; i++)
        if (dm[i].batch != dm[3].batch)
            return nd_blas_bad(call, "batch count (every matrix must have D's)", dm[i].batch);
    epi = (uint32_t)p->op.attr[D_EPILOGUE];
    if ((epi & (4 | 16 | 256 | 512)) && !p->op.attr[D_BIAS])
        return nd_blas_bad(call, "CUBLASLT_MATMUL_DESC_BIAS_POINTER (the epilogue needs one)", 0);
    if ((epi & 128) && (!p->op.attr[D_AUX] || (int64_t)p->op.attr[D_AUX_LD] < m))
        return nd_blas_bad(call, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER/LD", (long long)p->op.attr[D_AUX_LD]);
    return ND_BLAS_SUCCESS;
}

/* ---- algorithms -------------------------------------------------------------------- */

/* An algorithm (cublasLtMatmulAlgo_t, 8 words the caller owns): its
 * configuration attributes in 32-bit words 0-8, the marker in word 10, the
 * workspace it needs in word 12-13. */
typedef struct nd_algo {
    uint32_t w[16];
} nd_algo;

static void algo_init(nd_algo *a, int id, uint64_t workspace)
{
    memset(a, 0, sizeof *a);
    a->w[0] = (uint32_t)id;
    a->w[2] = 1; /* SPLITK_NUM */
    a->w[10] = ALGO_MAGIC;
    memcpy(&a->w[12], &workspace, sizeof workspace);
}

static uint64_t algo_workspace(const nd_algo *a)
{
    uint64_t w;
    memcpy(&w, &a->w[12], sizeof w);
    return w;
}

/* cublasLtMatmulHeuristicResult_t */
typedef struct nd_heuristic {
    nd_algo algo;
    size_t workspace;
    int state;
    float waves;
    int reserved[4];
} nd_heuristic;

int cublasLtMatmulAlgoGetHeuristic(void *h, void *op, void *a, void *b, void *c, void *d, void *pref, int requested,
                                   nd_heuristic *results, int *returned);
int cublasLtMatmulAlgoInit(void *h, int compute, int scale, int at, int bt, int ct, int dt, int id, nd_algo *algo);
int cublasLtMatmulAlgoCheck(void *h, void *op, void *a, void *b, void *c, void *d, const nd_algo *algo,
                            nd_heuristic *result);
int cublasLtMatmulAlgoGetIds(void *h, int compute, int scale, int at, int bt, int ct, int dt, int requested,
                             int *ids, int *returned);
int cublasLtMatmulAlgoConfigSetAttribute(nd_algo *algo, int attr, const void *buf, size_t n);
int cublasLtMatmulAlgoConfigGetAttribute(const nd_algo *algo, int attr, void *buf, size_t n, size_t *written);

int cublasLtMatmulAlgoGetHeuristic(void *h, void *op, void *a, void *b, void *c, void *d, void *pref, int requested,
                                   nd_heuristic *results, int *returned)
{
    const char *call = "cublasLtMatmulAlgoGetHeuristic";
    const void *layouts[4] = {a, b, c, d};
    lt_problem p;
    lt_dims dm[4];
    nd_lt pr;
    int e;
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (requested <= 0 || !results || !returned)
        return nd_blas_bad(call, requested <= 0 ? "requestedAlgoCount" : "heuristicResultsArray/returnAlgoCount",
                           requested);
    if (!lt_read(ND_LT_PREF, pref, &pr))
        return nd_blas_bad(call, "preference", (long long)hv(pref));
    if ((e = problem(call, h, op, layouts, &p, dm)))
        return e;
    memset(results, 0, sizeof *results);
    results->workspace = pr.attr[P_MAX_WORKSPACE] < ALGO_WORKSPACE ? pr.attr[P_MAX_WORKSPACE] : ALGO_WORKSPACE;
    algo_init(&results->algo, 0, results->workspace);
    results->state = ND_BLAS_SUCCESS;
    results->waves = 1.0f;
    *returned = 1;
    return ND_BLAS_SUCCESS;
}

int cublasLtMatmulAlgoGetIds(void *h, int compute, int scale, int at, int bt, int ct, int dt, int requested,
                             int *ids, int *returned)
{
    (void)compute, (void)scale;
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (requested <= 0 || !ids || !returned || !nd_blas_type_size(at) || !nd_blas_type_size(bt) ||
        !nd_blas_type_size(ct) || !nd_blas_type_size(dt))
        return ND_BLAS_INVALID_VALUE;
    ids[0] = 0;
    *returned = 1;
    return ND_BLAS_SUCCESS;
}

int cublasLtMatmulAlgoInit(void *h, int compute, int scale, int at, int bt, int ct, int dt, int id, nd_algo *algo)
{
    (void)compute, (void)scale;
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (!algo || !nd_blas_type_size(at) || !nd_blas_type_size(bt) || !nd_blas_type_size(ct) ||
        !nd_blas_type_size(dt))
        return ND_BLAS_INVALID_VALUE;
    if (id != 0) /* the one algorithm GetIds and the heuristic answer */
        return ND_BLAS_NOT_SUPPORTED;
    algo_init(algo, id, ALGO_WORKSPACE);
    return ND_BLAS_SUCCESS;
}

int cublasLtMatmulAlgoCheck(void *h, void *op, void *a, void *b, void *c, void *d, const nd_algo *algo,
                            nd_heuristic *result)
{
    const void *layouts[4] = {a, b, c, d};
    lt_problem p;
    lt_dims dm[4];
    int e;
    if (!nd_blas_valid(h))
        return ND_BLAS_NOT_INITIALIZED;
    if (!algo || !result || algo->w[10] != ALGO_MAGIC)
        return ND_BLAS_INVALID_VALUE;
    if ((e = problem("cublasLtMatmulAlgoCheck", h, op, layouts, &p, dm)))
        return e;
    memset(result, 0, sizeof *result);
    result->algo = *algo;
    result->workspace = algo_workspace(algo);
    result->waves = 1.0f;
    return ND_BLAS_SUCCESS;
}

int cublasLtMatmulAlgoConfigSetAttribute(nd_algo *algo, int attr, const void *buf, size_t n)
{
    uint32_t v = 0;
    if (!algo || !buf || attr < 0 || attr > 8 || n != algo_sizes[attr])
        return ND_BLAS_INVALID_VALUE;
    memcpy(&v, buf, n);
    algo->w[attr] = v;
    return ND_BLAS_SUCCESS;
}

int cublasLtMatmulAlgoConfigGetAttribute(const nd_algo *algo, int attr, void *buf, size_t n, size_t *written)
{
    if (!algo || attr < 0 || attr > 8 || (n == 0 && !written) || (n && (!buf || n != algo_sizes[attr])))
        return ND_BLAS_INVALID_VALUE;
    if (written)
        *written = algo_sizes[attr];
    if (n)
        memcpy(buf, &algo->w[attr], n);
    return ND_BLAS_SUCCESS;
}

/* ---- the matmul --------------------------------------------------------------------- */

int cublasLtMatmul(void *h, void *op, const void *alpha, const void *A, void *adesc, const void *B, void *bdesc,
                   const void *beta, const void *C, void *cdesc, void *D, void *ddesc, const nd_algo *algo,
                   void *workspace, size_t wsize, void *stream);

static int matmul_memory(const char *call, const void *const *mats, const lt_dims *dm, const lt_problem *p,
                         const void *workspace, size_t wsize)
{
    static const char *const names[4] = {"A", "B", "C", "D"};
    int e;
    for (int i = 0; i < 4; i++)
        if ((e = nd_blas_matrix(call, names[i], mats[i],
                                &(nd_layout){dm[i].size, dm[i].srows, dm[i].scols, dm[i].ld,
                                             dm[i].batch, dm[i].stride})))
            return e;
    if (p->op.attr[D_BIAS] && !nd_is_device(nd_dev(), (const void *)(uintptr_t)p->op.attr[D_BIAS], 1))
        return nd_blas_matrix(call, "bias", (const void *)(uintptr_t)p->op.attr[D_BIAS],
                              &(nd_layout){1, 1, 1, 1, 1, 0});
    if (wsize && !nd_is_device(nd_dev(), workspace, wsize))
        return nd_blas_matrix(call, "workspace", workspace,
                              &(nd_layout){1, (int64_t)wsize, 1, (int64_t)wsize, 1, 0});
    return ND_BLAS_SUCCESS;
}

int cublasLtMatmul(void *h, void *op, const void *alpha, const void *A, void *adesc, const void *B, void *bdesc,
                   const void *beta, const void *C, void *cdesc, void *D, void *ddesc, const nd_algo *algo,
                   void *workspace, size_t wsize, void *stream)
{
    const char *call = "cublasLtMatmul";
    const void *layouts[4] = {adesc, bdesc, cdesc, ddesc}, *mats[4] = {A, B, C, D};
    lt_problem p;
    lt_dims dm[4];
    int e;
    if ((e = problem(call, h, op, layouts, &p, dm)))
        return e;
    if (!alpha || !beta)
        return nd_blas_bad(call, alpha ? "beta" : "alpha", 0);
    if (wsize && !workspace)
        return nd_blas_bad(call, "workspace", 0);
    if (algo && algo->w[10] != ALGO_MAGIC)
        return nd_blas_bad(call, "algo (not initialised)", algo->w[10]);
    if (algo && algo_workspace(algo) > wsize)
        return nd_blas_bad(call, "workspaceSizeInBytes (less than the algorithm's)", (long long)wsize);
    if (dm[3].rows == 0 || dm[3].cols == 0)
        return ND_BLAS_SUCCESS;
    if ((e = matmul_memory(call, mats, dm, &p, workspace, wsize)))
        return e;
    return nd_blas_launch(call, hv(stream));
}

/* ---- handles, versions, names ---------------------------------------------------------- */

int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);
int cublasLtCreate(void **handle);
int cublasLtDestroy(void *handle);
size_t cublasLtGetVersion(void);
size_t cublasLtGetCudartVersion(void);
int cublasLtGetProperty(int type, int *value);
const char *cublasLtGetStatusName(int status);
const char *cublasLtGetStatusString(int status);

int cublasLtCreate(void **handle)
{
    return cublasCreate_v2(handle);
}

int cublasLtDestroy(void *handle)
{
    return cublasDestroy_v2(handle);
}

size_t cublasLtGetVersion(void)
{
    return ND_BLAS_VERSION;
}

size_t cublasLtGetCudartVersion(void)
{
    return ND_BLAS_CUDART;
}

int cublasLtGetProperty(int type, int *value)
{
    static const int v[3] = {ND_BLAS_MAJOR, ND_BLAS_MINOR, ND_BLAS_PATCH};
    if (!value || type < 0 || type > 2)
        return ND_BLAS_INVALID_VALUE;
    *value = v[type];
    return ND_BLAS_SUCCESS;
}

const char *cublasLtGetStatusName(int status)
{
    return nd_blas_status_name(status, 0);
}

const char *cublasLtGetStatusString(int status)
{
    return nd_blas_status_name(status, 1);
}
