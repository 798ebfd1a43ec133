/*
 * t_dc_ops: WQEs through a DCI to DCTs of the same device (one process).
 * Every opcode (RDMA_WRITE gather and inline, RDMA_WRITE_IMM, SEND, SEND_IMM, RDMA_READ,
 * CS, FA, masked CS/FA 32 and 64 bit) with the 16-byte and the 48-byte address segment;
 * receives through the DCT's SRQ with the receive CQE fields libmlx5 reads (source QPN,
 * SLID, SRQN, immediate, byte count); a DCI switching targets WQE by WQE (all served, in
 * order, each to its own target); multi-packet SENDs of two DCIs interleaved into one SRQ;
 * WQEs that wrap at the end of the send queue; RVXSIM_TRACE decoding the address segment.
 * Re-runs itself over RoCE (extended address segment with GRH).
 */
#include "t_dc_common.h"

#define BUFSZ (256 * 1024)
#define MIN_U(a, b) ((a) < (b) ? (a) : (b))

static struct st_dev D;
static struct st_cq ICQ, TCQ, TCQ2;
static struct st_srq SRQ, SRQ2;
static struct ibv_qp *DCT_A, *DCT_B;
static struct dc_target TA, TB;
static struct st_qp Q, Q2;
static struct st_mr L, R, R2;

static struct mlx5_cqe64 poll_req(uint16_t idx)
{
	struct mlx5_cqe64 c;
	char b[160];

	memset(&c, 0, sizeof(c));
	if (ST_POLL(&ICQ, &c, 5000)) {
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "requester CQE %s", st_cqe_str(&c, b, sizeof(b)));
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, Q.qpn);
	}
	return c;
}

static struct mlx5_cqe64 poll_resp(struct st_cq *cq, uint8_t opcode, struct ibv_qp *dct,
				   struct st_srq *srq, uint32_t src_qpn, uint32_t len)
{
	struct mlx5_cqe64 c;
	char b[160];

	memset(&c, 0, sizeof(c));
	if (ST_POLL(cq, &c, 5000)) {
		CHECKF(st_cqe_opcode(&c) == opcode, "responder CQE %s", st_cqe_str(&c, b, sizeof(b)));
		CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, dct->qp_num);
		CHECK_EQ(be32toh(c.flags_rqpn) & 0xffffff, src_qpn);
		CHECK_EQ(be32toh(c.srqn_uidx) & 0xffffff, srq->dv.srqn);
		CHECK_EQ(be32toh(c.byte_cnt), len);
		if (!D.eth)
			CHECK_EQ(be16toh(c.slid), D.port.lid);
		else
			CHECK(be32toh(c.flags_rqpn) >> 28 & 3);   /* GRH present */
		st_srq_free(srq, st_cqe_wqe_counter(&c));
	}
	return c;
}

static void fill(void *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = (uint8_t)(seed + i * 7);
}

