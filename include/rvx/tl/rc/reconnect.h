/* rvx/tl/rc/reconnect.h: re-establishing a failed rc_mlx5 connection (cold).
 *
 * A conn has one QP; nothing is kept in reserve for a failure. Each iface has one UD QP, the hello
 * QP (tl/rc/hello.h; its number is in the iface's address), on the iface's CQ and shared receive
 * queue. rvx_ep_create on a failed conn moves the old QP to ERR, waits until it has flushed
 * everything, creates a new QP (INIT) and sends the peer's hello QP a datagram, REQ, carrying the
 * new QPN and the old one (which the peer is connected to: a REQ naming another is stale). The
 * peer, when it next polls, fails and drains its own old QP the same way, creates its new QP,
 * connects it to ours (RTR, RTS) and answers ACK with its number; we connect ours and send an UP
 * message over the new RC QP, whose completion shows the peer's NIC has the connection. Both sides
 * re-connecting at once cross: each takes the other's REQ as the answer it waited for, connects,
 * and answers it. Datagrams may be lost: the REQ is sent again every 100 ms, and a REQ for a
 * connection already made is answered again; a peer that does not answer within the QP's own retry
 * time is reported failed. Credits: we may send to the peer once its answer (ACK) came, it to us
 * once our UP came. An endpoint that existed on the peer's side fails (RVX_ERR_CANCELED, learnt
 * from its status and flushes) until its user re-creates it.
 *
 * The answer needs the peer's process to poll its CQ: any rvx call that polls (rvx_progress in
 * builds that receive, with an endpoint; waits, flushes and endpoint creation in every build).
 * What only a re-connection needs is allocated while one is under way (rvx__rc_rec_t); failed
 * QPs are kept (in ERR) until the worker goes, in one list per iface: destroying or resetting a
 * QP makes libmlx5 clean its CQEs out of a CQ whose consumer index it does not know here. */
#ifndef RVX_TL_RC_RECONNECT_H
#define RVX_TL_RC_RECONNECT_H

/* How long an initiator waits for the peer's answer: the QP's own retry time (a dead peer is
 * reported as late as a WQE to it would be), between 1 and 10 s. */
#define RVX__RC_REC_RETRY_S ((RVX_MLX5_RETRY + 1) * 4.096e-6 * (double)(1ull << RVX_MLX5_TIMEOUT))
#define RVX__RC_REC_WAIT_S  (RVX__RC_REC_RETRY_S < 1 ? 1.0 : RVX__RC_REC_RETRY_S > 10 ? 10.0 \
                               : RVX__RC_REC_RETRY_S)

/* ---- taking a new QP ------------------------------------------------------------------------ */

/* Nothing more will complete on the conn's QP: every WQE has come back. */
RVX_COLD int rvx__rc_quiet(const rvx__rc_conn_t *c)
{
    return c->sq.ci == c->sq.pi; /* receives: the shared queue flushes nothing */
}

/* Fail the conn's QP on purpose: the NIC flushes everything it holds. WQEs that already completed
 * unsignaled get no completion from the flush: a signaled NOP after them first (completed or
 * flushed, its CQE retires them), or the QP would never look quiet. */
RVX_COLD void rvx__rc_to_err(rvx__rc_conn_t *c, rvx_status_t st)
{
    rvx__rc_sig_tail(c);
    if (!c->failed) {
        c->failed = 1;
        c->err = st;
        c->tx_limit = c->tx_sent;
    }
    rvx__mlx5_qp_to_err(c->qp, rvx__rc_rank(c));
    rvx__rc_hold(c);
}

/* The conn's re-connection under way, or NULL. */
RVX_COLD rvx__rc_rec_t *rvx__rc_rec_find(const rvx__rc_conn_t *c)
{
    rvx__rc_rec_t *r = c->ifc->hello ? c->ifc->hello->recs : NULL;
    while (r && r->conn != c) r = r->lnext;
    return r;
}

/* The conn's re-connection record, created if there is none (NULL: no memory). */
RVX_COLD rvx__rc_rec_t *rvx__rc_rec_of(rvx__rc_conn_t *c)
{
    rvx__rc_hello_t *h = c->ifc->hello;
    rvx__rc_rec_t *r = rvx__rc_rec_find(c);
    if (r || !h) return r;
    r = (rvx__rc_rec_t *)calloc(1, sizeof(*r));
    if (!r) return NULL;
    r->conn = c;
    r->lnext = h->recs;
    h->recs = r;
    return r;
}

RVX_COLD void rvx__rc_rec_free(rvx__rc_conn_t *c)
{
    rvx__rc_rec_t **pp = c->ifc->hello ? &c->ifc->hello->recs : NULL, *r;
    while (pp && *pp && (*pp)->conn != c) pp = &(*pp)->lnext;
    if (!pp || !*pp) return;
    r = *pp;
    *pp = r->lnext;
    free(r);
}

