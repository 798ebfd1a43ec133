/* t_rc_oracle: every kind of WQE rc_mlx5 builds, compared byte for byte with the WQE built the
 * rdma-core way: the ctrl segment through mlx5dv_set_ctrl_seg, data segments through
 * mlx5dv_set_data_seg, and the raddr, atomic, masked-atomic and inline segments by hand from the
 * layouts in mlx5dv.h and the facts sheet (never through rvx's own builders).
 *
 * One rank, an endpoint to itself (its QP is connected to itself). For each operation the test
 * reads the connection's state before posting (producer index, moderation counter, pending
 * fence, bounce ring position), builds the expected WQEs from it, fills the slots they will take
 * with a poison byte, posts through the public API and compares every byte of every WQEBB the
 * WQE takes, following the wrap at the end of the send queue:
 *   - bytes the NIC reads (ctrl, raddr, atomic, data segments, inline header and payload) must be
 *     exactly the expected ones; a poison byte there means rvx left a field stale;
 *   - padding (after the inline payload, after ds*16) is not read by the NIC; it must be zero or
 *     left untouched (poison), never anything else.
 * After each operation the producer index, the moderation counter, the fence and the doorbell
 * record must be where the model says. Then completions are awaited and the data effects
 * checked: target memory against a shadow copy, fetched values, active-message arguments and
 * payloads, credit words. A mismatch is printed as a hex dump of the differing 16-byte lines. */
#define RVX_AM_HANDLERS(X) X(ORACLE, on_oracle)
#include <rvx/rvx.h>
#include "testlib.h"

#if RVX_TL != RVX_TL_RC_MLX5
#error "t_rc_oracle is an rc_mlx5 test: build with -DRVX_TL=RVX_TL_RC_MLX5"
#endif

#define REGION    (1u << 20)        /* target memory; the atomics live in its last page */
#define PUT_AREA  (REGION - 4096 - 70000)
#define AMO64_OFF (REGION - 4096)
#define AMO32_OFF (REGION - 2048)
#define LREGION   (256u * 1024)     /* registered local memory for zcopy */
#define POISON    0xa5
#define LAPS      6                 /* send-queue laps with a WQE straddling the end */
#define MAXX      64                /* expected WQEs per operation */

/* Masked atomic segments (rdma-core keeps them private in providers/mlx5/wqe.h; the layout is
 * the one the facts sheet gives, as UCX uses it). */
struct t_mcs64 { __be64 swap, compare, swap_mask, compare_mask; };
struct t_mcs32 { __be32 swap, compare, swap_mask, compare_mask; };
struct t_mfa64 { __be64 add, field_boundary; };
struct t_mfa32 { __be32 add, field_boundary, rsvd[2]; };

/* What the test knows independently of rvx: the QP through mlx5dv_init_obj, keys through the
 * ibv_mr objects. */
static struct mlx5dv_qp dq;
static uint8_t *sq;            /* send queue */
static size_t sq_bytes;
static uint32_t wqe_cnt, qpn, rkey, llkey, blkey, ctrl_rkey;
static uint64_t ctrl_addr;     /* this rank's credit word in the (own) control region */
static uint8_t *bounce_base;
static unsigned rq_quarter;
static rvx__rc_conn_t *C;    /* the connection: read for pre-post state only */

/* The model: the state a WQE's bytes depend on. */
typedef struct model {
    uint32_t pi;
    uint32_t sig_pi;
    uint8_t  fence;
    uint64_t b_head;
} model_t;

typedef struct xwqe {
    uint32_t    pi;
    unsigned    ds, nbb;
    char        what[64];
    uint8_t     exp[256];
    uint8_t     care[256];
} xwqe_t;

static xwqe_t xq[MAXX];
static unsigned nxq;
static struct { uint8_t *at; const void *src; size_t len; } bchk[MAXX]; /* bounce contents */
static unsigned nbchk;
static unsigned long n_wqe, n_ops, n_straddle, n_wrap_seg, n_dumped;
static unsigned long kinds[32];
static const char *kind_name[32];

enum { K_PUT_CONST, K_PUT_INL, K_PUT_INL2, K_PUT_BCOPY, K_PUT_ZCOPY, K_GET_BCOPY, K_GET_ZCOPY,
       K_FA64, K_CS64, K_MCS64, K_MFA64, K_MFA32, K_MCS32, K_AM_INL, K_AM_EMPTY, K_AM_DSEG,
       K_AM_ZCOPY, K_AM_ZCOPY_NOHDR, K_AM_ZCOPY_NOBODY, K_NOP, K_CREDIT, K_KEEPALIVE, K_NKINDS };

static void kind_names(void)
{
    kind_name[K_PUT_CONST] = "put8, literal length (register path)";
    kind_name[K_PUT_INL] = "put inline, 1 WQEBB";
    kind_name[K_PUT_INL2] = "put inline, 2 WQEBBs";
    kind_name[K_PUT_BCOPY] = "put bcopy (WRITE, bounce data seg)";
    kind_name[K_PUT_ZCOPY] = "put zcopy (WRITE, user data seg)";
    kind_name[K_GET_BCOPY] = "get bcopy (READ, bounce data seg)";
    kind_name[K_GET_ZCOPY] = "get zcopy (READ, user data seg)";
    kind_name[K_FA64] = "atomic FA 64";
    kind_name[K_CS64] = "atomic CS 64";
    kind_name[K_MCS64] = "masked CS 64 (2 WQEBBs)";
    kind_name[K_MFA64] = "masked FA 64";
    kind_name[K_MFA32] = "masked FA 32";
    kind_name[K_MCS32] = "masked CS 32";
    kind_name[K_AM_INL] = "AM SEND_IMM inline";
    kind_name[K_AM_EMPTY] = "AM SEND_IMM, empty body";
    kind_name[K_AM_DSEG] = "AM SEND_IMM, data seg";
    kind_name[K_AM_ZCOPY] = "am_zcopy: inline header + data seg";
    kind_name[K_AM_ZCOPY_NOHDR] = "am_zcopy: data seg only";
    kind_name[K_AM_ZCOPY_NOBODY] = "am_zcopy: inline header only";
    kind_name[K_NOP] = "flush NOP";
    kind_name[K_CREDIT] = "credit WRITE (inline)";
    kind_name[K_KEEPALIVE] = "keepalive WRITE";
}

/* Frames consumed when credits last went back: the conn keeps the low 32 bits (the difference
 * from rx_done is at most the credits). */
static uint64_t reported64(void)
{
    return C->rx_done - (uint32_t)((uint32_t)C->rx_done - C->rx_reported);
}

/* ---- building the expected WQEs ------------------------------------------------------------- */

static void m_read(model_t *m)
{
    m->pi = C->sq.pi;
    m->sig_pi = C->sq.sig_pi;
    m->fence = C->sq.fence;
    m->b_head = C->bs->head;
    nxq = 0;
    nbchk = 0;
}

/* The bounce segment hands out 64-byte-aligned pieces in order and skips to its start rather than
 * split one. */
