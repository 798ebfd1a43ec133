/*
 * t_dc_resend: a DCI that sends a message again after a long pause stays on its connection, so
 * the DCT sees a duplicate and does not execute it twice.
 *
 * The target process (a DCT on an SRQ) is stopped (SIGSTOP); a DCI of this process sends it a
 * SEND, and the target stays stopped for longer than a connection may sit idle
 * (2 x RVXSIM_RETRY_TIMEOUT_MS + 0.5 s), while the DCI's transport timer waits for the stopped
 * peer. Once resumed, the target executes the SEND, and its ACK is lost (RVXSIM_DROP_ACK=1), so
 * the timer sends the SEND again. Hardware keeps a DCI's connection while it has work
 * outstanding and drops the repeated packet sequence number at the DCT; the model once opened a
 * new connection for the resend, whose first message the DCT took for new and delivered a second
 * time (duplicate deliveries in dc/t_am after a pause of the whole machine). Checked: the SEND
 * completes at the DCI; the DCT has exactly one receive completion, with the bytes (counted once
 * the DCI's completion shows that the DCT has handled every copy); a second SEND on the same DCI
 * arrives once. Nothing depends on how fast either process runs.
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
		/* 's' or 'p': a SEND is coming (with 's', after a stop of STOP_MS) */
		if (ST_POLL(&cq, &c, STOP_MS + 10000)) {
			uint16_t idx = be16toh(c.wqe_counter);
			CHECKF(st_cqe_opcode(&c) == MLX5_CQE_RESP_SEND, "receive %s",
			       st_cqe_str(&c, b, sizeof(b)));
			CHECK(!memcmp((uint8_t *)m.buf + 64 * idx, cmd == 's' ? "resend!" : "second!", 8));
			st_srq_free(&srq, idx);
			n = 1;
		}
		/* the DCI's completion means the DCT has handled every copy of the message, so a
		 * second delivery would be in the CQ now */
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

/* One SEND of 8 bytes from the DCI, with stop to a target stopped for STOP_MS. Returns the
 * target's count of receive completions for it. */
static int send_once(struct st_dev *d, struct st_qp *q, struct st_cq *cq, struct st_mr *m,
		     const struct dc_target *t, pid_t pid, int sock, int stop)
{
	struct mlx5_cqe64 c;
	char b[160], cmd = stop ? 's' : 'p';
	int n = -1, ws;

	REQUIRE(st_send_all(sock, &cmd, 1) == 0);
	if (stop) {
		kill(pid, SIGSTOP);
		REQUIRE(waitpid(pid, &ws, WUNTRACED) == pid && WIFSTOPPED(ws));
	}
	memcpy(m->buf, stop ? "resend!" : "second!", 8);
	dc_post_send(q, d, t, 0, m->buf, 8, m->mr->lkey, MLX5_WQE_CTRL_CQ_UPDATE);
	if (stop) {
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
	int sock, n, rc;
	char cmd = 'q';
	pid_t pid;

	st_init("t_dc_resend", 40 + STOP_MS / 1000);
	/* before the model reads its environment (the child inherits it); only the DCI's
	 * process receives ACKs, so the first ACK it gets, the SEND's, is the one lost */
	setenv("RVXSIM_RETRY_TIMEOUT_MS", "1000", 1);
	setenv("RVXSIM_DROP_ACK", "1", 1);
	st_require_device();
	pid = st_fork_peer(&sock, 35 + STOP_MS / 1000);
	if (pid == 0)
		_exit(child(sock));
	st_dev_open(&d, 0);
	st_cq_create(&d, &cq, 64);
	st_mr_alloc(&d, &m, 65536, DC_ACCESS_ALL);
	dc_create_dci(&d, &q, &cq, 16, 1, 16);
	/* retry_cnt 3: a try lasts RVXSIM_RETRY_TIMEOUT_MS / 4 (timeout 20 is longer), and the
	 * resumed target has three of them to answer */
	REQUIRE(dc_dci_ready(&d, &q, 3, 7, 20) == 0);
	REQUIRE(st_recv_all(sock, &t, sizeof(t)) == 0);

	st_ctx = "a SEND to a stopped target, its ACK lost, sent again after the pause";
	n = send_once(&d, &q, &cq, &m, &t, pid, sock, 1);
	CHECKF(n == 1, "the DCT delivered the SEND %d times (once on hardware)", n);
	st_ctx = "a second SEND on the same DCI";
	n = send_once(&d, &q, &cq, &m, &t, pid, sock, 0);
	CHECKF(n == 1, "the DCT delivered it %d times", n);
	REQUIRE(st_send_all(sock, &cmd, 1) == 0);
	rc = st_wait_pid(pid, 10000);
	CHECKF(rc == 0, "target exited with %d", rc);
	st_qp_destroy(&q);
	st_mr_free(&m);
	st_cq_destroy(&cq);
	st_dev_close(&d);
	st_exit();
	return 0;
}
