/* sublet — an in-memory allocation trace.
 *
 * A trace is an array of events in recording order.  It starts with an
 * optional prelude (the state that already existed when recording began):
 * PRE_SEGMENT rows (segments that existed, `size` = segment size) and
 * PRE_ALLOC rows (live allocations, `size` = requested size), followed by the
 * recorded events with PyTorch's action names (sublet_action).
 *
 * Every reader (the `.events.csv` reader below; later pickle, JSON, RMM CSV,
 * Kineto) fills the same model, and the replay driver (sublet/replay.h)
 * consumes it.  The event struct is public and documented; the trace object
 * itself is opaque.  The library never prints: readers report malformed input
 * as SUBLET_ERR_PARSE with "line N: reason" in the caller's buffer. */
#ifndef SUBLET_TRACE_H
#define SUBLET_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sublet/api.h"
#include "sublet/sublet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Event kinds: every sublet_action value, plus the two prelude kinds. */
enum {
    SUBLET_TRACE_PRE_SEGMENT = SUBLET_ACT_COUNT, /* "pre_segment" */
    SUBLET_TRACE_PRE_ALLOC = SUBLET_ACT_COUNT + 1, /* "pre_alloc" */
    SUBLET_TRACE_KIND_COUNT = SUBLET_ACT_COUNT + 2
};

/* sublet_trace_event.flags */
#define SUBLET_TRACE_HAS_TIME 1u /* time_us is meaningful */
#define SUBLET_TRACE_EXPANDABLE 2u /* pre_segment: memory of an expandable segment
                                    * (a snapshot segment with is_expandable) */

typedef struct sublet_trace_event {
    uint32_t kind;        /* a sublet_action or SUBLET_TRACE_PRE_* */
    uint32_t flags;       /* SUBLET_TRACE_HAS_TIME */
    uint64_t addr;        /* block or segment address (0 for snapshot) */
    uint64_t size;        /* alloc/free_*: requested bytes; segment_*: segment
                           * bytes; pre_segment: segment bytes; pre_alloc:
                           * requested bytes; oom: rounded request */
    sublet_stream stream; /* raw cudaStream_t value, 0 = default stream */
    uint64_t time_us;     /* microseconds (epoch), when flags has HAS_TIME */
    uint64_t line;        /* 1-based line (or record number) in the source; 0 = none */
    uint64_t block_size;  /* pre_alloc: the block's real (rounded, maybe unsplit) size
                           * when the source knows it (a snapshot's final
                           * segments[].blocks[].size); 0 = unknown */
    uint32_t frames;      /* call stack: an id for sublet_trace_stack, 0 = none */
    /* The private pool the event's memory belongs to (sublet/pool.h's
     * sublet_pool_id: first, second); (0, 0) = the default pools or unknown.
     * The snapshot readers take a trace entry's pool_id when it has one
     * (newest PyTorch); pre_segment / pre_alloc rows get the final segments'
     * segment_pool_id, and every other row is rebuilt from the segments: a
     * segment_alloc of a final private segment is its pool's, an alloc
     * inside a live private segment that pool's, a free its block's, a
     * segment_free its segment's.  The events CSV reads and writes it in its
     * optional pool column.  Other readers leave it (0, 0).  sublet replay
     * drives each pool (sublet/replay.h; docs/pools.md). */
    uint64_t pool_id[2];
} sublet_trace_event;

typedef struct sublet_trace sublet_trace;

/* Name of a kind ("alloc", "pre_segment", ...), "unknown" when out of range. */
SUBLET_API const char *sublet_trace_kind_name(uint32_t kind);
/* Parse a kind name of `len` bytes; returns 0 and sets *kind, or -1. */
SUBLET_API int sublet_trace_kind_parse(const char *name, size_t len, uint32_t *kind);
/* Is `kind` a prelude kind (PRE_SEGMENT / PRE_ALLOC)? */
SUBLET_API int sublet_trace_kind_is_prelude(uint32_t kind);

/* Create an empty trace. */
SUBLET_API sublet_status sublet_trace_create(sublet_trace **out);
/* Free a trace (NULL is a no-op). */
SUBLET_API void sublet_trace_free(sublet_trace *t);
/* Append one event (copied).  Refused with SUBLET_ERR_INVALID_ARGUMENT for an
 * unknown kind, or for a prelude kind once a recorded event was appended (the
 * prelude comes first).  SUBLET_ERR_NO_MEMORY when growing fails. */