static uint8_t *m_bounce(model_t *m, size_t len)
{
    uint64_t pos = m->b_head, off;
    len = (len + 63) & ~(size_t)63;
    off = pos % RVX_MLX5_BOUNCE_SEG;
    if (off + len > RVX_MLX5_BOUNCE_SEG) {
        pos += RVX_MLX5_BOUNCE_SEG - off;
        off = 0;
    }
    m->b_head = pos + len;
    return bounce_base + off;
}

/* A new WQE at m->pi: ctrl segment through rdma-core, fm_ce_se from the pre-post state: CE when
 * forced or when the WQE starts at or past the moderation's mark (RVX_MLX5_SIG_EVERY WQEBBs after
 * the last WQE that reached it; only such a WQE moves it), the fence bit when a READ or atomic
 * left one pending. */
static xwqe_t *x_begin(model_t *m, int kind, const char *what, unsigned opcode, unsigned opmod,
                       unsigned ds, int force, uint32_t imm)
{
    xwqe_t *x = &xq[nxq++];
    uint8_t fm = m->fence ? MLX5_WQE_CTRL_FENCE : 0;
    if (nxq > MAXX) { fprintf(stderr, "too many WQEs in one operation\n"); exit(1); }
    m->fence = 0;
    if ((int32_t)(m->pi - m->sig_pi) >= 0) {
        fm |= MLX5_WQE_CTRL_CQ_UPDATE;
        m->sig_pi = m->pi + RVX_MLX5_SIG_EVERY;
    } else if (force) {
        fm |= MLX5_WQE_CTRL_CQ_UPDATE; /* forced before the mark: the mark stays */
    }
    memset(x, 0, sizeof(*x));
    x->pi = m->pi;
    x->ds = ds;
    x->nbb = (ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
    snprintf(x->what, sizeof(x->what), "%s", what);
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)(void *)x->exp, (uint16_t)m->pi, (uint8_t)opcode,
                        (uint8_t)opmod, qpn, fm, (uint8_t)ds, 0, imm);
    memset(x->care, 1, sizeof(struct mlx5_wqe_ctrl_seg));
    m->pi += x->nbb;
    kinds[kind]++;
    return x;
}

/* After a READ or an atomic the next WQE waits for it (fence) and, by rvx's moderation rule, is
 * signaled too: the mark moves to the READ's or atomic's own start (tl/mlx5/sq.h:
 * rvx__mlx5_set_fence). */
static void m_fence(model_t *m)
{
    m->fence = MLX5_WQE_CTRL_FENCE;
    m->sig_pi = xq[nxq - 1].pi;
}

static void x_raddr(xwqe_t *x, unsigned off, uint64_t raddr, uint32_t key)
{
    struct mlx5_wqe_raddr_seg r;
    r.raddr = htobe64(raddr);
    r.rkey = htobe32(key);
    r.reserved = 0;
    memcpy(x->exp + off, &r, sizeof(r));
    memset(x->care + off, 1, sizeof(r));
}

static void x_data(xwqe_t *x, unsigned off, uint32_t len, uint32_t lkey, const void *addr)
{
    struct mlx5_wqe_data_seg d;
    mlx5dv_set_data_seg(&d, len, lkey, (uintptr_t)addr);
    memcpy(x->exp + off, &d, sizeof(d));
    memset(x->care + off, 1, sizeof(d));
}

/* Inline data segment: byte count | MLX5_INLINE_SEG, payload; ds grows by align(4+len,16)/16.
 * libmlx5 emits no segment for zero bytes. */
static unsigned inl_ds(size_t len) { return len ? (unsigned)((4 + len + 15) / 16) : 0; }

static void x_inline(xwqe_t *x, unsigned off, const void *p, size_t len)
{
    struct mlx5_wqe_inl_data_seg s;
    if (!len) return;
    s.byte_count = htobe32((uint32_t)len | MLX5_INLINE_SEG);
    memcpy(x->exp + off, &s, sizeof(s));
    memcpy(x->exp + off + 4, p, len);
    memset(x->care + off, 1, 4 + len);
}

static void x_seg(xwqe_t *x, unsigned off, const void *seg, size_t len)
{
    memcpy(x->exp + off, seg, len);
    memset(x->care + off, 1, len);
}

#define CTRL_DS  (sizeof(struct mlx5_wqe_ctrl_seg) / 16)
#define RADDR_DS (sizeof(struct mlx5_wqe_raddr_seg) / 16)
#define DATA_DS  (sizeof(struct mlx5_wqe_data_seg) / 16)

/* WRITE with inline payload */
static void x_put_inline(model_t *m, int kind, uint64_t raddr, const void *src, size_t len)
{
    char what[64];
    unsigned ds = (unsigned)(CTRL_DS + RADDR_DS) + inl_ds(len);
    xwqe_t *x;
    if (kind == K_PUT_INL && ds > 4) kind = K_PUT_INL2;
    snprintf(what, sizeof(what), "put inline %zu B", len);
    x = x_begin(m, kind, what, MLX5_OPCODE_RDMA_WRITE, 0, ds, 0, 0);
    x_raddr(x, 16, raddr, rkey);
    x_inline(x, 32, src, len);
}

/* ctrl, raddr, one data segment: WRITE or READ */
static xwqe_t *x_rdma(model_t *m, int kind, const char *what, unsigned opcode, uint64_t raddr,
                      uint32_t len, uint32_t lkey, const void *laddr, int force)
{
    xwqe_t *x = x_begin(m, kind, what, opcode, 0, (unsigned)(CTRL_DS + RADDR_DS + DATA_DS), force, 0);
    x_raddr(x, 16, raddr, rkey);
    x_data(x, 32, len, lkey, laddr);
    if (opcode == MLX5_OPCODE_RDMA_READ) m_fence(m);
    return x;
}

/* rvx_put of any length: inline up to RVX_PUT_SHORT_MAX, otherwise WRITEs of at most
 * RVX_PUT_BCOPY_MAX from the bounce ring (a short last piece goes inline). */
static void x_put(model_t *m, uint64_t raddr, const uint8_t *src, size_t len)
{
    size_t done = 0;
    if (len <= RVX_PUT_SHORT_MAX) {
        if (len) x_put_inline(m, K_PUT_INL, raddr, src, len);
        return;
    }
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        if (n <= RVX_PUT_SHORT_MAX) {
            x_put_inline(m, K_PUT_INL, raddr + done, src + done, n);
        } else {
            uint8_t *b = m_bounce(m, n);
            char what[64];
            snprintf(what, sizeof(what), "put bcopy %zu B (piece at %zu)", n, done);
            x_rdma(m, K_PUT_BCOPY, what, MLX5_OPCODE_RDMA_WRITE, raddr + done, (uint32_t)n, blkey, b, 0);
            bchk[nbchk].at = b;
            bchk[nbchk].src = src + done;
            bchk[nbchk].len = n;
            nbchk++;
        }
        done += n;
    }
}

