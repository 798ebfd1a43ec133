/*
 * simtest.h: helpers shared by the rvxsim tests.
 *
 * The tests check the model against rdma-core's own definitions (the installed
 * <infiniband/verbs.h> and <infiniband/mlx5dv.h>) and the mlx5 facts sheet.
 * WQEs are built with mlx5dv_set_ctrl_seg()/mlx5dv_set_data_seg() plus segments
 * laid out by hand, written straight into the send queue, rung with the doorbell
 * record plus an 8-byte doorbell or a BlueFlame copy, and completions are read
 * straight from the CQ buffer. Nothing here includes the model's sources.
 *
 * Exit codes: 0 pass, 1 fail, 77 skip (with a reason line).
 */
#ifndef SIMTEST_H
#define SIMTEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ST_SKIP_NODEV "no RDMA device: run with LD_LIBRARY_PATH=build/sim to use rvxsim"

/* ------------------------------------------------------------------ */
/* Reporting                                                           */
/* ------------------------------------------------------------------ */

static int st_failures;
static int st_report_fd = 2;   /* where failure lines go (stderr may be captured) */
static const char *st_name = "test";
static const char *st_ctx;     /* current step, printed with failures */

/* Ends the report line begun in buf (n bytes so far) with fmt and a newline, and writes it. */
static inline void st_vreport(char *buf, size_t size, int n, const char *fmt, va_list ap)
{
	n += vsnprintf(buf + n, size - (size_t)n - 2, fmt, ap);
	if (n > (int)size - 2)
		n = (int)size - 2;
	buf[n++] = '\n';
	if (write(st_report_fd, buf, (size_t)n) < 0) {
		/* nothing better to do */
	}
}

__attribute__((format(printf, 3, 4)))
static inline void st_fail_at(const char *file, int line, const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s:%d: FAIL: %s%s%s", file, line,
			 st_ctx ? "[" : "", st_ctx ? st_ctx : "", st_ctx ? "] " : "");
	va_list ap;

	va_start(ap, fmt);
	st_vreport(buf, sizeof(buf), n, fmt, ap);
	va_end(ap);
	st_failures++;
}

__attribute__((format(printf, 1, 2)))
static inline void st_note(const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s: ", st_name);
	va_list ap;

	va_start(ap, fmt);
	st_vreport(buf, sizeof(buf), n, fmt, ap);
	va_end(ap);
}

/* CHECK(cond) reports and counts a failed check; it evaluates to cond. */
#define CHECK(c) ({ int _st_ok = !!(c);                                        \
	(void)(_st_ok || (st_fail_at(__FILE__, __LINE__, "%s", #c), 0)); _st_ok; })
#define CHECKF(c, ...) ({ int _st_ok = !!(c);                                   \
	(void)(_st_ok || (st_fail_at(__FILE__, __LINE__, __VA_ARGS__), 0)); _st_ok; })
#define CHECK_EQ(a, b) ({                                                        \
	unsigned long long _st_a = (unsigned long long)(a);                        \
	unsigned long long _st_b = (unsigned long long)(b);                        \
	if (_st_a != _st_b)                                                        \
		st_fail_at(__FILE__, __LINE__, "%s == %s: got 0x%llx, expected 0x%llx", \
			   #a, #b, _st_a, _st_b);                                  \
	_st_a == _st_b; })
/* REQUIRE: a failed check that makes the rest of the test meaningless. */
#define REQUIRE(c) do { if (!CHECK(c)) st_exit(); } while (0)

static inline void st_exit(void)
{
	if (st_failures)
		st_note("FAIL (%d failed checks)", st_failures);
	else
		st_note("PASS");
	exit(st_failures ? 1 : 0);
}

__attribute__((noreturn))
static inline void st_skip(const char *why)
{
	st_note("SKIP: %s", why);
	exit(77);
}

static void st_alarm_handler(int sig)
{
	static const char msg[] = "FAIL: timeout (alarm), test did not finish\n";
	(void)sig;
	if (write(st_report_fd, msg, sizeof(msg) - 1) < 0) {
		/* ignore */
	}
	_exit(1);
}

/* Call first: names the test and arms a watchdog so nothing can hang. */
static inline void st_init(const char *name, unsigned timeout_s)
{
	st_name = name;
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGALRM, st_alarm_handler);
	alarm(timeout_s);
}

/* ------------------------------------------------------------------ */
/* Time                                                                */
/* ------------------------------------------------------------------ */

static inline uint64_t st_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void st_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ */
/* Barriers (named by what they order)                                 */
/* ------------------------------------------------------------------ */

/* WQE/record stores before the doorbell record / MMIO write. */
static inline void st_to_device_barrier(void)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Write-combining flush around MMIO writes. */
static inline void st_wc_flush(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("sfence" ::: "memory");
#else
	__sync_synchronize();
#endif
}

/* Owner bit read before the rest of the CQE. */
static inline void st_from_device_barrier(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* Device                                                              */
/* ------------------------------------------------------------------ */

struct st_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_port_attr port;
	union ibv_gid gid;
	uint8_t port_num;
	int eth;
};

/* Exits 77 unless a device is listed. Opens nothing: a test that forks opens its
 * devices in each process afterwards. */
static inline void st_require_device(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (list)
		ibv_free_device_list(list);
	if (n <= 0)
		st_skip(ST_SKIP_NODEV);
}

