/* rvx/tl/rc_mlx5.h: reliable-connected queue pairs on an NVIDIA ConnectX (mlx5), driven directly.
 *
 * Set-up goes through rdma-core (ibv_* and mlx5dv_*: device, PD, CQ, QPs, memory registration);
 * the data path writes WQEs into the send queue, the doorbell record and the BlueFlame register
 * itself, and reads CQEs straight from the completion queue, as mlx5dv(7) allows. What every mlx5
 * transport shares is in tl/mlx5/: hardware values (hw.h), segment writers and the one commit
 * point (wqe.h), CQ polling (cq.h), device set-up (setup.h). This file holds what is RC's own and
 * reads top to bottom: types, the put path, gets, atomics, sends, progress and flush; its cold
 * code follows in tl/rc/: set-up (setup.h), the CQ poll, receives, waits and liveness (poll.h),
 * re-connection (reconnect.h).
 *
 * Objects
 *   ctx    one ibv_context and PD per process and lane (RVX_DEV=name[:port], default the first
 *          mlx5 device; with RVX_LANES > 1, RVX_DEV=mlx5_0,mlx5_1 gives lane i the i-th name, by
 *          default lane i opens the i-th mlx5 device)
 *   iface  per worker and lane (rvx_worker_t's iface[RVX_LANES]): one CQ for sends and
 *          receives, one shared receive queue every QP receives on, one RC QP per rank of the
 *          job, one UD QP for re-connection messages, a small registered control region where
 *          peers write credits, and a pool of registered bounce memory (at the first copy). Its
 *          address carries the port's LID/GID, the UD QP's number and every RC QP's number.
 *          rvx_worker_create exchanges the addresses and takes every QP to RTS: RC needs the
 *          target's QP connected even for one-sided operations.
 *   conn   per (worker, lane, peer): the QP, its send queue and credits, and while copies to the
 *          peer are in flight a segment of the bounce pool (what only a re-connection needs is
 *          allocated while one is under way); it lives as long as the iface, so an endpoint
 *          destroyed and created again continues where it stopped.
 *   ep     one per lane (rvx_ep_t's tl[RVX_LANES]): a pointer to the conn. rvx_ep_create only
 *          points it there (re-connecting a failed conn first); it changes no QP state.
 *
 * Send queue. One WQE per operation; one in RVX_MLX5_SIG_EVERY is signaled (and every WQE that
 * carries a request, a copy-out or bounce memory to give back). Each WQEBB slot has an `ops` entry
 * that the CQE handler consults, so the hot path touches only the WQE, the counters, the doorbell
 * record and the register. A full queue is handled inside the call: it polls the CQ until a slot
 * frees (or the endpoint fails), so puts never return RVX_ERR_NO_RESOURCE.
 *
 * Send budget. All QPs of a worker together have at most RVX_MLX5_TX_BUDGET WQEBBs outstanding:
 * a conn holds a grant g from the worker's budget (sq.room = g - 1, the last WQEBB kept for a
 * flush NOP; no grant: room 0), so the put path's one check against sq.pi_limit = ci + room is
 * the budget check too. A conn whose grant is used up takes more in the cold path (doubling, up
 * to what its queue holds); when the budget is short, idle conns give theirs back and busy ones
 * what they do not use; failing that the call polls the CQ, as for a full queue.
 *
 * Messages (RVX_CAN_RECEIVE builds). SEND with immediate = info | channel << 16 into the shared
 * receive queue's buffers of RVX__RC_FRAME bytes. Flow control by credits: each peer may have
 * ifc->credits frames in flight, and the queue holds every peer's credits (plus room for
 * re-connection hellos); a receiver reports how many frames it has consumed by an RDMA WRITE of
 * that count into the sender's control region (so a credit message never needs a receive
 * buffer), every quarter of the credits; a sender with no credit gets NULL from
 * rvx__rc_am_claim (RVX_ERR_NO_RESOURCE for requests). RNR cannot happen.
 *
 * Errors. An error CQE fails the operation it names (remote access -> RVX_ERR_REMOTE_ACCESS,
 * retries exhausted -> RVX_ERR_PEER_FAILED) and marks the endpoint failed; the WQEs after it are
 * flushed by the NIC and their requests complete with RVX_ERR_CANCELED; flushes return the first
 * error. Other endpoints are not affected. A failed connection is re-established by the next
 * rvx_ep_create (tl/rc/reconnect.h). */
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
#include "mlx5/setup.h"
#include "mlx5/srq.h"

#define RVX__RC_QPT_EMPTY (-1)
#define RVX__RC_QPT_GONE  (-2)              /* a QP that no longer completes anything */
#define RVX__RC_QPT_HELLO 0x40000000        /* the iface's hello QP (tl/rc/reconnect.h) */
#define RVX__RC_HELLO_WR  16u               /* datagrams the hello QP may have in flight */
#define RVX__RC_HELLO     0xffffu           /* imm info of a re-connection message */
/* WQEBBs the data path leaves free: a flush NOP, a credit write and a keepalive always fit. */
#define RVX__RC_SQ_RESERVE 4u
/* Buffers of the shared receive queue beyond every peer's credits: re-connection hellos. */
#define RVX__RC_SRQ_SPARE 16u

/* The worker's send budget (per lane), as UCX's interface TX credits: WQEBBs that may be
 * outstanding on all its QPs together. It bounds the send CQEs the CQ can hold, whatever the
 * number of ranks (see rvx__rc_iface_cq). Lent to conns in grants of RVX__RC_GRANT WQEBBs. */
#ifndef RVX_MLX5_TX_BUDGET
#define RVX_MLX5_TX_BUDGET 4096
#endif
#define RVX__RC_GRANT   16u
#define RVX__RC_HOLDERS (RVX_MLX5_TX_BUDGET / RVX__RC_GRANT)
#if RVX_MLX5_TX_BUDGET < 64 || RVX_MLX5_TX_BUDGET > 65536 || RVX_MLX5_TX_BUDGET % 16
#error "RVX_MLX5_TX_BUDGET must be a multiple of 16 between 64 and 65536"
#endif

