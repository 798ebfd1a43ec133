/* rvx/proto/rndv.h: the rendezvous protocols of tag matching, one per build (RVX_RNDV). Included
 * by proto/tag.h; written against the tl contract only.
 *
 * Every protocol starts with an RTS on the request channel carrying the match information (tag,
 * length, the sender's id), so it is matched in order with eager messages. Then:
 *
 *   GET       The RTS also carries the send buffer's address and packed rkey (registered when
 *             the send starts). The receiver registers its buffer, unpacks the key, reads
 *             (get_zcopy) and answers ATS; the ATS completes the sender.
 *   PUT       The receiver registers its buffer and answers RTR with its address and rkey; the
 *             sender writes (put_zcopy), flushes the endpoint, then sends FIN, which completes
 *             the receiver.
 *   AM        For memory that cannot be registered: the receiver answers RTR (no key) and the
 *             sender streams the data in DATA frames through the message channel; the receiver
 *             copies them out and completes when the last byte is in.
 *   PIPELINE  Open MPI's three phases, registration pipelined on both sides. Phase 1: the RTS
 *             carries the first RVX_PIPE_EAGER bytes. The receiver copies them, registers phase
 *             2's range of its buffer only and answers RTR (the CTS) with that key; then it
 *             registers the rest RVX_PIPE_CHUNK bytes at a time, sending each chunk's key in a
 *             KEY frame as soon as it is registered. Phase 2: the next RVX_PIPE_BOUNCE bytes are
 *             copied into pre-registered bounce buffers (RVX_PIPE_BOUNCE_BUFS of RVX_PIPE_FRAG
 *             bytes) and written at once. Phase 3: the sender registers the rest RVX_PIPE_CHUNK
 *             bytes at a time and writes a piece once its own chunk and the receiver's key for
 *             that range are both ready (a piece ends where either ends), while earlier pieces
 *             are on the wire. Then flush and FIN. With the registration cache the pieces stay
 *             registered (leave pinned): a buffer sent again skips phase 2, a buffer received
 *             into again is all cache hits and puts every key in the CTS (no KEY frame), so the
 *             message is written back to back straight after the CTS. A receiver's chunk that
 *             fails to register is reported in a KEY frame: the sender stops, flushes, and its
 *             FIN carries the error (both requests fail with it).
 *
 * Lanes (RVX_LANES > 1): GET's read, PUT's write and PIPELINE's phase-3 pieces are split across
 * the lanes in proportion to lane bandwidth (rvx__lane_split, core.h) when the message has at
 * least RVX_LANE_STRIPE_MIN bytes; everything else (control frames, phase 1 and 2) is on lane 0.
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
 * in the transport, its memory is kept until the transport lets go of it. */
#ifndef RVX_PROTO_RNDV_H
#define RVX_PROTO_RNDV_H

#if RVX_RNDV == RVX_RNDV_GET
#define RVX__RNDV_RTS_LEN(mlen) ((size_t)(RVX__TAG_RTS_HDR + 8 + RVX_RKEY_PACKED_SIZE))
#elif RVX_RNDV == RVX_RNDV_PIPELINE
#define RVX__RNDV_P1(mlen)      ((size_t)(mlen) < (size_t)RVX_PIPE_EAGER ? (size_t)(mlen) : (size_t)RVX_PIPE_EAGER)
#define RVX__RNDV_RTS_LEN(mlen) ((size_t)RVX__TAG_RTS_HDR + RVX__RNDV_P1(mlen))
#else
#define RVX__RNDV_RTS_LEN(mlen) ((size_t)RVX__TAG_RTS_HDR)
#endif
#if RVX_RNDV == RVX_RNDV_PUT
#define RVX__RNDV_RTR_LEN ((size_t)(24 + RVX_RKEY_PACKED_SIZE))
#elif RVX_RNDV == RVX_RNDV_PIPELINE
#define RVX__RNDV_RTR_LEN  ((size_t)32) /* the header; the keys follow */
#define RVX__PIPE_KEY_LEN  ((size_t)(8 + RVX_RKEY_PACKED_SIZE))
#define RVX__PIPE_KEYS_MAX ((unsigned)((RVX__TAG_FRAME - 32) / RVX__PIPE_KEY_LEN)) /* keys in one frame */
/* the most pieces a receiver cuts `eff` bytes into (each but the first and last >= CHUNK / 2) */
#define RVX__PIPE_KCAP(eff) ((size_t)(eff) / (RVX_PIPE_CHUNK / 2) + 3)
#else
#define RVX__RNDV_RTR_LEN ((size_t)16)
#endif
#define RVX__RS_ZOMBIE 200 /* failed; its transfer is still in the transport */

#if RVX_RNDV == RVX_RNDV_PIPELINE
/* Are these `nk` keys (end:8 rkey each) a correct continuation of what the sender holds: ends
 * rising, none past `eff`, no more than the receiver can cut? */
static int rvx__pipe_keys_ok(const rvx__tag_op_t *op, const uint8_t *b, unsigned nk, size_t eff)
{
    size_t prev = op->nrk ? op->rk[op->nrk - 1].end : 0;
    unsigned i;
    if (op->nrk + (size_t)nk > RVX__PIPE_KCAP(eff)) return 0;
    for (i = 0; i < nk; i++) {
        uint64_t end = rvx__tag_ld64(b + i * RVX__PIPE_KEY_LEN);
        if (end <= prev || end > eff) return 0;
        prev = (size_t)end;
    }
    return 1;
}