/* Opens device number idx (0 = mlx5_0). Exits 77 when no device exists. */
static inline void st_dev_open(struct st_dev *d, int idx)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	memset(d, 0, sizeof(*d));
	if (!list || n == 0) {
		if (list)
			ibv_free_device_list(list);
		st_skip(ST_SKIP_NODEV);
	}
	if (idx >= n) {
		ibv_free_device_list(list);
		st_skip("needs a second device (RVXSIM_NUM_DEVICES=2)");
	}
	d->ctx = ibv_open_device(list[idx]);
	ibv_free_device_list(list);
	REQUIRE(d->ctx != NULL);
	d->port_num = 1;
	REQUIRE(ibv_query_port(d->ctx, d->port_num, &d->port) == 0);
	d->eth = d->port.link_layer == IBV_LINK_LAYER_ETHERNET;
	REQUIRE(ibv_query_gid(d->ctx, d->port_num, 0, &d->gid) == 0);
	d->pd = ibv_alloc_pd(d->ctx);
	REQUIRE(d->pd != NULL);
}

static inline void st_dev_close(struct st_dev *d)
{
	if (d->pd)
		CHECK(ibv_dealloc_pd(d->pd) == 0);
	if (d->ctx)
		CHECK(ibv_close_device(d->ctx) == 0);
	memset(d, 0, sizeof(*d));
}

/* Registered buffer. */
struct st_mr {
	void *buf;
	size_t len;
	struct ibv_mr *mr;
};

#define ST_ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static inline void st_mr_alloc(struct st_dev *d, struct st_mr *m, size_t len, int access)
{
	m->len = len;
	m->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	REQUIRE(m->buf != NULL);
	memset(m->buf, 0, len);
	m->mr = ibv_reg_mr(d->pd, m->buf, len, access);
	REQUIRE(m->mr != NULL);
}

static inline void st_mr_free(struct st_mr *m)
{
	if (m->mr)
		CHECK(ibv_dereg_mr(m->mr) == 0);
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------ */
/* Completion queue, polled directly                                   */
/* ------------------------------------------------------------------ */

struct st_cq {
	struct ibv_cq *cq;
	struct mlx5dv_cq dv;
	uint32_t ci;          /* free-running consumer index */
};

static inline void st_cq_create(struct st_dev *d, struct st_cq *c, int n)
{
	struct mlx5dv_obj obj;

	memset(c, 0, sizeof(*c));
	c->cq = ibv_create_cq(d->ctx, n, NULL, NULL, 0);
	REQUIRE(c->cq != NULL);
	memset(&obj, 0, sizeof(obj));
	obj.cq.in = c->cq;
	obj.cq.out = &c->dv;
	c->dv.comp_mask = 0;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == 0);
	REQUIRE(c->dv.cqe_cnt != 0 && (c->dv.cqe_cnt & (c->dv.cqe_cnt - 1)) == 0);
	REQUIRE(c->dv.cqe_size == 64 || c->dv.cqe_size == 128);
}

static inline void st_cq_destroy(struct st_cq *c)
{
	if (c->cq)
		CHECK(ibv_destroy_cq(c->cq) == 0);
	memset(c, 0, sizeof(*c));
}

/* The 64-byte CQE for free-running index idx (second half of a 128-B entry). */
static inline struct mlx5_cqe64 *st_cqe_at(struct st_cq *c, uint32_t idx)
{
	char *e = (char *)c->dv.buf + (size_t)(idx & (c->dv.cqe_cnt - 1)) * c->dv.cqe_size;
	return (struct mlx5_cqe64 *)(e + (c->dv.cqe_size == 128 ? 64 : 0));
}

/* Valid CQE at the consumer index, or NULL. */
static inline struct mlx5_cqe64 *st_cq_peek(struct st_cq *c)
{
	struct mlx5_cqe64 *cqe = st_cqe_at(c, c->ci);
	uint8_t op_own = __atomic_load_n(&cqe->op_own, __ATOMIC_RELAXED);

	if ((op_own >> 4) == MLX5_CQE_INVALID)
		return NULL;
	if ((op_own & MLX5_CQE_OWNER_MASK) != !!(c->ci & c->dv.cqe_cnt))
		return NULL;
	st_from_device_barrier();
	return cqe;
}

static inline void st_cq_set_ci(struct st_cq *c)
{
	st_to_device_barrier();
	__atomic_store_n(&c->dv.dbrec[0], htobe32(c->ci & 0xffffff), __ATOMIC_RELAXED);
}

/*
 * Waits up to timeout_ms for the next CQE, copies it to out, consumes it and
 * updates the consumer index record. Returns 1, or 0 on timeout.
 */
static inline int st_cq_poll(struct st_cq *c, struct mlx5_cqe64 *out, unsigned timeout_ms)
{
	uint64_t end = st_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct mlx5_cqe64 *cqe;

	for (;;) {
		cqe = st_cq_peek(c);
		if (cqe)
			break;
		if (st_now_ns() > end)
			return 0;
		sched_yield();
	}
	if (out)
		memcpy(out, cqe, sizeof(*out));
	c->ci++;
	st_cq_set_ci(c);
	return 1;
}

/* Checks that no CQE arrives within ms. */
static inline int st_cq_empty_for(struct st_cq *c, unsigned ms)
{
	uint64_t end = st_now_ns() + (uint64_t)ms * 1000000ull;
	do {
		if (st_cq_peek(c))
			return 0;
		sched_yield();
	} while (st_now_ns() < end);
	return 1;
}

