/* t_dc_credit_reply: dc_mlx5's credits when every rank sends requests to every rank and every
 * handler replies, through pools far smaller than the traffic (RVX_DC_RX_DEPTH 12, claimed 4 at a
 * time, four senders at each receiver). The DCIs fail on the first RNR NAK (retry count 0), so a
 * single overrun of a shared receive queue fails a sender. Two parts:
 *  1. A report of frames taken must count its receiver's frames. Rank 2 sends rank 1 300
 *     requests; then rank 1 alternates requests to rank 2 from the general path (whose prefix
 *     reports rank 1's count of rank 2's frames, 300) and to rank 0 from the one-WQEBB path.
 *     Checks: rank 0 never believes more of its frames taken than it sent, holds no more credits
 *     than a batch, and after an idle interval (its credits go back) can still send 200 requests
 *     to rank 1 in a bounded time (before the fix: it believed 305 taken of 6 sent, its count of
 *     credits held wrapped below zero, and it could never send to rank 1 again).
 *  2. All to all, short (one-WQEBB replies) and medium (bounce-ring replies) requests, with
 *     replies that wait for credits inside handlers while the peer does the same. Checks: every
 *     request and reply arrives once, in order, with its bytes, within a time limit (a wait that
 *     cannot end is a failure, not a hang); no endpoint fails; once all are idle every pool is
 *     whole again (no credit lost or counted twice). */
#define RVX__MLX5_RNR_RETRY 0 /* an RNR NAK is an error: the SRQ must never be overrun */
#define RVX_DC_RX_DEPTH     12
#define RVX_DC_AM_CREDITS   4
#define RVX_DC_CREDIT_IDLE_US 500
#define RVX_AM_HANDLERS(X) X(REQ, on_req) X(REQ_MED, on_req_med) X(ACK, on_ack) X(DONE, on_done)
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define NR    4
#define N_ALL 400  /* part 2: requests from each rank to each rank */
#define LIMIT 100.0 /* seconds a phase may take (starved senders wait for busy ones to pause) */

static int got[NR], bad, acks[NR], acks_bad, done;
static volatile unsigned runtime_two = 2; /* an argument count the compiler cannot fold */

/* Request: a[0] sequence from the sender, a[1] 1 = reply from the one-WQEBB path (two constant
 * arguments), 0 = from the general path (a count known only at run time). */
static void on_req(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    (void)p;
    if (n != 2 || len || a[0] != (uint64_t)got[src]) bad++;
    got[src]++;
    if (n == 2 && a[1]) {
        uint64_t r[2];
        r[0] = a[0];
        r[1] = 1;
        if (rvx_am_reply_short(t, RVX_AM_ACK, r, 2) != RVX_OK) bad++;
    } else if (rvx_am_reply_short(t, RVX_AM_ACK, a, runtime_two) != RVX_OK) {
        bad++;
    }
}

/* A medium request is answered by a medium reply echoing its payload from the bounce ring. */
static void on_req_med(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (n != 2 || a[0] != (uint64_t)got[src] || len != 64 + (size_t)(a[0] * 13) % 150 ||
        t_verify(p, len, a[0] + 977 * (uint64_t)src) >= 0)
        bad++;
    got[src]++;
    if (rvx_am_reply_medium(t, RVX_AM_ACK, a, 2, p, len) != RVX_OK) bad++;
}

static void on_ack(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (t->is_request || n != 2 || a[0] != (uint64_t)acks[src] ||
        (len && t_verify(p, len, a[0] + 977 * (uint64_t)t_rank) >= 0))
        acks_bad++;
    acks[src]++;
}

static void on_done(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    done++;
}

/* A request (med: 0 short, 1 medium, 2 short through the general path), retried while there is
 * no credit, for at most LIMIT seconds from t0. */
