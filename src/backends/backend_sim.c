/* sublet — the `sim` backend: a simulated device with an address space and
 * no memory behind it.
 *
 * Address space.  Segments and VA reservations are both "placed" ranges,
 * which never overlap, kept in one tree by address (src/rtree.c), so
 * an exact lookup, an overlap test, an insert or a remove is O(log n).  A
 * placement honours a non-zero hint when [hint, hint+size) overlaps nothing
 * live; otherwise it is first fit from the base (SIM_BASE unless created
 * with sublet_sim_create_at): the lowest address with a
 * start aligned to 2 MiB (as cudaMalloc's large blocks are), or to a
 * reservation's coarser alignment, found in O(log n) through the largest
 * free gap kept in every subtree.  Only the sequence of calls decides the
 * addresses, so two sims driven identically hand out identical addresses.
 *
 * Memory accounting.  `used` counts segment bytes plus the physical bytes
 * behind mapped VA (a reservation alone costs nothing, as with
 * cuMemAddressReserve).  An allocation or map that would take `used` past
 * `capacity` fails with SUBLET_ERR_DEVICE_OOM.
 *
 * Mapped ranges live in a page table (src/vmem.c): each mapped virtual range
 * refers to physical bytes with a reference count, so an alias map
 * (va_map_alias: the physical bytes of one mapped range mapped again at a
 * second address, as cuMemRetainAllocationHandle + cuMemMap do) takes no
 * memory and the bytes are freed with their last mapping.  A map or alias
 * must lie inside a single reservation and overlap no mapped range (an
 * alias's source must be mapped in full); an unmap must cover bytes that are
 * all mapped (it may split a mapping or span several); a release must name a
 * reservation exactly and is refused with SUBLET_ERR_BUSY while any of it is
 * still mapped.
 *
 * Events.  Recording an event gives it the next number of one sequence
 * shared by all streams; each stream keeps the number of its latest record
 * and how far it has completed, and an event is done when its stream has
 * completed up to its number.  An event never recorded is done.  Streams
 * live in a hash table by id (open addressing, at most half full, deletion
 * by backward shift), and only while they have work outstanding:
 * a stream whose records have all completed is dropped (a replay gives
 * every deferred free a stream of its own, so keeping them all would grow
 * with the length of the trace).  An event whose stream is not there is
 * done, and a stream that comes back starts as completed up to the number
 * reached so far, so the events recorded on it before are still done.
 * Every completion bumps an epoch (event_epoch) and writes its stream into
 * a ring of the last SIM_DONE_LOG completions (event_completions), so that
 * the engine drains only the queues of those streams; complete_all marks
 * every stream at once.
 *
 * One mutex guards everything. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mutex.h"
#include "base/rtree.h"
#include "sublet/backend.h"
#include "backends/vmem.h"

#define SIM_BASE UINT64_C(0x7f0000000000)
#define SIM_SEGMENT_ALIGN (UINT64_C(2) << 20)
#define SIM_EVENT_MAGIC UINT64_C(0x73696d4576656e74) /* "simEvent" */
#define SIM_DONE_LOG 64 /* completions remembered by event_completions */

enum { RANGE_SEGMENT = 1, RANGE_RESERVATION = 2 };

typedef struct sim_stream {
    sublet_stream id;
    uint64_t recorded;  /* sequence number of the latest record */
    uint64_t completed; /* every record <= this has completed */
    bool used;          /* the slot holds a stream */
} sim_stream;

