/*
 * t_uc: Unreliable Connected QPs on a loopback pair, through the plain verbs path. Creation by
 * ibv_create_qp, ibv_create_qp_ex and mlx5dv_create_qp with libmlx5's UC sizing; the kernel's UC
 * modify-QP masks (every attribute RC has and UC lacks refused with EINVAL and one "rvxsim: "
 * line, the state unchanged); ibv_query_qp; SEND, SEND with immediate, RDMA WRITE and WRITE with
 * immediate delivered with the right completions on both sides, a multi-packet SEND, a WRITE
 * through ibv_wr_*; READ and atomics refused (send_ops_flags EOPNOTSUPP at creation, a posted
 * one completes with a local QP operation error, nothing touched); and the responder's silent
 * drops (IBA classes D/E): a SEND with no receive posted, a SEND longer than the receive, a
 * WRITE with a stale or out-of-bounds key, a WRITE with immediate and a bad key: the requester
 * completes each successfully, nothing is written or completed at the responder, whose QP stays
 * in RTS, and the next message is delivered (into the receive the dropped one did not take).
 * On an SRQ (class E, as rxe_resp.c) a SEND too long and a WRITE with immediate refused for its
 * key complete the receive they take in error, a WRITE without immediate takes none; a receive
 * with a bad lkey (class A) completes in error and moves the responder to ERR, the requester
 * still succeeding. The model's trace shows SEND and WRITE packets and never an ACK or a NAK.
 */
#include "simtest.h"

#define SEND_OFF   0            /* M: what the requester sends from */
#define RECV_OFF   65536        /* M: receive buffers */
#define TGT_OFF    131072       /* M: the WRITE target */
#define M_LEN      196608
#define SQ_PSN     100
#define RQ_PSN     7            /* not qa's sq_psn: a UC responder starts on any FIRST packet */

#define UC_RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define UC_RTS_MASK (IBV_QP_STATE | IBV_QP_SQ_PSN)

static struct st_dev D;
static struct st_mr M;
static struct ibv_cq *ca, *cb;
static struct ibv_qp *qa, *qb;      /* qa sends to qb */
static struct ibv_qp *tx, *rx;      /* the pair post() and expect_recv() use: qa, qb */
static struct ibv_qp *qd, *qs;      /* qd sends to qs, which receives through srq */
static struct ibv_srq *srq;
static struct ibv_qp_ex *qax;       /* qa's ibv_wr_* view */
static char trace_path[64];

