/* sublet — backend interface.
 *
 * A backend is the narrow door between the engine and a device: segment
 * alloc/free, events on streams, memory info, and (for expandable segments
 * and policy:stitch) virtual reserve/map/unmap and the alias map.  Every
 * call returns a sublet_status; the engine never assumes a call succeeded.
 * Backends: sim (address space only), host (real memory), cuda (driver API),
 * and a fault-injection wrapper.
 */
#ifndef SUBLET_BACKEND_H
#define SUBLET_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/api.h"
#include "sublet/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t sublet_stream; /* cudaStream_t as an integer; 0 = default */
typedef struct sublet_event sublet_event; /* opaque, owned by the backend */

typedef struct sublet_backend sublet_backend;

typedef struct sublet_backend_ops {
    /* Allocate `size` bytes of device memory.  `hint` is an address the
     * caller would like (0 = any); a backend may ignore it.  On failure for
     * lack of memory return SUBLET_ERR_DEVICE_OOM. */
    sublet_status (*segment_alloc)(sublet_backend *b, uint64_t size, uint64_t hint,
                                   uint64_t *addr_out);
    sublet_status (*segment_free)(sublet_backend *b, uint64_t addr, uint64_t size);

    sublet_status (*event_create)(sublet_backend *b, sublet_event **ev_out);
    sublet_status (*event_destroy)(sublet_backend *b, sublet_event *ev);
    sublet_status (*event_record)(sublet_backend *b, sublet_event *ev, sublet_stream stream);
    /* *done_out = 1 when all work before the record has completed. */
    sublet_status (*event_query)(sublet_backend *b, sublet_event *ev, int *done_out);
    sublet_status (*event_synchronize)(sublet_backend *b, sublet_event *ev);
    /* Optional (NULL: the engine queries every time).  A count that changes
     * whenever an event recorded earlier may have become complete (a stream
     * ran, an event was synchronised) and whenever an event is recorded that
     * is complete at once.  While it has not changed, the engine does not
     * query again the events it last found incomplete. */
    uint64_t (*event_epoch)(sublet_backend *b);
    /* Optional, with event_epoch (NULL: after a change of the epoch the
     * engine queries the head of every stream's queue).  Returns the epoch
     * now and the streams on which an event may have become complete between
     * epoch `since` and it (an event recorded complete at once included):
     * out[0, *n), at most cap of them, repeats allowed; *n = SIZE_MAX when
     * the backend cannot tell (`since` is too old, more than cap streams,
     * every stream at once).  The engine then queries only those streams'
     * events. */
    uint64_t (*event_completions)(sublet_backend *b, uint64_t since, sublet_stream *out,
                                  size_t cap, size_t *n);

    /* Device memory as the driver sees it (cudaMemGetInfo). */
    sublet_status (*mem_info)(sublet_backend *b, uint64_t *free_out, uint64_t *total_out);

    /* Virtual memory (expandable segments).  May be NULL: the backend then
     * has no VMM support and expandable segments are refused. */
    sublet_status (*va_reserve)(sublet_backend *b, uint64_t size, uint64_t align,
                                uint64_t *addr_out);
    sublet_status (*va_release)(sublet_backend *b, uint64_t addr, uint64_t size);
    sublet_status (*va_map)(sublet_backend *b, uint64_t addr, uint64_t size);
    sublet_status (*va_unmap)(sublet_backend *b, uint64_t addr, uint64_t size);
    /* Map the physical memory now mapped at [src, src+size) a second time,
     * at [dst, dst+size) (inside one reservation, unmapped; alignment as
     * for va_map): both views then reach the same bytes.  No new memory is
     * taken; the memory is freed when its last mapping is unmapped
     * (va_unmap of either view).  May be NULL even when the other VMM ops
     * are not: policy:stitch then maps only fresh pages. */
    sublet_status (*va_map_alias)(sublet_backend *b, uint64_t dst, uint64_t src, uint64_t size);

    /* Device memory this process uses according to the driver (the
     * per-process figure of nvidia-smi: every allocation of the process,
     * this allocator's among them, and its context).  May be NULL, or
     * return SUBLET_ERR_UNSUPPORTED when the backend cannot tell. */
    sublet_status (*process_mem)(sublet_backend *b, uint64_t *used_out);

    /* Destroy the backend (and, for wrappers, not the inner one). */
    void (*destroy)(sublet_backend *b);
} sublet_backend_ops;

struct sublet_backend {
    const sublet_backend_ops *ops;
    const char *name; /* "sim", "host", "fault", "cuda" */
    int device;       /* device index reported in messages */
};

/* ---- sim: a simulated device, address space only ------------------------ */
/* Capacity in bytes (e.g. from sublet_parse_size("80GiB")).  Addresses are
 * deterministic: the same sequence of calls gives the same addresses.  A hint
 * is honoured when the range is free.  Events complete only when the test
 * says so: sublet_sim_stream_complete() or event_synchronize. */
