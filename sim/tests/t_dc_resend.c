/*
 * t_dc_resend: a DCI that sends a message again after a long pause stays on its connection, so
 * the DCT sees a duplicate and does not execute it twice.
 *
 * A SEND from a DCI (this process) to a DCT in a child process is executed there and its ACK is
 * lost (RVXSIM_DROP_ACK=1). The target then stops itself (SIGSTOP) and stays stopped for longer
 * than a connection may sit idle (2 x RVXSIM_RETRY_TIMEOUT_MS + 0.5 s); meanwhile the DCI's
 * transport timer waits for the stopped peer. Once the target resumes, the timer sends the SEND
 * again. Hardware keeps a DCI's connection while it has work outstanding and drops the repeated
 * packet sequence number at the DCT; the model once opened a new connection for the resend,
 * whose first message the DCT took for new and delivered a second time (duplicate deliveries in
 * dc/t_am after a machine-wide stall). Checked: the SEND completes at the DCI, the DCT has
 * exactly one receive completion for it, with its bytes (counted once the DCI's completion shows
 * that the DCT has handled the resend), and a second SEND on the same DCI arrives once.
 *
 * If the machine is too slow for the target to stop before the timer's first try (0.5 s after
 * the send), the resend comes before the pause and the case shows nothing: the test skips.
 */
#include "t_dc_common.h"
#include <sys/wait.h>

#define RETRY_MS 1000
#define STOP_MS  (2 * RETRY_MS + 1000)   /* past the idle limit of a connection */

static int child(int sock)
{
	struct st_dev d;
	struct st_cq cq;
	struct st_srq srq;
	struct st_mr m;
	struct ibv_qp *dct;
	struct dc_target me;
	struct mlx5_cqe64 c;
	char b[160], cmd;

	st_name = "t_dc_resend(target)";
	st_dev_open(&d, 0);
	st_cq_create(&d, &cq, 64);
	st_srq_create(&d, &srq, 32, 1);
	st_mr_alloc(&d, &m, 65536, DC_ACCESS_ALL);
	dct = dc_create_dct(&d, &cq, srq.srq, DC_KEY);
	REQUIRE(dct != NULL);
	REQUIRE(dc_dct_ready(&d, dct, DC_ACCESS_ALL) == 0);
	dc_target_of(&d, dct, DC_KEY, &me);
	for (int i = 0; i < 16; i++) {
		struct st_sge sg = { (uint8_t *)m.buf + 64 * i, 64, m.mr->lkey };
		st_srq_post(&srq, &sg, 1);
	}
	REQUIRE(st_send_all(sock, &me, sizeof(me)) == 0);
	for (;;) {
		int n = 0;
		REQUIRE(st_recv_all(sock, &cmd, 1) == 0);
		if (cmd == 'q')
			break;
		/* 's': a SEND is coming whose ACK is lost; stop as soon as it is here */
		if (ST_POLL(&cq, &c, 10000)) {
			uint16_t idx = be16toh(c.wqe_counter);
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_RESP_SEND, "receive %s",
			       st_cqe_str(&c, b, sizeof(b)));
			CHECK(!memcmp((uint8_t *)m.buf + 64 * idx, cmd == 's' ? "resend!" : "second!", 8));
			st_srq_free(&srq, idx);
			n = 1;
		}
		if (cmd == 's')
			raise(SIGSTOP);
		/* resumed (or a plain SEND): the DCI's completion means the DCT has handled every
		 * copy of the message, so a second delivery would be in the CQ now */
		REQUIRE(st_recv_all(sock, &cmd, 1) == 0);
		while (st_cq_poll(&cq, &c, 0)) {
			st_srq_free(&srq, be16toh(c.wqe_counter));
			n++;
		}
		REQUIRE(st_send_all(sock, &n, sizeof(n)) == 0);
	}
	ibv_destroy_qp(dct);
	ibv_destroy_srq(srq.srq);
	st_mr_free(&m);
	st_cq_destroy(&cq);
	st_dev_close(&d);
	return st_failures ? 1 : 0;
}

