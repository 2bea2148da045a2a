/* sublet — the Python value model: arena, buffer, constructors, dict index,
 * accessors, deep equality and the readers' tree check.  See pyval.h. */
#include "formats/pyval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"

/* ---- arena ---------------------------------------------------------------- */
typedef struct pv_chunk {
    struct pv_chunk *next;
    size_t size;
} pv_chunk;

struct pv_arena {
    pv_chunk *head;
    char *cur, *end;
    size_t total, limit, next_size;
};

#define PV_CHUNK_MIN ((size_t)64 << 10)
#define PV_CHUNK_MAX ((size_t)16 << 20)
#define PV_CHUNK_HDR ((sizeof(pv_chunk) + 15) & ~(size_t)15)

pv_arena *pv_arena_create(void) {
    pv_arena *a = calloc(1, sizeof *a);
    if (a)
        a->next_size = PV_CHUNK_MIN;
    return a;
}

void pv_arena_destroy(pv_arena *a) {
    if (!a)
        return;
    pv_chunk *c = a->head;
    while (c) {
        pv_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

void pv_arena_set_limit(pv_arena *a, size_t max_bytes) { a->limit = max_bytes; }

size_t pv_arena_bytes(const pv_arena *a) { return a->total; }

void *pv_arena_alloc(pv_arena *a, size_t n) {
    if (n > SIZE_MAX / 2)
        return NULL;
    n = (n + 7) & ~(size_t)7;
    if (n == 0)
        n = 8;
    if ((size_t)(a->end - a->cur) >= n) {
        void *p = a->cur;
        a->cur += n;
        return p;
    }
    bool dedicated = n > a->next_size / 4;
    size_t size = dedicated ? n : a->next_size;
    if (a->limit && (a->total + size + PV_CHUNK_HDR > a->limit || a->total > a->limit))
        return NULL;
    pv_chunk *c = malloc(PV_CHUNK_HDR + size);
    if (!c)
        return NULL;
    c->size = size;
    a->total += PV_CHUNK_HDR + size;
    char *data = (char *)c + PV_CHUNK_HDR;
    if (dedicated && a->head) { /* keep bumping in the current chunk */
        c->next = a->head->next;
        a->head->next = c;
        return data;
    }
    c->next = a->head;
    a->head = c;
    a->cur = data + n;
    a->end = data + size;
    if (!dedicated && a->next_size < PV_CHUNK_MAX)
        a->next_size *= 2;
    return data;
}

/* ---- buffer ----------------------------------------------------------------- */
void pv_buf_free(pv_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

sublet_status pv_buf_reserve(pv_buf *b, size_t extra) {
    if (extra <= b->cap - b->len)
        return SUBLET_OK;
    if (extra > SIZE_MAX / 2 - b->len)
        return SUBLET_ERR_NO_MEMORY;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p)
        return SUBLET_ERR_NO_MEMORY;
    b->data = p;
    b->cap = cap;
    return SUBLET_OK;
}

sublet_status pv_buf_append(pv_buf *b, const void *p, size_t n) {
    sublet_status st = pv_buf_reserve(b, n);
    if (st)
        return st;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return SUBLET_OK;
}

/* ---- hashing ------------------------------------------------------------------ */

#define PV_DICT_LINEAR 8
#define PV_SEED_STR 0x243f6a8885a308d3ULL
#define PV_SEED_BYTES 0x13198a2e03707344ULL
#define PV_SEED_BIG 0xa4093822299f31d0ULL

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint32_t hash_bytes(const void *p, size_t n, uint64_t seed) {
    const uint8_t *s = p;
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    return (uint32_t)mix64(h);
}

/* A number's hash: equal numbers (1, 1.0, True) hash alike. */
static uint32_t hash_num(const pyval *v) {
    int64_t i;
    if (v->type == PV_FLOAT) {
        double f = v->u.f;
        if (f == f && f >= -9223372036854775808.0 && f < 9223372036854775808.0 && f == floor(f))
            i = (int64_t)f;
        else {
            uint64_t bits;
            memcpy(&bits, &f, 8);
            return (uint32_t)mix64(bits ^ 0x5555);
        }
    } else if (v->flags & PV_F_UINT64) {
        return (uint32_t)mix64(v->u.u ^ 0x7777);
    } else {
        i = v->u.i;
    }
    return (uint32_t)mix64((uint64_t)i);
}

static uint32_t key_hash(const pyval *v) {
    switch (v->type) {
    case PV_STR: return hash_bytes(v->u.s, v->n, PV_SEED_STR);
    case PV_BYTES: return hash_bytes(v->u.s, v->n, PV_SEED_BYTES);
    case PV_BIGINT: return hash_bytes(v->u.s, v->n, PV_SEED_BIG);
    case PV_BOOL:
    case PV_INT:
    case PV_FLOAT: return hash_num(v);
    case PV_TUPLE: { /* shallow: nested tuples contribute their length */
        uint64_t h = 0x3c6ef372fe94f82bULL ^ v->n;
        for (size_t k = 0; k < v->n; k++) {
            const pyval *it = v->u.items[k];
            uint64_t x = it->type == PV_TUPLE ? it->n * 31 + 7 : key_hash(it);
            h = mix64(h ^ x);
        }
        return (uint32_t)h;
    }
    default: return 0x9e3779b9u;
    }
}

static bool is_number(const pyval *v) {
    return v->type == PV_INT || v->type == PV_FLOAT || v->type == PV_BOOL;
}

static bool num_equal(const pyval *a, const pyval *b) {
    if (a->type == PV_FLOAT && b->type == PV_FLOAT)
        return a->u.f == b->u.f || (isnan(a->u.f) && isnan(b->u.f));
    if (a->type == PV_FLOAT || b->type == PV_FLOAT) {
        const pyval *f = a->type == PV_FLOAT ? a : b, *o = a->type == PV_FLOAT ? b : a;
        double d = f->u.f;
        if (!(d >= -9223372036854775808.0 && d < 18446744073709551616.0) || d != floor(d))
            return false;
        if (o->flags & PV_F_UINT64)
            return d >= 9223372036854775808.0 && (uint64_t)d == o->u.u;
        return d < 9223372036854775808.0 && (int64_t)d == o->u.i;
    }
    return (a->flags & PV_F_UINT64) == (b->flags & PV_F_UINT64) && a->u.i == b->u.i;
}

static bool key_equal(const pyval *a, const pyval *b) {
    if (a == b)
        return true;
    if (a->type == PV_STR || a->type == PV_BYTES || a->type == PV_BIGINT)
        return a->type == b->type && a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0;
    if (is_number(a))
        return is_number(b) && num_equal(a, b);
    if (a->type == PV_TUPLE)
        return b->type == PV_TUPLE && pv_equal(a, b, PV_EQ_NUM_LOOSE);
    return a->type == b->type && a->type == PV_NONE;
}

bool pv_is_hashable(const pyval *v) {
    if (!v)
        return false;
    if (v->type == PV_LIST || v->type == PV_DICT)
        return false;
    return v->type != PV_TUPLE || (v->flags & PV_F_HASHABLE);
}

/* ---- constructors ---------------------------------------------------------------- */
static pyval pv_none_node = {.type = PV_NONE};
static pyval pv_true_node = {.type = PV_BOOL, .u = {.i = 1}};
static pyval pv_false_node = {.type = PV_BOOL, .u = {.i = 0}};

pyval *pv_none(void) { return &pv_none_node; }
pyval *pv_bool(bool b) { return b ? &pv_true_node : &pv_false_node; }

static pyval *node(pv_arena *a, pv_type t, size_t extra) {
    pyval *v = pv_arena_alloc(a, sizeof(pyval) + extra);
    if (v) {
        memset(v, 0, sizeof *v);
        v->type = (uint8_t)t;
    }
    return v;
}

pyval *pv_new_int(pv_arena *a, int64_t x) {
    pyval *v = node(a, PV_INT, 0);
    if (v)
        v->u.i = x;
    return v;
}

pyval *pv_new_uint(pv_arena *a, uint64_t x) {
    pyval *v = node(a, PV_INT, 0);
    if (v) {
        v->u.u = x;
        if (x > (uint64_t)INT64_MAX)
            v->flags = PV_F_UINT64;
    }
    return v;
}

pyval *pv_new_float(pv_arena *a, double x) {
    pyval *v = node(a, PV_FLOAT, 0);
    if (v)
        v->u.f = x;
    return v;
}

static pyval *new_blob(pv_arena *a, pv_type t, const void *p, size_t n) {
    if (n >= SIZE_MAX / 2)
        return NULL;
    pyval *v = node(a, t, n + 1);
    if (!v)
        return NULL;
    char *d = (char *)(v + 1);
    if (n)
        memcpy(d, p, n);
    d[n] = '\0';
    v->u.s = d;
    v->n = n;
    return v;
}

pyval *pv_new_str(pv_arena *a, const char *s, size_t n) { return new_blob(a, PV_STR, s, n); }
pyval *pv_new_strz(pv_arena *a, const char *s) { return new_blob(a, PV_STR, s, strlen(s)); }
pyval *pv_new_bytes(pv_arena *a, const void *p, size_t n) { return new_blob(a, PV_BYTES, p, n); }

pyval *pv_new_int_text(pv_arena *a, const char *s, size_t n) {
    size_t k = 0;
    bool neg = false;
    if (k < n && (s[k] == '-' || s[k] == '+'))
        neg = s[k++] == '-';
    if (k == n)
        return NULL;
    for (size_t j = k; j < n; j++)
        if (s[j] < '0' || s[j] > '9')
            return NULL;
    while (k + 1 < n && s[k] == '0')
        k++;
    size_t nd = n - k;
    if (nd <= 20) {
        uint64_t u = 0;
        bool ovf = false;
        for (size_t j = k; j < n; j++) {
            unsigned d = (unsigned)(s[j] - '0');
            if (u > (UINT64_MAX - d) / 10)
                ovf = true;
            u = u * 10 + d;
        }
        if (!ovf) {
            if (!neg)
                return pv_new_uint(a, u);
            if (u <= (uint64_t)INT64_MAX + 1)
                return pv_new_int(a, u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u);
        }
    }
    pyval *v = node(a, PV_BIGINT, nd + 2);
    if (!v)
        return NULL;
    char *d = (char *)(v + 1);
    size_t o = 0;
    if (neg)
        d[o++] = '-';
    memcpy(d + o, s + k, nd);
    o += nd;
    d[o] = '\0';
    v->u.s = d;
    v->n = o;
    return v;
}

static pyval *container(pyval *v) {
    if (v) {
        v->height = 1;
        v->weight = 1;
    }
    return v;
}

pyval *pv_new_list(pv_arena *a) { return container(node(a, PV_LIST, 0)); }

pyval *pv_new_tuple(pv_arena *a, pyval *const *items, size_t n) {
    if (n > SIZE_MAX / sizeof(pyval *) / 2)
        return NULL;
    pyval *v = container(node(a, PV_TUPLE, n * sizeof(pyval *)));
    if (!v)
        return NULL;
    v->u.items = (pyval **)(v + 1);
    v->n = n;
    bool hashable = true;
    for (size_t k = 0; k < n; k++) {
        v->u.items[k] = items[k];
        if (hashable && !pv_is_hashable(items[k]))
            hashable = false;
    }
    if (hashable)
        v->flags |= PV_F_HASHABLE;
    return v;
}

pyval *pv_new_dict(pv_arena *a) {
    pyval *v = container(node(a, PV_DICT, sizeof(pv_dict_body)));
    if (!v)
        return NULL;
    v->u.d = (pv_dict_body *)(v + 1);
    memset(v->u.d, 0, sizeof *v->u.d);
    return v;
}

/* A list's capacity follows from its length: 0, 4, 8, 16, ... */
static size_t list_cap(size_t n) {
    if (n == 0)
        return 0;
    size_t c = 4;
    while (c < n)
        c *= 2;
    return c;
}

sublet_status pv_list_extend(pv_arena *a, pyval *list, pyval *const *items, size_t n) {
    if (!list || list->type != PV_LIST)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (n == 0)
        return SUBLET_OK;
    if (n > SIZE_MAX / 4 / sizeof(pyval *) - list->n)
        return SUBLET_ERR_NO_MEMORY;
    size_t cap = list_cap(list->n), need = list->n + n;
    if (need > cap) {
        size_t ncap = list_cap(need);
        pyval **p = pv_arena_alloc(a, ncap * sizeof(pyval *));
        if (!p)
            return SUBLET_ERR_NO_MEMORY;
        if (list->n)
            memcpy(p, list->u.items, list->n * sizeof(pyval *));
        list->u.items = p;
    }
    memcpy(list->u.items + list->n, items, n * sizeof(pyval *));
    list->n = need;
    return SUBLET_OK;
}

sublet_status pv_list_append(pv_arena *a, pyval *list, pyval *item) {
    if (list && list->type == PV_LIST && list->n && list->n < list_cap(list->n)) {
        list->u.items[list->n++] = item;
        return SUBLET_OK;
    }
    return pv_list_extend(a, list, &item, 1);
}

/* Index of key in the dict, or SIZE_MAX. */
static size_t dict_find(const pyval *d, const pyval *key, uint32_t h) {
    const pv_dict_body *b = d->u.d;
    if (!b->nslots) {
        for (size_t k = 0; k < d->n; k++)
            if (key_equal(b->kv[2 * k], key))
                return k;
        return SIZE_MAX;
    }
    size_t mask = b->nslots - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        uint32_t e = b->slots[s];
        if (!e)
            return SIZE_MAX;
        if (b->hashes[e - 1] == h && key_equal(b->kv[2 * (e - 1)], key))
            return e - 1;
    }
}

static void index_insert(pv_dict_body *b, size_t idx, uint32_t h) {
    size_t mask = b->nslots - 1, s = h & mask;
    while (b->slots[s])
        s = (s + 1) & mask;
    b->slots[s] = (uint32_t)(idx + 1);
}

static sublet_status dict_reindex(pv_arena *a, pyval *d, size_t nslots) {
    pv_dict_body *b = d->u.d;
    uint32_t *slots = pv_arena_alloc(a, nslots * sizeof(uint32_t));
    if (!slots)
        return SUBLET_ERR_NO_MEMORY;
    memset(slots, 0, nslots * sizeof(uint32_t));
    if (!b->hashes) {
        b->hashes = pv_arena_alloc(a, b->cap * sizeof(uint32_t));
        if (!b->hashes)
            return SUBLET_ERR_NO_MEMORY;
        for (size_t k = 0; k < d->n; k++)
            b->hashes[k] = key_hash(b->kv[2 * k]);
    }
    b->slots = slots;
    b->nslots = nslots;
    for (size_t k = 0; k < d->n; k++)
        index_insert(b, k, b->hashes[k]);
    return SUBLET_OK;
}

static sublet_status dict_grow(pv_arena *a, pyval *d, size_t ncap) {
    pv_dict_body *b = d->u.d;
    if (ncap > UINT32_MAX - 2 || ncap > SIZE_MAX / 4 / sizeof(pyval *))
        return SUBLET_ERR_NO_MEMORY;
    pyval **kv = pv_arena_alloc(a, ncap * 2 * sizeof(pyval *));
    if (!kv)
        return SUBLET_ERR_NO_MEMORY;
    if (d->n)
        memcpy(kv, b->kv, d->n * 2 * sizeof(pyval *));
    if (b->hashes) {
        uint32_t *hs = pv_arena_alloc(a, ncap * sizeof(uint32_t));
        if (!hs)
            return SUBLET_ERR_NO_MEMORY;
        memcpy(hs, b->hashes, d->n * sizeof(uint32_t));
        b->hashes = hs;
    }
    b->kv = kv;
    b->cap = ncap;
    return SUBLET_OK;
}

sublet_status pv_dict_reserve(pv_arena *a, pyval *d, size_t extra) {
    if (!d || d->type != PV_DICT)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (extra > UINT32_MAX || d->n + extra <= d->u.d->cap)
        return extra > UINT32_MAX ? SUBLET_ERR_NO_MEMORY : SUBLET_OK;
    return dict_grow(a, d, d->n + extra);
}

sublet_status pv_dict_set(pv_arena *a, pyval *d, pyval *key, pyval *val) {
    if (!d || d->type != PV_DICT || !key || !val || !pv_is_hashable(key))
        return SUBLET_ERR_INVALID_ARGUMENT;
    pv_dict_body *b = d->u.d;
    uint32_t h = b->nslots ? key_hash(key) : 0;
    size_t at = dict_find(d, key, h);
    if (at != SIZE_MAX) {
        b->kv[2 * at + 1] = val;
        return SUBLET_OK;
    }
    if (d->n == b->cap) {
        sublet_status st = dict_grow(a, d, b->cap ? b->cap * 2 : 4);
        if (st)
            return st;
    }
    size_t idx = d->n++;
    b->kv[2 * idx] = key;
    b->kv[2 * idx + 1] = val;
    if (b->nslots) {
        b->hashes[idx] = h;
        if (d->n * 2 > b->nslots)
            return dict_reindex(a, d, b->nslots * 2);
        index_insert(b, idx, h);
    } else if (d->n > PV_DICT_LINEAR) {
        return dict_reindex(a, d, 32);
    }
    return SUBLET_OK;
}

sublet_status pv_dict_set_str(pv_arena *a, pyval *d, const char *key, pyval *val) {
    pyval *k = pv_new_strz(a, key);
    return k ? pv_dict_set(a, d, k, val) : SUBLET_ERR_NO_MEMORY;
}

/* ---- accessors ----------------------------------------------------------------------- */
const char *pv_type_name(pv_type t) {
    static const char *const names[] = {"None", "bool", "int", "int", "float",
                                        "str",  "bytes", "list", "tuple", "dict"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

pv_type pv_typeof(const pyval *v) { return v ? (pv_type)v->type : PV_NONE; }

bool pv_as_int(const pyval *v, int64_t *out) {
    if (!v || (v->type != PV_INT && v->type != PV_BOOL) || (v->flags & PV_F_UINT64))
        return false;
    *out = v->u.i;
    return true;
}

bool pv_as_uint64(const pyval *v, uint64_t *out) {
    if (!v || (v->type != PV_INT && v->type != PV_BOOL))
        return false;
    if (!(v->flags & PV_F_UINT64) && v->u.i < 0)
        return false;
    *out = v->u.u;
    return true;
}

bool pv_as_double(const pyval *v, double *out) {
    if (!v)
        return false;
    switch (v->type) {
    case PV_FLOAT: *out = v->u.f; return true;
    case PV_BOOL:
    case PV_INT: *out = (v->flags & PV_F_UINT64) ? (double)v->u.u : (double)v->u.i; return true;
    case PV_BIGINT: *out = strtod(v->u.s, NULL); return true;
    default: return false;
    }
}

bool pv_as_bool(const pyval *v, bool *out) {
    if (!v || v->type != PV_BOOL)
        return false;
    *out = v->u.i != 0;
    return true;
}

const char *pv_str(const pyval *v, size_t *len) {
    if (!v || v->type != PV_STR)
        return NULL;
    if (len)
        *len = v->n;
    return v->u.s;
}

bool pv_str_eq(const pyval *v, const char *s) {
    size_t n = strlen(s);
    return v && v->type == PV_STR && v->n == n && memcmp(v->u.s, s, n) == 0;
}

const uint8_t *pv_bytes(const pyval *v, size_t *len) {
    if (!v || v->type != PV_BYTES)
        return NULL;
    if (len)
        *len = v->n;
    return (const uint8_t *)v->u.s;
}

const char *pv_bigint_digits(const pyval *v, size_t *len) {
    if (!v || v->type != PV_BIGINT)
        return NULL;
    if (len)
        *len = v->n;
    return v->u.s;
}

size_t pv_len(const pyval *v) {
    if (!v)
        return 0;
    switch (v->type) {
    case PV_STR:
    case PV_BYTES:
    case PV_LIST:
    case PV_TUPLE:
    case PV_DICT: return v->n;
    default: return 0;
    }
}

size_t pv_list_len(const pyval *v) {
    return v && (v->type == PV_LIST || v->type == PV_TUPLE) ? v->n : 0;
}

const pyval *pv_list_at(const pyval *v, size_t i) {
    return v && (v->type == PV_LIST || v->type == PV_TUPLE) && i < v->n ? v->u.items[i] : NULL;
}

size_t pv_dict_len(const pyval *v) { return v && v->type == PV_DICT ? v->n : 0; }

const pyval *pv_dict_key_at(const pyval *v, size_t i) {
    return v && v->type == PV_DICT && i < v->n ? v->u.d->kv[2 * i] : NULL;
}

const pyval *pv_dict_value_at(const pyval *v, size_t i) {
    return v && v->type == PV_DICT && i < v->n ? v->u.d->kv[2 * i + 1] : NULL;
}

const pyval *pv_dict_getn(const pyval *d, const char *key, size_t n) {
    if (!d || d->type != PV_DICT)
        return NULL;
    const pv_dict_body *b = d->u.d;
    if (!b->nslots) {
        for (size_t k = 0; k < d->n; k++) {
            const pyval *kk = b->kv[2 * k];
            if (kk->type == PV_STR && kk->n == n && memcmp(kk->u.s, key, n) == 0)
                return b->kv[2 * k + 1];
        }
        return NULL;
    }
    uint32_t h = hash_bytes(key, n, PV_SEED_STR);
    size_t mask = b->nslots - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        uint32_t e = b->slots[s];
        if (!e)
            return NULL;
        const pyval *kk = b->kv[2 * (e - 1)];
        if (b->hashes[e - 1] == h && kk->type == PV_STR && kk->n == n &&
            memcmp(kk->u.s, key, n) == 0)
            return b->kv[2 * (e - 1) + 1];
    }
}

const pyval *pv_dict_get(const pyval *d, const char *key) {
    return pv_dict_getn(d, key, strlen(key));
}

const pyval *pv_dict_lookup(const pyval *d, const pyval *key) {
    if (!d || d->type != PV_DICT || !pv_is_hashable(key))
        return NULL;
    size_t at = dict_find(d, key, d->u.d->nslots ? key_hash(key) : 0);
    return at == SIZE_MAX ? NULL : d->u.d->kv[2 * at + 1];
}

/* ---- deep equality ------------------------------------------------------------------------ */
typedef struct eq_pair {
    const pyval *a, *b;
} eq_pair;

static bool push_pair(eq_pair **st, size_t *n, size_t *cap, const pyval *a, const pyval *b) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        eq_pair *p = realloc(*st, nc * sizeof *p);
        if (!p)
            return false;
        *st = p;
        *cap = nc;
    }
    (*st)[(*n)++] = (eq_pair){a, b};
    return true;
}

