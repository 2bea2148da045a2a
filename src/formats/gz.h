/* sublet — gzip detection and bounded in-memory inflation for readers
 * (snapshot pickles, JSON, traces).  Internal header. */
#ifndef SUBLET_GZ_H
#define SUBLET_GZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

/* Default cap on inflated output: 4 GiB (or SIZE_MAX on 32-bit hosts). */
#define SUBLET_GUNZIP_DEFAULT_MAX ((size_t)(SIZE_MAX > 0xffffffffu ? (((uint64_t)4) << 30) : SIZE_MAX))

/* Does buf start with the gzip magic 1f 8b? */
bool sublet_is_gzip(const uint8_t *buf, size_t len);

/* Inflate a gzip stream (one or more concatenated members) into a malloc'd
 * buffer (*out, free() it; *out_len bytes, plus a NUL not counted).  max_out
 * caps the output (0 = SUBLET_GUNZIP_DEFAULT_MAX).  Errors, with
 * "gzip byte N: reason" in err: SUBLET_ERR_PARSE (corrupt or truncated data,
 * trailing garbage, output over the cap), SUBLET_ERR_NO_MEMORY. */
sublet_status sublet_gunzip(const uint8_t *buf, size_t len, size_t max_out, uint8_t **out,
                            size_t *out_len, char *err, size_t err_cap);

/* Bytes as a reader takes them: data, len bytes, and owned, the buffer to
 * free() when they were inflated (NULL when data is the caller's). */
typedef struct sl_inflated {
    const uint8_t *data;
    size_t len;
    uint8_t *owned;
} sl_inflated;

/* When buf is gzip, inflate it: out->data and out->len are the result and
 * out->owned the buffer to free().  Otherwise out->data = buf, out->len =
 * len and out->owned = NULL (also on an error).  Same errors as
 * sublet_gunzip. */
sublet_status sublet_gunzip_if_needed(const uint8_t *buf, size_t len, size_t max_out,
                                      sl_inflated *out, char *err, size_t err_cap);

/* A parser's input (pv_json_parse, pv_pickle_parse): err emptied; with
 * args_ok 0 (a required argument missing, or no buf for len bytes) or no
 * buf and len > 0, "byte 0: invalid argument" and SUBLET_ERR_INVALID_ARGUMENT;
 * else as sublet_gunzip_if_needed with the default cap (no buf: no bytes). */
sublet_status sl_parse_input(const uint8_t *buf, size_t len, bool args_ok, sl_inflated *out,
                             char *err, size_t err_cap);

#endif
