/*
 * t_odp: On-Demand Paging, as mlx5_ib gives it on a ConnectX-6 with the firmware's ODP caps.
 * The caps (ibv_query_device_ex: ODP and implicit ODP, RC every operation, UD send and SRQ
 * receive, UC none; mlx5dv_query_device: DC as RC); ODP regions over pages never touched, used
 * by RDMA WRITE, READ, SEND and fetch-and-add on a loopback RC pair, byte for byte; an implicit
 * region (NULL, SIZE_MAX) reaching any buffer by its address, refused with a nonzero iova and
 * without ON_DEMAND; ibv_advise_mr's prefetch (pages resident after it, none after NO_FAULT) and
 * its refusals (flags, empty list, advice, a key that is no ODP region of the PD, a write
 * prefetch of a region that cannot be written, a range outside the region or not mapped); and a
 * page that cannot be faulted in: a remote write into a hole or a read-only page is
 * REMOTE_ACCESS_ERR, a local gather from a hole or a READ into a read-only page
 * LOCAL_PROT_ERR, in each case with nothing written; once the hole is mapped again the same
 * write lands.
 */
#include "simtest.h"

#define PG 4096
#define ODP_RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND)

static struct st_dev D;

struct pair {
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
};

/* Two RC QPs of D's PD connected to each other (a fresh pair after an error). */
static void pair_open(struct pair *p)
{
	p->ca = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	p->cb = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	REQUIRE(p->ca && p->cb);
	p->qa = st_ibqp_rc(D.pd, p->ca);
	p->qb = st_ibqp_rc(D.pd, p->cb);
	REQUIRE(p->qa && p->qb);
	st_ibqp_connect(&D, p->qa, p->qb);
	st_ibqp_connect(&D, p->qb, p->qa);
}

static void pair_close(struct pair *p)
{
	CHECK(ibv_destroy_qp(p->qa) == 0 && ibv_destroy_qp(p->qb) == 0);
	CHECK(ibv_destroy_cq(p->ca) == 0 && ibv_destroy_cq(p->cb) == 0);
}

/* One signaled work request on p->qa; its completion's status (-1: none). */
static int post_one(struct pair *p, enum ibv_wr_opcode op, uint32_t lkey, void *laddr, uint32_t len,
		    uint32_t rkey, void *raddr)
{
	return st_post_one(p->qa, p->ca, op, lkey, laddr, len, rkey, raddr, 5); /* an add adds 5 */
}

/* Fresh anonymous pages, never touched. */
static uint8_t *fresh(size_t pages)
{
	void *b = mmap(NULL, pages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	REQUIRE(b != MAP_FAILED);
	return b;
}

/* Two fresh buffers of pages pages, each registered for on-demand paging. */
static void odp_regions(size_t pages, uint8_t **l, uint8_t **r, struct ibv_mr **lm,
			struct ibv_mr **rm)
{
	*l = fresh(pages);
	*r = fresh(pages);
	*lm = ibv_reg_mr(D.pd, *l, pages * PG, ODP_RW);
	*rm = ibv_reg_mr(D.pd, *r, pages * PG, ODP_RW);
	REQUIRE(*lm && *rm);
}

static int resident(const void *page)
{
	unsigned char v = 0;

	return mincore((void *)page, PG, &v) == 0 && (v & 1);
}

static int all_bytes(const uint8_t *b, size_t len, uint8_t c)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != c)
			return 0;
	return 1;
}

