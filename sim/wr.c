/* rvxsim: the ibv_wr_* send API (ibv_qp_ex, and mlx5dv_qp_ex's wr_set_dc_addr), for QPs created
 * with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS. Work requests are staged between wr_start and wr_complete
 * and then posted as one batch through the same WQE builder as ibv_post_send (one doorbell), which
 * is what libmlx5 does; DCIs, which rdma-core drives only through this API, get the 48-byte address
 * segment mlx5dv_wr_set_dc_addr writes (rdma-core 44 providers/mlx5/qp.c, set_dc_addr). An error
 * while building (a full queue, too many SGEs, inline data too long, an opcode the QP was not
 * created for) is kept and returned by wr_complete, which then posts nothing, as in libmlx5. */
#include "internal.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct wr_slot {
	struct ibv_send_wr wr;
	struct sim_wr_dc dc;
	struct ibv_sge *sge;          /* max_send_sge entries */
	uint8_t *inl;                 /* SIM_MAX_WQE_SIZE bytes of inline data */
};

struct sim_wr_batch {
	uint64_t ops;                 /* the send_ops_flags the QP was created with */
	uint32_t cap, n;
	int err;
	struct wr_slot *slot;
};

static struct sim_qp *qpx_sqp(struct ibv_qp_ex *x)
{
	return (struct sim_qp *)x;    /* ibv_qp_ex begins with the QP's ibv_qp, as sim_qp does */
}

static struct sim_qp *dvx_sqp(struct mlx5dv_qp_ex *m)
{
	return (struct sim_qp *)((char *)m - offsetof(struct sim_qp, dvqpx));
}

static struct wr_slot *cur(struct sim_qp *qp)
{
	struct sim_wr_batch *b = qp->wrb;
	return b->n ? &b->slot[b->n - 1] : NULL;
}

/* A new work request of the given opcode, with the wr_id and flags the caller set on the QP. */
static struct wr_slot *begin(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint64_t flag)
{
	struct sim_qp *qp = qpx_sqp(x);
	struct sim_wr_batch *b = qp->wrb;
	struct wr_slot *s;

	if (b->err)
		return NULL;
	/* an opcode not in send_ops_flags: libmlx5 leaves it out of the QP; never a crash here */
	if (!(b->ops & flag)) {
		sim_unsupported("ibv_wr_* opcode not in the QP's send_ops_flags");
		b->err = EOPNOTSUPP;
		return NULL;
	}
	if (b->n == b->cap) {   /* libmlx5 mlx5_wq_overflow: the SQ is full, ENOMEM */
		b->err = ENOMEM;
		return NULL;
	}
	s = &b->slot[b->n++];
	memset(&s->wr, 0, sizeof(s->wr));
	memset(&s->dc, 0, sizeof(s->dc));
	s->wr.wr_id = x->wr_id;
	s->wr.opcode = op;
	s->wr.send_flags = x->wr_flags;
	return s;
}

static void w_send(struct ibv_qp_ex *x)
{
	begin(x, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void w_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct wr_slot *s = begin(x, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);
	if (s)
		s->wr.imm_data = imm;
}

static void rdma(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint64_t flag, uint32_t rkey,
		 uint64_t raddr, __be32 imm)
{
	struct wr_slot *s = begin(x, op, flag);
	if (s) {
		s->wr.wr.rdma.rkey = rkey;
		s->wr.wr.rdma.remote_addr = raddr;
		s->wr.imm_data = imm;
	}
}

static void w_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
	rdma(x, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, rkey, raddr, 0);
}

static void w_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

static void w_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
	rdma(x, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, rkey, raddr, 0);
}

static void w_cas(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, uint64_t compare,
		  uint64_t swap)
{
	struct wr_slot *s = begin(x, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
	if (s) {
		s->wr.wr.atomic.rkey = rkey;
		s->wr.wr.atomic.remote_addr = raddr;
		s->wr.wr.atomic.compare_add = compare;
		s->wr.wr.atomic.swap = swap;
	}
}

static void w_fadd(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	struct wr_slot *s = begin(x, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	if (s) {
		s->wr.wr.atomic.rkey = rkey;
		s->wr.wr.atomic.remote_addr = raddr;
		s->wr.wr.atomic.compare_add = add;
	}
}

static void w_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
	struct sim_qp *qp = qpx_sqp(x);
	struct wr_slot *s = cur(qp);

	if (!s || qp->wrb->err)
		return;
	/* libmlx5 _mlx5_send_wr_set_sge_list: more SGEs than max_send_sge, ENOMEM at wr_complete */
	if (n > qp->max_send_sge) {
		qp->wrb->err = ENOMEM;
		return;
	}
	memcpy(s->sge, sg, n * sizeof(*sg));
	s->wr.sg_list = s->sge;
	s->wr.num_sge = (int)n;
}

static void w_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct ibv_sge sg = { .addr = addr, .length = len, .lkey = lkey };
	w_sge_list(x, 1, &sg);
}

