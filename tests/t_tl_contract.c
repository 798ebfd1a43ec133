/* t_tl_contract: the selected transport provides every name of the tl contract
 * (include/rvx/tl/contract.h). It is a compile-time check: a missing name does not build. At run
 * time it checks the few fields the contract promises. */
#define RVX_AM_HANDLERS(X) X(NOP, on_nop)
#include <rvx/rvx.h>
#include "testlib.h"

static void on_nop(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
}

#define NAME(f) (void)&f;

int main(void)
{
    /* types */
    rvx__tl_ctx_t c;
    rvx__tl_iface_t i;
    rvx__tl_ep_t e;
    rvx__tl_mem_t m;
    rvx__tl_addr_t a;
    rvx_rkey_t k;
    unsigned char packed[RVX__TL_RKEY_PACKED_SIZE];
    (void)c; (void)e; (void)m; (void)a; (void)k; (void)packed;
    /* set-up */
    NAME(rvx__tl_ctx_init) NAME(rvx__tl_ctx_bw_mbs) NAME(rvx__tl_ctx_fini) NAME(rvx__tl_iface_init) NAME(rvx__tl_iface_fini)
    NAME(rvx__tl_iface_address) NAME(rvx__tl_iface_wireup) NAME(rvx__tl_ep_connect) NAME(rvx__tl_ep_disconnect)
    NAME(rvx__tl_ep_alive) NAME(rvx__tl_mem_alloc) NAME(rvx__tl_mem_reg) NAME(rvx__tl_mem_dereg)
    NAME(rvx__tl_rkey_pack) NAME(rvx__tl_rkey_unpack) NAME(rvx__tl_rkey_release)
    /* fast path */
    NAME(rvx__tl_put_short) NAME(rvx__tl_put_bcopy) NAME(rvx__tl_put_zcopy)
    NAME(rvx__tl_get_bcopy) NAME(rvx__tl_get_zcopy) NAME(rvx__tl_atomic64) NAME(rvx__tl_atomic32)
    NAME(rvx__tl_am_claim) NAME(rvx__tl_am_publish) NAME(rvx__tl_am_wait_room) NAME(rvx__tl_am_zcopy)
    NAME(rvx__tl_ep_flush) NAME(rvx__tl_iface_flush) NAME(rvx__tl_progress)
    /* the fields the core relies on */
    memset(&i, 0, sizeof(i));
    T_CHECK(i.nlive == 0 && i.outstanding == 0, "iface counters");
    T_CHECK(RVX__TL_AM_CHANNELS == 2, "request and reply channels");
    T_CHECK(RVX_RKEY_PACKED_SIZE == RVX_LANES * RVX__TL_RKEY_PACKED_SIZE, "packed rkey size: one key per lane");
    {
        /* the signatures the core calls */
        rvx_status_t (*init)(rvx__tl_ctx_t *, unsigned) = rvx__tl_ctx_init;
        uint32_t (*bw)(const rvx__tl_ctx_t *) = rvx__tl_ctx_bw_mbs;
        /* node: the bootstrap's number of this rank's node */
        rvx_status_t (*iinit)(rvx__tl_iface_t *, rvx__tl_ctx_t *, int, int, int) = rvx__tl_iface_init;
        uint32_t mbs, want = RVX_FAB_BW_MBS;
        (void)iinit;
        T_CHECK(init(&c, 0) == RVX_OK, "ctx_init(lane 0)");
        mbs = bw(&c);
#if RVX_TL == RVX_TL_RC_MLX5 || RVX_TL == RVX_TL_DC_MLX5
        {
#if RVX_PAIR
            const rvx__mlx5_ctx_t *nc = &c.net; /* the lane's port is the network's */
#else
            const rvx__tl_ctx_t *nc = &c;
#endif
            /* the port's data rate, decoded here from rdma-core's codes (Gb/s of data per lane:
             * SDR 2, DDR 4, QDR 8, FDR10 10, FDR 13.64, EDR 25, HDR 50, NDR 100) */
            struct ibv_port_attr pa;
            double gbps = 0, lanes = 0;
            memset(&pa, 0, sizeof(pa));
            T_CHECK(!ibv_query_port(nc->ib, nc->port, &pa), "ibv_query_port");
            switch (pa.active_speed) {
            case 1: gbps = 2; break;
            case 2: gbps = 4; break;
            case 4: gbps = 8; break;
            case 8: gbps = 10; break;
            case 16: gbps = 13.64; break;
            case 32: gbps = 25; break;
            case 64: gbps = 50; break;
            case 128: gbps = 100; break;
            }
            switch (pa.active_width) {
            case 1: lanes = 1; break;
            case 2: lanes = 4; break;
            case 4: lanes = 8; break;
            case 8: lanes = 12; break;
            case 16: lanes = 2; break;
            }
            if (gbps * lanes > 0) want = (uint32_t)(gbps * lanes * 125 + 0.5);
            printf("port: active_speed %u active_width %u -> %u MB/s (rvx: %u)\n", pa.active_speed,
                   pa.active_width, want, mbs);
        }
#endif
        T_CHECK(mbs > 0 && (mbs > want ? mbs - want : want - mbs) <= want / 100, "lane bandwidth %u MB/s, expected %u", mbs, want);
        rvx__tl_ctx_fini(&c);
    }
#if RVX_PAIR
    /* a pair: both transports' keys in one packed key, the region's bounds where the core reads
     * them, and an address that starts with the node */
    T_CHECK(RVX__TL_RKEY_PACKED_SIZE == RVX__SHM_RKEY_PACKED_SIZE + RVX__MLX5_RKEY_PACKED_SIZE,
            "pair packed key: shm's then net's");
    T_CHECK(offsetof(rvx__tl_mem_t, addr) == 0 && offsetof(rvx__tl_mem_t, len) == sizeof(void *),
            "pair region: addr and len first");
    T_CHECK(RVX__TL_ADDR_SIZE(4) >= sizeof(rvx__tl_addr_t) + sizeof(rvx__shm_addr_t), "pair address size");
    T_CHECK(strncmp(RVX_TL_NAME, "shm+", 4) == 0, "pair name %s", RVX_TL_NAME);
#endif
    T_CHECK(RVX__TL_AM_ZCOPY == 0 || RVX__TL_AM_ZCOPY == 1, "RVX__TL_AM_ZCOPY is a flag");
    T_CHECK(RVX__TL_AM_ZCOPY_HDR_MAX >= 16, "a zero-copy message carries a 16-byte header");
    return t_exit();
}
