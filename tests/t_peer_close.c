/* t_peer_close: rank 1 destroys its worker while its process lives on. Rank 0, which still has an
 * endpoint to it, gets RVX_ERR_PEER_FAILED (from its status, and from sends once the ring is
 * full) instead of waiting for room that will never come. */
#define RVX_AM_HANDLERS(X) X(NOP, on_nop)
#include <rvx/rvx.h>
#include "testlib.h"

static void on_nop(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_status_t st = RVX_OK;
    double t0;
    int me, i;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    T_OK(rvx_barrier(ctx));
    if (me == 1) {
        rvx_worker_destroy(w);         /* its endpoint to rank 0 goes with it */
        T_OK(rvx_barrier(ctx));        /* rank 0 may look now */
        T_OK(rvx_barrier(ctx));        /* and is done */
    } else {
        T_OK(rvx_barrier(ctx));
        /* shm knows at once (the mailbox is marked closed); a NIC knows when a message or a
         * keepalive to the peer runs out of retries: either way within a bounded time */
        t0 = t_now();
        while (rvx_ep_status(ep) == RVX_OK && t_now() - t0 < 10) rvx_progress(w);
        T_STATUS(rvx_ep_status(ep), RVX_ERR_PEER_FAILED);
        printf("rank 0: peer's close noticed after %.2f s\n", t_now() - t0);
        for (i = 0; i < 100000 && st == RVX_OK; i++) st = rvx_am_short(ep, RVX_AM_NOP, NULL, 0);
        T_CHECK(st == RVX_ERR_PEER_FAILED, "sending to a closed worker: %s after %d sends",
                rvx_status_str(st), i);
        T_STATUS(rvx_ep_flush(ep), RVX_ERR_PEER_FAILED);
        T_OK(rvx_barrier(ctx));
        rvx_worker_destroy(w);
    }
    rvx_finalize(ctx);
    return t_exit();
}
