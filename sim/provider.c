/* rvxsim: the userspace provider, what libmlx5 does in the application's process: the ops
 * table's post_send/post_recv/post_srq_recv build real mlx5 WQEs and ring the doorbell, and
 * poll_cq decodes real CQEs, so the verbs path drives the same engine as a direct user. */
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

/* ------------------------------------------------------------------ posting */

int post_send_op(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sim_qp *qp = to_sqp(ibqp);

	if (qp->dc_type) {     /* libmlx5 sends through a DCI with ibv_wr_* and mlx5dv_wr_set_dc_addr */
		sim_unsupported("ibv_post_send on a DC QP");
		*bad = wr;
		return EOPNOTSUPP;
	}
	return sim_post_send(qp, wr, bad, NULL);
}

/* A DCI's address segment as mlx5dv_wr_set_dc_addr writes it: the AH's 48-byte address vector
 * with the DCT number (extended form) and the DC access key. */
static void dc_wr_addr(const struct sim_wr_dc *a, uint8_t *seg)
{
	struct mlx5_wqe_datagram_seg *d = (void *)seg;
	const struct sim_ah *ah = (const struct sim_ah *)a->ah;

	memcpy(&d->av, ah->av, sizeof(d->av));
	d->av.dqp_dct = (d->av.dqp_dct & htobe32(0xff000000u)) |
			htobe32(MLX5_EXTENDED_UD_AV | (a->dctn & 0xffffff));
	d->av.key.dc_key = htobe64(a->key);
}

/* The mlx5 opcode (and immediate) for a work request's opcode; EINVAL for one the ops table's
 * post_send does not build. */
static int wr_opcode(const struct ibv_send_wr *wr, uint8_t *opcode, uint32_t *imm)
{
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE: *opcode = MLX5_OPCODE_RDMA_WRITE; break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		*opcode = MLX5_OPCODE_RDMA_WRITE_IMM;
		*imm = wr->imm_data;
		break;
	case IBV_WR_SEND: *opcode = MLX5_OPCODE_SEND; break;
	case IBV_WR_SEND_WITH_IMM: *opcode = MLX5_OPCODE_SEND_IMM; *imm = wr->imm_data; break;
	case IBV_WR_RDMA_READ: *opcode = MLX5_OPCODE_RDMA_READ; break;
	case IBV_WR_ATOMIC_CMP_AND_SWP: *opcode = MLX5_OPCODE_ATOMIC_CS; break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: *opcode = MLX5_OPCODE_ATOMIC_FA; break;
	case IBV_WR_SEND_WITH_INV:
		*opcode = MLX5_OPCODE_SEND_INVAL;
		*imm = htobe32(wr->invalidate_rkey);
		break;
	case IBV_WR_BIND_MW:
		*opcode = MLX5_OPCODE_UMR;
		*imm = htobe32(wr->bind_mw.mw->rkey);
		break;
	case IBV_WR_LOCAL_INV:
		*opcode = MLX5_OPCODE_UMR;
		*imm = htobe32(wr->invalidate_rkey);
		break;
	default:    /* a model gap: libmlx5 also builds TSO */
		return EINVAL;
	}
	return 0;
}

/* A memory window's bind (IBV_WR_BIND_MW) or a local invalidation (IBV_WR_LOCAL_INV, a type 2
 * unbind of key 0) as libmlx5's set_bind_wr writes it: the UMR control segment, the mkey
 * context, and for a bind one KLM padded to 64 bytes. Connected QPs only; EOPNOTSUPP past 2 GiB
 * (a KLM's limit). */
