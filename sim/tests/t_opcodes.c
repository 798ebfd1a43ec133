/*
 * t_opcodes: every RC send opcode on a loopback pair, posted directly into the
 * SQ, completions read directly from the CQs. Data is checked byte for byte and
 * each CQE field that libmlx5 reads is checked.
 */
#include "simtest.h"

#define BUFSZ 65536

static struct st_pair P;
static struct st_mr L;   /* A's local buffer */
static struct st_mr R;   /* B's buffer, the remote target */
static int cqe_v1;
static struct st_dev *cur_dev = &P.d;    /* whose LID responder CQEs carry */

static void fill(void *p, size_t n, unsigned seed)
{
	uint8_t *b = p;
	size_t i;
	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

/* Checks the requester CQE for WQE idx. */
static void expect_req(struct st_qp *q, uint16_t idx, uint8_t opcode, long bytes)
{
	struct mlx5_cqe64 c;
	char s[200];

	if (!ST_POLL(q->scq, &c, 3000))
		return;
	CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "want REQ CQE, got %s", st_cqe_str(&c, s, sizeof(s)));
	CHECK_EQ(st_cqe_sop_qpn(&c) >> 24, opcode);
	CHECK_EQ(st_cqe_sop_qpn(&c) & 0xffffff, q->qpn);
	CHECK_EQ(st_cqe_wqe_counter(&c), idx);
	CHECK_EQ(st_cqe_format(&c), 0);      /* requester scatter is off without sq_sig_all */
	if (bytes >= 0)
		CHECK_EQ(be32toh(c.byte_cnt), (unsigned long)bytes);
}

/*
 * Checks a responder CQE on q's receive CQ. The received bytes are either in
 * the posted buffer or (scatter-to-CQE, format 1) at the start of the CQE.
 */
static void expect_resp(struct st_qp *q, uint8_t op, uint32_t bytes, uint32_t src_qpn,
			int with_imm, uint32_t imm_raw, const void *rbuf, const void *want)
{
	struct mlx5_cqe64 c;
	char s[200];
	uint32_t fr;

	if (!ST_POLL(q->rcq, &c, 3000))
		return;
	CHECKF(st_cqe_opcode(&c) == op, "want RESP op %u, got %s", op, st_cqe_str(&c, s, sizeof(s)));
	CHECK_EQ(be32toh(c.byte_cnt), bytes);
	fr = be32toh(c.flags_rqpn);
	CHECK_EQ(fr & 0xffffff, src_qpn);
	CHECK_EQ((fr >> 24) & 0xf, 0);              /* SL 0 */
	if (!cur_dev->eth) {
		CHECK_EQ((fr >> 28) & 0x3, 0);          /* no GRH on IB */
		CHECK_EQ(be16toh(c.slid), cur_dev->port.lid);
	}
	if (!cqe_v1)
		CHECK_EQ(be32toh(c.srqn_uidx) & 0xffffff, 0);   /* no SRQ */
	if (with_imm)
		CHECK_EQ(c.imm_inval_pkey, imm_raw);
	if (want && bytes) {
		if (st_cqe_format(&c) == 1) {
			CHECK(bytes <= 32);
			CHECK(!memcmp(&c, want, bytes));
		} else {
			CHECK_EQ(st_cqe_format(&c), 0);
			CHECK(!memcmp(rbuf, want, bytes));
		}
	}
}

static void t_nop(void)
{
	uint16_t idx;

	st_ctx = "NOP";
	idx = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_NOP, -1);
	idx = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_BF);   /* ds 1: doorbell path */
	expect_req(&P.a, idx, MLX5_OPCODE_NOP, -1);
}

static void t_write_inline(void)
{
	static const unsigned lens[] = { 1, 8, 12, 13, 40, 60, 100, 128 };
	uint8_t src[256];
	unsigned i;

	st_ctx = "RDMA_WRITE inline";
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		unsigned len = lens[i], off = 64 + i * 512;
		struct st_wqe w;
		uint16_t idx;
		uint8_t *dst = (uint8_t *)R.buf + off;

		memset(dst - 16, 0xee, len + 32);
		fill(src, len, i + 1);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
		st_wqe_inline(&w, src, len);
		CHECK_EQ(w.len / 16, 2 + (4 + len + 15) / 16);
		idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE,
			      0, (i & 1) ? ST_RING_DB : ST_RING_BF);
		expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
		CHECKF(!memcmp(dst, src, len), "inline write of %u bytes: data differs", len);
		CHECKF(dst[-1] == 0xee && dst[len] == 0xee, "inline write of %u bytes touched neighbours", len);
	}
}

