/* rvxsim: QPs: created with libmlx5's geometry, destroyed, moved between states by
 * ibv_modify_qp with the masks the kernel checks, queried. */
#include "verbs.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <sched.h>
#include <sys/mman.h>

/* ------------------------------------------------------------------ QP */

/* libmlx5's sizing for an RC send queue (see the facts sheet, section 1). */
static int size_sq(struct sim_qp *qp, struct ibv_qp_cap *cap)
{
	/* libmlx5's overhead: a UMR WQE for RC and UC (UC's raddr-only WQEs are smaller, but the
	 * memory-window bind WQE is the same), ctrl + datagram segment for UD; a DCI's WQEs also
	 * hold the 48-byte address segment, an XRC initiator's the 16-byte XRC segment (libmlx5
	 * sq_overhead) */
	uint32_t ovh = qp->type == IBV_QPT_UD ? 64 :
		       SIM_RC_SQ_OVERHEAD + (qp->dc_type == SIM_DCI ? 48 : 0) +
		       (qp->type == IBV_QPT_XRC_SEND ? 16 : 0), wqe, bytes;

	if (cap->max_send_wr == 0) {
		qp->sq_wqe_cnt = 0;
		qp->max_inline = 0;
		return 0;
	}
	/* rule: the device's max_qp_wr and max_sge (ibv_query_device), as mlx5_ib create_qp */
	if (cap->max_send_wr > SIM_MAX_QP_WR || cap->max_send_sge > SIM_MAX_SGE)
		return EINVAL;
	wqe = MAX(ovh + 16 * cap->max_send_sge, ovh + ALIGN_UP(4 + cap->max_inline_data, 16));
	wqe = ALIGN_UP(wqe, 64);
	/* rule: libmlx5 mlx5_calc_sq_size: a WQE over max_sq_desc_sz, or more WQEBBs than the
	 * device has (max_send_wqebb), EINVAL */
	if (wqe > SIM_MAX_WQE_SIZE)
		return EINVAL;
	bytes = roundup_pow2(cap->max_send_wr * wqe);
	if (bytes / 64 > SIM_MAX_QP_WR)
		return EINVAL;
	qp->sq_wqe_cnt = bytes / 64;
	qp->max_wqe_bytes = wqe;
	qp->max_send_wr = bytes / wqe;
	qp->max_inline = wqe - ovh - 4;
	qp->max_send_sge = cap->max_send_sge;   /* libmlx5 reports what was asked for */
	return 0;
}

static int size_rq(struct sim_qp *qp, struct ibv_qp_cap *cap)
{
	if (qp->srq || cap->max_recv_wr == 0) {
		qp->rq_wqe_cnt = 0;
		qp->rq_stride = 0;
		qp->max_recv_wr = 0;
		qp->max_recv_sge = qp->srq ? 0 : cap->max_recv_sge;
		return 0;
	}
	/* rule: libmlx5 mlx5_calc_rq_size: over the device's max_recv_wr or RQ WQE size, EINVAL */
	if (cap->max_recv_wr > SIM_MAX_QP_WR || cap->max_recv_sge > SIM_MAX_SGE)
		return EINVAL;
	qp->rq_stride = roundup_pow2(16 * MAX(1u, cap->max_recv_sge));
	qp->rq_wqe_cnt = roundup_pow2(cap->max_recv_wr);
	while (qp->rq_wqe_cnt * qp->rq_stride < 64)
		qp->rq_wqe_cnt <<= 1;
	qp->max_recv_wr = qp->rq_wqe_cnt;
	qp->max_recv_sge = qp->rq_stride / 16;
	return 0;
}

static void qp_free(struct sim_qp *qp)
{
	free(qp->buf);
	if (sim_mmio_owns(qp->uar)) {
		sim_mmio_free(qp);
	} else {
		free(qp->dbrec);
		free(qp->uar);
	}
	free(qp->sq_wrid);
	free(qp->sq_bbs);
	free(qp->sq_wc_op);
	free(qp->rq_wrid);
	free(qp->out);
	dc_free(qp);
	sim_wr_free(qp);
	free(qp);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia, int dc_type,
				uint64_t dc_key);

