/* rvxsim: the libibverbs.so.1 surface. Objects are laid out as libmlx5 lays them out on a
 * ConnectX, so mlx5dv_init_obj can hand out the same geometry, and the ops table builds real mlx5
 * WQEs and decodes real CQEs, so ibv_post_send/ibv_poll_cq go through the same engine as direct
 * users. The context is an extended one (a verbs_context in front of the ibv_context) with only
 * query_device_ex, create_cq_ex and create_qp_ex filled in; rdma-core's inline wrappers take their
 * documented paths for the rest (ibv_query_port -> the exported ibv_query_port, missing
 * operations -> EOPNOTSUPP). */
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

static struct sim_dev devices[SIM_MAX_DEVICES];
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static void devices_init(void)
{
	sim_env_init();
	for (int i = 0; i < SIM_MAX_DEVICES; i++) {
		struct sim_dev *d = &devices[i];
		d->index = i;
		d->dev.node_type = IBV_NODE_CA;
		d->dev.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->dev.name, sizeof(d->dev.name), "mlx5_%d", i);
		snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", i);
		snprintf(d->dev.dev_path, sizeof(d->dev.dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path),
			 "/sys/class/infiniband/mlx5_%d", i);
	}
	sim_sysfs_init(devices, SIM_MAX_DEVICES);
}

void *zalloc_aligned(size_t align, size_t size)
{
	void *p;
	if (posix_memalign(&p, align, size))
		return NULL;
	memset(p, 0, size);
	return p;
}

/* ------------------------------------------------------------------ devices */

SIM_EXPORT struct ibv_device **(ibv_get_device_list)(int *num)
{
	struct ibv_device **l;

	pthread_once(&dev_once, devices_init);
	l = calloc(sim_env.num_devices + 1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < sim_env.num_devices; i++)
		l[i] = &devices[i].dev;
	if (num)
		*num = sim_env.num_devices;
	return l;
}

SIM_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SIM_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

SIM_EXPORT int ibv_get_device_index(struct ibv_device *dev)
{
	return ((struct sim_dev *)dev)->index;
}

/* Each process is a host of its own on the model's fabric, so the node GUID carries the pid.
 * The LID (and through it the GID) is allocated when the device is opened. */
static uint64_t node_guid(int index)
{
	return 0x0002c90300000000ull | ((uint64_t)(getpid() & 0xffffff) << 8) | (unsigned)index;
}

SIM_EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
	return htobe64(node_guid(((struct sim_dev *)dev)->index));
}

static void make_gid(struct sim_ctx *sc, int index, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (index == 0) {
		/* fe80::/64 + an interface id that carries the LID in its last two bytes */
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
		uint64_t iid = 0x0202c9fffe000000ull | sc->lid;
		for (int i = 0; i < 8; i++)
			gid->raw[8 + i] = (uint8_t)(iid >> (56 - 8 * i));
	} else {
		/* RoCE v2: IPv4-mapped 10.0.hi.lo */
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		gid->raw[12] = 10;
		gid->raw[13] = 0;
		gid->raw[14] = (uint8_t)(sc->lid >> 8);
		gid->raw[15] = (uint8_t)sc->lid;
	}
}

static int query_device_ex_op(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t size);
static struct ibv_cq_ex *create_cq_ex_op(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a);
static struct ibv_qp *create_qp_ex_op(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
static int get_srq_num_op(struct ibv_srq *srq, uint32_t *num);

/* libmlx5's MLX_{CQ,QP,SRQ}_ALLOC_TYPE=HUGE puts the object's buffer on huge pages and fails the
 * create (ENOMEM) when the system has none; the model keeps its buffers on ordinary pages but
 * fails the same way, by asking for one huge page. PREFER_HUGE and the others fall back. */
bool huge_refused(const char *var)
{
	const char *s = getenv(var);
	void *p;

	if (!s || strcmp(s, "HUGE"))
		return false;
	p = mmap(NULL, 2u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
		 -1, 0);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return true;
	}
	munmap(p, 2u << 20);
	return false;
}

/* The context of this process that holds each device's adapter (see sim_ctx.hw). */
static struct sim_ctx *adapters[SIM_MAX_DEVICES];
static pthread_mutex_t adapter_lock = PTHREAD_MUTEX_INITIALIZER;

