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

#include "formats/json_codec.h"
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

/* The rows of memory event m: an alloc, or a free's free_requested and
 * free_completed (*n of them). */
static void kmem_rows(const kmem *m, sublet_trace_event ev[2], size_t *n)
{
    memset(ev, 0, 2 * sizeof *ev); /* padding included: rows are compared as bytes */
    ev[0].addr = m->addr;
    ev[0].line = m->pos + 1;
    if (m->has_ts && m->ts >= 0 && m->ts < 1.8e19) {
        ev[0].time_us = (uint64_t)m->ts;
        ev[0].flags = SUBLET_TRACE_HAS_TIME;
    }
    if (m->bytes >= 0) {
        ev[0].kind = SUBLET_ACT_ALLOC;
        ev[0].size = (uint64_t)m->bytes;
        *n = 1;
        return;
    }
    ev[0].size = (uint64_t)(-m->bytes);
    ev[0].kind = SUBLET_ACT_FREE_REQUESTED;
    memcpy(&ev[1], &ev[0], sizeof *ev);
    ev[1].kind = SUBLET_ACT_FREE_COMPLETED;
    *n = 2;
}

/* The live addresses after memory event m (in sorted order); a free of an
 * address not live is an allocation made before the window: its pre_alloc
 * row into pre.  0, or -1 when out of memory. */
static int kmem_live(u64set *live, const kmem *m, trace_vec *pre)
{
    if (m->bytes >= 0)
        return u64set_add(live, m->addr) ? -1 : 0;
    if (u64set_remove(live, m->addr))
        return 0;
    sublet_trace_event p;
    memset(&p, 0, sizeof p);
    p.addr = m->addr;
    p.size = (uint64_t)(-m->bytes);
    return trace_vec_push(pre, &p) ? -1 : 0;
}

