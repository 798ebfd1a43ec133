/*
 * t_faults: each fault yields what the hardware gives (an error CQE with the
 * facts-sheet syndrome, later WQEs flushed, or a failed verb with EINVAL) and
 * one stderr line starting with "rvxsim: ". Each case runs in its own process
 * with stderr captured.
 *
 *   ./t_faults            run every case
 *   ./t_faults NAME...    run the named cases
 */
#include "simtest.h"
#include <poll.h>

static struct st_pair P;
static struct st_mr L, R;
static int before;      /* "rvxsim: " lines captured before the fault was caused */
static int strict;      /* RVXSIM_STRICT=1: stale reserved bytes are faults (else ignored) */

#define S_LEN    MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR
#define S_QPOP   MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR
#define S_PROT   MLX5_CQE_SYNDROME_LOCAL_PROT_ERR
#define S_FLUSH  MLX5_CQE_SYNDROME_WR_FLUSH_ERR
#define S_RACC   MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR
#define S_RINV   MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR

/* First byte of the target region: a refused WRITE must leave it zero. */
#define R0 (((uint8_t *)R.buf)[0])

/* Child setup: capture stderr first so the model's lines land in the capture. */
static void setup(void)
{
	struct st_qp_attr a = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 2,
				.max_recv_sge = 2, .max_inline = 64 };
	st_capture_begin();
	st_pair_open_ex(&P, &a, 64, 7);
	st_mr_alloc(&P.d, &L, 65536, ST_ACCESS_ALL);
	st_mr_alloc(&P.d, &R, 65536, ST_ACCESS_ALL);
}

static int finish(void)
{
	if (st_failures)
		st_capture_dump("failed case");
	/* Tear down without insisting: the QP is in ERR on purpose. */
	return st_failures ? 1 : 0;
}

/* A healthy WQE works first, so a failure below is about the fault. */
static void sanity(void)
{
	struct mlx5_cqe64 c;
	uint16_t idx = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);

	REQUIRE(st_cq_poll(P.a.scq, &c, 3000));
	REQUIRE(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == idx);
}

/* Counts the lines so far: only lines after this one name the fault. Cases that
 * set up more (regions, receives) arm after that, so it cannot count. */
static void arm(void)
{
	before = st_capture_count();
}

/* The usual start of a case: the pair, one healthy WQE, armed. */
static void start(void)
{
	setup();
	sanity();
	arm();
}

/* ... with one more region, registered with just these rights before arming. */
static void start_with(struct st_mr *m, int access)
{
	setup();
	sanity();
	st_mr_alloc(&P.d, m, 4096, access);
	arm();
}

static int synd_in(uint8_t s, const uint8_t *set, int n)
{
	int i;
	for (i = 0; i < n; i++)
		if (set[i] == s)
			return 1;
	return 0;
}

/* Expects an error CQE for WQE idx (idx < 0: do not check the counter). */
#define EXPECT_ERR(q, idx, ...) do {                                               \
	static const uint8_t _set[] = { __VA_ARGS__ };                                \
	expect_err(__LINE__, (q), (idx), _set, (int)sizeof(_set));                    \
} while (0)

static void expect_err(int line, struct st_qp *q, long idx, const uint8_t *set, int n)
{
	struct mlx5_cqe64 c;
	struct mlx5_err_cqe *e = (struct mlx5_err_cqe *)&c;
	char s[200];

	if (!st_cq_poll(q->scq, &c, 3000)) {
		st_fail_at(__FILE__, line, "no error CQE within 3 s");
		return;
	}
	if (st_cqe_opcode(&c) != MLX5_CQE_REQ_ERR) {
		st_fail_at(__FILE__, line, "want REQ_ERR CQE, got %s", st_cqe_str(&c, s, sizeof(s)));
		return;
	}
	if (!synd_in(e->syndrome, set, n))
		st_fail_at(__FILE__, line, "syndrome 0x%02x, expected 0x%02x%s", e->syndrome, set[0],
			   n > 1 ? " (or an alternative)" : "");
	if ((be32toh(e->s_wqe_opcode_qpn) & 0xffffff) != q->qpn)
		st_fail_at(__FILE__, line, "error CQE QPN 0x%x, expected 0x%x",
			   be32toh(e->s_wqe_opcode_qpn) & 0xffffff, q->qpn);
	if (idx >= 0 && be16toh(e->wqe_counter) != (uint16_t)idx)
		st_fail_at(__FILE__, line, "error CQE wqe_counter %u, expected %ld",
			   be16toh(e->wqe_counter), idx);
}

/* A new "rvxsim: " line since arm() names the fault (the doorbell-record check may
 * take the model's grace period, about a second). A failed verb prints it before
 * returning. */
#define EXPECT_LINE() expect_line(__LINE__, 2500)
#define EXPECT_VERB_LINE() expect_line(__LINE__, 100)

static void expect_line(int line, unsigned ms)
{
	int n;

	if (!st_capture_wait(before, ms)) {
		st_fail_at(__FILE__, line, "no stderr line starting 'rvxsim: '");
		return;
	}
	st_sleep_ms(30);
	n = st_capture_count() - before;
	if (n != 1)
		st_note("note: %s:%d: %d 'rvxsim: ' lines for one fault", __FILE__, line, n);
}

