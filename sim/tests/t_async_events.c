/*
 * t_async_events: asynchronous events as the kernel gives them, through rdma-core's API only.
 * The async fd is pollable; an SRQ-attached QP that enters the error state (by ibv_modify_qp, or
 * flushed after a failed WQE) gives IBV_EVENT_QP_LAST_WQE_REACHED naming that QP; a context opened
 * a second time on the same device shares the port (same LID) and gets the events of the objects
 * it created, the first context none of them. The completion channel's fd is pollable too and
 * carries one event per arming.
 */
#include "simtest.h"
#include <poll.h>

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static struct ibv_qp *srq_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	return ibv_create_qp(pd, &ia);
}

static void to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
}

int main(void)
{
	struct st_dev D;
	struct ibv_context *c2;
	struct ibv_pd *pd2;
	struct ibv_cq *cq, *cq2;
	struct ibv_srq *srq, *srq2;
	struct ibv_srq_init_attr sa;
	struct ibv_qp *q, *q2;
	struct ibv_port_attr p2;

	st_init("t_async_events", 40);
	st_dev_open(&D, 0);
	st_ctx = "idle";
	CHECK(!readable(D.ctx->async_fd, 0));

	st_ctx = "last_wqe_reached";
	cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(D.pd, &sa);
	REQUIRE(cq && srq);
	q = srq_qp(D.pd, cq, srq);
	REQUIRE(q != NULL);
	CHECK(st_qp_to_init(&D, &(struct st_qp){ .qp = q }) == 0);
	to_err(q);
	st_expect_qp_event(D.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, q, 10000);
	to_err(q);                     /* ERR -> ERR: no new transition, no second event */
	CHECK(!readable(D.ctx->async_fd, 0));

	/* a second context on the device: the same port, and its own objects' events */
	st_ctx = "second_context";
	c2 = ibv_open_device(D.ctx->device);
	REQUIRE(c2 != NULL);
	CHECK(ibv_query_port(c2, D.port_num, &p2) == 0 && p2.lid == D.port.lid);
	pd2 = ibv_alloc_pd(c2);
	cq2 = ibv_create_cq(c2, 16, NULL, NULL, 0);
	srq2 = ibv_create_srq(pd2, &sa);
	REQUIRE(pd2 && cq2 && srq2);
	q2 = srq_qp(pd2, cq2, srq2);
	REQUIRE(q2 != NULL);
	to_err(q2);
	st_expect_qp_event(c2, IBV_EVENT_QP_LAST_WQE_REACHED, q2, 10000);
	CHECK(!readable(D.ctx->async_fd, 0));

	CHECK(ibv_destroy_qp(q2) == 0);
	CHECK(ibv_destroy_srq(srq2) == 0);
	CHECK(ibv_destroy_cq(cq2) == 0);
	CHECK(ibv_dealloc_pd(pd2) == 0);
	CHECK(ibv_close_device(c2) == 0);
	CHECK(ibv_destroy_qp(q) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);

	/* the completion channel: pollable, one event per arming */
	st_ctx = "comp_channel";
	{
		struct ibv_comp_channel *ch = ibv_create_comp_channel(D.ctx);
		struct ibv_cq *ecq;
		void *ectx;
		struct ibv_cq *ccq;
		struct ibv_qp_init_attr ia;
		struct ibv_qp *qa, *qb;
		struct st_addr aa, ba;
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;
		int n = 0;

		REQUIRE(ch != NULL);
		ccq = ibv_create_cq(D.ctx, 16, (void *)0x1234, ch, 0);
		REQUIRE(ccq != NULL);
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = ccq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qa = ibv_create_qp(D.pd, &ia);
		qb = ibv_create_qp(D.pd, &ia);
		REQUIRE(qa && qb);
		memset(&aa, 0, sizeof(aa));
		aa.qpn = qa->qp_num; aa.lid = D.port.lid; memcpy(aa.gid, D.gid.raw, 16);
		ba = aa;
		ba.qpn = qb->qp_num;
		st_qp_connect(&D, &(struct st_qp){ .qp = qa }, &ba);
		st_qp_connect(&D, &(struct st_qp){ .qp = qb }, &aa);
		CHECK(!readable(ch->fd, 0));
		CHECK(ibv_req_notify_cq(ccq, 0) == 0);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 7;
		wr.opcode = IBV_WR_RDMA_WRITE;   /* zero bytes: nothing to register */
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = 0;
		wr.wr.rdma.rkey = 0;
		CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		if (CHECKF(readable(ch->fd, 10000), "no completion event within 10 s")) {
			CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == 0);
			CHECK(ecq == ccq && ectx == (void *)0x1234);
			ibv_ack_cq_events(ccq, 1);
		}
		while (!n)
			n = ibv_poll_cq(ccq, 1, &wc);
		CHECK(n == 1 && wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS);
		/* not armed again: the next completion raises no event */
		CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		n = 0;
		while (!n)
			n = ibv_poll_cq(ccq, 1, &wc);
		CHECK(!readable(ch->fd, 0));
		CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0);
		CHECK(ibv_destroy_cq(ccq) == 0);
		CHECK(ibv_destroy_comp_channel(ch) == 0);
	}
	st_ctx = NULL;
	st_dev_close(&D);
	st_exit();
}
