/* sublet — the null device: cuDNN 9's legacy API, the calls PyTorch makes
 * besides the backend descriptors (cudnn_backend.c): the handle and its
 * stream, versions and error strings, tensor, filter, convolution and
 * activation descriptors, the v7 convolution algorithms with their
 * workspaces and the convolutions themselves, the fused bias-activation one
 * included (TORCH_CUDNN_V8_API_DISABLED=1),
 * and batch normalization with its workspace and reserve space.
 *
 * As on hardware the caller allocates every workspace and reserve space, of
 * the size asked here; nothing here allocates device memory or computes.
 * The sizes (docs/nullgpu.md): a convolution's algorithm 1 needs engine 0's
 * workspace (nd_dnn_conv_workspace), every other algorithm none; batch
 * normalization needs a workspace only in CUDNN_BATCHNORM_SPATIAL_PERSISTENT
 * mode, 512 bytes per channel (fp32 partial sums and squares of 64 blocks),
 * and reserves 8 bytes per channel (the fp32 mean and inverse deviation it
 * saves), plus one bit per element when an activation follows (its mask);
 * each rounded up to 256 bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "nd_cudnn.h"
#include "nullgpu.h"

typedef int nd_st;

enum { ND_LD_TENSOR = 1, ND_LD_FILTER, ND_LD_CONV, ND_LD_ACTIVATION };

#define ND_LD_MAGIC 0x6e646c64u
#define ND_LD_MAXDIM 8

/* A legacy descriptor: one struct for the four kinds. */
typedef struct nd_ld {
    uint32_t magic;
    int kind;
    int set;
    int dtype, format, nd;
    int dims[ND_LD_MAXDIM], strides[ND_LD_MAXDIM];
    int pad[ND_LD_MAXDIM], stride[ND_LD_MAXDIM], dil[ND_LD_MAXDIM];
    int mode, groups, math;
    double coef;
} nd_ld;

/* cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout for the three */
typedef struct nd_algo_perf {
    int algo;
    int status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
} nd_algo_perf;

enum { ND_BN_PER_ACTIVATION = 0, ND_BN_SPATIAL = 1, ND_BN_SPATIAL_PERSISTENT = 2 };
enum { ND_BN_OPS_BN = 0 };

static _Thread_local char last_error[256];

static nd_st fail(nd_st st, const char *call, const char *why)
{
    sl_msg(last_error, sizeof last_error, "%s: %s (the null device's cuDNN)", call, why);
    return st;
}

/* ---- versions, errors ---- */

size_t cudnnGetVersion(void);
size_t cudnnGetCudartVersion(void);
nd_st cudnnGetProperty(int type, int *value);
const char *cudnnGetErrorString(nd_st st);
void cudnnGetLastErrorString(char *message, size_t max);

size_t cudnnGetVersion(void)
{
    return ND_DNN_VERSION;
}

size_t cudnnGetCudartVersion(void)
{
    return ND_DNN_CUDART_VERSION;
}

nd_st cudnnGetProperty(int type, int *value)
{
    static const int parts[3] = {ND_DNN_VERSION / 10000, ND_DNN_VERSION / 100 % 100, ND_DNN_VERSION % 100};
    if (!value || type < 0 || type > 2)
        return ND_DNN_BAD_PARAM;
    *value = parts[type];
    return ND_DNN_SUCCESS;
}

