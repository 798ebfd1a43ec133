/* rvxsim: the engine. One thread per opened device plays the adapter: it watches each QP's
 * doorbell record and BlueFlame/doorbell register, decodes and checks the WQEs in order, moves
 * data through the fabric (fabric.c), and writes CQEs with the owner bit as a ConnectX does.
 *
 * Requester side: each WQE that goes on the wire becomes a message with a sequence number and a
 * record in the QP's in-flight ring; completions are generated in order when the responder's
 * ACK/response arrives. Responder side: requests are executed in sequence order; anything out of
 * order is dropped (go-back-N after an RNR NAK). */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

#define RNR_SYND 0xff   /* NAK syndrome meaning "receiver not ready" (wire only) */

static const char *opname(uint8_t op)
{
	switch (op) {
	case MLX5_OPCODE_NOP: return "NOP";
	case MLX5_OPCODE_SEND_INVAL: return "SEND_INVAL";
	case MLX5_OPCODE_RDMA_WRITE: return "RDMA_WRITE";
	case MLX5_OPCODE_RDMA_WRITE_IMM: return "RDMA_WRITE_IMM";
	case MLX5_OPCODE_SEND: return "SEND";
	case MLX5_OPCODE_SEND_IMM: return "SEND_IMM";
	case MLX5_OPCODE_TSO: return "TSO";
	case MLX5_OPCODE_RDMA_READ: return "RDMA_READ";
	case MLX5_OPCODE_ATOMIC_CS: return "ATOMIC_CS";
	case MLX5_OPCODE_ATOMIC_FA: return "ATOMIC_FA";
	case MLX5_OPCODE_ATOMIC_MASKED_CS: return "ATOMIC_MASKED_CS";
	case MLX5_OPCODE_ATOMIC_MASKED_FA: return "ATOMIC_MASKED_FA";
	case MLX5_OPCODE_LOCAL_INVAL: return "LOCAL_INVAL";
	case MLX5_OPCODE_UMR: return "UMR";
	default: return "unknown";
	}
}

static const char *cqe_opname(uint8_t op)
{
	static const char *const n[16] = { "REQ", "RESP_WR_IMM", "RESP_SEND", "RESP_SEND_IMM",
					   "RESP_SEND_INV", "RESIZE_CQ", "NO_PACKET", "7", "8", "9",
					   "10", "11", "SIG_ERR", "REQ_ERR", "RESP_ERR", "INVALID" };
	return n[op & 15];
}