#define RVX__RC_WF_END 0xffffffffu /* the end of the iface's flush list */

/* Build-time sizes. */
#define RVX__RC_FRAME        RVX_MLX5_FRAME
#define RVX__RC_BOUNCE_BYTES RVX_MLX5_BOUNCE_BYTES /* the worker's pool */
#define RVX__RC_BOUNCE_SEG   RVX_MLX5_BOUNCE_SEG   /* the ring a conn holds while it copies */
#define RVX__RC_BOUNCE_CHUNK RVX_PUT_BCOPY_MAX

/* ---- types ---------------------------------------------------------------------------------- */

/* An iface's address: the port, the control region and the hello QP (tl/rc/reconnect.h), then
 * one QPN per rank: the QP towards that rank. */
typedef struct rvx__rc_addr {
    /* kept after wire-up (RVX__RC_ADDR_KEPT): what re-connection reads */
    uint64_t ctrl_addr;
    uint32_t ctrl_rkey;
    uint16_t lid;
    uint8_t  is_roce;
    uint8_t  pad;
    uint8_t  gid[16];
    uint32_t hello_qpn; /* the iface's UD QP for re-connection messages */
    /* read by the wire-up only */
    int32_t  nranks;
    uint64_t magic;
    uint32_t qpn[2];    /* nranks entries: QP to rank r at r (indexed through RVX__RC_QPN: the
                         * array runs past its declared two) */
} rvx__rc_addr_t;
#define RVX__RC_ADDR_SIZE(n) (offsetof(rvx__rc_addr_t, qpn) + 4 * (size_t)((n) > 2 ? (n) : 2))
#define RVX__RC_QPN(addr) ((uint32_t *)(void *)((uint8_t *)(addr) + offsetof(rvx__rc_addr_t, qpn)))
#define RVX__RC_ADDR_KEPT(n) offsetof(rvx__rc_addr_t, nranks) /* after wire-up: no check words, no QPN table */

struct rvx__rc_iface;
struct rvx__rc_ep;

typedef struct rvx__rc_conn {
    /* hot: the put path reads this line */
    rvx__mlx5_sq_t        sq;
    uint64_t              ctrl_w8;     /* RDMA_WRITE << 32 | qpn << 8 | 3: a put8's first ctrl
                                          * word before the byte swap, WQE index excluded */
    uint64_t              ctrl_send2;  /* the same for an 8-byte SEND_IMM (DS 2) */
    uint8_t               failed;
    uint8_t               in_wf;       /* in the iface's flush list (else sq.pi_limit is pi) */
    uint8_t               connected;   /* went to RTS */
    int8_t                err;         /* an rvx_status_t: RVX_OK, or why the conn failed */
    uint32_t              qpn_be;      /* the QPN as the CQE's sop_drop_qpn carries it */
    struct rvx__rc_iface *ifc;
    /* message credits (RVX_CAN_RECEIVE) */
    uint32_t              tx_sent;     /* frames sent, low 32 bits (compared by difference: the */
    uint32_t              tx_limit;    /* limit is at most the credits ahead); tx_sent may reach
                                        * tx_limit without looking at credit_word */
    const volatile uint64_t *credit_word; /* frames the peer has consumed, written by the peer */
    /* warm */
    rvx__mlx5_txops_t     tx;          /* op records, signaled counts, pending flushes */
    uint32_t              qpn;
    uint32_t              rqpn;
    struct ibv_qp        *qp;
    uint32_t              wflush_pi;   /* a pending worker flush waits for ci to reach this */
    /* liveness (the peer's address, its control region included, is the worker's copy:
     * rvx__rc_peer_addr) */
    uint32_t              ka_pi;       /* pi after the last keepalive (0: none in flight) */
    uint32_t              ka_ms;       /* last keepalive, rvx__rc_now_ms (32 bits: compared by
                                        * difference, so the wrap after 49 days does no harm) */
    uint32_t              rx_held;     /* frames received while no endpoint existed: copied aside,
                                        * their credits wait for the endpoint */
    struct rvx__rc_ep    *ep;          /* the live endpoint, or NULL */
    /* the bounce segment this conn copies into while copies to the peer are in flight; else the
     * iface's empty record, on which nothing fits (so the copy paths test no NULL) */
    struct rvx__rc_bseg *bs;
    /* receive side: frames land in the iface's shared receive queue */
    uint64_t              rx_done;     /* frames consumed (reported to the peer as credits) */
    uint32_t              rx_reported; /* rx_done when credits last went back (low 32 bits: only
                                        * the difference, at most the credits, is read) */
    uint32_t              wf_next;     /* the next conn (its rank) in the iface's flush list */
    uint64_t              scratch[6];  /* small frames are built here, then sent inline */
} rvx__rc_conn_t;

/* The conn's error as a status (kept in a byte), and what a post that found no room on a failed
 * conn returns: that error, else the peer's failure. */
#define RVX__RC_ERR(c) ((rvx_status_t)(c)->err)
RVX_INLINE rvx_status_t rvx__rc_fail_st(const rvx__rc_conn_t *c)
{
    return c->err != RVX_OK ? RVX__RC_ERR(c) : RVX_ERR_PEER_FAILED;
}

/* A segment of the worker's bounce pool (RVX__RC_BOUNCE_SEG bytes), the ring of the conn that
 * holds it: copies go at head, which may not pass lim (the position given back last, plus the
 * segment's size). Positions run on across holders; 0 is never one an op records. */
typedef struct rvx__rc_bseg {
    uint64_t          head, lim;
    uint8_t          *buf;
    uint32_t          lkey;
    uint32_t          rsvd;
    rvx__rc_conn_t *holder;      /* NULL: free */
} rvx__rc_bseg_t;

typedef struct rvx__rc_ep {
    rvx__rc_conn_t *c;
} rvx__rc_ep_t;

#if RVX_CAN_RECEIVE
/* The upcall a received frame goes to: defined above this transport (tl/bind.h hands it to the
 * protocols' rvx__rx_deliver; a pair, tl/pair.h, first finds its own endpoint). */
