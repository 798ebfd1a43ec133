/* t_rc_errors: error completions on rc_mlx5 become statuses, and stay on their endpoint.
 *  - rank 1 writes just past rank 0's registered region: the NIC refuses it, the flush returns
 *    RVX_ERR_REMOTE_ACCESS, nothing outside the region changes, and later work on that endpoint
 *    completes with an error instead of hanging;
 *  - rank 0's endpoint to rank 1 fails too (the responder's QP goes to the error state, and the
 *    adapter says why by an affiliated event): its flush and status say RVX_ERR_REMOTE_ACCESS,
 *    not that rank 1 is gone;
 *  - meanwhile rank 2's endpoint to rank 0 works normally, and so does rank 1's to rank 2;
 *  - then rank 3 dies: rank 1's puts to it end in RVX_ERR_PEER_FAILED within a bounded time
 *    (the QP's retries), while ranks 0 and 2 keep talking. (Ranks 0 and 1 cannot: both sides of
 *    their QP pair went to the error state with the access error.) */
#include <rvx/rvx.h>
#include "testlib.h"

#define REGION 65536
#define SLACK  4096

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[4] = {NULL, NULL, NULL, NULL};
    rvx_rkey_t rk[4];
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *user, buf[4096];
    uint64_t one = 1;
    int me, r;
    size_t i;

    t_spawn(argc, argv, 4, 120);
    me = t_start(&ctx, &w);
    /* a registered region with unregistered bytes right after it */
    user = (unsigned char *)aligned_alloc(4096, REGION + SLACK);
    memset(user, 0x11, REGION + SLACK);
    T_OK(rvx_mem_reg(ctx, user, REGION, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < 4; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }
    T_OK(rvx_barrier(ctx));

    if (me == 1) {
        rvx_request_t req;
        rvx_status_t st;
        uint64_t v = 0;
        /* past the end of rank 0's region: refused by the responder */
        T_OK(rvx_put(ep[0], &one, 8, rm[0].addr + REGION, &rk[0]));
        T_STATUS(rvx_ep_flush(ep[0]), RVX_ERR_REMOTE_ACCESS);
        /* the endpoint is failed now: new work ends in an error, it does not hang */
        T_CHECK(rvx_put(ep[0], &one, 8, rm[0].addr, &rk[0]) != RVX_OK || rvx_ep_flush(ep[0]) != RVX_OK,
                "work on a failed endpoint reported success");
        rvx_request_init(&req);
        st = rvx_complete(w, rvx_get(ep[0], &v, 8, rm[0].addr, &rk[0], &req), &req);
        T_CHECK(st != RVX_OK, "get on a failed endpoint: %s", rvx_status_str(st));
        /* the other endpoint is untouched */
        t_fill(buf, sizeof(buf), 12);
        T_OK(rvx_put(ep[2], buf, sizeof(buf), rm[2].addr + 4096, &rk[2]));
        T_OK(rvx_ep_flush(ep[2]));
    } else if (me == 2) {
        t_fill(buf, sizeof(buf), 20);
        T_OK(rvx_put(ep[0], buf, sizeof(buf), rm[0].addr, &rk[0]));
        T_OK(rvx_ep_flush(ep[0]));
    }
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        for (i = REGION; i < REGION + SLACK; i++)
            if (user[i] != 0x11) { T_CHECK(0, "byte %zu past the region changed", i); break; }
        T_CHECK(t_verify(user, 4096, 20) < 0, "rank 2's put arrived");
        /* the responder's side: the adapter failed its QP to rank 1 as well (IBA responder class
         * C); work on it says why, an access error, not that rank 1 is gone */
        (void)rvx_put(ep[1], &one, 8, rm[1].addr, &rk[1]);
        T_STATUS(rvx_ep_flush(ep[1]), RVX_ERR_REMOTE_ACCESS);
        T_STATUS(rvx_ep_status(ep[1]), RVX_ERR_REMOTE_ACCESS);
    }
    if (me == 2) T_CHECK(t_verify(user + 4096, 4096, 12) < 0, "rank 1's put arrived");
    T_OK(rvx_barrier(ctx));

    if (me == 3) {
        fflush(NULL);
        _exit(t_failures ? 1 : 0); /* gone without a word */
    }
    if (me == 1) {
        double t0 = t_now();
        rvx_status_t st;
        /* rank 3 may still be on its way out after the barrier: a put that lands before it is
         * gone succeeds, so put again until one reports the death */
        do {
            T_OK(rvx_put(ep[3], &one, 8, rm[3].addr, &rk[3]));
            st = rvx_ep_flush(ep[3]);
        } while (st == RVX_OK && t_now() - t0 < 30);
        T_STATUS(st, RVX_ERR_PEER_FAILED);
        T_CHECK(t_now() - t0 < 30, "peer failure took %.1f s to report", t_now() - t0);
        printf("rank 1: rank 3's death reported as '%s' after %.2f s\n", rvx_status_str(st), t_now() - t0);
    } else if (me == 2) {
        double t0 = t_now();
        /* survivors: rank 0 tells rank 2 it is done, through rank 2's region */
        while (user[8 * 1024] != 0x5a && t_now() - t0 < 60) rvx_progress(w);
        T_CHECK(user[8 * 1024] == 0x5a, "rank 0's put did not arrive after rank 3 died");
    } else if (me == 0) {
        unsigned char flag = 0x5a;
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        T_OK(rvx_put(ep[2], &flag, 1, rm[2].addr + 8 * 1024, &rk[2]));
        T_OK(rvx_ep_flush(ep[2]));
        printf("rank 0: rank 2 still reached after rank 3 died\n");
    }
    for (r = 0; r < 4; r++) rvx_rkey_release(&rk[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    free(user);
    return t_exit();
}
