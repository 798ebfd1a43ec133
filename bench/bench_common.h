/* bench_common.h: what the bench programs share, once.
 *   - clock, median, pinning, and the self-launch of the two-rank benchmarks (tag_lat, rvx_lat,
 *     rndv_pipeline): run directly, they start themselves through build/bin/rvxrun -n 2
 *   - with BENCH_ICOUNT defined before the include: the instruction-count programs' part
 *     (icount_shm, icount_rc): the SINK handler, the wrappers that are the same on every transport,
 *     the one-process set-up (two workers, an endpoint to itself, one registered page) and the
 *     driver that runs the named operation's loop N times, checks and tears down.
 * Define the build's macros (RVX_TL, RVX_TAG, RVX_RNDV, RVX_AM_HANDLERS) first: this includes rvx.h. */
#ifndef RVX_BENCH_COMMON_H
#define RVX_BENCH_COMMON_H

/* BENCH_NO_AM: a transport that carries no messages (dc_mlx5 in this release): no handler, no
 * am_short8 wrapper. */
#if defined(BENCH_ICOUNT) && !defined(BENCH_NO_AM)
#define RVX_AM_HANDLERS(X) X(SINK, on_sink)
#endif
#include <rvx/rvx.h>
#include "batch16.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* A stamp per round trip: the TSC where there is one (a clock_gettime costs more than the
 * latency it would time), else nanoseconds; bench_ns_per_stamp() converts (measured over 50 ms). */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t bench_stamp(void) { return __rdtsc(); }
static inline double bench_ns_per_stamp(void)
{
    double t0 = bench_now_ns(), t1;
    uint64_t c0 = __rdtsc();
    while ((t1 = bench_now_ns()) - t0 < 50e6) {}
    return (t1 - t0) / (double)(__rdtsc() - c0);
}
#else
static inline uint64_t bench_stamp(void) { return (uint64_t)bench_now_ns(); }
static inline double bench_ns_per_stamp(void) { return 1.0; }
#endif

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v in place. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return v[n / 2];
}

/* A rank of a two-rank benchmark on its own CPU (rank r on CPU r). */
static inline void bench_pin(int rank, const char *prog)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rank, &set);
    if (sched_setaffinity(0, sizeof(set), &set)) fprintf(stderr, "%s: rank %d not pinned\n", prog, rank);
}

/* Run directly (no RVX_SIZE from a launcher), start two ranks of this program through
 * ../bin/rvxrun next to it, with its arguments and a time limit; returns only when launched. */
static inline void bench_self_launch(char **argv, const char *prog, int timeout_s)
{
    char exe[PATH_MAX], dir[PATH_MAX], run[PATH_MAX + 16], tmo[16];
    ssize_t n;
    char *args[16];
    int i, k = 0;
    if (getenv("RVX_SIZE")) return;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) exit(1);
    exe[n] = 0;
    strcpy(dir, exe);
    snprintf(run, sizeof(run), "%s/../bin/rvxrun", dirname(dir));
    snprintf(tmo, sizeof(tmo), "%d", timeout_s);
    args[k++] = run; args[k++] = (char *)"-n"; args[k++] = (char *)"2";
    args[k++] = (char *)"-t"; args[k++] = tmo; args[k++] = exe;
    for (i = 1; argv[i] && k < 15; i++) args[k++] = argv[i];
    args[k] = NULL;
    execv(run, args);
    fprintf(stderr, "%s: cannot run %s\n", prog, run);
    exit(1);
}

#ifdef BENCH_ICOUNT
/* ---- instruction counts: bench/icount.sh runs `<prog> <op> <N>` under callgrind with only the
 * op's noinline wrapper collected, N and 2N times; whatever keeps queues from filling (flushes,
 * draining) runs in the loops here, outside the wrappers. */

#ifndef BENCH_NO_AM
static uint64_t sunk;
static void on_sink(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    sunk += a[0];
}
#endif

/* The operations every transport has, each exactly what an application would write. */
RVX_NOINLINE rvx_status_t bench_put8(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_put(ep, src, 8, raddr, rk);
}

/* A batch of 16 8-byte puts (batch16.h). */
RVX_NOINLINE rvx_status_t bench_put8_batch16(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr,
                                             const rvx_rkey_t *rk)
{
    return bench_batch16(ep, src, raddr, rk);
}

RVX_NOINLINE int bench_progress_idle(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE int bench_progress_live_empty(rvx_worker_t *w) { return rvx_progress(w); }

#ifndef BENCH_NO_AM
RVX_NOINLINE rvx_status_t bench_am_short8(rvx_ep_t *ep, uint64_t arg)
{
    return rvx_am_short(ep, RVX_AM_SINK, &arg, 1);
}
#endif

#ifndef BENCH_NO_AM
/* 16 8-byte AMs (arguments arg, arg + 1, ...), one doorbell. Returns how many went: fewer
 * when the peer had no room (the caller progresses and sends the rest). */
RVX_NOINLINE int bench_am_short8_batch16(rvx_ep_t *ep, uint64_t arg)
{
    rvx_batch_t b;
    int i;
    rvx_batch_begin(&b, ep);
    for (i = 0; i < 16; i++) {
        uint64_t a = arg + (uint64_t)i;
        if (RVX_UNLIKELY(rvx_batch_am_short(&b, RVX_AM_SINK, &a, 1) != RVX_OK)) break;
    }
    rvx_batch_end(&b);
    return i;
}
#endif

RVX_NOINLINE rvx_status_t bench_amo_add8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rk, NULL, NULL);
}

