/* rvxsim: the libibverbs.so.1 surface. Objects are laid out as libmlx5 lays them out on a
 * ConnectX, so mlx5dv_init_obj can hand out the same geometry, and the ops table builds real mlx5
 * WQEs and decodes real CQEs, so ibv_post_send/ibv_poll_cq go through the same engine as direct
 * users. The context is an extended one (a verbs_context in front of the ibv_context) with only
 * query_device_ex, create_cq_ex and create_qp_ex filled in; rdma-core's inline wrappers take their
 * documented paths for the rest (ibv_query_port -> the exported ibv_query_port, missing
 * operations -> EOPNOTSUPP). */
#include "internal.h"
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
static struct sim_qp **qp_tabs[SIM_MAX_DEVICES];
static int open_count[SIM_MAX_DEVICES];
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;

#define QP_TAB_SIZE 65536

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

static void release_tab(int index)
{
	pthread_mutex_lock(&tab_lock);
	if (--open_count[index] == 0) {
		free(qp_tabs[index]);
		qp_tabs[index] = NULL;
	}
	pthread_mutex_unlock(&tab_lock);
}

static int poll_cq_op(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int query_device_ex_op(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t size);
static struct ibv_cq_ex *create_cq_ex_op(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a);
static struct ibv_qp *create_qp_ex_op(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
static int get_srq_num_op(struct ibv_srq *srq, uint32_t *num);
static struct ibv_pd *alloc_parent_domain_op(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *a);
static int req_notify_op(struct ibv_cq *cq, int solicited);
static int post_send_op(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int post_recv_op(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static void cq_clean(struct sim_cq *cq, struct sim_qp *qp);

/* libmlx5's MLX_{CQ,QP,SRQ}_ALLOC_TYPE=HUGE puts the object's buffer on huge pages and fails the
 * create (ENOMEM) when the system has none; the model keeps its buffers on ordinary pages but
 * fails the same way, by asking for one huge page. PREFER_HUGE and the others fall back. */
static bool huge_refused(const char *var)
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
	pthread_mutex_init(&c->mutex, NULL);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	c->async_fd = p[0];
	sc->async_wfd = p[1];
	c->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	return 0;
}

static void ctx_handle_fini(struct sim_ctx *sc)
{
	struct ibv_context *c = &sc->vctx.context;

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
	pthread_mutex_lock(&tab_lock);
	if (!qp_tabs[sc->index])
		qp_tabs[sc->index] = calloc(QP_TAB_SIZE, sizeof(struct sim_qp *));
	if (qp_tabs[sc->index])
		open_count[sc->index]++;
	pthread_mutex_unlock(&tab_lock);
	if (!qp_tabs[sc->index])
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
	release_tab(sc->index);
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
		sim_count_obj(SIM_OBJ_MR_BYTES, -(int64_t)m->length);
		free(m);
	}
	free(sc->mr_tab);
	release_tab(sc->index);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
}

SIM_PRIV bool rvxsim_priv_is_sim(struct ibv_context *ctx)
{
	return ctx && ctx->ops.post_send == post_send_op;
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
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_MGT_EXTENSIONS;
	a->max_sge = SIM_MAX_SGE;
	a->max_sge_rd = SIM_MAX_SGE;
	a->max_cq = 16777216;
	a->max_cqe = SIM_MAX_CQE;
	a->max_mr = 16777216;
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

SIM_EXPORT int (ibv_query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *pa)
{
	struct sim_ctx *sc = to_sctx(ctx);
	struct ibv_port_attr *a = (struct ibv_port_attr *)pa;

	sim_count_verb();
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = sim_env.link_eth ? IBV_MTU_1024 : IBV_MTU_4096;
	a->gid_tbl_len = sim_env.link_eth ? 2 : 1;
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
	if (port != 1 || index < 0 || index >= (sim_env.link_eth ? 2 : 1))
		return -1;
	make_gid(to_sctx(ctx), index, gid);
	return 0;
}

SIM_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				 struct ibv_gid_entry *e, uint32_t flags, size_t entry_size)
{
	if (flags || entry_size < sizeof(*e))
		return EINVAL;
	if (port != 1 || index >= (uint32_t)(sim_env.link_eth ? 2 : 1))
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
	if (port != 1 || index >= (unsigned int)(sim_env.link_eth ? 2 : 1))
		return -1;
	(void)ctx;
	*type = sim_env.link_eth && index == 1 ? 1 : 0;
	return 0;
}

SIM_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
					size_t max, uint32_t flags, size_t entry_size)
{
	size_t n = sim_env.link_eth ? 2 : 1;
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
	return &pd->pd;
}

SIM_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sim_pd *p = (struct sim_pd *)pd;

	sim_count_verb();
	if (atomic_load(&p->users))
		return EBUSY;
	if (p->prot)
		pd_put(p->prot);
	free(pd);
	return 0;
}

/* ibv_alloc_parent_domain (libmlx5's mlx5_alloc_parent_domain): a PD standing for attr->pd,
 * which it holds (that PD's dealloc is EBUSY meanwhile). Thread domains do not exist on the model
 * (ibv_alloc_td finds no entry), so td must be NULL. The custom allocators are accepted and not
 * called: the model places its queues in memory of its own, as a provider may when an allocator
 * answers IBV_ALLOCATOR_USE_DEFAULT. */
static struct ibv_pd *alloc_parent_domain_op(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *a)
{
	const uint32_t known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	struct sim_pd *pd;

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

struct sim_mr *sim_mr_lookup(struct sim_ctx *sc, uint32_t key)
{
	uint32_t i = key >> 8;
	if (i >= sc->mr_tab_size || !sc->mr_tab[i] || sc->mr_tab[i]->mr.lkey != key)
		return NULL;
	return sc->mr_tab[i];
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

	sim_count_verb();
	if (mr_access_ok(access))
		return NULL;
	if (!addr && length) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	if (sim_env.reg_cost_ns_per_page > 0)
		reg_cost(length, addr);
	pthread_mutex_lock(&sc->lock);
	for (idx = 1; idx < sc->mr_tab_size && sc->mr_tab[idx]; idx++)
		;
	if (idx >= sc->mr_tab_size) {
		uint32_t nsize = sc->mr_tab_size ? sc->mr_tab_size * 2 : 64;
		struct sim_mr **t = realloc(sc->mr_tab, nsize * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&sc->lock);
			free(m);
			errno = ENOMEM;
			return NULL;
		}
		memset(t + sc->mr_tab_size, 0, (nsize - sc->mr_tab_size) * sizeof(*t));
		sc->mr_tab = t;
		sc->mr_tab_size = nsize;
		if (idx == 0)
			idx = 1;
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
	sc->mr_tab[idx] = m;
	m->next = sc->mrs;
	sc->mrs = m;
	pthread_mutex_unlock(&sc->lock);
	pd_get(pd);
	sim_count_obj(SIM_OBJ_MR_BYTES, (int64_t)length);
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

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	if (m->mr.handle < sc->mr_tab_size && sc->mr_tab[m->mr.handle] == m)
		sc->mr_tab[m->mr.handle] = NULL;
	for (pp = &sc->mrs; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	pd_put(m->mr.pd);
	if (m->dm_refs)
		atomic_fetch_sub(m->dm_refs, 1);
	sim_count_obj(SIM_OBJ_MR_BYTES, -(int64_t)m->length);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)sizeof(*m));
	free(m);
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
			       IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE;