/* A context's handle: the ibv_context with its ops table and async event pipe. */
static int ctx_handle_init(struct sim_ctx *sc, struct ibv_device *dev)
{
	struct ibv_context *c = &sc->vctx.context;
	int p[2];

	c->device = dev;
	c->ops.poll_cq = poll_cq_op;
	c->ops.req_notify_cq = req_notify_op;
	c->ops.post_send = post_send_op;
	c->ops.post_recv = post_recv_op;
	c->ops.post_srq_recv = post_srq_recv_op;
	c->ops.alloc_mw = alloc_mw_op;
	c->ops.dealloc_mw = dealloc_mw_op;
	c->ops.bind_mw = bind_mw_op;
	c->num_comp_vectors = 1;
	/* an extended context: verbs_context precedes ibv_context, sz right before it */
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	sc->vctx.sz = sizeof(struct verbs_context);
	sc->vctx.query_device_ex = query_device_ex_op;
	sc->vctx.create_cq_ex = create_cq_ex_op;
	sc->vctx.create_qp_ex = create_qp_ex_op;
	sc->vctx.get_srq_num = get_srq_num_op;
	sc->vctx.alloc_parent_domain = alloc_parent_domain_op;
	sc->vctx.alloc_dm = sim_alloc_dm;
	sc->vctx.free_dm = sim_free_dm;
	sc->vctx.reg_dm_mr = sim_reg_dm_mr;
	sc->vctx.advise_mr = advise_mr_op;
	sc->vctx.open_xrcd = sim_open_xrcd;
	sc->vctx.close_xrcd = sim_close_xrcd;
	sc->vctx.create_srq_ex = sim_create_srq_ex;
	pthread_mutex_init(&c->mutex, NULL);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	c->async_fd = p[0];
	sc->async_wfd = p[1];
	/* a descriptor of its own (ibv_import_device finds the device by its name) */
	{
		char name[32];
		snprintf(name, sizeof(name), "rvxsim-cmd-%d", ((struct sim_dev *)dev)->index);
		c->cmd_fd = memfd_create(name, MFD_CLOEXEC);
	}
	if (c->cmd_fd < 0)
		c->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	return 0;
}

static void ctx_handle_fini(struct sim_ctx *sc)
{
	struct ibv_context *c = &sc->vctx.context;

	if (sc->nc_uar) {
		struct mlx5dv_devx_uar *u = sc->nc_uar;   /* a struct sim_uar */
		free(u->base_addr);
		free(sc->nc_uar);
	}
	close(c->async_fd);
	close(sc->async_wfd);
	if (c->cmd_fd >= 0)
		close(c->cmd_fd);
	pthread_mutex_destroy(&c->mutex);
}

/* The adapter of the first context opened on a device: LID, inbox, engine. */
static int adapter_init(struct sim_ctx *sc)
{
	pthread_mutex_init(&sc->lock, NULL);
	sc->next_qpn = 0x100 + sc->index * 0x10000;
	sc->next_cqn = 0x400;
	sc->next_srqn = 0x20;
	sc->next_mkey = 1;
	if (sim_qp_tab_acquire(sc->index))
		goto fail_fd;
	if (fabric_open(sc))
		goto fail_tab;
	sc->guid = node_guid(sc->index);
	make_gid(sc, 0, &sc->gid);
	if (engine_start(sc)) {
		fabric_close(sc);
		goto fail_tab;
	}
	return 0;
fail_tab:
	sim_qp_tab_release(sc->index);
fail_fd:
	pthread_mutex_destroy(&sc->lock);
	return -1;
}

