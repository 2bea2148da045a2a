/* sublet — the pointer map: allocated blocks by address, open addressing.
 * See ptrmap.h. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* Open addressing with linear probing; each slot holds the address and its
 * block side by side, so a lookup reads one cache line. */
#define PTR_EMPTY UINT64_MAX

static inline size_t ptr_hash(uint64_t addr, size_t cap)
{
    uint64_t x = (addr >> 9) * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

static bool ptrmap_alloc(sl_ptrmap *m, size_t cap)
{
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots)
        return false;
    for (size_t i = 0; i < cap; i++)
        m->slots[i] = (sl_ptr_slot){PTR_EMPTY, NULL};
    m->cap = cap;
    m->count = 0;
    return true;
}

bool sl_ptrmap_init(sl_ptrmap *m) { return ptrmap_alloc(m, 1024); }

void sl_ptrmap_fini(sl_ptrmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

size_t sl_ptrmap_find(const sl_ptrmap *m, uint64_t addr)
{
    if (addr == PTR_EMPTY) /* the empty-slot marker is no block's address */
        return SIZE_MAX;
    for (size_t i = ptr_hash(addr, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].addr == addr)
            return i;
        if (m->slots[i].addr == PTR_EMPTY)
            return SIZE_MAX;
    }
}

sl_block *sl_ptrmap_get(const sl_ptrmap *m, uint64_t addr)
{
    size_t i = sl_ptrmap_find(m, addr);
    return i == SIZE_MAX ? NULL : m->slots[i].b;
}

void sl_ptrmap_insert(sl_ptrmap *m, uint64_t addr, sl_block *b)
{
    size_t i = ptr_hash(addr, m->cap);
    while (m->slots[i].addr != PTR_EMPTY)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (sl_ptr_slot){addr, b};
    m->count++;
}

bool sl_ptrmap_reserve(sl_ptrmap *m)
{
    if ((m->count + 1) * 2 > m->cap) {
        sl_ptrmap old = *m;
        if (!ptrmap_alloc(m, old.cap * 2)) {
            *m = old;
            return false;
        }
        for (size_t i = 0; i < old.cap; i++)
            if (old.slots[i].addr != PTR_EMPTY)
                sl_ptrmap_insert(m, old.slots[i].addr, old.slots[i].b);
        free(old.slots);
    }
    return true;
}

bool sl_ptrmap_put(sl_ptrmap *m, uint64_t addr, sl_block *b)
{
    if (!sl_ptrmap_reserve(m))
        return false;
    sl_ptrmap_insert(m, addr, b);
    return true;
}

void sl_ptrmap_del_at(sl_ptrmap *m, size_t i)
{
    size_t mask = m->cap - 1, j = i;
    /* backward-shift deletion keeps probe chains intact without tombstones */
    for (;;) {
        j = (j + 1) & mask;
        if (m->slots[j].addr == PTR_EMPTY)
            break;
        size_t k = ptr_hash(m->slots[j].addr, m->cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (sl_ptr_slot){PTR_EMPTY, NULL};
    m->count--;
}

void sl_ptrmap_del(sl_ptrmap *m, uint64_t addr)
{
    size_t i = sl_ptrmap_find(m, addr);
    if (i != SIZE_MAX)
        sl_ptrmap_del_at(m, i);
}
