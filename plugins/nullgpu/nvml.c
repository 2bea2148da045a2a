/* sublet — the null device: NVML (libnvidia-ml.so.1), as PyTorch asks it
 * (see nullgpu.h).
 *
 * One device, found by index, PCI bus id or UUID; its memory as the
 * runtime counts it; one process on it, this one, using what the device's
 * allocations hold (PyTorch names it in its out-of-memory message); no
 * NVLink and no fabric.  NVML's types are declared here (the toolkit does
 * not ship nvml.h): only those of the calls below, with NVML's layouts. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nullgpu.h"

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_NOT_FOUND = 6,
};

typedef struct nd_nvml_device *nvmlDevice_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t; /* the _v2 and _v3 calls' record */
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

#define ND_NVML_DEVICE ((nvmlDevice_t)(uintptr_t)0x5d0000000010ull)
#define ND_UUID "GPU-00000000-5ub1-e7n0-11gp-u00000000000"
#define ND_BUS "00000000:1B:00.0"

static int started;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v);
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *dev);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *dev);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *i);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_v1_t *p);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_t *p);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_t *p);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned int link, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned int link, int *type);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status);
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, void *info);

static nvmlReturn_t check(nvmlDevice_t dev)
{
    if (!started)
        return NVML_ERROR_UNINITIALIZED;
    return dev == ND_NVML_DEVICE ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlInit_v2(void)
{
    started = nd_dev()->ok;
    return started ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlInit(void)
{
    return nvmlInit_v2();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = 13000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    return nvmlSystemGetCudaDriverVersion_v2(v);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
    if (!v || len < 8)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(v, len, "580.00.00");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!n)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = started ? 1 : 0;
    return started ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev)
{
    if (!dev || i != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = ND_NVML_DEVICE;
    return started ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

/* "0000:1B:00.0", "00000000:1b:00.0": the domain's width and the case vary. */
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *dev)
{
    unsigned dom, b, d, f;
    if (!bus || !dev)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!started)
        return NVML_ERROR_UNINITIALIZED;
    if (sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &f) != 4 || dom != 0 || b != 0x1b || d != 0 || f != 0)
        return NVML_ERROR_NOT_FOUND;
    *dev = ND_NVML_DEVICE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *dev)
{
    if (!uuid || !dev)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strcasecmp(uuid, ND_UUID) != 0)
        return NVML_ERROR_NOT_FOUND;
    *dev = ND_NVML_DEVICE;
    return started ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
    nvmlReturn_t r = check(dev);
    if (r)
        return r;
    if (!uuid || len < sizeof ND_UUID)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(uuid, ND_UUID, sizeof ND_UUID);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
    nvmlReturn_t r = check(dev);
    if (r)
        return r;
    if (!name || len == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(name, len, "%s", nd_dev()->name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *i)
{
    nvmlReturn_t r = check(dev);
    if (r)
        return r;
    if (!i)
        return NVML_ERROR_INVALID_ARGUMENT;
    *i = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
    nvmlReturn_t r = check(dev);
    if (r)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:1B:00.0");
    snprintf(pci->busId, sizeof pci->busId, ND_BUS);
    pci->bus = 0x1b;
    pci->pciDeviceId = 0x233010de;
    return NVML_SUCCESS;
}

static uint64_t used_bytes(void)
{
    nd_device *d = nd_dev();
    uint64_t u;
    nd_lock(d);
    u = nd_mem_used(d);
    nd_unlock(d);
    return u;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m)
{
    nvmlReturn_t r = check(dev);
    uint64_t total = nd_dev()->total, used;
    if (r)
        return r;
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    used = used_bytes();
    m->total = total;
    m->used = used;
    m->free = used < total ? total - used : 0;
    return NVML_SUCCESS;
}

/* This process, with what it holds on the device, when it holds anything. */
static nvmlReturn_t processes(nvmlDevice_t dev, unsigned int *n, void *out, size_t rec)
{
    nvmlReturn_t r = check(dev);
    uint64_t used;
    if (r)
        return r;
    if (!n)
        return NVML_ERROR_INVALID_ARGUMENT;
    used = used_bytes();
    if (used == 0) {
        *n = 0;
        return NVML_SUCCESS;
    }
    if (*n < 1 || !out) {
        *n = 1;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memset(out, 0, rec);
    ((nvmlProcessInfo_v1_t *)out)->pid = (unsigned)getpid();
    ((nvmlProcessInfo_v1_t *)out)->usedGpuMemory = used;
    *n = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_v1_t *p)
{
    return processes(dev, n, p, sizeof *p);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_t *p)
{
    return processes(dev, n, p, sizeof *p);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *n, nvmlProcessInfo_t *p)
{
    return processes(dev, n, p, sizeof *p);
}

/* One GPU: no link leads to another. */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned int link, nvmlPciInfo_t *pci)
{
    nvmlReturn_t r = check(dev);
    (void)link, (void)pci;
    return r ? r : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned int link, int *type)
{
    nvmlReturn_t r = check(dev);
    (void)link, (void)type;
    return r ? r : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status)
{
    nvmlReturn_t r = check(a);
    (void)index;
    if (r || (r = check(b)) != NVML_SUCCESS)
        return r;
    if (!status)
        return NVML_ERROR_INVALID_ARGUMENT;
    *status = 0; /* NVML_P2P_STATUS_OK: a device reaches itself */
    return NVML_SUCCESS;
}

/* Not part of an NVLink fabric: the answer of a Hopper GPU on its own is
 * success with the state "not supported".  The record's size is the low 24
 * bits of its version; its layout (v2, v3): version, clusterUuid[16],
 * status, cliqueId, state (a byte), healthMask, healthSummary (v3). */
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, void *info)
{
    nvmlReturn_t r = check(dev);
    unsigned version, size;
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    memcpy(&version, info, sizeof version);
    size = version & 0xffffffu;
    if (size < 36 || size > 4096)
        return NVML_ERROR_INVALID_ARGUMENT; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH's cousin */
    memset((char *)info + 4, 0, size - 4);
    r = NVML_ERROR_NOT_SUPPORTED;
    memcpy((char *)info + 20, &r, sizeof r); /* status; state (offset 28) stays 0: not supported */
    return NVML_SUCCESS;
}