RVX_INLINE void rvx__rc_rx_deliver(rvx__rc_ep_t *ep, unsigned chan, unsigned info, void *body,
                                size_t len);
#endif

typedef struct rvx__rc_iface {
    /* hot: progress reads these */
    unsigned          nlive;
    unsigned          outstanding; /* signaled WQEs not yet completed, all endpoints */
    rvx__mlx5_cq_t    cq;
    /* cold */
    rvx__mlx5_ctx_t    *ctx;
    struct ibv_cq    *ibcq;
    rvx__rc_conn_t *conns;       /* by rank */
    int               rank, nranks;
    uint64_t         *ctrl;        /* credit words, one per rank */
    struct ibv_mr    *ctrl_mr;
    uint32_t         *qpt_qpn;     /* QPN -> rank, open addressing, sized by the job */
    int32_t          *qpt_rank;
    uint32_t          qpt_mask;
    unsigned          qpt_shift;   /* 32 - log2(size): the hash's top bits */
    uint8_t           in_rx;       /* delivering: a handler may be running */
    unsigned          warned_nested;
    rvx_request_t    *wflush;      /* pending worker flushes */
    uint32_t          wf_head;     /* the flush list (tl/rc/setup.h): conns that posted since a flush
                                    * found them idle, by rank, linked by their wf_next */
    unsigned          nwf;         /* how many */
    rvx__mlx5_bf_t   *bfs;         /* BlueFlame registers in use */
    rvx__mlx5_txpool_t txrecs;     /* op records of every conn (tl/mlx5/sq.h) */
    rvx__mlx5_srq_t   srq;         /* every QP's receives, frames and re-connection hellos */
    uint32_t          credits;     /* frames each peer may have in flight to us */
    uint32_t          credit_q;    /* credits go back when this many frames were consumed */
    unsigned          nrec;        /* conns waiting to follow a peer's re-connection */
    struct rvx__rc_hello *hello; /* the hello QP, failed QPs, the re-connections under way */
    /* requests received on a channel while a reply waited for room: delivered later, in order */
    struct rvx__mlx5_deferred *def_head, *def_tail;
    /* the bounce pool: RVX_MLX5_BOUNCE_BYTES registered on first use, lent to conns in segments */
    uint8_t          *bpool;
    struct ibv_mr    *bpool_mr;
    uint32_t         *bfree;       /* free segments (a stack) */
    unsigned          nbfree;
    rvx__rc_bseg_t *bsegs;       /* one record per segment */
    rvx__rc_bseg_t  bnone;       /* what a conn without a segment points to: head 0, lim 0 */
    /* the send budget: WQEBBs not lent, and the conns that hold a grant (each at least
     * RVX__RC_GRANT, so there are at most RVX__RC_HOLDERS, whatever the job's size) */
    uint32_t          tx_free;
    unsigned          nholders;
    rvx__rc_conn_t *holders[RVX__RC_HOLDERS];
    uint32_t          holder_g[RVX__RC_HOLDERS];
} rvx__rc_iface_t;

/* The rank a conn leads to: its place in the iface's table (not stored: per-peer bytes). */
RVX_INLINE int rvx__rc_rank(const rvx__rc_conn_t *c)
{
    return (int)(c - c->ifc->conns);
}

/* The cold paths the hot ones fall into (tl/rc/). */
RVX_COLD void rvx__rc_wait_room(rvx__rc_conn_t *c, uint32_t nbb);
RVX_COLD uint8_t *rvx__rc_bounce_wait(rvx__rc_conn_t *c, size_t len);
RVX_COLD rvx_status_t rvx__rc_wait_req(rvx__rc_conn_t *c, rvx_request_t *req);
RVX_COLD rvx_status_t rvx__rc_stop(rvx__rc_conn_t *c, rvx_request_t *req);
RVX_COLD rvx_status_t rvx__rc_amo_loop(rvx__rc_conn_t *c, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         void *fetch, rvx_request_t *req);
RVX_COLD int rvx__rc_progress_slow(rvx__rc_iface_t *ifc);
RVX_COLD rvx_status_t rvx__rc_flush_slow(rvx__rc_conn_t *c, rvx_request_t *req);
RVX_COLD void rvx__rc_grant_adopt(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c);

/* ---- posting -------------------------------------------------------------------------------- */

/* Milliseconds on the monotonic clock in 32 bits: keepalive times, compared by difference. */
RVX_INLINE uint32_t rvx__rc_now_ms(void)
{
    return (uint32_t)(uint64_t)(rvx__now_s() * 1000.0);
}

/* Make sure nbb WQEBBs are free (the CQ is polled in the cold path until they are). */
#define RVX__RC_NEED(c, nbb) \
    if (RVX_UNLIKELY(rvx__mlx5_sq_full(&(c)->sq, (nbb)))) rvx__rc_wait_room((c), (nbb))

/* Book-keeping of a signaled WQE that starts at pi and ends at end. */
RVX_INLINE void rvx__rc_mark_sig(rvx__rc_conn_t *c, uint32_t pi, uint32_t end)
{
    rvx__mlx5_tx_mark_sig(&c->sq, &c->tx, pi, end);
}

/* What the CQE handler does when the WQE at pi retires. */
RVX_INLINE void rvx__rc_on_retire(rvx__rc_conn_t *c, uint32_t pi, const rvx__mlx5_op_t *o)
{
    rvx__mlx5_tx_on_retire(&c->sq, &c->tx, pi, o);
}

/* ---- put ------------------------------------------------------------------------------------ */

#if defined(__x86_64__)
RVX_COLD rvx_status_t rvx__rc_put8_slow(rvx__rc_conn_t *c, const void *src, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey);

/* An 8-byte put, the case the kit is measured by: one WQEBB built in SSE registers (ctrl, raddr,
 * inline header + 8 bytes, a zero quarter: mlx5/wqe.h, rvx__mlx5_bb_write8) and stored from
 * them to the queue and to the BlueFlame register; the rkey word and the ctrl's opcode/QPN/DS
 * are precomputed. `hi` is bytes 8-15 of the ctrl segment (fm_ce_se in byte 11): 0 on the fast
 * path. */
