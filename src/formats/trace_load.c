/* sublet — reading a trace of any format: content detection, the extras a
 * reader attaches to its trace (stacks, settings, device), and the helpers
 * the readers share (address set, prelude assembly).  See sublet/trace.h and
 * trace_readers.h.
 *
 * The trace object itself lives in trace.c, which does not know about the
 * extras; they are owned by the trace (freed with it, or earlier by
 * sublet_trace_extras_release). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/read_file.h"
#include "formats/event_log_format.h"
#include "formats/gz.h"
#include "formats/json_codec.h"
#include "formats/pickle.h"
#include "formats/trace_readers.h"

/* ---- messages ------------------------------------------------------------------ */

void trace_show(const void *p, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = p;
    size_t o = 0, lim = n < 40 ? n : 40;
    if (!cap)
        return;
    for (size_t i = 0; i < lim && o + 5 < cap; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (n > lim && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o < cap ? o : cap - 1] = '\0';
}

static const char *const k_format_names[SUBLET_FORMAT_COUNT] = {
    "unknown", "events-csv", "snapshot-pickle", "snapshot-json", "rmm-csv", "kineto-json",
    "sublet-log"};

const char *sublet_trace_format_name(sublet_trace_format f)
{
    return (unsigned)f < SUBLET_FORMAT_COUNT ? k_format_names[f] : "unknown";
}

/* ---- hashing ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_bytes(const char *p, size_t n, uint64_t h)
{
    h ^= 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return mix64(h ^ n);
}

/* ---- address set ---------------------------------------------------------------------- */

void u64set_free(u64set *s)
{
    free(s->keys);
    free(s->used);
    memset(s, 0, sizeof *s);
}

static size_t u64set_slot(const u64set *s, uint64_t k)
{
    size_t m = s->cap - 1, i = (size_t)mix64(k) & m;
    while (s->used[i] && s->keys[i] != k)
        i = (i + 1) & m;
    return i;
}

bool u64set_has(const u64set *s, uint64_t k) { return s->cap && s->used[u64set_slot(s, k)]; }

static int u64set_grow(u64set *s)
{
    size_t nc = s->cap ? s->cap * 2 : 64;
    if (nc > SIZE_MAX / sizeof(uint64_t))
        return -1;
    u64set g = {calloc(nc, sizeof(uint64_t)), calloc(nc, 1), nc, 0};
    if (!g.keys || !g.used) {
        u64set_free(&g);
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++)
        if (s->used[i]) {
            size_t j = u64set_slot(&g, s->keys[i]);
            g.used[j] = 1;
            g.keys[j] = s->keys[i];
            g.n++;
        }
    u64set_free(s);
    *s = g;
    return 0;
}

int u64set_add(u64set *s, uint64_t k)
{
    if ((s->n + 1) * 4 > s->cap * 3 && u64set_grow(s) != 0)
        return -1;
    size_t i = u64set_slot(s, k);
    if (!s->used[i]) {
        s->used[i] = 1;
        s->keys[i] = k;
        s->n++;
    }
    return 0;
}

bool u64set_remove(u64set *s, uint64_t k)
{
    if (!s->cap)
        return false;
    size_t m = s->cap - 1, i = u64set_slot(s, k);
    if (!s->used[i])
        return false;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    size_t j = i;
    for (;;) {
        s->used[i] = 0;
        for (;;) {
            j = (j + 1) & m;
            if (!s->used[j]) {
                s->n--;
                return true;
            }
            size_t home = (size_t)mix64(s->keys[j]) & m;
            /* j may move to i unless its home lies cyclically in (i, j]. */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        s->keys[i] = s->keys[j];
        s->used[i] = 1;
        i = j;
    }
}

/* ---- disjoint address ranges ------------------------------------------------------------- */

/* First range whose end is above x. */
static size_t ranges_first_above(const sl_ranges *r, uint64_t x)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->v[mid].hi <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int ranges_insert_at(sl_ranges *r, size_t i, uint64_t lo, uint64_t hi,
                            sublet_stream stream)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 16;
        sl_range *n = nc <= SIZE_MAX / sizeof *n ? realloc(r->v, nc * sizeof *n) : NULL;
        if (!n)
            return -1;
        r->v = n;
        r->cap = nc;
    }
    memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
    r->v[i] = (sl_range){lo, hi, stream};
    r->n++;
    return 0;
}

