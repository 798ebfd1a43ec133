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
 * Which DCI an endpoint uses. An endpoint takes a DCI on its first operation and holds it while it
 * has work outstanding: its WQEs go to one send queue, so they execute in the order posted, and
 * flush and fence mean what they mean on rc_mlx5. Once all its work has completed the DCI may be
 * taken by another endpoint (lazily, when one needs a DCI and none is free); an endpoint that
 * finds its DCI taken gets another, after its earlier work, so order is kept. Fairness: an
 * endpoint that keeps posting keeps its DCI; with more busy endpoints than DCIs, the others wait.
 * A full pool: a put that needs a DCI while every DCI holds outstanding work asks each for a
 * completion (a signaled NOP after an unsignaled tail) and polls the CQ until one retires all its
 * work; it waits there (inside the call) and never returns RVX_ERR_NO_RESOURCE.
 * RVX_DC_DCI_POLICY=RVX_DC_DCI_FIXED instead maps an endpoint to DCI rank % RVX_DC_NUM_DCI for
 * good: the ranks on one DCI share its queue and its order, a post waits only for room on it,
 * and an error fails the endpoint whose WQE failed and those whose WQEs were flushed behind it.
 *
 * Errors. An error CQE fails the operation it names (remote access -> RVX_ERR_REMOTE_ACCESS,
 * retries exhausted -> RVX_ERR_PEER_FAILED), marks the endpoint that held the DCI failed, and the
 * WQEs after it complete with RVX_ERR_CANCELED. When all of them have come back, the DCI goes
 * RESET -> INIT -> RTR -> RTS and back to the pool: other endpoints are not affected.
 *
 * Messages are SENDs to the peer's DCT, on credits claimed from the peer's pool of receive
 * buffers and given back when the endpoint goes idle (tl/dc/poll.h argues why the shared receive
 * queue is never overrun). */
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
#include "mlx5/srq.h"
#include "mlx5/setup.h"

#define RVX__DC_KEY        0x7276784443000001ull /* the DC access key of every rvx DCT */
#define RVX__DC_SQ_RESERVE 4u                    /* WQEBBs kept for a flush NOP */
#define RVX__DC_AV_BASE    16u                   /* the address segment without GRH (IB) */
#define RVX__DC_AV_EXT     48u                   /* with GRH (RoCE): mlx5_wqe_datagram_seg */
/* Which DCI an endpoint's WQEs go to (see the top of this file). */
#define RVX_DC_DCI_POOLED 0 /* held while work is outstanding, handed over when done (default) */
#define RVX_DC_DCI_FIXED  1 /* always DCI rank % RVX_DC_NUM_DCI, shared with the ranks alike */
#ifndef RVX_DC_DCI_POLICY
#define RVX_DC_DCI_POLICY RVX_DC_DCI_POOLED
#endif
#if RVX_DC_DCI_POLICY != RVX_DC_DCI_POOLED && RVX_DC_DCI_POLICY != RVX_DC_DCI_FIXED
#error "RVX_DC_DCI_POLICY must be RVX_DC_DCI_POOLED or RVX_DC_DCI_FIXED"
#endif

/* Credits an endpoint holds at a peer go back once it has sent nothing for one to two of these
 * intervals (microseconds), or at once when a claim of this worker finds a pool empty. */
#ifndef RVX_DC_CREDIT_IDLE_US
#define RVX_DC_CREDIT_IDLE_US 1000
#endif
#define RVX__DC_TICK       256u                  /* empty progress calls between looks at the clock */
#if RVX_CAN_RECEIVE
#define RVX__DC_RX_DEPTH   RVX_DC_RX_DEPTH
#define RVX__DC_FRAME      RVX_MLX5_FRAME
#else
#define RVX__DC_RX_DEPTH   16u                   /* nothing arrives unasked: a token SRQ */
#define RVX__DC_FRAME      64u
#endif

/* ---- types ---------------------------------------------------------------------------------- */

/* A worker's address: everything a peer needs to reach its DCT, and its control region (the
 * credit pool and the words where peers return credits), 48 bytes as exchanged. The worker keeps
 * only the first 24 after wire-up (RVX__DC_ADDR_KEPT): the control region, which the cold paths
 * read, and what an endpoint's address segment is built from (the DCT number, the LID on IB, the
 * GID's low 8 bytes on RoCE). The rest is read once, at wire-up: the magic and link layer are
 * checked there, and the GID's top 8 bytes (the subnet prefix on IB, ::ffff:0:0/96's top on RoCE
 * v2 with IPv4) are kept once when every rank has the same, per rank otherwise. */
typedef struct rvx__dc_addr {
    uint64_t ctrl_addr;
    uint32_t ctrl_rkey;
    uint32_t dctn;
    union {
        uint16_t lid;       /* IB */
        uint8_t  gid_lo[8]; /* RoCE: GID bytes 8-15 */
    } at;
    uint8_t  gid_hi[8];     /* RoCE: GID bytes 0-7 (not kept per rank when shared) */
    uint64_t magic;
    uint8_t  is_roce;
    uint8_t  pad[7];
} rvx__dc_addr_t;
#define RVX__DC_ADDR_SIZE(n) sizeof(rvx__dc_addr_t)
#define RVX__DC_ADDR_KEPT(n) offsetof(rvx__dc_addr_t, gid_hi) /* after wire-up, 24 bytes a rank */
RVX_STATIC_ASSERT(offsetof(rvx__dc_addr_t, gid_hi) == 24 && sizeof(rvx__dc_addr_t) == 48,
                  "dc_mlx5's address: 24 bytes kept per rank of the 48 exchanged");

struct rvx__dc_iface;
struct rvx__dc_ep;

/* One initiator of the pool. */
typedef struct rvx__dc_dci {
    rvx__mlx5_sq_t        sq;
    struct rvx__dc_ep    *ep;          /* the endpoint holding it, or NULL */
    struct rvx__dc_iface *ifc;
    rvx__mlx5_txops_t     tx;          /* op records, signaled counts, pending flushes */
    uint32_t              wflush_pi;   /* a worker flush waits for ci to reach this */
    uint64_t              ctrl_w8;     /* RDMA_WRITE << 32 | qpn << 8 | 4: a put8's first ctrl
                                        * word before the byte swap (0: no one-WQEBB put8, the
                                        * address segment is the 48-byte form) */
    uint64_t              ctrl_send;   /* the same for a one-WQEBB SEND_IMM (0 likewise) */
    uint32_t              pi_fast;     /* the one-WQEBB fast paths go while pi is before this:
                                        * sq.pi_limit as of the last completion, or (no
                                        * one-WQEBB form, failed) pi then, already reached */
    uint8_t               failed;      /* in ERR: its WQEs come back flushed, then it recovers */
    rvx_status_t          fail_st;     /* the status of the error CQE that failed it */
    uint8_t               am_claim;    /* a frame claimed in its bounce ring is not published yet:
                                        * the DCI stays with its endpoint */
    uint8_t              *bounce;      /* its slice of the iface's registered bounce memory */
    uint64_t              b_head, b_tail;
    const struct rvx__dc_ep *ka_ep;    /* the endpoint whose keepalive went last on it, and pi */
    uint32_t              ka_pi;       /* after it: in flight while ci is before this */
    struct ibv_qp        *qp;
    uint32_t              qpn;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    struct rvx__dc_ep   **owner;       /* per WQEBB slot, the endpoint whose WQE starts there:
                                        * an error CQE fails it (the DCI is shared) */
#endif
} rvx__dc_dci_t;

