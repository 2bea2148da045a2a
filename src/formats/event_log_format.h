/* sublet — the event log's file layout (docs/replay.md, "The event log"),
 * shared by its writer (event_log.c) and its reader (trace_log.c).  Not a
 * public header.
 *
 *   file   = header (32 bytes) block*
 *   header = "SUBLETLG" version(1) flags(1) 0(2) device(i32) start_us(u64)
 *            0(4) crc32(bytes 0..27)(u32)
 *   block  = "SLBK" payload_len(u32) seq(u64) payload_crc32(u32)
 *            header_crc32(bytes 0..19)(u32) payload
 *   payload = record*, each a type byte and LEB128 varints
 *
 * Integers in the headers are little-endian.  Every record is complete in
 * its block and needs no earlier one to decode (times are offsets from the
 * file header's start_us), so a block can be read alone. */
#ifndef SUBLET_FORMATS_EVENT_LOG_FORMAT_H
#define SUBLET_FORMATS_EVENT_LOG_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sublet/sublet.h"

#define SL_LOG_MAGIC "SUBLETLG"
#define SL_LOG_VERSION 1
#define SL_LOG_HEADER_SIZE 32
#define SL_LOG_BLOCK_MAGIC "SLBK"
#define SL_LOG_BLOCK_HEADER_SIZE 24
#define SL_LOG_MAX_PAYLOAD ((size_t)64 << 20) /* a block's payload at most */
#define SL_LOG_MAX_FRAMES 256                 /* a stack record's frames at most */
#define SL_LOG_MAX_STRING 4096                /* a frame's file or name, bytes */

/* header flags */
#define SL_LOG_FLAG_THREAD 1u /* written by a writer thread (informational) */

/* record types */
enum {
    SL_LOG_REC_INFO = 0x01,  /* varint device_memory, varint n, n bytes settings */
    SL_LOG_REC_STACK = 0x02, /* varint id, varint nframes, frames: varint n, file,
                              * varint n, name, zigzag line */
    SL_LOG_REC_LOST = 0x03,  /* varint count: events the writer had no room for */
    SL_LOG_REC_EVENT = 0x10  /* + action: zigzag dt, varint addr, size, stream, stack */
};

static inline void sl_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sl_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t sl_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sl_get_u64(const uint8_t *p)
{
    return (uint64_t)sl_get_u32(p) | (uint64_t)sl_get_u32(p + 4) << 32;
}

/* LEB128: at most 10 bytes. */
static inline size_t sl_put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static inline uint64_t sl_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t sl_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* The 32-byte file header. */
typedef struct sl_log_header {
    uint8_t version, flags;
    int32_t device;
    uint64_t start_us;
} sl_log_header;

void sl_log_header_encode(const sl_log_header *h, uint8_t out[SL_LOG_HEADER_SIZE]);
/* 0, or -1 with the reason in err (not a log, unknown version, bad checksum,
 * too short). */
int sl_log_header_decode(const uint8_t *p, size_t n, sl_log_header *h, char *err, size_t cap);

/* Frame a payload: fill the block header before it. */
void sl_log_block_seal(uint8_t hdr[SL_LOG_BLOCK_HEADER_SIZE], const uint8_t *payload, size_t len,
                       uint64_t seq);

/* The next block of buf[*off..n).  Returns
 *   1: a whole, intact block: *payload and *len, *seq; *off moves past it;
 *   0: the end (*off == n);
 *  -1: what follows is not an intact block (torn, or corrupt): *off stays and
 *      err says what is wrong with it. */
int sl_log_block_next(const uint8_t *buf, size_t n, size_t *off, const uint8_t **payload,
                      size_t *len, uint64_t *seq, char *err, size_t cap);
/* Is there an intact block anywhere in buf[from..n)?  (A bad block followed
 * by a good one is corruption, not a torn tail.)  Its offset, or n. */
size_t sl_log_block_scan(const uint8_t *buf, size_t n, size_t from);

/* One decoded record. */
typedef struct sl_log_frame {
    const uint8_t *file, *name; /* into the payload, not NUL-terminated */
    size_t file_len, name_len;
    int64_t line;
} sl_log_frame;

typedef struct sl_log_rec {
    int type;               /* SL_LOG_REC_* (EVENT for every action) */
    sublet_action action;   /* EVENT */
    int64_t dt;             /* EVENT: microseconds after start_us */
    uint64_t addr, size, stream;
    uint32_t stack;         /* EVENT: stack id; STACK: its id */
    uint64_t count;         /* LOST: events; INFO: device memory */
    const uint8_t *text;    /* INFO: settings (not NUL-terminated) */
    size_t text_len;
    size_t nframes;         /* STACK: frames[0..nframes) */
    sl_log_frame *frames;   /* caller's array of SL_LOG_MAX_FRAMES */
} sl_log_rec;

/* Decode the record at p[*pos..n) into *r (r->frames must point at room for
 * SL_LOG_MAX_FRAMES).  1 and *pos past it; 0 at the end; -1 when malformed
 * (err says why; *pos is the record's start).  The fields a record's type
 * does not use are zero, except for an event: its own fields only are set. */
int sl_log_record_next(const uint8_t *p, size_t n, size_t *pos, sl_log_rec *r, char *err,
                       size_t cap);

#endif
