/* rvxsim: the libmlx5.so.1 surface (direct verbs). It reports the objects' geometry exactly as
 * libmlx5 does on a ConnectX, so a direct-verbs program drives the model's queues itself. All
 * state lives in libibverbs.so.1; this library reaches it through rvxsim_priv_* calls. */
#include "internal.h"
#include <stdio.h>
#include <string.h>
#include <errno.h>

SIM_EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	return device && !strncmp(device->name, "mlx5_", 5);
}

SIM_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
						  struct mlx5dv_context_attr *attr)
{
	if (attr && (attr->flags || attr->comp_mask)) {
		rvxsim_priv_unsupported("mlx5dv_open_device(DEVX or other flags)");
		return NULL;
	}
	return ibv_open_device(device);
}

SIM_EXPORT struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar(struct ibv_context *ctx, uint32_t flags)
{
	if (!rvxsim_priv_is_sim(ctx)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return rvxsim_priv_devx_alloc_uar(ctx, flags);
}

SIM_EXPORT void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar *uar)
{
	rvxsim_priv_devx_free_uar(uar);
}

SIM_EXPORT int mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attrs)
{
	uint64_t want = attrs->comp_mask;

	if (!rvxsim_priv_is_sim(ctx))
		return EOPNOTSUPP;
	memset(attrs, 0, sizeof(*attrs));
	attrs->version = 0;          /* CQE version 0: srqn_uidx carries the SRQ number */
	attrs->flags = MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED | MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW;
	if (want & MLX5DV_CONTEXT_MASK_CQE_COMPRESION) {
		attrs->cqe_comp_caps.max_num = 0;   /* the model never compresses CQEs */
		attrs->cqe_comp_caps.supported_format = 0;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_CQE_COMPRESION;
	}
	if (want & MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS) {
		attrs->num_lag_ports = 1;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS;
	}
	if (want & MLX5DV_CONTEXT_MASK_DYN_BFREGS) {
		attrs->max_dynamic_bfregs = 0;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_DYN_BFREGS;
	}
	if (want & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS) {
		/* mlx5_ib's dc_odp_caps on a ConnectX-6 with the firmware's DC ODP caps: as RC's */
		attrs->dc_odp_caps = SIM_ODP_TRANSPORT_CAPS;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
	}
	if (want & MLX5DV_CONTEXT_MASK_DCI_STREAMS) {
		/* a ConnectX-6 has no DCI stream channels (log_max_dci_stream_channels 0) */
		attrs->dci_streams_caps.max_log_num_concurent = 0;
		attrs->dci_streams_caps.max_log_num_errored = 0;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_DCI_STREAMS;
	}
	return 0;
}

static int init_qp(struct ibv_qp *ibqp, struct mlx5dv_qp *out)
{
	struct sim_qp *qp = to_sqp(ibqp);
	uint64_t want = out->comp_mask;

	out->dbrec = qp->dbrec;
	out->sq.buf = qp->sq_buf;
	out->sq.wqe_cnt = qp->sq_wqe_cnt;
	out->sq.stride = 64;
	out->rq.buf = qp->rq_buf;
	out->rq.wqe_cnt = qp->rq_wqe_cnt;
	out->rq.stride = qp->rq_stride;
	out->bf.reg = qp->bf;
	out->bf.size = SIM_BF_SIZE;
	out->comp_mask = 0;
	if (want & MLX5DV_QP_MASK_UAR_MMAP_OFFSET) {
		out->uar_mmap_offset = 0;
		out->comp_mask |= MLX5DV_QP_MASK_UAR_MMAP_OFFSET;
	}
	return 0;
}

static int init_cq(struct ibv_cq *ibcq, struct mlx5dv_cq *out, bool compat)
{
	struct sim_cq *cq = to_scq(ibcq);

	cq->direct = true;
	out->buf = cq->buf;
	out->dbrec = cq->dbrec;
	out->cqe_cnt = cq->cqe_cnt;
	out->cqe_size = cq->cqe_size;
	/* the MLX5_1.0 ABI handed out a pointer to the UAR pointer */
	out->cq_uar = compat ? (void *)&cq->uar_ptr : cq->uar;
	out->cqn = cq->cqn;
	out->comp_mask = 0;
	return 0;
}

static int init_srq(struct ibv_srq *ibsrq, struct mlx5dv_srq *out)
{
	struct sim_srq *s = to_ssrq(ibsrq);
	uint64_t want = out->comp_mask;

	out->buf = s->buf;
	out->dbrec = s->dbrec;
	out->stride = s->stride;
	out->head = s->head;
	out->tail = s->tail;
	out->comp_mask = 0;
	if (want & MLX5DV_SRQ_MASK_SRQN) {
		out->srqn = s->srqn;
		out->comp_mask |= MLX5DV_SRQ_MASK_SRQN;
	}
	return 0;
}

