/* sublet — the null device: every other export of cuBLAS and cuBLASLt (see
 * blas.h).
 *
 * PyTorch binds cuBLAS's and cuBLASLt's symbols by version node
 * (cublasX@libcublas.so.13): with the null device preloaded, each of them
 * must be found here, or the real library (which needs a real driver)
 * would answer it.  Each call not emulated names itself on stderr (once per
 * name) and fails with CUBLAS_STATUS_NOT_SUPPORTED (15), as the runtime's
 * stubs do (stubs.c).  The lists are generated (gen_blas_stubs.sh); a stub
 * takes no declared parameters and its int return register gets the code. */
#include "blas.h"
#include "nullgpu.h"

#define X(name)                                                                                         \
    int name(void);                                                                                     \
    int name(void)                                                                                      \
    {                                                                                                   \
        nd_unsupported("cuBLAS", #name);                                                                \
        return ND_BLAS_NOT_SUPPORTED;                                                                   \
    }
#include "cublas_stubs.def"
#undef X

#define X(name)                                                                                         \
    int name(void);                                                                                     \
    int name(void)                                                                                      \
    {                                                                                                   \
        nd_unsupported("cuBLASLt", #name);                                                              \
        return ND_BLAS_NOT_SUPPORTED;                                                                   \
    }
#include "cublaslt_stubs.def"
#undef X
