/* sublet — libsublet_preload.so: sublet under any program that allocates with
 * the CUDA runtime, through LD_PRELOAD.
 *
 *   LD_PRELOAD=/path/to/libsublet_preload.so ./program
 *
 * Interposed (CUDA runtime API; cudaError_t is an int, cudaStream_t a
 * pointer):
 *   cudaMalloc(&p, n)            sublet_malloc on the current device, stream 0
 *   cudaFree(p)                  sublet_free (NULL and pointers sublet did not
 *                                hand out go to the real cudaFree)
 *   cudaMallocAsync(&p, n, s)    sublet_malloc on stream s
 *   cudaFreeAsync(p, s)          record_stream(p, s) then sublet_free: the
 *                                block is reused only once s has reached it
 *   cudaMemGetInfo(&f, &t)       the driver's free and total memory, plus the
 *                                bytes sublet caches and could hand out
 *                                (reserved - active): a program sizing its
 *                                work by free memory sees what it could get
 *   cudaDeviceReset()            releases the device's allocator first
 * and the _ptsz forms of the two async calls (per-thread default stream).
 *
 * The device is the calling thread's current device (the real
 * cudaGetDevice); each device gets its own allocator on first use.  The real
 * functions are found with dlsym(RTLD_NEXT), or in an already loaded
 * libcudart.so* when the runtime was loaded privately (RTLD_LOCAL).
 *
 * cudaFree synchronises the device; a caching allocator need not, but a
 * program written for cudaFree may rely on it (work on another stream still
 * reading the block).  So by default cudaFree calls the real
 * cudaDeviceSynchronize before giving the block back (on the cuda backend;
 * a sim has no device to wait for); SUBLET_PRELOAD_FREE_SYNC=0 turns that off
 * (PyTorch's behaviour: safe for programs that use one stream, or the async
 * calls).
 *
 * Environment:
 *   SUBLET_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF   allocator settings
 *   SUBLET_SNAPSHOT=path        at exit, write the state of the first device
 *                               used to path: a snapshot for
 *                               .pickle/.pkl/.json(.gz), else the memory
 *                               summary text (with the driver's view); other
 *                               devices go to path with ".devN" before the
 *                               extension.
 *                               History is recorded when a snapshot is asked.
 *   SUBLET_LOG=path             log every event of each device's allocator
 *                               from its creation on (sublet/log.h; read with
 *                               `sublet replay path`); device N to path with
 *                               ".devN" before the extension.  A log that
 *                               cannot be opened or stops on a write error
 *                               (a full disk) prints one line and the
 *                               program goes on.
 *   SUBLET_PRELOAD_FREE_SYNC=0  do not synchronise in cudaFree
 *   SUBLET_PRELOAD_BACKEND=sim  a simulated device instead of the GPU
 *                               (addresses only; tests without a GPU), of
 *   SUBLET_PRELOAD_SIM_MEMORY   bytes (default 80GiB)
 *
 * A program that links the CUDA runtime statically (nvcc's default!) calls
 * its own copy of cudaMalloc, which LD_PRELOAD cannot replace.  The
 * constructor looks for a definition of cudaMalloc in the executable and
 * then prints one warning on stderr.  If sublet cannot serve a call (no
 * driver, bad settings) it says so once and passes the calls through to the
 * real runtime.  These, and an event log's error, are the only messages the
 * preload library prints. */
#define _GNU_SOURCE 1 /* RTLD_NEXT, dl_iterate_phdr */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#include "sublet/backend_cuda.h"
#include "sublet/history.h"
#include "sublet/snapshot.h"
#include "sublet/sublet.h"

#define SLP_EXPORT __attribute__((visibility("default")))

/* cudaError_t values (driver_types.h). */
enum {
    CUDA_OK = 0,
    CUDA_ERR_INVALID_VALUE = 1,
    CUDA_ERR_MEMORY_ALLOCATION = 2,
    CUDA_ERR_UNKNOWN = 999,
};
#define CUDA_STREAM_PER_THREAD ((uintptr_t)0x2) /* cudaStreamPerThread */

