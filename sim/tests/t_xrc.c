/*
 * t_xrc: the eXtended Reliable Connected transport through rdma-core's verbs. Checked: XRC
 * domains opened and closed (fd -1 a domain of its own; a file shared by its opens; the kernel's
 * EAGAIN without O_CREAT, EINVAL with O_EXCL on a file that has one, EBADF for a descriptor
 * that is not open, EINVAL/EOPNOTSUPP for the init mask, EBUSY while an SRQ uses the handle);
 * XRC SRQs (ibv_create_srq_ex: EINVAL without a CQ; distinct numbers from ibv_get_srq_num);
 * target QPs (EINVAL through ibv_create_qp or without IBV_QP_INIT_ATTR_XRCD, EOPNOTSUPP with
 * send_ops_flags) and the kernel's XRC modify masks (a target needs MIN_RNR_TIMER at RTR and
 * takes no RETRY_CNT at RTS, an initiator takes no MAX_DEST_RD_ATOMIC); an initiator's SEND,
 * SEND with immediate, RDMA WRITE, READ, fetch-and-add and compare-and-swap to a target, the
 * SEND landing in the SRQ its WQE names (the completion on that SRQ's CQ, naming the target
 * QP), through ibv_post_send and through ibv_wr_* with ibv_wr_set_xrc_srqn; an SRQ of another
 * domain named: the initiator's IBV_WC_REM_INV_REQ_ERR, nothing delivered to that SRQ.
 */
#include "simtest.h"
#include <fcntl.h>

#define BUFSZ 8192

static struct st_dev D;
static uint8_t *lbuf, *rbuf;
static struct ibv_mr *LM, *RM;

static struct ibv_xrcd *open_xrcd(int fd, int oflags, uint32_t mask)
{
	struct ibv_xrcd_init_attr a = { .comp_mask = mask, .fd = fd, .oflags = oflags };
	errno = 0;
	return ibv_open_xrcd(D.ctx, &a);
}

static void domains(void)
{
	char path[] = "/tmp/t_xrc.XXXXXX";
	int fd = mkstemp(path), bad;
	struct ibv_xrcd *x, *y;
	uint32_t m = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;

	st_ctx = "domains";
	REQUIRE(fd >= 0);
	unlink(path);
	x = open_xrcd(-1, 0, m);
	REQUIRE(x != NULL);
	CHECK(ibv_close_xrcd(x) == 0);
	CHECK(open_xrcd(fd, 0, m) == NULL && errno == EAGAIN);          /* no domain, no O_CREAT */
	x = open_xrcd(fd, O_CREAT, m);
	REQUIRE(x != NULL);
	CHECK(open_xrcd(fd, O_CREAT | O_EXCL, m) == NULL && errno == EINVAL);
	y = open_xrcd(fd, 0, m);                                           /* the file's domain */
	CHECK(y != NULL);
	if (y)
		CHECK(ibv_close_xrcd(y) == 0);
	CHECK(ibv_close_xrcd(x) == 0);
	CHECK(open_xrcd(fd, 0, m) == NULL && errno == EAGAIN);          /* gone with its last open */
	bad = dup(fd);
	close(bad);
	CHECK(open_xrcd(bad, O_CREAT, m) == NULL && errno == EBADF);
	CHECK(open_xrcd(fd, O_CREAT, IBV_XRCD_INIT_ATTR_FD) == NULL && errno == EINVAL);
	CHECK(open_xrcd(fd, O_CREAT, m | IBV_XRCD_INIT_ATTR_RESERVED) == NULL && errno == EOPNOTSUPP);
	close(fd);
}

static struct ibv_srq *xsrq(struct ibv_xrcd *x, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 16;
	a.attr.max_sge = 1;
	a.srq_type = IBV_SRQT_XRC;
	a.pd = D.pd;
	a.xrcd = x;
	a.cq = cq;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
		      (cq ? IBV_SRQ_INIT_ATTR_CQ : 0);
	errno = 0;
	return ibv_create_srq_ex(D.ctx, &a);
}

static struct ibv_qp *tgt(struct ibv_xrcd *x, uint32_t mask, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.xrcd = x;
	a.pd = D.pd;
	a.comp_mask = mask | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
	a.send_ops_flags = ops;
	errno = 0;
	return ibv_create_qp_ex(D.ctx, &a);
}

static struct ibv_qp *ini(struct ibv_cq *cq, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.send_cq = cq;
	a.cap.max_send_wr = 16;
	a.cap.max_send_sge = 1;
	a.pd = D.pd;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
	a.send_ops_flags = ops;
	return ibv_create_qp_ex(D.ctx, &a);
}

