/* rvx/tl/dc/poll.h: dc_mlx5's cold paths after a post: the CQ poll (retiring WQEs, error CQEs
 * and DCI recovery), taking a DCI from the pool, waiting for room or a request, the
 * compare-and-swap loop of the atomics the NIC lacks, the slow flushes and liveness. Included at
 * the end of tl/dc_mlx5.h. */
#ifndef RVX_TL_DC_POLL_H
#define RVX_TL_DC_POLL_H

/* ---- retiring WQEs -------------------------------------------------------------------------- */

/* The status flushes of a DCI complete with: its holder's. */
RVX_INLINE rvx_status_t rvx__dc_flush_status(const rvx__dc_dci_t *d)
{
    return d->ep ? d->ep->err : RVX_OK;
}

/* A failed DCI completes every WQE it holds with an error CQE, signaled or not: progress keeps
 * polling until they have all come. */
RVX_COLD void rvx__dc_hold(rvx__dc_dci_t *d)
{
    if (d->failed) rvx__mlx5_tx_hold(&d->sq, &d->tx);
}

/* A signaled WQE completed: everything up to its end retires. */
RVX_COLD void rvx__dc_req_ok(rvx__dc_dci_t *d, uint16_t idx)
{
    uint64_t b = rvx__mlx5_tx_req_ok(&d->sq, &d->tx, idx, rvx__dc_flush_status(d));
    if (b) d->b_tail = b;
}

/* A WQE failed (or was flushed after a failure): the endpoint holding the DCI fails, the WQEs
 * before it completed, this one completes with the syndrome's status. Once the DCI has nothing
 * left, it recovers. */
RVX_COLD void rvx__dc_req_err(rvx__dc_dci_t *d, const struct mlx5_err_cqe *e)
{
    uint16_t idx = rvx_htobe16(e->wqe_counter);
    rvx_status_t st = rvx__mlx5_syndrome_status(e->syndrome);
    rvx__tl_ep_t *ep = d->ep;
    uint64_t b;
    if (!d->failed) {
        d->failed = 1;
        rvx__log("dc_mlx5: operation to rank %d failed: %s (syndrome 0x%x, vendor 0x%x, DCI 0x%x "
                 "WQE %u): the endpoint is marked failed, the DCI recovers", ep ? ep->rank : -1,
                 rvx__mlx5_syndrome_str(e->syndrome), e->syndrome, e->vendor_err_synd, d->qpn, idx);
    }
    if (ep && !ep->failed) {
        ep->failed = 1;
        ep->err = e->syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR ? RVX_ERR_CANCELED : st;
    }
    b = rvx__mlx5_tx_req_err(&d->sq, &d->tx, idx, st, rvx__dc_flush_status(d));
    if (b) d->b_tail = b;
    if (d->sq.ci == d->sq.pi) rvx__dc_dci_recover(d);
}

/* ---- the CQ poll ---------------------------------------------------------------------------- */

RVX_COLD rvx__dc_dci_t *rvx__dc_dci_of(rvx__tl_iface_t *ifc, uint32_t qpn)
{
    unsigned i;
    for (i = 0; i < RVX_DC_NUM_DCI; i++)
        if (ifc->dci[i].qpn == qpn) return &ifc->dci[i];
    return NULL;
}

/* Pending worker flushes complete once every DCI has retired what was posted before them. */
RVX_COLD void rvx__dc_wflush_check(rvx__tl_iface_t *ifc)
{
    unsigned i;
    for (i = 0; i < RVX_DC_NUM_DCI; i++)
        if ((int32_t)(ifc->dci[i].sq.ci - ifc->dci[i].wflush_pi) < 0) return;
    rvx__mlx5_wflush_done(&ifc->wflush);
}

