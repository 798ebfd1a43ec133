/*
 * t_many_qps: many QPs on one device at once. BlueFlame registers may be shared
 * between QPs (facts, pitfall 4), so the hardware tells doorbells apart by the
 * QPN they carry. First one thread drives 64 QPs round-robin; then four threads
 * drive them, each owning every QP that shares its BlueFlame registers.
 */
#include "simtest.h"
#include <pthread.h>

#define NPAIR 32
#define NQP (2 * NPAIR)
#define ROUNDS 200
#define SLOT 64

static struct st_dev D;
static struct st_cq CQ[NQP];
static struct st_qp Q[NQP];
static struct st_mr M;
static int owner_of[NQP];

/* One inline WRITE from QP i into its own slot of M; returns the WQE index. */
static uint16_t post_write(int i, uint32_t round)
{
	struct st_wqe w;
	uint8_t v[SLOT];
	int k;

	for (k = 0; k < SLOT; k++)
		v[k] = (uint8_t)(i * 7 + round + k);
	st_wqe_begin(&w);
	st_wqe_raddr(&w, (uintptr_t)M.buf + (size_t)i * SLOT, M.mr->rkey);
	st_wqe_inline(&w, v, SLOT);
	return st_post(&Q[i], &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0,
		       (round & 1) ? ST_RING_BF : ST_RING_DB);
}

static int check_slot(int i, uint32_t round)
{
	uint8_t *p = (uint8_t *)M.buf + (size_t)i * SLOT;
	int k;
	for (k = 0; k < SLOT; k++)
		if (p[k] != (uint8_t)(i * 7 + round + k))
			return 0;
	return 1;
}

struct worker {
	int id;
	int fails;
};

static void *work(void *arg)
{
	struct worker *wk = arg;
	uint32_t r;
	int i;

	for (r = 0; r < ROUNDS; r++) {
		uint16_t idx[NQP];
		for (i = 0; i < NQP; i++)
			if (owner_of[i] == wk->id)
				idx[i] = post_write(i, r + 1000);
		for (i = 0; i < NQP; i++) {
			struct mlx5_cqe64 c;
			if (owner_of[i] != wk->id)
				continue;
			if (!st_cq_poll(&CQ[i], &c, 5000) || st_cqe_opcode(&c) != MLX5_CQE_REQ ||
			    st_cqe_wqe_counter(&c) != idx[i] || !check_slot(i, r + 1000)) {
				wk->fails++;
				return NULL;
			}
		}
	}
	return NULL;
}