SUBLET_API sublet_status sublet_trace_append(sublet_trace *t, const sublet_trace_event *ev);

/* Number of events (prelude included). */
SUBLET_API size_t sublet_trace_count(const sublet_trace *t);
/* Number of leading prelude events. */
SUBLET_API size_t sublet_trace_prelude_count(const sublet_trace *t);
/* Event i (0-based), or NULL when out of range.  Valid until the next append. */
SUBLET_API const sublet_trace_event *sublet_trace_at(const sublet_trace *t, size_t i);
/* All events as one array (sublet_trace_count of them), NULL when empty. */
SUBLET_API const sublet_trace_event *sublet_trace_events(const sublet_trace *t);
/* Number of events of one kind. */
SUBLET_API size_t sublet_trace_count_kind(const sublet_trace *t, uint32_t kind);

/* What the trace itself records, computed by walking it once. */
typedef struct sublet_trace_info {
    uint64_t pre_segments, pre_allocs;   /* prelude rows */
    uint64_t pre_segment_bytes;          /* sum of pre_segment sizes */
    uint64_t allocs, frees_requested, frees_completed;
    uint64_t segment_allocs, segment_frees, ooms, snapshots;
    /* Reserved bytes as the trace goes: pre_segment sizes, + segment_alloc,
     * − segment_free (segment_map/unmap count the same way). */
    uint64_t peak_reserved_bytes, final_reserved_bytes;
    /* Live requested bytes: pre_alloc sizes, + alloc, − free_completed. */
    uint64_t peak_requested_bytes, final_requested_bytes;
    /* Index of the first event at which peak_reserved_bytes is reached. */
    uint64_t peak_reserved_event;
    /* Number of distinct streams among all events, prelude included. */
    uint64_t streams;
} sublet_trace_info;
/* Fill *out (zeroed first).  SUBLET_ERR_NO_MEMORY only if counting streams
 * needed memory that was not available (the other fields are still set,
 * streams 0) or the stream over t could not be made (all 0): it is
 * sublet_trace_stream_info over a stream of t. */
SUBLET_API sublet_status sublet_trace_info_get(const sublet_trace *t, sublet_trace_info *out);

/* ---- the `.events.csv` form --------------------------------------------- */
/* Header `seq,action,addr,size,stream,time_us`, or with a seventh column
 * `...,time_us,pool` (the pool of a private-pool row as FIRST:SECOND, e.g.
 * `1:0`; empty for the default pools; sublet writes it only for a trace
 * with a private-pool row); decimal unsigned integers;
 * time_us may be empty; CRLF or LF line ends; the action
 * `pre_segment_expandable` is a pre_segment flagged SUBLET_TRACE_EXPANDABLE
 * (what sublet writes for one; shared/traces' CSVs have none); the last line may lack its
 * newline; a leading UTF-8 byte-order mark is accepted.  Strict: a wrong
 * header, a wrong column count, an empty line, a non-numeric, signed or
 * overflowing number, an unknown action or a prelude row after a recorded
 * event gives SUBLET_ERR_PARSE and "line N: reason" (1-based) in err.
 * *out is set only on success; the caller frees it with sublet_trace_free. */
SUBLET_API sublet_status sublet_trace_parse_csv(const char *buf, size_t len, sublet_trace **out,
                                                char *err, size_t err_cap);
/* Read the whole stream, then parse it (SUBLET_ERR_IO on a read error). */
SUBLET_API sublet_status sublet_trace_read_csv(FILE *f, sublet_trace **out, char *err,
                                               size_t err_cap);
/* Open `path` and read it (SUBLET_ERR_IO, with the reason in err, when the
 * file cannot be opened or read). */
SUBLET_API sublet_status sublet_trace_load_csv(const char *path, sublet_trace **out, char *err,
                                               size_t err_cap);

/* ---- every trace format: detection and readers (trace_load.c) ------------- */
/* Formats a trace can come in.  Detection looks at the content, never at the
 * file name; gzip input (1f 8b) is inflated first. */
typedef enum sublet_trace_format {
    SUBLET_FORMAT_UNKNOWN = 0,
    SUBLET_FORMAT_EVENTS_CSV,     /* `seq,action,addr,size,stream,time_us` */
    SUBLET_FORMAT_SNAPSHOT_PICKLE, /* torch.cuda.memory._dump_snapshot() pickle */
    SUBLET_FORMAT_SNAPSHOT_JSON,  /* the same snapshot as JSON (json.dump) */
    SUBLET_FORMAT_RMM_CSV,        /* RMM logging_resource_adaptor log
                                   * (`Thread,Time,Action,Pointer,Size,Stream`) */
    SUBLET_FORMAT_KINETO_JSON,    /* PyTorch profiler chrome trace, profile_memory=True */
    SUBLET_FORMAT_EVENT_LOG,      /* sublet's continuous event log (sublet/log.h) */
    SUBLET_FORMAT_COUNT
} sublet_trace_format;

