/* rvx/tl/rc_mlx5.h: reliable-connected queue pairs on an NVIDIA ConnectX (mlx5), driven directly.
 * Read this file first: it says how the transport works and where each part of it is.
 *
 * Set-up goes through rdma-core (ibv_* and mlx5dv_*: device, PD, CQ, QPs, memory registration);
 * the data path writes WQEs into the send queue, the doorbell record and the BlueFlame register
 * itself, and reads CQEs straight from the completion queue, as mlx5dv(7) allows. What every mlx5
 * transport shares is in tl/mlx5/: hardware values (hw.h), segment writers and the one commit
 * point (wqe.h), CQ polling (cq.h), the RDMA and atomic WQEs (rdma.h), the chunk loops, the batch
 * scope and the blocking fetches (chunk.h, batch.h, fetch.h, included from rc/rma.h), device
 * set-up (setup.h). Each worker has, per lane, one iface:
 * one CQ, one shared receive queue, one RC QP per rank of the job (all taken to RTS when the
 * worker is created) and a UD QP for re-connection; an endpoint points to the conn of its peer.
 * An operation is one WQE, seldom signaled; a full queue or an exhausted send budget is waited out
 * inside the call. Messages are SENDs with immediate into the shared receive queue, under credits
 * the receiver writes back into the sender's memory. An error CQE fails the conn; the next
 * rvx_ep_create re-connects it.
 *
 * Files (tl/rc/), in the order they are included; each holds one concern, hot and cold code
 * together, and uses only the files above it (what it calls further down, through decl.h):
 *   decl.h       constants, types, a conn's rank and error, the clock; prototypes
 *   conn.h       the QPN -> rank table, the list of conns with work, QPs and conns, connecting
 *   send.h       room on the send queue and the worker's send budget; signaled WQEs; waiting
 *   bounce.h     the bounce pool copies go through
 *   rma.h        puts (the 8-byte put, inline, copied, zero-copy) and gets; the steps of
 *                tl/mlx5/chunk.h, batch.h and fetch.h, which it includes
 *   amo.h        atomics: one WQE, the operation mapping, the compare-and-swap loop
 *   am.h         messages, sending side: claim, publish, zero-copy, waiting for a credit
 *   rx.h         messages, receiving side: frames delivered or set aside, credits returned
 *   cq.h         the CQ poll: retirement, error CQEs, receives; progress's slow path
 *   iface.h      the iface, wire-up, endpoints, progress, flushes, liveness
 *   hello.h      the hello QP: re-connection messages, the peers' addresses, failed QPs
 *   reconnect.h  re-connection of a failed conn, agreed over the hello QP */
#ifndef RVX_TL_RC_MLX5_H
#define RVX_TL_RC_MLX5_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#include "contract.h"
#define RVX__MLX5_TL "rc_mlx5"
#include "mlx5/hw.h"
#include "mlx5/rkey.h"
#include "mlx5/sq.h"
#include "mlx5/wqe.h"
#include "mlx5/cq.h"
#include "mlx5/tx.h"
#include "mlx5/amo.h"
#include "mlx5/rdma.h"
#include "mlx5/setup.h"
#include "mlx5/srq.h"

#include "rc/decl.h"
#include "rc/conn.h"
#include "rc/send.h"
#include "rc/bounce.h"
#include "rc/rma.h"
#include "rc/amo.h"
#include "rc/am.h"
#include "rc/rx.h"
#include "rc/cq.h"
#include "rc/iface.h"
#include "rc/hello.h"
#include "rc/reconnect.h"

#endif /* RVX_TL_RC_MLX5_H */
