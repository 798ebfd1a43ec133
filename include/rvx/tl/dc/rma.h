/* rvx/tl/dc/rma.h: dc_mlx5's one-sided operations: put (inline, one WQEBB from registers), one
 * RDMA WQE and its steps of the chunk loops (tl/mlx5/chunk.h) behind bounce copies, zero-copy and
 * get, the atomics (the NIC's, and a compare-and-swap loop for those it lacks), the wait of a call
 * without a request (tl/mlx5/wait.h) and the stop of a transfer that stops early. */
#ifndef RVX_TL_DC_RMA_H
#define RVX_TL_DC_RMA_H

/* ---- waiting inside a call (tl/mlx5/wait.h) -------------------------------------------------- */

/* One poll of the CQ for a call that waits: nonzero when it found something. */
RVX_INLINE int rvx__dc_poll_blocking(rvx__dc_iface_t *ifc)
{
    return rvx__dc_drain(ifc);
}

#include "../mlx5/wait.h"

/* ---- put ------------------------------------------------------------------------------------- */

/* RDMA WRITE with the data inline: ctrl, address, raddr, inline segment, zeros to the end of the
 * last WQEBB. */
RVX_INLINE rvx_status_t rvx__dc_put_inline(rvx__dc_ep_t *ep, const void *src, size_t len,
                                           uint64_t raddr, const rvx__mlx5_rkey_t *rkey, int more)
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
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL, more);
    return RVX_OK;
}

#if defined(__x86_64__)
/* Not the fast path: the WQE that asks for a completion (built from registers as well, with
 * fm_ce_se in byte 11), or (the general inline path) no DCI held, a full queue, a failed DCI,
 * the 48-byte address form. */
RVX_COLD rvx_status_t rvx__dc_put8_slow(rvx__dc_ep_t *ep, uint64_t v, uint64_t raddr,
                                        const rvx__mlx5_rkey_t *rkey, int more)
{
    const void *src = &v; /* by value, as rc_mlx5's (rvx__rc_put8_slow) */
    rvx__dc_dci_t *d = ep->dci;
    if (d->ctrl_w8 && rvx__mlx5_sq_room_for(&d->sq, 1)) {
        uint32_t pi = d->sq.pi;
        unsigned flags = rvx__mlx5_moderate(&d->sq, 0);
        rvx__mlx5_bb_t bb;
        rvx__mlx5_bb_dc_write8(&bb, d->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &ep->av_lo, src, raddr, rkey);
        bb.q[0] = _mm_or_si128(bb.q[0], _mm_set_epi64x((long long)((uint64_t)flags << 24), 0));
        if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + 1);
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb, more);
        return RVX_OK;
    }
    return rvx__dc_put_inline(ep, src, 8, raddr, rkey, more);
}

/* An 8-byte put: one WQEBB (ctrl, address, raddr, inline 8) built in SSE registers, stored to the
 * DCI's queue and to its BlueFlame register (mlx5/wqe.h, rvx__mlx5_bb_dc_write8); with `more`
 * (a constant), to the queue only, for rvx__dc_ep_ring. */
RVX_INLINE rvx_status_t rvx__dc_put8(rvx__dc_ep_t *ep, const void *src, uint64_t raddr,
                                     const rvx__mlx5_rkey_t *rkey, int more)
{
    rvx__dc_dci_t *d = ep->dci;
    rvx__mlx5_bb_t bb;
    uint32_t pi;
    pi = d->sq.pi;
    if (RVX_COLD_BRANCH((int32_t)(pi - d->sq.pi_limit) >= 0)) {
        rvx_compiler_barrier(); /* read here, not above the branch (rvx__rc_put8) */
        return rvx__dc_put8_slow(ep, rvx__load_u64(src), raddr, rkey, more);
    }
    rvx__mlx5_bb_dc_write8(&bb, d->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &ep->av_lo, src, raddr,
                           rkey);
    rvx__dc_commit(d, ep, pi, 1, NULL, &bb, more);
    return RVX_OK;
}
#endif

