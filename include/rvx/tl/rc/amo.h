/* rvx/tl/rc/amo.h: rc_mlx5's atomics: one atomic WQE (native or masked; built by tl/mlx5/rdma.h),
 * on which tl/mlx5/amo_loop.h runs every rvx_amo_op_t (one NIC atomic, or the compare-and-swap
 * loop of those the NIC lacks). */
#ifndef RVX_TL_RC_AMO_H
#define RVX_TL_RC_AMO_H

/* ---- atomics -------------------------------------------------------------------------------- */

/* One atomic WQE (tl/mlx5/rdma.h: native 64-bit, or masked with opmod 0x08 | log2(size)-2). The
 * old value lands in an 8-byte bounce slot and is copied to *fetch when the WQE completes. */
RVX_INLINE rvx_status_t rvx__rc_amo(rvx__rc_ep_t *ep, unsigned opcode, unsigned size,
                                      uint64_t a, uint64_t b, uint64_t amask, uint64_t bmask,
                                      uint64_t raddr, const rvx__mlx5_rkey_t *rkey, void *fetch,
                                      rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    rvx__mlx5_amo_t m = {opcode, a, b, amask, bmask};
    unsigned ds = rvx__mlx5_amo_ds(&m, size, 0), flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    uint8_t *wqe, *slot;
    rvx__mlx5_op_t o;
    rvx_request_t own;
    int wait = fetch && !req;

    slot = rvx__rc_bounce(c, 8);
    if (RVX_UNLIKELY(!slot)) return rvx__rc_fail_st(c);
    if (wait) req = &own;
    if (fetch) req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    RVX__RC_NEED(c, nbb);
    wqe = rvx__mlx5_begin(&c->sq, rvx__mlx5_amo_opmod(&m, size), opcode, ds, fetch != NULL, 0,
                          &pi, &flags);
    o = rvx__mlx5_amo_op(size, fetch, req, slot, c->bs->head);
    rvx__mlx5_amo(&c->sq, &c->tx, wqe + sizeof(struct mlx5_wqe_ctrl_seg), 0, pi, flags, &m, size,
                  raddr, rkey, slot, c->bs->lkey, &o);
    rvx__mlx5_commit(&c->sq, pi + nbb, wqe, nbb, NULL);
    if (wait) return rvx__mlx5_wait_req(c->ifc, &own);
    return fetch ? RVX_INPROGRESS : RVX_OK;
}

#include "../mlx5/amo_loop.h"

RVX_INLINE rvx_status_t rvx__rc_atomic64(rvx__rc_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    return rvx__mlx5_atomic(ep, op, 8, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__rc_atomic32(rvx__rc_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    return rvx__mlx5_atomic(ep, op, 4, operand, compare, raddr, rkey, fetch, req);
}

#endif /* RVX_TL_RC_AMO_H */