/* Unpack checked keys into the sender's list (op->eff set). */
RVX_COLD rvx_status_t rvx__pipe_keys_add(rvx__tag_op_t *op, const uint8_t *b, unsigned nk)
{
    unsigned i, l;
    if (!op->rk && !(op->rk = (struct rvx__pipe_rkey *)calloc(RVX__PIPE_KCAP(op->eff), sizeof(*op->rk))))
        return RVX_ERR_NO_MEMORY;
    for (i = 0; i < nk; i++) {
        const uint8_t *e = b + i * RVX__PIPE_KEY_LEN;
        struct rvx__pipe_rkey *k = &op->rk[op->nrk];
        rvx_status_t st = RVX_OK;
        k->end = (size_t)rvx__tag_ld64(e);
#if RVX_LANES > 1
        for (l = 0; l < RVX_LANES && st == RVX_OK; l++)
            st = rvx__tl_rkey_unpack(RVX__LANE(op->ep, l), e + 8 + l * RVX__TL_RKEY_PACKED_SIZE, &k->key[l]);
#else
        st = rvx__tl_rkey_unpack(&op->ep->tl, e + 8, &k->key[0]);
#endif
        if (st != RVX_OK) {
            for (l = 0; l < RVX_LANES; l++) rvx_rkey_release(&k->key[l]);
            return st;
        }
        op->nrk++;
    }
    return RVX_OK;
}
#endif

/* ---- send side --------------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__rndv_send(struct rvx__tag_state *t, rvx_ep_t *ep, const void *buf,
                                     size_t len, uint64_t tag, rvx_request_t *req)
{
    rvx__tag_op_t *op = rvx__tag_send_op(t, ep, buf, len, tag, RVX__SS_RTS);
    if (!op) return RVX_ERR_NO_MEMORY;
#if RVX_RNDV == RVX_RNDV_GET || RVX_RNDV == RVX_RNDV_PUT
    {
        rvx_status_t st = rvx__tag_reg(t, op->buf, len, &op->mem);
        if (st != RVX_OK) {
            op->mem = NULL;
            rvx__tag_op_free(t, op);
            return st;
        }
    }
#endif
    if (!rvx__tag_id_new(t, op)) {
        rvx__tag_release(t, op);
        rvx__tag_op_free(t, op);
        return RVX_ERR_NO_MEMORY;
    }
    op->req = req;
    req->status = RVX_INPROGRESS;
    t->n_rndv++;
    rvx__tag_sq_push(t, op);
    rvx__tag_sq_run(t, &t->peers[ep->rank]);
    return (rvx_status_t)req->status;
}

/* The op's request-channel frames: the RTS, or (AM) the data; 1 when all are in the ring. */
static int rvx__rndv_emit(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx__tl_ep_t *tl = &op->ep->tl;
    uint8_t *b;
    (void)t;
    if (op->state == RVX__SS_RTS) {
        size_t blen = RVX__RNDV_RTS_LEN(op->mlen);
        if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, blen))) return 0;
        rvx__tag_st64(b, op->tag);
        rvx__tag_st64(b + 8, op->mlen);
        rvx__tag_st32(b + 16, op->id);
        rvx__tag_st32(b + 20, 0);
#if RVX_RNDV == RVX_RNDV_GET
        rvx__tag_st64(b + 24, (uint64_t)(uintptr_t)op->buf);
        rvx_rkey_pack(op->mem, b + 32);
#elif RVX_RNDV == RVX_RNDV_PIPELINE
        memcpy(b + RVX__TAG_RTS_HDR, op->buf, blen - RVX__TAG_RTS_HDR);
        op->done = blen - RVX__TAG_RTS_HDR;
#endif
        rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, blen, RVX__TAG_CLASS | RVX__TF_RTS);
        return 1;
    }
    while (op->done < op->eff) { /* AM: DATA frames */
        size_t n = op->eff - op->done < RVX__TAG_FRAME - 16 ? op->eff - op->done : RVX__TAG_FRAME - 16;
        if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, 16 + n))) return 0;
        rvx__tag_st32(b, op->peer_id);
        rvx__tag_st32(b + 4, 0);
        rvx__tag_st64(b + 8, op->done);
        memcpy(b + 16, op->buf + op->done, n);
        rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, 16 + n, RVX__TAG_CLASS | RVX__TF_DATA);
        op->done += n;
    }
    return 1;
}

/* The op left the send queue. */
static void rvx__rndv_sent(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->state == RVX__SS_RTS) op->state = RVX__SS_WAIT; /* for ATS / RTR */
    else rvx__tag_done(t, op, RVX_OK);                     /* AM data all sent */
}

/* ---- receive side ------------------------------------------------------------------------------ */

/* A receive matched a rendezvous request (op: RECV with ep, mlen, peer_id and, for GET, raddr
 * and packed set). `data`/`n`: the phase-1 bytes that came with it (PIPELINE). */
RVX_COLD void rvx__rndv_recv_start(struct rvx__tag_state *t, rvx__tag_op_t *op, const uint8_t *data,
                                   size_t n)
{
    op->eff = op->mlen < op->len ? op->mlen : op->len;
    op->done = 0;
#if RVX_RNDV == RVX_RNDV_PIPELINE
    if (n > op->eff) n = op->eff;
    if (n && data) memcpy(op->buf, data, n);
    op->done = n;
#else
    (void)data;
    (void)n;
#endif
#if RVX_RNDV != RVX_RNDV_GET
    if (!rvx__tag_id_new(t, op)) { /* no id: ask for nothing more and fail the receive */
        op->status = RVX_ERR_NO_MEMORY;
        op->eff = op->done;
    }
#endif
    if (op->stage && op->stage != op->small) free(op->stage);
    op->stage = NULL;
    op->state = RVX__RS_START;
    rvx__tag_ready(t, op);
}

/* Rendezvous frames (RTS, DATA, ATS, RTR, FIN): 1 if taken, 0 if malformed (counted by the
 * caller). */
