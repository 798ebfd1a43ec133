/* rvx/tl/rc_mlx5.h: reliable-connected queue pairs on an NVIDIA ConnectX (mlx5), driven directly.
 *
 * Set-up goes through rdma-core (ibv_* and mlx5dv_*: device, PD, CQ, QPs, memory registration);
 * the data path writes WQEs into the send queue, the doorbell record and the BlueFlame register
 * itself, and reads CQEs straight from the completion queue, as mlx5dv(7) allows. Facts about the
 * layouts are in rdma-core's mlx5dv.h (segment structs, opcodes) and are cited where used.
 *
 * Objects
 *   ctx    one ibv_context and PD per process and lane (RVX_DEV=name[:port], default the first
 *          mlx5 device; with RVX_LANES > 1, RVX_DEV=mlx5_0,mlx5_1 gives lane i the i-th name, by
 *          default lane i opens the i-th mlx5 device)
 *   iface  per worker: one CQ for sends and receives, one RC QP per rank of the job (created at
 *          rvx_worker_create, in INIT), and a small registered control region where peers write
 *          credits. Its address carries the port's LID/GID and every QP's number.
 *   conn   per (worker, peer): the QP, its send-queue geometry and counters, receive buffers, a
 *          registered bounce ring for copies; it lives as long as the iface, so an endpoint
 *          destroyed and created again continues where it stopped.
 *   ep     what rvx_ep_t embeds: a pointer to the conn. rvx_ep_create takes the QP to RTR/RTS.
 *
 * Send queue. One WQE per operation; one in RVX_MLX5_SIG_EVERY is signaled (and every WQE that
 * carries a request, a copy-out or bounce memory to give back). Each WQEBB slot has an `ops` entry
 * that the CQE handler consults, so the hot path touches only the WQE, the counters, the doorbell
 * record and the register. A full queue is handled inside the call: it polls the CQ until a slot
 * frees (or the endpoint fails), so puts never return RVX_ERR_NO_RESOURCE.
 *
 * Messages (RVX_CAN_RECEIVE builds). SEND with immediate = info | channel << 16 into per-QP
 * receive buffers of RVX__MLX5_FRAME bytes. Flow control by credits: a receiver reports how many
 * frames it has consumed by an RDMA WRITE of that count into the sender's control region (so a
 * credit message never needs a receive buffer), every quarter of the queue; a sender with no
 * credit gets NULL from rvx__tl_am_claim (RVX_ERR_NO_RESOURCE for requests). RNR cannot happen.
 *
 * Errors. An error CQE fails the operation it names (remote access -> RVX_ERR_REMOTE_ACCESS,
 * retries exhausted -> RVX_ERR_PEER_FAILED) and marks the endpoint failed; the WQEs after it are
 * flushed by the NIC and their requests complete with RVX_ERR_CANCELED; flushes return the first
 * error. Other endpoints are not affected.
 *
 * Re-connection. Every conn has a spare QP, connected at worker creation to the peer's spare and
 * left in RTR with one receive posted for a hello message (imm info 0xffff). rvx_ep_create on a
 * failed conn moves the old QP to ERR, waits until it has flushed everything, takes the spare
 * as its QP (to RTS, fresh counters), creates the next spare and sends a hello (REQ) carrying
 * that spare's QPN. The peer's NIC acknowledges it even if its process never looks; when the
 * peer polls, it sees the REQ arrive on its spare, fails and drains its own old QP the same way,
 * adopts its spare and answers with a hello (ACK) carrying its next spare's QPN. Each side then
 * takes its next spare to RTR towards the other's, ready for the next failure. Messages are not
 * sent before the peer's hello arrived (it grants the credits); puts, gets and atomics work at
 * once, since the peer's spare answers them in RTR. Failed QPs are kept (in ERR) until the
 * worker goes: destroying or resetting a QP makes libmlx5 clean its CQEs out of a CQ whose
 * consumer index it does not know here.
 *
 * Ordering (x86-64): WQE stores, then the doorbell record (compiler barrier), then sfence, the
 * BlueFlame copy or 8-byte doorbell, sfence, toggle the BlueFlame half. */
#ifndef RVX_TL_RC_MLX5_H
#define RVX_TL_RC_MLX5_H

#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "contract.h"

#define RVX__MLX5_MAGIC     0x7276784d4c58ull /* "rvxMLX" */
#define RVX__MLX5_FENCE     0x80u             /* MLX5_WQE_CTRL_FENCE: wait for earlier READs/atomics */
#define RVX__MLX5_CE        0x08u             /* MLX5_WQE_CTRL_CQ_UPDATE */
#define RVX__MLX5_QPT_SIZE  1024              /* QPN lookup table (power of two) */
#define RVX__MLX5_QPT_EMPTY (-1)
#define RVX__MLX5_QPT_GONE  (-2)              /* a QP that no longer completes anything */
#define RVX__MLX5_QPT_SPARE 0x40000000        /* flag on the rank: the conn's spare QP */
#define RVX__MLX5_HELLO     0xffffu           /* imm info of a re-connection hello */
#define RVX__MLX5_HELLO_REQ 0u                /* its channel field: a request, or the answer */
#define RVX__MLX5_HELLO_ACK 1u
#define RVX__MLX5_NO_SLOT   0xffffffffu       /* rq_slot of the hello receive (no AM buffer) */

/* ---- types ---------------------------------------------------------------------------------- */

typedef struct rvx__tl_ctx {
    struct ibv_context *ib;
    struct ibv_pd      *pd;
    uint8_t             port;
    uint8_t             is_roce;
    uint16_t            lid;
    int                 gid_index;
    union ibv_gid       gid;
    enum ibv_mtu        mtu;
    size_t              page;
    uint32_t            bw_mbs;  /* the port's data rate (active speed x width), MB/s */
    char                name[64];
} rvx__tl_ctx_t;

typedef struct rvx__tl_mem {
    void          *addr;
    size_t         len;
    struct ibv_mr *mr;
    uint32_t       lkey;
    int            allocated;
} rvx__tl_mem_t;

/* What a put reads: the remote key already in the byte order and position of the raddr segment's
 * second 8 bytes (rkey big-endian, then the 4 reserved bytes as zero). */
typedef struct rvx_rkey {
    uint64_t rkey_word;
    uint64_t base;
    uint64_t len;
} rvx_rkey_t;

typedef struct rvx__mlx5_packed_rkey {
    uint64_t magic;
    uint64_t base;
    uint64_t len;
    uint32_t rkey;
    uint32_t pad;
} rvx__mlx5_packed_rkey_t;
#define RVX__TL_RKEY_PACKED_SIZE sizeof(rvx__mlx5_packed_rkey_t)

/* An iface's address: the port and control region, then two QPNs per rank (the QP, its spare). */
typedef struct rvx__tl_addr {
    uint64_t magic;
    uint64_t ctrl_addr;
    uint32_t ctrl_rkey;
    uint16_t lid;
    uint8_t  is_roce;
    uint8_t  pad;
    uint8_t  gid[16];
    int32_t  nranks;
    uint32_t qpn[2];   /* 2 * nranks entries: QP to rank r at 2r, its spare at 2r + 1 (indexed
                        * through RVX__MLX5_QPN: the array runs past its declared two) */
} rvx__tl_addr_t;
#define RVX__TL_ADDR_SIZE(n) (offsetof(rvx__tl_addr_t, qpn) + 8 * (size_t)((n) > 1 ? (n) : 1))
#define RVX__MLX5_QPN(addr) ((uint32_t *)(void *)((uint8_t *)(addr) + offsetof(rvx__tl_addr_t, qpn)))

/* What the CQ handler does when a WQE retires. */
enum {
    RVX__OP_NONE = 0,
    RVX__OP_REQ,        /* complete req with RVX_OK */
    RVX__OP_COPY,       /* copy len bytes from src (bounce) to dst, then complete req if set */
    RVX__OP_FETCH32,    /* *dst = 4 bytes at src */
    RVX__OP_FETCH64
};

typedef struct rvx__mlx5_op {
    uint8_t        kind;
    uint8_t        sig;       /* this WQE was signaled */
    uint16_t       nbb;       /* WQEBBs of the WQE starting here (0: not a WQE start) */
    uint32_t       len;
    uint64_t       bounce;    /* bounce ring position to give back when this WQE retires (0: none) */
    void          *dst;
    const void    *src;
    rvx_request_t *req;
} rvx__mlx5_op_t;

/* The BlueFlame register of a QP; QPs that share one share the half toggle. `cur` is the half
 * to write next; after a write it flips by `flip` (the half size). */
typedef struct rvx__mlx5_bf {
    uint8_t  *cur;
    uintptr_t flip;
    uint8_t  *reg;
    uint32_t  size;
    struct rvx__mlx5_bf *next;  /* the iface's list of registers */
} rvx__mlx5_bf_t;

struct rvx__tl_iface;
struct rvx__tl_ep;

typedef struct rvx__mlx5_conn {
    /* hot: the put path reads this line */
    uint8_t              *sq_buf;
    uint32_t              sq_mask;     /* wqe_cnt - 1 */
    uint32_t              pi;          /* producer index in WQEBBs (free running) */
    uint32_t              pi_limit;    /* pi may not pass this: ci + room */
    uint16_t              sig_left;    /* WQEs until one must be signaled (1: the next one) */
    uint8_t               fence;       /* fence bit for the next WQE (after a READ or atomic) */
    uint8_t               failed;
    uint8_t               hold;        /* failed with WQEs whose error CQEs are still to come:
                                        * counted in ifc->outstanding so that progress polls */
    uint64_t              ctrl_send2;  /* the same for an 8-byte SEND_IMM (DS 2) */
    uint64_t              ctrl_w8;     /* RDMA_WRITE << 32 | qpn << 8 | 3: a put8's first ctrl
                                          * word before the byte swap, WQE index excluded */
    volatile uint32_t    *dbrec;       /* &dbrec[MLX5_SND_DBR] */
    rvx__mlx5_bf_t       *bf;          /* the register state (shared by QPs with the same register) */
    uint32_t              ci;          /* first WQEBB not yet known complete */
    uint32_t              room;        /* WQEBBs usable: wqe_cnt - a reserve */
    uint32_t              qpn8;        /* QPN << 8, to OR with DS */
    struct rvx__tl_iface *ifc;
    /* message credits (RVX_CAN_RECEIVE) */
    uint64_t              tx_sent;
    uint64_t              tx_limit;    /* tx_sent may reach this without looking at credit_word */
    const volatile uint64_t *credit_word; /* frames the peer has consumed, written by the peer */
    /* warm */
    rvx__mlx5_op_t       *ops;
    uint32_t              nops;        /* ops entries with a kind, not yet retired */
    uint32_t              sig_out;     /* signaled WQEs not yet completed */
    uint32_t              last_sig_pi; /* pi just past the last signaled WQE */
    uint16_t              last_sig_idx;/* WQE index (16 bit) of the last signaled WQE */
    uint16_t              last_sig_idx_be; /* the same as the CQE's wqe_counter carries it */
    uint32_t              qpn_be;      /* the QPN as the CQE's sop_drop_qpn carries it */
    rvx_status_t          err;
    struct ibv_qp        *qp;
    uint32_t              qpn;
    uint32_t              rqpn;
    int                   rank;
    int                   connected;   /* went to RTS */
    struct rvx__tl_ep    *ep;          /* the live endpoint, or NULL */
    rvx_request_t        *flush_head, *flush_tail; /* pending flushes, linked by tl_private[0] */
    uint32_t              wflush_pi;   /* a pending worker flush waits for ci to reach this */
    /* bounce ring: registered memory for copies, given back in WQE order */
    uint8_t              *bounce;
    struct ibv_mr        *bounce_mr;
    uint64_t              b_head, b_tail;
    /* receive side */
    uint8_t              *rq_buf;
    uint32_t              rq_mask, rq_stride, rq_head;
    volatile uint32_t    *rq_dbrec;
    uint8_t              *rx_buf;
    struct ibv_mr        *rx_mr;
    uint64_t              rx_done;     /* frames consumed (reported to the peer as credits) */
    uint64_t              rx_reported;
    uint64_t              rx_seen;     /* frames taken from the CQ (rx_done + rx_held) */
    uint32_t              rx_held;     /* frames received while no endpoint existed */
    uint32_t             *held_len, *held_imm;
    uint32_t             *rq_slot;     /* which buffer the receive WQE at each position has */
    uint64_t              peer_ctrl;   /* where this rank's credit word is in the peer's region */
    uint32_t              peer_ctrl_rkey;
    uint16_t              peer_lid;
    uint8_t               peer_gid[16];
    uint64_t              scratch[6];  /* small frames are built here, then sent inline */
    double                ka_time;     /* last keepalive */
    uint32_t              ka_pi;       /* pi after the last keepalive (0: none in flight) */
    /* re-connection (see the top of this file) */
    uint32_t              rq_flushed;  /* receives of this QP that came back flushed */
    struct ibv_qp        *sp_qp;       /* the spare: RTR towards the peer's spare once sp_rqpn is known */
    uint32_t              sp_qpn;
    uint32_t              sp_rqpn;     /* the peer's spare (0: not known yet) */
    uint8_t               rec_wait;    /* we re-connected: the peer's hello has not come yet */
    uint8_t               rec_pending; /* the peer re-connected: adopt the spare once drained */
    uint32_t              rec_peer_sp; /* with rec_pending: the peer's next spare */
    struct ibv_qp       **dead;        /* failed QPs, kept in ERR until the iface goes */
    unsigned              ndead;
} rvx__mlx5_conn_t;

typedef struct rvx__tl_ep {
    rvx__mlx5_conn_t *c;
} rvx__tl_ep_t;

typedef struct rvx__tl_iface {
    /* hot: progress reads these */
    unsigned          nlive;
    unsigned          outstanding; /* signaled WQEs not yet completed, all endpoints */
    const volatile uint8_t *cqe_next; /* op_own of the CQE at the consumer index */
    uint32_t          cq_owner;    /* the owner bit a valid CQE there has: pass parity of cq_ci */
    uint8_t          *cq_buf;      /* first CQE's 64-byte part (the second half of 128-byte CQEs) */
    uint32_t          cq_ci;
    uint32_t          cq_mask;
    uint32_t          cq_shift;    /* log2(CQE size) */
    uint32_t          cq_cnt;      /* entries: the owner bit of pass n is (ci & cq_cnt) != 0 */
    volatile uint32_t *cq_dbrec;
    /* cold */
    rvx__tl_ctx_t    *ctx;
    struct ibv_cq    *cq;
    rvx__mlx5_conn_t *conns;       /* by rank */
    int               rank, nranks;
    uint64_t         *ctrl;        /* credit words, one per rank */
    struct ibv_mr    *ctrl_mr;
    uint32_t          qpt_qpn[RVX__MLX5_QPT_SIZE];
    int32_t           qpt_rank[RVX__MLX5_QPT_SIZE];
    int               in_rx;
    unsigned          warned_nested;
    rvx_request_t    *wflush;      /* pending worker flushes */
    rvx__mlx5_bf_t   *bfs;         /* BlueFlame registers in use */
    uint8_t          *hello;       /* 64 bytes per rank: where a spare receives its hello */
    struct ibv_mr    *hello_mr;
    unsigned          nrec;        /* conns with rec_pending */
    /* requests received on a channel while a reply waited for room: delivered later, in order */
    struct rvx__mlx5_deferred *def_head, *def_tail;
} rvx__tl_iface_t;

typedef struct rvx__mlx5_deferred {
    struct rvx__mlx5_deferred *next;
    int      rank;
    unsigned chan, info;
    size_t   len;
    uint8_t  body[1];
} rvx__mlx5_deferred_t;

/* Build-time sizes. */
#define RVX__MLX5_FRAME        RVX_MLX5_FRAME
#define RVX__MLX5_BOUNCE_BYTES RVX_MLX5_BOUNCE_BYTES
#define RVX__MLX5_BOUNCE_CHUNK RVX_PUT_BCOPY_MAX

/* ---- small helpers -------------------------------------------------------------------------- */

RVX_INLINE double rvx__mlx5_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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
    case 0x01: return "local length error";
    case 0x02: return "local QP operation error";
    case 0x04: return "local protection error";
    case 0x05: return "work request flushed";
    case 0x10: return "bad response";
    case 0x11: return "local access error";
    case 0x12: return "remote invalid request";
    case 0x13: return "remote access error";
    case 0x14: return "remote operation error";
    case 0x15: return "transport retries exceeded";
    case 0x16: return "RNR retries exceeded";
    case 0x22: return "remote aborted";
    }
    return "error";
}

