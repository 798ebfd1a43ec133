/*
 * The rest of rdma-core 44's libmlx5 ABI: the direct-verbs features the model does not have
 * (DEVX, flow steering and its DR API, device memory, mkeys and crypto, VAR/MSI allocation,
 * packet pacing, scheduling elements, LAG, VFIO, reserved QPNs, DCI streams, WQs). A program that
 * calls one sees what rdma-core 44 answers on a ConnectX-6 where the feature is off or DEVX is not
 * open (the model's mlx5dv_open_device refuses DEVX, and mlx5dv_query_device reports none of these
 * capabilities): NULL with errno EOPNOTSUPP, EOPNOTSUPP as the return value, -1 with errno for
 * the two calls that return a count or a descriptor, nothing for the destroy calls that return
 * nothing (their objects cannot exist). Each call prints one `rvxsim: NAME: not supported by the
 * model` line. The stubs read no arguments, so they are declared without rdma-core's parameter
 * lists (the callers' arguments are simply unused on the x86-64 and AArch64 conventions).
 */
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

/* not internal.h: it brings mlx5dv.h, whose prototypes these definitions do not repeat */
#define SIM_EXPORT __attribute__((visibility("default")))
void rvxsim_priv_unsupported(const char *verb);

#define STUB_INT(name)                                                                             \
	SIM_EXPORT int name(void);                                                                 \
	int name(void) { rvxsim_priv_unsupported(#name); errno = EOPNOTSUPP; return EOPNOTSUPP; }
#define STUB_NEG(name)                                                                             \
	SIM_EXPORT ssize_t name(void);                                                             \
	ssize_t name(void) { rvxsim_priv_unsupported(#name); errno = EOPNOTSUPP; return -1; }
#define STUB_PTR(name)                                                                             \
	SIM_EXPORT void *name(void);                                                               \
	void *name(void) { rvxsim_priv_unsupported(#name); errno = EOPNOTSUPP; return NULL; }
#define STUB_VOID(name)                                                                            \
	SIM_EXPORT void name(void);                                                                \
	void name(void) { rvxsim_priv_unsupported(#name); }

STUB_INT(_mlx5dv_mkey_check)
STUB_PTR(mlx5dv_alloc_dm)
STUB_PTR(mlx5dv_alloc_var)
STUB_PTR(mlx5dv_create_flow)
STUB_PTR(mlx5dv_create_flow_action_esp)
STUB_PTR(mlx5dv_create_flow_action_modify_header)
STUB_PTR(mlx5dv_create_flow_action_packet_reformat)
STUB_PTR(mlx5dv_create_flow_matcher)
STUB_PTR(mlx5dv_create_mkey)
STUB_PTR(mlx5dv_create_steering_anchor)
STUB_PTR(mlx5dv_create_wq)
STUB_INT(mlx5dv_crypto_login)
STUB_PTR(mlx5dv_crypto_login_create)
STUB_INT(mlx5dv_crypto_login_destroy)
STUB_INT(mlx5dv_crypto_login_query)
STUB_INT(mlx5dv_crypto_login_query_state)
STUB_INT(mlx5dv_crypto_logout)
STUB_INT(mlx5dv_dci_stream_id_reset)
STUB_PTR(mlx5dv_dek_create)
STUB_INT(mlx5dv_dek_destroy)
STUB_INT(mlx5dv_dek_query)
STUB_INT(mlx5dv_destroy_flow_matcher)
STUB_INT(mlx5dv_destroy_mkey)
STUB_INT(mlx5dv_destroy_steering_anchor)
STUB_PTR(mlx5dv_devx_alloc_msi_vector)
STUB_INT(mlx5dv_devx_cq_modify)
STUB_INT(mlx5dv_devx_cq_query)
STUB_PTR(mlx5dv_devx_create_cmd_comp)
STUB_PTR(mlx5dv_devx_create_eq)
STUB_PTR(mlx5dv_devx_create_event_channel)
STUB_VOID(mlx5dv_devx_destroy_cmd_comp)
STUB_INT(mlx5dv_devx_destroy_eq)
STUB_VOID(mlx5dv_devx_destroy_event_channel)
STUB_INT(mlx5dv_devx_free_msi_vector)
STUB_INT(mlx5dv_devx_general_cmd)
STUB_INT(mlx5dv_devx_get_async_cmd_comp)
STUB_NEG(mlx5dv_devx_get_event)
STUB_INT(mlx5dv_devx_ind_tbl_modify)
STUB_INT(mlx5dv_devx_ind_tbl_query)
STUB_PTR(mlx5dv_devx_obj_create)
STUB_INT(mlx5dv_devx_obj_destroy)
STUB_INT(mlx5dv_devx_obj_modify)
STUB_INT(mlx5dv_devx_obj_query)
STUB_INT(mlx5dv_devx_obj_query_async)
STUB_INT(mlx5dv_devx_qp_modify)
STUB_INT(mlx5dv_devx_qp_query)
STUB_INT(mlx5dv_devx_query_eqn)
STUB_INT(mlx5dv_devx_srq_modify)
STUB_INT(mlx5dv_devx_srq_query)
STUB_INT(mlx5dv_devx_subscribe_devx_event)
STUB_INT(mlx5dv_devx_subscribe_devx_event_fd)
STUB_INT(mlx5dv_devx_umem_dereg)
STUB_PTR(mlx5dv_devx_umem_reg)
STUB_PTR(mlx5dv_devx_umem_reg_ex)
STUB_INT(mlx5dv_devx_wq_modify)
STUB_INT(mlx5dv_devx_wq_query)
STUB_PTR(mlx5dv_dm_map_op_addr)
STUB_PTR(mlx5dv_dr_action_create_aso)
STUB_PTR(mlx5dv_dr_action_create_default_miss)
STUB_PTR(mlx5dv_dr_action_create_dest_array)
STUB_PTR(mlx5dv_dr_action_create_dest_devx_tir)
STUB_PTR(mlx5dv_dr_action_create_dest_ib_port)
STUB_PTR(mlx5dv_dr_action_create_dest_ibv_qp)
STUB_PTR(mlx5dv_dr_action_create_dest_root_table)
STUB_PTR(mlx5dv_dr_action_create_dest_table)
STUB_PTR(mlx5dv_dr_action_create_dest_vport)
STUB_PTR(mlx5dv_dr_action_create_drop)
STUB_PTR(mlx5dv_dr_action_create_flow_counter)
STUB_PTR(mlx5dv_dr_action_create_flow_meter)
STUB_PTR(mlx5dv_dr_action_create_flow_sampler)
STUB_PTR(mlx5dv_dr_action_create_modify_header)
STUB_PTR(mlx5dv_dr_action_create_packet_reformat)
STUB_PTR(mlx5dv_dr_action_create_pop_vlan)
STUB_PTR(mlx5dv_dr_action_create_push_vlan)
STUB_PTR(mlx5dv_dr_action_create_tag)
STUB_INT(mlx5dv_dr_action_destroy)
STUB_INT(mlx5dv_dr_action_modify_aso)
STUB_INT(mlx5dv_dr_action_modify_flow_meter)
STUB_INT(mlx5dv_dr_aso_other_domain_link)
STUB_INT(mlx5dv_dr_aso_other_domain_unlink)
STUB_VOID(mlx5dv_dr_domain_allow_duplicate_rules)
STUB_PTR(mlx5dv_dr_domain_create)
STUB_INT(mlx5dv_dr_domain_destroy)
STUB_VOID(mlx5dv_dr_domain_set_reclaim_device_memory)
STUB_INT(mlx5dv_dr_domain_sync)
STUB_PTR(mlx5dv_dr_matcher_create)
STUB_INT(mlx5dv_dr_matcher_destroy)
STUB_INT(mlx5dv_dr_matcher_set_layout)
STUB_PTR(mlx5dv_dr_rule_create)
STUB_INT(mlx5dv_dr_rule_destroy)
STUB_PTR(mlx5dv_dr_table_create)
STUB_INT(mlx5dv_dr_table_destroy)
STUB_INT(mlx5dv_dump_dr_domain)
STUB_INT(mlx5dv_dump_dr_matcher)
STUB_INT(mlx5dv_dump_dr_rule)
STUB_INT(mlx5dv_dump_dr_table)
STUB_VOID(mlx5dv_free_var)
STUB_PTR(mlx5dv_get_vfio_device_list)
STUB_INT(mlx5dv_map_ah_to_qp)
STUB_INT(mlx5dv_modify_qp_lag_port)
STUB_INT(mlx5dv_modify_qp_sched_elem)
STUB_INT(mlx5dv_modify_qp_udp_sport)
STUB_PTR(mlx5dv_pp_alloc)
STUB_VOID(mlx5dv_pp_free)
STUB_INT(mlx5dv_qp_cancel_posted_send_wrs)
STUB_INT(mlx5dv_query_qp_lag_port)
STUB_INT(mlx5dv_reserved_qpn_alloc)
STUB_INT(mlx5dv_reserved_qpn_dealloc)
STUB_PTR(mlx5dv_sched_leaf_create)
STUB_INT(mlx5dv_sched_leaf_destroy)
STUB_INT(mlx5dv_sched_leaf_modify)
STUB_PTR(mlx5dv_sched_node_create)
STUB_INT(mlx5dv_sched_node_destroy)
STUB_INT(mlx5dv_sched_node_modify)
STUB_NEG(mlx5dv_vfio_get_events_fd)
STUB_INT(mlx5dv_vfio_process_events)
