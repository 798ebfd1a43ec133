/* rvx/tl/rc/rma.h: rc_mlx5's puts and gets: the 8-byte put from SSE registers, inline puts, one
 * RDMA WQE (WRITE or READ), and its steps of the chunk loops (tl/mlx5/chunk.h) behind the copied
 * puts and gets through the bounce ring and the zero-copy transfers. */
#ifndef RVX_TL_RC_RMA_H
#define RVX_TL_RC_RMA_H

/* ---- put ------------------------------------------------------------------------------------ */

#if defined(__x86_64__)

/* An 8-byte put, the case the kit is measured by: one WQEBB built in SSE registers (ctrl, raddr,
 * inline header + 8 bytes, a zero quarter: mlx5/wqe.h, rvx__mlx5_bb_write8) and stored from
 * them to the queue and to the BlueFlame register; the rkey word and the ctrl's opcode/QPN/DS
 * are precomputed. `hi` is bytes 8-15 of the ctrl segment (fm_ce_se in byte 11): 0 on the fast
 * path. */
RVX_INLINE void rvx__rc_put8_post(rvx__rc_conn_t *c, uint32_t pi, const void *src,
                                    uint64_t raddr, const rvx__mlx5_rkey_t *rkey, uint64_t hi,
                                    int more)
{
    rvx__mlx5_bb_t bb;
    rvx__mlx5_bb_write8(&bb, c->ctrl_w8, pi, src, raddr, rkey, hi);
    rvx__mlx5_post_bb(&c->sq, pi, &bb, more);
}

/* Full queue, the WQE that asks for a completion (or carries a fence), or a conn out of the
 * flush list. Arguments in the order put8 receives them, so that its tail call moves no
 * register but `more`'s; the payload by value, so that a caller's value in a register never
 * needs a home in memory (shmem_long_p). */
RVX_COLD rvx_status_t rvx__rc_put8_slow(rvx__rc_conn_t *c, uint64_t v, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, int more)
{
    unsigned f;
    uint32_t pi;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    f = rvx__mlx5_moderate(&c->sq, 0);
    if (f & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    rvx__rc_put8_post(c, pi, &v, raddr, rkey, (uint64_t)f << 24, more);
    return RVX_OK;
}

/* `more` (a constant): write the WQE and leave the doorbell to rvx__rc_ep_ring. */
RVX_INLINE rvx_status_t rvx__rc_put8(rvx__rc_conn_t *c, const void *src, uint64_t raddr,
                                       const rvx__mlx5_rkey_t *rkey, int more)
{
    uint32_t pi = c->sq.pi;
    /* a full queue, the WQE that must ask for a completion (or carry a fence), a conn out of the
     * flush list: one limit (mlx5/sq.h); out of line, as a tail call so that this path needs no
     * stack frame */
    if (RVX_COLD_BRANCH((int32_t)(pi - c->sq.pi_limit) >= 0)) {
        rvx_compiler_barrier(); /* the payload read here, not above the branch: the fast path
                                 * loads it straight into its SSE register */
        return rvx__rc_put8_slow(c, rvx__load_u64(src), raddr, rkey, more);
    }
    rvx__rc_put8_post(c, pi, src, raddr, rkey, 0, more);
    return RVX_OK;
}
#endif

/* RDMA WRITE with the data inline: ctrl, raddr, inline segment, zeros to the end of the last
 * WQEBB; one or two WQEBBs. */
RVX_INLINE rvx_status_t rvx__rc_put_short_gen(rvx__rc_conn_t *c, const void *src, size_t len,
                                                uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                                int more)
{
    uint32_t pi, nbb, ds = 2 + RVX__MLX5_INLINE_DS(len);
    uint8_t *wqe, *seg;
    unsigned flags, units;
    size_t used;
    nbb = RVX__MLX5_NBB(ds);
    RVX__RC_NEED(c, nbb);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 0);
    rvx__mlx5_set_ctrl(wqe, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->sq.qpn8, ds, flags, 0);
    rvx__mlx5_set_raddr(wqe + sizeof(struct mlx5_wqe_ctrl_seg), raddr, rkey);
    seg = rvx__mlx5_next_seg(&c->sq, wqe + sizeof(struct mlx5_wqe_ctrl_seg));
    units = rvx__mlx5_set_inline(&c->sq, seg, src, len);
    used = sizeof(struct mlx5_wqe_inl_data_seg) + len;
    rvx__mlx5_zero_pad(&c->sq, seg + used, units * RVX__MLX5_SEG - used, nbb * 4 - ds);
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + nbb);
    rvx__mlx5_finish(&c->sq, pi, nbb, wqe, NULL, more);
    return RVX_OK;
}

