/* rvx/tl/mlx5/amo_loop.h: an rvx_amo_op_t on an mlx5 transport, once for both: one NIC atomic, or
 * the compare-and-swap loop of the five the NIC lacks (MULT, MIN, MAX, UMIN, UMAX: tl/mlx5/amo.h
 * maps the others and computes the loop's next value). Both run on the transport's atomic WQE,
 * RVX__MLX5_NET(amo)(ep, opcode, size, a, b, amask, bmask, raddr, rkey, fetch, req) (rvx__rc_amo
 * in tl/rc/amo.h, rvx__dc_amo in tl/dc/rma.h); the transport's file includes this one right
 * after it. */
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

/* An rvx_amo_op_t as one NIC atomic (tl/mlx5/amo.h; a blocking 64-bit fetch-add or
 * compare-and-swap through tl/mlx5/fetch.h), or the compare-and-swap loop for the five the NIC
 * lacks, done when the call returns. */
RVX_INLINE rvx_status_t rvx__mlx5_atomic(RVX__MLX5_NET(ep_t) *ep, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t cmp, uint64_t raddr,
                                         const rvx__mlx5_rkey_t *rkey, void *fetch,
                                         rvx_request_t *req)
{
    rvx__mlx5_amo_t m = rvx__mlx5_amo_map(op, size, v, cmp);
    if (!m.opcode) return rvx__mlx5_amo_loop(ep, op, size, v, raddr, rkey, fetch);
#if defined(__x86_64__)
    /* a 64-bit native atomic the call waits for: tl/mlx5/fetch.h */
    if (__builtin_constant_p(req == NULL) && req == NULL && fetch && size == 8 &&
        (m.opcode == MLX5_OPCODE_ATOMIC_FA || m.opcode == MLX5_OPCODE_ATOMIC_CS)) {
        if (__builtin_constant_p(fetch != NULL)) /* known: inline */
            return rvx__mlx5_fetch_amo8(ep, m.opcode, m.a, m.b, raddr, rkey, fetch);
        return m.opcode == MLX5_OPCODE_ATOMIC_FA ? rvx__mlx5_fetch_fa8(ep, m.a, raddr, rkey, fetch)
                                                 : rvx__mlx5_fetch_cs8(ep, m.a, m.b, raddr, rkey, fetch);
    }
#endif
    return RVX__MLX5_NET(amo)(ep, m.opcode, size, m.a, m.b, m.amask, m.bmask, raddr, rkey, fetch,
                              req);
}

#endif /* RVX_TL_MLX5_AMO_LOOP_H */