/* rvx_get: READs of at most RVX_PUT_BCOPY_MAX into the bounce ring, the last one signaled. */
static void x_get(model_t *m, uint64_t raddr, size_t len)
{
    size_t done = 0;
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        uint8_t *b = m_bounce(m, n);
        char what[64];
        snprintf(what, sizeof(what), "get bcopy %zu B (piece at %zu)", n, done);
        x_rdma(m, K_GET_BCOPY, what, MLX5_OPCODE_RDMA_READ, raddr + done, (uint32_t)n, blkey, b,
               done + n == len);
        done += n;
    }
}

/* ---- comparing ------------------------------------------------------------------------------ */

static uint8_t *ring(uint32_t pi, size_t off)
{
    return sq + (((size_t)pi * MLX5_SEND_WQE_BB + off) & (sq_bytes - 1));
}

/* Fill the WQEBBs [from, to) with poison, so that a field rvx forgets to write shows. */
static void poison(uint32_t from, uint32_t to)
{
    uint32_t p;
    for (p = from; p != to; p++) memset(ring(p, 0), POISON, MLX5_SEND_WQE_BB);
}

static void dump(const xwqe_t *x)
{
    unsigned line, i;
    fprintf(stderr, "  WQE \"%s\" at pi %u (slot %u of %u), ds %u, %u WQEBB(s); differing lines "
            "(exp: -- = padding, 00 or %02x accepted):\n", x->what, x->pi, x->pi & (wqe_cnt - 1),
            wqe_cnt, x->ds, x->nbb, POISON);
    for (line = 0; line < x->nbb * 4; line++) {
        int bad = 0;
        for (i = 0; i < 16; i++) {
            unsigned o = line * 16 + i;
            uint8_t g = *ring(x->pi, o);
            if (x->care[o] ? g != x->exp[o] : (g != 0 && g != POISON)) bad = 1;
        }
        if (!bad) continue;
        fprintf(stderr, "    +%03u got:", line * 16);
        for (i = 0; i < 16; i++) fprintf(stderr, " %02x", *ring(x->pi, line * 16 + i));
        fprintf(stderr, "\n         exp:");
        for (i = 0; i < 16; i++) {
            unsigned o = line * 16 + i;
            if (x->care[o]) fprintf(stderr, " %02x", x->exp[o]);
            else fprintf(stderr, " --");
        }
        fprintf(stderr, "\n          at:");
        for (i = 0; i < 16; i++) {
            unsigned o = line * 16 + i;
            uint8_t g = *ring(x->pi, o);
            int b = x->care[o] ? g != x->exp[o] : (g != 0 && g != POISON);
            fprintf(stderr, " %s", b ? "^^" : "  ");
        }
        fputc('\n', stderr);
    }
}

/* Compare the expected WQEs with the ring, and the state after the post with the model. */
static void check(const model_t *m, const char *op)
{
    unsigned i, o;
    n_ops++;
    for (i = 0; i < nxq; i++) {
        const xwqe_t *x = &xq[i];
        int bad = 0;
        for (o = 0; o < x->nbb * MLX5_SEND_WQE_BB; o++) {
            uint8_t g = *ring(x->pi, o);
            if (x->care[o]) bad |= g != x->exp[o];
            else bad |= g != 0 && g != POISON;
        }
        n_wqe++;
        if ((x->pi & (wqe_cnt - 1)) + x->nbb > wqe_cnt) n_straddle++;
        if ((size_t)(x->pi & (wqe_cnt - 1)) * MLX5_SEND_WQE_BB + x->ds * 16 > sq_bytes) n_wrap_seg++;
        T_CHECK(!bad, "%s: WQE %u of %u (%s) differs from the rdma-core build", op, i + 1, nxq, x->what);
        if (bad && n_dumped++ < 12) dump(x);
    }
    T_CHECK(C->sq.pi == m->pi, "%s: rvx's producer index is %u, the model's %u (%s WQEs than expected)",
            op, C->sq.pi, m->pi, (int32_t)(C->sq.pi - m->pi) > 0 ? "more" : "fewer");
    T_CHECK(C->sq.sig_pi == m->sig_pi, "%s: moderation mark %u, expected %u", op, C->sq.sig_pi,
            m->sig_pi);
    T_CHECK(C->sq.fence == m->fence, "%s: pending fence 0x%x, expected 0x%x", op, C->sq.fence, m->fence);
    T_CHECK(C->bs->head == m->b_head, "%s: bounce ring head %llu, expected %llu", op,
            (unsigned long long)C->bs->head, (unsigned long long)m->b_head);
    T_CHECK(*(volatile uint32_t *)&dq.dbrec[MLX5_SND_DBR] == htobe32(m->pi & 0xffff),
            "%s: send doorbell record 0x%08x, expected htobe32(%u)", op,
            be32toh(dq.dbrec[MLX5_SND_DBR]), m->pi & 0xffff);
    for (i = 0; i < nbchk; i++)
        T_CHECK(!memcmp(bchk[i].at, bchk[i].src, bchk[i].len),
                "%s: bounce piece %u does not hold the source bytes", op, i);
    nxq = 0;
    nbchk = 0;
}

/* ---- the shadow of the target memory --------------------------------------------------------- */

static uint8_t *tgt, *shadow, *src, *lmem_buf, *gbuf;
static uint64_t tbase, seed = 1;
static size_t cursor;
static rvx_ep_t *ep;
static rvx_worker_t *w;
static rvx_rkey_t rk;
static rvx_mem_t *lmem;

static uint64_t next_raddr(size_t len)
{
    uint64_t a;
    if (cursor + len + 64 > PUT_AREA) cursor = 0;
    a = tbase + cursor;
    cursor += (len + 8) & ~(size_t)7;
    cursor += seed % 5; /* unaligned targets too */
    return a;
}

static void verify_target(const char *when)
{
    size_t i;
    for (i = 0; i < REGION; i++)
        if (tgt[i] != shadow[i]) break;
    T_CHECK(i == REGION, "%s: target byte %zu is 0x%02x, expected 0x%02x", when, i,
            i < REGION ? tgt[i] : 0, i < REGION ? shadow[i] : 0);
}

/* Room for nbb WQEBBs and blen bounce bytes without rvx waiting inside the call (a wait posts a
 * NOP and polls, which the model does not follow). Flushing is checked like any post. */
static void oracle_flush(const char *why);

static void room(unsigned nbb, size_t blen)
{
    /* the queue's size, not sq.room: room is the conn's grant of the worker's send budget, which
     * grows inside the call without posting or polling */
    if (C->sq.pi - C->sq.ci + nbb + 8 > C->sq.mask + 1 - RVX__RC_SQ_RESERVE - RVX__RC_GRANT ||
        C->bs->head + RVX_MLX5_BOUNCE_SEG - C->bs->lim + blen + 2 * RVX_PUT_BCOPY_MAX + 4096 > RVX_MLX5_BOUNCE_SEG)
        oracle_flush("room");
}

