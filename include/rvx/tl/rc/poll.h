/* rvx/tl/rc/poll.h: rc_mlx5's cold paths after a post: the CQ poll (retiring WQEs, error CQEs,
 * received frames and credits), waiting for room or a request, the compare-and-swap loop of the
 * atomics the NIC lacks, the slow flushes and liveness. Included at the end of tl/rc_mlx5.h. */
#ifndef RVX_TL_RC_POLL_H
#define RVX_TL_RC_POLL_H

RVX_COLD void rvx__rc_hello(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t imm_be,
                              const uint8_t *body);
RVX_COLD void rvx__rc_rec_poll(rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_sig_tail(rvx__rc_conn_t *c);
RVX_COLD void rvx__rc_hello_cqe(rvx__rc_iface_t *ifc, const struct mlx5_cqe64 *cqe, unsigned opcode);
#if RVX_CAN_RECEIVE
RVX_COLD int rvx__rc_rx_frame(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t len,
                                uint32_t imm, int deliver, const uint8_t *buf);
RVX_COLD void rvx__rc_rx_consumed(rvx__rc_conn_t *c);
#endif

/* ---- retiring WQEs -------------------------------------------------------------------------- */

/* Bounce space up to position b is free again. A conn without a segment has nothing of one in
 * flight: its empty record stays empty. */
RVX_INLINE void rvx__rc_bounce_back(rvx__rc_conn_t *c, uint64_t b)
{
    if (RVX_LIKELY(c->bs != &c->ifc->bnone)) c->bs->lim = b + RVX__RC_BOUNCE_SEG;
}

/* Retire [ci, end) (tl/mlx5/sq.h), giving back bounce space; flushes complete with the conn's
 * status. */
RVX_COLD void rvx__rc_retire(rvx__rc_conn_t *c, uint32_t end, rvx_status_t st)
{
    uint64_t b = rvx__mlx5_tx_retire(&c->sq, &c->tx, end, st, RVX__RC_ERR(c));
    if (b) rvx__rc_bounce_back(c, b);
}

/* The conn fails with st. Reported on stderr unless report is 0: a peer that has left makes the
 * work nobody waits for (credit returns, keepalives, unsignaled writes) run out of retries, and
 * that is no failure of the job; the status still reaches the endpoint's flush and status. */
RVX_COLD void rvx__rc_fail(rvx__rc_conn_t *c, rvx_status_t st, unsigned synd, unsigned vendor,
                             uint16_t idx, int report)
{
    if (!c->failed) {
        c->failed = 1;
        c->err = st;
        c->tx_limit = c->tx_sent; /* sends take the slow path, which sees the failure */
        if (report) rvx__log("rc_mlx5: operation to rank %d failed: %s (syndrome 0x%x, vendor 0x%x, WQE %u): "
                 "the endpoint is marked failed", rvx__rc_rank(c), rvx__mlx5_syndrome_str(synd), synd,
                 vendor, idx);
    }
}

/* A failed QP completes every WQE it holds with an error CQE, signaled or not: make sure progress
 * keeps polling until they have all come, even where only signaled work would make it poll. */
RVX_COLD void rvx__rc_hold(rvx__rc_conn_t *c)
{
    if (c->failed) rvx__mlx5_tx_hold(&c->sq, &c->tx);
}

/* A signaled WQE completed: everything up to its end retires. */
RVX_COLD void rvx__rc_req_ok(rvx__rc_conn_t *c, uint16_t idx)
{
    uint64_t b = rvx__mlx5_tx_req_ok(&c->sq, &c->tx, idx, RVX__RC_ERR(c));
    if (b) rvx__rc_bounce_back(c, b);
}

/* A WQE failed (or was flushed after a failure): the conn fails, the WQEs before it completed,
 * this one completes with the syndrome's status. */
RVX_COLD void rvx__rc_req_err(rvx__rc_conn_t *c, const struct mlx5_err_cqe *e)
{
    uint16_t idx = rvx_htobe16(e->wqe_counter);
    rvx_status_t st = rvx__mlx5_syndrome_status(e->syndrome);
    int gone = e->syndrome == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR ||
               e->syndrome == MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR;
    const rvx__mlx5_op_t *o = rvx__mlx5_tx_op_at(&c->tx, rvx__mlx5_wqe_start(&c->sq, idx));
    uint64_t b;
    if (e->syndrome != MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
        rvx__rc_fail(c, st, e->syndrome, e->vendor_err_synd, idx,
                       !gone || (o && o->kind != RVX__MLX5_ON_NONE));
    else if (!c->failed)
        rvx__rc_fail(c, RVX_ERR_CANCELED, e->syndrome, e->vendor_err_synd, idx, 1);
    b = rvx__mlx5_tx_req_err(&c->sq, &c->tx, idx, st, RVX__RC_ERR(c));
    if (b) rvx__rc_bounce_back(c, b);
}

/* A receive completed with an error: it came back without data, and the conn fails (its buffer
 * goes back in rvx__rc_recv like every other). */
RVX_COLD void rvx__rc_resp_err(rvx__rc_conn_t *c, const struct mlx5_err_cqe *e)
{
    if (e->syndrome != MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
        rvx__rc_fail(c, rvx__mlx5_syndrome_status(e->syndrome), e->syndrome,
                       e->vendor_err_synd, rvx_htobe16(e->wqe_counter), 1);
    else if (!c->failed)
        rvx__rc_fail(c, RVX_ERR_PEER_FAILED, e->syndrome, e->vendor_err_synd, 0, 1);
    /* the QP is in error now: work it executed unsignaled gives no CQE, so a signaled NOP (flushed)
     * retires it, or requests it carried would wait for ever */
    rvx__rc_sig_tail(c);
    rvx__rc_hold(c);
}

/* ---- the CQ poll ---------------------------------------------------------------------------- */

/* A send CQE of the conn's QP. */
RVX_COLD void rvx__rc_cqe_handle(rvx__rc_conn_t *c, const struct mlx5_cqe64 *cqe,
                                   unsigned opcode, uint32_t qpn)
{
    if ((opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR) && rvx__mlx5_cqe_stale(&c->sq, cqe)) {
        rvx__log("rc_mlx5: completion for WQE %u of QP 0x%x, already retired: ignored",
                 rvx_htobe16(cqe->wqe_counter), qpn);
    } else if (opcode == MLX5_CQE_REQ) {
        rvx__rc_req_ok(c, rvx_htobe16(cqe->wqe_counter));
    } else if (opcode == MLX5_CQE_REQ_ERR) {
        rvx__rc_req_err(c, (const struct mlx5_err_cqe *)(const void *)cqe);
    } else {
        rvx__log("rc_mlx5: unexpected CQE opcode %u from QP 0x%x ignored", opcode, qpn);
    }
}

/* A receive CQE on a conn's QP (who: the rank; < 0: a QP no longer known). Frames go to the
 * protocol (or aside), a re-connection's UP to tl/rc/reconnect.h, anything else is dropped; then,
 * whatever it was, its buffer goes back (tl/mlx5/srq.h) and a frame from the peer counts as
 * consumed, so that its credit returns. */
RVX_COLD void rvx__rc_recv(rvx__rc_iface_t *ifc, int32_t who, const struct mlx5_cqe64 *cqe,
                             unsigned opcode, uint32_t qpn, int deliver)
{
    rvx__rc_conn_t *c = who >= 0 ? &ifc->conns[who] : NULL;
    const uint8_t *buf = rvx__mlx5_srq_buf(&ifc->srq, rvx_htobe16(cqe->wqe_counter));
    int consumed = 0;
    (void)deliver;
    if (opcode == MLX5_CQE_RESP_ERR) {
        if (c) rvx__rc_resp_err(c, (const struct mlx5_err_cqe *)(const void *)cqe);
    } else if (c && opcode == MLX5_CQE_RESP_SEND_IMM &&
               (rvx_htobe32(cqe->imm_inval_pkey) & 0xffff) == RVX__RC_HELLO) {
        rvx__rc_hello(ifc, c, cqe->imm_inval_pkey, buf); /* outside the credits */
    } else if (!c || opcode != MLX5_CQE_RESP_SEND_IMM || !RVX_CAN_RECEIVE) {
        /* a replaced QP, or not a frame: a plain SEND, one with invalidation, a WRITE with
         * immediate, or any message in a build without them */
        if (rvx__mlx5_srq_drop(&ifc->srq))
            rvx__log("rc_mlx5: receive completion (opcode %u, %u bytes) on %s QP 0x%x: dropped",
                     opcode, rvx_htobe32(cqe->byte_cnt), !c ? "an unknown" : "the", qpn);
        consumed = c != NULL;
    }
#if RVX_CAN_RECEIVE
    else {
        consumed = rvx__rc_rx_frame(ifc, c, rvx_htobe32(cqe->byte_cnt), cqe->imm_inval_pkey,
                                      deliver, buf);
    }
#endif
    rvx__mlx5_srq_done(&ifc->srq, cqe);
#if RVX_CAN_RECEIVE
    if (consumed) rvx__rc_rx_consumed(c); /* after the buffer is back: credits promise it */
#else
    (void)consumed; /* no credits in a build without messages */
#endif
}

/* Pending worker flushes complete once every conn with an endpoint that was busy when they were
 * asked has retired what was posted before them. Only the conns that posted since they were last
 * found idle are looked at (tl/rc/setup.h), never every peer; the idle ones leave the list. */
RVX_COLD void rvx__rc_wflush_check(rvx__rc_iface_t *ifc)
{
    uint32_t *at = &ifc->wf_head;
    while (*at != RVX__RC_WF_END) {
        rvx__rc_conn_t *c = &ifc->conns[*at];
        if (c->sq.ci == c->sq.pi) { rvx__rc_idle(ifc, at); continue; }
        if (c->ep && (int32_t)(c->sq.ci - c->wflush_pi) < 0) return; /* still busy: wait */
        at = &c->wf_next;
    }
    rvx__mlx5_wflush_done(&ifc->wflush);
}

/* Handle every CQE present. deliver = 0: received requests are set aside (a reply is waiting
 * for room, or no handler may run). Returns the number of CQEs. */
RVX_COLD int rvx__rc_drain(rvx__rc_iface_t *ifc, int deliver)
{
    int n = 0;
    for (;;) {
        struct mlx5_cqe64 *slot = rvx__mlx5_cqe(&ifc->cq, ifc->cq.ci), copy, *cqe = &copy;
        uint8_t op_own = *(volatile uint8_t *)&slot->op_own;
        uint32_t qpn;
        int32_t who;
        if (!rvx__mlx5_cqe_ready(&ifc->cq, op_own)) break;
        rvx_from_device_barrier(); /* the owner check before the CQE's other bytes */
        memcpy(&copy, slot, sizeof(copy));
        /* the slot goes back to the NIC before the CQE frees a buffer or budget: the bound of
         * rvx__rc_iface_cq (the CQE is read from the copy) */
        rvx__mlx5_cq_advance(&ifc->cq);
        rvx__mlx5_cq_update_ci(&ifc->cq);
        qpn = rvx__mlx5_cqe_qpn(cqe);
        who = rvx__rc_qpt_find(ifc, qpn, NULL);
        n++;
        if (RVX_UNLIKELY(who == RVX__RC_QPT_HELLO)) /* sends and receives (tl/rc/reconnect.h) */
            rvx__rc_hello_cqe(ifc, cqe, op_own >> 4);
        else if (rvx__mlx5_cqe_is_recv(op_own >> 4)) /* whatever its QP: the buffer goes back */
            rvx__rc_recv(ifc, who, cqe, op_own >> 4, qpn, deliver);
        else if (who < 0) /* a QP replaced meanwhile */
            rvx__log("rc_mlx5: completion (opcode %u) for unknown QP 0x%x ignored", op_own >> 4, qpn);
        else
            rvx__rc_cqe_handle(&ifc->conns[who], cqe, op_own >> 4, qpn);
    }
    if (ifc->nrec) rvx__rc_rec_poll(ifc);
    if (ifc->wflush) rvx__rc_wflush_check(ifc);
    return n;
}

/* ---- received frames and credits ------------------------------------------------------------ */

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

/* ---- progress and waiting ------------------------------------------------------------------- */

/* Something may be in the CQ: handle it all, then what was held back. */
RVX_COLD int rvx__rc_progress_slow(rvx__rc_iface_t *ifc)
{
    int n;
    if (ifc->in_rx) {
        if (!ifc->warned_nested++) rvx__log("rvx_progress called from an AM handler: ignored");
        return 0;
    }
    ifc->in_rx = 1;
    n = 0;
#if RVX_CAN_RECEIVE
    if (ifc->def_head) n += rvx__rc_deliver_deferred(ifc);
#endif
    n += rvx__rc_drain(ifc, 1);
    ifc->in_rx = 0;
    return n;
}

RVX_COLD int rvx__rc_poll_blocking(rvx__rc_iface_t *ifc)
{
    /* inside an rvx call (or a handler): completions and replies; requests go aside for the
     * next rvx_progress */
    return rvx__rc_drain(ifc, 0);
}

/* A signaled NOP after an unsignaled tail (tl/mlx5/sq.h). */
RVX_COLD void rvx__rc_sig_tail(rvx__rc_conn_t *c)
{
    rvx__mlx5_tx_sig_tail(&c->sq, &c->tx);
}

/* ---- the send budget ------------------------------------------------------------------------ */

/* The conn's grant is g (0: none): room and the limit the put path checks follow. */
RVX_COLD void rvx__rc_grant_set(rvx__rc_iface_t *ifc, unsigned i, uint32_t g)
{
    rvx__rc_conn_t *c = ifc->holders[i];
    ifc->holder_g[i] = g;
    c->sq.room = g ? g - 1 : 0;
    c->sq.pi_limit = c->sq.ci + c->sq.room;
    if (!g) { /* no longer a holder */
        ifc->nholders--;
        ifc->holders[i] = ifc->holders[ifc->nholders];
        ifc->holder_g[i] = ifc->holder_g[ifc->nholders];
    }
}

/* Where c is in the holders (at most RVX__RC_HOLDERS), or -1. */
RVX_COLD int rvx__rc_holder_of(const rvx__rc_iface_t *ifc, const rvx__rc_conn_t *c)
{
    unsigned i;
    for (i = 0; i < ifc->nholders; i++)
        if (ifc->holders[i] == c) return (int)i;
    return -1;
}

/* The budget is short: idle holders give their grant back, busy ones what they do not use (the
 * WQEBBs outstanding and one for a NOP stay), and post a signaled NOP so that a CQE retires their
 * work. Only holders are looked at, never every peer. */
RVX_COLD void rvx__rc_grant_reclaim(rvx__rc_iface_t *ifc, const rvx__rc_conn_t *except)
{
    unsigned i = 0;
    while (i < ifc->nholders) {
        rvx__rc_conn_t *h = ifc->holders[i];
        uint32_t g = ifc->holder_g[i], used = h->sq.pi - h->sq.ci;
        uint32_t keep = used ? (used + 1 + RVX__RC_GRANT - 1) / RVX__RC_GRANT * RVX__RC_GRANT : 0;
        if (h == except || keep >= g) {
            if (h != except && used) { rvx__rc_sig_tail(h); rvx__rc_hold(h); }
            i++;
            continue;
        }
        ifc->tx_free += g - keep;
        rvx__rc_grant_set(ifc, i, keep);
        if (keep) { /* still a holder: its tail must be signaled (it keeps room for the NOP) */
            rvx__rc_sig_tail(h);
            rvx__rc_hold(h);
            i++;
        }
    }
}

/* c needs room for nbb more WQEBBs: a larger grant (twice the last, at most what its queue holds,
 * at least enough), from the budget, taken back from other holders if it is short. 1: done. */
RVX_COLD int rvx__rc_grant_grow(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t nbb)
{
    uint32_t cap = (c->sq.mask + 1 - RVX__RC_SQ_RESERVE) / RVX__RC_GRANT * RVX__RC_GRANT;
    uint32_t need = c->sq.pi - c->sq.ci + nbb + 1, g, want, more;
    int i = rvx__rc_holder_of(ifc, c);
    g = i >= 0 ? ifc->holder_g[i] : 0;
    need = (need + RVX__RC_GRANT - 1) / RVX__RC_GRANT * RVX__RC_GRANT;
    if (need > cap) return 0; /* the queue itself is full: only CQEs help */
    want = 2 * g > need ? 2 * g : need;
    if (want > cap) want = cap;
    if (ifc->tx_free < want - g) rvx__rc_grant_reclaim(ifc, c);
    more = ifc->tx_free / RVX__RC_GRANT * RVX__RC_GRANT;
    if (more < want - g) want = g + more;
    if (want < need) return 0;
    if (i < 0) {
        i = (int)ifc->nholders++;
        ifc->holders[i] = c;
    }
    ifc->tx_free -= want - g;
    rvx__rc_grant_set(ifc, (unsigned)i, want);
    return 1;
}

/* The conn took a new QP (rvx__rc_adopt): the old one is quiet, so the grant stays with the
 * conn. A connected conn is about to send a hello outside the data path's checks: it needs a
 * grant, waited for if the budget is short. */
RVX_COLD void rvx__rc_grant_adopt(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    int i = rvx__rc_holder_of(ifc, c);
    unsigned spins = 0;
    c->sq.room = 0;
    c->sq.pi_limit = c->sq.ci;
    if (i >= 0) rvx__rc_grant_set(ifc, (unsigned)i, ifc->holder_g[i]);
    else if (c->connected)
        while (!rvx__rc_grant_grow(ifc, c, 1)) {
            if (rvx__rc_poll_blocking(ifc)) spins = 0;
            else rvx__backoff(&spins);
        }
}

/* Room for nbb WQEBBs: a larger grant, else CQEs that retire work (of this conn, or of the
 * holders the budget waits for). */
RVX_COLD void rvx__rc_wait_room(rvx__rc_conn_t *c, uint32_t nbb)
{
    rvx__rc_iface_t *ifc = c->ifc;
    unsigned spins = 0;
    while (c->sq.pi - c->sq.ci + nbb > c->sq.room) {
        if (rvx__rc_grant_grow(ifc, c, nbb)) break;
        rvx__rc_sig_tail(c); /* something must be signaled, or no CQE would ever free room */
        rvx__rc_hold(c); /* a failed QP frees its queue through error CQEs */
        if (rvx__rc_poll_blocking(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    /* the first post since a flush found the conn idle joins the list; after the polls above,
     * which may have found it idle again and taken it out */
    if (!c->in_wf) rvx__rc_busy(c);
}

/* The bounce pool's memory, registered at the first copy (lanes that never copy never pay). */
RVX_COLD rvx_status_t rvx__rc_bpool_init(rvx__rc_iface_t *ifc)
{
    unsigned i, n = RVX__RC_BOUNCE_BYTES / RVX__RC_BOUNCE_SEG;
    ifc->bpool = (uint8_t *)rvx__mlx5_alloc(ifc->ctx, RVX__RC_BOUNCE_BYTES);
    ifc->bfree = (uint32_t *)calloc(n, sizeof(*ifc->bfree));
    ifc->bsegs = (rvx__rc_bseg_t *)calloc(n, sizeof(*ifc->bsegs));
    if (!ifc->bpool || !ifc->bfree || !ifc->bsegs) return RVX_ERR_NO_MEMORY;
    ifc->bpool_mr = rvx__mlx5_reg(ifc->ctx, ifc->bpool, RVX__RC_BOUNCE_BYTES, "the bounce pool");
    if (!ifc->bpool_mr) return RVX_ERR_NO_RESOURCE;
    for (i = 0; i < n; i++) {
        ifc->bfree[i] = n - 1 - i;
        ifc->bsegs[i].buf = ifc->bpool + (size_t)i * RVX__RC_BOUNCE_SEG;
        ifc->bsegs[i].lkey = ifc->bpool_mr->lkey;
    }
    ifc->nbfree = n;
    return RVX_OK;
}

/* The segment s goes back to the pool (nothing of it is in flight); its holder points to the
 * empty record again, so its next copy asks for one. */
RVX_COLD void rvx__rc_bounce_put(rvx__rc_iface_t *ifc, rvx__rc_bseg_t *s)
{
    s->holder->bs = &ifc->bnone;
    s->holder = NULL;
    ifc->bfree[ifc->nbfree++] = (uint32_t)(s - ifc->bsegs);
}

/* A segment for c: a free one, or one whose holder has nothing in flight in it. Only the pool's
 * segments are looked at, never every peer. 1: c has one. */
RVX_COLD int rvx__rc_bounce_take(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    unsigned i, n = RVX__RC_BOUNCE_BYTES / RVX__RC_BOUNCE_SEG;
    rvx__rc_bseg_t *s;
    if (!ifc->bpool && rvx__rc_bpool_init(ifc) != RVX_OK) return 0;
    for (i = 0; i < n && !ifc->nbfree; i++) {
        s = &ifc->bsegs[i];
        if (!s->holder) continue;
        if (s->lim - s->head == RVX__RC_BOUNCE_SEG) rvx__rc_bounce_put(ifc, s);
        else rvx__rc_sig_tail(s->holder); /* so that a CQE gives its segment back */
    }
    if (!ifc->nbfree) return 0;
    s = &ifc->bsegs[ifc->bfree[--ifc->nbfree]];
    s->holder = c;
    s->lim = s->head + RVX__RC_BOUNCE_SEG;
    c->bs = s;
    return 1;
}

RVX_COLD uint8_t *rvx__rc_bounce_wait(rvx__rc_conn_t *c, size_t len)
{
    unsigned spins = 0;
    for (;;) {
        rvx__rc_bseg_t *s = c->bs;
        uint64_t pos = s->head, off = pos % RVX__RC_BOUNCE_SEG;
        int none = s == &c->ifc->bnone;
        if (off + len > RVX__RC_BOUNCE_SEG) { pos += RVX__RC_BOUNCE_SEG - off; off = 0; }
        if (!none && pos + len <= s->lim) {
            s->head = pos + len;
            return s->buf + off;
        }
        if (c->failed && c->sq.ci == c->sq.pi) return NULL;
        if (none) {
            if (rvx__rc_bounce_take(c->ifc, c)) continue;
            if (!c->ifc->bpool_mr) return NULL;
        } else {
            rvx__rc_sig_tail(c);
            if (c->sq.ci == c->sq.pi) { s->lim = s->head + RVX__RC_BOUNCE_SEG; continue; } /* all of it is free */
        }
        if (rvx__rc_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

/* A transfer stops early: its conn failed. The chunks it posted come back first (the failed QP
 * flushes them), so that none of them names req, perhaps the caller's stack, once this returns. */
RVX_COLD rvx_status_t rvx__rc_stop(rvx__rc_conn_t *c, rvx_request_t *req)
{
    unsigned spins = 0;
    rvx__rc_sig_tail(c); /* a CQE after the last chunk, if it was unsignaled */
    while (c->sq.ci != c->sq.pi) {
        if (rvx__rc_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)(req->status = rvx__rc_fail_st(c));
}

RVX_COLD rvx_status_t rvx__rc_wait_req(rvx__rc_conn_t *c, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (rvx__rc_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

/* MULT, MIN, MAX, UMIN, UMAX: read, compute, compare-and-swap until no one else changed it. */
RVX_COLD rvx_status_t rvx__rc_amo_loop(rvx__rc_conn_t *c, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         void *fetch, rvx_request_t *req)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, old = 0, seen = 0, nv;
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned cs = size == 8 ? MLX5_OPCODE_ATOMIC_CS : MLX5_OPCODE_ATOMIC_MASKED_CS;
    rvx_status_t st;
    (void)req;
    st = rvx__rc_amo(c, fa, size, 0, 0, 0, 0, raddr, rkey, &old, NULL);
    while (st == RVX_OK) {
        if (!rvx__mlx5_amo_next(op, size, old, v, &nv)) return RVX_ERR_INVALID_PARAM;
        seen = 0;
        st = rvx__rc_amo(c, cs, size, nv, old, ones, ones, raddr, rkey, &seen, NULL);
        if (st != RVX_OK || (seen & ones) == (old & ones)) break;
        old = seen;
    }
    if (st == RVX_OK && fetch) {
        if (size == 8) *(uint64_t *)fetch = old;
        else *(uint32_t *)fetch = (uint32_t)old;
    }
    return st;
}

/* ---- flush ---------------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__rc_flush_slow(rvx__rc_conn_t *c, rvx_request_t *req)
{
    rvx__rc_drain(c->ifc, 0);
    if (c->sq.ci == c->sq.pi) return RVX__RC_ERR(c);
    if (c->failed) rvx__rc_hold(c); /* every WQE comes back with an error CQE */
    else rvx__rc_sig_tail(c); /* the last WQE is unsignaled: a signaled NOP covers it */
    if (!req) return RVX_ERR_INVALID_PARAM;
    rvx__mlx5_tx_flush_add(&c->tx, req, c->sq.pi);
    return RVX_INPROGRESS;
}

RVX_COLD rvx_status_t rvx__rc_iface_flush(rvx__rc_iface_t *ifc, rvx_request_t *req)
{
    uint32_t *at = &ifc->wf_head;
    int busy = 0;
    rvx__rc_drain(ifc, 0);
    while (*at != RVX__RC_WF_END) { /* the conns that posted since a flush found them idle */
        rvx__rc_conn_t *c = &ifc->conns[*at];
        if (c->sq.ci == c->sq.pi) { rvx__rc_idle(ifc, at); continue; }
        at = &c->wf_next;
        if (!c->ep) continue;
        if (c->failed) rvx__rc_hold(c);
        else rvx__rc_sig_tail(c);
        c->wflush_pi = c->sq.pi;
        busy = 1;
    }
    if (!busy) return RVX_OK;
    if (!req) return RVX_ERR_INVALID_PARAM;
    req->status = RVX_INPROGRESS;
    req->tl_private[0] = (uint64_t)(uintptr_t)ifc->wflush;
    ifc->wflush = req;
    return RVX_INPROGRESS;
}

/* ---- liveness ------------------------------------------------------------------------------- */

/* A zero-length WRITE to the peer's control region, signaled: its completion shows the peer's
 * NIC still answers. No data segment: a zero-length one would mean 2 GiB to the NIC. */
RVX_COLD void rvx__rc_keepalive(rvx__rc_conn_t *c)
{
    rvx__mlx5_rkey_t k;
    uint32_t pi;
    uint8_t *wqe;
    rvx__mlx5_wqe_write0_t *w;
    rvx__rc_peer_ctrl(c, &k);
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    w = (rvx__mlx5_wqe_write0_t *)(void *)wqe;
    rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->sq.qpn8, RVX__MLX5_DS_RDMA_NODATA,
                       rvx__mlx5_moderate(&c->sq, 1), 0);
    rvx__mlx5_set_raddr(&w->raddr, k.base, &k);
    memset(w->unused, 0, sizeof(w->unused));
    rvx__rc_mark_sig(c, pi, pi + 1);
    c->ka_pi = pi + 1;
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

/* A peer that died is noticed when a WQE to it runs out of retries. With nothing in flight, a
 * keepalive every 100 ms. */
RVX_COLD rvx_status_t rvx__rc_ep_alive(rvx__rc_ep_t *ep)
{
    rvx__rc_conn_t *c = ep->c;
    uint32_t now;
    if (c->failed || c->err != RVX_OK) /* err: re-connected, not re-created */
        return RVX__MLX5_EP_FAILURE(c->err);
    rvx__rc_drain(c->ifc, 0);
    if (c->failed) return RVX__MLX5_EP_FAILURE(c->err);
    now = rvx__rc_now_ms();
    if ((c->ka_pi == 0 || (int32_t)(c->sq.ci - c->ka_pi) >= 0) && now - c->ka_ms > 100) {
        c->ka_ms = now;
        rvx__rc_keepalive(c);
    }
    return RVX_OK;
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

#endif /* RVX_TL_RC_POLL_H */