/* Put short: ctrl, address, raddr, inline data. */
RVX_INLINE rvx_status_t rvx__dc_put_short_m(rvx__dc_ep_t *ep, const void *src, size_t len,
                                            uint64_t raddr, const rvx__mlx5_rkey_t *rkey, int more)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__dc_put8(ep, src, raddr, rkey, more);
#endif
    return rvx__dc_put_inline(ep, src, len, raddr, rkey, more);
}

RVX_INLINE rvx_status_t rvx__dc_put_short(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    return rvx__dc_put_short_m(ep, src, len, raddr, rkey, 0);
}

/* Tell the NIC of every WQE the endpoint's "more" calls left on the DCI it holds (its work
 * keeps the DCI until it retires, so they are all there; tl/mlx5/wqe.h, rvx__mlx5_ring). */
RVX_INLINE void rvx__dc_ep_ring(rvx__dc_ep_t *ep)
{
    if (ep->dci != &ep->ifc->no_dci) rvx__mlx5_ring(&ep->dci->sq); /* no_dci has no record */
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
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL, 0);
}

#define RVX__DC_RDMA_NBB(ifc) RVX__MLX5_NBB(3 + rvx__dc_av_ds(ifc))

/* ---- the chunk loops (tl/mlx5/chunk.h): dc_mlx5's steps ------------------------------------- */

/* Each chunk goes to the DCI the endpoint gets for it (rvx__dc_get), with its own bounce ring. */

RVX_INLINE rvx__dc_dci_t *rvx__dc_chunk_q(rvx__dc_ep_t *ep)
{
    return rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
}

RVX_INLINE uint8_t *rvx__dc_chunk_bounce(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, size_t n)
{
    return rvx__dc_bounce(d, ep, n);
}

RVX_INLINE uint64_t rvx__dc_chunk_bhead(rvx__dc_ep_t *ep, rvx__dc_dci_t *d)
{
    (void)ep;
    return d->b_head;
}

RVX_INLINE uint32_t rvx__dc_chunk_lkey(rvx__dc_ep_t *ep, rvx__dc_dci_t *d)
{
    (void)d;
    return ep->ifc->bounce_lkey;
}

RVX_INLINE void rvx__dc_chunk_post(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, unsigned opcode,
                                   const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
                                   const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    rvx__dc_post_rdma(d, ep, opcode, addr, len, lkey, raddr, rkey, o, sig);
}

RVX_INLINE int rvx__dc_chunk_failed(rvx__dc_ep_t *ep, rvx__dc_dci_t *d)
{
    (void)d;
    return ep->failed;
}

RVX_INLINE rvx_status_t rvx__dc_chunk_status(rvx__dc_ep_t *ep, rvx__dc_dci_t *d)
{
    (void)d;
    return rvx__dc_ep_status(ep);
}

/* Before the first chunk no DCI holds any of the transfer's work. */
RVX_INLINE rvx__dc_dci_t *rvx__dc_chunk_none(rvx__dc_ep_t *ep)
{
    (void)ep;
    return NULL;
}

RVX_INLINE rvx_status_t rvx__dc_chunk_stop(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, rvx_request_t *req)
{
    return rvx__dc_stop(ep, d, req);
}

RVX_INLINE rvx_status_t rvx__dc_chunk_wait(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, rvx_request_t *req)
{
    (void)d;
    return rvx__mlx5_wait_req(ep->ifc, req);
}

#include "../mlx5/chunk.h"

/* ---- the batch scope (tl/mlx5/batch.h) and the blocking fetches (tl/mlx5/fetch.h): dc_mlx5's
 * steps ---- */

RVX_INLINE rvx__dc_dci_t *rvx__dc_ep_q(rvx__dc_ep_t *ep)
{
    return ep->dci;
}

/* The one-WQEBB form's limit: pi itself for no DCI held, a failed DCI, the 48-byte address form
 * (each holds its queue). */
