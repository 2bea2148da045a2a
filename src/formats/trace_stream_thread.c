/* sublet — the reader thread of a file stream (trace_stream_kinds.h): the
 * events CSV, the event log, the RMM log and the Kineto trace are decoded
 * ahead by a thread that hands the caller chunks of events, so that parsing
 * overlaps the caller's replay. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "formats/trace_stream_kinds.h"

/* ---- the reader thread ----------------------------------------------------------------------
 * For the file sources, a thread decodes ahead into a ring of NCHUNK chunks of
 * CHUNK_EVENTS events while the caller consumes them (memory: the ring, not
 * the trace).  Each chunk carries what the caller must apply before handing
 * out its events (the log's STACK and INFO records, as bytes: the caller's
 * extras are written by the caller alone, so what the accessors give is the
 * caller's own) and, in the last one, the end (and the log's notice) or the
 * error after its events.  So _next gives the same events, counts and errors
 * in the same order as without the thread.  The stream_thread option
 * (sublet_trace_load_options) SUBLET_STREAM_THREAD_NEVER turns it off;
 * _ALWAYS uses it for every CSV and log, even one that fits in the first
 * read (the tests); _AUTO: see use_thread (trace_stream_source.c). */

#define NCHUNK 4
#define CHUNK_EVENTS 4096

typedef struct chunk {
    /* the events, at rows + SL_STREAM_KEEP: a borrow puts the rows its
     * caller keeps right before them (sl_trace_stream_borrow) */
    sublet_trace_event rows[SL_STREAM_KEEP + CHUNK_EVENTS];
    size_t n;
    serr e;         /* e.st != OK: the error after ev[0, n) */
    int end;        /* the source ended after ev[0, n) */
    uint8_t *side;  /* the log's journal, applied before ev */
    size_t side_len, side_cap;
    char *notice;   /* end: the log's notice */
} chunk;

static sublet_trace_event *cev(chunk *c) { return c->rows + SL_STREAM_KEEP; }

struct prefetch {
    sublet_trace_stream *s;
    chunk *ring;                /* NCHUNK */
    pthread_mutex_t mu;
    pthread_cond_t filled, freed;
    uint64_t head, tail;        /* chunks filled, chunks released (mu) */
    int stop;                   /* mu */
    int finished;               /* mu: the thread filled its last chunk (or stopped) */
    pthread_t thread;
    chunk *cur;                 /* the caller's: the chunk being handed out */
    size_t at;                  /* ... its next event */
    int over;                   /* the caller's: the last chunk was handed out */
};

/* The thread's: fill c from the source. */
static void fill_chunk(sublet_trace_stream *s, chunk *c)
{
    c->n = 0;
    c->e.st = SUBLET_OK;
    c->end = 0;
    c->side_len = 0;
    free(c->notice);
    c->notice = NULL;
    sublet_status st = s->m->produce(s, cev(c), CHUNK_EVENTS, &c->n, &c->e);
    if (st == SUBLET_OK && c->n < CHUNK_EVENTS)
        c->end = 1;
    if (!s->m->journal)
        return;
    size_t jn;
    const uint8_t *j = s->m->journal(s, &jn);
    if (jn) {
        if (jn > c->side_cap) {
            uint8_t *nb = realloc(c->side, jn);
            if (!nb) {
                c->end = 0;
                sl_stream_efail(s, &c->e, SUBLET_ERR_NO_MEMORY, "out of memory");
                return;
            }
            c->side = nb;
            c->side_cap = jn;
        }
        memcpy(c->side, j, jn);
        c->side_len = jn;
        s->m->journal_clear(s);
    }
    const char *note = c->end ? trace_extras_notice(s->tx) : NULL;
    if (note && !(c->notice = strdup(note))) {
        c->end = 0;
        sl_stream_efail(s, &c->e, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
}

static void *reader_main(void *arg)
{
    prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->head - p->tail == NCHUNK) {
            /* full: sleep until half of it is free (one wake-up per NCHUNK / 2
             * chunks, not per chunk: a wake-up costs tens of microseconds on a VM) */
            while (!p->stop && p->head - p->tail > NCHUNK / 2)
                pthread_cond_wait(&p->freed, &p->mu);
            continue;
        }
        chunk *c = &p->ring[p->head % NCHUNK];
        pthread_mutex_unlock(&p->mu);
        fill_chunk(p->s, c);
        pthread_mutex_lock(&p->mu);
        p->head++;
        if (c->e.st != SUBLET_OK || c->end)
            break;
        if (p->head - p->tail >= NCHUNK / 2)
            pthread_cond_signal(&p->filled);
    }
    p->finished = 1;
    pthread_cond_signal(&p->filled);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void prefetch_free(prefetch *p)
{
    for (int i = 0; i < NCHUNK; i++) {
        free(p->ring[i].side);
        free(p->ring[i].notice);
    }
    free(p->ring);
    free(p);
}

int sl_prefetch_start(sublet_trace_stream *s)
{
    prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->s = s;
    if (!(p->ring = calloc(NCHUNK, sizeof *p->ring))) {
        free(p);
        return -1;
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        prefetch_free(p);
        return -1;
    }
    if (pthread_cond_init(&p->filled, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        prefetch_free(p);
        return -1;
    }
    if (pthread_cond_init(&p->freed, NULL) != 0) {
        pthread_cond_destroy(&p->filled);
        pthread_mutex_destroy(&p->mu);
        prefetch_free(p);
        return -1;
    }
    if (pthread_create(&p->thread, NULL, reader_main, p) != 0) {
        pthread_cond_destroy(&p->freed);
        pthread_cond_destroy(&p->filled);
        pthread_mutex_destroy(&p->mu);
        prefetch_free(p);
        return -1;
    }
    s->pf = p;
    return 0;
}

void sl_prefetch_stop(sublet_trace_stream *s)
{
    prefetch *p = s->pf;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->freed);
    pthread_cond_destroy(&p->filled);
    pthread_mutex_destroy(&p->mu);
    prefetch_free(p);
    s->pf = NULL;
}

/* _next with the thread: up to cap events into ev (*k), as produce would give
 * them; the error after them is the stream's (sticky), as without it. */
sublet_status sl_prefetch_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                               size_t *k)
{
    prefetch *p = s->pf;
    size_t n = 0;
    while (n < cap && !p->over) {
        if (!p->cur) {
            pthread_mutex_lock(&p->mu);
            if (p->head == p->tail) /* empty: sleep until half of it is filled, or the last chunk */
                while (p->head - p->tail < NCHUNK / 2 && !p->finished)
                    pthread_cond_wait(&p->filled, &p->mu);
            pthread_mutex_unlock(&p->mu);
            p->cur = &p->ring[p->tail % NCHUNK];
            p->at = 0;
            if (sl_stream_apply_journal(s, p->cur->side, p->cur->side_len) != SUBLET_OK) {
                p->over = 1;
                break;
            }
        }
        chunk *c = p->cur;
        size_t m = c->n - p->at < cap - n ? c->n - p->at : cap - n;
        memcpy(ev + n, cev(c) + p->at, m * sizeof *ev);
        n += m;
        p->at += m;
        if (n == cap)
            break; /* what follows (the end, an error) is the next call's, as without the thread */
        if (c->e.st != SUBLET_OK) {
            s->e = c->e;
            p->over = 1;
            break;
        }
        if (c->end) {
            p->over = 1;
            if (c->notice && trace_extras_set_notice(s->x, c->notice) != SUBLET_OK)
                sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
            break;
        }
        pthread_mutex_lock(&p->mu);
        p->tail++;
        if (p->head - p->tail <= NCHUNK / 2)
            pthread_cond_signal(&p->freed);
        pthread_mutex_unlock(&p->mu);
        p->cur = NULL;
    }
    *k = n;
    return s->e.st;
}

