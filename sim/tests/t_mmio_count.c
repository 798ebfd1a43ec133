/*
 * t_mmio_count: RVXSIM_COUNT_MMIO=1 counts, per process and exactly, the MMIO writes that tell
 * the adapter about new WQEs: send doorbell-record writes, 8-byte doorbells and BlueFlame copies
 * (rvxsim_mmio_counts(), and rvxsim_counters()'s sq_dbrec_writes= doorbells= bf_copies=).
 *
 * On a loopback RC pair driven through mlx5dv, each step's expected counts are what the step
 * itself wrote: one WQE with its record and a BlueFlame copy (1/0/1); four WQEs, one record, one
 * doorbell naming the last (1/1/0); three posts each with its record and doorbell (3/3/0); one
 * 3-WQEBB WQE copied by BlueFlame in 24 stores (1/0/1); through ibv_post_send a chain of two
 * (1/1/0) and one small inline WQE (1/0/1, libmlx5's BlueFlame rule). Receive records and a
 * RESET (the model clears the pages) count nothing. Every WQE completes and its data lands.
 * RVXSIM_STATS_FILE gets the totals at exit. Without the variable the same steps complete and
 * the function answers -1 and the counters line has no such keys. A store outside
 * the counted pages (or to a destroyed QP's record) still reaches the application's SIGSEGV
 * handler, or kills the process by SIGSEGV when there is none; a breakpoint still kills it by
 * SIGTRAP.
 */
#include "simtest.h"
#include <dlfcn.h>
#include <sys/resource.h>

static int (*counts_fn)(uint64_t out[3]);
static int counting;

struct c3 { uint64_t dbrec, db, bf; };

static struct c3 counts_now(void)
{
	uint64_t o[3] = { 0, 0, 0 };
	struct c3 c = { 0, 0, 0 };

	if (!counting)
		return c;
	REQUIRE(counts_fn(o) == 0);
	c.dbrec = o[0];
	c.db = o[1];
	c.bf = o[2];
	return c;
}

/* The counts moved by exactly (dbrec, db, bf) since `was`. */
#define EXPECT_DELTA(was, d_rec, d_db, d_bf) do {                          \
	if (counting) {                                                    \
		struct c3 _n = counts_now();                               \
		CHECK_EQ(_n.dbrec - (was).dbrec, (d_rec));                 \
		CHECK_EQ(_n.db - (was).db, (d_db));                        \
		CHECK_EQ(_n.bf - (was).bf, (d_bf));                        \
	}                                                                  \
} while (0)

/* the steps' sums: one_bf, batch_db, three_db, big_bf, verbs_path (chain, then one inline) */
#define TOTAL_DBREC (1 + 1 + 3 + 1 + 1 + 1)
#define TOTAL_DB    (0 + 1 + 3 + 0 + 1 + 0)
#define TOTAL_BF    (1 + 0 + 0 + 1 + 0 + 1)

static struct st_dev dev;
static struct st_cq acq, bcq;
static struct st_qp qa, qb;
static struct st_mr src, dst;

/* An inline RDMA WRITE of len bytes of src at off to dst at off, signaled; returns its index. */
static uint16_t write_wqe(unsigned off, unsigned len)
{
	struct st_wqe w;

	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)dst.buf + off, dst.mr->rkey);
	st_wqe_inline(&w, (uint8_t *)src.buf + off, len);
	return st_wqe_write(&qa, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
}

/* n signaled WQEs of len inline bytes each complete in order from first, and their bytes are at
 * the target. */
static void complete(uint16_t first, unsigned n, unsigned off, unsigned len)
{
	/* ctrl, raddr and the inline segment, in WQEBBs */
	unsigned nbb = (16 + 16 + ((4 + len + 15) & ~15u) + 63) / 64;
	struct mlx5_cqe64 cqe;

	for (unsigned i = 0; i < n; i++) {
		if (!ST_POLL(&acq, &cqe, 10000))
			return;
		CHECK_EQ(st_cqe_opcode(&cqe), MLX5_CQE_REQ);
		CHECKF(st_cqe_wqe_counter(&cqe) == (uint16_t)(first + i * nbb),
		       "CQE %u names WQE 0x%x", i, st_cqe_wqe_counter(&cqe));
	}
	CHECK(!memcmp((uint8_t *)dst.buf + off, (uint8_t *)src.buf + off, n * len));
}

static void fill(unsigned off, unsigned len, uint8_t seed)
{
	for (unsigned i = 0; i < len; i++)
		((uint8_t *)src.buf)[off + i] = (uint8_t)(seed + i * 7);
}