typedef void *cuda_stream_t;

/* ---- the interposed API (declared here: the runtime's header is not used) */
SLP_EXPORT int cudaMalloc(void **dev_ptr, size_t size);
SLP_EXPORT int cudaFree(void *dev_ptr);
SLP_EXPORT int cudaMallocAsync(void **dev_ptr, size_t size, cuda_stream_t stream);
SLP_EXPORT int cudaFreeAsync(void *dev_ptr, cuda_stream_t stream);
SLP_EXPORT int cudaMallocAsync_ptsz(void **dev_ptr, size_t size, cuda_stream_t stream);
SLP_EXPORT int cudaFreeAsync_ptsz(void *dev_ptr, cuda_stream_t stream);
SLP_EXPORT int cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
SLP_EXPORT int cudaDeviceReset(void);

/* ---- the real runtime ------------------------------------------------------------- */

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);
typedef int (*malloc_async_fn)(void **, size_t, cuda_stream_t);
typedef int (*free_async_fn)(void *, cuda_stream_t);
typedef int (*meminfo_fn)(size_t *, size_t *);
typedef int (*getdev_fn)(int *);
typedef int (*void_fn)(void);

enum {
    R_MALLOC,
    R_FREE,
    R_MALLOC_ASYNC,
    R_FREE_ASYNC,
    R_MALLOC_ASYNC_PTSZ,
    R_FREE_ASYNC_PTSZ,
    R_MEMGETINFO,
    R_GETDEVICE,
    R_SYNC,
    R_RESET,
    R_COUNT
};
static const char *const real_names[R_COUNT] = {
    "cudaMalloc",           "cudaFree",          "cudaMallocAsync",
    "cudaFreeAsync",        "cudaMallocAsync_ptsz", "cudaFreeAsync_ptsz",
    "cudaMemGetInfo",       "cudaGetDevice",     "cudaDeviceSynchronize",
    "cudaDeviceReset",
};
static _Atomic(void *) real_ptr[R_COUNT];

static int find_cudart(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    const char *name = info->dlpi_name;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (base && strncmp(base, "libcudart.so", 12) == 0) {
        void *h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            *(void **)user = h;
            return 1;
        }
    }
    return 0;
}

/* The next definition of a runtime function after this library: RTLD_NEXT,
 * else a libcudart.so* loaded where RTLD_NEXT does not look. */
static void *real(int which)
{
    void *p = atomic_load_explicit(&real_ptr[which], memory_order_acquire);
    if (p)
        return p;
    p = dlsym(RTLD_NEXT, real_names[which]);
    if (!p) {
        void *h = NULL;
        dl_iterate_phdr(find_cudart, &h);
        if (h) {
            p = dlsym(h, real_names[which]);
            dlclose(h); /* NOLOAD handle: drops the reference it took */
        }
    }
    if (p)
        atomic_store_explicit(&real_ptr[which], p, memory_order_release);
    return p;
}

#define REAL(which, type) ((type)real_fn(which))
typedef void (*any_fn)(void);
static any_fn real_fn(int which)
{
    void *p = real(which);
    any_fn f;
    memcpy(&f, &p, sizeof f);
    return f;
}

/* ---- the one message ----------------------------------------------------------------- */

static atomic_int said;

static void say_once(const char *msg, const char *detail)
{
    if (atomic_exchange(&said, 1))
        return;
    fprintf(stderr, "sublet_preload: %s%s%s\n", msg, detail && *detail ? ": " : "",
            detail ? detail : "");
}

/* ---- state ---------------------------------------------------------------------------- */

static int free_sync = 1;
static const char *snapshot_path;
static atomic_int passthrough; /* 1 once sublet could not be used */

/* Does the at-exit report want a snapshot (then the history is recorded)? */
static int want_history(void)
{
    int gz = 0;
    return snapshot_path &&
           sublet_snapshot_format_of_path(snapshot_path, &gz) != SUBLET_SNAPSHOT_AUTO;
}

