/* sublet — traces read as streams (sublet/trace_stream.h): a buffered
 * source over a file (plain or gzip'd, through zlib's gzread), the events
 * CSV row by row with its prelude read ahead, the event log record by
 * record (trace_log.c), and every other format read whole and handed out
 * from memory.
 *
 * The events CSV here and sublet_trace_parse_csv share the header and row
 * parsers (trace_csv.c), and the line splitting follows the same rules: a
 * line ends at LF, one CR before it is dropped, the last line may lack its
 * LF, an empty line is an error.  So a stream gives the same rows, lines and
 * error texts as the whole-file reader.  The CSV and the log are decoded ahead
 * by a reader thread ("the reader thread" below) that hands the caller chunks
 * of events, so that parsing overlaps the caller's replay. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/errmsg.h"
#include "formats/trace_readers.h"
#include "sublet/trace_stream.h"

#define DEFAULT_CHUNK ((size_t)1 << 20)
#define DETECT_BYTES ((size_t)1 << 16) /* what sublet_trace_detect looks at */

/* ---- the stream ------------------------------------------------------------------------------ */

enum { K_TRACE, K_CSV, K_LOG, K_RAW, K_RMM, K_KINETO };

/* An error and its text ("PATH: reason"). */
typedef struct serr {
    sublet_status st;
    char msg[600];
} serr;

typedef struct prefetch prefetch;

struct sublet_trace_stream {
    int kind;
    const sublet_trace *t; /* K_TRACE: the trace streamed */
    sublet_trace *owned;   /* ... when this stream read it */
    size_t pos;            /* K_TRACE: next event */
    char *path;            /* NULL: from_trace */
    sublet_trace_load_options opt;
    sl_src src;
    trace_vec pre;            /* the prelude (K_CSV, K_RMM, K_KINETO) */
    sublet_trace_event pend;  /* the first recorded row, read with the prelude */
    int has_pend;
    uint64_t lineno;          /* K_CSV: last line read */
    int csv_cols;             /* K_CSV: 6, or 7 with the pool column */
    sl_log_stream *log;
    sl_rmm *rmm;              /* K_RMM: the reader's state */
    sl_kineto *kin;           /* K_KINETO: the reader's state */
    trace_extras *x; /* K_CSV, K_LOG, K_RMM, K_KINETO */
    /* the extras of earlier passes (sublet_trace_stream_rewind): what the
     * accessors handed out (settings, stacks) stays valid until close */
    trace_extras **retired;
    size_t nretired;
    FILE *raw;                 /* K_RAW: the recorded rows as sublet_trace_event records */
    sublet_trace_stream *origin; /* K_RAW: the stream copied (prelude, extras) */
    uint64_t rows;   /* handed out, prelude included */
    serr e;          /* sticky error */
    /* the reader thread (K_CSV, K_LOG, K_RMM, K_KINETO; see "the reader thread" below): while
     * it runs, src, log, lineno and tx are its own */
    prefetch *pf;
    trace_extras *tx; /* K_LOG with the thread: the extras the log applies its records to */
    sublet_trace_event *bb; /* a borrow without the thread: SL_STREAM_KEEP + BORROW_ROWS */
};

/* The source as messages name it (standard input: "stdin", as loading does). */
static const char *shown(const sublet_trace_stream *s)
{
    return !s->path ? "trace" : strcmp(s->path, "-") == 0 ? "stdin" : s->path;
}

static sublet_status efail(const sublet_trace_stream *s, serr *e, sublet_status st,
                           const char *why)
{
    e->st = st;
    snprintf(e->msg, sizeof e->msg, "%s: %s", shown(s), why);
    return st;
}

static sublet_status fail(sublet_trace_stream *s, sublet_status st, const char *why)
{
    return efail(s, &s->e, st, why);
}

static sublet_status src_fail(const sublet_trace_stream *s, serr *e)
{
    return efail(s, e, s->src.ioerr[0] ? SUBLET_ERR_IO : SUBLET_ERR_NO_MEMORY,
                 s->src.ioerr[0] ? s->src.ioerr : "out of memory");
}

/* The next CSV line: sl_src_line, its error in *e. */
static int csv_line(sublet_trace_stream *s, const char **lp, size_t *ln, serr *e)
{
    int got = sl_src_line(&s->src, lp, ln);
    if (got < 0)
        src_fail(s, e);
    return got;
}

