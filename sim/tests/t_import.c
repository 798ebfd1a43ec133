/*
 * t_import: sharing a context's objects through its command descriptor, in one process
 * (ibv_import_device, ibv_import_pd, ibv_import_mr, ibv_import_dm and their unimports). A dup of
 * a context's cmd_fd imports the device (a descriptor that is no context's is refused with
 * EOPNOTSUPP); a DM imported by handle shares the original's memory both ways; a PD imported by
 * handle stands for the original: an MR imported into it has the original's keys and length
 * (address NULL, as the kernel does not know it), and an RC QP made on the imported PD takes an
 * RDMA WRITE through the original MR's rkey; unknown handles are EINVAL; after the unimports the
 * originals are freed as usual.
 */
#include "simtest.h"

#define LEN 4096

static struct st_dev D;

/* One RDMA WRITE of len bytes from (lkey, src) on QP a to rkey at dst; its completion's status. */
static int write_one(struct ibv_qp *a, struct ibv_cq *cq, uint32_t lkey, void *src, uint32_t rkey,
		     void *dst, uint32_t len)
{
	return st_post_one(a, cq, IBV_WR_RDMA_WRITE, lkey, src, len, rkey, dst, 0);
}

int main(void)
{
	struct ibv_context *ctx2;
	struct ibv_alloc_dm_attr da = { .length = LEN };
	struct ibv_dm *dm, *dm2;
	struct ibv_pd *pd2;
	struct ibv_mr *lm, *rm, *rm2;
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
	uint8_t *lbuf, *rbuf, out[64], in[64];
	int fd, nul;

	st_init("t_import", 30);
	st_dev_open(&D, 0);
	lbuf = aligned_alloc(4096, LEN);
	rbuf = aligned_alloc(4096, LEN);
	REQUIRE(lbuf && rbuf);
	memset(lbuf, 0x5a, LEN);
	memset(rbuf, 0, LEN);

	st_ctx = "device";
	nul = open("/dev/null", O_RDWR);
	errno = 0;
	CHECK(ibv_import_device(nul) == NULL && errno == EOPNOTSUPP);
	close(nul);
	fd = dup(D.ctx->cmd_fd);
	REQUIRE(fd >= 0);
	ctx2 = ibv_import_device(fd);
	REQUIRE(ctx2 != NULL);
	CHECK(ctx2 != D.ctx && ctx2->cmd_fd == fd && ctx2->device == D.ctx->device);

	st_ctx = "dm";
	dm = ibv_alloc_dm(D.ctx, &da);
	REQUIRE(dm != NULL);
	errno = 0;
	CHECK(ibv_import_dm(ctx2, dm->handle + 1000) == NULL && errno == EINVAL);
	dm2 = ibv_import_dm(ctx2, dm->handle);
	REQUIRE(dm2 != NULL);
	memset(out, 0xab, sizeof(out));
	CHECK(ibv_memcpy_to_dm(dm, 64, out, sizeof(out)) == 0);
	CHECK(ibv_memcpy_from_dm(in, dm2, 64, sizeof(in)) == 0 && !memcmp(in, out, sizeof(in)));
	memset(out, 0xcd, sizeof(out));
	CHECK(ibv_memcpy_to_dm(dm2, 0, out, sizeof(out)) == 0);
	CHECK(ibv_memcpy_from_dm(in, dm, 0, sizeof(in)) == 0 && !memcmp(in, out, sizeof(in)));
	ibv_unimport_dm(dm2);
	CHECK(ibv_free_dm(dm) == 0);

	st_ctx = "pd and mr";
	rm = ibv_reg_mr(D.pd, rbuf, LEN, ST_ACCESS_ALL);
	REQUIRE(rm != NULL);
	errno = 0;
	CHECK(ibv_import_pd(ctx2, D.pd->handle + 1000) == NULL && errno == EINVAL);
	pd2 = ibv_import_pd(ctx2, D.pd->handle);
	REQUIRE(pd2 != NULL);
	CHECK(pd2->context == ctx2 && pd2->handle == D.pd->handle);
	errno = 0;
	CHECK(ibv_import_mr(pd2, rm->handle + 1000) == NULL && errno == EINVAL);
	rm2 = ibv_import_mr(pd2, rm->handle);
	REQUIRE(rm2 != NULL);
	CHECK(rm2->lkey == rm->lkey && rm2->rkey == rm->rkey && rm2->length == rm->length);
	CHECK(rm2->addr == NULL && rm2->pd == pd2);
	/* a QP of the imported PD is reached through the original MR's rkey */
	lm = ibv_reg_mr(D.pd, lbuf, LEN, ST_ACCESS_ALL);
	ca = ibv_create_cq(D.ctx, 8, NULL, NULL, 0);
	cb = ibv_create_cq(ctx2, 8, NULL, NULL, 0);
	REQUIRE(lm && ca && cb);
	qa = st_ibqp_rc(D.pd, ca);
	qb = st_ibqp_rc(pd2, cb);
	REQUIRE(qa && qb);
	st_ibqp_connect(&D, qa, qb);
	st_ibqp_connect(&D, qb, qa);
	CHECK_EQ(write_one(qa, ca, lm->lkey, lbuf, rm2->rkey, rbuf + 128, 256), IBV_WC_SUCCESS);
	CHECK(rbuf[128] == 0x5a && rbuf[128 + 255] == 0x5a && rbuf[127] == 0 && rbuf[384] == 0);
	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0);
	CHECK(ibv_destroy_cq(ca) == 0 && ibv_destroy_cq(cb) == 0);
	ibv_unimport_mr(rm2);
	ibv_unimport_pd(pd2);
	CHECK(ibv_dereg_mr(rm) == 0 && ibv_dereg_mr(lm) == 0);
	CHECK(ibv_close_device(ctx2) == 0);
	st_dev_close(&D);
	st_exit();
	return 0;
}