static bool is_seq(const pyval *v) { return v->type == PV_LIST || v->type == PV_TUPLE; }

bool pv_equal(const pyval *a, const pyval *b, unsigned flags) {
    eq_pair *st = NULL;
    size_t n = 0, cap = 0;
    bool ok = push_pair(&st, &n, &cap, a, b);
    while (ok && n) {
        eq_pair p = st[--n];
        if (p.a == p.b)
            continue;
        if (!p.a || !p.b) {
            ok = false;
            break;
        }
        if (p.a->type != p.b->type) {
            if ((flags & PV_EQ_SEQ_LOOSE) && is_seq(p.a) && is_seq(p.b)) {
                /* compared below as sequences */
            } else if ((flags & PV_EQ_NUM_LOOSE) && is_number(p.a) && is_number(p.b)) {
                ok = num_equal(p.a, p.b);
                continue;
            } else {
                ok = false;
                break;
            }
        }
        switch (p.a->type) {
        case PV_NONE: break;
        case PV_BOOL:
        case PV_INT:
        case PV_FLOAT: ok = num_equal(p.a, p.b); break;
        case PV_BIGINT:
        case PV_STR:
        case PV_BYTES:
            ok = p.a->n == p.b->n && memcmp(p.a->u.s, p.b->u.s, p.a->n) == 0;
            break;
        case PV_LIST:
        case PV_TUPLE:
            ok = p.a->n == p.b->n;
            for (size_t k = p.a->n; ok && k-- > 0;)
                ok = push_pair(&st, &n, &cap, p.a->u.items[k], p.b->u.items[k]);
            break;
        case PV_DICT:
            ok = p.a->n == p.b->n;
            for (size_t k = 2 * p.a->n; ok && k-- > 0;)
                ok = push_pair(&st, &n, &cap, p.a->u.d->kv[k], p.b->u.d->kv[k]);
            break;
        default: ok = false;
        }
    }
    free(st);
    return ok;
}

