/* sublet — gzip detection and bounded in-memory inflation (zlib), see gz.h;
 * and the buffered source the streamed readers read a file or standard
 * input through, plain or gzip'd (zlib's gzread inflates as it reads; sl_src
 * in formats/trace_readers.h). */
#include "formats/gz.h"
#include "base/errmsg.h"
#include "formats/trace_readers.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

bool sublet_is_gzip(const uint8_t *buf, size_t len) {
    return buf && len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

/* Initial output capacity: the trailer's ISIZE (size mod 2^32) when it is
 * plausible for one member, else a multiple of the input. */
static size_t first_cap(const uint8_t *buf, size_t len, size_t max_out) {
    size_t guess = len < SIZE_MAX / 4 - 4096 ? len * 4 + 4096 : SIZE_MAX / 2;
    if (len >= 18) {
        uint32_t isize = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
                         (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24;
        if (isize >= len / 2 && (uint64_t)isize <= (uint64_t)len * 1032 + 64)
            guess = (size_t)isize + 1;
    }
    if (guess > max_out)
        guess = max_out + (max_out < SIZE_MAX);
    return guess ? guess : 1;
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (p[k])
            return false;
    return true;
}

sublet_status sublet_gunzip(const uint8_t *buf, size_t len, size_t max_out, uint8_t **out,
                            size_t *out_len, char *err, size_t cap) {
    *out = NULL;
    *out_len = 0;
    if (!sublet_is_gzip(buf, len))
        return sl_fail(err, cap, SUBLET_ERR_PARSE, "gzip byte 0: not gzip data (no 1f 8b magic)");
    if (!max_out || max_out > SUBLET_GUNZIP_DEFAULT_MAX)
        max_out = max_out ? max_out : SUBLET_GUNZIP_DEFAULT_MAX;
    if (max_out >= SIZE_MAX - 1)
        max_out = SIZE_MAX - 2;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip byte 0: out of memory");
    size_t bcap = first_cap(buf, len, max_out); /* usable bytes; +1 for the NUL */
    uint8_t *o = malloc(bcap + 1);
    if (!o) {
        inflateEnd(&zs);
        return sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip byte 0: out of memory");
    }
    size_t olen = 0, in_pos = 0;
    sublet_status st = SUBLET_OK;
    zs.next_in = (Bytef *)(uintptr_t)buf;
    zs.avail_in = 0;
    for (;;) {
        if (zs.avail_in == 0 && in_pos < len) {
            size_t chunk = len - in_pos;
            zs.next_in = (Bytef *)(uintptr_t)(buf + in_pos);
            zs.avail_in = chunk > UINT_MAX ? UINT_MAX : (uInt)chunk;
        }
        if (olen == bcap) {
            if (bcap > max_out) {
                st = sl_fail(err, cap, SUBLET_ERR_PARSE,
                             "gzip byte %zu: inflated data exceeds the %zu-byte limit",
                             (size_t)((const uint8_t *)zs.next_in - buf), max_out);
                break;
            }
            size_t nb = bcap < (max_out + 1) / 2 ? bcap * 2 : max_out + 1;
            uint8_t *p = realloc(o, nb + 1);
            if (!p) {
                st = sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip: out of memory");
                break;
            }
            o = p;
            bcap = nb;
        }
        size_t room = bcap - olen;
        zs.next_out = o + olen;
        zs.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt before_in = zs.avail_in, before_out = zs.avail_out;
        int ret = inflate(&zs, Z_NO_FLUSH);
        olen += before_out - zs.avail_out;
        in_pos += before_in - zs.avail_in;
        if (ret == Z_STREAM_END) {
            if (olen > max_out) {
                st = sl_fail(err, cap, SUBLET_ERR_PARSE,
                             "gzip byte %zu: inflated data exceeds the %zu-byte limit", in_pos,
                             max_out);
                break;
            }
            size_t rest = len - in_pos;
            if (rest == 0 || all_zero(buf + in_pos, rest))
                break;
            if (!sublet_is_gzip(buf + in_pos, rest)) {
                st = sl_fail(err, cap, SUBLET_ERR_PARSE,
                             "gzip byte %zu: trailing garbage after the gzip data", in_pos);
                break;
            }
            inflateReset(&zs);
            zs.avail_in = 0;
            continue;
        }
        if (ret == Z_MEM_ERROR) {
            st = sl_fail(err, cap, SUBLET_ERR_NO_MEMORY, "gzip byte %zu: out of memory", in_pos);
            break;
        }
        if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_STREAM_ERROR) {
            st = sl_fail(err, cap, SUBLET_ERR_PARSE, "gzip byte %zu: corrupt gzip data (%s)",
                         in_pos, zs.msg ? zs.msg : "invalid stream");
            break;
        }
        /* Z_OK or Z_BUF_ERROR: out of input means a truncated stream */
        if (zs.avail_in == 0 && in_pos >= len && zs.avail_out > 0) {
            st = sl_fail(err, cap, SUBLET_ERR_PARSE,
                         "gzip byte %zu: truncated gzip data (the stream ends before its "
                         "end-of-data marker)",
                         in_pos);
            break;
        }
    }
    inflateEnd(&zs);
    if (st) {
        free(o);
        return st;
    }
    o[olen] = 0;
    *out = o;
    *out_len = olen;
    return SUBLET_OK;
}

sublet_status sublet_gunzip_if_needed(const uint8_t *buf, size_t len, size_t max_out,
                                      sl_inflated *out, char *err, size_t cap) {
    out->owned = NULL;
    if (!sublet_is_gzip(buf, len)) {
        out->data = buf;
        out->len = len;
        return SUBLET_OK;
    }
    uint8_t *o;
    size_t n;
    sublet_status st = sublet_gunzip(buf, len, max_out, &o, &n, err, cap);
    if (st)
        return st;
    out->owned = o;
    out->data = o;
    out->len = n;
    return SUBLET_OK;
}

sublet_status sl_parse_input(const uint8_t *buf, size_t len, bool args_ok, sl_inflated *out,
                             char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!args_ok || (!buf && len)) {
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "byte 0: invalid argument");
    }
    return sublet_gunzip_if_needed(buf ? buf : (const uint8_t *)"", len, 0, out, err, err_cap);
}

