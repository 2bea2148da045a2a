/* sublet — pickle writer: protocol 4, memory_viz's opcode subset, output
 * identical to CPython's pickle.dumps(obj, 4) for the same object graph.
 * See pickle.h.
 *
 * CPython details reproduced here:
 *  - the memo is keyed by object identity (here: node address); str, bytes,
 *    list, dict and non-empty tuples are memoized (MEMOIZE), a repeat is a
 *    BINGET (< 256) or LONG_BINGET;
 *  - a list of one item is `item APPEND`; otherwise MARK, up to 1000 items,
 *    APPENDS per batch.  A dict of one item is `k v SETITEM`; otherwise MARK,
 *    up to 1000 pairs, SETITEMS, repeated while a batch was full (so a dict
 *    of exactly 1000·k items ends with an empty MARK SETITEMS);
 *  - tuples of 1-3 items use TUPLE1-3, longer ones MARK ... TUPLE, and are
 *    memoized after they are built; the empty tuple is EMPTY_TUPLE;
 *  - ints: BININT1 (0..255), BININT2 (..65535), BININT (int32), else LONG1
 *    with the minimal two's complement bytes;
 *  - framing: before each value is saved, a frame that reached 64 KiB is
 *    closed; a frame under 4 bytes gets no FRAME header; a str of 64 KiB or
 *    more is written outside any frame. */
#include "formats/pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"

#define FRAME_TARGET ((size_t)64 << 10)
#define FRAME_HDR 9
#define BATCH 1000
#define NO_FRAME SIZE_MAX

typedef struct went {
    const pyval *key; /* NULL = empty */
    uint32_t hash;
    uint32_t idx;
} went;

typedef struct wmap {
    went *e;
    size_t cap, n;
} wmap;

typedef struct wframe {
    const pyval *v;
    size_t i;      /* next slot (dict: 2 per pair) */
    size_t closed; /* item count at which the last batch was closed */
} wframe;

typedef struct wr {
    pv_buf *out;
    unsigned flags;
    bool framing;
    size_t frame_start;
    wmap ids, strs;
    uint32_t memo_n;
    wframe st[PV_MAX_DEPTH + 1];
    size_t sp;
    sublet_status bad;
    char *err;
    size_t cap;
} wr;

static void wfail(wr *w, sublet_status st, const char *fmt, ...) {
    if (w->bad)
        return;
    w->bad = st;
    va_list ap;
    va_start(ap, fmt);
    sl_vmsg(w->err, w->cap, fmt, ap);
    va_end(ap);
}

/* ---- output with framing ------------------------------------------------------ */
static void put_raw(wr *w, const void *p, size_t n) {
    if (w->bad)
        return;
    if (pv_buf_append(w->out, p, n))
        wfail(w, SUBLET_ERR_NO_MEMORY, "out of memory");
}

static void put(wr *w, const void *p, size_t n) {
    if (w->framing && w->frame_start == NO_FRAME && !w->bad) {
        w->frame_start = w->out->len;
        static const uint8_t zero[FRAME_HDR];
        put_raw(w, zero, FRAME_HDR);
    }
    put_raw(w, p, n);
}

static void put1(wr *w, uint8_t b) {
    pv_buf *o = w->out;
    if (w->frame_start != NO_FRAME && o->len < o->cap) { /* fast path */
        o->data[o->len++] = b;
        return;
    }
    put(w, &b, 1);
}

static void commit_frame(wr *w) {
    if (w->frame_start == NO_FRAME || w->bad)
        return;
    uint8_t *f = w->out->data + w->frame_start;
    size_t payload = w->out->len - w->frame_start - FRAME_HDR;
    if (payload >= 4) {
        f[0] = 0x95;
        for (int k = 0; k < 8; k++)
            f[1 + k] = (uint8_t)((uint64_t)payload >> (8 * k));
    } else {
        memmove(f, f + FRAME_HDR, payload);
        w->out->len -= FRAME_HDR;
    }
    w->frame_start = NO_FRAME;
}

/* ---- memo -------------------------------------------------------------------------- */
static uint32_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static uint32_t str_hash(const pyval *v) {
    uint64_t h = 0xcbf29ce484222325ULL ^ v->n;
    for (size_t k = 0; k < v->n; k++)
        h = (h ^ (uint8_t)v->u.s[k]) * 0x100000001b3ULL;
    return (uint32_t)(h ^ (h >> 32));
}

