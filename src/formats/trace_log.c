/* sublet — reading the event log (sublet/log.h) as a trace.
 *
 * The layout is in event_log_format.h and docs/replay.md.  The codec of
 * headers, blocks and records here is incremental: sl_log_block_next hands
 * out one intact block at a time and sl_log_record_next one record of it,
 * so a reader can follow a log as it grows; sublet_trace_parse_log fills an
 * in-memory trace with them.
 *
 * Crash safety: the writer appends whole blocks, each with a checksum of its
 * header and one of its payload.  A log cut anywhere (kill -9, a full disk)
 * reads up to its last whole block; the cut block is reported as a torn
 * tail ("torn tail at byte N, K bytes ignored", sublet_trace_notice), never
 * read.  A bad block followed by a good one is corruption, an error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/errmsg.h"
#include "formats/event_log_format.h"
#include "formats/trace_readers.h"
#include "sublet/config.h"
#include "sublet/trace.h"

/* ---- headers and blocks ------------------------------------------------------------------ */

static uint32_t crc(const uint8_t *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

void sl_log_header_encode(const sl_log_header *h, uint8_t out[SL_LOG_HEADER_SIZE])
{
    memset(out, 0, SL_LOG_HEADER_SIZE);
    memcpy(out, SL_LOG_MAGIC, 8);
    out[8] = h->version;
    out[9] = h->flags;
    sl_put_u32(out + 12, (uint32_t)h->device);
    sl_put_u64(out + 16, h->start_us);
    sl_put_u32(out + 28, crc(out, 28));
}

int sl_log_header_decode(const uint8_t *p, size_t n, sl_log_header *h, char *err, size_t cap)
{
    if (n < 8 || memcmp(p, SL_LOG_MAGIC, 8) != 0) {
        sl_msg(err, cap, "not a sublet event log (no SUBLETLG magic)");
        return -1;
    }
    if (n < SL_LOG_HEADER_SIZE) {
        sl_msg(err, cap, "event log header cut short (%zu of %d bytes)", n, SL_LOG_HEADER_SIZE);
        return -1;
    }
    if (sl_get_u32(p + 28) != crc(p, 28)) {
        sl_msg(err, cap, "event log header: bad checksum");
        return -1;
    }
    if (p[8] != SL_LOG_VERSION) {
        sl_msg(err, cap, "event log version %u: this sublet reads version %d", p[8],
               SL_LOG_VERSION);
        return -1;
    }
    h->version = p[8];
    h->flags = p[9];
    h->device = (int32_t)sl_get_u32(p + 12);
    h->start_us = sl_get_u64(p + 16);
    return 0;
}

void sl_log_block_seal(uint8_t hdr[SL_LOG_BLOCK_HEADER_SIZE], const uint8_t *payload, size_t len,
                       uint64_t seq)
{
    memcpy(hdr, SL_LOG_BLOCK_MAGIC, 4);
    sl_put_u32(hdr + 4, (uint32_t)len);
    sl_put_u64(hdr + 8, seq);
    sl_put_u32(hdr + 16, crc(payload, len));
    sl_put_u32(hdr + 20, crc(hdr, 20));
}

/* 1 when buf[off..n) starts with a block header that checks out. */
static int header_ok(const uint8_t *buf, size_t n, size_t off)
{
    if (n - off < SL_LOG_BLOCK_HEADER_SIZE)
        return 0;
    const uint8_t *h = buf + off;
    return memcmp(h, SL_LOG_BLOCK_MAGIC, 4) == 0 && sl_get_u32(h + 20) == crc(h, 20) &&
           sl_get_u32(h + 4) <= SL_LOG_MAX_PAYLOAD;
}

int sl_log_block_next(const uint8_t *buf, size_t n, size_t *off, const uint8_t **payload,
                      size_t *len, uint64_t *seq, char *err, size_t cap)
{
    size_t o = *off;
    if (o >= n)
        return 0;
    if (n - o < SL_LOG_BLOCK_HEADER_SIZE) {
        sl_msg(err, cap, "block header cut short (%zu of %d bytes)", n - o,
               SL_LOG_BLOCK_HEADER_SIZE);
        return -1;
    }
    if (!header_ok(buf, n, o)) {
        sl_msg(err, cap, "not a block header (bad magic, checksum or length)");
        return -1;
    }
    size_t l = sl_get_u32(buf + o + 4);
    if (n - o - SL_LOG_BLOCK_HEADER_SIZE < l) {
        sl_msg(err, cap, "block payload cut short (%zu of %zu bytes)",
               n - o - SL_LOG_BLOCK_HEADER_SIZE, l);
        return -1;
    }
    const uint8_t *p = buf + o + SL_LOG_BLOCK_HEADER_SIZE;
    if (sl_get_u32(buf + o + 16) != crc(p, l)) {
        sl_msg(err, cap, "block payload: bad checksum");
        return -1;
    }
    *payload = p;
    *len = l;
    *seq = sl_get_u64(buf + o + 8);
    *off = o + SL_LOG_BLOCK_HEADER_SIZE + l;
    return 1;
}

size_t sl_log_block_scan(const uint8_t *buf, size_t n, size_t from)
{
    for (size_t o = from; o + SL_LOG_BLOCK_HEADER_SIZE <= n; o++) {
        const void *m = memchr(buf + o, 'S', n - o);
        if (!m)
            break;
        o = (size_t)((const uint8_t *)m - buf);
        if (n - o < SL_LOG_BLOCK_HEADER_SIZE)
            break;
        if (header_ok(buf, n, o)) {
            size_t l = sl_get_u32(buf + o + 4);
            if (n - o - SL_LOG_BLOCK_HEADER_SIZE >= l &&
                sl_get_u32(buf + o + 16) == crc(buf + o + SL_LOG_BLOCK_HEADER_SIZE, l))
                return o;
        }
    }
    return n;
}

/* ---- records -------------------------------------------------------------------------------- */

static int varint_checked(const uint8_t *p, size_t n, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= n)
            return -1;
        uint8_t b = p[(*pos)++];
        if (shift == 63 && b > 1)
            return -1; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* The same, without a bound test per byte when ten bytes (the longest varint) remain: the
 * common case inside a block.  A value longer than 64 bits is refused by both. */
static inline int varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *v)
{
    size_t q = *pos;
    if (q > n || n - q < 10)
        return varint_checked(p, n, pos, v);
    uint64_t b = p[q++];
    uint64_t x = b & 0x7f;
    for (unsigned shift = 7; b & 0x80; shift += 7) {
        b = p[q++];
        if (shift == 63) {
            if (b > 1)
                return -1;
        }
        x |= (b & 0x7f) << shift;
    }
    *v = x;
    *pos = q;
    return 0;
}