static inline uint8_t st_cqe_opcode(const struct mlx5_cqe64 *c)
{
	return c->op_own >> 4;
}

static inline uint8_t st_cqe_format(const struct mlx5_cqe64 *c)
{
	return (c->op_own >> 2) & 3;
}

static inline uint8_t st_cqe_syndrome(const struct mlx5_cqe64 *c)
{
	return ((const struct mlx5_err_cqe *)c)->syndrome;
}

static inline uint16_t st_cqe_wqe_counter(const struct mlx5_cqe64 *c)
{
	return be16toh(c->wqe_counter);
}

/* [31:24] opcode of the send WQE, [23:0] QPN (same place in error CQEs). */
static inline uint32_t st_cqe_sop_qpn(const struct mlx5_cqe64 *c)
{
	return be32toh(c->sop_drop_qpn);
}

static inline const char *st_cqe_str(const struct mlx5_cqe64 *c, char *buf, size_t n)
{
	snprintf(buf, n, "op=%u synd=0x%02x vendor=0x%02x sop_qpn=0x%08x wqe_counter=%u byte_cnt=%u",
		 st_cqe_opcode(c), st_cqe_syndrome(c),
		 ((const struct mlx5_err_cqe *)c)->vendor_err_synd,
		 st_cqe_sop_qpn(c), st_cqe_wqe_counter(c), be32toh(c->byte_cnt));
	return buf;
}

/* Polls one CQE, requiring it to arrive within timeout_ms. */
#define ST_POLL(cq, out, ms) CHECKF(st_cq_poll((cq), (out), (ms)), "no CQE within %u ms on %s", (unsigned)(ms), #cq)

/* ------------------------------------------------------------------ */
/* Queue pair                                                          */
/* ------------------------------------------------------------------ */

struct st_qp {
	struct ibv_qp *qp;
	struct st_cq *scq, *rcq;
	struct mlx5dv_qp dv;
	struct ibv_qp_cap cap;        /* as returned by ibv_create_qp */
	uint32_t qpn;
	uint32_t pi;                  /* send producer count in WQEBBs (free-running) */
	uint32_t rq_head;             /* receive WQEs posted (free-running) */
	uint32_t bf_off;              /* which BlueFlame half is next */
	uint32_t last_ctrl_idx;       /* pi of the last WQE written */
	uint8_t last_ds;
	uint32_t nreq;                /* WQEs written since the last ring */
};

struct st_qp_attr {
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	struct ibv_srq *srq;
	int sq_sig_all;
};

static inline void st_qp_create(struct st_dev *d, struct st_qp *q, struct st_cq *scq,
				struct st_cq *rcq, const struct st_qp_attr *a)
{
	struct ibv_qp_init_attr ia;
	struct mlx5dv_obj obj;

	memset(q, 0, sizeof(*q));
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq->cq;
	ia.recv_cq = rcq->cq;
	ia.srq = a->srq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = a->sq_sig_all;
	ia.cap.max_send_wr = a->max_send_wr;
	ia.cap.max_recv_wr = a->srq ? 0 : a->max_recv_wr;
	ia.cap.max_send_sge = a->max_send_sge;
	ia.cap.max_recv_sge = a->srq ? 0 : a->max_recv_sge;
	ia.cap.max_inline_data = a->max_inline;
	q->qp = ibv_create_qp(d->pd, &ia);
	REQUIRE(q->qp != NULL);
	q->cap = ia.cap;
	q->scq = scq;
	q->rcq = rcq;
	q->qpn = q->qp->qp_num;
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = q->qp;
	obj.qp.out = &q->dv;
	q->dv.comp_mask = 0;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0);
	REQUIRE(q->dv.sq.stride == 64);
	REQUIRE(q->dv.sq.wqe_cnt && (q->dv.sq.wqe_cnt & (q->dv.sq.wqe_cnt - 1)) == 0);
}

/* Two QPs on d, each on its own CQ of n entries for both queues (created in that order). */
static inline void st_qp_create_two(struct st_dev *d, struct st_qp *a, struct st_cq *ac,
				    struct st_qp *b, struct st_cq *bc, int n,
				    const struct st_qp_attr *attr)
{
	st_cq_create(d, ac, n);
	st_cq_create(d, bc, n);
	st_qp_create(d, a, ac, ac, attr);
	st_qp_create(d, b, bc, bc, attr);
}

static inline void st_qp_destroy(struct st_qp *q)
{
	if (q->qp)
		CHECK(ibv_destroy_qp(q->qp) == 0);
	memset(q, 0, sizeof(*q));
}

/* What a peer needs to connect (exchanged over a socket between processes). */
struct st_addr {
	uint32_t qpn;
	uint16_t lid;
	uint16_t pad;
	uint8_t gid[16];
	uint64_t addr;        /* a registered buffer */
	uint32_t rkey;
	uint32_t pad2;
};

static inline void st_addr_of(struct st_dev *d, struct st_qp *q, struct st_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->qpn = q->qpn;
	a->lid = d->port.lid;
	memcpy(a->gid, d->gid.raw, 16);
}

