/*
 * t_abi: an ordinarily linked program loads the model's libibverbs.so.1 and
 * libmlx5.so.1, sees mlx5 devices, and gets the attributes a ConnectX reports.
 */
#include "simtest.h"
#include <dlfcn.h>
#include <link.h>
#include <rdma/ib_user_verbs.h>

/* Symbols and versions programs linked against rdma-core 44 bind to (facts section 6). */
static const struct { const char *name, *ver; } syms[] = {
	{ "ibv_get_device_list", "IBVERBS_1.1" }, { "ibv_free_device_list", "IBVERBS_1.1" },
	{ "ibv_get_device_name", "IBVERBS_1.1" }, { "ibv_open_device", "IBVERBS_1.1" },
	{ "ibv_close_device", "IBVERBS_1.1" }, { "ibv_query_device", "IBVERBS_1.1" },
	{ "ibv_query_port", "IBVERBS_1.1" }, { "ibv_query_gid", "IBVERBS_1.1" },
	{ "ibv_query_pkey", "IBVERBS_1.1" }, { "ibv_alloc_pd", "IBVERBS_1.1" },
	{ "ibv_dealloc_pd", "IBVERBS_1.1" }, { "ibv_reg_mr", "IBVERBS_1.1" },
	{ "ibv_dereg_mr", "IBVERBS_1.1" }, { "ibv_create_cq", "IBVERBS_1.1" },
	{ "ibv_destroy_cq", "IBVERBS_1.1" }, { "ibv_create_qp", "IBVERBS_1.1" },
	{ "ibv_modify_qp", "IBVERBS_1.1" }, { "ibv_query_qp", "IBVERBS_1.1" },
	{ "ibv_destroy_qp", "IBVERBS_1.1" }, { "ibv_create_ah", "IBVERBS_1.1" },
	{ "ibv_destroy_ah", "IBVERBS_1.1" }, { "ibv_get_cq_event", "IBVERBS_1.1" },
	{ "ibv_ack_cq_events", "IBVERBS_1.1" }, { "ibv_create_srq", "IBVERBS_1.1" },
	{ "ibv_destroy_srq", "IBVERBS_1.1" }, { "ibv_wc_status_str", "IBVERBS_1.1" },
	{ "ibv_get_async_event", "IBVERBS_1.1" }, { "ibv_ack_async_event", "IBVERBS_1.1" },
	{ "ibv_create_comp_channel", "IBVERBS_1.0" }, { "ibv_destroy_comp_channel", "IBVERBS_1.0" },
	{ "ibv_qp_to_qp_ex", "IBVERBS_1.6" }, { "ibv_reg_mr_iova", "IBVERBS_1.7" },
	{ "ibv_reg_mr_iova2", "IBVERBS_1.8" }, { "_ibv_query_gid_ex", "IBVERBS_1.11" },
	{ "mlx5dv_query_device", "MLX5_1.0" }, { "mlx5dv_init_obj", "MLX5_1.2" },
	{ "mlx5dv_init_obj", "MLX5_1.0" }, { "mlx5dv_create_cq", "MLX5_1.1" },
	{ "mlx5dv_create_qp", "MLX5_1.3" }, { "mlx5dv_open_device", "MLX5_1.7" },
	{ "mlx5dv_is_supported", "MLX5_1.8" }, { "mlx5dv_qp_ex_from_ibv_qp_ex", "MLX5_1.10" },
};

struct libs {
	char verbs[512], mlx5[512];
	int provider_plugin;     /* a real rdma-core provider (libmlx5-rdmav*.so) */
};

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct libs *l = data;
	const char *n = info->dlpi_name;
	const char *base;

	(void)size;
	if (!n || !*n)
		return 0;
	base = strrchr(n, '/');
	base = base ? base + 1 : n;
	if (!strcmp(base, "libibverbs.so.1"))
		snprintf(l->verbs, sizeof(l->verbs), "%s", n);
	else if (!strcmp(base, "libmlx5.so.1"))
		snprintf(l->mlx5, sizeof(l->mlx5), "%s", n);
	else if (!strncmp(base, "libmlx5-rdmav", 13))
		l->provider_plugin = 1;
	return 0;
}

static int from_build_sim(const char *path)
{
	char real[4096];

	if (!*path || !realpath(path, real))
		return 0;
	return strstr(real, "/build/sim/") != NULL;
}