static int init_obj(struct mlx5dv_obj *obj, uint64_t type, bool compat)
{
	if (type & ~(uint64_t)(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_AH |
			       MLX5DV_OBJ_PD | MLX5DV_OBJ_DM)) {
		/* a model gap: work queues (and the other objects) are not modelled */
		rvxsim_priv_unsupported("mlx5dv_init_obj(RWQ)");
		return EOPNOTSUPP;
	}
	/* the DM's mapping, which the application writes as libmlx5 maps MEMIC into it; no
	 * remote_va (MLX5DV_DM_MASK_REMOTE_VA stays off) */
	if (type & MLX5DV_OBJ_DM) {
		struct sim_dm *dm = (struct sim_dm *)obj->dm.in;
		if (!rvxsim_priv_is_sim(dm->dm.context))
			return EINVAL;
		obj->dm.out->buf = dm->buf;
		obj->dm.out->length = dm->length;
		obj->dm.out->comp_mask = 0;
	}
	if ((type & MLX5DV_OBJ_QP) && (!rvxsim_priv_is_sim(obj->qp.in->context) ||
				       init_qp(obj->qp.in, obj->qp.out)))
		return EINVAL;
	if ((type & MLX5DV_OBJ_CQ) && (!rvxsim_priv_is_sim(obj->cq.in->context) ||
				       init_cq(obj->cq.in, obj->cq.out, compat)))
		return EINVAL;
	if ((type & MLX5DV_OBJ_SRQ) && (!rvxsim_priv_is_sim(obj->srq.in->context) ||
					init_srq(obj->srq.in, obj->srq.out)))
		return EINVAL;
	if (type & MLX5DV_OBJ_AH) {
		obj->ah.out->av = (struct mlx5_wqe_av *)((struct sim_ah *)obj->ah.in)->av;
		obj->ah.out->comp_mask = 0;
	}
	if (type & MLX5DV_OBJ_PD) {
		obj->pd.out->pdn = obj->pd.in->handle;
		obj->pd.out->comp_mask = 0;
	}
	return 0;
}

__asm__(".symver mlx5dv_init_obj_1_2, mlx5dv_init_obj@@MLX5_1.2");
__asm__(".symver mlx5dv_init_obj_1_0, mlx5dv_init_obj@MLX5_1.0");

SIM_EXPORT int mlx5dv_init_obj_1_2(struct mlx5dv_obj *obj, uint64_t type)
{
	return init_obj(obj, type, false);
}

SIM_EXPORT int mlx5dv_init_obj_1_0(struct mlx5dv_obj *obj, uint64_t type)
{
	return init_obj(obj, type, true);
}

/* The ibv_wr_* API when the QP was asked for with send_ops_flags (the QP is destroyed if the
 * model cannot give it, as libmlx5 fails the create). */
static struct ibv_qp *with_wr(struct ibv_qp *qp, struct ibv_qp_init_attr_ex *a)
{
	int err;

