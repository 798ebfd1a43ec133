/*
 * t_read_retry: an RDMA READ or atomic completes only with its own response. When that response
 * is lost and a later message of the same QP is acknowledged, the acknowledgement covers the READ
 * but does not complete it: the requester sends the READ again (an implied NAK) and its CQE comes
 * with the remote data in the buffer. RVXSIM_DROP_READ_RESP loses the first N READ/atomic
 * response packets; everything else is the plain verbs path on a loopback pair.
 *
 * Cases, one lost response each:
 *   put_get_put   WRITE, READ, WRITE: the second WRITE's ACK arrives past the READ
 *   atomic_put    fetch-and-add, WRITE: the add is done once, its CQE carries the old value
 *   multi_packet  a 16 KiB READ whose first response packet is lost, then a WRITE
 *   get_alone     a READ with nothing after it: the transport timer sends it again
 *   dc            WRITE, READ, WRITE from a DCI (ibv_wr_* with mlx5dv_wr_set_dc_addr) to a DCT
 */
#include "simtest.h"
#include "t_dc_common.h"

#define NDROP "5"
#define BUFSZ 65536

static struct st_dev D;
static struct ibv_cq *CQA, *CQB;
static struct ibv_qp *QA, *QB;
static struct ibv_mr *LM, *RM;
static uint8_t *lbuf, *rbuf;
static char trace_path[64];

static struct ibv_qp *make_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(D.pd, &ia);
}

/* Posts one signaled WR of len bytes at local offset loff, remote offset roff. */
static void post(uint64_t id, enum ibv_wr_opcode op, uint32_t loff, uint32_t roff, uint32_t len,
		 uint64_t add)
{
	struct ibv_sge sg = { (uintptr_t)lbuf + loff, len, LM->lkey };
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)rbuf + roff;
		wr.wr.atomic.rkey = RM->rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)rbuf + roff;
		wr.wr.rdma.rkey = RM->rkey;
	}
	CHECKF(ibv_post_send(QA, &wr, &bad) == 0, "ibv_post_send wr %llu", (unsigned long long)id);
}

/* Polls the CQE of wr id within 10 s and checks it succeeded with the given opcode. */
static bool wait_wc(uint64_t id, enum ibv_wc_opcode op)
{
	uint64_t end = st_now_ns() + 10000000000ull;
	struct ibv_wc wc;
	int n;

	do {
		n = ibv_poll_cq(CQA, 1, &wc);
		if (!n)
			sched_yield();
	} while (!n && st_now_ns() < end);
	if (!CHECKF(n == 1, "no completion for wr %llu", (unsigned long long)id))
		return false;
	CHECK_EQ(wc.wr_id, id);
	CHECKF(wc.status == IBV_WC_SUCCESS, "wr %llu: %s", (unsigned long long)id,
	       ibv_wc_status_str(wc.status));
	CHECK_EQ(wc.opcode, op);
	return wc.status == IBV_WC_SUCCESS;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + seed);
}

static void put_get_put(void)
{
	st_ctx = "put_get_put";
	memset(lbuf, 0, BUFSZ);
	fill(lbuf, 256, 1);                   /* put 1 source */
	fill(lbuf + 512, 256, 2);             /* put 2 source */
	fill(rbuf + 8192, 1024, 3);           /* what the get reads */
	post(1, IBV_WR_RDMA_WRITE, 0, 0, 256, 0);
	post(2, IBV_WR_RDMA_READ, 4096, 8192, 1024, 0);
	post(3, IBV_WR_RDMA_WRITE, 512, 1024, 256, 0);
	wait_wc(1, IBV_WC_RDMA_WRITE);
	/* the READ's buffer must hold the remote data when its CQE is seen, not later */
	if (wait_wc(2, IBV_WC_RDMA_READ))
		CHECKF(!memcmp(lbuf + 4096, rbuf + 8192, 1024), "READ completed without its data");
	wait_wc(3, IBV_WC_RDMA_WRITE);
	CHECK(!memcmp(rbuf, lbuf, 256));
	CHECK(!memcmp(rbuf + 1024, lbuf + 512, 256));
}

