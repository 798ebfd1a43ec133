/* rvx/tl/mlx5/wqe.h: writing WQEs into an mlx5 send queue and handing them to the NIC (hot).
 *
 * Segment writers, for the send queue of sq.h, fill mlx5dv.h's structs field by field, in the
 * order the NIC reads them: ctrl | [datagram/address] | [raddr] | [atomic] | data or inline.
 * Every WQE then goes through rvx__mlx5_commit, the one place that moves the producer index,
 * writes the doorbell record and rings the NIC (BlueFlame copy or 8-byte doorbell).
 *
 * Ordering (x86-64): WQE stores, then the doorbell record (x86 keeps stores in order, so a
 * compiler barrier), then sfence, the BlueFlame copy or 8-byte doorbell, sfence, then the
 * BlueFlame half flips. */
#ifndef RVX_TL_MLX5_WQE_H
#define RVX_TL_MLX5_WQE_H

#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "rkey.h"
#include "sq.h"

/* The one-WQEBB shapes rvx posts, as mlx5dv.h's segments laid end to end. Bytes past the last
 * segment are sent by the BlueFlame copy too, so they are zeroed (the queue must hold the same). */
typedef struct rvx__mlx5_wqe_rdma {      /* RDMA WRITE/READ with one data segment (DS 3) */
    struct mlx5_wqe_ctrl_seg  ctrl;
    struct mlx5_wqe_raddr_seg raddr;
    struct mlx5_wqe_data_seg  data;
    uint8_t                   unused[16];
} rvx__mlx5_wqe_rdma_t;

typedef struct rvx__mlx5_wqe_write8 {    /* RDMA WRITE of 8 bytes inline (DS 3) */
    struct mlx5_wqe_ctrl_seg     ctrl;
    struct mlx5_wqe_raddr_seg    raddr;
    struct mlx5_wqe_inl_data_seg inl;
    uint8_t                      payload[8];
    uint8_t                      unused[20];
} rvx__mlx5_wqe_write8_t;

typedef struct rvx__mlx5_wqe_write0 {    /* RDMA WRITE of nothing (DS 2): a keepalive */
    struct mlx5_wqe_ctrl_seg  ctrl;
    struct mlx5_wqe_raddr_seg raddr;
    uint8_t                   unused[32];
} rvx__mlx5_wqe_write0_t;

typedef struct rvx__mlx5_wqe_send {      /* SEND with one data segment (DS 2) */
    struct mlx5_wqe_ctrl_seg ctrl;
    struct mlx5_wqe_data_seg data;
    uint8_t                  unused[32];
} rvx__mlx5_wqe_send_t;

typedef struct rvx__mlx5_wqe_send_inl {  /* SEND with up to 44 bytes inline, or a NOP (no body) */
    struct mlx5_wqe_ctrl_seg     ctrl;
    struct mlx5_wqe_inl_data_seg inl;
    uint8_t                      body[RVX__MLX5_BB_INLINE_MAX];
} rvx__mlx5_wqe_send_inl_t;

RVX_STATIC_ASSERT(sizeof(rvx__mlx5_wqe_rdma_t) == RVX__MLX5_BB &&
                  sizeof(rvx__mlx5_wqe_write8_t) == RVX__MLX5_BB &&
                  sizeof(rvx__mlx5_wqe_write0_t) == RVX__MLX5_BB &&
                  sizeof(rvx__mlx5_wqe_send_t) == RVX__MLX5_BB &&
                  sizeof(rvx__mlx5_wqe_send_inl_t) == RVX__MLX5_BB, "a WQE shape is one WQEBB");

/* ---- segment writers ------------------------------------------------------------------------ */

