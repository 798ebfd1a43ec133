/* rvx/tl/dc/credit.h: dc_mlx5's credits, sender and receiver side: the claim of a frame (a
 * credit, and room to build it), the send limit from the peer's reports, claims on a peer's pool
 * and their back-off, the give-back of idle credits (the sweep), and the reports of frames taken
 * here. Why the shared receive queue is never overrun is argued below. */
#ifndef RVX_TL_DC_CREDIT_H
#define RVX_TL_DC_CREDIT_H

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

/* ---- the sender's view: frames it may send --------------------------------------------------- */

/* Frames sent to the peer, in all. */
RVX_INLINE uint32_t rvx__dc_tx_sent(const rvx__dc_ep_t *ep)
{
    return ep->tx_limit - ep->tx_left;
}

/* Frames of ours the peer has taken: the larger of what it wrote into our control region and what
 * it said in a message (both only grow), kept between the frames sent less the credits held and
 * the frames sent. A report outside (a faulty or hostile peer's, in either word) would be credits
 * never granted, or a limit behind the frames sent; either wrapped the credits to spend, and
 * their give-back the count of credits held, putting credits into the pool no one took out. */
RVX_INLINE uint32_t rvx__dc_consumed(const rvx__dc_ep_t *ep)
{
    uint32_t w = (uint32_t)((const volatile uint64_t *)ep->ifc->ctrl)[1 + ep->rank];
    uint32_t c = (int32_t)(w - ep->piggy) > 0 ? w : ep->piggy, sent = rvx__dc_tx_sent(ep);
    uint32_t held = ep->ifc->peers[ep->rank].claimed;
    if ((int32_t)(c - sent) > 0) return sent;
    return sent - c > held ? sent - held : c;
}

/* The send limit from the latest reports: frames taken plus credits held. The report taken is
 * kept as the largest so far, so that a word written lower (a faulty or hostile peer's) cannot
 * put the limit behind the frames sent. */
RVX_INLINE void rvx__dc_refresh(rvx__dc_ep_t *ep)
{
    uint32_t sent = rvx__dc_tx_sent(ep);
    ep->piggy = rvx__dc_consumed(ep);
    ep->tx_limit = ep->piggy + ep->ifc->peers[ep->rank].claimed;
    ep->tx_left = ep->tx_limit - sent;
}

/* A credit for one more frame (taken when the frame is published). Room for one more frame at
 * the peer: the cached limit, else (cold) what the peer has returned, or a claim on its pool. A
 * failed endpoint has none. */
RVX_INLINE int rvx__dc_credit(rvx__dc_ep_t *ep)
{
    if (RVX_LIKELY(ep->tx_left != 0)) return 1;
    return rvx__dc_credit_slow(ep);
}

/* Where to write a frame of len bytes, after the 8-byte prefix: small frames are built in the
 * worker's scratch area and go inline; others go from the bounce ring of the endpoint's DCI,
 * which stays the endpoint's until the frame is published. NULL: no credit (or failed). */
RVX_INLINE void *rvx__dc_am_claim(rvx__dc_ep_t *ep, unsigned chan, size_t len)
{
    rvx__dc_dci_t *d;
    uint8_t *b;
    (void)chan;
    if (!rvx__dc_credit(ep)) return NULL;
    if (len + RVX__DC_PREFIX <= RVX__DC_AM_INLINE) return (uint8_t *)ep->ifc->scratch + RVX__DC_PREFIX;
    d = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
    b = d ? rvx__dc_bounce(d, ep, len + RVX__DC_PREFIX) : NULL;
    if (RVX_UNLIKELY(!b)) return NULL; /* failed */
    d->am_claim = 1;
    return b + RVX__DC_PREFIX;
}

/* The claim of the protocols' hot paths (RVX__DC_AM_CLAIM_HOT): the cached credits, else what
 * the peer has reported since (a few loads, no call), else NULL and the caller's cold path claims
 * again with rvx__dc_am_claim (a claim on the peer's pool). A call that returned into the hot
 * path would make it keep a stack frame. */