/* The fault on P.a: its error CQE (one of the syndromes) and its stderr line. */
#define EXPECT_FAULT(idx, ...) do {                                                 \
	EXPECT_ERR(&P.a, (idx), __VA_ARGS__);                                        \
	EXPECT_LINE();                                                               \
} while (0)

/* Posts the staged WQE on P.a (ctrl filled in as libmlx5 would) and expects the fault. */
#define POST_FAULT_EX(w, opcode, fm_ce_se, mode, ...) do {                           \
	long _idx = st_post(&P.a, (w), (opcode), 0, (fm_ce_se), 0, (mode));          \
	EXPECT_FAULT(_idx, __VA_ARGS__);                                             \
} while (0)
/* ... signaled, rung with the 8-byte doorbell (most cases). */
#define POST_FAULT(w, opcode, ...) \
	POST_FAULT_EX((w), (opcode), MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB, __VA_ARGS__)

/* A verb that must refuse with EINVAL and say why. */
#define EXPECT_EINVAL(call) do {                                                    \
	arm();                                                                       \
	CHECK_EQ((call), EINVAL);                                                    \
	EXPECT_VERB_LINE();                                                          \
} while (0)

/* After an error the QP is in ERR: a new WQE completes with WR_FLUSH_ERR. */
static void expect_flushed(struct st_qp *q)
{
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	uint16_t idx = st_post_nop(q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);

	EXPECT_ERR(q, idx, S_FLUSH);
	memset(&at, 0, sizeof(at));
	if (CHECK(ibv_query_qp(q->qp, &at, IBV_QP_STATE, &ia) == 0))
		CHECK_EQ(at.qp_state, IBV_QPS_ERR);
}

/* The responder's side of a refused RDMA or atomic request (IBA responder class C): its QP goes
 * to ERR and, since the request took no receive WQE whose CQE could say so, its owner gets the
 * affiliated event naming that QP; its own next WQE flushes. */
static void expect_responder_failed(enum ibv_event_type t)
{
	st_expect_qp_event(P.d.ctx, t, P.b.qp, 3000);
	expect_flushed(&P.b);
}

/* ... and so do the receives posted on P.a, in order (check_qpn: and name the QP). */
static void expect_rq_flushed(int n, int check_qpn)
{
	struct mlx5_cqe64 c;
	char b[200];
	int k;

	for (k = 0; k < n; k++) {
		if (!CHECKF(st_cq_poll(P.a.rcq, &c, 3000), "receive %d not flushed", k))
			break;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_RESP_ERR && st_cqe_syndrome(&c) == S_FLUSH,
		       "receive %d: %s, expected RESP_ERR WR_FLUSH_ERR", k, st_cqe_str(&c, b, sizeof(b)));
		if (check_qpn)
			CHECK_EQ(be32toh(((struct mlx5_err_cqe *)&c)->s_wqe_opcode_qpn) & 0xffffff, P.a.qpn);
	}
}

/* Starts staging a WQE whose first segment is a remote address. */
static void stage_to(struct st_wqe *w, uintptr_t raddr, uint32_t rkey)
{
	st_wqe_begin(w);
	st_wqe_raddr(w, raddr, rkey);
}

/* A WQE aimed at the start of R with an inline payload ... */
static void stage_R_inline(struct st_wqe *w, const void *p, uint32_t len)
{
	stage_to(w, (uintptr_t)R.buf, R.mr->rkey);
	st_wqe_inline(w, p, len);
}

/* ... or with one gather entry. */
static void stage_R_data(struct st_wqe *w, uint32_t len, uint32_t lkey, const void *addr)
{
	stage_to(w, (uintptr_t)R.buf, R.mr->rkey);
	st_wqe_data(w, len, lkey, addr);
}

/* An RDMA WRITE of 8 inline bytes to R, staged (not yet written to the SQ). */
static void stage_write8(struct st_wqe *w, uint64_t off)
{
	static const uint8_t v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	stage_to(w, (uintptr_t)R.buf + off, R.mr->rkey);
	st_wqe_inline(w, v, 8);
}

/* Writes w to P.a as it is (nbb WQEBBs, ctrl left alone) and rings the doorbell. */
static void ring_raw(const struct st_wqe *w, unsigned nbb)
{
	st_wqe_write_raw(&P.a, w, nbb);
	st_ring(&P.a, ST_RING_DB);
}

/* The same under a hand-made ctrl: a signaled RDMA WRITE that claims WQE index idx,
 * QP qpn and ds segments, whatever the truth is. */