static int bytes(const uint8_t *p, size_t n, size_t *pos, size_t max, const uint8_t **s,
                 size_t *len)
{
    uint64_t l;
    if (varint(p, n, pos, &l) || l > max || l > n - *pos)
        return -1;
    *s = p + *pos;
    *len = (size_t)l;
    *pos += (size_t)l;
    return 0;
}

/* Every field of r zero but its frames array. */
static void clear(sl_log_rec *r)
{
    sl_log_frame *frames = r->frames;
    memset(r, 0, sizeof *r);
    r->frames = frames;
}

int sl_log_record_next(const uint8_t *p, size_t n, size_t *pos, sl_log_rec *r, char *err,
                       size_t cap)
{
    size_t start = *pos, q = *pos;
    if (q >= n)
        return 0;
    uint8_t type = p[q++];
    const char *why = "truncated or malformed field";
    uint64_t v[5];
    int bad = 0;
    if (type >= SL_LOG_REC_EVENT && type < SL_LOG_REC_EVENT + SUBLET_ACT_COUNT) {
        /* an event sets its own fields (no clearing of the whole record) */
        r->type = SL_LOG_REC_EVENT;
        r->action = (sublet_action)(type - SL_LOG_REC_EVENT);
        for (int i = 0; i < 5 && !bad; i++)
            bad = varint(p, n, &q, &v[i]);
        if (!bad && v[4] > UINT32_MAX) {
            bad = 1;
            why = "stack id above 2^32";
        }
        if (!bad) {
            r->dt = sl_unzigzag(v[0]);
            r->addr = v[1];
            r->size = v[2];
            r->stream = v[3];
            r->stack = (uint32_t)v[4];
        }
    } else if (type == SL_LOG_REC_INFO) {
        clear(r);
        r->type = type;
        bad = varint(p, n, &q, &r->count) || bytes(p, n, &q, 1 << 16, &r->text, &r->text_len);
    } else if (type == SL_LOG_REC_LOST) {
        clear(r);
        r->type = type;
        bad = varint(p, n, &q, &r->count);
    } else if (type == SL_LOG_REC_STACK) {
        clear(r);
        r->type = type;
        bad = varint(p, n, &q, &v[0]) || varint(p, n, &q, &v[1]);
        if (!bad && (v[0] == 0 || v[0] > UINT32_MAX)) {
            bad = 1;
            why = "stack id 0 or above 2^32";
        } else if (!bad && v[1] > SL_LOG_MAX_FRAMES) {
            bad = 1;
            why = "more than 256 frames";
        }
        for (uint64_t i = 0; !bad && i < v[1]; i++) {
            sl_log_frame *f = &r->frames[i];
            uint64_t line;
            bad = bytes(p, n, &q, SL_LOG_MAX_STRING, &f->file, &f->file_len) ||
                  bytes(p, n, &q, SL_LOG_MAX_STRING, &f->name, &f->name_len) ||
                  varint(p, n, &q, &line);
            if (!bad)
                f->line = sl_unzigzag(line);
        }
        if (!bad) {
            r->stack = (uint32_t)v[0];
            r->nframes = (size_t)v[1];
        }
    } else {
        sl_msg(err, cap, "unknown record type 0x%02x", type);
        return -1;
    }
    if (bad) {
        sl_msg(err, cap, "record type 0x%02x: %s", type, why);
        *pos = start;
        return -1;
    }
    *pos = q;
    return 1;
}