/* The next CSV row into *ev: 1, 0 at the end, -1 on error (in *e). */
static int csv_row(sublet_trace_stream *s, sublet_trace_event *ev, serr *e)
{
    const char *lp;
    size_t ln;
    int got = csv_line(s, &lp, &ln, e);
    if (got <= 0)
        return got;
    s->lineno++;
    char why[400];
    sublet_status st = sl_csv_row(lp, ln, s->csv_cols, s->lineno, ev, why, sizeof why);
    if (st != SUBLET_OK) {
        efail(s, e, st, why);
        return -1;
    }
    return 1;
}

/* Header and prelude, up to the first recorded row (kept in pend). */
static sublet_status csv_start(sublet_trace_stream *s)
{
    sl_src *src = &s->src;
    if (sl_src_fill(src, 3) != 0)
        return src_fail(s, &s->e);
    if (src->end - src->beg >= 3 && memcmp(src->buf + src->beg, "\xef\xbb\xbf", 3) == 0)
        sl_src_take(src, 3); /* UTF-8 byte-order mark */
    const char *lp;
    size_t ln;
    int got = csv_line(s, &lp, &ln, &s->e);
    if (got < 0)
        return s->e.st;
    char why[400];
    sublet_status st = sl_csv_header(got ? lp : NULL, got ? ln : 0, &s->csv_cols, why, sizeof why);
    if (st != SUBLET_OK)
        return fail(s, st, why);
    s->lineno = 1;
    for (;;) {
        sublet_trace_event ev;
        got = csv_row(s, &ev, &s->e);
        if (got < 0)
            return s->e.st;
        if (got == 0)
            return SUBLET_OK;
        if (!sublet_trace_kind_is_prelude(ev.kind)) {
            s->pend = ev;
            s->has_pend = 1;
            return SUBLET_OK;
        }
        if (trace_vec_push(&s->pre, &ev) != SUBLET_OK) {
            snprintf(why, sizeof why, "line %llu: out of memory", (unsigned long long)s->lineno);
            return fail(s, SUBLET_ERR_NO_MEMORY, why);
        }
    }
}

/* Apply the log's journal (the STACK and INFO records read since the last
 * time, sl_log_stream_set_extras) to the extras shown. */
static sublet_status apply_journal(sublet_trace_stream *s, const uint8_t *p, size_t n)
{
    char why[300];
    sublet_status st = n ? sl_log_journal_apply(s->x, p, n, why, sizeof why) : SUBLET_OK;
    return st == SUBLET_OK ? st : fail(s, st, why);
}

/* The header and the first event (the records before it, settings and device
 * memory, applied).  With `journal`, the log applies its records to a private
 * tx (the reader thread's), and what it applied is applied to x here. */
static sublet_status log_first(sublet_trace_stream *s, int journal)
{
    char why[400];
    if (journal && !(s->tx = trace_extras_new()))
        return fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    trace_extras *lx = journal ? s->tx : s->x;
    sublet_status st = sl_log_stream_start(&s->src, lx, &s->log, why, sizeof why);
    if (st != SUBLET_OK)
        return fail(s, st, why);
    trace_extras_set_device(s->x, trace_extras_device(lx));
    sl_log_stream_set_extras(s->log, lx, journal);
    int got;
    st = sl_log_stream_next(s->log, &s->src, &s->pend, &got, why, sizeof why);
    if (st != SUBLET_OK)
        return fail(s, st, why);
    s->has_pend = got;
    if (journal) {
        size_t n;
        const uint8_t *j = sl_log_stream_journal(s->log, &n);
        if ((st = apply_journal(s, j, n)) != SUBLET_OK)
            return st;
        sl_log_stream_journal_clear(s->log);
        if (trace_extras_notice(s->tx) && trace_extras_set_notice(s->x, trace_extras_notice(s->tx)))
            return fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    }
    return SUBLET_OK;
}

/* Up to cap recorded events from the source (K_CSV, K_LOG, K_RMM, K_KINETO) into ev, *k of
 * them (fewer only at the end or before an error); an error, with its text,
 * into *e.  The reader thread's work, or _next's without one. */
