/* fuzz/rx: frames from a peer into the receive path of an AM + tag build, one process, one
 * loopback endpoint. Built once per transport (RVX_TL) and rendezvous protocol (RVX_RNDV).
 *
 * The input is a program of small operations: frames as a peer would send them (any channel,
 * info word, length and bytes), the application's own calls (tag sends and receives of every
 * size class, cancels, probes, active messages, remote keys), and progress. Operations can patch
 * a frame with the id of a live operation or with a valid packed key, so that control frames
 * reach the states where they are accepted.
 *
 *   shm      frames go to the protocol as the ring hands them over; raw ring headers are written
 *            into the mailbox; frames our own loopback sends put in the ring can be changed
 *            before they are consumed.
 *   rc_mlx5  the loopback QP's queues and CQ are moved to private memory after set-up, and the
 *            harness plays the NIC: receive CQEs (byte count, immediate) carrying the input's
 *            frames, error CQEs with any syndrome, completions of what was posted, credit words
 *            as the peer would write them, and our own SENDs looped back (optionally changed).
 *
 * Per input the state goes back to the one after set-up: the endpoint is marked failed and its
 * protocol operations closed, posted receives cancelled, and the transport's endpoint state
 * restored from a snapshot. A request still RVX_INPROGRESS after that is a hang: abort().
 * rvx's own log lines go to /dev/null (libFuzzer and the sanitizers write to fd 2 directly);
 * FUZZ_VERBOSE=1 keeps them, FUZZ_TRACE=1 prints each request's status before the reset.
 *
 *   dc_mlx5  as rc_mlx5, for every DCI and the DCT (fuzz/rx_dc.h): the adapter also executes
 *            RDMA and atomics on the harness's regions, so credits are claimed and reported as
 *            on the wire, and the input writes the control region's words and frames' prefixes
 *            as a peer would; after every operation the endpoint's credits are checked. */
#define _GNU_SOURCE 1
#define RVX_TAG 1
#define RVX_AM_HANDLERS(X) X(H0, on_am) X(H1, on_am_reply)
#include <rvx/rvx.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

/* The two sides a build can have: shm's (its rings) and the adapter's (fuzz/rx_dc.h, or rc_mlx5's
 * below); a pair has both, under its endpoint and interface. */
#if defined(RVX_TL_INTRA)
#define SHM_EP  (ep->tl[0].shm)
#define SHM_IFC (w->iface[0].shm)
#define NET_EP  (ep->tl[0].net)
#define NET_IFC (w->iface[0].net)
#define SHM_UPCALL rvx__shm_rx_deliver
typedef rvx__shm_ep_t shm_ep_t;
typedef rvx__shm_iface_t shm_ifc_t;
typedef RVX__PAIR_NET(ep_t) net_ep_t;
typedef RVX__PAIR_NET(iface_t) net_ifc_t;
/* rvx leaves the adapter's CQ alone while no endpoint is off the node and nothing is outstanding
 * on it (rvx__pair_net_idle): once the input has moved the endpoint onto the node, what the
 * adapter completed waits there, and nic_run stops rather than call progress for it 64 times */
#define NIC_UNPOLLED() rvx__pair_net_idle(&w->iface[0])
#else
#define NIC_UNPOLLED() 0
#define SHM_EP  (ep->tl[0])
#define SHM_IFC (w->iface[0])
#define NET_EP  (ep->tl[0])
#define NET_IFC (w->iface[0])
#define SHM_UPCALL rvx__rx_deliver
typedef rvx__tl_ep_t shm_ep_t;
typedef rvx__tl_iface_t shm_ifc_t;
typedef rvx__tl_ep_t net_ep_t;
typedef rvx__tl_iface_t net_ifc_t;
#endif

#define NREQ  32
#define MAXOPS 96

static rvx_context_t *ctx;
static rvx_worker_t *w;
static rvx_ep_t *ep;
static rvx_mem_t *appmem;  /* registered by the application: long-AM target, RMA target */
static uint8_t *sbuf, *rbuf[4];
static size_t bufsz;
static rvx_request_t reqs[NREQ];
static int req_used[NREQ];
static unsigned nreq;
static uint8_t packed_app[RVX_RKEY_PACKED_SIZE];
static rvx__tag_peer_t peer_snap;
static int check_reset; /* FUZZ_CHECK_RESET=1: compare the whole state with set-up after each reset */
static int trace;       /* FUZZ_TRACE=1: each request's status before the reset */

/* ASan keeps 256 MB of freed memory in quarantine by default and gives free pages back to the OS
 * every 5 s: each allocation of an input would land on a page not touched for thousands of
 * inputs and fault it in. 16 MB still holds everything one input frees (an input's frames and
 * staging are a few hundred KB at most), so a use after free within an input is still caught. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=16:allocator_release_to_os_interval_ms=-1";
}

static void on_am(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    if (len) { /* the payload is readable, first byte to last */
        volatile uint8_t sink = ((volatile uint8_t *)p)[0];
        sink = ((volatile uint8_t *)p)[len - 1];
        (void)sink;
    }
    (void)a;
#if RVX_TL == RVX_TL_SHM
    if (n & 1) rvx_am_reply_short(t, RVX_AM_H1, NULL, 0);
#else
    (void)t; (void)n; /* a reply waits for credits: the rc harness gives them only by its ops */
#endif
}

static void on_am_reply(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
}

/* The harness's adapter model and input decoding are scaffolding, not code under test: they are
 * left out of the coverage the fuzzer steers by, which would otherwise lead it to explore the
 * model, and of the comparison tracing that made them a fifth of each run. Never inlined: code
 * inlined into an instrumented caller is traced as the caller's. */
