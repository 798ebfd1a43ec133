/* rvx/tl/rc/reconnect.h: re-establishing a failed rc_mlx5 connection (cold). Included at the end
 * of tl/rc_mlx5.h.
 *
 * Every conn has a spare QP, connected at worker creation to the peer's spare and left in RTR
 * with one receive posted for a hello message (imm info 0xffff). rvx_ep_create on a failed conn
 * moves the old QP to ERR, waits until it has flushed everything, takes the spare as its QP (to
 * RTS, fresh counters), creates the next spare and sends a hello (REQ) carrying that spare's
 * QPN. The peer's NIC acknowledges it even if its process never looks; when the peer polls, it
 * sees the REQ arrive on its spare, fails and drains its own old QP the same way, adopts its
 * spare and answers with a hello (ACK) carrying its next spare's QPN. Each side then takes its
 * next spare to RTR towards the other's, ready for the next failure. Messages are not sent before
 * the peer's hello arrived (it grants the credits); puts, gets and atomics work at once, since
 * the peer's spare answers them in RTR. Failed QPs are kept (in ERR) until the worker goes:
 * destroying or resetting a QP makes libmlx5 clean its CQEs out of a CQ whose consumer index it
 * does not know here. */
#ifndef RVX_TL_RC_RECONNECT_H
#define RVX_TL_RC_RECONNECT_H

typedef struct rvx__mlx5_hello_msg {
    uint32_t magic;     /* RVX__MLX5_HELLO_MAGIC */
    uint32_t next_qpn;  /* the sender's next spare */
} rvx__mlx5_hello_msg_t;
#define RVX__MLX5_HELLO_MAGIC 0x72767848u /* "rvxH" */

/* Nothing more will complete on the conn's QP: every WQE and every receive has come back. */
RVX_COLD int rvx__mlx5_quiet(const rvx__mlx5_conn_t *c)
{
    return c->sq.ci == c->sq.pi; /* receives: the shared queue flushes nothing */
}

/* Fail the conn's QP on purpose: the NIC flushes everything it holds. WQEs that already completed
 * unsignaled get no completion from the flush: a signaled NOP after them first (completed or
 * flushed, its CQE retires them), or the QP would never look quiet. */
RVX_COLD void rvx__mlx5_to_err(rvx__mlx5_conn_t *c, rvx_status_t st)
{
    rvx__mlx5_sig_tail(c);
    if (!c->failed) {
        c->failed = 1;
        c->err = st;
        c->tx_limit = 0;
    }
    rvx__mlx5_qp_to_err(c->qp, c->rank);
    rvx__mlx5_hold(c);
}

