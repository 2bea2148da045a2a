/* sublet — fault-injection wrapper around another backend.
 *
 * Every op is forwarded to the inner backend (which the wrapper does not
 * own).  Four ops can be made to fail: segment_alloc, va_map and va_map_alias
 * (with SUBLET_ERR_DEVICE_OOM, as cudaMalloc / cuMemCreate / cuMemMap would)
 * and event_create (with SUBLET_ERR_BACKEND).  Each counts its calls, 1-based, and an injected
 * failure does not reach the inner backend, so nothing needs undoing.
 *
 * Rules: fail_nth(op, n) fails exactly the nth call; fail_every(op, n) fails
 * calls n, 2n, 3n, ...; 0 clears the rule.  Both may be set at once (a call
 * fails if either says so).  Setting either rule restarts that op's counts
 * (calls seen and failures injected) at 0.
 *
 * The ops table lives in the instance: an op the inner backend lacks (NULL,
 * e.g. the VMM ops of a backend without virtual memory) is NULL in the
 * wrapper too, so that callers detecting capabilities see the same thing. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "sublet/backend.h"

typedef struct fault_rule {
    uint64_t nth;      /* fail call number nth; 0 = off */
    uint64_t every;    /* fail every call number divisible by this; 0 = off */
    uint64_t calls;    /* calls seen since the rule was last set */
    uint64_t injected; /* failures injected since the rule was last set */
} fault_rule;

typedef struct fault_backend {
    sublet_backend base; /* first: the engine casts */
    sublet_backend_ops ops;
    sublet_backend *inner;
    pthread_mutex_t lock;
    fault_rule rules[SUBLET_FAULT_OP_COUNT];
} fault_backend;

static void fault_destroy(sublet_backend *b);

static fault_backend *as_fault(sublet_backend *b)
{
    /* Every wrapper's table holds fault_destroy; no other backend's does. */
    return (b && b->ops && b->ops->destroy == fault_destroy) ? (fault_backend *)b : NULL;
}

static sublet_backend *inner_of(sublet_backend *b)
{
    return ((fault_backend *)b)->inner;
}

/* Count a call of `op`; 1 if this call is to fail. */
static int fault_hit(fault_backend *f, sublet_fault_op op)
{
    pthread_mutex_lock(&f->lock);
    fault_rule *r = &f->rules[op];
    const uint64_t k = ++r->calls;
    const int fail = (r->nth != 0 && k == r->nth) || (r->every != 0 && k % r->every == 0);
    if (fail)
        r->injected++;
    pthread_mutex_unlock(&f->lock);
    return fail;
}

/* ---- forwarding ops ------------------------------------------------------------------ */

static sublet_status fault_segment_alloc(sublet_backend *b, uint64_t size, uint64_t hint,
                                         uint64_t *addr_out)
{
    if (fault_hit((fault_backend *)b, SUBLET_FAULT_SEGMENT_ALLOC))
        return SUBLET_ERR_DEVICE_OOM;
    sublet_backend *in = inner_of(b);
    return in->ops->segment_alloc(in, size, hint, addr_out);
}

static sublet_status fault_segment_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sublet_backend *in = inner_of(b);
    return in->ops->segment_free(in, addr, size);
}

static sublet_status fault_event_create(sublet_backend *b, sublet_event **ev_out)
{
    if (fault_hit((fault_backend *)b, SUBLET_FAULT_EVENT_CREATE))
        return SUBLET_ERR_BACKEND;
    sublet_backend *in = inner_of(b);
    return in->ops->event_create(in, ev_out);
}

static sublet_status fault_event_destroy(sublet_backend *b, sublet_event *ev)
{
    sublet_backend *in = inner_of(b);
    return in->ops->event_destroy(in, ev);
}

static sublet_status fault_event_record(sublet_backend *b, sublet_event *ev, sublet_stream stream)
{
    sublet_backend *in = inner_of(b);
    return in->ops->event_record(in, ev, stream);
}

static sublet_status fault_event_query(sublet_backend *b, sublet_event *ev, int *done_out)
{
    sublet_backend *in = inner_of(b);
    return in->ops->event_query(in, ev, done_out);
}

static uint64_t fault_event_epoch(sublet_backend *b)
{
    sublet_backend *in = inner_of(b);
    return in->ops->event_epoch(in);
}

static uint64_t fault_event_completions(sublet_backend *b, uint64_t since, sublet_stream *out,
                                        size_t cap, size_t *n)
{
    sublet_backend *in = inner_of(b);
    return in->ops->event_completions(in, since, out, cap, n);
}

static sublet_status fault_event_synchronize(sublet_backend *b, sublet_event *ev)
{
    sublet_backend *in = inner_of(b);
    return in->ops->event_synchronize(in, ev);
}

static sublet_status fault_mem_info(sublet_backend *b, uint64_t *free_out, uint64_t *total_out)
{
    sublet_backend *in = inner_of(b);
    return in->ops->mem_info(in, free_out, total_out);
}

static sublet_status fault_process_mem(sublet_backend *b, uint64_t *used_out)
{
    sublet_backend *in = inner_of(b);
    return in->ops->process_mem(in, used_out);
}

