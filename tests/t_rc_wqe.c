/* t_rc_wqe: the mlx5 layer's WQE builders, checked byte for byte without a device.
 *
 * Three builds of the same WQE are compared for many values (WQE index wrapping at 16 bits, QPNs
 * of 24 bits, addresses, keys, payloads, fm_ce_se):
 *   - the SSE WQEBB of the put8 and 8-byte-send paths (rvx__mlx5_bb_write8, rvx__mlx5_bb_send8),
 *   - the scalar segment writers (rvx__mlx5_set_ctrl, _set_raddr, _set_inline),
 *   - rdma-core's setters (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg, mlx5dv_set_dgram_seg) and
 *     the raddr/inline layouts of mlx5dv.h written by hand.
 * Then the commit point on a send queue in ordinary memory: producer index, doorbell record,
 * BlueFlame copy (from registers, from the queue across its end) or 8-byte doorbell, and the
 * half flip. */
#include <rvx/rvx.h>
#include "testlib.h"

#if RVX_TL != RVX_TL_RC_MLX5
#error "t_rc_wqe is an rc_mlx5 test: build with -DRVX_TL=RVX_TL_RC_MLX5"
#endif

#define NBB_Q 8 /* WQEBBs of the test's send queue */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int same(const char *what, unsigned iter, const uint8_t *a, const char *an, const uint8_t *b,
                const char *bn, size_t len)
{
    size_t i;
    if (!memcmp(a, b, len)) return 1;
    for (i = 0; i < len && a[i] == b[i]; i++) {}
    T_CHECK(0, "%s (case %u): %s and %s differ first at byte %zu: 0x%02x != 0x%02x", what, iter,
            an, bn, i, a[i], b[i]);
    return 0;
}

/* A send queue in ordinary memory; the "register" is memory too. */
static RVX_ALIGNAS(64) uint8_t qbuf[NBB_Q * 64];
static RVX_ALIGNAS(512) uint8_t regs[2 * 256]; /* aligned as a register: halves flip by xor */
static uint32_t dbrec[2];
static rvx__mlx5_bf_t bf;
static rvx__mlx5_sq_t sq;

static void sq_reset(uint32_t pi, uint32_t bf_size)
{
    memset(qbuf, 0xa5, sizeof(qbuf));
    memset(regs, 0x5a, sizeof(regs));
    memset(dbrec, 0, sizeof(dbrec));
    memset(&bf, 0, sizeof(bf));
    bf.reg = bf.cur = regs;
    bf.size = bf_size;
    bf.flip = 256;
    memset(&sq, 0, sizeof(sq));
    sq.buf = qbuf;
    sq.mask = NBB_Q - 1;
    sq.pi = pi;
    sq.pi_limit = pi + NBB_Q;
    sq.room = NBB_Q;
    sq.dbrec = &dbrec[MLX5_SND_DBR];
    sq.bf = &bf;
}

#if defined(__x86_64__)
/* put8: an 8-byte RDMA WRITE, inline, one WQEBB. */
static void check_put8(unsigned iter)
{
    uint8_t sse[64], ref[64], *scalar = qbuf; /* inside the queue: inline data wraps at its end */
    uint32_t qpn = (uint32_t)rnd() & 0xffffff, key = (uint32_t)rnd();
    uint32_t pi = (uint32_t)rnd();
    uint64_t raddr = rnd(), payload = rnd();
    static const uint8_t fms[] = {0, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE};
    uint8_t fm = fms[iter % 3];
    uint64_t ctrl_word = (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | qpn << 8 | 3;
    rvx_rkey_t rk;
    rvx__mlx5_bb_t bb;
    struct mlx5_wqe_raddr_seg r;
    struct mlx5_wqe_inl_data_seg inl;

    memset(&rk, 0, sizeof(rk));
    rk.rkey_word = (uint64_t)htobe32(key);
    memset(sse, 0xee, sizeof(sse));
    rvx__mlx5_bb_write8(&bb, ctrl_word, pi, &payload, raddr, &rk, (uint64_t)fm << 24);
    rvx__mlx5_bb_store(sse, &bb);

    sq_reset(0, 256);
    memset(scalar, 0, 64); /* padding after the payload: zero */
    rvx__mlx5_set_ctrl(scalar, pi, 0, MLX5_OPCODE_RDMA_WRITE, qpn << 8, 3, fm, 0);
    rvx__mlx5_set_raddr(scalar + 16, raddr, &rk);
    T_CHECK(rvx__mlx5_set_inline(&sq, scalar + 32, &payload, 8) == 1, "8 inline bytes take one unit");

    memset(ref, 0, sizeof(ref));
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)ref, (uint16_t)pi, MLX5_OPCODE_RDMA_WRITE,
                        0, qpn, fm, 3, 0, 0);
    r.raddr = htobe64(raddr);
    r.rkey = htobe32(key);
    r.reserved = 0;
    memcpy(ref + 16, &r, sizeof(r));
    inl.byte_count = htobe32(8u | MLX5_INLINE_SEG);
    memcpy(ref + 32, &inl, sizeof(inl));
    memcpy(ref + 36, &payload, 8);

    if (same("put8", iter, sse, "the SSE WQEBB", scalar, "the scalar builders", 64))
        same("put8", iter, scalar, "the scalar builders", ref, "rdma-core's setters", 64);
}