/* The conn goes: a re-connection under way ends, its new QP with it unless the conn has it. */
RVX_COLD void rvx__rc_rec_drop(rvx__rc_conn_t *c)
{
    rvx__rc_rec_t *r = rvx__rc_rec_find(c);
    if (!r) return;
    if (r->qp && !r->taken) ibv_destroy_qp(r->qp);
    rvx__rc_rec_free(c);
}

/* The conn's old QP is quiet: keep it (in ERR) and take qp, connected to the peer's QP rqpn, as
 * the conn's QP. No credit until the peer's QP is known to be connected (its ACK, or our UP's
 * arrival there). A follower's endpoint that existed fails until it is re-created. */
RVX_COLD rvx_status_t rvx__rc_take(rvx__rc_conn_t *c, struct ibv_qp *qp, uint32_t rqpn,
                                     int initiator)
{
    rvx__rc_iface_t *ifc = c->ifc;
    struct ibv_qp *old = c->qp;
    uint32_t old_qpn = c->qpn;
    rvx_status_t st;

    rvx__mlx5_tx_settle(&c->tx);
    st = rvx__rc_adopt(ifc, c, qp);
    if (st == RVX_OK) st = rvx__rc_qpt_add(ifc, c->qpn, rvx__rc_rank(c));
    if (st != RVX_OK) {
        rvx__log("rc_mlx5: cannot take a new QP towards rank %d", rvx__rc_rank(c));
        if (c->qp == qp) { c->qp = old; c->qpn = old_qpn; } /* the old one stays, failed */
        ibv_destroy_qp(qp); /* never connected: nothing of it is in the CQ */
        return st;
    }
    rvx__rc_dead_add(ifc->hello, old);
    rvx__rc_qpt_set(ifc, old_qpn, RVX__RC_QPT_GONE);
    c->rx_held = 0; /* frames kept for an endpoint that did not exist yet are copies already:
                     * delivered once it does; their credits went with the old QP */
    c->rqpn = rqpn;
    if (c->bs != &ifc->bnone) c->bs->lim = c->bs->head + RVX__RC_BOUNCE_SEG; /* what was in flight
                                                                                * on the old QP is gone */
    c->ka_ms = rvx__rc_now_ms();
    ifc->ctrl[rvx__rc_rank(c)] = 0;
    c->tx_limit = 0; /* tx_sent is 0 again (rvx__rc_adopt) */
    st = rvx__rc_qp_connect(c, qp, rqpn, RVX__RC_TO_RTS);
    if (st != RVX_OK) return st;
    c->failed = 0;
    c->err = !initiator && c->ep ? RVX_ERR_CANCELED : RVX_OK;
    return RVX_OK;
}

/* Follow the peer's re-connection: our old QP is quiet; a new QP, connected to the peer's, and
 * the answer. */
RVX_COLD rvx_status_t rvx__rc_follow(rvx__rc_conn_t *c)
{
    rvx__rc_iface_t *ifc = c->ifc;
    rvx__rc_conn_t **pp = &ifc->hello->follow;
    uint32_t peer_new = rvx__rc_rec_find(c)->peer_new;
    struct ibv_qp *qp;
    rvx_status_t st;
    while (*pp && *pp != c) pp = &rvx__rc_rec_find(*pp)->next;
    if (*pp) {
        *pp = rvx__rc_rec_find(c)->next;
        ifc->nrec--;
        ifc->outstanding--;
    }
    rvx__rc_rec_free(c);
    qp = rvx__rc_qp_new(ifc);
    if (!qp) return RVX_ERR_NO_RESOURCE;
    st = rvx__rc_take(c, qp, peer_new, 0);
    if (st == RVX_OK) rvx__rc_hello_send(ifc, rvx__rc_rank(c), RVX__RC_HELLO_ACK, c->qpn, peer_new);
    return st;
}

/* Follow every pending re-connection whose old QP has gone quiet: only the conns in the list
 * are looked at. */
RVX_COLD void rvx__rc_rec_poll(rvx__rc_iface_t *ifc)
{
    rvx__rc_conn_t *c = ifc->hello->follow, *next;
    for (; c; c = next) {
        next = rvx__rc_rec_find(c)->next;
        if (rvx__rc_quiet(c)) rvx__rc_follow(c);
    }
}

/* ---- messages in ---------------------------------------------------------------------------- */

