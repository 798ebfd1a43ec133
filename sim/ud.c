/* rvxsim: UD (unreliable datagram) QPs. A send WQE is ctrl | datagram segment (the 48-byte mlx5
 * address vector with the Q_Key and the destination QPN) | data or inline segments; it becomes one
 * packet (at most the port MTU) and completes as soon as it is on the wire: nothing is
 * acknowledged, nothing is retried. The receiving QP takes it only with the right Q_Key and a
 * posted receive, else the datagram is dropped without a trace on either side. The receive buffer
 * starts with 40 bytes of GRH space (written only when the datagram carried a GRH), so byte_cnt
 * is the payload plus 40; the CQE names the source QPN and LID. */
#include "internal.h"
#include <stdio.h>
#include <string.h>

#define UD_GRH_BYTES 40
#define UD_DGRAM_OFF 16                /* the datagram segment follows ctrl */
#define UD_DATA_OFF  (UD_DGRAM_OFF + 48)
#define UD_QKEY_FROM_QP 0x80000000u     /* a Q_Key with this bit set means "use the QP's own" */

/* pkt.op[] of a PKT_UD datagram */
enum { UD_OP_QKEY, UD_OP_GRH, UD_OP_SGID_HI, UD_OP_SGID_LO };

static void ud_fault(struct sim_qp *qp, uint32_t idx, const char *what)
{
	sim_log("rvxsim: qp 0x%x wqe %u: %s", qp->qpn, idx & 0xffff, what);
}

/* ---- verbs: modify-QP masks (the kernel's table for UD) and the datagram segment ---- */

int sim_ud_check_mask(int cur, int next, int mask, char *why, size_t n)
{
	int req = 0, opt = 0;

	/* rule: the kernel's UD masks per transition (ib_modify_qp_is_ok's table) */
	mask &= ~IBV_QP_STATE;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		opt = IBV_QP_CUR_STATE;
	} else if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
		req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
		opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
		req = IBV_QP_SQ_PSN;
		opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
		opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
	} else {
		snprintf(why, n, "not a valid transition for a UD QP");
		return EINVAL;
	}
	if ((mask & req) != req) {
		snprintf(why, n, "required attributes 0x%x are missing", req & ~mask);
		return EINVAL;
	}
	if (mask & ~(req | opt)) {
		snprintf(why, n, "attributes 0x%x are not allowed in this transition", mask & ~(req | opt));
		return EINVAL;
	}
	return 0;
}

/* ibv_post_send on a UD QP: the AH's address vector, then the destination QPN and Q_Key, as
 * libmlx5 fills the datagram segment. */
void sim_ud_wr_dgram(const struct ibv_send_wr *wr, uint8_t *seg)
{
	const struct sim_ah *ah = (const struct sim_ah *)wr->wr.ud.ah;
	struct mlx5_wqe_datagram_seg *d = (void *)seg;

	memcpy(&d->av, ah->av, sizeof(d->av));
	d->av.dqp_dct |= htobe32(wr->wr.ud.remote_qpn & 0xffffff);
	d->av.key.qkey.qkey = htobe32(wr->wr.ud.remote_qkey);
}

/* ---- send side ---- */

struct ud_wqe {
	uint16_t idx;
	uint8_t opcode, fm_ce_se;
	uint32_t imm, bbs;
	uint32_t qkey, dqpn;
	uint16_t dlid;
	bool grh;
	uint8_t sl;
	uint32_t len;
	uint8_t b[SIM_MAX_WQE_SIZE] __attribute__((aligned(16))); /* segments are read as structs */
	uint8_t data[SIM_MTU];
};

/* The payload from UD_DATA_OFF to end: inline and pointer segments, gathered in order into
 * w->data (one MTU at most). 0 or a syndrome. */
