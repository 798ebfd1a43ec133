/* rvx/tl/rc/send.h: rc_mlx5's send queue: room for a WQE (the hot check, and the cold wait), the
 * book-keeping of signaled WQEs, the worker's send budget, and waiting for a request.
 *
 * Send queue. One WQE per operation; one in RVX_MLX5_SIG_EVERY is signaled (and every WQE that
 * carries a request, a copy-out or bounce memory to give back). Each WQEBB slot has an `ops` entry
 * that the CQE handler consults, so the hot path touches only the WQE, the counters, the doorbell
 * record and the register. A full queue is handled inside the call: it polls the CQ until a slot
 * frees (or the endpoint fails), so puts never return RVX_ERR_NO_RESOURCE.
 *
 * Send budget. All QPs of a worker together have at most RVX_MLX5_TX_BUDGET WQEBBs outstanding:
 * a conn holds a grant g from the worker's budget (sq.room = g - 1, the last WQEBB kept for a
 * flush NOP; no grant: room 0), so the put path's one check against sq.pi_limit (at most
 * ci + room: mlx5/sq.h) is the budget check too. A conn whose grant is used up takes more in the cold path (doubling, up
 * to what its queue holds); when the budget is short, idle conns give theirs back and busy ones
 * what they do not use; failing that the call polls the CQ, as for a full queue. */
#ifndef RVX_TL_RC_SEND_H
#define RVX_TL_RC_SEND_H

/* Make sure nbb WQEBBs are free (the CQ is polled in the cold path until they are) and a held
 * conn is back in the flush list. The room itself, not the fast paths' limit: the WQE that asks
 * for a completion needs no wait. */
#define RVX__RC_NEED(c, nbb) \
    if (RVX_UNLIKELY(!rvx__mlx5_sq_room_for(&(c)->sq, (nbb)) || (c)->sq.hold)) \
        rvx__rc_wait_room((c), (nbb))

/* Book-keeping of a signaled WQE that starts at pi and ends at end. */
RVX_INLINE void rvx__rc_mark_sig(rvx__rc_conn_t *c, uint32_t pi, uint32_t end)
{
    rvx__mlx5_tx_mark_sig(&c->sq, &c->tx, pi, end);
}

/* What the CQE handler does when the WQE at pi retires. */
RVX_INLINE void rvx__rc_on_retire(rvx__rc_conn_t *c, uint32_t pi, const rvx__mlx5_op_t *o)
{
    rvx__mlx5_tx_on_retire(&c->sq, &c->tx, pi, o);
}

/* A failed QP completes every WQE it holds with an error CQE, signaled or not: make sure progress
 * keeps polling until they have all come, even where only signaled work would make it poll. */
RVX_COLD void rvx__rc_hold(rvx__rc_conn_t *c)
{
    if (c->failed) rvx__mlx5_tx_hold(&c->sq, &c->tx);
}

/* A signaled NOP after an unsignaled tail (tl/mlx5/tx.h). */
RVX_COLD void rvx__rc_sig_tail(rvx__rc_conn_t *c)
{
    rvx__mlx5_tx_sig_tail(&c->sq, &c->tx);
}

/* ---- the send budget ------------------------------------------------------------------------ */

/* The conn's grant is g (0: none): room and the limit the put path checks follow. */
RVX_COLD void rvx__rc_grant_set(rvx__rc_iface_t *ifc, unsigned i, uint32_t g)
{
    rvx__rc_conn_t *c = ifc->holders[i];
    ifc->holder_g[i] = g;
    c->sq.room = (uint16_t)(g ? g - 1 : 0);
    rvx__mlx5_sq_restop(&c->sq);
    if (!g) { /* no longer a holder */
        ifc->nholders--;
        ifc->holders[i] = ifc->holders[ifc->nholders];
        ifc->holder_g[i] = ifc->holder_g[ifc->nholders];
    }
}

/* Where c is in the holders (at most RVX__RC_HOLDERS), or -1. */
RVX_COLD int rvx__rc_holder_of(const rvx__rc_iface_t *ifc, const rvx__rc_conn_t *c)
{
    unsigned i;
    for (i = 0; i < ifc->nholders; i++)
        if (ifc->holders[i] == c) return (int)i;
    return -1;
}

/* The budget is short: idle holders give their grant back, busy ones what they do not use (the
 * WQEBBs outstanding and one for a NOP stay), and post a signaled NOP so that a CQE retires their
 * work. Only holders are looked at, never every peer. */
