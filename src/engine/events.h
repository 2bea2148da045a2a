/* sublet — the frees that wait for other streams' work (events.c). */
#ifndef SUBLET_ENGINE_EVENTS_H
#define SUBLET_ENGINE_EVENTS_H

#include "engine/engine.h"

/* synchronize_and_free_events (docs/rules.md §3.5 step 1), for `only`'s blocks
 * (NULL: every block). */
sublet_status sl_sync_free_events(sublet_allocator *a, sl_private *only);
/* process_events (§4.3): complete the frees whose events have completed. */
sublet_status sl_process_events(sublet_allocator *a);
static inline sublet_status sl_events_poll(sublet_allocator *a) /* malloc's: most often nothing */
{
    return a->ndeferred || a->pending_events ? sl_process_events(a) : SUBLET_OK;
}
/* insert_events (§4.2): b's events, one a stream it was used on; b stays allocated on failure. */
sublet_status sl_insert_events(sublet_allocator *a, struct sl_block *b);
/* room for one more free deferred until no capture is under way (§4.5) */
bool sl_deferred_reserve(sublet_allocator *a);
/* graph_capture_record_stream_reuse (§4.6) */
void sl_capture_reclaim(sublet_allocator *a, sublet_stream stream);
/* a new-capture-use record for record_stream */
bool sl_capture_use_add(sublet_allocator *a, struct sl_block *b, sublet_stream s);
void sl_evq_fini(sublet_allocator *a);
bool sl_evq_verify(const sublet_allocator *a, char *msg, size_t cap);

#endif