SIM_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	struct sim_ctx *sc;
	struct sim_dev *sd = (struct sim_dev *)dev;

	sim_count_verb();
	pthread_once(&dev_once, devices_init);
	sc = calloc(1, sizeof(*sc));
	if (!sc || ctx_handle_init(sc, dev)) {
		free(sc);
		errno = ENOMEM;
		return NULL;
	}
	sc->dev = sd;
	sc->index = sd->index;
	pthread_mutex_lock(&adapter_lock);
	/* a child of fork inherits the parent's record but not its engine: it opens its own */
	sc->hw = adapters[sc->index] && adapters[sc->index]->pid == getpid() ? adapters[sc->index] : NULL;
	if (sc->hw) {
		sc->hw->users++;
	} else if (adapter_init(sc) == 0) {
		sc->hw = sc;
		sc->users = 1;
		sc->pid = getpid();
		adapters[sc->index] = sc;
	}
	pthread_mutex_unlock(&adapter_lock);
	if (!sc->hw) {
		ctx_handle_fini(sc);
		free(sc);
		errno = ENODEV;
		return NULL;
	}
	return &sc->vctx.context;
}

static void adapter_fini(struct sim_ctx *sc);

SIM_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sim_ctx *self = ctx_self(ctx), *hw = self->hw;
	bool last;

	sim_count_verb();
	pthread_mutex_lock(&adapter_lock);
	last = --hw->users == 0;
	if (last)
		adapters[hw->index] = NULL;
	pthread_mutex_unlock(&adapter_lock);
	/* the adapter's own record stays while other contexts use it; its handle goes now */
	ctx_handle_fini(self);
	if (self != hw)
		free(self);
	else
		hw->closed = true;
	if (last)
		adapter_fini(hw);
	return 0;
}

static void adapter_fini(struct sim_ctx *sc)
{
	engine_stop(sc);
	fabric_close(sc);
	/* objects the application did not destroy: free what we own */
	while (sc->mrs) {
		struct sim_mr *m = sc->mrs;
		sc->mrs = m->next;
		sim_count_obj(SIM_OBJ_MR_BYTES, -(int64_t)sim_mr_bytes(m));
		free(m);
	}
	free(sc->mr_tab);
	sim_qp_tab_release(sc->index);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
}

/* Bytes of [p, p + len) in RAM now, whole pages (what the pages add to RSS). */
static uint64_t resident_bytes(const void *p, size_t len)
{
	static unsigned char vec[4096];
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(pg - 1);
	uintptr_t end = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);
	uint64_t n = 0;

	while (p && a < end) {
		size_t pages = MIN((end - a) / pg, sizeof(vec));

		if (mincore((void *)a, pages * pg, vec))
			return n;
		for (size_t i = 0; i < pages; i++)
			n += (vec[i] & 1) * pg;
		a += pages * pg;
	}
	return n;
}

void sim_resident(struct sim_resident *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&adapter_lock);
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		struct sim_ctx *sc = adapters[d];

		if (!sc)
			continue;
		pthread_mutex_lock(&sc->lock);
		for (struct sim_mr *m = sc->mrs; m; m = m->next)
			r->mr_rss += resident_bytes((const void *)m->addr, m->length);
		for (struct sim_qp *q = sc->qps; q; q = q->next) {
			const void *arr[6] = { q->out, q->sq_wrid, q->sq_bbs, q->rq_wrid, q->uar,
					       q->sq_wc_op };
			size_t len[6] = { SIM_MAX_OUTSTANDING * sizeof(struct sq_rec),
					  MAX(q->sq_wqe_cnt, 1u) * sizeof(uint64_t),
					  MAX(q->sq_wqe_cnt, 1u) * sizeof(uint16_t),
					  MAX(q->rq_wqe_cnt, 1u) * sizeof(uint64_t), 4096,
					  MAX(q->sq_wqe_cnt, 1u) };

			r->queue_bytes += q->buf_size;
			r->queue_rss += resident_bytes(q->buf, q->buf_size);
			for (int i = 0; i < 6; i++)
				r->model_idle += len[i] - MIN(resident_bytes(arr[i], len[i]), len[i]);
		}
		for (struct sim_cq *c = sc->cqs; c; c = c->next) {
			r->queue_bytes += (uint64_t)c->cqe_cnt * c->cqe_size;
			r->queue_rss += resident_bytes(c->buf, (size_t)c->cqe_cnt * c->cqe_size);
		}
		for (struct sim_srq *s = sc->srqs; s; s = s->next) {
			r->queue_bytes += (uint64_t)s->wqe_cnt * s->stride;
			r->queue_rss += resident_bytes(s->buf, (size_t)s->wqe_cnt * s->stride);
		}
		pthread_mutex_unlock(&sc->lock);
	}
	pthread_mutex_unlock(&adapter_lock);
}