/* ---- the log as a trace ----------------------------------------------------------------------- */

/* log stack id -> trace stack id (EMPTY: a stack of no frames), open addressing */
#define EMPTY UINT32_MAX
typedef struct idmap {
    uint32_t *keys, *vals;
    size_t cap, n;
} idmap;

static uint32_t idmap_get(const idmap *m, uint32_t k)
{
    if (!m->cap)
        return 0;
    for (size_t j = (k * 0x9E3779B1u) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
        if (m->keys[j] == k)
            return m->vals[j];
    return 0;
}

static int idmap_put(idmap *m, uint32_t k, uint32_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        uint32_t *nk = calloc(nc, sizeof *nk), *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = (m->keys[i] * 0x9E3779B1u) & (nc - 1);
            while (nk[j])
                j = (j + 1) & (nc - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = nc;
    }
    size_t j = (k * 0x9E3779B1u) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j])
        m->n++;
    m->keys[j] = k;
    m->vals[j] = v;
    return 0;
}

static void idmap_free(idmap *m)
{
    free(m->keys);
    free(m->vals);
}

typedef struct log_reader {
    sl_log_header h;
    trace_vec events;
    trace_extras *x;
    idmap stacks;
    uint64_t lost, records;
    bool info_seen;
    sl_log_frame frames[SL_LOG_MAX_FRAMES];
    trace_frame_in fin[SL_LOG_MAX_FRAMES];
} log_reader;

/* A STACK record interned into x (fin: room for SL_LOG_MAX_FRAMES). */
static sublet_status intern_rec(trace_extras *x, const sl_log_rec *r, trace_frame_in *fin,
                                uint32_t *id)
{
    for (size_t i = 0; i < r->nframes; i++) {
        fin[i].file = (const char *)r->frames[i].file;
        fin[i].file_len = r->frames[i].file_len;
        fin[i].name = (const char *)r->frames[i].name;
        fin[i].name_len = r->frames[i].name_len;
        fin[i].line = r->frames[i].line;
    }
    return trace_extras_intern_stack(x, fin, r->nframes, id);
}

