/* icount_rc: one noinline wrapper per rc_mlx5 operation, for counting instructions with callgrind
 * (bench/icount.sh runs each N and 2N times; the difference over N is one call). One process, an
 * endpoint to itself (a QP connected to itself), on rvxsim or a real adapter. Whatever keeps the
 * queues from filling (flushes, draining the CQ) runs between the counted calls, not inside.
 *
 *   icount_rc <op> <N>   op: put8 ref_put8 get8 flush_ready progress_idle progress_live_empty
 *                            am_short8 amo_add8 get8_req floor_get8 amo_fadd8 floor_amo_add8
 * Built twice: with BlueFlame (default) and with RVX_MLX5_DOORBELL=RVX_MLX5_DB_8B (icount_rc_db). */
#define RVX_TL RVX_TL_RC_MLX5
#define BENCH_ICOUNT 1
#include "bench_common.h"
#include "icount_fetch.h"

/* The floor: the same 8-byte inline RDMA WRITE, hand-written on the fields it needs and nothing
 * else: one check for a full queue and the signaled WQE (CE every RVX_MLX5_SIG_EVERY), ctrl,
 * raddr and inline built in registers, stored to the queue, producer index, doorbell record,
 * BlueFlame copy (or the 8-byte doorbell), half toggle. What a signaled WQE needs later is one
 * store of its index. */
typedef struct ref_qp {
    uint8_t           *sq;
    uint32_t           mask, pi, limit;  /* limit: ci + room */
    uint32_t           sig_pi;           /* the WQE at this index asks for a completion */
    uint32_t           stop;             /* the first of limit and sig_pi: the put's one check */
    uint64_t           w8;               /* RDMA_WRITE << 32 | qpn << 8 | 3 */
    volatile uint32_t *dbrec;
    uint8_t           *bf;               /* the half to write next */
    uintptr_t          flip;
    uint32_t           last_sig;
} ref_qp_t;

RVX_COLD void ref_slow(ref_qp_t *q) { fprintf(stderr, "ref: queue full (pi %u)\n", q->pi); abort(); }

/* The first of the queue's limit and the signaled WQE: one compare per put covers both. */
static inline uint32_t floor_stop(uint32_t limit, uint32_t sig_pi)
{
    return (int32_t)(sig_pi - limit) < 0 ? sig_pi : limit;
}

RVX_COLD void ref_put8_sig(ref_qp_t *q, uint64_t v, uint64_t raddr, uint64_t rkey_word)
{
    /* the signaled one: the same WQE with CQ_UPDATE, and its index remembered */
    uint32_t pi = q->pi;
    uint8_t *wqe = q->sq + ((pi & q->mask) << 6);
    __m128i v0 = _mm_set_epi64x((long long)((uint64_t)MLX5_WQE_CTRL_CQ_UPDATE << 24),
                                (long long)__builtin_bswap64((uint64_t)(uint16_t)pi << 40 | q->w8));
    __m128i v1 = _mm_set_epi64x((long long)rkey_word, (long long)__builtin_bswap64(raddr));
    __m128i v2 = _mm_set_epi64x((long long)(v >> 32), (long long)((uint64_t)__builtin_bswap32(8u | MLX5_INLINE_SEG) | v << 32));
    __m128i v3 = _mm_setzero_si128();
    q->sig_pi = q->pi + RVX_MLX5_SIG_EVERY;
    q->stop = floor_stop(q->limit, q->sig_pi);
    q->last_sig = pi;
    _mm_store_si128((__m128i *)(void *)wqe, v0);
    _mm_store_si128((__m128i *)(void *)(wqe + 16), v1);
    _mm_store_si128((__m128i *)(void *)(wqe + 32), v2);
    _mm_store_si128((__m128i *)(void *)(wqe + 48), v3);
    q->pi = pi + 1;
    __asm__ __volatile__("" ::: "memory");
    *q->dbrec = __builtin_bswap32((pi + 1) & 0xffff);
    __asm__ __volatile__("sfence" ::: "memory");
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
    _mm_store_si128((__m128i *)(void *)q->bf, v0);
    _mm_store_si128((__m128i *)(void *)(q->bf + 16), v1);
    _mm_store_si128((__m128i *)(void *)(q->bf + 32), v2);
    _mm_store_si128((__m128i *)(void *)(q->bf + 48), v3);
#else
    *(volatile uint64_t *)(void *)q->bf = (uint64_t)_mm_cvtsi128_si64(v0);
#endif
    __asm__ __volatile__("sfence" ::: "memory");
    q->bf = (uint8_t *)((uintptr_t)q->bf ^ q->flip);
}

