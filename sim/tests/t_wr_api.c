/*
 * t_wr_api: the ibv_wr_* send API (QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS), through
 * rdma-core's and mlx5dv's calls only. RC: one batch of WRITE (SGE), SEND_IMM (inline), READ and
 * fetch-and-add posts four WQEs with one ibv_wr_complete; an opcode the QP was not created with
 * makes ibv_wr_complete fail with EOPNOTSUPP and posts nothing; ibv_wr_abort posts nothing;
 * ibv_qp_to_qp_ex is NULL for a QP created without send_ops_flags, ibv_wr_complete before RTS
 * fails with EINVAL, and send_ops_flags libmlx5 does not give an RC QP (TSO) fail the create
 * with EOPNOTSUPP. DC: a DCI created by
 * mlx5dv_create_qp with send_ops_flags writes to a DCT's memory through mlx5dv_wr_set_dc_addr,
 * reads it back, and sends into the DCT's SRQ.
 */
#include "simtest.h"
#include "t_dc_common.h"

#define KEY 0x1ee7a330c0ffee99ull

static struct st_dev D;
static struct st_cq CA, CB;
static struct st_mr L, R;

static bool poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t end = st_now_ns() + 10000000000ull;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
	} while (!n && st_now_ns() < end);
	return CHECKF(n == 1, "no completion within 10 s") && CHECKF(wc->status == IBV_WC_SUCCESS,
		"status %s", ibv_wc_status_str(wc->status));
}

static struct ibv_qp *rc_qp_ex(struct st_cq *cq, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq->cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 32;
	ia.pd = D.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = ops;
	return ibv_create_qp_ex(D.ctx, &ia);
}

