/* rvx/boot/common.h: what every bootstrap (and core's waiting loops) shares: reading a number
 * from the environment, a monotonic clock, and a back-off for waiting. */
#ifndef RVX_BOOT_COMMON_H
#define RVX_BOOT_COMMON_H

#include <errno.h>
#include <stdlib.h>
#include <time.h>

RVX_COLD int rvx__env_int(const char *name, int dflt, int lo, int hi, int *out)
{
    const char *s = getenv(name);
    char *end;
    long v;
    if (!s || !*s) { *out = dflt; return 0; }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        rvx__log("environment variable %s=\"%s\" is not a number in [%d, %d]", name, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Sleep a little longer each time: spin briefly, then back off to 1 ms, so that waiting
 * processes leave the cores to those doing work. */
static inline void rvx__backoff(unsigned *spins)
{
    struct timespec ts;
    if (++*spins < 64) { rvx_cpu_relax(); return; }
    ts.tv_sec = 0;
    ts.tv_nsec = *spins < 1024 ? 1000 * (long)(*spins / 64) : 1000000;
    nanosleep(&ts, NULL);
}

static inline double rvx__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* RVX_BOOT_COMMON_H */
