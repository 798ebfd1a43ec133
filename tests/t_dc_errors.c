/* t_dc_errors: a DCI error on one endpoint while others keep working (dc_mlx5 only). One DCI per
 * worker, so the DCI that fails is the one every endpoint needs next: it must be recovered
 * (RESET -> INIT -> RTR -> RTS) for the other endpoint to go on. Rank 0 writes to ranks 1 and 2;
 * a put to rank 1 with a wrong rkey fails that endpoint (its flush reports the remote access
 * error, later operations on it fail), while rank 2's endpoint, before and after, delivers every
 * byte. */
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#define RVX_DC_NUM_DCI 1
#include <rvx/rvx.h>
#include "testlib.h"

#define NR  3
#define LEN 256

static void put_and_check(rvx_worker_t *w, rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t raddr,
                          uint64_t seed, const char *when)
{
    unsigned char buf[LEN], back[LEN];
    rvx_request_t req;
    rvx_status_t st;
    t_fill(buf, LEN, seed);
    T_OK(rvx_put(ep, buf, LEN, raddr, rk));
    T_OK(rvx_put(ep, buf, 8, raddr + LEN, rk));
    T_OK(rvx_ep_flush(ep));
    req.status = RVX_INPROGRESS;
    st = rvx_get(ep, back, LEN, raddr, rk, &req);
    if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get", 0);
    T_CHECK(st == RVX_OK && t_verify(back, LEN, seed) < 0, "%s: rank 2 gets its data back (%s)",
            when, rvx_status_str(st));
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    int me;

    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, 4 * LEN, &mem));
    memset(rvx_mem_addr(mem), 0, 4 * LEN);
    rm = t_exchange(ctx, mem);
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        rvx_ep_t *e1, *e2;
        rvx_rkey_t k1, k2, bad;
        rvx_request_t req;
        rvx_status_t st;
        uint64_t v = 42;
        int i;
        T_OK(rvx_ep_create(w, 1, &e1));
        T_OK(rvx_ep_create(w, 2, &e2));
        T_OK(rvx_rkey_unpack(e1, rm[1].packed, &k1));
        T_OK(rvx_rkey_unpack(e2, rm[2].packed, &k2));
        put_and_check(w, e2, &k2, rm[2].addr, 1, "before the error");
        /* a key the target never issued: the NIC answers with a remote access error */
        bad = k1;
        bad.rkey_word ^= rvx_htobe32(0x00ff0000u);
        T_OK(rvx_put(e1, &v, 8, rm[1].addr, &k1));
        T_OK(rvx_put(e1, &v, 8, rm[1].addr + 8, &bad));
        for (i = 0; i < 5; i++) (void)rvx_put(e1, &v, 8, rm[1].addr + 16 + 8 * (unsigned)i, &k1);
        req.status = RVX_INPROGRESS;
        st = rvx_ep_flush_nb(e1, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "flush", 1);
        T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "flush of the failed endpoint: %s", rvx_status_str(st));
        T_CHECK(rvx_put(e1, &v, 8, rm[1].addr, &k1) != RVX_OK, "a put on the failed endpoint fails");
        /* the only DCI was in ERR: rank 2's endpoint works on the recovered one */
        put_and_check(w, e2, &k2, rm[2].addr, 2, "after the error");
        put_and_check(w, e2, &k2, rm[2].addr + LEN + 64, 3, "again");
        rvx_rkey_release(&k1);
        rvx_rkey_release(&k2);
        rvx_ep_destroy(e1);
        rvx_ep_destroy(e2);
    }
    T_OK(rvx_barrier(ctx));
    if (me == 2)
        T_CHECK(t_verify(rvx_mem_addr(mem), LEN, 2) < 0, "rank 2 holds the data written after the error");
    if (me == 1) {
        uint64_t first;
        memcpy(&first, rvx_mem_addr(mem), 8);
        T_CHECK(first == 42, "the put before the error landed at rank 1");
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
