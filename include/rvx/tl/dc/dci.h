/* rvx/tl/dc/dci.h: dc_mlx5's pool of DCIs and posting on one: the address segment that names the
 * target, the prologue and the one commit point of every WQE, which DCI an endpoint's WQE goes
 * to (held, taken from the pool, or waited for), the bounce rings, and the DCI's states (created,
 * and RESET -> INIT -> RTR -> RTS again after an error).
 *
 * Which DCI an endpoint uses. An endpoint takes a DCI on its first operation and holds it while it
 * has work outstanding: its WQEs go to one send queue, so they execute in the order posted, and
 * flush and fence mean what they mean on rc_mlx5. Once all its work has completed the DCI may be
 * taken by another endpoint (lazily, when one needs a DCI and none is free); an endpoint that
 * finds its DCI taken gets another, after its earlier work, so order is kept. Fairness: an
 * endpoint that keeps posting keeps its DCI; with more busy endpoints than DCIs, the others wait.
 * A full pool: a put that needs a DCI while every DCI holds outstanding work asks each for a
 * completion (a signaled NOP after an unsignaled tail) and polls the CQ until one retires all its
 * work; it waits there (inside the call) and never returns RVX_ERR_NO_RESOURCE.
 * RVX_DC_DCI_POLICY=RVX_DC_DCI_FIXED instead maps an endpoint to DCI rank % RVX_DC_NUM_DCI for
 * good: the ranks on one DCI share its queue and its order, a post waits only for room on it,
 * and an error fails the endpoint whose WQE failed and those whose WQEs were flushed behind it. */
#ifndef RVX_TL_DC_DCI_H
#define RVX_TL_DC_DCI_H

/* ---- nothing to flush ------------------------------------------------------------------------ */

/* The DCIs' producer indices added up: it grows with every WQE posted, so while it equals what a
 * worker flush recorded when it found every DCI idle, nothing was posted since. A DCI made fresh
 * again (after an error) starts at 0: the record is then set one below the sum, which only posts
 * could bring it back to (2^32 of them). */
RVX_INLINE uint32_t rvx__dc_pis(const rvx__dc_iface_t *ifc)
{
    uint32_t sum = 0;
    unsigned i;
#if defined(__clang__)
#pragma unroll
#else
#pragma GCC unroll 64
#endif
    for (i = 0; i < RVX_DC_NUM_DCI; i++) sum += ifc->dci[i].sq.pi; /* one add each */
    return sum;
}

/* Nothing to flush: nothing posted since a worker flush found every DCI idle, and no error to
 * report; rvx_worker_flush then returns in line (8 additions, no CQ drained). */
RVX_INLINE int rvx__dc_iface_flushed(const rvx__dc_iface_t *ifc)
{
    return rvx__dc_pis(ifc) == ifc->flushed_pis && ifc->wflush_err == RVX_OK;
}

/* ---- the target of a WQE --------------------------------------------------------------------- */

RVX_INLINE rvx_status_t rvx__dc_ep_status(const rvx__dc_ep_t *ep)
{
    return ep->err != RVX_OK ? (rvx_status_t)ep->err : RVX_ERR_PEER_FAILED;
}

/* The peer's address as the worker keeps it: its first RVX__DC_ADDR_KEPT bytes (control region,
 * DCT number, LID or the GID's low half). */
RVX_INLINE const rvx__dc_addr_t *rvx__dc_addr_of(const rvx__dc_ep_t *ep)
{
    return (const rvx__dc_addr_t *)(const void *)(ep->ifc->addrs + (size_t)ep->rank * ep->ifc->addr_stride);
}

/* The peer's GID (RoCE): its top 8 bytes kept once or per rank, its low 8 in the kept address. */
RVX_INLINE void rvx__dc_gid(const rvx__dc_ep_t *ep, uint8_t gid[16])
{
    rvx__mlx5_gid_of(&ep->ifc->gids, ep->rank, rvx__dc_addr_of(ep)->at.gid_lo, gid);
}

/* The address segment after the ctrl segment: the base form is the access key and av_lo (DCT
 * number, SL 0, LID); the extended form (RoCE) adds the GRH fields, as mlx5dv_set_dgram_seg
 * writes them. Returns where the next segment goes (ctrl + address fill whole 16-byte units, and
 * with the extended form a whole WQEBB, after which the queue may wrap). */
