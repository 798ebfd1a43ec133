/*
 * t_mw: memory windows on loopback RC pairs through the verbs path (ibv_alloc_mw, ibv_bind_mw,
 * IBV_WR_BIND_MW, IBV_WR_LOCAL_INV, IBV_WR_SEND_WITH_INV, ibv_wr_bind_mw, ibv_wr_local_inv).
 * The target's region is registered with local write and IBV_ACCESS_MW_BIND only, so every
 * remote access below goes through a window or fails. Checked: the device reports windows;
 * ibv_alloc_mw refuses type 3 with EINVAL; a type 1 window bound by ibv_bind_mw (the key's next
 * variant, an IBV_WC_BIND_MW completion) takes writes and reads inside its range with its rights
 * from any QP of the PD, and refuses a write outside its range, a write it was not bound for,
 * the key of before the bind, its key as an lkey, and everything once unbound (a bind of length
 * 0) or once its region is deregistered; bind errors (region without MW_BIND, range outside the
 * region, remote write over a region without local write, a bound type 2 window bound again)
 * complete with IBV_WC_MW_BIND_ERR; a type 2 window bound by IBV_WR_BIND_MW takes writes only
 * through the QP that bound it, and is freed by a local invalidation (IBV_WC_LOCAL_INV), by a
 * SEND with Invalidate (the receive completes with IBV_WC_WITH_INV and the key) and by
 * ibv_dealloc_mw; a SEND with Invalidate of a key that is no such window fails both ends; the
 * ibv_wr_* path binds and invalidates the same way. No refused access writes a byte.
 */
#include "simtest.h"

#define BUFSZ   65536
#define WIN     4096            /* the window: rbuf + WIN, WIN bytes */
#define RW      (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct vq {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static struct st_dev D;
static uint8_t *lbuf, *rbuf;
static struct ibv_mr *LM, *RM;   /* the initiator's buffer (all rights); the target's (MW_BIND) */

static void vq_create(struct vq *q, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia;

	q->cq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	REQUIRE(q->cq != NULL);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = q->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.pd = D.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
	ia.send_ops_flags = ops;
	q->qp = ibv_create_qp_ex(D.ctx, &ia);
	REQUIRE(q->qp != NULL);
}

/* a (the initiator) and b (the target), connected; b with the ibv_wr_* operations ops */
static void pair(struct vq *a, struct vq *b, uint64_t ops)
{
	vq_create(a, 0);
	vq_create(b, ops);
	st_ibqp_connect(&D, a->qp, b->qp);
	st_ibqp_connect(&D, b->qp, a->qp);
}

static void unpair(struct vq *a, struct vq *b)
{
	CHECK(ibv_destroy_qp(a->qp) == 0 && ibv_destroy_qp(b->qp) == 0);
	CHECK(ibv_destroy_cq(a->cq) == 0 && ibv_destroy_cq(b->cq) == 0);
}

/* Post wr on q, return its completion's status (opcode checked on success). */
static enum ibv_wc_status run(struct vq *q, struct ibv_send_wr *wr, enum ibv_wc_opcode op)
{
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;

	wr->send_flags |= IBV_SEND_SIGNALED;
	if (!CHECKF(ibv_post_send(q->qp, wr, &bad) == 0, "ibv_post_send") || !st_poll_wc(q->cq, &wc))
		return IBV_WC_GENERAL_ERR;
	if (wc.status == IBV_WC_SUCCESS)
		CHECK_EQ(wc.opcode, op);
	return wc.status;
}

/* An RDMA WRITE (seed s) or READ of len bytes through rkey at raddr, from a's buffer. */
static enum ibv_wc_status rdma(struct vq *a, enum ibv_wr_opcode op, uint32_t rkey, uint8_t *raddr,
			       uint32_t len, uint8_t s)
{
	struct ibv_sge sg = { (uintptr_t)lbuf, len, LM->lkey };
	struct ibv_send_wr wr;

	memset(lbuf, s, len);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = (uintptr_t)raddr;
	return run(a, &wr, op == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ);
}

