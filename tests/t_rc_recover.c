/* t_rc_recover: the recovery after a remote access error, as a user writes it: both sides
 * destroy and re-create their endpoint, and neither blocks. Rank 1 has written to rank 0 (writes
 * that completed unsignaled: no completion will ever name them), then rank 0 writes past rank 1's
 * region. Rank 0 re-creates its endpoint; rank 1 is told out of band and re-creates its own,
 * again whenever it finds it failed (the peer's re-connection fails it), at most three times.
 * Every re-creation must return within 2 s (the passive side used to wait 10 s for completions
 * of its healthy QP that never come, then fail), and afterwards messages, puts and gets flow both
 * ways. */
#define RVX_AM_HANDLERS(X) X(MSG, on_msg)
#include <rvx/rvx.h>
#include "testlib.h"

#define REGION 65536
#define NMSG   (2 * RVX_MLX5_RX_DEPTH + 3)

static int got;

static void on_msg(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 1 && a[0] == (uint64_t)got) got++;
}

static rvx_ep_t *recreate(rvx_worker_t *w, rvx_ep_t *ep, const t_remote_t *rm, rvx_rkey_t *rk)
{
    int peer = rvx_ep_rank(ep);
    double t0, took;
    rvx_status_t st;
    rvx_rkey_release(rk);
    rvx_ep_destroy(ep);
    t0 = t_now();
    st = rvx_ep_create(w, peer, &ep);
    took = t_now() - t0;
    printf("rank %d: endpoint to rank %d re-created in %.3f s: %s\n", t_rank, peer, took,
           rvx_status_str(st));
    T_CHECK(st == RVX_OK, "re-creating the endpoint to rank %d: %s", peer, rvx_status_str(st));
    T_CHECK(took < 2, "re-creating the endpoint to rank %d took %.2f s", peer, took);
    if (st != RVX_OK) exit(t_exit());
    T_OK(rvx_rkey_unpack(ep, rm->packed, rk));
    return ep;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_rkey_t rk;
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *region, out[4096], in[4096];
    rvx_request_t req;
    rvx_status_t st;
    uint64_t one = 1;
    double t0;
    int me, peer, i, tries;

    t_spawn(argc, argv, 2, 120);
    me = t_start(&ctx, &w);
    peer = 1 - me;
    region = (unsigned char *)aligned_alloc(4096, REGION);
    memset(region, 0, REGION);
    T_OK(rvx_mem_reg(ctx, region, REGION, &mem));
    rm = t_exchange(ctx, mem);
    T_OK(rvx_ep_create(w, peer, &ep));
    T_OK(rvx_rkey_unpack(ep, rm[peer].packed, &rk));
    T_OK(rvx_barrier(ctx));

    if (me == 1) /* a few writes that complete unsignaled, and nothing after them */
        for (i = 0; i < 3; i++) T_OK(rvx_put(ep, &one, 8, rm[0].addr + 8 * (uint64_t)i, &rk));
    usleep(100000);
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        T_OK(rvx_put(ep, &one, 8, rm[1].addr + REGION, &rk));
        T_STATUS(rvx_ep_flush(ep), RVX_ERR_REMOTE_ACCESS);
        ep = recreate(w, ep, &rm[1], &rk);
    }
    T_OK(rvx_barrier(ctx)); /* rank 1 learns of the failure, and recovers as rank 0 did */
    if (me == 1) {
        for (tries = 0; tries < 3; tries++) {
            ep = recreate(w, ep, &rm[0], &rk);
            t0 = t_now();
            while (rvx_ep_status(ep) == RVX_OK && t_now() - t0 < 0.3) rvx_progress(w);
            if (rvx_ep_status(ep) == RVX_OK) break;
        }
        T_CHECK(tries < 3, "the endpoint to rank 0 still fails after %d re-creations", tries);
    }
    T_OK(rvx_barrier(ctx));

    /* both ways: messages (credits after the re-connection), a put and a get */
    for (i = 0; i < NMSG; i++) {
        uint64_t a = (uint64_t)i;
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_MSG, &a, 1));
        T_CHECK(st == RVX_OK, "message %d to rank %d: %s", i, peer, rvx_status_str(st));
        if (st != RVX_OK) break;
    }
    t0 = t_now();
    while (got < NMSG && t_now() - t0 < 30) rvx_progress(w);
    T_CHECK(got == NMSG, "%d of %d messages from rank %d after the recovery", got, NMSG, peer);
    t_fill(out, sizeof(out), 7 + (uint64_t)me);
    T_OK(rvx_put(ep, out, sizeof(out), rm[peer].addr + 4096, &rk));
    T_OK(rvx_ep_flush(ep));
    rvx_request_init(&req);
    st = rvx_complete(w, rvx_get(ep, in, sizeof(in), rm[peer].addr + 4096, &rk, &req), &req);
    T_CHECK(st == RVX_OK && !memcmp(in, out, sizeof(in)), "get after put to rank %d: %s", peer,
            rvx_status_str(st));
    T_OK(rvx_barrier(ctx));
    rvx_rkey_release(&rk);
    rvx_ep_destroy(ep);
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    free(region);
    return t_exit();
}