/* Extended create attributes of a small RC QP on cq in pd. */
static void rc_attr_ex(struct ibv_qp_init_attr_ex *ix, struct ibv_cq *cq, struct ibv_pd *pd)
{
	memset(ix, 0, sizeof(*ix));
	ix->send_cq = ix->recv_cq = cq;
	ix->qp_type = IBV_QPT_RC;
	ix->cap.max_send_wr = ix->cap.max_recv_wr = 16;
	ix->cap.max_send_sge = ix->cap.max_recv_sge = 1;
	ix->comp_mask = IBV_QP_INIT_ATTR_PD;
	ix->pd = pd;
}

/* The rest of rdma-core 44's ABI is there (tests/t_sim_abi.sh compares the whole lists); what
 * the model lacks fails as rdma-core 44 answers when the feature is off: NULL or EOPNOTSUPP. */
static void unmodelled(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	uint32_t in[4] = { 0 }, out[4];
	void *(*list_1_0)(int *);
	void (*copy_qp)(struct ibv_qp_attr *, struct ib_uverbs_qp_attr *);

	st_ctx = "unmodelled";
	REQUIRE(ctx != NULL);
	errno = 0;
	CHECK(mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out)) == NULL && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(mlx5dv_dr_domain_create(ctx, MLX5DV_DR_DOMAIN_TYPE_NIC_RX) == NULL && errno == EOPNOTSUPP);
	CHECK_EQ(mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, sizeof(out)), EOPNOTSUPP);
	CHECK_EQ(mlx5dv_dci_stream_id_reset(NULL, 0), EOPNOTSUPP);
	/* UARs come without DEVX (the kernel's UAR object): a BlueFlame UAR is a page of its own
	 * each time, the non-cached one the context's single one; other flags EOPNOTSUPP */
	{
		struct mlx5dv_devx_uar *b1 = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_BF);
		struct mlx5dv_devx_uar *b2 = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_BF);
		struct mlx5dv_devx_uar *n1 = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
		struct mlx5dv_devx_uar *n2 = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
		if (CHECK(b1 && b2 && n1 && n2)) {
			CHECK(b1->base_addr != b2->base_addr && b1->page_id != b2->page_id);
			CHECK((uint8_t *)b1->reg_addr == (uint8_t *)b1->base_addr + 0x800);
			CHECK(((uintptr_t)b1->base_addr & 4095) == 0 && b1->comp_mask == 0);
			CHECK(n1 == n2 && n1->base_addr != b1->base_addr);
			mlx5dv_devx_free_uar(b1);
			mlx5dv_devx_free_uar(b2);
			mlx5dv_devx_free_uar(n1);
		}
		errno = 0;
		CHECK(mlx5dv_devx_alloc_uar(ctx, 2) == NULL && errno == EOPNOTSUPP);
	}
	/* an IBVERBS_1.0 entry (old structures) refuses; the default one is the working verb */
	list_1_0 = (void *(*)(int *))dlvsym(RTLD_DEFAULT, "ibv_get_device_list", "IBVERBS_1.0");
	if (CHECK(list_1_0 != NULL)) {
		errno = 0;
		CHECK(list_1_0(NULL) == NULL && errno == EOPNOTSUPP);
	}
	/* the marshalling librdmacm uses copies for real */
	copy_qp = (void (*)(struct ibv_qp_attr *, struct ib_uverbs_qp_attr *))dlvsym(
		RTLD_DEFAULT, "ibv_copy_qp_attr_from_kern", "IBVERBS_1.0");
	if (CHECK(copy_qp != NULL)) {
		struct ib_uverbs_qp_attr k;
		struct ibv_qp_attr a;
		memset(&k, 0, sizeof(k));
		memset(&a, 0xff, sizeof(a));
		k.qp_state = IBV_QPS_RTS;
		k.dest_qp_num = 0x1234;
		k.ah_attr.dlid = 0x55;
		k.ah_attr.grh.dgid[15] = 9;
		k.max_rd_atomic = 16;
		k.rnr_retry = 7;
		copy_qp(&a, &k);
		CHECK(a.qp_state == IBV_QPS_RTS && a.dest_qp_num == 0x1234 && a.ah_attr.dlid == 0x55 &&
		      a.ah_attr.grh.dgid.raw[15] == 9 && a.max_rd_atomic == 16 && a.rnr_retry == 7 &&
		      a.sq_psn == 0 && a.cap.max_inline_data == 0);
	}
	CHECK(ibv_close_device(ctx) == 0);
	st_ctx = NULL;
}

