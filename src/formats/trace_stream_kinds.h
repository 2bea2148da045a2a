/* sublet — the kinds of trace stream (sublet/trace_stream.h), each a table of
 * functions, as SQLite's sqlite3_io_methods: trace_stream.c keeps the public
 * entry points, which dispatch through s->m, and each kind's code is in a
 * file of its own:
 *   trace_stream_util.c    what every kind shares: errors, the borrow buffer
 *   trace_stream_mem.c     a trace in memory (from_trace, or a format read whole)
 *   trace_stream_copy.c    the binary copy (sublet_trace_stream_copy)
 *   trace_stream_source.c  what the file sources share: open, detect, the
 *                          prelude's first row (pend), next, borrow, rewind,
 *                          the extras (x)
 *   trace_stream_thread.c  the reader thread of the file sources
 *   trace_stream_csv.c     the events CSV
 *   trace_stream_log.c     sublet's event log
 *   trace_stream_twopass.c the RMM log and the Kineto trace (read twice)
 * A stream is used from one thread at a time; the reader thread's share of
 * it is said in trace_stream_thread.c. */
#ifndef SUBLET_TRACE_STREAM_KINDS_H
#define SUBLET_TRACE_STREAM_KINDS_H

#include <stdio.h>

#include "formats/trace_readers.h"
#include "sublet/trace_stream.h"

/* An error and its text ("PATH: reason"). */
typedef struct serr {
    sublet_status st;
    char msg[600];
} serr;

typedef struct prefetch prefetch;
typedef struct sl_stream_methods sl_stream_methods;

struct sl_stream_methods {
    const char *name;
    /* Up to cap events into ev, *k of them (0 at the end); an error, with
     * its text, into s->e (the events before it counted in *k). */
    sublet_status (*next)(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap, size_t *k);
    /* sl_trace_stream_borrow past its checks (s->e clear, arguments valid):
     * the text of an error into err.  NULL: rows through next into the
     * stream's buffer (sl_stream_borrow_buffer). */
    sublet_status (*borrow)(sublet_trace_stream *s, const sublet_trace_event *keep, size_t nkeep,
                            const sublet_trace_event **ev, size_t *n, char *err, size_t err_cap);
    /* sublet_trace_stream_rewind past its checks.  NULL (the file sources):
     * the source is opened and started again. */
    sublet_status (*rewind)(sublet_trace_stream *s, char *err, size_t err_cap);
    /* Free what the kind holds of its own (the stream's common fields,
     * its source among them, are freed by sublet_trace_stream_close). */
    void (*close)(sublet_trace_stream *s);
    /* the accessors (s not NULL) */
    size_t (*prelude)(const sublet_trace_stream *s, const sublet_trace_event **ev);
    int (*bounded)(const sublet_trace_stream *s);
    const sublet_trace *(*trace)(const sublet_trace_stream *s);
    sublet_trace_format (*format)(const sublet_trace_stream *s);
    int64_t (*device)(const sublet_trace_stream *s);
    const char *(*settings)(const sublet_trace_stream *s);
    uint64_t (*device_memory)(const sublet_trace_stream *s);
    const char *(*notice)(const sublet_trace_stream *s);
    uint32_t (*stack_count)(const sublet_trace_stream *s);
    size_t (*stack)(const sublet_trace_stream *s, uint32_t id, const sublet_trace_frame **out);

    /* The file sources' own (NULL for the others): */
    /* Read the header and the prelude, up to the first recorded row (into
     * pend); `thread`: the reader thread will read the rest. */
    sublet_status (*start)(sublet_trace_stream *s, int thread);
    /* start's SUBLET_ERR_UNSUPPORTED: read the file whole instead (no text). */
    int whole_if_unsupported;
    /* Up to cap recorded events from the source into ev, *k of them (fewer
     * only at the end or before an error); an error, with its text, into
     * *e.  The reader thread's work, or _next's without one. */
    sublet_status (*produce)(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                             size_t *k, serr *e);
    /* start was told the thread would read, and it does not after all (NULL:
     * nothing to undo). */
    void (*no_thread)(sublet_trace_stream *s);
    /* Free the reader's state (again: nothing). */
    void (*release)(sublet_trace_stream *s);
    /* The thread by default for a source larger than the first read (NULL: yes). */
    int (*thread_default)(const sublet_trace_stream *s);
    /* The records produce applied since the last clear, for the caller to
     * apply to x before the events after them (NULL: none ever). */
    const uint8_t *(*journal)(sublet_trace_stream *s, size_t *len);
    void (*journal_clear)(sublet_trace_stream *s);
};