uint64_t sim_engine_cpu_ns(void)
{
	uint64_t ns = 0;

	pthread_mutex_lock(&adapter_lock);
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		clockid_t cid;
		struct timespec ts;

		if (adapters[d] && !pthread_getcpuclockid(adapters[d]->thread, &cid) &&
		    !clock_gettime(cid, &ts))
			ns += (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	pthread_mutex_unlock(&adapter_lock);
	return ns;
}

SIM_PRIV bool rvxsim_priv_is_sim(struct ibv_context *ctx)
{
	return ctx && ctx->ops.post_send == post_send_op;
}

/* mlx5dv_devx_alloc_uar. A ConnectX-6 gives UARs through the kernel's UAR object whether DEVX
 * is open or not (libmlx5 mlx5_alloc_dyn_uar): a BlueFlame UAR is a page of its own, the
 * non-cached one the context's single one (mlx5_get_singleton_nc_uar). The model watches no
 * doorbell on them: nothing it models can be tied to such a UAR (that takes DEVX objects). */
struct sim_uar {
	struct mlx5dv_devx_uar u;
	bool nc;
};

SIM_PRIV struct mlx5dv_devx_uar *rvxsim_priv_devx_alloc_uar(struct ibv_context *ctx, uint32_t flags)
{
	static _Atomic uint32_t next_page = 0x1000;
	struct sim_ctx *self = ctx_self(ctx);
	struct sim_uar *u;
	uint32_t page;

	/* rule: flags MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF (0) or _NC (1), else EOPNOTSUPP (libmlx5
	 * _mlx5dv_devx_alloc_uar, check_comp_mask) */
	if (flags & ~1u) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (flags && self->nc_uar)
		return self->nc_uar;
	u = calloc(1, sizeof(*u));
	if (u)
		u->u.base_addr = zalloc_aligned(4096, 4096);
	if (!u || !u->u.base_addr) {
		free(u);
		errno = ENOMEM;
		return NULL;
	}
	page = atomic_fetch_add(&next_page, 1);
	u->u.reg_addr = (uint8_t *)u->u.base_addr + 0x800;   /* MLX5_BF_OFFSET */
	u->u.page_id = page;
	u->u.mmap_off = (off_t)page << 12;
	u->nc = flags != 0;
	if (u->nc)
		self->nc_uar = u;
	return &u->u;
}

/* The non-cached UAR stays until its context closes (libmlx5 _mlx5dv_devx_free_uar). */
SIM_PRIV void rvxsim_priv_devx_free_uar(struct mlx5dv_devx_uar *uar)
{
	struct sim_uar *u = (struct sim_uar *)uar;

	if (!u || u->nc)
		return;
	free(u->u.base_addr);
	free(u);
}

/* ------------------------------------------------------------------ queries */

SIM_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	struct sim_ctx *sc = to_sctx(ctx);

	sim_count_verb();
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "20.31.1014");
	a->node_guid = htobe64(sc->guid);
	a->sys_image_guid = htobe64(sc->guid);
	a->max_mr_size = ~0ull;
	a->page_size_cap = 0xfffffffffffff000ull;
	a->vendor_id = SIM_VENDOR_ID;
	a->vendor_part_id = SIM_PART_ID;
	a->hw_ver = SIM_HW_VER;
	a->max_qp = 262144;
	a->max_qp_wr = SIM_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_AUTO_PATH_MIG | IBV_DEVICE_CHANGE_PHY_PORT |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_MGT_EXTENSIONS |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = SIM_MAX_SGE;
	a->max_sge_rd = SIM_MAX_SGE;
	a->max_cq = 16777216;
	a->max_cqe = SIM_MAX_CQE;
	a->max_mr = 16777216;
	a->max_mw = 16777216;    /* mlx5_ib: 1 << log_max_mkey, as max_mr */
	a->max_pd = 16777216;
	a->max_qp_rd_atom = SIM_MAX_RD_ATOMIC;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = 4194304;
	a->max_qp_init_rd_atom = SIM_MAX_RD_ATOMIC;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = 8388608;
	a->max_srq_wr = SIM_MAX_SRQ_WR;
	a->max_srq_sge = 31;
	a->max_pkeys = 128;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = 1;
	a->max_mcast_grp = 2097152;
	a->max_mcast_qp_attach = 240;
	a->max_total_mcast_qp_attach = 503316480;
	a->max_ah = INT32_MAX;
	return 0;
}

