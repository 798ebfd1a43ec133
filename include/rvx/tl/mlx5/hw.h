/* rvx/tl/mlx5/hw.h: the mlx5 hardware values the transports use, by name.
 *
 * rdma-core's mlx5dv.h names the segment structs, opcodes and syndromes; what it leaves as bare
 * numbers (segment units, the masked-atomic opmod, the 16-bit WQE index) or does not cover (the
 * QP attribute values rvx chooses) is named here, once, for every mlx5 transport. */
#ifndef RVX_TL_MLX5_HW_H
#define RVX_TL_MLX5_HW_H

#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

/* A failed endpoint's status as rvx_ep_status gives it (err: the status that failed it): a remote
 * access error came from a peer that answered, anything else means the peer cannot be reached. */
#define RVX__MLX5_EP_FAILURE(err) \
    ((err) == RVX_ERR_REMOTE_ACCESS ? RVX_ERR_REMOTE_ACCESS : RVX_ERR_PEER_FAILED)

/* The transport named in log lines; the tl that includes this layer sets it first. */
#ifndef RVX__MLX5_TL
#define RVX__MLX5_TL "mlx5"
#endif

/* ---- send queue geometry -------------------------------------------------------------------- */
#define RVX__MLX5_BB_SHIFT   6                 /* a WQE basic block (WQEBB) is 64 bytes */
#define RVX__MLX5_BB         (1u << RVX__MLX5_BB_SHIFT)
#define RVX__MLX5_SEG        16u               /* DS counts 16-byte units, ctrl included */
#define RVX__MLX5_IDX_MASK   0xffffu           /* WQE index in ctrl, SQ doorbell record: 16 bits */
#define RVX__MLX5_QPN_MASK   0xffffffu         /* QPN field of a CQE's sop_drop_qpn */
#define RVX__MLX5_CQ_CI_MASK 0xffffffu         /* CQ doorbell record: 24-bit consumer index */

/* 16-byte units of an inline segment of len bytes (4-byte header, payload, padded to 16). */
#define RVX__MLX5_INLINE_DS(len) ((unsigned)((4 + (len) + 15) / 16))
/* WQEBBs of a WQE of ds units. */
#define RVX__MLX5_NBB(ds)        (((ds) + 3) / 4)
/* Payload bytes that go inline in one WQEBB beside a ctrl segment: 64 - 16 - 4. */
#define RVX__MLX5_BB_INLINE_MAX  44u

/* DS of the fixed WQE shapes (ctrl 1 + raddr 1 + atomic 1 (2 for masked CS 8) + data 1). */
#define RVX__MLX5_DS_NOP        1u  /* ctrl */
#define RVX__MLX5_DS_RDMA_NODATA 2u /* ctrl, raddr (a zero-length WRITE) */
#define RVX__MLX5_DS_RDMA       3u  /* ctrl, raddr, data */
#define RVX__MLX5_DS_ATOMIC     4u  /* ctrl, raddr, atomic, data */
#define RVX__MLX5_DS_MASKED_CS8 5u  /* ctrl, raddr, 32-byte masked compare-swap, data */

/* ---- ctrl segment --------------------------------------------------------------------------- */
#define RVX__MLX5_CE     MLX5_WQE_CTRL_CQ_UPDATE /* fm_ce_se: write a CQE on success */
#define RVX__MLX5_FENCE  MLX5_WQE_CTRL_FENCE     /* fm_ce_se: wait for earlier READs/atomics */
/* opmod of the masked (extended) atomics: 0x08 | log2(operand bytes) - 2 */
#define RVX__MLX5_OPMOD_MASKED(size) ((size) == 8 ? 0x09u : 0x08u)
/* Largest byte count of one data segment rvx posts (the field has 31 bits). */
#define RVX__MLX5_DSEG_MAX (1u << 30)

/* ---- QP attributes -------------------------------------------------------------------------- */
#define RVX__MLX5_PSN           0x1000u /* first packet sequence number, send and receive */
#define RVX__MLX5_RD_ATOMIC     16      /* READs/atomics in flight, as initiator and as target */
#define RVX__MLX5_MIN_RNR_TIMER 12      /* 0.64 ms (IB encoding); RNR does not happen with credits */
#ifndef RVX__MLX5_RNR_RETRY /* a test may set 0: an RNR NAK is then an error */
#define RVX__MLX5_RNR_RETRY     7       /* 7: retry without limit */
#endif
#define RVX__MLX5_HOP_LIMIT     64      /* RoCE GRH hop limit */
#define RVX__MLX5_REMOTE_ACCESS \
    (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define RVX__MLX5_ACCESS (IBV_ACCESS_LOCAL_WRITE | RVX__MLX5_REMOTE_ACCESS)

/* ---- completion queue ----------------------------------------------------------------------- */
#define RVX__MLX5_CQE64      64u  /* mlx5_cqe64 is the last 64 bytes of a 64- or 128-byte CQE */
/* op_own: opcode [7:4], owner [0]. A CQE is valid when its owner bit is this pass's and its
 * opcode not MLX5_CQE_INVALID (0xf): after xor with the pass bit, low bit 0 and below 0xf0. */
#define RVX__MLX5_OWNER_BIT  0x01u
#define RVX__MLX5_OP_INVALID ((unsigned)MLX5_CQE_INVALID << 4)
/* op_own bits that, xor the pass bit, are 0 for a successful requester CQE (MLX5_CQE_REQ = 0). */
#define RVX__MLX5_REQ_OK_MASK 0xf1u

#endif /* RVX_TL_MLX5_HW_H */
