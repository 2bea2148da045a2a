/* sublet — internals shared by the trace readers (not a public header).
 *
 * trace_load.c holds the pieces every reader uses: the extras a reader
 * attaches to its trace (stacks, settings, device, format; see the public
 * accessors in sublet/trace.h), an address set, address ranges, the prelude
 * list and the final assembly (prelude rows sorted by address, then the
 * events).  The
 * snapshot and Kineto readers start from a parsed pyval tree (pickle.h,
 * json_codec.h); the RMM reader from bytes (sublet_trace_parse_rmm). */
#ifndef SUBLET_TRACE_READERS_H
#define SUBLET_TRACE_READERS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/errmsg.h"
#include "formats/pyval.h"
#include "sublet/trace.h"
#include "sublet/trace_stream.h"

/* Quote at most 40 bytes of p for a message, escaping what is not printable. */
void trace_show(const void *p, size_t n, char *out, size_t cap);

/* ---- extras ------------------------------------------------------------------ */
typedef struct trace_extras trace_extras;

trace_extras *trace_extras_new(void); /* NULL when out of memory */
void trace_extras_destroy(trace_extras *x);
void trace_extras_set_format(trace_extras *x, sublet_trace_format f);
void trace_extras_set_device(trace_extras *x, int64_t device);
void trace_extras_set_memory(trace_extras *x, uint64_t bytes);
/* A copy of s as the trace's notice (sublet_trace_notice); the current one. */
sublet_status trace_extras_set_notice(trace_extras *x, const char *s);
const char *trace_extras_notice(const trace_extras *x);
/* Copy n bytes as the settings string (SUBLET_ERR_NO_MEMORY). */
sublet_status trace_extras_set_settings(trace_extras *x, const char *s, size_t n);

typedef struct trace_frame_in {
    const char *file;
    size_t file_len;
    const char *name;
    size_t name_len;
    int64_t line;
} trace_frame_in;
/* Intern a stack of n frames (innermost first): *id is its 1-based id (equal
 * stacks get equal ids), 0 when n == 0. */
sublet_status trace_extras_intern_stack(trace_extras *x, const trace_frame_in *f, size_t n,
                                        uint32_t *id);
/* What x holds (the accessors of sublet/trace.h for a stream's extras). */
sublet_trace_format trace_extras_format(const trace_extras *x);
int64_t trace_extras_device(const trace_extras *x);
uint64_t trace_extras_memory(const trace_extras *x);
const char *trace_extras_settings(const trace_extras *x);
uint32_t trace_extras_stack_count(const trace_extras *x);
/* Stack `id` as sublet_trace_stack gives it; the frame views are rebuilt
 * when stacks were interned since the last call (valid until the next
 * intern). */
size_t trace_extras_stack(trace_extras *x, uint32_t id, const sublet_trace_frame **out);
/* Give x to t (x is consumed, also on failure).  Replaces earlier extras of t. */
sublet_status trace_extras_attach(const sublet_trace *t, trace_extras *x);
/* src/trace.c: the trace's extras pointer (set returns the previous one). */
trace_extras *sl_trace_swap_extras(sublet_trace *t, trace_extras *x);
const trace_extras *sl_trace_extras(const sublet_trace *t);

/* ---- an address set (open addressing, deletions) ------------------------------ */
typedef struct u64set {
    uint64_t *keys;
    uint8_t *used;
    size_t cap, n;
} u64set; /* zero-initialise */

void u64set_free(u64set *s);
bool u64set_has(const u64set *s, uint64_t k);
/* 0 added or already there, -1 out of memory. */
int u64set_add(u64set *s, uint64_t k);
/* true when k was there. */
bool u64set_remove(u64set *s, uint64_t k);

/* ---- disjoint address ranges, each tagged with a stream ------------------------
 * The pages a trace says are mapped: the snapshot reader's expandable prelude,
 * and the replay's check that a trace recorded under expandable segments
 * began from an empty allocator (replay_fidelity.c).  A sorted array: the sets
 * are small (the mapped runs of a few expandable segments). */
typedef struct sl_range {
    uint64_t lo, hi; /* [lo, hi), lo < hi */
    sublet_stream stream;
} sl_range;