static int state_of(struct ibv_qp *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	REQUIRE(ibv_query_qp(q, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

/* ibv_modify_qp refuses: EINVAL, one "rvxsim: " line, the state unchanged. */
static void refused(struct ibv_qp *q, struct ibv_qp_attr *a, int mask, const char *what)
{
	int lines = st_capture_count(), st = state_of(q);

	CHECKF(ibv_modify_qp(q, a, mask) == EINVAL, "%s: not refused", what);
	CHECKF(st_capture_count() == lines + 1, "%s: %d rvxsim lines, want 1", what,
	       st_capture_count() - lines);
	CHECKF(state_of(q) == st, "%s: the state changed", what);
}

static void rtr_attr(struct ibv_qp_attr *a, uint32_t dqpn, uint32_t rq_psn)
{
	struct st_addr r;

	memset(&r, 0, sizeof(r));
	r.qpn = dqpn;
	r.lid = D.port.lid;
	memcpy(r.gid, D.gid.raw, 16);
	st_rtr_attr(&D, &r, a);
	a->rq_psn = rq_psn;
	a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
}

/* RESET -> RTS with UC's masks, each transition after the refusals of what UC lacks when
 * checks is set (the RC attributes one by one, a required one left out). */
static void uc_connect(struct ibv_qp *q, uint32_t dqpn, uint32_t rq_psn, uint32_t sq_psn, int checks)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	a.qkey = 0x11111111;
	if (checks) {
		refused(q, &a, ST_INIT_MASK | IBV_QP_QKEY, "RESET->INIT with a Q_Key");
		refused(q, &a, ST_INIT_MASK & ~IBV_QP_ACCESS_FLAGS, "RESET->INIT without access flags");
	}
	REQUIRE(ibv_modify_qp(q, &a, ST_INIT_MASK) == 0);

	rtr_attr(&a, dqpn, rq_psn);
	if (checks) {
		refused(q, &a, ST_RTR_MASK, "INIT->RTR with RC's mask");
		refused(q, &a, UC_RTR_MASK | IBV_QP_MAX_DEST_RD_ATOMIC, "INIT->RTR max_dest_rd_atomic");
		refused(q, &a, UC_RTR_MASK | IBV_QP_MIN_RNR_TIMER, "INIT->RTR min_rnr_timer");
		refused(q, &a, UC_RTR_MASK & ~IBV_QP_RQ_PSN, "INIT->RTR without rq_psn");
		refused(q, &a, UC_RTR_MASK | IBV_QP_SQ_PSN, "INIT->RTR sq_psn");
	}
	/* access flags are optional here */
	REQUIRE(ibv_modify_qp(q, &a, UC_RTR_MASK | (checks ? IBV_QP_ACCESS_FLAGS : 0)) == 0);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	a.min_rnr_timer = 1;
	if (checks) {
		refused(q, &a, ST_RTS_MASK, "RTR->RTS with RC's mask");
		refused(q, &a, UC_RTS_MASK | IBV_QP_TIMEOUT, "RTR->RTS timeout");
		refused(q, &a, UC_RTS_MASK | IBV_QP_RETRY_CNT, "RTR->RTS retry_cnt");
		refused(q, &a, UC_RTS_MASK | IBV_QP_RNR_RETRY, "RTR->RTS rnr_retry");
		refused(q, &a, UC_RTS_MASK | IBV_QP_MAX_QP_RD_ATOMIC, "RTR->RTS max_rd_atomic");
		refused(q, &a, UC_RTS_MASK | IBV_QP_MIN_RNR_TIMER, "RTR->RTS min_rnr_timer");
		refused(q, &a, IBV_QP_STATE, "RTR->RTS without sq_psn");
	}
	REQUIRE(ibv_modify_qp(q, &a, UC_RTS_MASK) == 0);
	if (checks) {
		refused(q, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER, "RTS->RTS min_rnr_timer");
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
	}
}

static void reconnect_qa(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	REQUIRE(ibv_modify_qp(qa, &a, IBV_QP_STATE) == 0);
	uc_connect(qa, qb->qp_num, SQ_PSN, SQ_PSN, 0);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t t0 = st_now_ns();
	int n;

	memset(wc, 0, sizeof(*wc));
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && st_now_ns() - t0 < 10000000000ull)
		;
	return n;
}

static void post_recv(uint32_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)M.buf + RECV_OFF + off, len, M.mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;

	REQUIRE(ibv_post_recv(qb, &w, &bad) == 0);
}

/* Posts one signaled WR from the send area (len bytes of msg, repeated) and returns the
 * requester's completion status; wc_opcode must match want_op. */
static int post(enum ibv_wr_opcode op, const char *msg, uint32_t len, uint64_t raddr, uint32_t rkey,
		uint32_t imm, enum ibv_wc_opcode want_op)
{
	struct ibv_sge s = { (uintptr_t)M.buf + SEND_OFF, len, M.mr->lkey };
	struct ibv_send_wr w = { .wr_id = 0x55, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	for (uint32_t i = 0; i < len; i++)
		((char *)M.buf)[SEND_OFF + i] = msg[i % strlen(msg)];
	w.imm_data = htobe32(imm);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		w.wr.atomic.remote_addr = raddr;
		w.wr.atomic.rkey = rkey;
		w.wr.atomic.compare_add = 1;
	} else {
		w.wr.rdma.remote_addr = raddr;
		w.wr.rdma.rkey = rkey;
	}
	REQUIRE(ibv_post_send(tx, &w, &bad) == 0);
	REQUIRE(poll_one(ca, &wc) == 1);
	CHECK_EQ(wc.wr_id, 0x55u);
	if (wc.status == IBV_WC_SUCCESS)
		CHECKF(wc.opcode == want_op, "requester opcode %d, want %d", wc.opcode, want_op);
	return wc.status;
}

/* The next receive completion: success, its wr_id, length and data at the receive offset. */
static void expect_recv(uint64_t id, uint32_t off, const char *msg, uint32_t len,
			enum ibv_wc_opcode op, int imm, uint32_t imm_val)
{
	struct ibv_wc wc;

	REQUIRE(poll_one(cb, &wc) == 1);
	CHECKF(wc.status == IBV_WC_SUCCESS, "receive status %s", ibv_wc_status_str(wc.status));
	CHECK_EQ(wc.wr_id, id);
	CHECK_EQ(wc.opcode, op);
	CHECK_EQ(wc.byte_len, len);
	CHECK_EQ(wc.qp_num, rx->qp_num);
	CHECK_EQ(wc.src_qp, tx->qp_num);
	CHECK_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
	if (imm)
		CHECK_EQ(be32toh(wc.imm_data), imm_val);
	if (msg)
		for (uint32_t i = 0; i < len; i++)
			if (((char *)M.buf)[RECV_OFF + off + i] != msg[i % strlen(msg)]) {
				CHECKF(0, "received byte %u differs", i);
				break;
			}
}