/* Send our hello (REQ or ACK) with the QPN of our next spare, signaled, outside the credits. */
RVX_COLD void rvx__mlx5_send_hello(rvx__mlx5_conn_t *c, unsigned kind)
{
    rvx__mlx5_hello_msg_t m;
    uint32_t pi = c->sq.pi;
    uint8_t *wqe = rvx__mlx5_slot(&c->sq, pi);
    m.magic = RVX__MLX5_HELLO_MAGIC;
    m.next_qpn = c->sp_qpn;
    rvx__mlx5_send_inline(&c->sq, wqe, pi, rvx__mlx5_moderate(&c->sq, 1),
                          rvx_htobe32(RVX__MLX5_HELLO | kind << 16), &m, sizeof(m));
    rvx__mlx5_mark_sig(c, pi, pi + 1);
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

/* The next spare towards the conn's peer: INIT, its hello receive posted, in the QPN table; RTR
 * once the peer's next spare is known. Without one a later failure is final. */
RVX_COLD void rvx__mlx5_next_spare(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c)
{
    struct ibv_qp *next = rvx__mlx5_qp_new(ifc);
    c->sp_rqpn = 0;
    if (next) {
        if (rvx__mlx5_qpt_add(ifc, next->qp_num, c->rank | RVX__MLX5_QPT_SPARE) == RVX_OK) {
            c->sp_qp = next;
            c->sp_qpn = next->qp_num;
        } else {
            ibv_destroy_qp(next); /* never connected: nothing of it is in the CQ */
        }
    }
    if (!c->sp_qp) {
        rvx__log("rc_mlx5: no spare QP towards rank %d: a later failure will be final", c->rank);
        c->sp_qpn = 0;
    }
}

/* The conn's QP is quiet: keep it (in ERR), take the spare as the QP (to RTS towards the peer's
 * spare), create the next spare, post the message buffers and say hello. The initiator's hello
 * is the REQ; the follower answers with the ACK, and may send at once (the initiator posted its
 * buffers before its REQ). */
RVX_COLD rvx_status_t rvx__mlx5_take_spare(rvx__mlx5_conn_t *c, int initiator)
{
    rvx__tl_iface_t *ifc = c->ifc;
    struct ibv_qp **dead;
    rvx_status_t st;

    dead = (struct ibv_qp **)realloc(c->dead, (c->ndead + 1) * sizeof(*dead));
    if (!dead) return RVX_ERR_NO_MEMORY;
    c->dead = dead;
    c->dead[c->ndead++] = c->qp;
    rvx__mlx5_qpt_set(ifc, c->qpn, RVX__MLX5_QPT_GONE);
    c->rx_held = 0; /* frames kept for an endpoint that did not exist yet are copies already:
                     * delivered once it does; their credits went with the old QP */
    rvx__mlx5_tx_settle(&c->tx);
    st = rvx__mlx5_adopt(ifc, c, c->sp_qp);
    if (st != RVX_OK) {
        rvx__log("rc_mlx5: cannot take the spare QP towards rank %d", c->rank);
        return st;
    }
    c->sp_qp = NULL;
    rvx__mlx5_qpt_set(ifc, c->qpn, c->rank);
    c->rqpn = c->sp_rqpn;
    if (c->bounce) c->b_tail = c->b_head; /* what was in flight on the old QP is gone */
    c->ka_time = rvx__now_s();
    /* no credit until the peer's hello says its buffers are posted; the REQ said so already */
    ifc->ctrl[c->rank] = initiator ? 0 : ifc->credits;
    c->tx_limit = 0;
    st = rvx__mlx5_qp_connect(c, c->qp, c->rqpn, RVX__MLX5_RTR_TO_RTS);
    if (st != RVX_OK) return st;
    c->failed = 0;
    c->err = RVX_OK;
    rvx__mlx5_next_spare(ifc, c);
    rvx__mlx5_send_hello(c, initiator ? RVX__MLX5_HELLO_REQ : RVX__MLX5_HELLO_ACK);
    return RVX_OK;
}

/* The peer's next spare is known: take ours to RTR towards it. */
RVX_COLD void rvx__mlx5_spare_ready(rvx__mlx5_conn_t *c, uint32_t peer_next)
{
    c->sp_rqpn = peer_next;
    if (c->sp_qp && rvx__mlx5_qp_connect(c, c->sp_qp, peer_next, RVX__MLX5_TO_RTR) != RVX_OK)
        c->sp_rqpn = 0;
}

/* A hello arrived: on our spare (the peer re-connected: follow), or on our QP (the answer to
 * ours, or the peer's own REQ when both sides re-connected at once). */
RVX_COLD void rvx__mlx5_hello(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, int on_spare,
                              uint32_t imm_be, const uint8_t *body)
{
    rvx__mlx5_hello_msg_t m;
    unsigned kind = rvx_htobe32(imm_be) >> 16;
    memcpy(&m, body, sizeof(m));
    if (m.magic != RVX__MLX5_HELLO_MAGIC || kind > RVX__MLX5_HELLO_ACK) {
        rvx__log("rc_mlx5: a malformed re-connection message from rank %d: ignored", c->rank);
        return;
    }
    if (!on_spare) {
        if (!c->rec_wait) {
            rvx__log("rc_mlx5: an unexpected re-connection message from rank %d: ignored", c->rank);
            return;
        }
        c->rec_wait = 0;
        rvx__mlx5_spare_ready(c, m.next_qpn);
        ifc->ctrl[c->rank] = ifc->credits; /* it has started afresh: credits */
        return;
    }
    if (kind != RVX__MLX5_HELLO_REQ || c->rec_pending) {
        rvx__log("rc_mlx5: an unexpected re-connection message from rank %d: ignored", c->rank);
        return;
    }
    /* follow: whatever is in flight on our QP is lost with the peer's old QP. An endpoint that
     * exists fails (its user learns it, as from any failure, and re-creates it); without one the
     * spare is taken as soon as the old QP is quiet. */
    if (!c->failed && c->ep)
        rvx__log("rc_mlx5: rank %d re-connected after a failure: the endpoint to it fails (%s) "
                 "until it is re-created", c->rank, rvx_status_str(RVX_ERR_CANCELED));
    rvx__mlx5_to_err(c, RVX_ERR_CANCELED);
    c->rec_pending = 1;
    c->rec_peer_sp = m.next_qpn;
    ifc->nrec++;
    ifc->outstanding++; /* keep progress polling until the swap is done */
}

/* Follow a pending re-connection: the old QP is quiet; take the spare and answer. */
RVX_COLD rvx_status_t rvx__mlx5_follow(rvx__mlx5_conn_t *c)
{
    rvx_status_t st;
    c->rec_pending = 0;
    c->ifc->nrec--;
    c->ifc->outstanding--;
    st = rvx__mlx5_take_spare(c, 0);
    if (st == RVX_OK) rvx__mlx5_spare_ready(c, c->rec_peer_sp);
    return st;
}

/* Follow every pending re-connection that has no endpoint and whose old QP has gone quiet
 * (with an endpoint, rvx_ep_create does it). */
RVX_COLD void rvx__mlx5_rec_poll(rvx__tl_iface_t *ifc)
{
    int i;
    for (i = 0; i < ifc->nranks && ifc->nrec; i++) {
        rvx__mlx5_conn_t *c = &ifc->conns[i];
        if (c->rec_pending && !c->ep && rvx__mlx5_quiet(c)) rvx__mlx5_follow(c);
    }
}

/* Poll until the conn's QP is quiet, for at most 10 s. */
RVX_COLD rvx_status_t rvx__mlx5_wait_quiet(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c)
{
    double t0 = rvx__now_s();
    unsigned spins = 0;
    while (!rvx__mlx5_quiet(c)) {
        if (rvx__mlx5_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        if (rvx__now_s() - t0 > 10) {
            rvx__log("rc_mlx5: the failed QP towards rank %d did not flush in 10 s (WQEs %u of "
                     "%u)", c->rank, c->sq.ci, c->sq.pi);
            return c->err != RVX_OK ? c->err : RVX_ERR_IO;
        }
    }
    return RVX_OK;
}

/* rvx_ep_create on a failed conn: fail the old QP on purpose, wait until it is quiet, take the
 * spare and send the REQ. The REQ's completion shows that the peer's NIC took it (a dead peer
 * gives RVX_ERR_PEER_FAILED after the QP's retries); the peer's answer is awaited for 100 ms
 * but not required (a peer that never polls still serves puts and gets through its spare). */
RVX_COLD rvx_status_t rvx__mlx5_reconnect(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c)
{
    double t0;
    unsigned spins = 0;
    rvx_status_t st;
    if (!c->sp_qp || !c->sp_rqpn) {
        rvx__log("rc_mlx5: the connection to rank %d failed (%s) and cannot be re-established: "
                 "%s", c->rank, rvx_status_str(c->err),
                 c->sp_qp ? "the peer never answered the last re-connection" : "no spare QP");
        return c->err;
    }
    if (!c->rec_pending) rvx__mlx5_to_err(c, c->err);
    st = rvx__mlx5_wait_quiet(ifc, c);
    if (st != RVX_OK) return st;
    if (c->rec_pending) return rvx__mlx5_follow(c); /* the peer re-connected first */
    st = rvx__mlx5_take_spare(c, 1);
    if (st != RVX_OK) return st;
    c->rec_wait = 1;
    /* the REQ's own completion: the peer's NIC has it */
    while (c->sq.ci != c->sq.pi && !c->failed) {
        if (rvx__mlx5_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
    }
    if (c->failed) {
        rvx__log("rc_mlx5: rank %d did not take the re-connection: %s", c->rank,
                 rvx_status_str(c->err));
        return c->err;
    }
    t0 = rvx__now_s();
    while (c->rec_wait && !c->failed && rvx__now_s() - t0 < 0.1) {
        if (rvx__mlx5_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
    }
    return c->failed ? c->err : RVX_OK;
}

#endif /* RVX_TL_RC_RECONNECT_H */
