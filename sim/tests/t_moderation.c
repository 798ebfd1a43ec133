/*
 * t_moderation: unsignaled WQEs with one signaled WQE every N. One CQE
 * retires everything up to its WQE; unsignaled WQEs produce no CQE; the SQ
 * is reused only after a CQE covers it and the CQ never overruns.
 */
#include "simtest.h"

static struct st_pair P;
static struct st_mr R;

#define TOTAL 4000

struct inflight {
	uint32_t end_pi;      /* pi after the signaled WQE */
	uint16_t idx;         /* its WQE index */
};

int main(void)
{
	/* 1-SGE RC QP: 256-B max WQEs, 32 WRs -> 128 WQEBBs */
	struct st_qp_attr a = { .max_send_wr = 32, .max_recv_wr = 1, .max_send_sge = 1,
				.max_recv_sge = 1 };
	static const unsigned periods[] = { 1, 4, 16, 31 };
	struct inflight fl[64];
	uint32_t ring, tail;
	unsigned pi_idx;
	struct mlx5_cqe64 c;
	char b[200];

	st_init("t_moderation", 60);
	/* a small CQ (8 entries): only signaled WQEs may take CQ space */
	st_pair_open_ex(&P, &a, 7, 7);
	REQUIRE(P.acq.dv.cqe_cnt == 8);
	st_mr_alloc(&P.d, &R, TOTAL * 8, ST_ACCESS_ALL);
	ring = P.a.dv.sq.wqe_cnt;
	CHECK_EQ(ring, 128);

	for (pi_idx = 0; pi_idx < sizeof(periods) / sizeof(periods[0]) && !st_failures; pi_idx++) {
		unsigned N = periods[pi_idx], n = 0, head = 0, tl = 0, cqes = 0, signaled = 0;
		char ctx[64];

		snprintf(ctx, sizeof(ctx), "signal every %u", N);
		st_ctx = ctx;
		memset(R.buf, 0, TOTAL * 8);
		tail = P.a.pi;       /* everything before is retired */
		while ((n < TOTAL || head != tl) && !st_failures) {
			/* post while the ring has room (each WQE is 1 WQEBB) and few CQEs are pending */
			int posted = 0;
			while (n < TOTAL && P.a.pi - tail < ring && head - tl < 6) {
				struct st_wqe w;
				uint64_t v = 0x1000000ull * pi_idx + n + 1;
				int sig = (n % N == N - 1) || n == TOTAL - 1 ||
					  P.a.pi + 1 - tail == ring;   /* forced when the ring is full */
				uint16_t idx;

				st_wqe_begin(&w);
				st_wqe_raddr(&w, (uintptr_t)R.buf + (uint64_t)n * 8, R.mr->rkey);
				st_wqe_inline(&w, &v, 8);
				idx = st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0,
						   sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
				n++;
				posted++;
				if (sig) {
					fl[head % 64].end_pi = P.a.pi;
					fl[head % 64].idx = idx;
					head++;
					signaled++;
				}
			}
			if (posted)
				st_ring(&P.a, (n & 1) ? ST_RING_BF : ST_RING_DB);
			if (head == tl)
				continue;
			if (!ST_POLL(&P.acq, &c, 3000))
				break;
			cqes++;
			if (!CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "%s", st_cqe_str(&c, b, sizeof(b))))
				break;
			/* the CQE names the oldest outstanding signaled WQE, and retires up to it */
			CHECKF(st_cqe_wqe_counter(&c) == fl[tl % 64].idx, "CQE for %u, expected %u",
			       st_cqe_wqe_counter(&c), fl[tl % 64].idx);
			tail = fl[tl % 64].end_pi;
			tl++;
		}
		CHECK_EQ(cqes, signaled);
		{
			unsigned k, bad = 0;
			for (k = 0; k < TOTAL; k++)
				bad += ((uint64_t *)R.buf)[k] != 0x1000000ull * pi_idx + k + 1;
			CHECKF(bad == 0, "%u of %u writes missing", bad, TOTAL);
		}
		CHECK(st_cq_empty_for(&P.acq, 10));
	}

	/* A long run of unsignaled WQEs completes with one signaled NOP. */
	st_ctx = "unsignaled then NOP";
	{
		uint16_t idx;
		unsigned k;
		memset(R.buf, 0, 100 * 8);
		for (k = 0; k < 100; k++) {
			struct st_wqe w;
			uint64_t v = k + 7;
			st_wqe_begin(&w);
			st_wqe_raddr(&w, (uintptr_t)R.buf + k * 8, R.mr->rkey);
			st_wqe_inline(&w, &v, 8);
			st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, 0, 0);
		}
		st_ring(&P.a, ST_RING_DB);
		CHECK(st_cq_empty_for(&P.acq, 50));     /* nothing signaled yet */
		idx = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		if (ST_POLL(&P.acq, &c, 3000))
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		for (k = 0; k < 100; k++)
			CHECK_EQ(((uint64_t *)R.buf)[k], k + 7);
		CHECK(st_cq_empty_for(&P.acq, 10));
	}

	st_ctx = NULL;
	st_mr_free(&R);
	st_pair_close(&P);
	st_exit();
	return 0;
}
