/* t_rc_reconnect: a failed rc_mlx5 endpoint is re-created and works again, on both sides.
 *  1. rank 1 writes past rank 0's region (RVX_ERR_REMOTE_ACCESS), destroys and re-creates its
 *     endpoint while rank 0 only waits in a barrier: puts, gets and atomics to rank 0 work at
 *     once; rank 0's endpoint has failed meanwhile (the peer re-connected), rank 0 re-creates it
 *     too, and active messages flow both ways for several times the receive queue (credits
 *     after the re-connection);
 *  2. the same pair fails again, now from rank 0's side: the spare made in step 1 serves;
 *  3. both sides of the pair fail and re-create at the same moment;
 *  4. rank 2 dies: re-creating the endpoint to it ends in RVX_ERR_PEER_FAILED, in bounded time.
 * Rank 2 talks to ranks 0 and 1 throughout (steps 1 to 3): other endpoints are not affected. */
#define RVX_AM_HANDLERS(X) X(MSG, on_msg) X(ACK, on_ack)
#include <rvx/rvx.h>
#include "testlib.h"

#define NR     3
#define REGION 65536
#define NMSG   (4 * RVX_MLX5_RX_DEPTH + 7)
#define BODY   1000

static int got[NR], bad[NR], acked[NR];

/* args: sequence number, sender; body: t_fill(seq * 31 + sender) */
static void on_msg(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (n != 2 || a[0] != (uint64_t)got[src] || a[1] != (uint64_t)src || len != BODY ||
        t_verify(p, len, a[0] * 31 + a[1]) >= 0)
        bad[src]++;
    got[src]++;
    T_OK(rvx_am_reply_short(t, RVX_AM_ACK, a, 1));
}

static void on_ack(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    (void)p;
    if (n != 1 || len || a[0] != (uint64_t)acked[src]) bad[src]++;
    acked[src]++;
}

/* NMSG medium messages to peer and NMSG from it, every one answered; payloads checked. Both
 * sides call it as often, so the totals to wait for are known. */
static int sent_to[NR];

static void talk(rvx_worker_t *w, rvx_ep_t *ep, int me, const char *when)
{
    int peer = rvx_ep_rank(ep), i;
    unsigned char body[BODY];
    double t0 = t_now();
    rvx_status_t st;
    for (i = 0; i < NMSG; i++) {
        uint64_t a[2];
        a[0] = (uint64_t)sent_to[peer];
        a[1] = (uint64_t)me;
        t_fill(body, BODY, a[0] * 31 + a[1]);
        rvx_am_retry(w, st, rvx_am_medium(ep, RVX_AM_MSG, a, 2, body, BODY));
        T_CHECK(st == RVX_OK, "%s: message %d to rank %d: %s", when, i, peer, rvx_status_str(st));
        if (st != RVX_OK) return;
        sent_to[peer]++;
    }
    while ((got[peer] < sent_to[peer] || acked[peer] < sent_to[peer]) && t_now() - t0 < 60)
        rvx_progress(w);
    T_CHECK(got[peer] == sent_to[peer] && acked[peer] == sent_to[peer],
            "%s: %d of %d messages from rank %d, %d of %d answers", when, got[peer], sent_to[peer],
            peer, acked[peer], sent_to[peer]);
    T_CHECK(bad[peer] == 0, "%s: %d messages from rank %d were wrong", when, bad[peer], peer);
}

/* Put a pattern into peer's region at off, read it back, add to a counter: all must succeed. */
static void rma(rvx_worker_t *w, rvx_ep_t *ep, const t_remote_t *rm, const rvx_rkey_t *rk,
                uint64_t off, uint64_t seed, const char *when)
{
    unsigned char out[4096], in[4096];
    rvx_request_t req;
    uint64_t old = 0;
    rvx_status_t st;
    t_fill(out, sizeof(out), seed);
    T_OK(rvx_put(ep, out, sizeof(out), rm->addr + off, rk));
    T_OK(rvx_ep_flush(ep));
    rvx_request_init(&req);
    st = rvx_complete(w, rvx_get(ep, in, sizeof(in), rm->addr + off, rk, &req), &req);
    T_CHECK(st == RVX_OK && !memcmp(in, out, sizeof(in)), "%s: get after put to rank %d: %s%s",
            when, rvx_ep_rank(ep), rvx_status_str(st), st == RVX_OK ? " (data differ)" : "");
    rvx_request_init(&req);
    st = rvx_complete(w, rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, rm->addr + REGION - 8, rk, &old, &req), &req);
    T_CHECK(st == RVX_OK, "%s: atomic add at rank %d: %s", when, rvx_ep_rank(ep), rvx_status_str(st));
}

/* Destroy and re-create the (failed) endpoint to peer. */
static rvx_ep_t *recreate(rvx_worker_t *w, rvx_ep_t *ep, const t_remote_t *rm, rvx_rkey_t *rk,
                          const char *when)
{
    int peer = rvx_ep_rank(ep);
    double t0;
    T_CHECK(rvx_ep_status(ep) != RVX_OK, "%s: the endpoint to rank %d should have failed", when, peer);
    rvx_rkey_release(rk);
    rvx_ep_destroy(ep);
    t0 = t_now();
    T_OK(rvx_ep_create(w, peer, &ep));
    printf("rank %d: %s: endpoint to rank %d re-created in %.3f s\n", t_rank, when, peer, t_now() - t0);
    T_OK(rvx_rkey_unpack(ep, rm->packed, rk));
    T_OK(rvx_ep_status(ep));
    return ep;
}