/* "events-csv", "snapshot-pickle", "snapshot-json", "rmm-csv", "kineto-json",
 * "sublet-log", "unknown". */
SUBLET_API const char *sublet_trace_format_name(sublet_trace_format f);

/* Guess the format of buf from its first bytes (a gzip input is inflated as far
 * as needed to look inside).  SUBLET_FORMAT_UNKNOWN when nothing matches.  The
 * guess does not validate: sublet_trace_parse may still refuse the input. */
SUBLET_API sublet_trace_format sublet_trace_detect(const void *buf, size_t len);

/* A stream's reader thread (sublet_trace_load_options.stream_thread;
 * sublet/trace_stream.h, docs/replay.md "Streaming"). */
typedef enum sublet_stream_thread {
    /* as the source asks: for a CSV or log larger than the first read, but
     * not a plain (not gzip'd) event log on a machine with one CPU online */
    SUBLET_STREAM_THREAD_AUTO = 0,
    /* for every CSV and log, even one that fits in the first read, and a
     * plain log on one CPU */
    SUBLET_STREAM_THREAD_ALWAYS = 1,
    /* never: the caller's thread decodes the source as it reads */
    SUBLET_STREAM_THREAD_NEVER = 2
} sublet_stream_thread;

typedef struct sublet_trace_load_options {
    /* Which device of a multi-device source to read (PyTorch snapshot:
     * device_traces index and segments[].device; Kineto: "Device Id").  With
     * pick_device 0 (the default) the reader takes the device with the most
     * events (ties: the lowest index; no events at all: the device of the
     * first segment, else 0). */
    int pick_device;
    int64_t device;
    /* Refuse a gzip input that inflates to more than this (0: 4 GiB). */
    size_t max_inflated;
    /* Refuse a pickle/JSON source whose parsed value tree needs more host
     * memory than this (0: no limit). */
    size_t max_tree_bytes;
    /* Streams (sublet/trace_stream.h): bytes per read of the file (0: 1 MiB). */
    size_t read_chunk;
    /* Streams: whether a reader thread decodes ahead (a sublet_stream_thread;
     * 0: SUBLET_STREAM_THREAD_AUTO).  Events, errors and texts are the same
     * either way; loading a trace whole ignores it. */
    int stream_thread;
} sublet_trace_load_options;

/* Parse a trace of any supported format from memory (opt may be NULL).
 * The format is detected by content: gzip -> inflate first; a pickle
 * (protocol 2-5 PROTO header, or a protocol 0/1 first opcode) -> PyTorch
 * snapshot; JSON: an object with "traceEvents" -> Kineto, with "segments" or
 * "device_traces" -> snapshot; a bare JSON list of segment dicts -> snapshot
 * without a trace, of trace-event dicts -> Kineto; CSV by its header line.
 *
 * Snapshots (pickle or JSON) of a recording that started mid-run get a
 * prelude rebuilt from the final segments and the trace, exactly as
 * shared/traces/README.md derives its .events.csv: walk the events keeping
 * the live allocations (alloc adds, free_completed removes) and live segments
 * (segment_alloc adds, segment_free removes); a free_completed / segment_free
 * of an unknown address becomes a pre_alloc / pre_segment (its size, stream
 * and stack); a final active block / segment the walk does not hold becomes a
 * pre_alloc (requested_size, block_size = the block's size) / pre_segment
 * (total_size).  Pre_segments, then pre_allocs, each sorted by address.
 * Expandable segments (is_expandable): the pages mapped when recording began
 * are the final segments' mapped runs with the trace's segment_map /
 * segment_unmap rows undone from the last to the first; each contiguous
 * range of them is a pre_segment flagged SUBLET_TRACE_EXPANDABLE (pages
 * the trace unmapped included; a snapshot does not say where the virtual
 * reservations around them begin and end).  Then every
 * event verbatim (time_us when present; oom: addr = device_free), with its
 * stack interned (sublet_trace_stack).
 *
 * RMM CSV: allocate -> alloc, free -> free_requested + free_completed,
 * allocate failure -> oom (addr 0).  Kineto: the "[memory]" instant events of
 * Device Type 1 (CUDA) of one device, sorted by (ts, "Ev Idx"); positive Bytes
 * -> alloc, negative -> free_requested + free_completed.  In both, a free of
 * an address that is not live becomes a pre_alloc (sorted by address).
 *
 * Malformed input gives SUBLET_ERR_PARSE with the reason and where: a byte
 * offset (pickle, JSON, gzip), a line (CSV forms) or a path into the value
 * ("device_traces[0][12].size: expected a non-negative int, found str").
 * Unrecognised input: "unrecognised trace format (first bytes: ...)".
 * SUBLET_ERR_NO_MEMORY when host memory runs out.  *out is set only on
 * success; free it with sublet_trace_free. */
