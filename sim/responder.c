/* rvxsim: the responder. Requests are executed in sequence order (handle_request): receive
 * WQEs consumed and scattered, RDMA and atomics checked against the memory regions, ACKs, NAKs
 * and responses sent back; anything out of order is dropped (go-back-N after an RNR NAK). */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

/* ------------------------------------------------------------------ responder */

bool send_resp(struct sim_qp *qp, struct pkt *p)
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
bool rq_peek(struct sim_qp *qp, uint8_t **segs, uint32_t *nsegs, uint32_t *index)
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

/* A request the responder refuses: NAK, and on an RC QP the responder's QP goes to the error
 * state too (IBA responder classes A and C). A SEND's error is reported in the CQE of the receive
 * WQE it took; an RDMA or atomic request takes none, so the owner learns of it by an affiliated
 * asynchronous event instead (mlx5_ib's IB_EVENT_QP_ACCESS_ERR for a key, bounds or access
 * violation, IB_EVENT_QP_REQ_ERR for an invalid request). */
static void responder_error(struct sim_qp *qp, const struct pkt *p, uint8_t local_synd,
			    uint8_t nak_synd, bool consume, uint32_t wqe_idx, const char *why)
{
	send_nak(qp, p, nak_synd, why);
	if (consume) {
		rq_consume(qp);
		cqe_resp_err(qp, wqe_idx, local_synd);
	}
	qp->rx_active = false;
	qp->rx_dead = true;     /* drop the rest: the requester is now in error */
	if (qp->dc_type == SIM_DCT)   /* [inferred] a DCT stays ready; only that initiator fails */
		return;
	if (!consume)   /* the cause first, then the state's own events (Last WQE Reached) */
		sim_async_event(qp->sc, nak_synd == MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR ?
				IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR, &qp->qp);
	qp_set_err(qp);
}

/* A UC message the responder cannot deliver (IBA responder classes D and E, as Linux's
 * rxe_resp.c applies them): dropped with no NAK, the QP stays ready. synd 0 is a plain drop (no
 * receive WQE, or the QP's access flags); a remote access or length error on an SRQ completes
 * the receive WQE the message takes with it (class E), on a receive queue the WQE stays for the
 * next message (class D); LOCAL_PROT_ERR, a receive WQE with a bad key, is class A as on RC:
 * that WQE's error CQE and the QP to ERR. */
static void uc_drop(struct sim_qp *qp, const struct pkt *p, uint8_t synd, const char *why)
{
	bool class_a = synd == MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
	uint8_t *segs;
	uint32_t ns, idx;

	TRACE("qp 0x%x: UC %s seq %u from qp 0x%x dropped: %s", qp->qpn,
	      p->type == PKT_SEND ? "SEND" : "WRITE", p->seq, p->src_qpn, why);
	qp->rx_active = false;
	if ((class_a || (synd && qp->srq)) && rq_peek(qp, &segs, &ns, &idx)) {
		rq_consume(qp);
		cqe_resp_err(qp, idx, synd);
	}
	if (class_a) {
		qp->rx_dead = true;
		qp_set_err(qp);
	}
}

/* No receive WQE for a SEND or a WRITE with immediate: an RNR NAK on RC (class B), the message
 * dropped on UC (class D). */
static void no_receive(struct sim_qp *qp, const struct pkt *p)
{
	if (qp->type == IBV_QPT_UC) {
		uc_drop(qp, p, 0, "no receive WQE");
		return;
	}
	TRACE("qp 0x%x: no receive WQE: RNR NAK to qp 0x%x", qp->qpn, p->src_qpn);
	send_nak(qp, p, RNR_SYND, NULL);
}

/* A SEND or WRITE executed to its last packet: the next sequence number, and on RC its ACK. */
static void msg_received(struct sim_qp *qp)
{
	qp->exp_seq++;
	if (qp->type != IBV_QPT_UC)
		qp->ack_pending = qp->exp_seq;
}

/* The responder's check of an RDMA request's first packet: the QP's remote access flag and the
 * rkey's region, protection domain, bounds and access (IB spec, "remote access error" NAK;
 * REMOTE_ACCESS_ERR at the requester). True when refused, with the NAK sent. */
static bool rdma_refused(struct sim_qp *qp, const struct pkt *p, int need, const char *op,
			 const char *access)
{
	const char *m = "";
	char flags[64], why[200];

	if (!sim_env.rdma_deny[qp->sc->index] && (qp->attr.qp_access_flags & need) &&
	    (!p->total || mr_ptr(qp, p->rkey, p->raddr, p->total, need, &m)))
		return false;
	if (sim_env.rdma_deny[qp->sc->index]) {
		m = "RVXSIM_RDMA_DENY: this device refuses RDMA";
	} else if (!(qp->attr.qp_access_flags & need)) {
		snprintf(flags, sizeof(flags), "QP access flags do not allow %s", access);
		m = flags;
	}
	snprintf(why, sizeof(why), "%s rkey 0x%x raddr 0x%llx len %u: %s", op, p->rkey,
		 (unsigned long long)p->raddr, p->total, m);
	if (qp->type != IBV_QPT_UC)
		responder_error(qp, p, 0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, false, 0, why);
	else    /* the QP's flags are checked before a receive WQE is taken (rxe check_op_valid) */
		uc_drop(qp, p, m == flags || !(p->flags & PKT_F_IMM) ? 0 :
			MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, why);
	return true;
}