/* One SEND of 8 bytes from the DCI; the target delivers it and, with stop, stops for STOP_MS
 * (*early: it stopped too late to show anything). Returns the target's count of receive
 * completions for it. */
static int send_once(struct st_dev *d, struct st_qp *q, struct st_cq *cq, struct st_mr *m,
		     const struct dc_target *t, pid_t pid, int sock, int stop, int *early)
{
	struct mlx5_cqe64 c;
	char b[160], cmd = stop ? 's' : 'p';
	uint64_t t0;
	int n = -1, ws;

	*early = 0;
	REQUIRE(st_send_all(sock, &cmd, 1) == 0);
	memcpy(m->buf, stop ? "resend!" : "second!", 8);
	t0 = st_now_ns();
	dc_post_send(q, d, t, 0, m->buf, 8, m->mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
	if (stop) {
		REQUIRE(waitpid(pid, &ws, WUNTRACED) == pid && WIFSTOPPED(ws));
		/* the timer's first try is 0.5 s after the send: it must find the target stopped */
		*early = st_now_ns() - t0 > 400000000ull;
		st_sleep_ms(STOP_MS);
		kill(pid, SIGCONT);
	}
	if (ST_POLL(cq, &c, 10000))
		CHECKF(st_cqe_opcode(&c) == MLX5_CQE_REQ, "SEND %s", st_cqe_str(&c, b, sizeof(b)));
	cmd = 'c';
	REQUIRE(st_send_all(sock, &cmd, 1) == 0);
	REQUIRE(st_recv_all(sock, &n, sizeof(n)) == 0);
	return n;
}

int main(void)
{
	struct st_dev d;
	struct st_cq cq;
	struct st_qp q;
	struct st_mr m;
	struct dc_target t;
	int sock, n, early, rc;
	char cmd = 'q';
	pid_t pid;

	st_init("t_dc_resend", 30 + STOP_MS / 1000);
	/* before the model reads its environment (the child inherits it); only the DCI's
	 * process receives ACKs, so the first ACK it gets, the SEND's, is the one lost */
	setenv("RVXSIM_RETRY_TIMEOUT_MS", "1000", 1);
	setenv("RVXSIM_DROP_ACK", "1", 1);
	st_require_device();
	pid = st_fork_peer(&sock, 25 + STOP_MS / 1000);
	if (pid == 0)
		_exit(child(sock));
	st_dev_open(&d, 0);
	st_cq_create(&d, &cq, 64);
	st_mr_alloc(&d, &m, 65536, DC_ACCESS_ALL);
	dc_create_dci(&d, &q, &cq, 16, 1, 16);
	/* retry_cnt 1: one try lasts RVXSIM_RETRY_TIMEOUT_MS / 2 (timeout 20 is longer) */
	REQUIRE(dc_dci_ready(&d, &q, 1, 7, 20) == 0);
	REQUIRE(st_recv_all(sock, &t, sizeof(t)) == 0);

	st_ctx = "a SEND whose ACK is lost, sent again after the target was stopped";
	n = send_once(&d, &q, &cq, &m, &t, pid, sock, 1, &early);
	CHECKF(n == 1, "the DCT delivered the SEND %d times (once on hardware)", n);
	st_ctx = "a second SEND on the same DCI";
	n = send_once(&d, &q, &cq, &m, &t, pid, sock, 0, &early);
	CHECKF(n == 1, "the DCT delivered it %d times", n);
	REQUIRE(st_send_all(sock, &cmd, 1) == 0);
	rc = st_wait_pid(pid, 10000);
	CHECKF(rc == 0, "target exited with %d", rc);
	if (early && !st_failures)
		st_skip("the target stopped more than 0.4 s after the send (a busy machine): the "
			"resend may have come before the pause, so the case showed nothing");
	st_qp_destroy(&q);
	st_mr_free(&m);
	st_cq_destroy(&cq);
	st_dev_close(&d);
	st_exit();
	return 0;
}
