/*
 * t_rnr: a SEND that finds no receive posted. With rnr_retry 7 (retry for
 * ever) it completes once a receive is posted later; with rnr_retry 0 or 1 it
 * fails with RNR_RETRY_EXC_ERR (0x16) and the QP flushes what follows.
 */
#include "simtest.h"

static const struct st_qp_attr QA = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				      .max_recv_sge = 1, .max_inline = 32 };

/* A loopback pair with rnr_retry on both QPs, and a 4 KiB region m on its device. */
static void open_pair(struct st_pair *p, struct st_mr *m, uint8_t rnr_retry)
{
	st_pair_open_ex(p, &QA, 32, rnr_retry);
	st_mr_alloc(&p->d, m, 4096, ST_ACCESS_ALL);
}

static void close_pair(struct st_pair *p, struct st_mr *m)
{
	st_mr_free(m);
	st_pair_close(p);
}

/* A signaled SEND of len inline bytes from q; returns its WQE index. */
static uint16_t send_inline(struct st_qp *q, const void *data, uint32_t len, enum st_ring_mode mode)
{
	struct st_wqe w;

	st_wqe_begin(&w);
	st_wqe_inline(&w, data, len);
	return st_post(q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, mode);
}

/* Polls cq for a successful requester CQE (for WQE idx unless idx < 0) within ms. */
static void expect_sent(struct st_cq *cq, long idx, unsigned ms)
{
	struct mlx5_cqe64 c;
	char b[200];

	if (ST_POLL(cq, &c, ms)) {
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "%s", st_cqe_str(&c, b, sizeof(b)));
		if (idx >= 0)
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
	}
}

/* Polls cq for a received SEND of len bytes within ms; returns 1 if one came. */
static int expect_recv(struct st_cq *cq, struct mlx5_cqe64 *c, uint32_t len, unsigned ms)
{
	if (!ST_POLL(cq, c, ms))
		return 0;
	CHECK_EQ(st_cqe_opcode(c), MLX5_CQE_RESP_SEND);
	CHECK_EQ(be32toh(c->byte_cnt), len);
	return 1;
}

