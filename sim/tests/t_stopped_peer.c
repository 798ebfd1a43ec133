/*
 * t_stopped_peer: RDMA WRITE, READ, an atomic, and a SEND into a posted receive,
 * aimed at a peer process that is stopped (SIGSTOP, as under a debugger).
 *
 * An adapter serves one-sided work without the target's CPU, so on hardware all
 * four complete while the peer is stopped. rvxsim cannot: a process's memory is
 * reached only through its own engine, a thread of that process, which SIGSTOP
 * stops too (sim/README.md, "What is not modelled"). What the model does promise,
 * and what this test checks: a stopped peer is not declared dead (no error
 * completion, even past the transport timer), nothing is lost, and every
 * operation completes successfully, with the right data, once the peer resumes.
 */
#include "simtest.h"

#define BUFSZ 65536

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 11u);
}

struct side {
	struct st_dev d;
	struct st_cq scq, rcq;
	struct st_qp q;
	struct st_mr m;
	struct st_addr peer;
};

static void side_setup(struct side *s, int sock)
{
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 64 };
	st_dev_open(&s->d, 0);
	st_cq_create(&s->d, &s->scq, 32);
	st_cq_create(&s->d, &s->rcq, 32);
	st_qp_create(&s->d, &s->q, &s->scq, &s->rcq, &a);
	st_mr_alloc(&s->d, &s->m, BUFSZ, ST_ACCESS_ALL);
	REQUIRE(st_exchange_connect(&s->d, &s->q, &s->m, sock, &s->peer) == 0);
}

static int child(int sock)
{
	struct side s;
	uint8_t *p;
	uint64_t *ctr;
	struct mlx5_cqe64 c;
	char ch = 'r';

	st_name = "t_stopped_peer(child)";
	memset(&s, 0, sizeof(s));
	side_setup(&s, sock);
	p = s.m.buf;
	ctr = (uint64_t *)(p + 8192);
	*ctr = 40;
	pattern(p + 16384, 4096, 7);
	st_post_recv1(&s.q, p + 32768, 256, s.m.mr->lkey);
	REQUIRE(st_send_all(sock, &ch, 1) == 0);
	/* the parent stops us here, works on our memory, and resumes us */
	REQUIRE(st_recv_all(sock, &ch, 1) == 0);
	{
		/* give a late delivery a moment, to tell "late" from "lost" in the report */
		uint64_t end = st_now_ns() + 3000000000ull;
		while (memcmp(p, "written while stopped", 22) && st_now_ns() < end)
			st_sleep_ms(1);
	}
	CHECKF(!memcmp(p, "written while stopped", 22), "WRITE to the stopped process missing");
	CHECK_EQ(*ctr, 42);
	if (ST_POLL(&s.rcq, &c, 3000)) {
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
		CHECK_EQ(be32toh(c.byte_cnt), 5);
		if (st_cqe_format(&c) == 0)
			CHECK(!memcmp(p + 32768, "sleep", 5));
	}
	REQUIRE(st_send_all(sock, &ch, 1) == 0);
	st_qp_destroy(&s.q);
	st_mr_free(&s.m);
	st_cq_destroy(&s.scq);
	st_cq_destroy(&s.rcq);
	st_dev_close(&s.d);
	return st_failures ? 1 : 0;
}

int main(void)
{
	struct side s;
	struct st_wqe w;
	struct mlx5_cqe64 c;
	uint8_t *p, want[4096];
	int sock, k, rc;
	pid_t pid;
	char ch, b[200];

	st_init("t_stopped_peer", 30);
	st_require_device();
	pid = st_fork_peer(&sock, 25);
	if (pid == 0)
		_exit(child(sock));
	memset(&s, 0, sizeof(s));
	side_setup(&s, sock);
	REQUIRE(st_recv_all(sock, &ch, 1) == 0);

	kill(pid, SIGSTOP);
	st_sleep_ms(50);
	p = s.m.buf;
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s.peer.addr, s.peer.rkey);
	st_wqe_inline(&w, "written while stopped", 22);
	st_wqe_write(&s.q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s.peer.addr + 16384, s.peer.rkey);
	st_wqe_data(&w, 4096, s.m.mr->lkey, p + 1024);
	st_wqe_write(&s.q, &w, MLX5_OPCODE_RDMA_READ, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, s.peer.addr + 8192, s.peer.rkey);
	st_wqe_atomic(&w, 2, 0);
	st_wqe_data(&w, 8, s.m.mr->lkey, p + 6000);
	st_wqe_write(&s.q, &w, MLX5_OPCODE_ATOMIC_FA, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_wqe_begin(&w);
	st_wqe_inline(&w, "sleep", 5);
	st_wqe_write(&s.q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	st_ring(&s.q, ST_RING_DB);
	/* stopped for longer than the transport timer (RVXSIM_RETRY_TIMEOUT_MS, 2 s): whatever
	 * completes meanwhile must be a success (hardware completes all four here) */
	for (k = 0; k < 4 && st_cq_poll(&s.scq, &c, k ? 100 : 2500); k++)
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "completion %d with the peer stopped: %s", k,
		       st_cqe_str(&c, b, sizeof(b)));
	st_note("%d of 4 operations completed while the peer was stopped (hardware: 4)", k);
	kill(pid, SIGCONT);
	for (; k < 4; k++) {
		if (!CHECKF(st_cq_poll(&s.scq, &c, 5000), "completion %d missing after the peer resumed", k))
			break;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "completion %d after the peer resumed: %s", k,
		       st_cqe_str(&c, b, sizeof(b)));
	}
	if (k == 4) {
		pattern(want, 4096, 7);
		CHECKF(!memcmp(p + 1024, want, 4096), "READ from the stopped process differs");
		CHECK_EQ(*(uint64_t *)(p + 6000), 40);
	}
	REQUIRE(st_send_all(sock, &ch, 1) == 0);
	CHECK(st_recv_all(sock, &ch, 1) == 0);
	rc = st_wait_pid(pid, 10000);
	CHECKF(rc == 0, "child exited with %d", rc);
	st_qp_destroy(&s.q);
	st_mr_free(&s.m);
	st_cq_destroy(&s.scq);
	st_cq_destroy(&s.rcq);
	st_dev_close(&s.d);
	st_exit();
	return 0;
}
