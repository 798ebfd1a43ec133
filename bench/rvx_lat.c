/* rvx_lat: the rvx side of `make compare`. Two ranks pinned to CPU 0 and 1.
 *   - 8-byte active-message ping-pong (short AM, one 64-bit argument; the reply is sent from the
 *     handler): one-way latency = time of a block of round trips / round trips / 2, median over
 *     blocks                                                   -> "rvx am_lat_ns <x>"
 *     and the fastest block (the one least disturbed)          -> "rvx am_lat_min_ns <x>"
 *     then the same number of round trips each stamped (rdtsc), median and 99th percentile of a
 *     round trip, timer included, as floor_pingpong's rt_p50/rt_p99 (a descheduled side spoils
 *     only its own round trips: the steadier figure on a loaded machine)
 *                                                -> "rvx am_rt_p50_ns <x>", "rvx am_rt_p99_ns <x>"
 *   - 8-byte put message rate: rank 0 puts to one location in rank 1's memory in a loop, with one
 *     flush at the end (as ucx_perftest's ucp_put_bw does)     -> "rvx put_rate_mops <x>"
 *   - 8-byte fetching atomic add latency: rank 0 adds to a word of rank 1's memory, one at a time,
 *     each waited for (shm: a CPU atomic; a pair build on one node: the NIC's, by design)
 *                                                              -> "rvx amo_lat_ns <x>"
 * Run directly; it starts its two ranks itself through rvxrun (build/bin/rvxrun).
 *   rvx_lat [blocks] [round trips per block] [puts] [relax]
 * relax 1: both sides' waits for an AM call rvx_cpu_relax() (a pause) after every progress call
 * that found nothing, as the library's own waits do (floor_pingpong -p); 0 (default): bare spin. */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong) X(STOP, on_stop)
#include "bench_common.h"

static volatile uint64_t pongs;
static volatile int stop;
static int relax;

/* one pass of a wait for an AM */
static inline void am_wait_pass(rvx_worker_t *w)
{
    if (!rvx_progress(w) && relax) rvx_cpu_relax();
}

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)p; (void)len;
    rvx_am_reply_short(t, RVX_AM_PONG, a, n);
}

static void on_pong(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    pongs++;
}

static void on_stop(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    stop = 1;
}

/* `n` round trips, each timed: its median and 99th percentile in ns */
static void am_round_trips(rvx_worker_t *w, rvx_ep_t *ep, long n)
{
    double tick = bench_ns_per_stamp(), *rt = (double *)malloc(sizeof(double) * (size_t)n);
    rvx_status_t st;
    uint64_t x = 0;
    long i;
    if (!rt) return;
    for (i = 0; i < n; i++) {
        uint64_t want = pongs + 1, t0 = bench_stamp();
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_PING, &x, 1));
        while (pongs != want) am_wait_pass(w);
        rt[i] = (double)(bench_stamp() - t0) * tick;
    }
    qsort(rt, (size_t)n, sizeof(double), bench_cmp_double);
    printf("rvx am_rt_p50_ns %.1f\nrvx am_rt_p99_ns %.1f\n", rt[n / 2], rt[n * 99 / 100]);
    free(rt);
}

int main(int argc, char **argv)
{
    int blocks = argc > 1 ? atoi(argv[1]) : 21;
    long per = argc > 2 ? atol(argv[2]) : 20000, puts_n = argc > 3 ? atol(argv[3]) : 10000000, i;
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    unsigned char packed[RVX_RKEY_PACKED_SIZE], all[2][RVX_RKEY_PACKED_SIZE];
    uint64_t addrs[2], mine;
    double *lat;
    int me, b;

    relax = argc > 4 && atoi(argv[4]) == 1;
    bench_self_launch(argv, "rvx_lat", 120);
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w)) return 1;
    me = rvx_rank(ctx);
    bench_pin(me, "rvx_lat");
    if (rvx_ep_create(w, 1 - me, &ep) || rvx_mem_alloc(ctx, 4096, &mem)) return 1;
    rvx_rkey_pack(mem, packed);
    mine = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    rvx_allgather(ctx, packed, sizeof(packed), all);
    rvx_allgather(ctx, &mine, 8, addrs);
    if (rvx_rkey_unpack(ep, all[1 - me], &rk)) return 1;
    rvx_barrier(ctx);

    if (me == 0) {
        rvx_status_t st = RVX_OK;
        double t0, best;
        uint64_t x = 0;
        lat = (double *)malloc(sizeof(double) * (size_t)(blocks > 9 ? blocks : 9));
        for (b = -1; b < blocks; b++) { /* block -1 warms up */
            t0 = bench_now_ns();
            for (i = 0; i < per; i++) {
                uint64_t want = pongs + 1;
                rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_PING, &x, 1));
                while (pongs != want) am_wait_pass(w);
            }
            if (b >= 0) lat[b] = (bench_now_ns() - t0) / (double)per / 2;
        }
        qsort(lat, (size_t)blocks, sizeof(double), bench_cmp_double);
        printf("# %s\n", rvx_config_string());
        printf("rvx am_lat_ns %.1f\nrvx am_lat_min_ns %.1f\n", lat[blocks / 2], lat[0]);
        printf("# am one-way ns: min %.1f median %.1f max %.1f over %d blocks of %ld round trips\n",
               lat[0], lat[blocks / 2], lat[blocks - 1], blocks, per);
        am_round_trips(w, ep, per);
        /* put rate: best of 3 runs */
        best = 0;
        for (b = 0; b < 3; b++) {
            t0 = bench_now_ns();
            for (i = 0; i < puts_n; i++) rvx_put(ep, &i, 8, addrs[1], &rk);
            st = rvx_ep_flush(ep);
            t0 = (double)puts_n / ((bench_now_ns() - t0) / 1e3);
            if (t0 > best) best = t0;
        }
        printf("rvx put_rate_mops %.1f\n", best);
        /* fetching atomic add, one at a time: median of 9 blocks of per / 8 + 1 */
        for (b = 0; b < 9; b++) {
            long n = per / 8 + 1;
            uint64_t old = 0, sum = 0;
            rvx_request_t req;
            t0 = bench_now_ns();
            for (i = 0; i < n && st >= 0; i++) {
                st = rvx_complete(w, rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, addrs[1], &rk, &old, &req), &req);
                sum += old;
            }
            lat[b] = (bench_now_ns() - t0) / (double)n;
            if (st < 0 || sum == 0) fprintf(stderr, "rvx_lat: atomic add failed (status %d)\n", (int)st);
        }
        qsort(lat, 9, sizeof(double), bench_cmp_double);
        printf("rvx amo_lat_ns %.1f\n", lat[4]);
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_STOP, NULL, 0));
        free(lat);
    } else {
        while (!stop) am_wait_pass(w); /* serve pings, spinning (or pausing, relax 1): a latency test */
    }
    rvx_barrier(ctx);
    rvx_rkey_release(&rk);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return 0;
}