/* ctrl segment, as mlx5dv_set_ctrl_seg writes it (signature and stream id 0). */
RVX_INLINE void rvx__mlx5_set_ctrl(void *seg, uint32_t pi, unsigned opmod, unsigned opcode,
                                   uint32_t qpn8, unsigned ds, unsigned fm_ce_se, uint32_t imm_be)
{
    struct mlx5_wqe_ctrl_seg *ctrl = (struct mlx5_wqe_ctrl_seg *)seg;
    ctrl->opmod_idx_opcode = rvx_htobe32(opmod << 24 | (pi & RVX__MLX5_IDX_MASK) << 8 | opcode);
    ctrl->qpn_ds = rvx_htobe32(qpn8 | ds);
    /* signature 0, dci_stream_channel_id 0, fm_ce_se, imm: bytes 8-15 in one store */
    {
        uint64_t tail = (uint64_t)fm_ce_se << 24 | (uint64_t)imm_be << 32;
        memcpy(&ctrl->signature, &tail, 8);
    }
}

RVX_INLINE void rvx__mlx5_set_raddr(void *seg, uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    struct mlx5_wqe_raddr_seg *r = (struct mlx5_wqe_raddr_seg *)seg;
    r->raddr = rvx_htobe64(raddr);
    memcpy(&r->rkey, &rkey->rkey_word, 8); /* rkey and the reserved word (0), one store */
}

RVX_INLINE void rvx__mlx5_set_data(void *seg, uint32_t len, uint32_t lkey, const void *addr)
{
    struct mlx5_wqe_data_seg *d = (struct mlx5_wqe_data_seg *)seg;
    d->byte_count = rvx_htobe32(len);
    d->lkey = rvx_htobe32(lkey);
    d->addr = rvx_htobe64((uint64_t)(uintptr_t)addr);
}

/* The 64 registered bytes a queue's blocking fetches land in (tl/mlx5/fetch.h), outside its
 * bounce ring, and the data segment that names them, built once with byte count 0: the fetch
 * ORs in its length. One per queue: only a fetch that finds the queue's ring idle uses it, and
 * while its READ or atomic is in flight the queue's ring is not idle or the call has not left. */
#define RVX__MLX5_FSLOT 64u
typedef struct rvx__mlx5_fslot {
    RVX_ALIGNAS(16) struct mlx5_wqe_data_seg dseg;
    uint8_t *buf;
} rvx__mlx5_fslot_t;

RVX_COLD void rvx__mlx5_fslot_init(rvx__mlx5_fslot_t *fs, uint8_t *buf, uint32_t lkey)
{
    rvx__mlx5_set_data(&fs->dseg, 0, lkey, buf);
    fs->buf = buf;
}

/* The atomic segment of ATOMIC_FA (add in swap_add, compare unused) and ATOMIC_CS, and of the
 * 8-byte masked FA (add, field boundary: the same two words). */
RVX_INLINE void rvx__mlx5_set_atomic(void *seg, uint64_t swap_add, uint64_t compare)
{
    struct mlx5_wqe_atomic_seg *a = (struct mlx5_wqe_atomic_seg *)seg;
    a->swap_add = rvx_htobe64(swap_add);
    a->compare = rvx_htobe64(compare);
}

/* Masked atomics (rdma-core keeps their segments private). The 4-byte forms take one segment:
 * CS {swap, compare, swap_mask, compare_mask}, FA {add, field_boundary, 0, 0}. */
typedef struct rvx__mlx5_masked32_seg {
    uint32_t swap_add, compare, swap_mask, compare_mask;
} rvx__mlx5_masked32_seg_t;

RVX_INLINE void rvx__mlx5_set_masked32(void *seg, uint32_t swap_add, uint32_t compare,
                                       uint32_t swap_mask, uint32_t compare_mask)
{
    rvx__mlx5_masked32_seg_t *m = (rvx__mlx5_masked32_seg_t *)seg;
    m->swap_add = rvx_htobe32(swap_add);
    m->compare = rvx_htobe32(compare);
    m->swap_mask = rvx_htobe32(swap_mask);
    m->compare_mask = rvx_htobe32(compare_mask);
}

/* The 8-byte masked CS takes two segments, {swap, compare} then {swap_mask, compare_mask}: the
 * second may wrap to the queue's start, so each half is an atomic segment of its own. */