static bool same_str(const pyval *a, const pyval *b) {
    return a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0;
}

/* Index in the map, or UINT32_MAX. */
static uint32_t map_get(const wmap *m, const pyval *key, uint32_t h, bool by_content) {
    if (!m->cap)
        return UINT32_MAX;
    size_t mask = m->cap - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        const went *e = &m->e[s];
        if (!e->key)
            return UINT32_MAX;
        if (e->key == key || (by_content && e->hash == h && same_str(e->key, key)))
            return e->idx;
    }
}

static bool map_put(wmap *m, const pyval *key, uint32_t h, uint32_t idx) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        went *ne = calloc(nc, sizeof *ne);
        if (!ne)
            return false;
        for (size_t k = 0; k < m->cap; k++) {
            if (!m->e[k].key)
                continue;
            size_t s = m->e[k].hash & (nc - 1);
            while (ne[s].key)
                s = (s + 1) & (nc - 1);
            ne[s] = m->e[k];
        }
        free(m->e);
        m->e = ne;
        m->cap = nc;
    }
    size_t s = h & (m->cap - 1);
    while (m->e[s].key)
        s = (s + 1) & (m->cap - 1);
    m->e[s] = (went){key, h, idx};
    m->n++;
    return true;
}

static void memoize(wr *w, const pyval *v) {
    if (w->flags & PV_PICKLE_NO_MEMO)
        return;
    if (w->memo_n == UINT32_MAX) {
        wfail(w, SUBLET_ERR_UNSUPPORTED, "more than %u memoized values", UINT32_MAX - 1);
        return;
    }
    put1(w, 0x94); /* MEMOIZE */
    bool ok = map_put(&w->ids, v, ptr_hash(v), w->memo_n);
    if (ok && (w->flags & PV_PICKLE_DEDUP_STR) && v->type == PV_STR &&
        map_get(&w->strs, v, str_hash(v), true) == UINT32_MAX)
        ok = map_put(&w->strs, v, str_hash(v), w->memo_n);
    if (!ok)
        wfail(w, SUBLET_ERR_NO_MEMORY, "out of memory");
    w->memo_n++;
}

/* A memoized node already written: emit BINGET/LONG_BINGET and return true. */
static bool memo_ref(wr *w, const pyval *v) {
    if (w->flags & PV_PICKLE_NO_MEMO)
        return false;
    uint32_t idx = map_get(&w->ids, v, ptr_hash(v), false);
    if (idx == UINT32_MAX && (w->flags & PV_PICKLE_DEDUP_STR) && v->type == PV_STR)
        idx = map_get(&w->strs, v, str_hash(v), true);
    if (idx == UINT32_MAX)
        return false;
    if (idx < 256) {
        uint8_t b[2] = {'h', (uint8_t)idx};
        put(w, b, 2);
    } else {
        uint8_t b[5] = {'j', (uint8_t)idx, (uint8_t)(idx >> 8), (uint8_t)(idx >> 16),
                        (uint8_t)(idx >> 24)};
        put(w, b, 5);
    }
    return true;
}

/* ---- scalars ------------------------------------------------------------------------ */
static void put_le(wr *w, uint8_t op, uint64_t v, unsigned n) {
    uint8_t b[9];
    b[0] = op;
    for (unsigned k = 0; k < n; k++)
        b[1 + k] = (uint8_t)(v >> (8 * k));
    put(w, b, 1 + n);
}

/* LONG1 of a two's complement value given as nb sign-extended bytes. */
static void put_long1(wr *w, const uint8_t *b, size_t nb, bool neg) {
    if (neg && nb > 1 && b[nb - 1] == 0xff && (b[nb - 2] & 0x80))
        nb--;
    if (nb > 255) {
        wfail(w, SUBLET_ERR_UNSUPPORTED,
              "an int of %zu bytes needs LONG4, which memory_viz cannot read", nb);
        return;
    }
    uint8_t h[2] = {0x8a, (uint8_t)nb};
    put(w, h, 2);
    put(w, b, nb);
}

static unsigned bitlen64(uint64_t x) {
    unsigned n = 0;
    while (x) {
        n++;
        x >>= 1;
    }
    return n;
}

