/*
 * t_wrap: WQEs that run past the end of the SQ buffer continue at its start
 * (inline payload split at qend), over many laps of a small ring, and the
 * 16-bit WQE index wraps at 0xffff whatever the ring size.
 */
#include "simtest.h"

static struct st_pair P;
static struct st_mr R;

#define SLOT 256
#define NSLOT 64

static void fill(uint8_t *p, unsigned n, unsigned seed)
{
	unsigned i;
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 29u + i * 3u + 1);
}

int main(void)
{
	struct st_qp_attr a = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 180 };
	uint32_t ring, maxinl, straddled = 0, n, lap0;
	unsigned seq = 0;
	struct mlx5_cqe64 c;
	char b[200];

	st_init("t_wrap", 60);
	st_pair_open_ex(&P, &a, 64, 7);
	st_mr_alloc(&P.d, &R, SLOT * NSLOT, ST_ACCESS_ALL);
	ring = P.a.dv.sq.wqe_cnt;
	maxinl = P.a.cap.max_inline_data;
	/* 384-byte max WQEs: 4 WRs -> 2048 bytes -> 32 WQEBBs */
	CHECK_EQ(ring, 32);
	CHECK_EQ(maxinl, 188);
	lap0 = P.a.pi;
	/* Bytes the WQEs do not cover keep garbage, as slots reused by libmlx5 do: the
	 * tail of each WQEBB past DS, and the padding after inline payload. */
	memset(P.a.dv.sq.buf, 0xab, (size_t)ring * 64);
	st_inline_pad = 0xa5;

	/* Batches of 1-3 inline WRITEs of sizes 1..maxinl, last one signaled. */
	st_ctx = "inline writes";
	for (n = 0; n < 1500 && !st_failures; ) {
		unsigned k = 1 + (seq % 3), j, bbs = 0;
		unsigned lens[3], slots[3];
		uint8_t src[3][200];
		uint16_t last = 0;

		for (j = 0; j < k; j++) {
			lens[j] = 1 + (seq * 53u + j * 17u) % maxinl;
			bbs += (32 + ((4 + lens[j] + 15) & ~15u) + 63) / 64;
		}
		if (bbs > ring - 2)
			k = 1;
		for (j = 0; j < k; j++) {
			struct st_wqe w;
			uint8_t *dst;
			uint32_t start = P.a.pi & (ring - 1), nbb;

			slots[j] = (n + j) % NSLOT;
			dst = (uint8_t *)R.buf + slots[j] * SLOT;
			memset(dst, 0xee, SLOT);
			fill(src[j], lens[j], seq + j);
			st_wqe_begin(&w);
			st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
			st_wqe_inline(&w, src[j], lens[j]);
			nbb = (w.len + 63) / 64;
			if (start + nbb > ring)
				straddled++;
			last = st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0,
					    j == k - 1 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
		}
		st_ring(&P.a, (seq & 1) ? ST_RING_BF : ST_RING_DB);
		if (!ST_POLL(&P.acq, &c, 3000))
			break;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == last,
		       "batch %u: %s, expected wqe_counter %u", seq, st_cqe_str(&c, b, sizeof(b)), last);
		for (j = 0; j < k; j++) {
			uint8_t *dst = (uint8_t *)R.buf + slots[j] * SLOT;
			CHECKF(!memcmp(dst, src[j], lens[j]) && dst[lens[j]] == 0xee,
			       "write of %u bytes (batch %u) differs", lens[j], seq);
		}
		n += k;
		seq++;
	}
	CHECKF((P.a.pi - lap0) / ring >= 20, "only %u laps", (P.a.pi - lap0) / ring);
	CHECKF(straddled >= 20, "only %u WQEs straddled qend", straddled);

	/* Largest inline WQE (4 WQEBBs) at every offset of the ring. */
	st_ctx = "max inline at every offset";
	for (n = 0; n < ring * 2 && !st_failures; n++) {
		struct st_wqe w;
		uint8_t src[200];
		uint8_t *dst = (uint8_t *)R.buf;
		uint16_t idx;

		if (n % 2) {   /* shift the alignment by one WQEBB with a NOP */
			st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
			if (!ST_POLL(&P.acq, &c, 3000))
				break;
		}
		memset(dst, 0xee, SLOT);
		fill(src, maxinl, n + 1000);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
		st_wqe_inline(&w, src, maxinl);
		idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0,
			      (n & 2) ? ST_RING_BF : ST_RING_DB);
		if (!ST_POLL(&P.acq, &c, 3000))
			break;
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		CHECKF(!memcmp(dst, src, maxinl) && dst[maxinl] == 0xee, "max inline write at slot %u differs",
		       idx & (ring - 1));
	}

	/* The 16-bit WQE index wraps at 0xffff: NOPs in batches of 16, last signaled. */
	st_ctx = "index wrap";
	while (P.a.pi < 0x10000 + 300 && !st_failures) {
		uint16_t last = 0;
		int j;
		for (j = 0; j < 16; j++) {
			struct st_wqe w;
			st_wqe_begin(&w);
			last = st_wqe_write(&P.a, &w, MLX5_OPCODE_NOP, 0, j == 15 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
		}
		st_ring(&P.a, ST_RING_DB);
		if (!ST_POLL(&P.acq, &c, 3000))
			break;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == last,
		       "pi %u: %s, expected wqe_counter %u", P.a.pi, st_cqe_str(&c, b, sizeof(b)), last);
	}
	/* after the wrap, a data WQE still works */
	{
		struct st_wqe w;
		uint8_t v[8] = { 9, 8, 7, 6, 5, 4, 3, 2 };
		uint16_t idx;
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)R.buf, R.mr->rkey);
		st_wqe_inline(&w, v, 8);
		idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
		if (ST_POLL(&P.acq, &c, 3000))
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		CHECK(!memcmp(R.buf, v, 8));
		CHECK(P.a.pi > 0x10000);
	}

	st_ctx = NULL;
	st_mr_free(&R);
	st_pair_close(&P);
	st_exit();
	return 0;
}