/* ---- set-up (cold) -------------------------------------------------------------------------- */

RVX_COLD void rvx__mlx5_list_devices(struct ibv_device **list, int n)
{
    int i;
    if (n <= 0) {
        rvx__log("rc_mlx5: no RDMA device found. Without an adapter, run on the rvxsim model: "
                 "LD_LIBRARY_PATH=build/sim ./program (make sim builds it)");
        return;
    }
    fprintf(stderr, "rvx: rc_mlx5: devices found:");
    for (i = 0; i < n; i++) fprintf(stderr, " %s", ibv_get_device_name(list[i]));
    fprintf(stderr, " (choose one with RVX_DEV=name[:port])\n");
}

/* The data rate of an active port in MB/s (10^6 B/s) after line coding, from ibv_port_attr's
 * active_speed and active_width codes as rdma-core defines them (ibv_devinfo prints the same):
 * per-lane signalling SDR 2.5, DDR 5, QDR 10 Gb/s with 8b/10b coding; FDR10 10.3125, FDR 14.0625,
 * EDR 25.78125 Gb/s with 64b/66b; HDR 50, NDR 100 Gb/s (data rate); width 1x, 2x, 4x, 8x, 12x.
 * 0 for a code it does not know. */
RVX_COLD uint32_t rvx__mlx5_port_mbs(unsigned speed, unsigned width)
{
    uint32_t lane_mbs, lanes;
    switch (speed) {
    case 1:   lane_mbs = 250;   break; /* SDR: 2 Gb/s of data */
    case 2:   lane_mbs = 500;   break; /* DDR */
    case 4:   lane_mbs = 1000;  break; /* QDR */
    case 8:   lane_mbs = 1250;  break; /* FDR10: 10 Gb/s of data */
    case 16:  lane_mbs = 1705;  break; /* FDR: 13.64 Gb/s of data */
    case 32:  lane_mbs = 3125;  break; /* EDR: 25 Gb/s of data */
    case 64:  lane_mbs = 6250;  break; /* HDR */
    case 128: lane_mbs = 12500; break; /* NDR */
    default:  return 0;
    }
    switch (width) {
    case 1:  lanes = 1;  break;
    case 2:  lanes = 4;  break;
    case 4:  lanes = 8;  break;
    case 8:  lanes = 12; break;
    case 16: lanes = 2;  break;
    default: return 0;
    }
    return lane_mbs * lanes;
}

/* A lane's bandwidth (MB/s): what its port reported, else the fabric header's figure. */
RVX_COLD uint32_t rvx__tl_ctx_bw_mbs(const rvx__tl_ctx_t *ctx)
{
    return ctx->bw_mbs ? ctx->bw_mbs : (uint32_t)RVX_FAB_BW_MBS;
}

/* Open the device of `lane` (0 for single-lane builds): the lane-th name of RVX_DEV, or the
 * lane-th mlx5 device found. */
RVX_COLD rvx_status_t rvx__tl_ctx_init(rvx__tl_ctx_t *ctx, unsigned lane)
{
    struct ibv_device **list;
    struct ibv_port_attr pa;
    const char *want = getenv("RVX_DEV");
    char name[64] = "";
    int n = 0, i, port = 1;
    unsigned seen = 0;
    struct ibv_device *dev = NULL;

    memset(ctx, 0, sizeof(*ctx));
    ctx->page = (size_t)sysconf(_SC_PAGESIZE);
    if (want && *want) {
        const char *item = want, *colon, *end;
        size_t l;
        for (i = 0; i < (int)lane && item; i++) {
            item = strchr(item, ',');
            if (item) item++;
        }
        if (!item || !*item) {
            rvx__log("rc_mlx5: RVX_DEV=%s names no device for lane %u; this build has RVX_LANES=%d "
                     "lanes: name one device per lane, e.g. RVX_DEV=mlx5_0,mlx5_1", want, lane,
                     (int)RVX_LANES);
            return RVX_ERR_NO_DEVICE;
        }
        end = strchr(item, ',');
        l = end ? (size_t)(end - item) : strlen(item);
        colon = (const char *)memchr(item, ':', l);
        if (colon) {
            port = atoi(colon + 1);
            l = (size_t)(colon - item);
        }
        if (l >= sizeof(name)) l = sizeof(name) - 1;
        memcpy(name, item, l);
        name[l] = 0;
        if (port < 1 || port > 255) {
            rvx__log("rc_mlx5: RVX_DEV=%s: the port must be a number from 1", want);
            return RVX_ERR_INVALID_PARAM;
        }
    }
    list = ibv_get_device_list(&n);
    if (!list) n = 0;
    for (i = 0; i < n && !dev; i++) {
        const char *dn = ibv_get_device_name(list[i]);
        if (name[0] ? !strcmp(dn, name) : (mlx5dv_is_supported(list[i]) && seen++ == lane)) dev = list[i];
    }
    if (!dev) {
        if (name[0]) rvx__log("rc_mlx5: RVX_DEV names device '%s', which is not here", name);
        else if (lane) rvx__log("rc_mlx5: lane %u needs an mlx5 device of its own and there are only "
                                "%u (this build has RVX_LANES=%d lanes; on rvxsim run with "
                                "RVXSIM_NUM_DEVICES=2)", lane, seen, (int)RVX_LANES);
        else rvx__log("rc_mlx5: no mlx5 device");
        rvx__mlx5_list_devices(list, n);
        if (list) ibv_free_device_list(list);
        return RVX_ERR_NO_DEVICE;
    }
    if (!mlx5dv_is_supported(dev)) {
        rvx__log("rc_mlx5: device %s is not an mlx5 device", ibv_get_device_name(dev));
        ibv_free_device_list(list);
        return RVX_ERR_NO_DEVICE;
    }
    snprintf(ctx->name, sizeof(ctx->name), "%s", ibv_get_device_name(dev));
    ctx->ib = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!ctx->ib) {
        rvx__log("rc_mlx5: cannot open %s: %s", ctx->name, strerror(errno));
        return RVX_ERR_NO_DEVICE;
    }
    ctx->port = (uint8_t)port;
    memset(&pa, 0, sizeof(pa));
    if (ibv_query_port(ctx->ib, ctx->port, &pa) || pa.state != IBV_PORT_ACTIVE) {
        rvx__log("rc_mlx5: %s port %d is not active", ctx->name, port);
        ibv_close_device(ctx->ib);
        return RVX_ERR_NO_DEVICE;
    }
    ctx->lid = pa.lid;
    ctx->mtu = pa.active_mtu;
    ctx->bw_mbs = rvx__mlx5_port_mbs(pa.active_speed, pa.active_width);
    ctx->is_roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    /* RoCE: GID index from RVX_GID_INDEX (default 1 when the port has it: RoCE v2 on the model's
     * and most adapters' tables, else 0); InfiniBand uses the LID and GID 0. */
    ctx->gid_index = 0;
    if (ctx->is_roce &&
        rvx__env_int("RVX_GID_INDEX", pa.gid_tbl_len > 1 ? 1 : 0, 0, 255, &ctx->gid_index)) {
        ibv_close_device(ctx->ib);
        return RVX_ERR_INVALID_PARAM;
    }
    if (ibv_query_gid(ctx->ib, ctx->port, ctx->gid_index, &ctx->gid)) {
        rvx__log("rc_mlx5: %s port %d has no GID %d", ctx->name, port, ctx->gid_index);
        ibv_close_device(ctx->ib);
        return RVX_ERR_NO_DEVICE;
    }
    ctx->pd = ibv_alloc_pd(ctx->ib);
    if (!ctx->pd) {
        rvx__log("rc_mlx5: ibv_alloc_pd failed: %s", strerror(errno));
        ibv_close_device(ctx->ib);
        return RVX_ERR_NO_DEVICE;
    }
    return RVX_OK;
}

RVX_COLD void rvx__tl_ctx_fini(rvx__tl_ctx_t *ctx)
{
    if (ctx->pd) ibv_dealloc_pd(ctx->pd);
    if (ctx->ib) ibv_close_device(ctx->ib);
    memset(ctx, 0, sizeof(*ctx));
}

#define RVX__MLX5_ACCESS \
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

RVX_COLD struct ibv_mr *rvx__mlx5_reg(rvx__tl_ctx_t *ctx, void *addr, size_t len, const char *what)
{
    struct ibv_mr *mr = ibv_reg_mr(ctx->pd, addr, len, RVX__MLX5_ACCESS);
    if (!mr) rvx__log("rc_mlx5: cannot register %zu bytes of %s: %s", len, what, strerror(errno));
    return mr;
}

RVX_COLD void *rvx__mlx5_alloc(rvx__tl_ctx_t *ctx, size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, ctx->page, (len + ctx->page - 1) & ~(ctx->page - 1))) return NULL;
    memset(p, 0, len);
    return p;
}

/* QPN -> rank table, open addressing. Entries of QPs that complete nothing any more are GONE:
 * a lookup walks past them, an insert may take their place. */
RVX_COLD unsigned rvx__mlx5_qpt_hash(uint32_t qpn)
{
    return (qpn * 2654435761u) >> 22;
}

RVX_COLD rvx_status_t rvx__mlx5_qpt_add(rvx__tl_iface_t *ifc, uint32_t qpn, int32_t val)
{
    unsigned h = rvx__mlx5_qpt_hash(qpn), i;
    for (i = 0; i < RVX__MLX5_QPT_SIZE; i++) {
        unsigned s = (h + i) & (RVX__MLX5_QPT_SIZE - 1);
        if (ifc->qpt_rank[s] < 0) {
            ifc->qpt_qpn[s] = qpn;
            ifc->qpt_rank[s] = val;
            return RVX_OK;
        }
    }
    rvx__log("rc_mlx5: the QP table is full (%d QPs)", RVX__MLX5_QPT_SIZE);
    return RVX_ERR_NO_RESOURCE;
}

/* The rank (with RVX__MLX5_QPT_SPARE for a spare) of qpn, or -1. */
RVX_COLD int32_t rvx__mlx5_qpt_find(const rvx__tl_iface_t *ifc, uint32_t qpn, unsigned *slot)
{
    unsigned h = rvx__mlx5_qpt_hash(qpn), i;
    for (i = 0; i < RVX__MLX5_QPT_SIZE; i++) {
        unsigned s = (h + i) & (RVX__MLX5_QPT_SIZE - 1);
        if (ifc->qpt_rank[s] == RVX__MLX5_QPT_EMPTY) break;
        if (ifc->qpt_rank[s] >= 0 && ifc->qpt_qpn[s] == qpn) {
            if (slot) *slot = s;
            return ifc->qpt_rank[s];
        }
    }
    return -1;
}

RVX_COLD void rvx__mlx5_qpt_set(rvx__tl_iface_t *ifc, uint32_t qpn, int32_t val)
{
    unsigned s;
    if (rvx__mlx5_qpt_find(ifc, qpn, &s) >= 0) ifc->qpt_rank[s] = val;
}

/* QPs whose BlueFlame register is the same must alternate its halves together. */
RVX_COLD rvx__mlx5_bf_t *rvx__mlx5_bf_of(rvx__tl_iface_t *ifc, void *reg, uint32_t size)
{
    rvx__mlx5_bf_t *b;
    for (b = ifc->bfs; b; b = b->next)
        if (b->reg == (uint8_t *)reg) return b;
    b = (rvx__mlx5_bf_t *)calloc(1, sizeof(*b));
    if (!b) return NULL;
    b->reg = b->cur = (uint8_t *)reg;
    b->flip = size;
    b->size = size;
    b->next = ifc->bfs;
    ifc->bfs = b;
    return b;
}

/* A new RC QP towards `rank`, taken to INIT. */
RVX_COLD struct ibv_qp *rvx__mlx5_qp_new(rvx__tl_iface_t *ifc, int rank)
{
    rvx__tl_ctx_t *ctx = ifc->ctx;
    struct ibv_qp_init_attr_ex ia;
    struct mlx5dv_qp_init_attr da;
    struct ibv_qp_attr qa;
    struct ibv_qp *qp;

    memset(&ia, 0, sizeof(ia));
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = ifc->cq;
    ia.recv_cq = ifc->cq;
    ia.cap.max_send_wr = RVX_MLX5_TX_DEPTH;
    ia.cap.max_send_sge = 1;
    ia.cap.max_inline_data = RVX__TL_SHORT_MAX;
    /* the message buffers, and one more place for a re-connection hello */
    ia.cap.max_recv_wr = (RVX_CAN_RECEIVE ? RVX_MLX5_RX_DEPTH : 0) + 1;
    ia.cap.max_recv_sge = 1;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = ctx->pd;
    memset(&da, 0, sizeof(da));
    /* Received data always goes to the buffers (the poll loop does not copy out of CQEs). */
    da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
    da.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
    qp = mlx5dv_create_qp(ctx->ib, &ia, &da);
    if (!qp) {
        rvx__log("rc_mlx5: cannot create an RC QP on %s: %s", ctx->name, strerror(errno));
        return NULL;
    }
    if (ia.cap.max_inline_data < RVX__TL_SHORT_MAX) {
        rvx__log("rc_mlx5: the QP takes %u inline bytes, this build needs %d (RVX_MLX5_INLINE)",
                 ia.cap.max_inline_data, RVX__TL_SHORT_MAX);
        ibv_destroy_qp(qp);
        return NULL;
    }
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = ctx->port;
    qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        rvx__log("rc_mlx5: QP to INIT failed: %s", strerror(errno));
        ibv_destroy_qp(qp);
        return NULL;
    }
    (void)rank;
    return qp;
}

/* Post the hello receive of a (spare) QP at its first receive position. */
RVX_COLD void rvx__mlx5_post_hello(rvx__tl_iface_t *ifc, struct ibv_qp *qp, int rank)
{
    struct ibv_recv_wr wr, *bad;
    struct ibv_sge sge;
    sge.addr = (uint64_t)(uintptr_t)(ifc->hello + 64 * (size_t)rank);
    sge.length = 64;
    sge.lkey = ifc->hello_mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(qp, &wr, &bad))
        rvx__log("rc_mlx5: cannot post the re-connection receive for rank %d", rank);
}

/* The conn takes qp as its QP: learn the geometry, start every counter afresh. The receive
 * queue starts after `rq_used` positions already posted (the spare's hello). */
RVX_COLD rvx_status_t rvx__mlx5_adopt(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, struct ibv_qp *qp,
                                      uint32_t rq_used)
{
    struct mlx5dv_obj obj;
    struct mlx5dv_qp dq;

    memset(&dq, 0, sizeof(dq));
    memset(&obj, 0, sizeof(obj));
    obj.qp.in = qp;
    obj.qp.out = &dq;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP)) {
        rvx__log("rc_mlx5: mlx5dv_init_obj(QP) failed");
        return RVX_ERR_IO;
    }
    if (dq.sq.stride != 64 || !rvx_is_pow2(dq.sq.wqe_cnt) || dq.sq.wqe_cnt < 8) {
        rvx__log("rc_mlx5: unexpected send queue geometry (stride %u, %u WQEBBs)", dq.sq.stride,
                 dq.sq.wqe_cnt);
        return RVX_ERR_UNSUPPORTED;
    }
    if (dq.rq.stride < 16 || !rvx_is_pow2(dq.rq.wqe_cnt) ||
        dq.rq.wqe_cnt < (RVX_CAN_RECEIVE ? RVX_MLX5_RX_DEPTH : 0) + 1u) {
        rvx__log("rc_mlx5: unexpected receive queue geometry");
        return RVX_ERR_UNSUPPORTED;
    }
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
    if (dq.bf.size < 64) {
        rvx__log("rc_mlx5: this QP has no BlueFlame register; build with "
                 "RVX_MLX5_DOORBELL=RVX_MLX5_DB_8B");
        return RVX_ERR_UNSUPPORTED;
    }