typedef struct sim_backend {
    sublet_backend base; /* first: the engine casts */
    sl_mutex lock; /* base/mutex.h: one atomic instruction per uncontended lock and unlock */
    uint64_t capacity;
    uint64_t seg_bytes; /* bytes of live segments */
    uint64_t segments;  /* live segments */
    uint64_t live_events;
    sl_rtree placed;     /* segments and reservations, by address (rtree.c) */
    sl_vmem vm;           /* mapped VA ranges and the physical bytes behind them */
    sim_stream *streams;  /* hash table by id; those with records not completed */
    size_t n_streams;
    size_t cap_streams;   /* 0 or a power of two */
    uint64_t seq;         /* the latest record's number, all streams */
    /* event_epoch: bumped (under the lock) whenever a record completes */
    _Atomic uint64_t epoch;
    sublet_stream done_log[SIM_DONE_LOG]; /* the stream of completion e: [e % SIM_DONE_LOG] */
    uint64_t all_done_epoch;              /* the latest complete_all */
    /* one-shot placement for the next segment_alloc or va_reserve: atomic, so
     * that setting it (twice per replayed alloc) costs no lock round trip */
    _Atomic uint64_t next_hint;
    sublet_sim_ops ops_done; /* successful device calls, by kind */
    uint64_t peak_used;  /* the most `used` reached (sublet_sim_capacity_use) */
    uint64_t info_calls; /* mem_info calls */
    uint64_t refusals;   /* allocations and maps refused for want of capacity */
} sim_backend;

struct sublet_event {
    uint64_t magic;
    const sim_backend *owner;
    sublet_stream stream;
    uint64_t seq; /* 0: never recorded */
};

static const sublet_backend_ops sim_ops;

/* ---- helpers ------------------------------------------------------------------ */

static sim_backend *as_sim(sublet_backend *b)
{
    return (b && b->ops == &sim_ops) ? (sim_backend *)b : NULL;
}

static int is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

static uint64_t used_bytes(const sim_backend *s)
{
    return s->seg_bytes + s->vm.bytes;
}

static int fits_capacity(const sim_backend *s, uint64_t size)
{
    uint64_t used = used_bytes(s);
    return size <= s->capacity && used <= s->capacity - size;
}

/* After a call that took memory: the peak of `used`. */
static void note_used(sim_backend *s)
{
    uint64_t used = used_bytes(s);
    if (used > s->peak_used)
        s->peak_used = used;
}

/* Place [?, ?+size) and add it to the address space: at the hint when it
 * is free, else first fit from SIM_BASE with `align`-aligned starts (align a
 * power of two, at least 2 MiB).  SUBLET_ERR_DEVICE_OOM when the space is
 * exhausted.  (Inserting at the hint is the overlap test: one descent.) */
static sublet_status place(sim_backend *s, uint64_t size, uint64_t hint, uint64_t align, int kind,
                           uint64_t *addr_out)
{
    if (hint != 0 && hint + size > hint) {
        sublet_status st = sl_rtree_insert(&s->placed, hint, size, kind);
        if (st != SUBLET_ERR_INVALID_ARGUMENT) { /* placed, or out of memory */
            *addr_out = hint;
            return st;
        }
    }
    uint64_t addr = sl_rtree_first_fit(&s->placed, size, align);
    if (addr == 0)
        return SUBLET_ERR_DEVICE_OOM; /* address space exhausted */
    *addr_out = addr;
    return sl_rtree_insert(&s->placed, addr, size, kind);
}

static inline size_t stream_home(sublet_stream id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (cap - 1);
}

/* The slot of stream id, or the empty slot where it would go (cap > 0). */
static size_t stream_slot(const sim_backend *s, sublet_stream id)
{
    size_t i = stream_home(id, s->cap_streams);
    while (s->streams[i].used && s->streams[i].id != id)
        i = (i + 1) & (s->cap_streams - 1);
    return i;
}

static int streams_grow(sim_backend *s)
{
    size_t cap = s->cap_streams ? s->cap_streams * 2 : 16;
    sim_stream *v = calloc(cap, sizeof *v), *old = s->streams;
    if (!v)
        return 0;
    size_t oc = s->cap_streams;
    s->streams = v;
    s->cap_streams = cap;
    for (size_t i = 0; i < oc; i++)
        if (old[i].used)
            s->streams[stream_slot(s, old[i].id)] = old[i];
    free(old);
    return 1;
}

