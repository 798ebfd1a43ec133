/* rvx/tl/dc/iface.h: dc_mlx5's interface and endpoints: the iface's creation and teardown, its
 * address and wire-up, an endpoint's connect (no verbs call: its address segment's fields) and
 * disconnect, flushes, and liveness (keepalives). */
#ifndef RVX_TL_DC_IFACE_H
#define RVX_TL_DC_IFACE_H

#include "../mlx5/flush.h"

/* ---- the iface ------------------------------------------------------------------------------- */

/* Before the DCIs go, a short grace for what they still hold (credits given back, sends):
 * peers still there get it in microseconds; one that has left is not waited for beyond
 * RVX__DC_FINI_GRACE_S, and its failure is not reported (rvx__dc_req_err). */
#define RVX__DC_FINI_GRACE_S 0.01

RVX_COLD void rvx__dc_iface_quiesce(rvx__dc_iface_t *ifc)
{
    double t0 = rvx__now_s();
    unsigned spins = 0, i, busy = 1;
    while (busy && rvx__now_s() - t0 < RVX__DC_FINI_GRACE_S) {
        for (i = busy = 0; i < RVX_DC_NUM_DCI; i++) {
            rvx__dc_dci_t *d = &ifc->dci[i];
            if (!d->qp || d->sq.ci == d->sq.pi) continue;
            rvx__dc_sig_tail(d);
            rvx__dc_hold(d);
            busy = 1;
        }
        if (!busy) break;
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

RVX_COLD void rvx__dc_iface_fini(rvx__dc_iface_t *ifc)
{
    unsigned i;
    if (ifc->ibcq) rvx__dc_iface_quiesce(ifc);
    if (ifc->wflush) ifc->nlive--; /* the flushes' count (rvx__dc_iface_flush) */
    rvx__mlx5_wflush_cancel(&ifc->wflush); /* what the grace did not retire */
    for (i = 0; i < RVX_DC_NUM_DCI; i++) {
        if (ifc->dci[i].qp) ibv_destroy_qp(ifc->dci[i].qp);
        rvx__mlx5_tx_drop(&ifc->dci[i].tx);
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
        free(ifc->dci[i].owner);
#endif
    }
    if (ifc->dct) ibv_destroy_qp(ifc->dct);
    rvx__mlx5_srq_destroy(&ifc->srq);
    if (ifc->ctrl_mr) ibv_dereg_mr(ifc->ctrl_mr);
    free(ifc->ctrl);
    free(ifc->eps);
    free(ifc->peers);
    free(ifc->dirty);
    free(ifc->holders);
    free(ifc->backoff);
    free(ifc->gids.his);
    free(ifc->refused);
#if RVX_CAN_RECEIVE
    while (ifc->def_head) {
        rvx__dc_deferred_t *f = ifc->def_head;
        ifc->def_head = f->next;
        free(f);
    }
#endif
    if (ifc->bounce_mr) ibv_dereg_mr(ifc->bounce_mr);
    rvx__unmap(ifc->bounce, RVX__DC_BOUNCE_MAP);
    if (ifc->ibcq) ibv_destroy_cq(ifc->ibcq);
    rvx__mlx5_bf_free(&ifc->bfs);
    rvx__mlx5_txpool_fini(&ifc->txrecs); /* after the DCIs have given their records back */
    memset(ifc, 0, sizeof(*ifc));
}

RVX_COLD rvx_status_t rvx__dc_iface_init(rvx__dc_iface_t *ifc, rvx__mlx5_ctx_t *ctx, int rank,
                                         int nranks, int node)
{
    size_t bytes = RVX__DC_BOUNCE_MAP;
    unsigned i;
    rvx_status_t st;
    (void)node; /* one transport for every peer: where a peer runs changes nothing */
    memset(ifc, 0, sizeof(*ifc));
    ifc->ctx = ctx;
    ifc->rank = rank;
    ifc->nranks = nranks;
    ifc->av_bytes = ctx->is_roce ? RVX__DC_AV_EXT : RVX__DC_AV_BASE;
    ifc->quiet = RVX__DC_TICK;
    rvx__mlx5_txpool_init(&ifc->txrecs);
    rvx__mlx5_tx_fresh(&ifc->no_dci.tx, &ifc->txrecs, &ifc->outstanding); /* holds no record */
    ifc->no_dci.sq.hold = 1; /* and no room: its limit stays at pi, 0 */
#if RVX_CAN_RECEIVE
    { /* the prefix of frames built in the scratch area names this rank from the start */
        rvx__dc_prefix_t pre;
        pre.rank = (uint32_t)rank;
        pre.consumed = 0;
        memcpy(ifc->scratch, &pre, sizeof(pre));
    }
#endif
    ifc->bounce = (uint8_t *)rvx__map(bytes);
    if (!ifc->bounce) return RVX_ERR_NO_MEMORY;
    ifc->bounce_mr = rvx__mlx5_reg(ctx, ifc->bounce, bytes, "the DCI bounce rings");
    if (!ifc->bounce_mr) { st = RVX_ERR_NO_RESOURCE; goto fail; }
    ifc->bounce_lkey = ifc->bounce_mr->lkey;
    /* the control region: word 0 the credit pool (changed by peers' NIC atomics only), word 1 + r
     * rank r's returned credits, word 1 + nranks + r rank r's frames taken here (16 bytes a rank,
     * and 20 of counters and lists); keepalives write nothing to it */
    ifc->ctrl = (uint64_t *)rvx__mlx5_alloc(ctx, 8 * (2 * (size_t)nranks + 1));
    ifc->eps = (rvx__dc_ep_t **)calloc((size_t)nranks, sizeof(*ifc->eps));
    ifc->peers = (rvx__dc_peer_t *)calloc((size_t)nranks, sizeof(*ifc->peers));
    ifc->dirty = (int *)calloc((size_t)nranks, sizeof(*ifc->dirty));
    if (!ifc->ctrl || !ifc->eps || !ifc->peers || !ifc->dirty) { st = RVX_ERR_NO_MEMORY; goto fail; }
    memset(ifc->ctrl, 0, 8 * (2 * (size_t)nranks + 1));
    ifc->ctrl[0] = RVX_DC_RX_DEPTH;
    ifc->ctrl_mr = rvx__mlx5_reg(ctx, ifc->ctrl, 8 * (2 * (size_t)nranks + 1), "the credit words");
    if (!ifc->ctrl_mr) { st = RVX_ERR_NO_RESOURCE; goto fail; }
    if ((st = rvx__dc_iface_cq(ifc)) != RVX_OK) goto fail;
    if ((st = rvx__dc_iface_dct(ifc)) != RVX_OK) goto fail;
    for (i = 0; i < RVX_DC_NUM_DCI; i++)
        if ((st = rvx__dc_dci_create(ifc, &ifc->dci[i], i)) != RVX_OK) goto fail;
    return RVX_OK;
fail:
    rvx__dc_iface_fini(ifc);
    return st;
}

RVX_COLD void rvx__dc_iface_address(rvx__dc_iface_t *ifc, rvx__dc_addr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->magic = RVX__MLX5_MAGIC;
    addr->dctn = ifc->dct->qp_num;
    addr->is_roce = ifc->ctx->is_roce;
    if (ifc->ctx->is_roce) {
        memcpy(addr->gid_hi, ifc->ctx->gid.raw, 8);
        memcpy(addr->at.gid_lo, ifc->ctx->gid.raw + 8, 8);
    } else {
        addr->at.lid = ifc->ctx->lid;
    }
    if (ifc->ctrl_mr) {
        addr->ctrl_addr = (uint64_t)(uintptr_t)ifc->ctrl;
        addr->ctrl_rkey = ifc->ctrl_mr->rkey;
    }
}

/* A rank's address is refused at connect when wire-up found it is not one of this fabric. */
RVX_COLD int rvx__dc_refused(const rvx__dc_iface_t *ifc, int rank)
{
    unsigned i;
    for (i = 0; i < ifc->nrefused; i++)
        if (ifc->refused[i] == rank) return 1;
    return 0;
}

/* The only look at whole addresses (the worker keeps their first 24 bytes): note the ranks whose
 * address is not a dc_mlx5 address of this link layer, and on RoCE keep the GIDs' top 8 bytes
 * once if every rank has the same (one subnet prefix, or IPv4-mapped), else per rank. */
RVX_COLD rvx_status_t rvx__dc_iface_wireup(rvx__dc_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    const rvx__dc_addr_t *a;
    int r;
    for (r = 0; r < ifc->nranks; r++) {
        a = (const rvx__dc_addr_t *)(const void *)(addrs + (size_t)r * size);
        if (a->magic == RVX__MLX5_MAGIC && a->is_roce == ifc->ctx->is_roce) continue;
        if (!ifc->refused) ifc->refused = (int *)calloc((size_t)ifc->nranks, sizeof(int));
        if (!ifc->refused) return RVX_ERR_NO_MEMORY;
        ifc->refused[ifc->nrefused++] = r;
    }
    if (!ifc->ctx->is_roce) return RVX_OK;
    return rvx__mlx5_gids_keep(&ifc->gids, addrs, size, offsetof(rvx__dc_addr_t, gid_hi), ifc->nranks);
}

/* Where the worker keeps every rank's address after wire-up (its first RVX__DC_ADDR_KEPT bytes):
 * endpoints read the control region and the GID's low half from there, not from a copy each. */
RVX_COLD void rvx__dc_iface_addrs(rvx__dc_iface_t *ifc, const uint8_t *addrs, size_t stride)
{
    ifc->addrs = addrs;
    ifc->addr_stride = stride;
}

/* ---- endpoints ------------------------------------------------------------------------------- */

/* Milliseconds, wrapping: when an endpoint's last keepalive went. */
RVX_INLINE uint32_t rvx__dc_ms(void)
{
    return (uint32_t)(uint64_t)(rvx__now_s() * 1e3);
}

/* The address segment's fields, built once: bytes 8-15 of the base form are dqp_dct (the DCT
 * number, no extended flag), stat_rate_sl 0, fl_mlid 0, rlid (0 on RoCE, where the GRH form
 * takes the DCT number and GID from the kept address). */
RVX_COLD rvx_status_t rvx__dc_ep_connect(rvx__dc_iface_t *ifc, rvx__dc_ep_t *ep, int rank,
                                         const rvx__dc_addr_t *addr)
{
    uint32_t dq;
    uint16_t lid;
    memset(ep, 0, sizeof(*ep));
    if (rvx__dc_refused(ifc, rank) || addr->dctn > RVX__MLX5_QPN_MASK) {
        rvx__log("dc_mlx5: the address of rank %d is not a dc_mlx5 address of this fabric", rank);
        return RVX_ERR_INVALID_PARAM;
    }
    dq = rvx_htobe32(addr->dctn);
    lid = ifc->ctx->is_roce ? 0 : rvx_htobe16(addr->at.lid);
    memcpy((uint8_t *)&ep->av_lo, &dq, 4);
    memcpy((uint8_t *)&ep->av_lo + 6, &lid, 2);
    ep->ifc = ifc;
    ep->dci = &ifc->no_dci;
    ep->rank = rank;
    ep->err = RVX_OK;
    ep->live = 1;
    ep->ka_ms = rvx__dc_ms();
    if (addr != rvx__dc_addr_of(ep)) { /* the GID and control region are read from the kept copy */
        rvx__log("dc_mlx5: the address of rank %d is not where the worker keeps it", rank);
        return RVX_ERR_INVALID_PARAM;
    }
#if RVX_CAN_RECEIVE
    /* credits go on from where an earlier endpoint to the rank left them */
    ep->tx_limit = ifc->peers[rank].tx_sent;
    ep->tx_left = 0;
    ep->piggy = (uint32_t)ifc->ctrl[1 + rank];
    /* an earlier endpoint that gave back every credit paid for all its frames: reports of them
     * arriving now change nothing (rvx__dc_give_back) */
    if (!ifc->peers[rank].claimed && (int32_t)(ep->tx_limit - ep->piggy) > 0) ep->piggy = ep->tx_limit;
    ifc->eps[rank] = ep;
    ifc->peers[rank].no_msgs = 0;
    if (ifc->peers[rank].claimed) rvx__dc_hold_add(ep); /* the sweep gives them back */
    /* frames the rank sent while there was no endpoint: their credits go back now */
    if ((uint32_t)*rvx__dc_taken(ifc, rank) != ifc->peers[rank].rx_reported) rvx__dc_credit_return(ep);
#endif
    ifc->nlive++;
    return RVX_OK;
}

#if RVX_CAN_RECEIVE
/* The endpoint will send no messages (a pair's on-node peer: they go through shared memory), nor
 * will its peer's to this worker: the worker's last reports skip it (rvx__dc_iface_leave). */
RVX_COLD void rvx__dc_ep_no_msgs(rvx__dc_ep_t *ep) { ep->ifc->peers[ep->rank].no_msgs = 1; }
#endif

/* The endpoint's work that completes into the caller's memory (a request, a copy, a fetch)
 * finishes, by its CQE or its DCI's error; a peer that does not answer costs at most the DCI's
 * retries (RVX__MLX5_TEARDOWN_S), after which the DCI is failed on purpose and its flush ends
 * every request. The rest (sends, credit words, keepalives: what a peer that has left no longer
 * needs) is not waited for. */
RVX_COLD void rvx__dc_ep_settle(rvx__dc_ep_t *ep)
{
    rvx__dc_iface_t *ifc = ep->ifc;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    /* its DCI even once an error set ep->dci to no_dci: its WQEs behind the error still flush */
    rvx__dc_dci_t *d = &ifc->dci[(unsigned)ep->rank % RVX_DC_NUM_DCI];
#else
    rvx__dc_dci_t *d = ep->dci; /* in the pool even once recovered: it retires its records */
#endif
    double t0 = rvx__now_s();
    unsigned spins = 0;
    int forced = 0;
    if (d == &ifc->no_dci || !rvx__mlx5_tx_owes(&d->tx)) return;
    rvx__dc_sig_tail(d); /* an unsignaled tail would never be retired */
    rvx__dc_hold(d);     /* failed: its error CQEs are polled for */
    while (rvx__mlx5_tx_owes(&d->tx)) {
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
        if (rvx__now_s() - t0 < RVX__MLX5_TEARDOWN_S) continue;
        if (forced) { /* the adapter flushed nothing in another TEARDOWN_S */
            rvx__log("dc_mlx5: DCI 0x%x does not flush: requests to rank %d stay pending",
                     d->qpn, ep->rank);
            return;
        }
        forced = 1; /* its flush CQEs end the requests, then it recovers */
        t0 = rvx__now_s();
        rvx__log("dc_mlx5: rank %d did not answer for %.1f s: its endpoint's requests end",
                 ep->rank, RVX__MLX5_TEARDOWN_S);
        rvx__mlx5_qp_to_err(d->qp, ep->rank);
    }
}

#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
/* WQEs of the endpoint still on its (shared) DCI: an error CQE for one finds no endpoint. */
RVX_COLD void rvx__dc_disown(rvx__dc_ep_t *ep)
{
    rvx__dc_dci_t *d = &ep->ifc->dci[(unsigned)ep->rank % RVX_DC_NUM_DCI];
    uint32_t i;
    for (i = d->sq.ci; i != d->sq.pi; i++)
        if (d->owner[i & d->sq.mask] == ep) d->owner[i & d->sq.mask] = NULL;
}
#endif

#if RVX_CAN_RECEIVE
/* The worker is going (the first step of rvx_worker_destroy): every peer it has an endpoint to
 * is told at once, in a last report (RVX__DC_LEFT), before any endpoint's teardown. A peer told
 * gives nothing back to this worker (rvx__dc_give_back), so it holds no DCI for the grace once
 * this worker's DCT is gone; and ranks that leave together hear of each other before any of
 * them destroys its DCT, so they give nothing back to each other either. Not to a peer that
 * said it left first, nor to one no message goes to (neither holds the other's credits). The
 * credits this worker holds at a peer go back right behind its report, on the DCI the report
 * took, so that a DCI changes target once per peer (a change waits for the last target's
 * answers) and no endpoint's teardown has a give-back left. Posted, not waited for (the iface's
 * quiesce retires them). */
RVX_COLD void rvx__dc_iface_leave(rvx__dc_iface_t *ifc)
{
    int r;
    if (ifc->leaving) return; /* once */
    ifc->leaving = 1;
    ifc->closing = 1; /* a DCI with a destroyed endpoint's work will do */
    for (r = 0; r < ifc->nranks; r++) {
        rvx__dc_ep_t *ep = ifc->eps[r];
        if (!ep || !ep->live || ep->failed || rvx__dc_peer_left(ifc, r) || ifc->peers[r].no_msgs)
            continue;
        rvx__dc_report(ep);
        rvx__dc_give_back(ep);
    }
    ifc->closing = 0;
}
#else
RVX_COLD void rvx__dc_iface_leave(rvx__dc_iface_t *ifc) { ifc->leaving = 1; }
#endif

/* The endpoint goes. Its credits go back at once (tl/dc/credit.h), its owed work completes, and a
 * DCI it held goes back to the pool, to be handed out again once what is left on it retires
 * (a signaled NOP after it: a peer that has left fails it unreported, see rvx__dc_req_err). */
RVX_COLD void rvx__dc_ep_disconnect(rvx__dc_ep_t *ep)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    if (!ep->live) return;
#if RVX_CAN_RECEIVE
    rvx__dc_give_back(ep); /* and off the holders' list */
    ifc->peers[ep->rank].tx_sent = rvx__dc_tx_sent(ep);
    if (ifc->eps[ep->rank] == ep) ifc->eps[ep->rank] = NULL;
#endif
    rvx__dc_ep_settle(ep);
    if (ep->dci != &ifc->no_dci && ep->dci->sq.ci != ep->dci->sq.pi) rvx__dc_sig_tail(ep->dci);
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    rvx__dc_disown(ep);
#endif
    if (ep->dci->ep == ep) ep->dci->ep = NULL; /* any CQEs still to come find no endpoint */
    if (ep->dci->ka_ep == ep) ep->dci->ka_ep = NULL;
    ep->dci = &ifc->no_dci;
    ep->live = 0;
    ifc->nlive--;
}

RVX_COLD rvx_status_t rvx__dc_rkey_unpack(rvx__dc_ep_t *ep, const void *buf, rvx__mlx5_rkey_t *rkey)
{
    return rvx__mlx5_rkey_unpack(buf, rkey, ep->rank);
}

/* ---- flush ----------------------------------------------------------------------------------- */

/* Done at once when the endpoint holds no DCI or its DCI has retired everything: its work is
 * complete. Otherwise the slow path (a signaled NOP covers an unsignaled tail). */
RVX_INLINE rvx_status_t rvx__dc_ep_flush(rvx__dc_ep_t *ep, rvx_request_t *req)
{
    const rvx__dc_dci_t *d = ep->dci;
    if (d->sq.ci == d->sq.pi) return (rvx_status_t)ep->err; /* also no DCI held (no_dci) */
    return rvx__dc_flush_slow(ep, req);
}

RVX_COLD rvx_status_t rvx__dc_flush_slow(rvx__dc_ep_t *ep, rvx_request_t *req)
{
    rvx__dc_dci_t *d;
    rvx__dc_drain(ep->ifc);
    d = ep->dci;
    if (!d || d->sq.ci == d->sq.pi) return (rvx_status_t)ep->err;
    return rvx__mlx5_flush_q(d, req);
}

/* Every DCI in use retires what it holds; the pool is a few DCIs, whatever the job's size. */
RVX_COLD rvx_status_t rvx__dc_iface_flush(rvx__dc_iface_t *ifc, rvx_request_t *req)
{
    unsigned i;
    int busy = 0;
    rvx__dc_drain(ifc);
    for (i = 0; i < RVX_DC_NUM_DCI; i++) {
        rvx__dc_dci_t *d = &ifc->dci[i];
        if (d->sq.ci == d->sq.pi) continue;
        rvx__mlx5_wflush_q(d);
        busy = 1;
    }
    /* progress must poll for it even when no endpoint is left (the signaled tails of destroyed
     * endpoints: t_dc_credit_destroy hung here when their CQEs came after the last one went);
     * one count for the list, taken back when it empties (rvx__dc_wflush_check, _fini) */
    if (!busy) {
        ifc->flushed_pis = rvx__dc_pis(ifc); /* every DCI idle: nothing to flush until a post */
        return rvx__mlx5_wflush_err(&ifc->wflush_err);
    }
    if (req && !ifc->wflush) ifc->nlive++;
    return rvx__mlx5_wflush_add(&ifc->wflush, req, busy);
}

/* ---- liveness -------------------------------------------------------------------------------- */

/* A zero-length WRITE to the peer's control region (tl/mlx5/rdma.h), signaled: its completion
 * shows the peer's DCT still answers, its error CQE fails the endpoint. */
RVX_COLD void rvx__dc_keepalive(rvx__dc_ep_t *ep)
{
    unsigned av_ds = rvx__dc_av_ds(ep->ifc), ds = RVX__MLX5_DS_RDMA_NODATA + av_ds, flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    rvx__dc_dci_t *d = rvx__dc_get(ep, nbb);
    const rvx__dc_addr_t *a = rvx__dc_addr_of(ep);
    uint8_t *wqe, *seg;
    rvx__mlx5_rkey_t k;
    if (!d) return;
    k.rkey_word = (uint64_t)rvx_htobe32(a->ctrl_rkey);
    k.base = a->ctrl_addr;
    k.len = 8;
    seg = rvx__dc_begin(d, ep, 0, MLX5_OPCODE_RDMA_WRITE, ds, 1, 0, &pi, &flags, &wqe);
    rvx__mlx5_write0(&d->sq, &d->tx, seg, av_ds, pi, a->ctrl_addr, &k);
    d->ka_ep = ep;
    d->ka_pi = pi + nbb;
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL, 0);
}

/* A peer that died is noticed when a WQE to it runs out of retries (the DCI's error CQE). Unless
 * the endpoint's last keepalive is still in flight (the DCI it holds remembers it: an endpoint
 * whose DCI was taken has had all its work complete), another every 100 ms (it also retires an
 * unsignaled tail, which would otherwise never show an error). */
RVX_COLD rvx_status_t rvx__dc_ep_alive(rvx__dc_ep_t *ep)
{
    const rvx__dc_dci_t *d = ep->dci;
    uint32_t now;
    if (ep->failed) return RVX__MLX5_EP_FAILURE(ep->err);
    rvx__dc_drain(ep->ifc);
    if (ep->failed) return RVX__MLX5_EP_FAILURE(ep->err);
    now = rvx__dc_ms();
    if ((d->ka_ep != ep || (int32_t)(d->sq.ci - d->ka_pi) >= 0) && now - ep->ka_ms > 100) {
        ep->ka_ms = now;
        rvx__dc_keepalive(ep);
    }
    return RVX_OK;
}

#endif /* RVX_TL_DC_IFACE_H */
