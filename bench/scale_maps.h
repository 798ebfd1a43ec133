/* bench/scale_maps.h: where a process's resident memory is, by mapping (/proc/self/smaps), for
 * bench/scale.c and bench/scale_ucx.c. */
#ifndef RVX_BENCH_SCALE_MAPS_H
#define RVX_BENCH_SCALE_MAPS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Rss of every mapping (KiB), and of those in three classes: the fabric's inboxes (files under
 * RVXSIM_FABRIC_DIR), rvx's shared memory (memfds it names rvx-*) and other files (the executable
 * and the libraries). */
typedef struct { double total, fabric, shm, file; } maps_rss_t;

static maps_rss_t maps_rss(void)
{
    const char *dir = getenv("RVXSIM_FABRIC_DIR");
    char pre[256], line[1024];
    maps_rss_t m = {0, 0, 0, 0};
    int cls = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    snprintf(pre, sizeof(pre), "%s", dir && *dir ? dir : "/dev/shm/rvxsim-");
    if (!f) return m;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        int at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) == 2 && at > 0) {
            const char *path = line + at;
            cls = !strncmp(path, pre, strlen(pre)) ? 1 : strstr(path, "/memfd:rvx-") ? 2 :
                  path[0] == '/' && strncmp(path, "/memfd:", 7) ? 3 : 0;
        } else if (!strncmp(line, "Rss:", 4)) {
            double kib = strtod(line + 4, NULL);
            m.total += kib;
            if (cls == 1) m.fabric += kib;
            if (cls == 2) m.shm += kib;
            if (cls == 3) m.file += kib;
        }
    }
    fclose(f);
    return m;
}

#endif
