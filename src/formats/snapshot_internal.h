/* sublet — what snapshot.c shares with trace_write.c (internal): the
 * snapshot object and the builder of PyTorch's _snapshot() dict. */
#ifndef SUBLET_SNAPSHOT_INTERNAL_H
#define SUBLET_SNAPSHOT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/errmsg.h"
#include "formats/pyval.h"
#include "sublet/history.h"
#include "sublet/snapshot.h"

struct sublet_snapshot {
    pv_arena *arena;
    pyval *root;           /* dict (the _snapshot() form) or list (segments only) */
    const pyval *segments; /* list, or NULL when the snapshot has none */
    const pyval *traces;   /* device_traces list, or NULL */
    sublet_trace_format fmt;
};

/* Keys, shared str nodes (the pickle memoizes them once). */
enum {
    K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_ALLOCATED_SIZE, K_ACTIVE_SIZE, K_REQUESTED_SIZE,
    K_STREAM, K_SEGMENT_TYPE, K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_FRAMES, K_BLOCKS, K_SIZE,
    K_STATE, K_ACTION, K_ADDR, K_DEVICE_FREE, K_TIME_US, K_COMPILE_CONTEXT, K_USER_METADATA,
    K_FILENAME, K_LINE, K_NAME, K_POOL_ID, K_COUNT
};

typedef struct snap_pend {
    pyval *dict;
    uint32_t stack;
} snap_pend;

/* The builder.  Any failed allocation sets `fail`; the helpers then do
 * nothing more, and the caller frees the arena. */
typedef struct snap_bld {
    pv_arena *ar;
    sublet_allocator *a;   /* stacks from the allocator, or */
    const sublet_trace *t; /* from a trace (sublet_snapshot_from_trace) */
    int64_t device;
    pyval *k[K_COUNT];
    pyval *act[SUBLET_ACT_COUNT];
    pyval *state[3]; /* by sublet_block_state */
    pyval *small, *large, *na, *empty_str, *pool_id, *no_frames;
    pyval **frames; /* by stack id, built on first use (free() it) */
    size_t frames_cap;
    snap_pend *pend; /* frames to add once the segment walk released the lock */
    size_t npend, pend_cap;
    pyval *segs; /* the segments list */
    bool fail;
} snap_bld;

/* Shared nodes and the segments list (false when out of memory). */
bool snap_bld_init(snap_bld *b);
pyval *snap_u(snap_bld *b, uint64_t v);
pyval *snap_new_dict(snap_bld *b);
/* d[key] = v (a NULL v marks the failure). */
void snap_set(snap_bld *b, pyval *d, int key, pyval *v);
/* A segment_pool_id tuple: the shared (0, 0) for the default pools, else a
 * new (first, second). */
pyval *snap_pool_id(snap_bld *b, const uint64_t id[2]);
/* The frames list of stack `id` from the allocator or the trace (the shared
 * [] for 0).  With an allocator it takes the allocator's lock. */
pyval *snap_frames_of(snap_bld *b, uint32_t id);
/* One device_traces entry. */
pyval *snap_trace_entry(snap_bld *b, const sublet_trace_entry *e);
/* The top-level dict around segments (b->segs) and traces, with the
 * allocator_settings of st, stored into s (false when out of memory). */
bool snap_assemble(snap_bld *b, sublet_snapshot *s, pyval *traces, const sublet_settings *st);

#endif