static int ud_gather(struct sim_qp *qp, struct ud_wqe *w, uint32_t ds, char *why, size_t n)
{
	uint32_t end = ds * 16, off;

	for (off = UD_DATA_OFF; off < end;) {
		uint32_t bc = be32toh(*(const __be32 *)(w->b + off)), len;
		const void *src;
		if (bc & MLX5_INLINE_SEG) {
			len = bc & ~MLX5_INLINE_SEG;
			/* bounded by the DS only: max_inline_data is libmlx5's post-time limit */
			if (off + ALIGN_UP(4 + len, 16) > end) {
				snprintf(why, n, "inline length %u past DS %u", len, ds);
				return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
			}
			src = w->b + off + 4;
			off += ALIGN_UP(4 + len, 16);
		} else {
			const struct mlx5_wqe_data_seg *d = (const void *)(w->b + off);
			const char *m;
			len = bc;
			src = engine_mr_ptr(qp, be32toh(d->lkey), be64toh(d->addr), len, 0, &m);
			/* rule: IB local access checks; byte_count 0 is 2 GiB (facts section 2) */
			if (!src || !len) {
				snprintf(why, n, "data segment lkey 0x%x addr 0x%llx len %u: %s",
					 be32toh(d->lkey), (unsigned long long)be64toh(d->addr), len,
					 len ? m : "byte_count 0");
				return len ? MLX5_CQE_SYNDROME_LOCAL_PROT_ERR :
					     MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
			}
			off += 16;
		}
		/* rule: a UD message is one packet within the MTU (IB spec, UD service) */
		if (w->len + len > SIM_MTU) {
			snprintf(why, n, "UD message of more than %u bytes (the port MTU)", SIM_MTU);
			return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
		}
		memcpy(w->data + w->len, src, len);
		w->len += len;
	}
	return 0;
}

