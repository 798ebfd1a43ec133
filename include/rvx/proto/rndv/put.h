/* rvx/proto/rndv/put.h: the PUT rendezvous protocol (RVX_RNDV=RVX_RNDV_PUT).
 *
 *   sender                                      receiver
 *   register buf; RTS (tag, length, id)   --->  matched: register the buffer
 *   write (put_zcopy, striped across      <---  RTR (ids, length wanted, buffer address and key)
 *   lanes), flush every lane written on
 *   FIN (status); complete                --->  complete
 */
#ifndef RVX_PROTO_RNDV_PUT_H
#define RVX_PROTO_RNDV_PUT_H

#define RVX__RNDV_RTS_LEN(mlen) ((size_t)RVX__TAG_RTS_HDR)
#define RVX__RNDV_RTR_LEN     ((size_t)(24 + RVX_RKEY_PACKED_SIZE))
#define RVX__RNDV_RTS_ADDR    0
#define RVX__RNDV_PHASE1      0
#define RVX__RNDV_SEND_REG    1
#define RVX__RNDV_RECV_ID     1
#define RVX__RNDV_PEER_WRITES 1
#include "common.h"

/* The request-channel frame of a queued send: the RTS. */
static int rvx__rndv_emit(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    (void)t;
    return rvx__rndv_emit_rts(op);
}

/* RTR: where to write and how much; an empty one completes the send at once. */
RVX_COLD int rvx__put_rx_rtr(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    if (len != RVX__RNDV_RTR_LEN || !(op = rvx__rndv_rtr_op(t, ep, b, len, RVX__RNDV_RTR_LEN))) return 0;
    op->peer_id = rvx__tag_ld32(b + 4);
    op->eff = (size_t)rvx__load_u64(b + 8);
    op->raddr = rvx__load_u64(b + 16);
    memcpy(op->packed, b + 24, RVX_RKEY_PACKED_SIZE);
    if (!op->eff) {
        rvx__tag_done(t, op, RVX_OK);
    } else {
        op->state = RVX__SS_PUT;
        rvx__tag_ready(t, op);
    }
    return 1;
}

/* Rendezvous frames: 1 if taken, 0 if malformed (counted by the caller). */
RVX_COLD int rvx__rndv_rx(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, unsigned type,
                          const uint8_t *b, size_t len)
{
    switch (type) {
    case RVX__TF_RTS: return rvx__rndv_rx_rts(t, ep, chan, b, len);
    case RVX__TF_RTR: return rvx__put_rx_rtr(t, ep, b, len);
    case RVX__TF_FIN: return rvx__rndv_rx_fin(t, ep, b, len);
    default:          return 0;
    }
}

/* Receiver, RS_RTR: ask for the data (or for nothing, after a failure: the receive completes). */
RVX_COLD int rvx__put_send_rtr(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    uint8_t body[RVX__RNDV_RTR_LEN];
    rvx__tag_st32(body, op->peer_id);
    rvx__tag_st32(body + 4, op->id);
    rvx__tag_st64(body + 8, op->eff);
    rvx__tag_st64(body + 16, (uint64_t)(uintptr_t)op->buf);
    if (op->mem) rvx_rkey_pack(op->mem, body + 24);
    else memset(body + 24, 0, RVX_RKEY_PACKED_SIZE);
    if (!rvx__tag_ctrl(op->ep, RVX__TF_RTR, body, RVX__RNDV_RTR_LEN)) return rvx__rndv_again(t, op, 0);
    if (op->eff <= op->done) return rvx__rndv_recv_done(t, op);
    op->state = RVX__RS_WAIT; /* for FIN */
    return 1;
}

/* Receiver, RS_START: register the buffer the sender writes into. */
RVX_COLD int rvx__put_start(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->eff > op->done && !op->status) {
        rvx_status_t st = rvx__tag_reg(t, op->buf, op->eff, &op->mem);
        if (st != RVX_OK) { /* ask for nothing more; the receive fails */
            op->mem = NULL;
            op->status = st;
            op->eff = op->done;
        }
    }
    op->state = RVX__RS_RTR;
    return rvx__put_send_rtr(t, op);
}

/* Sender, SS_FIN: tell the receiver the data is in (or how it failed), and complete. */
RVX_COLD int rvx__put_send_fin(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!rvx__rndv_ctrl_status(op, RVX__TF_FIN, (uint32_t)op->status)) return rvx__rndv_again(t, op, 0);
    rvx__tag_done(t, op, (rvx_status_t)op->status);
    return 1;
}

/* Sender, SS_FLUSH: the writes reach the receiver's memory before FIN. */
RVX_COLD int rvx__put_flush(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!rvx__rndv_flushed(t, op)) return rvx__rndv_again(t, op, 0);
    return rvx__put_send_fin(t, op);
}

/* Sender, SS_PUT: write the buffer into the receiver's. */
RVX_COLD int rvx__put_write(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st;
    if ((st = rvx__rndv_unpack(op)) != RVX_OK) {
        op->status = st;
        op->state = RVX__SS_FIN;
        return rvx__rndv_again(t, op, 1);
    }
    if ((st = rvx__rndv_xfer(t, op, RVX__XFER_PUT)) == RVX_INPROGRESS) return rvx__rndv_again(t, op, 0);
    op->status = st;
    op->state = RVX__SS_FLUSH;
    return rvx__put_flush(t, op);
}

/* One step of a rendezvous operation; 1 if it moved. Ops that wait on the transport or on room
 * in a ring put themselves back on the ready list. */
RVX_COLD int rvx__rndv_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    switch (op->state) {
    case RVX__S_ZOMBIE: return rvx__rndv_zombie_step(t, op);
    case RVX__RS_START: return rvx__put_start(t, op);
    case RVX__RS_RTR:   return rvx__put_send_rtr(t, op);
    case RVX__SS_PUT:   return rvx__put_write(t, op);
    case RVX__SS_FLUSH: return rvx__put_flush(t, op);
    case RVX__SS_FIN:   return rvx__put_send_fin(t, op);
    default:            return 0;
    }
}

#endif /* RVX_PROTO_RNDV_PUT_H */