static void ranges_remove_span(sl_ranges *r, size_t i, size_t count)
{
    if (count == 0)
        return; /* the array may not exist yet */
    memmove(&r->v[i], &r->v[i + count], (r->n - i - count) * sizeof *r->v);
    r->n -= count;
}

int sl_ranges_sub(sl_ranges *r, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return 0;
    size_t i = ranges_first_above(r, lo);
    if (i < r->n && r->v[i].lo < lo && r->v[i].hi > hi) { /* one range, split in two */
        if (ranges_insert_at(r, i + 1, hi, r->v[i].hi, r->v[i].stream) != 0)
            return -1;
        r->v[i].hi = lo;
        return 0;
    }
    if (i < r->n && r->v[i].lo < lo) { /* keep the head of the first */
        r->v[i].hi = lo;
        i++;
    }
    size_t j = i;
    while (j < r->n && r->v[j].hi <= hi)
        j++; /* wholly inside */
    if (j < r->n && r->v[j].lo < hi)
        r->v[j].lo = hi; /* keep the tail of the last */
    ranges_remove_span(r, i, j - i);
    return 0;
}

int sl_ranges_add(sl_ranges *r, uint64_t lo, uint64_t hi, sublet_stream stream)
{
    if (lo >= hi)
        return 0;
    if (sl_ranges_sub(r, lo, hi) != 0)
        return -1;
    size_t i = ranges_first_above(r, lo); /* nothing overlaps now: the insertion point */
    int left = i > 0 && r->v[i - 1].hi == lo && r->v[i - 1].stream == stream;
    int right = i < r->n && r->v[i].lo == hi && r->v[i].stream == stream;
    if (left && right) {
        r->v[i - 1].hi = r->v[i].hi;
        ranges_remove_span(r, i, 1);
    } else if (left) {
        r->v[i - 1].hi = hi;
    } else if (right) {
        r->v[i].lo = lo;
    } else if (ranges_insert_at(r, i, lo, hi, stream) != 0) {
        return -1;
    }
    return 0;
}

int sl_ranges_covers(const sl_ranges *r, uint64_t lo, uint64_t hi)
{
    size_t i = ranges_first_above(r, lo);
    return i < r->n && r->v[i].lo <= lo && r->v[i].hi >= hi;
}

uint64_t sl_ranges_bytes(const sl_ranges *r)
{
    uint64_t b = 0;
    for (size_t i = 0; i < r->n; i++)
        b += r->v[i].hi - r->v[i].lo;
    return b;
}

void sl_ranges_free(sl_ranges *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* ---- event vectors and assembly ----------------------------------------------------------- */

void trace_vec_free(trace_vec *v)
{
    free(v->v);
    memset(v, 0, sizeof *v);
}

sublet_status trace_vec_push(trace_vec *v, const sublet_trace_event *e)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        if (nc > SIZE_MAX / sizeof *v->v)
            return SUBLET_ERR_NO_MEMORY;
        sublet_trace_event *n = realloc(v->v, nc * sizeof *n);
        if (!n)
            return SUBLET_ERR_NO_MEMORY;
        v->v = n;
        v->cap = nc;
    }
    v->v[v->n++] = *e;
    return SUBLET_OK;
}

/* Sort by address; equal addresses keep their order (the `line` field holds
 * the original position while sorting). */
