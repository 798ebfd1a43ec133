/* icount_dc: one noinline wrapper per dc_mlx5 operation, for counting instructions with callgrind
 * (bench/icount.sh runs each N and 2N times; the difference over N is one call). One process, an
 * endpoint to itself (its DCIs write to its own DCT), on rvxsim or a real adapter. Whatever keeps
 * the queues from filling (flushes, draining the CQ) runs between the counted calls.
 *
 *   icount_dc <op> <N>   op: put8 floor_put8 get8 flush_ready progress_idle progress_live_empty
 *                            am_short8 amo_add8 get8_req floor_get8 amo_fadd8 floor_amo_add8
 *
 * floor_put8 is the same 8-byte put WQE (ctrl, 16-byte address segment, raddr, inline 8) posted
 * by hand with nothing but what the NIC needs, on the DCI the endpoint holds: one check for a full
 * queue and the signaled WQE, the WQEBB built in registers, stored to the queue, producer index, doorbell record,
 * BlueFlame copy, half toggle. put8 is measured against it. */
#define RVX_TL RVX_TL_DC_MLX5
#define BENCH_ICOUNT 1
#include "bench_common.h"
#include "icount_fetch.h"

typedef struct floor_dci {
    uint8_t           *sq;
    uint32_t           mask, pi, limit;  /* limit: ci + room */
    uint32_t           sig_pi;           /* the WQE at this index asks for a completion */
    uint32_t           stop;             /* the first of limit and sig_pi: the put's one check */
    uint64_t           w8;               /* RDMA_WRITE << 32 | qpn << 8 | 4 */
    uint64_t           av[2];            /* the address segment: key (big-endian), av_lo */
    volatile uint32_t *dbrec;
    uint8_t           *bf;               /* the half to write next */
    uintptr_t          flip;
    uint32_t           last_sig;
} floor_dci_t;

RVX_COLD void floor_slow(floor_dci_t *q) { fprintf(stderr, "floor: queue full (pi %u)\n", q->pi); abort(); }

/* The first of the queue's limit and the signaled WQE: one compare per put covers both. */
static inline uint32_t floor_stop(uint32_t limit, uint32_t sig_pi)
{
    return (int32_t)(sig_pi - limit) < 0 ? sig_pi : limit;
}

/* The WQEBB in four registers (ctrl with CE in `hi`, address segment, raddr, inline 8), stored
 * to the queue, then the producer index, doorbell record and BlueFlame copy. */
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
#define FLOOR_RING(reg, v0, v1, v2, v3)                                   \
    do {                                                                  \
        _mm_store_si128((__m128i *)(void *)(reg), v0);                    \
        _mm_store_si128((__m128i *)(void *)((reg) + 16), v1);             \
        _mm_store_si128((__m128i *)(void *)((reg) + 32), v2);             \
        _mm_store_si128((__m128i *)(void *)((reg) + 48), v3);             \
    } while (0)
#else
#define FLOOR_RING(reg, v0, v1, v2, v3) \
    (*(volatile uint64_t *)(void *)(reg) = (uint64_t)_mm_cvtsi128_si64(v0))
#endif

static inline void floor_post(floor_dci_t *q, const uint64_t *src, uint64_t raddr,
                              const uint64_t *rkey_word, uint64_t hi)
{
    uint32_t pi = q->pi;
    uint8_t *wqe = q->sq + ((pi & q->mask) << 6), *reg;
    __m128i v0 = _mm_set_epi64x((long long)hi, (long long)__builtin_bswap64((uint64_t)(uint16_t)pi << 40 | q->w8));
    __m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)q->av);
    __m128i v2 = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)__builtin_bswap64(raddr))),
                                               (const double *)(const void *)rkey_word));
    __m128i v3 = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)(const void *)src), 4),
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
    FLOOR_RING(reg, v0, v1, v2, v3);
    __asm__ __volatile__("sfence" ::: "memory");
    q->bf = (uint8_t *)((uintptr_t)reg ^ q->flip);
}