typedef struct sl_ranges { /* sorted by lo, disjoint */
    sl_range *v;
    size_t n, cap;
} sl_ranges;

/* Make [lo, hi) part of the set with `stream` (replacing whatever it
 * overlapped), merged with the ranges of the same stream it touches.
 * 0, or -1 when out of memory (the set is then unchanged or smaller by
 * [lo, hi), never inconsistent). */
int sl_ranges_add(sl_ranges *r, uint64_t lo, uint64_t hi, sublet_stream stream);
/* Take [lo, hi) out of the set (what of it is there).  0, or -1 when out of
 * memory (splitting a range needs room). */
int sl_ranges_sub(sl_ranges *r, uint64_t lo, uint64_t hi);
/* Is all of [lo, hi) inside one range of the set? */
int sl_ranges_covers(const sl_ranges *r, uint64_t lo, uint64_t hi);
/* Bytes of the set. */
uint64_t sl_ranges_bytes(const sl_ranges *r);
void sl_ranges_free(sl_ranges *r);

/* ---- building a trace ----------------------------------------------------------- */
typedef struct trace_vec {
    sublet_trace_event *v;
    size_t n, cap;
} trace_vec; /* zero-initialise */

void trace_vec_free(trace_vec *v);
sublet_status trace_vec_push(trace_vec *v, const sublet_trace_event *e);

/* Create the trace: the PRE_SEGMENT rows of pre_seg, then the PRE_ALLOC rows
 * of pre_alloc (each list stably sorted by address first; their kind fields
 * are set here), then the events. */
sublet_status trace_assemble(trace_vec *pre_seg, trace_vec *pre_alloc, const trace_vec *events,
                             sublet_trace **out);
/* Sort prelude rows stably by address and set their kind (as trace_assemble
 * does; a stream's prelude). */
void trace_sort_pre(trace_vec *v, uint32_t kind);

/* ---- reading a file in bounded chunks (trace_stream.c) ----------------------------
 * A buffered byte source over a file or standard input, plain or gzip'd
 * (zlib's gzread inflates as it reads).  buf[beg, end) holds bytes not yet
 * consumed; off is the file offset (in the inflated data) of buf[beg]. */
typedef struct sl_src {
    void *gz; /* gzFile */
    uint8_t *buf;
    size_t cap, beg, end, chunk;
    uint64_t off;
    int eof;
    char ioerr[160]; /* a read error's reason ("" when none) */
} sl_src;
/* Make at least `want` bytes available at buf[beg..] (fewer only at the end
 * of the input), moving the unconsumed bytes to the front and growing the
 * buffer as needed.  0, or -1 on a read error (ioerr) or no memory. */
int sl_src_fill(sl_src *s, size_t want);
/* Consume n bytes (n <= end - beg). */
void sl_src_take(sl_src *s, size_t n);
/* The next line (without its line end, "\n" or "\r\n"): 1, 0 at the end, -1
 * on a read error (ioerr) or no memory.  *lp points into the buffer until
 * the next read. */
int sl_src_line(sl_src *s, const char **lp, size_t *ln);
/* Back to the start of the file (not of standard input): 0, or -1 (ioerr). */
int sl_src_rewind(sl_src *s);

/* ---- streaming readers ---------------------------------------------------------------- */
/* trace_csv.c: the events CSV's header (line 1 without its line end, the
 * byte-order mark skipped; p NULL: the input is empty; *cols: 6, or 7 with
 * the pool column) and one data row of a CSV of `cols` columns, with the
 * texts sublet_trace_parse_csv gives. */
sublet_status sl_csv_header(const char *p, size_t n, int *cols, char *err, size_t cap);
sublet_status sl_csv_row(const char *p, size_t n, int cols, uint64_t lineno,
                         sublet_trace_event *ev, char *err, size_t cap);

/* trace_log.c: the event log record by record.  start reads the file
 * header; next gives the next event (*got = 1) or the end (*got = 0),
 * applying the records before it to x (stacks, settings, device memory); at
 * the end x holds the notice sublet_trace_parse_log would give.  Texts as
 * sublet_trace_parse_log's. */
