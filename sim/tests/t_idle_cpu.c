/*
 * t_idle_cpu: an opened device with a connected QP and no traffic costs less
 * than 5% of a core (whole process, engine threads included), and the
 * threads the device started are gone after ibv_close_device.
 */
#include "simtest.h"
#include <dirent.h>

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits up to ms for the thread count to drop to want. */
static int threads_back_to(int want, unsigned ms)
{
	uint64_t end = st_now_ns() + (uint64_t)ms * 1000000ull;
	int n;
	while ((n = count_threads()) > want && st_now_ns() < end)
		st_sleep_ms(5);
	return n;
}

static void measure(const char *what, unsigned ms)
{
	uint64_t c0, c1, w0, w1;
	double frac;

	c0 = cpu_ns();
	w0 = st_now_ns();
	st_sleep_ms(ms);
	c1 = cpu_ns();
	w1 = st_now_ns();
	frac = (double)(c1 - c0) / (double)(w1 - w0);
	st_note("%s: %.2f%% of a core over %u ms", what, frac * 100.0, ms);
	CHECKF(frac < 0.05, "%s: idle process used %.1f%% of a core (limit 5%%)", what, frac * 100.0);
}

/* Two processes with a cross-process RC connection, both idle. */
static void idle_connected_pair(void)
{
	struct st_qp_attr a = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1 };
	struct st_dev d;
	struct st_cq cq;
	struct st_qp q;
	struct st_addr peer;
	int sock, rc;
	pid_t pid;
	char ch = 'g';
	struct mlx5_cqe64 c;
	uint16_t idx;

	st_ctx = "idle across processes";
	pid = st_fork_peer(&sock, 20);
	if (pid == 0) {
		struct st_dev cd;
		struct st_cq ccq;
		struct st_qp cq_;
		struct st_addr cpeer;
		uint64_t c0, w0;
		double frac;

		st_name = "t_idle_cpu(child)";
		st_dev_open(&cd, 0);
		st_cq_create(&cd, &ccq, 16);
		st_qp_create(&cd, &cq_, &ccq, &ccq, &a);
		if (st_exchange_connect(&cd, &cq_, NULL, sock, &cpeer))
			_exit(1);
		if (st_send_all(sock, &ch, 1))
			_exit(1);
		c0 = cpu_ns();
		w0 = st_now_ns();
		if (st_recv_all(sock, &ch, 1))     /* idle until the parent is done */
			_exit(1);
		frac = (double)(cpu_ns() - c0) / (double)(st_now_ns() - w0);
		st_note("connected peer process: %.2f%% of a core while idle", frac * 100.0);
		CHECKF(frac < 0.05, "idle connected peer used %.1f%% of a core", frac * 100.0);
		_exit(st_failures ? 1 : 0);
	}
	st_dev_open(&d, 0);
	st_cq_create(&d, &cq, 16);
	st_qp_create(&d, &q, &cq, &cq, &a);
	REQUIRE(st_exchange_connect(&d, &q, NULL, sock, &peer) == 0);
	REQUIRE(st_recv_all(sock, &ch, 1) == 0);
	/* one round trip so the connection is really in use, then idle */
	idx = st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
	if (ST_POLL(&cq, &c, 3000))
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);
	measure("idle with a cross-process connection", 1000);
	REQUIRE(st_send_all(sock, &ch, 1) == 0);
	rc = st_wait_pid(pid, 5000);
	CHECKF(rc == 0, "peer process exited with %d", rc);
	st_qp_destroy(&q);
	st_cq_destroy(&cq);
	st_dev_close(&d);
	close(sock);
	st_ctx = NULL;
}

int main(void)
{
	struct st_pair P;
	struct st_mr m;
	struct mlx5_cqe64 c;
	struct st_wqe w;
	int t_before, t_open, t_after;
	uint16_t idx;

	st_init("t_idle_cpu", 30);
	t_before = count_threads();
	REQUIRE(t_before >= 1);

	st_pair_open(&P);
	st_mr_alloc(&P.d, &m, 4096, ST_ACCESS_ALL);
	t_open = count_threads();
	st_note("threads: %d before open, %d with the device open", t_before, t_open);

	/* Idle right after setup. */
	st_ctx = "idle after setup";
	measure("idle after setup", 1000);

	/* Some traffic, then idle again (an engine that woke up must go back to sleep). */
	st_ctx = "idle after traffic";
	{
		int i;
		for (i = 0; i < 200; i++) {
			st_wqe_begin(&w);
			st_wqe_raddr(&w, (uintptr_t)m.buf + (i % 64) * 8, m.mr->rkey);
			st_wqe_inline(&w, &i, 4);
			idx = st_post(&P.a, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
			if (!ST_POLL(&P.acq, &c, 3000))
				break;
			CHECK_EQ(st_cqe_wqe_counter(&c), idx);
		}
	}
	st_sleep_ms(100);
	measure("idle after traffic", 1000);

	/* Still responsive after idling. */
	st_ctx = "wake";
	idx = st_post_nop(&P.a, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
	if (ST_POLL(&P.acq, &c, 3000))
		CHECK_EQ(st_cqe_wqe_counter(&c), idx);

	st_ctx = "close";
	st_mr_free(&m);
	st_pair_close(&P);
	t_after = threads_back_to(t_before, 2000);
	CHECKF(t_after == t_before, "%d threads after ibv_close_device, %d before open", t_after, t_before);

	idle_connected_pair();
	t_after = threads_back_to(t_before, 2000);
	CHECKF(t_after == t_before, "%d threads after the cross-process run, %d before", t_after, t_before);

	/* Open and close again: no thread is left behind either time. */
	{
		struct st_dev d;
		st_dev_open(&d, 0);
		st_dev_close(&d);
		t_after = threads_back_to(t_before, 2000);
		CHECKF(t_after == t_before, "%d threads after a second open/close, %d before", t_after,
		       t_before);
	}
	st_exit();
	return 0;
}
