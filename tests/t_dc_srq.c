/* t_dc_srq: the shared receive ring of tl/mlx5/srq.h on a live (modelled) NIC. One process sends
 * SEND_IMM WQEs to its own DCT through a DCI, six times as many as the SRQ holds, and checks
 * every receive CQE: the buffer its wqe_counter names holds that message's bytes, the length and
 * immediate are the message's. Buffers are given back out of order (a few held, released in a
 * scrambled order), so the free list is relinked at every position, and the queue never runs dry
 * (no RNR: at most the posted count is in flight). */
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define HELD 7 /* buffers kept back before release, at most */

static unsigned seen, sent;
static uint16_t held[HELD];
static unsigned nheld;

/* A SEND with immediate seq and 16 bytes inline (seq, ~seq), signaled. */
static void post_send(rvx__tl_ep_t *ep, uint64_t seq)
{
    uint64_t body[2] = {seq, ~seq};
    unsigned ds = 1 + rvx__dc_av_ds(ep->ifc) + RVX__MLX5_INLINE_DS(16), flags, units;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    rvx__dc_dci_t *d = rvx__dc_get(ep, nbb);
    uint8_t *wqe, *seg;
    pi = d->sq.pi;
    wqe = rvx__mlx5_slot(&d->sq, pi);
    flags = rvx__mlx5_moderate(&d->sq, 1);
    rvx__mlx5_set_ctrl(wqe, pi, 0, MLX5_OPCODE_SEND_IMM, d->sq.qpn8, ds, flags,
                       rvx_htobe32((uint32_t)seq));
    seg = rvx__dc_set_av(d, ep, wqe);
    units = rvx__mlx5_set_inline(&d->sq, seg, body, 16);
    rvx__mlx5_zero_pad(&d->sq, seg + 20, units * RVX__MLX5_SEG - 20, nbb * 4 - ds);
    rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    rvx__mlx5_commit(&d->sq, pi + nbb, wqe, nbb, NULL);
    sent++;
}

static void release_some(rvx__tl_iface_t *ifc, int all)
{
    while (nheld && (all || nheld == HELD)) {
        unsigned k = (seen * 5 + nheld) % nheld; /* a scrambled one of those held */
        rvx__mlx5_srq_release(&ifc->srq, held[k]);
        held[k] = held[--nheld];
    }
    rvx__mlx5_srq_ring(&ifc->srq);
}

/* Handle the CQEs present: sends retire, receives are checked and held. */
static int poll(rvx__tl_iface_t *ifc)
{
    int n = 0;
    for (;;) {
        struct mlx5_cqe64 *cqe = rvx__mlx5_cqe(&ifc->cq, ifc->cq.ci);
        uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
        unsigned opcode;
        if (!rvx__mlx5_cqe_ready(&ifc->cq, op_own)) break;
        rvx_from_device_barrier();
        opcode = op_own >> 4;
        rvx__mlx5_cq_advance(&ifc->cq);
        n++;
        if (opcode == MLX5_CQE_REQ) {
            rvx__dc_dci_t *d = rvx__dc_dci_of(ifc, rvx__mlx5_cqe_qpn(cqe));
            T_CHECK(d != NULL, "send completion of QP 0x%x, not a DCI", rvx__mlx5_cqe_qpn(cqe));
            if (d) rvx__dc_req_ok(d, rvx_htobe16(cqe->wqe_counter));
        } else if (opcode == MLX5_CQE_RESP_SEND_IMM) {
            uint16_t idx = rvx_htobe16(cqe->wqe_counter);
            const uint64_t *b = (const uint64_t *)(const void *)rvx__mlx5_srq_buf(&ifc->srq, idx);
            uint32_t imm = rvx_htobe32(cqe->imm_inval_pkey);
            T_CHECK(rvx__mlx5_cqe_qpn(cqe) == ifc->dct->qp_num, "receive on QP 0x%x, not the DCT",
                    rvx__mlx5_cqe_qpn(cqe));
            T_CHECK(rvx_htobe32(cqe->byte_cnt) == 16, "message %u: %u bytes", seen,
                    rvx_htobe32(cqe->byte_cnt));
            T_CHECK(imm == seen, "message %u arrived as %u", seen, imm);
            T_CHECK(b[0] == seen && b[1] == ~(uint64_t)seen,
                    "message %u: WQE %u's buffer holds %llu", seen, idx, (unsigned long long)b[0]);
            seen++;
            held[nheld++] = idx;
            release_some(ifc, 0);
        } else {
            T_CHECK(0, "unexpected CQE opcode %u (syndrome 0x%x)", opcode,
                    ((struct mlx5_err_cqe *)(void *)cqe)->syndrome);
        }
    }
    if (n) rvx__mlx5_cq_update_ci(&ifc->cq);
    return n;
}

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx__tl_iface_t *ifc;
    unsigned depth, total;
    double t0;

    if (rvx_init(&ctx) != RVX_OK) { fprintf(stderr, "t_dc_srq: no device\n"); return 77; }
    T_OK(rvx_worker_create(ctx, &w));
    T_OK(rvx_ep_create(w, 0, &ep));
    ifc = &w->iface[0];
    depth = rvx__mlx5_srq_depth(&ifc->srq);
    T_CHECK(depth + 1 >= 16 && rvx_is_pow2(depth + 1), "SRQ of %u posted buffers", depth);
    total = 6 * (depth + 1) + 3;
    t0 = t_now();
    while (seen < total && t_failures < 5 && t_now() - t0 < 30) {
        /* in flight: sent - seen receives, plus the held ones: stay within the posted count */
        if (sent < total && sent - seen + nheld < depth) post_send(&ep->tl[0], sent);
        else if (!poll(ifc)) sched_yield();
    }
    T_CHECK(seen == total, "%u of %u messages received", seen, total);
    release_some(ifc, 1);
    while (ifc->outstanding && t_now() - t0 < 30) poll(ifc);
    rvx_ep_destroy(ep);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    if (!t_failures) printf("t_dc_srq: %u messages through an SRQ of %u buffers, released out of order\n",
                            seen, depth);
    return t_exit();
}
