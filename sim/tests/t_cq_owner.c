/*
 * t_cq_owner: the CQE owner bit flips on every pass over the CQ (owner =
 * (index / cqe_cnt) & 1), stale entries from the previous pass are never
 * taken for new ones, and the hardware writes only into entries the consumer
 * index (dbrec[0]) has freed.
 */
#include "simtest.h"
#include <poll.h>

/* Arms the CQ directly: ARM_DB record, then the 64-bit doorbell at cq_uar + 0x20. */
static void arm_direct(struct st_cq *c, uint32_t sn, int solicited)
{
	uint32_t v = (sn & 3) << 28 | (solicited ? 1u << 24 : 0) | (c->ci & 0xffffff);
	uint64_t db = (uint64_t)v << 32 | c->dv.cqn;

	c->dv.dbrec[1] = htobe32(v);
	st_wc_flush();
	*(volatile uint64_t *)((uint8_t *)c->dv.cq_uar + MLX5_CQ_DOORBELL) = htobe64(db);
	st_wc_flush();
}

/* Completion events through a channel, with the CQ armed directly. */
static void events(struct st_dev *d, const struct st_qp_attr *a)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(d->ctx);
	struct st_cq c;
	struct st_qp q;
	struct st_addr me;
	struct mlx5dv_obj obj;
	struct pollfd pfd;
	struct ibv_cq *evcq;
	void *evctx;
	uint32_t sn = 0;
	int k;

	st_ctx = "events";
	REQUIRE(ch != NULL);
	memset(&c, 0, sizeof(c));
	c.cq = ibv_create_cq(d->ctx, 15, (void *)0xabc, ch, 0);
	REQUIRE(c.cq != NULL);
	memset(&obj, 0, sizeof(obj));
	obj.cq.in = c.cq;
	obj.cq.out = &c.dv;
	REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == 0);
	st_qp_create(d, &q, &c, &c, a);
	st_addr_of(d, &q, &me);
	st_qp_connect(d, &q, &me);
	pfd.fd = ch->fd;
	pfd.events = POLLIN;

	for (k = 0; k < 4 && !st_failures; k++) {
		uint16_t idx;
		struct mlx5_cqe64 e;

		arm_direct(&c, sn, 0);
		CHECKF(poll(&pfd, 1, 20) == 0, "event before any completion (round %d)", k);
		idx = st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		if (!CHECKF(poll(&pfd, 1, 3000) == 1, "no event within 3 s (round %d)", k))
			break;
		CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0);
		CHECK(evcq == c.cq && evctx == (void *)0xabc);
		ibv_ack_cq_events(c.cq, 1);
		sn++;
		if (ST_POLL(&c, &e, 1000))
			CHECK_EQ(st_cqe_wqe_counter(&e), idx);
		/* one event per arm */
		st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		ST_POLL(&c, NULL, 3000);
		CHECKF(poll(&pfd, 1, 30) == 0, "second event without re-arming (round %d)", k);
	}

	/* Arming while an unconsumed CQE is present raises an event at once. */
	st_ctx = "arm with a CQE pending";
	{
		uint64_t end = st_now_ns() + 3000000000ull;
		st_post_nop(&q, MLX5_WQE_CTRL_CQ_UPDATE, ST_RING_DB);
		while (!st_cq_peek(&c) && st_now_ns() < end)
			sched_yield();
		CHECK(st_cq_peek(&c) != NULL);
		arm_direct(&c, sn, 0);
		if (CHECKF(poll(&pfd, 1, 3000) == 1, "no event for a CQE already present")) {
			CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0);
			ibv_ack_cq_events(c.cq, 1);
		}
		ST_POLL(&c, NULL, 100);
	}
	st_qp_destroy(&q);
	st_cq_destroy(&c);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	st_ctx = NULL;
}

static struct st_pair P;

