/* rvx/tl/mlx5/sq.h: the send queue every mlx5 transport posts to: one per peer for RC, one per
 * initiator (DCI) for DC. Its geometry as mlx5dv_init_obj reports it, the producer and retired
 * indexes, the room left, completion moderation and the fence a READ or atomic leaves; and the
 * BlueFlame register it rings. What each WQE in flight leaves to do when it retires is in
 * tx.h; how a WQE is written and committed, in wqe.h. */
#ifndef RVX_TL_MLX5_SQ_H
#define RVX_TL_MLX5_SQ_H

#include "hw.h"

/* A BlueFlame register; send queues that share one share the half toggle. `cur` is the half to
 * write next; after a write it flips by `flip` (the half size). */
typedef struct rvx__mlx5_bf {
    uint8_t  *cur;
    uintptr_t flip;
    uint8_t  *reg;
    uint32_t  size;
    struct rvx__mlx5_bf *next;  /* the owner's list of registers */
} rvx__mlx5_bf_t;

/* A send queue: the geometry mlx5dv_init_obj reports, the producer and retired indexes, and the
 * completion moderation. 56 bytes: with one word of its owner's, the cache line a put reads.
 * WQEs written with "more coming" (rvx__mlx5_more) sit between the doorbell record and pi until
 * rvx__mlx5_ring; `last` is where the newest of them starts, which the doorbell names.
 *
 * pi_limit is the one check of the one-WQEBB fast paths: before it, the queue has room and the
 * WQE at pi needs no completion. rvx__mlx5_sq_restop recomputes it wherever a term moves. */
typedef struct rvx__mlx5_sq {
    uint8_t           *buf;
    uint32_t           mask;      /* wqe_cnt - 1 */
    uint32_t           pi;        /* producer index in WQEBBs (free running) */
    uint32_t           pi_limit;  /* the fast paths go while pi is before this */
    uint32_t           sig_pi;    /* a WQE that starts here or later asks for a completion */
    volatile uint32_t *dbrec;     /* &dbrec[MLX5_SND_DBR] */
    rvx__mlx5_bf_t    *bf;        /* the register (shared by queues with the same register) */
    uint32_t           ci;        /* first WQEBB not yet known complete */
    uint16_t           room;      /* WQEBBs usable: wqe_cnt - a reserve (at most 65535) */
    uint8_t            fence;     /* fence bit for the next WQE (after a READ or atomic) */
    uint8_t            hold;      /* 1: every post takes its transport's slow path (rc_mlx5: a
                                   * conn out of the worker's flush list) */
    uint32_t           qpn8;      /* QPN << 8, to OR with DS */
    uint32_t           last;      /* the newest WQE's start (pi of it), for a deferred doorbell */
} rvx__mlx5_sq_t;

RVX_STATIC_ASSERT(sizeof(rvx__mlx5_sq_t) == 56, "a send queue is 56 bytes");

/* ---- the queue ------------------------------------------------------------------------------ */

RVX_INLINE uint8_t *rvx__mlx5_sq_end(const rvx__mlx5_sq_t *sq)
{
    return sq->buf + ((size_t)(sq->mask + 1) << RVX__MLX5_BB_SHIFT);
}

RVX_INLINE uint8_t *rvx__mlx5_slot(const rvx__mlx5_sq_t *sq, uint32_t pi)
{
    return sq->buf + ((size_t)(pi & sq->mask) << RVX__MLX5_BB_SHIFT);
}

/* The next 16-byte segment after seg, wrapping at the end of the queue. */
RVX_INLINE uint8_t *rvx__mlx5_next_seg(const rvx__mlx5_sq_t *sq, uint8_t *seg)
{
    seg += RVX__MLX5_SEG;
    return seg == rvx__mlx5_sq_end(sq) ? sq->buf : seg;
}

/* The queue itself has room for nbb more WQEBBs. */
RVX_INLINE int rvx__mlx5_sq_room_for(const rvx__mlx5_sq_t *sq, uint32_t nbb)
{
    return sq->pi - sq->ci + nbb <= sq->room;
}

/* Where the fast paths stop: at pi while held, else at the end of the room or at the WQE that must
 * ask for a completion, whichever comes first. */
RVX_INLINE void rvx__mlx5_sq_restop(rvx__mlx5_sq_t *sq)
{
    uint32_t end = sq->ci + sq->room;
    if (sq->hold) end = sq->pi;
    else if ((int32_t)(sq->sig_pi - end) < 0) end = sq->sig_pi;
    sq->pi_limit = end;
}

/* fm_ce_se for the WQE at pi: CE once the WQE starts at the mark, RVX_MLX5_SIG_EVERY WQEBBs after
 * the last WQE that reached it (or when forced), with the fence a READ or atomic left for
 * whatever follows it. Only the WQE at the mark moves it on, and the fast paths' limit with it. */
RVX_INLINE unsigned rvx__mlx5_moderate(rvx__mlx5_sq_t *sq, int force_sig)
{
    unsigned f;
    int at_mark = (int32_t)(sq->pi - sq->sig_pi) >= 0;
    if (RVX_LIKELY(!at_mark) && !force_sig) return 0;
    f = RVX__MLX5_CE | sq->fence;
    sq->fence = 0;
    if (at_mark) { /* forced before it (a request, a READ), the mark stays where it was */
        sq->sig_pi = sq->pi + RVX_MLX5_SIG_EVERY;
        rvx__mlx5_sq_restop(sq);
    }
    return f;
}

/* A READ or an atomic was posted: the next WQE carries the fence (and, to keep the put path to
 * one limit test, is also signaled). */
RVX_INLINE void rvx__mlx5_set_fence(rvx__mlx5_sq_t *sq)
{
    sq->fence = RVX__MLX5_FENCE;
    sq->sig_pi = sq->pi;
    sq->pi_limit = sq->pi; /* what sq_restop gives: the mark is at pi, the room past it */
}

#endif /* RVX_TL_MLX5_SQ_H */
