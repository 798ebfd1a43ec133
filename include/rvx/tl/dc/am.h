/* rvx/tl/dc/am.h: dc_mlx5's messages out: the SEND with immediate that publishes a claimed frame
 * (one WQEBB from registers when its size is known, the general form otherwise), zero-copy sends,
 * and a reply's wait for room. Frames are claimed in tl/dc/credit.h, received in tl/dc/cq.h. */
#ifndef RVX_TL_DC_AM_H
#define RVX_TL_DC_AM_H

#if RVX_CAN_RECEIVE
/* SEND with immediate (info | chan << 16) of the prefix and body: inline when small, else one
 * data segment on the bounce ring (given back when the WQE retires). */
RVX_INLINE void rvx__dc_publish_gen(rvx__dc_ep_t *ep, unsigned chan, void *body, size_t len,
                                    unsigned info, int more)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    uint8_t *frame = (uint8_t *)body - RVX__DC_PREFIX, *wqe, *seg;
    size_t flen = len + RVX__DC_PREFIX;
    int inl = flen <= RVX__DC_AM_INLINE;
    unsigned ds = 1 + rvx__dc_av_ds(ifc) + (inl ? RVX__MLX5_INLINE_DS(flen) : 1u), flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    uint32_t taken = (uint32_t)ifc->ctrl[1 + ifc->nranks + ep->rank];
    rvx__dc_prefix_t pre;
    rvx__dc_dci_t *d = rvx__dc_get(ep, nbb);
    if (RVX_UNLIKELY(!d)) return; /* failed: the frame is lost with the endpoint */
    pre.rank = (uint32_t)ifc->rank | RVX__DC_PRE_REPORT;
    pre.consumed = taken; /* credits back to the peer, for free */
    ifc->peers[ep->rank].rx_reported = taken;
    memcpy(frame, &pre, sizeof(pre));
    seg = rvx__dc_begin(d, ep, 0, MLX5_OPCODE_SEND_IMM, ds, 0, rvx_htobe32(info | chan << 16), &pi,
                        &flags, &wqe);
    if (inl) {
        unsigned units = rvx__mlx5_set_inline(&d->sq, seg, frame, flen);
        size_t used = sizeof(struct mlx5_wqe_inl_data_seg) + flen;
        rvx__mlx5_zero_pad(&d->sq, seg + used, units * RVX__MLX5_SEG - used, nbb * 4 - ds);
        pre.rank = (uint32_t)ifc->rank; /* the scratch prefix (inline frames are built there) */
        memcpy(frame, &pre.rank, sizeof(pre.rank)); /* goes back to reporting nothing */
    } else {
        rvx__mlx5_op_t o;
        rvx__mlx5_set_data(seg, (uint32_t)flen, ifc->bounce_lkey, frame);
        rvx__mlx5_zero_pad(&d->sq, seg + RVX__MLX5_SEG, 0, nbb * 4 - ds);
        memset(&o, 0, sizeof(o)); /* the bounce space goes back when this WQE retires */
        o.bounce = d->b_head;
        rvx__mlx5_tx_on_retire(&d->sq, &d->tx, pi, &o);
        d->am_claim = 0;
    }
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    ep->tx_left--;
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL, more);
}

/* Not the fast path of a short frame: no DCI held, a full queue, the 48-byte address form, or
 * the WQE that asks for a completion (built here from registers as well). */
RVX_COLD rvx_status_t rvx__dc_publish_slow(rvx__dc_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info, int more)
{
#if defined(__x86_64__)
    rvx__dc_dci_t *d = ep->dci;
    if (d && d->ctrl_send && rvx__mlx5_sq_room_for(&d->sq, 1) &&
        (uint8_t *)body == (uint8_t *)ep->ifc->scratch + RVX__DC_PREFIX) {
        uint32_t pi = d->sq.pi;
        unsigned flags = rvx__mlx5_moderate(&d->sq, 0);
        rvx__mlx5_bb_t bb;
        rvx__mlx5_bb_dc_send(&bb, d->ctrl_send, pi, flags, rvx_htobe32(info | chan << 16),
                             rvx_htobe64(RVX__DC_KEY), &ep->av_lo, (uint8_t *)body - RVX__DC_PREFIX,
                             (unsigned)len + RVX__DC_PREFIX);
        if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + 1);
        ep->tx_left--;
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb, more);
        return RVX_OK;
    }
#endif
    rvx__dc_publish_gen(ep, chan, body, len, info, more);
    return RVX_OK;
}

/* RVX_OK always: callers return it as their own status, so the cold path is a jump. With
 * `more` (a constant), the doorbell waits for rvx__dc_ep_ring. */
