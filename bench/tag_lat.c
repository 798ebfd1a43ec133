/* tag_lat: tag-matching latency and bandwidth against message size, two ranks pinned to CPU 0
 * and 1 (the rvx side of ucx_perftest's tag_lat and tag_bw).
 *   latency    ping-pong, each side with its receive posted before the message comes (the
 *              expected path); one-way = round trip / 2: lat_ns the median over blocks of the
 *              block's mean, p50_ns the median over all round trips (0 with --quick)
 *   bandwidth  rank 0 streams a window of sends, rank 1 has the window's receives posted and
 *              answers each window with a 0-byte message; MB/s (10^6 bytes) and, for 8 bytes,
 *              millions of messages per second
 * Each row says which protocol the size takes; the eager/rendezvous switch is printed too.
 * Output: "# size ..." rows, then machine-readable lines for bench/compare.sh:
 *   rvx tag_lat_ns <8-byte one-way latency>     rvx tag_bw_mops <8-byte message rate>
 * Usage (it starts its two ranks itself through build/bin/rvxrun):
 *   tag_lat            sizes 8 B .. 4 MiB, doubling, plus the switch and the byte below it
 *   tag_lat --quick    8 bytes only (what compare.sh runs every round) */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#include "bench_common.h"

#define MAXLEN ((size_t)4 << 20)
#define TAG_PING 1
#define TAG_PONG 2
#define TAG_DATA 3
#define TAG_ACK  4
#define TAG_STOP 5
#define WINDOW   64

static rvx_worker_t *w;
static rvx_ep_t *ep;

static void wait_req(rvx_request_t *req, rvx_status_t st)
{
    if (st == RVX_INPROGRESS)
        while (req->status == RVX_INPROGRESS) rvx_progress(w);
    else req->status = st;
    if (req->status != RVX_OK) {
        fprintf(stderr, "tag_lat: %s\n", rvx_status_str((rvx_status_t)req->status));
        exit(1);
    }
}

/* Rank 0: one-way latency of `len`-byte ping-pongs, median of `blocks` blocks of `per`. With p50,
 * also the median of every round trip's own time, halved (the clock is then read once per round
 * trip, as ucx_perftest does; a preempted round trip moves this median less than a block's mean). */
static double ping(unsigned char *sbuf, unsigned char *rbuf, size_t len, int blocks, long per, double *p50)
{
    double *lat = (double *)malloc(sizeof(double) * (size_t)blocks), t0, t, med;
    double *rt = p50 ? (double *)malloc(sizeof(double) * (size_t)blocks * (size_t)per) : NULL;
    int b;
    long i;
    for (b = -1; b < blocks; b++) {
        t0 = t = bench_now_ns();
        for (i = 0; i < per; i++) {
            rvx_request_t rr, sr;
            rvx_status_t rs = rvx_tag_recv(w, rbuf, len, TAG_PONG, ~0ull, &rr, NULL);
            wait_req(&sr, rvx_tag_send(ep, sbuf, len, TAG_PING, &sr));
            wait_req(&rr, rs);
            if (rt) {
                double u = bench_now_ns();
                if (b >= 0) rt[(long)b * per + i] = (u - t) / 2;
                t = u;
            }
        }
        if (b >= 0) lat[b] = (bench_now_ns() - t0) / (double)per / 2;
    }
    med = bench_median(lat, blocks);
    free(lat);
    if (rt) {
        *p50 = bench_median(rt, (int)((long)blocks * per));
        free(rt);
    }
    return med;
}

/* Rank 1's side of a ping-pong block: answer `n` pings of `len` bytes, the next receive posted
 * before the answer goes out. */
static void pong(unsigned char *sbuf, unsigned char *rbuf, size_t len, long n)
{
    rvx_request_t rr[2], sr;
    rvx_status_t rs[2];
    long i;
    rs[0] = rvx_tag_recv(w, rbuf, len, TAG_PING, ~0ull, &rr[0], NULL);
    for (i = 0; i < n; i++) {
        int cur = (int)(i & 1);
        wait_req(&rr[cur], rs[cur]);
        if (i + 1 < n) rs[cur ^ 1] = rvx_tag_recv(w, rbuf, len, TAG_PING, ~0ull, &rr[cur ^ 1], NULL);
        wait_req(&sr, rvx_tag_send(ep, sbuf, len, TAG_PONG, &sr));
    }
}