/* rvx_ep_flush: a signaled NOP when the newest WQE is unsignaled; nothing when it is signaled. */
static void oracle_flush(const char *why)
{
    model_t m;
    uint32_t p0;
    char op[64];
    double t0;
    m_read(&m);
    p0 = m.pi;
    if (C->sq.ci != C->sq.pi && C->tx.last_sig_pi != C->sq.pi) /* a signaled NOP covers unsignaled work */
        x_begin(&m, K_NOP, "flush NOP", MLX5_OPCODE_NOP, 0, (unsigned)CTRL_DS, 1, 0);
    poison(p0, m.pi);
    T_OK(rvx_ep_flush(ep));
    snprintf(op, sizeof(op), "rvx_ep_flush (%s)", why);
    check(&m, op);
    /* everything is complete; the last CQE may still wait in the CQ for progress to retire it */
    t0 = t_now();
    while (C->sq.ci != C->sq.pi && t_now() - t0 < 10) rvx_progress(w);
    T_CHECK(C->sq.ci == C->sq.pi, "after a flush and progress, ci %u != pi %u", C->sq.ci, C->sq.pi);
    T_CHECK(!C->failed, "the QP failed: %s", rvx_status_str(C->err));
    if (C->failed) {
        fprintf(stderr, "stopping: the QP is in error\n");
        exit(t_exit());
    }
}

/* ---- operations ----------------------------------------------------------------------------- */

static size_t opaque(size_t x)
{
    __asm__ __volatile__("" : "+r"(x));
    return x;
}

/* rvx_put with a run-time length */
static void op_put(size_t len)
{
    model_t m;
    uint64_t ra = next_raddr(len);
    uint32_t p0;
    char op[48];
    t_fill(src, len, seed++);
    room((unsigned)(len / RVX_PUT_BCOPY_MAX + 4), len + 64 * 4);
    m_read(&m);
    p0 = m.pi;
    x_put(&m, ra, src, len);
    poison(p0, m.pi);
    T_OK(rvx_put(ep, src, opaque(len), ra, &rk));
    memcpy(shadow + (ra - tbase), src, len);
    snprintf(op, sizeof(op), "rvx_put %zu B", len);
    check(&m, op);
}

/* rvx_put with a literal length (8: the path that builds the WQE in registers on x86-64) */
#define PUT_CONST(N)                                                                   \
    do {                                                                               \
        model_t m_;                                                                    \
        uint64_t ra_ = next_raddr(N);                                                  \
        uint32_t p0_;                                                                  \
        t_fill(src, N, seed++);                                                        \
        room(2, 0);                                                                    \
        m_read(&m_);                                                                   \
        p0_ = m_.pi;                                                                   \
        x_put_inline(&m_, (N) == 8 ? K_PUT_CONST : K_PUT_INL, ra_, src, N);            \
        poison(p0_, m_.pi);                                                            \
        T_OK(rvx_put(ep, src, N, ra_, &rk));                                           \
        memcpy(shadow + (ra_ - tbase), src, N);                                        \
        check(&m_, "rvx_put constant " #N " B");                                      \
    } while (0)

static void op_put8_value(uint64_t v)
{
    model_t m;
    uint64_t ra = next_raddr(8);
    uint32_t p0;
    room(2, 0);
    m_read(&m);
    p0 = m.pi;
    x_put_inline(&m, K_PUT_CONST, ra, &v, 8);
    poison(p0, m.pi);
    T_OK(rvx_put(ep, &v, 8, ra, &rk));
    memcpy(shadow + (ra - tbase), &v, 8);
    check(&m, "rvx_put(ep, &v, 8, ...)");
}

static void op_put_zcopy(size_t len, int with_req)
{
    model_t m;
    rvx_request_t req;
    rvx_status_t st;
    uint64_t ra = next_raddr(len);
    size_t loff = (size_t)(seed % 61);
    uint32_t p0;
    char op[48];
    t_fill(lmem_buf + loff, len, seed++);
    room(4, 0);
    m_read(&m);
    p0 = m.pi;
    if (len)
        x_rdma(&m, K_PUT_ZCOPY, "put zcopy", MLX5_OPCODE_RDMA_WRITE, ra, (uint32_t)len, llkey,
               lmem_buf + loff, 1);
    poison(p0, m.pi);
    rvx_request_init(&req);
    st = rvx_put_zcopy(ep, lmem_buf + loff, len, lmem, ra, &rk, with_req ? &req : NULL);
    snprintf(op, sizeof(op), "rvx_put_zcopy %zu B%s", len, with_req ? "" : " (no request)");
    check(&m, op);
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    T_CHECK(st == RVX_OK, "%s: %s", op, rvx_status_str(st));
    memcpy(shadow + (ra - tbase), lmem_buf + loff, len);
}

static void op_get(size_t len, int zcopy)
{
    model_t m;
    rvx_request_t req;
    rvx_status_t st;
    uint64_t ra = tbase + (seed * 977) % (PUT_AREA - len);
    uint8_t *dst = zcopy ? lmem_buf + 128 * 1024 + seed % 13 : gbuf + seed % 13;
    uint32_t p0;
    char op[48];
    seed++;
    room((unsigned)(len / RVX_PUT_BCOPY_MAX + 4), zcopy ? 0 : len + 64 * 4);
    memset(dst, 0x5a, len);
    m_read(&m);
    p0 = m.pi;
    if (zcopy) {
        if (len)
            x_rdma(&m, K_GET_ZCOPY, "get zcopy", MLX5_OPCODE_RDMA_READ, ra, (uint32_t)len, llkey, dst, 1);
    } else {
        x_get(&m, ra, len);
    }
    poison(p0, m.pi);
    rvx_request_init(&req);
    st = zcopy ? rvx_get_zcopy(ep, dst, len, lmem, ra, &rk, &req) : rvx_get(ep, dst, len, ra, &rk, &req);
    snprintf(op, sizeof(op), "rvx_get%s %zu B", zcopy ? "_zcopy" : "", len);
    check(&m, op);
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    T_CHECK(st == RVX_OK, "%s: %s", op, rvx_status_str(st));
    T_CHECK(!memcmp(dst, shadow + (ra - tbase), len), "%s: the data read differs from the target", op);
}

/* ---- atomics -------------------------------------------------------------------------------- */

static uint64_t amo_apply(rvx_amo_op_t op, unsigned size, uint64_t old, uint64_t v, uint64_t cmp)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, r;
    int64_t so = size == 8 ? (int64_t)old : (int64_t)(int32_t)(uint32_t)old;
    int64_t sv = size == 8 ? (int64_t)v : (int64_t)(int32_t)(uint32_t)v;
    switch (op) {
    case RVX_AMO_SET: case RVX_AMO_SWAP: r = v; break;
    case RVX_AMO_GET: r = old; break;
    case RVX_AMO_CAS: r = (old & ones) == (cmp & ones) ? v : old; break;
    case RVX_AMO_ADD: r = old + v; break;
    case RVX_AMO_SUB: r = old - v; break;
    case RVX_AMO_INC: r = old + 1; break;
    case RVX_AMO_DEC: r = old - 1; break;
    case RVX_AMO_AND: r = old & v; break;
    case RVX_AMO_OR:  r = old | v; break;
    case RVX_AMO_XOR: r = old ^ v; break;
    case RVX_AMO_MULT: r = old * v; break;
    case RVX_AMO_MIN: r = so < sv ? old : v; break;
    case RVX_AMO_MAX: r = so > sv ? old : v; break;
    case RVX_AMO_UMIN: r = (old & ones) < (v & ones) ? old : v; break;
    default: r = (old & ones) > (v & ones) ? old : v; break; /* UMAX */
    }
    return r & ones;
}

