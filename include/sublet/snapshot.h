/* sublet — memory snapshots: PyTorch's torch.cuda.memory._snapshot() dict.
 *
 * sublet_snapshot_take() builds, from a live allocator, the same structure
 * PyTorch's _snapshot() returns (docs/rules.md §9.2):
 *
 *   {"segments":            [Segment, ...],       address order
 *    "device_traces":       [[TraceEntry, ...]],  indexed by device number,
 *                                                 empty lists below the
 *                                                 allocator's device
 *    "allocator_settings":  {...},
 *    "external_annotations": []}
 *
 * Segment: device, address, total_size, allocated_size, active_size,
 * requested_size, stream, segment_type ("small"/"large"), segment_pool_id
 * (the owning pool's id as a 2-tuple, (0, 0) for the default pools; a list
 * in JSON), is_expandable, frames, blocks[] (address, size, requested_size,
 * state "active_allocated"/"active_pending_free"/"inactive", frames).
 * TraceEntry: action, addr (oom: device_free), size, stream, time_us, frames,
 * compile_context "N/A", user_metadata "" (time_us is left out when the
 * entry's time is 0: a clock without time, as a replay of a trace recorded
 * by an older PyTorch that kept none).  Frame: {filename, line, name},
 * innermost first.  The trace is the allocator's recording ring buffer
 * (sublet/history.h), copied before the segment walk: a snapshot never holds
 * its own `snapshot` entry (as PyTorch).  Without recording, device_traces
 * holds empty lists and every `frames` is [].
 *
 * Files: a pickle (protocol 4, only the opcodes pytorch.org/memory_viz reads)
 * or JSON (json.dumps's text), optionally gzip'd.  Writes are atomic: a
 * temporary file in the target's directory, fsync, rename over the target;
 * on failure the target is untouched.
 *
 * The library never prints; errors come back as a status and a message. */
#ifndef SUBLET_SNAPSHOT_H
#define SUBLET_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/stats.h"
#include "sublet/sublet.h"
#include "sublet/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sublet_snapshot sublet_snapshot;

typedef enum sublet_snapshot_format {
    SUBLET_SNAPSHOT_AUTO = 0, /* from the path: .pickle/.pkl or .json, then an optional .gz */
    SUBLET_SNAPSHOT_PICKLE = 1,
    SUBLET_SNAPSHOT_JSON = 2
} sublet_snapshot_format;

/* Take a snapshot of `a` (SUBLET_ERR_NO_MEMORY when host memory runs out).
 * Free it with sublet_snapshot_free. */
SUBLET_API sublet_status sublet_snapshot_take(sublet_allocator *a, sublet_snapshot **out);

/* Build the snapshot directly from a trace, without an engine (where a
 * replay is impossible, e.g. expandable segments): device_traces holds the
 * trace's recorded events verbatim, with their stacks; segments are the ones
 * live at the end (pre_segment, segment_alloc/segment_map minus
 * segment_free/segment_unmap), tiled by the allocations live at the end
 * (pre_alloc, alloc minus free_completed; "active_pending_free" between
 * free_requested and free_completed) with inactive blocks in the gaps.  A
 * block's size is the trace's block_size when the source knew it, else the
 * request rounded as PyTorch's round_size under `conf`, in a large segment
 * extended over a following gap of at most 1 MiB (which PyTorch would not
 * have split off): exact for snapshots' own preludes, approximate otherwise
 * (a replay through the engine is exact).  Allocations outside every final
 * segment are left out.  allocator_settings come from conf (NULL or "":
 * PyTorch's defaults; SUBLET_ERR_CONFIG when it does not parse). */
SUBLET_API sublet_status sublet_snapshot_from_trace(const sublet_trace *t, const char *conf,
                                                    sublet_snapshot **out, char *err,
                                                    size_t err_cap);

/* Parse a snapshot file's bytes (pickle or JSON, gzip'd or not, detected by
 * content): the _snapshot() dict, or the bare segment list of
 * memory_snapshot().  The segments and blocks are validated here, so the
 * accessors below cannot fail on malformed data.  SUBLET_ERR_PARSE with the
 * reason ("segments[3].blocks[0].size: expected a non-negative int, found
 * str"), SUBLET_ERR_NO_MEMORY. */
SUBLET_API sublet_status sublet_snapshot_parse(const void *buf, size_t len, sublet_snapshot **out,
                                               char *err, size_t err_cap);
/* Read and parse a file (SUBLET_ERR_IO when it cannot be read); messages
 * start with the path. */
SUBLET_API sublet_status sublet_snapshot_load(const char *path, sublet_snapshot **out, char *err,
                                              size_t err_cap);
SUBLET_API void sublet_snapshot_free(sublet_snapshot *s);

