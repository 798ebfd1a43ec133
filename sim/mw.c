/* rvxsim: memory windows as the adapter executes them. A window is an entry of the key table
 * (struct sim_mw, made by ibv_alloc_mw in objects.c) that a UMR WQE binds to a range of a memory
 * region, with remote rights of its own, or frees; a type 2 window also names the QP that bound
 * it, and only requests arriving on that QP may use it (IBA type 2B). The UMR's segments are the
 * ones libmlx5 writes (rdma-core 44 providers/mlx5/qp.c, set_bind_wr: UMR control, mkey context,
 * one KLM); the checks are the IBA's rules for a bind (o10-36..): the window and the region in
 * the QP's PD, the region bound with IBV_ACCESS_MW_BIND, the range inside it, remote write or
 * atomic rights only over a region with local write, a type 2 window free before its bind and
 * bound to this QP before its invalidation. A failed check is a memory bind error
 * (MLX5_CQE_SYNDROME_MW_BIND_ERR), which fails the QP as any requester error does. */
#include "engine.h"
#include <stdio.h>
#include <string.h>

#define REMOTE (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

static struct sim_mw *mw_of(struct sim_mr *m)
{
	return m && m->mw_type ? (struct sim_mw *)m : NULL;   /* k is sim_mw's first member */
}