/* Inline data is copied now: the caller may reuse its buffer before wr_complete. */
static void w_inline_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *buf)
{
	struct sim_qp *qp = qpx_sqp(x);
	struct wr_slot *s = cur(qp);
	size_t len = 0;

	if (!s || qp->wrb->err)
		return;
	for (size_t i = 0; i < n; i++) {
		if (buf[i].length > SIM_MAX_WQE_SIZE - len) {
			qp->wrb->err = ENOMEM;
			return;
		}
		memcpy(s->inl + len, buf[i].addr, buf[i].length);
		len += buf[i].length;
	}
	s->sge[0] = (struct ibv_sge){ .addr = (uintptr_t)s->inl, .length = (uint32_t)len };
	s->wr.sg_list = s->sge;
	s->wr.num_sge = 1;
	s->wr.send_flags |= IBV_SEND_INLINE;
}

static void w_inline(struct ibv_qp_ex *x, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };
	w_inline_list(x, 1, &b);
}

static void w_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct wr_slot *s = cur(qpx_sqp(x));

	if (s) {
		s->wr.wr.ud.ah = ah;
		s->wr.wr.ud.remote_qpn = qpn;
		s->wr.wr.ud.remote_qkey = qkey;
	}
}

static void w_dc_addr(struct mlx5dv_qp_ex *m, struct ibv_ah *ah, uint32_t dctn, uint64_t key)
{
	struct wr_slot *s = cur(dvx_sqp(m));

	if (s) {
		s->dc.ah = ah;
		s->dc.dctn = dctn;
		s->dc.key = key;
	}
}

/* A DCI created without streams ignores the stream id [inferred: libmlx5 writes it into the
 * control segment's dci_stream_channel_id whatever the DCI, and perftest 4.5 sets it on every DC
 * WQE and runs on a ConnectX-6, whose log_max_dci_stream_channels is 0]. */
static void w_dc_addr_stream(struct mlx5dv_qp_ex *m, struct ibv_ah *ah, uint32_t dctn, uint64_t key,
			     uint16_t stream)
{
	(void)stream;
	w_dc_addr(m, ah, dctn, key);
}

static void w_start(struct ibv_qp_ex *x)
{
	struct sim_wr_batch *b = qpx_sqp(x)->wrb;

	b->n = 0;
	b->err = 0;
}

static int w_complete(struct ibv_qp_ex *x)
{
	struct sim_qp *qp = qpx_sqp(x);
	struct sim_wr_batch *b = qp->wrb;
	struct ibv_send_wr *bad = NULL;
	int err = b->err;

	/* libmlx5 mlx5_send_wr_complete_error (providers/mlx5/qp.c): wr_complete before RTS, EINVAL */
	if (!err && (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT ||
		     qp->state == IBV_QPS_RTR))
		err = EINVAL;
	if (!err && b->n) {
		for (uint32_t i = 0; i < b->n; i++) {
			b->slot[i].wr.next = i + 1 < b->n ? &b->slot[i + 1].wr : NULL;
			qp->wr_dc[i] = b->slot[i].dc;
		}
		err = sim_post_send(qp, &b->slot[0].wr, &bad, qp->dc_type ? qp->wr_dc : NULL);
	}
	b->n = 0;
	b->err = 0;
	return err;
}

static void w_abort(struct ibv_qp_ex *x)
{
	w_start(x);
}

/* Operations the model does not have (TSO, atomic write):
 * the QP cannot have been created with them, so the batch fails as one with a wrong opcode. */
static void refuse(struct ibv_qp_ex *x, const char *what)
{
	struct sim_wr_batch *b = qpx_sqp(x)->wrb;

	sim_unsupported(what);
	if (!b->err)
		b->err = EOPNOTSUPP;
}

/* A window's bind with the key variant the caller chose (libmlx5 mlx5_send_wr_bind_mw: the
 * window's rkey is left as it was). */
static void w_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *bi)
{
	struct wr_slot *s = begin(x, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW);
	if (s) {
		s->wr.bind_mw.mw = mw;
		s->wr.bind_mw.rkey = rkey;
		s->wr.bind_mw.bind_info = *bi;
	}
}

static void w_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct wr_slot *s = begin(x, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV);
	if (s)
		s->wr.invalidate_rkey = rkey;
}

