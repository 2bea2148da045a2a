/* sublet — Python pickle reader and writer over the pyval model (internal).
 *
 * Reader: protocols 0-5, every opcode that pickling None, bool, int, float,
 * str, bytes, bytearray, list, tuple, dict, set and frozenset produces (sets
 * become lists flagged PV_F_SET; STRING/BINSTRING/SHORT_BINSTRING become str
 * holding the raw bytes).  Opcodes that build objects (GLOBAL, REDUCE, BUILD,
 * NEWOBJ, ...) are refused: snapshots hold only plain data.  A gzip input
 * (1f 8b) is inflated first (limit SUBLET_GUNZIP_DEFAULT_MAX); byte offsets in
 * errors then count in the inflated pickle.  Fuzz-safe: bounds-checked reads,
 * no recursion, MARK nesting and value nesting limited to PV_MAX_DEPTH, memo
 * indices limited to the input length, expanded size to PV_MAX_EXPANDED.
 * Bytes after STOP are ignored (as pickle.loads does).
 *
 * Writer: protocol 4 using only opcodes pytorch.org/memory_viz reads: PROTO,
 * FRAME, STOP, MARK, EMPTY_DICT, SETITEM(S), EMPTY_LIST, APPEND(S),
 * EMPTY_TUPLE, TUPLE, TUPLE1-3, BININT, BININT1, BININT2, LONG1, BINFLOAT,
 * NONE, NEWTRUE, NEWFALSE, SHORT_BINUNICODE, BINUNICODE, MEMOIZE, BINGET,
 * LONG_BINGET.  With flags 0 the output is byte-for-byte what CPython's
 * pickle.dumps(obj, protocol=4) writes for the same object graph (memo by node
 * identity, batches of 1000, 64 KiB frames).  Refused (SUBLET_ERR_UNSUPPORTED):
 * bytes values (unless PV_PICKLE_ALLOW_BYTES), ints needing more than 255
 * bytes, strings over 4 GiB, nesting deeper than PV_MAX_DEPTH. */
#ifndef SUBLET_PICKLE_H
#define SUBLET_PICKLE_H

#include "formats/pyval.h"

/* pv_pickle_write flags */
#define PV_PICKLE_NO_FRAME 0x1u    /* no FRAME opcodes */
#define PV_PICKLE_NO_MEMO 0x2u     /* no MEMOIZE/BINGET: shared nodes are written again */
#define PV_PICKLE_DEDUP_STR 0x4u   /* also reuse the memo for equal strings (smaller) */
#define PV_PICKLE_ALLOW_BYTES 0x8u /* write bytes as SHORT_BINBYTES/BINBYTES (protocol 3+;
                                      memory_viz cannot read them) */

/* Parse a pickle (or gzip of one).  On success *out is the root, allocated
 * from `a` (nodes stay valid until pv_arena_destroy).  SUBLET_ERR_PARSE with
 * "byte N: reason" in err, SUBLET_ERR_NO_MEMORY ("... out of memory"). */
sublet_status pv_pickle_parse(const uint8_t *buf, size_t len, pv_arena *a, pyval **out,
                              char *err, size_t err_cap);

/* Append the pickle of v to out (the caller writes the file). */
sublet_status pv_pickle_write(const pyval *v, unsigned flags, pv_buf *out, char *err,
                              size_t err_cap);

#endif