SUBLET_API sublet_status sublet_sim_create(uint64_t capacity, sublet_backend **out);
/* The same with placements first fit from `base` (a multiple of 2 MiB, not
 * 0) instead of 0x7f0000000000: the null device (plugins/nullgpu) puts its
 * addresses inside a host range it has reserved. */
SUBLET_API sublet_status sublet_sim_create_at(uint64_t capacity, uint64_t base,
                                              sublet_backend **out);
/* Complete every event recorded so far on `stream`. */
SUBLET_API void sublet_sim_stream_complete(sublet_backend *sim, sublet_stream stream);
/* Complete every event recorded so far on every stream. */
SUBLET_API void sublet_sim_complete_all(sublet_backend *sim);
/* Bytes of device memory in use: segments plus the physical bytes behind
 * mapped ranges, each counted once however many mappings reach it (an
 * alias adds none).  And the live segment count. */
SUBLET_API uint64_t sublet_sim_used(const sublet_backend *sim);
SUBLET_API uint64_t sublet_sim_segments(const sublet_backend *sim);
/* What the device's capacity has decided so far, since creation: the most
 * memory in use at once (the peak of sublet_sim_used: every allocation and
 * map that succeeded would on any device at least that large), how many
 * times the capacity was read (mem_info calls: the allocator's decisions
 * that read it depend on it), and how many allocations and maps it refused
 * (each might succeed on a larger device). */
SUBLET_API void sublet_sim_capacity_use(const sublet_backend *sim, uint64_t *peak_used,
                                        uint64_t *info_calls, uint64_t *refusals);
/* Ask that the next segment_alloc without a hint of its own, or the next
 * va_reserve, be placed at `addr` when that range is free (replay places
 * segments, and expandable segments' reservations, where a trace recorded
 * them); the request is dropped after that call.  0 clears it.  The hint
 * is not aligned: the caller passes an address the trace recorded. */
SUBLET_API void sublet_sim_next_hint(sublet_backend *sim, uint64_t addr);
/* Successful device calls by kind, since creation (the cost of a policy). */
typedef struct sublet_sim_ops {
    uint64_t segment_allocs, segment_frees; /* cudaMalloc / cudaFree */
    uint64_t va_reserves, va_releases;      /* cuMemAddressReserve / Free */
    uint64_t va_maps, va_unmaps;            /* map / unmap calls (aliases included) */
    uint64_t va_aliases;                    /* of the maps: va_map_alias calls */
} sublet_sim_ops;
SUBLET_API void sublet_sim_ops_read(const sublet_backend *sim, sublet_sim_ops *out);
/* Change capacity (e.g. to model other processes taking memory). */
SUBLET_API void sublet_sim_set_capacity(sublet_backend *sim, uint64_t capacity);

/* ---- host: real host memory, for sanitizers ----------------------------- */
/* Segments are aligned_alloc'd; capacity bounds the total held.  Virtual
 * memory reserves address space; mapped pages are pages of one memfd, so
 * va_map_alias is real aliasing (a write through one view is read through
 * the other); see src/backend_host.c.  Events are always complete (the host
 * has no asynchronous streams). */
SUBLET_API sublet_status sublet_host_create(uint64_t capacity, sublet_backend **out);

/* ---- fault injection wrapper -------------------------------------------- */
typedef enum sublet_fault_op {
    SUBLET_FAULT_SEGMENT_ALLOC = 0,
    SUBLET_FAULT_EVENT_CREATE = 1,
    SUBLET_FAULT_VA_MAP = 2,
    SUBLET_FAULT_VA_MAP_ALIAS = 3,
    SUBLET_FAULT_OP_COUNT = 4
} sublet_fault_op;
/* Wraps `inner` (not owned).  With no rule set, every call passes through. */
SUBLET_API sublet_status sublet_fault_create(sublet_backend *inner, sublet_backend **out);
/* Fail the nth call (1-based) of `op`; 0 clears.  Counts restart at 0. */
SUBLET_API void sublet_fault_fail_nth(sublet_backend *fault, sublet_fault_op op, uint64_t nth);
/* Fail every nth call (n, 2n, 3n, ...) of `op`; 0 clears. */
SUBLET_API void sublet_fault_fail_every(sublet_backend *fault, sublet_fault_op op, uint64_t every);
/* Number of calls of `op` seen and failures injected so far. */
SUBLET_API uint64_t sublet_fault_calls(const sublet_backend *fault, sublet_fault_op op);
SUBLET_API uint64_t sublet_fault_injected(const sublet_backend *fault, sublet_fault_op op);

SUBLET_API void sublet_backend_destroy(sublet_backend *b);

#ifdef __cplusplus
}
#endif
#endif