RVX_INLINE void rvx__rc_put8_post(rvx__rc_conn_t *c, uint32_t pi, const void *src,
                                    uint64_t raddr, const rvx__mlx5_rkey_t *rkey, uint64_t hi)
{
    rvx__mlx5_bb_t bb;
    rvx__mlx5_bb_write8(&bb, c->ctrl_w8, pi, src, raddr, rkey, hi);
    rvx__mlx5_post_bb(&c->sq, pi, &bb);
}

/* Full queue, or the WQE that asks for a completion (sig_left reached 0) or carries a fence.
 * Arguments in the order put8 receives them, so that its tail call moves no register. */
RVX_COLD rvx_status_t rvx__rc_put8_slow(rvx__rc_conn_t *c, const void *src, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey)
{
    unsigned f;
    uint32_t pi;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    f = rvx__mlx5_moderate(&c->sq, 0);
    if (f & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    rvx__rc_put8_post(c, pi, src, raddr, rkey, (uint64_t)f << 24);
    return RVX_OK;
}

RVX_INLINE rvx_status_t rvx__rc_put8(rvx__rc_conn_t *c, const void *src, uint64_t raddr,
                                       const rvx__mlx5_rkey_t *rkey)
{
    uint32_t pi = c->sq.pi;
    /* a full queue, or the WQE that must ask for a completion (or carry a fence): out of line,
     * as a tail call so that this path needs no stack frame */
    if (RVX_UNLIKELY((int32_t)(pi - c->sq.pi_limit) >= 0)) return rvx__rc_put8_slow(c, src, raddr, rkey);
    if (RVX_UNLIKELY(--c->sq.sig_left == 0)) return rvx__rc_put8_slow(c, src, raddr, rkey);
    rvx__rc_put8_post(c, pi, src, raddr, rkey, 0);
    return RVX_OK;
}
#endif

/* RDMA WRITE with the data inline: ctrl, raddr, inline segment, zeros to the end of the last
 * WQEBB; one or two WQEBBs. */
RVX_INLINE rvx_status_t rvx__rc_put_short_gen(rvx__rc_conn_t *c, const void *src, size_t len,
                                                uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    uint32_t pi, nbb, ds = 2 + RVX__MLX5_INLINE_DS(len);
    uint8_t *wqe, *seg;
    unsigned flags, units;
    size_t used;
    nbb = RVX__MLX5_NBB(ds);
    RVX__RC_NEED(c, nbb);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 0);
    rvx__mlx5_set_ctrl(wqe, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->sq.qpn8, ds, flags, 0);
    rvx__mlx5_set_raddr(wqe + sizeof(struct mlx5_wqe_ctrl_seg), raddr, rkey);
    seg = rvx__mlx5_next_seg(&c->sq, wqe + sizeof(struct mlx5_wqe_ctrl_seg));
    units = rvx__mlx5_set_inline(&c->sq, seg, src, len);
    used = sizeof(struct mlx5_wqe_inl_data_seg) + len;
    rvx__mlx5_zero_pad(&c->sq, seg + used, units * RVX__MLX5_SEG - used, nbb * 4 - ds);
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + nbb);
    rvx__mlx5_commit(&c->sq, pi + nbb, wqe, nbb, NULL);
    return RVX_OK;
}

/* Put short: ctrl, raddr, inline data; one or two WQEBBs. */
RVX_INLINE rvx_status_t rvx__rc_put_short(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    if (len == 0) return RVX_OK;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__rc_put8(ep->c, src, raddr, rkey);
#endif
    return rvx__rc_put_short_gen(ep->c, src, len, raddr, rkey);
}

/* Room in the conn's bounce segment for len bytes (64-aligned), given back in WQE order. A conn
 * without a segment points to the empty record, on which nothing fits, and takes one from the
 * worker's pool in the cold path. */
RVX_INLINE uint8_t *rvx__rc_bounce(rvx__rc_conn_t *c, size_t len)
{
    rvx__rc_bseg_t *s = c->bs;
    uint64_t pos = s->head, off;
    len = (len + 63) & ~(size_t)63;
    off = pos % RVX__RC_BOUNCE_SEG;
    if (off + len > RVX__RC_BOUNCE_SEG) { pos += RVX__RC_BOUNCE_SEG - off; off = 0; }
    if (RVX_UNLIKELY(pos + len > s->lim)) return rvx__rc_bounce_wait(c, len);
    s->head = pos + len;
    return s->buf + off;
}

/* One WQE with a raddr segment and a data segment: WRITE or READ (opcode), from/to local memory
 * addr (lkey). `o` describes what to do when it retires; sig forces a CQE. */
RVX_INLINE void rvx__rc_post_rdma(rvx__rc_conn_t *c, unsigned opcode, const void *addr,
                                    uint32_t len, uint32_t lkey, uint64_t raddr,
                                    const rvx__mlx5_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    uint32_t pi;
    uint8_t *wqe;
    rvx__mlx5_wqe_rdma_t *w;
    unsigned flags;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, sig);
    w = (rvx__mlx5_wqe_rdma_t *)(void *)wqe;
    rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, opcode, c->sq.qpn8, RVX__MLX5_DS_RDMA, flags, 0);
    rvx__mlx5_set_raddr(&w->raddr, raddr, rkey);
    rvx__mlx5_set_data(&w->data, len, lkey, addr);
    memset(w->unused, 0, sizeof(w->unused));
    if (o) rvx__rc_on_retire(c, pi, o);
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    if (opcode == MLX5_OPCODE_RDMA_READ) rvx__mlx5_set_fence(&c->sq);
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

/* Put bcopy: copy into the bounce ring (chunks of RVX_PUT_BCOPY_MAX), one WRITE per chunk. The
 * source can be reused on return. */