static int wqe_umr(struct sim_qp *qp, const struct ibv_send_wr *wr, uint8_t *w, uint32_t *off)
{
	static const struct ibv_mw_bind_info none;
	bool bind = wr->opcode == IBV_WR_BIND_MW;
	const struct ibv_mw_bind_info *bi = bind ? &wr->bind_mw.bind_info : &none;
	bool type2 = !bind || wr->bind_mw.mw->type == IBV_MW_TYPE_2;
	uint32_t rkey = bind ? wr->bind_mw.rkey : 0;
	struct mlx5_wqe_umr_ctrl_seg *c = (void *)(w + *off);
	struct mlx5_wqe_mkey_context_seg *k = (void *)(w + *off + 48);
	uint64_t mask = MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY;

	if (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC)
		return EINVAL;
	if (bi->length > 1ul << 31)
		return EOPNOTSUPP;
	memset(c, 0, 48 + 64);
	c->flags = MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET | MLX5_WQE_UMR_CTRL_FLAG_INLINE;
	if (type2)
		mask |= MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN;
	if (bi->length) {
		c->klm_octowords = htobe16(2);
		if (type2)
			c->flags |= MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE;
		mask |= MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;
	} else if (type2) {
		c->flags |= MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN;
	}
	c->mkey_mask = htobe64(mask);
	k->qpn_mkey = htobe32((rkey & 0xff) | (!type2 || !bi->length ? 0xffffff00u : qp->qpn << 8));
	if (bi->length) {
		struct mlx5_wqe_umr_klm_seg *m = (void *)(w + *off + 48 + 64);
		int a = bi->mw_access_flags;
		k->access_flags = ((a & IBV_ACCESS_LOCAL_WRITE) ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE : 0) |
				  ((a & IBV_ACCESS_REMOTE_WRITE) ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE : 0) |
				  ((a & IBV_ACCESS_REMOTE_READ) ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ : 0) |
				  ((a & IBV_ACCESS_REMOTE_ATOMIC) ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC : 0);
		k->start_addr = htobe64(bi->addr);
		k->len = htobe64(bi->length);
		memset(m, 0, 64);
		m->byte_count = htobe32((uint32_t)bi->length);
		m->mkey = htobe32(bi->mr->lkey);
		m->address = htobe64(bi->addr);
		*off += 48 + 64 + 64;
	} else {
		k->free = MLX5_WQE_MKEY_CONTEXT_FREE;
		*off += 48 + 64;
	}
	return 0;
}

/* UD: the datagram segment; DCI: the address segment (EINVAL without one). */
static int wqe_addr(struct sim_qp *qp, const struct ibv_send_wr *wr, uint8_t opcode,
		    const struct sim_wr_dc *dc, uint8_t *w, uint32_t *off)
{
	if (qp->type == IBV_QPT_UD) {
		if (opcode != MLX5_OPCODE_SEND && opcode != MLX5_OPCODE_SEND_IMM)
			return EINVAL;  /* UD sends only (IB spec UD service; libmlx5 post_send) */
		sim_ud_wr_dgram(wr, w + *off);
		*off += 48;
	} else if (qp->dc_type == SIM_DCI) {
		if (!dc || !dc->ah)
			return EINVAL;  /* a DCI WR names its target (mlx5dv_wr_set_dc_addr) */
		dc_wr_addr(dc, w + *off);
		*off += 48;
	}
	return 0;
}

/* RDMA and atomics: the remote address segment, and an atomic's operand segment. On UC only
 * the WRITEs get one: libmlx5 (_mlx5_post_send) builds a READ or an atomic there as its ctrl and
 * data segments alone, and the adapter refuses the WQE. */
static int wqe_remote(const struct sim_qp *qp, const struct ibv_send_wr *wr, uint8_t opcode,
		      uint8_t *w, uint32_t *off)
{
	struct mlx5_wqe_raddr_seg *r = (void *)(w + *off);
	bool atomic = opcode == MLX5_OPCODE_ATOMIC_CS || opcode == MLX5_OPCODE_ATOMIC_FA;

	if (qp->type == IBV_QPT_UC && (atomic || opcode == MLX5_OPCODE_RDMA_READ))
		return 0;
	if (!atomic && opcode != MLX5_OPCODE_RDMA_WRITE && opcode != MLX5_OPCODE_RDMA_WRITE_IMM &&
	    opcode != MLX5_OPCODE_RDMA_READ)
		return 0;
	r->raddr = htobe64(atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr);
	r->rkey = htobe32(atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey);
	r->reserved = 0;
	*off += 16;
	if (atomic) {
		struct mlx5_wqe_atomic_seg *as = (void *)(w + *off);
		if (opcode == MLX5_OPCODE_ATOMIC_CS) {
			as->swap_add = htobe64(wr->wr.atomic.swap);
			as->compare = htobe64(wr->wr.atomic.compare_add);
		} else {
			as->swap_add = htobe64(wr->wr.atomic.compare_add);
			as->compare = 0;
		}
		*off += 16;
		/* one 8-byte result SGE, not inline (facts section 2); [inferred] errno */
		if (wr->num_sge != 1 || wr->sg_list[0].length != 8 ||
		    (wr->send_flags & IBV_SEND_INLINE))
			return EINVAL;
	}
	return 0;
}

