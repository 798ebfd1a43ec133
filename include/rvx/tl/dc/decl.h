/* rvx/tl/dc/decl.h: dc_mlx5's declarations: its constants, its types (the address, a DCI, an
 * endpoint, the iface and the records credits keep), the upcall a received frame goes to, and
 * the prototypes of the cold functions a file calls before the file that defines them is
 * included (tl/dc_mlx5.h lists the files in order). No function is defined here. */
#ifndef RVX_TL_DC_DECL_H
#define RVX_TL_DC_DECL_H

/* This build's mlx5 transport, for the code tl/mlx5/ writes once for both (tl/mlx5/chunk.h). */
#define RVX__MLX5_NET(x) rvx__dc_##x
/* rvx__dc_bb_put8 in a batch: not on a shared DCI, whose slots record their endpoints */
#define RVX__MLX5_NET_BB_PUT8 (RVX_DC_DCI_POLICY != RVX_DC_DCI_FIXED)

#define RVX__DC_KEY        0x7276784443000001ull /* the DC access key of every rvx DCT */
#define RVX__DC_SQ_RESERVE 4u                    /* WQEBBs kept for a flush NOP */
#define RVX__DC_AV_BASE    16u                   /* the address segment without GRH (IB) */
#define RVX__DC_AV_EXT     48u                   /* with GRH (RoCE): mlx5_wqe_datagram_seg */
/* The bounce rings of all DCIs, then each DCI's fetch slot: one mapping (rvx__map). */
#define RVX__DC_BOUNCE_ALL ((size_t)RVX_DC_NUM_DCI * RVX_DC_BOUNCE_BYTES)
#define RVX__DC_BOUNCE_MAP (RVX__DC_BOUNCE_ALL + (size_t)RVX_DC_NUM_DCI * RVX__MLX5_FSLOT)
/* Which DCI an endpoint's WQEs go to (the top of tl/dc/dci.h says how each works). */
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

/* ---- types ----------------------------------------------------------------------------------- */

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
    uint8_t               failed;      /* in ERR: its WQEs come back flushed, then it recovers */
    rvx_status_t          fail_st;     /* the status of the error CQE that failed it */
    uint8_t               am_claim;    /* a frame claimed in its bounce ring is not published yet:
                                        * the DCI stays with its endpoint */
    uint8_t              *bounce;      /* its slice of the iface's registered bounce memory */
    uint64_t              b_head, b_tail;
    rvx__mlx5_fslot_t     fs;          /* its blocking fetches land here (tl/mlx5/fetch.h) */
    const struct rvx__dc_ep *ka_ep;    /* the endpoint whose keepalive went last on it, and pi */
    uint32_t              ka_pi;       /* after it: in flight while ci is before this */
    struct ibv_qp        *qp;
    uint32_t              qpn;
#if RVX_DC_DCI_POLICY == RVX_DC_DCI_FIXED
    struct rvx__dc_ep   **owner;       /* per WQEBB slot, the endpoint whose WQE starts there:
                                        * an error CQE fails it (the DCI is shared) */
#endif
} rvx__dc_dci_t;

/* The queue the code tl/mlx5/ shares posts to and flushes (RVX__MLX5_NET(q_t)). */
typedef rvx__dc_dci_t rvx__dc_q_t;

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
    uint16_t dirty;       /* on the list of ranks whose taken count is not reported yet */
    uint8_t  no_msgs;     /* its messages go another way (a pair's on-node peer): neither side
                           * takes credits from the other's pool (rvx__dc_ep_no_msgs) */
    uint8_t  pad;
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
/* In a report word of the control region (word 1 + r: rank r's count of our frames it took, in
 * the low 32 bits): rank r's worker is going (rvx__dc_iface_leave). */
#define RVX__DC_LEFT (1ull << 63)

typedef rvx__mlx5_deferred_t rvx__dc_deferred_t; /* a frame set aside (tl/mlx5/srq.h) */

