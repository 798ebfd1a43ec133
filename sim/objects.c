/* rvxsim: the libibverbs objects other than CQs and QPs: protection domains (and parent
 * domains), memory regions, SRQs, address handles. */
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

/* ------------------------------------------------------------------ PD, MR */

SIM_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	static uint32_t pdn = 1;
	struct sim_pd *pd;

	sim_count_verb();
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = ctx;
	pd->pd.handle = __atomic_fetch_add(&pdn, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&to_sctx(ctx)->lock);
	pd->next = to_sctx(ctx)->pds;
	to_sctx(ctx)->pds = pd;
	pthread_mutex_unlock(&to_sctx(ctx)->lock);
	return &pd->pd;
}

/* ------------------------------------------------------------------ importing PDs and MRs */

/* ibv_import_pd: a handle, in ctx, to the PD of the adapter with that handle (EINVAL when none
 * has), standing for it as a parent domain does: keys are checked against the original. */
SIM_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct sim_pd *o, *pd;

	pthread_mutex_lock(&sc->lock);
	for (o = sc->pds; o && o->pd.handle != pd_handle; o = o->next)
		;
	if (o)
		pd_get(&o->pd);
	pthread_mutex_unlock(&sc->lock);
	if (!o) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		pd_put(&o->pd);
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = ctx;
	pd->pd.handle = pd_handle;
	pd->prot = &o->pd;
	pd->imported = true;
	return &pd->pd;
}

/* ibv_unimport_pd: the handle goes, the PD stays. */
SIM_EXPORT void ibv_unimport_pd(struct ibv_pd *ibpd)
{
	struct sim_pd *pd = (struct sim_pd *)ibpd;

	if (!pd->imported)
		return;
	pd_put(pd->prot);
	free(pd);
}

/* ibv_import_mr: a handle to the MR with that handle (its key table index), in pd, which must
 * stand for the MR's own PD (EINVAL otherwise). The kernel does not know the MR's address: the
 * imported handle's addr is NULL, as rdma-core's tests note. */
SIM_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	struct sim_mr *o, *m;

	pthread_mutex_lock(&sc->lock);
	o = mr_handle < sc->mr_tab_size ? sc->mr_tab[mr_handle] : NULL;
	if (o && (o->mw_type || pd_prot(o->mr.pd) != pd_prot(pd)))
		o = NULL;
	m = o ? malloc(sizeof(*m)) : NULL;
	if (m)
		*m = *o;
	pthread_mutex_unlock(&sc->lock);
	if (!m) {
		errno = o ? ENOMEM : EINVAL;
		return NULL;
	}
	m->mr.pd = pd;
	m->mr.context = pd->context;
	m->mr.addr = NULL;
	m->next = NULL;
	m->imported = true;
	return &m->mr;
}

/* ibv_unimport_mr: the handle goes, the MR stays. */
SIM_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	if (((struct sim_mr *)mr)->imported)
		free(mr);
}

SIM_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sim_pd *p = (struct sim_pd *)pd, **pp;
	struct sim_ctx *sc = to_sctx(pd->context);

	sim_count_verb();
	if (atomic_load(&p->users))
		return EBUSY;
	if (p->imported) {   /* through an imported handle the PD itself goes */
		int err;
		pd_put(p->prot);
		err = ibv_dealloc_pd(p->prot);
		if (err) {
			pd_get(p->prot);
			return err;
		}
		free(p);
		return 0;
	}
	if (p->prot)
		pd_put(p->prot);
	pthread_mutex_lock(&sc->lock);
	for (pp = &sc->pds; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	free(pd);
	return 0;
}

/* ibv_alloc_parent_domain (libmlx5's mlx5_alloc_parent_domain): a PD standing for attr->pd,
 * which it holds (that PD's dealloc is EBUSY meanwhile). Thread domains do not exist on the model
 * (ibv_alloc_td finds no entry), so td must be NULL. The custom allocators are accepted and not
 * called: the model places its queues in memory of its own, as a provider may when an allocator
 * answers IBV_ALLOCATOR_USE_DEFAULT. */
