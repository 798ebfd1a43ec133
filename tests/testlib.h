/* tests/testlib.h: what every rvx test shares. Include after <rvx/rvx.h>.
 *
 * A test exits 0 (pass), 1 (fail) or 77 (skip, with a reason on stdout). Multi-process tests call
 * t_spawn(argc, argv, n): run directly, the test re-starts itself under rvxrun with n ranks and a
 * time limit, so it never hangs; under rvxrun it returns and the ranks run the body. A test that
 * also runs on more ranks calls t_spawn_upto(argc, argv, n, max, ...): RVX_TEST_RANKS=k in the
 * environment picks k ranks (n <= k <= max) instead of n. */
#ifndef RVX_TESTLIB_H
#define RVX_TESTLIB_H

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "placement.h"

static int t_failures;
static int t_rank = -1;

#define T_CHECK(cond, ...)                                                                  \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            t_failures++;                                                                   \
            if (t_failures <= 20) {                                                         \
                fprintf(stderr, "FAIL %s:%d (rank %d): %s: ", __FILE__, __LINE__, t_rank, #cond); \
                fprintf(stderr, __VA_ARGS__);                                               \
                fputc('\n', stderr);                                                        \
            }                                                                               \
        }                                                                                   \
    } while (0)

/* Expect a status; on mismatch print both names. */
#define T_STATUS(call, want)                                                                \
    do {                                                                                    \
        rvx_status_t t_st_ = (call);                                                        \
        T_CHECK(t_st_ == (want), "%s returned %d (%s), expected %s", #call, (int)t_st_,     \
                rvx_status_str(t_st_), rvx_status_str(want));                               \
    } while (0)

#define T_OK(call) T_STATUS(call, RVX_OK)

/* Seconds on a monotonic clock. */
static inline double t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int t_exit(void)
{
    if (t_failures) fprintf(stderr, "rank %d: %d check(s) failed\n", t_rank, t_failures);
    return t_failures ? 1 : 0;
}

/* Re-run this program as n..max ranks under rvxrun (found beside the test: ../bin/rvxrun): n, or
 * RVX_TEST_RANKS when set; a count outside n..max is an error, never silently n. The time limit
 * grows with the count (the ranks share the machine's cores). */
static inline void t_spawn_upto(int argc, char **argv, int n, int max, int timeout_s)
{
    char exe[PATH_MAX], dir[PATH_MAX], run[PATH_MAX + 16], nbuf[16], tbuf[16];
    const char *want = getenv("RVX_TEST_RANKS");
    char **args;
    ssize_t len;
    int i;
    if (getenv("RVX_SIZE")) return;
    if (want && *want) {
        char *end;
        long k = strtol(want, &end, 10);
        if (*end || k < n || k > max) {
            if (n == max)
                fprintf(stderr, "FAIL: RVX_TEST_RANKS=%s: %s runs on %d ranks only\n", want, argv[0], n);
            else
                fprintf(stderr, "FAIL: RVX_TEST_RANKS=%s: %s runs on %d to %d ranks\n", want, argv[0], n, max);
            exit(1);
        }
        timeout_s = (int)(timeout_s * k / n);
        n = (int)k;
    }
    len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) { perror("readlink"); exit(1); }
    exe[len] = 0;
    strcpy(dir, exe);
    snprintf(run, sizeof(run), "%s/../bin/rvxrun", dirname(dir));
    snprintf(nbuf, sizeof(nbuf), "%d", n);
    snprintf(tbuf, sizeof(tbuf), "%d", timeout_s);
    args = (char **)calloc((size_t)argc + 8, sizeof(char *));
    args[0] = run;
    args[1] = (char *)"-n";
    args[2] = nbuf;
    args[3] = (char *)"-t";
    args[4] = tbuf;
    args[5] = (char *)"-g";
    args[6] = (char *)"5";
    args[7] = exe;
    for (i = 1; i < argc; i++) args[7 + i] = argv[i];
    execv(run, args);
    fprintf(stderr, "cannot run %s: build it first (make)\n", run);
    exit(1);
}

/* A test that runs on exactly n ranks. */
static inline void t_spawn(int argc, char **argv, int n, int timeout_s)
{
    t_spawn_upto(argc, argv, n, n, timeout_s);
}

/* A rank's two partners on an even number of ranks n: rank^1 (its neighbour: on its node when
 * the job runs as 2 nodes of consecutive ranks) and rank+n/2 (the other node); one partner on 2
 * ranks. Fills peer[2], returns how many; an odd n is the test's error. */
static inline int t_partners(const char *test, int me, int n, int peer[2])
{
    if (n % 2) {
        fprintf(stderr, "FAIL: %s runs on an even number of ranks, not %d\n", test, n);
        exit(1);
    }
    peer[0] = me ^ 1;
    peer[1] = (me + n / 2) % n;
    return peer[1] == peer[0] ? 1 : 2;
}


