/*
 * t_geometry: the memory layouts mlx5dv_init_obj reports for QP, CQ and SRQ
 * match what libmlx5 would allocate (facts sheet sections 1, 4 and 5).
 */
#include "simtest.h"

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;
	while (r < v)
		r <<= 1;
	return r;
}

static uint32_t align_up(uint32_t v, uint32_t a)
{
	return (v + a - 1) / a * a;
}

/* libmlx5 RC sizing: the overhead assumes a UMR WQE (192 bytes). */
struct sq_pred {
	uint32_t wqe_cnt, max_send_wr, max_inline;
};

static struct sq_pred predict_sq(uint32_t max_send_wr, uint32_t max_sge, uint32_t max_inline)
{
	const uint32_t ovh = 192;
	uint32_t size = ovh + 16 * max_sge;
	uint32_t inl = max_inline ? ovh + align_up(4 + max_inline, 16) : 0;
	uint32_t wqe = align_up(size > inl ? size : inl, 64);
	uint32_t bytes = roundup_pow2(max_send_wr * wqe);
	struct sq_pred p = { bytes / 64, bytes / wqe, wqe - ovh - 4 };
	return p;
}

struct rq_pred {
	uint32_t wqe_cnt, stride;
};

static struct rq_pred predict_rq(uint32_t max_recv_wr, uint32_t max_sge)
{
	struct rq_pred p = { 0, 0 };
	uint32_t stride, bytes;

	if (!max_recv_wr)
		return p;
	stride = roundup_pow2(16 * (max_sge ? max_sge : 1));
	bytes = roundup_pow2(max_recv_wr) * stride;
	if (bytes < 64)
		bytes = 64;
	p.stride = stride;
	p.wqe_cnt = bytes / stride;
	return p;
}

static void check_qp(struct st_dev *d, struct st_cq *cq, uint32_t wr, uint32_t sge,
		     uint32_t inl, uint32_t rwr, uint32_t rsge)
{
	struct st_qp_attr a = { wr, rwr, sge, rsge, inl, NULL, 0 };
	struct sq_pred sp = predict_sq(wr, sge, inl);
	struct rq_pred rp = predict_rq(rwr, rsge);
	struct st_qp q;
	char ctx[128];

	snprintf(ctx, sizeof(ctx), "QP send_wr=%u sge=%u inline=%u recv_wr=%u recv_sge=%u",
		 wr, sge, inl, rwr, rsge);
	st_ctx = ctx;
	st_qp_create(d, &q, cq, cq, &a);

	CHECK_EQ(q.dv.sq.stride, 64);
	CHECK_EQ(q.dv.sq.wqe_cnt, sp.wqe_cnt);
	CHECK_EQ(q.cap.max_send_wr, sp.max_send_wr);
	CHECK_EQ(q.cap.max_inline_data, sp.max_inline);
	CHECK_EQ(q.dv.rq.wqe_cnt, rp.wqe_cnt);
	if (rp.wqe_cnt) {
		CHECK_EQ(q.dv.rq.stride, rp.stride);
		CHECK_EQ(q.cap.max_recv_wr, rp.wqe_cnt);
		CHECK_EQ(q.cap.max_recv_sge, rp.stride / 16);
	}
	/* One buffer: RQ at offset 0, SQ right after it. */
	CHECK((uint8_t *)q.dv.sq.buf ==
	      (uint8_t *)q.dv.rq.buf + (size_t)q.dv.rq.wqe_cnt * q.dv.rq.stride);
	CHECK(((uintptr_t)q.dv.sq.buf & 63) == 0);
	CHECK(((uintptr_t)q.dv.rq.buf & 63) == 0);
	/* Doorbell record zeroed, in its own cache line (its address is 8-aligned at least). */
	CHECK_EQ(q.dv.dbrec[MLX5_RCV_DBR], 0);
	CHECK_EQ(q.dv.dbrec[MLX5_SND_DBR], 0);
	CHECK(((uintptr_t)q.dv.dbrec & 7) == 0);
	/* BlueFlame: 256-byte halves at UAR + 0x800 + k * 512. */
	CHECK_EQ(q.dv.bf.size, 256);
	CHECKF((((uintptr_t)q.dv.bf.reg & 0xfff) >= 0x800) &&
	       ((((uintptr_t)q.dv.bf.reg & 0xfff) - 0x800) % 512) == 0,
	       "bf.reg %p is not at UAR + 0x800 + k * 512", q.dv.bf.reg);
	CHECK_EQ(q.dv.comp_mask, 0);
	/* The whole buffer is ours to write (both queues). */
	memset(q.dv.sq.buf, 0, (size_t)q.dv.sq.wqe_cnt * 64);
	if (q.dv.rq.wqe_cnt)
		memset(q.dv.rq.buf, 0, (size_t)q.dv.rq.wqe_cnt * q.dv.rq.stride);
	st_qp_destroy(&q);
	st_ctx = NULL;
}

static void check_cq(struct st_dev *d, int n)
{
	struct st_cq c;
	uint32_t i, bad = 0;
	char ctx[64];

	snprintf(ctx, sizeof(ctx), "CQ n=%d", n);
	st_ctx = ctx;
	st_cq_create(d, &c, n);
	CHECK_EQ(c.dv.cqe_cnt, roundup_pow2((uint32_t)n + 1));
	CHECK_EQ(c.cq->cqe, (int)c.dv.cqe_cnt - 1);
	CHECK_EQ(c.dv.cqe_size, 64);
	CHECK(c.dv.cq_uar != NULL);
	CHECK_EQ(c.dv.dbrec[0], 0);
	CHECK_EQ(c.dv.dbrec[1], 0);
	CHECK(((uintptr_t)c.dv.buf & 63) == 0);
	for (i = 0; i < c.dv.cqe_cnt; i++)
		bad += st_cqe_at(&c, i)->op_own != 0xf0;
	CHECKF(bad == 0, "%u of %u CQEs do not start with op_own 0xF0", bad, c.dv.cqe_cnt);
	/* A fresh CQ has nothing to poll. */
	CHECK(st_cq_peek(&c) == NULL);
	st_cq_destroy(&c);
	st_ctx = NULL;
}