SIM_PRIV struct ibv_qp *rvxsim_priv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
					     uint32_t create_flags)
{
	(void)create_flags;
	return create_qp(pd, ia, 0, 0);
}

SIM_PRIV struct ibv_qp *rvxsim_priv_create_dc_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
						 int dc_type, uint64_t access_key)
{
	return create_qp(pd, ia, dc_type, access_key);
}

/* The doorbell record and a UAR page of the QP's own (the bfreg at UAR + 0x800, as on hardware).
 * With RVXSIM_COUNT_MMIO both are write-protected pages of mmio.c's arena; where that mode cannot
 * work, ordinary memory as without it. ENOMEM or 0. */
static int qp_alloc_regs(struct sim_qp *qp)
{
	if (sim_env.count_mmio) {
		int err = sim_mmio_alloc(qp);
		if (err != EOPNOTSUPP)
			return err;
	}
	qp->dbrec = zalloc_aligned(64, 64);      /* each QP's record in its own cache line */
	qp->uar = zalloc_aligned(4096, 4096);
	qp->bf = qp->uar ? qp->uar + 0x800 : NULL;
	return qp->dbrec && qp->bf ? 0 : ENOMEM;
}

/* The QP's memory as libmlx5 lays it out: one buffer with the RQ at offset 0 and the SQ after
 * it, the doorbell record, a UAR page, and the model's own per-WQE arrays. ENOMEM or 0. */
static int qp_alloc_bufs(struct sim_qp *qp)
{
	size_t rq_bytes = (size_t)qp->rq_wqe_cnt * qp->rq_stride, sq_bytes;

	sq_bytes = (size_t)qp->sq_wqe_cnt * 64;
	qp->buf_size = ALIGN_UP(MAX(rq_bytes + sq_bytes, (size_t)64), 4096);
	qp->buf = zalloc_aligned(4096, qp->buf_size);
	if (qp_alloc_regs(qp))
		return ENOMEM;
	qp->sq_wrid = calloc(MAX(qp->sq_wqe_cnt, 1u), sizeof(uint64_t));
	qp->sq_bbs = calloc(MAX(qp->sq_wqe_cnt, 1u), sizeof(uint16_t));
	qp->sq_wc_op = calloc(MAX(qp->sq_wqe_cnt, 1u), 1);
	qp->rq_wrid = calloc(MAX(qp->rq_wqe_cnt, 1u), sizeof(uint64_t));
	qp->out = calloc(SIM_MAX_OUTSTANDING, sizeof(struct sq_rec));
	if (!qp->buf || !qp->sq_wrid || !qp->sq_bbs || !qp->sq_wc_op || !qp->rq_wrid || !qp->out)
		return ENOMEM;
	qp->rq_buf = qp->buf;
	qp->sq_buf = qp->buf + rq_bytes;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

/* The ibv_qp the application sees, and the capabilities it got back in ia->cap. */
static void qp_init_ibv(struct sim_qp *qp, struct ibv_context *ctx, struct ibv_pd *pd,
			struct ibv_qp_init_attr *ia)
{
	qp->qp.context = ctx;
	qp->qp.qp_context = ia->qp_context;
	qp->qp.pd = pd;
	qp->qp.send_cq = ia->send_cq;
	qp->qp.recv_cq = ia->recv_cq;
	qp->qp.srq = ia->srq;
	qp->qp.qp_type = ia->qp_type;
	qp->qp.state = IBV_QPS_RESET;
	qp->state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);

	ia->cap.max_send_wr = qp->max_send_wr;
	ia->cap.max_recv_wr = qp->max_recv_wr;
	ia->cap.max_send_sge = qp->max_send_sge;
	ia->cap.max_recv_sge = qp->max_recv_sge;
	ia->cap.max_inline_data = qp->max_inline;
}

