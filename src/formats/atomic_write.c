/* sublet — atomic file replacement (temporary file + fsync + rename) and
 * gzip compression.  See atomic_write.h. */
#include "formats/atomic_write.h"
#include "base/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* -1: off, else fail after this many bytes (the test hook). */
static _Atomic long long g_fail_after = -1;

void sublet_atomic_write_fail_after(long long n) { atomic_store(&g_fail_after, n < 0 ? -1 : n); }

static long long fail_after(void) { return atomic_load(&g_fail_after); }

/* The process umask without changing it (Linux: /proc/self/status), else 022. */
static mode_t current_umask(void)
{
    mode_t m = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return m;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Umask:", 6) == 0) {
            m = (mode_t)strtoul(line + 6, NULL, 8) & 0777;
            break;
        }
    }
    fclose(f);
    return m;
}

/* Write everything, retrying on EINTR and short writes; honours the test hook.
 * Returns 0 or an errno value. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    long long limit = fail_after();
    size_t written = 0;
    while (written < n) {
        size_t chunk = n - written;
        if (chunk > ((size_t)1 << 30))
            chunk = (size_t)1 << 30;
        if (limit >= 0) {
            if ((unsigned long long)written >= (unsigned long long)limit)
                return ENOSPC;
            if ((unsigned long long)(written + chunk) > (unsigned long long)limit)
                chunk = (size_t)limit - written;
        }
        ssize_t k = write(fd, p + written, chunk);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (k == 0)
            return EIO;
        written += (size_t)k;
    }
    if (limit >= 0 && (unsigned long long)written > (unsigned long long)limit)
        return ENOSPC;
    return 0;
}

sublet_status sublet_atomic_write(const char *path, const void *data, size_t n, char *err,
                                  size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!path || !*path)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "atomic write: empty path");
    if (!data && n)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "%s: no data", path);
    /* "<dir>/.<base>.XXXXXX" next to the target */
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "%s: the path names a directory",
                    path);
    size_t tlen = dlen + 1 + strlen(base) + 8 + 1;
    char *tmp = malloc(tlen);
    if (!tmp)
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "%s: out of memory", path);
    snprintf(tmp, tlen, "%.*s.%s.XXXXXX", (int)dlen, path, base);
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", dlen ? (int)(dlen > 1 ? dlen - 1 : 1) : 1,
             dlen ? path : ".");

    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        sublet_status st = sl_fail(err, cap, SUBLET_ERR_IO,
                                "%s: open failed: cannot create a temporary file in '%s': %s",
                                path, dir, strerror(e));
        free(tmp);
        return st;
    }
    struct stat sb;
    mode_t mode = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (sb.st_mode & 07777)
                                                               : (0666 & ~current_umask());
    const char *step = NULL;
    int e = 0;
    if (fchmod(fd, mode) != 0) {
        /* not fatal: the file keeps mkstemp's 0600 */
    }
    if ((e = write_all(fd, data, n)) != 0) {
        step = "write";
    } else if (fsync(fd) != 0) {
        e = errno;
        step = "fsync";
    }
    if (close(fd) != 0 && !step) {
        e = errno;
        step = "close";
    }
    if (!step && rename(tmp, path) != 0) {
        e = errno;
        step = "rename";
    }
    if (step) {
        unlink(tmp);
        sublet_status st = sl_fail(err, cap, SUBLET_ERR_IO,
                                "%s: %s failed: %s (temporary file %s removed; the target is "
                                "unchanged)",
                                path, step, strerror(e), tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    /* Make the rename durable (best effort: the new file is in place). */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return SUBLET_OK;
}

/* ---- piece by piece ------------------------------------------------------------------------- */

struct sl_afile {
    char *path, *tmp;
    char dir[4096];
    int fd;
    int gz;          /* compressing through zs */
    z_stream zs;
    uint8_t *zbuf;   /* deflate's output, written out when full */
    long long limit; /* the test hook: bytes allowed in all (-1: none) */
    unsigned long long written;
    const char *step; /* the first failure: "write", and its errno */
    int e;
    int zfail;        /* deflate failed (its code in e) */
};

#define ZBUF ((size_t)1 << 18)

sublet_status sl_afile_open(const char *path, int gzip, sl_afile **out, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    *out = NULL;
    if (!path || !*path)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "atomic write: empty path");
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return sl_fail(err, cap, SUBLET_ERR_INVALID_ARGUMENT, "%s: the path names a directory",
                       path);
    sl_afile *f = calloc(1, sizeof *f);
    size_t tlen = dlen + 1 + strlen(base) + 8 + 1;
    if (!f || !(f->tmp = malloc(tlen)) || !(f->path = strdup(path)) ||
        (gzip && !(f->zbuf = malloc(ZBUF)))) {
        if (f) {
            free(f->tmp);
            free(f->path);
            free(f);
        }
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    snprintf(f->tmp, tlen, "%.*s.%s.XXXXXX", (int)dlen, path, base);
    snprintf(f->dir, sizeof f->dir, "%.*s", dlen ? (int)(dlen > 1 ? dlen - 1 : 1) : 1,
             dlen ? path : ".");
    if (gzip && deflateInit2(&f->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                             Z_DEFAULT_STRATEGY) != Z_OK) {
        free(f->zbuf);
        free(f->tmp);
        free(f->path);
        free(f);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip: out of memory");
    }
    f->gz = gzip;
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        int e = errno;
        sublet_status st = sl_fail(err, cap, SUBLET_ERR_IO,
                                   "%s: open failed: cannot create a temporary file in '%s': %s",
                                   path, f->dir, strerror(e));
        if (gzip)
            deflateEnd(&f->zs);
        free(f->zbuf);
        free(f->tmp);
        free(f->path);
        free(f);
        return st;
    }
    struct stat sb;
    mode_t mode = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (sb.st_mode & 07777)
                                                               : (0666 & ~current_umask());
    (void)fchmod(f->fd, mode); /* not fatal: the file keeps mkstemp's 0600 */
    f->limit = fail_after();
    *out = f;
    return SUBLET_OK;
}

