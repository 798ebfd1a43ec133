/* t_dc_oracle: the WQEs dc_mlx5 posts on a live (modelled) DCI, compared byte for byte with the
 * WQE built the rdma-core way: the ctrl segment through mlx5dv_set_ctrl_seg, the address segment
 * through mlx5dv_set_dgram_seg, data segments through mlx5dv_set_data_seg, and the raddr, atomic
 * and inline segments from mlx5dv.h's layouts (never through rvx's builders).
 *
 * One rank, an endpoint to itself. For each operation the test reads the DCI's state before the
 * post (producer index, moderation counter, pending fence, bounce ring position), builds the
 * expected WQE from it, poisons the slots it will take, posts through the public API and compares
 * every byte of every WQEBB, following the wrap at the end of the queue (read through
 * mlx5dv_init_obj's view of the queue): bytes the NIC reads must be the expected ones; padding
 * must be zero or untouched. Operations: put short (every inline length), put8, put bcopy, get
 * bcopy, a fetching atomic, an 8-byte AM (one WQEBB from registers) and medium AMs from the
 * bounce ring (the frame's prefix and bytes checked there too); the AMs must then arrive. */
#define RVX_AM_HANDLERS(X) X(ORACLE, on_oracle)
/* No idle sweep while WQEs are compared: on a busy machine a pause of one sweep interval between
 * two posts would give the credits back, and the next AM would post a claim first, a WQE the test
 * does not build. The claims that running out of credits causes come by count and are handled. */
#define RVX_DC_CREDIT_IDLE_US 600000000
#ifndef RVX_TL
#define RVX_TL RVX_TL_DC_MLX5
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define POISON 0xa5
#define ITERS  4200
#define MAXBB  4

static uint8_t expb[MAXBB * 64], care[MAXBB * 64], src[8192];
static uint8_t *sqb;
static uint32_t cnt, dctn, my_rank, rep_rank; /* rep_rank: a bounce frame's, with a report */
static uint16_t lid;
static uint8_t gid[16];
static rvx__dc_dci_t *D;
static long handled, handled_bad, compared;

static void on_oracle(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t;
    if (n != 1 || (len && t_verify(p, len, a[0]) >= 0)) handled_bad++;
    handled++;
}

static void expect(size_t off, const void *b, size_t n)
{
    memcpy(expb + off, b, n);
    memset(care + off, 1, n);
}

static void expect_ctrl_av(uint32_t pi, unsigned opcode, unsigned opmod, unsigned ds, unsigned flags,
                           uint32_t imm_be)
{
    uint8_t mac[6] = {0};
    memset(expb, 0, sizeof(expb));
    memset(care, 0, sizeof(care));
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)expb, (uint16_t)pi, (uint8_t)opcode,
                        (uint8_t)opmod, D->qpn, (uint8_t)flags, (uint8_t)ds, 0, imm_be);
    mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)(void *)(expb + 16), RVX__DC_KEY, dctn, 0,
                         0, 0, lid, mac, 0, 0, 0, gid);
    memset(care, 1, 32);
}

static void expect_raddr(size_t off, uint64_t raddr, uint32_t rkey)
{
    struct mlx5_wqe_raddr_seg r;
    r.raddr = htobe64(raddr);
    r.rkey = htobe32(rkey);
    r.reserved = 0;
    expect(off, &r, sizeof(r));
}

static void expect_data(size_t off, uint32_t len, uint32_t lkey, const void *addr)
{
    struct mlx5_wqe_data_seg d;
    mlx5dv_set_data_seg(&d, len, lkey, (uintptr_t)addr);
    expect(off, &d, sizeof(d));
}

static void expect_inline(size_t off, const void *b, size_t n)
{
    uint32_t bc = htobe32((uint32_t)n | MLX5_INLINE_SEG);
    expect(off, &bc, 4);
    expect(off + 4, b, n);
}

static uint8_t *slot_byte(uint32_t pi, size_t i)
{
    return sqb + (((size_t)pi * 64 + i) % ((size_t)cnt * 64));
}

static void poison(uint32_t pi, unsigned nbb)
{
    size_t i;
    for (i = 0; i < (size_t)nbb * 64; i++) *slot_byte(pi, i) = POISON;
}