RVX_INLINE rvx_status_t rvx__rc_put_bcopy(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    rvx__rc_conn_t *c = ep->c;
    size_t done = 0;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX__RC_BOUNCE_CHUNK && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        size_t n = len - done < RVX__RC_BOUNCE_CHUNK ? len - done : RVX__RC_BOUNCE_CHUNK;
        rvx__mlx5_op_t o;
        uint8_t *b;
        if (n <= RVX__TL_SHORT_MAX) {
            rvx__rc_put_short(ep, (const uint8_t *)src + done, n, raddr + done, rkey);
            done += n;
            continue;
        }
        b = rvx__rc_bounce(c, n);
        if (RVX_UNLIKELY(!b)) return rvx__rc_fail_st(c);
        memcpy(b, (const uint8_t *)src + done, n);
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_NONE;
        o.bounce = c->bs->head;
        rvx__rc_post_rdma(c, MLX5_OPCODE_RDMA_WRITE, b, (uint32_t)n, c->bs->lkey,
                            raddr + done, rkey, &o, 0);
        done += n;
        if (RVX_UNLIKELY(done < len && c->failed)) return rvx__rc_fail_st(c); /* none after an error */
    }
    return RVX_OK;
}

/* Put or get zcopy: straight from / into registered memory, in WQEs of at most 1 GiB; the request
 * completes when the last one has (without a request, the call waits). */
RVX_INLINE rvx_status_t rvx__rc_rdma_zcopy(rvx__rc_conn_t *c, unsigned opcode, const uint8_t *buf,
                                             size_t len, const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                             const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    if (len == 0) return RVX_OK;
    if (RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len))) return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__MLX5_DSEG_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done > RVX__MLX5_DSEG_MAX ? RVX__MLX5_DSEG_MAX : len - done;
        int last = done + n == len;
        rvx__mlx5_op_t o;
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_REQ;
        o.part = RVX__MLX5_PART(done, n, len);
        o.req = req;
        rvx__rc_post_rdma(c, opcode, buf + done, (uint32_t)n, lmem->lkey, raddr + done, rkey,
                            &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && c->failed)) return rvx__rc_stop(c, req); /* none after an error */
    }
    return req == &own ? rvx__rc_wait_req(c, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__rc_put_zcopy(rvx__rc_ep_t *ep, const void *src, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__rc_rdma_zcopy(ep->c, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem,
                                raddr, rkey, req);
}

/* ---- get ------------------------------------------------------------------------------------ */

/* Get bcopy: READs into the bounce ring, copied to dst as each completes; the request completes
 * with the last chunk. Without a request the call waits. */
RVX_INLINE rvx_status_t rvx__rc_get_bcopy(rvx__rc_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    rvx_request_t own;
    size_t done = 0;
    if (len == 0) return RVX_OK;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX__RC_BOUNCE_CHUNK && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__RC_BOUNCE_CHUNK) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done < RVX__RC_BOUNCE_CHUNK ? len - done : RVX__RC_BOUNCE_CHUNK;
        int last = done + n == len;
        rvx__mlx5_op_t o;
        uint8_t *b = rvx__rc_bounce(c, n);
        if (RVX_UNLIKELY(!b)) return rvx__rc_stop(c, req);
        o.kind = RVX__MLX5_ON_COPY;
        o.part = RVX__MLX5_PART(done, n, len);
        o.len = (uint32_t)n;
        o.dst = (uint8_t *)dst + done;
        o.src = b;
        o.req = req;
        o.bounce = c->bs->head;
        rvx__rc_post_rdma(c, MLX5_OPCODE_RDMA_READ, b, (uint32_t)n, c->bs->lkey,
                            raddr + done, rkey, &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && c->failed)) return rvx__rc_stop(c, req); /* none after an error */
    }
    return req == &own ? rvx__rc_wait_req(c, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__rc_get_zcopy(rvx__rc_ep_t *ep, void *dst, size_t len,
                                          const rvx__mlx5_mem_t *lmem, uint64_t raddr,
                                          const rvx__mlx5_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__rc_rdma_zcopy(ep->c, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem,
                                raddr, rkey, req);
}

/* ---- atomics -------------------------------------------------------------------------------- */

/* The atomic segment(s) at seg: native 64-bit (swap_add a, compare b), masked 8-byte FA (add a,
 * field boundary b), masked 8-byte CS (two segments: a, b, then the masks), masked 4-byte
 * (one segment). Returns the last segment written. */
RVX_INLINE uint8_t *rvx__rc_amo_segs(rvx__rc_conn_t *c, uint8_t *seg, unsigned size,
                                       unsigned ds, uint64_t a, uint64_t b, uint64_t amask,
                                       uint64_t bmask)
{
    if (size == 8) {
        if (ds == RVX__MLX5_DS_MASKED_CS8)
            return rvx__mlx5_set_masked_cs64(&c->sq, seg, a, b, amask, bmask);
        rvx__mlx5_set_atomic(seg, a, b);
    } else {
        rvx__mlx5_set_masked32(seg, (uint32_t)a, (uint32_t)b, (uint32_t)amask, (uint32_t)bmask);
    }
    return seg;
}

/* One atomic WQE. native: ATOMIC_FA / ATOMIC_CS (64-bit only); masked: opmod 0x08 | log2(size)-2
 * with the masked segment {swap/add, compare/boundary, swap_mask, compare_mask}. The old value
 * lands in an 8-byte bounce slot and is copied to *fetch when the WQE completes. */
RVX_INLINE rvx_status_t rvx__rc_amo(rvx__rc_conn_t *c, unsigned opcode, unsigned size,
                                      uint64_t a, uint64_t b, uint64_t amask, uint64_t bmask,
                                      uint64_t raddr, const rvx__mlx5_rkey_t *rkey, void *fetch,
                                      rvx_request_t *req)
{
    int masked = opcode == MLX5_OPCODE_ATOMIC_MASKED_CS || opcode == MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned ds = (masked && size == 8 && opcode == MLX5_OPCODE_ATOMIC_MASKED_CS) ?
                  RVX__MLX5_DS_MASKED_CS8 : RVX__MLX5_DS_ATOMIC;
    uint32_t nbb = RVX__MLX5_NBB(ds), pi;
    unsigned opmod = masked ? RVX__MLX5_OPMOD_MASKED(size) : 0u;
    uint8_t *wqe, *seg, *slot;
    rvx__mlx5_wqe_rdma_t *w; /* ctrl and raddr as in an RDMA WQE; then the atomic segment(s) */
    unsigned flags;
    rvx__mlx5_op_t o;
    rvx_request_t own;
    int wait = fetch && !req;

    slot = rvx__rc_bounce(c, 8);
    if (RVX_UNLIKELY(!slot)) return rvx__rc_fail_st(c);
    if (wait) req = &own;
    if (fetch) req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    RVX__RC_NEED(c, nbb);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, fetch != NULL);
    w = (rvx__mlx5_wqe_rdma_t *)(void *)wqe;
    rvx__mlx5_set_ctrl(&w->ctrl, pi, opmod, opcode, c->sq.qpn8, ds, flags, 0);
    rvx__mlx5_set_raddr(&w->raddr, raddr, rkey);
    seg = rvx__mlx5_next_seg(&c->sq, (uint8_t *)(void *)&w->raddr);
    seg = rvx__rc_amo_segs(c, seg, size, ds, a, b, amask, bmask);
    rvx__mlx5_set_data(rvx__mlx5_next_seg(&c->sq, seg), size, c->bs->lkey, slot);
    o.kind = fetch ? (size == 8 ? RVX__MLX5_ON_FETCH64 : RVX__MLX5_ON_FETCH32) : RVX__MLX5_ON_NONE;
    o.part = RVX__MLX5_PART_NONE;
    o.len = size;
    o.dst = fetch;
    o.src = slot;
    o.req = fetch ? req : NULL;
    o.bounce = c->bs->head;
    rvx__rc_on_retire(c, pi, &o);
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + nbb);
    rvx__mlx5_set_fence(&c->sq);
    rvx__mlx5_commit(&c->sq, pi + nbb, wqe, nbb, NULL);
    if (wait) return rvx__rc_wait_req(c, &own);
    return fetch ? RVX_INPROGRESS : RVX_OK;
}

