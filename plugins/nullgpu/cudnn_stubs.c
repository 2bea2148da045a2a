/* sublet — the null device: every other export of cuDNN 9's libcudnn.so.9
 * (see nd_cudnn.h).
 *
 * As with the runtime (stubs.c), each call not emulated names itself on
 * stderr, once per name, and fails with CUDNN_STATUS_NOT_SUPPORTED (3000),
 * so that a gap is seen where it is met.  The list is generated
 * (gen_cudnn_stubs.sh); a stub takes no declared parameters: the caller's
 * arguments are ignored and its int return register gets the code. */
#include "nd_cudnn.h"
#include "nullgpu.h"

static int dnn_stub(const char *name)
{
    nd_unsupported("cuDNN", name);
    return ND_DNN_NOT_SUPPORTED;
}

#define X(name)                                                                                         \
    int name(void);                                                                                     \
    int name(void)                                                                                      \
    {                                                                                                   \
        return dnn_stub(#name);                                                                         \
    }
#include "cudnn_stubs.def"
#undef X
