/* sublet — tests of the Python value model and its codecs: the pickle reader
 * and writer, the JSON reader and writer, and gzip detection.
 *
 * SUBLET_SHARED: ../shared; the snapshot pickles in traces/pytorch_snapshot
 *                are parsed when present (skip otherwise).
 * python3 on PATH: interoperability with CPython's pickle and json modules
 *                (skip otherwise). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/gz.h"
#include "formats/json_codec.h"
#include "formats/pickle.h"
#include "formats/pyval.h"

#define PK(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)

static char err[512];

static pyval *parse_ok_at(pv_arena *a, const uint8_t *b, size_t n, int line) {
    pyval *v = NULL;
    sublet_status st = pv_pickle_parse(b, n, a, &v, err, sizeof err);
    if (st)
        fail_msg("line %d: parse failed (%d): %s", line, st, err);
    assert_non_null(v);
    return v;
}
#define parse_ok(a, ...) parse_ok_at((a), __VA_ARGS__, __LINE__)

/* Parse must fail with SUBLET_ERR_PARSE and an error naming a byte and `want`. */
static void parse_bad_at(const uint8_t *b, size_t n, const char *want, int line) {
    pv_arena *a = pv_arena_create();
    pyval *v = NULL;
    sublet_status st = pv_pickle_parse(b, n, a, &v, err, sizeof err);
    if (st != SUBLET_ERR_PARSE || !strstr(err, "byte") || (want && !strstr(err, want)))
        fail_msg("line %d: expected a parse error with \"%s\", got %d: %s", line,
                 want ? want : "", st, err);
    assert_null(v);
    pv_arena_destroy(a);
}
#define parse_bad(lit, want) parse_bad_at(PK(lit), (want), __LINE__)

static pyval *S(pv_arena *a, const char *s) { return pv_new_strz(a, s); }
static pyval *I(pv_arena *a, int64_t v) { return pv_new_int(a, v); }
static pyval *T(pv_arena *a, size_t n, ...) {
    pyval *items[16];
    va_list ap;
    va_start(ap, n);
    for (size_t k = 0; k < n; k++)
        items[k] = va_arg(ap, pyval *);
    va_end(ap);
    return pv_new_tuple(a, items, n);
}
static pyval *L(pv_arena *a, size_t n, ...) {
    pyval *l = pv_new_list(a);
    va_list ap;
    va_start(ap, n);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(pv_list_append(a, l, va_arg(ap, pyval *)), SUBLET_OK);
    va_end(ap);
    return l;
}
static void put(pv_arena *a, pyval *d, const char *k, pyval *v) {
    assert_int_equal(pv_dict_set_str(a, d, k, v), SUBLET_OK);
}

/* ---- memory_viz opcode subset ------------------------------------------------------------ */
static uint64_t le_n(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* Every opcode of b is one MemoryViz.js reads, and the pickle ends at STOP. */
static bool viz_readable(const uint8_t *b, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t op = b[i++];
        size_t arg = 0;
        switch (op) {
        case 0x80: arg = 1; if (i >= n || b[i] < 2 || b[i] > 4) return false; break;
        case 0x95: arg = 8; break;
        case '.': return i == n;
        case '(': case '}': case 'd': case 's': case 'u': case ']': case 'l': case 'a':
        case 'e': case ')': case 't': case 0x85: case 0x86: case 0x87: case 'N': case 0x88:
        case 0x89: case 0x94: break;
        case 'J': case 'r': case 'j': arg = 4; break;
        case 'K': case 'q': case 'h': arg = 1; break;
        case 'M': arg = 2; break;
        case 'G': arg = 8; break;
        case 0x8a: case 0x8c: if (i >= n) return false; arg = 1 + b[i]; break;
        case 'X': if (i + 4 > n) return false; arg = 4 + le_n(b + i, 4); break;
        default: return false;
        }
        i += arg;
    }
    return false;
}

/* ---- Python-made vectors (pickle.dumps of one object with protocols 0, 2, 4, 5) ------------- */
/* {'a': [1, -2, 300, 70000, 2**40, 2**64-1, 2**70], 'b': (1.5, None, True, False),
 *  's': 'hé€', 't': ((), (1,), (1, 2, 3, 4)), 'k': {}, 'r': [sh, sh]} with sh = ['x'] */
static const char V0[] =
    "(dp0\x0aVa\x0ap1\x0a(lp2\x0aI1\x0a""aI-2\x0a""aI300\x0a""aI70000\x0a""aL1099511627776L\x0a"
    "aL18446744073709551615L\x0a""aL1180591620717411303424L\x0a""asVb\x0ap3\x0a(F1.5\x0aNI01\x0a"
    "I00\x0atp4\x0asVs\x0ap5\x0aVh\xe9\x5cu20ac\x0ap6\x0asVt\x0ap7\x0a((t(I1\x0atp8\x0a(I1\x0aI2\x0a"
    "I3\x0aI4\x0atp9\x0atp10\x0asVk\x0ap11\x0a(dp12\x0asVr\x0ap13\x0a(lp14\x0a(lp15\x0aVx\x0ap16\x0a"
    "aag15\x0a""as.";
static const char V2[] =
    "\x80\x02}q\x00(X\x01\x00\x00\x00""aq\x01]q\x02(K\x01J\xfe\xff\xff\xffM,\x01Jp\x11\x01\x00\x8a"
    "\x06\x00\x00\x00\x00\x00\x01\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00\x8a\x09\x00\x00\x00"
    "\x00\x00\x00\x00\x00@eX\x01\x00\x00\x00""bq\x03(G?\xf8\x00\x00\x00\x00\x00\x00N\x88\x89tq\x04"
    "X\x01\x00\x00\x00sq\x05X\x06\x00\x00\x00h\xc3\xa9\xe2\x82\xacq\x06X\x01\x00\x00\x00tq\x07)K"
    "\x01\x85q\x08(K\x01K\x02K\x03K\x04tq\x09\x87q\x0aX\x01\x00\x00\x00kq\x0b}q\x0cX\x01\x00\x00"
    "\x00rq\x0d]q\x0e(]q\x0fX\x01\x00\x00\x00xq\x10""ah\x0f""eu.";
static const char V4[] =
    "\x80\x04\x95\x87\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01""a\x94]\x94(K\x01J\xfe\xff\xff"
    "\xffM,\x01Jp\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x09\xff\xff\xff\xff\xff\xff\xff"
    "\xff\x00\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00@e\x8c\x01""b\x94(G?\xf8\x00\x00\x00\x00\x00"
    "\x00N\x88\x89t\x94\x8c\x01s\x94\x8c\x06h\xc3\xa9\xe2\x82\xac\x94\x8c\x01t\x94)K\x01\x85\x94("
    "K\x01K\x02K\x03K\x04t\x94\x87\x94\x8c\x01k\x94}\x94\x8c\x01r\x94]\x94(]\x94\x8c\x01x\x94""a"
    "h\x0f""eu.";
/* {'by': b'\x00\xff', 'set': {3}, 'fs': frozenset([4]), 'ba': bytearray(b'xy')}, protocol 5 */
static const char V5X[] =
    "\x80\x05\x95""6\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x02""by\x94""C\x02\x00\xff\x94\x8c\x03"
    "set\x94\x8f\x94(K\x03\x90\x8c\x02""fs\x94(K\x04\x91\x94\x8c\x02""ba\x94\x96\x02\x00\x00\x00"
    "\x00\x00\x00\x00xy\x94u.";

