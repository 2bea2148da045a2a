/* sublet — reading a whole file into memory (base/read_file.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "base/read_file.h"

sublet_status sl_read_file(const char *path, int allow_stdin, uint8_t **buf, size_t *len,
                           char *err, size_t cap)
{
    *buf = NULL;
    *len = 0;
    int is_stdin = allow_stdin && strcmp(path, "-") == 0;
    const char *name = is_stdin ? "stdin" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        sl_msg(err, cap, "%s: cannot open: %s", path, strerror(errno));
        return SUBLET_ERR_IO;
    }
    size_t n = 0, bcap = 1 << 16;
    uint8_t *b = malloc(bcap);
    sublet_status st = b ? SUBLET_OK : SUBLET_ERR_NO_MEMORY;
    while (st == SUBLET_OK) {
        if (n == bcap) {
            uint8_t *nb = bcap <= SIZE_MAX / 2 ? realloc(b, bcap * 2) : NULL;
            if (!nb) {
                st = SUBLET_ERR_NO_MEMORY;
                break;
            }
            b = nb;
            bcap *= 2;
        }
        size_t got = fread(b + n, 1, bcap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int rerr = ferror(f) ? errno : 0;
    if (!is_stdin)
        fclose(f);
    if (st != SUBLET_OK) {
        sl_msg(err, cap, "%s: out of memory reading the file", name);
    } else if (rerr) {
        sl_msg(err, cap, "%s: read error: %s", name, strerror(rerr));
        st = SUBLET_ERR_IO;
    }
    if (st != SUBLET_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return SUBLET_OK;
}