static void compare(const char *what, uint32_t pi, unsigned nbb)
{
    size_t i;
    T_CHECK(D->sq.pi == pi + nbb, "%s: producer index %u, expected %u", what, D->sq.pi, pi + nbb);
    for (i = 0; i < (size_t)nbb * 64 && t_failures < 10; i++) {
        uint8_t b = *slot_byte(pi, i);
        if (care[i])
            T_CHECK(b == expb[i], "%s (WQE %u): byte %zu is 0x%02x, rdma-core's 0x%02x", what, pi, i, b,
                    expb[i]);
        else
            T_CHECK(b == 0 || b == POISON, "%s (WQE %u): padding byte %zu is 0x%02x", what, pi, i, b);
    }
    compared++;
}

/* fm_ce_se of the WQE at pi, as the model has it: a completion once the WQE starts at or past the
 * mark, RVX_MLX5_SIG_EVERY WQEBBs after the last signaled one (or when forced), with the fence a
 * READ or atomic left. */
static unsigned flags_of(uint32_t pi, uint32_t sig_pi, uint8_t fence, int force)
{
    return force || (int32_t)(pi - sig_pi) >= 0 ? MLX5_WQE_CTRL_CQ_UPDATE | fence : 0;
}

/* Where the bounce ring puts len bytes next. */
static uint8_t *bounce_next(size_t len)
{
    uint64_t off = D->b_head % RVX_DC_BOUNCE_BYTES;
    len = (len + 63) & ~(size_t)63;
    if (off + len > RVX_DC_BOUNCE_BYTES) off = 0;
    return D->bounce + off;
}

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    uint8_t packed[RVX_RKEY_PACKED_SIZE];
    rvx__tl_iface_t *ifc;
    struct mlx5dv_qp dq;
    struct mlx5dv_obj obj;
    uint64_t base, v = 0;
    uint32_t rkey, blkey;
    long sent_am = 0;
    unsigned laps;
    int i;
    double t0;

    if (rvx_init(&ctx) != RVX_OK) { fprintf(stderr, "t_dc_oracle: no device\n"); return 77; }
    T_OK(rvx_worker_create(ctx, &w));
    T_OK(rvx_ep_create(w, 0, &ep));
    T_OK(rvx_mem_alloc(ctx, 1 << 20, &mem));
    rvx_rkey_pack(mem, packed);
    T_OK(rvx_rkey_unpack(ep, packed, &rk));
    base = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    rkey = mem->tl[0].mr->rkey;
    ifc = &w->iface[0];
    if (ifc->av_bytes != RVX__DC_AV_BASE) { fprintf(stderr, "t_dc_oracle: RoCE, not covered\n"); return 77; }
    blkey = ifc->bounce_mr->lkey;
    my_rank = 0;
    rep_rank = my_rank | RVX__DC_PRE_REPORT;
    dctn = ifc->dct->qp_num;
    lid = ifc->ctx->lid;
    memcpy(gid, ifc->ctx->gid.raw, 16);
    t_fill(src, sizeof(src), 7);
    T_OK(rvx_put(ep, &v, 8, base, &rk)); /* the endpoint takes its DCI */
    T_OK(rvx_ep_flush(ep));
    D = ep->tl[0].dci;
    T_CHECK(D != NULL, "no DCI held");
    if (!D) return t_exit();
    memset(&obj, 0, sizeof(obj));
    obj.qp.in = D->qp;
    obj.qp.out = &dq;
    T_CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0, "mlx5dv_init_obj");
    sqb = (uint8_t *)dq.sq.buf;
    cnt = dq.sq.wqe_cnt;
    { /* the first message claims credits from the pool (an atomic first): done before the loop */
        uint64_t arg = 0;
        T_OK(rvx_am_short(ep, RVX_AM_ORACLE, &arg, 1));
        sent_am++;
        T_OK(rvx_ep_flush(ep));
        while (handled < sent_am) rvx_progress(w);
    }

    for (i = 0; i < ITERS && t_failures < 10; i++) {
        uint32_t pi = D->sq.pi;
        uint32_t sp = D->sq.sig_pi;
        uint8_t fence = D->sq.fence;
        uint64_t raddr = base + 64 + (uint64_t)(i % 512) * 128;
        unsigned ds, nbb;
        char what[64];
        if (ep->tl[0].dci != D) break;
        switch (i % 7) {
        case 0: { /* put short, every inline length */
            size_t len = 1 + (size_t)(i / 7) % RVX_PUT_SHORT_MAX;
            ds = 3 + RVX__MLX5_INLINE_DS(len);
            nbb = RVX__MLX5_NBB(ds);
            expect_ctrl_av(pi, MLX5_OPCODE_RDMA_WRITE, 0, ds, flags_of(pi, sp, fence, 0), 0);
            expect_raddr(32, raddr, rkey);
            expect_inline(48, src + i % 64, len);
            poison(pi, nbb);
            T_OK(rvx_put(ep, src + i % 64, len, raddr, &rk));
            snprintf(what, sizeof(what), "put short %zu", len);
            break;
        }
        case 1: /* put8: the one-WQEBB fast path */
            v = (uint64_t)i * 0x9e3779b97f4a7c15ull;
            ds = 4;
            nbb = 1;
            expect_ctrl_av(pi, MLX5_OPCODE_RDMA_WRITE, 0, ds, flags_of(pi, sp, fence, 0), 0);
            expect_raddr(32, raddr, rkey);
            expect_inline(48, &v, 8);
            poison(pi, nbb);
            T_OK(rvx_put(ep, &v, 8, raddr, &rk));
            snprintf(what, sizeof(what), "put8");
            break;
        case 2: { /* put bcopy from the bounce ring */
            size_t len = RVX_PUT_SHORT_MAX + 1 + (size_t)(i * 131) % 4000;
            uint8_t *b = bounce_next(len);
            ds = 4;
            nbb = 1;
            expect_ctrl_av(pi, MLX5_OPCODE_RDMA_WRITE, 0, ds, flags_of(pi, sp, fence, 0), 0);
            expect_raddr(32, raddr, rkey);
            expect_data(48, (uint32_t)len, blkey, b);
            poison(pi, nbb);
            T_OK(rvx_put(ep, src, len, raddr, &rk));
            T_CHECK(!memcmp(b, src, len), "put bcopy %zu: the bounce copy differs", len);
            snprintf(what, sizeof(what), "put bcopy %zu", len);
            break;
        }
        case 3: { /* get bcopy, one chunk: signaled, and the next WQE fenced */
            static uint64_t dst[128];
            size_t len = 8 + (size_t)(i * 8) % 1000;
            uint8_t *b = bounce_next(len);
            rvx_request_t req;
            ds = 4;
            nbb = 1;
            expect_ctrl_av(pi, MLX5_OPCODE_RDMA_READ, 0, ds, flags_of(pi, sp, fence, 1), 0);
            expect_raddr(32, raddr, rkey);
            expect_data(48, (uint32_t)len, blkey, b);
            poison(pi, nbb);
            req.status = RVX_INPROGRESS;
            T_STATUS(rvx_get(ep, dst, len, raddr, &rk, &req), RVX_INPROGRESS);
            compare("get bcopy", pi, nbb);
            T_OK(rvx_wait(w, &req));
            T_CHECK(!memcmp(dst, (const void *)(uintptr_t)raddr, len), "get bcopy %zu: wrong bytes", len);
            continue;
        }
        case 4: { /* a fetching 64-bit add: ctrl, address, raddr, atomic, data (two WQEBBs) */
            uint64_t old = 0, before = *(volatile uint64_t *)(uintptr_t)base;
            uint8_t *slot = bounce_next(8);
            struct mlx5_wqe_atomic_seg a;
            rvx_request_t req;
            ds = 5;
            nbb = 2;
            expect_ctrl_av(pi, MLX5_OPCODE_ATOMIC_FA, 0, ds, flags_of(pi, sp, fence, 1), 0);
            expect_raddr(32, base, rkey);
            a.swap_add = htobe64(3);
            a.compare = 0;
            expect(48, &a, sizeof(a));
            expect_data(64, 8, blkey, slot);
            poison(pi, nbb);
            req.status = RVX_INPROGRESS;
            T_STATUS(rvx_atomic64(ep, RVX_AMO_ADD, 3, 0, base, &rk, &old, &req), RVX_INPROGRESS);
            compare("atomic add", pi, nbb);
            T_OK(rvx_wait(w, &req));
            T_CHECK(old == before, "atomic add fetched %llu, memory held %llu", (unsigned long long)old,
                    (unsigned long long)before);
            continue;
        }
        case 5: { /* an 8-byte AM: SEND_IMM, prefix (rank, consumed) and the argument inline */
            uint64_t arg = (uint64_t)i;
            uint32_t imm = htobe32(RVX__AM_INFO(RVX_AM_ORACLE, RVX__AM_SHORT, 1) | RVX__CHAN_REQUEST << 16);
            rvx_status_t st;
            ds = 4;
            nbb = 1;
            expect_ctrl_av(pi, MLX5_OPCODE_SEND_IMM, 0, ds, flags_of(pi, sp, fence, 0), imm);
            {
                uint32_t bc = htobe32(16u | MLX5_INLINE_SEG);
                expect(32, &bc, 4);
                expect(36, &my_rank, 4); /* the rank without RVX__DC_PRE_REPORT: bytes 40-43 unread */
                expect(44, &arg, 8);
            }
            poison(pi, nbb);
            st = rvx_am_short(ep, RVX_AM_ORACLE, &arg, 1);
            if (st == RVX_ERR_NO_RESOURCE) { /* no credit: let the frames arrive */
                while (rvx_progress(w)) {}
                continue;
            }
            T_OK(st);
            sent_am++;
            snprintf(what, sizeof(what), "am short 8");
            break;
        }
        default: { /* a medium AM from the bounce ring: prefix, argument, payload */
            size_t plen = 60 + (size_t)(i * 37) % 3000, flen = RVX__DC_PREFIX + 8 + plen;
            uint64_t arg = (uint64_t)i;
            uint32_t imm = htobe32(RVX__AM_INFO(RVX_AM_ORACLE, RVX__AM_MEDIUM, 1) | RVX__CHAN_REQUEST << 16);
            uint8_t *b = bounce_next(flen);
            rvx_status_t st;
            t_fill(src + 4096, plen, arg);
            ds = 3;
            nbb = 1;
            expect_ctrl_av(pi, MLX5_OPCODE_SEND_IMM, 0, ds, flags_of(pi, sp, fence, 0), imm);
            expect_data(32, (uint32_t)flen, blkey, b);
            poison(pi, nbb);
            st = rvx_am_medium(ep, RVX_AM_ORACLE, &arg, 1, src + 4096, plen);
            if (st == RVX_ERR_NO_RESOURCE) {
                while (rvx_progress(w)) {}
                continue;
            }
            T_OK(st);
            sent_am++;
            T_CHECK(!memcmp(b, &rep_rank, 4) && !memcmp(b + 8, &arg, 8) && !memcmp(b + 16, src + 4096, plen),
                    "am medium %zu: the frame in the bounce ring differs", plen);
            snprintf(what, sizeof(what), "am medium %zu", plen);
            break;
        }
        }
        compare(what, pi, nbb);
        if (i % 64 == 63) { /* retire and deliver, outside the comparisons */
            T_OK(rvx_ep_flush(ep));
            while (rvx_progress(w)) {}
        }
    }
    T_OK(rvx_ep_flush(ep));
    t0 = t_now();
    while (handled < sent_am && t_now() - t0 < 10) rvx_progress(w);
    T_CHECK(handled == sent_am && handled_bad == 0, "%ld of %ld messages arrived, %ld wrong", handled,
            sent_am, handled_bad);
    T_CHECK(compared > ITERS / 2, "only %ld WQEs compared", compared);
    laps = D->sq.pi / cnt;
    T_CHECK(laps >= 2, "the queue wrapped only %u times", laps);
    rvx_rkey_release(&rk);
    rvx_ep_destroy(ep);
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    if (!t_failures)
        printf("t_dc_oracle: %ld WQEs equal to rdma-core's, %u queue laps, %ld messages delivered\n",
               compared, laps, handled);
    return t_exit();
}