static pyval *small_expected(pv_arena *a) {
    pyval *d = pv_new_dict(a);
    put(a, d, "a",
        L(a, 7, I(a, 1), I(a, -2), I(a, 300), I(a, 70000), I(a, (int64_t)1 << 40),
          pv_new_uint(a, UINT64_MAX), pv_new_int_text(a, "1180591620717411303424", 22)));
    put(a, d, "b", T(a, 4, pv_new_float(a, 1.5), pv_none(), pv_bool(true), pv_bool(false)));
    put(a, d, "s", S(a, "h\xc3\xa9\xe2\x82\xac"));
    put(a, d, "t", T(a, 3, T(a, 0), T(a, 1, I(a, 1)), T(a, 4, I(a, 1), I(a, 2), I(a, 3), I(a, 4))));
    put(a, d, "k", pv_new_dict(a));
    pyval *sh = L(a, 1, S(a, "x"));
    put(a, d, "r", L(a, 2, sh, sh));
    return d;
}

static void test_python_vectors(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    pyval *want = small_expected(a);
    const struct {
        const char *b;
        size_t n;
    } vec[] = {{V0, sizeof V0 - 1}, {V2, sizeof V2 - 1}, {V4, sizeof V4 - 1}};
    for (size_t k = 0; k < 3; k++) {
        pyval *v = parse_ok(a, (const uint8_t *)vec[k].b, vec[k].n);
        assert_true(pv_equal(v, want, PV_EQ_STRICT));
        const pyval *r = pv_dict_get(v, "r"); /* the memo shares the inner list */
        assert_ptr_equal(pv_list_at(r, 0), pv_list_at(r, 1));
        uint64_t u;
        assert_true(pv_as_uint64(pv_list_at(pv_dict_get(v, "a"), 5), &u));
        assert_true(u == UINT64_MAX);
        int64_t i;
        assert_false(pv_as_int(pv_list_at(pv_dict_get(v, "a"), 5), &i));
        size_t n;
        assert_string_equal(pv_bigint_digits(pv_list_at(pv_dict_get(v, "a"), 6), &n),
                            "1180591620717411303424");
    }
    /* protocol 5: the same bytes as protocol 4 apart from PROTO */
    char v5[sizeof V4];
    memcpy(v5, V4, sizeof V4);
    v5[1] = 5;
    assert_true(pv_equal(parse_ok(a, (const uint8_t *)v5, sizeof V4 - 1), want, PV_EQ_STRICT));
    /* bytes, set (EMPTY_SET/ADDITEMS), frozenset, bytearray (BYTEARRAY8) */
    pyval *x = parse_ok(a, PK(V5X));
    size_t n;
    const uint8_t *by = pv_bytes(pv_dict_get(x, "by"), &n);
    assert_non_null(by);
    assert_int_equal(n, 2);
    assert_int_equal(by[1], 0xff);
    const pyval *set = pv_dict_get(x, "set");
    assert_int_equal(pv_typeof(set), PV_LIST);
    assert_true(set->flags & PV_F_SET);
    int64_t i;
    assert_true(pv_as_int(pv_list_at(set, 0), &i) && i == 3);
    assert_true(pv_as_int(pv_list_at(pv_dict_get(x, "fs"), 0), &i) && i == 4);
    assert_non_null(pv_bytes(pv_dict_get(x, "ba"), &n));
    assert_int_equal(n, 2);
    pv_arena_destroy(a);
}

/* ---- hand-built pickles per opcode family -------------------------------------------------- */
static void test_text_opcodes(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    int64_t i;
    double f;
    bool b;
    assert_true(pv_as_int(parse_ok(a, PK("I42\n.")), &i) && i == 42);
    assert_true(pv_as_int(parse_ok(a, PK("I-7\r\n.")), &i) && i == -7);
    assert_true(pv_as_bool(parse_ok(a, PK("I01\n.")), &b) && b);
    assert_true(pv_as_bool(parse_ok(a, PK("I00\n.")), &b) && !b);
    assert_true(pv_as_int(parse_ok(a, PK("L-9223372036854775808L\n.")), &i) && i == INT64_MIN);
    assert_string_equal(pv_bigint_digits(parse_ok(a, PK("L-00123456789012345678901234567890\n.")), NULL),
                        "-123456789012345678901234567890");
    assert_true(pv_as_double(parse_ok(a, PK("F-2.5e3\n.")), &f) && f == -2500.0);
    assert_true(pv_as_double(parse_ok(a, PK("Finf\n.")), &f) && isinf(f));
    assert_true(pv_str_eq(parse_ok(a, PK("S'it\\'s \\x41\\101\\n'\np0\n.")), "it's AA\n"));
    assert_true(pv_str_eq(parse_ok(a, PK("S\"q\"\n.")), "q"));
    /* raw-unicode-escape: latin-1 bytes, \u, \U, and an escaped backslash */
    assert_true(pv_str_eq(parse_ok(a, PK("Vcaf\xe9 \\u20ac \\U0001f600 \\\\u\n.")),
                          "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\\\u"));
    size_t n;
    const char *s = pv_str(parse_ok(a, PK("Vnul\\u0000in\n.")), &n);
    assert_int_equal(n, 6);
    assert_int_equal(memcmp(s, "nul\0in", 6), 0);
    /* DICT / LIST / TUPLE from a MARK, PUT/GET, SETITEM/APPEND */
    pyval *v = parse_ok(a, PK("(dp0\nS'k'\np1\n(lp2\nI1\naI2\nasS'j'\np3\n(I1\nS'k'\np4\ntp5\ns."));
    assert_non_null(pv_dict_get(v, "k"));
    assert_int_equal(pv_list_len(pv_dict_get(v, "k")), 2);
    assert_int_equal(pv_typeof(pv_dict_get(v, "j")), PV_TUPLE);
    v = parse_ok(a, PK("(lp0\nS'x'\np1\nag1\na(S'k'\nI5\nda."));
    assert_int_equal(pv_list_len(v), 3);
    assert_ptr_equal(pv_list_at(v, 0), pv_list_at(v, 1));
    assert_int_equal(pv_list_len(parse_ok(a, PK("(I1\nI2\nl."))), 2);
    assert_true(pv_as_int(pv_dict_get(parse_ok(a, PK("(S'k'\nI5\nd.")), "k"), &i) && i == 5);
    pv_arena_destroy(a);
}

