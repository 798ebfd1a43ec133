/* t_flush: flush semantics between two processes.
 *  - with nothing outstanding, rvx_ep_flush_nb and rvx_worker_flush_nb return RVX_OK at once
 *  - after rvx_ep_flush, every earlier put is visible at the target (checked by the target in the
 *    handler of an AM sent after the flush)
 *  - rvx_worker_flush covers every endpoint of the worker
 *  - ordering: a put followed by an AM on the same endpoint is seen in that order
 * On more ranks (RVX_TEST_RANKS, an even count) each rank works with two partners at once, rank^1
 * and rank+N/2 (on its node and across when ranks are placed in 2 blocks), each putting into its
 * own slot of the target's region: the worker flush then covers two endpoints with puts. */
#define RVX_AM_HANDLERS(X) X(CHECK, on_check) X(CHECKED, on_checked)
#include <rvx/rvx.h>
#include "testlib.h"

#define REGION (256 * 1024)
#define NI     200
static rvx_mem_t *mem;
static volatile int checks, checked, bad;

/* args: seed, offset, length of the data that must already be in our region */
static void on_check(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    if (t_verify((unsigned char *)rvx_mem_addr(mem) + a[1], (size_t)a[2], a[0]) >= 0) bad++;
    checks++;
    T_OK(rvx_am_reply_short(t, RVX_AM_CHECKED, NULL, 0)); /* the sender may overwrite now */
}

static void on_checked(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    checked++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[2], *self;
    rvx_rkey_t rk[2], rks;
    t_remote_t *rm;
    static unsigned char buf[2][REGION / 2];
    int me, n, np, j, peer[2], i;
    unsigned idle;
    uint64_t lb; /* the loopback put's place: after the partners' slots */
    rvx_status_t st;

    t_spawn_upto(argc, argv, 2, 64, 120);
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    /* partner j puts into slot j of our region (one partner, one slot, on 2 ranks) */
    np = t_partners("t_flush", me, n, peer);
    lb = (uint64_t)np * REGION;
    T_OK(rvx_mem_alloc(ctx, (size_t)lb + 4096, &mem));
    rm = t_exchange(ctx, mem);
    for (j = 0; j < np; j++) {
        T_OK(rvx_ep_create(w, peer[j], &ep[j]));
        T_OK(rvx_rkey_unpack(ep[j], rm[peer[j]].packed, &rk[j]));
    }
    T_OK(rvx_ep_create(w, me, &self));
    T_OK(rvx_rkey_unpack(self, rm[me].packed, &rks));
    /* before the barrier: no peer can have sent anything that needs an answer yet */
    T_OK(rvx_ep_flush_nb(ep[0], NULL));
    T_OK(rvx_worker_flush_nb(w, NULL));
    T_OK(rvx_barrier(ctx));

    for (i = 0; i < NI; i++) {
        uint64_t a[2][3];
        size_t len = (size_t)(i * 997) % (REGION / 2), off = (size_t)(i * 13) % 64;
        for (j = 0; j < np; j++) {
            /* the bytes depend on sender, receiver, round and position */
            a[j][0] = ((uint64_t)i * 64 + (uint64_t)me) * 64 + (uint64_t)peer[j];
            a[j][1] = (uint64_t)j * REGION + off;
            a[j][2] = len;
            t_fill(buf[j], len, a[j][0]);
            T_OK(rvx_put(ep[j], buf[j], len, rm[peer[j]].addr + a[j][1], &rk[j]));
        }
        if (i % 3 == 0)
            for (j = 0; j < np; j++) T_OK(rvx_ep_flush(ep[j]));
        else if (i % 3 == 1) T_OK(rvx_worker_flush(w));
        /* i % 3 == 2: no flush; same-endpoint ordering must still deliver the put first */
        for (j = 0; j < np; j++) {
            rvx_am_retry(w, st, rvx_am_short(ep[j], RVX_AM_CHECK, a[j], 3));
            T_CHECK(st == RVX_OK, "check %d to %d: %s", i, peer[j], rvx_status_str(st));
        }
        idle = 0; /* the peers have looked before we overwrite; yield the core while they do */
        while (checked < (i + 1) * np)
            if (!rvx_progress(w)) rvx__backoff(&idle);
    }
    /* worker flush covering a loopback put too */
    t_fill(buf[0], 4096, 77);
    T_OK(rvx_put(self, buf[0], 4096, rm[me].addr + lb, &rks));
    T_OK(rvx_worker_flush(w));
    T_CHECK(t_verify((unsigned char *)rvx_mem_addr(mem) + lb, 4096, 77) < 0, "loopback put flushed");
    idle = 0;
    while (checks < NI * np)
        if (!rvx_progress(w)) rvx__backoff(&idle);
    T_CHECK(bad == 0, "%d checks found data missing after flush", bad);
    T_OK(rvx_barrier(ctx));
    for (j = 0; j < np; j++) rvx_rkey_release(&rk[j]);
    rvx_rkey_release(&rks);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