/* Are an INFO record's settings ones the engine takes? */
static bool settings_ok(const sl_log_rec *r)
{
    char conf[1024];
    sublet_settings ss;
    sublet_settings_default(&ss);
    if (r->text_len >= sizeof conf || memchr(r->text, '\0', r->text_len))
        return false;
    memcpy(conf, r->text, r->text_len);
    conf[r->text_len] = '\0';
    return sublet_settings_parse(&ss, conf, NULL, 0) == SUBLET_OK;
}

static sublet_status apply_info(trace_extras *x, const sl_log_rec *r)
{
    trace_extras_set_memory(x, r->count);
    return trace_extras_set_settings(x, (const char *)r->text, r->text_len);
}

/* An event record as a trace event (sid: the interned stack, EMPTY or 0 for
 * none); every byte of *e set, the padding too: events are compared as bytes. */
static inline void event_of(sublet_trace_event *e, unsigned action, uint64_t addr, uint64_t size,
                            uint64_t stream, uint64_t time_us, uint64_t line, uint32_t sid)
{
    memset(e, 0, sizeof *e);
    e->kind = action;
    e->flags = SUBLET_TRACE_HAS_TIME;
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->time_us = time_us;
    e->line = line;
    e->frames = sid == EMPTY ? 0 : sid;
}

/* One decoded record (at byte `at` of the file, in the block at block_off):
 * an event into *e (*is_event = 1), anything else applied to lr. */
static sublet_status apply_record(log_reader *lr, const sl_log_rec *r, size_t block_off, size_t at,
                                  sublet_trace_event *e, int *is_event, char *err, size_t cap)
{
    *is_event = 0;
    lr->records++;
    sublet_status st = SUBLET_OK;
    switch (r->type) {
    case SL_LOG_REC_EVENT: {
        uint32_t sid = 0;
        if (r->stack && !(sid = idmap_get(&lr->stacks, r->stack))) {
            /* not recorded before its first use: the writer never does that */
            sl_msg(err, cap, "block at byte %zu, record at byte %zu: stack %u used before "
                             "its record", block_off, at, r->stack);
            return SUBLET_ERR_PARSE;
        }
        event_of(e, (unsigned)r->action, r->addr, r->size, r->stream,
                 lr->h.start_us + (uint64_t)r->dt, lr->records, sid);
        *is_event = 1;
        return SUBLET_OK;
    }
    case SL_LOG_REC_STACK: {
        uint32_t id = 0;
        st = intern_rec(lr->x, r, lr->fin, &id);
        /* an empty stack (no frames) maps to EMPTY: events naming it carry none */
        if (st == SUBLET_OK && idmap_put(&lr->stacks, r->stack, id ? id : EMPTY))
            st = SUBLET_ERR_NO_MEMORY;
        break;
    }
    case SL_LOG_REC_INFO: {
        /* the settings must be ones the engine takes (the writer checks) */
        if (!settings_ok(r)) {
            sl_msg(err, cap, "block at byte %zu: INFO record: settings that do not parse",
                   block_off);
            return SUBLET_ERR_PARSE;
        }
        st = apply_info(lr->x, r);
        lr->info_seen = true;
        break;
    }
    case SL_LOG_REC_LOST:
        lr->lost = lr->lost + r->count < lr->lost ? UINT64_MAX : lr->lost + r->count;
        break;
    }
    if (st != SUBLET_OK)
        sl_msg(err, cap, "out of memory");
    return st;
}

