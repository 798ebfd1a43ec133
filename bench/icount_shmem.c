/* icount_shmem: instructions per OpenSHMEM call, one noinline wrapper per operation, for
 * callgrind (bench/compare_shmem.sh runs each N and 2N times; the difference over N is one call).
 * PE 0 operates on the last PE (run on 2 PEs: a QP to another process on rc_mlx5, another
 * process's DCT on dc_mlx5, its shared memory on shm); the others wait in shmem_finalize. Beside each OpenSHMEM call, rvx's own call for the same
 * operation on the same endpoint and key, in the same binary. Gets and fetching atomics are rvx's
 * blocking forms in both (no request); the script leaves their wait for the CQE out of the count
 * (rvx__mlx5_cq_await, as make icount does: the spin on the network, whose length is the model's
 * timing, not the call's cost).
 *
 *   icount_shmem <op> <N>   op: putmem8 long_p quiet long_g fetch_add
 *                               rvx_put8 rvx_flush rvx_get8 rvx_fadd8
 * Built with rvxshcc for each transport; with -DBENCH_OSHMEM by oshcc, only the OpenSHMEM rows
 * (and no wait to leave out). */
#ifdef BENCH_OSHMEM
/* Debian ships Open MPI's liboshmem without its header: the specification's prototypes of the
 * calls used here */
#include <stddef.h>
void shmem_init(void);
int shmem_my_pe(void);
int shmem_n_pes(void);
void shmem_barrier_all(void);
void shmem_finalize(void);
void *shmem_calloc(size_t count, size_t size);
void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_long_p(long *dest, long value, int pe);
void shmem_quiet(void);
long shmem_long_g(const long *source, int pe);
long shmem_long_atomic_fetch_add(long *dest, long value, int pe);
#else
#include <shmem.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINL __attribute__((noinline, used))

NOINL void bench_sh_putmem8(long *d, const long *s, int pe) { shmem_putmem(d, s, 8, pe); }
NOINL void bench_sh_long_p(long *d, long v, int pe) { shmem_long_p(d, v, pe); }
NOINL void bench_sh_quiet(void) { shmem_quiet(); }
NOINL long bench_sh_long_g(const long *s, int pe) { return shmem_long_g(s, pe); }
NOINL long bench_sh_fetch_add(long *d, int pe) { return shmem_long_atomic_fetch_add(d, 1, pe); }

#ifndef BENCH_OSHMEM
/* rvx's own, on the endpoint and key shmem.h uses for PE 0 */
NOINL rvx_status_t bench_rvx_put8(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr,
                                  const rvx_rkey_t *rk)
{
    return rvx_put(ep, src, 8, raddr, rk);
}
NOINL rvx_status_t bench_rvx_flush(rvx_worker_t *w) { return rvx_worker_flush(w); }
NOINL uint64_t bench_rvx_get8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk)
{
    uint64_t v = 0;
    return rvx_get(ep, &v, 8, raddr, rk, NULL) == RVX_OK ? v : ~(uint64_t)0;
}
NOINL uint64_t bench_rvx_fadd8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk)
{
    uint64_t f = 0;
    return rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rk, &f, NULL) == RVX_OK ? f : ~(uint64_t)0;
}
#endif

int main(int argc, char **argv)
{
    const char *op;
    long n, i, errors = 0, *x, src = 42;
    int pe;
    if (argc < 3) {
        fprintf(stderr, "usage: icount_shmem <op> <N>\n");
        return 2;
    }
    op = argv[1];
    n = atol(argv[2]);
    shmem_init();
    x = (long *)shmem_calloc(8, sizeof(long));
    if (!x) return 1;
    pe = shmem_n_pes() - 1;
    x[2] = 7;
    x[4] = 9;
    shmem_barrier_all();
    if (shmem_my_pe() != 0) {
        shmem_finalize();
        return 0;
    }
    shmem_quiet(); /* the barrier's puts: the counted quiets find nothing outstanding */
    /* the queues fill with puts: a quiet every 32 puts, outside the counted calls (every 64,
     * the share of puts that took the queue's slow path moved a row by up to 8 instructions
     * from run to run) */
#define SYNC_ALL() shmem_quiet()
#define LOOP(call)                                                                                 \
    for (i = 0; i < n; i++) {                                                                      \
        call;                                                                                      \
        if ((i & 31) == 31) SYNC_ALL();                                                            \
    }
    if (!strcmp(op, "putmem8")) { LOOP(bench_sh_putmem8(&x[1], &src, pe)) }
    else if (!strcmp(op, "long_p")) { LOOP(bench_sh_long_p(&x[1], i, pe)) }
    else if (!strcmp(op, "quiet")) { LOOP(bench_sh_quiet()) }
    else if (!strcmp(op, "long_g")) { LOOP(errors += bench_sh_long_g(&x[2], pe) != 7) }
    else if (!strcmp(op, "fetch_add")) { LOOP(errors += bench_sh_fetch_add(&x[3], pe) != i) }
#ifndef BENCH_OSHMEM
    else {
        rvx__sh_peer_t *p = &rvx__sh.peers[pe];
        uint64_t raddr = p->heap_rbase + (uint64_t)((uintptr_t)&x[4] - rvx__sh.heap_base), s8 = 42;
        if (!strcmp(op, "rvx_put8")) { LOOP(errors += bench_rvx_put8(p->ep, &s8, raddr, &p->heap_rkey) != RVX_OK) }
        else if (!strcmp(op, "rvx_flush")) { LOOP(errors += bench_rvx_flush(rvx__sh.w) != RVX_OK) }
        else if (!strcmp(op, "rvx_get8")) { LOOP(errors += bench_rvx_get8(p->ep, raddr, &p->heap_rkey) != 9) }
        else if (!strcmp(op, "rvx_fadd8")) { LOOP(errors += bench_rvx_fadd8(p->ep, raddr + 8, &p->heap_rkey) != (uint64_t)i) }
        else { fprintf(stderr, "icount_shmem: unknown op %s\n", op); return 2; }
    }
#else
    else { fprintf(stderr, "icount_shmem: unknown op %s\n", op); return 2; }
#endif
    shmem_quiet();
    if (!strcmp(op, "putmem8") && shmem_long_g(&x[1], pe) != 42) errors++;
    shmem_finalize();
    if (errors) fprintf(stderr, "icount_shmem %s: %ld errors\n", op, errors);
    return errors != 0;
}