#define ST_INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define ST_RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
		     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define ST_RTS_MASK (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | \
		     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

static inline int st_qp_to_init(struct st_dev *d, struct st_qp *q)
{
	struct ibv_qp_attr at;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.pkey_index = 0;
	at.port_num = d->port_num;
	at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return ibv_modify_qp(q->qp, &at, ST_INIT_MASK);
}

static inline void st_rtr_attr(struct st_dev *d, const struct st_addr *r, struct ibv_qp_attr *at)
{
	memset(at, 0, sizeof(*at));
	at->qp_state = IBV_QPS_RTR;
	at->path_mtu = IBV_MTU_1024;
	at->dest_qp_num = r->qpn;
	at->rq_psn = 0;
	at->max_dest_rd_atomic = 16;
	at->min_rnr_timer = 1;
	at->ah_attr.dlid = r->lid;
	at->ah_attr.sl = 0;
	at->ah_attr.port_num = d->port_num;
	if (d->eth) {
		at->ah_attr.is_global = 1;
		memcpy(at->ah_attr.grh.dgid.raw, r->gid, 16);
		at->ah_attr.grh.sgid_index = 0;
		at->ah_attr.grh.hop_limit = 64;
	}
}

static inline int st_qp_to_rtr(struct st_dev *d, struct st_qp *q, const struct st_addr *r)
{
	struct ibv_qp_attr at;

	st_rtr_attr(d, r, &at);
	return ibv_modify_qp(q->qp, &at, ST_RTR_MASK);
}

static inline int st_qp_to_rts(struct st_qp *q, uint8_t retry_cnt, uint8_t rnr_retry, uint8_t timeout)
{
	struct ibv_qp_attr at;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = timeout;
	at.retry_cnt = retry_cnt;
	at.rnr_retry = rnr_retry;
	at.sq_psn = 0;
	at.max_rd_atomic = 16;
	return ibv_modify_qp(q->qp, &at, ST_RTS_MASK);
}

/* RESET -> INIT -> RTR -> RTS toward r with the facts-sheet masks. */
static inline void st_qp_connect_ex(struct st_dev *d, struct st_qp *q, const struct st_addr *r,
				    uint8_t retry_cnt, uint8_t rnr_retry, uint8_t timeout)
{
	int rc;

	rc = st_qp_to_init(d, q);
	CHECKF(rc == 0, "modify RESET->INIT: %d", rc);
	rc = st_qp_to_rtr(d, q, r);
	CHECKF(rc == 0, "modify INIT->RTR: %d", rc);
	rc = st_qp_to_rts(q, retry_cnt, rnr_retry, timeout);
	CHECKF(rc == 0, "modify RTR->RTS: %d", rc);
	if (rc)
		st_exit();
}

static inline void st_qp_connect(struct st_dev *d, struct st_qp *q, const struct st_addr *r)
{
	st_qp_connect_ex(d, q, r, 7, 7, 14);
}

/* An RC QP through ibv_create_qp on pd, both queues on cq (8 WRs, one SGE each), in RESET: for
 * st_ibqp_connect. */
static inline struct ibv_qp *st_ibqp_rc(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &ia);
}

/* Connects QP q (made by ibv_create_qp, not st_qp_create) to QP peer on the same device. */
static inline void st_ibqp_connect(struct st_dev *d, struct ibv_qp *q, const struct ibv_qp *peer)
{
	struct st_qp tmp;
	struct st_addr r;

	memset(&tmp, 0, sizeof(tmp));
	tmp.qp = q;
	memset(&r, 0, sizeof(r));
	r.qpn = peer->qp_num;
	r.lid = d->port.lid;
	memcpy(r.gid, d->gid.raw, 16);
	st_qp_connect(d, &tmp, &r);
}

/* One work completion from cq by ibv_poll_cq within 3 s (a failed check when none came). */
static inline int st_poll_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t end = st_now_ns() + 3000000000ull;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			break;
		sched_yield();
	} while (st_now_ns() < end);
	return CHECKF(n == 1, "ibv_poll_cq returned %d", n);
}

/* One signaled work request of one SGE on qp (an RDMA WRITE or READ, or a fetch-and-add of add
 * whose old value lands at laddr) and its completion from cq: the completion's status, -1 when
 * the post failed or no completion came. */