struct ibv_pd *alloc_parent_domain_op(struct ibv_context *ctx,
				      struct ibv_parent_domain_init_attr *a)
{
	const uint32_t known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	struct sim_pd *pd;

	/* rule: a plain PD of this context (libmlx5 mlx5_alloc_parent_domain); thread domains are a
	 * model gap */
	if (!a->pd || a->pd->context != ctx || ((struct sim_pd *)a->pd)->prot || a->td ||
	    (a->comp_mask & ~known)) {
		errno = EINVAL;
		return NULL;
	}
	sim_count_verb();
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = ctx;
	pd->pd.handle = a->pd->handle;
	pd->prot = a->pd;
	pd_get(a->pd);
	return &pd->pd;
}

static void reg_cost(size_t length, void *addr)
{
	uintptr_t first = (uintptr_t)addr & ~4095ul;
	uintptr_t last = ((uintptr_t)addr + length + 4095) & ~4095ul;
	uint64_t ns = (uint64_t)((last - first) / 4096) * sim_env.reg_cost_ns_per_page;
	uint64_t end = sim_now_ns() + ns;

	/* busy: registration pins pages on the CPU that calls it */
	while (sim_now_ns() < end)
		;
}

static int mr_access_ok(unsigned access);

SIM_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					   uint64_t iova, unsigned int access)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	struct sim_mr *m;
	uint32_t idx;
	bool implicit;

	sim_count_verb();
	if (mr_access_ok(access))
		return NULL;
	/* rule: an implicit ODP region (address 0, length SIZE_MAX: all of the process's memory,
	 * libibverbs' ibv_reg_mr(pd, NULL, SIZE_MAX, ...)) must have iova 0 (EINVAL: the kernel's
	 * mlx5_ib create_user_odp_mr); the device reports IBV_ODP_SUPPORT_IMPLICIT */
	implicit = (access & IBV_ACCESS_ON_DEMAND) && !addr && length == SIZE_MAX;
	if (implicit && iova) {
		errno = EINVAL;
		return NULL;
	}
	/* rule: a NULL address with a length pins nothing (kernel ib_umem_get); [inferred]. An ODP
	 * region pins nothing: its pages are taken when used (engine.c, sim_odp_fault). */
	if (!addr && length && !(access & IBV_ACCESS_ON_DEMAND)) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	if (sim_env.reg_cost_ns_per_page > 0 && !(access & IBV_ACCESS_ON_DEMAND))
		reg_cost(length, addr);
	pthread_mutex_lock(&sc->lock);
	idx = sim_mr_tab_slot(sc);
	if (!idx) {
		pthread_mutex_unlock(&sc->lock);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	/* low byte varies per registration so a stale key does not match a new MR */
	m->mr.lkey = m->mr.rkey = idx << 8 | (sc->next_mkey++ & 0xff);
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = idx;
	m->iova = iova;
	m->addr = (uintptr_t)addr;
	m->length = length;
	m->access = access;
	m->implicit = implicit;
	sc->mr_tab[idx] = m;
	m->next = sc->mrs;
	sc->mrs = m;
	pthread_mutex_unlock(&sc->lock);
	pd_get(pd);
	sim_count_obj(SIM_OBJ_MR_BYTES, (int64_t)sim_mr_bytes(m));
	sim_count_obj(SIM_OBJ_MODEL_BYTES, sizeof(*m));
	return &m->mr;
}

SIM_EXPORT struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