/* Every record of one block. */
static sublet_status read_block(log_reader *lr, const uint8_t *p, size_t n, size_t block_off,
                                char *err, size_t cap)
{
    size_t pos = 0;
    sl_log_rec r;
    r.frames = lr->frames;
    for (;;) {
        char why[200];
        int got = sl_log_record_next(p, n, &pos, &r, why, sizeof why);
        if (got == 0)
            return SUBLET_OK;
        if (got < 0) {
            sl_msg(err, cap, "block at byte %zu, record at byte %zu: %s", block_off,
                   block_off + SL_LOG_BLOCK_HEADER_SIZE + pos, why);
            return SUBLET_ERR_PARSE;
        }
        sublet_trace_event e;
        int is_event;
        sublet_status st = apply_record(lr, &r, block_off, block_off + SL_LOG_BLOCK_HEADER_SIZE + pos,
                                        &e, &is_event, err, cap);
        if (st == SUBLET_OK && is_event && (st = trace_vec_push(&lr->events, &e)) != SUBLET_OK)
            sl_msg(err, cap, "out of memory");
        if (st != SUBLET_OK)
            return st;
    }
}

/* What follows a block that is not intact (at byte `at`, the file's bytes
 * from there in p[0, len)): a torn tail (the notice, SUBLET_OK) or, when an
 * intact block follows, corruption (SUBLET_ERR_PARSE).  `why` says what is
 * wrong with the block. */
static sublet_status bad_block(log_reader *lr, const uint8_t *p, size_t len, size_t at,
                               const char *why, char *err, size_t cap)
{
    /* an intact block after this one means corruption; look past what this
     * block's header claims when the header holds */
    size_t from = 1;
    if (header_ok(p, len, 0)) {
        size_t l = sl_get_u32(p + 4);
        from = len - SL_LOG_BLOCK_HEADER_SIZE < l ? len : SL_LOG_BLOCK_HEADER_SIZE + l;
    }
    size_t next = sl_log_block_scan(p, len, from);
    if (next < len) {
        sl_msg(err, cap, "block at byte %zu: %s (an intact block follows at byte %zu: "
                         "the log is corrupt, not cut short)", at, why, at + next);
        return SUBLET_ERR_PARSE;
    }
    char note[300];
    snprintf(note, sizeof note, "torn tail at byte %zu, %zu bytes ignored (%s)", at, len, why);
    sublet_status st = trace_extras_set_notice(lr->x, note);
    if (st != SUBLET_OK)
        sl_msg(err, cap, "out of memory");
    return st;
}

/* The lost events, added to the notice. */
static sublet_status lost_notice(log_reader *lr, char *err, size_t cap)
{
    if (!lr->lost)
        return SUBLET_OK;
    const char *prev = trace_extras_notice(lr->x);
    char note[400];
    snprintf(note, sizeof note, "%s%s%llu events were lost while logging (the writer had no "
             "room): the trace has gaps", prev ? prev : "", prev ? "; " : "",
             (unsigned long long)lr->lost);
    sublet_status st = trace_extras_set_notice(lr->x, note);
    if (st != SUBLET_OK)
        sl_msg(err, cap, "out of memory");
    return st;
}

