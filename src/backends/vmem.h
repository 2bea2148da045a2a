/* sublet — page tables of the sim and host backends (src/vmem.c).
 *
 * A virtual range that is mapped refers to a range of "physical" memory:
 * a fresh map takes new physical bytes, an alias map (va_map_alias) makes a
 * second virtual range refer to the physical bytes of a first one.  Physical
 * bytes carry a reference count (the number of virtual bytes mapped to
 * them); they are in use while it is above zero and are counted once,
 * however many views reach them.  Both tables are sorted arrays of disjoint
 * ranges.  Every operation either succeeds whole or changes nothing (room is
 * made before anything moves).  No locking: the backend's mutex guards it. */
#ifndef SUBLET_VMEM_H
#define SUBLET_VMEM_H

#include <stddef.h>
#include <stdint.h>

#include "sublet/error.h"

typedef struct sl_vmap {
    uint64_t va, size; /* virtual range */
    uint64_t pa;       /* physical address of va */
} sl_vmap;

typedef struct sl_pmem {
    uint64_t pa, size;
    uint64_t refs; /* views mapping these bytes; > 0 */
} sl_pmem;

typedef struct sl_vmem {
    sl_vmap *maps; /* sorted by va, disjoint */
    size_t nmaps, cap_maps;
    sl_pmem *phys; /* sorted by pa, disjoint */
    size_t nphys, cap_phys;
    uint64_t bytes; /* physical bytes in use (each counted once) */
} sl_vmem;

/* A mapped piece: [va, va+len) reaches physical [pa, pa+len). */
typedef void (*sl_vmem_piece_fn)(void *user, uint64_t va, uint64_t len, uint64_t pa);

void sl_vmem_fini(sl_vmem *v);
/* 1 when some byte of [va, va+size) is mapped. */
int sl_vmem_overlaps(const sl_vmem *v, uint64_t va, uint64_t size);
/* 1 when every byte of [va, va+size) is mapped; size > 0. */
int sl_vmem_covered(const sl_vmem *v, uint64_t va, uint64_t size);
/* The lowest physical address, a multiple of `align` (a power of two), at
 * which `size` bytes are not in use. */
uint64_t sl_vmem_phys_place(const sl_vmem *v, uint64_t size, uint64_t align);
/* Map [va, va+size) (unmapped) to new physical bytes at pa (not in use). */
sublet_status sl_vmem_map(sl_vmem *v, uint64_t va, uint64_t size, uint64_t pa);
/* Map [dst, dst+size) (unmapped) to the physical bytes [src, src+size)
 * (mapped) reaches; their counts go up.  The ranges may not overlap. */
sublet_status sl_vmem_alias(sl_vmem *v, uint64_t dst, uint64_t src, uint64_t size);
/* Unmap [va, va+size) (mapped); physical bytes whose count drops to zero
 * are no longer in use and are reported to `released` (may be NULL). */
sublet_status sl_vmem_unmap(sl_vmem *v, uint64_t va, uint64_t size, sl_vmem_piece_fn released,
                            void *user);
/* Report the mapped pieces of [va, va+size) in address order; the number
 * of pieces. */
size_t sl_vmem_pieces(const sl_vmem *v, uint64_t va, uint64_t size, sl_vmem_piece_fn fn,
                      void *user);
/* The reference count of the physical byte [va] reaches (0: unmapped). */
uint64_t sl_vmem_refs(const sl_vmem *v, uint64_t va);

#endif