static int cmp_pre(const void *a, const void *b)
{
    const sublet_trace_event *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

void trace_sort_pre(trace_vec *v, uint32_t kind)
{
    if (!v->n)
        return;
    for (size_t i = 0; i < v->n; i++)
        v->v[i].line = i;
    qsort(v->v, v->n, sizeof *v->v, cmp_pre);
    for (size_t i = 0; i < v->n; i++) {
        v->v[i].kind = kind;
        v->v[i].line = 0;
    }
}

sublet_status trace_assemble(trace_vec *pre_seg, trace_vec *pre_alloc, const trace_vec *events,
                             sublet_trace **out)
{
    *out = NULL;
    if (pre_seg->n)
        trace_sort_pre(pre_seg, SUBLET_TRACE_PRE_SEGMENT);
    if (pre_alloc->n)
        trace_sort_pre(pre_alloc, SUBLET_TRACE_PRE_ALLOC);
    sublet_trace *t = NULL;
    sublet_status st = sublet_trace_create(&t);
    const trace_vec *parts[3] = {pre_seg, pre_alloc, events};
    for (int p = 0; p < 3 && st == SUBLET_OK; p++)
        for (size_t i = 0; i < parts[p]->n && st == SUBLET_OK; i++)
            st = sublet_trace_append(t, &parts[p]->v[i]);
    if (st != SUBLET_OK) {
        sublet_trace_free(t);
        return st == SUBLET_ERR_INVALID_ARGUMENT ? SUBLET_ERR_PARSE : st;
    }
    *out = t;
    return SUBLET_OK;
}

/* ---- extras ------------------------------------------------------------------------------ */

typedef struct str_ent {
    size_t off, len;
    uint64_t hash;
} str_ent;

typedef struct frame_ent {
    uint32_t file, name; /* string ids */
    int64_t line;
} frame_ent;

struct trace_extras {
    const sublet_trace *owner;
    sublet_trace_format format;
    int64_t device;
    uint64_t memory;
    char *settings;
    char *notice; /* what the reader warns about (the event log's torn tail) */
    /* strings: pool + entries + open-addressing index (0 = empty, else id+1) */
    char *pool;
    size_t pool_len, pool_cap;
    str_ent *strs;
    size_t nstr, strs_cap;
    uint32_t *str_idx;
    size_t str_idx_cap;
    /* stacks: frames[stack_off[id-1] .. stack_off[id]) */
    frame_ent *frames;
    size_t nframes, frames_cap;
    size_t *stack_off; /* nstacks + 1 entries */
    uint64_t *stack_hash;
    uint32_t nstacks;
    size_t stacks_cap;
    uint32_t *stack_idx;
    size_t stack_idx_cap;
    sublet_trace_frame *pub; /* built on attach (or by trace_extras_stack) */
    size_t pub_n;            /* frames pub was built for (trace_extras_stack) */
    const char *pub_pool;    /* the pool it points into */
};

trace_extras *trace_extras_new(void)
{
    trace_extras *x = calloc(1, sizeof *x);
    if (x)
        x->device = -1;
    return x;
}

void trace_extras_destroy(trace_extras *x)
{
    if (!x)
        return;
    free(x->settings);
    free(x->notice);
    free(x->pool);
    free(x->strs);
    free(x->str_idx);
    free(x->frames);
    free(x->stack_off);
    free(x->stack_hash);
    free(x->stack_idx);
    free(x->pub);
    free(x);
}

void trace_extras_set_format(trace_extras *x, sublet_trace_format f) { x->format = f; }
void trace_extras_set_device(trace_extras *x, int64_t device) { x->device = device; }
void trace_extras_set_memory(trace_extras *x, uint64_t bytes) { x->memory = bytes; }

sublet_status trace_extras_set_settings(trace_extras *x, const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        return SUBLET_ERR_NO_MEMORY;
    if (n)
        memcpy(c, s, n);
    c[n] = '\0';
    free(x->settings);
    x->settings = c;
    return SUBLET_OK;
}

sublet_status trace_extras_set_notice(trace_extras *x, const char *s)
{
    char *c = strdup(s);
    if (!c)
        return SUBLET_ERR_NO_MEMORY;
    free(x->notice);
    x->notice = c;
    return SUBLET_OK;
}

const char *trace_extras_notice(const trace_extras *x) { return x->notice; }

/* Grow *p (of *cap elements of size sz) to hold at least need elements. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / sz)
            return -1;
        nc *= 2;
    }
    void *n = realloc(*p, nc * sz);
    if (!n)
        return -1;
    *p = n;
    *cap = nc;
    return 0;
}

/* Rebuild an index table (ids+1 in open addressing) of `cap` slots. */
static int reindex(uint32_t **idx, size_t *idx_cap, size_t cap, const uint64_t *hashes,
                   const str_ent *strs, size_t n)
{
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = hashes ? hashes[i] : strs[i].hash;
        size_t j = (size_t)h & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = (uint32_t)(i + 1);
    }
    free(*idx);
    *idx = t;
    *idx_cap = cap;
    return 0;
}

