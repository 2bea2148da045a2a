/* A fake CUDA driver (libcuda.so.1) for testing sublet's cuda backend on
 * machines without a GPU.  Built by tests/cli_cuda_fake.sh and found by the
 * backend's dlopen("libcuda.so.1") through LD_LIBRARY_PATH.
 *
 * It implements the entry points the backend uses, with the driver's rules
 * where the backend could get them wrong:
 *   - calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT unless
 *     the calling thread has one current (so the backend must push its own);
 *   - cuMemAlloc counts against FAKE_CUDA_MEMORY bytes (default 1 GiB) and
 *     fails with CUDA_ERROR_OUT_OF_MEMORY beyond; cuMemFree of an unknown
 *     address is CUDA_ERROR_INVALID_VALUE;
 *   - an event recorded is NOT_READY for FAKE_CUDA_EVENT_POLLS queries
 *     (default 1), complete after cuEventSynchronize / cuCtxSynchronize;
 *   - VMM with a 2 MiB granularity: reservations and sizes must be multiples
 *     of it, cuMemCreate counts physical memory, cuMemMap must map a whole
 *     handle inside a reservation without overlap, cuMemUnmap must cover
 *     whole mappings, cuMemSetAccess needs the range mapped,
 *     cuMemAddressFree refuses a reservation that still has mappings;
 *     cuMemRetainAllocationHandle gives the handle mapped at an address with
 *     one more reference: a handle's memory is freed when every reference
 *     is released (cuMemRelease) and every mapping of it unmapped.
 * FAKE_CUDA_DEVICES (default 1; 0 = cuInit says CUDA_ERROR_NO_DEVICE) and
 * FAKE_CUDA_NO_VMM=1 (the device reports no VMM support).  Addresses are
 * invented (no memory behind them).  Counters for tests: fake_cuda_*(). */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRAN (UINT64_C(2) << 20)
#define MAXDEV 8
#define MAXN 4096

typedef struct fake_ctx {
    int device;
    int retained;
} fake_ctx;

typedef struct range {
    uint64_t addr, size;
    int live;
    struct handle *h; /* mappings */
} range;

struct handle {
    uint64_t size;
    int dev;
    int refs; /* cuMemCreate's, plus one per cuMemRetainAllocationHandle */
    int mappings;
    int live;
};

