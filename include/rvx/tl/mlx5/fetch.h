/* rvx/tl/mlx5/fetch.h: the blocking fetches of both mlx5 transports, once: a get of a small
 * constant length and a 64-bit fetching atomic (add, compare-and-swap) with no request, the calls
 * that wait for their own answer.
 *
 * Such a call posts one signaled WQE, built in registers, that lands its answer in the queue's
 * fetch slot (rvx__mlx5_fslot_t: its data segment built once) while the queue's bounce ring
 * holds nothing in flight, and waits for exactly its own CQE: when the CQE at the consumer
 * index is that one (owner, opcode, QPN and WQE index in one 8-byte word) and nothing else
 * waits on the queue (no op record, no flush), the call retires it inline and copies the answer
 * out: no op record, no chunk loop, no CQ drain. Anything else (no room, a ring in
 * use, a failed queue, another CQE first, an error CQE, a long wait) takes the general path: the
 * WQE then gets the op record the general post would have given it, and the general wait
 * (tl/mlx5/wait.h) retires it with everything else. No fence follows: the call returns after its
 * READ or atomic has completed.
 *
 * The transport's steps (RVX__MLX5_NET(x), bound in its decl.h; q its queue type, with the shared
 * sq and tx), defined in its rma.h, which includes this file after them:
 *   ep_q(ep)                the queue the endpoint's next WQE goes to
 *   fetch_ok(ep, q, nbb)    room for nbb WQEBBs on its fast path, and a bounce ring with nothing
 *                           in flight (else the general path)
 *   fetch_slot(q)           the queue's fetch slot
 *   fetch_take(q)           the ring is in use until the op record retires (general path): the
 *                           record's position
 *   ep_av(ep, &seg)         1 with the address segment in seg; 0: none (rc_mlx5)
 *   fetch_commit(ep, q, pi, nbb, wqe, bb)   the transport's commit of the WQE
 *   fetch_quiet(ep)         no worker flush or re-connection waits on a CQE
 *   fetch_ifc(q)            the iface (its CQ, the general wait)
 * After the post the call needs only q (the endpoint's register is free across the wait). */
#ifndef RVX_TL_MLX5_FETCH_H
#define RVX_TL_MLX5_FETCH_H

#define RVX__MLX5_FETCH_MAX RVX__MLX5_FSLOT /* a get this small may take the fetch path */

#define RVX__MLX5_FEP RVX__MLX5_NET(ep_t)
#define RVX__MLX5_FQ  RVX__MLX5_NET(q_t)

/* Until the CQE at the consumer index is there (1), or (0) the spin of a waiting call and its
 * first 256 short sleeps have passed (under a millisecond asked): a longer wait goes the general
 * way, which does all a wait does. Out of line: the time a call waits, not its work. Not cold:
 * every blocking fetch calls it, and GCC moves a caller of a cold function to .text.unlikely. */
static RVX_NOINLINE RVX_UNUSED int rvx__mlx5_cq_await(const rvx__mlx5_cq_t *cq)
{
    unsigned spins = 0;
    for (;;) {
        if (rvx__mlx5_cqe_ready(cq, *cq->next_op_own)) return 1;
        if (spins > RVX__BACKOFF_SLEEPING + 256) return 0;
        rvx__backoff(&spins);
    }
}

/* The general path for the fetch just posted (the newest WQE on q: nbb WQEBBs, its answer of len
 * bytes in q's fetch slot): the op record and signaled book-keeping its post skipped, then the
 * general wait. Nothing ran since the post, so this is the state the general post would have
 * left. */
RVX_COLD rvx_status_t rvx__mlx5_fetch_slow(RVX__MLX5_FQ *q, void *dst, uint32_t len,
                                           uint32_t nbb)
{
    uint32_t pi = q->sq.pi - nbb;
    rvx_request_t own;
    rvx__mlx5_op_t o;
    own.status = RVX_INPROGRESS;
    o.kind = RVX__MLX5_ON_COPY;
    o.part = RVX__MLX5_PART_NONE;
    o.len = len;
    o.dst = dst;
    o.src = RVX__MLX5_NET(fetch_slot)(q)->buf;
    o.req = &own;
    o.bounce = RVX__MLX5_NET(fetch_take)(q);
    rvx__mlx5_tx_on_retire(&q->sq, &q->tx, pi, &o);
    rvx__mlx5_tx_mark_sig(&q->sq, &q->tx, pi, pi + nbb);
    return rvx__mlx5_wait_req(RVX__MLX5_NET(fetch_ifc)(q), &own);
}