RVX_INLINE uint32_t rvx__dc_q_fast(const rvx__dc_dci_t *d)
{
    return d->sq.pi_limit;
}

#if defined(__x86_64__)
/* The 16-byte address segment (the one-WQEBB forms' and the fetches'; q_fast and fetch_ok let no
 * other through): the key, then av_lo. */
RVX_INLINE unsigned rvx__dc_ep_av(rvx__dc_ep_t *ep, __m128i *av)
{
    *av = _mm_set_epi64x((long long)ep->av_lo, (long long)rvx_htobe64(RVX__DC_KEY));
    return 1;
}

RVX_INLINE void rvx__dc_bb_put8(rvx__mlx5_bb_t *bb, uint64_t ctrl_w8, uint32_t pi, __m128i av,
                                const void *src, uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    rvx__mlx5_bb_av_write8(bb, ctrl_w8, pi, av, src, raddr, rkey);
}
#endif

#include "../mlx5/batch.h"

/* The one-WQEBB form has room for nbb WQEBBs (no DCI held, a failed DCI, the 48-byte address
 * form hold the queue: the general way) and nothing of the bounce ring is in flight. The WQE
 * that asks for a completion does not stop a fetch: its own WQE is signaled. */
RVX_INLINE int rvx__dc_fetch_ok(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, uint32_t nbb)
{
    (void)ep;
    return rvx__mlx5_sq_room_for(&d->sq, nbb) && !d->sq.hold && d->b_head == d->b_tail;
}

/* The DCI's fetch slot. */
RVX_INLINE const rvx__mlx5_fslot_t *rvx__dc_fetch_slot(const rvx__dc_dci_t *d)
{
    return &d->fs;
}

/* The ring is in use, as rvx__dc_bounce(d, ep, 8) would have made it: no fetch takes the slot
 * until the record retires. */
RVX_COLD uint64_t rvx__dc_fetch_take(rvx__dc_dci_t *d)
{
    return d->b_head += 64;
}

RVX_INLINE void rvx__dc_fetch_commit(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, uint32_t pi,
                                     uint32_t nbb, uint8_t *wqe, const rvx__mlx5_bb_t *bb)
{
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    d->owner[pi & d->sq.mask] = ep;
#else
    (void)ep;
#endif
    rvx__mlx5_commit(&d->sq, pi + nbb, wqe, nbb, bb);
}

RVX_INLINE int rvx__dc_fetch_quiet(rvx__dc_ep_t *ep)
{
    return !ep->ifc->wflush;
}

RVX_INLINE rvx__dc_iface_t *rvx__dc_fetch_ifc(const rvx__dc_dci_t *d)
{
    return d->ifc;
}

#include "../mlx5/fetch.h"

/* ---- bcopy and zcopy ------------------------------------------------------------------------- */

RVX_INLINE rvx_status_t rvx__dc_put_bcopy(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    return rvx__mlx5_put_bcopy(ep, src, len, raddr, rkey);
}

RVX_INLINE rvx_status_t rvx__dc_put_zcopy(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_rdma_zcopy(ep, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem,
                                raddr, rkey, req);
}

RVX_INLINE rvx_status_t rvx__dc_get_bcopy(rvx__dc_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_get(ep, dst, len, raddr, rkey, req);
}

RVX_INLINE rvx_status_t rvx__dc_get_zcopy(rvx__dc_ep_t *ep, void *dst, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_rdma_zcopy(ep, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem,
                                raddr, rkey, req);
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
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL, 0);
    if (wait) return rvx__mlx5_wait_req(ep->ifc, &own);
    return fetch ? RVX_INPROGRESS : RVX_OK;
}

#include "../mlx5/amo_loop.h"

RVX_INLINE rvx_status_t rvx__dc_atomic64(rvx__dc_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    return rvx__mlx5_atomic(ep, op, 8, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__dc_atomic32(rvx__dc_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    return rvx__mlx5_atomic(ep, op, 4, operand, compare, raddr, rkey, fetch, req);
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

#endif /* RVX_TL_DC_RMA_H */
