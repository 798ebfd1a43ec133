/*
 * t_verbs_path: the plain verbs path (the inline ibv_post_send, ibv_post_recv
 * and ibv_poll_cq wrappers dispatching through ibv_context.ops) on a loopback
 * pair: writes, reads, sends, atomics, and error statuses; and what libmlx5's post_send
 * refuses (an unknown opcode, a QP not in RTS, too many SGEs) with its errno.
 */
#include "simtest.h"
#include <poll.h>

struct vq {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

static struct st_dev D;
static struct vq A, B;
static struct ibv_mr *LM, *RM;
static uint8_t *lbuf, *rbuf;

#define BUFSZ 65536

static void vq_create(struct vq *q)
{
	struct ibv_qp_init_attr ia;

	q->scq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	q->rcq = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	REQUIRE(q->scq && q->rcq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = q->scq;
	ia.recv_cq = q->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	ia.cap.max_inline_data = 64;
	q->qp = ibv_create_qp(D.pd, &ia);
	REQUIRE(q->qp != NULL);
	CHECK(ia.cap.max_inline_data >= 64);
}

static void vq_connect(struct vq *q, struct vq *peer)
{
	st_ibqp_connect(&D, q->qp, peer->qp);
}

static void vq_connect_pair(struct vq *a, struct vq *b)
{
	vq_connect(a, b);
	vq_connect(b, a);
}

/* A small RC QP on one CQ: 8 sends of one SGE, and 8 receives of one SGE unless
 * it takes them from srq. */
static struct ibv_qp *small_qp(struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	if (!srq) {
		ia.cap.max_recv_wr = 8;
		ia.cap.max_recv_sge = 1;
	}
	return ibv_create_qp(D.pd, &ia);
}

/* A signaled send WR on the one SGE sg, with a remote address for RDMA (0 otherwise). */
static void wr_one(struct ibv_send_wr *wr, struct ibv_sge *sg, uint64_t wr_id, enum ibv_wr_opcode op,
		   uint64_t raddr, uint32_t rkey)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->sg_list = sg;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

/* A receive WR on the one SGE sg. */
static void recv_one(struct ibv_recv_wr *rr, struct ibv_sge *sg, uint64_t wr_id)
{
	memset(rr, 0, sizeof(*rr));
	rr->wr_id = wr_id;
	rr->sg_list = sg;
	rr->num_sge = 1;
}


static void expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
		      uint32_t qpn, long len)
{
	struct ibv_wc wc;

	if (!st_poll_wc(cq, &wc))
		return;
	CHECKF(wc.status == st, "status %d (%s), expected %d (%s)", wc.status, ibv_wc_status_str(wc.status),
	       st, ibv_wc_status_str(st));
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.qp_num, qpn);
	if (st == IBV_WC_SUCCESS) {
		CHECK_EQ(wc.opcode, op);
		if (len >= 0)
			CHECK_EQ(wc.byte_len, (unsigned long)len);
	}
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(qp, wr, &bad);
	CHECKF(rc == 0, "ibv_post_send: %d", rc);
	return rc;
}

