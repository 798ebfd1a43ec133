/*
 * t_twoproc: two processes connect RC QPs by (LID, QPN) as on a subnet and
 * exchange RDMA writes, reads, sends and atomics, including concurrent
 * fetch-adds from both processes to one counter.
 */
#include "simtest.h"

#define BUFSZ   (4 << 20)
#define NFA     2000          /* fetch-adds per process */
#define WINDOW  16
#define NPING   100

/* buffer map (both processes) */
#define OFF_COUNTER   0
#define OFF_WRITE_IN  4096        /* the peer writes here */
#define OFF_READ_SRC  16384       /* the peer reads from here */
#define OFF_READ_DST  32768
#define OFF_SRC       65536
#define OFF_RECV      131072
#define OFF_FA_RES    262144      /* NFA * 8 bytes */
#define OFF_CS        524288
#define OFF_BIG_IN    (1 << 20)   /* 1 MiB the peer writes */
#define OFF_BIG_SRC   (2 << 20)   /* 1 MiB the peer reads, and our source */
#define OFF_BIG_DST   (3 << 20)
#define BIG           (1 << 20)

struct side {
	struct st_dev d;
	struct st_cq scq, rcq;
	struct st_qp q;           /* connected to the other process */
	struct st_mr m;
	struct st_addr peer;
	int sock;
	int parent;
};

static uint8_t *at(struct side *s, size_t off)
{
	return (uint8_t *)s->m.buf + off;
}

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 13u + (i >> 9));
}

static void sync_peer(struct side *s)
{
	char c = 's';
	REQUIRE(st_send_all(s->sock, &c, 1) == 0);
	REQUIRE(st_recv_all(s->sock, &c, 1) == 0);
}

static int poll_ok(struct st_cq *cq, uint8_t want_op, struct mlx5_cqe64 *out)
{
	struct mlx5_cqe64 c;
	char b[200];

	if (!ST_POLL(cq, &c, 5000))
		return 0;
	if (out)
		*out = c;
	return CHECKF(st_cqe_opcode(&c) == want_op, "want CQE op %u, got %s", want_op,
		      st_cqe_str(&c, b, sizeof(b)));
}

static void side_setup(struct side *s)
{
	struct st_qp_attr a = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2,
				.max_recv_sge = 1, .max_inline = 64 };

	{
		/* with two devices the child uses the second adapter */
		const char *nd = getenv("RVXSIM_NUM_DEVICES");
		st_dev_open(&s->d, (!s->parent && nd && atoi(nd) >= 2) ? 1 : 0);
	}
	st_cq_create(&s->d, &s->scq, 256);
	st_cq_create(&s->d, &s->rcq, 256);
	st_qp_create(&s->d, &s->q, &s->scq, &s->rcq, &a);
	st_mr_alloc(&s->d, &s->m, BUFSZ, ST_ACCESS_ALL);
	pattern(at(s, OFF_READ_SRC), 8192, s->parent ? 100 : 200);
	pattern(at(s, OFF_BIG_SRC), BIG, s->parent ? 51 : 52);

	REQUIRE(st_exchange_connect(&s->d, &s->q, &s->m, s->sock, &s->peer) == 0);
	sync_peer(s);
}

/* Writes (gather and inline) into the peer, then a SEND that follows them. */
static void phase_write_send(struct side *s)
{
	struct st_wqe w;
	uint16_t idx;
	uint8_t want[8192];
	struct mlx5_cqe64 c;

	st_ctx = s->parent ? "write+send (parent)" : "write+send (child)";
	st_post_recv1(&s->q, at(s, OFF_RECV), 4096, s->m.mr->lkey);
	sync_peer(s);

	pattern(at(s, OFF_SRC), 8192, s->parent ? 1 : 2);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s->peer.addr + OFF_WRITE_IN, s->peer.rkey);
	st_wqe_data(&w, 3000, s->m.mr->lkey, at(s, OFF_SRC));
	st_wqe_data(&w, 5000, s->m.mr->lkey, at(s, OFF_SRC) + 3000);
	st_wqe_write(&s->q, &w, MLX5_OPCODE_RDMA_WRITE, 0, 0, 0);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s->peer.addr + OFF_WRITE_IN + 8000, s->peer.rkey);
	st_wqe_inline(&w, at(s, OFF_SRC) + 8000, 40);
	st_wqe_write(&s->q, &w, MLX5_OPCODE_RDMA_WRITE, 0, 0, 0);
	st_wqe_begin(&w);
	st_wqe_inline(&w, "written", 8);
	idx = st_wqe_write(&s->q, &w, MLX5_OPCODE_SEND_IMM, 0, MLX5_WQE_CTRL_CQ_UPDATE,
			   htobe32(s->parent ? 1 : 2));
	st_ring(&s->q, ST_RING_DB);
	if (poll_ok(&s->scq, MLX5_CQE_REQ, &c))
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);

	/* the peer's SEND arrives after its writes have landed here */
	if (poll_ok(&s->rcq, MLX5_CQE_RESP_SEND_IMM, &c)) {
		CHECK_EQ(be32toh(c.byte_cnt), 8);
		CHECK_EQ(be32toh(c.imm_inval_pkey), s->parent ? 2u : 1u);
		CHECK_EQ(be32toh(c.flags_rqpn) & 0xffffff, s->peer.qpn);
		if (!s->d.eth)
			CHECK_EQ(be16toh(c.slid), s->peer.lid);
		if (st_cqe_format(&c) == 1)
			CHECK(!memcmp(&c, "written", 8));
		else
			CHECK(!memcmp(at(s, OFF_RECV), "written", 8));
	}
	pattern(want, 8192, s->parent ? 2 : 1);
	CHECKF(!memcmp(at(s, OFF_WRITE_IN), want, 8000), "gather write from the peer differs");
	CHECKF(!memcmp(at(s, OFF_WRITE_IN) + 8000, want + 8000, 40), "inline write from the peer differs");
	sync_peer(s);
}

