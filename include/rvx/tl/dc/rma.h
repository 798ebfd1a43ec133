/* rvx/tl/dc/rma.h: dc_mlx5's one-sided operations: put (inline, one WQEBB from registers, bounce
 * copies, zero-copy), get, the atomics (the NIC's, and a compare-and-swap loop for those it
 * lacks), and the waits of a transfer that has no request or stops early. */
#ifndef RVX_TL_DC_RMA_H
#define RVX_TL_DC_RMA_H

/* ---- put ------------------------------------------------------------------------------------- */

/* RDMA WRITE with the data inline: ctrl, address, raddr, inline segment, zeros to the end of the
 * last WQEBB. */
RVX_INLINE rvx_status_t rvx__dc_put_inline(rvx__dc_ep_t *ep, const void *src, size_t len,
                                           uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    unsigned ds = 2 + rvx__dc_av_ds(ep->ifc) + RVX__MLX5_INLINE_DS(len), units, flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    rvx__dc_dci_t *d;
    uint8_t *wqe, *seg;
    size_t used;
    if (len == 0) return RVX_OK;
    d = rvx__dc_get(ep, nbb);
    if (RVX_UNLIKELY(!d)) return rvx__dc_ep_status(ep);
    seg = rvx__dc_begin(d, ep, 0, MLX5_OPCODE_RDMA_WRITE, ds, 0, 0, &pi, &flags, &wqe);
    rvx__mlx5_set_raddr(seg, raddr, rkey);
    seg = rvx__mlx5_next_seg(&d->sq, seg);
    units = rvx__mlx5_set_inline(&d->sq, seg, src, len);
    used = sizeof(struct mlx5_wqe_inl_data_seg) + len;
    rvx__mlx5_zero_pad(&d->sq, seg + used, units * RVX__MLX5_SEG - used, nbb * 4 - ds);
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
    return RVX_OK;
}

#if defined(__x86_64__)
/* Not the fast path: the WQE that asks for a completion (built from registers as well, with
 * fm_ce_se in byte 11), or (the general inline path) no DCI held, a full queue, a failed DCI,
 * the 48-byte address form. */
RVX_COLD rvx_status_t rvx__dc_put8_slow(rvx__dc_ep_t *ep, const void *src, uint64_t raddr,
                                        const rvx__mlx5_rkey_t *rkey)
{
    rvx__dc_dci_t *d = ep->dci;
    if (d->ctrl_w8 && !rvx__mlx5_sq_full(&d->sq, 1)) {
        uint32_t pi = d->sq.pi;
        unsigned flags = rvx__mlx5_moderate(&d->sq, 0);
        rvx__mlx5_bb_t bb;
        rvx__mlx5_bb_dc_write8(&bb, d->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &ep->av_lo, src, raddr, rkey);
        bb.q[0] = _mm_or_si128(bb.q[0], _mm_set_epi64x((long long)((uint64_t)flags << 24), 0));
        if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + 1);
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb);
        return RVX_OK;
    }
    return rvx__dc_put_inline(ep, src, 8, raddr, rkey);
}

/* An 8-byte put: one WQEBB (ctrl, address, raddr, inline 8) built in SSE registers, stored to the
 * DCI's queue and to its BlueFlame register (mlx5/wqe.h, rvx__mlx5_bb_dc_write8). */
RVX_INLINE rvx_status_t rvx__dc_put8(rvx__dc_ep_t *ep, const void *src, uint64_t raddr,
                                     const rvx__mlx5_rkey_t *rkey)
{
    rvx__dc_dci_t *d = ep->dci;
    rvx__mlx5_bb_t bb;
    uint32_t pi;
    pi = d->sq.pi;
    if (RVX_UNLIKELY((int32_t)(pi - d->pi_fast) >= 0)) return rvx__dc_put8_slow(ep, src, raddr, rkey);
    if (RVX_UNLIKELY(--d->sq.sig_left == 0)) return rvx__dc_put8_slow(ep, src, raddr, rkey);
    rvx__mlx5_bb_dc_write8(&bb, d->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &ep->av_lo, src, raddr,
                           rkey);
    rvx__dc_commit(d, ep, pi, 1, NULL, &bb);
    return RVX_OK;
}
#endif

/* Put short: ctrl, address, raddr, inline data. */
RVX_INLINE rvx_status_t rvx__dc_put_short(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__dc_put8(ep, src, raddr, rkey);
#endif
    return rvx__dc_put_inline(ep, src, len, raddr, rkey);
}

/* One WQE with a raddr segment and a data segment (tl/mlx5/rdma.h): WRITE or READ (opcode)
 * from/to local memory addr (lkey), on DCI d (which has room: rvx__dc_get). `o`: what to do when it retires; sig
 * forces a CQE. */