#define INIT (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RTR_INI (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define RTR_TGT (RTR_INI | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_TGT (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN)
#define RTS_INI (RTS_TGT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)

/* q to RTS facing peer, with the XRC masks; the wrong ones refused on the way */
static void xconnect(struct ibv_qp *q, const struct ibv_qp *peer, bool target)
{
	struct st_addr r = { .qpn = peer->qp_num, .lid = D.port.lid };
	struct ibv_qp_attr at;

	memcpy(r.gid, D.gid.raw, 16);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = D.port_num;
	at.qp_access_flags = target ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC : 0;
	REQUIRE(ibv_modify_qp(q, &at, INIT) == 0);
	st_rtr_attr(&D, &r, &at);
	if (target) {
		CHECK(ibv_modify_qp(q, &at, RTR_INI) == EINVAL);   /* a target's needs its RNR timer */
		REQUIRE(ibv_modify_qp(q, &at, RTR_TGT) == 0);
	} else {
		CHECK(ibv_modify_qp(q, &at, RTR_TGT) == EINVAL);   /* an initiator has no responder */
		REQUIRE(ibv_modify_qp(q, &at, RTR_INI) == 0);
	}
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.max_rd_atomic = 16;
	if (target) {
		CHECK(ibv_modify_qp(q, &at, RTS_INI) == EINVAL);   /* a target sends no requests */
		REQUIRE(ibv_modify_qp(q, &at, RTS_TGT) == 0);
	} else {
		REQUIRE(ibv_modify_qp(q, &at, RTS_INI) == 0);
	}
}

static void post_srq_recv(struct ibv_srq *s, uint8_t *buf, uint64_t id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = 256, .lkey = RM->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 }, *bad;
	REQUIRE(ibv_post_srq_recv(s, &wr, &bad) == 0);
}

static int post(struct ibv_qp *q, enum ibv_wr_opcode op, uint32_t srqn, uint32_t len,
		uint64_t raddr, uint64_t id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)lbuf, .length = len, .lkey = LM->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.opcode = op;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(0x1234);
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = RM->rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 5 : 105;
		wr.wr.atomic.swap = 77;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = RM->rkey;
	}
	return ibv_post_send(q, &wr, &bad);
}