static inline int st_post_one(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op,
			      uint32_t lkey, void *laddr, uint32_t len, uint32_t rkey, void *raddr,
			      uint64_t add)
{
	struct ibv_sge sg = { (uintptr_t)laddr, len, lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (!CHECK(ibv_post_send(qp, &wr, &bad) == 0) || !st_poll_wc(cq, &wc))
		return -1;
	return (int)wc.status;
}

/* Connects two QPs on one device to each other (retry_cnt 7, timeout 14). */
static inline void st_qp_connect_pair(struct st_dev *d, struct st_qp *a, struct st_qp *b,
				      uint8_t rnr_retry)
{
	struct st_addr aa, ba;

	st_addr_of(d, a, &aa);
	st_addr_of(d, b, &ba);
	st_qp_connect_ex(d, a, &ba, 7, rnr_retry, 14);
	st_qp_connect_ex(d, b, &aa, 7, rnr_retry, 14);
}

/* ------------------------------------------------------------------ */
/* Building WQEs                                                       */
/* ------------------------------------------------------------------ */

/* A WQE is staged contiguously, then copied into the SQ with wrap at qend. */
struct st_wqe {
	uint8_t b[1024] __attribute__((aligned(64)));
	unsigned len;          /* bytes used, a multiple of 16 */
};

static inline void st_wqe_begin(struct st_wqe *w)
{
	memset(w->b, 0, sizeof(w->b));
	w->len = sizeof(struct mlx5_wqe_ctrl_seg);
}

static inline void *st_wqe_seg(struct st_wqe *w, unsigned bytes)
{
	void *p = w->b + w->len;
	w->len += (bytes + 15) & ~15u;
	return p;
}

static inline void st_wqe_raddr(struct st_wqe *w, uint64_t raddr, uint32_t rkey)
{
	struct mlx5_wqe_raddr_seg *r = st_wqe_seg(w, sizeof(*r));
	r->raddr = htobe64(raddr);
	r->rkey = htobe32(rkey);
	r->reserved = 0;
}

static inline void st_wqe_data(struct st_wqe *w, uint32_t len, uint32_t lkey, const void *addr)
{
	struct mlx5_wqe_data_seg *s = st_wqe_seg(w, sizeof(*s));
	mlx5dv_set_data_seg(s, len, lkey, (uintptr_t)addr);
}

/* Byte left in the padding after inline payload (libmlx5 leaves it unwritten). */
static uint8_t st_inline_pad = 0;

/* One inline segment: byte_count = len | MLX5_INLINE_SEG, payload padded to 16. */
static inline void st_wqe_inline(struct st_wqe *w, const void *p, uint32_t len)
{
	struct mlx5_wqe_inl_data_seg *s;
	unsigned padded;

	if (!len)
		return;
	padded = (unsigned)((sizeof(*s) + len + 15) & ~15u);
	s = st_wqe_seg(w, (unsigned)(sizeof(*s) + len));
	s->byte_count = htobe32(len | MLX5_INLINE_SEG);
	memcpy(s + 1, p, len);
	memset((uint8_t *)(s + 1) + len, st_inline_pad, padded - sizeof(*s) - len);
}

static inline void st_wqe_atomic(struct st_wqe *w, uint64_t swap_add, uint64_t compare)
{
	struct mlx5_wqe_atomic_seg *a = st_wqe_seg(w, sizeof(*a));
	a->swap_add = htobe64(swap_add);
	a->compare = htobe64(compare);
}

/* Masked atomic segments (facts sheet section 2; operands big-endian). */
static inline void st_wqe_masked_cs32(struct st_wqe *w, uint32_t swap, uint32_t compare,
				      uint32_t swap_mask, uint32_t compare_mask)
{
	uint32_t *s = st_wqe_seg(w, 16);
	s[0] = htobe32(swap);
	s[1] = htobe32(compare);
	s[2] = htobe32(swap_mask);
	s[3] = htobe32(compare_mask);
}

static inline void st_wqe_masked_cs64(struct st_wqe *w, uint64_t swap, uint64_t compare,
				      uint64_t swap_mask, uint64_t compare_mask)
{
	uint64_t *s = st_wqe_seg(w, 32);
	s[0] = htobe64(swap);
	s[1] = htobe64(compare);
	s[2] = htobe64(swap_mask);
	s[3] = htobe64(compare_mask);
}

static inline void st_wqe_masked_fa32(struct st_wqe *w, uint32_t add, uint32_t boundary)
{
	uint32_t *s = st_wqe_seg(w, 16);
	s[0] = htobe32(add);
	s[1] = htobe32(boundary);
	s[2] = 0;
	s[3] = 0;
}

static inline void st_wqe_masked_fa64(struct st_wqe *w, uint64_t add, uint64_t boundary)
{
	uint64_t *s = st_wqe_seg(w, 16);
	s[0] = htobe64(add);
	s[1] = htobe64(boundary);
}

/* Fills the ctrl segment for posting at index pi; bytes 8-11 written explicitly. */
static inline void st_wqe_ctrl(struct st_wqe *w, uint16_t pi, uint8_t opcode, uint8_t opmod,
			       uint32_t qpn, uint8_t fm_ce_se, uint32_t imm)
{
	struct mlx5_wqe_ctrl_seg *c = (struct mlx5_wqe_ctrl_seg *)w->b;
	mlx5dv_set_ctrl_seg(c, pi, opcode, opmod, qpn, fm_ce_se, (uint8_t)(w->len / 16), 0, imm);
	c->dci_stream_channel_id = 0;
}

static inline uint8_t *st_sq_slot(struct st_qp *q, uint32_t idx)
{
	return (uint8_t *)q->dv.sq.buf + ((size_t)(idx & (q->dv.sq.wqe_cnt - 1)) << MLX5_SEND_WQE_SHIFT);
}

/*
 * Copies len bytes of WQE starting at WQEBB index idx into the SQ,
 * continuing at sq.buf when the end of the ring (qend) is reached.
 */
static inline void st_sq_copy(struct st_qp *q, uint32_t idx, const void *src, unsigned len)
{
	uint8_t *qstart = q->dv.sq.buf;
	uint8_t *qend = qstart + ((size_t)q->dv.sq.wqe_cnt << MLX5_SEND_WQE_SHIFT);
	uint8_t *dst = st_sq_slot(q, idx);
	size_t first = (size_t)(qend - dst);

	if (first >= len) {
		memcpy(dst, src, len);
	} else {
		memcpy(dst, src, first);
		memcpy(qstart, (const uint8_t *)src + first, len - first);
	}
}

/*
 * Writes a finished staged WQE at the producer index (ctrl filled here with
 * the index, opcode and this QP's number) and advances pi. Returns the
 * 16-bit WQE index used.
 */
static inline uint16_t st_wqe_write(struct st_qp *q, struct st_wqe *w, uint8_t opcode,
				    uint8_t opmod, uint8_t fm_ce_se, uint32_t imm)
{
	uint16_t idx = (uint16_t)q->pi;

	st_wqe_ctrl(w, idx, opcode, opmod, q->qpn, fm_ce_se, imm);
	st_sq_copy(q, q->pi, w->b, w->len);
	q->last_ctrl_idx = q->pi;
	q->last_ds = (uint8_t)(w->len / 16);
	q->pi += (w->len + 63) / 64;
	q->nreq++;
	return idx;
}

/* Writes a WQE without touching its ctrl (for fault tests that hand-craft it). */
static inline void st_wqe_write_raw(struct st_qp *q, const struct st_wqe *w, unsigned nbb)
{
	st_sq_copy(q, q->pi, w->b, w->len);
	q->last_ctrl_idx = q->pi;
	q->last_ds = (uint8_t)(w->len / 16);
	q->pi += nbb;
	q->nreq++;
}

enum st_ring_mode {
	ST_RING_DB = 0,     /* 8-byte doorbell with the first 8 bytes of the last ctrl */
	ST_RING_BF = 1,     /* BlueFlame copy when exactly one WQE was written and it fits
			     * (libmlx5's rule: 1 < ds <= bf.size / 16), else doorbell */
};

static inline void st_sq_dbrec(struct st_qp *q, uint32_t val)
{
	st_to_device_barrier();
	__atomic_store_n(&q->dv.dbrec[MLX5_SND_DBR], htobe32(val & 0xffff), __ATOMIC_RELAXED);
}

static inline volatile uint64_t *st_bf_ptr(struct st_qp *q)
{
	return (volatile uint64_t *)((uint8_t *)q->dv.bf.reg + q->bf_off);
}

static inline void st_bf_toggle(struct st_qp *q)
{
	if (q->dv.bf.size)
		q->bf_off ^= q->dv.bf.size;
}

/* 8-byte doorbell with value v (as it sits in memory). */
static inline void st_db_write(struct st_qp *q, uint64_t v)
{
	st_wc_flush();
	*st_bf_ptr(q) = v;
	st_wc_flush();
	st_bf_toggle(q);
}

/* BlueFlame copy of the WQE at index idx, nbytes rounded up to 64, 8-byte stores ascending. */
static inline void st_bf_copy(struct st_qp *q, uint32_t idx, unsigned nbytes)
{
	volatile uint64_t *dst = st_bf_ptr(q);
	unsigned n = (nbytes + 63) & ~63u;
	unsigned i;

	st_wc_flush();
	for (i = 0; i < n; i += 64) {
		const uint64_t *src = (const uint64_t *)st_sq_slot(q, idx + i / 64);
		unsigned k;
		for (k = 0; k < 8; k++)
			dst[i / 8 + k] = src[k];
	}
	st_wc_flush();
	st_bf_toggle(q);
}

/* Doorbell record = pi, then the MMIO write for the last WQE written. */
static inline void st_ring(struct st_qp *q, enum st_ring_mode mode)
{
	uint64_t v;
	unsigned bytes = (unsigned)q->last_ds * 16;

	st_sq_dbrec(q, q->pi);
	if (mode == ST_RING_BF && q->nreq == 1 && q->dv.bf.size && q->last_ds > 1 &&
	    bytes <= q->dv.bf.size) {
		st_bf_copy(q, q->last_ctrl_idx, bytes);
	} else {
		memcpy(&v, st_sq_slot(q, q->last_ctrl_idx), 8);
		st_db_write(q, v);
	}
	q->nreq = 0;
}

/* Convenience: write + ring. */
static inline uint16_t st_post(struct st_qp *q, struct st_wqe *w, uint8_t opcode, uint8_t opmod,
			       uint8_t fm_ce_se, uint32_t imm, enum st_ring_mode mode)
{
	uint16_t idx = st_wqe_write(q, w, opcode, opmod, fm_ce_se, imm);
	st_ring(q, mode);
	return idx;
}

/* Signaled NOP. */
static inline uint16_t st_post_nop(struct st_qp *q, uint8_t fm_ce_se, enum st_ring_mode mode)
{
	struct st_wqe w;
	st_wqe_begin(&w);
	return st_post(q, &w, MLX5_OPCODE_NOP, 0, fm_ce_se, 0, mode);
}

/* ------------------------------------------------------------------ */
/* Receive queue / SRQ, posted directly                                */
/* ------------------------------------------------------------------ */

struct st_sge {
	const void *addr;
	uint32_t len;
	uint32_t lkey;
};

static inline void st_post_recv(struct st_qp *q, const struct st_sge *sg, unsigned n)
{
	struct mlx5_wqe_data_seg *s = (struct mlx5_wqe_data_seg *)
		((uint8_t *)q->dv.rq.buf + (size_t)(q->rq_head & (q->dv.rq.wqe_cnt - 1)) * q->dv.rq.stride);
	unsigned max = q->dv.rq.stride / 16, i;

	for (i = 0; i < n; i++)
		mlx5dv_set_data_seg(&s[i], sg[i].len, sg[i].lkey, (uintptr_t)sg[i].addr);
	if (i < max)
		mlx5dv_set_data_seg(&s[i], 0, MLX5_INVALID_LKEY, 0);
	q->rq_head++;
	st_to_device_barrier();
	__atomic_store_n(&q->dv.dbrec[MLX5_RCV_DBR], htobe32(q->rq_head & 0xffff), __ATOMIC_RELAXED);
}

static inline void st_post_recv1(struct st_qp *q, const void *addr, uint32_t len, uint32_t lkey)
{
	struct st_sge s = { addr, len, lkey };
	st_post_recv(q, &s, 1);
}

struct st_srq {
	struct ibv_srq *srq;
	struct mlx5dv_srq dv;
	uint32_t head, tail;    /* free list ends (WQE indices) */
	uint16_t counter;       /* posted WQEs, written to the record */
	unsigned nwqe;          /* WQEs in the buffer */
};

static inline struct mlx5_wqe_srq_next_seg *st_srq_wqe(struct st_srq *s, uint32_t idx)
{
	return (struct mlx5_wqe_srq_next_seg *)((uint8_t *)s->dv.buf + (size_t)idx * s->dv.stride);
}

static inline void st_srq_create(struct st_dev *d, struct st_srq *s, uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_init_attr ia;
	struct mlx5dv_obj obj;

	memset(s, 0, sizeof(*s));
	memset(&ia, 0, sizeof(ia));
	ia.attr.max_wr = max_wr;
	ia.attr.max_sge = max_sge;
	s->srq = ibv_create_srq(d->pd, &ia);
	REQUIRE(s->srq != NULL);
	memset(&obj, 0, sizeof(obj));
	obj.srq.in = s->srq;
	obj.srq.out = &s->dv;
	s->dv.comp_mask = MLX5DV_SRQ_MASK_SRQN;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ) == 0);
	s->head = s->dv.head;
	s->tail = s->dv.tail;
	s->nwqe = s->tail + 1;
}

