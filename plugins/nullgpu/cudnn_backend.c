/* sublet — the null device: cuDNN 9's backend API (cudnnBackend*), the
 * graph interface PyTorch's convolutions reach through cudnn_frontend.
 *
 * A descriptor is a host object holding its type and the attributes set on
 * it (values copied, descriptors referenced and counted).  Finalize checks
 * what the type needs (required attributes present, counts and shapes
 * consistent: a convolution's output is what its input, filter, paddings,
 * strides and dilations make it) and derives what the library answers: an
 * operation graph's engine count, an engine configuration's and an
 * execution plan's workspace.  Nothing is computed and no device memory is
 * allocated: the caller allocates the workspace the plan reports, as on
 * hardware.
 *
 * Engines (the rule, documented in docs/nullgpu.md): a graph holding a
 * convolution has two, global index 0 and 1; any other graph has one.
 * Heuristics answer every engine in index order (the fallback mode: the
 * last).  Engine 0 of a convolution needs a workspace, rounded up to 256
 * bytes: forward, 4 bytes per filter tap and input channel of a group
 * (4 * C/g * prod(k)); backward data, the same for the output channels
 * (4 * K/g * prod(k)); backward filter, 4 bytes per element of the filter
 * gradient (an fp32 accumulator, whatever the data type).  Every other
 * engine needs none.  No engine has numerical or behaviour notes or knobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nd_cudnn.h"
#include "nullgpu.h"

#define ND_BD_MAGIC 0x6e646264u
#define ND_BD_ATTRS 32
#define ND_BD_MAXDIM 8

typedef struct nd_battr {
    int name, type;
    int64_t n;
    unsigned char *v;
} nd_battr;

typedef struct nd_bd {
    uint32_t magic;
    int type;
    int finalized;
    int refs;        /* the owner's, plus one per attribute referring to it (atomic:
                      * PyTorch's threads share cached plans and what they refer to) */
    int nattr;
    nd_battr attr[ND_BD_ATTRS];
    int64_t engines; /* an operation graph: engine count */
    int64_t ws;      /* an engine configuration, an execution plan: workspace bytes */
} nd_bd;

typedef int nd_st;

nd_st cudnnBackendCreateDescriptor(int type, void **desc);
nd_st cudnnBackendDestroyDescriptor(void *desc);
nd_st cudnnBackendInitialize(void *desc);
nd_st cudnnBackendFinalize(void *desc);
nd_st cudnnBackendSetAttribute(void *desc, int name, int type, int64_t n, const void *vals);
nd_st cudnnBackendGetAttribute(void *desc, int name, int type, int64_t req, int64_t *n, void *vals);
nd_st cudnnBackendExecute(void *handle, void *plan, void *pack);

static int trace(void)
{
    static int t = -1;
    if (t < 0)
        t = nd_env_int("SUBLET_NULLGPU_CUDNN_TRACE", 0);
    return t;
}

/* The bytes of one element of an attribute type (0: not a type). */
static size_t elem_size(int type)
{
    switch (type) {
    case ND_AT_HANDLE:
    case ND_AT_INT64:
    case ND_AT_DOUBLE:
    case ND_AT_VOID_PTR:
    case ND_AT_BACKEND_DESCRIPTOR:
        return 8;
    case ND_AT_BOOLEAN:
    case ND_AT_CHAR:
        return 1;
    case ND_AT_FRACTION:
        return 16;
    default:
        return type >= 0 && type <= ND_AT_LAST ? 4 : 0;
    }
}

static nd_bd *bd_get(void *p)
{
    nd_bd *d = p;
    return d && d->magic == ND_BD_MAGIC ? d : NULL;
}

static nd_battr *attr_find(nd_bd *d, int name)
{
    for (int i = 0; i < d->nattr; i++)
        if (d->attr[i].name == name)
            return &d->attr[i];
    return NULL;
}

static void bd_unref(nd_bd *d);

static void attr_clear(nd_battr *a)
{
    if (a->type == ND_AT_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < a->n; i++)
            bd_unref(((nd_bd **)(void *)a->v)[i]);
    free(a->v);
    a->v = NULL;
    a->n = 0;
}

