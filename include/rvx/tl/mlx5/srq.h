/* rvx/tl/mlx5/srq.h: a shared receive queue driven directly, with one registered buffer per WQE.
 *
 * An SRQ's WQEs form a free list through next_wqe_index (mlx5_wqe_srq_next_seg): posting takes
 * the WQE at the list's head, a consumed WQE goes back at its tail, and the doorbell record holds
 * the 16-bit count of WQEs posted. The NIC consumes WQEs in list order and names the one it used
 * in the CQE's wqe_counter. Every WQE owns the buffer of its index for good (its data segment is
 * written once), so a receive CQE's buffer is bufs + wqe_counter * frame, and giving a buffer back
 * is a list link and a doorbell: no segment is rewritten. One WQE (the list's tail) is never
 * posted, as libmlx5 keeps it, so count - 1 buffers are posted at once. Buffers may come back in
 * any order. No transport detail here: an RC QP or a DCT uses it the same way. */
#ifndef RVX_TL_MLX5_SRQ_H
#define RVX_TL_MLX5_SRQ_H

#include "setup.h"

typedef struct rvx__mlx5_srq {
    uint8_t           *wq;       /* the WQE ring (mlx5dv_srq.buf) */
    uint8_t           *bufs;     /* count * frame bytes, registered: buffer i belongs to WQE i */
    volatile uint32_t *dbrec;    /* the posted count (16 bits, big-endian) */
    uint32_t           stride;   /* bytes per WQE */
    uint32_t           mask;     /* count - 1 */
    uint32_t           frame;    /* bytes per buffer */
    uint32_t           lkey;
    uint16_t           head;     /* the free list: the next WQE to post ... */
    uint16_t           tail;     /* ... and the last one (never posted) */
    uint16_t           posted;   /* WQEs posted in all, mod 2^16: the doorbell value */
    uint16_t           rsvd;
    uint32_t           dropped;  /* receive completions whose frame was dropped (bad input) */
    struct ibv_srq    *srq;
    struct ibv_mr     *mr;
} rvx__mlx5_srq_t;

RVX_INLINE struct mlx5_wqe_srq_next_seg *rvx__mlx5_srq_wqe(const rvx__mlx5_srq_t *s, uint32_t idx)
{
    return (struct mlx5_wqe_srq_next_seg *)(void *)(s->wq + (size_t)(idx & s->mask) * s->stride);
}

/* The buffer a receive CQE (its wqe_counter) names. */
RVX_INLINE uint8_t *rvx__mlx5_srq_buf(const rvx__mlx5_srq_t *s, uint16_t wqe_counter)
{
    return s->bufs + (size_t)(wqe_counter & s->mask) * s->frame;
}

/* Post the WQE at the free list's head (its segment is already written); the doorbell waits for
 * rvx__mlx5_srq_ring. */
RVX_INLINE void rvx__mlx5_srq_post(rvx__mlx5_srq_t *s)
{
    s->head = rvx_htobe16(rvx__mlx5_srq_wqe(s, s->head)->next_wqe_index);
    s->posted++;
}

RVX_INLINE void rvx__mlx5_srq_ring(rvx__mlx5_srq_t *s)
{
    rvx_to_device_barrier(); /* the free list's links before the doorbell record */
    *s->dbrec = rvx_htobe32(s->posted);
}

/* The buffer of WQE idx is free again: its WQE goes to the list's tail, and one WQE is posted. */
RVX_INLINE void rvx__mlx5_srq_release(rvx__mlx5_srq_t *s, uint16_t idx)
{
    rvx__mlx5_srq_wqe(s, s->tail)->next_wqe_index = rvx_htobe16(idx);
    s->tail = (uint16_t)(idx & s->mask);
    rvx__mlx5_srq_post(s);
}

/* ---- receive completions (cold) ------------------------------------------------------------ */

/* A responder CQE: a SEND (plain, with immediate or with invalidation), a WRITE with immediate, or
 * a receive error. Whatever the peer sent and whichever QP (known, spare or replaced) it came on,
 * each one names the WQE it took off the shared queue: libmlx5 frees an SRQ WQE for every one,
 * error and flush CQEs included. */
RVX_INLINE int rvx__mlx5_cqe_is_recv(unsigned opcode)
{
    return (opcode >= MLX5_CQE_RESP_WR_IMM && opcode <= MLX5_CQE_RESP_SEND_INV) ||
           opcode == MLX5_CQE_RESP_ERR;
}

/* The receive CQE's frame has been dealt with (delivered, copied aside or dropped): its buffer
 * goes back. Every receive CQE ends here exactly once, so no peer, hostile or buggy, can drain
 * the queue. */
RVX_COLD void rvx__mlx5_srq_done(rvx__mlx5_srq_t *s, const struct mlx5_cqe64 *cqe)
{
    rvx__mlx5_srq_release(s, rvx_htobe16(cqe->wqe_counter));
    rvx__mlx5_srq_ring(s);
}

/* A received frame is dropped as bad input: counted; 1 if it should be reported (the first few:
 * a flood would otherwise flood stderr too). */
RVX_COLD int rvx__mlx5_srq_drop(rvx__mlx5_srq_t *s)
{
    if (++s->dropped == 16)
        rvx__log(RVX__MLX5_TL ": 16 received frames dropped; further ones are counted only");
    return s->dropped < 16;
}

/* A frame copied aside, delivered later in order (a handler may not run now, or its endpoint does
 * not exist yet): the receive buffer goes back at once. */