static void atomic_put(void)
{
	uint64_t v = 1000, old;

	st_ctx = "atomic_put";
	memset(lbuf, 0, BUFSZ);
	memcpy(rbuf + 64, &v, 8);
	fill(lbuf + 512, 128, 4);
	post(4, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 64, 8, 5);
	post(5, IBV_WR_RDMA_WRITE, 512, 2048, 128, 0);
	if (wait_wc(4, IBV_WC_FETCH_ADD)) {
		memcpy(&old, lbuf, 8);
		CHECKF(old == 1000, "fetch-and-add returned %llu, expected 1000", (unsigned long long)old);
	}
	wait_wc(5, IBV_WC_RDMA_WRITE);
	memcpy(&v, rbuf + 64, 8);
	CHECKF(v == 1005, "remote counter %llu, expected 1005 (the add done exactly once)",
	       (unsigned long long)v);
	CHECK(!memcmp(rbuf + 2048, lbuf + 512, 128));
}

static void multi_packet(void)
{
	st_ctx = "multi_packet";
	memset(lbuf, 0, BUFSZ);
	fill(rbuf + 16384, 16384, 5);
	fill(lbuf + 40000, 64, 6);
	post(6, IBV_WR_RDMA_READ, 0, 16384, 16384, 0);
	post(7, IBV_WR_RDMA_WRITE, 40000, 4096, 64, 0);
	if (wait_wc(6, IBV_WC_RDMA_READ))
		CHECKF(!memcmp(lbuf, rbuf + 16384, 16384), "16 KiB READ completed without its data");
	wait_wc(7, IBV_WC_RDMA_WRITE);
	CHECK(!memcmp(rbuf + 4096, lbuf + 40000, 64));
}

static void get_alone(void)
{
	st_ctx = "get_alone";
	memset(lbuf, 0, BUFSZ);
	fill(rbuf + 32768, 512, 7);
	post(8, IBV_WR_RDMA_READ, 100, 32768, 512, 0);
	if (wait_wc(8, IBV_WC_RDMA_READ))
		CHECKF(!memcmp(lbuf + 100, rbuf + 32768, 512), "READ completed without its data");
}

/* The same through DC: the target keeps the initiator's responder state, the DCI goes back. */
static void dc_put_get_put(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(D.pd, &sa);
	struct st_cq tcq = { .cq = CQB };
	struct ibv_qp_init_attr_ex ia;
	struct mlx5dv_qp_init_attr dv;
	struct ibv_qp *dct, *dci;
	struct ibv_qp_ex *x;
	struct mlx5dv_qp_ex *m;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct st_qp q;

	st_ctx = "dc";
	REQUIRE(srq != NULL);
	dct = dc_create_dct(&D, &tcq, srq, 0x5eed);
	REQUIRE(dct && dc_dct_ready(&D, dct, ST_ACCESS_ALL) == 0);
	memset(&ia, 0, sizeof(ia));
	memset(&dv, 0, sizeof(dv));
	ia.qp_type = IBV_QPT_DRIVER;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
	ia.pd = D.pd;
	ia.send_cq = ia.recv_cq = CQA;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	dci = mlx5dv_create_qp(D.ctx, &ia, &dv);
	REQUIRE(dci != NULL);
	memset(&q, 0, sizeof(q));
	q.qp = dci;
	REQUIRE(dc_dci_ready(&D, &q, 7, 7, 14) == 0);
	x = ibv_qp_to_qp_ex(dci);
	m = x ? mlx5dv_qp_ex_from_ibv_qp_ex(x) : NULL;
	REQUIRE(m != NULL);
	memset(&aa, 0, sizeof(aa));
	aa.dlid = D.port.lid;
	aa.port_num = D.port_num;
	if (D.eth) {
		aa.is_global = 1;
		memcpy(aa.grh.dgid.raw, D.gid.raw, 16);
		aa.grh.hop_limit = 64;
	}
	ah = ibv_create_ah(D.pd, &aa);
	REQUIRE(ah != NULL);
	memset(lbuf, 0, BUFSZ);
	fill(lbuf, 128, 8);
	fill(rbuf + 12288, 512, 9);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 21;
	ibv_wr_rdma_write(x, RM->rkey, (uintptr_t)rbuf + 10000);
	mlx5dv_wr_set_dc_addr(m, ah, dct->qp_num, 0x5eed);
	ibv_wr_set_sge(x, LM->lkey, (uintptr_t)lbuf, 128);
	x->wr_id = 22;
	ibv_wr_rdma_read(x, RM->rkey, (uintptr_t)rbuf + 12288);
	mlx5dv_wr_set_dc_addr(m, ah, dct->qp_num, 0x5eed);
	ibv_wr_set_sge(x, LM->lkey, (uintptr_t)lbuf + 1024, 512);
	x->wr_id = 23;
	ibv_wr_rdma_write(x, RM->rkey, (uintptr_t)rbuf + 11000);
	mlx5dv_wr_set_dc_addr(m, ah, dct->qp_num, 0x5eed);
	ibv_wr_set_sge(x, LM->lkey, (uintptr_t)lbuf, 64);
	CHECK_EQ(ibv_wr_complete(x), 0);
	wait_wc(21, IBV_WC_RDMA_WRITE);
	if (wait_wc(22, IBV_WC_RDMA_READ))
		CHECKF(!memcmp(lbuf + 1024, rbuf + 12288, 512), "DC READ completed without its data");
	wait_wc(23, IBV_WC_RDMA_WRITE);
	CHECK(!memcmp(rbuf + 10000, lbuf, 128) && !memcmp(rbuf + 11000, lbuf, 64));
	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_qp(dci) == 0 && ibv_destroy_qp(dct) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
}

