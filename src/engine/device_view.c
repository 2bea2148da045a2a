/* sublet — the device as the driver sees it, beside what the allocator holds
 * (sublet_device_view_read: what nvidia-smi shows, in the stats and as a
 * section of the summary).
 *
 * One list drives the struct's flat keys and the summary section's lines:
 * X(key, field, title, per_process) — per_process rows only when the backend
 * told this process's use (has_process). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "sublet/backend_cuda.h"

#define SL_DEVICE_VIEW_FIELDS(X)                                                              \
    X(device_total_bytes, total_bytes, "total memory", 0)                                     \
    X(device_free_bytes, free_bytes, "free according to the driver", 0)                       \
    X(device_used_bytes, used_bytes, "used, every process", 0)                                \
    X(device_reserved_bytes, reserved_bytes, "reserved by sublet", 0)                         \
    X(device_cached_bytes, cached_bytes, "  of which cached, free", 0)                        \
    X(device_outside_bytes, outside_bytes, "used outside sublet", 0)                          \
    X(device_process_bytes, process_bytes, "used by this process", 1)                         \
    X(device_process_other_bytes, process_other_bytes, "  of which outside sublet (context, " \
      "other libraries)", 1)                                                                  \
    X(device_others_bytes, others_bytes, "used by other processes", 1)

sublet_status sublet_device_view_read(sublet_allocator *a, sublet_device_view *out)
{
    if (!a || !out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    sublet_backend *be = a->backend;
    if (!be->ops->mem_info)
        return SUBLET_ERR_UNSUPPORTED;
    /* The driver's figures first (cuMemGetInfo), then the allocator's under
     * its lock: a malloc in between moves memory from free to reserved, and
     * the derived figures are clamped so they never go negative. */
    uint64_t fr = 0, tot = 0, proc = 0;
    sublet_status st = be->ops->mem_info(be, &fr, &tot);
    if (st != SUBLET_OK)
        return st;
    int has_proc = be->ops->process_mem && be->ops->process_mem(be, &proc) == SUBLET_OK;
    sl_lock(a);
    uint64_t reserved = (uint64_t)a->stats.reserved_bytes[SUBLET_POOL_ALL].current;
    uint64_t active = (uint64_t)a->stats.active_bytes[SUBLET_POOL_ALL].current;
    sl_unlock(a);
    out->total_bytes = tot;
    out->free_bytes = fr < tot ? fr : tot;
    out->used_bytes = tot - out->free_bytes;
    out->reserved_bytes = reserved;
    out->cached_bytes = reserved > active ? reserved - active : 0;
    out->outside_bytes = out->used_bytes > reserved ? out->used_bytes - reserved : 0;
    if (has_proc) {
        out->has_process = 1;
        out->process_bytes = proc;
        out->process_other_bytes = proc > reserved ? proc - reserved : 0;
        out->others_bytes = out->used_bytes > proc ? out->used_bytes - proc : 0;
    }
    if (sublet_is_cuda(be))
        sublet_cuda_device_name(be, out->name, sizeof out->name);
    else
        snprintf(out->name, sizeof out->name, "%s backend", be->name ? be->name : "unknown");
    return SUBLET_OK;
}

/* snprintf into buf + *len, keeping the full length in *len. */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf && *len < cap ? buf + *len : NULL, buf && *len < cap ? cap - *len : 0,
                      fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

size_t sublet_device_view_format_text(const sublet_device_view *v, int device, char *buf,
                                      size_t cap)
{
    size_t len = 0;
    if (buf && cap)
        buf[0] = '\0';
    if (!v)
        return 0;
    put(buf, cap, &len, "Device view (driver), device %d (%s):\n", device, v->name);
    char s[32];
#define SL_X_TEXT(key, field, title, per_process)                                          \
    if (!(per_process) || v->has_process) {                                                \
        sublet_format_size(v->field, s, sizeof s);                                         \
        put(buf, cap, &len, "  %-56s %12s\n", title ":", s);                               \
    }
    SL_DEVICE_VIEW_FIELDS(SL_X_TEXT)
#undef SL_X_TEXT
    if (!v->has_process)
        put(buf, cap, &len, "  (this process's share is not known to the backend: \"used outside "
                            "sublet\" is this process's other memory and other processes')\n");
    return len;
}

size_t sublet_device_view_format_flat(const sublet_device_view *v, char *buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap)
        buf[0] = '\0';
    if (!v)
        return 0;
#define SL_X_FLAT(key, field, title, per_process)                                          \
    if (!(per_process) || v->has_process)                                                  \
        put(buf, cap, &len, "%s %" PRIu64 "\n", #key, v->field);
    SL_DEVICE_VIEW_FIELDS(SL_X_FLAT)
#undef SL_X_FLAT
    return len;
}
