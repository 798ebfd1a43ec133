/* t_rc_peer_state: what rc_mlx5 keeps per peer. On rvxsim (whose counters name the live QPs):
 *  1. with an endpoint to every rank, each process holds one QP per rank and the worker's hello
 *     QP, nothing more (no spare kept for a re-connection);
 *  2. the per-peer state besides the QP (the conn less its send queue and records, the credit
 *     word, the QPN table's slots) is at most 160 bytes (144: the conn's part 120, RVX__RC_CONN_QP_BYTES
 *     counting the remote QPN and the worker flush's mark as the QP's; 152 before that; 208 before the
 *     bounce ring went to a record per segment of the worker's pool, the re-connection record out
 *     of the conn, the flush list into it and the send credits to 32 bits; 224 before the
 *     keepalive time took 32 bits, the rank and the bounce segment's number became derived);
 *  3. a worker flush looks only at the conns that posted since a flush found them idle: after a
 *     flush of an idle worker its list is empty, after puts to two peers it links those two;
 *  4. rank 1 fails its connection to rank 0 and re-creates it: afterwards each side holds one more
 *     QP (the failed one, kept in ERR until the worker goes), and the pair works both ways.
 * Exits 77 without rvxsim's counters (a real adapter). */
#define RVX_AM_HANDLERS(X) X(NOP, on_nop)
#include <rvx/rvx.h>
#include <dlfcn.h>
#include "testlib.h"

#define NR     4
#define REGION 65536

/* A build with messages: its progress polls the CQ, so a rank waiting in a barrier answers a
 * re-connection (an RMA-only build polls only while it has work outstanding). */
static void on_nop(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
}

/* rvxsim's count of this process's live QPs; -1 without rvxsim. */
static long sim_qps(void)
{
    int (*fn)(char *, size_t) = (int (*)(char *, size_t))dlsym(RTLD_DEFAULT, "rvxsim_counters");
    char line[512], *s;
    if (!fn || fn(line, sizeof(line)) <= 0 || !(s = strstr(line, " qps="))) return -1;
    return strtol(s + 5, NULL, 10);
}

/* Bytes per peer besides the QP: what counts as the QP is RVX__RC_CONN_QP_BYTES (tl/rc/decl.h:
 * its verbs object and numbers, its send queue and the words precomputed from the QPN, the
 * book-keeping of its WQEs in flight, whose op records live in the worker's pool). */
