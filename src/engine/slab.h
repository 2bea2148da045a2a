/* sublet — the block slab (slab.c): sl_block records, 64-byte aligned. */
#ifndef SUBLET_ENGINE_SLAB_H
#define SUBLET_ENGINE_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_block sl_block;

typedef struct sl_slab {
    sl_block *free_list;
    void **chunks;
    size_t nchunks, chunks_cap;
} sl_slab;
sl_block *sl_block_new(sl_slab *s);
void sl_block_delete(sl_slab *s, sl_block *b);
void sl_slab_fini(sl_slab *s);

#endif