typedef struct icount_env {
    rvx_context_t *ctx;
    rvx_worker_t  *w, *idle;  /* idle: a worker with no endpoint */
    rvx_ep_t      *ep;        /* w's endpoint to this process */
    rvx_mem_t     *mem;       /* one page; puts go to base + 64 */
    rvx_rkey_t     rk;
    uint64_t       base, src, dst;
} icount_env_t;

/* One operation's loop: n calls of its wrapper; returns the number of failures. */
typedef long (*icount_loop_t)(icount_env_t *e, long n);
typedef struct icount_op {
    const char   *name;
    icount_loop_t loop;
    int           raw;  /* the loop bypassed the endpoint's book-keeping: no flush, no teardown */
} icount_op_t;

/* Loops of the common operations. flush_mask: flush after every (mask + 1) calls, 0 never (a
 * queue that cannot fill). */
static inline long icount_put8(icount_env_t *e, long n, long flush_mask)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        errors += bench_put8(e->ep, &e->src, e->base + 64, &e->rk) != RVX_OK;
        if (flush_mask && (i & flush_mask) == flush_mask) errors += rvx_ep_flush(e->ep) != RVX_OK;
    }
    errors += rvx_ep_flush(e->ep) != RVX_OK;
    errors += *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64) != 42; /* the puts landed */
    return errors;
}

/* n batches of 16 puts (icount.sh divides by 16), flushed every 8 batches; the last word of each
 * batch checks that it landed. */
static inline long icount_put8_batch16(icount_env_t *e, long n)
{
    long i, errors = 0;
    uint64_t src[16];
    for (i = 0; i < 16; i++) src[i] = 42;
    for (i = 0; i < n; i++) {
        errors += bench_put8_batch16(e->ep, src, e->base + 64, &e->rk) != RVX_OK;
        if ((i & 7) == 7) errors += rvx_ep_flush(e->ep) != RVX_OK;
    }
    errors += rvx_ep_flush(e->ep) != RVX_OK;
    errors += *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64 + 8 * 15) != 42;
    return errors;
}

static inline long icount_progress_idle(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) errors += bench_progress_idle(e->idle) != 0;
    return errors;
}

static inline long icount_progress_live_empty(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) errors += bench_progress_live_empty(e->w) != 0;
    return errors;
}

static inline long icount_amo_add8(icount_env_t *e, long n, long flush_mask)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        errors += bench_amo_add8(e->ep, e->base, &e->rk) != RVX_OK;
        if (flush_mask && (i & flush_mask) == flush_mask) errors += rvx_ep_flush(e->ep) != RVX_OK;
    }
    errors += rvx_ep_flush(e->ep) != RVX_OK;
    if (*(uint64_t *)rvx_mem_addr(e->mem) != (uint64_t)n) {
        fprintf(stderr, "icount: amo_add8: counter %llu\n", (unsigned long long)*(uint64_t *)rvx_mem_addr(e->mem));
        errors++;
    }
    return errors;
}

#ifndef BENCH_NO_AM
/* 8-byte AMs to ourselves; every 8 the messages are delivered (and credits returned) outside the
 * counted calls; the handler's sum checks that each arrived once. */
static inline long icount_am_short8(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_status_t st;
        while ((st = bench_am_short8(e->ep, (uint64_t)i)) == RVX_ERR_NO_RESOURCE) rvx_progress(e->w);
        errors += st != RVX_OK;
        if ((i & 7) == 7) {
            errors += rvx_ep_flush(e->ep) != RVX_OK;
            while (rvx_progress(e->w)) {}
        }
    }
    while (rvx_progress(e->w)) {}
    if (sunk != (uint64_t)n * (uint64_t)(n - 1) / 2) {
        fprintf(stderr, "icount: am_short8: handler sum %llu\n", (unsigned long long)sunk);
        errors++;
    }
    return errors;
}
#endif

#ifndef BENCH_NO_AM
/* n batches of 16 AMs to ourselves, delivered (and credits returned) after each batch, outside
 * the counted calls; the handler's sum checks that each arrived once. */