static int all_are(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* ibv_bind_mw (type 1) on b's QP; the completion's status. */
static enum ibv_wc_status bind1(struct vq *b, struct ibv_mw *mw, struct ibv_mr *mr, uint8_t *addr,
				size_t len, int access)
{
	struct ibv_mw_bind mb;
	struct ibv_wc wc;

	memset(&mb, 0, sizeof(mb));
	mb.wr_id = 71;
	mb.send_flags = IBV_SEND_SIGNALED;
	mb.bind_info.mr = mr;
	mb.bind_info.addr = (uintptr_t)addr;
	mb.bind_info.length = len;
	mb.bind_info.mw_access_flags = access;
	if (!CHECKF(ibv_bind_mw(b->qp, mw, &mb) == 0, "ibv_bind_mw") || !st_poll_wc(b->cq, &wc))
		return IBV_WC_GENERAL_ERR;
	CHECK_EQ(wc.wr_id, 71);
	if (wc.status == IBV_WC_SUCCESS)
		CHECK_EQ(wc.opcode, IBV_WC_BIND_MW);
	return wc.status;
}

/* IBV_WR_BIND_MW (type 2) with key variant rkey on b's QP. */
static enum ibv_wc_status bind2(struct vq *b, struct ibv_mw *mw, uint32_t rkey, int access)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = RM;
	wr.bind_mw.bind_info.addr = (uintptr_t)rbuf + WIN;
	wr.bind_mw.bind_info.length = WIN;
	wr.bind_mw.bind_info.mw_access_flags = access;
	return run(b, &wr, IBV_WC_BIND_MW);
}

static enum ibv_wc_status local_inv(struct vq *b, uint32_t rkey)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = rkey;
	return run(b, &wr, IBV_WC_LOCAL_INV);
}

static void device_and_alloc(void)
{
	struct ibv_device_attr da;

	st_ctx = "device";
	REQUIRE(ibv_query_device(D.ctx, &da) == 0);
	CHECK(da.max_mw > 0);
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	errno = 0;
	CHECK(ibv_alloc_mw(D.pd, (enum ibv_mw_type)3) == NULL && errno == EINVAL);
}

static void type1(void)
{
	struct vq a, b, c, d;
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_1);
	struct ibv_mr *ro;
	uint32_t k0, k1;

	st_ctx = "type 1";
	REQUIRE(mw != NULL);
	CHECK(mw->rkey != RM->rkey && mw->type == IBV_MW_TYPE_1);
	pair(&a, &b, 0);
	pair(&c, &d, 0);
	memset(rbuf, 0x11, BUFSZ);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, RM->rkey, rbuf + WIN, 64, 1), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf, BUFSZ, 0x11));
	unpair(&a, &b);
	pair(&a, &b, 0);
	k0 = mw->rkey;
	CHECK_EQ(bind1(&b, mw, RM, rbuf + WIN, WIN, RW), IBV_WC_SUCCESS);
	k1 = mw->rkey;
	CHECK_EQ(k1, ibv_inc_rkey(k0));
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k1, rbuf + WIN + 100, 64, 2), IBV_WC_SUCCESS);
	CHECK(all_are(rbuf + WIN + 100, 64, 2) && all_are(rbuf + WIN, 100, 0x11));
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_READ, k1, rbuf + WIN + 100, 64, 0), IBV_WC_SUCCESS);
	CHECK(all_are(lbuf, 64, 2));
	/* a type 1 window serves every QP of its PD */
	CHECK_EQ(rdma(&c, IBV_WR_RDMA_WRITE, k1, rbuf + WIN + 200, 8, 3), IBV_WC_SUCCESS);
	CHECK(all_are(rbuf + WIN + 200, 8, 3));
	/* outside the range (inside the region) */
	CHECK_EQ(rdma(&c, IBV_WR_RDMA_WRITE, k1, rbuf + WIN - 8, 16, 4), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN - 8, 8, 0x11));
	unpair(&c, &d);
	pair(&c, &d, 0);
	/* the key of before the bind */
	CHECK_EQ(rdma(&c, IBV_WR_RDMA_WRITE, k0, rbuf + WIN, 8, 4), IBV_WC_REM_ACCESS_ERR);
	unpair(&c, &d);
	pair(&c, &d, 0);
	/* the window's key as an lkey */
	{
		struct ibv_sge sg = { (uintptr_t)rbuf + WIN, 8, k1 };
		struct ibv_send_wr wr;
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = &sg;
		wr.num_sge = 1;
		wr.wr.rdma.rkey = k1;
		wr.wr.rdma.remote_addr = (uintptr_t)rbuf + WIN;
		CHECK_EQ(run(&c, &wr, IBV_WC_RDMA_WRITE), IBV_WC_LOC_PROT_ERR);
	}
	unpair(&c, &d);
	/* rebound read-only: a write is refused */
	CHECK_EQ(bind1(&b, mw, RM, rbuf + WIN, WIN, IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_READ, mw->rkey, rbuf + WIN, 8, 0), IBV_WC_SUCCESS);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, mw->rkey, rbuf + WIN, 8, 5), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN, 8, 0x11));
	unpair(&a, &b);
	/* unbound (length 0): refused */
	pair(&a, &b, 0);
	CHECK_EQ(bind1(&b, mw, RM, rbuf + WIN, WIN, RW), IBV_WC_SUCCESS);
	CHECK_EQ(bind1(&b, mw, RM, NULL, 0, 0), IBV_WC_SUCCESS);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, mw->rkey, rbuf + WIN, 8, 6), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN, 8, 0x11));
	unpair(&a, &b);
	/* a region deregistered under a bound window */
	pair(&a, &b, 0);
	ro = ibv_reg_mr(D.pd, rbuf, BUFSZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	REQUIRE(ro != NULL);
	CHECK_EQ(bind1(&b, mw, ro, rbuf + WIN, WIN, RW), IBV_WC_SUCCESS);
	CHECK(ibv_dereg_mr(ro) == 0);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, mw->rkey, rbuf + WIN, 8, 7), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN, 8, 0x11));
	unpair(&a, &b);
	CHECK(ibv_dealloc_mw(mw) == 0);
}