RVX_INLINE uint8_t *rvx__mlx5_set_masked_cs64(const rvx__mlx5_sq_t *sq, uint8_t *seg, uint64_t swap,
                                              uint64_t compare, uint64_t swap_mask,
                                              uint64_t compare_mask)
{
    rvx__mlx5_set_atomic(seg, swap, compare);
    seg = rvx__mlx5_next_seg(sq, seg);
    rvx__mlx5_set_atomic(seg, swap_mask, compare_mask);
    return seg;
}

/* Inline data segment at seg: byte count, then the payload (split at the end of the queue).
 * Returns the number of 16-byte units it takes. */
RVX_INLINE unsigned rvx__mlx5_set_inline(const rvx__mlx5_sq_t *sq, void *seg, const void *src,
                                         size_t len)
{
    struct mlx5_wqe_inl_data_seg *inl = (struct mlx5_wqe_inl_data_seg *)seg;
    uint8_t *qend = rvx__mlx5_sq_end(sq);
    uint8_t *p = (uint8_t *)(inl + 1);
    inl->byte_count = rvx_htobe32((uint32_t)len | MLX5_INLINE_SEG);
    if (RVX_LIKELY(p + len <= qend)) {
        memcpy(p, src, len);
    } else {
        size_t first = (size_t)(qend - p);
        memcpy(p, src, first);
        memcpy(sq->buf, (const uint8_t *)src + first, len - first);
    }
    return RVX__MLX5_INLINE_DS(len);
}

/* The padding of a WQE's last WQEBB, from p (wrapping at the end of the queue): `bytes` zeros to
 * the end of the last segment, then `units` zero segments (the BlueFlame copy sends whole
 * WQEBBs, and the queue must hold the same bytes). */
RVX_INLINE void rvx__mlx5_zero_pad(const rvx__mlx5_sq_t *sq, uint8_t *p, size_t bytes, size_t units)
{
    uint8_t *qend = rvx__mlx5_sq_end(sq);
    if (p >= qend) p -= (size_t)(qend - sq->buf);
    while (bytes--) {
        *p++ = 0;
        if (p == qend) p = sq->buf;
    }
    for (; units; units--) {
        memset(p, 0, RVX__MLX5_SEG);
        p += RVX__MLX5_SEG;
        if (p == qend) p = sq->buf;
    }
}

/* The datagram (address) segment a DC initiator or UD QP puts after the ctrl segment, as
 * mlx5dv_set_dgram_seg writes it: the DC access key (or Q_Key), the target DCT/QP number with
 * the extended-AV flag, the route (LID, or GID and hop limit on RoCE and across subnets). */
RVX_INLINE void rvx__mlx5_set_av(void *seg, uint64_t dc_key, uint32_t dqp_dct, int ext,
                                 uint8_t stat_rate_sl, uint8_t fl_mlid, uint16_t rlid,
                                 const uint8_t *rmac, uint8_t tclass, uint8_t hop_limit,
                                 uint32_t grh_gid_fl, const uint8_t *rgid)
{
    struct mlx5_wqe_av *av = &((struct mlx5_wqe_datagram_seg *)seg)->av;
    av->key.dc_key = rvx_htobe64(dc_key);
    av->dqp_dct = rvx_htobe32((ext ? MLX5_EXTENDED_UD_AV : 0u) | dqp_dct);
    av->stat_rate_sl = stat_rate_sl;
    av->fl_mlid = fl_mlid;
    av->rlid = rvx_htobe16(rlid);
    memset(av->reserved0, 0, sizeof(av->reserved0));
    if (rmac) memcpy(av->rmac, rmac, sizeof(av->rmac));
    else memset(av->rmac, 0, sizeof(av->rmac));
    av->tclass = tclass;
    av->hop_limit = hop_limit;
    av->grh_gid_fl = rvx_htobe32(grh_gid_fl);
    if (rgid) memcpy(av->rgid, rgid, sizeof(av->rgid));
    else memset(av->rgid, 0, sizeof(av->rgid));
}