static int intern_str(trace_extras *x, const char *s, size_t n, uint32_t *id)
{
    if (!s)
        n = 0;
    uint64_t h = hash_bytes(s, n, 0);
    if (x->str_idx_cap) {
        size_t m = x->str_idx_cap - 1;
        for (size_t j = (size_t)h & m; x->str_idx[j]; j = (j + 1) & m) {
            const str_ent *e = &x->strs[x->str_idx[j] - 1];
            if (e->hash == h && e->len == n && (n == 0 || !memcmp(x->pool + e->off, s, n))) {
                *id = x->str_idx[j] - 1;
                return 0;
            }
        }
    }
    if (x->nstr >= UINT32_MAX - 1 || n > SIZE_MAX - x->pool_len - 1)
        return -1;
    if (grow((void **)&x->pool, &x->pool_cap, x->pool_len + n + 1, 1) ||
        grow((void **)&x->strs, &x->strs_cap, x->nstr + 1, sizeof *x->strs))
        return -1;
    if (n)
        memcpy(x->pool + x->pool_len, s, n);
    x->pool[x->pool_len + n] = '\0';
    x->strs[x->nstr] = (str_ent){x->pool_len, n, h};
    x->pool_len += n + 1;
    *id = (uint32_t)x->nstr++;
    if (x->nstr * 2 > x->str_idx_cap) {
        size_t nc = x->str_idx_cap ? x->str_idx_cap * 2 : 64;
        while (x->nstr * 2 > nc)
            nc *= 2;
        if (reindex(&x->str_idx, &x->str_idx_cap, nc, NULL, x->strs, x->nstr)) {
            x->nstr--; /* keep the table consistent with the index */
            return -1;
        }
    } else {
        size_t m = x->str_idx_cap - 1, j = (size_t)h & m;
        while (x->str_idx[j])
            j = (j + 1) & m;
        x->str_idx[j] = *id + 1;
    }
    return 0;
}