RVX_COLD void floor_put8_sig(floor_dci_t *q, const uint64_t *src, uint64_t raddr, const uint64_t *rkey_word)
{
    q->sig_pi = q->pi + RVX_MLX5_SIG_EVERY;
    q->stop = floor_stop(q->limit, q->sig_pi);
    q->last_sig = q->pi;
    floor_post(q, src, raddr, rkey_word, (uint64_t)MLX5_WQE_CTRL_CQ_UPDATE << 24);
}

/* The put reached the stop: a full queue, or the WQE that asks for a completion. */
RVX_COLD void floor_put8_stop(floor_dci_t *q, const uint64_t *src, uint64_t raddr, const uint64_t *rkey_word)
{
    if ((int32_t)(q->pi - q->limit) >= 0) floor_slow(q);
    else floor_put8_sig(q, src, raddr, rkey_word);
}

RVX_NOINLINE void floor_put8(floor_dci_t *q, const uint64_t *src, uint64_t raddr, const uint64_t *rkey_word)
{
    if (RVX_UNLIKELY((int32_t)(q->pi - q->stop) >= 0)) { floor_put8_stop(q, src, raddr, rkey_word); return; }
    floor_post(q, src, raddr, rkey_word, 0);
}

/* The floor of a batch: 16 of the same WQEs (src[k] to the k-th word), the DCI's state in registers
 * for the whole batch, each WQE stored to the queue only; then one doorbell record write and one
 * 8-byte doorbell naming the last WQE. The room is checked once. */
RVX_STATIC_ASSERT(RVX_MLX5_SIG_EVERY >= 16, "at most one signaled WQE per batch of 16");
RVX_NOINLINE void floor_put8_batch16(floor_dci_t *q, const uint64_t *src, uint64_t raddr,
                                     const uint64_t *rkey_word)
{
    uint32_t pi = q->pi, k;
    uint32_t sig_pi = q->sig_pi;
    uint8_t *sq = q->sq, *wqe;
    __m128i v0 = _mm_setzero_si128(), v1, v3;
    if (RVX_UNLIKELY((int32_t)(pi + 16 - q->limit) > 0)) { floor_slow(q); return; }
    v1 = _mm_loadu_si128((const __m128i *)(const void *)q->av);
    for (k = 0; k < 16; k++, pi++) {
        uint64_t hi = 0;
        v3 = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)(const void *)&src[k]), 4),
                          _mm_cvtsi32_si128((int)__builtin_bswap32(8u | MLX5_INLINE_SEG)));
        __m128i v2 = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)__builtin_bswap64(raddr + 8 * k))),
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

/* The DCI the endpoint holds (after one put), taken over by a hand-written post (batch: 16 WQEs
 * per call); its CQEs are consumed here. */
