/* rvx/tl/mlx5/cq.h: reading an mlx5 completion queue directly (hot), and what an error CQE
 * means (cold).
 *
 * The CQE at free-running consumer index ci is in slot ci & (cqe_cnt - 1); it is valid when its
 * opcode is not MLX5_CQE_INVALID and its owner bit equals the pass parity !!(ci & cqe_cnt). Its
 * other bytes are read only after that check and a read barrier. After a batch, the consumer
 * index goes to the CQ's doorbell record so that the NIC may reuse the slots. */
#ifndef RVX_TL_MLX5_CQ_H
#define RVX_TL_MLX5_CQ_H

#include "wqe.h"

typedef struct rvx__mlx5_cq {
    const volatile uint8_t *next_op_own; /* op_own of the CQE at the consumer index */
    uint32_t           owner;  /* the owner bit a valid CQE there has: pass parity of ci */
    uint32_t           stride; /* bytes from one CQE to the next: 1 << shift */
    uint8_t           *buf;    /* first CQE's 64-byte part (the second half of 128-byte CQEs) */
    uint32_t           ci;
    uint32_t           mask;
    uint32_t           shift;  /* log2(CQE size) */
    uint32_t           cnt;    /* entries: the owner bit of pass n is (ci & cnt) != 0 */
    volatile uint32_t *dbrec;  /* &dbrec[0]: the consumer index (SET_CI) */
} rvx__mlx5_cq_t;

RVX_INLINE struct mlx5_cqe64 *rvx__mlx5_cqe(const rvx__mlx5_cq_t *cq, uint32_t ci)
{
    return (struct mlx5_cqe64 *)(void *)(cq->buf + ((size_t)(ci & cq->mask) << cq->shift));
}

/* Valid iff the owner bit is this pass's and the opcode is not INVALID (0xf): after the xor the
 * low bit is 0 and the value is below 0xf0. */
RVX_INLINE int rvx__mlx5_cqe_ready(const rvx__mlx5_cq_t *cq, uint8_t op_own)
{
    unsigned t = op_own ^ cq->owner;
    return !(t & RVX__MLX5_OWNER_BIT) && t < RVX__MLX5_OP_INVALID;
}

/* The CQE at the consumer index is a successful requester completion (opcode MLX5_CQE_REQ) of
 * this pass: owner bit and opcode in one test. */
RVX_INLINE int rvx__mlx5_cqe_req_ok(const rvx__mlx5_cq_t *cq, const struct mlx5_cqe64 *cqe)
{
    return ((cqe->op_own ^ cq->owner) & RVX__MLX5_REQ_OK_MASK) == 0;
}

/* The consumer index moves on: where the next CQE's op_own is, and which owner bit it needs. */
RVX_INLINE void rvx__mlx5_cq_advance(rvx__mlx5_cq_t *cq)
{
    uint32_t ci = ++cq->ci;
    cq->next_op_own = &rvx__mlx5_cqe(cq, ci)->op_own;
    cq->owner = !!(ci & cq->cnt);
}

/* After a batch: the NIC may write the slots consumed. */
RVX_INLINE void rvx__mlx5_cq_update_ci(rvx__mlx5_cq_t *cq)
{
    *cq->dbrec = rvx_htobe32(cq->ci & RVX__MLX5_CQ_CI_MASK);
}

RVX_INLINE uint32_t rvx__mlx5_cqe_qpn(const struct mlx5_cqe64 *cqe)
{
    return rvx_htobe32(cqe->sop_drop_qpn) & RVX__MLX5_QPN_MASK;
}

/* The free-running index of the WQE a CQE names by its 16-bit wqe_counter, at or after ci. */
RVX_INLINE uint32_t rvx__mlx5_wqe_start(const rvx__mlx5_sq_t *sq, uint16_t wqe_counter)
{
    return sq->ci + (uint16_t)(wqe_counter - (uint16_t)sq->ci);
}

/* Everything before end has completed: the space is the producer's again. */
RVX_INLINE void rvx__mlx5_sq_retired(rvx__mlx5_sq_t *sq, uint32_t end)
{
    sq->ci = end;
    rvx__mlx5_sq_restop(sq);
}

/* ---- error CQEs (cold) ---------------------------------------------------------------------- */

/* What an error syndrome means for the operation: the target refused it, the peer is gone, it
 * was flushed after an earlier error, or something else went wrong. */
RVX_COLD rvx_status_t rvx__mlx5_syndrome_status(unsigned synd)
{
    switch (synd) {
    case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR:
    case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:
        return RVX_ERR_REMOTE_ACCESS;
    case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR:
    case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR:
    case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR:
        return RVX_ERR_PEER_FAILED;
    case MLX5_CQE_SYNDROME_WR_FLUSH_ERR:
        return RVX_ERR_CANCELED;
    default:
        return RVX_ERR_IO;
    }
}

RVX_COLD const char *rvx__mlx5_syndrome_str(unsigned synd)
{
    switch (synd) {
    case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR:        return "local length error";
    case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR:         return "local QP operation error";
    case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR:          return "local protection error";
    case MLX5_CQE_SYNDROME_WR_FLUSH_ERR:            return "work request flushed";
    case MLX5_CQE_SYNDROME_BAD_RESP_ERR:            return "bad response";
    case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR:        return "local access error";
    case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:    return "remote invalid request";
    case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR:       return "remote access error";
    case MLX5_CQE_SYNDROME_REMOTE_OP_ERR:           return "remote operation error";
    case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: return "transport retries exceeded";
    case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR:       return "RNR retries exceeded";
    case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR:      return "remote aborted";
    }
    return "error";
}

#endif /* RVX_TL_MLX5_CQ_H */
