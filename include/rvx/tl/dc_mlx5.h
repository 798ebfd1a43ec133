/* rvx/tl/dc_mlx5.h: dynamically connected transport on an NVIDIA ConnectX (mlx5), driven directly.
 *
 * The transport for large jobs: what a process holds does not grow with the number of ranks.
 * Set-up goes through rdma-core (mlx5dv_create_qp with the DC attributes); the data path writes
 * WQEs with the shared mlx5 layer (tl/mlx5/: segment writers, the one commit point, CQ reading),
 * adding the address segment that names the target of each WQE.
 *
 * Objects
 *   ctx    one ibv_context and PD per process (tl/mlx5/setup.h, as rc_mlx5)
 *   iface  per worker: one CQ, one DCT (the target every peer writes to) on a small SRQ, a pool of
 *          RVX_DC_NUM_DCI initiators (DCIs) with one registered bounce ring each. The CQ takes
 *          every WQE the DCIs can hold, never a figure per rank. Its address: DCT number, LID
 *          or GID, control region (48 bytes exchanged, 24 kept per rank after wire-up).
 *   ep     per peer only the address segment's bytes 8-15 (built once when the endpoint is
 *          created, no verbs call; the DC key is one constant), the DCI it holds (or the
 *          always-full no_dci), its status and, with messages, its credits.
 *
 * An endpoint holds a DCI while it has work outstanding, so its WQEs execute in order; a DCI whose
 * holder's work has all completed goes to the next endpoint that needs one (tl/dc/dci.h). An error
 * CQE fails the endpoint that held the DCI, and the DCI recovers (tl/dc/cq.h). Messages are SENDs
 * to the peer's DCT, on credits claimed from the peer's pool of receive buffers and given back
 * when the endpoint goes idle (tl/dc/credit.h argues why the shared receive queue is never
 * overrun).
 *
 * The files, in the order they are included (each uses only those before it, and what comes
 * later only through the prototypes of decl.h):
 *   dc/decl.h    constants, types (address, DCI, endpoint, iface, credit records), prototypes
 *   dc/dci.h     the DCI pool and posting on a DCI: the address segment, the WQE prologue and
 *                commit, which DCI a WQE goes to, bounce rings, the DCI's states and recovery
 *   dc/rma.h     put, get and the atomics (and the compare-and-swap loop the NIC lacks); its
 *                steps of the chunk loops of tl/mlx5/chunk.h, of the batch scope of
 *                tl/mlx5/batch.h and of the blocking fetches of tl/mlx5/fetch.h, which it
 *                includes
 *   dc/credit.h  credits: a frame's claim, the send limit, claims on a peer's pool, give-back
 *   dc/am.h      messages out: publishing a frame (the SEND), zero-copy sends, a reply's wait
 *   dc/cq.h      the CQ and the DCT: retiring WQEs, error CQEs, frames received, progress
 *   dc/iface.h   the iface and endpoints: init, wire-up, connect, disconnect, flush, keepalive */
#ifndef RVX_TL_DC_MLX5_H
#define RVX_TL_DC_MLX5_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#include "contract.h"
#define RVX__MLX5_TL "dc_mlx5"
#include "mlx5/hw.h"
#include "mlx5/rkey.h"
#include "mlx5/sq.h"
#include "mlx5/wqe.h"
#include "mlx5/cq.h"
#include "mlx5/tx.h"
#include "mlx5/amo.h"
#include "mlx5/rdma.h"
#include "mlx5/srq.h"
#include "mlx5/setup.h"

#include "dc/decl.h"
#include "dc/dci.h"
#include "dc/rma.h"
#include "dc/credit.h"
#include "dc/am.h"
#include "dc/cq.h"
#include "dc/iface.h"

#endif /* RVX_TL_DC_MLX5_H */