/* A REQ or ACK from the peer's hello QP. */
RVX_COLD void rvx__rc_hello_in(rvx__rc_iface_t *ifc, const rvx__rc_hello_msg_t *m)
{
    rvx__rc_conn_t *c;
    rvx__rc_rec_t *rec;
    if (m->magic != RVX__RC_HELLO_MAGIC || m->rank < 0 || m->rank >= ifc->nranks ||
        m->kind > RVX__RC_HELLO_ACK) {
        rvx__log("rc_mlx5: a malformed re-connection message: ignored");
        return;
    }
    c = &ifc->conns[m->rank];
    rec = rvx__rc_rec_find(c);
    if (!c->connected) return;
    if (m->kind == RVX__RC_HELLO_ACK) {
        if (!rec || !rec->qp || m->prev != rec->qpn || rec->acked) return; /* stale */
        if (!rec->taken && rvx__rc_take(c, rec->qp, m->qpn, 1) != RVX_OK) {
            rec->qp = NULL; /* gone with the failure */
            return;
        }
        rec->taken = 1;
        rec->acked = 1;
        ifc->ctrl[rvx__rc_rank(c)] = ifc->credits; /* the peer's QP is connected, its buffers posted */
        return;
    }
    if (m->qpn == c->rqpn && !c->failed) { /* a REQ we answered: the answer was lost */
        rvx__rc_hello_send(ifc, rvx__rc_rank(c), RVX__RC_HELLO_ACK, c->qpn, m->qpn);
        return;
    }
    if (m->prev != c->rqpn || (rec && rec->follow)) return; /* stale, or known */
    if (rec && rec->qp && !rec->taken) { /* both sides re-connect: the REQs cross */
        if (rvx__rc_take(c, rec->qp, m->qpn, 1) != RVX_OK) {
            rec->qp = NULL;
            return;
        }
        rec->taken = 1;
        rvx__rc_hello_send(ifc, rvx__rc_rank(c), RVX__RC_HELLO_ACK, c->qpn, m->qpn);
        return;
    }
    if (rec && rec->qp) return; /* we are connected to it already and wait for its ACK */
    /* follow: whatever is in flight on our QP is lost with the peer's old QP. An endpoint that
     * exists fails (its user learns it, as from any failure, and re-creates it). */
    if (!c->failed && c->ep)
        rvx__log("rc_mlx5: rank %d re-connected after a failure: the endpoint to it fails (%s) "
                 "until it is re-created", rvx__rc_rank(c), rvx_status_str(RVX_ERR_CANCELED));
    rec = rvx__rc_rec_of(c);
    if (!rec) return; /* no memory: the peer asks again */
    rvx__rc_to_err(c, RVX_ERR_CANCELED);
    rec->follow = 1;
    rec->peer_new = m->qpn;
    rec->next = ifc->hello->follow;
    ifc->hello->follow = c;
    ifc->nrec++;
    ifc->outstanding++; /* keep progress polling until the swap is done */
}

/* A CQE of the hello QP: a datagram sent, or one received (in a buffer of the shared queue,
 * after the GRH space). */
RVX_COLD void rvx__rc_hello_cqe(rvx__rc_iface_t *ifc, const struct mlx5_cqe64 *cqe, unsigned opcode)
{
    rvx__rc_hello_t *h = ifc->hello;
    uint16_t idx = rvx_htobe16(cqe->wqe_counter);
    if (opcode == MLX5_CQE_REQ) {
        h->sq.ci += (uint16_t)(idx - (uint16_t)h->sq.ci) + RVX__RC_HELLO_NBB;
        rvx__mlx5_sq_retired(&h->sq, h->sq.ci);
    } else if (rvx__mlx5_cqe_is_recv(opcode)) {
        /* every receive gives its buffer back (tl/mlx5/srq.h), a datagram of the wrong size too */
        const struct mlx5_err_cqe *e = (const struct mlx5_err_cqe *)(const void *)cqe;
        rvx__rc_hello_msg_t m;
        uint32_t len = rvx_htobe32(cqe->byte_cnt);
        int ok = opcode != MLX5_CQE_RESP_ERR && len == RVX__RC_UD_GRH + sizeof(m);
        if (ok) memcpy(&m, rvx__mlx5_srq_buf(&ifc->srq, idx) + RVX__RC_UD_GRH, sizeof(m));
        rvx__mlx5_srq_done(&ifc->srq, cqe);
        if (ok) rvx__rc_hello_in(ifc, &m);
        else if (rvx__mlx5_srq_drop(&ifc->srq)) /* logged only while drops are few */
            rvx__log("rc_mlx5: a re-connection datagram (opcode %u, %u bytes, syndrome 0x%x): "
                     "dropped", opcode, len, opcode == MLX5_CQE_RESP_ERR ? e->syndrome : 0);
    } else {
        const struct mlx5_err_cqe *e = (const struct mlx5_err_cqe *)(const void *)cqe;
        rvx__log("rc_mlx5: the re-connection QP completed with CQE opcode %u (syndrome 0x%x)",
                 opcode, e->syndrome);
    }
}

/* An RC message on a conn's QP with the hello immediate: the peer's UP after a re-connection
 * (credits towards it, if its ACK did not give them already). */