/* The next receive completion is an error of this status for receive id. */
static void expect_recv_err(uint64_t id, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	REQUIRE(poll_one(cb, &wc) == 1);
	CHECKF(wc.status == st, "receive status %s, want %s", ibv_wc_status_str(wc.status),
	       ibv_wc_status_str(st));
	CHECK_EQ(wc.wr_id, id);
	CHECK_EQ(wc.qp_num, rx->qp_num);
}

static void expect_no_recv(const char *after)
{
	struct ibv_wc wc;

	CHECKF(ibv_poll_cq(cb, 1, &wc) == 0, "a receive completion (status %d, wr_id %llu) %s",
	       wc.status, (unsigned long long)wc.wr_id, after);
}

static void create(void)
{
	struct ibv_qp_init_attr_ex ie;
	struct mlx5dv_qp_init_attr dv;
	struct ibv_qp *q;

	ca = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	cb = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	REQUIRE(ca && cb);
	memset(&ie, 0, sizeof(ie));
	ie.qp_type = IBV_QPT_UC;
	ie.send_cq = ie.recv_cq = ca;
	ie.cap = (struct ibv_qp_cap){ .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				      .max_recv_sge = 1 };
	ie.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ie.pd = D.pd;
	/* libmlx5 gives UC no READ or atomic builder: refused at creation */
	ie.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
	errno = 0;
	CHECK(ibv_create_qp_ex(D.ctx, &ie) == NULL && errno == EOPNOTSUPP);
	ie.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	errno = 0;
	CHECK(ibv_create_qp_ex(D.ctx, &ie) == NULL && errno == EOPNOTSUPP);
	ie.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	qa = ibv_create_qp_ex(D.ctx, &ie);
	REQUIRE(qa != NULL);
	CHECK(qa->qp_type == IBV_QPT_UC && qa->state == IBV_QPS_RESET);
	/* libmlx5's UC send overhead is RC's (a UMR WQE): 256-byte WQEs, 60 bytes inline */
	CHECK_EQ(ie.cap.max_inline_data, 60u);
	qax = ibv_qp_to_qp_ex(qa);
	REQUIRE(qax != NULL);

	struct ibv_qp_init_attr ia = { .send_cq = cb, .recv_cq = cb, .qp_type = IBV_QPT_UC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 16,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	qb = ibv_create_qp(D.pd, &ia);
	REQUIRE(qb != NULL);
	CHECK(qb->qp_type == IBV_QPT_UC);

	memset(&ie, 0, sizeof(ie));
	memset(&dv, 0, sizeof(dv));
	ie.qp_type = IBV_QPT_UC;
	ie.send_cq = ie.recv_cq = cb;
	ie.cap = ia.cap;
	ie.comp_mask = IBV_QP_INIT_ATTR_PD;
	ie.pd = D.pd;
	q = mlx5dv_create_qp(D.ctx, &ie, &dv);
	CHECK(q != NULL && q->qp_type == IBV_QPT_UC);
	if (q)
		CHECK_EQ(ibv_destroy_qp(q), 0);
}

static void query(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0xee, sizeof(a));
	REQUIRE(ibv_query_qp(qa, &a, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_SQ_PSN |
			     IBV_QP_RQ_PSN | IBV_QP_PATH_MTU | IBV_QP_ACCESS_FLAGS | IBV_QP_CAP |
			     IBV_QP_AV, &ia) == 0);
	CHECK_EQ(a.qp_state, IBV_QPS_RTS);
	CHECK_EQ(a.dest_qp_num, qb->qp_num);
	CHECK_EQ(a.sq_psn, (uint32_t)SQ_PSN);
	CHECK_EQ(a.rq_psn, (uint32_t)SQ_PSN);
	CHECK_EQ(a.path_mtu, IBV_MTU_1024);
	CHECK_EQ(a.qp_access_flags, (unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
	CHECK_EQ(a.ah_attr.dlid, D.port.lid);
	CHECK_EQ(a.cap.max_inline_data, 60u);
	CHECK(ia.qp_type == IBV_QPT_UC);
	REQUIRE(ibv_query_qp(qb, &a, IBV_QP_RQ_PSN, &ia) == 0);
	CHECK_EQ(a.rq_psn, (uint32_t)RQ_PSN);
}

static void delivered(void)
{
	uint8_t *tgt = (uint8_t *)M.buf + TGT_OFF;

	st_ctx = "SEND";
	post_recv(0, 256, 1);
	CHECK_EQ(post(IBV_WR_SEND, "hello, uc", 9, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(1, 0, "hello, uc", 9, IBV_WC_RECV, 0, 0);

	st_ctx = "SEND with immediate";
	post_recv(256, 256, 2);
	CHECK_EQ(post(IBV_WR_SEND_WITH_IMM, "imm", 3, 0, 0, 0xabcd, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(2, 256, "imm", 3, IBV_WC_RECV, 1, 0xabcd);

	st_ctx = "multi-packet SEND";
	post_recv(1024, 20000, 3);
	CHECK_EQ(post(IBV_WR_SEND, "0123456789abcdefg", 20000, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(3, 1024, "0123456789abcdefg", 20000, IBV_WC_RECV, 0, 0);

	st_ctx = "RDMA WRITE";
	CHECK_EQ(post(IBV_WR_RDMA_WRITE, "written", 7, (uintptr_t)tgt, M.mr->rkey, 0,
		      IBV_WC_RDMA_WRITE), IBV_WC_SUCCESS);
	CHECK(!memcmp(tgt, "written", 7));
	expect_no_recv("after a WRITE");

	st_ctx = "RDMA WRITE with immediate";
	post_recv(0, 16, 4);
	CHECK_EQ(post(IBV_WR_RDMA_WRITE_WITH_IMM, "imm-write", 9, (uintptr_t)tgt + 64, M.mr->rkey,
		      0x1234, IBV_WC_RDMA_WRITE), IBV_WC_SUCCESS);
	expect_recv(4, 0, NULL, 9, IBV_WC_RECV_RDMA_WITH_IMM, 1, 0x1234);
	CHECK(!memcmp(tgt + 64, "imm-write", 9));

	st_ctx = "ibv_wr_rdma_write";
	memcpy((char *)M.buf + SEND_OFF, "through wr", 10);
	ibv_wr_start(qax);
	qax->wr_id = 0x66;
	qax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qax, M.mr->rkey, (uintptr_t)tgt + 128);
	ibv_wr_set_sge(qax, M.mr->lkey, (uintptr_t)M.buf + SEND_OFF, 10);
	CHECK_EQ(ibv_wr_complete(qax), 0);
	struct ibv_wc wc;
	REQUIRE(poll_one(ca, &wc) == 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 0x66);
	CHECK(!memcmp(tgt + 128, "through wr", 10));
}

/* A READ or an atomic posted on UC: libmlx5 posts it, the adapter completes it with a local QP
 * operation error and one line; the QP goes to ERR, the target is not touched. */
static void not_uc(enum ibv_wr_opcode op, const char *name)
{
	uint8_t *tgt = (uint8_t *)M.buf + TGT_OFF + 512;
	int lines = st_capture_count();

	st_ctx = name;
	memset(tgt, 0x5a, 8);
	CHECK_EQ(post(op, "x", 8, (uintptr_t)tgt, M.mr->rkey, 0, IBV_WC_SEND), IBV_WC_LOC_QP_OP_ERR);
	CHECK_EQ(st_capture_count(), lines + 1);
	CHECK(strstr(st_capture_text(), "not a UC operation") != NULL);
	CHECK_EQ(state_of(qa), IBV_QPS_ERR);
	CHECK_EQ(tgt[0], 0x5a);
	CHECK_EQ(tgt[7], 0x5a);
	CHECK_EQ(state_of(qb), IBV_QPS_RTS);
	reconnect_qa();
	post_recv(0, 64, 40);
	CHECK_EQ(post(IBV_WR_SEND, "again", 5, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(40, 0, "again", 5, IBV_WC_RECV, 0, 0);
}

/* A stale rkey: the key of a region registered and deregistered. */
static uint32_t stale_rkey(void)
{
	void *b = aligned_alloc(4096, 4096);
	struct ibv_mr *m;
	uint32_t k;

	REQUIRE(b != NULL);
	m = ibv_reg_mr(D.pd, b, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(m != NULL);
	k = m->rkey;
	REQUIRE(ibv_dereg_mr(m) == 0);
	free(b);
	return k;
}

/* What the responder cannot deliver is dropped: the requester completes it successfully, the
 * responder writes and completes nothing and stays in RTS, the next message gets through. */
static void dropped(void)
{
	uint8_t *tgt = (uint8_t *)M.buf + TGT_OFF + 1024, pat[64];
	uint32_t stale = stale_rkey();

	memset(pat, 0xc3, sizeof(pat));
	memcpy(tgt, pat, sizeof(pat));

	st_ctx = "SEND with no receive posted";
	expect_no_recv("before the test");
	CHECK_EQ(post(IBV_WR_SEND, "lost", 4, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	post_recv(0, 64, 10);
	CHECK_EQ(post(IBV_WR_SEND, "second", 6, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(10, 0, "second", 6, IBV_WC_RECV, 0, 0);
	expect_no_recv("after the dropped SEND");
	CHECK_EQ(state_of(qb), IBV_QPS_RTS);

	st_ctx = "WRITE with a stale rkey";
	CHECK_EQ(post(IBV_WR_RDMA_WRITE, "bad", 16, (uintptr_t)tgt, stale, 0, IBV_WC_RDMA_WRITE),
		 IBV_WC_SUCCESS);
	st_ctx = "WRITE out of bounds";
	CHECK_EQ(post(IBV_WR_RDMA_WRITE, "bad", 16, (uintptr_t)M.buf + M_LEN - 8, M.mr->rkey, 0,
		      IBV_WC_RDMA_WRITE), IBV_WC_SUCCESS);
	st_ctx = "WRITE with immediate and a stale rkey";
	post_recv(64, 64, 20);
	CHECK_EQ(post(IBV_WR_RDMA_WRITE_WITH_IMM, "bad", 16, (uintptr_t)tgt, stale, 9,
		      IBV_WC_RDMA_WRITE), IBV_WC_SUCCESS);
	st_ctx = "after the bad WRITEs";
	CHECK_EQ(post(IBV_WR_SEND, "after", 5, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(20, 64, "after", 5, IBV_WC_RECV, 0, 0);   /* the receive the WRITE left */
	expect_no_recv("after the bad WRITEs");
	CHECK(!memcmp(tgt, pat, sizeof(pat)));
	CHECK(((uint8_t *)M.buf)[M_LEN - 8] == 0 && ((uint8_t *)M.buf)[M_LEN - 1] == 0);
	CHECK_EQ(state_of(qb), IBV_QPS_RTS);

	st_ctx = "SEND longer than the receive";
	post_recv(128, 4, 30);
	CHECK_EQ(post(IBV_WR_SEND, "too long", 16, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	CHECK_EQ(post(IBV_WR_SEND, "fit", 3, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(30, 128, "fit", 3, IBV_WC_RECV, 0, 0);
	expect_no_recv("after the SEND too long");
	CHECK_EQ(state_of(qb), IBV_QPS_RTS);
}

/* UC answers nothing: no ACK or NAK packet in the whole run, and the requests are there. */
static void check_trace(void)
{
	FILE *f = fopen(trace_path, "r");
	char line[512];
	int sends = 0, writes = 0, answers = 0;

	st_ctx = "trace";
	if (!CHECKF(f != NULL, "no trace file %s", trace_path))
		return;
	while (fgets(line, sizeof(line), f)) {
		sends += strstr(line, "pkt SEND ") != NULL;
		writes += strstr(line, "pkt WRITE ") != NULL;
		answers += strstr(line, "pkt ACK ") || strstr(line, "pkt NAK ");
	}
	fclose(f);
	CHECKF(sends >= 10 && writes >= 6, "%d SEND and %d WRITE packets traced", sends, writes);
	CHECKF(answers == 0, "%d ACK or NAK packets on UC", answers);
}

static void post_srq_recv(uint32_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)M.buf + RECV_OFF + off, len, M.mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;

	REQUIRE(ibv_post_srq_recv(srq, &w, &bad) == 0);
}

/* Class E on an SRQ: the receive a refused message takes completes in error, the QP stays. */
static void srq_drops(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_qp_init_attr ia = { .send_cq = cb, .recv_cq = cb, .qp_type = IBV_QPT_UC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	uint8_t *tgt = (uint8_t *)M.buf + TGT_OFF + 2048, pat[32];
	uint32_t stale = stale_rkey();

	st_ctx = "SRQ";
	srq = ibv_create_srq(D.pd, &sa);
	REQUIRE(srq != NULL);
	ia.srq = srq;
	qs = ibv_create_qp(D.pd, &ia);
	ia.srq = NULL;
	ia.send_cq = ia.recv_cq = ca;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_recv_sge = 1;
	qd = ibv_create_qp(D.pd, &ia);
	REQUIRE(qs && qd);
	uc_connect(qd, qs->qp_num, 0, 0, 0);
	uc_connect(qs, qd->qp_num, 0, 0, 0);
	tx = qd;
	rx = qs;
	memset(pat, 0x3c, sizeof(pat));
	memcpy(tgt, pat, sizeof(pat));

	st_ctx = "SRQ: SEND longer than the receive";
	post_srq_recv(0, 4, 50);
	CHECK_EQ(post(IBV_WR_SEND, "too long", 16, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv_err(50, IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(state_of(qs), IBV_QPS_RTS);

	st_ctx = "SRQ: WRITE with immediate and a stale rkey";
	post_srq_recv(64, 64, 51);
	CHECK_EQ(post(IBV_WR_RDMA_WRITE_WITH_IMM, "bad", 16, (uintptr_t)tgt, stale, 5,
		      IBV_WC_RDMA_WRITE), IBV_WC_SUCCESS);
	expect_recv_err(51, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(state_of(qs), IBV_QPS_RTS);

	st_ctx = "SRQ: WRITE with a stale rkey";
	post_srq_recv(128, 64, 52);
	CHECK_EQ(post(IBV_WR_RDMA_WRITE, "bad", 16, (uintptr_t)tgt, stale, 0, IBV_WC_RDMA_WRITE),
		 IBV_WC_SUCCESS);
	CHECK_EQ(post(IBV_WR_SEND, "srq", 3, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv(52, 128, "srq", 3, IBV_WC_RECV, 0, 0);
	expect_no_recv("after the SRQ drops");
	CHECK(!memcmp(tgt, pat, sizeof(pat)));
	CHECK_EQ(state_of(qs), IBV_QPS_RTS);
	tx = qa;
	rx = qb;
}

/* Class A: a receive WQE with a bad lkey completes with a local protection error and the
 * responder goes to ERR; the requester, told nothing, succeeds. */
static void bad_receive_key(void)
{
	struct ibv_sge sg = { (uintptr_t)M.buf + RECV_OFF, 64, stale_rkey() };
	struct ibv_recv_wr w = { .wr_id = 60, .sg_list = &sg, .num_sge = 1 }, *bad;

	st_ctx = "receive with a bad lkey";
	REQUIRE(ibv_post_recv(qb, &w, &bad) == 0);
	CHECK_EQ(post(IBV_WR_SEND, "to a bad key", 12, 0, 0, 0, IBV_WC_SEND), IBV_WC_SUCCESS);
	expect_recv_err(60, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(state_of(qb), IBV_QPS_ERR);
	CHECK_EQ(state_of(qa), IBV_QPS_RTS);
}

int main(void)
{
	st_init("t_uc", 60);
	snprintf(trace_path, sizeof(trace_path), "/tmp/t_uc.%d.trace", (int)getpid());
	setenv("RVXSIM_TRACE_FILE", trace_path, 1);
	st_dev_open(&D, 0);
	st_mr_alloc(&D, &M, M_LEN, ST_ACCESS_ALL);
	st_capture_begin();

	st_ctx = "create";
	create();
	tx = qa;
	rx = qb;
	st_ctx = "modify";
	uc_connect(qa, qb->qp_num, SQ_PSN, SQ_PSN, 1);
	uc_connect(qb, qa->qp_num, RQ_PSN, 0, 0);
	st_ctx = "query";
	query();
	delivered();
	not_uc(IBV_WR_RDMA_READ, "RDMA READ");
	not_uc(IBV_WR_ATOMIC_FETCH_AND_ADD, "fetch and add");
	not_uc(IBV_WR_ATOMIC_CMP_AND_SWP, "compare and swap");
	dropped();
	srq_drops();
	bad_receive_key();

	st_ctx = "teardown";
	CHECK_EQ(ibv_destroy_qp(qa), 0);
	CHECK_EQ(ibv_destroy_qp(qb), 0);
	CHECK_EQ(ibv_destroy_qp(qd), 0);
	CHECK_EQ(ibv_destroy_qp(qs), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_destroy_cq(ca), 0);
	CHECK_EQ(ibv_destroy_cq(cb), 0);
	st_mr_free(&M);
	st_dev_close(&D);
	check_trace();
	unlink(trace_path);
	if (st_failures)
		st_capture_dump("failures");
	st_exit();
	return 0;
}