RVX_COLD int rvx__rndv_rx(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, unsigned type,
                          const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    switch (type) {
    case RVX__TF_RTS: {
        uint64_t tag, mlen;
        if (chan != RVX__CHAN_REQUEST || len < RVX__TAG_RTS_HDR) return 0;
        tag = rvx__tag_ld64(b);
        mlen = rvx__tag_ld64(b + 8);
        if (!mlen || mlen >= RVX__TAG_MLEN_MAX || len != RVX__RNDV_RTS_LEN(mlen) || !rvx__tag_ld32(b + 16))
            return 0;
        if ((op = rvx__tag_match(t, tag, ep->rank)) != NULL) {
            rvx__tag_op_proto(op);
            op->kind = RVX__OP_RECV;
            rvx__tag_fill(op, tag, (size_t)mlen, ep->rank);
        } else if ((op = rvx__tag_unexp(t, ep, tag, (size_t)mlen, RVX__US_RTS)) == NULL) {
            return 1;
        }
        op->ep = ep;
        op->mlen = (size_t)mlen;
        op->peer_id = rvx__tag_ld32(b + 16);
#if RVX_RNDV == RVX_RNDV_GET
        op->raddr = rvx__tag_ld64(b + 24);
        memcpy(op->packed, b + 32, RVX_RKEY_PACKED_SIZE);
#endif
        if (op->kind == RVX__OP_RECV) {
            rvx__rndv_recv_start(t, op, b + RVX__TAG_RTS_HDR, len - RVX__TAG_RTS_HDR);
        } else if (len > RVX__TAG_RTS_HDR) { /* PIPELINE phase 1, kept until a receive comes */
            rvx__tag_stage(op, len - RVX__TAG_RTS_HDR);
            if (op->stage) memcpy(op->stage, b + RVX__TAG_RTS_HDR, len - RVX__TAG_RTS_HDR);
            op->done = len - RVX__TAG_RTS_HDR;
        }
        return 1;
    }
#if RVX_RNDV == RVX_RNDV_GET
    case RVX__TF_ATS: {
        int32_t st;
        if (len != 8 || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__OP_SEND)) ||
            op->state != RVX__SS_WAIT)
            return 0;
        st = (int32_t)rvx__tag_ld32(b + 4);
        rvx__tag_done(t, op, st < 0 && st != RVX_ERR_MSG_TRUNCATED ? (rvx_status_t)st : RVX_OK);
        return 1;
    }
#else
    case RVX__TF_RTR: {
        uint64_t eff;
#if RVX_RNDV == RVX_RNDV_PIPELINE
        unsigned nk;
        if (len < RVX__RNDV_RTR_LEN || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__OP_SEND)) ||
            op->state != RVX__SS_WAIT)
            return 0;
        eff = rvx__tag_ld64(b + 8);
        nk = rvx__tag_ld32(b + 24);
        if (eff > op->mlen || nk > RVX__PIPE_KEYS_MAX || len != RVX__RNDV_RTR_LEN + nk * RVX__PIPE_KEY_LEN ||
            (eff > op->done && !nk) || /* more wanted: the first piece's key comes with the CTS */
            !rvx__pipe_keys_ok(op, b + RVX__RNDV_RTR_LEN, nk, (size_t)eff))
            return 0;
#else
        if (len != RVX__RNDV_RTR_LEN || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__OP_SEND)) ||
            op->state != RVX__SS_WAIT)
            return 0;
        eff = rvx__tag_ld64(b + 8);
        if (eff > op->mlen) return 0;
#endif
        op->peer_id = rvx__tag_ld32(b + 4);
        op->eff = (size_t)eff;
#if RVX_RNDV == RVX_RNDV_AM
        if (!eff) {
            rvx__tag_done(t, op, RVX_OK);
        } else {
            op->state = RVX__SS_DATA;
            op->done = 0;
            rvx__tag_sq_push(t, op); /* after whatever is queued to this peer */
        }
#elif RVX_RNDV == RVX_RNDV_PUT
        op->raddr = rvx__tag_ld64(b + 16);
        memcpy(op->packed, b + 24, RVX_RKEY_PACKED_SIZE);
        if (!eff) {
            rvx__tag_done(t, op, RVX_OK);
        } else {
            op->state = RVX__SS_PUT;
            rvx__tag_ready(t, op);
        }
#else
        op->raddr = rvx__tag_ld64(b + 16);
        if (eff <= op->done) { /* phase 1 carried all the receiver wanted */
            rvx__tag_done(t, op, RVX_OK);
        } else {
            rvx_status_t st = rvx__pipe_keys_add(op, b + RVX__RNDV_RTR_LEN, nk);
            if (st != RVX_OK) op->status = st; /* the pipeline step fails it, FIN tells the receiver */
            op->state = RVX__SS_PIPE;
            rvx__tag_ready(t, op);
        }
#endif
        return 1;
    }
#endif
#if RVX_RNDV == RVX_RNDV_PIPELINE
    case RVX__TF_KEY: { /* more of the receive buffer registered, or its registration failed */
        int32_t st;
        unsigned nk;
        if (len < 16 || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__OP_SEND))) return 0;
        st = (int32_t)rvx__tag_ld32(b + 4);
        nk = rvx__tag_ld32(b + 8);
        if (nk > RVX__PIPE_KEYS_MAX || len != 16 + nk * RVX__PIPE_KEY_LEN || (st < 0 && nk)) return 0;
        if (op->state != RVX__SS_PIPE) /* keys still on the way when the send stopped on an error */
            return op->state == RVX__SS_FLUSH || op->state == RVX__SS_FIN || op->state == RVX__RS_ZOMBIE;
        if (st < 0) {
            if (!op->status) op->status = st;
        } else {
            rvx_status_t s2;
            if (!rvx__pipe_keys_ok(op, b + 16, nk, op->eff)) return 0;
            if ((s2 = rvx__pipe_keys_add(op, b + 16, nk)) != RVX_OK && !op->status) op->status = s2;
        }
        rvx__tag_ready(t, op);
        return 1;
    }
#endif
#if RVX_RNDV == RVX_RNDV_PUT || RVX_RNDV == RVX_RNDV_PIPELINE
    case RVX__TF_FIN: {
        int32_t st;
        if (len != 8 || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__OP_RECV)) ||
            op->state != RVX__RS_WAIT)
            return 0;
        st = (int32_t)rvx__tag_ld32(b + 4);
        rvx__tag_done(t, op, rvx__tag_rstatus(op, st < 0 ? (rvx_status_t)st : (rvx_status_t)op->status));
        return 1;
    }
