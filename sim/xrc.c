/* rvxsim: the eXtended Reliable Connected transport (XRC) as mlx5_ib gives it on a ConnectX-6:
 * XRC domains (ibv_open_xrcd/ibv_close_xrcd, shared by the file they are opened with), XRC SRQs
 * (ibv_create_srq_ex with IBV_SRQT_XRC, a CQ of their own), and target QPs (IBV_QPT_XRC_RECV:
 * no queues, created in a domain, receiving through the SRQ each request names). Initiator QPs
 * (IBV_QPT_XRC_SEND) are RC requesters whose WQEs carry the XRC segment (qp.c, provider.c,
 * decode.c); the target's execution of a request is responder.c's, through xrc_request. */
#include "verbs.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

/* An XRC domain of the adapter: one per file (dev, inode) it was opened with, or one per
 * open without a file (fd -1). */
struct sim_xrcd_dom {
	bool has_inode;
	dev_t dev;
	ino_t ino;
	int opens;                   /* handles open on it */
	uint32_t xrcdn;
	struct sim_xrcd_dom *next;
};

/* A handle ibv_open_xrcd gives: the domain, and the objects made through it (the kernel's
 * uverbs refuses to close a handle they still use). */
struct sim_xrcd {
	struct ibv_xrcd xrcd;
	struct sim_xrcd_dom *dom;
	_Atomic int users;
};

static uint32_t next_xrcdn = 1;

/* ibv_open_xrcd: libibverbs' ibv_cmd_open_xrcd checks the mask, the kernel's uverbs
 * ib_uverbs_open_xrcd the file: a descriptor that is not open EBADF, a file with no domain yet
 * and no O_CREAT EAGAIN, a file with one and O_EXCL EINVAL; fd -1 is always a new domain.
 * libmlx5 (mlx5_open_xrcd) returns NULL; errno is set to the error here. */
struct ibv_xrcd *sim_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct sim_xrcd_dom *d = NULL;
	struct sim_xrcd *x;
	struct stat st;

	sim_count_verb();
	if (a->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EINVAL;
		return NULL;
	}
	if (a->fd != -1 && fstat(a->fd, &st) < 0) {
		errno = EBADF;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&sc->lock);
	if (a->fd != -1) {
		for (d = sc->xrcds; d; d = d->next)
			if (d->has_inode && d->dev == st.st_dev && d->ino == st.st_ino)
				break;
		if ((!d && !(a->oflags & O_CREAT)) || (d && (a->oflags & O_EXCL))) {
			pthread_mutex_unlock(&sc->lock);
			free(x);
			errno = d ? EINVAL : EAGAIN;
			return NULL;
		}
	}
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			pthread_mutex_unlock(&sc->lock);
			free(x);
			errno = ENOMEM;
			return NULL;
		}
		if (a->fd != -1) {
			d->has_inode = true;
			d->dev = st.st_dev;
			d->ino = st.st_ino;
		}
		d->xrcdn = next_xrcdn++;
		d->next = sc->xrcds;
		sc->xrcds = d;
	}
	d->opens++;
	x->dom = d;
	x->xrcd.context = ctx;
	pthread_mutex_unlock(&sc->lock);
	return &x->xrcd;
}

/* ibv_close_xrcd: EBUSY while an SRQ or target QP made through the handle remains (the kernel's
 * uverbs_free_xrcd); the domain goes with its last handle. */
int sim_close_xrcd(struct ibv_xrcd *ibx)
{
	struct sim_xrcd *x = (struct sim_xrcd *)ibx;
	struct sim_ctx *sc = to_sctx(ibx->context);
	struct sim_xrcd_dom **pp;

	sim_count_verb();
	if (atomic_load(&x->users))
		return EBUSY;
	pthread_mutex_lock(&sc->lock);
	if (--x->dom->opens == 0) {
		for (pp = &sc->xrcds; *pp; pp = &(*pp)->next)
			if (*pp == x->dom) {
				*pp = x->dom->next;
				break;
			}
		free(x->dom);
	}
	pthread_mutex_unlock(&sc->lock);
	free(x);
	return 0;
}

