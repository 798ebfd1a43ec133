/* t_dc_credit_idle: dc_mlx5's credits come back from endpoints that stay alive but go idle.
 * Rank 0's pool is 8 credits (RVX_DC_RX_DEPTH) claimed up to 4 at a time, so at most two of the
 * six senders can hold credits at once; no sender destroys its endpoint. Each sender sends rounds
 * of messages (inline and bounce frames) and, after each round, waits for rank 0's reply to its
 * last one: while it waits it sends nothing, and its credits must go back to the pool for the
 * others to go on (without that, the third sender would wait for ever). The DCIs fail on the first
 * RNR NAK (retry count 0), so a single overrun of the shared receive queue would fail a sender.
 * Checks: every message arrives once, in order per sender, with its bytes; every sender got every
 * reply and no endpoint failed; living endpoints gave credits back; and once all are idle the pool
 * is whole again (8), so no credit was lost or counted twice. */
#define RVX__MLX5_RNR_RETRY 0 /* an RNR NAK is an error: the SRQ must never be overrun */
#define RVX_DC_RX_DEPTH     8
#define RVX_DC_AM_CREDITS   4
#define RVX_AM_HANDLERS(X) X(MSG, on_msg) X(ACK, on_ack) X(DONE, on_done) X(BYE, on_bye)
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define NR      7  /* rank 0 receives, six senders */
#define ROUNDS  25
#define PER     12 /* messages a round */

static int next_seq[NR], bad, done, acks, bye;
static unsigned long released_seen, fails_seen;

static void on_msg(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    uint64_t r[1];
    if (n != 2 || a[0] != (uint64_t)next_seq[src] || a[1] != (uint64_t)src ||
        len != (size_t)(a[0] * 29) % 200 || (len && t_verify(p, len, a[0] + 1000 * (uint64_t)src) >= 0))
        bad++;
    next_seq[src]++;
    if (n == 2 && a[0] % PER == PER - 1) { /* the round's last: the sender may go on */
        r[0] = a[0];
        if (rvx_am_reply_short(t, RVX_AM_ACK, r, 1) != RVX_OK) bad++;
    }
}

static void on_ack(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n != 1 || a[0] != (uint64_t)(acks + 1) * PER - 1) bad++;
    acks++;
}

static void on_done(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 2) { released_seen += a[0]; fails_seen += a[1]; }
    done++;
}

static void on_bye(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    bye++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep, *eps[NR];
    static unsigned char payload[256];
    int me, i, r;
    rvx_status_t st;
    double t0;

    /* Nobody dies here: a rank descheduled for seconds on a busy machine must not run a sender
     * out of transport retries (the model's default bound, 2 s, would), so they get a longer one. */
    setenv("RVXSIM_RETRY_TIMEOUT_MS", "30000", 0);
    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    if (me == 0)
        for (r = 1; r < NR; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    else
        T_OK(rvx_ep_create(w, 0, &ep));
    T_OK(rvx_barrier(ctx));
    if (me != 0) {
        uint64_t a[2];
        t0 = t_now();
        for (i = 0; i < ROUNDS * PER && !t_failures; i++) {
            size_t len = (size_t)((uint64_t)i * 29) % 200;
            a[0] = (uint64_t)i;
            a[1] = (uint64_t)me;
            t_fill(payload, len, (uint64_t)i + 1000 * (uint64_t)me);
            rvx_am_retry(w, st, rvx_am_medium(ep, RVX_AM_MSG, a, 2, payload, len));
            T_CHECK(st == RVX_OK, "message %d: %s", i, rvx_status_str(st));
            if (i % PER == PER - 1) { /* idle until rank 0 has the round */
                while (acks < i / PER + 1 && t_now() - t0 < 60) rvx_progress(w);
                T_CHECK(acks == i / PER + 1, "round %d: no reply from rank 0", i / PER);
            }
        }
        T_CHECK(rvx_ep_status(ep) == RVX_OK, "endpoint: %s", rvx_status_str(rvx_ep_status(ep)));
        a[0] = w->iface[0].released;
        a[1] = w->iface[0].claim_fails;
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_DONE, a, 2));
        T_OK(st);
        /* idle, progressing: the last credits go back while rank 0 watches its pool */
        while (!bye && t_now() - t0 < 90) rvx_progress(w);
        T_CHECK(bye == 1, "no goodbye from rank 0");
    } else {
        rvx__tl_iface_t *ifc = &w->iface[0];
        t0 = t_now();
        while (done < NR - 1 && t_now() - t0 < 60) rvx_progress(w);
        T_CHECK(done == NR - 1, "%d of %d senders finished", done, NR - 1);
        for (r = 1; r < NR; r++)
            T_CHECK(next_seq[r] == ROUNDS * PER, "rank %d: %d of %d messages", r, next_seq[r],
                    ROUNDS * PER);
        T_CHECK(bad == 0, "%d messages out of order, with wrong bytes, or unanswered", bad);
        T_CHECK(released_seen > 0, "no living endpoint gave credits back");
        T_CHECK(fails_seen > 0, "no sender found the pool empty");
        t0 = t_now();
        while (*(volatile uint64_t *)&ifc->ctrl[0] != RVX_DC_RX_DEPTH && t_now() - t0 < 10)
            rvx_progress(w);
        T_CHECK(ifc->ctrl[0] == RVX_DC_RX_DEPTH, "the pool is %lld once all senders are idle, "
                "not %d", (long long)ifc->ctrl[0], RVX_DC_RX_DEPTH);
        for (r = 1; r < NR; r++) {
            rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_BYE, NULL, 0));
            T_OK(st);
        }
        T_OK(rvx_worker_flush(w));
        if (!t_failures)
            printf("t_dc_credit_idle: %d senders x %d rounds x %d messages through 8 credits, "
                   "endpoints kept; %lu credits given back by idle endpoints, %lu claims found the "
                   "pool empty; pool whole at the end\n", NR - 1, ROUNDS, PER, released_seen,
                   fails_seen);
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
