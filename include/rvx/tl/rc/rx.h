/* rvx/tl/rc/rx.h: rc_mlx5's received frames (cold): handed to the protocol, or set aside and
 * delivered later in order; and credits, returned to the sender by an RDMA WRITE into its control
 * region as frames are consumed. */
#ifndef RVX_TL_RC_RX_H
#define RVX_TL_RC_RX_H

#if RVX_CAN_RECEIVE
/* Tell the peer how many frames it may have sent in all (consumed + buffers): an 8-byte inline
 * WRITE into its control region (it needs no receive buffer, so credits always flow). */
RVX_COLD void rvx__rc_credit_return(rvx__rc_conn_t *c)
{
    rvx__mlx5_rkey_t k;
    uint64_t v = c->rx_done + c->ifc->credits;
    uint32_t pi;
    uint8_t *wqe;
    rvx__mlx5_wqe_write8_t *w;
    unsigned flags;
    if (c->failed) return;
    rvx__rc_peer_ctrl(c, &k);
    c->rx_reported = (uint32_t)c->rx_done;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 0);
    w = (rvx__mlx5_wqe_write8_t *)(void *)wqe;
    rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->sq.qpn8, RVX__MLX5_DS_RDMA, flags, 0);
    rvx__mlx5_set_raddr(&w->raddr, k.base, &k);
    w->inl.byte_count = rvx_htobe32(8u | MLX5_INLINE_SEG);
    memcpy(w->payload, &v, 8);
    memset(w->unused, 0, sizeof(w->unused));
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

/* The peer's frame is consumed (its buffer is back): credits to the peer every quarter of its
 * share. */
RVX_COLD void rvx__rc_rx_consumed(rvx__rc_conn_t *c)
{
    c->rx_done++;
    if ((uint32_t)c->rx_done - c->rx_reported >= c->ifc->credit_q) rvx__rc_credit_return(c);
}

/* A frame in a buffer of the shared queue: hand it to the protocol (or, for an endpoint that does
 * not exist yet, or a request while a reply waits for room, a copy aside, delivered later in
 * order). The buffer goes back after this, in rvx__rc_recv. 1: the frame counts as consumed
 * now; 0: its credit waits for the endpoint. */
RVX_COLD int rvx__rc_rx_frame(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t len,
                                uint32_t imm, int deliver, const uint8_t *buf)
{
    unsigned x = rvx_htobe32(imm), chan = x >> 16, info = x & 0xffff;
    if (chan >= RVX__TL_AM_CHANNELS || len > RVX__RC_FRAME) {
        if (rvx__mlx5_srq_drop(&ifc->srq))
            rvx__log("rc_mlx5: rank %d sent a frame with channel %u, %u bytes: dropped", rvx__rc_rank(c),
                     chan, len);
    } else if (!c->ep) {
        /* no endpoint yet: its credit waits for the endpoint, so the peer cannot send more than
         * its share meanwhile */
        rvx__mlx5_defer(&ifc->def_head, &ifc->def_tail, rvx__rc_rank(c), chan, info, buf, len);
        c->rx_held++;
        return 0;
    } else if (chan == RVX__CHAN_REQUEST && (!deliver || ifc->def_head)) {
        /* a handler may not run now, or earlier requests wait: keep the order */
        rvx__mlx5_defer(&ifc->def_head, &ifc->def_tail, rvx__rc_rank(c), chan, info, buf, len);
    } else {
        /* frames a nested poll takes meanwhile use other buffers (the shared queue takes them
         * back in any order) */
        rvx__rc_rx_deliver(c->ep, chan, info, (void *)(uintptr_t)buf, len);
    }
    return 1;
}

/* Frames a conn took while it had no endpoint (copied aside already): their credits go back. */
RVX_COLD void rvx__rc_release_held(rvx__rc_conn_t *c)
{
    c->rx_done += c->rx_held;
    c->rx_held = 0;
    if ((uint32_t)c->rx_done - c->rx_reported >= c->ifc->credit_q) rvx__rc_credit_return(c);
}

RVX_COLD int rvx__rc_deliver_deferred(rvx__rc_iface_t *ifc)
{
    rvx__mlx5_deferred_t *kept = NULL, *last = NULL;
    int n = 0;
    while (ifc->def_head) {
        rvx__mlx5_deferred_t *d = ifc->def_head;
        ifc->def_head = d->next;
        if (!ifc->def_head) ifc->def_tail = NULL;
        if (!ifc->conns[d->rank].ep) { /* kept (in order) until the endpoint exists */
            d->next = NULL;
            if (last) last->next = d;
            else kept = d;
            last = d;
            continue;
        }
        rvx__rc_rx_deliver(ifc->conns[d->rank].ep, d->chan, d->info, d->body, d->len);
        free(d);
        n++;
    }
    ifc->def_head = kept;
    ifc->def_tail = last;
    return n;
}
#endif

#endif /* RVX_TL_RC_RX_H */
