/* sublet — recording: the trace ring buffer and interned stacks.
 *
 * The engine calls sl_history_event() for every trace event while a history
 * is attached (a->history != NULL); with recording off that is one branch.
 * Stacks are interned: a stack seen before costs a hash lookup, and native
 * frames are resolved to symbol names (dladdr) once per distinct stack. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/history_internal.h"

#define DEFAULT_MAX_ENTRIES ((size_t)1000000)
#define MAX_FRAMES 64
#define SKIP_FRAMES 3 /* capture, sl_stack_capture's caller, the sublet_* entry */

struct sl_history {
    sublet_record enabled;
    sublet_context context;
    size_t max;
    sublet_trace_entry *ring;
    size_t head, count, cap;
    uint64_t dropped;
};

typedef struct sl_stack {
    uint64_t hash;
    uint32_t n;
    uintptr_t *pcs;       /* native stacks; NULL for caller-given frames */
    sublet_frame *frames; /* resolved lazily for native stacks */
} sl_stack;

typedef struct sl_strchunk {
    struct sl_strchunk *next;
    size_t used, cap;
    char data[];
} sl_strchunk;

struct sl_stacks {
    sl_stack *v;
    size_t n, cap;
    uint32_t *table; /* open addressing: stack id (1-based), 0 = empty */
    size_t table_cap;
    sl_strchunk *strings;
};

/* ---- clock ------------------------------------------------------------------------ */

uint64_t sl_now_us(sublet_allocator *a)
{
    if (a->clock_fn)
        return a->clock_fn(a->clock_user);
    /* the events of one call (a free's free_requested and free_completed,
     * empty_cache's segment_frees) share one reading: a clock read is a
     * good part of an event's cost on the hot path */
    if (a->now_cache)
        return a->now_cache;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return a->now_cache = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- interned stacks ----------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = mix(h, (unsigned char)*s);
    return mix(h, 0xff);
}

static const char *intern_str(struct sl_stacks *st, const char *s)
{
    if (!s)
        s = "";
    size_t len = strlen(s) + 1;
    if (!st->strings || st->strings->cap - st->strings->used < len) {
        size_t cap = len > 65536 ? len : 65536;
        sl_strchunk *c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = st->strings;
        c->used = 0;
        c->cap = cap;
        st->strings = c;
    }
    char *out = st->strings->data + st->strings->used;
    memcpy(out, s, len);
    st->strings->used += len;
    return out;
}

static bool same_stack(const sl_stack *k, const uintptr_t *pcs, const sublet_frame *fr, uint32_t n)
{
    if (k->n != n)
        return false;
    if (pcs)
        return k->pcs && memcmp(k->pcs, pcs, n * sizeof *pcs) == 0;
    if (k->pcs)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (k->frames[i].line != fr[i].line || strcmp(k->frames[i].name, fr[i].name ? fr[i].name : "") ||
            strcmp(k->frames[i].filename, fr[i].filename ? fr[i].filename : ""))
            return false;
    return true;
}

static bool table_grow(struct sl_stacks *st)
{
    size_t nc = st->table_cap ? st->table_cap * 2 : 1024;
    uint32_t *t = calloc(nc, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < st->n; i++) {
        size_t j = st->v[i].hash & (nc - 1);
        while (t[j])
            j = (j + 1) & (nc - 1);
        t[j] = (uint32_t)(i + 1);
    }
    free(st->table);
    st->table = t;
    st->table_cap = nc;
    return true;
}

/* Returns the id of the stack (1-based), interning it if new; 0 on OOM. */
static uint32_t intern(struct sl_stacks *st, const uintptr_t *pcs, const sublet_frame *fr,
                       uint32_t n)
{
    uint64_t h = 0x12345;
    for (uint32_t i = 0; i < n; i++) {
        if (pcs) {
            h = mix(h, pcs[i]);
        } else {
            h = hash_str(h, fr[i].filename);
            h = hash_str(h, fr[i].name);
            h = mix(h, (uint64_t)(int64_t)fr[i].line);
        }
    }
    if ((st->n + 1) * 2 > st->table_cap && !table_grow(st))
        return 0;
    size_t j = h & (st->table_cap - 1);
    for (; st->table[j]; j = (j + 1) & (st->table_cap - 1)) {
        sl_stack *k = &st->v[st->table[j] - 1];
        if (k->hash == h && same_stack(k, pcs, fr, n))
            return st->table[j];
    }
    if (st->n == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 256;
        sl_stack *nv = realloc(st->v, nc * sizeof *nv);
        if (!nv)
            return 0;
        st->v = nv;
        st->cap = nc;
    }
    sl_stack s = {.hash = h, .n = n};
    if (pcs) {
        s.pcs = malloc((n ? n : 1) * sizeof *s.pcs);
        if (!s.pcs)
            return 0;
        memcpy(s.pcs, pcs, n * sizeof *pcs);
    } else {
        s.frames = malloc((n ? n : 1) * sizeof *s.frames);
        if (!s.frames)
            return 0;
        for (uint32_t i = 0; i < n; i++) {
            s.frames[i].filename = intern_str(st, fr[i].filename);
            s.frames[i].name = intern_str(st, fr[i].name);
            s.frames[i].line = fr[i].line;
            if (!s.frames[i].filename || !s.frames[i].name) {
                free(s.frames);
                return 0;
            }
        }
    }
    st->v[st->n++] = s;
    st->table[j] = (uint32_t)st->n;
    return (uint32_t)st->n;
}

