/* t_wflush_err: a worker flush reports an operation of its endpoints that the peer refused.
 * 3 ranks; rank 0 puts 8 bytes that run 4 bytes past the end of rank 2's region, and a valid
 * put to rank 1, then flushes the worker:
 *  - where the put goes through a NIC (rc, dc, the pair's other node), the put is posted
 *    (RVX_OK) and the NIC refuses it: the worker flush (non-blocking, then waited for) ends with
 *    RVX_ERR_REMOTE_ACCESS, the next worker flush with RVX_OK (an error is reported once), the
 *    endpoint's flush still with RVX_ERR_REMOTE_ACCESS (its failure stays);
 *  - where rank 2's memory is mapped here (shm), the put is refused at the call and the worker
 *    flush has nothing to report;
 *  - either way rank 2's region is untouched and rank 1 has the valid put. */
#include <rvx/rvx.h>
#include "testlib.h"

#define NR     3
#define REGION 4096

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    rvx_rkey_t rk[NR];
    rvx_ep_t *ep[NR];
    int me;

    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, REGION, &mem));
    t_fill(rvx_mem_addr(mem), REGION, (uint64_t)me);
    rm = t_exchange(ctx, mem);
    t_connect_from0(w, me, NR, rm, ep, rk);
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        uint64_t bad = 0xbadbadbadbadbad1ull, good = 0x600d600d600d600dull;
        int mapped = rvx_rkey_ptr(&rk[2], rm[2].addr, 1) != NULL;
        rvx_request_t req;
        rvx_status_t st = rvx_put(ep[2], &bad, 8, rm[2].addr + REGION - 4, &rk[2]);
        T_OK(rvx_put(ep[1], &good, 8, rm[1].addr, &rk[1]));
        if (mapped) {
            T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "a put past a mapped region's end: %s, not refused "
                    "at the call", rvx_status_str(st));
            T_OK(rvx_worker_flush(w));
        } else {
            T_CHECK(st == RVX_OK, "an inline put through the NIC: %s at the call", rvx_status_str(st));
            rvx_request_init(&req);
            st = rvx_worker_flush_nb(w, &req);
            if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "worker flush", 0);
            T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "the worker flush after a refused put: %s, not a "
                    "remote access error", rvx_status_str(st));
            T_OK(rvx_worker_flush(w));
            T_STATUS(rvx_ep_flush(ep[2]), RVX_ERR_REMOTE_ACCESS);
        }
        printf("rank 0: put past the end %s; worker flush reported it\n",
               mapped ? "refused at the call (mapped)" : "refused by the NIC");
    }
    T_OK(rvx_barrier(ctx));
    if (me == 1) {
        uint64_t v;
        memcpy(&v, rvx_mem_addr(mem), 8);
        T_CHECK(v == 0x600d600d600d600dull, "rank 1: the valid put is not there (%llx)",
                (unsigned long long)v);
    }
    if (me == 2) {
        long at = t_verify(rvx_mem_addr(mem), REGION, 2);
        T_CHECK(at < 0, "rank 2: the refused put wrote its region at byte %ld", at);
    }
    T_OK(rvx_barrier(ctx));
    t_disconnect(ep, rk, NR);
    return t_finish(ctx, w, mem, rk, 0, rm);
}