/* Per peer, always: what a post needs to reach a DCI and name the target (the DCI held, the
 * iface, the address segment's bytes 8-15, av_lo: the DC key in bytes 0-7 is the same for every
 * rvx DCT, RVX__DC_KEY, and comes from the code), 24 bytes; with
 * messages, the send credits (frames that may go before looking further, frames sent in all once
 * they are spent, the peer's report of frames it took); the rank, the status, and when the last
 * keepalive went (milliseconds, wrapping). The rest of the address (GID, the control region) is
 * read from the worker's kept copy (24 bytes a rank); what only an endpoint with credits or failed
 * claims needs lives in the iface's records (rvx__dc_hold_t, rvx__dc_backoff_t), what must
 * outlive the endpoint in rvx__dc_peer_t. 48 bytes with messages, 40 without (asserted below).
 * Addressing per peer: av_lo 8 + the kept address 24 = 32 bytes (40 on RoCE when the ranks' GIDs
 * differ in their top 8 bytes). */
typedef struct rvx__dc_ep {
    rvx__dc_dci_t        *dci;         /* &ifc->no_dci when it holds none */
    struct rvx__dc_iface *ifc;
    uint64_t              av_lo;       /* address segment bytes 8-15 as the WQE holds them */
#if RVX_CAN_RECEIVE
    uint32_t              tx_left;     /* frames that may go before looking further */
    uint32_t              tx_limit;    /* frames sent in all once tx_left is spent */
    uint32_t              piggy;       /* frames of ours the peer said it took: the largest report
                                        * taken (a message's, or the control region's) */
#endif
    int                   rank;
    uint8_t               failed;
    int8_t                err;         /* an rvx_status_t: RVX_OK, or why the endpoint failed */
    uint8_t               live;
    uint8_t               holding;     /* in the worker's records of credit holders */
    uint32_t              ka_ms;       /* when the last keepalive went (ms, rvx__dc_ms) */
} rvx__dc_ep_t;

#if RVX_CAN_RECEIVE
/* The upcall a received frame goes to: defined above this transport (tl/bind.h hands it to the
 * protocols' rvx__rx_deliver; a pair, tl/pair.h, first finds its own endpoint). */
RVX_INLINE void rvx__dc_rx_deliver(rvx__dc_ep_t *ep, unsigned chan, unsigned info, void *body,
                                size_t len);
#endif

/* The per-peer part stays this small (what scale.sh measures per added rank). */
#if defined(__x86_64__) || defined(__aarch64__)
RVX_STATIC_ASSERT(sizeof(rvx__dc_ep_t) == (RVX_CAN_RECEIVE ? 48 : 40),
                  "dc_mlx5's endpoint: av_lo, the DCI, credits, rank and status only");
RVX_STATIC_ASSERT(sizeof(((rvx__dc_ep_t *)0)->av_lo) + RVX__DC_ADDR_KEPT(0) <= 32,
                  "dc_mlx5's addressing per peer: at most 32 bytes");
#endif

/* An endpoint holding credits at its peer, as the sweep sees it: frames sent at the last sweep. */
typedef struct rvx__dc_hold {
    struct rvx__dc_ep *ep;
    uint32_t           mark;
    uint32_t           pad;
} rvx__dc_hold_t;

/* A rank whose pool was found empty: no claim on it before `after`, then a wait of `gap` (doubles,
 * capped). Dropped at the next claim that succeeds. */
typedef struct rvx__dc_backoff {
    int    rank;
    int    pad;
    double after;
    double gap;
} rvx__dc_backoff_t;

/* Per rank, what outlives an endpoint: frames sent, the credits taken from the rank's pool, and
 * how many of its frames taken here were last reported to it (the count itself is in the control
 * region, where the rank can read it). 16 bytes a rank, whatever else the job does. */
typedef struct rvx__dc_peer {
    uint32_t tx_sent;     /* frames sent to it (an endpoint's tx_sent, kept while none exists) */
    uint32_t claimed;     /* credits taken from its pool: frames of ours it may hold at once */
    uint32_t rx_reported; /* its frames taken here, as last told to it */
    uint32_t dirty;       /* on the list of ranks whose taken count is not reported yet */
} rvx__dc_peer_t;

/* A message as the DCT receives it: a SEND with immediate (info | chan << 16) whose first 8 bytes
 * say who sent it and, when rank has RVX__DC_PRE_REPORT set, how many of the receiver's frames
 * that sender has consumed, then the body. The one-WQEBB fast path sends the worker's scratch
 * prefix as it stands, so that prefix never carries a report: one for another peer would let the
 * receiver send beyond its credits and give back credits it does not hold. */
typedef struct rvx__dc_prefix {
    uint32_t rank;
    uint32_t consumed;
} rvx__dc_prefix_t;
#define RVX__DC_PREFIX     8u
#define RVX__DC_PRE_REPORT 0x80000000u /* in rank: consumed is a report for the receiver */
/* Frames of up to this many bytes (prefix + body) go inline in the SEND. */
#define RVX__DC_AM_INLINE RVX__TL_SHORT_MAX

typedef rvx__mlx5_deferred_t rvx__dc_deferred_t; /* a frame set aside (tl/mlx5/srq.h) */