/* The data: one inline segment (ENOMEM over the inline limit) or a data segment per SGE. */
static int wqe_data(struct sim_qp *qp, const struct ibv_send_wr *wr, uint8_t opcode, uint8_t *w,
		    uint32_t *off, bool *is_inline)
{
	if ((wr->send_flags & IBV_SEND_INLINE) && opcode != MLX5_OPCODE_RDMA_READ) {
		uint32_t len = 0;
		uint8_t *p = w + *off + 4;
		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		/* libmlx5 set_data_inl_seg: over max_inline_data ENOMEM (a DCI: the WQE size) */
		if (len > (qp->dc_type == SIM_DCI ? SIM_MAX_WQE_SIZE - *off - 4 : qp->max_inline))
			return ENOMEM;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			p += wr->sg_list[i].length;
		}
		if (len) {
			struct mlx5_wqe_inl_data_seg *is = (void *)(w + *off);
			is->byte_count = htobe32(len | MLX5_INLINE_SEG);
			uint32_t seg = ALIGN_UP(4 + len, 16);
			memset(w + *off + 4 + len, 0, seg - 4 - len);
			*off += seg;
		}
		*is_inline = true;
	} else {
		for (int i = 0; i < wr->num_sge; i++) {
			struct mlx5_wqe_data_seg *d = (void *)(w + *off);
			if (!wr->sg_list[i].length)
				continue;
			d->byte_count = htobe32(wr->sg_list[i].length);
			d->lkey = htobe32(wr->sg_list[i].lkey);
			d->addr = htobe64(wr->sg_list[i].addr);
			*off += 16;
		}
	}
	return 0;
}

/* The WQE built in w (off bytes) into the ring at the software producer index, with its ctrl
 * segment; ENOMEM when the ring has no room for it. */
static int wqe_post(struct sim_qp *qp, const struct ibv_send_wr *wr, uint8_t opcode, uint32_t imm,
		    uint8_t *w, uint32_t off)
{
	uint32_t mask = qp->sq_wqe_cnt - 1, ds = off / 16, bbs = (off + 63) / 64;
	uint8_t fm_ce_se = 0;

	if (qp->sw_sq_pi + bbs - qp->sw_sq_tail > qp->sq_wqe_cnt)
		return ENOMEM;  /* libmlx5 mlx5_wq_overflow: the SQ is full */
	if ((wr->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
		fm_ce_se |= MLX5_WQE_CTRL_CQ_UPDATE;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		fm_ce_se |= MLX5_WQE_CTRL_SOLICITED;
	/* the WQE after a UMR waits for it (libmlx5's next_fence, a small fence) */
	if (wr->send_flags & IBV_SEND_FENCE)
		fm_ce_se |= MLX5_WQE_CTRL_FENCE;
	else
		fm_ce_se |= qp->next_fence;
	qp->next_fence = opcode == MLX5_OPCODE_UMR ? MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE : 0;
	mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, qp->sw_sq_pi & 0xffff, opcode, 0,
			    qp->qpn, fm_ce_se, ds, 0, imm);
	/* copy WQEBB by WQEBB: a WQE that reaches the end continues at the start */
	for (uint32_t b = 0; b < bbs; b++) {
		uint32_t n = MIN(64u, off - b * 64);
		memcpy(qp->sq_buf + (((qp->sw_sq_pi + b) & mask) << 6), w + b * 64, n);
	}
	qp->sq_wrid[qp->sw_sq_pi & mask] = wr->wr_id;
	qp->sq_bbs[qp->sw_sq_pi & mask] = bbs;
	if (opcode == MLX5_OPCODE_UMR)
		qp->sq_wc_op[qp->sw_sq_pi & mask] = wr->opcode == IBV_WR_BIND_MW ? IBV_WC_BIND_MW :
						    IBV_WC_LOCAL_INV;
	return 0;
}

/* The doorbell record, then the doorbell register: the last WQE's first 8 bytes, or (one small
 * inline WQE) the whole WQE by BlueFlame. */
static void ring_doorbell(struct sim_qp *qp, int nreq, uint32_t last_pi, uint32_t last_ds,
			  bool last_inline)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;
	uint8_t *ctrl = qp->sq_buf + ((last_pi & mask) << 6);
	uint8_t *reg = qp->bf + qp->sw_bf_off;

	atomic_thread_fence(memory_order_release);
	qp->dbrec[MLX5_SND_DBR] = htobe32(qp->sw_sq_pi & 0xffff);
	atomic_thread_fence(memory_order_seq_cst);
	if (nreq == 1 && last_inline && last_ds > 1 && last_ds <= SIM_BF_SIZE / 16) {
		/* BlueFlame: the whole WQE, 64 bytes at a time in ascending 8-byte stores */
		uint32_t len = ALIGN_UP(last_ds * 16, 64);
		for (uint32_t o = 0; o < len; o += 8) {
			uint8_t *src = qp->sq_buf + (((last_pi + o / 64) & mask) << 6) + o % 64;
			*(volatile uint64_t *)(reg + o) = *(uint64_t *)src;
		}
	} else {
		*(volatile uint64_t *)reg = *(uint64_t *)ctrl;
	}
	atomic_thread_fence(memory_order_seq_cst);
	qp->sw_bf_off ^= SIM_BF_SIZE;
}

