/* t_destroy_stopped: endpoint destruction towards a peer that does not answer still ends. Rank 1
 * stops itself (SIGSTOP: rvxsim waits for a stopped process instead of running out of retries,
 * so no error CQE will come); rank 0 posts a get to it and destroys the endpoint. Destroy waits
 * for the get, at most the QP's retry time plus a second (RVX__MLX5_TEARDOWN_S; the ACK timeout
 * is shortened here to 4.096 us x 2^8 so that is about 1 s), then fails the queue on purpose:
 * the get ends RVX_ERR_CANCELED instead of staying pending. Checked by the event (the request's
 * status), not the time, which is printed. On shm the get completes at once (it needs no help
 * from the peer). Built for shm, rc_mlx5, dc_mlx5 and the pair. */
#define RVX_MLX5_TIMEOUT 8
#include <rvx/rvx.h>
#include <signal.h>
#include "testlib.h"

int main(int argc, char **argv)
{
    static char buf[4096];
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    rvx_ep_t *ep;
    rvx_rkey_t rk;
    rvx_request_t req;
    rvx_status_t st;
    pid_t pids[2], mine = getpid();
    double t0;
    int me;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, 4096, &mem));
    rm = t_exchange(ctx, mem);
    T_OK(rvx_allgather(ctx, &mine, sizeof(mine), pids));
    if (me == 1) {
        raise(SIGSTOP); /* rank 0 continues it */
    } else {
        usleep(200000); /* rank 1 has stopped */
        T_OK(rvx_ep_create(w, 1, &ep));
        T_OK(rvx_rkey_unpack(ep, rm[1].packed, &rk));
        st = rvx_get(ep, buf, sizeof(buf), rm[1].addr, &rk, &req);
        t0 = t_now();
        rvx_ep_destroy(ep);
        if (st == RVX_INPROGRESS) st = (rvx_status_t)req.status;
        printf("rank 0: the get to a stopped peer ended %s when the endpoint was destroyed "
               "(%.2f s)\n", rvx_status_str(st), t_now() - t0);
        T_CHECK(st != RVX_INPROGRESS, "the get outlived its endpoint");
        T_CHECK(st == RVX_OK || st == RVX_ERR_CANCELED, "the get ended %s", rvx_status_str(st));
        rvx_rkey_release(&rk);
        kill(pids[1], SIGCONT);
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    free(rm);
    rvx_finalize(ctx);
    return t_exit();
}
