/* rvxsim: completion channels, CQs (created as libmlx5 lays them out, the extended polling
 * interface, resize, arming and events) and the context's async events. */
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

/* ------------------------------------------------------------------ completion channel, CQ */

SIM_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct sim_channel *ch = calloc(1, sizeof(*ch));
	int p[2];

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(ch);
		return NULL;
	}
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	ch->ch.context = ctx;
	ch->ch.fd = p[0];
	ch->wfd = p[1];
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}

SIM_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *c)
{
	struct sim_channel *ch = (struct sim_channel *)c;

	if (c->refcnt)
		return EBUSY;
	close(c->fd);
	close(ch->wfd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	return 0;
}

/* The extended-CQ polling interface (for CQs from mlx5dv_create_cq), on top of poll_cq_op. */
static int cqx_next(struct ibv_cq_ex *cx)
{
	struct sim_cq *cq = (struct sim_cq *)cx;
	if (poll_cq_op(&cq->cq, 1, &cq->cur) != 1)
		return ENOENT;
	cx->wr_id = cq->cur.wr_id;
	cx->status = cq->cur.status;
	return 0;
}
static int cqx_start(struct ibv_cq_ex *cx, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	return cqx_next(cx);
}
static void cqx_end(struct ibv_cq_ex *cx) { (void)cx; }
#define CUR(cx) (((struct sim_cq *)(cx))->cur)
static enum ibv_wc_opcode cqx_opcode(struct ibv_cq_ex *cx) { return CUR(cx).opcode; }
static uint32_t cqx_vendor_err(struct ibv_cq_ex *cx) { return CUR(cx).vendor_err; }
static uint32_t cqx_byte_len(struct ibv_cq_ex *cx) { return CUR(cx).byte_len; }
static __be32 cqx_imm(struct ibv_cq_ex *cx) { return CUR(cx).imm_data; }
static uint32_t cqx_qp_num(struct ibv_cq_ex *cx) { return CUR(cx).qp_num; }
static uint32_t cqx_src_qp(struct ibv_cq_ex *cx) { return CUR(cx).src_qp; }
static unsigned int cqx_wc_flags(struct ibv_cq_ex *cx) { return CUR(cx).wc_flags; }
static uint32_t cqx_slid(struct ibv_cq_ex *cx) { return CUR(cx).slid; }
static uint8_t cqx_sl(struct ibv_cq_ex *cx) { return CUR(cx).sl; }
static uint8_t cqx_dlid_path_bits(struct ibv_cq_ex *cx) { return CUR(cx).dlid_path_bits; }

static void cqx_init(struct sim_cq *cq)
{
	cq->cqx.start_poll = cqx_start;
	cq->cqx.next_poll = cqx_next;
	cq->cqx.end_poll = cqx_end;
	cq->cqx.read_opcode = cqx_opcode;
	cq->cqx.read_vendor_err = cqx_vendor_err;
	cq->cqx.read_byte_len = cqx_byte_len;
	cq->cqx.read_imm_data = cqx_imm;
	cq->cqx.read_qp_num = cqx_qp_num;
	cq->cqx.read_src_qp = cqx_src_qp;
	cq->cqx.read_wc_flags = cqx_wc_flags;
	cq->cqx.read_slid = cqx_slid;
	cq->cqx.read_sl = cqx_sl;
	cq->cqx.read_dlid_path_bits = cqx_dlid_path_bits;
}

/* the heap a CQ holds: entries, doorbell record, UAR page */
static size_t cq_bytes(const struct sim_cq *cq)
{
	return sizeof(*cq) + (size_t)cq->cqe_cnt * cq->cqe_size + 64 + 4096;
}

SIM_PRIV struct ibv_cq *rvxsim_priv_create_cq(struct ibv_context *ctx, int cqe,
					     struct ibv_comp_channel *ch, int vec,
					     uint32_t cqe_size, bool ignore_overrun)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct sim_cq *cq;

	sim_count_verb();
	if (huge_refused("MLX_CQ_ALLOC_TYPE"))
		return NULL;
	/* rule: libmlx5 create_cq (cqe 0) and mlx5_ib_create_cq (over max_cqe, 2^22 - 1; a vector
	 * the context has), CQEs of 64 or 128 bytes (get_cqe_size): EINVAL */
	if (cqe < 1 || cqe > SIM_MAX_CQE || vec < 0 || vec >= ctx->num_comp_vectors ||
	    (cqe_size != 64 && cqe_size != 128)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->cqe_cnt = roundup_pow2((uint32_t)cqe + 1);
	cq->cqe_size = cqe_size;
	cq->buf = zalloc_aligned(4096, (size_t)cq->cqe_cnt * cqe_size);
	cq->dbrec = zalloc_aligned(64, 64);
	cq->uar = zalloc_aligned(4096, 4096);
	if (!cq->buf || !cq->dbrec || !cq->uar) {
		free(cq->buf);
		free(cq->dbrec);
		free(cq->uar);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < cq->cqe_cnt; i++)
		cq->buf[(size_t)i * cqe_size + cqe_size - 1] = MLX5_CQE_INVALID << 4;
	cq->uar_ptr = cq->uar;
	cq->ignore_overrun = ignore_overrun;
	cqx_init(cq);
	pthread_spin_init(&cq->poll_lock, PTHREAD_PROCESS_PRIVATE);
	cq->cq.context = ctx;
	cq->cq.channel = ch;
	cq->cq.cqe = cq->cqe_cnt - 1;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	if (ch) {
		pthread_mutex_lock(&ctx->mutex);
		ch->refcnt++;
		pthread_mutex_unlock(&ctx->mutex);
	}
	pthread_mutex_lock(&sc->lock);
	cq->cqn = sc->next_cqn++;
	cq->cq.handle = cq->cqn;
	cq->next = sc->cqs;
	sc->cqs = cq;
	pthread_mutex_unlock(&sc->lock);
	sim_count_obj(SIM_OBJ_CQES, cq->cqe_cnt);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)cq_bytes(cq));
	return &cq->cq;
}