/* Builds one mlx5 WQE per work request, as libmlx5 does, then rings the doorbell. */
int sim_post_send(struct sim_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad,
		  const struct sim_wr_dc *dc)
{
	uint8_t w[SIM_MAX_WQE_SIZE];
	int nreq = 0, err = 0;
	uint32_t last_ds = 0, last_pi = 0;
	bool last_inline = false;

	pthread_spin_lock(&qp->sq_lock);
	for (; wr; wr = wr->next, nreq++) {
		uint8_t opcode;
		uint32_t off = 16, imm = 0;
		bool is_inline = false;

		err = wr_opcode(wr, &opcode, &imm);
		/* libmlx5 _mlx5_post_send (providers/mlx5/qp.c): before RTS the SQ's SGE limit is -1
		 * (set_qp_operational_state), so a QP not yet in RTS and too many SGEs: ENOMEM */
		if (!err && (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT ||
			     qp->state == IBV_QPS_RTR || wr->num_sge < 0 ||
			     (uint32_t)wr->num_sge > qp->max_send_sge))
			err = ENOMEM;
		if (!err) {
			memset(w, 0, 48);
			err = wqe_addr(qp, wr, opcode, dc ? &dc[nreq] : NULL, w, &off);
		}
		/* an XRC initiator's WQE names the SRQ it delivers to: the XRC segment after ctrl,
		 * on every WQE but a bind or local invalidation (libmlx5 _mlx5_post_send) */
		if (!err && qp->type == IBV_QPT_XRC_SEND && opcode != MLX5_OPCODE_UMR) {
			struct sim_xrc_seg *x = (void *)(w + off);
			memset(x, 0, sizeof(*x));
			x->xrc_srqn = htobe32(wr->qp_type.xrc.remote_srqn);
			off += sizeof(*x);
		}
		if (!err && opcode == MLX5_OPCODE_UMR)
			err = wqe_umr(qp, wr, w, &off);
		else if (!err)
			err = wqe_remote(qp, wr, opcode, w, &off);
		if (!err && opcode != MLX5_OPCODE_UMR)
			err = wqe_data(qp, wr, opcode, w, &off, &is_inline);
		if (!err)
			err = wqe_post(qp, wr, opcode, imm, w, off);
		if (err) {
			*bad = wr;
			goto out;
		}
		last_pi = qp->sw_sq_pi;
		last_ds = off / 16;
		last_inline = is_inline;
		qp->sw_sq_pi += (off + 63) / 64;
	}
out:
	if (nreq)
		ring_doorbell(qp, nreq, last_pi, last_ds, last_inline);
	pthread_spin_unlock(&qp->sq_lock);
	if (nreq)
		engine_progress(qp->sc);
	return err;
}

