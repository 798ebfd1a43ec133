/* t_dc_peer_death: a peer leaves abruptly (dc_mlx5 only). Rank 2 exits without finalizing; rank 0
 * then writes to it: the write runs out of retries, its flush reports RVX_ERR_PEER_FAILED within a
 * bounded time and the endpoint stays failed. Meanwhile and afterwards rank 0's endpoint to rank 1
 * (on the pool's other DCI, then on whichever is free) keeps delivering, checked by gets and by
 * rank 1 itself. */
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#define RVX_DC_NUM_DCI 2
#include <rvx/rvx.h>
#include "testlib.h"

#define LEN 512

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    volatile uint64_t *done;
    unsigned char *base;
    int me;

    t_spawn(argc, argv, 3, 120);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, 4 * LEN, &mem));
    base = (unsigned char *)rvx_mem_addr(mem);
    memset(base, 0, 4 * LEN);
    done = (volatile uint64_t *)(void *)(base + 3 * LEN);
    rm = t_exchange(ctx, mem);
    T_OK(rvx_barrier(ctx));
    if (me == 2) _exit(0); /* gone, without a word */
    if (me == 0) {
        rvx_ep_t *e1, *e2;
        rvx_rkey_t k1, k2;
        rvx_request_t fl;
        rvx_status_t st;
        unsigned char buf[LEN], back[LEN];
        uint64_t one = 1;
        double t0;
        int i, rounds = 0;
        T_OK(rvx_ep_create(w, 1, &e1));
        T_OK(rvx_ep_create(w, 2, &e2));
        T_OK(rvx_rkey_unpack(e1, rm[1].packed, &k1));
        T_OK(rvx_rkey_unpack(e2, rm[2].packed, &k2));
        usleep(200000); /* rank 2 is gone by now */
        t_fill(buf, LEN, 7);
        T_OK(rvx_put(e2, buf, LEN, rm[2].addr, &k2));
        fl.status = RVX_INPROGRESS;
        st = rvx_ep_flush_nb(e2, &fl);
        T_CHECK(st == RVX_INPROGRESS, "flush to the dead peer pending (%s)", rvx_status_str(st));
        t0 = t_now();
        /* while the write to rank 2 retries, rank 1's endpoint works on the other DCI */
        while (fl.status == RVX_INPROGRESS && t_now() - t0 < 60) {
            rvx_request_t g;
            t_fill(buf, LEN, (uint64_t)rounds);
            T_OK(rvx_put(e1, buf, LEN, rm[1].addr, &k1));
            g.status = RVX_INPROGRESS;
            st = rvx_get(e1, back, LEN, rm[1].addr, &k1, &g);
            if (st == RVX_INPROGRESS) st = t_wait_req(w, &g, "get", rounds);
            T_CHECK(st == RVX_OK && t_verify(back, LEN, (uint64_t)rounds) < 0,
                    "round %d with rank 1 while rank 2 is dead (%s)", rounds, rvx_status_str(st));
            rounds++;
            rvx_progress(w);
        }
        T_CHECK(fl.status == RVX_ERR_PEER_FAILED, "flush to the dead peer: %s after %.1f s",
                rvx_status_str((rvx_status_t)fl.status), t_now() - t0);
        T_CHECK(rounds > 1, "rank 1 was served while rank 2's write retried (%d rounds)", rounds);
        T_CHECK(rvx_ep_flush(e2) == RVX_ERR_PEER_FAILED, "the endpoint stays failed");
        T_CHECK(rvx_put(e2, buf, 8, rm[2].addr, &k2) != RVX_OK, "a put to the dead peer fails");
        /* and afterwards, many more with rank 1 */
        for (i = 0; i < 200; i++) {
            t_fill(buf, LEN, 1000 + (uint64_t)i);
            T_OK(rvx_put(e1, buf, LEN, rm[1].addr + LEN, &k1));
        }
        T_OK(rvx_ep_flush(e1));
        T_OK(rvx_put(e1, &one, 8, rm[1].addr + 3 * LEN, &k1));
        T_OK(rvx_ep_flush(e1));
        printf("rank 0: peer failure reported after %.1f s, %d rounds with rank 1 meanwhile\n",
               t_now() - t0, rounds);
        rvx_rkey_release(&k1);
        rvx_rkey_release(&k2);
        rvx_ep_destroy(e1);
        rvx_ep_destroy(e2);
    } else {
        double t0 = t_now();
        while (!*done && t_now() - t0 < 90) usleep(1000);
        T_CHECK(*done == 1, "rank 0 finished");
        T_CHECK(t_verify(base + LEN, LEN, 1000 + 199) < 0, "rank 1 holds rank 0's last write");
    }
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