#endif
#if RVX_RNDV == RVX_RNDV_AM
    case RVX__TF_DATA: {
        uint64_t off;
        size_t n = len - 16;
        if (chan != RVX__CHAN_REQUEST || len <= 16 ||
            !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__OP_RECV)) || op->state != RVX__RS_WAIT)
            return 0;
        off = rvx__tag_ld64(b + 8);
        if (off > op->eff || n > op->eff - off || n > op->eff - op->done) return 0;
        memcpy(op->buf + off, b + 16, n);
        op->done += n;
        if (op->done == op->eff) rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status));
        return 1;
    }
#endif
    default:
        return 0;
    }
}

/* ---- steps run by progress ---------------------------------------------------------------------- */

/* Issue a transport operation once (ISSUED), then wait for its request: RVX_INPROGRESS while it
 * runs (or there was no room to post it), else its final status. */
#define RVX__RNDV_ISSUE(op, call)                                                                 \
    do {                                                                                          \
        if (!((op)->flags & RVX__F_ISSUED)) {                                                     \
            rvx_status_t st_;                                                                     \
            rvx_request_init(&(op)->tlreq);                                                       \
            st_ = (call);                                                                         \
            if (st_ == RVX_ERR_NO_RESOURCE) return rvx__rndv_again(t, op, 0);                     \
            (op)->flags |= RVX__F_ISSUED;                                                         \
            if (st_ != RVX_INPROGRESS) (op)->tlreq.status = st_;                                  \
        }                                                                                         \
        if ((op)->tlreq.status == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);               \
        (op)->flags &= ~RVX__F_ISSUED;                                                            \
    } while (0)

static inline int rvx__rndv_again(struct rvx__tag_state *t, rvx__tag_op_t *op, int progressed)
{
    rvx__tag_ready(t, op);
    return progressed;
}

RVX_COLD rvx_status_t rvx__rndv_unpack(rvx__tag_op_t *op)
{
    rvx_status_t st;
    if (op->flags & RVX__F_RKEY) return RVX_OK;
    st = rvx__tl_rkey_unpack(&op->ep->tl, op->packed, &op->rkey);
#if RVX_LANES > 1
    {
        unsigned l;
        for (l = 1; l < RVX_LANES && st == RVX_OK; l++)
            st = rvx__tl_rkey_unpack(&op->ep->lane_tl[l - 1], op->packed + l * RVX__TL_RKEY_PACKED_SIZE,
                                     &op->lrkey[l - 1]);
    }
#endif
    if (st == RVX_OK) op->flags |= RVX__F_RKEY;
    return st;
}

#if RVX_LANES > 1
#define RVX__LW_GET   0
#define RVX__LW_PUT   1
#define RVX__LW_FLUSH 2

static inline rvx_request_t *rvx__rndv_lreq(rvx__tag_op_t *op, unsigned l)
{
    return l ? &op->lreq[l - 1] : &op->tlreq;
}

static inline rvx_rkey_t *rvx__rndv_rkey(rvx__tag_op_t *op, unsigned l)
{
    return l ? &op->lrkey[l - 1] : &op->rkey;
}

/* The op's transfer striped across the lanes (GET, PUT), or a flush of lane 0 and of every other
 * lane it wrote on (FLUSH): each part posted once, then RVX_INPROGRESS until all have completed;
 * then the first error among them (one that is not a cancellation, if any), or RVX_OK. */
RVX_COLD rvx_status_t rvx__rndv_lanes(struct rvx__tag_state *t, rvx__tag_op_t *op, int what)
{
    size_t off[RVX_LANES], n[RVX_LANES];
    rvx_status_t st = RVX_OK;
    unsigned l;
    if (!(op->flags & RVX__F_ISSUED)) {
        rvx__lane_split(t->w->ctx, op->eff, what != RVX__LW_FLUSH && op->eff >= RVX_LANE_STRIPE_MIN, off, n);
        for (l = 0; l < RVX_LANES; l++) {
            rvx_request_t *r = rvx__rndv_lreq(op, l);
            rvx_status_t s;
            if (op->lposted & (1u << l)) continue;
            if (what == RVX__LW_FLUSH ? l && !(op->lused & (1u << l)) : !n[l]) continue;
            rvx_request_init(r);
            if (what == RVX__LW_GET)
                s = rvx__tl_get_zcopy(RVX__LANE(op->ep, l), op->buf + off[l], n[l], RVX__LANE(op->mem, l),
                                      op->raddr + off[l], rvx__rndv_rkey(op, l), r);
            else if (what == RVX__LW_PUT)
                s = rvx__tl_put_zcopy(RVX__LANE(op->ep, l), op->buf + off[l], n[l], RVX__LANE(op->mem, l),
                                      op->raddr + off[l], rvx__rndv_rkey(op, l), r);
            else
                s = rvx__tl_ep_flush(RVX__LANE(op->ep, l), r);
            if (s == RVX_ERR_NO_RESOURCE) return RVX_INPROGRESS; /* the rest on a later step */
            op->lposted |= 1u << l;
            if (what != RVX__LW_FLUSH) op->lused |= 1u << l;
            if (s != RVX_INPROGRESS) r->status = s;
        }
        op->flags |= RVX__F_ISSUED;
    }
    for (l = 0; l < RVX_LANES; l++)
        if ((op->lposted & (1u << l)) && rvx__rndv_lreq(op, l)->status == RVX_INPROGRESS) return RVX_INPROGRESS;
    for (l = 0; l < RVX_LANES; l++) {
        rvx_status_t s = (rvx_status_t)rvx__rndv_lreq(op, l)->status;
        if ((op->lposted & (1u << l)) && s != RVX_OK && (st == RVX_OK || st == RVX_ERR_CANCELED)) st = s;
    }
    op->lposted = 0;
    op->flags &= ~RVX__F_ISSUED;
    return st;
}
#endif

#if RVX_RNDV == RVX_RNDV_PIPELINE
RVX_INLINE unsigned rvx__pipe_memo_slot(uintptr_t a)
{
    return (unsigned)(((a >> 6) ^ (a >> 17)) % RVX__PIPE_MEMO);
}

/* The end of a pipeline piece that starts at `off` and wants `want` bytes: on a page boundary
 * (unless it is the last, or that would halve it), so that the registrations of neighbouring
 * pieces do not share a page (the cache would merge them, registering the earlier ones again). */