/* ---- one WQEBB in registers (x86-64) -------------------------------------------------------- */

#if defined(__x86_64__)
/* A whole WQEBB in four SSE registers, lane q[i] = bytes 16i..16i+15: built without touching
 * memory, then stored to the queue and, from the same registers, to the BlueFlame register. */
typedef struct rvx__mlx5_bb {
    __m128i q[4];
} rvx__mlx5_bb_t;

/* Bytes 0-7 of a ctrl segment with opmod 0: ctrl_word is opcode << 32 | qpn << 8 | ds, which one
 * 64-bit byte swap, with the WQE index put in bits 40-55, turns into opmod_idx_opcode (big-endian)
 * followed by qpn_ds (big-endian). */
RVX_INLINE uint64_t rvx__mlx5_ctrl_lo(uint64_t ctrl_word, uint32_t pi)
{
    return rvx_htobe64((uint64_t)(uint16_t)pi << 40 | ctrl_word);
}

/* RDMA WRITE of 8 bytes, inline, in one WQEBB (ctrl 16 + raddr 16 + inline 4 + 8, padded):
 *   q[0] ctrl: opmod_idx_opcode, qpn_ds | signature 0, stream id 0, fm_ce_se, imm 0 (`hi` is
 *        bytes 8-15 with fm_ce_se in byte 11: 0 on the fast path)
 *   q[1] raddr segment: raddr | rkey, reserved 0 (rkey_word)
 *   q[2] inline segment: byte_count (8 | MLX5_INLINE_SEG), the 8 payload bytes, 4 bytes of 0
 *   q[3] zero (the BlueFlame copy sends it, so the queue holds it too) */
RVX_INLINE void rvx__mlx5_bb_write8(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                    const void *src, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                    uint64_t hi)
{
    /* q[3], bytes 48-63: padding */
    bb->q[3] = _mm_setzero_si128();
    /* q[2], bytes 32-47: inline byte_count | the payload, shifted up 4 bytes | zeros */
    bb->q[2] = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)src), 4),
                            _mm_cvtsi32_si128((int)rvx_htobe32(8u | MLX5_INLINE_SEG)));
    /* q[1], bytes 16-31: raddr (big-endian) in the low half, rkey + reserved in the high half */
    bb->q[1] = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)rvx_htobe64(raddr))),
                                             (const double *)(const void *)&rkey->rkey_word));
    /* q[0], bytes 0-15: opmod_idx_opcode, qpn_ds in the low half; the high half (signature,
     * stream id, fm_ce_se, imm) is zero unless the WQE is signaled or fenced */
    bb->q[0] = _mm_cvtsi64_si128((long long)rvx__mlx5_ctrl_lo(ctrl_word, pi));
    if (hi) bb->q[0] = _mm_unpacklo_epi64(bb->q[0], _mm_cvtsi64_si128((long long)hi));
}

/* SEND with immediate of 8 bytes, inline, in one WQEBB, unsignaled:
 *   q[0] ctrl: opmod_idx_opcode, qpn_ds | signature, stream id, fm_ce_se all 0, imm_be
 *   q[1] inline segment: byte_count (8 | MLX5_INLINE_SEG), the 8 payload bytes, 4 bytes of 0
 *   q[2], q[3] zero */
RVX_INLINE void rvx__mlx5_bb_send8(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                   const void *body, uint32_t imm_be)
{
    /* q[2], q[3], bytes 32-63: padding */
    bb->q[2] = bb->q[3] = _mm_setzero_si128();
    /* q[1], bytes 16-31: inline byte_count | the body | zeros */
    bb->q[1] = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)body), 4),
                            _mm_cvtsi32_si128((int)rvx_htobe32(8u | MLX5_INLINE_SEG)));
    /* q[0], bytes 0-15: opmod_idx_opcode, qpn_ds | signature, stream id, fm_ce_se all 0, imm
     * (an OR with a constant high half when imm is known at compile time: one instruction) */
    bb->q[0] = _mm_or_si128(_mm_cvtsi64_si128((long long)rvx__mlx5_ctrl_lo(ctrl_word, pi)),
                            _mm_set_epi64x((long long)((uint64_t)imm_be << 32), 0));
}

