/* rvx/tl/rc/cq.h: rc_mlx5's CQ poll (cold): retiring WQEs, error CQEs, received frames, pending
 * worker flushes; progress's slow path and the poll of the waits.
 *
 * Errors. An error CQE fails the operation it names (remote access -> RVX_ERR_REMOTE_ACCESS,
 * retries exhausted -> RVX_ERR_PEER_FAILED) and marks the endpoint failed; the WQEs after it are
 * flushed by the NIC and their requests complete with RVX_ERR_CANCELED; flushes return the first
 * error. Other endpoints are not affected. A failed connection is re-established by the next
 * rvx_ep_create (tl/rc/reconnect.h). */
#ifndef RVX_TL_RC_CQ_H
#define RVX_TL_RC_CQ_H

/* ---- retiring WQEs -------------------------------------------------------------------------- */


/* Retire [ci, end) (tl/mlx5/tx.h), giving back bounce space; flushes complete with the conn's
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
        if (!report) return;
        rvx__mlx5_wflush_note(&c->ifc->wflush_err, st);
        rvx__log("rc_mlx5: operation to rank %d failed: %s (syndrome 0x%x, vendor 0x%x, WQE %u): "
                 "the endpoint is marked failed", rvx__rc_rank(c), rvx__mlx5_syndrome_str(synd), synd,
                 vendor, idx);
    }
}

/* Whether the adapter failed the conn's QP as the responder of a request the peer should not
 * have made (rvx__mlx5_qp_event); if so the conn's status becomes RVX_ERR_REMOTE_ACCESS, with
 * one line. The event takes the kernel's path and may trail the flush that showed the failure:
 * rvx__rc_ep_alive looks again while the status is still RVX_ERR_CANCELED. */
RVX_COLD int rvx__rc_refused_here(rvx__rc_conn_t *c)
{
    int ev = rvx__mlx5_qp_event(c->ifc->ctx, c->qpn);
    if (ev != IBV_EVENT_QP_ACCESS_ERR && ev != IBV_EVENT_QP_REQ_ERR) return 0;
    rvx__log("rc_mlx5: rank %d %s: the adapter failed the connection to it, and the endpoint is "
             "marked failed", rvx__rc_rank(c), ev == IBV_EVENT_QP_ACCESS_ERR ?
             "accessed this process's memory outside its regions or rights" :
             "sent this process an invalid request");
    c->err = RVX_ERR_REMOTE_ACCESS;
    return 1;
}

/* The conn's QP was flushed with no error completion of ours: the adapter failed it as a
 * responder, or for a reason it did not say, for which the caller's status stands. */
RVX_COLD void rvx__rc_fail_flushed(rvx__rc_conn_t *c, rvx_status_t st, unsigned vendor, uint16_t idx)
{
    int said = rvx__rc_refused_here(c);
    rvx__rc_fail(c, said ? RVX_ERR_REMOTE_ACCESS : st, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, vendor, idx, !said);
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
        rvx__rc_fail_flushed(c, RVX_ERR_CANCELED, e->vendor_err_synd, idx);
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
        rvx__rc_fail_flushed(c, RVX_ERR_PEER_FAILED, e->vendor_err_synd, 0);
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
 * found idle are looked at (tl/rc/conn.h), never every peer; the idle ones leave the list. */
RVX_COLD void rvx__rc_wflush_check(rvx__rc_iface_t *ifc)
{
    uint32_t *at = &ifc->wf_head;
    while (*at != RVX__RC_WF_END) {
        rvx__rc_conn_t *c = &ifc->conns[*at];
        if (c->sq.ci == c->sq.pi) { rvx__rc_idle(ifc, at); continue; }
        if (c->ep && (int32_t)(c->sq.ci - c->wflush_pi) < 0) return; /* still busy: wait */
        at = &c->wf_next;
    }
    rvx__mlx5_wflush_done(&ifc->wflush, &ifc->wflush_err);
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

#endif /* RVX_TL_RC_CQ_H */