/* Put short: ctrl, raddr, inline data; one or two WQEBBs. With `more`, the doorbell waits for
 * rvx__rc_ep_ring (or any post that commits). */
RVX_INLINE rvx_status_t rvx__rc_put_short_m(rvx__rc_ep_t *ep, const void *src, size_t len,
                                            uint64_t raddr, const rvx__mlx5_rkey_t *rkey, int more)
{
    if (len == 0) return RVX_OK;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__rc_put8(ep->c, src, raddr, rkey, more);
#endif
    return rvx__rc_put_short_gen(ep->c, src, len, raddr, rkey, more);
}

RVX_INLINE rvx_status_t rvx__rc_put_short(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    return rvx__rc_put_short_m(ep, src, len, raddr, rkey, 0);
}

/* Tell the NIC of every WQE the endpoint's "more" calls left (tl/mlx5/wqe.h, rvx__mlx5_ring). */
RVX_INLINE void rvx__rc_ep_ring(rvx__rc_ep_t *ep)
{
    rvx__mlx5_ring(&ep->c->sq);
}

/* One WQE with a raddr segment and a data segment (tl/mlx5/rdma.h): WRITE or READ (opcode),
 * from/to local memory addr (lkey). `o` describes what to do when it retires; sig forces a CQE. */
RVX_INLINE void rvx__rc_post_rdma(rvx__rc_conn_t *c, unsigned opcode, const void *addr,
                                    uint32_t len, uint32_t lkey, uint64_t raddr,
                                    const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    uint32_t pi;
    uint8_t *wqe;
    unsigned flags;
    RVX__RC_NEED(c, 1);
    wqe = rvx__mlx5_begin(&c->sq, 0, opcode, RVX__MLX5_DS_RDMA, sig, 0, &pi, &flags);
    rvx__mlx5_rdma(&c->sq, &c->tx, wqe + sizeof(struct mlx5_wqe_ctrl_seg), 0, pi, flags, opcode,
                   addr, len, lkey, raddr, rkey, o);
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

/* ---- the chunk loops (tl/mlx5/chunk.h): rc_mlx5's steps ------------------------------------- */

/* A connection's chunks all go to it: q is ep->c, never NULL (so the loops' tests of it fold). */

RVX_INLINE rvx__rc_conn_t *rvx__rc_chunk_q(rvx__rc_ep_t *ep)
{
    if (!ep->c) __builtin_unreachable();
    return ep->c;
}

RVX_INLINE uint8_t *rvx__rc_chunk_bounce(rvx__rc_ep_t *ep, rvx__rc_conn_t *c, size_t n)
{
    (void)ep;
    return rvx__rc_bounce(c, n);
}

RVX_INLINE uint64_t rvx__rc_chunk_bhead(rvx__rc_ep_t *ep, rvx__rc_conn_t *c)
{
    (void)ep;
    return c->bs->head;
}

RVX_INLINE uint32_t rvx__rc_chunk_lkey(rvx__rc_ep_t *ep, rvx__rc_conn_t *c)
{
    (void)ep;
    return c->bs->lkey;
}

RVX_INLINE void rvx__rc_chunk_post(rvx__rc_ep_t *ep, rvx__rc_conn_t *c, unsigned opcode,
                                   const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
                                   const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    (void)ep;
    rvx__rc_post_rdma(c, opcode, addr, len, lkey, raddr, rkey, o, sig);
}

RVX_INLINE int rvx__rc_chunk_failed(rvx__rc_ep_t *ep, rvx__rc_conn_t *c)
{
    (void)ep;
    return c->failed;
}

RVX_INLINE rvx_status_t rvx__rc_chunk_status(rvx__rc_ep_t *ep, rvx__rc_conn_t *c)
{
    (void)ep;
    return rvx__rc_fail_st(c);
}

/* Before the first chunk, q is the connection as well. */
RVX_INLINE rvx__rc_conn_t *rvx__rc_chunk_none(rvx__rc_ep_t *ep)
{
    return rvx__rc_chunk_q(ep);
}

RVX_INLINE rvx_status_t rvx__rc_chunk_stop(rvx__rc_ep_t *ep, rvx__rc_conn_t *c, rvx_request_t *req)
{
    (void)ep;
    return rvx__rc_stop(c, req);
}

RVX_INLINE rvx_status_t rvx__rc_chunk_wait(rvx__rc_ep_t *ep, rvx__rc_conn_t *c, rvx_request_t *req)
{
    (void)ep;
    return rvx__mlx5_wait_req(c->ifc, req);
}

#include "../mlx5/chunk.h"

/* ---- the batch scope (tl/mlx5/batch.h) and the blocking fetches (tl/mlx5/fetch.h): rc_mlx5's
 * steps ---- */

RVX_INLINE rvx__rc_conn_t *rvx__rc_ep_q(rvx__rc_ep_t *ep)
{
    return ep->c;
}

/* The one-WQEBB put's limit: the end of the room (the send budget, tl/rc/send.h) or the WQE that
 * asks for a completion; pi while the conn is out of the flush list, so that its first post puts
 * it back. */
RVX_INLINE uint32_t rvx__rc_q_fast(const rvx__rc_conn_t *c)
{
    return c->sq.pi_limit;
}

#if defined(__x86_64__)
RVX_INLINE unsigned rvx__rc_ep_av(rvx__rc_ep_t *ep, __m128i *av)
{
    (void)ep;
    *av = _mm_setzero_si128();
    return 0; /* no address segment */
}

RVX_INLINE void rvx__rc_bb_put8(rvx__mlx5_bb_t *bb, uint64_t ctrl_w8, uint32_t pi, __m128i av,
                                const void *src, uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    (void)av;
    rvx__mlx5_bb_write8(bb, ctrl_w8, pi, src, raddr, rkey, 0);
}
#endif

#include "../mlx5/batch.h"

/* Room for nbb WQEBBs, not failed, and nothing of the conn's bounce segment in flight (a conn
 * without a segment has lim == head: not this way). Neither the WQE that asks for a completion
 * nor a conn out of the flush list stops a fetch: its own WQE is signaled and the call waits for
 * it, so a worker flush has nothing of it to find (the first fetch after a worker flush stays on
 * this path). */
RVX_INLINE int rvx__rc_fetch_ok(rvx__rc_ep_t *ep, rvx__rc_conn_t *c, uint32_t nbb)
{
    (void)ep;
    return rvx__mlx5_sq_room_for(&c->sq, nbb) && !c->failed &&
           c->bs->lim - c->bs->head == RVX__RC_BOUNCE_SEG;
}

/* The fetch slot of the conn's bounce segment. */
RVX_INLINE const rvx__mlx5_fslot_t *rvx__rc_fetch_slot(const rvx__rc_conn_t *c)
{
    return &c->bs->fs;
}

/* The segment is in use, as rvx__rc_bounce(c, 8) would have made it: no fetch takes the slot and
 * no other conn takes the segment until the record retires. */
RVX_COLD uint64_t rvx__rc_fetch_take(rvx__rc_conn_t *c)
{
    return c->bs->head += 64;
}

RVX_INLINE void rvx__rc_fetch_commit(rvx__rc_ep_t *ep, rvx__rc_conn_t *c, uint32_t pi,
                                     uint32_t nbb, uint8_t *wqe, const rvx__mlx5_bb_t *bb)
{
    (void)ep;
    rvx__mlx5_commit(&c->sq, pi + nbb, wqe, nbb, bb);
}

RVX_INLINE int rvx__rc_fetch_quiet(rvx__rc_ep_t *ep)
{
    const rvx__rc_iface_t *ifc = ep->c->ifc;
    return !((uintptr_t)ifc->wflush | ifc->nrec); /* one branch for both */
}

RVX_INLINE rvx__rc_iface_t *rvx__rc_fetch_ifc(const rvx__rc_conn_t *c)
{
    return c->ifc;
}

#include "../mlx5/fetch.h"

/* ---- bcopy and zcopy ------------------------------------------------------------------------ */

RVX_INLINE rvx_status_t rvx__rc_put_bcopy(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    return rvx__mlx5_put_bcopy(ep, src, len, raddr, rkey);
}

RVX_INLINE rvx_status_t rvx__rc_put_zcopy(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_rdma_zcopy(ep, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem,
                                raddr, rkey, req);
}

RVX_INLINE rvx_status_t rvx__rc_get_bcopy(rvx__rc_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_get(ep, dst, len, raddr, rkey, req);
}

RVX_INLINE rvx_status_t rvx__rc_get_zcopy(rvx__rc_ep_t *ep, void *dst, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_rdma_zcopy(ep, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem,
                                raddr, rkey, req);
}

#endif /* RVX_TL_RC_RMA_H */
