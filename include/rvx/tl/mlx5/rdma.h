/* rvx/tl/mlx5/rdma.h: the RDMA (WRITE, READ) and atomic WQEs of every mlx5 transport, written
 * once. A transport finds room on its queue, writes the prologue (rvx__mlx5_begin: the ctrl
 * segment; dc_mlx5 then its address segment), calls the builder here for the rest and commits
 * through its own commit point. av_ds is the address segment's size in DS: a literal 0 for
 * rc_mlx5, where the RDMA WQE is then written as one rvx__mlx5_wqe_rdma_t with no wrap tests (the
 * test is on __builtin_constant_p, so dc_mlx5's run-time av_ds gains no branch). */
#ifndef RVX_TL_MLX5_RDMA_H
#define RVX_TL_MLX5_RDMA_H

#include "tx.h"

/* The ctrl segment at the producer index, completion moderated (or forced by sig). Sets *pi and
 * *flags; returns the WQE. */
RVX_INLINE uint8_t *rvx__mlx5_begin(rvx__mlx5_sq_t *sq, unsigned opmod, unsigned opcode,
                                    unsigned ds, int sig, uint32_t imm_be, uint32_t *pi,
                                    unsigned *flags)
{
    uint8_t *wqe;
    *pi = sq->pi;
    wqe = rvx__mlx5_slot(sq, *pi);
    *flags = rvx__mlx5_moderate(sq, sig);
    rvx__mlx5_set_ctrl(wqe, *pi, opmod, opcode, sq->qpn8, ds, *flags, imm_be);
    return wqe;
}

/* What every WQE posted at pi does after its segments: its op record (o, if any), the book-keeping
 * of a signaled WQE of nbb WQEBBs, and a fence before the next WQE after a READ or an atomic. */
RVX_INLINE void rvx__mlx5_post_tail(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint32_t pi,
                                    uint32_t nbb, unsigned flags, const rvx__mlx5_op_t *o,
                                    int fence)
{
    if (o) rvx__mlx5_tx_on_retire(sq, tx, pi, o);
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(sq, tx, pi, pi + nbb);
    if (fence) rvx__mlx5_set_fence(sq);
}

/* ---- RDMA ----------------------------------------------------------------------------------- */

/* DS and WQEBBs of an RDMA WQE: ctrl, address (av_ds), raddr, data. */
#define RVX__MLX5_RDMA_DS(av_ds) (RVX__MLX5_DS_RDMA + (av_ds))

/* The rest of an RDMA WQE begun at pi, from seg (after ctrl and address): raddr, a data segment
 * for len bytes at addr (lkey), zeros to the end of the last WQEBB, then the tail. */
RVX_INLINE void rvx__mlx5_rdma(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint8_t *seg,
                               unsigned av_ds, uint32_t pi, unsigned flags, unsigned opcode,
                               const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
                               const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o)
{
    unsigned ds = RVX__MLX5_RDMA_DS(av_ds);
    uint32_t nbb = RVX__MLX5_NBB(ds);
    if (__builtin_constant_p(av_ds) && av_ds == 0) { /* one WQEBB: nothing inside it wraps */
        rvx__mlx5_wqe_rdma_t *w =
            (rvx__mlx5_wqe_rdma_t *)(void *)(seg - sizeof(struct mlx5_wqe_ctrl_seg));
        rvx__mlx5_set_raddr(&w->raddr, raddr, rkey);
        rvx__mlx5_set_data(&w->data, len, lkey, addr);
        memset(w->unused, 0, sizeof(w->unused));
    } else {
        rvx__mlx5_set_raddr(seg, raddr, rkey);
        seg = rvx__mlx5_next_seg(sq, seg);
        rvx__mlx5_set_data(seg, len, lkey, addr);
        rvx__mlx5_zero_pad(sq, seg + RVX__MLX5_SEG, 0, nbb * 4 - ds);
    }
    rvx__mlx5_post_tail(sq, tx, pi, nbb, flags, o, opcode == MLX5_OPCODE_RDMA_READ);
}

/* The rest of a zero-length WRITE begun at pi with a signaled ctrl segment (a keepalive), from seg
 * (after ctrl and address): raddr and zeros to the end of the last WQEBB; no data segment, as a
 * zero-length one would mean 2 GiB to the NIC. */