#endif
    if (!c->ops) c->ops = (rvx__mlx5_op_t *)calloc(dq.sq.wqe_cnt, sizeof(*c->ops));
    else if (c->sq_mask + 1 == dq.sq.wqe_cnt) memset(c->ops, 0, dq.sq.wqe_cnt * sizeof(*c->ops));
    else {
        free(c->ops);
        c->ops = (rvx__mlx5_op_t *)calloc(dq.sq.wqe_cnt, sizeof(*c->ops));
    }
    c->bf = rvx__mlx5_bf_of(ifc, dq.bf.reg, dq.bf.size);
    if (!c->ops || !c->bf) return RVX_ERR_NO_MEMORY;
    c->qp = qp;
    c->ifc = ifc;
    c->qpn = qp->qp_num;
    c->qpn8 = c->qpn << 8;
    c->qpn_be = rvx_htobe32(c->qpn);
    c->sq_buf = (uint8_t *)dq.sq.buf;
    c->sq_mask = dq.sq.wqe_cnt - 1;
    /* Keep room for a flush NOP, a credit write and a keepalive whatever the data path does. */
    c->room = dq.sq.wqe_cnt - 4;
    c->pi = c->ci = 0;
    c->pi_limit = c->room;
    c->ctrl_w8 = (uint64_t)MLX5_OPCODE_RDMA_WRITE << 32 | c->qpn8 | 3;
    c->ctrl_send2 = (uint64_t)MLX5_OPCODE_SEND_IMM << 32 | c->qpn8 | 2;
    c->dbrec = &dq.dbrec[MLX5_SND_DBR];
    c->sig_left = RVX_MLX5_SIG_EVERY;
    c->fence = 0;
    c->nops = c->sig_out = 0;
    c->last_sig_pi = 0;
    c->last_sig_idx = 0;
    c->last_sig_idx_be = 0;
    c->wflush_pi = 0;
    c->ka_pi = 0;
    c->err = RVX_OK;
    c->rq_buf = (uint8_t *)dq.rq.buf;
    c->rq_mask = dq.rq.wqe_cnt - 1;
    c->rq_stride = dq.rq.stride;
    c->rq_dbrec = &dq.dbrec[MLX5_RCV_DBR];
    c->rq_head = rq_used;
    c->rq_flushed = 0;
    c->rx_seen = c->rx_done = c->rx_reported = 0;
    c->rx_held = 0;
    c->tx_sent = 0;
    return RVX_OK;
}

/* Create the QP to `rank` and its spare (both in INIT). */
RVX_COLD rvx_status_t rvx__mlx5_conn_create(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, int rank)
{
    struct ibv_qp *qp = rvx__mlx5_qp_new(ifc, rank);
    rvx_status_t st;
    c->rank = rank;
    if (!qp) return RVX_ERR_NO_RESOURCE;
    st = rvx__mlx5_adopt(ifc, c, qp, 0);
    if (st == RVX_OK) st = rvx__mlx5_qpt_add(ifc, c->qpn, rank);
    if (st != RVX_OK) return st;
    c->sp_qp = rvx__mlx5_qp_new(ifc, rank);
    if (!c->sp_qp) return RVX_ERR_NO_RESOURCE;
    c->sp_qpn = c->sp_qp->qp_num;
    rvx__mlx5_post_hello(ifc, c->sp_qp, rank);
    return rvx__mlx5_qpt_add(ifc, c->sp_qpn, rank | RVX__MLX5_QPT_SPARE);
}

RVX_COLD void rvx__mlx5_conn_destroy(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c)
{
    unsigned i;
    (void)ifc;
    if (c->qp) ibv_destroy_qp(c->qp);
    if (c->sp_qp) ibv_destroy_qp(c->sp_qp);
    for (i = 0; i < c->ndead; i++) ibv_destroy_qp(c->dead[i]);
    free(c->dead);
    if (c->bounce_mr) ibv_dereg_mr(c->bounce_mr);
    if (c->rx_mr) ibv_dereg_mr(c->rx_mr);
    free(c->bounce);
    free(c->rx_buf);
    free(c->ops);
    free(c->held_len);
    free(c->held_imm);
    free(c->rq_slot);
    memset(c, 0, sizeof(*c));
}

/* What an iface owns besides its conns. */
RVX_COLD void rvx__mlx5_iface_free(rvx__tl_iface_t *ifc)
{
    while (ifc->bfs) {
        rvx__mlx5_bf_t *b = ifc->bfs;
        ifc->bfs = b->next;
        free(b);
    }
    if (ifc->ctrl_mr) ibv_dereg_mr(ifc->ctrl_mr);
    if (ifc->hello_mr) ibv_dereg_mr(ifc->hello_mr);
    if (ifc->cq) ibv_destroy_cq(ifc->cq);
    free(ifc->ctrl);
    free(ifc->hello);
    free(ifc->conns);
    memset(ifc, 0, sizeof(*ifc));
}

RVX_COLD rvx_status_t rvx__tl_iface_init(rvx__tl_iface_t *ifc, rvx__tl_ctx_t *ctx, int rank,
                                         int nranks)
{
    struct mlx5dv_obj obj;
    struct mlx5dv_cq dc;
    struct ibv_device_attr da;
    int i, want;
    rvx_status_t st;

    memset(ifc, 0, sizeof(*ifc));
    ifc->ctx = ctx;
    ifc->rank = rank;
    ifc->nranks = nranks;
    for (i = 0; i < RVX__MLX5_QPT_SIZE; i++) ifc->qpt_rank[i] = RVX__MLX5_QPT_EMPTY;
    if (nranks > RVX__MLX5_QPT_SIZE / 8) {
        rvx__log("rc_mlx5: at most %d ranks per job in this release", RVX__MLX5_QPT_SIZE / 8);
        return RVX_ERR_UNSUPPORTED;
    }
    /* Every WQE may complete with an error CQE when a QP fails, and every receive buffer may hold
     * a frame: the CQ takes all of them, so it can never overrun. */
    want = nranks * (4 * RVX_MLX5_TX_DEPTH + 2 * RVX_MLX5_RX_DEPTH + 4) + 64;
    memset(&da, 0, sizeof(da));
    if (!ibv_query_device(ctx->ib, &da) && da.max_cqe > 0 && want > da.max_cqe) want = da.max_cqe;
    ifc->cq = ibv_create_cq(ctx->ib, want, NULL, NULL, 0);
    if (!ifc->cq) {
        rvx__log("rc_mlx5: cannot create a CQ of %d entries: %s", want, strerror(errno));
        return RVX_ERR_NO_RESOURCE;
    }
    memset(&obj, 0, sizeof(obj));
    memset(&dc, 0, sizeof(dc));
    obj.cq.in = ifc->cq;
    obj.cq.out = &dc;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) || !rvx_is_pow2(dc.cqe_cnt) ||
        (dc.cqe_size != 64 && dc.cqe_size != 128)) {
        rvx__log("rc_mlx5: mlx5dv_init_obj(CQ) failed or gave an unexpected geometry");
        ibv_destroy_cq(ifc->cq);
        return RVX_ERR_IO;
    }
    ifc->cq_buf = (uint8_t *)dc.buf + (dc.cqe_size - 64); /* mlx5_cqe64 is the last 64 bytes */
    ifc->cq_cnt = dc.cqe_cnt;
    ifc->cq_mask = dc.cqe_cnt - 1;
    ifc->cq_shift = dc.cqe_size == 128 ? 7 : 6;
    ifc->cq_dbrec = &dc.dbrec[0];
    ifc->cqe_next = &((struct mlx5_cqe64 *)(void *)ifc->cq_buf)->op_own;
    ifc->cq_owner = 0;
    ifc->ctrl = (uint64_t *)rvx__mlx5_alloc(ctx, 8 * (size_t)nranks);
    ifc->hello = (uint8_t *)rvx__mlx5_alloc(ctx, 64 * (size_t)nranks);
    ifc->conns = (rvx__mlx5_conn_t *)calloc((size_t)nranks, sizeof(*ifc->conns));
    if (!ifc->ctrl || !ifc->conns || !ifc->hello) { st = RVX_ERR_NO_MEMORY; goto fail; }
    /* a credit word holds how many frames the peer may have been sent in all: at first, as many
     * as it has receive buffers */
    for (i = 0; i < nranks; i++) ifc->ctrl[i] = RVX_MLX5_RX_DEPTH;
    ifc->ctrl_mr = rvx__mlx5_reg(ctx, ifc->ctrl, 8 * (size_t)nranks, "the control region");
    ifc->hello_mr = rvx__mlx5_reg(ctx, ifc->hello, 64 * (size_t)nranks, "re-connection buffers");
    if (!ifc->ctrl_mr || !ifc->hello_mr) { st = RVX_ERR_NO_RESOURCE; goto fail; }
    for (i = 0; i < nranks; i++) {
        st = rvx__mlx5_conn_create(ifc, &ifc->conns[i], i);
        if (st != RVX_OK) goto fail;
    }
    return RVX_OK;
fail:
    if (ifc->conns)
        for (i = 0; i < nranks; i++) rvx__mlx5_conn_destroy(ifc, &ifc->conns[i]);
    rvx__mlx5_iface_free(ifc);
    return st;
}

RVX_COLD void rvx__tl_iface_fini(rvx__tl_iface_t *ifc)
{
    int i;
    while (ifc->def_head) {
        rvx__mlx5_deferred_t *d = ifc->def_head;
        ifc->def_head = d->next;
        free(d);
    }
    for (i = 0; i < ifc->nranks; i++) rvx__mlx5_conn_destroy(ifc, &ifc->conns[i]);
    rvx__mlx5_iface_free(ifc);
}

RVX_COLD void rvx__tl_iface_address(rvx__tl_iface_t *ifc, rvx__tl_addr_t *addr)
{
    int i;
    memset(addr, 0, RVX__TL_ADDR_SIZE(ifc->nranks));
    addr->magic = RVX__MLX5_MAGIC;
    addr->ctrl_addr = (uint64_t)(uintptr_t)ifc->ctrl;
    addr->ctrl_rkey = ifc->ctrl_mr->rkey;
    addr->lid = ifc->ctx->lid;
    addr->is_roce = ifc->ctx->is_roce;
    memcpy(addr->gid, ifc->ctx->gid.raw, 16);
    addr->nranks = ifc->nranks;
    for (i = 0; i < ifc->nranks; i++) {
        RVX__MLX5_QPN(addr)[2 * i] = ifc->conns[i].qpn;
        RVX__MLX5_QPN(addr)[2 * i + 1] = ifc->conns[i].sp_qpn;
    }
}

RVX_INLINE void rvx__mlx5_post_recv(rvx__mlx5_conn_t *c, uint32_t slot)
{
    struct mlx5_wqe_data_seg *d =
        (struct mlx5_wqe_data_seg *)(void *)(c->rq_buf + (size_t)(c->rq_head & c->rq_mask) * c->rq_stride);
    d->byte_count = rvx_htobe32(RVX__MLX5_FRAME);
    d->lkey = rvx_htobe32(c->rx_mr->lkey);
    d->addr = rvx_htobe64((uint64_t)(uintptr_t)(c->rx_buf + (size_t)slot * RVX__MLX5_FRAME));
    c->rq_slot[c->rq_head & c->rq_mask] = slot;
    if (c->rq_stride > 16) { /* terminate a list shorter than the stride allows */
        struct mlx5_wqe_data_seg *t = d + 1;
        t->byte_count = 0;
        t->lkey = rvx_htobe32(MLX5_INVALID_LKEY);
        t->addr = 0;
    }
    c->rq_head++;
}

RVX_INLINE void rvx__mlx5_ring_recv(rvx__mlx5_conn_t *c)
{
    rvx_to_device_barrier();
    *c->rq_dbrec = rvx_htobe32(c->rq_head & 0xffff);
}

/* Steps of rvx__mlx5_qp_connect */
#define RVX__MLX5_TO_RTR     1  /* INIT -> RTR */
#define RVX__MLX5_TO_RTS     3  /* INIT -> RTR -> RTS */
#define RVX__MLX5_RTR_TO_RTS 2  /* RTR -> RTS */

