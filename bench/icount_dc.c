/* icount_dc: one noinline wrapper per dc_mlx5 operation, for counting instructions with callgrind
 * (bench/icount.sh runs each N and 2N times; the difference over N is one call). One process, an
 * endpoint to itself (its DCIs write to its own DCT), on rvxsim or a real adapter. Whatever keeps
 * the queues from filling (flushes, draining the CQ) runs between the counted calls.
 *
 *   icount_dc <op> <N>   op: put8 get8 flush_ready progress_idle progress_live_empty amo_add8 */
#define RVX_TL RVX_TL_DC_MLX5
#define BENCH_ICOUNT 1
#define BENCH_NO_AM 1
#include "bench_common.h"

RVX_NOINLINE rvx_status_t bench_get8(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr,
                                     const rvx_rkey_t *rk, rvx_request_t *req)
{
    return rvx_get(ep, dst, 8, raddr, rk, req);
}

RVX_NOINLINE rvx_status_t bench_flush_ready(rvx_ep_t *ep, rvx_request_t *req) { return rvx_ep_flush_nb(ep, req); }

static long loop_put8(icount_env_t *e, long n) { return icount_put8(e, n, 127); }
static long loop_amo_add8(icount_env_t *e, long n) { return icount_amo_add8(e, n, 63); }

static long loop_get8(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        rvx_status_t st;
        req.status = RVX_INPROGRESS;
        st = bench_get8(e->ep, &e->dst, e->base + 64, &e->rk, &req);
        if (st == RVX_INPROGRESS) st = rvx_wait(e->w, &req);
        errors += st != RVX_OK;
    }
    return errors;
}

/* A put, then its completion retired by progress: the flush finds the endpoint's work complete. */
static long loop_flush_ready(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        errors += rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK;
        errors += rvx_ep_flush(e->ep) != RVX_OK;
        req.status = RVX_INPROGRESS;
        errors += bench_flush_ready(e->ep, &req) != RVX_OK;
    }
    errors += *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64) != 42;
    return errors;
}

int main(int argc, char **argv)
{
    static const icount_op_t ops[] = {
        {"put8", loop_put8, 0}, {"get8", loop_get8, 0}, {"flush_ready", loop_flush_ready, 0},
        {"progress_idle", icount_progress_idle, 0},
        {"progress_live_empty", icount_progress_live_empty, 0}, {"amo_add8", loop_amo_add8, 0},
    };
    return icount_main(argc, argv, "icount_dc", ops, (int)(sizeof(ops) / sizeof(ops[0])));
}
