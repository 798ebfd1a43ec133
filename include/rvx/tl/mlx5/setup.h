/* rvx/tl/mlx5/setup.h: opening an mlx5 device and setting up its objects (cold).
 *
 * Everything here goes through rdma-core (ibv_* and mlx5dv_*): the device and its port, the
 * protection domain, memory registration (the region's type and its keys: rkey.h), the geometry of a QP's send queue and
 * of a CQ as mlx5dv_init_obj reports them, and QP state transitions. Shared by every mlx5
 * transport; the device-level names of the tl contract (ctx; mem and rkey in rkey.h) are defined here. */
#ifndef RVX_TL_MLX5_SETUP_H
#define RVX_TL_MLX5_SETUP_H

#include <errno.h>
#include <sys/select.h> /* already seen through <stdlib.h>: no name added */
#include <sys/mman.h>
#include <unistd.h>

#include "cq.h"

#define RVX__MLX5_QP_EVENTS 8 /* QP errors kept for the iface whose QP it is */
#define RVX__MLX5_NO_EVENT  (-1)

typedef struct rvx__mlx5_ctx {
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
    unsigned            lane;    /* which lane this device serves (0: everything, others: data) */
    char                name[64];
    /* the last QP-affiliated errors read from the device's async events (rvx__mlx5_qp_event) */
    uint32_t            ev_qpn[RVX__MLX5_QP_EVENTS];
    uint8_t             ev_type[RVX__MLX5_QP_EVENTS];
    unsigned            ev_n;
} rvx__mlx5_ctx_t;

/* ---- the device ----------------------------------------------------------------------------- */

