/*
 * t_dc_common.h: what the DC tests share, on top of simtest.h. DCIs and DCTs are made
 * with mlx5dv_create_qp as rdma-core 44 documents it (IBV_QPT_DRIVER,
 * MLX5DV_QP_INIT_ATTR_MASK_DC), moved through their states with the kernel's masks,
 * and a DCI's WQEs are ctrl | address segment | ... written straight into its queue:
 * the 48-byte form with mlx5dv_set_dgram_seg(), the 16-byte form by hand.
 */
#ifndef T_DC_COMMON_H
#define T_DC_COMMON_H

#include "simtest.h"

#define DC_KEY 0x1ee7a330c0ffee01ull

/* Where a DCI sends: the DCT's port address, number and access key. */
struct dc_target {
	uint16_t lid;
	uint8_t gid[16];
	uint32_t dctn;
	uint64_t key;
	uint64_t addr;          /* a buffer at the target, and its rkey */
	uint32_t rkey;
	uint32_t pad;
};

static inline struct ibv_qp *dc_create_dct(struct st_dev *d, struct st_cq *cq, struct ibv_srq *srq,
					   uint64_t key)
{
	struct ibv_qp_init_attr_ex ia;
	struct mlx5dv_qp_init_attr dv;

	memset(&ia, 0, sizeof(ia));
	memset(&dv, 0, sizeof(dv));
	ia.qp_type = IBV_QPT_DRIVER;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = d->pd;
	ia.send_cq = cq->cq;
	ia.recv_cq = cq->cq;
	ia.srq = srq;
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
	dv.dc_init_attr.dct_access_key = key;
	return mlx5dv_create_qp(d->ctx, &ia, &dv);
}

/* RESET -> INIT -> RTR with mlx5_ib_modify_dct's exact masks. */
static inline int dc_dct_ready(struct st_dev *d, struct ibv_qp *dct, int access)
{
	struct ibv_qp_attr at;
	int rc;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = d->port_num;
	at.qp_access_flags = access;
	rc = ibv_modify_qp(dct, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			   IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.min_rnr_timer = 1;
	at.ah_attr.port_num = d->port_num;
	if (d->eth) {
		at.ah_attr.is_global = 1;
		at.ah_attr.grh.hop_limit = 64;
	}
	return ibv_modify_qp(dct, &at, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
			     IBV_QP_PATH_MTU);
}

static inline struct ibv_qp *dc_create_dci_raw(struct st_dev *d, struct st_cq *cq,
					       uint32_t max_send_wr, uint32_t max_sge,
					       uint32_t max_inline, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex ia;
	struct mlx5dv_qp_init_attr dv;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	memset(&dv, 0, sizeof(dv));
	ia.qp_type = IBV_QPT_DRIVER;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = d->pd;
	ia.send_cq = cq->cq;
	ia.recv_cq = cq->cq;
	ia.cap.max_send_wr = max_send_wr;
	ia.cap.max_send_sge = max_sge;
	ia.cap.max_inline_data = max_inline;
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	qp = mlx5dv_create_qp(d->ctx, &ia, &dv);
	if (qp && cap)
		*cap = ia.cap;
	return qp;
}

/* A DCI as an st_qp (direct access to its send queue). */
static inline void dc_create_dci(struct st_dev *d, struct st_qp *q, struct st_cq *cq,
				 uint32_t max_send_wr, uint32_t max_sge, uint32_t max_inline)
{
	struct mlx5dv_obj obj;

	memset(q, 0, sizeof(*q));
	q->qp = dc_create_dci_raw(d, cq, max_send_wr, max_sge, max_inline, &q->cap);
	REQUIRE(q->qp != NULL);
	q->scq = q->rcq = cq;
	q->qpn = q->qp->qp_num;
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = q->qp;
	obj.qp.out = &q->dv;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0);
	REQUIRE(q->dv.sq.stride == 64 && q->dv.sq.wqe_cnt);
}