/* The 8-byte message: SEND with immediate, inline, unsignaled, one WQEBB. */
static void check_send8(unsigned iter)
{
    uint8_t sse[64], ref[64], *scalar = qbuf;
    uint32_t qpn = (uint32_t)rnd() & 0xffffff, pi = (uint32_t)rnd(), imm_be = (uint32_t)rnd();
    uint64_t body = rnd();
    uint64_t ctrl_word = (uint64_t)MLX5_OPCODE_SEND_IMM << 32 | qpn << 8 | 2;
    rvx__mlx5_bb_t bb;
    struct mlx5_wqe_inl_data_seg inl;

    rvx__mlx5_bb_send8(&bb, ctrl_word, pi, &body, imm_be);
    rvx__mlx5_bb_store(sse, &bb);

    sq_reset(0, 256);
    memset(scalar, 0, 64);
    rvx__mlx5_set_ctrl(scalar, pi, 0, MLX5_OPCODE_SEND_IMM, qpn << 8, 2, 0, imm_be);
    rvx__mlx5_set_inline(&sq, scalar + 16, &body, 8);

    memset(ref, 0, sizeof(ref));
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)ref, (uint16_t)pi, MLX5_OPCODE_SEND_IMM,
                        0, qpn, 0, 2, 0, imm_be);
    inl.byte_count = htobe32(8u | MLX5_INLINE_SEG);
    memcpy(ref + 16, &inl, sizeof(inl));
    memcpy(ref + 20, &body, 8);

    if (same("send8", iter, sse, "the SSE WQEBB", scalar, "the scalar builders", 64))
        same("send8", iter, scalar, "the scalar builders", ref, "rdma-core's setters", 64);
}
#endif

/* ctrl with opmod and imm, data and datagram (address) segments against rdma-core's setters. */
static void check_segments(unsigned iter)
{
    uint8_t a[64], b[64];
    uint32_t qpn = (uint32_t)rnd() & 0xffffff, pi = (uint32_t)rnd(), imm = (uint32_t)rnd();
    uint32_t len = (uint32_t)rnd() & 0x7fffffff, lkey = (uint32_t)rnd(), dct = (uint32_t)rnd() & 0xffffff;
    uint64_t addr = rnd(), key = rnd(), x = rnd();
    uint8_t gid[16], mac[6], opmod = iter & 1 ? 0x09 : 0x08, fm = (uint8_t)(x & 0xaa);
    uint16_t lid = (uint16_t)(x >> 16);
    int ext = (int)(x >> 32) & 1;
    unsigned i;
    for (i = 0; i < 16; i++) gid[i] = (uint8_t)rnd();
    for (i = 0; i < 6; i++) mac[i] = (uint8_t)rnd();

    memset(a, 0x11, 16);
    memset(b, 0x22, 16);
    rvx__mlx5_set_ctrl(a, pi, opmod, MLX5_OPCODE_ATOMIC_MASKED_CS, qpn << 8, 5, fm, imm);
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)b, (uint16_t)pi,
                        MLX5_OPCODE_ATOMIC_MASKED_CS, opmod, qpn, fm, 5, 0, imm);
    b[9] = b[10] = 0; /* the setter leaves the DCI stream id alone; libmlx5's posts zero it */
    same("ctrl segment", iter, a, "rvx__mlx5_set_ctrl", b, "mlx5dv_set_ctrl_seg", 16);

    memset(a, 0x11, 16);
    memset(b, 0x22, 16);
    rvx__mlx5_set_data(a, len, lkey, (const void *)(uintptr_t)addr);
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(void *)b, len, lkey, (uintptr_t)addr);
    same("data segment", iter, a, "rvx__mlx5_set_data", b, "mlx5dv_set_data_seg", 16);

    memset(a, 0x11, 48);
    memset(b, 0, 48); /* rdma-core leaves the reserved bytes as they were */
    rvx__mlx5_set_av(a, key, dct, ext, (uint8_t)x, (uint8_t)(x >> 8), lid, mac, (uint8_t)(x >> 40),
                     (uint8_t)(x >> 48), (uint32_t)(x >> 4), gid);
    mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)(void *)b, key, dct, (uint8_t)ext, (uint8_t)x,
                         (uint8_t)(x >> 8), lid, mac, (uint8_t)(x >> 40), (uint8_t)(x >> 48),
                         (uint32_t)(x >> 4), gid);
    same("datagram segment", iter, a, "rvx__mlx5_set_av", b, "mlx5dv_set_dgram_seg", 48);

    memset(a, 0x11, 32);
    memset(b, 0x22, 32);
    sq_reset(0, 256);
    rvx__mlx5_set_atomic(a, addr, key);
    {
        struct mlx5_wqe_atomic_seg s;
        s.swap_add = htobe64(addr);
        s.compare = htobe64(key);
        memcpy(b, &s, sizeof(s));
    }
    same("atomic segment", iter, a, "rvx__mlx5_set_atomic", b, "mlx5_wqe_atomic_seg", 16);
}

