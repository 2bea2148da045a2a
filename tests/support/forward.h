/* sublet — a test backend that forwards every call to another backend
 * (the sim, usually): a test replaces or clears the ops it wants to play
 * differently (a driver that sees other processes' memory, a backend that
 * names no completed streams, no VMM) and keeps the rest as they are. */
#ifndef SUBLET_TEST_FORWARD_H
#define SUBLET_TEST_FORWARD_H

#include "sublet/backend.h"

typedef struct h_fwd {
    sublet_backend base; /* first: the engine sees this */
    sublet_backend_ops ops; /* every op the inner backend has; destroy does nothing */
    sublet_backend *in;
} h_fwd;

/* f forwards to `in` (which it does not own) under `name`. */
void h_fwd_init(h_fwd *f, sublet_backend *in, const char *name);
/* The backend a forwarder given to the engine forwards to. */
static inline sublet_backend *h_fwd_inner(sublet_backend *b) { return ((h_fwd *)b)->in; }

#endif