RVX_INLINE rvx_status_t rvx__dc_am_publish_m(rvx__dc_ep_t *ep, unsigned chan, void *body,
                                             size_t len, unsigned info, int more)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && __builtin_constant_p(info) && __builtin_constant_p(chan) &&
        len >= 4 && len + RVX__DC_PREFIX <= 28) {
        /* a short frame of known size (an 8-byte message, a tag send of 8 bytes): as put8, one
         * WQEBB from SSE registers. Such a frame is in the scratch area, whose prefix always
         * names this rank and carries no report (the general path clears its flag) */
        rvx__dc_dci_t *d = ep->dci;
        rvx__mlx5_bb_t bb;
        uint64_t ctrl;
        uint32_t pi;
        pi = d->sq.pi;
        ctrl = d->ctrl_send;
        if (RVX_UNLIKELY((int32_t)(pi - d->sq.pi_limit) >= 0))
            return rvx__dc_publish_slow(ep, chan, body, len, info, more);
        rvx__mlx5_bb_dc_send(&bb, ctrl, pi, 0, rvx_htobe32(info | chan << 16),
                             rvx_htobe64(RVX__DC_KEY), &ep->av_lo, (uint8_t *)body - RVX__DC_PREFIX,
                             (unsigned)len + RVX__DC_PREFIX);
        ep->tx_left--;
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb, more);
        return RVX_OK;
    }
#endif
    rvx__dc_publish_gen(ep, chan, body, len, info, more);
    return RVX_OK;
}

RVX_INLINE rvx_status_t rvx__dc_am_publish(rvx__dc_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
    return rvx__dc_am_publish_m(ep, chan, body, len, info, 0);
}

RVX_INLINE rvx_status_t rvx__dc_am_publish_more(rvx__dc_ep_t *ep, unsigned chan, void *body,
                                                size_t len, unsigned info)
{
    return rvx__dc_am_publish_m(ep, chan, body, len, info, 1);
}

/* Zero-copy message, as the contract has it: header and body are copied into a frame (claim and
 * publish), and the call completes at once: RVX_OK, buf reusable; lmem and req are not used.
 * RVX_ERR_NO_RESOURCE: no credit, nothing sent. */
#define RVX__DC_AM_ZCOPY         0  /* the body is copied: callers need not register */
#define RVX__DC_AM_ZCOPY_HDR_MAX 28
RVX_INLINE rvx_status_t rvx__dc_am_zcopy(rvx__dc_ep_t *ep, unsigned chan, const void *hdr,
                                         size_t hdrlen, const void *buf, size_t len,
                                         const rvx__mlx5_mem_t *lmem, unsigned info,
                                         rvx_request_t *req)
{
    uint8_t *b;
    (void)lmem;
    (void)req;
    if (hdrlen > RVX__DC_AM_ZCOPY_HDR_MAX || hdrlen + len > RVX_MLX5_FRAME - RVX__DC_PREFIX)
        return RVX_ERR_INVALID_PARAM;
    if (RVX_UNLIKELY(ep->failed)) return rvx__dc_ep_status(ep);
    b = (uint8_t *)rvx__dc_am_claim(ep, chan, hdrlen + len);
    if (!b) return ep->failed ? rvx__dc_ep_status(ep) : RVX_ERR_NO_RESOURCE;
    if (hdrlen) memcpy(b, hdr, hdrlen);
    if (len) memcpy(b + hdrlen, buf, len);
    rvx__dc_am_publish(ep, chan, b, hdrlen + len, info);
    return ep->failed ? rvx__dc_ep_status(ep) : RVX_OK;
}
#endif

/* A reply waits here for a credit (from a handler: progress is refused there). The wait does
 * what progress would for the credits: the drain takes frames off the SRQ (requests go aside,
 * counted taken) and the tick reports what was taken and gives back idle credits, so a peer
 * waiting in a handler of its own for this worker's reports or pool gets them (tl/dc/credit.h). */
RVX_COLD void *rvx__dc_am_wait_room(rvx__dc_ep_t *ep, unsigned chan, size_t len)
{
#if RVX_CAN_RECEIVE
    unsigned spins = 0;
    void *body;
    while (!(body = rvx__dc_am_claim(ep, chan, len))) {
        if (ep->failed) return NULL;
        if (rvx__dc_drain(ep->ifc)) spins = 0;
        else rvx__backoff(&spins);
        rvx__dc_tick(ep->ifc);
        /* once the wait sleeps, each round asks whether the peer lives (its keepalive, at
         * most every 100 ms, fails within the retries): a time, not a count of rounds */
        if (spins > RVX__BACKOFF_SLEEPING && rvx__dc_ep_alive(ep) != RVX_OK) return NULL;
    }
    return body;
#else
    (void)ep; (void)chan; (void)len;
    return NULL;
#endif
}

#endif /* RVX_TL_DC_AM_H */