static void write_recv_segs(uint8_t *wqe, uint32_t max, struct ibv_recv_wr *wr)
{
	struct mlx5_wqe_data_seg *d = (void *)wqe;
	uint32_t j = 0;

	for (int i = 0; i < wr->num_sge; i++) {
		if (!wr->sg_list[i].length)
			continue;
		mlx5dv_set_data_seg(&d[j++], wr->sg_list[i].length, wr->sg_list[i].lkey,
				    wr->sg_list[i].addr);
	}
	if (j < max) {
		d[j].byte_count = 0;
		d[j].lkey = htobe32(MLX5_INVALID_LKEY);
		d[j].addr = 0;
	}
}

int post_recv_op(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sim_qp *qp = to_sqp(ibqp);
	int err = 0, n = 0;

	/* a QP on an SRQ has an RQ of 0 WQEs: libmlx5 mlx5_post_recv finds it full (ENOMEM) */
	if (qp->srq) {
		*bad = wr;
		return ENOMEM;
	}
	/* a QP in RESET takes no receive (libmlx5 mlx5_post_recv: the RQ's SGE limit is -1 until
	 * INIT; rdma-core's tests, post_rq_state_bad_flow, expect EINVAL); from INIT on it does */
	if (qp->state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->rq_lock);
	for (; wr; wr = wr->next, n++) {
		uint32_t slot;
		/* libmlx5 mlx5_post_recv: a full RQ (mlx5_wq_overflow) ENOMEM, then SGEs EINVAL */
		if (qp->sw_rq_head - qp->sw_rq_tail >= qp->rq_wqe_cnt) {
			err = ENOMEM;
			*bad = wr;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_recv_sge) {
			err = EINVAL;
			*bad = wr;
			break;
		}
		slot = qp->sw_rq_head & (qp->rq_wqe_cnt - 1);
		write_recv_segs(qp->rq_buf + (size_t)slot * qp->rq_stride, qp->rq_stride / 16, wr);
		qp->rq_wrid[slot] = wr->wr_id;
		qp->sw_rq_head++;
	}
	if (n) {
		atomic_thread_fence(memory_order_release);
		qp->dbrec[MLX5_RCV_DBR] = htobe32(qp->sw_rq_head & 0xffff);
	}
	pthread_spin_unlock(&qp->rq_lock);
	return err;
}

int post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sim_srq *s = to_ssrq(srq);
	int err = 0, n = 0;

	pthread_spin_lock(&s->lock);
	for (; wr; wr = wr->next, n++) {
		uint8_t *wqe;
		struct mlx5_wqe_srq_next_seg *next;
		/* libmlx5 mlx5_post_srq_recv (srq.c): too many SGEs EINVAL, no free WQE ENOMEM */
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->max_gs) {
			err = EINVAL;
			*bad = wr;
			break;
		}
		if (s->head == s->tail) {
			err = ENOMEM;   /* the last free WQE links the list; it is never used */
			*bad = wr;
			break;
		}
		wqe = s->buf + (size_t)s->head * s->stride;
		next = (void *)wqe;
		s->wrid[s->head] = wr->wr_id;
		write_recv_segs(wqe + 16, s->max_gs, wr);
		s->head = be16toh(next->next_wqe_index);
		s->counter++;
	}
	if (n) {
		atomic_thread_fence(memory_order_release);
		*s->dbrec = htobe32(s->counter);
	}
	pthread_spin_unlock(&s->lock);
	return err;
}

/* ------------------------------------------------------------------ poll CQ */

