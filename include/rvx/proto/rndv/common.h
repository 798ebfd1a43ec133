/* rvx/proto/rndv/common.h: what the rendezvous protocols of tag matching share. Each protocol is
 * one file (get.h, put.h, am.h, pipeline.h); rvx.h includes the one RVX_RNDV names, and that file
 * includes this one. Written over proto/tag_match.h and the tl contract only.
 *
 * Every protocol starts with an RTS on the request channel carrying the match information (tag,
 * length, the sender's id), so it is matched in order with eager messages; what follows depends
 * on the protocol (see its file).
 *
 * Before including this file a protocol defines:
 *   RVX__RNDV_RTS_LEN(mlen)  the length of its RTS for a message of mlen bytes
 *   RVX__RNDV_RTS_ADDR       1 if the RTS carries the send buffer's address and packed key (GET)
 *   RVX__RNDV_PHASE1         1 if the RTS carries the message's first bytes (PIPELINE)
 *   RVX__RNDV_SEND_REG       1 if the send buffer is registered when the send starts
 *   RVX__RNDV_RECV_ID        1 if the receive takes an id (the sender's frames name it)
 *   RVX__RNDV_PEER_WRITES    1 if the peer writes into a receive buffer after its RTR, until FIN
 * and after it: rvx__rndv_emit (the request-channel frames of a queued send), rvx__rndv_rx (the
 * frames it takes) and rvx__rndv_step (one step of an operation, run by progress).
 *
 * Lanes (RVX_LANES > 1): GET's read, PUT's write and PIPELINE's phase-3 pieces are split across
 * the lanes in proportion to lane bandwidth (rvx__lane_split) when the message has at least
 * RVX_LANE_STRIPE_MIN bytes; everything else (control frames, phase 1 and 2) is on lane 0.
 * A transfer completes when every stripe has, with the first error among them. PUT and PIPELINE
 * flush every lane they wrote on before FIN, which travels on lane 0 and could otherwise overtake
 * data on another lane.
 *
 * Truncation: the receiver moves min(length, buffer) bytes (the RTR carries that count) and
 * reports RVX_ERR_MSG_TRUNCATED; the sender completes normally.
 * Control frames (ATS, RTR, KEY, FIN) use the reply channel and are retried by progress when it is
 * full. A failed RMA or registration is reported to both sides (ATS / FIN carry a status, and
 * PIPELINE's KEY a receiver's chunk that failed to register).
 * An operation whose peer dies ends with RVX_ERR_PEER_FAILED; if a transfer of its own is still
 * in the transport, its memory is kept until the transport lets go of it (RVX__S_ZOMBIE). */
#ifndef RVX_PROTO_RNDV_COMMON_H
#define RVX_PROTO_RNDV_COMMON_H

/* ---- lanes --------------------------------------------------------------------------------- */

/* Split a transfer of len bytes across the lanes in proportion to their bandwidth: lane l gets
 * [off[l], off[l] + n[l]). Lanes 1.. get their share rounded down to 64 bytes, lane 0 the rest,
 * so the pieces are contiguous in lane order. Unless `stripe`, lane 0 takes it all. */
static inline void rvx__lane_split(const rvx_context_t *ctx, size_t len, int stripe,
                                   size_t off[RVX_LANES], size_t n[RVX_LANES])
{
    unsigned l;
    size_t rest = len, o;
    for (l = 1; l < RVX_LANES; l++) {
        uint64_t bw = ctx->lane_bw[l], sum = ctx->lane_bw_sum;
        /* len * bw / sum without overflow: bw and sum are below 2^32 */
        n[l] = stripe ? (size_t)(((uint64_t)len / sum * bw + (uint64_t)len % sum * bw / sum) & ~(uint64_t)63) : 0;
        rest -= n[l];
    }
    n[0] = rest;
    for (l = 0, o = 0; l < RVX_LANES; l++) {
        off[l] = o;
        o += n[l];
    }
}

/* ---- helpers of the steps ------------------------------------------------------------------ */

/* Put the op back on the ready list (it waits on the transport or on ring room). */
static inline int rvx__rndv_again(struct rvx__tag_state *t, rvx__tag_op_t *op, int progressed)
{
    rvx__tag_ready(t, op);
    return progressed;
}

