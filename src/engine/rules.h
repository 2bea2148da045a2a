/* sublet — PyTorch's size rules, in one place: the constants of
 * CUDACachingAllocator.cpp and the arithmetic built on them (rules.c).
 * Each rule is restated in docs/rules.md; the § numbers in comments
 * throughout src/ are that file's headings.
 *
 * Included by the engine (config.c, engine.c, pools.c, expandable.c, ...)
 * and by src/analysis (replay.c, frag_series.c), which model the same
 * decisions outside an allocator. */
#ifndef SUBLET_ENGINE_RULES_H
#define SUBLET_ENGINE_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "sublet/config.h" /* sublet_round_size, sublet_allocation_size */

/* docs/rules.md §1.1 */
#define SL_MIB ((uint64_t)1 << 20)
#define SL_MIN_BLOCK ((uint64_t)512)           /* kMinBlockSize: every size is a multiple */
#define SL_SMALL_SIZE ((uint64_t)1 << 20)      /* kSmallSize: largest small-pool request */
#define SL_SMALL_BUFFER ((uint64_t)2 << 20)    /* kSmallBuffer: a small-pool segment */
#define SL_LARGE_BUFFER ((uint64_t)20 << 20)   /* kLargeBuffer: default large segment */
#define SL_MIN_LARGE_ALLOC ((uint64_t)10 << 20) /* kMinLargeAlloc: own-size segments from here */
#define SL_ROUND_LARGE ((uint64_t)2 << 20)     /* kRoundLarge: their rounding */
#define SL_MAX_REQUEST ((uint64_t)1 << 60)     /* sublet's own: a request >= this is refused */

/* Does a request of rounded size `rounded` belong to the small pool
 * (§1.4, before policy:stitch's single pool)? */
static inline bool sl_rule_small(uint64_t rounded) { return rounded <= SL_SMALL_SIZE; }

/* should_split (§2.6): split a free block leaving `remaining` bytes after a
 * request of `rounded` bytes?  `fine` is a small-pool block or a block of a
 * virtual (expandable) segment: any remainder of a whole block splits. */
static inline bool sl_rule_split(bool fine, uint64_t rounded, uint64_t remaining,
                                 uint64_t max_split_size)
{
    if (fine)
        return remaining >= SL_MIN_BLOCK;
    return rounded < max_split_size && remaining > SL_SMALL_SIZE;
}

#endif