const char *cudnnGetErrorString(nd_st st)
{
    static const struct {
        int st;
        const char *s;
    } names[] = {
        {ND_DNN_SUCCESS, "CUDNN_STATUS_SUCCESS"},
        {ND_DNN_NOT_INITIALIZED, "CUDNN_STATUS_NOT_INITIALIZED"},
        {ND_DNN_BAD_PARAM, "CUDNN_STATUS_BAD_PARAM"},
        {ND_DNN_BAD_PARAM_NULL_POINTER, "CUDNN_STATUS_BAD_PARAM_NULL_POINTER"},
        {ND_DNN_BAD_PARAM_NOT_FINALIZED, "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED"},
        {ND_DNN_BAD_PARAM_OUT_OF_BOUND, "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND"},
        {ND_DNN_BAD_PARAM_SHAPE_MISMATCH, "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH"},
        {ND_DNN_BAD_PARAM_ATTRIBUTE_TYPE, "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE"},
        {ND_DNN_BAD_PARAM_DESCRIPTOR_TYPE, "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE"},
        {ND_DNN_NOT_SUPPORTED, "CUDNN_STATUS_NOT_SUPPORTED"},
        {ND_DNN_INTERNAL_ERROR, "CUDNN_STATUS_INTERNAL_ERROR"},
        {ND_DNN_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED"},
        {ND_DNN_EXECUTION_FAILED, "CUDNN_STATUS_EXECUTION_FAILED"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].st == st)
            return names[i].s;
    return "CUDNN_UNKNOWN_STATUS";
}

void cudnnGetLastErrorString(char *message, size_t max)
{
    if (message && max) {
        snprintf(message, max, "%s", last_error);
        last_error[0] = 0;
    }
}

/* ---- the handle ---- */

nd_st cudnnCreate(void **handle);
nd_st cudnnDestroy(void *handle);
nd_st cudnnSetStream(void *handle, void *stream);
nd_st cudnnGetStream(void *handle, void **stream);

nd_dnn_handle *nd_dnn_handle_get(void *h)
{
    nd_dnn_handle *p = h;
    return p && p->magic == ND_DNN_HANDLE_MAGIC ? p : NULL;
}

void nd_dnn_work(nd_dnn_handle *h)
{
    nd_device *d = nd_dev();
    nd_lock(d);
    nd_stream_work(d, (uint64_t)(uintptr_t)h->stream);
    nd_unlock(d);
}

nd_st cudnnCreate(void **handle)
{
    if (!handle)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    if (!nd_dev()->ok)
        return fail(ND_DNN_NOT_INITIALIZED, "cudnnCreate", "no device");
    nd_dnn_handle *h = calloc(1, sizeof *h);
    if (!h)
        return ND_DNN_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    h->magic = ND_DNN_HANDLE_MAGIC;
    *handle = h;
    return ND_DNN_SUCCESS;
}

nd_st cudnnDestroy(void *handle)
{
    nd_dnn_handle *h = nd_dnn_handle_get(handle);
    if (!h)
        return ND_DNN_BAD_PARAM;
    h->magic = 0;
    free(h);
    return ND_DNN_SUCCESS;
}

nd_st cudnnSetStream(void *handle, void *stream)
{
    nd_dnn_handle *h = nd_dnn_handle_get(handle);
    nd_device *d = nd_dev();
    uint64_t s = (uint64_t)(uintptr_t)stream;
    if (!h)
        return ND_DNN_BAD_PARAM;
    nd_lock(d);
    int ok = s <= 2 || nd_handle_get(d, s, ND_STREAM);
    nd_unlock(d);
    if (!ok)
        return fail(ND_DNN_BAD_PARAM, "cudnnSetStream", "not a stream");
    h->stream = stream;
    return ND_DNN_SUCCESS;
}

nd_st cudnnGetStream(void *handle, void **stream)
{
    nd_dnn_handle *h = nd_dnn_handle_get(handle);
    if (!h || !stream)
        return ND_DNN_BAD_PARAM;
    *stream = h->stream;
    return ND_DNN_SUCCESS;
}

/* ---- descriptors ---- */

static nd_st ld_create(void **desc, int kind)
{
    if (!desc)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    nd_ld *d = calloc(1, sizeof *d);
    if (!d)
        return ND_DNN_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    d->magic = ND_LD_MAGIC;
    d->kind = kind;
    d->groups = 1;
    *desc = d;
    return ND_DNN_SUCCESS;
}

static nd_ld *ld_get(void *p, int kind)
{
    nd_ld *d = p;
    return d && d->magic == ND_LD_MAGIC && d->kind == kind ? d : NULL;
}

static nd_st ld_destroy(void *desc, int kind)
{
    nd_ld *d = ld_get(desc, kind);
    if (!desc)
        return ND_DNN_SUCCESS;
    if (!d)
        return ND_DNN_BAD_PARAM;
    d->magic = 0;
    free(d);
    return ND_DNN_SUCCESS;
}

#define ND_LD_PAIR(Name, kind)                                                                          \
    nd_st cudnnCreate##Name##Descriptor(void **desc);                                                   \
    nd_st cudnnDestroy##Name##Descriptor(void *desc);                                                   \
    nd_st cudnnCreate##Name##Descriptor(void **desc)                                                    \
    {                                                                                                   \
        return ld_create(desc, kind);                                                                   \
    }                                                                                                   \
    nd_st cudnnDestroy##Name##Descriptor(void *desc)                                                    \
    {                                                                                                   \
        return ld_destroy(desc, kind);                                                                  \
    }
ND_LD_PAIR(Tensor, ND_LD_TENSOR)
ND_LD_PAIR(Filter, ND_LD_FILTER)
ND_LD_PAIR(Convolution, ND_LD_CONV)
ND_LD_PAIR(Activation, ND_LD_ACTIVATION)
#undef ND_LD_PAIR

size_t nd_dnn_dtype_size(int dtype)
{
    switch (dtype) {
    case ND_DNN_DOUBLE:
    case ND_DNN_INT64:
        return 8;
    case ND_DNN_HALF:
    case ND_DNN_BFLOAT16:
        return 2;
    case ND_DNN_INT8:
    case ND_DNN_UINT8:
    case ND_DNN_BOOLEAN:
    case ND_DNN_FP8_E4M3:
    case ND_DNN_FP8_E5M2:
        return 1;
    case ND_DNN_FLOAT:
    case ND_DNN_INT32:
        return 4;
    default:
        return 0;
    }
}

nd_st cudnnSetTensorNdDescriptor(void *desc, int dtype, int nd, const int *dims, const int *strides);
nd_st cudnnGetTensorNdDescriptor(void *desc, int req, int *dtype, int *nd, int *dims, int *strides);
nd_st cudnnSetFilterNdDescriptor(void *desc, int dtype, int format, int nd, const int *dims);
nd_st cudnnGetFilterNdDescriptor(void *desc, int req, int *dtype, int *format, int *nd, int *dims);
nd_st cudnnSetConvolutionNdDescriptor(void *desc, int n, const int *pad, const int *stride, const int *dil, int mode,
                                      int dtype);
nd_st cudnnSetConvolutionGroupCount(void *desc, int groups);
nd_st cudnnSetConvolutionMathType(void *desc, int math);
nd_st cudnnSetActivationDescriptor(void *desc, int mode, int nan, double coef);

nd_st cudnnSetTensorNdDescriptor(void *desc, int dtype, int nd, const int *dims, const int *strides)
{
    nd_ld *d = ld_get(desc, ND_LD_TENSOR);
    if (!d || !dims || !strides || nd < 1 || nd > ND_LD_MAXDIM || !nd_dnn_dtype_size(dtype))
        return fail(ND_DNN_BAD_PARAM, "cudnnSetTensorNdDescriptor", "bad descriptor, rank or type");
    for (int i = 0; i < nd; i++)
        if (dims[i] < 1 || strides[i] < 1)
            return fail(ND_DNN_BAD_PARAM, "cudnnSetTensorNdDescriptor", "a dimension or stride below 1");
    d->dtype = dtype;
    d->nd = nd;
    memcpy(d->dims, dims, (size_t)nd * sizeof *dims);
    memcpy(d->strides, strides, (size_t)nd * sizeof *strides);
    d->set = 1;
    return ND_DNN_SUCCESS;
}

nd_st cudnnGetTensorNdDescriptor(void *desc, int req, int *dtype, int *nd, int *dims, int *strides)
{
    nd_ld *d = ld_get(desc, ND_LD_TENSOR);
    if (!d || !d->set || !dtype || !nd || req < 0)
        return ND_DNN_BAD_PARAM;
    *dtype = d->dtype;
    *nd = d->nd;
    for (int i = 0; i < req && i < d->nd; i++) {
        if (dims)
            dims[i] = d->dims[i];
        if (strides)
            strides[i] = d->strides[i];
    }
    return ND_DNN_SUCCESS;
}

nd_st cudnnSetFilterNdDescriptor(void *desc, int dtype, int format, int nd, const int *dims)
{
    nd_ld *d = ld_get(desc, ND_LD_FILTER);
    if (!d || !dims || nd < 3 || nd > ND_LD_MAXDIM || !nd_dnn_dtype_size(dtype) || format < 0 || format > 2)
        return fail(ND_DNN_BAD_PARAM, "cudnnSetFilterNdDescriptor", "bad descriptor, rank, type or format");
    for (int i = 0; i < nd; i++)
        if (dims[i] < 1)
            return fail(ND_DNN_BAD_PARAM, "cudnnSetFilterNdDescriptor", "a dimension below 1");
    d->dtype = dtype;
    d->format = format;
    d->nd = nd;
    memcpy(d->dims, dims, (size_t)nd * sizeof *dims);
    d->set = 1;
    return ND_DNN_SUCCESS;
}

nd_st cudnnGetFilterNdDescriptor(void *desc, int req, int *dtype, int *format, int *nd, int *dims)
{
    nd_ld *d = ld_get(desc, ND_LD_FILTER);
    if (!d || !d->set || !dtype || !format || !nd || req < 0)
        return ND_DNN_BAD_PARAM;
    *dtype = d->dtype;
    *format = d->format;
    *nd = d->nd;
    for (int i = 0; dims && i < req && i < d->nd; i++)
        dims[i] = d->dims[i];
    return ND_DNN_SUCCESS;
}

nd_st cudnnSetConvolutionNdDescriptor(void *desc, int n, const int *pad, const int *stride, const int *dil, int mode,
                                      int dtype)
{
    nd_ld *d = ld_get(desc, ND_LD_CONV);
    if (!d || !pad || !stride || !dil || n < 1 || n > ND_LD_MAXDIM - 2 || mode < 0 || mode > 1 ||
        !nd_dnn_dtype_size(dtype))
        return fail(ND_DNN_BAD_PARAM, "cudnnSetConvolutionNdDescriptor", "bad descriptor, rank, mode or type");
    for (int i = 0; i < n; i++)
        if (pad[i] < 0 || stride[i] < 1 || dil[i] < 1)
            return fail(ND_DNN_BAD_PARAM, "cudnnSetConvolutionNdDescriptor", "a padding, stride or dilation out of range");
    d->nd = n;
    memcpy(d->pad, pad, (size_t)n * sizeof *pad);
    memcpy(d->stride, stride, (size_t)n * sizeof *stride);
    memcpy(d->dil, dil, (size_t)n * sizeof *dil);
    d->mode = mode;
    d->dtype = dtype;
    d->set = 1;
    return ND_DNN_SUCCESS;
}

nd_st cudnnSetConvolutionGroupCount(void *desc, int groups)
{
    nd_ld *d = ld_get(desc, ND_LD_CONV);
    if (!d || groups < 1)
        return ND_DNN_BAD_PARAM;
    d->groups = groups;
    return ND_DNN_SUCCESS;
}

nd_st cudnnSetConvolutionMathType(void *desc, int math)
{
    nd_ld *d = ld_get(desc, ND_LD_CONV);
    if (!d || math < 0 || math > 3)
        return ND_DNN_BAD_PARAM;
    d->math = math;
    return ND_DNN_SUCCESS;
}

nd_st cudnnSetActivationDescriptor(void *desc, int mode, int nan, double coef)
{
    nd_ld *d = ld_get(desc, ND_LD_ACTIVATION);
    if (!d || mode < 0 || mode > 6 || nan < 0 || nan > 1)
        return ND_DNN_BAD_PARAM;
    d->mode = mode;
    d->coef = coef;
    d->set = 1;
    return ND_DNN_SUCCESS;
}

/* ---- convolutions (the v7 API) ---- */

enum { ND_CONV_FWD, ND_CONV_BWD_DATA, ND_CONV_BWD_FILTER };

static const int conv_ops[3] = {ND_BD_OP_CONV_FORWARD, ND_BD_OP_CONV_BWD_DATA, ND_BD_OP_CONV_BWD_FILTER};
static const int conv_algos[3] = {8, 6, 7}; /* the algorithms each direction has */

/* A convolution's problem from its descriptors (x the input, y the output,
 * whichever direction): shapes consistent, or BAD_PARAM with the reason. */
typedef struct nd_conv_args {
    int64_t nd;
    int64_t x[ND_LD_MAXDIM], w[ND_LD_MAXDIM];
    int math;
} nd_conv_args;

static nd_st conv_args(const char *call, void *handle, void *xd, void *wd, void *cd, void *yd, nd_conv_args *a)
{
    nd_ld *x = ld_get(xd, ND_LD_TENSOR), *w = ld_get(wd, ND_LD_FILTER), *c = ld_get(cd, ND_LD_CONV);
    nd_ld *y = ld_get(yd, ND_LD_TENSOR);
    if (!nd_dnn_handle_get(handle))
        return fail(ND_DNN_BAD_PARAM, call, "not a handle");
    if (!x || !w || !c || !y || !x->set || !w->set || !c->set || !y->set)
        return fail(ND_DNN_BAD_PARAM, call, "a descriptor is missing or not set");
    if (x->nd != w->nd || x->nd != y->nd || c->nd != x->nd - 2)
        return fail(ND_DNN_BAD_PARAM, call, "ranks differ");
    int n = x->dims[0], ch = x->dims[1], k = w->dims[0], g = c->groups;
    if (y->dims[0] != n || y->dims[1] != k || ch != w->dims[1] * g || k % g)
        return fail(ND_DNN_BAD_PARAM, call, "batch or channels differ");
    for (int i = 2; i < x->nd; i++) {
        int s = i - 2;
        int span = x->dims[i] + 2 * c->pad[s] - c->dil[s] * (w->dims[i] - 1) - 1;
        if (span < 0 || span / c->stride[s] + 1 != y->dims[i])
            return fail(ND_DNN_BAD_PARAM, call, "the output's extent is not the convolution's");
    }
    a->nd = x->nd;
    for (int i = 0; i < x->nd; i++) {
        a->x[i] = x->dims[i];
        a->w[i] = w->dims[i];
    }
    a->math = c->math;
    return ND_DNN_SUCCESS;
}

static size_t conv_ws(int dir, const nd_conv_args *a, int algo)
{
    return algo == 1 ? (size_t)nd_dnn_conv_workspace(conv_ops[dir], a->nd, a->x, a->w) : 0;
}

/* The algorithms in preference order (1, then 0), with their workspaces;
 * limit: only those fitting it (a find), SIZE_MAX: all (the heuristics). */
static nd_st conv_perf(int dir, const nd_conv_args *a, int req, int *ret, void *out, size_t limit)
{
    static const int order[2] = {1, 0};
    nd_algo_perf *perf = out;
    int n = 0;
    if (!ret || !out || req < 1)
        return ND_DNN_BAD_PARAM;
    for (int i = 0; i < 2 && n < req; i++) {
        size_t ws = conv_ws(dir, a, order[i]);
        if (ws > limit)
            continue;
        memset(&perf[n], 0, sizeof perf[n]);
        perf[n].algo = order[i];
        perf[n].time = 0.01f * (float)(i + 1);
        perf[n].memory = ws;
        perf[n].determinism = 1;
        perf[n].math_type = a->math;
        n++;
    }
    *ret = n;
    return ND_DNN_SUCCESS;
}

nd_st cudnnGetConvolutionForwardAlgorithm_v7(void *h, void *x, void *w, void *c, void *y, int req, int *ret, void *perf);
nd_st cudnnGetConvolutionBackwardDataAlgorithm_v7(void *h, void *w, void *dy, void *c, void *dx, int req, int *ret,
                                                  void *perf);
nd_st cudnnGetConvolutionBackwardFilterAlgorithm_v7(void *h, void *x, void *dy, void *c, void *dw, int req, int *ret,
                                                    void *perf);
nd_st cudnnGetConvolutionForwardWorkspaceSize(void *h, void *x, void *w, void *c, void *y, int algo, size_t *size);
nd_st cudnnGetConvolutionBackwardDataWorkspaceSize(void *h, void *w, void *dy, void *c, void *dx, int algo,
                                                   size_t *size);
nd_st cudnnGetConvolutionBackwardFilterWorkspaceSize(void *h, void *x, void *dy, void *c, void *dw, int algo,
                                                     size_t *size);

nd_st cudnnGetConvolutionForwardAlgorithm_v7(void *h, void *x, void *w, void *c, void *y, int req, int *ret, void *perf)
{
    nd_conv_args a;
    nd_st st = conv_args("cudnnGetConvolutionForwardAlgorithm_v7", h, x, w, c, y, &a);
    return st ? st : conv_perf(ND_CONV_FWD, &a, req, ret, perf, SIZE_MAX);
}

nd_st cudnnGetConvolutionBackwardDataAlgorithm_v7(void *h, void *w, void *dy, void *c, void *dx, int req, int *ret,
                                                  void *perf)
{
    nd_conv_args a;
    nd_st st = conv_args("cudnnGetConvolutionBackwardDataAlgorithm_v7", h, dx, w, c, dy, &a);
    return st ? st : conv_perf(ND_CONV_BWD_DATA, &a, req, ret, perf, SIZE_MAX);
}

nd_st cudnnGetConvolutionBackwardFilterAlgorithm_v7(void *h, void *x, void *dy, void *c, void *dw, int req, int *ret,
                                                    void *perf)
{
    nd_conv_args a;
    nd_st st = conv_args("cudnnGetConvolutionBackwardFilterAlgorithm_v7", h, x, dw, c, dy, &a);
    return st ? st : conv_perf(ND_CONV_BWD_FILTER, &a, req, ret, perf, SIZE_MAX);
}

static nd_st ws_answer(const char *call, int dir, nd_st st, const nd_conv_args *a, int algo, size_t *size)
{
    if (st)
        return st;
    if (!size || algo < 0 || algo >= conv_algos[dir])
        return fail(ND_DNN_BAD_PARAM, call, "no such algorithm");
    *size = conv_ws(dir, a, algo);
    return ND_DNN_SUCCESS;
}

nd_st cudnnGetConvolutionForwardWorkspaceSize(void *h, void *x, void *w, void *c, void *y, int algo, size_t *size)
{
    nd_conv_args a;
    const char *call = "cudnnGetConvolutionForwardWorkspaceSize";
    return ws_answer(call, ND_CONV_FWD, conv_args(call, h, x, w, c, y, &a), &a, algo, size);
}

nd_st cudnnGetConvolutionBackwardDataWorkspaceSize(void *h, void *w, void *dy, void *c, void *dx, int algo,
                                                   size_t *size)
{
    nd_conv_args a;
    const char *call = "cudnnGetConvolutionBackwardDataWorkspaceSize";
    return ws_answer(call, ND_CONV_BWD_DATA, conv_args(call, h, dx, w, c, dy, &a), &a, algo, size);
}

nd_st cudnnGetConvolutionBackwardFilterWorkspaceSize(void *h, void *x, void *dy, void *c, void *dw, int algo,
                                                     size_t *size)
{
    nd_conv_args a;
    const char *call = "cudnnGetConvolutionBackwardFilterWorkspaceSize";
    return ws_answer(call, ND_CONV_BWD_FILTER, conv_args(call, h, x, dw, c, dy, &a), &a, algo, size);
}

/* What a run is given to work with: its algorithm and its workspace. */
typedef struct nd_conv_exec {
    int algo;
    const void *ws;
    size_t ws_size;
} nd_conv_exec;

/* A convolution run: its arguments checked, its workspace given, its
 * tensors in device memory; then work on the handle's stream. */
static nd_st conv_run(const char *call, int dir, void *h, const void *ptrs[3], nd_st st, const nd_conv_args *a,
                      const nd_conv_exec *x)
{
    int algo = x->algo;
    const void *ws = x->ws;
    size_t ws_size = x->ws_size;
    nd_device *d = nd_dev();
    if (st)
        return st;
    if (algo < 0 || algo >= conv_algos[dir])
        return fail(ND_DNN_BAD_PARAM, call, "no such algorithm");
    size_t need = conv_ws(dir, a, algo);
    if (ws_size < need || (need && !nd_is_device(d, ws, need)))
        return fail(ND_DNN_BAD_PARAM, call, "the workspace is missing or too small");
    for (int i = 0; i < 3; i++)
        if (!nd_is_device(d, ptrs[i], 1))
            return fail(ND_DNN_BAD_PARAM, call, "a tensor is not in device memory");
    nd_dnn_work(nd_dnn_handle_get(h));
    return ND_DNN_SUCCESS;
}

nd_st cudnnConvolutionForward(void *h, const void *alpha, void *xd, const void *x, void *wd, const void *w, void *cd,
                              int algo, void *ws, size_t ws_size, const void *beta, void *yd, void *y);
nd_st cudnnConvolutionBackwardData(void *h, const void *alpha, void *wd, const void *w, void *dyd, const void *dy,
                                   void *cd, int algo, void *ws, size_t ws_size, const void *beta, void *dxd, void *dx);
nd_st cudnnConvolutionBackwardFilter(void *h, const void *alpha, void *xd, const void *x, void *dyd, const void *dy,
                                     void *cd, int algo, void *ws, size_t ws_size, const void *beta, void *dwd,
                                     void *dw);

nd_st cudnnConvolutionForward(void *h, const void *alpha, void *xd, const void *x, void *wd, const void *w, void *cd,
                              int algo, void *ws, size_t ws_size, const void *beta, void *yd, void *y)
{
    nd_conv_args a;
    const char *call = "cudnnConvolutionForward";
    const void *ptrs[3] = {x, w, y};
    (void)alpha, (void)beta;
    return conv_run(call, ND_CONV_FWD, h, ptrs, conv_args(call, h, xd, wd, cd, yd, &a), &a,
                    &(nd_conv_exec){algo, ws, ws_size});
}

nd_st cudnnConvolutionBackwardData(void *h, const void *alpha, void *wd, const void *w, void *dyd, const void *dy,
                                   void *cd, int algo, void *ws, size_t ws_size, const void *beta, void *dxd, void *dx)
{
    nd_conv_args a;
    const char *call = "cudnnConvolutionBackwardData";
    const void *ptrs[3] = {w, dy, dx};
    (void)alpha, (void)beta;
    return conv_run(call, ND_CONV_BWD_DATA, h, ptrs, conv_args(call, h, dxd, wd, cd, dyd, &a), &a,
                    &(nd_conv_exec){algo, ws, ws_size});
}

nd_st cudnnConvolutionBackwardFilter(void *h, const void *alpha, void *xd, const void *x, void *dyd, const void *dy,
                                     void *cd, int algo, void *ws, size_t ws_size, const void *beta, void *dwd,
                                     void *dw)
{
    nd_conv_args a;
    const char *call = "cudnnConvolutionBackwardFilter";
    const void *ptrs[3] = {x, dy, dw};
    (void)alpha, (void)beta;
    return conv_run(call, ND_CONV_BWD_FILTER, h, ptrs, conv_args(call, h, xd, dwd, cd, dyd, &a), &a,
                    &(nd_conv_exec){algo, ws, ws_size});
}

nd_st cudnnConvolutionBiasActivationForward(void *h, const void *alpha1, void *xd, const void *x, void *wd,
                                            const void *w, void *cd, int algo, void *ws, size_t ws_size,
                                            const void *alpha2, void *zd, const void *z, void *bd, const void *bias,
                                            void *act, void *yd, void *y);

/* The fused forward (y = act(alpha1 * conv(x) + alpha2 * z + bias)): the
 * convolution's checks, the activation set, z and bias in device memory. */
nd_st cudnnConvolutionBiasActivationForward(void *h, const void *alpha1, void *xd, const void *x, void *wd,
                                            const void *w, void *cd, int algo, void *ws, size_t ws_size,
                                            const void *alpha2, void *zd, const void *z, void *bd, const void *bias,
                                            void *act, void *yd, void *y)
{
    nd_conv_args a;
    const char *call = "cudnnConvolutionBiasActivationForward";
    const void *ptrs[3] = {x, w, y};
    nd_ld *ad = ld_get(act, ND_LD_ACTIVATION);
    nd_device *d = nd_dev();
    (void)alpha1, (void)alpha2;
    if (!ad || !ad->set || !ld_get(zd, ND_LD_TENSOR) || !ld_get(bd, ND_LD_TENSOR))
        return fail(ND_DNN_BAD_PARAM, call, "the activation, z or bias descriptor is missing");
    if (!nd_is_device(d, z, 1) || !nd_is_device(d, bias, 1))
        return fail(ND_DNN_BAD_PARAM, call, "z or the bias is not in device memory");
    return conv_run(call, ND_CONV_FWD, h, ptrs, conv_args(call, h, xd, wd, cd, yd, &a), &a,
                    &(nd_conv_exec){algo, ws, ws_size});
}

nd_st cudnnFindConvolutionForwardAlgorithmEx(void *h, void *xd, const void *x, void *wd, const void *w, void *cd,
                                             void *yd, void *y, int req, int *ret, void *perf, void *ws,
                                             size_t ws_size);
nd_st cudnnFindConvolutionBackwardDataAlgorithmEx(void *h, void *wd, const void *w, void *dyd, const void *dy,
                                                  void *cd, void *dxd, void *dx, int req, int *ret, void *perf,
                                                  void *ws, size_t ws_size);
nd_st cudnnFindConvolutionBackwardFilterAlgorithmEx(void *h, void *xd, const void *x, void *dyd, const void *dy,
                                                    void *cd, void *dwd, void *dw, int req, int *ret, void *perf,
                                                    void *ws, size_t ws_size);

/* A find runs each algorithm that fits the workspace given: its runs are work. */
static nd_st find(int dir, void *h, nd_st st, const nd_conv_args *a, int req, int *ret, void *perf, size_t ws_size)
{
    if (st)
        return st;
    st = conv_perf(dir, a, req, ret, perf, ws_size);
    if (!st)
        nd_dnn_work(nd_dnn_handle_get(h));
    return st;
}

nd_st cudnnFindConvolutionForwardAlgorithmEx(void *h, void *xd, const void *x, void *wd, const void *w, void *cd,
                                             void *yd, void *y, int req, int *ret, void *perf, void *ws,
                                             size_t ws_size)
{
    nd_conv_args a;
    (void)x, (void)w, (void)y, (void)ws;
    return find(ND_CONV_FWD, h, conv_args("cudnnFindConvolutionForwardAlgorithmEx", h, xd, wd, cd, yd, &a), &a, req,
                ret, perf, ws_size);
}

nd_st cudnnFindConvolutionBackwardDataAlgorithmEx(void *h, void *wd, const void *w, void *dyd, const void *dy,
                                                  void *cd, void *dxd, void *dx, int req, int *ret, void *perf,
                                                  void *ws, size_t ws_size)
{
    nd_conv_args a;
    (void)w, (void)dy, (void)dx, (void)ws;
    return find(ND_CONV_BWD_DATA, h,
                conv_args("cudnnFindConvolutionBackwardDataAlgorithmEx", h, dxd, wd, cd, dyd, &a), &a, req, ret,
                perf, ws_size);
}

nd_st cudnnFindConvolutionBackwardFilterAlgorithmEx(void *h, void *xd, const void *x, void *dyd, const void *dy,
                                                    void *cd, void *dwd, void *dw, int req, int *ret, void *perf,
                                                    void *ws, size_t ws_size)
{
    nd_conv_args a;
    (void)x, (void)dy, (void)dw, (void)ws;
    return find(ND_CONV_BWD_FILTER, h,
                conv_args("cudnnFindConvolutionBackwardFilterAlgorithmEx", h, xd, dwd, cd, dyd, &a), &a, req, ret,
                perf, ws_size);
}

/* ---- batch normalization ---- */

/* The input's channels and elements (0: not a set tensor descriptor). */
static int64_t bn_shape(void *xd, int64_t *channels)
{
    nd_ld *x = ld_get(xd, ND_LD_TENSOR);
    if (!x || !x->set || x->nd < 2)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < x->nd; i++)
        n *= x->dims[i];
    *channels = x->dims[1];
    return n;
}

