/* sublet — pickle reader (protocols 0-5, plain data only).  See pickle.h.
 * The writer is in pickle_write.c. */
#include "formats/pickle.h"
#include "base/errmsg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gz.h"

enum {
    OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1', OP_DUP = '2',
    OP_FLOAT = 'F', OP_INT = 'I', OP_BININT = 'J', OP_BININT1 = 'K', OP_LONG = 'L',
    OP_BININT2 = 'M', OP_NONE = 'N', OP_PERSID = 'P', OP_BINPERSID = 'Q', OP_REDUCE = 'R',
    OP_STRING = 'S', OP_BINSTRING = 'T', OP_SHORT_BINSTRING = 'U', OP_UNICODE = 'V',
    OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c', OP_DICT = 'd',
    OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_GET = 'g', OP_BINGET = 'h', OP_INST = 'i',
    OP_LONG_BINGET = 'j', OP_LIST = 'l', OP_EMPTY_LIST = ']', OP_OBJ = 'o', OP_PUT = 'p',
    OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')', OP_SETITEMS = 'u', OP_BINFLOAT = 'G', OP_BINBYTES = 'B',
    OP_SHORT_BINBYTES = 'C', OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83,
    OP_EXT4 = 0x84, OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_LONG4 = 0x8b, OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e, OP_EMPTY_SET = 0x8f, OP_ADDITEMS = 0x90,
    OP_FROZENSET = 0x91, OP_NEWOBJ_EX = 0x92, OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94,
    OP_FRAME = 0x95, OP_BYTEARRAY8 = 0x96, OP_NEXT_BUFFER = 0x97, OP_READONLY_BUFFER = 0x98
};

static const char *opname(unsigned op) {
    switch (op) {
    case OP_MARK: return "MARK";
    case OP_STOP: return "STOP";
    case OP_POP: return "POP";
    case OP_POP_MARK: return "POP_MARK";
    case OP_DUP: return "DUP";
    case OP_FLOAT: return "FLOAT";
    case OP_INT: return "INT";
    case OP_BININT: return "BININT";
    case OP_BININT1: return "BININT1";
    case OP_LONG: return "LONG";
    case OP_BININT2: return "BININT2";
    case OP_NONE: return "NONE";
    case OP_PERSID: return "PERSID";
    case OP_BINPERSID: return "BINPERSID";
    case OP_REDUCE: return "REDUCE";
    case OP_STRING: return "STRING";
    case OP_BINSTRING: return "BINSTRING";
    case OP_SHORT_BINSTRING: return "SHORT_BINSTRING";
    case OP_UNICODE: return "UNICODE";
    case OP_BINUNICODE: return "BINUNICODE";
    case OP_APPEND: return "APPEND";
    case OP_BUILD: return "BUILD";
    case OP_GLOBAL: return "GLOBAL";
    case OP_DICT: return "DICT";
    case OP_EMPTY_DICT: return "EMPTY_DICT";
    case OP_APPENDS: return "APPENDS";
    case OP_GET: return "GET";
    case OP_BINGET: return "BINGET";
    case OP_INST: return "INST";
    case OP_LONG_BINGET: return "LONG_BINGET";
    case OP_LIST: return "LIST";
    case OP_EMPTY_LIST: return "EMPTY_LIST";
    case OP_OBJ: return "OBJ";
    case OP_PUT: return "PUT";
    case OP_BINPUT: return "BINPUT";
    case OP_LONG_BINPUT: return "LONG_BINPUT";
    case OP_SETITEM: return "SETITEM";
    case OP_TUPLE: return "TUPLE";
    case OP_EMPTY_TUPLE: return "EMPTY_TUPLE";
    case OP_SETITEMS: return "SETITEMS";
    case OP_BINFLOAT: return "BINFLOAT";
    case OP_BINBYTES: return "BINBYTES";
    case OP_SHORT_BINBYTES: return "SHORT_BINBYTES";
    case OP_PROTO: return "PROTO";
    case OP_NEWOBJ: return "NEWOBJ";
    case OP_EXT1: return "EXT1";
    case OP_EXT2: return "EXT2";
    case OP_EXT4: return "EXT4";
    case OP_TUPLE1: return "TUPLE1";
    case OP_TUPLE2: return "TUPLE2";
    case OP_TUPLE3: return "TUPLE3";
    case OP_NEWTRUE: return "NEWTRUE";
    case OP_NEWFALSE: return "NEWFALSE";
    case OP_LONG1: return "LONG1";
    case OP_LONG4: return "LONG4";
    case OP_SHORT_BINUNICODE: return "SHORT_BINUNICODE";
    case OP_BINUNICODE8: return "BINUNICODE8";
    case OP_BINBYTES8: return "BINBYTES8";
    case OP_EMPTY_SET: return "EMPTY_SET";
    case OP_ADDITEMS: return "ADDITEMS";
    case OP_FROZENSET: return "FROZENSET";
    case OP_NEWOBJ_EX: return "NEWOBJ_EX";
    case OP_STACK_GLOBAL: return "STACK_GLOBAL";
    case OP_MEMOIZE: return "MEMOIZE";
    case OP_FRAME: return "FRAME";
    case OP_BYTEARRAY8: return "BYTEARRAY8";
    case OP_NEXT_BUFFER: return "NEXT_BUFFER";
    case OP_READONLY_BUFFER: return "READONLY_BUFFER";
    default: return NULL;
    }
}