RVX_COLD void rvx__mlx5_list_devices(struct ibv_device **list, int n)
{
    int i;
    if (n <= 0) {
        rvx__log(RVX__MLX5_TL ": no RDMA device found. Without an adapter, run on the rvxsim model: "
                 "LD_LIBRARY_PATH=build/sim ./program (make sim builds it)");
        return;
    }
    fprintf(stderr, "rvx: " RVX__MLX5_TL ": devices found:");
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
RVX_COLD uint32_t rvx__mlx5_ctx_bw_mbs(const rvx__mlx5_ctx_t *ctx)
{
    return ctx->bw_mbs ? ctx->bw_mbs : (uint32_t)RVX_FAB_BW_MBS;
}

/* ---- affiliated events ---------------------------------------------------------------------- */

/* The error event the adapter raised for QP qpn (IBV_EVENT_QP_ACCESS_ERR, _REQ_ERR, _FATAL), or
 * RVX__MLX5_NO_EVENT. An RC responder that refuses a request moves its own QP to ERR (IBA
 * responder classes A and C); a refused RDMA or atomic took no receive WQE whose CQE could say
 * why, so the QP's owner learns it from this event. rvx reads the events only when one of its QPs
 * has failed without an error completion of its own, without waiting: the queue is drained, each
 * event acked (an unacked one would hold up ibv_destroy_qp), and the QP errors kept for the iface
 * that owns the QP. */
RVX_COLD int rvx__mlx5_qp_event(rvx__mlx5_ctx_t *ctx, uint32_t qpn)
{
    int fd = ctx->ib->async_fd;
    struct timeval now = {0, 0};
    struct ibv_async_event ev;
    fd_set r;
    unsigned i;
    for (;;) {
        for (i = 0; i < RVX__MLX5_QP_EVENTS && i < ctx->ev_n; i++)
            if (ctx->ev_qpn[i] == qpn) {
                ctx->ev_qpn[i] = 0; /* taken: the number may be given to a new QP later */
                return ctx->ev_type[i];
            }
        if (fd < 0 || fd >= FD_SETSIZE) return RVX__MLX5_NO_EVENT;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        if (select(fd + 1, &r, NULL, NULL, &now) != 1 || ibv_get_async_event(ctx->ib, &ev))
            return RVX__MLX5_NO_EVENT;
        if (ev.event_type == IBV_EVENT_QP_ACCESS_ERR || ev.event_type == IBV_EVENT_QP_REQ_ERR ||
            ev.event_type == IBV_EVENT_QP_FATAL) {
            i = ctx->ev_n++ % RVX__MLX5_QP_EVENTS;
            ctx->ev_qpn[i] = ev.element.qp->qp_num;
            ctx->ev_type[i] = (uint8_t)ev.event_type;
        }
        ibv_ack_async_event(&ev);
    }
}

/* The lane-th item of RVX_DEV=name[:port][,name[:port]...]: its name (empty: RVX_DEV unset) and
 * port. */
RVX_COLD rvx_status_t rvx__mlx5_dev_wanted(const char *want, unsigned lane, char *name,
                                           size_t size, int *port)
{
    const char *item = want, *colon, *end;
    size_t l;
    unsigned i;
    name[0] = 0;
    *port = 1;
    if (!want || !*want) return RVX_OK;
    for (i = 0; i < lane && item; i++) {
        item = strchr(item, ',');
        if (item) item++;
    }
    if (!item || !*item) {
        rvx__log(RVX__MLX5_TL ": RVX_DEV=%s names no device for lane %u; this build has RVX_LANES=%d "
                 "lanes: name one device per lane, e.g. RVX_DEV=mlx5_0,mlx5_1", want, lane,
                 (int)RVX_LANES);
        return RVX_ERR_NO_DEVICE;
    }
    end = strchr(item, ',');
    l = end ? (size_t)(end - item) : strlen(item);
    colon = (const char *)memchr(item, ':', l);
    if (colon) {
        *port = atoi(colon + 1);
        l = (size_t)(colon - item);
    }
    if (l >= size) l = size - 1;
    memcpy(name, item, l);
    name[l] = 0;
    if (*port < 1 || *port > 255) {
        rvx__log(RVX__MLX5_TL ": RVX_DEV=%s: the port must be a number from 1", want);
        return RVX_ERR_INVALID_PARAM;
    }
    return RVX_OK;
}

/* Open the device named, or the lane-th mlx5 device found. */
RVX_COLD rvx_status_t rvx__mlx5_dev_open(rvx__mlx5_ctx_t *ctx, const char *name, unsigned lane)
{
    struct ibv_device **list = NULL, *dev = NULL;
    int n = 0, i;
    unsigned seen = 0;
    list = ibv_get_device_list(&n);
    if (!list) n = 0;
    for (i = 0; i < n && !dev; i++) {
        const char *dn = ibv_get_device_name(list[i]);
        if (name[0] ? !strcmp(dn, name) : (mlx5dv_is_supported(list[i]) && seen++ == lane)) dev = list[i];
    }
    if (!dev) {
        if (name[0]) rvx__log(RVX__MLX5_TL ": RVX_DEV names device '%s', which is not here", name);
        else if (lane) rvx__log(RVX__MLX5_TL ": lane %u needs an mlx5 device of its own and there are only "
                                "%u (this build has RVX_LANES=%d lanes; on rvxsim run with "
                                "RVXSIM_NUM_DEVICES=2)", lane, seen, (int)RVX_LANES);
        else rvx__log(RVX__MLX5_TL ": no mlx5 device");
        rvx__mlx5_list_devices(list, n);
        if (list) ibv_free_device_list(list);
        return RVX_ERR_NO_DEVICE;
    }
    if (!mlx5dv_is_supported(dev)) {
        rvx__log(RVX__MLX5_TL ": device %s is not an mlx5 device", ibv_get_device_name(dev));
        ibv_free_device_list(list);
        return RVX_ERR_NO_DEVICE;
    }
    snprintf(ctx->name, sizeof(ctx->name), "%s", ibv_get_device_name(dev));
    ctx->ib = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!ctx->ib) {
        rvx__log(RVX__MLX5_TL ": cannot open %s: %s", ctx->name, strerror(errno));
        return RVX_ERR_NO_DEVICE;
    }
    return RVX_OK;
}

/* The port: active, its LID, MTU, rate, link layer and GID; then the protection domain. */
RVX_COLD rvx_status_t rvx__mlx5_port_open(rvx__mlx5_ctx_t *ctx, int port)
{
    struct ibv_port_attr pa;
    ctx->port = (uint8_t)port;
    memset(&pa, 0, sizeof(pa));
    if (ibv_query_port(ctx->ib, ctx->port, &pa) || pa.state != IBV_PORT_ACTIVE) {
        rvx__log(RVX__MLX5_TL ": %s port %d is not active", ctx->name, port);
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
        rvx__env_int("RVX_GID_INDEX", pa.gid_tbl_len > 1 ? 1 : 0, 0, 255, &ctx->gid_index))
        return RVX_ERR_INVALID_PARAM;
    if (ibv_query_gid(ctx->ib, ctx->port, ctx->gid_index, &ctx->gid)) {
        rvx__log(RVX__MLX5_TL ": %s port %d has no GID %d", ctx->name, port, ctx->gid_index);
        return RVX_ERR_NO_DEVICE;
    }
    ctx->pd = ibv_alloc_pd(ctx->ib);
    if (!ctx->pd) {
        rvx__log(RVX__MLX5_TL ": ibv_alloc_pd failed: %s", strerror(errno));
        return RVX_ERR_NO_DEVICE;
    }
    return RVX_OK;
}

