/*
 * t_ud_direct: UD as ud_mlx5 drives it, with no verbs on the data path: send WQEs written into the
 * SQ (ctrl + datagram segment copied from the AH's mlx5 address vector with the destination QPN
 * and Q_Key + inline or pointer data), rung with the doorbell record and a doorbell or BlueFlame
 * copy; receives posted to the RQ directly; CQEs read from the CQ buffer. Checks the REQ CQE, the
 * receive CQE (byte_cnt = payload + 40, flags_rqpn source QPN and GRH bits, slid), the GRH written
 * into the first 40 bytes when the address vector asks for one, and silent drops on a wrong Q_Key
 * and with no receive posted.
 */
#include "simtest.h"

#define QKEY 0x1ee7c0deu
#define GRH 40

static struct st_dev D;
static struct st_cq CA, CB;
static struct st_qp A, B;
static struct st_mr M;
static struct mlx5_wqe_av av_plain, av_grh;

static void ud_qp(struct st_qp *q, struct st_cq *cq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq->cq, .recv_cq = cq->cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 1, .max_recv_sge = 1,
						.max_inline_data = 32 } };
	struct mlx5dv_obj obj;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	memset(q, 0, sizeof(*q));
	q->qp = ibv_create_qp(D.pd, &ia);
	REQUIRE(q->qp != NULL);
	/* libmlx5 sizes UD WQEs for ctrl + datagram segment (64 bytes of overhead) */
	CHECK(ia.cap.max_inline_data >= 32);
	q->scq = q->rcq = cq;
	q->qpn = q->qp->qp_num;
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = q->qp;
	obj.qp.out = &q->dv;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0);
	REQUIRE(ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	REQUIRE(ibv_modify_qp(q->qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	REQUIRE(ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

static void get_av(int global, struct mlx5_wqe_av *out)
{
	struct ibv_ah_attr aa;
	struct mlx5dv_ah dah;
	struct mlx5dv_obj obj;
	struct ibv_ah *ah;

	memset(&aa, 0, sizeof(aa));
	aa.port_num = 1;
	aa.dlid = D.port.lid;
	if (global || D.eth) {
		aa.is_global = 1;
		aa.grh.dgid = D.gid;
		aa.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(D.pd, &aa);
	REQUIRE(ah != NULL);
	memset(&obj, 0, sizeof(obj));
	obj.ah.in = ah;
	obj.ah.out = &dah;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH) == 0);
	*out = *dah.av;
	CHECK(ibv_destroy_ah(ah) == 0);
}

/* A signaled UD SEND of msg from A to B's QPN with qkey, through AV av. */
static void send_direct(const struct mlx5_wqe_av *av, uint32_t qkey, const char *msg, int inl,
			enum st_ring_mode mode)
{
	struct st_wqe w;
	struct mlx5_wqe_datagram_seg *d;
	struct mlx5_cqe64 c;
	uint16_t idx;
	uint32_t len = (uint32_t)strlen(msg);

	st_wqe_begin(&w);
	d = st_wqe_seg(&w, sizeof(*d));
	memcpy(&d->av, av, sizeof(*av));
	d->av.dqp_dct |= htobe32(B.qpn);
	d->av.key.qkey.qkey = htobe32(qkey);
	if (inl) {
		st_wqe_inline(&w, msg, len);
	} else {
		memcpy(M.buf, msg, len);
		st_wqe_data(&w, len, M.mr->lkey, M.buf);
	}
	idx = st_post(&A, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, mode);
	REQUIRE(st_cq_poll(&CA, &c, 3000));
	CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
	CHECK_EQ(st_cqe_wqe_counter(&c), idx);
	CHECK_EQ(st_cqe_sop_qpn(&c) & 0xffffff, A.qpn);
}

static void expect_recv(const char *msg, uint64_t off, int grh)
{
	struct mlx5_cqe64 c;
	uint32_t len = (uint32_t)strlen(msg), fr;
	const uint8_t *buf = (const uint8_t *)M.buf + off;

	REQUIRE(st_cq_poll(&CB, &c, 3000));
	CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
	CHECK_EQ(be32toh(c.byte_cnt), len + GRH);
	fr = be32toh(c.flags_rqpn);
	CHECK_EQ(fr & 0xffffff, A.qpn);
	CHECKF(!!((fr >> 28) & 3) == !!grh, "flags_rqpn GRH bits 0x%x, GRH %s", (fr >> 28) & 3,
	       grh ? "expected" : "not expected");
	if (!D.eth)
		CHECK_EQ(be16toh(c.slid), D.port.lid);
	CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, B.qpn);
	CHECKF(!memcmp(buf + GRH, msg, len), "payload not at offset 40");
	if (grh) {
		/* IPv6-format GRH: version 6, next header 0x1b, source then destination GID */
		CHECK_EQ(buf[0] >> 4, 6);
		CHECK_EQ(buf[6], 0x1b);
		CHECK_EQ(be16toh(*(const uint16_t *)(buf + 4)), len);
		CHECKF(!memcmp(buf + 24, D.gid.raw, 16), "GRH destination GID");
		CHECKF(!memcmp(buf + 8, D.gid.raw, 16), "GRH source GID");
	}
}

int main(int argc, char **argv)
{
	struct mlx5_cqe64 c;

	st_init("t_ud_direct", 30);
	st_dev_open(&D, 0);
	st_mr_alloc(&D, &M, 65536, ST_ACCESS_ALL);
	st_cq_create(&D, &CA, 64);
	st_cq_create(&D, &CB, 64);
	ud_qp(&A, &CA);
	ud_qp(&B, &CB);
	get_av(0, &av_plain);
	get_av(1, &av_grh);
	CHECK(be32toh(av_plain.dqp_dct) & MLX5_EXTENDED_UD_AV);

	st_ctx = "inline, doorbell";
	memset((uint8_t *)M.buf + 1024, 0xee, GRH);
	st_post_recv1(&B, (uint8_t *)M.buf + 1024, 256, M.mr->lkey);
	send_direct(&av_plain, QKEY, "inline datagram", 1, ST_RING_DB);
	expect_recv("inline datagram", 1024, D.eth);
	if (!D.eth)
		CHECKF(((uint8_t *)M.buf)[1024] == 0xee, "GRH space written without a GRH");

	st_ctx = "gather, BlueFlame";
	st_post_recv1(&B, (uint8_t *)M.buf + 2048, 256, M.mr->lkey);
	send_direct(&av_plain, QKEY, "gathered datagram", 0, ST_RING_BF);
	expect_recv("gathered datagram", 2048, D.eth);

	st_ctx = "GRH";
	st_post_recv1(&B, (uint8_t *)M.buf + 3072, 256, M.mr->lkey);
	send_direct(&av_grh, QKEY, "with a GRH", 1, ST_RING_BF);
	expect_recv("with a GRH", 3072, 1);

	st_ctx = "wrong Q_Key";
	st_post_recv1(&B, (uint8_t *)M.buf + 4096, 256, M.mr->lkey);
	send_direct(&av_plain, QKEY ^ 1, "wrong key", 1, ST_RING_DB);
	CHECKF(!st_cq_poll(&CB, &c, 200), "a datagram with a wrong Q_Key was delivered");
	send_direct(&av_plain, QKEY, "right key", 1, ST_RING_DB);
	expect_recv("right key", 4096, D.eth);

	st_ctx = "no receive posted";
	send_direct(&av_plain, QKEY, "dropped", 1, ST_RING_DB);
	st_sleep_ms(100);
	st_post_recv1(&B, (uint8_t *)M.buf + 5120, 256, M.mr->lkey);
	CHECKF(!st_cq_poll(&CB, &c, 200), "a datagram that found no receive was kept");
	send_direct(&av_plain, QKEY, "later", 1, ST_RING_DB);
	expect_recv("later", 5120, D.eth);

	st_qp_destroy(&A);
	st_qp_destroy(&B);
	st_cq_destroy(&CA);
	st_cq_destroy(&CB);
	st_mr_free(&M);
	st_dev_close(&D);
	if (argc < 2 && !st_failures) {
		int rc = st_rerun(argv[0], 20000, "RVXSIM_LINK=eth", NULL);
		CHECKF(rc == 0, "RoCE re-run failed (exit %d)", rc);
	}
	st_exit();
	return 0;
}