/* The peer's packed keys (op->packed), unpacked once per lane. */
RVX_COLD rvx_status_t rvx__rndv_unpack(rvx__tag_op_t *op)
{
    rvx_status_t st = RVX_OK;
    unsigned l;
    if (op->flags & RVX__F_RKEY) return RVX_OK;
    for (l = 0; l < RVX_LANES && st == RVX_OK; l++)
        st = rvx__tl_rkey_unpack(&op->ep->tl[l], op->packed + l * RVX__TL_RKEY_PACKED_SIZE, &op->rkey[l]);
    if (st == RVX_OK) op->flags |= RVX__F_RKEY;
    return st;
}

/* What rvx__rndv_xfer does: read the peer's buffer, write it, or flush the endpoint. */
#define RVX__XFER_GET   0
#define RVX__XFER_PUT   1
#define RVX__XFER_FLUSH 2

/* Post lane l's part of the op's transfer. */
static inline rvx_status_t rvx__rndv_xfer_lane(rvx__tag_op_t *op, int what, unsigned l, size_t off, size_t n)
{
    rvx_request_t *r = &op->tlreq[l];
    if (what == RVX__XFER_GET)
        return rvx__tl_get_zcopy(&op->ep->tl[l], op->buf + off, n, &op->mem->tl[l], op->raddr + off, &op->rkey[l], r);
    if (what == RVX__XFER_PUT)
        return rvx__tl_put_zcopy(&op->ep->tl[l], op->buf + off, n, &op->mem->tl[l], op->raddr + off, &op->rkey[l], r);
    return rvx__tl_ep_flush(&op->ep->tl[l], r);
}

/* The op's transfer striped across the lanes (GET, PUT; all on lane 0 below RVX_LANE_STRIPE_MIN
 * or with one lane), or a flush of lane 0 and of every other lane it wrote on (FLUSH): each part
 * posted once, then RVX_INPROGRESS until all have completed (or while a part found no room);
 * then the first error among them (one that is not a cancellation, if any), or RVX_OK. */
RVX_COLD rvx_status_t rvx__rndv_xfer(struct rvx__tag_state *t, rvx__tag_op_t *op, int what)
{
    size_t off[RVX_LANES], n[RVX_LANES];
    rvx_status_t st = RVX_OK;
    unsigned l;
    if (!(op->flags & RVX__F_ISSUED)) {
        rvx__lane_split(t->w->ctx, op->eff, what != RVX__XFER_FLUSH && op->eff >= RVX_LANE_STRIPE_MIN, off, n);
        for (l = 0; l < RVX_LANES; l++) {
            rvx_status_t s;
            if (op->lposted & (1u << l)) continue;
            if (what == RVX__XFER_FLUSH ? l && !(op->lused & (1u << l)) : !n[l]) continue;
            rvx_request_init(&op->tlreq[l]);
            s = rvx__rndv_xfer_lane(op, what, l, off[l], n[l]);
            if (s == RVX_ERR_NO_RESOURCE) return RVX_INPROGRESS; /* the rest on a later step */
            op->lposted |= 1u << l;
            if (what != RVX__XFER_FLUSH) op->lused |= 1u << l;
            if (s != RVX_INPROGRESS) op->tlreq[l].status = s;
        }
        op->flags |= RVX__F_ISSUED;
    }
    for (l = 0; l < RVX_LANES; l++)
        if ((op->lposted & (1u << l)) && op->tlreq[l].status == RVX_INPROGRESS) return RVX_INPROGRESS;
    for (l = 0; l < RVX_LANES; l++) {
        rvx_status_t s = (rvx_status_t)op->tlreq[l].status;
        if ((op->lposted & (1u << l)) && s != RVX_OK && (st == RVX_OK || st == RVX_ERR_CANCELED)) st = s;
    }
    op->lposted = 0;
    op->flags &= ~RVX__F_ISSUED;
    return st;
}