static const char *amo_name(rvx_amo_op_t op)
{
    static const char *n[] = { "SET", "GET", "SWAP", "CAS", "ADD", "SUB", "INC", "DEC", "AND", "OR",
                               "XOR", "MULT", "MIN", "MAX", "UMIN", "UMAX" };
    return (unsigned)op < sizeof(n) / sizeof(n[0]) ? n[op] : "?";
}

/* One atomic WQE: ctrl, raddr, the operation's segment(s), a data segment for the old value in an
 * 8-byte bounce slot. */
static void x_amo1(model_t *m, int kind, const char *what, unsigned opcode, unsigned opmod,
                   uint64_t raddr, const void *seg, unsigned seglen, unsigned size, int force)
{
    uint8_t *b = m_bounce(m, 8);
    unsigned ds = (unsigned)(CTRL_DS + RADDR_DS + seglen / 16 + DATA_DS);
    xwqe_t *x = x_begin(m, kind, what, opcode, opmod, ds, force, 0);
    x_raddr(x, 16, raddr, rkey);
    x_seg(x, 32, seg, seglen);
    x_data(x, 32 + seglen, size, blkey, b);
    m_fence(m);
}

/* The expected WQE of op, from the facts: 64-bit ADD (SUB, INC, DEC, GET) is a native FA and CAS a
 * native CS; SET, SWAP, AND, OR are a masked CS (swap under swap_mask, nothing compared); XOR a
 * masked FA with a field boundary at every bit; 32-bit adds a masked FA without boundaries and
 * 32-bit CAS a masked CS comparing all bits. Masked opmod = 0x08 | (log2(size) - 2). */
static void x_amo(model_t *m, rvx_amo_op_t op, unsigned size, uint64_t v, uint64_t cmp,
                  uint64_t raddr, int force)
{
    uint64_t ones = size == 8 ? ~0ull : 0xffffffffull, add = 0;
    unsigned opmod = size == 8 ? 0x09 : 0x08;
    int is_add = 1;
    char what[64];
    snprintf(what, sizeof(what), "atomic%u %s", size * 8, amo_name(op));
    switch (op) {
    case RVX_AMO_ADD: add = v; break;
    case RVX_AMO_SUB: add = 0 - v; break;
    case RVX_AMO_INC: add = 1; break;
    case RVX_AMO_DEC: add = ones; break;
    case RVX_AMO_GET: add = 0; break;
    default: is_add = 0; break;
    }
    add &= ones;
    if (is_add && size == 8) {
        struct mlx5_wqe_atomic_seg a;
        a.swap_add = htobe64(add);
        a.compare = 0;
        x_amo1(m, K_FA64, what, MLX5_OPCODE_ATOMIC_FA, 0, raddr, &a, sizeof(a), 8, force);
    } else if (is_add) {
        struct t_mfa32 f;
        memset(&f, 0, sizeof(f));
        f.add = htobe32((uint32_t)add);
        f.field_boundary = 0;
        x_amo1(m, K_MFA32, what, MLX5_OPCODE_ATOMIC_MASKED_FA, opmod, raddr, &f, sizeof(f), 4, force);
    } else if (op == RVX_AMO_CAS && size == 8) {
        struct mlx5_wqe_atomic_seg a;
        a.swap_add = htobe64(v);
        a.compare = htobe64(cmp);
        x_amo1(m, K_CS64, what, MLX5_OPCODE_ATOMIC_CS, 0, raddr, &a, sizeof(a), 8, force);
    } else if (op == RVX_AMO_XOR) {
        if (size == 8) {
            struct t_mfa64 f;
            f.add = htobe64(v);
            f.field_boundary = htobe64(ones);
            x_amo1(m, K_MFA64, what, MLX5_OPCODE_ATOMIC_MASKED_FA, opmod, raddr, &f, sizeof(f), 8, force);
        } else {
            struct t_mfa32 f;
            memset(&f, 0, sizeof(f));
            f.add = htobe32((uint32_t)v);
            f.field_boundary = htobe32(0xffffffffu);
            x_amo1(m, K_MFA32, what, MLX5_OPCODE_ATOMIC_MASKED_FA, opmod, raddr, &f, sizeof(f), 4, force);
        }
    } else {
        uint64_t swap, compare = 0, smask, cmask = 0;
        if (op == RVX_AMO_CAS) { swap = v; compare = cmp; smask = ones; cmask = ones; }
        else if (op == RVX_AMO_AND) { swap = 0; smask = ~v & ones; }
        else if (op == RVX_AMO_OR) { swap = v; smask = v; }
        else { swap = v; smask = ones; } /* SET, SWAP */
        if (size == 8) {
            struct t_mcs64 s;
            s.swap = htobe64(swap);
            s.compare = htobe64(compare);
            s.swap_mask = htobe64(smask);
            s.compare_mask = htobe64(cmask);
            x_amo1(m, K_MCS64, what, MLX5_OPCODE_ATOMIC_MASKED_CS, opmod, raddr, &s, sizeof(s), 8, force);
        } else {
            struct t_mcs32 s;
            s.swap = htobe32((uint32_t)swap);
            s.compare = htobe32((uint32_t)compare);
            s.swap_mask = htobe32((uint32_t)smask);
            s.compare_mask = htobe32((uint32_t)cmask);
            x_amo1(m, K_MCS32, what, MLX5_OPCODE_ATOMIC_MASKED_CS, opmod, raddr, &s, sizeof(s), 4, force);
        }
    }
}

static uint64_t amo_value(unsigned size)
{
    uint64_t v = 0;
    unsigned i;
    for (i = 0; i < 8; i++) v = v << 8 | t_byte(seed, i);
    seed++;
    return size == 8 ? v : v & 0xffffffffull;
}