/* Posts one receive; returns the SRQ WQE index used. */
static inline uint32_t st_srq_post(struct st_srq *s, const struct st_sge *sg, unsigned n)
{
	uint32_t idx = s->head;
	struct mlx5_wqe_srq_next_seg *nx = st_srq_wqe(s, idx);
	struct mlx5_wqe_data_seg *ds = (struct mlx5_wqe_data_seg *)(nx + 1);
	unsigned max = (s->dv.stride - 16) / 16, i;

	s->head = be16toh(nx->next_wqe_index);
	for (i = 0; i < n; i++)
		mlx5dv_set_data_seg(&ds[i], sg[i].len, sg[i].lkey, (uintptr_t)sg[i].addr);
	if (i < max)
		mlx5dv_set_data_seg(&ds[i], 0, MLX5_INVALID_LKEY, 0);
	s->counter++;
	st_to_device_barrier();
	__atomic_store_n(s->dv.dbrec, htobe32(s->counter), __ATOMIC_RELAXED);
	return idx;
}

/* Returns a consumed SRQ WQE (CQE wqe_counter) to the free list tail. */
static inline void st_srq_free(struct st_srq *s, uint32_t idx)
{
	st_srq_wqe(s, s->tail)->next_wqe_index = htobe16((uint16_t)idx);
	s->tail = idx;
}

