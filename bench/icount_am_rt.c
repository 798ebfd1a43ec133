/* icount_am_rt: instructions of one 8-byte AM round trip on shm, cut as rvx_lat's ping-pong
 * runs it, for callgrind (bench/am_rt.sh). One process, an endpoint to itself: the request goes
 * into this process's own ring and comes back on its reply ring, through the same code a second
 * process runs (loopback changes only which mailbox the rings sit in). Each part is a noinline
 * wrapper, counted alone (--toggle-collect) over N and 2N round trips:
 *   send     rvx_am_short with one argument: the client's request
 *   serve    rvx_progress that finds the request, runs its handler, which replies (the server)
 *   finish   rvx_progress that finds the reply and runs its handler (the client)
 *   empty    rvx_progress with nothing arrived: one pass of either side's wait
 * Usage: icount_am_rt <N>: N round trips, each send, serve, finish, empty, checked. */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong)
#include "bench_common.h"

static uint64_t pongs, sum;

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)p; (void)len;
    rvx_am_reply_short(t, RVX_AM_PONG, a, n); /* as rvx_lat's: the arguments back */
}

static void on_pong(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    sum += a[0];
    pongs++;
}

RVX_NOINLINE rvx_status_t rt_send(rvx_ep_t *ep, uint64_t x) { return rvx_am_short(ep, RVX_AM_PING, &x, 1); }
RVX_NOINLINE int rt_serve(rvx_worker_t *w) { return rvx_progress(w); }
RVX_NOINLINE int rt_finish(rvx_worker_t *w) { return rvx_progress(w); }
RVX_NOINLINE int rt_empty(rvx_worker_t *w) { return rvx_progress(w); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0, i, bad = 0;
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;

    if (n < 1) {
        fprintf(stderr, "usage: icount_am_rt <N>\n");
        return 2;
    }
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w) || rvx_ep_create(w, rvx_rank(ctx), &ep)) return 1;
    for (i = 0; i < n; i++) {
        bad += rt_send(ep, (uint64_t)i) != RVX_OK;
        bad += rt_serve(w) != 1;   /* the request, answered */
        bad += rt_finish(w) != 1;  /* the reply */
        bad += rt_empty(w) != 0;
    }
    if (bad || pongs != (uint64_t)n || sum != (uint64_t)n * (uint64_t)(n - 1) / 2) {
        fprintf(stderr, "icount_am_rt: %ld failed steps, %llu replies of %ld\n", bad,
                (unsigned long long)pongs, n);
        return 1;
    }
    printf("am_rt x %ld done (%s)\n", n, rvx_config_string());
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return 0;
}