/* The commit point: doorbell record, BlueFlame copy (or 8-byte doorbell), half flip. */
static void check_commit(void)
{
    uint8_t wqe2[128];
    unsigned i;
#if defined(__x86_64__)
    {   /* a WQEBB from registers at the last slot */
        rvx__mlx5_bb_t bb;
        uint64_t v = 0x1122334455667788ull;
        rvx_rkey_t rk;
        memset(&rk, 0, sizeof(rk));
        rk.rkey_word = htobe32(0xabcdef);
        sq_reset(NBB_Q - 1 + 0x10000, 256);
        rvx__mlx5_bb_write8(&bb, (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | 0x123 << 8 | 3, sq.pi, &v,
                            0x1000, &rk, 0);
        rvx__mlx5_post_bb(&sq, sq.pi, &bb, 0);
        T_CHECK(sq.pi == NBB_Q + 0x10000, "post_bb: producer index %u", sq.pi);
        T_CHECK(dbrec[MLX5_SND_DBR] == htobe32(NBB_Q) && dbrec[MLX5_RCV_DBR] == 0,
                "post_bb: doorbell record 0x%x (expected the 16-bit index %u, big-endian)",
                dbrec[MLX5_SND_DBR], NBB_Q);
        T_CHECK(!memcmp(regs, qbuf + (NBB_Q - 1) * 64, 64), "post_bb: BlueFlame copy differs from the queue");
        T_CHECK(bf.cur == regs + 256, "post_bb: the BlueFlame half did not flip");
        T_CHECK(((const uint8_t *)qbuf)[(NBB_Q - 1) * 64 + 2] == (uint8_t)(NBB_Q - 1) &&
                ((const uint8_t *)qbuf)[(NBB_Q - 1) * 64 + 3] == MLX5_OPCODE_RDMA_WRITE,
                "post_bb: the ctrl segment's WQE index or opcode is wrong");
    }
#endif
    /* two WQEBBs from the last slot, wrapping to the first: copied from the queue in order */
    sq_reset(NBB_Q - 1, 256);
    for (i = 0; i < 128; i++) wqe2[i] = (uint8_t)(i * 7 + 1);
    memcpy(qbuf + (NBB_Q - 1) * 64, wqe2, 64);
    memcpy(qbuf, wqe2 + 64, 64);
    bf.cur = regs + 256;
    rvx__mlx5_commit(&sq, NBB_Q + 1, qbuf + (NBB_Q - 1) * 64, 2, NULL);
    T_CHECK(sq.pi == NBB_Q + 1 && dbrec[MLX5_SND_DBR] == htobe32(NBB_Q + 1), "commit: pi %u, dbrec 0x%x",
            sq.pi, dbrec[MLX5_SND_DBR]);
    T_CHECK(!memcmp(regs + 256, wqe2, 128), "commit: the BlueFlame copy of a wrapped WQE is not the WQE");
    T_CHECK(bf.cur == regs, "commit: the BlueFlame half did not flip back");
    /* a WQE larger than the register's half: the 8-byte doorbell, nothing else written */
    sq_reset(3, 64);
    for (i = 0; i < 128; i++) qbuf[3 * 64 + i] = (uint8_t)(i + 9);
    rvx__mlx5_commit(&sq, 5, qbuf + 3 * 64, 2, NULL);
    T_CHECK(!memcmp(regs, qbuf + 3 * 64, 8), "commit: the 8-byte doorbell is not the ctrl's first 8 bytes");
    T_CHECK(regs[8] == 0x5a && regs[63] == 0x5a, "commit: more than 8 bytes written for a doorbell");
    T_CHECK(dbrec[MLX5_SND_DBR] == htobe32(5) && bf.cur == regs + 256, "commit: dbrec or flip after a doorbell");
}

int main(void)
{
    unsigned iter;
#if RVX_MLX5_DOORBELL != RVX_MLX5_DB_BF
    printf("SKIP: t_rc_wqe checks the BlueFlame build\n");
    return 77;
#endif
    for (iter = 0; iter < 3000 && !t_failures; iter++) {
#if defined(__x86_64__)
        check_put8(iter);
        check_send8(iter);
#endif
        check_segments(iter);
    }
    check_commit();
    if (!t_failures)
        printf("t_rc_wqe: %u cases of put8, send8, ctrl, data, datagram and atomic segments and the "
               "commit point: identical\n", iter);
    return t_exit();
}