struct CUevent_st {
    int polls_left;
    unsigned flags;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int inited, ndev = 1, no_vmm, event_polls = 1;
static uint64_t capacity = UINT64_C(1) << 30;
static uint64_t used[MAXDEV];
static fake_ctx ctxs[MAXDEV];
static uint64_t next_addr = UINT64_C(0x7e0000000000);
static range allocs[MAXN], resvs[MAXN], maps[MAXN];
static struct handle handles[MAXN];
static unsigned long long n_live_events, n_syncs, last_event_flags, n_memcreate;

static _Thread_local CUcontext stack[16];
static _Thread_local int depth;

/* ---- counters for the tests ---- */
unsigned long long fake_cuda_live_allocs(void);
unsigned long long fake_cuda_live_handles(void);
unsigned long long fake_cuda_live_mappings(void);
unsigned long long fake_cuda_live_events(void);
unsigned long long fake_cuda_syncs(void);
unsigned long long fake_cuda_last_event_flags(void);
unsigned long long fake_cuda_memcreates(void);

static unsigned long long count_live(const range *v)
{
    unsigned long long n = 0;
    for (int i = 0; i < MAXN; i++)
        n += v[i].live != 0;
    return n;
}

unsigned long long fake_cuda_live_allocs(void)
{
    pthread_mutex_lock(&mu);
    unsigned long long n = count_live(allocs);
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned long long fake_cuda_live_handles(void)
{
    pthread_mutex_lock(&mu);
    unsigned long long n = 0;
    for (int i = 0; i < MAXN; i++)
        n += handles[i].live != 0;
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned long long fake_cuda_live_mappings(void)
{
    pthread_mutex_lock(&mu);
    unsigned long long n = count_live(maps);
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned long long fake_cuda_live_events(void)
{
    return __atomic_load_n(&n_live_events, __ATOMIC_SEQ_CST);
}

unsigned long long fake_cuda_syncs(void)
{
    return __atomic_load_n(&n_syncs, __ATOMIC_SEQ_CST);
}

unsigned long long fake_cuda_last_event_flags(void)
{
    return __atomic_load_n(&last_event_flags, __ATOMIC_SEQ_CST);
}

unsigned long long fake_cuda_memcreates(void)
{
    return __atomic_load_n(&n_memcreate, __ATOMIC_SEQ_CST);
}

/* ---- helpers ---- */

static CUcontext current(void)
{
    return depth > 0 ? stack[depth - 1] : NULL;
}

static int cur_device(void)
{
    CUcontext c = current();
    return c ? ((fake_ctx *)(void *)c)->device : -1;
}

static range *slot(range *v)
{
    for (int i = 0; i < MAXN; i++)
        if (!v[i].live)
            return &v[i];
    return NULL;
}

static uint64_t bump(uint64_t size)
{
    uint64_t a = next_addr;
    next_addr += (size + GRAN - 1) / GRAN * GRAN + GRAN; /* a gap between ranges */
    return a;
}

/* ---- entry points ---- */

CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s)
{
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s)
{
    switch (e) {
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    default: *s = "fake driver error"; break;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int flags)
{
    (void)flags;
    const char *v = getenv("FAKE_CUDA_DEVICES");
    pthread_mutex_lock(&mu);
    ndev = v ? atoi(v) : 1;
    if (ndev > MAXDEV)
        ndev = MAXDEV;
    v = getenv("FAKE_CUDA_MEMORY");
    if (v)
        capacity = strtoull(v, NULL, 0);
    v = getenv("FAKE_CUDA_NO_VMM");
    no_vmm = v && strcmp(v, "1") == 0;
    v = getenv("FAKE_CUDA_EVENT_POLLS");
    if (v)
        event_polls = atoi(v);
    inited = ndev > 0;
    for (int i = 0; i < MAXDEV; i++)
        ctxs[i].device = i;
    pthread_mutex_unlock(&mu);
    return ndev > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *n)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    *n = ndev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d)
{
    snprintf(name, (size_t)len, "Fake CUDA Device %d", (int)d);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *pi = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? !no_vmm : 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    ctxs[d].retained++;
    pthread_mutex_unlock(&mu);
    *c = (CUcontext)(void *)&ctxs[d];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
    if (d < 0 || d >= ndev || ctxs[d].retained == 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    ctxs[d].retained--;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
    *c = current();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext c)
{
    if (!c || depth == 16)
        return CUDA_ERROR_INVALID_CONTEXT;
    stack[depth++] = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *c)
{
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext top = stack[--depth];
    if (c)
        *c = top;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    if (!current())
        return CUDA_ERROR_INVALID_CONTEXT;
    __atomic_add_fetch(&n_syncs, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t size)
{
    int d = cur_device();
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult r = CUDA_SUCCESS;
    range *s = slot(allocs);
    if (!s || size > capacity || used[d] > capacity - size) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->addr = bump(size);
        s->size = size;
        s->live = 1;
        used[d] += size;
        *p = (CUdeviceptr)s->addr;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
    int d = cur_device();
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAXN; i++)
        if (allocs[i].live && allocs[i].addr == (uint64_t)p) {
            allocs[i].live = 0;
            used[d] -= allocs[i].size;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult CUDAAPI cuMemGetInfo(size_t *fr, size_t *tot)
{
    int d = cur_device();
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&mu);
    *fr = (size_t)(capacity - used[d]);
    *tot = (size_t)capacity;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
    if (!current())
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUevent_st *ev = calloc(1, sizeof *ev);
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ev->flags = flags;
    __atomic_store_n(&last_event_flags, flags, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&n_live_events, 1, __ATOMIC_SEQ_CST);
    *e = ev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    free(e);
    __atomic_sub_fetch(&n_live_events, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s)
{
    (void)s;
    if (!current())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    e->polls_left = event_polls;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->polls_left > 0) {
        e->polls_left--;
        return CUDA_ERROR_NOT_READY;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    e->polls_left = 0;
    return CUDA_SUCCESS;
}

/* ---- VMM ---- */

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    (void)option;
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    *g = (size_t)GRAN;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                     unsigned long long flags)
{
    (void)addr;
    (void)flags;
    if (size == 0 || size % GRAN || (align && (align & (align - 1))))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    range *s = slot(resvs);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (s) {
        uint64_t a = next_addr;
        if (align > GRAN)
            a = (a + align - 1) / align * align;
        next_addr = a;
        s->addr = bump(size);
        s->size = size;
        s->live = 1;
        *p = (CUdeviceptr)s->addr;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

static int overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return a < b + bs && b < a + as;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr p, size_t size)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAXN; i++)
        if (resvs[i].live && resvs[i].addr == (uint64_t)p && resvs[i].size == size) {
            int busy = 0;
            for (int k = 0; k < MAXN; k++)
                busy |= maps[k].live && overlaps(maps[k].addr, maps[k].size, p, size);
            if (!busy) {
                resvs[i].live = 0;
                r = CUDA_SUCCESS;
            }
            break;
        }
    pthread_mutex_unlock(&mu);
    return r;
}

static void maybe_free_handle(struct handle *h)
{
    if (h->refs == 0 && h->mappings == 0 && h->live) {
        h->live = 0;
        used[h->dev] -= h->size;
    }
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= ndev || size == 0 || size % GRAN)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_add_fetch(&n_memcreate, 1, __ATOMIC_SEQ_CST);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    int d = prop->location.id;
    if (size <= capacity && used[d] <= capacity - size) {
        for (int i = 0; i < MAXN; i++)
            if (!handles[i].live) {
                handles[i] = (struct handle){.size = size, .dev = d, .refs = 1, .live = 1};
                used[d] += size;
                *out = (CUmemGenericAllocationHandle)(uintptr_t)&handles[i];
                r = CUDA_SUCCESS;
                break;
            }
    }
    pthread_mutex_unlock(&mu);
    return r;
}

static struct handle *as_handle(CUmemGenericAllocationHandle h)
{
    struct handle *p = (struct handle *)(uintptr_t)h;
    if (p < handles || p >= handles + MAXN || !p->live)
        return NULL;
    return p;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle hh)
{
    pthread_mutex_lock(&mu);
    struct handle *h = as_handle(hh);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (h && h->refs > 0) {
        h->refs--;
        maybe_free_handle(h);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr p, size_t size, size_t offset,
                          CUmemGenericAllocationHandle hh, unsigned long long flags)
{
    (void)flags;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct handle *h = as_handle(hh);
    if (!h || h->refs == 0 || offset != 0 || size != h->size || (uint64_t)p % GRAN)
        goto out;
    int inside = 0;
    for (int i = 0; i < MAXN; i++)
        if (resvs[i].live && p >= resvs[i].addr && p + size <= resvs[i].addr + resvs[i].size)
            inside = 1;
    if (!inside)
        goto out;
    for (int i = 0; i < MAXN; i++)
        if (maps[i].live && overlaps(maps[i].addr, maps[i].size, p, size))
            goto out;
    range *s = slot(maps);
    if (!s) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    *s = (range){.addr = p, .size = size, .live = 1, .h = h};
    h->mappings++;
    r = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr p, size_t size)
{
    /* The range must be exactly a union of whole mappings. */
    pthread_mutex_lock(&mu);
    uint64_t covered = 0;
    for (int i = 0; i < MAXN; i++)
        if (maps[i].live && overlaps(maps[i].addr, maps[i].size, p, size)) {
            if (maps[i].addr < p || maps[i].addr + maps[i].size > p + size) {
                pthread_mutex_unlock(&mu);
                return CUDA_ERROR_INVALID_VALUE;
            }
            covered += maps[i].size;
        }
    if (covered != size) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (int i = 0; i < MAXN; i++)
        if (maps[i].live && overlaps(maps[i].addr, maps[i].size, p, size)) {
            maps[i].live = 0;
            maps[i].h->mappings--;
            maybe_free_handle(maps[i].h);
        }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *out, void *addr)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)addr;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAXN; i++)
        if (maps[i].live && a >= maps[i].addr && a < maps[i].addr + maps[i].size) {
            maps[i].h->refs++;
            *out = (CUmemGenericAllocationHandle)(uintptr_t)maps[i].h;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc,
                                size_t count)
{
    if (!desc || count == 0 || desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    uint64_t covered = 0;
    for (int i = 0; i < MAXN; i++)
        if (maps[i].live && overlaps(maps[i].addr, maps[i].size, p, size)) {
            uint64_t lo = maps[i].addr > p ? maps[i].addr : p;
            uint64_t hi = maps[i].addr + maps[i].size < p + size ? maps[i].addr + maps[i].size
                                                                  : p + size;
            covered += hi - lo;
        }
    pthread_mutex_unlock(&mu);
    return covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- cuGetProcAddress ---- */

#define ENTRY(name, fn) {name, (void *)(uintptr_t)&fn}
static const struct {
    const char *name;
    void *fn;
} table[] = {
    ENTRY("cuGetErrorName", cuGetErrorName),
    ENTRY("cuGetErrorString", cuGetErrorString),
    ENTRY("cuInit", cuInit),
    ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    ENTRY("cuDeviceGetCount", cuDeviceGetCount),
    ENTRY("cuDeviceGet", cuDeviceGet),
    ENTRY("cuDeviceGetName", cuDeviceGetName),
    ENTRY("cuDeviceGetAttribute", cuDeviceGetAttribute),
    ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease),
    ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
    ENTRY("cuCtxPushCurrent", cuCtxPushCurrent),
    ENTRY("cuCtxPopCurrent", cuCtxPopCurrent),
    ENTRY("cuCtxSynchronize", cuCtxSynchronize),
    ENTRY("cuMemAlloc", cuMemAlloc),
    ENTRY("cuMemFree", cuMemFree),
    ENTRY("cuMemGetInfo", cuMemGetInfo),
    ENTRY("cuEventCreate", cuEventCreate),
    ENTRY("cuEventDestroy", cuEventDestroy),
    ENTRY("cuEventRecord", cuEventRecord),
    ENTRY("cuEventQuery", cuEventQuery),
    ENTRY("cuEventSynchronize", cuEventSynchronize),
    ENTRY("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity),
    ENTRY("cuMemAddressReserve", cuMemAddressReserve),
    ENTRY("cuMemAddressFree", cuMemAddressFree),
    ENTRY("cuMemCreate", cuMemCreate),
    ENTRY("cuMemRelease", cuMemRelease),
    ENTRY("cuMemMap", cuMemMap),
    ENTRY("cuMemUnmap", cuMemUnmap),
    ENTRY("cuMemSetAccess", cuMemSetAccess),
    ENTRY("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle),
};

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version,
                                  cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)version;
    (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0) {
            *pfn = table[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
