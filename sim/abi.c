/*
 * The rest of rdma-core 44's libibverbs ABI, so that every program and library built against it
 * (librdmacm, pyverbs, perftest) loads on the model:
 *   - the kernel-ABI marshalling helpers librdmacm calls (ibv_copy_*), done for real;
 *   - ibv_get_sysfs_path, the model's sysfs view;
 *   - the IBVERBS_1.0 entries of functions whose default is IBVERBS_1.1 (taken only by binaries
 *     linked before 2006, with the old structures): they fail with EOPNOTSUPP;
 *   - IBVERBS_PRIVATE_34, the interface between libibverbs and its kernel-driven providers
 *     (ibv_cmd_*, execute_ioctl, verbs_*): the model is its own provider and has no kernel to
 *     command, so these fail with EOPNOTSUPP, or do nothing where they return nothing.
 * Every refusal prints one `rvxsim: NAME: not supported by the model` line (sim_unsupported).
 * The stubs are declared here without their rdma-core parameter lists (they read none): on the
 * x86-64 and AArch64 calling conventions a caller's arguments are then simply unused.
 */
#include "internal.h"
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* ------------------------------------------------------------------ marshalling (librdmacm) */

SIM_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
SIM_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
SIM_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
SIM_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, 16);
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->qp_state = src->qp_state;
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/* The path record's scalar fields, the same names on both sides of the kernel boundary. */
#define PATH_REC_FIELDS(X) X(dlid) X(slid) X(raw_traffic) X(flow_label) X(hop_limit) \
	X(traffic_class) X(reversible) X(numb_path) X(pkey) X(sl) X(mtu_selector) X(mtu) \
	X(rate_selector) X(rate) X(packet_life_time_selector) X(packet_life_time) X(preference)
#define COPY_FIELD(f) dst->f = src->f;

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, 16);
	memcpy(dst->sgid.raw, src->sgid, 16);
	PATH_REC_FIELDS(COPY_FIELD)
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->dgid, src->dgid.raw, 16);
	memcpy(dst->sgid, src->sgid.raw, 16);
	PATH_REC_FIELDS(COPY_FIELD)
}

/* rdma-core answers its sysfs root ("/sys"); the model's devices live under the fabric
 * directory's sysfs view (sysfs.c), which is where their ibdev_path points. */
SIM_EXPORT const char *ibv_get_sysfs_path(void);
const char *ibv_get_sysfs_path(void)
{
	static char path[sizeof(sim_env.fabric_dir) + 8];

	sim_env_init();
	if (!path[0])
		snprintf(path, sizeof(path), "%s/sys", sim_env.fabric_dir);
	return path;
}

/* ------------------------------------------------------------------ refusals */

#define STUB_INT_AS(name, shown)                                                                   \
	SIM_EXPORT int name(void);                                                                 \
	int name(void) { sim_unsupported(shown); return EOPNOTSUPP; }
#define STUB_PTR_AS(name, shown)                                                                   \
	SIM_EXPORT void *name(void);                                                               \
	void *name(void) { sim_unsupported(shown); return NULL; }
#define STUB_VOID_AS(name, shown)                                                                  \
	SIM_EXPORT void name(void);                                                                \
	void name(void) { sim_unsupported(shown); }