/* The QP numbered, put in the tables and on the context's list, and counted. */
static void qp_publish(struct sim_ctx *sc, struct sim_qp *qp, struct ibv_pd *pd, int dc_type)
{
	pthread_mutex_lock(&sc->lock);
	qp->qpn = sim_qp_tab_free_qpn(sc);
	qp->qp.qp_num = dc_type == SIM_DCT ? 0 : qp->qpn;   /* a DCT is numbered at RTR */
	qp->qp.handle = qp->qpn;
	sim_qp_tab_set(sc, qp->qpn, qp);
	qp->next = sc->qps;
	sc->qps = qp;
	pthread_mutex_unlock(&sc->lock);
	if (pd)
		pd_get(pd);
	sim_count_obj(SIM_OBJ_QPS, 1);
	qp->model_bytes = sizeof(*qp) + qp->buf_size + 64 + 4096 +
			  MAX(qp->sq_wqe_cnt, 1u) * (sizeof(uint64_t) + sizeof(uint16_t) + 1) +
			  MAX(qp->rq_wqe_cnt, 1u) * sizeof(uint64_t) +
			  SIM_MAX_OUTSTANDING * sizeof(struct sq_rec);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)qp->model_bytes);
	TRACE("create qp 0x%x: sq wqe_cnt %u at +%zu, rq wqe_cnt %u stride %u, max_inline %u",
	      qp->qpn, qp->sq_wqe_cnt, (size_t)qp->rq_wqe_cnt * qp->rq_stride,
	      qp->rq_wqe_cnt, qp->rq_stride, qp->max_inline);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia, int dc_type,
				uint64_t dc_key)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	struct sim_qp *qp;
	int err;

	sim_count_verb();
	if (huge_refused("MLX_QP_ALLOC_TYPE"))
		return NULL;
	/* rule: a target QP is made in an XRC domain, not a PD (libibverbs ibv_icmd_create_qp:
	 * IBV_QPT_XRC_RECV without IBV_QP_INIT_ATTR_XRCD, EINVAL) */
	if (ia->qp_type == IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	/* a model gap: raw packet QPs exist on hardware (docs/rvxsim.md) */
	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UC && ia->qp_type != IBV_QPT_UD &&
	    ia->qp_type != IBV_QPT_XRC_SEND && !(ia->qp_type == IBV_QPT_DRIVER && dc_type)) {
		sim_log("rvxsim: ibv_create_qp(qp_type %d): not supported by the model (RC, UC, UD, "
			"XRC and DC only)", ia->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* rule: both CQs, of the PD's context (the kernel looks them up among the context's); an
	 * XRC initiator has no receive side: its receive CQ is not looked up, the send CQ stands
	 * for it, and it has no receive queue (kernel uverbs create_qp; libibverbs sets its
	 * max_recv_wr and max_recv_sge to 0) */
	if (ia->qp_type == IBV_QPT_XRC_SEND) {
		ia->cap.max_recv_wr = ia->cap.max_recv_sge = 0;
		ia->srq = NULL;
	}
	if (!ia->send_cq || ia->send_cq->context != pd->context ||
	    (ia->qp_type != IBV_QPT_XRC_SEND &&
	     (!ia->recv_cq || ia->recv_cq->context != pd->context))) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->sc = sc;
	qp->type = ia->qp_type;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->srq = ia->srq ? to_ssrq(ia->srq) : NULL;
	qp->scq = to_scq(ia->send_cq);
	qp->rcq = to_scq(ia->qp_type == IBV_QPT_XRC_SEND ? ia->send_cq : ia->recv_cq);
	err = dc_type ? dc_init(qp, dc_type, dc_key) : 0;
	if (dc_type == SIM_DCT)     /* a DCT has no queues of its own: it receives through its SRQ */
		ia->cap.max_send_wr = ia->cap.max_recv_wr = 0;
	if (!err)
		err = size_sq(qp, &ia->cap);
	if (!err)
		err = size_rq(qp, &ia->cap);
	if (err) {
		dc_free(qp);
		free(qp);
		errno = err;
		return NULL;
	}
	if (qp_alloc_bufs(qp)) {
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	qp_init_ibv(qp, pd->context, pd, ia);
	qp_publish(sc, qp, pd, dc_type);
	return &qp->qp;
}

struct ibv_qp *sim_qp_new_tgt(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct ibv_qp_init_attr *ia = (struct ibv_qp_init_attr *)a;
	struct sim_qp *qp;

	sim_count_verb();
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->sc = sc;
	qp->type = IBV_QPT_XRC_RECV;
	memset(&ia->cap, 0, sizeof(ia->cap));
	if (qp_alloc_bufs(qp)) {
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	ia->send_cq = ia->recv_cq = NULL;
	ia->srq = NULL;
	qp_init_ibv(qp, ctx, NULL, ia);
	qp_publish(sc, qp, NULL, 0);
	return &qp->qp;
}

SIM_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	return rvxsim_priv_create_qp(pd, ia, 0);
}

SIM_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sim_qp *qp = to_sqp(ibqp);
	struct sim_ctx *sc = qp->sc;
	struct sim_qp **pp;

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	for (pp = &sc->qps; *pp; pp = &(*pp)->next)
		if (*pp == qp) {
			*pp = qp->next;
			break;
		}
	sim_qp_tab_set(sc, qp->qpn, NULL);
	pthread_mutex_unlock(&sc->lock);
	free(qp->tx_data);
	if (ibqp->pd)
		pd_put(ibqp->pd);
	sim_xrcd_put(qp->xh);
	sim_count_obj(SIM_OBJ_QPS, -1);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)qp->model_bytes);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	qp_free(qp);
	return 0;
}