static void run(uint8_t rnr_retry)
{
	struct st_pair P;
	struct st_mr m;
	struct mlx5_cqe64 c;
	char b[200], ctx[64];
	uint16_t idx, idx2;

	snprintf(ctx, sizeof(ctx), "rnr_retry %u", rnr_retry);
	st_ctx = ctx;
	open_pair(&P, &m, rnr_retry);

	idx = send_inline(&P.a, "late receive", 13, ST_RING_BF);
	if (rnr_retry == 7) {
		/* no receive yet: nothing completes for a while */
		CHECK(st_cq_empty_for(&P.acq, 300));
		CHECK(st_cq_empty_for(&P.brcq, 1));
		st_post_recv1(&P.b, m.buf, 64, m.mr->lkey);
		expect_sent(&P.acq, idx, 5000);
		if (expect_recv(&P.brcq, &c, 13, 5000)) {
			if (st_cqe_format(&c) == 1)
				CHECK(!memcmp(&c, "late receive", 13));
			else
				CHECK(!memcmp(m.buf, "late receive", 13));
		}
		/* and the QP is still fine */
		idx2 = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		expect_sent(&P.acq, idx2, 3000);
	} else {
		uint64_t t0 = st_now_ns();
		/* a WQE behind it is flushed */
		idx2 = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		if (ST_POLL(&P.acq, &c, 10000)) {
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ_ERR &&
			       st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
			       "%s, expected RNR_RETRY_EXC_ERR", st_cqe_str(&c, b, sizeof(b)));
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
			CHECK_EQ(st_cqe_sop_qpn(&c) & 0xffffff, P.a.qpn);
		}
		if (ST_POLL(&P.acq, &c, 3000)) {
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ_ERR &&
			       st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
			       "%s, expected WR_FLUSH_ERR", st_cqe_str(&c, b, sizeof(b)));
			CHECK_EQ(st_cqe_wqe_counter(&c), idx2);
		}
		st_note("%s: failed after %llu ms", ctx, (unsigned long long)((st_now_ns() - t0) / 1000000));
		/* the receiver saw nothing */
		CHECK(st_cq_empty_for(&P.brcq, 10));

		/* Recovery: both QPs through RESET (records zeroed, counters restart at 0)
		 * and connected again; the same SEND then works. */
		snprintf(ctx, sizeof(ctx), "rnr_retry %u: reset and reuse", rnr_retry);
		{
			struct ibv_qp_attr at;

			memset(&at, 0, sizeof(at));
			at.qp_state = IBV_QPS_RESET;
			CHECK_EQ(ibv_modify_qp(P.a.qp, &at, IBV_QP_STATE), 0);
			CHECK_EQ(ibv_modify_qp(P.b.qp, &at, IBV_QP_STATE), 0);
			CHECK_EQ(P.a.dv.dbrec[0], 0);
			CHECK_EQ(P.a.dv.dbrec[1], 0);
			CHECK_EQ(P.b.dv.dbrec[0], 0);
			CHECK_EQ(P.b.dv.dbrec[1], 0);
			P.a.pi = P.b.pi = 0;
			P.a.rq_head = P.b.rq_head = 0;
			P.a.bf_off = P.b.bf_off = 0;
			st_qp_connect_pair(&P.d, &P.a, &P.b, rnr_retry);
			st_post_recv1(&P.b, m.buf, 64, m.mr->lkey);
			idx = send_inline(&P.a, "after reset", 12, ST_RING_BF);
			CHECK_EQ(idx, 0);
			expect_sent(&P.acq, 0, 3000);
			expect_recv(&P.brcq, &c, 12, 3000);
		}
	}
	close_pair(&P, &m);
	st_ctx = NULL;
}

/* A receive WQE written into the RQ but not counted in dbrec[0] is not there yet. */
static void uncounted_receive(void)
{
	struct st_pair P;
	struct st_mr m;
	struct mlx5_cqe64 c;
	struct mlx5_wqe_data_seg *slot;

	st_ctx = "receive written, record not bumped";
	open_pair(&P, &m, 7);
	slot = (struct mlx5_wqe_data_seg *)P.b.dv.rq.buf;
	mlx5dv_set_data_seg(slot, 64, m.mr->lkey, (uintptr_t)m.buf);
	send_inline(&P.a, "early", 6, ST_RING_DB);
	CHECKF(st_cq_empty_for(&P.brcq, 300), "a receive WQE was used before dbrec[0] counted it");
	CHECK(st_cq_empty_for(&P.acq, 1));
	/* now count it */
	P.b.rq_head = 1;
	st_to_device_barrier();
	P.b.dv.dbrec[MLX5_RCV_DBR] = htobe32(1);
	expect_recv(&P.brcq, &c, 6, 5000);
	expect_sent(&P.acq, -1, 5000);
	close_pair(&P, &m);
	st_ctx = NULL;
}

