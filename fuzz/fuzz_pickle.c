/* fuzz_pickle — the pickle reader (pv_pickle_parse) and writer.
 *
 * The input is the pickle (or a gzip of one), as an exact-size buffer.
 * Checked (abort on violation):
 *   - the status is SUBLET_OK, SUBLET_ERR_PARSE or SUBLET_ERR_NO_MEMORY; a
 *     parse error leaves *out NULL and says "byte N: ..." (or "gzip byte N:"),
 *     and the error buffer is NUL-terminated;
 *   - on success the tree passes pv_check_tree again;
 *   - round trip, for trees of at most ROUND_TRIP_MAX expanded values: the
 *     writer (flags picked from the input length) gives SUBLET_OK or
 *     SUBLET_ERR_UNSUPPORTED; its output parses back to a tree pv_equal to
 *     the first, and writing that tree again gives the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/pickle.h"
#include "formats/pyval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_FAIL(...)                                 \
    do {                                               \
        fprintf(stderr, "fuzz_pickle: " __VA_ARGS__);  \
        fprintf(stderr, "\n");                         \
        abort();                                       \
    } while (0)

#define ROUND_TRIP_MAX 200000u

static const unsigned write_flags[] = {
    PV_PICKLE_ALLOW_BYTES,
    0,
    PV_PICKLE_NO_FRAME | PV_PICKLE_ALLOW_BYTES,
    PV_PICKLE_DEDUP_STR | PV_PICKLE_ALLOW_BYTES,
    PV_PICKLE_NO_MEMO | PV_PICKLE_ALLOW_BYTES,
};

static int is_container(const pyval *v)
{
    pv_type t = pv_typeof(v);
    return t == PV_LIST || t == PV_TUPLE || t == PV_DICT;
}

static void round_trip(const pyval *root, unsigned flags)
{
    if (is_container(root) && root->weight > ROUND_TRIP_MAX)
        return;
    pv_buf w1 = {0}, w2 = {0};
    char err[256] = "";
    sublet_status st = pv_pickle_write(root, flags, &w1, err, sizeof err);
    if (st == SUBLET_ERR_UNSUPPORTED || st == SUBLET_ERR_NO_MEMORY) {
        pv_buf_free(&w1);
        return;
    }
    if (st != SUBLET_OK)
        FUZZ_FAIL("pickle_write (flags 0x%x): %s: %s", flags, sublet_status_name(st), err);

    pv_arena *a2 = pv_arena_create();
    if (!a2) {
        pv_buf_free(&w1);
        return;
    }
    pyval *back = NULL;
    st = pv_pickle_parse(w1.data, w1.len, a2, &back, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("the writer's output (flags 0x%x, %zu bytes) does not parse: %s: %s", flags,
                  w1.len, sublet_status_name(st), err);
    if (!pv_equal(root, back, PV_EQ_STRICT))
        FUZZ_FAIL("round trip (flags 0x%x) changed the value", flags);
    st = pv_pickle_write(back, flags, &w2, err, sizeof err);
    if (st == SUBLET_ERR_NO_MEMORY)
        goto out;
    if (st != SUBLET_OK)
        FUZZ_FAIL("rewriting the re-read value (flags 0x%x): %s: %s", flags,
                  sublet_status_name(st), err);
    if (w1.len != w2.len || memcmp(w1.data, w2.data, w1.len) != 0)
        FUZZ_FAIL("write(parse(write(v))) != write(v) (flags 0x%x, %zu vs %zu bytes)", flags,
                  w1.len, w2.len);
out:
    pv_buf_free(&w1);
    pv_buf_free(&w2);
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
    sublet_status st = pv_pickle_parse(size ? data : NULL, size, a, &root, err, sizeof err);
    if (memchr(err, '\0', sizeof err) == NULL)
        FUZZ_FAIL("error buffer not NUL-terminated");
    switch (st) {
    case SUBLET_OK: {
        if (!root || root == (pyval *)(uintptr_t)1)
            FUZZ_FAIL("SUBLET_OK without a value");
        char why[256];
        sublet_status c = pv_check_tree(root, why, sizeof why);
        if (c != SUBLET_OK && c != SUBLET_ERR_NO_MEMORY)
            FUZZ_FAIL("accepted tree fails pv_check_tree: %s: %s", sublet_status_name(c), why);
        round_trip(root, write_flags[size % (sizeof write_flags / sizeof write_flags[0])]);
        break;
    }
    case SUBLET_ERR_PARSE: {
        unsigned long long at = 0;
        if (root != NULL && root != (pyval *)(uintptr_t)1)
            FUZZ_FAIL("*out set after a parse error");
        if (sscanf(err, "byte %llu", &at) != 1 && sscanf(err, "gzip byte %llu", &at) != 1)
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
