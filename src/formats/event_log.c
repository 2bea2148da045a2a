/* sublet — the continuous event log's writer (sublet/log.h; layout in
 * event_log_format.h and docs/replay.md).
 *
 * The allocator's event callback (sublet_event_set) runs with the
 * allocator's lock held, so the producers of the log are serialised by that
 * lock: one producer at a time.  They encode each event into a ring buffer
 * and publish the new head with a release store; nothing else.  The consumer
 * (the writer thread, or with SUBLET_LOG_SYNC the producer itself when the
 * ring is half full, and sublet_log_flush) takes the ring's published bytes
 * [tail, head) under its own mutex, frames them as one block (a header with
 * the payload's CRC32), write()s it, and moves the tail.  Every record is
 * whole inside the published range, so any such range is a valid block.
 *
 * When the ring has no room (the writer thread is behind), the producer
 * writes the ring itself; with SUBLET_LOG_DROP it drops the event and counts
 * it instead, and the next record that fits is preceded by a LOST record
 * with the count.  A write
 * error stops the log for good: the producers see the flag and return at
 * once. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "formats/event_log_format.h"
#include "sublet/config.h"
#include "sublet/history.h"
#include "sublet/log.h"

#define DEFAULT_RING ((size_t)8 << 20)
#define MIN_RING ((size_t)64 << 10)
#define MAX_RING ((size_t)64 << 20)
#define DEFAULT_FLUSH_MS 200u

struct sublet_log {
    sublet_allocator *a;
    int fd;
    uint32_t flags;
    uint64_t start_us;
    /* the ring: bytes [tail, head) are published and not yet written */
    uint8_t *ring;
    size_t cap; /* a power of two */
    _Atomic uint64_t head, tail;
    /* producer side (the allocator's lock held) */
    uint64_t lost_pending; /* dropped since the last LOST record */
    uint8_t *seen;         /* bitmap: stacks already written */
    size_t seen_bits;
    uint8_t *stackbuf;     /* a STACK record being encoded */
    size_t stackbuf_cap;
    _Atomic int failed;
    _Atomic uint64_t events, lost, stacks;
    /* consumer side: dmu held */
    pthread_mutex_t dmu;
    uint8_t *wbuf; /* block header + payload */
    uint64_t seq, blocks, bytes;
    sublet_status status;
    int error_number;
    char message[256];
    sublet_log_error_fn on_error;
    void *error_user;
    /* the writer thread */
    pthread_mutex_t wmu;
    pthread_cond_t cv;
    bool wake, stop, has_thread;
    unsigned flush_ms;
    pthread_t thread;
};

