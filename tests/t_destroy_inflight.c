/* t_destroy_inflight: no request outlives its endpoint or worker. Rank 0 posts, towards rank 1,
 * a get (copied, 4 KiB), a zero-copy get and put (64 KiB), a fetching add, a short AM, an eager
 * and a rendezvous tag send, an unmatched tag receive and an endpoint flush, and at once destroys
 * the endpoint (ITER times) or the worker (ITER times, each time a new one, collectively).
 * Afterwards every request has its final status: RVX_OK or RVX_ERR_CANCELED (docs/api.md), never
 * RVX_INPROGRESS; a get that ended RVX_OK holds rank 1's bytes. Built for shm (t_destroy_inflight)
 * and over rvxsim for rc_mlx5, dc_mlx5 and both pairs (rc/, dc/, pair/, pair-dc/: 2 ranks, one
 * per node). A destroy that gave up early (before the fix, after 20 us) left the get pending;
 * before that fix rc_mlx5 left gets, zero-copy transfers and atomics pending, and dc_mlx5 its
 * endpoint flushes. About 0.3 s on shm, 1 to 2.6 s on rvxsim. */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#define RVX_AM_HANDLERS(X) X(NOTE, on_note)
#include <rvx/rvx.h>
#include "testlib.h"

#define ITER  100
#define SMALL 4096
#define BIG   ((size_t)64 << 10)
#define RNDV  ((size_t)RVX_RNDV_THRESH_BYTES + 4096) /* a rendezvous send */
enum { GET, GETZ, PUTZ, FADD, TSEND, TRNDV, TRECV, FLUSH, NREQ };
static const char *const names[NREQ] = {"get", "get_zcopy", "put_zcopy", "fetching add",
                                        "eager tag send", "rendezvous tag send",
                                        "tag receive", "endpoint flush"};

static unsigned notes;

static void on_note(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    notes++;
}

static unsigned long ended[NREQ][2]; /* per request: ended RVX_OK, ended RVX_ERR_CANCELED */

/* The request's status after the destroy: final, and one the docs allow. */
static void check(int k, rvx_status_t posted, const rvx_request_t *req, int it, const char *how)
{
    rvx_status_t st = posted == RVX_INPROGRESS ? (rvx_status_t)req->status : posted;
    T_CHECK(st != RVX_INPROGRESS, "%s %d: the %s outlived it", how, it, names[k]);
    T_CHECK(st == RVX_OK || st == RVX_ERR_CANCELED, "%s %d: the %s ended %s", how, it, names[k],
            rvx_status_str(st));
    if (st == RVX_OK) ended[k][0]++;
    else if (st == RVX_ERR_CANCELED) ended[k][1]++;
}

typedef struct {
    rvx_mem_t *lmem;
    uint8_t   *small, *big, *send;
    uint64_t   fetched;
    uint8_t    rbuf[64];
    rvx_request_t req[NREQ];
    rvx_status_t  st[NREQ];
} t_ops_t;

/* Everything posted on ep at once; the tag receive on w matches nothing (tag 99). */
static void post_all(rvx_worker_t *w, rvx_ep_t *ep, t_ops_t *o, const t_remote_t *rm)
{
    rvx_rkey_t rk;
    uint64_t a = 1;
    T_OK(rvx_rkey_unpack(ep, rm->packed, &rk));
    memset(o->small, 0, SMALL);
    o->st[GET] = rvx_get(ep, o->small, SMALL, rm->addr, &rk, &o->req[GET]);
    o->st[GETZ] = rvx_get_zcopy(ep, o->big, BIG, o->lmem, rm->addr, &rk, &o->req[GETZ]);
    o->st[PUTZ] = rvx_put_zcopy(ep, o->send, BIG, o->lmem, rm->addr + BIG, &rk, &o->req[PUTZ]);
    o->st[FADD] = rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, rm->addr + 2 * BIG, &rk, &o->fetched,
                               &o->req[FADD]);
    T_CHECK(rvx_am_short(ep, RVX_AM_NOTE, &a, 1) != RVX_INPROGRESS, "an AM is not a request");
    o->st[TSEND] = rvx_tag_send(ep, o->send, 64, 7, &o->req[TSEND]);
    o->st[TRNDV] = rvx_tag_send(ep, o->send, RNDV, 8, &o->req[TRNDV]);
    o->st[TRECV] = rvx_tag_recv(w, o->rbuf, 64, 99, ~0ull, &o->req[TRECV], NULL);
    o->st[FLUSH] = rvx_ep_flush_nb(ep, &o->req[FLUSH]);
    rvx_rkey_release(&rk);
}

static void check_all(const t_ops_t *o, int it, const char *how, int worker)
{
    int k;
    for (k = 0; k < NREQ; k++) {
        if (k == TRECV && !worker) continue; /* a receive belongs to the worker */
        check(k, o->st[k], &o->req[k], it, how);
    }
    if (o->st[GET] == RVX_OK || (o->st[GET] == RVX_INPROGRESS && o->req[GET].status == RVX_OK))
        T_CHECK(t_verify(o->small, SMALL, 1) < 0, "%s %d: a get ended RVX_OK without the data",
                how, it);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    t_ops_t o;
    rvx_ep_t *ep = NULL;
    int me, it, k;
    double t0 = t_now();

    t_spawn(argc, argv, 2, 300);
    me = t_start(&ctx, &w);
    memset(&o, 0, sizeof(o));
    T_OK(rvx_mem_alloc(ctx, RNDV + 2 * BIG + 64, &mem)); /* rank 1's target; rank 0's buffers */
    o.lmem = mem;
    o.send = (uint8_t *)rvx_mem_addr(mem);
    o.big = o.send + RNDV;
    o.small = (uint8_t *)malloc(SMALL);
    t_fill(rvx_mem_addr(mem), SMALL, 1); /* what rank 0's gets read */
    rm = t_exchange(ctx, mem);
    if (me == 0) {
        for (it = 0; it < ITER; it++) { /* endpoint destruction */
            T_OK(rvx_ep_create(w, 1, &ep));
            post_all(w, ep, &o, &rm[1]);
            rvx_ep_destroy(ep);
            check_all(&o, it, "rvx_ep_destroy", 0);
            if (o.st[TRECV] == RVX_INPROGRESS) T_OK(rvx_tag_cancel(w, &o.req[TRECV]));
        }
    }
    T_OK(rvx_barrier(ctx)); /* rank 1 progressed meanwhile */
    for (it = 0; it < ITER; it++) { /* worker destruction, a new worker each time */
        if (me == 0) {
            T_OK(rvx_ep_create(w, 1, &ep));
            post_all(w, ep, &o, &rm[1]);
            rvx_worker_destroy(w);
            check_all(&o, it, "rvx_worker_destroy", 1);
            T_OK(rvx_barrier(ctx));
        } else {
            T_OK(rvx_barrier(ctx)); /* rank 0's worker is gone */
            rvx_worker_destroy(w);
        }
        T_OK(rvx_worker_create(ctx, &w));
    }
    if (me == 0) {
        printf("rank 0: %d x %d destroys in %.1f s; ended RVX_OK / RVX_ERR_CANCELED:", 2, ITER,
               t_now() - t0);
        for (k = 0; k < NREQ; k++) printf(" %s %lu/%lu;", names[k], ended[k][0], ended[k][1]);
        printf("\n");
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    free(o.small);
    free(rm);
    rvx_finalize(ctx);
    return t_exit();
}
