/* rvx/proto/rndv/get.h: the GET rendezvous protocol (RVX_RNDV=RVX_RNDV_GET, the default).
 *
 *   sender                                      receiver
 *   register buf; RTS (tag, length, id,   --->  matched: register the buffer, unpack the key,
 *   buf's address and packed key)               read (get_zcopy, striped across lanes)
 *   complete                              <---  ATS (status); complete
 *
 * The sender moves nothing after the RTS; the ATS tells it the receiver has read (or failed). */
#ifndef RVX_PROTO_RNDV_GET_H
#define RVX_PROTO_RNDV_GET_H

#define RVX__RNDV_RTS_LEN(mlen) ((size_t)(RVX__TAG_RTS_HDR + 8 + RVX_RKEY_PACKED_SIZE))
#define RVX__RNDV_RTR_LEN     ((size_t)16) /* GET takes no RTR: one of this length is malformed */
#define RVX__RNDV_RTS_ADDR    1
#define RVX__RNDV_PHASE1      0
#define RVX__RNDV_SEND_REG    1
#define RVX__RNDV_RECV_ID     0
#define RVX__RNDV_PEER_WRITES 0
#include "common.h"

/* The request-channel frame of a queued send: the RTS. */
static int rvx__rndv_emit(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    (void)t;
    return rvx__rndv_emit_rts(op);
}

/* ATS: the receiver has read the buffer (or failed to); the send completes. */
RVX_COLD int rvx__get_rx_ats(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    int32_t st;
    if (len != 8 || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__KIND_SEND)) ||
        op->state != RVX__SS_WAIT)
        return 0;
    st = rvx__rndv_peer_status(ep, rvx__tag_ld32(b + 4));
    rvx__tag_done(t, op, st < 0 && st != RVX_ERR_MSG_TRUNCATED ? (rvx_status_t)st : RVX_OK);
    return 1;
}

/* Rendezvous frames: 1 if taken, 0 if malformed (counted by the caller). */
RVX_COLD int rvx__rndv_rx(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, unsigned type,
                          const uint8_t *b, size_t len)
{
    switch (type) {
    case RVX__TF_RTS: return rvx__rndv_rx_rts(t, ep, chan, b, len);
    case RVX__TF_ATS: return rvx__get_rx_ats(t, ep, b, len);
    default:          return 0;
    }
}

/* Receiver, RS_ATS: tell the sender how the read went, and complete. */
RVX_COLD int rvx__get_send_ats(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!rvx__rndv_ctrl_status(op, RVX__TF_ATS, (uint32_t)op->status)) return rvx__rndv_again(t, op, 0);
    return rvx__rndv_recv_done(t, op);
}

/* Receiver, RS_GET: read the sender's buffer. With lanes, a part posted behind an earlier failure
 * of its lane comes back canceled: a flush of the lanes (LFLUSH) returns the failure itself. */
RVX_COLD int rvx__get_read(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st;
    if (op->eff && !(op->flags & RVX__F_LFLUSH)) {
        if ((st = rvx__rndv_xfer(t, op, RVX__XFER_GET)) == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
        op->status = st;
        if (RVX_LANES > 1 && st == RVX_ERR_CANCELED) op->flags |= RVX__F_LFLUSH;
    }
    if (op->flags & RVX__F_LFLUSH) {
        if ((st = rvx__rndv_xfer(t, op, RVX__XFER_FLUSH)) == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
        op->flags &= ~RVX__F_LFLUSH;
        if (st != RVX_OK) op->status = st;
    }
    op->state = RVX__RS_ATS;
    return rvx__get_send_ats(t, op);
}

/* Receiver, RS_START: register the buffer and unpack the sender's key; a failure goes straight
 * to the ATS. */
RVX_COLD int rvx__get_start(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st = RVX_OK;
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
    return rvx__get_read(t, op);
}

/* One step of a rendezvous operation; 1 if it moved. Ops that wait on the transport or on room
 * in a ring put themselves back on the ready list. */
RVX_COLD int rvx__rndv_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    switch (op->state) {
    case RVX__S_ZOMBIE: return rvx__rndv_zombie_step(t, op);
    case RVX__RS_START: return rvx__get_start(t, op);
    case RVX__RS_GET:   return rvx__get_read(t, op);
    case RVX__RS_ATS:   return rvx__get_send_ats(t, op);
    default:            return 0;
    }
}

#endif /* RVX_PROTO_RNDV_GET_H */
