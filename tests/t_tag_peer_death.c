/* t_tag_peer_death: peers that die in the middle of a tag transfer give the survivor a status
 * (RVX_ERR_PEER_FAILED) on every request that depends on them, within seconds, never a hang.
 * Built once per rendezvous protocol (t_tag_peer_death_get, _put, _am, _pipeline); the plain build
 * pins the switch at 1 MiB, so a long eager message is cut off between its fragments too.
 *   rank 1, a sender, announces rendezvous messages to rank 0 (one rank 0 has a receive posted
 *   for, one it has not) and a long eager message, flushes (so the announcements have arrived),
 *   then exits without finishing any of them; rank 0 looks only after it is gone.
 *   rank 2, a receiver, takes rank 0's rendezvous request into its unexpected queue and exits
 *   without answering.
 * Receives that wait for the dead: rank 0 also posts, before anyone dies, receives naming rank 1
 * (one for a message rank 1 sends before dying: it must arrive; one for a message it never
 * sends: RVX_ERR_PEER_FAILED), one naming rank 2 and an any-source receive nobody sends to. While
 * rank 2 lives (it waits for a go message) the last two must still be pending; once rank 2 is
 * gone too, every other rank has failed and both complete with RVX_ERR_PEER_FAILED.
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
#define TAG_SRC_SENT  5 /* rank 1 -> 0, eager, before rank 1 dies */
#define TAG_SRC_NEVER 6 /* nobody sends these */
#define TAG_ANY_NEVER 7
#define TAG_GO        8 /* rank 0 -> 2: you may die now */

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
        rvx_request_t rexp, runexp, rfrag, s2, self_s, self_r, rsent, rnever1, rnever2, rany, rlate;
        rvx_tag_info_t info, isent;
        uint64_t vsent = 0, vnever1 = 0, vnever2 = 0, vany = 0, vlate = 0, go = 1;
        T_STATUS(rvx_tag_recv(w, big2, BIG, TAG_EXP, ~0ull, &rexp, &info), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv_from(w, 1, &vsent, 8, TAG_SRC_SENT, ~0ull, &rsent, &isent), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv_from(w, 1, &vnever1, 8, TAG_SRC_NEVER, ~0ull, &rnever1, NULL), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv_from(w, 2, &vnever2, 8, TAG_SRC_NEVER, ~0ull, &rnever2, NULL), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv(w, &vany, 8, TAG_ANY_NEVER, ~0ull, &rany, NULL), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv_from(w, 3, &vany, 8, 0, 0, &rlate, NULL), RVX_ERR_INVALID_PARAM);
        T_OK(rvx_barrier(ctx));
        /* to rank 2, which will die holding our request */
        T_STATUS(rvx_tag_send(eps[2], big, BIG, TAG_TO2, &s2), RVX_INPROGRESS);
        /* rank 1 sends and dies: look only once it is gone (rvx_ep_status does not progress) */
        t0 = rvx__now_s();
        while (rvx_ep_status(eps[1]) == RVX_OK && rvx__now_s() - t0 < 20) usleep(1000);
        T_STATUS(rvx_ep_status(eps[1]), RVX_ERR_PEER_FAILED);
        /* the receive that was posted: its rendezvous cannot finish */
        T_STATUS(wait_for(&rexp, "posted receive, sender died after its RTS", 15), RVX_ERR_PEER_FAILED);
        /* receives naming rank 1: the message it sent before dying arrives, the other fails */
        T_STATUS(wait_for(&rsent, "receive from rank 1 of a message sent before it died", 15), RVX_OK);
        T_CHECK(vsent == 0x5e57 && isent.sender == 1 && isent.length == 8, "message from rank 1: %llx from %d",
                (unsigned long long)vsent, isent.sender);
        T_STATUS(wait_for(&rnever1, "receive naming rank 1, which died", 15), RVX_ERR_PEER_FAILED);
        st = rvx_tag_recv_from(w, 1, &vlate, 8, TAG_SRC_NEVER, ~0ull, &rlate, NULL);
        T_CHECK(st == RVX_INPROGRESS || st == RVX_ERR_PEER_FAILED, "receive from a dead rank: %s", rvx_status_str(st));
        if (st == RVX_INPROGRESS)
            T_STATUS(wait_for(&rlate, "receive posted for rank 1 after it died", 15), RVX_ERR_PEER_FAILED);
        /* rank 2 lives: a receive naming it and the any-source receive keep waiting */
        t0 = rvx__now_s();
        while (rvx__now_s() - t0 < 0.3) rvx_progress(w);
        T_CHECK(rvx_ep_status(eps[2]) == RVX_OK, "rank 2 left early");
        T_CHECK(rnever2.status == RVX_INPROGRESS, "receive naming live rank 2 ended: %s",
                rvx_status_str((rvx_status_t)rnever2.status));
        T_CHECK(rany.status == RVX_INPROGRESS, "any-source receive ended while rank 2 lives: %s",
                rvx_status_str((rvx_status_t)rany.status));
        T_STATUS(rvx_tag_send(eps[2], &go, 8, TAG_GO, NULL), RVX_OK);
        T_STATUS(wait_for(&rnever2, "receive naming rank 2, which died", 15), RVX_ERR_PEER_FAILED);
        T_STATUS(wait_for(&rany, "any-source receive, every other rank dead", 15), RVX_ERR_PEER_FAILED);
        T_CHECK(vnever1 == 0 && vnever2 == 0 && vany == 0 && vlate == 0, "a failed receive wrote its buffer");
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
        T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "left in flight: %u, queued %u", w->proto_pending,
                w->proto_queued);
        rvx_worker_destroy(w);
        rvx_finalize(ctx);
        printf("rank 0: every request on a dead peer ended with a status\n");
    } else if (me == 1) {
        rvx_request_t a, b, c;
        uint64_t v = 0x5e57;
        T_OK(rvx_barrier(ctx));
        T_STATUS(rvx_tag_send(eps[0], &v, 8, TAG_SRC_SENT, NULL), RVX_OK);
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
        /* live until rank 0 has seen its receives naming us still wait */
        t0 = rvx__now_s();
        while (rvx_tag_probe(w, TAG_GO, ~0ull, &info) != RVX_OK && rvx__now_s() - t0 < 30) rvx_progress(w);
        fflush(stdout);
        _exit(t_failures ? 1 : 0);
    }
    free(big);
    free(big2);
    free(eager);
    return t_exit();
}