#define NIC_MODEL __attribute__((no_sanitize("coverage"), noinline))

/* ---- input reading -------------------------------------------------------------------------- */

typedef struct { const uint8_t *p; size_t n; } in_t;

static NIC_MODEL unsigned u8(in_t *in) { if (!in->n) return 0; in->n--; return *in->p++; }
static NIC_MODEL unsigned u16(in_t *in) { unsigned a = u8(in); return a | u8(in) << 8; }
static NIC_MODEL uint32_t u32(in_t *in) { uint32_t a = u16(in); return a | (uint32_t)u16(in) << 16; }
static NIC_MODEL uint64_t u64(in_t *in) { uint64_t a = u32(in); return a | (uint64_t)u32(in) << 32; }

static NIC_MODEL size_t size_class(unsigned k)
{
    static const size_t s[] = {0, 1, 8, 17, 100, RVX_AM_MAX_MEDIUM - 20, RVX_AM_MAX_MEDIUM + 7,
                               3 * RVX_AM_MAX_MEDIUM, RVX_RNDV_THRESH_BYTES - 1, RVX_RNDV_THRESH_BYTES,
                               RVX_RNDV_THRESH_BYTES + 4097, 3 * RVX_RNDV_THRESH_BYTES + 123};
    return s[k % (sizeof(s) / sizeof(s[0]))];
}

static NIC_MODEL rvx_request_t *req_new(void)
{
    unsigned i;
    for (i = 0; i < NREQ; i++)
        if (!req_used[i]) {
            req_used[i] = 1;
            memset(&reqs[i], 0, sizeof(reqs[i]));
            if (i >= nreq) nreq = i + 1;
            return &reqs[i];
        }
    return NULL;
}

/* The body of a frame: exact-size heap memory, so a read past its end is reported. Flags patch
 * in the id of a live operation (bytes 0-3), or a valid packed key of the application region. */
static uint8_t *frame_body(in_t *in, size_t maxlen, size_t *lenp)
{
    size_t len = u16(in) % (maxlen + 1), got;
    unsigned flags = u8(in);
    uint8_t *b = (uint8_t *)malloc(len ? len : 1);
    got = len < in->n ? len : in->n; /* the input's bytes, then zeros */
    memcpy(b, in->p, got);
    memset(b + got, 0, len - got);
    in->p += got;
    in->n -= got;
    if ((flags & 1) && len >= 4) {
        struct rvx__tag_state *t = rvx__tag_of(w);
        uint32_t slot = (flags >> 2) % (t->idcap ? t->idcap : 1);
        if (t->idcap && t->ids[slot]) memcpy(b, &t->ids[slot]->id, 4);
    }
    if ((flags & 2) && len >= RVX_RKEY_PACKED_SIZE) {
        size_t off = u8(in) % (len - RVX_RKEY_PACKED_SIZE + 1);
        memcpy(b + off, packed_app, RVX_RKEY_PACKED_SIZE);
    }
    *lenp = len;
    return b;
}

/* ---- transport side: delivering frames, and the per-input reset ----------------------------- */

#if RVX_TL == RVX_TL_SHM || defined(RVX_TL_INTRA)
static shm_ep_t tl_snap;

static void shm_setup(void) { tl_snap = SHM_EP; }

static void shm_deliver(unsigned chan, unsigned info, uint8_t *body, size_t len)
{
    SHM_UPCALL(&SHM_EP, chan, info, body, len);
}

static void shm_reset(void)
{
    shm_ifc_t *ifc = &SHM_IFC;
    unsigned ch;
    for (ch = 0; ch < RVX__TL_AM_CHANNELS; ch++) { /* the ring's control line and the slots used */
        uint64_t used = SHM_EP.tx[ch].tail > SHM_EP.rx[ch].head ? SHM_EP.tx[ch].tail
                                                                       : SHM_EP.rx[ch].head;
        size_t n = used + 1 < RVX__SHM_NSLOTS ? (size_t)used + 1 : RVX__SHM_NSLOTS;
        memset(rvx__shm_ring(ifc->mbox, 0, ch), 0, RVX__SHM_SLOT + n * RVX__SHM_SLOT);
    }
    SHM_EP = tl_snap;
    ifc->in_rx = 0;
}

/* FUZZ_CHECK_RESET: the endpoint is as after set-up and both rings are clean */
static void shm_check(void)
{
    shm_ifc_t *ifc = &SHM_IFC;
    unsigned ch;
    size_t i;
    if (memcmp(&SHM_EP, &tl_snap, sizeof(tl_snap))) {
        fprintf(stdout, "fuzz/rx: the reset left the endpoint unlike set-up\n");
        abort();
    }
    for (ch = 0; ch < RVX__TL_AM_CHANNELS; ch++) {
        const uint8_t *r = (const uint8_t *)rvx__shm_ring(ifc->mbox, 0, ch);
        for (i = 0; i < RVX__SHM_SLOT + RVX__SHM_NSLOTS * RVX__SHM_SLOT; i++)
            if (r[i]) {
                fprintf(stdout, "fuzz/rx: the reset left byte %zu of ring %u set\n", i, ch);
                abort();
            }
    }
}

/* The frame at the head of a ring, if one is there. */
static uint64_t *ring_head(unsigned chan)
{
    rvx__shm_rx_t *rx = &SHM_EP.rx[chan];
    return (uint64_t *)(void *)(uintptr_t)rx->next;
}