sublet_status sublet_trace_parse_log(const void *buf, size_t len, sublet_trace **out, char *err,
                                     size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!out || (!buf && len)) {
        sl_msg(err, cap, "invalid argument");
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    const uint8_t *p = buf;
    log_reader *lr = calloc(1, sizeof *lr);
    if (!lr || !(lr->x = trace_extras_new())) {
        free(lr);
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    sublet_status st = SUBLET_OK;
    if (sl_log_header_decode(p, len, &lr->h, err, cap) != 0) {
        st = SUBLET_ERR_PARSE;
        goto done;
    }
    size_t off = SL_LOG_HEADER_SIZE;
    uint64_t want_seq = 0;
    char why[200] = "";
    for (;;) {
        const uint8_t *pl;
        size_t pn;
        uint64_t seq;
        size_t at = off;
        int got = sl_log_block_next(p, len, &off, &pl, &pn, &seq, why, sizeof why);
        if (got == 0)
            break;
        if (got < 0) {
            st = bad_block(lr, p + at, len - at, at, why, err, cap);
            if (st != SUBLET_OK)
                goto done;
            break;
        }
        if (seq != want_seq) {
            sl_msg(err, cap, "block at byte %zu: sequence number %llu, expected %llu", at,
                   (unsigned long long)seq, (unsigned long long)want_seq);
            st = SUBLET_ERR_PARSE;
            goto done;
        }
        want_seq++;
        if ((st = read_block(lr, pl, pn, at, err, cap)) != SUBLET_OK)
            goto done;
    }
    if ((st = lost_notice(lr, err, cap)) != SUBLET_OK)
        goto done;
    trace_extras_set_format(lr->x, SUBLET_FORMAT_EVENT_LOG);
    trace_extras_set_device(lr->x, lr->h.device);
    trace_vec none1 = {0}, none2 = {0};
    st = trace_assemble(&none1, &none2, &lr->events, out);
    if (st == SUBLET_OK) {
        st = trace_extras_attach(*out, lr->x);
        lr->x = NULL;
        if (st != SUBLET_OK) {
            sublet_trace_free(*out);
            *out = NULL;
        }
    }
    if (st != SUBLET_OK)
        sl_msg(err, cap, "out of memory");
done:
    trace_extras_destroy(lr->x);
    trace_vec_free(&lr->events);
    idmap_free(&lr->stacks);
    free(lr);
    return st;
}

/* ---- the log as a stream (sublet/trace_stream.h) ------------------------------------------------ */

struct sl_log_stream {
    log_reader lr;      /* lr.x: the stream's extras (not owned here) */
    uint64_t want_seq;
    size_t block_at;    /* file offset of the block being decoded */
    size_t pl_len, pos; /* its payload (at src->buf + src->beg + header) and where we are */
    int in_block, done;
    /* journal: the bytes of the STACK and INFO records applied since the last
     * sl_log_stream_journal_clear (kept when `journal` is set) */
    int journal;
    uint8_t *jbuf;
    size_t jlen, jcap;
};

void sl_log_stream_set_extras(sl_log_stream *ls, trace_extras *x, int journal)
{
    ls->lr.x = x;
    ls->journal = journal;
    ls->jlen = 0;
}

const uint8_t *sl_log_stream_journal(const sl_log_stream *ls, size_t *len)
{
    *len = ls->jlen;
    return ls->jbuf;
}

void sl_log_stream_journal_clear(sl_log_stream *ls) { ls->jlen = 0; }

static int journal_add(sl_log_stream *ls, const uint8_t *p, size_t n)
{
    if (ls->jcap - ls->jlen < n) {
        size_t nc = ls->jcap ? ls->jcap : 4096;
        while (nc - ls->jlen < n)
            nc *= 2;
        uint8_t *nb = realloc(ls->jbuf, nc);
        if (!nb)
            return -1;
        ls->jbuf = nb;
        ls->jcap = nc;
    }
    memcpy(ls->jbuf + ls->jlen, p, n);
    ls->jlen += n;
    return 0;
}

sublet_status sl_log_journal_apply(trace_extras *x, const uint8_t *p, size_t n, char *err,
                                   size_t cap)
{
    struct {
        sl_log_frame frames[SL_LOG_MAX_FRAMES];
        trace_frame_in fin[SL_LOG_MAX_FRAMES];
    } *room = n ? malloc(sizeof *room) : NULL;
    if (n && !room) {
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    sl_log_rec r;
    r.frames = room ? room->frames : NULL;
    size_t pos = 0;
    sublet_status st = SUBLET_OK;
    char why[200];
    int got;
    while (st == SUBLET_OK && (got = sl_log_record_next(p, n, &pos, &r, why, sizeof why)) != 0) {
        uint32_t id;
        if (got < 0)
            st = SUBLET_ERR_PARSE; /* not from a journal */
        else if (r.type == SL_LOG_REC_STACK)
            st = intern_rec(x, &r, room->fin, &id);
        else if (r.type == SL_LOG_REC_INFO)
            st = apply_info(x, &r);
    }
    free(room);
    if (st != SUBLET_OK)
        sl_msg(err, cap, st == SUBLET_ERR_PARSE ? "journal: %s" : "out of memory", why);
    return st;
}

sublet_status sl_log_stream_start(sl_src *src, trace_extras *x, sl_log_stream **out, char *err,
                                  size_t cap)
{
    *out = NULL;
    sl_log_stream *ls = calloc(1, sizeof *ls);
    if (!ls) {
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    if (sl_src_fill(src, SL_LOG_HEADER_SIZE) != 0) {
        sl_msg(err, cap, "%s", src->ioerr[0] ? src->ioerr : "out of memory");
        free(ls);
        return src->ioerr[0] ? SUBLET_ERR_IO : SUBLET_ERR_NO_MEMORY;
    }
    if (sl_log_header_decode(src->buf + src->beg, src->end - src->beg, &ls->lr.h, err, cap) != 0) {
        free(ls);
        return SUBLET_ERR_PARSE;
    }
    sl_src_take(src, SL_LOG_HEADER_SIZE);
    ls->lr.x = x;
    trace_extras_set_format(x, SUBLET_FORMAT_EVENT_LOG);
    trace_extras_set_device(x, ls->lr.h.device);
    *out = ls;
    return SUBLET_OK;
}

void sl_log_stream_free(sl_log_stream *ls)
{
    if (!ls)
        return;
    idmap_free(&ls->lr.stacks);
    trace_vec_free(&ls->lr.events);
    free(ls->jbuf);
    free(ls);
}

static sublet_status src_failed(sl_src *src, char *err, size_t cap)
{
    sl_msg(err, cap, "%s", src->ioerr[0] ? src->ioerr : "out of memory");
    return src->ioerr[0] ? SUBLET_ERR_IO : SUBLET_ERR_NO_MEMORY;
}

/* The next intact block into ls (in_block), or the end (done). */
static sublet_status next_block(sl_log_stream *ls, sl_src *src, char *err, size_t cap)
{
    size_t at = (size_t)src->off;
    if (sl_src_fill(src, SL_LOG_BLOCK_HEADER_SIZE) != 0)
        return src_failed(src, err, cap);
    size_t avail = src->end - src->beg;
    if (avail == 0) {
        ls->done = 1;
        return lost_notice(&ls->lr, err, cap);
    }
    if (header_ok(src->buf + src->beg, avail, 0)) {
        size_t l = sl_get_u32(src->buf + src->beg + 4);
        if (sl_src_fill(src, SL_LOG_BLOCK_HEADER_SIZE + l) != 0)
            return src_failed(src, err, cap);
    }
    const uint8_t *pl;
    size_t pn, o = 0;
    uint64_t seq;
    char why[200] = "";
    int got = sl_log_block_next(src->buf + src->beg, src->end - src->beg, &o, &pl, &pn, &seq, why,
                                sizeof why);
    if (got < 0) {
        /* torn or corrupt: the rest of the file decides, as when read whole */
        while (!src->eof)
            if (sl_src_fill(src, src->end - src->beg + src->chunk) != 0)
                return src_failed(src, err, cap);
        sublet_status st = bad_block(&ls->lr, src->buf + src->beg, src->end - src->beg, at, why,
                                     err, cap);
        if (st != SUBLET_OK)
            return st;
        sl_src_take(src, src->end - src->beg);
        ls->done = 1;
        return lost_notice(&ls->lr, err, cap);
    }
    if (seq != ls->want_seq) {
        sl_msg(err, cap, "block at byte %zu: sequence number %llu, expected %llu", at,
               (unsigned long long)seq, (unsigned long long)ls->want_seq);
        return SUBLET_ERR_PARSE;
    }
    ls->want_seq++;
    ls->in_block = 1;
    ls->block_at = at;
    ls->pl_len = pn;
    ls->pos = 0;
    return SUBLET_OK;
}

sublet_status sl_log_stream_next(sl_log_stream *ls, sl_src *src, sublet_trace_event *ev,
                                 int *got, char *err, size_t cap)
{
    *got = 0;
    sl_log_rec r;
    for (;;) {
        if (ls->done)
            return SUBLET_OK;
        if (!ls->in_block) {
            sublet_status st = next_block(ls, src, err, cap);
            if (st != SUBLET_OK)
                return st;
            continue;
        }
        const uint8_t *pl = src->buf + src->beg + SL_LOG_BLOCK_HEADER_SIZE;
        r.frames = ls->lr.frames;
        char why[200];
        size_t from = ls->pos;
        int g = sl_log_record_next(pl, ls->pl_len, &ls->pos, &r, why, sizeof why);
        if (g == 0) {
            sl_src_take(src, SL_LOG_BLOCK_HEADER_SIZE + ls->pl_len);
            ls->in_block = 0;
            continue;
        }
        size_t at = ls->block_at + SL_LOG_BLOCK_HEADER_SIZE + ls->pos;
        if (g < 0) {
            sl_msg(err, cap, "block at byte %zu, record at byte %zu: %s", ls->block_at, at, why);
            return SUBLET_ERR_PARSE;
        }
        int is_event;
        sublet_status st = apply_record(&ls->lr, &r, ls->block_at, at, ev, &is_event, err, cap);
        if (st != SUBLET_OK)
            return st;
        if (is_event) {
            *got = 1;
            return SUBLET_OK;
        }
        if (ls->journal && (r.type == SL_LOG_REC_STACK || r.type == SL_LOG_REC_INFO) &&
            journal_add(ls, pl + from, ls->pos - from) != 0) {
            sl_msg(err, cap, "out of memory");
            return SUBLET_ERR_NO_MEMORY;
        }
    }
}

/* The longest event record: a type byte and five varints of ten bytes. */
#define EVENT_ROOM 51

/* A varint with at least ten bytes readable at p[*q]: 1, or 0 when it is
 * longer than 64 bits (left to the checked decoder for its message). */
static inline int varint_fast(const uint8_t *p, size_t *q, uint64_t *v)
{
    size_t i = *q;
    uint64_t b = p[i++];
    if (!(b & 0x80)) { /* one byte: the common case for a stream, a stack id */
        *v = b;
        *q = i;
        return 1;
    }
    uint64_t x = b & 0x7f;
    for (unsigned shift = 7;; shift += 7) {
        b = p[i++];
        if (shift == 63 && b > 1)
            return 0;
        x |= (b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    *v = x;
    *q = i;
    return 1;
}

sublet_status sl_log_stream_read(sl_log_stream *ls, sl_src *src, sublet_trace_event *ev,
                                 size_t cap, size_t *n, char *err, size_t ecap)
{
    size_t k = 0;
    sublet_status st = SUBLET_OK;
    while (k < cap) {
        if (ls->in_block && !ls->done) {
            /* event records decoded in place while the longest one fits; anything
             * else (another record, a malformed or unknown field, the block's
             * last bytes) goes through sl_log_stream_next */
            const uint8_t *pl = src->buf + src->beg + SL_LOG_BLOCK_HEADER_SIZE;
            size_t len = ls->pl_len, pos = ls->pos;
            uint64_t records = ls->lr.records, start_us = ls->lr.h.start_us;
            while (k < cap && len - pos >= EVENT_ROOM) {
                unsigned type = pl[pos];
                if (type < SL_LOG_REC_EVENT || type >= SL_LOG_REC_EVENT + SUBLET_ACT_COUNT)
                    break;
                size_t q = pos + 1;
                uint64_t dt, addr, size, stream, stack;
                if (!varint_fast(pl, &q, &dt) || !varint_fast(pl, &q, &addr) ||
                    !varint_fast(pl, &q, &size) || !varint_fast(pl, &q, &stream) ||
                    !varint_fast(pl, &q, &stack) || stack > UINT32_MAX)
                    break;
                uint32_t sid = 0;
                if (stack && !(sid = idmap_get(&ls->lr.stacks, (uint32_t)stack)))
                    break;
                event_of(&ev[k++], type - SL_LOG_REC_EVENT, addr, size, stream,
                         start_us + (uint64_t)sl_unzigzag(dt), ++records, sid);
                pos = q;
            }
            ls->pos = pos;
            ls->lr.records = records;
            if (k == cap)
                break;
        }
        int got;
        st = sl_log_stream_next(ls, src, &ev[k], &got, err, ecap);
        if (st != SUBLET_OK || !got)
            break;
        k++;
    }
    *n = k;
    return st;
}
