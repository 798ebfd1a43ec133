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
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    return d->failed ? d->fail_st : RVX_OK; /* shared: a flush pending on it reports its error */
#else
    return d->ep ? (rvx_status_t)d->ep->err : RVX_OK;
#endif
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
    rvx__dc_fast_limit(d);
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
        if (ep || !rvx__dc_gone_synd(e->syndrome))
            rvx__log("dc_mlx5: operation to rank %d failed: %s (syndrome 0x%x, vendor 0x%x, DCI "
                     "0x%x WQE %u): the endpoint is marked failed, the DCI recovers",
                     ep ? ep->rank : -1, rvx__mlx5_syndrome_str(e->syndrome), e->syndrome,
                     e->vendor_err_synd, d->qpn, idx);
    }
    if (ep && !ep->failed) {
        ep->failed = 1;
        ep->err = (int8_t)(e->syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR ? RVX_ERR_CANCELED : st);
    }
    b = rvx__mlx5_tx_req_err(&d->sq, &d->tx, idx, st, rvx__dc_flush_status(d));
    if (b) d->b_tail = b;
    rvx__dc_fast_limit(d);
    if (d->sq.ci == d->sq.pi) rvx__dc_dci_recover(d);
}

/* ---- the CQ poll ---------------------------------------------------------------------------- */

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
    rvx__mlx5_wflush_done(&ifc->wflush);
}

#if RVX_CAN_RECEIVE
RVX_COLD void rvx__dc_rx(rvx__dc_iface_t *ifc, const struct mlx5_cqe64 *cqe, unsigned opcode,
                         int deliver);
#endif

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

#if RVX_CAN_RECEIVE
RVX_COLD int rvx__dc_deliver_deferred(rvx__dc_iface_t *ifc);
#endif

#if RVX_CAN_RECEIVE
RVX_COLD void rvx__dc_tick(rvx__dc_iface_t *ifc);
#endif

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

/* ---- the pool and waiting ------------------------------------------------------------------- */

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
 * for the retries. NULL: none is free. */
