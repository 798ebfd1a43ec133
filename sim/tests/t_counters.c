/*
 * t_counters: rvxsim_counters(), the model's per-process accounting that make scale reads. Every
 * control verb adds one to verbs=; QPs, registered bytes, CQ entries (as allocated: a power of
 * two) and SRQ WQEs follow creation and destruction, their peaks stay; the model's own heap
 * (model_bytes) grows with a QP and is given back with it. queue_bytes is the queues' part of it;
 * mr_rss and queue_rss say how much of the registered memory and of the queues is resident,
 * model_rss how much of the model's own heap is, engine_cpu_ns what its engine thread has used.
 */
#include "simtest.h"
#include <dlfcn.h>
#include <sys/mman.h>

struct counts { long long verbs, qps, qps_peak, mr, mr_peak, cqes, cqes_peak, srq, srq_peak, model,
		 queue, queue_rss, mr_rss, model_rss, engine_cpu; };

/* name=value in the line; every name follows a space but the first */
static long long field(const char *line, const char *name)
{
	char padded[600], key[64];
	const char *s;

	snprintf(padded, sizeof(padded), " %s", line);
	snprintf(key, sizeof(key), " %s=", name);
	s = strstr(padded, key);
	if (!CHECKF(s != NULL, "no %s in \"%s\"", name, line))
		return -1;
	return strtoll(s + strlen(key), NULL, 10);
}

static struct counts get(void)
{
	int (*fn)(char *, size_t) = (int (*)(char *, size_t))dlsym(RTLD_DEFAULT, "rvxsim_counters");
	char line[512];
	struct counts c;
	int n;

	REQUIRE(fn != NULL);
	/* A short buffer gets the length it needs and a terminated prefix, as snprintf. The engine
	 * thread's counters can gain a digit between two calls, so the length is compared only
	 * when the full calls either side of the short one agree. */
	for (int tries = 0; tries < 20; tries++) {
		char little[8];
		int m, n2;

		n = fn(line, sizeof(line));
		REQUIRE(n > 0 && n < (int)sizeof(line));
		m = fn(little, sizeof(little));
		n2 = fn(line, sizeof(line));
		if (n != n2 && tries < 19)
			continue;
		CHECK(little[sizeof(little) - 1] == '\0' && !memcmp(little, line, sizeof(little) - 1));
		if (n == n2)
			CHECK_EQ(m, n);
		else
			CHECK(m >= (int)sizeof(little));
		break;
	}
	c.verbs = field(line, "verbs");
	c.qps = field(line, "qps");
	c.qps_peak = field(line, "qps_peak");
	c.mr = field(line, "mr_bytes");
	c.mr_peak = field(line, "mr_bytes_peak");
	c.cqes = field(line, "cqes");
	c.cqes_peak = field(line, "cqes_peak");
	c.srq = field(line, "srq_wqes");
	c.srq_peak = field(line, "srq_wqes_peak");
	c.model = field(line, "model_bytes");
	c.queue = field(line, "queue_bytes");
	c.queue_rss = field(line, "queue_rss");
	c.mr_rss = field(line, "mr_rss");
	c.model_rss = field(line, "model_rss");
	c.engine_cpu = field(line, "engine_cpu_ns");
	return c;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct counts c0, c1, c2;
	static char buf[3 * 4096];
	int n = 0;