/* Has the transport let go of everything this op posted, on every lane? */
static inline int rvx__rndv_quiet(const rvx__tag_op_t *op)
{
    unsigned i, l;
    for (l = 0; l < RVX_LANES; l++)
        if ((op->lposted & (1u << l)) && op->tlreq[l].status == RVX_INPROGRESS) return 0;
    for (i = 0; i < op->nchunks; i++) /* a chunk may be partly posted */
        for (l = 0; l < RVX_LANES; l++)
            if ((op->chunks[i].lposted & (1u << l)) && op->chunks[i].req[l].status == RVX_INPROGRESS) return 0;
    if ((op->flags & RVX__F_ISSUED) && op->tlreq[0].status == RVX_INPROGRESS) return 0; /* zero-copy send */
    for (i = 0; i < op->nposted; i++)
        if (op->chunks[i].req[0].status == RVX_INPROGRESS) return 0;
    return 1;
}

/* Forget what the transport holds of the op (its endpoint goes: nothing more will complete). */
static inline void rvx__rndv_forget(rvx__tag_op_t *op)
{
    unsigned i;
    op->nposted = 0;
    op->flags &= ~RVX__F_ISSUED;
    op->lposted = 0;
    for (i = 0; i < op->nchunks; i++) op->chunks[i].lposted = 0;
}

/* ---- send side ------------------------------------------------------------------------------ */

/* A rendezvous send, ready to be queued (its buffer registered where the protocol wants it, an
 * id the peer's answers name); NULL with *st set if it cannot start. */
RVX_COLD rvx__tag_op_t *rvx__rndv_send_op(struct rvx__tag_state *t, rvx_ep_t *ep, const void *buf,
                                          size_t len, uint64_t tag, rvx_status_t *st)
{
    rvx__tag_op_t *op = rvx__tag_send_op(t, ep, buf, len, tag, RVX__SS_RTS);
    *st = RVX_ERR_NO_MEMORY;
    if (!op) return NULL;
    if (RVX__RNDV_SEND_REG && (*st = rvx__tag_reg(t, op->buf, len, &op->mem)) != RVX_OK) {
        op->mem = NULL;
        rvx__tag_op_free(t, op);
        return NULL;
    }
    if (!rvx__tag_id_new(t, op)) {
        *st = RVX_ERR_NO_MEMORY;
        rvx__tag_release(t, op);
        rvx__tag_op_free(t, op);
        return NULL;
    }
    return op;
}

/* The RTS: tag, length and id, then the protocol's part (GET: the buffer's address and key;
 * PIPELINE: phase 1's bytes); 0 if the ring is full. */
RVX_COLD int rvx__rndv_emit_rts(rvx__tag_op_t *op)
{
    rvx__tl_ep_t *tl = &op->ep->tl[0];
    size_t blen = RVX__RNDV_RTS_LEN(op->mlen);
    uint8_t *b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, blen);
    if (!b) return 0;
    rvx__tag_st64(b, op->tag);
    rvx__tag_st64(b + 8, op->mlen);
    rvx__tag_st32(b + 16, op->id);
    rvx__tag_st32(b + 20, 0);
    if (RVX__RNDV_RTS_ADDR) {
        rvx__tag_st64(b + 24, (uint64_t)(uintptr_t)op->buf);
        rvx_rkey_pack(op->mem, b + 32);
    }
    if (RVX__RNDV_PHASE1) {
        memcpy(b + RVX__TAG_RTS_HDR, op->buf, blen - RVX__TAG_RTS_HDR);
        op->done = blen - RVX__TAG_RTS_HDR;
    }
    rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, blen, RVX__TAG_CLASS | RVX__TF_RTS);
    return 1;
}

/* The op left the send queue. */
static void rvx__rndv_sent(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->state == RVX__SS_RTS) op->state = RVX__SS_WAIT; /* for ATS / RTR */
    else rvx__tag_done(t, op, RVX_OK);                     /* AM data all sent */
}

/* The status word of a peer's ATS, FIN or KEY: RVX_OK or one of our error codes. Anything else
 * is not trusted: counted as a bad frame, and the operation fails with RVX_ERR_BAD_MESSAGE. */