static void w_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct wr_slot *s = begin(x, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV);
	if (s)
		s->wr.invalidate_rkey = rkey;
}

static void w_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t sz, uint16_t mss)
{
	(void)hdr; (void)sz; (void)mss;
	refuse(x, "ibv_wr_send_tso");
}

/* The SRQ the current work request delivers to (libmlx5 mlx5_send_wr_set_xrc_srqn writes it
 * into the WQE's XRC segment, built by sim_post_send). */
static void w_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	struct wr_slot *s = qpx_sqp(x)->wrb->err ? NULL : cur(qpx_sqp(x));
	if (s)
		s->wr.qp_type.xrc.remote_srqn = srqn;
}

static void w_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, const void *v)
{
	(void)rkey; (void)raddr; (void)v;
	refuse(x, "ibv_wr_atomic_write");
}

/* The operations libmlx5 accepts per QP type on a ConnectX-6 that the model executes
 * (rdma-core 44 providers/mlx5/qp.c, MLX5_SUPPORTED_SEND_OPS_FLAGS_*: UD sends only, UC no READ
 * or atomics; memory windows and invalidation on connected QPs, not modelled on a DCI or an XRC
 * initiator). */
static uint64_t ops_allowed(const struct sim_qp *qp)
{
	uint64_t send = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	uint64_t write = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	uint64_t mw = IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW;
	uint64_t rc = send | write | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

	if (qp->type == IBV_QPT_UD)
		return send;
	if (qp->type == IBV_QPT_UC)
		return send | write | mw;
	if (qp->type == IBV_QPT_XRC_RECV)
		return 0;
	return qp->dc_type || qp->type == IBV_QPT_XRC_SEND ? rc : rc | mw;
}

int sim_wr_init(struct sim_qp *qp, uint64_t ops)
{
	struct ibv_qp_ex *x = &qp->qpx;
	struct sim_wr_batch *b;
	uint32_t cap = MAX(qp->max_send_wr, 1u);
	size_t per = sizeof(struct ibv_sge) * MAX(qp->max_send_sge, 1u) + SIM_MAX_WQE_SIZE;

	if (qp->dc_type == SIM_DCT || (ops & ~ops_allowed(qp))) {
		sim_unsupported("send_ops_flags beyond what the model executes for this QP type");
		return EOPNOTSUPP;
	}
	b = calloc(1, sizeof(*b));
	if (b)
		b->slot = calloc(cap, sizeof(*b->slot));
	qp->wr_dc = calloc(cap, sizeof(*qp->wr_dc));
	qp->wr_mem = calloc(cap, per);
	if (!b || !b->slot || !qp->wr_dc || !qp->wr_mem) {
		if (b)
			free(b->slot);
		free(b);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++) {
		b->slot[i].sge = (struct ibv_sge *)(qp->wr_mem + i * per);
		b->slot[i].inl = qp->wr_mem + i * per + per - SIM_MAX_WQE_SIZE;
	}
	b->cap = cap;
	b->ops = ops;
	qp->wrb = b;
	qp->model_bytes += sizeof(*b) + cap * (sizeof(*b->slot) + sizeof(*qp->wr_dc) + per);
	x->wr_atomic_cmp_swp = w_cas;
	x->wr_atomic_fetch_add = w_fadd;
	x->wr_bind_mw = w_bind_mw;
	x->wr_local_inv = w_local_inv;
	x->wr_rdma_read = w_read;
	x->wr_rdma_write = w_write;
	x->wr_rdma_write_imm = w_write_imm;
	x->wr_send = w_send;
	x->wr_send_imm = w_send_imm;
	x->wr_send_inv = w_send_inv;
	x->wr_send_tso = w_send_tso;
	x->wr_set_ud_addr = w_ud_addr;
	x->wr_set_xrc_srqn = w_xrc_srqn;
	x->wr_set_inline_data = w_inline;
	x->wr_set_inline_data_list = w_inline_list;
	x->wr_set_sge = w_sge;
	x->wr_set_sge_list = w_sge_list;
	x->wr_start = w_start;
	x->wr_complete = w_complete;
	x->wr_abort = w_abort;
	x->wr_atomic_write = w_atomic_write;
	if (qp->dc_type == SIM_DCI) {
		qp->dvqpx.wr_set_dc_addr = w_dc_addr;
		qp->dvqpx.wr_set_dc_addr_stream = w_dc_addr_stream;
	}
	return 0;
}

void sim_wr_free(struct sim_qp *qp)
{
	if (qp->wrb)
		free(qp->wrb->slot);
	free(qp->wrb);
	free(qp->wr_dc);
	free(qp->wr_mem);
	qp->wrb = NULL;
}
