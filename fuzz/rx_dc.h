/* fuzz/rx_dc.h: the dc_mlx5 side of fuzz/rx.c (included there): the harness is the adapter.
 *
 * Every QP and CQ that rvx asks rdma-core about (mlx5dv_init_obj, wrapped below) gets send queues,
 * doorbell records, a BlueFlame register and a CQ in private memory, from creation on: rvxsim's
 * engine never sees a doorbell, and a DCI that recovers from an error (RESET, RTS, a fresh queue)
 * stays the harness's. The shared receive queue moves after set-up as on rc_mlx5.
 *
 * The adapter executes what the DCIs post, in order per DCI: SENDs are kept to be looped back into
 * the DCT (optionally changed); RDMA WRITE, READ and the 64-bit atomics run on this process's
 * memory when their range lies in one of the harness's regions (the control region, the
 * application region, the send and receive buffers, the bounce rings), else the WQE fails with a
 * remote (or local) access error and the DCI's later WQEs complete flushed, as on the adapter. So
 * credit claims (fetch-and-add on the pool), credit reports (an inline WRITE into the control
 * region), keepalives and rendezvous transfers all happen, on the harness's clock.
 *
 * Peer input: frames with any prefix (the rank word with or without its report flag, the report),
 * any CQE for the DCT or for no QP of ours, error CQEs with any syndrome on any DCI, and every word
 * of the control region written as a peer would by RDMA (the pool, the report of our frames taken,
 * our count of its frames), absurd values included. */
#include <dlfcn.h>

#define NDCI RVX_DC_NUM_DCI

/* ---- private queues, from creation on ------------------------------------------------------- */

typedef struct { struct ibv_qp *qp; uint8_t *buf; uint32_t dbrec[2]; } own_qp_t;
static own_qp_t own_qps[NDCI + 4];
static unsigned nown;
static uint8_t *own_bf;            /* one BlueFlame page for every DCI */
static uint32_t own_cq_dbrec[2];
static uint32_t nic_sq[NDCI];      /* per DCI, the next WQE the adapter looks at */
static unsigned nic_err[NDCI];     /* per DCI: its next WQE fails with this, later ones flushed */

#define NIFC (&NET_IFC)

static int dci_index(const struct ibv_qp *qp)
{
    unsigned i;
    if (!w) return -1;
    for (i = 0; i < NDCI; i++)
        if (NIFC->dci[i].qp == qp) return (int)i;
    return -1;
}

int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type);
int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type)
{
    static int (*real)(struct mlx5dv_obj *, uint64_t);
    int rc;
    if (!real) real = (int (*)(struct mlx5dv_obj *, uint64_t))dlsym(RTLD_NEXT, "mlx5dv_init_obj");
    if (!real) abort();
    rc = real(obj, obj_type);
    if (rc) return rc;
    if (obj_type & MLX5DV_OBJ_QP) {
        struct mlx5dv_qp *q = obj->qp.out;
        own_qp_t *o = NULL;
        unsigned i;
        int k;
        for (i = 0; i < nown; i++)
            if (own_qps[i].qp == obj->qp.in) o = &own_qps[i];
        if (!o) {
            if (nown == sizeof(own_qps) / sizeof(own_qps[0])) abort();
            o = &own_qps[nown++];
            o->qp = obj->qp.in;
            o->buf = (uint8_t *)aligned_alloc(4096, ((size_t)q->sq.wqe_cnt * q->sq.stride + 4095) & ~(size_t)4095);
            memset(o->buf, 0, (size_t)q->sq.wqe_cnt * q->sq.stride);
        }
        if (!own_bf) own_bf = (uint8_t *)aligned_alloc(4096, (2 * (size_t)q->bf.size + 4095) & ~(size_t)4095);
        q->sq.buf = o->buf;
        q->dbrec = o->dbrec;
        q->bf.reg = own_bf;
        /* a DCI back from RESET starts at WQE 0, in RTS again */
        if ((k = dci_index(obj->qp.in)) >= 0) {
            nic_sq[k] = 0;
            nic_err[k] = 0;
        }
    }
    if (obj_type & MLX5DV_OBJ_CQ) {
        struct mlx5dv_cq *q = obj->cq.out;
        size_t bytes = (size_t)q->cqe_cnt * q->cqe_size;
        uint8_t *p = (uint8_t *)aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
        memset(p, 0, bytes);
        q->buf = p;
        q->dbrec = own_cq_dbrec;
    }
    return rc;
}