/* The port's GID table: on InfiniBand 8 entries, GID 0 (the port GUID's) populated (mlx5_ib
 * reports 8 << gid_table_size, 8 on a ConnectX-6); on RoCE 2, both populated (RoCE v1 and v2 of
 * the link-local address). */
#define GID_TBL_LEN (sim_env.link_eth ? 2u : 8u)
#define GID_VALID   (sim_env.link_eth ? 2u : 1u)

SIM_EXPORT int (ibv_query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *pa)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct ibv_port_attr *a = (struct ibv_port_attr *)pa;

	sim_count_verb();
	/* rule: the device has one port (the kernel refuses others with EINVAL) */
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = sim_env.link_eth ? IBV_MTU_1024 : IBV_MTU_4096;
	a->gid_tbl_len = GID_TBL_LEN;
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_VENDOR_CLASS_SUP;
	a->max_msg_sz = 1u << 30;
	a->bad_pkey_cntr = 0;
	a->qkey_viol_cntr = 0;
	a->pkey_tbl_len = 128;
	a->lid = sim_env.link_eth ? 0 : sc->lid;
	a->sm_lid = sim_env.link_eth ? 0 : 1;
	a->lmc = 0;
	a->max_vl_num = 4;
	a->sm_sl = 0;
	a->subnet_timeout = 18;
	a->init_type_reply = 0;
	a->active_width = sim_env.port_width[sc->index];  /* RVXSIM_PORT_SPEED; default 4x */
	a->active_speed = sim_env.port_speed[sc->index];  /* default HDR */
	a->phys_state = 5;         /* LinkUp */
	a->link_layer = sim_env.link_eth ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	a->flags = 0;
	a->port_cap_flags2 = 0;
	return 0;
}


SIM_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	/* rule: port 1, a GID index within its table; an empty entry reads as the zero GID
	 * (libibverbs __ibv_query_gid: "preserve API behavior for empty GID") */
	if (port != 1 || index < 0 || (uint32_t)index >= GID_TBL_LEN)
		return -1;
	if ((uint32_t)index >= GID_VALID)
		memset(gid, 0, sizeof(*gid));
	else
		make_gid(to_sctx(ctx), index, gid);
	return 0;
}

SIM_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				 struct ibv_gid_entry *e, uint32_t flags, size_t entry_size)
{
	if (flags || entry_size < sizeof(*e))
		return EINVAL;
	/* rule: port 1 and an index within the table, else EINVAL; an empty entry ENODATA (the
	 * kernel's rdma_get_gid_attr) */
	if (port != 1 || index >= GID_TBL_LEN)
		return EINVAL;
	if (index >= GID_VALID)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	make_gid(to_sctx(ctx), index, &e->gid);
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = !sim_env.link_eth ? IBV_GID_TYPE_IB :
		      index == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
	return 0;
}

/* Exported by rdma-core for its tools (ibv_devinfo reads "board_id" with it). The model's devices
 * have no sysfs directory, so their files are answered here; other paths are read for real. */
SIM_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[512];
	int fd, n;
	for (int i = 0; i < SIM_MAX_DEVICES; i++) {
		if (strcmp(dir, devices[i].dev.ibdev_path) && strcmp(dir, devices[i].dev.dev_path))
			continue;
		if (!strcmp(file, "board_id"))
			return snprintf(buf, size, "RVXSIM_CX6");
		if (!strcmp(file, "fw_ver"))
			return snprintf(buf, size, "20.31.1014");
		errno = ENOENT;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = (int)read(fd, buf, size);
	close(fd);
	if (n > 0 && (size_t)n < size && buf[n - 1] == '\n')
		buf[--n] = 0;
	else if (n >= 0 && (size_t)n < size)
		buf[n] = 0;
	return n;
}

/* rdma-core's private helper that Debian's ibv_devinfo binds to (IBVERBS_PRIVATE_34): the
 * sysfs GID type, 0 for IB or RoCE v1, 1 for RoCE v2. */