sublet_status trace_extras_intern_stack(trace_extras *x, const trace_frame_in *f, size_t n,
                                        uint32_t *id)
{
    *id = 0;
    if (n == 0)
        return SUBLET_OK;
    /* Append the frames tentatively, then look for an equal stack. */
    size_t base = x->nframes;
    if (n > SIZE_MAX - base ||
        grow((void **)&x->frames, &x->frames_cap, base + n, sizeof *x->frames))
        return SUBLET_ERR_NO_MEMORY;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        frame_ent *e = &x->frames[base + i];
        if (intern_str(x, f[i].file, f[i].file_len, &e->file) ||
            intern_str(x, f[i].name, f[i].name_len, &e->name))
            return SUBLET_ERR_NO_MEMORY;
        e->line = f[i].line;
        h = mix64(h ^ e->file) + e->name;
        h = mix64(h ^ (uint64_t)e->line);
    }
    if (x->stack_idx_cap) {
        size_t m = x->stack_idx_cap - 1;
        for (size_t j = (size_t)h & m; x->stack_idx[j]; j = (j + 1) & m) {
            uint32_t s = x->stack_idx[j] - 1;
            size_t o = x->stack_off[s], len = x->stack_off[s + 1] - o;
            if (x->stack_hash[s] != h || len != n)
                continue;
            size_t i = 0;
            for (; i < n; i++) {
                const frame_ent *a = &x->frames[o + i], *b = &x->frames[base + i];
                if (a->file != b->file || a->name != b->name || a->line != b->line)
                    break;
            }
            if (i == n) {
                *id = s + 1; /* drop the tentative copy */
                return SUBLET_OK;
            }
        }
    }
    if (x->nstacks >= UINT32_MAX - 2 ||
        grow((void **)&x->stack_off, &x->stacks_cap, (size_t)x->nstacks + 2, sizeof(size_t)))
        return SUBLET_ERR_NO_MEMORY;
    size_t hcap = x->stacks_cap ? x->stacks_cap : 16;
    uint64_t *nh = realloc(x->stack_hash, hcap * sizeof *nh);
    if (!nh)
        return SUBLET_ERR_NO_MEMORY;
    x->stack_hash = nh;
    x->stack_off[x->nstacks] = base;
    x->stack_off[x->nstacks + 1] = base + n;
    x->stack_hash[x->nstacks] = h;
    uint32_t s = x->nstacks++;
    x->nframes = base + n;
    if ((size_t)x->nstacks * 2 > x->stack_idx_cap) {
        size_t nc = x->stack_idx_cap ? x->stack_idx_cap * 2 : 64;
        if (reindex(&x->stack_idx, &x->stack_idx_cap, nc, x->stack_hash, NULL, x->nstacks)) {
            x->nstacks--;
            x->nframes = base;
            return SUBLET_ERR_NO_MEMORY;
        }
    } else {
        size_t m = x->stack_idx_cap - 1, j = (size_t)h & m;
        while (x->stack_idx[j])
            j = (j + 1) & m;
        x->stack_idx[j] = s + 1;
    }
    *id = s + 1;
    return SUBLET_OK;
}

/* The extras belong to their trace (src/trace.c keeps the pointer and
 * destroys it in sublet_trace_free): no registry, no global state. */