/* ---- the adapter's state, the snapshot of set-up -------------------------------------------- */

static net_ep_t ep_snap;
static net_ifc_t ifc_snap;
static rvx__dc_peer_t peer0_snap;
static uint64_t ctrl_snap[3];
static rvx__mlx5_bf_t bf_snap;
static uint8_t *srq_wq_snap;
static size_t srq_bytes;
static uint16_t nic_srq_next, nic_srq_taken;
static uint32_t nic_cq_pi;
static uint32_t prv_srq_dbrec;
static rvx__dc_prefix_t dc_pre;    /* the prefix the input's frames carry (rank 0, no report) */
static unsigned nic_poked;
static unsigned pool_poked;        /* the input wrote the pool word */
typedef struct { uint32_t imm; size_t len; uint8_t body[RVX__DC_FRAME]; } staged_t;
static staged_t staged[8];
static unsigned nstaged;

static NIC_MODEL void cq_fill(uint32_t from, uint32_t to)
{
    uint32_t i, n = to - from < NIFC->cq.cnt ? to - from : NIFC->cq.cnt;
    for (i = 0; i < n; i++) rvx__mlx5_cqe(&NIFC->cq, from + i)->op_own = 0xf1;
}

static void nic_setup(void)
{
    net_ifc_t *ifc = NIFC;
    rvx__mlx5_srq_t *s = &ifc->srq;
    uint32_t i;
    uint8_t *p;
    for (i = 0; i < NDCI; i++) { /* every DCI's queue is the harness's (mlx5dv_init_obj above) */
        unsigned k, mine = 0;
        for (k = 0; k < nown; k++) mine |= own_qps[k].buf == ifc->dci[i].sq.buf;
        if (!mine || ifc->dci[i].sq.pi != 0) {
            fprintf(stdout, "fuzz/rx: DCI %u is not in the harness's memory, or used at set-up\n", i);
            abort();
        }
        nic_sq[i] = 0;
    }
    /* the shared receive queue, as on rc_mlx5 (fuzz/rx.c): a fresh free list the adapter follows */
    srq_bytes = (size_t)(s->mask + 1) * s->stride;
    p = (uint8_t *)aligned_alloc(4096, (srq_bytes + 4095) & ~(size_t)4095);
    memcpy(p, s->wq, srq_bytes);
    s->wq = p;
    s->dbrec = &prv_srq_dbrec;
    for (i = 0; i <= s->mask; i++) rvx__mlx5_srq_wqe(s, i)->next_wqe_index = rvx_htobe16((uint16_t)((i + 1) & s->mask));
    s->head = 0;
    s->tail = (uint16_t)s->mask;
    s->posted = 0;
    for (i = 0; i < s->mask; i++) rvx__mlx5_srq_post(s);
    rvx__mlx5_srq_ring(s);
    srq_wq_snap = (uint8_t *)malloc(srq_bytes);
    memcpy(srq_wq_snap, s->wq, srq_bytes);
    nic_srq_next = nic_srq_taken = 0;
    cq_fill(0, ifc->cq.cnt);
    rvx__mlx5_txpool_fini(&ifc->txrecs);
    ep_snap = NET_EP;
    ifc_snap = *ifc;
    peer0_snap = ifc->peers[0];
    memcpy(ctrl_snap, ifc->ctrl, sizeof(ctrl_snap));
    bf_snap = *ifc->dci[0].sq.bf;
    nic_cq_pi = ifc->cq.ci;
    dc_pre.rank = 0;
    dc_pre.consumed = 0;
}

/* ---- CQEs ----------------------------------------------------------------------------------- */

static NIC_MODEL int cqe_write(unsigned opcode, uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm_be,
                     uint32_t qpn, unsigned syndrome)
{
    struct mlx5_cqe64 *cqe;
    if (nic_cq_pi - NIFC->cq.ci >= NIFC->cq.cnt) return 0;
    cqe = rvx__mlx5_cqe(&NIFC->cq, nic_cq_pi);
    memset(cqe, 0, 64);
    cqe->wqe_counter = rvx_htobe16(wqe_counter);
    cqe->byte_cnt = rvx_htobe32(byte_cnt);
    cqe->imm_inval_pkey = imm_be;
    cqe->sop_drop_qpn = rvx_htobe32(qpn & 0xffffff);
    if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR)
        ((struct mlx5_err_cqe *)(void *)cqe)->syndrome = (uint8_t)syndrome;
    cqe->op_own = (uint8_t)(opcode << 4 | (nic_cq_pi & NIFC->cq.cnt ? 1 : 0));
    nic_cq_pi++;
    return 1;
}

