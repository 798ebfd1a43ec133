/* rvxsim: the Dynamically Connected transport. A DCI is a send-only QP whose every WQE carries
 * the address of its target (an address segment after the ctrl segment); a DCT is a receive-only
 * QP on an SRQ that any number of DCIs reach by (LID or GID, DCT number, access key).
 *
 * The requester side is the RC engine with a target that changes WQE by WQE: a DCI keeps one
 * connection at a time, and a WQE for another target waits until everything sent on the current
 * connection has completed (so WQEs are served in order, each to its own target). Every
 * connection gets a new number; the packets carry it, the access key, the SL and the GRH bit.
 *
 * The responder side is the RC responder with its per-connection state (sim_qp exp_seq ..
 * rd_active) kept per initiator in a hash table and swapped in around each request, so a DCT
 * serves any number of initiators at the same cost per packet. Idle initiators are forgotten. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#define RESP_OFF offsetof(struct sim_qp, SIM_RESP_FIRST)
#define RESP_LEN (offsetof(struct sim_qp, SIM_RESP_END) + \
		  sizeof(((struct sim_qp *)0)->SIM_RESP_END) - RESP_OFF)

/* One initiator (DCI) as a DCT sees it: the connection it is on and its responder state. */
struct dc_ini {
	struct dc_ini *next;         /* hash chain */
	struct dc_ini *ack_next;     /* list of initiators owed an ACK */
	uint16_t lid;
	uint32_t qpn, conn;
	uint64_t last_ns;
	bool ack_listed;
	_Alignas(8) unsigned char rs[];  /* the QP's responder block [RESP_OFF, RESP_OFF+RESP_LEN) */
};

struct sim_dc {
	int type;
	uint64_t key;                /* DCT: access key; DCI: key of the WQE being sent */
	/* DCI */
	uint32_t conn;               /* connection number, new for every target */
	bool connected;
	uint64_t last_ns;            /* last WQE started on the connection */
	uint32_t seq_end;            /* one past the last sequence number sent on it */
	uint8_t sl, grh;
	/* DCT */
	struct dc_ini **tab;
	uint32_t tab_size, count, gc_cursor;
	struct dc_ini *acks;
	uint32_t cur_conn;           /* connection of the initiator swapped in */
	uint64_t key_drops;
	uint16_t kv_lid;             /* the last wrong-key connection reported */
	uint32_t kv_qpn, kv_conn;
};

/* ------------------------------------------------------------------ address segment */

uint32_t av_parse(const uint8_t *seg, uint32_t room, struct sim_av *av, char *why, size_t n)
{
	const struct mlx5_wqe_av *a = (const void *)seg;
	uint32_t dq, gfl;

	memset(av, 0, sizeof(*av));
	/* rule: the AV is 16 bytes, 48 with MLX5_EXTENDED_UD_AV (mlx5_wqe_av, mlx5dv.h; facts 2) */
	if (room < 16) {
		snprintf(why, n, "no room for the address segment (%u bytes left)", room);
		return 0;
	}
	av->key = be64toh(a->key.dc_key);
	dq = be32toh(a->dqp_dct);
	av->ext = (dq & MLX5_EXTENDED_UD_AV) != 0;
	av->dqpn = dq & 0xffffff;
	av->rate = a->stat_rate_sl >> 4;
	av->sl = sim_env.link_eth ? (a->stat_rate_sl >> 1) & 7 : a->stat_rate_sl & 0xf;
	av->fl_mlid = a->fl_mlid;
	av->rlid = be16toh(a->rlid);
	av->len = 16;
	if (av->ext) {
		if (room < 48) {
			snprintf(why, n, "extended address segment does not fit (%u bytes left)", room);
			return 0;
		}
		memcpy(av->rmac, a->rmac, 6);
		av->tclass = a->tclass;
		av->hop_limit = a->hop_limit;
		gfl = be32toh(a->grh_gid_fl);
		av->grh = (gfl >> 30) & 1;
		av->sgid_index = (gfl >> 20) & 0xff;
		av->flow_label = gfl & 0xfffff;
		memcpy(av->rgid, a->rgid, 16);
		av->len = 48;
	}
	/* [inferred] a RoCE port cannot route an address without the GRH */
	if (sim_env.link_eth && !av->grh) {
		snprintf(why, n, "address segment without a GRH on a RoCE port (%s form)",
			 av->ext ? "extended" : "16-byte");
		return 0;
	}
	return av->len;
}

