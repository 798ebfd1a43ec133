/* rvx/sys/env.h: run-time settings read from the environment (the bootstraps' rank and size, the
 * transports' device and limits), each checked against its range once, at init. */
#ifndef RVX_SYS_ENV_H
#define RVX_SYS_ENV_H

#include <errno.h>
#include <stdlib.h>

/* *out = the integer in environment variable `name`, or dflt when it is unset or empty; -1 (and
 * one line on stderr) when it is set to anything but a number in [lo, hi]. */
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

#endif /* RVX_SYS_ENV_H */
