/* sublet — internal model of Python values (not a public header).
 *
 * A pyval is what `pickle.dump` of a PyTorch memory snapshot holds: None,
 * bool, int, float, str, bytes, list, tuple and dict.  Every node lives in a
 * pv_arena; pv_arena_destroy frees a whole tree at once.  Trees may share
 * nodes (a pickle's memo makes the same dict or string appear many times), so
 * a "tree" is really an acyclic graph; readers guarantee acyclicity.
 *
 * Values:
 *   PV_INT     u.i; with PV_F_UINT64 the value is u.u (above INT64_MAX)
 *   PV_BIGINT  an int outside [INT64_MIN, UINT64_MAX]: u.s holds its decimal
 *              digits ("-" first when negative), n their count
 *   PV_FLOAT   u.f
 *   PV_BOOL    u.i is 0 or 1
 *   PV_STR     UTF-8 bytes (not validated; may hold NULs), n bytes, and a
 *              terminating NUL after them for convenience
 *   PV_BYTES   n bytes at u.s (also NUL-terminated)
 *   PV_LIST / PV_TUPLE  n items at u.items
 *   PV_DICT    n ordered (key, value) pairs, keys are hashable values
 *              (str, bytes, int, float, bool, None, tuples of those)
 *
 * The library never prints; functions that can fail return sublet_status and
 * write "reason" text into a caller buffer. */
#ifndef SUBLET_PYVAL_H
#define SUBLET_PYVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

/* Deepest container nesting readers accept and writers produce
 * (a scalar has depth 0, [1] depth 1, [[1]] depth 2). */
#define PV_MAX_DEPTH 1000
/* A pickle's memo lets a small file describe a huge tree; readers refuse a
 * tree whose fully expanded value count exceeds this. */
#define PV_MAX_EXPANDED ((uint64_t)1 << 28)
/* Longest LONG1/LONG4 integer payload a reader converts to decimal. */
#define PV_BIGINT_MAX_BYTES 4096

typedef enum pv_type {
    PV_NONE = 0,
    PV_BOOL,
    PV_INT,
    PV_BIGINT,
    PV_FLOAT,
    PV_STR,
    PV_BYTES,
    PV_LIST,
    PV_TUPLE,
    PV_DICT
} pv_type;

/* pyval.flags */
#define PV_F_UINT64 0x01u   /* PV_INT whose value is u.u > INT64_MAX */
#define PV_F_HASHABLE 0x02u /* tuple whose items are all hashable */
#define PV_F_SET 0x04u      /* list read from a set or frozenset */
#define PV_F_SEALED 0x08u   /* internal: readers (held by a container) */
#define PV_F_GRAY 0x40u     /* internal: pv_check_tree */
#define PV_F_BLACK 0x80u    /* internal: pv_check_tree */

/* A dict's storage.  Read it through the accessors below; writers in this
 * directory iterate kv directly. */
typedef struct pv_dict_body {
    struct pyval **kv; /* key0, value0, key1, value1, ... (2 * cap slots) */
    uint32_t *hashes;  /* per pair, once indexed */
    uint32_t *slots;   /* open addressing: 0 = empty, else pair index + 1 */
    size_t cap;        /* pair capacity */
    size_t nslots;     /* power of two; 0 while the dict is scanned linearly */
} pv_dict_body;

typedef struct pyval {
    uint8_t type;    /* pv_type */
    uint8_t flags;   /* PV_F_* */
    uint16_t height; /* containers: nesting depth of the subtree (1 = holds only
                        scalars), exact in readers' output */
    uint32_t weight; /* containers: expanded value count of the subtree */
    size_t n;        /* str/bytes/bigint length; list/tuple/dict count */
    union {
        int64_t i;
        uint64_t u;
        double f;
        const char *s;
        struct pyval **items;
        pv_dict_body *d;
    } u;
} pyval;

/* ---- arena ---------------------------------------------------------------- */
typedef struct pv_arena pv_arena;

/* NULL when out of memory. */
pv_arena *pv_arena_create(void);
/* Frees every node allocated from it (NULL is a no-op). */
void pv_arena_destroy(pv_arena *a);
/* Refuse allocations once the arena holds more than max_bytes (0 = no limit). */
void pv_arena_set_limit(pv_arena *a, size_t max_bytes);
/* Bytes obtained from the system so far. */
size_t pv_arena_bytes(const pv_arena *a);
/* 8-byte aligned memory, NULL when out of memory or over the limit. */
void *pv_arena_alloc(pv_arena *a, size_t n);

/* ---- growable byte buffer (writers' output) -------------------------------- */
typedef struct pv_buf {
    uint8_t *data; /* malloc'd; free with pv_buf_free */
    size_t len;
    size_t cap;
} pv_buf; /* zero-initialise */

void pv_buf_free(pv_buf *b);
/* Make room for `extra` more bytes (SUBLET_ERR_NO_MEMORY on failure). */
sublet_status pv_buf_reserve(pv_buf *b, size_t extra);
sublet_status pv_buf_append(pv_buf *b, const void *p, size_t n);

