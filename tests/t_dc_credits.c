/* t_dc_credits: dc_mlx5's message credits when the receiver's shared receive queue is the
 * bottleneck. Rank 0 has a pool of 8 credits (RVX_DC_RX_DEPTH) handed out 4 at a time, so at
 * most two of the three senders can hold credits at once; the DCIs are built to fail on the first
 * RNR NAK (retry count 0), so a single overrun of the SRQ would fail a sender's endpoint.
 * Checks: every message arrives once, in order per sender, with its bytes (inline and bounce
 * frames); no endpoint fails; some sender found the pool empty and waited (the credits of a
 * finished sender went back to the pool when its endpoint was destroyed); a sender's new endpoint
 * goes on with the credits where the old one left them. Each sender destroys its endpoint when it
 * is done, which gives its credits back at once (an idle endpoint would give them back within a
 * sweep interval: t_dc_credit_idle). */
#define RVX__MLX5_RNR_RETRY 0 /* an RNR NAK is an error: the SRQ must never be overrun */
#define RVX_DC_RX_DEPTH     8
#define RVX_DC_AM_CREDITS   4
#define RVX_AM_HANDLERS(X) X(MSG, on_msg) X(DONE, on_done)
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define NR    4
#define N_MSG 1500

static int next_seq[NR], bad, done;
static unsigned long fails_seen, claims_seen;

static void on_msg(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (n != 2 || a[0] != (uint64_t)next_seq[src] || a[1] != (uint64_t)src ||
        len != (size_t)(a[0] * 37) % 300 || (len && t_verify(p, len, a[0] + 1000 * (uint64_t)src) >= 0))
        bad++;
    next_seq[src]++;
}

static void on_done(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 2) { claims_seen += a[0]; fails_seen += a[1]; }
    done++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    static unsigned char payload[512];
    int me, i, r;
    rvx_status_t st;
    double t0;

    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    if (me == 0) {
        for (r = 1; r < NR; r++) {
            rvx_ep_t *e;
            T_OK(rvx_ep_create(w, r, &e)); /* kept: messages are delivered through it */
        }
    }
    T_OK(rvx_barrier(ctx));
    if (me != 0) {
        uint64_t a[2];
        T_OK(rvx_ep_create(w, 0, &ep));
        for (i = 0; i < N_MSG; i++) {
            size_t len = (size_t)((uint64_t)i * 37) % 300;
            a[0] = (uint64_t)i;
            a[1] = (uint64_t)me;
            t_fill(payload, len, (uint64_t)i + 1000 * (uint64_t)me);
            rvx_am_retry(w, st, rvx_am_medium(ep, RVX_AM_MSG, a, 2, payload, len));
            T_CHECK(st == RVX_OK, "message %d: %s", i, rvx_status_str(st));
            if (st != RVX_OK) break;
        }
        T_OK(rvx_ep_flush(ep));
        rvx_ep_destroy(ep); /* its credits go back to rank 0's pool */
        T_OK(rvx_ep_create(w, 0, &ep));
        a[0] = w->iface[0].claims;
        a[1] = w->iface[0].claim_fails;
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_DONE, a, 2));
        T_OK(st);
        T_OK(rvx_ep_flush(ep));
        rvx_ep_destroy(ep); /* its credits go back now */
    } else {
        t0 = t_now();
        while (done < NR - 1 && t_now() - t0 < 60) rvx_progress(w);
        T_CHECK(done == NR - 1, "%d of %d senders finished", done, NR - 1);
        for (r = 1; r < NR; r++)
            T_CHECK(next_seq[r] == N_MSG, "rank %d: %d of %d messages", r, next_seq[r], N_MSG);
        T_CHECK(bad == 0, "%d messages out of order or with wrong bytes", bad);
        T_CHECK(claims_seen >= NR - 1, "%lu credit claims", claims_seen);
        T_CHECK(fails_seen > 0, "no sender found the pool empty (%lu claims)", claims_seen);
        if (!t_failures)
            printf("t_dc_credits: %d x %d messages through 8 credits; %lu claims, %lu found the pool empty\n",
                   NR - 1, N_MSG, claims_seen, fails_seen);
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