static void bd_clear(nd_bd *d)
{
    for (int i = 0; i < d->nattr; i++)
        attr_clear(&d->attr[i]);
    d->nattr = 0;
    d->finalized = 0;
    d->engines = d->ws = 0;
}

static void bd_unref(nd_bd *d)
{
    if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    bd_clear(d);
    d->magic = 0;
    free(d);
}

static nd_bd *bd_new(int type)
{
    nd_bd *d = calloc(1, sizeof *d);
    if (d) {
        d->magic = ND_BD_MAGIC;
        d->type = type;
        d->refs = 1;
    }
    return d;
}

/* Sets (replaces) an attribute: values copied, descriptors referenced. */
static nd_st attr_put(nd_bd *d, int name, int type, int64_t n, const void *vals)
{
    size_t es = elem_size(type);
    if (!es || n < 0 || n > (1 << 20))
        return ND_DNN_BAD_PARAM;
    if (n > 0 && !vals)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    if (type == ND_AT_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < n; i++)
            if (!bd_get(((void *const *)vals)[i]))
                return ND_DNN_BAD_PARAM;
    nd_battr *a = attr_find(d, name);
    if (!a) {
        if (d->nattr == ND_BD_ATTRS)
            return ND_DNN_BAD_PARAM_OUT_OF_BOUND;
        a = &d->attr[d->nattr++];
        memset(a, 0, sizeof *a);
        a->name = name;
    }
    unsigned char *v = malloc(n ? (size_t)n * es : 1);
    if (!v)
        return ND_DNN_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (n)
        memcpy(v, vals, (size_t)n * es);
    if (type == ND_AT_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < n; i++)
            __atomic_add_fetch(&((nd_bd **)(void *)v)[i]->refs, 1, __ATOMIC_RELAXED);
    attr_clear(a);
    a->type = type;
    a->n = n;
    a->v = v;
    return ND_DNN_SUCCESS;
}

/* The attribute's INT64 values (NULL when absent, or not INT64); *n their count. */
static const int64_t *attr_i64(nd_bd *d, int name, int64_t *n)
{
    nd_battr *a = attr_find(d, name);
    if (!a || a->type != ND_AT_INT64)
        return NULL;
    *n = a->n;
    return (const int64_t *)(const void *)a->v;
}

/* The first descriptor an attribute refers to, of the type wanted (-1: any). */
static nd_bd *attr_desc(nd_bd *d, int name, int type)
{
    nd_battr *a = attr_find(d, name);
    if (!a || a->type != ND_AT_BACKEND_DESCRIPTOR || a->n < 1)
        return NULL;
    nd_bd *r = ((nd_bd **)(void *)a->v)[0];
    return type < 0 || r->type == type ? r : NULL;
}

static int attr_int(nd_bd *d, int name, int type, int *out)
{
    nd_battr *a = attr_find(d, name);
    if (!a || a->type != type || a->n != 1 || elem_size(type) != 4)
        return 0;
    memcpy(out, a->v, 4);
    return 1;
}

/* ---- finalize: a tensor, a convolution, a convolution operation ---- */

static nd_st fin_tensor(nd_bd *d)
{
    int64_t nd = 0, ns = 0, n = 0;
    int dt;
    const int64_t *dims = attr_i64(d, ND_A_TENSOR_DIMENSIONS, &nd);
    const int64_t *strides = attr_i64(d, ND_A_TENSOR_STRIDES, &ns);
    if (!dims || !strides || !attr_i64(d, ND_A_TENSOR_UNIQUE_ID, &n) || n != 1 ||
        !attr_int(d, ND_A_TENSOR_DATA_TYPE, ND_AT_DATA_TYPE, &dt) || !attr_i64(d, ND_A_TENSOR_BYTE_ALIGNMENT, &n))
        return ND_DNN_BAD_PARAM;
    if (nd != ns || nd < 1 || nd > ND_BD_MAXDIM)
        return ND_DNN_BAD_PARAM_SHAPE_MISMATCH;
    for (int64_t i = 0; i < nd; i++)
        if (dims[i] < 1 || strides[i] < 0)
            return ND_DNN_BAD_PARAM_OUT_OF_BOUND;
    return ND_DNN_SUCCESS;
}

