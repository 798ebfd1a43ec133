/* rvx/proto/batch.h: a batch of operations on one endpoint, one doorbell (docs/api.md, "Batches").
 *
 *     rvx_batch_t b;
 *     rvx_batch_begin(&b, ep);
 *     for (i = 0; i < 16; i++) rvx_batch_put(&b, &v[i], 8, raddr + 8 * i, &rkey);
 *     rvx_batch_end(&b);
 *
 * Between begin and end only batch calls on that endpoint (as between rdma-core's ibv_wr_start
 * and ibv_wr_complete): the transport keeps the queue's state in the batch, where the compiler
 * keeps it in registers. An operation of the batch may not reach the NIC before the end, except
 * where the call itself must wait (a full send queue, no room for a message): it rings first. */
#ifndef RVX_PROTO_BATCH_H
#define RVX_PROTO_BATCH_H

typedef struct rvx_batch {
    rvx_ep_t       *ep;
    rvx__tl_batch_t tl;
} rvx_batch_t;

RVX_INLINE void rvx_batch_begin(rvx_batch_t *b, rvx_ep_t *ep)
{
    b->ep = ep;
    rvx__tl_batch_begin(&ep->tl[0], &b->tl);
}

/* rvx_put's arguments and statuses; puts larger than RVX_PUT_SHORT_MAX go at once (they ring). */
RVX_INLINE rvx_status_t rvx_batch_put(rvx_batch_t *b, const void *buf, size_t len, uint64_t raddr,
                                      const rvx_rkey_t *rkey)
{
    rvx_status_t st;
    RVX__CHECK_RMA(b->ep, buf, len, rkey);
    if (len <= RVX_PUT_SHORT_MAX) return rvx__tl_batch_put_short(&b->tl, buf, len, raddr, rkey);
    rvx__tl_batch_sync(&b->tl);
    st = rvx__tl_put_bcopy(&b->ep->tl[0], buf, len, raddr, rkey);
    rvx__tl_batch_reload(&b->tl);
    return st;
}

#if RVX_AM
/* rvx_am_short's arguments and statuses. */
RVX_INLINE rvx_status_t rvx_batch_am_short(rvx_batch_t *b, unsigned id, const uint64_t *args,
                                           unsigned nargs)
{
    rvx_status_t st;
    rvx__tl_batch_sync(&b->tl);
    st = rvx__am_send(b->ep, RVX__CHAN_REQUEST, id, RVX__AM_SHORT, args, nargs, NULL, 0, 0, 1);
    rvx__tl_batch_reload(&b->tl);
    return st;
}
#endif

/* The end: one doorbell for every operation of the batch. */
RVX_INLINE void rvx_batch_end(rvx_batch_t *b)
{
    rvx__tl_batch_end(&b->tl);
}

#endif /* RVX_PROTO_BATCH_H */
