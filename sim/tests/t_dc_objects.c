/*
 * t_dc_objects: DC objects as rdma-core 44 and the kernel define them on a ConnectX-6.
 * - mlx5dv_create_qp for a DCT (SRQ and CQ required) and a DCI (no receive queue), and the
 *   refusals: no DC mask, DRIVER without mlx5dv attributes, a DCT without an SRQ, a DCI with
 *   receive capacity, a bad dc_type, dci_streams (EINVAL beyond the caps, EOPNOTSUPP within);
 * - the DCT gets its number at INIT -> RTR; its masks are exact; it has no RTS, ERR or RESET;
 * - the DCI masks of modify_dci_qp_is_ok, including RESET -> INIT -> RTR -> RTS after ERR;
 * - mlx5dv_query_device's DC masks; DCI geometry from mlx5dv_init_obj as libmlx5 sizes it
 *   (240 bytes of overhead: the UMR-sized RC overhead plus the 48-byte address segment);
 * - MLX5DV_OBJ_AH gives the address vector of ibv_create_ah;
 * - ibv_post_send on a DCI is refused (EOPNOTSUPP).
 */
#include "t_dc_common.h"

static int modify(struct ibv_qp *qp, enum ibv_qp_state s, int mask)
{
	struct ibv_qp_attr at;

	memset(&at, 0, sizeof(at));
	at.qp_state = s;
	at.port_num = 1;
	at.path_mtu = IBV_MTU_1024;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.max_rd_atomic = 1;
	at.min_rnr_timer = 1;
	at.ah_attr.port_num = 1;
	at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &at, mask);
}

static void check_geometry(struct st_dev *d, struct st_cq *cq, uint32_t wr, uint32_t sge,
			   uint32_t inl)
{
	struct ibv_qp_cap cap;
	struct ibv_qp *qp = dc_create_dci_raw(d, cq, wr, sge, inl, &cap);
	struct mlx5dv_qp dv;
	struct mlx5dv_obj obj;
	const uint32_t ovh = 192 + 48;
	uint32_t a = ovh + 16 * sge, b = ovh + ((4 + inl + 15) / 16) * 16;
	uint32_t wqe = ((a > b ? a : b) + 63) / 64 * 64, bytes = 1;

	if (!CHECKF(qp != NULL, "DCI wr %u sge %u inline %u: %s", wr, sge, inl, strerror(errno)))
		return;
	while (bytes < wr * wqe)
		bytes <<= 1;
	memset(&obj, 0, sizeof(obj));
	memset(&dv, 0, sizeof(dv));
	obj.qp.in = qp;
	obj.qp.out = &dv;
	CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0);
	CHECK_EQ(dv.sq.stride, 64);
	CHECKF(dv.sq.wqe_cnt == bytes / 64, "wr %u sge %u inline %u: wqe_cnt %u, libmlx5 gives %u",
	       wr, sge, inl, dv.sq.wqe_cnt, bytes / 64);
	CHECK_EQ(dv.rq.wqe_cnt, 0);
	CHECK_EQ(cap.max_inline_data, wqe - ovh - 4);
	CHECK_EQ(cap.max_send_wr, bytes / wqe);
	CHECK_EQ(cap.max_recv_wr, 0);
	CHECK_EQ(dv.dbrec[0], 0);
	CHECK_EQ(dv.dbrec[1], 0);
	CHECK(dv.bf.size == 256);
	CHECK(ibv_destroy_qp(qp) == 0);
}

