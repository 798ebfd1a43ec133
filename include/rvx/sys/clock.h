/* rvx/sys/clock.h: a monotonic clock for timeouts and liveness checks, and the back-off of every
 * waiting loop (bootstrap collectives, flushes, connection set-up). */
#ifndef RVX_SYS_CLOCK_H
#define RVX_SYS_CLOCK_H

#include <time.h>

/* A fuzzing harness that plays the adapter itself names a function here, called whenever rvx
 * waits for the adapter (fuzz/rx.c); nothing else defines it. */
#ifdef RVX_FUZZ_BACKOFF_HOOK
void RVX_FUZZ_BACKOFF_HOOK(void);
#endif

/* A waiting loop spins for RVX_WAIT_SPIN_NS (config.h), about an RDMA round trip plus a moderate
 * transfer, before it sleeps: a sleep costs at least the timer slack (50 us for a normal thread),
 * so a wait that ends sooner must not sleep, and one that lasts longer leaves the core to others. */
#define RVX__BACKOFF_SLEEPING (1u << 30) /* *spins from here on counts sleeps, not spins */

/* Nanoseconds on the monotonic clock. */
static inline unsigned long long rvx__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* One round of a waiting loop whose *spins the caller zeroes whenever it made progress: spin for
 * RVX_WAIT_SPIN_NS (the clock read every 64 rounds), then sleep a little longer each time, up
 * to 1 ms, so that waiting processes leave the cores to those doing work. */
static inline void rvx__backoff(unsigned *spins)
{
    static __thread unsigned long long since; /* when this thread's current spin began */
    unsigned s = (*spins)++;
    struct timespec ts;
#ifdef RVX_FUZZ_BACKOFF_HOOK
    RVX_FUZZ_BACKOFF_HOOK();
#endif
    if (s < RVX__BACKOFF_SLEEPING) {
        if (s == 0) since = rvx__now_ns();
        if ((s & 63) != 63 || rvx__now_ns() - since < RVX_WAIT_SPIN_NS) {
            rvx_cpu_relax();
            return;
        }
        *spins = RVX__BACKOFF_SLEEPING + 1;
        s = RVX__BACKOFF_SLEEPING;
    }
    s -= RVX__BACKOFF_SLEEPING; /* sleeps so far: 1 us for 64 of them, 2 us for 64, ... then 1 ms */
    ts.tv_sec = 0;
    ts.tv_nsec = s < 960 ? 1000 * (long)(1 + s / 64) : 1000000;
    nanosleep(&ts, NULL);
}

/* A wait for other processes through the bootstrap (a collective over files or PMIx, which takes
 * milliseconds): no spin, sleeps doubling from 1 us to 1 ms. rvx__backoff's hundreds of short
 * sleeps, each at least the timer slack, would have ranks waiting in a collective take the
 * cores from the ranks they wait for. */
static inline void rvx__backoff_coarse(unsigned *spins)
{
    unsigned s = (*spins)++;
    struct timespec ts = {0, 1000L << (s < 10 ? s : 10)};
    nanosleep(&ts, NULL);
}

/* Seconds on the monotonic clock. */
static inline double rvx__now_s(void)
{
    return 1e-9 * (double)rvx__now_ns();
}

#endif /* RVX_SYS_CLOCK_H */