static sublet_status fault_va_reserve(sublet_backend *b, uint64_t size, uint64_t align,
                                      uint64_t *addr_out)
{
    sublet_backend *in = inner_of(b);
    return in->ops->va_reserve(in, size, align, addr_out);
}

static sublet_status fault_va_release(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sublet_backend *in = inner_of(b);
    return in->ops->va_release(in, addr, size);
}

static sublet_status fault_va_map(sublet_backend *b, uint64_t addr, uint64_t size)
{
    if (fault_hit((fault_backend *)b, SUBLET_FAULT_VA_MAP))
        return SUBLET_ERR_DEVICE_OOM;
    sublet_backend *in = inner_of(b);
    return in->ops->va_map(in, addr, size);
}

static sublet_status fault_va_unmap(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sublet_backend *in = inner_of(b);
    return in->ops->va_unmap(in, addr, size);
}

static sublet_status fault_va_map_alias(sublet_backend *b, uint64_t dst, uint64_t src,
                                        uint64_t size)
{
    if (fault_hit((fault_backend *)b, SUBLET_FAULT_VA_MAP_ALIAS))
        return SUBLET_ERR_DEVICE_OOM;
    sublet_backend *in = inner_of(b);
    return in->ops->va_map_alias(in, dst, src, size);
}

static void fault_destroy(sublet_backend *b)
{
    fault_backend *f = as_fault(b);
    if (!f)
        return;
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* ---- public --------------------------------------------------------------------------- */

sublet_status sublet_fault_create(sublet_backend *inner, sublet_backend **out)
{
    if (!out || !inner || !inner->ops)
        return SUBLET_ERR_INVALID_ARGUMENT;
    const sublet_backend_ops *io = inner->ops;
    fault_backend *f = calloc(1, sizeof *f);
    if (!f)
        return SUBLET_ERR_NO_MEMORY;
    if (pthread_mutex_init(&f->lock, NULL) != 0) {
        free(f);
        return SUBLET_ERR_NO_MEMORY;
    }
#define FAULT_FORWARD(op) f->ops.op = io->op ? fault_##op : NULL
    FAULT_FORWARD(segment_alloc);
    FAULT_FORWARD(segment_free);
    FAULT_FORWARD(event_create);
    FAULT_FORWARD(event_destroy);
    FAULT_FORWARD(event_record);
    FAULT_FORWARD(event_query);
    FAULT_FORWARD(event_synchronize);
    FAULT_FORWARD(event_epoch);
    FAULT_FORWARD(event_completions);
    FAULT_FORWARD(mem_info);
    FAULT_FORWARD(va_reserve);
    FAULT_FORWARD(va_release);
    FAULT_FORWARD(va_map);
    FAULT_FORWARD(va_unmap);
    FAULT_FORWARD(va_map_alias);
    FAULT_FORWARD(process_mem);
#undef FAULT_FORWARD
    f->ops.destroy = fault_destroy;
    f->inner = inner;
    f->base.ops = &f->ops;
    f->base.name = "fault";
    f->base.device = inner->device;
    *out = &f->base;
    return SUBLET_OK;
}

static fault_rule *rule_of(sublet_backend *fault, sublet_fault_op op, fault_backend **f_out)
{
    fault_backend *f = as_fault(fault);
    if (!f || (unsigned)op >= (unsigned)SUBLET_FAULT_OP_COUNT)
        return NULL;
    *f_out = f;
    return &f->rules[op];
}

void sublet_fault_fail_nth(sublet_backend *fault, sublet_fault_op op, uint64_t nth)
{
    fault_backend *f = NULL;
    fault_rule *r = rule_of(fault, op, &f);
    if (!r)
        return;
    pthread_mutex_lock(&f->lock);
    r->nth = nth;
    r->calls = 0;
    r->injected = 0;
    pthread_mutex_unlock(&f->lock);
}

void sublet_fault_fail_every(sublet_backend *fault, sublet_fault_op op, uint64_t every)
{
    fault_backend *f = NULL;
    fault_rule *r = rule_of(fault, op, &f);
    if (!r)
        return;
    pthread_mutex_lock(&f->lock);
    r->every = every;
    r->calls = 0;
    r->injected = 0;
    pthread_mutex_unlock(&f->lock);
}

uint64_t sublet_fault_calls(const sublet_backend *fault, sublet_fault_op op)
{
    fault_backend *f = NULL;
    fault_rule *r = rule_of((sublet_backend *)fault, op, &f);
    if (!r)
        return 0;
    pthread_mutex_lock(&f->lock);
    uint64_t v = r->calls;
    pthread_mutex_unlock(&f->lock);
    return v;
}

uint64_t sublet_fault_injected(const sublet_backend *fault, sublet_fault_op op)
{
    fault_backend *f = NULL;
    fault_rule *r = rule_of((sublet_backend *)fault, op, &f);
    if (!r)
        return 0;
    pthread_mutex_lock(&f->lock);
    uint64_t v = r->injected;
    pthread_mutex_unlock(&f->lock);
    return v;
}