/* The put reached the stop: a full queue, or the WQE that asks for a completion. */
RVX_COLD void ref_put8_stop(ref_qp_t *q, uint64_t v, uint64_t raddr, uint64_t rkey_word)
{
    if ((int32_t)(q->pi - q->limit) >= 0) ref_slow(q);
    else ref_put8_sig(q, v, raddr, rkey_word);
}

RVX_NOINLINE void ref_put8(ref_qp_t *q, const uint64_t *src, uint64_t raddr, const uint64_t *rkey_word)
{
    uint32_t pi = q->pi;
    uint8_t *wqe, *reg;
    __m128i v0, v1, v2, v3 = _mm_setzero_si128();
    if (RVX_UNLIKELY((int32_t)(pi - q->stop) >= 0)) { ref_put8_stop(q, *src, raddr, *rkey_word); return; }
    wqe = q->sq + ((pi & q->mask) << 6);
    v0 = _mm_cvtsi64_si128((long long)__builtin_bswap64((uint64_t)(uint16_t)pi << 40 | q->w8));
    v1 = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)__builtin_bswap64(raddr))),
                                       (const double *)(const void *)rkey_word));
    v2 = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)(const void *)src), 4),
                      _mm_cvtsi32_si128((int)__builtin_bswap32(8u | MLX5_INLINE_SEG)));
    _mm_store_si128((__m128i *)(void *)wqe, v0);
    _mm_store_si128((__m128i *)(void *)(wqe + 16), v1);
    _mm_store_si128((__m128i *)(void *)(wqe + 32), v2);
    _mm_store_si128((__m128i *)(void *)(wqe + 48), v3);
    q->pi = ++pi;
    __asm__ __volatile__("" ::: "memory");
    *q->dbrec = __builtin_bswap32(pi & 0xffff);
    __asm__ __volatile__("sfence" ::: "memory");
    reg = q->bf;
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
    _mm_store_si128((__m128i *)(void *)reg, v0);
    _mm_store_si128((__m128i *)(void *)(reg + 16), v1);
    _mm_store_si128((__m128i *)(void *)(reg + 32), v2);
    _mm_store_si128((__m128i *)(void *)(reg + 48), v3);
#else
    *(volatile uint64_t *)(void *)reg = (uint64_t)_mm_cvtsi128_si64(v0);
#endif
    __asm__ __volatile__("sfence" ::: "memory");
    q->bf = (uint8_t *)((uintptr_t)reg ^ q->flip);
}

/* The floor of a batch: 16 of the same WQEs (src[k] to the k-th word), the queue's state in registers
 * for the whole batch, each WQE stored to the queue only; then one doorbell record write and one
 * 8-byte doorbell naming the last WQE (as libmlx5 rings a list). The room is checked once. */