/* One line naming a fault, in the documented format. */
static void qp_fault(struct sim_qp *qp, uint32_t idx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void qp_fault(struct sim_qp *qp, uint32_t idx, const char *fmt, ...)
{
	char what[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	sim_log("rvxsim: qp 0x%x wqe %u: %s", qp->qpn, idx & 0xffff, what);
}

void engine_kick(struct sim_ctx *sc)
{
	fabric_wake_self(sc);
}

/* ------------------------------------------------------------------ CQEs */

static void fire_event(struct sim_cq *cq)
{
	struct sim_channel *ch = (struct sim_channel *)cq->cq.channel;
	struct ibv_cq *p = &cq->cq;

	cq->armed = false;
	if (!ch)
		return;
	if (write(ch->wfd, &p, sizeof(p)) < 0) {
		/* pipe full: the application holds too many unread events */
	}
}

static void qp_set_err(struct sim_qp *qp);

void engine_write_cqe(struct sim_cq *cq, const uint8_t cqe[64], bool se)
{
	struct sim_ctx *sc = to_sctx(cq->cq.context);
	uint32_t ci = be32toh(cq->dbrec[0]) & 0xffffff;
	uint8_t opcode = cqe[63] >> 4;
	uint8_t *e;
	uint32_t qpn = be32toh(*(const __be32 *)(cqe + 56)) & 0xffffff;
	uint16_t wc = be16toh(*(const __be16 *)(cqe + 60));

	if (cq->err)
		return;
	if (((cq->pi - ci) & 0xffffff) >= cq->cqe_cnt && !cq->ignore_overrun) {
		sim_log("rvxsim: qp 0x%x wqe %u: CQ overrun on cq 0x%x (cqe_cnt %u, producer %u, "
			"consumer index %u)", qpn, wc, cq->cqn, cq->cqe_cnt, cq->pi & 0xffffff, ci);
		cq->err = true;
		sim_async_event(sc, IBV_EVENT_CQ_ERR, &cq->cq);
		for (struct sim_qp *q = sc->qps; q; q = q->next)
			if ((q->scq == cq || q->rcq == cq) && q->state != IBV_QPS_ERR &&
			    q->state != IBV_QPS_RESET) {
				q->bad = 1;
				qp_set_err(q);
			}
		return;
	}
	e = cq->buf + (size_t)(cq->pi & (cq->cqe_cnt - 1)) * cq->cqe_size +
	    (cq->cqe_size == 128 ? 64 : 0);
	memcpy(e, cqe, 63);
	atomic_thread_fence(memory_order_release);
	*(volatile uint8_t *)(e + 63) = (cqe[63] & 0xfe) | !!(cq->pi & cq->cqe_cnt);
	if (sim_env.trace) {
		if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR)
			sim_trace("cqe cq 0x%x #%u %s qpn 0x%x wqe_counter 0x%x syndrome 0x%02x "
				  "vendor 0x%02x owner %u", cq->cqn, cq->pi, cqe_opname(opcode), qpn, wc,
				  cqe[55], cqe[54], !!(cq->pi & cq->cqe_cnt));
		else
			sim_trace("cqe cq 0x%x #%u %s qpn 0x%x wqe_counter 0x%x byte_cnt %u imm 0x%08x "
				  "flags_rqpn 0x%08x srqn_uidx 0x%x owner %u", cq->cqn, cq->pi,
				  cqe_opname(opcode), qpn, wc, be32toh(*(const __be32 *)(cqe + 44)),
				  be32toh(*(const __be32 *)(cqe + 36)), be32toh(*(const __be32 *)(cqe + 24)),
				  be32toh(*(const __be32 *)(cqe + 32)), !!(cq->pi & cq->cqe_cnt));
	}
	cq->pi++;
	if (cq->armed && (!cq->arm_sol || se || opcode >= MLX5_CQE_REQ_ERR))
		fire_event(cq);
}

static void cqe_req(struct sim_qp *qp, const struct sq_rec *r)
{
	uint8_t c[64];

	memset(c, 0, sizeof(c));
	if (r->syndrome) {
		c[54] = 0;
		c[55] = r->syndrome;
		*(__be32 *)(c + 56) = htobe32((uint32_t)r->opcode << 24 | qp->qpn);
		*(__be16 *)(c + 60) = htobe16(r->idx);
		c[63] = MLX5_CQE_REQ_ERR << 4;
	} else {
		*(__be32 *)(c + 44) = htobe32(r->byte_cnt);
		*(__be32 *)(c + 56) = htobe32((uint32_t)r->opcode << 24 | qp->qpn);
		*(__be16 *)(c + 60) = htobe16(r->idx);
		c[63] = MLX5_CQE_REQ << 4;
	}
	engine_write_cqe(qp->scq, c, false);
}

static void cqe_resp_err(struct sim_qp *qp, uint16_t wqe_counter, uint8_t synd)
{
	uint8_t c[64];

	memset(c, 0, sizeof(c));
	if (qp->srq)
		*(__be32 *)(c + 32) = htobe32(qp->srq->srqn);
	c[55] = synd;
	*(__be32 *)(c + 56) = htobe32(qp->qpn);
	*(__be16 *)(c + 60) = htobe16(wqe_counter);
	c[63] = MLX5_CQE_RESP_ERR << 4;
	engine_write_cqe(qp->rcq, c, false);
}

/* ------------------------------------------------------------------ QP state */

static void tx_drop(struct sim_qp *qp)
{
	free(qp->tx_data);
	qp->tx_data = NULL;
	qp->tx_state = TX_IDLE;
}

static void qp_set_err(struct sim_qp *qp)
{
	if (qp->state == IBV_QPS_ERR)
		return;
	qp->state = IBV_QPS_ERR;
	qp->qp.state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	tx_drop(qp);
	qp->rnr_waiting = false;
	qp->rd_active = false;
	qp->rx_active = false;
	/* an SRQ-attached QP that enters the error state takes no more receive WQEs: the Last WQE
	 * Reached affiliated event (IBA; mlx5_ib's IB_EVENT_QP_LAST_WQE_REACHED), so that its
	 * owner knows when it may destroy the QP */
	if (qp->srq)
		sim_async_event(qp->sc, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->qp);
}

void engine_qp_to_err(struct sim_qp *qp)
{
	qp_set_err(qp);
}

/* RESET: counters and records back to zero, as libmlx5 and the hardware do. */
void engine_qp_reset(struct sim_qp *qp)
{
	tx_drop(qp);
	qp->dbrec[0] = 0;
	qp->dbrec[1] = 0;
	qp->sq_pc = qp->sq_db_seen = qp->sq_db_covered = 0;
	qp->sq_db_pending_since = 0;
	qp->out_head = qp->out_tail = 0;
	qp->next_seq = 0;
	qp->rnr_waiting = false;
	qp->rq_ci = 0;
	qp->exp_seq = 0;
	qp->ack_pending = 0;
	qp->rx_active = false;
	qp->rd_active = false;
	qp->bad = 0;
	qp->rx_dead = false;
	memset(qp->atom_cache, 0, sizeof(qp->atom_cache));
	qp->poisoned = false;
	qp->db_dead = false;
	/* The registers are the model's own memory (the application only writes them): clear them,
	 * so that the first doorbell after RESET differs from whatever was there before. */
	memset(qp->bf, 0, 2 * SIM_BF_SIZE);
	for (int h = 0; h < 2; h++) {
		qp->bf_pend[h] = false;
		memset(qp->bf_shadow[h], 0, SIM_BF_SIZE);
		qp->bf_last[h] = 0;
	}
}

/* ------------------------------------------------------------------ memory access checks */

/* The memory a key names, if [addr, addr+len) is inside its region, the region belongs to the
 * QP's protection domain, and its access flags include need. */
static void *mr_ptr(struct sim_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
		    const char **why)
{
	struct sim_mr *m = sim_mr_lookup(qp->sc, key);

	*why = "";
	if (!m) {
		*why = "key not registered";
		return NULL;
	}
	if (pd_prot(m->mr.pd) != pd_prot(qp->qp.pd)) {
		*why = "memory region of another protection domain";
		return NULL;
	}
	if (addr < m->iova || len > m->length || addr - m->iova > m->length - len) {
		*why = "outside the memory region";
		return NULL;
	}
	if ((m->access & need) != need) {
		*why = "access flags do not allow it";
		return NULL;
	}
	return (void *)(m->addr + (uintptr_t)(addr - m->iova));
}

/* ------------------------------------------------------------------ WQE decoding */

struct wsge {
	uint64_t addr;         /* data: the address; inline: offset of the payload in wqe.b */
	uint32_t len, lkey;
	bool inl;
};

struct wqe {
	uint32_t pc;
	uint16_t idx;
	uint8_t opcode, opmod, ds, fm_ce_se;
	uint32_t bbs;
	uint32_t imm;          /* raw, network order */
	uint64_t raddr;
	uint32_t rkey;
	uint64_t op[4];
	uint32_t asize;        /* atomic operand size */
	uint32_t nsge;
	struct wsge sge[64];
	bool inl;
	uint32_t inl_len;
	uint32_t total;
	struct sim_av av;      /* DCI: the address segment */
	uint8_t b[1024];
};

/* Copy the WQE out of the ring (wrapping at the end) and check everything hardware checks.
 * Returns 0 or an error syndrome; *why names the fault. */
static int decode(struct sim_qp *qp, uint32_t pc, uint32_t db, struct wqe *w, const char **why,
		  char *whybuf, size_t whylen)
{
	uint32_t mask = qp->sq_wqe_cnt - 1, off, end;
	uint8_t *first = qp->sq_buf + ((pc & mask) << 6);

	memset(w, 0, offsetof(struct wqe, b));
	w->pc = pc;
	w->opcode = first[3];
	w->idx = (uint16_t)(first[1] << 8 | first[2]);
	w->opmod = first[0];
	w->ds = first[7] & 0x3f;
	w->fm_ce_se = first[11];
	memcpy(&w->imm, first + 12, 4);
	if (w->idx != (pc & 0xffff)) {
		snprintf(whybuf, whylen, "ctrl WQE index 0x%x differs from the producer count 0x%x",
			 w->idx, pc & 0xffff);
		*why = whybuf;
		w->idx = pc & 0xffff;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	if ((uint32_t)(first[4] << 16 | first[5] << 8 | first[6]) != qp->qpn) {
		snprintf(whybuf, whylen, "ctrl QPN 0x%x is not this QP",
			 first[4] << 16 | first[5] << 8 | first[6]);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
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
	if (w->bbs > qp->sq_wqe_cnt || (int32_t)(db - (pc + w->bbs)) < 0) {
		snprintf(whybuf, whylen, "DS %u runs past the doorbell record (0x%x)", w->ds, db & 0xffff);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	for (uint32_t i = 0; i < w->bbs; i++)
		memcpy(w->b + i * 64, qp->sq_buf + (((pc + i) & mask) << 6), 64);
	if ((w->b[8] || w->b[9] || w->b[10] || (w->fm_ce_se & 0x11)) &&
	    !sim_reserved_ignored("ctrl bytes 8-11")) {
		snprintf(whybuf, whylen, "stale bytes in ctrl bytes 8-11 (%02x %02x %02x %02x)",
			 w->b[8], w->b[9], w->b[10], w->b[11]);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	end = w->ds * 16;
	off = 16;
	if (qp->dc_type == SIM_DCI && w->opcode != MLX5_OPCODE_NOP) {
		uint32_t n = av_parse(w->b + off, end - off, &w->av, whybuf, whylen);
		if (!n) {
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		off += n;
	}
	switch (w->opcode) {
	case MLX5_OPCODE_NOP:
		return 0;
	case MLX5_OPCODE_SEND:
	case MLX5_OPCODE_SEND_IMM:
		break;
	case MLX5_OPCODE_RDMA_WRITE:
	case MLX5_OPCODE_RDMA_WRITE_IMM:
	case MLX5_OPCODE_RDMA_READ:
	case MLX5_OPCODE_ATOMIC_CS:
	case MLX5_OPCODE_ATOMIC_FA:
	case MLX5_OPCODE_ATOMIC_MASKED_CS:
	case MLX5_OPCODE_ATOMIC_MASKED_FA: {
		if (end < off + 16) {
			snprintf(whybuf, whylen, "%s without a remote address segment (DS %u)",
				 opname(w->opcode), w->ds);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		struct mlx5_wqe_raddr_seg *r = (void *)(w->b + off);
		w->raddr = be64toh(r->raddr);
		w->rkey = be32toh(r->rkey);
		if (r->reserved && !sim_reserved_ignored("the raddr segment's reserved word")) {
			snprintf(whybuf, whylen, "stale bytes in the raddr segment's reserved field (0x%08x)",
				 be32toh(r->reserved));
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		off += 16;
		break;
	}
	default:
		snprintf(whybuf, whylen, "opcode 0x%02x is unknown or not supported by the model",
			 w->opcode);
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	if (w->opmod && w->opcode != MLX5_OPCODE_ATOMIC_MASKED_CS &&
	    w->opcode != MLX5_OPCODE_ATOMIC_MASKED_FA) {
		snprintf(whybuf, whylen, "opmod 0x%02x set on %s", w->opmod, opname(w->opcode));
		*why = whybuf;
		return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	/* atomic operand segments */
	if (w->opcode == MLX5_OPCODE_ATOMIC_CS || w->opcode == MLX5_OPCODE_ATOMIC_FA) {
		struct mlx5_wqe_atomic_seg *a = (void *)(w->b + off);
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
		if (w->opmod != 0x08 && w->opmod != 0x09) {
			snprintf(whybuf, whylen, "masked atomic opmod 0x%02x (want 0x08 or 0x09)", w->opmod);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
		w->asize = w->opmod == 0x08 ? 4 : 8;
		segsz = (w->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS && w->asize == 8) ? 32 : 16;
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
	/* data: inline segments and data segments, in any order (e.g. an inline header followed by
	 * pointers to the payload), gathered in the order they appear */
	{
		uint32_t inl_total = 0;
		while (off < end) {
			uint32_t bc = be32toh(*(__be32 *)(w->b + off));
			struct wsge *g = &w->sge[w->nsge++];
			memset(g, 0, sizeof(*g));
			if (bc & MLX5_INLINE_SEG) {
				uint32_t len = bc & ~MLX5_INLINE_SEG;
				if (w->opcode == MLX5_OPCODE_RDMA_READ || w->asize) {
					snprintf(whybuf, whylen, "inline segment in %s", opname(w->opcode));
					*why = whybuf;
					return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
				}
				inl_total += len;
				/* [inferred] a DCI's inline data is bounded by its WQE size only: UCX
				 * creates DCIs with max_inline_data 0 and sends inline up to that size */
				if (qp->dc_type != SIM_DCI &&
				    (len > qp->max_inline || inl_total > qp->max_inline)) {
					snprintf(whybuf, whylen, "inline length %u over max_inline_data %u",
						 inl_total, qp->max_inline);
					*why = whybuf;
					return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
				}
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
	}
	if (w->asize) {
		if (w->nsge != 1 || w->sge[0].len != w->asize) {
			snprintf(whybuf, whylen, "%s needs one %u-byte data segment for the result",
				 opname(w->opcode), w->asize);
			*why = whybuf;
			return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		}
	}
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

static void trace_wqe(struct sim_qp *qp, const struct wqe *w)
{
	sim_trace("wqe qp 0x%x idx 0x%x %s opmod 0x%x ds %u fm_ce_se 0x%02x%s%s%s imm 0x%08x",
		  qp->qpn, w->idx, opname(w->opcode), w->opmod, w->ds, w->fm_ce_se,
		  (w->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) ? " CE" : "",
		  (w->fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? " SE" : "",
		  (w->fm_ce_se & 0xe0) ? " FENCE" : "", be32toh(w->imm));
	if (w->av.len)
		av_trace(&w->av);
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

/* ------------------------------------------------------------------ requester */

static struct sq_rec *rec_at(struct sim_qp *qp, uint32_t i)
{
	return &qp->out[i % SIM_MAX_OUTSTANDING];
}

/* One attempt of the transport timer: the local ACK timeout (4.096 us << timeout), kept between
 * 25 ms (a busy machine must not look like a lost packet too often) and RVXSIM_RETRY_TIMEOUT_MS
 * divided by the attempts, so that a dead peer is declared within that bound. */
static uint64_t retry_interval_ns(struct sim_qp *qp)
{
	uint64_t cap = (uint64_t)sim_env.retry_timeout_ms * 1000000ull / (qp->attr.retry_cnt + 1u);
	uint64_t t = qp->attr.timeout == 0 || qp->attr.timeout > 31 ? cap :
		     4096ull << qp->attr.timeout;

	if (t < 25000000ull)
		t = 25000000ull;
	return MIN(t, MAX(cap, 25000000ull));
}

static uint64_t rnr_timer_ns(uint32_t code)
{
	/* IB encoding of min_rnr_timer, in microseconds (0 means 655.36 ms) */
	static const uint32_t us[32] = { 655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480,
					 640, 960, 1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360,
					 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760,
					 327680, 491520 };
	return (uint64_t)us[code & 31] * 1000ull;
}

static void hdr_init(struct sim_qp *qp, struct pkt *p, uint8_t type, uint32_t seq)
{
	memset(p, 0, PKT_HDR);
	p->type = type;
	p->src_lid = qp->sc->lid;
	p->dst_lid = qp->attr.ah_attr.dlid;
	p->src_qpn = qp->qpn;
	p->dst_qpn = qp->attr.dest_qp_num;
	p->seq = seq;
	dc_hdr(qp, p);
}

/* Send as much of the current message as the peer's inbox takes. Returns true when done. */
static bool tx_pump(struct sim_qp *qp)
{
	struct sim_ctx *sc = qp->sc;
	uint8_t buf[PKT_HDR + SIM_MTU];
	struct pkt *p = (struct pkt *)buf;
	const struct pkt *h = (const struct pkt *)qp->tx_hdr;

	for (;;) {
		uint32_t n = MIN(SIM_MTU, qp->tx_len - qp->tx_off);
		memcpy(p, h, PKT_HDR);
		p->off = qp->tx_off;
		p->len = (p->type == PKT_WRITE || p->type == PKT_SEND) ? n : 0;
		p->flags = (qp->tx_off == 0 ? PKT_F_FIRST : 0) | (h->flags & (PKT_F_IMM | PKT_F_SE));
		if (p->type != PKT_WRITE && p->type != PKT_SEND)
			n = qp->tx_len;   /* READ and atomic requests are one packet */
		if (qp->tx_off + n >= qp->tx_len)
			p->flags |= PKT_F_LAST;
		if (p->len)
			memcpy(p->data, qp->tx_data + qp->tx_off, p->len);
		if (!fabric_send(sc, p->dst_lid, p))
			return false;
		qp->tx_off += n;
		if (qp->tx_off >= qp->tx_len)
			break;
	}
	/* the transport timer counts from the message's last packet, not from its first: a long
	 * message that the fabric took slowly is not "unanswered" while it is still going out */
	rec_at(qp, qp->tx_rec)->sent_ns = sim_now_ns();
	tx_drop(qp);
	return true;
}

/* Start one WQE: decode, check, then either complete it locally or begin its message. */
static int sq_start(struct sim_qp *qp, uint32_t db)
{
	struct sim_ctx *sc = qp->sc;
	static __thread struct wqe w;
	char whybuf[256];
	const char *why = NULL;
	struct sq_rec *r;
	struct pkt *h = (struct pkt *)qp->tx_hdr;
	int synd;
	uint64_t now = sim_now_ns();

	synd = decode(qp, qp->sq_pc, db, &w, &why, whybuf, sizeof(whybuf));
	if (!synd && qp->poisoned && w.idx == qp->poison_idx) {
		/* the doorbell that announced this WQE was faulty; its line is already out */
		qp->poisoned = false;
		synd = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		why = NULL;
	}
	/* a fence waits for every earlier READ/atomic to complete (strict ordering covers the rest) */
	if (!synd && (w.fm_ce_se & 0xe0) && qp->out_tail != qp->out_head) {
		for (uint32_t i = qp->out_tail; i != qp->out_head; i++)
			if (!rec_at(qp, i)->done)
				return 0;
	}
	/* a DCI serves one target at a time: a WQE for another one waits for the current one */
	if (!synd && w.av.len && !dc_connect(qp, &w.av))
		return 0;
	if (sim_env.trace && !synd)
		trace_wqe(qp, &w);
	r = rec_at(qp, qp->out_head);
	memset(r, 0, offsetof(struct sq_rec, sge));
	r->idx = w.idx;
	r->pc = qp->sq_pc;
	r->opcode = w.opcode;
	r->opmod = w.opmod;
	r->signaled = (w.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
	r->sent_ns = now;
	r->seq = qp->next_seq;
	if (w.opcode == MLX5_OPCODE_RDMA_WRITE || w.opcode == MLX5_OPCODE_RDMA_WRITE_IMM ||
	    w.opcode == MLX5_OPCODE_RDMA_READ)
		r->rdma_bytes = w.total;
	qp->out_head++;
	sc->wqes_executed++;
	sim_count_wqe(w.total);
	if (synd) {
		if (why)
			qp_fault(qp, qp->sq_pc, "%s", why);
		r->syndrome = synd;
		r->done = 1;
		qp->sq_pc += MAX(w.bbs, 1u);
		qp->bad = 1;
		return 1;
	}
	qp->sq_pc += w.bbs;
	if (sim_env.kill_peer_after >= 0 && !sc->peer_lost &&
	    sc->wqes_executed > (uint64_t)sim_env.kill_peer_after) {
		sc->peer_lost = true;
		sim_log("rvxsim: RVXSIM_KILL_PEER_AFTER=%ld reached: the link to every other LID is lost",
			sim_env.kill_peer_after);
	}
	if (w.opcode == MLX5_OPCODE_NOP) {
		r->done = 1;
		r->ready_ns = now + sim_env.delay_us * 1000ull;
		return 1;
	}
	qp->next_seq++;
	hdr_init(qp, h, 0, r->seq);
	h->total = w.total;
	h->raddr = w.raddr;
	h->rkey = w.rkey;
	h->imm = w.imm;
	if (w.opcode == MLX5_OPCODE_RDMA_WRITE_IMM || w.opcode == MLX5_OPCODE_SEND_IMM)
		h->flags |= PKT_F_IMM;
	if (w.fm_ce_se & MLX5_WQE_CTRL_SOLICITED)
		h->flags |= PKT_F_SE;
	switch (w.opcode) {
	case MLX5_OPCODE_RDMA_WRITE:
	case MLX5_OPCODE_RDMA_WRITE_IMM:
	case MLX5_OPCODE_SEND:
	case MLX5_OPCODE_SEND_IMM:
		h->type = (w.opcode == MLX5_OPCODE_SEND || w.opcode == MLX5_OPCODE_SEND_IMM) ? PKT_SEND
											     : PKT_WRITE;
		qp->tx_data = malloc(MAX(w.total, 1u));
		if (!qp->tx_data) {
			sim_log("rvxsim: out of memory for a %u-byte message", w.total);
			abort();
		}
		{
			uint32_t o = 0;
			for (uint32_t i = 0; i < w.nsge; i++) {
				const char *m;
				const void *src = w.sge[i].inl ? (const void *)(w.b + w.sge[i].addr) :
					mr_ptr(qp, w.sge[i].lkey, w.sge[i].addr, w.sge[i].len, 0, &m);
				memcpy(qp->tx_data + o, src, w.sge[i].len);
				o += w.sge[i].len;
			}
		}
		break;
	case MLX5_OPCODE_RDMA_READ:
		h->type = PKT_READ_REQ;
		break;
	default:
		h->type = PKT_ATOMIC;
		h->opmod = w.opcode;     /* carries which atomic */
		h->total = w.asize;
		h->op[0] = w.op[0];
		h->op[1] = w.op[1];
		h->op[2] = w.op[2];
		h->op[3] = w.op[3];
		break;
	}
	if (h->type == PKT_READ_REQ || h->type == PKT_ATOMIC) {
		r->nsge = w.nsge;
		for (uint32_t i = 0; i < w.nsge; i++) {
			const char *m;
			r->sge[i].addr = (uintptr_t)mr_ptr(qp, w.sge[i].lkey, w.sge[i].addr, w.sge[i].len,
							   IBV_ACCESS_LOCAL_WRITE, &m);
			r->sge[i].len = w.sge[i].len;
		}
		r->byte_cnt = w.total;
	}
	qp->tx_len = h->type == PKT_ATOMIC ? 1 : (h->type == PKT_READ_REQ ? 1 : w.total);
	qp->tx_off = 0;
	qp->tx_rec = qp->out_head - 1;
	qp->tx_state = TX_ACTIVE;
	if (h->type == PKT_READ_REQ || h->type == PKT_ATOMIC) {
		free(qp->tx_data);
		qp->tx_data = NULL;
	}
	/* a zero-length message is still one packet (tx_pump sends FIRST|LAST with no payload) */
	tx_pump(qp);
	return 1;
}

/* Retire completed records in order and write their CQEs. */
static int sq_retire(struct sim_qp *qp, uint64_t now)
{
	int work = 0;

	while (qp->out_tail != qp->out_head) {
		struct sq_rec *r = rec_at(qp, qp->out_tail);
		if (!r->done || (r->ready_ns && now < r->ready_ns))
			break;
		/* after an error every later WQE is flushed, whatever became of it */
		if (qp->state == IBV_QPS_ERR && !r->syndrome)
			r->syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
		if (r->signaled || r->syndrome)
			cqe_req(qp, r);
		if (r->rdma_bytes && !r->syndrome)
			sim_stats_rdma(qp->sc->index, r->opcode == MLX5_OPCODE_RDMA_READ, r->rdma_bytes);
		if (r->syndrome && r->syndrome != MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
			qp_set_err(qp);
		qp->out_tail++;
		work = 1;
	}
	return work;
}

static bool rec_wants_response(const struct sq_rec *r)
{
	return r->opcode == MLX5_OPCODE_RDMA_READ || r->opcode == MLX5_OPCODE_ATOMIC_CS ||
	       r->opcode == MLX5_OPCODE_ATOMIC_FA || r->opcode == MLX5_OPCODE_ATOMIC_MASKED_CS ||
	       r->opcode == MLX5_OPCODE_ATOMIC_MASKED_FA;
}

static void rewind_to(struct sim_qp *qp, uint32_t i);

static void rec_done(struct sim_qp *qp, struct sq_rec *r, uint8_t synd)
{
	(void)qp;
	if (r->done)
		return;
	r->done = 1;
	r->syndrome = synd;
	r->ready_ns = sim_now_ns() + sim_env.delay_us * 1000ull;
}

/* Everything with a sequence number below seq is acknowledged, except that a READ or atomic
 * completes only with its own response: an ACK or response past one still waiting for it means
 * that response was lost. Returns that record's index, or out_head when there is none. */
static uint32_t ack_below(struct sim_qp *qp, uint32_t seq)
{
	uint32_t i;

	for (i = qp->out_tail; i != qp->out_head; i++) {
		struct sq_rec *r = rec_at(qp, i);
		if ((int32_t)(r->seq - seq) >= 0)
			break;
		if (r->opcode == MLX5_OPCODE_NOP || r->done)
			continue;
		if (rec_wants_response(r))
			return i;
		rec_done(qp, r, 0);
	}
	return qp->out_head;
}

/* An implied NAK (IBA requester rules; the kernel's rxe does the same in check_psn): the READ or
 * atomic at record i missed its response while a later message was answered, so it and
 * everything after it go out again, counted as one transport retry. A go-back already under
 * way for the same message is not started twice; the transport timer covers a lost one. */
static void implied_nak(struct sim_qp *qp, uint32_t i)
{
	struct sq_rec *r = rec_at(qp, i);

	if (qp->rnr_waiting || (qp->seq_err_retry && qp->seq_err_seq == r->seq))
		return;
	if (qp->retry_left <= 0) {
		qp_fault(qp, r->idx, "transport retry count exceeded: the response of this %s never "
			 "came from lid 0x%x qp 0x%x", opname(r->opcode), qp->attr.ah_attr.dlid,
			 qp->attr.dest_qp_num);
		rec_done(qp, r, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
		r->ready_ns = 0;
		return;
	}
	qp->retry_left--;
	TRACE("qp 0x%x: wqe 0x%x (%s) answered past without its response: sending again from it "
	      "(%d retries left)", qp->qpn, r->idx, opname(r->opcode), qp->retry_left);
	qp->seq_err_retry = true;
	qp->seq_err_seq = r->seq;
	rewind_to(qp, i);
}

static struct sq_rec *rec_by_seq(struct sim_qp *qp, uint32_t seq)
{
	for (uint32_t i = qp->out_tail; i != qp->out_head; i++) {
		struct sq_rec *r = rec_at(qp, i);
		if (r->seq == seq && r->opcode != MLX5_OPCODE_NOP)
			return r;
	}
	return NULL;
}

static void scatter(struct sq_rec *r, uint32_t off, const uint8_t *data, uint32_t len)
{
	for (uint32_t i = 0; i < r->nsge && len; i++) {
		if (off >= r->sge[i].len) {
			off -= r->sge[i].len;
			continue;
		}
		uint32_t n = MIN(len, r->sge[i].len - off);
		memcpy((uint8_t *)(uintptr_t)r->sge[i].addr + off, data, n);
		data += n;
		len -= n;
		off = 0;
	}
}

static void handle_response(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	struct sq_rec *r;
	uint32_t i;

	if (qp->state != IBV_QPS_RTS)
		return;
	if (p->src_qpn != qp->attr.dest_qp_num || p->src_lid != qp->attr.ah_attr.dlid ||
	    (qp->dc_type == SIM_DCI && !dc_response_ok(qp, p)))
		return;
	switch (p->type) {
	case PKT_ACK:
		qp->retry_left = qp->attr.retry_cnt;
		if ((i = ack_below(qp, p->seq + 1)) != qp->out_head) {
			implied_nak(qp, i);
			break;
		}
		if ((int32_t)(p->seq - qp->rnr_seq) >= 0)
			qp->rnr_left = qp->attr.rnr_retry;
		break;
	case PKT_NAK:
		if ((i = ack_below(qp, p->seq)) != qp->out_head) {
			implied_nak(qp, i);
			break;
		}
		r = rec_by_seq(qp, p->seq);
		if (!r || r->done)
			break;
		if (p->syndrome == RNR_SYND) {
			if (qp->rnr_waiting)
				break;
			if (qp->attr.rnr_retry != 7 && qp->rnr_left <= 0) {
				qp_fault(qp, r->idx, "RNR retry count (%u) exceeded: no receive WQE at "
					 "qp 0x%x", qp->attr.rnr_retry, qp->attr.dest_qp_num);
				rec_done(qp, r, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
				break;
			}
			if (qp->attr.rnr_retry != 7)
				qp->rnr_left--;
			qp->rnr_waiting = true;
			qp->rnr_seq = p->seq;
			qp->rnr_wait_until = sim_now_ns() + rnr_timer_ns(p->rnr_timer);
			if (qp->attr.rnr_retry == 7)
				TRACE("qp 0x%x: RNR NAK for wqe 0x%x, retry in %llu us (rnr_retry 7: no limit)",
				      qp->qpn, r->idx, (unsigned long long)rnr_timer_ns(p->rnr_timer) / 1000);
			else
				TRACE("qp 0x%x: RNR NAK for wqe 0x%x, retry in %llu us (%d retries left)",
				      qp->qpn, r->idx, (unsigned long long)rnr_timer_ns(p->rnr_timer) / 1000,
				      qp->rnr_left);
			break;
		}
		qp_fault(qp, r->idx, "%s from qp 0x%x lid 0x%x: %s",
			 p->syndrome == MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR ? "remote access error" :
			 p->syndrome == MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR ? "remote invalid request" :
			 "remote operational error", p->src_qpn, p->src_lid,
			 p->len ? (const char *)p->data : "(no reason)");
		rec_done(qp, r, p->syndrome);
		break;
	case PKT_READ_RESP:
		qp->retry_left = qp->attr.retry_cnt;
		if ((i = ack_below(qp, p->seq)) != qp->out_head) {
			implied_nak(qp, i);
			break;
		}
		r = rec_by_seq(qp, p->seq);
		if (!r || r->done)
			break;
		/* Responses are taken in order only. One that does not continue where the last one
		 * ended follows a gap (responses that came while the READ was being re-sent after a
		 * timeout are lost): it is dropped, and the READ completes from the repeated
		 * request's responses, as a requester discards an out-of-sequence response PSN. */
		if (p->off != r->rd_next) {
			TRACE("qp 0x%x: READ response at offset %u, expected %u: dropped", qp->qpn,
			      p->off, r->rd_next);
			break;
		}
		r->rd_next += p->len;
		r->sent_ns = sim_now_ns(); /* an answer: the transport timer starts again */
		scatter(r, p->off, p->data, p->len);
		if (p->flags & PKT_F_LAST) {
			r->byte_cnt = p->total;
			rec_done(qp, r, 0);
		}
		break;
	case PKT_ATOMIC_RESP:
		qp->retry_left = qp->attr.retry_cnt;
		if ((i = ack_below(qp, p->seq)) != qp->out_head) {
			implied_nak(qp, i);
			break;
		}
		r = rec_by_seq(qp, p->seq);
		if (!r || r->done)
			break;
		/* [inferred] the returned old value is written in host order */
		if (p->total == 4) {
			uint32_t v = (uint32_t)p->op[0];
			scatter(r, 0, (uint8_t *)&v, 4);
		} else {
			scatter(r, 0, (uint8_t *)&p->op[0], 8);
		}
		r->byte_cnt = 8;
		rec_done(qp, r, 0);
		break;
	}
	(void)sc;
}

/* ------------------------------------------------------------------ responder */

static bool send_resp(struct sim_qp *qp, struct pkt *p)
{
	return fabric_send(qp->sc, p->dst_lid, p);
}

/* A NAK carries the responder's reason as text, so the requester's one fault line can name it. */
static bool send_nak(struct sim_qp *qp, const struct pkt *req, uint8_t synd, const char *why)
{
	uint8_t buf[PKT_HDR + 256];
	struct pkt *n = (struct pkt *)buf;
	hdr_init(qp, n, PKT_NAK, req->seq);
	n->dst_lid = req->src_lid;
	n->dst_qpn = req->src_qpn;
	n->syndrome = synd;
	n->rnr_timer = qp->attr.min_rnr_timer;
	if (why) {
		n->len = (uint32_t)MIN(strlen(why), 255u);
		memcpy(n->data, why, n->len);
		n->data[n->len++] = 0;
	}
	return send_resp(qp, n);
}

/* Find the next receive WQE without consuming it. Returns false if none is posted. */
static bool rq_peek(struct sim_qp *qp, uint8_t **segs, uint32_t *nsegs, uint32_t *index)
{
	if (qp->srq) {
		struct sim_srq *s = qp->srq;
		if ((uint16_t)(be32toh(*s->dbrec) - s->hw_count) == 0)
			return false;
		*index = s->hw_head & (s->wqe_cnt - 1);
		*segs = s->buf + (size_t)*index * s->stride + 16;
		*nsegs = s->max_gs;
		return true;
	}
	if (!qp->rq_wqe_cnt)
		return false;
	uint16_t avail = (uint16_t)(be32toh(qp->dbrec[MLX5_RCV_DBR]) - qp->rq_ci);
	if (avail == 0)
		return false;
	if (avail > qp->rq_wqe_cnt && !qp->bad) {
		qp_fault(qp, qp->rq_ci, "receive doorbell record 0x%x is past the ring (consumer 0x%x, "
			 "wqe_cnt %u)", be32toh(qp->dbrec[MLX5_RCV_DBR]) & 0xffff, qp->rq_ci & 0xffff,
			 qp->rq_wqe_cnt);
		qp->bad = 1;
	}
	*index = qp->rq_ci & 0xffff;
	*segs = qp->rq_buf + (size_t)(qp->rq_ci & (qp->rq_wqe_cnt - 1)) * qp->rq_stride;
	*nsegs = qp->rq_stride / 16;
	return true;
}

/* The segments of receive WQE idx (an SRQ slot, or the 16-bit RQ counter at the time). */
static void rq_at(struct sim_qp *qp, uint32_t idx, uint8_t **segs, uint32_t *nsegs)
{
	if (qp->srq) {
		*segs = qp->srq->buf + (size_t)(idx & (qp->srq->wqe_cnt - 1)) * qp->srq->stride + 16;
		*nsegs = qp->srq->max_gs;
	} else {
		*segs = qp->rq_buf + (size_t)(idx & (qp->rq_wqe_cnt - 1)) * qp->rq_stride;
		*nsegs = qp->rq_stride / 16;
	}
}

static void rq_consume(struct sim_qp *qp)
{
	if (qp->srq) {
		struct sim_srq *s = qp->srq;
		uint8_t *w = s->buf + (size_t)(s->hw_head & (s->wqe_cnt - 1)) * s->stride;
		/* [inferred] the engine follows next_wqe_index of the WQE it just consumed */
		s->hw_head = be16toh(((struct mlx5_wqe_srq_next_seg *)w)->next_wqe_index);
		s->hw_count++;
		if (s->limit) {
			uint16_t avail = (uint16_t)(be32toh(*s->dbrec) - s->hw_count);
			if (avail < s->limit) {
				s->limit = 0;
				sim_async_event(qp->sc, IBV_EVENT_SRQ_LIMIT_REACHED, &s->srq);
			}
		}
	} else {
		qp->rq_ci++;
	}
}

/* Check a receive WQE's segments against the message length. */
static int rq_check(struct sim_qp *qp, uint8_t *segs, uint32_t nsegs, uint32_t total, uint32_t idx)
{
	uint64_t room = 0;

	for (uint32_t i = 0; i < nsegs; i++) {
		struct mlx5_wqe_data_seg *d = (void *)(segs + 16 * i);
		uint32_t len = be32toh(d->byte_count), lkey = be32toh(d->lkey);
		const char *m;
		if (lkey == MLX5_INVALID_LKEY)
			break;
		if (!mr_ptr(qp, lkey, be64toh(d->addr), len, IBV_ACCESS_LOCAL_WRITE, &m)) {
			qp_fault(qp, idx, "receive WQE segment %u: lkey 0x%x addr 0x%llx len %u: %s", i,
				 lkey, (unsigned long long)be64toh(d->addr), len, m);
			return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
		}
		room += len;
	}
	if (total > room) {
		qp_fault(qp, idx, "receive of %u bytes into a receive WQE of %llu bytes", total,
			 (unsigned long long)room);
		return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	}
	return 0;
}

static void rq_scatter(struct sim_qp *qp, uint8_t *segs, uint32_t nsegs, uint32_t off,
		       const uint8_t *data, uint32_t len)
{
	for (uint32_t i = 0; i < nsegs && len; i++) {
		struct mlx5_wqe_data_seg *d = (void *)(segs + 16 * i);
		uint32_t sl = be32toh(d->byte_count), lkey = be32toh(d->lkey);
		const char *m;
		if (lkey == MLX5_INVALID_LKEY)
			break;
		if (off >= sl) {
			off -= sl;
			continue;
		}
		uint32_t n = MIN(len, sl - off);
		uint8_t *dst = mr_ptr(qp, lkey, be64toh(d->addr), sl, IBV_ACCESS_LOCAL_WRITE, &m);
		if (dst)
			memcpy(dst + off, data, n);
		data += n;
		len -= n;
		off = 0;
	}
}

static void cqe_resp(struct sim_qp *qp, const struct pkt *p, uint8_t opcode, uint32_t wqe_idx)
{
	uint8_t c[64];
	bool grh = qp->attr.ah_attr.is_global;

	memset(c, 0, sizeof(c));
	*(__be16 *)(c + 22) = htobe16(sim_env.link_eth ? 0 : p->src_lid);
	*(__be32 *)(c + 24) = htobe32((grh ? 2u << 28 : 0) | (uint32_t)(qp->attr.ah_attr.sl & 0xf) << 24 |
				      p->src_qpn);
	if (qp->srq)
		*(__be32 *)(c + 32) = htobe32(qp->srq->srqn);
	if (opcode != MLX5_CQE_RESP_SEND)
		memcpy(c + 36, &p->imm, 4);
	else
		*(__be32 *)(c + 36) = htobe32(qp->attr.pkey_index);
	*(__be32 *)(c + 44) = htobe32(p->total);
	*(__be32 *)(c + 56) = htobe32(qp->qpn);
	*(__be16 *)(c + 60) = htobe16(wqe_idx);
	c[63] = opcode << 4 | ((p->flags & PKT_F_SE) ? 2 : 0);
	engine_write_cqe(qp->rcq, c, (p->flags & PKT_F_SE) != 0);
}

static void responder_error(struct sim_qp *qp, const struct pkt *p, uint8_t local_synd,
			    uint8_t nak_synd, bool consume, uint32_t wqe_idx, const char *why)
{
	send_nak(qp, p, nak_synd, why);
	if (consume) {
		rq_consume(qp);
		cqe_resp_err(qp, wqe_idx, local_synd);
		if (qp->dc_type != SIM_DCT)   /* [inferred] a DCT stays ready; only that connection dies */
			qp_set_err(qp);
	}
	qp->rx_active = false;
	qp->rx_dead = true;     /* drop the rest: the requester is now in error */
}

/* Execute one request packet. Returns false when it cannot proceed yet (no room to answer). */
static bool handle_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	const char *m;
	int need;
	bool dup;

	if (p->type == PKT_UD) {
		sim_ud_receive(qp, p);
		return true;
	}
	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)
		return true;    /* silently dropped, as by a QP that is not ready */
	if (p->src_qpn != qp->attr.dest_qp_num || p->src_lid != qp->attr.ah_attr.dlid || qp->rx_dead)
		return true;
	if ((int32_t)(p->seq - qp->exp_seq) > 0)
		return true;    /* a gap: something before it was refused; the requester goes back */
	dup = p->seq != qp->exp_seq;
	if (dup && (p->type == PKT_WRITE || p->type == PKT_SEND)) {
		/* a retransmission of something already done: acknowledge again, do nothing else */
		if (p->flags & PKT_F_LAST)
			qp->ack_pending = qp->exp_seq;
		return true;
	}
	if (!fabric_has_room(sc, p->src_lid, true))
		return false;
	if (dup && p->type == PKT_ATOMIC) {
		/* an atomic is never executed twice: answer from the saved result */
		for (int i = 0; i < ATOMIC_CACHE; i++)
			if (qp->atom_cache[i].valid && qp->atom_cache[i].seq == p->seq) {
				struct pkt r;
				hdr_init(qp, &r, PKT_ATOMIC_RESP, p->seq);
				r.dst_lid = p->src_lid;
				r.dst_qpn = p->src_qpn;
				r.total = p->total;
				r.op[0] = qp->atom_cache[i].old;
				send_resp(qp, &r);
				break;
			}
		return true;
	}
	switch (p->type) {
	case PKT_WRITE:
		if (p->flags & PKT_F_FIRST) {
			need = IBV_ACCESS_REMOTE_WRITE;
			if (sim_env.rdma_deny[qp->sc->index] ||
			    !(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
			    (p->total && !mr_ptr(qp, p->rkey, p->raddr, p->total, need, &m))) {
				if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
					m = "QP access flags do not allow remote write";
				if (sim_env.rdma_deny[qp->sc->index])
					m = "RVXSIM_RDMA_DENY: this device refuses RDMA";
				char why[200];
				snprintf(why, sizeof(why), "RDMA_WRITE rkey 0x%x raddr 0x%llx len %u: %s",
					 p->rkey, (unsigned long long)p->raddr, p->total, m);
				responder_error(qp, p, 0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, false, 0, why);
				return true;
			}
			if (p->flags & PKT_F_IMM) {
				uint8_t *segs;
				uint32_t ns, idx;
				if (!rq_peek(qp, &segs, &ns, &idx)) {
					send_nak(qp, p, RNR_SYND, NULL);
					return true;
				}
			}
			qp->rx_active = true;
		}
		if (!qp->rx_active)
			return true;
		if (p->len) {
			uint8_t *dst = mr_ptr(qp, p->rkey, p->raddr + p->off, p->len, IBV_ACCESS_REMOTE_WRITE, &m);
			if (dst)
				memcpy(dst, p->data, p->len);
		}
		if (p->flags & PKT_F_LAST) {
			qp->rx_active = false;
			if (p->flags & PKT_F_IMM) {
				uint8_t *segs;
				uint32_t ns, idx;
				if (rq_peek(qp, &segs, &ns, &idx)) {
					rq_consume(qp);
					cqe_resp(qp, p, MLX5_CQE_RESP_WR_IMM, idx);
				}
			}
			qp->exp_seq++;
			qp->ack_pending = qp->exp_seq;
		}
		return true;
	case PKT_SEND: {
		uint8_t *segs;
		uint32_t ns, idx;
		/* the message owns its receive WQE from its first packet on, so messages of other
		 * senders sharing the SRQ (DC initiators, RC QPs) cannot take it */
		if ((p->flags & PKT_F_FIRST) && !(qp->rx_active && qp->rx_seq == p->seq)) {
			if (sc->forced_rnr < sim_env.force_rnr) {
				sc->forced_rnr++;
				TRACE("qp 0x%x: RVXSIM_FORCE_RNR: RNR NAK to qp 0x%x", qp->qpn, p->src_qpn);
				send_nak(qp, p, RNR_SYND, NULL);
				return true;
			}
			if (!rq_peek(qp, &segs, &ns, &idx)) {
				TRACE("qp 0x%x: no receive WQE: RNR NAK to qp 0x%x", qp->qpn, p->src_qpn);
				send_nak(qp, p, RNR_SYND, NULL);
				return true;
			}
			int s = rq_check(qp, segs, ns, p->total, idx);
			if (s) {
				responder_error(qp, p, s, s == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR ?
						MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR :
						MLX5_CQE_SYNDROME_REMOTE_OP_ERR, true, idx,
						s == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR ?
						"SEND longer than the receive WQE" :
						"receive WQE with a bad lkey or address");
				return true;
			}
			rq_consume(qp);
			qp->rx_wqe = idx;
			qp->rx_seq = p->seq;
			qp->rx_active = true;
		}
		if (!qp->rx_active)
			return true;
		idx = qp->rx_wqe;
		rq_at(qp, idx, &segs, &ns);
		rq_scatter(qp, segs, ns, p->off, p->data, p->len);
		if (p->flags & PKT_F_LAST) {
			qp->rx_active = false;
			cqe_resp(qp, p, (p->flags & PKT_F_IMM) ? MLX5_CQE_RESP_SEND_IMM : MLX5_CQE_RESP_SEND,
				 idx);
			qp->exp_seq++;
			qp->ack_pending = qp->exp_seq;
		}
		return true;
	}
	case PKT_READ_REQ: {
		uint8_t buf[PKT_HDR + SIM_MTU];
		struct pkt *r = (struct pkt *)buf;
		uint8_t *src;
		if (!qp->rd_active || qp->rd_seq != p->seq) {
			if (sim_env.rdma_deny[qp->sc->index] ||
			    !(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) ||
			    (p->total && !mr_ptr(qp, p->rkey, p->raddr, p->total, IBV_ACCESS_REMOTE_READ, &m))) {
				if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
					m = "QP access flags do not allow remote read";
				if (sim_env.rdma_deny[qp->sc->index])
					m = "RVXSIM_RDMA_DENY: this device refuses RDMA";
				char why[200];
				snprintf(why, sizeof(why), "RDMA_READ rkey 0x%x raddr 0x%llx len %u: %s",
					 p->rkey, (unsigned long long)p->raddr, p->total, m);
				responder_error(qp, p, 0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, false, 0, why);
				return true;
			}
			qp->rd_active = true;
			qp->rd_seq = p->seq;
			qp->rd_off = 0;
		}
		src = p->total ? mr_ptr(qp, p->rkey, p->raddr, p->total, IBV_ACCESS_REMOTE_READ, &m) : NULL;
		do {
			uint32_t n = MIN(SIM_MTU, p->total - qp->rd_off);
			hdr_init(qp, r, PKT_READ_RESP, p->seq);
			r->dst_lid = p->src_lid;
			r->dst_qpn = p->src_qpn;
			r->total = p->total;
			r->off = qp->rd_off;
			r->len = n;
			if (n && src)
				memcpy(r->data, src + qp->rd_off, n);
			if (qp->rd_off + n >= p->total)
				r->flags |= PKT_F_LAST;
			if (!send_resp(qp, r))
				return false;
			qp->rd_off += n;
		} while (qp->rd_off < p->total);
		qp->rd_active = false;
		if (!dup)
			qp->exp_seq++;   /* a repeated READ is served again (reads are idempotent) */
		return true;
	}
	case PKT_ATOMIC: {
		struct pkt r;
		uint32_t sz = p->total;
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) ||
		    !mr_ptr(qp, p->rkey, p->raddr, sz, IBV_ACCESS_REMOTE_ATOMIC, &m) ||
		    (p->raddr & (sz - 1))) {
			if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC))
				m = "QP access flags do not allow remote atomics";
			else if (mr_ptr(qp, p->rkey, p->raddr, sz, IBV_ACCESS_REMOTE_ATOMIC, &m))
				m = "address not naturally aligned";
			char why[200];
			snprintf(why, sizeof(why), "%s rkey 0x%x raddr 0x%llx: %s", opname(p->opmod),
				 p->rkey, (unsigned long long)p->raddr, m);
			responder_error(qp, p, 0, (p->raddr & (sz - 1)) ?
					MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR :
					MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, false, 0, why);
			return true;
		}
		void *t = mr_ptr(qp, p->rkey, p->raddr, sz, IBV_ACCESS_REMOTE_ATOMIC, &m);
		uint64_t old;
		/* [inferred] the target is a native-endian integer (host endianness mode) */
		if (sz == 8) {
			_Atomic uint64_t *a = t;
			uint64_t cur = atomic_load(a), nv;
			do {
				old = cur;
				switch (p->opmod) {
				case MLX5_OPCODE_ATOMIC_CS:
					nv = old == p->op[1] ? p->op[0] : old;
					break;
				case MLX5_OPCODE_ATOMIC_FA:
					nv = old + p->op[0];
					break;
				case MLX5_OPCODE_ATOMIC_MASKED_CS:
					nv = ((old ^ p->op[1]) & p->op[3]) ? old :
					     (old & ~p->op[2]) | (p->op[0] & p->op[2]);
					break;
				default: {  /* masked FA: carries stop at field boundaries */
					uint64_t res = 0, carry = 0;
					for (int b = 0; b < 64; b++) {
						uint64_t s = ((old >> b) & 1) + ((p->op[0] >> b) & 1) + carry;
						res |= (s & 1) << b;
						carry = (p->op[1] >> b & 1) ? 0 : s >> 1;
					}
					nv = res;
				}
				}
			} while (!atomic_compare_exchange_weak(a, &cur, nv));
		} else {
			_Atomic uint32_t *a = t;
			uint32_t cur = atomic_load(a), nv, o;
			uint32_t o0 = (uint32_t)p->op[0], o1 = (uint32_t)p->op[1];
			uint32_t o2 = (uint32_t)p->op[2], o3 = (uint32_t)p->op[3];
			do {
				o = cur;
				if (p->opmod == MLX5_OPCODE_ATOMIC_MASKED_CS) {
					nv = ((o ^ o1) & o3) ? o : (o & ~o2) | (o0 & o2);
				} else {
					uint32_t res = 0, carry = 0;
					for (int b = 0; b < 32; b++) {
						uint32_t s = ((o >> b) & 1) + ((o0 >> b) & 1) + carry;
						res |= (s & 1) << b;
						carry = (o1 >> b & 1) ? 0 : s >> 1;
					}
					nv = res;
				}
			} while (!atomic_compare_exchange_weak(a, &cur, nv));
			old = o;
		}
		hdr_init(qp, &r, PKT_ATOMIC_RESP, p->seq);
		r.dst_lid = p->src_lid;
		r.dst_qpn = p->src_qpn;
		r.total = sz;
		r.op[0] = old;
		send_resp(qp, &r);
		qp->atom_cache[qp->atom_next % ATOMIC_CACHE].valid = true;
		qp->atom_cache[qp->atom_next % ATOMIC_CACHE].seq = p->seq;
		qp->atom_cache[qp->atom_next % ATOMIC_CACHE].old = old;
		qp->atom_next++;
		qp->exp_seq++;
		return true;
	}
	}
	return true;
}

static struct sim_qp *qp_by_num(struct sim_ctx *sc, uint32_t qpn)
{
	return sim_qp_lookup(sc, qpn);
}

static const char *pktname(uint8_t t)
{
	switch (t) {
	case PKT_WRITE: return "WRITE";
	case PKT_SEND: return "SEND";
	case PKT_READ_REQ: return "READ_REQ";
	case PKT_ATOMIC: return "ATOMIC";
	case PKT_ACK: return "ACK";
	case PKT_NAK: return "NAK";
	case PKT_READ_RESP: return "READ_RESP";
	case PKT_ATOMIC_RESP: return "ATOMIC_RESP";
	case PKT_UD: return "UD";
	default: return "?";
	}
}

static void trace_pkt(const struct pkt *p)
{
	sim_trace("pkt %s lid 0x%x qp 0x%x -> lid 0x%x qp 0x%x seq %u off %u len %u total %u%s%s",
		  pktname(p->type), p->src_lid, p->src_qpn, p->dst_lid, p->dst_qpn, p->seq, p->off,
		  p->len, p->total, (p->flags & PKT_F_FIRST) ? " FIRST" : "",
		  (p->flags & PKT_F_LAST) ? " LAST" : "");
}

/* RVXSIM_DROP_READ_RESP: the first response packet of each of the first N READs/atomics answered
 * to this device is lost, once per message, so that its retransmission gets through. */
static bool drop_read_resp(struct sim_ctx *sc, const struct pkt *p)
{
	if ((p->type != PKT_READ_RESP && p->type != PKT_ATOMIC_RESP) || p->off != 0 ||
	    sc->dropped_read_resp >= sim_env.drop_read_resp ||
	    (sc->dropped_read_resp && sc->dropped_qpn == p->dst_qpn && sc->dropped_seq == p->seq))
		return false;
	sc->dropped_read_resp++;
	sc->dropped_qpn = p->dst_qpn;
	sc->dropped_seq = p->seq;
	TRACE("RVXSIM_DROP_READ_RESP: %s for qp 0x%x seq %u lost", pktname(p->type), p->dst_qpn,
	      p->seq);
	return true;
}

static int drain_inbox(struct sim_ctx *sc)
{
	int work = 0;
	struct pkt *p;

	while ((p = fabric_peek(sc, true))) {
		struct sim_qp *qp = qp_by_num(sc, p->dst_qpn);
		if (sim_env.trace)
			trace_pkt(p);
		if (qp && !(sc->peer_lost && p->src_lid != sc->lid) && !drop_read_resp(sc, p))
			handle_response(sc, qp, p);
		fabric_pop(sc, true);
		work = 1;
	}
	for (int n = 0; n < 256 && (p = fabric_peek(sc, false)); n++) {
		struct sim_qp *qp = qp_by_num(sc, p->dst_qpn);
		if (sim_env.trace && !(qp && qp->rd_active))
			trace_pkt(p);
		if (qp && !(sc->peer_lost && p->src_lid != sc->lid) &&
		    !(qp->dc_type == SIM_DCT ? dc_request(sc, qp, p) : handle_request(sc, qp, p)))
			break;   /* the answer does not fit yet; retry this packet later */
		fabric_pop(sc, false);
		work = 1;
	}
	return work;
}

/* ------------------------------------------------------------------ doorbells */

/* What did the write that changed the first 8 bytes of a BlueFlame half do? 1: a BlueFlame copy
 * of the WQE; 0: an 8-byte doorbell (the rest of the half is left over from earlier writes);
 * -1: a copy whose bytes differ from the queue. The half is ordinary memory, so the engine only
 * sees its latest contents: bytes left over from a copy it never observed are recognised by
 * matching some WQE still in the ring. A copy that is still arriving gets a moment to finish. */
static bool half_is(struct sim_qp *qp, const uint8_t *half, uint32_t idx, uint32_t len)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;
	for (uint32_t o = 0; o < len; o += 64)
		if (memcmp(half + o, qp->sq_buf + (((idx + o / 64) & mask) << 6), 64))
			return false;
	return true;
}

static int classify_half(struct sim_qp *qp, int h, const uint8_t *half, uint32_t idx, uint32_t len)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;

	if (half_is(qp, half, idx, len))
		return 1;
	if (!memcmp(half + 8, qp->bf_shadow[h] + 8, 56))
		return 0;
	for (uint32_t i = 0; i < qp->sq_wqe_cnt; i++)
		if (i != (idx & mask) && !memcmp(half + 8, qp->sq_buf + (i << 6) + 8, 56))
			return 0;
	/* Stores are 8 bytes wide: a copy in progress leaves every 8-byte word equal to the WQE's,
	 * to the previous contents, or to a word some other WQE in the ring has at that offset.
	 * A word that is none of these was written wrong. */
	for (uint32_t o = 8; o < len; o += 8) {
		uint64_t w = *(volatile uint64_t *)(half + o);
		bool ok = w == *(uint64_t *)(qp->sq_buf + (((idx + o / 64) & mask) << 6) + o % 64) ||
			  w == *(uint64_t *)(qp->bf_shadow[h] + o);
		for (uint32_t i = 0; i < qp->sq_wqe_cnt && !ok; i++)
			ok = w == *(uint64_t *)(qp->sq_buf + (i << 6) + o % 64);
		if (!ok)
			return -2;
	}
	return -1;
}

/* A half whose bytes matched nothing when its doorbell was seen: the copy may still be arriving
 * (the writer can be preempted in the middle of it), so look again on later rounds. It is a
 * fault only if the half keeps the same first 8 bytes and still matches nothing after a while. */
static void bf_recheck(struct sim_qp *qp, int h, uint64_t now)
{
	uint8_t *half = qp->bf + h * SIM_BF_SIZE;
	uint64_t v = *(volatile uint64_t *)half;
	int kind;

	if (v != qp->bf_pend_v[h]) {
		qp->bf_pend[h] = false;     /* a newer write superseded it */
		return;
	}
	kind = classify_half(qp, h, half, qp->bf_pend_idx[h], qp->bf_pend_len[h]);
	if (kind == -2)
		now = qp->bf_pend_since[h] + 200000000ull;
	if (kind >= 0) {
		qp->bf_pend[h] = false;
		memcpy(qp->bf_shadow[h], half, SIM_BF_SIZE);
		return;
	}
	if ((int64_t)(now - qp->bf_pend_since[h]) < 200000000ll)
		return;
	qp->bf_pend[h] = false;
	if (!qp->bad)
		qp_fault(qp, qp->bf_pend_idx[h], "BlueFlame bytes differ from the WQE in the queue");
	qp->bad = 1;
	qp_set_err(qp);
}

/* Is v the first 8 bytes of a WQE in the ring? Normally of the one at the index it names; a WQE
 * whose own ctrl index is wrong is still rung faithfully, and decode() reports that WQE. */
static bool ctrl_in_ring(struct sim_qp *qp, uint32_t idx, const uint8_t *v)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;

	if (!memcmp(qp->sq_buf + ((idx & mask) << 6), v, 8))
		return true;
	for (uint32_t i = 0; i < qp->sq_wqe_cnt; i++)
		if (!memcmp(qp->sq_buf + (i << 6), v, 8))
			return true;
	return false;
}

/* A faulty doorbell: the WQE it names completes in error if it has not run yet; if it has,
 * the QP goes to the error state at once. */
static void doorbell_fault(struct sim_qp *qp, uint32_t idx)
{
	qp->bad = 1;
	if ((int16_t)(idx - (qp->sq_pc & 0xffff)) >= 0) {
		qp->poisoned = true;
		qp->poison_idx = idx;
	} else {
		qp_set_err(qp);
	}
}

/* Before calling a doorbell missing: a write of the same 8 bytes as the half already held is
 * invisible, so accept a half that names the WQE ending at the doorbell record. */
static bool doorbell_in_place(struct sim_qp *qp)
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *vb = qp->bf + h * SIM_BF_SIZE;
		uint32_t idx = vb[1] << 8 | vb[2], ds = vb[7] & 0x3f;
		if (ds && ((idx + (ds + 3) / 4) & 0xffff) == (qp->sq_db_seen & 0xffff) &&
		    ctrl_in_ring(qp, idx, vb)) {
			qp->sq_db_covered = qp->sq_db_seen;
			qp->sq_db_pending_since = 0;
			return true;
		}
	}
	return false;
}

static int watch_doorbells(struct sim_qp *qp, uint64_t now)
{
	int work = 0;
	uint32_t db16 = be32toh(qp->dbrec[MLX5_SND_DBR]) & 0xffff;
	uint32_t delta = (db16 - qp->sq_db_seen) & 0xffff;

	if (delta && !qp->db_dead) {
		uint32_t ndb = qp->sq_db_seen + delta;
		uint32_t oldest = qp->out_tail != qp->out_head ? rec_at(qp, qp->out_tail)->pc : qp->sq_pc;
		if (delta >= 0x8000 || ndb - oldest > qp->sq_wqe_cnt) {
			/* the record is unusable from now on: stop reading it until RESET, and flush
			 * only what was posted before it went wrong */
			if (!qp->bad) {
				if (delta >= 0x8000)
					qp_fault(qp, qp->sq_db_seen, "send doorbell record went backwards "
						 "(0x%x -> 0x%x)", qp->sq_db_seen & 0xffff, db16);
				else
					qp_fault(qp, qp->sq_pc, "send doorbell record 0x%x is past the ring "
						 "(oldest incomplete WQE 0x%x, wqe_cnt %u)", db16,
						 oldest & 0xffff, qp->sq_wqe_cnt);
			}
			qp->bad = 1;
			qp->db_dead = true;
			qp_set_err(qp);
			return 1;
		}
		TRACE("db qp 0x%x: dbrec[SND] 0x%04x", qp->qpn, db16);
		qp->sq_db_seen = ndb;
		if (!qp->sq_db_pending_since)
			qp->sq_db_pending_since = now;
		work = 1;
	}
	for (int h = 0; h < 2; h++) {
		uint8_t *half = qp->bf + h * SIM_BF_SIZE;
		uint64_t v = *(volatile uint64_t *)half;
		uint8_t *vb = (uint8_t *)&v;
		uint32_t idx, ds, len, end;
		bool bf;

		if (v == qp->bf_last[h]) {
			if (qp->bf_pend[h])
				bf_recheck(qp, h, now);
			continue;
		}
		qp->bf_last[h] = v;
		qp->bf_pend[h] = false;
		work = 1;
		atomic_thread_fence(memory_order_acquire);
		idx = vb[1] << 8 | vb[2];
		ds = vb[7] & 0x3f;
		len = ALIGN_UP(ds * 16, 64);
		bf = false;
		if (!qp->sq_wqe_cnt || !ctrl_in_ring(qp, idx, vb)) {
			if (!qp->bad)
				qp_fault(qp, idx, "doorbell value %016llx is not the first 8 bytes of the "
					 "last WQE's ctrl segment", (unsigned long long)be64toh(v));
			doorbell_fault(qp, idx);
		} else if (len <= SIM_BF_SIZE) {
			int kind = classify_half(qp, h, half, idx, len);
			bf = kind == 1;
			if (kind == -2) {
				if (!qp->bad)
					qp_fault(qp, idx, "BlueFlame bytes differ from the WQE in the queue");
				doorbell_fault(qp, idx);
			} else if (kind < 0) {
				qp->bf_pend[h] = true;
				qp->bf_pend_v[h] = v;
				qp->bf_pend_idx[h] = idx;
				qp->bf_pend_len[h] = len;
				qp->bf_pend_since[h] = now;
			}
		}
		TRACE("db qp 0x%x: %s to half %d: %016llx (WQE 0x%x, DS %u)", qp->qpn,
		      bf ? "BlueFlame copy" : "doorbell", h, (unsigned long long)be64toh(v), idx, ds);
		if (!qp->bf_pend[h])
			memcpy(qp->bf_shadow[h], half, SIM_BF_SIZE);
		/* the doorbell covers the WQE it names */
		end = (idx + (ds + 3) / 4) & 0xffff;
		/* nearest 32-bit count to the 16-bit end; it may be ahead of the record we read
		 * (the record was read before the register), which is fine */
		uint32_t full = qp->sq_db_seen + (uint32_t)(int16_t)(end - (qp->sq_db_seen & 0xffff));
		if ((int32_t)(full - qp->sq_db_covered) > 0)
			qp->sq_db_covered = full;
	}
	if ((int32_t)(qp->sq_db_covered - qp->sq_db_seen) >= 0) {
		qp->sq_db_pending_since = 0;
	} else if (qp->sq_db_pending_since &&
		   (int64_t)(now - qp->sq_db_pending_since) > sim_env.db_grace_ms * 1000000ll &&
		   !doorbell_in_place(qp)) {
		if (!qp->bad)
			qp_fault(qp, qp->sq_db_covered, "doorbell record moved to 0x%x with no doorbell "
				 "or BlueFlame write", qp->sq_db_seen & 0xffff);
		qp->bad = 1;
		qp->sq_db_pending_since = 0;
		qp->sq_db_covered = qp->sq_db_seen;
		qp_set_err(qp);
	}
	return work;
}

/* Flush everything posted to a QP in ERR. */
static int flush_qp(struct sim_qp *qp)
{
	int work = 0;

	for (uint32_t i = qp->out_tail; i != qp->out_head; i++) {
		struct sq_rec *r = rec_at(qp, i);
		if (!r->done) {
			r->done = 1;
			r->syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
		}
		r->ready_ns = 0;
	}
	work |= sq_retire(qp, 0);
	while (qp->sq_wqe_cnt && (int32_t)(qp->sq_db_seen - qp->sq_pc) > 0) {
		uint8_t *c = qp->sq_buf + ((qp->sq_pc & (qp->sq_wqe_cnt - 1)) << 6);
		struct sq_rec r;
		uint32_t ds = c[7] & 0x3f;
		memset(&r, 0, sizeof(r));
		r.idx = qp->sq_pc & 0xffff;
		r.opcode = c[3];
		r.syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
		cqe_req(qp, &r);
		qp->sq_pc += ds ? (ds + 3) / 4 : 1;
		work = 1;
	}
	if (!qp->srq && qp->rq_wqe_cnt) {
		uint8_t *segs;
		uint32_t ns, idx;
		while (rq_peek(qp, &segs, &ns, &idx)) {
			cqe_resp_err(qp, idx, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
			qp->rq_ci++;
			work = 1;
		}
	}
	return work;
}

/* Go back to in-flight record i and send everything from there again (go-back-N). */
static void rewind_to(struct sim_qp *qp, uint32_t i)
{
	struct sq_rec *r = rec_at(qp, i);

	tx_drop(qp);
	qp->sq_pc = r->pc;
	qp->next_seq = r->seq;
	qp->out_head = i;
	qp->sc->wqes_executed -= 1;
}

static int qp_work(struct sim_ctx *sc, struct sim_qp *qp, uint64_t now)
{
	int work = 0;

	if (qp->state == IBV_QPS_RESET)
		return 0;
	if (qp->dc_type == SIM_DCT)
		return dc_dct_work(sc, qp, now);
	if (sim_env.trace && qp->rq_wqe_cnt) {
		uint32_t v = be32toh(qp->dbrec[MLX5_RCV_DBR]) & 0xffff;
		if (v != qp->rq_db_traced) {
			qp->rq_db_traced = v;
			sim_trace("db qp 0x%x: dbrec[RCV] 0x%04x", qp->qpn, v);
		}
	}
	if (qp->sq_wqe_cnt)
		work |= watch_doorbells(qp, now);
	if (qp->state == IBV_QPS_ERR)
		return work | flush_qp(qp);
	if (qp->type == IBV_QPT_UD)
		return work | sim_ud_sq_work(qp);
	if (qp->ack_pending) {
		struct pkt a;
		hdr_init(qp, &a, PKT_ACK, qp->ack_pending - 1);
		if (send_resp(qp, &a))
			qp->ack_pending = 0;
		work = 1;
	}
	if (qp->state != IBV_QPS_RTS)
		return work;
	/* RNR back-off expired: go back to the refused message and send it again */
	if (qp->rnr_waiting && now >= qp->rnr_wait_until) {
		uint32_t i;
		for (i = qp->out_tail; i != qp->out_head; i++)
			if (rec_at(qp, i)->seq == qp->rnr_seq && rec_at(qp, i)->opcode != MLX5_OPCODE_NOP)
				break;
		if (i != qp->out_head)
			rewind_to(qp, i);
		qp->rnr_waiting = false;
		work = 1;
	}
	if (qp->tx_state == TX_ACTIVE && !qp->rnr_waiting)
		work |= tx_pump(qp);
	while (qp->tx_state == TX_IDLE && !qp->rnr_waiting && qp->state == IBV_QPS_RTS &&
	       (int32_t)(qp->sq_db_seen - qp->sq_pc) > 0 &&
	       qp->out_head - qp->out_tail < SIM_MAX_OUTSTANDING) {
		if (!sq_start(qp, qp->sq_db_seen))
			break;
		work = 1;
		if (qp->bad && qp->state == IBV_QPS_RTS) {
			/* the faulted WQE completes in error; later ones flush after it */
			break;
		}
	}
	work |= sq_retire(qp, now);
	/* Transport timer on the oldest unanswered message: go back and send again, up to
	 * retry_cnt times, then TRANSPORT_RETRY_EXC_ERR. A stopped peer is waited for. */
	if (qp->out_tail != qp->out_head && !qp->rnr_waiting && qp->state == IBV_QPS_RTS) {
		uint32_t i;
		struct sq_rec *r = NULL;
		for (i = qp->out_tail; i != qp->out_head; i++)
			if (!rec_at(qp, i)->done) {
				r = rec_at(qp, i);
				break;
			}
		if (r && now > r->sent_ns && now - r->sent_ns > retry_interval_ns(qp)) {
			if (!sc->peer_lost && fabric_peer_stopped(sc, qp->attr.ah_attr.dlid)) {
				r->sent_ns = now;
			} else if (qp->retry_left > 0) {
				qp->retry_left--;
				TRACE("qp 0x%x: no answer for wqe 0x%x: sending again (%d retries left)",
				      qp->qpn, r->idx, qp->retry_left);
				qp->seq_err_retry = false;
				rewind_to(qp, i);
				work = 1;
			} else {
				qp_fault(qp, r->idx, "transport retry count exceeded: no response from lid "
					 "0x%x qp 0x%x%s", qp->attr.ah_attr.dlid, qp->attr.dest_qp_num,
					 fabric_peer_alive(sc, qp->attr.ah_attr.dlid) ? "" :
					 " (peer is gone)");
				rec_done(qp, r, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
				r->ready_ns = 0;
				work |= sq_retire(qp, now);
			}
		}
	}
	return work;
}

static int cq_work(struct sim_cq *cq)
{
	_Atomic uint64_t *db = (_Atomic uint64_t *)((uint8_t *)cq->uar + 0x20);
	uint64_t v;

	if (!atomic_load_explicit(db, memory_order_relaxed))
		return 0;
	v = be64toh(atomic_exchange(db, 0));
	uint32_t w = (uint32_t)(v >> 32), cqn = (uint32_t)v & 0xffffff;
	uint32_t ci = w & 0xffffff;
	if (cqn != cq->cqn) {
		sim_log("rvxsim: cq 0x%x: arm doorbell names cq 0x%x", cq->cqn, cqn);
		return 1;
	}
	cq->arm_sn = w >> 28 & 3;
	cq->armed = true;
	cq->arm_sol = (w >> 24 & 1) != 0;
	TRACE("db cq 0x%x: arm%s sn %u ci 0x%x", cq->cqn, cq->arm_sol ? " solicited" : "",
	      cq->arm_sn, ci);
	/* completions already past the consumer index raise the event at once */
	if (((cq->pi - ci) & 0xffffff) != 0 && !cq->arm_sol)
		fire_event(cq);
	return 1;
}

/* Something the QP must come back to without a packet or a verb to wake the engine: messages in
 * flight (retry timer), an RNR back-off, an ACK or a READ response waiting for room, a doorbell
 * not yet complete, a DCT's ACKs owed. */
static bool qp_waits(const struct sim_qp *qp)
{
	return qp->out_tail != qp->out_head || qp->rnr_waiting || qp->ack_pending || qp->rd_active ||
	       qp->sq_db_pending_since || qp->bf_pend[0] || qp->bf_pend[1] ||
	       (qp->dc_type == SIM_DCT && dc_waits(qp));
}

static void *engine_main(void *arg)
{
	struct sim_ctx *sc = arg;
	uint64_t idle_since = 0;
	long sleep_ns = 1000;
	unsigned spins = 0;
	bool slept = false;

	uint64_t now = sim_now_ns();
	unsigned loops = 0;

	while (!atomic_load(&sc->stop)) {
		int work = 0;
		bool waits = false;

		/* timers need microseconds, not nanoseconds: read the clock every few busy rounds */
		if ((loops++ & 7) == 0)
			now = sim_now_ns();

		pthread_mutex_lock(&sc->lock);
		work |= drain_inbox(sc);
		for (struct sim_qp *qp = sc->qps; qp; qp = qp->next) {
			work |= qp_work(sc, qp, now);
			waits |= qp_waits(qp);
		}
		for (struct sim_cq *cq = sc->cqs; cq; cq = cq->next)
			work |= cq_work(cq);
		if (sim_env.trace)
			for (struct sim_srq *s = sc->srqs; s; s = s->next) {
				uint32_t v = be32toh(*s->dbrec) & 0xffff;
				if (v != s->db_traced) {
					s->db_traced = v;
					sim_trace("db srq 0x%x: dbrec 0x%04x", s->srqn, v);
				}
			}
		pthread_mutex_unlock(&sc->lock);

		if (work) {
			idle_since = 0;
			slept = false;
			sleep_ns = 1000;
			continue;
		}
		if (!idle_since) {
			idle_since = sim_now_ns();
			spins = 0;
		}
		/* A program that drives the engine through its own verbs calls (engine_progress) needs
		 * the CPU more than this thread does: stay out of its way, without asking producers to
		 * wake us (a woken engine holding the lock would only delay the program's pass). */
		now = sim_now_ns();
		if ((int64_t)(now - atomic_load_explicit(&sc->app_progress_ns, memory_order_relaxed)) <
		    1000000ll) {
			struct timespec ts = { 0, 100000 };
			nanosleep(&ts, NULL);
			idle_since = 0;
			continue;
		}
		if (!slept) {
			if ((++spins & 31) != 0) {
				__builtin_ia32_pause();
				continue;
			}
			now = sim_now_ns();
			if (now - idle_since < (uint64_t)sim_env.spin_us * 1000ull) {
				__builtin_ia32_pause();
				continue;
			}
		}
		slept = true;
		now = sim_now_ns();
		fabric_sleep(sc, sleep_ns);
		/* Direct-verbs doorbells cannot wake the engine: while traffic is recent, keep the
		 * sleeps short; after 10 ms of quiet, back off to 1 ms so an idle process costs little;
		 * after 100 ms with no timer to serve, to 10 ms, so that the engines of a job of many
		 * processes on few cores (make scale: 64 on 2) do not take the CPU from the ranks that
		 * work. Packets and the verbs wake the engine at once whatever it sleeps. */
		sleep_ns = MIN(sleep_ns * 2, now - idle_since < 10000000ull ? 100000L :
			       waits || now - idle_since < 100000000ull ? 1000000L : 10000000L);
	}
	return NULL;
}

/* One engine pass in the caller's thread, if the engine is not busy already. The verbs calls use
 * it so that a program driving the model through ibv_post_send/ibv_poll_cq does not wait for the
 * engine thread to be scheduled; direct-verbs programs rely on the thread alone. */
void engine_progress(struct sim_ctx *sc)
{
	uint64_t now;

	if (pthread_mutex_trylock(&sc->lock))
		return;
	now = sim_now_ns();
	atomic_store_explicit(&sc->app_progress_ns, now, memory_order_relaxed);
	drain_inbox(sc);
	for (struct sim_qp *qp = sc->qps; qp; qp = qp->next)
		qp_work(sc, qp, now);
	for (struct sim_cq *cq = sc->cqs; cq; cq = cq->next)
		cq_work(cq);
	pthread_mutex_unlock(&sc->lock);
}

int engine_start(struct sim_ctx *sc)
{
	atomic_store(&sc->stop, 0);
	if (pthread_create(&sc->thread, NULL, engine_main, sc))
		return -1;
	return 0;
}

void engine_stop(struct sim_ctx *sc)
{
	atomic_store(&sc->stop, 1);
	fabric_wake_self(sc);
	pthread_join(sc->thread, NULL);
}

bool engine_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	return handle_request(sc, qp, p);
}

/* ------------------------------------------------------------------ for ud.c */

void *engine_mr_ptr(struct sim_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
		    const char **why)
{
	return mr_ptr(qp, key, addr, len, need, why);
}

bool engine_rq_peek(struct sim_qp *qp, uint8_t **segs, uint32_t *nsegs, uint32_t *index)
{
	return rq_peek(qp, segs, nsegs, index);
}

void engine_rq_consume(struct sim_qp *qp)
{
	rq_consume(qp);
}

int engine_rq_check(struct sim_qp *qp, uint8_t *segs, uint32_t nsegs, uint32_t total, uint32_t idx)
{
	return rq_check(qp, segs, nsegs, total, idx);
}

void engine_rq_scatter(struct sim_qp *qp, uint8_t *segs, uint32_t nsegs, uint32_t off,
		       const uint8_t *data, uint32_t len)
{
	rq_scatter(qp, segs, nsegs, off, data, len);
}