/* The model's GIDs end in the owner's LID (RoCE and IB alike). */
uint16_t av_lid(const struct sim_av *av)
{
	if (av->grh && (sim_env.link_eth || !av->rlid))
		return (uint16_t)(av->rgid[14] << 8 | av->rgid[15]);
	return av->rlid;
}

void av_trace(const struct sim_av *av)
{
	sim_trace("    av %s dqpn 0x%x key 0x%llx rlid 0x%x sl %u rate %u fl_mlid 0x%02x%s",
		  av->ext ? "extended" : "base", av->dqpn, (unsigned long long)av->key, av->rlid,
		  av->sl, av->rate, av->fl_mlid, av->grh ? " GRH" : "");
	if (av->grh)
		sim_trace("    grh sgid_index %u tclass %u hop_limit %u flow_label 0x%x rgid "
			  "%02x%02x:...:%02x%02x:%02x%02x", av->sgid_index, av->tclass, av->hop_limit,
			  av->flow_label, av->rgid[0], av->rgid[1], av->rgid[12], av->rgid[13],
			  av->rgid[14], av->rgid[15]);
}

/* ------------------------------------------------------------------ objects and states */

int dc_init(struct sim_qp *qp, int type, uint64_t key)
{
	struct sim_dc *d = calloc(1, sizeof(*d));

	if (!d)
		return ENOMEM;
	d->type = type;
	d->key = key;
	/* connection numbers of a recreated DCI must not repeat those of an earlier one */
	d->conn = (uint32_t)(sim_now_ns() >> 10) ^ (uint32_t)(uintptr_t)qp;
	if (type == SIM_DCT) {
		d->tab_size = 64;
		d->tab = calloc(d->tab_size, sizeof(*d->tab));
		if (!d->tab) {
			free(d);
			return ENOMEM;
		}
	}
	qp->dc = d;
	qp->dc_type = (uint8_t)type;
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)(sizeof(*d) + d->tab_size * sizeof(*d->tab)));
	return 0;
}

void dc_free(struct sim_qp *qp)
{
	struct sim_dc *d = qp->dc;

	if (!d)
		return;
	for (uint32_t i = 0; d->tab && i < d->tab_size; i++)
		for (struct dc_ini *e = d->tab[i], *n; e; e = n) {
			n = e->next;
			sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)(sizeof(*e) + RESP_LEN));
			free(e);
		}
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)(sizeof(*d) + d->tab_size * sizeof(*d->tab)));
	free(d->tab);
	free(d);
	qp->dc = NULL;
}

static int valid_mask(int mask, int req, int opt, char *why, size_t n)
{
	if ((mask & req) != req) {
		snprintf(why, n, "required attributes 0x%x are missing", req & ~mask);
		return EINVAL;
	}
	if (mask & ~(req | opt)) {
		snprintf(why, n, "attributes 0x%x are not allowed in this transition",
			 mask & ~(req | opt));
		return EINVAL;
	}
	return 0;
}

/* The kernel's masks: modify_dci_qp_is_ok for a DCI, mlx5_ib_modify_dct for a DCT (which has
 * only RESET -> INIT -> RTR, each with an exact mask). */