/* The file's bytes: the test hook's limit over all of them. */
static void afile_put(sl_afile *f, const uint8_t *p, size_t n)
{
    if (f->step || !n)
        return;
    size_t k = n;
    if (f->limit >= 0 && f->written + k > (unsigned long long)f->limit)
        k = f->written >= (unsigned long long)f->limit ? 0 : (size_t)(f->limit - (long long)f->written);
    int e = k ? write_all(f->fd, p, k) : 0;
    f->written += k;
    if (!e && k < n)
        e = ENOSPC;
    if (e) {
        f->step = "write";
        f->e = e;
    }
}

/* Deflate what zs holds (flush: Z_NO_FLUSH or Z_FINISH) into the file. */
static void afile_deflate(sl_afile *f, int flush)
{
    for (;;) {
        f->zs.next_out = f->zbuf;
        f->zs.avail_out = (uInt)ZBUF;
        int rc = deflate(&f->zs, flush);
        afile_put(f, f->zbuf, ZBUF - f->zs.avail_out);
        if (rc == Z_STREAM_END || (flush == Z_NO_FLUSH && f->zs.avail_in == 0 &&
                                   f->zs.avail_out != 0))
            return;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            if (!f->zfail) {
                f->zfail = 1;
                f->e = rc;
            }
            return;
        }
    }
}

void sl_afile_write(sl_afile *f, const void *data, size_t n)
{
    if (!f || f->step || f->zfail)
        return;
    if (!f->gz) {
        afile_put(f, data, n);
        return;
    }
    const uint8_t *p = data;
    while (n && !f->step && !f->zfail) {
        size_t k = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        f->zs.next_in = (Bytef *)(uintptr_t)p;
        f->zs.avail_in = (uInt)k;
        afile_deflate(f, Z_NO_FLUSH);
        p += k;
        n -= k;
    }
}

static void afile_free(sl_afile *f)
{
    if (f->gz)
        deflateEnd(&f->zs);
    free(f->zbuf);
    free(f->tmp);
    free(f->path);
    free(f);
}

void sl_afile_abort(sl_afile *f)
{
    if (!f)
        return;
    close(f->fd);
    unlink(f->tmp);
    afile_free(f);
}

sublet_status sl_afile_commit(sl_afile *f, char *err, size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!f)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (f->gz && !f->step && !f->zfail) {
        f->zs.next_in = NULL;
        f->zs.avail_in = 0;
        afile_deflate(f, Z_FINISH);
    }
    if (f->zfail) {
        sublet_status st = sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip: deflate failed (%d)",
                                   f->e);
        sl_afile_abort(f);
        return st;
    }
    const char *step = f->step;
    int e = f->e;
    if (!step && fsync(f->fd) != 0) {
        e = errno;
        step = "fsync";
    }
    if (close(f->fd) != 0 && !step) {
        e = errno;
        step = "close";
    }
    if (!step && rename(f->tmp, f->path) != 0) {
        e = errno;
        step = "rename";
    }
    if (step) {
        unlink(f->tmp);
        sublet_status st = sl_fail(err, cap, SUBLET_ERR_IO,
                                   "%s: %s failed: %s (temporary file %s removed; the target is "
                                   "unchanged)",
                                   f->path, step, strerror(e), f->tmp);
        afile_free(f);
        return st;
    }
    int dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    afile_free(f);
    return SUBLET_OK;
}

sublet_status sublet_gzip(const void *data, size_t n, uint8_t **out, size_t *out_len, char *err,
                          size_t cap)
{
    *out = NULL;
    *out_len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip: out of memory");
    const size_t step = (size_t)1 << 30; /* zlib lengths are 32-bit */
    size_t bcap = n / 4 + 4096, blen = 0, in_off = 0;
    uint8_t *buf = malloc(bcap);
    int rc = Z_OK;
    while (buf) {
        size_t in_left = n - in_off;
        zs.next_in = (Bytef *)(uintptr_t)((const uint8_t *)data + in_off);
        zs.avail_in = (uInt)(in_left < step ? in_left : step);
        int flush = in_left <= step ? Z_FINISH : Z_NO_FLUSH;
        size_t before_in = zs.avail_in;
        if (bcap - blen < 65536) {
            size_t nc = bcap * 2;
            uint8_t *nb = nc > bcap ? realloc(buf, nc) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            bcap = nc;
        }
        size_t room = bcap - blen < step ? bcap - blen : step;
        zs.next_out = buf + blen;
        zs.avail_out = (uInt)room;
        rc = deflate(&zs, flush);
        in_off += before_in - zs.avail_in;
        blen += room - zs.avail_out;
        if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR))
            break;
    }
    deflateEnd(&zs);
    if (!buf)
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip: out of memory");
    if (rc != Z_STREAM_END) {
        free(buf);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip: deflate failed (%d)", rc);
    }
    *out = buf;
    *out_len = blen;
    return SUBLET_OK;
}