SIM_PRIV struct ibv_cq_ex *rvxsim_priv_create_cq_ex(struct ibv_context *ctx,
						   struct ibv_cq_init_attr_ex *a, uint32_t cqe_size)
{
	struct ibv_cq *cq;
	const uint64_t wc_ok = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
			       IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
			       IBV_WC_EX_WITH_DLID_PATH_BITS;

	if (a->wc_flags & ~wc_ok) {
		sim_unsupported("create_cq_ex(wc_flags: timestamps, flow tag, VLAN or TM)");
		return NULL;
	}
	if (a->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		sim_unsupported("create_cq_ex(comp_mask)");
		return NULL;
	}
	/* a CQ's PD must be a parent domain of its context (libmlx5's create_cq) */
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!a->parent_domain || !((struct sim_pd *)a->parent_domain)->prot ||
	     a->parent_domain->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (a->flags & ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
				    IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))) {
		errno = EINVAL;
		return NULL;
	}
	cq = rvxsim_priv_create_cq(ctx, a->cqe, a->channel, a->comp_vector, cqe_size,
				   (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
				   (a->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN));
	if (cq)
		cq->cq_context = a->cq_context;
	return (struct ibv_cq_ex *)cq;
}

/* The CQE size of a CQ created without one: libmlx5's MLX5_CQE_SIZE, read at each create
 * (64 when unset; anything but 64 or 128 fails the create with EINVAL, as get_cqe_size does). */
SIM_PRIV int rvxsim_priv_env_cqe_size(void)
{
	const char *s = getenv("MLX5_CQE_SIZE");
	int n = s ? atoi(s) : 64;

	if (n != 64 && n != 128) {
		sim_log("rvxsim: MLX5_CQE_SIZE=%s: a CQE is 64 or 128 bytes", s);
		errno = EINVAL;
		return -1;
	}
	return n;
}

