/* sublet — Kineto (PyTorch profiler, profile_memory=True) chrome trace to a
 * trace.  The "[memory]" instant events of Device Type 1 (CUDA) of one device
 * are kept and sorted by (ts, "Ev Idx"), the order in which PyTorch's own
 * "Total Allocated" counter adds up (shared/traces/README.md).  Positive Bytes
 * is an alloc; negative Bytes a free, which completes at once (free_requested
 * then free_completed).  A free of an address that is not live is an
 * allocation that existed before the window: a pre_alloc row.  Kineto has no
 * segments and no streams (stream 0). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/trace_readers.h"

#define CUDA_DEVICE_TYPE 1

typedef struct kmem {
    double ts;
    int64_t ev_idx; /* INT64_MIN when absent */
    size_t pos;     /* index in traceEvents */
    int64_t device;
    uint64_t addr;
    int64_t bytes;
    bool has_ts;
} kmem;

static int cmp_kmem(const void *a, const void *b)
{
    const kmem *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->ev_idx != y->ev_idx)
        return x->ev_idx < y->ev_idx ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static sublet_status kbad(char *err, size_t cap, size_t i, const char *key, const char *what,
                          const pyval *v)
{
    sl_msg(err, cap, "traceEvents[%zu].args.%s: %s%s%s%s", i, key,
              v ? "expected " : "missing (expected ", what, v ? ", found " : ")",
              v ? pv_type_name(pv_typeof(v)) : "");
    return SUBLET_ERR_PARSE;
}

/* One "[memory]" event: *keep when it is a CUDA event. */
static sublet_status read_mem(const pyval *e, size_t i, kmem *m, bool *keep, char *err, size_t cap)
{
    *keep = false;
    const pyval *args = pv_dict_get(e, "args");
    if (pv_typeof(args) != PV_DICT) {
        sl_msg(err, cap, "traceEvents[%zu].args: %s, found %s", i,
                  args ? "expected a dict" : "missing (expected a dict)",
                  pv_type_name(pv_typeof(args)));
        return SUBLET_ERR_PARSE;
    }
    const pyval *v = pv_dict_get(args, "Device Type");
    int64_t type;
    if (!pv_as_int(v, &type))
        return kbad(err, cap, i, "Device Type", "an int", v);
    if (type != CUDA_DEVICE_TYPE)
        return SUBLET_OK;
    memset(m, 0, sizeof *m);
    m->pos = i;
    v = pv_dict_get(args, "Device Id");
    if (!pv_as_int(v, &m->device))
        return kbad(err, cap, i, "Device Id", "an int", v);
    v = pv_dict_get(args, "Addr");
    if (!pv_as_uint64(v, &m->addr))
        return kbad(err, cap, i, "Addr", "a non-negative int", v);
    v = pv_dict_get(args, "Bytes");
    if (!pv_as_int(v, &m->bytes) || m->bytes == INT64_MIN)
        return kbad(err, cap, i, "Bytes", "an int", v);
    v = pv_dict_get(args, "Ev Idx");
    m->ev_idx = INT64_MIN;
    if (v && !pv_as_int(v, &m->ev_idx))
        return kbad(err, cap, i, "Ev Idx", "an int", v);
    v = pv_dict_get(e, "ts");
    m->has_ts = v != NULL;
    if (!v) {
        m->ts = 0;
    } else if (!pv_as_double(v, &m->ts) || pv_typeof(v) == PV_BOOL || isnan(m->ts)) {
        sl_msg(err, cap, "traceEvents[%zu].ts: expected a number, found %s", i,
                  pv_type_name(pv_typeof(v)));
        return SUBLET_ERR_PARSE;
    }
    *keep = true;
    return SUBLET_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The most frequent Device Id (ties: the lowest). */
static int64_t most_frequent(const kmem *m, size_t n)
{
    if (!n)
        return 0;
    int64_t *ids = malloc(n * sizeof *ids);
    if (!ids)
        return m[0].device;
    for (size_t i = 0; i < n; i++)
        ids[i] = m[i].device;
    qsort(ids, n, sizeof *ids, cmp_i64);
    int64_t best = ids[0];
    size_t best_n = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && ids[j] == ids[i])
            j++;
        if (j - i > best_n) {
            best_n = j - i;
            best = ids[i];
        }
        i = j;
    }
    free(ids);
    return best;
}

