/* t_tag_ep_destroy: rvx_ep_destroy with tag transfers in flight on the endpoint. Every request
 * tied to the endpoint gets a status (RVX_OK if it finished, else RVX_ERR_CANCELED) by the time
 * destroy returns, nothing is left in flight, and no byte lands in a buffer after its request
 * completed (checked with a pattern written afterwards). Built once per rendezvous protocol and
 * over both transports; under AddressSanitizer (t_sanitize.sh) a completion into freed state
 * would be reported.
 *   A  rank 1 sends rank 0 a rendezvous message; rank 0 destroys its endpoint to rank 1 as soon
 *      as the transfer has started (GET in flight, RTR sent, data arriving); rank 1 then destroys
 *      its endpoint too, and its send gets a status.
 *   B  rank 0 sends rank 2 a one-frame message zero-copy (rc_mlx5), fills the ring to rank 2
 *      (which does not progress for a while) with eager sends until one is queued, adds a rendezvous send and a long eager send behind it, and destroys
 *      the endpoint: every queued send ends RVX_ERR_CANCELED at once.
 * Afterwards rank 0 still sends to itself. */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define BIG    ((size_t)4 << 20)
#define NEAGER 20000
#define TAG_A  1
#define TAG_B  2

RVX_STATIC_ASSERT(BIG >= RVX_RNDV_THRESH_BYTES, "BIG must go by rendezvous");

static rvx_worker_t *w;

static void progress_for(double s)
{
    double t0 = rvx__now_s();
    while (rvx__now_s() - t0 < s) rvx_progress(w);
}

/* A receive whose transfer is under way: a transport operation of its own in flight (GET), or
 * its RTR sent and the peer's writes or data frames expected (PUT, PIPELINE, AM). */
static int transfer_under_way(void)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    rvx__tag_link_t *l;
    for (l = t->active.next; l != &t->active; l = l->next) {
        rvx__tag_op_t *op = RVX_CONTAINER_OF(l, rvx__tag_op_t, alink);
        if (op->kind == RVX__KIND_RECV && (!rvx__rndv_quiet(op) || op->state == RVX__RS_WAIT)) return 1;
    }
    return 0;
}