	/* remote write or atomic without local write: EINVAL (the kernel's ib_check_mr_access) */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return errno = EINVAL;
	if (access & ~known) {
		if (access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
			      IBV_ACCESS_HUGETLB)) {
			sim_unsupported(access & IBV_ACCESS_ON_DEMAND ? "ibv_reg_mr(IBV_ACCESS_ON_DEMAND)" :
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
	if (flags & IBV_REREG_MR_CHANGE_PD)
		pd_get(pd);
	pthread_mutex_lock(&sc->lock);
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		m->access = access;
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		sim_count_obj(SIM_OBJ_MR_BYTES, (int64_t)length - (int64_t)m->length);
		mr->addr = addr;
		mr->length = length;
		m->addr = (uintptr_t)addr;
		m->iova = (uintptr_t)addr;
		m->length = length;
	}
	pthread_mutex_unlock(&sc->lock);
	if (flags & IBV_REREG_MR_CHANGE_PD)
		pd_put(old);
	return 0;
}

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

static struct ibv_cq_ex *create_cq_ex_op(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
	int size = rvxsim_priv_env_cqe_size();
	return size < 0 ? NULL : rvxsim_priv_create_cq_ex(ctx, a, (uint32_t)size);
}

static struct ibv_qp *create_qp_ex_op(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp *qp;

	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
				       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
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
	memcpy(attr, &ex, MIN(size, sizeof(ex)));
	return 0;
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
static int req_notify_op(struct ibv_cq *ibcq, int solicited)
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

/* ------------------------------------------------------------------ QP */

struct sim_qp *sim_qp_lookup(struct sim_ctx *sc, uint32_t qpn)
{
	struct sim_qp *q = qp_tabs[sc->index][qpn & (QP_TAB_SIZE - 1)];
	return q && q->qpn == qpn && q->sc == sc ? q : NULL;
}

static struct sim_qp *qp_lookup(struct sim_ctx *sc, uint32_t qpn)
{
	struct sim_qp *q = qp_tabs[sc->index][qpn & (QP_TAB_SIZE - 1)];
	return q && q->qpn == qpn ? q : NULL;
}

/* libmlx5's sizing for an RC send queue (see the facts sheet, section 1). */
static int size_sq(struct sim_qp *qp, struct ibv_qp_cap *cap)
{
	/* libmlx5's overhead: a UMR WQE for RC, ctrl + datagram segment for UD; a DCI's WQEs also
	 * hold the 48-byte address segment (libmlx5 _sq_overhead) */
	uint32_t ovh = qp->type == IBV_QPT_UD ? 64 :
		       SIM_RC_SQ_OVERHEAD + (qp->dc_type == SIM_DCI ? 48 : 0), wqe, bytes;

	if (cap->max_send_wr == 0) {
		qp->sq_wqe_cnt = 0;
		qp->max_inline = 0;
		return 0;
	}
	if (cap->max_send_wr > SIM_MAX_QP_WR || cap->max_send_sge > SIM_MAX_SGE)
		return EINVAL;
	wqe = MAX(ovh + 16 * cap->max_send_sge, ovh + ALIGN_UP(4 + cap->max_inline_data, 16));
	wqe = ALIGN_UP(wqe, 64);
	if (wqe > SIM_MAX_WQE_SIZE)
		return EINVAL;
	bytes = roundup_pow2(cap->max_send_wr * wqe);
	if (bytes / 64 > SIM_MAX_QP_WR)
		return EINVAL;
	qp->sq_wqe_cnt = bytes / 64;
	qp->max_wqe_bytes = wqe;
	qp->max_send_wr = bytes / wqe;
	qp->max_inline = wqe - ovh - 4;
	qp->max_send_sge = cap->max_send_sge;   /* libmlx5 reports what was asked for */
	return 0;
}

static int size_rq(struct sim_qp *qp, struct ibv_qp_cap *cap)
{
	if (qp->srq || cap->max_recv_wr == 0) {
		qp->rq_wqe_cnt = 0;
		qp->rq_stride = 0;
		qp->max_recv_wr = 0;
		qp->max_recv_sge = qp->srq ? 0 : cap->max_recv_sge;
		return 0;
	}
	if (cap->max_recv_wr > SIM_MAX_QP_WR || cap->max_recv_sge > SIM_MAX_SGE)
		return EINVAL;
	qp->rq_stride = roundup_pow2(16 * MAX(1u, cap->max_recv_sge));
	qp->rq_wqe_cnt = roundup_pow2(cap->max_recv_wr);
	while (qp->rq_wqe_cnt * qp->rq_stride < 64)
		qp->rq_wqe_cnt <<= 1;
	qp->max_recv_wr = qp->rq_wqe_cnt;
	qp->max_recv_sge = qp->rq_stride / 16;
	return 0;
}

static void qp_free(struct sim_qp *qp)
{
	free(qp->buf);
	free(qp->dbrec);
	free(qp->uar);
	free(qp->sq_wrid);
	free(qp->sq_bbs);
	free(qp->rq_wrid);
	free(qp->out);
	dc_free(qp);
	sim_wr_free(qp);
	free(qp);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia, int dc_type,
				uint64_t dc_key);

SIM_PRIV struct ibv_qp *rvxsim_priv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
					     uint32_t create_flags)
{
	(void)create_flags;
	return create_qp(pd, ia, 0, 0);
}

SIM_PRIV struct ibv_qp *rvxsim_priv_create_dc_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
						 int dc_type, uint64_t access_key)
{
	return create_qp(pd, ia, dc_type, access_key);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia, int dc_type,
				uint64_t dc_key)
{
	struct sim_ctx *sc = to_sctx(pd->context);
	struct sim_qp *qp;
	size_t rq_bytes, sq_bytes;
	int err;

	sim_count_verb();
	if (huge_refused("MLX_QP_ALLOC_TYPE"))
		return NULL;
	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UD &&
	    !(ia->qp_type == IBV_QPT_DRIVER && dc_type)) {
		sim_log("rvxsim: ibv_create_qp(qp_type %d): not supported by the model (RC, UD and DC only)",
			ia->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != pd->context ||
	    ia->recv_cq->context != pd->context) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->sc = sc;
	qp->type = ia->qp_type;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->srq = ia->srq ? to_ssrq(ia->srq) : NULL;
	qp->scq = to_scq(ia->send_cq);
	qp->rcq = to_scq(ia->recv_cq);
	err = dc_type ? dc_init(qp, dc_type, dc_key) : 0;
	if (dc_type == SIM_DCT)     /* a DCT has no queues of its own: it receives through its SRQ */
		ia->cap.max_send_wr = ia->cap.max_recv_wr = 0;
	if (!err)
		err = size_sq(qp, &ia->cap);
	if (!err)
		err = size_rq(qp, &ia->cap);
	if (err) {
		dc_free(qp);
		free(qp);
		errno = err;
		return NULL;
	}
	rq_bytes = (size_t)qp->rq_wqe_cnt * qp->rq_stride;
	sq_bytes = (size_t)qp->sq_wqe_cnt * 64;
	qp->buf_size = ALIGN_UP(MAX(rq_bytes + sq_bytes, (size_t)64), 4096);
	qp->buf = zalloc_aligned(4096, qp->buf_size);
	qp->dbrec = zalloc_aligned(64, 64);      /* each QP's record in its own cache line */
	/* a UAR page of its own; the bfreg sits at UAR + 0x800 as on hardware */
	qp->uar = zalloc_aligned(4096, 4096);
	qp->bf = qp->uar ? qp->uar + 0x800 : NULL;
	qp->sq_wrid = calloc(MAX(qp->sq_wqe_cnt, 1u), sizeof(uint64_t));
	qp->sq_bbs = calloc(MAX(qp->sq_wqe_cnt, 1u), sizeof(uint16_t));
	qp->rq_wrid = calloc(MAX(qp->rq_wqe_cnt, 1u), sizeof(uint64_t));
	qp->out = calloc(SIM_MAX_OUTSTANDING, sizeof(struct sq_rec));
	if (!qp->buf || !qp->dbrec || !qp->bf || !qp->sq_wrid || !qp->sq_bbs || !qp->rq_wrid ||
	    !qp->out) {
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	qp->rq_buf = qp->buf;
	qp->sq_buf = qp->buf + rq_bytes;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);

	qp->qp.context = pd->context;
	qp->qp.qp_context = ia->qp_context;
	qp->qp.pd = pd;
	qp->qp.send_cq = ia->send_cq;
	qp->qp.recv_cq = ia->recv_cq;
	qp->qp.srq = ia->srq;
	qp->qp.qp_type = ia->qp_type;
	qp->qp.state = IBV_QPS_RESET;
	qp->state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);

	ia->cap.max_send_wr = qp->max_send_wr;
	ia->cap.max_recv_wr = qp->max_recv_wr;
	ia->cap.max_send_sge = qp->max_send_sge;
	ia->cap.max_recv_sge = qp->max_recv_sge;
	ia->cap.max_inline_data = qp->max_inline;

	pthread_mutex_lock(&sc->lock);
	for (;;) {
		uint32_t n = sc->next_qpn++ & 0xffffff;
		if (n >= 0x100 && !qp_tabs[sc->index][n & (QP_TAB_SIZE - 1)]) {
			qp->qpn = n;
			break;
		}
	}
	qp->qp.qp_num = dc_type == SIM_DCT ? 0 : qp->qpn;   /* a DCT is numbered at RTR */
	qp->qp.handle = qp->qpn;
	qp_tabs[sc->index][qp->qpn & (QP_TAB_SIZE - 1)] = qp;
	qp->next = sc->qps;
	sc->qps = qp;
	pthread_mutex_unlock(&sc->lock);
	pd_get(pd);
	sim_count_obj(SIM_OBJ_QPS, 1);
	qp->model_bytes = sizeof(*qp) + qp->buf_size + 64 + 4096 +
			  MAX(qp->sq_wqe_cnt, 1u) * (sizeof(uint64_t) + sizeof(uint16_t)) +
			  MAX(qp->rq_wqe_cnt, 1u) * sizeof(uint64_t) +
			  SIM_MAX_OUTSTANDING * sizeof(struct sq_rec);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, (int64_t)qp->model_bytes);
	TRACE("create qp 0x%x: sq wqe_cnt %u at +%zu, rq wqe_cnt %u stride %u, max_inline %u",
	      qp->qpn, qp->sq_wqe_cnt, rq_bytes, qp->rq_wqe_cnt, qp->rq_stride, qp->max_inline);
	return &qp->qp;
}