struct sublet_trace_stream {
    const sl_stream_methods *m;
    const sublet_trace *t; /* mem: the trace streamed */
    sublet_trace *owned;   /* ... when this stream read it */
    size_t pos;            /* mem: next event */
    char *path;            /* NULL: from_trace */
    sublet_trace_load_options opt;
    sl_src src;
    trace_vec pre;            /* the prelude (csv, rmm, kineto) */
    sublet_trace_event pend;  /* the first recorded row, read with the prelude */
    int has_pend;
    uint64_t lineno;          /* csv: last line read */
    int csv_cols;             /* csv: 6, or 7 with the pool column */
    sl_log_stream *log;
    sl_rmm *rmm;              /* rmm: the reader's state */
    sl_kineto *kin;           /* kineto: the reader's state */
    trace_extras *x; /* the file sources' */
    /* the extras of earlier passes (sublet_trace_stream_rewind): what the
     * accessors handed out (settings, stacks) stays valid until close */
    trace_extras **retired;
    size_t nretired;
    FILE *raw;                 /* copy: the recorded rows as sublet_trace_event records */
    sublet_trace_stream *origin; /* copy: the stream copied (prelude, extras) */
    int raw_shared;              /* copy: a reader of another's file (not closed here) */
    uint64_t rows;   /* handed out, prelude included */
    serr e;          /* sticky error */
    /* the reader thread (the file sources; trace_stream_thread.c): while it
     * runs, src, log, lineno and tx are its own */
    prefetch *pf;
    trace_extras *tx; /* log with the thread: the extras the log applies its records to */
    sublet_trace_event *bb; /* a borrow without the thread: SL_STREAM_KEEP + SL_BORROW_ROWS */
};

/* Rows a borrow reads at a time without the thread: 128 KiB of rows, one
 * read of the binary copy (256 rows, one read each 16 KiB: ~5 % slower a
 * replay of the copy, `sublet mincap` of the 10^6-event random log 2.35 ->
 * 2.22 s). */
#define SL_BORROW_ROWS 2048

extern const sl_stream_methods sl_stream_mem_methods;
extern const sl_stream_methods sl_stream_copy_methods;
extern const sl_stream_methods sl_stream_csv_methods;
extern const sl_stream_methods sl_stream_log_methods;
extern const sl_stream_methods sl_stream_rmm_methods;
extern const sl_stream_methods sl_stream_kineto_methods;

/* trace_stream.c: the source as messages name it (standard input: "stdin",
 * as loading does); an error "NAME: why" into *e, or into s->e; the
 * source's read error (or no memory) into *e. */
const char *sl_stream_shown(const sublet_trace_stream *s);
sublet_status sl_stream_efail(const sublet_trace_stream *s, serr *e, sublet_status st,
                              const char *why);
sublet_status sl_stream_fail(sublet_trace_stream *s, sublet_status st, const char *why);
sublet_status sl_stream_src_fail(const sublet_trace_stream *s, serr *e);
/* The stream's borrow buffer with the kept rows put before *dst: OK, or
 * no memory (s->e, its text in err). */
sublet_status sl_stream_borrow_buffer(sublet_trace_stream *s, const sublet_trace_event *keep,
                                      size_t nkeep, sublet_trace_event **dst, char *err,
                                      size_t err_cap);

/* trace_stream_source.c: open (or reopen) the file at s->path: detect its
 * format, set s->m, read the prelude (a format that does not stream: read
 * whole, s->m the mem kind); free the source (keep: retire the extras
 * instead of freeing them, for a rewind).  And what the file sources
 * share in their tables. */
sublet_status sl_stream_start(sublet_trace_stream *s);
void sl_stream_close_source(sublet_trace_stream *s, int keep);
sublet_status sl_source_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                             size_t *k);
sublet_status sl_source_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                               size_t nkeep, const sublet_trace_event **ev, size_t *n, char *err,
                               size_t err_cap);
void sl_source_close(sublet_trace_stream *s);
size_t sl_source_prelude(const sublet_trace_stream *s, const sublet_trace_event **ev);
int sl_source_bounded(const sublet_trace_stream *s);
const sublet_trace *sl_source_trace(const sublet_trace_stream *s);
sublet_trace_format sl_source_format(const sublet_trace_stream *s);
int64_t sl_source_device(const sublet_trace_stream *s);
const char *sl_source_settings(const sublet_trace_stream *s);
uint64_t sl_source_device_memory(const sublet_trace_stream *s);
const char *sl_source_notice(const sublet_trace_stream *s);
uint32_t sl_source_stack_count(const sublet_trace_stream *s);
size_t sl_source_stack(const sublet_trace_stream *s, uint32_t id, const sublet_trace_frame **out);
/* The journal (the log's STACK and INFO records, as bytes) applied to x. */
sublet_status sl_stream_apply_journal(sublet_trace_stream *s, const uint8_t *p, size_t n);
/* After a first pass (an RMM log, a Kineto trace): the first event, kept in
 * pend, as the CSV's and the log's start keep theirs. */
sublet_status sl_stream_first_event(sublet_trace_stream *s);

/* trace_stream_thread.c: the reader thread.  Start it: 0, or -1 (no
 * memory, no thread: the caller reads itself); stop it (it finishes the
 * chunk it is filling) and free its ring; _next and a borrow through it. */
int sl_prefetch_start(sublet_trace_stream *s);
void sl_prefetch_stop(sublet_trace_stream *s);
sublet_status sl_prefetch_next(sublet_trace_stream *s, sublet_trace_event *ev, size_t cap,
                               size_t *k);
sublet_status sl_prefetch_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                                 size_t nkeep, const sublet_trace_event **ev, size_t *n);

#endif
