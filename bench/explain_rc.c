/* explain_rc: the put, flush and progress paths of rc_mlx5 as noinline wrappers, for
 * tools/explain.sh (`make explain`) to disassemble and annotate by purpose. Built at -O2 -g, an
 * RMA-only build (no active messages: progress never looks at receives) with BlueFlame doorbells.
 * Run (on rvxsim: LD_LIBRARY_PATH=build/sim, or on an adapter), it calls each wrapper on an
 * endpoint to itself and checks the data arrived, so the code explained is code that works. */
#define RVX_TL RVX_TL_RC_MLX5
#include <rvx/rvx.h>

#include <stdio.h>

/* An 8-byte put: the WQE built in registers, stored to the queue and the BlueFlame register.
 * (The value comes by pointer, as rvx_put takes it, so the wrapper needs no stack frame.) */
RVX_NOINLINE rvx_status_t rvx_explain_put8(rvx_ep_t *ep, const uint64_t *v, uint64_t raddr,
                                           const rvx_rkey_t *rk)
{
    return rvx_put(ep, v, 8, raddr, rk);
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

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    rvx_request_t req;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    uint64_t *tgt, i;
    rvx_status_t st;

    if (rvx_init(&ctx) != RVX_OK || rvx_worker_create(ctx, &w) != RVX_OK ||
        rvx_mem_alloc(ctx, 4096, &mem) != RVX_OK || rvx_ep_create(w, rvx_rank(ctx), &ep) != RVX_OK) {
        fprintf(stderr, "explain_rc: no rc_mlx5 device (run with LD_LIBRARY_PATH=build/sim)\n");
        return 77;
    }
    rvx_rkey_pack(mem, packed);
    if (rvx_rkey_unpack(ep, packed, &rk) != RVX_OK) return 1;
    tgt = (uint64_t *)rvx_mem_addr(mem);
    for (i = 0; i < 200; i++) {
        uint64_t v = i * 3 + 1;
        st = rvx_explain_put8(ep, &v, (uint64_t)(uintptr_t)&tgt[i % 64], &rk);
        if (st != RVX_OK) return 1;
        rvx_explain_progress(w);
    }
    rvx_request_init(&req);
    st = rvx_explain_flush(ep, &req);
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    for (i = 136; i < 200; i++)
        if (st != RVX_OK || tgt[i % 64] != i * 3 + 1) {
            fprintf(stderr, "explain_rc: put %llu did not arrive (%s)\n", (unsigned long long)i,
                    rvx_status_str(st));
            return 1;
        }
    printf("explain_rc: %s: 200 puts, flush, progress: ok\n", rvx_config_string());
    rvx_rkey_release(&rk);
    rvx_ep_destroy(ep);
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return 0;
}
