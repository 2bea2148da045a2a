/* sublet — reading a whole file into memory (internal).
 *
 * One reader for every input read whole (sublet_trace_load, sublet_input_read):
 * the buffer doubles from 64 KiB; messages name the path ("stdin" for "-"). */
#ifndef SUBLET_READ_FILE_H
#define SUBLET_READ_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

/* The bytes of `path` into *buf (malloc'd; the caller frees it) and *len.
 * With allow_stdin, "-" reads standard input (left open).  SUBLET_ERR_IO
 * ("PATH: cannot open: ..." / "PATH: read error: ...") or
 * SUBLET_ERR_NO_MEMORY ("PATH: out of memory reading the file"), *buf NULL. */
sublet_status sl_read_file(const char *path, int allow_stdin, uint8_t **buf, size_t *len,
                           char *err, size_t cap);

#endif