static enum ibv_wc_status synd_to_status(uint8_t s)
{
	switch (s) {
	case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: return IBV_WC_LOC_LEN_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: return IBV_WC_LOC_QP_OP_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: return IBV_WC_LOC_PROT_ERR;
	case MLX5_CQE_SYNDROME_WR_FLUSH_ERR: return IBV_WC_WR_FLUSH_ERR;
	case MLX5_CQE_SYNDROME_MW_BIND_ERR: return IBV_WC_MW_BIND_ERR;
	case MLX5_CQE_SYNDROME_BAD_RESP_ERR: return IBV_WC_BAD_RESP_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: return IBV_WC_LOC_ACCESS_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR: return IBV_WC_REM_INV_REQ_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: return IBV_WC_REM_ACCESS_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_OP_ERR: return IBV_WC_REM_OP_ERR;
	case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: return IBV_WC_RETRY_EXC_ERR;
	case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: return IBV_WC_RNR_RETRY_EXC_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR: return IBV_WC_REM_ABORT_ERR;
	default: return IBV_WC_GENERAL_ERR;
	}
}

static void sq_complete(struct sim_qp *qp, uint16_t idx, struct ibv_wc *wc)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;
	uint32_t start = qp->sw_sq_tail + (uint16_t)(idx - (uint16_t)qp->sw_sq_tail);

	wc->wr_id = qp->sq_wrid[start & mask];
	qp->sw_sq_tail = start + qp->sq_bbs[start & mask];
}

static bool rq_complete(struct sim_qp *qp, struct sim_srq *s, uint16_t wqe_counter,
			struct ibv_wc *wc);

static struct mlx5_cqe64 *cqe64_at(struct sim_cq *cq, uint32_t i)
{
	return (void *)(cq->buf + (size_t)(i & (cq->cqe_cnt - 1)) * cq->cqe_size +
			(cq->cqe_size == 128 ? 64 : 0));
}

static bool cqe_ready(struct sim_cq *cq, uint32_t i)
{
	uint8_t op_own = *(volatile uint8_t *)&cqe64_at(cq, i)->op_own;
	return (op_own >> 4) != MLX5_CQE_INVALID &&
	       (op_own & MLX5_CQE_OWNER_MASK) == !!(i & cq->cqe_cnt);
}

/* A QP moved to RESET leaves no completion behind: libmlx5's modify_qp cleans its CQEs out of
 * the CQs it polls (mlx5_cq_clean: the later entries move up over them, the consumer index moves
 * past them, an SRQ gets its WQEs back), so a QP brought up again does not meet completions of
 * work from before. Not for a CQ whose buffer mlx5dv_init_obj gave out: its owner keeps the
 * consumer index, and cleaning it is the owner's business. */
void cq_clean(struct sim_cq *cq, struct sim_qp *qp)
{
	uint32_t end, i, freed = 0;

	if (!cq || cq->direct)
		return;
	pthread_spin_lock(&cq->poll_lock);
	for (end = cq->cons_index; cqe_ready(cq, end) && end - cq->cons_index < cq->cqe_cnt; end++)
		;
	atomic_thread_fence(memory_order_acquire);
	for (i = end; i-- != cq->cons_index;) {
		struct mlx5_cqe64 *c = cqe64_at(cq, i);
		if ((be32toh(c->sop_drop_qpn) & 0xffffff) == qp->qpn) {
			uint8_t op = c->op_own >> 4;
			if (qp->srq && (op == MLX5_CQE_RESP_SEND || op == MLX5_CQE_RESP_SEND_IMM ||
					op == MLX5_CQE_RESP_SEND_INV ||
					op == MLX5_CQE_RESP_WR_IMM || op == MLX5_CQE_RESP_ERR)) {
				struct ibv_wc w;
				rq_complete(qp, qp->srq, be16toh(c->wqe_counter), &w);
			}
			freed++;
		} else if (freed) {
			uint8_t *src = (uint8_t *)c - (cq->cqe_size == 128 ? 64 : 0);
			struct mlx5_cqe64 *d = cqe64_at(cq, i + freed);
			uint8_t owner = d->op_own & MLX5_CQE_OWNER_MASK;
			memcpy((uint8_t *)d - (cq->cqe_size == 128 ? 64 : 0), src, cq->cqe_size);
			d->op_own = (uint8_t)((d->op_own & ~MLX5_CQE_OWNER_MASK) | owner);
		}
	}
	if (freed) {
		cq->cons_index += freed;
		atomic_thread_fence(memory_order_release);
		cq->dbrec[0] = htobe32(cq->cons_index & 0xffffff);
	}
	pthread_spin_unlock(&cq->poll_lock);
}