static void shm_op(in_t *in, unsigned op)
{
    unsigned chan = u8(in) & 1;
    uint64_t *h = ring_head(chan);
    rvx__shm_rx_t *rx = &SHM_EP.rx[chan];
    switch (op % 3) {
    case 0: { /* a raw header: any length and info, with the stamp the ring expects */
        uint64_t v = u64(in);
        *h = (v & ~0xffffffffull) | rx->expect;
        rvx_progress(w);
        break;
    }
    case 1: /* change a byte of the frame our own send left at the head of the ring */
        if ((uint32_t)*h == rx->expect) {
            size_t len = (size_t)(*h >> 32) & 0xffff, off = u16(in);
            unsigned x = u8(in);
            if (len && ((size_t)(rx->head & (RVX__SHM_NSLOTS - 1)) * RVX__SHM_SLOT + 8 + len <=
                        RVX__SHM_NSLOTS * RVX__SHM_SLOT))
                ((uint8_t *)(h + 1))[off % len] ^= (uint8_t)x;
        }
        break;
    default: /* change its length or info word */
        if ((uint32_t)*h == rx->expect) {
            unsigned which = u8(in);
            uint64_t v = u16(in);
            if (which & 1) *h = (*h & ~(0xffffull << 48)) | v << 48;
            else *h = (*h & ~(0xffffull << 32)) | v << 32;
        }
        break;
    }
}
#define SHM_FRAME_MAX (RVX__SHM_NSLOTS * RVX__SHM_SLOT - 8) /* the longest frame a ring holds */
#endif

#if RVX_TL == RVX_TL_DC_MLX5 /* the harness is the NIC: fuzz/rx_dc.h */
#include "rx_dc.h"

#elif RVX_TL == RVX_TL_RC_MLX5 /* the harness is the NIC */

static rvx__rc_conn_t *c;
static rvx__rc_conn_t conn_snap;
static net_ifc_t ifc_snap;
static uint8_t *srq_wq_snap;
static uint32_t *bfree_snap;
static rvx__rc_bseg_t *bsegs_snap; /* the pool's segment records: head, limit, holder */
static uint8_t *cq_mem;
static size_t cq_bytes, srq_bytes, bfree_bytes, bsegs_bytes;
static uint16_t nic_srq_next;  /* the shared receive queue's WQE the adapter consumes next */
static uint16_t nic_srq_taken; /* WQEs consumed, mod 2^16 (the doorbell record counts posts) */
static uint32_t nic_sq;    /* next WQE the adapter looks at */
static uint32_t nic_cq_pi; /* its CQ producer index: a CQE is written only where rvx has been */
static unsigned nic_err;   /* the QP is in error: every WQE completes flushed */
static uint32_t prv_dbrec[4];
static rvx__mlx5_bf_t prv_bf;
typedef struct { uint32_t imm; size_t len; uint8_t body[RVX__RC_FRAME]; } staged_t;
static staged_t staged[8];
static unsigned nstaged;

/* CQEs from..to (mod 2^32) back to invalid: all of them at set-up, and per input only those the
 * adapter wrote, so that the reset costs what the input did, not the size of the CQ. */
static NIC_MODEL void cq_fill(uint32_t from, uint32_t to)
{
    net_ifc_t *ifc = &NET_IFC;
    uint32_t i, n = to - from < ifc->cq.cnt ? to - from : ifc->cq.cnt;
    for (i = 0; i < n; i++) rvx__mlx5_cqe(&ifc->cq, from + i)->op_own = 0xf1;
}

/* Move the loopback QP's send and receive queues, its doorbell records and BlueFlame register,
 * and the CQ, into memory the simulated adapter does not watch. */