typedef struct rvx__dc_iface {
    /* hot: progress reads these */
    unsigned        nlive;
    unsigned        quiet;       /* progress calls with nothing to do before a look at the slow
                                  * work (frames set aside: 1; credits to sweep: a tick) */
    unsigned        outstanding; /* signaled WQEs not yet completed, all DCIs */
    rvx__mlx5_cq_t  cq;
    unsigned        av_bytes;    /* RVX__DC_AV_BASE or RVX__DC_AV_EXT */
    /* cold */
    rvx__mlx5_ctx_t  *ctx;
    struct ibv_cq  *ibcq;
    rvx__mlx5_srq_t srq;         /* the DCT's receive buffers */
    struct ibv_qp  *dct;
    rvx__dc_dci_t   dci[RVX_DC_NUM_DCI];
    rvx__dc_dci_t   no_dci;      /* what an endpoint without a DCI points to: a queue that is
                                  * always full and always done, so hot paths test no pointer */
    unsigned        next_dci;    /* where the search for a free DCI starts (round robin) */
    unsigned long   dci_taken;   /* DCIs taken from an endpoint whose work had completed */
    unsigned long   pool_waits;  /* times a post found every DCI holding outstanding work */
    uint8_t        *bounce;
    struct ibv_mr  *bounce_mr;
    uint32_t        bounce_lkey;
    rvx__mlx5_bf_t *bfs;
    rvx__mlx5_txpool_t txrecs;   /* op records of every DCI (tl/mlx5/tx.h) */
    int             rank, nranks;
    rvx_request_t  *wflush;
    const uint8_t  *addrs;       /* every rank's address as the worker keeps it (addr_stride bytes
                                  * apart): the GID's low half and control region are read there */
    size_t          addr_stride;
    uint8_t         gid_hi[8];   /* RoCE: the GID's top 8 bytes every rank shares */
    uint8_t        *gid_his;     /* RoCE: per rank, 8 bytes each, when they differ (else NULL) */
    int            *refused;     /* ranks whose address is not one of this fabric (wire-up) */
    unsigned        nrefused;
    /* messages: the control region (word 0 the credit pool, word 1 + r the frames of ours rank r
     * has taken, as it reported them; word 1 + nranks + r the frames of rank r's taken here),
     * endpoints by rank, counters by rank, frames set aside */
    uint64_t       *ctrl;
    struct ibv_mr  *ctrl_mr;
    struct rvx__dc_ep **eps;
    rvx__dc_peer_t *peers;
    rvx__dc_deferred_t *def_head, *def_tail;
    uint8_t         in_rx;       /* delivering: a handler may be running */
    unsigned        warned_nested;
    unsigned long   claims;      /* credit claims made on peers' pools */
    unsigned long   claim_fails; /* claims that found a pool empty */
    unsigned long   released;    /* credits given back by living endpoints (idle, or wanted) */
    rvx__dc_hold_t *holders;     /* endpoints holding credits at their peer (nholders, grown
                                  * as needed: one record per endpoint with credits, not per rank) */
    unsigned        nholders, cap_holders;
    rvx__dc_backoff_t *backoff;  /* ranks whose pool was found empty (nbackoff) */
    unsigned        nbackoff, cap_backoff;
    int            *dirty;       /* ranks whose frames taken here are not reported yet */
    unsigned        ndirty;
    unsigned        sweep_in;    /* slow progress calls before the next look at the clock */
    int             in_sweep;
    uint8_t         closing;     /* an endpoint's destruction gives back its credits: it may take
                                  * a DCI still busy with a destroyed endpoint's work */
    double          sweep_t;     /* when the last sweep ran */
    uint64_t        scratch[(RVX__DC_AM_INLINE + 7) / 8 + 2]; /* small frames are built here
                                                 * (readable past a short frame's end) */
} rvx__dc_iface_t;

/* The cold paths the hot ones fall into (tl/dc/poll.h). */
RVX_COLD rvx__dc_dci_t *rvx__dc_get_slow(rvx__dc_ep_t *ep, uint32_t nbb);
RVX_COLD uint8_t *rvx__dc_bounce_wait(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, size_t len);
RVX_COLD rvx_status_t rvx__dc_stop(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, rvx_request_t *req);
RVX_COLD rvx_status_t rvx__dc_wait_req(rvx__dc_iface_t *ifc, rvx_request_t *req);
RVX_COLD int rvx__dc_progress_slow(rvx__dc_iface_t *ifc);
RVX_COLD rvx_status_t rvx__dc_flush_slow(rvx__dc_ep_t *ep, rvx_request_t *req);
#if RVX_CAN_RECEIVE
RVX_COLD int rvx__dc_credit_slow(rvx__dc_ep_t *ep);
#endif
RVX_COLD rvx_status_t rvx__dc_amo_loop(rvx__dc_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                       uint64_t v, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                       void *fetch);

/* ---- posting -------------------------------------------------------------------------------- */

/* The DCI the endpoint's next WQE of nbb WQEBBs goes to: the one it holds when there is room,
 * else (cold) one from the pool, waiting for room or a free DCI. NULL: the endpoint failed. */
RVX_INLINE rvx__dc_dci_t *rvx__dc_get(rvx__dc_ep_t *ep, uint32_t nbb)
{
    rvx__dc_dci_t *d = ep->dci;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    if (RVX_LIKELY(!rvx__mlx5_sq_full(&d->sq, nbb) && !d->failed)) return d;
#else
    if (RVX_LIKELY(!rvx__mlx5_sq_full(&d->sq, nbb))) return d;
#endif
    return rvx__dc_get_slow(ep, nbb);
}

RVX_INLINE rvx_status_t rvx__dc_ep_status(const rvx__dc_ep_t *ep)
{
    return ep->err != RVX_OK ? (rvx_status_t)ep->err : RVX_ERR_PEER_FAILED;
}

/* Milliseconds, wrapping: when an endpoint's last keepalive went. */
RVX_INLINE uint32_t rvx__dc_ms(void)
{
    return (uint32_t)(uint64_t)(rvx__now_s() * 1e3);
}

/* The peer's address as the worker keeps it: its first RVX__DC_ADDR_KEPT bytes (control region,
 * DCT number, LID or the GID's low half). */
RVX_INLINE const rvx__dc_addr_t *rvx__dc_addr_of(const rvx__dc_ep_t *ep)
{
    return (const rvx__dc_addr_t *)(const void *)(ep->ifc->addrs + (size_t)ep->rank * ep->ifc->addr_stride);
}

/* The peer's GID (RoCE): its top 8 bytes kept once or per rank, its low 8 in the kept address. */
RVX_INLINE void rvx__dc_gid(const rvx__dc_ep_t *ep, uint8_t gid[16])
{
    const rvx__dc_iface_t *ifc = ep->ifc;
    memcpy(gid, ifc->gid_his ? ifc->gid_his + 8 * (size_t)ep->rank : ifc->gid_hi, 8);
    memcpy(gid + 8, rvx__dc_addr_of(ep)->at.gid_lo, 8);
}

/* The address segment after the ctrl segment: the base form is the access key and av_lo (DCT
 * number, SL 0, LID); the extended form (RoCE) adds the GRH fields, as mlx5dv_set_dgram_seg
 * writes them. Returns where the next segment goes (ctrl + address fill whole 16-byte units, and
 * with the extended form a whole WQEBB, after which the queue may wrap). */
