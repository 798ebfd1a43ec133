/* t_debug_rkey: an RVX_DEBUG=1 build refuses a key used with another endpoint than the one it was
 * unpacked on. A key holds only its owner's numbers, which can coincide across peers (the NIC's
 * key numbers do), so without the check a put meant for rank 1 would land in rank 2's memory.
 * 3 ranks: rank 0 unpacks rank 1's key on its endpoint to rank 1 and tries it on the endpoint to
 * rank 2 with every one-sided call; each is RVX_ERR_INVALID_PARAM and rank 2's memory stays as
 * it was, while the right pairing works. */
#define RVX_DEBUG 1
#define RVX_AM_HANDLERS(X) X(NOTE, on_note)
#include <rvx/rvx.h>
#include "testlib.h"

#define NR  3
#define LEN 4096

static volatile int notes;
static void on_note(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    notes++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    rvx_rkey_t rk[NR];
    rvx_ep_t *ep[NR];
    int me;

    t_spawn(argc, argv, NR, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, LEN, &mem));
    t_fill(rvx_mem_addr(mem), LEN, (uint64_t)me);
    rm = t_exchange(ctx, mem);
    t_connect_from0(w, me, NR, rm, ep, rk);
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        uint8_t buf[LEN];
        uint64_t f64 = 0, a = 1;
        uint32_t f32 = 0;
        rvx_request_t req;
        rvx_status_t st;
        t_fill(buf, LEN, 99);
        /* rank 1's key, aimed at rank 2's address, on the endpoint to rank 2 */
        T_STATUS(rvx_put(ep[2], buf, 8, rm[2].addr, &rk[1]), RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_put(ep[2], buf, LEN, rm[2].addr, &rk[1]), RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_get(ep[2], buf, 64, rm[2].addr, &rk[1], &req), RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_put_zcopy(ep[2], rvx_mem_addr(mem), 64, mem, rm[2].addr, &rk[1], &req),
                 RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_get_zcopy(ep[2], rvx_mem_addr(mem), 64, mem, rm[2].addr, &rk[1], &req),
                 RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_atomic64(ep[2], RVX_AMO_ADD, 1, 0, rm[2].addr, &rk[1], &f64, &req),
                 RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_atomic32(ep[2], RVX_AMO_ADD, 1, 0, rm[2].addr, &rk[1], &f32, &req),
                 RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_am_long(ep[2], RVX_AM_NOTE, &a, 1, buf, 64, rm[2].addr, &rk[1]),
                 RVX_ERR_INVALID_PARAM);
        T_OK(rvx_ep_flush(ep[2]));
        /* the right pairing goes through */
        T_OK(rvx_put(ep[1], buf, LEN, rm[1].addr, &rk[1]));
        T_OK(rvx_ep_flush(ep[1]));
        st = rvx_atomic64(ep[2], RVX_AMO_ADD, 0, 0, rm[2].addr, &rk[2], &f64, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "atomic", 0);
        T_OK(st);
    }
    T_OK(rvx_barrier(ctx));
    if (me == 1) T_CHECK(t_verify(rvx_mem_addr(mem), LEN, 99) < 0, "rank 1: the right put is missing");
    if (me == 2) {
        long bad = t_verify(rvx_mem_addr(mem), LEN, 2);
        T_CHECK(bad < 0, "rank 2: a refused call wrote its memory at byte %ld", bad);
        T_CHECK(notes == 0, "rank 2: a refused long AM ran its handler");
    }
    T_OK(rvx_barrier(ctx));
    t_disconnect(ep, rk, NR);
    return t_finish(ctx, w, mem, rk, 0, rm);
}