/* The format a path's name asks for (SUBLET_SNAPSHOT_AUTO when the name has
 * no known extension); *gzip is set when it ends in .gz. */
SUBLET_API sublet_snapshot_format sublet_snapshot_format_of_path(const char *path, int *gzip);

/* Encode into a malloc'd buffer (free() it).  fmt must be PICKLE or JSON. */
SUBLET_API sublet_status sublet_snapshot_encode(const sublet_snapshot *s,
                                                sublet_snapshot_format fmt,
                                                int gzip, uint8_t **out, size_t *out_len, char *err,
                                                size_t err_cap);
/* Encode and write atomically.  AUTO takes the format (and gzip) from the
 * path's extension: .pickle/.pkl -> pickle, .json -> JSON, a further .gz ->
 * gzip; an unknown extension is SUBLET_ERR_INVALID_ARGUMENT.  With PICKLE or
 * JSON, gzip still follows a .gz suffix.  On an I/O failure returns
 * SUBLET_ERR_IO, with the path, the step (open/write/fsync/rename) and the
 * system's reason in err; an existing file at `path` is left as it was. */
SUBLET_API sublet_status sublet_snapshot_write(const sublet_snapshot *s, const char *path,
                                               sublet_snapshot_format fmt, char *err,
                                               size_t err_cap);

/* ---- reading a snapshot ------------------------------------------------------------ */
/* Number of segments (all devices). */
SUBLET_API size_t sublet_snapshot_segment_count(const sublet_snapshot *s);
/* Number of device_traces lists, and the entries of one (0 when absent). */
SUBLET_API size_t sublet_snapshot_device_count(const sublet_snapshot *s);
SUBLET_API size_t sublet_snapshot_trace_count(const sublet_snapshot *s, size_t device);
/* The PYTORCH_CUDA_ALLOC_CONF string of allocator_settings, NULL when the
 * snapshot has none. */
SUBLET_API const char *sublet_snapshot_conf(const sublet_snapshot *s);

/* Walk the segments in the snapshot's order.  The views are valid during the
 * callback only; `stack` fields are 0 (frames are in the trace view);
 * pool_id is the segment_pool_id ((0, 0) when absent or None).  Returns
 * SUBLET_ERR_NO_MEMORY when the block array cannot be allocated. */
typedef void (*sublet_snapshot_segment_fn)(void *user, int64_t device,
                                           const sublet_segment_view *seg);
SUBLET_API sublet_status sublet_snapshot_segments_walk(const sublet_snapshot *s,
                                                       sublet_snapshot_segment_fn fn, void *user);

/* The snapshot as a trace (sublet/trace.h: prelude rebuilt from the final
 * segments, every event with its time and stack).  opt may be NULL.  The
 * trace's source format is SUBLET_FORMAT_SNAPSHOT_PICKLE or _JSON (what it was
 * parsed from; PICKLE for a snapshot taken from an allocator).  Release it with
 * sublet_trace_extras_release + sublet_trace_free. */
SUBLET_API sublet_status sublet_snapshot_trace(const sublet_snapshot *s,
                                               const sublet_trace_load_options *opt,
                                               sublet_trace **out, char *err, size_t err_cap);

/* Current statistics computed from the segments of one device alone (no
 * history): per pool, allocated/active/requested/reserved/inactive-split
 * bytes and counts, segments, oversize allocations and segments (against the
 * snapshot's max_split_size); peak = allocated = current, freed = 0, the
 * counters 0.  Inactive-split counts the inactive blocks of segments that
 * hold more than one block. */
SUBLET_API void sublet_snapshot_stats(const sublet_snapshot *s, int64_t device, sublet_stats *out);

/* ---- writing a trace as `.events.csv` (src/trace_write.c) ------------------------------
 * The form sublet_trace_parse_csv reads and shared/traces derives: the header
 * `seq,action,addr,size,stream,time_us`, then one row per event, prelude
 * rows first, seq counting from 0, time_us empty when the event has none,
 * CRLF line ends (as the shared traces).  Stacks and pre_alloc block sizes
 * have no column and are dropped.  A trace with an event in a private pool
 * (sublet_trace_event.pool_id) gets a seventh column, `pool` (FIRST:SECOND,
 * empty for the default pools; docs/pools.md); any other trace is written
 * with the six columns.  Encode into a malloc'd buffer (free() it),
 * or write atomically to `path` (gzip'd when it ends in .gz; errors as
 * sublet_snapshot_write; it is sublet_trace_stream_write_csv over a stream
 * of t). */
SUBLET_API sublet_status sublet_trace_encode_csv(const sublet_trace *t, char **out, size_t *out_len,
                                                 char *err, size_t err_cap);
SUBLET_API sublet_status sublet_trace_write_csv(const sublet_trace *t, const char *path, char *err,
                                                size_t err_cap);

#ifdef __cplusplus
}
#endif
#endif
