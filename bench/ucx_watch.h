/* ucx_watch.h: wait until the adapter has written the CQEs of the work UCX posted, without taking
 * them, so that a counted UCT call finds its completions already in the CQ (bench/icount_ucx.c).
 *
 * UCX learns the layout of every CQ and QP it drives from mlx5dv_init_obj; the bench defines that
 * symbol (exported from the executable, so it comes first), passes the call on to libmlx5 and
 * remembers the CQ rings and send queues. A snapshot keeps each CQ slot's owner byte and each send
 * queue's producer index; a CQE written since changes the owner byte of its slot (the owner bit
 * flips at every pass, an unwritten slot has the invalid opcode), so the slots that differ are the
 * new CQEs, and the WQEs posted since, read from the send queue, say how many to expect (those
 * with CQ_UPDATE set). Nothing here runs inside a counted wrapper. */
#ifndef BENCH_UCX_WATCH_H
#define BENCH_UCX_WATCH_H
#include <dlfcn.h>
#include <endian.h>
#include <time.h>
#include <infiniband/mlx5dv.h>

#define WATCH_MAX 64

static struct {
	struct { const volatile uint8_t *buf; uint32_t cnt, size; uint8_t *snap; } cq[WATCH_MAX];
	struct { const uint8_t *sq; uint32_t cnt; const volatile uint32_t *dbrec; uint16_t pi; } qp[WATCH_MAX];
	int ncq, nqp;
} W;

__attribute__((visibility("default"))) int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t type)
{
	static int (*real)(struct mlx5dv_obj *, uint64_t);
	int ret;

	if (!real) {
		void *lib = dlopen("libmlx5.so.1", RTLD_LAZY);
		real = lib ? (int (*)(struct mlx5dv_obj *, uint64_t))dlvsym(lib, "mlx5dv_init_obj", "MLX5_1.2") : NULL;
		if (!real)
			DIE("mlx5dv_init_obj: libmlx5.so.1 not found");
	}
	ret = real(obj, type);
	if (ret)
		return ret;
	if ((type & MLX5DV_OBJ_CQ) && W.ncq < WATCH_MAX) {
		struct mlx5dv_cq *c = obj->cq.out;
		W.cq[W.ncq].buf = c->buf;
		W.cq[W.ncq].cnt = c->cqe_cnt;
		W.cq[W.ncq].size = c->cqe_size;
		W.cq[W.ncq].snap = calloc(c->cqe_cnt, 1);
		W.ncq++;
	}
	if ((type & MLX5DV_OBJ_QP) && W.nqp < WATCH_MAX && obj->qp.out->sq.wqe_cnt) {
		struct mlx5dv_qp *q = obj->qp.out;
		W.qp[W.nqp].sq = q->sq.buf;
		W.qp[W.nqp].cnt = q->sq.wqe_cnt;
		W.qp[W.nqp].dbrec = (const volatile uint32_t *)q->dbrec;
		W.nqp++;
	}
	return 0;
}

/* the owner byte (op_own) is the last byte of a CQE (of its second half with 128-byte CQEs) */
static uint8_t watch_op_own(int c, uint32_t i)
{
	return W.cq[c].buf[(size_t)i * W.cq[c].size + W.cq[c].size - 1];
}

static uint16_t watch_pi(int q) { return (uint16_t)be32toh(W.qp[q].dbrec[MLX5_SND_DBR]); }

static void watch_snap(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (int c = 0; c < W.ncq; c++)
		for (uint32_t i = 0; i < W.cq[c].cnt; i++)
			W.cq[c].snap[i] = watch_op_own(c, i);
	for (int q = 0; q < W.nqp; q++)
		W.qp[q].pi = watch_pi(q);
}

/* WQEs posted since the snapshot that ask for a CQE */
static unsigned watch_signaled(void)
{
	unsigned n = 0;
	for (int q = 0; q < W.nqp; q++) {
		uint16_t idx = W.qp[q].pi, pi = watch_pi(q);
		while (idx != pi) {
			const struct mlx5_wqe_ctrl_seg *ctrl = (const void *)(W.qp[q].sq + (size_t)(idx & (W.qp[q].cnt - 1)) * MLX5_SEND_WQE_BB);
			unsigned ds = be32toh(ctrl->qpn_ds) & 0x3f;
			n += (ctrl->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
			idx += ds ? (ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB : 1;
		}
	}
	return n;
}

static unsigned watch_new_cqes(void)
{
	unsigned n = 0;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (int c = 0; c < W.ncq; c++)
		for (uint32_t i = 0; i < W.cq[c].cnt; i++)
			n += W.cq[c].snap[i] != watch_op_own(c, i);
	return n;
}

/* Wait (generously: the model's engine may be descheduled for long on a loaded machine) until
 * every signaled WQE posted since watch_snap() has its CQE. Returns 0, or 1 on timeout or when
 * no CQ or QP was seen. */
static long watch_wait(void)
{
	unsigned want = watch_signaled();
	struct timespec t0, t;

	if (!W.ncq || !W.nqp || !want) {
		fprintf(stderr, "icount_ucx: watch: %d CQs, %d QPs, %u signaled WQEs to wait for\n", W.ncq, W.nqp, want);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (watch_new_cqes() < want) {
		usleep(100);   /* under valgrind the engine thread runs only while this one waits */
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 300) {
			fprintf(stderr, "icount_ucx: watch: %u of %u CQEs after 300 s\n", watch_new_cqes(), want);
			return 1;
		}
	}
	return 0;
}
#endif