static void test_binary_opcodes(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    int64_t i;
    size_t n;
    /* BININT family, LONG1 edge cases, LONG4 */
    assert_true(pv_as_int(parse_ok(a, PK("J\xff\xff\xff\xff.")), &i) && i == -1);
    assert_true(pv_as_int(parse_ok(a, PK("M\xff\xff.")), &i) && i == 65535);
    assert_true(pv_as_int(parse_ok(a, PK("\x8a\x00.")), &i) && i == 0);
    assert_true(pv_as_int(parse_ok(a, PK("\x8a\x01\x80.")), &i) && i == -128);
    assert_true(pv_as_int(parse_ok(a, PK("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.")), &i) &&
                i == INT64_MIN);
    assert_true(pv_as_int(parse_ok(a, PK("\x8a\x03\x05\x00\x00.")), &i) && i == 5);
    assert_true(pv_as_int(parse_ok(a, PK("\x8b\x02\x00\x00\x00\xff\xff.")), &i) && i == -1);
    assert_string_equal(
        pv_bigint_digits(parse_ok(a, PK("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xff.")), NULL),
        "-18446744073709551616");
    /* BINSTRING / SHORT_BINSTRING (Python 2 str) become str; BINUNICODE8; BINBYTES8 */
    assert_true(pv_str_eq(parse_ok(a, PK("U\x03""abc.")), "abc"));
    assert_true(pv_str_eq(parse_ok(a, PK("T\x02\x00\x00\x00hi.")), "hi"));
    assert_true(pv_str_eq(parse_ok(a, PK("\x8d\x01\x00\x00\x00\x00\x00\x00\x00z.")), "z"));
    assert_non_null(pv_bytes(parse_ok(a, PK("\x8e\x01\x00\x00\x00\x00\x00\x00\x00z.")), &n));
    assert_non_null(pv_bytes(parse_ok(a, PK("B\x01\x00\x00\x00z.")), &n));
    /* DUP, POP, POP_MARK, POP of a MARK */
    pyval *v = parse_ok(a, PK("\x80\x02K\x01""2\x86."));
    assert_ptr_equal(pv_list_at(v, 0), pv_list_at(v, 1));
    assert_true(pv_as_int(parse_ok(a, PK("K\x01K\x02""0.")), &i) && i == 1);
    assert_true(pv_typeof(parse_ok(a, PK("(K\x01K\x02""1N."))) == PV_NONE);
    assert_true(pv_as_int(parse_ok(a, PK("(0K\x05.")), &i) && i == 5);
    /* MEMOIZE / BINGET, BINPUT / LONG_BINGET, LONG_BINPUT / BINGET */
    v = parse_ok(a, PK("\x80\x04]\x94(\x8c\x01""a\x94h\x01""e."));
    assert_ptr_equal(pv_list_at(v, 0), pv_list_at(v, 1));
    v = parse_ok(a, PK("]q\x00(X\x01\x00\x00\x00""aq\x01j\x01\x00\x00\x00""e."));
    assert_ptr_equal(pv_list_at(v, 0), pv_list_at(v, 1));
    v = parse_ok(a, PK("](X\x01\x00\x00\x00""ar\x07\x00\x00\x00h\x07""e."));
    assert_ptr_equal(pv_list_at(v, 0), pv_list_at(v, 1));
    /* FRAME is a hint; bytes after STOP are ignored */
    assert_true(pv_as_int(parse_ok(a, PK("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x09.junk")),
                          &i) && i == 9);
    /* SETITEM replacing a value keeps the key's position */
    v = parse_ok(a, PK("}(K\x01K\x02K\x03K\x04K\x01K\x05u."));
    assert_int_equal(pv_dict_len(v), 2);
    assert_true(pv_as_int(pv_dict_key_at(v, 0), &i) && i == 1);
    assert_true(pv_as_int(pv_dict_value_at(v, 0), &i) && i == 5);
    /* numeric keys: 1, 1.0 and True are one key (Python equality) */
    pyval *k = pv_new_float(a, 1.0);
    assert_non_null(pv_dict_lookup(v, k));
    assert_non_null(pv_dict_lookup(v, pv_bool(true)));
    assert_null(pv_dict_lookup(v, pv_new_float(a, 1.5)));
    pv_arena_destroy(a);
}

static void test_errors(void **state) {
    (void)state;
    parse_bad("", "truncated");
    parse_bad(".", "underflow");
    parse_bad("a.", "underflow");
    parse_bad("K\x01(a.", "underflow"); /* the list is below the MARK */
    parse_bad("]K\x01K\x02(K\x03s.", "underflow");
    parse_bad("\x80\x02\x63""builtins\nset\n)R.", "byte 2: opcode GLOBAL (0x63) not supported");
    parse_bad("\x80\x04\x8c\x01""a\x8c\x01""b\x93.", "STACK_GLOBAL");
    parse_bad("N)R.", "REDUCE");
    parse_bad("N}b.", "BUILD");
    parse_bad("N)\x81.", "NEWOBJ");
    parse_bad("\xff.", "byte 0: unknown opcode 0xff");
    parse_bad("\x80\x06N.", "unsupported pickle protocol 6");
    parse_bad("\x95\xff\x00\x00\x00\x00\x00\x00\x00N.", "FRAME");
    parse_bad("}(K\x01u.", "odd number");
    parse_bad("](K\x01u.", "not a dict");
    parse_bad("}K\x01""a.", "not a list");
    parse_bad("}]K\x01s.", "not hashable");
    parse_bad("}](K\x01\x85K\x01s.", NULL); /* a list key inside MARK: underflow */
    parse_bad("}]\x85K\x01s.", "not hashable"); /* a tuple holding a list */
    parse_bad("h\x05.", "memo index 5 is not defined");
    parse_bad("K\x01r\xff\xff\xff\x7f.", "out of range");
    parse_bad("T\xff\xff\xff\xff.", "negative length");
    parse_bad("\x8b\xff\xff\xff\xff.", "negative length");
    parse_bad("Fabc\n.", "not a number");
    parse_bad("I12x\n.", "not a decimal integer");
    parse_bad("I12", "newline");
    parse_bad("S'abc\n.", "quoted");
    parse_bad("Vab\\u12\n.", "\\u");
    parse_bad("]e.", "MARK");
    parse_bad("X\x05\x00\x00\x00""ab.", "announces 5 bytes");
    parse_bad("]\x94h\x00""a.", "contains itself");
    parse_bad("}\x94K\x01h\x00s.", "contains itself");
    parse_bad("]\x94]h\x00""a\x94h\x00h\x01""a.", "contains itself");
}

/* Every strict prefix of a valid pickle is an error naming a byte, never a crash. */
static void truncations(const uint8_t *b, size_t n) {
    for (size_t k = 0; k < n; k++) {
        pv_arena *a = pv_arena_create();
        pyval *v = NULL;
        sublet_status st = pv_pickle_parse(b, k, a, &v, err, sizeof err);
        if (st != SUBLET_ERR_PARSE || !strstr(err, "byte"))
            fail_msg("prefix %zu of %zu: status %d, \"%s\"", k, n, st, err);
        pv_arena_destroy(a);
    }
}

static uint8_t *gzip_bytes(const uint8_t *b, size_t n, size_t *out_n) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&zs, (uLong)n) + 64;
    uint8_t *o = malloc(cap);
    zs.next_in = (Bytef *)(uintptr_t)b;
    zs.avail_in = (uInt)n;
    zs.next_out = o;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_n = cap - zs.avail_out;
    deflateEnd(&zs);
    return o;
}

static void test_truncated_every_prefix(void **state) {
    (void)state;
    truncations(PK(V0));
    truncations(PK(V2));
    truncations(PK(V4));
    truncations(PK(V5X));
    size_t gn;
    uint8_t *gz = gzip_bytes(PK(V4), &gn);
    truncations(gz, gn);
    free(gz);
}