static sim_stream *find_stream(sim_backend *s, sublet_stream id, int create)
{
    if (s->n_streams) {
        sim_stream *ss = &s->streams[stream_slot(s, id)];
        if (ss->used)
            return ss;
    }
    if (!create)
        return NULL;
    if ((s->n_streams + 1) * 2 > s->cap_streams && !streams_grow(s))
        return NULL;
    sim_stream *ss = &s->streams[stream_slot(s, id)];
    *ss = (sim_stream){.id = id, .recorded = s->seq, .completed = s->seq, .used = true};
    s->n_streams++;
    return ss;
}

/* Drop *ss when all its records have completed (see Events above). */
static void settle_stream(sim_backend *s, sim_stream *ss)
{
    if (ss->completed < ss->recorded)
        return;
    size_t mask = s->cap_streams - 1, i = (size_t)(ss - s->streams);
    for (size_t j = (i + 1) & mask; s->streams[j].used; j = (j + 1) & mask) {
        size_t home = stream_home(s->streams[j].id, s->cap_streams);
        int reachable = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (reachable)
            continue;
        s->streams[i] = s->streams[j];
        i = j;
    }
    s->streams[i].used = false;
    s->n_streams--;
}

/* A completion on `stream` (lock held). */
static void completed(sim_backend *s, sublet_stream stream)
{
    uint64_t e = atomic_fetch_add_explicit(&s->epoch, 1, memory_order_release) + 1;
    s->done_log[e % SIM_DONE_LOG] = stream;
}

static int event_ok(const sim_backend *s, const sublet_event *ev)
{
    return ev && ev->magic == SIM_EVENT_MAGIC && ev->owner == s;
}

/* ---- segments ------------------------------------------------------------------ */

static sublet_status sim_segment_alloc(sublet_backend *b, uint64_t size, uint64_t hint,
                                       uint64_t *addr_out)
{
    sim_backend *s = as_sim(b);
    if (!s || !addr_out || size == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    sl_mutex_lock(&s->lock);
    uint64_t once = atomic_exchange_explicit(&s->next_hint, 0, memory_order_relaxed);
    if (!hint)
        hint = once;
    if (!fits_capacity(s, size)) {
        s->refusals++;
        st = SUBLET_ERR_DEVICE_OOM;
        goto out;
    }
    uint64_t addr = 0;
    st = place(s, size, hint, SIM_SEGMENT_ALIGN, RANGE_SEGMENT, &addr);
    if (st != SUBLET_OK)
        goto out;
    s->seg_bytes += size;
    s->segments++;
    s->ops_done.segment_allocs++;
    note_used(s);
    *addr_out = addr;
out:
    sl_mutex_unlock(&s->lock);
    return st;
}

static sublet_status sim_segment_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sim_backend *s = as_sim(b);
    if (!s)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    if (sl_rtree_remove(&s->placed, addr, size, RANGE_SEGMENT)) {
        s->seg_bytes -= size;
        s->segments--;
        s->ops_done.segment_frees++;
        st = SUBLET_OK;
    }
    sl_mutex_unlock(&s->lock);
    return st;
}

/* ---- events -------------------------------------------------------------------- */