/* max_inline_data is libmlx5's limit (ENOMEM at post time), not the adapter's: a WQE written
 * directly whose inline segment is longer but fits the QP's WQE size runs. */
static void t_inline_beyond_max(void)
{
	unsigned len = P.a.cap.max_inline_data + 64;
	uint8_t src[512], *dst = (uint8_t *)R.buf + 8192;
	struct st_wqe w;
	uint16_t idx;

	st_ctx = "RDMA_WRITE inline beyond max_inline_data";
	REQUIRE(len <= sizeof(src));
	fill(src, len, 9);
	memset(dst, 0xee, len);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
	st_wqe_inline(&w, src, len);
	/* 384: the largest WQE of this QP (libmlx5's sizing for 4 SGEs and 128 inline bytes) */
	REQUIRE(w.len <= 384);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
	CHECKF(!memcmp(dst, src, len), "inline write of %u bytes: data differs", len);
}

static void t_write_gather(void)
{
	static const uint32_t lens[3] = { 100, 7, 3000 };
	struct st_wqe w;
	uint8_t *src = (uint8_t *)L.buf + 1024;
	uint8_t *dst = (uint8_t *)R.buf + 8192;
	uint8_t *p = src;
	uint16_t idx;
	uint32_t tot = 0;
	int k;

	st_ctx = "RDMA_WRITE gather";
	memset(dst - 8, 0xee, 3200);
	fill(src, 3300, 9);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
	for (k = 0; k < 3; k++) {
		/* gather from scattered places: each SGE starts 50 bytes after the last one ends */
		st_wqe_data(&w, lens[k], L.mr->lkey, p);
		p += lens[k] + 50;
		tot += lens[k];
	}
	CHECK_EQ(w.len / 16, 5);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
	CHECK(!memcmp(dst, src, 100));
	CHECK(!memcmp(dst + 100, src + 150, 7));
	CHECK(!memcmp(dst + 107, src + 207, 3000));
	CHECK(dst[-1] == 0xee && dst[tot] == 0xee);
}

static void t_write_imm(void)
{
	struct st_wqe w;
	uint8_t *src = (uint8_t *)L.buf + 8192;
	uint8_t *dst = (uint8_t *)R.buf + 16384;
	uint8_t *rb = (uint8_t *)R.buf + 32768;
	uint32_t imm = htobe32(0x1234abcd);
	uint16_t idx;

	st_ctx = "RDMA_WRITE_IMM";
	fill(src, 777, 3);
	memset(rb, 0x5a, 64);
	st_post_recv1(&P.b, rb, 64, R.mr->lkey);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
	st_wqe_data(&w, 777, L.mr->lkey, src);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE, imm, ST_RING_BF);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE_IMM, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_WR_IMM, 777, P.a.qpn, 1, imm, NULL, NULL);
	CHECK(!memcmp(dst, src, 777));
	{
		int i, same = 1;
		for (i = 0; i < 64; i++)
			same &= rb[i] == 0x5a;
		CHECKF(same, "WRITE_IMM wrote into the receive buffer");
	}

	/* Zero-length WRITE_IMM: no data segment, still consumes a receive. */
	st_ctx = "RDMA_WRITE_IMM zero length";
	st_post_recv1(&P.b, rb, 64, R.mr->lkey);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)dst, R.mr->rkey);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE,
		      htobe32(7), ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE_IMM, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_WR_IMM, 0, P.a.qpn, 1, htobe32(7), NULL, NULL);
}