/* ---- the buffered source (sl_src) ------------------------------------------------------------ */

int sl_src_fill(sl_src *s, size_t want)
{
    if (s->end - s->beg >= want || s->eof)
        return 0;
    if (s->beg) {
        memmove(s->buf, s->buf + s->beg, s->end - s->beg);
        s->end -= s->beg;
        s->beg = 0;
    }
    size_t need = want > s->chunk ? want : s->chunk;
    if (need > s->cap) {
        size_t nc = s->cap ? s->cap : s->chunk;
        while (nc < need)
            nc = nc > SIZE_MAX / 2 ? need : nc * 2;
        uint8_t *nb = realloc(s->buf, nc);
        if (!nb)
            return -1;
        s->buf = nb;
        s->cap = nc;
    }
    while (s->end < want && !s->eof) {
        size_t room = s->cap - s->end;
        unsigned ask = room > (1u << 30) ? (1u << 30) : (unsigned)room;
        int got = gzread((gzFile)s->gz, s->buf + s->end, ask);
        if (got < 0) {
            int zerr;
            const char *m = gzerror((gzFile)s->gz, &zerr);
            snprintf(s->ioerr, sizeof s->ioerr, "%s: %s",
                     zerr == Z_ERRNO ? "read error" : "gzip", zerr == Z_ERRNO ? strerror(errno) : m);
            return -1;
        }
        if (got == 0)
            s->eof = 1;
        s->end += (size_t)got;
    }
    return 0;
}

void sl_src_take(sl_src *s, size_t n)
{
    s->beg += n;
    s->off += n;
}

int sl_src_line(sl_src *src, const char **lp, size_t *ln)
{
    size_t scanned = 0;
    for (;;) {
        const uint8_t *b = src->buf + src->beg;
        size_t avail = src->end - src->beg;
        const uint8_t *nl = avail > scanned ? memchr(b + scanned, '\n', avail - scanned) : NULL;
        if (nl || src->eof) {
            if (!nl && avail == 0)
                return 0;
            size_t n = nl ? (size_t)(nl - b) : avail;
            sl_src_take(src, nl ? n + 1 : n);
            if (n && b[n - 1] == '\r')
                n--;
            *lp = (const char *)b;
            *ln = n;
            return 1;
        }
        scanned = avail;
        if (sl_src_fill(src, avail + src->chunk) != 0)
            return -1;
    }
}

int sl_src_rewind(sl_src *s)
{
    if (gzrewind((gzFile)s->gz) != 0) {
        snprintf(s->ioerr, sizeof s->ioerr, "cannot read it a second time");
        return -1;
    }
    s->beg = s->end = 0;
    s->off = 0;
    s->eof = 0;
    return 0;
}