/* Open the device of `lane` (0 for single-lane builds): the lane-th name of RVX_DEV, or the
 * lane-th mlx5 device found. */
RVX_COLD rvx_status_t rvx__mlx5_ctx_init(rvx__mlx5_ctx_t *ctx, unsigned lane)
{
    char name[64];
    int port;
    rvx_status_t st;
    memset(ctx, 0, sizeof(*ctx));
    ctx->lane = lane;
    ctx->page = (size_t)sysconf(_SC_PAGESIZE);
    st = rvx__mlx5_dev_wanted(getenv("RVX_DEV"), lane, name, sizeof(name), &port);
    if (st == RVX_OK) st = rvx__mlx5_dev_open(ctx, name, lane);
    if (st != RVX_OK) return st;
    st = rvx__mlx5_port_open(ctx, port);
    if (st != RVX_OK) ibv_close_device(ctx->ib);
    return st;
}

RVX_COLD void rvx__mlx5_ctx_fini(rvx__mlx5_ctx_t *ctx)
{
    if (ctx->pd) ibv_dealloc_pd(ctx->pd);
    if (ctx->ib) ibv_close_device(ctx->ib);
    memset(ctx, 0, sizeof(*ctx));
}

/* ---- memory and keys ------------------------------------------------------------------------ */

RVX_COLD struct ibv_mr *rvx__mlx5_reg(rvx__mlx5_ctx_t *ctx, void *addr, size_t len, const char *what)
{
    struct ibv_mr *mr = ibv_reg_mr(ctx->pd, addr, len, RVX__MLX5_ACCESS);
    if (!mr) rvx__log(RVX__MLX5_TL ": cannot register %zu bytes of %s: %s", len, what, strerror(errno));
    return mr;
}

/* Zeroed, page-aligned memory of whole pages, its whole 2 MiB pages asked for as huge pages. */
RVX_COLD void *rvx__mlx5_alloc(rvx__mlx5_ctx_t *ctx, size_t len)
{
    void *p = NULL;
    size_t whole = (len + ctx->page - 1) & ~(ctx->page - 1);
    if (posix_memalign(&p, ctx->page, whole)) return NULL;
    rvx__huge_hint(p, whole);
    memset(p, 0, len);
    return p;
}

RVX_COLD rvx_status_t rvx__mlx5_mem_alloc(rvx__mlx5_ctx_t *ctx, size_t len, rvx__mlx5_mem_t *mem)
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

RVX_COLD rvx_status_t rvx__mlx5_mem_reg(rvx__mlx5_ctx_t *ctx, void *addr, size_t len,
                                      rvx__mlx5_mem_t *mem)
{
    mem->addr = addr;
    mem->len = len;
    mem->allocated = 0;
    mem->mr = rvx__mlx5_reg(ctx, addr, len, "user memory");
    if (!mem->mr) return errno == ENOMEM ? RVX_ERR_NO_MEMORY : RVX_ERR_NO_RESOURCE;
    mem->lkey = mem->mr->lkey;
    return RVX_OK;
}

RVX_COLD void rvx__mlx5_mem_dereg(rvx__mlx5_ctx_t *ctx, rvx__mlx5_mem_t *mem)
{
    (void)ctx;
    if (mem->mr) ibv_dereg_mr(mem->mr);
    if (mem->allocated) free(mem->addr);
    mem->mr = NULL;
}

/* ---- send queues and CQs -------------------------------------------------------------------- */

/* Send queues whose BlueFlame register is the same must alternate its halves together: one
 * state per register, found in (or added to) the owner's list. */
RVX_COLD rvx__mlx5_bf_t *rvx__mlx5_bf_of(rvx__mlx5_bf_t **list, void *reg, uint32_t size)
{
    rvx__mlx5_bf_t *b;
    for (b = *list; b; b = b->next)
        if (b->reg == (uint8_t *)reg) return b;
    b = (rvx__mlx5_bf_t *)calloc(1, sizeof(*b));
    if (!b) return NULL;
    b->reg = b->cur = (uint8_t *)reg;
    b->flip = size;
    b->size = size;
    b->next = *list;
    *list = b;
    return b;
}

RVX_COLD void rvx__mlx5_bf_free(rvx__mlx5_bf_t **list)
{
    while (*list) {
        rvx__mlx5_bf_t *b = *list;
        *list = b->next;
        free(b);
    }
}