RVX_STATIC_ASSERT(RVX_MLX5_SIG_EVERY >= 16, "at most one signaled WQE per batch of 16");
RVX_NOINLINE void floor_put8_batch16(ref_qp_t *q, const uint64_t *src, uint64_t raddr,
                                     const uint64_t *rkey_word)
{
    uint32_t pi = q->pi, k;
    uint32_t sig_pi = q->sig_pi;
    uint8_t *sq = q->sq, *wqe = NULL;
    __m128i v0 = _mm_setzero_si128(), v3 = _mm_setzero_si128();
    if (RVX_UNLIKELY((int32_t)(pi + 16 - q->limit) > 0)) { ref_slow(q); return; }
    for (k = 0; k < 16; k++, pi++) {
        uint64_t hi = 0;
        __m128i v2 = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)(const void *)&src[k]), 4),
                                  _mm_cvtsi32_si128((int)__builtin_bswap32(8u | MLX5_INLINE_SEG)));
        __m128i v1 = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)__builtin_bswap64(raddr + 8 * k))),
                                                   (const double *)(const void *)rkey_word));
        if (RVX_UNLIKELY(pi == sig_pi)) { /* the signaled one: its index remembered */
            sig_pi = pi + RVX_MLX5_SIG_EVERY;
            q->last_sig = pi;
            hi = (uint64_t)MLX5_WQE_CTRL_CQ_UPDATE << 24;
        }
        v0 = _mm_set_epi64x((long long)hi, (long long)__builtin_bswap64((uint64_t)(uint16_t)pi << 40 | q->w8));
        wqe = sq + ((pi & q->mask) << 6);
        _mm_store_si128((__m128i *)(void *)wqe, v0);
        _mm_store_si128((__m128i *)(void *)(wqe + 16), v1);
        _mm_store_si128((__m128i *)(void *)(wqe + 32), v2);
        _mm_store_si128((__m128i *)(void *)(wqe + 48), v3);
    }
    q->pi = pi;
    q->sig_pi = sig_pi;
    q->stop = floor_stop(q->limit, sig_pi);
    __asm__ __volatile__("" ::: "memory");
    *q->dbrec = __builtin_bswap32(pi & 0xffff);
    __asm__ __volatile__("sfence" ::: "memory");
    *(volatile uint64_t *)(void *)q->bf = (uint64_t)_mm_cvtsi128_si64(v0);
    __asm__ __volatile__("sfence" ::: "memory");
    q->bf = (uint8_t *)((uintptr_t)q->bf ^ q->flip);
}

#define FLOOR_AV 0
#include "floor_fetch.h"

RVX_NOINLINE rvx_status_t bench_flush_ready(rvx_ep_t *ep, rvx_request_t *req) { return rvx_ep_flush_nb(ep, req); }

/* the send queue fills: puts flushed every 128, atomics every 64 (outside the counted calls) */
static long loop_put8(icount_env_t *e, long n) { return icount_put8(e, n, 127); }
static long loop_amo_add8(icount_env_t *e, long n) { return icount_amo_add8(e, n, 63); }

/* The endpoint's QP, taken over by a hand-written post (batch: 16 WQEs per call); CQEs consumed
 * here. */
static long ref_loop(icount_env_t *e, long n, int batch)
{
    rvx__rc_conn_t *c = e->ep->tl[0].c;
    rvx__tl_iface_t *ifc = &e->w->iface[0];
    ref_qp_t q;
    /* the whole queue: the hand-written post is outside the worker's send budget */
    uint32_t room = c->sq.mask + 1 - RVX__RC_SQ_RESERVE;
    uint64_t src[16];
    long i;
    for (i = 0; i < 16; i++) src[i] = 42;
    q.sq = c->sq.buf;
    q.mask = c->sq.mask;
    q.pi = c->sq.pi;
    q.limit = c->sq.pi + room;
    q.w8 = (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | c->qpn << 8 | 3;
    q.sig_pi = q.pi + RVX_MLX5_SIG_EVERY - 1;
    q.stop = floor_stop(q.limit, q.sig_pi);
    q.last_sig = 0;
    q.dbrec = c->sq.dbrec;
    q.bf = c->sq.bf->cur;
    q.flip = c->sq.bf->flip;
    for (i = 0; i < n; i++) {
        int sig = (int32_t)(q.pi + (batch ? 16 : 1) - q.sig_pi) > 0; /* a WQE of this call is signaled */
        if (batch) floor_put8_batch16(&q, src, e->base + 64, &e->rk.rkey_word);
        else ref_put8(&q, &e->src, e->base + 64, &e->rk.rkey_word);
        if (sig) { /* retire it through its CQE */
            cqe_present(e->w);
            rvx__mlx5_cq_advance(&ifc->cq);
            *ifc->cq.dbrec = __builtin_bswap32(ifc->cq.ci & 0xffffff);
            q.limit = q.last_sig + 1 + room;
            q.stop = floor_stop(q.limit, q.sig_pi);
        }
    }
    return batch && *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64 + 8 * 15) != 42;
}