static inline size_t rvx__pipe_cut(const struct rvx__tag_state *t, const rvx__tag_op_t *op, size_t off,
                                   size_t want)
{
    uintptr_t start = (uintptr_t)op->buf + off, end;
    if (op->eff - off <= want) return op->eff;
    end = (start + want) & ~(uintptr_t)(t->page - 1);
    return end >= start + want / 2 ? off + (size_t)(end - start) : off + want;
}

/* The receiver's key for the range at op->done, or NULL while it has not come. */
static inline struct rvx__pipe_rkey *rvx__pipe_key(rvx__tag_op_t *op)
{
    while (op->krk < op->nrk && op->rk[op->krk].end <= op->done) op->krk++;
    return op->krk < op->nrk ? &op->rk[op->krk] : NULL;
}

/* Phases 2 and 3 of a pipelined send: post as much as resources and the receiver's keys allow.
 * A write goes only where the receiver has sent a key: a piece ends where the sender's chunk
 * or the receiver's key ends, whichever is first; a missing key parks the op until its KEY
 * frame readies it (the sender's next chunk is registered meanwhile). */
RVX_COLD int rvx__pipe_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st = RVX_OK;
    int progressed = 0;
    struct rvx__pipe_rkey *k;
    if (op->status) { /* keys that could not be unpacked, or the receiver's registration failed */
        st = (rvx_status_t)op->status;
        goto failed;
    }
    if (!(op->flags & RVX__F_STARTED)) {
        size_t rest;
        unsigned slot = rvx__pipe_memo_slot((uintptr_t)op->buf);
        op->p1_end = op->done;
        op->pinned = t->memo[slot].len && t->memo[slot].addr == (uintptr_t)op->buf &&
                     t->memo[slot].len >= op->eff;
        t->n_pipe_pinned += op->pinned;
        op->p2_end = RVX_PIPE_BOUNCE ? rvx__pipe_cut(t, op, op->done, RVX_PIPE_BOUNCE) : op->done;
        if (!op->pinned && op->p2_end > op->done && !t->bounce &&
            rvx_mem_alloc(t->w->ctx, (size_t)RVX_PIPE_BOUNCE_BUFS * RVX_PIPE_FRAG, &t->bounce) != RVX_OK) {
            t->bounce = NULL;
            op->p2_end = op->done; /* no bounce buffers: phase 3 does it all */
        }
        rest = op->eff - op->p2_end;
        /* pieces: the sender's registrations cut by the receiver's keys */
        op->chunks = (rvx__tag_chunk_t *)calloc(rest / (RVX_PIPE_CHUNK / 2) + 3 + RVX__PIPE_KCAP(op->eff),
                                                sizeof(*op->chunks));
        if (!op->chunks) { st = RVX_ERR_NO_MEMORY; goto failed; }
        op->flags |= RVX__F_STARTED;
    }
    /* phase 2: copy into a free bounce buffer and write it at once */
    while (!op->pinned && op->done < op->p2_end) {
        size_t n = op->p2_end - op->done < RVX_PIPE_FRAG ? op->p2_end - op->done : RVX_PIPE_FRAG;
        unsigned s;
        uint8_t *src;
        if (!(k = rvx__pipe_key(op))) return progressed;
        if (n > k->end - op->done) n = k->end - op->done;
        for (s = 0; s < RVX_PIPE_BOUNCE_BUFS; s++)
            if (t->bslot[s].status != RVX_INPROGRESS) break;
        if (s == RVX_PIPE_BOUNCE_BUFS) return rvx__rndv_again(t, op, progressed);
        src = (uint8_t *)rvx_mem_addr(t->bounce) + (size_t)s * RVX_PIPE_FRAG;
        memcpy(src, op->buf + op->done, n);
        rvx_request_init(&t->bslot[s]);
        st = rvx__tl_put_zcopy(&op->ep->tl, src, n, &t->bounce->tl, op->raddr + op->done, &k->key[0],
                               &t->bslot[s]);
        if (st != RVX_INPROGRESS) t->bslot[s].status = RVX_OK;
        if (st == RVX_ERR_NO_RESOURCE) return rvx__rndv_again(t, op, progressed);
        if (st < 0) goto failed;
#if RVX_LANES > 1
        op->lused |= 1u;
#endif
        op->done += n;
        t->n_pipe_bounce++;
        progressed = 1;
    }
    /* phase 3: register a chunk, write it, go on with the next while it moves. A buffer left
     * pinned comes here at once, in the pieces its first send registered (phase 2's range, then
     * the chunks): each is a cache hit, posted back to back after the CTS. */
    while (op->done < op->eff) {
        rvx__tag_chunk_t *c;
        size_t n;
        if (op->nposted == op->nchunks) { /* a new piece, and a new registration past the last */
            c = &op->chunks[op->nchunks];
            c->end = 0;
            c->mem = NULL;
            if (op->done >= op->creg_end) {
                size_t end = op->done < op->p2_end ? op->p2_end : rvx__pipe_cut(t, op, op->done, RVX_PIPE_CHUNK);
                if ((st = rvx__tag_reg(t, op->buf + op->done, end - op->done, &c->mem)) != RVX_OK) {
                    c->mem = NULL;
                    goto failed;
                }
                op->cmem = c->mem;
                op->creg_end = end;
            }
            op->nchunks++;
        }
        c = &op->chunks[op->nposted];
        if (!(k = rvx__pipe_key(op))) return progressed; /* registered; the receiver is not ready */
        if (!c->end) c->end = op->creg_end < k->end ? op->creg_end : k->end;
        n = c->end - op->done;
#if RVX_LANES > 1
        { /* the piece striped across the lanes, each stripe posted once */
            size_t off[RVX_LANES], ln[RVX_LANES];
            unsigned l;
            rvx__lane_split(t->w->ctx, n, op->eff >= RVX_LANE_STRIPE_MIN, off, ln);
            for (l = 0; l < RVX_LANES; l++) {
                rvx_request_t *r = l ? &c->lreq[l - 1] : &c->req;
                if (!ln[l] || (c->lposted & (1u << l))) continue;
                rvx_request_init(r);
                st = rvx__tl_put_zcopy(RVX__LANE(op->ep, l), op->buf + op->done + off[l], ln[l],
                                       RVX__LANE(op->cmem, l), op->raddr + op->done + off[l], &k->key[l], r);
                if (st != RVX_INPROGRESS) r->status = RVX_OK;
                if (st == RVX_ERR_NO_RESOURCE) return rvx__rndv_again(t, op, progressed);
                if (st < 0) goto failed;
                c->lposted |= 1u << l;
                op->lused |= 1u << l;
            }
        }
#else
        rvx_request_init(&c->req);
        st = rvx__tl_put_zcopy(&op->ep->tl, op->buf + op->done, n, &op->cmem->tl, op->raddr + op->done,
                               &k->key[0], &c->req);
        if (st != RVX_INPROGRESS) c->req.status = RVX_OK;
        if (st == RVX_ERR_NO_RESOURCE) return rvx__rndv_again(t, op, progressed);
        if (st < 0) goto failed;
#endif
        op->nposted++;
        op->done += n;
        t->n_pipe_chunks++;
        progressed = 1;
    }
    op->state = RVX__SS_FLUSH;
    return rvx__rndv_again(t, op, 1);
