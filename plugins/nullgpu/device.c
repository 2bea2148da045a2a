/* sublet — the null device: the device itself (see nullgpu.h).
 *
 * Started on the first call of any of its APIs:
 *   SUBLET_NULLGPU_MEMORY   device memory (a size: "80GiB", "81559MiB";
 *                           default 81,559 MiB, an H100 80GB HBM3 as NVML
 *                           reports it)
 *   SUBLET_NULLGPU_NAME     the device's name (default "NVIDIA H100 80GB HBM3")
 *   SUBLET_NULLGPU_CC       compute capability "M.m" (default 9.0)
 *   SUBLET_NULLGPU_SMS      multiprocessors (default 132)
 *   SUBLET_NULLGPU_EVENT_POLLS  queries an event answers "not ready" after
 *                           each record (default 0: work is done at once)
 *   SUBLET_NULLGPU_FORCE=1  start even though a real CUDA driver is loaded
 *
 * Device memory is a host range reserved with no access (PROT_NONE,
 * MAP_NORESERVE: no resident memory; a host read or write of a device
 * address faults at once).  It is placed at 0x200000000000 (32 TiB, far
 * below the libraries and above a sanitizer's shadow) when that is free, so
 * that two runs of a program see the same addresses.  Its span is 256
 * times the memory, at least 1 TiB and at most 24 TiB: PyTorch's
 * expandable segments reserve 1.125 times the device's memory for each
 * stream of each pool, so a program with many private pools takes far more
 * address space than memory, as a GPU's driver allows.  Inside it sublet's
 * sim backend places segments and reservations and counts the bytes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nullgpu.h"
#include "sublet/config.h"

#define ND_BASE_HINT UINT64_C(0x200000000000)

static nd_device the_dev = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t once = PTHREAD_ONCE_INIT;

uint64_t nd_env_size(const char *var, uint64_t dflt)
{
    const char *v = getenv(var);
    uint64_t n;
    if (!v || !*v)
        return dflt;
    if (sublet_parse_size(v, &n) != SUBLET_OK || n == 0) {
        fprintf(stderr, "sublet nullgpu: %s='%s' is not a size (e.g. 80GiB); using %llu bytes\n",
                var, v, (unsigned long long)dflt);
        return dflt;
    }
    return n;
}

int nd_env_int(const char *var, int dflt)
{
    const char *v = getenv(var);
    char *end;
    long n;
    if (!v || !*v)
        return dflt;
    n = strtol(v, &end, 10);
    if (*end || n < 0 || n > 1000000) {
        fprintf(stderr, "sublet nullgpu: %s='%s' is not a count; using %d\n", var, v, dflt);
        return dflt;
    }
    return (int)n;
}

/* ---- a real driver in the process? --------------------------------------- */

typedef struct real_driver {
    ino_t self_ino;
    dev_t self_dev;
    char path[512];
} real_driver;

static int find_real_driver(struct dl_phdr_info *info, size_t size, void *user)
{
    real_driver *r = user;
    const char *name = info->dlpi_name, *base;
    struct stat st;
    (void)size;
    if (!name || !*name)
        return 0;
    base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libcuda.so", 10) != 0 && strncmp(base, "libnvidia-ml.so", 15) != 0)
        return 0;
    if (stat(name, &st) == 0 && st.st_ino == r->self_ino && st.st_dev == r->self_dev)
        return 0; /* a name of this library */
    snprintf(r->path, sizeof r->path, "%s", name);
    return 1;
}

/* The path of a real libcuda/libnvidia-ml loaded in this process, or "". */
static void real_driver_loaded(real_driver *r)
{
    Dl_info self;
    struct stat st;
    memset(r, 0, sizeof *r);
    if (dladdr((void *)&real_driver_loaded, &self) && self.dli_fname && stat(self.dli_fname, &st) == 0) {
        r->self_ino = st.st_ino;
        r->self_dev = st.st_dev;
    }
    dl_iterate_phdr(find_real_driver, r);
}

/* ---- start-up ------------------------------------------------------------- */

static void parse_cc(nd_device *d)
{
    const char *v = getenv("SUBLET_NULLGPU_CC");
    int major, minor;
    char tail;
    d->major = 9;
    d->minor = 0;
    if (!v || !*v)
        return;
    if (sscanf(v, "%d.%d%c", &major, &minor, &tail) != 2 || major < 1 || major > 99 || minor < 0 ||
        minor > 9) {
        fprintf(stderr, "sublet nullgpu: SUBLET_NULLGPU_CC='%s' is not a compute capability "
                        "(e.g. 9.0); using 9.0\n", v);
        return;
    }
    d->major = major;
    d->minor = minor;
}