sublet_status trace_extras_attach(const sublet_trace *t, trace_extras *x)
{
    if (!t || !x) {
        trace_extras_destroy(x);
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    if (x->nframes) {
        x->pub = malloc(x->nframes * sizeof *x->pub);
        if (!x->pub) {
            trace_extras_destroy(x);
            return SUBLET_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i < x->nframes; i++)
            x->pub[i] =
                (sublet_trace_frame){x->pool + x->strs[x->frames[i].file].off,
                                     x->pool + x->strs[x->frames[i].name].off, x->frames[i].line};
    }
    x->owner = t;
    trace_extras_destroy(sl_trace_swap_extras((sublet_trace *)t, x));
    return SUBLET_OK;
}

sublet_trace_format trace_extras_format(const trace_extras *x) { return x->format; }
int64_t trace_extras_device(const trace_extras *x) { return x->device; }
uint64_t trace_extras_memory(const trace_extras *x) { return x->memory; }
const char *trace_extras_settings(const trace_extras *x) { return x->settings; }
uint32_t trace_extras_stack_count(const trace_extras *x) { return x->nstacks; }

size_t trace_extras_stack(trace_extras *x, uint32_t id, const sublet_trace_frame **out)
{
    *out = NULL;
    if (!x || id < 1 || id > x->nstacks)
        return 0;
    if (x->pub_n != x->nframes || x->pub_pool != x->pool) {
        sublet_trace_frame *p = realloc(x->pub, (x->nframes ? x->nframes : 1) * sizeof *p);
        if (!p)
            return 0;
        x->pub = p;
        for (size_t i = 0; i < x->nframes; i++)
            p[i] = (sublet_trace_frame){x->pool + x->strs[x->frames[i].file].off,
                                        x->pool + x->strs[x->frames[i].name].off,
                                        x->frames[i].line};
        x->pub_n = x->nframes;
        x->pub_pool = x->pool;
    }
    *out = x->pub + x->stack_off[id - 1];
    return x->stack_off[id] - x->stack_off[id - 1];
}

void sublet_trace_extras_release(const sublet_trace *t)
{
    if (t)
        trace_extras_destroy(sl_trace_swap_extras((sublet_trace *)t, NULL));
}

/* Run `body` with x = the extras of t (NULL when none). */
#define WITH_EXTRAS(t, body)                                                                       \
    do {                                                                                           \
        const trace_extras *x = (t) ? sl_trace_extras(t) : NULL;                                   \
        body;                                                                                      \
    } while (0)

sublet_trace_format sublet_trace_source_format(const sublet_trace *t)
{
    sublet_trace_format f = SUBLET_FORMAT_UNKNOWN;
    WITH_EXTRAS(t, if (x) f = x->format);
    return f;
}

int64_t sublet_trace_device(const sublet_trace *t)
{
    int64_t d = -1;
    WITH_EXTRAS(t, if (x) d = x->device);
    return d;
}

const char *sublet_trace_settings(const sublet_trace *t)
{
    const char *s = NULL;
    WITH_EXTRAS(t, if (x) s = x->settings);
    return s;
}

const char *sublet_trace_notice(const sublet_trace *t)
{
    const char *s = NULL;
    WITH_EXTRAS(t, if (x) s = x->notice);
    return s;
}

uint64_t sublet_trace_device_memory(const sublet_trace *t)
{
    uint64_t m = 0;
    WITH_EXTRAS(t, if (x) m = x->memory);
    return m;
}

uint32_t sublet_trace_stack_count(const sublet_trace *t)
{
    uint32_t n = 0;
    WITH_EXTRAS(t, if (x) n = x->nstacks);
    return n;
}

size_t sublet_trace_stack(const sublet_trace *t, uint32_t id, const sublet_trace_frame **out)
{
    size_t n = 0;
    const sublet_trace_frame *f = NULL;
    WITH_EXTRAS(
        t, if (x && id >= 1 && id <= x->nstacks && x->pub) {
            f = x->pub + x->stack_off[id - 1];
            n = x->stack_off[id] - x->stack_off[id - 1];
        });
    if (out)
        *out = f;
    return n;
}

/* ---- detection ------------------------------------------------------------------------------ */

#define EVENTS_CSV_HEADER "seq,action,addr,size,stream,time_us"
#define RMM_CSV_HEADER "Thread,Time,Action,Pointer,Size,Stream"

/* The first line (BOM skipped, CR and trailing blanks dropped) equals h. */
static bool first_line_is(const uint8_t *p, size_t n, const char *h)
{
    if (n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) {
        p += 3;
        n -= 3;
    }
    const uint8_t *nl = memchr(p, '\n', n);
    size_t ln = nl ? (size_t)(nl - p) : n;
    while (ln && (p[ln - 1] == '\r' || p[ln - 1] == ' ' || p[ln - 1] == '\t'))
        ln--;
    return ln == strlen(h) && !memcmp(p, h, ln);
}

static bool contains(const uint8_t *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; n >= k && i <= n - k; i++) {
        const uint8_t *q = memchr(p + i, s[0], n - k - i + 1);
        if (!q)
            return false;
        i = (size_t)(q - p);
        if (!memcmp(q, s, k))
            return true;
    }
    return false;
}

/* Kind of the plain (not gzip) data: 'p' pickle, 'j' JSON, 'e' events CSV,
 * 'r' RMM CSV, 'l' event log, 0 unknown. */
static int sniff(const uint8_t *p, size_t n)
{
    if (n == 0)
        return 0;
    if (n >= 8 && memcmp(p, SL_LOG_MAGIC, 8) == 0)
        return 'l'; /* the event log (trace_log.c) */
    if (p[0] == 0x80 || p[0] == '(' || p[0] == '}' || p[0] == ']')
        return 'p'; /* PROTO (protocol 2+), or MARK / EMPTY_DICT / EMPTY_LIST */
    size_t i = (n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) ? 3 : 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    if (i < n && (p[i] == '{' || p[i] == '['))
        return 'j';
    if (first_line_is(p, n, EVENTS_CSV_HEADER) || first_line_is(p, n, EVENTS_CSV_HEADER ",pool"))
        return 'e';
    if (first_line_is(p, n, RMM_CSV_HEADER))
        return 'r';
    return 0;
}

