/* rvx/tl/rc/am.h: rc_mlx5's messages, the sending side: a SEND with immediate built inline (from
 * SSE registers for a small frame of known size), the credit check, claim and publish, zero-copy
 * messages, waiting for a credit. The receiving side and credit returns are in tl/rc/rx.h.
 *
 * Messages (RVX_CAN_RECEIVE builds). SEND with immediate = info | channel << 16 into the shared
 * receive queue's buffers of RVX__RC_FRAME bytes. Flow control by credits: each peer may have
 * ifc->credits frames in flight, and the queue holds every peer's credits (plus room for
 * re-connection hellos); a receiver reports how many frames it has consumed by an RDMA WRITE of
 * that count into the sender's control region (so a credit message never needs a receive
 * buffer), every quarter of the credits; a sender with no credit gets NULL from
 * rvx__rc_am_claim (RVX_ERR_NO_RESOURCE for requests). RNR cannot happen. */
#ifndef RVX_TL_RC_AM_H
#define RVX_TL_RC_AM_H

/* ---- sends ---------------------------------------------------------------------------------- */

/* A SEND with immediate whose body (at most 44 bytes) goes inline in one WQEBB. An empty body
 * has no inline segment (libmlx5 emits none for zero bytes). */
RVX_INLINE void rvx__rc_send_inline(rvx__mlx5_sq_t *sq, uint8_t *wqe, uint32_t pi, unsigned flags,
                                      uint32_t imm_be, const void *body, size_t len)
{
    unsigned ds = 1 + (len ? RVX__MLX5_INLINE_DS(len) : 0);
    rvx__mlx5_wqe_send_inl_t *w = (rvx__mlx5_wqe_send_inl_t *)(void *)wqe;
    rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_SEND_IMM, sq->qpn8, ds, flags, imm_be);
    /* one WQEBB never wraps; with no body the would-be header is padding, zeroed */
    w->inl.byte_count = len ? rvx_htobe32((uint32_t)len | MLX5_INLINE_SEG) : 0;
    memcpy(w->body, body, len);
    /* callers keep len <= the maximum, so -O2 folds the test away; at -O0 it stops gcc from
     * warning about the padding of a larger constant length on a branch never taken */
    memset(w->body + len, 0, len <= RVX__MLX5_BB_INLINE_MAX ? RVX__MLX5_BB_INLINE_MAX - len : 0);
}

#if RVX_CAN_RECEIVE

/* Room for one more frame at the peer: the cached limit, else the peer's credit word (how many
 * frames we may have sent in all, of which the low 32 bits are compared by difference). A failed
 * conn has tx_limit = tx_sent and gets none. */
RVX_INLINE int rvx__rc_credit(rvx__rc_conn_t *c)
{
    if (RVX_LIKELY((int32_t)(c->tx_sent - c->tx_limit) < 0)) return 1;
    if (c->failed) return 0;
    c->tx_limit = (uint32_t)*c->credit_word;
    return (int32_t)(c->tx_sent - c->tx_limit) < 0;
}

/* Where to write a frame of len bytes: small frames go inline in the WQE (built in the conn's
 * scratch area first), others from the bounce ring. NULL when the peer has no free receive
 * buffer. */
RVX_INLINE void *rvx__rc_am_claim(rvx__rc_ep_t *ep, unsigned chan, size_t len)
{
    rvx__rc_conn_t *c = ep->c;
    (void)chan;
    if (!rvx__rc_credit(c)) return NULL;
    if (len <= RVX__MLX5_BB_INLINE_MAX) return c->scratch;
    return rvx__rc_bounce(c, len);
}

/* SEND with immediate (info | chan << 16): inline when it fits one WQEBB with the ctrl segment,
 * otherwise a data segment on the bounce ring. */
RVX_INLINE void rvx__rc_publish_gen(rvx__rc_conn_t *c, unsigned chan, void *body, size_t len,
                                    unsigned info, int more)
{
    uint32_t pi, imm = rvx_htobe32(info | chan << 16);
    uint8_t *wqe;
    unsigned flags;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 0);
    if (len <= RVX__MLX5_BB_INLINE_MAX) { /* body is the scratch area: copy it into the WQE */
        rvx__rc_send_inline(&c->sq, wqe, pi, flags, imm, body, len);
    } else {
        rvx__mlx5_op_t o;
        rvx__mlx5_wqe_send_t *w = (rvx__mlx5_wqe_send_t *)(void *)wqe;
        rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_SEND_IMM, c->sq.qpn8, 2, flags, imm);
        rvx__mlx5_set_data(&w->data, (uint32_t)len, c->bs->lkey, body);
        memset(w->unused, 0, sizeof(w->unused));
        memset(&o, 0, sizeof(o)); /* the bounce space goes back when this WQE retires */
        o.kind = RVX__MLX5_ON_NONE;
        o.bounce = c->bs->head;
        rvx__rc_on_retire(c, pi, &o);
    }
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    c->tx_sent++;
    rvx__mlx5_finish(&c->sq, pi, 1, wqe, NULL, more);
}