static void nic_setup(void)
{
    net_ifc_t *ifc = &NET_IFC;
    rvx__mlx5_srq_t *s = &ifc->srq;
    size_t sq_bytes;
    uint32_t i;
    uint8_t *p;
    c = NET_EP.c;
    sq_bytes = (size_t)(c->sq.mask + 1) * RVX__MLX5_BB;
    p = (uint8_t *)aligned_alloc(4096, (sq_bytes + 4095) & ~(size_t)4095);
    memcpy(p, c->sq.buf, sq_bytes);
    c->sq.buf = p;
    c->sq.dbrec = &prv_dbrec[1];
    prv_bf = *c->sq.bf;
    p = (uint8_t *)aligned_alloc(4096, (2 * (size_t)prv_bf.size + 4095) & ~(size_t)4095);
    prv_bf.cur = p + (prv_bf.cur - prv_bf.reg);
    prv_bf.reg = p;
    c->sq.bf = &prv_bf;
    /* the shared receive queue: its WQE ring and doorbell record move too, and its free list
     * starts afresh (0 -> 1 -> ... -> mask, all but the last posted) so that the adapter knows
     * which WQE it consumes next; every buffer is rvx's to post at set-up, none is held */
    srq_bytes = (size_t)(s->mask + 1) * s->stride;
    p = (uint8_t *)aligned_alloc(4096, (srq_bytes + 4095) & ~(size_t)4095);
    memcpy(p, s->wq, srq_bytes);
    s->wq = p;
    s->dbrec = &prv_dbrec[0];
    for (i = 0; i <= s->mask; i++) rvx__mlx5_srq_wqe(s, i)->next_wqe_index = rvx_htobe16((uint16_t)((i + 1) & s->mask));
    s->head = 0;
    s->tail = (uint16_t)s->mask;
    s->posted = 0;
    for (i = 0; i < s->mask; i++) rvx__mlx5_srq_post(s);
    rvx__mlx5_srq_ring(s);
    srq_wq_snap = (uint8_t *)malloc(srq_bytes);
    memcpy(srq_wq_snap, s->wq, srq_bytes);
    nic_srq_next = 0;
    nic_srq_taken = 0;
    /* the bounce pool exists from the start, so that the snapshot holds it and its free stack */
    if (!ifc->bpool && rvx__rc_bpool_init(ifc) != RVX_OK) {
        fprintf(stdout, "fuzz/rx: no bounce pool\n");
        abort();
    }
    bfree_bytes = (RVX__RC_BOUNCE_BYTES / RVX__RC_BOUNCE_SEG) * sizeof(*ifc->bfree);
    bfree_snap = (uint32_t *)malloc(bfree_bytes);
    memcpy(bfree_snap, ifc->bfree, bfree_bytes);
    bsegs_bytes = (RVX__RC_BOUNCE_BYTES / RVX__RC_BOUNCE_SEG) * sizeof(*ifc->bsegs);
    bsegs_snap = (rvx__rc_bseg_t *)malloc(bsegs_bytes);
    memcpy(bsegs_snap, ifc->bsegs, bsegs_bytes);
    cq_bytes = ((size_t)ifc->cq.cnt << ifc->cq.shift) + 64;
    cq_mem = (uint8_t *)aligned_alloc(4096, (cq_bytes + 4095) & ~(size_t)4095);
    ifc->cq.buf = cq_mem + (ifc->cq.shift == 7 ? 64 : 0);
    ifc->cq.dbrec = &prv_dbrec[2];
    ifc->cq.next_op_own = &rvx__mlx5_cqe(&ifc->cq, ifc->cq.ci)->op_own;
    cq_fill(0, ifc->cq.cnt);
    /* no op record in use at set-up: a reset gives the pool back whole (nic_reset) */
    if (c->tx.head != RVX__MLX5_REC_NIL) {
        fprintf(stdout, "fuzz/rx: op records in use after set-up\n");
        abort();
    }
    rvx__mlx5_txpool_fini(&ifc->txrecs);
    conn_snap = *c;
    ifc_snap = *ifc;
    nic_sq = c->sq.pi;
    nic_cq_pi = ifc->cq.ci;
}


static NIC_MODEL int cqe_write(unsigned opcode, uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm_be,
                     uint32_t qpn, unsigned syndrome)
{
    net_ifc_t *ifc = &NET_IFC;
    struct mlx5_cqe64 *cqe;
    if (nic_cq_pi - ifc->cq.ci >= ifc->cq.cnt) return 0;
    cqe = rvx__mlx5_cqe(&ifc->cq, nic_cq_pi);
    memset(cqe, 0, 64);
    cqe->wqe_counter = rvx_htobe16(wqe_counter);
    cqe->byte_cnt = rvx_htobe32(byte_cnt);
    cqe->imm_inval_pkey = imm_be;
    cqe->sop_drop_qpn = rvx_htobe32(qpn & 0xffffff);
    if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR) {
        struct mlx5_err_cqe *e = (struct mlx5_err_cqe *)(void *)cqe;
        e->syndrome = (uint8_t)syndrome;
    }
    cqe->op_own = (uint8_t)(opcode << 4 | (nic_cq_pi & ifc->cq.cnt ? 1 : 0));
    nic_cq_pi++;
    /* a receive error leaves our QP in error: every WQE after it completes flushed, signaled or
     * not, as on the adapter (rvx relies on it to retire what it posts after the error) */
    if (opcode == MLX5_CQE_RESP_ERR && (qpn & 0xffffff) == c->qpn && !nic_err)
        nic_err = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
    return 1;
}

/* From the harness (not from inside rvx): make room, write, let progress take it. */
static void cqe_put(unsigned opcode, uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm_be,
                    uint32_t qpn, unsigned syndrome)
{
    unsigned n = 0;
    while (!cqe_write(opcode, wqe_counter, byte_cnt, imm_be, qpn, syndrome) && n++ < 8) rvx_progress(w);
    rvx_progress(w);
}

/* The adapter takes the shared receive queue's next posted WQE, as a receive consumes it: its
 * index (the CQE's wqe_counter), or -1 with none posted (the sender would see RNR). */
static NIC_MODEL int srq_take(void)
{
    rvx__mlx5_srq_t *s = &NET_IFC.srq;
    uint16_t idx = nic_srq_next;
    if ((uint16_t)(rvx_htobe32(*s->dbrec) - nic_srq_taken) == 0) return -1;
    /* the link is read now: once the buffer is given back, this WQE's link is rewritten */
    nic_srq_next = (uint16_t)(rvx_htobe16(rvx__mlx5_srq_wqe(s, idx)->next_wqe_index) & s->mask);
    nic_srq_taken++;
    return idx;
}

/* A CQE that consumes a receive WQE (a receive, or a receive's error): room in the CQ first, so
 * that a WQE is never taken without its CQE. */
static void rx_put(unsigned opcode, const uint8_t *body, size_t len, uint32_t imm_be, uint32_t qpn,
                   unsigned syndrome)
{
    net_ifc_t *ifc = &NET_IFC;
    unsigned n = 0;
    int idx;
    while (nic_cq_pi - ifc->cq.ci >= ifc->cq.cnt && n++ < 8) rvx_progress(w);
    if (nic_cq_pi - ifc->cq.ci >= ifc->cq.cnt || (idx = srq_take()) < 0) return;
    if (len > ifc->srq.frame) len = ifc->srq.frame;
    if (len && body) memcpy(rvx__mlx5_srq_buf(&ifc->srq, (uint16_t)idx), body, len); /* else: what the buffer held */
    cqe_put(opcode, (uint16_t)idx, (uint32_t)len, imm_be, qpn, syndrome);
}