/* Context and worker of a multi-process test; returns this rank (also kept in t_rank). */
static inline int t_start(rvx_context_t **ctx, rvx_worker_t **w)
{
    rvx_status_t st = rvx_init(ctx);
    if (st == RVX_OK) st = rvx_worker_create(*ctx, w);
    if (st != RVX_OK) {
        fprintf(stderr, "FAIL: start: %s\n", rvx_status_str(st));
        exit(1);
    }
    return t_rank = rvx_rank(*ctx);
}

/* Wait for a request, progressing w, for at most 60 s: a request that never completes ends the
 * test with a line naming it (what, and a number such as its size), instead of a hang. */
static inline rvx_status_t t_wait_req(rvx_worker_t *w, rvx_request_t *req, const char *what, long a)
{
    double t0 = t_now();
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (rvx_progress(w)) { spins = 0; continue; }
        if (t_now() - t0 > 60) {
            fprintf(stderr, "FAIL (rank %d): %s %ld never completed\n", t_rank, what, a);
            exit(1);
        }
        rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

/* Deterministic bytes: position i of stream `seed`. */
static inline unsigned char t_byte(uint64_t seed, uint64_t i)
{
    uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    return (unsigned char)(x >> 56);
}

static inline void t_fill(void *p, size_t len, uint64_t seed)
{
    size_t i;
    for (i = 0; i < len; i++) ((unsigned char *)p)[i] = t_byte(seed, i);
}

/* Index of the first byte that differs from the stream, or -1. */
static inline long t_verify(const void *p, size_t len, uint64_t seed)
{
    size_t i;
    for (i = 0; i < len; i++)
        if (((const unsigned char *)p)[i] != t_byte(seed, i)) return (long)i;
    return -1;
}

/* Each rank's packed rkey and region address, gathered; returns this rank's view of rank r. */
typedef struct t_remote {
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    uint64_t      addr;
} t_remote_t;

static inline t_remote_t *t_exchange(rvx_context_t *ctx, rvx_mem_t *mem)
{
    t_remote_t mine, *all = (t_remote_t *)calloc((size_t)rvx_size(ctx), sizeof(*all));
    memset(&mine, 0, sizeof(mine));
    if (mem) {
        rvx_rkey_pack(mem, mine.packed);
        mine.addr = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    }
    if (rvx_allgather(ctx, &mine, sizeof(mine), all) != RVX_OK) {
        fprintf(stderr, "allgather failed\n");
        exit(1);
    }
    return all;
}

/* Rank 0 as the initiator: an endpoint to every other rank of n and its key from the exchange
 * (ep[0] stays NULL, as every entry on the other ranks). */
static inline void t_connect_from0(rvx_worker_t *w, int me, int n, const t_remote_t *rm,
                                   rvx_ep_t **ep, rvx_rkey_t *rk)
{
    int r;
    memset(rk, 0, (size_t)n * sizeof(*rk));
    for (r = 0; r < n; r++) ep[r] = NULL;
    for (r = 1; me == 0 && r < n; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }
}

/* The endpoints t_connect_from0 made, with their keys, gone. */
static inline void t_disconnect(rvx_ep_t **ep, rvx_rkey_t *rk, int n)
{
    int r;
    for (r = 0; r < n; r++)
        if (ep[r]) {
            rvx_rkey_release(&rk[r]);
            rvx_ep_destroy(ep[r]);
        }
}

/* The end of a test that exchanged keys: n keys released, the worker, region and context gone,
 * the exchange's array freed; returns the test's exit status. */
static inline int t_finish(rvx_context_t *ctx, rvx_worker_t *w, rvx_mem_t *mem, rvx_rkey_t *rk,
                           int n, t_remote_t *rm)
{
    int r;
    for (r = 0; r < n; r++) rvx_rkey_release(&rk[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}

#if RVX_AM
/* n short messages (handler id, one argument: the sender's rank) to ep, retried while the peer
 * has no room; fails the test unless all went within 30 s. */
static inline void t_am_burst(rvx_worker_t *w, rvx_ep_t *ep, unsigned id, int me, int n)
{
    uint64_t a = (uint64_t)me;
    double t0 = t_now();
    int i;
    for (i = 0; i < n && t_now() - t0 < 30; ) {
        rvx_status_t st = rvx_am_short(ep, id, &a, 1);
        if (st == RVX_OK) i++;
        else if (st == RVX_ERR_NO_RESOURCE) rvx_progress(w);
        else { T_STATUS(st, RVX_OK); return; }
    }
    T_CHECK(i == n, "rank %d sent %d of %d messages in 30 s", me, i, n);
}
#endif

#endif /* RVX_TESTLIB_H */
