/* rvx/tl/rc/decl.h: rc_mlx5's declarations: build-time constants, the types (the address, the
 * conn, a bounce segment, the endpoint, the iface), what every file reads of them (a conn's rank
 * and error, the clock), and the prototypes of the cold functions that a file calls before the
 * file that defines them (the order of tl/rc_mlx5.h). Re-connection's own records are in
 * tl/rc/hello.h, read only there and in tl/rc/reconnect.h.
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
 *          points it there (re-connecting a failed conn first); it changes no QP state. */
#ifndef RVX_TL_RC_DECL_H
#define RVX_TL_RC_DECL_H

/* This build's mlx5 transport, for the code tl/mlx5/ writes once for both (tl/mlx5/chunk.h). */
#define RVX__MLX5_NET(x) rvx__rc_##x
#define RVX__MLX5_NET_BB_PUT8 1 /* rvx__rc_bb_put8: every conn has the one-WQEBB put */

#define RVX__RC_QPT_EMPTY (-1)
#define RVX__RC_QPT_GONE  (-2)              /* a QP that no longer completes anything */
#define RVX__RC_QPT_HELLO 0x40000000        /* the iface's hello QP (tl/rc/hello.h) */
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
#define RVX__RC_BOUNCE_NSEG  (RVX__RC_BOUNCE_BYTES / RVX__RC_BOUNCE_SEG)
/* the pool's mapping: the segments, then each segment's fetch slot */
#define RVX__RC_BPOOL_BYTES  (RVX__RC_BOUNCE_BYTES + RVX__RC_BOUNCE_NSEG * RVX__MLX5_FSLOT)

/* ---- types ---------------------------------------------------------------------------------- */

/* An iface's address: the port, the control region and the hello QP (tl/rc/hello.h), then
 * one QPN per rank: the QP towards that rank. */
typedef struct rvx__rc_addr {
    /* kept after wire-up (RVX__RC_ADDR_KEPT): what re-connection reads */
    uint64_t ctrl_addr;
    uint32_t ctrl_rkey;
    uint32_t hello_qpn; /* the iface's UD QP for re-connection messages */
    union {
        uint16_t lid;       /* InfiniBand */
        uint8_t  gid_lo[8]; /* RoCE: GID bytes 8-15 */
    } at;
    /* read by the wire-up only */
    uint8_t  gid_hi[8]; /* RoCE: GID bytes 0-7 (the iface keeps them, once when shared) */
    uint8_t  is_roce;
    uint8_t  pad[3];
    int32_t  nranks;
    uint64_t magic;
    uint32_t qpn[2];    /* nranks entries: QP to rank r at r (indexed through RVX__RC_QPN: the
                         * array runs past its declared two) */
} rvx__rc_addr_t;
#define RVX__RC_ADDR_SIZE(n) (offsetof(rvx__rc_addr_t, qpn) + 4 * (size_t)((n) > 2 ? (n) : 2))
#define RVX__RC_QPN(addr) ((uint32_t *)(void *)((uint8_t *)(addr) + offsetof(rvx__rc_addr_t, qpn)))
#define RVX__RC_ADDR_KEPT(n) offsetof(rvx__rc_addr_t, gid_hi) /* after wire-up, 24 bytes a rank: no
                                                                * GID top, check words or QPN table */
RVX_STATIC_ASSERT(offsetof(rvx__rc_addr_t, gid_hi) == 24, "rc_mlx5 keeps 24 bytes of an address");

struct rvx__rc_iface;
struct rvx__rc_ep;