static void setup(void)
{
	struct st_qp_attr at = { .max_send_wr = 64, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline = 128 };
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct c3 c0;

	st_dev_open(&dev, 0);
	st_mr_alloc(&dev, &src, 4096, ST_ACCESS_ALL);
	st_mr_alloc(&dev, &dst, 4096, ST_ACCESS_ALL);
	st_qp_create_two(&dev, &qa, &acq, &qb, &bcq, 256, &at);
	c0 = counts_now();
	CHECK(c0.dbrec == 0 && c0.db == 0 && c0.bf == 0);
	/* a RESET (the model clears both pages) and a receive record: nothing counted */
	CHECK_EQ(st_qp_to_init(&dev, &qa), 0);
	CHECK_EQ(ibv_modify_qp(qa.qp, &reset, IBV_QP_STATE), 0);
	st_qp_connect_pair(&dev, &qa, &qb, 7);
	st_post_recv1(&qb, dst.buf, 64, dst.mr->lkey);
	EXPECT_DELTA(c0, 0, 0, 0);
}

/* (1) one WQE, its record, a BlueFlame copy */
static void one_bf(void)
{
	struct c3 c = counts_now();
	uint16_t i;

	st_ctx = "one WQE, BlueFlame";
	fill(0, 8, 1);
	i = write_wqe(0, 8);
	st_sq_dbrec(&qa, qa.pi);
	st_bf_copy(&qa, qa.last_ctrl_idx, 64);
	qa.nreq = 0;
	EXPECT_DELTA(c, 1, 0, 1);
	complete(i, 1, 0, 8);
}

/* (2) four WQEs, one record, one doorbell naming the last */
static void batch_db(void)
{
	struct c3 c = counts_now();
	uint16_t i;

	st_ctx = "four WQEs, one doorbell";
	fill(64, 32, 2);
	i = write_wqe(64, 8);
	write_wqe(72, 8);
	write_wqe(80, 8);
	write_wqe(88, 8);
	EXPECT_DELTA(c, 0, 0, 0);          /* writing WQEs is not MMIO */
	st_ring(&qa, ST_RING_DB);
	EXPECT_DELTA(c, 1, 1, 0);
	complete(i, 4, 64, 8);
}

/* (3) three posts, each with its record and doorbell */
static void three_db(void)
{
	struct c3 c = counts_now();
	uint16_t i = 0;

	st_ctx = "three posts, three doorbells";
	fill(128, 24, 3);
	for (unsigned k = 0; k < 3; k++) {
		uint16_t j = write_wqe(128 + 8 * k, 8);
		if (!k)
			i = j;
		st_ring(&qa, ST_RING_DB);
	}
	EXPECT_DELTA(c, 3, 3, 0);
	complete(i, 3, 128, 8);
}

/* (4) a WQE of three WQEBBs (100 bytes inline) copied by BlueFlame: 24 stores, one copy */
static void big_bf(void)
{
	struct c3 c = counts_now();
	uint16_t i;

	st_ctx = "3-WQEBB BlueFlame copy";
	fill(256, 100, 4);
	i = write_wqe(256, 100);
	CHECK_EQ(qa.last_ds, 9);
	st_sq_dbrec(&qa, qa.pi);
	st_bf_copy(&qa, qa.last_ctrl_idx, 144);
	qa.nreq = 0;
	EXPECT_DELTA(c, 1, 0, 1);
	complete(i, 1, 256, 100);
}

/* (5) through ibv_post_send: libmlx5 rings a doorbell for a chain and copies one small inline
 * WQE by BlueFlame. Returns the QP's doorbell record, for the stray-store check. */
