/* fuzz_json — the JSON reader (pv_json_parse) and writer.
 *
 * The input is the JSON text (or a gzip of it), as an exact-size buffer.
 * Checked (abort on violation):
 *   - the status is SUBLET_OK, SUBLET_ERR_PARSE or SUBLET_ERR_NO_MEMORY; a
 *     parse error leaves *out NULL and says "line L, column C (byte B): ..."
 *     (or "gzip byte N: ..."); the error buffer is NUL-terminated;
 *   - on success, for trees of at most ROUND_TRIP_MAX values: the writer
 *     (flags picked from the input length) succeeds; its output parses back,
 *     to a value pv_equal to the first when every float is finite (the writer
 *     turns NaN and infinities into null), and writing that value again
 *     gives the same text;
 *   - the same value through the pickle writer and reader comes back
 *     pv_equal (or the writer answers SUBLET_ERR_UNSUPPORTED). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/json_codec.h"
#include "formats/pickle.h"
#include "formats/pyval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_FAIL(...)                               \
    do {                                             \
        fprintf(stderr, "fuzz_json: " __VA_ARGS__);  \
        fprintf(stderr, "\n");                       \
        abort();                                     \
    } while (0)

#define ROUND_TRIP_MAX 200000u

/* Walk the tree (iteratively): count values, and whether a float is not
 * finite.  Returns 0 when the walk gave up (too many values / no memory). */
static int survey(const pyval *root, size_t *count, int *nonfinite)
{
    size_t cap = 256, n = 0;
    const pyval **st = malloc(cap * sizeof *st);
    if (!st)
        return 0;
    *count = 0;
    *nonfinite = 0;
    st[n++] = root;
    while (n) {
        const pyval *v = st[--n];
        if (++*count > ROUND_TRIP_MAX) {
            free(st);
            return 0;
        }
        pv_type t = pv_typeof(v);
        if (t == PV_FLOAT) {
            double d = 0;
            pv_as_double(v, &d);
            if (!isfinite(d))
                *nonfinite = 1;
        }
        size_t kids = t == PV_DICT ? 2 * pv_dict_len(v)
                      : (t == PV_LIST || t == PV_TUPLE) ? pv_list_len(v)
                                                         : 0;
        for (size_t i = 0; i < kids; i++) {
            if (n == cap) {
                const pyval **ns = realloc(st, 2 * cap * sizeof *st);
                if (!ns) {
                    free(st);
                    return 0;
                }
                st = ns;
                cap *= 2;
            }
            st[n++] = t == PV_DICT ? (i & 1 ? pv_dict_value_at(v, i / 2) : pv_dict_key_at(v, i / 2))
                                   : pv_list_at(v, i);
        }
    }
    free(st);
    return 1;
}

static void json_round_trip(const pyval *root, unsigned flags, int nonfinite)
{
    pv_buf w1 = {0}, w2 = {0};
    char err[256] = "";
    pv_arena *a2 = NULL;
    sublet_status st = pv_json_write(root, flags, &w1, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("json_write (flags 0x%x) of a parsed value: %s: %s", flags,
                  sublet_status_name(st), err);
    a2 = pv_arena_create();
    if (!a2)
        goto out;
    pyval *back = NULL;
    st = pv_json_parse(w1.data, w1.len, a2, &back, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("the writer's output (flags 0x%x, %zu bytes) does not parse: %s: %s", flags,
                  w1.len, sublet_status_name(st), err);
    if (!nonfinite && !pv_equal(root, back, PV_EQ_STRICT))
        FUZZ_FAIL("JSON round trip (flags 0x%x) changed the value", flags);
    st = pv_json_write(back, flags, &w2, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("rewriting the re-read value: %s: %s", sublet_status_name(st), err);
    if (w1.len != w2.len || memcmp(w1.data, w2.data, w1.len) != 0)
        FUZZ_FAIL("write(parse(write(v))) != write(v) (flags 0x%x, %zu vs %zu bytes)", flags,
                  w1.len, w2.len);
out:
    pv_buf_free(&w1);
    pv_buf_free(&w2);
    pv_arena_destroy(a2);
}

static void pickle_cross(const pyval *root)
{
    pv_buf w = {0};
    char err[256] = "";
    pv_arena *a2 = NULL;
    sublet_status st = pv_pickle_write(root, 0, &w, err, sizeof err);
    if (st == SUBLET_ERR_UNSUPPORTED || st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("pickle_write of a JSON value: %s: %s", sublet_status_name(st), err);
    a2 = pv_arena_create();
    if (!a2)
        goto out;
    pyval *back = NULL;
    st = pv_pickle_parse(w.data, w.len, a2, &back, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("pickle of a JSON value does not parse: %s: %s", sublet_status_name(st), err);
    if (!pv_equal(root, back, PV_EQ_STRICT))
        FUZZ_FAIL("JSON value changed through pickle");
out:
    pv_buf_free(&w);
    pv_arena_destroy(a2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pv_arena *a = pv_arena_create();
    if (!a)
        return 0;
    pyval *root = (pyval *)(uintptr_t)1;
    char err[512];
    memset(err, 'x', sizeof err);
    sublet_status st = pv_json_parse(size ? data : NULL, size, a, &root, err, sizeof err);
    if (memchr(err, '\0', sizeof err) == NULL)
        FUZZ_FAIL("error buffer not NUL-terminated");
    switch (st) {
    case SUBLET_OK: {
        if (!root || root == (pyval *)(uintptr_t)1)
            FUZZ_FAIL("SUBLET_OK without a value");
        size_t count;
        int nonfinite;
        if (survey(root, &count, &nonfinite)) {
            static const unsigned flags[] = {0, PV_JSON_ASCII, PV_JSON_SPACES,
                                             PV_JSON_ASCII | PV_JSON_SPACES};
            json_round_trip(root, flags[size % 4], nonfinite);
            pickle_cross(root);
        }
        break;
    }
    case SUBLET_ERR_PARSE: {
        unsigned long long l = 0, c = 0, b = 0;
        if (root != NULL && root != (pyval *)(uintptr_t)1)
            FUZZ_FAIL("*out set after a parse error");
        if (sscanf(err, "line %llu, column %llu (byte %llu)", &l, &c, &b) != 3 &&
            sscanf(err, "gzip byte %llu", &b) != 1)
            FUZZ_FAIL("parse error message \"%s\"", err);
        break;
    }
    case SUBLET_ERR_NO_MEMORY:
        break;
    default:
        FUZZ_FAIL("unexpected status %s: %s", sublet_status_name(st), err);
    }
    pv_arena_destroy(a);
    return 0;
}
