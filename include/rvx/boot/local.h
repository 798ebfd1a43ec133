/* rvx/boot/local.h: out-of-band bootstrap for processes on one machine, from the environment.
 *
 * Like torchrun's env method: the launcher (tools/rvxrun, or anything else) sets
 *   RVX_RANK      this process's rank, 0 .. RVX_SIZE-1
 *   RVX_SIZE      number of processes
 *   RVX_BOOT_DIR  a directory private to the job (0700) where ranks leave their addresses
 * and optionally RVX_BOOT_TIMEOUT (seconds a collective waits for the others, default 60) and
 *   RVX_NODE      this process's node number, 0 .. RVX_SIZE-1 (default 0): ranks with the same
 *                 number share a machine (`rvxrun --nodes K` sets it to emulate K nodes)
 *   RVX_LOCAL_RANK, RVX_LOCAL_SIZE  this rank's index among its node's ranks and their number
 *                 (boot/node.h; rvxrun --nodes sets them; default: the rank and the job's size)
 * Without RVX_SIZE the process is rank 0 of 1.
 *
 * The whole bootstrap interface is these calls; another bootstrap (PMIx) provides the same:
 *   rvx__boot_init, rvx__boot_gather_start, rvx__boot_gather_test and
 *   rvx__boot_fini. (A barrier is an allgather of one byte: core.h's rvx_barrier.)
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

#include "node.h"

typedef struct rvx__boot {
    int      rank;
    int      size;
    int      node;         /* ranks with the same node share memory (RVX_NODE) */
    int      local, nlocal; /* this rank's index among its node's ranks, and their number */
    unsigned round;        /* collectives started so far */
    int      timeout_s;
    unsigned cur_round;    /* the collective under way: its round, next rank to read, start, */
    int      cur_next;     /* deadline */
    double   cur_start, cur_deadline;
    char     dir[256];
} rvx__boot_t;

RVX_COLD rvx_status_t rvx__boot_init(rvx__boot_t *b)
{
    const char *dir = getenv("RVX_BOOT_DIR");
    memset(b, 0, sizeof(*b));
    if (rvx__env_int("RVX_SIZE", 1, 1, 1 << 20, &b->size) ||
        rvx__env_int("RVX_RANK", 0, 0, b->size - 1, &b->rank) ||
        rvx__env_int("RVX_BOOT_TIMEOUT", 60, 1, 86400, &b->timeout_s))
        return RVX_ERR_INVALID_PARAM;
    if (rvx__boot_env_node(b->size, &b->node)) return RVX_ERR_INVALID_PARAM;
    if (rvx__boot_env_local(b->rank, b->size, &b->local, &b->nlocal)) return RVX_ERR_INVALID_PARAM;
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

/* A collective in two halves, so a caller can progress communication while it waits:
 * rvx__boot_gather_start publishes this rank's `len` bytes; rvx__boot_gather_test collects the
 * others' into `all` (size * len bytes, rank order) as they appear and returns RVX_OK once all are
 * there, RVX_INPROGRESS before, RVX_ERR_TIMED_OUT after RVX_BOOT_TIMEOUT seconds. */
RVX_COLD rvx_status_t rvx__boot_gather_start(rvx__boot_t *b, const void *mine, size_t len, void *all)
{
    char path[320], tmp[320];
    int fd;
    b->cur_round = b->round++;
    b->cur_next = 0;
    b->cur_start = rvx__now_s();
    b->cur_deadline = b->cur_start + b->timeout_s;
    if (b->size == 1) { memcpy(all, mine, len); b->cur_next = 1; return RVX_OK; }
    snprintf(path, sizeof(path), "%s/%u.%d", b->dir, b->cur_round, b->rank);
    snprintf(tmp, sizeof(tmp), "%s/.%u.%d.tmp", b->dir, b->cur_round, b->rank);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, mine, len) != (ssize_t)len || close(fd) || rename(tmp, path)) {
        rvx__log("bootstrap: cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__boot_gather_test(rvx__boot_t *b, size_t len, void *all)
{
    char path[320];
    while (b->cur_next < b->size) {
        int fd;
        ssize_t got;
        snprintf(path, sizeof(path), "%s/%u.%d", b->dir, b->cur_round, b->cur_next);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            if (rvx__now_s() <= b->cur_deadline) return RVX_INPROGRESS;
            /* the time really waited: a caller that progresses between tests may overrun */
            rvx__log("bootstrap: rank %d waited %.1f s for rank %d (round %u) and gives up; "
                     "is every rank running? (RVX_BOOT_TIMEOUT=%d s sets the wait)",
                     b->rank, rvx__now_s() - b->cur_start, b->cur_next, b->cur_round,
                     b->timeout_s);
            return RVX_ERR_TIMED_OUT;
        }
        got = read(fd, (char *)all + (size_t)b->cur_next * len, len);
        close(fd);
        if (got != (ssize_t)len) {
            rvx__log("bootstrap: rank %d published %zd bytes in round %u, expected %zu "
                     "(ranks of one job must run the same build)", b->cur_next, got,
                     b->cur_round, len);
            return RVX_ERR_BAD_MESSAGE;
        }
        b->cur_next++;
    }
    return RVX_OK;
}

/* The launcher removes the directory when the job ends; nothing to do here. */
RVX_COLD void rvx__boot_fini(rvx__boot_t *b) { (void)b; }

#endif /* RVX_BOOT_LOCAL_H */