RVX_INLINE uint8_t *rvx__dc_set_av(const rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, uint8_t *wqe)
{
    uint8_t *seg = wqe + sizeof(struct mlx5_wqe_ctrl_seg);
    uint64_t key = rvx_htobe64(RVX__DC_KEY);
    uint8_t gid[16];
    if (RVX_LIKELY(d->ifc->av_bytes == RVX__DC_AV_BASE)) {
        memcpy(seg, &key, 8);
        memcpy(seg + 8, &ep->av_lo, 8);
        return seg + RVX__DC_AV_BASE;
    }
    rvx__dc_gid(ep, gid);
    rvx__mlx5_set_av(seg, RVX__DC_KEY, rvx__dc_addr_of(ep)->dctn, 1, 0, 0, 0xc000, NULL, 0,
                     RVX__MLX5_HOP_LIMIT, 1u << 30 | (uint32_t)d->ifc->ctx->gid_index << 20, gid);
    seg += RVX__DC_AV_EXT;
    return seg == rvx__mlx5_sq_end(&d->sq) ? d->sq.buf : seg;
}

/* DS of the address segment. */
RVX_INLINE unsigned rvx__dc_av_ds(const rvx__dc_iface_t *ifc)
{
    return ifc->av_bytes / RVX__MLX5_SEG;
}

/* The prologue of every general post: at the producer index, the ctrl segment (completion
 * moderated, or forced by sig) and the address segment. Sets *pi, *flags, *wqe for the rest of
 * the post; returns where the next segment goes. */
RVX_INLINE uint8_t *rvx__dc_begin(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, unsigned opmod,
                                  unsigned opcode, unsigned ds, int sig, uint32_t imm_be,
                                  uint32_t *pi, unsigned *flags, uint8_t **wqe)
{
    *pi = d->sq.pi;
    *wqe = rvx__mlx5_slot(&d->sq, *pi);
    *flags = rvx__mlx5_moderate(&d->sq, sig);
    rvx__mlx5_set_ctrl(*wqe, *pi, opmod, opcode, d->sq.qpn8, ds, *flags, imm_be);
    return rvx__dc_set_av(d, ep, *wqe);
}

/* After a completion (or a change of form): where the one-WQEBB fast paths stop. */
RVX_INLINE void rvx__dc_fast_limit(rvx__dc_dci_t *d)
{
    d->pi_fast = d->ctrl_w8 ? d->sq.pi_limit : d->sq.pi;
}

/* The one commit point of every dc WQE (ep's, of nbb WQEBBs at pi; bb: the one-WQEBB form built
 * in registers). Under the fixed policy the DCI is shared, so the slot remembers its endpoint. */
RVX_INLINE void rvx__dc_commit(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, uint32_t pi, uint32_t nbb,
                               uint8_t *wqe, const rvx__mlx5_bb_t *bb)
{
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    d->owner[pi & d->sq.mask] = (struct rvx__dc_ep *)(uintptr_t)ep;
#else
    (void)ep;
#endif
#if defined(__x86_64__)
    if (bb) {
        rvx__mlx5_post_bb(&d->sq, pi, bb);
        return;
    }
#else
    (void)bb;
#endif
    rvx__mlx5_commit(&d->sq, pi + nbb, wqe, nbb, NULL);
}

/* ---- put ------------------------------------------------------------------------------------ */

/* RDMA WRITE with the data inline: ctrl, address, raddr, inline segment, zeros to the end of the
 * last WQEBB. */
RVX_INLINE rvx_status_t rvx__dc_put_inline(rvx__dc_ep_t *ep, const void *src, size_t len,
                                           uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    unsigned ds = 2 + rvx__dc_av_ds(ep->ifc) + RVX__MLX5_INLINE_DS(len), units, flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    rvx__dc_dci_t *d;
    uint8_t *wqe, *seg;
    size_t used;
    if (len == 0) return RVX_OK;
    d = rvx__dc_get(ep, nbb);
    if (RVX_UNLIKELY(!d)) return rvx__dc_ep_status(ep);
    seg = rvx__dc_begin(d, ep, 0, MLX5_OPCODE_RDMA_WRITE, ds, 0, 0, &pi, &flags, &wqe);
    rvx__mlx5_set_raddr(seg, raddr, rkey);
    seg = rvx__mlx5_next_seg(&d->sq, seg);
    units = rvx__mlx5_set_inline(&d->sq, seg, src, len);
    used = sizeof(struct mlx5_wqe_inl_data_seg) + len;
    rvx__mlx5_zero_pad(&d->sq, seg + used, units * RVX__MLX5_SEG - used, nbb * 4 - ds);
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
    return RVX_OK;
}

#if defined(__x86_64__)
/* Not the fast path: the WQE that asks for a completion (built from registers as well, with
 * fm_ce_se in byte 11), or (the general inline path) no DCI held, a full queue, a failed DCI,
 * the 48-byte address form. */
RVX_COLD rvx_status_t rvx__dc_put8_slow(rvx__dc_ep_t *ep, const void *src, uint64_t raddr,
                                        const rvx__mlx5_rkey_t *rkey)
{
    rvx__dc_dci_t *d = ep->dci;
    if (d->ctrl_w8 && !rvx__mlx5_sq_full(&d->sq, 1)) {
        uint32_t pi = d->sq.pi;
        unsigned flags = rvx__mlx5_moderate(&d->sq, 0);
        rvx__mlx5_bb_t bb;
        rvx__mlx5_bb_dc_write8(&bb, d->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &ep->av_lo, src, raddr, rkey);
        bb.q[0] = _mm_or_si128(bb.q[0], _mm_set_epi64x((long long)((uint64_t)flags << 24), 0));
        if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + 1);
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb);
        return RVX_OK;
    }
    return rvx__dc_put_inline(ep, src, 8, raddr, rkey);
}

/* An 8-byte put: one WQEBB (ctrl, address, raddr, inline 8) built in SSE registers, stored to the
 * DCI's queue and to its BlueFlame register (mlx5/wqe.h, rvx__mlx5_bb_dc_write8). */
RVX_INLINE rvx_status_t rvx__dc_put8(rvx__dc_ep_t *ep, const void *src, uint64_t raddr,
                                     const rvx__mlx5_rkey_t *rkey)
{
    rvx__dc_dci_t *d = ep->dci;
    rvx__mlx5_bb_t bb;
    uint32_t pi;
    pi = d->sq.pi;
    if (RVX_UNLIKELY((int32_t)(pi - d->pi_fast) >= 0)) return rvx__dc_put8_slow(ep, src, raddr, rkey);
    if (RVX_UNLIKELY(--d->sq.sig_left == 0)) return rvx__dc_put8_slow(ep, src, raddr, rkey);
    rvx__mlx5_bb_dc_write8(&bb, d->ctrl_w8, pi, rvx_htobe64(RVX__DC_KEY), &ep->av_lo, src, raddr,
                           rkey);
    rvx__dc_commit(d, ep, pi, 1, NULL, &bb);
    return RVX_OK;
}
#endif