static void post_raw(struct st_wqe *w, uint16_t idx, uint32_t qpn, uint8_t ds, unsigned nbb)
{
	struct mlx5_wqe_ctrl_seg *c = (struct mlx5_wqe_ctrl_seg *)w->b;
	mlx5dv_set_ctrl_seg(c, idx, MLX5_OPCODE_RDMA_WRITE, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	c->dci_stream_channel_id = 0;
	ring_raw(w, nbb);
}

/* A signaled 8-byte WRITE written into the SQ, not yet announced in any way. */
static void write_unrung(void)
{
	struct st_wqe w;
	stage_write8(&w, 0);
	st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
}

/* The doorbell libmlx5 writes: the first 8 bytes of the last ctrl written. */
static uint64_t last_ctrl8(void)
{
	uint64_t v;
	memcpy(&v, st_sq_slot(&P.a, P.a.last_ctrl_idx), 8);
	return v;
}

/* start() with a region in a second protection domain, on OTHER, made before arming. */
static uint8_t OTHER[4096] __attribute__((aligned(4096)));

static struct ibv_mr *start_other_pd(void)
{
	struct ibv_pd *pd2;
	struct ibv_mr *mr2;

	setup();
	sanity();
	pd2 = ibv_alloc_pd(P.d.ctx);
	REQUIRE(pd2 != NULL);
	mr2 = ibv_reg_mr(pd2, OTHER, sizeof(OTHER), ST_ACCESS_ALL);
	REQUIRE(mr2 != NULL);
	arm();
	return mr2;
}

/* start() with a region registered and deregistered again before arming: its keys
 * (returned) are stale, its buffer is still ours to free. */
static void start_stale(struct st_mr *x, uint32_t *lkey, uint32_t *rkey)
{
	setup();
	sanity();
	st_mr_alloc(&P.d, x, 4096, ST_ACCESS_ALL);
	*lkey = x->mr->lkey;
	*rkey = x->mr->rkey;
	CHECK(ibv_dereg_mr(x->mr) == 0);
	x->mr = NULL;
	arm();
}

/* RTS attributes as the helpers use them, starting at send PSN sq_psn. */
static void rts_attr(struct ibv_qp_attr *at, uint32_t sq_psn)
{
	memset(at, 0, sizeof(*at));
	at->qp_state = IBV_QPS_RTS;
	at->timeout = 14;
	at->retry_cnt = 7;
	at->rnr_retry = 7;
	at->sq_psn = sq_psn;
	at->max_rd_atomic = 1;
}

/* ---------------------------------------------------------------- cases */

/* A signaled 8-byte WRITE to R under a ctrl that lies: WQE index pi + skew, QP qpn,
 * ds segments (< 0: the true count; more than staged: zero padding follows).
 * Expects LOCAL_QP_OP_ERR (for this WQE when its index is true) and the line. */
static void post_bad_ctrl(int skew, uint32_t qpn, int ds)
{
	struct st_wqe w;
	uint16_t idx = (uint16_t)P.a.pi;

	stage_write8(&w, 0);
	if (ds < 0)
		ds = (int)(w.len / 16);
	if ((unsigned)ds * 16 > w.len)
		w.len = (unsigned)ds * 16;     /* the rest of the staged bytes are zero */
	post_raw(&w, (uint16_t)(idx + skew), qpn, (uint8_t)ds, (w.len + 63) / 64);
	EXPECT_FAULT(skew ? -1 : idx, S_QPOP);
}

static int c_wqe_index(void)
{
	start();
	post_bad_ctrl(5, P.a.qpn, -1);
	CHECK(R0 == 0);
	return finish();
}

static int c_qpn(void)
{
	start();
	post_bad_ctrl(0, P.b.qpn, -1);
	CHECK(R0 == 0);
	return finish();
}

static int c_ds_zero(void)
{
	start();
	post_bad_ctrl(0, P.a.qpn, 0);
	expect_flushed(&P.a);
	return finish();
}

static int c_ds_too_large(void)
{
	start();
	/* max WQE of this QP: align(192 + align(4+64,16), 64) = 320 bytes = 20 DS */
	post_bad_ctrl(0, P.a.qpn, 40);
	return finish();
}

static int c_inline_beyond_ds(void)
{
	struct st_wqe w;
	uint8_t src[64];

	start();
	memset(src, 0x42, sizeof(src));
	stage_R_inline(&w, src, 12);
	/* byte_count claims 60 bytes while DS covers only 12 */
	((struct mlx5_wqe_inl_data_seg *)(w.b + 32))->byte_count = htobe32(60 | MLX5_INLINE_SEG);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_QPOP, S_LEN);
	return finish();
}

static int c_inline_bit_missing(void)
{
	struct st_wqe w;
	uint8_t src[12] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8 };

	start();
	stage_R_inline(&w, src, 12);
	((struct mlx5_wqe_inl_data_seg *)(w.b + 32))->byte_count = htobe32(12);
	/* read as a data segment with lkey 0xdeadbeef */
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_PROT, S_QPOP);
	CHECK(R0 == 0);
	return finish();
}

static int c_unknown_opcode(void)
{
	struct st_wqe w;

	start();
	stage_write8(&w, 0);
	POST_FAULT(&w, 0x07, S_QPOP);
	expect_flushed(&P.a);
	return finish();
}

static int c_bad_lkey(void)
{
	struct st_wqe w;

	start();
	stage_R_data(&w, 64, L.mr->lkey ^ 0x5500, L.buf);
	/* unsignaled: an error completes anyway */
	POST_FAULT_EX(&w, MLX5_OPCODE_RDMA_WRITE, 0, ST_RING_DB, S_PROT);
	CHECK(R0 == 0);
	expect_flushed(&P.a);
	return finish();
}

static int c_outside_mr(void)
{
	struct st_wqe w;

	start();
	memset(L.buf, 0x11, L.len);
	stage_R_data(&w, 64, L.mr->lkey, (uint8_t *)L.buf + L.len - 32);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_PROT);
	CHECK(R0 == 0);
	return finish();
}

static int c_dbrec_no_doorbell(void)
{
	start();
	write_unrung();
	st_sq_dbrec(&P.a, P.a.pi);   /* record moves; no doorbell, no BlueFlame */
	EXPECT_LINE();
	return finish();
}