typedef struct sl_log_stream sl_log_stream;
sublet_status sl_log_stream_start(sl_src *src, trace_extras *x, sl_log_stream **out, char *err,
                                  size_t cap);
sublet_status sl_log_stream_next(sl_log_stream *ls, sl_src *src, sublet_trace_event *ev,
                                 int *got, char *err, size_t cap);
void sl_log_stream_free(sl_log_stream *ls);
/* Up to cap events at once (*n of them; fewer only at the end or before an
 * error, which is returned with the events before it in ev[0, *n)): the
 * same events and texts as sl_log_stream_next called cap times, event
 * records decoded in place. */
sublet_status sl_log_stream_read(sl_log_stream *ls, sl_src *src, sublet_trace_event *ev,
                                 size_t cap, size_t *n, char *err, size_t ecap);
/* Apply the records to x from now on; with `journal`, also keep the bytes of
 * the STACK and INFO records applied (a reader thread applies them to a
 * private x, then hands the journal to the consumer, which applies it to the
 * extras it shows with sl_log_journal_apply: the same stack ids, as stacks
 * are interned in the same order). */
void sl_log_stream_set_extras(sl_log_stream *ls, trace_extras *x, int journal);
/* The journal kept since the last clear (its bytes: records). */
const uint8_t *sl_log_stream_journal(const sl_log_stream *ls, size_t *len);
void sl_log_stream_journal_clear(sl_log_stream *ls);
sublet_status sl_log_journal_apply(trace_extras *x, const uint8_t *p, size_t n, char *err,
                                   size_t cap);

/* A streamed reader's rows handed out (trace_rmm.c, trace_kineto.c): a
 * record may give two rows (a free's free_requested and free_completed);
 * the second waits here when a read has no room for it. */
typedef struct sl_held {
    sublet_trace_event row;
    bool has;
} sl_held;
/* Start a read into ev[0, cap): the row held, if any (returns 0 or 1). */
static inline size_t sl_held_out(sl_held *h, sublet_trace_event *ev, size_t cap)
{
    if (!h->has || !cap)
        return 0;
    memcpy(ev, &h->row, sizeof *ev);
    h->has = false;
    return 1;
}
/* rows[0, m) (m <= 2) into ev[*k, cap) (*k < cap): what does not fit is held. */
static inline void sl_rows_out(sl_held *h, const sublet_trace_event *rows, size_t m,
                               sublet_trace_event *ev, size_t cap, size_t *k)
{
    for (size_t j = 0; j < m; j++) {
        if (*k < cap) {
            memcpy(&ev[(*k)++], &rows[j], sizeof *ev);
        } else {
            memcpy(&h->row, &rows[j], sizeof *ev);
            h->has = true;
        }
    }
}

/* trace_rmm.c: an RMM log row by row (the whole parse and the stream share
 * it).  header: line 1 (p NULL: the input is empty).  row: one data row
 * (line `lineno`, without its line end; blank lines, sl_rmm_blank, are the
 * caller's to skip) gives its events in ev[0, *nev): an alloc, an oom, or a
 * free's free_requested and free_completed; a free of a pointer not live
 * also gives the pre_alloc row it implies (*has_pre; its kind is set by
 * trace_sort_pre).  The state: the live pointers and the time of day's
 * days.  Texts as sublet_trace_parse_rmm's. */
typedef struct sl_rmm sl_rmm;
sl_rmm *sl_rmm_new(void);
void sl_rmm_free(sl_rmm *s);
void sl_rmm_reset(sl_rmm *s); /* as new */
bool sl_rmm_blank(const char *p, size_t n);
sublet_status sl_rmm_header(const char *p, size_t n, char *err, size_t cap);
typedef struct sl_rmm_rows {
    sublet_trace_event ev[2]; /* the row's events, ev[0, nev) */
    size_t nev;
    sublet_trace_event pre;   /* the prelude row, when has_pre */
    bool has_pre;
} sl_rmm_rows;
sublet_status sl_rmm_row(sl_rmm *s, const char *p, size_t n, uint64_t lineno, sl_rmm_rows *out,
                         char *err, size_t cap);