/* The QP's geometry as mlx5dv_init_obj reports it, checked against what rvx relies on. */
RVX_COLD rvx_status_t rvx__mlx5_qp_obj(struct ibv_qp *qp, struct mlx5dv_qp *dq)
{
    struct mlx5dv_obj obj;
    memset(dq, 0, sizeof(*dq));
    memset(&obj, 0, sizeof(obj));
    obj.qp.in = qp;
    obj.qp.out = dq;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP)) {
        rvx__log(RVX__MLX5_TL ": mlx5dv_init_obj(QP) failed");
        return RVX_ERR_IO;
    }
    if (dq->sq.stride != RVX__MLX5_BB || !rvx_is_pow2(dq->sq.wqe_cnt) || dq->sq.wqe_cnt < 8) {
        rvx__log(RVX__MLX5_TL ": unexpected send queue geometry (stride %u, %u WQEBBs)",
                 dq->sq.stride, dq->sq.wqe_cnt);
        return RVX_ERR_UNSUPPORTED;
    }
#if RVX_MLX5_DOORBELL == RVX_MLX5_DB_BF
    if (dq->bf.size < RVX__MLX5_BB) {
        rvx__log(RVX__MLX5_TL ": this QP has no BlueFlame register; build with "
                 "RVX_MLX5_DOORBELL=RVX_MLX5_DB_8B");
        return RVX_ERR_UNSUPPORTED;
    }
#endif
    return RVX_OK;
}

/* A fresh send queue on dq: every counter at 0, `reserve` WQEBBs kept back from the data path. */
RVX_COLD void rvx__mlx5_sq_init(rvx__mlx5_sq_t *sq, const struct mlx5dv_qp *dq, uint32_t qpn,
                                rvx__mlx5_bf_t *bf, uint32_t reserve)
{
    uint32_t room = dq->sq.wqe_cnt - reserve;
    sq->buf = (uint8_t *)dq->sq.buf;
    sq->mask = dq->sq.wqe_cnt - 1;
    sq->room = (uint16_t)(room > UINT16_MAX ? UINT16_MAX : room);
    sq->pi = sq->ci = 0;
    sq->sig_pi = RVX_MLX5_SIG_EVERY - 1; /* the first signaled WQE is the SIG_EVERY-th */
    sq->fence = 0;
    sq->hold = 0;
    rvx__mlx5_sq_restop(sq);
    sq->dbrec = &dq->dbrec[MLX5_SND_DBR];
    sq->bf = bf;
    sq->qpn8 = qpn << 8;
}

/* The CQ's buffer and doorbell record, consumer index 0. */
RVX_COLD rvx_status_t rvx__mlx5_cq_init(rvx__mlx5_cq_t *cq, struct ibv_cq *ibcq)
{
    struct mlx5dv_obj obj;
    struct mlx5dv_cq dc;
    memset(&obj, 0, sizeof(obj));
    memset(&dc, 0, sizeof(dc));
    obj.cq.in = ibcq;
    obj.cq.out = &dc;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) || !rvx_is_pow2(dc.cqe_cnt) ||
        (dc.cqe_size != 64 && dc.cqe_size != 128)) {
        rvx__log(RVX__MLX5_TL ": mlx5dv_init_obj(CQ) failed or gave an unexpected geometry");
        return RVX_ERR_IO;
    }
    cq->buf = (uint8_t *)dc.buf + (dc.cqe_size - RVX__MLX5_CQE64);
    cq->cnt = dc.cqe_cnt;
    cq->mask = dc.cqe_cnt - 1;
    cq->shift = dc.cqe_size == 128 ? 7 : 6;
    cq->stride = 1u << cq->shift;
    cq->dbrec = &dc.dbrec[0];
    cq->ci = 0;
    cq->next_op_own = &((struct mlx5_cqe64 *)(void *)cq->buf)->op_own;
    cq->owner = 0;
    return RVX_OK;
}

/* ---- QP state transitions ------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__mlx5_qp_to_init(const rvx__mlx5_ctx_t *ctx, struct ibv_qp *qp)
{
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = ctx->port;
    qa.qp_access_flags = RVX__MLX5_REMOTE_ACCESS;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        rvx__log(RVX__MLX5_TL ": QP to INIT failed: %s", strerror(errno));
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

/* INIT -> RTR towards QP rqpn at (lid, gid); `rank` names the peer in the log. */
/* RoCE: the peers' GIDs as a worker keeps them. A kept address holds its GID's low 8 bytes; the
 * top 8 (the subnet prefix, or the IPv4-mapped prefix) are kept once when every rank has the
 * same, else per rank. (On InfiniBand a LID addresses the peer and no GID is kept.) */
