/*
 * t_peer_death: when the peer process of an RC QP dies, work pending on the
 * QP completes with TRANSPORT_RETRY_EXC_ERR (0x15) within a bounded time and
 * the WQEs after it with WR_FLUSH_ERR (0x05); nothing hangs, and the
 * survivor's other QPs keep working.
 */
#include "simtest.h"

#define BUFSZ 65536
#define BOUND_MS 10000

static struct st_dev D;
static struct st_mr M;
/* QPs of this process (the survivor) */
static const struct st_qp_attr QA = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				      .max_recv_sge = 1, .max_inline = 32 };

/* The peer: connect, post nothing, then wait to be killed (mode 'k') or, on a
 * byte from the parent, exit without tearing anything down (mode 'x'). */
static int child(int sock, char mode)
{
	struct st_dev d;
	struct st_cq scq, rcq;
	struct st_qp q;
	struct st_mr m;
	struct st_addr peer;
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1 };
	char c;

	st_name = "t_peer_death(child)";
	st_dev_open(&d, 0);
	st_cq_create(&d, &scq, 32);
	st_cq_create(&d, &rcq, 32);
	st_qp_create(&d, &q, &scq, &rcq, &a);
	st_mr_alloc(&d, &m, BUFSZ, ST_ACCESS_ALL);
	if (st_exchange_connect(&d, &q, &m, sock, &peer))
		return 1;
	c = 'r';
	if (st_send_all(sock, &c, 1))
		return 1;
	/* no receive is ever posted: the parent's SEND waits in RNR retries */
	if (mode == 'x') {
		if (st_recv_all(sock, &c, 1) == 0)
			exit(0);
		return 1;
	}
	for (;;)
		pause();
	return 0;
}

static void poll_err(struct st_cq *cq, uint16_t idx, uint8_t synd, uint64_t t0, const char *what)
{
	struct mlx5_cqe64 c;
	char b[200];

	if (!CHECKF(st_cq_poll(cq, &c, BOUND_MS), "%s: no CQE within %u ms", what, BOUND_MS))
		return;
	CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ_ERR && st_cqe_syndrome(&c) == synd,
	       "%s: %s, expected REQ_ERR syndrome 0x%02x", what, st_cqe_str(&c, b, sizeof(b)), synd);
	CHECK_EQ(st_cqe_wqe_counter(&c), idx);
	CHECK((st_now_ns() - t0) / 1000000 <= BOUND_MS);
}