/* RDMA WRITE of 8 bytes, inline, through a DC initiator with the 16-byte (base) address segment
 * av, in one WQEBB (ctrl 16 + address 16 + raddr 16 + inline 4 + 8, padded):
 *   q[0] ctrl: opmod_idx_opcode, qpn_ds | signature, stream id, fm_ce_se, imm all 0
 *   q[1] address segment: dc_key (big-endian) | dqp_dct, stat_rate_sl, fl_mlid, rlid
 *   q[2] raddr segment: raddr | rkey, reserved 0 (rkey_word)
 *   q[3] inline segment: byte_count (8 | MLX5_INLINE_SEG), the 8 payload bytes, 4 bytes of 0 */
RVX_INLINE void rvx__mlx5_bb_av_write8(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                       __m128i av, const void *src, uint64_t raddr,
                                       const rvx__mlx5_rkey_t *rkey)
{
    /* q[3], bytes 48-63: inline byte_count | the payload, shifted up 4 bytes | zeros */
    bb->q[3] = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)src), 4),
                            _mm_cvtsi32_si128((int)rvx_htobe32(8u | MLX5_INLINE_SEG)));
    /* q[2], bytes 32-47: raddr (big-endian) | rkey + reserved */
    bb->q[2] = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)rvx_htobe64(raddr))),
                                             (const double *)(const void *)&rkey->rkey_word));
    /* q[1], bytes 16-31: the address segment */
    bb->q[1] = av;
    /* q[0], bytes 0-15: opmod_idx_opcode, qpn_ds | zeros (unsignaled, no fence) */
    bb->q[0] = _mm_cvtsi64_si128((long long)rvx__mlx5_ctrl_lo(ctrl_word, pi));
}

/* The same with the address segment from the key (big-endian, a constant) and *av_lo (already
 * in the segment's byte order). */
RVX_INLINE void rvx__mlx5_bb_dc_write8(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                       uint64_t key_be, const uint64_t *av_lo, const void *src,
                                       uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    __m128i av = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)key_be)),
                                               (const double *)(const void *)av_lo));
    rvx__mlx5_bb_av_write8(bb, ctrl_word, pi, av, src, raddr, rkey);
}

/* SEND with immediate through a DC initiator with the 16-byte address segment, flen (12 to 28)
 * bytes inline from frame, in one WQEBB (ctrl 16 + address 16 + inline 4 + flen, padded):
 *   q[0] ctrl: opmod_idx_opcode, qpn_ds | signature 0, stream id 0, fm_ce_se (flags: 0 on the
 *        fast path), imm_be
 *   q[1] address segment: dc_key (big-endian, a constant) | *av_lo
 *   q[2] inline segment: byte_count (flen | MLX5_INLINE_SEG), frame bytes 0-11
 *   q[3] frame bytes 12 to flen - 1, then zeros (frame must be readable to byte 27) */
