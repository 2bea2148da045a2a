/* sublet views — reading an input of any format (a trace or a snapshot,
 * detected by content), the defaults every view shares, and the strings
 * the views return (sublet/views.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublet/views.h"

void sublet_string_free(char *s) { free(s); }

void sublet_view_options_init(sublet_view_options *v)
{
    memset(v, 0, sizeof *v);
    v->at = SUBLET_REPLAY_ALL;
    v->device = -1;
}

sublet_status sublet_input_read(const char *path, uint8_t **buf, size_t *len, char *err,
                                size_t cap)
{
    *buf = NULL;
    *len = 0;
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
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
    if (st != SUBLET_OK)
        snprintf(err, cap, "%s: out of memory reading the file", is_stdin ? "stdin" : path);
    else if (ferror(f)) {
        snprintf(err, cap, "%s: read error: %s", is_stdin ? "stdin" : path, strerror(errno));
        st = SUBLET_ERR_IO;
    }
    if (!is_stdin)
        fclose(f);
    if (st != SUBLET_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return SUBLET_OK;
}

/* A trace of any format; nothing matched: read as the events CSV, whose
 * errors name the line. */
static sublet_status parse_trace(const uint8_t *buf, size_t n, const char *name,
                                 const sublet_trace_load_options *opt, sublet_trace **out,
                                 char *err, size_t cap)
{
    char inner[1024];
    sublet_status st;
    if (sublet_trace_detect(buf, n) == SUBLET_FORMAT_UNKNOWN && n && buf[0] != 0x1f) {
        st = sublet_trace_parse_csv((const char *)buf, n, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            snprintf(err, cap, "%s: not a recognised trace format; as an events CSV: %s", name,
                     inner);
    } else {
        st = sublet_trace_parse(buf, n, opt, out, inner, sizeof inner);
        if (st != SUBLET_OK)
            snprintf(err, cap, "%s: %s", name, inner);
    }
    return st;
}

sublet_status sublet_input_parse(const void *buf, size_t n, const char *name,
                                 const sublet_trace_load_options *lo, sublet_trace **t,
                                 sublet_snapshot **snap, char *err, size_t cap)
{
    if (!t || (!buf && n))
        return SUBLET_ERR_INVALID_ARGUMENT;
    *t = NULL;
    if (snap)
        *snap = NULL;
    if (!name)
        name = "input";
    const uint8_t *b = buf ? buf : (const uint8_t *)"";
    if (!snap)
        return parse_trace(b, n, name, lo, t, err, cap);
    sublet_trace_format f = sublet_trace_detect(b, n);
    if (f != SUBLET_FORMAT_SNAPSHOT_PICKLE && f != SUBLET_FORMAT_SNAPSHOT_JSON)
        return parse_trace(b, n, name, lo, t, err, cap);
    char inner[1024];
    sublet_status st = sublet_snapshot_parse(b, n, snap, inner, sizeof inner);
    if (st == SUBLET_OK)
        st = sublet_snapshot_trace(*snap, lo, t, inner, sizeof inner);
    if (st != SUBLET_OK) {
        snprintf(err, cap, "%s: %s", name, inner);
        sublet_snapshot_free(*snap);
        *snap = NULL;
    }
    return st;
}

sublet_status sublet_input_load(const char *path, const sublet_trace_load_options *lo,
                                sublet_trace **t, sublet_snapshot **snap, char *err, size_t cap)
{
    if (!path || !t)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *t = NULL;
    if (snap)
        *snap = NULL;
    uint8_t *buf;
    size_t n;
    sublet_status st = sublet_input_read(path, &buf, &n, err, cap);
    if (st != SUBLET_OK)
        return st;
    st = sublet_input_parse(buf, n, strcmp(path, "-") == 0 ? "stdin" : path, lo, t, snap, err,
                            cap);
    free(buf);
    return st;
}

const char *sublet_view_conf(const sublet_trace *t, const char *given, int *from_trace)
{
    if (from_trace)
        *from_trace = 0;
    if (given)
        return given;
    const char *rec = sublet_trace_settings(t);
    if (rec && *rec) {
        if (from_trace)
            *from_trace = 1;
        return rec;
    }
    return "";
}

uint64_t sublet_view_device_memory(const sublet_trace *t, uint64_t given)
{
    uint64_t dm = sublet_trace_device_memory(t);
    return given ? given : dm ? dm : SUBLET_REPLAY_DEFAULT_DEVICE_MEMORY;
}

const char *sublet_prelude_name(int mode)
{
    return mode == SUBLET_PRELUDE_ADOPT      ? "adopt"
           : mode == SUBLET_PRELUDE_ALLOCATE ? "allocate"
                                             : "auto";
}