static void phase_read(struct side *s)
{
	struct st_wqe w;
	uint8_t want[8192];
	struct mlx5_cqe64 c;
	uint16_t idx;

	st_ctx = s->parent ? "read (parent)" : "read (child)";
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s->peer.addr + OFF_READ_SRC, s->peer.rkey);
	st_wqe_data(&w, 8192, s->m.mr->lkey, at(s, OFF_READ_DST));
	idx = st_post(&s->q, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	if (poll_ok(&s->scq, MLX5_CQE_REQ, &c)) {
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		CHECK_EQ(be32toh(c.byte_cnt), 8192);
	}
	pattern(want, 8192, s->parent ? 200 : 100);
	CHECKF(!memcmp(at(s, OFF_READ_DST), want, 8192), "RDMA READ data differs");
	sync_peer(s);
}

/* Posts n fetch-adds of +1 on (raddr, rkey), results to res[]; window of WINDOW. */
static void run_fadds(struct st_qp *q, uint64_t raddr, uint32_t rkey, uint64_t *res, uint32_t lkey, int n)
{
	int posted = 0, done = 0;
	struct mlx5_cqe64 c;
	char b[200];

	while (done < n) {
		while (posted < n && posted - done < WINDOW) {
			struct st_wqe w;
			st_wqe_begin(&w);
			st_wqe_raddr(&w, raddr, rkey);
			st_wqe_atomic(&w, 1, 0);
			st_wqe_data(&w, 8, lkey, &res[posted]);
			st_post(q, &w, MLX5_OPCODE_ATOMIC_FA, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0,
				(posted & 1) ? ST_RING_BF : ST_RING_DB);
			posted++;
		}
		if (!st_cq_poll(q->scq, &c, 5000)) {
			CHECKF(0, "fetch-add %d of %d: no CQE", done, n);
			return;
		}
		if (!CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "fetch-add: %s", st_cqe_str(&c, b, sizeof(b))))
			return;
		done++;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * The counter lives in the parent. The child adds through the cross-process
 * QP; at the same time the parent adds through a loopback pair of its own.
 */
static void phase_atomics(struct side *s)
{
	uint64_t *res = (uint64_t *)at(s, OFF_FA_RES);
	uint64_t *ctr = (uint64_t *)at(s, OFF_COUNTER);

	st_ctx = s->parent ? "fetch-add (parent)" : "fetch-add (child)";
	memset(res, 0xff, NFA * 8);
	if (s->parent) {
		struct st_cq c1, c2;
		struct st_qp qa, qb;
		struct st_qp_attr a = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1,
					.max_recv_sge = 1 };
		static uint64_t all[2 * NFA];
		int i, dup = 0;

		*ctr = 0;
		st_qp_create_two(&s->d, &qa, &c1, &qb, &c2, 64, &a);
		st_qp_connect_pair(&s->d, &qa, &qb, 7);
		sync_peer(s);       /* go */
		run_fadds(&qa, (uintptr_t)ctr, s->m.mr->rkey, res, s->m.mr->lkey, NFA);
		sync_peer(s);       /* both done */
		CHECK_EQ(__atomic_load_n(ctr, __ATOMIC_ACQUIRE), 2 * NFA);
		/* returned old values: together a permutation of 0 .. 2*NFA-1 */
		memcpy(all, res, NFA * 8);
		REQUIRE(st_recv_all(s->sock, all + NFA, NFA * 8) == 0);
		qsort(all, 2 * NFA, 8, cmp_u64);
		for (i = 0; i < 2 * NFA; i++)
			dup += all[i] != (uint64_t)i;
		CHECKF(dup == 0, "%d fetch-add results are not a permutation of 0..%d", dup, 2 * NFA - 1);
		st_qp_destroy(&qa);
		st_qp_destroy(&qb);
		st_cq_destroy(&c1);
		st_cq_destroy(&c2);
	} else {
		sync_peer(s);
		run_fadds(&s->q, s->peer.addr + OFF_COUNTER, s->peer.rkey, res, s->m.mr->lkey, NFA);
		sync_peer(s);
		REQUIRE(st_send_all(s->sock, res, NFA * 8) == 0);
	}
	sync_peer(s);
}

