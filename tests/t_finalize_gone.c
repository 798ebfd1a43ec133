/* t_finalize_gone: leaving never waits for peers. Rank 2 tears everything down and exits right
 * after set-up, while ranks 0 and 1 still hold endpoints and mapped keys to it and have sent it a
 * message it will never answer; they see it gone (RVX_ERR_PEER_FAILED, in bounded time), keep
 * exchanging with each other, then rank 1 leaves too and rank 0, alone, destroys its worker and
 * finalizes. Every teardown must take well under a second. Runs under rvxrun (started directly)
 * and, built with RVX_BOOT_PMIX (build/pmix/t_finalize_gone), under mpirun from t_mpirun.sh. */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int pongs, pong_from_2, pings_in;

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)p; (void)len;
    pings_in++;
    T_OK(rvx_am_reply_short(t, RVX_AM_PONG, a, n));
}

static void on_pong(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    if (a[0] == 2) pong_from_2 = 1;
    else pongs++;
}

/* Destroy everything this rank holds; return the seconds it took. */
static double leave(rvx_context_t *ctx, rvx_worker_t *w, rvx_mem_t *mem, rvx_rkey_t *keys, int n)
{
    double t0 = rvx__now_s();
    int r;
    for (r = 0; r < n; r++) rvx_rkey_release(&keys[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return rvx__now_s() - t0;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *eps[3];
    rvx_mem_t *mem;
    rvx_rkey_t keys[3];
    t_remote_t *remote;
    uint64_t data[8];
    rvx_status_t st;
    double t0, took;
    int me, r, i, peer;

#if RVX_BOOT != RVX_BOOT_PMIX
    t_spawn(argc, argv, 3, 60);
#else
    (void)argc; (void)argv;
#endif
    me = t_start(&ctx, &w);
    if (rvx_size(ctx) != 3) {
        fprintf(stderr, "FAIL: needs 3 ranks, has %d\n", rvx_size(ctx));
        return 1;
    }
    T_OK(rvx_mem_alloc(ctx, 4096, &mem));
    for (r = 0; r < 3; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    remote = t_exchange(ctx, mem);
    for (r = 0; r < 3; r++) T_OK(rvx_rkey_unpack(eps[r], remote[r].packed, &keys[r]));
    T_OK(rvx_barrier(ctx));

    if (me == 2) { /* leaves at once: no collective, no waiting for anyone */
        took = leave(ctx, w, mem, keys, 3);
        T_CHECK(took < 1.0, "rank 2's teardown took %.2f s", took);
        free(remote);
        if (!t_failures) printf("rank 2: left first, teardown %.3f s\n", took);
        return t_exit();
    }

    /* a message rank 2 will never answer, and a put into its memory */
    data[0] = 2;
    T_OK(rvx_am_short(eps[2], RVX_AM_PING, data, 1));
    t_fill(data, sizeof(data), 9);
    T_OK(rvx_put(eps[2], data, sizeof(data), remote[2].addr, &keys[2]));
    t0 = rvx__now_s();
    st = rvx_wait_flag(w, eps[2], &pong_from_2, 10000);
    /* it may have answered in its last progress before leaving; then its departure shows below */
    T_CHECK(st == RVX_ERR_PEER_FAILED || st == RVX_OK, "waiting for rank 2: %s", rvx_status_str(st));
    while (rvx_ep_status(eps[2]) == RVX_OK && rvx__now_s() - t0 < 10) usleep(1000);
    T_STATUS(rvx_ep_status(eps[2]), RVX_ERR_PEER_FAILED);
    T_STATUS(rvx_ep_flush(eps[2]), RVX_ERR_PEER_FAILED);
    T_CHECK(rvx__now_s() - t0 < 5, "rank 2's departure took %.2f s to notice", rvx__now_s() - t0);

    /* ranks 0 and 1 carry on: 200 ping-pongs each way */
    peer = 1 - me;
    for (i = 0; i < 200; i++) {
        int want = pongs + 1;
        data[0] = (uint64_t)me;
        rvx_am_retry(w, st, rvx_am_short(eps[peer], RVX_AM_PING, data, 1));
        T_OK(st);
        while (pongs < want) {
            if (rvx_ep_status(eps[peer]) != RVX_OK) { /* its last answer may be here already */
                rvx_progress(w);
                break;
            }
            rvx_progress(w);
        }
        T_CHECK(pongs >= want, "ping %d to rank %d unanswered", i, peer);
    }

    if (me == 1) {
        /* answer rank 0 until it has had all its 200 pongs */
        t0 = rvx__now_s();
        while (pings_in < 200 && rvx__now_s() - t0 < 10) rvx_progress(w);
        T_CHECK(pings_in == 200, "rank 0 sent %d pings, expected 200", pings_in);
        took = leave(ctx, w, mem, keys, 3);
        T_CHECK(took < 1.0, "rank 1's teardown took %.2f s", took);
    } else {
        /* rank 0 is left alone: it sees rank 1 go, then tears down with every peer gone */
        t0 = rvx__now_s();
        while (rvx_ep_status(eps[1]) == RVX_OK && rvx__now_s() - t0 < 10) rvx_progress(w);
        T_STATUS(rvx_ep_status(eps[1]), RVX_ERR_PEER_FAILED);
        took = leave(ctx, w, mem, keys, 3);
        T_CHECK(took < 1.0, "rank 0's teardown with every peer gone took %.2f s", took);
    }
    free(remote);
    if (!t_failures) printf("rank %d: left in bounded time after its peers\n", me);
    return t_exit();
}