/* A received frame: its bytes in the buffer of the next posted receive, then its CQE. The adapter
 * never reports more bytes than the buffer holds (a longer SEND is an error CQE). */
static void rx_cqe(uint32_t imm_host, const uint8_t *body, size_t len)
{
    rx_put(MLX5_CQE_RESP_SEND_IMM, body, len, rvx_htobe32(imm_host), c->qpn, 0);
}

static void nic_deliver(unsigned chan, unsigned info, uint8_t *body, size_t len)
{
    if ((info & 0xffff) == RVX__RC_HELLO) info ^= 1; /* re-connection hellos: not fuzzed here */
    rx_cqe(chan << 16 | (info & 0xffff), body, len);
}

static NIC_MODEL const uint8_t *wqebb(uint32_t i) { return c->sq.buf + (size_t)(i & c->sq.mask) * RVX__MLX5_BB; }

/* The bytes of a SEND's payload: inline (possibly across WQEBBs) or through a data segment. */
static NIC_MODEL size_t send_payload(uint32_t idx, unsigned ds, uint8_t *out, size_t cap)
{
    uint8_t seg[16];
    uint32_t bc;
    size_t off, n, i;
    if (ds < 2) return 0;
    memcpy(seg, wqebb(idx) + 16, 16);
    memcpy(&bc, seg, 4);
    bc = rvx_htobe32(bc);
    if (bc & MLX5_INLINE_SEG) {
        n = bc & 0x3ff;
        if (n > cap || 20 + n > (size_t)ds * 16) return 0;
        for (i = 0, off = 20; i < n; i++, off++) out[i] = wqebb(idx + (uint32_t)(off / 64))[off % 64];
        return n;
    } else {
        uint64_t addr;
        memcpy(&addr, seg + 8, 8);
        addr = rvx_htobe64(addr);
        n = bc;
        if (n > cap) return 0;
        if (n) memcpy(out, (const void *)(uintptr_t)addr, n);
        return n;
    }
}

/* The adapter executes what was posted since it last looked, as far as the CQ has room: SENDs are
 * kept to be looped back, every signaled WQE completes (every WQE, flushed, once the QP is in
 * error). It never calls into rvx, so rvx's waiting loops can run it (RVX_FUZZ_BACKOFF_HOOK). */
static NIC_MODEL void nic_step(void)
{
    static uint8_t tmp[RVX__RC_FRAME];
    while (nic_sq != c->sq.pi) {
        const struct mlx5_wqe_ctrl_seg *ctrl = (const struct mlx5_wqe_ctrl_seg *)(const void *)wqebb(nic_sq);
        unsigned opcode = rvx_htobe32(ctrl->opmod_idx_opcode) & 0xff;
        unsigned ds = rvx_htobe32(ctrl->qpn_ds) & 0x3f;
        unsigned nbb = (ds * 16 + 63) / 64;
        if (nic_err) {
            if (!cqe_write(MLX5_CQE_REQ_ERR, (uint16_t)nic_sq, 0, 0, c->qpn, nic_err)) return;
            nic_err = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
        } else {
            if ((ctrl->fm_ce_se & RVX__MLX5_CE) && !cqe_write(MLX5_CQE_REQ, (uint16_t)nic_sq, 0, 0, c->qpn, 0))
                return;
            if ((opcode == MLX5_OPCODE_SEND_IMM || opcode == MLX5_OPCODE_SEND) && nstaged < 8) {
                size_t n = send_payload(nic_sq, ds, tmp, sizeof(tmp));
                staged[nstaged].imm = rvx_htobe32(ctrl->imm);
                staged[nstaged].len = n;
                memcpy(staged[nstaged].body, tmp, n);
                nstaged++;
            }
        }
        nic_sq += nbb ? nbb : 1;
    }
}

void fuzz_nic_hook(void);
void fuzz_nic_hook(void)
{
    if (c) nic_step();
}

/* The harness changed what rvx reads outside the CQ (the peer's credit word): the next nic_run
 * lets progress see it even with nothing to complete. */
static unsigned nic_poked;

/* Run the adapter and progress until both are idle; unsignaled work at the tail gets the
 * signaled NOP the transport posts when it waits for room. With nothing posted, nothing to reap,
 * no deferred frame, no ready operation and nothing poked, progress could only retry what waits
 * for one of those: it is not called (an input's own progress operations still call it). */
static void nic_run(void)
{
    net_ifc_t *ifc = &NET_IFC;
    struct rvx__tag_state *t = rvx__tag_of(w);
    unsigned rounds = 0;
    nic_step();
    if (!nic_poked && (nic_cq_pi == ifc->cq.ci || NIC_UNPOLLED()) && (c->failed || c->sq.ci == c->sq.pi) && !ifc->def_head &&
        t->ready.next == &t->ready)
        return;
    nic_poked = 0;
    while (rounds++ < 64) {
        nic_step();
        rvx_progress(w);
        if (nic_sq == c->sq.pi && (nic_cq_pi == NET_IFC.cq.ci || NIC_UNPOLLED())) {
            if (c->failed || c->sq.ci == c->sq.pi) break;
            rvx__rc_sig_tail(c);
        }
    }
}

/* Nothing of the adapter's path outstanding. */
static int nic_idle(void) { return c->sq.ci == c->sq.pi; }

/* The QP fails: the next WQE with `synd`, every later one flushed, as the adapter does. */
static void nic_fail(unsigned synd)
{
    nic_err = synd ? synd : MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;
    nic_run();
    c->failed = 1;
}

