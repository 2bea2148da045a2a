/* sublet — the null device's cuDNN 9 (cudnn.c: the legacy API, cudnn_backend.c:
 * the backend descriptors, cudnn_stubs.def: every other export of
 * libcudnn.so.9, each failing with its name).
 *
 * Our own declarations of the few enum values the emulation uses: numbers
 * fixed by cuDNN 9's public ABI (cudnn_graph_v9.h), written here so that the
 * build needs no cuDNN header.  Statuses are plain ints, descriptors host
 * objects (cuDNN's are host pointers too). */
#ifndef SUBLET_ND_CUDNN_H
#define SUBLET_ND_CUDNN_H

#include <stddef.h>
#include <stdint.h>

/* the cuDNN the emulation answers for: PyTorch 2.14.1's cu13 wheels pin 9.24.0 */
#define ND_DNN_VERSION 92400 /* CUDNN_VERSION: major * 10000 + minor * 100 + patch */
#define ND_DNN_CUDART_VERSION 13030 /* what cudnnGetCudartVersion answers in 9.24.0 */

/* cudnnStatus_t */
enum {
    ND_DNN_SUCCESS = 0,
    ND_DNN_NOT_INITIALIZED = 1001,
    ND_DNN_BAD_PARAM = 2000,
    ND_DNN_BAD_PARAM_NULL_POINTER = 2002,
    ND_DNN_BAD_PARAM_NOT_FINALIZED = 2004,
    ND_DNN_BAD_PARAM_OUT_OF_BOUND = 2005,
    ND_DNN_BAD_PARAM_SHAPE_MISMATCH = 2008,
    ND_DNN_BAD_PARAM_ATTRIBUTE_TYPE = 2010,
    ND_DNN_BAD_PARAM_DESCRIPTOR_TYPE = 2012,
    ND_DNN_NOT_SUPPORTED = 3000,
    ND_DNN_INTERNAL_ERROR = 4000,
    ND_DNN_INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003,
    ND_DNN_EXECUTION_FAILED = 5000,
};

/* cudnnDataType_t: the ones with a size other than 4 */
enum {
    ND_DNN_FLOAT = 0,
    ND_DNN_DOUBLE = 1,
    ND_DNN_HALF = 2,
    ND_DNN_INT8 = 3,
    ND_DNN_INT32 = 4,
    ND_DNN_UINT8 = 6,
    ND_DNN_BFLOAT16 = 9,
    ND_DNN_INT64 = 10,
    ND_DNN_BOOLEAN = 11,
    ND_DNN_FP8_E4M3 = 12,
    ND_DNN_FP8_E5M2 = 13,
};

/* cudnnBackendDescriptorType_t */
enum {
    ND_BD_CONVOLUTION = 1,
    ND_BD_ENGINE = 2,
    ND_BD_ENGINECFG = 3,
    ND_BD_ENGINEHEUR = 4,
    ND_BD_EXECUTION_PLAN = 5,
    ND_BD_KNOB_CHOICE = 7,
    ND_BD_KNOB_INFO = 8,
    ND_BD_OP_CONV_FORWARD = 10,
    ND_BD_OP_CONV_BWD_FILTER = 11,
    ND_BD_OP_CONV_BWD_DATA = 12,
    ND_BD_OPERATIONGRAPH = 15,
    ND_BD_VARIANT_PACK = 16,
    ND_BD_TENSOR = 17,
    ND_BD_LAST = 50, /* CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR in 9.24 */
};

/* cudnnBackendAttributeType_t */
enum {
    ND_AT_HANDLE = 0,
    ND_AT_DATA_TYPE = 1,
    ND_AT_BOOLEAN = 2,
    ND_AT_INT64 = 3,
    ND_AT_FLOAT = 4,
    ND_AT_DOUBLE = 5,
    ND_AT_VOID_PTR = 6,
    ND_AT_HEUR_MODE = 8,
    ND_AT_KNOB_TYPE = 9,
    ND_AT_NUMERICAL_NOTE = 11,
    ND_AT_LAYOUT_TYPE = 12,
    ND_AT_BACKEND_DESCRIPTOR = 15,
    ND_AT_BEHAVIOR_NOTE = 19,
    ND_AT_INT32 = 23,
    ND_AT_CHAR = 24,
    ND_AT_FRACTION = 26,
    ND_AT_LAST = 32,
};

