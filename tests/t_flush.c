/* t_flush: flush semantics between two processes.
 *  - with nothing outstanding, rvx_ep_flush_nb and rvx_worker_flush_nb return RVX_OK at once
 *  - after rvx_ep_flush, every earlier put is visible at the target (checked by the target in the
 *    handler of an AM sent after the flush)
 *  - rvx_worker_flush covers every endpoint of the worker
 *  - ordering: a put followed by an AM on the same endpoint is seen in that order */
#define RVX_AM_HANDLERS(X) X(CHECK, on_check) X(CHECKED, on_checked)
#include <rvx/rvx.h>
#include "testlib.h"

#define REGION (256 * 1024)
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
    rvx_ep_t *ep, *self;
    rvx_rkey_t rk, rks;
    t_remote_t *rm;
    static unsigned char buf[REGION];
    int me, peer, i;
    rvx_status_t st;

    t_spawn(argc, argv, 2, 120);
    me = t_start(&ctx, &w);
    peer = 1 - me;
    T_OK(rvx_mem_alloc(ctx, REGION, &mem));
    rm = t_exchange(ctx, mem);
    T_OK(rvx_ep_create(w, peer, &ep));
    T_OK(rvx_ep_create(w, me, &self));
    T_OK(rvx_rkey_unpack(ep, rm[peer].packed, &rk));
    T_OK(rvx_rkey_unpack(self, rm[me].packed, &rks));
    /* before the barrier: no peer can have sent anything that needs an answer yet */
    T_OK(rvx_ep_flush_nb(ep, NULL));
    T_OK(rvx_worker_flush_nb(w, NULL));
    T_OK(rvx_barrier(ctx));

    for (i = 0; i < 200; i++) {
        uint64_t a[3];
        size_t len = (size_t)(i * 997) % (REGION / 2), off = (size_t)(i * 13) % 64;
        a[0] = (uint64_t)i * 2 + (uint64_t)me;
        a[1] = off;
        a[2] = len;
        t_fill(buf, len, a[0]);
        T_OK(rvx_put(ep, buf, len, rm[peer].addr + off, &rk));
        if (i % 3 == 0) T_OK(rvx_ep_flush(ep));
        else if (i % 3 == 1) T_OK(rvx_worker_flush(w));
        /* i % 3 == 2: no flush; same-endpoint ordering must still deliver the put first */
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_CHECK, a, 3));
        T_CHECK(st == RVX_OK, "check %d: %s", i, rvx_status_str(st));
        while (checked < i + 1) rvx_progress(w); /* the peer has looked before we overwrite */
    }
    /* worker flush covering a loopback put too */
    t_fill(buf, 4096, 77);
    T_OK(rvx_put(self, buf, 4096, rm[me].addr + REGION / 2, &rks));
    T_OK(rvx_worker_flush(w));
    T_CHECK(t_verify((unsigned char *)rvx_mem_addr(mem) + REGION / 2, 4096, 77) < 0, "loopback put flushed");
    while (checks < 200) rvx_progress(w);
    T_CHECK(bad == 0, "%d checks found data missing after flush", bad);
    T_OK(rvx_barrier(ctx));
    rvx_rkey_release(&rk);
    rvx_rkey_release(&rks);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