/* Up to cap bytes of the start of a gzip stream (0 when it is corrupt). */
static size_t gunzip_head(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return 0;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    while (z.avail_out && len) {
        uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
        z.next_in = (Bytef *)(uintptr_t)buf;
        z.avail_in = chunk;
        int r = inflate(&z, Z_NO_FLUSH);
        size_t used = chunk - z.avail_in;
        buf += used;
        len -= used;
        if (r != Z_OK)
            break;
        if (used == 0)
            break;
    }
    size_t got = cap - z.avail_out;
    inflateEnd(&z);
    return got;
}

sublet_trace_format sublet_trace_detect(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!p)
        return SUBLET_FORMAT_UNKNOWN;
    enum { HEAD = 1 << 16 };
    uint8_t *head = NULL;
    if (sublet_is_gzip(p, len)) {
        head = malloc(HEAD);
        if (!head)
            return SUBLET_FORMAT_UNKNOWN;
        len = gunzip_head(p, len, head, HEAD);
        p = head;
    }
    sublet_trace_format f = SUBLET_FORMAT_UNKNOWN;
    switch (sniff(p, len)) {
    case 'l': f = SUBLET_FORMAT_EVENT_LOG; break;
    case 'p': f = SUBLET_FORMAT_SNAPSHOT_PICKLE; break;
    case 'e': f = SUBLET_FORMAT_EVENTS_CSV; break;
    case 'r': f = SUBLET_FORMAT_RMM_CSV; break;
    case 'j': {
        size_t look = len < HEAD ? len : HEAD;
        if (contains(p, look, "\"traceEvents\"") || contains(p, look, "\"ph\""))
            f = SUBLET_FORMAT_KINETO_JSON;
        else if (contains(p, look, "\"segments\"") || contains(p, look, "\"device_traces\"") ||
                 contains(p, look, "\"total_size\""))
            f = SUBLET_FORMAT_SNAPSHOT_JSON;
        break;
    }
    default: break;
    }
    free(head);
    return f;
}

/* ---- parsing -----------------------------------------------------------------------------------
 */

static sublet_status attach_plain(sublet_trace *t, sublet_trace_format f)
{
    trace_extras *x = trace_extras_new();
    if (!x)
        return SUBLET_ERR_NO_MEMORY;
    trace_extras_set_format(x, f);
    return trace_extras_attach(t, x);
}

/* A JSON root: which reader? */
static sublet_status parse_json_root(const pyval *root, const sublet_trace_load_options *opt,
                                     sublet_trace **out, char *err, size_t cap)
{
    if (pv_typeof(root) == PV_DICT) {
        if (pv_dict_get(root, "traceEvents"))
            return sublet_trace_from_kineto(root, opt, out, err, cap);
        if (pv_dict_get(root, "segments") || pv_dict_get(root, "device_traces"))
            return sublet_trace_from_snapshot(root, opt, SUBLET_FORMAT_SNAPSHOT_JSON, out, err,
                                              cap);
        sl_msg(err, cap,
                  "JSON: an object with none of the keys traceEvents (Kineto), segments or "
                  "device_traces (PyTorch snapshot): not a trace");
        return SUBLET_ERR_PARSE;
    }
    if (pv_typeof(root) == PV_LIST) {
        const pyval *first = pv_list_at(root, 0);
        if (pv_dict_get(first, "ph") || pv_dict_get(first, "args"))
            return sublet_trace_from_kineto(root, opt, out, err, cap);
        if (pv_dict_get(first, "blocks") || pv_dict_get(first, "total_size"))
            return sublet_trace_from_snapshot(root, opt, SUBLET_FORMAT_SNAPSHOT_JSON, out, err,
                                              cap);
        sl_msg(err, cap, "JSON: %s is neither a list of snapshot segments nor of trace events",
                  first ? "the top-level list" : "an empty top-level list");
        return SUBLET_ERR_PARSE;
    }
    sl_msg(err, cap, "JSON: the top-level value is a %s, not an object or a list",
              pv_type_name(pv_typeof(root)));
    return SUBLET_ERR_PARSE;
}

