/* sublet — atomic file output and gzip compression for writers (snapshots,
 * reports).  Internal header. */
#ifndef SUBLET_ATOMIC_WRITE_H
#define SUBLET_ATOMIC_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

/* Replace `path` with the n bytes at data, atomically: the bytes go to a new
 * temporary file in the same directory (mkstemp, named ".<name>.XXXXXX"),
 * which is fsync'd, closed and renamed over `path`; the directory is then
 * fsync'd (best effort).  A new file gets mode 0666 minus the umask; an
 * existing target keeps its mode.  On any failure the temporary file is
 * removed, an existing target is left byte for byte as it was, and the
 * result is SUBLET_ERR_IO with "PATH: STEP failed: REASON" in err, STEP being
 * open, write, fsync, close or rename (SUBLET_ERR_INVALID_ARGUMENT for an
 * empty path, SUBLET_ERR_NO_MEMORY).
 *
 * Test hook: after sublet_atomic_write_fail_after(N) with N >= 0 the write
 * step fails with ENOSPC once N bytes have been written.  The library reads
 * no environment variable for it: the CLI sets it from
 * SUBLET_TEST_FAIL_WRITE_AFTER (cli/main.c), the unit tests call it. */
sublet_status sublet_atomic_write(const char *path, const void *data, size_t n, char *err,
                                  size_t err_cap);

/* Test hook (see above): fail writes after n bytes; n < 0 turns it off. */
void sublet_atomic_write_fail_after(long long n);

/* The same replacement written piece by piece (a writer that streams):
 * open makes the temporary file next to `path` (gzip: the bytes given are
 * compressed as sublet_gzip does, the same output); write appends (an error
 * is kept and given by commit); commit fsyncs, closes and renames, and
 * frees f; abort removes the temporary file and frees f.  Messages as
 * sublet_atomic_write's; the test hook counts the bytes of all writes. */
typedef struct sl_afile sl_afile;
sublet_status sl_afile_open(const char *path, int gzip, sl_afile **out, char *err, size_t err_cap);
void sl_afile_write(sl_afile *f, const void *data, size_t n);
sublet_status sl_afile_commit(sl_afile *f, char *err, size_t err_cap);
void sl_afile_abort(sl_afile *f);

/* gzip (RFC 1952, one member, default level) of n bytes into a malloc'd
 * buffer (*out, free() it).  SUBLET_ERR_NO_MEMORY. */
sublet_status sublet_gzip(const void *data, size_t n, uint8_t **out, size_t *out_len, char *err,
                          size_t err_cap);

#endif