/* Take qp (towards the peer's QP rqpn) through the steps asked. */
RVX_COLD rvx_status_t rvx__mlx5_qp_connect(rvx__mlx5_conn_t *c, struct ibv_qp *qp, uint32_t rqpn,
                                           unsigned steps)
{
    rvx__tl_ctx_t *ctx = c->ifc->ctx;
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = ctx->mtu;
    qa.dest_qp_num = rqpn;
    qa.rq_psn = 0x1000;
    qa.max_dest_rd_atomic = 16;
    qa.min_rnr_timer = 12;
    qa.ah_attr.port_num = ctx->port;
    qa.ah_attr.dlid = c->peer_lid;
    if (ctx->is_roce) {
        qa.ah_attr.is_global = 1;
        memcpy(qa.ah_attr.grh.dgid.raw, c->peer_gid, 16);
        qa.ah_attr.grh.sgid_index = (uint8_t)ctx->gid_index;
        qa.ah_attr.grh.hop_limit = 64;
    }
    if ((steps & RVX__MLX5_TO_RTR) &&
        ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        rvx__log("rc_mlx5: QP to RTR (towards rank %d) failed: %s", c->rank, strerror(errno));
        return RVX_ERR_IO;
    }
    if (!(steps & RVX__MLX5_RTR_TO_RTS)) return RVX_OK;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = (uint8_t)RVX_MLX5_TIMEOUT;
    qa.retry_cnt = (uint8_t)RVX_MLX5_RETRY;
    qa.rnr_retry = 7;
    qa.sq_psn = 0x1000;
    qa.max_rd_atomic = 16;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
        rvx__log("rc_mlx5: QP to RTS (towards rank %d) failed: %s", c->rank, strerror(errno));
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

#if RVX_CAN_RECEIVE
/* Post every message buffer to the (fresh) receive queue; the peer may send that many frames. */
RVX_COLD void rvx__mlx5_post_frames(rvx__mlx5_conn_t *c)
{
    uint32_t i;
    for (i = 0; i < RVX_MLX5_RX_DEPTH; i++) rvx__mlx5_post_recv(c, i);
    rvx__mlx5_ring_recv(c);
}
#endif

/* First connection, at worker creation: the QP to RTS towards the peer's QP for this rank, the
 * spare to RTR towards the peer's spare; the bounce ring and the receive buffers. */
RVX_COLD rvx_status_t rvx__mlx5_conn_up(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c,
                                        const rvx__tl_addr_t *addr)
{
    rvx__tl_ctx_t *ctx = ifc->ctx;
    rvx_status_t st;

    if (addr->magic != RVX__MLX5_MAGIC || addr->nranks != ifc->nranks ||
        addr->is_roce != ctx->is_roce) {
        rvx__log("rc_mlx5: rank %d's address does not match this job (another transport or "
                 "link layer?)", c->rank);
        return RVX_ERR_INVALID_PARAM;
    }
    c->bounce = (uint8_t *)rvx__mlx5_alloc(ctx, RVX__MLX5_BOUNCE_BYTES);
    if (!c->bounce) return RVX_ERR_NO_MEMORY;
    c->bounce_mr = rvx__mlx5_reg(ctx, c->bounce, RVX__MLX5_BOUNCE_BYTES, "a bounce ring");
    if (!c->bounce_mr) return RVX_ERR_NO_RESOURCE;
    c->b_head = c->b_tail = 1; /* 0 means "no bounce" in an ops entry */
    c->peer_ctrl = addr->ctrl_addr + 8 * (uint64_t)ifc->rank;
    c->peer_ctrl_rkey = addr->ctrl_rkey;
    c->peer_lid = addr->lid;
    memcpy(c->peer_gid, addr->gid, 16);
    c->rqpn = RVX__MLX5_QPN(addr)[2 * ifc->rank];
    c->sp_rqpn = RVX__MLX5_QPN(addr)[2 * ifc->rank + 1];
#if RVX_CAN_RECEIVE
    {
        uint32_t n = c->rq_mask + 1;
        c->rx_buf = (uint8_t *)rvx__mlx5_alloc(ctx, (size_t)RVX_MLX5_RX_DEPTH * RVX__MLX5_FRAME);
        c->held_len = (uint32_t *)calloc(n, 4);
        c->held_imm = (uint32_t *)calloc(n, 4);
        c->rq_slot = (uint32_t *)calloc(n, 4);
        if (!c->rx_buf || !c->held_len || !c->held_imm || !c->rq_slot) return RVX_ERR_NO_MEMORY;
        c->rx_mr = rvx__mlx5_reg(ctx, c->rx_buf, (size_t)RVX_MLX5_RX_DEPTH * RVX__MLX5_FRAME,
                                 "receive buffers");
        if (!c->rx_mr) return RVX_ERR_NO_RESOURCE;
        rvx__mlx5_post_frames(c);
        c->credit_word = &ifc->ctrl[c->rank];
        c->tx_limit = RVX_MLX5_RX_DEPTH;
    }
#endif
    st = rvx__mlx5_qp_connect(c, c->qp, c->rqpn, RVX__MLX5_TO_RTS);
    if (st == RVX_OK) st = rvx__mlx5_qp_connect(c, c->sp_qp, c->sp_rqpn, RVX__MLX5_TO_RTR);
    if (st != RVX_OK) return st;
    c->connected = 1;
    c->ka_time = rvx__mlx5_now();
    return RVX_OK;
}

#if RVX_CAN_RECEIVE
RVX_COLD void rvx__mlx5_release_held(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, int repost);
#endif

/* Every QP to RTR and RTS at worker creation: RC needs the target's QP connected even for
 * one-sided operations, and a rank may well put into one that never creates an endpoint. */
RVX_COLD rvx_status_t rvx__tl_iface_wireup(rvx__tl_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    int i;
    for (i = 0; i < ifc->nranks; i++) {
        rvx_status_t st = rvx__mlx5_conn_up(ifc, &ifc->conns[i],
                                            (const rvx__tl_addr_t *)(const void *)(addrs + (size_t)i * size));
        if (st != RVX_OK) return st;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__mlx5_reconnect(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c);

RVX_COLD rvx_status_t rvx__tl_ep_connect(rvx__tl_iface_t *ifc, rvx__tl_ep_t *ep, int rank,
                                         const rvx__tl_addr_t *addr)
{
    rvx__mlx5_conn_t *c = &ifc->conns[rank];
    (void)addr;
    if (!c->connected) return RVX_ERR_IO;
    if (c->failed) { /* re-connect: both QPs start afresh (see the top of this file) */
        rvx_status_t st = rvx__mlx5_reconnect(ifc, c);
        if (st != RVX_OK) return st;
    }
    ep->c = c;
    c->ep = ep;
    ifc->nlive++;
#if RVX_CAN_RECEIVE
    if (c->rx_held) rvx__mlx5_release_held(ifc, c, 1);
#endif
    return RVX_OK;
}

RVX_COLD int rvx__mlx5_drain(rvx__tl_iface_t *ifc, int deliver);
RVX_COLD void rvx__mlx5_sig_tail(rvx__mlx5_conn_t *c);

/* The endpoint goes; the QP stays (and keeps its counters) so that a later endpoint continues
 * the same stream. Outstanding work is finished first, so nothing refers to the endpoint. */
RVX_COLD void rvx__tl_ep_disconnect(rvx__tl_ep_t *ep)
{
    rvx__mlx5_conn_t *c = ep->c;
    rvx__tl_iface_t *ifc = c->ifc;
    unsigned spins = 0;
    if (!c->failed) rvx__mlx5_sig_tail(c); /* an unsignaled tail would never be retired */
    while (c->ci != c->pi && !c->failed) {
        if (!rvx__mlx5_drain(ifc, 0)) rvx__backoff(&spins);
        if (spins > 20000) break; /* the peer is gone without telling: let the QP be */
    }
    c->ep = NULL;
    ifc->nlive--;
}

/* ---- memory and keys (cold) ----------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__tl_mem_alloc(rvx__tl_ctx_t *ctx, size_t len, rvx__tl_mem_t *mem)
{
    mem->addr = rvx__mlx5_alloc(ctx, len);
    if (!mem->addr) return RVX_ERR_NO_MEMORY;
    mem->len = len;
    mem->allocated = 1;
    mem->mr = rvx__mlx5_reg(ctx, mem->addr, len, "rvx_mem_alloc memory");
    if (!mem->mr) {
        free(mem->addr);
        return RVX_ERR_NO_RESOURCE;
    }
    mem->lkey = mem->mr->lkey;
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__tl_mem_reg(rvx__tl_ctx_t *ctx, void *addr, size_t len,
                                      rvx__tl_mem_t *mem)
{
    mem->addr = addr;
    mem->len = len;
    mem->allocated = 0;
    mem->mr = rvx__mlx5_reg(ctx, addr, len, "user memory");
    if (!mem->mr) return errno == ENOMEM ? RVX_ERR_NO_MEMORY : RVX_ERR_NO_RESOURCE;
    mem->lkey = mem->mr->lkey;
    return RVX_OK;
}

RVX_COLD void rvx__tl_mem_dereg(rvx__tl_ctx_t *ctx, rvx__tl_mem_t *mem)
{
    (void)ctx;
    if (mem->mr) ibv_dereg_mr(mem->mr);
    if (mem->allocated) free(mem->addr);
    mem->mr = NULL;
}

RVX_COLD void rvx__tl_rkey_pack(const rvx__tl_mem_t *mem, void *buf)
{
    rvx__mlx5_packed_rkey_t p;
    memset(&p, 0, sizeof(p));
    p.magic = RVX__MLX5_MAGIC;
    p.base = (uint64_t)(uintptr_t)mem->addr;
    p.len = mem->len;
    p.rkey = mem->mr->rkey;
    memcpy(buf, &p, sizeof(p));
}

/* Byte-swap once: a put stores rkey_word as the raddr segment's second 8 bytes. */
RVX_COLD rvx_status_t rvx__tl_rkey_unpack(rvx__tl_ep_t *ep, const void *buf, rvx_rkey_t *rkey)
{
    rvx__mlx5_packed_rkey_t p;
    memcpy(&p, buf, sizeof(p));
    memset(rkey, 0, sizeof(*rkey));
    if (p.magic != RVX__MLX5_MAGIC || p.base + p.len < p.base) {
        rvx__log("rkey_unpack: not an rc_mlx5 rkey (corrupt, or from another transport) for rank %d",
                 ep->c->rank);
        return RVX_ERR_INVALID_PARAM;
    }
    rkey->rkey_word = (uint64_t)rvx_htobe32(p.rkey);
    rkey->base = p.base;
    rkey->len = p.len;
    return RVX_OK;
}

RVX_COLD void rvx__tl_rkey_release(rvx_rkey_t *rkey) { memset(rkey, 0, sizeof(*rkey)); }

/* ---- posting -------------------------------------------------------------------------------- */

RVX_COLD void rvx__mlx5_wait_room(rvx__mlx5_conn_t *c, uint32_t nbb);

RVX_INLINE uint8_t *rvx__mlx5_slot(const rvx__mlx5_conn_t *c, uint32_t pi)
{
    return c->sq_buf + ((size_t)(pi & c->sq_mask) << 6);
}

/* The next 16-byte segment after seg, wrapping at the end of the queue. */
RVX_INLINE uint8_t *rvx__mlx5_next_seg(const rvx__mlx5_conn_t *c, uint8_t *seg)
{
    seg += 16;
    return seg == c->sq_buf + ((size_t)(c->sq_mask + 1) << 6) ? c->sq_buf : seg;
}

/* fm_ce_se for the next WQE: CE once every RVX_MLX5_SIG_EVERY WQEs (or when forced), the fence
 * a READ or atomic left for whatever follows it. */
RVX_INLINE unsigned rvx__mlx5_flags(rvx__mlx5_conn_t *c, int force_sig)
{
    unsigned f = 0;
    /* sig_left may already be 0: the put8 path counts down before handing over */
    if (force_sig || RVX_UNLIKELY(c->sig_left <= 1)) {
        c->sig_left = RVX_MLX5_SIG_EVERY;
        f = RVX__MLX5_CE | c->fence;
        c->fence = 0;
    } else {
        c->sig_left--;
    }
    return f;
}

/* A READ or an atomic was posted: the next WQE carries the fence (and, to keep the put path to
 * one counter test, is also signaled). */
RVX_INLINE void rvx__mlx5_set_fence(rvx__mlx5_conn_t *c)
{
    c->fence = RVX__MLX5_FENCE;
    c->sig_left = 1;
}

/* Book-keeping of a signaled WQE that starts at pi and ends at end. */
RVX_INLINE void rvx__mlx5_mark_sig(rvx__mlx5_conn_t *c, uint32_t pi, uint32_t end)
{
    rvx__mlx5_op_t *o = &c->ops[pi & c->sq_mask];
    o->sig = 1;
    o->nbb = (uint16_t)(end - pi);
    c->sig_out++;
    c->last_sig_pi = end;
    c->last_sig_idx = (uint16_t)pi;
    c->last_sig_idx_be = rvx_htobe16((uint16_t)pi);
    c->ifc->outstanding++;
}

/* Tell the NIC: doorbell record, then the BlueFlame copy of the WQE's first 64 bytes (one-WQEBB
 * WQEs) or the 8-byte doorbell, and flip the BlueFlame half. */
RVX_INLINE void rvx__mlx5_ring(rvx__mlx5_conn_t *c, uint32_t pi_end, const uint8_t *wqe, uint32_t nbb)
{
    rvx__mlx5_bf_t *bf = c->bf;
    uint8_t *reg = bf->cur;
    rvx_to_device_barrier();
    *c->dbrec = rvx_htobe32(pi_end & 0xffff);
    rvx_wc_start();
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
    if (nbb * 64 <= bf->size) {
        uint32_t i;
        for (i = 0; i < nbb; i++) {
#if defined(__x86_64__)
            const __m128i *s = (const __m128i *)(const void *)wqe;
            __m128i *d = (__m128i *)(void *)(reg + 64 * i);
            __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1);
            __m128i e = _mm_load_si128(s + 2), f = _mm_load_si128(s + 3);
            _mm_store_si128(d, a);
            _mm_store_si128(d + 1, b);
            _mm_store_si128(d + 2, e);
            _mm_store_si128(d + 3, f);
#else
            const uint64_t *s = (const uint64_t *)(const void *)wqe;
            volatile uint64_t *d = (volatile uint64_t *)(void *)(reg + 64 * i);
            unsigned k;
            for (k = 0; k < 8; k++) d[k] = s[k];
#endif
            wqe += 64;
            if (wqe == c->sq_buf + ((size_t)(c->sq_mask + 1) << 6)) wqe = c->sq_buf;
        }
    } else
#endif
    {
        (void)nbb;
        *(volatile uint64_t *)(void *)reg = *(const uint64_t *)(const void *)wqe;
    }
    rvx_wc_flush();
    bf->cur = (uint8_t *)((uintptr_t)reg ^ bf->flip);
}

/* Make sure nbb WQEBBs are free (the CQ is polled in the cold path until they are). */
#define RVX__MLX5_NEED(c, nbb) \
    if (RVX_UNLIKELY((int32_t)((c)->pi + (nbb) - (c)->pi_limit) > 0)) rvx__mlx5_wait_room((c), (nbb))

/* ctrl segment, as mlx5dv_set_ctrl_seg would write it: opmod|index|opcode, qpn|ds, then
 * signature, stream id and fm_ce_se, imm. Written as two 8-byte stores. */
RVX_INLINE void rvx__mlx5_ctrl(uint8_t *wqe, uint32_t pi, unsigned opmod, unsigned opcode,
                               uint32_t qpn8, unsigned ds, unsigned fm_ce_se, uint32_t imm)
{
    uint64_t w0 = (uint64_t)rvx_htobe32(opmod << 24 | (pi & 0xffff) << 8 | opcode) |
                  (uint64_t)rvx_htobe32(qpn8 | ds) << 32;
    uint64_t w1 = (uint64_t)fm_ce_se << 24 | (uint64_t)imm << 32;
    ((uint64_t *)(void *)wqe)[0] = w0;
    ((uint64_t *)(void *)wqe)[1] = w1;
}

RVX_INLINE void rvx__mlx5_raddr(uint8_t *seg, uint64_t raddr, const rvx_rkey_t *rkey)
{
    ((uint64_t *)(void *)seg)[0] = rvx_htobe64(raddr);
    ((uint64_t *)(void *)seg)[1] = rkey->rkey_word;
}

RVX_INLINE void rvx__mlx5_dseg(uint8_t *seg, uint32_t len, uint32_t lkey, const void *addr)
{
    ((uint64_t *)(void *)seg)[0] = (uint64_t)rvx_htobe32(len) | (uint64_t)rvx_htobe32(lkey) << 32;
    ((uint64_t *)(void *)seg)[1] = rvx_htobe64((uint64_t)(uintptr_t)addr);
}

/* Inline data segment at seg: byte count, then the payload (split at the end of the queue).
 * Returns the number of 16-byte units it takes. */
RVX_INLINE unsigned rvx__mlx5_inline(rvx__mlx5_conn_t *c, uint8_t *seg, const void *src, size_t len)
{
    uint8_t *qend = c->sq_buf + ((size_t)(c->sq_mask + 1) << 6);
    uint8_t *p = seg + 4;
    *(uint32_t *)(void *)seg = rvx_htobe32((uint32_t)len | MLX5_INLINE_SEG);
    if (RVX_LIKELY(p + len <= qend)) {
        memcpy(p, src, len);
    } else {
        size_t first = (size_t)(qend - p);
        memcpy(p, src, first);
        memcpy(c->sq_buf, (const uint8_t *)src + first, len - first);
    }
    return (unsigned)((4 + len + 15) / 16);
}

#if defined(__x86_64__)
RVX_COLD rvx_status_t rvx__mlx5_put8_slow(rvx__mlx5_conn_t *c, const void *src, uint64_t raddr,
                                          const rvx_rkey_t *rkey);

/* Post one WQEBB held in four SSE registers at pi: store it to the queue, move the producer index,
 * write the doorbell record, then the BlueFlame copy from the same registers (or the 8-byte
 * doorbell), and flip the BlueFlame half. */
RVX_INLINE void rvx__mlx5_post_bb(rvx__mlx5_conn_t *c, uint32_t pi, __m128i v0, __m128i v1,
                                  __m128i v2, __m128i v3)
{
    uint8_t *wqe = c->sq_buf + ((size_t)(pi & c->sq_mask) << 6), *reg;
    rvx__mlx5_bf_t *bf;
    _mm_store_si128((__m128i *)(void *)wqe, v0);
    _mm_store_si128((__m128i *)(void *)(wqe + 16), v1);
    _mm_store_si128((__m128i *)(void *)(wqe + 32), v2);
    _mm_store_si128((__m128i *)(void *)(wqe + 48), v3);
    c->pi = ++pi;
    rvx_to_device_barrier();
    *c->dbrec = rvx_htobe32(pi & 0xffff);
    rvx_wc_start();
    bf = c->bf;
    reg = bf->cur;
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
    _mm_store_si128((__m128i *)(void *)reg, v0);
    _mm_store_si128((__m128i *)(void *)(reg + 16), v1);
    _mm_store_si128((__m128i *)(void *)(reg + 32), v2);
    _mm_store_si128((__m128i *)(void *)(reg + 48), v3);
#else
    (void)v1; (void)v2; (void)v3;
    *(volatile uint64_t *)(void *)reg = (uint64_t)_mm_cvtsi128_si64(v0);
#endif
    rvx_wc_flush();
    bf->cur = (uint8_t *)((uintptr_t)reg ^ bf->flip);
}

/* An 8-byte put, the case the kit is measured by: one WQEBB built in SSE registers (ctrl, raddr,
 * inline header + 8 bytes, a zero quarter) and stored from them to the queue and to the
 * BlueFlame register; the rkey word and the ctrl's opcode/QPN/DS are precomputed. `hi` is bytes
 * 8-15 of the ctrl segment (fm_ce_se in byte 11): 0 on the fast path. */
RVX_INLINE void rvx__mlx5_put8_post(rvx__mlx5_conn_t *c, uint32_t pi, const void *src,
                                    uint64_t raddr, const rvx_rkey_t *rkey, uint64_t hi)
{
    __m128i v0, v1, v2, v3 = _mm_setzero_si128();
    v2 = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)src), 4),
                      _mm_cvtsi32_si128((int)rvx_htobe32(8u | MLX5_INLINE_SEG)));
    v1 = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_cvtsi64_si128((long long)rvx_htobe64(raddr))),
                                       (const double *)(const void *)&rkey->rkey_word));
    /* opmod 0 | WQE index | opcode, then QPN | DS: one 64-bit byte swap */
    v0 = _mm_cvtsi64_si128((long long)rvx_htobe64((uint64_t)(uint16_t)pi << 40 | c->ctrl_w8));
    if (hi) v0 = _mm_unpacklo_epi64(v0, _mm_cvtsi64_si128((long long)hi));
    rvx__mlx5_post_bb(c, pi, v0, v1, v2, v3);
}