/* cudnnBackendAttributeName_t: what the emulation reads or answers */
enum {
    ND_A_CONV_COMP_TYPE = 100,
    ND_A_CONV_MODE = 101,
    ND_A_CONV_DILATIONS = 102,
    ND_A_CONV_FILTER_STRIDES = 103,
    ND_A_CONV_POST_PADDINGS = 104,
    ND_A_CONV_PRE_PADDINGS = 105,
    ND_A_CONV_SPATIAL_DIMS = 106,
    ND_A_ENGINEHEUR_MODE = 200,
    ND_A_ENGINEHEUR_OPERATION_GRAPH = 201,
    ND_A_ENGINEHEUR_RESULTS = 202,
    ND_A_ENGINECFG_ENGINE = 300,
    ND_A_ENGINECFG_INTERMEDIATE_INFO = 301,
    ND_A_ENGINECFG_KNOB_CHOICES = 302,
    ND_A_ENGINECFG_WORKSPACE_SIZE = 303,
    ND_A_ENGINECFG_SHARED_MEMORY_USED = 304,
    ND_A_PLAN_HANDLE = 400,
    ND_A_PLAN_ENGINE_CONFIG = 401,
    ND_A_PLAN_WORKSPACE_SIZE = 402,
    ND_A_PLAN_COMPUTED_INTERMEDIATE_UIDS = 403,
    ND_A_PLAN_RUN_ONLY_INTERMEDIATE_UIDS = 404,
    ND_A_PLAN_JSON_REPRESENTATION = 405,
    ND_A_KNOB_CHOICE_KNOB_TYPE = 600,
    ND_A_KNOB_CHOICE_KNOB_VALUE = 601,
    ND_A_CONV_FWD_CONV_DESC = 702,
    ND_A_CONV_FWD_W = 703,
    ND_A_CONV_FWD_X = 704,
    ND_A_CONV_FWD_Y = 705,
    ND_A_CONV_BWD_DATA_CONV_DESC = 708,
    ND_A_CONV_BWD_DATA_W = 709,
    ND_A_CONV_BWD_DATA_DX = 710,
    ND_A_CONV_BWD_DATA_DY = 711,
    ND_A_CONV_BWD_FILTER_CONV_DESC = 714,
    ND_A_CONV_BWD_FILTER_DW = 715,
    ND_A_CONV_BWD_FILTER_X = 716,
    ND_A_CONV_BWD_FILTER_DY = 717,
    ND_A_OPERATIONGRAPH_HANDLE = 800,
    ND_A_OPERATIONGRAPH_OPS = 801,
    ND_A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT = 802,
    ND_A_TENSOR_BYTE_ALIGNMENT = 900,
    ND_A_TENSOR_DATA_TYPE = 901,
    ND_A_TENSOR_DIMENSIONS = 902,
    ND_A_TENSOR_STRIDES = 903,
    ND_A_TENSOR_UNIQUE_ID = 906,
    ND_A_TENSOR_IS_VIRTUAL = 907,
    ND_A_TENSOR_IS_BY_VALUE = 908,
    ND_A_VARIANT_PACK_UNIQUE_IDS = 1000,
    ND_A_VARIANT_PACK_DATA_POINTERS = 1001,
    ND_A_VARIANT_PACK_WORKSPACE = 1003,
    ND_A_LAYOUT_INFO_TENSOR_UID = 1100,
    ND_A_KNOB_INFO_TYPE = 1200,
    ND_A_ENGINE_OPERATION_GRAPH = 1300,
    ND_A_ENGINE_GLOBAL_INDEX = 1301,
    ND_A_ENGINE_KNOB_INFO = 1302,
    ND_A_ENGINE_NUMERICAL_NOTE = 1303,
    ND_A_ENGINE_LAYOUT_INFO = 1304,
    ND_A_ENGINE_BEHAVIOR_NOTE = 1305,
    ND_A_ENGINE_SM_COUNT_TARGET = 1306,
};

/* cudnnBackendHeurMode_t */
enum { ND_HEUR_INSTANT = 0, ND_HEUR_B = 1, ND_HEUR_FALLBACK = 2, ND_HEUR_A = 3 };

/* The handle (cudnnHandle_t points at one). */
typedef struct nd_dnn_handle {
    uint32_t magic;
    void *stream; /* cudaStream_t */
} nd_dnn_handle;

#define ND_DNN_HANDLE_MAGIC 0x6e64684eu

/* A live handle of ours (NULL: not one). */
nd_dnn_handle *nd_dnn_handle_get(void *h);
/* The bytes of one element of a cudnnDataType_t (0: unknown). */
size_t nd_dnn_dtype_size(int dtype);
/* Work put on a handle's stream: counted in a capture like a launch. */
void nd_dnn_work(nd_dnn_handle *h);
/* Engine 0's workspace for a convolution (docs/nullgpu.md): op is
 * ND_BD_OP_CONV_*, nd the tensors' rank, x the input's dims, w the filter's. */
int64_t nd_dnn_conv_workspace(int op, int64_t nd, const int64_t *x, const int64_t *w);
/* Round up to a multiple of 256 bytes. */
static inline int64_t nd_dnn_align(int64_t n)
{
    return (n + 255) / 256 * 256;
}

#endif