RVX_COLD void rvx__rc_hello(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t imm_be,
                              const uint8_t *body)
{
    rvx__rc_hello_msg_t m;
    memcpy(&m, body, sizeof(m));
    if (m.magic != RVX__RC_HELLO_MAGIC || m.kind != RVX__RC_HELLO_UP ||
        rvx_htobe32(imm_be) >> 16 != RVX__RC_HELLO_UP) {
        rvx__log("rc_mlx5: a malformed re-connection message from rank %d: ignored", rvx__rc_rank(c));
        return;
    }
    if (ifc->ctrl[rvx__rc_rank(c)] < ifc->credits) ifc->ctrl[rvx__rc_rank(c)] = ifc->credits;
}

/* ---- re-connecting -------------------------------------------------------------------------- */

/* Poll until the conn's QP is quiet, for at most 10 s. */
RVX_COLD rvx_status_t rvx__rc_wait_quiet(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    double t0 = rvx__now_s();
    unsigned spins = 0;
    while (!rvx__rc_quiet(c)) {
        if (rvx__rc_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        if (rvx__now_s() - t0 > 10) {
            rvx__log("rc_mlx5: the failed QP towards rank %d did not flush in 10 s (WQEs %u of "
                     "%u)", rvx__rc_rank(c), c->sq.ci, c->sq.pi);
            return c->err != RVX_OK ? RVX__RC_ERR(c) : RVX_ERR_IO;
        }
    }
    return RVX_OK;
}

/* Send REQ (again every 100 ms) until the peer answers, for at most RVX__RC_REC_WAIT_S. */
RVX_COLD int rvx__rc_wait_ack(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t old_qpn)
{
    rvx__rc_rec_t *rec = rvx__rc_rec_find(c);
    double t0 = rvx__now_s(), sent = -1, now = t0;
    unsigned spins = 0;
    while (rec->qp && !rec->acked && now - t0 < RVX__RC_REC_WAIT_S) {
        if (now - sent >= 0.1) {
            rvx__rc_hello_send(ifc, rvx__rc_rank(c), RVX__RC_HELLO_REQ, rec->qpn, old_qpn);
            sent = now;
        }
        if (rvx__rc_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        now = rvx__now_s();
    }
    return rec->acked;
}

/* rvx_ep_create on a failed conn: fail the old QP on purpose, wait until it is quiet, then follow
 * the peer if it re-connected first, or ask it (REQ) and wait for its answer; then UP over the new
 * QP, and its completion. */
RVX_COLD rvx_status_t rvx__rc_reconnect(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    rvx__rc_rec_t *rec;
    struct ibv_qp *qp;
    uint32_t old_qpn = c->qpn;
    unsigned spins = 0;
    rvx_status_t st;
    rec = rvx__rc_rec_find(c);
    if (!(rec && rec->follow)) rvx__rc_to_err(c, RVX__RC_ERR(c));
    st = rvx__rc_wait_quiet(ifc, c);
    if (st != RVX_OK) return st;
    if (!c->failed) return RVX_OK; /* followed the peer meanwhile */
    rec = rvx__rc_rec_find(c);
    if (rec && rec->follow) return rvx__rc_follow(c); /* the peer re-connected first */
    qp = rvx__rc_qp_new(ifc);
    rec = rvx__rc_rec_of(c);
    if (!qp || !rec) {
        if (qp) ibv_destroy_qp(qp);
        return RVX_ERR_NO_RESOURCE;
    }
    rec->qp = qp;
    rec->qpn = qp->qp_num;
    if (!rvx__rc_wait_ack(ifc, c, old_qpn)) {
        rvx__log("rc_mlx5: rank %d did not answer the re-connection in %.1f s: %s", rvx__rc_rank(c),
                 RVX__RC_REC_WAIT_S, rvx_status_str(RVX_ERR_PEER_FAILED));
        if (rec->qp && !rec->taken) ibv_destroy_qp(rec->qp); /* never connected */
        if (rec->taken && !c->failed) { /* its REQ crossed ours, then it went quiet */
            c->failed = 1;
            c->tx_limit = c->tx_sent;
        }
        c->err = RVX_ERR_PEER_FAILED;
        rvx__rc_rec_free(c);
        return RVX_ERR_PEER_FAILED;
    }
    rvx__rc_rec_free(c);
    rvx__rc_send_up(c);
    while (c->sq.ci != c->sq.pi && !c->failed) { /* the UP's own completion: the peer's NIC has it */
        if (rvx__rc_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
    }
    if (c->failed) {
        rvx__log("rc_mlx5: rank %d did not take the re-connection: %s", rvx__rc_rank(c),
                 rvx_status_str(RVX__RC_ERR(c)));
        return RVX__RC_ERR(c);
    }
    return RVX_OK;
}

#endif /* RVX_TL_RC_RECONNECT_H */
