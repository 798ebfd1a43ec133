/* rvx/tl/rc/hello.h: the hello QP, over which rc_mlx5 agrees on a re-connection (cold): one UD QP
 * per iface, on the iface's CQ and shared receive queue; datagrams (REQ, ACK) to a peer's hello
 * QP, the UP message over a conn's new QP; the peers' addresses, which the worker keeps; failed
 * QPs, kept until the iface goes. The records of re-connection (below) are read only here and in
 * tl/rc/reconnect.h, which says how re-connection works. */
#ifndef RVX_TL_RC_HELLO_H
#define RVX_TL_RC_HELLO_H

#define RVX__RC_QKEY        0x72767851u /* the hello QPs' Q_Key */
#define RVX__RC_HELLO_MAGIC 0x72767848u /* "rvxH" */
#define RVX__RC_HELLO_NBB   2u          /* ctrl + address (64 B), inline message (32 B), zeros */
#define RVX__RC_UD_GRH      40u         /* a datagram lands after this much GRH space */
/* the most a hello WQE carries inline: its WQEBBs less ctrl, datagram and inline header */
#define RVX__RC_HELLO_BODY  (RVX__RC_HELLO_NBB * RVX__MLX5_BB - 16u - 48u - 4u)

enum { RVX__RC_HELLO_REQ = 0, RVX__RC_HELLO_ACK = 1, RVX__RC_HELLO_UP = 2 };

typedef struct rvx__rc_hello_msg {
    uint32_t magic;  /* RVX__RC_HELLO_MAGIC */
    uint32_t kind;   /* RVX__MLX5_HELLO_* */
    int32_t  rank;   /* the sender */
    uint32_t qpn;    /* the sender's new QP */
    uint32_t prev;   /* REQ: the sender's QP the receiver is connected to; ACK: the receiver's new
                      * QP this answers */
    uint32_t rsvd;
} rvx__rc_hello_msg_t;

/* A re-connection under way on one conn (freed when it is done). */
typedef struct rvx__rc_rec {
    struct ibv_qp         *qp;       /* initiator: the new QP, INIT until the peer's is known */
    uint32_t               qpn;      /* its number */
    uint32_t               peer_new; /* follower: the peer's new QP */
    uint8_t                follow;   /* the peer re-connected: follow once our old QP is quiet */
    uint8_t                taken;    /* initiator: the new QP is the conn's (connected) */
    uint8_t                acked;    /* initiator: the peer's answer came */
    struct rvx__rc_conn *next;     /* the iface's list of conns that follow */
    struct rvx__rc_conn *conn;     /* whose re-connection this is */
    struct rvx__rc_rec  *lnext;    /* the iface's list of re-connections under way */
} rvx__rc_rec_t;

/* The iface's side of re-connection. */
typedef struct rvx__rc_hello {
    struct ibv_qp     *qp;        /* UD, on the iface's CQ and shared receive queue */
    rvx__mlx5_sq_t     sq;
    const uint8_t     *addrs;     /* every rank's address (the worker's copy, kept while it lives) */
    size_t             stride;
    struct ibv_qp    **dead;      /* failed QPs, kept in ERR until the iface goes */
    unsigned           ndead, dead_cap;
    unsigned           warned;
    rvx__rc_conn_t  *follow;    /* conns waiting for their old QP to go quiet, then follow */
    rvx__rc_rec_t   *recs;      /* the re-connections under way (a conn keeps no pointer: a
                                   * few in a job at once, looked up in the cold path) */
} rvx__rc_hello_t;