static int c_bf_differs(void)
{
	volatile uint64_t *dst;
	uint64_t chunk[8];
	int k;

	start();
	write_unrung();
	st_sq_dbrec(&P.a, P.a.pi);
	memcpy(chunk, st_sq_slot(&P.a, P.a.last_ctrl_idx), 64);
	((uint8_t *)chunk)[36] ^= 0xff;           /* one payload byte differs */
	dst = st_bf_ptr(&P.a);
	st_wc_flush();
	for (k = 0; k < 8; k++)
		dst[k] = chunk[k];
	st_wc_flush();
	st_bf_toggle(&P.a);
	EXPECT_LINE();
	return finish();
}

static int c_db_value(void)
{
	start();
	write_unrung();
	st_sq_dbrec(&P.a, P.a.pi);
	/* WQE index bits differ from the ctrl in memory */
	st_db_write(&P.a, last_ctrl8() ^ 0x0000000000030000ull);
	EXPECT_LINE();
	return finish();
}

static int c_dbrec_backwards(void)
{
	setup();
	sanity();
	sanity();
	arm();
	/* counter goes back by one WQEBB, with a doorbell naming the last ctrl */
	st_sq_dbrec(&P.a, P.a.pi - 1);
	st_db_write(&P.a, last_ctrl8());
	EXPECT_LINE();
	return finish();
}

static int c_dbrec_past_ring(void)
{
	start();
	write_unrung();
	/* claims more WQEBBs than the ring holds */
	st_sq_dbrec(&P.a, P.a.pi + P.a.dv.sq.wqe_cnt + 1);
	st_db_write(&P.a, last_ctrl8());
	EXPECT_LINE();
	return finish();
}

static int stale_common(int which)
{
	struct st_wqe w;
	uint16_t idx;

	start();
	stage_write8(&w, 0);
	idx = (uint16_t)P.a.pi;
	st_wqe_ctrl(&w, idx, MLX5_OPCODE_RDMA_WRITE, 0, P.a.qpn, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	if (which == 8)
		w.b[8] = 0x5a;                /* signature, not enabled on this QP */
	else if (which == 9)
		w.b[9] = 0x01;                /* dci_stream_channel_id */
	else if (which == 10)
		w.b[10] = 0x80;
	else
		((struct mlx5_wqe_raddr_seg *)(w.b + 16))->reserved = htobe32(0xdead);
	ring_raw(&w, 1);
	if (strict) {
		EXPECT_FAULT(idx, S_QPOP);
		CHECK(R0 == 0);
	} else {
		/* as on hardware the WQE runs; the model says once that it saw stale bytes */
		struct mlx5_cqe64 c;
		REQUIRE(st_cq_poll(P.a.scq, &c, 3000));
		CHECK(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == idx);
		CHECK(R0 == 1);
		CHECKF(st_capture_wait(before, 1000), "no warning line for stale reserved bytes");
		/* a second stale WQE runs too, without a second line */
		stage_write8(&w, 8);
		idx = (uint16_t)P.a.pi;
		st_wqe_ctrl(&w, idx, MLX5_OPCODE_RDMA_WRITE, 0, P.a.qpn, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		w.b[8] = 0x5a;
		((struct mlx5_wqe_raddr_seg *)(w.b + 16))->reserved = htobe32(0xbeef);
		ring_raw(&w, 1);
		REQUIRE(st_cq_poll(P.a.scq, &c, 3000));
		CHECK(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == idx);
		CHECK(((uint8_t *)R.buf)[8] == 1);
		st_sleep_ms(30);
		CHECK_EQ(st_capture_count() - before, 1);
	}
	return finish();
}

static int c_stale_ctrl8(void) { return stale_common(8); }
static int c_stale_ctrl9(void) { return stale_common(9); }
static int c_stale_ctrl10(void) { return stale_common(10); }
static int c_stale_raddr(void) { return stale_common(12); }

static int c_rkey(void)
{
	struct st_wqe w;
	int i, clean = 1;

	start();
	memset(R.buf, 0x33, 4096);
	stage_write8(&w, 128);
	((struct mlx5_wqe_raddr_seg *)(w.b + 16))->rkey = htobe32(R.mr->rkey ^ 0x7700);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_RACC);
	for (i = 0; i < 4096; i++)
		clean &= ((uint8_t *)R.buf)[i] == 0x33;
	CHECKF(clean, "target memory was touched");
	expect_flushed(&P.a);
	expect_responder_failed(IBV_EVENT_QP_ACCESS_ERR);
	return finish();
}

static int c_raddr_bounds(void)
{
	struct st_wqe w;

	setup();
	sanity();
	/* 8 bytes ending exactly at the end of the region are fine */
	{
		struct mlx5_cqe64 c;
		stage_write8(&w, R.len - 8);
		st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		if (CHECK(st_cq_poll(P.a.scq, &c, 3000)))
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "a WRITE ending at the region end failed");
		CHECK_EQ(((uint8_t *)R.buf)[R.len - 1], 8);
		memset((uint8_t *)R.buf + R.len - 8, 0, 8);
	}
	arm();
	/* 8 bytes starting 4 bytes before the end of the region */
	stage_write8(&w, R.len - 4);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_RACC);
	CHECK(((uint8_t *)R.buf)[R.len - 4] == 0);
	expect_responder_failed(IBV_EVENT_QP_ACCESS_ERR);
	return finish();
}

