/* sublet — the continuous event log: every event of a live allocator, for
 * as long as it runs, in a compact binary file (docs/replay.md, "The event
 * log").
 *
 * PyTorch keeps the last N events in a ring buffer (sublet/history.h does
 * the same); the log keeps them all: every malloc, free (requested and
 * completed), segment alloc/free/map/unmap, OOM and snapshot marker, with
 * its stream, size, address, time and interned stack (the frames written
 * once, the first time the stack is used).  Stacks are there while the
 * allocator records them (sublet_history_record with a context of ALLOC or
 * more).  `sublet replay`, `frag`, `report` and `convert` read the file as
 * any trace (SUBLET_FORMAT_EVENT_LOG, sublet_trace_parse_log).
 *
 * The allocating threads never wait on I/O: events go into a ring buffer in
 * memory (under the allocator's lock, no other lock) and a writer thread
 * writes them out in whole checksummed blocks (SUBLET_LOG_SYNC writes from
 * the allocating thread instead, when its buffer is half full).  A block is
 * written at least every flush_ms, when the ring is half full, and at
 * sublet_log_flush / sublet_log_close.  After kill -9 the file reads up to
 * the last block written; the cut block is reported as a torn tail.  When
 * the ring is full (the writer thread starved of CPU, a slow disk) the
 * allocating thread writes it out itself, the one case where it waits on
 * I/O; with SUBLET_LOG_DROP it never does: the events that do not fit are
 * counted as lost (a LOST record, reported by the reader).  A write error
 * (a full disk) stops the log: the error is kept (sublet_log_status_read),
 * given once to the error callback, and allocations go on unaffected. */
#ifndef SUBLET_LOG_H
#define SUBLET_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/sublet.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sublet_log sublet_log;

#define SUBLET_LOG_SYNC 1u /* no writer thread: the allocating thread writes */
#define SUBLET_LOG_DROP 2u /* ring full: drop events (counted) rather than write
                            * from the allocating thread */

/* Called once, when the log stops on an error: from the writer thread, or
 * (SUBLET_LOG_SYNC, or an error at sublet_log_flush) from the thread that
 * wrote, maybe with the allocator's lock held.  Must not call into the
 * allocator or the log. */
typedef void (*sublet_log_error_fn)(void *user, sublet_status st, const char *msg);

typedef struct sublet_log_options {
    uint32_t flags;         /* SUBLET_LOG_SYNC or SUBLET_LOG_DROP */
    size_t buffer_bytes;    /* ring buffer: 0 = 8 MiB; 64 KiB .. 64 MiB */
    unsigned flush_ms;      /* write at least this often (writer thread); 0 = 200 */
    const char *settings;   /* the allocator settings to record (a
                             * PYTORCH_CUDA_ALLOC_CONF string that parses,
                             * at most 1000 bytes), NULL: none */
    sublet_log_error_fn on_error;
    void *error_user;
} sublet_log_options;

/* Start logging allocator a's events to `path` (created or truncated; opt
 * may be NULL).  Takes the allocator's event callback (sublet_event_set):
 * one log per allocator.  Only what happens from now on is logged: open it
 * before the first allocation for a log that replays from an empty device.
 * SUBLET_ERR_IO (reason in err) when the file cannot be created,
 * SUBLET_ERR_NO_MEMORY, SUBLET_ERR_INVALID_ARGUMENT. */
SUBLET_API sublet_status sublet_log_open(sublet_allocator *a, const char *path,
                                         const sublet_log_options *opt, sublet_log **out, char *err,
                                         size_t err_cap);
/* Write everything logged so far (whole blocks, write(2); no fsync).
 * SUBLET_OK, or the error that stopped the log. */
SUBLET_API sublet_status sublet_log_flush(sublet_log *log);

typedef struct sublet_log_status {
    sublet_status status;  /* SUBLET_OK while logging; the error that stopped it */
    int error_number;      /* errno of that error (ENOSPC ...), 0 when none */
    uint64_t events;       /* events logged (in the file or on their way) */
    uint64_t events_lost;  /* events dropped: the ring buffer was full */
    uint64_t stacks;       /* distinct stacks written */
    uint64_t blocks;       /* blocks written */
    uint64_t bytes_written; /* file size so far */
    char message[256];     /* the error, "" when none */
} sublet_log_status;
SUBLET_API void sublet_log_status_read(sublet_log *log, sublet_log_status *out);

/* Stop logging: detach from the allocator, write what is left, close the
 * file and free the log (NULL is a no-op).  SUBLET_OK, or the error that
 * stopped the log. */
SUBLET_API sublet_status sublet_log_close(sublet_log *log);

#ifdef __cplusplus
}
#endif
#endif
