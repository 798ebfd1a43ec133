/*
 * t_dc_errors: faults through DC give what hardware gives, plus one "rvxsim: " line.
 * - wrong access key and wrong DCT number: nothing is written, the DCI's WQE ends with
 *   TRANSPORT_RETRY_EXC_ERR within the transport timer, later WQEs flush with WR_FLUSH_ERR;
 * - remote bounds, unknown rkey, DCT access flags: REMOTE_ACCESS_ERR, nothing written;
 * - a malformed WQE (address segment cut off by DS, DS beyond the WQE size the DCI was
 *   sized for): LOCAL_QP_OP_ERR;
 * - SRQ empty: RNR with rnr_retry 7 waits for a receive; rnr_retry 0 ends in
 *   RNR_RETRY_EXC_ERR; a SEND longer than the receive WQE: REMOTE_INVAL_REQ_ERR at the DCI,
 *   LOCAL_LENGTH_ERR at the DCT, which keeps serving;
 * - after each error the DCI is in ERR and recovers through RESET -> INIT -> RTR -> RTS; the
 *   DCT and another DCI keep working throughout;
 * - a DCI quiet for longer than the DCT keeps its state still reaches the DCT;
 * - the model's fault injection through DC: RVXSIM_FORCE_RNR, RVXSIM_RDMA_DENY and
 *   RVXSIM_DELAY_US (re-runs itself).
 * Sets RVXSIM_RETRY_TIMEOUT_MS=500 unless already set.
 */
#include "t_dc_common.h"

static struct st_dev D;
static struct st_cq ICQ, TCQ;
static struct st_srq SRQ;
static struct ibv_qp *DCT, *DCT_RO;
static struct dc_target T, T_RO;
static struct st_qp Q, Q2;
static struct st_mr L, R;

static uint8_t poll_status(struct st_qp *q, uint8_t *opcode, unsigned ms)
{
	struct mlx5_cqe64 c;

	for (;;) {
		if (!ST_POLL(&ICQ, &c, ms))
			return 0xff;
		if ((be32toh(c.sop_drop_qpn) & 0xffffff) != q->qpn) {
			CHECKF(0, "CQE of qp 0x%x while waiting for qp 0x%x",
			       be32toh(c.sop_drop_qpn) & 0xffffff, q->qpn);
			continue;
		}
		*opcode = st_cqe_opcode(&c);
		return *opcode == MLX5_CQE_REQ ? 0 : st_cqe_syndrome(&c);
	}
}

static void expect_ok(struct st_qp *q)
{
	uint8_t op = 0, s = poll_status(q, &op, 5000);
	CHECKF(s == 0 && op == MLX5_CQE_REQ, "expected success, got opcode %u syndrome 0x%x", op, s);
}