/* Full queue, or the WQE that asks for a completion (sig_left reached 0) or carries a fence.
 * Arguments in the order put8 receives them, so that its tail call moves no register. */
RVX_COLD rvx_status_t rvx__mlx5_put8_slow(rvx__mlx5_conn_t *c, const void *src, uint64_t raddr,
                                          const rvx_rkey_t *rkey)
{
    unsigned f;
    uint32_t pi;
    RVX__MLX5_NEED(c, 1);
    pi = c->pi;
    f = rvx__mlx5_flags(c, 0);
    if (f & RVX__MLX5_CE) rvx__mlx5_mark_sig(c, pi, pi + 1);
    rvx__mlx5_put8_post(c, pi, src, raddr, rkey, (uint64_t)f << 24);
    return RVX_OK;
}

RVX_INLINE rvx_status_t rvx__mlx5_put8(rvx__mlx5_conn_t *c, const void *src, uint64_t raddr,
                                       const rvx_rkey_t *rkey)
{
    uint32_t pi = c->pi;
    /* a full queue, or the WQE that must ask for a completion (or carry a fence): out of line,
     * as a tail call so that this path needs no stack frame */
    if (RVX_UNLIKELY((int32_t)(pi - c->pi_limit) >= 0)) return rvx__mlx5_put8_slow(c, src, raddr, rkey);
    if (RVX_UNLIKELY(--c->sig_left == 0)) return rvx__mlx5_put8_slow(c, src, raddr, rkey);
    rvx__mlx5_put8_post(c, pi, src, raddr, rkey, 0);
    return RVX_OK;
}
#endif

RVX_INLINE rvx_status_t rvx__mlx5_put_short_gen(rvx__mlx5_conn_t *c, const void *src, size_t len,
                                                uint64_t raddr, const rvx_rkey_t *rkey)
{
    uint32_t pi, nbb, ds;
    uint8_t *wqe;
    unsigned flags;
    ds = 2 + (unsigned)((4 + len + 15) / 16);
    nbb = (ds + 3) / 4;
    RVX__MLX5_NEED(c, nbb);
    pi = c->pi;
    wqe = rvx__mlx5_slot(c, pi);
    flags = rvx__mlx5_flags(c, 0);
    rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->qpn8, ds, flags, 0);
    rvx__mlx5_raddr(wqe + 16, raddr, rkey);
    {   /* the inline segment, and zeros to the end of the last WQEBB (the BlueFlame copy sends
         * whole WQEBBs, and the queue must hold the same bytes) */
        uint8_t *seg = rvx__mlx5_next_seg(c, wqe + 16);
        unsigned units = rvx__mlx5_inline(c, seg, src, len);
        size_t used = 4 + len, pad = units * 16 - used;
        uint8_t *p = seg + used, *qend = c->sq_buf + ((size_t)(c->sq_mask + 1) << 6);
        if (p >= qend) p -= (size_t)(qend - c->sq_buf);
        while (pad--) {
            *p++ = 0;
            if (p == qend) p = c->sq_buf;
        }
        for (pad = (size_t)nbb * 4 - ds; pad; pad--) {
            memset(p, 0, 16);
            p += 16;
            if (p == qend) p = c->sq_buf;
        }
    }
    if (flags & RVX__MLX5_CE) rvx__mlx5_mark_sig(c, pi, pi + nbb);
    c->pi = pi + nbb;
    rvx__mlx5_ring(c, pi + nbb, wqe, nbb);
    return RVX_OK;
}

/* Put short: ctrl, raddr, inline data; one or two WQEBBs. */
RVX_INLINE rvx_status_t rvx__tl_put_short(rvx__tl_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx_rkey_t *rkey)
{
    if (len == 0) return RVX_OK;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && len == 8) return rvx__mlx5_put8(ep->c, src, raddr, rkey);
#endif
    return rvx__mlx5_put_short_gen(ep->c, src, len, raddr, rkey);
}

/* Room in the bounce ring for len bytes (8-aligned), given back in WQE order. */
RVX_COLD uint8_t *rvx__mlx5_bounce_wait(rvx__mlx5_conn_t *c, size_t len);

RVX_INLINE uint8_t *rvx__mlx5_bounce(rvx__mlx5_conn_t *c, size_t len)
{
    uint64_t pos = c->b_head, off;
    len = (len + 63) & ~(size_t)63;
    off = pos % RVX__MLX5_BOUNCE_BYTES;
    if (off + len > RVX__MLX5_BOUNCE_BYTES) { pos += RVX__MLX5_BOUNCE_BYTES - off; off = 0; }
    if (RVX_UNLIKELY(pos + len - c->b_tail > RVX__MLX5_BOUNCE_BYTES)) return rvx__mlx5_bounce_wait(c, len);
    c->b_head = pos + len;
    return c->bounce + off;
}

/* One WQE with a raddr segment and a data segment: WRITE or READ (opcode), from/to local memory
 * addr (lkey). `o` describes what to do when it retires; sig forces a CQE. */
RVX_INLINE void rvx__mlx5_post_rdma(rvx__mlx5_conn_t *c, unsigned opcode, const void *addr,
                                    uint32_t len, uint32_t lkey, uint64_t raddr,
                                    const rvx_rkey_t *rkey, const rvx__mlx5_op_t *o, int sig)
{
    uint32_t pi;
    uint8_t *wqe;
    unsigned flags;
    RVX__MLX5_NEED(c, 1);
    pi = c->pi;
    wqe = rvx__mlx5_slot(c, pi);
    flags = rvx__mlx5_flags(c, sig);
    rvx__mlx5_ctrl(wqe, pi, 0, opcode, c->qpn8, 3, flags, 0);
    rvx__mlx5_raddr(wqe + 16, raddr, rkey);
    rvx__mlx5_dseg(wqe + 32, len, lkey, addr);
    ((uint64_t *)(void *)wqe)[6] = 0; /* the unused quarter: the BlueFlame copy sends it too */
    ((uint64_t *)(void *)wqe)[7] = 0;
    if (o) {
        rvx__mlx5_op_t *e = &c->ops[pi & c->sq_mask];
        e->kind = o->kind;
        e->len = o->len;
        e->dst = o->dst;
        e->src = o->src;
        e->req = o->req;
        e->bounce = o->bounce;
        c->nops++;
    }
    if (flags & RVX__MLX5_CE) rvx__mlx5_mark_sig(c, pi, pi + 1);
    if (opcode == MLX5_OPCODE_RDMA_READ) rvx__mlx5_set_fence(c);
    c->pi = pi + 1;
    rvx__mlx5_ring(c, pi + 1, wqe, 1);
}

/* Put bcopy: copy into the bounce ring (chunks of RVX_PUT_BCOPY_MAX), one WRITE per chunk. The
 * source can be reused on return. */