static void put_int(wr *w, const pyval *v) {
    if (v->flags & PV_F_UINT64) {
        uint8_t b[9];
        for (int k = 0; k < 8; k++)
            b[k] = (uint8_t)(v->u.u >> (8 * k));
        b[8] = 0;
        put_long1(w, b, 9, false);
        return;
    }
    int64_t x = v->u.i;
    if (x >= 0 && x <= 0xff) {
        put_le(w, 'K', (uint64_t)x, 1);
    } else if (x >= 0 && x <= 0xffff) {
        put_le(w, 'M', (uint64_t)x, 2);
    } else if (x >= INT32_MIN && x <= INT32_MAX) {
        put_le(w, 'J', (uint64_t)x, 4);
    } else {
        uint64_t mag = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
        size_t nb = bitlen64(mag) / 8 + 1;
        uint8_t b[9];
        for (int k = 0; k < 9; k++)
            b[k] = k < 8 ? (uint8_t)((uint64_t)x >> (8 * k)) : (x < 0 ? 0xff : 0);
        put_long1(w, b, nb, x < 0);
    }
}

static void put_bigint(wr *w, const pyval *v) {
    const char *s = v->u.s;
    size_t n = v->n;
    bool neg = n && s[0] == '-';
    if (neg)
        s++, n--;
    if (n > 620) { /* 10^620 > 2^2047: more than 255 bytes, no need to convert */
        wfail(w, SUBLET_ERR_UNSUPPORTED,
              "an int of %zu digits needs LONG4, which memory_viz cannot read", n);
        return;
    }
    size_t cap = n / 2 + 2, len = 0;
    uint8_t *mag = calloc(cap, 1);
    if (!mag) {
        wfail(w, SUBLET_ERR_NO_MEMORY, "out of memory");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        unsigned carry = (unsigned)(s[k] - '0');
        for (size_t j = 0; j < len || carry; j++) {
            unsigned t = (j < len ? mag[j] * 10u : 0u) + carry;
            mag[j] = (uint8_t)t;
            carry = t >> 8;
            if (j >= len)
                len = j + 1;
        }
    }
    unsigned top = len ? bitlen64(mag[len - 1]) : 0;
    size_t bits = len ? (len - 1) * 8 + top : 0;
    size_t nb = bits / 8 + 1;
    if (nb > cap)
        nb = cap; /* cannot happen: cap > len */
    if (neg) {
        unsigned carry = 1;
        for (size_t k = 0; k < nb; k++) {
            unsigned t = (uint8_t)~mag[k] + carry;
            mag[k] = (uint8_t)t;
            carry = t >> 8;
        }
    }
    put_long1(w, mag, nb, neg);
    free(mag);
}

static void put_float(wr *w, double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    uint8_t b[9];
    b[0] = 'G';
    for (int k = 0; k < 8; k++)
        b[1 + k] = (uint8_t)(bits >> (56 - 8 * k));
    put(w, b, 9);
}

/* str or bytes payload with its length header. */
static void put_blob(wr *w, const pyval *v) {
    bool str = v->type == PV_STR;
    size_t n = v->n;
    if (n > 0xffffffffu) {
        wfail(w, SUBLET_ERR_UNSUPPORTED, "a %s of %zu bytes needs an 8-byte length opcode",
              str ? "str" : "bytes", n);
        return;
    }
    if (n <= 0xff) {
        uint8_t h[2] = {str ? 0x8c : 'C', (uint8_t)n};
        put(w, h, 2);
        put(w, v->u.s, n);
    } else {
        uint8_t h[5] = {str ? 'X' : 'B', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                        (uint8_t)(n >> 24)};
        if (n >= FRAME_TARGET && w->framing) { /* large payloads go outside frames */
            commit_frame(w);
            put_raw(w, h, 5);
            put_raw(w, v->u.s, n);
        } else {
            put(w, h, 5);
            put(w, v->u.s, n);
        }
    }
    memoize(w, v);
}

/* ---- values --------------------------------------------------------------------------- */
static void push_frame(wr *w, const pyval *v) {
    if (w->sp >= PV_MAX_DEPTH) {
        wfail(w, SUBLET_ERR_UNSUPPORTED,
              "containers nested deeper than %d (or a recursive structure)", PV_MAX_DEPTH);
        return;
    }
    w->st[w->sp++] = (wframe){v, 0, 0};
}