SIM_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	return rvxsim_priv_create_qp(pd, ia, 0);
}

SIM_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sim_qp *qp = to_sqp(ibqp);
	struct sim_ctx *sc = qp->sc;
	struct sim_qp **pp;

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	for (pp = &sc->qps; *pp; pp = &(*pp)->next)
		if (*pp == qp) {
			*pp = qp->next;
			break;
		}
	qp_tabs[sc->index][qp->qpn & (QP_TAB_SIZE - 1)] = NULL;
	pthread_mutex_unlock(&sc->lock);
	free(qp->tx_data);
	pd_put(ibqp->pd);
	sim_count_obj(SIM_OBJ_QPS, -1);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)qp->model_bytes);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	qp_free(qp);
	return 0;
}

/* The kernel's table of required and optional attributes for RC transitions. */
static int check_mask(int cur, int next, int mask, char *why, size_t n)
{
	int req = 0, opt = 0;

	mask &= ~IBV_QP_STATE;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		if (mask & ~IBV_QP_CUR_STATE) {
			snprintf(why, n, "attributes 0x%x are not allowed in this transition",
				 mask & ~IBV_QP_CUR_STATE);
			return EINVAL;
		}
		return 0;
	}
	switch (cur) {
	case IBV_QPS_RESET:
		if (next != IBV_QPS_INIT)
			goto bad;
		req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		} else if (next == IBV_QPS_RTR) {
			req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		} else {
			goto bad;
		}
		break;
	case IBV_QPS_RTR:
		if (next != IBV_QPS_RTS)
			goto bad;
		req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		      IBV_QP_MAX_QP_RD_ATOMIC;
		opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
		      IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE | IBV_QP_RATE_LIMIT;
		break;
	case IBV_QPS_RTS:
		if (next != IBV_QPS_RTS)
			goto bad;
		opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
		      IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_RATE_LIMIT;
		break;
	default:
		goto bad;
	}
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
bad:
	snprintf(why, n, "not a valid transition for an RC QP");
	return EINVAL;
}