RVX_COLD rvx_status_t rvx__rndv_peer_status(rvx_ep_t *ep, uint32_t word)
{
    int32_t st = (int32_t)word;
    if (st <= RVX_OK && st >= RVX_ERR_BAD_MESSAGE) return (rvx_status_t)st;
    rvx__tag_bad(ep, "a rendezvous frame carried %d, not a status, from rank %d", (int)st);
    return RVX_ERR_BAD_MESSAGE;
}

/* A control frame of an op: its peer's id and a 32-bit word (a status); 0 if the ring is full. */
RVX_COLD int rvx__rndv_ctrl_status(rvx__tag_op_t *op, unsigned type, uint32_t word)
{
    uint8_t body[8];
    rvx__tag_st32(body, op->peer_id);
    rvx__tag_st32(body + 4, word);
    return rvx__tag_ctrl(op->ep, type, body, 8);
}

/* An RTR (a reply to the send with id `id` from ep), checked for the op's state and the length
 * it asks for; the op, or NULL if malformed. */
RVX_COLD rvx__tag_op_t *rvx__rndv_rtr_op(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len,
                                         size_t min_len)
{
    rvx__tag_op_t *op;
    if (len < min_len || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__KIND_SEND)) ||
        op->state != RVX__SS_WAIT || rvx__load_u64(b + 8) > op->mlen)
        return NULL;
    return op;
}

/* ---- receive side --------------------------------------------------------------------------- */

/* A receive matched a rendezvous request (op: RECV with ep, mlen, peer_id and, for GET, raddr
 * and packed set). `data`/`n`: the phase-1 bytes that came with it (PIPELINE). */
RVX_COLD void rvx__rndv_recv_start(struct rvx__tag_state *t, rvx__tag_op_t *op, const uint8_t *data, size_t n)
{
    op->eff = op->mlen < op->len ? op->mlen : op->len;
    op->done = 0;
    if (RVX__RNDV_PHASE1) {
        if (n > op->eff) n = op->eff;
        if (n && data) memcpy(op->buf, data, n);
        op->done = n;
    }
    if (RVX__RNDV_RECV_ID && !rvx__tag_id_new(t, op)) { /* no id: ask for nothing more, fail the receive */
        op->status = RVX_ERR_NO_MEMORY;
        op->eff = op->done;
    }
    if (op->stage && op->stage != op->small) free(op->stage);
    op->stage = NULL;
    op->state = RVX__RS_START;
    rvx__tag_ready(t, op);
}

/* An RTS: matched and started, or queued as unexpected with what follows its header (GET's
 * address and key, PIPELINE's phase 1). 1 if taken, 0 if malformed. */
RVX_COLD int rvx__rndv_rx_rts(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, const uint8_t *b, size_t len)
{
    rvx__tag_rop_t *r;
    rvx__tag_op_t *op;
    uint64_t tag, mlen;
    if (chan != RVX__CHAN_REQUEST || len < RVX__TAG_RTS_HDR) return 0;
    tag = rvx__load_u64(b);
    mlen = rvx__load_u64(b + 8);
    if (!mlen || mlen >= RVX__TAG_MLEN_MAX || len != RVX__RNDV_RTS_LEN(mlen) || !rvx__tag_ld32(b + 16))
        return 0;
    if ((r = rvx__tag_match(t, tag, ep->rank)) != NULL) {
        if ((op = rvx__tag_claim(t, r)) == NULL) return 1;
        rvx__tag_fill(op->info, tag, (size_t)mlen, ep->rank);
    } else if ((op = rvx__tag_unexp(t, ep, tag, (size_t)mlen, RVX__US_RTS)) == NULL) {
        return 1;
    }
    op->ep = ep;
    op->mlen = (size_t)mlen;
    op->peer_id = rvx__tag_ld32(b + 16);
    if (RVX__RNDV_RTS_ADDR) {
        op->raddr = rvx__load_u64(b + 24);
        memcpy(op->packed, b + 32, RVX_RKEY_PACKED_SIZE);
    }
    if (op->kind == RVX__KIND_RECV) {
        rvx__rndv_recv_start(t, op, b + RVX__TAG_RTS_HDR, len - RVX__TAG_RTS_HDR);
    } else if (len > RVX__TAG_RTS_HDR) { /* kept until a receive comes */
        rvx__tag_stage(op, len - RVX__TAG_RTS_HDR);
        if (op->stage) memcpy(op->stage, b + RVX__TAG_RTS_HDR, len - RVX__TAG_RTS_HDR);
        op->done = len - RVX__TAG_RTS_HDR;
    }
    return 1;
}