/* Put short: ctrl, address, raddr, inline data. */
RVX_INLINE rvx_status_t rvx__dc_put_short(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__dc_put8(ep, src, raddr, rkey);
#endif
    return rvx__dc_put_inline(ep, src, len, raddr, rkey);
}

/* Room in the DCI's bounce ring for len bytes (64-aligned), given back in WQE order. NULL: the
 * endpoint failed while it waited (the DCI recovered and went back to the pool). */
RVX_INLINE uint8_t *rvx__dc_bounce(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, size_t len)
{
    uint64_t pos = d->b_head, off;
    len = (len + 63) & ~(size_t)63;
    off = pos % RVX_DC_BOUNCE_BYTES;
    if (off + len > RVX_DC_BOUNCE_BYTES) { pos += RVX_DC_BOUNCE_BYTES - off; off = 0; }
    if (RVX_UNLIKELY(pos + len - d->b_tail > RVX_DC_BOUNCE_BYTES)) return rvx__dc_bounce_wait(d, ep, len);
    d->b_head = pos + len;
    return d->bounce + off;
}

/* One WQE with a raddr segment and a data segment: WRITE or READ (opcode) from/to local memory
 * addr (lkey), on DCI d (which has room: rvx__dc_get). `o`: what to do when it retires; sig
 * forces a CQE. */
RVX_INLINE void rvx__dc_post_rdma(rvx__dc_dci_t *d, rvx__dc_ep_t *ep, unsigned opcode,
                                  const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
                                  const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    unsigned ds = 2 + rvx__dc_av_ds(ep->ifc) + 1, flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    uint8_t *wqe, *seg = rvx__dc_begin(d, ep, 0, opcode, ds, sig, 0, &pi, &flags, &wqe);
    rvx__mlx5_set_raddr(seg, raddr, rkey);
    seg = rvx__mlx5_next_seg(&d->sq, seg);
    rvx__mlx5_set_data(seg, len, lkey, addr);
    rvx__mlx5_zero_pad(&d->sq, seg + RVX__MLX5_SEG, 0, nbb * 4 - ds);
    if (o) rvx__mlx5_tx_on_retire(&d->sq, &d->tx, pi, o);
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    if (opcode == MLX5_OPCODE_RDMA_READ) rvx__mlx5_set_fence(&d->sq);
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
}

#define RVX__DC_RDMA_NBB(ifc) RVX__MLX5_NBB(3 + rvx__dc_av_ds(ifc))

/* Put bcopy: copy into the DCI's bounce ring (chunks of RVX_PUT_BCOPY_MAX), one WRITE each. The
 * source can be reused on return. */
RVX_INLINE rvx_status_t rvx__dc_put_bcopy(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    size_t done = 0;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX_PUT_BCOPY_MAX && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        rvx__dc_dci_t *d;
        rvx__mlx5_op_t o;
        uint8_t *b;
        if (n <= RVX__TL_SHORT_MAX) {
            rvx_status_t st = rvx__dc_put_short(ep, (const uint8_t *)src + done, n, raddr + done, rkey);
            if (st != RVX_OK) return st;
            done += n;
            continue;
        }
        d = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
        if (RVX_UNLIKELY(!d)) return rvx__dc_ep_status(ep);
        b = rvx__dc_bounce(d, ep, n);
        if (RVX_UNLIKELY(!b)) return rvx__dc_ep_status(ep);
        memcpy(b, (const uint8_t *)src + done, n);
        memset(&o, 0, sizeof(o));
        o.bounce = d->b_head;
        rvx__dc_post_rdma(d, ep, MLX5_OPCODE_RDMA_WRITE, b, (uint32_t)n, ep->ifc->bounce_lkey,
                          raddr + done, rkey, &o, 0);
        done += n;
        if (RVX_UNLIKELY(done < len && ep->failed)) return rvx__dc_ep_status(ep); /* none after an error */
    }
    return RVX_OK;
}

/* Put or get zcopy: straight from / into registered memory, in WQEs of at most 1 GiB; the request
 * completes when the last one has (without a request, the call waits). */