RVX_INLINE void rvx__mlx5_bb_dc_send(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                     unsigned flags, uint32_t imm_be, uint64_t key_be,
                                     const uint64_t *av_lo,
                                     const uint8_t *frame, unsigned flen)
{
    static const uint8_t keep[32] __attribute__((aligned(32))) = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    /* q[3], bytes 48-63: the frame's bytes 12.., as many as there are (a 16-byte frame, an 8-byte
     * message behind the 8-byte prefix: one 4-byte load) */
    if (__builtin_constant_p(flen) && flen == 16) {
        uint32_t w;
        memcpy(&w, frame + 12, 4);
        bb->q[3] = _mm_cvtsi32_si128((int)w);
    } else {
        bb->q[3] = _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(frame + 12)),
                                 _mm_loadu_si128((const __m128i *)(const void *)(keep + 28 - flen)));
    }
    /* q[2], bytes 32-47: inline byte_count | frame bytes 0-11 */
    bb->q[2] = _mm_or_si128(_mm_slli_si128(_mm_loadu_si128((const __m128i *)(const void *)frame), 4),
                            _mm_cvtsi32_si128((int)rvx_htobe32(flen | MLX5_INLINE_SEG)));
    /* q[1], bytes 16-31: the address segment (the key, then av_lo as stored) */
    bb->q[1] = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)key_be)),
                                             (const double *)(const void *)av_lo));
    /* q[0], bytes 0-15: opmod_idx_opcode, qpn_ds | fm_ce_se in byte 11, imm (an OR with a
     * constant high half when flags and imm are known at compile time: one instruction) */
    bb->q[0] = _mm_or_si128(_mm_cvtsi64_si128((long long)rvx__mlx5_ctrl_lo(ctrl_word, pi)),
                            _mm_set_epi64x((long long)((uint64_t)imm_be << 32 | (uint64_t)flags << 24), 0));
}

RVX_INLINE void rvx__mlx5_bb_store(uint8_t *dst, const rvx__mlx5_bb_t *bb)
{
    _mm_store_si128((__m128i *)(void *)dst, bb->q[0]);
    _mm_store_si128((__m128i *)(void *)(dst + 16), bb->q[1]);
    _mm_store_si128((__m128i *)(void *)(dst + 32), bb->q[2]);
    _mm_store_si128((__m128i *)(void *)(dst + 48), bb->q[3]);
}
#else
typedef struct rvx__mlx5_bb {
    uint64_t w[8];
} rvx__mlx5_bb_t;
#endif

/* ---- the commit point ----------------------------------------------------------------------- */

/* A count of WQEBBs no BlueFlame half holds: rvx__mlx5_commit then writes the 8-byte doorbell
 * (a constant: the test of the half's size folds away). */
#define RVX__MLX5_DB_ONLY (1u << 20)

/* The BlueFlame copy of nbb WQEBBs from the queue at wqe (wrapping at its end): whole 64-byte
 * chunks, in ascending order, never memcpy (write-combining rules). */
RVX_INLINE void rvx__mlx5_bf_copy(const rvx__mlx5_sq_t *sq, uint8_t *reg, const uint8_t *wqe,
                                  uint32_t nbb)
{
    uint32_t i;
    for (i = 0; i < nbb; i++) {
#if defined(__x86_64__)
        rvx__mlx5_bb_t bb;
        const __m128i *s = (const __m128i *)(const void *)wqe;
        bb.q[0] = _mm_load_si128(s);
        bb.q[1] = _mm_load_si128(s + 1);
        bb.q[2] = _mm_load_si128(s + 2);
        bb.q[3] = _mm_load_si128(s + 3);
        rvx__mlx5_bb_store(reg + RVX__MLX5_BB * i, &bb);
#else
        const uint64_t *s = (const uint64_t *)(const void *)wqe;
        volatile uint64_t *d = (volatile uint64_t *)(void *)(reg + RVX__MLX5_BB * i);
        unsigned k;
        for (k = 0; k < 8; k++) d[k] = s[k];
#endif
        wqe += RVX__MLX5_BB;
        if (wqe == rvx__mlx5_sq_end(sq)) wqe = sq->buf;
    }
}

/* Every post ends here. The WQE of nbb WQEBBs at wqe is complete in the queue (and, when `bb`
 * is given, its WQEBBs are also in registers, bb[0..nbb)); pi_end is the producer index past it.
 * Producer index, doorbell record, then the NIC is told: BlueFlame copy of the WQE when it fits
 * the register's half (from `bb`, or read back from the queue), else the 8-byte doorbell (the
 * ctrl segment's first 8 bytes, one 64-bit store); then the BlueFlame half flips. */