/* mode 0: no fetch; 1: fetch with a request; 2: fetch without a request (the call waits) */
static void op_amo(rvx_amo_op_t op, unsigned size, int mode, int cmp_hits)
{
    model_t m;
    rvx_request_t req;
    rvx_status_t st;
    uint64_t raddr = tbase + (size == 8 ? AMO64_OFF : AMO32_OFF);
    uint8_t *sh = shadow + (raddr - tbase);
    uint64_t old = 0, v = amo_value(size), cmp, f64 = 0xdeadbeefdeadbeefull, now;
    uint32_t f32 = 0xdeadbeefu, p0;
    int loop = op >= RVX_AMO_MULT;
    char opname[64];
    memcpy(&old, sh, size);
    cmp = cmp_hits ? old : old ^ 0x10;
    room(8, 64 * 4);
    m_read(&m);
    p0 = m.pi;
    if (loop) { /* read with a fetch-add of 0, then compare-and-swap with the computed value */
        x_amo(&m, RVX_AMO_GET, size, 0, 0, raddr, 1);
        x_amo(&m, RVX_AMO_CAS, size, amo_apply(op, size, old, v, 0), old, raddr, 1);
    } else {
        x_amo(&m, op, size, v, cmp, raddr, mode != 0);
    }
    poison(p0, m.pi);
    rvx_request_init(&req);
    if (size == 8)
        st = rvx_atomic64(ep, op, v, cmp, raddr, &rk, mode ? &f64 : NULL, mode == 1 ? &req : NULL);
    else
        st = rvx_atomic32(ep, op, (uint32_t)v, (uint32_t)cmp, raddr, &rk, mode ? &f32 : NULL,
                          mode == 1 ? &req : NULL);
    snprintf(opname, sizeof(opname), "rvx_atomic%u %s (%s)", size * 8, amo_name(op),
             mode == 0 ? "no fetch" : mode == 1 ? "fetch, request" : "fetch, waits");
    check(&m, opname);
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    T_CHECK(st == RVX_OK, "%s: %s", opname, rvx_status_str(st));
    now = amo_apply(op, size, old, v, cmp);
    memcpy(sh, &now, size);
    if (mode) {
        uint64_t got = size == 8 ? f64 : f32;
        T_CHECK(got == old, "%s: fetched 0x%llx, the old value was 0x%llx", opname,
                (unsigned long long)got, (unsigned long long)old);
    }
    if (mode) { /* completed: the target holds the new value already */
        uint64_t t = 0;
        memcpy(&t, tgt + (raddr - tbase), size);
        T_CHECK(t == now, "%s: target 0x%llx, expected 0x%llx", opname, (unsigned long long)t,
                (unsigned long long)now);
    }
}

/* ---- active messages ------------------------------------------------------------------------ */

#define AM_INLINE_MAX (MLX5_SEND_WQE_BB - 16 - 4) /* ctrl + inline header + body in one WQEBB */
#define NAM 256
static struct { unsigned nargs; size_t plen; uint64_t seed; } am_sent[NAM];
static unsigned am_nsent, am_got, am_bad;

static void on_oracle(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    unsigned k = am_got++, i;
    (void)t;
    if (k >= am_nsent || nargs != am_sent[k].nargs || len != am_sent[k].plen) {
        am_bad++;
        return;
    }
    for (i = 0; i < nargs; i++)
        if (args[i] != am_sent[k].seed * 100 + i) am_bad++;
    if (len && t_verify(p, len, am_sent[k].seed) >= 0) am_bad++;
}

/* The next message's arguments and payload (from the running seed), noted for the handler. */
static void am_expect(uint64_t *args, unsigned nargs, uint8_t *pay, size_t plen)
{
    unsigned i;
    am_sent[am_nsent].nargs = nargs;
    am_sent[am_nsent].plen = plen;
    am_sent[am_nsent].seed = seed;
    for (i = 0; i < nargs; i++) args[i] = seed * 100 + i;
    t_fill(pay, plen, seed);
    seed++;
}

/* medium < 0: rvx_am_short */
static void op_am(unsigned nargs, long medium)
{
    model_t m;
    uint64_t args[RVX_AM_MAX_ARGS];
    uint8_t body[8 * RVX_AM_MAX_ARGS + 4096];
    size_t plen = medium < 0 ? 0 : (size_t)medium, len = 8 * (size_t)nargs + plen;
    unsigned kind = medium < 0 ? 1 : 2;
    uint32_t imm, p0;
    char op[64];
    am_expect(args, nargs, src, plen);
    memcpy(body, args, 8 * (size_t)nargs);
    memcpy(body + 8 * nargs, src, plen);
    /* immediate: the frame's info word (id | kind << 8 | nargs << 10) | channel << 16, big-endian */
    imm = htobe32((uint32_t)(RVX_AM_ORACLE | kind << 8 | nargs << 10) | 0u << 16);
    room(4, len + 64 * 4);
    m_read(&m);
    p0 = m.pi;
    if (len <= AM_INLINE_MAX) {
        xwqe_t *x = x_begin(&m, len ? K_AM_INL : K_AM_EMPTY, "AM inline", MLX5_OPCODE_SEND_IMM, 0,
                            (unsigned)CTRL_DS + inl_ds(len), 0, imm);
        x_inline(x, 16, body, len);
    } else {
        uint8_t *b = m_bounce(&m, len);
        xwqe_t *x = x_begin(&m, K_AM_DSEG, "AM data seg", MLX5_OPCODE_SEND_IMM, 0,
                            (unsigned)(CTRL_DS + DATA_DS), 0, imm);
        x_data(x, 16, (uint32_t)len, blkey, b);
        bchk[nbchk].at = b;
        bchk[nbchk].src = body;
        bchk[nbchk].len = len;
        nbchk++;
    }
    poison(p0, m.pi);
    if (medium < 0) T_OK(rvx_am_short(ep, RVX_AM_ORACLE, args, nargs));
    else T_OK(rvx_am_medium(ep, RVX_AM_ORACLE, args, nargs, src, plen));
    am_nsent++;
    snprintf(op, sizeof(op), "rvx_am_%s %u args %zu B", medium < 0 ? "short" : "medium", nargs, plen);
    check(&m, op);
}

/* rvx__tl_am_zcopy: the arguments as the inline header, the payload as a data segment on the
 * registered local region (no copy: nothing in the bounce ring), always signaled; the message is
 * the same medium AM as rvx_am_medium would send, so the handler checks it. */
static rvx_request_t zreq[NAM]; /* completed by am_deliver's progress */
static unsigned nzreq;

static void op_am_zcopy(unsigned nargs, size_t plen)
{
    model_t m;
    uint64_t args[4];
    size_t loff = 192 * 1024 + 4096 * (size_t)nzreq + (size_t)(seed % 29); /* in use until sent */
    uint8_t *pay = lmem_buf + loff;
    unsigned ds;
    uint32_t imm, p0;
    rvx_request_t *req = &zreq[nzreq++];
    rvx_status_t st;
    xwqe_t *x;
    char op[64];
    am_expect(args, nargs, pay, plen);
    imm = htobe32((uint32_t)(RVX_AM_ORACLE | 2u << 8 | nargs << 10) | 0u << 16);
    room(4, 0);
    m_read(&m);
    p0 = m.pi;
    ds = (unsigned)CTRL_DS + inl_ds(8 * nargs) + (plen ? (unsigned)DATA_DS : 0);
    x = x_begin(&m, !nargs ? K_AM_ZCOPY_NOHDR : !plen ? K_AM_ZCOPY_NOBODY : K_AM_ZCOPY, "am_zcopy",
                MLX5_OPCODE_SEND_IMM, 0, ds, 1, imm);
    x_inline(x, 16, args, 8 * nargs);
    if (plen) x_data(x, 16 + 16 * inl_ds(8 * nargs), (uint32_t)plen, llkey, pay);
    poison(p0, m.pi);
    rvx_request_init(req);
    st = rvx__tl_am_zcopy(&ep->tl[0], RVX__CHAN_REQUEST, args, 8 * nargs, pay, plen, &lmem->tl[0],
                          RVX_AM_ORACLE | 2u << 8 | nargs << 10, req);
    am_nsent++;
    snprintf(op, sizeof(op), "rvx__tl_am_zcopy %u args %zu B", nargs, plen);
    check(&m, op);
    T_CHECK(st == RVX_INPROGRESS, "%s: %s (a signaled zero-copy send completes later)", op, rvx_status_str(st));
    if (st != RVX_INPROGRESS) req->status = st;
}