static void cqe_put(unsigned opcode, uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm_be,
                    uint32_t qpn, unsigned syndrome)
{
    unsigned n = 0;
    while (!cqe_write(opcode, wqe_counter, byte_cnt, imm_be, qpn, syndrome) && n++ < 8) rvx_progress(w);
    rvx_progress(w);
}

static NIC_MODEL int srq_take(void)
{
    rvx__mlx5_srq_t *s = &NIFC->srq;
    uint16_t idx = nic_srq_next;
    if ((uint16_t)(rvx_htobe32(*s->dbrec) - nic_srq_taken) == 0) return -1;
    nic_srq_next = (uint16_t)(rvx_htobe16(rvx__mlx5_srq_wqe(s, idx)->next_wqe_index) & s->mask);
    nic_srq_taken++;
    return idx;
}

static void rx_put(unsigned opcode, const uint8_t *body, size_t len, uint32_t imm_be, uint32_t qpn,
                   unsigned syndrome)
{
    unsigned n = 0;
    int idx;
    while (nic_cq_pi - NIFC->cq.ci >= NIFC->cq.cnt && n++ < 8) rvx_progress(w);
    if (nic_cq_pi - NIFC->cq.ci >= NIFC->cq.cnt || (idx = srq_take()) < 0) return;
    if (len > NIFC->srq.frame) len = NIFC->srq.frame;
    if (len && body) memcpy(rvx__mlx5_srq_buf(&NIFC->srq, (uint16_t)idx), body, len);
    cqe_put(opcode, (uint16_t)idx, (uint32_t)len, imm_be, qpn, syndrome);
}

static uint32_t dct_qpn(void) { return NIFC->dct->qp_num; }

static void rx_cqe(uint32_t imm_host, const uint8_t *body, size_t len)
{
    rx_put(MLX5_CQE_RESP_SEND_IMM, body, len, rvx_htobe32(imm_host), dct_qpn(), 0);
}

/* A frame of the input: the prefix the input set (dc_pre), then its body. */
static void nic_deliver(unsigned chan, unsigned info, uint8_t *body, size_t len)
{
    static uint8_t f[RVX__DC_FRAME];
    if (len > sizeof(f) - RVX__DC_PREFIX) len = sizeof(f) - RVX__DC_PREFIX;
    memcpy(f, &dc_pre, RVX__DC_PREFIX);
    memcpy(f + RVX__DC_PREFIX, body, len);
    rx_cqe(chan << 16 | (info & 0xffff), f, len + RVX__DC_PREFIX);
}
#define NIC_FRAME_MAX (RVX__DC_FRAME - RVX__DC_PREFIX)

/* ---- executing WQEs ------------------------------------------------------------------------- */

static NIC_MODEL void sq_read(const rvx__dc_dci_t *d, uint32_t idx, size_t off, void *out, size_t n)
{
    size_t qbytes = (size_t)(d->sq.mask + 1) * RVX__MLX5_BB, at = ((size_t)(idx & d->sq.mask) * RVX__MLX5_BB + off) % qbytes;
    size_t first = n < qbytes - at ? n : qbytes - at; /* the ring wraps at most once per read */
    memcpy(out, d->sq.buf + at, first);
    memcpy((uint8_t *)out + first, d->sq.buf, n - first);
}

/* [a, a + n) inside one region the harness knows (remote: what a key can name here; local: what a
 * data segment can point to) */
static NIC_MODEL int in_region(uint64_t a, uint64_t n, int local)
{
    struct { uint64_t base, len; } r[8];
    unsigned k = 0, i;
    r[k].base = (uint64_t)(uintptr_t)NIFC->ctrl; r[k++].len = 8 * (2 * (uint64_t)NIFC->nranks + 1);
    r[k].base = (uint64_t)(uintptr_t)rvx_mem_addr(appmem); r[k++].len = 1 << 16;
    r[k].base = (uint64_t)(uintptr_t)sbuf; r[k++].len = bufsz;
    for (i = 0; i < 4; i++) { r[k].base = (uint64_t)(uintptr_t)rbuf[i]; r[k++].len = bufsz; }
    if (local) { r[k].base = (uint64_t)(uintptr_t)NIFC->bounce; r[k++].len = (uint64_t)NDCI * RVX_DC_BOUNCE_BYTES; }
    for (i = 0; i < k; i++)
        if (a >= r[i].base && n <= r[i].len && a - r[i].base <= r[i].len - n) return 1;
    return 0;
}

