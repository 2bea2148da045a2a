/* sublet — a trace read as a stream: events in bounded chunks, in order.
 *
 * sublet_trace_load builds the whole trace in memory (64 bytes an event, plus
 * the file while it is parsed).  A stream hands the same events out chunk by
 * chunk instead, so that a consumer (sublet_replay_stream, sublet/replay.h)
 * needs memory for what it keeps live, not for the length of the recording.
 *
 * What streams: the sequential formats, read with a bounded buffer (fread
 * chunks of `read_chunk` bytes; gzip'd input through zlib's gzread):
 *   - the events CSV: its prelude (the pre_segment / pre_alloc rows at the
 *     start) is read ahead at open, the only state read ahead; then rows;
 *   - sublet's event log: block by block (a block's payload is at most
 *     64 MiB), records decoded as they are handed out;
 *   - the RMM log (a file, not standard input): a free of an address never
 *     allocated before it is an allocation made before the log began, a
 *     prelude row, so open reads the file once for the prelude (the live
 *     pointers and the prelude in memory, not the rows), then reads it
 *     again from the start, the rows as they are handed out;
 *   - the Kineto trace (a file): read twice as well, one element of
 *     traceEvents at a time, its memory events put in time order by a
 *     window of 65,536 events a device; one whose events are further out
 *     of order, or that the first pass cannot follow, is read whole.
 * These formats are decoded ahead by a reader thread the stream
 * starts at open (a ring of 4 chunks of 4,096 events; by default none for a
 * source of at most 64 KiB, nor for a plain, not gzip'd, log on a machine
 * with one CPU online; the open options' stream_thread
 * SUBLET_STREAM_THREAD_NEVER: none, _ALWAYS: for a small source and a plain
 * log on one CPU too; docs/replay.md): _next
 * gives the same events, counts, errors and texts in the same order, and the
 * accessors below read only what the caller's thread wrote.  A stream is
 * used from one thread at a time, as before.
 * What does not: snapshot pickles and JSON (a value tree, with the prelude
 * rebuilt from the final segments), an RMM log or a Kineto trace on
 * standard input (which cannot be read twice) and the Kineto traces above.
 * sublet_trace_stream_open reads those whole, as
 * sublet_trace_load does, and streams the in-memory trace:
 * sublet_trace_stream_bounded() says which case holds.
 *
 * The events, their `line` fields, the prelude and every error text are the
 * same as sublet_trace_load's for the same file (a malformed row: "PATH: line
 * N: reason", when the stream reaches it; a stream never refuses a gzip
 * input for its inflated size, as it does not hold it).  Errors are sticky: after one, _next
 * returns it again. */
#ifndef SUBLET_TRACE_STREAM_H
#define SUBLET_TRACE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sublet_trace_stream sublet_trace_stream;

/* Open `path` ("-": standard input) as a stream; opt may be NULL
 * (read_chunk: bytes per read, 0 = 1 MiB; stream_thread: the reader thread,
 * a sublet_stream_thread, another value SUBLET_ERR_INVALID_ARGUMENT).  The format is detected by
 * content as sublet_trace_load does.  The prelude is read here, and the
 * extras the source gives at its start (an event log's settings, device
 * memory and device).  Messages start with the path ("stdin" for "-", as
 * sublet_input_load names it).  Close with sublet_trace_stream_close. */
SUBLET_API sublet_status sublet_trace_stream_open(const char *path,
                                                  const sublet_trace_load_options *opt,
                                                  sublet_trace_stream **out, char *err,
                                                  size_t err_cap);
/* A stream over a trace already in memory (borrowed: t must outlive the
 * stream).  Bounded, in the sense that it holds nothing of its own. */
SUBLET_API sublet_status sublet_trace_stream_from_trace(const sublet_trace *t,
                                                        sublet_trace_stream **out);
SUBLET_API void sublet_trace_stream_close(sublet_trace_stream *s);
/* The format of the file at `path` ("-" is not looked at), as
 * sublet_trace_detect gives it for its first 64 KiB (inflated when gzip'd);
 * SUBLET_FORMAT_UNKNOWN when it cannot be read.  Whether
 * sublet_trace_stream_open would stream it: EVENTS_CSV and EVENT_LOG. */
SUBLET_API sublet_trace_format sublet_trace_detect_path(const char *path);

/* The next recorded events (after the prelude): up to cap into ev, *n of
 * them; *n == 0 at the end.  SUBLET_ERR_PARSE / _IO / _NO_MEMORY with the
 * reason in err. */
SUBLET_API sublet_status sublet_trace_stream_next(sublet_trace_stream *s, sublet_trace_event *ev,
                                                  size_t cap, size_t *n, char *err, size_t err_cap);
/* Start again from the first recorded event (a file is reopened and its
 * prelude read again; standard input cannot be: SUBLET_ERR_UNSUPPORTED). */