/* RESET -> INIT -> RTR -> RTS with modify_dci_qp_is_ok's masks (UCX's sequence). */
static inline int dc_dci_ready(struct st_dev *d, struct st_qp *q, uint8_t retry_cnt,
			       uint8_t rnr_retry, uint8_t timeout)
{
	struct ibv_qp_attr at;
	int rc;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = d->port_num;
	rc = ibv_modify_qp(q->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	if (rc)
		return rc;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.ah_attr.port_num = d->port_num;
	if (d->eth) {
		at.ah_attr.is_global = 1;
		at.ah_attr.grh.hop_limit = 64;
	}
	rc = ibv_modify_qp(q->qp, &at, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV);
	if (rc)
		return rc;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = timeout;
	at.retry_cnt = retry_cnt;
	at.rnr_retry = rnr_retry;
	at.max_rd_atomic = 16;
	rc = ibv_modify_qp(q->qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	q->pi = 0;
	q->bf_off = 0;
	return rc;
}

static inline void dc_target_of(struct st_dev *d, struct ibv_qp *dct, uint64_t key,
				struct dc_target *t)
{
	memset(t, 0, sizeof(*t));
	t->lid = d->port.lid;
	memcpy(t->gid, d->gid.raw, 16);
	t->dctn = dct->qp_num;
	t->key = key;
}

/*
 * The address segment: the 48-byte extended form through mlx5dv_set_dgram_seg (with a GRH
 * on a RoCE port, where one is required), or the 16-byte base form by hand.
 */
static inline void dc_wqe_av(struct st_wqe *w, const struct st_dev *d, const struct dc_target *t,
			     int ext)
{
	if (ext || d->eth) {
		struct mlx5_wqe_datagram_seg *s = st_wqe_seg(w, sizeof(*s));
		uint8_t rmac[6] = { 0 }, rgid[16];
		memcpy(rgid, t->gid, 16);
		mlx5dv_set_dgram_seg(s, t->key, t->dctn, 1, d->eth ? 0 : 0, 0,
				     d->eth ? 0xc000 : t->lid, rmac, 0, 64,
				     d->eth ? 1u << 30 : 0, rgid);
	} else {
		uint8_t *s = st_wqe_seg(w, 16);
		uint64_t k = htobe64(t->key);
		uint32_t dq = htobe32(t->dctn);
		uint16_t lid = htobe16(t->lid);
		memcpy(s, &k, 8);
		memcpy(s + 8, &dq, 4);
		s[12] = 0;              /* stat_rate_sl */
		s[13] = 0;              /* fl_mlid */
		memcpy(s + 14, &lid, 2);
	}
}

/* Helpers for the common one-segment WQEs through a DCI. */
static inline uint16_t dc_post_write(struct st_qp *q, const struct st_dev *d,
				     const struct dc_target *t, int ext, uint64_t raddr, uint32_t rkey,
				     const void *src, uint32_t len, uint32_t lkey, uint8_t fm_ce_se)
{
	struct st_wqe w;

	st_wqe_begin(&w);
	dc_wqe_av(&w, d, t, ext);
	st_wqe_raddr(&w, raddr, rkey);
	st_wqe_data(&w, len, lkey, src);
	return st_post(q, &w, MLX5_OPCODE_RDMA_WRITE, 0, fm_ce_se, 0, ST_RING_DB);
}

static inline uint16_t dc_post_send(struct st_qp *q, const struct st_dev *d,
				    const struct dc_target *t, int ext, const void *src, uint32_t len,
				    uint32_t lkey, uint8_t fm_ce_se)
{
	struct st_wqe w;

	st_wqe_begin(&w);
	dc_wqe_av(&w, d, t, ext);
	st_wqe_data(&w, len, lkey, src);
	return st_post(q, &w, MLX5_OPCODE_SEND, 0, fm_ce_se, 0, ST_RING_DB);
}

static inline uint16_t dc_post_fa(struct st_qp *q, const struct st_dev *d,
				  const struct dc_target *t, uint64_t raddr, uint32_t rkey,
				  uint64_t add, void *result, uint32_t lkey)
{
	struct st_wqe w;

	st_wqe_begin(&w);
	dc_wqe_av(&w, d, t, 0);
	st_wqe_raddr(&w, raddr, rkey);
	st_wqe_atomic(&w, add, 0);
	st_wqe_data(&w, 8, lkey, result);
	return st_post(q, &w, MLX5_OPCODE_ATOMIC_FA, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_DB);
}

#define DC_ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

#endif
