/* rvx/tl/rc/iface.h: rc_mlx5's interface and endpoints: the iface (its CQ, shared receive queue
 * and control region), wire-up at worker creation, endpoints, progress, flushes and liveness. */
#ifndef RVX_TL_RC_IFACE_H
#define RVX_TL_RC_IFACE_H

#include "../mlx5/flush.h"

/* ---- the iface ------------------------------------------------------------------------------ */

/* What an iface owns besides its conns. */
RVX_COLD void rvx__rc_iface_free(rvx__rc_iface_t *ifc)
{
    rvx__rc_hello_fini(ifc); /* QPs before their CQ and receive queue */
    rvx__mlx5_bf_free(&ifc->bfs);
    if (ifc->bpool_mr) ibv_dereg_mr(ifc->bpool_mr);
    rvx__unmap(ifc->bpool, RVX__RC_BPOOL_BYTES);
    free(ifc->bfree);
    free(ifc->bsegs);
    if (ifc->ctrl_mr) ibv_dereg_mr(ifc->ctrl_mr);
    if (ifc->ibcq) ibv_destroy_cq(ifc->ibcq);
    free(ifc->ctrl);
    rvx__mlx5_srq_destroy(&ifc->srq); /* after every QP on it */
    free(ifc->conns);
    free(ifc->qpt_qpn);
    free(ifc->qpt_rank);
    free(ifc->gids.his);
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
 *  - the hello QP (tl/rc/hello.h): at most RVX__RC_HELLO_WR sends in flight; its receives
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
    addr->is_roce = ifc->ctx->is_roce;
    if (ifc->ctx->is_roce) {
        memcpy(addr->gid_hi, ifc->ctx->gid.raw, 8);
        memcpy(addr->at.gid_lo, ifc->ctx->gid.raw + 8, 8);
    } else {
        addr->at.lid = ifc->ctx->lid;
    }
    addr->nranks = ifc->nranks;
    addr->hello_qpn = rvx__rc_hello_qpn(ifc);
    for (i = 0; i < ifc->nranks; i++) RVX__RC_QPN(addr)[i] = ifc->conns[i].qpn;
}

RVX_COLD rvx_status_t rvx__rc_rkey_unpack(rvx__rc_ep_t *ep, const void *buf, rvx__mlx5_rkey_t *rkey)
{
    return rvx__mlx5_rkey_unpack(buf, rkey, rvx__rc_rank(ep->c));
}

/* ---- wire-up and endpoints ------------------------------------------------------------------ */

/* Every QP to RTR and RTS at worker creation: RC needs the target's QP connected even for
 * one-sided operations, and a rank may well put into one that never creates an endpoint. */
RVX_COLD rvx_status_t rvx__rc_iface_wireup(rvx__rc_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    int i;
    rvx__rc_hello_addrs(ifc, addrs, size);
    if (ifc->ctx->is_roce) { /* before the QPs connect: they read the GIDs this way */
        rvx_status_t st = rvx__mlx5_gids_keep(&ifc->gids, addrs, size, offsetof(rvx__rc_addr_t, gid_hi),
                                              ifc->nranks);
        if (st != RVX_OK) return st;
    }
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


/* The endpoint goes; the QP stays (and keeps its counters) so that a later endpoint continues
 * the same stream. Work that completes into the caller's memory is finished first, by its CQE or
 * the QP's error (a failed QP flushes the rest at once); the rest (credit returns, keepalives:
 * what a peer that has left no longer needs) is not waited for, and retires whenever its CQEs
 * come, or never if the worker goes first. A peer that does not answer costs at most the QP's
 * retries (RVX__MLX5_TEARDOWN_S): then the QP is failed on purpose and its flush ends every
 * request (a later endpoint re-connects). */
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

/* ---- progress ------------------------------------------------------------------------------- */

/* Progress: nothing without live endpoints (or, in an RMA-only build, without outstanding
 * signaled work); otherwise one look at the CQE at the consumer index. */
RVX_INLINE int rvx__rc_progress(rvx__rc_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    if (!ifc->nlive) return 0;
#else
    if (!ifc->outstanding) return 0;
#endif
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own))) {
#if RVX_CAN_RECEIVE
        if (RVX_LIKELY(!ifc->def_head)) return 0;
#else
        return 0;
#endif
    }
    return rvx__rc_progress_slow(ifc);
}