RVX_INLINE void rvx__mlx5_write0(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint8_t *seg,
                                 unsigned av_ds, uint32_t pi, uint64_t raddr,
                                 const rvx__mlx5_rkey_t *rkey)
{
    unsigned ds = RVX__MLX5_DS_RDMA_NODATA + av_ds;
    uint32_t nbb = RVX__MLX5_NBB(ds);
    rvx__mlx5_set_raddr(seg, raddr, rkey);
    rvx__mlx5_zero_pad(sq, rvx__mlx5_next_seg(sq, seg), 0, nbb * 4 - ds);
    rvx__mlx5_tx_mark_sig(sq, tx, pi, pi + nbb);
}

/* ---- atomics -------------------------------------------------------------------------------- */

/* Is m the masked 8-byte compare-and-swap (two atomic segments: operands, then masks)? */
RVX_INLINE int rvx__mlx5_amo_cs8(const rvx__mlx5_amo_t *m, unsigned size)
{
    return size == 8 && m->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS;
}

/* DS of an atomic WQE: ctrl, address (av_ds), raddr, the atomic segment(s), data. */
RVX_INLINE unsigned rvx__mlx5_amo_ds(const rvx__mlx5_amo_t *m, unsigned size, unsigned av_ds)
{
    return (rvx__mlx5_amo_cs8(m, size) ? RVX__MLX5_DS_MASKED_CS8 : RVX__MLX5_DS_ATOMIC) + av_ds;
}

/* The opmod of m: masked forms carry 0x08 | log2(size)-2, native ones 0. */
RVX_INLINE unsigned rvx__mlx5_amo_opmod(const rvx__mlx5_amo_t *m, unsigned size)
{
    int masked = m->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS ||
                 m->opcode == MLX5_OPCODE_ATOMIC_MASKED_FA;
    return masked ? RVX__MLX5_OPMOD_MASKED(size) : 0u;
}

/* The op record of an atomic: the old value lands in the 8-byte bounce slot and is copied to
 * *fetch (if any) when the WQE retires, completing req; bounce: the ring's head after the slot. */
RVX_INLINE rvx__mlx5_op_t rvx__mlx5_amo_op(unsigned size, void *fetch, rvx_request_t *req,
                                           uint8_t *slot, uint64_t bounce)
{
    rvx__mlx5_op_t o;
    o.kind = fetch ? (size == 8 ? RVX__MLX5_ON_FETCH64 : RVX__MLX5_ON_FETCH32) : RVX__MLX5_ON_NONE;
    o.part = RVX__MLX5_PART_NONE;
    o.len = size;
    o.dst = fetch;
    o.src = slot;
    o.req = fetch ? req : NULL;
    o.bounce = bounce;
    return o;
}

/* The rest of an atomic WQE begun at pi, from seg (after ctrl and address): raddr, the atomic
 * segment(s) of m (native 64-bit {swap/add, compare}; masked {swap/add, compare/boundary,
 * masks}, in two segments for 8 bytes), a data segment for the old value (size bytes at slot,
 * lkey), zeros to the end of the last WQEBB, then the tail with a fence. */
RVX_INLINE void rvx__mlx5_amo(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint8_t *seg,
                              unsigned av_ds, uint32_t pi, unsigned flags,
                              const rvx__mlx5_amo_t *m, unsigned size, uint64_t raddr,
                              const rvx__mlx5_rkey_t *rkey, uint8_t *slot, uint32_t lkey,
                              const rvx__mlx5_op_t *o)
{
    unsigned ds = rvx__mlx5_amo_ds(m, size, av_ds);
    uint32_t nbb = RVX__MLX5_NBB(ds);
    rvx__mlx5_set_raddr(seg, raddr, rkey);
    seg = rvx__mlx5_next_seg(sq, seg);
    if (rvx__mlx5_amo_cs8(m, size))
        seg = rvx__mlx5_set_masked_cs64(sq, seg, m->a, m->b, m->amask, m->bmask);
    else if (size == 8)
        rvx__mlx5_set_atomic(seg, m->a, m->b);
    else
        rvx__mlx5_set_masked32(seg, (uint32_t)m->a, (uint32_t)m->b, (uint32_t)m->amask,
                               (uint32_t)m->bmask);
    seg = rvx__mlx5_next_seg(sq, seg);
    rvx__mlx5_set_data(seg, size, lkey, slot);
    rvx__mlx5_zero_pad(sq, seg + RVX__MLX5_SEG, 0, nbb * 4 - ds);
    rvx__mlx5_post_tail(sq, tx, pi, nbb, flags, o, 1);
}

#endif /* RVX_TL_MLX5_RDMA_H */
