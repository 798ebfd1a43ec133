/* t_dc_credit_destroy: endpoint destruction gives back every credit, once. Rank 0 creates an
 * endpoint to rank 1, sends it a few messages, destroys it at once (the frames not reported:
 * sweeps run only every 10 s here), and does that ROUNDS times; rank 1's report of half a batch
 * arrives in between, for frames whose credits already went back. Rank 1 takes every message.
 * Then rank 0 holds no credit at rank 1, and rank 1's pool is exactly RVX_DC_RX_DEPTH again:
 * neither lost (a give-back missing) nor above it (a report counted again by a later endpoint,
 * which would let senders overrun the shared receive queue). With the check that a later endpoint
 * ignores reports of frames already paid for taken out, the pool ends far off. */
#define RVX_DC_CREDIT_IDLE_US 10000000
#define RVX_AM_HANDLERS(X) X(MSG, on_msg)
#include <rvx/rvx.h>
#include "testlib.h"

#define ROUNDS 10
#define PER    3

static int got;

static void on_msg(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 1 && a[0] == (uint64_t)got) got++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx__tl_iface_t *ifc;
    double t0;
    int me, r, i;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    ifc = &w->iface[0];
    if (me == 1) T_OK(rvx_ep_create(w, 0, &ep)); /* messages are delivered to an endpoint */
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        for (r = 0; r < ROUNDS; r++) {
            T_OK(rvx_ep_create(w, 1, &ep));
            for (i = 0; i < PER; i++) {
                uint64_t a = (uint64_t)(r * PER + i);
                rvx_status_t st;
                rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_MSG, &a, 1));
                T_OK(st);
            }
            rvx_ep_destroy(ep);
            t0 = t_now(); /* a little progress: a report of rank 1's may come in */
            while (t_now() - t0 < 0.002) rvx_progress(w);
        }
        T_OK(rvx_worker_flush(w)); /* the give-backs have reached rank 1's pool */
        T_CHECK(ifc->peers[1].claimed == 0, "rank 0 still holds %u credits at rank 1",
                ifc->peers[1].claimed);
    } else {
        t0 = t_now();
        while (got < ROUNDS * PER && t_now() - t0 < 30) rvx_progress(w);
        T_CHECK(got == ROUNDS * PER, "%d of %d messages, in order", got, ROUNDS * PER);
    }
    T_OK(rvx_barrier(ctx));
    if (me == 1) {
        long long pool = (long long)*(volatile uint64_t *)&ifc->ctrl[0];
        printf("rank 1: %d messages in %d endpoints' lives; the pool is %lld of %d\n", got,
               ROUNDS, pool, RVX_DC_RX_DEPTH);
        T_CHECK(pool == RVX_DC_RX_DEPTH, "the pool is %lld after every endpoint went, not %d", pool,
                RVX_DC_RX_DEPTH);
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