SIM_EXPORT struct ibv_mr *(ibv_reg_mr_iova)(struct ibv_pd *pd, void *addr, size_t length,
					    uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

SIM_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct sim_ctx *sc = to_sctx(mr->context);
	struct sim_mr *m = (struct sim_mr *)mr, **pp;

	if (m->imported) {   /* through an imported handle the MR itself goes */
		struct sim_mr *o;
		pthread_mutex_lock(&sc->lock);
		o = mr->handle < sc->mr_tab_size ? sc->mr_tab[mr->handle] : NULL;
		pthread_mutex_unlock(&sc->lock);
		free(m);
		return o && !o->mw_type ? ibv_dereg_mr(&o->mr) : 0;
	}
	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	sim_mr_tab_clear(sc, m);
	for (pp = &sc->mrs; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	pd_put(m->mr.pd);
	if (m->dm_refs)
		atomic_fetch_sub(m->dm_refs, 1);
	sim_count_obj(SIM_OBJ_MR_BYTES, -(int64_t)sim_mr_bytes(m));
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)sizeof(*m));
	free(m);
	return 0;
}

/* ------------------------------------------------------------------ memory windows */

/* ibv_alloc_mw: an entry of the key table the way a region has one (the kernel's uverbs
 * alloc_mw takes types 1 and 2, EINVAL otherwise); unbound until a bind (mw.c). */
struct ibv_mw *alloc_mw_op(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	struct sim_mw *w;
	uint32_t idx;

	sim_count_verb();
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&sc->lock);
	idx = sim_mr_tab_slot(sc);
	if (!idx) {
		pthread_mutex_unlock(&sc->lock);
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	w->k.mr.lkey = w->k.mr.rkey = idx << 8 | (sc->next_mkey++ & 0xff);
	w->k.mr.context = pd->context;
	w->k.mr.pd = pd;
	w->k.mr.handle = idx;
	w->k.mw_type = (uint8_t)type;
	sc->mr_tab[idx] = &w->k;
	pthread_mutex_unlock(&sc->lock);
	pd_get(pd);
	w->mw.context = pd->context;
	w->mw.pd = pd;
	w->mw.rkey = w->k.mr.rkey;
	w->mw.handle = idx;
	w->mw.type = type;
	sim_count_obj(SIM_OBJ_MODEL_BYTES, sizeof(*w));
	return &w->mw;
}

/* ibv_dealloc_mw: the key is gone at once, bound or not. */
int dealloc_mw_op(struct ibv_mw *mw)
{
	struct sim_mw *w = (struct sim_mw *)((char *)mw - offsetof(struct sim_mw, mw));
	struct sim_ctx *sc = to_sctx(mw->context);

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	sim_mr_tab_clear(sc, &w->k);
	pthread_mutex_unlock(&sc->lock);
	pd_put(mw->pd);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)sizeof(*w));
	free(w);
	return 0;
}

/* ibv_bind_mw (type 1; libibverbs checked the type and the PD) as libmlx5's mlx5_bind_mw: a
 * BIND_MW work request with the key's next variant, posted; the window's rkey is the new one
 * from then on (the bind itself happens when the adapter executes it). */
