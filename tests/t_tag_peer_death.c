/* t_tag_peer_death: peers that die in the middle of a tag transfer give the survivor a status
 * (RVX_ERR_PEER_FAILED) on every request that depends on them, within seconds, never a hang.
 * Built once per rendezvous protocol (t_tag_peer_death_get, _put, _am, _pipeline); the plain build
 * pins the switch at 1 MiB, so a long eager message is cut off between its fragments too.
 *   rank 1, a sender, announces rendezvous messages to rank 0 (one rank 0 has a receive posted
 *   for, one it has not) and a long eager message, flushes (so the announcements have arrived),
 *   then exits without finishing any of them; rank 0 looks only after it is gone.
 *   rank 2, a receiver, takes rank 0's rendezvous request into its unexpected queue and exits
 *   without answering.
 * Afterwards rank 0 still sends and receives (to itself), and nothing is left in flight. */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#if !defined(RVX_RNDV) && !defined(RVX_RNDV_THRESH)
#define RVX_RNDV_THRESH (1 << 20)
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define BIG   ((size_t)2 << 20) /* rendezvous in every build */
#define EAGER ((size_t)900 << 10) /* eager and longer than any ring, when the switch allows */
#define TAG_EXP   1
#define TAG_UNEXP 2
#define TAG_FRAG  3
#define TAG_TO2   4

RVX_STATIC_ASSERT(BIG >= RVX_RNDV_THRESH_BYTES, "BIG must go by rendezvous");

static rvx_worker_t *w;

