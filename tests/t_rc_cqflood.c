/* t_rc_cqflood: the CQ holds everything that can be in flight, error floods included, and its
 * size does not depend on the number of ranks. Rank 0 fills its whole send budget, without
 * polling, with puts past the end of the regions of ranks 1, 2 and 3: each QP's first WQE fails
 * with a remote access error and the NIC flushes every other one with an error CQE; meanwhile
 * ranks 4 and 5 send it as many messages as their credits allow. Only then does rank 0 poll. The
 * CQEs waiting at that moment are counted (all of them must be there, and more than half the CQ:
 * a CQ half the size, or sized without the error CQEs, would have overrun, and rvxsim would have
 * put every QP on it in the error state); then the failed endpoints report the access error, the
 * messages of ranks 4 and 5 all arrive, a put to rank 4 still works, and the whole budget is free
 * again. The budget is set small here (RVX_MLX5_TX_BUDGET 2048) so that three QPs can fill it. */
#define RVX_MLX5_TX_BUDGET 2048
#define RVX_AM_HANDLERS(X) X(PING, on_ping)
#include <rvx/rvx.h>
#include "testlib.h"

#define REGION 4096
#define NRANKS 6

static volatile int pings_from[NRANKS];
static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 1 && a[0] < NRANKS) pings_from[a[0]]++;
}

/* Valid CQEs waiting at the consumer index (looked at, not consumed). */
static unsigned cq_pending(const rvx__mlx5_cq_t *cq)
{
    unsigned n = 0;
    while (n < cq->cnt) {
        uint32_t i = cq->ci + n;
        unsigned t = rvx__mlx5_cqe(cq, i)->op_own ^ (unsigned)!!(i & cq->cnt);
        if ((t & RVX__MLX5_OWNER_BIT) || t >= RVX__MLX5_OP_INVALID) break;
        n++;
    }
    return n;
}

/* Puts to ep while they need no poll: room in the conn's grant, or budget to grow it. */
static unsigned fill(rvx__tl_iface_t *ifc, rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk)
{
    rvx__rc_conn_t *c = ep->tl[0].c;
    uint32_t cap = (c->sq.mask + 1 - RVX__RC_SQ_RESERVE) / RVX__RC_GRANT * RVX__RC_GRANT;
    uint64_t v = 1;
    unsigned n = 0;
    for (;;) {
        uint32_t g = c->sq.room ? c->sq.room + 1 : 0;
        int room = rvx__mlx5_sq_room_for(&c->sq, 1) && !c->sq.hold;
        uint32_t need = (c->sq.pi - c->sq.ci + 2 + RVX__RC_GRANT - 1) / RVX__RC_GRANT * RVX__RC_GRANT;
        if (!room && (need > cap || ifc->tx_free < need - g)) return n;
        T_OK(rvx_put(ep, &v, 8, raddr, rk));
        n++;
    }
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[NRANKS];
    rvx_rkey_t rk[NRANKS];
    rvx_mem_t *mem;
    t_remote_t *rm;
    uint64_t *region;
    rvx__tl_iface_t *ifc;
    int me, r, credits;

    t_spawn(argc, argv, NRANKS, 180);
    me = t_start(&ctx, &w);
    ifc = &w->iface[0];
    region = (uint64_t *)aligned_alloc(4096, REGION);
    memset(region, 0, REGION);
    T_OK(rvx_mem_reg(ctx, region, REGION, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < NRANKS; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }
    credits = (int)ifc->credits;
    /* the CQ: the budget and the shared receive queue, not the ranks */
    T_CHECK(ifc->cq.cnt > RVX_MLX5_TX_BUDGET + ifc->srq.mask &&
                ifc->cq.cnt <= 2 * (RVX_MLX5_TX_BUDGET + ifc->srq.mask + 1),
            "CQ of %u entries for a budget of %u and %u receive buffers", ifc->cq.cnt,
            RVX_MLX5_TX_BUDGET, ifc->srq.mask);
    T_OK(rvx_barrier(ctx));

    if (me == 0) {
        unsigned posted = 0, pend = 0, last = 0, g = 0, i;
        uint64_t v = 1;
        double t0, stable;
        /* one put to each first: filled one after the other, the first two can leave the third
         * no budget (how much the other conns hold follows the timing), and its flush nothing
         * to report */
        for (r = 1; r <= 3; r++, posted++) T_OK(rvx_put(ep[r], &v, 8, rm[r].addr + REGION, &rk[r]));
        for (r = 1; r <= 3; r++) posted += fill(ifc, ep[r], rm[r].addr + REGION, &rk[r]);
        T_CHECK(ifc->tx_free < RVX__RC_GRANT, "%u WQEBBs of the budget left unused", ifc->tx_free);
        /* no poll: wait until the CQEs stop coming (each put has one: error or flush error) */
        t0 = stable = t_now();
        while (t_now() - t0 < 30 && (t_now() - stable < 1.0 || pend < posted)) {
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
            pend = cq_pending(&ifc->cq);
            if (pend != last) { last = pend; stable = t_now(); }
        }
        printf("rank 0: %u puts posted without polling, %u CQEs waiting in a CQ of %u entries "
               "(budget %u, %u receive buffers)\n", posted, pend, ifc->cq.cnt, RVX_MLX5_TX_BUDGET,
               ifc->srq.mask);
        T_CHECK(pend >= posted, "%u CQEs for %u failed puts", pend, posted);
        T_CHECK(2 * pend > ifc->cq.cnt, "the flood (%u CQEs) did not fill half the CQ (%u)", pend,
                ifc->cq.cnt);
        for (r = 1; r <= 3; r++) T_STATUS(rvx_ep_flush(ep[r]), RVX_ERR_REMOTE_ACCESS);
        t0 = t_now();
        while ((pings_from[4] < 2 * credits || pings_from[5] < 2 * credits) && t_now() - t0 < 30)
            rvx_progress(w);
        T_CHECK(pings_from[4] == 2 * credits && pings_from[5] == 2 * credits,
                "messages: %d and %d of %d", pings_from[4], pings_from[5], 2 * credits);
        region[0] = 0x5a;
        T_OK(rvx_put(ep[4], region, 8, rm[4].addr + 8, &rk[4]));
        T_OK(rvx_ep_flush(ep[4]));
        /* every conn is idle: the grants they hold and the budget's rest make the whole */
        for (i = 0; i < ifc->nholders; i++) g += ifc->holder_g[i];
        T_CHECK(ifc->tx_free + g == RVX_MLX5_TX_BUDGET, "budget: %u free + %u lent", ifc->tx_free, g);
    } else if (me >= 4) {
        t_am_burst(w, ep[0], RVX_AM_PING, me, credits);     /* what the credits allow while rank 0 does not poll */
        t_am_burst(w, ep[0], RVX_AM_PING, me, credits);     /* and as many once it polls again */
    }
    T_OK(rvx_barrier(ctx));
    if (me == 4) T_CHECK(region[1] == 0x5a, "rank 0's put after the flood did not arrive");
    int rc = t_finish(ctx, w, mem, rk, NRANKS, rm);
    free(region); /* registered memory goes after its registration */
    return rc;
}
