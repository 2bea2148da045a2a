/* sublet — JSON reader and writer over the pyval model (internal).
 *
 * Reader (hand-written, no recursion): RFC 8259 JSON, strict: objects become
 * dicts (a repeated key keeps its first position and its last value, as in
 * Python), arrays lists, integer literals ints (int64, then uint64, then
 * PV_BIGINT), literals with a fraction or exponent floats, true/false/null.
 * Python's json extensions NaN, Infinity and -Infinity are accepted.  Strings
 * must be valid UTF-8; \u escapes are decoded (surrogate pairs combined, a
 * lone surrogate kept as its 3-byte form, like Python's 'surrogatepass').  A
 * leading UTF-8 BOM is skipped.  gzip input is inflated first.  Nesting is
 * limited to PV_MAX_DEPTH.  Errors: SUBLET_ERR_PARSE with "line L, column C
 * (byte B): reason".  Short strings are interned (shared nodes).
 *
 * Writer: tuples become arrays; dict keys that are not str are stringified
 * the way Python's json.dumps does (1 -> "1", True -> "true", None -> "null",
 * 1.5 -> "1.5"; a tuple key becomes the text of its JSON array); floats are
 * written like Python's repr (shortest text that reads back to the same
 * double, always with a '.' or an exponent); NaN and infinities become null;
 * uint64 and bigints are written as plain integers.  Strings: '"', '\\' and
 * control characters are escaped; bytes that are not valid UTF-8 are written
 * as \u00XX (their latin-1 reading); a 3-byte encoded surrogate is written as
 * its \uXXXX escape.  bytes values are written as strings of their latin-1
 * reading.  With PV_JSON_SPACES | PV_JSON_ASCII the text equals Python's
 * json.dumps(obj) for snapshot data. */
#ifndef SUBLET_JSON_CODEC_H
#define SUBLET_JSON_CODEC_H

#include "formats/pyval.h"

/* pv_json_write flags */
#define PV_JSON_ASCII 0x1u  /* escape every non-ASCII character (and DEL) as \uXXXX */
#define PV_JSON_SPACES 0x2u /* ", " and ": " separators, as json.dumps by default */

sublet_status pv_json_parse(const uint8_t *buf, size_t len, pv_arena *a, pyval **out, char *err,
                            size_t err_cap);

/* Append the JSON text of v to out.  SUBLET_ERR_UNSUPPORTED for nesting deeper
 * than PV_MAX_DEPTH (or a recursive structure). */
sublet_status pv_json_write(const pyval *v, unsigned flags, pv_buf *out, char *err,
                            size_t err_cap);

#endif
