/* sublet — per-device allocators for the drop-in libraries (libsublet_torch.so
 * and libsublet_preload.so): one allocator per device, created on first use.
 *
 * Each shared library holds its own registry (this file is compiled into
 * each, never into libsublet).  The backend is `cuda` unless the variable
 * named by `backend_env` says `sim` (a simulated device of `sim_memory_env`
 * bytes, default 80GiB: address space only, for tests on machines without a
 * GPU).  Settings come from the environment as for any allocator created
 * with conf NULL (SUBLET_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF,
 * PYTORCH_ALLOC_CONF).
 *
 * Lookups of an existing allocator are lock-free (an atomic load); creation
 * is serialised by a mutex and happens once per device.  A device whose
 * creation failed keeps failing with the same message (no retry storm). */
#ifndef SUBLET_PLUGINS_REGISTRY_H
#define SUBLET_PLUGINS_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/sublet.h"

#define SLP_MAX_DEVICES 64

/* Name the environment variables (call before the first slp_get; the
 * strings must stay valid).  Defaults: SUBLET_BACKEND, SUBLET_SIM_MEMORY. */
void slp_configure(const char *backend_env, const char *sim_memory_env);

/* The allocator of `device`, created on first use; NULL on failure with the
 * reason in err (when err is not NULL). */
sublet_allocator *slp_get(int device, char *err, size_t err_cap);
/* The allocator of `device` if it exists (never creates). */
sublet_allocator *slp_peek(int device);
/* Its backend (NULL when none). */
sublet_backend *slp_backend(int device);

/* Destroy the allocator and backend of `device` (cudaDeviceReset): the
 * caller guarantees no other thread is using them. */
void slp_drop(int device);

/* Call fn for every device that has an allocator, in device order. */
void slp_each(void (*fn)(void *user, int device, sublet_allocator *a), void *user);

/* Bytes cached by the allocator and free for reuse: reserved - active. */
uint64_t slp_cached_free(sublet_allocator *a);

/* The memory summary (sublet_summary) with the device view
 * (SUBLET_SUMMARY_DEVICE), in a malloc'd string (NULL when out of memory or
 * no allocator). */
char *slp_summary_text(int device, int abbreviated);

/* Flat stats text (sublet_stats_format_flat) followed by the device view's
 * keys (sublet_device_view_format_flat: device_total_bytes,
 * device_free_bytes, ...) when the backend can tell; malloc'd string. */
char *slp_stats_text(int device);

/* ---- the event log (sublet/log.h) ------------------------------------------------
 * When the variable SUBLET_LOG names a path, each allocator logs every event
 * from its creation on: device 0 to the path, device N to the path with
 * ".devN" before its extension; an allocator created again after a reset
 * (slp_drop) logs to the same name with ".resetK" before the extension
 * (K = 1, 2, ...).  The recorded settings are the environment's
 * (SUBLET_ALLOC_CONF ...).  A log that cannot be opened, or stops on a write
 * error (a full disk), is told once to `report` (set it before the first
 * slp_get); the allocator goes on without it.  Logs are flushed at exit. */
void slp_log_configure(void (*report)(int device, const char *msg));
/* path for `device`: path itself for device 0, else with ".devN" before its
 * extension(s) (".pickle.gz" counts as one). */
void slp_device_path(char *out, size_t cap, const char *path, int device);
/* Start (or restart: the previous log of the device is closed) logging
 * `device`'s allocator, which must exist, to `path`. */
sublet_status slp_log_open(int device, const char *path, char *err, size_t err_cap);
/* Flush / close the device's log (SUBLET_ERR_INVALID_ARGUMENT when it has
 * none); the log's status. */
sublet_status slp_log_flush(int device);
sublet_status slp_log_close(int device);
/* "events N lost N stacks N blocks N bytes N status TEXT" (snprintf
 * semantics); 0 when the device has no log. */
size_t slp_log_status_text(int device, char *buf, size_t cap);

/* Write a snapshot of `device` to `path`: a pickle/JSON snapshot for a path
 * ending in .pickle/.pkl/.json (optionally .gz), the summary text otherwise.
 * Returns SUBLET_OK or an error with the reason in err. */
sublet_status slp_write_report(int device, const char *path, char *err, size_t err_cap);

#endif
