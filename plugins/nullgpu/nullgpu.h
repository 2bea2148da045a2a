/* sublet — the null device (libsublet_nullgpu.so): what its parts share.
 *
 * One process-wide device, made once (nd_dev()): properties from the
 * environment, its memory a host address range reserved inaccessible, and
 * an address space over it that is sublet's own sim backend (segments for
 * cudaMalloc, reservations and mappings for the virtual-memory calls, the
 * physical bytes counted against the device's memory).  Handles (streams,
 * events, graphs, graph executions, physical allocations, user objects) are
 * numbers in a table, never host pointers, so that two runs of one program
 * see the same values.  The runtime (runtime.c, launch.c, graphs.c), the
 * driver (driver.c) and NVML (nvml.c) are three faces of that one device,
 * cuBLAS and cuBLASLt (blas.c, blas_calls.c, blaslt.c) a fourth; stubs.c
 * and blas_stubs.c answer every other call of these APIs with an error
 * naming it.  One mutex guards the state; the calls are short. */
#ifndef SUBLET_NULLGPU_H
#define SUBLET_NULLGPU_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rtree.h"
#include "sublet/backend.h"

#define ND_GRANULE (UINT64_C(2) << 20) /* cudaMalloc's and VMM's page */
#define ND_MAX_HANDLES 65536          /* live handles of all kinds */

/* A handle's kind, in bits 40..47 of its value (values are kind << 40 | 16 * slot). */
typedef enum nd_kind {
    ND_STREAM = 0x51,
    ND_EVENT = 0x52,
    ND_GRAPH = 0x53,
    ND_EXEC = 0x54,
    ND_PHYS = 0x55,
    ND_UOBJ = 0x56,
    ND_NODE = 0x57,
    ND_FUNC = 0x58,
    ND_BLAS = 0x59,      /* a cuBLAS handle (also a cuBLASLt handle) */
    ND_LT_MATMUL = 0x5a, /* a cuBLASLt matmul descriptor */
    ND_LT_LAYOUT = 0x5b, /* a cuBLASLt matrix layout */
    ND_LT_PREF = 0x5c,   /* a cuBLASLt matmul preference */
} nd_kind;

enum { ND_RANGE_SEGMENT = 1, ND_RANGE_VA = 2 };

/* Capture state of a stream (cudaStreamCaptureStatus's values). */
enum { ND_CAPTURE_NONE = 0, ND_CAPTURE_ACTIVE = 1, ND_CAPTURE_INVALIDATED = 2 };

typedef struct nd_stream {
    int priority;
    unsigned flags;
    int capture;                  /* ND_CAPTURE_* */
    int capture_mode;             /* cudaStreamCaptureMode of the capture */
    unsigned long long capture_id;
    uint64_t graph;               /* the graph being captured into (a handle) */
    pthread_t capture_thread;     /* for thread-local captures */
} nd_stream;

typedef struct nd_event {
    unsigned flags;
    int recorded;     /* recorded at least once (outside a capture) */
    int polls_left;   /* queries still answering NOT_READY */
    int in_capture;   /* recorded into a capture: may not be queried */
    uint64_t capture_stream; /* the capturing stream it was recorded on */
} nd_event;

#define ND_GRAPH_UOBJS 16

typedef struct nd_graph {
    size_t nodes;     /* launches and other work captured */
    int nuobj;        /* user objects it holds references to */
    uint64_t uobj[ND_GRAPH_UOBJS];
    unsigned uobj_refs[ND_GRAPH_UOBJS];
} nd_graph;

typedef struct nd_exec {
    int nuobj;        /* its graph's user objects, one reference each */
    uint64_t uobj[ND_GRAPH_UOBJS];
} nd_exec;

typedef struct nd_phys {
    uint64_t size;
    int refs;         /* cuMemCreate's, plus cuMemRetainAllocationHandle's */
    uint64_t mapped;  /* its virtual address while mapped, else 0 */
} nd_phys;

typedef struct nd_uobj {
    void *ptr;
    void (*destroy)(void *);
    int refs;
} nd_uobj;

/* A cuBLAS handle's settings (blas.c). */
typedef struct nd_blas {
    uint64_t stream;          /* cublasSetStream's (0: the legacy default stream) */
    uint64_t workspace;       /* cublasSetWorkspace's, 0 when none */
    uint64_t workspace_size;
    int math_mode, pointer_mode, atomics_mode, sm_count;
} nd_blas;