#if defined(__x86_64__)
/* Bytes 56-63 of a CQE (sop_drop_qpn, wqe_counter, signature, op_own) in one load, byte-swapped:
 * qpn << 32 | wqe_counter << 16 | signature << 8 | op_own. op_own is in the load, so the fields
 * beside it are of the same CQE write. The bits compared: QPN, WQE index, opcode and owner. */
#define RVX__MLX5_CQW_MASK 0x00ffffffffff00f1ull
RVX_INLINE uint64_t rvx__mlx5_cqw(const rvx__mlx5_cq_t *cq)
{
    return rvx_htobe64(*(const volatile uint64_t *)(const void *)(cq->next_op_own - 7));
}

/* The consumer index moves past the CQE at next_op_own: the next slot is the one after it but at
 * the end of the ring (then rvx__mlx5_cq_advance). */
RVX_INLINE void rvx__mlx5_cq_step(rvx__mlx5_cq_t *cq)
{
    uint32_t ci = cq->ci + 1;
    if (RVX_LIKELY(ci & cq->mask)) {
        cq->ci = ci;
        cq->next_op_own += cq->stride;
    } else {
        rvx__mlx5_cq_advance(cq);
    }
    rvx__mlx5_cq_update_ci(cq);
}

/* The wait of a fetch just posted on q (nbb WQEBBs; len bytes of answer for dst). Its CQE cannot
 * be there yet (a round trip over the network), so the call goes straight to the wait for the CQ
 * (rvx__mlx5_cq_await); then the CQE at the consumer index is its own (QPN, WQE index, opcode,
 * owner in one compare) and retires here (rvx__mlx5_fetch_ok made sure nothing else waits on q,
 * and only the NIC ran since); anything else takes the general path. */
RVX_INLINE rvx_status_t rvx__mlx5_fetch_wait(RVX__MLX5_FQ *q, void *dst, uint32_t len,
                                             uint32_t nbb)
{
    rvx__mlx5_cq_t *cq = &RVX__MLX5_NET(fetch_ifc)(q)->cq;
    uint32_t pi, end;
    if (RVX_UNLIKELY(!rvx__mlx5_cq_await(cq))) return rvx__mlx5_fetch_slow(q, dst, len, nbb);
    end = q->sq.pi;
    pi = end - nbb;
    /* the 32-bit shift keeps the WQE index's low 16 bits, wqe_counter's width */
    if (RVX_UNLIKELY((rvx__mlx5_cqw(cq) & RVX__MLX5_CQW_MASK) !=
                     ((uint64_t)q->sq.qpn8 << 24 | (uint32_t)(pi << 16) | cq->owner)))
        return rvx__mlx5_fetch_slow(q, dst, len, nbb);
    rvx_from_device_barrier(); /* the CQE before the answer it announces */
    rvx__mlx5_cq_step(cq);
    q->sq.ci = end;
    /* a held queue's limit stays at or before pi (every post goes its slow way), as it was */
    if (!q->sq.hold) rvx__mlx5_sq_restop(&q->sq);
    q->tx.last_sig_pi = end;
    memcpy(dst, RVX__MLX5_NET(fetch_slot)(q)->buf, len); /* len is a constant of the call */
    return RVX_OK;
}

/* Post the fetch (nbb WQEBBs at pi, in registers: bb[0..nbb)), then its wait. */
RVX_INLINE rvx_status_t rvx__mlx5_fetch_run(RVX__MLX5_FEP *ep, RVX__MLX5_FQ *q, uint32_t pi,
                                            uint32_t nbb, rvx__mlx5_bb_t *bb, void *dst,
                                            uint32_t len)
{
    uint8_t *wqe = rvx__mlx5_slot(&q->sq, pi);
    rvx__mlx5_bb_store(wqe, &bb[0]);
    if (nbb > 1) rvx__mlx5_bb_store(rvx__mlx5_slot(&q->sq, pi + 1), &bb[1]);
    RVX__MLX5_NET(fetch_commit)(ep, q, pi, nbb, wqe, bb);
    return rvx__mlx5_fetch_wait(q, dst, len, nbb);
}

