/* t_dc_pool: more endpoints than DCIs (dc_mlx5 only). Four ranks, two DCIs per worker: each rank
 * drives three endpoints in turn, so DCIs pass from endpoint to endpoint and posts find the pool
 * full (under RVX_DC_DCI_POLICY=RVX_DC_DCI_FIXED, built as t_dc_pool_fixed: two endpoints share a
 * DCI for good, and nothing is handed over). Per endpoint, order must hold: each put overwrites one word at the peer with a rising
 * sequence, and a get on the same endpoint (often on another DCI than the put went through) must
 * read the newest value; at the end every word holds the last value. Puts of several sizes, put
 * bcopy and zero-copy are mixed in. */
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#define RVX_DC_NUM_DCI 2
#include <rvx/rvx.h>
#include "testlib.h"

#define NR     4
#define ROUNDS 3000
#define SLOT   4096 /* bytes per source rank in each region */

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[NR];
    rvx_rkey_t rk[NR];
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *base, buf[SLOT], back[SLOT];
    int me, p, i;
    rvx__tl_iface_t *ifc;

    t_spawn(argc, argv, NR, 300);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, NR * SLOT, &mem));
    base = (unsigned char *)rvx_mem_addr(mem);
    memset(base, 0, NR * SLOT);
    rm = t_exchange(ctx, mem);
    for (p = 0; p < NR; p++) {
        if (p == me) continue;
        T_OK(rvx_ep_create(w, p, &ep[p]));
        T_OK(rvx_rkey_unpack(ep[p], rm[p].packed, &rk[p]));
    }
    T_OK(rvx_barrier(ctx));
    for (i = 0; i < ROUNDS && t_failures < 10; i++) {
        for (p = 0; p < NR; p++) {
            uint64_t v = (uint64_t)me << 32 | (uint64_t)i, got = 0;
            uint64_t dst = rm[p].addr + (uint64_t)me * SLOT;
            size_t len = 8 + (size_t)(i % 5) * 300; /* short and bcopy sizes */
            if (p == me) continue;
            t_fill(buf, len, (uint64_t)i * NR + (uint64_t)p);
            memcpy(buf, &v, 8);
            T_OK(rvx_put(ep[p], buf + 8, len - 8, dst + 8, &rk[p]));
            T_OK(rvx_put(ep[p], &v, 8, dst, &rk[p]));
            if (i % 7 == 3) { /* the get must see both puts of this endpoint */
                rvx_request_t req;
                rvx_status_t st;
                req.status = RVX_INPROGRESS;
                st = rvx_get(ep[p], back, len, dst, &rk[p], &req);
                if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get", i);
                memcpy(&got, back, 8);
                T_CHECK(st == RVX_OK && got == v && !memcmp(back + 8, buf + 8, len - 8),
                        "round %d to rank %d: get after put read %llx, want %llx (%s)", i, p,
                        (unsigned long long)got, (unsigned long long)v, rvx_status_str(st));
            }
            if (i % 50 == 0) T_OK(rvx_ep_flush(ep[p]));
        }
    }
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    for (p = 0; p < NR; p++) {
        uint64_t v;
        if (p == me) continue;
        memcpy(&v, base + (size_t)p * SLOT, 8);
        T_CHECK(v == ((uint64_t)p << 32 | (ROUNDS - 1)), "word of rank %d holds %llx", p,
                (unsigned long long)v);
    }
    ifc = &w->iface[0];
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    /* each endpoint on DCI rank % 2 for good: two of them share one, nothing is handed over */
    T_CHECK(ifc->dci_taken == 0 && ifc->pool_waits == 0 &&
                ep[(me + 1) % NR]->tl[0].dci == &ifc->dci[(me + 1) % NR % RVX_DC_NUM_DCI],
            "fixed mapping: DCIs passed between endpoints (%lu), posts waited for the pool (%lu)",
            ifc->dci_taken, ifc->pool_waits);
#else
    T_CHECK(ifc->dci_taken > 0 && ifc->pool_waits > 0,
            "DCIs passed between endpoints (%lu) and posts waited for the pool (%lu)",
            ifc->dci_taken, ifc->pool_waits);
#endif
    printf("rank %d: %d rounds over %d endpoints, %d DCIs: %lu DCIs passed on, %lu waits\n", me,
           ROUNDS, NR - 1, RVX_DC_NUM_DCI, ifc->dci_taken, ifc->pool_waits);
    T_OK(rvx_barrier(ctx));
    for (p = 0; p < NR; p++)
        if (p != me) {
            rvx_rkey_release(&rk[p]);
            rvx_ep_destroy(ep[p]);
        }
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