void sim_xrcd_put(struct sim_xrcd *xh)
{
	if (xh)
		atomic_fetch_sub(&xh->users, 1);
}

/* An SRQ of the adapter by number (the engine holds sc->lock; the poll path reads the list as
 * it stands, SRQs being added at its head). */
struct sim_srq *sim_srq_lookup(struct sim_ctx *sc, uint32_t srqn)
{
	for (struct sim_srq *s = sc->srqs; s; s = s->next)
		if (s->srqn == srqn)
			return s;
	return NULL;
}

/* ibv_create_srq_ex beyond what libibverbs' inline wrapper sends to ibv_create_srq: libmlx5's
 * mlx5_create_srq_ex (a basic SRQ by ibv_create_srq; a type other than XRC and TM EINVAL; over
 * the device's max_srq_wr or SGEs EINVAL), libibverbs' ibv_cmd_create_srq_ex (unknown mask bits
 * EOPNOTSUPP; no PD EINVAL; XRC without XRCD or CQ EINVAL), and the kernel's handles (a PD, CQ
 * or domain of another context EINVAL). Tag-matching SRQs are a model gap (EOPNOTSUPP). */
struct ibv_srq *sim_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct sim_xrcd *x;
	struct ibv_srq *srq;
	struct sim_srq *s;

	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) || a->srq_type == IBV_SRQT_BASIC) {
		if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
			errno = EINVAL;
			return NULL;
		}
		return ibv_create_srq(a->pd, (struct ibv_srq_init_attr *)a);
	}
	if (a->srq_type != IBV_SRQT_XRC && a->srq_type != IBV_SRQT_TM) {
		errno = EINVAL;
		return NULL;
	}
	if (a->srq_type == IBV_SRQT_TM) {
		sim_unsupported("ibv_create_srq_ex(IBV_SRQT_TM)");
		return NULL;
	}
	if (a->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
	    !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->pd || !a->xrcd || !a->cq ||
	    to_sctx(a->pd->context) != sc || to_sctx(a->xrcd->context) != sc ||
	    to_sctx(a->cq->context) != sc) {
		errno = EINVAL;
		return NULL;
	}
	srq = ibv_create_srq(a->pd, (struct ibv_srq_init_attr *)a);
	if (!srq)
		return NULL;
	s = to_ssrq(srq);
	x = (struct sim_xrcd *)a->xrcd;
	atomic_fetch_add(&x->users, 1);
	pthread_mutex_lock(&sc->lock);
	s->xh = x;
	s->xrcd = x->dom;
	s->cq = to_scq(a->cq);
	pthread_mutex_unlock(&sc->lock);
	return srq;
}

/* A target QP (ibv_create_qp_ex, IBV_QPT_XRC_RECV with IBV_QP_INIT_ATTR_XRCD): the kernel's
 * mlx5_ib makes it with no queues, no CQs and no PD of its own; the capabilities asked for are
 * not used, and reported as 0 [inferred]. libmlx5 has no ibv_wr_* builders for it
 * (mlx5_qp_fill_wr_pfns: EOPNOTSUPP). */
struct ibv_qp *sim_create_xrc_tgt(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct sim_xrcd *x = (struct sim_xrcd *)a->xrcd;
	struct ibv_qp *qp;

	if (!x || to_sctx(a->xrcd->context) != sc) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = sim_qp_new_tgt(ctx, a);
	if (!qp)
		return NULL;
	atomic_fetch_add(&x->users, 1);
	pthread_mutex_lock(&sc->lock);
	to_sqp(qp)->xh = x;
	to_sqp(qp)->xrcd = x->dom;
	pthread_mutex_unlock(&sc->lock);
	return qp;
}