RVX_COLD rvx_status_t rvx__rc_publish_slow(rvx__rc_conn_t *c, unsigned chan, void *body,
                                             size_t len, unsigned info, int more)
{
    rvx__rc_publish_gen(c, chan, body, len, info, more);
    return RVX_OK;
}

#if defined(__x86_64__)
/* SEND with immediate of flen (12 to 28) bytes inline from frame, in one WQEBB, unsignaled (ctrl
 * 16 + inline 4 + flen, padded):
 *   q[0] ctrl: opmod_idx_opcode, qpn_ds | signature, stream id, fm_ce_se all 0, imm_be
 *   q[1] inline segment: byte_count (flen | MLX5_INLINE_SEG), frame bytes 0-11
 *   q[2] frame bytes 12 to flen - 1, then zeros (frame must be readable to byte 27)
 *   q[3] zero
 * With flen known at compile time the mask is one constant: as put8, no memory but the frame. */
RVX_INLINE void rvx__rc_bb_send_small(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                        const uint8_t *frame, unsigned flen, uint32_t imm_be)
{
    static const uint8_t keep[32] __attribute__((aligned(32))) = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    /* q[3], bytes 48-63: padding */
    bb->q[3] = _mm_setzero_si128();
    /* q[2], bytes 32-47: the frame's bytes 12.., as many as there are */
    bb->q[2] = _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(frame + 12)),
                             _mm_loadu_si128((const __m128i *)(const void *)(keep + 28 - flen)));
    /* q[1], bytes 16-31: inline byte_count | frame bytes 0-11 */
    bb->q[1] = _mm_or_si128(_mm_slli_si128(_mm_loadu_si128((const __m128i *)(const void *)frame), 4),
                            _mm_cvtsi32_si128((int)rvx_htobe32(flen | MLX5_INLINE_SEG)));
    /* q[0], bytes 0-15: opmod_idx_opcode, qpn_ds | zeros, imm. The index is added, not ORed
     * (the bits do not overlap), so that it folds with the DS constant into one lea; the high
     * half is a constant when imm is, ORed in one instruction */
    bb->q[0] = _mm_or_si128(_mm_cvtsi64_si128((long long)rvx_htobe64(ctrl_word + ((uint64_t)(uint16_t)pi << 40))),
                            _mm_set_epi64x((long long)((uint64_t)imm_be << 32), 0));
}
#endif

/* RVX_OK always: callers return it as their own status, so the cold path is a jump. With
 * `more` (a constant), the doorbell waits for rvx__rc_ep_ring. */
RVX_INLINE rvx_status_t rvx__rc_am_publish_m(rvx__rc_ep_t *ep, unsigned chan, void *body,
                                             size_t len, unsigned info, int more)
{
    rvx__rc_conn_t *c;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && __builtin_constant_p(info) && __builtin_constant_p(chan) &&
        (len == 8 || (len >= 12 && len <= 28))) {
        /* a frame of known size up to 28 bytes (an 8-byte message, a tag send of 8 bytes): as
         * put8, one WQEBB from SSE registers. Such a frame is in the conn's scratch area
         * (rvx__rc_am_claim), readable to byte 47; the ctrl word differs from the 8-byte SEND's
         * only in DS. The conn is the one around the scratch area: the caller's stores into the
         * frame make the compiler load ep->c again, not this */
        uint32_t pi;
        c = (rvx__rc_conn_t *)(void *)((uint8_t *)body - offsetof(rvx__rc_conn_t, scratch));
        pi = c->sq.pi;
        rvx__mlx5_bb_t bb;
        if (RVX_UNLIKELY((int32_t)(pi - c->sq.pi_limit) >= 0))
            return rvx__rc_publish_slow(c, chan, body, len, info, more);
        if (len == 8)
            rvx__mlx5_bb_send8(&bb, c->ctrl_send2, pi, body, rvx_htobe32(info | chan << 16));
        else
            rvx__rc_bb_send_small(&bb, c->ctrl_send2 + (RVX__MLX5_INLINE_DS(len) - 1), pi,
                                    (const uint8_t *)body, (unsigned)len,
                                    rvx_htobe32(info | chan << 16));
        rvx__mlx5_post_bb(&c->sq, pi, &bb, more);
        c->tx_sent++; /* after the WQE's stores: one add to memory, not a copy kept in a register */
        return RVX_OK;
    }
#endif
    c = ep->c;
    rvx__rc_publish_gen(c, chan, body, len, info, more);
    return RVX_OK;
}