int bind_mw_op(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mb)
{
	struct ibv_send_wr wr, *bad = NULL;
	int err;

	if (mb->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return errno = EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_BIND_MW;
	wr.wr_id = mb->wr_id;
	wr.send_flags = mb->send_flags;
	wr.bind_mw.bind_info = mb->bind_info;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	err = post_send_op(qp, &wr, &bad);
	if (err)
		return err;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

SIM_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					    uint64_t iova, int fd, int access)
{
	(void)pd; (void)offset; (void)length; (void)iova; (void)fd; (void)access;
	sim_unsupported("ibv_reg_dmabuf_mr");
	return NULL;
}

/* The access flags reg_mr and rereg_mr take (0, or EINVAL / EOPNOTSUPP with errno set). */
static int mr_access_ok(unsigned access)
{
	const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			       IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE |
			       IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND;

	/* remote write or atomic without local write: EINVAL (the kernel's ib_check_mr_access) */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return errno = EINVAL;
	if (access & ~known) {
		/* model gaps: zero-based user regions; HUGETLB, which mlx5_ib honours only on an ODP
		 * region (huge-page translation, its pages required to be huge) */
		if (access & (IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB)) {
			sim_unsupported(access & IBV_ACCESS_HUGETLB ? "ibv_reg_mr(IBV_ACCESS_HUGETLB)" :
					"ibv_reg_mr(access flag)");
			return errno = EOPNOTSUPP;
		}
		return errno = EINVAL;
	}
	return 0;
}

/* ibv_rereg_mr as libibverbs checks its input (IBV_REREG_MR_ERR_INPUT with EINVAL) and mlx5
 * applies it: new access flags, PD or range, under the engine's lock so that no request sees half
 * of it. The keys stay (the kernel may keep or change them; keeping is one of its answers). */
SIM_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	struct sim_mr *m = (struct sim_mr *)mr;
	struct sim_ctx *sc = to_sctx(mr->context);
	struct ibv_pd *old = mr->pd;

	sim_count_verb();
	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context->device != mr->context->device))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && mr_access_ok((unsigned)access))
		return IBV_REREG_MR_ERR_CMD;
	/* rule: mlx5_ib registers an ODP region again to change its access (mlx5_ib_rereg_user_mr);
	 * all of memory without ON_DEMAND is a range the kernel's ib_umem_get refuses (EINVAL)
	 * [inferred] */
	if (m->implicit && (flags & IBV_REREG_MR_CHANGE_ACCESS) &&
	    !(flags & IBV_REREG_MR_CHANGE_TRANSLATION) && !(access & IBV_ACCESS_ON_DEMAND)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		pd_get(pd);
	pthread_mutex_lock(&sc->lock);
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		m->access = access;
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		sim_count_obj(SIM_OBJ_MR_BYTES, -(int64_t)sim_mr_bytes(m));
		mr->addr = addr;
		mr->length = length;
		m->addr = (uintptr_t)addr;
		m->iova = (uintptr_t)addr;
		m->length = length;
		m->implicit = false;
		sim_count_obj(SIM_OBJ_MR_BYTES, (int64_t)sim_mr_bytes(m));
	}
	pthread_mutex_unlock(&sc->lock);
	if (flags & IBV_REREG_MR_CHANGE_PD)
		pd_put(old);
	return 0;
}

/* ibv_advise_mr (libmlx5's mlx5_advise_mr is the kernel's advise_mr; mlx5_ib's
 * mlx5_ib_advise_mr): prefetch the pages of ODP regions. The rules: flags other than
 * IBV_ADVISE_MR_FLAG_FLUSH and an empty SGE list are EINVAL (uverbs' ADVISE_MR method: its flags
 * and its SGE list of at least one entry); an advice other than PREFETCH, PREFETCH_WRITE and
 * PREFETCH_NO_FAULT is EOPNOTSUPP; each SGE's lkey must be an ODP region of this PD, writable for
 * PREFETCH_WRITE (get_prefetchable_mr), else ENOENT when the prefetch is synchronous (FLUSH) and
 * EINVAL when it is not (init_prefetch_work). A synchronous prefetch fails with EFAULT when a
 * range is outside its region or its pages cannot be faulted in (pagefault_mr); an asynchronous
 * one reports nothing of that. NO_FAULT maps only what is present: nothing to do here. */
