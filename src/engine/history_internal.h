/* sublet — the engine's side of recording (see src/history.c). */
#ifndef SUBLET_HISTORY_INTERNAL_H
#define SUBLET_HISTORY_INTERNAL_H

#include "sublet/history.h"

struct sl_history;
struct sl_stacks;

/* Append a trace entry to the history when it records one, and hand the
 * event to the event callback when one is set (lock held). */
void sl_history_event(sublet_allocator *a, sublet_action act, uint64_t addr, uint64_t size,
                      sublet_stream stream, uint32_t stack);
/* Current stack capture level (NONE when not recording). */
sublet_context sl_history_context(const sublet_allocator *a);
/* Capture and intern the current stack (lock held); 0 on failure. */
uint32_t sl_stack_capture(sublet_allocator *a);
/* Microseconds for trace entries: the clock set, or the real-time clock. */
uint64_t sl_now_us(sublet_allocator *a);
void sl_history_fini(sublet_allocator *a);
/* Append PyTorch's `snapshot` entry (size = active bytes), taking the lock;
 * call it after the snapshot's traces were copied (a dump never holds its
 * own marker). */
void sl_history_snapshot_marker(sublet_allocator *a);

#endif