static void nic_reset(void)
{
    net_ifc_t *ifc = &NET_IFC;
    while (ifc->def_head) {
        rvx__mlx5_deferred_t *d = ifc->def_head;
        ifc->def_head = d->next;
        free(d);
    }
    /* the op records taken since set-up: the pool was empty then */
    rvx__mlx5_txpool_fini(&ifc->txrecs);
    conn_snap.ka_ms = rvx__rc_now_ms(); /* a keepalive is due 0.1 s into an input, as after set-up */
    *c = conn_snap;
    *ifc = ifc_snap;
    memcpy(ifc->srq.wq, srq_wq_snap, srq_bytes);
    prv_dbrec[0] = rvx_htobe32(ifc->srq.posted);
    nic_srq_next = 0;
    nic_srq_taken = 0;
    memcpy(ifc->bfree, bfree_snap, bfree_bytes);
    memcpy(ifc->bsegs, bsegs_snap, bsegs_bytes);
    cq_fill(ifc->cq.ci, nic_cq_pi);
    nic_sq = c->sq.pi;
    nic_cq_pi = ifc->cq.ci;
    nic_err = 0;
    nic_poked = 0;
    nstaged = 0;
}

/* FUZZ_CHECK_RESET: the transport's state after the reset is byte for byte the one after set-up */
static void nic_check(void)
{
    net_ifc_t *ifc = &NET_IFC;
    uint32_t i;
    if (memcmp(c, &conn_snap, sizeof(*c)) || memcmp(ifc, &ifc_snap, sizeof(*ifc)) ||
        memcmp(ifc->srq.wq, srq_wq_snap, srq_bytes) ||
        memcmp(ifc->bfree, bfree_snap, bfree_bytes) || memcmp(ifc->bsegs, bsegs_snap, bsegs_bytes)) {
        fprintf(stdout, "fuzz/rx: the reset left the queues unlike set-up\n");
        abort();
    }
    for (i = 0; i < ifc->cq.cnt; i++)
        if (rvx__mlx5_cqe(&ifc->cq, i)->op_own != 0xf1) {
            fprintf(stdout, "fuzz/rx: the reset left CQE %u valid\n", i);
            abort();
        }
}

static void nic_op(in_t *in, unsigned op)
{
    switch (op % 6) {
    case 0: nic_run(); break;
    case 1: { /* loop a staged SEND of ours back, perhaps changed */
        unsigned k = u8(in), x = u8(in), off = u16(in);
        staged_t *s;
        if (!nstaged) break;
        s = &staged[k % nstaged];
        if (s->len && (k & 0x80)) s->body[off % s->len] ^= (uint8_t)x;
        rx_cqe(s->imm, s->body, s->len);
        break;
    }
    case 2: { /* the peer's credit word */
        uint64_t v = u8(in) & 1 ? u64(in) : *c->credit_word + u8(in);
        *(volatile uint64_t *)(uintptr_t)c->credit_word = v;
        nic_poked = 1;
        break;
    }
    case 3: /* the connection fails with any syndrome */
        nic_fail(u8(in));
        break;
    case 4: { /* a receive completes in error (the peer broke the connection, or a length error):
               * it names the WQE it consumed; a flush consumes none */
        unsigned wc = u16(in), synd = u8(in);
        if (synd == MLX5_CQE_SYNDROME_WR_FLUSH_ERR) cqe_put(MLX5_CQE_RESP_ERR, (uint16_t)wc, 0, 0, c->qpn, synd);
        else rx_put(MLX5_CQE_RESP_ERR, NULL, 0, 0, c->qpn, synd);
        break;
    }
    default: { /* a CQE for a QP that is not ours (every QP of the worker receives on the shared
                * queue), or of an opcode nothing posts */
        unsigned opc = u8(in) & 0xf, wc = u16(in);
        uint32_t len = u32(in) % (RVX__RC_FRAME + 1), imm = u32(in), qpn;
        if (opc == 0xf || opc == MLX5_CQE_REQ || opc == MLX5_CQE_REQ_ERR) opc = MLX5_CQE_RESP_SEND_IMM;
        qpn = u8(in) & 1 ? c->qpn : u32(in);
        /* receives and receive errors consume a WQE of the shared queue and name it; the rest
         * carry any WQE counter */
        if (opc == MLX5_CQE_RESP_SEND_IMM || opc == MLX5_CQE_RESP_ERR) rx_put(opc, NULL, len, imm, qpn, 0);
        else cqe_put(opc, (uint16_t)wc, len, imm, qpn, 0);
        break;
    }
    }
}
#define NIC_FRAME_MAX RVX__RC_FRAME
#endif


/* Which side the input's operations reach: shm's, the adapter's, or both for a pair, whose
 * loopback endpoint (on the node) has both paths connected. The pair's own operations change the
 * path the endpoint takes (its intra word) and the path the input's frames arrive by. */
