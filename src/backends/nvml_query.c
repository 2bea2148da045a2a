/* sublet — this process's use of a device, from NVML (see nvml_query.h).
 *
 * libnvidia-ml.so.1 is opened once per process and never closed; nvmlInit
 * once.  The entry points are looked up by the names the toolkit's nvml.h
 * maps its unversioned API to (nvmlDeviceGetComputeRunningProcesses is
 * nvmlDeviceGetComputeRunningProcesses_v3 in current headers), through
 * pointers of the header's own types, so nothing is declared here by hand. */
#include "backends/nvml_query.h"
#include "base/errmsg.h"

#include <stdio.h>
#include <string.h>

#ifdef SUBLET_HAVE_NVML_H

#include <dlfcn.h>
#include <nvml.h>
#include <pthread.h>
#include <stdlib.h>

#define SL_STR2(x) #x
#define SL_STR(x) SL_STR2(x) /* the name after macro expansion */

static struct {
    void *lib;
    int ok;
    char msg[160];
    __typeof__(&nvmlInit) init;
    __typeof__(&nvmlErrorString) error_string;
    __typeof__(&nvmlDeviceGetHandleByPciBusId) by_pci;
    __typeof__(&nvmlDeviceGetComputeRunningProcesses) compute_procs;
} nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

static int nv_sym(void *dst, const char *name)
{
    void *p = dlsym(nv.lib, name);
    if (!p) {
        snprintf(nv.msg, sizeof nv.msg, "NVML lacks %s", name);
        return 0;
    }
    memcpy(dst, &p, sizeof p);
    return 1;
}

static void nv_load(void)
{
    nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        snprintf(nv.msg, sizeof nv.msg, "NVML (libnvidia-ml.so.1) not found");
        return;
    }
    if (!nv_sym(&nv.init, SL_STR(nvmlInit)) || !nv_sym(&nv.error_string, "nvmlErrorString") ||
        !nv_sym(&nv.by_pci, SL_STR(nvmlDeviceGetHandleByPciBusId)) ||
        !nv_sym(&nv.compute_procs, SL_STR(nvmlDeviceGetComputeRunningProcesses)))
        return;
    nvmlReturn_t r = nv.init();
    if (r != NVML_SUCCESS) {
        snprintf(nv.msg, sizeof nv.msg, "nvmlInit: %s", nv.error_string(r));
        return;
    }
    nv.ok = 1;
}

static sublet_status unsupported(char *why, size_t cap, const char *text)
{
    return sl_fail(why, cap, SUBLET_ERR_UNSUPPORTED, "%s", text);
}

sublet_status sl_nvml_process_used(const char *pci_bus_id, uint64_t pid, uint64_t *used_out,
                                   char *why, size_t why_cap)
{
    if (!pci_bus_id || !*pci_bus_id || !used_out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    pthread_once(&nv_once, nv_load);
    if (!nv.ok)
        return unsupported(why, why_cap, nv.msg);
    nvmlDevice_t dev;
    nvmlReturn_t r = nv.by_pci(pci_bus_id, &dev);
    if (r != NVML_SUCCESS)
        return unsupported(why, why_cap, nv.error_string(r));
    /* The list can grow between the two calls: ask again with room to spare. */
    pthread_mutex_lock(&nv_lock);
    unsigned int n = 0;
    nvmlProcessInfo_t *infos = NULL;
    for (int tries = 0; tries < 4; tries++) {
        unsigned int cap = n + 16;
        nvmlProcessInfo_t *grown = realloc(infos, cap * sizeof *infos);
        if (!grown) {
            free(infos);
            pthread_mutex_unlock(&nv_lock);
            return SUBLET_ERR_NO_MEMORY;
        }
        infos = grown;
        n = cap;
        r = nv.compute_procs(dev, &n, infos);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
    }
    pthread_mutex_unlock(&nv_lock);
    if (r != NVML_SUCCESS) {
        free(infos);
        return unsupported(why, why_cap, nv.error_string(r));
    }
    uint64_t sum = 0;
    int found = 0;
    for (unsigned int i = 0; i < n; i++) {
        if ((uint64_t)infos[i].pid != pid)
            continue;
        found = 1;
        if (infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE)
            sum += infos[i].usedGpuMemory;
    }
    free(infos);
    if (!found)
        return unsupported(why, why_cap, "this process is not in NVML's list of the device's "
                                         "processes (a container may hide it)");
    *used_out = sum;
    return SUBLET_OK;
}

#else

sublet_status sl_nvml_process_used(const char *pci_bus_id, uint64_t pid, uint64_t *used_out,
                                   char *why, size_t why_cap)
{
    (void)pci_bus_id;
    (void)pid;
    (void)used_out;
    return sl_fail(why, why_cap, SUBLET_ERR_UNSUPPORTED,
                   "built without nvml.h: this process's share is not known");
}

#endif