static void t_send(void)
{
	struct st_wqe w;
	uint8_t *src = (uint8_t *)L.buf + 12288;
	uint8_t *rb = (uint8_t *)R.buf + 36864;
	uint8_t want[2048];
	struct st_sge rs[2];
	uint16_t idx;

	st_ctx = "SEND gather/scatter";
	fill(src, 2048, 5);
	memset(rb, 0, 4096);
	/* receive into two pieces: 1000 bytes at rb, the rest at rb+2048 */
	rs[0].addr = rb;
	rs[0].len = 1000;
	rs[0].lkey = R.mr->lkey;
	rs[1].addr = rb + 2048;
	rs[1].len = 2000;
	rs[1].lkey = R.mr->lkey;
	st_post_recv(&P.b, rs, 2);
	st_wqe_begin(&w);
	st_wqe_data(&w, 600, L.mr->lkey, src);
	st_wqe_data(&w, 900, L.mr->lkey, src + 1000);
	CHECK_EQ(w.len / 16, 3);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_SEND, -1);
	memcpy(want, src, 600);
	memcpy(want + 600, src + 1000, 900);
	expect_resp(&P.b, MLX5_CQE_RESP_SEND, 1500, P.a.qpn, 0, 0, NULL, NULL);
	CHECK(!memcmp(rb, want, 1000));
	CHECK(!memcmp(rb + 2048, want + 1000, 500));
	CHECK(rb[2048 + 500] == 0);

	st_ctx = "SEND inline";
	memset(rb, 0, 256);
	st_post_recv1(&P.b, rb, 256, R.mr->lkey);
	st_wqe_begin(&w);
	st_wqe_inline(&w, src, 100);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	expect_req(&P.a, idx, MLX5_OPCODE_SEND, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_SEND, 100, P.a.qpn, 0, 0, rb, src);

	st_ctx = "SEND_IMM inline small";
	memset(rb, 0, 256);
	st_post_recv1(&P.b, rb, 256, R.mr->lkey);
	st_wqe_begin(&w);
	st_wqe_inline(&w, src + 5, 20);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE,
		      htobe32(0xcafef00d), ST_RING_BF);
	expect_req(&P.a, idx, MLX5_OPCODE_SEND_IMM, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_SEND_IMM, 20, P.a.qpn, 1, htobe32(0xcafef00d), rb, src + 5);

	st_ctx = "SEND zero length";
	st_post_recv1(&P.b, rb, 256, R.mr->lkey);
	st_wqe_begin(&w);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_SEND, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_SEND, 0, P.a.qpn, 0, 0, NULL, NULL);

	/* B -> A direction too, so both QPs' receive paths run. */
	st_ctx = "SEND B->A";
	{
		uint8_t *arb = (uint8_t *)L.buf + 40960;
		uint8_t *bsrc = (uint8_t *)R.buf + 40960;
		fill(bsrc, 300, 11);
		memset(arb, 0, 512);
		st_post_recv1(&P.a, arb, 512, L.mr->lkey);
		st_wqe_begin(&w);
		st_wqe_data(&w, 300, R.mr->lkey, bsrc);
		idx = st_post(&P.b, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		expect_req(&P.b, idx, MLX5_OPCODE_SEND, -1);
		expect_resp(&P.a, MLX5_CQE_RESP_SEND, 300, P.b.qpn, 0, 0, arb, bsrc);
	}
}

/* Zero-length RDMA WRITE and READ: no data segment, the WQE still completes. */
static void t_zero_length(void)
{
	struct st_wqe w;
	uint16_t idx;

	st_ctx = "zero-length WRITE";
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)R.buf, R.mr->rkey);
	CHECK_EQ(w.len / 16, 2);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
	st_ctx = "zero-length READ";
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)R.buf, R.mr->rkey);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_READ, 0);
}

/* A receive that uses every SGE of its RQ WQE (no terminator). */
static void t_full_sge_recv(void)
{
	struct st_wqe w;
	struct st_sge rs[4];
	uint8_t *src = (uint8_t *)L.buf + 12288, *rb = (uint8_t *)R.buf + 45056;
	uint16_t idx;
	int k;

	st_ctx = "receive with all 4 SGEs";
	CHECK_EQ(P.b.dv.rq.stride, 64);
	fill(src, 400, 77);
	memset(rb, 0, 1024);
	for (k = 0; k < 4; k++) {
		rs[k].addr = rb + k * 256;
		rs[k].len = 100;
		rs[k].lkey = R.mr->lkey;
	}
	st_post_recv(&P.b, rs, 4);
	st_wqe_begin(&w);
	st_wqe_data(&w, 400, L.mr->lkey, src);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_SEND, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_SEND, 400, P.a.qpn, 0, 0, NULL, NULL);
	for (k = 0; k < 4; k++) {
		CHECKF(!memcmp(rb + k * 256, src + k * 100, 100), "SGE %d differs", k);
		CHECK(rb[k * 256 + 100] == 0);
	}
}

