/* rvxsim: the requester. Each WQE that goes on the wire becomes a message with a sequence
 * number and a record in the QP's in-flight ring; completions are generated in order when the
 * responder's ACK/response arrives (handle_response), with retries and RNR waits by timer. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

/* ------------------------------------------------------------------ requester */

struct sq_rec *rec_at(struct sim_qp *qp, uint32_t i)
{
	return &qp->out[i % SIM_MAX_OUTSTANDING];
}

/* One attempt of the transport timer: the local ACK timeout (4.096 us << timeout), kept between
 * 25 ms (a busy machine must not look like a lost packet too often) and RVXSIM_RETRY_TIMEOUT_MS
 * divided by the attempts, so that a dead peer is declared within that bound. */
uint64_t retry_interval_ns(struct sim_qp *qp)
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

void hdr_init(struct sim_qp *qp, struct pkt *p, uint8_t type, uint32_t seq)
{
	memset(p, 0, PKT_HDR);
	p->type = type;
	p->src_lid = qp->sc->lid;
	p->dst_lid = qp->attr.ah_attr.dlid;
	p->src_qpn = qp->qpn;
	p->dst_qpn = qp->attr.dest_qp_num;
	p->seq = seq;
	if (qp->type == IBV_QPT_UC)
		p->flags = PKT_F_UC;
	if (qp->type == IBV_QPT_XRC_SEND)
		p->flags = PKT_F_XRC;
	dc_hdr(qp, p);
}

/* Send as much of the current message as the peer's inbox takes. Returns true when done. */
bool tx_pump(struct sim_qp *qp)
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
		p->flags = (qp->tx_off == 0 ? PKT_F_FIRST : 0) |
			   (h->flags & (PKT_F_IMM | PKT_F_SE | PKT_F_UC | PKT_F_INV | PKT_F_XRC));
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
	/* UC: nothing comes back, so a WQE is complete once its last packet is out */
	if (qp->type == IBV_QPT_UC)
		rec_done(qp, rec_at(qp, qp->tx_rec), 0);
	tx_drop(qp);
	return true;
}

/* Start one WQE: decode, check, then either complete it locally or begin its message. */
/* A WRITE or SEND's payload gathered into qp->tx_data (inline bytes from the WQE copy). */
static void gather_payload(struct sim_qp *qp, const struct wqe *w)
{
	qp->tx_data = malloc(MAX(w->total, 1u));
	if (!qp->tx_data) {
		sim_log("rvxsim: out of memory for a %u-byte message", w->total);
		abort();
	}
	uint32_t o = 0;
	for (uint32_t i = 0; i < w->nsge; i++) {
		const char *m;
		const void *src = w->sge[i].inl ? (const void *)(w->b + w->sge[i].addr) :
			mr_ptr(qp, w->sge[i].lkey, w->sge[i].addr, w->sge[i].len, 0, &m);
		memcpy(qp->tx_data + o, src, w->sge[i].len);
		o += w->sge[i].len;
	}
}

/* The message for a decoded WQE: its header in qp->tx_hdr, its payload gathered or, for a
 * READ or an atomic, where the response scatters to; the first packet sent. */