/* Map an rvx_amo_op_t to one NIC atomic (see proto/amo.h for the mapping). */
RVX_INLINE rvx_status_t rvx__rc_atomic(rvx__rc_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t cmp, uint64_t raddr,
                                         const rvx__mlx5_rkey_t *rkey, void *fetch, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
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
            return rvx__rc_amo(c, MLX5_OPCODE_ATOMIC_CS, 8, v, cmp, 0, 0, raddr, rkey, fetch, req);
        return rvx__rc_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, 4, v, cmp, ones, ones, raddr, rkey,
                             fetch, req);
    case RVX_AMO_SET:
    case RVX_AMO_SWAP: /* compare nothing, replace every bit */
        return rvx__rc_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, size, v, 0, ones, 0, raddr, rkey,
                             fetch, req);
    case RVX_AMO_AND: /* clear the bits that are 0 in v */
        return rvx__rc_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, size, 0, 0, ~v & ones, 0, raddr,
                             rkey, fetch, req);
    case RVX_AMO_OR: /* set the bits that are 1 in v */
        return rvx__rc_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, size, v, 0, v, 0, raddr, rkey,
                             fetch, req);
    case RVX_AMO_XOR: /* masked fetch-add with a field boundary at every bit: no carries */
        return rvx__rc_amo(c, MLX5_OPCODE_ATOMIC_MASKED_FA, size, v, ones, 0, 0, raddr, rkey,
                             fetch, req);
    default: /* MULT, MIN, MAX, UMIN, UMAX: compare-and-swap loop */
        return rvx__rc_amo_loop(c, op, size, v, raddr, rkey, fetch, req);
    }
    /* the adds: native 64-bit FA; 32-bit through masked FA without boundaries */
    return rvx__rc_amo(c, fa, size, v, 0, 0, 0, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__rc_atomic64(rvx__rc_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    return rvx__rc_atomic(ep, op, 8, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__rc_atomic32(rvx__rc_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    return rvx__rc_atomic(ep, op, 4, operand, compare, raddr, rkey, fetch, req);
}

/* ---- sends ---------------------------------------------------------------------------------- */

/* A SEND with immediate whose body (at most 44 bytes) goes inline in one WQEBB. An empty body
 * has no inline segment (libmlx5 emits none for zero bytes). */
RVX_INLINE void rvx__rc_send_inline(rvx__mlx5_sq_t *sq, uint8_t *wqe, uint32_t pi, unsigned flags,
                                      uint32_t imm_be, const void *body, size_t len)
{
    unsigned ds = 1 + (len ? RVX__MLX5_INLINE_DS(len) : 0);
    rvx__mlx5_wqe_send_inl_t *w = (rvx__mlx5_wqe_send_inl_t *)(void *)wqe;
    rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_SEND_IMM, sq->qpn8, ds, flags, imm_be);
    /* one WQEBB never wraps; with no body the would-be header is padding, zeroed */
    w->inl.byte_count = len ? rvx_htobe32((uint32_t)len | MLX5_INLINE_SEG) : 0;
    memcpy(w->body, body, len);
    /* callers keep len <= the maximum, so -O2 folds the test away; at -O0 it stops gcc from
     * warning about the padding of a larger constant length on a branch never taken */
    memset(w->body + len, 0, len <= RVX__MLX5_BB_INLINE_MAX ? RVX__MLX5_BB_INLINE_MAX - len : 0);
}

#if RVX_CAN_RECEIVE

/* Room for one more frame at the peer: the cached limit, else the peer's credit word (how many
 * frames we may have sent in all, of which the low 32 bits are compared by difference). A failed
 * conn has tx_limit = tx_sent and gets none. */
RVX_INLINE int rvx__rc_credit(rvx__rc_conn_t *c)
{
    if (RVX_LIKELY((int32_t)(c->tx_sent - c->tx_limit) < 0)) return 1;
    if (c->failed) return 0;
    c->tx_limit = (uint32_t)*c->credit_word;
    return (int32_t)(c->tx_sent - c->tx_limit) < 0;
}

/* Where to write a frame of len bytes: small frames go inline in the WQE (built in the conn's
 * scratch area first), others from the bounce ring. NULL when the peer has no free receive
 * buffer. */
RVX_INLINE void *rvx__rc_am_claim(rvx__rc_ep_t *ep, unsigned chan, size_t len)
{
    rvx__rc_conn_t *c = ep->c;
    (void)chan;
    if (!rvx__rc_credit(c)) return NULL;
    if (len <= RVX__MLX5_BB_INLINE_MAX) return c->scratch;
    return rvx__rc_bounce(c, len);
}

/* SEND with immediate (info | chan << 16): inline when it fits one WQEBB with the ctrl segment,
 * otherwise a data segment on the bounce ring. */
RVX_INLINE void rvx__rc_publish_gen(rvx__rc_conn_t *c, unsigned chan, void *body, size_t len,
                                    unsigned info)
{
    uint32_t pi, imm = rvx_htobe32(info | chan << 16);
    uint8_t *wqe;
    unsigned flags;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 0);
    if (len <= RVX__MLX5_BB_INLINE_MAX) { /* body is the scratch area: copy it into the WQE */
        rvx__rc_send_inline(&c->sq, wqe, pi, flags, imm, body, len);
    } else {
        rvx__mlx5_op_t o;
        rvx__mlx5_wqe_send_t *w = (rvx__mlx5_wqe_send_t *)(void *)wqe;
        rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_SEND_IMM, c->sq.qpn8, 2, flags, imm);
        rvx__mlx5_set_data(&w->data, (uint32_t)len, c->bs->lkey, body);
        memset(w->unused, 0, sizeof(w->unused));
        memset(&o, 0, sizeof(o)); /* the bounce space goes back when this WQE retires */
        o.kind = RVX__MLX5_ON_NONE;
        o.bounce = c->bs->head;
        rvx__rc_on_retire(c, pi, &o);
    }
    if (flags & RVX__MLX5_CE) rvx__rc_mark_sig(c, pi, pi + 1);
    c->tx_sent++;
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
}