static int c_remote_perm(void)
{
	struct st_mr ro;
	struct st_wqe w;

	/* registered for remote read only: an atomic must fail */
	start_with(&ro, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	stage_to(&w, (uintptr_t)ro.buf, ro.mr->rkey);
	st_wqe_atomic(&w, 5, 0);
	st_wqe_data(&w, 8, L.mr->lkey, L.buf);
	POST_FAULT(&w, MLX5_OPCODE_ATOMIC_FA, S_RACC);
	CHECK_EQ(*(uint64_t *)ro.buf, 0);
	expect_responder_failed(IBV_EVENT_QP_ACCESS_ERR);
	return finish();
}

static int c_remote_write_ro(void)
{
	struct st_mr ro;
	struct st_wqe w;

	/* no REMOTE_WRITE: an RDMA WRITE must fail and leave the memory alone */
	start_with(&ro, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	stage_to(&w, (uintptr_t)ro.buf, ro.mr->rkey);
	st_wqe_inline(&w, "forbidden", 9);
	POST_FAULT_EX(&w, MLX5_OPCODE_RDMA_WRITE, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_BF, S_RACC);
	CHECK(((uint8_t *)ro.buf)[0] == 0);
	expect_responder_failed(IBV_EVENT_QP_ACCESS_ERR);
	return finish();
}

static int c_remote_read_noperm(void)
{
	struct st_mr wo;
	struct st_wqe w;

	/* no REMOTE_READ */
	start_with(&wo, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memset(wo.buf, 0x77, 64);
	memset(L.buf, 0, 64);
	stage_to(&w, (uintptr_t)wo.buf, wo.mr->rkey);
	st_wqe_data(&w, 64, L.mr->lkey, L.buf);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_READ, S_RACC);
	CHECK(((uint8_t *)L.buf)[0] == 0);
	expect_responder_failed(IBV_EVENT_QP_ACCESS_ERR);
	return finish();
}

/* A SEND longer than the posted receive: the responder completes the receive with
 * LOCAL_LENGTH_ERR and the requester gets REMOTE_INVAL_REQ_ERR. */
static int c_recv_too_small(void)
{
	struct st_wqe w;
	struct mlx5_cqe64 c;
	uint16_t idx;
	char b[200];

	setup();
	sanity();
	memset(R.buf, 0, 256);
	st_post_recv1(&P.b, R.buf, 16, R.mr->lkey);
	arm();
	memset(L.buf, 0x5c, 100);
	st_wqe_begin(&w);
	st_wqe_data(&w, 100, L.mr->lkey, L.buf);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	EXPECT_ERR(&P.a, idx, S_RINV);
	if (CHECKF(st_cq_poll(P.b.rcq, &c, 3000), "no responder CQE")) {
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_RESP_ERR &&
		       st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR,
		       "responder: %s, expected RESP_ERR with LOCAL_LENGTH_ERR", st_cqe_str(&c, b, sizeof(b)));
		CHECK_EQ(be32toh(((struct mlx5_err_cqe *)&c)->s_wqe_opcode_qpn) & 0xffffff, P.b.qpn);
	}
	CHECK(st_capture_wait(before, 2500));
	/* nothing beyond the receive buffer was written */
	CHECK(((uint8_t *)R.buf)[16] == 0);
	expect_flushed(&P.b); /* class A: the receive's CQE says it, no event */
	return finish();
}

/* Atomics need an 8-byte aligned remote address: Invalid Request at the responder. */
static int c_atomic_misaligned(void)
{
	struct st_wqe w;

	start();
	stage_to(&w, (uintptr_t)R.buf + 4, R.mr->rkey);
	st_wqe_atomic(&w, 1, 0);
	st_wqe_data(&w, 8, L.mr->lkey, L.buf);
	POST_FAULT(&w, MLX5_OPCODE_ATOMIC_FA, S_RINV, S_RACC);
	CHECK_EQ(((uint64_t *)R.buf)[0], 0);
	CHECK_EQ(((uint64_t *)R.buf)[1], 0);
	expect_responder_failed(IBV_EVENT_QP_REQ_ERR);
	return finish();
}

/* A READ into memory registered without LOCAL_WRITE. */
static int c_local_write_perm(void)
{
	struct st_mr ro;
	struct st_wqe w;

	start_with(&ro, IBV_ACCESS_REMOTE_READ);
	memset(R.buf, 0x61, 64);
	stage_R_data(&w, 64, ro.mr->lkey, ro.buf);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_READ, S_PROT, MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR);
	CHECK(((uint8_t *)ro.buf)[0] == 0);
	return finish();
}

/* Keys of a memory region in another protection domain are not valid on this QP. */
static int c_pd_mismatch_local(void)
{
	struct ibv_mr *mr2;
	struct st_wqe w;

	mr2 = start_other_pd();
	stage_R_data(&w, 64, mr2->lkey, OTHER);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_PROT);
	CHECK(R0 == 0);
	return finish();
}

static int c_pd_mismatch_remote(void)
{
	struct ibv_mr *mr2;
	struct st_wqe w;

	mr2 = start_other_pd();
	stage_to(&w, (uintptr_t)OTHER, mr2->rkey);
	st_wqe_inline(&w, "other pd", 8);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_RACC);
	CHECK(OTHER[0] == 0);
	return finish();
}

