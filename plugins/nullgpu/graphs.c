/* sublet — the null device: stream capture and CUDA graphs (see nullgpu.h).
 *
 * A capture turns a stream's work into nodes of a graph instead of running
 * it: launches, copies, memsets, event records and waits each add a node.
 * Another stream that waits on an event recorded in the capture joins it
 * (a fork), and leaves it when the capture ends.  The capture modes decide
 * which threads may make potentially unsafe calls meanwhile (device.c,
 * nd_capture_forbids); such a call invalidates the capture, and ending it
 * then fails with cudaErrorStreamCaptureInvalidated, as on a device.  A
 * graph is a node count; instantiating and launching it run nothing.  User
 * objects are reference counted: a graph and each of its executions hold
 * theirs, and the last release calls the destructor. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <string.h>

#include "nullgpu.h"

#define R(e) ((cudaError_t)nd_rt_fail(e))

static uint64_t hv(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* ---- captures --------------------------------------------------------------------- */

static cudaError_t begin(cudaStream_t s, uint64_t graph, enum cudaStreamCaptureMode mode)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    cudaError_t e = cudaSuccess;
    if ((int)mode < 0 || (int)mode > 2)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    sl = nd_handle_get(d, hv(s), ND_STREAM);
    if (!sl) { /* the legacy stream cannot be captured; neither can a dead handle */
        e = hv(s) <= 2 ? cudaErrorStreamCaptureUnsupported : cudaErrorInvalidResourceHandle;
    } else if (sl->u.stream.capture != ND_CAPTURE_NONE) {
        e = cudaErrorIllegalState;
    } else {
        if (!graph)
            graph = nd_handle_new(d, ND_GRAPH);
        if (!graph) {
            e = cudaErrorMemoryAllocation;
        } else {
            sl->u.stream.capture = ND_CAPTURE_ACTIVE;
            sl->u.stream.capture_mode = (int)mode;
            sl->u.stream.capture_id = d->next_capture_id++;
            sl->u.stream.graph = graph;
            sl->u.stream.capture_thread = pthread_self();
            if (mode == cudaStreamCaptureModeGlobal)
                d->global_captures++;
            nd_thread_capture_count((int)mode, 1);
        }
    }
    nd_unlock(d);
    return R(e);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    return begin(s, 0, mode);
}

cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                          const cudaGraphEdgeData *data, size_t ndeps,
                                          enum cudaStreamCaptureMode mode)
{
    nd_device *d = nd_dev();
    int ok;
    (void)deps, (void)data, (void)ndeps;
    nd_lock(d);
    ok = nd_handle_get(d, hv(graph), ND_GRAPH) != NULL;
    nd_unlock(d);
    return ok ? begin(s, hv(graph), mode) : R(cudaErrorInvalidValue);
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph_out)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    cudaError_t e = cudaSuccess;
    if (!graph_out)
        return R(cudaErrorInvalidValue);
    *graph_out = NULL;
    nd_lock(d);
    sl = nd_handle_get(d, hv(s), ND_STREAM);
    if (!sl || sl->u.stream.capture == ND_CAPTURE_NONE || sl->u.stream.capture_id == 0) {
        e = cudaErrorIllegalState;
    } else if (sl->u.stream.capture_mode == cudaStreamCaptureModeThreadLocal &&
               !pthread_equal(sl->u.stream.capture_thread, pthread_self())) {
        e = cudaErrorStreamCaptureWrongThread;
    } else {
        nd_stream c = sl->u.stream;
        /* the capture ends on every stream that joined it */
        for (size_t i = 0; i < ND_MAX_HANDLES; i++) {
            nd_stream *o = &d->slots[i].u.stream;
            if (d->slots[i].kind == ND_STREAM && o->capture != ND_CAPTURE_NONE && o->capture_id == c.capture_id) {
                o->capture = ND_CAPTURE_NONE;
                o->capture_id = 0;
                o->graph = 0;
            }
        }
        if (c.capture_mode == cudaStreamCaptureModeGlobal)
            d->global_captures--;
        nd_thread_capture_count(c.capture_mode, -1);
        if (c.capture == ND_CAPTURE_INVALIDATED) {
            nd_handle_free(d, c.graph);
            e = cudaErrorStreamCaptureInvalidated;
        } else {
            *graph_out = (cudaGraph_t)(uintptr_t)c.graph;
        }
    }
    nd_unlock(d);
    return R(e);
}