static void t_read(void)
{
	struct st_wqe w;
	uint8_t *src = (uint8_t *)R.buf + 20480;
	uint8_t *dst = (uint8_t *)L.buf + 20480;
	uint16_t idx;

	st_ctx = "RDMA_READ";
	fill(src, 4000, 21);
	memset(dst, 0xee, 8192);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)src, R.mr->rkey);
	st_wqe_data(&w, 1000, L.mr->lkey, dst);
	st_wqe_data(&w, 3000, L.mr->lkey, dst + 4096);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_READ, 4000);
	CHECK(!memcmp(dst, src, 1000));
	CHECK(!memcmp(dst + 4096, src + 1000, 3000));
	CHECK(dst[1000] == 0xee && dst[4095] == 0xee && dst[4096 + 3000] == 0xee);

	st_ctx = "RDMA_READ 8 bytes";
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)src + 8, R.mr->rkey);
	st_wqe_data(&w, 8, L.mr->lkey, dst + 8000);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_READ, 8);
	CHECK(!memcmp(dst + 8000, src + 8, 8));
}

/* Starts an atomic WQE on the R location tgt. */
static void stage_at(struct st_wqe *w, void *tgt)
{
	st_wqe_begin(w);
	st_wqe_raddr(w, (uintptr_t)tgt, R.mr->rkey);
}

/*
 * Ends the atomic staged with stage_at() and its operand segment with the result
 * buffer res (len bytes), checks its size in DS if ds is nonzero, posts it on
 * P.a and expects its completion. Masked atomics take opmod 0x08 | (log2(len) - 2)
 * and their CQE byte count is not checked; standard ones return 8 bytes.
 */
static void post_atomic(struct st_wqe *w, uint8_t opcode, void *res, uint32_t len, unsigned ds,
			enum st_ring_mode mode)
{
	int masked = opcode == MLX5_OPCODE_ATOMIC_MASKED_CS || opcode == MLX5_OPCODE_ATOMIC_MASKED_FA;
	uint8_t opmod = masked ? (len == 8 ? 0x09 : 0x08) : 0;
	uint16_t idx;

	st_wqe_data(w, len, L.mr->lkey, res);
	if (ds)
		CHECK_EQ(w->len / 16, ds);
	idx = st_post(&P.a, w, opcode, opmod, MLX5_WQE_CTRL_CQ_UPDATE, 0, mode);
	expect_req(&P.a, idx, opcode, masked ? -1 : 8);
}

/* Standard 8-byte atomics: operands big-endian in the WQE, memory native. */
static void t_atomics(void)
{
	struct st_wqe w;
	uint64_t *tgt = (uint64_t *)((uint8_t *)R.buf + 49152);
	uint64_t *res = (uint64_t *)((uint8_t *)L.buf + 49152);

	st_ctx = "ATOMIC_CS success";
	*tgt = 0x1122334455667788ull;
	*res = 0;
	stage_at(&w, tgt);
	st_wqe_atomic(&w, 0xa5a5a5a5a5a5a5a5ull, 0x1122334455667788ull);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_CS, res, 8, 4, ST_RING_BF);
	CHECK_EQ(*res, 0x1122334455667788ull);
	CHECK_EQ(*tgt, 0xa5a5a5a5a5a5a5a5ull);

	st_ctx = "ATOMIC_CS mismatch";
	*res = 0;
	stage_at(&w, tgt);
	st_wqe_atomic(&w, 42, 0x1122334455667788ull);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_CS, res, 8, 0, ST_RING_DB);
	CHECK_EQ(*res, 0xa5a5a5a5a5a5a5a5ull);
	CHECK_EQ(*tgt, 0xa5a5a5a5a5a5a5a5ull);

	st_ctx = "ATOMIC_FA";
	*tgt = 0xfffffffffffffff0ull;
	*res = 0;
	stage_at(&w, tgt);
	st_wqe_atomic(&w, 0x21, 0);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_FA, res, 8, 0, ST_RING_BF);
	CHECK_EQ(*res, 0xfffffffffffffff0ull);
	CHECK_EQ(*tgt, 0x11ull);   /* wraps modulo 2^64 */
}