/* totalGlobalMem of device dev in deviceProperties (a list; 0: not given). */
static uint64_t total_memory(const pyval *props, int64_t dev)
{
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
        sublet_trace_event ev[2];
        size_t nev;
        kmem_rows(&m[i], ev, &nev);
        if (kmem_live(&live, &m[i], &pre_alloc) != 0)
            st = SUBLET_ERR_NO_MEMORY;
        for (size_t j = 0; j < nev && !st; j++)
            if (trace_vec_push(&events, &ev[j]))
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
            trace_extras_set_memory(x, total_memory(pv_dict_get(root, "deviceProperties"), dev));
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

/* ---- the stream ------------------------------------------------------------------------------
 * Two passes over the file (trace_stream.c).  The document is split into its
 * top-level values and the elements of traceEvents, each parsed alone by the
 * JSON parser the whole reader uses, and each "[memory]" element read by
 * read_mem, so that the values are the same; the file is never held whole.
 * The whole reader sorts the memory events by (ts, Ev Idx, position): here a
 * heap of up to KWINDOW events per device puts them in that order, which
 * holds as long as no event comes after one it sorts before by more than
 * KWINDOW events.  The first pass checks that (for every device), counts the
 * events of each device, finds the prelude (the frees of addresses not live)
 * and parses every value; the second hands out the chosen device's events.
 * Anything the first pass cannot follow (a syntax error anywhere, an element
 * the whole reader would refuse, events too far out of order, a top-level
 * list, more than KDEVICES devices) makes open return SUBLET_ERR_UNSUPPORTED:
 * the stream then reads the file whole, with the whole reader's result or
 * error. */

#define KWINDOW 65536
#define KDEVICES 16

enum { J_ROOT, J_MEMBERS_FIRST, J_MEMBERS, J_EVENTS_FIRST, J_EVENTS, J_END };

typedef struct kheap {
    kmem *v;
    size_t n, cap;
} kheap;

typedef struct kdev {
    int64_t id;
    uint64_t count;
    kheap h;
    kmem last; /* the last event taken out of the heap */
    bool has_last;
    u64set live;
    trace_vec pre;
} kdev;

struct sl_kineto {
    int state;
    bool seen_events;
    size_t index; /* the next element's index in traceEvents */
    kdev dev[KDEVICES];
    size_t ndev;
    int64_t chosen;
    bool second; /* the second pass: only the chosen device's events */
    bool done;   /* the second pass met the document's end */
    pv_arena *props_arena;
    const pyval *props;
    sl_held held; /* a free's free_completed, for the next read */
};

static int heap_less(const kmem *a, const kmem *b) { return cmp_kmem(a, b) < 0; }

static int heap_push(kheap *h, const kmem *m)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        kmem *g = realloc(h->v, nc * sizeof *g);
        if (!g)
            return -1;
        h->v = g;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i && heap_less(m, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = *m;
    return 0;
}

static kmem heap_pop(kheap *h)
{
    kmem top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && heap_less(&h->v[c + 1], &h->v[c]))
            c++;
        if (!heap_less(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

void sl_kineto_free(sl_kineto *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->ndev; i++) {
        free(k->dev[i].h.v);
        u64set_free(&k->dev[i].live);
        trace_vec_free(&k->dev[i].pre);
    }
    pv_arena_destroy(k->props_arena);
    free(k);
}

/* ---- splitting the document */

/* The next byte that is not JSON whitespace, not consumed: 1, 0 at the end,
 * -1 on a read error. */
static int jpeek(sl_src *src, uint8_t *c)
{
    for (;;) {
        if (sl_src_fill(src, 1) != 0)
            return -1;
        if (src->end == src->beg)
            return 0;
        uint8_t b = src->buf[src->beg];
        if (b != ' ' && b != '\t' && b != '\n' && b != '\r') {
            *c = b;
            return 1;
        }
        sl_src_take(src, 1);
    }
}

/* The extent of the JSON value at src->beg (not consumed; the buffer grows
 * to hold it), nested at `above` levels in the document: 1 with *len, 0 when
 * the stream cannot follow it (the input ends inside it, a scalar that does
 * not start as a JSON one: the parser of a lone value would also take a
 * byte-order mark or a gzip stream there; nesting the whole parse would
 * refuse, with a margin), -1 on a read error.  Only its extent: the parser
 * checks the rest. */
static int jspan(sl_src *src, size_t above, size_t *len)
{
    size_t i = 0, depth = 0;
    bool str = false, esc = false;
    uint8_t first = src->buf[src->beg];
    bool scalar = first != '{' && first != '[' && first != '"';
    if (scalar && (!first || !strchr("-0123456789tfnNI", first)))
        return 0;
    for (;;) {
        size_t avail = src->end - src->beg;
        const uint8_t *b = src->buf + src->beg;
        for (; i < avail; i++) {
            uint8_t c = b[i];
            if (scalar) {
                if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' ||
                    c == '\r') {
                    *len = i;
                    return 1;
                }
            } else if (str) {
                if (esc)
                    esc = false;
                else if (c == '\\')
                    esc = true;
                else if (c == '"') {
                    str = false;
                    if (depth == 0) {
                        *len = i + 1;
                        return 1;
                    }
                }
            } else if (c == '"') {
                str = true;
            } else if (c == '{' || c == '[') {
                if (++depth + above + 2 > PV_MAX_DEPTH)
                    return 0;
            } else if (c == '}' || c == ']') {
                if (depth == 0)
                    return 0; /* (a closing bracket where a value starts) */
                if (--depth == 0) {
                    *len = i + 1;
                    return 1;
                }
            }
        }
        if (src->eof)
            return 0;
        if (sl_src_fill(src, avail + src->chunk) != 0)
            return -1;
    }
}

/* Parse the value src->buf[beg, beg + len) alone (a is its arena). */
static sublet_status jparse(sl_src *src, size_t len, pv_arena *a, pyval **out)
{
    char why[200];
    return pv_json_parse(src->buf + src->beg, len, a, out, why, sizeof why);
}

/* next_member's "go on reading": the state has moved. */
#define J_GO_ON 2

/* A member's value other than traceEvents' (src at it): parsed, and kept
 * when it is the deviceProperties.  J_GO_ON, else -1 (why) or -2. */
static int member_value(sl_kineto *k, sl_src *src, bool is_props, size_t *len,
                        const char **why)
{
    int r;
    if ((r = jspan(src, 1, len)) <= 0)
        return r < 0 ? -2 : (*why = "a member's value", -1);
    pv_arena *a = pv_arena_create();
    pyval *v = NULL;
    if (!a || jparse(src, *len, a, &v) != SUBLET_OK) {
        pv_arena_destroy(a);
        *why = "a member's value does not parse";
        return -1;
    }
    sl_src_take(src, *len);
    if (is_props && !k->second) { /* (a second one wins, as in a dict) */
        pv_arena_destroy(k->props_arena);
        k->props_arena = a;
        k->props = v;
    } else {
        pv_arena_destroy(a);
    }
    k->state = J_MEMBERS;
    return J_GO_ON;
}

/* The top-level object's next step, at c: its end, or the next member
 * (traceEvents entered, any other value read past).  J_GO_ON, else -1
 * (why) or -2. */
static int next_member(sl_kineto *k, sl_src *src, uint8_t c, size_t *len, const char **why)
{
    int r = 1; /* (c was peeked) */
    if (c == '}') {
        sl_src_take(src, 1);
        k->state = J_END;
        return J_GO_ON;
    }
    if (k->state == J_MEMBERS) {
        if (c != ',') {
            *why = "no comma between members";
            return -1;
        }
        sl_src_take(src, 1);
        if ((r = jpeek(src, &c)) <= 0)
            return r < 0 ? -2 : (*why = "the document ends early", -1);
    }
    if (c != '"' || (r = jspan(src, 1, len)) <= 0) {
        *why = "a member name";
        return r < 0 ? -2 : -1;
    }
    const uint8_t *key = src->buf + src->beg + 1;
    size_t kn = *len - 2;
    bool is_events = kn == 11 && !memcmp(key, "traceEvents", 11);
    bool is_props = kn == 16 && !memcmp(key, "deviceProperties", 16);
    pv_arena *ka = pv_arena_create();
    pyval *kv = NULL;
    int bad = !ka || jparse(src, *len, ka, &kv) != SUBLET_OK; /* (its text checked) */
    pv_arena_destroy(ka);
    if (bad || memchr(key, '\\', kn)) {
        *why = bad ? "a member name does not parse" : "an escaped member name";
        return -1;
    }
    sl_src_take(src, *len);
    if ((r = jpeek(src, &c)) <= 0 || c != ':')
        return r < 0 ? -2 : (*why = "no colon after a member name", -1);
    sl_src_take(src, 1);
    if ((r = jpeek(src, &c)) <= 0)
        return r < 0 ? -2 : (*why = "the document ends early", -1);
    if (!is_events)
        return member_value(k, src, is_props, len, why);
    if (k->seen_events || c != '[') {
        *why = k->seen_events ? "traceEvents twice" : "traceEvents not a list";
        return -1;
    }
    k->seen_events = true;
    sl_src_take(src, 1);
    k->state = J_EVENTS_FIRST;
    return J_GO_ON;
}

/* The next element of traceEvents: 1 with its extent (*len bytes at
 * src->beg; the caller takes them), 0 after the document's end, -1 when it
 * cannot be followed (why), -2 on a read error. */
static int next_element(sl_kineto *k, sl_src *src, size_t *len, const char **why)
{
    uint8_t c;
    int r;
    for (;;) {
        if ((r = jpeek(src, &c)) < 0)
            return -2;
        if (k->state == J_END) {
            if (r != 0) {
                *why = "text after the document";
                return -1;
            }
            if (!k->seen_events) {
                *why = "no traceEvents";
                return -1;
            }
            return 0;
        }
        if (r == 0) {
            *why = "the document ends early";
            return -1;
        }
        switch (k->state) {
        case J_ROOT:
            if (c != '{') {
                *why = "the top-level value is not an object";
                return -1;
            }
            sl_src_take(src, 1);
            k->state = J_MEMBERS_FIRST;
            continue;
        case J_MEMBERS_FIRST:
        case J_MEMBERS:
            if ((r = next_member(k, src, c, len, why)) != J_GO_ON)
                return r;
            continue;
        case J_EVENTS_FIRST:
        case J_EVENTS:
            if (c == ']') {
                sl_src_take(src, 1);
                k->state = J_MEMBERS;
                continue;
            }
            if (k->state == J_EVENTS) {
                if (c != ',') {
                    *why = "no comma between events";
                    return -1;
                }
                sl_src_take(src, 1);
                if ((r = jpeek(src, &c)) <= 0)
                    return r < 0 ? -2 : (*why = "the document ends early", -1);
            }
            if (c != '{' || (r = jspan(src, 2, len)) <= 0) {
                *why = "an event that is not an object";
                return r < 0 ? -2 : -1;
            }
            k->state = J_EVENTS;
            return 1;
        default:
            *why = "internal";
            return -1;
        }
    }
}

/* The memory event of the element at src->beg (its extent len), if it is a
 * CUDA one: 1 with *m, 0 when it is not, -1 when the whole reader would
 * refuse it (why). */
static int element_mem(sl_kineto *k, sl_src *src, size_t len, kmem *m, const char **why)
{
    size_t i = k->index++;
    pv_arena *a = pv_arena_create();
    pyval *e = NULL;
    if (!a || jparse(src, len, a, &e) != SUBLET_OK) {
        pv_arena_destroy(a);
        *why = "an event does not parse";
        return -1;
    }
    int r = 0;
    if (pv_str_eq(pv_dict_get(e, "name"), "[memory]")) {
        bool keep;
        char err[200];
        if (read_mem(e, i, m, &keep, err, sizeof err) != SUBLET_OK) {
            *why = "a memory event the whole reader refuses";
            r = -1;
        } else {
            r = keep;
        }
    }
    pv_arena_destroy(a);
    return r;
}

static kdev *device_of(sl_kineto *k, int64_t id)
{
    for (size_t i = 0; i < k->ndev; i++)
        if (k->dev[i].id == id)
            return &k->dev[i];
    if (k->ndev == KDEVICES)
        return NULL;
    kdev *d = &k->dev[k->ndev++];
    d->id = id;
    return d;
}

/* First pass: an event of device d leaves the heap (in order). */
static int first_take(kdev *d, const kmem *m)
{
    d->last = *m;
    d->has_last = true;
    return kmem_live(&d->live, m, &d->pre);
}

sublet_status sl_kineto_stream_open(sl_src *src, const sublet_trace_load_options *opt,
                                    trace_vec *pre, int64_t *device, uint64_t *memory,
                                    sl_kineto **out, char *err, size_t cap)
{
    *out = NULL;
    sl_kineto *k = calloc(1, sizeof *k);
    if (!k) {
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    const char *why = NULL;
    sublet_status st = SUBLET_OK;
    size_t len;
    int r;
    while (st == SUBLET_OK && (r = next_element(k, src, &len, &why)) == 1) {
        kmem m;
        int got = element_mem(k, src, len, &m, &why);
        sl_src_take(src, len);
        if (got < 0) {
            st = SUBLET_ERR_UNSUPPORTED;
            break;
        }
        if (!got)
            continue;
        kdev *d = device_of(k, m.device);
        if (!d || (d->has_last && cmp_kmem(&m, &d->last) < 0)) {
            why = d ? "memory events out of order by more than the window" : "too many devices";
            st = SUBLET_ERR_UNSUPPORTED;
            break;
        }
        d->count++;
        if (heap_push(&d->h, &m) != 0)
            st = SUBLET_ERR_NO_MEMORY;
        if (st == SUBLET_OK && d->h.n > KWINDOW) {
            kmem t = heap_pop(&d->h);
            if (first_take(d, &t) != 0)
                st = SUBLET_ERR_NO_MEMORY;
        }
    }
    if (st == SUBLET_OK && r == -2)
        st = SUBLET_ERR_IO;
    else if (st == SUBLET_OK && r == -1)
        st = SUBLET_ERR_UNSUPPORTED;
    for (size_t i = 0; st == SUBLET_OK && i < k->ndev; i++)
        while (st == SUBLET_OK && k->dev[i].h.n) {
            kmem t = heap_pop(&k->dev[i].h);
            if (first_take(&k->dev[i], &t) != 0)
                st = SUBLET_ERR_NO_MEMORY;
        }
    if (st != SUBLET_OK) {
        if (st == SUBLET_ERR_IO)
            sl_msg(err, cap, "%s", src->ioerr[0] ? src->ioerr : "out of memory");
        else
            sl_msg(err, cap, "%s", st == SUBLET_ERR_NO_MEMORY ? "out of memory" : why);
        sl_kineto_free(k);
        return st;
    }
    /* the device: the one asked for, else the one with the most events (ties:
     * the lowest id; none: 0) */
    int64_t dev = 0;
    uint64_t best = 0;
    for (size_t i = 0; i < k->ndev; i++)
        if (k->dev[i].count > best || (k->dev[i].count == best && best && k->dev[i].id < dev)) {
            best = k->dev[i].count;
            dev = k->dev[i].id;
        }
    if (opt && opt->pick_device)
        dev = opt->device;
    k->chosen = dev;
    kdev *d = device_of(k, dev);
    if (d) {
        trace_sort_pre(&d->pre, SUBLET_TRACE_PRE_ALLOC);
        *pre = d->pre;
        d->pre = (trace_vec){0};
    }
    *device = dev;
    *memory = k->props ? total_memory(k->props, dev) : 0;
    /* the second pass, from the start */
    for (size_t i = 0; i < k->ndev; i++) {
        k->dev[i].h.n = 0;
        k->dev[i].has_last = false;
        u64set_free(&k->dev[i].live);
        k->dev[i].live = (u64set){0};
    }
    k->state = J_ROOT;
    k->seen_events = false;
    k->index = 0;
    k->second = true;
    if (sl_src_rewind(src) != 0) {
        sl_msg(err, cap, "%s", src->ioerr);
        sl_kineto_free(k);
        return SUBLET_ERR_IO;
    }
    *out = k;
    return SUBLET_OK;
}

sublet_status sl_kineto_stream_read(sl_kineto *k, sl_src *src, sublet_trace_event *ev, size_t cap,
                                    size_t *n, char *err, size_t ecap)
{
    size_t got = sl_held_out(&k->held, ev, cap);
    kdev *d = device_of(k, k->chosen);
    sublet_status st = SUBLET_OK;
    while (got < cap && st == SUBLET_OK) {
        kmem t;
        if (d && (d->h.n > KWINDOW || (k->done && d->h.n))) {
            t = heap_pop(&d->h);
        } else if (k->done) {
            break; /* the end */
        } else {
            size_t len;
            const char *why = NULL;
            int r = next_element(k, src, &len, &why);
            if (r == 1) {
                kmem m;
                int mem = element_mem(k, src, len, &m, &why);
                sl_src_take(src, len);
                if (mem < 0) {
                    sl_msg(err, ecap, "the file changed between its two readings: %s", why);
                    st = SUBLET_ERR_PARSE;
                } else if (mem && d && m.device == k->chosen && heap_push(&d->h, &m) != 0) {
                    sl_msg(err, ecap, "out of memory");
                    st = SUBLET_ERR_NO_MEMORY;
                }
            } else if (r == 0) {
                k->done = true; /* what the heap holds is the rest */
            } else if (r == -2) {
                sl_msg(err, ecap, "%s", src->ioerr[0] ? src->ioerr : "out of memory");
                st = src->ioerr[0] ? SUBLET_ERR_IO : SUBLET_ERR_NO_MEMORY;
            } else {
                sl_msg(err, ecap, "the file changed between its two readings: %s", why);
                st = SUBLET_ERR_PARSE;
            }
            continue;
        }
        sublet_trace_event two[2];
        size_t m;
        kmem_rows(&t, two, &m);
        sl_rows_out(&k->held, two, m, ev, cap, &got);
    }
    *n = got;
    return st;
}
