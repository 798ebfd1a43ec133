/* t_dc_wqe: dc_mlx5's WQE pieces, byte for byte against rdma-core's setters, without a device.
 *   - the address segment an endpoint's fields make (the 16-byte base form on InfiniBand, the
 *     48-byte form with GRH on RoCE) against mlx5dv_set_dgram_seg,
 *   - the put8 WQEBB built in registers (ctrl, address, raddr, inline 8) against
 *     mlx5dv_set_ctrl_seg + mlx5dv_set_dgram_seg + mlx5dv.h's raddr and inline layouts.
 * Endpoints are made from addresses with no verbs call, as at rvx_ep_create, from the 24 bytes
 * of each address the worker keeps after wire-up (the GID's top half kept once, or per rank when
 * the ranks' differ: both built here), and are no larger than av_lo, the DCI, credits, rank and
 * status (48 bytes with messages, 40 without; checked here as well as by the header's static
 * assert). An address of another link layer or transport is refused at connect. */
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#include <rvx/rvx.h>
#include "testlib.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void same(const char *what, unsigned iter, const uint8_t *a, const uint8_t *b, size_t len)
{
    size_t i;
    if (!memcmp(a, b, len)) return;
    for (i = 0; i < len && a[i] == b[i]; i++) {}
    T_CHECK(0, "%s (case %u): rvx and rdma-core differ first at byte %zu: 0x%02x != 0x%02x", what,
            iter, i, a[i], b[i]);
}

/* Three RoCE ranks whose GIDs differ in their top 8 bytes (the per-rank form) and a fourth whose
 * address is of InfiniBand: each endpoint's GRH carries its own rank's whole GID, the fourth is
 * refused; the addressing kept per rank is the 24-byte prefix plus 8 bytes of GID top. */
static void gid_prefixes(rvx__tl_iface_t *ifc, rvx__dc_dci_t *d)
{
    static uint8_t qbuf[8 * 64] __attribute__((aligned(64)));
    rvx__tl_addr_t full[4], kept[4];
    uint8_t gid[4][16], a[64], b[64], mac[6] = {0};
    int r;
    unsigned k;
    memset(full, 0, sizeof(full));
    for (r = 0; r < 4; r++) {
        for (k = 0; k < 16; k++) gid[r][k] = (uint8_t)rnd();
        full[r].magic = RVX__MLX5_MAGIC;
        full[r].dctn = (uint32_t)rnd() & 0xffffff;
        full[r].is_roce = r < 3;
        memcpy(full[r].gid_hi, gid[r], 8);
        memcpy(full[r].at.gid_lo, gid[r] + 8, 8);
    }
    ifc->ctx->is_roce = 1;
    ifc->av_bytes = RVX__DC_AV_EXT;
    ifc->nranks = 4;
    T_OK(rvx__tl_iface_wireup(ifc, (const uint8_t *)full, sizeof(full[0])));
    T_CHECK(ifc->gids.his != NULL, "GID tops differ: kept per rank");
    T_CHECK(ifc->nrefused == 1 && ifc->refused[0] == 3, "the InfiniBand address is noted at wire-up");
    for (r = 0; r < 4; r++) memcpy(&kept[r], &full[r], RVX__TL_ADDR_KEPT(4));
    rvx__tl_iface_addrs(ifc, (const uint8_t *)kept, sizeof(kept[0]));
    d->sq.buf = qbuf;
    for (r = 0; r < 4; r++) {
        rvx__tl_ep_t ep;
        if (r == 3) {
            T_CHECK(rvx__tl_ep_connect(ifc, &ep, r, &kept[r]) == RVX_ERR_INVALID_PARAM,
                    "an address of another link layer is refused at connect");
            continue;
        }
        T_OK(rvx__tl_ep_connect(ifc, &ep, r, &kept[r]));
        rvx__dc_set_av(d, &ep, qbuf);
        memcpy(a, qbuf + 16, RVX__DC_AV_EXT);
        memset(b, 0, sizeof(b));
        mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)(void *)b, RVX__DC_KEY, full[r].dctn, 1,
                             0, 0, 0xc000, mac, 0, RVX__MLX5_HOP_LIMIT,
                             1u << 30 | (uint32_t)ifc->ctx->gid_index << 20, gid[r]);
        same("address segment (GRH, per-rank GID top)", (unsigned)r, a, b, RVX__DC_AV_EXT);
        ifc->nlive--;
    }
    free(ifc->gids.his);
    free(ifc->refused);
}