#if defined(RVX_TL_INTRA)
static uint8_t intra_snap;
static unsigned noff_snap, frame_path;
static void tl_setup(void)
{
    shm_setup();
    nic_setup();
    intra_snap = ep->tl[0].intra;
    noff_snap = w->iface[0].noff;
}
static void deliver(unsigned chan, unsigned info, uint8_t *body, size_t len)
{
    if (frame_path) nic_deliver(chan, info, body, len);
    else shm_deliver(chan, info, body, len);
}
static void tl_reset(void)
{
    shm_reset();
    nic_reset();
    ep->tl[0].intra = intra_snap;
    w->iface[0].noff = noff_snap;
    frame_path = 0;
}
static void tl_check(void)
{
    shm_check();
    nic_check();
}
static void tl_op(in_t *in, unsigned op)
{
    op %= 9;
    if (op < 5) { nic_op(in, u8(in)); return; }
    if (op < 8) { shm_op(in, op - 5); return; }
    if (u8(in) & 1) { /* the endpoint takes the other path (on or off the node), between
                         * operations of the adapter's path: no endpoint changes its path with
                         * work outstanding, so the pair need not poll a path it left */
        if (!nic_idle()) return;
        ep->tl[0].intra ^= 1;
        w->iface[0].noff = noff_snap + (ep->tl[0].intra != intra_snap ? (intra_snap ? 1u : ~0u) : 0u);
    } else {
        frame_path ^= 1;
    }
}
#define FRAME_MAX (SHM_FRAME_MAX > NIC_FRAME_MAX ? SHM_FRAME_MAX : NIC_FRAME_MAX)
#elif RVX_TL == RVX_TL_SHM
#define tl_setup  shm_setup
#define deliver   shm_deliver
#define tl_reset  shm_reset
#define tl_check  shm_check
#define tl_op     shm_op
#define FRAME_MAX SHM_FRAME_MAX
#else
#define tl_setup  nic_setup
#define deliver   nic_deliver
#define tl_reset  nic_reset
#define tl_check  nic_check
#define tl_op     nic_op
#define FRAME_MAX NIC_FRAME_MAX
#endif

/* ---- set-up, the per-input reset ------------------------------------------------------------ */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    unsigned i;
    (void)argc; (void)argv;
    unsetenv("RVX_SIZE");
    unsetenv("RVX_RANK");
    if (!getenv("FUZZ_VERBOSE")) { /* rvx's log lines: to /dev/null, a write per 64 KB */
        stderr = fopen("/dev/null", "w");
        if (stderr) setvbuf(stderr, NULL, _IOFBF, 1 << 16);
    }
    check_reset = getenv("FUZZ_CHECK_RESET") != NULL;
    trace = getenv("FUZZ_TRACE") != NULL;
    if (rvx_init(&ctx) != RVX_OK || rvx_worker_create(ctx, &w) != RVX_OK ||
        rvx_ep_create(w, 0, &ep) != RVX_OK || rvx_mem_alloc(ctx, 1 << 16, &appmem) != RVX_OK) {
        fprintf(stdout, "fuzz/rx: set-up failed\n");
        abort();
    }
    /* whole pages: the registration cache registers (and a rendezvous key covers) whole pages,
     * which with a smaller malloc'd buffer would include other heap objects */
    bufsz = (size_class(11) + 64 + 4095) & ~(size_t)4095;
    sbuf = (uint8_t *)aligned_alloc(4096, bufsz);
    memset(sbuf, 0x5a, bufsz);
    for (i = 0; i < 4; i++) rbuf[i] = (uint8_t *)aligned_alloc(4096, bufsz);
    rvx_rkey_pack(appmem, packed_app);
    peer_snap = rvx__tag_of(w)->peers[0];
    tl_setup();
    return 0;
}

/* The registration cache as after set-up, empty of the harness's buffers: a send from a cached
 * buffer takes another path (zero copy) than one that registers it, and an input must mean the
 * same in a fresh process as after a thousand others. */
static void cache_reset(void)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    unsigned i;
    rvx__rcache_invalidate(&t->rcache, sbuf, bufsz);
    for (i = 0; i < 4; i++) rvx__rcache_invalidate(&t->rcache, rbuf[i], bufsz);
}

/* ids as after set-up, so that an input means the same every time it runs */
static NIC_MODEL void ids_reset(struct rvx__tag_state *t)
{
    unsigned i;
    t->idgen = 0;
    t->nidfree = 0;
    for (i = t->idcap; i-- > 1;) {
        if (t->ids[i]) { fprintf(stdout, "fuzz/rx: id slot %u still held\n", i); abort(); }
        t->idfree[t->nidfree++] = i;
    }
}

static void reset(void)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    unsigned i;
#if RVX_TL == RVX_TL_SHM || defined(RVX_TL_INTRA)
    SHM_EP.failed = 1;
#endif
#if defined(RVX_TL_INTRA)
    /* the input may have moved the endpoint back on the node with unsignaled work of the
     * adapter's path outstanding (no endpoint changes its path outside the harness): the pair
     * polls the adapter's CQ while the reset fails it, as for an endpoint off the node */
    w->iface[0].noff = noff_snap + 1;