/* What the kernel's table takes for RC and not for UC: the ACK timer, retries, RNR and the
 * READ/atomic resources (ib_modify_qp_is_ok's qp_state_table), and RATE_LIMIT, which the model
 * takes on RC only. */
#define RC_ONLY_ATTRS (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | \
		       IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | \
		       IBV_QP_MIN_RNR_TIMER | IBV_QP_RATE_LIMIT)

/* The kernel's table of required and optional attributes for RC transitions; UC's is the same
 * table without RC_ONLY_ATTRS; an XRC initiator's without the responder's (MAX_DEST_RD_ATOMIC,
 * MIN_RNR_TIMER), a target's without the requester's (RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC),
 * neither with RATE_LIMIT (ib_modify_qp_is_ok's qp_state_table, IB_QPT_XRC_INI/_TGT). */
static int check_mask(int cur, int next, int mask, enum ibv_qp_type type, char *why, size_t n)
{
	bool uc = type == IBV_QPT_UC;

	int req = 0, opt = 0;

	mask &= ~IBV_QP_STATE;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		if (mask & ~IBV_QP_CUR_STATE) {
			snprintf(why, n, "attributes 0x%x are not allowed in this transition",
				 mask & ~IBV_QP_CUR_STATE);
			return EINVAL;
		}
		return 0;
	}
	switch (cur) {
	case IBV_QPS_RESET:
		if (next != IBV_QPS_INIT)
			goto bad;
		req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		} else if (next == IBV_QPS_RTR) {
			req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		} else {
			goto bad;
		}
		break;
	case IBV_QPS_RTR:
		if (next != IBV_QPS_RTS)
			goto bad;
		req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		      IBV_QP_MAX_QP_RD_ATOMIC;
		opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
		      IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE | IBV_QP_RATE_LIMIT;
		break;
	case IBV_QPS_RTS:
		if (next != IBV_QPS_RTS)
			goto bad;
		opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
		      IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_RATE_LIMIT;
		break;
	default:
		goto bad;
	}
	if (uc) {
		req &= ~RC_ONLY_ATTRS;
		opt &= ~RC_ONLY_ATTRS;
	} else if (type == IBV_QPT_XRC_SEND) {
		req &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_RATE_LIMIT);
		opt &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_RATE_LIMIT);
	} else if (type == IBV_QPT_XRC_RECV) {
		req &= ~(IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RATE_LIMIT);
		opt &= ~(IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RATE_LIMIT);
	}
	if ((mask & req) != req) {
		snprintf(why, n, "required attributes 0x%x are missing", req & ~mask);
		return EINVAL;
	}
	if (mask & ~(req | opt)) {
		snprintf(why, n, "attributes 0x%x are not allowed in this transition",
			 mask & ~(req | opt));
		return EINVAL;
	}
	return 0;
bad:
	snprintf(why, n, "not a valid transition for a%s QP", uc ? " UC" :
		 type == IBV_QPT_XRC_SEND ? "n XRC initiator" :
		 type == IBV_QPT_XRC_RECV ? "n XRC target" : "n RC");
	return EINVAL;
}