/* The peer exits normally (exit(0), nothing destroyed) while a SEND waits on it. */
static void exit_scenario(void)
{
	struct st_cq scq;
	struct st_qp q;
	struct st_addr peer;
	struct st_wqe w;
	uint16_t i1, i2;
	uint64_t t0;
	int sock, rc;
	pid_t pid;
	char ch = 'x';

	st_ctx = "peer exits";
	pid = st_fork_peer(&sock, 60);
	if (pid == 0)
		_exit(child(sock, 'x'));
	st_cq_create(&D, &scq, 32);
	st_qp_create(&D, &q, &scq, &scq, &QA);
	REQUIRE(st_exchange_connect(&D, &q, NULL, sock, &peer) == 0);
	REQUIRE(st_recv_all(sock, &ch, 1) == 0);
	st_wqe_begin(&w);
	st_wqe_inline(&w, "bye", 4);
	i1 = st_wqe_write(&q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	i2 = st_wqe_write(&q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_ring(&q, ST_RING_DB);
	CHECK(st_cq_empty_for(&scq, 100));
	REQUIRE(st_send_all(sock, &ch, 1) == 0);
	rc = st_wait_pid(pid, 5000);
	CHECK_EQ(rc, 0);
	t0 = st_now_ns();
	poll_err(&scq, i1, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, t0, "SEND to a peer that exited");
	poll_err(&scq, i2, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, t0, "SEND after it");
	st_qp_destroy(&q);
	st_cq_destroy(&scq);
	close(sock);
	st_ctx = NULL;
}

/*
 * The model's peer-loss injection (RVXSIM_KILL_PEER_AFTER=N): after N WQEs the
 * link to every other LID is lost. Two adapters in one process: the WQE that
 * meets the loss ends with TRANSPORT_RETRY_EXC_ERR, the rest are flushed.
 */
static void injected_loss(void)
{
	struct st_qp_attr a = { .max_send_wr = 32, .max_recv_wr = 1, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 32 };
	struct st_dev d0, d1;
	struct st_cq c0, c1;
	struct st_qp q0, q1;
	struct st_addr a0, a1;
	struct st_mr m;
	struct mlx5_cqe64 c;
	int k, ok = 0, retry = 0, flush = 0, other = 0;
	uint64_t t0;

	st_ctx = "RVXSIM_KILL_PEER_AFTER";
	st_dev_open(&d0, 0);
	st_dev_open(&d1, 1);
	CHECK(d0.port.lid != d1.port.lid || d0.eth);
	st_cq_create(&d0, &c0, 64);
	st_cq_create(&d1, &c1, 64);
	st_qp_create(&d0, &q0, &c0, &c0, &a);
	st_qp_create(&d1, &q1, &c1, &c1, &a);
	st_mr_alloc(&d1, &m, 4096, ST_ACCESS_ALL);
	st_addr_of(&d0, &q0, &a0);
	st_addr_of(&d1, &q1, &a1);
	st_qp_connect(&d0, &q0, &a1);
	st_qp_connect(&d1, &q1, &a0);
	t0 = st_now_ns();
	for (k = 0; k < 20; k++) {
		struct st_wqe w;
		uint8_t v = (uint8_t)k;
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)m.buf + k, m.mr->rkey);
		st_wqe_inline(&w, &v, 1);
		st_post(&q0, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		if (!st_cq_poll(&c0, &c, BOUND_MS))
			break;
		if (st_cqe_opcode(&c) == MLX5_CQE_REQ)
			ok++;
		else if (st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR)
			retry++;
		else if (st_cqe_syndrome(&c) == MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
			flush++;
		else
			other++;
	}
	st_note("injected loss: %d ok, %d retry exceeded, %d flushed after %llu ms", ok, retry, flush,
		(unsigned long long)((st_now_ns() - t0) / 1000000));
	CHECK(ok >= 1 && ok < 20);
	CHECK_EQ(retry, 1);
	CHECK_EQ(ok + retry + flush, 20);
	CHECK_EQ(other, 0);
	st_mr_free(&m);
	st_qp_destroy(&q0);
	st_qp_destroy(&q1);
	st_cq_destroy(&c0);
	st_cq_destroy(&c1);
	st_dev_close(&d0);
	st_dev_close(&d1);
	st_ctx = NULL;
}

/*
 * A peer that dies halfway through putting a packet into our inbox (RVXSIM_DIE_MID_PUSH=1: it
 * has claimed a slot, filled nothing, moved no tail). On a real fabric the survivor never
 * notices; in the model the slot must not block the inbox. Mode 'r': the peer dies sending us a
 * request (its RDMA WRITE); mode 'a': it dies sending us a response (the ACK of our WRITE). Then
 * the survivor's own loopback traffic, requests and ACKs through the same inbox, must flow:
 * 300 signaled WRITEs, more than the ring holds, each completing without error.
 */
static int mid_push_child(int sock, char mode)
{
	struct st_dev d;
	struct st_cq cq;
	struct st_qp q;
	struct st_mr m;
	struct st_addr peer;
	struct st_wqe w;
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 32 };
	char c = 'r';

	st_name = "t_peer_death(mid-push child)";
	st_dev_open(&d, 0);
	st_cq_create(&d, &cq, 32);
	st_qp_create(&d, &q, &cq, &cq, &a);
	st_mr_alloc(&d, &m, BUFSZ, ST_ACCESS_ALL);
	if (st_exchange_connect(&d, &q, &m, sock, &peer) || st_send_all(sock, &c, 1))
		return 1;
	if (mode == 'r') {
		st_wqe_begin(&w);
		st_wqe_raddr(&w, peer.addr, peer.rkey);
		st_wqe_inline(&w, "last words", 11);
		st_post(&q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	}
	sleep(20);   /* the engine exits the process on its first push */
	return 2;
}

static void mid_push(const char *argv0, char mode)
{
	struct st_cq scq;
	struct st_qp q;
	struct st_addr peer;
	struct st_pair lp;
	struct mlx5_cqe64 c;
	struct st_wqe w;
	uint64_t t0;
	int sock, rc, k, ok = 0;
	pid_t pid;
	char ch, fd[16], md[2] = { mode, 0 };

	st_ctx = mode == 'r' ? "peer dies mid-push (request)" : "peer dies mid-push (ACK)";
	pid = st_fork_peer(&sock, 60);
	if (pid == 0) {
		char *args[] = { (char *)argv0, (char *)"midpush", fd, md, NULL };
		snprintf(fd, sizeof(fd), "%d", sock);
		setenv("RVXSIM_DIE_MID_PUSH", "1", 1);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	st_cq_create(&D, &scq, 32);
	st_qp_create(&D, &q, &scq, &scq, &QA);
	REQUIRE(st_exchange_connect(&D, &q, &M, sock, &peer) == 0);
	REQUIRE(st_recv_all(sock, &ch, 1) == 0);
	if (mode == 'a') {   /* the peer's first push is its ACK of this WRITE */
		st_wqe_begin(&w);
		st_wqe_raddr(&w, peer.addr, peer.rkey);
		st_wqe_inline(&w, "hello", 6);
		st_post(&q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	}
	rc = st_wait_pid(pid, 10000);
	CHECKF(rc == 86, "the peer exited with %d, expected 86 (RVXSIM_DIE_MID_PUSH)", rc);
	memset(&lp, 0, sizeof(lp));
	st_qp_create_two(&D, &lp.a, &lp.acq, &lp.b, &lp.bcq, 32, &QA);
	st_qp_connect_pair(&D, &lp.a, &lp.b, 7);
	t0 = st_now_ns();
	for (k = 0; k < 300; k++) {
		uint32_t v = (uint32_t)k;
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)M.buf + 16384 + 4 * (k % 64), M.mr->rkey);
		st_wqe_inline(&w, &v, 4);
		st_post(&lp.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
		if (!st_cq_poll(&lp.acq, &c, BOUND_MS) || st_cqe_opcode(&c) != MLX5_CQE_REQ)
			break;
		ok++;
	}
	CHECKF(ok == 300, "loopback WRITE %d of 300 did not complete (the inbox is blocked)", ok + 1);
	st_note("%s: 300 loopback WRITEs in %llu ms", st_ctx,
		(unsigned long long)((st_now_ns() - t0) / 1000000));
	st_qp_destroy(&lp.a);
	st_qp_destroy(&lp.b);
	st_cq_destroy(&lp.acq);
	st_cq_destroy(&lp.bcq);
	st_qp_destroy(&q);
	st_cq_destroy(&scq);
	close(sock);
	st_ctx = NULL;
}

int main(int argc, char **argv)
{
	int sock, rc;
	pid_t pid;
	struct st_cq scq, rcq;
	struct st_qp q;
	struct st_addr peer;
	struct st_pair lp;           /* survivor's unrelated loopback QPs */
	struct mlx5_cqe64 c;
	struct st_wqe w;
	uint16_t i_send, i_w1, i_w2, i_read;
	uint64_t t0;
	char ch;

	if (argc == 4 && !strcmp(argv[1], "midpush")) {
		st_init("t_peer_death(mid-push child)", 30);
		_exit(mid_push_child(atoi(argv[2]), argv[3][0]));
	}
	st_init("t_peer_death", 40);
	if (getenv("RVXSIM_KILL_PEER_AFTER")) {
		st_name = "t_peer_death(RVXSIM_KILL_PEER_AFTER)";
		injected_loss();
		st_exit();
	}
	/* a short transport timeout if the model offers one; hardware-like otherwise */
	setenv("RVXSIM_RETRY_TIMEOUT_MS", "500", 0);
	st_require_device();

	pid = st_fork_peer(&sock, 60);
	if (pid == 0)
		_exit(child(sock, 'k'));

	st_dev_open(&D, 0);
	st_cq_create(&D, &scq, 32);
	st_cq_create(&D, &rcq, 32);
	st_qp_create(&D, &q, &scq, &rcq, &QA);
	st_mr_alloc(&D, &M, BUFSZ, ST_ACCESS_ALL);
	/* retry_cnt 7, rnr_retry 7 (infinite), timeout 14 */
	REQUIRE(st_exchange_connect(&D, &q, &M, sock, &peer) == 0);
	REQUIRE(st_recv_all(sock, &ch, 1) == 0);

	/* The connection works while the peer lives. */
	st_ctx = "alive";
	st_wqe_begin(&w);
	st_wqe_raddr(&w, peer.addr, peer.rkey);
	st_wqe_inline(&w, "hello", 6);
	i_w1 = st_post(&q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
	if (ST_POLL(&scq, &c, 3000)) {
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
		CHECK_EQ(st_cqe_wqe_counter(&c), i_w1);
	}

	/* Pending work: a SEND waiting for a receive that never comes. */
	st_ctx = "pending";
	st_wqe_begin(&w);
	st_wqe_inline(&w, "ping", 4);
	i_send = st_post(&q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
	/* two more behind it, one unsignaled: errors complete anyway */
	st_wqe_begin(&w);
	st_wqe_raddr(&w, peer.addr + 64, peer.rkey);
	st_wqe_inline(&w, "x", 1);
	i_w2 = st_wqe_write(&q, &w, MLX5_OPCODE_RDMA_WRITE, 0, 0, 0);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, peer.addr + 128, peer.rkey);
	st_wqe_data(&w, 16, M.mr->lkey, M.buf);
	i_read = st_wqe_write(&q, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_ring(&q, ST_RING_DB);
	CHECK(st_cq_empty_for(&scq, 200));     /* RNR: nothing completes yet */

	/* The peer dies. */
	kill(pid, SIGKILL);
	rc = st_wait_pid(pid, 5000);
	CHECK_EQ(rc, 128 + SIGKILL);
	t0 = st_now_ns();
	poll_err(&scq, i_send, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, t0, "pending SEND");
	poll_err(&scq, i_w2, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, t0, "unsignaled WRITE after it");
	poll_err(&scq, i_read, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, t0, "READ after it");
	st_note("peer death detected after %llu ms",
		(unsigned long long)((st_now_ns() - t0) / 1000000));

	/* New work on the dead QP is flushed at once. */
	st_ctx = "after death";
	{
		uint16_t idx = st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		poll_err(&scq, idx, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, st_now_ns(), "NOP on the dead QP");
	}

	exit_scenario();
	mid_push(argv[0], 'r');
	mid_push(argv[0], 'a');

	/* The survivor's other QPs keep working. */
	st_ctx = "survivor";
	{
		uint8_t *dst = (uint8_t *)M.buf + 4096;
		uint16_t idx;

		memset(&lp, 0, sizeof(lp));
		st_qp_create_two(&D, &lp.a, &lp.acq, &lp.b, &lp.bcq, 32, &QA);
		st_qp_connect_pair(&D, &lp.a, &lp.b, 7);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)dst, M.mr->rkey);
		st_wqe_inline(&w, "still alive", 12);
		idx = st_post(&lp.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
		if (ST_POLL(&lp.acq, &c, 3000)) {
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		}
		CHECK(!memcmp(dst, "still alive", 12));
		st_qp_destroy(&lp.a);
		st_qp_destroy(&lp.b);
		st_cq_destroy(&lp.acq);
		st_cq_destroy(&lp.bcq);
	}

	/* A peer QP destroyed in a live process: no responder, so the transport
	 * retries run out (TRANSPORT_RETRY_EXC_ERR) and the rest is flushed. */
	st_ctx = "peer QP destroyed";
	{
		struct st_cq c1, c2;
		struct st_qp qa, qb;
		uint16_t i1, i2;

		st_qp_create_two(&D, &qa, &c1, &qb, &c2, 32, &QA);
		st_qp_connect_pair(&D, &qa, &qb, 7);
		st_qp_destroy(&qb);
		st_wqe_begin(&w);
		st_wqe_raddr(&w, (uintptr_t)M.buf + 8192, M.mr->rkey);
		st_wqe_inline(&w, "nobody", 7);
		i1 = st_wqe_write(&qa, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		i2 = st_wqe_write(&qa, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		st_ring(&qa, ST_RING_DB);
		t0 = st_now_ns();
		poll_err(&c1, i1, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, t0, "WRITE to a destroyed QP");
		poll_err(&c1, i2, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, t0, "WRITE after it");
		CHECKF(memcmp((uint8_t *)M.buf + 8192, "nobody", 7) != 0,
		       "data landed although the target QP no longer exists");
		st_qp_destroy(&qa);
		st_cq_destroy(&c1);
		st_cq_destroy(&c2);
	}

	st_ctx = "teardown";
	st_qp_destroy(&q);
	st_cq_destroy(&scq);
	st_cq_destroy(&rcq);
	st_mr_free(&M);
	st_dev_close(&D);

	if (argc < 2) {
		rc = st_rerun(argv[0], 30000, "RVXSIM_NUM_DEVICES=2", "RVXSIM_KILL_PEER_AFTER=5", NULL);
		CHECKF(rc == 0, "the run with RVXSIM_KILL_PEER_AFTER=5 exited with %d", rc);
	}
	st_exit();
	return 0;
}
