/* icount_shm: one noinline wrapper per operation, for counting instructions with callgrind
 * (bench/icount.sh runs each N and 2N times; the difference over N is the cost of one call,
 * with set-up cancelled). Single process, loopback endpoint, so only this thread runs.
 * Set-up, the wrappers every transport shares and the driver: bench/bench_common.h.
 *
 *   icount_shm <op> <N>     op: put8 ref_put8 get8 flush_idle progress_idle
 *                               progress_live_empty am_short8 amo_add8 */
#define BENCH_ICOUNT 1
#include "bench_common.h"

/* The floor: what hand-written code does with a mapping it already has, no checks at all. */
RVX_NOINLINE rvx_status_t ref_put8(uint8_t *mapped, uint64_t off, const uint64_t *src)
{
    memcpy(mapped + off, src, 8);
    return RVX_OK;
}

RVX_NOINLINE rvx_status_t bench_get8(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_get(ep, dst, 8, raddr, rk, NULL);
}

RVX_NOINLINE rvx_status_t bench_flush_idle(rvx_ep_t *ep) { return rvx_ep_flush_nb(ep, NULL); }

/* shm's queues are rings drained by the peer's progress: puts and atomics never wait */
static long loop_put8(icount_env_t *e, long n) { return icount_put8(e, n, 0); }
static long loop_amo_add8(icount_env_t *e, long n) { return icount_amo_add8(e, n, 0); }

static long loop_ref_put8(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) errors += ref_put8(e->rk.lbase, 64, &e->src) != RVX_OK;
    return errors;
}

static long loop_get8(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) errors += bench_get8(e->ep, &e->dst, e->base + 64, &e->rk) != RVX_OK;
    return errors;
}

static long loop_flush_idle(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) errors += bench_flush_idle(e->ep) != RVX_OK;
    return errors;
}

static long loop_am_short8(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        errors += bench_am_short8(e->ep, (uint64_t)i) != RVX_OK;
        if ((i & 63) == 63) while (rvx_progress(e->w)) {} /* drain, outside the counted call */
    }
    return errors;
}

int main(int argc, char **argv)
{
    static const icount_op_t ops[] = {
        {"put8", loop_put8, 0}, {"ref_put8", loop_ref_put8, 0}, {"get8", loop_get8, 0},
        {"flush_idle", loop_flush_idle, 0}, {"progress_idle", icount_progress_idle, 0},
        {"progress_live_empty", icount_progress_live_empty, 0}, {"am_short8", loop_am_short8, 0},
        {"amo_add8", loop_amo_add8, 0}, {"put8_batch16", icount_put8_batch16, 0},
        {"am_short8_batch16", icount_am_short8_batch16, 0},
    };
    return icount_main(argc, argv, "icount_shm", ops, (int)(sizeof(ops) / sizeof(ops[0])));
}