SIM_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
					struct ibv_comp_channel *ch, int vec)
{
	int size = rvxsim_priv_env_cqe_size();
	struct ibv_cq *cq = size < 0 ? NULL :
			    rvxsim_priv_create_cq(ctx, cqe, ch, vec, (uint32_t)size, false);
	if (cq)
		cq->cq_context = cq_context;
	return cq;
}

SIM_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sim_cq *cq = to_scq(ibcq);
	struct sim_ctx *sc = to_sctx(ibcq->context);
	struct sim_cq **pp;

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	for (struct sim_qp *q = sc->qps; q; q = q->next)
		if (q->scq == cq || q->rcq == cq) {
			pthread_mutex_unlock(&sc->lock);
			return EBUSY;
		}
	for (struct sim_srq *q = sc->srqs; q; q = q->next)
		if (q->cq == cq) {     /* an XRC SRQ's completions go to it */
			pthread_mutex_unlock(&sc->lock);
			return EBUSY;
		}
	for (pp = &sc->cqs; *pp; pp = &(*pp)->next)
		if (*pp == cq) {
			*pp = cq->next;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	if (ibcq->channel) {
		pthread_mutex_lock(&ibcq->context->mutex);
		ibcq->channel->refcnt--;
		pthread_mutex_unlock(&ibcq->context->mutex);
	}
	/* like libibverbs: wait until every event handed out was acknowledged */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->sw_arm_sn)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	sim_count_obj(SIM_OBJ_CQES, -(int64_t)cq->cqe_cnt);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)cq_bytes(cq));
	free(cq->buf);
	free(cq->dbrec);
	free(cq->uar);
	pthread_spin_destroy(&cq->poll_lock);
	free(cq);
	return 0;
}

/* ibv_resize_cq: a new buffer of roundup_pow2(cqe + 1) entries holding the CQEs not yet polled,
 * from its first entry; EINVAL when they would not fit (mlx5_ib's resize_cq refuses to lose
 * completions) or cqe is out of range. Done with the engine stopped (its lock) and the poller
 * out. A CQ whose buffer mlx5dv_init_obj gave out is refused: its owner holds the old buffer. */
SIM_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sim_cq *cq = to_scq(ibcq);
	struct sim_ctx *sc = to_sctx(ibcq->context);
	uint32_t cnt, n, old_cnt;
	uint8_t *buf, *old;

	sim_count_verb();
	if (cq->direct) {
		sim_unsupported("ibv_resize_cq on a CQ given out by mlx5dv_init_obj");
		return EOPNOTSUPP;
	}
	/* rule: kernel mlx5_ib_resize_cq: fewer than 1 or more than max_cqe entries, EINVAL */
	if (cqe < 1 || cqe > SIM_MAX_CQE)
		return EINVAL;
	cnt = roundup_pow2((uint32_t)cqe + 1);
	if (cnt == cq->cqe_cnt)
		return 0;
	buf = zalloc_aligned(4096, (size_t)cnt * cq->cqe_size);
	if (!buf)
		return ENOMEM;
	for (uint32_t i = 0; i < cnt; i++)
		buf[(size_t)i * cq->cqe_size + cq->cqe_size - 1] = MLX5_CQE_INVALID << 4;
	pthread_mutex_lock(&sc->lock);
	pthread_spin_lock(&cq->poll_lock);
	n = cq->pi - cq->cons_index;
	if (n >= cnt) {
		pthread_spin_unlock(&cq->poll_lock);
		pthread_mutex_unlock(&sc->lock);
		free(buf);
		return EINVAL;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *d = buf + (size_t)i * cq->cqe_size;
		memcpy(d, cq->buf + (size_t)((cq->cons_index + i) & (cq->cqe_cnt - 1)) * cq->cqe_size,
		       cq->cqe_size);
		d[cq->cqe_size - 1] &= (uint8_t)~MLX5_CQE_OWNER_MASK;   /* first lap: owner 0 */
	}
	old = cq->buf;
	old_cnt = cq->cqe_cnt;
	cq->buf = buf;
	cq->cqe_cnt = cnt;
	cq->pi = n;
	cq->cons_index = 0;
	cq->dbrec[0] = 0;
	ibcq->cqe = (int)cnt - 1;
	pthread_spin_unlock(&cq->poll_lock);
	pthread_mutex_unlock(&sc->lock);
	free(old);
	sim_count_obj(SIM_OBJ_CQES, (int64_t)cnt - (int64_t)old_cnt);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, ((int64_t)cnt - (int64_t)old_cnt) * cq->cqe_size);
	return 0;
}