/* Posts n signaled NOPs in one batch; returns the first index. */
static uint16_t post_nops(struct st_qp *q, int n)
{
	uint16_t first = (uint16_t)q->pi;
	int i;
	for (i = 0; i < n; i++) {
		struct st_wqe w;
		st_wqe_begin(&w);
		st_wqe_write(q, &w, MLX5_OPCODE_NOP, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	}
	st_ring(q, ST_RING_DB);
	return first;
}

/* Waits until entry ci (not yet consumed) is valid, without consuming it. */
static struct mlx5_cqe64 *wait_valid(struct st_cq *c, unsigned ms)
{
	uint64_t end = st_now_ns() + (uint64_t)ms * 1000000ull;
	struct mlx5_cqe64 *e;
	while (!(e = st_cq_peek(c)) && st_now_ns() < end)
		sched_yield();
	return e;
}

int main(int argc, char **argv)
{
	const char *csz = getenv("MLX5_CQE_SIZE");
	struct st_qp_attr a = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1,
				.max_recv_sge = 1 };
	struct st_cq *cq;
	uint32_t cnt, i, pass;
	uint16_t expect;

	st_init("t_cq_owner", 30);
	/* CQs of 4 entries (n = 3) */
	st_pair_open_ex(&P, &a, 3, 7);
	cq = &P.acq;
	cnt = cq->dv.cqe_cnt;
	REQUIRE(cnt == 4);
	if (csz && !strcmp(csz, "128")) {
		/* 128-byte CQEs: the 64-byte CQE is the second half of each entry */
		st_name = "t_cq_owner(128-byte CQEs)";
		REQUIRE(cq->dv.cqe_size == 128);
		for (i = 0; i < cnt; i++)
			CHECK_EQ(st_cqe_at(cq, i)->op_own, 0xf0);
	} else {
		CHECK_EQ(cq->dv.cqe_size, 64);
	}

	/* One at a time over five passes: owner bit and slot of every CQE. */
	st_ctx = "one at a time";
	expect = (uint16_t)P.a.pi;
	for (i = 0; i < 5 * cnt && !st_failures; i++) {
		struct mlx5_cqe64 *e;
		post_nops(&P.a, 1);
		e = wait_valid(cq, 3000);
		if (!CHECKF(e != NULL, "CQE %u not valid at slot %u", i, i & (cnt - 1)))
			break;
		CHECK(e == st_cqe_at(cq, i));
		CHECK_EQ(e->op_own & 1, (i / cnt) & 1);
		CHECK_EQ(e->op_own >> 4, MLX5_CQE_REQ);
		CHECK_EQ(st_cqe_wqe_counter(e), expect);
		CHECK_EQ(st_cqe_sop_qpn(e) & 0xffffff, P.a.qpn);
		expect++;
		cq->ci++;
		st_cq_set_ci(cq);
		/* the consumed entry now has the old owner: the next index must not look valid */
		CHECK(st_cq_peek(cq) == NULL);
	}

	/* Fill the CQ exactly, consume partially, refill: never more than cnt outstanding. */
	st_ctx = "full CQ";
	for (pass = 0; pass < 6 && !st_failures; pass++) {
		uint32_t base = cq->ci, k;
		uint16_t first = post_nops(&P.a, (int)cnt);
		struct mlx5_cqe64 *e;

		/* all cnt entries become valid; the hardware needs no free slot beyond them */
		for (k = 0; k < cnt; k++) {
			uint64_t end = st_now_ns() + 3000000000ull;
			e = st_cqe_at(cq, base + k);
			while (((e->op_own >> 4) == MLX5_CQE_INVALID ||
				(e->op_own & 1) != !!((base + k) & cnt)) && st_now_ns() < end)
				sched_yield();
			if (!CHECKF((e->op_own & 1) == !!((base + k) & cnt) && (e->op_own >> 4) == MLX5_CQE_REQ,
				    "pass %u entry %u: op_own 0x%02x", pass, k, e->op_own))
				break;
			CHECK_EQ(st_cqe_wqe_counter(e), (uint16_t)(first + k));
		}
		/* consume half, post half a CQ more, then consume the rest */
		for (k = 0; k < cnt / 2; k++)
			CHECK(st_cq_poll(cq, NULL, 100));
		first = post_nops(&P.a, (int)(cnt / 2));
		for (k = 0; k < cnt / 2; k++)
			CHECK(st_cq_poll(cq, NULL, 3000));
		for (k = 0; k < cnt / 2; k++) {
			struct mlx5_cqe64 c;
			if (!CHECK(st_cq_poll(cq, &c, 3000)))
				break;
			CHECK_EQ(st_cqe_wqe_counter(&c), (uint16_t)(first + k));
		}
		CHECK(st_cq_empty_for(cq, 5));
	}
	CHECK_EQ(be32toh(cq->dv.dbrec[0]), cq->ci & 0xffffff);

	/* Receive CQ, same rules: SENDs A->B. */
	st_ctx = "receive CQ";
	{
		struct st_mr m;
		struct mlx5_cqe64 c;
		st_mr_alloc(&P.d, &m, 4096, ST_ACCESS_ALL);
		for (i = 0; i < 3 * cnt && !st_failures; i++) {
			struct st_wqe w;
			uint32_t v = i;
			st_post_recv1(&P.b, (uint8_t *)m.buf + 64 * (i % 8), 64, m.mr->lkey);
			st_wqe_begin(&w);
			st_wqe_inline(&w, &v, 4);
			st_post(&P.a, &w, MLX5_OPCODE_SEND, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0, ST_RING_BF);
			if (!ST_POLL(&P.acq, &c, 3000))
				break;
			if (!ST_POLL(&P.brcq, &c, 3000))
				break;
			CHECK_EQ(c.op_own & 1, ((P.brcq.ci - 1) / cnt) & 1);
			CHECK_EQ(st_cqe_opcode(&c), MLX5_CQE_RESP_SEND);
			CHECK_EQ(be32toh(c.byte_cnt), 4);
		}
		st_mr_free(&m);
	}

	/* A bigger CQ over three passes with batches of 5 (not a divisor of the size). */
	st_ctx = "batches";
	{
		struct st_cq big;
		struct st_qp q;
		struct st_addr me;
		struct mlx5_cqe64 c;
		uint16_t first;
		uint32_t total = 0, k;

		st_cq_create(&P.d, &big, 15);
		REQUIRE(big.dv.cqe_cnt == 16);
		st_qp_create(&P.d, &q, &big, &big, &a);
		st_addr_of(&P.d, &q, &me);
		st_qp_connect(&P.d, &q, &me);
		while (total < 3 * 16 + 7 && !st_failures) {
			first = post_nops(&q, 5);
			for (k = 0; k < 5; k++) {
				if (!ST_POLL(&big, &c, 3000))
					break;
				CHECK_EQ(st_cqe_wqe_counter(&c), (uint16_t)(first + k));
				CHECK_EQ(c.op_own & 1, ((big.ci - 1) / 16) & 1);
			}
			total += 5;
		}
		st_qp_destroy(&q);
		st_cq_destroy(&big);
	}

	events(&P.d, &a);
	st_ctx = NULL;
	st_pair_close(&P);

	/* Again with 128-byte CQEs (libmlx5's MLX5_CQE_SIZE=128). */
	if (argc < 2 && !csz && !st_failures) {
		int rc = st_rerun(argv[0], 30000, "MLX5_CQE_SIZE=128", NULL);

		CHECKF(rc == 0, "the run with MLX5_CQE_SIZE=128 exited with %d", rc);
	}
	st_exit();
	return 0;
}
