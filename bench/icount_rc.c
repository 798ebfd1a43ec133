/* icount_rc: one noinline wrapper per rc_mlx5 operation, for counting instructions with callgrind
 * (bench/icount.sh runs each N and 2N times; the difference over N is one call). One process, an
 * endpoint to itself (a QP connected to itself), on rvxsim or a real adapter. Whatever keeps the
 * queues from filling (flushes, draining the CQ) runs between the counted calls, not inside.
 *
 *   icount_rc <op> <N>   op: put8 ref_put8 get8 flush_ready progress_idle progress_live_empty
 *                            am_short8 amo_add8
 * Built twice: with BlueFlame (default) and with RVX_MLX5_DOORBELL=RVX_MLX5_DB_8B (icount_rc_db). */
#define RVX_TL RVX_TL_RC_MLX5
#define RVX_AM_HANDLERS(X) X(SINK, on_sink)
#include <rvx/rvx.h>

#include <stdio.h>

static uint64_t sunk;
static void on_sink(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    sunk += a[0];
}

RVX_NOINLINE rvx_status_t bench_put8(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_put(ep, src, 8, raddr, rk);
}

/* The floor: the same 8-byte inline RDMA WRITE, hand-written on the fields it needs and nothing
 * else: queue-full check, moderation (CE every RVX_MLX5_SIG_EVERY), ctrl/raddr/inline built in
 * registers, stored to the queue, producer index, doorbell record, BlueFlame copy (or the 8-byte
 * doorbell), half toggle. What a signaled WQE needs later is one store of its index. */
typedef struct ref_qp {
    uint8_t           *sq;
    uint32_t           mask, pi, limit;  /* limit: ci + room */
    uint16_t           sig_left;
    uint64_t           w8;               /* RDMA_WRITE << 32 | qpn << 8 | 3 */
    volatile uint32_t *dbrec;
    uint8_t           *bf;               /* the half to write next */
    uintptr_t          flip;
    uint32_t           last_sig;
} ref_qp_t;

RVX_COLD void ref_slow(ref_qp_t *q) { fprintf(stderr, "ref: queue full (pi %u)\n", q->pi); abort(); }

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
    q->sig_left = RVX_MLX5_SIG_EVERY;
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

