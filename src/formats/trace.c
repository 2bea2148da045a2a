/* sublet — the in-memory trace model: a growable array of events with the
 * prelude first.  Readers (trace_csv.c, later pickle/JSON/RMM/Kineto) fill
 * it through sublet_trace_append; the replay driver reads it. */
#include <stdlib.h>
#include <string.h>

#include "sublet/trace.h"
#include "sublet/trace_stream.h"
#include "formats/trace_readers.h"

struct sublet_trace {
    sublet_trace_event *ev;
    size_t n, cap;
    size_t prelude;              /* leading prelude events */
    size_t by_kind[SUBLET_TRACE_KIND_COUNT];
    trace_extras *extras; /* stacks, settings, source format (src/trace_load.c) */
};

static const char *const k_prelude_names[] = {"pre_segment", "pre_alloc"};

const char *sublet_trace_kind_name(uint32_t kind)
{
    if (kind < SUBLET_ACT_COUNT)
        return sublet_action_name((sublet_action)kind);
    if (kind < SUBLET_TRACE_KIND_COUNT)
        return k_prelude_names[kind - SUBLET_ACT_COUNT];
    return "unknown";
}

int sublet_trace_kind_parse(const char *name, size_t len, uint32_t *kind)
{
    if (!name)
        return -1;
    for (uint32_t k = 0; k < SUBLET_TRACE_KIND_COUNT; k++) {
        const char *s = sublet_trace_kind_name(k);
        if (strlen(s) == len && memcmp(s, name, len) == 0) {
            if (kind)
                *kind = k;
            return 0;
        }
    }
    return -1;
}

int sublet_trace_kind_is_prelude(uint32_t kind)
{
    return kind == SUBLET_TRACE_PRE_SEGMENT || kind == SUBLET_TRACE_PRE_ALLOC;
}

sublet_status sublet_trace_create(sublet_trace **out)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = calloc(1, sizeof **out);
    return *out ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
}

void sublet_trace_free(sublet_trace *t)
{
    if (!t)
        return;
    trace_extras_destroy(t->extras);
    free(t->ev);
    free(t);
}

trace_extras *sl_trace_swap_extras(sublet_trace *t, trace_extras *x)
{
    trace_extras *old = t->extras;
    t->extras = x;
    return old;
}

const trace_extras *sl_trace_extras(const sublet_trace *t) { return t->extras; }

sublet_status sublet_trace_append(sublet_trace *t, const sublet_trace_event *ev)
{
    if (!t || !ev || ev->kind >= SUBLET_TRACE_KIND_COUNT)
        return SUBLET_ERR_INVALID_ARGUMENT;
    int pre = sublet_trace_kind_is_prelude(ev->kind);
    if (pre && t->prelude != t->n)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        if (nc > SIZE_MAX / sizeof *t->ev)
            return SUBLET_ERR_NO_MEMORY;
        sublet_trace_event *n = realloc(t->ev, nc * sizeof *n);
        if (!n)
            return SUBLET_ERR_NO_MEMORY;
        t->ev = n;
        t->cap = nc;
    }
    t->ev[t->n++] = *ev;
    if (pre)
        t->prelude++;
    t->by_kind[ev->kind]++;
    return SUBLET_OK;
}

size_t sublet_trace_count(const sublet_trace *t) { return t ? t->n : 0; }

size_t sublet_trace_prelude_count(const sublet_trace *t) { return t ? t->prelude : 0; }

const sublet_trace_event *sublet_trace_at(const sublet_trace *t, size_t i)
{
    return (t && i < t->n) ? &t->ev[i] : NULL;
}

const sublet_trace_event *sublet_trace_events(const sublet_trace *t)
{
    return (t && t->n) ? t->ev : NULL;
}

size_t sublet_trace_count_kind(const sublet_trace *t, uint32_t kind)
{
    return (t && kind < SUBLET_TRACE_KIND_COUNT) ? t->by_kind[kind] : 0;
}

/* ---- what the trace records ------------------------------------------------- */

/* Saturating add/subtract: a malformed trace must not wrap the counters. */
static uint64_t add_sat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }
static uint64_t sub_sat(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

void sl_trace_info_step(sublet_trace_info *out, uint64_t *reserved_io, uint64_t *requested_io,
                        const sublet_trace_event *e, size_t i)
{
    uint64_t reserved = *reserved_io, requested = *requested_io;
    switch (e->kind) {
    case SUBLET_TRACE_PRE_SEGMENT:
        out->pre_segments++;
        out->pre_segment_bytes = add_sat(out->pre_segment_bytes, e->size);
        reserved = add_sat(reserved, e->size);
        break;
    case SUBLET_TRACE_PRE_ALLOC:
        out->pre_allocs++;
        requested = add_sat(requested, e->size);
        break;
    case SUBLET_ACT_ALLOC:
        out->allocs++;
        requested = add_sat(requested, e->size);
        break;
    case SUBLET_ACT_FREE_REQUESTED:
        out->frees_requested++;
        break;
    case SUBLET_ACT_FREE_COMPLETED:
        out->frees_completed++;
        requested = sub_sat(requested, e->size);
        break;
    case SUBLET_ACT_SEGMENT_ALLOC:
    case SUBLET_ACT_SEGMENT_MAP:
        out->segment_allocs += e->kind == SUBLET_ACT_SEGMENT_ALLOC;
        reserved = add_sat(reserved, e->size);
        break;
    case SUBLET_ACT_SEGMENT_FREE:
    case SUBLET_ACT_SEGMENT_UNMAP:
        out->segment_frees += e->kind == SUBLET_ACT_SEGMENT_FREE;
        reserved = sub_sat(reserved, e->size);
        break;
    case SUBLET_ACT_OOM:
        out->ooms++;
        break;
    case SUBLET_ACT_SNAPSHOT:
        out->snapshots++;
        break;
    default:
        break;
    }
    if (reserved > out->peak_reserved_bytes || (i == 0 && reserved)) {
        out->peak_reserved_bytes = reserved;
        out->peak_reserved_event = i;
    }
    if (requested > out->peak_requested_bytes)
        out->peak_requested_bytes = requested;
    *reserved_io = reserved;
    *requested_io = requested;
}

/* One pass over a stream of the in-memory array: sublet_trace_stream_info's
 * body, the pair's one. */
sublet_status sublet_trace_info_get(const sublet_trace *t, sublet_trace_info *out)
{
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!t)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_trace_stream *ts = NULL;
    if (sublet_trace_stream_from_trace(t, &ts) != SUBLET_OK)
        return SUBLET_ERR_NO_MEMORY;
    sublet_status st = sublet_trace_stream_info(ts, out, NULL, 0);
    sublet_trace_stream_close(ts);
    if (st != SUBLET_OK)
        out->streams = 0; /* as the count of the whole array gave it */
    return st;
}