/* ---- flush ---------------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__rc_flush_slow(rvx__rc_conn_t *c, rvx_request_t *req)
{
    rvx__rc_drain(c->ifc, 0);
    if (c->sq.ci == c->sq.pi) return RVX__RC_ERR(c);
    return rvx__mlx5_flush_q(c, req);
}

/* Done at once when nothing is outstanding, or when the CQE at the head of the CQ is this QP's
 * successful completion of its last signaled WQE: then everything issued has completed. That
 * CQE is left for progress to consume (it retires the queue space and runs any pending copies);
 * a flush only needs to know it is there. Otherwise the slow path. */
RVX_INLINE rvx_status_t rvx__rc_ep_flush(rvx__rc_ep_t *ep, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    const rvx__rc_iface_t *ifc;
    const struct mlx5_cqe64 *cqe;
    uint32_t pi = c->sq.pi;
    if (c->sq.ci == pi) return RVX__RC_ERR(c);
    ifc = c->ifc;
    cqe = RVX_CONTAINER_OF(ifc->cq.next_op_own, const struct mlx5_cqe64, op_own);
    if (RVX_LIKELY(c->tx.last_sig_pi == pi && rvx__mlx5_cqe_req_ok(&ifc->cq, cqe))) {
        rvx_from_device_barrier(); /* the owner check before the CQE's other bytes */
        if (RVX_LIKELY((cqe->sop_drop_qpn & rvx_htobe32(RVX__MLX5_QPN_MASK)) == c->qpn_be &&
                       cqe->wqe_counter == c->tx.last_sig_idx_be))
            return RVX_OK;
    }
    return rvx__rc_flush_slow(c, req);
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
        rvx__mlx5_wflush_q(c);
        busy = 1;
    }
    if (!busy) return rvx__mlx5_wflush_err(&ifc->wflush_err);
    return rvx__mlx5_wflush_add(&ifc->wflush, req, busy);
}

/* Nothing to flush: nothing was posted since a flush found every conn idle (the flush list is
 * empty; a conn out of it takes the slow path at its next post, which puts it back) and no
 * error waits to be reported. rvx_worker_flush then returns at once, with no CQ to drain. */
RVX_INLINE int rvx__rc_iface_flushed(const rvx__rc_iface_t *ifc)
{
    return ifc->wf_head == RVX__RC_WF_END && ifc->wflush_err == RVX_OK;
}

/* ---- liveness ------------------------------------------------------------------------------- */

/* A zero-length WRITE to the peer's control region (tl/mlx5/rdma.h), signaled: its completion
 * shows the peer's NIC still answers. */
RVX_COLD void rvx__rc_keepalive(rvx__rc_conn_t *c)
{
    rvx__mlx5_rkey_t k;
    uint32_t pi;
    unsigned flags;
    uint8_t *wqe;
    rvx__rc_peer_ctrl(c, &k);
    RVX__RC_NEED(c, 1);
    wqe = rvx__mlx5_begin(&c->sq, 0, MLX5_OPCODE_RDMA_WRITE, RVX__MLX5_DS_RDMA_NODATA, 1, 0, &pi,
                          &flags);
    rvx__mlx5_write0(&c->sq, &c->tx, wqe + sizeof(struct mlx5_wqe_ctrl_seg), 0, pi, k.base, &k);
    c->ka_pi = pi + 1;
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

/* A peer that died is noticed when a WQE to it runs out of retries. With nothing in flight, a
 * keepalive every 100 ms. */
RVX_COLD rvx_status_t rvx__rc_ep_alive(rvx__rc_ep_t *ep)
{
    rvx__rc_conn_t *c = ep->c;
    uint32_t now;
    if (c->failed && c->err == RVX_ERR_CANCELED) rvx__rc_refused_here(c); /* said late? */
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

#endif /* RVX_TL_RC_IFACE_H */