static void check_srq(struct st_dev *d, uint32_t max_wr, uint32_t max_sge)
{
	struct st_srq s;
	uint32_t stride = roundup_pow2(16 + 16 * max_sge), i, idx, steps = 0;
	char ctx[64];

	if (stride < 32)
		stride = 32;
	snprintf(ctx, sizeof(ctx), "SRQ max_wr=%u max_sge=%u", max_wr, max_sge);
	st_ctx = ctx;
	st_srq_create(d, &s, max_wr, max_sge);
	CHECK_EQ(s.dv.stride, stride);
	CHECK_EQ(s.dv.head, 0);
	CHECK(s.dv.tail >= max_wr);
	CHECK_EQ(s.dv.comp_mask & MLX5DV_SRQ_MASK_SRQN, MLX5DV_SRQ_MASK_SRQN);
	CHECK(s.dv.srqn != 0 && s.dv.srqn <= 0xffffff);
	CHECK_EQ(*s.dv.dbrec, 0);
	CHECK(((uintptr_t)s.dv.buf & 63) == 0);
	/* Free list: i -> i+1 from head to tail. */
	idx = s.dv.head;
	for (i = 0; i < s.dv.tail && steps < 100000; i++, steps++) {
		uint16_t nx = be16toh(st_srq_wqe(&s, idx)->next_wqe_index);
		if (!CHECKF(nx == idx + 1, "SRQ WQE %u links to %u", idx, nx))
			break;
		idx = nx;
	}
	CHECK_EQ(idx, s.dv.tail);
	CHECK(ibv_destroy_srq(s.srq) == 0);
	st_ctx = NULL;
}

int main(void)
{
	struct st_dev d;
	struct st_cq cq;

	st_init("t_geometry", 20);
	st_dev_open(&d, 0);
	st_cq_create(&d, &cq, 64);

	/* (max_send_wr, max_send_sge, max_inline, max_recv_wr, max_recv_sge) */
	check_qp(&d, &cq, 16, 1, 0, 16, 1);      /* 256-B WQEs, 64 WQEBBs, inline 60 */
	check_qp(&d, &cq, 100, 1, 0, 2, 1);      /* 128 WRs in 512 WQEBBs; RQ 64-B minimum */
	check_qp(&d, &cq, 10, 5, 0, 5, 3);       /* 320-B WQEs; RQ stride 64 */
	check_qp(&d, &cq, 8, 1, 100, 0, 0);      /* inline 100 -> 320-B WQEs; no RQ */
	check_qp(&d, &cq, 4, 2, 200, 1, 1);      /* inline 200 -> 448-B WQEs */
	check_qp(&d, &cq, 1, 1, 0, 1, 1);
	check_qp(&d, &cq, 256, 4, 60, 256, 4);
	check_qp(&d, &cq, 64, 1, 124, 64, 2);

	check_cq(&d, 1);
	check_cq(&d, 3);
	check_cq(&d, 7);
	check_cq(&d, 8);
	check_cq(&d, 100);
	check_cq(&d, 1023);

	check_srq(&d, 15, 1);
	check_srq(&d, 64, 3);
	check_srq(&d, 100, 4);

	/* A receive-only QP (max_send_wr 0) has no send queue. */
	{
		struct ibv_qp_init_attr ia;
		struct ibv_qp *qp;
		struct mlx5dv_qp dq;
		struct mlx5dv_obj obj;

		st_ctx = "QP without a send queue";
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = cq.cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_recv_wr = 16;
		ia.cap.max_recv_sge = 1;
		qp = ibv_create_qp(d.pd, &ia);
		if (CHECK(qp != NULL)) {
			memset(&obj, 0, sizeof(obj));
			memset(&dq, 0, sizeof(dq));
			obj.qp.in = qp;
			obj.qp.out = &dq;
			CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0);
			CHECK_EQ(dq.sq.wqe_cnt, 0);
			CHECK_EQ(dq.rq.wqe_cnt, 16);
			CHECK_EQ(dq.rq.stride, 16);
			CHECK_EQ(ia.cap.max_send_wr, 0);
			CHECK_EQ(dq.dbrec[0], 0);
			CHECK(ibv_destroy_qp(qp) == 0);
		}
	}

	/* Two QPs never share a QPN, two CQs never share a CQN. */
	{
		struct st_qp_attr a = { 8, 8, 1, 1, 0, NULL, 0 };
		struct st_qp q1, q2;
		struct st_cq c2;

		st_ctx = "uniqueness";
		st_qp_create(&d, &q1, &cq, &cq, &a);
		st_qp_create(&d, &q2, &cq, &cq, &a);
		st_cq_create(&d, &c2, 8);
		CHECK(q1.qpn != q2.qpn);
		CHECK(c2.dv.cqn != cq.dv.cqn);
		CHECK(q1.dv.sq.buf != q2.dv.sq.buf);
		CHECK(q1.dv.dbrec != q2.dv.dbrec);
		/* each QP's record sits in its own cache line */
		CHECK(((uintptr_t)q1.dv.dbrec >> 6) != ((uintptr_t)q2.dv.dbrec >> 6));
		st_qp_destroy(&q1);
		st_qp_destroy(&q2);
		st_cq_destroy(&c2);
	}

	st_cq_destroy(&cq);
	st_dev_close(&d);
	st_exit();
	return 0;
}