static int current_device(void)
{
    getdev_fn f = REAL(R_GETDEVICE, getdev_fn);
    int d = 0;
    if (f && f(&d) != CUDA_OK)
        d = 0;
    return d;
}

static sublet_allocator *allocator(int device)
{
    sublet_allocator *a = slp_peek(device);
    if (a || atomic_load_explicit(&passthrough, memory_order_relaxed))
        return a;
    char why[512] = "";
    a = slp_get(device, why, sizeof why);
    if (!a) {
        atomic_store(&passthrough, 1);
        say_once("sublet cannot serve this program, CUDA calls pass through to the runtime",
                 why);
        return NULL;
    }
    if (want_history())
        (void)sublet_history_record(a, SUBLET_RECORD_ALL, SUBLET_CONTEXT_NONE, 0);
    return a;
}

static int to_cuda_error(sublet_status st)
{
    switch (st) {
    case SUBLET_OK:
        return CUDA_OK;
    case SUBLET_ERR_OOM:
    case SUBLET_ERR_DEVICE_OOM:
    case SUBLET_ERR_NO_MEMORY:
        return CUDA_ERR_MEMORY_ALLOCATION;
    case SUBLET_ERR_INVALID_ARGUMENT:
    case SUBLET_ERR_INVALID_POINTER:
    case SUBLET_ERR_DOUBLE_FREE:
    case SUBLET_ERR_INTERIOR_POINTER:
        return CUDA_ERR_INVALID_VALUE;
    default:
        return CUDA_ERR_UNKNOWN;
    }
}

/* The allocator holding ptr (and its device in *dev_out): the current
 * device's first, then the others. */
static sublet_allocator *owner(void *ptr, int device, int *dev_out)
{
    uint64_t base, size, req;
    sublet_allocator *a = slp_peek(device);
    if (a && sublet_block_info(a, ptr, &base, &size, &req) == SUBLET_OK) {
        *dev_out = device;
        return a;
    }
    for (int d = 0; d < SLP_MAX_DEVICES; d++) {
        if (d == device)
            continue;
        a = slp_peek(d);
        if (a && sublet_block_info(a, ptr, &base, &size, &req) == SUBLET_OK) {
            *dev_out = d;
            return a;
        }
    }
    return NULL;
}

typedef struct seg_probe {
    uint64_t addr;
    int found;
} seg_probe;

static void probe_segment(void *user, const sublet_segment_view *seg)
{
    seg_probe *p = user;
    if (p->addr >= seg->addr && p->addr < seg->addr + seg->total_size)
        p->found = 1;
}

static void probe_allocator(void *user, int device, sublet_allocator *a)
{
    (void)device;
    seg_probe *p = user;
    if (!p->found)
        sublet_segments_walk(a, probe_segment, p);
}

/* Is ptr inside memory sublet holds (a freed block, say)?  Such a pointer
 * must never reach the real cudaFree, which could release a whole segment
 * under sublet. */
static int inside_sublet(const void *ptr)
{
    seg_probe p = {.addr = (uint64_t)(uintptr_t)ptr};
    slp_each(probe_allocator, &p);
    return p.found;
}

/* ---- the interposed calls ------------------------------------------------------------- */

static int do_malloc(void **dev_ptr, size_t size, uintptr_t stream, int which)
{
    if (!dev_ptr)
        return CUDA_ERR_INVALID_VALUE;
    sublet_allocator *a = allocator(current_device());
    if (!a) {
        if (which == R_MALLOC) {
            malloc_fn f = REAL(R_MALLOC, malloc_fn);
            return f ? f(dev_ptr, size) : CUDA_ERR_UNKNOWN;
        }
        malloc_async_fn f = REAL(which, malloc_async_fn);
        return f ? f(dev_ptr, size, (cuda_stream_t)stream) : CUDA_ERR_UNKNOWN;
    }
    void *p = NULL;
    sublet_status st = sublet_malloc(a, (uint64_t)size, (sublet_stream)stream, &p);
    if (st != SUBLET_OK)
        return to_cuda_error(st);
    *dev_ptr = p;
    return CUDA_OK;
}

