/* sublet — page tables of the sim and host backends: virtual ranges mapped
 * to physical ranges with reference counts (see vmem.h).
 *
 * maps[] holds the mapped virtual ranges, sorted and disjoint; each maps
 * its bytes one to one onto physical bytes starting at `pa`.  phys[] holds
 * the physical ranges in use, sorted and disjoint, each with the number of
 * virtual bytes mapped to each of its bytes (the same for the whole range:
 * a range is split where counts come to differ).  A fresh map adds a range
 * with count 1; an alias adds a virtual range over existing physical bytes
 * and raises their count; an unmap lowers it and drops the ranges that
 * reach 0.  `bytes` is the sum of phys[]'s sizes: memory in use, each byte
 * once however many views reach it. */
#include "backends/vmem.h"

#include <stdlib.h>
#include <string.h>

/* ---- sorted arrays ------------------------------------------------------------------ */

static size_t map_lower(const sl_vmem *v, uint64_t va) /* first map with va >= x */
{
    size_t lo = 0, hi = v->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->maps[mid].va < va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* First map that ends after va (the one holding va, or the next one). */
static size_t map_first_after(const sl_vmem *v, uint64_t va)
{
    size_t i = map_lower(v, va);
    if (i > 0 && v->maps[i - 1].va + v->maps[i - 1].size > va)
        return i - 1;
    return i;
}

static size_t phys_lower(const sl_vmem *v, uint64_t pa)
{
    size_t lo = 0, hi = v->nphys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->phys[mid].pa < pa)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *n = realloc(*arr, nc * elem);
    if (!n)
        return 0;
    *arr = n;
    *cap = nc;
    return 1;
}

static int reserve(sl_vmem *v, size_t maps, size_t phys)
{
    return grow((void **)&v->maps, &v->cap_maps, v->nmaps + maps, sizeof *v->maps) &&
           grow((void **)&v->phys, &v->cap_phys, v->nphys + phys, sizeof *v->phys);
}

/* ---- physical ranges ------------------------------------------------------------------ */

/* Split the physical range holding x strictly inside it at x.  Room for one
 * more entry must have been made. */
static void phys_split_at(sl_vmem *v, uint64_t x)
{
    size_t i = phys_lower(v, x);
    if (i < v->nphys && v->phys[i].pa == x)
        return;
    if (i == 0)
        return;
    sl_pmem *p = &v->phys[i - 1];
    if (p->pa + p->size <= x)
        return;
    memmove(&v->phys[i + 1], &v->phys[i], (v->nphys - i) * sizeof *v->phys);
    v->phys[i] = (sl_pmem){.pa = x, .size = p->pa + p->size - x, .refs = p->refs};
    p->size = x - p->pa;
    v->nphys++;
}

/* Add `delta` (+1 or -1) to the counts of [pa, pa+len), which is in use.
 * Room for two more entries must have been made.  Ranges that reach 0 are
 * dropped and reported. */
static void phys_adjust(sl_vmem *v, uint64_t pa, uint64_t len, int delta,
                        sl_vmem_piece_fn released, void *user)
{
    phys_split_at(v, pa);
    phys_split_at(v, pa + len);
    size_t i = phys_lower(v, pa), out = i;
    size_t end = i;
    while (end < v->nphys && v->phys[end].pa < pa + len)
        end++;
    for (size_t k = i; k < end; k++) {
        sl_pmem p = v->phys[k];
        p.refs = delta > 0 ? p.refs + 1 : p.refs - 1;
        if (p.refs == 0) {
            v->bytes -= p.size;
            if (released)
                released(user, 0, p.size, p.pa);
            continue;
        }
        v->phys[out++] = p;
    }
    if (out != end) {
        memmove(&v->phys[out], &v->phys[end], (v->nphys - end) * sizeof *v->phys);
        v->nphys -= end - out;
    }
}

uint64_t sl_vmem_phys_place(const sl_vmem *v, uint64_t size, uint64_t align)
{
    if (align == 0)
        align = 1;
    uint64_t cand = 0;
    for (size_t i = 0; i < v->nphys; i++) {
        const sl_pmem *p = &v->phys[i];
        if (cand + size <= p->pa)
            return cand;
        uint64_t end = p->pa + p->size;
        if (end > cand)
            cand = (end + align - 1) & ~(align - 1);
    }
    return cand;
}

/* ---- queries ----------------------------------------------------------------------------- */

void sl_vmem_fini(sl_vmem *v)
{
    free(v->maps);
    free(v->phys);
    memset(v, 0, sizeof *v);
}

int sl_vmem_overlaps(const sl_vmem *v, uint64_t va, uint64_t size)
{
    size_t i = map_first_after(v, va);
    return i < v->nmaps && v->maps[i].va < va + size;
}

int sl_vmem_covered(const sl_vmem *v, uint64_t va, uint64_t size)
{
    size_t i = map_first_after(v, va);
    uint64_t at = va, end = va + size;
    for (; at < end && i < v->nmaps; i++) {
        if (v->maps[i].va > at)
            return 0;
        at = v->maps[i].va + v->maps[i].size;
    }
    return at >= end;
}