static rvx_status_t send_req(rvx_worker_t *w, rvx_ep_t *ep, int med, uint64_t seq, uint64_t mode,
                             const unsigned char *payload, size_t len, double t0)
{
    uint64_t a[RVX_AM_MAX_ARGS] = {0};
    rvx_status_t st;
    unsigned spins = 0;
    a[0] = seq;
    a[1] = mode;
    for (;;) {
        st = med == 1 ? rvx_am_medium(ep, RVX_AM_REQ_MED, a, 2, payload, len)
           : med == 2 ? rvx_am_short(ep, RVX_AM_REQ, a, runtime_two) /* the general path */
                      : rvx_am_short(ep, RVX_AM_REQ, a, 2); /* one WQEBB once credits are held */
        if (st != RVX_ERR_NO_RESOURCE || t_now() - t0 > LIMIT) return st;
        if (!rvx_progress(w)) rvx__backoff(&spins);
    }
}

static int wait_acks(rvx_worker_t *w, int r, int n, double t0)
{
    while (acks[r] < n && t_now() - t0 < LIMIT) rvx_progress(w);
    return acks[r] >= n;
}

static int wait_got(rvx_worker_t *w, int r, int n, double t0)
{
    while (got[r] < n && t_now() - t0 < LIMIT) rvx_progress(w);
    return got[r] >= n;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx__tl_iface_t *ifc;
    rvx_ep_t *eps[NR];
    static unsigned char payload[256];
    int me, i, r, sent[NR];
    rvx_status_t st;
    double t0;

    t_spawn(argc, argv, NR, 420);
    me = t_start(&ctx, &w);
    ifc = &w->iface[0];
    for (r = 0; r < NR; r++) {
        T_OK(rvx_ep_create(w, r, &eps[r]));
        sent[r] = 0;
    }
    T_OK(rvx_barrier(ctx));

    /* ---- part 1: rank 1's report to rank 2 must not reach rank 0. Rank 2's 300 requests make
     * rank 1's count of rank 2's frames 300; then rank 1 alternates a request to rank 2 from the
     * general path (its prefix reports that count) and one to rank 0 from the one-WQEBB path */
    t0 = t_now();
    if (me == 2) {
        for (i = 0; i < 300 && !t_failures; i++) T_OK(send_req(w, eps[1], 2, (uint64_t)i, 0, NULL, 0, t0));
        T_CHECK(wait_acks(w, 1, 300, t0), "rank 2: %d of 300 replies from rank 1", acks[1]);
    } else if (me == 1) {
        T_CHECK(wait_got(w, 2, 300, t0), "rank 1: %d of 300 requests from rank 2", got[2]);
    }
    T_OK(rvx_barrier(ctx));
    t0 = t_now();
    if (me == 1) {
        for (i = 0; i < 6 && !t_failures; i++) {
            T_OK(send_req(w, eps[2], 2, (uint64_t)i, 0, NULL, 0, t0));
            T_OK(send_req(w, eps[0], 0, (uint64_t)i, 1, NULL, 0, t0));
        }
        T_CHECK(wait_acks(w, 0, 6, t0) && wait_acks(w, 2, 6, t0), "rank 1: %d and %d of 6 "
                "replies from ranks 0 and 2", acks[0], acks[2]);
        T_CHECK(wait_got(w, 0, 200, t0), "rank 1: %d of 200 requests from rank 0", got[0]);
    } else if (me == 2) {
        T_CHECK(wait_got(w, 1, 6, t0), "rank 2: %d of 6 requests from rank 1", got[1]);
    } else if (me == 0) {
        const rvx__tl_ep_t *tl = &eps[1]->tl[0];
        T_CHECK(wait_got(w, 1, 6, t0), "rank 0: %d of 6 requests from rank 1", got[1]);
        T_CHECK((int32_t)(rvx__dc_tx_sent(tl) - rvx__dc_consumed(tl)) >= 0,
                "rank 0 believes %u of its frames taken by rank 1, having sent %u",
                rvx__dc_consumed(tl), rvx__dc_tx_sent(tl));
        /* idle for a few sweep intervals: the credits held at rank 1 go back */
        while (t_now() - t0 < 0.005 + 4 * RVX_DC_CREDIT_IDLE_US * 1e-6) rvx_progress(w);
        T_CHECK(ifc->peers[1].claimed <= RVX_DC_AM_CREDITS, "rank 0 holds %u credits at rank 1",
                ifc->peers[1].claimed);
        t0 = t_now();
        for (i = 0; i < 200 && !t_failures; i++) {
            st = send_req(w, eps[1], 0, (uint64_t)i, 1, NULL, 0, t0);
            T_CHECK(st == RVX_OK, "rank 0: request %d to rank 1 after idling: %s", i,
                    rvx_status_str(st));
        }
        T_CHECK(wait_acks(w, 1, 200, t0), "rank 0: %d of 200 replies from rank 1", acks[1]);
        T_CHECK(ifc->peers[1].claimed <= RVX_DC_AM_CREDITS, "rank 0 holds %u credits at rank 1",
                ifc->peers[1].claimed);
    }
    /* every part-1 request has been answered: sequences start again at zero before the barrier,
     * so no part-2 frame finds the old counts */
    for (r = 0; r < NR; r++) sent[r] = got[r] = acks[r] = 0;
    T_OK(rvx_barrier(ctx));

    /* ---- part 2: all to all, every handler replies */
    t0 = t_now();
    if (!t_failures) {
        for (i = 0; i < N_ALL && !t_failures; i++) {
            for (r = 0; r < NR && !t_failures; r++) {
                int med = (i + r) % 3 == 0;
                size_t len = 64 + (size_t)((uint64_t)i * 13) % 150;
                if (med) t_fill(payload, len, (uint64_t)i + 977 * (uint64_t)me);
                st = send_req(w, eps[r], med, (uint64_t)i, (uint64_t)(i & 1), payload, len, t0);
                T_CHECK(st == RVX_OK, "request %d to rank %d: %s", i, r, rvx_status_str(st));
                sent[r]++;
            }
            rvx_progress(w);
        }
        for (r = 0; r < NR; r++)
            T_CHECK(wait_acks(w, r, sent[r], t0), "%d of %d replies from rank %d", acks[r], sent[r], r);
    }
    for (r = 0; r < NR; r++) {
        st = RVX_ERR_NO_RESOURCE;
        while (st == RVX_ERR_NO_RESOURCE && t_now() - t0 < LIMIT + 10) {
            st = rvx_am_short(eps[r], RVX_AM_DONE, NULL, 0);
            if (st == RVX_ERR_NO_RESOURCE) rvx_progress(w);
        }
        T_CHECK(st == RVX_OK, "done to rank %d: %s", r, rvx_status_str(st));
    }
    while (done < NR && t_now() - t0 < LIMIT + 20) rvx_progress(w);
    T_CHECK(done == NR, "%d of %d ranks finished", done, NR);
    for (r = 0; r < NR; r++) {
        T_CHECK(got[r] == N_ALL, "from rank %d: %d of %d requests", r, got[r], N_ALL);
        T_CHECK(rvx_ep_status(eps[r]) == RVX_OK, "endpoint to rank %d: %s", r,
                rvx_status_str(rvx_ep_status(eps[r])));
    }
    T_CHECK(bad == 0, "%d requests out of order, with wrong bytes, or unanswered", bad);
    T_CHECK(acks_bad == 0, "%d replies wrong", acks_bad);
    /* idle, progressing, until this worker holds no credits, owes no report and its pool is
     * whole: every credit came back to where it belongs */
    t0 = t_now();
    while ((*(volatile uint64_t *)&ifc->ctrl[0] != RVX_DC_RX_DEPTH || ifc->nholders || ifc->ndirty) &&
           t_now() - t0 < 20)
        rvx_progress(w);
    T_CHECK(ifc->ctrl[0] == RVX_DC_RX_DEPTH && !ifc->nholders, "the pool is %lld once all are idle, "
            "not %d (%u endpoints hold credits)", (long long)ifc->ctrl[0], RVX_DC_RX_DEPTH,
            ifc->nholders);
    if (!t_failures)
        printf("t_dc_credit_reply: rank %d: part 1 clean; %d x %d requests all to all through %d "
               "credits, all answered; %lu claims, %lu found the pool empty; pool whole\n", me,
               NR, N_ALL, RVX_DC_RX_DEPTH, ifc->claims, ifc->claim_fails);
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < NR; r++) rvx_ep_destroy(eps[r]);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