int main(void)
{
	struct st_qp_attr a = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1,
				.max_recv_sge = 1, .max_inline = 64 };
	struct worker wk[4];
	pthread_t th[4];
	int i, nowner = 0, shared = 0;
	uint32_t r;

	st_init("t_many_qps", 60);
	st_dev_open(&D, 0);
	st_mr_alloc(&D, &M, (size_t)SLOT * NQP, ST_ACCESS_ALL);
	for (i = 0; i < NQP; i++) {
		st_cq_create(&D, &CQ[i], 16);
		st_qp_create(&D, &Q[i], &CQ[i], &CQ[i], &a);
	}
	for (i = 0; i < NPAIR; i++) {
		struct st_addr x, y;
		st_addr_of(&D, &Q[2 * i], &x);
		st_addr_of(&D, &Q[2 * i + 1], &y);
		st_qp_connect(&D, &Q[2 * i], &y);
		st_qp_connect(&D, &Q[2 * i + 1], &x);
	}

	/* Group QPs by BlueFlame register: a group is driven by one thread only. */
	for (i = 0; i < NQP; i++)
		owner_of[i] = -1;
	for (i = 0; i < NQP; i++) {
		int j;
		if (owner_of[i] >= 0)
			continue;
		owner_of[i] = nowner % 4;
		for (j = i + 1; j < NQP; j++)
			if (Q[j].dv.bf.reg == Q[i].dv.bf.reg) {
				owner_of[j] = owner_of[i];
				shared++;
			}
		nowner++;
	}
	st_note("%d QPs, %d distinct BlueFlame registers", NQP, nowner);

	/* One thread, round-robin: consecutive doorbells from different QPs. */
	st_ctx = "round-robin";
	for (r = 0; r < ROUNDS && !st_failures; r++) {
		uint16_t idx[NQP];
		for (i = 0; i < NQP; i++)
			idx[i] = post_write(i, r);
		for (i = 0; i < NQP; i++) {
			struct mlx5_cqe64 c;
			char b[200];
			if (!ST_POLL(&CQ[i], &c, 5000))
				break;
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ && st_cqe_wqe_counter(&c) == idx[i] &&
			       (st_cqe_sop_qpn(&c) & 0xffffff) == Q[i].qpn,
			       "QP %d round %u: %s", i, r, st_cqe_str(&c, b, sizeof(b)));
			CHECKF(check_slot(i, r), "QP %d round %u: data differs", i, r);
		}
	}

	/* Four threads at once. */
	st_ctx = "threads";
	if (!st_failures) {
		for (i = 0; i < 4; i++) {
			wk[i].id = i;
			wk[i].fails = 0;
			REQUIRE(pthread_create(&th[i], NULL, work, &wk[i]) == 0);
		}
		for (i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			CHECKF(wk[i].fails == 0, "thread %d saw a wrong completion or data", i);
		}
	}

	st_ctx = "teardown";
	for (i = 0; i < NQP; i++) {
		st_qp_destroy(&Q[i]);
		st_cq_destroy(&CQ[i]);
	}
	st_mr_free(&M);

	/* Create and destroy many QPs: nothing leaks or breaks. */
	st_ctx = "churn";
	for (r = 0; r < 300 && !st_failures; r++) {
		struct st_cq c;
		struct st_qp q;
		struct st_addr me;
		struct mlx5_cqe64 e;
		uint16_t idx;

		st_cq_create(&D, &c, 4);
		st_qp_create(&D, &q, &c, &c, &a);
		st_addr_of(&D, &q, &me);
		st_qp_connect(&D, &q, &me);
		idx = st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		if (ST_POLL(&c, &e, 3000))
			CHECK_EQ(st_cqe_wqe_counter(&e), idx);
		st_qp_destroy(&q);
		st_cq_destroy(&c);
	}

	/* Destroying a QP with work in flight: once ibv_destroy_qp returns, no more
	 * CQEs for it appear in its CQ, and the CQ still serves other QPs. */
	st_ctx = "destroy with work in flight";
	{
		struct st_cq c;
		struct st_qp q, q2;
		struct st_addr me, me2;
		struct st_mr dst;
		struct mlx5_cqe64 e;
		uint32_t k, valid_before = 0, valid_after = 0;
		uint16_t idx;

		st_mr_alloc(&D, &dst, 1 << 20, ST_ACCESS_ALL);
		st_cq_create(&D, &c, 255);
		st_qp_create(&D, &q, &c, &c, &a);
		st_qp_create(&D, &q2, &c, &c, &a);
		st_addr_of(&D, &q, &me);
		st_addr_of(&D, &q2, &me2);
		st_qp_connect(&D, &q, &me);
		st_qp_connect(&D, &q2, &me2);
		for (k = 0; k < 8; k++) {
			struct st_wqe w;
			st_wqe_begin(&w);
			st_wqe_raddr(&w, (uintptr_t)dst.buf, dst.mr->rkey);
			st_wqe_data(&w, 1 << 20, dst.mr->lkey, dst.buf);
			st_wqe_write(&q, &w, MLX5_OPCODE_RDMA_WRITE, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
		}
		st_ring(&q, ST_RING_DB);
		st_qp_destroy(&q);
		for (k = 0; k < c.dv.cqe_cnt; k++) {
			struct mlx5_cqe64 *x = st_cqe_at(&c, k);
			valid_before += (x->op_own >> 4) != MLX5_CQE_INVALID;
		}
		st_sleep_ms(100);
		for (k = 0; k < c.dv.cqe_cnt; k++) {
			struct mlx5_cqe64 *x = st_cqe_at(&c, k);
			valid_after += (x->op_own >> 4) != MLX5_CQE_INVALID;
		}
		CHECKF(valid_after == valid_before, "%u CQEs appeared after ibv_destroy_qp returned",
		       valid_after - valid_before);
		/* skip what the destroyed QP left, then the CQ works for the other QP */
		c.ci += valid_after;
		st_cq_set_ci(&c);
		idx = st_post_nop(&q2, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		if (ST_POLL(&c, &e, 3000)) {
			CHECK_EQ(st_cqe_wqe_counter(&e), idx);
			CHECK_EQ(st_cqe_sop_qpn(&e) & 0xffffff, q2.qpn);
		}
		st_qp_destroy(&q2);
		st_cq_destroy(&c);
		st_mr_free(&dst);
	}
	st_dev_close(&D);
	(void)shared;
	st_exit();
	return 0;
}
