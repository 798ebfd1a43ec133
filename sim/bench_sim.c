/* bench_sim: throughput and latency of the rvxsim engine, measured with ordinary verbs calls.
 *   simbench wqe_per_sec <n>        8-byte inline RDMA_WRITEs between two QPs of one process,
 *                                   one signaled every 64
 *   simbench pingpong_rtt_us <x>    SEND ping-pong round trip between two processes
 * Usage: bench_sim [writes] [pingpong iterations] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

#define CHK(x) do { if (!(x)) { fprintf(stderr, "bench_sim: %s:%d: %s failed\n", __FILE__, \
					 __LINE__, #x); exit(1); } } while (0)

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	uint16_t lid;
};

struct addr {
	uint16_t lid;
	uint32_t qpn;
	uint64_t raddr;
	uint32_t rkey;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void ep_open(struct ep *e, int send_wr)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr ia;

	CHK(l && l[0]);
	CHK((e->ctx = ibv_open_device(l[0])));
	ibv_free_device_list(l);
	CHK(!ibv_query_port(e->ctx, 1, &pa));
	e->lid = pa.lid;
	CHK((e->pd = ibv_alloc_pd(e->ctx)));
	CHK((e->buf = calloc(1, 1 << 16)));
	CHK((e->mr = ibv_reg_mr(e->pd, e->buf, 1 << 16, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)));
	CHK((e->cq = ibv_create_cq(e->ctx, 1024, NULL, NULL, 0)));
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = send_wr;
	ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 16;
	CHK((e->qp = ibv_create_qp(e->pd, &ia)));
}

static void ep_close(struct ep *e)
{
	ibv_destroy_qp(e->qp);
	ibv_destroy_cq(e->cq);
	ibv_dereg_mr(e->mr);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->buf);
}

static void ep_connect(struct ep *e, const struct addr *r)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	CHK(!ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			   IBV_QP_ACCESS_FLAGS));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = r->qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = r->lid;
	a.ah_attr.port_num = 1;
	CHK(!ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHK(!ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

static struct addr ep_addr(struct ep *e)
{
	struct addr a = { e->lid, e->qp->qp_num, (uintptr_t)e->buf, e->mr->rkey };
	return a;
}

static void wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		;
	CHK(n == 1);
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "bench_sim: completion error: %s\n", ibv_wc_status_str(wc->status));
		exit(1);
	}
}

static void bench_writes(long n)
{
	struct ep a, b;
	struct addr ra;
	struct ibv_sge sg;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	uint64_t val = 0;
	double t0, t1;
	long outstanding = 0;

	ep_open(&a, 256);
	ep_open(&b, 16);
	ra = ep_addr(&b);
	struct addr aa = ep_addr(&a);
	ep_connect(&a, &ra);
	ep_connect(&b, &aa);
	memset(&wr, 0, sizeof(wr));
	sg.addr = (uintptr_t)&val;
	sg.length = 8;
	sg.lkey = 0;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = ra.raddr;
	wr.wr.rdma.rkey = ra.rkey;
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		val = i;
		wr.wr_id = i;
		wr.send_flags = IBV_SEND_INLINE | ((i % 64) == 63 || i == n - 1 ? IBV_SEND_SIGNALED : 0);
		if (wr.send_flags & IBV_SEND_SIGNALED)
			outstanding++;
		/* keep at most two signaled batches in flight so the send queue never overflows */
		while (ibv_post_send(a.qp, &wr, &bad)) {
			wait_wc(a.cq, &wc);
			outstanding--;
		}
		if (outstanding > 2) {
			wait_wc(a.cq, &wc);
			outstanding--;
		}
	}
	while (outstanding > 0) {
		wait_wc(a.cq, &wc);
		outstanding--;
	}
	t1 = now_s();
	CHK(*(uint64_t *)b.buf == (uint64_t)(n - 1));
	printf("simbench wqe_per_sec %.0f\n", n / (t1 - t0));
	ep_close(&a);
	ep_close(&b);
}

static void post_recv(struct ep *e)
{
	struct ibv_sge sg = { (uintptr_t)e->buf + 4096, 64, e->mr->lkey };
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	CHK(!ibv_post_recv(e->qp, &wr, &bad));
}

static void send8(struct ep *e)
{
	struct ibv_sge sg = { (uintptr_t)e->buf, 8, e->mr->lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	CHK(!ibv_post_send(e->qp, &wr, &bad));
}

/* Wait for one receive and one send completion (in either order). */
static void wait_recv_and_send(struct ep *e)
{
	struct ibv_wc wc;
	int got_recv = 0, got_send = 0;
	while (!got_recv || !got_send) {
		wait_wc(e->cq, &wc);
		if (wc.opcode == IBV_WC_RECV)
			got_recv = 1;
		else
			got_send = 1;
	}
}

static void pingpong(long iters)
{
	int p2c[2], c2p[2];
	pid_t pid;
	struct ep e;
	struct addr mine, peer;
	char go;

	CHK(!pipe(p2c) && !pipe(c2p));
	pid = fork();
	CHK(pid >= 0);
	ep_open(&e, 64);
	mine = ep_addr(&e);
	if (pid == 0) {
		CHK(write(c2p[1], &mine, sizeof(mine)) == sizeof(mine));
		CHK(read(p2c[0], &peer, sizeof(peer)) == sizeof(peer));
		ep_connect(&e, &peer);
		for (int i = 0; i < 32; i++)
			post_recv(&e);
		CHK(write(c2p[1], "r", 1) == 1);
		for (long i = -100; i < iters; i++) {
			struct ibv_wc wc;
			do
				wait_wc(e.cq, &wc);
			while (wc.opcode != IBV_WC_RECV);
			post_recv(&e);
			send8(&e);
		}
		/* drain the last send completions before leaving */
		CHK(read(p2c[0], &go, 1) == 1);
		ep_close(&e);
		_exit(0);
	}
	CHK(read(c2p[0], &peer, sizeof(peer)) == sizeof(peer));
	CHK(write(p2c[1], &mine, sizeof(mine)) == sizeof(mine));
	ep_connect(&e, &peer);
	for (int i = 0; i < 32; i++)
		post_recv(&e);
	CHK(read(c2p[0], &go, 1) == 1);
	double t0 = 0;
	for (long i = -100; i < iters; i++) {   /* 100 warm-up rounds */
		if (i == 0)
			t0 = now_s();
		send8(&e);
		wait_recv_and_send(&e);
		post_recv(&e);
	}
	double t1 = now_s();
	CHK(write(p2c[1], "x", 1) == 1);
	waitpid(pid, NULL, 0);
	printf("simbench pingpong_rtt_us %.2f\n", (t1 - t0) * 1e6 / iters);
	ep_close(&e);
}

int main(int argc, char **argv)
{
	long writes = argc > 1 ? atol(argv[1]) : 1000000;
	long iters = argc > 2 ? atol(argv[2]) : 10000;

	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_writes(writes);
	pingpong(iters);
	return 0;
}