#endif
#if RVX_TL == RVX_TL_DC_MLX5
    nic_fail(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
    nic_check_retired();
#elif RVX_TL == RVX_TL_RC_MLX5
    nic_fail(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
    /* the adapter has flushed every WQE, each with its CQE: what is not retired now never will
     * be, and closing would wait for the operations it carries (10 s, then released) */
    if (c->sq.ci != c->sq.pi) {
        fprintf(stdout, "fuzz/rx: the failed QP's send queue kept WQEs %u to %u\n", c->sq.ci, c->sq.pi);
        fflush(stdout);
        abort();
    }
#endif
    if (trace)
        for (i = 0; i < nreq; i++)
            if (req_used[i]) fprintf(stdout, "fuzz/rx: request %u: %s\n", i, rvx_status_str(reqs[i].status));
    rvx__proto_ep_close(ep);
    for (i = 0; i < nreq; i++)
        if (req_used[i] && reqs[i].status == RVX_INPROGRESS) rvx_tag_cancel(w, &reqs[i]);
    for (i = 0; i < nreq; i++) {
        if (req_used[i] && reqs[i].status == RVX_INPROGRESS) {
            fprintf(stdout, "fuzz/rx: request %u still pending after its endpoint closed\n", i);
            abort();
        }
        req_used[i] = 0;
    }
    nreq = 0;
    if (w->in_handler) { fprintf(stdout, "fuzz/rx: in_handler left at %u\n", w->in_handler); abort(); }
    tl_reset();
    ids_reset(t);
    t->peers[0] = peer_snap;
    t->qhead = -2; /* the list of peers with queued frames is empty again, as peers[0]'s queue */
    cache_reset();
    if (check_reset) tl_check();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in_t in = {data, size};
    unsigned nops = 0;
    while (in.n && nops++ < MAXOPS) {
        unsigned op = u8(&in);
#if RVX_TL != RVX_TL_SHM
        /* the adapter completes what was posted before the next call: the transport waits for
         * completions where it runs out of queue or bounce space, as it would on hardware */
        if ((op & 15) < 9) nic_run();
#endif
        switch (op & 15) {
        case 0: case 1: { /* a frame of any class */
            size_t len;
            unsigned chan = u8(&in) & 1, info = u16(&in);
            uint8_t *b;
            if (op & 16) info = RVX__TAG_CLASS | (info & 15); /* a tag frame of type 0-15 */
            b = frame_body(&in, FRAME_MAX, &len);
            deliver(chan, info, b, len);
            free(b);
            break;
        }
        case 2: { /* tag send */
            rvx_request_t *r = req_new();
            size_t len = size_class(u8(&in));
            uint64_t tag = u8(&in);
            if (r && rvx_tag_send(ep, sbuf, len, tag, r) != RVX_INPROGRESS) req_used[r - reqs] = 0;
            break;
        }
        case 3: { /* tag receive, from anyone or from rank 0, whole tag or masked */
            rvx_request_t *r = req_new();
            unsigned k = u8(&in), m = u8(&in);
            size_t len = size_class(k);
            uint64_t tag = u8(&in), mask = m & 1 ? ~0ull : 0xf0;
            rvx_status_t st;
            if (!r) break;
            st = m & 2 ? rvx_tag_recv_from(w, 0, rbuf[(m >> 2) & 3], len, tag, mask, r, NULL)
                       : rvx_tag_recv(w, rbuf[(m >> 2) & 3], len, tag, mask, r, NULL);
            if (st != RVX_INPROGRESS) req_used[r - reqs] = 0;
            break;
        }
        case 4: { /* progress */
            unsigned n = (u8(&in) & 7) + 1;
            while (n--) rvx_progress(w);
            break;
        }
        case 5: { /* cancel a receive */
            unsigned k = u8(&in);
            if (nreq) rvx_tag_cancel(w, &reqs[k % nreq]);
            break;
        }
        case 6: { /* probe */
            rvx_tag_info_t info;
            rvx_tag_probe(w, u8(&in), u8(&in) & 1 ? ~0ull : 0, &info);
            break;
        }
        case 7: { /* an active message of ours */
            uint64_t args[RVX_AM_MAX_ARGS] = {0};
            unsigned k = u8(&in), n = k % (RVX_AM_MAX_ARGS + 1);
            size_t plen = u16(&in) % (RVX_AM_MAX_MEDIUM + 1);
            if ((k >> 4) % 3 == 0) rvx_am_short(ep, RVX_AM_H0, args, n);
            else if ((k >> 4) % 3 == 1) rvx_am_medium(ep, RVX_AM_H0, args, n, sbuf, plen);
            else {
                rvx_rkey_t rk;
                if (rvx_rkey_unpack(ep, packed_app, &rk) == RVX_OK) {
                    rvx_am_long(ep, RVX_AM_H0, args, n, sbuf, plen % 4096,
                                (uint64_t)(uintptr_t)rvx_mem_addr(appmem) + u16(&in), &rk);
                    rvx_rkey_release(&rk);
                }
            }
            break;
        }
        case 8: { /* a remote key of the input's making, or ours changed; then RMA through it */
            uint8_t kb[RVX_RKEY_PACKED_SIZE];
            rvx_rkey_t rk;
            unsigned m = u8(&in), i;
            memcpy(kb, packed_app, sizeof(kb));
            if (m & 1) for (i = 0; i < sizeof(kb); i++) kb[i] = (uint8_t)u8(&in);
            else kb[u8(&in) % sizeof(kb)] ^= (uint8_t)u8(&in);
            if (rvx_rkey_unpack(ep, kb, &rk) == RVX_OK) {
                uint64_t raddr = m & 2 ? u64(&in) : (uint64_t)(uintptr_t)rvx_mem_addr(appmem) + u32(&in);
                size_t len = u16(&in) % (bufsz - 64);
                rvx_request_t *r = req_new();
                if (m & 4) rvx_put(ep, sbuf, len, raddr, &rk);
                else if (r && rvx_get(ep, rbuf[0], len, raddr, &rk, r) != RVX_INPROGRESS) req_used[r - reqs] = 0;
                if (r && r->status == RVX_INPROGRESS) {
                    /* a get in flight reads into rbuf[0] until it completes: finish it here */
#if RVX_TL != RVX_TL_SHM
                    nic_run();
#endif
                    if (r->status != RVX_INPROGRESS) req_used[r - reqs] = 0;
                }
                rvx_rkey_release(&rk);
            }
            break;
        }
        default: /* the transport's own operations */
            tl_op(&in, op >> 4);
            break;
        }
#if RVX_TL == RVX_TL_DC_MLX5
        dc_invariants();
#endif
    }
    reset();
    return 0;
}