RVX_INLINE void rvx__dc_post_rdma(rvx__dc_dci_t *d, rvx__dc_ep_t *ep, unsigned opcode,
                                  const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
                                  const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    unsigned av_ds = rvx__dc_av_ds(ep->ifc), ds = RVX__MLX5_RDMA_DS(av_ds), flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    uint8_t *wqe, *seg = rvx__dc_begin(d, ep, 0, opcode, ds, sig, 0, &pi, &flags, &wqe);
    rvx__mlx5_rdma(&d->sq, &d->tx, seg, av_ds, pi, flags, opcode, addr, len, lkey, raddr, rkey, o);
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
}

#define RVX__DC_RDMA_NBB(ifc) RVX__MLX5_NBB(3 + rvx__dc_av_ds(ifc))

/* Put bcopy: copy into the DCI's bounce ring (chunks of RVX_PUT_BCOPY_MAX), one WRITE each. The
 * source can be reused on return. */
RVX_INLINE rvx_status_t rvx__dc_put_bcopy(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    size_t done = 0;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX_PUT_BCOPY_MAX && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        rvx__dc_dci_t *d;
        rvx__mlx5_op_t o;
        uint8_t *b;
        if (n <= RVX__TL_SHORT_MAX) {
            rvx_status_t st = rvx__dc_put_short(ep, (const uint8_t *)src + done, n, raddr + done, rkey);
            if (st != RVX_OK) return st;
            done += n;
            continue;
        }
        d = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
        if (RVX_UNLIKELY(!d)) return rvx__dc_ep_status(ep);
        b = rvx__dc_bounce(d, ep, n);
        if (RVX_UNLIKELY(!b)) return rvx__dc_ep_status(ep);
        memcpy(b, (const uint8_t *)src + done, n);
        memset(&o, 0, sizeof(o));
        o.bounce = d->b_head;
        rvx__dc_post_rdma(d, ep, MLX5_OPCODE_RDMA_WRITE, b, (uint32_t)n, ep->ifc->bounce_lkey,
                          raddr + done, rkey, &o, 0);
        done += n;
        if (RVX_UNLIKELY(done < len && ep->failed)) return rvx__dc_ep_status(ep); /* none after an error */
    }
    return RVX_OK;
}

/* Put or get zcopy: straight from / into registered memory, in WQEs of at most 1 GiB; the request
 * completes when the last one has (without a request, the call waits). */
