/* rvx/tl/mlx5/batch.h: the batch scope (proto/batch.h) of both mlx5 transports, once: the
 * state of the queue the endpoint posts to, copied into a local the compiler keeps in registers,
 * 8-byte puts written from it back to back, then one doorbell. Between begin and end nothing else
 * touches that queue (the scope's rule), so the copy stays exact; any other post in the scope
 * goes through the endpoint between a sync and a reload.
 *
 * The transport's steps (RVX__MLX5_NET(x), bound in its decl.h), defined in its rma.h before it
 * includes this file:
 *   ep_q(ep)              the queue the endpoint's next WQE goes to (its ctrl_w8 and sq)
 *   q_fast(q)             the one-WQEBB put goes while pi is before this (sq.pi_limit: room,
 *                         no completion to ask for, no hold)
 *   ep_av(ep, &av)        the endpoint's address segment (dc_mlx5), kept in the batch
 *   bb_put8(bb, ctrl_w8, pi, av, src, raddr, rkey)   the 8-byte put's WQEBB, built in registers;
 *                         RVX__MLX5_NET_BB_PUT8 is 0 where the transport has no such form
 *   put_short_m(ep, src, len, raddr, rkey, more)     the endpoint's put, with more = 1
 *   ep_ring(ep)           the doorbell for what the endpoint's "more" posts left */
#ifndef RVX_TL_MLX5_BATCH_H
#define RVX_TL_MLX5_BATCH_H

typedef struct rvx__mlx5_batch {
    RVX__MLX5_NET(ep_t) *ep;
    RVX__MLX5_NET(q_t)  *q;
    uint8_t             *buf;
    uint64_t             ctrl_w8;
    uint32_t             mask, pi;
    uint32_t             fast; /* the fast path goes while pi is before this */
#if defined(__x86_64__)
    __m128i              av;   /* the address segment, if the transport has one */
#endif
} rvx__mlx5_batch_t;

/* The queue's state into b (again after a post that went through the endpoint: on dc_mlx5 it may
 * have taken another DCI). */
RVX_INLINE void rvx__mlx5_batch_reload(rvx__mlx5_batch_t *b)
{
    RVX__MLX5_NET(q_t) *q = RVX__MLX5_NET(ep_q)(b->ep);
    b->q = q;
    b->buf = q->sq.buf;
    b->mask = q->sq.mask;
    b->pi = q->sq.pi;
    b->fast = RVX__MLX5_NET(q_fast)(q); /* past it, the queue's own path does the WQE */
    b->ctrl_w8 = q->ctrl_w8;
}

RVX_INLINE void rvx__mlx5_batch_begin(RVX__MLX5_NET(ep_t) *ep, rvx__mlx5_batch_t *b)
{
    b->ep = ep;
#if defined(__x86_64__)
    (void)RVX__MLX5_NET(ep_av)(ep, &b->av);
#endif
    rvx__mlx5_batch_reload(b);
}

/* The queue's own pi stays as the last reload left it (nothing else posts to it
 * in the scope): the WQEs since are the ones between its pi and b's. */
RVX_INLINE uint32_t rvx__mlx5_batch_written(const rvx__mlx5_batch_t *b)
{
    return b->pi - b->q->sq.pi;
}

RVX_INLINE uint8_t *rvx__mlx5_batch_slot(const rvx__mlx5_batch_t *b, uint32_t pi)
{
    return b->buf + ((size_t)(pi & b->mask) << RVX__MLX5_BB_SHIFT);
}

/* b's state back into the queue: the one-WQEBB WQEs written since the last reload are "more
 * coming" ones (none of them asks for a completion: the limit stopped before that WQE). */
RVX_INLINE void rvx__mlx5_batch_sync(rvx__mlx5_batch_t *b)
{
    rvx__mlx5_sq_t *sq = &b->q->sq;
    uint32_t n = rvx__mlx5_batch_written(b);
    if (n) rvx__mlx5_more(sq, b->pi - 1, b->pi);
}

/* A put of the batch: 8 bytes from registers, to the queue only (as the single put without its
 * doorbell); other sizes, a full queue and the WQE that asks for a completion through the
 * endpoint. */
RVX_INLINE rvx_status_t rvx__mlx5_batch_put_short(rvx__mlx5_batch_t *b, const void *src, size_t len,
                                                  uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    rvx_status_t st;
#if defined(__x86_64__) && RVX__MLX5_NET_BB_PUT8
    if (__builtin_constant_p(len) && len == 8) {
        uint32_t pi = b->pi;
        rvx__mlx5_bb_t bb;
        if (RVX_LIKELY((int32_t)(pi - b->fast) < 0)) {
            RVX__MLX5_NET(bb_put8)(&bb, b->ctrl_w8, pi, b->av, src, raddr, rkey);
            rvx__mlx5_bb_store(rvx__mlx5_batch_slot(b, pi), &bb);
            b->pi = pi + 1;
            return RVX_OK;
        }
    }
#endif
    rvx__mlx5_batch_sync(b);
    st = RVX__MLX5_NET(put_short_m)(b->ep, src, len, raddr, rkey, 1);
    rvx__mlx5_batch_reload(b);
    return st;
}

/* The end of the scope: one doorbell for every WQE of the batch. When the newest WQE is the
 * batch's own, the commit names it from b's registers; else the endpoint's ring tells the NIC of
 * what the general posts in the scope left, if anything. */
RVX_INLINE void rvx__mlx5_batch_end(rvx__mlx5_batch_t *b)
{
    rvx__mlx5_sq_t *sq = &b->q->sq;
    uint32_t n = rvx__mlx5_batch_written(b);
    if (n) {
        rvx__mlx5_commit(sq, b->pi, rvx__mlx5_batch_slot(b, b->pi - 1), RVX__MLX5_DB_ONLY, NULL);
        return;
    }
    RVX__MLX5_NET(ep_ring)(b->ep);
}

#endif /* RVX_TL_MLX5_BATCH_H */