#define STUB_INT(name) STUB_INT_AS(name, #name)
#define STUB_PTR(name) STUB_PTR_AS(name, #name)
#define STUB_VOID(name) STUB_VOID_AS(name, #name)
/* a non-default entry NAME@VER: a C name of its own bound to it (not listed in the map) */
#ifdef SIM_VERSIONED
#define COMPAT_AT(kind, name, ver)                                                                 \
	kind##_AS(rvxsim_compat_##name, #name "@" ver)                                             \
	__asm__(".symver rvxsim_compat_" #name ", " #name "@" ver);
#else
#define COMPAT_AT(kind, name, ver) kind##_AS(rvxsim_compat_##name, #name "@" ver)
#endif
#define COMPAT(kind, name) COMPAT_AT(kind, name, "IBVERBS_1.0")

COMPAT(STUB_VOID, ibv_ack_async_event)
COMPAT(STUB_VOID, ibv_ack_cq_events)
COMPAT(STUB_PTR, ibv_alloc_pd)
COMPAT(STUB_INT, ibv_attach_mcast)
COMPAT(STUB_INT, ibv_close_device)
COMPAT(STUB_PTR, ibv_create_ah)
COMPAT(STUB_PTR, ibv_create_cq)
COMPAT(STUB_PTR, ibv_create_qp)
COMPAT(STUB_PTR, ibv_create_srq)
COMPAT(STUB_INT, ibv_dealloc_pd)
COMPAT(STUB_INT, ibv_dereg_mr)
COMPAT(STUB_INT, ibv_destroy_ah)
COMPAT(STUB_INT, ibv_destroy_cq)
COMPAT(STUB_INT, ibv_destroy_qp)
COMPAT(STUB_INT, ibv_destroy_srq)
COMPAT(STUB_INT, ibv_detach_mcast)
COMPAT(STUB_VOID, ibv_free_device_list)
COMPAT(STUB_INT, ibv_get_async_event)
COMPAT(STUB_INT, ibv_get_cq_event)
COMPAT(STUB_INT, ibv_get_device_guid)   /* a __be64 GUID: 0 */
COMPAT(STUB_PTR, ibv_get_device_list)
COMPAT(STUB_PTR, ibv_get_device_name)
COMPAT(STUB_INT, ibv_modify_qp)
COMPAT(STUB_INT, ibv_modify_srq)
COMPAT(STUB_PTR, ibv_open_device)
COMPAT(STUB_INT, ibv_query_device)
COMPAT(STUB_INT, ibv_query_gid)
COMPAT(STUB_INT, ibv_query_pkey)
COMPAT(STUB_INT, ibv_query_port)
COMPAT(STUB_INT, ibv_query_qp)
COMPAT(STUB_INT, ibv_query_srq)
COMPAT(STUB_PTR, ibv_reg_mr)
COMPAT(STUB_INT, ibv_resize_cq)

/* the provider interface of IBVERBS_1.1 (providers before rdma-core 13) */
COMPAT_AT(STUB_VOID, ibv_register_driver, "IBVERBS_1.1")

/* IBVERBS_PRIVATE_34: what kernel-driven providers call */
STUB_INT(ibv_cmd_advise_mr)
STUB_INT(ibv_cmd_alloc_dm)
STUB_INT(ibv_cmd_alloc_mw)
STUB_INT(ibv_cmd_alloc_pd)
STUB_INT(ibv_cmd_attach_mcast)
STUB_INT(ibv_cmd_close_xrcd)
STUB_INT(ibv_cmd_create_ah)
STUB_INT(ibv_cmd_create_counters)
STUB_INT(ibv_cmd_create_cq)
STUB_INT(ibv_cmd_create_cq_ex)
STUB_INT(ibv_cmd_create_flow)
STUB_INT(ibv_cmd_create_flow_action_esp)
STUB_INT(ibv_cmd_create_qp)
STUB_INT(ibv_cmd_create_qp_ex2)
STUB_INT(ibv_cmd_create_qp_ex)
STUB_INT(ibv_cmd_create_rwq_ind_table)
STUB_INT(ibv_cmd_create_srq)
STUB_INT(ibv_cmd_create_srq_ex)
STUB_INT(ibv_cmd_create_wq)
STUB_INT(ibv_cmd_dealloc_mw)
STUB_INT(ibv_cmd_dealloc_pd)
STUB_INT(ibv_cmd_dereg_mr)
STUB_INT(ibv_cmd_destroy_ah)
STUB_INT(ibv_cmd_destroy_counters)
STUB_INT(ibv_cmd_destroy_cq)
STUB_INT(ibv_cmd_destroy_flow)
STUB_INT(ibv_cmd_destroy_flow_action)
STUB_INT(ibv_cmd_destroy_qp)
STUB_INT(ibv_cmd_destroy_rwq_ind_table)
STUB_INT(ibv_cmd_destroy_srq)
STUB_INT(ibv_cmd_destroy_wq)
STUB_INT(ibv_cmd_detach_mcast)
STUB_INT(ibv_cmd_free_dm)
STUB_INT(ibv_cmd_get_context)
STUB_INT(ibv_cmd_modify_cq)
STUB_INT(ibv_cmd_modify_flow_action_esp)
STUB_INT(ibv_cmd_modify_qp)
STUB_INT(ibv_cmd_modify_qp_ex)
STUB_INT(ibv_cmd_modify_srq)
STUB_INT(ibv_cmd_modify_wq)
STUB_INT(ibv_cmd_open_qp)
STUB_INT(ibv_cmd_open_xrcd)
STUB_INT(ibv_cmd_poll_cq)
STUB_INT(ibv_cmd_post_recv)
STUB_INT(ibv_cmd_post_send)
STUB_INT(ibv_cmd_post_srq_recv)
STUB_INT(ibv_cmd_query_context)
STUB_INT(ibv_cmd_query_device_any)
STUB_INT(ibv_cmd_query_mr)
STUB_INT(ibv_cmd_query_port)
STUB_INT(ibv_cmd_query_qp)
STUB_INT(ibv_cmd_query_srq)
STUB_INT(ibv_cmd_read_counters)
STUB_INT(ibv_cmd_reg_dm_mr)
STUB_INT(ibv_cmd_reg_dmabuf_mr)
STUB_INT(ibv_cmd_reg_mr)
STUB_INT(ibv_cmd_req_notify_cq)
STUB_INT(ibv_cmd_rereg_mr)
STUB_INT(ibv_cmd_resize_cq)
STUB_INT(execute_ioctl)
STUB_INT(__ioctl_final_num_attrs)
STUB_INT(ibv_read_ibdev_sysfs_file)
STUB_PTR(_verbs_init_and_alloc_context)
STUB_PTR(verbs_open_device)
STUB_VOID(verbs_set_ops)
STUB_VOID(verbs_init_cq)
STUB_VOID(verbs_uninit_context)
STUB_VOID(__verbs_log)

/* A provider library loaded beside the model (perftest links Debian's libefa, for one) registers
 * itself from its constructor: it is not an error, and its driver matches none of the model's
 * devices, so the registration is dropped without a line. */
SIM_EXPORT void verbs_register_driver_34(void);
void verbs_register_driver_34(void)
{
}

/* rdma-core's flag that lets destroy calls succeed after a device is unplugged */
SIM_EXPORT bool verbs_allow_disassociate_destroy;