static void save(wr *w, const pyval *v) {
    if (w->bad)
        return;
    if (!v) {
        wfail(w, SUBLET_ERR_INVALID_ARGUMENT, "a NULL value in the tree");
        return;
    }
    if (w->frame_start != NO_FRAME && w->out->len - w->frame_start - FRAME_HDR >= FRAME_TARGET)
        commit_frame(w);
    switch (v->type) {
    case PV_NONE: put1(w, 'N'); return;
    case PV_BOOL: put1(w, v->u.i ? 0x88 : 0x89); return;
    case PV_INT: put_int(w, v); return;
    case PV_BIGINT: put_bigint(w, v); return;
    case PV_FLOAT: put_float(w, v->u.f); return;
    default: break;
    }
    if (!(v->type == PV_TUPLE && v->n == 0) && memo_ref(w, v))
        return;
    if (v->type >= PV_LIST && w->sp >= PV_MAX_DEPTH) { /* empty ones count too */
        push_frame(w, v);
        return;
    }
    switch (v->type) {
    case PV_STR: put_blob(w, v); return;
    case PV_BYTES:
        if (!(w->flags & PV_PICKLE_ALLOW_BYTES)) {
            wfail(w, SUBLET_ERR_UNSUPPORTED,
                  "a bytes value cannot be written: memory_viz reads no bytes opcode");
            return;
        }
        put_blob(w, v);
        return;
    case PV_LIST:
    case PV_DICT:
        put1(w, v->type == PV_LIST ? ']' : '}');
        memoize(w, v);
        if (v->n)
            push_frame(w, v);
        return;
    case PV_TUPLE:
        if (!v->n) {
            put1(w, ')');
            return;
        }
        if (v->n > 3)
            put1(w, '(');
        push_frame(w, v);
        return;
    default: wfail(w, SUBLET_ERR_INVALID_ARGUMENT, "a value of unknown type %u", v->type);
    }
}

/* Advance the innermost container by one step. */
static void step(wr *w) {
    wframe *f = &w->st[w->sp - 1];
    const pyval *v = f->v;
    if (v->type == PV_TUPLE) {
        if (f->i < v->n) {
            save(w, v->u.items[f->i++]);
            return;
        }
        put1(w, v->n <= 3 ? (uint8_t)(0x85 + v->n - 1) : 't');
        w->sp--;
        memoize(w, v);
        return;
    }
    bool dict = v->type == PV_DICT;
    size_t per = dict ? 2 : 1, items = v->n;
    if (items == 1) { /* `item APPEND` / `k v SETITEM` */
        if (f->i < per) {
            save(w, dict ? v->u.d->kv[f->i++] : v->u.items[f->i++]);
            return;
        }
        put1(w, dict ? 's' : 'a');
        w->sp--;
        return;
    }
    if (f->i % per == 0) {
        size_t k = f->i / per;
        if (k > 0 && (k % BATCH == 0 || k == items) && f->closed != k) {
            put1(w, dict ? 'u' : 'e');
            f->closed = k;
            if (k == items && !(dict && k % BATCH == 0)) {
                w->sp--;
                return;
            }
            if (k == items) { /* CPython: a full last batch of a dict is followed by an empty one */
                put1(w, '(');
                put1(w, 'u');
                w->sp--;
                return;
            }
        }
        if (k % BATCH == 0)
            put1(w, '(');
    }
    save(w, dict ? v->u.d->kv[f->i++] : v->u.items[f->i++]);
}

sublet_status pv_pickle_write(const pyval *v, unsigned flags, pv_buf *out, char *err, size_t cap) {
    if (err && cap)
        err[0] = '\0';
    if (!v || !out) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    }
    wr *w = calloc(1, sizeof *w);
    if (!w) {
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    size_t start = out->len;
    w->out = out;
    w->flags = flags;
    w->frame_start = NO_FRAME;
    w->err = err;
    w->cap = cap;
    put_raw(w, "\x80\x04", 2);
    w->framing = !(flags & PV_PICKLE_NO_FRAME);
    save(w, v);
    while (w->sp && !w->bad)
        step(w);
    put(w, ".", 1);
    commit_frame(w);
    sublet_status st = w->bad;
    if (st)
        out->len = start;
    free(w->ids.e);
    free(w->strs.e);
    free(w);
    return st;
}