/* The SRQ a receive CQE retires a WQE of: the QP's, or for an XRC target the one the CQE names
 * (libmlx5 finds it by the CQE's srqn). */
static struct sim_srq *cqe_srq(struct sim_qp *qp, const struct mlx5_cqe64 *c)
{
	if (qp->type == IBV_QPT_XRC_RECV)
		return sim_srq_lookup(qp->sc, be32toh(c->srqn_uidx) & 0xffffff);
	return qp->srq;
}

static bool rq_complete(struct sim_qp *qp, struct sim_srq *s, uint16_t wqe_counter,
			struct ibv_wc *wc)
{
	if (s) {
		uint32_t idx = wqe_counter & (s->wqe_cnt - 1);
		pthread_spin_lock(&s->lock);
		wc->wr_id = s->wrid[idx];
		struct mlx5_wqe_srq_next_seg *t = (void *)(s->buf + (size_t)s->tail * s->stride);
		t->next_wqe_index = htobe16(idx);
		s->tail = idx;
		pthread_spin_unlock(&s->lock);
		return true;
	}
	if (!qp->rq_wqe_cnt)
		return false;
	wc->wr_id = qp->rq_wrid[qp->sw_rq_tail & (qp->rq_wqe_cnt - 1)];
	qp->sw_rq_tail++;
	return true;
}

/* A requester CQE's work completion opcode (and length for READs and atomics); a UMR's is the
 * one its post recorded (bind or local invalidation), as libmlx5's wr_data. */
static void wc_req_opcode(const struct sim_qp *qp, const struct mlx5_cqe64 *c, struct ibv_wc *w)
{
	switch (be32toh(c->sop_drop_qpn) >> 24) {
	case MLX5_OPCODE_UMR:
		w->opcode = qp->sq_wc_op[be16toh(c->wqe_counter) & (qp->sq_wqe_cnt - 1)];
		break;
	case MLX5_OPCODE_RDMA_WRITE:
	case MLX5_OPCODE_RDMA_WRITE_IMM:
		w->opcode = IBV_WC_RDMA_WRITE;
		break;
	case MLX5_OPCODE_RDMA_READ:
		w->opcode = IBV_WC_RDMA_READ;
		w->byte_len = be32toh(c->byte_cnt);
		break;
	case MLX5_OPCODE_ATOMIC_CS:
		w->opcode = IBV_WC_COMP_SWAP;
		w->byte_len = 8;
		break;
	case MLX5_OPCODE_ATOMIC_FA:
		w->opcode = IBV_WC_FETCH_ADD;
		w->byte_len = 8;
		break;
	case MLX5_OPCODE_ATOMIC_MASKED_CS:
		w->opcode = IBV_WC_COMP_SWAP;
		w->byte_len = 8;
		break;
	case MLX5_OPCODE_ATOMIC_MASKED_FA:
		w->opcode = IBV_WC_FETCH_ADD;
		w->byte_len = 8;
		break;
	default:
		w->opcode = IBV_WC_SEND;
		break;
	}
}

/* A responder CQE (receive, receive with immediate, WRITE with immediate); false when it
 * retires no receive WQE. */
static bool wc_resp(struct sim_qp *qp, const struct mlx5_cqe64 *c, uint8_t opcode,
		    struct ibv_wc *w)
{
	uint32_t fr = be32toh(c->flags_rqpn);
	if (!rq_complete(qp, cqe_srq(qp, c), be16toh(c->wqe_counter), w))
		return false;
	w->status = IBV_WC_SUCCESS;
	w->byte_len = be32toh(c->byte_cnt);
	w->opcode = opcode == MLX5_CQE_RESP_WR_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	if (opcode == MLX5_CQE_RESP_SEND_INV) {
		w->invalidated_rkey = be32toh(c->imm_inval_pkey);
		w->wc_flags |= IBV_WC_WITH_INV;
	} else if (opcode != MLX5_CQE_RESP_SEND) {
		w->imm_data = c->imm_inval_pkey;
		w->wc_flags |= IBV_WC_WITH_IMM;
	}
	w->src_qp = fr & 0xffffff;
	w->sl = (fr >> 24) & 0xf;
	if ((fr >> 28) & 3)
		w->wc_flags |= IBV_WC_GRH;
	w->slid = be16toh(c->slid);
	w->dlid_path_bits = c->ml_path & 0x7f;
	w->pkey_index = be32toh(c->imm_inval_pkey) & 0xffff;
	if (opcode != MLX5_CQE_RESP_SEND)
		w->pkey_index = 0;
	return true;
}