RVX_COLD rvx_status_t rvx__rc_publish_slow(rvx__rc_conn_t *c, unsigned chan, void *body,
                                             size_t len, unsigned info)
{
    rvx__rc_publish_gen(c, chan, body, len, info);
    return RVX_OK;
}

#if defined(__x86_64__)
/* SEND with immediate of flen (12 to 28) bytes inline from frame, in one WQEBB, unsignaled (ctrl
 * 16 + inline 4 + flen, padded):
 *   q[0] ctrl: opmod_idx_opcode, qpn_ds | signature, stream id, fm_ce_se all 0, imm_be
 *   q[1] inline segment: byte_count (flen | MLX5_INLINE_SEG), frame bytes 0-11
 *   q[2] frame bytes 12 to flen - 1, then zeros (frame must be readable to byte 27)
 *   q[3] zero
 * With flen known at compile time the mask is one constant: as put8, no memory but the frame. */
RVX_INLINE void rvx__rc_bb_send_small(rvx__mlx5_bb_t *bb, uint64_t ctrl_word, uint32_t pi,
                                        const uint8_t *frame, unsigned flen, uint32_t imm_be)
{
    static const uint8_t keep[32] __attribute__((aligned(32))) = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    /* q[3], bytes 48-63: padding */
    bb->q[3] = _mm_setzero_si128();
    /* q[2], bytes 32-47: the frame's bytes 12.., as many as there are */
    bb->q[2] = _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(frame + 12)),
                             _mm_loadu_si128((const __m128i *)(const void *)(keep + 28 - flen)));
    /* q[1], bytes 16-31: inline byte_count | frame bytes 0-11 */
    bb->q[1] = _mm_or_si128(_mm_slli_si128(_mm_loadu_si128((const __m128i *)(const void *)frame), 4),
                            _mm_cvtsi32_si128((int)rvx_htobe32(flen | MLX5_INLINE_SEG)));
    /* q[0], bytes 0-15: opmod_idx_opcode, qpn_ds | zeros, imm. The index is added, not ORed
     * (the bits do not overlap), so that it folds with the DS constant into one lea; the high
     * half is a constant when imm is, ORed in one instruction */
    bb->q[0] = _mm_or_si128(_mm_cvtsi64_si128((long long)rvx_htobe64(ctrl_word + ((uint64_t)(uint16_t)pi << 40))),
                            _mm_set_epi64x((long long)((uint64_t)imm_be << 32), 0));
}
#endif

/* RVX_OK always: callers return it as their own status, so the cold path is a jump. */
RVX_INLINE rvx_status_t rvx__rc_am_publish(rvx__rc_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
    rvx__rc_conn_t *c;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && __builtin_constant_p(info) && __builtin_constant_p(chan) &&
        (len == 8 || (len >= 12 && len <= 28))) {
        /* a frame of known size up to 28 bytes (an 8-byte message, a tag send of 8 bytes): as
         * put8, one WQEBB from SSE registers. Such a frame is in the conn's scratch area
         * (rvx__rc_am_claim), readable to byte 47; the ctrl word differs from the 8-byte SEND's
         * only in DS. The conn is the one around the scratch area: the caller's stores into the
         * frame make the compiler load ep->c again, not this */
        uint32_t pi;
        c = (rvx__rc_conn_t *)(void *)((uint8_t *)body - offsetof(rvx__rc_conn_t, scratch));
        pi = c->sq.pi;
        rvx__mlx5_bb_t bb;
        if (RVX_UNLIKELY((int32_t)(pi - c->sq.pi_limit) >= 0 || --c->sq.sig_left == 0))
            return rvx__rc_publish_slow(c, chan, body, len, info);
        if (len == 8)
            rvx__mlx5_bb_send8(&bb, c->ctrl_send2, pi, body, rvx_htobe32(info | chan << 16));
        else
            rvx__rc_bb_send_small(&bb, c->ctrl_send2 + (RVX__MLX5_INLINE_DS(len) - 1), pi,
                                    (const uint8_t *)body, (unsigned)len,
                                    rvx_htobe32(info | chan << 16));
        rvx__mlx5_post_bb(&c->sq, pi, &bb);
        c->tx_sent++; /* after the WQE's stores: one add to memory, not a copy kept in a register */
        return RVX_OK;
    }