SUBLET_API sublet_status sublet_trace_parse(const void *buf, size_t len,
                                            const sublet_trace_load_options *opt,
                                            sublet_trace **out, char *err, size_t err_cap);
/* Read the file and parse it (SUBLET_ERR_IO when it cannot be read); error
 * messages start with the path. */
SUBLET_API sublet_status sublet_trace_load(const char *path, const sublet_trace_load_options *opt,
                                           sublet_trace **out, char *err, size_t err_cap);
/* sublet's event log alone (sublet/log.h; magic "SUBLETLG" required): every
 * event of every intact block, in order, with its time, stream and stack
 * (sublet_trace_stack); the settings and device memory it recorded.  A log
 * cut short (kill -9, a full disk) reads up to its last whole block, and
 * sublet_trace_notice says "torn tail at byte N, K bytes ignored"; events
 * the writer had no room for are counted there too.  A bad block followed
 * by an intact one, a block out of sequence, or a malformed record inside a
 * block whose checksum holds is SUBLET_ERR_PARSE.  The log has no prelude:
 * it holds what happened after sublet_log_open. */
SUBLET_API sublet_status sublet_trace_parse_log(const void *buf, size_t len, sublet_trace **out,
                                                char *err, size_t err_cap);
/* RMM's CSV log alone (header required). */
SUBLET_API sublet_status sublet_trace_parse_rmm(const char *buf, size_t len, sublet_trace **out,
                                                char *err, size_t err_cap);

/* ---- what a reader knew beyond the events ----------------------------------
 * Readers attach these to the trace they return; sublet_trace_free frees
 * them.  sublet_trace_extras_release(t) drops them earlier (stacks,
 * settings, format, device), keeping the events. */
SUBLET_API void sublet_trace_extras_release(const sublet_trace *t);

/* The format the trace was read from (SUBLET_FORMAT_UNKNOWN when it was not
 * read by sublet_trace_parse / sublet_trace_load). */
SUBLET_API sublet_trace_format sublet_trace_source_format(const sublet_trace *t);
/* The device whose events were read, -1 when unknown. */
SUBLET_API int64_t sublet_trace_device(const sublet_trace *t);
/* The allocator settings the source recorded, as a PYTORCH_CUDA_ALLOC_CONF
 * string: the raw string when the snapshot kept one, else rebuilt from the
 * snapshot's allocator_settings (max_split_size_mb, roundup_power2_divisions,
 * garbage_collection_threshold, expandable_segments, ...); "" when every
 * setting is the default; NULL when the source recorded none. */
SUBLET_API const char *sublet_trace_settings(const sublet_trace *t);
/* What the reader warns about while it succeeded (an event log's torn tail
 * or lost events), NULL when nothing. */
SUBLET_API const char *sublet_trace_notice(const sublet_trace *t);
/* The device's total memory in bytes when the source knew it, else 0. */
SUBLET_API uint64_t sublet_trace_device_memory(const sublet_trace *t);

/* One stack frame; a stack lists them innermost first. */
typedef struct sublet_trace_frame {
    const char *filename; /* NUL-terminated; "" when absent */
    const char *name;     /* function name; "" when absent */
    int64_t line;         /* 0 when absent */
} sublet_trace_frame;
/* Number of distinct stacks (ids 1..count). */
SUBLET_API uint32_t sublet_trace_stack_count(const sublet_trace *t);
/* Stack `id` (sublet_trace_event.frames): sets *out to its frames (valid
 * until the extras are released) and returns their count; 0 and *out = NULL
 * for id 0 or an unknown id. */
SUBLET_API size_t sublet_trace_stack(const sublet_trace *t, uint32_t id,
                                     const sublet_trace_frame **out);

#ifdef __cplusplus
}
#endif
#endif