/* ------------------------------------------------------------------ */
/* Loopback pair in one process                                        */
/* ------------------------------------------------------------------ */

struct st_pair {
	struct st_dev d;
	struct st_cq acq, arcq, bcq, brcq;
	struct st_qp a, b;
};

static inline void st_pair_open_ex(struct st_pair *p, const struct st_qp_attr *attr, int cqe,
				   uint8_t rnr_retry)
{
	memset(p, 0, sizeof(*p));
	st_dev_open(&p->d, 0);
	st_cq_create(&p->d, &p->acq, cqe);
	st_cq_create(&p->d, &p->arcq, cqe);
	st_cq_create(&p->d, &p->bcq, cqe);
	st_cq_create(&p->d, &p->brcq, cqe);
	st_qp_create(&p->d, &p->a, &p->acq, &p->arcq, attr);
	st_qp_create(&p->d, &p->b, &p->bcq, &p->brcq, attr);
	st_qp_connect_pair(&p->d, &p->a, &p->b, rnr_retry);
}

static inline void st_pair_open(struct st_pair *p)
{
	struct st_qp_attr a = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4,
				.max_recv_sge = 4, .max_inline = 128 };
	st_pair_open_ex(p, &a, 256, 7);
}

static inline void st_pair_close(struct st_pair *p)
{
	st_qp_destroy(&p->a);
	st_qp_destroy(&p->b);
	st_cq_destroy(&p->acq);
	st_cq_destroy(&p->arcq);
	st_cq_destroy(&p->bcq);
	st_cq_destroy(&p->brcq);
	st_dev_close(&p->d);
}

/* ------------------------------------------------------------------ */
/* stderr capture (fault lines)                                        */
/* ------------------------------------------------------------------ */

static int st_cap_fd = -1;

/* Redirects fd 2 to an anonymous file; failure lines keep going to the old stderr. */
static inline void st_capture_begin(void)
{
	if (st_cap_fd >= 0)
		return;
	st_report_fd = dup(2);
	st_cap_fd = memfd_create("stderr-capture", 0);
	if (st_cap_fd < 0 || st_report_fd < 0) {
		st_report_fd = 2;
		st_fail_at(__FILE__, __LINE__, "cannot capture stderr: %s", strerror(errno));
		st_exit();
	}
	fflush(stderr);
	dup2(st_cap_fd, 2);
}