typedef struct { uint32_t bc, lkey; uint64_t addr; } dseg_t;

static NIC_MODEL void read_dseg(const rvx__dc_dci_t *d, uint32_t idx, size_t off, dseg_t *s)
{
    uint8_t b[16];
    sq_read(d, idx, off, b, 16);
    memcpy(&s->bc, b, 4);
    memcpy(&s->lkey, b + 4, 4);
    memcpy(&s->addr, b + 8, 8);
    s->bc = rvx_htobe32(s->bc);
    s->addr = rvx_htobe64(s->addr);
}

/* Executes one WQE: 0, or the syndrome it fails with. */
static NIC_MODEL unsigned nic_exec(unsigned i, uint32_t idx, unsigned opcode, unsigned ds)
{
    const rvx__dc_dci_t *d = &NIFC->dci[i];
    size_t off = 16 + NIFC->av_bytes, end = (size_t)ds * 16;
    static uint8_t tmp[RVX__DC_FRAME];
    uint64_t raddr = 0;
    dseg_t s;
    if (opcode == MLX5_OPCODE_NOP) return 0;
    if (opcode == MLX5_OPCODE_SEND || opcode == MLX5_OPCODE_SEND_IMM) {
        size_t n = 0;
        uint32_t imm;
        if (off + 16 > end) return 0;
        read_dseg(d, idx, off, &s);
        if (s.bc & MLX5_INLINE_SEG) {
            n = s.bc & 0x3ff;
            if (n > sizeof(tmp) || off + 4 + n > end) return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
            sq_read(d, idx, off + 4, tmp, n);
        } else {
            n = s.bc;
            if (n > sizeof(tmp)) return MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR; /* longer than the receive */
            if (n && !in_region(s.addr, n, 1)) return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
            if (n) memcpy(tmp, (const void *)(uintptr_t)s.addr, n);
        }
        sq_read(d, idx, 12, &imm, 4);
        if (nstaged < 8) {
            staged[nstaged].imm = rvx_htobe32(imm);
            staged[nstaged].len = n;
            memcpy(staged[nstaged].body, tmp, n);
            nstaged++;
        }
        return 0;
    }
    if (off + 16 > end) return 0;
    {
        uint8_t b[16];
        sq_read(d, idx, off, b, 16);
        memcpy(&raddr, b, 8);
        raddr = rvx_htobe64(raddr);
    }
    off += 16;
    switch (opcode) {
    case MLX5_OPCODE_RDMA_WRITE:
    case MLX5_OPCODE_RDMA_WRITE_IMM: {
        size_t n;
        if (off + 4 > end) return in_region(raddr, 0, 0) ? 0 : MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR; /* zero length */
        read_dseg(d, idx, off, &s);
        if (s.bc & MLX5_INLINE_SEG) {
            n = s.bc & 0x3ff;
            if (n > sizeof(tmp) || off + 4 + n > end) return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
            sq_read(d, idx, off + 4, tmp, n);
        } else {
            n = s.bc;
            if (!in_region(s.addr, n, 1)) return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
        }
        if (!in_region(raddr, n, 0)) return MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
        if (n) memmove((void *)(uintptr_t)raddr, s.bc & MLX5_INLINE_SEG ? tmp : (const uint8_t *)(uintptr_t)s.addr, n);
        return 0;
    }
    case MLX5_OPCODE_RDMA_READ:
        if (off + 16 > end) return 0;
        read_dseg(d, idx, off, &s);
        if (!in_region(s.addr, s.bc, 1)) return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
        if (!in_region(raddr, s.bc, 0)) return MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
        if (s.bc) memmove((void *)(uintptr_t)s.addr, (const void *)(uintptr_t)raddr, s.bc);
        return 0;
    case MLX5_OPCODE_ATOMIC_FA:
    case MLX5_OPCODE_ATOMIC_CS: {
        uint8_t b[16];
        uint64_t a, c, old;
        if (off + 32 > end) return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        sq_read(d, idx, off, b, 16);
        memcpy(&a, b, 8);
        memcpy(&c, b + 8, 8);
        a = rvx_htobe64(a);
        c = rvx_htobe64(c);
        read_dseg(d, idx, off + 16, &s);
        if (s.bc != 8 || !in_region(s.addr, 8, 1)) return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
        if ((raddr & 7) || !in_region(raddr, 8, 0)) return MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
        memcpy(&old, (const void *)(uintptr_t)raddr, 8);
        if (opcode == MLX5_OPCODE_ATOMIC_FA) a += old;
        else a = old == c ? a : old;
        memcpy((void *)(uintptr_t)raddr, &a, 8);
        memcpy((void *)(uintptr_t)s.addr, &old, 8);
        return 0;
    }
    default: /* the masked atomics: not executed (no harness input makes them); the old value 0 */
        return 0;
    }
}