/* Deliver what was sent (to ourselves); the receiver hands credits back every quarter of the
 * receive queue with an inline 8-byte WRITE of the consumed count into the sender's control
 * region: those WQEs are checked too. */
static void am_deliver(void)
{
    model_t m;
    uint64_t done, reported;
    uint32_t p0;
    double t0 = t_now();
    m_read(&m);
    p0 = m.pi;
    done = C->rx_done;
    reported = reported64();
    {
        static uint64_t vals[MAXX];
        unsigned k, n = am_nsent - am_got, nv = 0;
        for (k = 0; k < n; k++) {
            done++;
            if (done - reported >= rq_quarter) {
                xwqe_t *x = x_begin(&m, K_CREDIT, "credit WRITE", MLX5_OPCODE_RDMA_WRITE, 0,
                                    (unsigned)(CTRL_DS + RADDR_DS) + inl_ds(8), 0, 0);
                vals[nv] = done + w->iface[0].credits; /* frames the sender may have sent in all */
                x_raddr(x, 16, ctrl_addr, ctrl_rkey);
                x_inline(x, 32, &vals[nv], 8);
                nv++;
                reported = done;
            }
        }
        poison(p0, m.pi);
        while (am_got < am_nsent && t_now() - t0 < 20) rvx_progress(w);
        T_CHECK(am_got == am_nsent, "%u of %u active messages arrived", am_got, am_nsent);
        check(&m, "credit return during rvx_progress");
        T_CHECK(reported64() == reported, "credits reported %llu, expected %llu",
                (unsigned long long)reported64(), (unsigned long long)reported);
    }
    T_CHECK(am_bad == 0, "%u active messages arrived with wrong arguments or payload", am_bad);
    {
        unsigned k;
        for (k = 0; k < nzreq; k++) {
            while (zreq[k].status == RVX_INPROGRESS && t_now() - t0 < 20) rvx_progress(w);
            T_CHECK(zreq[k].status == RVX_OK, "zero-copy send %u: %s", k, rvx_status_str((rvx_status_t)zreq[k].status));
        }
        nzreq = 0;
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_mem_t *tmem;
    t_remote_t *rm;
    struct mlx5dv_obj obj;
    size_t len;
    unsigned i, lap;
    int me;

    t_spawn(argc, argv, 1, 180);
    kind_names();
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, REGION, &tmem));
    T_OK(rvx_mem_alloc(ctx, LREGION, &lmem));
    rm = t_exchange(ctx, tmem);
    T_OK(rvx_ep_create(w, me, &ep));
    T_OK(rvx_rkey_unpack(ep, rm[me].packed, &rk));
    if (t_failures) return t_exit();
    tgt = (uint8_t *)rvx_mem_addr(tmem);
    tbase = (uint64_t)(uintptr_t)tgt;
    lmem_buf = (uint8_t *)rvx_mem_addr(lmem);
    shadow = (uint8_t *)calloc(REGION, 1);
    src = (uint8_t *)malloc(REGION);
    gbuf = (uint8_t *)malloc(REGION);

    /* what rdma-core says about the QP and the keys */
    C = ep->tl[0].c;
    memset(&obj, 0, sizeof(obj));
    memset(&dq, 0, sizeof(dq));
    obj.qp.in = C->qp;
    obj.qp.out = &dq;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP)) {
        fprintf(stderr, "FAIL: mlx5dv_init_obj(QP)\n");
        return 1;
    }
    sq = (uint8_t *)dq.sq.buf;
    wqe_cnt = dq.sq.wqe_cnt;
    sq_bytes = (size_t)wqe_cnt * dq.sq.stride;
    qpn = C->qp->qp_num;
    rkey = tmem->tl[0].mr->rkey;
    llkey = lmem->tl[0].mr->lkey;
    /* the conn's bounce segment, taken from the worker's pool now (it keeps it: the only conn
     * that copies) */
    T_CHECK(C->bs != &w->iface[0].bnone || rvx__rc_bounce_take(&w->iface[0], C), "no bounce segment");
    blkey = C->bs->lkey;
    bounce_base = C->bs->buf;
    ctrl_addr = (uint64_t)(uintptr_t)w->iface[0].ctrl_mr->addr + 8 * (uint64_t)me;
    ctrl_rkey = w->iface[0].ctrl_mr->rkey;
    rq_quarter = w->iface[0].credit_q; /* credits go back every quarter of the peer's share */
    T_CHECK(dq.sq.stride == MLX5_SEND_WQE_BB && (wqe_cnt & (wqe_cnt - 1)) == 0, "SQ geometry");
    T_CHECK(C->sq.buf == sq && C->sq.mask == wqe_cnt - 1, "rvx's view of the SQ differs from mlx5dv's");
    printf("QP 0x%x: %u WQEBBs, signal every %d, rq %u, inline %d, bcopy %d\n", qpn, wqe_cnt,
           RVX_MLX5_SIG_EVERY, dq.rq.wqe_cnt, RVX_PUT_SHORT_MAX, RVX_PUT_BCOPY_MAX);
    memcpy(shadow, tgt, REGION);

    /* puts: 0 (no WQE) and every inline length with a run-time length */
    op_put(0);
    for (len = 1; len <= RVX_PUT_SHORT_MAX; len++) op_put(len);
    /* constant lengths: the path that builds the WQE in registers */
    PUT_CONST(1); PUT_CONST(2); PUT_CONST(3); PUT_CONST(4); PUT_CONST(5); PUT_CONST(6);
    PUT_CONST(7); PUT_CONST(8); PUT_CONST(9); PUT_CONST(10); PUT_CONST(11); PUT_CONST(12);
    PUT_CONST(13); PUT_CONST(16); PUT_CONST(28); PUT_CONST(44); PUT_CONST(60);
    op_put8_value(0x0123456789abcdefull);
    /* bcopy sizes, pieces, a short last piece inline */
    {
        static const size_t bc[] = { 61, 64, 100, 255, 1000, 4095, 4096,
                                     RVX_PUT_BCOPY_MAX - 1, RVX_PUT_BCOPY_MAX, RVX_PUT_BCOPY_MAX + 1,
                                     RVX_PUT_BCOPY_MAX + 60, RVX_PUT_BCOPY_MAX + 61,
                                     2 * RVX_PUT_BCOPY_MAX + 7, 65536 };
        for (i = 0; i < sizeof(bc) / sizeof(bc[0]); i++) op_put(bc[i]);
    }
    oracle_flush("puts");
    verify_target("after the puts");

    /* zcopy puts, gets */
    op_put_zcopy(0, 1);
    op_put_zcopy(1, 1);
    op_put_zcopy(8, 1);
    op_put_zcopy(100, 1);
    op_put_zcopy(4096, 0);
    op_put_zcopy(65536, 1);
    {
        static const size_t gl[] = { 1, 7, 8, 60, 61, 100, 4096, RVX_PUT_BCOPY_MAX,
                                     RVX_PUT_BCOPY_MAX + 1, 3 * RVX_PUT_BCOPY_MAX + 5 };
        for (i = 0; i < sizeof(gl) / sizeof(gl[0]); i++) op_get(gl[i], 0);
        op_get(0, 1);
        for (i = 0; i < sizeof(gl) / sizeof(gl[0]); i++) op_get(gl[i], 1);
    }
    /* a put right after a READ carries the fence */
    op_get(8, 0);
    op_put(24);
    PUT_CONST(8);
    oracle_flush("zcopy and gets");
    verify_target("after zcopy and gets");

    /* atomics: every op, both sizes, with and without fetch; CAS hitting and missing */
    {
        static const rvx_amo_op_t ops[] = { RVX_AMO_SET, RVX_AMO_GET, RVX_AMO_SWAP, RVX_AMO_CAS,
                                            RVX_AMO_ADD, RVX_AMO_SUB, RVX_AMO_INC, RVX_AMO_DEC,
                                            RVX_AMO_AND, RVX_AMO_OR, RVX_AMO_XOR, RVX_AMO_MULT,
                                            RVX_AMO_MIN, RVX_AMO_MAX, RVX_AMO_UMIN, RVX_AMO_UMAX };
        unsigned size, k, mode;
        for (size = 4; size <= 8; size += 4)
            for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
                for (mode = 0; mode < 3; mode++) {
                    if (ops[k] == RVX_AMO_GET && mode == 0) {
                        uint32_t p0 = C->sq.pi;
                        T_STATUS(size == 8 ? rvx_atomic64(ep, RVX_AMO_GET, 0, 0, tbase + AMO64_OFF, &rk, NULL, NULL)
                                           : rvx_atomic32(ep, RVX_AMO_GET, 0, 0, tbase + AMO32_OFF, &rk, NULL, NULL),
                                 RVX_ERR_INVALID_PARAM);
                        T_CHECK(C->sq.pi == p0, "GET without a fetch pointer posted a WQE");
                        continue;
                    }
                    if (ops[k] >= RVX_AMO_MULT && mode != 2) continue; /* CAS loop: 2 WQEs */
                    op_amo(ops[k], size, mode, 1);
                    if (ops[k] == RVX_AMO_CAS) op_amo(ops[k], size, mode, 0);
                }
        /* a put right after an atomic carries the fence */
        op_amo(RVX_AMO_ADD, 8, 0, 1);
        PUT_CONST(8);
    }
    oracle_flush("atomics");
    verify_target("after the atomics");

    /* the send queue wraps: fill to its last WQEBB, then a 2-WQEBB WQE straddles the end (an
     * inline put whose payload splits, or a masked CS whose data segment starts at the SQ) */
    for (lap = 0; lap < LAPS; lap++) {
        unsigned long before = n_straddle;
        uint32_t p;
        for (;;) {
            room(16, 80000); /* the fillers below then never flush (which would move pi) */
            if (((p = C->sq.pi) & (wqe_cnt - 1)) == wqe_cnt - 1) break;
            if (p % 3 == 0) PUT_CONST(8);
            else if (p % 3 == 1) op_put(1 + p % 28);
            else if (p % 97 == 2) op_amo(RVX_AMO_ADD, 8, 0, 1);
            else op_put(1 + (p * 7) % 12);
        }
        if (lap % 3 == 2) op_amo(lap % 2 ? RVX_AMO_SWAP : RVX_AMO_OR, 8, lap % 2 ? 1 : 0, 1);
        else op_put(45 + (lap * 5) % 16);
        T_CHECK(n_straddle == before + 1, "lap %u: no WQE straddled the end of the SQ", lap);
        if (lap == 1) oracle_flush("wrap");
    }
    oracle_flush("wrap laps");
    verify_target("after the laps");

    /* active messages to ourselves: inline (empty, short, medium) and from the bounce ring */
    for (lap = 0; lap < 4; lap++) {
        for (i = 0; i <= 5; i++) op_am(i, -1);
        op_am(0, 0);
        op_am(0, 1);
        op_am(1, 36);
        op_am(2, 28);
        op_am(5, 4);
        op_am(0, 44);
        op_am(0, 45);
        op_am(3, 100 + lap);
        op_am(8, 3000);
        op_am_zcopy(0, 1);
        op_am_zcopy(1, 100 + lap);
        op_am_zcopy(3, 2048);
        op_am_zcopy(2, RVX_AM_MAX_MEDIUM - 16);
        op_am_zcopy(3, 0);
        op_am_zcopy(0, RVX_AM_MAX_MEDIUM);
        am_deliver();
        oracle_flush("active messages");
    }
    {
        uint64_t credit;
        memcpy(&credit, (const void *)(uintptr_t)ctrl_addr, 8);
        T_CHECK(credit == reported64() + w->iface[0].credits,
                "the credit word holds %llu; %llu consumed were reported, with %u credits",
                (unsigned long long)credit, (unsigned long long)reported64(), w->iface[0].credits);
    }

    /* keepalive: an idle endpoint's status check writes zero bytes to the peer's control region */
    {
        model_t m;
        struct timespec ts = { 0, 150 * 1000 * 1000 };
        uint32_t p0;
        nanosleep(&ts, NULL);
        m_read(&m);
        p0 = m.pi;
        {
            xwqe_t *x = x_begin(&m, K_KEEPALIVE, "keepalive", MLX5_OPCODE_RDMA_WRITE, 0,
                                (unsigned)(CTRL_DS + RADDR_DS), 1, 0);
            x_raddr(x, 16, ctrl_addr, ctrl_rkey);
        }
        poison(p0, m.pi);
        T_OK(rvx_ep_status(ep));
        check(&m, "keepalive (rvx_ep_status on an idle endpoint)");
        oracle_flush("keepalive");
    }

    verify_target("at the end");
    T_CHECK(!C->failed && C->err == RVX_OK, "the QP is in error: %s", rvx_status_str(C->err));
    T_CHECK(n_straddle >= LAPS, "%lu WQEs straddled the end of the SQ", n_straddle);
    printf("%lu WQEs compared in %lu operations (%lu straddling the SQ end, %lu with a segment "
           "after the wrap)\n", n_wqe, n_ops, n_straddle, n_wrap_seg);
    for (i = 0; i < K_NKINDS; i++) {
        printf("  %-40s %6lu\n", kind_name[i], kinds[i]);
        T_CHECK(kinds[i] > 0, "no WQE of kind '%s' was compared", kind_name[i]);
    }

    rvx_rkey_release(&rk);
    rvx_ep_destroy(ep);
    rvx_mem_dereg(lmem);
    rvx_mem_dereg(tmem);
    free(rm);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    free(shadow);
    free(src);
    free(gbuf);
    return t_exit();
}