RVX_INLINE void rvx__mlx5_commit(rvx__mlx5_sq_t *sq, uint32_t pi_end, const uint8_t *wqe,
                                 uint32_t nbb, const rvx__mlx5_bb_t *bb)
{
    rvx__mlx5_bf_t *bf;
    uint8_t *reg;
    sq->pi = pi_end;
    rvx_to_device_barrier();      /* the WQE's stores before the doorbell record's */
    *sq->dbrec = rvx_htobe32(pi_end & RVX__MLX5_IDX_MASK);
    rvx_wc_start();               /* the doorbell record before the register write */
    bf = sq->bf;
    reg = bf->cur;
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
#if defined(__x86_64__)
    if (bb && (nbb == 1 || nbb * RVX__MLX5_BB <= bf->size)) { /* nbb WQEBBs in bb[] */
        uint32_t i;
        for (i = 0; i < nbb; i++) rvx__mlx5_bb_store(reg + RVX__MLX5_BB * i, &bb[i]);
    } else
#endif
    if (!(__builtin_constant_p(nbb) && nbb == RVX__MLX5_DB_ONLY) && nbb * RVX__MLX5_BB <= bf->size) {
        rvx__mlx5_bf_copy(sq, reg, wqe, nbb);
    } else
#endif
    {
        (void)nbb;
#if defined(__x86_64__)
        if (bb) *(volatile uint64_t *)(void *)reg = (uint64_t)_mm_cvtsi128_si64(bb->q[0]);
        else
#endif
        *(volatile uint64_t *)(void *)reg = *(const uint64_t *)(const void *)wqe;
    }
    rvx_wc_flush();               /* the register write leaves the WC buffer before the flip */
    bf->cur = (uint8_t *)((uintptr_t)reg ^ bf->flip);
}

/* ---- more coming: many WQEs, one doorbell ------------------------------------------------- */

/* A WQE at pi..pi_end written but not told to the NIC: the producer index passes it and it
 * becomes the newest, whose ctrl the doorbell of rvx__mlx5_ring will carry. */
RVX_INLINE void rvx__mlx5_more(rvx__mlx5_sq_t *sq, uint32_t pi, uint32_t pi_end)
{
    sq->pi = pi_end;
    sq->last = pi;
}

/* Tell the NIC every WQE written since the last doorbell: one doorbell record write, one 8-byte
 * doorbell naming the newest WQE (as libmlx5 rings a list of work requests). The record holds
 * the last index told, so a queue with nothing deferred is one compare. */
RVX_INLINE void rvx__mlx5_ring(rvx__mlx5_sq_t *sq)
{
    if (*sq->dbrec == rvx_htobe32(sq->pi & RVX__MLX5_IDX_MASK)) return;
    rvx__mlx5_commit(sq, sq->pi, rvx__mlx5_slot(sq, sq->last), RVX__MLX5_DB_ONLY, NULL);
}

/* The end of every post: with `more` (a constant), leave the WQE for the next ring; else commit
 * it, which also tells the NIC of any WQE deferred before it (the record covers them all). */
RVX_INLINE void rvx__mlx5_finish(rvx__mlx5_sq_t *sq, uint32_t pi, uint32_t nbb, const uint8_t *wqe,
                                 const rvx__mlx5_bb_t *bb, int more)
{
    if (more) rvx__mlx5_more(sq, pi, pi + nbb);
    else rvx__mlx5_commit(sq, pi + nbb, wqe, nbb, bb);
}

#if defined(__x86_64__)
/* Post one WQEBB held in registers at pi: store it to the queue, then commit from the same
 * registers (or, with `more`, leave it for the next ring). */
RVX_INLINE void rvx__mlx5_post_bb(rvx__mlx5_sq_t *sq, uint32_t pi, const rvx__mlx5_bb_t *bb,
                                  int more)
{
    uint8_t *wqe = rvx__mlx5_slot(sq, pi);
    rvx__mlx5_bb_store(wqe, bb);
    rvx__mlx5_finish(sq, pi, 1, wqe, bb, more);
}
#endif

#endif /* RVX_TL_MLX5_WQE_H */
