/* floor_fetch.h: the hand-written floors of the blocking fetches, for icount_rc (FLOOR_AV 0) and
 * icount_dc (FLOOR_AV 1: a 16-byte address segment after ctrl): floor_get8, a blocking 8-byte
 * RDMA READ, and floor_amo_add8, a fetching 8-byte add that waits for the old value. Each builds
 * its WQE in registers (ctrl with CE, [address], raddr, [atomic], a data segment into a registered
 * slot), stores it to the queue, moves the producer index, writes the doorbell record, copies it
 * to the BlueFlame register and flips the half; then it polls the CQ by hand for its one CQE
 * (owner bit and opcode), advances the consumer index, writes the CQ doorbell record and copies
 * the value out. Nothing else: one queue, one CQE, no other work. Right after the doorbell the
 * CQE cannot be there (a round trip), so both go straight to a function that waits until the CQE
 * at the consumer index is valid: floor_cq_await here, rvx__mlx5_cq_await in rvx; bench/icount.sh
 * leaves those out of the count (the wait is the network's, not the call's). */
#ifndef BENCH_FLOOR_FETCH_H
#define BENCH_FLOOR_FETCH_H

#include <sched.h>

typedef struct floor_fetch {
    uint8_t           *sq;
    uint32_t           mask, pi, limit, room;  /* limit: where pi may not go (ci + room) */
    uint32_t           qpn8;
    uint64_t           av[2];                  /* the address segment (FLOOR_AV): key, av_lo */
    volatile uint32_t *dbrec;
    uint8_t           *bf;                     /* the half to write next */
    uintptr_t          flip;
    uint8_t           *cq_buf;                 /* the CQ, consumed here alone */
    uint32_t           cq_ci, cq_mask, cq_cnt, cq_shift;
    volatile uint32_t *cq_dbrec;
    uint64_t          *slot;                   /* registered: the answer lands here */
    uint64_t           data_lo;                /* the data segment's first 8 bytes (8, lkey) */
} floor_fetch_t;

RVX_COLD void floor_fetch_fail(floor_fetch_t *q, const char *why)
{
    fprintf(stderr, "floor: %s (pi %u)\n", why, q->pi);
    abort();
}

/* Until the CQE whose op_own is at p is valid (owner bit `owner`, opcode not INVALID). */
RVX_NOINLINE void floor_cq_await(const volatile uint8_t *p, unsigned owner)
{
    while (((*p ^ owner) & 1) || (*p >> 4) == MLX5_CQE_INVALID) sched_yield();
}

/* Four registers to 64 bytes at p (the queue, or the BlueFlame register). */
#define FLOOR_BB(p, a, b, c, d)                                   \
    do {                                                          \
        _mm_store_si128((__m128i *)(void *)(p), a);               \
        _mm_store_si128((__m128i *)(void *)((p) + 16), b);        \
        _mm_store_si128((__m128i *)(void *)((p) + 32), c);        \
        _mm_store_si128((__m128i *)(void *)((p) + 48), d);        \
    } while (0)

/* The WQE's nbb WQEBBs are in the queue: producer index, doorbell record; the caller then writes
 * the register (returned) and calls floor_done. */
RVX_INLINE uint8_t *floor_ring(floor_fetch_t *q, uint32_t nbb)
{
    q->pi += nbb;
    __asm__ __volatile__("" ::: "memory");
    *q->dbrec = __builtin_bswap32(q->pi & 0xffff);
    __asm__ __volatile__("sfence" ::: "memory");
    return q->bf;
}

/* After the register write: the half flips; then the one CQE (a successful requester completion
 * of this pass), the consumer index and its doorbell record, the room back. */
RVX_INLINE void floor_done(floor_fetch_t *q, uint8_t *reg)
{
    const volatile uint8_t *op_own;
    unsigned owner;
    __asm__ __volatile__("sfence" ::: "memory");
    q->bf = (uint8_t *)((uintptr_t)reg ^ q->flip);
    op_own = q->cq_buf + ((size_t)(q->cq_ci & q->cq_mask) << q->cq_shift) + 63;
    owner = !!(q->cq_ci & q->cq_cnt);
    floor_cq_await(op_own, owner); /* a round trip: not there yet */
    if (RVX_UNLIKELY(((*op_own ^ owner) & 0xf1) != 0)) floor_fetch_fail(q, "error CQE");
    __asm__ __volatile__("lfence" ::: "memory");
    q->cq_ci++;
    *q->cq_dbrec = __builtin_bswap32(q->cq_ci & 0xffffff);
    q->limit = q->pi + q->room;
}

/* ctrl (signaled) of opcode with ds units at pi. */
RVX_INLINE __m128i floor_ctrl(const floor_fetch_t *q, unsigned opcode, unsigned ds)
{
    uint64_t lo = (uint64_t)(uint16_t)q->pi << 40 | (uint64_t)opcode << 32 | q->qpn8 | ds;
    return _mm_set_epi64x((long long)((uint64_t)MLX5_WQE_CTRL_CQ_UPDATE << 24),
                          (long long)__builtin_bswap64(lo));
}