uint32_t sl_stack_capture(sublet_allocator *a)
{
    if (!a->stacks && !(a->stacks = calloc(1, sizeof *a->stacks)))
        return 0;
    if (a->stack_fn) {
        sublet_frame fr[MAX_FRAMES];
        size_t n = a->stack_fn(a->stack_user, fr, MAX_FRAMES);
        return intern(a->stacks, NULL, fr, (uint32_t)(n > MAX_FRAMES ? MAX_FRAMES : n));
    }
    void *raw[MAX_FRAMES + SKIP_FRAMES];
    int n = backtrace(raw, MAX_FRAMES + SKIP_FRAMES);
    int skip = n > SKIP_FRAMES ? SKIP_FRAMES : 0;
    uintptr_t pcs[MAX_FRAMES + SKIP_FRAMES];
    for (int i = skip; i < n; i++)
        pcs[i - skip] = (uintptr_t)raw[i];
    return intern(a->stacks, pcs, NULL, (uint32_t)(n - skip));
}

size_t sublet_stack_frames_locked(sublet_allocator *a, uint32_t id, const sublet_frame **frames)
{
    *frames = NULL;
    if (!a)
        return 0;
    size_t n = 0;
    struct sl_stacks *st = a->stacks;
    if (st && id >= 1 && id <= st->n) {
        sl_stack *s = &st->v[id - 1];
        if (!s->frames && (s->frames = calloc(s->n ? s->n : 1, sizeof *s->frames))) {
            for (uint32_t i = 0; i < s->n; i++) {
                Dl_info info;
                memset(&info, 0, sizeof info);
                /* the return address points after the call: look up pc-1 */
                int ok = dladdr((void *)(s->pcs[i] - 1), &info);
                s->frames[i].filename = intern_str(st, ok && info.dli_fname ? info.dli_fname : "??");
                s->frames[i].name = intern_str(st, ok && info.dli_sname ? info.dli_sname : "??");
                s->frames[i].line = 0;
            }
        }
        if (s->frames) {
            *frames = s->frames;
            n = s->n;
        }
    }
    return n;
}

size_t sublet_stack_frames(sublet_allocator *a, uint32_t id, const sublet_frame **frames)
{
    *frames = NULL;
    if (!a)
        return 0;
    sl_lock(a);
    size_t n = sublet_stack_frames_locked(a, id, frames);
    sl_unlock(a);
    return n;
}

static void sl_stacks_fini(sublet_allocator *a)
{
    struct sl_stacks *st = a->stacks;
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++) {
        free(st->v[i].pcs);
        free(st->v[i].frames);
    }
    free(st->v);
    free(st->table);
    for (sl_strchunk *c = st->strings; c;) {
        sl_strchunk *n = c->next;
        free(c);
        c = n;
    }
    free(st);
    a->stacks = NULL;
}

/* ---- the ring buffer ------------------------------------------------------------------- */

sublet_context sl_history_context(const sublet_allocator *a)
{
    return a->history ? a->history->context : SUBLET_CONTEXT_NONE;
}

static void history_append(struct sl_history *h, sublet_action act, uint64_t addr, uint64_t size,
                           sublet_stream stream, uint32_t stack, uint64_t now)
{
    if (h->context < SUBLET_CONTEXT_ALLOC)
        stack = 0;
    if (h->count == h->cap && h->cap < h->max) {
        size_t nc = h->cap ? h->cap * 2 : 1024;
        if (nc > h->max)
            nc = h->max;
        sublet_trace_entry *n = malloc(nc * sizeof *n);
        if (n) {
            for (size_t i = 0; i < h->count; i++)
                n[i] = h->ring[(h->head + i) % h->cap];
            free(h->ring);
            h->ring = n;
            h->head = 0;
            h->cap = nc;
        }
    }
    if (h->cap == 0) {
        h->dropped++;
        return;
    }
    sublet_trace_entry e = {act, addr, size, stream, now, stack};
    if (h->count == h->cap) { /* full: overwrite the oldest */
        h->ring[h->head] = e;
        h->head = (h->head + 1) % h->cap;
        h->dropped++;
    } else {
        h->ring[(h->head + h->count) % h->cap] = e;
        h->count++;
    }
}