static inline void bump(_Atomic uint64_t *c, uint64_t by)
{
    /* one producer at a time (or dmu held): no read-modify-write needed */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

/* ---- consumer -------------------------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return ENOSPC;
        p += (size_t)w;
        n -= (size_t)w;
    }
    return 0;
}

/* dmu held */
static void fail(sublet_log *lg, int e, const char *what)
{
    if (lg->status != SUBLET_OK)
        return;
    lg->status = SUBLET_ERR_IO;
    lg->error_number = e;
    snprintf(lg->message, sizeof lg->message, "event log: %s: %s; logging stopped", what,
             strerror(e));
    atomic_store_explicit(&lg->failed, 1, memory_order_release);
    if (lg->on_error)
        lg->on_error(lg->error_user, lg->status, lg->message);
}

/* Write the published bytes as one block. */
static void drain(sublet_log *lg)
{
    pthread_mutex_lock(&lg->dmu);
    uint64_t h = atomic_load_explicit(&lg->head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&lg->tail, memory_order_relaxed);
    if (h != t && lg->status == SUBLET_OK) {
        size_t n = (size_t)(h - t), at = (size_t)(t & (lg->cap - 1));
        size_t first = n < lg->cap - at ? n : lg->cap - at;
        uint8_t *payload = lg->wbuf + SL_LOG_BLOCK_HEADER_SIZE;
        memcpy(payload, lg->ring + at, first);
        memcpy(payload + first, lg->ring, n - first);
        sl_log_block_seal(lg->wbuf, payload, n, lg->seq);
        int e = write_all(lg->fd, lg->wbuf, SL_LOG_BLOCK_HEADER_SIZE + n);
        if (e) {
            fail(lg, e, "write");
        } else {
            lg->seq++;
            lg->blocks++;
            lg->bytes += SL_LOG_BLOCK_HEADER_SIZE + n;
        }
    }
    /* written, or dropped after a failure: the room is free again */
    atomic_store_explicit(&lg->tail, h, memory_order_release);
    pthread_mutex_unlock(&lg->dmu);
}

static void *writer_main(void *arg)
{
    sublet_log *lg = arg;
    pthread_mutex_lock(&lg->wmu);
    while (!lg->stop) {
        if (!lg->wake) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += lg->flush_ms / 1000;
            ts.tv_nsec += (long)(lg->flush_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&lg->cv, &lg->wmu, &ts);
        }
        lg->wake = false;
        pthread_mutex_unlock(&lg->wmu);
        drain(lg);
        pthread_mutex_lock(&lg->wmu);
    }
    pthread_mutex_unlock(&lg->wmu);
    return NULL;
}

/* ---- producer (the allocator's lock held) ------------------------------------------------------ */

static void wake_writer(sublet_log *lg)
{
    if (!lg->has_thread)
        return;
    pthread_mutex_lock(&lg->wmu); /* held only for moments by the writer */
    if (!lg->wake) {
        lg->wake = true;
        pthread_cond_signal(&lg->cv);
    }
    pthread_mutex_unlock(&lg->wmu);
}

/* Make the n bytes written at head h visible to the consumer (t: the tail
 * the room was checked against); wake it when the ring just got half full. */
static void publish(sublet_log *lg, uint64_t h, uint64_t t, size_t n)
{
    atomic_store_explicit(&lg->head, h + n, memory_order_release);
    size_t used = (size_t)(h + n - t);
    if (used >= lg->cap / 2 && used - n < lg->cap / 2) { /* just crossed half */
        if (lg->has_thread)
            wake_writer(lg);
        else
            drain(lg);
    }
}

/* Append n bytes as published records; false when there is no room. */
static bool put(sublet_log *lg, const uint8_t *p, size_t n)
{
    uint64_t h = atomic_load_explicit(&lg->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&lg->tail, memory_order_acquire);
    if (lg->cap - (size_t)(h - t) < n) {
        /* full: the writer thread is behind (starved of CPU, a slow disk).
         * Write the ring from here (the one time the allocating thread
         * waits on I/O), or with SUBLET_LOG_DROP drop the record */
        if (lg->flags & SUBLET_LOG_DROP)
            wake_writer(lg);
        else
            drain(lg);
        t = atomic_load_explicit(&lg->tail, memory_order_acquire);
        if (lg->cap - (size_t)(h - t) < n)
            return false;
    }
    size_t at = (size_t)(h & (lg->cap - 1));
    size_t first = n < lg->cap - at ? n : lg->cap - at;
    memcpy(lg->ring + at, p, first);
    memcpy(lg->ring, p + first, n - first);
    publish(lg, h, t, n);
    return true;
}

static bool seen(const sublet_log *lg, uint32_t id)
{
    return id < lg->seen_bits && (lg->seen[id >> 3] >> (id & 7) & 1);
}

static bool mark_seen(sublet_log *lg, uint32_t id)
{
    if (id >= lg->seen_bits) {
        size_t bits = lg->seen_bits ? lg->seen_bits : 1024;
        while (bits <= id)
            bits *= 2;
        uint8_t *s = realloc(lg->seen, bits / 8);
        if (!s)
            return false;
        memset(s + lg->seen_bits / 8, 0, (bits - lg->seen_bits) / 8);
        lg->seen = s;
        lg->seen_bits = bits;
    }
    lg->seen[id >> 3] |= (uint8_t)(1u << (id & 7));
    return true;
}