SUBLET_API sublet_status sublet_trace_stream_rewind(sublet_trace_stream *s, char *err,
                                                    size_t err_cap);

/* What sublet_trace_info_get gives for the trace, in one pass over the
 * stream (rewound first when it has handed out rows; standard input then
 * cannot be: SUBLET_ERR_UNSUPPORTED).  The stream is left at its end; a
 * malformed row is its error, as from _next.  Memory: the distinct streams. */
SUBLET_API sublet_status sublet_trace_stream_info(sublet_trace_stream *s, sublet_trace_info *out,
                                                  char *err, size_t err_cap);

/* Write the trace as an events CSV at `path` (.gz: gzip'd), the same bytes
 * as sublet_trace_write_csv gives for the trace loaded whole, in memory for
 * a chunk of rows: from the stream's start (rewound first when it has
 * handed out rows) to its end.  Replaced atomically: on any error (a
 * malformed row: the stream's error and text; a write: "PATH: STEP failed:
 * ...") the target is left as it was.  The pool column (a private-pool
 * row) is found while writing: the file is then written again with it,
 * from the stream rewound (standard input cannot be: SUBLET_ERR_UNSUPPORTED). */
SUBLET_API sublet_status sublet_trace_stream_write_csv(sublet_trace_stream *s, const char *path,
                                                       char *err, size_t err_cap);

/* A binary copy of the stream's recorded rows (read from its start,
 * rewound first when it has handed out rows, to its end) in an unnamed
 * temporary file (tmpfile(): 64 bytes a row on disk, none in memory),
 * handed out as a stream of its own: rewinding it is a position, reading it a
 * read of fixed records, no parsing.  Its prelude and extras are s's: s must
 * stay open while the copy is used (close the copy first).  The stream's
 * error and text for a malformed row. */
SUBLET_API sublet_status sublet_trace_stream_copy(sublet_trace_stream *s, sublet_trace_stream **out,
                                                  char *err, size_t err_cap);

/* Another reader of a stream that is read again cheaply, at its own
 * position, from the first recorded row: of a binary copy (_copy: the same
 * temporary file, read with positional reads, so that several threads read
 * one copy at once, each through its own reader) or of a trace in memory
 * (from_trace, or a format read whole: a stream over the same trace).  The
 * same rows, prelude and extras; s must stay open while the reader is used
 * (close the readers first).  Other streams: SUBLET_ERR_UNSUPPORTED (make a
 * copy first). */
SUBLET_API sublet_status sublet_trace_stream_reader(sublet_trace_stream *s,
                                                    sublet_trace_stream **out);
/* 1 when s is read again cheaply (a binary copy or a trace in memory:
 * rewinding is a position, and sublet_trace_stream_reader makes readers),
 * 0 when reading it again means reading its source again. */
SUBLET_API int sublet_trace_stream_rereadable(const sublet_trace_stream *s);

/* The prelude rows (sets *ev, valid while the stream is open); their count. */
SUBLET_API size_t sublet_trace_stream_prelude(const sublet_trace_stream *s,
                                              const sublet_trace_event **ev);
/* Rows handed out so far, the prelude included (after the end: the number
 * of rows of the trace, sublet_trace_count). */
SUBLET_API uint64_t sublet_trace_stream_rows(const sublet_trace_stream *s);
/* 1 when the source is read in bounded memory, 0 when it was read whole. */
SUBLET_API int sublet_trace_stream_bounded(const sublet_trace_stream *s);
/* The in-memory trace behind a stream that has one (from_trace, or a format
 * read whole), else NULL. */
SUBLET_API const sublet_trace *sublet_trace_stream_trace(const sublet_trace_stream *s);

/* The extras, as sublet_trace_source_format / _device / _settings /
 * _device_memory / _notice / _stack_count / _stack give them for the loaded
 * trace.  Each is known from open on, except the notice (an event log's torn
 * tail, lost events: after the end) and the stacks (an event log records a
 * stack before its first use: each is known by the time an event names
 * it). */
SUBLET_API sublet_trace_format sublet_trace_stream_format(const sublet_trace_stream *s);
SUBLET_API int64_t sublet_trace_stream_device(const sublet_trace_stream *s);
SUBLET_API const char *sublet_trace_stream_settings(const sublet_trace_stream *s);
SUBLET_API uint64_t sublet_trace_stream_device_memory(const sublet_trace_stream *s);
SUBLET_API const char *sublet_trace_stream_notice(const sublet_trace_stream *s);
SUBLET_API uint32_t sublet_trace_stream_stack_count(const sublet_trace_stream *s);
SUBLET_API size_t sublet_trace_stream_stack(const sublet_trace_stream *s, uint32_t id,
                                            const sublet_trace_frame **out);

#ifdef __cplusplus
}
#endif
#endif