typedef struct rvx__mlx5_deferred {
    struct rvx__mlx5_deferred *next;
    int      rank;
    unsigned chan, info;
    size_t   len;
    uint8_t  body[1];
} rvx__mlx5_deferred_t;

/* Append a copy of the frame to the list head/tail. */
RVX_COLD void rvx__mlx5_defer(rvx__mlx5_deferred_t **head, rvx__mlx5_deferred_t **tail, int rank,
                              unsigned chan, unsigned info, const void *body, size_t len)
{
    rvx__mlx5_deferred_t *d = (rvx__mlx5_deferred_t *)malloc(sizeof(*d) + len), *last;
    if (!d) {
        rvx__log(RVX__MLX5_TL ": out of memory keeping a message from rank %d aside: dropped", rank);
        return;
    }
    d->next = NULL;
    d->rank = rank;
    d->chan = chan;
    d->info = info;
    d->len = len;
    memcpy(d->body, body, len);
    last = *tail;
    if (last) last->next = d;
    else *head = d;
    *tail = d;
}

/* ---- set-up (cold) -------------------------------------------------------------------------- */

/* The receive buffers' bytes: one frame per WQE of the ring. */
RVX_INLINE size_t rvx__mlx5_srq_bytes(const rvx__mlx5_srq_t *s)
{
    return (size_t)(s->mask + 1) * s->frame;
}

RVX_COLD void rvx__mlx5_srq_destroy(rvx__mlx5_srq_t *s)
{
    if (s->srq) ibv_destroy_srq(s->srq);
    if (s->mr) ibv_dereg_mr(s->mr);
    rvx__unmap(s->bufs, rvx__mlx5_srq_bytes(s));
    memset(s, 0, sizeof(*s));
}

/* An SRQ of at least `want` buffers of `frame` bytes, every buffer but one posted. */
RVX_COLD rvx_status_t rvx__mlx5_srq_create(rvx__mlx5_ctx_t *ctx, rvx__mlx5_srq_t *s, uint32_t want,
                                           uint32_t frame)
{
    struct ibv_srq_init_attr sa;
    struct mlx5dv_srq ds;
    struct mlx5dv_obj obj;
    uint32_t i, cnt;
    memset(s, 0, sizeof(*s));
    memset(&sa, 0, sizeof(sa));
    sa.attr.max_wr = want;
    sa.attr.max_sge = 1;
    s->srq = ibv_create_srq(ctx->pd, &sa);
    if (!s->srq) {
        rvx__log(RVX__MLX5_TL ": cannot create an SRQ of %u WQEs: %s", want, strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    memset(&obj, 0, sizeof(obj));
    memset(&ds, 0, sizeof(ds));
    obj.srq.in = s->srq;
    obj.srq.out = &ds;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ) || ds.stride < 32 || !ds.buf) {
        rvx__log(RVX__MLX5_TL ": the SRQ cannot be driven directly (mlx5dv_init_obj)");
        rvx__mlx5_srq_destroy(s);
        return RVX_ERR_UNSUPPORTED;
    }
    cnt = ds.tail + 1u; /* libmlx5 hands out the list 0 -> 1 -> ... -> tail: the ring's size */
    if (!rvx_is_pow2(cnt) || ds.head != 0 || cnt > 0x8000u) {
        rvx__log(RVX__MLX5_TL ": unexpected SRQ geometry (head %u, tail %u)", ds.head, ds.tail);
        rvx__mlx5_srq_destroy(s);
        return RVX_ERR_UNSUPPORTED;
    }
    s->wq = (uint8_t *)ds.buf;
    s->dbrec = ds.dbrec;
    s->stride = ds.stride;
    s->mask = cnt - 1;
    s->frame = frame;
    s->head = (uint16_t)ds.head;
    s->tail = (uint16_t)ds.tail;
    s->bufs = (uint8_t *)rvx__map(rvx__mlx5_srq_bytes(s)); /* the NIC fills them, as used */
    if (!s->bufs) { rvx__mlx5_srq_destroy(s); return RVX_ERR_NO_MEMORY; }
    s->mr = rvx__mlx5_reg(ctx, s->bufs, rvx__mlx5_srq_bytes(s), "the receive buffers");
    if (!s->mr) { rvx__mlx5_srq_destroy(s); return RVX_ERR_NO_RESOURCE; }
    s->lkey = s->mr->lkey;
    for (i = 0; i < cnt; i++) { /* each WQE's segments, for good: its buffer, then a terminator */
        struct mlx5_wqe_data_seg *d = (struct mlx5_wqe_data_seg *)(void *)(rvx__mlx5_srq_wqe(s, i) + 1);
        rvx__mlx5_set_data(d, frame, s->lkey, s->bufs + (size_t)i * frame);
        if (s->stride > 32) {
            d[1].byte_count = 0;
            d[1].lkey = rvx_htobe32(MLX5_INVALID_LKEY);
            d[1].addr = 0;
        }
    }
    for (i = 0; i < cnt - 1; i++) rvx__mlx5_srq_post(s);
    rvx__mlx5_srq_ring(s);
    return RVX_OK;
}

/* Buffers posted at a time: what a sender's credits may cover. */
RVX_INLINE uint32_t rvx__mlx5_srq_depth(const rvx__mlx5_srq_t *s)
{
    return s->mask;
}

#endif /* RVX_TL_MLX5_SRQ_H */