static const char *state_name(int s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	return s >= 0 && s <= 6 ? n[s] : "unknown";
}

uint16_t gid_to_lid(const union ibv_gid *g)
{
	return (uint16_t)(g->raw[14] << 8 | g->raw[15]);
}

/* The checks of ibv_modify_qp: the transition's masks (check_mask, dc_check_mask,
 * sim_ud_check_mask) and the attributes' ranges. 0, or EINVAL with the reason in why. */
static int modify_check(struct sim_qp *qp, const struct ibv_qp_attr *a, int mask, int cur,
			int next, char *why, size_t n)
{
	int err = 0;

	/* rule: cur_qp_state must be the QP's state (kernel ib_modify_qp_is_ok's caller); [inferred] */
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != (enum ibv_qp_state)cur) {
		snprintf(why, n, "cur_qp_state %s is not the QP's state",
			 state_name(a->cur_qp_state));
		err = EINVAL;
	}
	/* rule: the kernel's per-transition required/optional masks (ib_modify_qp_is_ok) */
	if (!err)
		err = qp->dc_type ? dc_check_mask(qp, cur, next, mask, why, n) :
		      qp->type == IBV_QPT_UD ? sim_ud_check_mask(cur, next, mask, why, n) :
		      check_mask(cur, next, mask, qp->type, why, n);
	/* rule (kernel mlx5_ib_modify_qp): a port the device has, a P_Key index within the table
	 * (128 entries), at most 2^log_max_ra_res_qp (16) reads/atomics, an IB MTU 256-4096 */
	if (!err && (mask & IBV_QP_PORT) && a->port_num != 1)
		err = EINVAL, snprintf(why, n, "port_num %u (the device has port 1)", a->port_num);
	if (!err && (mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= 128)
		err = EINVAL, snprintf(why, n, "pkey_index %u out of range", a->pkey_index);
	if (!err && (mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SIM_MAX_RD_ATOMIC)
		err = EINVAL, snprintf(why, n, "max_rd_atomic %u over %u", a->max_rd_atomic,
				       SIM_MAX_RD_ATOMIC);
	if (!err && (mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SIM_MAX_RD_ATOMIC)
		err = EINVAL, snprintf(why, n, "max_dest_rd_atomic %u over %u",
				       a->max_dest_rd_atomic, SIM_MAX_RD_ATOMIC);
	if (!err && (mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		err = EINVAL, snprintf(why, n, "path_mtu %d", a->path_mtu);
	/* rule: RoCE AVs carry a GRH (kernel rdma_check_ah_attr); dlid 0 on IB [inferred]; port 1 */
	if (!err && (mask & IBV_QP_AV)) {
		if (sim_env.link_eth && !a->ah_attr.is_global)
			err = EINVAL, snprintf(why, n, "RoCE needs ah_attr.is_global = 1");
		else if (!sim_env.link_eth && !a->ah_attr.is_global && a->ah_attr.dlid == 0 &&
			 !qp->dc_type)   /* a DC QP's AV gives the port and path, not a peer */
			err = EINVAL, snprintf(why, n, "ah_attr.dlid 0");
		else if (a->ah_attr.port_num && a->ah_attr.port_num != 1)
			err = EINVAL, snprintf(why, n, "ah_attr.port_num %u", a->ah_attr.port_num);
	}
	/* rule: QP numbers are 24 bits (IB spec, BTH DestQP) */
	if (!err && (mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		err = EINVAL, snprintf(why, n, "dest_qp_num 0x%x", a->dest_qp_num);
	return err;
}

/* The attributes the mask names, kept for ibv_query_qp and the engine. */
static void modify_attrs(struct sim_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = a->port_num;
	if (mask & IBV_QP_AV) {
		qp->attr.ah_attr = a->ah_attr;
		if (a->ah_attr.is_global)
			qp->attr.ah_attr.dlid = gid_to_lid(&a->ah_attr.grh.dgid);
		fabric_forget_peer(qp->sc, qp->attr.ah_attr.dlid);
	}
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = a->path_mtu;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = a->qkey;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		qp->attr.retry_cnt = a->retry_cnt;
		qp->retry_left = a->retry_cnt;
	}
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = a->rnr_retry;
		qp->rnr_left = a->rnr_retry;
	}
	if (mask & IBV_QP_ALT_PATH) {
		qp->attr.alt_ah_attr = a->alt_ah_attr;
		qp->attr.alt_pkey_index = a->alt_pkey_index;
		qp->attr.alt_port_num = a->alt_port_num;
		qp->attr.alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = a->path_mig_state;
}

/* The transition itself: RESET empties the queues, ERR flushes them, RTR and RTS start the
 * sequence numbers at the PSNs the two sides exchanged. Under sc->lock. */
static void modify_state(struct sim_qp *qp, int cur, int next)
{
	if (next == IBV_QPS_RESET) {
		engine_qp_reset(qp);
		qp->sw_sq_pi = qp->sw_sq_tail = 0;
		qp->sw_rq_head = qp->sw_rq_tail = 0;
		qp->sw_bf_off = 0;
	} else if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		engine_qp_to_err(qp);
	}
	/* message sequence numbers start at the PSNs the two sides exchanged */
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		qp->exp_seq = qp->attr.rq_psn;
		qp->rx_dead = false;
	}
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR)
		qp->next_seq = qp->attr.sq_psn;
	qp->state = next;
	qp->qp.state = next;
	qp->attr.qp_state = next;
	if (qp->dc_type)
		dc_modified(qp, cur, next);
}

SIM_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct sim_qp *qp = to_sqp(ibqp);
	struct sim_ctx *sc = qp->sc;
	int cur, next, err;
	bool kick;
	char why[160] = "";

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	cur = qp->state;
	next = (mask & IBV_QP_STATE) ? (int)a->qp_state : cur;
	err = modify_check(qp, a, mask, cur, next, why, sizeof(why));
	if (err) {
		pthread_mutex_unlock(&sc->lock);
		sim_log("rvxsim: qp 0x%x: ibv_modify_qp %s -> %s (mask 0x%x): %s", qp->qpn,
			state_name(cur), state_name(next), mask, why);
		return err;
	}
	modify_attrs(qp, a, mask);
	modify_state(qp, cur, next);
	kick = engine_state_gives_work(qp, next);
	pthread_mutex_unlock(&sc->lock);
	if (next == IBV_QPS_RESET) {
		cq_clean(to_scq(ibqp->recv_cq), qp);
		if (ibqp->send_cq != ibqp->recv_cq)
			cq_clean(to_scq(ibqp->send_cq), qp);
	}
	TRACE("qp 0x%x: modify %d -> %d (mask 0x%x)", qp->qpn, cur, next, mask);
	if (kick)
		engine_kick(sc);
	return 0;
}

SIM_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
			    struct ibv_qp_init_attr *ia)
{
	struct sim_qp *qp = to_sqp(ibqp);