/* An error CQE: the status, and the WQE it retires (false: no receive WQE). */
static bool wc_err(struct sim_qp *qp, const struct mlx5_cqe64 *c, uint8_t opcode,
		   struct ibv_wc *w)
{
	struct mlx5_err_cqe *ec = (void *)c;
	w->status = synd_to_status(ec->syndrome);
	w->vendor_err = ec->vendor_err_synd;
	if (opcode == MLX5_CQE_REQ_ERR) {
		sq_complete(qp, be16toh(ec->wqe_counter), w);
	} else if (!rq_complete(qp, cqe_srq(qp, c), be16toh(ec->wqe_counter), w)) {
		return false;
	}
	return true;
}

/* The work completion for a CQE; false for one that completes nothing (a destroyed QP's, a
 * receive the QP no longer holds, an opcode the ops table does not report). */
static bool cqe_to_wc(struct sim_ctx *sc, const struct mlx5_cqe64 *c, uint8_t opcode,
		      struct ibv_wc *w)
{
	uint32_t qpn = be32toh(c->sop_drop_qpn) & 0xffffff;
	struct sim_qp *qp = sim_qp_lookup_dev(sc, qpn);

	if (!qp)
		return false;   /* a CQE of a destroyed QP */
	memset(w, 0, sizeof(*w));
	w->qp_num = qpn;
	switch (opcode) {
	case MLX5_CQE_REQ:
		sq_complete(qp, be16toh(c->wqe_counter), w);
		w->status = IBV_WC_SUCCESS;
		wc_req_opcode(qp, c, w);
		return true;
	case MLX5_CQE_RESP_SEND:
	case MLX5_CQE_RESP_SEND_IMM:
	case MLX5_CQE_RESP_SEND_INV:
	case MLX5_CQE_RESP_WR_IMM:
		return wc_resp(qp, c, opcode, w);
	case MLX5_CQE_REQ_ERR:
	case MLX5_CQE_RESP_ERR:
		return wc_err(qp, c, opcode, w);
	default:
		return false;
	}
}

int poll_cq_op(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sim_cq *cq = to_scq(ibcq);
	struct sim_ctx *sc = to_sctx(ibcq->context);
	int got = 0;
	bool retried = false;

again:
	pthread_spin_lock(&cq->poll_lock);
	while (got < n) {
		uint8_t *e = cq->buf + (size_t)(cq->cons_index & (cq->cqe_cnt - 1)) * cq->cqe_size +
			     (cq->cqe_size == 128 ? 64 : 0);
		struct mlx5_cqe64 *c = (void *)e;
		uint8_t op_own = *(volatile uint8_t *)&c->op_own;
		uint8_t opcode = op_own >> 4;

		if (opcode == MLX5_CQE_INVALID ||
		    (op_own & MLX5_CQE_OWNER_MASK) != !!(cq->cons_index & cq->cqe_cnt))
			break;
		atomic_thread_fence(memory_order_acquire);
		cq->cons_index++;
		if (!cqe_to_wc(sc, c, opcode, &wc[got]))
			continue;
		got++;
	}
	cq->dbrec[0] /* SET_CI */ = htobe32(cq->cons_index & 0xffffff);
	/* The model's "hardware" needs a CPU: a poller that keeps finding nothing lets the engine
	 * thread run now and then, which matters when cores are fewer than spinning threads. */
	if (!got && (++cq->empty_polls & 63) == 0)
		sched_yield();
	pthread_spin_unlock(&cq->poll_lock);
	if (!got && !retried) {
		engine_progress(sc);
		retried = true;
		goto again;
	}
	return got;
}