/* Progress until req completes; its status, or a failed check after `limit` seconds. */
static rvx_status_t wait_for(rvx_request_t *req, const char *what, double limit)
{
    double t0 = rvx__now_s();
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS && rvx__now_s() - t0 < limit) {
        if (rvx_progress(w)) spins = 0;
        else rvx__backoff(&spins);
    }
    T_CHECK(req->status != RVX_INPROGRESS, "%s: still pending after %.0f s (a hang)", what, limit);
    if (req->status != RVX_INPROGRESS)
        printf("rank 0: %s -> %s after %.2f s\n", what, rvx_status_str((rvx_status_t)req->status),
               rvx__now_s() - t0);
    return (rvx_status_t)req->status;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_ep_t *eps[3];
    unsigned char *big = (unsigned char *)malloc(BIG), *big2 = (unsigned char *)malloc(BIG);
    unsigned char *eager = (unsigned char *)malloc(EAGER);
    int me, r, frag_case = RVX_RNDV_THRESH_BYTES > EAGER;
    rvx_status_t st;
    double t0;

    t_spawn(argc, argv, 3, 120);
    setenv("RVX_BOOT_TIMEOUT", "5", 1);
    me = t_start(&ctx, &w);
    for (r = 0; r < 3; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    t_fill(big, BIG, 1);
    t_fill(eager, EAGER, 2);

    if (me == 0) {
        rvx_request_t rexp, runexp, rfrag, s2, self_s, self_r;
        rvx_tag_info_t info;
        T_STATUS(rvx_tag_recv(w, big2, BIG, TAG_EXP, ~0ull, &rexp, &info), RVX_INPROGRESS);
        T_OK(rvx_barrier(ctx));
        /* to rank 2, which will die holding our request */
        T_STATUS(rvx_tag_send(eps[2], big, BIG, TAG_TO2, &s2), RVX_INPROGRESS);
        /* rank 1 sends and dies: look only once it is gone (rvx_ep_status does not progress) */
        t0 = rvx__now_s();
        while (rvx_ep_status(eps[1]) == RVX_OK && rvx__now_s() - t0 < 20) usleep(1000);
        T_STATUS(rvx_ep_status(eps[1]), RVX_ERR_PEER_FAILED);
        /* the receive that was posted: its rendezvous cannot finish */
        T_STATUS(wait_for(&rexp, "posted receive, sender died after its RTS", 15), RVX_ERR_PEER_FAILED);
        /* the message that arrived unexpected: matched now, fails the same way */
        st = rvx_tag_recv(w, big2, BIG, TAG_UNEXP, ~0ull, &runexp, &info);
        T_CHECK(st == RVX_INPROGRESS || st == RVX_ERR_PEER_FAILED, "late receive: %s", rvx_status_str(st));
        if (st == RVX_INPROGRESS)
            T_STATUS(wait_for(&runexp, "late receive, sender died after its RTS", 15), RVX_ERR_PEER_FAILED);
        if (frag_case) {
            /* an eager message cut off after its first fragments */
            st = rvx_tag_recv(w, big2, EAGER, TAG_FRAG, ~0ull, &rfrag, &info);
            if (st == RVX_INPROGRESS) st = wait_for(&rfrag, "eager message cut off between fragments", 15);
            /* success only if it all arrived before the sender went (a ring larger than it) */
            T_CHECK(st == RVX_ERR_PEER_FAILED || (st == RVX_OK && t_verify(big2, EAGER, 2) < 0),
                    "receive of a cut-off eager message: %s", rvx_status_str(st));
        }
        /* the receiver that died */
        T_STATUS(wait_for(&s2, "send to a receiver that died before answering", 15), RVX_ERR_PEER_FAILED);
        /* still working: a rendezvous and an eager message to ourselves */
        T_STATUS(rvx_tag_recv(w, big2, BIG, 9, ~0ull, &self_r, &info), RVX_INPROGRESS);
        T_STATUS(rvx_complete(w, rvx_tag_send(eps[0], big, BIG, 9, &self_s), &self_s), RVX_OK);
        T_STATUS(wait_for(&self_r, "receive from ourselves", 15), RVX_OK);
        T_CHECK(t_verify(big2, BIG, 1) < 0, "data to ourselves");
        T_STATUS(rvx_tag_send(eps[0], eager, 100, 10, &self_s), RVX_OK);
        T_STATUS(rvx_complete(w, rvx_tag_recv(w, big2, 100, 10, ~0ull, &self_r, &info), &self_r), RVX_OK);
        T_CHECK(w->tag_pending == 0 && w->tag_queued == 0, "left in flight: %u, queued %u", w->tag_pending,
                w->tag_queued);
        rvx_worker_destroy(w);
        rvx_finalize(ctx);
        printf("rank 0: every request on a dead peer ended with a status\n");
    } else if (me == 1) {
        rvx_request_t a, b, c;
        T_OK(rvx_barrier(ctx));
        T_STATUS(rvx_tag_send(eps[0], big, BIG, TAG_EXP, &a), RVX_INPROGRESS);
        T_STATUS(rvx_tag_send(eps[0], big, BIG, TAG_UNEXP, &b), RVX_INPROGRESS);
        if (frag_case) { /* RVX_OK only if the transport took it all (a ring larger than EAGER) */
            st = rvx_tag_send(eps[0], eager, EAGER, TAG_FRAG, &c);
            T_CHECK(st == RVX_INPROGRESS || st == RVX_OK, "long eager send: %s", rvx_status_str(st));
            if (st == RVX_OK) printf("rank 1: the transport took the whole eager message\n");
        }
        /* the requests have reached rank 0 (a NIC may drop what it has not sent when a process
         * exits); nothing more is done for them */
        st = rvx_ep_flush(eps[0]);
        T_CHECK(st == RVX_OK, "flush before leaving: %s", rvx_status_str(st));
        fflush(stdout);
        _exit(t_failures ? 1 : 0); /* gone, mid-protocol */
    } else {
        rvx_tag_info_t info;
        memset(&info, 0, sizeof(info));
        T_OK(rvx_barrier(ctx));
        /* take rank 0's request into the unexpected queue, then leave without a word */
        t0 = rvx__now_s();
        while (rvx_tag_probe(w, TAG_TO2, ~0ull, &info) != RVX_OK && rvx__now_s() - t0 < 20) rvx_progress(w);
        T_CHECK(info.length == BIG, "rank 2 saw the request (length %zu)", info.length);
        fflush(stdout);
        _exit(t_failures ? 1 : 0);
    }
    free(big);
    free(big2);
    free(eager);
    return t_exit();
}