RVX_INLINE uint8_t *rvx__dc_set_av(const rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, uint8_t *wqe)
{
    uint8_t *seg = wqe + sizeof(struct mlx5_wqe_ctrl_seg);
    uint64_t key = rvx_htobe64(RVX__DC_KEY);
    uint8_t gid[16];
    if (RVX_LIKELY(d->ifc->av_bytes == RVX__DC_AV_BASE)) {
        memcpy(seg, &key, 8);
        memcpy(seg + 8, &ep->av_lo, 8);
        return seg + RVX__DC_AV_BASE;
    }
    rvx__dc_gid(ep, gid);
    rvx__mlx5_set_av(seg, RVX__DC_KEY, rvx__dc_addr_of(ep)->dctn, 1, 0, 0, 0xc000, NULL, 0,
                     RVX__MLX5_HOP_LIMIT, 1u << 30 | (uint32_t)d->ifc->ctx->gid_index << 20, gid);
    seg += RVX__DC_AV_EXT;
    return seg == rvx__mlx5_sq_end(&d->sq) ? d->sq.buf : seg;
}

/* DS of the address segment. */
RVX_INLINE unsigned rvx__dc_av_ds(const rvx__dc_iface_t *ifc)
{
    return ifc->av_bytes / RVX__MLX5_SEG;
}

/* ---- posting on a DCI ------------------------------------------------------------------------ */

/* The prologue of every general post: at the producer index, the ctrl segment (completion
 * moderated, or forced by sig) and the address segment. Sets *pi, *flags, *wqe for the rest of
 * the post; returns where the next segment goes. */
RVX_INLINE uint8_t *rvx__dc_begin(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, unsigned opmod,
                                  unsigned opcode, unsigned ds, int sig, uint32_t imm_be,
                                  uint32_t *pi, unsigned *flags, uint8_t **wqe)
{
    *wqe = rvx__mlx5_begin(&d->sq, opmod, opcode, ds, sig, imm_be, pi, flags);
    return rvx__dc_set_av(d, ep, *wqe);
}

/* The one commit point of every dc WQE (ep's, of nbb WQEBBs at pi; bb: the one-WQEBB form built
 * in registers; more: leave the doorbell to the next ring). Under the fixed policy the DCI is
 * shared, so the slot remembers its endpoint. */
RVX_INLINE void rvx__dc_commit(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, uint32_t pi, uint32_t nbb,
                               uint8_t *wqe, const rvx__mlx5_bb_t *bb, int more)
{
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    d->owner[pi & d->sq.mask] = (struct rvx__dc_ep *)(uintptr_t)ep;
#else
    (void)ep;
#endif
#if defined(__x86_64__)
    if (bb) {
        rvx__mlx5_post_bb(&d->sq, pi, bb, more);
        return;
    }
#else
    (void)bb;
#endif
    rvx__mlx5_finish(&d->sq, pi, nbb, wqe, NULL, more);
}

/* ---- which DCI: acquisition and the bounce rings --------------------------------------------- */

/* The DCI the endpoint's next WQE of nbb WQEBBs goes to: the one it holds when there is room,
 * else (cold) one from the pool, waiting for room or a free DCI. NULL: the endpoint failed. */
RVX_INLINE rvx__dc_dci_t *rvx__dc_get(rvx__dc_ep_t *ep, uint32_t nbb)
{
    rvx__dc_dci_t *d = ep->dci;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    if (RVX_LIKELY(rvx__mlx5_sq_room_for(&d->sq, nbb) && !d->failed)) return d;
#else
    if (RVX_LIKELY(rvx__mlx5_sq_room_for(&d->sq, nbb))) return d;
#endif
    return rvx__dc_get_slow(ep, nbb);
}

/* Room in the DCI's bounce ring for len bytes (64-aligned), given back in WQE order. NULL: the
 * endpoint failed while it waited (the DCI recovered and went back to the pool). */
RVX_INLINE uint8_t *rvx__dc_bounce(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, size_t len)
{
    uint64_t pos = d->b_head, off;
    len = (len + 63) & ~(size_t)63;
    off = pos % RVX_DC_BOUNCE_BYTES;
    if (off + len > RVX_DC_BOUNCE_BYTES) { pos += RVX_DC_BOUNCE_BYTES - off; off = 0; }
    if (RVX_UNLIKELY(pos + len - d->b_tail > RVX_DC_BOUNCE_BYTES)) return rvx__dc_bounce_wait(d, ep, len);
    d->b_head = pos + len;
    return d->bounce + off;
}

