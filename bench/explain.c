/* explain: the hot paths of an mlx5 transport as noinline wrappers, for tools/explain.sh (`make
 * explain`) to disassemble and annotate by purpose: an 8-byte put, a batch of 16 of them, flush,
 * progress, a blocking 8-byte get and a blocking fetching add. Built twice at -O2 -g, as
 * build/bench/explain_rc (rc_mlx5) and explain_dc (dc_mlx5), the Makefile naming the transport;
 * RMA-only builds (no active messages: progress never looks at receives) with BlueFlame
 * doorbells. Run (on rvxsim: LD_LIBRARY_PATH=build/sim, or on an adapter), it calls each wrapper
 * on an endpoint to itself and checks the data, so the code explained is code that works. */
#include <rvx/rvx.h>
#include "batch16.h"

#include <stdio.h>

#if RVX_TL != RVX_TL_RC_MLX5 && RVX_TL != RVX_TL_DC_MLX5
#error "explain: build with -DRVX_TL=RVX_TL_RC_MLX5 or RVX_TL_DC_MLX5 (the Makefile does)"
#endif

/* An 8-byte put: the WQE built in registers, stored to the queue and the BlueFlame register.
 * (The value comes by pointer, as rvx_put takes it, so the wrapper needs no stack frame.) */
RVX_NOINLINE rvx_status_t rvx_explain_put8(rvx_ep_t *ep, const uint64_t *v, uint64_t raddr,
                                           const rvx_rkey_t *rk)
{
    return rvx_put(ep, v, 8, raddr, rk);
}

/* 16 puts of 8 bytes in a batch: the queue's state copied into registers, 16 WQEs stored to the
 * queue, the state copied back, one doorbell (bench/batch16.h, as make icount's put8_batch16). */
RVX_NOINLINE rvx_status_t rvx_explain_batch16(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr,
                                              const rvx_rkey_t *rk)
{
    return bench_batch16(ep, src, raddr, rk);
}

/* Flush of an endpoint: at once when nothing is outstanding or the last signaled WQE's CQE is the
 * one waiting in the CQ; otherwise the out-of-line slow path. */
RVX_NOINLINE rvx_status_t rvx_explain_flush(rvx_ep_t *ep, rvx_request_t *req)
{
    return rvx_ep_flush_nb(ep, req);
}

/* Progress: nothing to do unless work is outstanding and a CQE is present. */
RVX_NOINLINE int rvx_explain_progress(rvx_worker_t *w)
{
    return rvx_progress(w);
}

/* A blocking 8-byte get (no request: done on return): one READ into the fetch slot, the wait for
 * its own CQE, the answer copied out (tl/mlx5/fetch.h; as bench_get8 in bench/icount_fetch.h). */
RVX_NOINLINE rvx_status_t rvx_explain_get8(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr,
                                           const rvx_rkey_t *rk)
{
    return rvx_get(ep, dst, 8, raddr, rk, NULL);
}

/* A blocking fetching add of 1, the old value to *old: the same path with an atomic segment.
 * The old value lands in a local, as an application writes it (&v), so that the compiler knows
 * the fetch pointer is not NULL and inlines the fetch path; bench_amo_fadd8 (bench/icount_fetch.h)
 * passes its pointer on, and its build keeps the general atomic (for a NULL pointer) inline and
 * the fetch path out of line. */
RVX_NOINLINE rvx_status_t rvx_explain_amo_fadd8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk,
                                                uint64_t *old)
{
    uint64_t v;
    rvx_status_t st = rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rk, &v, NULL);
    *old = v;
    return st;
}

static int fail(const char *what, unsigned long long i, rvx_status_t st)
{
    fprintf(stderr, "explain: %s %llu: wrong (%s)\n", what, i, rvx_status_str(st));
    return 1;
}

/* Each wrapper on an endpoint to this process: puts and batches land (tgt[0..63]), gets read
 * them back, fetching adds count up tgt[64]. */
static int run(rvx_worker_t *w, rvx_ep_t *ep, uint64_t *tgt, const rvx_rkey_t *rk)
{
    uint64_t base = (uint64_t)(uintptr_t)tgt, src[16], i, k;
    rvx_request_t req;
    rvx_status_t st = RVX_OK;

    for (i = 0; i < 200; i++) {
        uint64_t v = i * 3 + 1;
        st = rvx_explain_put8(ep, &v, base + 8 * (i % 64), rk);
        if (st != RVX_OK) return fail("put", i, st);
        rvx_explain_progress(w);
    }
    rvx_request_init(&req);
    st = rvx_explain_flush(ep, &req);
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    for (i = 136; i < 200; i++)
        if (st != RVX_OK || tgt[i % 64] != i * 3 + 1) return fail("put", i, st);
    for (i = 0; i < 40; i++) {   /* 640 puts: the queue wraps and asks for completions */
        for (k = 0; k < 16; k++) src[k] = i << 8 | k;
        st = rvx_explain_batch16(ep, src, base + 8 * (16 * (i % 4)), rk);
        if (st != RVX_OK) return fail("batch", i, st);
        rvx_explain_progress(w);
    }
    if ((st = rvx_ep_flush(ep)) != RVX_OK) return fail("batch flush", 0, st);
    for (i = 36; i < 40; i++)
        for (k = 0; k < 16; k++)
            if (tgt[16 * (i % 4) + k] != (i << 8 | k)) return fail("batch put", i << 8 | k, st);
    for (i = 0; i < 64; i++) {
        uint64_t v = 0;
        st = rvx_explain_get8(ep, &v, base + 8 * i, rk);
        if (st != RVX_OK || v != tgt[i]) return fail("get", i, st);
    }
    tgt[64] = 0;
    for (i = 0; i < 64; i++) {
        uint64_t old = ~0ull;
        st = rvx_explain_amo_fadd8(ep, base + 8 * 64, rk, &old);
        if (st != RVX_OK || old != i) return fail("fetching add", i, st);
    }
    if (tgt[64] != 64) return fail("fetching add, the sum", tgt[64], st);
    return 0;
}

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    int bad;

    if (rvx_init(&ctx) != RVX_OK || rvx_worker_create(ctx, &w) != RVX_OK ||
        rvx_mem_alloc(ctx, 4096, &mem) != RVX_OK || rvx_ep_create(w, rvx_rank(ctx), &ep) != RVX_OK) {
        fprintf(stderr, "explain: no mlx5 device (run with LD_LIBRARY_PATH=build/sim)\n");
        return 77;
    }
    rvx_rkey_pack(mem, packed);
    if (rvx_rkey_unpack(ep, packed, &rk) != RVX_OK) return 1;
    bad = run(w, ep, (uint64_t *)rvx_mem_addr(mem), &rk);
    if (bad) return 1;
    printf("explain: %s: 200 puts, 40 batches of 16, flush, progress, 64 gets, 64 fetching adds: ok\n",
           rvx_config_string());
    rvx_rkey_release(&rk);
    rvx_ep_destroy(ep);
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return 0;
}