static void caps(void)
{
	struct ibv_device_attr_ex ex;
	struct mlx5dv_context dv;
	const uint32_t all = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			     IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;

	st_ctx = "caps";
	memset(&ex, 0, sizeof(ex));
	REQUIRE(ibv_query_device_ex(D.ctx, NULL, &ex) == 0);
	CHECK_EQ(ex.odp_caps.general_caps, IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	CHECK_EQ(ex.odp_caps.per_transport_caps.rc_odp_caps, all);
	CHECK_EQ(ex.odp_caps.per_transport_caps.ud_odp_caps,
		 IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_SRQ_RECV);
	CHECK_EQ(ex.odp_caps.per_transport_caps.uc_odp_caps, 0);
	CHECK_EQ(ex.xrc_odp_caps, all);        /* XRC as RC */
	memset(&dv, 0, sizeof(dv));
	dv.comp_mask = MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
	REQUIRE(mlx5dv_query_device(D.ctx, &dv) == 0);
	CHECK(dv.comp_mask & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS);
	CHECK_EQ(dv.dc_odp_caps, all);
}

/* ODP regions over untouched pages: every operation faults its pages in and moves the bytes. */
static void traffic(void)
{
	uint8_t *l, *r;
	struct ibv_mr *lm, *rm;
	struct pair p;

	st_ctx = "traffic";
	odp_regions(4, &l, &r, &lm, &rm);
	CHECK(!resident(r) && !resident(r + PG));   /* registering took no page */
	pair_open(&p);
	memset(l, 0x11, PG);
	/* WRITE: three pages of the target taken by the write itself */
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_WRITE, lm->lkey, l, 100, rm->rkey, r + PG - 50),
		 IBV_WC_SUCCESS);
	CHECK(all_bytes(r + PG - 50, 100, 0x11) && r[PG - 51] == 0 && r[PG + 50] == 0);
	/* READ into an untouched local page */
	memset(r + 2 * PG, 0x22, 300);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_READ, lm->lkey, l + 2 * PG + 8, 300, rm->rkey, r + 2 * PG),
		 IBV_WC_SUCCESS);
	CHECK(all_bytes(l + 2 * PG + 8, 300, 0x22) && l[2 * PG + 7] == 0 && l[2 * PG + 308] == 0);
	/* fetch-and-add on an untouched remote page, the result to an untouched local one */
	CHECK_EQ(post_one(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, lm->lkey, l + 3 * PG, 8, rm->rkey,
			  r + 3 * PG), IBV_WC_SUCCESS);
	CHECK(*(uint64_t *)(l + 3 * PG) == 0 && *(uint64_t *)(r + 3 * PG) == 5);
	/* SEND into an ODP receive buffer */
	{
		struct ibv_sge rs = { (uintptr_t)(r + PG + 1024), 64, rm->lkey };
		struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_wc wc;

		memset(l + 512, 0x33, 64);
		CHECK(ibv_post_recv(p.qb, &rw, &rbad) == 0);
		CHECK_EQ(post_one(&p, IBV_WR_SEND, lm->lkey, l + 512, 64, 0, NULL), IBV_WC_SUCCESS);
		if (st_poll_wc(p.cb, &wc))
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == 64);
		CHECK(all_bytes(r + PG + 1024, 64, 0x33));
	}
	pair_close(&p);
	CHECK(ibv_dereg_mr(lm) == 0 && ibv_dereg_mr(rm) == 0);
	munmap(l, 4 * PG);
	munmap(r, 4 * PG);
}

/* An implicit ODP region: all of the process's memory under one key. */
static void implicit(void)
{
	uint8_t *a = malloc(8192), *b = malloc(8192);
	struct ibv_mr *im;
	struct pair p;

	st_ctx = "implicit";
	REQUIRE(a && b);
	errno = 0;
	CHECK(ibv_reg_mr_iova2(D.pd, NULL, SIZE_MAX, 4096, ODP_RW) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(D.pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL);
	im = ibv_reg_mr(D.pd, NULL, SIZE_MAX, ODP_RW);
	REQUIRE(im != NULL);
	CHECK(im->addr == NULL && im->length == SIZE_MAX);
	memset(a, 0x44, 8192);
	memset(b, 0, 8192);
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_WRITE, im->lkey, a, 5000, im->rkey, b + 100),
		 IBV_WC_SUCCESS);
	CHECK(all_bytes(b + 100, 5000, 0x44) && b[99] == 0 && b[5100] == 0);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_READ, im->lkey, b + 6000, 16, im->rkey, a), IBV_WC_SUCCESS);
	CHECK(all_bytes(b + 6000, 16, 0x44));
	/* a prefetch through it */
	{
		uint8_t *f = fresh(1);
		struct ibv_sge sg = { (uintptr_t)f, PG, im->lkey };

		CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				       IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1), 0);
		CHECK(resident(f));
		munmap(f, PG);
	}
	pair_close(&p);
	CHECK(ibv_dereg_mr(im) == 0);
	free(a);
	free(b);
}