int cudaMalloc(void **dev_ptr, size_t size)
{
    return do_malloc(dev_ptr, size, 0, R_MALLOC);
}

int cudaMallocAsync(void **dev_ptr, size_t size, cuda_stream_t stream)
{
    return do_malloc(dev_ptr, size, (uintptr_t)stream, R_MALLOC_ASYNC);
}

int cudaMallocAsync_ptsz(void **dev_ptr, size_t size, cuda_stream_t stream)
{
    uintptr_t s = stream ? (uintptr_t)stream : CUDA_STREAM_PER_THREAD;
    return do_malloc(dev_ptr, size, s, R_MALLOC_ASYNC_PTSZ);
}

int cudaFree(void *dev_ptr)
{
    int dev = 0;
    sublet_allocator *a = dev_ptr ? owner(dev_ptr, current_device(), &dev) : NULL;
    if (!a) { /* cudaFree(NULL) (context set-up) or not ours */
        if (dev_ptr && inside_sublet(dev_ptr))
            return CUDA_ERR_INVALID_VALUE; /* a double free */
        free_fn f = REAL(R_FREE, free_fn);
        return f ? f(dev_ptr) : (dev_ptr ? CUDA_ERR_INVALID_VALUE : CUDA_OK);
    }
    if (free_sync && sublet_is_cuda(slp_backend(dev))) { /* a sim has no device to wait for */
        void_fn sync = REAL(R_SYNC, void_fn);
        if (sync) {
            int e = sync();
            if (e != CUDA_OK)
                return e; /* a sticky error from earlier work, as cudaFree reports */
        }
    }
    return to_cuda_error(sublet_free(a, dev_ptr));
}

static int do_free_async(void *dev_ptr, uintptr_t stream, int which)
{
    int dev = 0;
    sublet_allocator *a = dev_ptr ? owner(dev_ptr, current_device(), &dev) : NULL;
    if (!a) {
        if (dev_ptr && inside_sublet(dev_ptr))
            return CUDA_ERR_INVALID_VALUE;
        free_async_fn f = REAL(which, free_async_fn);
        return f ? f(dev_ptr, (cuda_stream_t)stream)
                 : (dev_ptr ? CUDA_ERR_INVALID_VALUE : CUDA_OK);
    }
    sublet_status st = sublet_record_stream(a, dev_ptr, (sublet_stream)stream);
    if (st == SUBLET_OK)
        st = sublet_free(a, dev_ptr);
    return to_cuda_error(st);
}

int cudaFreeAsync(void *dev_ptr, cuda_stream_t stream)
{
    return do_free_async(dev_ptr, (uintptr_t)stream, R_FREE_ASYNC);
}

int cudaFreeAsync_ptsz(void *dev_ptr, cuda_stream_t stream)
{
    uintptr_t s = stream ? (uintptr_t)stream : CUDA_STREAM_PER_THREAD;
    return do_free_async(dev_ptr, s, R_FREE_ASYNC_PTSZ);
}

int cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    int device = current_device();
    sublet_allocator *a = slp_peek(device);
    sublet_backend *be = slp_backend(device);
    uint64_t fr = 0, tot = 0;
    if (!a || !be || !free_bytes || !total_bytes || be->ops->mem_info(be, &fr, &tot) != SUBLET_OK) {
        meminfo_fn f = REAL(R_MEMGETINFO, meminfo_fn);
        return f ? f(free_bytes, total_bytes) : CUDA_ERR_UNKNOWN;
    }
    uint64_t cached = slp_cached_free(a);
    fr += cached;
    if (fr > tot)
        fr = tot;
    *free_bytes = (size_t)fr;
    *total_bytes = (size_t)tot;
    return CUDA_OK;
}