void nd_capture_join(nd_device *d, uint64_t stream, uint64_t event)
{
    nd_slot *ev = nd_handle_get(d, event, ND_EVENT), *to = nd_handle_get(d, stream, ND_STREAM);
    nd_stream *from;
    if (!ev || !ev->u.event.in_capture || !to || to->u.stream.capture != ND_CAPTURE_NONE)
        return;
    from = nd_capturing(d, ev->u.event.capture_stream);
    if (!from)
        return;
    to->u.stream.capture = from->capture;
    to->u.stream.capture_mode = from->capture_mode;
    to->u.stream.capture_id = from->capture_id;
    to->u.stream.graph = from->graph;
    to->u.stream.capture_thread = from->capture_thread;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    cudaError_t e = cudaSuccess;
    if (!status)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    sl = nd_handle_get(d, hv(s), ND_STREAM);
    if (sl)
        *status = (enum cudaStreamCaptureStatus)sl->u.stream.capture;
    else if (hv(s) <= 2)
        *status = cudaStreamCaptureStatusNone;
    else
        e = cudaErrorInvalidResourceHandle;
    nd_unlock(d);
    return R(e);
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **data,
                                     size_t *ndeps)
{
    nd_device *d = nd_dev();
    nd_slot *sl;
    nd_stream none = {0};
    const nd_stream *st = &none;
    cudaError_t e = cudaSuccess;
    if (!status)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    sl = nd_handle_get(d, hv(s), ND_STREAM);
    if (sl)
        st = &sl->u.stream;
    else if (hv(s) > 2)
        e = cudaErrorInvalidResourceHandle;
    if (!e) {
        *status = (enum cudaStreamCaptureStatus)st->capture;
        if (id && st->capture != ND_CAPTURE_NONE)
            *id = st->capture_id;
        if (graph)
            *graph = st->capture != ND_CAPTURE_NONE ? (cudaGraph_t)(uintptr_t)st->graph : NULL;
        if (deps)
            *deps = NULL;
        if (data)
            *data = NULL;
        if (ndeps)
            *ndeps = 0;
    }
    nd_unlock(d);
    return R(e);
}

cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t *deps,
                                                const cudaGraphEdgeData *data, size_t ndeps,
                                                unsigned int flags)
{
    nd_device *d = nd_dev();
    cudaError_t e = cudaSuccess;
    (void)deps, (void)data, (void)ndeps, (void)flags;
    nd_lock(d);
    if (!nd_capturing(d, hv(s)))
        e = cudaErrorIllegalState;
    nd_unlock(d);
    return R(e);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    int old;
    if (!mode || (int)*mode < 0 || (int)*mode > 2)
        return R(cudaErrorInvalidValue);
    old = nd_thread_capture_mode();
    nd_thread_capture_mode_set((int)*mode);
    *mode = (enum cudaStreamCaptureMode)old;
    return cudaSuccess;
}

/* ---- graphs --------------------------------------------------------------------------- */

cudaError_t cudaGraphCreate(cudaGraph_t *graph, unsigned int flags)
{
    nd_device *d = nd_dev();
    uint64_t h;
    if (!graph || flags)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    h = nd_handle_new(d, ND_GRAPH);
    nd_unlock(d);
    if (!h)
        return R(cudaErrorMemoryAllocation);
    *graph = (cudaGraph_t)(uintptr_t)h;
    return cudaSuccess;
}

/* Drop `n` references to user object h; its destructor, when that was the
 * last, goes to fn and arg for the caller to run outside the lock. */
static void uobj_release(nd_device *d, uint64_t h, unsigned n, cudaHostFn_t *fn, void **arg)
{
    nd_slot *u = nd_handle_get(d, h, ND_UOBJ);
    if (!u)
        return;
    if ((unsigned)u->u.uobj.refs > n) {
        u->u.uobj.refs -= (int)n;
        return;
    }
    *fn = u->u.uobj.destroy;
    *arg = u->u.uobj.ptr;
    nd_handle_free(d, h);
}