static void start(void)
{
    nd_device *d = &the_dev;
    real_driver rd;
    const char *name = getenv("SUBLET_NULLGPU_NAME");
    void *p;
    real_driver_loaded(&rd);
    if (rd.path[0] && nd_env_int("SUBLET_NULLGPU_FORCE", 0) != 1) {
        fprintf(stderr, "sublet nullgpu: a real CUDA driver is loaded in this process (%s): the null "
                        "device refuses to answer beside it (set SUBLET_NULLGPU_FORCE=1 to use it anyway)\n",
                rd.path);
        _exit(70);
    }
    snprintf(d->name, sizeof d->name, "%s", name && *name ? name : "NVIDIA H100 80GB HBM3");
    parse_cc(d);
    d->sms = nd_env_int("SUBLET_NULLGPU_SMS", 132);
    if (d->sms < 1)
        d->sms = 1;
    d->total = nd_env_size("SUBLET_NULLGPU_MEMORY", UINT64_C(81559) << 20);
    d->event_polls = nd_env_int("SUBLET_NULLGPU_EVENT_POLLS", 0);
    d->span = d->total > (UINT64_C(24) << 40) / 256 ? UINT64_C(24) << 40 : d->total * 256;
    if (d->span < (UINT64_C(1) << 40))
        d->span = UINT64_C(1) << 40;
    p = mmap((void *)ND_BASE_HINT, d->span, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        p = mmap(NULL, d->span + ND_GRANULE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "sublet nullgpu: cannot reserve %llu bytes of address space for the device\n",
                (unsigned long long)d->span);
        return;
    }
    d->base = ((uint64_t)(uintptr_t)p + ND_GRANULE - 1) & ~(ND_GRANULE - 1);
    d->slots = calloc(ND_MAX_HANDLES, sizeof *d->slots);
    if (!d->slots || sublet_sim_create_at(d->total, d->base, &d->sim) != SUBLET_OK) {
        fprintf(stderr, "sublet nullgpu: out of host memory starting the device\n");
        return;
    }
    sl_rtree_init(&d->ranges, d->base, 1);
    sl_rtree_init(&d->maps, d->base, 1);
    d->next_capture_id = 1;
    d->ok = 1;
}

nd_device *nd_dev(void)
{
    pthread_once(&once, start);
    return &the_dev;
}

/* Refuse early: before the program's own code runs, not at its first CUDA call. */
__attribute__((constructor)) static void nd_early(void)
{
    real_driver rd;
    real_driver_loaded(&rd);
    if (rd.path[0])
        nd_dev();
}

void nd_lock(nd_device *d)
{
    pthread_mutex_lock(&d->lock);
}

void nd_unlock(nd_device *d)
{
    pthread_mutex_unlock(&d->lock);
}

/* ---- handles ---------------------------------------------------------------- */

uint64_t nd_handle_new(nd_device *d, nd_kind kind)
{
    for (size_t i = 0; i < ND_MAX_HANDLES; i++) {
        size_t s = (d->next_slot + i) % ND_MAX_HANDLES;
        if (d->slots[s].kind == 0) {
            memset(&d->slots[s], 0, sizeof d->slots[s]);
            d->slots[s].kind = (uint8_t)kind;
            d->next_slot = s + 1;
            return ((uint64_t)kind << 40) | ((uint64_t)(s + 1) << 4);
        }
    }
    return 0;
}

nd_slot *nd_handle_get(nd_device *d, uint64_t h, nd_kind kind)
{
    uint64_t s = ((h & ((UINT64_C(1) << 40) - 1)) >> 4);
    if ((h >> 40) != (uint64_t)kind || (h & 15) != 0 || s == 0 || s > ND_MAX_HANDLES)
        return NULL;
    return d->slots[s - 1].kind == (uint8_t)kind ? &d->slots[s - 1] : NULL;
}

void nd_handle_free(nd_device *d, uint64_t h)
{
    uint64_t s = ((h & ((UINT64_C(1) << 40) - 1)) >> 4);
    if (s >= 1 && s <= ND_MAX_HANDLES)
        d->slots[s - 1].kind = 0;
}

/* ---- memory ------------------------------------------------------------------ */