static const char *state_name(int s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	return s >= 0 && s <= 6 ? n[s] : "unknown";
}

static uint16_t gid_to_lid(const union ibv_gid *g)
{
	return (uint16_t)(g->raw[14] << 8 | g->raw[15]);
}

SIM_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct sim_qp *qp = to_sqp(ibqp);
	struct sim_ctx *sc = qp->sc;
	int cur, next, err = 0;
	char why[160] = "";

	sim_count_verb();
	pthread_mutex_lock(&sc->lock);
	cur = qp->state;
	next = (mask & IBV_QP_STATE) ? (int)a->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != (enum ibv_qp_state)cur) {
		snprintf(why, sizeof(why), "cur_qp_state %s is not the QP's state",
			 state_name(a->cur_qp_state));
		err = EINVAL;
	}
	if (!err)
		err = qp->dc_type ? dc_check_mask(qp, cur, next, mask, why, sizeof(why)) :
		      qp->type == IBV_QPT_UD ? sim_ud_check_mask(cur, next, mask, why, sizeof(why)) :
		      check_mask(cur, next, mask, why, sizeof(why));
	if (!err && (mask & IBV_QP_PORT) && a->port_num != 1)
		err = EINVAL, snprintf(why, sizeof(why), "port_num %u (the device has port 1)", a->port_num);
	if (!err && (mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= 128)
		err = EINVAL, snprintf(why, sizeof(why), "pkey_index %u out of range", a->pkey_index);
	if (!err && (mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SIM_MAX_RD_ATOMIC)
		err = EINVAL, snprintf(why, sizeof(why), "max_rd_atomic %u over %u", a->max_rd_atomic,
				       SIM_MAX_RD_ATOMIC);
	if (!err && (mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SIM_MAX_RD_ATOMIC)
		err = EINVAL, snprintf(why, sizeof(why), "max_dest_rd_atomic %u over %u",
				       a->max_dest_rd_atomic, SIM_MAX_RD_ATOMIC);
	if (!err && (mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		err = EINVAL, snprintf(why, sizeof(why), "path_mtu %d", a->path_mtu);
	if (!err && (mask & IBV_QP_AV)) {
		if (sim_env.link_eth && !a->ah_attr.is_global)
			err = EINVAL, snprintf(why, sizeof(why), "RoCE needs ah_attr.is_global = 1");
		else if (!sim_env.link_eth && !a->ah_attr.is_global && a->ah_attr.dlid == 0 &&
			 !qp->dc_type)   /* a DC QP's AV gives the port and path, not a peer */
			err = EINVAL, snprintf(why, sizeof(why), "ah_attr.dlid 0");
		else if (a->ah_attr.port_num && a->ah_attr.port_num != 1)
			err = EINVAL, snprintf(why, sizeof(why), "ah_attr.port_num %u", a->ah_attr.port_num);
	}
	if (!err && (mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		err = EINVAL, snprintf(why, sizeof(why), "dest_qp_num 0x%x", a->dest_qp_num);
	if (err) {
		pthread_mutex_unlock(&sc->lock);
		sim_log("rvxsim: qp 0x%x: ibv_modify_qp %s -> %s (mask 0x%x): %s", qp->qpn,
			state_name(cur), state_name(next), mask, why);
		return err;
	}
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = a->port_num;
	if (mask & IBV_QP_AV) {
		qp->attr.ah_attr = a->ah_attr;
		if (a->ah_attr.is_global)
			qp->attr.ah_attr.dlid = gid_to_lid(&a->ah_attr.grh.dgid);
		fabric_forget_peer(sc, qp->attr.ah_attr.dlid);
	}
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = a->path_mtu;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = a->qkey;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		qp->attr.retry_cnt = a->retry_cnt;
		qp->retry_left = a->retry_cnt;
	}
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = a->rnr_retry;
		qp->rnr_left = a->rnr_retry;
	}
	if (mask & IBV_QP_ALT_PATH) {
		qp->attr.alt_ah_attr = a->alt_ah_attr;
		qp->attr.alt_pkey_index = a->alt_pkey_index;
		qp->attr.alt_port_num = a->alt_port_num;
		qp->attr.alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = a->path_mig_state;
	if (next == IBV_QPS_RESET) {
		engine_qp_reset(qp);
		qp->sw_sq_pi = qp->sw_sq_tail = 0;
		qp->sw_rq_head = qp->sw_rq_tail = 0;
		qp->sw_bf_off = 0;
	} else if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		engine_qp_to_err(qp);
	}
	/* message sequence numbers start at the PSNs the two sides exchanged */
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		qp->exp_seq = qp->attr.rq_psn;
		qp->rx_dead = false;
	}
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR)
		qp->next_seq = qp->attr.sq_psn;
	qp->state = next;
	ibqp->state = next;
	qp->attr.qp_state = next;
	if (qp->dc_type)
		dc_modified(qp, cur, next);
	pthread_mutex_unlock(&sc->lock);
	if (next == IBV_QPS_RESET) {
		cq_clean(to_scq(ibqp->recv_cq), qp);
		if (ibqp->send_cq != ibqp->recv_cq)
			cq_clean(to_scq(ibqp->send_cq), qp);
	}
	TRACE("qp 0x%x: modify %d -> %d (mask 0x%x)", qp->qpn, cur, next, mask);
	engine_kick(sc);
	return 0;
}

SIM_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
			    struct ibv_qp_init_attr *ia)
{
	struct sim_qp *qp = to_sqp(ibqp);

	sim_count_verb();
	(void)mask;
	pthread_mutex_lock(&qp->sc->lock);
	*a = qp->attr;
	a->qp_state = qp->state;
	a->cur_qp_state = qp->state;
	a->cap.max_send_wr = qp->max_send_wr;
	a->cap.max_recv_wr = qp->max_recv_wr;
	a->cap.max_send_sge = qp->max_send_sge;
	a->cap.max_recv_sge = qp->max_recv_sge;
	a->cap.max_inline_data = qp->max_inline;
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->qp_context = ibqp->qp_context;
		ia->send_cq = ibqp->send_cq;
		ia->recv_cq = ibqp->recv_cq;
		ia->srq = ibqp->srq;
		ia->cap = a->cap;
		ia->qp_type = ibqp->qp_type;
		ia->sq_sig_all = qp->sq_sig_all;
	}
	pthread_mutex_unlock(&qp->sc->lock);
	return 0;
}