typedef struct rd {
    const uint8_t *base, *p, *end;
    pv_arena *a;
    pyval **stack;
    size_t sp, scap;
    size_t marks[PV_MAX_DEPTH];
    size_t nmarks;
    pyval **memo;
    size_t memo_cap, memo_len, memo_limit;
    size_t op_off;
    unsigned op;
    bool inflated;
    bool dirty; /* a held container was modified: pv_check_tree at STOP */
    char *err;
    size_t cap;
} rd;

static sublet_status rfail_at(rd *r, sublet_status st, size_t off, const char *fmt, ...) {
    if (r->err && r->cap) {
        int k = snprintf(r->err, r->cap, "byte %zu%s: ", off,
                         r->inflated ? " of the inflated data" : "");
        if (k >= 0 && (size_t)k < r->cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + k, r->cap - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return st;
}

#define RFAIL(...) rfail_at(r, SUBLET_ERR_PARSE, r->op_off, __VA_ARGS__)
#define ROOM() rfail_at(r, SUBLET_ERR_NO_MEMORY, r->op_off, "out of memory")

static size_t left(const rd *r) { return (size_t)(r->end - r->p); }

static sublet_status truncated(rd *r, size_t need) {
    return RFAIL("truncated pickle: %s needs %zu more bytes, %zu left", opname(r->op), need,
                 left(r));
}

#define NEED(n)                                                                              \
    do {                                                                                     \
        if (left(r) < (size_t)(n))                                                           \
            return truncated(r, (size_t)(n));                                                \
    } while (0)

static uint64_t le(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static sublet_status push_slow(rd *r, pyval *v) {
    if (!v)
        return ROOM();
    if (r->sp == r->scap) {
        size_t nc = r->scap ? r->scap * 2 : 256;
        if (nc > ((size_t)1 << 28))
            return RFAIL("stack holds more than %zu values", r->scap);
        pyval **s = realloc(r->stack, nc * sizeof *s);
        if (!s)
            return ROOM();
        r->stack = s;
        r->scap = nc;
    }
    r->stack[r->sp++] = v;
    return SUBLET_OK;
}

static inline sublet_status push(rd *r, pyval *v) {
    if (v && r->sp < r->scap) {
        r->stack[r->sp++] = v;
        return SUBLET_OK;
    }
    return push_slow(r, v);
}

static size_t fence(const rd *r) { return r->nmarks ? r->marks[r->nmarks - 1] : 0; }

static sublet_status underflow(rd *r) {
    return RFAIL("%s: stack underflow (too few values above the last MARK)", opname(r->op));
}

/* Pop the innermost MARK; *m is the stack height it recorded. */
static sublet_status pop_mark(rd *r, size_t *m) {
    if (!r->nmarks)
        return RFAIL("%s needs a MARK but none is open", opname(r->op));
    *m = r->marks[--r->nmarks];
    return SUBLET_OK;
}

/* The text argument of a protocol-0 opcode: up to (not including) '\n'. */
static sublet_status line(rd *r, const char **s, size_t *n) {
    const uint8_t *nl = memchr(r->p, '\n', left(r));
    if (!nl)
        return RFAIL("truncated pickle: the %s argument has no terminating newline",
                     opname(r->op));
    *s = (const char *)r->p;
    *n = (size_t)(nl - r->p);
    r->p = nl + 1;
    return SUBLET_OK;
}

static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t' || **s == '\r'))
        (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r'))
        (*n)--;
}

static sublet_status text_index(rd *r, size_t *idx) {
    const char *s = NULL;
    size_t n = 0;
    sublet_status st = line(r, &s, &n);
    if (st)
        return st;
    trim(&s, &n);
    if (!n || n > 19)
        return RFAIL("%s argument is not a memo index", opname(r->op));
    size_t v = 0;
    for (size_t k = 0; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return RFAIL("%s argument is not a memo index", opname(r->op));
        v = v * 10 + (size_t)(s[k] - '0');
    }
    *idx = v;
    return SUBLET_OK;
}

static sublet_status memo_put(rd *r, size_t idx) {
    if (r->sp <= fence(r))
        return underflow(r);
    if (idx >= r->memo_limit)
        return RFAIL("memo index %zu is out of range for a %zu-byte pickle", idx,
                     (size_t)(r->end - r->base));
    if (idx >= r->memo_cap) {
        size_t nc = r->memo_cap ? r->memo_cap : 256;
        while (nc <= idx)
            nc *= 2;
        if (nc > r->memo_limit)
            nc = r->memo_limit;
        pyval **m = realloc(r->memo, nc * sizeof *m);
        if (!m)
            return ROOM();
        memset(m + r->memo_cap, 0, (nc - r->memo_cap) * sizeof *m);
        r->memo = m;
        r->memo_cap = nc;
    }
    if (!r->memo[idx])
        r->memo_len++;
    r->memo[idx] = r->stack[r->sp - 1];
    return SUBLET_OK;
}

static sublet_status memo_get_slow(rd *r, size_t idx) {
    if (idx >= r->memo_cap || !r->memo[idx])
        return RFAIL("%s: memo index %zu is not defined", opname(r->op), idx);
    return push(r, r->memo[idx]);
}

static inline sublet_status memo_get(rd *r, size_t idx) {
    if (idx < r->memo_cap && r->memo[idx] && r->sp < r->scap) {
        r->stack[r->sp++] = r->memo[idx];
        return SUBLET_OK;
    }
    return memo_get_slow(r, idx);
}

/* Two's complement little-endian integer of n bytes (LONG1/LONG4). */
static sublet_status push_long(rd *r, const uint8_t *b, size_t n) {
    while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
        n--;
    if (n == 0)
        return push(r, pv_new_int(r->a, 0));
    if (n <= 8) {
        uint64_t u = le(b, (unsigned)n);
        if ((b[n - 1] & 0x80) && n < 8)
            u |= ~(uint64_t)0 << (8 * n);
        return push(r, pv_new_int(r->a, (int64_t)u));
    }
    if (n == 9 && b[8] == 0)
        return push(r, pv_new_uint(r->a, le(b, 8)));
    if (n > PV_BIGINT_MAX_BYTES)
        return RFAIL("%s: a %zu-byte integer is too large (limit %d bytes)", opname(r->op), n,
                     PV_BIGINT_MAX_BYTES);
    bool neg = (b[n - 1] & 0x80) != 0;
    size_t nl = (n + 3) / 4;
    uint32_t *limb = malloc(nl * sizeof *limb);
    char *dig = malloc(nl * 10 + 32);
    if (!limb || !dig) {
        free(limb);
        free(dig);
        return ROOM();
    }
    for (size_t k = 0; k < nl; k++) {
        uint32_t w = 0;
        for (unsigned j = 0; j < 4; j++) {
            size_t at = 4 * k + j;
            w |= (uint32_t)(at < n ? b[at] : (neg ? 0xff : 0)) << (8 * j);
        }
        limb[k] = neg ? ~w : w;
    }
    for (size_t k = 0; neg && k < nl; k++) /* magnitude = ~x + 1 */
        if (++limb[k] != 0)
            break;
    size_t nd = 0, top = nl;
    while (top) {
        uint64_t rem = 0;
        for (size_t k = top; k-- > 0;) {
            uint64_t cur = (rem << 32) | limb[k];
            limb[k] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (top && limb[top - 1] == 0)
            top--;
        for (int j = 0; j < 9; j++) {
            dig[nd++] = (char)('0' + rem % 10);
            rem /= 10;
            if (!top && !rem)
                break;
        }
    }
    if (neg)
        dig[nd++] = '-';
    for (size_t i = 0, j = nd - 1; i < j; i++, j--) {
        char t = dig[i];
        dig[i] = dig[j];
        dig[j] = t;
    }
    sublet_status st = push(r, pv_new_int_text(r->a, dig, nd));
    free(limb);
    free(dig);
    return st;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) { /* surrogates kept as 3 bytes, like 'surrogatepass' */
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* STRING: a quoted Python 2 str literal, decoded like codecs.escape_decode. */
static sublet_status load_string(rd *r) {
    const char *s = NULL;
    size_t n = 0;
    sublet_status st = line(r, &s, &n);
    if (st)
        return st;
    if (n < 2 || s[0] != s[n - 1] || (s[0] != '\'' && s[0] != '"'))
        return RFAIL("the STRING opcode argument must be quoted");
    s++;
    n -= 2;
    char *o = pv_arena_alloc(r->a, n + 1);
    if (!o)
        return ROOM();
    size_t on = 0;
    for (size_t k = 0; k < n;) {
        char c = s[k++];
        if (c != '\\') {
            o[on++] = c;
            continue;
        }
        if (k == n)
            return RFAIL("STRING: trailing \\ in string");
        c = s[k++];
        switch (c) {
        case '\n': break;
        case '\\': o[on++] = '\\'; break;
        case '\'': o[on++] = '\''; break;
        case '"': o[on++] = '"'; break;
        case 'a': o[on++] = '\a'; break;
        case 'b': o[on++] = '\b'; break;
        case 'f': o[on++] = '\f'; break;
        case 'n': o[on++] = '\n'; break;
        case 'r': o[on++] = '\r'; break;
        case 't': o[on++] = '\t'; break;
        case 'v': o[on++] = '\v'; break;
        case 'x': {
            int h1 = k < n ? hexval((unsigned char)s[k]) : -1;
            int h2 = k + 1 < n ? hexval((unsigned char)s[k + 1]) : -1;
            if (h1 < 0 || h2 < 0)
                return RFAIL("STRING: invalid \\x escape");
            o[on++] = (char)(h1 * 16 + h2);
            k += 2;
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                unsigned v = (unsigned)(c - '0');
                for (int j = 0; j < 2 && k < n && s[k] >= '0' && s[k] <= '7'; j++)
                    v = v * 8 + (unsigned)(s[k++] - '0');
                o[on++] = (char)(v & 0xff);
            } else {
                o[on++] = '\\';
                o[on++] = c;
            }
        }
    }
    return push(r, pv_new_str(r->a, o, on));
}

/* UNICODE: raw-unicode-escape text (latin-1 bytes, \uXXXX and \UXXXXXXXX). */
static sublet_status load_unicode(rd *r) {
    const char *s = NULL;
    size_t n = 0;
    sublet_status st = line(r, &s, &n);
    if (st)
        return st;
    char *o = pv_arena_alloc(r->a, 2 * n + 1);
    if (!o)
        return ROOM();
    size_t on = 0;
    for (size_t k = 0; k < n;) {
        unsigned char c = (unsigned char)s[k];
        if (c != '\\') {
            on += put_utf8(o + on, c);
            k++;
            continue;
        }
        size_t run = 0;
        while (k < n && s[k] == '\\') {
            o[on++] = '\\';
            k++;
            run++;
        }
        if (!(run & 1) || k >= n || (s[k] != 'u' && s[k] != 'U'))
            continue;
        on--; /* the last backslash starts an escape */
        unsigned digits = s[k] == 'u' ? 4 : 8;
        k++;
        uint32_t cp = 0;
        for (unsigned j = 0; j < digits; j++, k++) {
            int h = k < n ? hexval((unsigned char)s[k]) : -1;
            if (h < 0)
                return RFAIL("UNICODE: truncated \\%c escape", digits == 4 ? 'u' : 'U');
            cp = cp * 16 + (uint32_t)h;
        }
        if (cp > 0x10ffff)
            return RFAIL("UNICODE: \\U%08x is not a code point", (unsigned)cp);
        on += put_utf8(o + on, cp);
    }
    return push(r, pv_new_str(r->a, o, on));
}

/* A length-prefixed payload: str (t == PV_STR) or bytes. */
static sublet_status load_counted(rd *r, unsigned lenbytes, bool is_signed, pv_type t) {
    NEED(lenbytes);
    uint64_t n = le(r->p, lenbytes);
    if (is_signed && (n & 0x80000000u))
        return RFAIL("%s: negative length", opname(r->op));
    r->p += lenbytes;
    if (n > left(r))
        return RFAIL("truncated pickle: %s announces %llu bytes, %zu left", opname(r->op),
                     (unsigned long long)n, left(r));
    const uint8_t *d = r->p;
    r->p += n;
    return push(r, t == PV_STR ? pv_new_str(r->a, (const char *)d, (size_t)n)
                               : pv_new_bytes(r->a, d, (size_t)n));
}

static sublet_status dict_put(rd *r, pyval *d, pyval *k, pyval *v) {
    size_t before = d->n;
    sublet_status st = pv_dict_set(r->a, d, k, v);
    if (st == SUBLET_ERR_INVALID_ARGUMENT)
        return RFAIL("%s: a dict key of type %s is not hashable", opname(r->op),
                     pv_type_name((pv_type)k->type));
    if (!st && d->n == before)
        r->dirty = true; /* a replaced value: its weight no longer counts */
    return st ? ROOM() : SUBLET_OK;
}

/* Container p receives the k values at items: keep p's height and weight
 * exact while the tree is built bottom-up (the way picklers write), and note
 * when it is not (p already held by a container, or p holding itself): then
 * pv_check_tree runs at STOP. */
static sublet_status adopt(rd *r, pyval *p, pyval *const *items, size_t k) {
    if (p->flags & PV_F_SEALED)
        r->dirty = true;
    uint64_t w = p->weight;
    unsigned h = p->height;
    for (size_t j = 0; j < k; j++) {
        pyval *c = items[j];
        if (c->type < PV_LIST) {
            w++;
            continue;
        }
        if (c == p)
            r->dirty = true;
        c->flags |= PV_F_SEALED;
        w += c->weight;
        if (c->height + 1u > h)
            h = c->height + 1u;
    }
    if (r->dirty)
        return SUBLET_OK;
    if (h > PV_MAX_DEPTH)
        return RFAIL("containers nested deeper than %d", PV_MAX_DEPTH);
    if (w > PV_MAX_EXPANDED)
        return RFAIL("shared references expand to more than %llu values",
                     (unsigned long long)PV_MAX_EXPANDED);
    p->weight = (uint32_t)w;
    p->height = (uint16_t)h;
    return SUBLET_OK;
}

static sublet_status load_text_number(rd *r) {
    const char *s = NULL;
    size_t n = 0;
    sublet_status st = line(r, &s, &n);
    if (st)
        return st;
    trim(&s, &n);
    if (r->op == OP_INT && n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1'))
        return push(r, pv_bool(s[1] == '1'));
    if (r->op == OP_LONG && n && s[n - 1] == 'L')
        n--;
    if (r->op != OP_FLOAT) {
        size_t k = n && (s[0] == '-' || s[0] == '+');
        bool ok = k < n;
        for (; ok && k < n; k++)
            ok = s[k] >= '0' && s[k] <= '9';
        if (!ok)
            return RFAIL("%s argument is not a decimal integer", opname(r->op));
        return push(r, pv_new_int_text(r->a, s, n));
    }
    char tmp[512];
    if (!n || n >= sizeof tmp)
        return RFAIL("FLOAT argument is not a number");
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *e;
    double d = strtod(tmp, &e);
    if (e != tmp + n)
        return RFAIL("FLOAT argument is not a number");
    return push(r, pv_new_float(r->a, d));
}

/* APPENDS / ADDITEMS / SETITEMS: fold the items above the MARK into the
 * container just below it. */
static sublet_status fold_mark(rd *r) {
    size_t m = 0;
    sublet_status st = pop_mark(r, &m);
    if (st)
        return st;
    if (m == 0 || m - 1 < fence(r))
        return underflow(r);
    pyval *c = r->stack[m - 1];
    size_t k = r->sp - m;
    if (r->op == OP_SETITEMS) {
        if (c->type != PV_DICT)
            return RFAIL("SETITEMS target is a %s, not a dict", pv_type_name((pv_type)c->type));
        if (k & 1)
            return RFAIL("SETITEMS: odd number of items (%zu)", k);
        if (pv_dict_reserve(r->a, c, k / 2))
            return ROOM();
        for (size_t j = m; j < r->sp; j += 2)
            if ((st = dict_put(r, c, r->stack[j], r->stack[j + 1])))
                return st;
    } else {
        if (c->type != PV_LIST || (r->op == OP_ADDITEMS && !(c->flags & PV_F_SET)))
            return RFAIL("%s target is a %s, not a %s", opname(r->op),
                         pv_type_name((pv_type)c->type), r->op == OP_ADDITEMS ? "set" : "list");
        if (pv_list_extend(r->a, c, r->stack + m, k))
            return ROOM();
    }
    st = adopt(r, c, r->stack + m, k);
    r->sp = m;
    return st;
}

/* DICT / LIST / TUPLE / FROZENSET: build a new container from the items
 * above the MARK. */
static sublet_status build_mark(rd *r) {
    size_t m = 0;
    sublet_status st = pop_mark(r, &m);
    if (st)
        return st;
    size_t k = r->sp - m;
    pyval *v;
    if (r->op == OP_TUPLE) {
        v = pv_new_tuple(r->a, r->stack + m, k);
    } else if (r->op == OP_DICT) {
        if (k & 1)
            return RFAIL("DICT: odd number of items (%zu)", k);
        v = pv_new_dict(r->a);
        if (v && pv_dict_reserve(r->a, v, k / 2))
            v = NULL;
        for (size_t j = m; v && j < r->sp; j += 2)
            if ((st = dict_put(r, v, r->stack[j], r->stack[j + 1])))
                return st;
    } else {
        v = pv_new_list(r->a);
        if (v && pv_list_extend(r->a, v, r->stack + m, k))
            v = NULL;
        if (v && r->op == OP_FROZENSET)
            v->flags |= PV_F_SET;
    }
    if (v && (st = adopt(r, v, r->stack + m, k)))
        return st;
    r->sp = m;
    return push(r, v);
}

static sublet_status load(rd *r, pyval **out) {
    sublet_status st = SUBLET_OK;
    for (;;) {
        if (st)
            return st;
        if (r->p >= r->end)
            return rfail_at(r, SUBLET_ERR_PARSE, (size_t)(r->p - r->base),
                            "truncated pickle: input ends before the STOP opcode");
        r->op_off = (size_t)(r->p - r->base);
        unsigned op = r->op = *r->p++;
        size_t avail = r->sp - fence(r);
        switch (op) {
        case OP_BINGET: NEED(1); st = memo_get(r, *r->p++); break;
        case OP_LONG_BINGET: NEED(4); st = memo_get(r, (size_t)le(r->p, 4)); r->p += 4; break;
        case OP_MEMOIZE: st = memo_put(r, r->memo_len); break;
        case OP_BINPUT: NEED(1); st = memo_put(r, *r->p++); break;
        case OP_LONG_BINPUT: NEED(4); st = memo_put(r, (size_t)le(r->p, 4)); r->p += 4; break;
        case OP_MARK:
            if (r->nmarks >= PV_MAX_DEPTH)
                return RFAIL("MARKs nested deeper than %d", PV_MAX_DEPTH);
            r->marks[r->nmarks++] = r->sp;
            break;
        case OP_SHORT_BINUNICODE: st = load_counted(r, 1, false, PV_STR); break;
        case OP_BINUNICODE: st = load_counted(r, 4, false, PV_STR); break;
        case OP_BINUNICODE8: st = load_counted(r, 8, false, PV_STR); break;
        case OP_SHORT_BINSTRING: st = load_counted(r, 1, false, PV_STR); break;
        case OP_BINSTRING: st = load_counted(r, 4, true, PV_STR); break;
        case OP_SHORT_BINBYTES: st = load_counted(r, 1, false, PV_BYTES); break;
        case OP_BINBYTES: st = load_counted(r, 4, false, PV_BYTES); break;
        case OP_BINBYTES8:
        case OP_BYTEARRAY8: st = load_counted(r, 8, false, PV_BYTES); break;
        case OP_BININT1: NEED(1); st = push(r, pv_new_int(r->a, *r->p++)); break;
        case OP_BININT2: NEED(2); st = push(r, pv_new_int(r->a, (int64_t)le(r->p, 2))); r->p += 2; break;
        case OP_BININT:
            NEED(4);
            st = push(r, pv_new_int(r->a, (int32_t)(uint32_t)le(r->p, 4)));
            r->p += 4;
            break;
        case OP_LONG1: {
            NEED(1);
            size_t n = *r->p;
            NEED(1 + n);
            st = push_long(r, r->p + 1, n);
            r->p += 1 + n;
            break;
        }
        case OP_LONG4: {
            NEED(4);
            uint64_t n = le(r->p, 4);
            if (n & 0x80000000u)
                return RFAIL("LONG4: negative length");
            NEED(4 + n);
            st = push_long(r, r->p + 4, (size_t)n);
            r->p += 4 + n;
            break;
        }
        case OP_BINFLOAT: {
            NEED(8);
            uint64_t bits = 0;
            for (int k = 0; k < 8; k++)
                bits = bits << 8 | r->p[k];
            double d;
            memcpy(&d, &bits, 8);
            r->p += 8;
            st = push(r, pv_new_float(r->a, d));
            break;
        }
        case OP_INT:
        case OP_LONG:
        case OP_FLOAT: st = load_text_number(r); break;
        case OP_STRING: st = load_string(r); break;
        case OP_UNICODE: st = load_unicode(r); break;
        case OP_NONE: st = push(r, pv_none()); break;
        case OP_NEWTRUE: st = push(r, pv_bool(true)); break;
        case OP_NEWFALSE: st = push(r, pv_bool(false)); break;
        case OP_EMPTY_DICT: st = push(r, pv_new_dict(r->a)); break;
        case OP_EMPTY_LIST: st = push(r, pv_new_list(r->a)); break;
        case OP_EMPTY_TUPLE: st = push(r, pv_new_tuple(r->a, NULL, 0)); break;
        case OP_EMPTY_SET: {
            pyval *v = pv_new_list(r->a);
            if (v)
                v->flags |= PV_F_SET;
            st = push(r, v);
            break;
        }
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3: {
            size_t k = op - OP_TUPLE1 + 1;
            if (avail < k)
                return underflow(r);
            pyval *v = pv_new_tuple(r->a, r->stack + r->sp - k, k);
            if (v && (st = adopt(r, v, r->stack + r->sp - k, k)))
                return st;
            r->sp -= k;
            st = push(r, v);
            break;
        }
        case OP_SETITEMS:
        case OP_APPENDS:
        case OP_ADDITEMS: st = fold_mark(r); break;
        case OP_DICT:
        case OP_LIST:
        case OP_TUPLE:
        case OP_FROZENSET: st = build_mark(r); break;
        case OP_SETITEM: {
            if (avail < 3)
                return underflow(r);
            pyval *d = r->stack[r->sp - 3];
            if (d->type != PV_DICT)
                return RFAIL("SETITEM target is a %s, not a dict", pv_type_name((pv_type)d->type));
            st = dict_put(r, d, r->stack[r->sp - 2], r->stack[r->sp - 1]);
            if (!st)
                st = adopt(r, d, r->stack + r->sp - 2, 2);
            r->sp -= 2;
            break;
        }
        case OP_APPEND: {
            if (avail < 2)
                return underflow(r);
            pyval *l = r->stack[r->sp - 2];
            if (l->type != PV_LIST)
                return RFAIL("APPEND target is a %s, not a list", pv_type_name((pv_type)l->type));
            if (pv_list_append(r->a, l, r->stack[r->sp - 1]))
                return ROOM();
            st = adopt(r, l, r->stack + r->sp - 1, 1);
            r->sp--;
            break;
        }
        case OP_POP:
            if (r->nmarks && r->marks[r->nmarks - 1] == r->sp)
                r->nmarks--;
            else if (avail)
                r->sp--;
            else
                return underflow(r);
            break;
        case OP_POP_MARK: {
            size_t m = 0;
            if ((st = pop_mark(r, &m)) == SUBLET_OK)
                r->sp = m;
            break;
        }
        case OP_DUP:
            if (!avail)
                return underflow(r);
            st = push(r, r->stack[r->sp - 1]);
            break;
        case OP_GET:
        case OP_PUT: {
            size_t idx = 0;
            if ((st = text_index(r, &idx)) == SUBLET_OK)
                st = op == OP_GET ? memo_get(r, idx) : memo_put(r, idx);
            break;
        }
        case OP_PROTO:
            NEED(1);
            if (*r->p > 5)
                return RFAIL("unsupported pickle protocol %u (this reader knows 0 to 5)", *r->p);
            r->p++;
            break;
        case OP_FRAME: {
            NEED(8);
            uint64_t n = le(r->p, 8);
            r->p += 8;
            if (n > left(r))
                return RFAIL("truncated pickle: FRAME announces %llu bytes, %zu left",
                             (unsigned long long)n, left(r));
            break;
        }
        case OP_STOP:
            if (!avail)
                return underflow(r);
            *out = r->stack[r->sp - 1];
            return SUBLET_OK;
        default:
            if (opname(op))
                return RFAIL("opcode %s (0x%02x) not supported: snapshots hold only plain data",
                             opname(op), op);
            return RFAIL("unknown opcode 0x%02x", op);
        }
    }
}

sublet_status pv_pickle_parse(const uint8_t *buf, size_t len, pv_arena *a, pyval **out,
                              char *err, size_t cap) {
    if (a && out)
        *out = NULL;
    sl_inflated in;
    sublet_status st = sl_parse_input(buf, len, a && out, &in, err, cap);
    if (st)
        return st;
    const uint8_t *data = in.data;
    size_t n = in.len;
    uint8_t *owned = in.owned;
    rd *r = calloc(1, sizeof *r);
    if (!r) {
        free(owned);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "byte 0: out of memory");
    }
    r->base = r->p = data;
    r->end = data + n;
    r->a = a;
    r->inflated = owned != NULL;
    r->err = err;
    r->cap = cap;
    r->memo_limit = n + 1;
    r->scap = 256;
    r->stack = malloc(r->scap * sizeof *r->stack); /* never NULL: stack + m is used */
    pyval *root = NULL;
    st = r->stack ? load(r, &root) : rfail_at(r, SUBLET_ERR_NO_MEMORY, 0, "out of memory");
    if (!st && !r->dirty) {
        *out = root;
    } else if (!st) {
        char why[200];
        st = pv_check_tree(root, why, sizeof why);
        if (st)
            rfail_at(r, st, r->op_off, "%s", why);
        else
            *out = root;
    }
    free(r->stack);
    free(r->memo);
    free(r);
    free(owned);
    return st;
}