int dc_check_mask(struct sim_qp *qp, int cur, int next, int mask, char *why, size_t n)
{
	int req = IBV_QP_STATE;

	/* rule: kernel mlx5_ib modify of a DC QP acts on a state change only; [inferred] errno */
	if (!(mask & IBV_QP_STATE)) {
		snprintf(why, n, "IBV_QP_STATE is required for a DC QP");
		return EINVAL;
	}
	if (qp->dc_type == SIM_DCT) {
		if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT)
			return valid_mask(mask, req | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT, 0, why, n);
		if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
			return valid_mask(mask, req | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
					  IBV_QP_PATH_MTU, 0, why, n);
		snprintf(why, n, "not a valid transition for a DCT (RESET -> INIT -> RTR only)");
		return EINVAL;
	}
	if (next == IBV_QPS_RESET)
		return valid_mask(mask, req, 0, why, n);
	if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT)
		return valid_mask(mask, req | IBV_QP_PKEY_INDEX | IBV_QP_PORT, 0, why, n);
	if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT)
		return valid_mask(mask, req, IBV_QP_PKEY_INDEX | IBV_QP_PORT, why, n);
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
		return valid_mask(mask, req | IBV_QP_PATH_MTU, IBV_QP_PKEY_INDEX | IBV_QP_AV, why, n);
	if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS)
		return valid_mask(mask, req | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN, IBV_QP_MIN_RNR_TIMER, why, n);
	if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS)
		return valid_mask(mask, req, IBV_QP_MIN_RNR_TIMER, why, n);
	if (cur != IBV_QPS_RESET && next == IBV_QPS_ERR)
		return valid_mask(mask, req, 0, why, n);
	snprintf(why, n, "not a valid transition for a DCI");
	return EINVAL;
}

/* After a transition (sim lock held): a DCT gets its number at RTR; a DCI forgets its target. */
void dc_modified(struct sim_qp *qp, int cur, int next)
{
	(void)cur;
	if (qp->dc_type == SIM_DCT && next == IBV_QPS_RTR)
		qp->qp.qp_num = qp->qpn;
	if (qp->dc_type == SIM_DCI && (next == IBV_QPS_RESET || next == IBV_QPS_RTS)) {
		qp->dc->connected = false;
		qp->attr.ah_attr.dlid = 0;
		qp->attr.dest_qp_num = 0;
	}
}

/* ------------------------------------------------------------------ DCI */

/* Point the DCI at the WQE's target. False while WQEs of the current connection are still in
 * flight: hardware finishes one connection before it opens the next. A WQE sent again (a go-back
 * after a timeout or an RNR NAK: its sequence number is below seq_end) stays on its connection
 * however long ago that started: the DCT has perhaps executed it already and must see a
 * duplicate, not the first message of a new connection, which it would execute again. */
bool dc_connect(struct sim_qp *qp, const struct sim_av *av)
{
	struct sim_dc *d = qp->dc;
	uint16_t lid = av_lid(av);
	uint64_t now = sim_now_ns();
	bool change = !d->connected || lid != qp->attr.ah_attr.dlid ||
		      av->dqpn != qp->attr.dest_qp_num;
	bool resend = d->connected && (int32_t)(qp->next_seq - d->seq_end) < 0;
	/* a connection idle for long is closed, as hardware does, before the DCT forgets it;
	 * records rewound for a resend are not "nothing in flight" (out_head moved back) */
	bool idle = !change && !resend && qp->out_tail == qp->out_head &&
		    now - d->last_ns > (uint64_t)(2 * sim_env.retry_timeout_ms + 500) * 1000000ull;

	if (change && qp->out_tail != qp->out_head)
		return false;
	d->last_ns = now;
	if (change || idle) {
		d->connected = true;
		d->conn++;
		qp->attr.ah_attr.dlid = lid;
		qp->attr.dest_qp_num = av->dqpn;
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		qp->next_seq = 0;    /* every connection numbers its messages from 0 */
		d->seq_end = 0;
		TRACE("qp 0x%x: DCI connects to lid 0x%x dct 0x%x (connection %u)", qp->qpn, lid,
		      av->dqpn, d->conn);
	}
	if ((int32_t)(qp->next_seq + 1 - d->seq_end) > 0)
		d->seq_end = qp->next_seq + 1;   /* this WQE's message takes next_seq */
	d->key = av->key;
	d->sl = av->sl;
	d->grh = av->grh;
	qp->attr.ah_attr.is_global = av->grh;
	qp->attr.ah_attr.sl = av->sl;
	return true;
}