SIM_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp; (void)op; (void)flags;
	return 0;
}

static int post_send_op(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sim_qp *qp = to_sqp(ibqp);

	if (qp->dc_type) {     /* libmlx5 sends through a DCI with ibv_wr_* and mlx5dv_wr_set_dc_addr */
		sim_unsupported("ibv_post_send on a DC QP");
		*bad = wr;
		return EOPNOTSUPP;
	}
	return sim_post_send(qp, wr, bad, NULL);
}

/* A DCI's address segment as mlx5dv_wr_set_dc_addr writes it: the AH's 48-byte address vector
 * with the DCT number (extended form) and the DC access key. */
static void dc_wr_addr(const struct sim_wr_dc *a, uint8_t *seg)
{
	struct mlx5_wqe_datagram_seg *d = (void *)seg;
	const struct sim_ah *ah = (const struct sim_ah *)a->ah;

	memcpy(&d->av, ah->av, sizeof(d->av));
	d->av.dqp_dct = (d->av.dqp_dct & htobe32(0xff000000u)) |
			htobe32(MLX5_EXTENDED_UD_AV | (a->dctn & 0xffffff));
	d->av.key.dc_key = htobe64(a->key);
}

/* Builds one mlx5 WQE per work request, as libmlx5 does, then rings the doorbell. */
int sim_post_send(struct sim_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad,
		  const struct sim_wr_dc *dc)
{
	uint8_t w[SIM_MAX_WQE_SIZE];
	uint32_t mask = qp->sq_wqe_cnt - 1;
	int nreq = 0, err = 0;
	uint32_t last_ds = 0, last_pi = 0;
	bool last_inline = false;

	pthread_spin_lock(&qp->sq_lock);
	if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR) {
		err = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next, nreq++) {
		uint8_t opcode;
		uint32_t ds, bbs, off = 16, imm = 0;
		bool is_inline = false;
		uint8_t fm_ce_se = 0;

		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE: opcode = MLX5_OPCODE_RDMA_WRITE; break;
		case IBV_WR_RDMA_WRITE_WITH_IMM: opcode = MLX5_OPCODE_RDMA_WRITE_IMM; imm = wr->imm_data; break;
		case IBV_WR_SEND: opcode = MLX5_OPCODE_SEND; break;
		case IBV_WR_SEND_WITH_IMM: opcode = MLX5_OPCODE_SEND_IMM; imm = wr->imm_data; break;
		case IBV_WR_RDMA_READ: opcode = MLX5_OPCODE_RDMA_READ; break;
		case IBV_WR_ATOMIC_CMP_AND_SWP: opcode = MLX5_OPCODE_ATOMIC_CS; break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD: opcode = MLX5_OPCODE_ATOMIC_FA; break;
		default:
			err = EINVAL;
			*bad = wr;
			goto out;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge) {
			err = EINVAL;
			*bad = wr;
			goto out;
		}
		memset(w, 0, 48);
		if (qp->type == IBV_QPT_UD) {
			if (opcode != MLX5_OPCODE_SEND && opcode != MLX5_OPCODE_SEND_IMM) {
				err = EINVAL;
				*bad = wr;
				goto out;
			}
			sim_ud_wr_dgram(wr, w + off);
			off += 48;
		} else if (qp->dc_type == SIM_DCI) {
			if (!dc || !dc[nreq].ah) {
				err = EINVAL;
				*bad = wr;
				goto out;
			}
			dc_wr_addr(&dc[nreq], w + off);
			off += 48;
		}
		if (opcode == MLX5_OPCODE_RDMA_WRITE || opcode == MLX5_OPCODE_RDMA_WRITE_IMM ||
		    opcode == MLX5_OPCODE_RDMA_READ || opcode == MLX5_OPCODE_ATOMIC_CS ||
		    opcode == MLX5_OPCODE_ATOMIC_FA) {
			struct mlx5_wqe_raddr_seg *r = (void *)(w + off);
			bool atomic = opcode == MLX5_OPCODE_ATOMIC_CS || opcode == MLX5_OPCODE_ATOMIC_FA;
			r->raddr = htobe64(atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr);
			r->rkey = htobe32(atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey);
			r->reserved = 0;
			off += 16;
			if (atomic) {
				struct mlx5_wqe_atomic_seg *as = (void *)(w + off);
				if (opcode == MLX5_OPCODE_ATOMIC_CS) {
					as->swap_add = htobe64(wr->wr.atomic.swap);
					as->compare = htobe64(wr->wr.atomic.compare_add);
				} else {
					as->swap_add = htobe64(wr->wr.atomic.compare_add);
					as->compare = 0;
				}
				off += 16;
				if (wr->num_sge != 1 || wr->sg_list[0].length != 8 ||
				    (wr->send_flags & IBV_SEND_INLINE)) {
					err = EINVAL;
					*bad = wr;
					goto out;
				}
			}
		}
		if ((wr->send_flags & IBV_SEND_INLINE) && opcode != MLX5_OPCODE_RDMA_READ) {
			uint32_t len = 0;
			uint8_t *p = w + off + 4;
			for (int i = 0; i < wr->num_sge; i++)
				len += wr->sg_list[i].length;
			if (len > (qp->dc_type == SIM_DCI ? SIM_MAX_WQE_SIZE - off - 4 : qp->max_inline)) {
				err = ENOMEM;
				*bad = wr;
				goto out;
			}
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
			if (len) {
				struct mlx5_wqe_inl_data_seg *is = (void *)(w + off);
				is->byte_count = htobe32(len | MLX5_INLINE_SEG);
				uint32_t seg = ALIGN_UP(4 + len, 16);
				memset(w + off + 4 + len, 0, seg - 4 - len);
				off += seg;
			}
			is_inline = true;
		} else {
			for (int i = 0; i < wr->num_sge; i++) {
				struct mlx5_wqe_data_seg *d = (void *)(w + off);
				if (!wr->sg_list[i].length)
					continue;
				d->byte_count = htobe32(wr->sg_list[i].length);
				d->lkey = htobe32(wr->sg_list[i].lkey);
				d->addr = htobe64(wr->sg_list[i].addr);
				off += 16;
			}
		}
		ds = off / 16;
		bbs = (off + 63) / 64;
		if (qp->sw_sq_pi + bbs - qp->sw_sq_tail > qp->sq_wqe_cnt) {
			err = ENOMEM;
			*bad = wr;
			goto out;
		}
		if ((wr->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
			fm_ce_se |= MLX5_WQE_CTRL_CQ_UPDATE;
		if (wr->send_flags & IBV_SEND_SOLICITED)
			fm_ce_se |= MLX5_WQE_CTRL_SOLICITED;
		if (wr->send_flags & IBV_SEND_FENCE)
			fm_ce_se |= MLX5_WQE_CTRL_FENCE;
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, qp->sw_sq_pi & 0xffff, opcode, 0,
				    qp->qpn, fm_ce_se, ds, 0, imm);
		/* copy WQEBB by WQEBB: a WQE that reaches the end continues at the start */
		for (uint32_t b = 0; b < bbs; b++) {
			uint32_t n = MIN(64u, off - b * 64);
			memcpy(qp->sq_buf + (((qp->sw_sq_pi + b) & mask) << 6), w + b * 64, n);
		}
		qp->sq_wrid[qp->sw_sq_pi & mask] = wr->wr_id;
		qp->sq_bbs[qp->sw_sq_pi & mask] = bbs;
		last_pi = qp->sw_sq_pi;
		last_ds = ds;
		last_inline = is_inline;
		qp->sw_sq_pi += bbs;
	}