/* Each bind error: IBV_WC_MW_BIND_ERR, the QP in error; a fresh pair for each. */
static void bind_errors(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_1), *mw2 = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	struct ibv_mr *nobind = ibv_reg_mr(D.pd, rbuf, BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *nolw = ibv_reg_mr(D.pd, rbuf, BUFSZ, IBV_ACCESS_MW_BIND);
	struct vq a, b;

	st_ctx = "bind errors";
	REQUIRE(mw && mw2 && nobind && nolw);
	pair(&a, &b, 0);
	CHECK_EQ(bind1(&b, mw, nobind, rbuf + WIN, WIN, RW), IBV_WC_MW_BIND_ERR);
	unpair(&a, &b);
	pair(&a, &b, 0);
	CHECK_EQ(bind1(&b, mw, RM, rbuf + BUFSZ - 100, WIN, RW), IBV_WC_MW_BIND_ERR);
	unpair(&a, &b);
	pair(&a, &b, 0);
	CHECK_EQ(bind1(&b, mw, nolw, rbuf + WIN, WIN, IBV_ACCESS_REMOTE_WRITE), IBV_WC_MW_BIND_ERR);
	unpair(&a, &b);
	pair(&a, &b, 0);
	CHECK_EQ(bind1(&b, mw, nolw, rbuf + WIN, WIN, IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
	CHECK_EQ(bind2(&b, mw2, ibv_inc_rkey(mw2->rkey), RW), IBV_WC_SUCCESS);
	CHECK_EQ(bind2(&b, mw2, ibv_inc_rkey(ibv_inc_rkey(mw2->rkey)), RW), IBV_WC_MW_BIND_ERR);
	unpair(&a, &b);
	CHECK(ibv_dealloc_mw(mw) == 0 && ibv_dealloc_mw(mw2) == 0);
	CHECK(ibv_dereg_mr(nobind) == 0 && ibv_dereg_mr(nolw) == 0);
}

/* A SEND with Invalidate of key from a to b: b's receive completion. */
static void send_inv(struct vq *a, struct vq *b, uint32_t key, struct ibv_wc *rwc,
		     enum ibv_wc_status *sst)
{
	struct ibv_sge rs = { (uintptr_t)rbuf, 64, RM->lkey };
	struct ibv_recv_wr rr = { .wr_id = 91, .sg_list = &rs, .num_sge = 1 }, *badr;
	struct ibv_send_wr wr;

	REQUIRE(ibv_post_recv(b->qp, &rr, &badr) == 0);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = key;
	*sst = run(a, &wr, IBV_WC_SEND);
	memset(rwc, 0, sizeof(*rwc));
	st_poll_wc(b->cq, rwc);
}

static void type2(void)
{
	struct vq a, b, c, d;
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	struct ibv_wc rwc;
	enum ibv_wc_status sst;
	uint32_t k;

	st_ctx = "type 2";
	REQUIRE(mw != NULL);
	memset(rbuf, 0x22, BUFSZ);
	pair(&a, &b, 0);
	pair(&c, &d, 0);
	k = ibv_inc_rkey(mw->rkey);
	CHECK_EQ(bind2(&b, mw, k, RW), IBV_WC_SUCCESS);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN, 32, 8), IBV_WC_SUCCESS);
	CHECK(all_are(rbuf + WIN, 32, 8));
	/* arriving on d, which did not bind it */
	CHECK_EQ(rdma(&c, IBV_WR_RDMA_WRITE, k, rbuf + WIN + 64, 32, 9), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN + 64, 32, 0x22));
	unpair(&c, &d);
	/* invalidated locally */
	CHECK_EQ(local_inv(&b, k), IBV_WC_SUCCESS);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN + 64, 32, 10), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN + 64, 32, 0x22));
	unpair(&a, &b);
	/* invalidated by the initiator's SEND with Invalidate */
	pair(&a, &b, 0);
	k = ibv_inc_rkey(k);
	CHECK_EQ(bind2(&b, mw, k, RW), IBV_WC_SUCCESS);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN, 8, 11), IBV_WC_SUCCESS);
	send_inv(&a, &b, k, &rwc, &sst);
	CHECK_EQ(sst, IBV_WC_SUCCESS);
	CHECK_EQ(rwc.status, IBV_WC_SUCCESS);
	CHECK_EQ(rwc.opcode, IBV_WC_RECV);
	CHECK(rwc.wc_flags & IBV_WC_WITH_INV);
	CHECK_EQ(rwc.invalidated_rkey, k);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN + 64, 8, 12), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN + 64, 8, 0x22));
	unpair(&a, &b);
	/* a SEND with Invalidate naming no window bound to the target QP: both ends fail */
	pair(&a, &b, 0);
	send_inv(&a, &b, RM->rkey, &rwc, &sst);
	CHECK_EQ(sst, IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(rwc.status, IBV_WC_REM_INV_REQ_ERR);
	unpair(&a, &b);
	/* deallocated while bound */
	pair(&a, &b, 0);
	k = ibv_inc_rkey(k);
	CHECK_EQ(bind2(&b, mw, k, RW), IBV_WC_SUCCESS);
	CHECK(ibv_dealloc_mw(mw) == 0);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN + 64, 8, 13), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN + 64, 8, 0x22));
	unpair(&a, &b);
}