/* The fetch's WQE in registers (bb[0..nbb)): ctrl at pi (signaled), the address segment if the
 * transport has one, raddr, [the atomic segment], the data segment for the answer (the fetch
 * slot's, with len); zeros to the end. a: 1 with the address segment av, 0 without. Returns nbb. */
RVX_INLINE uint32_t rvx__mlx5_fetch_wqe(RVX__MLX5_FQ *q, rvx__mlx5_bb_t *bb, unsigned a, __m128i av,
                                        unsigned opcode, const uint64_t *atomic, uint32_t len,
                                        uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    const rvx__mlx5_fslot_t *fs = RVX__MLX5_NET(fetch_slot)(q);
    __m128i z = _mm_setzero_si128(), c, r, t, d;
    unsigned ds = RVX__MLX5_DS_RDMA + a + (atomic ? 1 : 0);
    uint32_t nbb = RVX__MLX5_NBB(ds);
    uint64_t w = (uint64_t)opcode << 32 | q->sq.qpn8 | ds;
    /* signaled; no fence and no moderation: no READ or atomic is in flight (each has an op
     * record, and rvx__mlx5_fetch_ok found none), and the CE does not move the moderation */
    c = _mm_set_epi64x((long long)((uint64_t)RVX__MLX5_CE << 24), (long long)rvx__mlx5_ctrl_lo(w, q->sq.pi));
    r = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)rvx_htobe64(raddr))),
                                      (const double *)(const void *)&rkey->rkey_word));
    t = atomic ? _mm_set_epi64x((long long)rvx_htobe64(atomic[1]), (long long)rvx_htobe64(atomic[0])) : z;
    d = _mm_or_si128(_mm_load_si128((const __m128i *)(const void *)&fs->dseg),
                     _mm_cvtsi32_si128((int)rvx_htobe32(len)));
    /* laid out by hand (a and atomic are constants): ctrl, [av], raddr, [atomic], data, zeros */
    bb[0].q[0] = c;
    bb[0].q[1] = a ? av : r;
    bb[0].q[2] = a ? r : atomic ? t : d;
    bb[0].q[3] = a ? (atomic ? t : d) : atomic ? d : z;
    if (nbb > 1) {
        bb[1].q[0] = d;
        bb[1].q[1] = bb[1].q[2] = bb[1].q[3] = z;
    }
    return nbb;
}

/* The fetch path may start: the transport's conditions (room, a free bounce ring) and nothing
 * that a CQE of q must complete besides the fetch (op records, flushes, the transport's waits). */
RVX_INLINE int rvx__mlx5_fetch_ok(RVX__MLX5_FEP *ep, RVX__MLX5_FQ *q, uint32_t nbb)
{
    return RVX__MLX5_NET(fetch_ok)(ep, q, nbb) && q->tx.head == RVX__MLX5_REC_NIL &&
           !q->tx.flush_head && RVX__MLX5_NET(fetch_quiet)(ep);
}

/* The general paths when the fetch path cannot start (out of line: the fetch path keeps its
 * registers, and reaches them by a jump). */
RVX_COLD rvx_status_t rvx__mlx5_fetch_get_gen(RVX__MLX5_FEP *ep, void *dst, size_t len,
                                              uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    return rvx__mlx5_get_bcopy(ep, dst, len, raddr, rkey, NULL);
}

RVX_COLD rvx_status_t rvx__mlx5_fetch_fa_gen(RVX__MLX5_FEP *ep, uint64_t a, uint64_t raddr,
                                             const rvx__mlx5_rkey_t *rkey, void *fetch)
{
    return RVX__MLX5_NET(amo)(ep, MLX5_OPCODE_ATOMIC_FA, 8, a, 0, 0, 0, raddr, rkey, fetch, NULL);
}

RVX_COLD rvx_status_t rvx__mlx5_fetch_cs_gen(RVX__MLX5_FEP *ep, uint64_t a, uint64_t b,
                                             uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                             void *fetch)
{
    return RVX__MLX5_NET(amo)(ep, MLX5_OPCODE_ATOMIC_CS, 8, a, b, 0, 0, raddr, rkey, fetch, NULL);
}