RVX_INLINE rvx_status_t rvx__tl_put_bcopy(rvx__tl_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx_rkey_t *rkey)
{
    rvx__mlx5_conn_t *c = ep->c;
    size_t done = 0;
    while (done < len) {
        size_t n = len - done < RVX__MLX5_BOUNCE_CHUNK ? len - done : RVX__MLX5_BOUNCE_CHUNK;
        rvx__mlx5_op_t o;
        uint8_t *b;
        if (n <= RVX__TL_SHORT_MAX) {
            rvx__tl_put_short(ep, (const uint8_t *)src + done, n, raddr + done, rkey);
            done += n;
            continue;
        }
        b = rvx__mlx5_bounce(c, n);
        if (RVX_UNLIKELY(!b)) return c->err != RVX_OK ? c->err : RVX_ERR_PEER_FAILED;
        memcpy(b, (const uint8_t *)src + done, n);
        memset(&o, 0, sizeof(o));
        o.kind = RVX__OP_NONE;
        o.bounce = c->b_head;
        rvx__mlx5_post_rdma(c, MLX5_OPCODE_RDMA_WRITE, b, (uint32_t)n, c->bounce_mr->lkey,
                            raddr + done, rkey, &o, 0);
        done += n;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__mlx5_wait_req(rvx__mlx5_conn_t *c, rvx_request_t *req);

/* Put or get zcopy: straight from / into registered memory, in WQEs of at most 1 GiB; the request
 * completes when the last one has (without a request, the call waits). */
RVX_INLINE rvx_status_t rvx__mlx5_rdma_zcopy(rvx__mlx5_conn_t *c, unsigned opcode, const uint8_t *buf,
                                             size_t len, const rvx__tl_mem_t *lmem, uint64_t raddr,
                                             const rvx_rkey_t *rkey, rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    if (len == 0) return RVX_OK;
    if (!req) { req = &own; own.status = RVX_INPROGRESS; }
    while (done < len) {
        size_t n = len - done > (1u << 30) ? (1u << 30) : len - done;
        int last = done + n == len;
        rvx__mlx5_op_t o;
        memset(&o, 0, sizeof(o));
        o.kind = RVX__OP_REQ;
        o.req = req;
        rvx__mlx5_post_rdma(c, opcode, buf + done, (uint32_t)n, lmem->lkey, raddr + done, rkey,
                            last ? &o : NULL, last);
        done += n;
    }
    return req == &own ? rvx__mlx5_wait_req(c, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__tl_put_zcopy(rvx__tl_ep_t *ep, const void *src, size_t len,
                                          const rvx__tl_mem_t *lmem, uint64_t raddr,
                                          const rvx_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_rdma_zcopy(ep->c, MLX5_OPCODE_RDMA_WRITE, (const uint8_t *)src, len, lmem,
                                raddr, rkey, req);
}

/* Get bcopy: READs into the bounce ring, copied to dst as each completes; the request completes
 * with the last chunk. Without a request the call waits. */
RVX_INLINE rvx_status_t rvx__tl_get_bcopy(rvx__tl_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx_rkey_t *rkey, rvx_request_t *req)
{
    rvx__mlx5_conn_t *c = ep->c;
    rvx_request_t own;
    size_t done = 0;
    if (len == 0) return RVX_OK;
    if (!req) { req = &own; own.status = RVX_INPROGRESS; }
    while (done < len) {
        size_t n = len - done < RVX__MLX5_BOUNCE_CHUNK ? len - done : RVX__MLX5_BOUNCE_CHUNK;
        int last = done + n == len;
        rvx__mlx5_op_t o;
        uint8_t *b = rvx__mlx5_bounce(c, n);
        if (RVX_UNLIKELY(!b)) return c->err != RVX_OK ? c->err : RVX_ERR_PEER_FAILED;
        o.kind = RVX__OP_COPY;
        o.sig = 0;
        o.nbb = 0;
        o.len = (uint32_t)n;
        o.dst = (uint8_t *)dst + done;
        o.src = b;
        o.req = last ? req : NULL;
        o.bounce = c->b_head;
        rvx__mlx5_post_rdma(c, MLX5_OPCODE_RDMA_READ, b, (uint32_t)n, c->bounce_mr->lkey,
                            raddr + done, rkey, &o, last);
        done += n;
    }
    return req == &own ? rvx__mlx5_wait_req(c, &own) : RVX_INPROGRESS;
}

RVX_INLINE rvx_status_t rvx__tl_get_zcopy(rvx__tl_ep_t *ep, void *dst, size_t len,
                                          const rvx__tl_mem_t *lmem, uint64_t raddr,
                                          const rvx_rkey_t *rkey, rvx_request_t *req)
{
    return rvx__mlx5_rdma_zcopy(ep->c, MLX5_OPCODE_RDMA_READ, (const uint8_t *)dst, len, lmem,
                                raddr, rkey, req);
}

/* ---- atomics -------------------------------------------------------------------------------- */

/* One atomic WQE. native: ATOMIC_FA / ATOMIC_CS (64-bit only); masked: opmod 0x08 | log2(size)-2
 * with the masked segment {swap/add, compare/boundary, swap_mask, compare_mask}. The old value
 * lands in an 8-byte bounce slot and is copied to *fetch when the WQE completes. */
RVX_INLINE rvx_status_t rvx__mlx5_amo(rvx__mlx5_conn_t *c, unsigned opcode, unsigned size,
                                      uint64_t a, uint64_t b, uint64_t amask, uint64_t bmask,
                                      uint64_t raddr, const rvx_rkey_t *rkey, void *fetch,
                                      rvx_request_t *req)
{
    int masked = opcode == MLX5_OPCODE_ATOMIC_MASKED_CS || opcode == MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned ds = (masked && size == 8 && opcode == MLX5_OPCODE_ATOMIC_MASKED_CS) ? 5 : 4;
    uint32_t nbb = (ds + 3) / 4, pi;
    unsigned opmod = masked ? (size == 8 ? 0x09u : 0x08u) : 0u;
    uint8_t *wqe, *seg, *slot;
    unsigned flags;
    rvx__mlx5_op_t *e;
    rvx_request_t own;
    int wait = fetch && !req;

    slot = rvx__mlx5_bounce(c, 8);
    if (RVX_UNLIKELY(!slot)) return c->err != RVX_OK ? c->err : RVX_ERR_PEER_FAILED;
    if (wait) { req = &own; own.status = RVX_INPROGRESS; }
    RVX__MLX5_NEED(c, nbb);
    pi = c->pi;
    wqe = rvx__mlx5_slot(c, pi);
    flags = rvx__mlx5_flags(c, fetch != NULL);
    rvx__mlx5_ctrl(wqe, pi, opmod, opcode, c->qpn8, ds, flags, 0);
    seg = wqe + 16;
    rvx__mlx5_raddr(seg, raddr, rkey);
    seg = rvx__mlx5_next_seg(c, seg);
    if (size == 8) {
        ((uint64_t *)(void *)seg)[0] = rvx_htobe64(a);
        ((uint64_t *)(void *)seg)[1] = rvx_htobe64(b);
        if (ds == 5) {
            seg = rvx__mlx5_next_seg(c, seg);
            ((uint64_t *)(void *)seg)[0] = rvx_htobe64(amask);
            ((uint64_t *)(void *)seg)[1] = rvx_htobe64(bmask);
        }
    } else {
        ((uint32_t *)(void *)seg)[0] = rvx_htobe32((uint32_t)a);
        ((uint32_t *)(void *)seg)[1] = rvx_htobe32((uint32_t)b);
        ((uint32_t *)(void *)seg)[2] = rvx_htobe32((uint32_t)amask);
        ((uint32_t *)(void *)seg)[3] = rvx_htobe32((uint32_t)bmask);
    }
    seg = rvx__mlx5_next_seg(c, seg);
    rvx__mlx5_dseg(seg, size, c->bounce_mr->lkey, slot);
    e = &c->ops[pi & c->sq_mask];
    e->kind = fetch ? (size == 8 ? RVX__OP_FETCH64 : RVX__OP_FETCH32) : RVX__OP_NONE;
    e->len = size;
    e->dst = fetch;
    e->src = slot;
    e->req = fetch ? req : NULL;
    e->bounce = c->b_head;
    c->nops++;
    if (flags & RVX__MLX5_CE) rvx__mlx5_mark_sig(c, pi, pi + nbb);
    rvx__mlx5_set_fence(c);
    c->pi = pi + nbb;
    rvx__mlx5_ring(c, pi + nbb, wqe, nbb);
    if (wait) return rvx__mlx5_wait_req(c, &own);
    return fetch ? RVX_INPROGRESS : RVX_OK;
}

RVX_COLD rvx_status_t rvx__mlx5_amo_loop(rvx__mlx5_conn_t *c, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t raddr, const rvx_rkey_t *rkey,
                                         void *fetch, rvx_request_t *req);

/* Map an rvx_amo_op_t to one NIC atomic (see proto/amo.h for the mapping). */
RVX_INLINE rvx_status_t rvx__mlx5_atomic(rvx__tl_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t cmp, uint64_t raddr,
                                         const rvx_rkey_t *rkey, void *fetch, rvx_request_t *req)
{
    rvx__mlx5_conn_t *c = ep->c;
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
            return rvx__mlx5_amo(c, MLX5_OPCODE_ATOMIC_CS, 8, v, cmp, 0, 0, raddr, rkey, fetch, req);
        return rvx__mlx5_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, 4, v, cmp, ones, ones, raddr, rkey,
                             fetch, req);
    case RVX_AMO_SET:
    case RVX_AMO_SWAP: /* compare nothing, replace every bit */
        return rvx__mlx5_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, size, v, 0, ones, 0, raddr, rkey,
                             fetch, req);
    case RVX_AMO_AND: /* clear the bits that are 0 in v */
        return rvx__mlx5_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, size, 0, 0, ~v & ones, 0, raddr,
                             rkey, fetch, req);
    case RVX_AMO_OR: /* set the bits that are 1 in v */
        return rvx__mlx5_amo(c, MLX5_OPCODE_ATOMIC_MASKED_CS, size, v, 0, v, 0, raddr, rkey,
                             fetch, req);
    case RVX_AMO_XOR: /* masked fetch-add with a field boundary at every bit: no carries */
        return rvx__mlx5_amo(c, MLX5_OPCODE_ATOMIC_MASKED_FA, size, v, ones, 0, 0, raddr, rkey,
                             fetch, req);
    default: /* MULT, MIN, MAX, UMIN, UMAX: compare-and-swap loop */
        return rvx__mlx5_amo_loop(c, op, size, v, raddr, rkey, fetch, req);
    }
    /* the adds: native 64-bit FA; 32-bit through masked FA without boundaries */
    return rvx__mlx5_amo(c, fa, size, v, 0, 0, 0, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__tl_atomic64(rvx__tl_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    return rvx__mlx5_atomic(ep, op, 8, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx__tl_atomic32(rvx__tl_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    return rvx__mlx5_atomic(ep, op, 4, operand, compare, raddr, rkey, fetch, req);
}

/* ---- messages ------------------------------------------------------------------------------- */

/* A SEND with immediate whose body (at most 44 bytes) goes inline in one WQEBB. An empty body
 * has no inline segment (libmlx5 emits none for zero bytes). */
RVX_INLINE void rvx__mlx5_send_inline(uint8_t *wqe, uint32_t pi, uint32_t qpn8, unsigned flags,
                                      uint32_t imm_be, const void *body, size_t len)
{
    unsigned ds = 1 + (len ? (unsigned)((4 + len + 15) / 16) : 0);
    rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_SEND_IMM, qpn8, ds, flags, imm_be);
    *(uint32_t *)(void *)(wqe + 16) = len ? rvx_htobe32((uint32_t)len | MLX5_INLINE_SEG) : 0;
    memcpy(wqe + 20, body, len);
    memset(wqe + 20 + len, 0, 44 - len);
}

#if RVX_CAN_RECEIVE

/* Room for one more frame at the peer: the cached limit, else the peer's credit word (how many
 * frames we may have sent in all). A failed conn has tx_limit 0 and gets none. */
RVX_INLINE int rvx__mlx5_credit(rvx__mlx5_conn_t *c)
{
    if (RVX_LIKELY(c->tx_sent < c->tx_limit)) return 1;
    if (c->failed) return 0;
    c->tx_limit = *c->credit_word;
    return c->tx_sent < c->tx_limit;
}

/* Where to write a frame of len bytes: small frames go inline in the WQE (built in the bounce
 * ring first), others from the bounce ring. NULL when the peer has no free receive buffer. */
RVX_INLINE void *rvx__tl_am_claim(rvx__tl_ep_t *ep, unsigned chan, size_t len)
{
    rvx__mlx5_conn_t *c = ep->c;
    (void)chan;
    if (!rvx__mlx5_credit(c)) return NULL;
    if (len <= 44) return c->scratch;
    return rvx__mlx5_bounce(c, len);
}

/* SEND with immediate (info | chan << 16): inline when it fits one WQEBB with the ctrl segment,
 * otherwise a data segment on the bounce ring. */
RVX_INLINE void rvx__mlx5_publish_gen(rvx__mlx5_conn_t *c, unsigned chan, void *body, size_t len,
                                      unsigned info)
{
    uint32_t pi, imm = rvx_htobe32(info | chan << 16);
    uint8_t *wqe;
    unsigned flags;
    rvx__mlx5_op_t *e;
    RVX__MLX5_NEED(c, 1);
    pi = c->pi;
    wqe = rvx__mlx5_slot(c, pi);
    flags = rvx__mlx5_flags(c, 0);
    if (len <= 44) { /* body is the scratch area: copy it into the WQE */
        rvx__mlx5_send_inline(wqe, pi, c->qpn8, flags, imm, body, len);
    } else {
        rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_SEND_IMM, c->qpn8, 2, flags, imm);
        rvx__mlx5_dseg(wqe + 16, (uint32_t)len, c->bounce_mr->lkey, body);
        memset(wqe + 32, 0, 32);
        /* the bounce space goes back when this WQE retires */
        e = &c->ops[pi & c->sq_mask];
        e->kind = RVX__OP_NONE;
        e->bounce = c->b_head;
        e->req = NULL;
        c->nops++;
    }
    if (flags & RVX__MLX5_CE) rvx__mlx5_mark_sig(c, pi, pi + 1);
    c->tx_sent++;
    c->pi = pi + 1;
    rvx__mlx5_ring(c, pi + 1, wqe, 1);
}

RVX_COLD void rvx__mlx5_publish_slow(rvx__mlx5_conn_t *c, unsigned chan, void *body, size_t len,
                                     unsigned info)
{
    rvx__mlx5_publish_gen(c, chan, body, len, info);
}

RVX_INLINE void rvx__tl_am_publish(rvx__tl_ep_t *ep, unsigned chan, void *body, size_t len,
                                   unsigned info)
{
    rvx__mlx5_conn_t *c = ep->c;
#if defined(__x86_64__)
    if (__builtin_constant_p(len) && __builtin_constant_p(info) && __builtin_constant_p(chan) &&
        len == 8) {
        /* the 8-byte message (one argument): as put8, one WQEBB from SSE registers */
        uint32_t pi = c->pi;
        __m128i v0, v1, v2 = _mm_setzero_si128();
        if (RVX_UNLIKELY((int32_t)(pi - c->pi_limit) >= 0 || --c->sig_left == 0)) {
            rvx__mlx5_publish_slow(c, chan, body, len, info);
            return;
        }
        v1 = _mm_or_si128(_mm_slli_si128(_mm_loadl_epi64((const __m128i *)body), 4),
                          _mm_cvtsi32_si128((int)rvx_htobe32(8u | MLX5_INLINE_SEG)));
        v0 = _mm_set_epi64x((long long)((uint64_t)rvx_htobe32(info | chan << 16) << 32),
                            (long long)rvx_htobe64((uint64_t)(uint16_t)pi << 40 | c->ctrl_send2));
        c->tx_sent++;
        rvx__mlx5_post_bb(c, pi, v0, v1, v2, v2);
        return;
    }
#endif
    rvx__mlx5_publish_gen(c, chan, body, len, info);
}

/* Zero-copy message: one SEND_IMM WQEBB with the header as an inline segment and the body as a
 * data segment on the caller's registered memory (lmem's lkey), no copy of the body. Always
 * signaled: the buffer is the NIC's until the WQE retires, and req completes then, through the
 * ops table as zero-copy gets do (without a request the call waits). RVX_ERR_NO_RESOURCE: no
 * credit for a frame at the peer, nothing posted. hdrlen + len must fit a receive frame. */
#define RVX__TL_AM_ZCOPY         1  /* real zero-copy: the body must be registered */
#define RVX__TL_AM_ZCOPY_HDR_MAX 28 /* ctrl 16 + inline 4 + 28 + data seg 16: one WQEBB */
RVX_INLINE rvx_status_t rvx__tl_am_zcopy(rvx__tl_ep_t *ep, unsigned chan, const void *hdr, size_t hdrlen,
                                         const void *buf, size_t len, const rvx__tl_mem_t *lmem,
                                         unsigned info, rvx_request_t *req)
{
    rvx__mlx5_conn_t *c = ep->c;
    uint32_t pi;
    uint8_t *wqe, *seg;
    unsigned flags, ids = hdrlen ? (unsigned)((4 + hdrlen + 15) / 16) : 0;
    rvx__mlx5_op_t *e;
    rvx_request_t own;
    if (hdrlen > RVX__TL_AM_ZCOPY_HDR_MAX || hdrlen + len > RVX__MLX5_FRAME || (len && !lmem))
        return RVX_ERR_INVALID_PARAM;
    if (!rvx__mlx5_credit(c))
        return !c->failed ? RVX_ERR_NO_RESOURCE : c->err != RVX_OK ? c->err : RVX_ERR_PEER_FAILED;
    if (!req) { req = &own; own.status = RVX_INPROGRESS; }
    RVX__MLX5_NEED(c, 1);
    pi = c->pi;
    wqe = rvx__mlx5_slot(c, pi);
    flags = rvx__mlx5_flags(c, 1);
    rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_SEND_IMM, c->qpn8, 1 + ids + (len ? 1 : 0), flags,
                   rvx_htobe32(info | chan << 16));
    seg = wqe + 16;
    memset(seg, 0, 48);
    if (hdrlen) {
        *(uint32_t *)(void *)seg = rvx_htobe32((uint32_t)hdrlen | MLX5_INLINE_SEG);
        memcpy(seg + 4, hdr, hdrlen);
        seg += 16 * ids;
    }
    if (len) rvx__mlx5_dseg(seg, (uint32_t)len, lmem->lkey, buf);
    e = &c->ops[pi & c->sq_mask];
    e->kind = RVX__OP_REQ;
    e->req = req;
    e->bounce = 0;
    c->nops++;
    rvx__mlx5_mark_sig(c, pi, pi + 1);
    c->tx_sent++;
    c->pi = pi + 1;
    rvx__mlx5_ring(c, pi + 1, wqe, 1);
    return req == &own ? rvx__mlx5_wait_req(c, &own) : RVX_INPROGRESS;
}
#endif

/* ---- completions ---------------------------------------------------------------------------- */

RVX_INLINE struct mlx5_cqe64 *rvx__mlx5_cqe(const rvx__tl_iface_t *ifc, uint32_t ci)
{
    return (struct mlx5_cqe64 *)(void *)(ifc->cq_buf + ((size_t)(ci & ifc->cq_mask) << ifc->cq_shift));
}

/* Valid iff the opcode is not INVALID and the owner bit equals the pass parity of ci. */
/* Valid iff the owner bit is this pass's and the opcode is not INVALID (0xf): after the xor the
 * low bit is 0 and the value is below 0xf0. */
RVX_INLINE int rvx__mlx5_cqe_ready(const rvx__tl_iface_t *ifc, uint8_t op_own)
{
    unsigned t = op_own ^ ifc->cq_owner;
    return !(t & 1) && t < 0xf0;
}

/* The consumer index moves on: where the next CQE's op_own is, and which owner bit it needs. */
RVX_INLINE void rvx__mlx5_cq_advance(rvx__tl_iface_t *ifc)
{
    uint32_t ci = ++ifc->cq_ci;
    ifc->cqe_next = &rvx__mlx5_cqe(ifc, ci)->op_own;
    ifc->cq_owner = !!(ci & ifc->cq_cnt);
}

RVX_COLD void rvx__mlx5_complete(rvx_request_t *req, rvx_status_t st)
{
    if (req) req->status = st;
}

/* Retire [c->ci, end): run the ops entries (copies, fetches, requests), give back bounce space,
 * complete flushes whose target is reached. */
RVX_COLD void rvx__mlx5_retire(rvx__mlx5_conn_t *c, uint32_t end, rvx_status_t st)
{
    rvx_request_t **pp;
    while (c->nops && c->ci != end) {
        rvx__mlx5_op_t *o = &c->ops[c->ci & c->sq_mask];
        if (o->kind != RVX__OP_NONE || o->bounce) {
            if (st == RVX_OK) {
                if (o->kind == RVX__OP_COPY) memcpy(o->dst, o->src, o->len);
                else if (o->kind == RVX__OP_FETCH32 && o->dst) memcpy(o->dst, o->src, 4);
                else if (o->kind == RVX__OP_FETCH64 && o->dst) memcpy(o->dst, o->src, 8);
            }
            if (o->req) rvx__mlx5_complete(o->req, st);
            if (o->bounce) c->b_tail = o->bounce;
            o->kind = RVX__OP_NONE;
            o->bounce = 0;
            o->req = NULL;
            c->nops--;
        }
        c->ci++;
    }
    c->ci = end;
    c->pi_limit = end + c->room;
    /* flushes in order of their targets */
    pp = &c->flush_head;
    while (*pp && (int32_t)(c->ci - (uint32_t)(*pp)->tl_private[1]) >= 0) {
        rvx_request_t *r = *pp;
        *pp = (rvx_request_t *)(uintptr_t)r->tl_private[0];
        r->status = c->err;
    }
    if (!c->flush_head) c->flush_tail = NULL;
}

RVX_COLD void rvx__mlx5_fail(rvx__mlx5_conn_t *c, rvx_status_t st, unsigned synd, unsigned vendor,
                             uint16_t idx)
{
    if (!c->failed) {
        c->failed = 1;
        c->err = st;
        c->tx_limit = 0; /* sends take the slow path, which sees the failure */
        rvx__log("rc_mlx5: operation to rank %d failed: %s (syndrome 0x%x, vendor 0x%x, WQE %u): "
                 "the endpoint is marked failed", c->rank, rvx__mlx5_syndrome_str(synd), synd,
                 vendor, idx);
    }
}

/* A failed QP completes every WQE it holds with an error CQE, signaled or not: make sure progress
 * keeps polling until they have all come, even where only signaled work would make it poll. */
RVX_COLD void rvx__mlx5_hold(rvx__mlx5_conn_t *c)
{
    if (c->failed && !c->hold && c->ci != c->pi) {
        c->hold = 1;
        c->ifc->outstanding++;
    }
}

#if RVX_CAN_RECEIVE
RVX_COLD void rvx__mlx5_credit_return(rvx__mlx5_conn_t *c);
RVX_COLD void rvx__mlx5_rx_frame(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, uint32_t len,
                                 uint32_t imm, int deliver);
#endif

RVX_COLD void rvx__mlx5_hello(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, int on_spare,
                              uint32_t imm_be);
RVX_COLD void rvx__mlx5_rec_poll(rvx__tl_iface_t *ifc);

/* Handle every CQE present. deliver = 0: received requests are set aside (a reply is waiting
 * for room, or no handler may run). Returns the number of CQEs. */
RVX_COLD int rvx__mlx5_drain(rvx__tl_iface_t *ifc, int deliver)
{
    int n = 0;
    (void)deliver;
    for (;;) {
        struct mlx5_cqe64 *cqe = rvx__mlx5_cqe(ifc, ifc->cq_ci);
        uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
        unsigned opcode;
        uint32_t qpn;
        int32_t who;
        rvx__mlx5_conn_t *c;
        if (!rvx__mlx5_cqe_ready(ifc, op_own)) break;
        rvx_from_device_barrier();
        opcode = op_own >> 4;
        qpn = rvx_htobe32(cqe->sop_drop_qpn) & 0xffffff;
        who = rvx__mlx5_qpt_find(ifc, qpn, NULL);
        rvx__mlx5_cq_advance(ifc);
        n++;
        if (who < 0) {
            rvx__log("rc_mlx5: completion for unknown QP 0x%x ignored", qpn);
            continue;
        }
        c = &ifc->conns[who & ~RVX__MLX5_QPT_SPARE];
        if (RVX_UNLIKELY(who & RVX__MLX5_QPT_SPARE)) {
            /* a spare receives one hello and sends nothing */
            if (opcode == MLX5_CQE_RESP_SEND_IMM) rvx__mlx5_hello(ifc, c, 1, cqe->imm_inval_pkey);
            continue;
        }
        if ((opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR) &&
            (int16_t)(rvx_htobe16(cqe->wqe_counter) - (uint16_t)c->ci) < 0) {
            rvx__log("rc_mlx5: completion for WQE %u of QP 0x%x, already retired: ignored",
                     rvx_htobe16(cqe->wqe_counter), qpn);
            continue;
        }
        if (opcode == MLX5_CQE_REQ) {
            uint16_t idx = rvx_htobe16(cqe->wqe_counter);
            rvx__mlx5_op_t *o = &c->ops[idx & c->sq_mask];
            uint32_t start = c->ci + (uint16_t)(idx - (uint16_t)c->ci);
            o->sig = 0;
            c->sig_out--;
            ifc->outstanding--;
            rvx__mlx5_retire(c, start + o->nbb, RVX_OK);
        } else if (opcode == MLX5_CQE_REQ_ERR) {
            struct mlx5_err_cqe *e = (struct mlx5_err_cqe *)(void *)cqe;
            uint16_t idx = rvx_htobe16(e->wqe_counter);
            rvx__mlx5_op_t *o = &c->ops[idx & c->sq_mask];
            uint32_t start = c->ci + (uint16_t)(idx - (uint16_t)c->ci);
            rvx_status_t st = rvx__mlx5_syndrome_status(e->syndrome);
            uint32_t end;
            if (e->syndrome != MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
                rvx__mlx5_fail(c, st, e->syndrome, e->vendor_err_synd, idx);
            else if (!c->failed)
                rvx__mlx5_fail(c, RVX_ERR_CANCELED, e->syndrome, e->vendor_err_synd, idx);
            /* earlier WQEs completed; this one failed with st */
            rvx__mlx5_retire(c, start, RVX_OK);
            end = start + (o->nbb ? o->nbb : 1u);
            if (o->sig) {
                o->sig = 0;
                c->sig_out--;
                ifc->outstanding--;
            } else {
                /* unsignaled: its size is not recorded; step over WQEBBs until the next WQE
                 * start, which every later error CQE names */
                end = start + 1;
            }
            rvx__mlx5_retire(c, end, st);
            rvx__mlx5_hold(c);
            if (c->ci == c->pi && c->hold) {
                c->hold = 0;
                ifc->outstanding--;
            }
            if (c->ci == c->pi && c->sig_out) { /* counters of a dead QP: nothing more comes */
                ifc->outstanding -= c->sig_out;
                c->sig_out = 0;
            }
        } else if (opcode == MLX5_CQE_RESP_SEND_IMM) {
            if ((rvx_htobe32(cqe->imm_inval_pkey) & 0xffff) == RVX__MLX5_HELLO) {
                c->rx_seen++; /* the first receive of a QP that was a spare */
                rvx__mlx5_hello(ifc, c, 0, cqe->imm_inval_pkey);
            }
#if RVX_CAN_RECEIVE
            else rvx__mlx5_rx_frame(ifc, c, rvx_htobe32(cqe->byte_cnt), cqe->imm_inval_pkey, deliver);
#endif
        } else if (opcode == MLX5_CQE_RESP_ERR) {
            struct mlx5_err_cqe *e = (struct mlx5_err_cqe *)(void *)cqe;
            c->rq_flushed++; /* a receive came back without data */
            if (e->syndrome != MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
                rvx__mlx5_fail(c, rvx__mlx5_syndrome_status(e->syndrome), e->syndrome,
                               e->vendor_err_synd, rvx_htobe16(e->wqe_counter));
            else if (!c->failed)
                rvx__mlx5_fail(c, RVX_ERR_PEER_FAILED, e->syndrome, e->vendor_err_synd, 0);
        } else {
            rvx__log("rc_mlx5: unexpected CQE opcode %u from QP 0x%x ignored", opcode, qpn);
        }
    }
    if (n) *ifc->cq_dbrec = rvx_htobe32(ifc->cq_ci & 0xffffff);
    if (ifc->nrec) rvx__mlx5_rec_poll(ifc);
    if (ifc->wflush) {
        int i, idle = 1;
        for (i = 0; i < ifc->nranks && idle; i++) {
            const rvx__mlx5_conn_t *c = &ifc->conns[i];
            if ((int32_t)(c->ci - c->wflush_pi) < 0) idle = 0;
        }
        if (idle) {
            while (ifc->wflush) {
                rvx_request_t *r = ifc->wflush;
                ifc->wflush = (rvx_request_t *)(uintptr_t)r->tl_private[0];
                r->status = RVX_OK;
            }
        }
    }
    return n;
}

#if RVX_CAN_RECEIVE
/* The frame in the buffer at the next receive slot: hand it to the protocol (or keep it for an
 * endpoint that does not exist yet, or copy a request aside while a reply waits for room). */
RVX_COLD void rvx__mlx5_defer(rvx__tl_iface_t *ifc, int rank, unsigned chan, unsigned info,
                              const void *body, size_t len)
{
    rvx__mlx5_deferred_t *d = (rvx__mlx5_deferred_t *)malloc(sizeof(*d) + len);
    if (!d) {
        rvx__log("rc_mlx5: out of memory keeping a message from rank %d aside: dropped", rank);
        return;
    }
    d->next = NULL;
    d->rank = rank;
    d->chan = chan;
    d->info = info;
    d->len = len;
    memcpy(d->body, body, len);
    if (ifc->def_tail) ifc->def_tail->next = d;
    else ifc->def_head = d;
    ifc->def_tail = d;
}

/* Give a receive buffer back to the NIC, and credits to the peer every quarter queue. */
RVX_COLD void rvx__mlx5_rx_release(rvx__mlx5_conn_t *c, uint32_t slot)
{
    c->rx_done++;
    rvx__mlx5_post_recv(c, slot);
    rvx__mlx5_ring_recv(c);
    if (c->rx_done - c->rx_reported >= RVX_MLX5_RX_DEPTH / 4) rvx__mlx5_credit_return(c);
}

RVX_COLD void rvx__mlx5_rx_frame(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, uint32_t len,
                                 uint32_t imm, int deliver)
{
    uint64_t k = c->rx_seen++;
    uint32_t slot = c->rq_slot[k & c->rq_mask];
    uint8_t *buf = c->rx_buf + (size_t)slot * RVX__MLX5_FRAME;
    unsigned x = rvx_htobe32(imm), chan = x >> 16, info = x & 0xffff;
    if (!c->ep) { /* no endpoint yet: keep it in its buffer, in order */
        c->held_len[k & c->rq_mask] = len;
        c->held_imm[k & c->rq_mask] = x;
        c->rx_held++;
        return;
    }
    if (chan >= RVX__TL_AM_CHANNELS || len > RVX__MLX5_FRAME) {
        rvx__log("rc_mlx5: rank %d sent a frame with channel %u, %u bytes: dropped", c->rank, chan, len);
        rvx__mlx5_rx_release(c, slot);
    } else if (chan == RVX__CHAN_REQUEST && (!deliver || ifc->def_head)) {
        /* a handler may not run now, or earlier requests wait: keep the order */
        rvx__mlx5_defer(ifc, c->rank, chan, info, buf, len);
        rvx__mlx5_rx_release(c, slot);
    } else {
        /* the buffer goes back after the handler; frames a nested poll takes meanwhile use
         * other buffers (rq_slot maps positions to buffers, so the order of reposts is free) */
        rvx__rx_deliver(c->ep, chan, info, buf, len);
        rvx__mlx5_rx_release(c, slot);
    }
}

/* Frames a conn kept while it had no endpoint: queue copies for the next progress; repost: give the
 * buffers back to the QP (not when the QP is being replaced). */
RVX_COLD void rvx__mlx5_release_held(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, int repost)
{
    while (c->rx_held) {
        uint64_t k = c->rx_seen - c->rx_held;
        uint32_t slot = c->rq_slot[k & c->rq_mask];
        unsigned x = c->held_imm[k & c->rq_mask];
        uint32_t len = c->held_len[k & c->rq_mask];
        c->rx_held--;
        if ((x >> 16) < RVX__TL_AM_CHANNELS && len <= RVX__MLX5_FRAME)
            rvx__mlx5_defer(ifc, c->rank, x >> 16, x & 0xffff, c->rx_buf + (size_t)slot * RVX__MLX5_FRAME, len);
        if (repost) rvx__mlx5_rx_release(c, slot);
    }
}

RVX_COLD int rvx__mlx5_deliver_deferred(rvx__tl_iface_t *ifc)
{
    rvx__mlx5_deferred_t *kept = NULL, *last = NULL;
    int n = 0;
    while (ifc->def_head) {
        rvx__mlx5_deferred_t *d = ifc->def_head;
        ifc->def_head = d->next;
        if (!ifc->def_head) ifc->def_tail = NULL;
        if (!ifc->conns[d->rank].ep) { /* kept (in order) until the endpoint exists */
            d->next = NULL;
            if (last) last->next = d;
            else kept = d;
            last = d;
            continue;
        }
        rvx__rx_deliver(ifc->conns[d->rank].ep, d->chan, d->info, d->body, d->len);
        free(d);
        n++;
    }
    ifc->def_head = kept;
    ifc->def_tail = last;
    return n;
}

/* Tell the peer how many frames it may have sent in all (consumed + buffers): an 8-byte inline
 * WRITE into its control region (it needs no receive buffer, so credits always flow). */
RVX_COLD void rvx__mlx5_credit_return(rvx__mlx5_conn_t *c)
{
    rvx_rkey_t k;
    uint64_t v = c->rx_done + RVX_MLX5_RX_DEPTH;
    if (c->failed) return;
    k.rkey_word = (uint64_t)rvx_htobe32(c->peer_ctrl_rkey);
    k.base = c->peer_ctrl;
    k.len = 8;
    c->rx_reported = c->rx_done;
    {
        uint32_t pi;
        uint8_t *wqe;
        unsigned flags;
        RVX__MLX5_NEED(c, 1);
        pi = c->pi;
        wqe = rvx__mlx5_slot(c, pi);
        flags = rvx__mlx5_flags(c, 0);
        rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->qpn8, 3, flags, 0);
        rvx__mlx5_raddr(wqe + 16, c->peer_ctrl, &k);
        *(uint32_t *)(void *)(wqe + 32) = rvx_htobe32(8u | MLX5_INLINE_SEG);
        memcpy(wqe + 36, &v, 8);
        memset(wqe + 44, 0, 20);
        if (flags & RVX__MLX5_CE) rvx__mlx5_mark_sig(c, pi, pi + 1);
        c->pi = pi + 1;
        rvx__mlx5_ring(c, pi + 1, wqe, 1);
    }
}

#endif

/* ---- re-connection (cold; see the top of this file) ----------------------------------------- */

typedef struct rvx__mlx5_hello_msg {
    uint32_t magic;     /* RVX__MLX5_HELLO_MAGIC */
    uint32_t next_qpn;  /* the sender's next spare */
} rvx__mlx5_hello_msg_t;
#define RVX__MLX5_HELLO_MAGIC 0x72767848u /* "rvxH" */

/* Nothing more will complete on the conn's QP: every WQE and every receive has come back. */
RVX_COLD int rvx__mlx5_quiet(const rvx__mlx5_conn_t *c)
{
    return c->ci == c->pi && c->rq_head == (uint32_t)c->rx_seen + c->rq_flushed;
}

/* Fail the conn's QP on purpose: the NIC flushes everything it holds. */
RVX_COLD void rvx__mlx5_to_err(rvx__mlx5_conn_t *c, rvx_status_t st)
{
    struct ibv_qp_attr qa;
    if (!c->failed) {
        c->failed = 1;
        c->err = st;
        c->tx_limit = 0;
    }
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_ERR;
    if (ibv_modify_qp(c->qp, &qa, IBV_QP_STATE))
        rvx__log("rc_mlx5: QP to ERR (towards rank %d) failed: %s", c->rank, strerror(errno));
    rvx__mlx5_hold(c);
}

/* Send our hello (REQ or ACK) with the QPN of our next spare, signaled, outside the credits. */
RVX_COLD void rvx__mlx5_send_hello(rvx__mlx5_conn_t *c, unsigned kind)
{
    rvx__mlx5_hello_msg_t m;
    uint32_t pi = c->pi;
    uint8_t *wqe = rvx__mlx5_slot(c, pi);
    m.magic = RVX__MLX5_HELLO_MAGIC;
    m.next_qpn = c->sp_qpn;
    rvx__mlx5_send_inline(wqe, pi, c->qpn8, rvx__mlx5_flags(c, 1),
                          rvx_htobe32(RVX__MLX5_HELLO | kind << 16), &m, sizeof(m));
    rvx__mlx5_mark_sig(c, pi, pi + 1);
    c->pi = pi + 1;
    rvx__mlx5_ring(c, pi + 1, wqe, 1);
}

/* The conn's QP is quiet: keep it (in ERR), take the spare as the QP (to RTS towards the peer's
 * spare), create the next spare, post the message buffers and say hello. The initiator's hello
 * is the REQ; the follower answers with the ACK, and may send at once (the initiator posted its
 * buffers before its REQ). */
RVX_COLD rvx_status_t rvx__mlx5_take_spare(rvx__mlx5_conn_t *c, int initiator)
{
    rvx__tl_iface_t *ifc = c->ifc;
    struct ibv_qp **dead, *next;
    uint32_t rq_mask = c->rq_mask;
    rvx_status_t st;

    dead = (struct ibv_qp **)realloc(c->dead, (c->ndead + 1) * sizeof(*dead));
    if (!dead) return RVX_ERR_NO_MEMORY;
    c->dead = dead;
    c->dead[c->ndead++] = c->qp;
    rvx__mlx5_qpt_set(ifc, c->qpn, RVX__MLX5_QPT_GONE);
#if RVX_CAN_RECEIVE
    /* frames kept for an endpoint that did not exist yet: copies, delivered once it does (the
     * buffers are not posted again: the old QP is gone) */
    rvx__mlx5_release_held(ifc, c, 0);
#endif
    if (c->hold) { c->hold = 0; ifc->outstanding--; }
    ifc->outstanding -= c->sig_out;
    st = rvx__mlx5_adopt(ifc, c, c->sp_qp, 1); /* receive position 0 is the spare's hello */
    if (st == RVX_OK && c->rq_mask != rq_mask) st = RVX_ERR_UNSUPPORTED;
    if (st != RVX_OK) {
        rvx__log("rc_mlx5: cannot take the spare QP towards rank %d", c->rank);
        return st;
    }
    c->sp_qp = NULL;
    rvx__mlx5_qpt_set(ifc, c->qpn, c->rank);
    c->rqpn = c->sp_rqpn;
    c->b_head = c->b_tail = 1;
    c->ka_time = rvx__mlx5_now();
    if (!initiator) c->rx_seen = 1; /* the REQ took the hello receive */
    /* no credit until the peer's hello says its buffers are posted; the REQ said so already */
    ifc->ctrl[c->rank] = initiator ? 0 : RVX_MLX5_RX_DEPTH;
    c->tx_limit = 0;
#if RVX_CAN_RECEIVE
    rvx__mlx5_post_frames(c);
#endif
    st = rvx__mlx5_qp_connect(c, c->qp, c->rqpn, RVX__MLX5_RTR_TO_RTS);
    if (st != RVX_OK) return st;
    c->failed = 0;
    c->err = RVX_OK;
    /* the next spare: RTR once the peer's next spare is known */
    next = rvx__mlx5_qp_new(ifc, c->rank);
    c->sp_rqpn = 0;
    if (next) {
        rvx__mlx5_post_hello(ifc, next, c->rank);
        if (rvx__mlx5_qpt_add(ifc, next->qp_num, c->rank | RVX__MLX5_QPT_SPARE) == RVX_OK) {
            c->sp_qp = next;
            c->sp_qpn = next->qp_num;
        } else {
            ibv_destroy_qp(next); /* never connected: nothing of it is in the CQ */
        }
    }
    if (!c->sp_qp) {
        rvx__log("rc_mlx5: no spare QP towards rank %d: a later failure will be final", c->rank);
        c->sp_qpn = 0;
    }
    rvx__mlx5_send_hello(c, initiator ? RVX__MLX5_HELLO_REQ : RVX__MLX5_HELLO_ACK);
    return RVX_OK;
}

/* The peer's next spare is known: take ours to RTR towards it. */
RVX_COLD void rvx__mlx5_spare_ready(rvx__mlx5_conn_t *c, uint32_t peer_next)
{
    c->sp_rqpn = peer_next;
    if (c->sp_qp && rvx__mlx5_qp_connect(c, c->sp_qp, peer_next, RVX__MLX5_TO_RTR) != RVX_OK)
        c->sp_rqpn = 0;
}

/* A hello arrived: on our spare (the peer re-connected: follow), or on our QP (the answer to
 * ours, or the peer's own REQ when both sides re-connected at once). */
RVX_COLD void rvx__mlx5_hello(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c, int on_spare,
                              uint32_t imm_be)
{
    rvx__mlx5_hello_msg_t m;
    unsigned kind = rvx_htobe32(imm_be) >> 16;
    memcpy(&m, ifc->hello + 64 * (size_t)c->rank, sizeof(m));
    if (m.magic != RVX__MLX5_HELLO_MAGIC || kind > RVX__MLX5_HELLO_ACK) {
        rvx__log("rc_mlx5: a malformed re-connection message from rank %d: ignored", c->rank);
        return;
    }
    if (!on_spare) {
        if (!c->rec_wait) {
            rvx__log("rc_mlx5: an unexpected re-connection message from rank %d: ignored", c->rank);
            return;
        }
        c->rec_wait = 0;
        rvx__mlx5_spare_ready(c, m.next_qpn);
        ifc->ctrl[c->rank] = RVX_MLX5_RX_DEPTH; /* its buffers are posted: credits */
        return;
    }
    if (kind != RVX__MLX5_HELLO_REQ || c->rec_pending) {
        rvx__log("rc_mlx5: an unexpected re-connection message from rank %d: ignored", c->rank);
        return;
    }
    /* follow: whatever is in flight on our QP is lost with the peer's old QP. An endpoint that
     * exists fails (its user learns it, as from any failure, and re-creates it); without one the
     * spare is taken as soon as the old QP is quiet. */
    if (!c->failed && c->ep)
        rvx__log("rc_mlx5: rank %d re-connected after a failure: the endpoint to it fails (%s) "
                 "until it is re-created", c->rank, rvx_status_str(RVX_ERR_CANCELED));
    rvx__mlx5_to_err(c, RVX_ERR_CANCELED);
    c->rec_pending = 1;
    c->rec_peer_sp = m.next_qpn;
    ifc->nrec++;
    ifc->outstanding++; /* keep progress polling until the swap is done */
}

/* Follow a pending re-connection: the old QP is quiet; take the spare and answer. */
RVX_COLD rvx_status_t rvx__mlx5_follow(rvx__mlx5_conn_t *c)
{
    rvx_status_t st;
    c->rec_pending = 0;
    c->ifc->nrec--;
    c->ifc->outstanding--;
    st = rvx__mlx5_take_spare(c, 0);
    if (st == RVX_OK) rvx__mlx5_spare_ready(c, c->rec_peer_sp);
    return st;
}

/* Follow every pending re-connection that has no endpoint and whose old QP has gone quiet
 * (with an endpoint, rvx_ep_create does it). */
RVX_COLD void rvx__mlx5_rec_poll(rvx__tl_iface_t *ifc)
{
    int i;
    for (i = 0; i < ifc->nranks && ifc->nrec; i++) {
        rvx__mlx5_conn_t *c = &ifc->conns[i];
        if (c->rec_pending && !c->ep && rvx__mlx5_quiet(c)) rvx__mlx5_follow(c);
    }
}

/* rvx_ep_create on a failed conn: fail the old QP on purpose, wait until it is quiet, take the
 * spare and send the REQ. The REQ's completion shows that the peer's NIC took it (a dead peer
 * gives RVX_ERR_PEER_FAILED after the QP's retries); the peer's answer is awaited for 100 ms
 * but not required (a peer that never polls still serves puts and gets through its spare). */
RVX_COLD rvx_status_t rvx__mlx5_reconnect(rvx__tl_iface_t *ifc, rvx__mlx5_conn_t *c)
{
    double t0 = rvx__mlx5_now();
    unsigned spins = 0;
    rvx_status_t st;
    if (!c->sp_qp || !c->sp_rqpn) {
        rvx__log("rc_mlx5: the connection to rank %d failed (%s) and cannot be re-established: "
                 "%s", c->rank, rvx_status_str(c->err),
                 c->sp_qp ? "the peer never answered the last re-connection" : "no spare QP");
        return c->err;
    }
    if (!c->rec_pending) rvx__mlx5_to_err(c, c->err);
    for (;;) {
        if (rvx__mlx5_quiet(c)) {
            if (c->rec_pending) return rvx__mlx5_follow(c); /* the peer re-connected first */
            break;
        }
        if (rvx__mlx5_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        if (rvx__mlx5_now() - t0 > 10) {
            rvx__log("rc_mlx5: the failed QP towards rank %d did not flush in 10 s (WQEs %u of "
                     "%u, receives %u + %u of %u)", c->rank, c->ci, c->pi, (unsigned)c->rx_seen,
                     c->rq_flushed, c->rq_head);
            return c->err != RVX_OK ? c->err : RVX_ERR_IO;
        }
    }
    st = rvx__mlx5_take_spare(c, 1);
    if (st != RVX_OK) return st;
    c->rec_wait = 1;
    /* the REQ's own completion: the peer's NIC has it */
    while (c->ci != c->pi && !c->failed) {
        if (rvx__mlx5_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
    }
    if (c->failed) {
        rvx__log("rc_mlx5: rank %d did not take the re-connection: %s", c->rank,
                 rvx_status_str(c->err));
        return c->err;
    }
    t0 = rvx__mlx5_now();
    while (c->rec_wait && !c->failed && rvx__mlx5_now() - t0 < 0.1) {
        if (rvx__mlx5_drain(ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
    }
    return c->failed ? c->err : RVX_OK;
}

/* Something may be in the CQ: handle it all, then what was held back. */
RVX_COLD int rvx__mlx5_progress_slow(rvx__tl_iface_t *ifc)
{
    int n;
    if (ifc->in_rx) {
        if (!ifc->warned_nested++) rvx__log("rvx_progress called from an AM handler: ignored");
        return 0;
    }
    ifc->in_rx = 1;
    n = 0;
#if RVX_CAN_RECEIVE
    if (ifc->def_head) n += rvx__mlx5_deliver_deferred(ifc);
#endif
    n += rvx__mlx5_drain(ifc, 1);
    ifc->in_rx = 0;
    return n;
}

/* Progress: nothing without live endpoints (or, in an RMA-only build, without outstanding
 * signaled work); otherwise one look at the CQE at the consumer index. */
RVX_INLINE int rvx__tl_progress(rvx__tl_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    if (!ifc->nlive) return 0;
#else
    if (!ifc->outstanding) return 0;
#endif
    if (RVX_LIKELY(!rvx__mlx5_cqe_ready(ifc, *ifc->cqe_next))) {
#if RVX_CAN_RECEIVE
        if (RVX_LIKELY(!ifc->def_head)) return 0;
#else
        return 0;
#endif
    }
    return rvx__mlx5_progress_slow(ifc);
}

RVX_COLD int rvx__mlx5_poll_blocking(rvx__tl_iface_t *ifc)
{
    /* inside an rvx call (or a handler): completions and replies; requests go aside for the
     * next rvx_progress */
    return rvx__mlx5_drain(ifc, 0);
}

/* If the newest WQE is unsignaled, post a signaled NOP after it, so that a CQE will retire
 * everything posted so far. It uses the reserve that `room` keeps, so it never waits. */
RVX_COLD void rvx__mlx5_sig_tail(rvx__mlx5_conn_t *c)
{
    uint32_t pi = c->pi;
    uint8_t *wqe;
    if (c->last_sig_pi == pi || pi - c->ci >= c->sq_mask + 1) return;
    wqe = rvx__mlx5_slot(c, pi);
    rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_NOP, c->qpn8, 1, rvx__mlx5_flags(c, 1), 0);
    memset(wqe + 16, 0, 48);
    rvx__mlx5_mark_sig(c, pi, pi + 1);
    c->pi = pi + 1;
    rvx__mlx5_ring(c, pi + 1, wqe, 1);
}

RVX_COLD void rvx__mlx5_wait_room(rvx__mlx5_conn_t *c, uint32_t nbb)
{
    unsigned spins = 0;
    rvx__mlx5_sig_tail(c); /* something must be signaled, or no CQE would ever free the queue */
    while (c->pi - c->ci + nbb > c->room) {
        rvx__mlx5_hold(c); /* a failed QP frees its queue through error CQEs */
        if (rvx__mlx5_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

RVX_COLD uint8_t *rvx__mlx5_bounce_wait(rvx__mlx5_conn_t *c, size_t len)
{
    unsigned spins = 0;
    for (;;) {
        uint64_t pos = c->b_head, off = pos % RVX__MLX5_BOUNCE_BYTES;
        if (off + len > RVX__MLX5_BOUNCE_BYTES) { pos += RVX__MLX5_BOUNCE_BYTES - off; off = 0; }
        if (pos + len - c->b_tail <= RVX__MLX5_BOUNCE_BYTES) {
            c->b_head = pos + len;
            return c->bounce + off;
        }
        if (c->failed && c->ci == c->pi) return NULL;
        rvx__mlx5_sig_tail(c);
        if (c->ci == c->pi) c->b_tail = c->b_head; /* nothing in flight: all of it is free */
        else if (rvx__mlx5_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
}

RVX_COLD rvx_status_t rvx__mlx5_wait_req(rvx__mlx5_conn_t *c, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (rvx__mlx5_poll_blocking(c->ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

/* MULT, MIN, MAX, UMIN, UMAX: read, compute, compare-and-swap until no one else changed it. */
RVX_COLD rvx_status_t rvx__mlx5_amo_loop(rvx__mlx5_conn_t *c, rvx_amo_op_t op, unsigned size,
                                         uint64_t v, uint64_t raddr, const rvx_rkey_t *rkey,
                                         void *fetch, rvx_request_t *req)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, old = 0, seen = 0, nv;
    unsigned fa = size == 8 ? MLX5_OPCODE_ATOMIC_FA : MLX5_OPCODE_ATOMIC_MASKED_FA;
    unsigned cs = size == 8 ? MLX5_OPCODE_ATOMIC_CS : MLX5_OPCODE_ATOMIC_MASKED_CS;
    rvx_status_t st;
    (void)req;
    st = rvx__mlx5_amo(c, fa, size, 0, 0, 0, 0, raddr, rkey, &old, NULL);
    while (st == RVX_OK) {
        int64_t so = size == 8 ? (int64_t)old : (int64_t)(int32_t)(uint32_t)old;
        int64_t sv = size == 8 ? (int64_t)v : (int64_t)(int32_t)(uint32_t)v;
        switch (op) {
        case RVX_AMO_MULT: nv = old * v; break;
        case RVX_AMO_MIN:  nv = so < sv ? old : v; break;
        case RVX_AMO_MAX:  nv = so > sv ? old : v; break;
        case RVX_AMO_UMIN: nv = old < v ? old : v; break;
        case RVX_AMO_UMAX: nv = old > v ? old : v; break;
        default: return RVX_ERR_INVALID_PARAM;
        }
        nv &= ones;
        seen = 0;
        st = rvx__mlx5_amo(c, cs, size, nv, old, ones, ones, raddr, rkey, &seen, NULL);
        if (st != RVX_OK || (seen & ones) == (old & ones)) break;
        old = seen;
    }
    if (st == RVX_OK && fetch) {
        if (size == 8) *(uint64_t *)fetch = old;
        else *(uint32_t *)fetch = (uint32_t)old;
    }
    return st;
}

/* ---- flush ---------------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__mlx5_flush_slow(rvx__mlx5_conn_t *c, rvx_request_t *req)
{
    rvx__mlx5_drain(c->ifc, 0);
    if (c->ci == c->pi) return c->err;
    if (c->failed) rvx__mlx5_hold(c); /* every WQE comes back with an error CQE */
    else rvx__mlx5_sig_tail(c); /* the last WQE is unsignaled: a signaled NOP covers it */
    if (!req) return RVX_ERR_INVALID_PARAM;
    req->tl_private[0] = 0;
    req->tl_private[1] = c->pi;
    if (c->flush_tail) c->flush_tail->tl_private[0] = (uint64_t)(uintptr_t)req;
    else c->flush_head = req;
    c->flush_tail = req;
    return RVX_INPROGRESS;
}

/* Done at once when nothing is outstanding, or when the CQE at the head of the CQ is this QP's
 * successful completion of its last signaled WQE: then everything issued has completed. That
 * CQE is left for progress to consume (it retires the queue space and runs any pending copies);
 * a flush only needs to know it is there. Otherwise the slow path. */
RVX_INLINE rvx_status_t rvx__tl_ep_flush(rvx__tl_ep_t *ep, rvx_request_t *req)
{
    rvx__mlx5_conn_t *c = ep->c;
    const rvx__tl_iface_t *ifc;
    const struct mlx5_cqe64 *cqe;
    uint32_t pi = c->pi;
    if (c->ci == pi) return c->err;
    ifc = c->ifc;
    cqe = RVX_CONTAINER_OF(ifc->cqe_next, const struct mlx5_cqe64, op_own);
    /* owner bit of this pass and opcode REQ (0) in one test */
    if (RVX_LIKELY(c->last_sig_pi == pi && ((cqe->op_own ^ ifc->cq_owner) & 0xf1) == 0)) {
        rvx_from_device_barrier();
        if (RVX_LIKELY((cqe->sop_drop_qpn & rvx_htobe32(0xffffff)) == c->qpn_be &&
                       cqe->wqe_counter == c->last_sig_idx_be))
            return RVX_OK;
    }
    return rvx__mlx5_flush_slow(c, req);
}

RVX_COLD rvx_status_t rvx__tl_iface_flush(rvx__tl_iface_t *ifc, rvx_request_t *req)
{
    int i, busy = 0;
    rvx__mlx5_drain(ifc, 0);
    for (i = 0; i < ifc->nranks; i++) {
        rvx__mlx5_conn_t *c = &ifc->conns[i];
        if (!c->ep || c->ci == c->pi) continue;
        if (c->failed) rvx__mlx5_hold(c);
        else rvx__mlx5_sig_tail(c);
        c->wflush_pi = c->pi;
        busy = 1;
    }
    if (!busy) return RVX_OK;
    if (!req) return RVX_ERR_INVALID_PARAM;
    req->tl_private[0] = (uint64_t)(uintptr_t)ifc->wflush;
    ifc->wflush = req;
    return RVX_INPROGRESS;
}

/* ---- liveness ------------------------------------------------------------------------------- */

/* A peer that died is noticed when a WQE to it runs out of retries. With nothing in flight, a
 * zero-length WRITE to its control region every 100 ms serves as a keepalive. */
RVX_COLD rvx_status_t rvx__tl_ep_alive(rvx__tl_ep_t *ep)
{
    rvx__mlx5_conn_t *c = ep->c;
    double now;
    if (c->failed) return RVX_ERR_PEER_FAILED;
    rvx__mlx5_drain(c->ifc, 0);
    if (c->failed) return RVX_ERR_PEER_FAILED;
    now = rvx__mlx5_now();
    if ((c->ka_pi == 0 || (int32_t)(c->ci - c->ka_pi) >= 0) && now - c->ka_time > 0.1) {
        rvx_rkey_t k;
        uint32_t pi;
        uint8_t *wqe;
        k.rkey_word = (uint64_t)rvx_htobe32(c->peer_ctrl_rkey);
        k.base = c->peer_ctrl;
        k.len = 8;
        c->ka_time = now;
        RVX__MLX5_NEED(c, 1);
        pi = c->pi;
        wqe = rvx__mlx5_slot(c, pi);
        /* no data segment: a zero-length data segment would mean 2 GiB to the NIC */
        rvx__mlx5_ctrl(wqe, pi, 0, MLX5_OPCODE_RDMA_WRITE, c->qpn8, 2, rvx__mlx5_flags(c, 1), 0);
        rvx__mlx5_raddr(wqe + 16, c->peer_ctrl, &k);
        memset(wqe + 32, 0, 32);
        rvx__mlx5_mark_sig(c, pi, pi + 1);
        c->pi = pi + 1;
        c->ka_pi = pi + 1;
        rvx__mlx5_ring(c, pi + 1, wqe, 1);
    }
    return RVX_OK;
}

RVX_COLD void *rvx__tl_am_wait_room(rvx__tl_ep_t *ep, unsigned chan, size_t len)
{
#if RVX_CAN_RECEIVE
    rvx__mlx5_conn_t *c = ep->c;
    unsigned spins = 0;
    void *body;
    while (!(body = rvx__tl_am_claim(ep, chan, len))) {
        if (c->failed) return NULL;
        if (rvx__mlx5_drain(c->ifc, 0)) spins = 0;
        else rvx__backoff(&spins);
        if ((spins & 1023) == 1023 && rvx__tl_ep_alive(ep) != RVX_OK) return NULL;
    }
    return body;
#else
    (void)ep; (void)chan; (void)len;
    return NULL;
#endif
}

#endif /* RVX_TL_RC_MLX5_H */