static volatile uint32_t *verbs_path(struct ibv_qp **qp_out, struct ibv_cq **cq_out)
{
	struct ibv_cq *cq = ibv_create_cq(dev.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_send_sge = 1,
						.max_inline_data = 16 } };
	struct st_qp peer;
	struct st_addr a, b;
	struct ibv_sge sge = { (uintptr_t)src.buf + 512, 8, src.mr->lkey };
	struct ibv_send_wr wr[2], *bad;
	struct ibv_wc wc[4];
	struct mlx5dv_qp dv;
	struct mlx5dv_obj obj;
	struct ibv_qp *qp;
	struct c3 c;
	int got = 0;

	st_ctx = "verbs path";
	REQUIRE(cq != NULL);
	ia.send_cq = ia.recv_cq = cq;
	qp = ibv_create_qp(dev.pd, &ia);
	REQUIRE(qp != NULL);
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = qp;
	obj.qp.out = &dv;
	dv.comp_mask = 0;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0);
	/* qb's peer is qa; this QP talks to a QP of its own on qb's CQ */
	{
		struct st_qp_attr at = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 1,
					 .max_recv_sge = 1 };
		st_qp_create(&dev, &peer, &bcq, &bcq, &at);
	}
	st_addr_of(&dev, &peer, &b);
	memset(&a, 0, sizeof(a));
	a.qpn = qp->qp_num;
	a.lid = dev.port.lid;
	memcpy(a.gid, dev.gid.raw, 16);
	{
		struct st_qp tmp = { .qp = qp };
		st_qp_connect(&dev, &tmp, &b);
	}
	st_qp_connect(&dev, &peer, &a);

	fill(512, 24, 5);
	memset(wr, 0, sizeof(wr));
	for (int k = 0; k < 2; k++) {
		wr[k].wr_id = (uint64_t)k;
		wr[k].opcode = IBV_WR_RDMA_WRITE;
		wr[k].send_flags = IBV_SEND_SIGNALED;
		wr[k].wr.rdma.remote_addr = (uintptr_t)dst.buf + 512 + 8 * k;
		wr[k].wr.rdma.rkey = dst.mr->rkey;
	}
	wr[0].sg_list = &sge;
	wr[0].num_sge = 1;
	wr[0].next = &wr[1];
	struct ibv_sge sge1 = { (uintptr_t)src.buf + 520, 8, src.mr->lkey };
	wr[1].sg_list = &sge1;
	wr[1].num_sge = 1;
	c = counts_now();
	CHECK_EQ(ibv_post_send(qp, wr, &bad), 0);
	EXPECT_DELTA(c, 1, 1, 0);

	struct ibv_sge sge2 = { (uintptr_t)src.buf + 528, 8, src.mr->lkey };
	wr[0] = wr[1];
	wr[0].wr_id = 2;
	wr[0].sg_list = &sge2;
	wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr[0].wr.rdma.remote_addr = (uintptr_t)dst.buf + 528;
	wr[0].next = NULL;
	c = counts_now();
	CHECK_EQ(ibv_post_send(qp, wr, &bad), 0);
	EXPECT_DELTA(c, 1, 0, 1);

	for (uint64_t end = st_now_ns() + 10000000000ull; got < 3 && st_now_ns() < end;) {
		int n = ibv_poll_cq(cq, 4 - got, wc + got);
		REQUIRE(n >= 0);
		got += n;
	}
	CHECK_EQ(got, 3);
	for (int k = 0; k < got; k++) {
		CHECK_EQ(wc[k].status, IBV_WC_SUCCESS);
		CHECK_EQ(wc[k].wr_id, (uint64_t)k);
	}
	CHECK(!memcmp((uint8_t *)dst.buf + 512, (uint8_t *)src.buf + 512, 24));
	st_qp_destroy(&peer);
	*qp_out = qp;
	*cq_out = cq;
	return &dv.dbrec[MLX5_SND_DBR];
}

/* ---- stray stores are not swallowed ---- */

static void app_segv(int sig)
{
	(void)sig;
	_exit(42);
}

static void no_core(void)
{
	struct rlimit rl = { 0, 0 };
	setrlimit(RLIMIT_CORE, &rl);
}

/* In a child: a store to p must end it (status, as st_wait_pid gives it). */
static int store_in_child(volatile uint32_t *p)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		no_core();
		alarm(10);
		*p = 1;
		_exit(0);
	}
	return st_wait_pid(pid, 15000);
}

static volatile uint32_t *read_only_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED);
	return p;
}

/* Counting on, no handler of the application's: a stray store dies of SIGSEGV, a breakpoint of
 * SIGTRAP (the model's handlers are installed by then: a QP exists). */
static int crash_run(const char *what)
{
	struct st_cq c;
	struct st_qp q;
	struct st_qp_attr at = { .max_send_wr = 8, .max_send_sge = 1 };

	no_core();
	st_dev_open(&dev, 0);
	st_cq_create(&dev, &c, 16);
	st_qp_create(&dev, &q, &c, &c, &at);
	if (!strcmp(what, "segv"))
		*read_only_page() = 1;
	else
		__asm__ volatile("int3");
	return 0;   /* still alive: the model swallowed it */
}

static int counters_has(const char *key, unsigned long long *val)
{
	int (*fn)(char *, size_t) = (int (*)(char *, size_t))dlsym(RTLD_DEFAULT, "rvxsim_counters");
	char line[600], k[64];
	const char *s;

	REQUIRE(fn != NULL);
	REQUIRE(fn(line, sizeof(line)) < (int)sizeof(line));
	snprintf(k, sizeof(k), " %s=", key);
	s = strstr(line, k);
	if (s && val)
		*val = strtoull(s + strlen(k), NULL, 10);
	return s != NULL;
}