SIM_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
				  int *type)
{
	if (port != 1 || index >= GID_VALID)
		return -1;
	(void)ctx;
	*type = sim_env.link_eth && index == 1 ? 1 : 0;
	return 0;
}

SIM_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
					size_t max, uint32_t flags, size_t entry_size)
{
	size_t n = GID_VALID;
	if (flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	if (max < n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		_ibv_query_gid_ex(ctx, 1, i, &entries[i], 0, sizeof(struct ibv_gid_entry));
	return n;
}

SIM_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	(void)ctx;
	if (port != 1 || index < 0 || index >= 128)
		return -1;
	*pkey = index == 0 ? htobe16(0xffff) : 0;
	return 0;
}

SIM_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	(void)ctx;
	if (port == 1 && (be16toh(pkey) & 0x7fff) == 0x7fff)
		return 0;
	return -1;
}

/* ------------------------------------------------------------------ the extended context's operations */

static struct ibv_cq_ex *create_cq_ex_op(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
	int size = rvxsim_priv_env_cqe_size();
	return size < 0 ? NULL : rvxsim_priv_create_cq_ex(ctx, a, (uint32_t)size);
}

static struct ibv_qp *create_qp_ex_op(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp *qp;

	/* rule: a target QP names its XRC domain, every other QP its PD (libibverbs
	 * ibv_icmd_create_qp: EINVAL without it) */
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd) {
			errno = EINVAL;
			return NULL;
		}
	} else if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
				       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_XRCD)) {
		sim_unsupported("ibv_create_qp_ex(comp_mask)");
		return NULL;
	}
	/* BLOCK_SELF_MCAST_LB is taken (libmlx5 and mlx5_ib accept it on a ConnectX-6, block_lb_mc);
	 * the model has no multicast, so it changes nothing. The others are refused. */
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    (a->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)) {
		sim_unsupported("ibv_create_qp_ex(create_flags)");
		return NULL;
	}
	if (a->qp_type == IBV_QPT_XRC_RECV)
		return sim_create_xrc_tgt(ctx, a);
	/* ibv_qp_init_attr_ex begins with the fields of ibv_qp_init_attr */
	qp = rvxsim_priv_create_qp(a->pd, (struct ibv_qp_init_attr *)a, 0);
	if (qp && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		int err = rvxsim_priv_qp_enable_wr(qp, a->send_ops_flags);
		if (err) {
			ibv_destroy_qp(qp);
			errno = err;
			return NULL;
		}
	}
	return qp;
}

/* The ibv_wr_* API on a new QP (wr.c); an error destroys nothing, the caller does. */
SIM_PRIV int rvxsim_priv_qp_enable_wr(struct ibv_qp *qp, uint64_t send_ops_flags)
{
	return sim_wr_init(to_sqp(qp), send_ops_flags);
}

/* mlx5dv_qp_ex_from_ibv_qp_ex: the QP's mlx5dv view (wr_set_dc_addr is set on a DCI only) */
SIM_PRIV struct mlx5dv_qp_ex *rvxsim_priv_qp_dv(struct ibv_qp_ex *qpx)
{
	return qpx ? &((struct sim_qp *)qpx)->dvqpx : NULL;
}

/* ibv_get_srq_num: libmlx5 answers the SRQ number of any SRQ (mlx5_get_srq_num), which is what
 * a DC initiator needs nothing of but perftest exchanges for DC and XRC alike. */
static int get_srq_num_op(struct ibv_srq *srq, uint32_t *num)
{
	*num = to_ssrq(srq)->srqn;
	return 0;
}