/* Extended (masked) atomics: opmod 0x08 | (log2(size) - 2). */
static void t_masked(void)
{
	struct st_wqe w;
	uint8_t *rb = (uint8_t *)R.buf + 53248;
	uint8_t *lb = (uint8_t *)L.buf + 53248;
	uint32_t *t32 = (uint32_t *)rb, *r32 = (uint32_t *)lb;
	uint64_t *t64 = (uint64_t *)(rb + 64), *r64 = (uint64_t *)(lb + 64);

	st_ctx = "MASKED_CS 32 full masks";
	t32[0] = 0xdeadbeef;
	t32[1] = 0x77777777;       /* neighbour must stay */
	r32[0] = 0;
	r32[1] = 0x66666666;
	stage_at(&w, t32);
	st_wqe_masked_cs32(&w, 0x01020304, 0xdeadbeef, 0xffffffff, 0xffffffff);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_CS, r32, 4, 4, ST_RING_BF);
	CHECK_EQ(r32[0], 0xdeadbeef);
	CHECK_EQ(r32[1], 0x66666666);
	CHECK_EQ(t32[0], 0x01020304);
	CHECK_EQ(t32[1], 0x77777777);

	st_ctx = "MASKED_CS 32 partial masks";
	/* compare only the low byte (0x04 matches), swap only the high half */
	r32[0] = 0;
	stage_at(&w, t32);
	st_wqe_masked_cs32(&w, 0xabcd9999, 0x99999904, 0xffff0000, 0x000000ff);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_CS, r32, 4, 0, ST_RING_DB);
	CHECK_EQ(r32[0], 0x01020304);
	CHECK_EQ(t32[0], 0xabcd0304);

	st_ctx = "MASKED_CS 32 compare fails";
	r32[0] = 0;
	stage_at(&w, t32);
	st_wqe_masked_cs32(&w, 0, 0x00000005, 0xffffffff, 0x000000ff);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_CS, r32, 4, 0, ST_RING_DB);
	CHECK_EQ(r32[0], 0xabcd0304);
	CHECK_EQ(t32[0], 0xabcd0304);

	st_ctx = "MASKED_CS 64";
	t64[0] = 0x0123456789abcdefull;
	t64[1] = 0x5555555555555555ull;
	r64[0] = 0;
	stage_at(&w, t64);
	st_wqe_masked_cs64(&w, 0xfedcba9876543210ull, 0x0123456789abcdefull, ~0ull, ~0ull);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_CS, r64, 8, 5, ST_RING_BF);     /* two WQEBBs */
	CHECK_EQ(r64[0], 0x0123456789abcdefull);
	CHECK_EQ(t64[0], 0xfedcba9876543210ull);
	CHECK_EQ(t64[1], 0x5555555555555555ull);

	st_ctx = "MASKED_CS 64 partial masks";
	r64[0] = 0;
	stage_at(&w, t64);
	/* compare the top 32 bits (match), swap the low 16 bits */
	st_wqe_masked_cs64(&w, 0x000000000000aaaaull, 0xfedcba9800000000ull,
			   0x000000000000ffffull, 0xffffffff00000000ull);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_CS, r64, 8, 0, ST_RING_DB);
	CHECK_EQ(r64[0], 0xfedcba9876543210ull);
	CHECK_EQ(t64[0], 0xfedcba987654aaaaull);

	st_ctx = "MASKED_FA 32";
	t32[0] = 0xfffffffe;
	t32[1] = 0x77777777;
	r32[0] = 0;
	stage_at(&w, t32);
	st_wqe_masked_fa32(&w, 5, 0);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_FA, r32, 4, 4, ST_RING_BF);
	CHECK_EQ(r32[0], 0xfffffffe);
	CHECK_EQ(t32[0], 3);               /* 32-bit wrap, no carry into the neighbour */
	CHECK_EQ(t32[1], 0x77777777);

	st_ctx = "MASKED_FA 64";
	t64[0] = 0x00000000ffffffffull;
	r64[0] = 0;
	stage_at(&w, t64);
	st_wqe_masked_fa64(&w, 1, 0);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_FA, r64, 8, 4, ST_RING_DB);
	CHECK_EQ(r64[0], 0x00000000ffffffffull);
	CHECK_EQ(t64[0], 0x0000000100000000ull);

	/* field_boundary splits the operand into fields; no carry crosses a set bit */
	st_ctx = "MASKED_FA 64 with field boundary";
	t64[0] = 0x00000001ffffffffull;
	r64[0] = 0;
	stage_at(&w, t64);
	st_wqe_masked_fa64(&w, 0x0000000100000001ull, 0x0000000080000000ull);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_FA, r64, 8, 0, ST_RING_DB);
	CHECK_EQ(r64[0], 0x00000001ffffffffull);
	CHECK_EQ(t64[0], 0x0000000200000000ull);   /* low field wrapped alone */

	st_ctx = "MASKED_FA 32 with field boundary";
	t32[0] = 0x00ff00ff;
	r32[0] = 0;
	stage_at(&w, t32);
	/* four 8-bit fields: bits 7, 15, 23, 31 are boundaries */
	st_wqe_masked_fa32(&w, 0x01010101, 0x80808080);
	post_atomic(&w, MLX5_OPCODE_ATOMIC_MASKED_FA, r32, 4, 0, ST_RING_DB);
	CHECK_EQ(r32[0], 0x00ff00ff);
	CHECK_EQ(t32[0], 0x01000100);
}