void dc_hdr(struct sim_qp *qp, struct pkt *p)
{
	if (qp->dc_type == SIM_DCT)
		p->dc_conn = qp->dc->cur_conn;
	if (qp->dc_type != SIM_DCI)
		return;
	p->dc_key = qp->dc->key;
	p->dc_conn = qp->dc->conn;
	p->dc_sl = qp->dc->sl;
	p->dc_grh = qp->dc->grh;
}

/* A response belongs to the DCI's current connection (not to an earlier one to that DCT). */
bool dc_response_ok(struct sim_qp *qp, const struct pkt *p)
{
	return p->dc_conn == qp->dc->conn;
}

/* ------------------------------------------------------------------ DCT */

static uint32_t ini_hash(uint16_t lid, uint32_t qpn, uint32_t size)
{
	uint32_t h = (uint32_t)lid * 0x9e3779b1u ^ qpn * 0x85ebca6bu;
	return (h ^ h >> 15) & (size - 1);
}

static struct dc_ini *ini_find(struct sim_dc *d, uint16_t lid, uint32_t qpn)
{
	for (struct dc_ini *e = d->tab[ini_hash(lid, qpn, d->tab_size)]; e; e = e->next)
		if (e->lid == lid && e->qpn == qpn)
			return e;
	return NULL;
}

/* Keep chains short whatever the number of initiators: double the table past one per bucket. */
static void ini_grow(struct sim_dc *d)
{
	uint32_t ns = d->tab_size * 2;
	struct dc_ini **nt = calloc(ns, sizeof(*nt));

	if (!nt)
		return;
	for (uint32_t i = 0; i < d->tab_size; i++)
		for (struct dc_ini *e = d->tab[i], *n; e; e = n) {
			uint32_t h = ini_hash(e->lid, e->qpn, ns);
			n = e->next;
			e->next = nt[h];
			nt[h] = e;
		}
	free(d->tab);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)((ns - d->tab_size) * sizeof(*nt)));
	d->tab = nt;
	d->tab_size = ns;
}

static struct dc_ini *ini_add(struct sim_dc *d, uint16_t lid, uint32_t qpn)
{
	struct dc_ini *e = calloc(1, sizeof(*e) + RESP_LEN);
	uint32_t h;

	if (!e)
		return NULL;
	if (d->count >= d->tab_size)
		ini_grow(d);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)(sizeof(*e) + RESP_LEN));
	e->lid = lid;
	e->qpn = qpn;
	h = ini_hash(lid, qpn, d->tab_size);
	e->next = d->tab[h];
	d->tab[h] = e;
	d->count++;
	return e;
}

static void swap_in(struct sim_qp *dct, struct dc_ini *e)
{
	memcpy((char *)dct + RESP_OFF, e->rs, RESP_LEN);
	dct->dc->cur_conn = e->conn;
	dct->attr.dest_qp_num = e->qpn;
	dct->attr.ah_attr.dlid = e->lid;
}

static void swap_out(struct sim_qp *dct, struct dc_ini *e)
{
	memcpy(e->rs, (char *)dct + RESP_OFF, RESP_LEN);
	memset((char *)dct + RESP_OFF, 0, RESP_LEN);
}

/* Send the ACK the responder owes this initiator; false when its inbox is full. */
static bool send_ack(struct sim_ctx *sc, struct sim_qp *dct)
{
	struct pkt a;

	memset(&a, 0, sizeof(a));
	a.type = PKT_ACK;
	a.src_lid = sc->lid;
	a.dst_lid = dct->attr.ah_attr.dlid;
	a.src_qpn = dct->qpn;
	a.dst_qpn = dct->attr.dest_qp_num;
	a.seq = dct->ack_pending - 1;
	a.dc_conn = dct->dc->cur_conn;
	if (!fabric_send(sc, a.dst_lid, &a))
		return false;
	dct->ack_pending = 0;
	return true;
}