RVX_INLINE rvx_status_t rvx__dc_rdma_zcopy(rvx__dc_ep_t *ep, unsigned opcode, const uint8_t *buf,
                                           size_t len, const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                           const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    rvx__dc_dci_t *d = NULL;
    if (len == 0) return RVX_OK;
    if (RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len))) return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__MLX5_DSEG_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done > RVX__MLX5_DSEG_MAX ? RVX__MLX5_DSEG_MAX : len - done;
        int last = done + n == len;
        rvx__dc_dci_t *nd = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
        rvx__mlx5_op_t o;
        if (RVX_UNLIKELY(!nd)) return rvx__dc_stop(ep, d, req);
        d = nd;
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_REQ;
        o.part = RVX__MLX5_PART(done, n, len);
        o.req = req;
        rvx__dc_post_rdma(d, ep, opcode, buf + done, (uint32_t)n, lmem->lkey, raddr + done, rkey,
                          &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && ep->failed)) return rvx__dc_stop(ep, d, req); /* none after an error */
    }
    return req == &own ? rvx__dc_wait_req(ep->ifc, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__dc_put_zcopy(rvx__dc_ep_t *ep, const void *src, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__dc_rdma_zcopy(ep, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem, raddr,
                              rkey, req);
}

/* ---- get ------------------------------------------------------------------------------------ */

/* Get bcopy: READs into the bounce ring, copied to dst as each completes; the request completes
 * with the last chunk. Without a request the call waits. */
RVX_INLINE rvx_status_t rvx__dc_get_bcopy(rvx__dc_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    rvx__dc_dci_t *d = NULL;
    if (len == 0) return RVX_OK;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX_PUT_BCOPY_MAX && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX_PUT_BCOPY_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        int last = done + n == len;
        rvx__dc_dci_t *nd = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
        rvx__mlx5_op_t o;
        uint8_t *b = nd ? rvx__dc_bounce(nd, ep, n) : NULL;
        if (RVX_UNLIKELY(!b)) return rvx__dc_stop(ep, d, req);
        d = nd;
        o.kind = RVX__MLX5_ON_COPY;
        o.part = RVX__MLX5_PART(done, n, len);
        o.len = (uint32_t)n;
        o.dst = (uint8_t *)dst + done;
        o.src = b;
        o.req = req;
        o.bounce = d->b_head;
        rvx__dc_post_rdma(d, ep, MLX5_OPCODE_RDMA_READ, b, (uint32_t)n, ep->ifc->bounce_lkey,
                          raddr + done, rkey, &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && ep->failed)) return rvx__dc_stop(ep, d, req); /* none after an error */
    }
    return req == &own ? rvx__dc_wait_req(ep->ifc, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__dc_get_zcopy(rvx__dc_ep_t *ep, void *dst, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__dc_rdma_zcopy(ep, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem, raddr,
                              rkey, req);
}

/* ---- atomics -------------------------------------------------------------------------------- */

/* One atomic WQE: ctrl, address, raddr, the atomic segment(s), a data segment for the old value
 * (an 8-byte bounce slot, copied to *fetch when the WQE completes). native: ATOMIC_FA / ATOMIC_CS
 * (64-bit); masked: opmod 0x08 | log2(size)-2 with {swap/add, compare/boundary, masks}. */
RVX_INLINE rvx_status_t rvx__dc_amo(rvx__dc_ep_t *ep, unsigned opcode, unsigned size, uint64_t a,
                                    uint64_t b, uint64_t amask, uint64_t bmask, uint64_t raddr,
                                    const rvx__mlx5_rkey_t *rkey, void *fetch, rvx_request_t *req)
{
    int masked = opcode == MLX5_OPCODE_ATOMIC_MASKED_CS || opcode == MLX5_OPCODE_ATOMIC_MASKED_FA;
    int cs8 = masked && size == 8 && opcode == MLX5_OPCODE_ATOMIC_MASKED_CS;
    unsigned ds = 4 + rvx__dc_av_ds(ep->ifc) + (cs8 ? 1 : 0), flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    unsigned opmod = masked ? RVX__MLX5_OPMOD_MASKED(size) : 0u;
    rvx__dc_dci_t *d;
    uint8_t *wqe, *seg, *slot;
    rvx__mlx5_op_t o;
    rvx_request_t own;
    int wait = fetch && !req;

    d = rvx__dc_get(ep, nbb);
    if (RVX_UNLIKELY(!d)) return rvx__dc_ep_status(ep);
    slot = rvx__dc_bounce(d, ep, 8);
    if (RVX_UNLIKELY(!slot)) return rvx__dc_ep_status(ep);
    if (wait) req = &own;
    if (fetch) req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    seg = rvx__dc_begin(d, ep, opmod, opcode, ds, fetch != NULL, 0, &pi, &flags, &wqe);
    rvx__mlx5_set_raddr(seg, raddr, rkey);
    seg = rvx__mlx5_next_seg(&d->sq, seg);
    if (cs8) seg = rvx__mlx5_set_masked_cs64(&d->sq, seg, a, b, amask, bmask);
    else if (size == 8) rvx__mlx5_set_atomic(seg, a, b);
    else rvx__mlx5_set_masked32(seg, (uint32_t)a, (uint32_t)b, (uint32_t)amask, (uint32_t)bmask);
    seg = rvx__mlx5_next_seg(&d->sq, seg);
    rvx__mlx5_set_data(seg, size, ep->ifc->bounce_lkey, slot);
    rvx__mlx5_zero_pad(&d->sq, seg + RVX__MLX5_SEG, 0, nbb * 4 - ds);
    o.kind = fetch ? (size == 8 ? RVX__MLX5_ON_FETCH64 : RVX__MLX5_ON_FETCH32) : RVX__MLX5_ON_NONE;
    o.part = RVX__MLX5_PART_NONE;
    o.len = size;
    o.dst = fetch;
    o.src = slot;
    o.req = fetch ? req : NULL;
    o.bounce = d->b_head;
    rvx__mlx5_tx_on_retire(&d->sq, &d->tx, pi, &o);
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    rvx__mlx5_set_fence(&d->sq);
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
    if (wait) return rvx__dc_wait_req(ep->ifc, &own);
    return fetch ? RVX_INPROGRESS : RVX_OK;
}

/* An rvx_amo_op_t as one NIC atomic (the mapping rc_mlx5 uses, see proto/amo.h). */
RVX_INLINE rvx_status_t rvx__dc_atomic(rvx__dc_ep_t *ep, rvx_amo_op_t op, unsigned size, uint64_t v,
                                       uint64_t cmp, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                       void *fetch, rvx_request_t *req)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull;
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    switch (op) {
    case RVX_AMO_ADD: break;
    case RVX_AMO_SUB: v = (0 - v) & ones; break;
    case RVX_AMO_INC: v = 1; break;
    case RVX_AMO_DEC: v = ones; break;
    case RVX_AMO_GET: v = 0; break;
    case RVX_AMO_CAS:
        if (size == 8)
            return rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_CS, 8, v, cmp, 0, 0, raddr, rkey, fetch, req);
        return rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_MASKED_CS, 4, v, cmp, ones, ones, raddr, rkey,
                           fetch, req);
    case RVX_AMO_SET:
    case RVX_AMO_SWAP:
        return rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_MASKED_CS, size, v, 0, ones, 0, raddr, rkey,
                           fetch, req);
    case RVX_AMO_AND:
        return rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_MASKED_CS, size, 0, 0, ~v & ones, 0, raddr,
                           rkey, fetch, req);
    case RVX_AMO_OR:
        return rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_MASKED_CS, size, v, 0, v, 0, raddr, rkey,
                           fetch, req);
    case RVX_AMO_XOR:
        return rvx__dc_amo(ep, MLX5_OPCODE_ATOMIC_MASKED_FA, size, v, ones, 0, 0, raddr, rkey,
                           fetch, req);
    default: /* MULT, MIN, MAX, UMIN, UMAX: compare-and-swap loop, done when the call returns */
        return rvx__dc_amo_loop(ep, op, size, v, raddr, rkey, fetch);
    }
    return rvx__dc_amo(ep, fa, size, v, 0, 0, 0, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__dc_atomic64(rvx__dc_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    return rvx__dc_atomic(ep, op, 8, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__dc_atomic32(rvx__dc_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    return rvx__dc_atomic(ep, op, 4, operand, compare, raddr, rkey, fetch, req);
}

/* ---- messages ------------------------------------------------------------------------------- */

#if RVX_CAN_RECEIVE
/* Room for one more frame at the peer: the cached limit, else (cold) what the peer has returned,
 * or a claim on its pool. A failed endpoint has none. */
/* Frames sent to the peer, in all. */
RVX_INLINE uint32_t rvx__dc_tx_sent(const rvx__dc_ep_t *ep)
{
    return ep->tx_limit - ep->tx_left;
}

/* Frames of ours the peer has taken: the larger of what it wrote into our control region and what
 * it said in a message (both only grow), kept between the frames sent less the credits held and
 * the frames sent. A report outside (a faulty or hostile peer's, in either word) would be credits
 * never granted, or a limit behind the frames sent; either wrapped the credits to spend, and
 * their give-back the count of credits held, putting credits into the pool no one took out. */
RVX_INLINE uint32_t rvx__dc_consumed(const rvx__dc_ep_t *ep)
{
    uint32_t w = (uint32_t)((const volatile uint64_t *)ep->ifc->ctrl)[1 + ep->rank];
    uint32_t c = (int32_t)(w - ep->piggy) > 0 ? w : ep->piggy, sent = rvx__dc_tx_sent(ep);
    uint32_t held = ep->ifc->peers[ep->rank].claimed;
    if ((int32_t)(c - sent) > 0) return sent;
    return sent - c > held ? sent - held : c;
}

/* The send limit from the latest reports: frames taken plus credits held. The report taken is
 * kept as the largest so far, so that a word written lower (a faulty or hostile peer's) cannot
 * put the limit behind the frames sent. */
RVX_INLINE void rvx__dc_refresh(rvx__dc_ep_t *ep)
{
    uint32_t sent = rvx__dc_tx_sent(ep);
    ep->piggy = rvx__dc_consumed(ep);
    ep->tx_limit = ep->piggy + ep->ifc->peers[ep->rank].claimed;
    ep->tx_left = ep->tx_limit - sent;
}

/* A credit for one more frame (taken when the frame is published). */
RVX_INLINE int rvx__dc_credit(rvx__dc_ep_t *ep)
{
    if (RVX_LIKELY(ep->tx_left != 0)) return 1;
    return rvx__dc_credit_slow(ep);
}

/* Where to write a frame of len bytes, after the 8-byte prefix: small frames are built in the
 * worker's scratch area and go inline; others go from the bounce ring of the endpoint's DCI,
 * which stays the endpoint's until the frame is published. NULL: no credit (or failed). */
RVX_INLINE void *rvx__dc_am_claim(rvx__dc_ep_t *ep, unsigned chan, size_t len)
{
    rvx__dc_dci_t *d;
    uint8_t *b;
    (void)chan;
    if (!rvx__dc_credit(ep)) return NULL;
    if (len + RVX__DC_PREFIX <= RVX__DC_AM_INLINE) return (uint8_t *)ep->ifc->scratch + RVX__DC_PREFIX;
    d = rvx__dc_get(ep, RVX__DC_RDMA_NBB(ep->ifc));
    b = d ? rvx__dc_bounce(d, ep, len + RVX__DC_PREFIX) : NULL;
    if (RVX_UNLIKELY(!b)) return NULL; /* failed */
    d->am_claim = 1;
    return b + RVX__DC_PREFIX;
}

/* The claim of the protocols' hot paths (RVX__DC_AM_CLAIM_HOT): the cached credits, else what
 * the peer has reported since (a few loads, no call), else NULL and the caller's cold path claims
 * again with rvx__dc_am_claim (a claim on the peer's pool). A call that returned into the hot
 * path would make it keep a stack frame. */
RVX_INLINE void *rvx__dc_am_claim_hot(rvx__dc_ep_t *ep, unsigned chan, size_t len)
{
    if (len + RVX__DC_PREFIX > RVX__DC_AM_INLINE) return rvx__dc_am_claim(ep, chan, len);
    if (RVX_UNLIKELY(ep->tx_left == 0)) {
        if (ep->failed) return NULL;
        rvx__dc_refresh(ep);
        if (ep->tx_left == 0) return NULL;
    }
    return (uint8_t *)ep->ifc->scratch + RVX__DC_PREFIX;
}
#define RVX__DC_AM_CLAIM_HOT(tl, chan, len) rvx__dc_am_claim_hot((tl), (chan), (len))

/* SEND with immediate (info | chan << 16) of the prefix and body: inline when small, else one
 * data segment on the bounce ring (given back when the WQE retires). */
RVX_INLINE void rvx__dc_publish_gen(rvx__dc_ep_t *ep, unsigned chan, void *body, size_t len,
                                    unsigned info)
{
    rvx__dc_iface_t *ifc = ep->ifc;
    uint8_t *frame = (uint8_t *)body - RVX__DC_PREFIX, *wqe, *seg;
    size_t flen = len + RVX__DC_PREFIX;
    int inl = flen <= RVX__DC_AM_INLINE;
    unsigned ds = 1 + rvx__dc_av_ds(ifc) + (inl ? RVX__MLX5_INLINE_DS(flen) : 1u), flags;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    uint32_t taken = (uint32_t)ifc->ctrl[1 + ifc->nranks + ep->rank];
    rvx__dc_prefix_t pre;
    rvx__dc_dci_t *d = rvx__dc_get(ep, nbb);
    if (RVX_UNLIKELY(!d)) return; /* failed: the frame is lost with the endpoint */
    pre.rank = (uint32_t)ifc->rank | RVX__DC_PRE_REPORT;
    pre.consumed = taken; /* credits back to the peer, for free */
    ifc->peers[ep->rank].rx_reported = taken;
    memcpy(frame, &pre, sizeof(pre));
    seg = rvx__dc_begin(d, ep, 0, MLX5_OPCODE_SEND_IMM, ds, 0, rvx_htobe32(info | chan << 16), &pi,
                        &flags, &wqe);
    if (inl) {
        unsigned units = rvx__mlx5_set_inline(&d->sq, seg, frame, flen);
        size_t used = sizeof(struct mlx5_wqe_inl_data_seg) + flen;
        rvx__mlx5_zero_pad(&d->sq, seg + used, units * RVX__MLX5_SEG - used, nbb * 4 - ds);
        pre.rank = (uint32_t)ifc->rank; /* the scratch prefix (inline frames are built there) */
        memcpy(frame, &pre.rank, sizeof(pre.rank)); /* goes back to reporting nothing */
    } else {
        rvx__mlx5_op_t o;
        rvx__mlx5_set_data(seg, (uint32_t)flen, ifc->bounce_lkey, frame);
        rvx__mlx5_zero_pad(&d->sq, seg + RVX__MLX5_SEG, 0, nbb * 4 - ds);
        memset(&o, 0, sizeof(o)); /* the bounce space goes back when this WQE retires */
        o.bounce = d->b_head;
        rvx__mlx5_tx_on_retire(&d->sq, &d->tx, pi, &o);
        d->am_claim = 0;
    }
    if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + nbb);
    ep->tx_left--;
    rvx__dc_commit(d, ep, pi, nbb, wqe, NULL);
}

/* Not the fast path of a short frame: no DCI held, a full queue, the 48-byte address form, or
 * the WQE that asks for a completion (built here from registers as well). */
RVX_COLD rvx_status_t rvx__dc_publish_slow(rvx__dc_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
#if defined(__x86_64__)
    rvx__dc_dci_t *d = ep->dci;
    if (d && d->ctrl_send && !rvx__mlx5_sq_full(&d->sq, 1) &&
        (uint8_t *)body == (uint8_t *)ep->ifc->scratch + RVX__DC_PREFIX) {
        uint32_t pi = d->sq.pi;
        unsigned flags = rvx__mlx5_moderate(&d->sq, 0);
        rvx__mlx5_bb_t bb;
        rvx__mlx5_bb_dc_send(&bb, d->ctrl_send, pi, flags, rvx_htobe32(info | chan << 16),
                             rvx_htobe64(RVX__DC_KEY), &ep->av_lo, (uint8_t *)body - RVX__DC_PREFIX,
                             (unsigned)len + RVX__DC_PREFIX);
        if (flags & RVX__MLX5_CE) rvx__mlx5_tx_mark_sig(&d->sq, &d->tx, pi, pi + 1);
        ep->tx_left--;
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb);
        return RVX_OK;
    }
#endif
    rvx__dc_publish_gen(ep, chan, body, len, info);
    return RVX_OK;
}

/* RVX_OK always: callers return it as their own status, so the cold path is a jump. */
RVX_INLINE rvx_status_t rvx__dc_am_publish(rvx__dc_ep_t *ep, unsigned chan, void *body, size_t len,
                                   unsigned info)
{
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && __builtin_constant_p(info) && __builtin_constant_p(chan) &&
        len >= 4 && len + RVX__DC_PREFIX <= 28) {
        /* a short frame of known size (an 8-byte message, a tag send of 8 bytes): as put8, one
         * WQEBB from SSE registers. Such a frame is in the scratch area, whose prefix always
         * names this rank and carries no report (the general path clears its flag) */
        rvx__dc_dci_t *d = ep->dci;
        rvx__mlx5_bb_t bb;
        uint64_t ctrl;
        uint32_t pi;
        pi = d->sq.pi;
        ctrl = d->ctrl_send;
        if (RVX_UNLIKELY((int32_t)(pi - d->pi_fast) >= 0 || --d->sq.sig_left == 0))
            return rvx__dc_publish_slow(ep, chan, body, len, info);
        rvx__mlx5_bb_dc_send(&bb, ctrl, pi, 0, rvx_htobe32(info | chan << 16),
                             rvx_htobe64(RVX__DC_KEY), &ep->av_lo, (uint8_t *)body - RVX__DC_PREFIX,
                             (unsigned)len + RVX__DC_PREFIX);
        ep->tx_left--;
        rvx__dc_commit(d, ep, pi, 1, NULL, &bb);
        return RVX_OK;
    }
#endif
    rvx__dc_publish_gen(ep, chan, body, len, info);
    return RVX_OK;
}