static sublet_status sim_event_create(sublet_backend *b, sublet_event **ev_out)
{
    sim_backend *s = as_sim(b);
    if (!s || !ev_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return SUBLET_ERR_NO_MEMORY;
    ev->magic = SIM_EVENT_MAGIC;
    ev->owner = s;
    sl_mutex_lock(&s->lock);
    s->live_events++;
    sl_mutex_unlock(&s->lock);
    *ev_out = ev;
    return SUBLET_OK;
}

static sublet_status sim_event_destroy(sublet_backend *b, sublet_event *ev)
{
    sim_backend *s = as_sim(b);
    if (!s || !event_ok(s, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    s->live_events--;
    sl_mutex_unlock(&s->lock);
    ev->magic = 0;
    free(ev);
    return SUBLET_OK;
}

static sublet_status sim_event_record(sublet_backend *b, sublet_event *ev, sublet_stream stream)
{
    sim_backend *s = as_sim(b);
    if (!s || !event_ok(s, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    sl_mutex_lock(&s->lock);
    sim_stream *ss = find_stream(s, stream, 1);
    if (!ss) {
        st = SUBLET_ERR_NO_MEMORY;
    } else {
        ev->stream = stream;
        ev->seq = ss->recorded = ++s->seq;
    }
    sl_mutex_unlock(&s->lock);
    return st;
}

static sublet_status sim_event_query(sublet_backend *b, sublet_event *ev, int *done_out)
{
    sim_backend *s = as_sim(b);
    if (!s || !event_ok(s, ev) || !done_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    int done = 1;
    if (ev->seq != 0) {
        const sim_stream *ss = find_stream(s, ev->stream, 0);
        done = !ss || ss->completed >= ev->seq;
    }
    sl_mutex_unlock(&s->lock);
    *done_out = done;
    return SUBLET_OK;
}

/* Every completion bumps it under the lock; a reader needs no lock: a
 * completion it misses now changes the value it sees next time. */
static uint64_t sim_event_epoch(sublet_backend *b)
{
    sim_backend *s = as_sim(b);
    return s ? atomic_load_explicit(&s->epoch, memory_order_acquire) : 0;
}

static uint64_t sim_event_completions(sublet_backend *b, uint64_t since, sublet_stream *out,
                                      size_t cap, size_t *n)
{
    sim_backend *s = as_sim(b);
    *n = SIZE_MAX;
    if (!s)
        return 0;
    sl_mutex_lock(&s->lock);
    uint64_t now = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    if (since <= now && now - since <= cap && now - since <= SIM_DONE_LOG &&
        s->all_done_epoch <= since) {
        for (uint64_t e = since + 1; e <= now; e++)
            out[e - since - 1] = s->done_log[e % SIM_DONE_LOG];
        *n = (size_t)(now - since);
    }
    sl_mutex_unlock(&s->lock);
    return now;
}

static sublet_status sim_event_synchronize(sublet_backend *b, sublet_event *ev)
{
    sim_backend *s = as_sim(b);
    if (!s || !event_ok(s, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    if (ev->seq != 0) {
        sim_stream *ss = find_stream(s, ev->stream, 0);
        if (ss && ss->completed < ev->seq) {
            ss->completed = ev->seq;
            completed(s, ss->id);
            settle_stream(s, ss);
        }
    }
    sl_mutex_unlock(&s->lock);
    return SUBLET_OK;
}

/* ---- memory info ------------------------------------------------------------------ */

/* Everything the simulated device holds is this process's. */
static sublet_status sim_process_mem(sublet_backend *b, uint64_t *used_out)
{
    sim_backend *s = as_sim(b);
    if (!s || !used_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    *used_out = used_bytes(s);
    sl_mutex_unlock(&s->lock);
    return SUBLET_OK;
}

static sublet_status sim_mem_info(sublet_backend *b, uint64_t *free_out, uint64_t *total_out)
{
    sim_backend *s = as_sim(b);
    if (!s || !free_out || !total_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    uint64_t used = used_bytes(s);
    *free_out = used < s->capacity ? s->capacity - used : 0;
    *total_out = s->capacity;
    s->info_calls++;
    sl_mutex_unlock(&s->lock);
    return SUBLET_OK;
}

/* ---- virtual memory --------------------------------------------------------------- */

static sublet_status sim_va_reserve(sublet_backend *b, uint64_t size, uint64_t align,
                                    uint64_t *addr_out)
{
    sim_backend *s = as_sim(b);
    if (!s || !addr_out || size == 0 || (align != 0 && !is_pow2(align)))
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (align < SIM_SEGMENT_ALIGN)
        align = SIM_SEGMENT_ALIGN;
    sublet_status st = SUBLET_OK;
    sl_mutex_lock(&s->lock);
    /* the one-shot hint places a reservation too (replay: an expandable
     * segment's first map is at its reservation's start) */
    uint64_t hint = atomic_exchange_explicit(&s->next_hint, 0, memory_order_relaxed);
    uint64_t addr = 0;
    st = place(s, size, hint, align, RANGE_RESERVATION, &addr);
    if (st == SUBLET_OK) {
        s->ops_done.va_reserves++;
        *addr_out = addr;
    }
    sl_mutex_unlock(&s->lock);
    return st;
}

static sublet_status sim_va_release(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sim_backend *s = as_sim(b);
    if (!s)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    const sl_rtree_entry *r = sl_rtree_find(&s->placed, addr);
    if (r && r->tag == RANGE_RESERVATION && r->size == size) {
        if (sl_vmem_overlaps(&s->vm, addr, size)) {
            st = SUBLET_ERR_BUSY;
        } else {
            sl_rtree_remove(&s->placed, addr, size, RANGE_RESERVATION);
            s->ops_done.va_releases++;
            st = SUBLET_OK;
        }
    }
    sl_mutex_unlock(&s->lock);
    return st;
}

/* Is [addr, addr+size) inside one reservation?  Lock held. */
static int in_reservation(const sim_backend *s, uint64_t addr, uint64_t size)
{
    const sl_rtree_entry *r = sl_rtree_containing(&s->placed, addr);
    return r && r->tag == RANGE_RESERVATION && r->addr + r->size >= addr + size;
}

static sublet_status sim_va_map(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sim_backend *s = as_sim(b);
    if (!s || size == 0 || addr + size < addr)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    sl_mutex_lock(&s->lock);
    if (!in_reservation(s, addr, size) || sl_vmem_overlaps(&s->vm, addr, size)) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
    } else if (!fits_capacity(s, size)) {
        s->refusals++;
        st = SUBLET_ERR_DEVICE_OOM;
    } else {
        st = sl_vmem_map(&s->vm, addr, size, sl_vmem_phys_place(&s->vm, size, SIM_SEGMENT_ALIGN));
        if (st == SUBLET_OK) {
            s->ops_done.va_maps++;
            note_used(s);
        }
    }
    sl_mutex_unlock(&s->lock);
    return st;
}

static sublet_status sim_va_map_alias(sublet_backend *b, uint64_t dst, uint64_t src, uint64_t size)
{
    sim_backend *s = as_sim(b);
    if (!s || size == 0 || dst + size < dst || src + size < src)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    sl_mutex_lock(&s->lock);
    if (!in_reservation(s, dst, size) || !in_reservation(s, src, size))
        st = SUBLET_ERR_INVALID_ARGUMENT;
    else
        st = sl_vmem_alias(&s->vm, dst, src, size); /* checks mapped / unmapped */
    if (st == SUBLET_OK) {
        s->ops_done.va_maps++;
        s->ops_done.va_aliases++;
    }
    sl_mutex_unlock(&s->lock);
    return st;
}

static sublet_status sim_va_unmap(sublet_backend *b, uint64_t addr, uint64_t size)
{
    sim_backend *s = as_sim(b);
    if (!s || size == 0 || addr + size < addr)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sl_mutex_lock(&s->lock);
    /* every byte of [addr, addr+size) must be mapped; physical bytes no
     * other mapping reaches are freed */
    sublet_status st = sl_vmem_unmap(&s->vm, addr, size, NULL, NULL);
    if (st == SUBLET_OK)
        s->ops_done.va_unmaps++;
    sl_mutex_unlock(&s->lock);
    return st;
}

/* ---- lifetime ---------------------------------------------------------------------- */

static void sim_destroy(sublet_backend *b)
{
    sim_backend *s = as_sim(b);
    if (!s)
        return;
    sl_mutex_destroy(&s->lock);
    sl_rtree_fini(&s->placed);
    sl_vmem_fini(&s->vm);
    free(s->streams);
    free(s);
}

static const sublet_backend_ops sim_ops = {
    .segment_alloc = sim_segment_alloc,
    .segment_free = sim_segment_free,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_epoch = sim_event_epoch,
    .event_completions = sim_event_completions,
    .event_synchronize = sim_event_synchronize,
    .mem_info = sim_mem_info,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .va_map = sim_va_map,
    .va_unmap = sim_va_unmap,
    .va_map_alias = sim_va_map_alias,
    .process_mem = sim_process_mem,
    .destroy = sim_destroy,
};

sublet_status sublet_sim_create(uint64_t capacity, sublet_backend **out)
{
    return sublet_sim_create_at(capacity, SIM_BASE, out);
}

sublet_status sublet_sim_create_at(uint64_t capacity, uint64_t base, sublet_backend **out)
{
    if (!out || capacity == 0 || base == 0 || base % SIM_SEGMENT_ALIGN != 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sim_backend *s = calloc(1, sizeof *s);
    if (!s)
        return SUBLET_ERR_NO_MEMORY;
    sl_mutex_init(&s->lock);
    s->base.ops = &sim_ops;
    s->base.name = "sim";
    s->base.device = 0;
    s->capacity = capacity;
    sl_rtree_init(&s->placed, base, SIM_SEGMENT_ALIGN);
    atomic_init(&s->next_hint, 0);
    atomic_init(&s->epoch, 0);
    *out = &s->base;
    return SUBLET_OK;
}

void sublet_sim_stream_complete(sublet_backend *sim, sublet_stream stream)
{
    sim_backend *s = as_sim(sim);
    if (!s)
        return;
    sl_mutex_lock(&s->lock);
    sim_stream *ss = find_stream(s, stream, 0);
    if (ss) {
        if (ss->completed != ss->recorded)
            completed(s, stream);
        ss->completed = ss->recorded;
        settle_stream(s, ss);
    }
    sl_mutex_unlock(&s->lock);
}

void sublet_sim_complete_all(sublet_backend *sim)
{
    sim_backend *s = as_sim(sim);
    if (!s)
        return;
    sl_mutex_lock(&s->lock);
    if (s->n_streams)
        s->all_done_epoch = atomic_fetch_add_explicit(&s->epoch, 1, memory_order_release) + 1;
    if (s->n_streams) /* every record completed */
        memset(s->streams, 0, s->cap_streams * sizeof *s->streams);
    s->n_streams = 0;
    sl_mutex_unlock(&s->lock);
}

uint64_t sublet_sim_used(const sublet_backend *sim)
{
    sim_backend *s = as_sim((sublet_backend *)sim);
    if (!s)
        return 0;
    sl_mutex_lock(&s->lock);
    uint64_t v = used_bytes(s);
    sl_mutex_unlock(&s->lock);
    return v;
}

void sublet_sim_capacity_use(const sublet_backend *sim, uint64_t *peak_used, uint64_t *info_calls,
                             uint64_t *refusals)
{
    sim_backend *s = as_sim((sublet_backend *)sim);
    *peak_used = *info_calls = *refusals = 0;
    if (!s)
        return;
    sl_mutex_lock(&s->lock);
    *peak_used = s->peak_used;
    *info_calls = s->info_calls;
    *refusals = s->refusals;
    sl_mutex_unlock(&s->lock);
}

uint64_t sublet_sim_segments(const sublet_backend *sim)
{
    sim_backend *s = as_sim((sublet_backend *)sim);
    if (!s)
        return 0;
    sl_mutex_lock(&s->lock);
    uint64_t v = s->segments;
    sl_mutex_unlock(&s->lock);
    return v;
}

void sublet_sim_set_capacity(sublet_backend *sim, uint64_t capacity)
{
    sim_backend *s = as_sim(sim);
    if (!s)
        return;
    sl_mutex_lock(&s->lock);
    s->capacity = capacity;
    sl_mutex_unlock(&s->lock);
}

void sublet_sim_next_hint(sublet_backend *b, uint64_t addr)
{
    sim_backend *s = as_sim(b);
    if (!s)
        return;
    atomic_store_explicit(&s->next_hint, addr, memory_order_relaxed);
}

void sublet_sim_ops_read(const sublet_backend *b, sublet_sim_ops *out)
{
    sim_backend *s = as_sim((sublet_backend *)b);
    *out = (sublet_sim_ops){0};
    if (!s)
        return;
    sl_mutex_lock(&s->lock);
    *out = s->ops_done;
    sl_mutex_unlock(&s->lock);
}
