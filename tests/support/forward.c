/* sublet — the forwarding test backend (forward.h). */
#include "support/forward.h"

#define IN(b) h_fwd_inner(b)

static sublet_status f_segment_alloc(sublet_backend *b, uint64_t size, uint64_t hint,
                                     uint64_t *out)
{
    return IN(b)->ops->segment_alloc(IN(b), size, hint, out);
}
static sublet_status f_segment_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    return IN(b)->ops->segment_free(IN(b), addr, size);
}
static sublet_status f_event_create(sublet_backend *b, sublet_event **ev)
{
    return IN(b)->ops->event_create(IN(b), ev);
}
static sublet_status f_event_destroy(sublet_backend *b, sublet_event *ev)
{
    return IN(b)->ops->event_destroy(IN(b), ev);
}
static sublet_status f_event_record(sublet_backend *b, sublet_event *ev, sublet_stream s)
{
    return IN(b)->ops->event_record(IN(b), ev, s);
}
static sublet_status f_event_query(sublet_backend *b, sublet_event *ev, int *done)
{
    return IN(b)->ops->event_query(IN(b), ev, done);
}
static sublet_status f_event_synchronize(sublet_backend *b, sublet_event *ev)
{
    return IN(b)->ops->event_synchronize(IN(b), ev);
}
static uint64_t f_event_epoch(sublet_backend *b) { return IN(b)->ops->event_epoch(IN(b)); }
static uint64_t f_event_completions(sublet_backend *b, uint64_t since, sublet_stream *out,
                                    size_t cap, size_t *n)
{
    return IN(b)->ops->event_completions(IN(b), since, out, cap, n);
}
static sublet_status f_mem_info(sublet_backend *b, uint64_t *fr, uint64_t *tot)
{
    return IN(b)->ops->mem_info(IN(b), fr, tot);
}
static sublet_status f_va_reserve(sublet_backend *b, uint64_t size, uint64_t align,
                                  uint64_t *out)
{
    return IN(b)->ops->va_reserve(IN(b), size, align, out);
}
static sublet_status f_va_release(sublet_backend *b, uint64_t addr, uint64_t size)
{
    return IN(b)->ops->va_release(IN(b), addr, size);
}
static sublet_status f_va_map(sublet_backend *b, uint64_t addr, uint64_t size)
{
    return IN(b)->ops->va_map(IN(b), addr, size);
}
static sublet_status f_va_unmap(sublet_backend *b, uint64_t addr, uint64_t size)
{
    return IN(b)->ops->va_unmap(IN(b), addr, size);
}
static sublet_status f_va_map_alias(sublet_backend *b, uint64_t dst, uint64_t src, uint64_t size)
{
    return IN(b)->ops->va_map_alias(IN(b), dst, src, size);
}
static sublet_status f_process_mem(sublet_backend *b, uint64_t *used)
{
    return IN(b)->ops->process_mem(IN(b), used);
}
static void f_destroy(sublet_backend *b) { (void)b; }

void h_fwd_init(h_fwd *f, sublet_backend *in, const char *name)
{
    const sublet_backend_ops *io = in->ops;
#define FWD(op) (io->op ? f_##op : NULL)
    f->ops = (sublet_backend_ops){
        .segment_alloc = FWD(segment_alloc),
        .segment_free = FWD(segment_free),
        .event_create = FWD(event_create),
        .event_destroy = FWD(event_destroy),
        .event_record = FWD(event_record),
        .event_query = FWD(event_query),
        .event_synchronize = FWD(event_synchronize),
        .event_epoch = FWD(event_epoch),
        .event_completions = FWD(event_completions),
        .mem_info = FWD(mem_info),
        .va_reserve = FWD(va_reserve),
        .va_release = FWD(va_release),
        .va_map = FWD(va_map),
        .va_unmap = FWD(va_unmap),
        .va_map_alias = FWD(va_map_alias),
        .process_mem = FWD(process_mem),
        .destroy = f_destroy,
    };
#undef FWD
    f->in = in;
    f->base = (sublet_backend){.ops = &f->ops, .name = name, .device = in->device};
}
