/* sublet — the `host` backend: real host memory, so that tests can write into
 * blocks and the sanitizers see misuse.
 *
 * Segments come from aligned_alloc (HOST_ALIGN-aligned, the size rounded up
 * to a multiple of it as C11 and ASan require); the hint is ignored.  Live
 * segments are kept in an array sorted by address so that a free of an
 * unknown (addr, size) is refused with SUBLET_ERR_INVALID_ARGUMENT instead of
 * reaching free().  `capacity` bounds the bytes held (segments plus mapped
 * VA, counted at their requested sizes); beyond it, or when aligned_alloc
 * itself fails, segment_alloc answers SUBLET_ERR_DEVICE_OOM.
 *
 * Events are real heap objects (so a leaked event shows up under ASan) but
 * are always complete: the host has no asynchronous streams.
 *
 * Virtual memory (expandable segments, policy:stitch) is implemented with
 * mmap where the platform has anonymous mappings: va_reserve maps PROT_NONE
 * address space, va_map makes pages readable and writable (zero-filled,
 * counted toward capacity), va_unmap replaces them with fresh PROT_NONE
 * pages (so a stale access faults), va_release munmaps the reservation.
 * map/unmap addresses and sizes must be multiples of the page size.  Where
 * anonymous mmap is unavailable the VMM ops are NULL.
 *
 * Physical memory.  On Linux the mapped pages are pages of one memfd (the
 * "device memory"), mapped MAP_SHARED at their virtual addresses, and a page
 * table (src/vmem.c) records which file range each mapped range shows, with
 * reference counts.  va_map takes a free file range (first fit);
 * va_map_alias maps the file range behind a mapped range a second time, so
 * that a write through one view is read through the other (real aliasing,
 * as cuMemMap of a retained handle gives); a file range no view maps any
 * more is punched out of the file (fallocate), which frees its memory and
 * makes it read as zeros when taken again.  Capacity counts file bytes in
 * use, each once.  Without memfd (or if it cannot be made) va_map makes the
 * reserved pages themselves accessible (mprotect) and va_map_alias answers
 * SUBLET_ERR_UNSUPPORTED.
 *
 * One mutex guards the bookkeeping. */
#define _GNU_SOURCE 1 /* MAP_ANONYMOUS, MAP_NORESERVE, memfd_create, fallocate */

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sublet/backend.h"
#include "backends/vmem.h"

#if defined(__linux__) && defined(MFD_CLOEXEC) && defined(FALLOC_FL_PUNCH_HOLE)
#define HOST_HAVE_MEMFD 1
#else
#define HOST_HAVE_MEMFD 0
#endif

#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif
#if defined(MAP_ANONYMOUS)
#define HOST_HAVE_VMM 1
#else
#define HOST_HAVE_VMM 0
#endif
#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

#define HOST_ALIGN UINT64_C(512)
#define HOST_EVENT_MAGIC UINT64_C(0x686f73744576656e) /* "hostEven" */

typedef struct host_range {
    uint64_t addr;
    uint64_t size;
} host_range;

typedef struct host_range_vec {
    host_range *v;
    size_t n;
    size_t cap;
} host_range_vec;

typedef struct host_backend {
    sublet_backend base; /* first: the engine casts */
    pthread_mutex_t lock;
    uint64_t capacity;
    uint64_t seg_held; /* segment bytes */
    uint64_t live_events;
    uint64_t page; /* host page size */
    host_range_vec segments;     /* sorted by addr */
    host_range_vec reservations; /* sorted by addr */
    sl_vmem vm;                  /* mapped ranges -> file ranges of `fd` */
    int fd;                      /* the memfd behind mapped pages; -1: none */
    uint64_t file_size;          /* its size (it only grows; holes are punched) */
} host_backend;

struct sublet_event {
    uint64_t magic;
    const host_backend *owner;
};

static const sublet_backend_ops host_ops;

/* ---- sorted range arrays --------------------------------------------------- */