/* A batch: several WQEs, one doorbell; only the signaled ones complete. */
static void t_batch(void)
{
	struct st_wqe w;
	uint8_t *dst = (uint8_t *)R.buf + 57344;
	uint16_t last = 0;
	int i;

	st_ctx = "batch";
	memset(dst, 0, 64);
	for (i = 0; i < 8; i++) {
		uint8_t v = (uint8_t)(0x30 + i);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)(dst + i), R.mr->rkey);
		st_wqe_inline(&w, &v, 1);
		last = st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0,
				    i == 7 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
	}
	st_ring(&P.a, ST_RING_DB);
	expect_req(&P.a, last, MLX5_OPCODE_RDMA_WRITE, -1);
	for (i = 0; i < 8; i++)
		CHECK_EQ(dst[i], 0x30 + i);
	CHECK(st_cq_empty_for(P.a.scq, 20));
}

/* SE in the sender's ctrl shows up as op_own bit 1 in the receive CQE. */
static void t_solicited(void)
{
	struct st_wqe w;
	struct mlx5_cqe64 c;
	uint8_t *rb = (uint8_t *)R.buf + 61440;
	int se;

	for (se = 0; se < 2; se++) {
		st_ctx = se ? "SEND solicited" : "SEND not solicited";
		st_post_recv1(&P.b, rb, 256, R.mr->lkey);
		st_wqe_begin(&w);
		st_wqe_inline(&w, "solicited?", 10);
		st_post(&P.a, &w, MLX5_OPCODE_SEND, 0,
			MLX5_WQE_CTRL_CQ_UPDATE | (se ? MLX5_WQE_CTRL_SOLICITED : 0), 0, ST_RING_BF);
		if (ST_POLL(&P.acq, &c, 3000))
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
		if (ST_POLL(&P.brcq, &c, 3000)) {
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
			CHECK_EQ(!!(c.op_own & 2), se);
		}
	}
}

/* A fenced WQE sees the results of the READ / atomic before it. */
static void t_fence(void)
{
	struct st_wqe w;
	uint8_t *rsrc = (uint8_t *)R.buf + 59392, *rdst = rsrc + 512;
	uint8_t *lmid = (uint8_t *)L.buf + 59392;
	uint64_t *ctr = (uint64_t *)(rsrc + 1024), *old = (uint64_t *)(lmid + 1024);
	uint64_t *copy = (uint64_t *)(rsrc + 1032);
	uint16_t last;
	struct mlx5_cqe64 c;
	int round;

	st_ctx = "fence";
	for (round = 0; round < 20; round++) {
		memset(rsrc, 0x10 + round, 256);
		memset(rdst, 0, 256);
		memset(lmid, 0, 256);
		*ctr = 1000 + (uint64_t)round;
		*copy = 0;
		/* READ remote -> local, then a fenced WRITE local -> remote */
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)rsrc, R.mr->rkey);
		st_wqe_data(&w, 256, L.mr->lkey, lmid);
		st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_READ, 0, 0, 0);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)rdst, R.mr->rkey);
		st_wqe_data(&w, 256, L.mr->lkey, lmid);
		st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_FENCE, 0);
		/* fetch-add, then a fenced WRITE of the fetched value */
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)ctr, R.mr->rkey);
		st_wqe_atomic(&w, 1, 0);
		st_wqe_data(&w, 8, L.mr->lkey, old);
		st_wqe_write(&P.a, &w, MLX5_OPCODE_ATOMIC_FA, 0, 0, 0);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)copy, R.mr->rkey);
		st_wqe_data(&w, 8, L.mr->lkey, old);
		last = st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0,
				    MLX5_WQE_CTRL_FENCE | MLX5_WQE_CTRL_CQ_UPDATE, 0);
		st_ring(&P.a, ST_RING_DB);
		if (!ST_POLL(&P.acq, &c, 3000))
			break;
		CHECK_EQ(st_cqe_wqe_counter(&c), last);
		CHECKF(!memcmp(rdst, rsrc, 256), "round %d: fenced WRITE did not see the READ data", round);
		CHECK_EQ(*copy, 1000 + (uint64_t)round);
		CHECK_EQ(*ctr, 1001 + (uint64_t)round);
	}
}