/* ---- tree check ------------------------------------------------------------------------------ */
static bool is_container(const pyval *v) {
    return v->type == PV_LIST || v->type == PV_TUPLE || v->type == PV_DICT;
}

static const pyval *child_at(const pyval *v, size_t i) {
    return v->type == PV_DICT ? v->u.d->kv[i] : v->u.items[i];
}

typedef struct chk_frame {
    pyval *v;
    size_t i;
    uint64_t w;
    unsigned h;
} chk_frame;

sublet_status pv_check_tree(pyval *root, char *err, size_t cap) {
    if (!root)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "no value");
    if (!is_container(root))
        return SUBLET_OK;
    if (root->flags & PV_F_BLACK)
        return SUBLET_OK;
    chk_frame *st = malloc((PV_MAX_DEPTH + 1) * sizeof *st);
    if (!st)
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    size_t sp = 0;
    sublet_status rc = SUBLET_OK;
    root->flags |= PV_F_GRAY;
    st[sp++] = (chk_frame){root, 0, 0, 0};
    while (sp) {
        chk_frame *f = &st[sp - 1];
        size_t total = f->v->type == PV_DICT ? 2 * f->v->n : f->v->n;
        if (f->i < total) {
            pyval *c = (pyval *)child_at(f->v, f->i++);
            if (!is_container(c)) {
                f->w++;
            } else if (c->flags & PV_F_BLACK) {
                f->w += c->weight;
                if (c->height > f->h)
                    f->h = c->height;
            } else if (c->flags & PV_F_GRAY) {
                rc = sl_fail(err, cap, SUBLET_ERR_PARSE,
                                "a %s contains itself (recursive structures are not supported)",
                                pv_type_name((pv_type)c->type));
                break;
            } else if (sp >= PV_MAX_DEPTH) {
                rc = sl_fail(err, cap, SUBLET_ERR_PARSE, "containers nested deeper than %d",
                                PV_MAX_DEPTH);
                break;
            } else {
                c->flags |= PV_F_GRAY;
                st[sp++] = (chk_frame){c, 0, 0, 0};
                continue;
            }
            if (f->w > PV_MAX_EXPANDED) {
                rc = sl_fail(err, cap, SUBLET_ERR_PARSE,
                                "shared references expand to more than %llu values",
                                (unsigned long long)PV_MAX_EXPANDED);
                break;
            }
            if (f->h + sp > PV_MAX_DEPTH) {
                rc = sl_fail(err, cap, SUBLET_ERR_PARSE, "containers nested deeper than %d",
                                PV_MAX_DEPTH);
                break;
            }
            continue;
        }
        pyval *v = f->v;
        v->weight = (uint32_t)(f->w + 1);
        v->height = (uint16_t)(f->h + 1);
        v->flags = (uint8_t)((v->flags & ~PV_F_GRAY) | PV_F_BLACK);
        sp--;
        if (sp) {
            chk_frame *p = &st[sp - 1];
            p->w += v->weight;
            if (v->height > p->h)
                p->h = v->height;
            if (p->w > PV_MAX_EXPANDED) {
                rc = sl_fail(err, cap, SUBLET_ERR_PARSE,
                                "shared references expand to more than %llu values",
                                (unsigned long long)PV_MAX_EXPANDED);
                break;
            }
        }
    }
    if (rc) /* leave no node GRAY (a later check must not see a false cycle) */
        for (size_t k = 0; k < sp; k++)
            st[k].v->flags &= (uint8_t)~PV_F_GRAY;
    free(st);
    return rc;
}
