/* rvxsim_devinfo: ibv_devinfo-style description of the adapters, written as an ordinary verbs
 * program (it prints whatever libibverbs.so.1 it runs on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

static const char *mtu_str(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return "256";
	case IBV_MTU_512: return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	default: return "invalid";
	}
}

static const char *atomic_str(enum ibv_atomic_cap a)
{
	return a == IBV_ATOMIC_HCA ? "ATOMIC_HCA" : a == IBV_ATOMIC_GLOB ? "ATOMIC_GLOB" : "ATOMIC_NONE";
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n == 0) {
		fprintf(stderr, "No IB devices found\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr a;
		struct mlx5dv_context dv;
		uint64_t guid;

		if (!ctx || ibv_query_device(ctx, &a)) {
			fprintf(stderr, "cannot open %s\n", ibv_get_device_name(list[i]));
			return 1;
		}
		guid = be64toh(a.node_guid);
		printf("hca_id:\t%s\n", ibv_get_device_name(list[i]));
		printf("\ttransport:\t\t\t%s (%d)\n",
		       list[i]->transport_type == IBV_TRANSPORT_IB ? "InfiniBand" : "unknown",
		       list[i]->transport_type);
		printf("\tfw_ver:\t\t\t\t%s\n", a.fw_ver);
		printf("\tnode_guid:\t\t\t%04x:%04x:%04x:%04x\n", (unsigned)(guid >> 48) & 0xffff,
		       (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
		       (unsigned)guid & 0xffff);
		printf("\tvendor_id:\t\t\t0x%04x\n", a.vendor_id);
		printf("\tvendor_part_id:\t\t\t%u\n", a.vendor_part_id);
		printf("\thw_ver:\t\t\t\t0x%X\n", a.hw_ver);
		printf("\tphys_port_cnt:\t\t\t%u\n", a.phys_port_cnt);
		printf("\tmax_qp:\t\t\t\t%d\n", a.max_qp);
		printf("\tmax_qp_wr:\t\t\t%d\n", a.max_qp_wr);
		printf("\tmax_sge:\t\t\t%d\n", a.max_sge);
		printf("\tmax_cqe:\t\t\t%d\n", a.max_cqe);
		printf("\tmax_srq_wr:\t\t\t%d\n", a.max_srq_wr);
		printf("\tmax_qp_rd_atom:\t\t\t%d\n", a.max_qp_rd_atom);
		printf("\tatomic_cap:\t\t\t%s (%d)\n", atomic_str(a.atomic_cap), a.atomic_cap);
		memset(&dv, 0, sizeof(dv));
		if (mlx5dv_is_supported(list[i]) && !mlx5dv_query_device(ctx, &dv))
			printf("\tmlx5dv flags:\t\t\t0x%llx (CQE version %u)\n",
			       (unsigned long long)dv.flags, dv.version);
		for (int p = 1; p <= a.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			union ibv_gid gid;
			if (ibv_query_port(ctx, p, &pa))
				continue;
			printf("\t\tport:\t%d\n", p);
			printf("\t\t\tstate:\t\t\t%s (%d)\n", ibv_port_state_str(pa.state), pa.state);
			printf("\t\t\tmax_mtu:\t\t%s (%d)\n", mtu_str(pa.max_mtu), pa.max_mtu);
			printf("\t\t\tactive_mtu:\t\t%s (%d)\n", mtu_str(pa.active_mtu), pa.active_mtu);
			printf("\t\t\tsm_lid:\t\t\t%u\n", pa.sm_lid);
			printf("\t\t\tport_lid:\t\t%u\n", pa.lid);
			printf("\t\t\tport_lmc:\t\t0x%02x\n", pa.lmc);
			printf("\t\t\tlink_layer:\t\t%s\n",
			       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
			for (int g = 0; g < pa.gid_tbl_len; g++) {
				static const union ibv_gid zero;
				/* empty entries read as the zero GID; ibv_devinfo skips them too */
				if (ibv_query_gid(ctx, p, g, &gid) || !memcmp(&gid, &zero, sizeof(gid)))
					continue;
				printf("\t\t\tGID[%3d]:\t\t", g);
				for (int b = 0; b < 16; b += 2)
					printf("%02x%02x%s", gid.raw[b], gid.raw[b + 1], b < 14 ? ":" : "\n");
			}
		}
		printf("\n");
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return 0;
}