/* Nonzero while a handler runs (every delivery sets in_rx), a word the send path reaches through
 * the ifc pointer it loads anyway: proto/am.h refuses requests from handlers with it. */
#define RVX__DC_IN_HANDLER(tl) ((tl)->ifc->in_rx)
/* The word that says so, for a pair (tl/pair.h), which sets it around shm's deliveries too. */
RVX_INLINE uint8_t *rvx__dc_iface_in_rx(rvx__dc_iface_t *ifc) { return &ifc->in_rx; }

/* Zero-copy message, as the contract has it: header and body are copied into a frame (claim and
 * publish), and the call completes at once: RVX_OK, buf reusable; lmem and req are not used.
 * RVX_ERR_NO_RESOURCE: no credit, nothing sent. */
#define RVX__DC_AM_ZCOPY         0  /* the body is copied: callers need not register */
#define RVX__DC_AM_ZCOPY_HDR_MAX 28
RVX_INLINE rvx_status_t rvx__dc_am_zcopy(rvx__dc_ep_t *ep, unsigned chan, const void *hdr,
                                         size_t hdrlen, const void *buf, size_t len,
                                         const rvx__mlx5_mem_t *lmem, unsigned info,
                                         rvx_request_t *req)
{
    uint8_t *b;
    (void)lmem;
    (void)req;
    if (hdrlen > RVX__DC_AM_ZCOPY_HDR_MAX || hdrlen + len > RVX_MLX5_FRAME - RVX__DC_PREFIX)
        return RVX_ERR_INVALID_PARAM;
    if (RVX_UNLIKELY(ep->failed)) return rvx__dc_ep_status(ep);
    b = (uint8_t *)rvx__dc_am_claim(ep, chan, hdrlen + len);
    if (!b) return ep->failed ? rvx__dc_ep_status(ep) : RVX_ERR_NO_RESOURCE;
    if (hdrlen) memcpy(b, hdr, hdrlen);
    if (len) memcpy(b + hdrlen, buf, len);
    rvx__dc_am_publish(ep, chan, b, hdrlen + len, info);
    return ep->failed ? rvx__dc_ep_status(ep) : RVX_OK;
}
#endif