/* Every response the fault was to lose was lost, and the requester went back for the three whose
 * later messages were answered first; read from the model's trace file. */
static void check_trace(void)
{
	char line[512];
	int dropped = 0, renak = 0;
	FILE *f = fopen(trace_path, "r");

	st_ctx = "trace";
	if (!CHECKF(f != NULL, "no trace file %s", trace_path))
		return;
	while (fgets(line, sizeof(line), f)) {
		dropped += strstr(line, "RVXSIM_DROP_READ_RESP:") != NULL;
		renak += strstr(line, "answered past without its response") != NULL;
	}
	fclose(f);
	CHECKF(dropped == atoi(NDROP), "%d responses lost, expected %s", dropped, NDROP);
	CHECKF(renak >= 4, "%d implied NAKs, expected at least 4", renak);
}

int main(void)
{
	st_init("t_read_retry", 50);
	snprintf(trace_path, sizeof(trace_path), "/tmp/t_read_retry.%d.trace", (int)getpid());
	setenv("RVXSIM_DROP_READ_RESP", NDROP, 1);
	setenv("RVXSIM_TRACE_FILE", trace_path, 1);
	st_dev_open(&D, 0);
	CQA = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	CQB = ibv_create_cq(D.ctx, 64, NULL, NULL, 0);
	REQUIRE(CQA && CQB);
	QA = make_qp(CQA);
	QB = make_qp(CQB);
	REQUIRE(QA && QB);
	st_ibqp_connect(&D, QA, QB);
	st_ibqp_connect(&D, QB, QA);
	lbuf = aligned_alloc(4096, BUFSZ);
	rbuf = aligned_alloc(4096, BUFSZ);
	REQUIRE(lbuf && rbuf);
	memset(rbuf, 0, BUFSZ);
	LM = ibv_reg_mr(D.pd, lbuf, BUFSZ, ST_ACCESS_ALL);
	RM = ibv_reg_mr(D.pd, rbuf, BUFSZ, ST_ACCESS_ALL);
	REQUIRE(LM && RM);

	put_get_put();
	atomic_put();
	multi_packet();
	get_alone();
	dc_put_get_put();

	ibv_dereg_mr(LM);
	ibv_dereg_mr(RM);
	ibv_destroy_qp(QA);
	ibv_destroy_qp(QB);
	ibv_destroy_cq(CQA);
	ibv_destroy_cq(CQB);
	st_dev_close(&D);
	check_trace();
	if (!st_failures)
		unlink(trace_path);
	st_exit();
}
