/* rvxsim: device memory (ibv_alloc_dm, ibv_memcpy_to_dm/from_dm, ibv_reg_dm_mr, ibv_free_dm), the
 * ConnectX-6's MEMIC: SIM_DM_SIZE bytes per adapter, reported as max_dm_size. The model keeps it in
 * host memory of the process; a DM MR is zero-based (IBV_ACCESS_ZERO_BASED: its first byte is
 * address 0) and is used as any MR. Rules as rdma-core 44's libmlx5 (mlx5_alloc_dm,
 * mlx5_memcpy_to_dm, mlx5_memcpy_from_dm, mlx5_reg_dm_mr) and mlx5_ib's reg_dm_mr apply them: a
 * copy either way must start and end 4-byte aligned (EINVAL; rdma-core's test_dm_bad_access
 * expects it of reads too), a copy past the end is EFAULT, a comp_mask or
 * a size beyond what is free fails the allocation, and a DM MR takes only local/remote write,
 * remote read, remote atomic and zero-based access. */
#include "internal.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int to_dm(struct ibv_dm *ibdm, uint64_t off, const void *src, size_t len)
{
	struct sim_dm *dm = (struct sim_dm *)ibdm;

	if (off > dm->length || len > dm->length - off)
		return EFAULT;
	if ((off & 3) || (len & 3))
		return EINVAL;
	memcpy(dm->buf + off, src, len);
	return 0;
}

static int from_dm(void *dst, struct ibv_dm *ibdm, uint64_t off, size_t len)
{
	struct sim_dm *dm = (struct sim_dm *)ibdm;

	if (off > dm->length || len > dm->length - off)
		return EFAULT;
	if ((off & 3) || (len & 3))
		return EINVAL;
	memcpy(dst, dm->buf + off, len);
	return 0;
}

/* The adapter's DM with that handle (under its lock), or NULL. */
static struct ibv_dm *sim_dm_by_handle(struct sim_ctx *sc, uint32_t handle)
{
	struct sim_dm *d;

	pthread_mutex_lock(&sc->lock);
	for (d = sc->dms; d && d->dm.handle != handle; d = d->next)
		;
	pthread_mutex_unlock(&sc->lock);
	return d ? &d->dm : NULL;
}

static void dm_unlist(struct sim_ctx *sc, struct sim_dm *dm)
{
	pthread_mutex_lock(&sc->lock);
	for (struct sim_dm **pp = &sc->dms; *pp; pp = &(*pp)->next)
		if (*pp == dm) {
			*pp = dm->next;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
}

struct ibv_dm *sim_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *a)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct sim_dm *dm;
	static _Atomic uint32_t handles = 1;

	if (a->comp_mask || a->log_align_req > 12 || !a->length) {
		errno = EINVAL;
		return NULL;
	}
	if (a->length > SIM_DM_SIZE - atomic_load(&sc->dm_used)) {
		errno = ENOMEM;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (dm)
		dm->buf = zalloc_aligned(4096, (a->length + 4095) & ~(size_t)4095);
	if (!dm || !dm->buf) {
		free(dm);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&sc->dm_used, a->length);
	sim_count_verb();
	dm->length = a->length;
	dm->dm.context = ctx;
	dm->dm.memcpy_to_dm = to_dm;
	dm->dm.memcpy_from_dm = from_dm;
	dm->dm.handle = atomic_fetch_add(&handles, 1);
	pthread_mutex_lock(&sc->lock);
	dm->next = sc->dms;
	sc->dms = dm;
	pthread_mutex_unlock(&sc->lock);
	return &dm->dm;
}

int sim_free_dm(struct ibv_dm *ibdm)
{
	struct sim_dm *dm = (struct sim_dm *)ibdm;

	if (atomic_load(&dm->mrs))
		return EBUSY;
	if (dm->imported) {   /* destroying through an imported handle destroys the DM */
		struct ibv_dm *orig = sim_dm_by_handle(to_sctx(ibdm->context), ibdm->handle);
		int err = orig ? sim_free_dm(orig) : 0;
		if (!err)
			free(dm);
		return err;
	}
	sim_count_verb();
	dm_unlist(to_sctx(ibdm->context), dm);
	atomic_fetch_sub(&to_sctx(ibdm->context)->dm_used, dm->length);
	free(dm->buf);
	free(dm);
	return 0;
}

/* ibv_import_dm: a handle, in this context, to the DM of the adapter that has that handle (EINVAL
 * when none has). Copies through either handle reach the same memory. */
struct ibv_dm *sim_import_dm(struct ibv_context *ctx, uint32_t handle)
{
	struct ibv_dm *orig = sim_dm_by_handle(to_sctx(ctx), handle);
	struct sim_dm *dm;

	if (!orig) {
		errno = EINVAL;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		errno = ENOMEM;
		return NULL;
	}
	*dm = *(struct sim_dm *)orig;
	atomic_init(&dm->mrs, 0);
	dm->next = NULL;
	dm->imported = true;
	dm->dm.context = ctx;
	return &dm->dm;
}

/* ibv_unimport_dm: the handle goes, the DM stays (libibverbs: the object is not destroyed). */
void sim_unimport_dm(struct ibv_dm *ibdm)
{
	struct sim_dm *dm = (struct sim_dm *)ibdm;

	if (dm->imported)   /* an original handle is left as it is */
		free(dm);
}

struct ibv_mr *sim_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm, uint64_t off, size_t len,
			     unsigned int access)
{
	struct sim_dm *dm = (struct sim_dm *)ibdm;
	const unsigned ok = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;
	struct ibv_mr *mr;

	if (dm->imported) {   /* the MR holds the DM itself, whichever handle named it */
		struct ibv_dm *orig = sim_dm_by_handle(to_sctx(ibdm->context), ibdm->handle);
		if (orig)
			dm = (struct sim_dm *)orig;
	}
	if ((access & ~ok) || !(access & IBV_ACCESS_ZERO_BASED) || off > dm->length ||
	    len > dm->length - off) {
		errno = EINVAL;
		return NULL;
	}
	mr = ibv_reg_mr_iova2(pd, dm->buf + off, len, 0, access & ~IBV_ACCESS_ZERO_BASED);
	if (!mr)
		return NULL;
	/* as libibverbs' reg_dm_mr reports it: the MR's address is its offset in the DM */
	mr->addr = (void *)(uintptr_t)off;
	((struct sim_mr *)mr)->dm_refs = &dm->mrs;
	atomic_fetch_add(&dm->mrs, 1);
	return mr;
}
