/* sublet — the null device: every other entry point of the CUDA runtime and
 * driver (see nullgpu.h).
 *
 * A program linked against the runtime must find each of its symbols here,
 * or it would not load; a library may ask the driver for any entry point.
 * Each call not emulated names itself on stderr (once per name) and fails
 * with the API's "not supported" code (801 in both), so that a gap is seen
 * where it is met, never hidden.  The lists are generated (gen_stubs.sh);
 * a stub takes no declared parameters: the caller's arguments are ignored
 * and its int return register gets the code. */
#include <stddef.h>
#include <string.h>

#include "nullgpu.h"

#define ND_NOT_SUPPORTED 801 /* cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED */

static int rt_stub(const char *name)
{
    nd_unsupported("CUDA runtime", name);
    return nd_rt_fail(ND_NOT_SUPPORTED);
}

static int drv_stub(const char *name)
{
    nd_unsupported("CUDA driver", name);
    return ND_NOT_SUPPORTED;
}

#define X(name)                                                                                         \
    int name(void);                                                                                     \
    int name(void)                                                                                      \
    {                                                                                                   \
        return rt_stub(#name);                                                                          \
    }
#include "cudart_stubs.def"
#undef X

#define X(name, base)                                                                                   \
    int name(void);                                                                                     \
    int name(void)                                                                                      \
    {                                                                                                   \
        return drv_stub(#name);                                                                         \
    }
#include "driver_stubs.def"
#undef X

void *nd_driver_stub(const char *base);

static const struct {
    const char *base;
    int (*fn)(void);
} driver_stubs[] = {
#define X(name, base) {#base, name},
#include "driver_stubs.def"
#undef X
};

void *nd_driver_stub(const char *base)
{
    for (size_t i = 0; i < sizeof driver_stubs / sizeof driver_stubs[0]; i++)
        if (strcmp(driver_stubs[i].base, base) == 0)
            return (void *)driver_stubs[i].fn;
    return NULL;
}
