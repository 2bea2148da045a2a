/* sublet — the pointer map (ptrmap.c): allocated blocks by address. */
#ifndef SUBLET_ENGINE_PTRMAP_H
#define SUBLET_ENGINE_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_block sl_block;

typedef struct sl_ptr_slot {
    uint64_t addr; /* UINT64_MAX = empty */
    sl_block *b;
} sl_ptr_slot;

typedef struct sl_ptrmap {
    sl_ptr_slot *slots;
    size_t cap, count; /* cap is a power of two */
} sl_ptrmap;
bool sl_ptrmap_init(sl_ptrmap *m);
void sl_ptrmap_fini(sl_ptrmap *m);
sl_block *sl_ptrmap_get(const sl_ptrmap *m, uint64_t addr);
/* The slot holding addr, or SIZE_MAX; valid until the map next changes. */
size_t sl_ptrmap_find(const sl_ptrmap *m, uint64_t addr);
void sl_ptrmap_del_at(sl_ptrmap *m, size_t slot);
/* Room for one more entry (growing when needed); false when out of memory. */
bool sl_ptrmap_reserve(sl_ptrmap *m);
bool sl_ptrmap_put(sl_ptrmap *m, uint64_t addr, sl_block *b);
/* sl_ptrmap_put after a successful sl_ptrmap_reserve (cannot fail). */
void sl_ptrmap_insert(sl_ptrmap *m, uint64_t addr, sl_block *b);
void sl_ptrmap_del(sl_ptrmap *m, uint64_t addr);

#endif
