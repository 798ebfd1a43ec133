/* rvx/tl/dc/batch.h: dc_mlx5's batch scope (proto/batch.h): the state of the DCI the endpoint
 * holds copied into a local the compiler keeps in registers, 8-byte puts written from it back to
 * back, then one doorbell. The batch keeps one DCI (its work holds it) and one address segment.
 * Between begin and end nothing else touches the DCI (the scope's rule), so the copy stays exact;
 * any other post in the scope goes through rvx__dc_batch_sync/_reload. */
#ifndef RVX_TL_DC_BATCH_H
#define RVX_TL_DC_BATCH_H

typedef struct rvx__dc_batch {
    rvx__dc_ep_t  *ep;
    rvx__dc_dci_t *d;
    uint8_t       *buf;
    uint64_t       ctrl_w8;
    uint32_t        mask, pi;
    uint32_t        fast;      /* the fast path goes while pi is before this */
    uint32_t        pi0;       /* pi, and the queue's sig_left, at the last reload */
    uint16_t        sig0;
} rvx__dc_batch_t;

/* The DCI's state into b (again after a post that went through the endpoint: it may have taken
 * another DCI). A DCI without the one-WQEBB form has limit pi: every put goes the general way. */
RVX_INLINE void rvx__dc_batch_reload(rvx__dc_batch_t *b)
{
    rvx__dc_dci_t *d = b->ep->dci;
    b->d = d;
    b->buf = d->sq.buf;
    b->mask = d->sq.mask;
    b->pi0 = b->pi = d->sq.pi;
    b->sig0 = d->sq.sig_left;
    b->fast = rvx__mlx5_batch_fast(&d->sq, d->pi_fast);
    b->ctrl_w8 = d->ctrl_w8;
}

RVX_INLINE void rvx__dc_batch_begin(rvx__dc_ep_t *ep, rvx__dc_batch_t *b)
{
    b->ep = ep;
    rvx__dc_batch_reload(b);
}

/* b's state back into the DCI: the WQEs written since the last sync are "more coming" ones. */
RVX_INLINE void rvx__dc_batch_sync(rvx__dc_batch_t *b)
{
    rvx__dc_dci_t *d = b->d;
    rvx__mlx5_batch_sync(&d->sq, b->pi, b->pi0, b->sig0);
}

/* A put of the batch: 8 bytes from registers (as rvx__dc_put8, to the queue only); other sizes,
 * no DCI, a full queue and the WQE that asks for a completion through the endpoint. */
RVX_INLINE rvx_status_t rvx__dc_batch_put_short(rvx__dc_batch_t *b, const void *src, size_t len,
                                                uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
#if defined(__x86_64__) && RVX_DC_DCI_POLICY != RVX_DC_DCI_FIXED
    if (__builtin_constant_p(len) && len == 8) {
        uint32_t pi = b->pi;
        rvx__mlx5_bb_t bb;
        if (RVX_LIKELY((int32_t)(pi - b->fast) < 0)) {
            rvx__mlx5_bb_dc_write8(&bb, b->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &b->ep->av_lo,
                                   src, raddr, rkey);
            rvx__mlx5_bb_store(b->buf + ((size_t)(pi & b->mask) << RVX__MLX5_BB_SHIFT), &bb);
            b->pi = pi + 1;
            return RVX_OK;
        }
    }
#endif
    {
        rvx_status_t st;
        rvx__dc_batch_sync(b);
        st = rvx__dc_put_short_more(b->ep, src, len, raddr, rkey);
        rvx__dc_batch_reload(b);
        return st;
    }
}

/* The end of the scope: the state back, one doorbell for every WQE of the batch. */
RVX_INLINE void rvx__dc_batch_end(rvx__dc_batch_t *b)
{
    rvx__dc_batch_sync(b);
    rvx__dc_ep_ring(b->ep);
}

#endif /* RVX_TL_DC_BATCH_H */