out:
	if (nreq) {
		uint8_t *ctrl = qp->sq_buf + ((last_pi & mask) << 6);
		uint8_t *reg = qp->bf + qp->sw_bf_off;

		atomic_thread_fence(memory_order_release);
		qp->dbrec[MLX5_SND_DBR] = htobe32(qp->sw_sq_pi & 0xffff);
		atomic_thread_fence(memory_order_seq_cst);
		if (nreq == 1 && last_inline && last_ds > 1 && last_ds <= SIM_BF_SIZE / 16) {
			/* BlueFlame: the whole WQE, 64 bytes at a time in ascending 8-byte stores */
			uint32_t len = ALIGN_UP(last_ds * 16, 64);
			for (uint32_t o = 0; o < len; o += 8) {
				uint8_t *src = qp->sq_buf + (((last_pi + o / 64) & mask) << 6) + o % 64;
				*(volatile uint64_t *)(reg + o) = *(uint64_t *)src;
			}
		} else {
			*(volatile uint64_t *)reg = *(uint64_t *)ctrl;
		}
		atomic_thread_fence(memory_order_seq_cst);
		qp->sw_bf_off ^= SIM_BF_SIZE;
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (nreq)
		engine_progress(qp->sc);
	return err;
}

static void write_recv_segs(uint8_t *wqe, uint32_t max, struct ibv_recv_wr *wr)
{
	struct mlx5_wqe_data_seg *d = (void *)wqe;
	uint32_t j = 0;

	for (int i = 0; i < wr->num_sge; i++) {
		if (!wr->sg_list[i].length)
			continue;
		mlx5dv_set_data_seg(&d[j++], wr->sg_list[i].length, wr->sg_list[i].lkey,
				    wr->sg_list[i].addr);
	}
	if (j < max) {
		d[j].byte_count = 0;
		d[j].lkey = htobe32(MLX5_INVALID_LKEY);
		d[j].addr = 0;
	}
}

static int post_recv_op(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sim_qp *qp = to_sqp(ibqp);
	int err = 0, n = 0;

	/* a QP in RESET takes no receive (libmlx5's mlx5_post_recv; rdma-core's tests,
	 * post_rq_state_bad_flow, expect EINVAL); from INIT on it does */
	if (qp->srq || qp->state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->rq_lock);
	for (; wr; wr = wr->next, n++) {
		uint32_t slot;
		if (qp->sw_rq_head - qp->sw_rq_tail >= qp->rq_wqe_cnt) {
			err = ENOMEM;
			*bad = wr;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_recv_sge) {
			err = EINVAL;
			*bad = wr;
			break;
		}
		slot = qp->sw_rq_head & (qp->rq_wqe_cnt - 1);
		write_recv_segs(qp->rq_buf + (size_t)slot * qp->rq_stride, qp->rq_stride / 16, wr);
		qp->rq_wrid[slot] = wr->wr_id;
		qp->sw_rq_head++;
	}
	if (n) {
		atomic_thread_fence(memory_order_release);
		qp->dbrec[MLX5_RCV_DBR] = htobe32(qp->sw_rq_head & 0xffff);
	}
	pthread_spin_unlock(&qp->rq_lock);
	return err;
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
	if (mask & IBV_SRQ_MAX_WR) {
		sim_unsupported("ibv_modify_srq(IBV_SRQ_MAX_WR)");
		return EOPNOTSUPP;
	}
	if (mask & IBV_SRQ_LIMIT) {
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
	sim_count_obj(SIM_OBJ_SRQ_WQES, -(int64_t)s->wqe_cnt);
	sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)srq_bytes(s));
	free(s->buf);
	free(s->dbrec);
	free(s->wrid);
	pthread_spin_destroy(&s->lock);
	free(s);
	return 0;
}

static int post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sim_srq *s = to_ssrq(srq);
	int err = 0, n = 0;

	pthread_spin_lock(&s->lock);
	for (; wr; wr = wr->next, n++) {
		uint8_t *wqe;
		struct mlx5_wqe_srq_next_seg *next;
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->max_gs) {
			err = EINVAL;
			*bad = wr;
			break;
		}
		if (s->head == s->tail) {
			err = ENOMEM;   /* the last free WQE links the list; it is never used */
			*bad = wr;
			break;
		}
		wqe = s->buf + (size_t)s->head * s->stride;
		next = (void *)wqe;
		s->wrid[s->head] = wr->wr_id;
		write_recv_segs(wqe + 16, s->max_gs, wr);
		s->head = be16toh(next->next_wqe_index);
		s->counter++;
	}
	if (n) {
		atomic_thread_fence(memory_order_release);
		*s->dbrec = htobe32(s->counter);
	}
	pthread_spin_unlock(&s->lock);
	return err;
}

/* ------------------------------------------------------------------ AH */

SIM_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sim_ah *ah;

	sim_count_verb();
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

/* ------------------------------------------------------------------ poll CQ */

static enum ibv_wc_status synd_to_status(uint8_t s)
{
	switch (s) {
	case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: return IBV_WC_LOC_LEN_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: return IBV_WC_LOC_QP_OP_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: return IBV_WC_LOC_PROT_ERR;
	case MLX5_CQE_SYNDROME_WR_FLUSH_ERR: return IBV_WC_WR_FLUSH_ERR;
	case MLX5_CQE_SYNDROME_MW_BIND_ERR: return IBV_WC_MW_BIND_ERR;
	case MLX5_CQE_SYNDROME_BAD_RESP_ERR: return IBV_WC_BAD_RESP_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: return IBV_WC_LOC_ACCESS_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR: return IBV_WC_REM_INV_REQ_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: return IBV_WC_REM_ACCESS_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_OP_ERR: return IBV_WC_REM_OP_ERR;
	case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: return IBV_WC_RETRY_EXC_ERR;
	case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: return IBV_WC_RNR_RETRY_EXC_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR: return IBV_WC_REM_ABORT_ERR;
	default: return IBV_WC_GENERAL_ERR;
	}
}

