/* rvxsim: what the engine's files (engine.c, decode.c, requester.c, responder.c, doorbell.c)
 * share with each other and nothing else includes. */
#ifndef RVXSIM_ENGINE_H
#define RVXSIM_ENGINE_H
#include "internal.h"

#define RNR_SYND 0xff   /* NAK syndrome meaning "receiver not ready" (wire only) */

/* A WQE as decode() copies it out of the ring and checks it. */
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
	uint32_t xrc_srqn;     /* XRC initiator: the XRC segment's SRQ number */
	struct {               /* UMR (a memory window's bind or invalidation): its segments */
		uint8_t flags, free, access;
		uint16_t klm_octo;
		uint64_t mask;
		uint32_t qpn_mkey;
		uint64_t start, len;
		uint32_t klm_bytes, klm_mkey;
		uint64_t klm_addr;
	} umr;
	uint8_t b[1024];
};

/* engine.c: faults, CQEs, QP state, memory checks, the engine thread */
const char *opname(uint8_t op);
void qp_fault(struct sim_qp *qp, uint32_t idx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void cqe_req(struct sim_qp *qp, const struct sq_rec *r);
void cqe_resp_err(struct sim_qp *qp, uint16_t wqe_counter, uint8_t synd);
void tx_drop(struct sim_qp *qp);
void qp_set_err(struct sim_qp *qp);
void *mr_ptr(struct sim_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
	     const char **why);
void rewind_to(struct sim_qp *qp, uint32_t i);

/* mw.c: memory windows as the engine sees them */
int mw_umr(struct sim_qp *qp, const struct wqe *w, char *why, size_t whylen);
void *mw_ptr(struct sim_qp *qp, const struct sim_mr *m, uint64_t addr, uint64_t len, int need,
	     const char **why);
bool mw_invalidate(struct sim_qp *qp, uint32_t key, const char **why);

/* decode.c: WQE decoding */
int decode(struct sim_qp *qp, uint32_t pc, uint32_t db, struct wqe *w, const char **why,
	   char *whybuf, size_t whylen);
void trace_wqe(struct sim_qp *qp, const struct wqe *w);

/* requester.c */
struct sq_rec *rec_at(struct sim_qp *qp, uint32_t i);
uint64_t retry_interval_ns(struct sim_qp *qp);
void hdr_init(struct sim_qp *qp, struct pkt *p, uint8_t type, uint32_t seq);
bool tx_pump(struct sim_qp *qp);
int sq_start(struct sim_qp *qp, uint32_t db);
int sq_retire(struct sim_qp *qp, uint64_t now);
void rec_done(struct sim_qp *qp, struct sq_rec *r, uint8_t synd);
void handle_response(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p);

/* responder.c */
bool send_resp(struct sim_qp *qp, struct pkt *p);
bool rq_peek(struct sim_qp *qp, uint8_t **segs, uint32_t *nsegs, uint32_t *index);
bool handle_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p);

/* doorbell.c */
int watch_doorbells(struct sim_qp *qp, uint64_t now);

#endif