static inline long icount_am_short8_batch16(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        int k = bench_am_short8_batch16(e->ep, 16 * (uint64_t)i);
        for (; k < 16; k++) { /* no room: the rest one by one, as room comes */
            uint64_t a = 16 * (uint64_t)i + (uint64_t)k;
            rvx_status_t st;
            while ((st = rvx_am_short(e->ep, RVX_AM_SINK, &a, 1)) == RVX_ERR_NO_RESOURCE)
                rvx_progress(e->w);
            errors += st != RVX_OK;
        }
        errors += rvx_ep_flush(e->ep) != RVX_OK;
        while (rvx_progress(e->w)) {}
    }
    if (sunk != (uint64_t)(16 * n) * (uint64_t)(16 * n - 1) / 2) {
        fprintf(stderr, "icount: am_short8_batch16: handler sum %llu\n", (unsigned long long)sunk);
        errors++;
    }
    return errors;
}
#endif

/* ---- doorbells: rvxsim's count of the MMIO writes that tell the NIC (RVXSIM_COUNT_MMIO=1) ---- */

/* The counts of this process so far: doorbell records, 8-byte doorbells, BlueFlame copies.
 * Nonzero: the model does not count (not rvxsim, or the mode is off). */
static inline int icount_mmio(uint64_t c[3])
{
    int (*fn)(uint64_t *) = (int (*)(uint64_t *))dlsym(RTLD_DEFAULT, "rvxsim_mmio_counts");
    return fn ? fn(c) : -1;
}

/* n calls of one 8-byte put (batch 0) or of a batch of 16, each between two readings of the
 * counts, so that only the calls' own writes count (not the flushes between them); prints
 * "mmio <op> puts=P dbrec=D doorbells=B bf_copies=F". */
static inline long icount_mmio_puts(icount_env_t *e, long n, int batch)
{
    uint64_t src[16], a[3], b[3], sum[3] = {0, 0, 0};
    long i, errors = 0;
    int k;
    for (k = 0; k < 16; k++) src[k] = 42;
    for (i = 0; i < n; i++) {
        if (icount_mmio(a)) {
            fprintf(stderr, "icount: no doorbell counts: run on rvxsim with RVXSIM_COUNT_MMIO=1\n");
            return 1;
        }
        if (batch) errors += bench_put8_batch16(e->ep, src, e->base + 64, &e->rk) != RVX_OK;
        else errors += bench_put8(e->ep, src, e->base + 64, &e->rk) != RVX_OK;
        icount_mmio(b);
        for (k = 0; k < 3; k++) sum[k] += b[k] - a[k];
        if ((i & 7) == 7) errors += rvx_ep_flush(e->ep) != RVX_OK;
    }
    printf("mmio %s puts=%ld dbrec=%llu doorbells=%llu bf_copies=%llu\n",
           batch ? "put8_batch16" : "put8", batch ? 16 * n : n, (unsigned long long)sum[0],
           (unsigned long long)sum[1], (unsigned long long)sum[2]);
    return errors;
}

static inline long icount_mmio_put8(icount_env_t *e, long n) { return icount_mmio_puts(e, n, 0); }
static inline long icount_mmio_put8_batch16(icount_env_t *e, long n) { return icount_mmio_puts(e, n, 1); }

/* `prog <op> <N>`: set up, run op's loop, flush, check, print "<op> x <N> done (<config>)". */
static inline int icount_main(int argc, char **argv, const char *prog, const icount_op_t *ops, int nops)
{
    icount_env_t e;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    const char *opname = argc > 2 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0, errors;
    const icount_op_t *op = NULL;
    int k;

    if (n < 1) {
        fprintf(stderr, "usage: %s <op> <N>\n", prog);
        return 2;
    }
    for (k = 0; k < nops; k++)
        if (!strcmp(opname, ops[k].name)) op = &ops[k];
    if (!op) {
        fprintf(stderr, "%s: unknown op %s\n", prog, opname);
        return 2;
    }
    memset(&e, 0, sizeof(e));
    e.src = 42;
    if (rvx_init(&e.ctx) || rvx_worker_create(e.ctx, &e.w) || rvx_worker_create(e.ctx, &e.idle) ||
        rvx_ep_create(e.w, 0, &e.ep) || rvx_mem_alloc(e.ctx, 4096, &e.mem))
        return 1;
    rvx_rkey_pack(e.mem, packed);
    if (rvx_rkey_unpack(e.ep, packed, &e.rk)) return 1;
    e.base = (uint64_t)(uintptr_t)rvx_mem_addr(e.mem);

    errors = op->loop(&e, n);
    if (!op->raw) errors += rvx_ep_flush(e.ep) != RVX_OK;
    if (errors) {
        fprintf(stderr, "%s: %ld of %ld %s calls failed\n", prog, errors, n, opname);
        return 1;
    }
    printf("%s x %ld done (%s)\n", opname, n, rvx_config_string());
    fflush(stdout);
    if (op->raw) _exit(0);
    rvx_rkey_release(&e.rk);
    rvx_worker_destroy(e.w);
    rvx_worker_destroy(e.idle);
    rvx_mem_dereg(e.mem);
    rvx_finalize(e.ctx);
    return 0;
}
#endif /* BENCH_ICOUNT */

#endif