/* Copy the WQE at pc out of the ring and check it; 0 or a syndrome (why names the fault). */
static int ud_decode(struct sim_qp *qp, uint32_t pc, uint32_t db, struct ud_wqe *w, char *why,
		     size_t n)
{
	uint32_t mask = qp->sq_wqe_cnt - 1, ds, end;
	const uint8_t *c = qp->sq_buf + ((pc & mask) << 6);

	w->idx = (uint16_t)(c[1] << 8 | c[2]);
	w->opcode = c[3];
	ds = c[7] & 0x3f;
	w->fm_ce_se = c[11];
	memcpy(&w->imm, c + 12, 4);
	w->bbs = MAX((ds + 3) / 4, 1u);
	w->len = 0;
	/* the ctrl checks of decode.c's decode_ctrl, with the same sources */
	if (w->idx != (pc & 0xffff)) {
		snprintf(why, n, "ctrl WQE index 0x%x differs from the producer count 0x%x", w->idx,
			 pc & 0xffff);
		w->idx = pc & 0xffff;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	if ((uint32_t)(c[4] << 16 | c[5] << 8 | c[6]) != qp->qpn) {
		snprintf(why, n, "ctrl QPN 0x%x is not this QP", c[4] << 16 | c[5] << 8 | c[6]);
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	if (!ds || ds * 16 > qp->max_wqe_bytes || (int32_t)(db - (pc + w->bbs)) < 0) {
		snprintf(why, n, "DS %u is zero, larger than the QP's largest WQE or past the doorbell "
			 "record", ds);
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	for (uint32_t i = 0; i < w->bbs; i++)
		memcpy(w->b + i * 64, qp->sq_buf + (((pc + i) & mask) << 6), 64);
	if ((c[8] || c[9] || c[10] || (w->fm_ce_se & 0x11)) &&
	    !sim_reserved_ignored("ctrl bytes 8-11")) {
		snprintf(why, n, "stale bytes in ctrl bytes 8-11 (%02x %02x %02x %02x)", c[8], c[9],
			 c[10], c[11]);
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	if (w->opcode == MLX5_OPCODE_NOP)
		return 0;
	/* rule: UD carries SEND and SEND_IMM only (IB spec, UD service) */
	if (w->opcode != MLX5_OPCODE_SEND && w->opcode != MLX5_OPCODE_SEND_IMM) {
		snprintf(why, n, "opcode 0x%02x on a UD QP (SEND and SEND_IMM only)", w->opcode);
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	end = ds * 16;
	/* rule: a UD WQE has its datagram segment after ctrl (libmlx5 set_datagram_seg) */
	if (end < UD_DATA_OFF) {
		snprintf(why, n, "UD SEND without a datagram segment (DS %u)", ds);
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* the datagram segment is an address vector (the shared parser) whose key field holds the
	 * Q_Key in its high word; it takes 48 bytes whether or not the extended (GRH) part is valid */
	struct sim_av av;
	if (!av_parse(w->b + UD_DGRAM_OFF, end - UD_DGRAM_OFF, &av, why, n))
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	w->qkey = (uint32_t)(av.key >> 32);
	w->dqpn = av.dqpn;
	w->sl = av.sl;
	w->grh = av.grh;
	w->dlid = av_lid(&av);
	if (w->qkey & UD_QKEY_FROM_QP)
		w->qkey = qp->attr.qkey;
	return ud_gather(qp, w, ds, why, n);
}

static void ud_cqe_req(struct sim_qp *qp, const struct ud_wqe *w, uint8_t synd)
{
	uint8_t c[64];

	memset(c, 0, sizeof(c));
	*(__be32 *)(c + 56) = htobe32((uint32_t)w->opcode << 24 | qp->qpn);
	*(__be16 *)(c + 60) = htobe16(w->idx);
	if (synd) {
		c[55] = synd;
		c[63] = MLX5_CQE_REQ_ERR << 4;
	} else {
		*(__be32 *)(c + 44) = htobe32(w->len);
		c[63] = MLX5_CQE_REQ << 4;
	}
	engine_write_cqe(qp->scq, c, false);
}

/* Run every WQE the doorbell record announces. Returns 1 if anything happened. */
int sim_ud_sq_work(struct sim_qp *qp)
{
	static __thread struct ud_wqe w;
	uint8_t buf[PKT_HDR + SIM_MTU];
	struct pkt *p = (struct pkt *)buf;
	char why[200];
	int work = 0;

	if (qp->state != IBV_QPS_RTS)
		return 0;
	while ((int32_t)(qp->sq_db_seen - qp->sq_pc) > 0) {
		int synd = ud_decode(qp, qp->sq_pc, qp->sq_db_seen, &w, why, sizeof(why));
		if (!synd && qp->poisoned && w.idx == qp->poison_idx) {
			qp->poisoned = false;   /* its doorbell was faulty; the line is already out */
			synd = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
			why[0] = 0;
		}
		if (synd) {
			if (why[0])
				ud_fault(qp, qp->sq_pc, why);
			qp->bad = 1;
			qp->sq_pc += w.bbs;
			ud_cqe_req(qp, &w, synd);
			engine_qp_to_err(qp);
			return 1;
		}
		if (sim_env.trace)
			sim_trace("wqe qp 0x%x idx 0x%x UD %s wqebbs %u fm_ce_se 0x%02x qkey 0x%x -> lid 0x%x "
				  "qp 0x%x%s len %u", qp->qpn, w.idx, w.opcode == MLX5_OPCODE_NOP ? "NOP" :
				  "SEND", w.bbs, w.fm_ce_se, w.qkey, w.dlid, w.dqpn, w.grh ? " GRH" : "",
				  w.len);
		if (w.opcode != MLX5_OPCODE_NOP) {
			memset(p, 0, PKT_HDR);
			p->type = PKT_UD;
			p->flags = PKT_F_FIRST | PKT_F_LAST |
				   (w.opcode == MLX5_OPCODE_SEND_IMM ? PKT_F_IMM : 0) |
				   ((w.fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? PKT_F_SE : 0);
			p->src_lid = qp->sc->lid;
			p->dst_lid = w.dlid;
			p->src_qpn = qp->qpn;
			p->dst_qpn = w.dqpn;
			p->len = p->total = w.len;
			p->imm = w.imm;
			p->op[UD_OP_QKEY] = w.qkey;
			p->op[UD_OP_GRH] = (w.grh ? 0x100u : 0) | w.sl;
			memcpy(&p->op[UD_OP_SGID_HI], qp->sc->gid.raw, 16);
			memcpy(p->data, w.data, w.len);
			if (!fabric_send(qp->sc, p->dst_lid, p))
				break;   /* the peer's inbox is full: this WQE goes out on a later pass */
		}
		qp->sc->wqes_executed++;
		sim_count_wqe(w.len);
		qp->sq_pc += w.bbs;
		if (w.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE)
			ud_cqe_req(qp, &w, 0);
		work = 1;
	}
	return work;
}

/* ---- receive side ---- */

static void ud_write_grh(struct sim_qp *qp, const struct pkt *p, uint8_t grh[UD_GRH_BYTES])
{
	memset(grh, 0, UD_GRH_BYTES);
	grh[0] = 0x60;                                       /* IP version 6 */
	*(__be16 *)(grh + 4) = htobe16((uint16_t)p->total);  /* payload length */
	grh[6] = 0x1b;                                       /* next header: IBA */
	grh[7] = 64;                                         /* hop limit */
	memcpy(grh + 8, &p->op[UD_OP_SGID_HI], 16);
	memcpy(grh + 24, qp->sc->gid.raw, 16);
}

/* A datagram for qp: taken if the QP is ready, the Q_Key matches and a receive is posted;
 * otherwise dropped silently, as the wire does. */
void sim_ud_receive(struct sim_qp *qp, const struct pkt *p)
{
	uint8_t *segs, c[64], grh[UD_GRH_BYTES];
	uint32_t nsegs, idx;
	bool has_grh = (p->op[UD_OP_GRH] & 0x100) != 0;
	int s;

	if (qp->type != IBV_QPT_UD || (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS))
		return;
	if ((uint32_t)p->op[UD_OP_QKEY] != qp->attr.qkey) {
		TRACE("qp 0x%x: datagram from lid 0x%x qp 0x%x with Q_Key 0x%x (QP's 0x%x): dropped",
		      qp->qpn, p->src_lid, p->src_qpn, (uint32_t)p->op[UD_OP_QKEY], qp->attr.qkey);
		return;
	}
	if (!engine_rq_peek(qp, &segs, &nsegs, &idx)) {
		TRACE("qp 0x%x: datagram from lid 0x%x qp 0x%x and no receive WQE: dropped", qp->qpn,
		      p->src_lid, p->src_qpn);
		return;
	}
	s = engine_rq_check(qp, segs, nsegs, p->total + UD_GRH_BYTES, idx);
	engine_rq_consume(qp);
	if (s) {
		memset(c, 0, sizeof(c));
		if (qp->srq)
			*(__be32 *)(c + 32) = htobe32(qp->srq->srqn);
		c[55] = (uint8_t)s;
		*(__be32 *)(c + 56) = htobe32(qp->qpn);
		*(__be16 *)(c + 60) = htobe16((uint16_t)idx);
		c[63] = MLX5_CQE_RESP_ERR << 4;
		engine_write_cqe(qp->rcq, c, false);
		engine_qp_to_err(qp);
		return;
	}
	if (has_grh) {
		ud_write_grh(qp, p, grh);
		engine_rq_scatter(qp, segs, nsegs, 0, grh, UD_GRH_BYTES);
	}
	engine_rq_scatter(qp, segs, nsegs, UD_GRH_BYTES, p->data, p->len);
	memset(c, 0, sizeof(c));
	*(__be16 *)(c + 22) = htobe16(sim_env.link_eth ? 0 : p->src_lid);
	*(__be32 *)(c + 24) = htobe32((has_grh ? 1u << 28 : 0) |
				      (uint32_t)(p->op[UD_OP_GRH] & 0xf) << 24 | p->src_qpn);
	if (qp->srq)
		*(__be32 *)(c + 32) = htobe32(qp->srq->srqn);
	if (p->flags & PKT_F_IMM)
		memcpy(c + 36, &p->imm, 4);
	else
		*(__be32 *)(c + 36) = htobe32(qp->attr.pkey_index);
	*(__be32 *)(c + 44) = htobe32(p->total + UD_GRH_BYTES);
	*(__be32 *)(c + 56) = htobe32(qp->qpn);
	*(__be16 *)(c + 60) = htobe16((uint16_t)idx);
	c[63] = ((p->flags & PKT_F_IMM) ? MLX5_CQE_RESP_SEND_IMM : MLX5_CQE_RESP_SEND) << 4 |
		((p->flags & PKT_F_SE) ? 2 : 0);
	engine_write_cqe(qp->rcq, c, (p->flags & PKT_F_SE) != 0);
}
