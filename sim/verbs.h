/* rvxsim: what the libibverbs surface's files (verbs.c, objects.c, cq.c, qp.c, provider.c,
 * tables.c) share with each other and nothing else includes. */
#ifndef RVXSIM_VERBS_H
#define RVXSIM_VERBS_H
#include "internal.h"

/* verbs.c: MLX_{CQ,QP,SRQ}_ALLOC_TYPE=HUGE refused the way libmlx5 refuses it without huge pages */
bool huge_refused(const char *var);

/* objects.c */
struct ibv_pd *alloc_parent_domain_op(struct ibv_context *ctx,
				      struct ibv_parent_domain_init_attr *a);
struct ibv_mw *alloc_mw_op(struct ibv_pd *pd, enum ibv_mw_type type);
int dealloc_mw_op(struct ibv_mw *mw);
int bind_mw_op(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mb);
int advise_mr_op(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg_list, uint32_t num_sge);

/* cq.c */
int req_notify_op(struct ibv_cq *cq, int solicited);

/* qp.c */
uint16_t gid_to_lid(const union ibv_gid *g);

/* provider.c: the ops table's data path */
int post_send_op(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int post_recv_op(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int poll_cq_op(struct ibv_cq *cq, int n, struct ibv_wc *wc);
void cq_clean(struct sim_cq *cq, struct sim_qp *qp);

/* tables.c: QPs by number, MRs by key */
int sim_qp_tab_acquire(int index);
void sim_qp_tab_release(int index);
uint32_t sim_qp_tab_free_qpn(struct sim_ctx *sc);
void sim_qp_tab_set(struct sim_ctx *sc, uint32_t qpn, struct sim_qp *qp);
struct sim_qp *sim_qp_lookup_dev(struct sim_ctx *sc, uint32_t qpn);
uint32_t sim_mr_tab_slot(struct sim_ctx *sc);
void sim_mr_tab_clear(struct sim_ctx *sc, struct sim_mr *m);

/* The names with two versions, as in rdma-core: the default IBVERBS_1.1 entries bound here in the
 * file that defines each, the IBVERBS_1.0 entries for binaries linked before 2006 in abi.c. "@@@"
 * binds a definition to its default version and leaves no unversioned name for the map to claim.
 * (A harness that links the sources into one program leaves SIM_VERSIONED out.) */
#ifdef SIM_VERSIONED
#define SIM_DEFAULT_1_1(name) __asm__(".symver " #name ", " #name "@@@IBVERBS_1.1");
#else
#define SIM_DEFAULT_1_1(name)
#endif

#endif