RVX_NOINLINE void ref_put8(ref_qp_t *q, const uint64_t *src, uint64_t raddr, const uint64_t *rkey_word)
{
    uint32_t pi = q->pi;
    uint8_t *wqe, *reg;
    __m128i v0, v1, v2, v3 = _mm_setzero_si128();
    if (RVX_UNLIKELY((int32_t)(pi - q->limit) >= 0)) { ref_slow(q); return; }
    if (RVX_UNLIKELY(--q->sig_left == 0)) { ref_put8_sig(q, *src, raddr, *rkey_word); return; }
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

RVX_NOINLINE rvx_status_t bench_get8(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr,
                                     const rvx_rkey_t *rk, rvx_request_t *req)
{
    return rvx_get(ep, dst, 8, raddr, rk, req);
}

RVX_NOINLINE rvx_status_t bench_flush_ready(rvx_ep_t *ep, rvx_request_t *req) { return rvx_ep_flush_nb(ep, req); }

RVX_NOINLINE int bench_progress_idle(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE int bench_progress_live_empty(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE rvx_status_t bench_am_short8(rvx_ep_t *ep, uint64_t arg)
{
    return rvx_am_short(ep, RVX_AM_SINK, &arg, 1);
}

RVX_NOINLINE rvx_status_t bench_amo_add8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rk, NULL, NULL);
}

/* Wait until the CQE at the consumer index is there, without consuming it. */
static void cqe_present(rvx_worker_t *w)
{
    rvx__tl_iface_t *ifc = &w->iface;
    while (!rvx__mlx5_cqe_ready(ifc, *ifc->cqe_next)) rvx_cpu_relax();
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w, *idle;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    const char *op = argc > 2 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0, i;
    uint64_t src = 42, dst = 0, base;
    long errors = 0;

    if (n < 1) {
        fprintf(stderr, "usage: icount_rc <op> <N>\n");
        return 2;
    }
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w) || rvx_worker_create(ctx, &idle) ||
        rvx_ep_create(w, 0, &ep) || rvx_mem_alloc(ctx, 4096, &mem))
        return 1;
    rvx_rkey_pack(mem, packed);
    if (rvx_rkey_unpack(ep, packed, &rk)) return 1;
    base = (uint64_t)(uintptr_t)rvx_mem_addr(mem);

    if (!strcmp(op, "put8")) {
        for (i = 0; i < n; i++) {
            errors += bench_put8(ep, &src, base + 64, &rk) != RVX_OK;
            if ((i & 127) == 127) errors += rvx_ep_flush(ep) != RVX_OK;
        }
    } else if (!strcmp(op, "ref_put8")) {
        /* the endpoint's QP, taken over by the hand-written post; CQEs consumed here */
        rvx__mlx5_conn_t *c = ep->tl.c;
        rvx__tl_iface_t *ifc = &w->iface;
        ref_qp_t q;
        q.sq = c->sq_buf;
        q.mask = c->sq_mask;
        q.pi = c->pi;
        q.limit = c->pi + c->room;
        q.w8 = (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | c->qpn << 8 | 3;
        q.sig_left = RVX_MLX5_SIG_EVERY;
        q.last_sig = 0;
        q.dbrec = c->dbrec;
        q.bf = c->bf->cur;
        q.flip = c->bf->flip;
        for (i = 0; i < n; i++) {
            ref_put8(&q, &src, base + 64, &rk.rkey_word);
            if (q.sig_left == RVX_MLX5_SIG_EVERY) { /* just signaled: retire through its CQE */
                cqe_present(w);
                rvx__mlx5_cq_advance(ifc);
                *ifc->cq_dbrec = __builtin_bswap32(ifc->cq_ci & 0xffffff);
                q.limit = q.last_sig + 1 + c->room;
            }
        }
    } else if (!strcmp(op, "get8")) {
        for (i = 0; i < n; i++) {
            rvx_request_t req;
            rvx_status_t st;
            req.status = RVX_INPROGRESS;
            st = bench_get8(ep, &dst, base + 64, &rk, &req);
            if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
            errors += st != RVX_OK;
        }
    } else if (!strcmp(op, "flush_ready")) {
        rvx__mlx5_conn_t *c = ep->tl.c;
        for (i = 0; i < n; i++) {
            rvx_request_t req;
            errors += rvx_put(ep, &src, 8, base + 64, &rk) != RVX_OK;
            rvx__mlx5_sig_tail(c);  /* the put (or a NOP after it) asks for a completion */
            cqe_present(w);
            req.status = RVX_INPROGRESS;
            errors += bench_flush_ready(ep, &req) != RVX_OK;
            while (rvx_progress(w)) {} /* consume the CQE the flush looked at */
        }
    } else if (!strcmp(op, "progress_idle")) {
        for (i = 0; i < n; i++) errors += bench_progress_idle(idle) != 0;
    } else if (!strcmp(op, "progress_live_empty")) {
        for (i = 0; i < n; i++) errors += bench_progress_live_empty(w) != 0;
    } else if (!strcmp(op, "am_short8")) {
        for (i = 0; i < n; i++) {
            rvx_status_t st;
            while ((st = bench_am_short8(ep, (uint64_t)i)) == RVX_ERR_NO_RESOURCE) rvx_progress(w);
            errors += st != RVX_OK;
            if ((i & 7) == 7) { /* deliver, return credits and retire, outside the counted call */
                errors += rvx_ep_flush(ep) != RVX_OK;
                while (rvx_progress(w)) {}
            }
        }
        while (rvx_progress(w)) {}
        if (sunk != (uint64_t)n * (uint64_t)(n - 1) / 2) {
            fprintf(stderr, "icount_rc: am_short8: handler sum %llu\n", (unsigned long long)sunk);
            errors++;
        }
    } else if (!strcmp(op, "amo_add8")) {
        for (i = 0; i < n; i++) {
            errors += bench_amo_add8(ep, base, &rk) != RVX_OK;
            if ((i & 63) == 63) errors += rvx_ep_flush(ep) != RVX_OK;
        }
        errors += rvx_ep_flush(ep) != RVX_OK;
        if (*(uint64_t *)rvx_mem_addr(mem) != (uint64_t)n) {
            fprintf(stderr, "icount_rc: amo_add8: counter %llu\n",
                    (unsigned long long)*(uint64_t *)rvx_mem_addr(mem));
            errors++;
        }
    } else {
        fprintf(stderr, "icount_rc: unknown op %s\n", op);
        return 2;
    }
    if (strcmp(op, "ref_put8")) errors += rvx_ep_flush(ep) != RVX_OK;
    if (!strcmp(op, "put8") || !strcmp(op, "flush_ready")) /* the WQEs did what they say */
        errors += *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(mem) + 64) != 42;
    if (errors) {
        fprintf(stderr, "icount_rc: %ld of %ld %s calls failed\n", errors, n, op);
        return 1;
    }
    printf("%s x %ld done (%s)\n", op, n, rvx_config_string());
    fflush(stdout);
    if (!strcmp(op, "ref_put8")) _exit(0); /* the queue's book-keeping was bypassed: no teardown */
    rvx_rkey_release(&rk);
    rvx_worker_destroy(w);
    rvx_worker_destroy(idle);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return 0;
}