static void sq_complete(struct sim_qp *qp, uint16_t idx, struct ibv_wc *wc)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;
	uint32_t start = qp->sw_sq_tail + (uint16_t)(idx - (uint16_t)qp->sw_sq_tail);

	wc->wr_id = qp->sq_wrid[start & mask];
	qp->sw_sq_tail = start + qp->sq_bbs[start & mask];
}

static bool rq_complete(struct sim_qp *qp, uint16_t wqe_counter, struct ibv_wc *wc);

static struct mlx5_cqe64 *cqe64_at(struct sim_cq *cq, uint32_t i)
{
	return (void *)(cq->buf + (size_t)(i & (cq->cqe_cnt - 1)) * cq->cqe_size +
			(cq->cqe_size == 128 ? 64 : 0));
}

static bool cqe_ready(struct sim_cq *cq, uint32_t i)
{
	uint8_t op_own = *(volatile uint8_t *)&cqe64_at(cq, i)->op_own;
	return (op_own >> 4) != MLX5_CQE_INVALID &&
	       (op_own & MLX5_CQE_OWNER_MASK) == !!(i & cq->cqe_cnt);
}

/* A QP moved to RESET leaves no completion behind: libmlx5's modify_qp cleans its CQEs out of
 * the CQs it polls (mlx5_cq_clean: the later entries move up over them, the consumer index moves
 * past them, an SRQ gets its WQEs back), so a QP brought up again does not meet completions of
 * work from before. Not for a CQ whose buffer mlx5dv_init_obj gave out: its owner keeps the
 * consumer index, and cleaning it is the owner's business. */
static void cq_clean(struct sim_cq *cq, struct sim_qp *qp)
{
	uint32_t end, i, freed = 0;

	if (!cq || cq->direct)
		return;
	pthread_spin_lock(&cq->poll_lock);
	for (end = cq->cons_index; cqe_ready(cq, end) && end - cq->cons_index < cq->cqe_cnt; end++)
		;
	atomic_thread_fence(memory_order_acquire);
	for (i = end; i-- != cq->cons_index;) {
		struct mlx5_cqe64 *c = cqe64_at(cq, i);
		if ((be32toh(c->sop_drop_qpn) & 0xffffff) == qp->qpn) {
			uint8_t op = c->op_own >> 4;
			if (qp->srq && (op == MLX5_CQE_RESP_SEND || op == MLX5_CQE_RESP_SEND_IMM ||
					op == MLX5_CQE_RESP_WR_IMM || op == MLX5_CQE_RESP_ERR)) {
				struct ibv_wc w;
				rq_complete(qp, be16toh(c->wqe_counter), &w);
			}
			freed++;
		} else if (freed) {
			uint8_t *src = (uint8_t *)c - (cq->cqe_size == 128 ? 64 : 0);
			struct mlx5_cqe64 *d = cqe64_at(cq, i + freed);
			uint8_t owner = d->op_own & MLX5_CQE_OWNER_MASK;
			memcpy((uint8_t *)d - (cq->cqe_size == 128 ? 64 : 0), src, cq->cqe_size);
			d->op_own = (uint8_t)((d->op_own & ~MLX5_CQE_OWNER_MASK) | owner);
		}
	}
	if (freed) {
		cq->cons_index += freed;
		atomic_thread_fence(memory_order_release);
		cq->dbrec[0] = htobe32(cq->cons_index & 0xffffff);
	}
	pthread_spin_unlock(&cq->poll_lock);
}

static bool rq_complete(struct sim_qp *qp, uint16_t wqe_counter, struct ibv_wc *wc)
{
	if (qp->srq) {
		struct sim_srq *s = qp->srq;
		uint32_t idx = wqe_counter & (s->wqe_cnt - 1);
		pthread_spin_lock(&s->lock);
		wc->wr_id = s->wrid[idx];
		struct mlx5_wqe_srq_next_seg *t = (void *)(s->buf + (size_t)s->tail * s->stride);
		t->next_wqe_index = htobe16(idx);
		s->tail = idx;
		pthread_spin_unlock(&s->lock);
		return true;
	}
	if (!qp->rq_wqe_cnt)
		return false;
	wc->wr_id = qp->rq_wrid[qp->sw_rq_tail & (qp->rq_wqe_cnt - 1)];
	qp->sw_rq_tail++;
	return true;
}

