/* A handler may not send requests on either path, whichever path delivered it: in a pair build
 * rvx__am_send tests "a handler runs" on the path it sends by (shm's or net's), so each
 * delivering path must make both tests true. 3 ranks as 2 emulated nodes (ranks 0 and 1 on node
 * 0, rank 2 on node 1). Rank 0's handler TRY tries a request to rank 1 (on the node) and to rank 2
 * (off it) and then replies; it runs once for a TRY from rank 1 (delivered by shared memory) and
 * once for a TRY from rank 2 (delivered by the NIC). Every attempt must be refused, and requests
 * after the handlers must go. Built as a pair and as rc_mlx5 alone (tests/t_pair_local.sh). */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(TRY, on_try) X(DONE, on_done)
#include <rvx/rvx.h>
#include "testlib.h"

static rvx_ep_t *eps[3];
static volatile int pings, tries, dones;
static rvx_status_t tried[2][2]; /* [delivered by: 0 from rank 1, 1 from rank 2][sent to rank 1, 2] */

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    pings++;
}

static void on_try(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    int from = t->ep->rank == 2;
    uint64_t x = 7;
    (void)a; (void)n; (void)p; (void)len;
    tried[from][0] = rvx_am_short(eps[1], RVX_AM_PING, &x, 1);
    tried[from][1] = rvx_am_medium(eps[2], RVX_AM_PING, &x, 1, &x, 8);
    T_OK(rvx_am_reply_short(t, RVX_AM_DONE, NULL, 0)); /* a reply is what it may send */
    tries++;
}

static void on_done(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    dones++;
}

static int wait_for(rvx_worker_t *w, volatile int *c, int want)
{
    double until = t_now() + 30;
    while (*c < want && t_now() < until) rvx_progress(w);
    return *c >= want;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_status_t st;
    int me, r, i, j;

    setenv("RVXRUN_NODES", "2", 1);
    t_spawn(argc, argv, 3, 120);
    me = t_start(&ctx, &w);
    for (r = 0; r < 3; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    T_OK(rvx_barrier(ctx));
    if (me == 1 || me == 2) { /* one TRY each, in turn: rank 1's first */
        if (me == 2) T_OK(rvx_barrier(ctx));
        rvx_am_retry(w, st, rvx_am_short(eps[0], RVX_AM_TRY, NULL, 0));
        T_OK(st);
        T_CHECK(wait_for(w, &dones, 1), "rank %d: no reply from rank 0's handler", me);
        if (me == 1) T_OK(rvx_barrier(ctx));
    } else {
        T_CHECK(wait_for(w, &tries, 1), "rank 0: rank 1's TRY never arrived");
        T_OK(rvx_barrier(ctx));
        T_CHECK(wait_for(w, &tries, 2), "rank 0: rank 2's TRY never arrived");
        for (i = 0; i < 2; i++)
            for (j = 0; j < 2; j++)
                T_CHECK(tried[i][j] == RVX_ERR_INVALID_PARAM,
                        "rank 0: a request to rank %d from the handler of a message %s was not "
                        "refused (status %d)", j + 1, i ? "from off the node" : "from the node",
                        (int)tried[i][j]);
        if (!t_failures)
            printf("rank 0: requests from handlers refused on both paths, whichever delivered them\n");
        /* outside the handlers, requests go again on both paths */
        for (r = 1; r < 3; r++) {
            rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_PING, NULL, 0));
            T_OK(st);
        }
    }
    if (me != 0) T_CHECK(wait_for(w, &pings, 1), "rank %d: the ping after the handlers never came", me);
    T_OK(rvx_barrier(ctx));
    T_CHECK(pings == (me ? 1 : 0), "rank %d: %d pings, a refused request was delivered after all",
            me, pings);
    for (r = 0; r < 3; r++) rvx_ep_destroy(eps[r]);
    return t_finish(ctx, w, NULL, NULL, 0, NULL);
}
