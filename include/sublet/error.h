/* sublet — status codes.  The library never prints; every call that can fail
 * returns one of these, and sublet_status_name() gives its name. */
#ifndef SUBLET_ERROR_H
#define SUBLET_ERROR_H

#include "sublet/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SUBLET_STATUS_LIST(X)                                                        \
    X(SUBLET_OK, 0, "ok")                                                            \
    X(SUBLET_ERR_OOM, 1, "out of memory")                                            \
    X(SUBLET_ERR_DEVICE_OOM, 2, "device allocation failed: out of memory")          \
    X(SUBLET_ERR_INVALID_ARGUMENT, 3, "invalid argument")                           \
    X(SUBLET_ERR_INVALID_POINTER, 4, "invalid device pointer")                      \
    X(SUBLET_ERR_DOUBLE_FREE, 5, "double free")                                      \
    X(SUBLET_ERR_INTERIOR_POINTER, 6, "pointer inside a block, not its start")      \
    X(SUBLET_ERR_CONFIG, 7, "invalid allocator configuration")                      \
    X(SUBLET_ERR_NO_MEMORY, 8, "host memory exhausted")                             \
    X(SUBLET_ERR_BACKEND, 9, "backend error")                                        \
    X(SUBLET_ERR_UNSUPPORTED, 10, "operation not supported")                        \
    X(SUBLET_ERR_CORRUPT, 11, "allocator invariant violated")                       \
    X(SUBLET_ERR_PARSE, 12, "malformed input")                                       \
    X(SUBLET_ERR_IO, 13, "input/output error")                                       \
    X(SUBLET_ERR_BUSY, 14, "refused while blocks are live")                          \
    X(SUBLET_ERR_CANCELLED, 15, "cancelled")

typedef enum sublet_status {
#define SUBLET_X_ENUM(name, value, text) name = value,
    SUBLET_STATUS_LIST(SUBLET_X_ENUM)
#undef SUBLET_X_ENUM
} sublet_status;

/* Stable name ("SUBLET_ERR_OOM") and one-line description. */
SUBLET_API const char *sublet_status_name(sublet_status s);
SUBLET_API const char *sublet_status_text(sublet_status s);

#ifdef __cplusplus
}
#endif
#endif