/* Each DCI's WQEs posted since the adapter last looked, in order, as far as the CQ has room. It
 * never calls into rvx, so rvx's waiting loops can run it (RVX_FUZZ_BACKOFF_HOOK). */
static NIC_MODEL void nic_step(void)
{
    unsigned i;
    for (i = 0; i < NDCI; i++) {
        rvx__dc_dci_t *d = &NIFC->dci[i];
        while (nic_sq[i] != d->sq.pi) {
            uint8_t ctrl[16];
            uint32_t w0, w1;
            unsigned opcode, ds, nbb, synd;
            sq_read(d, nic_sq[i], 0, ctrl, 16);
            memcpy(&w0, ctrl, 4);
            memcpy(&w1, ctrl + 4, 4);
            opcode = rvx_htobe32(w0) & 0xff;
            ds = rvx_htobe32(w1) & 0x3f;
            nbb = (ds * 16 + 63) / 64;
            if (nic_cq_pi - NIFC->cq.ci >= NIFC->cq.cnt) return; /* room for any CQE first */
            synd = nic_err[i] ? nic_err[i] : nic_exec(i, nic_sq[i], opcode, ds);
            if (synd) {
                cqe_write(MLX5_CQE_REQ_ERR, (uint16_t)nic_sq[i], 0, 0, d->qpn, synd);
                nic_err[i] = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
            } else if (ctrl[11] & RVX__MLX5_CE) {
                cqe_write(MLX5_CQE_REQ, (uint16_t)nic_sq[i], 0, 0, d->qpn, 0);
            }
            nic_sq[i] += nbb ? nbb : 1;
        }
    }
}

void fuzz_nic_hook(void);
void fuzz_nic_hook(void)
{
    if (w && ifc_snap.dct) nic_step();
}

static NIC_MODEL int dcis_idle(void)
{
    unsigned i;
    for (i = 0; i < NDCI; i++)
        if (NIFC->dci[i].sq.ci != NIFC->dci[i].sq.pi && !NIFC->dci[i].failed) return 0;
    return 1;
}

/* Nothing of the adapter's path outstanding. */
static NIC_MODEL int nic_idle(void)
{
    unsigned i;
    for (i = 0; i < NDCI; i++)
        if (NIFC->dci[i].sq.ci != NIFC->dci[i].sq.pi) return 0;
    return 1;
}

/* The adapter has looked at every WQE posted on every DCI. */
static NIC_MODEL int nic_seen_all(void)
{
    unsigned i;
    for (i = 0; i < NDCI; i++)
        if (nic_sq[i] != NIFC->dci[i].sq.pi) return 0;
    return 1;
}

/* The first DCI from i on with WQEs not retired, or NDCI. */
static NIC_MODEL unsigned nic_busy_from(unsigned i)
{
    while (i < NDCI && NIFC->dci[i].sq.ci == NIFC->dci[i].sq.pi) i++;
    return i;
}

static void nic_run(void)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    unsigned rounds = 0, i;
    nic_step();
    if (!nic_poked && (nic_cq_pi == NIFC->cq.ci || NIC_UNPOLLED()) && dcis_idle() && !NIFC->def_head && t->ready.next == &t->ready)
        return;
    nic_poked = 0;
    while (rounds++ < 64) {
        nic_step();
        rvx_progress(w);
        nic_step();
        if (nic_cq_pi == NIFC->cq.ci || NIC_UNPOLLED()) {
            if (!nic_seen_all()) continue;
            if (dcis_idle()) break;
            for (i = nic_busy_from(0); i < NDCI; i = nic_busy_from(i + 1))
                rvx__dc_sig_tail(&NIFC->dci[i]);
        }
    }
}