static nd_st bn_sizes(const char *call, void *h, int mode, int ops, void *xd, size_t *ws, size_t *reserve)
{
    int64_t c = 0, n = bn_shape(xd, &c);
    if (!nd_dnn_handle_get(h) || !n || mode < ND_BN_PER_ACTIVATION || mode > ND_BN_SPATIAL_PERSISTENT || ops < 0 ||
        ops > 2)
        return fail(ND_DNN_BAD_PARAM, call, "bad handle, input, mode or operations");
    if (ws)
        *ws = mode == ND_BN_SPATIAL_PERSISTENT ? (size_t)nd_dnn_align(512 * c) : 0;
    if (reserve)
        *reserve = (size_t)nd_dnn_align(8 * c) + (ops != ND_BN_OPS_BN ? (size_t)nd_dnn_align((n + 7) / 8) : 0);
    return ND_DNN_SUCCESS;
}

nd_st cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(void *h, int mode, int ops, void *xd, void *zd,
                                                               void *yd, void *bnd, void *act, size_t *size);
nd_st cudnnGetBatchNormalizationBackwardExWorkspaceSize(void *h, int mode, int ops, void *xd, void *yd, void *dyd,
                                                        void *dzd, void *dxd, void *dbnd, void *act, size_t *size);
nd_st cudnnGetBatchNormalizationTrainingExReserveSpaceSize(void *h, int mode, int ops, void *act, void *xd,
                                                           size_t *size);