RVX_INLINE void *rvx__dc_am_claim_hot(rvx__dc_ep_t *ep, unsigned chan, size_t len)
{
    if (len + RVX__DC_PREFIX > RVX__DC_AM_INLINE) return rvx__dc_am_claim(ep, chan, len);
    if (RVX_UNLIKELY(ep->tx_left == 0)) {
        if (ep->failed) return NULL;
        rvx__dc_refresh(ep);
        if (ep->tx_left == 0) return NULL;
    }
    return (uint8_t *)ep->ifc->scratch + RVX__DC_PREFIX;
}
#define RVX__DC_AM_CLAIM_HOT(tl, chan, len) rvx__dc_am_claim_hot((tl), (chan), (len))

/* ---- claims, records and give-back ----------------------------------------------------------- */

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
 * (it needs no receive buffer, so credits always flow). Readers take the count from the word's
 * low 32 bits; once the worker is going every report says so in RVX__DC_LEFT above them
 * (rvx__dc_iface_leave), so a later one cannot take the news back. */
RVX_COLD void rvx__dc_report(rvx__dc_ep_t *ep)
{
    rvx__dc_peer_t *p = &ep->ifc->peers[ep->rank];
    uint64_t v = (uint32_t)*rvx__dc_taken(ep->ifc, ep->rank) | (ep->ifc->leaving ? RVX__DC_LEFT : 0);
    rvx__mlx5_rkey_t k;
    if (ep->failed) return;
    rvx__dc_ctrl_key(ep, &k);
    p->rx_reported = (uint32_t)v;
    rvx__dc_put_inline(ep, &v, 8, k.base + 8 * (1 + (uint64_t)ep->ifc->rank), &k, 0);
}

RVX_COLD void rvx__dc_credit_return(rvx__dc_ep_t *ep) { rvx__dc_report(ep); }

/* Whether rank r's worker has said it is going (its last report). */
RVX_INLINE int rvx__dc_peer_left(const rvx__dc_iface_t *ifc, int r)
{
    return (((const volatile uint64_t *)ifc->ctrl)[1 + r] & RVX__DC_LEFT) != 0;
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

/* At endpoint destruction (or, when the worker goes, behind the endpoint's last report:
 * rvx__dc_iface_leave) every credit goes back at once, with nothing waited for and nothing
 * read from the peer (which may have left already): the unused ones, and those covering frames
 * the peer has not reported yet. The pool's fetch-add goes on the endpoint's DCI after its SENDs,
 * so when the peer's NIC adds them those frames are in its receive buffers; until its CPU takes
 * them the pool may promise those buffers twice (an RNR NAK at worst, retried: rnr_retry 7). The
 * frames sent so far count as paid for: a later endpoint ignores their reports
 * (rvx__dc_ep_connect). A failed endpoint keeps what it holds (the peer may be gone); so does
 * one whose peer said its worker is going: its pool goes with it, and a give-back to a DCT that
 * is gone would hold a DCI for the iface's whole grace. */
RVX_COLD void rvx__dc_give_back(rvx__dc_ep_t *ep)
{
    rvx__dc_peer_t *p = &ep->ifc->peers[ep->rank];
    if (rvx__dc_peer_left(ep->ifc, ep->rank)) {
        p->claimed = 0;
        rvx__dc_hold_del(ep);
        return;
    }
    if (!ep->failed && p->claimed) { /* the unused ones and the rest: one fetch-add */
        uint32_t held = p->claimed;
        uint8_t closing = ep->ifc->closing; /* already set when the worker goes */
        ep->tx_limit -= ep->tx_left; /* the frames sent stay counted (rvx__dc_tx_sent) */
        ep->tx_left = 0;
        p->claimed = 0;
        ep->ifc->released += held;
        ep->ifc->closing = 1;
        rvx__dc_pool_add(ep, held);
        ep->ifc->closing = closing;
    }
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

#endif

#endif /* RVX_TL_DC_CREDIT_H */