/* Run the destructors collected while the lock was held. */
static void run_destructors(cudaHostFn_t *fn, void **arg, int n)
{
    for (int i = 0; i < n; i++)
        if (fn[i])
            fn[i](arg[i]);
}

/* Destroy a graph or an execution (kind) and drop the references to user
 * objects it holds (a graph its counts, an execution one each). */
static cudaError_t destroy_holder(uint64_t h, nd_kind kind)
{
    nd_device *d = nd_dev();
    nd_slot *s, copy;
    cudaHostFn_t fn[ND_GRAPH_UOBJS] = {0};
    void *arg[ND_GRAPH_UOBJS] = {0};
    int n = 0;
    nd_lock(d);
    s = nd_handle_get(d, h, kind);
    if (s) {
        copy = *s;
        nd_handle_free(d, h);
        n = kind == ND_GRAPH ? copy.u.graph.nuobj : copy.u.exec.nuobj;
        for (int i = 0; i < n; i++)
            uobj_release(d, kind == ND_GRAPH ? copy.u.graph.uobj[i] : copy.u.exec.uobj[i],
                         kind == ND_GRAPH ? copy.u.graph.uobj_refs[i] : 1, &fn[i], &arg[i]);
    }
    nd_unlock(d);
    if (!s)
        return R(cudaErrorInvalidValue);
    run_destructors(fn, arg, n);
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    return destroy_holder(hv(graph), ND_GRAPH);
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count)
{
    nd_device *d = nd_dev();
    nd_slot *g;
    size_t n = 0;
    if (!count)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    g = nd_handle_get(d, hv(graph), ND_GRAPH);
    if (g)
        n = g->u.graph.nodes;
    nd_unlock(d);
    if (!g)
        return R(cudaErrorInvalidValue);
    if (nodes) {
        size_t k = *count < n ? *count : n;
        for (size_t i = 0; i < k; i++) /* a node is its graph's handle and its index */
            nodes[i] = (cudaGraphNode_t)(uintptr_t)(((uint64_t)ND_NODE << 40) |
                                                    ((hv(graph) & 0xffffff0) << 12) | ((i + 1) << 4));
        for (size_t i = k; i < *count; i++)
            nodes[i] = NULL;
    }
    *count = n;
    return cudaSuccess;
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *deps, cudaGraphEdgeData *data,
                                         size_t *ndeps)
{
    (void)deps, (void)data;
    if (!ndeps || (hv(node) >> 40) != ND_NODE)
        return R(cudaErrorInvalidValue);
    *ndeps = 0; /* the captured work is not kept as a graph of dependencies */
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    nd_device *d = nd_dev();
    nd_slot *g, *x;
    uint64_t h = 0;
    (void)flags;
    if (!exec)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    g = nd_handle_get(d, hv(graph), ND_GRAPH);
    if (g && (h = nd_handle_new(d, ND_EXEC)) != 0) {
        x = nd_handle_get(d, h, ND_EXEC); /* slots never move: g stays valid */
        for (int i = 0; i < g->u.graph.nuobj; i++) {
            nd_slot *u = nd_handle_get(d, g->u.graph.uobj[i], ND_UOBJ);
            if (u) {
                u->u.uobj.refs++;
                x->u.exec.uobj[x->u.exec.nuobj++] = g->u.graph.uobj[i];
            }
        }
    }
    nd_unlock(d);
    if (!g)
        return R(cudaErrorInvalidValue);
    if (!h)
        return R(cudaErrorMemoryAllocation);
    *exec = (cudaGraphExec_t)(uintptr_t)h;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    return cudaGraphInstantiateWithFlags(exec, graph, flags);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    return destroy_holder(hv(exec), ND_EXEC);
}