/* An lkey after ibv_dereg_mr is no longer valid. */
static int c_dereg_then_use(void)
{
	struct st_mr x;
	struct st_wqe w;
	uint32_t lkey, rkey;

	start_stale(&x, &lkey, &rkey);
	stage_R_data(&w, 64, lkey, x.buf);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_PROT);
	CHECK(R0 == 0);
	free(x.buf);
	return finish();
}

/* The peer deregistered the region: its old rkey is refused. */
static int c_remote_dereg(void)
{
	struct st_mr x;
	struct st_wqe w;
	uint32_t lkey, rkey;

	start_stale(&x, &lkey, &rkey);
	stage_to(&w, (uintptr_t)x.buf, rkey);
	st_wqe_inline(&w, "stale", 6);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_RACC);
	CHECK(((uint8_t *)x.buf)[0] == 0);
	free(x.buf);
	return finish();
}

/* A QP in ERR flushes its receive queue too: each posted receive completes with
 * WR_FLUSH_ERR on the receive CQ, in order. */
static int c_err_flushes_rq(void)
{
	struct st_wqe w;
	int k;

	setup();
	sanity();
	for (k = 0; k < 3; k++)
		st_post_recv1(&P.a, (uint8_t *)L.buf + 1024 * k, 64, L.mr->lkey);
	arm();
	stage_R_data(&w, 64, 0xbad00, L.buf);
	POST_FAULT(&w, MLX5_OPCODE_RDMA_WRITE, S_PROT);
	expect_rq_flushed(3, 1);
	return finish();
}

/* Moving a QP to ERR with ibv_modify_qp flushes both queues. */
static int c_modify_to_err(void)
{
	struct ibv_qp_attr at;
	struct st_wqe w;
	uint16_t i1;

	setup();
	sanity();
	st_post_recv1(&P.a, L.buf, 64, L.mr->lkey);
	st_post_recv1(&P.a, (uint8_t *)L.buf + 64, 64, L.mr->lkey);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_ERR;
	CHECK_EQ(ibv_modify_qp(P.a.qp, &at, IBV_QP_STATE), 0);
	expect_rq_flushed(2, 0);
	stage_write8(&w, 0);
	i1 = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, 0, 0, ST_RING_DB);
	EXPECT_ERR(&P.a, i1, S_FLUSH);
	CHECK(R0 == 0);
	return finish();
}

/* The requester starts at a PSN the responder does not expect: nothing is accepted,
 * the transport retries run out (TRANSPORT_RETRY_EXC_ERR), nothing is written. */
static int c_psn_mismatch(void)
{
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 32 };
	struct st_cq c1, c2;
	struct st_qp qa, qb;
	struct st_addr aa, ba;
	struct ibv_qp_attr at;
	struct st_wqe w;
	uint16_t idx;

	setenv("RVXSIM_RETRY_TIMEOUT_MS", "500", 0);
	setup();
	st_qp_create_two(&P.d, &qa, &c1, &qb, &c2, 16, &a);
	st_addr_of(&P.d, &qa, &aa);
	st_addr_of(&P.d, &qb, &ba);
	st_qp_connect(&P.d, &qb, &aa);                 /* expects PSN 0 */
	CHECK_EQ(st_qp_to_init(&P.d, &qa), 0);
	CHECK_EQ(st_qp_to_rtr(&P.d, &qa, &ba), 0);
	rts_attr(&at, 5000);                           /* far ahead */
	CHECK_EQ(ibv_modify_qp(qa.qp, &at, ST_RTS_MASK), 0);
	arm();
	stage_R_inline(&w, "psn", 4);
	idx = st_post(&qa, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	{
		struct mlx5_cqe64 c;
		char b[200];
		if (CHECKF(st_cq_poll(&c1, &c, 9000), "no CQE within 9 s")) {
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ_ERR &&
			       st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
			       "%s, expected TRANSPORT_RETRY_EXC_ERR", st_cqe_str(&c, b, sizeof(b)));
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		}
	}
	EXPECT_LINE();
	CHECK(R0 == 0);
	return finish();
}

/* Objects in use cannot be destroyed: EBUSY, and the object still works. */
static int c_busy_destroy(void)
{
	struct st_srq s;
	struct st_cq sc;
	struct st_qp sq;
	struct st_qp_attr a = { .max_send_wr = 8, .max_recv_wr = 0, .max_send_sge = 1,
				.max_recv_sge = 1 };
	int rc;

	setup();
	sanity();
	rc = ibv_destroy_cq(P.acq.cq);
	CHECKF(rc == EBUSY, "ibv_destroy_cq of a CQ in use returned %d", rc);
	rc = ibv_dealloc_pd(P.d.pd);
	CHECKF(rc == EBUSY, "ibv_dealloc_pd of a PD in use returned %d", rc);
	st_srq_create(&P.d, &s, 8, 1);
	st_cq_create(&P.d, &sc, 8);
	a.srq = s.srq;
	st_qp_create(&P.d, &sq, &sc, &sc, &a);
	rc = ibv_destroy_srq(s.srq);
	CHECKF(rc == EBUSY, "ibv_destroy_srq of an SRQ in use returned %d", rc);
	sanity();          /* still works */
	st_qp_destroy(&sq);
	CHECK(ibv_destroy_srq(s.srq) == 0);
	st_cq_destroy(&sc);
	return finish();
}