int nd_is_device(const nd_device *d, const void *p, size_t n)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    return d->ok && a >= d->base && a - d->base < d->span && n <= d->span - (a - d->base);
}

uint64_t nd_mem_used(nd_device *d)
{
    return sublet_sim_used(d->sim) + d->pending;
}

int nd_mem_alloc(nd_device *d, uint64_t size, uint64_t *addr)
{
    uint64_t r = (size + ND_GRANULE - 1) & ~(ND_GRANULE - 1), a;
    if (!d->ok || size == 0 || r < size)
        return 2;
    if (r > d->total || nd_mem_used(d) > d->total - r)
        return 2;
    if (!sl_rtree_reserve(&d->ranges))
        return 2;
    if (d->sim->ops->segment_alloc(d->sim, r, 0, &a) != SUBLET_OK)
        return 2;
    if (a + r > d->base + d->span) { /* the reserved range is full of reservations */
        d->sim->ops->segment_free(d->sim, a, r);
        return 2;
    }
    sl_rtree_insert(&d->ranges, a, r, ND_RANGE_SEGMENT);
    *addr = a;
    return 0;
}

int nd_mem_free(nd_device *d, uint64_t addr)
{
    const sl_rtree_entry *e = sl_rtree_find(&d->ranges, addr);
    uint64_t size;
    if (!e || e->tag != ND_RANGE_SEGMENT)
        return 1;
    size = e->size;
    sl_rtree_remove(&d->ranges, addr, size, ND_RANGE_SEGMENT);
    d->sim->ops->segment_free(d->sim, addr, size);
    return 0;
}

uint64_t nd_mem_range(nd_device *d, uint64_t addr, uint64_t *base)
{
    const sl_rtree_entry *e = sl_rtree_containing(&d->ranges, addr);
    if (!e)
        return 0;
    *base = e->addr;
    return e->size;
}

/* ---- capture rules ------------------------------------------------------------ */

static _Thread_local int thread_mode;      /* cudaStreamCaptureModeGlobal (0) */
static _Thread_local int thread_captures;  /* non-relaxed captures this thread began */
static _Thread_local int thread_global;    /* of them, in global mode */

int nd_thread_capture_mode(void)
{
    return thread_mode;
}

void nd_thread_capture_mode_set(int mode)
{
    thread_mode = mode;
}

void nd_thread_capture_count(int mode, int delta)
{
    if (mode == 2) /* relaxed */
        return;
    thread_captures += delta;
    if (mode == 0)
        thread_global += delta;
}

int nd_capture_forbids(nd_device *d)
{
    int forbid;
    if (thread_mode == 2)
        return 0;
    forbid = thread_captures > 0 || (thread_mode == 0 && d->global_captures > thread_global);
    if (!forbid)
        return 0;
    for (size_t i = 0; i < ND_MAX_HANDLES; i++) {
        nd_stream *s = &d->slots[i].u.stream;
        if (d->slots[i].kind == ND_STREAM && s->capture == ND_CAPTURE_ACTIVE && s->capture_mode != 2)
            s->capture = ND_CAPTURE_INVALIDATED;
    }
    return 1;
}

nd_stream *nd_capturing(nd_device *d, uint64_t stream)
{
    nd_slot *s = nd_handle_get(d, stream, ND_STREAM);
    return s && s->u.stream.capture != ND_CAPTURE_NONE ? &s->u.stream : NULL;
}

void nd_stream_work(nd_device *d, uint64_t stream)
{
    nd_stream *s = nd_capturing(d, stream);
    nd_slot *g;
    if (!s)
        return;
    g = nd_handle_get(d, s->graph, ND_GRAPH);
    if (g)
        g->u.graph.nodes++;
}

/* ---- what is not emulated ----------------------------------------------------- */

#define ND_SEEN_CAP 512

void nd_unsupported(const char *api, const char *name)
{
    static char seen[ND_SEEN_CAP][96];
    static size_t nseen;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int first = 1;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nseen; i++)
        if (strncmp(seen[i], name, sizeof seen[i] - 1) == 0)
            first = 0;
    if (first && nseen < ND_SEEN_CAP)
        snprintf(seen[nseen++], sizeof seen[0], "%s", name);
    pthread_mutex_unlock(&mu);
    if (first)
        fprintf(stderr, "sublet nullgpu: %s call %s is not emulated by the null device: "
                        "it returns an error\n", api, name);
}