/* A failed DCI completes every WQE it holds with an error CQE, signaled or not: progress keeps
 * polling until they have all come. */
RVX_COLD void rvx__dc_hold(rvx__dc_dci_t *d)
{
    if (d->failed) rvx__mlx5_tx_hold(&d->sq, &d->tx);
}

/* A signaled NOP after an unsignaled tail (not on a failed DCI: its WQEs come back anyway). */
RVX_COLD void rvx__dc_sig_tail(rvx__dc_dci_t *d)
{
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    uint32_t pi = d->sq.pi;
    if (!d->failed) rvx__mlx5_tx_sig_tail(&d->sq, &d->tx);
    if (d->sq.pi != pi) d->owner[pi & d->sq.mask] = NULL; /* a NOP: no endpoint's */
#else
    if (!d->failed) rvx__mlx5_tx_sig_tail(&d->sq, &d->tx);
#endif
}

/* A DCI for ep: one no one holds, else one whose holder's work has all completed (taken from
 * it). A DCI no one holds that still has work (a destroyed endpoint's, to a peer that may have
 * left: its retries can last seconds) goes only to an endpoint being destroyed, for its credits'
 * give-back: an error of that work must not fail a living endpoint, and teardown must not wait
 * for the retries. While the worker itself goes (ifc->leaving), such an endpoint may also post
 * behind a living endpoint's work, on the DCI with the least of it: that endpoint goes next and
 * keeps its DCI, whose order holds for both, and the round trips a wait for a free DCI would
 * take are what made teardown slow at 16 ranks and more. NULL: none is free. */
RVX_COLD rvx__dc_dci_t *rvx__dc_pick(rvx__dc_iface_t *ifc)
{
    rvx__dc_dci_t *free_d = NULL, *idle_held = NULL, *orphan = NULL, *least = NULL;
    unsigned k;
    for (k = 0; k < RVX_DC_NUM_DCI; k++) {
        rvx__dc_dci_t *d = &ifc->dci[(ifc->next_dci + k) % RVX_DC_NUM_DCI];
        int idle = d->sq.ci == d->sq.pi;
        if (d->failed) continue;
        if (!d->ep && idle) { idle_held = NULL; free_d = d; break; }
        if (!d->ep && !orphan) orphan = d;
        if (d->ep && idle && !idle_held && !d->tx.flush_head && !d->am_claim) idle_held = d;
        if (!least || d->sq.pi - d->sq.ci < least->sq.pi - least->sq.ci) least = d;
    }
    if (!orphan && ifc->leaving) orphan = least;
    if (!free_d && idle_held) {
        idle_held->ep->dci = &ifc->no_dci; /* its holder's work is complete: it takes another
                                            * next time */
        idle_held->ep = NULL;
        free_d = idle_held;
        ifc->dci_taken++;
    }
    if (!free_d && ifc->closing) free_d = orphan;
    if (free_d) ifc->next_dci = (unsigned)(free_d - ifc->dci + 1) % RVX_DC_NUM_DCI;
    return free_d;
}

/* The endpoint's DCI with room for nbb WQEBBs: its own (waiting for room), or one from the pool
 * (waiting, when every DCI holds outstanding work, until one has retired it all). NULL: the
 * endpoint has failed and holds no DCI. */
