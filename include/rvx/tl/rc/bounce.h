/* rvx/tl/rc/bounce.h: rc_mlx5's bounce memory, where copies go: the worker's registered pool,
 * lent to conns in segments (rvx__rc_bseg_t), each a ring the conn copies into (hot) and gets back
 * in WQE order as its WQEs retire; taking a segment and waiting for room (cold). */
#ifndef RVX_TL_RC_BOUNCE_H
#define RVX_TL_RC_BOUNCE_H

/* Room in the conn's bounce segment for len bytes (64-aligned), given back in WQE order. A conn
 * without a segment points to the empty record, on which nothing fits, and takes one from the
 * worker's pool in the cold path. */
RVX_INLINE uint8_t *rvx__rc_bounce(rvx__rc_conn_t *c, size_t len)
{
    rvx__rc_bseg_t *s = c->bs;
    uint64_t pos = s->head, off;
    len = (len + 63) & ~(size_t)63;
    off = pos % RVX__RC_BOUNCE_SEG;
    if (off + len > RVX__RC_BOUNCE_SEG) { pos += RVX__RC_BOUNCE_SEG - off; off = 0; }
    if (RVX_UNLIKELY(pos + len > s->lim)) return rvx__rc_bounce_wait(c, len);
    s->head = pos + len;
    return s->buf + off;
}

/* Bounce space up to position b is free again. A conn without a segment has nothing of one in
 * flight: its empty record stays empty. */
RVX_INLINE void rvx__rc_bounce_back(rvx__rc_conn_t *c, uint64_t b)
{
    if (RVX_LIKELY(c->bs != &c->ifc->bnone)) c->bs->lim = b + RVX__RC_BOUNCE_SEG;
}

/* The bounce pool's memory, registered at the first copy (lanes that never copy never pay). */
RVX_COLD rvx_status_t rvx__rc_bpool_init(rvx__rc_iface_t *ifc)
{
    unsigned i, n = RVX__RC_BOUNCE_NSEG;
    ifc->bpool = (uint8_t *)rvx__map(RVX__RC_BPOOL_BYTES);
    ifc->bfree = (uint32_t *)calloc(n, sizeof(*ifc->bfree));
    ifc->bsegs = (rvx__rc_bseg_t *)calloc(n, sizeof(*ifc->bsegs));
    if (!ifc->bpool || !ifc->bfree || !ifc->bsegs) return RVX_ERR_NO_MEMORY;
    ifc->bpool_mr = rvx__mlx5_reg(ifc->ctx, ifc->bpool, RVX__RC_BPOOL_BYTES, "the bounce pool");
    if (!ifc->bpool_mr) return RVX_ERR_NO_RESOURCE;
    for (i = 0; i < n; i++) {
        ifc->bfree[i] = n - 1 - i;
        ifc->bsegs[i].buf = ifc->bpool + (size_t)i * RVX__RC_BOUNCE_SEG;
        ifc->bsegs[i].lkey = ifc->bpool_mr->lkey;
        rvx__mlx5_fslot_init(&ifc->bsegs[i].fs,
                             ifc->bpool + RVX__RC_BOUNCE_BYTES + (size_t)i * RVX__MLX5_FSLOT,
                             ifc->bpool_mr->lkey);
    }
    ifc->nbfree = n;
    return RVX_OK;
}

/* The segment s goes back to the pool (nothing of it is in flight); its holder points to the
 * empty record again, so its next copy asks for one. */
RVX_COLD void rvx__rc_bounce_put(rvx__rc_iface_t *ifc, rvx__rc_bseg_t *s)
{
    s->holder->bs = &ifc->bnone;
    s->holder = NULL;
    ifc->bfree[ifc->nbfree++] = (uint32_t)(s - ifc->bsegs);
}

/* A segment for c: a free one, or one whose holder has nothing in flight in it. Only the pool's
 * segments are looked at, never every peer. 1: c has one. */
RVX_COLD int rvx__rc_bounce_take(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c)
{
    unsigned i, n = RVX__RC_BOUNCE_NSEG;
    rvx__rc_bseg_t *s;
    if (!ifc->bpool && rvx__rc_bpool_init(ifc) != RVX_OK) return 0;
    for (i = 0; i < n && !ifc->nbfree; i++) {
        s = &ifc->bsegs[i];
        if (!s->holder) continue;
        if (s->lim - s->head == RVX__RC_BOUNCE_SEG) rvx__rc_bounce_put(ifc, s);
        else rvx__rc_sig_tail(s->holder); /* so that a CQE gives its segment back */
    }
    if (!ifc->nbfree) return 0;
    s = &ifc->bsegs[ifc->bfree[--ifc->nbfree]];
    s->holder = c;
    s->lim = s->head + RVX__RC_BOUNCE_SEG;
    c->bs = s;
    return 1;
}

RVX_COLD uint8_t *rvx__rc_bounce_wait(rvx__rc_conn_t *c, size_t len)
{
    unsigned spins = 0;
    for (;;) {
        rvx__rc_bseg_t *s = c->bs;
        uint64_t pos = s->head, off = pos % RVX__RC_BOUNCE_SEG;
        int none = s == &c->ifc->bnone;
        if (off + len > RVX__RC_BOUNCE_SEG) { pos += RVX__RC_BOUNCE_SEG - off; off = 0; }
        if (!none && pos + len <= s->lim) {
            s->head = pos + len;
            return s->buf + off;
        }
        if (c->failed && c->sq.ci == c->sq.pi) return NULL;
        if (none) {
            if (rvx__rc_bounce_take(c->ifc, c)) continue;
            if (!c->ifc->bpool_mr) return NULL;
        } else {
            rvx__rc_sig_tail(c);
            if (c->sq.ci == c->sq.pi) { s->lim = s->head + RVX__RC_BOUNCE_SEG; continue; } /* all of it is free */
        }
        if (rvx__rc_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

#endif /* RVX_TL_RC_BOUNCE_H */