nd_st cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(void *h, int mode, int ops, void *xd, void *zd,
                                                               void *yd, void *bnd, void *act, size_t *size)
{
    (void)zd, (void)yd, (void)bnd, (void)act;
    if (!size)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    return bn_sizes("cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize", h, mode, ops, xd, size, NULL);
}

nd_st cudnnGetBatchNormalizationBackwardExWorkspaceSize(void *h, int mode, int ops, void *xd, void *yd, void *dyd,
                                                        void *dzd, void *dxd, void *dbnd, void *act, size_t *size)
{
    (void)yd, (void)dyd, (void)dzd, (void)dxd, (void)dbnd, (void)act;
    if (!size)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    return bn_sizes("cudnnGetBatchNormalizationBackwardExWorkspaceSize", h, mode, ops, xd, size, NULL);
}

nd_st cudnnGetBatchNormalizationTrainingExReserveSpaceSize(void *h, int mode, int ops, void *act, void *xd,
                                                           size_t *size)
{
    (void)act;
    if (!size)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    return bn_sizes("cudnnGetBatchNormalizationTrainingExReserveSpaceSize", h, mode, ops, xd, NULL, size);
}

/* What a batch norm run is given: its tensors' device pointers, its
 * workspace and reserve space (training only). */
typedef struct nd_bn_buffers {
    const void *const *ptrs;
    int nptrs;
    const void *ws;
    size_t ws_size;
    const void *reserve;
    size_t reserve_size;
    int training;
} nd_bn_buffers;