static nd_st fin_conv(nd_bd *d)
{
    int64_t n = 0, k;
    int v;
    const int64_t *sd = attr_i64(d, ND_A_CONV_SPATIAL_DIMS, &n);
    if (!sd || n != 1 || sd[0] < 1 || sd[0] > ND_BD_MAXDIM - 2 || !attr_int(d, ND_A_CONV_COMP_TYPE, ND_AT_DATA_TYPE, &v) ||
        !attr_find(d, ND_A_CONV_MODE))
        return ND_DNN_BAD_PARAM;
    static const int per_dim[] = {ND_A_CONV_DILATIONS, ND_A_CONV_FILTER_STRIDES, ND_A_CONV_PRE_PADDINGS,
                                  ND_A_CONV_POST_PADDINGS};
    for (size_t i = 0; i < sizeof per_dim / sizeof per_dim[0]; i++)
        if (!attr_i64(d, per_dim[i], &k) || k != sd[0])
            return ND_DNN_BAD_PARAM_SHAPE_MISMATCH;
    return ND_DNN_SUCCESS;
}

/* A convolution operation's problem, from its descriptors. */
typedef struct nd_convp {
    int op;                /* ND_BD_OP_CONV_* */
    int64_t nd;            /* tensor rank */
    const int64_t *x, *w, *y; /* dims of input, filter, output */
    const int64_t *pre, *post, *stride, *dil;
} nd_convp;