static int pending_or_done(rvx_status_t st) { return st == RVX_OK || st == RVX_ERR_CANCELED; }

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_ep_t *eps[3];
    int me, r;
    size_t i;

    t_spawn(argc, argv, 3, 180);
    me = t_start(&ctx, &w);
    for (r = 0; r < 3; r++) T_OK(rvx_ep_create(w, r, &eps[r]));

    /* ---- A: the receiver destroys its endpoint mid-rendezvous -------------------------------- */
    if (me == 0) {
        unsigned char *rbuf = (unsigned char *)malloc(BIG);
        rvx_request_t ra;
        rvx_tag_info_t info;
        double t0;
        memset(rbuf, 0, BIG);
        T_STATUS(rvx_tag_recv(w, rbuf, BIG, TAG_A, ~0ull, &ra, &info), RVX_INPROGRESS);
        T_OK(rvx_barrier(ctx));
        t0 = rvx__now_s();
        while (!transfer_under_way() && ra.status == RVX_INPROGRESS && rvx__now_s() - t0 < 30) rvx_progress(w);
        T_CHECK(transfer_under_way() || ra.status != RVX_INPROGRESS, "the rendezvous never started");
        printf("rank 0: destroying the endpoint to rank 1 with the receive %s\n",
               ra.status == RVX_INPROGRESS ? "in flight" : "already done");
        rvx_ep_destroy(eps[1]);
        eps[1] = NULL;
        T_CHECK(pending_or_done((rvx_status_t)ra.status), "receive after destroy: %s",
                rvx_status_str((rvx_status_t)ra.status));
        T_CHECK(w->proto_pending == 0, "%u tag operations still in flight after destroy", w->proto_pending);
        if (ra.status == RVX_OK) T_CHECK(t_verify(rbuf, BIG, 7) < 0, "a completed receive has wrong data");
        printf("rank 0: receive ended with %s\n", rvx_status_str((rvx_status_t)ra.status));
        /* nothing may write the buffer any more */
        memset(rbuf, 0x5a, BIG);
        progress_for(0.3);
        for (i = 0; i < BIG; i++)
            if (rbuf[i] != 0x5a) {
                T_CHECK(0, "byte %zu of the receive buffer written after its request completed", i);
                break;
            }
        free(rbuf);
        T_OK(rvx_barrier(ctx));
    } else if (me == 1) {
        unsigned char *sbuf = (unsigned char *)malloc(BIG);
        rvx_request_t sa;
        rvx_status_t st;
        t_fill(sbuf, BIG, 7);
        T_OK(rvx_barrier(ctx));
        st = rvx_tag_send(eps[0], sbuf, BIG, TAG_A, &sa);
        T_CHECK(st == RVX_INPROGRESS || st == RVX_OK, "rendezvous send: %s", rvx_status_str(st));
        T_OK(rvx_barrier(ctx)); /* progresses: the transfer moves while rank 0 destroys */
        rvx_ep_destroy(eps[0]);
        eps[0] = NULL;
        if (st == RVX_INPROGRESS)
            T_CHECK(pending_or_done((rvx_status_t)sa.status), "send after destroy: %s",
                    rvx_status_str((rvx_status_t)sa.status));
        T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "left in flight: %u, queued %u", w->proto_pending,
                w->proto_queued);
        memset(sbuf, 0, BIG); /* freed below: the transport must be done reading it */
        free(sbuf);
    } else {
        T_OK(rvx_barrier(ctx));
        T_OK(rvx_barrier(ctx));
    }

    /* ---- B: the sender destroys its endpoint with sends queued behind a full ring ------------ */
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        static rvx_request_t reqs[NEAGER];
        static unsigned char small[1024];
        unsigned char *big = (unsigned char *)malloc(BIG), *mid = (unsigned char *)malloc(BIG / 8);
        static unsigned char zbuf[RVX_AM_MAX_MEDIUM - 8];
        rvx_request_t rb, rm, rz, self_s, self_r;
        rvx_status_t stb, stm, stz;
        int nq = 0, n;
        uint64_t v = 42, got = 0;
        t_fill(big, BIG, 3);
        t_fill(mid, BIG / 8, 4);
        t_fill(zbuf, sizeof(zbuf), 5);
        /* first, a one-frame eager send that goes zero-copy where the transport can */
        stz = rvx_tag_send(eps[2], zbuf, sizeof(zbuf), TAG_B, &rz);
        T_CHECK(stz == RVX_OK || stz == RVX_INPROGRESS, "zero-copy eager send: %s", rvx_status_str(stz));
        for (n = 0; n < NEAGER; n++) {
            rvx_status_t st = rvx_tag_send(eps[2], small, sizeof(small), TAG_B, &reqs[n]);
            T_CHECK(st == RVX_OK || st == RVX_INPROGRESS, "eager send %d: %s", n, rvx_status_str(st));
            if (st == RVX_INPROGRESS) {
                nq++;
                if (nq == 4) { n++; break; }
            } else {
                reqs[n].status = RVX_OK;
            }
        }
        stb = rvx_tag_send(eps[2], big, BIG, TAG_B, &rb);
        stm = rvx_tag_send(eps[2], mid, BIG / 8, TAG_B, &rm); /* eager or rendezvous, by the switch */
        printf("rank 0: %d eager sends, %d queued; destroying the endpoint to rank 2\n", n, nq);
        rvx_ep_destroy(eps[2]);
        eps[2] = NULL;
        for (r = 0; r < n; r++)
            T_CHECK(pending_or_done((rvx_status_t)reqs[r].status), "eager send %d after destroy: %s", r,
                    rvx_status_str((rvx_status_t)reqs[r].status));
        if (nq) T_CHECK(reqs[n - 1].status == RVX_ERR_CANCELED, "a queued send was not cancelled: %s",
                        rvx_status_str((rvx_status_t)reqs[n - 1].status));
        if (stz == RVX_INPROGRESS)
            T_CHECK(pending_or_done((rvx_status_t)rz.status), "zero-copy send after destroy: %s",
                    rvx_status_str((rvx_status_t)rz.status));
        T_CHECK(RVX_EAGER_ZCOPY_MIN > sizeof(zbuf) || rvx__tag_of(w)->n_zcopy == 1, "the one-frame send did not go zero-copy");
        memset(zbuf, 0, sizeof(zbuf)); /* the transport is done with it */
        if (stb == RVX_INPROGRESS)
            T_CHECK(pending_or_done((rvx_status_t)rb.status), "rendezvous send after destroy: %s",
                    rvx_status_str((rvx_status_t)rb.status));
        if (stm == RVX_INPROGRESS)
            T_CHECK(pending_or_done((rvx_status_t)rm.status), "long send after destroy: %s",
                    rvx_status_str((rvx_status_t)rm.status));
        T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "left in flight: %u, queued %u", w->proto_pending,
                w->proto_queued);
        memset(big, 0, BIG);
        free(big);
        free(mid);
        /* still working: to ourselves */
        T_STATUS(rvx_tag_recv(w, &got, 8, 5, ~0ull, &self_r, NULL), RVX_INPROGRESS);
        T_STATUS(rvx_complete(w, rvx_tag_send(eps[0], &v, 8, 5, &self_s), &self_s), RVX_OK);
        T_STATUS(rvx_wait(w, &self_r), RVX_OK);
        T_CHECK(got == 42, "message to ourselves");
    } else if (me == 2) {
        usleep(1500000); /* no progress: rank 0's ring to us fills */
    }
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < 3; r++)
        if (eps[r]) rvx_ep_destroy(eps[r]);
    T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "rank %d: left in flight: %u, queued %u", me,
            w->proto_pending, w->proto_queued);
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