failed:
    op->status = st;
    op->state = RVX__SS_FLUSH; /* let what was posted finish, then tell the receiver */
    return rvx__rndv_again(t, op, 1);
}

/* Receiver: register the next piece of the buffer (phase 2's range first, then chunks), and the
 * pieces after it as long as they are cache hits: a buffer received into before is registered
 * at once and all its keys go with the CTS; a first-time one, a piece per step, each announced
 * by a KEY frame as soon as it is registered. */
RVX_COLD rvx_status_t rvx__pipe_rreg(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    int first = 1;
    while (op->creg_end < op->eff) {
        size_t want = RVX_PIPE_BOUNCE > 0 && op->creg_end == op->p1_end ? (size_t)RVX_PIPE_BOUNCE : (size_t)RVX_PIPE_CHUNK;
        size_t end = rvx__pipe_cut(t, op, op->creg_end, want);
        rvx__tag_chunk_t *c = &op->chunks[op->nchunks];
        rvx_status_t st;
#if RVX__TAG_RCACHE
        int hit = rvx__rcache_find(&t->rcache, op->buf + op->creg_end, end - op->creg_end) != NULL;
#else
        int hit = 0;
#endif
        if (!first && !hit) break;
        if ((st = rvx__tag_reg(t, op->buf + op->creg_end, end - op->creg_end, &c->mem)) != RVX_OK) {
            c->mem = NULL;
            return st;
        }
        c->end = end;
        op->nchunks++;
        op->creg_end = end;
        first = 0;
        if (!hit) {
            op->pinned = 0;
            break;
        }
    }
    return RVX_OK;
}

/* Receiver: the RTR (rtr) or a KEY frame, with the keys registered and not yet sent (as many as
 * fit) or, in a KEY frame, the status of a failed registration; 0 if the ring is full. */
RVX_COLD int rvx__pipe_send_keys(struct rvx__tag_state *t, rvx__tag_op_t *op, int rtr)
{
    uint8_t b[RVX__RNDV_RTR_LEN + RVX__PIPE_KEYS_MAX * RVX__PIPE_KEY_LEN];
    size_t h = rtr ? RVX__RNDV_RTR_LEN : 16;
    unsigned n = op->nchunks - op->nkeys, i;
    if (n > RVX__PIPE_KEYS_MAX) n = RVX__PIPE_KEYS_MAX;
    if (!rtr && op->status) n = 0;
    rvx__tag_st32(b, op->peer_id);
    if (rtr) {
        rvx__tag_st32(b + 4, op->id);
        rvx__tag_st64(b + 8, op->eff);
        rvx__tag_st64(b + 16, (uint64_t)(uintptr_t)op->buf);
        rvx__tag_st32(b + 24, n);
        rvx__tag_st32(b + 28, 0);
    } else {
        rvx__tag_st32(b + 4, (uint32_t)op->status);
        rvx__tag_st32(b + 8, n);
        rvx__tag_st32(b + 12, 0);
    }
    for (i = 0; i < n; i++) {
        rvx__tag_chunk_t *c = &op->chunks[op->nkeys + i];
        rvx__tag_st64(b + h + i * RVX__PIPE_KEY_LEN, c->end);
        rvx_rkey_pack(c->mem, b + h + i * RVX__PIPE_KEY_LEN + 8);
    }
    if (!rvx__tag_ctrl(op->ep, rtr ? RVX__TF_RTR : RVX__TF_KEY, b, h + n * RVX__PIPE_KEY_LEN)) return 0;
    op->nkeys += n;
    t->n_pipe_keys += !rtr;
    return 1;
}
#endif

/* Has the transport let go of everything this op posted? */
static inline int rvx__rndv_quiet(const rvx__tag_op_t *op)
{
    unsigned i;
#if RVX_LANES > 1
    unsigned l;
    for (l = 0; l < RVX_LANES; l++)
        if ((op->lposted & (1u << l)) && (l ? op->lreq[l - 1].status : op->tlreq.status) == RVX_INPROGRESS)
            return 0;
    for (i = 0; i < op->nchunks; i++) /* a chunk may be partly posted */
        for (l = 0; l < RVX_LANES; l++)
            if ((op->chunks[i].lposted & (1u << l)) &&
                (l ? op->chunks[i].lreq[l - 1].status : op->chunks[i].req.status) == RVX_INPROGRESS)
                return 0;
#endif
    if ((op->flags & RVX__F_ISSUED) && op->tlreq.status == RVX_INPROGRESS) return 0;
    for (i = 0; i < op->nposted; i++)
        if (op->chunks[i].req.status == RVX_INPROGRESS) return 0;
    return 1;
}

/* One step of a rendezvous operation; 1 if it moved. Ops that wait on the transport or on room
 * in a ring put themselves back on the ready list. */
