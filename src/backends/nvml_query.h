/* sublet — this process's use of a device, from NVML (libnvidia-ml.so.1,
 * loaded at run time), for the device view (sublet_device_view_read).
 * Compiled against the toolkit's nvml.h when CMake finds one that compiles
 * (SUBLET_HAVE_NVML_H); otherwise every call answers SUBLET_ERR_UNSUPPORTED. */
#ifndef SUBLET_NVML_QUERY_H
#define SUBLET_NVML_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

/* Bytes of device memory NVML attributes to process `pid` on the device
 * with PCI bus id `pci_bus_id` (as cuDeviceGetPCIBusId gives it), summed
 * over its compute contexts.  SUBLET_ERR_UNSUPPORTED when NVML is not there
 * or cannot tell (no such process in its list: containers often hide the
 * pid), with the reason in why. */
sublet_status sl_nvml_process_used(const char *pci_bus_id, uint64_t pid, uint64_t *used_out,
                                   char *why, size_t why_cap);

#endif