static void advise(void)
{
	uint8_t *o = fresh(4), *n = malloc(PG);
	struct ibv_mr *om, *ro, *nm, *other;
	struct ibv_pd *pd2 = ibv_alloc_pd(D.ctx);
	struct ibv_sge sg;

	st_ctx = "advise";
	REQUIRE(n && pd2);
	om = ibv_reg_mr(D.pd, o, 4 * PG, ODP_RW);
	ro = ibv_reg_mr(D.pd, o, 4 * PG, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
	nm = ibv_reg_mr(D.pd, n, PG, IBV_ACCESS_LOCAL_WRITE);
	other = ibv_reg_mr(pd2, o, 4 * PG, ODP_RW);
	REQUIRE(om && ro && nm && other);
	/* NO_FAULT maps only what is present: the page stays untouched */
	sg = (struct ibv_sge){ (uintptr_t)o, PG, om->lkey };
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH,
			       &sg, 1), 0);
	CHECK(!resident(o));
	/* PREFETCH_WRITE, synchronous: the pages are there when it returns */
	sg = (struct ibv_sge){ (uintptr_t)o + 10, 2 * PG, om->lkey };
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
			       &sg, 1), 0);
	CHECK(resident(o) && resident(o + PG) && resident(o + 2 * PG) && !resident(o + 3 * PG));
	/* PREFETCH, asynchronous */
	sg = (struct ibv_sge){ (uintptr_t)o + 3 * PG, PG, om->lkey };
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 1), 0);
	/* refusals */
	sg = (struct ibv_sge){ (uintptr_t)o, PG, om->lkey };
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &sg, 1), EINVAL);
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 0), EINVAL);
	CHECK_EQ(ibv_advise_mr(D.pd, (enum ibv_advise_mr_advice)3, 0, &sg, 1), EOPNOTSUPP);
	sg.lkey = nm->lkey;      /* not an ODP region */
	sg.addr = (uintptr_t)n;
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
		 ENOENT);
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 1), EINVAL);
	sg = (struct ibv_sge){ (uintptr_t)o, PG, other->lkey };   /* of another PD */
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
		 ENOENT);
	CHECK_EQ(ibv_advise_mr(pd2, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1), 0);
	sg.lkey = ro->lkey;      /* a region nothing may write: a read prefetch only */
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
			       &sg, 1), ENOENT);
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
		 0);
	sg = (struct ibv_sge){ (uintptr_t)o + 3 * PG, 2 * PG, om->lkey };   /* past the region */
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
		 EFAULT);
	/* a hole in the region: a synchronous prefetch fails, an asynchronous one says nothing */
	CHECK(munmap(o + PG, PG) == 0);
	sg = (struct ibv_sge){ (uintptr_t)o, 3 * PG, om->lkey };
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
		 EFAULT);
	CHECK_EQ(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 1), 0);
	CHECK(ibv_dereg_mr(om) == 0 && ibv_dereg_mr(ro) == 0 && ibv_dereg_mr(nm) == 0);
	CHECK(ibv_dereg_mr(other) == 0 && ibv_dealloc_pd(pd2) == 0);
	munmap(o, 4 * PG);
	free(n);
}

/* Pages that cannot be faulted in: the access fails as a refused key does, writing nothing. */
static void faults(void)
{
	uint8_t *l, *r;
	struct ibv_mr *lm, *rm;
	struct pair p;

	st_ctx = "faults";
	odp_regions(3, &l, &r, &lm, &rm);
	memset(l, 0x55, 3 * PG);
	memset(r, 0, 3 * PG);
	CHECK(munmap(r + PG, PG) == 0);
	/* a remote write across the hole: REMOTE_ACCESS_ERR, neither mapped page written */
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_WRITE, lm->lkey, l, 2 * PG, rm->rkey, r + PG / 2),
		 IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(r, PG, 0) && all_bytes(r + 2 * PG, PG, 0));
	pair_close(&p);
	/* a remote READ of the hole likewise */
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_READ, lm->lkey, l, 16, rm->rkey, r + PG + 8),
		 IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(l, 16, 0x55));
	pair_close(&p);
	/* a read-only page: readable from afar, not writable */
	CHECK(mprotect(r + 2 * PG, PG, PROT_READ) == 0);
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_READ, lm->lkey, l, 64, rm->rkey, r + 2 * PG),
		 IBV_WC_SUCCESS);
	CHECK(all_bytes(l, 64, 0));
	memset(l, 0x55, 64);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_WRITE, lm->lkey, l, 64, rm->rkey, r + 2 * PG),
		 IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(r + 2 * PG, PG, 0));
	pair_close(&p);
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, lm->lkey, l, 8, rm->rkey, r + 2 * PG),
		 IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(r + 2 * PG, 8, 0) && all_bytes(l, 8, 0x55));
	pair_close(&p);
	/* the requester's side: a gather from a hole, a READ into a read-only page */
	CHECK(munmap(l + PG, PG) == 0);
	CHECK(mprotect(l + 2 * PG, PG, PROT_READ) == 0);
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_WRITE, lm->lkey, l + PG - 8, 16, rm->rkey, r),
		 IBV_WC_LOC_PROT_ERR);
	CHECK(all_bytes(r, PG, 0));
	pair_close(&p);
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_READ, lm->lkey, l + 2 * PG, 32, rm->rkey, r),
		 IBV_WC_LOC_PROT_ERR);
	CHECK(all_bytes(l + 2 * PG, PG, 0x55));
	pair_close(&p);
	/* the hole mapped again: the region takes the new page on its next use */
	CHECK(mmap(r + PG, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		   -1, 0) == r + PG);
	pair_open(&p);
	CHECK_EQ(post_one(&p, IBV_WR_RDMA_WRITE, lm->lkey, l, PG, rm->rkey, r + PG / 2),
		 IBV_WC_SUCCESS);
	CHECK(all_bytes(r + PG / 2, PG, 0x55) && all_bytes(r + PG + PG / 2, PG / 2, 0));
	pair_close(&p);
	CHECK(ibv_dereg_mr(lm) == 0 && ibv_dereg_mr(rm) == 0);
	munmap(l, 3 * PG);
	munmap(r, 3 * PG);
}

int main(void)
{
	st_init("t_odp", 60);
	st_dev_open(&D, 0);
	caps();
	traffic();
	implicit();
	advise();
	faults();
	st_dev_close(&D);
	st_exit();
	return 0;
}