#endif
    c = ep->c;
    rvx__rc_publish_gen(c, chan, body, len, info);
    return RVX_OK;
}

/* Nonzero while frames are delivered (progress sets in_rx around it, so whenever a handler
 * runs): proto/am.h refuses requests with it. Reached from the conn the send path loads anyway,
 * one load and a compare, not the two loads of the worker's count. */
#define RVX__RC_IN_HANDLER(tl) ((tl)->c->ifc->in_rx)
/* The word that says so, for a pair (tl/pair.h), which sets it around shm's deliveries too. */
RVX_INLINE uint8_t *rvx__rc_iface_in_rx(rvx__rc_iface_t *ifc) { return &ifc->in_rx; }

/* Zero-copy message: one SEND_IMM WQEBB with the header as an inline segment and the body as a
 * data segment on the caller's registered memory (lmem's lkey), no copy of the body. Always
 * signaled: the buffer is the NIC's until the WQE retires, and req completes then, through the
 * ops table as zero-copy gets do (without a request the call waits). RVX_ERR_NO_RESOURCE: no
 * credit for a frame at the peer, nothing posted. hdrlen + len must fit a receive frame. */
#define RVX__RC_AM_ZCOPY         1  /* real zero-copy: the body must be registered */
#define RVX__RC_AM_ZCOPY_HDR_MAX 28 /* ctrl 16 + inline 4 + 28 + data seg 16: one WQEBB */
RVX_INLINE rvx_status_t rvx__rc_am_zcopy(rvx__rc_ep_t *ep, unsigned chan, const void *hdr, size_t hdrlen,
                                         const void *buf, size_t len, const rvx__mlx5_mem_t *lmem,
                                         unsigned info, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    uint32_t pi;
    uint8_t *wqe, *seg;
    unsigned flags, ids = hdrlen ? RVX__MLX5_INLINE_DS(hdrlen) : 0;
    rvx__mlx5_op_t o;
    rvx_request_t own;
    if (hdrlen > RVX__RC_AM_ZCOPY_HDR_MAX || hdrlen + len > RVX__RC_FRAME || (len && !lmem))
        return RVX_ERR_INVALID_PARAM;
    if (!rvx__rc_credit(c))
        return !c->failed ? RVX_ERR_NO_RESOURCE : rvx__rc_fail_st(c);
    if (!req) req = &own;
    req->status = RVX_INPROGRESS;
    RVX__RC_NEED(c, 1);
    pi = c->sq.pi;
    wqe = rvx__mlx5_slot(&c->sq, pi);
    flags = rvx__mlx5_moderate(&c->sq, 1);
    rvx__mlx5_set_ctrl(wqe, pi, 0, MLX5_OPCODE_SEND_IMM, c->sq.qpn8, 1 + ids + (len ? 1 : 0), flags,
                       rvx_htobe32(info | chan << 16));
    seg = wqe + sizeof(struct mlx5_wqe_ctrl_seg); /* [inline header] [data segment], then zeros */
    memset(seg, 0, RVX__MLX5_BB - sizeof(struct mlx5_wqe_ctrl_seg));
    if (hdrlen) seg += 16 * rvx__mlx5_set_inline(&c->sq, seg, hdr, hdrlen);
    if (len) rvx__mlx5_set_data(seg, (uint32_t)len, lmem->lkey, buf);
    memset(&o, 0, sizeof(o));
    o.kind = RVX__MLX5_ON_REQ;
    o.req = req;
    rvx__rc_on_retire(c, pi, &o);
    rvx__rc_mark_sig(c, pi, pi + 1);
    c->tx_sent++;
    rvx__mlx5_commit(&c->sq, pi + 1, wqe, 1, NULL);
    return req == &own ? rvx__rc_wait_req(c, &own) : RVX_INPROGRESS;
}
#endif

/* ---- progress and flush --------------------------------------------------------------------- */

/* Progress: nothing without live endpoints (or, in an RMA-only build, without outstanding
 * signaled work); otherwise one look at the CQE at the consumer index. */
RVX_INLINE int rvx__rc_progress(rvx__rc_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    if (!ifc->nlive) return 0;
#else
    if (!ifc->outstanding) return 0;
#endif
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(&ifc->cq, *ifc->cq.next_op_own))) {
#if RVX_CAN_RECEIVE
        if (RVX_LIKELY(!ifc->def_head)) return 0;
#else
        return 0;
#endif
    }
    return rvx__rc_progress_slow(ifc);
}

/* Done at once when nothing is outstanding, or when the CQE at the head of the CQ is this QP's
 * successful completion of its last signaled WQE: then everything issued has completed. That
 * CQE is left for progress to consume (it retires the queue space and runs any pending copies);
 * a flush only needs to know it is there. Otherwise the slow path. */
RVX_INLINE rvx_status_t rvx__rc_ep_flush(rvx__rc_ep_t *ep, rvx_request_t *req)
{
    rvx__rc_conn_t *c = ep->c;
    const rvx__rc_iface_t *ifc;
    const struct mlx5_cqe64 *cqe;
    uint32_t pi = c->sq.pi;
    if (c->sq.ci == pi) return RVX__RC_ERR(c);
    ifc = c->ifc;
    cqe = RVX_CONTAINER_OF(ifc->cq.next_op_own, const struct mlx5_cqe64, op_own);
    if (RVX_LIKELY(c->tx.last_sig_pi == pi && rvx__mlx5_cqe_req_ok(&ifc->cq, cqe))) {
        rvx_from_device_barrier(); /* the owner check before the CQE's other bytes */
        if (RVX_LIKELY((cqe->sop_drop_qpn & rvx_htobe32(RVX__MLX5_QPN_MASK)) == c->qpn_be &&
                       cqe->wqe_counter == c->tx.last_sig_idx_be))
            return RVX_OK;
    }
    return rvx__rc_flush_slow(c, req);
}

/* ---- cold code ------------------------------------------------------------------------------ */

#include "rc/setup.h"
#include "rc/poll.h"
#include "rc/reconnect.h"

#endif /* RVX_TL_RC_MLX5_H */