/* ---- the hello QP --------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__rc_hello_init(rvx__rc_iface_t *ifc)
{
    rvx__mlx5_ctx_t *ctx = ifc->ctx;
    rvx__rc_hello_t *h = (rvx__rc_hello_t *)calloc(1, sizeof(*h));
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr qa;
    struct mlx5dv_qp dq;
    rvx__mlx5_bf_t *bf;
    if (!h) return RVX_ERR_NO_MEMORY;
    ifc->hello = h;
    memset(&ia, 0, sizeof(ia));
    ia.qp_type = IBV_QPT_UD;
    ia.send_cq = ifc->ibcq;
    ia.recv_cq = ifc->ibcq;
    ia.srq = ifc->srq.srq;
    ia.cap.max_send_wr = RVX__RC_HELLO_WR;
    ia.cap.max_send_sge = 1;
    ia.cap.max_inline_data = sizeof(rvx__rc_hello_msg_t);
    h->qp = ibv_create_qp(ctx->pd, &ia);
    if (!h->qp) {
        rvx__log("rc_mlx5: cannot create the UD QP for re-connections on %s: %s", ctx->name,
                 strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = ctx->port;
    qa.qkey = RVX__RC_QKEY;
    if (ibv_modify_qp(h->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        goto bad;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(h->qp, &qa, IBV_QP_STATE)) goto bad;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTS;
    qa.sq_psn = RVX__MLX5_PSN;
    if (ibv_modify_qp(h->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN)) goto bad;
    if (rvx__mlx5_qp_obj(h->qp, &dq) != RVX_OK) return RVX_ERR_IO;
    bf = rvx__mlx5_bf_of(&ifc->bfs, dq.bf.reg, dq.bf.size);
    if (!bf) return RVX_ERR_NO_MEMORY;
    rvx__mlx5_sq_init(&h->sq, &dq, h->qp->qp_num, bf, 0);
    return rvx__rc_qpt_add(ifc, h->qp->qp_num, RVX__RC_QPT_HELLO);
bad:
    rvx__log("rc_mlx5: the UD QP for re-connections does not start: %s", strerror(errno));
    return RVX_ERR_IO;
}

/* Before the CQ and the shared receive queue go: the failed QPs and the hello QP. */
RVX_COLD void rvx__rc_hello_fini(rvx__rc_iface_t *ifc)
{
    rvx__rc_hello_t *h = ifc->hello;
    unsigned i;
    if (!h) return;
    while (h->recs) { /* the conns dropped theirs; none is left but on a failed set-up */
        rvx__rc_rec_t *r = h->recs;
        h->recs = r->lnext;
        if (r->qp && !r->taken) ibv_destroy_qp(r->qp);
        free(r);
    }
    for (i = 0; i < h->ndead; i++) ibv_destroy_qp(h->dead[i]);
    if (h->qp) ibv_destroy_qp(h->qp);
    free(h->dead);
    free(h);
    ifc->hello = NULL;
}

RVX_COLD uint32_t rvx__rc_hello_qpn(const rvx__rc_iface_t *ifc) { return ifc->hello->qp->qp_num; }

/* Where the peers' addresses are: the worker keeps them as long as the iface. */
RVX_COLD void rvx__rc_hello_addrs(rvx__rc_iface_t *ifc, const uint8_t *addrs, size_t stride)
{
    ifc->hello->addrs = addrs;
    ifc->hello->stride = stride;
}

/* Keep a failed QP until the iface goes. */
RVX_COLD void rvx__rc_dead_add(rvx__rc_hello_t *h, struct ibv_qp *qp)
{
    if (h->ndead == h->dead_cap) {
        unsigned cap = h->dead_cap ? 2 * h->dead_cap : 4;
        struct ibv_qp **d = (struct ibv_qp **)realloc(h->dead, cap * sizeof(*d));
        if (!d) { /* it cannot be kept: destroyed now, its stale CQEs notwithstanding */
            ibv_destroy_qp(qp);
            return;
        }
        h->dead = d;
        h->dead_cap = cap;
    }
    h->dead[h->ndead++] = qp;
}

RVX_COLD const rvx__rc_addr_t *rvx__rc_peer_addr(const rvx__rc_iface_t *ifc, int rank)
{
    return (const rvx__rc_addr_t *)(const void *)(ifc->hello->addrs + (size_t)rank * ifc->hello->stride);
}

/* One datagram to rank's hello QP: ctrl, the address segment (the address vector an address
 * handle resolves, with the QPN and Q_Key), the message inline. Lost when the queue is full (the
 * REQ is sent again, a lost ACK is asked for again). */