/* A batch norm run: workspace and reserve space at least what was asked,
 * the device pointers device memory; then work on the stream. */
static nd_st bn_run(const char *call, void *h, int mode, int ops, void *xd, const nd_bn_buffers *b)
{
    const void *const *ptrs = b->ptrs;
    int nptrs = b->nptrs, training = b->training;
    const void *ws = b->ws, *reserve = b->reserve;
    size_t ws_size = b->ws_size, reserve_size = b->reserve_size;
    size_t need_ws = 0, need_reserve = 0;
    nd_device *d = nd_dev();
    nd_st st = bn_sizes(call, h, mode, ops, xd, &need_ws, &need_reserve);
    if (st)
        return st;
    if (!training)
        need_ws = 0;
    if (ws_size < need_ws || (need_ws && !nd_is_device(d, ws, need_ws)))
        return fail(ND_DNN_BAD_PARAM, call, "the workspace is missing or too small");
    if (training && (reserve_size < need_reserve || (reserve && !nd_is_device(d, reserve, need_reserve))))
        return fail(ND_DNN_BAD_PARAM, call, "the reserve space is too small");
    for (int i = 0; i < nptrs; i++)
        if (!nd_is_device(d, ptrs[i], 1))
            return fail(ND_DNN_BAD_PARAM, call, "a tensor is not in device memory");
    nd_dnn_work(nd_dnn_handle_get(h));
    return ND_DNN_SUCCESS;
}

