/* sublet — recording: a ring buffer of trace entries with PyTorch's action
 * names, and allocation stacks, as torch.cuda.memory._record_memory_history.
 * Off by default; when off it costs one branch per event. */
#ifndef SUBLET_HISTORY_H
#define SUBLET_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/sublet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's RecordContext: which stacks are captured. */
typedef enum sublet_context {
    SUBLET_CONTEXT_NONE = 0,  /* no stacks */
    SUBLET_CONTEXT_STATE = 1, /* stack at malloc, kept on the live block only */
    SUBLET_CONTEXT_ALLOC = 2, /* ... and stored in trace entries */
    SUBLET_CONTEXT_ALL = 3    /* ... and the stack at free time too */
} sublet_context;

/* PyTorch's `enabled`: what is recorded. */
typedef enum sublet_record {
    SUBLET_RECORD_OFF = 0,   /* stop and drop the history */
    SUBLET_RECORD_STATE = 1, /* stacks of live blocks only, no trace */
    SUBLET_RECORD_ALL = 2    /* a trace of every event */
} sublet_record;

typedef struct sublet_frame {
    const char *filename; /* object or source file */
    int line;             /* 0 when unknown */
    const char *name;     /* symbol name, "??" when unknown */
} sublet_frame;

typedef struct sublet_trace_entry {
    sublet_action action;
    uint64_t addr; /* for SUBLET_ACT_OOM: the device's free bytes */
    uint64_t size;
    sublet_stream stream;
    uint64_t time_us; /* microseconds since the Unix epoch (or the clock set) */
    uint32_t stack;   /* interned stack id; 0 = none */
} sublet_trace_entry;

/* Start, change or stop recording.  max_entries bounds the ring buffer
 * (oldest entries are overwritten); 0 means PyTorch's default (unbounded
 * in PyTorch; here 1,000,000).  Changing the settings clears the buffer. */
SUBLET_API sublet_status sublet_history_record(sublet_allocator *a, sublet_record enabled,
                                               sublet_context context, size_t max_entries);
/* Entries currently held, and a copy of them oldest first. */
SUBLET_API size_t sublet_history_count(sublet_allocator *a);
SUBLET_API size_t sublet_history_copy(sublet_allocator *a, sublet_trace_entry *out, size_t cap);
/* Move the oldest entries, up to cap of them, into out and drop them from
 * the buffer (a consumer that reads the record as it grows, in memory for
 * what it has not taken yet).  Returns how many were taken. */
SUBLET_API size_t sublet_history_take(sublet_allocator *a, sublet_trace_entry *out, size_t cap);
/* Entries dropped by the ring buffer since recording started. */
SUBLET_API uint64_t sublet_history_dropped(sublet_allocator *a);

/* Frames of an interned stack, innermost first.  The pointers stay valid
 * until the allocator is destroyed.  Returns the frame count. */
SUBLET_API size_t sublet_stack_frames(sublet_allocator *a, uint32_t stack,
                                      const sublet_frame **frames);
/* Stack of the allocation that holds the live block at `addr` (0 if none). */
SUBLET_API uint32_t sublet_block_stack(sublet_allocator *a, uint64_t addr);

/* Replace native stack capture (backtrace) with a caller's frames, e.g.
 * Python frames from the PyTorch shim.  fn fills up to cap frames and returns
 * the count; the strings are copied. */
typedef size_t (*sublet_stack_fn)(void *user, sublet_frame *out, size_t cap);
SUBLET_API void sublet_stack_source_set(sublet_allocator *a, sublet_stack_fn fn, void *user);

/* ---- the event callback: every trace event with its time and stack ---------
 * What a continuous log needs (sublet/log.h): the same events as the trace
 * callback, in the same order, plus the time the history would record and
 * the interned stack (non-zero only while recording captures stacks:
 * sublet_history_record with SUBLET_CONTEXT_ALLOC or more; a STATE context
 * gives malloc's stack too).  Costs one clock read per event while set. */
typedef struct sublet_event_record {
    sublet_action action;
    uint64_t addr, size;  /* as sublet_trace_fn's (oom: addr = device free) */
    sublet_stream stream;
    uint64_t time_us;     /* the trace clock (sublet_clock_set), microseconds */
    uint32_t stack;       /* interned stack (sublet_stack_frames), 0 = none */
} sublet_event_record;

/* Called with the allocator's lock held, for every event, in order; must not
 * call back into the allocator except sublet_stack_frames_locked. */
typedef void (*sublet_event_fn)(void *user, sublet_allocator *a, const sublet_event_record *ev);
/* One event callback per allocator (NULL removes it); beside the trace
 * callback, not instead of it.  After it returns, the previous callback is
 * no longer running nor will be called. */
SUBLET_API void sublet_event_set(sublet_allocator *a, sublet_event_fn fn, void *user);
/* sublet_stack_frames for an event callback (the lock is already held). */
SUBLET_API size_t sublet_stack_frames_locked(sublet_allocator *a, uint32_t stack,
                                             const sublet_frame **frames);

/* Replace the clock of trace entries (replay uses the trace's own times). */
typedef uint64_t (*sublet_clock_fn)(void *user);
SUBLET_API void sublet_clock_set(sublet_allocator *a, sublet_clock_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