static int poll_cq_op(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sim_cq *cq = to_scq(ibcq);
	struct sim_ctx *sc = to_sctx(ibcq->context);
	int got = 0;
	bool retried = false;

again:
	pthread_spin_lock(&cq->poll_lock);
	while (got < n) {
		uint8_t *e = cq->buf + (size_t)(cq->cons_index & (cq->cqe_cnt - 1)) * cq->cqe_size +
			     (cq->cqe_size == 128 ? 64 : 0);
		struct mlx5_cqe64 *c = (void *)e;
		uint8_t op_own = *(volatile uint8_t *)&c->op_own;
		uint8_t opcode = op_own >> 4;
		struct ibv_wc *w = &wc[got];
		struct sim_qp *qp;
		uint32_t qpn;

		if (opcode == MLX5_CQE_INVALID ||
		    (op_own & MLX5_CQE_OWNER_MASK) != !!(cq->cons_index & cq->cqe_cnt))
			break;
		atomic_thread_fence(memory_order_acquire);
		cq->cons_index++;
		qpn = be32toh(c->sop_drop_qpn) & 0xffffff;
		qp = qp_lookup(sc, qpn);
		if (!qp)
			continue;   /* a CQE of a destroyed QP */
		memset(w, 0, sizeof(*w));
		w->qp_num = qpn;
		switch (opcode) {
		case MLX5_CQE_REQ:
			sq_complete(qp, be16toh(c->wqe_counter), w);
			w->status = IBV_WC_SUCCESS;
			switch (be32toh(c->sop_drop_qpn) >> 24) {
			case MLX5_OPCODE_RDMA_WRITE:
			case MLX5_OPCODE_RDMA_WRITE_IMM:
				w->opcode = IBV_WC_RDMA_WRITE;
				break;
			case MLX5_OPCODE_RDMA_READ:
				w->opcode = IBV_WC_RDMA_READ;
				w->byte_len = be32toh(c->byte_cnt);
				break;
			case MLX5_OPCODE_ATOMIC_CS:
				w->opcode = IBV_WC_COMP_SWAP;
				w->byte_len = 8;
				break;
			case MLX5_OPCODE_ATOMIC_FA:
				w->opcode = IBV_WC_FETCH_ADD;
				w->byte_len = 8;
				break;
			case MLX5_OPCODE_ATOMIC_MASKED_CS:
				w->opcode = IBV_WC_COMP_SWAP;
				w->byte_len = 8;
				break;
			case MLX5_OPCODE_ATOMIC_MASKED_FA:
				w->opcode = IBV_WC_FETCH_ADD;
				w->byte_len = 8;
				break;
			default:
				w->opcode = IBV_WC_SEND;
				break;
			}
			break;
		case MLX5_CQE_RESP_SEND:
		case MLX5_CQE_RESP_SEND_IMM:
		case MLX5_CQE_RESP_WR_IMM: {
			uint32_t fr = be32toh(c->flags_rqpn);
			if (!rq_complete(qp, be16toh(c->wqe_counter), w))
				continue;
			w->status = IBV_WC_SUCCESS;
			w->byte_len = be32toh(c->byte_cnt);
			w->opcode = opcode == MLX5_CQE_RESP_WR_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
			if (opcode != MLX5_CQE_RESP_SEND) {
				w->imm_data = c->imm_inval_pkey;
				w->wc_flags |= IBV_WC_WITH_IMM;
			}
			w->src_qp = fr & 0xffffff;
			w->sl = (fr >> 24) & 0xf;
			if ((fr >> 28) & 3)
				w->wc_flags |= IBV_WC_GRH;
			w->slid = be16toh(c->slid);
			w->dlid_path_bits = c->ml_path & 0x7f;
			w->pkey_index = be32toh(c->imm_inval_pkey) & 0xffff;
			if (opcode != MLX5_CQE_RESP_SEND)
				w->pkey_index = 0;
			break;
		}
		case MLX5_CQE_REQ_ERR:
		case MLX5_CQE_RESP_ERR: {
			struct mlx5_err_cqe *ec = (void *)c;
			w->status = synd_to_status(ec->syndrome);
			w->vendor_err = ec->vendor_err_synd;
			if (opcode == MLX5_CQE_REQ_ERR) {
				sq_complete(qp, be16toh(ec->wqe_counter), w);
			} else if (!rq_complete(qp, be16toh(ec->wqe_counter), w)) {
				continue;
			}
			break;
		}
		default:
			continue;
		}
		got++;
	}
	cq->dbrec[0] /* SET_CI */ = htobe32(cq->cons_index & 0xffffff);
	/* The model's "hardware" needs a CPU: a poller that keeps finding nothing lets the engine
	 * thread run now and then, which matters when cores are fewer than spinning threads. */
	if (!got && (++cq->empty_polls & 63) == 0)
		sched_yield();
	pthread_spin_unlock(&cq->poll_lock);
	if (!got && !retried) {
		engine_progress(sc);
		retried = true;
		goto again;
	}
	return got;
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

/* Sharing objects between processes through a command fd has no meaning without a kernel. */
SIM_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	sim_unsupported("ibv_import_device");
	return NULL;
}

SIM_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	(void)ctx; (void)pd_handle;
	sim_unsupported("ibv_import_pd");
	return NULL;
}

SIM_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

SIM_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd; (void)mr_handle;
	sim_unsupported("ibv_import_mr");
	return NULL;
}

SIM_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

SIM_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	(void)ctx; (void)dm_handle;
	sim_unsupported("ibv_import_dm");
	return NULL;
}

SIM_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

SIM_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *ctx, struct ibv_ah_attr *attr,
					   uint8_t eth_mac[6], uint16_t *vid)
{
	(void)ctx; (void)attr; (void)eth_mac; (void)vid;
	sim_unsupported("ibv_resolve_eth_l2_from_gid");
	return EOPNOTSUPP;
}

/* These names have two versions, as in rdma-core: the default IBVERBS_1.1 entries defined above,
 * and IBVERBS_1.0 entries for binaries linked before 2006 (sim/abi.c). "@@@" binds each
 * definition to its default version and leaves no unversioned name for the map to claim. */
#ifdef SIM_VERSIONED
#define SIM_DEFAULT_1_1(name) __asm__(".symver " #name ", " #name "@@@IBVERBS_1.1");
#else
#define SIM_DEFAULT_1_1(name)
#endif
SIM_DEFAULT_1_1(ibv_ack_async_event)
SIM_DEFAULT_1_1(ibv_ack_cq_events)
SIM_DEFAULT_1_1(ibv_alloc_pd)
SIM_DEFAULT_1_1(ibv_attach_mcast)
SIM_DEFAULT_1_1(ibv_close_device)
SIM_DEFAULT_1_1(ibv_create_ah)
SIM_DEFAULT_1_1(ibv_create_cq)
SIM_DEFAULT_1_1(ibv_create_qp)
SIM_DEFAULT_1_1(ibv_create_srq)
SIM_DEFAULT_1_1(ibv_dealloc_pd)
SIM_DEFAULT_1_1(ibv_dereg_mr)
SIM_DEFAULT_1_1(ibv_destroy_ah)
SIM_DEFAULT_1_1(ibv_destroy_cq)
SIM_DEFAULT_1_1(ibv_destroy_qp)
SIM_DEFAULT_1_1(ibv_destroy_srq)
SIM_DEFAULT_1_1(ibv_detach_mcast)
SIM_DEFAULT_1_1(ibv_free_device_list)
SIM_DEFAULT_1_1(ibv_get_async_event)
SIM_DEFAULT_1_1(ibv_get_cq_event)
SIM_DEFAULT_1_1(ibv_get_device_guid)
SIM_DEFAULT_1_1(ibv_get_device_list)
SIM_DEFAULT_1_1(ibv_get_device_name)
SIM_DEFAULT_1_1(ibv_modify_qp)
SIM_DEFAULT_1_1(ibv_modify_srq)
SIM_DEFAULT_1_1(ibv_open_device)
SIM_DEFAULT_1_1(ibv_query_device)
SIM_DEFAULT_1_1(ibv_query_gid)
SIM_DEFAULT_1_1(ibv_query_pkey)
SIM_DEFAULT_1_1(ibv_query_port)
SIM_DEFAULT_1_1(ibv_query_qp)
SIM_DEFAULT_1_1(ibv_query_srq)
SIM_DEFAULT_1_1(ibv_reg_mr)
SIM_DEFAULT_1_1(ibv_resize_cq)