SIM_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	struct ibv_cq *c;

	if (read(ch->fd, &c, sizeof(c)) != sizeof(c))
		return -1;
	*cq = c;
	*cq_context = c->cq_context;
	/* the next arm must carry a new sequence number, as libmlx5 does on each event */
	to_scq(c)->sw_arm_sn++;
	return 0;
}

SIM_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += n;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* Arm exactly as libmlx5 does: arm word in dbrec[1], then the 64-bit doorbell at UAR+0x20. */
int req_notify_op(struct ibv_cq *ibcq, int solicited)
{
	struct sim_cq *cq = to_scq(ibcq);
	uint32_t sn = cq->sw_arm_sn & 3;
	uint32_t ci = cq->cons_index & 0xffffff;
	uint32_t cmd = solicited ? 1u << 24 : 0;
	uint32_t w = sn << 28 | cmd | ci;

	cq->dbrec[1] = htobe32(w);
	atomic_thread_fence(memory_order_seq_cst);
	*(volatile uint64_t *)((uint8_t *)cq->uar + 0x20) = htobe64((uint64_t)w << 32 | cq->cqn);
	atomic_thread_fence(memory_order_seq_cst);
	engine_kick(to_sctx(ibcq->context));
	return 0;
}

/* ------------------------------------------------------------------ async events */

void sim_async_event(struct sim_ctx *sc, enum ibv_event_type type, void *obj)
{
	struct ibv_async_event ev;
	struct sim_ctx *owner;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		ev.element.cq = obj;
		break;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
	case IBV_EVENT_SRQ_ERR:
		ev.element.srq = obj;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
		ev.element.port_num = 1;
		break;
	default:
		ev.element.qp = obj;
		break;
	}
	/* the event goes to the context that created the object (contexts share the adapter) */
	owner = sc;
	if (type == IBV_EVENT_CQ_ERR)
		owner = ctx_self(ev.element.cq->context);
	else if (type == IBV_EVENT_SRQ_LIMIT_REACHED || type == IBV_EVENT_SRQ_ERR)
		owner = ctx_self(ev.element.srq->context);
	else if (type != IBV_EVENT_PORT_ACTIVE && type != IBV_EVENT_PORT_ERR)
		owner = ctx_self(ev.element.qp->context);
	if (write(owner->async_wfd, &ev, sizeof(ev)) < 0) {
		/* queue full: the event is dropped, as a full kernel event queue would */
	}
}

SIM_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	if (read(ctx->async_fd, ev, sizeof(*ev)) != sizeof(*ev))
		return -1;
	return 0;
}

SIM_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

/* default-version bindings (see SIM_DEFAULT_1_1 in internal.h) */
SIM_DEFAULT_1_1(ibv_ack_async_event)
SIM_DEFAULT_1_1(ibv_ack_cq_events)
SIM_DEFAULT_1_1(ibv_create_cq)
SIM_DEFAULT_1_1(ibv_destroy_cq)
SIM_DEFAULT_1_1(ibv_get_async_event)
SIM_DEFAULT_1_1(ibv_get_cq_event)
SIM_DEFAULT_1_1(ibv_resize_cq)