static size_t put_str(uint8_t *out, const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n > max)
        n = max;
    size_t k = sl_put_varint(out, n);
    if (n)
        memcpy(out + k, s, n);
    return k + n;
}

/* Write stack `id`'s record; false when it did not fit (or no memory). */
static bool put_stack(sublet_log *lg, sublet_allocator *a, uint32_t id)
{
    const sublet_frame *fr = NULL;
    size_t n = sublet_stack_frames_locked(a, id, &fr);
    if (n > SL_LOG_MAX_FRAMES)
        n = SL_LOG_MAX_FRAMES;
    /* strings cut so that the record stays well inside the ring */
    size_t room = lg->cap / 4, str_max = SL_LOG_MAX_STRING;
    while (str_max > 16 && 32 + n * (2 * str_max + 30) > room)
        str_max /= 2;
    size_t need = 32 + n * (2 * str_max + 30);
    if (need > lg->stackbuf_cap) {
        uint8_t *b = realloc(lg->stackbuf, need);
        if (!b)
            return false;
        lg->stackbuf = b;
        lg->stackbuf_cap = need;
    }
    uint8_t *p = lg->stackbuf;
    size_t k = 0;
    p[k++] = SL_LOG_REC_STACK;
    k += sl_put_varint(p + k, id);
    k += sl_put_varint(p + k, n);
    for (size_t i = 0; i < n; i++) {
        k += put_str(p + k, fr[i].filename, str_max);
        k += put_str(p + k, fr[i].name, str_max);
        k += sl_put_varint(p + k, sl_zigzag(fr[i].line));
    }
    if (!mark_seen(lg, id) || !put(lg, p, k)) {
        if (id < lg->seen_bits)
            lg->seen[id >> 3] &= (uint8_t)~(1u << (id & 7));
        return false;
    }
    bump(&lg->stacks, 1);
    return true;
}

static void drop(sublet_log *lg)
{
    lg->lost_pending++;
    bump(&lg->lost, 1);
}

static void on_event(void *user, sublet_allocator *a, const sublet_event_record *ev)
{
    sublet_log *lg = user;
    if (atomic_load_explicit(&lg->failed, memory_order_relaxed))
        return;
    if (ev->stack && !seen(lg, ev->stack) && !put_stack(lg, a, ev->stack)) {
        drop(lg); /* never an event whose stack is not in the file */
        return;
    }
    uint8_t tmp[1 + 10 + 2 * 11 + 5 * 10];
    /* encoded in place when the ring has the room in one piece (the usual
     * case), else in tmp and copied */
    uint64_t h = atomic_load_explicit(&lg->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&lg->tail, memory_order_acquire);
    size_t at = (size_t)(h & (lg->cap - 1));
    bool direct = lg->cap - at >= sizeof tmp && lg->cap - (size_t)(h - t) >= sizeof tmp;
    uint8_t *rec = direct ? lg->ring + at : tmp;
    size_t k = 0;
    if (lg->lost_pending) {
        rec[k++] = SL_LOG_REC_LOST;
        k += sl_put_varint(rec + k, lg->lost_pending);
    }
    size_t ev_at = k;
    rec[k++] = (uint8_t)(SL_LOG_REC_EVENT + ev->action);
    k += sl_put_varint(rec + k, sl_zigzag((int64_t)(ev->time_us - lg->start_us)));
    k += sl_put_varint(rec + k, ev->addr);
    k += sl_put_varint(rec + k, ev->size);
    k += sl_put_varint(rec + k, (uint64_t)ev->stream);
    k += sl_put_varint(rec + k, ev->stack);
    if (direct) {
        publish(lg, h, t, k);
    } else if (!put(lg, rec, k)) {
        /* the LOST record alone may fit; the event then counts as lost */
        if (ev_at && put(lg, rec, ev_at))
            lg->lost_pending = 0;
        drop(lg);
        return;
    }
    lg->lost_pending = 0;
    bump(&lg->events, 1);
}