RVX_COLD void rvx__rc_hello_post(rvx__rc_iface_t *ifc, int rank, uint32_t imm, const void *body,
                                   uint32_t len)
{
    rvx__rc_hello_t *h = ifc->hello;
    rvx__mlx5_ctx_t *ctx = ifc->ctx;
    const rvx__rc_addr_t *a = rvx__rc_peer_addr(ifc, rank);
    struct ibv_ah_attr aa;
    struct ibv_ah *ah;
    struct mlx5dv_ah dah;
    struct mlx5dv_obj obj;
    uint8_t w[RVX__RC_HELLO_NBB * RVX__MLX5_BB];
    struct mlx5_wqe_datagram_seg *d = (struct mlx5_wqe_datagram_seg *)(void *)(w + sizeof(struct mlx5_wqe_ctrl_seg));
    struct mlx5_wqe_inl_data_seg *inl;
    uint32_t pi = h->sq.pi, i;

    if (len > RVX__RC_HELLO_BODY) {
        rvx__log("rc_mlx5: a re-connection message of %u bytes does not fit its WQE", len);
        return;
    }
    if (pi - h->sq.ci + RVX__RC_HELLO_NBB > h->sq.mask + 1) {
        if (!h->warned++) rvx__log("rc_mlx5: the re-connection queue is full: a message to rank %d waits", rank);
        return;
    }
    memset(&aa, 0, sizeof(aa));
    aa.dlid = a->at.lid;
    aa.port_num = ctx->port;
    if (ctx->is_roce) {
        aa.is_global = 1;
        rvx__mlx5_gid_of(&ifc->gids, rank, a->at.gid_lo, aa.grh.dgid.raw);
        aa.grh.sgid_index = (uint8_t)ctx->gid_index;
        aa.grh.hop_limit = RVX__MLX5_HOP_LIMIT;
    }
    ah = ibv_create_ah(ctx->pd, &aa);
    memset(&dah, 0, sizeof(dah));
    memset(&obj, 0, sizeof(obj));
    obj.ah.in = ah;
    obj.ah.out = &dah;
    if (!ah || mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH) || !dah.av) {
        rvx__log("rc_mlx5: no address handle towards rank %d: %s", rank, strerror(errno));
        if (ah) ibv_destroy_ah(ah);
        return;
    }
    memset(w, 0, sizeof(w));
    rvx__mlx5_set_ctrl(w, pi, 0, MLX5_OPCODE_SEND_IMM, h->sq.qpn8,
                       (uint32_t)(sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(*d) + sizeof(*inl) + len + 15) / 16,
                       RVX__MLX5_CE, rvx_htobe32(imm));
    memcpy(&d->av, dah.av, sizeof(d->av));
    d->av.dqp_dct |= rvx_htobe32(a->hello_qpn & RVX__MLX5_QPN_MASK);
    d->av.key.qkey.qkey = rvx_htobe32(RVX__RC_QKEY);
    ibv_destroy_ah(ah); /* the WQE holds a copy of its address */
    inl = (struct mlx5_wqe_inl_data_seg *)(void *)(d + 1);
    inl->byte_count = rvx_htobe32(len | MLX5_INLINE_SEG);
    memcpy(inl + 1, body, len);
    for (i = 0; i < RVX__RC_HELLO_NBB; i++)
        memcpy(rvx__mlx5_slot(&h->sq, pi + i), w + i * RVX__MLX5_BB, RVX__MLX5_BB);
    rvx__mlx5_commit(&h->sq, pi + RVX__RC_HELLO_NBB, rvx__mlx5_slot(&h->sq, pi),
                     RVX__RC_HELLO_NBB, NULL);
}

/* A re-connection message (RVX__RC_HELLO_REQ, _ACK) to rank's hello QP. */
RVX_COLD void rvx__rc_hello_send(rvx__rc_iface_t *ifc, int rank, unsigned kind, uint32_t qpn,
                                   uint32_t prev)
{
    rvx__rc_hello_msg_t m;
    memset(&m, 0, sizeof(m));
    m.magic = RVX__RC_HELLO_MAGIC;
    m.kind = kind;
    m.rank = ifc->rank;
    m.qpn = qpn;
    m.prev = prev;
    rvx__rc_hello_post(ifc, rank, RVX__RC_HELLO | kind << 16, &m, (uint32_t)sizeof(m));
}

/* The UP message over a conn's new QP, signaled: its completion shows the peer's NIC has the
 * connection; its arrival gives the peer credits towards us. */
RVX_COLD void rvx__rc_send_up(rvx__rc_conn_t *c)
{
    rvx__rc_hello_msg_t m;
    uint32_t pi = c->sq.pi;
    uint8_t *wqe = rvx__mlx5_slot(&c->sq, pi);
    memset(&m, 0, sizeof(m));
    m.magic = RVX__RC_HELLO_MAGIC;
    m.kind = RVX__RC_HELLO_UP;
    m.rank = c->ifc->rank;
    m.qpn = c->qpn;
    rvx__rc_send_inline(&c->sq, wqe, pi, rvx__mlx5_moderate(&c->sq, 1),
                          rvx_htobe32(RVX__RC_HELLO | RVX__RC_HELLO_UP << 16), &m, sizeof(m));
    rvx__rc_mark_sig(c, pi, pi + 1);
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

#endif /* RVX_TL_RC_HELLO_H */