int advise_mr_op(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg_list, uint32_t num_sge)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	bool sync = flags & IBV_ADVISE_MR_FLAG_FLUSH;
	const unsigned writable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;

	sim_count_verb();
	if ((flags & ~IBV_ADVISE_MR_FLAG_FLUSH) || !num_sge || !sg_list)
		return EINVAL;
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	/* every key first: an asynchronous prefetch is refused whole or queued whole */
	pthread_mutex_lock(&sc->lock);
	for (uint32_t i = 0; i < num_sge; i++) {
		struct sim_mr *m = sim_mr_lookup(sc, sg_list[i].lkey);

		if (!m || m->mw_type || !(m->access & IBV_ACCESS_ON_DEMAND) ||
		    pd_prot(m->mr.pd) != pd_prot(pd) ||
		    (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE && !(m->access & writable))) {
			pthread_mutex_unlock(&sc->lock);
			return sync ? ENOENT : EINVAL;
		}
	}
	for (uint32_t i = 0; i < num_sge; i++) {
		struct sim_mr *m = sim_mr_lookup(sc, sg_list[i].lkey);
		uint64_t a = sg_list[i].addr, len = sg_list[i].length;
		const char *why;

		if (a < m->iova || len > m->length || a - m->iova > m->length - len) {
			if (!sync)
				continue;
			pthread_mutex_unlock(&sc->lock);
			return EFAULT;
		}
		if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
			continue;
		if (sim_odp_fault(m->addr + (uintptr_t)(a - m->iova), len,
				  advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, &why) && sync) {
			pthread_mutex_unlock(&sc->lock);
			return EFAULT;
		}
	}
	pthread_mutex_unlock(&sc->lock);
	return 0;
}

/* ------------------------------------------------------------------ SRQ */

/* the heap an SRQ holds: WQEs, doorbell record, work request ids */
static size_t srq_bytes(const struct sim_srq *s)
{
	return sizeof(*s) + (size_t)s->wqe_cnt * (s->stride + sizeof(uint64_t)) + 64;
}

SIM_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *ia)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	struct sim_srq *s;

	sim_count_verb();
	if (huge_refused("MLX_SRQ_ALLOC_TYPE"))
		return NULL;
	/* max_wr 0 is a one-WQE SRQ for libmlx5 and the kernel (align_queue_size(max_wr + 1)) */
	/* rule: the device's max_srq_wr; SGEs: libmlx5 mlx5_create_srq takes up to max_rq_desc_sz / 16
	 * (32), the model 31, which with the next segment fill 512 bytes [inferred] */
	if (ia->attr.max_wr > SIM_MAX_SRQ_WR || ia->attr.max_sge > 31) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->stride = roundup_pow2(MAX(32u, 16 + 16 * ia->attr.max_sge));
	s->max_gs = (s->stride - 16) / 16;
	s->wqe_cnt = roundup_pow2(ia->attr.max_wr + 1);
	s->buf = zalloc_aligned(4096, (size_t)s->wqe_cnt * s->stride);
	s->dbrec = zalloc_aligned(64, 64);
	s->wrid = calloc(s->wqe_cnt, sizeof(uint64_t));
	if (!s->buf || !s->dbrec || !s->wrid) {
		free(s->buf);
		free(s->dbrec);
		free(s->wrid);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < s->wqe_cnt; i++) {
		struct mlx5_wqe_srq_next_seg *n = (void *)(s->buf + (size_t)i * s->stride);
		n->next_wqe_index = htobe16((i + 1) & (s->wqe_cnt - 1));
	}
	s->head = 0;
	s->tail = s->wqe_cnt - 1;
	s->limit = ia->attr.srq_limit;
	pthread_spin_init(&s->lock, PTHREAD_PROCESS_PRIVATE);
	s->srq.context = pd->context;
	s->srq.srq_context = ia->srq_context;
	s->srq.pd = pd;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	ia->attr.max_wr = s->wqe_cnt - 1;
	ia->attr.max_sge = s->max_gs;
	pthread_mutex_lock(&sc->lock);
	s->srqn = sc->next_srqn++;
	s->srq.handle = s->srqn;
	s->next = sc->srqs;
	sc->srqs = s;
	pthread_mutex_unlock(&sc->lock);
	pd_get(pd);
	sim_count_obj(SIM_OBJ_SRQ_WQES, s->wqe_cnt);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)srq_bytes(s));
	return &s->srq;
}

