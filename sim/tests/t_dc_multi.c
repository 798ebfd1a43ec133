/*
 * t_dc_multi: DC between three processes.
 * - every process has a DCT (its own access key) on an SRQ and 8 DCIs; every DCI sends
 *   round after round to the three DCTs in turn (its target changes WQE by WQE): an RDMA
 *   WRITE to its own slot, a SEND into the target's SRQ and a fetch-and-add on the target's
 *   counter; each process then finds every slot written once, every SEND received once with
 *   the right source QPN, and its counter equal to the number of adds aimed at it;
 * - many initiators to one DCT: 100 DCIs of one process each write and add once;
 * - a dead target: after one process exits, a DCI writing to its DCT ends with
 *   TRANSPORT_RETRY_EXC_ERR within a bounded time, while another DCI keeps working.
 * - the model's injected peer loss (RVXSIM_KILL_PEER_AFTER=4, a re-run): the first four
 *   WQEs of a DCI to another process's DCT complete, the fifth ends with
 *   TRANSPORT_RETRY_EXC_ERR.
 * Sets RVXSIM_RETRY_TIMEOUT_MS=500 unless already set.
 */
#include "t_dc_common.h"

#define NPROC 3
#define NDCI 8
#define ROUNDS 6
#define MANY 100
#define RSZ (128 * 1024)
#define OFF_CNT 16384
#define OFF_RECV 20480
#define OFF_MANY_CNT 61440
#define OFF_MANY 65536

struct proc {
	int id;
	struct st_dev d;
	struct st_cq icq, tcq;
	struct st_srq srq;
	struct ibv_qp *dct;
	struct st_qp dci[NDCI];
	struct st_mr l, r;
	struct dc_target me, all[NPROC];
	uint32_t qpns[NPROC][NDCI];
};

static uint64_t value(int p, int j, int r)
{
	return 0xc0de000000ull | (uint64_t)p << 16 | (uint64_t)j << 8 | (uint64_t)r;
}

static int target_of(int p, int j, int r)
{
	return (p + j + r) % NPROC;
}

static uint32_t slot(int p, int j, int r)
{
	return (uint32_t)(((p * NDCI + j) * ROUNDS + r) * 8);
}

static int aimed_at(int t)
{
	int n = 0;
	for (int p = 0; p < NPROC; p++)
		for (int j = 0; j < NDCI; j++)
			for (int r = 0; r < ROUNDS; r++)
				n += target_of(p, j, r) == t;
	return n;
}

static void setup(struct proc *P, int id)
{
	memset(P, 0, sizeof(*P));
	P->id = id;
	st_dev_open(&P->d, 0);
	st_cq_create(&P->d, &P->icq, 1024);
	st_cq_create(&P->d, &P->tcq, 1024);
	st_srq_create(&P->d, &P->srq, 512, 1);
	st_mr_alloc(&P->d, &P->l, RSZ, DC_ACCESS_ALL);
	st_mr_alloc(&P->d, &P->r, RSZ, DC_ACCESS_ALL);
	P->dct = dc_create_dct(&P->d, &P->tcq, P->srq.srq, DC_KEY + (uint64_t)id);
	REQUIRE(P->dct != NULL);
	REQUIRE(dc_dct_ready(&P->d, P->dct, DC_ACCESS_ALL) == 0);
	dc_target_of(&P->d, P->dct, DC_KEY + (uint64_t)id, &P->me);
	P->me.addr = (uintptr_t)P->r.buf;
	P->me.rkey = P->r.mr->rkey;
	for (int j = 0; j < NDCI; j++) {
		dc_create_dci(&P->d, &P->dci[j], &P->icq, 16, 1, 16);
		REQUIRE(dc_dci_ready(&P->d, &P->dci[j], 7, 7, 14) == 0);
	}
	/* one receive per SEND aimed at this process */
	for (int i = 0; i < aimed_at(id); i++) {
		struct st_sge sg = { (uint8_t *)P->r.buf + OFF_RECV + 16 * i, 16, P->r.mr->lkey };
		st_srq_post(&P->srq, &sg, 1);
	}
}

/* Requester CQEs: n successes on the process's DCIs. */
static void reap(struct proc *P, int n)
{
	for (int i = 0; i < n; i++) {
		struct mlx5_cqe64 c;
		char b[160];
		if (!ST_POLL(&P->icq, &c, 10000))
			return;
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "requester %s", st_cqe_str(&c, b, sizeof(b)));
	}
}