/* The halves are the user's to choose: always ringing the same half also works. */
static void t_same_half(void)
{
	struct st_wqe w;
	uint8_t *dst = (uint8_t *)R.buf + 62464;
	int i;

	st_ctx = "same BlueFlame half every time";
	memset(dst, 0, 512);
	for (i = 0; i < 60 && !st_failures; i++) {
		uint8_t v[40];
		uint16_t idx;
		struct mlx5_cqe64 c;
		int k;

		for (k = 0; k < 40; k++)
			v[k] = (uint8_t)(i + k);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)dst + (i % 8) * 64, R.mr->rkey);
		st_wqe_inline(&w, v, 40);
		P.a.bf_off = (i / 7) % 2 ? P.a.dv.bf.size : 0;   /* runs of seven on one half */
		idx = st_wqe_write(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		st_ring(&P.a, (i % 3) ? ST_RING_BF : ST_RING_DB);
		if (!ST_POLL(&P.acq, &c, 3000))
			break;
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		CHECKF(!memcmp(dst + (i % 8) * 64, v, 40), "write %d differs", i);
	}
	P.a.bf_off = 0;
}

/*
 * An inline header followed by a data segment in one SEND, the way zero-copy
 * active messages are commonly posted on ConnectX: the receiver gets both, in order.
 * Run last on its own pair, so a failure here does not spill into the rest.
 */
static void t_inline_then_data(void)
{
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
				.max_recv_sge = 1, .max_inline = 64 };
	struct st_pair Q;
	struct st_mr m;
	struct st_wqe w;
	uint8_t *src, *rb;
	uint16_t idx;

	st_ctx = "SEND inline header + data segment";
	st_pair_open_ex(&Q, &a, 32, 7);
	cur_dev = &Q.d;
	st_mr_alloc(&Q.d, &m, 8192, ST_ACCESS_ALL);
	src = m.buf;
	rb = (uint8_t *)m.buf + 4096;
	fill(src, 1000, 99);
	st_post_recv1(&Q.b, rb, 2048, m.mr->lkey);
	st_wqe_begin(&w);
	st_wqe_inline(&w, "HEADER-12345", 12);
	st_wqe_data(&w, 1000, m.mr->lkey, src);
	CHECK_EQ(w.len / 16, 3);
	idx = st_post(&Q.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	expect_req(&Q.a, idx, MLX5_OPCODE_SEND, -1);
	expect_resp(&Q.b, MLX5_CQE_RESP_SEND, 1012, Q.a.qpn, 0, 0, NULL, NULL);
	CHECK(!memcmp(rb, "HEADER-12345", 12));
	CHECK(!memcmp(rb + 12, src, 1000));
	st_mr_free(&m);
	st_pair_close(&Q);
	cur_dev = &P.d;
}

/*
 * A region registered at an I/O virtual address (ibv_reg_mr_iova): remote and
 * local addresses for its keys are in that IOVA space, not the process's.
 */
static void t_iova(void)
{
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 64 };
	const uint64_t iova = 0x0000100000000000ull;
	volatile int flags = ST_ACCESS_ALL;     /* not a constant: takes ibv_reg_mr_iova2 */
	struct st_pair Q;
	struct ibv_mr *mr, *lmr;
	uint8_t *buf, *lbuf;
	struct st_wqe w;
	uint16_t idx;

	st_ctx = "ibv_reg_mr_iova";
	st_pair_open_ex(&Q, &a, 32, 7);
	cur_dev = &Q.d;
	buf = aligned_alloc(4096, 8192);
	lbuf = aligned_alloc(4096, 4096);
	REQUIRE(buf && lbuf);
	memset(buf, 0, 8192);
	mr = ibv_reg_mr_iova(Q.d.pd, buf, 8192, iova, ST_ACCESS_ALL);
	lmr = ibv_reg_mr(Q.d.pd, lbuf, 4096, flags);
	REQUIRE(mr && lmr);
	/* WRITE to iova + 100 lands at buf + 100 */
	st_wqe_begin(&w);
	st_wqe_raddr(&w, iova + 100, mr->rkey);
	st_wqe_inline(&w, "iova write", 10);
	idx = st_post(&Q.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	expect_req(&Q.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
	CHECK(!memcmp(buf + 100, "iova write", 10));
	/* READ from iova + 4096 into lbuf (registered through ibv_reg_mr_iova2) */
	memcpy(buf + 4096, "read me back", 12);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, iova + 4096, mr->rkey);
	st_wqe_data(&w, 12, lmr->lkey, lbuf);
	idx = st_post(&Q.a, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&Q.a, idx, MLX5_OPCODE_RDMA_READ, 12);
	CHECK(!memcmp(lbuf, "read me back", 12));
	/* a local data segment with the IOVA of buf: gather from iova + 100 */
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)lbuf + 1024, lmr->rkey);
	st_wqe_data(&w, 10, mr->lkey, (const void *)(uintptr_t)(iova + 100));
	idx = st_post(&Q.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&Q.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
	CHECK(!memcmp(lbuf + 1024, "iova write", 10));
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dereg_mr(lmr) == 0);
	free(buf);
	free(lbuf);
	st_pair_close(&Q);
	cur_dev = &P.d;
}