static int c_cq_overrun(void)
{
	struct st_dev *d;
	struct st_cq small;
	struct st_qp q;
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 1, .max_send_sge = 1,
				.max_recv_sge = 1 };
	struct st_addr me;
	uint32_t i;

	setup();
	d = &P.d;
	st_cq_create(d, &small, 3);
	REQUIRE(small.dv.cqe_cnt == 4);
	st_qp_create(d, &q, &small, &small, &a);
	/* loop this QP to itself */
	st_addr_of(d, &q, &me);
	st_qp_connect(d, &q, &me);
	arm();
	for (i = 0; i < 6; i++) {
		st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		st_sleep_ms(20);
	}
	EXPECT_LINE();
	/* The four CQEs written before the overrun are still intact. */
	for (i = 0; i < 4; i++) {
		struct mlx5_cqe64 *c = st_cqe_at(&small, i);
		CHECKF((c->op_own >> 4) == MLX5_CQE_REQ && (c->op_own & 1) == 0 &&
		       be16toh(c->wqe_counter) == i,
		       "CQE %u overwritten or missing (op_own 0x%02x, wqe_counter %u)", i, c->op_own,
		       be16toh(c->wqe_counter));
	}
	/* ... and the overrun is reported as an asynchronous CQ error */
	{
		struct pollfd pfd = { d->ctx->async_fd, POLLIN, 0 };
		struct ibv_async_event ev;
		if (CHECKF(poll(&pfd, 1, 2000) == 1, "no asynchronous event for the overrun")) {
			if (CHECK(ibv_get_async_event(d->ctx, &ev) == 0)) {
				CHECKF(ev.event_type == IBV_EVENT_CQ_ERR, "async event %d (%s), expected CQ_ERR",
				       ev.event_type, ibv_event_type_str(ev.event_type));
				if (ev.event_type == IBV_EVENT_CQ_ERR)
					CHECK(ev.element.cq == small.cq);
				ibv_ack_async_event(&ev);
			}
		}
	}
	return finish();
}

/* ---- verbs-level faults */

static int query_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	memset(&at, 0, sizeof(at));
	if (ibv_query_qp(qp, &at, IBV_QP_STATE, &ia))
		return -1;
	return at.qp_state;
}

/* A new QP in RESET on P's CQs, and its own address to loop it to itself. */
static void fresh_qp(struct st_qp *q, struct st_addr *me)
{
	struct st_qp_attr a = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 };

	setup();
	st_qp_create(&P.d, q, &P.acq, &P.arcq, &a);
	st_addr_of(&P.d, q, me);
}

static int c_modify_mask(void)
{
	struct st_dev *d = &P.d;
	struct st_qp q;
	struct ibv_qp_attr at;
	struct st_addr me;

	fresh_qp(&q, &me);

	/* RESET->INIT without PORT */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS));
	CHECK_EQ(query_state(q.qp), IBV_QPS_RESET);

	/* RESET->INIT with an attribute not allowed there (DEST_QPN) */
	at.dest_qp_num = me.qpn;
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, ST_INIT_MASK | IBV_QP_DEST_QPN));
	CHECK_EQ(query_state(q.qp), IBV_QPS_RESET);

	CHECK_EQ(st_qp_to_init(d, &q), 0);

	/* INIT->RTR without DEST_QPN */
	st_rtr_attr(d, &me, &at);
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, ST_RTR_MASK & ~IBV_QP_DEST_QPN));
	CHECK_EQ(query_state(q.qp), IBV_QPS_INIT);

	/* INIT->RTR without AV */
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, ST_RTR_MASK & ~IBV_QP_AV));

	CHECK_EQ(st_qp_to_rtr(d, &q, &me), 0);

	/* RTR->RTS without SQ_PSN, then with an RTR-only attribute (RQ_PSN) */
	rts_attr(&at, 0);
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, ST_RTS_MASK & ~IBV_QP_SQ_PSN));
	CHECK_EQ(query_state(q.qp), IBV_QPS_RTR);
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, ST_RTS_MASK | IBV_QP_RQ_PSN));

	CHECK_EQ(st_qp_to_rts(&q, 7, 7, 14), 0);
	CHECK_EQ(query_state(q.qp), IBV_QPS_RTS);
	st_qp_destroy(&q);
	return finish();
}

