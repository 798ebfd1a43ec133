/* rvx/tl/rc/batch.h: rc_mlx5's batch scope (proto/batch.h): the conn's send-queue state copied
 * into a local the compiler keeps in registers, 8-byte puts written from it back to back, then
 * one doorbell. Between begin and end nothing else touches the conn (the scope's rule), so the
 * copy stays exact; any other post in the scope goes through rvx__rc_batch_sync/_reload. */
#ifndef RVX_TL_RC_BATCH_H
#define RVX_TL_RC_BATCH_H

typedef struct rvx__rc_batch {
    rvx__rc_conn_t *c;
    rvx__rc_ep_t   *ep;
    uint8_t        *buf;
    uint64_t        ctrl_w8;
    uint32_t        mask, pi;
    uint32_t        fast;      /* the fast path goes while pi is before this */
    uint32_t        pi0;       /* pi, and the queue's sig_left, at the last reload */
    uint16_t        sig0;
} rvx__rc_batch_t;

/* The queue's state into b (again after a post that went through the conn). */
RVX_INLINE void rvx__rc_batch_reload(rvx__rc_batch_t *b)
{
    rvx__rc_conn_t *c = b->c;
    b->buf = c->sq.buf;
    b->mask = c->sq.mask;
    b->pi0 = b->pi = c->sq.pi;
    b->sig0 = c->sq.sig_left;
    b->fast = rvx__mlx5_batch_fast(&c->sq, c->sq.pi_limit);
    b->ctrl_w8 = c->ctrl_w8;
}

RVX_INLINE void rvx__rc_batch_begin(rvx__rc_ep_t *ep, rvx__rc_batch_t *b)
{
    b->ep = ep;
    b->c = ep->c;
    rvx__rc_batch_reload(b);
}

/* b's state back into the conn: the WQEs written since the last sync are "more coming" ones. */
RVX_INLINE void rvx__rc_batch_sync(rvx__rc_batch_t *b)
{
    rvx__rc_conn_t *c = b->c;
    rvx__mlx5_batch_sync(&c->sq, b->pi, b->pi0, b->sig0);
}

/* A put of the batch: 8 bytes from registers (as rvx__rc_put8, to the queue only); other sizes,
 * a full queue and the WQE that asks for a completion through the conn. */
RVX_INLINE rvx_status_t rvx__rc_batch_put_short(rvx__rc_batch_t *b, const void *src, size_t len,
                                                uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) {
        uint32_t pi = b->pi;
        rvx__mlx5_bb_t bb;
        if (RVX_LIKELY((int32_t)(pi - b->fast) < 0)) {
            rvx__mlx5_bb_write8(&bb, b->ctrl_w8, pi, src, raddr, rkey, 0);
            rvx__mlx5_bb_store(b->buf + ((size_t)(pi & b->mask) << RVX__MLX5_BB_SHIFT), &bb);
            b->pi = pi + 1;
            return RVX_OK;
        }
    }
#endif
    {
        rvx_status_t st;
        rvx__rc_batch_sync(b);
        st = rvx__rc_put_short_more(b->ep, src, len, raddr, rkey);
        rvx__rc_batch_reload(b);
        return st;
    }
}

/* The end of the scope: the state back, one doorbell for every WQE of the batch. */
RVX_INLINE void rvx__rc_batch_end(rvx__rc_batch_t *b)
{
    rvx__rc_batch_sync(b);
    rvx__mlx5_ring(&b->c->sq);
}

#endif /* RVX_TL_RC_BATCH_H */