RVX_COLD int rvx__rndv_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st;
    unsigned char body[24 + RVX_RKEY_PACKED_SIZE];
    (void)st;
    switch (op->state) {
    case RVX__SS_ZCOPY:
        return rvx__tag_zcopy_step(t, op);
    case RVX__RS_ZOMBIE: /* req is NULL (already told) or waits for this (endpoint destroyed) */
        if (!rvx__rndv_quiet(op)) return rvx__rndv_again(t, op, 0);
        rvx__tag_done(t, op, (rvx_status_t)op->status);
        return 1;
    /* ---- receiver ---- */
    case RVX__RS_START:
#if RVX_RNDV == RVX_RNDV_GET
        st = RVX_OK;
        if (op->eff) {
            if (!op->mem && (st = rvx__tag_reg(t, op->buf, op->eff, &op->mem)) != RVX_OK) op->mem = NULL;
            if (st == RVX_OK) st = rvx__rndv_unpack(op);
            if (st != RVX_OK) {
                op->status = st;
                op->state = RVX__RS_ATS;
                return rvx__rndv_again(t, op, 1);
            }
        }
        op->state = RVX__RS_GET;
        /* fall through */
    case RVX__RS_GET:
        if (op->eff) {
#if RVX_LANES > 1
            if (!(op->flags & RVX__F_LFLUSH)) {
                st = rvx__rndv_lanes(t, op, RVX__LW_GET);
                if (st == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
                op->status = st;
                /* a part posted behind an earlier failure of its lane comes back canceled; the
                 * lane's flush returns the failure itself */
                if (st == RVX_ERR_CANCELED) op->flags |= RVX__F_LFLUSH;
            }
            if (op->flags & RVX__F_LFLUSH) {
                st = rvx__rndv_lanes(t, op, RVX__LW_FLUSH);
                if (st == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
                op->flags &= ~RVX__F_LFLUSH;
                if (st != RVX_OK) op->status = st;
            }
#else
            RVX__RNDV_ISSUE(op, rvx__tl_get_zcopy(&op->ep->tl, op->buf, op->eff, &op->mem->tl,
                                                  op->raddr, &op->rkey, &op->tlreq));
            op->status = op->tlreq.status;
#endif
        }
        op->state = RVX__RS_ATS;
        /* fall through */
    case RVX__RS_ATS:
        rvx__tag_st32(body, op->peer_id);
        rvx__tag_st32(body + 4, (uint32_t)op->status);
        if (!rvx__tag_ctrl(op->ep, RVX__TF_ATS, body, 8)) return rvx__rndv_again(t, op, 0);
        rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status));
        return 1;
#else
#if RVX_RNDV == RVX_RNDV_PUT
        if (op->eff > op->done && !op->status) {
            st = rvx__tag_reg(t, op->buf, op->eff, &op->mem);
            if (st != RVX_OK) { /* ask for nothing more; the receive fails */
                op->mem = NULL;
                op->status = st;
                op->eff = op->done;
            }
        }
#elif RVX_RNDV == RVX_RNDV_PIPELINE
        if (op->eff > op->done && !op->status) {
            /* the CTS goes once the first piece is registered (or all of a buffer left pinned) */
            op->p1_end = op->creg_end = op->done;
            op->pinned = 1;
            op->chunks = (rvx__tag_chunk_t *)calloc(RVX__PIPE_KCAP(op->eff), sizeof(*op->chunks));
            st = op->chunks ? rvx__pipe_rreg(t, op) : RVX_ERR_NO_MEMORY;
            if (st != RVX_OK) { /* ask for nothing more; the receive fails */
                op->status = st;
                op->eff = op->done;
            }
        }
#endif
        op->state = RVX__RS_RTR;
        /* fall through */
    case RVX__RS_RTR:
#if RVX_RNDV == RVX_RNDV_PIPELINE
        if (!rvx__pipe_send_keys(t, op, 1)) return rvx__rndv_again(t, op, 0);
        if (op->eff <= op->done) {
            rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status));
            return 1;
        }
        op->state = RVX__RS_WAIT; /* for FIN; meanwhile the rest is registered and its keys sent */
        if (op->creg_end < op->eff || op->nkeys < op->nchunks) return rvx__rndv_again(t, op, 1);
        t->n_pipe_rpinned += op->pinned;
        return 1;
    case RVX__RS_WAIT: { /* the next piece registered, its key sent */
        unsigned had = op->nchunks;
        if (!op->status && op->nkeys == op->nchunks && op->creg_end < op->eff &&
            (st = rvx__pipe_rreg(t, op)) != RVX_OK)
            op->status = st; /* tell the sender: it stops, and its FIN fails the receive */
        t->n_pipe_rchunks += op->nchunks - had;
        if (op->nkeys < op->nchunks || (op->status && op->creg_end < op->eff)) {
            if (!rvx__pipe_send_keys(t, op, 0)) return rvx__rndv_again(t, op, 0);
            if (op->status) op->creg_end = op->eff; /* told: nothing more to register */
        }
        if (op->nkeys < op->nchunks || op->creg_end < op->eff) return rvx__rndv_again(t, op, 1);
        return 1;
    }
#else
        rvx__tag_st32(body, op->peer_id);
        rvx__tag_st32(body + 4, op->id);
        rvx__tag_st64(body + 8, op->eff);
#if RVX_RNDV != RVX_RNDV_AM
        rvx__tag_st64(body + 16, (uint64_t)(uintptr_t)op->buf);
        if (op->mem) rvx_rkey_pack(op->mem, body + 24);
        else memset(body + 24, 0, RVX_RKEY_PACKED_SIZE);
#endif
        if (!rvx__tag_ctrl(op->ep, RVX__TF_RTR, body, RVX__RNDV_RTR_LEN)) return rvx__rndv_again(t, op, 0);
        if (op->eff <= op->done) {
            rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status));
        } else {
            op->state = RVX__RS_WAIT; /* for FIN / DATA */
        }
        return 1;
#endif
#endif
    /* ---- sender ---- */