RVX_INLINE rvx_status_t rvx__dc_rdma_zcopy(rvx__dc_ep_t *ep, unsigned opcode, const uint8_t *buf,
                                           size_t len, const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                           const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    rvx__dc_dci_t *d = NULL;
    if (len == 0) return RVX_OK;
    if (RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len))) return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__MLX5_DSEG_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done > RVX__MLX5_DSEG_MAX ? RVX__MLX5_DSEG_MAX : len - done;
        int last = done + n == len;
        rvx__dc_dci_t *nd = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
        rvx__mlx5_op_t o;
        if (RVX_UNLIKELY(!nd)) return rvx__dc_stop(ep, d, req);
        d = nd;
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_REQ;
        o.part = RVX__MLX5_PART(done, n, len);
        o.req = req;
        rvx__dc_post_rdma(d, ep, opcode, buf + done, (uint32_t)n, lmem->lkey, raddr + done, rkey,
                          &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && ep->failed)) return rvx__dc_stop(ep, d, req); /* none after an error */
    }
    return req == &own ? rvx__dc_wait_req(ep->ifc, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__dc_put_zcopy(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__dc_rdma_zcopy(ep, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem, raddr,
                              rkey, req);
}

/* ---- get ------------------------------------------------------------------------------------- */

/* Get bcopy: READs into the bounce ring, copied to dst as each completes; the request completes
 * with the last chunk. Without a request the call waits. */
RVX_INLINE rvx_status_t rvx__dc_get_bcopy(rvx__dc_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    rvx__dc_dci_t *d = NULL;
    if (len == 0) return RVX_OK;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX_PUT_BCOPY_MAX && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX_PUT_BCOPY_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        int last = done + n == len;
        rvx__dc_dci_t *nd = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
        rvx__mlx5_op_t o;
        uint8_t *b = nd ? rvx__dc_bounce(nd, ep, n) : NULL;
        if (RVX_UNLIKELY(!b)) return rvx__dc_stop(ep, d, req);
        d = nd;
        o.kind = RVX__MLX5_ON_COPY;
        o.part = RVX__MLX5_PART(done, n, len);
        o.len = (uint32_t)n;
        o.dst = (uint8_t *)dst + done;
        o.src = b;
        o.req = req;
        o.bounce = d->b_head;
        rvx__dc_post_rdma(d, ep, MLX5_OPCODE_RDMA_READ, b, (uint32_t)n, ep->ifc->bounce_lkey,
                          raddr + done, rkey, &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && ep->failed)) return rvx__dc_stop(ep, d, req); /* none after an error */
    }
    return req == &own ? rvx__dc_wait_req(ep->ifc, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__dc_get_zcopy(rvx__dc_ep_t *ep, void *dst, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__dc_rdma_zcopy(ep, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem, raddr,
                              rkey, req);
}

/* ---- atomics --------------------------------------------------------------------------------- */

/* One atomic WQE (tl/mlx5/rdma.h: native 64-bit, or masked with opmod 0x08 | log2(size)-2) after
 * the address segment. The old value lands in an 8-byte bounce slot and is copied to *fetch when
 * the WQE completes. */
RVX_INLINE rvx_status_t rvx__dc_amo(rvx__dc_ep_t *ep, unsigned opcode, unsigned size, uint64_t a,
                                    uint64_t b, uint64_t amask, uint64_t bmask, uint64_t raddr,
                                    const rvx__mlx5_rkey_t *rkey, void *fetch, rvx_request_t *req)
{
    rvx__mlx5_amo_t m = {opcode, a, b, amask, bmask};
    unsigned av_ds = rvx__dc_av_ds(ep->ifc), ds = rvx__mlx5_amo_ds(&m, size, av_ds), flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    rvx__dc_dci_t *d;
    uint8_t *wqe, *seg, *slot;
    rvx__mlx5_op_t o;
    rvx_request_t own;
    int wait = fetch && !req;

    d = rvx__dc_get(ep, nbb);
    if (RVX_UNLIKELY(!d)) return rvx__dc_ep_status(ep);
    slot = rvx__dc_bounce(d, ep, 8);
    if (RVX_UNLIKELY(!slot)) return rvx__dc_ep_status(ep);
    if (wait) req = &own;
    if (fetch) req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    seg = rvx__dc_begin(d, ep, rvx__mlx5_amo_opmod(&m, size), opcode, ds, fetch != NULL, 0, &pi,
                        &flags, &wqe);
    o = rvx__mlx5_amo_op(size, fetch, req, slot, d->b_head);
    rvx__mlx5_amo(&d->sq, &d->tx, seg, av_ds, pi, flags, &m, size, raddr, rkey, slot,
                  ep->ifc->bounce_lkey, &o);
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
    if (wait) return rvx__dc_wait_req(ep->ifc, &own);
    return fetch ? RVX_INPROGRESS : RVX_OK;
}

/* An rvx_amo_op_t as one NIC atomic (tl/mlx5/amo.h), or the compare-and-swap loop for the five
 * the NIC lacks, done when the call returns. */
RVX_INLINE rvx_status_t rvx__dc_atomic(rvx__dc_ep_t *ep, rvx_amo_op_t op, unsigned size, uint64_t v,
                                       uint64_t cmp, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                       void *fetch, rvx_request_t *req)
{
    rvx__mlx5_amo_t m = rvx__mlx5_amo_map(op, size, v, cmp);
    if (!m.opcode) return rvx__dc_amo_loop(ep, op, size, v, raddr, rkey, fetch);
    return rvx__dc_amo(ep, m.opcode, size, m.a, m.b, m.amask, m.bmask, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__dc_atomic64(rvx__dc_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    return rvx__dc_atomic(ep, op, 8, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__dc_atomic32(rvx__dc_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    return rvx__dc_atomic(ep, op, 4, operand, compare, raddr, rkey, fetch, req);
}

/* A transfer stops early: its endpoint failed. The chunks it posted on DCI d come back first (a
 * failed DCI returns every WQE, then recovers), so that none of them names req, perhaps the
 * caller's stack, once this returns. */
RVX_COLD rvx_status_t rvx__dc_stop(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, rvx_request_t *req)
{
    unsigned spins = 0;
    while (d && d->failed && d->sq.ci != d->sq.pi) {
        rvx__dc_hold(d);
        if (rvx__dc_drain(ep->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)(req->status = rvx__dc_ep_status(ep));
}

RVX_COLD rvx_status_t rvx__dc_wait_req(rvx__dc_iface_t *ifc, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

/* MULT, MIN, MAX, UMIN, UMAX: read, compute, compare-and-swap until no one else changed it. */
RVX_COLD rvx_status_t rvx__dc_amo_loop(rvx__dc_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                       uint64_t v, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                       void *fetch)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, old = 0, seen = 0, nv;
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned cs = size == 8 ? MLX5_OPCODE_ATOMIC_CS : MLX5_OPCODE_ATOMIC_MASKED_CS;
    rvx_status_t st = rvx__dc_amo(ep, fa, size, 0, 0, 0, 0, raddr, rkey, &old, NULL);
    while (st == RVX_OK) {
        if (!rvx__mlx5_amo_next(op, size, old, v, &nv)) return RVX_ERR_INVALID_PARAM;
        seen = 0;
        st = rvx__dc_amo(ep, cs, size, nv, old, ones, ones, raddr, rkey, &seen, NULL);
        if (st != RVX_OK || (seen & ones) == (old & ones)) break;
        old = seen;
    }
    if (st == RVX_OK && fetch) {
        if (size == 8) *(uint64_t *)fetch = old;
        else *(uint32_t *)fetch = (uint32_t)old;
    }
    return st;
}

#endif /* RVX_TL_DC_RMA_H */