/* Rank 0: stream `rounds` windows of `len`-byte sends; seconds. */
static double stream(unsigned char *sbuf, size_t len, long rounds)
{
    static rvx_request_t sr[WINDOW];
    static rvx_status_t ss[WINDOW];
    double t0 = bench_now_ns();
    long r;
    int i;
    for (r = 0; r < rounds; r++) {
        rvx_request_t ar;
        rvx_status_t as = rvx_tag_recv(w, NULL, 0, TAG_ACK, ~0ull, &ar, NULL);
        for (i = 0; i < WINDOW; i++) ss[i] = rvx_tag_send(ep, sbuf, len, TAG_DATA, &sr[i]);
        for (i = 0; i < WINDOW; i++) wait_req(&sr[i], ss[i]);
        wait_req(&ar, as);
    }
    return (bench_now_ns() - t0) / 1e9;
}

static void sink(unsigned char *rbuf, size_t len, long rounds)
{
    static rvx_request_t rr[WINDOW];
    static rvx_status_t rs[WINDOW];
    long r;
    int i;
    for (r = 0; r < rounds; r++) {
        rvx_request_t ar;
        for (i = 0; i < WINDOW; i++) rs[i] = rvx_tag_recv(w, rbuf, len, TAG_DATA, ~0ull, &rr[i], NULL);
        for (i = 0; i < WINDOW; i++) wait_req(&rr[i], rs[i]);
        wait_req(&ar, rvx_tag_send(ep, NULL, 0, TAG_ACK, &ar));
    }
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    size_t sizes[40];
    int nsizes = 0, me, k;
    size_t s, thr = RVX_RNDV_THRESH_BYTES;
    unsigned char *sbuf, *rbuf;
    rvx_context_t *ctx;

    bench_self_launch(argv, "tag_lat", 300);
    sizes[nsizes++] = 8;
    if (!quick) {
        for (s = 16; s <= MAXLEN; s *= 2) {
            if (thr > sizes[nsizes - 1] + 1 && thr < s) { /* the switch, and the byte below it */
                sizes[nsizes++] = thr - 1;
                sizes[nsizes++] = thr;
            }
            sizes[nsizes++] = s;
        }
    }
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w)) return 1;
    me = rvx_rank(ctx);
    bench_pin(me, "tag_lat");
    if (rvx_ep_create(w, 1 - me, &ep)) return 1;
    sbuf = (unsigned char *)malloc(MAXLEN);
    rbuf = (unsigned char *)malloc(MAXLEN);
    memset(sbuf, 1, MAXLEN);
    memset(rbuf, 2, MAXLEN);
    rvx_barrier(ctx);
    if (me == 0) {
        printf("# %s\n", rvx_config_string());
        printf("# eager/rendezvous switch at %zu bytes (rndv=%s)\n", thr, RVX_RNDV_NAME);
        printf("# %10s %10s %10s %12s %10s  %s\n", "size", "lat_ns", "p50_ns", "bw_MBs", "rate_Mps", "protocol");
    }
    for (k = 0; k < nsizes; k++) {
        size_t len = sizes[k];
        /* work per size: about the same bytes for large messages, enough round trips for small */
        long per = len <= 4096 ? 20000 : len <= 65536 ? 2000 : (long)(((size_t)64 << 20) / len) + 4;
        int blocks = len <= 65536 ? 11 : 5;
        long rounds = len <= 4096 ? 2000 : (long)(((size_t)512 << 20) / (len * WINDOW)) + 2;
        if (quick) { per = 20000; blocks = 21; rounds = 20000; }
        if (me == 0) {
            double p50 = 0, lat = ping(sbuf, rbuf, len, blocks, per, quick ? NULL : &p50), secs, bw, rate;
            rvx_request_t sr;
            secs = stream(sbuf, len, rounds);
            bw = (double)len * WINDOW * (double)rounds / secs / 1e6;
            rate = (double)WINDOW * (double)rounds / secs / 1e6;
            printf("  %10zu %10.1f %10.1f %12.1f %10.2f  %s\n", len, lat, p50, bw, rate,
                   len >= thr ? "rndv " RVX_RNDV_NAME : len <= RVX_TAG_SHORT_MAX ? "eager short"
                   : len <= (size_t)RVX_AM_MAX_MEDIUM - 8 ? "eager bcopy" : "eager fragmented");
            if (len == 8) {
                printf("rvx tag_lat_ns %.1f\n", lat);
                printf("rvx tag_bw_mops %.2f\n", rate);
            }
            fflush(stdout);
            wait_req(&sr, rvx_tag_send(ep, NULL, 0, TAG_STOP, &sr)); /* next size */
        } else {
            rvx_request_t rr;
            long b;
            for (b = -1; b < blocks; b++) pong(sbuf, rbuf, len, per);
            sink(rbuf, len, rounds);
            wait_req(&rr, rvx_tag_recv(w, NULL, 0, TAG_STOP, ~0ull, &rr, NULL));
        }
    }
    rvx_barrier(ctx);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    free(sbuf);
    free(rbuf);
    return 0;
}
