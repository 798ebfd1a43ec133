/* icount_fetch.h: what icount_rc and icount_dc share, once: the wait for a CQE outside the
 * count, the wrappers of the blocking fetches (get8, get8_req, amo_fadd8) and their loops, and the
 * general path's wait on a get or fetching add posted with a request (bench_wait). Include after
 * bench_common.h. */
#ifndef BENCH_ICOUNT_FETCH_H
#define BENCH_ICOUNT_FETCH_H

/* Wait until the CQE at the consumer index is there, without consuming it. */
static void cqe_present(rvx_worker_t *w)
{
    rvx__tl_iface_t *ifc = &w->iface[0];
    while (!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own)) rvx_cpu_relax();
}

/* get8: a blocking 8-byte get (no request: done on return); get8_req: the same posted with a
 * request, its completion outside the count (what get8 counted until the fetch path). */
RVX_NOINLINE rvx_status_t bench_get8(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_get(ep, dst, 8, raddr, rk, NULL);
}

RVX_NOINLINE rvx_status_t bench_get8_req(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr,
                                         const rvx_rkey_t *rk, rvx_request_t *req)
{
    return rvx_get(ep, dst, 8, raddr, rk, req);
}

/* amo_fadd8: a fetching add that waits for the old value (amo_add8 in bench/icount.sh's mlx5
 * rows; bench_amo_add8, the add without a fetch, is amo_add8_nf there). */
RVX_NOINLINE rvx_status_t bench_amo_fadd8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk, uint64_t *old)
{
    return rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rk, old, NULL);
}

static long loop_get8_req(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        rvx_status_t st;
        req.status = RVX_INPROGRESS;
        st = bench_get8_req(e->ep, &e->dst, e->base + 64, &e->rk, &req);
        if (st == RVX_INPROGRESS) st = rvx_wait(e->w, &req);
        errors += st != RVX_OK;
    }
    return errors;
}

/* The general path's wait, for comparison: a get (or a fetching add) posted with a request, its
 * CQE present, then rvx_wait counted alone (bench_wait: the CQE's retirement and the copy). */
RVX_NOINLINE rvx_status_t bench_wait(rvx_worker_t *w, rvx_request_t *req) { return rvx_wait(w, req); }

static long loop_req_wait(icount_env_t *e, long n, int amo)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        rvx_status_t st;
        uint64_t v = ~0ull;
        req.status = RVX_INPROGRESS;
        st = amo ? rvx_atomic64(e->ep, RVX_AMO_ADD, 1, 0, e->base, &e->rk, &v, &req)
                 : rvx_get(e->ep, &v, 8, e->base, &e->rk, &req);
        if (st == RVX_INPROGRESS) {
            cqe_present(e->w);
            st = bench_wait(e->w, &req);
        }
        errors += st != RVX_OK || v != (amo ? (uint64_t)i : (uint64_t)n);
    }
    return errors;
}

static long loop_get8_req_wait(icount_env_t *e, long n)
{
    *(volatile uint64_t *)(uintptr_t)e->base = (uint64_t)n;
    return loop_req_wait(e, n, 0);
}

static long loop_amo_fadd8_req_wait(icount_env_t *e, long n)
{
    *(volatile uint64_t *)(uintptr_t)e->base = 0;
    return loop_req_wait(e, n, 1);
}

/* Blocking gets of the word a put wrote: each must return it. */
static long loop_get8(icount_env_t *e, long n)
{
    long i, errors = rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK;
    errors += rvx_ep_flush(e->ep) != RVX_OK;
    for (i = 0; i < n; i++) {
        e->dst = 0;
        errors += bench_get8(e->ep, &e->dst, e->base + 64, &e->rk) != RVX_OK;
        errors += e->dst != 42;
    }
    return errors;
}

/* Fetching adds of 1 on the word at base: each must return the count so far. */
static long loop_amo_fadd8(icount_env_t *e, long n)
{
    long i, errors = 0;
    *(volatile uint64_t *)(uintptr_t)e->base = 0;
    for (i = 0; i < n; i++) {
        uint64_t old = ~0ull;
        errors += bench_amo_fadd8(e->ep, e->base, &e->rk, &old) != RVX_OK;
        errors += old != (uint64_t)i;
    }
    return errors;
}

#endif /* BENCH_ICOUNT_FETCH_H */