/* The stream (trace_stream.c): open reads the whole file from its start
 * once for the prelude (into pre, sorted: the rows trace_assemble would
 * put first; a row it cannot read ends that pass, the second meets it
 * again), then rewinds it and reads its header again; read gives up to cap
 * events (*n; fewer only at the end or before an error, which it returns
 * with the events before it), a free's two rows split across reads as
 * cap requires.  A read error's text is the source's ioerr. */
sublet_status sl_rmm_stream_open(sl_rmm *s, sl_src *src, trace_vec *pre, char *err, size_t cap);
sublet_status sl_rmm_stream_read(sl_rmm *s, sl_src *src, sublet_trace_event *ev, size_t cap,
                                 size_t *n, char *err, size_t ecap);

/* trace_kineto.c: a Kineto trace as a stream.  open reads the file from
 * its start once (the document split into its values, each parsed alone, as
 * the whole reader reads them): the device (opt's, or the one with the most
 * memory events), its prelude rows into pre (sorted), its totalGlobalMem;
 * then rewinds it.  SUBLET_ERR_UNSUPPORTED when the file cannot be read so
 * (a syntax error, an event the whole reader refuses, memory events out of
 * order by more than a window of 65,536, a top-level list, ...; the reason in
 * err): the caller then reads it whole.  read gives up to cap events (*n;
 * fewer only at the end or with an error), in the whole reader's order. */
typedef struct sl_kineto sl_kineto;
sublet_status sl_kineto_stream_open(sl_src *src, const sublet_trace_load_options *opt,
                                    trace_vec *pre, int64_t *device, uint64_t *memory,
                                    sl_kineto **out, char *err, size_t cap);
sublet_status sl_kineto_stream_read(sl_kineto *k, sl_src *src, sublet_trace_event *ev, size_t cap,
                                    size_t *n, char *err, size_t ecap);
void sl_kineto_free(sl_kineto *k);

/* trace_stream.c: the rows a borrow can keep in front of the ones it hands
 * out. */
#define SL_STREAM_KEEP 64
/* The stream's next rows without a copy where a reader thread decoded them
 * (otherwise through sublet_trace_stream_next, into the stream's buffer):
 * *ev points at *n rows, 0 at the end, valid until the next borrow or
 * _next, a rewind or the close.  The nkeep rows at keep (nkeep <=
 * SL_STREAM_KEEP: rows the caller still needs, of the last borrow or of its
 * own) are put right before them, so that (*ev)[-nkeep, 0) are those rows,
 * at the end too: the caller's window stays one array.  Errors as _next's
 * (sticky), returned by the borrow after the one that handed out the rows
 * before them; with the error, *ev and *n say nothing. */
sublet_status sl_trace_stream_borrow(sublet_trace_stream *s, const sublet_trace_event *keep,
                                     size_t nkeep, const sublet_trace_event **ev, size_t *n,
                                     char *err, size_t err_cap);

/* trace.c: one row of sublet_trace_info_get's pass (row i; reserved and
 * requested bytes so far in *reserved_io, *requested_io); the streams are
 * counted apart. */
void sl_trace_info_step(sublet_trace_info *out, uint64_t *reserved_io, uint64_t *requested_io,
                        const sublet_trace_event *e, size_t i);

/* ---- readers from a parsed value tree --------------------------------------------- */
/* A PyTorch memory snapshot (the dict of torch.cuda.memory._snapshot(), or the
 * bare list of segments of memory_snapshot()).  fmt is what the trace reports
 * as its source format.  Errors name a path into the value. */
sublet_status sublet_trace_from_snapshot(const pyval *root, const sublet_trace_load_options *opt,
                                         sublet_trace_format fmt, sublet_trace **out, char *err,
                                         size_t err_cap);
/* A segment_pool_id (or a trace entry's pool_id): a tuple (pickle) or list
 * (JSON) of two non-negative ints into out; absent (NULL) or None is (0, 0).
 * false, out (0, 0), for anything else. */
bool sl_snapshot_pool_id(const pyval *v, uint64_t out[2]);
/* A Kineto chrome trace (dict with traceEvents, or the bare event list). */
sublet_status sublet_trace_from_kineto(const pyval *root, const sublet_trace_load_options *opt,
                                       sublet_trace **out, char *err, size_t err_cap);

#endif