size_t sl_vmem_pieces(const sl_vmem *v, uint64_t va, uint64_t size, sl_vmem_piece_fn fn,
                      void *user)
{
    size_t n = 0;
    uint64_t end = va + size;
    for (size_t i = map_first_after(v, va); i < v->nmaps && v->maps[i].va < end; i++) {
        const sl_vmap *m = &v->maps[i];
        uint64_t a = m->va > va ? m->va : va;
        uint64_t e = m->va + m->size < end ? m->va + m->size : end;
        if (fn)
            fn(user, a, e - a, m->pa + (a - m->va));
        n++;
    }
    return n;
}

uint64_t sl_vmem_refs(const sl_vmem *v, uint64_t va)
{
    size_t i = map_first_after(v, va);
    if (i >= v->nmaps || v->maps[i].va > va)
        return 0;
    uint64_t pa = v->maps[i].pa + (va - v->maps[i].va);
    size_t k = phys_lower(v, pa + 1);
    if (k == 0)
        return 0;
    const sl_pmem *p = &v->phys[k - 1];
    return pa < p->pa + p->size ? p->refs : 0;
}

/* ---- changes ----------------------------------------------------------------------------- */

sublet_status sl_vmem_map(sl_vmem *v, uint64_t va, uint64_t size, uint64_t pa)
{
    if (size == 0 || va + size < va || pa + size < pa)
        return SUBLET_ERR_INVALID_ARGUMENT;
    if (!reserve(v, 1, 1))
        return SUBLET_ERR_NO_MEMORY;
    size_t i = map_lower(v, va);
    memmove(&v->maps[i + 1], &v->maps[i], (v->nmaps - i) * sizeof *v->maps);
    v->maps[i] = (sl_vmap){.va = va, .size = size, .pa = pa};
    v->nmaps++;
    size_t k = phys_lower(v, pa);
    memmove(&v->phys[k + 1], &v->phys[k], (v->nphys - k) * sizeof *v->phys);
    v->phys[k] = (sl_pmem){.pa = pa, .size = size, .refs = 1};
    v->nphys++;
    v->bytes += size;
    return SUBLET_OK;
}

sublet_status sl_vmem_alias(sl_vmem *v, uint64_t dst, uint64_t src, uint64_t size)
{
    if (size == 0 || dst + size < dst || src + size < src || !sl_vmem_covered(v, src, size) ||
        sl_vmem_overlaps(v, dst, size))
        return SUBLET_ERR_INVALID_ARGUMENT;
    size_t n = sl_vmem_pieces(v, src, size, NULL, NULL);
    if (!reserve(v, n, 2 * n))
        return SUBLET_ERR_NO_MEMORY;
    /* the new maps are consecutive at dst's place (dst is unmapped, so the
     * source maps lie wholly before or wholly after it) */
    size_t first = map_first_after(v, src);
    size_t at = map_lower(v, dst);
    memmove(&v->maps[at + n], &v->maps[at], (v->nmaps - at) * sizeof *v->maps);
    v->nmaps += n;
    if (first >= at)
        first += n;
    size_t k;
    for (k = 0; k < n; k++) {
        const sl_vmap m = v->maps[first + k];
        uint64_t a = m.va > src ? m.va : src;
        uint64_t e = m.va + m.size < src + size ? m.va + m.size : src + size;
        v->maps[at + k] = (sl_vmap){.va = dst + (a - src), .size = e - a, .pa = m.pa + (a - m.va)};
    }
    for (k = 0; k < n; k++)
        phys_adjust(v, v->maps[at + k].pa, v->maps[at + k].size, +1, NULL, NULL);
    return SUBLET_OK;
}

sublet_status sl_vmem_unmap(sl_vmem *v, uint64_t va, uint64_t size, sl_vmem_piece_fn released,
                            void *user)
{
    if (size == 0 || va + size < va || !sl_vmem_covered(v, va, size))
        return SUBLET_ERR_INVALID_ARGUMENT;
    const uint64_t end = va + size;
    size_t first = map_first_after(v, va), last = first;
    while (v->maps[last].va + v->maps[last].size < end)
        last++;
    size_t n = last - first + 1;
    if (!reserve(v, 1, 2 * n))
        return SUBLET_ERR_NO_MEMORY;
    for (size_t i = first; i <= last; i++) {
        const sl_vmap *m = &v->maps[i];
        uint64_t a = m->va > va ? m->va : va;
        uint64_t e = m->va + m->size < end ? m->va + m->size : end;
        phys_adjust(v, m->pa + (a - m->va), e - a, -1, released, user);
    }
    const sl_vmap head = v->maps[first], tail = v->maps[last];
    memmove(&v->maps[first], &v->maps[last + 1], (v->nmaps - last - 1) * sizeof *v->maps);
    v->nmaps -= n;
    size_t at = first;
    if (head.va < va) {
        memmove(&v->maps[at + 1], &v->maps[at], (v->nmaps - at) * sizeof *v->maps);
        v->maps[at++] = (sl_vmap){.va = head.va, .size = va - head.va, .pa = head.pa};
        v->nmaps++;
    }
    if (tail.va + tail.size > end) {
        memmove(&v->maps[at + 1], &v->maps[at], (v->nmaps - at) * sizeof *v->maps);
        v->maps[at] = (sl_vmap){.va = end, .size = tail.va + tail.size - end,
                                .pa = tail.pa + (end - tail.va)};
        v->nmaps++;
    }
    return SUBLET_OK;
}