/* The captured text so far (static buffer). */
static inline const char *st_capture_text(void)
{
	static char buf[65536];
	ssize_t n = pread(st_cap_fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* Number of captured lines that start with "rvxsim: ". */
static inline int st_capture_count(void)
{
	const char *t = st_capture_text(), *p = t;
	int n = 0;

	while (*p) {
		if (!strncmp(p, "rvxsim: ", 8))
			n++;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	return n;
}

/* Waits up to ms for more than `before` "rvxsim: " lines. */
static inline int st_capture_wait(int before, unsigned ms)
{
	uint64_t end = st_now_ns() + (uint64_t)ms * 1000000ull;
	do {
		if (st_capture_count() > before)
			return 1;
		st_sleep_ms(2);
	} while (st_now_ns() < end);
	return st_capture_count() > before;
}

/* Prints the captured text to the report stream, each line prefixed. */
static inline void st_capture_dump(const char *why)
{
	const char *t = st_capture_text();
	const char *p = t;
	char line[600];

	st_note("captured stderr (%s):%s", why, *t ? "" : " <empty>");
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n > sizeof(line) - 1)
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = 0;
		st_note("  | %s", line);
		if (!e)
			break;
		p = e + 1;
	}
}

/* ------------------------------------------------------------------ */
/* Processes                                                           */
/* ------------------------------------------------------------------ */

/* Waits for pid up to timeout_ms; kills it on timeout. Returns exit code, 128+sig, or -1. */
static inline int st_wait_pid(pid_t pid, unsigned timeout_ms)
{
	uint64_t end = st_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -2;
		if (st_now_ns() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		st_sleep_ms(5);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -2;
}

/* Runs fn in a child process with its own watchdog; returns its exit code. */
static inline int st_run_child(int (*fn)(void *), void *arg, unsigned timeout_s)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		st_fail_at(__FILE__, __LINE__, "fork: %s", strerror(errno));
		return -2;
	}
	if (pid == 0) {
		st_failures = 0;
		alarm(timeout_s);
		_exit(fn(arg));
	}
	return st_wait_pid(pid, timeout_s * 1000 + 2000);
}

/*
 * Forks a peer process joined to this one by a socket pair. Returns the pid in
 * the parent and 0 in the child (which gets its own watchdog of alarm_s), each
 * with its end of the pair in *sock.
 */
static inline pid_t st_fork_peer(int *sock, unsigned alarm_s)
{
	int sv[2];
	pid_t pid;

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		*sock = sv[1];
		alarm(alarm_s);
		return 0;
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/*
 * Runs this program again, as argv0 with the argument "sub" (which the tests take
 * as "do not run again"), with the "NAME=value" strings that follow (up to NULL)
 * put in its environment. Returns its exit code (as st_wait_pid with timeout_ms).
 */
__attribute__((sentinel))
static inline int st_rerun(const char *argv0, unsigned timeout_ms, ...)
{
	char *args[] = { (char *)argv0, (char *)"sub", NULL };
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		va_list ap;
		char *kv;

		va_start(ap, timeout_ms);
		while ((kv = va_arg(ap, char *)) != NULL)
			putenv(kv);
		va_end(ap);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	return st_wait_pid(pid, timeout_ms);
}

/* Exact-size socket I/O with a deadline. */
static inline int st_sock_io(int fd, void *p, size_t n, int wr, unsigned timeout_ms)
{
	uint64_t end = st_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	size_t done = 0;

	while (done < n) {
		ssize_t r = wr ? send(fd, (char *)p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL)
			       : recv(fd, (char *)p + done, n - done, MSG_DONTWAIT);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r == 0)
			return -1;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (st_now_ns() > end)
			return -1;
		st_sleep_ms(1);
	}
	return 0;
}

static inline int st_send_all(int fd, const void *p, size_t n)
{
	return st_sock_io(fd, (void *)p, n, 1, 10000);
}

static inline int st_recv_all(int fd, void *p, size_t n)
{
	return st_sock_io(fd, p, n, 0, 10000);
}

/*
 * Tells the peer behind sock this QP's address (and m's buffer and rkey, if m is
 * given), reads the peer's into *peer and connects q to it. Returns 0, or -1 when
 * the exchange failed (q is then left unconnected).
 */
static inline int st_exchange_connect(struct st_dev *d, struct st_qp *q, const struct st_mr *m,
				      int sock, struct st_addr *peer)
{
	struct st_addr me;

	st_addr_of(d, q, &me);
	if (m) {
		me.addr = (uintptr_t)m->buf;
		me.rkey = m->mr->rkey;
	}
	if (st_send_all(sock, &me, sizeof(me)) || st_recv_all(sock, peer, sizeof(*peer)))
		return -1;
	st_qp_connect(d, q, peer);
	return 0;
}

/* Expects one async event of type t naming qp on ctx within ms milliseconds, and acks it. */
static inline void st_expect_qp_event(struct ibv_context *ctx, enum ibv_event_type t,
				      struct ibv_qp *qp, int ms)
{
	struct pollfd pf = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	if (!CHECKF(poll(&pf, 1, ms) == 1 && (pf.revents & POLLIN), "no async event within %d ms", ms))
		return;
	if (!CHECK(ibv_get_async_event(ctx, &ev) == 0))
		return;
	CHECKF(ev.event_type == t, "event %s, expected %s", ibv_event_type_str(ev.event_type),
	       ibv_event_type_str(t));
	CHECK(ev.element.qp == qp);
	ibv_ack_async_event(&ev);
}

#endif /* SIMTEST_H */