static void run(void)
{
	struct ibv_qp *vqp;
	struct ibv_cq *vcq;
	volatile uint32_t *stale;
	uint64_t o[3];

	if (counting) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = app_segv;
		sigemptyset(&sa.sa_mask);
		REQUIRE(sigaction(SIGSEGV, &sa, NULL) == 0);   /* before the model's */
		if (counts_fn(o) != 0)
			st_skip("RVXSIM_COUNT_MMIO is not available here (x86-64 Linux only)");
	} else {
		CHECK_EQ(counts_fn(o), -1);
		CHECK(!counters_has("doorbells", NULL));
	}
	setup();
	one_bf();
	batch_db();
	three_db();
	big_bf();
	stale = verbs_path(&vqp, &vcq);
	st_ctx = NULL;
	if (counting) {
		struct c3 c = counts_now();
		unsigned long long v[3] = { 0, 0, 0 };
		CHECK(counters_has("sq_dbrec_writes", &v[0]) && counters_has("doorbells", &v[1]) &&
		      counters_has("bf_copies", &v[2]));
		CHECK_EQ(v[0], c.dbrec);
		CHECK_EQ(v[1], c.db);
		CHECK_EQ(v[2], c.bf);
		CHECK_EQ(c.dbrec, TOTAL_DBREC);
		CHECK_EQ(c.db, TOTAL_DB);
		CHECK_EQ(c.bf, TOTAL_BF);
	}
	CHECK_EQ(ibv_destroy_qp(vqp), 0);
	CHECK_EQ(ibv_destroy_cq(vcq), 0);
	if (counting) {
		st_ctx = "stray stores";
		CHECKF(store_in_child(read_only_page()) == 42, "a store to a read-only page did not "
		       "reach the application's handler");
		CHECKF(store_in_child(stale) == 42, "a store to a destroyed QP's doorbell record did "
		       "not reach the application's handler");
	}
	st_ctx = NULL;
	st_qp_destroy(&qa);
	st_qp_destroy(&qb);
	st_cq_destroy(&acq);
	st_cq_destroy(&bcq);
	st_mr_free(&src);
	st_mr_free(&dst);
	st_dev_close(&dev);
}

/* The counting run's RVXSIM_STATS_FILE holds its totals at exit, in one line. */
static void stats_line(const char *path)
{
	char want[160], buf[1024];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!CHECKF(f != NULL, "no RVXSIM_STATS_FILE %s", path))
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	snprintf(want, sizeof(want), " sq_dbrec_writes=%d doorbells=%d bf_copies=%d\n",
		 TOTAL_DBREC, TOTAL_DB, TOTAL_BF);
	CHECKF(strstr(buf, "rvxsim-mmio pid=") && strstr(buf, want),
	       "RVXSIM_STATS_FILE holds \"%s\", not \"rvxsim-mmio pid=P%.*s\"", buf,
	       (int)strlen(want) - 1, want);
}

int main(int argc, char **argv)
{
	const char *sub = getenv("T_MMIO_SUB"), *mode = getenv("RVXSIM_COUNT_MMIO");

	(void)argc;
	st_init("t_mmio_count", 90);
	st_require_device();
	counts_fn = (int (*)(uint64_t *))dlsym(RTLD_DEFAULT, "rvxsim_mmio_counts");
	REQUIRE(counts_fn != NULL);
	if (sub)
		return crash_run(sub);
	counting = mode && !strcmp(mode, "1");
	run();
	if (!counting && !st_failures) {
		static char stats_env[96];
		char path[48];
		int rc;

		snprintf(path, sizeof(path), "/tmp/t_mmio_count.%d", (int)getpid());
		snprintf(stats_env, sizeof(stats_env), "RVXSIM_STATS_FILE=%s", path);
		unlink(path);
		rc = st_rerun(argv[0], 60000, "RVXSIM_COUNT_MMIO=1", stats_env, NULL);
		if (rc == 77) {
			unlink(path);
			st_skip("RVXSIM_COUNT_MMIO is not available here (x86-64 Linux only)");
		}
		CHECKF(rc == 0, "run with RVXSIM_COUNT_MMIO=1 exited with %d", rc);
		stats_line(path);
		unlink(path);
		rc = st_rerun(argv[0], 30000, "RVXSIM_COUNT_MMIO=1", "T_MMIO_SUB=segv", NULL);
		CHECKF(rc == 128 + SIGSEGV, "a stray store with counting on: exit %d, not SIGSEGV", rc);
		rc = st_rerun(argv[0], 30000, "RVXSIM_COUNT_MMIO=1", "T_MMIO_SUB=trap", NULL);
		CHECKF(rc == 128 + SIGTRAP, "a breakpoint with counting on: exit %d, not SIGTRAP", rc);
	}
	st_exit();
	return 0;
}