/* ---- the API --------------------------------------------------------------------------------- */

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void log_free(sublet_log *lg)
{
    if (lg->fd >= 0)
        close(lg->fd);
    pthread_mutex_destroy(&lg->dmu);
    pthread_mutex_destroy(&lg->wmu);
    pthread_cond_destroy(&lg->cv);
    free(lg->ring);
    free(lg->wbuf);
    free(lg->seen);
    free(lg->stackbuf);
    free(lg);
}

sublet_status sublet_log_open(sublet_allocator *a, const char *path,
                              const sublet_log_options *opt, sublet_log **out, char *err,
                              size_t cap)
{
    if (err && cap)
        err[0] = '\0';
    if (!a || !path || !*path || !out) {
        sl_msg(err, cap, "invalid argument");
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    sublet_log_options o;
    memset(&o, 0, sizeof o);
    if (opt)
        o = *opt;
    size_t ring = o.buffer_bytes ? o.buffer_bytes : DEFAULT_RING;
    if (ring < MIN_RING || ring > MAX_RING || o.flags & ~(SUBLET_LOG_SYNC | SUBLET_LOG_DROP) ||
        (o.flags & SUBLET_LOG_SYNC && o.flags & SUBLET_LOG_DROP)) {
        sl_msg(err, cap, "buffer_bytes must be 64 KiB .. 64 MiB; flags SUBLET_LOG_SYNC or "
                         "SUBLET_LOG_DROP");
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    size_t pow2 = MIN_RING;
    while (pow2 < ring)
        pow2 *= 2;
    size_t settings_len = o.settings ? strlen(o.settings) : 0;
    if (settings_len > 1000) {
        sl_msg(err, cap, "settings string too long");
        return SUBLET_ERR_INVALID_ARGUMENT;
    }
    if (o.settings) {
        sublet_settings ss;
        sublet_settings_default(&ss);
        char why[300];
        if (sublet_settings_parse(&ss, o.settings, why, sizeof why) != SUBLET_OK) {
            sl_msg(err, cap, "settings to record: %s", why);
            return SUBLET_ERR_INVALID_ARGUMENT;
        }
    }
    sublet_log *lg = calloc(1, sizeof *lg);
    if (!lg) {
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    lg->fd = -1;
    lg->a = a;
    lg->cap = pow2;
    lg->flags = o.flags;
    lg->flush_ms = o.flush_ms ? o.flush_ms : DEFAULT_FLUSH_MS;
    lg->on_error = o.on_error;
    lg->error_user = o.error_user;
    lg->status = SUBLET_OK;
    pthread_mutex_init(&lg->dmu, NULL);
    pthread_mutex_init(&lg->wmu, NULL);
    pthread_cond_init(&lg->cv, NULL);
    size_t first_cap = SL_LOG_HEADER_SIZE + SL_LOG_BLOCK_HEADER_SIZE + 32 + settings_len;
    lg->ring = malloc(pow2);
    lg->wbuf = malloc(SL_LOG_BLOCK_HEADER_SIZE + (pow2 > first_cap ? pow2 : first_cap));
    if (!lg->ring || !lg->wbuf) {
        log_free(lg);
        sl_msg(err, cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    lg->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (lg->fd < 0) {
        sl_msg(err, cap, "%s: cannot create: %s", path, strerror(errno));
        log_free(lg);
        return SUBLET_ERR_IO;
    }
    /* the header and a first block with the INFO record, written now */
    lg->start_us = now_us();
    sl_log_header hd = {SL_LOG_VERSION, lg->flags & SUBLET_LOG_SYNC ? 0 : SL_LOG_FLAG_THREAD,
                        (int32_t)sublet_allocator_device(a), lg->start_us};
    uint8_t *w = lg->wbuf;
    sl_log_header_encode(&hd, w);
    uint8_t *pl = w + SL_LOG_HEADER_SIZE + SL_LOG_BLOCK_HEADER_SIZE;
    size_t k = 0;
    sublet_device_view v;
    uint64_t mem = sublet_device_view_read(a, &v) == SUBLET_OK ? v.total_bytes : 0;
    pl[k++] = SL_LOG_REC_INFO;
    k += sl_put_varint(pl + k, mem);
    k += sl_put_varint(pl + k, settings_len);
    if (settings_len)
        memcpy(pl + k, o.settings, settings_len);
    k += settings_len;
    sl_log_block_seal(w + SL_LOG_HEADER_SIZE, pl, k, lg->seq++);
    size_t total = SL_LOG_HEADER_SIZE + SL_LOG_BLOCK_HEADER_SIZE + k;
    int e = write_all(lg->fd, w, total);
    if (e) {
        sl_msg(err, cap, "%s: %s", path, strerror(e));
        log_free(lg);
        return SUBLET_ERR_IO;
    }
    lg->blocks = 1;
    lg->bytes = total;
    if (!(lg->flags & SUBLET_LOG_SYNC)) {
        if (pthread_create(&lg->thread, NULL, writer_main, lg) != 0) {
            sl_msg(err, cap, "cannot start the writer thread");
            log_free(lg);
            return SUBLET_ERR_NO_MEMORY;
        }
        lg->has_thread = true;
    }
    sublet_event_set(a, on_event, lg);
    *out = lg;
    return SUBLET_OK;
}

sublet_status sublet_log_flush(sublet_log *lg)
{
    if (!lg)
        return SUBLET_ERR_INVALID_ARGUMENT;
    drain(lg);
    pthread_mutex_lock(&lg->dmu);
    sublet_status st = lg->status;
    pthread_mutex_unlock(&lg->dmu);
    return st;
}

void sublet_log_status_read(sublet_log *lg, sublet_log_status *out)
{
    memset(out, 0, sizeof *out);
    if (!lg) {
        out->status = SUBLET_ERR_INVALID_ARGUMENT;
        return;
    }
    pthread_mutex_lock(&lg->dmu);
    out->status = lg->status;
    out->error_number = lg->error_number;
    out->blocks = lg->blocks;
    out->bytes_written = lg->bytes;
    snprintf(out->message, sizeof out->message, "%s", lg->message);
    pthread_mutex_unlock(&lg->dmu);
    out->events = atomic_load_explicit(&lg->events, memory_order_relaxed);
    out->events_lost = atomic_load_explicit(&lg->lost, memory_order_relaxed);
    out->stacks = atomic_load_explicit(&lg->stacks, memory_order_relaxed);
}

sublet_status sublet_log_close(sublet_log *lg)
{
    if (!lg)
        return SUBLET_OK;
    sublet_event_set(lg->a, NULL, NULL); /* no producer runs after this */
    if (lg->has_thread) {
        pthread_mutex_lock(&lg->wmu);
        lg->stop = true;
        pthread_cond_signal(&lg->cv);
        pthread_mutex_unlock(&lg->wmu);
        pthread_join(lg->thread, NULL);
    }
    if (lg->lost_pending) { /* the count of the last drops */
        uint8_t rec[11];
        rec[0] = SL_LOG_REC_LOST;
        size_t k = 1 + sl_put_varint(rec + 1, lg->lost_pending);
        drain(lg);
        if (put(lg, rec, k))
            lg->lost_pending = 0;
    }
    drain(lg);
    sublet_status st = lg->status;
    if (lg->fd >= 0 && close(lg->fd) != 0 && st == SUBLET_OK)
        st = SUBLET_ERR_IO;
    lg->fd = -1;
    log_free(lg);
    return st;
}
