/* rvxsim: WQE decoding. A send-queue WQE is copied out of the ring (wrapping at the end) and
 * checked as the adapter checks it before anything goes on the wire; trace_wqe prints it. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

/* ------------------------------------------------------------------ WQE decoding */

/* The ctrl segment: index, QPN, DS within the QP's WQE size and the doorbell record; the WQE
 * copied out of the ring (wrapping at the end) into w->b. */
static int decode_ctrl(struct sim_qp *qp, uint32_t pc, uint32_t db, struct wqe *w,
		       const char **why, char *whybuf, size_t whylen)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;
	uint8_t *first = qp->sq_buf + ((pc & mask) << 6);

	memset(w, 0, offsetof(struct wqe, b));
	w->pc = pc;
	w->opcode = first[3];
	w->idx = (uint16_t)(first[1] << 8 | first[2]);
	w->opmod = first[0];
	w->ds = first[7] & 0x3f;
	w->fm_ce_se = first[11];
	memcpy(&w->imm, first + 12, 4);
	/* rule: wqe_index is the 16-bit producer count (mlx5dv_set_ctrl_seg, mlx5dv.h); [inferred] */
	if (w->idx != (pc & 0xffff)) {
		snprintf(whybuf, whylen, "ctrl WQE index 0x%x differs from the producer count 0x%x",
			 w->idx, pc & 0xffff);
		*why = whybuf;
		w->idx = pc & 0xffff;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* rule: qpn_ds carries the QP's own number (mlx5dv_set_ctrl_seg, mlx5dv.h); [inferred] */
	if ((uint32_t)(first[4] << 16 | first[5] << 8 | first[6]) != qp->qpn) {
		snprintf(whybuf, whylen, "ctrl QPN 0x%x is not this QP",
			 first[4] << 16 | first[5] << 8 | first[6]);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* rule: DS is qpn_ds[5:0], 1-63 16-byte units (mlx5dv_set_ctrl_seg, mlx5dv.h); [inferred] */
	if (w->ds == 0 || first[7] > 0x3f) {
		snprintf(whybuf, whylen, "DS %u is zero or too large", first[7]);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* [inferred] a WQE larger than the size the QP was created for is rejected (skipped whole:
	 * the WQEs after it are flushed from where they start) */
	w->bbs = (w->ds + 3) / 4;
	if (w->ds * 16u > qp->max_wqe_bytes) {
		snprintf(whybuf, whylen, "DS %u is larger than this QP's largest WQE (%u bytes)", w->ds,
			 qp->max_wqe_bytes);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	w->bbs = (w->ds + 3) / 4;
	/* rule: the doorbell record counts the WQEBBs posted (libmlx5 post_send_db); [inferred] */
	if (w->bbs > qp->sq_wqe_cnt || (int32_t)(db - (pc + w->bbs)) < 0) {
		snprintf(whybuf, whylen, "DS %u runs past the doorbell record (0x%x)", w->ds, db & 0xffff);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	for (uint32_t i = 0; i < w->bbs; i++)
		memcpy(w->b + i * 64, qp->sq_buf + (((pc + i) & mask) << 6), 64);
	/* a lint, not hardware (RVXSIM_STRICT only): libmlx5 zeroes bytes 8-11 (mlx5dv_set_ctrl_seg) */
	if ((w->b[8] || w->b[9] || w->b[10] || (w->fm_ce_se & 0x11)) &&
	    !sim_reserved_ignored("ctrl bytes 8-11")) {
		snprintf(whybuf, whylen, "stale bytes in ctrl bytes 8-11 (%02x %02x %02x %02x)",
			 w->b[8], w->b[9], w->b[10], w->b[11]);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	return 0;
}

/* The opcode and, for RDMA and atomics, the remote address segment at *off. */
static int decode_remote(struct wqe *w, uint32_t *offp, uint32_t end, const char **why,
			 char *whybuf, size_t whylen)
{
	uint32_t off = *offp;

	switch (w->opcode) {
	case MLX5_OPCODE_SEND:
	case MLX5_OPCODE_SEND_IMM:
	case MLX5_OPCODE_SEND_INVAL:
		break;
	case MLX5_OPCODE_RDMA_WRITE:
	case MLX5_OPCODE_RDMA_WRITE_IMM:
	case MLX5_OPCODE_RDMA_READ:
	case MLX5_OPCODE_ATOMIC_CS:
	case MLX5_OPCODE_ATOMIC_FA:
	case MLX5_OPCODE_ATOMIC_MASKED_CS:
	case MLX5_OPCODE_ATOMIC_MASKED_FA: {
		/* rule: RDMA and atomics carry a raddr segment after ctrl/AV (libmlx5 _mlx5_post_send) */
		if (end < off + 16) {
			snprintf(whybuf, whylen, "%s without a remote address segment (DS %u)",
				 opname(w->opcode), w->ds);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		struct mlx5_wqe_raddr_seg *r = (void *)(w->b + off);
		w->raddr = be64toh(r->raddr);
		w->rkey = be32toh(r->rkey);
		/* a lint, not hardware (RVXSIM_STRICT only): libmlx5 zeroes it (set_raddr_seg) */
		if (r->reserved && !sim_reserved_ignored("the raddr segment's reserved word")) {
			snprintf(whybuf, whylen, "stale bytes in the raddr segment's reserved field (0x%08x)",
				 be32toh(r->reserved));
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		off += 16;
		break;
	}
	/* a model gap: TSO and LOCAL_INVAL are valid on hardware (docs/rvxsim.md) */
	default:
		snprintf(whybuf, whylen, "opcode 0x%02x is unknown or not supported by the model",
			 w->opcode);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* rule: opmod is 0 but for masked atomics and UMR (libmlx5 _mlx5_post_send); [inferred] */
	if (w->opmod && w->opcode != MLX5_OPCODE_ATOMIC_MASKED_CS &&
	    w->opcode != MLX5_OPCODE_ATOMIC_MASKED_FA) {
		snprintf(whybuf, whylen, "opmod 0x%02x set on %s", w->opmod, opname(w->opcode));
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	*offp = off;
	return 0;
}

/* rule: UC carries SENDs and RDMA WRITEs only (IB spec, the UC service's operations;
 * libmlx5 mlx5_qp_fill_wr_pfns gives UC no READ or atomic builder and _mlx5_post_send no raddr
 * segment for them): a READ or an atomic on a UC QP is a local QP operation error. */
static int uc_opcode(const struct wqe *w, const char **why, char *whybuf, size_t whylen)
{
	switch (w->opcode) {
	case MLX5_OPCODE_RDMA_READ:
	case MLX5_OPCODE_ATOMIC_CS:
	case MLX5_OPCODE_ATOMIC_FA:
	case MLX5_OPCODE_ATOMIC_MASKED_CS:
	case MLX5_OPCODE_ATOMIC_MASKED_FA:
		snprintf(whybuf, whylen, "%s is not a UC operation (UC QPs send and write only)",
			 opname(w->opcode));
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	return 0;
}

/* A UMR WQE as libmlx5 builds a memory window's bind or invalidation (set_bind_wr): the UMR
 * control segment, the mkey context, and for a bind (klm_octowords 2) one KLM in a 64-byte
 * block. Only connected QPs bind windows here: UD cannot, and a DCI's are not modelled. */
static int decode_umr(struct sim_qp *qp, struct wqe *w, uint32_t off, uint32_t end,
		      const char **why, char *whybuf, size_t whylen)
{
	const struct mlx5_wqe_umr_ctrl_seg *c = (const void *)(w->b + off);
	const struct mlx5_wqe_mkey_context_seg *k = (const void *)(w->b + off + 48);

	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) || qp->dc_type) {
		*why = "UMR (a memory window's bind) on a QP that is neither RC nor UC";
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* rule: UMR control and mkey context follow ctrl (libmlx5 set_umr_control_seg) */
	if (end < off + 48 + 64) {
		snprintf(whybuf, whylen, "UMR without its control and mkey context segments (DS %u)",
			 w->ds);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	w->umr.flags = c->flags;
	w->umr.klm_octo = be16toh(c->klm_octowords);
	w->umr.mask = be64toh(c->mkey_mask);
	w->umr.free = k->free;
	w->umr.access = k->access_flags;
	w->umr.qpn_mkey = be32toh(k->qpn_mkey);
	w->umr.start = be64toh(k->start_addr);
	w->umr.len = be64toh(k->len);
	if (!(w->umr.free & MLX5_WQE_MKEY_CONTEXT_FREE)) {
		const struct mlx5_wqe_umr_klm_seg *m = (const void *)(w->b + off + 48 + 64);
		/* rule: a bind carries one KLM, padded to 64 bytes (libmlx5 set_umr_data_seg) */
		if (w->umr.klm_octo != 2 || end < off + 48 + 64 + 64) {
			snprintf(whybuf, whylen, "UMR bind without one KLM (klm_octowords %u, DS %u)",
				 w->umr.klm_octo, w->ds);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		w->umr.klm_bytes = be32toh(m->byte_count);
		w->umr.klm_mkey = be32toh(m->mkey);
		w->umr.klm_addr = be64toh(m->address);
	}
	return 0;
}

/* An atomic's operand segment at *off (standard: 8 bytes; masked: 4 or 8 by opmod). */
static int decode_atomic(struct wqe *w, uint32_t *offp, uint32_t end, const char **why,
			 char *whybuf, size_t whylen)
{
	uint32_t off = *offp;

	if (w->opcode == MLX5_OPCODE_ATOMIC_CS || w->opcode == MLX5_OPCODE_ATOMIC_FA) {
		struct mlx5_wqe_atomic_seg *a = (void *)(w->b + off);
		/* rule: CS/FA carry an atomic segment after raddr (libmlx5 set_atomic_seg) */
		if (end < off + 16) {
			*why = "atomic WQE without an atomic segment";
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		w->op[0] = be64toh(a->swap_add);
		w->op[1] = be64toh(a->compare);
		w->asize = 8;
		off += 16;
	} else if (w->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS ||
		   w->opcode == MLX5_OPCODE_ATOMIC_MASKED_FA) {
		uint32_t segsz;
		/* rule: opmod 0x08 | log2(size) - 2; the model has 4 and 8 bytes (facts section 2) */
		if (w->opmod != 0x08 && w->opmod != 0x09) {
			snprintf(whybuf, whylen, "masked atomic opmod 0x%02x (want 0x08 or 0x09)", w->opmod);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		w->asize = w->opmod == 0x08 ? 4 : 8;
		segsz = (w->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS && w->asize == 8) ? 32 : 16;
		/* rule: the masked operand segment's size by opcode and size (facts section 2) */
		if (end < off + segsz) {
			*why = "masked atomic WQE too short for its operand segment";
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		uint8_t *s = w->b + off;
		int nops = w->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS ? 4 : 2;
		for (int i = 0; i < nops; i++) {
			if (w->asize == 8)
				w->op[i] = be64toh(*(__be64 *)(s + 8 * i));
			else
				w->op[i] = be32toh(*(__be32 *)(s + 4 * i));
		}
		off += segsz;
	}
	*offp = off;
	return 0;
}

/* The data: inline and data segments from off to end, in any order (e.g. an inline header
 * followed by pointers to the payload), gathered in the order they appear. */
static int decode_data(struct wqe *w, uint32_t off, uint32_t end, const char **why,
		       char *whybuf, size_t whylen)
{
	while (off < end) {
		uint32_t bc = be32toh(*(__be32 *)(w->b + off));
		struct wsge *g = &w->sge[w->nsge++];
		memset(g, 0, sizeof(*g));
		if (bc & MLX5_INLINE_SEG) {
			uint32_t len = bc & ~MLX5_INLINE_SEG;
			/* rule: READ and atomics scatter, so take pointers only (libmlx5 post_send); [inferred] */
			if (w->opcode == MLX5_OPCODE_RDMA_READ || w->asize) {
				snprintf(whybuf, whylen, "inline segment in %s", opname(w->opcode));
				*why = whybuf;
				return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
			}
			/* no max_inline_data check: that limit is libmlx5's (set_data_inl_seg,
			 * ENOMEM at post time); the adapter reads what the DS covers, and UCX sends
			 * inline up to the WQE size on DCIs made with max_inline_data 0 */
			/* rule: the inline segment is padded to 16 bytes within DS (libmlx5 set_data_inl_seg) */
			if (off + ALIGN_UP(4 + len, 16) > end) {
				snprintf(whybuf, whylen, "inline length %u does not fit DS %u", len,
					 w->ds);
				*why = whybuf;
				return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
			}
			g->inl = true;
			g->addr = off + 4;     /* payload bytes stay in w->b */
			g->len = len;
			w->inl = true;
			w->inl_len += len;
			w->total += len;
			off += ALIGN_UP(4 + len, 16);
		} else {
			struct mlx5_wqe_data_seg *d = (void *)(w->b + off);
			g->len = bc;
			g->lkey = be32toh(d->lkey);
			g->addr = be64toh(d->addr);
			/* rule: byte_count 0 means 2 GiB (facts section 2), over max_msg_sz; libmlx5 skips it */
			if (bc == 0) {
				snprintf(whybuf, whylen, "data segment %u has byte_count 0 "
					 "(hardware reads that as 2 GiB)", w->nsge - 1);
				*why = whybuf;
				return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
			}
			w->total += bc;
			off += 16;
		}
	}
	return 0;
}

/* An atomic's result segment, the message length, and every data segment's key and bounds. */
static int decode_keys(struct sim_qp *qp, struct wqe *w, const char **why, char *whybuf,
		       size_t whylen)
{
	if (w->asize) {
		/* rule: one data segment of the operand size takes the result (facts section 2) */
		if (w->nsge != 1 || w->sge[0].len != w->asize) {
			snprintf(whybuf, whylen, "%s needs one %u-byte data segment for the result",
				 opname(w->opcode), w->asize);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
	}
	/* rule: the port's max_msg_sz, 1 GiB (ibv_query_port on the model, as a ConnectX-6) */
	if (w->total > (1u << 30)) {
		*why = "message longer than the port's max_msg_sz";
		return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	}
	/* local keys and bounds */
	for (uint32_t i = 0; i < w->nsge; i++) {
		const char *m;
		int need = (w->opcode == MLX5_OPCODE_RDMA_READ || w->asize) ? IBV_ACCESS_LOCAL_WRITE : 0;
		if (w->sge[i].inl)
			continue;
		/* rule: IB local access checks (key, PD, bounds, LOCAL_WRITE to scatter): LOC_PROT_ERR */
		if (!mr_ptr(qp, w->sge[i].lkey, w->sge[i].addr, w->sge[i].len, need, &m)) {
			snprintf(whybuf, whylen, "data segment %u: lkey 0x%x addr 0x%llx len %u: %s%s", i,
				 w->sge[i].lkey, (unsigned long long)w->sge[i].addr, w->sge[i].len, m,
				 sim_mr_lookup(qp->sc, w->sge[i].lkey) ? "" :
				 " (inline bit missing?)");
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
		}
	}
	return 0;
}

/* Copy the WQE out of the ring (wrapping at the end) and check everything hardware checks.
 * Returns 0 or an error syndrome; *why names the fault. */
int decode(struct sim_qp *qp, uint32_t pc, uint32_t db, struct wqe *w, const char **why,
	   char *whybuf, size_t whylen)
{
	uint32_t off = 16, end;
	int s = decode_ctrl(qp, pc, db, w, why, whybuf, whylen);

	if (s)
		return s;
	end = w->ds * 16;
	if (qp->dc_type == SIM_DCI && w->opcode != MLX5_OPCODE_NOP) {
		uint32_t n = av_parse(w->b + off, end - off, &w->av, whybuf, whylen);
		if (!n) {
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		off += n;
	}
	if (w->opcode == MLX5_OPCODE_NOP)
		return 0;
	if (w->opcode == MLX5_OPCODE_UMR)
		return decode_umr(qp, w, off, end, why, whybuf, whylen);
	if (qp->type == IBV_QPT_XRC_SEND) {
		/* rule: an XRC initiator's WQE carries the XRC segment after ctrl (libmlx5
		 * _mlx5_post_send, mlx5_send_wr_set_xrc_srqn); one that leaves no room for it
		 * [inferred] LOCAL_QP_OP_ERR */
		if (end < off + 16) {
			snprintf(whybuf, whylen, "XRC WQE without its XRC segment (DS %u)", w->ds);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		w->xrc_srqn = be32toh(*(__be32 *)(w->b + off)) & 0xffffff;
		off += 16;
	}
	if (qp->type == IBV_QPT_UC && (s = uc_opcode(w, why, whybuf, whylen)))
		return s;
	if ((s = decode_remote(w, &off, end, why, whybuf, whylen)) ||
	    (s = decode_atomic(w, &off, end, why, whybuf, whylen)) ||
	    (s = decode_data(w, off, end, why, whybuf, whylen)))
		return s;
	return decode_keys(qp, w, why, whybuf, whylen);
}

void trace_wqe(struct sim_qp *qp, const struct wqe *w)
{
	sim_trace("wqe qp 0x%x idx 0x%x %s opmod 0x%x ds %u fm_ce_se 0x%02x%s%s%s imm 0x%08x",
		  qp->qpn, w->idx, opname(w->opcode), w->opmod, w->ds, w->fm_ce_se,
		  (w->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) ? " CE" : "",
		  (w->fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? " SE" : "",
		  (w->fm_ce_se & 0xe0) ? " FENCE" : "", be32toh(w->imm));
	if (w->av.len)
		av_trace(&w->av);
	if (qp->type == IBV_QPT_XRC_SEND && w->opcode != MLX5_OPCODE_NOP &&
	    w->opcode != MLX5_OPCODE_UMR)
		sim_trace("    xrc srqn 0x%x", w->xrc_srqn);
	if (w->rkey || w->raddr)
		sim_trace("    raddr 0x%llx rkey 0x%x", (unsigned long long)w->raddr, w->rkey);
	if (w->asize)
		sim_trace("    atomic size %u op 0x%llx 0x%llx 0x%llx 0x%llx", w->asize,
			  (unsigned long long)w->op[0], (unsigned long long)w->op[1],
			  (unsigned long long)w->op[2], (unsigned long long)w->op[3]);
	for (uint32_t i = 0; i < w->nsge; i++) {
		if (w->sge[i].inl)
			sim_trace("    inline len %u", w->sge[i].len);
		else
			sim_trace("    data lkey 0x%x addr 0x%llx len %u", w->sge[i].lkey,
				  (unsigned long long)w->sge[i].addr, w->sge[i].len);
	}
}