static void test_nesting_limits(void **state) {
    (void)state;
    size_t n = 3 * PV_MAX_DEPTH + 16;
    uint8_t *b = malloc(n);
    pv_arena *a = pv_arena_create();
    pyval *v;
    /* N + TUPLE1 x depth: allowed at PV_MAX_DEPTH, refused above */
    for (int extra = 0; extra <= 1; extra++) {
        size_t k = 0, depth = PV_MAX_DEPTH + (size_t)extra;
        b[k++] = 'N';
        for (size_t j = 0; j < depth; j++)
            b[k++] = 0x85;
        b[k++] = '.';
        sublet_status st = pv_pickle_parse(b, k, a, &v, err, sizeof err);
        if (extra) {
            assert_int_equal(st, SUBLET_ERR_PARSE);
            assert_non_null(strstr(err, "nested deeper"));
        } else {
            assert_int_equal(st, SUBLET_OK);
            assert_int_equal(v->height, PV_MAX_DEPTH);
        }
    }
    /* nested lists without MARKs: ]]]...] then APPEND x (depth-1) */
    for (int extra = 0; extra <= 1; extra++) {
        size_t k = 0, depth = PV_MAX_DEPTH + (size_t)extra;
        for (size_t j = 0; j < depth; j++)
            b[k++] = ']';
        for (size_t j = 1; j < depth; j++)
            b[k++] = 'a';
        b[k++] = '.';
        assert_int_equal(pv_pickle_parse(b, k, a, &v, err, sizeof err),
                         extra ? SUBLET_ERR_PARSE : SUBLET_OK);
    }
    /* MARKs nested beyond the limit */
    memset(b, '(', PV_MAX_DEPTH + 1);
    b[PV_MAX_DEPTH + 1] = '.';
    assert_int_equal(pv_pickle_parse(b, PV_MAX_DEPTH + 2, a, &v, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "MARKs nested"));
    /* a memo bomb: x = (x, x) 40 times expands to 2^40 values */
    size_t k = 0;
    b[k++] = 0x80;
    b[k++] = 4;
    b[k++] = 'N';
    for (int j = 0; j < 40; j++) {
        b[k++] = 0x94;
        b[k++] = 'h';
        b[k++] = (uint8_t)j;
        b[k++] = 0x86;
    }
    b[k++] = '.';
    assert_int_equal(pv_pickle_parse(b, k, a, &v, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "expand"));
    /* a held list appended to itself takes the full check */
    const char held[] = "]\x94]\x94h\x00h\x00""a.";
    assert_int_equal(pv_pickle_parse(PK(held), a, &v, err, sizeof err), SUBLET_ERR_PARSE);
    /* JSON nesting */
    for (int extra = 0; extra <= 1; extra++) {
        size_t depth = PV_MAX_DEPTH + (size_t)extra;
        k = 0;
        for (size_t j = 0; j < depth; j++)
            b[k++] = '[';
        for (size_t j = 0; j < depth; j++)
            b[k++] = ']';
        assert_int_equal(pv_json_parse(b, k, a, &v, err, sizeof err),
                         extra ? SUBLET_ERR_PARSE : SUBLET_OK);
    }
    /* writers refuse what readers would refuse */
    pyval *deep = pv_new_list(a);
    for (int j = 0; j < PV_MAX_DEPTH; j++)
        deep = L(a, 1, deep);
    pv_buf out = {0};
    assert_int_equal(pv_pickle_write(deep, 0, &out, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    assert_int_equal(pv_json_write(deep, 0, &out, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    assert_int_equal(out.len, 0);
    assert_int_equal(pv_pickle_write(pv_list_at(deep, 0), 0, &out, err, sizeof err), SUBLET_OK);
    pv_buf_free(&out);
    free(b);
    pv_arena_destroy(a);
}

/* ---- a generated snapshot-shaped tree --------------------------------------------------------- */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Shared keys and frame dicts, as a real dump has them (CPython interns the
 * keys and torch deduplicates frames). */
static pyval *gen_snapshot(pv_arena *a, size_t nevents, size_t nsegs) {
    const char *kn[] = {"action", "addr", "size", "stream", "time_us", "frames", "filename",
                        "line", "name", "address", "state", "requested_size"};
    pyval *K[12];
    for (int k = 0; k < 12; k++)
        K[k] = S(a, kn[k]);
    pyval *frames[64];
    for (int f = 0; f < 64; f++) {
        char buf[64];
        frames[f] = pv_new_dict(a);
        snprintf(buf, sizeof buf, "/src/model_%d.py", f % 7);
        pv_dict_set(a, frames[f], K[6], S(a, buf));
        pv_dict_set(a, frames[f], K[7], I(a, (int64_t)(rnd() % 3000)));
        snprintf(buf, sizeof buf, "fn_\xc3\xa9_%d", f);
        pv_dict_set(a, frames[f], K[8], S(a, buf));
    }
    const char *actions[] = {"alloc", "free_requested", "free_completed", "segment_alloc"};
    pyval *A[4];
    for (int k = 0; k < 4; k++)
        A[k] = S(a, actions[k]);
    pyval *root = pv_new_dict(a), *segs = pv_new_list(a), *traces = pv_new_list(a);
    pyval *tr0 = pv_new_list(a);
    for (size_t s = 0; s < nsegs; s++) {
        pyval *seg = pv_new_dict(a), *blocks = pv_new_list(a);
        uint64_t base = 0x7f0000000000ULL + s * (UINT64_C(1) << 26);
        put(a, seg, "device", I(a, 0));
        put(a, seg, "address", pv_new_uint(a, base));
        put(a, seg, "total_size", I(a, 20 << 20));
        put(a, seg, "stream", I(a, 0));
        put(a, seg, "segment_type", S(a, s & 1 ? "small" : "large"));
        put(a, seg, "segment_pool_id", T(a, 2, I(a, 0), I(a, 0)));
        put(a, seg, "is_expandable", pv_bool(false));
        put(a, seg, "frames", pv_new_list(a));
        for (int b = 0; b < 5; b++) {
            pyval *blk = pv_new_dict(a);
            pv_dict_set(a, blk, K[9], pv_new_uint(a, base + (uint64_t)b * (4 << 20)));
            pv_dict_set(a, blk, K[2], I(a, 4 << 20));
            pv_dict_set(a, blk, K[11], I(a, (int64_t)(rnd() % (4 << 20))));
            pv_dict_set(a, blk, K[10], S(a, b & 1 ? "inactive" : "active_allocated"));
            pv_dict_set(a, blk, K[5], L(a, 2, frames[rnd() % 64], frames[rnd() % 64]));
            pv_list_append(a, blocks, blk);
        }
        put(a, seg, "blocks", blocks);
        pv_list_append(a, segs, seg);
    }
    for (size_t e = 0; e < nevents; e++) {
        pyval *ev = pv_new_dict(a), *fr = pv_new_list(a);
        pv_dict_set(a, ev, K[0], A[rnd() % 4]);
        pv_dict_set(a, ev, K[1], I(a, (int64_t)(0x7f0000000000ULL + rnd() % (UINT64_C(1) << 36))));
        pv_dict_set(a, ev, K[2], I(a, (int64_t)(rnd() % (UINT64_C(1) << (rnd() % 40)))));
        pv_dict_set(a, ev, K[3], I(a, e % 3 ? 0 : 94371328));
        pv_dict_set(a, ev, K[4], I(a, (int64_t)(1700000000000000ULL + e * 17)));
        for (uint64_t f = 0, nf = 1 + rnd() % 8; f < nf; f++)
            pv_list_append(a, fr, frames[rnd() % 64]);
        pv_dict_set(a, ev, K[5], fr);
        pv_list_append(a, tr0, ev);
    }
    pv_list_append(a, traces, tr0);
    pv_list_append(a, traces, pv_new_list(a));
    pyval *st = pv_new_dict(a), *rp2 = pv_new_dict(a);
    put(a, st, "PYTORCH_CUDA_ALLOC_CONF", S(a, "expandable_segments:False"));
    put(a, st, "max_split_size", I(a, -1));
    put(a, st, "garbage_collection_threshold", pv_new_float(a, 0.0));
    put(a, st, "expandable_segments", pv_bool(false));
    put(a, st, "floats", L(a, 8, pv_new_float(a, 0.1), pv_new_float(a, 1e16), pv_new_float(a, 1e-5),
                           pv_new_float(a, 123.456), pv_new_float(a, 5e-324), pv_new_float(a, -0.0),
                           pv_new_float(a, 1e22), pv_new_float(a, 2.5)));
    put(a, st, "ints", L(a, 6, I(a, INT64_MIN), I(a, INT64_MAX), pv_new_uint(a, UINT64_MAX),
                         pv_new_int_text(a, "-1180591620717411303424", 23), I(a, -129), I(a, 65536)));
    for (int k = 0; k < 16; k++) {
        char key[32];
        snprintf(key, sizeof key, "%d", 1 << k);
        put(a, rp2, key, I(a, k & 3));
    }
    put(a, st, "roundup_power2_divisions", rp2);
    put(a, st, "text", S(a, "tab\there \"quoted\" back\\slash nul\x01 \x7f \xe2\x82\xac \xf0\x9f\x98\x80"));
    size_t big = 70000;
    char *bs = malloc(big);
    for (size_t k = 0; k < big; k++)
        bs[k] = (char)('a' + k % 26);
    put(a, st, "big", pv_new_str(a, bs, big));
    free(bs);
    /* batch boundaries: dicts of 1, 1000 and 2000 items; lists of 1, 1000 and 1001 */
    size_t sizes[] = {1, 1000, 2000};
    for (int z = 0; z < 3; z++) {
        pyval *d = pv_new_dict(a), *l = pv_new_list(a);
        for (size_t k = 0; k < sizes[z]; k++) {
            char key[32];
            snprintf(key, sizeof key, "k%zu", k);
            put(a, d, key, I(a, (int64_t)k));
            pv_list_append(a, l, I(a, (int64_t)k));
        }
        if (z == 2)
            pv_list_append(a, l, pv_none());
        char name[32];
        snprintf(name, sizeof name, "batch%d", z);
        put(a, st, name, L(a, 2, d, l));
    }
    put(a, root, "segments", segs);
    put(a, root, "device_traces", traces);
    put(a, root, "allocator_settings", st);
    put(a, root, "external_annotations", pv_new_list(a));
    return root;
}

static void test_roundtrip_generated(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    pyval *v = gen_snapshot(a, 3000, 40);
    unsigned flag_sets[] = {0, PV_PICKLE_NO_FRAME, PV_PICKLE_NO_MEMO, PV_PICKLE_DEDUP_STR,
                            PV_PICKLE_NO_FRAME | PV_PICKLE_NO_MEMO};
    size_t len0 = 0;
    for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
        pv_buf out = {0};
        assert_int_equal(pv_pickle_write(v, flag_sets[f], &out, err, sizeof err), SUBLET_OK);
        assert_true(viz_readable(out.data, out.len));
        if (f == 0)
            len0 = out.len;
        if (flag_sets[f] == PV_PICKLE_NO_MEMO)
            assert_true(out.len > len0);
        pv_arena *b = pv_arena_create();
        pyval *w = parse_ok(b, out.data, out.len);
        assert_true(pv_equal(v, w, PV_EQ_STRICT));
        if (flag_sets[f] == 0) { /* parse -> write is byte-identical */
            pv_buf again = {0};
            assert_int_equal(pv_pickle_write(w, 0, &again, err, sizeof err), SUBLET_OK);
            assert_int_equal(again.len, out.len);
            assert_int_equal(memcmp(again.data, out.data, out.len), 0);
            pv_buf_free(&again);
        }
        pv_arena_destroy(b);
        pv_buf_free(&out);
    }
    /* JSON: tuples come back as lists */
    pv_buf js = {0};
    assert_int_equal(pv_json_write(v, 0, &js, err, sizeof err), SUBLET_OK);
    pv_arena *b = pv_arena_create();
    pyval *w = NULL;
    assert_int_equal(pv_json_parse(js.data, js.len, b, &w, err, sizeof err), SUBLET_OK);
    assert_true(pv_equal(v, w, PV_EQ_SEQ_LOOSE));
    assert_false(pv_equal(v, w, PV_EQ_STRICT));
    pv_buf_free(&js);
    pv_arena_destroy(b);
    pv_arena_destroy(a);
}

static void test_writer_exact(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    /* pickle.dumps({'a': [1, 300, 70000, -1, 2**40, -2**63, 2**64-1, 1.5, None, True,
     *                     False, 'x'*300, (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)]}, 4) */
    static const char head[] =
        "\x80\x04\x95\x94\x01\x00\x00\x00\x00\x00\x00}\x94\x8c\x01""a\x94]\x94(K\x01M,\x01Jp\x11"
        "\x01\x00J\xff\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00"
        "\x00\x80\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00G?\xf8\x00\x00\x00\x00\x00\x00N\x88"
        "\x89X,\x01\x00\x00";
    static const char tail[] = "\x94)K\x01\x85\x94K\x01K\x02\x86\x94K\x01K\x02K\x03\x87\x94(K\x01"
                               "K\x02K\x03K\x04t\x94""es.";
    char x300[301];
    memset(x300, 'x', 300);
    x300[300] = 0;
    pyval *l = L(a, 11, I(a, 1), I(a, 300), I(a, 70000), I(a, -1), I(a, (int64_t)1 << 40),
                 I(a, INT64_MIN), pv_new_uint(a, UINT64_MAX), pv_new_float(a, 1.5), pv_none(),
                 pv_bool(true), pv_bool(false));
    pv_list_append(a, l, S(a, x300));
    pv_list_append(a, l, T(a, 0));
    pv_list_append(a, l, T(a, 1, I(a, 1)));
    pv_list_append(a, l, T(a, 2, I(a, 1), I(a, 2)));
    pv_list_append(a, l, T(a, 3, I(a, 1), I(a, 2), I(a, 3)));
    pv_list_append(a, l, T(a, 4, I(a, 1), I(a, 2), I(a, 3), I(a, 4)));
    pyval *d = pv_new_dict(a);
    put(a, d, "a", l);
    pv_buf out = {0};
    assert_int_equal(pv_pickle_write(d, 0, &out, err, sizeof err), SUBLET_OK);
    size_t hn = sizeof head - 1, tn = sizeof tail - 1;
    assert_int_equal(out.len, hn + 300 + tn);
    assert_int_equal(memcmp(out.data, head, hn), 0);
    assert_int_equal(memcmp(out.data + hn, x300, 300), 0);
    assert_int_equal(memcmp(out.data + hn + 300, tail, tn), 0);
    /* tiny pickles: no FRAME under 4 bytes (pickle.dumps(None, 4) == b'\x80\x04N.') */
    out.len = 0;
    assert_int_equal(pv_pickle_write(pv_none(), 0, &out, err, sizeof err), SUBLET_OK);
    assert_int_equal(out.len, 4);
    assert_int_equal(memcmp(out.data, "\x80\x04N.", 4), 0);
    /* the writer appends to what the buffer holds */
    assert_int_equal(pv_pickle_write(pv_new_dict(a), 0, &out, err, sizeof err), SUBLET_OK);
    assert_int_equal(out.len, 9);
    assert_int_equal(memcmp(out.data + 4, "\x80\x04}\x94.", 5), 0);
    /* bytes: refused unless asked for; huge ints need LONG4: refused */
    pyval *by = pv_new_bytes(a, "\x00\x01", 2);
    size_t before = out.len;
    assert_int_equal(pv_pickle_write(by, 0, &out, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "bytes"));
    assert_int_equal(out.len, before);
    assert_int_equal(pv_pickle_write(by, PV_PICKLE_ALLOW_BYTES, &out, err, sizeof err), SUBLET_OK);
    assert_true(pv_equal(parse_ok(a, out.data + before, out.len - before), by, PV_EQ_STRICT));
    char digits[801];
    memset(digits, '9', 800);
    digits[800] = 0;
    pyval *huge = pv_new_int_text(a, digits, 800);
    assert_int_equal(pv_typeof(huge), PV_BIGINT);
    assert_int_equal(pv_pickle_write(huge, 0, &out, err, sizeof err), SUBLET_ERR_UNSUPPORTED);
    pyval *big = pv_new_int_text(a, digits, 600); /* 250 bytes: LONG1 */
    out.len = 0;
    assert_int_equal(pv_pickle_write(big, 0, &out, err, sizeof err), SUBLET_OK);
    assert_true(pv_equal(parse_ok(a, out.data, out.len), big, PV_EQ_STRICT));
    pv_buf_free(&out);
    pv_arena_destroy(a);
}

static void test_dict_large(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    pyval *d = pv_new_dict(a);
    enum { N = 200000 };
    char key[32];
    for (int k = 0; k < N; k++) {
        snprintf(key, sizeof key, "key%d", k);
        put(a, d, key, I(a, k));
    }
    for (int k = 0; k < N; k += 2) { /* replacing keeps order and count */
        snprintf(key, sizeof key, "key%d", k);
        put(a, d, key, I(a, -k));
    }
    assert_int_equal(pv_dict_len(d), N);
    int64_t v;
    for (int k = 0; k < N; k++) {
        snprintf(key, sizeof key, "key%d", k);
        assert_true(pv_as_int(pv_dict_get(d, key), &v));
        assert_true(v == (k % 2 ? k : -k));
        assert_true(pv_str_eq(pv_dict_key_at(d, (size_t)k), key));
    }
    assert_null(pv_dict_get(d, "nope"));
    assert_null(pv_dict_getn(d, "key1\0x", 6));
    /* int keys, tuple keys; lists are refused as keys */
    pyval *e = pv_new_dict(a);
    for (int k = 0; k < 100; k++)
        assert_int_equal(pv_dict_set(a, e, T(a, 2, I(a, k), S(a, "t")), I(a, k)), SUBLET_OK);
    assert_int_equal(pv_dict_set(a, e, T(a, 2, I(a, 5), S(a, "t")), I(a, 55)), SUBLET_OK);
    assert_int_equal(pv_dict_len(e), 100);
    assert_true(pv_as_int(pv_dict_lookup(e, T(a, 2, pv_new_float(a, 5.0), S(a, "t"))), &v) && v == 55);
    assert_int_equal(pv_dict_set(a, e, pv_new_list(a), I(a, 1)), SUBLET_ERR_INVALID_ARGUMENT);
    assert_int_equal(pv_dict_set(a, e, T(a, 1, pv_new_list(a)), I(a, 1)), SUBLET_ERR_INVALID_ARGUMENT);
    /* round trip through the pickle writer and reader */
    pv_buf out = {0};
    assert_int_equal(pv_pickle_write(d, 0, &out, err, sizeof err), SUBLET_OK);
    pyval *back = parse_ok(a, out.data, out.len);
    assert_true(pv_equal(back, d, PV_EQ_STRICT));
    assert_true(pv_as_int(pv_dict_get(back, "key199999"), &v) && v == 199999);
    pv_buf_free(&out);
    /* accessors tolerate NULL and wrong types */
    assert_null(pv_dict_get(NULL, "x"));
    assert_null(pv_list_at(d, 0));
    assert_int_equal(pv_len(NULL), 0);
    assert_false(pv_as_int(S(a, "1"), &v));
    assert_string_equal(pv_type_name(PV_TUPLE), "tuple");
    pv_arena_destroy(a);
}

/* ---- JSON ------------------------------------------------------------------------------------- */
static pyval *json_ok_at(pv_arena *a, const char *s, int line) {
    pyval *v = NULL;
    if (pv_json_parse((const uint8_t *)s, strlen(s), a, &v, err, sizeof err))
        fail_msg("line %d: JSON parse failed: %s", line, err);
    return v;
}
#define json_ok(a, s) json_ok_at((a), (s), __LINE__)

static void json_bad_at(const char *s, size_t n, const char *want, int line) {
    pv_arena *a = pv_arena_create();
    pyval *v = NULL;
    sublet_status st = pv_json_parse((const uint8_t *)s, n, a, &v, err, sizeof err);
    if (st != SUBLET_ERR_PARSE || !strstr(err, want))
        fail_msg("line %d: expected a JSON error with \"%s\", got %d: %s", line, want, st, err);
    pv_arena_destroy(a);
}
#define json_bad(lit, want) json_bad_at((lit), sizeof(lit) - 1, (want), __LINE__)

static void json_text(const pyval *v, unsigned flags, const char *want) {
    pv_buf b = {0};
    assert_int_equal(pv_json_write(v, flags, &b, err, sizeof err), SUBLET_OK);
    pv_buf_append(&b, "", 1);
    assert_string_equal((const char *)b.data, want);
    pv_buf_free(&b);
}

static void test_json(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    pyval *v = json_ok(a, "\xef\xbb\xbf { \"a\" : [1, -0, 1.0, 1e2, 9223372036854775807,"
                          " 9223372036854775808, -9223372036854775809, true, false, null,"
                          " NaN, -Infinity], \"s\": \"\\u00e9\\ud83d\\ude00\\n\\/\\u0000\","
                          " \"a\": {}, \"b\": [] }\n");
    assert_int_equal(pv_dict_len(v), 3);
    assert_true(pv_str_eq(pv_dict_key_at(v, 0), "a")); /* a repeated key keeps its place */
    assert_int_equal(pv_typeof(pv_dict_get(v, "a")), PV_DICT);
    v = json_ok(a, "[1, -0, 1.0, 1e2, 9223372036854775807, 9223372036854775808,"
                   " -9223372036854775809, true, false, null, NaN, -Infinity]");
    int64_t i;
    uint64_t u;
    double f;
    assert_true(pv_as_int(pv_list_at(v, 1), &i) && i == 0);
    assert_int_equal(pv_typeof(pv_list_at(v, 2)), PV_FLOAT);
    assert_true(pv_as_double(pv_list_at(v, 3), &f) && f == 100.0);
    assert_true(pv_as_int(pv_list_at(v, 4), &i) && i == INT64_MAX);
    assert_true(pv_as_uint64(pv_list_at(v, 5), &u) && u == (uint64_t)INT64_MAX + 1);
    assert_string_equal(pv_bigint_digits(pv_list_at(v, 6), NULL), "-9223372036854775809");
    assert_true(pv_as_double(pv_list_at(v, 10), &f) && isnan(f));
    v = json_ok(a, "\"\\u00e9\\ud83d\\ude00\\n\\/\\u0000\\ud800x\"");
    size_t n;
    const char *s = pv_str(v, &n);
    assert_int_equal(n, 2 + 4 + 1 + 1 + 1 + 3 + 1);
    assert_int_equal(memcmp(s, "\xc3\xa9\xf0\x9f\x98\x80\n/\0\xed\xa0\x80x", n), 0);
    /* errors name line, column and byte */
    json_bad("{\n  \"a\": [1,\n   2,,]}", "line 3, column 6 (byte 18)");
    json_bad("[1, 2", "unexpected end of input");
    json_bad("{\"a\" 1}", "expected ':'");
    json_bad("{1: 2}", "expected a string key");
    json_bad("[01]", "leading zero");
    json_bad("[1.]", "no digit");
    json_bad("[1e]", "exponent");
    json_bad("\"a\x01\"", "control character");
    json_bad("\"\xff\"", "invalid UTF-8");
    json_bad("\"\xed\xa0\x80\"", "invalid UTF-8");
    json_bad("\"\\x\"", "invalid escape");
    json_bad("\"\\u12\"", "\\u escape");
    json_bad("\"abc", "unterminated");
    json_bad("[1] 2", "extra data");
    json_bad("tru", "invalid literal");
    json_bad("", "unexpected end of input");
    json_bad("[1,]", "unexpected character");
    /* every prefix of a document is an error or a value, never a crash */
    const char *doc = "{\"k\": [1, 2.5e-3, \"x\\u00e9\", {\"n\": null}], \"t\": true}";
    for (size_t k = 0; k < strlen(doc); k++) {
        pyval *w;
        sublet_status st = pv_json_parse((const uint8_t *)doc, k, a, &w, err, sizeof err);
        assert_true(st == SUBLET_ERR_PARSE && strstr(err, "byte"));
    }
    /* writer */
    pyval *d = pv_new_dict(a);
    put(a, d, "q\"\\\n\x01", S(a, "\xc3\xa9\xff\xed\xa0\x80\x7f\xf0\x9f\x98\x80"));
    pv_dict_set(a, d, I(a, 7), pv_new_float(a, NAN));
    pv_dict_set(a, d, pv_bool(true), pv_new_float(a, 1e16));
    pv_dict_set(a, d, pv_none(), pv_new_float(a, 100.0));
    pv_dict_set(a, d, pv_new_float(a, 0.5), pv_new_float(a, 1e-5));
    pv_dict_set(a, d, T(a, 2, I(a, 1), S(a, "x")), pv_new_bytes(a, "\x00\xe9", 2));
    pv_dict_set(a, d, S(a, "t"), T(a, 2, pv_new_uint(a, UINT64_MAX), pv_new_int_text(a, "-99999999999999999999", 21)));
    json_text(d, 0,
              "{\"q\\\"\\\\\\n\\u0001\":\"\xc3\xa9\\u00ff\\ud800\x7f\xf0\x9f\x98\x80\","
              "\"7\":null,\"true\":1e+16,\"null\":100.0,\"0.5\":1e-05,"
              "\"[1,\\\"x\\\"]\":\"\\u0000\xc3\xa9\",\"t\":[18446744073709551615,-99999999999999999999]}");
    json_text(d, PV_JSON_ASCII | PV_JSON_SPACES,
              "{\"q\\\"\\\\\\n\\u0001\": \"\\u00e9\\u00ff\\ud800\\u007f\\ud83d\\ude00\", "
              "\"7\": null, \"true\": 1e+16, \"null\": 100.0, \"0.5\": 1e-05, "
              "\"[1, \\\"x\\\"]\": \"\\u0000\\u00e9\", \"t\": [18446744073709551615, -99999999999999999999]}");
    json_text(L(a, 6, pv_new_float(a, 0.1), pv_new_float(a, -0.0), pv_new_float(a, 5e-324),
                pv_new_float(a, 123.456), pv_new_float(a, 1e22), pv_new_float(a, 1.7976931348623157e308)),
              0, "[0.1,-0.0,5e-324,123.456,1e+22,1.7976931348623157e+308]");
    pv_arena_destroy(a);
}

/* ---- gzip ----------------------------------------------------------------------------------------- */
static void test_gzip(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    size_t gn;
    uint8_t *gz = gzip_bytes(PK(V4), &gn);
    assert_true(sublet_is_gzip(gz, gn));
    assert_false(sublet_is_gzip(PK(V4)));
    assert_false(sublet_is_gzip(gz, 1));
    assert_true(pv_equal(parse_ok(a, gz, gn), small_expected(a), PV_EQ_STRICT));
    /* two members back to back, then zero padding */
    uint8_t *two = malloc(2 * gn + 8);
    memcpy(two, gz, gn);
    memcpy(two + gn, gz, gn);
    memset(two + 2 * gn, 0, 8);
    uint8_t *o;
    size_t on;
    assert_int_equal(sublet_gunzip(two, 2 * gn + 8, 0, &o, &on, err, sizeof err), SUBLET_OK);
    assert_int_equal(on, 2 * (sizeof V4 - 1));
    free(o);
    two[2 * gn + 3] = 'x';
    assert_int_equal(sublet_gunzip(two, 2 * gn + 8, 0, &o, &on, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "trailing garbage"));
    /* output cap */
    assert_int_equal(sublet_gunzip(gz, gn, 10, &o, &on, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "limit"));
    /* corrupt and truncated streams */
    uint8_t *bad = malloc(gn);
    memcpy(bad, gz, gn);
    bad[12] ^= 0x55;
    bad[13] ^= 0xaa;
    pyval *v;
    sublet_status st = pv_pickle_parse(bad, gn, a, &v, err, sizeof err);
    assert_int_equal(st, SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "gzip byte"));
    assert_int_equal(pv_pickle_parse(gz, gn - 5, a, &v, err, sizeof err), SUBLET_ERR_PARSE);
    assert_non_null(strstr(err, "truncated"));
    /* not gzip: passed through untouched */
    sl_inflated in;
    assert_int_equal(sublet_gunzip_if_needed(PK(V4), 0, &in, err, sizeof err), SUBLET_OK);
    assert_ptr_equal(in.data, (const uint8_t *)V4);
    assert_int_equal(in.len, sizeof V4 - 1);
    assert_null(in.owned);
    /* JSON accepts gzip too */
    uint8_t *gj = gzip_bytes((const uint8_t *)"[1, 2]", 6, &on);
    assert_int_equal(pv_json_parse(gj, on, a, &v, err, sizeof err), SUBLET_OK);
    assert_int_equal(pv_list_len(v), 2);
    free(gj);
    free(bad);
    free(two);
    free(gz);
    pv_arena_destroy(a);
}

/* ---- the shared PyTorch snapshots --------------------------------------------------------------- */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static size_t csv_events(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    size_t n = 0;
    bool header = true;
    while (fgets(line, sizeof line, f)) {
        if (header) {
            header = false;
            continue;
        }
        const char *c = strchr(line, ',');
        if (c && strncmp(c + 1, "pre_segment,", 12) && strncmp(c + 1, "pre_alloc,", 10))
            n++;
    }
    fclose(f);
    return n;
}

static void test_shared_snapshots(void **state) {
    (void)state;
    const char *sh = getenv("SUBLET_SHARED");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/traces/pytorch_snapshot", sh ? sh : "");
    DIR *d = sh && *sh ? opendir(dir) : NULL;
    if (!d)
        skip();
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 11 || strcmp(e->d_name + l - 10, ".pickle.gz"))
            continue;
        char path[4600], csv[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(csv, sizeof csv, "%s/%.*s.events.csv", dir, (int)(l - 10), e->d_name);
        size_t n;
        uint8_t *raw = slurp(path, &n);
        assert_non_null(raw);
        pv_arena *a = pv_arena_create();
        pyval *v = parse_ok(a, raw, n);
        const pyval *segs = pv_dict_get(v, "segments"), *tr = pv_dict_get(v, "device_traces");
        assert_int_equal(pv_typeof(segs), PV_LIST);
        assert_int_equal(pv_typeof(tr), PV_LIST);
        assert_int_equal(pv_list_len(pv_list_at(tr, 0)), csv_events(csv));
        /* the writer reproduces the original pickle byte for byte */
        sl_inflated in;
        assert_int_equal(sublet_gunzip_if_needed(raw, n, 0, &in, err, sizeof err), 0);
        const uint8_t *data = in.data;
        size_t dn = in.len;
        uint8_t *owned = in.owned;
        pv_buf out = {0};
        assert_int_equal(pv_pickle_write(v, 0, &out, err, sizeof err), SUBLET_OK);
        assert_true(viz_readable(out.data, out.len));
        assert_int_equal(out.len, dn);
        assert_int_equal(memcmp(out.data, data, dn), 0);
        pv_buf_free(&out);
        free(owned);
        free(raw);
        pv_arena_destroy(a);
        files++;
    }
    closedir(d);
    if (!files)
        skip();
}

/* ---- interoperability with CPython ------------------------------------------------------------ */
static const char PY_SCRIPT[] =
    "import json, pickle, sys\n"
    "d = sys.argv[1]\n"
    "data = open(d + '/gen.pickle', 'rb').read()\n"
    "obj = pickle.loads(data)\n"
    "assert pickle.dumps(obj, 4) == data, 'writer output differs from pickle.dumps(obj, 4)'\n"
    "assert len(obj['device_traces'][0]) == int(sys.argv[2]), 'event count'\n"
    "assert obj['allocator_settings']['ints'][2] == 2**64 - 1\n"
    "assert obj['allocator_settings']['floats'][4] == 5e-324\n"
    "assert isinstance(obj['segments'][0]['segment_pool_id'], tuple)\n"
    "j = open(d + '/gen.json', encoding='utf-8').read()\n"
    "assert json.loads(j) == json.loads(json.dumps(obj)), 'JSON value differs'\n"
    "ja = open(d + '/gen_ascii.json').read()\n"
    "assert ja == json.dumps(obj), 'JSON text differs from json.dumps(obj)'\n"
    "OBJ = {'ints': [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31-1, 2**31, -2**31-1, 2**40,\n"
    "                -2**63, 2**63-1, 2**63, 2**64-1, 2**64, -2**64, 2**70, -(2**70), 10**30],\n"
    "       'floats': [0.0, -0.0, 1.5, -2.25, 1e300, 5e-324],\n"
    "       'consts': [None, True, False],\n"
    "       'strs': ['', 'a', 'h\\xe9llo', '\\u20ac', '\\U0001f600', 'x'*300, 'nul\\x00in', 'q\\'\"\\\\'],\n"
    "       'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],\n"
    "       'nested': {'k': {'k2': [[], {}]}}, (1, 'tk'): 'tuple key', 7: 'int key'}\n"
    "sh = ['s']; OBJ['r1'] = sh; OBJ['r2'] = sh\n"
    "for p in range(6):\n"
    "    open('%s/p%d.pickle' % (d, p), 'wb').write(pickle.dumps(OBJ, p))\n"
    "X = dict(OBJ); X['bytes'] = b'\\x00\\xffab'; X['empty'] = b''\n"
    "open(d + '/x4.pickle', 'wb').write(pickle.dumps(X, 4))\n"
    "X['set'] = {3}; X['fs'] = frozenset([4]); X['ba'] = bytearray(b'xy')\n"
    "open(d + '/x5.pickle', 'wb').write(pickle.dumps(X, 5))\n";

static pyval *py_expected(pv_arena *a, bool bytes) {
    pyval *d = pv_new_dict(a), *ints = pv_new_list(a);
    const char *iv[] = {"0", "1", "-1", "255", "256", "65535", "65536", "-2147483648",
                        "2147483647", "2147483648", "-2147483649", "1099511627776",
                        "-9223372036854775808", "9223372036854775807", "9223372036854775808",
                        "18446744073709551615", "18446744073709551616", "-18446744073709551616",
                        "1180591620717411303424", "-1180591620717411303424",
                        "1000000000000000000000000000000"};
    for (size_t k = 0; k < sizeof iv / sizeof iv[0]; k++)
        pv_list_append(a, ints, pv_new_int_text(a, iv[k], strlen(iv[k])));
    put(a, d, "ints", ints);
    put(a, d, "floats", L(a, 6, pv_new_float(a, 0.0), pv_new_float(a, -0.0), pv_new_float(a, 1.5),
                          pv_new_float(a, -2.25), pv_new_float(a, 1e300), pv_new_float(a, 5e-324)));
    put(a, d, "consts", L(a, 3, pv_none(), pv_bool(true), pv_bool(false)));
    char x300[301];
    memset(x300, 'x', 300);
    x300[300] = 0;
    put(a, d, "strs", L(a, 8, S(a, ""), S(a, "a"), S(a, "h\xc3\xa9llo"), S(a, "\xe2\x82\xac"),
                        S(a, "\xf0\x9f\x98\x80"), S(a, x300), pv_new_str(a, "nul\0in", 6),
                        S(a, "q'\"\\")));
    put(a, d, "tuples", L(a, 5, T(a, 0), T(a, 1, I(a, 1)), T(a, 2, I(a, 1), I(a, 2)),
                          T(a, 3, I(a, 1), I(a, 2), I(a, 3)), T(a, 4, I(a, 1), I(a, 2), I(a, 3), I(a, 4))));
    pyval *k2 = pv_new_dict(a), *k1 = pv_new_dict(a);
    put(a, k2, "k2", L(a, 2, pv_new_list(a), pv_new_dict(a)));
    put(a, k1, "k", k2);
    put(a, d, "nested", k1);
    pv_dict_set(a, d, T(a, 2, I(a, 1), S(a, "tk")), S(a, "tuple key"));
    pv_dict_set(a, d, I(a, 7), S(a, "int key"));
    pyval *sh = L(a, 1, S(a, "s"));
    put(a, d, "r1", sh);
    put(a, d, "r2", sh);
    if (bytes) {
        put(a, d, "bytes", pv_new_bytes(a, "\x00\xff""ab", 4));
        put(a, d, "empty", pv_new_bytes(a, "", 0));
    }
    return d;
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void test_python_interop(void **state) {
    (void)state;
    if (system("command -v python3 >/dev/null 2>&1") != 0)
        skip();
    char dir[] = "/tmp/sublet_codecs_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], cmd[512];
    pv_arena *a = pv_arena_create();
    size_t nev = 2500;
    pyval *gen = gen_snapshot(a, nev, 30);
    pv_buf b = {0};
    assert_int_equal(pv_pickle_write(gen, 0, &b, err, sizeof err), SUBLET_OK);
    snprintf(path, sizeof path, "%s/gen.pickle", dir);
    write_file(path, b.data, b.len);
    b.len = 0;
    assert_int_equal(pv_json_write(gen, 0, &b, err, sizeof err), SUBLET_OK);
    snprintf(path, sizeof path, "%s/gen.json", dir);
    write_file(path, b.data, b.len);
    b.len = 0;
    assert_int_equal(pv_json_write(gen, PV_JSON_ASCII | PV_JSON_SPACES, &b, err, sizeof err), SUBLET_OK);
    snprintf(path, sizeof path, "%s/gen_ascii.json", dir);
    write_file(path, b.data, b.len);
    pv_buf_free(&b);
    snprintf(path, sizeof path, "%s/check.py", dir);
    write_file(path, PY_SCRIPT, sizeof PY_SCRIPT - 1);
    snprintf(cmd, sizeof cmd, "python3 %s/check.py %s %zu > %s/py.out 2>&1", dir, dir, nev, dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(path, sizeof path, "%s/py.out", dir);
        size_t n;
        uint8_t *o = slurp(path, &n);
        fail_msg("python3 check failed (%d): %.*s", rc, o ? (int)n : 0, o ? (const char *)o : "");
    }
    /* CPython's pickles of the same object, protocols 0-5, read back equal */
    pyval *want = py_expected(a, false), *want_b = py_expected(a, true);
    const char *names[] = {"p0", "p1", "p2", "p3", "p4", "p5", "x4", "x5"};
    for (int k = 0; k < 8; k++) {
        snprintf(path, sizeof path, "%s/%s.pickle", dir, names[k]);
        size_t n;
        uint8_t *raw = slurp(path, &n);
        assert_non_null(raw);
        pyval *v = parse_ok(a, raw, n);
        if (k < 7) {
            if (!pv_equal(v, k < 6 ? want : want_b, PV_EQ_STRICT))
                fail_msg("%s.pickle differs from the expected tree", names[k]);
        } else {
            assert_int_equal(pv_dict_len(v), pv_dict_len(want_b) + 3);
        }
        assert_ptr_equal(pv_dict_get(v, "r1"), pv_dict_get(v, "r2"));
        free(raw);
        unlink(path);
    }
    const char *rm[] = {"gen.pickle", "gen.json", "gen_ascii.json", "check.py", "py.out"};
    for (int k = 0; k < 5; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, rm[k]);
        unlink(path);
    }
    rmdir(dir);
    pv_arena_destroy(a);
}

static void test_arena_limit(void **state) {
    (void)state;
    pv_arena *a = pv_arena_create();
    pv_arena_set_limit(a, 256 << 10);
    pyval *v;
    pv_arena *g = pv_arena_create();
    pv_buf out = {0};
    assert_int_equal(pv_pickle_write(gen_snapshot(g, 4000, 10), 0, &out, err, sizeof err), SUBLET_OK);
    assert_int_equal(pv_pickle_parse(out.data, out.len, a, &v, err, sizeof err), SUBLET_ERR_NO_MEMORY);
    assert_non_null(strstr(err, "out of memory"));
    assert_true(pv_arena_bytes(a) <= (256 << 10));
    pv_buf_free(&out);
    pv_arena_destroy(g);
    pv_arena_destroy(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_vectors),
        cmocka_unit_test(test_text_opcodes),
        cmocka_unit_test(test_binary_opcodes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_truncated_every_prefix),
        cmocka_unit_test(test_nesting_limits),
        cmocka_unit_test(test_roundtrip_generated),
        cmocka_unit_test(test_writer_exact),
        cmocka_unit_test(test_dict_large),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_gzip),
        cmocka_unit_test(test_arena_limit),
        cmocka_unit_test(test_shared_snapshots),
        cmocka_unit_test(test_python_interop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