typedef struct rvx__mlx5_gids {
    uint8_t  hi[8];
    uint8_t *his; /* per rank, 8 bytes each, when they differ (else NULL; freed with the iface) */
} rvx__mlx5_gids_t;

/* From the n gathered addresses, `size` apart, each with its GID's top half at offset `off`. */
RVX_COLD rvx_status_t rvx__mlx5_gids_keep(rvx__mlx5_gids_t *g, const uint8_t *addrs, size_t size, size_t off,
                                          int n)
{
    int r;
    if (n <= 0) return RVX_OK;
    memcpy(g->hi, addrs + off, 8);
    for (r = 1; r < n && !memcmp(addrs + (size_t)r * size + off, g->hi, 8); r++) {}
    if (r == n) return RVX_OK;
    g->his = (uint8_t *)malloc(8 * (size_t)n);
    if (!g->his) return RVX_ERR_NO_MEMORY;
    for (r = 0; r < n; r++) memcpy(g->his + 8 * (size_t)r, addrs + (size_t)r * size + off, 8);
    return RVX_OK;
}

/* rank's GID: its top half as kept above, its low half `lo` from its kept address. */
RVX_INLINE void rvx__mlx5_gid_of(const rvx__mlx5_gids_t *g, int rank, const uint8_t lo[8], uint8_t gid[16])
{
    memcpy(gid, g->his ? g->his + 8 * (size_t)rank : g->hi, 8);
    memcpy(gid + 8, lo, 8);
}

RVX_COLD rvx_status_t rvx__mlx5_qp_to_rtr(const rvx__mlx5_ctx_t *ctx, struct ibv_qp *qp, uint32_t rqpn,
                                          uint16_t lid, const uint8_t *gid, int rank)
{
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = ctx->mtu;
    qa.dest_qp_num = rqpn;
    qa.rq_psn = RVX__MLX5_PSN;
    qa.max_dest_rd_atomic = RVX__MLX5_RD_ATOMIC;
    qa.min_rnr_timer = RVX__MLX5_MIN_RNR_TIMER;
    qa.ah_attr.port_num = ctx->port;
    qa.ah_attr.dlid = lid;
    if (ctx->is_roce) {
        qa.ah_attr.is_global = 1;
        memcpy(qa.ah_attr.grh.dgid.raw, gid, 16);
        qa.ah_attr.grh.sgid_index = (uint8_t)ctx->gid_index;
        qa.ah_attr.grh.hop_limit = RVX__MLX5_HOP_LIMIT;
    }
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        rvx__log(RVX__MLX5_TL ": QP to RTR (towards rank %d) failed: %s", rank, strerror(errno));
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

/* RTR -> RTS; `rank` is the peer of a connected QP, or -1 for an initiator with no fixed peer. */
RVX_COLD rvx_status_t rvx__mlx5_qp_to_rts(struct ibv_qp *qp, int rank)
{
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = (uint8_t)RVX_MLX5_TIMEOUT;
    qa.retry_cnt = (uint8_t)RVX_MLX5_RETRY;
    qa.rnr_retry = RVX__MLX5_RNR_RETRY;
    qa.sq_psn = RVX__MLX5_PSN;
    qa.max_rd_atomic = RVX__MLX5_RD_ATOMIC;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
        if (rank < 0) rvx__log(RVX__MLX5_TL ": QP 0x%x to RTS failed: %s", qp->qp_num, strerror(errno));
        else rvx__log(RVX__MLX5_TL ": QP to RTS (towards rank %d) failed: %s", rank, strerror(errno));
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

/* How long a QP's retries take to give up on a peer that does not answer: (RETRY + 1) ACK
 * timeouts of 4.096 us x 2^TIMEOUT (8.6 s by default; rvxsim caps it at 2 s). Teardown waits this
 * long, plus a second for a late completion, before it fails a queue on purpose. */
#define RVX__MLX5_RETRY_S (4.096e-6 * (double)(1ull << RVX_MLX5_TIMEOUT) * (RVX_MLX5_RETRY + 1))
#define RVX__MLX5_TEARDOWN_S (RVX__MLX5_RETRY_S + 1.0)

/* Fail a QP on purpose: the NIC flushes every WQE and receive it holds with an error CQE. */
RVX_COLD void rvx__mlx5_qp_to_err(struct ibv_qp *qp, int rank)
{
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_ERR;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE))
        rvx__log(RVX__MLX5_TL ": QP to ERR (towards rank %d) failed: %s", rank, strerror(errno));
}

#endif /* RVX_TL_MLX5_SETUP_H */
