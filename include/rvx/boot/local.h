/* rvx/boot/local.h: out-of-band bootstrap for processes on one machine, from the environment.
 *
 * Like torchrun's env method: the launcher (tools/rvxrun, or anything else) sets
 *   RVX_RANK      this process's rank, 0 .. RVX_SIZE-1
 *   RVX_SIZE      number of processes
 *   RVX_BOOT_DIR  a directory private to the job (0700) where ranks leave their addresses
 * and optionally RVX_BOOT_TIMEOUT (seconds a collective waits for the others, default 60).
 * Without RVX_SIZE the process is rank 0 of 1.
 *
 * The whole bootstrap interface is these four calls; another bootstrap (PMIx) provides the same:
 *   rvx__boot_init, rvx__boot_allgather, rvx__boot_barrier, rvx__boot_fini.
 * Collectives are called by every rank in the same order; each one is a numbered round of files
 * "<round>.<rank>", written under a temporary name and renamed so a reader never sees half. */
#ifndef RVX_BOOT_LOCAL_H
#define RVX_BOOT_LOCAL_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct rvx__boot {
    int      rank;
    int      size;
    unsigned round;
    int      timeout_s;
    char     dir[256];
} rvx__boot_t;

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

RVX_COLD rvx_status_t rvx__boot_init(rvx__boot_t *b)
{
    const char *dir = getenv("RVX_BOOT_DIR");
    memset(b, 0, sizeof(*b));
    if (rvx__env_int("RVX_SIZE", 1, 1, 1 << 20, &b->size) ||
        rvx__env_int("RVX_RANK", 0, 0, b->size - 1, &b->rank) ||
        rvx__env_int("RVX_BOOT_TIMEOUT", 60, 1, 86400, &b->timeout_s))
        return RVX_ERR_INVALID_PARAM;
    if (b->size > 1) {
        if (!dir || !*dir) {
            rvx__log("RVX_SIZE=%d but RVX_BOOT_DIR is not set: start the job with rvxrun -n %d",
                     b->size, b->size);
            return RVX_ERR_INVALID_PARAM;
        }
        if (strlen(dir) >= sizeof(b->dir) - 32) {
            rvx__log("RVX_BOOT_DIR is too long");
            return RVX_ERR_INVALID_PARAM;
        }
        strcpy(b->dir, dir);
    }
    return RVX_OK;
}

/* Everyone's `len` bytes, in rank order, into `all` (size * len bytes). */
RVX_COLD rvx_status_t rvx__boot_allgather(rvx__boot_t *b, const void *mine, size_t len, void *all)
{
    char path[320], tmp[320];
    unsigned round = b->round++;
    double deadline;
    int r, fd;

    if (b->size == 1) { memcpy(all, mine, len); return RVX_OK; }
    snprintf(path, sizeof(path), "%s/%u.%d", b->dir, round, b->rank);
    snprintf(tmp, sizeof(tmp), "%s/.%u.%d.tmp", b->dir, round, b->rank);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, mine, len) != (ssize_t)len || close(fd) || rename(tmp, path)) {
        rvx__log("bootstrap: cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return RVX_ERR_IO;
    }
    deadline = rvx__now_s() + b->timeout_s;
    for (r = 0; r < b->size; r++) {
        unsigned spins = 0;
        ssize_t got;
        snprintf(path, sizeof(path), "%s/%u.%d", b->dir, round, r);
        while ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            if (rvx__now_s() > deadline) {
                rvx__log("bootstrap: rank %d waited %d s for rank %d (round %u) and gives up; "
                         "is every rank running? (RVX_BOOT_TIMEOUT sets the wait)",
                         b->rank, b->timeout_s, r, round);
                return RVX_ERR_TIMED_OUT;
            }
            rvx__backoff(&spins);
        }
        got = read(fd, (char *)all + (size_t)r * len, len);
        close(fd);
        if (got != (ssize_t)len) {
            rvx__log("bootstrap: rank %d published %zd bytes in round %u, expected %zu "
                     "(ranks of one job must run the same build)", r, got, round, len);
            return RVX_ERR_BAD_MESSAGE;
        }
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__boot_barrier(rvx__boot_t *b)
{
    char one = 1, *all;
    rvx_status_t st;
    if (b->size == 1) return RVX_OK;
    all = (char *)malloc((size_t)b->size);
    if (!all) return RVX_ERR_NO_MEMORY;
    st = rvx__boot_allgather(b, &one, 1, all);
    free(all);
    return st;
}

/* The launcher removes the directory when the job ends; nothing to do here. */
RVX_COLD void rvx__boot_fini(rvx__boot_t *b) { (void)b; }

#endif /* RVX_BOOT_LOCAL_H */