#if RVX_RNDV == RVX_RNDV_PUT
    case RVX__SS_PUT:
        if ((st = rvx__rndv_unpack(op)) != RVX_OK) {
            op->status = st;
            op->state = RVX__SS_FIN;
            return rvx__rndv_again(t, op, 1);
        }
#if RVX_LANES > 1
        st = rvx__rndv_lanes(t, op, RVX__LW_PUT);
        if (st == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
        op->status = st;
#else
        RVX__RNDV_ISSUE(op, rvx__tl_put_zcopy(&op->ep->tl, op->buf, op->eff, &op->mem->tl, op->raddr,
                                              &op->rkey, &op->tlreq));
        op->status = op->tlreq.status;
#endif
        op->state = RVX__SS_FLUSH;
        goto flush;
#endif
#if RVX_RNDV == RVX_RNDV_PIPELINE
    case RVX__SS_PIPE:
        return rvx__pipe_step(t, op);
#endif
#if RVX_RNDV == RVX_RNDV_PUT || RVX_RNDV == RVX_RNDV_PIPELINE
    case RVX__SS_FLUSH:
#if RVX_RNDV == RVX_RNDV_PUT
    flush:
#endif
        if (!rvx__rndv_quiet(op)) return rvx__rndv_again(t, op, 0); /* pipeline writes in flight */
#if RVX_LANES > 1
        /* every lane written on: FIN goes on lane 0 and must not overtake their data */
        st = rvx__rndv_lanes(t, op, RVX__LW_FLUSH);
        if (st == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
        /* a write canceled behind a lane's earlier failure: the flush names the failure */
        if (st != RVX_OK && (!op->status || op->status == RVX_ERR_CANCELED)) op->status = st;
#else
        RVX__RNDV_ISSUE(op, rvx__tl_ep_flush(&op->ep->tl, &op->tlreq));
        if (op->tlreq.status != RVX_OK && !op->status) op->status = op->tlreq.status;
#endif
        op->state = RVX__SS_FIN;
        /* fall through */
    case RVX__SS_FIN:
        rvx__tag_st32(body, op->peer_id);
        rvx__tag_st32(body + 4, (uint32_t)op->status);
        if (!rvx__tag_ctrl(op->ep, RVX__TF_FIN, body, 8)) return rvx__rndv_again(t, op, 0);
#if RVX_RNDV == RVX_RNDV_PIPELINE && RVX__TAG_RCACHE
        if (!op->status && op->eff > op->p1_end) {
            /* its chunks stay registered in the cache; register phase 2's range too (once, after
             * the request completed), so that next time the whole buffer is a hit: no pipeline */
            uint8_t *buf = op->buf;
            size_t p1 = op->p1_end, p2 = op->p2_end, eff = op->eff;
            int ok = 1;
            rvx_mem_t *mem;
            if (!op->pinned && p2 > p1) ok = 0;
            rvx__tag_done(t, op, RVX_OK);
            if (!ok && rvx__tag_reg(t, buf + p1, p2 - p1, &mem) == RVX_OK) {
                rvx__tag_dereg(t, mem);
                ok = 1;
            }
            if (ok) {
                unsigned slot = rvx__pipe_memo_slot((uintptr_t)buf);
                t->memo[slot].addr = (uintptr_t)buf;
                t->memo[slot].len = eff;
            }
            return 1;
        }
#endif
        rvx__tag_done(t, op, (rvx_status_t)op->status);
        return 1;
#endif
    default:
        return 0;
    }
}

RVX_COLD int rvx__rndv_run_ready(struct rvx__tag_state *t)
{
    rvx__tag_link_t todo;
    int n = 0;
    /* take the list as it is: ops that put themselves back run on the next call */
    todo.next = t->ready.next;
    todo.prev = t->ready.prev;
    todo.next->prev = &todo;
    todo.prev->next = &todo;
    rvx__tag_link_init(&t->ready);
    while (todo.next != &todo) {
        rvx__tag_op_t *op = RVX_CONTAINER_OF(todo.next, rvx__tag_op_t, rlink);
        rvx__tag_link_del(&op->rlink);
        op->flags &= ~RVX__F_READY;
        n += rvx__rndv_step(t, op);
    }
    return n;
}

/* End an operation early with `st` (peer failed, endpoint destroyed). If the transport still
 * holds a transfer of it, the user's request completes now and the op lingers until it is let
 * go (a zombie, polled by progress). */
static void rvx__rndv_fail(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx_status_t st)
{
    rvx__tag_peer_t *p = op->ep ? &t->peers[op->ep->rank] : NULL;
    if (op->flags & RVX__F_SQ) rvx__tag_sq_del(t, op);
    if (p && p->cur == op) p->cur = NULL;
    if (op->kind == RVX__OP_UNEXP) {
        if (st == RVX_ERR_PEER_FAILED) {
            /* cut off between fragments: it stays in the queue, and the receive that takes it
             * gets the status (a receive posted for it must not wait for ever) */
            rvx__tag_release(t, op);
            op->status = st;
            op->state = RVX__US_DONE;
            op->flags &= ~RVX__F_ACTIVE;
            rvx__tag_link_del(&op->alink);
            t->w->tag_pending--;
            return;
        }
        rvx__tag_q_del(&t->unx_head, &t->unx_tail, op);
        rvx__tag_done(t, op, st);
        return;
    }
    if (op->state == RVX__RS_ZOMBIE) {
        if (st == RVX_ERR_CANCELED) { /* the endpoint goes: nothing more will complete */
            op->nposted = 0;
            op->flags &= ~RVX__F_ISSUED;
#if RVX_LANES > 1
            {
                unsigned i;
                op->lposted = 0;
                for (i = 0; i < op->nchunks; i++) op->chunks[i].lposted = 0;
            }
#endif
            rvx__tag_done(t, op, RVX_OK);
        }
        return;
    }
    if (st != RVX_ERR_CANCELED && !rvx__rndv_quiet(op)) {
        if (op->req) op->req->status = st;
        op->req = NULL;
        op->state = RVX__RS_ZOMBIE;
        rvx__tag_ready(t, op);
        return;
    }
    rvx__tag_done(t, op, st);
}

#endif /* RVX_PROTO_RNDV_H */