/* Every DCI with work fails (the peer is gone): its next WQE with `synd`, the rest flushed. */
static void nic_fail(unsigned synd)
{
    unsigned i;
    for (i = 0; i < NDCI; i++)
        if (NIFC->dci[i].sq.ci != NIFC->dci[i].sq.pi || NIFC->dci[i].failed)
            nic_err[i] = synd ? synd : MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;
    nic_run();
    for (i = 0; i < NDCI; i++) /* a DCI that recovered is back in RTS: no error waits on it */
        if (NIFC->dci[i].sq.ci == NIFC->dci[i].sq.pi && !NIFC->dci[i].failed) nic_err[i] = 0;
    if (!NET_EP.failed) {
        NET_EP.failed = 1;
        NET_EP.err = RVX_ERR_PEER_FAILED;
    }
}

static void nic_reset(void)
{
    net_ifc_t *ifc = NIFC;
    rvx__dc_hold_t *holders = ifc->holders;
    rvx__dc_backoff_t *backoff = ifc->backoff;
    unsigned ch = ifc->cap_holders, cb = ifc->cap_backoff, i;
    while (ifc->def_head) {
        rvx__dc_deferred_t *d = ifc->def_head;
        ifc->def_head = d->next;
        free(d);
    }
    rvx__mlx5_txpool_fini(&ifc->txrecs);
    ep_snap.ka_ms = rvx__dc_ms(); /* a keepalive is due as long after the input's start as after set-up */
    NET_EP = ep_snap;
    /* the records' arrays grow during inputs and stay: counts as after set-up */
    ifc_snap.holders = holders;
    ifc_snap.cap_holders = ch;
    ifc_snap.backoff = backoff;
    ifc_snap.cap_backoff = cb;
    ifc_snap.sweep_t = ifc->sweep_t;
    *ifc = ifc_snap;
    ifc->peers[0] = peer0_snap;
    memcpy(ifc->ctrl, ctrl_snap, sizeof(ctrl_snap));
    *ifc->dci[0].sq.bf = bf_snap;
    memcpy(ifc->srq.wq, srq_wq_snap, srq_bytes);
    prv_srq_dbrec = rvx_htobe32(ifc->srq.posted);
    nic_srq_next = nic_srq_taken = 0;
    cq_fill(ifc->cq.ci, nic_cq_pi);
    nic_cq_pi = ifc->cq.ci;
    for (i = 0; i < NDCI; i++) {
        nic_sq[i] = ifc->dci[i].sq.pi;
        nic_err[i] = 0;
    }
    nic_poked = 0;
    pool_poked = 0;
    nstaged = 0;
    dc_pre.rank = 0;
    dc_pre.consumed = 0;
}

static void nic_check(void)
{
    net_ifc_t *ifc = NIFC;
    uint32_t i;
    if (memcmp(&NET_EP, &ep_snap, sizeof(ep_snap)) || memcmp(ifc, &ifc_snap, sizeof(*ifc)) ||
        memcmp(&ifc->peers[0], &peer0_snap, sizeof(peer0_snap)) || memcmp(ifc->ctrl, ctrl_snap, sizeof(ctrl_snap)) ||
        memcmp(ifc->srq.wq, srq_wq_snap, srq_bytes)) {
        fprintf(stdout, "fuzz/rx: the reset left the DCIs, the control region or the endpoint unlike set-up\n");
        abort();
    }
    for (i = 0; i < ifc->cq.cnt; i++)
        if (rvx__mlx5_cqe(&ifc->cq, i)->op_own != 0xf1) {
            fprintf(stdout, "fuzz/rx: the reset left CQE %u valid\n", i);
            abort();
        }
}

/* Per input, before the reset: every DCI's WQEs must have come back (a failed DCI's are all
 * flushed, each with a CQE), else closing would wait for the operations they carry. */
static void nic_check_retired(void)
{
    unsigned i;
    for (i = 0; i < NDCI; i++)
        if (NIFC->dci[i].sq.ci != NIFC->dci[i].sq.pi) {
            fprintf(stdout, "fuzz/rx: DCI %u kept WQEs %u to %u\n", i, NIFC->dci[i].sq.ci, NIFC->dci[i].sq.pi);
            fflush(stdout);
            abort();
        }
}

