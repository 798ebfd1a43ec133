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

/* Sleep a little longer each time: spin briefly, then back off to 1 ms, so that waiting
 * processes leave the cores to those doing work. */
static inline void rvx__backoff(unsigned *spins)
{
    struct timespec ts;
#ifdef RVX_FUZZ_BACKOFF_HOOK
    RVX_FUZZ_BACKOFF_HOOK();
#endif
    if (++*spins < 64) { rvx_cpu_relax(); return; }
    ts.tv_sec = 0;
    ts.tv_nsec = *spins < 1024 ? 1000 * (long)(*spins / 64) : 1000000;
    nanosleep(&ts, NULL);
}

/* Seconds on the monotonic clock. */
static inline double rvx__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* RVX_SYS_CLOCK_H */