static long floor_loop(icount_env_t *e, long n, int batch)
{
    rvx__tl_iface_t *ifc = &e->w->iface[0];
    rvx__dc_dci_t *d;
    floor_dci_t q;
    uint64_t src[16];
    long i;
    for (i = 0; i < 16; i++) src[i] = 42;
    if (rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK || rvx_ep_flush(e->ep) != RVX_OK)
        return 1;
    while (rvx_progress(e->w)) {}
    d = e->ep->tl[0].dci;
    if (!d || d->sq.ci != d->sq.pi || ifc->av_bytes != RVX__DC_AV_BASE) return 1;
    q.sq = d->sq.buf;
    q.mask = d->sq.mask;
    q.pi = d->sq.pi;
    q.limit = d->sq.pi + d->sq.room;
    q.w8 = (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | d->qpn << 8 | 4;
    q.av[0] = rvx_htobe64(RVX__DC_KEY);
    q.av[1] = e->ep->tl[0].av_lo;
    q.sig_pi = q.pi + RVX_MLX5_SIG_EVERY - 1;
    q.stop = floor_stop(q.limit, q.sig_pi);
    q.last_sig = 0;
    q.dbrec = d->sq.dbrec;
    q.bf = d->sq.bf->cur;
    q.flip = d->sq.bf->flip;
    for (i = 0; i < n; i++) {
        int sig = (int32_t)(q.pi + (batch ? 16 : 1) - q.sig_pi) > 0; /* a WQE of this call is signaled */
        if (batch) floor_put8_batch16(&q, src, e->base + 64, &e->rk.rkey_word);
        else floor_put8(&q, &e->src, e->base + 64, &e->rk.rkey_word);
        if (sig) { /* retire it through its CQE */
            cqe_present(e->w);
            rvx__mlx5_cq_advance(&ifc->cq);
            *ifc->cq.dbrec = __builtin_bswap32(ifc->cq.ci & 0xffffff);
            q.limit = q.last_sig + 1 + d->sq.room;
            q.stop = floor_stop(q.limit, q.sig_pi);
        }
    }
    return *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64 + (batch ? 8 * 15 : 0)) != 42;
}

static long loop_floor_put8(icount_env_t *e, long n) { return floor_loop(e, n, 0); }
static long loop_floor_put8_batch16(icount_env_t *e, long n) { return floor_loop(e, n, 1); }


#define FLOOR_AV 1
#include "floor_fetch.h"

RVX_NOINLINE rvx_status_t bench_flush_ready(rvx_ep_t *ep, rvx_request_t *req) { return rvx_ep_flush_nb(ep, req); }

static long loop_put8(icount_env_t *e, long n) { return icount_put8(e, n, 127); }
static long loop_amo_add8(icount_env_t *e, long n) { return icount_amo_add8(e, n, 63); }

/* The floors (floor_fetch.h) on the DCI the endpoint holds and the worker's CQ, taken over after
 * a put of 42 was flushed and its CQE consumed. */
static long loop_floor_fetch(icount_env_t *e, long n, int amo)
{
    rvx__tl_iface_t *ifc = &e->w->iface[0];
    rvx__dc_dci_t *d;
    floor_fetch_t q;
    if (rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK || rvx_ep_flush(e->ep) != RVX_OK)
        return 1;
    while (rvx_progress(e->w)) {}
    d = e->ep->tl[0].dci;
    if (!d || d->sq.ci != d->sq.pi || ifc->av_bytes != RVX__DC_AV_BASE) return 1;
    *(volatile uint64_t *)(uintptr_t)e->base = 0;
    floor_fetch_init(&q, &d->sq, d->sq.room, &ifc->cq, e);
    q.av[0] = rvx_htobe64(RVX__DC_KEY);
    q.av[1] = e->ep->tl[0].av_lo;
    return floor_fetch_loop(&q, e, n, amo);
}

static long loop_floor_get8(icount_env_t *e, long n) { return loop_floor_fetch(e, n, 0); }
static long loop_floor_amo_add8(icount_env_t *e, long n) { return loop_floor_fetch(e, n, 1); }

/* A put, then its completion retired by progress: the flush finds the endpoint's work complete. */
static long loop_flush_ready(icount_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        errors += rvx_put(e->ep, &e->src, 8, e->base + 64, &e->rk) != RVX_OK;
        errors += rvx_ep_flush(e->ep) != RVX_OK;
        req.status = RVX_INPROGRESS;
        errors += bench_flush_ready(e->ep, &req) != RVX_OK;
    }
    errors += *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64) != 42;
    return errors;
}

int main(int argc, char **argv)
{
    static const icount_op_t ops[] = {
        {"put8", loop_put8, 0}, {"floor_put8", loop_floor_put8, 1}, {"get8", loop_get8, 0},
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
    return icount_main(argc, argv, "icount_dc", ops, (int)(sizeof(ops) / sizeof(ops[0])));
}