static void rc_cases(void)
{
	const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct ibv_qp *a = rc_qp_ex(&CA, ops), *b = rc_qp_ex(&CB, ops);
	struct ibv_qp_ex *x;
	struct st_addr aa, ba;
	struct ibv_sge rs = { (uintptr_t)R.buf + 512, 64, R.mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 77, .sg_list = &rs, .num_sge = 1 }, *badr;
	struct ibv_wc wc;
	uint64_t v = 40;

	st_ctx = "rc";
	REQUIRE(a && b);
	x = ibv_qp_to_qp_ex(a);
	REQUIRE(x != NULL);
	st_addr_of(&D, &(struct st_qp){ .qp = a, .qpn = a->qp_num }, &aa);
	st_addr_of(&D, &(struct st_qp){ .qp = b, .qpn = b->qp_num }, &ba);
	st_qp_connect(&D, &(struct st_qp){ .qp = a }, &ba);
	st_qp_connect(&D, &(struct st_qp){ .qp = b }, &aa);
	CHECK(ibv_post_recv(b, &rw, &badr) == 0);
	for (int i = 0; i < 256; i++)
		((uint8_t *)L.buf)[i] = (uint8_t)(i ^ 0x3c);
	memcpy((uint8_t *)R.buf + 1024, &v, 8);
	memset((uint8_t *)R.buf + 2048, 0x77, 128);

	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf, 256);
	x->wr_id = 2;
	ibv_wr_send_imm(x, htobe32(0xabcd));
	ibv_wr_set_inline_data(x, "inline!", 8);
	x->wr_id = 3;
	ibv_wr_rdma_read(x, R.mr->rkey, (uintptr_t)R.buf + 2048);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf + 4096, 128);
	x->wr_id = 4;
	ibv_wr_atomic_fetch_add(x, R.mr->rkey, (uintptr_t)R.buf + 1024, 2);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf + 8192, 8);
	CHECK_EQ(ibv_wr_complete(x), 0);
	for (uint64_t id = 1; id <= 4; id++)
		if (poll_one(CA.cq, &wc))
			CHECK_EQ(wc.wr_id, id);
	CHECK(!memcmp(R.buf, L.buf, 256));
	CHECK(!memcmp((uint8_t *)L.buf + 4096, (uint8_t *)R.buf + 2048, 128));
	memcpy(&v, (uint8_t *)L.buf + 8192, 8);
	CHECK_EQ(v, 40);
	memcpy(&v, (uint8_t *)R.buf + 1024, 8);
	CHECK_EQ(v, 42);
	if (poll_one(CB.cq, &wc)) {
		CHECK(wc.wr_id == 77 && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      wc.imm_data == htobe32(0xabcd) && wc.byte_len == 8);
		CHECK(!memcmp((uint8_t *)R.buf + 512, "inline!", 8));
	}

	/* SEND was not among the QP's send_ops_flags: the batch fails, nothing is posted */
	st_ctx = "rc refusals";
	memset(R.buf, 0, 16);
	ibv_wr_start(x);
	x->wr_id = 5;
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf, 16);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf, 16);
	CHECK_EQ(ibv_wr_complete(x), EOPNOTSUPP);
	/* more SGEs than max_send_sge (1): ENOMEM at ibv_wr_complete, as libmlx5 */
	ibv_wr_start(x);
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf);
	{
		struct ibv_sge two[2] = { { (uintptr_t)L.buf, 8, L.mr->lkey },
					  { (uintptr_t)L.buf + 8, 8, L.mr->lkey } };
		ibv_wr_set_sge_list(x, 2, two);
	}
	CHECK_EQ(ibv_wr_complete(x), ENOMEM);
	ibv_wr_start(x);
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf, 16);
	ibv_wr_abort(x);
	/* a marker WRITE after both: the first CQE is its own, and nothing reached R before it */
	ibv_wr_start(x);
	x->wr_id = 6;
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf + 3000);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf, 16);
	CHECK_EQ(ibv_wr_complete(x), 0);
	if (poll_one(CA.cq, &wc))
		CHECK_EQ(wc.wr_id, 6);
	CHECK(((uint8_t *)R.buf)[0] == 0 && ((uint8_t *)R.buf)[15] == 0);

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	{
		struct ibv_qp *plain = rc_qp_ex(&CA, 0), *tso;
		struct ibv_qp_init_attr ia = { .send_cq = CA.cq, .recv_cq = CA.cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *old = ibv_create_qp(D.pd, &ia);
		REQUIRE(plain && old);
		CHECK(ibv_qp_to_qp_ex(old) == NULL);
		/* a batch completed before RTS fails as libmlx5's does (EINVAL), nothing posted */
		{
			struct ibv_qp *rst = rc_qp_ex(&CA, IBV_QP_EX_WITH_SEND);
			struct ibv_qp_ex *rx = rst ? ibv_qp_to_qp_ex(rst) : NULL;
			struct ibv_wc wc;

			REQUIRE(rx != NULL);
			ibv_wr_start(rx);
			ibv_wr_send(rx);
			ibv_wr_set_sge(rx, L.mr->lkey, (uintptr_t)L.buf, 16);
			CHECK_EQ(ibv_wr_complete(rx), EINVAL);
			CHECK(ibv_poll_cq(CA.cq, 1, &wc) == 0);
			CHECK(ibv_destroy_qp(rst) == 0);
		}
		errno = 0;
		tso = rc_qp_ex(&CA, IBV_QP_EX_WITH_TSO);
		CHECK(tso == NULL && errno == EOPNOTSUPP);
		CHECK(ibv_destroy_qp(plain) == 0 && ibv_destroy_qp(old) == 0);
	}
}

