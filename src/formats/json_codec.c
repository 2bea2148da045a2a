/* sublet — JSON reader and writer over the pyval model.  See json_codec.h. */
#include "formats/json_codec.h"
#include "base/errmsg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gz.h"

#define INTERN_MAX 64 /* strings up to this length are shared */

/* ---- UTF-8 ---------------------------------------------------------------------- */
/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 when invalid.
 * With allow_surrogate, ED A0..BF xx (an encoded surrogate) counts as valid. */
static size_t utf8_len(const uint8_t *s, size_t n, bool allow_surrogate) {
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    size_t k;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed && !allow_surrogate)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j < k; j++)
        if ((s[j] & 0xc0) != 0x80)
            return 0;
    return k;
}

static uint32_t utf8_decode(const uint8_t *s, size_t k) {
    if (k == 1)
        return s[0];
    uint32_t cp = s[0] & (0xff >> (k + 1));
    for (size_t j = 1; j < k; j++)
        cp = cp << 6 | (s[j] & 0x3f);
    return cp;
}

static size_t utf8_encode(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xc0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xe0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

/* ---- reader ------------------------------------------------------------------------ */
typedef struct jframe {
    pyval *c;
    pyval *key;
} jframe;

typedef struct jr {
    const uint8_t *base, *p, *end;
    pv_arena *a;
    jframe st[PV_MAX_DEPTH];
    size_t sp;
    pyval **itab; /* interned strings */
    size_t icap, in;
    uint8_t *tmp;
    size_t tcap;
    bool inflated;
    char *err;
    size_t cap;
} jr;

static sublet_status jfail_at(jr *r, sublet_status st, const uint8_t *at, const char *fmt, ...) {
    if (r->err && r->cap) {
        size_t line = 1, col = 1;
        for (const uint8_t *q = r->base; q < at; q++) {
            if (*q == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        int k = snprintf(r->err, r->cap, "line %zu, column %zu (byte %zu%s): ", line, col,
                         (size_t)(at - r->base), r->inflated ? " of the inflated data" : "");
        if (k >= 0 && (size_t)k < r->cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + k, r->cap - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return st;
}

#define JFAIL(at, ...) jfail_at(r, SUBLET_ERR_PARSE, (at), __VA_ARGS__)
#define JROOM() jfail_at(r, SUBLET_ERR_NO_MEMORY, r->p, "out of memory")

static void ws(jr *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

static uint32_t fnv(const uint8_t *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t k = 0; k < n; k++)
        h = (h ^ s[k]) * 16777619u;
    return h;
}

static pyval *make_str(jr *r, const uint8_t *s, size_t n) {
    if (n > INTERN_MAX)
        return pv_new_str(r->a, (const char *)s, n);
    if ((r->in + 1) * 2 > r->icap) {
        size_t nc = r->icap ? r->icap * 2 : 1024;
        pyval **t = calloc(nc, sizeof *t);
        if (!t)
            return NULL;
        for (size_t k = 0; k < r->icap; k++) {
            pyval *v = r->itab[k];
            if (!v)
                continue;
            size_t j = fnv((const uint8_t *)v->u.s, v->n) & (nc - 1);
            while (t[j])
                j = (j + 1) & (nc - 1);
            t[j] = v;
        }
        free(r->itab);
        r->itab = t;
        r->icap = nc;
    }
    size_t j = fnv(s, n) & (r->icap - 1);
    for (; r->itab[j]; j = (j + 1) & (r->icap - 1)) {
        pyval *v = r->itab[j];
        if (v->n == n && memcmp(v->u.s, s, n) == 0)
            return v;
    }
    pyval *v = pv_new_str(r->a, (const char *)s, n);
    if (v) {
        r->itab[j] = v;
        r->in++;
    }
    return v;
}

static bool tmp_room(jr *r, size_t need) {
    if (need <= r->tcap)
        return true;
    size_t nc = r->tcap ? r->tcap : 256;
    while (nc < need)
        nc *= 2;
    uint8_t *t = realloc(r->tmp, nc);
    if (!t)
        return false;
    r->tmp = t;
    r->tcap = nc;
    return true;
}

static int hex4(const uint8_t *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        int c = p[k], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* r->p at the opening quote. */
static sublet_status jstring(jr *r, pyval **out) {
    const uint8_t *open = r->p++, *s = r->p;
    while (r->p < r->end) {
        uint8_t c = *r->p;
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
            break;
        r->p++;
    }
    if (r->p < r->end && *r->p == '"') {
        *out = make_str(r, s, (size_t)(r->p - s));
        r->p++;
        return *out ? SUBLET_OK : JROOM();
    }
    size_t n = (size_t)(r->p - s);
    if (!tmp_room(r, n + 64))
        return JROOM();
    memcpy(r->tmp, s, n);
    for (;;) {
        if (r->p >= r->end)
            return JFAIL(open, "unterminated string");
        if (!tmp_room(r, n + 8))
            return JROOM();
        uint8_t c = *r->p;
        if (c == '"') {
            r->p++;
            break;
        }
        if (c < 0x20)
            return JFAIL(r->p, "invalid control character 0x%02x in a string", c);
        if (c >= 0x80) {
            size_t k = utf8_len(r->p, (size_t)(r->end - r->p), false);
            if (!k)
                return JFAIL(r->p, "invalid UTF-8 in a string");
            memcpy(r->tmp + n, r->p, k);
            n += k;
            r->p += k;
            continue;
        }
        if (c != '\\') {
            r->tmp[n++] = c;
            r->p++;
            continue;
        }
        if (r->end - r->p < 2)
            return JFAIL(open, "unterminated string");
        uint8_t e = r->p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const uint8_t map[] = {'"', '\\', '/', '\b', '\f', '\n', '\r', '\t'};
            r->tmp[n++] = map[simple - "\"\\/bfnrt"];
            r->p += 2;
            continue;
        }
        if (e != 'u')
            return JFAIL(r->p, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
        int cp = r->end - r->p >= 6 ? hex4(r->p + 2) : -1;
        if (cp < 0)
            return JFAIL(r->p, "invalid \\u escape");
        r->p += 6;
        uint32_t u = (uint32_t)cp;
        if (u >= 0xd800 && u <= 0xdbff && r->end - r->p >= 6 && r->p[0] == '\\' &&
            r->p[1] == 'u') {
            int lo = hex4(r->p + 2);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
                u = 0x10000 + ((u - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                r->p += 6;
            }
        }
        n += utf8_encode(r->tmp + n, u);
    }
    *out = make_str(r, r->tmp, n);
    return *out ? SUBLET_OK : JROOM();
}

static bool literal(jr *r, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return false;
    r->p += n;
    return true;
}

static bool isdig(const jr *r) { return r->p < r->end && *r->p >= '0' && *r->p <= '9'; }

static sublet_status jnumber(jr *r, pyval **out) {
    const uint8_t *s = r->p;
    bool neg = *r->p == '-';
    if (neg)
        r->p++;
    if (neg && literal(r, "Infinity")) {
        *out = pv_new_float(r->a, -INFINITY);
        return *out ? SUBLET_OK : JROOM();
    }
    if (!isdig(r))
        return JFAIL(s, "invalid number");
    if (*r->p == '0') {
        r->p++;
        if (isdig(r))
            return JFAIL(s, "invalid number (leading zero)");
    } else {
        while (isdig(r))
            r->p++;
    }
    bool is_float = false;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (!isdig(r))
            return JFAIL(s, "invalid number (no digit after '.')");
        while (isdig(r))
            r->p++;
        is_float = true;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (!isdig(r))
            return JFAIL(s, "invalid number (no digit in the exponent)");
        while (isdig(r))
            r->p++;
        is_float = true;
    }
    size_t n = (size_t)(r->p - s);
    if (!is_float) {
        size_t nd = n - neg;
        if (nd <= 18) {
            int64_t v = 0;
            for (const uint8_t *q = s + neg; q < r->p; q++)
                v = v * 10 + (*q - '0');
            *out = pv_new_int(r->a, neg ? -v : v);
        } else {
            *out = pv_new_int_text(r->a, (const char *)s, n);
        }
        return *out ? SUBLET_OK : JROOM();
    }
    if (!tmp_room(r, n + 1))
        return JROOM();
    memcpy(r->tmp, s, n);
    r->tmp[n] = '\0';
    *out = pv_new_float(r->a, strtod((const char *)r->tmp, NULL));
    return *out ? SUBLET_OK : JROOM();
}

static sublet_status jparse(jr *r, pyval **out) {
    sublet_status st;
    pyval *v = NULL;
    if (r->end - r->p >= 3 && memcmp(r->p, "\xef\xbb\xbf", 3) == 0)
        r->p += 3;
value:
    ws(r);
    if (r->p >= r->end)
        return JFAIL(r->p, "unexpected end of input (expected a value)");
    switch (*r->p) {
    case '{':
    case '[': {
        bool obj = *r->p == '{';
        if (r->sp >= PV_MAX_DEPTH)
            return JFAIL(r->p, "arrays/objects nested deeper than %d", PV_MAX_DEPTH);
        pyval *c = obj ? pv_new_dict(r->a) : pv_new_list(r->a);
        if (!c)
            return JROOM();
        r->p++;
        ws(r);
        if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
            r->p++;
            v = c;
            goto got;
        }
        r->st[r->sp++] = (jframe){c, NULL};
        if (obj)
            goto key;
        goto value;
    }
    case '"':
        if ((st = jstring(r, &v)))
            return st;
        goto got;
    case 't':
    case 'f':
    case 'n':
    case 'N':
    case 'I': {
        static const char *const words[] = {"true", "false", "null", "NaN", "Infinity"};
        const uint8_t *at = r->p;
        if (literal(r, words[0]))
            v = pv_bool(true);
        else if (literal(r, words[1]))
            v = pv_bool(false);
        else if (literal(r, words[2]))
            v = pv_none();
        else if (literal(r, words[3]))
            v = pv_new_float(r->a, NAN);
        else if (literal(r, words[4]))
            v = pv_new_float(r->a, INFINITY);
        else
            return JFAIL(at, "invalid literal");
        if (!v)
            return JROOM();
        goto got;
    }
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) {
            if ((st = jnumber(r, &v)))
                return st;
            goto got;
        }
        return JFAIL(r->p, "unexpected character '%c' (expected a value)",
                     *r->p >= 0x20 && *r->p < 0x7f ? *r->p : '?');
    }
key:
    ws(r);
    if (r->p >= r->end || *r->p != '"')
        return JFAIL(r->p, r->p >= r->end ? "unexpected end of input (expected a string key)"
                                          : "expected a string key");
    if ((st = jstring(r, &r->st[r->sp - 1].key)))
        return st;
    ws(r);
    if (r->p >= r->end || *r->p != ':')
        return JFAIL(r->p, "expected ':' after an object key");
    r->p++;
    goto value;
got:
    if (!r->sp) {
        ws(r);
        if (r->p != r->end)
            return JFAIL(r->p, "extra data after the JSON value");
        *out = v;
        return SUBLET_OK;
    }
    {
        jframe *f = &r->st[r->sp - 1];
        bool obj = f->c->type == PV_DICT;
        st = obj ? pv_dict_set(r->a, f->c, f->key, v) : pv_list_append(r->a, f->c, v);
        if (st)
            return JROOM();
        ws(r);
        if (r->p >= r->end)
            return JFAIL(r->p, "unexpected end of input (expected ',' or '%c')", obj ? '}' : ']');
        if (*r->p == ',') {
            r->p++;
            if (obj)
                goto key;
            goto value;
        }
        if (*r->p == (obj ? '}' : ']')) {
            r->p++;
            v = f->c;
            r->sp--;
            goto got;
        }
        return JFAIL(r->p, "expected ',' or '%c'", obj ? '}' : ']');
    }
}

sublet_status pv_json_parse(const uint8_t *buf, size_t len, pv_arena *a, pyval **out, char *err,
                            size_t cap) {
    if (a && out)
        *out = NULL;
    sl_inflated in;
    sublet_status st = sl_parse_input(buf, len, a && out, &in, err, cap);
    if (st)
        return st;
    const uint8_t *data = in.data;
    size_t n = in.len;
    uint8_t *owned = in.owned;
    jr *r = calloc(1, sizeof *r);
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
    st = jparse(r, out);
    if (st)
        *out = NULL;
    free(r->itab);
    free(r->tmp);
    free(r);
    free(owned);
    return st;
}

/* ---- writer ------------------------------------------------------------------------------ */
typedef struct jwframe {
    const pyval *v;
    size_t i;
} jwframe;

typedef struct jw {
    pv_buf *out;
    unsigned flags;
    jwframe st[PV_MAX_DEPTH + 1];
    size_t sp;
    sublet_status bad;
    char *err;
    size_t cap;
} jw;

static void wfail(jw *w, sublet_status st, const char *msg) {
    if (w->bad)
        return;
    w->bad = st;
    sl_msg(w->err, w->cap, "%s", msg);
}

static void wput(jw *w, const void *p, size_t n) {
    if (!w->bad && pv_buf_append(w->out, p, n))
        wfail(w, SUBLET_ERR_NO_MEMORY, "out of memory");
}

static void wputs(jw *w, const char *s) { wput(w, s, strlen(s)); }

/* Python's repr(float) for a finite double. */
static size_t fmt_float(char *o, double d) {
    char e[40];
    /* 15 significant digits, stripped, are the shortest form whenever that
     * has at most 15 digits; subnormals have fewer bits: search from 1. */
    for (int p = fabs(d) < 2.2250738585072014e-308 ? 1 : 15; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    char dig[24];
    size_t nd = 0, on = 0;
    const char *q = e;
    if (*q == '-')
        o[on++] = *q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            dig[nd++] = *q;
    int ex = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    if (ex >= -4 && ex < 16) {
        if (ex >= 0) {
            for (int k = 0; k <= ex; k++)
                o[on++] = (size_t)k < nd ? dig[k] : '0';
            o[on++] = '.';
            if ((size_t)ex + 1 < nd)
                for (size_t k = (size_t)ex + 1; k < nd; k++)
                    o[on++] = dig[k];
            else
                o[on++] = '0';
        } else {
            o[on++] = '0';
            o[on++] = '.';
            for (int k = 0; k < -ex - 1; k++)
                o[on++] = '0';
            for (size_t k = 0; k < nd; k++)
                o[on++] = dig[k];
        }
    } else {
        o[on++] = dig[0];
        if (nd > 1) {
            o[on++] = '.';
            for (size_t k = 1; k < nd; k++)
                o[on++] = dig[k];
        }
        on += (size_t)sprintf(o + on, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    o[on] = '\0';
    return on;
}

/* A JSON string of n bytes; latin1: every byte is one code point (bytes). */
static void wstring(jw *w, const uint8_t *s, size_t n, bool latin1) {
    static const char hexd[] = "0123456789abcdef";
    bool ascii = w->flags & PV_JSON_ASCII;
    wput(w, "\"", 1);
    size_t i = 0;
    while (i < n && !w->bad) {
        if (pv_buf_reserve(w->out, 4096 * 12 + 16)) {
            wfail(w, SUBLET_ERR_NO_MEMORY, "out of memory");
            return;
        }
        uint8_t *o = w->out->data + w->out->len;
        size_t stop = n - i > 4096 ? i + 4096 : n, on = 0;
        while (i < stop) {
            uint8_t c = s[i];
            if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
                o[on++] = c;
                i++;
                continue;
            }
            uint32_t cp;
            size_t k = 1;
            if (c < 0x80) {
                const char *sh = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                               : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                               : c == '\f' ? "\\f" : NULL;
                i++;
                if (sh) {
                    o[on++] = (uint8_t)sh[0];
                    o[on++] = (uint8_t)sh[1];
                    continue;
                }
                if (c == 0x7f && !ascii) {
                    o[on++] = c;
                    continue;
                }
                cp = c;
            } else if (latin1) {
                cp = c;
                i++;
                if (!ascii) {
                    on += utf8_encode(o + on, cp);
                    continue;
                }
            } else {
                k = utf8_len(s + i, n - i, true);
                if (!k) { /* not UTF-8: the byte's latin-1 reading */
                    cp = c;
                    i++;
                } else {
                    cp = utf8_decode(s + i, k);
                    bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
                    if (!ascii && !surrogate) {
                        memcpy(o + on, s + i, k);
                        on += k;
                        i += k;
                        continue;
                    }
                    i += k;
                }
            }
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000, hi = 0xd800 + (v >> 10), lo = 0xdc00 + (v & 0x3ff);
                for (int j = 0; j < 2; j++) {
                    uint32_t u = j ? lo : hi;
                    o[on++] = '\\';
                    o[on++] = 'u';
                    for (int b = 12; b >= 0; b -= 4)
                        o[on++] = (uint8_t)hexd[(u >> b) & 15];
                }
            } else {
                o[on++] = '\\';
                o[on++] = 'u';
                for (int b = 12; b >= 0; b -= 4)
                    o[on++] = (uint8_t)hexd[(cp >> b) & 15];
            }
        }
        w->out->len += on;
    }
    wput(w, "\"", 1);
}

/* Scalar text (numbers, literals) into o; returns its length. */
static size_t scalar_text(const pyval *v, char *o, bool as_key) {
    switch (v->type) {
    case PV_NONE: return (size_t)sprintf(o, "null");
    case PV_BOOL: return (size_t)sprintf(o, v->u.i ? "true" : "false");
    case PV_INT:
        if (v->flags & PV_F_UINT64)
            return (size_t)sprintf(o, "%llu", (unsigned long long)v->u.u);
        return (size_t)sprintf(o, "%lld", (long long)v->u.i);
    case PV_FLOAT:
        if (isfinite(v->u.f))
            return fmt_float(o, v->u.f);
        if (!as_key)
            return (size_t)sprintf(o, "null");
        return (size_t)sprintf(o, "%s", isnan(v->u.f) ? "NaN" : v->u.f > 0 ? "Infinity" : "-Infinity");
    default: return 0;
    }
}

static void wkey(jw *w, const pyval *k) {
    char tmp[64];
    switch (k->type) {
    case PV_STR: wstring(w, (const uint8_t *)k->u.s, k->n, false); return;
    case PV_BYTES: wstring(w, (const uint8_t *)k->u.s, k->n, true); return;
    case PV_BIGINT: wstring(w, (const uint8_t *)k->u.s, k->n, false); return;
    case PV_TUPLE: {
        pv_buf b = {0};
        sublet_status st = pv_json_write(k, w->flags, &b, NULL, 0);
        if (st)
            wfail(w, st, "a tuple dict key could not be written");
        else
            wstring(w, b.data, b.len, false);
        pv_buf_free(&b);
        return;
    }
    default: {
        size_t n = scalar_text(k, tmp, true);
        wstring(w, (const uint8_t *)tmp, n, false);
    }
    }
}

static void wvalue(jw *w, const pyval *v) {
    char tmp[64];
    if (!v) {
        wfail(w, SUBLET_ERR_INVALID_ARGUMENT, "a NULL value in the tree");
        return;
    }
    switch (v->type) {
    case PV_STR: wstring(w, (const uint8_t *)v->u.s, v->n, false); return;
    case PV_BYTES: wstring(w, (const uint8_t *)v->u.s, v->n, true); return;
    case PV_BIGINT: wput(w, v->u.s, v->n); return;
    case PV_LIST:
    case PV_TUPLE:
    case PV_DICT:
        if (w->sp >= PV_MAX_DEPTH) {
            wfail(w, SUBLET_ERR_UNSUPPORTED, "containers nested too deep (or a recursive structure)");
            return;
        }
        wput(w, v->type == PV_DICT ? "{" : "[", 1);
        w->st[w->sp++] = (jwframe){v, 0};
        return;
    default: wput(w, tmp, scalar_text(v, tmp, false));
    }
}

sublet_status pv_json_write(const pyval *v, unsigned flags, pv_buf *out, char *err, size_t cap) {
    if (err && cap)
        err[0] = '\0';
    if (!v || !out) {
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "invalid argument");
    }
    jw *w = calloc(1, sizeof *w);
    if (!w) {
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    w->out = out;
    w->flags = flags;
    w->err = err;
    w->cap = cap;
    size_t start = out->len;
    const char *comma = (flags & PV_JSON_SPACES) ? ", " : ",";
    const char *colon = (flags & PV_JSON_SPACES) ? ": " : ":";
    wvalue(w, v);
    while (w->sp && !w->bad) {
        jwframe *f = &w->st[w->sp - 1];
        const pyval *c = f->v;
        if (f->i == c->n) {
            wput(w, c->type == PV_DICT ? "}" : "]", 1);
            w->sp--;
            continue;
        }
        if (f->i)
            wputs(w, comma);
        size_t i = f->i++;
        if (c->type == PV_DICT) {
            wkey(w, c->u.d->kv[2 * i]);
            wputs(w, colon);
            wvalue(w, c->u.d->kv[2 * i + 1]);
        } else {
            wvalue(w, c->u.items[i]);
        }
    }
    sublet_status st = w->bad;
    if (st)
        out->len = start;
    free(w);
    return st;
}
