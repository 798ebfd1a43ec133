/* rvx/tl/mlx5/amo.h: rvx's atomic operations as the NIC's, for every mlx5 transport.
 *
 * A ConnectX has two native 64-bit atomics (fetch-add, compare-and-swap) and their masked forms
 * (extended atomics: 4 or 8 bytes, with masks): every rvx_amo_op_t but five is one of them
 * (proto/amo.h lists the mapping). The five (MULT, MIN, MAX, UMIN, UMAX) have no NIC form and
 * run as a compare-and-swap loop, whose next value rvx__mlx5_amo_next computes. */
#ifndef RVX_TL_MLX5_AMO_H
#define RVX_TL_MLX5_AMO_H

#include "hw.h"

/* One NIC atomic: the opcode (0: none, a compare-and-swap loop) and the operands of its
 * segment(s): swap/add a, compare/boundary b, and for the masked forms the swap and compare
 * masks. */
typedef struct rvx__mlx5_amo {
    unsigned opcode;
    uint64_t a, b, amask, bmask;
} rvx__mlx5_amo_t;

/* op on a size-byte word (4 or 8) with operand v and compare value cmp. Inline: with op and size
 * constants at the call, as they mostly are, the whole switch folds to the one case. */
RVX_INLINE rvx__mlx5_amo_t rvx__mlx5_amo_map(rvx_amo_op_t op, unsigned size, uint64_t v,
                                             uint64_t cmp)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull;
    /* the adds: native 64-bit fetch-add; 32-bit through masked fetch-add without boundaries */
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    rvx__mlx5_amo_t m = {0, 0, 0, 0, 0};
    switch (op) {
    case RVX_AMO_ADD: m.opcode = fa; m.a = v; break;
    case RVX_AMO_SUB: m.opcode = fa; m.a = (0 - v) & ones; break;
    case RVX_AMO_INC: m.opcode = fa; m.a = 1; break;
    case RVX_AMO_DEC: m.opcode = fa; m.a = ones; break;
    case RVX_AMO_GET: m.opcode = fa; m.a = 0; break;
    case RVX_AMO_CAS:
        if (size == 8) { /* native compare-and-swap */
            m.opcode = MLX5_OPCODE_ATOMIC_CS; m.a = v; m.b = cmp;
        } else { /* masked: compare and replace all 32 bits */
            m.opcode = MLX5_OPCODE_ATOMIC_MASKED_CS; m.a = v; m.b = cmp; m.amask = ones; m.bmask = ones;
        }
        break;
    case RVX_AMO_SET:
    case RVX_AMO_SWAP: /* compare nothing, replace every bit */
        m.opcode = MLX5_OPCODE_ATOMIC_MASKED_CS; m.a = v; m.amask = ones;
        break;
    case RVX_AMO_AND: /* clear the bits that are 0 in v */
        m.opcode = MLX5_OPCODE_ATOMIC_MASKED_CS; m.amask = ~v & ones;
        break;
    case RVX_AMO_OR: /* set the bits that are 1 in v */
        m.opcode = MLX5_OPCODE_ATOMIC_MASKED_CS; m.a = v; m.amask = v;
        break;
    case RVX_AMO_XOR: /* masked fetch-add with a field boundary at every bit: no carries */
        m.opcode = MLX5_OPCODE_ATOMIC_MASKED_FA; m.a = v; m.b = ones;
        break;
    default: /* MULT, MIN, MAX, UMIN, UMAX: a compare-and-swap loop (opcode 0) */
        break;
    }
    return m;
}

/* MULT, MIN, MAX, UMIN, UMAX as a compare-and-swap loop computes them: the value to swap in for
 * old. 0: not one of those. */
RVX_COLD int rvx__mlx5_amo_next(rvx_amo_op_t op, unsigned size, uint64_t old, uint64_t v,
                                uint64_t *nv)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull;
    int64_t so = size == 8 ? (int64_t)old : (int64_t)(int32_t)(uint32_t)old;
    int64_t sv = size == 8 ? (int64_t)v : (int64_t)(int32_t)(uint32_t)v;
    switch (op) {
    case RVX_AMO_MULT: *nv = old * v; break;
    case RVX_AMO_MIN:  *nv = so < sv ? old : v; break;
    case RVX_AMO_MAX:  *nv = so > sv ? old : v; break;
    case RVX_AMO_UMIN: *nv = old < v ? old : v; break;
    case RVX_AMO_UMAX: *nv = old > v ? old : v; break;
    default: return 0;
    }
    *nv &= ones;
    return 1;
}

#endif /* RVX_TL_MLX5_AMO_H */