static void dc_cases(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct ibv_qp_init_attr_ex ia;
	struct mlx5dv_qp_init_attr dv;
	struct ibv_qp *dct, *dci;
	struct ibv_qp_ex *x;
	struct mlx5dv_qp_ex *m;
	struct ibv_ah *ah;
	struct ibv_ah_attr aa;
	struct st_qp q;
	struct ibv_sge rs = { (uintptr_t)R.buf + 6000, 64, R.mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 88, .sg_list = &rs, .num_sge = 1 }, *badr;
	struct ibv_wc wc;

	st_ctx = "dc";
	REQUIRE(srq != NULL);
	dct = dc_create_dct(&D, &CB, srq, KEY);
	REQUIRE(dct != NULL);
	REQUIRE(dc_dct_ready(&D, dct, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) == 0);
	CHECK(ibv_post_srq_recv(srq, &rw, &badr) == 0);
	memset(&ia, 0, sizeof(ia));
	memset(&dv, 0, sizeof(dv));
	ia.qp_type = IBV_QPT_DRIVER;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND;
	ia.pd = D.pd;
	ia.send_cq = ia.recv_cq = CA.cq;
	ia.cap.max_send_wr = 16;
	ia.cap.max_send_sge = 1;
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	dci = mlx5dv_create_qp(D.ctx, &ia, &dv);
	REQUIRE(dci != NULL);
	memset(&q, 0, sizeof(q));
	q.qp = dci;
	REQUIRE(dc_dci_ready(&D, &q, 7, 7, 14) == 0);
	x = ibv_qp_to_qp_ex(dci);
	REQUIRE(x != NULL);
	m = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	REQUIRE(m != NULL);
	memset(&aa, 0, sizeof(aa));
	aa.dlid = D.port.lid;
	aa.port_num = D.port_num;
	if (D.eth) {
		aa.is_global = 1;
		memcpy(aa.grh.dgid.raw, D.gid.raw, 16);
		aa.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(D.pd, &aa);
	REQUIRE(ah != NULL);
	memset((uint8_t *)L.buf + 100, 0x42, 200);
	memset((uint8_t *)R.buf + 5000, 0x99, 100);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 11;
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf + 4000);
	mlx5dv_wr_set_dc_addr(m, ah, dct->qp_num, KEY);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf + 100, 200);
	x->wr_id = 12;
	ibv_wr_rdma_read(x, R.mr->rkey, (uintptr_t)R.buf + 5000);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf + 10000, 100);
	mlx5dv_wr_set_dc_addr(m, ah, dct->qp_num, KEY);
	x->wr_id = 13;
	ibv_wr_send(x);
	mlx5dv_wr_set_dc_addr(m, ah, dct->qp_num, KEY);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf + 100, 32);
	CHECK_EQ(ibv_wr_complete(x), 0);
	for (uint64_t id = 11; id <= 13; id++)
		if (poll_one(CA.cq, &wc))
			CHECK_EQ(wc.wr_id, id);
	CHECK(!memcmp((uint8_t *)R.buf + 4000, (uint8_t *)L.buf + 100, 200));
	CHECK(!memcmp((uint8_t *)L.buf + 10000, (uint8_t *)R.buf + 5000, 100));
	if (poll_one(CB.cq, &wc)) {
		CHECK(wc.wr_id == 88 && wc.byte_len == 32 && wc.src_qp == dci->qp_num);
		CHECK(!memcmp((uint8_t *)R.buf + 6000, (uint8_t *)L.buf + 100, 32));
	}
	/* a DCI WR without its target is refused at ibv_wr_complete */
	ibv_wr_start(x);
	ibv_wr_rdma_write(x, R.mr->rkey, (uintptr_t)R.buf);
	ibv_wr_set_sge(x, L.mr->lkey, (uintptr_t)L.buf, 8);
	CHECK_EQ(ibv_wr_complete(x), EINVAL);
	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_qp(dci) == 0 && ibv_destroy_qp(dct) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
}

int main(void)
{
	st_init("t_wr_api", 40);
	st_dev_open(&D, 0);
	/* polled through ibv_poll_cq only (not given out by mlx5dv_init_obj) */
	CA.cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	CB.cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	REQUIRE(CA.cq && CB.cq);
	st_mr_alloc(&D, &L, 1 << 16, ST_ACCESS_ALL);
	st_mr_alloc(&D, &R, 1 << 16, ST_ACCESS_ALL);
	rc_cases();
	dc_cases();
	st_ctx = NULL;
	st_mr_free(&L);
	st_mr_free(&R);
	st_cq_destroy(&CA);
	st_cq_destroy(&CB);
	st_dev_close(&D);
	st_exit();
}