SIM_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
	struct sim_srq *s = to_ssrq(srq);

	sim_count_verb();
	/* a model gap: SRQ resize, refused as a feature the model lacks */
	if (mask & IBV_SRQ_MAX_WR) {
		sim_unsupported("ibv_modify_srq(IBV_SRQ_MAX_WR)");
		return EOPNOTSUPP;
	}
	if (mask & IBV_SRQ_LIMIT) {
		/* rule: a limit below the SRQ size (kernel mlx5_ib_modify_srq); [inferred] errno */
		if (a->srq_limit >= s->wqe_cnt)
			return EINVAL;
		pthread_mutex_lock(&to_sctx(srq->context)->lock);
		s->limit = a->srq_limit;
		pthread_mutex_unlock(&to_sctx(srq->context)->lock);
	}
	return 0;
}

SIM_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
	struct sim_srq *s = to_ssrq(srq);

	sim_count_verb();
	a->max_wr = s->wqe_cnt - 1;
	a->max_sge = s->max_gs;
	a->srq_limit = s->limit;
	return 0;
}

SIM_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct sim_srq *s = to_ssrq(srq), **pp;
	struct sim_ctx *sc = to_sctx(srq->context);

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	for (struct sim_qp *q = sc->qps; q; q = q->next)
		if (q->srq == s) {
			pthread_mutex_unlock(&sc->lock);
			return EBUSY;
		}
	for (pp = &sc->srqs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	pd_put(srq->pd);
	sim_xrcd_put(s->xh);
	sim_count_obj(SIM_OBJ_SRQ_WQES, -(int64_t)s->wqe_cnt);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)srq_bytes(s));
	free(s->buf);
	free(s->dbrec);
	free(s->wrid);
	pthread_spin_destroy(&s->lock);
	free(s);
	return 0;
}

/* ------------------------------------------------------------------ AH */

SIM_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sim_ah *ah;

	sim_count_verb();
	/* rule: a RoCE AH carries a GRH (kernel rdma_check_ah_attr) */
	if (sim_env.link_eth && !attr->is_global) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	pd_get(pd);
	/* the mlx5 address vector, as mlx5dv_init_obj(MLX5DV_OBJ_AH) would return it */
	struct mlx5_wqe_av *av = (void *)ah->av;
	av->dqp_dct = htobe32(MLX5_EXTENDED_UD_AV);
	av->stat_rate_sl = attr->sl & 0xf;
	av->fl_mlid = attr->src_path_bits & 0x7f;
	av->rlid = htobe16(attr->is_global ? gid_to_lid(&attr->grh.dgid) : attr->dlid);
	if (attr->is_global) {
		av->tclass = attr->grh.traffic_class;
		av->hop_limit = attr->grh.hop_limit;
		av->grh_gid_fl = htobe32(1u << 30 | (uint32_t)attr->grh.sgid_index << 20 |
						 (attr->grh.flow_label & 0xfffff));
		memcpy(av->rgid, attr->grh.dgid.raw, 16);
	}
	return &ah->ah;
}

SIM_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	sim_count_verb();
	pd_put(ah->pd);
	free(ah);
	return 0;
}

/* default-version bindings (see SIM_DEFAULT_1_1 in internal.h) */
SIM_DEFAULT_1_1(ibv_alloc_pd)
SIM_DEFAULT_1_1(ibv_create_ah)
SIM_DEFAULT_1_1(ibv_create_srq)
SIM_DEFAULT_1_1(ibv_dealloc_pd)
SIM_DEFAULT_1_1(ibv_dereg_mr)
SIM_DEFAULT_1_1(ibv_destroy_ah)
SIM_DEFAULT_1_1(ibv_destroy_srq)
SIM_DEFAULT_1_1(ibv_modify_srq)
SIM_DEFAULT_1_1(ibv_query_srq)
SIM_DEFAULT_1_1(ibv_reg_mr)