/* What a peer's words must never do to our credits, checked after every operation: an endpoint
 * never has more credits to spend than it holds at the peer, holds at most a batch, and (unless the
 * input wrote the pool itself) the pool and the credits held never exceed the receive buffers. */
static NIC_MODEL void dc_invariants(void)
{
    const net_ep_t *e = &NET_EP;
    uint32_t held = NIFC->peers[0].claimed;
    if (e->failed) return;
    if (e->tx_left > held || held > RVX_DC_AM_CREDITS ||
        (!pool_poked && (int64_t)NIFC->ctrl[0] + held > (int64_t)RVX_DC_RX_DEPTH)) {
        fprintf(stdout, "fuzz/rx: credits: %u to spend, %u held (at most %u), pool %lld of %u%s\n",
                e->tx_left, held, (unsigned)RVX_DC_AM_CREDITS, (long long)NIFC->ctrl[0],
                (unsigned)RVX_DC_RX_DEPTH, pool_poked ? " (written by the input)" : "");
        fflush(stdout);
        abort();
    }
}

static void nic_op(in_t *in, unsigned op)
{
    switch (op % 7) {
    case 0: nic_run(); break;
    case 1: { /* loop a SEND of ours back, perhaps changed (its prefix too) */
        unsigned k = u8(in), x = u8(in), off = u16(in);
        staged_t *s;
        if (!nstaged) break;
        s = &staged[k % nstaged];
        if (s->len && (k & 0x80)) s->body[off % s->len] ^= (uint8_t)x;
        rx_cqe(s->imm, s->body, s->len);
        break;
    }
    case 2: { /* a word of the control region, as a peer writes it by RDMA: the pool, its report of
               * our frames it took, our count of its frames; absurd or near the current value */
        unsigned which = u8(in) % 3, m = u8(in);
        volatile uint64_t *wd = (volatile uint64_t *)&NIFC->ctrl[which];
        uint64_t v = m & 1 ? u64(in) : *wd + (uint64_t)(int64_t)(int8_t)u8(in);
        *wd = v;
        pool_poked |= which == 0;
        nic_poked = 1;
        break;
    }
    case 3: { /* a DCI's next WQE fails with any syndrome */
        unsigned i = u8(in) % NDCI, synd = u8(in);
        nic_err[i] = synd ? synd : MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
        nic_run();
        break;
    }
    case 4: { /* a receive completes in error: it names the WQE it consumed */
        unsigned synd = u8(in);
        rx_put(MLX5_CQE_RESP_ERR, NULL, 0, 0, dct_qpn(), synd);
        break;
    }
    case 5: { /* a CQE for the DCT of any length, or for a QP that is not ours */
        unsigned opc = u8(in) & 0xf, wc = u16(in);
        uint32_t len = u32(in) % (RVX__DC_FRAME + 1), imm = u32(in), qpn;
        unsigned q = u8(in);
        if (opc == 0xf || opc == MLX5_CQE_REQ || opc == MLX5_CQE_REQ_ERR) opc = MLX5_CQE_RESP_SEND_IMM;
        unsigned i;
        qpn = q & 1 ? dct_qpn() : u32(in) & 0xffffff;
        for (i = 0; i < NDCI; i++) /* the adapter reports a DCI's work only as it executes it */
            if (qpn == NIFC->dci[i].qpn) qpn ^= 0x800000;
        /* receives and receive errors consume a WQE of the shared queue and name it */
        if (qpn == dct_qpn() && (opc == MLX5_CQE_RESP_SEND_IMM || opc == MLX5_CQE_RESP_ERR))
            rx_put(opc, NULL, len, imm, qpn, 0);
        else
            cqe_put(opc, (uint16_t)wc, len, imm, qpn, 0);
        break;
    }
    default: /* the prefix of the input's next frames: any rank word (report flag or not), any report */
        dc_pre.rank = u8(in) & 1 ? u32(in) : (u8(in) & 1 ? RVX__DC_PRE_REPORT : 0u);
        dc_pre.consumed = u8(in) & 1 ? u32(in) : rvx__dc_tx_sent(&NET_EP) + (uint32_t)(int32_t)(int8_t)u8(in);
        break;
    }
}
