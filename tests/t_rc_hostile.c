/* t_rc_hostile: whatever a peer sends into the shared receive queue, every buffer comes back.
 * Rank 1 plays a hostile (or buggy) peer below the AM layer: on its QP to rank 0 it posts many
 * times the queue's depth of plain SENDs and of RDMA WRITEs with immediate (each takes a receive
 * buffer, neither is a frame rvx sends), then sends datagrams of every wrong size to rank 0's
 * hello QP (which expects re-connection messages; a datagram that finds no buffer posted is lost
 * on the wire, as on hardware). Rank 0 must drop all it receives, count them, and still
 * receive, afterwards, more normal messages from ranks 1 and 2 than its queue holds. A buffer lost
 * per dropped frame would leave the queue empty: the messages would meet RNR for ever. */
#define RVX_AM_HANDLERS(X) X(PING, on_ping)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int pings_from[3];
static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 1 && a[0] < 3) pings_from[a[0]]++;
}

/* One WQEBB on sq: a plain SEND of 8 bytes inline, or a WRITE with immediate of 8 bytes inline
 * into raddr. */
static void raw_post(rvx__mlx5_sq_t *sq, unsigned opcode, unsigned flags, uint64_t raddr,
                     const rvx_rkey_t *rk)
{
    uint32_t pi = sq->pi;
    uint8_t *wqe = rvx__mlx5_slot(sq, pi);
    uint64_t v = 0x686f7374696c65ull; /* "hostile" */
    memset(wqe, 0, RVX__MLX5_BB);
    if (opcode == MLX5_OPCODE_SEND) {
        rvx__mlx5_wqe_send_inl_t *w = (rvx__mlx5_wqe_send_inl_t *)(void *)wqe;
        rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_SEND, sq->qpn8, 1 + RVX__MLX5_INLINE_DS(8),
                           flags, 0);
        w->inl.byte_count = rvx_htobe32(8u | MLX5_INLINE_SEG);
        memcpy(w->body, &v, 8);
    } else {
        rvx__mlx5_wqe_write8_t *w = (rvx__mlx5_wqe_write8_t *)(void *)wqe;
        rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_RDMA_WRITE_IMM, sq->qpn8, RVX__MLX5_DS_RDMA,
                           flags, rvx_htobe32(0x00011234u));
        rvx__mlx5_set_raddr(&w->raddr, raddr, rk);
        w->inl.byte_count = rvx_htobe32(8u | MLX5_INLINE_SEG);
        memcpy(w->payload, &v, 8);
    }
    rvx__mlx5_commit(sq, pi + 1, wqe, 1, NULL);
}

/* The frames on rank 1's QP to rank 0, through its own send queue (room waited for, one in
 * RVX_MLX5_SIG_EVERY signaled, as rvx posts). */
static void flood_qp(rvx__rc_conn_t *c, unsigned opcode, unsigned n, uint64_t raddr,
                     const rvx_rkey_t *rk)
{
    unsigned i, f;
    for (i = 0; i < n; i++) {
        uint32_t pi;
        RVX__RC_NEED(c, 1);
        pi = c->sq.pi;
        f = rvx__mlx5_moderate(&c->sq, 0);
        if (f & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
        raw_post(&c->sq, opcode, f, raddr, rk);
    }
}

/* Datagrams of every wrong size from rank 1's hello QP to rank 0's (which expects re-connection
 * messages of one size): each takes a buffer of the shared queue. The hello QP holds few sends
 * at a time: progress retires them. */
static void flood_hello(rvx_worker_t *w, rvx__tl_iface_t *ifc, unsigned n)
{
    rvx__rc_hello_t *h = ifc->hello;
    uint8_t junk[RVX__RC_HELLO_BODY];
    unsigned i, len = 0;
    double t0 = t_now();
    memset(junk, 0xa5, sizeof(junk));
    for (i = 0; i < n && t_now() - t0 < 30; i++) {
        if (++len > RVX__RC_HELLO_BODY) len = 0;
        if (len == sizeof(rvx__rc_hello_msg_t)) len++;
        while (h->sq.pi - h->sq.ci + RVX__RC_HELLO_NBB > h->sq.mask + 1 && t_now() - t0 < 30)
            rvx_progress(w);
        rvx__rc_hello_post(ifc, 0, 0x1234u, junk, len);
    }
    T_CHECK(i == n, "%u of %u datagrams posted in 30 s", i, n);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[3];
    rvx_rkey_t rk[3];
    rvx_mem_t *mem;
    t_remote_t *rm;
    uint64_t *region;
    unsigned depth, k;
    int me, r, npings;

    t_spawn(argc, argv, 3, 180);
    me = t_start(&ctx, &w);
    region = (uint64_t *)aligned_alloc(4096, 4096);
    memset(region, 0, 4096);
    T_OK(rvx_mem_reg(ctx, region, 4096, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < 3; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }
    depth = rvx__mlx5_srq_depth(&w->iface[0].srq); /* the same on every rank */
    k = 3 * depth;          /* frames of each kind: several times what the queue holds */
    npings = (int)(3 * depth); /* each normal sender needs the buffers back too */
    T_OK(rvx_barrier(ctx));

    if (me == 0) {
        rvx__mlx5_srq_t *s = &w->iface[0].srq;
        double t0 = t_now();
        /* the RC frames all arrive (a reliable QP waits for a buffer); datagrams that find no
         * buffer posted are lost on the wire, as UD's are: some, not all, reach rvx */
        while ((s->dropped <= 2 * k || pings_from[1] < npings || pings_from[2] < npings) &&
               t_now() - t0 < 60)
            rvx_progress(w);
        T_CHECK(s->dropped > 2 * k && s->dropped <= 3 * k, "%u frames dropped: all %u RC frames "
                "and some of the %u datagrams expected", s->dropped, 2 * k, k);
        T_CHECK(pings_from[1] == npings && pings_from[2] == npings,
                "messages after the flood: %d of %d from rank 1, %d of %d from rank 2 "
                "(queue depth %u)", pings_from[1], npings, pings_from[2], npings, depth);
        T_CHECK(region[0] == 0x686f7374696c65ull, "the WRITE with immediate did not land");
        printf("rank 0: %u hostile frames dropped (queue of %u buffers), then %d + %d messages "
               "received\n", s->dropped, depth, pings_from[1], pings_from[2]);
    } else if (me == 1) {
        rvx__rc_conn_t *c = ep[0]->tl[0].c;
        rvx_request_t req;
        rvx_status_t st;
        double t0;
        flood_qp(c, MLX5_OPCODE_SEND, k, 0, NULL);
        flood_qp(c, MLX5_OPCODE_RDMA_WRITE_IMM, k, rm[0].addr, &rk[0]);
        rvx_request_init(&req);
        st = rvx_ep_flush_nb(ep[0], &req);
        t0 = t_now();
        while (st == RVX_INPROGRESS && req.status == RVX_INPROGRESS && t_now() - t0 < 30)
            rvx_progress(w);
        if (st == RVX_INPROGRESS) st = (rvx_status_t)req.status;
        T_STATUS(st, RVX_OK);
        flood_hello(w, &w->iface[0], k);
        t_am_burst(w, ep[0], RVX_AM_PING, me, npings);
    } else {
        t_am_burst(w, ep[0], RVX_AM_PING, me, npings);
    }
    T_OK(rvx_barrier(ctx));
    int rc = t_finish(ctx, w, mem, rk, 3, rm);
    free(region); /* registered memory goes after its registration */
    return rc;
}
