/* rvx/tl/dc/cq.h: dc_mlx5's CQ and receive side: the CQ and the DCT on its SRQ, retiring WQEs
 * (error CQEs fail an endpoint and send its DCI to recovery), frames received (delivered, or set
 * aside in order), the poll, and progress.
 *
 * Errors. An error CQE fails the operation it names (remote access -> RVX_ERR_REMOTE_ACCESS,
 * retries exhausted -> RVX_ERR_PEER_FAILED), marks the endpoint that held the DCI failed, and the
 * WQEs after it complete with RVX_ERR_CANCELED. When all of them have come back, the DCI goes
 * RESET -> INIT -> RTR -> RTS and back to the pool: other endpoints are not affected. */
#ifndef RVX_TL_DC_CQ_H
#define RVX_TL_DC_CQ_H

/* ---- the CQ and the DCT ---------------------------------------------------------------------- */

/* The CQ takes every WQEBB of every DCI (each may come back as an error CQE when a DCI fails) and
 * every receive buffer: sized by what can be outstanding, not by the job. */
RVX_COLD rvx_status_t rvx__dc_iface_cq(rvx__dc_iface_t *ifc)
{
    int want = RVX_DC_NUM_DCI * 4 * RVX_MLX5_TX_DEPTH + 2 * RVX__DC_RX_DEPTH + 64;
    ifc->ibcq = ibv_create_cq(ifc->ctx->ib, want, NULL, NULL, 0);
    if (!ifc->ibcq) {
        rvx__log("dc_mlx5: cannot create a CQ of %d entries: %s", want, strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    return rvx__mlx5_cq_init(&ifc->cq, ifc->ibcq);
}

/* The DCT: on the worker's SRQ (tl/mlx5/srq.h: RVX_DC_RX_DEPTH frames in a build that receives
 * messages, a token few otherwise), RESET -> INIT -> RTR, after which it has its number. */
RVX_COLD rvx_status_t rvx__dc_iface_dct(rvx__dc_iface_t *ifc)
{
    rvx__mlx5_ctx_t *ctx = ifc->ctx;
    struct ibv_qp_init_attr_ex ia;
    struct mlx5dv_qp_init_attr da;
    struct ibv_qp_attr qa;
    rvx_status_t st = rvx__mlx5_srq_create(ctx, &ifc->srq, RVX__DC_RX_DEPTH, RVX__DC_FRAME);
    if (st != RVX_OK) return st;
    rvx__dc_qp_attr(ifc, &ia, &da, MLX5DV_DCTYPE_DCT);
    ia.srq = ifc->srq.srq;
    da.dc_init_attr.dct_access_key = RVX__DC_KEY;
    ifc->dct = mlx5dv_create_qp(ctx->ib, &ia, &da);
    if (!ifc->dct) {
        rvx__log("dc_mlx5: cannot create a DCT on %s: %s", ctx->name, strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    if (rvx__mlx5_qp_to_init(ctx, ifc->dct) != RVX_OK) return RVX_ERR_IO;
    rvx__dc_rtr_attr(ctx, &qa);
    qa.min_rnr_timer = RVX__MLX5_MIN_RNR_TIMER;
    if (ibv_modify_qp(ifc->dct, &qa, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
                                         IBV_QP_PATH_MTU)) {
        rvx__log("dc_mlx5: DCT to RTR failed: %s", strerror(errno));
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

/* ---- retiring WQEs --------------------------------------------------------------------------- */

/* The status flushes of a DCI complete with: its holder's. */
RVX_INLINE rvx_status_t rvx__dc_flush_status(const rvx__dc_dci_t *d)
{
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    return d->failed ? d->fail_st : RVX_OK; /* shared: a flush pending on it reports its error */
#else
    return d->ep ? (rvx_status_t)d->ep->err : RVX_OK;
#endif
}

/* A signaled WQE completed: everything up to its end retires. */
RVX_COLD void rvx__dc_req_ok(rvx__dc_dci_t *d, uint16_t idx)
{
    uint64_t b = rvx__mlx5_tx_req_ok(&d->sq, &d->tx, idx, rvx__dc_flush_status(d));
    if (b) d->b_tail = b;
}

/* A syndrome that says the peer no longer answers. On work of a destroyed endpoint (sends,
 * credit words, keepalives: nothing anyone waits for) that is no failure of the job and is not
 * reported: a peer that left first is the normal end of a job. */
RVX_INLINE int rvx__dc_gone_synd(unsigned syndrome)
{
    return syndrome == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR ||
           syndrome == MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR ||
           syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
}

/* A WQE failed (or was flushed after a failure): the endpoint holding the DCI fails, the WQEs
 * before it completed, this one completes with the syndrome's status. Once the DCI has nothing
 * left, it recovers. */
RVX_COLD void rvx__dc_req_err(rvx__dc_dci_t *d, const struct mlx5_err_cqe *e)
{
    uint16_t idx = rvx_htobe16(e->wqe_counter);
    rvx_status_t st = rvx__mlx5_syndrome_status(e->syndrome);
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    rvx__dc_ep_t *ep = d->owner[idx & d->sq.mask]; /* the DCI is shared: the WQE's own endpoint */
    if (ep && !ep->failed) ep->dci = &d->ifc->no_dci; /* its later posts fail at once */
#else
    rvx__dc_ep_t *ep = d->ep;
#endif
    uint64_t b;
    if (!d->failed) {
        d->failed = 1;
        d->fail_st = st;
        d->ctrl_w8 = d->ctrl_send = 0; /* one-WQEBB posts go to the slow path, which waits */
        d->sq.hold = 1;
        rvx__mlx5_sq_restop(&d->sq);
        if (ep || !rvx__dc_gone_synd(e->syndrome))
            rvx__log("dc_mlx5: operation to rank %d failed: %s (syndrome 0x%x, vendor 0x%x, DCI "
                     "0x%x WQE %u): the endpoint is marked failed, the DCI recovers",
                     ep ? ep->rank : -1, rvx__mlx5_syndrome_str(e->syndrome), e->syndrome,
                     e->vendor_err_synd, d->qpn, idx);
    }
    if (ep && !ep->failed) {
        ep->failed = 1;
        ep->err = (int8_t)(e->syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR ? RVX_ERR_CANCELED : st);
        rvx__mlx5_wflush_note(&d->ifc->wflush_err, (rvx_status_t)ep->err);
    }
    b = rvx__mlx5_tx_req_err(&d->sq, &d->tx, idx, st, rvx__dc_flush_status(d));
    if (b) d->b_tail = b;
    if (d->sq.ci == d->sq.pi) rvx__dc_dci_recover(d);
}

/* ---- messages: receiving --------------------------------------------------------------------- */

#if RVX_CAN_RECEIVE
/* Nonzero while a handler runs (every delivery sets in_rx), a word the send path reaches through
 * the ifc pointer it loads anyway: proto/am.h refuses requests from handlers with it. */
#define RVX__DC_IN_HANDLER(tl) ((tl)->ifc->in_rx)
/* The word that says so, for a pair (tl/pair.h), which sets it around shm's deliveries too. */
RVX_INLINE uint8_t *rvx__dc_iface_in_rx(rvx__dc_iface_t *ifc) { return &ifc->in_rx; }

RVX_COLD int rvx__dc_deliver_deferred(rvx__dc_iface_t *ifc)
{
    rvx__dc_deferred_t *kept = NULL, *last = NULL;
    int n = 0;
    while (ifc->def_head) {
        rvx__dc_deferred_t *f = ifc->def_head;
        rvx__dc_ep_t *ep = ifc->eps[f->rank];
        ifc->def_head = f->next;
        if (!ifc->def_head) ifc->def_tail = NULL;
        if (!ep) { /* kept (in order) until the endpoint exists */
            f->next = NULL;
            if (last) last->next = f;
            else kept = f;
            last = f;
            continue;
        }
        rvx__dc_rx_deliver(ep, f->chan, f->info, f->body, f->len);
        free(f);
        n++;
    }
    ifc->def_head = kept;
    ifc->def_tail = last;
    return n;
}

/* A CQE of the DCT: a frame in the SRQ buffer its wqe_counter names (or, scattered, in the CQE
 * itself). Handed to the protocol, or kept aside; the buffer goes straight back to the SRQ. */
RVX_COLD void rvx__dc_rx(rvx__dc_iface_t *ifc, const struct mlx5_cqe64 *cqe, unsigned opcode,
                         int deliver)
{
    uint16_t idx = rvx_htobe16(cqe->wqe_counter);
    const uint8_t *buf = rvx__mlx5_srq_buf(&ifc->srq, idx);
    uint32_t len = rvx_htobe32(cqe->byte_cnt), x = rvx_htobe32(cqe->imm_inval_pkey);
    unsigned chan = x >> 16, info = x & 0xffff;
    uint32_t report;
    rvx__dc_prefix_t pre;
    rvx__dc_ep_t *ep;
    if (opcode != MLX5_CQE_RESP_SEND_IMM) {
        rvx__log("dc_mlx5: receive completion with opcode %u (syndrome 0x%x): buffer reposted",
                 opcode, ((const struct mlx5_err_cqe *)(const void *)cqe)->syndrome);
        goto release;
    }
    if (cqe->op_own & MLX5_INLINE_SCATTER_32) buf = (const uint8_t *)cqe;
    else if (cqe->op_own & MLX5_INLINE_SCATTER_64) buf = (const uint8_t *)cqe - RVX__MLX5_CQE64;
    if (len < RVX__DC_PREFIX || len > ifc->srq.frame) {
        rvx__log("dc_mlx5: a message of %u bytes: dropped", len);
        goto release;
    }
    memcpy(&pre, buf, sizeof(pre));
    report = pre.rank & RVX__DC_PRE_REPORT;
    pre.rank &= ~RVX__DC_PRE_REPORT;
    if (pre.rank >= (uint32_t)ifc->nranks || chan >= RVX__TL_AM_CHANNELS) {
        rvx__log("dc_mlx5: a message naming rank %u, channel %u: dropped", pre.rank, chan);
        goto release;
    }
    buf += RVX__DC_PREFIX;
    len -= RVX__DC_PREFIX;
    ep = ifc->eps[pre.rank];
    /* a report only grows; an unflagged prefix (the one-WQEBB path's) carries none */
    if (ep && report && (int32_t)(pre.consumed - ep->piggy) > 0) ep->piggy = pre.consumed;
    if (!ep || (chan == RVX__CHAN_REQUEST && (!deliver || ifc->def_head))) {
        /* no endpoint yet, or a handler may not run now, or earlier requests wait: in order */
        rvx__mlx5_defer(&ifc->def_head, &ifc->def_tail, (int)pre.rank, chan, info, buf, len);
        ifc->quiet = 1; /* the next progress delivers it */
    } else {
        /* the buffer goes back after the handler; frames a nested poll takes use others. A
         * handler runs with in_rx set (a request from it is refused, RVX__DC_IN_HANDLER) */
        int was = ifc->in_rx;
        ifc->in_rx = 1;
        rvx__dc_rx_deliver(ep, chan, info, (void *)(uintptr_t)buf, len);
        ifc->in_rx = was;
    }
    rvx__mlx5_srq_done(&ifc->srq, cqe);
    rvx__dc_rx_taken(ifc, (int)pre.rank); /* after the release: the buffer is free again */
    return;
release:
    rvx__mlx5_srq_done(&ifc->srq, cqe);
}
#endif

/* ---- the CQ poll ----------------------------------------------------------------------------- */

RVX_COLD rvx__dc_dci_t *rvx__dc_dci_of(rvx__dc_iface_t *ifc, uint32_t qpn)
{
    unsigned i;
    for (i = 0; i < RVX_DC_NUM_DCI; i++)
        if (ifc->dci[i].qpn == qpn) return &ifc->dci[i];
    return NULL;
}

/* Pending worker flushes complete once every DCI has retired what was posted before them. */
RVX_COLD void rvx__dc_wflush_check(rvx__dc_iface_t *ifc)
{
    unsigned i;
    for (i = 0; i < RVX_DC_NUM_DCI; i++)
        if ((int32_t)(ifc->dci[i].sq.ci - ifc->dci[i].wflush_pi) < 0) return;
    rvx__mlx5_wflush_done(&ifc->wflush, &ifc->wflush_err);
    ifc->nlive--; /* the flushes' count (rvx__dc_iface_flush) */
}

/* Handle every CQE present. deliver = 0: received requests are set aside (a reply is waiting for
 * room, or no handler may run). Returns the number of CQEs. */
RVX_COLD int rvx__dc_poll(rvx__dc_iface_t *ifc, int deliver)
{
    int n = 0;
    (void)deliver;
    for (;;) {
        struct mlx5_cqe64 *cqe = rvx__mlx5_cqe(&ifc->cq, ifc->cq.ci);
        uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
        unsigned opcode;
        uint32_t qpn;
        rvx__dc_dci_t *d;
        if (!rvx__mlx5_cqe_ready(&ifc->cq, op_own)) break;
        rvx_from_device_barrier(); /* the owner check before the CQE's other bytes */
        qpn = rvx__mlx5_cqe_qpn(cqe);
        opcode = op_own >> 4;
        rvx__mlx5_cq_advance(&ifc->cq);
        n++;
        if (qpn == ifc->dct->qp_num) {
#if RVX_CAN_RECEIVE
            rvx__dc_rx(ifc, cqe, opcode, deliver);
#else
            rvx__log("dc_mlx5: a message (CQE opcode %u) in a build without messages: dropped",
                     opcode);
            rvx__mlx5_srq_done(&ifc->srq, cqe);
#endif
            continue;
        }
        d = rvx__dc_dci_of(ifc, qpn);
        if (!d) {
            rvx__log("dc_mlx5: completion (opcode %u) for QP 0x%x, not a DCI: ignored", opcode, qpn);
        } else if ((opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR) &&
                   rvx__mlx5_cqe_stale(&d->sq, cqe)) {
            rvx__log("dc_mlx5: completion for WQE %u of DCI 0x%x, already retired: ignored",
                     rvx_htobe16(cqe->wqe_counter), qpn);
        } else if (opcode == MLX5_CQE_REQ) {
            rvx__dc_req_ok(d, rvx_htobe16(cqe->wqe_counter));
        } else if (opcode == MLX5_CQE_REQ_ERR) {
            rvx__dc_req_err(d, (const struct mlx5_err_cqe *)(const void *)cqe);
        } else {
            rvx__log("dc_mlx5: unexpected CQE opcode %u from DCI 0x%x ignored", opcode, qpn);
        }
    }
    if (n) rvx__mlx5_cq_update_ci(&ifc->cq);
    if (ifc->wflush) rvx__dc_wflush_check(ifc);
    return n;
}

/* Inside an rvx call (or a handler): completions and replies; requests go aside for the next
 * rvx_progress. */
RVX_COLD int rvx__dc_drain(rvx__dc_iface_t *ifc)
{
    return rvx__dc_poll(ifc, 0);
}

RVX_COLD int rvx__dc_progress_slow(rvx__dc_iface_t *ifc)
{
    int n = 0;
#if RVX_CAN_RECEIVE
    if (ifc->in_rx) {
        ifc->quiet = 1; /* what waits is looked at by the next progress outside the handler */
        if (!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own)) return 0;
        if (!ifc->warned_nested++) rvx__log("rvx_progress called from an AM handler: ignored");
        return 0;
    }
    ifc->in_rx = 1;
    if (ifc->def_head) n += rvx__dc_deliver_deferred(ifc);
#endif
    n += rvx__dc_poll(ifc, 1);
#if RVX_CAN_RECEIVE
    if (!n || ++ifc->sweep_in >= 16) { /* nothing came, or every 16th time something did */
        ifc->sweep_in = 0;
        rvx__dc_tick(ifc);
    }
    ifc->in_rx = 0;
    ifc->quiet = ifc->def_head ? 1u : RVX__DC_TICK;
#endif
    return n;
}

/* Progress: nothing without live endpoints or a worker flush waiting (in a build without
 * messages, nothing while no signaled work is outstanding: nothing arrives unasked); otherwise
 * one look at the CQE at the consumer index, and a countdown that is 1 while frames are set
 * aside and otherwise lets every RVX__DC_TICK-th empty call look at the clock (idle credits go
 * back, tl/dc/credit.h). */
RVX_INLINE int rvx__dc_progress(rvx__dc_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    if (!ifc->nlive) return 0;
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own)) &&
        RVX_LIKELY(--ifc->quiet != 0))
        return 0;
#else
    if (!ifc->outstanding) return 0;
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own))) return 0;
#endif
    return rvx__dc_progress_slow(ifc);
}

#endif /* RVX_TL_DC_CQ_H */
