/* rvxsim: the engine. One thread per opened device plays the adapter: it watches each QP's
 * doorbell record and BlueFlame/doorbell register (doorbell.c), decodes and checks the WQEs in
 * order (decode.c), moves data through the fabric (fabric.c) as requester (requester.c) and
 * responder (responder.c), and writes CQEs with the owner bit as a ConnectX does. This file: the
 * fault line, CQEs, QP state, memory access checks, the inbox and the engine thread itself. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>
#include <sys/mman.h>

const char *opname(uint8_t op)
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
void qp_fault(struct sim_qp *qp, uint32_t idx, const char *fmt, ...)
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

void qp_set_err(struct sim_qp *qp);

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

void cqe_req(struct sim_qp *qp, const struct sq_rec *r)
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

void cqe_resp_err(struct sim_qp *qp, uint16_t wqe_counter, uint8_t synd)
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

void tx_drop(struct sim_qp *qp)
{
	free(qp->tx_data);
	qp->tx_data = NULL;
	qp->tx_state = TX_IDLE;
}

void qp_set_err(struct sim_qp *qp)
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
	if (qp->srq && qp->type != IBV_QPT_XRC_RECV)   /* a target is attached to no SRQ */
		sim_async_event(qp->sc, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->qp);
}

void engine_qp_to_err(struct sim_qp *qp)
{
	qp_set_err(qp);
}

/* RESET: counters and records back to zero, as libmlx5 and the hardware do. */
void engine_qp_reset(struct sim_qp *qp)
{
	bool counted = sim_mmio_owns(qp->uar);   /* RVXSIM_COUNT_MMIO: these writes are ours */

	tx_drop(qp);
	if (counted)
		sim_mmio_model_writes(qp, true);
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
	if (counted)
		sim_mmio_model_writes(qp, false);
	for (int h = 0; h < 2; h++) {
		qp->bf_pend[h] = false;
		memset(qp->bf_shadow[h], 0, SIM_BF_SIZE);
		qp->bf_last[h] = 0;
	}
}

/* ------------------------------------------------------------------ memory access checks */

/* On-Demand Paging: an ODP region pins nothing; the adapter takes its pages when an access
 * needs them (a page fault that mlx5_ib resolves through the process's page tables, asking for a
 * writable page when the access writes: the kernel's mlx5_ib odp.c, pagefault_mr). The model
 * does the same with MADV_POPULATE_READ/WRITE over the pages of [addr, addr+len), which faults
 * them in as an access would without touching them, or fails as that access would: not mapped
 * (ENOMEM), not readable or not writable (EINVAL), SIGBUS (EFAULT). A fault that cannot be
 * resolved is resumed with its error bit set (mlx5_ib's PAGE_FAULT_RESUME with error) and the
 * work completes in error. Returns 0 or an errno, with why. Kernels before 5.14 lack the
 * advice; there only a page that is not mapped at all is a fault (mincore). */
