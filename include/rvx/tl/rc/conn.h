/* rvx/tl/rc/conn.h: rc_mlx5's connections (cold): the QPN -> rank table the CQ poll looks QPs
 * up in, the list of conns with work that flushes walk, a conn's QP (created, adopted with fresh
 * counters, taken to RTS towards the peer's QP at worker creation) and where its credit returns
 * and keepalives write. */
#ifndef RVX_TL_RC_CONN_H
#define RVX_TL_RC_CONN_H

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
 * wf_next): those that posted since a flush last found them idle. A conn out of the list holds its send queue (sq.hold: the limit at pi),
 * so that its next post of any kind takes the slow path (rvx__rc_wait_room), which puts it back:
 * the list costs the data path nothing. */
RVX_COLD void rvx__rc_busy(rvx__rc_conn_t *c)
{
    rvx__rc_iface_t *ifc = c->ifc;
    c->in_wf = 1;
    c->sq.hold = 0;
    c->wflush_pi = c->sq.pi; /* flushes asked before this post do not wait for it */
    c->wf_next = ifc->wf_head;
    ifc->wf_head = (uint32_t)rvx__rc_rank(c);
    ifc->nwf++;
    rvx__mlx5_sq_restop(&c->sq);
}

/* The conn *at links to is idle: out of the list, its next post comes back. */
RVX_COLD void rvx__rc_idle(rvx__rc_iface_t *ifc, uint32_t *at)
{
    rvx__rc_conn_t *c = &ifc->conns[*at];
    c->in_wf = 0;
    c->sq.hold = 1;
    rvx__mlx5_sq_restop(&c->sq);
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
    c->sq.hold = !c->in_wf; /* out of the flush list: the first post puts it there */
    rvx__rc_grant_adopt(ifc, c); /* room: the conn's share of the worker's send budget */
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
    uint8_t gid[16];
    rvx__mlx5_gid_of(&c->ifc->gids, rvx__rc_rank(c), a->at.gid_lo, gid); /* RoCE: read */
    if ((steps & RVX__RC_TO_RTR) &&
        rvx__mlx5_qp_to_rtr(c->ifc->ctx, qp, rqpn, a->at.lid, gid, rvx__rc_rank(c)) != RVX_OK)
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

/* Whether a WQE not yet retired carries something a caller will look at (a request, a copy or a
 * fetch into its memory). Credit returns, keepalives, hellos and unsignaled puts do not. */
RVX_COLD int rvx__rc_owes(const rvx__rc_conn_t *c)
{
    return rvx__mlx5_tx_owes(&c->tx);
}

#endif /* RVX_TL_RC_CONN_H */