static int query_device_ex_op(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t size)
{
	struct ibv_device_attr_ex ex;
	int ret;

	if (in && in->comp_mask)
		return EINVAL;
	if (size < sizeof(struct ibv_device_attr))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	ret = ibv_query_device(ctx, &ex.orig_attr);
	if (ret)
		return ret;
	ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags;
	ex.phys_port_cnt_ex = 1;
	/* the model's atomics: 4 and 8 bytes (masked ones through opmod 0x08/0x09) */
	ex.pci_atomic_caps.fetch_add = ex.pci_atomic_caps.swap = ex.pci_atomic_caps.compare_swap =
		IBV_PCI_ATOMIC_OPERATION_4_BYTE_SIZE_SUP | IBV_PCI_ATOMIC_OPERATION_8_BYTE_SIZE_SUP;
	ex.max_dm_size = SIM_DM_SIZE;
	/* On-Demand Paging as mlx5_ib reports it for a ConnectX-6 whose firmware has the ODP caps
	 * (mlx5_ib_internal_fill_odp_caps): ODP and implicit ODP; RC every operation, SRQ receives
	 * included; UD sends and SRQ receives; UC none (mlx5_ib has no UC bits); XRC as RC
	 * [inferred: mlx5_ib copies the firmware's xrc_odp_caps, taken to be RC's]. */
	ex.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	ex.odp_caps.per_transport_caps.rc_odp_caps = SIM_ODP_TRANSPORT_CAPS;
	ex.odp_caps.per_transport_caps.uc_odp_caps = 0;
	ex.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_SRQ_RECV;
	ex.xrc_odp_caps = SIM_ODP_TRANSPORT_CAPS;
	memcpy(attr, &ex, MIN(size, sizeof(ex)));
	return 0;
}

/* ------------------------------------------------------------------ strings and small helpers */

SIM_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const str[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)s >= sizeof(str) / sizeof(str[0]) || !str[s])
		return "unknown";
	return str[s];
}

SIM_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	static const char *const str[] = { "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					    "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };
	return (unsigned)s < 6 ? str[s] : "unknown";
}

SIM_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const str[] = { [IBV_NODE_CA] = "InfiniBand channel adapter",
					    [IBV_NODE_SWITCH] = "InfiniBand switch",
					    [IBV_NODE_ROUTER] = "InfiniBand router",
					    [IBV_NODE_RNIC] = "iWARP NIC",
					    [IBV_NODE_USNIC] = "usNIC",
					    [IBV_NODE_USNIC_UDP] = "usNIC UDP",
					    [IBV_NODE_UNSPECIFIED] = "unspecified" };
	if (t < IBV_NODE_CA || (unsigned)t > IBV_NODE_UNSPECIFIED)
		return "unknown";
	return str[t];
}

SIM_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const str[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)e >= sizeof(str) / sizeof(str[0]) || !str[e])
		return "unknown";
	return str[e];
}

SIM_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	switch (rate) {
	case IBV_RATE_2_5_GBPS: return 1;
	case IBV_RATE_5_GBPS: return 2;
	case IBV_RATE_10_GBPS: return 4;
	case IBV_RATE_20_GBPS: return 8;
	case IBV_RATE_30_GBPS: return 12;
	case IBV_RATE_40_GBPS: return 16;
	case IBV_RATE_60_GBPS: return 24;
	case IBV_RATE_80_GBPS: return 32;
	case IBV_RATE_120_GBPS: return 48;
	default: return -1;
	}
}

SIM_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	switch (mult) {
	case 1: return IBV_RATE_2_5_GBPS;
	case 2: return IBV_RATE_5_GBPS;
	case 4: return IBV_RATE_10_GBPS;
	case 8: return IBV_RATE_20_GBPS;
	case 12: return IBV_RATE_30_GBPS;
	case 16: return IBV_RATE_40_GBPS;
	case 24: return IBV_RATE_60_GBPS;
	case 32: return IBV_RATE_80_GBPS;
	case 48: return IBV_RATE_120_GBPS;
	default: return IBV_RATE_MAX;
	}
}

SIM_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	switch (rate) {
	case IBV_RATE_2_5_GBPS: return 2500;
	case IBV_RATE_10_GBPS: return 10000;
	case IBV_RATE_25_GBPS: return 25000;
	case IBV_RATE_40_GBPS: return 40000;
	case IBV_RATE_50_GBPS: return 50000;
	case IBV_RATE_100_GBPS: return 100000;
	case IBV_RATE_200_GBPS: return 200000;
	case IBV_RATE_400_GBPS: return 400000;
	default: return -1;
	}
}

