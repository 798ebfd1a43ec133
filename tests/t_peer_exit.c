/* t_peer_exit: rank 2 leaves abruptly, without finalizing. The survivors get a clear status from
 * every call that depends on it, within a bounded time and without hanging, and keep working with
 * each other: waiting for a reply from it, filling the ring to it, its endpoint's status and flush,
 * a bootstrap barrier that can no longer complete, and finalize. 3 ranks, or RVX_TEST_RANKS (up
 * to 16): rank 0 sends to the departed rank, every other survivor notices on its own (in a pair
 * build on 8 ranks as 2 nodes, ranks 1 and 3 through shared memory, 4 to 7 through the NIC), and
 * the survivors ping-pong in a ring that skips rank 2. */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int pongs, served;

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)p; (void)len;
    T_OK(rvx_am_reply_short(t, RVX_AM_PONG, a, n));
    served++;
}

static void on_pong(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    pongs++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *eps[16];
    rvx_status_t st;
    double t0;
    int me, n, r, i, next;

    t_spawn_upto(argc, argv, 3, 16, 120);
    setenv("RVX_BOOT_TIMEOUT", "3", 1); /* how long a collective waits for the missing rank */
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    for (r = 0; r < n; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    T_OK(rvx_barrier(ctx));
    if (me == 2) _exit(0); /* gone, mid-run */

    if (me == 0) {
        uint64_t a = 1;
        int flag = 0;
        /* a request to the departed rank is accepted (it fits in the ring), its reply never comes;
         * on dc_mlx5 the first request takes credits from the rank's pool, a round trip that may
         * already see it gone */
#if RVX_TL == RVX_TL_DC_MLX5
        st = rvx_am_short(eps[2], RVX_AM_PING, &a, 1);
        T_CHECK(st == RVX_OK || st == RVX_ERR_PEER_FAILED, "the first request: %s", rvx_status_str(st));
#else
        T_OK(rvx_am_short(eps[2], RVX_AM_PING, &a, 1));
#endif
        t0 = rvx__now_s();
        st = rvx_wait_flag(w, eps[2], (volatile int *)&flag, -1);
        T_CHECK(st == RVX_ERR_PEER_FAILED, "waiting for the reply: %s", rvx_status_str(st));
        T_CHECK(rvx__now_s() - t0 < 10, "peer failure took %.1f s to notice", rvx__now_s() - t0);
        /* keep sending: once the ring is full the answer is PEER_FAILED, never an endless busy */
        for (i = 0; i < 100000; i++)
            if ((st = rvx_am_short(eps[2], RVX_AM_PING, &a, 1)) != RVX_OK) break;
        T_CHECK(st == RVX_ERR_PEER_FAILED, "sending to the departed rank: %s after %d sends",
                rvx_status_str(st), i);
        T_STATUS(rvx_ep_flush(eps[2]), RVX_ERR_PEER_FAILED);
    } else {
        /* the others notice on their own within a bounded time */
        t0 = rvx__now_s();
        while (rvx_ep_status(eps[2]) == RVX_OK && rvx__now_s() - t0 < 10) usleep(1000);
        T_STATUS(rvx_ep_status(eps[2]), RVX_ERR_PEER_FAILED);
    }
    T_STATUS(rvx_ep_status(eps[2]), RVX_ERR_PEER_FAILED);

    /* the survivors keep talking: 1000 ping-pongs to the next survivor in a ring (each way on 3) */
    next = (me + 1) % n == 2 ? 3 % n : (me + 1) % n;
    for (i = 0; i < 1000; i++) {
        uint64_t a = (uint64_t)i;
        int want = pongs + 1;
        rvx_am_retry(w, st, rvx_am_short(eps[next], RVX_AM_PING, &a, 1));
        T_CHECK(st == RVX_OK, "ping %d: %s", i, rvx_status_str(st));
        while (pongs < want) rvx_progress(w);
    }
    /* serve the previous survivor's last pings before leaving the loop (rank 0 also served the
     * departed rank's requests: none, it sent none) */
    t0 = rvx__now_s();
    while (served < 1000 && rvx__now_s() - t0 < 30) rvx_progress(w);
    T_CHECK(served == 1000, "rank %d served %d of the previous survivor's 1000 pings", me, served);

    /* a collective that needs rank 2 gives up after RVX_BOOT_TIMEOUT instead of hanging */
    t0 = rvx__now_s();
    T_STATUS(rvx_barrier(ctx), RVX_ERR_TIMED_OUT);
    T_CHECK(rvx__now_s() - t0 < 8, "barrier took %.1f s to give up", rvx__now_s() - t0);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    printf("rank %d: rank 2's exit reported, survivors unaffected\n", me);
    return t_exit();
}