static sublet_status produce(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                             size_t *k, serr *e)
{
    *k = 0;
    if (s->kind == K_LOG) {
        char why[400];
        sublet_status st = sl_log_stream_read(s->log, &s->src, ev, cap, k, why, sizeof why);
        return st == SUBLET_OK ? st : efail(s, e, st, why);
    }
    size_t n = 0;
    if (s->kind == K_RMM || s->kind == K_KINETO) {
        char why[400];
        sublet_status st = s->kind == K_RMM
                               ? sl_rmm_stream_read(s->rmm, &s->src, ev, cap, k, why, sizeof why)
                               : sl_kineto_stream_read(s->kin, &s->src, ev, cap, k, why, sizeof why);
        return st == SUBLET_OK ? st : efail(s, e, st, why);
    }
    while (n < cap) {
        int got = csv_row(s, &ev[n], e);
        if (got < 0) {
            *k = n;
            return e->st;
        }
        if (got == 0)
            break;
        if (sublet_trace_kind_is_prelude(ev[n].kind)) {
            char why[200];
            snprintf(why, sizeof why, "line %llu: %s row after the first recorded event",
                     (unsigned long long)s->lineno, sublet_trace_kind_name(ev[n].kind));
            *k = n;
            return efail(s, e, SUBLET_ERR_PARSE, why);
        }
        n++;
    }
    *k = n;
    return SUBLET_OK;
}

/* After a first pass (an RMM log, a Kineto trace): the first event, kept in
 * pend, as csv_start and log_first keep theirs. */
static sublet_status first_event(sublet_trace_stream *s)
{
    size_t k;
    if (produce(s, &s->pend, 1, &k, &s->e) != SUBLET_OK)
        return s->e.st;
    s->has_pend = k == 1;
    return SUBLET_OK;
}

/* An RMM log: its prelude by a first pass (sl_rmm_stream_open), then its
 * first event. */
static sublet_status rmm_start(sublet_trace_stream *s)
{
    char why[400];
    if (!(s->rmm = sl_rmm_new()))
        return fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
    sublet_status st = sl_rmm_stream_open(s->rmm, &s->src, &s->pre, why, sizeof why);
    return st == SUBLET_OK ? first_event(s) : fail(s, st, why);
}

/* A Kineto trace: its first pass (sl_kineto_stream_open; SUBLET_ERR_UNSUPPORTED:
 * the caller reads it whole), then its first event. */
static sublet_status kineto_start(sublet_trace_stream *s)
{
    char why[400];
    int64_t dev;
    uint64_t mem;
    sublet_status st =
        sl_kineto_stream_open(&s->src, &s->opt, &s->pre, &dev, &mem, &s->kin, why, sizeof why);
    if (st == SUBLET_ERR_UNSUPPORTED)
        return st;
    if (st != SUBLET_OK)
        return fail(s, st, why);
    trace_extras_set_device(s->x, dev);
    trace_extras_set_memory(s->x, mem);
    return first_event(s);
}