RVX_INLINE rvx_status_t rvx__rc_am_publish(rvx__rc_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
    return rvx__rc_am_publish_m(ep, chan, body, len, info, 0);
}

RVX_INLINE rvx_status_t rvx__rc_am_publish_more(rvx__rc_ep_t *ep, unsigned chan, void *body,
                                                size_t len, unsigned info)
{
    return rvx__rc_am_publish_m(ep, chan, body, len, info, 1);
}

/* Nonzero while frames are delivered (progress sets in_rx around it, so whenever a handler
 * runs): proto/am.h refuses requests with it. Reached from the conn the send path loads anyway,
 * one load and a compare, not the two loads of the worker's count. */
#define RVX__RC_IN_HANDLER(tl) ((tl)->c->ifc->in_rx)
/* The word that says so, for a pair (tl/pair.h), which sets it around shm's deliveries too. */
RVX_INLINE uint8_t *rvx__rc_iface_in_rx(rvx__rc_iface_t *ifc) { return &ifc->in_rx; }

/* Zero-copy message: one SEND_IMM WQEBB with the header as an inline segment and the body as a
 * data segment on the caller's registered memory (lmem's lkey), no copy of the body. Always
 * signaled: the buffer is the NIC's until the WQE retires, and req completes then, through the
 * ops table as zero-copy gets do (without a request the call waits). RVX_ERR_NO_RESOURCE: no
 * credit for a frame at the peer, nothing posted. hdrlen + len must fit a receive frame. */
#define RVX__RC_AM_ZCOPY         1  /* real zero-copy: the body must be registered */
#define RVX__RC_AM_ZCOPY_HDR_MAX 28 /* ctrl 16 + inline 4 + 28 + data seg 16: one WQEBB */
RVX_INLINE rvx_status_t rvx__rc_am_zcopy(rvx__rc_ep_t *ep, unsigned chan, const void *hdr, size_t hdrlen,
                                         const void *buf, size_t len, const rvx__mlx5_mem_t *lmem,
                                         unsigned info, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    uint32_t pi;
    uint8_t *wqe, *seg;
    unsigned flags, ids = hdrlen ? RVX__MLX5_INLINE_DS(hdrlen) : 0;
    rvx__mlx5_op_t o;
    rvx_request_t own;
    if (hdrlen > RVX__RC_AM_ZCOPY_HDR_MAX || hdrlen + len > RVX__RC_FRAME || (len && !lmem))
        return RVX_ERR_INVALID_PARAM;
    if (!rvx__rc_credit(c))
        return !c->failed ? RVX_ERR_NO_RESOURCE : rvx__rc_fail_st(c);
    if (!req) req = &own;
    req->status = RVX_INPROGRESS;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 1);
    rvx__mlx5_set_ctrl(wqe, pi, 0, MLX5_OPCODE_SEND_IMM, c->sq.qpn8, 1 + ids + (len ? 1 : 0), flags,
                       rvx_htobe32(info | chan << 16));
    seg = wqe + sizeof(struct mlx5_wqe_ctrl_seg); /* [inline header] [data segment], then zeros */
    memset(seg, 0, RVX__MLX5_BB - sizeof(struct mlx5_wqe_ctrl_seg));
    if (hdrlen) seg += 16 * rvx__mlx5_set_inline(&c->sq, seg, hdr, hdrlen);
    if (len) rvx__mlx5_set_data(seg, (uint32_t)len, lmem->lkey, buf);
    memset(&o, 0, sizeof(o));
    o.kind = RVX__MLX5_ON_REQ;
    o.req = req;
    rvx__rc_on_retire(c, pi, &o);
    rvx__rc_mark_sig(c, pi, pi + 1);
    c->tx_sent++;
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
    return req == &own ? rvx__mlx5_wait_req(c->ifc, &own) : RVX_INPROGRESS;
}

RVX_COLD void *rvx__rc_am_wait_room(rvx__rc_ep_t *ep, unsigned chan, size_t len)
{
#if RVX_CAN_RECEIVE
    rvx__rc_conn_t *c = ep->c;
    unsigned spins = 0;
    void *body;
    while (!(body = rvx__rc_am_claim(ep, chan, len))) {
        if (c->failed) return NULL;
        if (rvx__rc_drain(c->ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        /* once the wait sleeps, each round asks whether the peer lives (its keepalive, at
         * most every 100 ms, fails within the retries): a time, not a count of rounds */
        if (spins > RVX__BACKOFF_SLEEPING && rvx__rc_ep_alive(ep) != RVX_OK) return NULL;
    }
    return body;
#else
    (void)ep; (void)chan; (void)len;
    return NULL;
#endif
}

#endif

#endif /* RVX_TL_RC_AM_H */