	sim_count_verb();
	(void)mask;
	pthread_mutex_lock(&qp->sc->lock);
	*a = qp->attr;
	a->qp_state = qp->state;
	a->cur_qp_state = qp->state;
	a->cap.max_send_wr = qp->max_send_wr;
	a->cap.max_recv_wr = qp->max_recv_wr;
	a->cap.max_send_sge = qp->max_send_sge;
	a->cap.max_recv_sge = qp->max_recv_sge;
	a->cap.max_inline_data = qp->max_inline;
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->qp_context = ibqp->qp_context;
		ia->send_cq = ibqp->send_cq;
		ia->recv_cq = ibqp->recv_cq;
		ia->srq = ibqp->srq;
		ia->cap = a->cap;
		ia->qp_type = ibqp->qp_type;
		ia->sq_sig_all = qp->sq_sig_all;
	}
	pthread_mutex_unlock(&qp->sc->lock);
	return 0;
}

SIM_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp; (void)op; (void)flags;
	return 0;
}

/* default-version bindings (see SIM_DEFAULT_1_1 in internal.h) */
SIM_DEFAULT_1_1(ibv_create_qp)
SIM_DEFAULT_1_1(ibv_destroy_qp)
SIM_DEFAULT_1_1(ibv_modify_qp)
SIM_DEFAULT_1_1(ibv_query_qp)