RVX_COLD void rvx__rc_grant_reclaim(rvx__rc_iface_t *ifc, const rvx__rc_conn_t *except)
{
    unsigned i = 0;
    while (i < ifc->nholders) {
        rvx__rc_conn_t *h = ifc->holders[i];
        uint32_t g = ifc->holder_g[i], used = h->sq.pi - h->sq.ci;
        uint32_t keep = used ? (used + 1 + RVX__RC_GRANT - 1) / RVX__RC_GRANT * RVX__RC_GRANT : 0;
        if (h == except || keep >= g) {
            if (h != except && used) { rvx__rc_sig_tail(h); rvx__rc_hold(h); }
            i++;
            continue;
        }
        ifc->tx_free += g - keep;
        rvx__rc_grant_set(ifc, i, keep);
        if (keep) { /* still a holder: its tail must be signaled (it keeps room for the NOP) */
            rvx__rc_sig_tail(h);
            rvx__rc_hold(h);
            i++;
        }
    }
}

/* c needs room for nbb more WQEBBs: a larger grant (twice the last, at most what its queue holds,
 * at least enough), from the budget, taken back from other holders if it is short. 1: done. */
RVX_COLD int rvx__rc_grant_grow(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t nbb)
{
    uint32_t cap = (c->sq.mask + 1 - RVX__RC_SQ_RESERVE) / RVX__RC_GRANT * RVX__RC_GRANT;
    uint32_t need = c->sq.pi - c->sq.ci + nbb + 1, g, want, more;
    int i = rvx__rc_holder_of(ifc, c);
    g = i >= 0 ? ifc->holder_g[i] : 0;
    need = (need + RVX__RC_GRANT - 1) / RVX__RC_GRANT * RVX__RC_GRANT;
    if (need > cap) return 0; /* the queue itself is full: only CQEs help */
    want = 2 * g > need ? 2 * g : need;
    if (want > cap) want = cap;
    if (ifc->tx_free < want - g) rvx__rc_grant_reclaim(ifc, c);
    more = ifc->tx_free / RVX__RC_GRANT * RVX__RC_GRANT;
    if (more < want - g) want = g + more;
    if (want < need) return 0;
    if (i < 0) {
        i = (int)ifc->nholders++;
        ifc->holders[i] = c;
    }
    ifc->tx_free -= want - g;
    rvx__rc_grant_set(ifc, (unsigned)i, want);
    return 1;
}

/* The conn took a new QP (rvx__rc_adopt): the old one is quiet, so the grant stays with the
 * conn. A connected conn is about to send a hello outside the data path's checks: it needs a
 * grant, waited for if the budget is short. */
RVX_COLD void rvx__rc_grant_adopt(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    int i = rvx__rc_holder_of(ifc, c);
    unsigned spins = 0;
    c->sq.room = 0;
    rvx__mlx5_sq_restop(&c->sq);
    if (i >= 0) rvx__rc_grant_set(ifc, (unsigned)i, ifc->holder_g[i]);
    else if (c->connected)
        while (!rvx__rc_grant_grow(ifc, c, 1)) {
            if (rvx__rc_poll_blocking(ifc)) spins = 0;
            else rvx__backoff(&spins);
        }
}

/* Room for nbb WQEBBs: a larger grant, else CQEs that retire work (of this conn, or of the
 * holders the budget waits for). */
RVX_COLD void rvx__rc_wait_room(rvx__rc_conn_t *c, uint32_t nbb)
{
    rvx__rc_iface_t *ifc = c->ifc;
    unsigned spins = 0;
    while (!rvx__mlx5_sq_room_for(&c->sq, nbb)) {
        if (rvx__rc_grant_grow(ifc, c, nbb)) break;
        rvx__rc_sig_tail(c); /* something must be signaled, or no CQE would ever free room */
        rvx__rc_hold(c); /* a failed QP frees its queue through error CQEs */
        if (rvx__rc_poll_blocking(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    /* the first post since a flush found the conn idle joins the list; after the polls above,
     * which may have found it idle again and taken it out */
    if (!c->in_wf) rvx__rc_busy(c);
}

/* ---- waiting for a request ------------------------------------------------------------------ */

/* A transfer stops early: its conn failed. The chunks it posted come back first (the failed QP
 * flushes them), so that none of them names req, perhaps the caller's stack, once this returns. */
RVX_COLD rvx_status_t rvx__rc_stop(rvx__rc_conn_t *c, rvx_request_t *req)
{
    unsigned spins = 0;
    rvx__rc_sig_tail(c); /* a CQE after the last chunk, if it was unsignaled */
    while (c->sq.ci != c->sq.pi) {
        if (rvx__rc_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)(req->status = rvx__rc_fail_st(c));
}

/* A request of the call's own: rvx__mlx5_wait_req, over rvx__rc_poll_blocking. */
#include "../mlx5/wait.h"

#endif /* RVX_TL_RC_SEND_H */