/* ibv_wr_bind_mw and ibv_wr_local_inv on a QP created for them. */
static void wr_api(void)
{
	struct vq a, b;
	struct ibv_mw *mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	struct ibv_mw_bind_info bi = { RM, (uintptr_t)rbuf + WIN, WIN, RW };
	struct ibv_qp_ex *x;
	struct ibv_wc wc;
	uint32_t k;

	st_ctx = "ibv_wr_*";
	REQUIRE(mw != NULL);
	memset(rbuf, 0x33, BUFSZ);
	pair(&a, &b, IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND);
	x = ibv_qp_to_qp_ex(b.qp);
	REQUIRE(x != NULL);
	k = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(x);
	x->wr_id = 81;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, mw, k, &bi);
	CHECK(ibv_wr_complete(x) == 0);
	if (st_poll_wc(b.cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 81);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN, 8, 14), IBV_WC_SUCCESS);
	CHECK(all_are(rbuf + WIN, 8, 14));
	ibv_wr_start(x);
	x->wr_id = 82;
	ibv_wr_local_inv(x, k);
	CHECK(ibv_wr_complete(x) == 0);
	if (st_poll_wc(b.cq, &wc))
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV && wc.wr_id == 82);
	CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, k, rbuf + WIN + 64, 8, 15), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_are(rbuf + WIN + 64, 8, 0x33));
	unpair(&a, &b);
	CHECK(ibv_dealloc_mw(mw) == 0);
}

int main(void)
{
	st_init("t_mw", 60);
	st_dev_open(&D, 0);
	lbuf = aligned_alloc(4096, BUFSZ);
	rbuf = aligned_alloc(4096, BUFSZ);
	REQUIRE(lbuf && rbuf);
	LM = ibv_reg_mr(D.pd, lbuf, BUFSZ, ST_ACCESS_ALL);
	RM = ibv_reg_mr(D.pd, rbuf, BUFSZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	REQUIRE(LM && RM);
	device_and_alloc();
	type1();
	bind_errors();
	type2();
	wr_api();
	CHECK(ibv_dereg_mr(LM) == 0 && ibv_dereg_mr(RM) == 0);
	st_dev_close(&D);
	st_exit();
	return 0;
}