/* ---- progress and flush --------------------------------------------------------------------- */

/* Progress: nothing without live endpoints (in a build without messages, nothing while no
 * signaled work is outstanding: nothing arrives unasked); otherwise one look at the CQE at the
 * consumer index, and a countdown that is 1 while frames are set aside and otherwise lets every
 * RVX__DC_TICK-th empty call look at the clock (idle credits go back, tl/dc/poll.h). */
RVX_INLINE int rvx__dc_progress(rvx__dc_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    if (!ifc->nlive) return 0;
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own)) &&
        RVX_LIKELY(--ifc->quiet != 0))
        return 0;
#else
    if (!ifc->outstanding) return 0;
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own))) return 0;
#endif
    return rvx__dc_progress_slow(ifc);
}

/* Done at once when the endpoint holds no DCI or its DCI has retired everything: its work is
 * complete. Otherwise the slow path (a signaled NOP covers an unsignaled tail). */
RVX_INLINE rvx_status_t rvx__dc_ep_flush(rvx__dc_ep_t *ep, rvx_request_t *req)
{
    const rvx__dc_dci_t *d = ep->dci;
    if (d->sq.ci == d->sq.pi) return (rvx_status_t)ep->err; /* also no DCI held (no_dci) */
    return rvx__dc_flush_slow(ep, req);
}

/* ---- cold code ------------------------------------------------------------------------------ */

#include "dc/setup.h"
#include "dc/poll.h"

#endif /* RVX_TL_DC_MLX5_H */
