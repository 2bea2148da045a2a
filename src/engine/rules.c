/* sublet — PyTorch's size arithmetic (docs/rules.md §1): round_size with
 * roundup_power2_divisions, and the segment size of a request.  The
 * constants are in rules.h. */
#include "engine/rules.h"

static unsigned ilog2_u64(uint64_t v) /* v > 0; on every malloc (sublet_round_size) */
{
#if defined(__GNUC__) || defined(__clang__)
    return 63u - (unsigned)__builtin_clzll(v);
#else
    unsigned r = 0;
    while (v >>= 1)
        r++;
    return r;
#endif
}

static int is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* Bucket lookup of §1.3. */
static uint32_t divisions_for(const sublet_settings *s, uint64_t n)
{
    unsigned lg = ilog2_u64(n);
    unsigned idx = lg > 20 ? lg - 20 : 0;
    if (idx > SUBLET_ROUNDUP_BUCKETS - 1)
        idx = SUBLET_ROUNDUP_BUCKETS - 1;
    return s->roundup_power2_divisions[idx];
}

/* §1.2.  Saturates: when the exact result does not fit in 64 bits (n within a
 * step of UINT64_MAX) UINT64_MAX is returned.  UINT64_MAX is never a multiple
 * of 512, so callers can recognise it; the engine rejects n >= 2^60 before
 * rounding anyway.  A NULL `s` means default settings (no divisions). */
uint64_t sublet_round_size(const sublet_settings *s, uint64_t n)
{
    if (n < SL_MIN_BLOCK)
        return SL_MIN_BLOCK;
    uint32_t d = s ? divisions_for(s, n) : 0;
    if (d > 1 && n > (uint64_t)SL_MIN_BLOCK * d) {
        /* next_power2_division(n, d) */
        if (is_pow2(n))
            return n;
        uint64_t f = (uint64_t)1 << ilog2_u64(n);
        uint64_t step = is_pow2(d) ? f >> ilog2_u64(d) : f / d;
        if (step == 0)
            return f > UINT64_MAX / 2 ? UINT64_MAX : 2 * f;
        uint64_t lo = n & ~(step - 1);
        if (lo == n)
            return lo;
        return lo > UINT64_MAX - step ? UINT64_MAX : lo + step;
    }
    if (n > UINT64_MAX - (SL_MIN_BLOCK - 1))
        return UINT64_MAX;
    return (n + SL_MIN_BLOCK - 1) & ~(uint64_t)(SL_MIN_BLOCK - 1);
}

/* §1.5, with s->large_segment_size for kLargeBuffer; saturates like
 * sublet_round_size. */
uint64_t sublet_allocation_size(const sublet_settings *s, uint64_t rounded)
{
    if (rounded <= SL_SMALL_SIZE)
        return SL_SMALL_BUFFER;
    if (rounded < SL_MIN_LARGE_ALLOC)
        return s ? s->large_segment_size : SL_LARGE_BUFFER;
    if (rounded > UINT64_MAX - (SL_ROUND_LARGE - 1))
        return UINT64_MAX;
    return (rounded + SL_ROUND_LARGE - 1) & ~(SL_ROUND_LARGE - 1);
}