void sl_history_event(sublet_allocator *a, sublet_action act, uint64_t addr, uint64_t size,
                      sublet_stream stream, uint32_t stack)
{
    struct sl_history *h = a->history;
    bool hist = h && h->enabled == SUBLET_RECORD_ALL;
    if (!hist && !a->event_fn)
        return;
    uint64_t now = sl_now_us(a); /* one reading for both: they agree */
    if (hist)
        history_append(h, act, addr, size, stream, stack, now);
    if (a->event_fn) {
        sublet_event_record ev = {act, addr, size, stream, now, stack};
        a->event_fn(a->event_user, a, &ev);
    }
}

void sublet_event_set(sublet_allocator *a, sublet_event_fn fn, void *user)
{
    sl_lock(a);
    a->event_fn = fn;
    a->event_user = user;
    sl_unlock(a);
}

static void history_free(struct sl_history *h)
{
    if (h) {
        free(h->ring);
        free(h);
    }
}

void sl_history_fini(sublet_allocator *a)
{
    history_free(a->history);
    a->history = NULL;
    sl_stacks_fini(a);
}

sublet_status sublet_history_record(sublet_allocator *a, sublet_record enabled,
                                    sublet_context context, size_t max_entries)
{
    if (!a || (unsigned)enabled > SUBLET_RECORD_ALL || (unsigned)context > SUBLET_CONTEXT_ALL)
        return SUBLET_ERR_INVALID_ARGUMENT;
    struct sl_history *h = NULL;
    if (enabled != SUBLET_RECORD_OFF) {
        if (!(h = calloc(1, sizeof *h)))
            return SUBLET_ERR_NO_MEMORY;
        h->enabled = enabled;
        h->context = context;
        /* "state" keeps no trace: PyTorch forces the buffer to one entry */
        h->max = enabled == SUBLET_RECORD_STATE ? 1 : max_entries ? max_entries : DEFAULT_MAX_ENTRIES;
    }
    sl_lock(a);
    struct sl_history *old = a->history;
    a->history = h;
    sl_unlock(a);
    history_free(old);
    return SUBLET_OK;
}

size_t sublet_history_count(sublet_allocator *a)
{
    sl_lock(a);
    size_t n = a->history ? a->history->count : 0;
    sl_unlock(a);
    return n;
}

size_t sublet_history_copy(sublet_allocator *a, sublet_trace_entry *out, size_t cap)
{
    sl_lock(a);
    struct sl_history *h = a->history;
    size_t n = h ? h->count : 0;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = h->ring[(h->head + i) % h->cap];
    sl_unlock(a);
    return n;
}

size_t sublet_history_take(sublet_allocator *a, sublet_trace_entry *out, size_t cap)
{
    sl_lock(a);
    struct sl_history *h = a->history;
    size_t n = h ? h->count : 0;
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++)
        out[i] = h->ring[(h->head + i) % h->cap];
    if (n) {
        h->head = (h->head + n) % h->cap;
        h->count -= n;
    }
    sl_unlock(a);
    return n;
}

uint64_t sublet_history_dropped(sublet_allocator *a)
{
    sl_lock(a);
    uint64_t d = a->history ? a->history->dropped : 0;
    sl_unlock(a);
    return d;
}

void sublet_stack_source_set(sublet_allocator *a, sublet_stack_fn fn, void *user)
{
    sl_lock(a);
    a->stack_fn = fn;
    a->stack_user = user;
    sl_unlock(a);
}

void sublet_clock_set(sublet_allocator *a, sublet_clock_fn fn, void *user)
{
    sl_lock(a);
    a->clock_fn = fn;
    a->clock_user = user;
    sl_unlock(a);
}

uint32_t sublet_block_stack(sublet_allocator *a, uint64_t addr)
{
    sl_lock(a);
    sl_block *b = sl_ptrmap_get(&a->ptrs, addr);
    uint32_t id = b ? b->stack : 0;
    sl_unlock(a);
    return id;
}

void sl_history_snapshot_marker(sublet_allocator *a)
{
    sl_lock(a);
    if (a->history || a->event_fn)
        sl_history_event(a, SUBLET_ACT_SNAPSHOT, 0,
                         (uint64_t)a->stats.active_bytes[SUBLET_POOL_ALL].current, 0, 0);
    if (a->trace_fn && (a->trace_actions >> SUBLET_ACT_SNAPSHOT & 1u))
        a->trace_fn(a->trace_user, SUBLET_ACT_SNAPSHOT, 0,
                    (uint64_t)a->stats.active_bytes[SUBLET_POOL_ALL].current, 0);
    sl_unlock(a);
}
