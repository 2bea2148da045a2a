/* sublet — the warm-up plan (reserve.c). */
#ifndef SUBLET_ENGINE_RESERVE_H
#define SUBLET_ENGINE_RESERVE_H

#include "engine/engine.h"

/* Make sure the allocator holds the warm-up plan of a->settings (lock held):
 * reserve what is missing on the default stream.  On failure the segments
 * this call created are released again (pages it mapped stay mapped, free)
 * and err says why. */
sublet_status sl_warmup_apply(sublet_allocator *a, char *err, size_t err_cap);

#endif