int cudaDeviceReset(void)
{
    /* The reset destroys every allocation of the device: release sublet's
     * first, so that no cached block outlives its memory. */
    slp_drop(current_device());
    void_fn f = REAL(R_RESET, void_fn);
    return f ? f() : CUDA_OK;
}

/* ---- statically linked runtimes ---------------------------------------------------------- */

/* Does the ELF file define (not merely reference) `sym` in .symtab or
 * .dynsym?  64-bit ELF only; 0 on any doubt. */
static int elf_defines(const char *path, const char *const *syms, size_t nsyms)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat sb;
    int found = 0;
    if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return 0;
    }
    size_t len = (size_t)sb.st_size;
    const unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff == 0 ||
        eh->e_shoff > len || (len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
        goto out;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
    for (size_t i = 0; i < eh->e_shnum && !found; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
            continue;
        if (sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset ||
            strs->sh_offset > len || strs->sh_size > len - strs->sh_offset ||
            sh[i].sh_entsize != sizeof(Elf64_Sym))
            continue;
        const Elf64_Sym *s = (const Elf64_Sym *)(m + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *str = (const char *)(m + strs->sh_offset);
        for (size_t k = 0; k < n && !found; k++) {
            if (s[k].st_shndx == SHN_UNDEF || s[k].st_name >= strs->sh_size)
                continue;
            int type = ELF64_ST_TYPE(s[k].st_info);
            if (type != STT_FUNC && type != STT_GNU_IFUNC)
                continue;
            const char *nm = str + s[k].st_name;
            size_t room = strs->sh_size - s[k].st_name;
            for (size_t j = 0; j < nsyms; j++)
                if (strnlen(nm, room) < room && strcmp(nm, syms[j]) == 0)
                    found = 1;
        }
    }
out:
    munmap((void *)m, len);
    return found;
}

static void log_error(int device, const char *msg)
{
    fprintf(stderr, "sublet_preload: device %d: %s\n", device, msg);
}

__attribute__((constructor)) static void preload_init(void)
{
    slp_configure("SUBLET_PRELOAD_BACKEND", "SUBLET_PRELOAD_SIM_MEMORY");
    slp_log_configure(log_error);
    const char *fs = getenv("SUBLET_PRELOAD_FREE_SYNC");
    if (fs && strcmp(fs, "0") == 0)
        free_sync = 0;
    const char *sp = getenv("SUBLET_SNAPSHOT");
    if (sp && *sp)
        snapshot_path = sp;
    static const char *const syms[] = {"cudaMalloc", "cudaMallocAsync"};
    if (elf_defines("/proc/self/exe", syms, 2))
        say_once("this program links the CUDA runtime statically; cudaMalloc calls cannot be "
                 "intercepted. Relink with -cudart shared.",
                 NULL);
}

/* ---- at exit ------------------------------------------------------------------------------ */

/* path with ".devN" before its extension(s) (".pickle.gz" counts as one). */
static void device_path(char *out, size_t cap, const char *path, int device)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strchr(base[0] == '.' ? base + 1 : base, '.');
    if (!dot) {
        snprintf(out, cap, "%s.dev%d", path, device);
        return;
    }
    snprintf(out, cap, "%.*s.dev%d%s", (int)(dot - path), path, device, dot);
}

static void report_one(void *user, int device, sublet_allocator *a)
{
    (void)a;
    int *first = user;
    char path[4096];
    if (*first) {
        snprintf(path, sizeof path, "%s", snapshot_path);
        *first = 0;
    } else {
        device_path(path, sizeof path, snapshot_path, device);
    }
    char err[512] = "";
    (void)slp_write_report(device, path, err, sizeof err);
}

__attribute__((destructor)) static void preload_fini(void)
{
    /* Allocators are left alone: the runtime may already have torn the
     * context down, and the process is ending. */
    if (!snapshot_path)
        return;
    int first = 1;
    slp_each(report_one, &first);
}