int main(int argc, char **argv)
{
	struct libs l;
	uint64_t guids[2] = { 0, 0 };
	uint16_t lids[2] = { 0, 0 };
	union ibv_gid gids[2];
	struct ibv_device **list;
	int n = -1, i;

	st_init("t_abi", 20);

	list = ibv_get_device_list(&n);
	if (!list || n <= 0)
		st_skip(ST_SKIP_NODEV);

	memset(&l, 0, sizeof(l));
	dl_iterate_phdr(phdr_cb, &l);
	CHECKF(from_build_sim(l.verbs), "libibverbs.so.1 loaded from '%s', not build/sim", l.verbs);
	CHECKF(from_build_sim(l.mlx5), "libmlx5.so.1 loaded from '%s', not build/sim", l.mlx5);
	CHECK(!l.provider_plugin);
	{
		unsigned k;
		for (k = 0; k < sizeof(syms) / sizeof(syms[0]); k++)
			CHECKF(dlvsym(RTLD_DEFAULT, syms[k].name, syms[k].ver) != NULL, "%s@%s is not exported",
			       syms[k].name, syms[k].ver);
	}

	/* Device list: mlx5_0 first, names "mlx5_<i>", NULL-terminated. */
	CHECK(n >= 1);
	CHECK(list[n] == NULL);
	for (i = 0; i < n; i++) {
		char want[32];
		snprintf(want, sizeof(want), "mlx5_%d", i);
		CHECKF(!strcmp(ibv_get_device_name(list[i]), want), "device %d is '%s'", i,
		       ibv_get_device_name(list[i]));
		CHECK(mlx5dv_is_supported(list[i]));
		CHECK(list[i]->transport_type == IBV_TRANSPORT_IB);
		CHECK(list[i]->node_type == IBV_NODE_CA);
	}
	{
		const char *nd = getenv("RVXSIM_NUM_DEVICES");
		if (nd && atoi(nd) > 0)
			CHECK_EQ(n, atoi(nd));
	}

	/* Open, query, close. */
	for (i = 0; i < n && i < 2; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr da;
		struct ibv_port_attr pa;
		union ibv_gid gid;
		__be16 pkey = 0;
		struct mlx5dv_context mc;
		const char *link = getenv("RVXSIM_LINK");
		int eth_wanted = link && !strcmp(link, "eth");

		REQUIRE(ctx != NULL);
		CHECK(ctx->device == list[i]);
		CHECK(ctx->ops.post_send != NULL);
		CHECK(ctx->ops.post_recv != NULL);
		CHECK(ctx->ops.poll_cq != NULL);
		CHECK(ctx->ops.req_notify_cq != NULL);
		CHECK(ctx->ops.post_srq_recv != NULL);

		memset(&da, 0, sizeof(da));
		REQUIRE(ibv_query_device(ctx, &da) == 0);
		CHECK_EQ(da.vendor_id, 0x02c9);            /* Mellanox */
		CHECK(da.phys_port_cnt >= 1);
		CHECK(da.atomic_cap == IBV_ATOMIC_HCA || da.atomic_cap == IBV_ATOMIC_GLOB);
		CHECK(da.max_qp > 0 && da.max_cq > 0 && da.max_mr > 0 && da.max_pd > 0);
		CHECK(da.max_qp_wr >= 1024);
		CHECK(da.max_cqe >= 1024);
		CHECK(da.max_sge >= 4);
		CHECK(da.max_srq > 0 && da.max_srq_wr > 0);
		CHECK(da.max_qp_rd_atom >= 1 && da.max_qp_init_rd_atom >= 1);
		CHECK(da.node_guid != 0);
		guids[i] = da.node_guid;
		CHECK(da.fw_ver[0] != 0);

		memset(&pa, 0, sizeof(pa));
		REQUIRE(ibv_query_port(ctx, 1, &pa) == 0);
		CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
		CHECK(pa.active_mtu >= IBV_MTU_1024 && pa.active_mtu <= pa.max_mtu);
		CHECK(pa.gid_tbl_len >= 1);
		CHECK(pa.pkey_tbl_len >= 1);
		if (eth_wanted) {
			CHECK_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
		} else {
			CHECK_EQ(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
			CHECK(pa.lid != 0 && pa.lid < 0xc000);   /* unicast LID */
			CHECK(pa.sm_lid != 0);
		}
		{
			struct ibv_port_attr p2;
			CHECK(ibv_query_port(ctx, 2, &p2) != 0 || da.phys_port_cnt >= 2);
		}

		/* an empty GID table entry: the zero GID by ibv_query_gid, ENODATA by
		 * ibv_query_gid_ex; past the table -1 and EINVAL; the table lists GID 0 alone */
		if (!eth_wanted) {
			struct ibv_gid_entry ge[8];
			CHECK_EQ(pa.gid_tbl_len, 8);
			memset(&gid, 0xff, sizeof(gid));
			CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0 && gid.global.subnet_prefix == 0 &&
			      gid.global.interface_id == 0);
			CHECK_EQ(ibv_query_gid_ex(ctx, 1, 1, &ge[0], 0), ENODATA);
			CHECK(ibv_query_gid(ctx, 1, 8, &gid) != 0);
			CHECK_EQ(ibv_query_gid_ex(ctx, 1, 8, &ge[0], 0), EINVAL);
			CHECK_EQ(ibv_query_gid_table(ctx, ge, 8, 0), 1);
			CHECK_EQ(ge[0].gid_index, 0);
		}
		lids[i] = pa.lid;
		REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
		gids[i] = gid;
		if (!eth_wanted) {
			/* Default GID: link-local subnet prefix fe80::/64 + port GUID. */
			CHECK(gid.raw[0] == 0xfe && gid.raw[1] == 0x80);
			CHECK(gid.global.interface_id != 0);
		} else {
			CHECK(gid.global.interface_id != 0 || gid.global.subnet_prefix != 0);
		}
		CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0);
		CHECK_EQ(be16toh(pkey), 0xffff);            /* default full-member pkey */

		memset(&mc, 0, sizeof(mc));
		mc.comp_mask = 0;
		CHECK(mlx5dv_query_device(ctx, &mc) == 0);
		CHECK_EQ(mc.comp_mask, 0);   /* nothing requested, nothing reported */

		/* QP capabilities through create: the libmlx5 RC sizing (facts section 1). */
		{
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
			struct ibv_qp_init_attr ia;
			struct ibv_qp *qp;
			struct mlx5dv_qp dq;
			struct mlx5dv_cq dc;
			struct mlx5dv_obj obj;

			REQUIRE(pd && cq);
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = ia.recv_cq = cq;
			ia.qp_type = IBV_QPT_RC;
			ia.cap.max_send_wr = 16;
			ia.cap.max_recv_wr = 16;
			ia.cap.max_send_sge = 1;
			ia.cap.max_recv_sge = 1;
			ia.cap.max_inline_data = 0;
			qp = ibv_create_qp(pd, &ia);
			REQUIRE(qp != NULL);
			CHECK_EQ(ia.cap.max_inline_data, 60);
			CHECK_EQ(ia.cap.max_send_wr, 16);
			CHECK(qp->qp_num != 0 && qp->qp_num <= 0xffffff);
			CHECK_EQ(qp->state, IBV_QPS_RESET);
			CHECK(qp->context == ctx && qp->pd == pd);

			memset(&obj, 0, sizeof(obj));
			memset(&dq, 0, sizeof(dq));
			memset(&dc, 0, sizeof(dc));
			obj.qp.in = qp;
			obj.qp.out = &dq;
			obj.cq.in = cq;
			obj.cq.out = &dc;
			CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) == 0);
			CHECK_EQ(dq.bf.size, 256);
			CHECK(dq.bf.reg != NULL);
			CHECKF((((uintptr_t)dq.bf.reg & 0xfff) >= 0x800) &&
			       ((((uintptr_t)dq.bf.reg & 0xfff) - 0x800) % 512) == 0,
			       "bf.reg %p is not at UAR + 0x800 + k * 512", dq.bf.reg);
			CHECK_EQ(dc.cqe_size, 64);
			CHECK(dc.cq_uar != NULL);

			CHECK(ibv_destroy_qp(qp) == 0);

			/* The extended entry points programs also use. */
			{
				struct ibv_device_attr_ex dax;
				struct ibv_qp_init_attr_ex ix;
				struct mlx5dv_qp_init_attr mx;
				struct mlx5dv_cq_init_attr mcx;
				struct ibv_cq_init_attr_ex cx;
				struct ibv_cq_ex *cqx;
				struct ibv_qp *q2;

				memset(&dax, 0, sizeof(dax));
				CHECK(ibv_query_device_ex(ctx, NULL, &dax) == 0);
				CHECK_EQ(dax.orig_attr.vendor_id, da.vendor_id);
				CHECK_EQ(dax.orig_attr.max_qp_wr, da.max_qp_wr);

				rc_attr_ex(&ix, cq, pd);
				q2 = ibv_create_qp_ex(ctx, &ix);
				if (CHECKF(q2 != NULL, "ibv_create_qp_ex: %s", strerror(errno))) {
					CHECK_EQ(ix.cap.max_inline_data, 60);
					CHECK(ibv_destroy_qp(q2) == 0);
				}

				rc_attr_ex(&ix, cq, pd);
				memset(&mx, 0, sizeof(mx));
				q2 = mlx5dv_create_qp(ctx, &ix, &mx);
				if (CHECKF(q2 != NULL, "mlx5dv_create_qp: %s", strerror(errno))) {
					CHECK_EQ(ix.cap.max_inline_data, 60);
					CHECK(ibv_destroy_qp(q2) == 0);
				}

				/* a 128-byte-CQE CQ through mlx5dv_create_cq */
				memset(&cx, 0, sizeof(cx));
				cx.cqe = 16;
				memset(&mcx, 0, sizeof(mcx));
				mcx.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
				mcx.cqe_size = 128;
				cqx = mlx5dv_create_cq(ctx, &cx, &mcx);
				if (CHECKF(cqx != NULL, "mlx5dv_create_cq: %s", strerror(errno))) {
					struct mlx5dv_cq d2;
					struct mlx5dv_obj o2;
					memset(&o2, 0, sizeof(o2));
					memset(&d2, 0, sizeof(d2));
					o2.cq.in = ibv_cq_ex_to_cq(cqx);
					o2.cq.out = &d2;
					CHECK(mlx5dv_init_obj(&o2, MLX5DV_OBJ_CQ) == 0);
					CHECK_EQ(d2.cqe_size, 128);
					CHECK_EQ(d2.cqe_cnt, 32);
					CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0);
				}
			}
			CHECK(ibv_destroy_cq(cq) == 0);
			CHECK(ibv_dealloc_pd(pd) == 0);
		}
		CHECK(ibv_close_device(ctx) == 0);
	}

	/* Two devices are two adapters: their own GUID, LID and GID. */
	if (n >= 2) {
		CHECK(guids[0] != guids[1]);
		CHECK(memcmp(gids[0].raw, gids[1].raw, 16) != 0);
		if (!getenv("RVXSIM_LINK"))
			CHECK(lids[0] != lids[1]);
	}

	/* A device can be opened twice; each context is independent. */
	{
		struct ibv_context *c1 = ibv_open_device(list[0]);
		struct ibv_context *c2 = ibv_open_device(list[0]);
		CHECK(c1 && c2 && c1 != c2);
		if (c1)
			CHECK(ibv_close_device(c1) == 0);
		if (c2)
			CHECK(ibv_close_device(c2) == 0);
	}

	unmodelled(list[0]);
	ibv_free_device_list(list);

	/* The model's configurations: two devices, and RoCE. */
	if (argc < 2 && !getenv("RVXSIM_NUM_DEVICES") && !getenv("RVXSIM_LINK")) {
		int rc = st_rerun(argv[0], 15000, "RVXSIM_NUM_DEVICES=2", NULL);
		CHECKF(rc == 0, "run with RVXSIM_NUM_DEVICES=2 exited with %d", rc);
		rc = st_rerun(argv[0], 15000, "RVXSIM_LINK=eth", NULL);
		CHECKF(rc == 0, "run with RVXSIM_LINK=eth exited with %d", rc);
	}
	st_exit();
	return 0;
}