RVX_COLD rvx__dc_dci_t *rvx__dc_pick(rvx__dc_iface_t *ifc)
{
    rvx__dc_dci_t *free_d = NULL, *idle_held = NULL, *orphan = NULL;
    unsigned k;
    for (k = 0; k < RVX_DC_NUM_DCI; k++) {
        rvx__dc_dci_t *d = &ifc->dci[(ifc->next_dci + k) % RVX_DC_NUM_DCI];
        int idle = d->sq.ci == d->sq.pi;
        if (d->failed) continue;
        if (!d->ep && idle) { idle_held = NULL; free_d = d; break; }
        if (!d->ep && !orphan) orphan = d;
        if (d->ep && idle && !idle_held && !d->tx.flush_head && !d->am_claim) idle_held = d;
    }
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
        if (d && !rvx__mlx5_sq_full(&d->sq, nbb)) return d;
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

/* A transfer stops early: its endpoint failed. The chunks it posted on DCI d come back first (a
 * failed DCI returns every WQE, then recovers), so that none of them names req, perhaps the
 * caller's stack, once this returns. */
RVX_COLD rvx_status_t rvx__dc_stop(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, rvx_request_t *req)
{
    unsigned spins = 0;
    while (d && d->failed && d->sq.ci != d->sq.pi) {
        rvx__dc_hold(d);
        if (rvx__dc_drain(ep->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)(req->status = rvx__dc_ep_status(ep));
}

RVX_COLD rvx_status_t rvx__dc_wait_req(rvx__dc_iface_t *ifc, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (rvx__dc_drain(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

/* MULT, MIN, MAX, UMIN, UMAX: read, compute, compare-and-swap until no one else changed it. */
RVX_COLD rvx_status_t rvx__dc_amo_loop(rvx__dc_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                       uint64_t v, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
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

RVX_COLD rvx_status_t rvx__dc_flush_slow(rvx__dc_ep_t *ep, rvx_request_t *req)
{
    rvx__dc_dci_t *d;
    rvx__dc_drain(ep->ifc);
    d = ep->dci;
    if (!d || d->sq.ci == d->sq.pi) return (rvx_status_t)ep->err;
    if (d->failed) rvx__dc_hold(d); /* every WQE comes back with an error CQE */
    else rvx__dc_sig_tail(d);
    if (!req) return RVX_ERR_INVALID_PARAM;
    rvx__mlx5_tx_flush_add(&d->tx, req, d->sq.pi);
    return RVX_INPROGRESS;
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

/* A zero-length WRITE to the peer's control region, signaled: its completion shows the peer's
 * DCT still answers, its error CQE fails the endpoint. No data segment (a zero-length one would
 * mean 2 GiB to the NIC). */
RVX_COLD void rvx__dc_keepalive(rvx__dc_ep_t *ep)
{
    unsigned ds = 2 + rvx__dc_av_ds(ep->ifc), flags;
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
    rvx__mlx5_set_raddr(seg, a->ctrl_addr, &k);
    rvx__mlx5_zero_pad(&d->sq, rvx__mlx5_next_seg(&d->sq, seg), 0, nbb * 4 - ds);
    rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    d->ka_ep = ep;
    d->ka_pi = pi + nbb;
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
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

/* A reply waits here for a credit (from a handler: progress is refused there). The wait does
 * what progress would for the credits: the drain takes frames off the SRQ (requests go aside,
 * counted taken) and the tick reports what was taken and gives back idle credits, so a peer
 * waiting in a handler of its own for this worker's reports or pool gets them (see below). */
RVX_COLD void *rvx__dc_am_wait_room(rvx__dc_ep_t *ep, unsigned chan, size_t len)
{
#if RVX_CAN_RECEIVE
    unsigned spins = 0;
    void *body;
    while (!(body = rvx__dc_am_claim(ep, chan, len))) {
        if (ep->failed) return NULL;
        if (rvx__dc_drain(ep->ifc)) spins = 0;
        else rvx__backoff(&spins);
        rvx__dc_tick(ep->ifc);
        /* once the wait sleeps, each round asks whether the peer lives (its keepalive, at
         * most every 100 ms, fails within the retries): a time, not a count of rounds */
        if (spins > RVX__BACKOFF_SLEEPING && rvx__dc_ep_alive(ep) != RVX_OK) return NULL;
    }
    return body;
#else
    (void)ep; (void)chan; (void)len;
    return NULL;
#endif
}

/* ---- messages: credits ---------------------------------------------------------------------- */

#if RVX_CAN_RECEIVE
/* Why no sender overruns a receiver R's shared receive queue, and why credits come back.
 *   R posts D = RVX_DC_RX_DEPTH buffers; a buffer goes back to the SRQ once its frame has been
 *   handled, before R counts the frame taken. Word 0 of R's control region, the pool P, starts at
 *   D and is changed only by senders' NIC atomics, which R's NIC applies one at a time.
 *   A sender s holds C_s credits (its own count), has sent S_s frames, R has taken T_s of them and
 *   s knows K_s <= T_s (reports only grow, and a report is R's count of s's own frames: a
 *   prefix carries one only with RVX__DC_PRE_REPORT; a count for another sender would break
 *   K_s <= T_s, and with it everything below). s sends only while S_s < K_s + C_s, so its
 *   frames in R's SRQ, S_s - T_s <= S_s - K_s, never exceed C_s; and P + sum(C_s) <= D: every
 *   claim and give-back below keeps that sum from rising above D while an atomic is in flight.
 *   Claim: fetch-add of -n on P. If the old value was below n the sender keeps what was there
 *   (possibly nothing) and adds the rest back; meanwhile P reads low (even negative), so a
 *   concurrent claim gets less, never more. C_s grows only after the answer.
 *   Give-back: s first lowers C_s by its unused credits U = K_s + C_s - S_s (and its limit to
 *   S_s), then adds U to P. It keeps C_s' = S_s - K_s >= S_s - T_s: the buffers of frames R may
 *   still hold. A give-back racing a claim (of s or anyone) is two additions to one word, applied
 *   in some order: both orders keep the sum.
 *   So all senders' frames in R's SRQ total at most sum(C_s) <= D: no RNR in normal operation.
 *   And credits do not stay with an idle sender: R reports the frames it took (prefix of its own
 *   messages, an inline WRITE every half batch, and at every sweep those not yet reported), and a
 *   sender gives back what it holds at a peer it sent nothing to for a sweep interval, or at once
 *   when one of its own claims finds a pool empty (the others' waits may be on it); credits that
 *   covered frames in flight go at a later sweep, once the reports show them taken. A sender that
 *   finds a pool empty retries after a growing wait (20 us, doubled up to 5 ms).
 * Why a sender waiting for credits at R gets them once R progresses (no deadlock). Every place a
 *   worker waits for a peer (rvx_progress, and a reply's wait in rvx__dc_am_wait_room) polls its
 *   CQ, which takes every frame that arrived off the SRQ and counts it taken, even when a handler
 *   may not run (requests are copied aside), and ticks: within a sweep interval R reports every
 *   count not yet reported (a WRITE, which needs no receive buffer) and gives back credits of its
 *   own endpoints that sent nothing since the last sweep. So, for s waiting at R:
 *   - if C_s covers frames not yet reported, R takes them and reports them: K_s reaches S_s and
 *     s has C_s free credits;
 *   - if C_s is 0 and P is empty, every credit of R's is held by a sender that either has unused
 *     ones, given back at its next tick (a waiting sender sends nothing, so it is idle; a sender
 *     whose own claim fails gives back at once), or ones covering frames R will report as above,
 *     after which they are unused; s's next claim (within 5 ms) finds them. (A sender that
 *     keeps sending to R keeps its credits: s waits until it pauses, the fairness the docs
 *     state; its frames are taken all the while, so that is no deadlock.)
 *   A reply from a handler waits like this and never needs a handler of R's to return: the
 *   reports and give-backs it waits for are made by polls and ticks, which run inside R's
 *   handlers' own waits too. What no scheme can cover is a peer that stops calling into rvx. */

/* The peer's control region as a key (its word 0 is the pool, word 1 + r rank r's credits). */
RVX_INLINE void rvx__dc_ctrl_key(const rvx__dc_ep_t *ep, rvx__mlx5_rkey_t *k)
{
    k->rkey_word = (uint64_t)rvx_htobe32(rvx__dc_addr_of(ep)->ctrl_rkey);
    k->base = rvx__dc_addr_of(ep)->ctrl_addr;
    k->len = 8 * (2 * (uint64_t)ep->ifc->nranks + 1);
}

/* The worker's records of endpoints that hold credits at their peer (the sweep walks them): one
 * per such endpoint, in an array that grows (doubling) and is never walked per rank. Returns 0
 * when there is no memory for another record: the caller gives the credits back at once. */
RVX_COLD int rvx__dc_hold_add(rvx__dc_ep_t *ep)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    rvx__dc_hold_t *h;
    if (ep->holding) return 1;
    if (ifc->nholders == ifc->cap_holders) {
        unsigned cap = ifc->cap_holders ? 2 * ifc->cap_holders : 8;
        h = (rvx__dc_hold_t *)realloc(ifc->holders, cap * sizeof(*h));
        if (!h) return 0;
        ifc->holders = h;
        ifc->cap_holders = cap;
    }
    h = &ifc->holders[ifc->nholders++];
    h->ep = ep;
    h->mark = rvx__dc_tx_sent(ep);
    h->pad = 0;
    ep->holding = 1;
    return 1;
}

/* The record at index i goes (the last one takes its place). */
RVX_COLD void rvx__dc_hold_drop(rvx__dc_iface_t *ifc, unsigned i)
{
    ifc->holders[i].ep->holding = 0;
    ifc->holders[i] = ifc->holders[--ifc->nholders];
}

RVX_COLD void rvx__dc_hold_del(rvx__dc_ep_t *ep)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    unsigned i;
    if (!ep->holding) return;
    for (i = 0; i < ifc->nholders; i++)
        if (ifc->holders[i].ep == ep) {
            rvx__dc_hold_drop(ifc, i);
            return;
        }
}

/* The back-off record of a rank (NULL: none, claims on it may go). */
RVX_COLD rvx__dc_backoff_t *rvx__dc_backoff_of(rvx__dc_iface_t *ifc, int rank)
{
    unsigned i;
    for (i = 0; i < ifc->nbackoff; i++)
        if (ifc->backoff[i].rank == rank) return &ifc->backoff[i];
    return NULL;
}

/* A claim on the rank's pool found it empty: the next waits 20 us, doubling up to 5 ms. Without
 * memory for a record, no wait (claims are only more frequent). */
RVX_COLD void rvx__dc_backoff_add(rvx__dc_iface_t *ifc, int rank)
{
    rvx__dc_backoff_t *b = rvx__dc_backoff_of(ifc, rank);
    if (!b) {
        if (ifc->nbackoff == ifc->cap_backoff) {
            unsigned cap = ifc->cap_backoff ? 2 * ifc->cap_backoff : 4;
            b = (rvx__dc_backoff_t *)realloc(ifc->backoff, cap * sizeof(*b));
            if (!b) return;
            ifc->backoff = b;
            ifc->cap_backoff = cap;
        }
        b = &ifc->backoff[ifc->nbackoff++];
        b->rank = rank;
        b->pad = 0;
        b->gap = 0;
    }
    b->gap = b->gap == 0 ? 20e-6 : b->gap < 5e-3 ? 2 * b->gap : 5e-3;
    b->after = rvx__now_s() + b->gap;
}

/* A claim on the rank's pool succeeded: no more waiting. */
RVX_COLD void rvx__dc_backoff_del(rvx__dc_iface_t *ifc, int rank)
{
    rvx__dc_backoff_t *b = rvx__dc_backoff_of(ifc, rank);
    if (b) *b = ifc->backoff[--ifc->nbackoff];
}

/* Add v to the peer's pool (a NIC fetch-add, unsignaled, nothing waited for). */
RVX_COLD void rvx__dc_pool_add(rvx__dc_ep_t *ep, uint64_t v)
{
    rvx__mlx5_rkey_t k;
    rvx__dc_ctrl_key(ep, &k);
    (void)rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_FA, 8, v, 0, 0, 0, k.base, &k, NULL, NULL);
}

/* Take up to `want` credits from the peer's pool by fetch-add (one round trip); what the pool
 * could not give goes straight back. Returns the credits taken (0: the pool was empty, or the
 * endpoint failed). */
RVX_COLD uint32_t rvx__dc_claim(rvx__dc_ep_t *ep, uint32_t want)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    rvx__dc_peer_t *p = &ifc->peers[ep->rank];
    uint64_t old = 0;
    uint32_t got;
    rvx__mlx5_rkey_t k;
    rvx__dc_ctrl_key(ep, &k);
    ifc->claims++;
    if (rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_FA, 8, (uint64_t)0 - want, 0, 0, 0, k.base, &k,
                    &old, NULL) != RVX_OK)
        return 0; /* failed: whatever it took goes with the endpoint */
    got = (int64_t)old <= 0 ? 0u : (uint64_t)old < want ? (uint32_t)old : want;
    if (got < want) rvx__dc_pool_add(ep, want - got);
    if (!got) {
        ifc->claim_fails++;
        return 0;
    }
    p->claimed += got;
    if (!rvx__dc_hold_add(ep)) { /* no record, so no sweep would give them back: now */
        p->claimed -= got;
        rvx__dc_pool_add(ep, got);
        return 0;
    }
    return got;
}

/* Give back the credits the endpoint holds beyond its frames the peer may still hold. Returns 1
 * once it holds none (or failed): its holder's record may go. */
RVX_COLD int rvx__dc_release(rvx__dc_ep_t *ep)
{
    rvx__dc_peer_t *p = &ep->ifc->peers[ep->rank];
    uint32_t unused;
    if (ep->failed) return 1;
    rvx__dc_refresh(ep);
    unused = ep->tx_left;
    if (unused) {
        p->claimed -= unused; /* before the pool sees them */
        ep->tx_limit -= unused;
        ep->tx_left = 0;
        ep->ifc->released += unused;
        rvx__dc_pool_add(ep, unused);
    }
    return !p->claimed;
}

/* Holding less than a batch and no credit left: claim the rest (not again soon after a claim
 * that found the pool empty). */
RVX_COLD void rvx__dc_sweep(rvx__dc_iface_t *ifc, const rvx__dc_ep_t *keep, int all);
RVX_COLD int rvx__dc_credit_claim(rvx__dc_ep_t *ep)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    rvx__dc_peer_t *p = &ifc->peers[ep->rank];
    const rvx__dc_backoff_t *b;
    if (p->claimed >= RVX_DC_AM_CREDITS) return 0; /* the peer has them all: wait for reports */
    b = ifc->nbackoff ? rvx__dc_backoff_of(ifc, ep->rank) : NULL;
    if (b && rvx__now_s() < b->after) return 0;
    if (rvx__dc_claim(ep, RVX_DC_AM_CREDITS - p->claimed)) {
        if (ifc->nbackoff) rvx__dc_backoff_del(ifc, ep->rank);
        rvx__dc_refresh(ep); /* the claim waited: a nested call may have sent or claimed too */
    } else if (!ep->failed) {
        /* the pool is empty: what this worker holds elsewhere goes back (another worker's wait
         * may be on it, as this one waits), and the next claim waits a while */
        rvx__dc_sweep(ifc, ep, 1);
        rvx__dc_backoff_add(ifc, ep->rank);
    }
    return ep->tx_left != 0;
}

/* No cached credit: what the peer reported since (the common case, short), else a claim. */
RVX_COLD int rvx__dc_credit_slow(rvx__dc_ep_t *ep)
{
    if (ep->failed) return 0;
    rvx__dc_refresh(ep);
    if (RVX_LIKELY(ep->tx_left != 0)) return 1;
    return rvx__dc_credit_claim(ep);
}

/* Frames of rank r's taken off the SRQ here. */
RVX_INLINE uint64_t *rvx__dc_taken(rvx__dc_iface_t *ifc, int r)
{
    return &ifc->ctrl[1 + (size_t)ifc->nranks + (size_t)r];
}

/* Tell the peer how many of its frames we took: an 8-byte inline WRITE into its control region
 * (it needs no receive buffer, so credits always flow). */
RVX_COLD void rvx__dc_credit_return(rvx__dc_ep_t *ep)
{
    rvx__dc_peer_t *p = &ep->ifc->peers[ep->rank];
    uint64_t v = *rvx__dc_taken(ep->ifc, ep->rank);
    rvx__mlx5_rkey_t k;
    if (ep->failed) return;
    rvx__dc_ctrl_key(ep, &k);
    p->rx_reported = (uint32_t)v;
    rvx__dc_put_inline(ep, &v, 8, k.base + 8 * (1 + (uint64_t)ep->ifc->rank), &k);
}

/* Reports of frames taken here not told yet; then the credits of endpoints that sent nothing
 * since the last sweep (all = 1: of every endpoint but `keep`). Not nested. */
RVX_COLD void rvx__dc_sweep(rvx__dc_iface_t *ifc, const rvx__dc_ep_t *keep, int all)
{
    unsigned i;
    if (ifc->in_sweep) return;
    ifc->in_sweep = 1;
    while (ifc->ndirty) { /* a report may poll, and the poll add ranks: taken from the end */
        int r = ifc->dirty[--ifc->ndirty];
        rvx__dc_ep_t *e = ifc->eps[r];
        ifc->peers[r].dirty = 0;
        if (e && (uint32_t)*rvx__dc_taken(ifc, r) != ifc->peers[r].rx_reported)
            rvx__dc_credit_return(e); /* no endpoint: reported when one is created */
    }
    /* from the end: a release drops its own record (the last takes its place, already seen);
     * polls inside a release neither add nor remove records */
    for (i = ifc->nholders; i-- > 0;) {
        rvx__dc_hold_t *h = &ifc->holders[i];
        rvx__dc_ep_t *ep = h->ep;
        uint32_t sent = rvx__dc_tx_sent(ep);
        if (ep == keep) continue;
        if (!all && sent != h->mark) {
            h->mark = sent;
            continue;
        }
        if (!rvx__dc_release(ep)) continue;
        if (i < ifc->nholders && ifc->holders[i].ep == ep) rvx__dc_hold_drop(ifc, i);
        else rvx__dc_hold_del(ep);
    }
    ifc->in_sweep = 0;
}

/* From progress: a sweep once per RVX_DC_CREDIT_IDLE_US, when there is anything to sweep. */
RVX_COLD void rvx__dc_tick(rvx__dc_iface_t *ifc)
{
    double now;
    if (!ifc->nholders && !ifc->ndirty) return;
    now = rvx__now_s();
    if (now - ifc->sweep_t < RVX_DC_CREDIT_IDLE_US * 1e-6) return;
    ifc->sweep_t = now;
    rvx__dc_sweep(ifc, NULL, 0);
}

/* At endpoint destruction every credit goes back at once, with nothing waited for and nothing
 * read from the peer (which may have left already): the unused ones, and those covering frames
 * the peer has not reported yet. The pool's fetch-add goes on the endpoint's DCI after its SENDs,
 * so when the peer's NIC adds them those frames are in its receive buffers; until its CPU takes
 * them the pool may promise those buffers twice (an RNR NAK at worst, retried: rnr_retry 7). The
 * frames sent so far count as paid for: a later endpoint ignores their reports
 * (rvx__dc_ep_connect). A failed endpoint keeps what it holds (the peer may be gone). */
RVX_COLD void rvx__dc_give_back(rvx__dc_ep_t *ep)
{
    rvx__dc_peer_t *p = &ep->ifc->peers[ep->rank];
    ep->ifc->closing = 1;
    (void)rvx__dc_release(ep);
    if (!ep->failed && p->claimed) {
        uint32_t held = p->claimed;
        p->claimed = 0;
        ep->ifc->released += held;
        rvx__dc_pool_add(ep, held);
    }
    ep->ifc->closing = 0;
    rvx__dc_hold_del(ep);
}

/* A frame of the peer's was taken off the SRQ: its credit goes back every half batch (sooner
 * when a message to the peer carries it, or at the next sweep). */
RVX_COLD void rvx__dc_rx_taken(rvx__dc_iface_t *ifc, int rank)
{
    uint64_t *t = rvx__dc_taken(ifc, rank);
    rvx__dc_ep_t *ep = ifc->eps[rank];
    ++*t;
    if (ep && (uint32_t)*t - ifc->peers[rank].rx_reported >= RVX_DC_AM_CREDITS / 2) {
        rvx__dc_credit_return(ep);
    } else if (!ifc->peers[rank].dirty) {
        ifc->peers[rank].dirty = 1;
        ifc->dirty[ifc->ndirty++] = rank;
    }
}

/* ---- messages: receiving -------------------------------------------------------------------- */

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

#endif /* RVX_TL_DC_POLL_H */
