/*
 * t_srq: receives through a shared receive queue. The hardware takes WQEs
 * from the free list (next_wqe_index), bounded by the record counter; the CQE's
 * wqe_counter names the SRQ WQE used, which software relinks at the tail.
 * Two QPs share the SRQ.
 */
#include "simtest.h"

#define SLOT 512

int main(void)
{
	struct st_dev d;
	struct st_cq acq, bcq, brcq, ccq;
	struct st_qp a, b, a2, b2;      /* a->b and a2->b2; b and b2 receive through the SRQ */
	struct st_srq s;
	struct st_mr m, src;
	struct st_qp_attr sa = { .max_send_wr = 64, .max_recv_wr = 0, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline = 64 };
	struct st_qp_attr ra = sa;
	struct st_addr aa, ba, a2a, b2a;
	struct mlx5dv_context mc;
	uint32_t owner[256];            /* which message each SRQ WQE holds (for checks) */
	static uint32_t fifo[4096];     /* posted WQE indices in posting order */
	uint32_t fh = 0, ft = 0;
	uint32_t posted = 0, received = 0, i;
	int cqe_v1 = 0;
	char b_[200];

	st_init("t_srq", 30);
	st_dev_open(&d, 0);
	memset(&mc, 0, sizeof(mc));
	if (mlx5dv_query_device(d.ctx, &mc) == 0)
		cqe_v1 = !!(mc.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1);
	st_cq_create(&d, &acq, 128);
	st_cq_create(&d, &bcq, 128);
	st_cq_create(&d, &brcq, 128);
	st_cq_create(&d, &ccq, 128);
	st_srq_create(&d, &s, 15, 1);
	REQUIRE(s.nwqe >= 16 && s.nwqe <= 256);
	ra.srq = s.srq;
	st_qp_create(&d, &a, &acq, &acq, &sa);
	st_qp_create(&d, &b, &bcq, &brcq, &ra);
	st_qp_create(&d, &a2, &ccq, &ccq, &sa);
	st_qp_create(&d, &b2, &bcq, &brcq, &ra);
	CHECK_EQ(b.dv.rq.wqe_cnt, 0);
	st_addr_of(&d, &a, &aa);
	st_addr_of(&d, &b, &ba);
	st_addr_of(&d, &a2, &a2a);
	st_addr_of(&d, &b2, &b2a);
	st_qp_connect(&d, &a, &ba);
	st_qp_connect(&d, &b, &aa);
	st_qp_connect(&d, &a2, &b2a);
	st_qp_connect(&d, &b2, &a2a);
	st_mr_alloc(&d, &m, (size_t)SLOT * s.nwqe, ST_ACCESS_ALL);
	st_mr_alloc(&d, &src, 4096, ST_ACCESS_ALL);

	/* Fill the SRQ (all but one WQE, so the free list never runs dry). */
	st_ctx = "post";
	for (i = 0; i + 1 < s.nwqe; i++) {
		uint32_t idx = s.head;
		struct st_sge g = { (uint8_t *)m.buf + (size_t)idx * SLOT, SLOT, m.mr->lkey };
		CHECK_EQ(st_srq_post(&s, &g, 1), idx);
		owner[idx] = ~0u;
		fifo[ft++] = idx;
		posted++;
	}

	/* Many messages from both senders, several laps of the SRQ. */
	st_ctx = "receive";
	for (i = 0; i < 8 * s.nwqe && !st_failures; i++) {
		struct st_qp *snd = (i & 1) ? &a2 : &a;
		struct st_cq *scq = (i & 1) ? &ccq : &acq;
		uint32_t len = 33 + (i * 97) % 400, k, widx;
		uint8_t *p = src.buf;
		struct st_wqe w;
		struct mlx5_cqe64 c;

		for (k = 0; k < len; k++)
			p[k] = (uint8_t)(i + k * 5);
		st_wqe_begin(&w);
		st_wqe_data(&w, len, src.mr->lkey, p);
		st_post(snd, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		if (!ST_POLL(scq, &c, 3000))
			break;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "%s", st_cqe_str(&c, b_, sizeof(b_)));
		if (!ST_POLL(&brcq, &c, 3000))
			break;
		received++;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_RESP_SEND, "%s", st_cqe_str(&c, b_, sizeof(b_)));
		CHECK_EQ(be32toh(c.byte_cnt), len);
		CHECK_EQ(be32toh(c.flags_rqpn) & 0xffffff, snd->qpn);
		if (!cqe_v1)
			CHECK_EQ(be32toh(c.srqn_uidx) & 0xffffff, s.dv.srqn);
		widx = st_cqe_wqe_counter(&c);
		if (!CHECKF(widx < s.nwqe, "wqe_counter %u outside the SRQ", widx))
			break;
		CHECKF(owner[widx] == ~0u, "SRQ WQE %u completed twice", widx);
		/* the hardware follows the free list, so WQEs are used in posting order */
		CHECKF(widx == fifo[fh], "used SRQ WQE %u, the list head was %u", widx, fifo[fh]);
		fh++;
		owner[widx] = i;
		if (st_cqe_format(&c) == 0)
			CHECKF(!memcmp((uint8_t *)m.buf + (size_t)widx * SLOT, p, len),
			       "message %u in SRQ WQE %u differs", i, widx);
		/* give the WQE back (tail relink) and post it again */
		st_srq_free(&s, widx);
		{
			uint32_t nidx = s.head;
			struct st_sge g = { (uint8_t *)m.buf + (size_t)nidx * SLOT, SLOT, m.mr->lkey };
			CHECK_EQ(st_srq_post(&s, &g, 1), nidx);
			owner[nidx] = ~0u;
			if (ft < sizeof(fifo) / sizeof(fifo[0]))
				fifo[ft++] = nidx;
			posted++;
		}
	}
	CHECK_EQ(received, 8 * s.nwqe);

	/* The record counter bounds what the hardware takes: the free list links every
	 * WQE, yet only posted ones may be used. Consume all posted WQEs, then a SEND
	 * waits (RNR, rnr_retry 7) until one more is posted. */
	st_ctx = "counter limit";
	{
		uint32_t left = s.nwqe - 1, k;
		struct mlx5_cqe64 c;
		struct st_wqe w;
		uint16_t idx;

		for (k = 0; k < left && !st_failures; k++) {
			st_wqe_begin(&w);
			st_wqe_inline(&w, "drain", 5);
			st_post(&a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
			ST_POLL(&acq, &c, 3000);
			if (ST_POLL(&brcq, &c, 3000)) {
				CHECK_EQ(st_cqe_wqe_counter(&c), fifo[fh]);
				fh++;
				st_srq_free(&s, st_cqe_wqe_counter(&c));
			}
		}
		/* the SRQ is now empty (all WQEs free, none posted) */
		st_wqe_begin(&w);
		st_wqe_inline(&w, "waits", 5);
		idx = st_post(&a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		CHECKF(st_cq_empty_for(&brcq, 300), "a receive completed with no SRQ WQE posted");
		CHECK(st_cq_empty_for(&acq, 1));
		{
			uint32_t nidx = s.head;
			struct st_sge g = { (uint8_t *)m.buf + (size_t)nidx * SLOT, SLOT, m.mr->lkey };
			memset((void *)g.addr, 0, 8);
			st_srq_post(&s, &g, 1);
			if (ST_POLL(&brcq, &c, 5000)) {
				CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
				CHECK_EQ(st_cqe_wqe_counter(&c), nidx);
				if (st_cqe_format(&c) == 0)
					CHECK(!memcmp(g.addr, "waits", 5));
			}
			if (ST_POLL(&acq, &c, 5000))
				CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		}
	}

	/* RDMA WRITE with immediate also takes an SRQ WQE (and writes nothing into it). */
	st_ctx = "WRITE_IMM through the SRQ";
	{
		struct st_wqe w;
		struct mlx5_cqe64 c;
		uint32_t nidx = s.head;
		struct st_sge g = { (uint8_t *)m.buf + (size_t)nidx * SLOT, SLOT, m.mr->lkey };
		uint8_t *tgt = src.buf + 2048;

		memset((void *)g.addr, 0x3c, 16);
		st_srq_post(&s, &g, 1);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)tgt, src.mr->rkey);
		st_wqe_inline(&w, "imm", 4);
		st_post(&a2, &w, MLX5_OPCODE_RDMA_WRITE_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE, htobe32(0x5150), ST_RING_BF);
		if (ST_POLL(&ccq, &c, 3000))
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
		if (ST_POLL(&brcq, &c, 3000)) {
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_WR_IMM);
			CHECK_EQ(st_cqe_wqe_counter(&c), nidx);
			CHECK_EQ(c.imm_inval_pkey, htobe32(0x5150));
			CHECK_EQ(be32toh(c.byte_cnt), 4);
			CHECK_EQ(be32toh(c.flags_rqpn) & 0xffffff, a2.qpn);
			if (!cqe_v1)
				CHECK_EQ(be32toh(c.srqn_uidx) & 0xffffff, s.dv.srqn);
		}
		CHECK(!memcmp(tgt, "imm", 4));
		CHECK(((uint8_t *)g.addr)[0] == 0x3c);
	}

	st_ctx = "teardown";
	CHECK(st_cq_empty_for(&brcq, 10));
	st_qp_destroy(&a);
	st_qp_destroy(&b);
	st_qp_destroy(&a2);
	st_qp_destroy(&b2);
	CHECK(ibv_destroy_srq(s.srq) == 0);
	st_mr_free(&m);
	st_mr_free(&src);
	st_cq_destroy(&acq);
	st_cq_destroy(&bcq);
	st_cq_destroy(&brcq);
	st_cq_destroy(&ccq);
	st_dev_close(&d);
	st_exit();
	return 0;
}
