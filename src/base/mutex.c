/* sublet — the slow paths of the allocator's lock (src/base/mutex.h): a
 * contended lock spins a little, then marks the lock waited for (state 2)
 * and sleeps on a futex until the holder's unlock wakes one sleeper. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall */
#endif
#include "base/mutex.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPINS 100 /* about a critical section's length before sleeping */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void sl_mutex_lock_slow(sl_mutex *m)
{
    for (int i = 0; i < SPINS; i++) {
        int c = atomic_load_explicit(&m->state, memory_order_relaxed);
        if (c == 0 && atomic_compare_exchange_weak_explicit(&m->state, &c, 1, memory_order_acquire,
                                                            memory_order_relaxed))
            return;
        if (c == 2)
            break; /* others sleep already: queue behind them */
        cpu_relax();
    }
    /* take it as 2, so that the unlock that follows wakes the next sleeper */
    while (atomic_exchange_explicit(&m->state, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &m->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void sl_mutex_wake(sl_mutex *m)
{
    atomic_store_explicit(&m->state, 0, memory_order_release);
    syscall(SYS_futex, &m->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#else
typedef int sl_mutex_unused; /* ISO C: a translation unit is never empty */
#endif