static void sq_message(struct sim_qp *qp, struct sq_rec *r, const struct wqe *w)
{
	struct pkt *h = (struct pkt *)qp->tx_hdr;

	qp->next_seq++;
	hdr_init(qp, h, 0, r->seq);
	h->total = w->total;
	h->raddr = w->raddr;
	h->rkey = w->rkey;
	h->imm = w->imm;
	h->xrc_srqn = w->xrc_srqn;
	if (w->opcode == MLX5_OPCODE_RDMA_WRITE_IMM || w->opcode == MLX5_OPCODE_SEND_IMM)
		h->flags |= PKT_F_IMM;
	if (w->opcode == MLX5_OPCODE_SEND_INVAL)
		h->flags |= PKT_F_INV;
	if (w->fm_ce_se & MLX5_WQE_CTRL_SOLICITED)
		h->flags |= PKT_F_SE;
	switch (w->opcode) {
	case MLX5_OPCODE_RDMA_WRITE:
	case MLX5_OPCODE_RDMA_WRITE_IMM:
	case MLX5_OPCODE_SEND:
	case MLX5_OPCODE_SEND_IMM:
	case MLX5_OPCODE_SEND_INVAL:
		h->type = (w->opcode == MLX5_OPCODE_RDMA_WRITE || w->opcode == MLX5_OPCODE_RDMA_WRITE_IMM) ?
			  PKT_WRITE : PKT_SEND;
		gather_payload(qp, w);
		break;
	case MLX5_OPCODE_RDMA_READ:
		h->type = PKT_READ_REQ;
		break;
	default:
		h->type = PKT_ATOMIC;
		h->opmod = w->opcode;     /* carries which atomic */
		h->total = w->asize;
		h->op[0] = w->op[0];
		h->op[1] = w->op[1];
		h->op[2] = w->op[2];
		h->op[3] = w->op[3];
		break;
	}
	if (h->type == PKT_READ_REQ || h->type == PKT_ATOMIC) {
		r->nsge = w->nsge;
		for (uint32_t i = 0; i < w->nsge; i++) {
			const char *m;
			r->sge[i].addr = (uintptr_t)mr_ptr(qp, w->sge[i].lkey, w->sge[i].addr, w->sge[i].len,
							   IBV_ACCESS_LOCAL_WRITE, &m);
			r->sge[i].len = w->sge[i].len;
		}
		r->byte_cnt = w->total;
	}
	qp->tx_len = h->type == PKT_ATOMIC ? 1 : (h->type == PKT_READ_REQ ? 1 : w->total);
	qp->tx_off = 0;
	qp->tx_rec = qp->out_head - 1;
	qp->tx_state = TX_ACTIVE;
	if (h->type == PKT_READ_REQ || h->type == PKT_ATOMIC) {
		free(qp->tx_data);
		qp->tx_data = NULL;
	}
	/* a zero-length message is still one packet (tx_pump sends FIRST|LAST with no payload) */
	tx_pump(qp);
}

/* The in-flight record of the WQE at qp->sq_pc, counted as executed. */
static struct sq_rec *sq_record(struct sim_qp *qp, const struct wqe *w, uint64_t now)
{
	struct sim_ctx *sc = qp->sc;
	struct sq_rec *r;