/* The mkey context's access bits as verbs access flags. */
static int umr_access(uint8_t a)
{
	return ((a & MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE) ? IBV_ACCESS_LOCAL_WRITE : 0) |
	       ((a & MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0) |
	       ((a & MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ) ? IBV_ACCESS_REMOTE_READ : 0) |
	       ((a & MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
}

static int bind_err(char *why, size_t n, const char *fmt, uint32_t a, uint32_t b)
{
	snprintf(why, n, fmt, a, b);
	return MLX5_CQE_SYNDROME_MW_BIND_ERR;
}

/* The bind of a window to [start, start + len) of the region the KLM names. */
static int umr_bind(struct sim_qp *qp, struct sim_mr *m, const struct wqe *w, bool type2,
		    char *why, size_t n)
{
	struct sim_mr *r = sim_mr_lookup(qp->sc, w->umr.klm_mkey);
	int access = umr_access(w->umr.access);

	if (type2 && m->bound && (w->umr.flags & MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE))
		return bind_err(why, n, "bind of window 0x%x: a type 2 window must be free (bound to "
				"qp 0x%x)", m->mr.rkey, m->qpn);
	if (!r || r->mw_type)
		return bind_err(why, n, "bind of window 0x%x: key 0x%x is no memory region",
				m->mr.rkey, w->umr.klm_mkey);
	if (pd_prot(r->mr.pd) != pd_prot(qp_mem_pd(qp)))
		return bind_err(why, n, "bind of window 0x%x: region 0x%x is of another PD",
				m->mr.rkey, r->mr.lkey);
	if (!(r->access & IBV_ACCESS_MW_BIND))
		return bind_err(why, n, "bind of window 0x%x: region 0x%x was registered without "
				"IBV_ACCESS_MW_BIND", m->mr.rkey, r->mr.lkey);
	if (w->umr.start != w->umr.klm_addr || w->umr.len != w->umr.klm_bytes ||
	    w->umr.klm_addr < r->iova || w->umr.klm_bytes > r->length ||
	    w->umr.klm_addr - r->iova > r->length - w->umr.klm_bytes)
		return bind_err(why, n, "bind of window 0x%x: the range lies outside region 0x%x",
				m->mr.rkey, r->mr.lkey);
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(r->access & IBV_ACCESS_LOCAL_WRITE))
		return bind_err(why, n, "bind of window 0x%x: remote write or atomic rights over "
				"region 0x%x, which has no local write", m->mr.rkey, r->mr.lkey);
	m->iova = w->umr.start;
	m->length = w->umr.len;
	m->access = access & REMOTE;
	m->parent = r->mr.lkey;
	m->qpn = type2 ? qp->qpn : 0;
	m->bound = true;
	return 0;
}

/* A UMR WQE (decoded into w->umr): the window its ctrl names bound, or freed; the key's low
 * byte becomes the one the mkey context carries. The ctrl names the window by its index:
 * [inferred] the variant byte is not compared, since libmlx5 keeps a type 2 window's rkey as
 * allocated after a bind by ibv_post_send, and a type 1 window's advanced after a failed one.
 * 0 or a syndrome. */
int mw_umr(struct sim_qp *qp, const struct wqe *w, char *why, size_t n)
{
	uint32_t key = be32toh(w->imm);
	struct sim_mw *mw = mw_of(sim_mr_index(qp->sc, key));
	bool type2 = (w->umr.mask & MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN) != 0;
	struct sim_mr *m;
	int s;

	if (!mw)
		return bind_err(why, n, "UMR on key 0x%x: no memory window has that index", key, 0);
	m = &mw->k;
	if (pd_prot(m->mr.pd) != pd_prot(qp_mem_pd(qp)))
		return bind_err(why, n, "UMR on window 0x%x: the window is of another PD", key, 0);
	if (type2 != (m->mw_type == IBV_MW_TYPE_2))
		return bind_err(why, n, "UMR on window 0x%x: a type %u window bound as the other type",
				key, m->mw_type);
	if (w->umr.free & MLX5_WQE_MKEY_CONTEXT_FREE) {
		if ((w->umr.flags & MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN) && (!m->bound || m->qpn != qp->qpn))
			return bind_err(why, n, "invalidation of window 0x%x: not bound to this QP "
					"(qp 0x%x)", key, m->bound ? m->qpn : 0);
		m->bound = false;
	} else if ((s = umr_bind(qp, m, w, type2, why, n))) {
		return s;
	}
	m->mr.lkey = m->mr.rkey = (key & ~0xffu) | (w->umr.qpn_mkey & 0xff);
	return 0;
}

/* The memory a remote request reaches through window m (mr_ptr's part for windows). */
void *mw_ptr(struct sim_qp *qp, const struct sim_mr *m, uint64_t addr, uint64_t len, int need,
	     const char **why)
{
	const struct sim_mr *r;

	if (!(need & REMOTE))
		*why = "a memory window's key used as a local key";
	else if (!m->bound)
		*why = "memory window not bound";
	else if (pd_prot(m->mr.pd) != pd_prot(qp_mem_pd(qp)))
		*why = "memory window of another protection domain";
	else if (m->qpn && m->qpn != qp->qpn)
		*why = "type 2 memory window bound to another QP";
	else if (addr < m->iova || len > m->length || addr - m->iova > m->length - len)
		*why = "outside the memory window";
	else if ((m->access & need) != need)
		*why = "the memory window's rights do not allow it";
	else if (!(r = sim_mr_lookup(qp->sc, m->parent)) || addr < r->iova ||
		 addr - r->iova > r->length - len)
		*why = "the memory window's region is gone";
	else if ((r->access & IBV_ACCESS_ON_DEMAND) &&
		 sim_odp_fault(r->addr + (uintptr_t)(addr - r->iova), len,
			       need & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC), why))
		;       /* an ODP region's page fault not resolved (engine.c) */
	else
		return (void *)(r->addr + (uintptr_t)(addr - r->iova));
	return NULL;
}

/* SEND with Invalidate at the responder: the type 2 window key names, bound to this QP, freed.
 * False (with why) when there is none. */
bool mw_invalidate(struct sim_qp *qp, uint32_t key, const char **why)
{
	struct sim_mw *mw = mw_of(sim_mr_lookup(qp->sc, key));

	if (!mw)
		*why = "SEND with Invalidate: no memory window has that key";
	else if (pd_prot(mw->k.mr.pd) != pd_prot(qp_mem_pd(qp)))
		*why = "SEND with Invalidate: a window of another PD";
	else if (mw->k.mw_type != IBV_MW_TYPE_2 || !mw->k.bound || mw->k.qpn != qp->qpn)
		*why = "SEND with Invalidate: not a type 2 window bound to this QP";
	else {
		mw->k.bound = false;
		return true;
	}
	return false;
}