int main(void)
{
	struct st_dev d;
	struct st_cq cq;
	struct st_srq srq;
	struct ibv_qp_init_attr_ex ia;
	struct mlx5dv_qp_init_attr dv;
	struct ibv_qp *qp, *dct;
	struct mlx5dv_context ctx;
	struct ibv_device_attr_ex dx;

	st_init("t_dc_objects", 60);
	st_dev_open(&d, 0);
	st_capture_begin();
	st_cq_create(&d, &cq, 64);
	st_srq_create(&d, &srq, 16, 1);

	/* device queries */
	memset(&ctx, 0, sizeof(ctx));
	ctx.comp_mask = MLX5DV_CONTEXT_MASK_DCI_STREAMS | MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
	CHECK(mlx5dv_query_device(d.ctx, &ctx) == 0);
	CHECK(ctx.comp_mask & MLX5DV_CONTEXT_MASK_DCI_STREAMS);
	CHECK(ctx.comp_mask & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS);
	CHECK_EQ(ctx.dci_streams_caps.max_log_num_concurent, 0);
	CHECK_EQ(ctx.dci_streams_caps.max_log_num_errored, 0);
	memset(&dx, 0, sizeof(dx));
	CHECK(ibv_query_device_ex(d.ctx, NULL, &dx) == 0);
	CHECK(dx.orig_attr.max_qp_wr > 0);

	/* DCT: created in RESET with number 0; INIT and RTR with exact masks; numbered at RTR */
	dct = dc_create_dct(&d, &cq, srq.srq, DC_KEY);
	REQUIRE(dct != NULL);
	CHECK_EQ(dct->qp_type, IBV_QPT_DRIVER);
	CHECK_EQ(dct->qp_num, 0);
	CHECK(modify(dct, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == EINVAL);
	CHECK(modify(dct, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		     IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY) == EINVAL);
	CHECK(modify(dct, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
		     IBV_QP_PATH_MTU) == EINVAL);
	CHECK(modify(dct, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		     IBV_QP_ACCESS_FLAGS) == 0);
	CHECK_EQ(dct->qp_num, 0);
	CHECK(modify(dct, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU) == EINVAL);
	CHECK(modify(dct, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
		     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN) == EINVAL);
	CHECK(modify(dct, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
		     IBV_QP_PATH_MTU) == 0);
	CHECK(dct->qp_num != 0 && dct->qp_num <= 0xffffff);
	CHECK(modify(dct, IBV_QPS_RTS, IBV_QP_STATE) == EINVAL);
	CHECK(modify(dct, IBV_QPS_ERR, IBV_QP_STATE) == EINVAL);
	CHECK(modify(dct, IBV_QPS_RESET, IBV_QP_STATE) == EINVAL);
	CHECK(ibv_destroy_qp(dct) == 0);

	/* refusals, with rdma-core's and the kernel's errno */
	memset(&ia, 0, sizeof(ia));
	memset(&dv, 0, sizeof(dv));
	ia.qp_type = IBV_QPT_DRIVER;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = d.pd;
	ia.send_cq = ia.recv_cq = cq.cq;
	ia.cap.max_send_wr = 16;
	ia.cap.max_send_sge = 1;
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, NULL) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);   /* no DC mask */
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = 7;
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;      /* DCT without an SRQ */
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);
	ia.srq = srq.srq;
	dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
	dv.create_flags = MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE;
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);
	dv.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
	qp = mlx5dv_create_qp(d.ctx, &ia, &dv);
	CHECKF(qp != NULL, "DCT with DISABLE_SCATTER_TO_CQE: %s", strerror(errno));
	if (qp)
		CHECK(ibv_destroy_qp(qp) == 0);
	ia.srq = NULL;
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	ia.qp_type = IBV_QPT_RC;                          /* DC must be IBV_QPT_DRIVER */
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);
	ia.qp_type = IBV_QPT_DRIVER;
	ia.cap.max_recv_wr = 4;                           /* a DCI has no receive queue */
	ia.cap.max_recv_sge = 1;
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);
	ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
	dv.dc_init_attr.dci_streams.log_num_concurent = 2;
	dv.dc_init_attr.dci_streams.log_num_errored = 1;
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EINVAL);
	dv.dc_init_attr.dci_streams.log_num_concurent = 0;
	dv.dc_init_attr.dci_streams.log_num_errored = 0;
	errno = 0;
	CHECK(mlx5dv_create_qp(d.ctx, &ia, &dv) == NULL && errno == EOPNOTSUPP);

	/* DCI states and masks */
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	qp = mlx5dv_create_qp(d.ctx, &ia, &dv);
	REQUIRE(qp != NULL);
	CHECK(qp->qp_num != 0);
	CHECK(modify(qp, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		     IBV_QP_ACCESS_FLAGS) == EINVAL);
	CHECK(modify(qp, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);
	CHECK(modify(qp, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == 0);
	CHECK(modify(qp, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT) == 0);
	CHECK(modify(qp, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV) == EINVAL);
	CHECK(modify(qp, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN) == EINVAL);
	CHECK(modify(qp, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_PATH_MTU) == 0);
	CHECK(modify(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == EINVAL);
	CHECK(modify(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN |
		     IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS) == EINVAL);
	CHECK(modify(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN |
		     IBV_QP_MIN_RNR_TIMER) == 0);
	CHECK(modify(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER) == 0);
	CHECK(modify(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT) == EINVAL);
	{       /* rdma-core sends through a DCI with ibv_wr_*, which the model does not provide */
		struct ibv_send_wr wr, *bad = NULL;
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_SEND;
		CHECK(ibv_post_send(qp, &wr, &bad) == EOPNOTSUPP && bad == &wr);
	}
	CHECK(modify(qp, IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);
	CHECK(modify(qp, IBV_QPS_ERR, IBV_QP_STATE) == 0);
	CHECK(modify(qp, IBV_QPS_RTS, IBV_QP_STATE) == EINVAL);
	CHECK(modify(qp, IBV_QPS_RESET, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);
	CHECK(modify(qp, IBV_QPS_RESET, IBV_QP_STATE) == 0);
	CHECK(modify(qp, IBV_QPS_ERR, IBV_QP_STATE) == EINVAL);   /* not from RESET */
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECKF(st_capture_count() >= 10, "one line per refused modify (got %d)", st_capture_count());

	/* geometry as libmlx5 computes it for a DCI */
	check_geometry(&d, &cq, 64, 1, 0);
	check_geometry(&d, &cq, 100, 1, 0);
	check_geometry(&d, &cq, 16, 4, 64);
	check_geometry(&d, &cq, 128, 2, 200);

	/* MLX5DV_OBJ_AH: the address vector of an ibv_create_ah */
	{
		struct ibv_ah_attr aa;
		struct ibv_ah *ah;
		struct mlx5dv_ah dah;
		struct mlx5dv_obj obj;

		memset(&aa, 0, sizeof(aa));
		aa.dlid = d.port.lid;
		aa.sl = 3;
		aa.port_num = 1;
		if (d.eth) {
			aa.is_global = 1;
			memcpy(aa.grh.dgid.raw, d.gid.raw, 16);
			aa.grh.hop_limit = 64;
		}
		ah = ibv_create_ah(d.pd, &aa);
		REQUIRE(ah != NULL);
		memset(&obj, 0, sizeof(obj));
		obj.ah.in = ah;
		obj.ah.out = &dah;
		CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH) == 0);
		REQUIRE(dah.av != NULL);
		CHECK(be32toh(dah.av->dqp_dct) & MLX5_EXTENDED_UD_AV);
		CHECK_EQ(be32toh(dah.av->dqp_dct) & 0xffffff, 0);
		if (d.eth) {
			CHECK(be32toh(dah.av->grh_gid_fl) & (1u << 30));
			CHECK(!memcmp(dah.av->rgid, d.gid.raw, 16));
		} else {
			CHECK_EQ(be16toh(dah.av->rlid), d.port.lid);
			CHECK_EQ(dah.av->stat_rate_sl & 0xf, 3);
		}
		CHECK(ibv_destroy_ah(ah) == 0);
	}

	CHECK(ibv_destroy_srq(srq.srq) == 0);
	st_cq_destroy(&cq);
	st_dev_close(&d);
	st_exit();
}