nd_st cudnnBatchNormalizationForwardTrainingEx(void *h, int mode, int ops, const void *alpha, const void *beta,
                                               void *xd, const void *x, void *zd, const void *z, void *yd, void *y,
                                               void *bnd, const void *scale, const void *bias, double factor,
                                               void *run_mean, void *run_var, double eps, void *save_mean,
                                               void *save_inv_var, void *act, void *ws, size_t ws_size,
                                               void *reserve, size_t reserve_size);
nd_st cudnnBatchNormalizationForwardInference(void *h, int mode, const void *alpha, const void *beta, void *xd,
                                              const void *x, void *yd, void *y, void *bnd, const void *scale,
                                              const void *bias, const void *mean, const void *var, double eps);
nd_st cudnnBatchNormalizationBackwardEx(void *h, int mode, int ops, const void *ad, const void *bd, const void *ap,
                                        const void *bp, void *xd, const void *x, void *yd, const void *y, void *dyd,
                                        const void *dy, void *dzd, void *dz, void *dxd, void *dx, void *dbnd,
                                        const void *scale, const void *bias, void *dscale, void *dbias, double eps,
                                        const void *save_mean, const void *save_inv_var, void *act, void *ws,
                                        size_t ws_size, void *reserve, size_t reserve_size);

nd_st cudnnBatchNormalizationForwardTrainingEx(void *h, int mode, int ops, const void *alpha, const void *beta,
                                               void *xd, const void *x, void *zd, const void *z, void *yd, void *y,
                                               void *bnd, const void *scale, const void *bias, double factor,
                                               void *run_mean, void *run_var, double eps, void *save_mean,
                                               void *save_inv_var, void *act, void *ws, size_t ws_size,
                                               void *reserve, size_t reserve_size)
{
    const void *ptrs[] = {x, y, scale, bias};
    (void)alpha, (void)beta, (void)zd, (void)z, (void)yd, (void)bnd, (void)factor, (void)run_mean, (void)run_var;
    (void)eps, (void)save_mean, (void)save_inv_var, (void)act;
    return bn_run("cudnnBatchNormalizationForwardTrainingEx", h, mode, ops, xd,
                  &(nd_bn_buffers){ptrs, 4, ws, ws_size, reserve, reserve_size, 1});
}

