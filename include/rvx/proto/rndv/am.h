/* rvx/proto/rndv/am.h: the AM rendezvous protocol (RVX_RNDV=RVX_RNDV_AM), for memory that cannot
 * be registered: nothing is registered and nothing moves by RMA.
 *
 *   sender                                      receiver
 *   RTS (tag, length, id)                 --->  matched
 *   DATA frames (id, offset, bytes)       <---  RTR (ids, length wanted)
 *   through the request channel; complete --->  copied out; complete when the last byte is in
 */
#ifndef RVX_PROTO_RNDV_AM_H
#define RVX_PROTO_RNDV_AM_H

#define RVX__RNDV_RTS_LEN(mlen) ((size_t)RVX__TAG_RTS_HDR)
#define RVX__RNDV_RTR_LEN     ((size_t)16)
#define RVX__RNDV_RTS_ADDR    0
#define RVX__RNDV_PHASE1      0
#define RVX__RNDV_SEND_REG    0
#define RVX__RNDV_RECV_ID     1
#define RVX__RNDV_PEER_WRITES 0
#include "common.h"

/* The DATA frames of a send, as many as the ring takes; 1 when all are in it. */
RVX_COLD int rvx__am_emit_data(rvx__tag_op_t *op)
{
    rvx__tl_ep_t *tl = &op->ep->tl[0];
    uint8_t *b;
    while (op->done < op->eff) {
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

/* The request-channel frames of a queued send: the RTS, later the data. */
static int rvx__rndv_emit(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    (void)t;
    return op->state == RVX__SS_RTS ? rvx__rndv_emit_rts(op) : rvx__am_emit_data(op);
}

/* RTR: how much the receiver wants; the data joins the peer's send queue, behind whatever is
 * queued to it already. */
RVX_COLD int rvx__am_rx_rtr(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    if (len != RVX__RNDV_RTR_LEN || !(op = rvx__rndv_rtr_op(t, ep, b, len, RVX__RNDV_RTR_LEN))) return 0;
    op->peer_id = rvx__tag_ld32(b + 4);
    op->eff = (size_t)rvx__load_u64(b + 8);
    if (!op->eff) {
        rvx__tag_done(t, op, RVX_OK);
    } else {
        op->state = RVX__SS_DATA;
        op->done = 0;
        rvx__tag_sq_push(t, op);
    }
    return 1;
}

/* DATA: a piece of the message, copied where its offset says. */
RVX_COLD int rvx__am_rx_data(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    uint64_t off;
    size_t n = len - 16;
    if (chan != RVX__CHAN_REQUEST || len <= 16 ||
        !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__KIND_RECV)) || op->state != RVX__RS_WAIT)
        return 0;
    off = rvx__load_u64(b + 8);
    if (off > op->eff || n > op->eff - off || n > op->eff - op->done) return 0;
    memcpy(op->buf + off, b + 16, n);
    op->done += n;
    if (op->done == op->eff) rvx__rndv_recv_done(t, op);
    return 1;
}

/* Rendezvous frames: 1 if taken, 0 if malformed (counted by the caller). */
RVX_COLD int rvx__rndv_rx(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, unsigned type,
                          const uint8_t *b, size_t len)
{
    switch (type) {
    case RVX__TF_RTS:  return rvx__rndv_rx_rts(t, ep, chan, b, len);
    case RVX__TF_RTR:  return rvx__am_rx_rtr(t, ep, b, len);
    case RVX__TF_DATA: return rvx__am_rx_data(t, ep, chan, b, len);
    default:           return 0;
    }
}

/* Receiver, RS_RTR: ask for the data (or for nothing, after a failure: the receive completes). */
RVX_COLD int rvx__am_send_rtr(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    uint8_t body[RVX__RNDV_RTR_LEN];
    rvx__tag_st32(body, op->peer_id);
    rvx__tag_st32(body + 4, op->id);
    rvx__tag_st64(body + 8, op->eff);
    if (!rvx__tag_ctrl(op->ep, RVX__TF_RTR, body, RVX__RNDV_RTR_LEN)) return rvx__rndv_again(t, op, 0);
    if (op->eff <= op->done) return rvx__rndv_recv_done(t, op);
    op->state = RVX__RS_WAIT; /* for DATA */
    return 1;
}

/* One step of a rendezvous operation; 1 if it moved. Ops that wait on room in a ring put
 * themselves back on the ready list. */
RVX_COLD int rvx__rndv_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    switch (op->state) {
    case RVX__S_ZOMBIE: return rvx__rndv_zombie_step(t, op);
    case RVX__RS_START: /* nothing to register: the RTR goes at once */
        op->state = RVX__RS_RTR;
        return rvx__am_send_rtr(t, op);
    case RVX__RS_RTR:   return rvx__am_send_rtr(t, op);
    default:            return 0;
    }
}

#endif /* RVX_PROTO_RNDV_AM_H */