/* A cuBLASLt descriptor (matmul, layout or preference): its attributes by
 * number, each kept in 8 bytes (blaslt.c). */
#define ND_LT_ATTRS 40
typedef struct nd_lt {
    uint64_t attr[ND_LT_ATTRS];
} nd_lt;

typedef struct nd_slot {
    uint8_t kind; /* 0: free */
    union {
        nd_stream stream;
        nd_event event;
        nd_graph graph;
        nd_exec exec;
        nd_phys phys;
        nd_uobj uobj;
        nd_blas blas;
        nd_lt lt;
    } u;
} nd_slot;

typedef struct nd_device {
    pthread_mutex_t lock;
    int ok;                 /* 0: refused to start (message given) */
    char name[256];
    int major, minor, sms;
    uint64_t total;         /* device memory, bytes */
    uint64_t base, span;    /* the reserved host range holding device addresses */
    uint64_t pending;       /* bytes of physical allocations not mapped */
    int event_polls;        /* SUBLET_NULLGPU_EVENT_POLLS: NOT_READY answers per record */
    sublet_backend *sim;    /* the address space */
    sl_rtree ranges;        /* cudaMalloc segments (tag ND_RANGE_SEGMENT), reservations (ND_RANGE_VA) */
    sl_rtree maps;          /* mapped physical allocations: tag = the handle */
    nd_slot *slots;         /* ND_MAX_HANDLES */
    size_t next_slot;
    unsigned long long next_capture_id;
    int global_captures;    /* captures in cudaStreamCaptureModeGlobal */
} nd_device;

/* The device, started on first use (thread-safe); never NULL. */
nd_device *nd_dev(void);
void nd_lock(nd_device *d);
void nd_unlock(nd_device *d);

/* Handles (under the lock). */
uint64_t nd_handle_new(nd_device *d, nd_kind kind);    /* 0 when full */
nd_slot *nd_handle_get(nd_device *d, uint64_t h, nd_kind kind); /* NULL: not live */
void nd_handle_free(nd_device *d, uint64_t h);

/* Device addresses: 1 when [p, p+n) lies in the device's range. */
int nd_is_device(const nd_device *d, const void *p, size_t n);

/* Memory (under the lock): cudaMalloc/cudaFree and cuMemCreate's accounting.
 * Return 0, or 2 for out of memory, 1 for an invalid address. */
int nd_mem_alloc(nd_device *d, uint64_t size, uint64_t *addr);
int nd_mem_free(nd_device *d, uint64_t addr);
uint64_t nd_mem_used(nd_device *d); /* segments + mapped + pending physical */
/* The size of the cudaMalloc'd segment containing addr: base and size (0 when none). */
uint64_t nd_mem_range(nd_device *d, uint64_t addr, uint64_t *base);

/* Capture rules: the calling thread's cudaStreamCaptureMode. */
int nd_thread_capture_mode(void);
void nd_thread_capture_mode_set(int mode);
/* An "unsafe" call (cudaMalloc, cudaFree, synchronisation, event queries)
 * while a capture forbids it: 1 (and every such capture is invalidated). */
int nd_capture_forbids(nd_device *d);
/* The stream's capture when it is capturing (NULL otherwise), under the lock. */
nd_stream *nd_capturing(nd_device *d, uint64_t stream);
/* This thread began (+1) or ended (-1) a capture in `mode`. */
void nd_thread_capture_count(int mode, int delta);
/* cudaStreamWaitEvent on an event recorded in a capture: the stream joins
 * that capture (a fork); under the lock. */
void nd_capture_join(nd_device *d, uint64_t stream, uint64_t event);
/* Work put on a stream: counted as a node when it is capturing. */
void nd_stream_work(nd_device *d, uint64_t stream);

/* A call the null device does not emulate: its name on stderr once per
 * name, and the caller returns the API's "not supported" code. */
void nd_unsupported(const char *api, const char *name);

/* The runtime's and the driver's lookup of driver entry points: the
 * function for `name` (base name, no _vN), NULL when the driver has none. */
void *nd_driver_symbol(const char *name, int version);

/* The runtime's sticky last error: records e when it is an error, returns e. */
int nd_rt_fail(int e);

/* Options from the environment. */
uint64_t nd_env_size(const char *var, uint64_t dflt);
int nd_env_int(const char *var, int dflt);

#endif