nd_st cudnnBatchNormalizationForwardInference(void *h, int mode, const void *alpha, const void *beta, void *xd,
                                              const void *x, void *yd, void *y, void *bnd, const void *scale,
                                              const void *bias, const void *mean, const void *var, double eps)
{
    const void *ptrs[] = {x, y, scale, bias, mean, var};
    (void)alpha, (void)beta, (void)yd, (void)bnd, (void)eps;
    return bn_run("cudnnBatchNormalizationForwardInference", h, mode, ND_BN_OPS_BN, xd,
                  &(nd_bn_buffers){ptrs, 6, NULL, 0, NULL, 0, 0});
}

nd_st cudnnBatchNormalizationBackwardEx(void *h, int mode, int ops, const void *ad, const void *bd, const void *ap,
                                        const void *bp, void *xd, const void *x, void *yd, const void *y, void *dyd,
                                        const void *dy, void *dzd, void *dz, void *dxd, void *dx, void *dbnd,
                                        const void *scale, const void *bias, void *dscale, void *dbias, double eps,
                                        const void *save_mean, const void *save_inv_var, void *act, void *ws,
                                        size_t ws_size, void *reserve, size_t reserve_size)
{
    const void *ptrs[] = {x, dy, dx, scale, dscale, dbias};
    (void)ad, (void)bd, (void)ap, (void)bp, (void)yd, (void)y, (void)dyd, (void)dzd, (void)dz, (void)dxd, (void)dbnd;
    (void)bias, (void)eps, (void)save_mean, (void)save_inv_var, (void)act;
    return bn_run("cudnnBatchNormalizationBackwardEx", h, mode, ops, xd,
                  &(nd_bn_buffers){ptrs, 6, ws, ws_size, reserve, reserve_size, 1});
}