/* ---- the reader thread ----------------------------------------------------------------------
 * For K_CSV, K_LOG, K_RMM and K_KINETO, a thread decodes ahead into a ring of NCHUNK chunks of
 * CHUNK_EVENTS events while the caller consumes them (memory: the ring, not
 * the trace).  Each chunk carries what the caller must apply before handing
 * out its events (the log's STACK and INFO records, as bytes: the caller's
 * extras are written by the caller alone, so what the accessors give is the
 * caller's own) and, in the last one, the end (and the log's notice) or the
 * error after its events.  So _next gives the same events, counts and errors
 * in the same order as without the thread.  SUBLET_STREAM_THREAD=0 turns it
 * off; =1 uses it for every CSV and log, even one that fits in the first read
 * (the tests); unset: see use_thread. */

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
    sublet_status st = produce(s, cev(c), CHUNK_EVENTS, &c->n, &c->e);
    if (st == SUBLET_OK && c->n < CHUNK_EVENTS)
        c->end = 1;
    if (s->kind != K_LOG)
        return;
    size_t jn;
    const uint8_t *j = sl_log_stream_journal(s->log, &jn);
    if (jn) {
        if (jn > c->side_cap) {
            uint8_t *nb = realloc(c->side, jn);
            if (!nb) {
                c->end = 0;
                efail(s, &c->e, SUBLET_ERR_NO_MEMORY, "out of memory");
                return;
            }
            c->side = nb;
            c->side_cap = jn;
        }
        memcpy(c->side, j, jn);
        c->side_len = jn;
        sl_log_stream_journal_clear(s->log);
    }
    const char *note = c->end ? trace_extras_notice(s->tx) : NULL;
    if (note && !(c->notice = strdup(note))) {
        c->end = 0;
        efail(s, &c->e, SUBLET_ERR_NO_MEMORY, "out of memory");
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

/* Start the thread: 0, or -1 (no memory, no thread: the caller reads itself). */
static int prefetch_start(sublet_trace_stream *s)
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

/* Stop the thread (it finishes the chunk it is filling) and free the ring. */
static void prefetch_stop(sublet_trace_stream *s)
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
static sublet_status prefetch_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
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
            if (apply_journal(s, p->cur->side, p->cur->side_len) != SUBLET_OK) {
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
                fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
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
static sublet_status prefetch_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
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
                fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
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
        if (apply_journal(s, nx->side, nx->side_len) != SUBLET_OK) {
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

/* Whether to read with a thread: SUBLET_STREAM_THREAD (see above); unset: for
 * a source larger than the first read, except a plain (not gzip'd) event log
 * on a machine with one CPU online, whose decoding there costs less than
 * handing its events across; with a second CPU the log's decoding (a
 * quarter of its replay) runs beside the replay (docs/replay.md). */
static int use_thread(const sublet_trace_stream *s)
{
    const char *v = getenv("SUBLET_STREAM_THREAD");
    if (v && strcmp(v, "0") == 0)
        return 0;
    if (v && strcmp(v, "1") == 0)
        return 1;
    if (s->src.eof)
        return 0;
    if (s->kind == K_LOG && gzdirect((gzFile)s->src.gz))
        return sysconf(_SC_NPROCESSORS_ONLN) > 1;
    return 1;
}

/* keep: retire the extras instead of freeing them (a rewind) */
static void close_source(sublet_trace_stream *s, int keep)
{
    prefetch_stop(s);
    trace_extras_destroy(s->tx);
    s->tx = NULL;
    if (s->src.gz)
        gzclose((gzFile)s->src.gz);
    free(s->src.buf);
    memset(&s->src, 0, sizeof s->src);
    sl_log_stream_free(s->log);
    s->log = NULL;
    sl_rmm_free(s->rmm);
    s->rmm = NULL;
    sl_kineto_free(s->kin);
    s->kin = NULL;
    trace_vec_free(&s->pre);
    if (keep && s->x) {
        trace_extras **r = realloc(s->retired, (s->nretired + 1) * sizeof *r);
        if (r) {
            s->retired = r;
            s->retired[s->nretired++] = s->x;
            s->x = NULL;
        }
    }
    trace_extras_destroy(s->x);
    s->x = NULL;
    s->has_pend = 0;
}

/* Open (or reopen) the source: detect, read the prelude. */
static sublet_status start(sublet_trace_stream *s)
{
    int is_stdin = strcmp(s->path, "-") == 0;
    int fd = is_stdin ? dup(0) : -1;
    s->src.gz = is_stdin ? (fd >= 0 ? gzdopen(fd, "rb") : NULL) : gzopen(s->path, "rb");
    if (!s->src.gz) {
        char why[300];
        snprintf(why, sizeof why, "cannot open: %s", errno ? strerror(errno) : "out of memory");
        if (fd >= 0)
            close(fd);
        return fail(s, SUBLET_ERR_IO, why);
    }
    s->src.chunk = s->opt.read_chunk ? s->opt.read_chunk : DEFAULT_CHUNK;
    size_t zbuf = s->src.chunk < 8192 ? 8192 : s->src.chunk > DEFAULT_CHUNK ? DEFAULT_CHUNK
                                                                             : s->src.chunk;
    gzbuffer((gzFile)s->src.gz, (unsigned)zbuf);
    s->rows = 0;
    s->lineno = 0;
    if (sl_src_fill(&s->src, DETECT_BYTES) != 0)
        return src_fail(s, &s->e);
    sublet_trace_format f = sublet_trace_detect(s->src.buf + s->src.beg, s->src.end - s->src.beg);
    if (f == SUBLET_FORMAT_EVENTS_CSV || f == SUBLET_FORMAT_EVENT_LOG ||
        (f == SUBLET_FORMAT_RMM_CSV && !is_stdin) ||
        (f == SUBLET_FORMAT_KINETO_JSON && !is_stdin && !s->opt.max_tree_bytes)) {
        /* (an RMM log and a Kineto trace are read twice: not standard input; a
         * limit on the parsed tree asks for the whole read, which has one) */
        if (!(s->x = trace_extras_new()))
            return fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        trace_extras_set_format(s->x, f);
        s->kind = f == SUBLET_FORMAT_EVENTS_CSV ? K_CSV
                  : f == SUBLET_FORMAT_RMM_CSV  ? K_RMM
                  : f == SUBLET_FORMAT_KINETO_JSON ? K_KINETO
                                                   : K_LOG;
        int thread = use_thread(s);
        sublet_status st = s->kind == K_CSV      ? csv_start(s)
                           : s->kind == K_RMM    ? rmm_start(s)
                           : s->kind == K_KINETO ? kineto_start(s)
                                                 : log_first(s, thread);
        if (st == SUBLET_ERR_UNSUPPORTED && s->kind == K_KINETO) {
            /* not a document the stream can follow: read whole, from the start */
            trace_extras_destroy(s->x);
            s->x = NULL;
            if (sl_src_rewind(&s->src) != 0)
                return src_fail(s, &s->e);
            goto whole;
        }
        if (st != SUBLET_OK)
            return st;
        s->rows = s->pre.n;
        if (thread && s->has_pend && prefetch_start(s) == 0)
            return SUBLET_OK;
        if (s->tx) { /* no thread after all: the log applies its records to x (the same ids) */
            sl_log_stream_set_extras(s->log, s->x, 0);
            trace_extras_destroy(s->tx);
            s->tx = NULL;
        }
        return SUBLET_OK;
    }
whole: /* read whole: what is in the buffer, then the rest */
    s->kind = K_TRACE;
    while (!s->src.eof)
        if (sl_src_fill(&s->src, s->src.end - s->src.beg + s->src.chunk) != 0)
            return src_fail(s, &s->e);
    char why[512];
    sublet_status st = sublet_trace_parse(s->src.buf + s->src.beg, s->src.end - s->src.beg,
                                          &s->opt, &s->owned, why, sizeof why);
    close_source(s, 0);
    if (st != SUBLET_OK)
        return fail(s, st, why);
    s->kind = K_TRACE;
    s->t = s->owned;
    s->pos = sublet_trace_prelude_count(s->t);
    s->rows = s->pos;
    return SUBLET_OK;
}

sublet_status sublet_trace_stream_open(const char *path, const sublet_trace_load_options *opt,
                                       sublet_trace_stream **out, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!path || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    sublet_trace_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        sl_msg(err, err_cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    if (opt)
        s->opt = *opt;
    errno = 0;
    sublet_status st = start(s);
    if (st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        sublet_trace_stream_close(s);
        return st;
    }
    *out = s;
    return SUBLET_OK;
}

sublet_trace_format sublet_trace_detect_path(const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return SUBLET_FORMAT_UNKNOWN;
    gzFile g = gzopen(path, "rb");
    if (!g)
        return SUBLET_FORMAT_UNKNOWN;
    uint8_t *head = malloc(DETECT_BYTES);
    int got = head ? gzread(g, head, (unsigned)DETECT_BYTES) : -1;
    gzclose(g);
    sublet_trace_format f =
        got > 0 ? sublet_trace_detect(head, (size_t)got) : SUBLET_FORMAT_UNKNOWN;
    free(head);
    return f;
}

sublet_status sublet_trace_stream_from_trace(const sublet_trace *t, sublet_trace_stream **out)
{
    if (!t || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return SUBLET_ERR_NO_MEMORY;
    (*out)->kind = K_TRACE;
    (*out)->t = t;
    (*out)->pos = (*out)->rows = sublet_trace_prelude_count(t);
    return SUBLET_OK;
}

void sublet_trace_stream_close(sublet_trace_stream *s)
{
    if (!s)
        return;
    close_source(s, 0);
    for (size_t i = 0; i < s->nretired; i++)
        trace_extras_destroy(s->retired[i]);
    free(s->retired);
    if (s->raw)
        fclose(s->raw);
    free(s->bb);
    if (s->owned) {
        sublet_trace_extras_release(s->owned);
        sublet_trace_free(s->owned);
    }
    free(s->path);
    free(s);
}

sublet_status sublet_trace_stream_rewind(sublet_trace_stream *s, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!s)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (s->kind == K_TRACE) {
        s->pos = s->rows = sublet_trace_prelude_count(s->t);
        s->e.st = SUBLET_OK;
        return SUBLET_OK;
    }
    if (s->kind == K_RAW) {
        s->rows = sublet_trace_stream_prelude(s, NULL);
        s->e.st = SUBLET_OK;
        if (fseek(s->raw, 0, SEEK_SET) != 0)
            return fail(s, SUBLET_ERR_IO, "copy: seek failed");
        return SUBLET_OK;
    }
    if (strcmp(s->path, "-") == 0) {
        sl_msg(err, err_cap, "standard input cannot be read again");
        return SUBLET_ERR_UNSUPPORTED;
    }
    close_source(s, 1);
    s->e.st = SUBLET_OK;
    errno = 0;
    sublet_status st = start(s);
    if (st != SUBLET_OK)
        sl_msg(err, err_cap, "%s", s->e.msg);
    return st;
}

sublet_status sublet_trace_stream_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                                       size_t *n, char *err, size_t err_cap)
{
    if (n)
        *n = 0;
    if (!s || !n || (!ev && cap))
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (s->e.st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        return s->e.st;
    }
    size_t k = 0;
    if (s->kind == K_TRACE) {
        size_t total = sublet_trace_count(s->t);
        k = total - s->pos < cap ? total - s->pos : cap;
        if (k)
            memcpy(ev, sublet_trace_events(s->t) + s->pos, k * sizeof *ev);
        s->pos += k;
    } else if (s->kind == K_RAW) {
        k = cap ? fread(ev, sizeof *ev, cap, s->raw) : 0;
        if (k < cap && ferror(s->raw)) {
            fail(s, SUBLET_ERR_IO, "copy: read error");
            sl_msg(err, err_cap, "%s", s->e.msg);
            return s->e.st;
        }
    } else {
        if (s->has_pend && cap) {
            ev[k++] = s->pend;
            s->has_pend = 0;
        }
        size_t m = 0;
        if (s->pf)
            prefetch_next(s, ev + k, cap - k, &m);
        else if (k < cap)
            produce(s, ev + k, cap - k, &m, &s->e);
        k += m;
        if (s->e.st != SUBLET_OK) {
            sl_msg(err, err_cap, "%s", s->e.msg);
            s->rows += k;
            return s->e.st;
        }
    }
    s->rows += k;
    *n = k;
    return SUBLET_OK;
}

/* Rows a borrow reads at a time without the thread. */
#define BORROW_ROWS 256

sublet_status sl_trace_stream_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                                     size_t nkeep, const sublet_trace_event **ev, size_t *n,
                                     char *err, size_t err_cap)
{
    if (n)
        *n = 0;
    if (ev)
        *ev = NULL;
    if (!s || !ev || !n || nkeep > SL_STREAM_KEEP || (nkeep && !keep))
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (s->e.st != SUBLET_OK) {
        sl_msg(err, err_cap, "%s", s->e.msg);
        return s->e.st;
    }
    if (s->pf && !s->has_pend) {
        sublet_status st = prefetch_borrow(s, keep, nkeep, ev, n);
        s->rows += *n;
        if (st != SUBLET_OK) {
            *ev = NULL;
            *n = 0;
            sl_msg(err, err_cap, "%s", s->e.msg);
        }
        return st;
    }
    /* the others: into the stream's buffer, after the kept rows */
    if (!s->bb && !(s->bb = malloc((SL_STREAM_KEEP + BORROW_ROWS) * sizeof *s->bb))) {
        fail(s, SUBLET_ERR_NO_MEMORY, "out of memory");
        sl_msg(err, err_cap, "%s", s->e.msg);
        return s->e.st;
    }
    sublet_trace_event *dst = s->bb + SL_STREAM_KEEP;
    if (nkeep)
        memmove(dst - nkeep, keep, nkeep * sizeof *keep);
    sublet_status st = SUBLET_OK;
    if (s->has_pend) { /* the first recorded row, alone (the thread's chunks follow) */
        dst[0] = s->pend;
        s->has_pend = 0;
        *n = 1;
        s->rows++;
    } else if (s->kind != K_TRACE && s->kind != K_RAW) {
        /* as the thread: the rows before an error, then (next borrow) the error */
        produce(s, dst, BORROW_ROWS, n, &s->e);
        s->rows += *n;
        if (!*n)
            st = s->e.st;
    } else {
        st = sublet_trace_stream_next(s, dst, BORROW_ROWS, n, err, err_cap);
    }
    if (st == SUBLET_OK)
        *ev = dst;
    else
        sl_msg(err, err_cap, "%s", s->e.msg);
    return st;
}

/* A copy's prelude and extras are its origin's (a copy's copy: the first
 * stream's). */
static const sublet_trace_stream *through(const sublet_trace_stream *s)
{
    while (s && s->kind == K_RAW)
        s = s->origin;
    return s;
}

size_t sublet_trace_stream_prelude(const sublet_trace_stream *s, const sublet_trace_event **ev)
{
    s = through(s);
    if (ev)
        *ev = NULL;
    if (!s)
        return 0;
    if (s->kind == K_TRACE) {
        if (ev)
            *ev = sublet_trace_events(s->t);
        return sublet_trace_prelude_count(s->t);
    }
    if (ev)
        *ev = s->pre.v;
    return s->pre.n;
}

uint64_t sublet_trace_stream_rows(const sublet_trace_stream *s) { return s ? s->rows : 0; }
int sublet_trace_stream_bounded(const sublet_trace_stream *s)
{
    return s && (s->kind != K_TRACE || !s->owned);
}
const sublet_trace *sublet_trace_stream_trace(const sublet_trace_stream *s)
{
    return s && s->kind == K_TRACE ? s->t : NULL;
}

sublet_trace_format sublet_trace_stream_format(const sublet_trace_stream *s)
{
    s = through(s);
    if (!s)
        return SUBLET_FORMAT_UNKNOWN;
    return s->kind == K_TRACE ? sublet_trace_source_format(s->t) : trace_extras_format(s->x);
}

int64_t sublet_trace_stream_device(const sublet_trace_stream *s)
{
    s = through(s);
    if (!s)
        return -1;
    return s->kind == K_TRACE ? sublet_trace_device(s->t) : trace_extras_device(s->x);
}

const char *sublet_trace_stream_settings(const sublet_trace_stream *s)
{
    s = through(s);
    if (!s)
        return NULL;
    return s->kind == K_TRACE ? sublet_trace_settings(s->t) : trace_extras_settings(s->x);
}

uint64_t sublet_trace_stream_device_memory(const sublet_trace_stream *s)
{
    s = through(s);
    if (!s)
        return 0;
    return s->kind == K_TRACE ? sublet_trace_device_memory(s->t) : trace_extras_memory(s->x);
}

const char *sublet_trace_stream_notice(const sublet_trace_stream *s)
{
    s = through(s);
    if (!s)
        return NULL;
    return s->kind == K_TRACE ? sublet_trace_notice(s->t) : trace_extras_notice(s->x);
}

uint32_t sublet_trace_stream_stack_count(const sublet_trace_stream *s)
{
    s = through(s);
    if (!s)
        return 0;
    return s->kind == K_TRACE ? sublet_trace_stack_count(s->t) : trace_extras_stack_count(s->x);
}

size_t sublet_trace_stream_stack(const sublet_trace_stream *s, uint32_t id,
                                 const sublet_trace_frame **out)
{
    s = through(s);
    if (out)
        *out = NULL;
    if (!s)
        return 0;
    if (s->kind == K_TRACE)
        return sublet_trace_stack(s->t, id, out);
    const sublet_trace_frame *f = NULL;
    size_t n = trace_extras_stack(s->x, id, &f);
    if (out)
        *out = f;
    return n;
}

/* ---- what the trace records, in one pass ------------------------------------------------------- */

/* Add v to the sorted set (*set)[0, *n): 0, or -1 when out of memory. */
static int set_add(uint64_t **set, size_t *n, size_t *cap, uint64_t v)
{
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((*set)[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < *n && (*set)[lo] == v)
        return 0;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        uint64_t *ns = realloc(*set, nc * sizeof *ns);
        if (!ns)
            return -1;
        *set = ns;
        *cap = nc;
    }
    memmove(*set + lo + 1, *set + lo, (*n - lo) * sizeof **set);
    (*set)[lo] = v;
    (*n)++;
    return 0;
}

sublet_status sublet_trace_stream_info(sublet_trace_stream *s, sublet_trace_info *out, char *err,
                                       size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!s)
        return SUBLET_ERR_INVALID_ARGUMENT;
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(s, &pre);
    if (s->rows != npre) {
        sublet_status st = sublet_trace_stream_rewind(s, err, err_cap);
        if (st != SUBLET_OK)
            return st;
        npre = sublet_trace_stream_prelude(s, &pre);
    }
    uint64_t reserved = 0, requested = 0;
    uint64_t *set = NULL;
    size_t nset = 0, capset = 0;
    int nomem = 0;
    size_t i = 0;
    for (; i < npre; i++) {
        sl_trace_info_step(out, &reserved, &requested, &pre[i], i);
        nomem |= set_add(&set, &nset, &capset, pre[i].stream);
    }
    sublet_trace_event buf[1024];
    size_t got;
    sublet_status st;
    while ((st = sublet_trace_stream_next(s, buf, 1024, &got, err, err_cap)) == SUBLET_OK && got)
        for (size_t k = 0; k < got; k++, i++) {
            sl_trace_info_step(out, &reserved, &requested, &buf[k], i);
            nomem |= set_add(&set, &nset, &capset, buf[k].stream);
        }
    free(set);
    out->final_reserved_bytes = reserved;
    out->final_requested_bytes = requested;
    out->streams = nset;
    if (st != SUBLET_OK)
        return st;
    return nomem ? SUBLET_ERR_NO_MEMORY : SUBLET_OK;
}

/* ---- a binary copy -------------------------------------------------------------------------------- */

sublet_status sublet_trace_stream_copy(sublet_trace_stream *s, sublet_trace_stream **out,
                                       char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!s || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *out = NULL;
    const sublet_trace_event *pre;
    size_t npre = sublet_trace_stream_prelude(s, &pre);
    if (s->rows != npre) {
        sublet_status st = sublet_trace_stream_rewind(s, err, err_cap);
        if (st != SUBLET_OK)
            return st;
        npre = sublet_trace_stream_prelude(s, &pre);
    }
    sublet_trace_stream *c = calloc(1, sizeof *c);
    if (!c) {
        sl_msg(err, err_cap, "out of memory");
        return SUBLET_ERR_NO_MEMORY;
    }
    c->kind = K_RAW;
    c->origin = s;
    c->rows = npre;
    errno = 0;
    c->raw = tmpfile();
    if (!c->raw) {
        sl_msg(err, err_cap, "%s: cannot make a temporary copy: %s", shown(s),
               errno ? strerror(errno) : "out of memory");
        free(c);
        return SUBLET_ERR_IO;
    }
    sublet_trace_event buf[1024];
    size_t got;
    sublet_status st;
    while ((st = sublet_trace_stream_next(s, buf, 1024, &got, err, err_cap)) == SUBLET_OK && got)
        if (fwrite(buf, sizeof *buf, got, c->raw) != got) {
            sl_msg(err, err_cap, "%s: temporary copy: write failed: %s", shown(s),
                   strerror(errno));
            st = SUBLET_ERR_IO;
            break;
        }
    if (st == SUBLET_OK && (fflush(c->raw) != 0 || fseek(c->raw, 0, SEEK_SET) != 0)) {
        sl_msg(err, err_cap, "%s: temporary copy: write failed: %s", shown(s),
               strerror(errno));
        st = SUBLET_ERR_IO;
    }
    if (st != SUBLET_OK) {
        sublet_trace_stream_close(c);
        return st;
    }
    *out = c;
    return SUBLET_OK;
}