static size_t hv_lower(const host_range_vec *hv, uint64_t x)
{
    size_t lo = 0, hi = hv->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hv->v[mid].addr < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t hv_find(const host_range_vec *hv, uint64_t a)
{
    size_t i = hv_lower(hv, a);
    return (i < hv->n && hv->v[i].addr == a) ? i : SIZE_MAX;
}

/* Index of the range containing a, or SIZE_MAX. */
static size_t hv_containing(const host_range_vec *hv, uint64_t a)
{
    size_t i = hv_lower(hv, a);
    if (i < hv->n && hv->v[i].addr == a)
        return i;
    if (i == 0 || hv->v[i - 1].addr + hv->v[i - 1].size <= a)
        return SIZE_MAX;
    return i - 1;
}

static sublet_status hv_reserve(host_range_vec *hv, size_t extra)
{
    if (hv->n + extra <= hv->cap)
        return SUBLET_OK;
    size_t cap = hv->cap ? hv->cap : 16;
    while (cap < hv->n + extra)
        cap *= 2;
    host_range *v = realloc(hv->v, cap * sizeof *v);
    if (!v)
        return SUBLET_ERR_NO_MEMORY;
    hv->v = v;
    hv->cap = cap;
    return SUBLET_OK;
}

static sublet_status hv_insert_at(host_range_vec *hv, size_t i, uint64_t addr, uint64_t size)
{
    sublet_status st = hv_reserve(hv, 1);
    if (st != SUBLET_OK)
        return st;
    memmove(&hv->v[i + 1], &hv->v[i], (hv->n - i) * sizeof hv->v[0]);
    hv->v[i].addr = addr;
    hv->v[i].size = size;
    hv->n++;
    return SUBLET_OK;
}

static void hv_remove_span(host_range_vec *hv, size_t i, size_t count)
{
    memmove(&hv->v[i], &hv->v[i + count], (hv->n - i - count) * sizeof hv->v[0]);
    hv->n -= count;
}

/* ---- helpers ------------------------------------------------------------------ */

static host_backend *as_host(sublet_backend *b)
{
    return (b && b->ops == &host_ops) ? (host_backend *)b : NULL;
}

static uint64_t held_bytes(const host_backend *h)
{
    return h->seg_held + h->vm.bytes;
}

static int fits_capacity(const host_backend *h, uint64_t size)
{
    uint64_t held = held_bytes(h);
    return size <= h->capacity && held <= h->capacity - size;
}

static int event_ok(const host_backend *h, const sublet_event *ev)
{
    return ev && ev->magic == HOST_EVENT_MAGIC && ev->owner == h;
}

/* ---- segments ------------------------------------------------------------------ */

static sublet_status host_segment_alloc(sublet_backend *b, uint64_t size, uint64_t hint,
                                        uint64_t *addr_out)
{
    (void)hint;
    host_backend *h = as_host(b);
    if (!h || !addr_out || size == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    const uint64_t rounded = (size + HOST_ALIGN - 1) & ~(HOST_ALIGN - 1);
    if (rounded < size || rounded > SIZE_MAX)
        return SUBLET_ERR_DEVICE_OOM;
    sublet_status st = SUBLET_OK;
    pthread_mutex_lock(&h->lock);
    if (!fits_capacity(h, size)) {
        st = SUBLET_ERR_DEVICE_OOM;
        goto out;
    }
    /* Room in the table first, so nothing needs undoing after the alloc. */
    st = hv_reserve(&h->segments, 1);
    if (st != SUBLET_OK)
        goto out;
    void *p = aligned_alloc((size_t)HOST_ALIGN, (size_t)rounded);
    if (!p) {
        st = SUBLET_ERR_DEVICE_OOM;
        goto out;
    }
    const uint64_t addr = (uint64_t)(uintptr_t)p;
    (void)hv_insert_at(&h->segments, hv_lower(&h->segments, addr), addr, size);
    h->seg_held += size;
    *addr_out = addr;
out:
    pthread_mutex_unlock(&h->lock);
    return st;
}

static sublet_status host_segment_free(sublet_backend *b, uint64_t addr, uint64_t size)
{
    host_backend *h = as_host(b);
    if (!h)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    void *p = NULL;
    pthread_mutex_lock(&h->lock);
    size_t i = hv_find(&h->segments, addr);
    if (i != SIZE_MAX && h->segments.v[i].size == size) {
        hv_remove_span(&h->segments, i, 1);
        h->seg_held -= size;
        p = (void *)(uintptr_t)addr;
        st = SUBLET_OK;
    }
    pthread_mutex_unlock(&h->lock);
    free(p);
    return st;
}

/* ---- events -------------------------------------------------------------------- */

static sublet_status host_event_create(sublet_backend *b, sublet_event **ev_out)
{
    host_backend *h = as_host(b);
    if (!h || !ev_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return SUBLET_ERR_NO_MEMORY;
    ev->magic = HOST_EVENT_MAGIC;
    ev->owner = h;
    pthread_mutex_lock(&h->lock);
    h->live_events++;
    pthread_mutex_unlock(&h->lock);
    *ev_out = ev;
    return SUBLET_OK;
}

static sublet_status host_event_destroy(sublet_backend *b, sublet_event *ev)
{
    host_backend *h = as_host(b);
    if (!h || !event_ok(h, ev))
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&h->lock);
    h->live_events--;
    pthread_mutex_unlock(&h->lock);
    ev->magic = 0;
    free(ev);
    return SUBLET_OK;
}

static sublet_status host_event_record(sublet_backend *b, sublet_event *ev, sublet_stream stream)
{
    (void)stream;
    host_backend *h = as_host(b);
    return (h && event_ok(h, ev)) ? SUBLET_OK : SUBLET_ERR_INVALID_ARGUMENT;
}

static sublet_status host_event_query(sublet_backend *b, sublet_event *ev, int *done_out)
{
    host_backend *h = as_host(b);
    if (!h || !event_ok(h, ev) || !done_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    *done_out = 1;
    return SUBLET_OK;
}

static sublet_status host_event_synchronize(sublet_backend *b, sublet_event *ev)
{
    host_backend *h = as_host(b);
    return (h && event_ok(h, ev)) ? SUBLET_OK : SUBLET_ERR_INVALID_ARGUMENT;
}

/* ---- memory info ------------------------------------------------------------------ */

static sublet_status host_mem_info(sublet_backend *b, uint64_t *free_out, uint64_t *total_out)
{
    host_backend *h = as_host(b);
    if (!h || !free_out || !total_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&h->lock);
    uint64_t held = held_bytes(h);
    *free_out = held < h->capacity ? h->capacity - held : 0;
    *total_out = h->capacity;
    pthread_mutex_unlock(&h->lock);
    return SUBLET_OK;
}

/* Everything the host backend holds is this process's. */
static sublet_status host_process_mem(sublet_backend *b, uint64_t *used_out)
{
    host_backend *h = as_host(b);
    if (!h || !used_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&h->lock);
    *used_out = held_bytes(h);
    pthread_mutex_unlock(&h->lock);
    return SUBLET_OK;
}

/* ---- virtual memory --------------------------------------------------------------- */

#if HOST_HAVE_VMM

static int page_aligned(const host_backend *h, uint64_t x)
{
    return (x & (h->page - 1)) == 0;
}

static sublet_status host_va_reserve(sublet_backend *b, uint64_t size, uint64_t align,
                                     uint64_t *addr_out)
{
    host_backend *h = as_host(b);
    if (!h || !addr_out || size == 0 || (align & (align - 1)) != 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (align < h->page)
        align = h->page;
    const uint64_t len = (size + h->page - 1) & ~(h->page - 1);
    const uint64_t total = len + (align - h->page);
    if (len < size || total < len || total > SIZE_MAX)
        return SUBLET_ERR_DEVICE_OOM;
    void *p = mmap(NULL, (size_t)total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return SUBLET_ERR_DEVICE_OOM;
    /* Trim to an `align`-aligned run of `len` bytes. */
    const uint64_t start = (uint64_t)(uintptr_t)p;
    const uint64_t addr = (start + align - 1) & ~(align - 1);
    if (addr > start)
        munmap(p, (size_t)(addr - start));
    if (start + total > addr + len)
        munmap((void *)(uintptr_t)(addr + len), (size_t)(start + total - (addr + len)));
    pthread_mutex_lock(&h->lock);
    sublet_status st = hv_insert_at(&h->reservations, hv_lower(&h->reservations, addr), addr, size);
    pthread_mutex_unlock(&h->lock);
    if (st != SUBLET_OK) {
        munmap((void *)(uintptr_t)addr, (size_t)len);
        return st;
    }
    *addr_out = addr;
    return SUBLET_OK;
}

static sublet_status host_va_release(sublet_backend *b, uint64_t addr, uint64_t size)
{
    host_backend *h = as_host(b);
    if (!h)
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&h->lock);
    size_t i = hv_find(&h->reservations, addr);
    if (i != SIZE_MAX && h->reservations.v[i].size == size) {
        if (sl_vmem_overlaps(&h->vm, addr, size)) {
            st = SUBLET_ERR_BUSY;
        } else {
            hv_remove_span(&h->reservations, i, 1);
            const uint64_t len = (size + h->page - 1) & ~(h->page - 1);
            st = munmap((void *)(uintptr_t)addr, (size_t)len) == 0 ? SUBLET_OK : SUBLET_ERR_BACKEND;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return st;
}

/* Is [addr, addr+size) inside one reservation?  Lock held. */
static int in_reservation(const host_backend *h, uint64_t addr, uint64_t size)
{
    size_t r = hv_containing(&h->reservations, addr);
    return r != SIZE_MAX && h->reservations.v[r].addr + h->reservations.v[r].size >= addr + size;
}

/* Make [addr, addr+size) inaccessible again (a fresh PROT_NONE mapping). */
static int drop_view(uint64_t addr, uint64_t size)
{
    void *p = mmap((void *)(uintptr_t)addr, (size_t)size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? -1 : 0;
}

/* A file range no view maps any more: give its memory back. */
static void punch(void *user, uint64_t va, uint64_t len, uint64_t pa)
{
    (void)va;
#if HOST_HAVE_MEMFD
    host_backend *h = user;
    if (h->fd >= 0)
        (void)fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)pa, (off_t)len);
#else
    (void)user;
    (void)pa;
    (void)len;
#endif
}

/* Show file range [pa, pa+len) at va, read-write.  Lock held. */
static int show(host_backend *h, uint64_t va, uint64_t len, uint64_t pa)
{
    void *p = mmap((void *)(uintptr_t)va, (size_t)len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, h->fd, (off_t)pa);
    return p == MAP_FAILED ? -1 : 0;
}

typedef struct show_ctx {
    host_backend *h;
    int failed;
} show_ctx;

static void show_piece(void *user, uint64_t va, uint64_t len, uint64_t pa)
{
    show_ctx *c = user;
    if (!c->failed && show(c->h, va, len, pa) != 0)
        c->failed = 1;
}

static sublet_status host_va_map(sublet_backend *b, uint64_t addr, uint64_t size)
{
    host_backend *h = as_host(b);
    if (!h || size == 0 || addr + size < addr || !page_aligned(h, addr) || !page_aligned(h, size))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    pthread_mutex_lock(&h->lock);
    if (!in_reservation(h, addr, size) || sl_vmem_overlaps(&h->vm, addr, size)) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
        goto out;
    }
    if (!fits_capacity(h, size)) {
        st = SUBLET_ERR_DEVICE_OOM;
        goto out;
    }
    uint64_t pa = sl_vmem_phys_place(&h->vm, size, h->page);
    if (h->fd >= 0 && pa + size > h->file_size) {
        if (ftruncate(h->fd, (off_t)(pa + size)) != 0) {
            st = SUBLET_ERR_DEVICE_OOM;
            goto out;
        }
        h->file_size = pa + size;
    }
    if ((st = sl_vmem_map(&h->vm, addr, size, pa)) != SUBLET_OK)
        goto out;
    int failed = h->fd >= 0 ? show(h, addr, size, pa)
                            : mprotect((void *)(uintptr_t)addr, (size_t)size,
                                       PROT_READ | PROT_WRITE);
    if (failed) {
        (void)sl_vmem_unmap(&h->vm, addr, size, punch, h);
        (void)drop_view(addr, size);
        st = SUBLET_ERR_DEVICE_OOM;
    }
out:
    pthread_mutex_unlock(&h->lock);
    return st;
}

static sublet_status host_va_map_alias(sublet_backend *b, uint64_t dst, uint64_t src,
                                       uint64_t size)
{
    host_backend *h = as_host(b);
    if (!h || size == 0 || dst + size < dst || src + size < src || !page_aligned(h, dst) ||
        !page_aligned(h, src) || !page_aligned(h, size))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_status st = SUBLET_OK;
    pthread_mutex_lock(&h->lock);
    if (h->fd < 0) {
        st = SUBLET_ERR_UNSUPPORTED;
    } else if (!in_reservation(h, dst, size) || !in_reservation(h, src, size)) {
        st = SUBLET_ERR_INVALID_ARGUMENT;
    } else if ((st = sl_vmem_alias(&h->vm, dst, src, size)) == SUBLET_OK) {
        /* the table first (it checks src mapped, dst unmapped), then the views */
        show_ctx c = {h, 0};
        sl_vmem_pieces(&h->vm, dst, size, show_piece, &c);
        if (c.failed) {
            (void)sl_vmem_unmap(&h->vm, dst, size, punch, h);
            (void)drop_view(dst, size);
            st = SUBLET_ERR_DEVICE_OOM;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return st;
}

static sublet_status host_va_unmap(sublet_backend *b, uint64_t addr, uint64_t size)
{
    host_backend *h = as_host(b);
    if (!h || size == 0 || addr + size < addr || !page_aligned(h, addr) || !page_aligned(h, size))
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&h->lock);
    /* Every byte of [addr, end) must be mapped; file ranges no other view
     * shows are punched out (their memory is dropped). */
    sublet_status st = sl_vmem_unmap(&h->vm, addr, size, punch, h);
    if (st == SUBLET_OK && drop_view(addr, size) != 0)
        st = SUBLET_ERR_BACKEND;
    pthread_mutex_unlock(&h->lock);
    return st;
}

#endif /* HOST_HAVE_VMM */

/* ---- lifetime ---------------------------------------------------------------------- */

static void host_destroy(sublet_backend *b)
{
    host_backend *h = as_host(b);
    if (!h)
        return;
    /* Segments still live are deliberately not freed: the engine should have
     * returned them, and LeakSanitizer then reports the ones it did not.
     * Reservations are invisible to LSan, so they are simply unmapped. */
#if HOST_HAVE_VMM
    for (size_t i = 0; i < h->reservations.n; i++) {
        const uint64_t len = (h->reservations.v[i].size + h->page - 1) & ~(h->page - 1);
        munmap((void *)(uintptr_t)h->reservations.v[i].addr, (size_t)len);
    }
#endif
    pthread_mutex_destroy(&h->lock);
    free(h->segments.v);
    free(h->reservations.v);
    sl_vmem_fini(&h->vm);
    if (h->fd >= 0)
        close(h->fd);
    free(h);
}

static const sublet_backend_ops host_ops = {
    .segment_alloc = host_segment_alloc,
    .segment_free = host_segment_free,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .event_query = host_event_query,
    .event_synchronize = host_event_synchronize,
    .mem_info = host_mem_info,
    .process_mem = host_process_mem,
#if HOST_HAVE_VMM
    .va_reserve = host_va_reserve,
    .va_release = host_va_release,
    .va_map = host_va_map,
    .va_unmap = host_va_unmap,
    .va_map_alias = host_va_map_alias,
#endif
    .destroy = host_destroy,
};

sublet_status sublet_host_create(uint64_t capacity, sublet_backend **out)
{
    if (!out || capacity == 0)
        return SUBLET_ERR_INVALID_ARGUMENT;
    host_backend *h = calloc(1, sizeof *h);
    if (!h)
        return SUBLET_ERR_NO_MEMORY;
    if (pthread_mutex_init(&h->lock, NULL) != 0) {
        free(h);
        return SUBLET_ERR_NO_MEMORY;
    }
    long page = sysconf(_SC_PAGESIZE);
    h->page = (page > 0 && (page & (page - 1)) == 0) ? (uint64_t)page : UINT64_C(4096);
    h->base.ops = &host_ops;
    h->base.name = "host";
    h->base.device = 0;
    h->capacity = capacity;
    h->fd = -1;
#if HOST_HAVE_MEMFD
    h->fd = memfd_create("sublet-host", MFD_CLOEXEC);
#endif
    *out = &h->base;
    return SUBLET_OK;
}