static uint64_t total_memory(const pyval *root, int64_t dev)
{
    const pyval *props = pv_dict_get(root, "deviceProperties");
    for (size_t i = 0; i < pv_list_len(props); i++) {
        const pyval *p = pv_list_at(props, i);
        int64_t id;
        uint64_t mem;
        if (pv_as_int(pv_dict_get(p, "id"), &id) && id == dev &&
            pv_as_uint64(pv_dict_get(p, "totalGlobalMem"), &mem))
            return mem;
    }
    return 0;
}

sublet_status sublet_trace_from_kineto(const pyval *root, const sublet_trace_load_options *opt,
                                       sublet_trace **out, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    const pyval *evs = pv_typeof(root) == PV_DICT ? pv_dict_get(root, "traceEvents") : root;
    if (pv_typeof(evs) != PV_LIST) {
        sl_msg(err, cap, "traceEvents: expected a list, found %s", pv_type_name(pv_typeof(evs)));
        return SUBLET_ERR_PARSE;
    }
    size_t n = pv_list_len(evs), nm = 0, mcap = 0;
    kmem *m = NULL;
    sublet_status st = SUBLET_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const pyval *e = pv_list_at(evs, i);
        if (pv_typeof(e) != PV_DICT) {
            sl_msg(err, cap, "traceEvents[%zu]: expected a dict, found %s", i,
                      pv_type_name(pv_typeof(e)));
            st = SUBLET_ERR_PARSE;
            break;
        }
        if (!pv_str_eq(pv_dict_get(e, "name"), "[memory]"))
            continue;
        kmem k;
        bool keep;
        if ((st = read_mem(e, i, &k, &keep, err, cap)) || !keep)
            continue;
        if (nm == mcap) {
            size_t nc = mcap ? mcap * 2 : 64;
            kmem *g = nc <= SIZE_MAX / sizeof *g ? realloc(m, nc * sizeof *g) : NULL;
            if (!g) {
                st = SUBLET_ERR_NO_MEMORY;
                sl_msg(err, cap, "out of memory");
                break;
            }
            m = g;
            mcap = nc;
        }
        m[nm++] = k;
    }
    if (st) {
        free(m);
        return st;
    }
    int64_t dev = opt && opt->pick_device ? opt->device : most_frequent(m, nm);
    size_t keep = 0;
    for (size_t i = 0; i < nm; i++)
        if (m[i].device == dev)
            m[keep++] = m[i];
    if (keep)
        qsort(m, keep, sizeof *m, cmp_kmem);

    trace_vec events = {0}, pre_seg = {0}, pre_alloc = {0};
    u64set live = {0};
    for (size_t i = 0; i < keep && !st; i++) {
        sublet_trace_event ev = {.addr = m[i].addr, .line = m[i].pos + 1};
        if (m[i].has_ts && m[i].ts >= 0 && m[i].ts < 1.8e19) {
            ev.time_us = (uint64_t)m[i].ts;
            ev.flags = SUBLET_TRACE_HAS_TIME;
        }
        if (m[i].bytes >= 0) {
            ev.kind = SUBLET_ACT_ALLOC;
            ev.size = (uint64_t)m[i].bytes;
            if (u64set_add(&live, ev.addr) || trace_vec_push(&events, &ev))
                st = SUBLET_ERR_NO_MEMORY;
            continue;
        }
        ev.size = (uint64_t)(-m[i].bytes);
        if (!u64set_remove(&live, ev.addr)) {
            sublet_trace_event p = {.addr = ev.addr, .size = ev.size};
            if (trace_vec_push(&pre_alloc, &p))
                st = SUBLET_ERR_NO_MEMORY;
        }
        ev.kind = SUBLET_ACT_FREE_REQUESTED;
        if (!st && trace_vec_push(&events, &ev))
            st = SUBLET_ERR_NO_MEMORY;
        ev.kind = SUBLET_ACT_FREE_COMPLETED;
        if (!st && trace_vec_push(&events, &ev))
            st = SUBLET_ERR_NO_MEMORY;
    }
    free(m);
    u64set_free(&live);
    if (!st)
        st = trace_assemble(&pre_seg, &pre_alloc, &events, out);
    trace_vec_free(&events);
    trace_vec_free(&pre_seg);
    trace_vec_free(&pre_alloc);
    if (!st) {
        trace_extras *x = trace_extras_new();
        if (x) {
            trace_extras_set_format(x, SUBLET_FORMAT_KINETO_JSON);
            trace_extras_set_device(x, dev);
            trace_extras_set_memory(x, total_memory(root, dev));
        }
        st = x ? trace_extras_attach(*out, x) : SUBLET_ERR_NO_MEMORY;
        if (st) {
            sublet_trace_free(*out);
            *out = NULL;
        }
    }
    if (st)
        sl_msg(err, cap, "out of memory");
    return st;
}