static long loop_ref_put8(icount_env_t *e, long n) { return ref_loop(e, n, 0); }
static long loop_floor_put8_batch16(icount_env_t *e, long n) { return ref_loop(e, n, 1); }

/* The floors (floor_fetch.h) on the endpoint's QP and the worker's CQ, taken over after a put of
 * 42 was flushed and its CQE consumed. */
static long loop_floor_fetch(icount_env_t *e, long n, int amo)
{
    rvx__rc_conn_t *c = e->ep->tl[0].c;
    floor_fetch_t q;
    if (rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK || rvx_ep_flush(e->ep) != RVX_OK)
        return 1;
    while (rvx_progress(e->w)) {}
    if (c->sq.ci != c->sq.pi) return 1;
    *(volatile uint64_t *)(uintptr_t)e->base = 0;
    floor_fetch_init(&q, &c->sq, c->sq.mask + 1 - RVX__RC_SQ_RESERVE, &e->w->iface[0].cq, e);
    return floor_fetch_loop(&q, e, n, amo);
}

static long loop_floor_get8(icount_env_t *e, long n) { return loop_floor_fetch(e, n, 0); }
static long loop_floor_amo_add8(icount_env_t *e, long n) { return loop_floor_fetch(e, n, 1); }

static long loop_flush_ready(icount_env_t *e, long n)
{
    rvx__rc_conn_t *c = e->ep->tl[0].c;
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        errors += rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK;
        rvx__rc_sig_tail(c);  /* the put (or a NOP after it) asks for a completion */
        cqe_present(e->w);
        req.status = RVX_INPROGRESS;
        errors += bench_flush_ready(e->ep, &req) != RVX_OK;
        while (rvx_progress(e->w)) {} /* consume the CQE the flush looked at */
    }
    errors += *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64) != 42; /* the WQEs did what they say */
    return errors;
}


int main(int argc, char **argv)
{
    /* ref_put8 bypassed the queue's book-keeping: no flush, no teardown */
    static const icount_op_t ops[] = {
        {"put8", loop_put8, 0}, {"ref_put8", loop_ref_put8, 1}, {"get8", loop_get8, 0},
        {"get8_req", loop_get8_req, 0}, {"floor_get8", loop_floor_get8, 1},
        {"amo_fadd8", loop_amo_fadd8, 0}, {"floor_amo_add8", loop_floor_amo_add8, 1},
        {"get8_req_wait", loop_get8_req_wait, 0}, {"amo_fadd8_req_wait", loop_amo_fadd8_req_wait, 0},
        {"flush_ready", loop_flush_ready, 0}, {"progress_idle", icount_progress_idle, 0},
        {"progress_live_empty", icount_progress_live_empty, 0}, {"am_short8", icount_am_short8, 0},
        {"amo_add8", loop_amo_add8, 0}, {"put8_batch16", icount_put8_batch16, 0},
        {"floor_put8_batch16", loop_floor_put8_batch16, 1},
        {"am_short8_batch16", icount_am_short8_batch16, 0},
        {"mmio_put8", icount_mmio_put8, 0}, {"mmio_put8_batch16", icount_mmio_put8_batch16, 0},
    };
    return icount_main(argc, argv, "icount_rc", ops, (int)(sizeof(ops) / sizeof(ops[0])));
}