static int c_transition(void)
{
	struct st_dev *d = &P.d;
	struct st_qp q;
	struct ibv_qp_attr at;
	struct st_addr me;

	fresh_qp(&q, &me);

	/* RESET->RTR (skipping INIT), with the full RTR mask */
	EXPECT_EINVAL(st_qp_to_rtr(d, &q, &me));
	CHECK_EQ(query_state(q.qp), IBV_QPS_RESET);

	/* RESET->RTS */
	EXPECT_EINVAL(st_qp_to_rts(&q, 7, 7, 14));

	CHECK_EQ(st_qp_to_init(d, &q), 0);

	/* INIT->RTS (skipping RTR) */
	EXPECT_EINVAL(st_qp_to_rts(&q, 7, 7, 14));
	CHECK_EQ(query_state(q.qp), IBV_QPS_INIT);

	CHECK_EQ(st_qp_to_rtr(d, &q, &me), 0);
	CHECK_EQ(st_qp_to_rts(&q, 7, 7, 14), 0);
	{
		/* one NOP so the send record is nonzero before the RESET below */
		struct mlx5_cqe64 c;
		uint16_t idx = st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		if (CHECK(st_cq_poll(&P.acq, &c, 3000)))
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		CHECK_EQ(be32toh(q.dv.dbrec[1]), 1);
	}

	/* RTS->INIT is not a transition */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	EXPECT_EINVAL(ibv_modify_qp(q.qp, &at, ST_INIT_MASK));
	CHECK_EQ(query_state(q.qp), IBV_QPS_RTS);

	/* Any state -> ERR and -> RESET are allowed; RESET zeroes the doorbell record. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_ERR;
	CHECK_EQ(ibv_modify_qp(q.qp, &at, IBV_QP_STATE), 0);
	CHECK_EQ(query_state(q.qp), IBV_QPS_ERR);
	at.qp_state = IBV_QPS_RESET;
	CHECK_EQ(ibv_modify_qp(q.qp, &at, IBV_QP_STATE), 0);
	CHECK_EQ(query_state(q.qp), IBV_QPS_RESET);
	CHECK_EQ(q.dv.dbrec[0], 0);
	CHECK_EQ(q.dv.dbrec[1], 0);
	st_qp_destroy(&q);
	return finish();
}

/* ---------------------------------------------------------------- driver */

struct fcase {
	const char *name;
	int (*fn)(void);
};

static const struct fcase cases[] = {
	{ "wqe_index", c_wqe_index },
	{ "qpn", c_qpn },
	{ "ds_zero", c_ds_zero },
	{ "ds_too_large", c_ds_too_large },
	{ "inline_beyond_ds", c_inline_beyond_ds },
	{ "inline_bit_missing", c_inline_bit_missing },
	{ "unknown_opcode", c_unknown_opcode },
	{ "bad_lkey", c_bad_lkey },
	{ "outside_mr", c_outside_mr },
	{ "dbrec_no_doorbell", c_dbrec_no_doorbell },
	{ "bf_differs", c_bf_differs },
	{ "db_value", c_db_value },
	{ "dbrec_backwards", c_dbrec_backwards },
	{ "dbrec_past_ring", c_dbrec_past_ring },
	{ "stale_ctrl_signature", c_stale_ctrl8 },
	{ "stale_ctrl_byte9", c_stale_ctrl9 },
	{ "stale_ctrl_byte10", c_stale_ctrl10 },
	{ "stale_raddr_reserved", c_stale_raddr },
	{ "rkey", c_rkey },
	{ "raddr_bounds", c_raddr_bounds },
	{ "remote_perm", c_remote_perm },
	{ "remote_write_ro", c_remote_write_ro },
	{ "remote_read_noperm", c_remote_read_noperm },
	{ "recv_too_small", c_recv_too_small },
	{ "atomic_misaligned", c_atomic_misaligned },
	{ "local_write_perm", c_local_write_perm },
	{ "pd_mismatch_local", c_pd_mismatch_local },
	{ "pd_mismatch_remote", c_pd_mismatch_remote },
	{ "dereg_then_use", c_dereg_then_use },
	{ "remote_dereg", c_remote_dereg },
	{ "err_flushes_rq", c_err_flushes_rq },
	{ "modify_to_err", c_modify_to_err },
	{ "psn_mismatch", c_psn_mismatch },
	{ "busy_destroy", c_busy_destroy },
	{ "cq_overrun", c_cq_overrun },
	{ "modify_mask", c_modify_mask },
	{ "transition", c_transition },
};

static int run_case(void *arg)
{
	const struct fcase *c = arg;
	char ctx[64];
	snprintf(ctx, sizeof(ctx), "%s", c->name);
	st_ctx = ctx;
	return c->fn();
}

int main(int argc, char **argv)
{
	unsigned i, ran = 0, skipped = 0;
	int j;

	/* each case has its own 10 s watchdog; this one only bounds the whole run */
	st_init("t_faults", (unsigned)(sizeof(cases) / sizeof(cases[0])) * 13 + 30);
	/* only list devices here: children open them after fork */
	st_require_device();
	strict = getenv("RVXSIM_STRICT") && atoi(getenv("RVXSIM_STRICT"));
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc, want = argc < 2;
		for (j = 1; j < argc; j++)
			want |= !strcmp(argv[j], cases[i].name);
		if (!want)
			continue;
		rc = st_run_child(run_case, (void *)&cases[i], 10);
		ran++;
		if (rc == 77) {
			skipped++;
			continue;
		}
		if (rc != 0)
			st_fail_at(__FILE__, __LINE__, "case %s failed (exit %d%s)", cases[i].name, rc,
				   rc == -1 ? ", timed out" : "");
	}
	if (ran && skipped == ran)
		st_skip(ST_SKIP_NODEV);
	if (!strict && argc < 2) {
		/* the stale-byte cases once more as a lint: RVXSIM_STRICT=1 makes them faults */
		char *args[] = { argv[0], (char *)"stale_ctrl_signature", (char *)"stale_ctrl_byte9",
				 (char *)"stale_ctrl_byte10", (char *)"stale_raddr_reserved", NULL };
		pid_t pid;
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			setenv("RVXSIM_STRICT", "1", 1);
			execv("/proc/self/exe", args);
			_exit(127);
		}
		int rc = st_wait_pid(pid, 60000);
		if (rc != 0)
			st_fail_at(__FILE__, __LINE__, "stale-byte cases under RVXSIM_STRICT=1 failed (exit %d)",
				   rc);
	}
	st_exit();
	return 0;
}
