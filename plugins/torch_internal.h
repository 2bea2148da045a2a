/* sublet — what libsublet_torch.so's two sources share (never exported:
 * plugins/torch.map keeps only sublet_torch_*).  torch_plugin.c (C) holds
 * the allocators and the last error; torch_pools.cpp (C++, the private-pool
 * hooks) uses them. */
#ifndef SUBLET_PLUGINS_TORCH_INTERNAL_H
#define SUBLET_PLUGINS_TORCH_INTERNAL_H

#include "sublet/sublet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The allocator of `device`, created on first use; NULL with the reason in
 * sublet_torch_last_error(). */
sublet_allocator *slt_get(int device);
/* Set the text sublet_torch_last_error() returns. */
void slt_set_error(const char *msg);

#ifdef __cplusplus
}
#endif
#endif
