/* sublet — the allocator's lock: a mutex whose uncontended lock and unlock
 * are one atomic instruction each.
 *
 * Every sublet_malloc and sublet_free takes the allocator's lock once;
 * glibc's pthread_mutex_lock and _unlock cost about 50 instructions per
 * pair of calls (type dispatch, elision and robustness checks), a tenth of
 * a cached malloc+free.  On Linux this is the three-state futex mutex of
 * Drepper's "Futexes Are Tricky" (0 free, 1 held, 2 held with waiters): the
 * fast paths are a compare-and-swap and a fetch-and-subtract, a contended
 * lock spins briefly (the allocator's critical sections are short) and then
 * sleeps in the kernel (src/base/mutex.c).  Elsewhere it is a pthread mutex.
 * C11 atomics with acquire/release order, which ThreadSanitizer models. */
#ifndef SUBLET_BASE_MUTEX_H
#define SUBLET_BASE_MUTEX_H

#if defined(__linux__)
#include <stdatomic.h>

typedef struct sl_mutex {
    atomic_int state; /* 0 free, 1 held, 2 held and maybe waited for */
} sl_mutex;

void sl_mutex_lock_slow(sl_mutex *m);
void sl_mutex_wake(sl_mutex *m);

static inline void sl_mutex_init(sl_mutex *m) { atomic_init(&m->state, 0); }
static inline void sl_mutex_destroy(sl_mutex *m) { (void)m; }

static inline void sl_mutex_lock(sl_mutex *m)
{
    int c = 0;
    if (!atomic_compare_exchange_strong_explicit(&m->state, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        sl_mutex_lock_slow(m);
}

static inline void sl_mutex_unlock(sl_mutex *m)
{
    if (atomic_fetch_sub_explicit(&m->state, 1, memory_order_release) != 1)
        sl_mutex_wake(m); /* it was 2: someone may sleep */
}

#else
#include <pthread.h>

typedef struct sl_mutex {
    pthread_mutex_t m;
} sl_mutex;

static inline void sl_mutex_init(sl_mutex *m) { pthread_mutex_init(&m->m, NULL); }
static inline void sl_mutex_destroy(sl_mutex *m) { pthread_mutex_destroy(&m->m); }
static inline void sl_mutex_lock(sl_mutex *m) { pthread_mutex_lock(&m->m); }
static inline void sl_mutex_unlock(sl_mutex *m) { pthread_mutex_unlock(&m->m); }
#endif

#endif
