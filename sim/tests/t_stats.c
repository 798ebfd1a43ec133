/*
 * t_stats: RVXSIM_STATS_FILE counts the RDMA bytes of each requester device. A child process
 * with two devices (RVXSIM_NUM_DEVICES=2) runs, on a loopback pair per device, through the plain
 * verbs path: on mlx5_0 RDMA WRITEs of 10000 and 1 bytes, a READ of 3000, a SEND of 500 (not
 * RDMA); on mlx5_1 a WRITE of 777 and a WRITE to a bad rkey (fails: not counted), then exits.
 * The parent reads the file: one line per device with exactly those sums.
 */
#include "simtest.h"
#include <sys/wait.h>

struct lp {
	struct st_dev d;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *lm, *rm;
	uint8_t *lbuf, *rbuf;
};

#define BUFSZ 65536

static struct ibv_qp *mkqp(struct lp *p)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = p->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(p->d.pd, &ia);
}

static void lp_open(struct lp *p, int idx)
{
	struct st_qp ta, tb;

	st_dev_open(&p->d, idx);
	p->cq = ibv_create_cq(p->d.ctx, 64, NULL, NULL, 0);
	REQUIRE(p->cq != NULL);
	p->a = mkqp(p);
	p->b = mkqp(p);
	REQUIRE(p->a && p->b);
	memset(&ta, 0, sizeof(ta));
	memset(&tb, 0, sizeof(tb));
	ta.qp = p->a;
	ta.qpn = p->a->qp_num;
	tb.qp = p->b;
	tb.qpn = p->b->qp_num;
	st_qp_connect_pair(&p->d, &ta, &tb, 7);
	p->lbuf = aligned_alloc(4096, BUFSZ);
	p->rbuf = aligned_alloc(4096, BUFSZ);
	REQUIRE(p->lbuf && p->rbuf);
	memset(p->lbuf, 0x5a, BUFSZ);
	memset(p->rbuf, 0, BUFSZ);
	p->lm = ibv_reg_mr(p->d.pd, p->lbuf, BUFSZ, ST_ACCESS_ALL);
	p->rm = ibv_reg_mr(p->d.pd, p->rbuf, BUFSZ, ST_ACCESS_ALL);
	REQUIRE(p->lm && p->rm);
}

/* One signaled WR of len bytes from lbuf on QP a; waits for its completion, returns its status. */
static int op(struct lp *p, enum ibv_wr_opcode opc, uint32_t len, uint32_t rkey)
{
	struct ibv_sge sg = { (uintptr_t)p->lbuf, len, p->lm->lkey };
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	uint64_t end = st_now_ns() + 3000000000ull;
	int n;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = opc;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)p->rbuf;
	wr.wr.rdma.rkey = rkey;
	if (!CHECK(ibv_post_send(p->a, &wr, &bad) == 0))
		return -1;
	for (;;) {
		n = ibv_poll_cq(p->cq, 1, &wc);
		if (n == 1 && wc.qp_num == p->a->qp_num)
			return wc.status;
		if (n == 1)
			continue; /* the responder's receive completion of the SEND */
		if (!CHECKF(st_now_ns() < end, "no completion"))
			return -1;
		sched_yield();
	}
}

static void child(void)
{
	struct lp p0, p1;
	struct ibv_sge sg;
	struct ibv_recv_wr rr, *badr;

	lp_open(&p0, 0);
	lp_open(&p1, 1);
	CHECK(op(&p0, IBV_WR_RDMA_WRITE, 10000, p0.rm->rkey) == IBV_WC_SUCCESS);
	CHECK(op(&p0, IBV_WR_RDMA_WRITE, 1, p0.rm->rkey) == IBV_WC_SUCCESS);
	CHECK(op(&p0, IBV_WR_RDMA_READ, 3000, p0.rm->rkey) == IBV_WC_SUCCESS);
	sg.addr = (uintptr_t)p0.rbuf;
	sg.length = BUFSZ;
	sg.lkey = p0.rm->lkey;
	memset(&rr, 0, sizeof(rr));
	rr.sg_list = &sg;
	rr.num_sge = 1;
	CHECK(ibv_post_recv(p0.b, &rr, &badr) == 0);
	CHECK(op(&p0, IBV_WR_SEND, 500, 0) == IBV_WC_SUCCESS);
	CHECK(op(&p1, IBV_WR_RDMA_WRITE, 777, p1.rm->rkey) == IBV_WC_SUCCESS);
	CHECK(op(&p1, IBV_WR_RDMA_WRITE, 4096, p1.rm->rkey ^ 0x100) == IBV_WC_REM_ACCESS_ERR);
	exit(st_failures ? 1 : 0);
}

int main(void)
{
	char path[] = "/tmp/rvxsim-stats-XXXXXX", line[256];
	int fd, status, seen0 = 0, seen1 = 0;
	pid_t pid;
	FILE *f;

	st_init("t_stats", 30);
	/* no verbs call before the fork: the model reads its environment once per process */
	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("RVXSIM_NUM_DEVICES", "2", 1);
		setenv("RVXSIM_STATS_FILE", path, 1);
		child();
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		unlink(path);
		st_skip(ST_SKIP_NODEV);
	}
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status 0x%x)", status);
	f = fopen(path, "r");
	REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long w, r;
		int p, d;
		st_note("%s", line);
		if (!CHECKF(sscanf(line, "rvxsim-stats pid=%d dev=mlx5_%d rdma_write_bytes=%llu rdma_read_bytes=%llu",
				  &p, &d, &w, &r) == 4, "line: %s", line))
			continue;
		CHECK_EQ(p, (int)pid);
		if (d == 0) {
			seen0++;
			CHECK_EQ(w, 10001ull);
			CHECK_EQ(r, 3000ull);
		} else if (CHECK_EQ(d, 1)) {
			seen1++;
			CHECK_EQ(w, 777ull);
			CHECK_EQ(r, 0ull);
		}
	}
	fclose(f);
	unlink(path);
	CHECK_EQ(seen0, 1);
	CHECK_EQ(seen1, 1);
	st_exit();
	return 0;
}