	if (!qp || !(a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return qp;
	err = rvxsim_priv_qp_enable_wr(qp, a->send_ops_flags);
	if (err) {
		ibv_destroy_qp(qp);
		errno = err;
		return NULL;
	}
	return qp;
}

/* DCI and DCT, refused where rdma-core 44's create_qp/create_dct or the kernel's
 * process_vendor_flags/check_qp_attr refuse them on a ConnectX-6 (errno as they set it). */
static struct ibv_qp *create_dc(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
				struct mlx5dv_qp_init_attr *m)
{
	const uint64_t known = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_DC |
			       MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS |
			       MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
	const uint32_t scat = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE |
			      MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE;
	uint32_t flags = m->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS ? m->create_flags : 0;
	int type = m->dc_init_attr.dc_type;

	(void)ctx;

	errno = EINVAL;
	if ((m->comp_mask & ~known) || a->qp_type != IBV_QPT_DRIVER ||
	    !(m->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC))
		return NULL;
	if ((flags & scat) == scat)
		return NULL;
	if (flags & ~scat) {
		rvxsim_priv_unsupported("mlx5dv_create_qp(DC create_flags)");
		return NULL;
	}
	if (m->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS) {
		/* mlx5-specific builders (mkeys, memcpy, raw WQEs): none on the model */
		rvxsim_priv_unsupported("mlx5dv_create_qp(mlx5dv send_ops_flags)");
		return NULL;
	}
	if (type == MLX5DV_DCTYPE_DCT) {
		/* create_dct: PD only, no vendor masks but DC and create flags; ALLOW_SCATTER is
		 * not a DCT flag; the kernel wants an SRQ and a receive CQ */
		if ((a->comp_mask & ~(uint32_t)IBV_QP_INIT_ATTR_PD) ||   /* no send_ops_flags either */
		    (m->comp_mask & ~(uint64_t)(MLX5DV_QP_INIT_ATTR_MASK_DC |
						MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS)) ||
		    (flags & MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE) || !a->srq || !a->recv_cq)
			return NULL;
		return rvxsim_priv_create_dc_qp(a->pd, (struct ibv_qp_init_attr *)a, SIM_DCT,
						m->dc_init_attr.dct_access_key);
	}
	if (type != MLX5DV_DCTYPE_DCI)
		return NULL;
	if (m->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS) {
		/* libmlx5 checks against the device's caps (0 and 0), then the kernel refuses the
		 * stream flag on a device without DCI stream channels */
		if (m->dc_init_attr.dci_streams.log_num_concurent ||
		    m->dc_init_attr.dci_streams.log_num_errored)
			return NULL;
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->cap.max_recv_wr || a->cap.max_recv_sge)     /* check_qp_attr: send only */
		return NULL;
	return rvxsim_priv_create_dc_qp(a->pd, (struct ibv_qp_init_attr *)a, SIM_DCI, 0);
}

SIM_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
					   struct mlx5dv_qp_init_attr *m)
{
	uint32_t flags = 0;

	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		rvxsim_priv_unsupported("mlx5dv_create_qp(ibv_qp_init_attr_ex comp_mask beyond PD and "
					"send_ops_flags)");
		return NULL;
	}
	if (m && (m->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC || a->qp_type == IBV_QPT_DRIVER))
		return with_wr(create_dc(ctx, a, m), a);
	/* rule: a DRIVER QP is a DC QP and needs mlx5dv's DC attributes (libmlx5 create_qp) */
	if (!m && a->qp_type == IBV_QPT_DRIVER) {
		errno = EINVAL;
		return NULL;
	}
	if (m) {
		if (m->comp_mask & ~(uint64_t)MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) {
			rvxsim_priv_unsupported("mlx5dv_create_qp(mlx5dv comp_mask)");
			return NULL;
		}
		if (m->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) {
			flags = m->create_flags;
			if (flags & ~(uint32_t)(MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE |
						MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE)) {
				rvxsim_priv_unsupported("mlx5dv_create_qp(create_flags)");
				return NULL;
			}
		}
	}
	/* ibv_qp_init_attr_ex begins with the fields of ibv_qp_init_attr */
	return with_wr(rvxsim_priv_create_qp(a->pd, (struct ibv_qp_init_attr *)a, flags), a);
}

SIM_EXPORT struct ibv_cq_ex *mlx5dv_create_cq(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a,
					      struct mlx5dv_cq_init_attr *m)
{
	int size = 0;

	if (m) {
		if (m->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE) {
			rvxsim_priv_unsupported("mlx5dv_create_cq(compressed CQE)");
			return NULL;
		}
		if (m->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_FLAGS) {
			rvxsim_priv_unsupported("mlx5dv_create_cq(flags)");
			return NULL;
		}
		if (m->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE) {
			/* rule: a CQE is 64 or 128 bytes (libmlx5 mlx5dv_create_cq) */
			if (m->cqe_size != 64 && m->cqe_size != 128) {
				errno = EINVAL;
				return NULL;
			}
			size = m->cqe_size;
		}
	}
	if (!size && (size = rvxsim_priv_env_cqe_size()) < 0)
		return NULL;
	return rvxsim_priv_create_cq_ex(ctx, a, (uint32_t)size);
}

/* mlx5dv_query_port: the model's one port is an InfiniBand (or RoCE) port of an adapter without
 * an e-switch in switchdev mode, for which mlx5_ib answers no vport fields: flags 0 [inferred:
 * mlx5_ib fills the vport and steering fields only in switchdev mode]. */
SIM_EXPORT int _mlx5dv_query_port(struct ibv_context *ctx, uint32_t port_num, struct mlx5dv_port *info,
				  size_t info_len)
{
	/* rule: the device has one port (libmlx5 _mlx5dv_query_port asks the kernel) */
	if (!rvxsim_priv_is_sim(ctx) || port_num != 1 || !info)
		return EINVAL;
	memset(info, 0, MIN(info_len, sizeof(*info)));
	return 0;
}

SIM_EXPORT int mlx5dv_set_context_attr(struct ibv_context *ctx, enum mlx5dv_set_ctx_attr_type type,
				       void *attr)
{
	(void)ctx; (void)type; (void)attr;
	return 0;   /* the model has no buffer allocators to replace */
}

SIM_EXPORT int mlx5dv_get_clock_info(struct ibv_context *ctx, struct mlx5dv_clock_info *ci)
{
	(void)ctx; (void)ci;
	rvxsim_priv_unsupported("mlx5dv_get_clock_info");
	return EOPNOTSUPP;
}

SIM_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	return rvxsim_priv_qp_dv(qp);
}