/* Messages far larger than the MTU. */
static void t_big(void)
{
	struct st_mr bl, br;
	struct st_wqe w;
	size_t n = 1 << 20, i;
	uint8_t *lb, *rb;
	uint16_t idx;

	st_ctx = "1 MiB WRITE";
	st_mr_alloc(&P.d, &bl, 2 * n, ST_ACCESS_ALL);
	st_mr_alloc(&P.d, &br, 2 * n, ST_ACCESS_ALL);
	lb = bl.buf;
	rb = br.buf;
	for (i = 0; i < n; i++)
		lb[i] = (uint8_t)(i * 2654435761u >> 13);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)rb + 3, br.mr->rkey);
	st_wqe_data(&w, (uint32_t)n, bl.mr->lkey, lb);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_WRITE, -1);
	CHECK(!memcmp(rb + 3, lb, n));

	st_ctx = "1 MiB READ";
	memset(lb + n, 0, n);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)rb + 3, br.mr->rkey);
	st_wqe_data(&w, (uint32_t)n, bl.mr->lkey, lb + n);
	idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_RDMA_READ, (long)n);
	CHECK(!memcmp(lb + n, lb, n));

	st_ctx = "256 KiB SEND";
	memset(rb + n, 0, n);
	st_post_recv1(&P.b, rb + n, 300000, br.mr->lkey);
	st_wqe_begin(&w);
	st_wqe_data(&w, 262144, bl.mr->lkey, lb + 5);
	idx = st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	expect_req(&P.a, idx, MLX5_OPCODE_SEND, -1);
	expect_resp(&P.b, MLX5_CQE_RESP_SEND, 262144, P.a.qpn, 0, 0, NULL, NULL);
	CHECK(!memcmp(rb + n, lb + 5, 262144));
	CHECK(rb[n + 262144] == 0);
	st_mr_free(&bl);
	st_mr_free(&br);
}

int main(int argc, char **argv)
{
	struct mlx5dv_context mc;
	const char *link = getenv("RVXSIM_LINK");

	(void)argc;
	st_init("t_opcodes", 30);
	st_pair_open(&P);
	if (link && !strcmp(link, "eth")) {
		st_name = "t_opcodes(RoCE)";
		CHECK(P.d.eth);
	}
	memset(&mc, 0, sizeof(mc));
	if (mlx5dv_query_device(P.d.ctx, &mc) == 0)
		cqe_v1 = !!(mc.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1);
	st_mr_alloc(&P.d, &L, BUFSZ, ST_ACCESS_ALL);
	st_mr_alloc(&P.d, &R, BUFSZ, ST_ACCESS_ALL);

	t_nop();
	t_write_inline();
	t_inline_beyond_max();
	t_write_gather();
	t_write_imm();
	t_send();
	t_read();
	t_zero_length();
	t_full_sge_recv();
	t_atomics();
	t_masked();
	t_batch();
	t_solicited();
	t_fence();
	t_same_half();
	t_big();

	st_ctx = "teardown";
	CHECK(st_cq_empty_for(P.a.scq, 10));
	CHECK(st_cq_empty_for(P.b.rcq, 10));
	st_mr_free(&L);
	st_mr_free(&R);
	st_pair_close(&P);
	t_inline_then_data();
	t_iova();

	/* Once more over RoCE (Ethernet link layer, GRH addressing) when the model offers it. */
	if (!link && !st_failures) {
		int rc = st_rerun(argv[0], 30000, "RVXSIM_LINK=eth", NULL);

		CHECKF(rc == 0 || rc == 77, "the RoCE run (RVXSIM_LINK=eth) exited with %d", rc);
	}
	st_exit();
	return 0;
}