/* Compare-and-swap across processes: the child takes a "lock" word in the parent. */
static void phase_cas(struct side *s)
{
	uint64_t *lockw = (uint64_t *)at(s, OFF_CS);
	uint64_t *res = (uint64_t *)at(s, OFF_CS + 64);

	st_ctx = s->parent ? "compare-swap (parent)" : "compare-swap (child)";
	if (s->parent)
		*lockw = 0;
	sync_peer(s);
	if (!s->parent) {
		struct st_wqe w;
		struct mlx5_cqe64 c;
		int k;
		for (k = 0; k < 2; k++) {
			*res = 0x1234;
			st_wqe_begin(&w);
			st_wqe_raddr(&w, s->peer.addr + OFF_CS, s->peer.rkey);
			st_wqe_atomic(&w, 0xc0ffee, 0);
			st_wqe_data(&w, 8, s->m.mr->lkey, res);
			st_post(&s->q, &w, MLX5_OPCODE_ATOMIC_CS, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
			if (poll_ok(&s->scq, MLX5_CQE_REQ, &c))
				CHECK_EQ(*res, k == 0 ? 0 : 0xc0ffee);   /* second attempt finds it taken */
		}
	}
	sync_peer(s);
	if (s->parent)
		CHECK_EQ(*lockw, 0xc0ffee);

	/* 32-bit masked fetch-add across processes, next to a word that must not change */
	st_ctx = s->parent ? "masked 32-bit (parent)" : "masked 32-bit (child)";
	if (s->parent) {
		uint32_t *w32 = (uint32_t *)at(s, OFF_CS + 128);
		w32[0] = 0xfffffff0;
		w32[1] = 0x01010101;
	}
	sync_peer(s);
	if (!s->parent) {
		struct st_wqe w;
		struct mlx5_cqe64 c;
		uint32_t *r32 = (uint32_t *)at(s, OFF_CS + 256);
		int k;
		for (k = 0; k < 20; k++) {
			r32[0] = 0;
			st_wqe_begin(&w);
			st_wqe_raddr(&w, s->peer.addr + OFF_CS + 128, s->peer.rkey);
			st_wqe_masked_fa32(&w, 1, 0);
			st_wqe_data(&w, 4, s->m.mr->lkey, r32);
			st_post(&s->q, &w, MLX5_OPCODE_ATOMIC_MASKED_FA, 0x08, MLX5_WQE_CTRL_CQ_UPDATE, 0,
				ST_RING_BF);
			if (poll_ok(&s->scq, MLX5_CQE_REQ, &c))
				CHECK_EQ(r32[0], 0xfffffff0u + (uint32_t)k);
		}
	}
	sync_peer(s);
	if (s->parent) {
		uint32_t *w32 = (uint32_t *)at(s, OFF_CS + 128);
		CHECK_EQ(w32[0], 4);          /* 0xfffffff0 + 20 wraps in 32 bits */
		CHECK_EQ(w32[1], 0x01010101);
	}
}

/* 1 MiB each way by WRITE (in 4 SGEs) and by READ, concurrently from both sides. */
static void phase_big(struct side *s)
{
	struct st_wqe w;
	struct mlx5_cqe64 c;
	static uint8_t want[BIG];
	uint16_t iw, ir;
	int k;

	st_ctx = s->parent ? "1 MiB (parent)" : "1 MiB (child)";
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s->peer.addr + OFF_BIG_IN, s->peer.rkey);
	for (k = 0; k < 2; k++)
		st_wqe_data(&w, BIG / 2, s->m.mr->lkey, at(s, OFF_BIG_SRC) + (size_t)k * (BIG / 2));
	iw = st_wqe_write(&s->q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s->peer.addr + OFF_BIG_SRC, s->peer.rkey);
	st_wqe_data(&w, BIG, s->m.mr->lkey, at(s, OFF_BIG_DST));
	ir = st_wqe_write(&s->q, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_ring(&s->q, ST_RING_DB);
	if (poll_ok(&s->scq, MLX5_CQE_REQ, &c))
		CHECK_EQ(st_cqe_wqe_counter(&c), iw);
	if (poll_ok(&s->scq, MLX5_CQE_REQ, &c)) {
		CHECK_EQ(st_cqe_wqe_counter(&c), ir);
		CHECK_EQ(be32toh(c.byte_cnt), BIG);
	}
	pattern(want, BIG, s->parent ? 52 : 51);
	CHECKF(!memcmp(at(s, OFF_BIG_DST), want, BIG), "1 MiB READ differs");
	sync_peer(s);     /* the peer's WRITE completed too */
	CHECKF(!memcmp(at(s, OFF_BIG_IN), want, BIG), "1 MiB WRITE from the peer differs");
	sync_peer(s);
}

/* Ping-pong of SENDs with sizes 1..NPING*37. */
static void phase_pingpong(struct side *s)
{
	int i;

	st_ctx = s->parent ? "ping-pong (parent)" : "ping-pong (child)";
	/* 32 receives outstanding; each consumed one is posted again */
	for (i = 0; i < 32; i++)
		st_post_recv1(&s->q, at(s, OFF_RECV) + (size_t)i * 4096, 4096, s->m.mr->lkey);
	sync_peer(s);
	for (i = 0; i < NPING; i++) {
		uint32_t len = 1 + (uint32_t)(i * 37) % 4000;
		struct st_wqe w;
		struct mlx5_cqe64 c;
		uint8_t *rb = at(s, OFF_RECV) + (size_t)(i % 32) * 4096;

		if (s->parent == 1) {
			pattern(at(s, OFF_SRC), len, (unsigned)i);
			st_wqe_begin(&w);
			st_wqe_data(&w, len, s->m.mr->lkey, at(s, OFF_SRC));
			st_post(&s->q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
			if (!poll_ok(&s->scq, MLX5_CQE_REQ, NULL))
				return;
			if (!poll_ok(&s->rcq, MLX5_CQE_RESP_SEND, &c))
				return;
			CHECK_EQ(be32toh(c.byte_cnt), len);
			if (st_cqe_format(&c) == 0)
				CHECKF(!memcmp(rb, at(s, OFF_SRC), len), "echo %d differs", i);
		} else {
			if (!poll_ok(&s->rcq, MLX5_CQE_RESP_SEND, &c))
				return;
			CHECK_EQ(be32toh(c.byte_cnt), len);
			if (st_cqe_format(&c) == 1)
				memcpy(rb, &c, len);
			st_wqe_begin(&w);
			st_wqe_data(&w, len, s->m.mr->lkey, rb);
			st_post(&s->q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
			if (!poll_ok(&s->scq, MLX5_CQE_REQ, NULL))
				return;
		}
		st_post_recv1(&s->q, rb, 4096, s->m.mr->lkey);
	}
	sync_peer(s);
}

static int run_side(struct side *s)
{
	side_setup(s);
	phase_write_send(s);
	phase_read(s);
	phase_big(s);
	phase_atomics(s);
	phase_cas(s);
	phase_pingpong(s);
	st_ctx = "teardown";
	st_qp_destroy(&s->q);
	st_mr_free(&s->m);
	st_cq_destroy(&s->scq);
	st_cq_destroy(&s->rcq);
	st_dev_close(&s->d);
	return st_failures ? 1 : 0;
}

static struct side child_side;

static int child_main(void *arg)
{
	(void)arg;
	st_name = "t_twoproc(child)";
	return run_side(&child_side);
}

int main(int argc, char **argv)
{
	int sock, rc;
	pid_t pid;
	struct side ps;

	st_init("t_twoproc", 50);
	if (getenv("RVXSIM_NUM_DEVICES"))
		st_name = "t_twoproc(2 adapters)";
	if (getenv("RVXSIM_LINK"))
		st_name = "t_twoproc(RoCE)";
	st_require_device();

	pid = st_fork_peer(&sock, 20);
	if (pid == 0) {
		memset(&child_side, 0, sizeof(child_side));
		child_side.sock = sock;
		child_side.parent = 0;
		_exit(child_main(NULL));
	}
	memset(&ps, 0, sizeof(ps));
	ps.sock = sock;
	ps.parent = 1;
	rc = run_side(&ps);
	(void)rc;
	rc = st_wait_pid(pid, 10000);
	CHECKF(rc == 0, "child exited with %d", rc);

	/* Again with the peer on a second adapter, and again over RoCE. */
	if (argc < 2 && !getenv("RVXSIM_NUM_DEVICES") && !getenv("RVXSIM_LINK") && !st_failures) {
		rc = st_rerun(argv[0], 30000, "RVXSIM_NUM_DEVICES=2", NULL);
		CHECKF(rc == 0, "the two-adapter (RVXSIM_NUM_DEVICES=2) run exited with %d", rc);
		rc = st_rerun(argv[0], 30000, "RVXSIM_LINK=eth", NULL);
		CHECKF(rc == 0, "the RoCE (RVXSIM_LINK=eth) run exited with %d", rc);
	}
	st_exit();
	return 0;
}