/* Receives may be posted in INIT, before the QP is connected. */
static void receive_in_init(void)
{
	struct st_dev d;
	struct st_cq ac, ar, bc, br;
	struct st_qp qa, qb;
	struct st_addr aa, ba;
	struct st_mr m;
	struct mlx5_cqe64 c;

	st_ctx = "receive posted in INIT";
	st_dev_open(&d, 0);
	st_cq_create(&d, &ac, 16);
	st_cq_create(&d, &ar, 16);
	st_cq_create(&d, &bc, 16);
	st_cq_create(&d, &br, 16);
	st_qp_create(&d, &qa, &ac, &ar, &QA);
	st_qp_create(&d, &qb, &bc, &br, &QA);
	st_mr_alloc(&d, &m, 4096, ST_ACCESS_ALL);
	st_addr_of(&d, &qa, &aa);
	st_addr_of(&d, &qb, &ba);
	CHECK_EQ(st_qp_to_init(&d, &qb), 0);
	st_post_recv1(&qb, m.buf, 64, m.mr->lkey);
	CHECK_EQ(st_qp_to_rtr(&d, &qb, &aa), 0);
	CHECK_EQ(st_qp_to_rts(&qb, 7, 0, 14), 0);
	/* rnr_retry 0 on the sender: any missing receive would fail at once */
	st_qp_connect_ex(&d, &qa, &ba, 7, 0, 14);
	send_inline(&qa, "early bird", 11, ST_RING_BF);
	expect_sent(&ac, -1, 3000);
	expect_recv(&br, &c, 11, 3000);
	st_mr_free(&m);
	st_qp_destroy(&qa);
	st_qp_destroy(&qb);
	st_cq_destroy(&ac);
	st_cq_destroy(&ar);
	st_cq_destroy(&bc);
	st_cq_destroy(&br);
	st_dev_close(&d);
	st_ctx = NULL;
}

/*
 * With the model's RNR injection (RVXSIM_FORCE_RNR=N: the first N SENDs reaching
 * a device get an RNR NAK although a receive is posted): rnr_retry 7 rides it
 * out in order; rnr_retry 1 fails with RNR_RETRY_EXC_ERR while NAKs are left.
 */
static void forced_rnr(void)
{
	struct st_pair P;
	struct st_mr m;
	struct st_wqe w;
	struct mlx5_cqe64 c;
	char b[200];
	int k;

	st_ctx = "RVXSIM_FORCE_RNR=6, rnr_retry 7";
	open_pair(&P, &m, 7);
	for (k = 0; k < 4; k++)
		st_post_recv1(&P.b, (uint8_t *)m.buf + 64 * k, 64, m.mr->lkey);
	for (k = 0; k < 4; k++) {
		uint8_t v = (uint8_t)(0x20 + k);
		st_wqe_begin(&w);
		st_wqe_inline(&w, &v, 1);
		st_wqe_write(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	}
	st_ring(&P.a, ST_RING_DB);
	for (k = 0; k < 4; k++) {
		if (!ST_POLL(&P.acq, &c, 5000))
			break;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == k, "send %d: %s", k,
		       st_cqe_str(&c, b, sizeof(b)));
		if (!ST_POLL(&P.brcq, &c, 5000))
			break;
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
		CHECK_EQ(((uint8_t *)m.buf)[64 * k], 0x20 + k);    /* in order, once each */
	}
	CHECK(st_cq_empty_for(&P.brcq, 20));
	close_pair(&P, &m);

	/* a new pair (device opened again): with NAKs still to come, one retry is not enough */
	st_ctx = "RVXSIM_FORCE_RNR, rnr_retry 1";
	open_pair(&P, &m, 1);
	st_post_recv1(&P.b, m.buf, 64, m.mr->lkey);
	send_inline(&P.a, "x", 1, ST_RING_DB);
	if (ST_POLL(&P.acq, &c, 5000))
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ_ERR &&
		       st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
		       "%s, expected RNR_RETRY_EXC_ERR from the injected RNR NAKs", st_cqe_str(&c, b, sizeof(b)));
	close_pair(&P, &m);
	st_ctx = NULL;
}

int main(int argc, char **argv)
{
	st_init("t_rnr", 40);
	if (getenv("RVXSIM_FORCE_RNR")) {
		st_name = "t_rnr(RVXSIM_FORCE_RNR)";
		forced_rnr();
		st_exit();
	}
	receive_in_init();
	uncounted_receive();
	run(7);
	run(0);
	run(1);
	if (argc < 2) {
		int rc = st_rerun(argv[0], 30000, "RVXSIM_FORCE_RNR=6", NULL);

		CHECKF(rc == 0, "the run with RVXSIM_FORCE_RNR=6 exited with %d", rc);
	}
	st_exit();
	return 0;
}