int sim_odp_fault(uintptr_t addr, uint64_t len, bool write, const char **why)
{
	static int populate = -1;    /* MADV_POPULATE_* known to the kernel: 1, unknown: 0 */
	const uintptr_t pg = 4096;
	uintptr_t a = addr & ~(pg - 1), end = addr + len;
	int err;

	*why = "";
	if (!len)
		return 0;
	if (end < addr || end > UINTPTR_MAX - pg) {
		*why = "ODP page fault not resolved: the range wraps the address space";
		return EFAULT;
	}
	end = (end + pg - 1) & ~(pg - 1);
	if (populate < 0) {
		static char probe[4096] __attribute__((aligned(4096)));
		populate = !(madvise(probe, sizeof(probe), MADV_POPULATE_READ) && errno == EINVAL);
	}
	for (;;) {
		if (populate)
			err = madvise((void *)a, end - a, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
		else {
			static unsigned char vec[256];
			err = 0;
			for (uintptr_t b = a; !err && b < end; b += sizeof(vec) * pg)
				err = mincore((void *)b, MIN(end - b, sizeof(vec) * pg), vec);
		}
		if (!err)
			return 0;
		if (errno != EINTR && errno != EAGAIN)
			break;
	}
	err = errno;
	*why = err == ENOMEM ? "ODP page fault not resolved: page not mapped" :
	       err == EINVAL ? (write ? "ODP page fault not resolved: page not writable" :
				"ODP page fault not resolved: page not readable") :
	       "ODP page fault not resolved";
	return err;
}

/* The memory a key names, if [addr, addr+len) is inside its region, the region belongs to the
 * QP's protection domain, and its access flags include need. An ODP region's pages must also be
 * there (or be faulted in) for the access; the callers turn a fault that cannot be resolved into
 * the error of a refused key (LOCAL_PROT_ERR for a local key, a remote access NAK and
 * REMOTE_ACCESS_ERR at the requester for a remote one) [inferred: rdma-core and mlx5_ib do not
 * say which syndrome the firmware gives a WQE whose fault was resumed with an error; these are
 * the IB spec's errors for a local and a remote access that the memory refuses]. */
void *mr_ptr(struct sim_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
		    const char **why)
{
	struct sim_mr *m = sim_mr_lookup(qp->sc, key);

	*why = "";
	if (!m) {
		*why = "key not registered";
		return NULL;
	}
	if (m->mw_type)
		return mw_ptr(qp, m, addr, len, need, why);
	if (pd_prot(m->mr.pd) != pd_prot(qp_mem_pd(qp))) {
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
	if ((m->access & IBV_ACCESS_ON_DEMAND) &&
	    sim_odp_fault(m->addr + (uintptr_t)(addr - m->iova), len,
			  need & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_ATOMIC), why))
		return NULL;
	return (void *)(m->addr + (uintptr_t)(addr - m->iova));
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

/* RVXSIM_DROP_ACK: the first N ACKs that reach this device are lost, so that the requester's
 * transport timer sends messages again that the responder has already executed. */
static bool drop_ack(struct sim_ctx *sc, const struct pkt *p)
{
	if (p->type != PKT_ACK || sc->dropped_acks >= sim_env.drop_ack)
		return false;
	sc->dropped_acks++;
	TRACE("RVXSIM_DROP_ACK: ACK for qp 0x%x seq %u lost", p->dst_qpn, p->seq);
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
		if (qp && !(sc->peer_lost && p->src_lid != sc->lid) && !drop_read_resp(sc, p) &&
		    !drop_ack(sc, p))
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
void rewind_to(struct sim_qp *qp, uint32_t i)
{
	struct sq_rec *r = rec_at(qp, i);

	tx_drop(qp);
	qp->sq_pc = r->pc;
	qp->next_seq = r->seq;
	qp->out_head = i;
	qp->sc->wqes_executed -= 1;
}

/* Transport timer on the oldest unanswered message: go back and send again, up to retry_cnt
 * times, then TRANSPORT_RETRY_EXC_ERR. A stopped peer is waited for. */
static int transport_timer(struct sim_ctx *sc, struct sim_qp *qp, uint64_t now)
{
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
			return 1;
		} else {
			qp_fault(qp, r->idx, "transport retry count exceeded: no response from lid "
				 "0x%x qp 0x%x%s", qp->attr.ah_attr.dlid, qp->attr.dest_qp_num,
				 fabric_peer_alive(sc, qp->attr.ah_attr.dlid) ? "" :
				 " (peer is gone)");
			rec_done(qp, r, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
			r->ready_ns = 0;
			return sq_retire(qp, now);
		}
	}
	return 0;
}

/* One QP's turn: doorbells, ACKs owed, RNR waits, new WQEs started, completions, timers. */
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
	/* UC has no transport timer: nothing is answered, nothing is sent again */
	if (qp->out_tail != qp->out_head && !qp->rnr_waiting && qp->state == IBV_QPS_RTS &&
	    qp->type != IBV_QPT_UC)
		work |= transport_timer(sc, qp, now);
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

/* A state change gives the engine work only when it has WQEs to flush (ERR, SQE) or starts a send
 * queue with WQEs already posted or in flight (RTS, SQD); the other changes (RESET, INIT, RTR, and
 * RTS with an empty queue, as in every DCI recovery) wait for a packet or a doorbell anyway, and a
 * futex wake for each of them costs the application a system call. Called under sc->lock. */
bool engine_state_gives_work(const struct sim_qp *qp, int next)
{
	if (next == IBV_QPS_ERR || next == IBV_QPS_SQE)
		return true;
	if (next != IBV_QPS_RTS && next != IBV_QPS_SQD)
		return false;
	return qp_waits(qp) ||
	       (qp->sq_wqe_cnt && ((be32toh(qp->dbrec[MLX5_SND_DBR]) - qp->sq_pc) & 0xffff));
}

/* One pass over the device under its lock: the inbox, every QP and CQ. *waits: some QP has a
 * timer to serve. Nonzero when something was done. */
static int engine_pass(struct sim_ctx *sc, uint64_t now, bool *waits)
{
	int work = 0;

	pthread_mutex_lock(&sc->lock);
	work |= drain_inbox(sc);
	for (struct sim_qp *qp = sc->qps; qp; qp = qp->next) {
		work |= qp_work(sc, qp, now);
		*waits |= qp_waits(qp);
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
	return work;
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
		bool waits = false;
		int work;

		/* timers need microseconds, not nanoseconds: read the clock every few busy rounds */
		if ((loops++ & 7) == 0)
			now = sim_now_ns();

		work = engine_pass(sc, now, &waits);

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

/* ------------------------------------------------------------------ for ud.c */

void *engine_mr_ptr(struct sim_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
		    const char **why)
{
	return mr_ptr(qp, key, addr, len, need, why);
}
