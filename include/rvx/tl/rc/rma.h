/* rvx/tl/rc/rma.h: rc_mlx5's puts and gets: the 8-byte put from SSE registers, inline puts, one
 * RDMA WQE (WRITE or READ), copied puts and gets through the bounce ring, zero-copy transfers. */
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
                                    uint64_t raddr, const rvx__mlx5_rkey_t *rkey, uint64_t hi)
{
    rvx__mlx5_bb_t bb;
    rvx__mlx5_bb_write8(&bb, c->ctrl_w8, pi, src, raddr, rkey, hi);
    rvx__mlx5_post_bb(&c->sq, pi, &bb);
}

/* Full queue, or the WQE that asks for a completion (sig_left reached 0) or carries a fence.
 * Arguments in the order put8 receives them, so that its tail call moves no register. */
RVX_COLD rvx_status_t rvx__rc_put8_slow(rvx__rc_conn_t *c, const void *src, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey)
{
    unsigned f;
    uint32_t pi;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    f = rvx__mlx5_moderate(&c->sq, 0);
    if (f & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    rvx__rc_put8_post(c, pi, src, raddr, rkey, (uint64_t)f << 24);
    return RVX_OK;
}

RVX_INLINE rvx_status_t rvx__rc_put8(rvx__rc_conn_t *c, const void *src, uint64_t raddr,
                                       const rvx__mlx5_rkey_t *rkey)
{
    uint32_t pi = c->sq.pi;
    /* a full queue, or the WQE that must ask for a completion (or carry a fence): out of line,
     * as a tail call so that this path needs no stack frame */
    if (RVX_UNLIKELY((int32_t)(pi - c->sq.pi_limit) >= 0)) return rvx__rc_put8_slow(c, src, raddr, rkey);
    if (RVX_UNLIKELY(--c->sq.sig_left == 0)) return rvx__rc_put8_slow(c, src, raddr, rkey);
    rvx__rc_put8_post(c, pi, src, raddr, rkey, 0);
    return RVX_OK;
}
#endif

/* RDMA WRITE with the data inline: ctrl, raddr, inline segment, zeros to the end of the last
 * WQEBB; one or two WQEBBs. */
RVX_INLINE rvx_status_t rvx__rc_put_short_gen(rvx__rc_conn_t *c, const void *src, size_t len,
                                                uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
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
    rvx__mlx5_commit(&c->sq, pi + nbb, wqe, nbb, NULL);
    return RVX_OK;
}

/* Put short: ctrl, raddr, inline data; one or two WQEBBs. */
RVX_INLINE rvx_status_t rvx__rc_put_short(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    if (len == 0) return RVX_OK;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__rc_put8(ep->c, src, raddr, rkey);
#endif
    return rvx__rc_put_short_gen(ep->c, src, len, raddr, rkey);
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

/* Put bcopy: copy into the bounce ring (chunks of RVX_PUT_BCOPY_MAX), one WRITE per chunk. The
 * source can be reused on return. */
RVX_INLINE rvx_status_t rvx__rc_put_bcopy(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    rvx__rc_conn_t *c = ep->c;
    size_t done = 0;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX__RC_BOUNCE_CHUNK && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        size_t n = len - done < RVX__RC_BOUNCE_CHUNK ? len - done : RVX__RC_BOUNCE_CHUNK;
        rvx__mlx5_op_t o;
        uint8_t *b;
        if (n <= RVX__TL_SHORT_MAX) {
            rvx__rc_put_short(ep, (const uint8_t *)src + done, n, raddr + done, rkey);
            done += n;
            continue;
        }
        b = rvx__rc_bounce(c, n);
        if (RVX_UNLIKELY(!b)) return rvx__rc_fail_st(c);
        memcpy(b, (const uint8_t *)src + done, n);
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_NONE;
        o.bounce = c->bs->head;
        rvx__rc_post_rdma(c, MLX5_OPCODE_RDMA_WRITE, b, (uint32_t)n, c->bs->lkey,
                            raddr + done, rkey, &o, 0);
        done += n;
        if (RVX_UNLIKELY(done < len && c->failed)) return rvx__rc_fail_st(c); /* none after an error */
    }
    return RVX_OK;
}

/* Put or get zcopy: straight from / into registered memory, in WQEs of at most 1 GiB; the request
 * completes when the last one has (without a request, the call waits). */
RVX_INLINE rvx_status_t rvx__rc_rdma_zcopy(rvx__rc_conn_t *c, unsigned opcode, const uint8_t *buf,
                                             size_t len, const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                             const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    if (len == 0) return RVX_OK;
    if (RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len))) return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__MLX5_DSEG_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done > RVX__MLX5_DSEG_MAX ? RVX__MLX5_DSEG_MAX : len - done;
        int last = done + n == len;
        rvx__mlx5_op_t o;
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_REQ;
        o.part = RVX__MLX5_PART(done, n, len);
        o.req = req;
        rvx__rc_post_rdma(c, opcode, buf + done, (uint32_t)n, lmem->lkey, raddr + done, rkey,
                            &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && c->failed)) return rvx__rc_stop(c, req); /* none after an error */
    }
    return req == &own ? rvx__rc_wait_req(c, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__rc_put_zcopy(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__rc_rdma_zcopy(ep->c, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem,
                                raddr, rkey, req);
}

/* ---- get ------------------------------------------------------------------------------------ */

/* Get bcopy: READs into the bounce ring, copied to dst as each completes; the request completes
 * with the last chunk. Without a request the call waits. */
RVX_INLINE rvx_status_t rvx__rc_get_bcopy(rvx__rc_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    rvx_request_t own;
    size_t done = 0;
    if (len == 0) return RVX_OK;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX__RC_BOUNCE_CHUNK && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__RC_BOUNCE_CHUNK) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done < RVX__RC_BOUNCE_CHUNK ? len - done : RVX__RC_BOUNCE_CHUNK;
        int last = done + n == len;
        rvx__mlx5_op_t o;
        uint8_t *b = rvx__rc_bounce(c, n);
        if (RVX_UNLIKELY(!b)) return rvx__rc_stop(c, req);
        o.kind = RVX__MLX5_ON_COPY;
        o.part = RVX__MLX5_PART(done, n, len);
        o.len = (uint32_t)n;
        o.dst = (uint8_t *)dst + done;
        o.src = b;
        o.req = req;
        o.bounce = c->bs->head;
        rvx__rc_post_rdma(c, MLX5_OPCODE_RDMA_READ, b, (uint32_t)n, c->bs->lkey,
                            raddr + done, rkey, &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && c->failed)) return rvx__rc_stop(c, req); /* none after an error */
    }
    return req == &own ? rvx__rc_wait_req(c, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__rc_get_zcopy(rvx__rc_ep_t *ep, void *dst, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__rc_rdma_zcopy(ep->c, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem,
                                raddr, rkey, req);
}

#endif /* RVX_TL_RC_RMA_H */