static void expect_err(struct st_qp *q, uint8_t synd, unsigned ms)
{
	uint8_t op = 0, s = poll_status(q, &op, ms);
	CHECKF(op == MLX5_CQE_REQ_ERR && s == synd, "expected REQ_ERR syndrome 0x%x, got opcode %u "
	       "syndrome 0x%x", synd, op, s);
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

static void recover(struct st_qp *q)
{
	struct ibv_qp_attr at;

	CHECK_EQ(qp_state(q->qp), IBV_QPS_ERR);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RESET;
	CHECK(ibv_modify_qp(q->qp, &at, IBV_QP_STATE) == 0);
	CHECK(dc_dci_ready(&D, q, 7, 7, 14) == 0);
	CHECK_EQ(qp_state(q->qp), IBV_QPS_RTS);
}

/* A write from the other DCI lands: the DCT serves on whatever happened to the first one. */
static void other_dci_works(uint32_t off)
{
	uint8_t *l = L.buf, *r = R.buf;

	memcpy(l + off, "still-here", 10);
	memset(r + off, 0, 10);
	dc_post_write(&Q2, &D, &T, 0, (uintptr_t)r + off, R.mr->rkey, l + off, 10, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_ok(&Q2);
	CHECK(!memcmp(r + off, "still-here", 10));
}

static void t_wrong_key(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct dc_target bad = T;
	int lines = st_capture_count();
	uint64_t t0;

	st_ctx = "wrong access key";
	bad.key ^= 0x10;
	memcpy(l, "secret", 6);
	memset(r, 0, 64);
	t0 = st_now_ns();
	dc_post_write(&Q, &D, &bad, 0, (uintptr_t)r, R.mr->rkey, l, 6, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	dc_post_write(&Q, &D, &T, 0, (uintptr_t)r + 8, R.mr->rkey, l, 6, L.mr->lkey, 0);
	expect_err(&Q, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, 5000);
	CHECKF(st_now_ns() - t0 < 4000000000ull, "took %llu ms",
	       (unsigned long long)(st_now_ns() - t0) / 1000000);
	expect_err(&Q, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, 1000);
	CHECK(r[0] == 0 && r[8] == 0);
	CHECK(st_capture_wait(lines + 1, 1000));
	CHECKF(strstr(st_capture_text(), "not this DCT's access key") != NULL, "no key line");
	CHECKF(strstr(st_capture_text(), "transport retry count exceeded") != NULL,
	       "no line naming the WQE");
	other_dci_works(100);
	recover(&Q);
	dc_post_write(&Q, &D, &T, 0, (uintptr_t)r, R.mr->rkey, l, 6, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_ok(&Q);
	CHECK(!memcmp(r, "secret", 6));
}

static void t_wrong_dct(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct dc_target bad = T;

	st_ctx = "wrong DCT number";
	bad.dctn = 0xfff00;
	memset(r + 200, 0, 8);
	dc_post_write(&Q, &D, &bad, 1, (uintptr_t)r + 200, R.mr->rkey, l, 6, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_err(&Q, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, 5000);
	CHECK(r[200] == 0);
	recover(&Q);
}

static void t_remote_access(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	int lines;

	st_ctx = "out of bounds";
	lines = st_capture_count();
	dc_post_write(&Q, &D, &T, 0, (uintptr_t)r + R.len - 4, R.mr->rkey, l, 8, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_err(&Q, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 5000);
	CHECK(r[R.len - 4] == 0);
	CHECK(st_capture_wait(lines, 1000));
	CHECKF(strstr(st_capture_text(), "outside the memory region") != NULL, "no bounds line");
	other_dci_works(300);
	recover(&Q);

	st_ctx = "unknown rkey";
	dc_post_write(&Q, &D, &T, 1, (uintptr_t)r, R.mr->rkey + 0x1000, l, 8, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_err(&Q, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 5000);
	recover(&Q);

	st_ctx = "DCT access flags";
	memset(r + 400, 0, 8);
	dc_post_write(&Q, &D, &T_RO, 0, (uintptr_t)r + 400, R.mr->rkey, l, 8, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_err(&Q, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 5000);
	CHECK(r[400] == 0);
	recover(&Q);
	{       /* the same DCT allows READ */
		struct st_wqe w;
		memcpy(r + 500, "readable", 8);
		st_wqe_begin(&w);
		dc_wqe_av(&w, &D, &T_RO, 0);
		st_wqe_raddr(&w, (uintptr_t)r + 500, R.mr->rkey);
		st_wqe_data(&w, 8, L.mr->lkey, l + 500);
		st_post(&Q, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		expect_ok(&Q);
		CHECK(!memcmp(l + 500, "readable", 8));
	}
}

static void t_malformed(void)
{
	struct st_wqe w;
	int lines = st_capture_count();

	st_ctx = "address segment cut off";
	st_wqe_begin(&w);
	st_wqe_seg(&w, 16);      /* 16 of the 48 bytes the extended form needs */
	w.b[16 + 8] = 0x80;      /* dqp_dct: MLX5_EXTENDED_UD_AV */
	st_post(&Q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_err(&Q, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, 5000);
	CHECK(st_capture_wait(lines, 1000));
	CHECKF(strstr(st_capture_text(), "extended address segment does not fit") != NULL,
	       "no line for the cut address segment");
	recover(&Q);

	st_ctx = "WQE larger than the DCI was sized for";
	{
		static uint8_t big[300];
		st_wqe_begin(&w);
		dc_wqe_av(&w, &D, &T, 0);
		st_wqe_raddr(&w, (uintptr_t)R.buf, R.mr->rkey);
		st_wqe_inline(&w, big, sizeof(big));
		st_post(&Q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		expect_err(&Q, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, 5000);
		recover(&Q);
	}

	st_ctx = "ctrl only";
	st_wqe_begin(&w);
	st_post(&Q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_err(&Q, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, 5000);
	recover(&Q);
}

static void t_rnr(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct mlx5_cqe64 c;
	struct st_sge sg = { r + 1024, 64, R.mr->lkey };
	struct st_qp q0;

	st_ctx = "SRQ empty, rnr_retry 7";
	memcpy(l + 1024, "rnr-wait", 8);
	dc_post_send(&Q, &D, &T, 0, l + 1024, 8, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
	CHECK(st_cq_empty_for(&ICQ, 60));
	st_srq_post(&SRQ, &sg, 1);
	expect_ok(&Q);
	if (ST_POLL(&TCQ, &c, 5000)) {
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
		CHECK_EQ(be32toh(c.flags_rqpn) & 0xffffff, Q.qpn);
		st_srq_free(&SRQ, st_cqe_wqe_counter(&c));
	}
	CHECK(!memcmp(r + 1024, "rnr-wait", 8));

	st_ctx = "SRQ empty, rnr_retry 0";
	dc_create_dci(&D, &q0, &ICQ, 8, 1, 0);
	REQUIRE(dc_dci_ready(&D, &q0, 7, 0, 14) == 0);
	dc_post_send(&q0, &D, &T, 0, l + 1024, 8, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
	expect_err(&q0, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, 5000);
	st_qp_destroy(&q0);

	st_ctx = "receive too small";
	sg.len = 4;
	st_srq_post(&SRQ, &sg, 1);
	dc_post_send(&Q, &D, &T, 1, l, 100, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
	expect_err(&Q, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, 5000);
	if (ST_POLL(&TCQ, &c, 5000)) {
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_ERR);
		CHECK_EQ(st_cqe_syndrome(&c), MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
		st_srq_free(&SRQ, st_cqe_wqe_counter(&c));
	}
	recover(&Q);
	/* the DCT keeps serving SENDs, from this DCI too */
	sg.len = 64;
	st_srq_post(&SRQ, &sg, 1);
	memcpy(l + 1100, "after-err", 9);
	dc_post_send(&Q, &D, &T, 0, l + 1100, 9, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
	expect_ok(&Q);
	if (ST_POLL(&TCQ, &c, 5000)) {
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
		st_srq_free(&SRQ, st_cqe_wqe_counter(&c));
	}
	CHECK(!memcmp(r + 1024, "after-err", 9));
}

/* A DCI that stays quiet longer than the DCT keeps an idle initiator's state still reaches it
 * (it opens a new connection, as a hardware DCI closes an idle one). */
static void t_idle(void)
{
	uint8_t *l = L.buf, *r = R.buf;

	st_ctx = "idle connection";
	memcpy(l + 3000, "before", 6);
	dc_post_write(&Q2, &D, &T, 0, (uintptr_t)r + 3000, R.mr->rkey, l + 3000, 6, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_ok(&Q2);
	st_sleep_ms(3500);     /* past 4 x RVXSIM_RETRY_TIMEOUT_MS + 1 s at the DCT */
	memcpy(l + 3000, "after!", 6);
	dc_post_write(&Q2, &D, &T, 0, (uintptr_t)r + 3000, R.mr->rkey, l + 3000, 6, L.mr->lkey,
		      MLX5_WQE_CTRL_CQ_UPDATE);
	expect_ok(&Q2);
	CHECK(!memcmp(r + 3000, "after!", 6));
}

static void setup(void)
{
	st_dev_open(&D, 0);
	st_cq_create(&D, &ICQ, 256);
	st_cq_create(&D, &TCQ, 256);
	st_srq_create(&D, &SRQ, 32, 1);
	st_mr_alloc(&D, &L, 65536, DC_ACCESS_ALL);
	st_mr_alloc(&D, &R, 65536, DC_ACCESS_ALL);
	DCT = dc_create_dct(&D, &TCQ, SRQ.srq, DC_KEY);
	DCT_RO = dc_create_dct(&D, &TCQ, SRQ.srq, DC_KEY);
	REQUIRE(DCT && DCT_RO);
	REQUIRE(dc_dct_ready(&D, DCT, DC_ACCESS_ALL) == 0);
	REQUIRE(dc_dct_ready(&D, DCT_RO, IBV_ACCESS_REMOTE_READ) == 0);
	dc_target_of(&D, DCT, DC_KEY, &T);
	dc_target_of(&D, DCT_RO, DC_KEY, &T_RO);
	dc_create_dci(&D, &Q, &ICQ, 32, 1, 16);
	dc_create_dci(&D, &Q2, &ICQ, 32, 1, 16);
	REQUIRE(dc_dci_ready(&D, &Q, 7, 7, 14) == 0);
	REQUIRE(dc_dci_ready(&D, &Q2, 7, 7, 14) == 0);
}

/* Sub-runs: the model's fault injection through DC. */
static void injected(const char *what)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct mlx5_cqe64 c;
	struct st_sge sg = { r + 2048, 64, R.mr->lkey };

	if (!strcmp(what, "rnr")) {          /* RVXSIM_FORCE_RNR=3: the SEND waits, then lands */
		st_ctx = "RVXSIM_FORCE_RNR";
		st_srq_post(&SRQ, &sg, 1);
		memcpy(l, "forced", 6);
		dc_post_send(&Q, &D, &T, 0, l, 6, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		expect_ok(&Q);
		if (ST_POLL(&TCQ, &c, 5000))
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
		CHECK(!memcmp(r + 2048, "forced", 6));
	} else if (!strcmp(what, "deny")) {  /* RVXSIM_RDMA_DENY=mlx5_0: WRITE refused, SEND served */
		st_ctx = "RVXSIM_RDMA_DENY";
		dc_post_write(&Q, &D, &T, 0, (uintptr_t)r, R.mr->rkey, l, 8, L.mr->lkey,
			      MLX5_WQE_CTRL_CQ_UPDATE);
		expect_err(&Q, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 5000);
		st_srq_post(&SRQ, &sg, 1);
		dc_post_send(&Q2, &D, &T, 0, l, 6, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		expect_ok(&Q2);
	} else if (!strcmp(what, "delay")) { /* RVXSIM_DELAY_US=30000: the CQE is held back */
		uint64_t t0 = st_now_ns();
		st_ctx = "RVXSIM_DELAY_US";
		dc_post_write(&Q, &D, &T, 0, (uintptr_t)r, R.mr->rkey, l, 8, L.mr->lkey,
			      MLX5_WQE_CTRL_CQ_UPDATE);
		expect_ok(&Q);
		CHECKF(st_now_ns() - t0 >= 30000000ull, "completed after %llu us",
		       (unsigned long long)(st_now_ns() - t0) / 1000);
	}
	st_exit();
}

int main(int argc, char **argv)
{
	const char *sub = getenv("T_DC_ERRORS_SUB");

	(void)argc;
	setenv("RVXSIM_RETRY_TIMEOUT_MS", "500", 0);
	st_init("t_dc_errors", 90);
	setup();
	if (sub)
		injected(sub);
	st_capture_begin();
	t_wrong_key();
	t_wrong_dct();
	t_remote_access();
	t_malformed();
	t_rnr();
	if (!strcmp(getenv("RVXSIM_RETRY_TIMEOUT_MS"), "500"))
		t_idle();
	st_ctx = "teardown";
	CHECK(st_cq_empty_for(&ICQ, 10));
	CHECK(st_cq_empty_for(&TCQ, 10));
	if (st_failures)
		st_capture_dump("fault lines");
	st_ctx = NULL;
	if (!st_failures) {
		int rc = st_rerun(argv[0], 30000, "T_DC_ERRORS_SUB=rnr", "RVXSIM_FORCE_RNR=3", NULL);
		CHECKF(rc == 0, "RVXSIM_FORCE_RNR run exited with %d", rc);
		rc = st_rerun(argv[0], 30000, "T_DC_ERRORS_SUB=deny", "RVXSIM_RDMA_DENY=mlx5_0", NULL);
		CHECKF(rc == 0, "RVXSIM_RDMA_DENY run exited with %d", rc);
		rc = st_rerun(argv[0], 30000, "T_DC_ERRORS_SUB=delay", "RVXSIM_DELAY_US=30000", NULL);
		CHECKF(rc == 0, "RVXSIM_DELAY_US run exited with %d", rc);
	}
	st_exit();
	return 0;
}
