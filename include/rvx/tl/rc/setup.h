/* rvx/tl/rc/setup.h: rc_mlx5's set-up (cold): the QPN table, QPs and their conns, the iface,
 * wire-up at worker creation, endpoints. Included at the end of tl/rc_mlx5.h. */
#ifndef RVX_TL_RC_SETUP_H
#define RVX_TL_RC_SETUP_H

RVX_COLD int rvx__rc_drain(rvx__rc_iface_t *ifc, int deliver);
RVX_COLD void rvx__rc_sig_tail(rvx__rc_conn_t *c);
RVX_COLD rvx_status_t rvx__rc_reconnect(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c);
RVX_COLD rvx_status_t rvx__rc_hello_init(rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_hello_fini(rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_rec_drop(rvx__rc_conn_t *c);
RVX_COLD uint32_t rvx__rc_hello_qpn(const rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_hello_addrs(rvx__rc_iface_t *ifc, const uint8_t *addrs, size_t stride);
RVX_COLD const rvx__rc_addr_t *rvx__rc_peer_addr(const rvx__rc_iface_t *ifc, int rank);

/* Where credit returns and keepalives to the conn's peer write: this rank's word of the peer's
 * control region (from the peer's address, which the worker keeps). */
RVX_COLD void rvx__rc_peer_ctrl(const rvx__rc_conn_t *c, rvx__mlx5_rkey_t *k)
{
    const rvx__rc_addr_t *a = rvx__rc_peer_addr(c->ifc, rvx__rc_rank(c));
    memset(k, 0, sizeof(*k));
    k->rkey_word = (uint64_t)rvx_htobe32(a->ctrl_rkey);
    k->base = a->ctrl_addr + 8 * (uint64_t)c->ifc->rank;
    k->len = 8;
}
#if RVX_CAN_RECEIVE
RVX_COLD void rvx__rc_release_held(rvx__rc_conn_t *c);
#endif

/* ---- QPN -> rank table ---------------------------------------------------------------------- */

/* Open addressing, at least two slots per live QP (one per rank, and the hello QP): a load of
 * at most one half, so a lookup seldom walks. Entries of QPs that complete nothing any more are GONE: a lookup walks
 * past them, an insert may take their place. */
RVX_COLD unsigned rvx__rc_qpt_hash(const rvx__rc_iface_t *ifc, uint32_t qpn)
{
    return (qpn * 2654435761u) >> ifc->qpt_shift;
}

RVX_COLD rvx_status_t rvx__rc_qpt_init(rvx__rc_iface_t *ifc, int nranks)
{
    uint32_t n = 64, i;
    unsigned bits = 6;
    while (n < 2 * (uint32_t)nranks + 2) { n *= 2; bits++; }
    ifc->qpt_qpn = (uint32_t *)calloc(n, sizeof(*ifc->qpt_qpn));
    ifc->qpt_rank = (int32_t *)malloc(n * sizeof(*ifc->qpt_rank));
    if (!ifc->qpt_qpn || !ifc->qpt_rank) return RVX_ERR_NO_MEMORY;
    for (i = 0; i < n; i++) ifc->qpt_rank[i] = RVX__RC_QPT_EMPTY;
    ifc->qpt_mask = n - 1;
    ifc->qpt_shift = 32 - bits;
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__rc_qpt_add(rvx__rc_iface_t *ifc, uint32_t qpn, int32_t val)
{
    unsigned h = rvx__rc_qpt_hash(ifc, qpn), i;
    for (i = 0; i <= ifc->qpt_mask; i++) {
        unsigned s = (h + i) & ifc->qpt_mask;
        if (ifc->qpt_rank[s] < 0) {
            ifc->qpt_qpn[s] = qpn;
            ifc->qpt_rank[s] = val;
            return RVX_OK;
        }
    }
    rvx__log("rc_mlx5: the QP table is full (%u QPs)", ifc->qpt_mask + 1);
    return RVX_ERR_NO_RESOURCE;
}

/* The rank of qpn (RVX__RC_QPT_HELLO for the hello QP), or -1. */
RVX_COLD int32_t rvx__rc_qpt_find(const rvx__rc_iface_t *ifc, uint32_t qpn, unsigned *slot)
{
    unsigned h = rvx__rc_qpt_hash(ifc, qpn), i;
    for (i = 0; i <= ifc->qpt_mask; i++) {
        unsigned s = (h + i) & ifc->qpt_mask;
        if (ifc->qpt_rank[s] == RVX__RC_QPT_EMPTY) break;
        if (ifc->qpt_rank[s] >= 0 && ifc->qpt_qpn[s] == qpn) {
            if (slot) *slot = s;
            return ifc->qpt_rank[s];
        }
    }
    return -1;
}

RVX_COLD void rvx__rc_qpt_set(rvx__rc_iface_t *ifc, uint32_t qpn, int32_t val)
{
    unsigned s;
    if (rvx__rc_qpt_find(ifc, qpn, &s) >= 0) ifc->qpt_rank[s] = val;
}

/* ---- the list of conns with work ------------------------------------------------------------ */

/* A worker flush looks only at the conns in the iface's flush list (ifc->wf_head, linked by their
 * wf_next): those that posted since a flush last found them idle. A conn out of the list has its send queue's limit at pi, so that its next post
 * of any kind takes the slow path (rvx__rc_wait_room), which puts it back: the list costs the
 * data path nothing. */
RVX_COLD void rvx__rc_busy(rvx__rc_conn_t *c)
{
    rvx__rc_iface_t *ifc = c->ifc;
    c->in_wf = 1;
    c->wflush_pi = c->sq.pi; /* flushes asked before this post do not wait for it */
    c->wf_next = ifc->wf_head;
    ifc->wf_head = (uint32_t)rvx__rc_rank(c);
    ifc->nwf++;
    c->sq.pi_limit = c->sq.ci + c->sq.room;
}

/* The conn *at links to is idle: out of the list, its next post comes back. */
RVX_COLD void rvx__rc_idle(rvx__rc_iface_t *ifc, uint32_t *at)
{
    rvx__rc_conn_t *c = &ifc->conns[*at];
    c->in_wf = 0;
    c->sq.pi_limit = c->sq.pi;
    *at = c->wf_next;
    ifc->nwf--;
}

/* ---- QPs and conns -------------------------------------------------------------------------- */

/* A new RC QP on the iface's CQ, taken to INIT. */
RVX_COLD struct ibv_qp *rvx__rc_qp_new(rvx__rc_iface_t *ifc)
{
    rvx__mlx5_ctx_t *ctx = ifc->ctx;
    struct ibv_qp_init_attr_ex ia;
    struct mlx5dv_qp_init_attr da;
    struct ibv_qp *qp;

    memset(&ia, 0, sizeof(ia));
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = ifc->ibcq;
    ia.recv_cq = ifc->ibcq;
    ia.cap.max_send_wr = RVX_MLX5_TX_DEPTH;
    ia.cap.max_send_sge = 1;
    ia.cap.max_inline_data = RVX__TL_SHORT_MAX;
    ia.srq = ifc->srq.srq; /* frames and hellos: the iface's shared receive queue */
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = ctx->pd;
    memset(&da, 0, sizeof(da));
    /* Received data always goes to the buffers (the poll loop does not copy out of CQEs). */
    da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
    da.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
    qp = mlx5dv_create_qp(ctx->ib, &ia, &da);
    if (!qp) {
        rvx__log("rc_mlx5: cannot create an RC QP on %s: %s", ctx->name, strerror(errno));
        return NULL;
    }
    if (ia.cap.max_inline_data < RVX__TL_SHORT_MAX) {
        rvx__log("rc_mlx5: the QP takes %u inline bytes, this build needs %d (RVX_MLX5_INLINE)",
                 ia.cap.max_inline_data, RVX__TL_SHORT_MAX);
        ibv_destroy_qp(qp);
        return NULL;
    }
    if (rvx__mlx5_qp_to_init(ctx, qp) != RVX_OK) {
        ibv_destroy_qp(qp);
        return NULL;
    }
    return qp;
}

/* The conn takes qp as its QP: learn the geometry, start every counter afresh. */
RVX_COLD rvx_status_t rvx__rc_adopt(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, struct ibv_qp *qp)
{
    struct mlx5dv_qp dq;
    rvx__mlx5_bf_t *bf;
    rvx_status_t st = rvx__mlx5_qp_obj(qp, &dq);
    if (st != RVX_OK) return st;
    bf = rvx__mlx5_bf_of(&ifc->bfs, dq.bf.reg, dq.bf.size);
    if (!bf) return RVX_ERR_NO_MEMORY;
    rvx__mlx5_tx_fresh(&c->tx, &ifc->txrecs, &ifc->outstanding);
    c->qp = qp;
    c->ifc = ifc;
    c->qpn = qp->qp_num;
    c->qpn_be = rvx_htobe32(c->qpn);
    rvx__mlx5_sq_init(&c->sq, &dq, c->qpn, bf, RVX__RC_SQ_RESERVE);
    rvx__rc_grant_adopt(ifc, c); /* room: the conn's share of the worker's send budget */
    if (!c->in_wf) c->sq.pi_limit = c->sq.pi; /* out of the flush list: the first post puts it there */
    c->ctrl_w8 = (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | c->sq.qpn8 | RVX__MLX5_DS_RDMA;
    c->ctrl_send2 = (uint64_t)MLX5_OPCODE_SEND_IMM << 32 | c->sq.qpn8 | 2;
    c->wflush_pi = 0;
    c->ka_pi = 0;
    c->err = RVX_OK;
    c->rx_done = c->rx_reported = 0;
    c->rx_held = 0;
    c->tx_sent = 0;
    c->tx_limit = 0; /* no credit until the receive side is set up */
    return RVX_OK;
}

/* Create the QP of c, one of ifc->conns (in INIT). */
RVX_COLD rvx_status_t rvx__rc_conn_create(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    struct ibv_qp *qp = rvx__rc_qp_new(ifc);
    rvx_status_t st;
    c->ifc = ifc; /* the rank is read through it (rvx__rc_rank) */
    c->bs = &ifc->bnone; /* no bounce segment until the first copy */
    if (!qp) return RVX_ERR_NO_RESOURCE;
    st = rvx__rc_adopt(ifc, c, qp);
    if (st != RVX_OK) {
        ibv_destroy_qp(qp);
        return st;
    }
    return rvx__rc_qpt_add(ifc, c->qpn, rvx__rc_rank(c));
}

RVX_COLD void rvx__rc_conn_destroy(rvx__rc_conn_t *c)
{
    if (c->qp) ibv_destroy_qp(c->qp);
    rvx__rc_rec_drop(c);
    rvx__mlx5_tx_drop(&c->tx);
    memset(c, 0, sizeof(*c));
}

/* ---- the iface ------------------------------------------------------------------------------ */

/* What an iface owns besides its conns. */
RVX_COLD void rvx__rc_iface_free(rvx__rc_iface_t *ifc)
{
    rvx__rc_hello_fini(ifc); /* QPs before their CQ and receive queue */
    rvx__mlx5_bf_free(&ifc->bfs);
    if (ifc->bpool_mr) ibv_dereg_mr(ifc->bpool_mr);
    free(ifc->bpool);
    free(ifc->bfree);
    free(ifc->bsegs);
    if (ifc->ctrl_mr) ibv_dereg_mr(ifc->ctrl_mr);
    if (ifc->ibcq) ibv_destroy_cq(ifc->ibcq);
    free(ifc->ctrl);
    rvx__mlx5_srq_destroy(&ifc->srq); /* after every QP on it */
    free(ifc->conns);
    free(ifc->qpt_qpn);
    free(ifc->qpt_rank);
    rvx__mlx5_txpool_fini(&ifc->txrecs); /* after the conns have given their records back */
    memset(ifc, 0, sizeof(*ifc));
}

/* The CQ, sized by what can be in flight, not by the number of ranks. It cannot overrun:
 *  - sends: a WQE gives at most one CQE (signaled, or an error or flush error: a failed QP
 *    completes each WQE it holds once), and only while it is outstanding (between the conn's ci
 *    and pi: ci passes a WQE only when its CQE, or a later one of its QP, has been consumed).
 *    Outstanding WQEBBs of a conn never exceed its grant (room + the flush NOP), and the grants
 *    of all conns never exceed RVX_MLX5_TX_BUDGET (rvx__rc_grant_grow): at most that many;
 *  - receives: a CQE consumes a posted buffer of the shared queue, posted again only once that
 *    CQE has been consumed: at most its depth (srq.mask);
 *  - the poll writes the consumer index to the CQ's doorbell record as each CQE is taken, before
 *    it handles it, so a buffer or budget given back never makes room for a CQE in a slot the
 *    NIC still counts as used.
 *  - the hello QP (tl/rc/reconnect.h): at most RVX__RC_HELLO_WR sends in flight; its receives
 *    are buffers of the shared queue, counted above.
 * Nothing else completes on this CQ (failed QPs are kept only once quiet). */
RVX_COLD rvx_status_t rvx__rc_iface_cq(rvx__rc_iface_t *ifc, int nranks)
{
    struct ibv_device_attr da;
    int want = RVX_MLX5_TX_BUDGET + (int)ifc->srq.mask + RVX__RC_HELLO_WR;
    memset(&da, 0, sizeof(da));
    if (!ibv_query_device(ifc->ctx->ib, &da) && da.max_cqe > 0 && want > da.max_cqe) {
        rvx__log("rc_mlx5: a CQ of %d entries is needed (RVX_MLX5_TX_BUDGET + the shared receive "
                 "queue); %s allows %d", want, ifc->ctx->name, da.max_cqe);
        return RVX_ERR_NO_RESOURCE;
    }
    if (da.max_qp > 0 && (int64_t)nranks + 1 > da.max_qp) { /* the only limit on ranks */
        rvx__log("rc_mlx5: %d ranks need %d QPs per worker (one per peer and a hello QP); %s "
                 "allows %d", nranks, nranks + 1, ifc->ctx->name, da.max_qp);
        return RVX_ERR_NO_RESOURCE;
    }
    ifc->tx_free = RVX_MLX5_TX_BUDGET;
    ifc->nholders = 0;
    ifc->ibcq = ibv_create_cq(ifc->ctx->ib, want, NULL, NULL, 0);
    if (!ifc->ibcq) {
        rvx__log("rc_mlx5: cannot create a CQ of %d entries: %s", want, strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    if (rvx__mlx5_cq_init(&ifc->cq, ifc->ibcq) != RVX_OK) {
        ibv_destroy_cq(ifc->ibcq);
        ifc->ibcq = NULL;
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

/* The shared receive queue: each peer's credits (RVX_MLX5_RX_DEPTH, halved while the job's
 * share would pass RVX_MLX5_SRQ_DEPTH, at least 4) times the ranks, and RVX__RC_SRQ_SPARE
 * buffers for re-connection hellos, which are outside the credits. Credits never promise more
 * than is posted, so RNR does not happen while no hello is in flight. Lanes above 0 carry no
 * messages (only rendezvous data): hellos only, in small buffers. */
RVX_COLD rvx_status_t rvx__rc_iface_srq(rvx__rc_iface_t *ifc, int nranks)
{
    int msgs = RVX_CAN_RECEIVE && ifc->ctx->lane == 0;
    uint32_t k = msgs ? RVX_MLX5_RX_DEPTH : 0, frame = msgs ? RVX__RC_FRAME : 64;
    rvx_status_t st;
    while (k > 4 && (uint64_t)k * (uint64_t)nranks + RVX__RC_SRQ_SPARE > RVX_MLX5_SRQ_DEPTH) k /= 2;
    ifc->credits = k;
    ifc->credit_q = k >= 4 ? k / 4 : 1;
    st = rvx__mlx5_srq_create(ifc->ctx, &ifc->srq, k * (uint32_t)nranks + RVX__RC_SRQ_SPARE + 1, frame);
    if (st == RVX_OK && rvx__mlx5_srq_depth(&ifc->srq) < k * (uint32_t)nranks + RVX__RC_SRQ_SPARE) {
        rvx__log("rc_mlx5: the shared receive queue holds %u buffers, %u are needed",
                 rvx__mlx5_srq_depth(&ifc->srq), k * (uint32_t)nranks + RVX__RC_SRQ_SPARE);
        st = RVX_ERR_NO_RESOURCE;
    }
    return st;
}

RVX_COLD rvx_status_t rvx__rc_iface_init(rvx__rc_iface_t *ifc, rvx__mlx5_ctx_t *ctx, int rank,
                                         int nranks, int node)
{
    int i;
    rvx_status_t st;

    (void)node; /* one transport for every peer: where a peer runs changes nothing */
    memset(ifc, 0, sizeof(*ifc));
    ifc->ctx = ctx;
    ifc->rank = rank;
    ifc->nranks = nranks;
    rvx__mlx5_txpool_init(&ifc->txrecs);
    st = rvx__rc_qpt_init(ifc, nranks);
    if (st == RVX_OK) st = rvx__rc_iface_srq(ifc, nranks);
    if (st == RVX_OK) st = rvx__rc_iface_cq(ifc, nranks);
    if (st == RVX_OK) st = rvx__rc_hello_init(ifc);
    if (st != RVX_OK) { rvx__rc_iface_free(ifc); return st; }
    ifc->ctrl = (uint64_t *)rvx__mlx5_alloc(ctx, 8 * (size_t)nranks);
    ifc->conns = (rvx__rc_conn_t *)calloc((size_t)nranks, sizeof(*ifc->conns));
    ifc->wf_head = RVX__RC_WF_END;
    if (!ifc->ctrl || !ifc->conns) { st = RVX_ERR_NO_MEMORY; goto fail; }
    /* a credit word holds how many frames the peer may have been sent in all: at first, its
     * share of the receive queue */
    for (i = 0; i < nranks; i++) ifc->ctrl[i] = ifc->credits;
    ifc->ctrl_mr = rvx__mlx5_reg(ctx, ifc->ctrl, 8 * (size_t)nranks, "the control region");
    if (!ifc->ctrl_mr) { st = RVX_ERR_NO_RESOURCE; goto fail; }
    for (i = 0; i < nranks; i++) {
        st = rvx__rc_conn_create(ifc, &ifc->conns[i]);
        if (st != RVX_OK) goto fail;
    }
    return RVX_OK;
fail:
    if (ifc->conns)
        for (i = 0; i < nranks; i++) rvx__rc_conn_destroy(&ifc->conns[i]);
    rvx__rc_iface_free(ifc);
    return st;
}

RVX_COLD void rvx__rc_iface_fini(rvx__rc_iface_t *ifc)
{
    int i;
    rvx__mlx5_wflush_cancel(&ifc->wflush); /* their work was not all seen complete */
    while (ifc->def_head) {
        rvx__mlx5_deferred_t *d = ifc->def_head;
        ifc->def_head = d->next;
        free(d);
    }
    for (i = 0; i < ifc->nranks; i++) rvx__rc_conn_destroy(&ifc->conns[i]);
    rvx__rc_iface_free(ifc);
}

RVX_COLD void rvx__rc_iface_address(rvx__rc_iface_t *ifc, rvx__rc_addr_t *addr)
{
    int i;
    memset(addr, 0, RVX__RC_ADDR_SIZE(ifc->nranks));
    addr->magic = RVX__MLX5_MAGIC;
    addr->ctrl_addr = (uint64_t)(uintptr_t)ifc->ctrl;
    addr->ctrl_rkey = ifc->ctrl_mr->rkey;
    addr->lid = ifc->ctx->lid;
    addr->is_roce = ifc->ctx->is_roce;
    memcpy(addr->gid, ifc->ctx->gid.raw, 16);
    addr->nranks = ifc->nranks;
    addr->hello_qpn = rvx__rc_hello_qpn(ifc);
    for (i = 0; i < ifc->nranks; i++) RVX__RC_QPN(addr)[i] = ifc->conns[i].qpn;
}

RVX_COLD rvx_status_t rvx__rc_rkey_unpack(rvx__rc_ep_t *ep, const void *buf, rvx__mlx5_rkey_t *rkey)
{
    return rvx__mlx5_rkey_unpack(buf, rkey, rvx__rc_rank(ep->c));
}

/* ---- connecting ----------------------------------------------------------------------------- */

/* Steps of rvx__rc_qp_connect */
#define RVX__RC_TO_RTR     1  /* INIT -> RTR */
#define RVX__RC_TO_RTS     3  /* INIT -> RTR -> RTS */
#define RVX__RC_RTR_TO_RTS 2  /* RTR -> RTS */

/* Take qp (towards the peer's QP rqpn) through the steps asked. */
RVX_COLD rvx_status_t rvx__rc_qp_connect(rvx__rc_conn_t *c, struct ibv_qp *qp, uint32_t rqpn,
                                           unsigned steps)
{
    const rvx__rc_addr_t *a = rvx__rc_peer_addr(c->ifc, rvx__rc_rank(c));
    if ((steps & RVX__RC_TO_RTR) &&
        rvx__mlx5_qp_to_rtr(c->ifc->ctx, qp, rqpn, a->lid, a->gid, rvx__rc_rank(c)) != RVX_OK)
        return RVX_ERR_IO;
    if (!(steps & RVX__RC_RTR_TO_RTS)) return RVX_OK;
    return rvx__mlx5_qp_to_rts(qp, rvx__rc_rank(c));
}

#if RVX_CAN_RECEIVE
/* The receive side of a conn: the credit word (frames land in the iface's shared queue). */
RVX_COLD rvx_status_t rvx__rc_rx_setup(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    c->credit_word = &ifc->ctrl[rvx__rc_rank(c)];
    c->tx_limit = ifc->credits;
    return RVX_OK;
}
#endif

/* First connection, at worker creation: the QP to RTS towards the peer's QP for this rank; the
 * credit word. */
RVX_COLD rvx_status_t rvx__rc_conn_up(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c,
                                        const rvx__rc_addr_t *addr)
{
    rvx__mlx5_ctx_t *ctx = ifc->ctx;
    rvx_status_t st;

    if (addr->magic != RVX__MLX5_MAGIC || addr->nranks != ifc->nranks ||
        addr->is_roce != ctx->is_roce) {
        rvx__log("rc_mlx5: rank %d's address does not match this job (another transport or "
                 "link layer?)", rvx__rc_rank(c));
        return RVX_ERR_INVALID_PARAM;
    }
    c->rqpn = RVX__RC_QPN(addr)[ifc->rank];
#if RVX_CAN_RECEIVE
    st = rvx__rc_rx_setup(ifc, c);
    if (st != RVX_OK) return st;
#endif
    st = rvx__rc_qp_connect(c, c->qp, c->rqpn, RVX__RC_TO_RTS);
    if (st != RVX_OK) return st;
    c->connected = 1;
    c->ka_ms = rvx__rc_now_ms();
    return RVX_OK;
}

/* Every QP to RTR and RTS at worker creation: RC needs the target's QP connected even for
 * one-sided operations, and a rank may well put into one that never creates an endpoint. */
RVX_COLD rvx_status_t rvx__rc_iface_wireup(rvx__rc_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    int i;
    rvx__rc_hello_addrs(ifc, addrs, size);
    for (i = 0; i < ifc->nranks; i++) {
        rvx_status_t st = rvx__rc_conn_up(ifc, &ifc->conns[i],
                                            (const rvx__rc_addr_t *)(const void *)(addrs + (size_t)i * size));
        if (st != RVX_OK) return st;
    }
    return RVX_OK;
}

/* The worker has packed the gathered addresses to their first RVX__RC_ADDR_KEPT bytes (the QPN
 * tables served the wire-up above): re-connection reads the peers' from there. */
RVX_COLD void rvx__rc_iface_addrs(rvx__rc_iface_t *ifc, const uint8_t *addrs, size_t stride)
{
    rvx__rc_hello_addrs(ifc, addrs, stride);
}

RVX_COLD rvx_status_t rvx__rc_ep_connect(rvx__rc_iface_t *ifc, rvx__rc_ep_t *ep, int rank,
                                         const rvx__rc_addr_t *addr)
{
    rvx__rc_conn_t *c = &ifc->conns[rank];
    (void)addr;
    if (!c->connected) return RVX_ERR_IO;
    rvx__rc_drain(ifc, 0); /* a re-connection hello from the peer fails the conn first */
    if (c->failed) { /* re-connect: a new QP on each side (tl/rc/reconnect.h) */
        rvx_status_t st = rvx__rc_reconnect(ifc, c);
        if (st != RVX_OK) return st;
    } else if (c->err != RVX_OK) {
        /* the peer re-connected and we followed while the last endpoint existed: the new QP
         * serves the new endpoint once the peer's UP came (credits), within a second */
        double t0 = rvx__now_s();
        unsigned spins = 0;
        while (ifc->credits && ifc->ctrl[rank] == 0 && !c->failed && rvx__now_s() - t0 < 1) {
            if (rvx__rc_drain(ifc, 0)) spins = 0;
            else rvx__backoff(&spins);
        }
        if (c->failed) return RVX__RC_ERR(c);
        c->err = RVX_OK;
    }
    ep->c = c;
    c->ep = ep;
    ifc->nlive++;
#if RVX_CAN_RECEIVE
    if (c->rx_held) rvx__rc_release_held(c);
#endif
    return RVX_OK;
}

/* Whether a WQE not yet retired carries something a caller will look at (a request, a copy or a
 * fetch into its memory). Credit returns, keepalives, hellos and unsignaled puts do not. */
RVX_COLD int rvx__rc_owes(const rvx__rc_conn_t *c)
{
    return rvx__mlx5_tx_owes(&c->tx);
}

/* The endpoint goes; the QP stays (and keeps its counters) so that a later endpoint continues
 * the same stream. Work that completes into the caller's memory is finished first, by its CQE or
 * the QP's error (a failed QP flushes the rest at once); the rest (credit returns, keepalives:
 * what a peer that has left no longer needs) is not waited for, and retires whenever its CQEs
 * come, or never if the worker goes first. A peer that does not answer costs at most the QP's
 * retries (RVX__MLX5_TEARDOWN_S): then the QP is failed on purpose and its flush ends every
 * request (a later endpoint re-connects). */
RVX_COLD void rvx__rc_to_err(rvx__rc_conn_t *c, rvx_status_t st);
RVX_COLD void rvx__rc_hold(rvx__rc_conn_t *c);
RVX_COLD void rvx__rc_ep_disconnect(rvx__rc_ep_t *ep)
{
    rvx__rc_conn_t *c = ep->c;
    rvx__rc_iface_t *ifc = c->ifc;
    double t0 = rvx__now_s();
    unsigned spins = 0;
    int forced = 0;
    if (rvx__rc_owes(c)) {
        rvx__rc_sig_tail(c); /* an unsignaled tail would never be retired */
        rvx__rc_hold(c);     /* failed: its flush CQEs are polled for */
    }
    while (rvx__rc_owes(c)) {
        if (rvx__rc_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        if (rvx__now_s() - t0 < RVX__MLX5_TEARDOWN_S) continue;
        if (forced) { /* the adapter flushed nothing in another TEARDOWN_S */
            rvx__log("rc_mlx5: the QP to rank %d does not flush: its requests stay pending",
                     rvx__rc_rank(c));
            break;
        }
        forced = 1;
        t0 = rvx__now_s();
        rvx__log("rc_mlx5: rank %d did not answer for %.1f s: its endpoint's requests end",
                 rvx__rc_rank(c), RVX__MLX5_TEARDOWN_S);
        rvx__rc_to_err(c, RVX_ERR_CANCELED);
    }
    c->ep = NULL;
    ifc->nlive--;
}

#endif /* RVX_TL_RC_SETUP_H */