typedef struct rvx__dc_iface {
    /* hot: progress reads these */
    unsigned        nlive;       /* live endpoints, plus one while worker flushes wait: progress
                                  * looks at the CQ only while it is nonzero (tl/dc/iface.h) */
    unsigned        quiet;       /* progress calls with nothing to do before a look at the slow
                                  * work (frames set aside: 1; credits to sweep: a tick) */
    unsigned        outstanding; /* signaled WQEs not yet completed, all DCIs */
    uint32_t        flushed_pis; /* the DCIs' producer indices added up when a worker flush last
                                  * found them all idle (rvx__dc_iface_flushed) */
    rvx__mlx5_cq_t  cq;
    unsigned        av_bytes;    /* RVX__DC_AV_BASE or RVX__DC_AV_EXT */
    /* cold */
    rvx__mlx5_ctx_t  *ctx;
    struct ibv_cq  *ibcq;
    rvx__mlx5_srq_t srq;         /* the DCT's receive buffers */
    struct ibv_qp  *dct;
    rvx__dc_dci_t   dci[RVX_DC_NUM_DCI];
    rvx__dc_dci_t   no_dci;      /* what an endpoint without a DCI points to: a queue that is
                                  * always full (held, no room) and always done, so hot paths
                                  * test no pointer */
    unsigned        next_dci;    /* where the search for a free DCI starts (round robin) */
    unsigned long   dci_taken;   /* DCIs taken from an endpoint whose work had completed */
    unsigned long   pool_waits;  /* times a post found every DCI holding outstanding work */
    uint8_t        *bounce;
    struct ibv_mr  *bounce_mr;
    uint32_t        bounce_lkey;
    rvx__mlx5_bf_t *bfs;
    rvx__mlx5_txpool_t txrecs;   /* op records of every DCI (tl/mlx5/tx.h) */
    int             rank, nranks;
    rvx_request_t  *wflush;      /* pending worker flushes */
    int8_t          wflush_err;  /* what the next to end reports (tl/mlx5/tx.h) */
    const uint8_t  *addrs;       /* every rank's address as the worker keeps it (addr_stride bytes
                                  * apart): the GID's low half and control region are read there */
    size_t          addr_stride;
    rvx__mlx5_gids_t gids;       /* RoCE: the GIDs' top halves (the low ones are in addrs) */
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
    uint8_t         leaving;     /* the worker is being destroyed (rvx__dc_iface_leave) */
    double          sweep_t;     /* when the last sweep ran */
    uint64_t        scratch[(RVX__DC_AM_INLINE + 7) / 8 + 2]; /* small frames are built here
                                                 * (readable past a short frame's end) */
} rvx__dc_iface_t;

/* ---- cold functions called before the file that defines them --------------------------------- */

/* tl/dc/dci.h: the pool */
RVX_COLD rvx__dc_dci_t *rvx__dc_get_slow(rvx__dc_ep_t *ep, uint32_t nbb);
RVX_COLD uint8_t *rvx__dc_bounce_wait(rvx__dc_dci_t *d, const rvx__dc_ep_t *ep, size_t len);
/* tl/dc/rma.h: transfers and atomics */
RVX_COLD rvx_status_t rvx__dc_stop(rvx__dc_ep_t *ep, rvx__dc_dci_t *d, rvx_request_t *req);
RVX_INLINE rvx_status_t rvx__dc_amo(rvx__dc_ep_t *ep, unsigned opcode, unsigned size, uint64_t a,
                                    uint64_t b, uint64_t amask, uint64_t bmask, uint64_t raddr,
                                    const rvx__mlx5_rkey_t *rkey, void *fetch, rvx_request_t *req);
#if RVX_CAN_RECEIVE
/* tl/dc/credit.h */
RVX_COLD int rvx__dc_credit_slow(rvx__dc_ep_t *ep);
RVX_COLD void rvx__dc_sweep(rvx__dc_iface_t *ifc, const rvx__dc_ep_t *keep, int all);
#endif
/* tl/dc/cq.h: the CQ */
RVX_COLD int rvx__dc_drain(rvx__dc_iface_t *ifc);
RVX_COLD int rvx__dc_progress_slow(rvx__dc_iface_t *ifc);
/* tl/dc/iface.h: flush and liveness */
RVX_COLD rvx_status_t rvx__dc_flush_slow(rvx__dc_ep_t *ep, rvx_request_t *req);
RVX_COLD rvx_status_t rvx__dc_ep_alive(rvx__dc_ep_t *ep);

#endif /* RVX_TL_DC_DECL_H */
