/* rvx/tl/mlx5/amo_loop.h: the compare-and-swap loop of the five atomics the NIC lacks (MULT, MIN,
 * MAX, UMIN, UMAX: tl/mlx5/amo.h computes the next value), once for both mlx5 transports. It runs
 * on the transport's one atomic WQE, RVX__MLX5_NET(amo)(ep, opcode, size, a, b, amask, bmask,
 * raddr, rkey, fetch, req) (rvx__rc_amo in tl/rc/amo.h, rvx__dc_amo in tl/dc/rma.h), and is
 * included by the transport's file right after it. */
#ifndef RVX_TL_MLX5_AMO_LOOP_H
#define RVX_TL_MLX5_AMO_LOOP_H

/* Read, compute, compare-and-swap until no one else changed the word; done when the call returns
 * (the old value in *fetch, if any). */
RVX_COLD rvx_status_t rvx__mlx5_amo_loop(RVX__MLX5_NET(ep_t) *ep, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         void *fetch)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, old = 0, seen = 0, nv;
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned cs = size == 8 ? MLX5_OPCODE_ATOMIC_CS : MLX5_OPCODE_ATOMIC_MASKED_CS;
    rvx_status_t st = RVX__MLX5_NET(amo)(ep, fa, size, 0, 0, 0, 0, raddr, rkey, &old, NULL);
    while (st == RVX_OK) {
        if (!rvx__mlx5_amo_next(op, size, old, v, &nv)) return RVX_ERR_INVALID_PARAM;
        seen = 0;
        st = RVX__MLX5_NET(amo)(ep, cs, size, nv, old, ones, ones, raddr, rkey, &seen, NULL);
        if (st != RVX_OK || (seen & ones) == (old & ones)) break;
        old = seen;
    }
    if (st == RVX_OK && fetch) {
        if (size == 8) *(uint64_t *)fetch = old;
        else *(uint32_t *)fetch = (uint32_t)old;
    }
    return st;
}

#endif /* RVX_TL_MLX5_AMO_LOOP_H */