/* Fail the endpoint to peer with a write past its region (canceled instead, when the peer's own
 * re-connection failed it first), then re-create it. */
static rvx_ep_t *fail_and_recreate(rvx_worker_t *w, rvx_ep_t *ep, const t_remote_t *rm,
                                   rvx_rkey_t *rk, int may_be_canceled, const char *when)
{
    uint64_t one = 1;
    rvx_status_t st;
    T_OK(rvx_put(ep, &one, 8, rm->addr + REGION, rk));
    st = rvx_ep_flush(ep);
    T_CHECK(st == RVX_ERR_REMOTE_ACCESS || (may_be_canceled && st == RVX_ERR_CANCELED),
            "%s: a write past the region: flush returned %s", when, rvx_status_str(st));
    return recreate(w, ep, rm, rk, when);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[NR];
    rvx_rkey_t rk[NR];
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *region;
    int me, r, other;

    t_spawn(argc, argv, NR, 240);
    me = t_start(&ctx, &w);
    region = (unsigned char *)aligned_alloc(4096, REGION + 4096);
    memset(region, 0, REGION + 4096);
    T_OK(rvx_mem_reg(ctx, region, REGION, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < NR; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }
    other = me == 0 ? 1 : 0;
    T_OK(rvx_barrier(ctx));

    /* 1: rank 1 fails and re-creates; rank 0 only waits */
    if (me == 1) {
        ep[0] = fail_and_recreate(w, ep[0], &rm[0], &rk[0], 0, "step 1");
        rma(w, ep[0], &rm[0], &rk[0], 0, 1, "step 1 (rank 0 has not polled)");
    } else if (me == 2) {
        rma(w, ep[0], &rm[0], &rk[0], 8192, 2, "step 1, rank 2");
        rma(w, ep[1], &rm[1], &rk[1], 8192, 3, "step 1, rank 2");
    }
    T_OK(rvx_barrier(ctx));
    if (me == 0) { /* rank 1's re-connection failed our endpoint: we re-create it too */
        T_CHECK(t_verify(region, 4096, 1) < 0, "step 1: rank 1's put did not land");
        ep[1] = recreate(w, ep[1], &rm[1], &rk[1], "step 1, following");
    }
    for (r = 0; r < NR; r++)
        if (r != me) talk(w, ep[r], me, "step 1");
    if (me < 2) rma(w, ep[other], &rm[other], &rk[other], 4096, 10 + (uint64_t)me, "step 1, after");
    T_OK(rvx_barrier(ctx));

    /* 2: rank 0 fails and re-creates (the spare made in step 1) */
    if (me == 0) {
        ep[1] = fail_and_recreate(w, ep[1], &rm[1], &rk[1], 0, "step 2");
        rma(w, ep[1], &rm[1], &rk[1], 0, 20, "step 2");
    }
    T_OK(rvx_barrier(ctx));
    if (me == 1) ep[0] = recreate(w, ep[0], &rm[0], &rk[0], "step 2, following");
    if (me < 2) talk(w, ep[other], me, "step 2");
    T_OK(rvx_barrier(ctx));

    /* 3: both fail, both re-create at once */
    if (me < 2) ep[other] = fail_and_recreate(w, ep[other], &rm[other], &rk[other], 1, "step 3");
    T_OK(rvx_barrier(ctx));
    if (me < 2) {
        rma(w, ep[other], &rm[other], &rk[other], 0, 30 + (uint64_t)me, "step 3");
        talk(w, ep[other], me, "step 3");
    }
    T_OK(rvx_barrier(ctx));
    if (me < 2) T_CHECK(t_verify(region, 4096, 30 + (uint64_t)other) < 0, "step 3: the peer's put did not land");

    /* 4: rank 2 dies; re-creating the endpoint to it fails in bounded time */
    T_OK(rvx_barrier(ctx));
    if (me == 2) _exit(t_failures ? 1 : 0);
    if (me == 0) {
        uint64_t one = 1;
        double t0 = t_now();
        rvx_status_t st = RVX_OK;
        usleep(100000);
        while (st == RVX_OK && t_now() - t0 < 20) {
            st = rvx_put(ep[2], &one, 8, rm[2].addr, &rk[2]);
            if (st == RVX_OK) st = rvx_ep_flush(ep[2]);
        }
        T_STATUS(st, RVX_ERR_PEER_FAILED);
        rvx_rkey_release(&rk[2]);
        rvx_ep_destroy(ep[2]);
        ep[2] = NULL;
        t0 = t_now();
        st = rvx_ep_create(w, 2, &ep[2]);
        T_STATUS(st, RVX_ERR_PEER_FAILED);
        T_CHECK(t_now() - t0 < 15, "re-creating towards a dead peer took %.1f s", t_now() - t0);
        printf("rank 0: re-creating towards dead rank 2: %s after %.2f s\n", rvx_status_str(st),
               t_now() - t0);
    }
    for (r = 0; r < NR; r++)
        if (ep[r]) { rvx_rkey_release(&rk[r]); rvx_ep_destroy(ep[r]); }
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    free(region);
    if (!t_failures) printf("rank %d: every re-connection worked\n", me);
    return t_exit();
}