	st_init("t_counters", 30);
	list = ibv_get_device_list(&n);
	if (!list || n == 0)
		st_skip(ST_SKIP_NODEV);
	c0 = get();
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	REQUIRE(ctx != NULL);
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd != NULL);
	c1 = get();
	CHECK_EQ(c1.verbs - c0.verbs, 2);  /* open, alloc_pd */

	/* one of each: 1 + 1 + 1 + 1 verbs */
	cq = ibv_create_cq(ctx, 100, NULL, NULL, 0);
	REQUIRE(cq != NULL);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr != NULL);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 40, .max_sge = 1 } };
	srq = ibv_create_srq(pd, &sa);
	REQUIRE(srq != NULL);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
	};
	qp = ibv_create_qp(pd, &qa);
	REQUIRE(qp != NULL);
	c2 = get();
	CHECK_EQ(c2.verbs - c1.verbs, 4);
	CHECK_EQ(c2.qps - c1.qps, 1);
	CHECK_EQ(c2.mr - c1.mr, (long long)sizeof(buf));
	CHECK_EQ(c2.cqes - c1.cqes, 128);  /* 100 + 1 rounded up, as libmlx5 allocates */
	CHECK_EQ(c2.srq - c1.srq, 64);     /* 40 + 1 rounded up */
	CHECKF(c2.model - c1.model > 128 * 64, "model_bytes grew by %lld only", c2.model - c1.model);
	CHECK(c2.qps_peak >= c2.qps && c2.mr_peak >= c2.mr && c2.cqes_peak >= c2.cqes);
	/* the queues: the CQ's 128 entries of 64 bytes and the SRQ's 64 WQEs at least, within the
	 * model's heap; resident no more than their pages */
	CHECKF(c2.queue - c1.queue >= 128 * 64 + 64 * 16 && c2.queue - c1.queue <= c2.model - c1.model,
	       "queue_bytes grew by %lld (model_bytes by %lld)", c2.queue - c1.queue, c2.model - c1.model);
	CHECKF(c2.queue_rss > 0 && c2.queue_rss <= c2.queue + 3 * 4096, "queue_rss %lld of %lld bytes",
	       c2.queue_rss, c2.queue);
	/* the engine thread runs (it spins before it first sleeps); on a loaded machine it may not
	 * have been scheduled yet: wait for it, up to the test's time limit */
	for (int i = 0; c2.engine_cpu == 0 && i < 2000; i++) {
		usleep(10000);
		c2.engine_cpu = get().engine_cpu;
	}
	CHECKF(c2.engine_cpu > 0, "engine_cpu_ns %lld with the device open", c2.engine_cpu);
	/* the model's own heap: some of it resident, never more than it holds besides the queues,
	 * and the QP's record ring (untouched yet) not all of it */
	CHECKF(c2.model_rss > 0 && c2.model_rss < c2.model - c2.queue, "model_rss %lld of %lld bytes",
	       c2.model_rss, c2.model - c2.queue);


	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	c1 = get();
	CHECK_EQ(c1.verbs - c2.verbs, 4);
	CHECK_EQ(c1.qps, c0.qps);
	CHECK_EQ(c1.mr, c0.mr);
	CHECK_EQ(c1.cqes, c0.cqes);
	CHECK_EQ(c1.srq, c0.srq);
	CHECK_EQ(c1.model, c0.model);
	CHECK_EQ(c1.queue, c0.queue);
	/* the peaks remember */
	CHECK_EQ(c1.qps_peak, c2.qps_peak);
	CHECK_EQ(c1.mr_peak, c2.mr_peak);
	CHECK_EQ(c1.cqes_peak, c2.cqes_peak);

	/* registered pages count as resident once touched, not before */
	{
		long pg = sysconf(_SC_PAGESIZE);
		uint8_t *m = mmap(NULL, 4 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
		struct ibv_mr *mr2;
		struct counts r0, r1;

		REQUIRE(m != MAP_FAILED);
		r0 = get();
		mr2 = ibv_reg_mr(pd, m, 4 * (size_t)pg, IBV_ACCESS_LOCAL_WRITE);
		REQUIRE(mr2 != NULL);
		r1 = get();
		CHECKF(r1.mr_rss == r0.mr_rss, "an untouched region added %lld resident bytes",
		       r1.mr_rss - r0.mr_rss);
		m[0] = 1;
		m[2 * pg + 5] = 1;
		r1 = get();
		CHECKF(r1.mr_rss - r0.mr_rss == 2 * pg, "two pages touched, %lld resident bytes",
		       r1.mr_rss - r0.mr_rss);
		CHECK_EQ(ibv_dereg_mr(mr2), 0);
		r1 = get();
		CHECK_EQ(r1.mr_rss, r0.mr_rss);
		munmap(m, 4 * (size_t)pg);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	st_exit();
}