static void t_write(void)
{
	uint8_t *l = L.buf, *r = R.buf;

	for (int ext = 0; ext < 2; ext++) {
		struct st_wqe w;
		uint16_t idx;

		st_ctx = ext ? "write gather, extended AV" : "write gather, base AV";
		fill(l, 300, (uint8_t)(11 + ext));
		memset(r, 0, 400);
		st_wqe_begin(&w);
		dc_wqe_av(&w, &D, &TA, ext);
		st_wqe_raddr(&w, (uintptr_t)r + 8, R.mr->rkey);
		st_wqe_data(&w, 100, L.mr->lkey, l);
		st_wqe_data(&w, 200, L.mr->lkey, l + 100);
		CHECK_EQ(w.len, 16 + (ext || D.eth ? 48 : 16) + 16 + 32);
		idx = st_post(&Q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
		poll_req(idx);
		CHECK(!memcmp(r + 8, l, 300));
		CHECK(r[7] == 0 && r[308] == 0);

		st_ctx = ext ? "write inline, extended AV" : "write inline, base AV";
		st_wqe_begin(&w);
		dc_wqe_av(&w, &D, &TA, ext);
		st_wqe_raddr(&w, (uintptr_t)r + 1000, R.mr->rkey);
		st_wqe_inline(&w, "dc-inline-payload", 17);
		idx = st_post(&Q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		poll_req(idx);
		CHECK(!memcmp(r + 1000, "dc-inline-payload", 17));
	}

	/* a DCI made with max_inline_data 0 (as UCX makes them) sends inline data up to the size
	 * of the WQEs its queue was sized for (256 bytes for one SGE) */
	st_ctx = "inline beyond max_inline_data";
	{
		struct st_wqe w;
		uint16_t idx;
		struct mlx5_cqe64 c;

		CHECK(Q2.cap.max_inline_data < 150);
		fill(l + 2000, 150, 77);
		st_wqe_begin(&w);
		dc_wqe_av(&w, &D, &TA, 0);
		st_wqe_raddr(&w, (uintptr_t)r + 2000, R.mr->rkey);
		st_wqe_inline(&w, l + 2000, 150);
		REQUIRE(w.len <= 256);
		idx = st_post(&Q2, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
		if (ST_POLL(&ICQ, &c, 5000)) {
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
			CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, Q2.qpn);
		}
		CHECK(!memcmp(r + 2000, l + 2000, 150));
	}
}

static void t_send(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct mlx5_cqe64 c;
	struct st_sge sg = { r + 4096, 1024, R.mr->rkey };
	struct st_wqe w;
	uint16_t idx;

	for (int ext = 0; ext < 2; ext++) {
		st_ctx = ext ? "send, extended AV" : "send, base AV";
		sg.lkey = R.mr->lkey;
		st_srq_post(&SRQ, &sg, 1);
		fill(l, 777, (uint8_t)(40 + ext));
		idx = dc_post_send(&Q, &D, &TA, ext, l, 777, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		poll_req(idx);
		poll_resp(&TCQ, MLX5_CQE_RESP_SEND, DCT_A, &SRQ, Q.qpn, 777);
		CHECK(!memcmp(r + 4096, l, 777));
	}

	st_ctx = "send with immediate";
	st_srq_post(&SRQ, &sg, 1);
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 0);
	st_wqe_inline(&w, "imm!", 4);
	idx = st_post(&Q, &w, MLX5_OPCODE_SEND_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED,
		      htobe32(0xabcd1234), ST_RING_BF);
	poll_req(idx);
	c = poll_resp(&TCQ, MLX5_CQE_RESP_SEND_IMM, DCT_A, &SRQ, Q.qpn, 4);
	CHECK_EQ(be32toh(c.imm_inval_pkey), 0xabcd1234);
	CHECK(c.op_own & 2);      /* solicited */

	st_ctx = "write with immediate";
	st_srq_post(&SRQ, &sg, 1);
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 1);
	st_wqe_raddr(&w, (uintptr_t)r + 9000, R.mr->rkey);
	st_wqe_data(&w, 64, L.mr->lkey, l);
	idx = st_post(&Q, &w, MLX5_OPCODE_RDMA_WRITE_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE,
		      htobe32(0x55aa), ST_RING_DB);
	poll_req(idx);
	c = poll_resp(&TCQ, MLX5_CQE_RESP_WR_IMM, DCT_A, &SRQ, Q.qpn, 64);
	CHECK_EQ(be32toh(c.imm_inval_pkey), 0x55aa);
	CHECK(!memcmp(r + 9000, l, 64));

	st_ctx = "multi-packet send";
	{
		struct st_sge big = { r + 65536, 40000, R.mr->lkey };
		st_srq_post(&SRQ, &big, 1);
		fill(l, 40000, 99);
		idx = dc_post_send(&Q, &D, &TA, 0, l, 40000, L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		poll_req(idx);
		poll_resp(&TCQ, MLX5_CQE_RESP_SEND, DCT_A, &SRQ, Q.qpn, 40000);
		CHECK(!memcmp(r + 65536, l, 40000));
	}
}

static void t_read_atomics(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct mlx5_cqe64 c;
	struct st_wqe w;
	uint16_t idx;
	uint64_t *t64 = (uint64_t *)(r + 20480), *res = (uint64_t *)(l + 20480);
	uint32_t *t32 = (uint32_t *)(r + 20544), *res32 = (uint32_t *)(l + 20544);

	st_ctx = "read";
	fill(r + 12288, 3000, 5);
	memset(l + 12288, 0, 3000);
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 1);
	st_wqe_raddr(&w, (uintptr_t)r + 12288, R.mr->rkey);
	st_wqe_data(&w, 3000, L.mr->lkey, l + 12288);
	idx = st_post(&Q, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	c = poll_req(idx);
	CHECK_EQ(be32toh(c.byte_cnt), 3000);
	CHECK(!memcmp(l + 12288, r + 12288, 3000));

	st_ctx = "compare and swap";
	*t64 = 1000;
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 0);
	st_wqe_raddr(&w, (uintptr_t)t64, R.mr->rkey);
	st_wqe_atomic(&w, 2000, 1000);
	st_wqe_data(&w, 8, L.mr->lkey, res);
	CHECK_EQ(w.len, D.eth ? 112 : 80);   /* ctrl, AV, raddr, atomic, result: DS 5 (7 on RoCE) */
	idx = st_post(&Q, &w, MLX5_OPCODE_ATOMIC_CS, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	poll_req(idx);
	CHECK_EQ(*res, 1000);
	CHECK_EQ(*t64, 2000);

	st_ctx = "fetch and add";
	idx = dc_post_fa(&Q, &D, &TA, (uintptr_t)t64, R.mr->rkey, 5, res, L.mr->lkey);
	c = poll_req(idx);
	CHECK_EQ(*res, 2000);
	CHECK_EQ(*t64, 2005);
	CHECK_EQ(be32toh(c.byte_cnt), 8);

	st_ctx = "masked compare and swap 32";
	*t32 = 0x12345678;
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 1);
	st_wqe_raddr(&w, (uintptr_t)t32, R.mr->rkey);
	st_wqe_masked_cs32(&w, 0xaabb0000, 0x12340000, 0xffff0000, 0xffff0000);
	st_wqe_data(&w, 4, L.mr->lkey, res32);
	idx = st_post(&Q, &w, MLX5_OPCODE_ATOMIC_MASKED_CS, 0x08, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	poll_req(idx);
	CHECK_EQ(*res32, 0x12345678);
	CHECK_EQ(*t32, 0xaabb5678);

	st_ctx = "masked compare and swap 64";
	*t64 = 0x1111222233334444ull;
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 0);
	st_wqe_raddr(&w, (uintptr_t)t64, R.mr->rkey);
	st_wqe_masked_cs64(&w, 0x9999000000000000ull, 0x1111000000000000ull,
			   0xffff000000000000ull, 0xffff000000000000ull);
	st_wqe_data(&w, 8, L.mr->lkey, res);
	idx = st_post(&Q, &w, MLX5_OPCODE_ATOMIC_MASKED_CS, 0x09, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	poll_req(idx);
	CHECK_EQ(*res, 0x1111222233334444ull);
	CHECK_EQ(*t64, 0x9999222233334444ull);

	st_ctx = "masked fetch and add 32";
	*t32 = 0x000000ff;
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 0);
	st_wqe_raddr(&w, (uintptr_t)t32, R.mr->rkey);
	st_wqe_masked_fa32(&w, 0x00000001, 0x00000080);   /* the carry stops at bit 7 */
	st_wqe_data(&w, 4, L.mr->lkey, res32);
	idx = st_post(&Q, &w, MLX5_OPCODE_ATOMIC_MASKED_FA, 0x08, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	poll_req(idx);
	CHECK_EQ(*res32, 0xff);
	CHECK_EQ(*t32, 0x00);

	st_ctx = "masked fetch and add 64";
	*t64 = 10;
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 1);
	st_wqe_raddr(&w, (uintptr_t)t64, R.mr->rkey);
	st_wqe_masked_fa64(&w, 32, 0);
	st_wqe_data(&w, 8, L.mr->lkey, res);
	idx = st_post(&Q, &w, MLX5_OPCODE_ATOMIC_MASKED_FA, 0x09, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	poll_req(idx);
	CHECK_EQ(*res, 10);
	CHECK_EQ(*t64, 42);
}

/* One DCI, two DCTs: WQE by WQE to A, B, A, B...; a SEND to B between WRITEs to A. */
static void t_switch(void)
{
	uint64_t *ra = (uint64_t *)((uint8_t *)R.buf + 32768), *rb = (uint64_t *)R2.buf;
	uint64_t *src = (uint64_t *)((uint8_t *)L.buf + 32768);
	struct st_sge sg = { (uint8_t *)R2.buf + 8192, 64, R2.mr->lkey };
	uint16_t idxs[40];
	const int n = 40;

	st_ctx = "switching targets";
	memset(ra, 0, 8 * n);
	memset(rb, 0, 8 * n);
	for (int i = 0; i < n; i++)
		src[i] = 0x1000 + (uint64_t)i;
	st_srq_post(&SRQ2, &sg, 1);
	for (int i = 0; i < n; i++) {
		const struct dc_target *t = (i & 1) ? &TB : &TA;
		uint64_t *dst = (i & 1) ? rb : ra;
		uint32_t rkey = (i & 1) ? R2.mr->rkey : R.mr->rkey;
		struct st_wqe w;
		uint16_t idx;

		st_wqe_begin(&w);
		dc_wqe_av(&w, &D, t, i % 3 == 0);
		if (i == 21) {       /* a SEND to B in the middle */
			st_wqe_data(&w, 8, L.mr->lkey, &src[i]);
			idx = st_wqe_write(&Q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		} else {
			st_wqe_raddr(&w, (uintptr_t)&dst[i], rkey);
			st_wqe_data(&w, 8, L.mr->lkey, &src[i]);
			idx = st_wqe_write(&Q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		}
		idxs[i] = idx;
		if ((i & 7) == 7 || i == n - 1)
			st_ring(&Q, ST_RING_DB);
	}
	for (int i = 0; i < n; i++) {
		struct mlx5_cqe64 c;
		if (!ST_POLL(&ICQ, &c, 5000))
			break;
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
		CHECK_EQ(st_cqe_wqe_counter(&c), idxs[i]);
	}
	for (int i = 0; i < n; i++) {
		if (i == 21)
			continue;
		CHECKF(((i & 1) ? rb : ra)[i] == 0x1000 + (uint64_t)i, "WQE %d to %s", i, (i & 1) ? "B" : "A");
		CHECKF(((i & 1) ? ra : rb)[i] == 0, "WQE %d reached the other target", i);
	}
	poll_resp(&TCQ2, MLX5_CQE_RESP_SEND, DCT_B, &SRQ2, Q.qpn, 8);
	CHECK_EQ(*(uint64_t *)((uint8_t *)R2.buf + 8192), 0x1000 + 21);
}

/* Two DCIs, multi-packet SENDs to one DCT at once: each message keeps its receive WQE. */
static void t_two_senders(void)
{
	uint8_t *l = L.buf, *r = R.buf;
	struct st_sge s1 = { r + 131072, 30000, R.mr->lkey }, s2 = { r + 163840, 30000, R.mr->lkey };
	struct st_wqe w;
	uint16_t i1, i2;
	int got = 0;

	st_ctx = "two DCIs into one SRQ";
	st_srq_post(&SRQ, &s1, 1);
	st_srq_post(&SRQ, &s2, 1);
	fill(l + 131072, 30000, 1);
	fill(l + 163840, 30000, 2);
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 0);
	st_wqe_data(&w, 30000, L.mr->lkey, l + 131072);
	i1 = st_wqe_write(&Q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_wqe_begin(&w);
	dc_wqe_av(&w, &D, &TA, 1);
	st_wqe_data(&w, 30000, L.mr->lkey, l + 163840);
	i2 = st_wqe_write(&Q2, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_ring(&Q, ST_RING_DB);
	st_ring(&Q2, ST_RING_DB);
	for (int k = 0; k < 2; k++) {   /* the two DCIs complete in either order */
		struct mlx5_cqe64 c;
		if (!ST_POLL(&ICQ, &c, 5000))
			break;
		uint32_t qpn = be32toh(c.sop_drop_qpn) & 0xffffff;
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
		CHECK(qpn == Q.qpn || qpn == Q2.qpn);
		CHECK_EQ(st_cqe_wqe_counter(&c), qpn == Q.qpn ? i1 : i2);
	}
	for (int k = 0; k < 2; k++) {
		struct mlx5_cqe64 c;
		if (!ST_POLL(&TCQ, &c, 5000))
			break;
		uint32_t src = be32toh(c.flags_rqpn) & 0xffffff;
		CHECK(src == Q.qpn || src == Q2.qpn);
		got |= src == Q.qpn ? 1 : 2;
		st_srq_free(&SRQ, st_cqe_wqe_counter(&c));
	}
	CHECK_EQ(got, 3);
	/* the two receive buffers hold the two messages, one each, whole */
	CHECK((!memcmp(r + 131072, l + 131072, 30000) && !memcmp(r + 163840, l + 163840, 30000)) ||
	      (!memcmp(r + 131072, l + 163840, 30000) && !memcmp(r + 163840, l + 131072, 30000)));
}

/* Enough WQEs to lap the send queue several times: the raddr segment of a WQE with the
 * extended address segment starts exactly at qend on some of them. */
static void t_wrap(void)
{
	uint64_t *dst = (uint64_t *)((uint8_t *)R.buf + 200000);
	uint64_t *src = (uint64_t *)((uint8_t *)L.buf + 200000);
	uint32_t total = Q.dv.sq.wqe_cnt * 3 / 2 + 3;

	st_ctx = "wrap";
	for (uint32_t done = 0; done < total;) {
		uint32_t batch = MIN_U(16, total - done);
		uint16_t last = 0;
		for (uint32_t k = 0; k < batch; k++) {
			struct st_wqe w;
			uint32_t i = done + k;
			src[i % 512] = 0xdead0000 + i;
			st_wqe_begin(&w);
			dc_wqe_av(&w, &D, &TA, (i % 5) != 0);
			st_wqe_raddr(&w, (uintptr_t)&dst[i % 512], R.mr->rkey);
			if (i & 1)
				st_wqe_data(&w, 8, L.mr->lkey, &src[i % 512]);
			else
				st_wqe_inline(&w, &src[i % 512], 8);
			last = st_wqe_write(&Q, &w, MLX5_OPCODE_RDMA_WRITE, 0,
					    k == batch - 1 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
		}
		st_ring(&Q, ST_RING_DB);
		poll_req(last);
		for (uint32_t k = 0; k < batch; k++)
			CHECKF(dst[(done + k) % 512] == 0xdead0000 + done + k, "WQE %u", done + k);
		done += batch;
		if (st_failures)
			break;
	}
}

static void setup(void)
{
	st_dev_open(&D, 0);
	st_cq_create(&D, &ICQ, 1024);
	st_cq_create(&D, &TCQ, 256);
	st_cq_create(&D, &TCQ2, 256);
	st_srq_create(&D, &SRQ, 64, 2);
	st_srq_create(&D, &SRQ2, 64, 2);
	st_mr_alloc(&D, &L, BUFSZ, DC_ACCESS_ALL);
	st_mr_alloc(&D, &R, BUFSZ, DC_ACCESS_ALL);
	st_mr_alloc(&D, &R2, 65536, DC_ACCESS_ALL);
	DCT_A = dc_create_dct(&D, &TCQ, SRQ.srq, DC_KEY);
	DCT_B = dc_create_dct(&D, &TCQ2, SRQ2.srq, DC_KEY + 1);
	REQUIRE(DCT_A && DCT_B);
	REQUIRE(dc_dct_ready(&D, DCT_A, DC_ACCESS_ALL) == 0);
	REQUIRE(dc_dct_ready(&D, DCT_B, DC_ACCESS_ALL) == 0);
	dc_target_of(&D, DCT_A, DC_KEY, &TA);
	dc_target_of(&D, DCT_B, DC_KEY + 1, &TB);
	dc_create_dci(&D, &Q, &ICQ, 128, 2, 64);
	dc_create_dci(&D, &Q2, &ICQ, 16, 1, 0);
	REQUIRE(dc_dci_ready(&D, &Q, 7, 7, 14) == 0);
	REQUIRE(dc_dci_ready(&D, &Q2, 7, 7, 14) == 0);
}

/* Sub-run with RVXSIM_TRACE_FILE: the trace names both address segment forms. */
static void t_trace(const char *argv0)
{
	char path[128], env[160], *buf;
	FILE *f;
	long n;
	int rc;

	st_ctx = "trace";
	snprintf(path, sizeof(path), "/tmp/t_dc_ops_trace.%d", (int)getpid());
	snprintf(env, sizeof(env), "RVXSIM_TRACE_FILE=%s", path);
	rc = st_rerun(argv0, 30000, env, "T_DC_OPS_TRACE=1", NULL);
	CHECKF(rc == 0, "trace run exited with %d", rc);
	f = fopen(path, "r");
	if (!CHECK(f != NULL))
		return;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		n = 0;
	fclose(f);
	unlink(path);
	CHECKF(strstr(buf, "    av base dqpn 0x") != NULL, "no base address segment in the trace");
	CHECKF(strstr(buf, "    av extended dqpn 0x") != NULL, "no extended address segment in the trace");
	CHECKF(strstr(buf, "key 0x1ee7a330c0ffee01") != NULL, "the trace does not show the DC key");
	CHECKF(strstr(buf, "DCI connects to lid") != NULL, "the trace does not show the connection");
	free(buf);
}

int main(int argc, char **argv)
{
	const char *link = getenv("RVXSIM_LINK");
	int trace_run = getenv("T_DC_OPS_TRACE") != NULL;

	(void)argc;
	st_init("t_dc_ops", 60);
	setup();
	if (link && !strcmp(link, "eth")) {
		st_name = "t_dc_ops(RoCE)";
		CHECK(D.eth);
	}
	if (trace_run) {
		uint8_t *l = L.buf, *r = R.buf;
		strcpy((char *)l, "traced");
		poll_req(dc_post_write(&Q, &D, &TA, 0, (uintptr_t)r, R.mr->rkey, l, 7, L.mr->lkey,
				       MLX5_WQE_CTRL_CQ_UPDATE));
		poll_req(dc_post_write(&Q, &D, &TB, 1, (uintptr_t)R2.buf, R2.mr->rkey, l, 7,
				       L.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE));
		st_exit();
	}
	t_write();
	t_send();
	t_read_atomics();
	t_switch();
	t_two_senders();
	t_wrap();
	st_ctx = "teardown";
	CHECK(st_cq_empty_for(&ICQ, 10));
	CHECK(st_cq_empty_for(&TCQ, 10));
	if (!link && !st_failures)
		t_trace(argv[0]);
	if (!link && !st_failures) {
		int rc = st_rerun(argv[0], 60000, "RVXSIM_LINK=eth", NULL);
		st_ctx = NULL;
		CHECKF(rc == 0 || rc == 77, "the RoCE run (RVXSIM_LINK=eth) exited with %d", rc);
	}
	st_exit();
	return 0;
}