SIM_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	switch (mbps) {
	case 2500: return IBV_RATE_2_5_GBPS;
	case 10000: return IBV_RATE_10_GBPS;
	case 25000: return IBV_RATE_25_GBPS;
	case 40000: return IBV_RATE_40_GBPS;
	case 50000: return IBV_RATE_50_GBPS;
	case 100000: return IBV_RATE_100_GBPS;
	case 200000: return IBV_RATE_200_GBPS;
	case 400000: return IBV_RATE_400_GBPS;
	default: return IBV_RATE_MAX;
	}
}

SIM_EXPORT int ibv_fork_init(void)
{
	return 0;
}

/* The model's adapter never writes process memory behind the kernel's back (its engine is a
 * thread of the process), so fork needs nothing: rdma-core's answer on a kernel with copy-on-fork
 * support for pinned pages. */
SIM_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

SIM_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base; (void)size;
	return 0;
}

SIM_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base; (void)size;
	return 0;
}

SIM_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	/* as rdma-core: only a QP created with send_ops_flags has the extended view */
	return to_sqp(qp)->wrb ? &to_sqp(qp)->qpx : NULL;
}

SIM_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	sim_unsupported("ibv_attach_mcast");
	return EOPNOTSUPP;
}

SIM_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	sim_unsupported("ibv_detach_mcast");
	return EOPNOTSUPP;
}

SIM_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port)
{
	(void)pd; (void)wc; (void)grh; (void)port;
	sim_unsupported("ibv_create_ah_from_wc");
	return NULL;
}

SIM_EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
	(void)ctx; (void)port; (void)wc; (void)grh; (void)ah;
	sim_unsupported("ibv_init_ah_from_wc");
	return EOPNOTSUPP;
}

SIM_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp; (void)ece;
	sim_unsupported("ibv_query_ece");
	return EOPNOTSUPP;
}

SIM_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp; (void)ece;
	sim_unsupported("ibv_set_ece");
	return EOPNOTSUPP;
}

/* ibv_import_device: another context on the device whose context's command descriptor cmd_fd
 * is (a dup of it, in this process: the model keeps every object in the process that made it,
 * so a descriptor passed from another process finds none of them). The new context shares the
 * adapter, where the objects are, and owns cmd_fd, as libibverbs' imported context does. */
SIM_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	char link[64], target[128];
	struct ibv_context *ctx;
	ssize_t n;
	int idx;

	pthread_once(&dev_once, devices_init);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", cmd_fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n > 0)
		target[n] = 0;
	if (n <= 0 || sscanf(target, "/memfd:rvxsim-cmd-%d", &idx) != 1 || idx < 0 ||
	    idx >= SIM_MAX_DEVICES || !devices[idx].dev.name[0]) {
		sim_unsupported("ibv_import_device of a descriptor that is no context of this process");
		errno = EOPNOTSUPP;
		return NULL;
	}
	ctx = ibv_open_device(&devices[idx].dev);
	if (!ctx)
		return NULL;
	close(ctx->cmd_fd);
	ctx->cmd_fd = cmd_fd;
	return ctx;
}

SIM_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	return sim_import_dm(ctx, dm_handle);
}

SIM_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	sim_unimport_dm(dm);
}

SIM_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *ctx, struct ibv_ah_attr *attr,
					   uint8_t eth_mac[6], uint16_t *vid)
{
	(void)ctx; (void)attr; (void)eth_mac; (void)vid;
	sim_unsupported("ibv_resolve_eth_l2_from_gid");
	return EOPNOTSUPP;
}

/* default-version bindings (see SIM_DEFAULT_1_1 in internal.h) */
SIM_DEFAULT_1_1(ibv_attach_mcast)
SIM_DEFAULT_1_1(ibv_close_device)
SIM_DEFAULT_1_1(ibv_detach_mcast)
SIM_DEFAULT_1_1(ibv_free_device_list)
SIM_DEFAULT_1_1(ibv_get_device_guid)
SIM_DEFAULT_1_1(ibv_get_device_list)
SIM_DEFAULT_1_1(ibv_get_device_name)
SIM_DEFAULT_1_1(ibv_open_device)
SIM_DEFAULT_1_1(ibv_query_device)
SIM_DEFAULT_1_1(ibv_query_gid)
SIM_DEFAULT_1_1(ibv_query_pkey)
SIM_DEFAULT_1_1(ibv_query_port)