RVX_INLINE __m128i floor_raddr(uint64_t raddr, const uint64_t *rkey_word)
{
    return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)__builtin_bswap64(raddr))),
                                         (const double *)(const void *)rkey_word));
}

RVX_INLINE __m128i floor_data(const floor_fetch_t *q)
{
    return _mm_set_epi64x((long long)__builtin_bswap64((uint64_t)(uintptr_t)q->slot), (long long)q->data_lo);
}

#define FLOOR_SLOT(q, k) ((q)->sq + ((((q)->pi + (k)) & (q)->mask) << 6))

RVX_NOINLINE void floor_get8(floor_fetch_t *q, uint64_t *dst, uint64_t raddr, const uint64_t *rkey_word)
{
    __m128i v0, v1, v2, v3;
    uint8_t *reg, *wqe;
    if (RVX_UNLIKELY((int32_t)(q->pi + 1 - q->limit) > 0)) floor_fetch_fail(q, "queue full");
    v0 = floor_ctrl(q, MLX5_OPCODE_RDMA_READ, 3 + FLOOR_AV);
#if FLOOR_AV
    v1 = _mm_loadu_si128((const __m128i *)(const void *)q->av);
    v2 = floor_raddr(raddr, rkey_word);
    v3 = floor_data(q);
#else
    v1 = floor_raddr(raddr, rkey_word);
    v2 = floor_data(q);
    v3 = _mm_setzero_si128();
#endif
    wqe = FLOOR_SLOT(q, 0);
    FLOOR_BB(wqe, v0, v1, v2, v3);
    reg = floor_ring(q, 1);
    FLOOR_BB(reg, v0, v1, v2, v3);
    floor_done(q, reg);
    *dst = *q->slot;
}

RVX_NOINLINE void floor_amo_add8(floor_fetch_t *q, uint64_t *fetch, uint64_t raddr,
                                 const uint64_t *rkey_word)
{
    __m128i v0, v1, v2, v3, add1 = _mm_set_epi64x(0, (long long)__builtin_bswap64(1));
    uint8_t *reg, *wqe, *wqe2;
    if (RVX_UNLIKELY((int32_t)(q->pi + 1 + FLOOR_AV - q->limit) > 0)) floor_fetch_fail(q, "queue full");
    v0 = floor_ctrl(q, MLX5_OPCODE_ATOMIC_FA, 4 + FLOOR_AV);
#if FLOOR_AV /* two WQEBBs: ctrl, address, raddr, atomic | data, zeros */
    v1 = _mm_loadu_si128((const __m128i *)(const void *)q->av);
    v2 = floor_raddr(raddr, rkey_word);
    v3 = floor_data(q);
    wqe = FLOOR_SLOT(q, 0);
    wqe2 = FLOOR_SLOT(q, 1);
    FLOOR_BB(wqe, v0, v1, v2, add1);
    FLOOR_BB(wqe2, v3, _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128());
    reg = floor_ring(q, 2);
    FLOOR_BB(reg, v0, v1, v2, add1);
    FLOOR_BB(reg + 64, v3, _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128());
#else
    v1 = floor_raddr(raddr, rkey_word);
    v2 = add1;
    v3 = floor_data(q);
    wqe = FLOOR_SLOT(q, 0);
    (void)wqe2;
    FLOOR_BB(wqe, v0, v1, v2, v3);
    reg = floor_ring(q, 1);
    FLOOR_BB(reg, v0, v1, v2, v3);
#endif
    floor_done(q, reg);
    *fetch = *q->slot;
}

/* The floor takes over queue sq (buffer, mask, producer index, doorbell record, register) and
 * the worker's CQ; the answer lands in the registered page at offset 1024. */
static inline void floor_fetch_init(floor_fetch_t *q, const rvx__mlx5_sq_t *sq, uint32_t room,
                                    const rvx__mlx5_cq_t *cq, icount_env_t *e)
{
    memset(q, 0, sizeof(*q));
    q->sq = sq->buf;
    q->mask = sq->mask;
    q->pi = sq->pi;
    q->room = room;
    q->limit = sq->ci + room;
    q->qpn8 = sq->qpn8;
    q->dbrec = sq->dbrec;
    q->bf = sq->bf->cur;
    q->flip = sq->bf->flip;
    q->cq_buf = cq->buf;
    q->cq_ci = cq->ci;
    q->cq_mask = cq->mask;
    q->cq_cnt = cq->cnt;
    q->cq_shift = cq->shift;
    q->cq_dbrec = cq->dbrec;
    q->slot = (uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 1024);
    q->data_lo = (uint64_t)__builtin_bswap32(e->mem->tl[0].lkey) << 32 | __builtin_bswap32(8);
}

/* n blocking gets of the word at base + 64 (42 after a put), then n fetching adds on the word at
 * base: each must have read what is there. Errors counted. */
static inline long floor_fetch_loop(floor_fetch_t *q, icount_env_t *e, long n, int amo)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        uint64_t v = 0;
        if (amo) {
            floor_amo_add8(q, &v, e->base, &e->rk.rkey_word);
            errors += v != (uint64_t)i;
        } else {
            floor_get8(q, &v, e->base + 64, &e->rk.rkey_word);
            errors += v != 42;
        }
    }
    return errors;
}

#endif