/* RDMA WRITE (with immediate): the first packet checks the key and access, the last completes. */
static bool req_write(struct sim_qp *qp, struct pkt *p)
{
	const char *m;

	if (p->flags & PKT_F_FIRST) {
		qp->rx_has_wqe = false;
		if (rdma_refused(qp, p, IBV_ACCESS_REMOTE_WRITE, "RDMA_WRITE", "remote write"))
			return true;
		if (p->flags & PKT_F_IMM) {
			uint8_t *segs;
			uint32_t ns, idx;
			if (!rq_peek(qp, &segs, &ns, &idx)) {
				no_receive(qp, p);
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
		msg_received(qp);
	}
	return true;
}

/* A SEND with Invalidate delivered: the type 2 window its rkey names is freed (mw.c). Where
 * there is none, [inferred, as rxe_resp.c's class J] the receive completes in error, the
 * requester is told by an invalid request NAK (RC) and the QP goes to the error state. */
static bool send_invalidate(struct sim_qp *qp, const struct pkt *p, uint32_t idx)
{
	const char *why;

	if (mw_invalidate(qp, be32toh(p->imm), &why))
		return true;
	if (qp->type != IBV_QPT_UC)
		send_nak(qp, p, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, why);
	cqe_resp_err(qp, idx, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
	qp->rx_dead = true;
	qp_set_err(qp);
	return false;
}

/* SEND (with immediate): the first packet takes a receive WQE (or RNR NAK), each is scattered. */
static bool req_send(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	uint8_t *segs;
	uint32_t ns, idx;
	/* the message owns its receive WQE from its first packet on, so messages of other
	 * senders sharing the SRQ (DC initiators, RC QPs) cannot take it */
	if ((p->flags & PKT_F_FIRST) && !(qp->rx_active && qp->rx_seq == p->seq)) {
		if (sc->forced_rnr < sim_env.force_rnr) {
			sc->forced_rnr++;
			TRACE("qp 0x%x: RVXSIM_FORCE_RNR: as if no receive WQE for qp 0x%x", qp->qpn,
			      p->src_qpn);
			no_receive(qp, p);
			return true;
		}
		if (!rq_peek(qp, &segs, &ns, &idx)) {
			no_receive(qp, p);
			return true;
		}
		int s = rq_check(qp, segs, ns, p->total, idx);
		if (s && qp->type == IBV_QPT_UC) {
			uc_drop(qp, p, s == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR ?
				MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR : s,
				s == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR ? "SEND longer than the receive WQE" :
				"receive WQE with a bad lkey or address");
			return true;
		}
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
		qp->rx_has_wqe = true;
	}
	if (!qp->rx_active)
		return true;
	idx = qp->rx_wqe;
	rq_at(qp, idx, &segs, &ns);
	rq_scatter(qp, segs, ns, p->off, p->data, p->len);
	if (p->flags & PKT_F_LAST) {
		qp->rx_active = false;
		if (p->flags & PKT_F_INV) {
			if (!send_invalidate(qp, p, idx))
				return true;
			cqe_resp(qp, p, MLX5_CQE_RESP_SEND_INV, idx);
		} else {
			cqe_resp(qp, p, (p->flags & PKT_F_IMM) ? MLX5_CQE_RESP_SEND_IMM :
				 MLX5_CQE_RESP_SEND, idx);
		}
		msg_received(qp);
	}
	return true;
}

/* RDMA READ: checked once, then answered in MTU-sized responses (false: no room yet). */
static bool req_read(struct sim_qp *qp, struct pkt *p, bool dup)
{
	const char *m;
	uint8_t buf[PKT_HDR + SIM_MTU];
	struct pkt *r = (struct pkt *)buf;
	uint8_t *src;
	if (!qp->rd_active || qp->rd_seq != p->seq) {
		if (rdma_refused(qp, p, IBV_ACCESS_REMOTE_READ, "RDMA_READ", "remote read"))
			return true;
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

/* A repeated atomic is never executed twice: answer from the saved result. */
static void atomic_replay(struct sim_qp *qp, const struct pkt *p)
{
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
}

/* The 64-bit atomics (CS, FA, masked CS, masked FA) on t; the old value. */
static uint64_t atomic_exec64(void *t, const struct pkt *p)
{
	_Atomic uint64_t *a = t;
	uint64_t cur = atomic_load(a), nv, old;
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
	return old;
}

/* The 32-bit atomics (masked CS, masked FA: opmod 0x08/0x09) on t; the old value. */
static uint64_t atomic_exec32(void *t, const struct pkt *p)
{
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
	return o;
}

/* An atomic: checked, executed on the target, answered, and its result saved for a replay. */
static bool req_atomic(struct sim_qp *qp, struct pkt *p)
{
	const char *m;
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
	old = sz == 8 ? atomic_exec64(t, p) : atomic_exec32(t, p);
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

/* A message under way that a new FIRST packet cuts short (its last packets were lost): a SEND's
 * receive WQE goes back to the receive queue (class D1); on an SRQ it completes in error and the
 * new message is dropped as well (class E), as rxe_resp.c's do_class_d1e_error. False: drop the
 * new packet. */
static bool uc_cut(struct sim_qp *qp)
{
	qp->rx_active = false;
	if (!qp->rx_has_wqe)
		return true;
	qp->rx_has_wqe = false;
	if (!qp->srq) {
		qp->rq_ci--;     /* the last WQE consumed: no other message takes WQEs meanwhile */
		return true;
	}
	cqe_resp_err(qp, qp->rx_wqe, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
	return false;
}

/* A request packet at a UC QP. Nothing is acknowledged or sent again, so the sequence number
 * only tells a packet that continues the message under way from one that does not: a FIRST
 * packet starts a message whatever its number (the responder resynchronises, IBA class D1),
 * any other packet must continue the current message or is dropped. Only a UC requester's
 * SENDs and WRITEs are taken; nothing is answered. */
static bool uc_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	if (!(p->flags & PKT_F_UC) || (p->type != PKT_WRITE && p->type != PKT_SEND))
		return true;
	if (p->flags & PKT_F_FIRST) {
		if (qp->rx_active && !uc_cut(qp))
			return true;
		qp->exp_seq = p->seq;
	} else if (!qp->rx_active || p->seq != qp->exp_seq) {
		return true;
	}
	return p->type == PKT_WRITE ? req_write(qp, p) : req_send(sc, qp, p);
}

static bool execute(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p, bool dup);

/* Execute one request packet. Returns false when it cannot proceed yet (no room to answer). */
bool handle_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	bool dup;

	if (p->type == PKT_UD) {
		sim_ud_receive(qp, p);
		return true;
	}
	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS)
		return true;    /* silently dropped, as by a QP that is not ready */
	if (p->src_qpn != qp->attr.dest_qp_num || p->src_lid != qp->attr.ah_attr.dlid || qp->rx_dead)
		return true;
	if (qp->type == IBV_QPT_UC)
		return uc_request(sc, qp, p);
	if (p->flags & PKT_F_UC)
		return true;    /* a UC opcode at an RC QP: another transport's packet */
	/* XRC requests (with an XRCETH) go to target QPs only, and a target takes nothing else;
	 * an initiator has no receive side at all */
	if (qp->type == IBV_QPT_XRC_SEND ||
	    !(p->flags & PKT_F_XRC) != (qp->type != IBV_QPT_XRC_RECV))
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
		atomic_replay(qp, p);
		return true;
	}
	if (qp->type == IBV_QPT_XRC_RECV)
		return xrc_request(sc, qp, p);
	return execute(sc, qp, p, dup);
}

/* A target QP's request: the SRQ its XRCETH names must be an XRC SRQ of the target's XRC
 * domain, else an invalid request (NAK; the requester's REMOTE_INVAL_REQ_ERR, the target to ERR
 * with IBV_EVENT_QP_REQ_ERR) [inferred: IBA's XRC annex makes it an invalid request; which
 * syndrome the firmware gives is not in rdma-core or mlx5_ib]. The request is then executed as
 * an RC responder's, with that SRQ standing as the QP's: its receive WQEs, its CQ, and its PD
 * for the memory the request reaches (IBA XRC). */
bool xrc_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	struct sim_srq *s = sim_srq_lookup(sc, p->xrc_srqn);
	bool dup = p->seq != qp->exp_seq, r;
	char why[160];

	if (!s || !s->xrcd || s->xrcd != qp->xrcd) {
		snprintf(why, sizeof(why), "XRC SRQ 0x%x %s", p->xrc_srqn,
			 !s ? "does not exist" : !s->xrcd ? "is not an XRC SRQ" :
			 "belongs to another XRC domain");
		sim_log("rvxsim: qp 0x%x: request from qp 0x%x refused: %s", qp->qpn, p->src_qpn, why);
		responder_error(qp, p, 0, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, false, 0, why);
		return true;
	}
	qp->srq = s;
	qp->rcq = s->cq;
	r = execute(sc, qp, p, dup);
	qp->srq = NULL;
	qp->rcq = NULL;
	return r;
}

/* A request in sequence (or a READ served again), by its type. */
static bool execute(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p, bool dup)
{
	switch (p->type) {
	case PKT_WRITE:
		return req_write(qp, p);
	case PKT_SEND:
		return req_send(sc, qp, p);
	case PKT_READ_REQ:
		return req_read(qp, p, dup);
	case PKT_ATOMIC:
		return req_atomic(qp, p);
	}
	return true;
}

/* ------------------------------------------------------------------ for ud.c and the inbox */

bool engine_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	return handle_request(sc, qp, p);
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
