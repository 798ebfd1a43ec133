/* pingpong: active-message ping-pong between rank 0 and rank 1; prints the build's configuration
 * and the one-way latency (half the round trip) as percentiles.
 *
 *   rvxrun -n 2 build/examples/pingpong [iterations] [payload bytes]
 *
 * With a payload of 0 the ping is a short AM carrying one 64-bit argument; otherwise a medium AM.
 * Rank 1's handler answers each ping with a reply from inside the handler. */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong) X(STOP, on_stop)
#include <rvx/rvx.h>

#include <stdio.h>

static volatile int pongs, stop;
static char payload[RVX_AM_MAX_MEDIUM];

static void on_ping(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    rvx_status_t st;
    (void)nargs;
    if (len) st = rvx_am_reply_medium(t, RVX_AM_PONG, args, 1, p, len);
    else st = rvx_am_reply_short(t, RVX_AM_PONG, args, 1);
    if (st != RVX_OK) fprintf(stderr, "pingpong: reply failed: %s\n", rvx_status_str(st));
}

static void on_pong(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    (void)t; (void)args; (void)nargs; (void)p; (void)len;
    pongs++;
}

static void on_stop(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    (void)t; (void)args; (void)nargs; (void)p; (void)len;
    stop = 1;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    long iters = argc > 1 ? atol(argv[1]) : 100000, warmup, i;
    size_t len = argc > 2 ? (size_t)atol(argv[2]) : 0;
    rvx_status_t st;
    double *oneway;
    int me;

    if (iters < 1 || len > RVX_AM_MAX_MEDIUM) {
        fprintf(stderr, "usage: pingpong [iterations >= 1] [payload bytes <= %d]\n", RVX_AM_MAX_MEDIUM);
        return 2;
    }
    warmup = iters / 10 + 10;
    if ((st = rvx_init(&ctx)) != RVX_OK || (st = rvx_worker_create(ctx, &w)) != RVX_OK) {
        fprintf(stderr, "pingpong: init: %s\n", rvx_status_str(st));
        return 1;
    }
    me = rvx_rank(ctx);
    if (rvx_size(ctx) != 2) {
        fprintf(stderr, "pingpong: needs exactly 2 ranks: rvxrun -n 2 %s\n", argv[0]);
        return 2;
    }
    if ((st = rvx_ep_create(w, 1 - me, &ep)) != RVX_OK || (st = rvx_barrier(ctx)) != RVX_OK) {
        fprintf(stderr, "pingpong: connect: %s\n", rvx_status_str(st));
        return 1;
    }

    if (me == 1) {
        /* Serve pings until told to stop, or until rank 0 disappears. */
        st = rvx_wait_flag(w, ep, &stop, -1);
        if (st != RVX_OK) fprintf(stderr, "pingpong: rank 1: %s\n", rvx_status_str(st));
    } else {
        oneway = (double *)malloc((size_t)iters * sizeof(double));
        printf("pingpong: %s\n", rvx_config_string());
        for (i = -warmup; i < iters; i++) {
            uint64_t arg = (uint64_t)i;
            int want = pongs + 1;
            double t0 = now_ns();
            if (len) rvx_am_retry(w, st, rvx_am_medium(ep, RVX_AM_PING, &arg, 1, payload, len));
            else rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_PING, &arg, 1));
            if (st != RVX_OK) break;
            while (pongs != want) {
                if (!rvx_progress(w) && (i & 1023) == 0 && rvx_ep_status(ep) != RVX_OK) {
                    st = RVX_ERR_PEER_FAILED;
                    break;
                }
            }
            if (st != RVX_OK) break;
            if (i >= 0) oneway[i] = (now_ns() - t0) / 2;
        }
        if (st != RVX_OK) {
            fprintf(stderr, "pingpong: %s\n", rvx_status_str(st));
            return 1;
        }
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_STOP, NULL, 0));
        qsort(oneway, (size_t)iters, sizeof(double), cmp_double);
        printf("pingpong: %ld round trips of %zu-byte %s AMs; one-way latency (ns):\n", iters, len,
               len ? "medium" : "short");
        printf("  min %.0f  p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  max %.0f\n", oneway[0],
               oneway[iters / 2], oneway[iters * 9 / 10], oneway[iters * 99 / 100],
               oneway[iters * 999 / 1000], oneway[iters - 1]);
        free(oneway);
    }
    rvx_barrier(ctx);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return 0;
}