/* Handle every CQE present; returns how many. */
RVX_COLD int rvx__dc_drain(rvx__tl_iface_t *ifc)
{
    int n = 0;
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
        d = rvx__dc_dci_of(ifc, qpn);
        rvx__mlx5_cq_advance(&ifc->cq);
        n++;
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

RVX_COLD int rvx__dc_progress_slow(rvx__tl_iface_t *ifc)
{
    return rvx__dc_drain(ifc);
}

/* ---- the pool and waiting ------------------------------------------------------------------- */

/* A signaled NOP after an unsignaled tail (not on a failed DCI: its WQEs come back anyway). */
RVX_COLD void rvx__dc_sig_tail(rvx__dc_dci_t *d)
{
    if (!d->failed) rvx__mlx5_tx_sig_tail(&d->sq, &d->tx);
}

/* A DCI for ep: one no one holds (idle ones first), else one whose holder's work has all
 * completed (taken from it). NULL: every DCI holds outstanding work. */
RVX_COLD rvx__dc_dci_t *rvx__dc_pick(rvx__tl_iface_t *ifc)
{
    rvx__dc_dci_t *busy_free = NULL, *idle_held = NULL;
    unsigned k;
    for (k = 0; k < RVX_DC_NUM_DCI; k++) {
        rvx__dc_dci_t *d = &ifc->dci[(ifc->next_dci + k) % RVX_DC_NUM_DCI];
        int idle = d->sq.ci == d->sq.pi;
        if (d->failed) continue;
        if (!d->ep && idle) { idle_held = NULL; busy_free = d; break; }
        if (!d->ep && !busy_free) busy_free = d;
        if (d->ep && idle && !idle_held && !d->tx.flush_head) idle_held = d;
    }
    if (!busy_free && idle_held) {
        idle_held->ep->dci = NULL; /* its holder's work is complete: it takes another next time */
        idle_held->ep = NULL;
        busy_free = idle_held;
        ifc->dci_taken++;
    }
    if (busy_free) ifc->next_dci = (unsigned)(busy_free - ifc->dci + 1) % RVX_DC_NUM_DCI;
    return busy_free;
}

/* The endpoint's DCI with room for nbb WQEBBs: its own (waiting for room), or one from the pool
 * (waiting, when every DCI holds outstanding work, until one has retired it all). NULL: the
 * endpoint has failed and holds no DCI. */
RVX_COLD rvx__dc_dci_t *rvx__dc_get_slow(rvx__tl_ep_t *ep, uint32_t nbb)
{
    rvx__tl_iface_t *ifc = ep->ifc;
    unsigned spins = 0, k;
    int counted = 0;
    for (;;) {
        rvx__dc_dci_t *d = ep->dci;
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
        if (d && !rvx__mlx5_sq_full(&d->sq, nbb)) return d;
        /* something must be signaled, or no CQE would ever free a queue */
        if (d) { rvx__dc_sig_tail(d); rvx__dc_hold(d); }
        else for (k = 0; k < RVX_DC_NUM_DCI; k++) { rvx__dc_sig_tail(&ifc->dci[k]); rvx__dc_hold(&ifc->dci[k]); }
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

RVX_COLD uint8_t *rvx__dc_bounce_wait(rvx__dc_dci_t *d, size_t len)
{
    unsigned spins = 0;
    for (;;) {
        uint64_t pos = d->b_head, off = pos % RVX_DC_BOUNCE_BYTES;
        if (off + len > RVX_DC_BOUNCE_BYTES) { pos += RVX_DC_BOUNCE_BYTES - off; off = 0; }
        if (pos + len - d->b_tail <= RVX_DC_BOUNCE_BYTES) {
            d->b_head = pos + len;
            return d->bounce + off;
        }
        /* failed, or recovered meanwhile and no longer the caller's: the endpoint has failed */
        if (d->failed || !d->ep) return NULL;
        rvx__dc_sig_tail(d);
        if (d->sq.ci == d->sq.pi) d->b_tail = d->b_head; /* nothing in flight: all of it is free */
        else if (rvx__dc_drain(d->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

RVX_COLD rvx_status_t rvx__dc_wait_req(rvx__tl_iface_t *ifc, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

/* MULT, MIN, MAX, UMIN, UMAX: read, compute, compare-and-swap until no one else changed it. */
RVX_COLD rvx_status_t rvx__dc_amo_loop(rvx__tl_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                       uint64_t v, uint64_t raddr, const rvx_rkey_t *rkey,
                                       void *fetch)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, old = 0, seen = 0, nv;
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned cs = size == 8 ? MLX5_OPCODE_ATOMIC_CS : MLX5_OPCODE_ATOMIC_MASKED_CS;
    rvx_status_t st = rvx__dc_amo(ep, fa, size, 0, 0, 0, 0, raddr, rkey, &old, NULL);
    while (st == RVX_OK) {
        if (!rvx__mlx5_amo_next(op, size, old, v, &nv)) return RVX_ERR_INVALID_PARAM;
        seen = 0;
        st = rvx__dc_amo(ep, cs, size, nv, old, ones, ones, raddr, rkey, &seen, NULL);
        if (st != RVX_OK || (seen & ones) == (old & ones)) break;
        old = seen;
    }
    if (st == RVX_OK && fetch) {
        if (size == 8) *(uint64_t *)fetch = old;
        else *(uint32_t *)fetch = (uint32_t)old;
    }
    return st;
}

/* ---- flush ---------------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__dc_flush_slow(rvx__tl_ep_t *ep, rvx_request_t *req)
{
    rvx__dc_dci_t *d;
    rvx__dc_drain(ep->ifc);
    d = ep->dci;
    if (!d || d->sq.ci == d->sq.pi) return ep->err;
    if (d->failed) rvx__dc_hold(d); /* every WQE comes back with an error CQE */
    else rvx__dc_sig_tail(d);
    if (!req) return RVX_ERR_INVALID_PARAM;
    rvx__mlx5_tx_flush_add(&d->tx, req, d->sq.pi);
    return RVX_INPROGRESS;
}

/* Every DCI in use retires what it holds; the pool is a few DCIs, whatever the job's size. */
RVX_COLD rvx_status_t rvx__tl_iface_flush(rvx__tl_iface_t *ifc, rvx_request_t *req)
{
    unsigned i;
    int busy = 0;
    rvx__dc_drain(ifc);
    for (i = 0; i < RVX_DC_NUM_DCI; i++) {
        rvx__dc_dci_t *d = &ifc->dci[i];
        if (d->sq.ci == d->sq.pi) continue;
        if (d->failed) rvx__dc_hold(d);
        else rvx__dc_sig_tail(d);
        d->wflush_pi = d->sq.pi;
        busy = 1;
    }
    if (!busy) return RVX_OK;
    if (!req) return RVX_ERR_INVALID_PARAM;
    req->status = RVX_INPROGRESS;
    req->tl_private[0] = (uint64_t)(uintptr_t)ifc->wflush;
    ifc->wflush = req;
    return RVX_INPROGRESS;
}

/* ---- liveness ------------------------------------------------------------------------------- */

/* A peer that died is noticed when a WQE to it runs out of retries (the DCI's error CQE). */
RVX_COLD rvx_status_t rvx__tl_ep_alive(rvx__tl_ep_t *ep)
{
    if (ep->failed) return rvx__dc_ep_status(ep);
    rvx__dc_drain(ep->ifc);
    return ep->failed ? rvx__dc_ep_status(ep) : RVX_OK;
}

RVX_COLD void *rvx__tl_am_wait_room(rvx__tl_ep_t *ep, unsigned chan, size_t len)
{
    (void)ep; (void)chan; (void)len;
    return NULL;
}

#endif /* RVX_TL_DC_POLL_H */
