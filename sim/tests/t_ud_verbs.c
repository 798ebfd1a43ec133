/*
 * t_ud_verbs: UD QPs through the plain verbs path (ibv_post_send with an address handle,
 * ibv_post_recv, ibv_poll_cq): the UD modify-QP masks, delivery with the 40 bytes of GRH space
 * at the head of the receive buffer, source QPN and LID in the work completion, SEND with
 * immediate, a Q_Key with the high bit set (the sender's own), and silent drops on a wrong Q_Key
 * or when no receive is posted (the datagram is gone; a later receive gets only later data).
 */
#include "simtest.h"

#define QKEY 0x11111111u
#define GRH 40

static struct st_dev D;
static struct ibv_cq *ca, *cb;
static struct ibv_qp *qa, *qb;
static struct ibv_ah *ah;
static struct st_mr M;     /* [0, 256): send data; [1024, ...): receive buffers */

static struct ibv_qp *ud_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 1, .max_recv_sge = 1,
						.max_inline_data = 64 } };
	struct ibv_qp *q = ibv_create_qp(D.pd, &ia);
	REQUIRE(q != NULL);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qkey = QKEY };
	/* RC's RESET->INIT mask (access flags, no Q_Key) is not UD's */
	CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == EINVAL);
	REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	return q;
}

static void post_recv(uint64_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)M.buf + off, len, M.mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	REQUIRE(ibv_post_recv(qb, &w, &bad) == 0);
}

static void ud_send(const char *msg, uint32_t qkey, int opcode, uint32_t imm)
{
	struct ibv_sge s = { (uintptr_t)M.buf, (uint32_t)strlen(msg), M.mr->lkey };
	struct ibv_send_wr w = { .wr_id = 7, .sg_list = &s, .num_sge = 1,
				 .opcode = opcode, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	uint64_t t0 = st_now_ns();
	int n;

	memcpy(M.buf, msg, strlen(msg));
	w.imm_data = htobe32(imm);
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = qb->qp_num;
	w.wr.ud.remote_qkey = qkey;
	REQUIRE(ibv_post_send(qa, &w, &bad) == 0);
	while ((n = ibv_poll_cq(ca, 1, &wc)) == 0 && st_now_ns() - t0 < 3000000000ull)
		;
	REQUIRE(n == 1);
	CHECKF(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == 7,
	       "send completion status %d opcode %d", wc.status, wc.opcode);
}

/* Polls cb for ms; 1 and *wc if a completion came. */
static int recv_wc(struct ibv_wc *wc, unsigned ms)
{
	uint64_t t0 = st_now_ns();
	int n;
	while ((n = ibv_poll_cq(cb, 1, wc)) == 0 && st_now_ns() - t0 < ms * 1000000ull)
		;
	return n;
}

static struct ibv_wc last;   /* the last receive completion */

static void expect_recv(const char *msg, uint64_t off, uint64_t id)
{
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	REQUIRE(recv_wc(&wc, 3000) == 1);
	CHECKF(wc.status == IBV_WC_SUCCESS, "receive status %d", wc.status);
	CHECK_EQ(wc.wr_id, id);
	CHECK_EQ(wc.byte_len, (uint32_t)strlen(msg) + GRH);
	CHECK_EQ(wc.src_qp, qa->qp_num);
	CHECK_EQ(wc.qp_num, qb->qp_num);
	if (!D.eth)
		CHECK_EQ(wc.slid, D.port.lid);
	CHECK(!!(wc.wc_flags & IBV_WC_GRH) == !!D.eth);
	CHECKF(!memcmp((char *)M.buf + off + GRH, msg, strlen(msg)),
	       "payload not at offset 40 of the receive buffer");
	last = wc;
}

int main(int argc, char **argv)
{
	struct ibv_ah_attr aa;
	struct ibv_wc wc;
	struct ibv_qp_attr qa_attr;
	struct ibv_qp_init_attr ia;

	st_init("t_ud_verbs", 30);
	st_dev_open(&D, 0);
	st_mr_alloc(&D, &M, 65536, ST_ACCESS_ALL);
	ca = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	cb = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	REQUIRE(ca && cb);
	qa = ud_qp(ca);
	qb = ud_qp(cb);
	REQUIRE(ibv_query_qp(qb, &qa_attr, IBV_QP_QKEY, &ia) == 0);
	CHECK_EQ(qa_attr.qkey, QKEY);
	CHECK(ia.qp_type == IBV_QPT_UD);
	memset(&aa, 0, sizeof(aa));
	aa.port_num = 1;
	aa.dlid = D.port.lid;
	if (D.eth) {
		aa.is_global = 1;
		aa.grh.dgid = D.gid;
		aa.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(D.pd, &aa);
	REQUIRE(ah != NULL);

	st_ctx = "delivery";
	post_recv(1024, 256, 1);
	ud_send("hello, datagram", QKEY, IBV_WR_SEND, 0);
	expect_recv("hello, datagram", 1024, 1);

	st_ctx = "immediate";
	post_recv(2048, 256, 2);
	ud_send("imm", QKEY, IBV_WR_SEND_WITH_IMM, 0xabcd);
	expect_recv("imm", 2048, 2);
	CHECK(last.wc_flags & IBV_WC_WITH_IMM);
	CHECK_EQ(be32toh(last.imm_data), 0xabcdu);
	CHECK(last.opcode == IBV_WC_RECV);

	st_ctx = "wrong Q_Key";
	post_recv(3072, 256, 3);
	ud_send("wrong key", 0x22222222, IBV_WR_SEND, 0);
	CHECKF(recv_wc(&wc, 200) == 0, "a datagram with a wrong Q_Key was delivered");
	ud_send("right key", QKEY, IBV_WR_SEND, 0);
	expect_recv("right key", 3072, 3);

	st_ctx = "Q_Key from the QP";
	post_recv(4096, 256, 4);
	ud_send("own key", 0x80000000u, IBV_WR_SEND, 0);
	expect_recv("own key", 4096, 4);

	st_ctx = "no receive posted";
	ud_send("dropped", QKEY, IBV_WR_SEND, 0);
	st_sleep_ms(100);
	post_recv(5120, 256, 5);
	CHECKF(recv_wc(&wc, 200) == 0, "a datagram that found no receive was kept");
	ud_send("later", QKEY, IBV_WR_SEND, 0);
	expect_recv("later", 5120, 5);

	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_qp(qa) == 0);
	CHECK(ibv_destroy_qp(qb) == 0);
	CHECK(ibv_destroy_cq(ca) == 0);
	CHECK(ibv_destroy_cq(cb) == 0);
	st_mr_free(&M);
	st_dev_close(&D);
	if (argc < 2 && !st_failures) {
		int rc = st_rerun(argv[0], 20000, "RVXSIM_LINK=eth", NULL);
		CHECKF(rc == 0, "RoCE re-run failed (exit %d)", rc);
	}
	st_exit();
	return 0;
}