static nd_st conv_problem(nd_bd *op, nd_convp *p)
{
    static const int names[3][4] = {
        {ND_A_CONV_FWD_X, ND_A_CONV_FWD_W, ND_A_CONV_FWD_Y, ND_A_CONV_FWD_CONV_DESC},
        {ND_A_CONV_BWD_FILTER_X, ND_A_CONV_BWD_FILTER_DW, ND_A_CONV_BWD_FILTER_DY, ND_A_CONV_BWD_FILTER_CONV_DESC},
        {ND_A_CONV_BWD_DATA_DX, ND_A_CONV_BWD_DATA_W, ND_A_CONV_BWD_DATA_DY, ND_A_CONV_BWD_DATA_CONV_DESC},
    };
    const int *nm = names[op->type - ND_BD_OP_CONV_FORWARD];
    nd_bd *x = attr_desc(op, nm[0], ND_BD_TENSOR), *w = attr_desc(op, nm[1], ND_BD_TENSOR);
    nd_bd *y = attr_desc(op, nm[2], ND_BD_TENSOR), *c = attr_desc(op, nm[3], ND_BD_CONVOLUTION);
    if (!x || !w || !y || !c)
        return ND_DNN_BAD_PARAM;
    if (!x->finalized || !w->finalized || !y->finalized || !c->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    int64_t nx = 0, nw = 0, ny = 0, k = 0;
    p->op = op->type;
    p->x = attr_i64(x, ND_A_TENSOR_DIMENSIONS, &nx);
    p->w = attr_i64(w, ND_A_TENSOR_DIMENSIONS, &nw);
    p->y = attr_i64(y, ND_A_TENSOR_DIMENSIONS, &ny);
    p->pre = attr_i64(c, ND_A_CONV_PRE_PADDINGS, &k);
    p->post = attr_i64(c, ND_A_CONV_POST_PADDINGS, &k);
    p->stride = attr_i64(c, ND_A_CONV_FILTER_STRIDES, &k);
    p->dil = attr_i64(c, ND_A_CONV_DILATIONS, &k);
    p->nd = nx;
    if (!p->x || !p->w || !p->y || !p->pre || !p->post || !p->stride || !p->dil)
        return ND_DNN_BAD_PARAM;
    if (nx != nw || nx != ny || nx != k + 2)
        return ND_DNN_BAD_PARAM_SHAPE_MISMATCH;
    return ND_DNN_SUCCESS;
}

/* Batch, channels (groups of them) and every output extent agree. */
static nd_st conv_check(const nd_convp *p)
{
    int64_t n = p->x[0], c = p->x[1], k = p->w[0], cg = p->w[1];
    if (p->y[0] != n || p->y[1] != k || cg < 1 || c % cg || k % (c / cg))
        return ND_DNN_BAD_PARAM_SHAPE_MISMATCH;
    for (int64_t i = 2; i < p->nd; i++) {
        int64_t s = i - 2;
        if (p->stride[s] < 1 || p->dil[s] < 1 || p->pre[s] < 0 || p->post[s] < 0)
            return ND_DNN_BAD_PARAM_OUT_OF_BOUND;
        int64_t span = p->x[i] + p->pre[s] + p->post[s] - p->dil[s] * (p->w[i] - 1) - 1;
        if (span < 0 || span / p->stride[s] + 1 != p->y[i])
            return ND_DNN_BAD_PARAM_SHAPE_MISMATCH;
    }
    return ND_DNN_SUCCESS;
}

static int is_conv_op(int type)
{
    return type == ND_BD_OP_CONV_FORWARD || type == ND_BD_OP_CONV_BWD_FILTER || type == ND_BD_OP_CONV_BWD_DATA;
}

static nd_st fin_conv_op(nd_bd *d)
{
    nd_convp p;
    nd_st st = conv_problem(d, &p);
    return st ? st : conv_check(&p);
}

int64_t nd_dnn_conv_workspace(int op, int64_t nd, const int64_t *x, const int64_t *w)
{
    int64_t taps = 1, groups = x[1] / w[1], wsz = 1;
    for (int64_t j = 2; j < nd; j++)
        taps *= w[j];
    for (int64_t j = 0; j < nd; j++)
        wsz *= w[j];
    if (op == ND_BD_OP_CONV_FORWARD)
        return nd_dnn_align(4 * w[1] * taps);
    if (op == ND_BD_OP_CONV_BWD_DATA)
        return nd_dnn_align(4 * (w[0] / groups) * taps);
    return nd_dnn_align(4 * wsz);
}

/* The workspace of engine `index` for a graph (the rule above). */
static int64_t engine_workspace(nd_bd *graph, int64_t index)
{
    nd_battr *ops = attr_find(graph, ND_A_OPERATIONGRAPH_OPS);
    if (index != 0 || !ops)
        return 0;
    for (int64_t i = 0; i < ops->n; i++) {
        nd_bd *op = ((nd_bd **)(void *)ops->v)[i];
        nd_convp p;
        if (is_conv_op(op->type) && !conv_problem(op, &p))
            return nd_dnn_conv_workspace(p.op, p.nd, p.x, p.w);
    }
    return 0;
}

/* ---- finalize: graph, heuristics, engine, configuration, plan, pack ---- */

static nd_st fin_graph(nd_bd *d)
{
    nd_battr *ops = attr_find(d, ND_A_OPERATIONGRAPH_OPS);
    nd_battr *h = attr_find(d, ND_A_OPERATIONGRAPH_HANDLE);
    void *hv = NULL;
    if (!ops || ops->type != ND_AT_BACKEND_DESCRIPTOR || ops->n < 1)
        return ND_DNN_BAD_PARAM;
    if (h && h->type == ND_AT_HANDLE && h->n == 1) /* the handle: deprecated in 9, optional */
        memcpy(&hv, h->v, sizeof hv);
    if (h && !nd_dnn_handle_get(hv))
        return ND_DNN_BAD_PARAM;
    d->engines = 1;
    for (int64_t i = 0; i < ops->n; i++) {
        nd_bd *op = ((nd_bd **)(void *)ops->v)[i];
        if (!op->finalized)
            return ND_DNN_BAD_PARAM_NOT_FINALIZED;
        if (is_conv_op(op->type))
            d->engines = 2;
    }
    return ND_DNN_SUCCESS;
}

static nd_st fin_heur(nd_bd *d)
{
    nd_bd *g = attr_desc(d, ND_A_ENGINEHEUR_OPERATION_GRAPH, ND_BD_OPERATIONGRAPH);
    int mode;
    if (!g || !attr_int(d, ND_A_ENGINEHEUR_MODE, ND_AT_HEUR_MODE, &mode))
        return ND_DNN_BAD_PARAM;
    if (!g->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    return mode >= ND_HEUR_INSTANT && mode <= ND_HEUR_A ? ND_DNN_SUCCESS : ND_DNN_BAD_PARAM;
}

static nd_st fin_engine(nd_bd *d)
{
    nd_bd *g = attr_desc(d, ND_A_ENGINE_OPERATION_GRAPH, ND_BD_OPERATIONGRAPH);
    int64_t n = 0;
    const int64_t *idx = attr_i64(d, ND_A_ENGINE_GLOBAL_INDEX, &n);
    if (!g || !idx || n != 1)
        return ND_DNN_BAD_PARAM;
    if (!g->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    return idx[0] >= 0 && idx[0] < g->engines ? ND_DNN_SUCCESS : ND_DNN_NOT_SUPPORTED;
}

static nd_st fin_cfg(nd_bd *d)
{
    nd_bd *e = attr_desc(d, ND_A_ENGINECFG_ENGINE, ND_BD_ENGINE);
    int64_t n = 0;
    if (!e)
        return ND_DNN_BAD_PARAM;
    if (!e->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    const int64_t *idx = attr_i64(e, ND_A_ENGINE_GLOBAL_INDEX, &n);
    d->ws = engine_workspace(attr_desc(e, ND_A_ENGINE_OPERATION_GRAPH, ND_BD_OPERATIONGRAPH), idx[0]);
    return ND_DNN_SUCCESS;
}

static nd_st fin_plan(nd_bd *d)
{
    nd_bd *c = attr_desc(d, ND_A_PLAN_ENGINE_CONFIG, ND_BD_ENGINECFG);
    nd_battr *h = attr_find(d, ND_A_PLAN_HANDLE);
    void *hv = NULL;
    if (h && h->type == ND_AT_HANDLE && h->n == 1)
        memcpy(&hv, h->v, sizeof hv);
    if (!c || (h && !nd_dnn_handle_get(hv))) /* the handle: deprecated in 9, optional */
        return ND_DNN_BAD_PARAM;
    if (!c->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    d->ws = c->ws;
    return ND_DNN_SUCCESS;
}

static nd_st fin_pack(nd_bd *d)
{
    nd_battr *ids = attr_find(d, ND_A_VARIANT_PACK_UNIQUE_IDS), *ptrs = attr_find(d, ND_A_VARIANT_PACK_DATA_POINTERS);
    if (!ids || !ptrs || ids->type != ND_AT_INT64 || ptrs->type != ND_AT_VOID_PTR)
        return ND_DNN_BAD_PARAM;
    return ids->n == ptrs->n ? ND_DNN_SUCCESS : ND_DNN_BAD_PARAM_SHAPE_MISMATCH;
}

static nd_st finalize(nd_bd *d)
{
    switch (d->type) {
    case ND_BD_TENSOR:
        return fin_tensor(d);
    case ND_BD_CONVOLUTION:
        return fin_conv(d);
    case ND_BD_OP_CONV_FORWARD:
    case ND_BD_OP_CONV_BWD_FILTER:
    case ND_BD_OP_CONV_BWD_DATA:
        return fin_conv_op(d);
    case ND_BD_OPERATIONGRAPH:
        return fin_graph(d);
    case ND_BD_ENGINEHEUR:
        return fin_heur(d);
    case ND_BD_ENGINE:
        return fin_engine(d);
    case ND_BD_ENGINECFG:
        return fin_cfg(d);
    case ND_BD_EXECUTION_PLAN:
        return fin_plan(d);
    case ND_BD_VARIANT_PACK:
        return fin_pack(d);
    default:
        return ND_DNN_SUCCESS; /* pointwise, matmul, ...: held as set */
    }
}

/* ---- the API ---- */

nd_st cudnnBackendCreateDescriptor(int type, void **desc)
{
    if (!desc)
        return ND_DNN_BAD_PARAM_NULL_POINTER;
    if (type < 0 || type > ND_BD_LAST)
        return ND_DNN_BAD_PARAM_DESCRIPTOR_TYPE;
    nd_bd *d = bd_new(type);
    if (!d)
        return ND_DNN_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    *desc = d;
    return ND_DNN_SUCCESS;
}

nd_st cudnnBackendDestroyDescriptor(void *desc)
{
    nd_bd *d = bd_get(desc);
    if (!d)
        return ND_DNN_BAD_PARAM;
    bd_unref(d);
    return ND_DNN_SUCCESS;
}

nd_st cudnnBackendInitialize(void *desc)
{
    nd_bd *d = bd_get(desc);
    if (!d)
        return ND_DNN_BAD_PARAM;
    bd_clear(d);
    return ND_DNN_SUCCESS;
}

nd_st cudnnBackendFinalize(void *desc)
{
    nd_bd *d = bd_get(desc);
    if (!d)
        return ND_DNN_BAD_PARAM;
    if (d->finalized)
        return ND_DNN_BAD_PARAM;
    nd_st st = finalize(d);
    if (trace())
        fprintf(stderr, "sublet nullgpu: cudnn finalize type %d: %d\n", d->type, st);
    if (st == ND_DNN_SUCCESS)
        d->finalized = 1;
    return st;
}

nd_st cudnnBackendSetAttribute(void *desc, int name, int type, int64_t n, const void *vals)
{
    nd_bd *d = bd_get(desc);
    if (!d)
        return ND_DNN_BAD_PARAM;
    if (d->finalized)
        return ND_DNN_BAD_PARAM; /* a finalized descriptor is immutable */
    nd_st st = attr_put(d, name, type, n, vals);
    if (trace())
        fprintf(stderr, "sublet nullgpu: cudnn set type %d attr %d (as %d, %lld): %d\n", d->type, name, type,
                (long long)n, st);
    return st;
}

/* Copies src into the caller's descriptor dst (same type): what a get of a
 * descriptor-valued attribute does with the descriptors it is handed. */
static nd_st bd_copy(nd_bd *dst, nd_bd *src)
{
    if (!dst || dst->type != src->type)
        return ND_DNN_BAD_PARAM;
    if (dst == src)
        return ND_DNN_SUCCESS;
    bd_clear(dst);
    for (int i = 0; i < src->nattr; i++) {
        nd_st st = attr_put(dst, src->attr[i].name, src->attr[i].type, src->attr[i].n, src->attr[i].v);
        if (st)
            return st;
    }
    dst->finalized = src->finalized;
    dst->engines = src->engines;
    dst->ws = src->ws;
    return ND_DNN_SUCCESS;
}

/* Heuristics' results: configurations of the graph's engines, made in the
 * caller's descriptors. */
static nd_st heur_results(nd_bd *d, int64_t req, int64_t *n, void *vals)
{
    if (!d->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    nd_bd *g = attr_desc(d, ND_A_ENGINEHEUR_OPERATION_GRAPH, ND_BD_OPERATIONGRAPH);
    int mode = 0;
    attr_int(d, ND_A_ENGINEHEUR_MODE, ND_AT_HEUR_MODE, &mode);
    int64_t first = mode == ND_HEUR_FALLBACK ? g->engines - 1 : 0, count = g->engines - first;
    *n = count;
    if (!vals || req <= 0)
        return ND_DNN_SUCCESS;
    *n = req < count ? req : count;
    for (int64_t i = 0; i < *n; i++) {
        nd_bd *cfg = bd_get(((void **)vals)[i]), *e = bd_new(ND_BD_ENGINE);
        int64_t index = first + i;
        void *gp = g;
        nd_st st = !cfg || cfg->type != ND_BD_ENGINECFG ? ND_DNN_BAD_PARAM : !e ? ND_DNN_INTERNAL_ERROR : 0;
        if (!st)
            st = attr_put(e, ND_A_ENGINE_OPERATION_GRAPH, ND_AT_BACKEND_DESCRIPTOR, 1, &gp);
        if (!st)
            st = attr_put(e, ND_A_ENGINE_GLOBAL_INDEX, ND_AT_INT64, 1, &index);
        if (!st && !(st = fin_engine(e)))
            e->finalized = 1;
        void *ep = e;
        if (!st) {
            bd_clear(cfg);
            st = attr_put(cfg, ND_A_ENGINECFG_ENGINE, ND_AT_BACKEND_DESCRIPTOR, 1, &ep);
        }
        if (!st && !(st = fin_cfg(cfg)))
            cfg->finalized = 1;
        bd_unref(e);
        if (st)
            return st;
    }
    return ND_DNN_SUCCESS;
}

/* Answers one INT64 (or list of nothing) computed rather than set. */
static nd_st answer(int type, int want, const void *val, size_t size, int64_t have, int64_t req, int64_t *n,
                    void *vals)
{
    if (type != want)
        return ND_DNN_BAD_PARAM_ATTRIBUTE_TYPE;
    *n = have;
    if (vals && req > 0 && have > 0)
        memcpy(vals, val, size * (size_t)(req < have ? req : have));
    if (req > 0 && req < have)
        *n = req;
    return ND_DNN_SUCCESS;
}

/* The attributes the library derives (1: answered, *st its status). */
static int computed(nd_bd *d, int name, int type, int64_t req, int64_t *n, void *vals, nd_st *st)
{
    static const char json[] = "{\"engineId\":0,\"knobs\":{},\"sublet\":\"null device\"}";
    int64_t ws = d->ws;
    int32_t zero32 = 0;
    switch (d->type * 10000 + name) {
    case ND_BD_ENGINEHEUR * 10000 + ND_A_ENGINEHEUR_RESULTS:
        *st = type != ND_AT_BACKEND_DESCRIPTOR ? ND_DNN_BAD_PARAM_ATTRIBUTE_TYPE : heur_results(d, req, n, vals);
        return 1;
    case ND_BD_OPERATIONGRAPH * 10000 + ND_A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
        *st = answer(type, ND_AT_INT64, &d->engines, 8, 1, req, n, vals);
        return 1;
    case ND_BD_ENGINECFG * 10000 + ND_A_ENGINECFG_WORKSPACE_SIZE:
    case ND_BD_EXECUTION_PLAN * 10000 + ND_A_PLAN_WORKSPACE_SIZE:
        *st = answer(type, ND_AT_INT64, &ws, 8, 1, req, n, vals);
        return 1;
    case ND_BD_ENGINECFG * 10000 + ND_A_ENGINECFG_SHARED_MEMORY_USED:
        *st = answer(type, ND_AT_INT32, &zero32, 4, 1, req, n, vals);
        return 1;
    case ND_BD_ENGINECFG * 10000 + ND_A_ENGINECFG_KNOB_CHOICES:
    case ND_BD_ENGINECFG * 10000 + ND_A_ENGINECFG_INTERMEDIATE_INFO:
    case ND_BD_ENGINE * 10000 + ND_A_ENGINE_KNOB_INFO:
    case ND_BD_ENGINE * 10000 + ND_A_ENGINE_NUMERICAL_NOTE:
    case ND_BD_ENGINE * 10000 + ND_A_ENGINE_BEHAVIOR_NOTE:
    case ND_BD_ENGINE * 10000 + ND_A_ENGINE_LAYOUT_INFO:
    case ND_BD_EXECUTION_PLAN * 10000 + ND_A_PLAN_COMPUTED_INTERMEDIATE_UIDS:
        *n = 0;
        *st = ND_DNN_SUCCESS;
        return 1;
    case ND_BD_EXECUTION_PLAN * 10000 + ND_A_PLAN_JSON_REPRESENTATION:
        *st = answer(type, ND_AT_CHAR, json, 1, (int64_t)sizeof json - 1, req, n, vals);
        return 1;
    default:
        return 0;
    }
}

nd_st cudnnBackendGetAttribute(void *desc, int name, int type, int64_t req, int64_t *n, void *vals)
{
    nd_bd *d = bd_get(desc);
    int64_t count = 0;
    nd_st st = ND_DNN_SUCCESS;
    if (!d)
        return ND_DNN_BAD_PARAM;
    if (!n)
        n = &count;
    nd_battr *a = attr_find(d, name);
    if (!a && computed(d, name, type, req, n, vals, &st)) {
        /* answered */
    } else if (!a) {
        st = ND_DNN_BAD_PARAM;
    } else if (a->type != type) {
        st = ND_DNN_BAD_PARAM_ATTRIBUTE_TYPE;
    } else {
        int64_t k = req < a->n ? req : a->n;
        *n = vals && req > 0 ? k : a->n;
        if (vals && k > 0 && type == ND_AT_BACKEND_DESCRIPTOR) {
            for (int64_t i = 0; i < k && !st; i++)
                st = bd_copy(bd_get(((void **)vals)[i]), ((nd_bd **)(void *)a->v)[i]);
        } else if (vals && k > 0) {
            memcpy(vals, a->v, (size_t)k * elem_size(type));
        }
    }
    if (trace())
        fprintf(stderr, "sublet nullgpu: cudnn get type %d attr %d (as %d, %lld): %d\n", d->type, name, type,
                (long long)req, st);
    return st;
}

/* Every non-virtual tensor of the graph has a device pointer in the pack. */
static nd_st pack_covers(nd_bd *graph, nd_bd *pack)
{
    nd_battr *ops = attr_find(graph, ND_A_OPERATIONGRAPH_OPS);
    nd_battr *ids = attr_find(pack, ND_A_VARIANT_PACK_UNIQUE_IDS), *ptrs = attr_find(pack, ND_A_VARIANT_PACK_DATA_POINTERS);
    nd_device *dev = nd_dev();
    for (int64_t i = 0; ops && i < ops->n; i++) {
        nd_bd *op = ((nd_bd **)(void *)ops->v)[i];
        for (int j = 0; j < op->nattr; j++) {
            nd_battr *a = &op->attr[j];
            nd_bd *t = a->type == ND_AT_BACKEND_DESCRIPTOR && a->n == 1 ? ((nd_bd **)(void *)a->v)[0] : NULL;
            nd_battr *virt = t && t->type == ND_BD_TENSOR ? attr_find(t, ND_A_TENSOR_IS_VIRTUAL) : NULL;
            nd_battr *byval = t && t->type == ND_BD_TENSOR ? attr_find(t, ND_A_TENSOR_IS_BY_VALUE) : NULL;
            int64_t k = 0;
            const int64_t *uid = t && t->type == ND_BD_TENSOR ? attr_i64(t, ND_A_TENSOR_UNIQUE_ID, &k) : NULL;
            if (!uid || (virt && virt->v[0]))
                continue;
            int host = byval && byval->v[0]; /* a scalar passed by value: a host pointer */
            int64_t m = 0;
            while (m < ids->n && ((const int64_t *)(const void *)ids->v)[m] != uid[0])
                m++;
            void *p = m < ids->n ? ((void **)(void *)ptrs->v)[m] : NULL;
            if (m == ids->n || !p || (!host && !nd_is_device(dev, p, 1))) {
                if (trace())
                    fprintf(stderr, "sublet nullgpu: cudnn execute: tensor %lld (operation type %d) has %s\n",
                            (long long)uid[0], op->type, m == ids->n ? "no pointer" : "no device pointer");
                return ND_DNN_BAD_PARAM;
            }
        }
    }
    return ND_DNN_SUCCESS;
}

nd_st cudnnBackendExecute(void *handle, void *plan, void *pack)
{
    nd_dnn_handle *h = nd_dnn_handle_get(handle);
    nd_bd *p = bd_get(plan), *v = bd_get(pack);
    if (!h || !p || !v || p->type != ND_BD_EXECUTION_PLAN || v->type != ND_BD_VARIANT_PACK)
        return ND_DNN_BAD_PARAM;
    if (!p->finalized || !v->finalized)
        return ND_DNN_BAD_PARAM_NOT_FINALIZED;
    nd_battr *ws = attr_find(v, ND_A_VARIANT_PACK_WORKSPACE);
    void *wp = NULL;
    if (ws && ws->type == ND_AT_VOID_PTR && ws->n == 1)
        memcpy(&wp, ws->v, sizeof wp);
    if (p->ws > 0 && !nd_is_device(nd_dev(), wp, (size_t)p->ws))
        return ND_DNN_BAD_PARAM; /* the plan needs its workspace, in device memory */
    nd_bd *cfg = attr_desc(p, ND_A_PLAN_ENGINE_CONFIG, ND_BD_ENGINECFG);
    nd_bd *e = attr_desc(cfg, ND_A_ENGINECFG_ENGINE, ND_BD_ENGINE);
    nd_st st = pack_covers(attr_desc(e, ND_A_ENGINE_OPERATION_GRAPH, ND_BD_OPERATIONGRAPH), v);
    if (st)
        return st;
    nd_dnn_work(h);
    return ND_DNN_SUCCESS;
}