static void traffic(struct proc *P)
{
	uint64_t *src = P->l.buf, *res = (uint64_t *)((uint8_t *)P->l.buf + 8192);

	st_ctx = "traffic";
	for (int r = 0; r < ROUNDS; r++) {
		for (int j = 0; j < NDCI; j++) {
			const struct dc_target *t = &P->all[target_of(P->id, j, r)];
			struct st_qp *q = &P->dci[j];
			uint64_t *v = &src[j * ROUNDS + r];
			struct st_wqe w;

			*v = value(P->id, j, r);
			st_wqe_begin(&w);
			dc_wqe_av(&w, &P->d, t, (j + r) & 1);
			st_wqe_raddr(&w, t->addr + slot(P->id, j, r), t->rkey);
			st_wqe_data(&w, 8, P->l.mr->lkey, v);
			st_wqe_write(q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
			st_wqe_begin(&w);
			dc_wqe_av(&w, &P->d, t, j & 1);
			st_wqe_data(&w, 8, P->l.mr->lkey, v);
			st_wqe_write(q, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
			st_wqe_begin(&w);
			dc_wqe_av(&w, &P->d, t, 0);
			st_wqe_raddr(&w, t->addr + OFF_CNT, t->rkey);
			st_wqe_atomic(&w, 1, 0);
			st_wqe_data(&w, 8, P->l.mr->lkey, &res[j * ROUNDS + r]);
			st_wqe_write(q, &w, MLX5_OPCODE_ATOMIC_FA, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
			st_ring(q, ST_RING_DB);
		}
		reap(P, 3 * NDCI);
	}
}

/* What arrived at this process's DCT. */
static void verify(struct proc *P)
{
	uint8_t *r = P->r.buf;
	int n = aimed_at(P->id), seen[NPROC][NDCI][ROUNDS];

	st_ctx = "verify";
	memset(seen, 0, sizeof(seen));
	for (int p = 0; p < NPROC; p++)
		for (int j = 0; j < NDCI; j++)
			for (int k = 0; k < ROUNDS; k++) {
				uint64_t got = *(uint64_t *)(r + slot(p, j, k));
				uint64_t want = target_of(p, j, k) == P->id ? value(p, j, k) : 0;
				CHECKF(got == want, "slot p%d dci%d round%d: 0x%llx, expected 0x%llx",
				       p, j, k, (unsigned long long)got, (unsigned long long)want);
			}
	CHECK_EQ(*(uint64_t *)(r + OFF_CNT), (uint64_t)n);
	for (int i = 0; i < n; i++) {
		struct mlx5_cqe64 c;
		if (!ST_POLL(&P->tcq, &c, 10000))
			break;
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
		CHECK_EQ(be32toh(c.byte_cnt), 8);
		uint32_t idx = st_cqe_wqe_counter(&c);
		uint64_t v = *(uint64_t *)(r + OFF_RECV + 16 * idx);
		int p = (int)(v >> 16 & 0xff), j = (int)(v >> 8 & 0xff), k = (int)(v & 0xff);
		if (!CHECKF((v >> 24) == 0xc0de && p < NPROC && j < NDCI && k < ROUNDS &&
			    target_of(p, j, k) == P->id, "SEND payload 0x%llx", (unsigned long long)v))
			continue;
		CHECK_EQ(be32toh(c.flags_rqpn) & 0xffffff, P->qpns[p][j]);
		CHECKF(++seen[p][j][k] == 1, "SEND p%d dci%d round%d received twice", p, j, k);
	}
	CHECK(st_cq_empty_for(&P->tcq, 10));
}

/* 100 DCIs of this process, one WRITE and one add each, to one DCT. */
static void many(struct proc *P, const struct dc_target *t)
{
	struct st_cq cq;
	struct st_qp *q = calloc(MANY, sizeof(*q));
	uint64_t *src = P->l.buf, *res = (uint64_t *)((uint8_t *)P->l.buf + 65536);

	st_ctx = "many initiators";
	st_cq_create(&P->d, &cq, 512);
	for (int i = 0; i < MANY; i++) {
		struct st_wqe w;

		dc_create_dci(&P->d, &q[i], &cq, 4, 1, 0);
		REQUIRE(dc_dci_ready(&P->d, &q[i], 7, 7, 14) == 0);
		src[i] = 0x3a3a0000 + (uint64_t)i;
		st_wqe_begin(&w);
		dc_wqe_av(&w, &P->d, t, i & 1);
		st_wqe_raddr(&w, t->addr + OFF_MANY + 8 * (uint64_t)i, t->rkey);
		st_wqe_data(&w, 8, P->l.mr->lkey, &src[i]);
		st_wqe_write(&q[i], &w, MLX5_OPCODE_RDMA_WRITE, 0, 0, 0);
		st_wqe_begin(&w);
		dc_wqe_av(&w, &P->d, t, 0);
		st_wqe_raddr(&w, t->addr + OFF_MANY_CNT, t->rkey);
		st_wqe_atomic(&w, 1, 0);
		st_wqe_data(&w, 8, P->l.mr->lkey, &res[i]);
		st_wqe_write(&q[i], &w, MLX5_OPCODE_ATOMIC_FA, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		st_ring(&q[i], ST_RING_DB);
	}
	for (int i = 0; i < MANY; i++) {
		struct mlx5_cqe64 c;
		if (!ST_POLL(&cq, &c, 10000))
			break;
		CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
	}
	/* each add saw a distinct old value */
	{
		uint8_t seen[MANY] = { 0 };
		for (int i = 0; i < MANY; i++)
			if (CHECKF(res[i] < MANY, "old value %llu", (unsigned long long)res[i]))
				CHECKF(++seen[res[i]] == 1, "old value %llu twice", (unsigned long long)res[i]);
	}
	for (int i = 0; i < MANY; i++)
		st_qp_destroy(&q[i]);
	st_cq_destroy(&cq);
	free(q);
}

static int child(int id, int sock)
{
	struct proc P;
	int cmd, fails;

	st_name = id == 1 ? "t_dc_multi(child 1)" : "t_dc_multi(child 2)";
	setup(&P, id);
	REQUIRE(st_send_all(sock, &P.me, sizeof(P.me)) == 0);
	for (int j = 0; j < NDCI; j++)
		REQUIRE(st_send_all(sock, &P.dci[j].qpn, 4) == 0);
	REQUIRE(st_recv_all(sock, P.all, sizeof(P.all)) == 0);
	REQUIRE(st_recv_all(sock, P.qpns, sizeof(P.qpns)) == 0);
	traffic(&P);
	cmd = 1;
	REQUIRE(st_send_all(sock, &cmd, 4) == 0);
	for (;;) {
		if (st_sock_io(sock, &cmd, 4, 0, 60000))
			break;
		if (cmd == 2) {                   /* verify what arrived here */
			verify(&P);
		} else if (cmd == 3) {            /* many initiators to the parent's DCT */
			many(&P, &P.all[0]);
		} else {
			break;                    /* exit */
		}
		fails = st_failures;
		REQUIRE(st_send_all(sock, &fails, 4) == 0);
	}
	return st_failures ? 1 : 0;
}

static int ask(int sock, int cmd)
{
	int fails = -1;

	if (st_send_all(sock, &cmd, 4) || st_sock_io(sock, &fails, 4, 0, 60000))
		return -1;
	return fails;
}

/* Re-run with RVXSIM_KILL_PEER_AFTER=4: a target in a child process, reached four times. */
static int kill_sub(void)
{
	struct proc P;
	struct dc_target t;
	int sock, cmd = 0;
	pid_t pid;

	st_name = "t_dc_multi(RVXSIM_KILL_PEER_AFTER)";
	pid = st_fork_peer(&sock, 60);
	if (pid == 0) {
		setup(&P, 1);
		REQUIRE(st_send_all(sock, &P.me, sizeof(P.me)) == 0);
		st_sock_io(sock, &cmd, 4, 0, 30000);
		_exit(st_failures ? 1 : 0);
	}
	setup(&P, 0);
	REQUIRE(st_recv_all(sock, &t, sizeof(t)) == 0);
	for (int i = 0; i < 5; i++) {
		struct mlx5_cqe64 c;
		uint8_t *l = P.l.buf;

		st_ctx = i < 4 ? "before the link is lost" : "after the link is lost";
		dc_post_write(&P.dci[0], &P.d, &t, i & 1, t.addr + 8 * (uint64_t)i, t.rkey, l, 8,
			      P.l.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		if (!ST_POLL(&P.icq, &c, 10000))
			break;
		CHECK_EQ(st_cqe_opcode(&c), i < 4 ? MLX5_CQE_REQ : MLX5_CQE_REQ_ERR);
		if (i == 4)
			CHECK_EQ(st_cqe_syndrome(&c), MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
	}
	CHECK(st_send_all(sock, &cmd, 4) == 0);
	CHECK_EQ(st_wait_pid(pid, 20000), 0);
	st_exit();
	return 0;
}

int main(int argc, char **argv)
{
	struct proc P;
	int sock[3] = { -1, -1, -1 }, cmd;
	pid_t pid[3] = { 0, 0, 0 };

	(void)argc;
	setenv("RVXSIM_RETRY_TIMEOUT_MS", "500", 0);
	st_init("t_dc_multi", 120);
	st_require_device();
	if (getenv("T_DC_MULTI_KILL"))
		return kill_sub();
	for (int c = 1; c < NPROC; c++) {
		pid[c] = st_fork_peer(&sock[c], 110);
		if (pid[c] == 0)
			_exit(child(c, sock[c]));
	}
	setup(&P, 0);
	P.all[0] = P.me;
	for (int j = 0; j < NDCI; j++)
		P.qpns[0][j] = P.dci[j].qpn;
	for (int c = 1; c < NPROC; c++) {
		REQUIRE(st_recv_all(sock[c], &P.all[c], sizeof(P.all[c])) == 0);
		REQUIRE(st_recv_all(sock[c], P.qpns[c], sizeof(P.qpns[c])) == 0);
	}
	for (int c = 1; c < NPROC; c++) {
		REQUIRE(st_send_all(sock[c], P.all, sizeof(P.all)) == 0);
		REQUIRE(st_send_all(sock[c], P.qpns, sizeof(P.qpns)) == 0);
	}
	traffic(&P);
	for (int c = 1; c < NPROC; c++)
		CHECK(st_sock_io(sock[c], &cmd, 4, 0, 60000) == 0 && cmd == 1);
	verify(&P);
	for (int c = 1; c < NPROC; c++)
		CHECKF(ask(sock[c], 2) == 0, "child %d found what arrived there wrong", c);

	/* many initiators: child 1's 100 DCIs to this DCT */
	CHECKF(ask(sock[1], 3) == 0, "child 1 saw errors with many initiators");
	st_ctx = "many initiators, target side";
	for (int i = 0; i < MANY; i++)
		CHECKF(*(uint64_t *)((uint8_t *)P.r.buf + OFF_MANY + 8 * i) == 0x3a3a0000 + (uint64_t)i,
		       "initiator %d", i);
	CHECK_EQ(*(uint64_t *)((uint8_t *)P.r.buf + OFF_MANY_CNT), MANY);

	/* a dead target: child 2 exits; a DCI writing to its DCT gives up in bounded time */
	st_ctx = "dead target";
	cmd = 0;
	CHECK(st_send_all(sock[2], &cmd, 4) == 0);
	CHECK_EQ(st_wait_pid(pid[2], 20000), 0);
	pid[2] = 0;
	{
		uint64_t t0 = st_now_ns();
		struct mlx5_cqe64 c;
		uint8_t *l = P.l.buf;

		dc_post_write(&P.dci[0], &P.d, &P.all[2], 0, P.all[2].addr, P.all[2].rkey, l, 8,
			      P.l.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		dc_post_write(&P.dci[1], &P.d, &P.all[1], 1, P.all[1].addr + OFF_MANY, P.all[1].rkey,
			      l, 8, P.l.mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
		for (int k = 0; k < 2; k++) {
			if (!ST_POLL(&P.icq, &c, 10000))
				break;
			uint32_t qpn = be32toh(c.sop_drop_qpn) & 0xffffff;
			if (qpn == P.dci[0].qpn) {
				CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ_ERR);
				CHECK_EQ(st_cqe_syndrome(&c), MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
				CHECKF(st_now_ns() - t0 < 5000000000ull, "dead target declared after %llu ms",
				       (unsigned long long)(st_now_ns() - t0) / 1000000);
			} else {
				CHECK_EQ(qpn, P.dci[1].qpn);
				CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_REQ);
			}
		}
	}
	cmd = 0;
	CHECK(st_send_all(sock[1], &cmd, 4) == 0);
	CHECK_EQ(st_wait_pid(pid[1], 20000), 0);
	st_ctx = NULL;
	if (!st_failures) {
		int rc = st_rerun(argv[0], 60000, "T_DC_MULTI_KILL=1", "RVXSIM_KILL_PEER_AFTER=4", NULL);
		CHECKF(rc == 0, "the RVXSIM_KILL_PEER_AFTER run exited with %d", rc);
	}
	st_exit();
	return 0;
}