int main(void)
{
    static uint8_t qbuf[8 * 64] __attribute__((aligned(64)));
    rvx__tl_ctx_t ctx;
    rvx__tl_iface_t ifc;
    rvx__dc_dci_t d;
    unsigned iter;
    uint8_t mac[6] = {0};

    memset(&ctx, 0, sizeof(ctx));
    memset(&ifc, 0, sizeof(ifc));
    ifc.nranks = 1;
    memset(&d, 0, sizeof(d));
    ifc.ctx = &ctx;
    d.ifc = &ifc;
    d.sq.buf = qbuf;
    d.sq.mask = 7;
    for (iter = 0; iter < 20000 && t_failures < 10; iter++) {
        rvx__tl_addr_t addr, kept;
        rvx__tl_ep_t ep;
        uint16_t lid;
        uint8_t gid[16];
        uint8_t a[64], b[64];
        uint64_t raddr = rnd(), payload = rnd(), x = rnd();
        uint32_t pi = (uint32_t)x, qpn = (uint32_t)(x >> 32) & 0xffffff, key = (uint32_t)rnd();
        int roce = iter & 1;
        unsigned k;

        memset(&addr, 0, sizeof(addr));
        addr.magic = RVX__MLX5_MAGIC;
        addr.dctn = (uint32_t)rnd() & 0xffffff;
        lid = roce ? 0 : (uint16_t)rnd();
        addr.is_roce = (uint8_t)roce;
        for (k = 0; k < 16; k++) gid[k] = roce ? (uint8_t)rnd() : 0;
        if (roce) {
            memcpy(addr.gid_hi, gid, 8);
            memcpy(addr.at.gid_lo, gid + 8, 8);
        } else {
            addr.at.lid = lid;
        }
        ctx.is_roce = (uint8_t)roce;
        ctx.gid_index = (int)(rnd() & 3);
        ifc.av_bytes = roce ? RVX__DC_AV_EXT : RVX__DC_AV_BASE;
        /* wire-up sees the whole address (the GID's top half is kept there); afterwards the worker
         * keeps its first RVX__TL_ADDR_KEPT bytes, and the GRH form reads the rest of the GID there */
        T_OK(rvx__tl_iface_wireup(&ifc, (const uint8_t *)&addr, sizeof(addr)));
        memset(&kept, 0xee, sizeof(kept));
        memcpy(&kept, &addr, RVX__TL_ADDR_KEPT(1));
        rvx__tl_iface_addrs(&ifc, (const uint8_t *)&kept, sizeof(kept));
        T_OK(rvx__tl_ep_connect(&ifc, &ep, 0, &kept));

        /* the address segment */
        memset(a, 0x11, sizeof(a));
        memset(b, 0, sizeof(b));
        T_CHECK(rvx__dc_set_av(&d, &ep, qbuf) == qbuf + 16 + ifc.av_bytes,
                "the next segment follows the address segment");
        memcpy(a, qbuf + 16, ifc.av_bytes);
        if (roce)
            mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)(void *)b, RVX__DC_KEY, addr.dctn, 1,
                                 0, 0, 0xc000, mac, 0, RVX__MLX5_HOP_LIMIT,
                                 1u << 30 | (uint32_t)ctx.gid_index << 20, gid);
        else
            mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)(void *)b, RVX__DC_KEY, addr.dctn, 0,
                                 0, 0, lid, mac, 0, 0, 0, gid);
        same(roce ? "address segment (GRH)" : "address segment (base)", iter, a, b, ifc.av_bytes);

#if defined(__x86_64__)
        if (!roce) { /* put8 */
            rvx_rkey_t rk;
            rvx__mlx5_bb_t bb;
            struct mlx5_wqe_raddr_seg r;
            struct mlx5_wqe_inl_data_seg inl;
            memset(&rk, 0, sizeof(rk));
            rk.rkey_word = (uint64_t)htobe32(key);
            rvx__mlx5_bb_dc_write8(&bb, (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | qpn << 8 | 4, pi,
                                   rvx_htobe64(RVX__DC_KEY), &ep.av_lo, &payload, raddr, &rk);
            rvx__mlx5_bb_store(a, &bb);
            memset(b, 0, 64);
            mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)b, (uint16_t)pi,
                                MLX5_OPCODE_RDMA_WRITE, 0, qpn, 0, 4, 0, 0);
            mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)(void *)(b + 16), RVX__DC_KEY,
                                 addr.dctn, 0, 0, 0, lid, mac, 0, 0, 0, gid);
            memset(b + 32, 0, 32); /* the base form ends at 16 bytes: what follows is raddr */
            r.raddr = htobe64(raddr);
            r.rkey = htobe32(key);
            r.reserved = 0;
            memcpy(b + 32, &r, sizeof(r));
            inl.byte_count = htobe32(8u | MLX5_INLINE_SEG);
            memcpy(b + 48, &inl, sizeof(inl));
            memcpy(b + 52, &payload, 8);
            same("put8 WQEBB", iter, a, b, 64);
        }
#endif
        ifc.nlive--;
    }
    gid_prefixes(&ifc, &d);
    T_CHECK(sizeof(rvx__tl_ep_t) <= (RVX_CAN_RECEIVE ? 48u : 40u), "the endpoint is %zu bytes",
            sizeof(rvx__tl_ep_t));
    printf("t_dc_wqe: %u cases, endpoint %zu bytes\n", iter, sizeof(rvx__tl_ep_t));
    return t_exit();
}