/* ---- constructors (NULL when out of memory) --------------------------------- */
/* None, True and False are shared static nodes: never modify them. */
pyval *pv_none(void);
pyval *pv_bool(bool b);
pyval *pv_new_int(pv_arena *a, int64_t v);
/* Sets PV_F_UINT64 when v > INT64_MAX. */
pyval *pv_new_uint(pv_arena *a, uint64_t v);
/* Decimal digits with an optional sign: PV_INT when the value fits 64 bits,
 * else PV_BIGINT (normalised: no '+', no leading zeros).  NULL also when the
 * text is not a decimal integer. */
pyval *pv_new_int_text(pv_arena *a, const char *digits, size_t n);
pyval *pv_new_float(pv_arena *a, double v);
/* Copies n bytes. */
pyval *pv_new_str(pv_arena *a, const char *s, size_t n);
pyval *pv_new_strz(pv_arena *a, const char *s);
pyval *pv_new_bytes(pv_arena *a, const void *p, size_t n);
pyval *pv_new_list(pv_arena *a);
/* Copies the n item pointers. */
pyval *pv_new_tuple(pv_arena *a, pyval *const *items, size_t n);
pyval *pv_new_dict(pv_arena *a);

/* Append to a list (SUBLET_ERR_INVALID_ARGUMENT when `list` is not a list). */
sublet_status pv_list_append(pv_arena *a, pyval *list, pyval *item);
sublet_status pv_list_extend(pv_arena *a, pyval *list, pyval *const *items, size_t n);
/* Insert or replace (a replaced key keeps its position, as in Python).
 * SUBLET_ERR_INVALID_ARGUMENT when `dict` is not a dict or `key` is not
 * hashable (a list, a dict, or a tuple holding one). */
sublet_status pv_dict_set(pv_arena *a, pyval *dict, pyval *key, pyval *val);
sublet_status pv_dict_set_str(pv_arena *a, pyval *dict, const char *key, pyval *val);
/* Make room for `extra` more pairs (avoids regrowth when the count is known). */
sublet_status pv_dict_reserve(pv_arena *a, pyval *dict, size_t extra);

/* ---- accessors (all accept NULL and then report "absent") ------------------ */
const char *pv_type_name(pv_type t); /* "None", "bool", "int", ... */
pv_type pv_typeof(const pyval *v);   /* PV_NONE for NULL */
bool pv_is_hashable(const pyval *v);
/* int (within int64) or bool. */
bool pv_as_int(const pyval *v, int64_t *out);
/* non-negative int (up to UINT64_MAX) or bool. */
bool pv_as_uint64(const pyval *v, uint64_t *out);
/* float, int, bigint or bool, converted to double. */
bool pv_as_double(const pyval *v, double *out);
/* bool only. */
bool pv_as_bool(const pyval *v, bool *out);
/* str: its bytes (NUL-terminated, *len set when len != NULL), else NULL. */
const char *pv_str(const pyval *v, size_t *len);
/* str equal to the C string s. */
bool pv_str_eq(const pyval *v, const char *s);
const uint8_t *pv_bytes(const pyval *v, size_t *len);
/* bigint: its decimal digits, else NULL. */
const char *pv_bigint_digits(const pyval *v, size_t *len);
/* list/tuple/dict item count, str/bytes length, else 0. */
size_t pv_len(const pyval *v);
/* list or tuple. */
size_t pv_list_len(const pyval *v);
const pyval *pv_list_at(const pyval *v, size_t i); /* NULL when out of range */
size_t pv_dict_len(const pyval *v);
const pyval *pv_dict_key_at(const pyval *v, size_t i);
const pyval *pv_dict_value_at(const pyval *v, size_t i);
/* Value under a str key, NULL when absent or when d is not a dict.  Dicts of
 * more than 8 keys have a hash index; smaller ones are scanned. */
const pyval *pv_dict_get(const pyval *d, const char *key);
const pyval *pv_dict_getn(const pyval *d, const char *key, size_t n);
/* Value under any hashable key (Python equality: 1 == 1.0 == True). */
const pyval *pv_dict_lookup(const pyval *d, const pyval *key);

/* pv_equal flags */
#define PV_EQ_STRICT 0u
#define PV_EQ_SEQ_LOOSE 1u /* a tuple equals a list with equal items */
#define PV_EQ_NUM_LOOSE 2u /* numbers compare by value across int/float/bool */
/* Deep equality without recursion.  Dicts compare as ordered mappings (same
 * keys in the same order); floats compare with ==, and NaN equals NaN.  The
 * inputs must be acyclic (readers guarantee it).  false also when memory for
 * the walk ran out. */
bool pv_equal(const pyval *a, const pyval *b, unsigned flags);

/* Readers' final check on a freshly built tree: acyclic, nesting at most
 * PV_MAX_DEPTH, at most PV_MAX_EXPANDED values when shared nodes are counted
 * once per reference.  Sets height/weight; call once per new tree.
 * SUBLET_ERR_PARSE with the reason in err; SUBLET_ERR_NO_MEMORY. */
sublet_status pv_check_tree(pyval *root, char *err, size_t err_cap);

#endif