static bool all_are(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static void traffic(void)
{
	struct ibv_cq *icq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *acq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *bcq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	uint32_t m = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct ibv_xrcd *xa = open_xrcd(-1, 0, m), *xb = open_xrcd(-1, 0, m);
	struct ibv_srq *sa, *sb;
	struct ibv_qp *t, *i, *i2;
	struct ibv_qp_init_attr pia;
	struct ibv_wc wc;
	uint32_t na = 0, nb = 0;
	uint64_t v;

	st_ctx = "objects";
	REQUIRE(icq && acq && bcq && xa && xb);
	CHECK(xsrq(xa, NULL) == NULL && errno == EINVAL);     /* an XRC SRQ needs its CQ */
	sa = xsrq(xa, acq);
	sb = xsrq(xb, bcq);
	REQUIRE(sa && sb);
	CHECK(ibv_get_srq_num(sa, &na) == 0 && ibv_get_srq_num(sb, &nb) == 0);
	CHECK(na != nb);
	CHECK(ibv_close_xrcd(xa) == EBUSY);                   /* sa is made through it */
	memset(&pia, 0, sizeof(pia));
	pia.qp_type = IBV_QPT_XRC_RECV;
	pia.send_cq = pia.recv_cq = icq;
	errno = 0;
	CHECK(ibv_create_qp(D.pd, &pia) == NULL && errno == EINVAL);
	CHECK(tgt(xa, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0) == NULL &&
	      errno == EINVAL);                               /* no IBV_QP_INIT_ATTR_XRCD */
	CHECK(tgt(xa, IBV_QP_INIT_ATTR_XRCD, IBV_QP_EX_WITH_SEND) == NULL && errno == EOPNOTSUPP);
	t = tgt(xa, IBV_QP_INIT_ATTR_XRCD, 0);
	i = ini(icq, 0);
	i2 = ini(icq, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	REQUIRE(t && i && i2);
	CHECK(t->qp_type == IBV_QPT_XRC_RECV && i->qp_type == IBV_QPT_XRC_SEND);
	xconnect(t, i, true);
	xconnect(i, t, false);

	st_ctx = "send";
	memset(lbuf, 0x5a, BUFSZ);
	memset(rbuf, 0, BUFSZ);
	post_srq_recv(sa, rbuf, 11);
	post_srq_recv(sa, rbuf + 256, 12);
	CHECK(post(i, IBV_WR_SEND, na, 100, 0, 1) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && wc.opcode == IBV_WC_SEND);
	if (st_poll_wc(acq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 11 && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == 100 && wc.qp_num == t->qp_num && wc.src_qp == i->qp_num);
	CHECK(all_are(rbuf, 100, 0x5a) && rbuf[100] == 0);
	CHECK(post(i, IBV_WR_SEND_WITH_IMM, na, 8, 0, 2) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	if (st_poll_wc(acq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 12 &&
		      (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htobe32(0x1234));

	st_ctx = "rdma";
	CHECK(post(i, IBV_WR_RDMA_WRITE, na, 64, (uintptr_t)rbuf + 1024, 3) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE);
	CHECK(all_are(rbuf + 1024, 64, 0x5a));
	memset(rbuf + 2048, 0xc3, 32);
	CHECK(post(i, IBV_WR_RDMA_READ, na, 32, (uintptr_t)rbuf + 2048, 4) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ);
	CHECK(all_are(lbuf, 32, 0xc3));
	v = 100;
	memcpy(rbuf + 4096, &v, 8);
	CHECK(post(i, IBV_WR_ATOMIC_FETCH_AND_ADD, na, 8, (uintptr_t)rbuf + 4096, 5) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD);
	memcpy(&v, lbuf, 8);
	CHECK_EQ(v, 100);
	CHECK(post(i, IBV_WR_ATOMIC_CMP_AND_SWP, na, 8, (uintptr_t)rbuf + 4096, 6) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP);
	memcpy(&v, rbuf + 4096, 8);
	CHECK_EQ(v, 77);                                     /* 105 found, 77 swapped in */

	st_ctx = "wr api";
	xconnect(i2, t, false);   /* t now answers i2: a target serves one initiator at a time */
	{
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
		REQUIRE(ibv_modify_qp(t, &at, IBV_QP_STATE) == 0);
		xconnect(t, i2, true);
	}
	{
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(i2);
		memset(lbuf, 0x77, 16);
		post_srq_recv(sa, rbuf + 512, 13);
		ibv_wr_start(x);
		x->wr_id = 21;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_xrc_srqn(x, na);
		ibv_wr_set_sge(x, LM->lkey, (uintptr_t)lbuf, 16);
		CHECK(ibv_wr_complete(x) == 0);
		if (st_poll_wc(icq, &wc))
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 21);
		if (st_poll_wc(acq, &wc))
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 13 && wc.byte_len == 16);
		CHECK(all_are(rbuf + 512, 16, 0x77));
	}

	st_ctx = "another domain's SRQ";
	memset(rbuf + 768, 0, 256);
	post_srq_recv(sb, rbuf + 768, 31);
	memset(lbuf, 0x99, 64);
	CHECK(post(i2, IBV_WR_SEND, nb, 64, 0, 7) == 0);
	if (st_poll_wc(icq, &wc))
		CHECK(wc.status == IBV_WC_REM_INV_REQ_ERR && wc.wr_id == 7);
	CHECK(ibv_poll_cq(bcq, 1, &wc) == 0 && ibv_poll_cq(acq, 1, &wc) == 0);
	CHECK(all_are(rbuf + 768, 256, 0));
	st_sleep_ms(50);
	CHECK(ibv_poll_cq(bcq, 1, &wc) == 0);

	CHECK(ibv_destroy_qp(i) == 0 && ibv_destroy_qp(i2) == 0 && ibv_destroy_qp(t) == 0);
	CHECK(ibv_destroy_cq(acq) == EBUSY);                   /* sa's completions go there */
	CHECK(ibv_destroy_srq(sa) == 0 && ibv_destroy_srq(sb) == 0);
	CHECK(ibv_close_xrcd(xa) == 0 && ibv_close_xrcd(xb) == 0);
	CHECK(ibv_destroy_cq(icq) == 0 && ibv_destroy_cq(acq) == 0 && ibv_destroy_cq(bcq) == 0);
}

int main(void)
{
	st_init("t_xrc", 60);
	st_dev_open(&D, 0);
	lbuf = aligned_alloc(4096, BUFSZ);
	rbuf = aligned_alloc(4096, BUFSZ);
	REQUIRE(lbuf && rbuf);
	LM = ibv_reg_mr(D.pd, lbuf, BUFSZ, ST_ACCESS_ALL);
	RM = ibv_reg_mr(D.pd, rbuf, BUFSZ, ST_ACCESS_ALL);
	REQUIRE(LM && RM);
	domains();
	traffic();
	CHECK(ibv_dereg_mr(LM) == 0 && ibv_dereg_mr(RM) == 0);
	st_dev_close(&D);
	st_exit();
	return 0;
}