/* A blocking get of len (constant, 1..RVX__MLX5_FETCH_MAX) bytes: one READ into the slot. */
RVX_INLINE rvx_status_t rvx__mlx5_fetch_get(RVX__MLX5_FEP *ep, void *dst, uint32_t len,
                                            uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    rvx__mlx5_bb_t bb[2];
    __m128i av;
    unsigned a = RVX__MLX5_NET(ep_av)(ep, &av);
    RVX__MLX5_FQ *q = RVX__MLX5_NET(ep_q)(ep);
    uint32_t pi, nbb;
    if (RVX_UNLIKELY(!rvx__mlx5_fetch_ok(ep, q, RVX__MLX5_NBB(RVX__MLX5_DS_RDMA + a))))
        return rvx__mlx5_fetch_get_gen(ep, dst, len, raddr, rkey);
    pi = q->sq.pi;
    nbb = rvx__mlx5_fetch_wqe(q, bb, a, av, MLX5_OPCODE_RDMA_READ, NULL, len, raddr, rkey);
    return rvx__mlx5_fetch_run(ep, q, pi, nbb, bb, dst, len);
}

/* A blocking 64-bit native atomic (ATOMIC_FA: add a; ATOMIC_CS: swap in a if the word is b),
 * the old value to *fetch. */
RVX_INLINE rvx_status_t rvx__mlx5_fetch_amo8(RVX__MLX5_FEP *ep, unsigned opcode, uint64_t a,
                                             uint64_t b, uint64_t raddr,
                                             const rvx__mlx5_rkey_t *rkey, void *fetch)
{
    rvx__mlx5_bb_t bb[2];
    uint64_t operands[2];
    __m128i av;
    unsigned n_av = RVX__MLX5_NET(ep_av)(ep, &av);
    RVX__MLX5_FQ *q = RVX__MLX5_NET(ep_q)(ep);
    uint32_t pi, nbb;
    if (RVX_UNLIKELY(!rvx__mlx5_fetch_ok(ep, q, RVX__MLX5_NBB(RVX__MLX5_DS_ATOMIC + n_av))))
        return opcode == MLX5_OPCODE_ATOMIC_FA ? rvx__mlx5_fetch_fa_gen(ep, a, raddr, rkey, fetch)
                                               : rvx__mlx5_fetch_cs_gen(ep, a, b, raddr, rkey, fetch);
    operands[0] = a;
    operands[1] = b;
    pi = q->sq.pi;
    nbb = rvx__mlx5_fetch_wqe(q, bb, n_av, av, opcode, operands, 8, raddr, rkey);
    return rvx__mlx5_fetch_run(ep, q, pi, nbb, bb, fetch, 8);
}

/* The same where the call cannot tell whether there is a fetch pointer (the general atomic stays
 * inline there for the atomics without one): out of line, so that the general path's registers
 * are not the fetch path's. */
static RVX_NOINLINE RVX_UNUSED rvx_status_t rvx__mlx5_fetch_fa8(RVX__MLX5_FEP *ep, uint64_t a,
                                                                uint64_t raddr,
                                                                const rvx__mlx5_rkey_t *rkey,
                                                                void *fetch)
{
    return rvx__mlx5_fetch_amo8(ep, MLX5_OPCODE_ATOMIC_FA, a, 0, raddr, rkey, fetch);
}

static RVX_NOINLINE RVX_UNUSED rvx_status_t rvx__mlx5_fetch_cs8(RVX__MLX5_FEP *ep, uint64_t a,
                                                                uint64_t b, uint64_t raddr,
                                                                const rvx__mlx5_rkey_t *rkey,
                                                                void *fetch)
{
    return rvx__mlx5_fetch_amo8(ep, MLX5_OPCODE_ATOMIC_CS, a, b, raddr, rkey, fetch);
}
#endif

/* A get: the fetch path for a blocking one of a small constant length, else the chunk loop. */
RVX_INLINE rvx_status_t rvx__mlx5_get(RVX__MLX5_FEP *ep, void *dst, size_t len, uint64_t raddr,
                                      const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len > 0 && len <= RVX__MLX5_FETCH_MAX &&
        __builtin_constant_p(req == NULL) && req == NULL)
        return rvx__mlx5_fetch_get(ep, dst, (uint32_t)len, raddr, rkey);
#endif
    return rvx__mlx5_get_bcopy(ep, dst, len, raddr, rkey, req);
}

#undef RVX__MLX5_FEP
#undef RVX__MLX5_FQ

#endif /* RVX_TL_MLX5_FETCH_H */