static void owe_ack(struct sim_dc *d, struct dc_ini *e)
{
	if (e->ack_listed)
		return;
	e->ack_listed = true;
	e->ack_next = d->acks;
	d->acks = e;
}

/* One request packet for a DCT. Returns false when it must be retried later (as for RC).
 * A wrong access key is reported once per connection (its retransmissions are dropped quietly). */
bool dc_request(struct sim_ctx *sc, struct sim_qp *dct, struct pkt *p)
{
	struct sim_dc *d = dct->dc;
	struct dc_ini *e;
	bool done;

	if (dct->state != IBV_QPS_RTR)
		return true;     /* a DCT that is not ready drops what arrives */
	e = ini_find(d, p->src_lid, p->src_qpn);
	if (p->dc_key != d->key) {
		/* [inferred] a wrong access key is dropped silently at the target (as a Q_Key
		 * violation is); the initiator sees no answer and its transport retries run out */
		d->key_drops++;
		if (d->kv_lid != p->src_lid || d->kv_qpn != p->src_qpn || d->kv_conn != p->dc_conn) {
			d->kv_lid = p->src_lid;
			d->kv_qpn = p->src_qpn;
			d->kv_conn = p->dc_conn;
			sim_log("rvxsim: qp 0x%x (DCT): request from lid 0x%x qp 0x%x seq %u carries DC "
				"key 0x%llx, not this DCT's access key: dropped", dct->qpn, p->src_lid,
				p->src_qpn, p->seq, (unsigned long long)p->dc_key);
		}
		return true;
	}
	if (!e || e->conn != p->dc_conn) {
		/* a new connection starts with the first packet of its first message; anything
		 * else follows a gap (that message was dropped) and is dropped too */
		if (!(p->flags & PKT_F_FIRST) || p->seq != 0)
			return true;
		if (!e && !(e = ini_add(d, p->src_lid, p->src_qpn)))
			return true;     /* no memory: as a lost packet, the initiator retries */
		memset(e->rs, 0, RESP_LEN);   /* an ACK owed on the old connection is moot */
		e->conn = p->dc_conn;
		TRACE("qp 0x%x (DCT): connection %u from lid 0x%x qp 0x%x at seq %u", dct->qpn,
		      p->dc_conn, p->src_lid, p->src_qpn, p->seq);
	}
	e->last_ns = sim_now_ns();
	swap_in(dct, e);
	dct->attr.ah_attr.is_global = p->dc_grh;
	dct->attr.ah_attr.sl = p->dc_sl;
	done = engine_request(sc, dct, p);
	if (dct->ack_pending && !send_ack(sc, dct))
		owe_ack(d, e);
	swap_out(dct, e);
	return done;
}

bool dc_waits(const struct sim_qp *dct)
{
	return dct->dc && dct->dc->acks;
}

/* Per engine pass: ACKs that did not fit, and a little garbage collection of initiators idle
 * for longer than any retransmission can take (one bucket per pass: constant cost). */
int dc_dct_work(struct sim_ctx *sc, struct sim_qp *dct, uint64_t now)
{
	struct sim_dc *d = dct->dc;
	struct dc_ini **pp, *e;
	int work = 0;
	uint64_t idle = (uint64_t)(4 * sim_env.retry_timeout_ms + 1000) * 1000000ull;

	for (pp = &d->acks; (e = *pp);) {
		swap_in(dct, e);
		bool sent = !dct->ack_pending || send_ack(sc, dct);
		swap_out(dct, e);
		if (!sent) {
			pp = &e->ack_next;
			continue;
		}
		*pp = e->ack_next;
		e->ack_listed = false;
		work = 1;
	}
	pp = &d->tab[d->gc_cursor++ & (d->tab_size - 1)];
	while ((e = *pp)) {
		if (!e->ack_listed && now > e->last_ns + idle) {
			*pp = e->next;
			sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)(sizeof(*e) + RESP_LEN));
			free(e);
			d->count--;
			continue;
		}
		pp = &e->next;
	}
	return work;
}