/* A borrow with the thread (sl_trace_stream_borrow): the rest of the
 * current chunk, or the next chunk, the kept rows copied into the room
 * before its events; a chunk goes back to the thread only once the next
 * one holds the kept rows (they may be its own). */
sublet_status sl_prefetch_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                                 size_t nkeep, const sublet_trace_event **ev, size_t *n)
{
    prefetch *p = s->pf;
    for (;;) {
        chunk *c = p->cur;
        if (p->over) {
            /* nothing is given back any more: the kept rows stay where they are */
            *ev = nkeep ? keep + nkeep : c ? cev(c) + p->at : NULL;
            *n = 0;
            return s->e.st;
        }
        if (c && p->at < c->n) {
            sublet_trace_event *dst = cev(c) + p->at;
            if (nkeep && keep != dst - nkeep)
                memmove(dst - nkeep, keep, nkeep * sizeof *keep);
            *ev = dst;
            *n = c->n - p->at;
            p->at = c->n;
            return SUBLET_OK;
        }
        if (c && c->e.st != SUBLET_OK) { /* what follows its rows */
            s->e = c->e;
            p->over = 1;
            continue;
        }
        if (c && c->end) {
            p->over = 1;
            if (c->notice && trace_extras_set_notice(s->x, c->notice) != SUBLET_OK)
                sl_stream_fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
            continue;
        }
        uint64_t want = c ? 2 : 1; /* chunks filled from tail on: the current one and the next */
        pthread_mutex_lock(&p->mu);
        if (p->head - p->tail < want) /* sleep until half of the rest is filled, or the last */
            while (p->head - p->tail < want - 1 + NCHUNK / 2 && !p->finished)
                pthread_cond_wait(&p->filled, &p->mu);
        int none = p->head - p->tail < want; /* the thread stopped */
        pthread_mutex_unlock(&p->mu);
        if (none) {
            p->over = 1;
            continue;
        }
        chunk *nx = &p->ring[(p->tail + want - 1) % NCHUNK];
        if (sl_stream_apply_journal(s, nx->side, nx->side_len) != SUBLET_OK) {
            p->over = 1;
            continue;
        }
        sublet_trace_event *dst = cev(nx);
        if (nkeep) {
            memmove(dst - nkeep, keep, nkeep * sizeof *keep);
            keep = dst - nkeep;
        }
        if (c) {
            pthread_mutex_lock(&p->mu);
            p->tail++;
            if (p->head - p->tail <= NCHUNK / 2)
                pthread_cond_signal(&p->freed);
            pthread_mutex_unlock(&p->mu);
        }
        p->cur = nx;
        p->at = 0;
    }
}