static cudaError_t exec_on(cudaGraphExec_t exec, cudaStream_t s)
{
    nd_device *d = nd_dev();
    cudaError_t e = cudaSuccess;
    nd_lock(d);
    if (!nd_handle_get(d, hv(exec), ND_EXEC))
        e = cudaErrorInvalidValue;
    else if (hv(s) > 2 && !nd_handle_get(d, hv(s), ND_STREAM))
        e = cudaErrorInvalidResourceHandle;
    else
        nd_stream_work(d, hv(s));
    nd_unlock(d);
    return R(e);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    return exec_on(exec, s);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s)
{
    return exec_on(exec, s);
}

/* ---- user objects ------------------------------------------------------------------------ */

cudaError_t cudaUserObjectCreate(cudaUserObject_t *out, void *ptr, cudaHostFn_t destroy, unsigned int refs,
                                 unsigned int flags)
{
    nd_device *d = nd_dev();
    uint64_t h;
    if (!out || !destroy || refs == 0 || flags != cudaUserObjectNoDestructorSync)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    h = nd_handle_new(d, ND_UOBJ);
    if (h) {
        nd_uobj *u = &nd_handle_get(d, h, ND_UOBJ)->u.uobj;
        u->ptr = ptr;
        u->destroy = destroy;
        u->refs = (int)refs;
    }
    nd_unlock(d);
    if (!h)
        return R(cudaErrorMemoryAllocation);
    *out = (cudaUserObject_t)(uintptr_t)h;
    return cudaSuccess;
}

cudaError_t cudaUserObjectRetain(cudaUserObject_t obj, unsigned int count)
{
    nd_device *d = nd_dev();
    nd_slot *u;
    nd_lock(d);
    u = nd_handle_get(d, hv(obj), ND_UOBJ);
    if (u)
        u->u.uobj.refs += (int)count;
    nd_unlock(d);
    return u && count ? cudaSuccess : R(cudaErrorInvalidValue);
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t obj, unsigned int count)
{
    nd_device *d = nd_dev();
    cudaHostFn_t fn = NULL;
    void *arg = NULL;
    int ok;
    nd_lock(d);
    ok = nd_handle_get(d, hv(obj), ND_UOBJ) != NULL && count > 0;
    if (ok)
        uobj_release(d, hv(obj), count, &fn, &arg);
    nd_unlock(d);
    if (!ok)
        return R(cudaErrorInvalidValue);
    run_destructors(&fn, &arg, 1);
    return cudaSuccess;
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t obj, unsigned int count,
                                      unsigned int flags)
{
    nd_device *d = nd_dev();
    nd_slot *g, *u;
    cudaError_t e = cudaSuccess;
    if (count == 0)
        return R(cudaErrorInvalidValue);
    nd_lock(d);
    g = nd_handle_get(d, hv(graph), ND_GRAPH);
    u = nd_handle_get(d, hv(obj), ND_UOBJ);
    if (!g || !u) {
        e = cudaErrorInvalidValue;
    } else {
        int i;
        for (i = 0; i < g->u.graph.nuobj && g->u.graph.uobj[i] != hv(obj); i++)
            ;
        if (i == ND_GRAPH_UOBJS) {
            nd_unsupported("CUDA runtime", "cudaGraphRetainUserObject (more than 16 user objects in one graph)");
            e = cudaErrorNotSupported;
        } else {
            if (i == g->u.graph.nuobj) {
                g->u.graph.uobj[i] = hv(obj);
                g->u.graph.uobj_refs[i] = 0;
                g->u.graph.nuobj++;
            }
            g->u.graph.uobj_refs[i] += count;
            if (!(flags & cudaGraphUserObjectMove)) /* moved: the caller's references become the graph's */
                u->u.uobj.refs += (int)count;
        }
    }
    nd_unlock(d);
    return R(e);
}

/* ---- graph memory nodes: none are made, so none hold memory ------------------------------ */

cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    (void)attr;
    if (device != 0)
        return R(cudaErrorInvalidDevice);
    if (!value)
        return R(cudaErrorInvalidValue);
    *(unsigned long long *)value = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    (void)attr;
    if (device != 0)
        return R(cudaErrorInvalidDevice);
    return value ? cudaSuccess : R(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceGraphMemTrim(int device)
{
    return device == 0 ? cudaSuccess : R(cudaErrorInvalidDevice);
}