typedef struct rvx__rc_conn {
    /* hot: the put path reads this line */
    rvx__mlx5_sq_t        sq;
    uint64_t              ctrl_w8;     /* RDMA_WRITE << 32 | qpn << 8 | 3: a put8's first ctrl
                                          * word before the byte swap, WQE index excluded */
    uint64_t              ctrl_send2;  /* the same for an 8-byte SEND_IMM (DS 2) */
    uint8_t               failed;
    uint8_t               in_wf;       /* in the iface's flush list (else sq.hold) */
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

/* The bytes of a conn that drive its QP: the send queue and the book-keeping of its WQEs, the
 * ctrl words precomputed from the QPN, both QPNs, the verbs object, the worker flush's mark.
 * What a peer costs because it has a QP of its own (bench/scale.c, rc/t_rc_peer_state count the
 * rest apart from it). */
#define RVX__RC_CONN_QP_BYTES                                                                     \
    (sizeof(((rvx__rc_conn_t *)0)->sq) + sizeof(((rvx__rc_conn_t *)0)->tx) +                      \
     sizeof(((rvx__rc_conn_t *)0)->ctrl_w8) + sizeof(((rvx__rc_conn_t *)0)->ctrl_send2) +         \
     sizeof(((rvx__rc_conn_t *)0)->qpn_be) + sizeof(((rvx__rc_conn_t *)0)->qpn) +                 \
     sizeof(((rvx__rc_conn_t *)0)->rqpn) + sizeof(((rvx__rc_conn_t *)0)->qp) +                    \
     sizeof(((rvx__rc_conn_t *)0)->wflush_pi))

/* The queue the code tl/mlx5/ shares posts to and flushes (RVX__MLX5_NET(q_t)). */
typedef rvx__rc_conn_t rvx__rc_q_t;

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
    rvx__mlx5_fslot_t fs;          /* its holder's blocking fetches land here (tl/mlx5/fetch.h) */
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
    int8_t            wflush_err;  /* what the next to end reports (tl/mlx5/tx.h) */
    uint32_t          wf_head;     /* the flush list (tl/rc/conn.h): conns that posted since a flush
                                    * found them idle, by rank, linked by their wf_next */
    unsigned          nwf;         /* how many */
    rvx__mlx5_bf_t   *bfs;         /* BlueFlame registers in use */
    rvx__mlx5_txpool_t txrecs;     /* op records of every conn (tl/mlx5/tx.h) */
    rvx__mlx5_srq_t   srq;         /* every QP's receives, frames and re-connection hellos */
    uint32_t          credits;     /* frames each peer may have in flight to us */
    uint32_t          credit_q;    /* credits go back when this many frames were consumed */
    unsigned          nrec;        /* conns waiting to follow a peer's re-connection */
    struct rvx__rc_hello *hello; /* the hello QP, failed QPs, the re-connections under way */
    rvx__mlx5_gids_t  gids;        /* RoCE: the peers' GID top halves (low ones: kept addresses) */
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

/* Milliseconds on the monotonic clock in 32 bits: keepalive times, compared by difference. */
RVX_INLINE uint32_t rvx__rc_now_ms(void)
{
    return (uint32_t)(uint64_t)(rvx__now_s() * 1000.0);
}

/* ---- cold functions called before their file ------------------------------------------------ */

/* tl/rc/send.h */
RVX_COLD void rvx__rc_grant_adopt(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c);
/* tl/rc/bounce.h */
RVX_COLD uint8_t *rvx__rc_bounce_wait(rvx__rc_conn_t *c, size_t len);
/* tl/rc/amo.h (the general path of tl/mlx5/fetch.h, included from tl/rc/rma.h) */
RVX_INLINE rvx_status_t rvx__rc_amo(rvx__rc_ep_t *ep, unsigned opcode, unsigned size,
                                    uint64_t a, uint64_t b, uint64_t amask, uint64_t bmask,
                                    uint64_t raddr, const rvx__mlx5_rkey_t *rkey, void *fetch,
                                    rvx_request_t *req);
/* tl/rc/cq.h */
RVX_COLD int rvx__rc_drain(rvx__rc_iface_t *ifc, int deliver);
RVX_COLD int rvx__rc_poll_blocking(rvx__rc_iface_t *ifc);
/* tl/rc/iface.h */
RVX_COLD rvx_status_t rvx__rc_ep_alive(rvx__rc_ep_t *ep);
/* tl/rc/hello.h */
RVX_COLD rvx_status_t rvx__rc_hello_init(rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_hello_fini(rvx__rc_iface_t *ifc);
RVX_COLD uint32_t rvx__rc_hello_qpn(const rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_hello_addrs(rvx__rc_iface_t *ifc, const uint8_t *addrs, size_t stride);
RVX_COLD const rvx__rc_addr_t *rvx__rc_peer_addr(const rvx__rc_iface_t *ifc, int rank);
/* tl/rc/reconnect.h */
RVX_COLD void rvx__rc_hello(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c, uint32_t imm_be,
                              const uint8_t *body);
RVX_COLD void rvx__rc_hello_cqe(rvx__rc_iface_t *ifc, const struct mlx5_cqe64 *cqe, unsigned opcode);
RVX_COLD void rvx__rc_rec_poll(rvx__rc_iface_t *ifc);
RVX_COLD void rvx__rc_rec_drop(rvx__rc_conn_t *c);
RVX_COLD void rvx__rc_to_err(rvx__rc_conn_t *c, rvx_status_t st);
RVX_COLD rvx_status_t rvx__rc_reconnect(rvx__rc_iface_t *ifc, rvx__rc_conn_t *c);

#endif /* RVX_TL_RC_DECL_H */