/* Parse a value tree (pickle or JSON) and hand it to its reader. */
static sublet_status parse_tree(const uint8_t *p, size_t n, bool json, bool inflated,
                                const sublet_trace_load_options *opt, sublet_trace **out, char *err,
                                size_t cap)
{
    pv_arena *a = pv_arena_create();
    if (!a) {
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    if (opt && opt->max_tree_bytes)
        pv_arena_set_limit(a, opt->max_tree_bytes);
    pyval *root = NULL;
    char why[400];
    why[0] = '\0';
    sublet_status st = json ? pv_json_parse(p, n, a, &root, why, sizeof why)
                            : pv_pickle_parse(p, n, a, &root, why, sizeof why);
    if (st != SUBLET_OK) {
        sl_msg(err, cap, "%s: %s%s", json ? "JSON" : "pickle", why,
                  inflated ? " (offset in the gunzipped data)" : "");
    } else if (json) {
        st = parse_json_root(root, opt, out, err, cap);
    } else {
        st = sublet_trace_from_snapshot(root, opt, SUBLET_FORMAT_SNAPSHOT_PICKLE, out, err, cap);
    }
    pv_arena_destroy(a);
    return st;
}

sublet_status sublet_trace_parse(const void *buf, size_t len, const sublet_trace_load_options *opt,
                                 sublet_trace **out, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!out || (!buf && len)) {
        sl_msg(err, cap, "invalid argument");
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    sl_inflated in;
    sublet_status st = sublet_gunzip_if_needed(buf ? buf : (const void *)"", len,
                                               opt ? opt->max_inflated : 0, &in, err, cap);
    if (st != SUBLET_OK)
        return st;
    const uint8_t *p = in.data;
    size_t n = in.len;
    uint8_t *owned = in.owned;
    sublet_trace_format f = SUBLET_FORMAT_UNKNOWN;
    switch (sniff(p, n)) {
    case 'p': st = parse_tree(p, n, false, owned != NULL, opt, out, err, cap); break;
    case 'j': st = parse_tree(p, n, true, owned != NULL, opt, out, err, cap); break;
    case 'e':
        f = SUBLET_FORMAT_EVENTS_CSV;
        st = sublet_trace_parse_csv((const char *)p, n, out, err, cap);
        break;
    case 'r': st = sublet_trace_parse_rmm((const char *)p, n, out, err, cap); break;
    case 'l': st = sublet_trace_parse_log(p, n, out, err, cap); break;
    default: {
        char shown[200];
        trace_show(p, n < 16 ? n : 16, shown, sizeof shown);
        sl_msg(err, cap, "unrecognised trace format (first bytes: '%s'%s)", shown,
                  owned ? ", after gunzip" : "");
        st = SUBLET_ERR_PARSE;
    }
    }
    free(owned);
    if (st == SUBLET_OK && f != SUBLET_FORMAT_UNKNOWN) {
        st = attach_plain(*out, f);
        if (st != SUBLET_OK) {
            sublet_trace_free(*out);
            *out = NULL;
            sl_msg(err, cap, "out of memory");
        }
    }
    return st;
}

sublet_status sublet_trace_load(const char *path, const sublet_trace_load_options *opt,
                                sublet_trace **out, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!path || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    uint8_t *buf;
    size_t n;
    sublet_status st = sl_read_file(path, 0, &buf, &n, err, cap);
    if (st != SUBLET_OK)
        return st;
    char inner[512];
    st = sublet_trace_parse(buf, n, opt, out, inner, sizeof inner);
    free(buf);
    if (st != SUBLET_OK)
        sl_msg(err, cap, "%s: %s", path, inner);
    return st;
}