	r = rec_at(qp, qp->out_head);
	memset(r, 0, offsetof(struct sq_rec, sge));
	r->idx = w->idx;
	r->pc = qp->sq_pc;
	r->opcode = w->opcode;
	r->opmod = w->opmod;
	r->signaled = (w->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
	r->sent_ns = now;
	r->seq = qp->next_seq;
	if (w->opcode == MLX5_OPCODE_RDMA_WRITE || w->opcode == MLX5_OPCODE_RDMA_WRITE_IMM ||
	    w->opcode == MLX5_OPCODE_RDMA_READ)
		r->rdma_bytes = w->total;
	qp->out_head++;
	sc->wqes_executed++;
	sim_count_wqe(w->total);
	return r;
}

/* Start the WQE at qp->sq_pc: decode it, record it, send its message. 0: it must wait. */
int sq_start(struct sim_qp *qp, uint32_t db)
{
	struct sim_ctx *sc = qp->sc;
	static __thread struct wqe w;
	char whybuf[256];
	const char *why = NULL;
	struct sq_rec *r;
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
	r = sq_record(qp, &w, now);
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
	if (w.opcode == MLX5_OPCODE_NOP || w.opcode == MLX5_OPCODE_UMR) {
		/* a UMR binds or frees a memory window here, sending nothing (mw.c) */
		if (w.opcode == MLX5_OPCODE_UMR && (r->syndrome = mw_umr(qp, &w, whybuf, sizeof(whybuf))))
			qp_fault(qp, w.idx, "%s", whybuf);
		r->done = 1;
		r->ready_ns = now + sim_env.delay_us * 1000ull;
		return 1;
	}
	sq_message(qp, r, &w);
	return 1;
}

/* Retire completed records in order and write their CQEs. */
int sq_retire(struct sim_qp *qp, uint64_t now)
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

void rewind_to(struct sim_qp *qp, uint32_t i);

void rec_done(struct sim_qp *qp, struct sq_rec *r, uint8_t synd)
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

/* An RNR NAK for r: wait the responder's timer and send again, or fail after rnr_retry tries. */
static void rnr_nak(struct sim_qp *qp, struct sq_rec *r, const struct pkt *p)
{
	if (qp->rnr_waiting)
		return;
	if (qp->attr.rnr_retry != 7 && qp->rnr_left <= 0) {
		qp_fault(qp, r->idx, "RNR retry count (%u) exceeded: no receive WQE at "
			 "qp 0x%x", qp->attr.rnr_retry, qp->attr.dest_qp_num);
		rec_done(qp, r, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
		return;
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
}

/* A NAK: an RNR wait, or the error it reports completes its WQE. */
static void resp_nak(struct sim_qp *qp, const struct pkt *p)
{
	struct sq_rec *r;
	uint32_t i;

	if ((i = ack_below(qp, p->seq)) != qp->out_head) {
		implied_nak(qp, i);
		return;
	}
	r = rec_by_seq(qp, p->seq);
	if (!r || r->done)
		return;
	if (p->syndrome == RNR_SYND) {
		rnr_nak(qp, r, p);
		return;
	}
	qp_fault(qp, r->idx, "%s from qp 0x%x lid 0x%x: %s",
		 p->syndrome == MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR ? "remote access error" :
		 p->syndrome == MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR ? "remote invalid request" :
		 "remote operational error", p->src_qpn, p->src_lid,
		 p->len ? (const char *)p->data : "(no reason)");
	rec_done(qp, r, p->syndrome);
}

/* The record a READ or atomic response answers (NULL: none, or an earlier message is missing
 * and its implied NAK went out). Any answer gives the transport retries back. */
static struct sq_rec *answered_rec(struct sim_qp *qp, const struct pkt *p)
{
	struct sq_rec *r;
	uint32_t i;

	qp->retry_left = qp->attr.retry_cnt;
	if ((i = ack_below(qp, p->seq)) != qp->out_head) {
		implied_nak(qp, i);
		return NULL;
	}
	r = rec_by_seq(qp, p->seq);
	return r && !r->done ? r : NULL;
}

/* A READ response: scattered in order to the READ's data segments. */
static void resp_read(struct sim_qp *qp, const struct pkt *p)
{
	struct sq_rec *r = answered_rec(qp, p);

	if (!r)
		return;
	/* Responses are taken in order only. One that does not continue where the last one
	 * ended follows a gap (responses that came while the READ was being re-sent after a
	 * timeout are lost): it is dropped, and the READ completes from the repeated
	 * request's responses, as a requester discards an out-of-sequence response PSN. */
	if (p->off != r->rd_next) {
		TRACE("qp 0x%x: READ response at offset %u, expected %u: dropped", qp->qpn,
		      p->off, r->rd_next);
		return;
	}
	r->rd_next += p->len;
	r->sent_ns = sim_now_ns(); /* an answer: the transport timer starts again */
	scatter(r, p->off, p->data, p->len);
	if (p->flags & PKT_F_LAST) {
		r->byte_cnt = p->total;
		rec_done(qp, r, 0);
	}
}

/* An atomic response: the old value to the atomic's result segment. */
static void resp_atomic(struct sim_qp *qp, struct pkt *p)
{
	struct sq_rec *r = answered_rec(qp, p);

	if (!r)
		return;
	/* [inferred] the returned old value is written in host order */
	if (p->total == 4) {
		uint32_t v = (uint32_t)p->op[0];
		scatter(r, 0, (uint8_t *)&v, 4);
	} else {
		scatter(r, 0, (uint8_t *)&p->op[0], 8);
	}
	r->byte_cnt = 8;
	rec_done(qp, r, 0);
}

/* A response from the QP's peer: an ACK, a NAK, a READ response or an atomic response. */
void handle_response(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p)
{
	uint32_t i;

	if (qp->state != IBV_QPS_RTS || qp->type == IBV_QPT_UC)   /* UC has no responses */
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
		resp_nak(qp, p);
		break;
	case PKT_READ_RESP:
		resp_read(qp, p);
		break;
	case PKT_ATOMIC_RESP:
		resp_atomic(qp, p);
		break;
	}
	(void)sc;
}