int main(void)
{
	struct ibv_sge sg[4];
	struct ibv_send_wr wr;
	struct ibv_recv_wr rr, *badr;
	struct ibv_wc wc;
	int i;

	st_init("t_verbs_path", 30);
	st_dev_open(&D, 0);
	vq_create(&A);
	vq_create(&B);
	vq_connect_pair(&A, &B);
	lbuf = aligned_alloc(4096, BUFSZ);
	rbuf = aligned_alloc(4096, BUFSZ);
	REQUIRE(lbuf && rbuf);
	memset(lbuf, 0, BUFSZ);
	memset(rbuf, 0, BUFSZ);
	LM = ibv_reg_mr(D.pd, lbuf, BUFSZ, ST_ACCESS_ALL);
	RM = ibv_reg_mr(D.pd, rbuf, BUFSZ, ST_ACCESS_ALL);
	REQUIRE(LM && RM);
	CHECK(LM->lkey != RM->lkey);
	CHECK(LM->addr == lbuf && LM->length == BUFSZ);

	/* ibv_query_qp reports what the QP was given */
	st_ctx = "query_qp";
	{
		struct ibv_qp_attr at;
		struct ibv_qp_init_attr ia;
		memset(&at, 0, sizeof(at));
		memset(&ia, 0, sizeof(ia));
		CHECK(ibv_query_qp(A.qp, &at, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU |
				   IBV_QP_ACCESS_FLAGS | IBV_QP_CAP | IBV_QP_RNR_RETRY | IBV_QP_RETRY_CNT |
				   IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia) == 0);
		CHECK_EQ(at.qp_state, IBV_QPS_RTS);
		CHECK_EQ(at.dest_qp_num, B.qp->qp_num);
		CHECK_EQ(at.path_mtu, IBV_MTU_1024);
		CHECK_EQ(at.qp_access_flags, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		CHECK_EQ(at.rnr_retry, 7);
		CHECK_EQ(at.retry_cnt, 7);
		CHECK_EQ(at.max_rd_atomic, 16);
		CHECK_EQ(at.max_dest_rd_atomic, 16);
		CHECK_EQ(at.cap.max_send_sge, 4);
		CHECK(at.cap.max_send_wr >= 32 && at.cap.max_inline_data >= 64);
		CHECK_EQ(ia.qp_type, IBV_QPT_RC);
		CHECK(ia.send_cq == A.scq && ia.recv_cq == A.rcq);
	}

	/* libmlx5's post_send refusals: an opcode outside its table (EINVAL) before anything else,
	 * then a QP not yet in RTS or more SGEs than max_send_sge (ENOMEM); *bad names the WR */
	st_ctx = "post_send refusals";
	{
		struct ibv_cq *c = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
		struct ibv_qp *r = c ? small_qp(c, NULL) : NULL;
		struct ibv_sge five[5];
		struct ibv_send_wr *bad = NULL;

		REQUIRE(r != NULL);
		for (i = 0; i < 5; i++)
			five[i] = (struct ibv_sge){ (uintptr_t)lbuf + 16 * i, 8, LM->lkey };
		wr_one(&wr, five, 1, IBV_WR_SEND, 0, 0);
		CHECK_EQ(ibv_post_send(r, &wr, &bad), ENOMEM);
		CHECK(bad == &wr);
		wr.opcode = (enum ibv_wr_opcode)77;
		CHECK_EQ(ibv_post_send(r, &wr, &bad), EINVAL);
		wr_one(&wr, five, 2, IBV_WR_RDMA_WRITE, (uintptr_t)rbuf, RM->rkey);
		wr.num_sge = 5;
		bad = NULL;
		CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), ENOMEM);
		CHECK(bad == &wr);
		CHECK(ibv_poll_cq(A.scq, 1, &wc) == 0);
		CHECK(ibv_destroy_qp(r) == 0 && ibv_destroy_cq(c) == 0);
	}

	/* RDMA WRITE, gather of two SGEs */
	st_ctx = "write";
	for (i = 0; i < 4096; i++)
		lbuf[i] = (uint8_t)(i * 7 + 3);
	sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 1000, LM->lkey };
	sg[1] = (struct ibv_sge){ (uintptr_t)lbuf + 2000, 2000, LM->lkey };
	wr_one(&wr, sg, 11, IBV_WR_RDMA_WRITE, (uintptr_t)rbuf + 100, RM->rkey);
	wr.num_sge = 2;
	post_send(A.qp, &wr);
	expect_wc(A.scq, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, A.qp->qp_num, -1);
	CHECK(!memcmp(rbuf + 100, lbuf, 1000));
	CHECK(!memcmp(rbuf + 1100, lbuf + 2000, 2000));

	/* inline WRITE */
	st_ctx = "write inline";
	sg[0] = (struct ibv_sge){ (uintptr_t)lbuf + 5, 50, 0 };
	wr.wr_id = 12;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = (uintptr_t)rbuf + 8192;
	post_send(A.qp, &wr);
	expect_wc(A.scq, 12, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, A.qp->qp_num, -1);
	CHECK(!memcmp(rbuf + 8192, lbuf + 5, 50));

	/* RDMA READ */
	st_ctx = "read";
	for (i = 0; i < 3000; i++)
		rbuf[16384 + i] = (uint8_t)(i ^ 0x5a);
	sg[0] = (struct ibv_sge){ (uintptr_t)lbuf + 16384, 3000, LM->lkey };
	wr_one(&wr, sg, 13, IBV_WR_RDMA_READ, (uintptr_t)rbuf + 16384, RM->rkey);
	post_send(A.qp, &wr);
	expect_wc(A.scq, 13, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, A.qp->qp_num, 3000);
	CHECK(!memcmp(lbuf + 16384, rbuf + 16384, 3000));

	/* SEND with immediate into a posted receive */
	st_ctx = "send/recv";
	sg[1] = (struct ibv_sge){ (uintptr_t)rbuf + 24576, 4096, RM->lkey };
	recv_one(&rr, &sg[1], 99);
	CHECK(ibv_post_recv(B.qp, &rr, &badr) == 0);
	sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 777, LM->lkey };
	wr_one(&wr, sg, 14, IBV_WR_SEND_WITH_IMM, 0, 0);
	wr.imm_data = htobe32(0xabcdef01);
	post_send(A.qp, &wr);
	expect_wc(A.scq, 14, IBV_WC_SUCCESS, IBV_WC_SEND, A.qp->qp_num, -1);
	if (st_poll_wc(B.rcq, &wc)) {
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 99);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, 777);
		CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
		CHECK_EQ(wc.imm_data, htobe32(0xabcdef01));
		CHECK_EQ(wc.qp_num, B.qp->qp_num);
		CHECK_EQ(wc.src_qp, A.qp->qp_num);
		if (!D.eth)
			CHECK_EQ(wc.slid, D.port.lid);
		CHECK(!memcmp(rbuf + 24576, lbuf, 777));
	}

	/* RDMA WRITE with immediate consumes a receive */
	st_ctx = "write with imm";
	CHECK(ibv_post_recv(B.qp, &rr, &badr) == 0);
	sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 64, LM->lkey };
	wr.wr_id = 15;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(77);
	wr.wr.rdma.remote_addr = (uintptr_t)rbuf + 32768;
	wr.wr.rdma.rkey = RM->rkey;
	post_send(A.qp, &wr);
	expect_wc(A.scq, 15, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, A.qp->qp_num, -1);
	if (st_poll_wc(B.rcq, &wc)) {
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
		CHECK_EQ(wc.imm_data, htobe32(77));
		CHECK_EQ(wc.byte_len, 64);
	}
	CHECK(!memcmp(rbuf + 32768, lbuf, 64));

	/* Atomics */
	st_ctx = "atomics";
	{
		uint64_t *tgt = (uint64_t *)(rbuf + 40960), *res = (uint64_t *)(lbuf + 40960);
		*tgt = 100;
		*res = 0;
		sg[0] = (struct ibv_sge){ (uintptr_t)res, 8, LM->lkey };
		wr_one(&wr, sg, 16, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 0);
		wr.wr.atomic.remote_addr = (uintptr_t)tgt;
		wr.wr.atomic.rkey = RM->rkey;
		wr.wr.atomic.compare_add = 23;
		post_send(A.qp, &wr);
		expect_wc(A.scq, 16, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, A.qp->qp_num, 8);
		CHECK_EQ(*res, 100);
		CHECK_EQ(*tgt, 123);

		wr.wr_id = 17;
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 123;
		wr.wr.atomic.swap = 0x8000000000000001ull;
		post_send(A.qp, &wr);
		expect_wc(A.scq, 17, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, A.qp->qp_num, 8);
		CHECK_EQ(*res, 123);
		CHECK_EQ(*tgt, 0x8000000000000001ull);
	}

	/* A chain of unsignaled WRs followed by a signaled one: one completion. */
	st_ctx = "chain";
	{
		struct ibv_send_wr ws[4], *bad = NULL;
		struct ibv_sge s4[4];
		memset(ws, 0, sizeof(ws));
		for (i = 0; i < 4; i++) {
			lbuf[48000 + i] = (uint8_t)(0x40 + i);
			s4[i] = (struct ibv_sge){ (uintptr_t)lbuf + 48000 + i, 1, LM->lkey };
			ws[i].wr_id = 20 + (uint64_t)i;
			ws[i].sg_list = &s4[i];
			ws[i].num_sge = 1;
			ws[i].opcode = IBV_WR_RDMA_WRITE;
			ws[i].send_flags = i == 3 ? IBV_SEND_SIGNALED : 0;
			ws[i].wr.rdma.remote_addr = (uintptr_t)rbuf + 48000 + i;
			ws[i].wr.rdma.rkey = RM->rkey;
			ws[i].next = i < 3 ? &ws[i + 1] : NULL;
		}
		CHECK(ibv_post_send(A.qp, ws, &bad) == 0);
		expect_wc(A.scq, 23, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, A.qp->qp_num, -1);
		CHECK(!memcmp(rbuf + 48000, lbuf + 48000, 4));
		CHECK_EQ(ibv_poll_cq(A.scq, 1, &wc), 0);
	}

	/* Errors: a bad rkey fails with REM_ACCESS_ERR; the next WR is flushed. */
	st_ctx = "errors";
	{
		sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 16, LM->lkey };
		wr_one(&wr, sg, 30, IBV_WR_RDMA_WRITE, (uintptr_t)rbuf, RM->rkey + 0x100000);
		post_send(A.qp, &wr);
		expect_wc(A.scq, 30, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, A.qp->qp_num, -1);
		wr.wr_id = 31;
		wr.wr.rdma.rkey = RM->rkey;
		{
			struct ibv_send_wr *bad = NULL;
			int rc = ibv_post_send(A.qp, &wr, &bad);
			/* posting to a QP in ERR is allowed; the WR is flushed */
			if (CHECKF(rc == 0, "ibv_post_send in ERR: %d", rc))
				expect_wc(A.scq, 31, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, A.qp->qp_num, -1);
		}
		CHECK(!strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success"));
		CHECK(!strcmp(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error"));
		CHECK(!strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error"));
		CHECK(!strcmp(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded"));
		CHECK(!strcmp(ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR), "RNR retry counter exceeded"));
		CHECK(!strcmp(ibv_wc_status_str(IBV_WC_LOC_PROT_ERR), "local protection error"));
		/* B, the responder, failed its QP too and says so by an affiliated event */
		{
			struct ibv_qp_attr at;
			struct ibv_qp_init_attr ia;
			st_expect_qp_event(D.ctx, IBV_EVENT_QP_ACCESS_ERR, B.qp, 3000);
			if (CHECK(ibv_query_qp(B.qp, &at, IBV_QP_STATE, &ia) == 0))
				CHECK_EQ(at.qp_state, IBV_QPS_ERR);
		}
	}

	/* Local protection error on B->A: bad lkey (B reset and connected again first). */
	st_ctx = "local protection";
	{
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
		REQUIRE(ibv_modify_qp(B.qp, &at, IBV_QP_STATE) == 0);
		vq_connect(&B, &A);
		sg[0] = (struct ibv_sge){ (uintptr_t)rbuf, 16, RM->lkey ^ 0x3300 };
		wr_one(&wr, sg, 40, IBV_WR_RDMA_WRITE, (uintptr_t)lbuf, LM->rkey);
		post_send(B.qp, &wr);
		expect_wc(B.scq, 40, IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_WRITE, B.qp->qp_num, -1);
	}

	/* Shared receive queue through ibv_post_srq_recv. */
	st_ctx = "srq";
	{
		struct ibv_srq_init_attr sia;
		struct ibv_srq *srq;
		struct ibv_cq *c2;
		struct vq S, T;
		int k;

		memset(&sia, 0, sizeof(sia));
		sia.attr.max_wr = 16;
		sia.attr.max_sge = 1;
		srq = ibv_create_srq(D.pd, &sia);
		c2 = ibv_create_cq(D.ctx, 32, NULL, NULL, 0);
		REQUIRE(srq && c2);
		S.qp = small_qp(c2, srq);
		T.qp = small_qp(c2, NULL);
		REQUIRE(S.qp && T.qp);
		S.scq = S.rcq = T.scq = T.rcq = c2;
		vq_connect_pair(&S, &T);
		/* a QP on an SRQ has no receive queue: libmlx5 finds it full (ENOMEM) */
		{
			struct ibv_recv_wr r2, *b2 = NULL;
			struct ibv_sge rs = { (uintptr_t)rbuf, 8, RM->lkey };
			recv_one(&r2, &rs, 79);
			CHECK_EQ(ibv_post_recv(S.qp, &r2, &b2), ENOMEM);
			CHECK(b2 == &r2);
		}
		for (k = 0; k < 4; k++) {
			struct ibv_recv_wr r2, *b2;
			struct ibv_sge rs = { (uintptr_t)rbuf + 53248 + 256 * k, 256, RM->lkey };
			recv_one(&r2, &rs, 80 + (uint64_t)k);
			CHECK(ibv_post_srq_recv(srq, &r2, &b2) == 0);
		}
		for (k = 0; k < 4; k++) {
			lbuf[k] = (uint8_t)(0x70 + k);
			sg[0] = (struct ibv_sge){ (uintptr_t)lbuf + k, 1, LM->lkey };
			wr_one(&wr, sg, 90 + (uint64_t)k, IBV_WR_SEND, 0, 0);
			post_send(T.qp, &wr);
		}
		/* four send completions and four receives, in some interleaving */
		{
			int sends = 0, recvs = 0, got = 0;
			while (got < 8) {
				if (!st_poll_wc(c2, &wc))
					break;
				got++;
				CHECKF(wc.status == IBV_WC_SUCCESS, "%s", ibv_wc_status_str(wc.status));
				if (wc.opcode == IBV_WC_RECV) {
					CHECK_EQ(wc.wr_id, 80 + (uint64_t)recvs);
					CHECK_EQ(wc.qp_num, S.qp->qp_num);
					CHECK_EQ(wc.src_qp, T.qp->qp_num);
					CHECK_EQ(wc.byte_len, 1);
					CHECK_EQ(rbuf[53248 + 256 * recvs], 0x70 + recvs);
					recvs++;
				} else {
					CHECK_EQ(wc.opcode, IBV_WC_SEND);
					CHECK_EQ(wc.wr_id, 90 + (uint64_t)sends);
					sends++;
				}
			}
			CHECK_EQ(sends, 4);
			CHECK_EQ(recvs, 4);
		}
		CHECK(ibv_destroy_qp(S.qp) == 0);
		CHECK(ibv_destroy_qp(T.qp) == 0);
		CHECK(ibv_destroy_srq(srq) == 0);
		CHECK(ibv_destroy_cq(c2) == 0);
	}

	/* Completion events: a channel, an armed CQ, one event per arm. */
	st_ctx = "events";
	{
		struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
		struct ibv_cq *ecq = NULL, *erq = NULL, *evcq = NULL;
		struct vq E, F;
		struct pollfd pfd;
		void *evctx = NULL;
		int k;

		REQUIRE(ch != NULL);
		ecq = ibv_create_cq(D.ctx, 16, (void *)0x1234, ch, 0);
		erq = ibv_create_cq(D.ctx, 16, (void *)0x5678, ch, 0);
		REQUIRE(ecq && erq);
		memset(&E, 0, sizeof(E));
		memset(&F, 0, sizeof(F));
		E.scq = ecq;
		E.rcq = ecq;
		F.scq = erq;
		F.rcq = erq;
		E.qp = small_qp(ecq, NULL);
		F.qp = small_qp(erq, NULL);
		REQUIRE(E.qp && F.qp);
		vq_connect_pair(&E, &F);
		pfd.fd = ch->fd;
		pfd.events = POLLIN;

		for (k = 0; k < 3; k++) {
			CHECK(ibv_req_notify_cq(ecq, 0) == 0);
			CHECK_EQ(poll(&pfd, 1, 0), 0);     /* armed, nothing yet */
			sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 8, LM->lkey };
			wr_one(&wr, sg, 50 + (uint64_t)k, IBV_WR_RDMA_WRITE, (uintptr_t)rbuf + 50000, RM->rkey);
			post_send(E.qp, &wr);
			if (!CHECKF(poll(&pfd, 1, 3000) == 1, "no completion event within 3 s (round %d)", k))
				break;
			CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0);
			CHECK(evcq == ecq);
			CHECK(evctx == (void *)0x1234);
			ibv_ack_cq_events(ecq, 1);
			expect_wc(ecq, 50 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, E.qp->qp_num, -1);
			/* not re-armed: a second completion raises no event */
			post_send(E.qp, &wr);
			expect_wc(ecq, 50 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, E.qp->qp_num, -1);
			CHECK_EQ(poll(&pfd, 1, 50), 0);
		}

		/* Solicited-only arm on the receive side: only a SEND with SE wakes it. */
		st_ctx = "solicited events";
		CHECK(ibv_req_notify_cq(erq, 1) == 0);
		for (k = 0; k < 2; k++) {
			struct ibv_recv_wr r2, *b2;
			struct ibv_sge rs = { (uintptr_t)rbuf + 52000, 64, RM->lkey };
			recv_one(&r2, &rs, 60 + (uint64_t)k);
			CHECK(ibv_post_recv(F.qp, &r2, &b2) == 0);
			sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 8, LM->lkey };
			wr_one(&wr, sg, 70 + (uint64_t)k, IBV_WR_SEND, 0, 0);
			wr.send_flags |= k ? IBV_SEND_SOLICITED : 0;
			post_send(E.qp, &wr);
			expect_wc(ecq, 70 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_SEND, E.qp->qp_num, -1);
			if (k == 0) {
				expect_wc(erq, 60, IBV_WC_SUCCESS, IBV_WC_RECV, F.qp->qp_num, 8);
				CHECKF(poll(&pfd, 1, 100) == 0, "event for an unsolicited SEND on a solicited-only arm");
			} else {
				if (CHECKF(poll(&pfd, 1, 3000) == 1, "no event for a solicited SEND")) {
					CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0);
					CHECK(evcq == erq);
					ibv_ack_cq_events(erq, 1);
				}
				expect_wc(erq, 61, IBV_WC_SUCCESS, IBV_WC_RECV, F.qp->qp_num, 8);
			}
		}
		CHECK(ibv_destroy_qp(E.qp) == 0);
		CHECK(ibv_destroy_qp(F.qp) == 0);
		CHECK(ibv_destroy_cq(ecq) == 0);
		CHECK(ibv_destroy_cq(erq) == 0);
		CHECK(ibv_destroy_comp_channel(ch) == 0);
	}

	/* ibv_resize_cq with completions pending (produced or not yet): every one is polled after
	 * it, in order; a smaller size is taken as well, and ibv_cq.cqe reports at least the size */
	st_ctx = "resize cq";
	{
		struct vq R, S;
		vq_create(&R);
		vq_create(&S);
		vq_connect_pair(&R, &S);
		for (int round = 0; round < 2; round++) {
			int want = round ? 16 : 1000;
			sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 64, LM->lkey };
			for (i = 0; i < 3; i++) {
				wr_one(&wr, sg, 900 + i, IBV_WR_RDMA_WRITE, (uintptr_t)rbuf, RM->rkey);
				post_send(R.qp, &wr);
			}
			CHECK_EQ(ibv_resize_cq(R.scq, want), 0);
			CHECK(R.scq->cqe >= want);
			for (i = 0; i < 3; i++)
				expect_wc(R.scq, 900 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, R.qp->qp_num, -1);
		}
		CHECK_EQ(ibv_resize_cq(R.scq, 0), EINVAL);
		CHECK(ibv_destroy_qp(R.qp) == 0 && ibv_destroy_qp(S.qp) == 0);
		CHECK(ibv_destroy_cq(R.scq) == 0 && ibv_destroy_cq(R.rcq) == 0);
		CHECK(ibv_destroy_cq(S.scq) == 0 && ibv_destroy_cq(S.rcq) == 0);
	}

	/* device memory: 4-byte aligned copies, a zero-based MR on it that a remote write fills */
	st_ctx = "device memory";
	{
		struct ibv_device_attr_ex dx;
		struct ibv_alloc_dm_attr da = { .length = 256 };
		struct ibv_dm *dm;
		struct ibv_mr *dmr;
		struct vq R, S;
		uint8_t in[64], out[64];

		CHECK(ibv_query_device_ex(D.ctx, NULL, &dx) == 0 && dx.max_dm_size >= 256);
		dm = ibv_alloc_dm(D.ctx, &da);
		REQUIRE(dm != NULL);
		for (i = 0; i < 64; i++)
			in[i] = (uint8_t)(i + 1);
		CHECK_EQ(ibv_memcpy_to_dm(dm, 8, in, 64), 0);
		CHECK_EQ(ibv_memcpy_from_dm(out, dm, 8, 64), 0);
		CHECK(!memcmp(in, out, 64));
		CHECK_EQ(ibv_memcpy_to_dm(dm, 2, in, 8), EINVAL);
		CHECK(ibv_memcpy_from_dm(out, dm, 252, 8) != 0);
		dmr = ibv_reg_dm_mr(D.pd, dm, 0, 256, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE);
		REQUIRE(dmr != NULL);
		CHECK_EQ(ibv_free_dm(dm), EBUSY);
		vq_create(&R);
		vq_create(&S);
		vq_connect_pair(&R, &S);
		memset(lbuf, 0x5a, 32);
		sg[0] = (struct ibv_sge){ (uintptr_t)lbuf, 32, LM->lkey };
		wr_one(&wr, sg, 950, IBV_WR_RDMA_WRITE, 128, dmr->rkey);   /* zero-based: offset 128 */
		post_send(R.qp, &wr);
		expect_wc(R.scq, 950, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, R.qp->qp_num, -1);
		CHECK_EQ(ibv_memcpy_from_dm(out, dm, 128, 32), 0);
		CHECK(!memcmp(out, lbuf, 32));
		CHECK(ibv_destroy_qp(R.qp) == 0 && ibv_destroy_qp(S.qp) == 0);
		CHECK(ibv_destroy_cq(R.scq) == 0 && ibv_destroy_cq(R.rcq) == 0);
		CHECK(ibv_destroy_cq(S.scq) == 0 && ibv_destroy_cq(S.rcq) == 0);
		CHECK(ibv_dereg_mr(dmr) == 0);
		CHECK_EQ(ibv_free_dm(dm), 0);
	}

	st_ctx = "teardown";
	CHECK(ibv_destroy_qp(A.qp) == 0);
	CHECK(ibv_destroy_qp(B.qp) == 0);
	CHECK(ibv_destroy_cq(A.scq) == 0 && ibv_destroy_cq(A.rcq) == 0);
	CHECK(ibv_destroy_cq(B.scq) == 0 && ibv_destroy_cq(B.rcq) == 0);
	CHECK(ibv_dereg_mr(LM) == 0 && ibv_dereg_mr(RM) == 0);
	st_dev_close(&D);
	free(lbuf);
	free(rbuf);
	st_exit();
	return 0;
}