static size_t peer_bytes(const rvx__tl_iface_t *ifc)
{
    rvx__tl_iface_t big; /* the QPN table of a large job: its slots per rank (a small one has a floor) */
    size_t qpt;
    memset(&big, 0, sizeof(big));
    if (rvx__rc_qpt_init(&big, 1000) != RVX_OK) return (size_t)-1;
    qpt = (size_t)(big.qpt_mask + 1) * (sizeof(*big.qpt_qpn) + sizeof(*big.qpt_rank)) / 1000;
    free(big.qpt_qpn);
    free(big.qpt_rank);
    (void)ifc;
    return sizeof(rvx__rc_conn_t) - RVX__RC_CONN_QP_BYTES + sizeof(*ifc->ctrl) + qpt;
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
    uint64_t one = 1;
    long qps;
    size_t per_peer;
    int me, r;

    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    if (sim_qps() < 0) {
        printf("SKIP: not on rvxsim (its counters name the QPs)\n");
        return 77;
    }
    region = (unsigned char *)aligned_alloc(4096, REGION);
    memset(region, 0, REGION);
    T_OK(rvx_mem_reg(ctx, region, REGION, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < NR; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }

    /* 1, 2 */
    qps = sim_qps();
    T_CHECK(qps == NR + 1, "%ld QPs with endpoints to %d ranks (one per rank and the hello QP: %d)",
            qps, NR, NR + 1);
    per_peer = peer_bytes(&w->iface[0]);
    T_CHECK(per_peer <= 160, "%zu bytes per peer besides the QP", per_peer);

    /* 3 */
    for (r = 0; r < NR; r++) T_OK(rvx_put(ep[r], &one, 8, rm[r].addr + 8 * (uint64_t)me, &rk[r]));
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_worker_flush(w)); /* everything was idle: the list empties */
    T_CHECK(w->iface[0].nwf == 0, "after a flush of an idle worker, %u conns in its list", w->iface[0].nwf);
    T_OK(rvx_put(ep[(me + 1) % NR], &one, 8, rm[(me + 1) % NR].addr + 64 + 8 * (uint64_t)me, &rk[(me + 1) % NR]));
    T_OK(rvx_put(ep[(me + 2) % NR], &one, 8, rm[(me + 2) % NR].addr + 64 + 8 * (uint64_t)me, &rk[(me + 2) % NR]));
    T_CHECK(w->iface[0].nwf == 2, "after puts to two peers, %u conns in the list", w->iface[0].nwf);
    {   /* the list, walked: exactly those two */
        uint32_t at = w->iface[0].wf_head, a = (uint32_t)(me + 1) % NR, b = (uint32_t)(me + 2) % NR;
        unsigned n = 0;
        for (; at != RVX__RC_WF_END && n < NR; at = w->iface[0].conns[at].wf_next, n++)
            T_CHECK(at == a || at == b, "rank %u's conn in the flush list", at);
        T_CHECK(n == 2, "%u conns linked in the flush list", n);
    }
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < NR; r++)
        T_CHECK(((volatile uint64_t *)region)[r] == 1, "rank %d's first put did not land", r);
    for (r = 0; r < NR; r++) {
        int from = r == (me + NR - 1) % NR || r == (me + NR - 2) % NR;
        T_CHECK(((volatile uint64_t *)region)[8 + r] == (uint64_t)from, "rank %d's second put: %llu",
                r, (unsigned long long)((volatile uint64_t *)region)[8 + r]);
    }

    /* 4 */
    if (me == 1) {
        T_OK(rvx_put(ep[0], &one, 8, rm[0].addr + REGION, &rk[0]));
        T_STATUS(rvx_ep_flush(ep[0]), RVX_ERR_REMOTE_ACCESS);
        rvx_rkey_release(&rk[0]);
        rvx_ep_destroy(ep[0]);
        T_OK(rvx_ep_create(w, 0, &ep[0]));
        T_OK(rvx_rkey_unpack(ep[0], rm[0].packed, &rk[0]));
        T_OK(rvx_put(ep[0], &one, 8, rm[0].addr + 128, &rk[0]));
        T_OK(rvx_ep_flush(ep[0]));
    }
    T_OK(rvx_barrier(ctx)); /* rank 0 follows in its progress meanwhile */
    if (me == 0) {
        T_CHECK(rvx_ep_status(ep[1]) != RVX_OK, "the endpoint to rank 1 should have failed");
        rvx_rkey_release(&rk[1]);
        rvx_ep_destroy(ep[1]);
        T_OK(rvx_ep_create(w, 1, &ep[1]));
        T_OK(rvx_rkey_unpack(ep[1], rm[1].packed, &rk[1]));
        T_OK(rvx_put(ep[1], &one, 8, rm[1].addr + 136, &rk[1]));
        T_OK(rvx_ep_flush(ep[1]));
    }
    T_OK(rvx_barrier(ctx));
    qps = sim_qps();
    if (me < 2) {
        T_CHECK(qps == NR + 2, "rank %d: %ld QPs after one re-connection (%d: one per rank, the hello "
                "QP, the failed one)", me, qps, NR + 2);
        T_CHECK(((volatile uint64_t *)region)[me == 0 ? 16 : 17] == 1, "the put after the re-connection did not land");
    } else {
        T_CHECK(qps == NR + 1, "rank %d: %ld QPs, %d expected", me, qps, NR + 1);
    }
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < NR; r++) {
        rvx_rkey_release(&rk[r]);
        rvx_ep_destroy(ep[r]);
    }
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    free(region);
    if (!t_failures) printf("rank %d: one QP per peer, %zu bytes per peer besides it\n", me, per_peer);
    return t_exit();
}