RVX_COLD rvx__dc_dci_t *rvx__dc_get_slow(rvx__dc_ep_t *ep, uint32_t nbb)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    unsigned spins = 0, k;
    int counted = 0;
    for (;;) {
        rvx__dc_dci_t *d = ep->dci == &ifc->no_dci ? NULL : ep->dci;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
        if (ep->failed) return NULL;
        d = ep->dci = &ifc->dci[(unsigned)ep->rank % RVX_DC_NUM_DCI];
        if (d->failed) { /* recovering (another endpoint's error): wait for it */
            if (d->sq.ci == d->sq.pi) { /* it could not be recovered */
                ep->failed = 1;
                ep->err = (int8_t)RVX_ERR_IO;
                ep->dci = &ifc->no_dci;
                return NULL;
            }
            rvx__dc_hold(d);
            if (rvx__dc_drain(ifc)) spins = 0;
            else rvx__backoff(&spins);
            continue;
        }
        (void)counted; (void)k;
#else
        if (!d) {
            if (ep->failed) return NULL;
            d = rvx__dc_pick(ifc);
            if (d) {
                d->ep = ep;
                ep->dci = d;
            } else if (!counted) {
                counted = 1;
                ifc->pool_waits++;
            }
        }
#endif
        if (d && rvx__mlx5_sq_room_for(&d->sq, nbb)) return d;
        /* something must be signaled, or no CQE would ever free a queue */
        if (d) { rvx__dc_sig_tail(d); rvx__dc_hold(d); }
        else for (k = 0; k < RVX_DC_NUM_DCI; k++) { rvx__dc_sig_tail(&ifc->dci[k]); rvx__dc_hold(&ifc->dci[k]); }
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

RVX_COLD uint8_t *rvx__dc_bounce_wait(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, size_t len)
{
    unsigned spins = 0;
    for (;;) {
        uint64_t pos = d->b_head, off = pos % RVX_DC_BOUNCE_BYTES;
        /* failed, or recovered meanwhile and no longer the caller's: the endpoint has failed (a
         * recovered DCI has room again, but what goes on it now is no longer this transfer's) */
        if (d->failed || ep->failed || ep->dci != d) return NULL;
        if (off + len > RVX_DC_BOUNCE_BYTES) { pos += RVX_DC_BOUNCE_BYTES - off; off = 0; }
        if (pos + len - d->b_tail <= RVX_DC_BOUNCE_BYTES) {
            d->b_head = pos + len;
            return d->bounce + off;
        }
        rvx__dc_sig_tail(d);
        if (d->sq.ci == d->sq.pi) d->b_tail = d->b_head; /* nothing in flight: all of it is free */
        else if (rvx__dc_drain(d->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

/* ---- DCI states (the masks modify_dci_qp_is_ok accepts) -------------------------------------- */

/* Creation attributes, the same for a DCI and the DCT but for the type: a driver QP on the
 * worker's PD and CQ. */
RVX_COLD void rvx__dc_qp_attr(const rvx__dc_iface_t *ifc, struct ibv_qp_init_attr_ex *ia,
                              struct mlx5dv_qp_init_attr *da, enum mlx5dv_dc_type type)
{
    memset(ia, 0, sizeof(*ia));
    memset(da, 0, sizeof(*da));
    ia->qp_type = IBV_QPT_DRIVER;
    ia->comp_mask = IBV_QP_INIT_ATTR_PD;
    ia->pd = ifc->ctx->pd;
    ia->send_cq = ifc->ibcq;
    ia->recv_cq = ifc->ibcq;
    da->comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    da->dc_init_attr.dc_type = type;
}

/* RTR's attributes, the same for a DCI and the DCT: the path MTU and the port, with the GRH's
 * source GID and hop limit on RoCE. */
RVX_COLD void rvx__dc_rtr_attr(const rvx__mlx5_ctx_t *ctx, struct ibv_qp_attr *qa)
{
    memset(qa, 0, sizeof(*qa));
    qa->qp_state = IBV_QPS_RTR;
    qa->path_mtu = ctx->mtu;
    qa->ah_attr.port_num = ctx->port;
    if (ctx->is_roce) {
        qa->ah_attr.is_global = 1;
        qa->ah_attr.grh.sgid_index = (uint8_t)ctx->gid_index;
        qa->ah_attr.grh.hop_limit = RVX__MLX5_HOP_LIMIT;
    }
}

RVX_COLD rvx_status_t rvx__dc_dci_ready(const rvx__mlx5_ctx_t *ctx, struct ibv_qp *qp)
{
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = ctx->port;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT)) goto fail;
    rvx__dc_rtr_attr(ctx, &qa);
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV)) goto fail;
    return rvx__mlx5_qp_to_rts(qp, -1); /* RC's RTS attributes are exactly the DCI's */
fail:
    rvx__log("dc_mlx5: DCI 0x%x to RTS failed: %s", qp->qp_num, strerror(errno));
    return RVX_ERR_IO;
}

/* A DCI's send queue and book-keeping, from its first WQEBB (after creation or RESET). */
RVX_COLD rvx_status_t rvx__dc_dci_fresh(rvx__dc_iface_t *ifc, rvx__dc_dci_t *d)
{
    struct mlx5dv_qp dq;
    rvx__mlx5_bf_t *bf;
    rvx_status_t st = rvx__mlx5_qp_obj(d->qp, &dq);
    if (st != RVX_OK) return st;
    bf = rvx__mlx5_bf_of(&ifc->bfs, dq.bf.reg, dq.bf.size);
    if (!bf) return RVX_ERR_NO_MEMORY;
    rvx__mlx5_tx_fresh(&d->tx, &ifc->txrecs, &ifc->outstanding);
    /* at most 4 x RVX_MLX5_TX_DEPTH WQEBBs in flight per DCI, whatever the queue's size: the CQ
     * is sized for that many (each WQE may come back as an error CQE) */
    rvx__mlx5_sq_init(&d->sq, &dq, d->qpn, bf,
                      RVX__DC_SQ_RESERVE + (dq.sq.wqe_cnt > 4u * RVX_MLX5_TX_DEPTH ?
                                            dq.sq.wqe_cnt - 4u * RVX_MLX5_TX_DEPTH : 0u));
    d->ctrl_w8 = ifc->av_bytes == RVX__DC_AV_BASE ?
                 (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | (uint64_t)d->qpn << 8 | 4u : 0;
    d->ctrl_send = d->ctrl_w8 ? (uint64_t)MLX5_OPCODE_SEND_IMM << 32 | (uint64_t)d->qpn << 8 | 4u : 0;
    d->sq.hold = !d->ctrl_w8; /* no one-WQEBB form: every post goes the general way */
    rvx__mlx5_sq_restop(&d->sq);
    ifc->flushed_pis = rvx__dc_pis(ifc) - 1; /* its index went back to 0: no longer a record */
    d->wflush_pi = 0;
    d->ka_ep = NULL; /* a keepalive in flight came back with the rest */
    d->ka_pi = 0;
    d->b_head = d->b_tail = 0;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    free(d->owner);
    d->owner = (struct rvx__dc_ep **)calloc(d->sq.mask + 1, sizeof(*d->owner));
    if (!d->owner) return RVX_ERR_NO_MEMORY;
#endif
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__dc_dci_create(rvx__dc_iface_t *ifc, rvx__dc_dci_t *d, unsigned i)
{
    rvx__mlx5_ctx_t *ctx = ifc->ctx;
    struct ibv_qp_init_attr_ex ia;
    struct mlx5dv_qp_init_attr da;
    rvx__dc_qp_attr(ifc, &ia, &da, MLX5DV_DCTYPE_DCI);
    ia.cap.max_send_wr = RVX_MLX5_TX_DEPTH;
    ia.cap.max_send_sge = 1;
    ia.cap.max_inline_data = RVX__TL_SHORT_MAX;
    d->ifc = ifc;
    d->bounce = ifc->bounce + (size_t)i * RVX_DC_BOUNCE_BYTES;
    rvx__mlx5_fslot_init(&d->fs, ifc->bounce + RVX__DC_BOUNCE_ALL + (size_t)i * RVX__MLX5_FSLOT,
                         ifc->bounce_lkey);
    d->qp = mlx5dv_create_qp(ctx->ib, &ia, &da);
    if (!d->qp) {
        rvx__log("dc_mlx5: cannot create a DCI on %s: %s", ctx->name, strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    if (ia.cap.max_inline_data < RVX__TL_SHORT_MAX) {
        rvx__log("dc_mlx5: the DCI takes %u inline bytes, this build needs %d (RVX_MLX5_INLINE)",
                 ia.cap.max_inline_data, RVX__TL_SHORT_MAX);
        return RVX_ERR_UNSUPPORTED;
    }
    d->qpn = d->qp->qp_num;
    if (rvx__dc_dci_ready(ctx, d->qp) != RVX_OK) return RVX_ERR_IO;
    return rvx__dc_dci_fresh(ifc, d);
}

/* A DCI in ERR whose WQEs have all come back: RESET -> INIT -> RTR -> RTS, a fresh queue, and
 * back to the pool. The endpoint that held it stays failed; no one else notices. */
RVX_COLD void rvx__dc_dci_recover(rvx__dc_dci_t *d)
{
    rvx__dc_iface_t *ifc = d->ifc;
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RESET;
    if (d->ep) d->ep->dci = &ifc->no_dci;
    d->ep = NULL;
    if (ibv_modify_qp(d->qp, &qa, IBV_QP_STATE) || rvx__dc_dci_ready(ifc->ctx, d->qp) != RVX_OK ||
        rvx__dc_dci_fresh(ifc, d) != RVX_OK) {
        rvx__log("dc_mlx5: DCI 0x%x could not be recovered: the pool has one DCI less", d->qpn);
        return; /* stays failed: never handed out again */
    }
    d->failed = 0;
}

#endif /* RVX_TL_DC_DCI_H */