/* A receive's status once its data is in and it is done. */
RVX_COLD int rvx__rndv_recv_done(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status));
    return 1;
}

/* ---- PUT and PIPELINE: the writer flushes, then FIN completes the receive ----------------------- */

/* FIN: the writer's data is all in (or failed). */
RVX_COLD int rvx__rndv_rx_fin(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    int32_t st;
    if (len != 8 || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__KIND_RECV)) ||
        op->state != RVX__RS_WAIT)
        return 0;
    st = rvx__rndv_peer_status(ep, rvx__tag_ld32(b + 4));
    rvx__tag_done(t, op, rvx__tag_rstatus(op, st < 0 ? (rvx_status_t)st : (rvx_status_t)op->status));
    return 1;
}

/* Sender: once every write is out of the transport, flush every lane written on (FIN goes on lane
 * 0 and must not overtake their data); 1 when flushed (the state is then SS_FIN). */
RVX_COLD int rvx__rndv_flushed(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st;
    if (!rvx__rndv_quiet(op)) return 0; /* pipeline writes in flight */
    if ((st = rvx__rndv_xfer(t, op, RVX__XFER_FLUSH)) == RVX_INPROGRESS) return 0;
    /* with lanes, a write canceled behind a lane's earlier failure: the flush names the failure */
    if (st != RVX_OK && (!op->status || (RVX_LANES > 1 && op->status == RVX_ERR_CANCELED))) op->status = st;
    op->state = RVX__SS_FIN;
    return 1;
}

/* ---- ending an operation early -------------------------------------------------------------- */

/* The zombie step: req is NULL (already told) or waits for this (endpoint destroyed). */
RVX_COLD int rvx__rndv_zombie_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!rvx__rndv_quiet(op)) return rvx__rndv_again(t, op, 0);
    rvx__tag_done(t, op, (rvx_status_t)op->status);
    return 1;
}

/* An unexpected message ends early: cut off between fragments by its sender's death, it stays in
 * the queue, and the receive that takes it gets the status (a receive posted for it must not
 * wait for ever); anything else leaves the queue. */
RVX_COLD void rvx__rndv_fail_unexp(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx_status_t st)
{
    if (st == RVX_ERR_PEER_FAILED) {
        rvx__tag_release(t, op);
        op->status = st;
        op->state = RVX__US_DONE;
        op->flags &= ~RVX__F_ACTIVE;
        rvx__tag_link_del(&op->alink);
        t->w->proto_pending--;
        return;
    }
    rvx__tag_q_del(&t->unx_head, &t->unx_tail, op);
    rvx__tag_done(t, op, st);
}

/* End an operation early with `st` (peer failed, endpoint destroyed). If the transport still
 * holds a transfer of it, the user's request completes now and the op lingers until it is let
 * go (a zombie, polled by progress). */
static void rvx__rndv_fail(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx_status_t st)
{
    rvx__tag_peer_t *p = op->ep ? &t->peers[op->ep->rank] : NULL;
    if (op->flags & RVX__F_SQ) rvx__tag_sq_del(t, op);
    if (p && p->cur == op) p->cur = NULL;
    if (op->kind == RVX__KIND_UNEXP) {
        rvx__rndv_fail_unexp(t, op, st);
        return;
    }
    if (op->state == RVX__S_ZOMBIE) {
        if (st == RVX_ERR_CANCELED) { /* the endpoint goes: nothing more will complete */
            rvx__rndv_forget(op);
            rvx__tag_done(t, op, RVX_OK);
        }
        return;
    }
    if (st != RVX_ERR_CANCELED && !rvx__rndv_quiet(op)) {
        if (op->req) op->req->status = st;
        op->req = NULL;
        op->state = RVX__S_ZOMBIE;
        rvx__tag_ready(t, op);
        return;
    }
    rvx__tag_done(t, op, st);
}

#endif /* RVX_PROTO_RNDV_COMMON_H */
