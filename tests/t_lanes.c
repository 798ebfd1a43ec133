/* t_lanes: multi-lane rendezvous (RVX_LANES=2) over rc_mlx5, two ranks, rank 0 sending to rank 1.
 * Built once per protocol (build/lanes/t_lanes_get, _put, _pipeline) and driven by
 * tests/t_lanes.sh, which runs it on rvxsim with two devices of different port speeds and checks
 * the model's own per-device byte counts (RVXSIM_STATS_FILE).
 *   sweep   every size around the threshold, the stripe minimum, the pipeline's phases and a few
 *           MiB, each +-1: data checked byte for byte, guard bytes behind the receive buffer
 *           untouched, and nothing left in flight
 *   small   rendezvous messages below the stripe minimum (they must all move on lane 0)
 *   share   NMSG messages of SHARE_LEN bytes (the byte counts of this run are the lane shares)
 *   fail    (with RVXSIM_RDMA_DENY=mlx5_1) a striped message fails on both sides with
 *           RVX_ERR_REMOTE_ACCESS, not a hang; messages that do not use lane 1 still arrive
 * Each wait has a deadline: a lost stripe fails the test instead of hanging it. */
#ifndef RVX_TL
#define RVX_TL RVX_TL_RC_MLX5
#endif
#define RVX_TAG 1
#ifndef RVX_LANES
#define RVX_LANES 2
#endif
#ifndef RVX_RNDV_THRESH
#define RVX_RNDV_THRESH 32768 /* ib_edr's model with two lanes never picks rendezvous (README) */
#endif
#ifndef RVX_LANE_STRIPE_MIN
#define RVX_LANE_STRIPE_MIN 131072
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define GUARD     64
#define SHARE_LEN ((size_t)4 << 20)
#define NMSG      8

static rvx_worker_t *w;
static rvx_context_t *ctx;
static rvx_ep_t *ep;
static int me;

static rvx_status_t t_wait(rvx_request_t *req, const char *what, long a)
{
    return t_wait_req(w, req, what, a);
}

/* One message of len bytes from rank 0 to rank 1, checked on arrival: both sides end with
 * `want`, and when that is RVX_OK (and `check`), every byte and the guard are checked. */
static void one_st(size_t len, uint64_t seed, int check, rvx_status_t want)
{
    static unsigned char *buf;
    static size_t cap;
    rvx_request_t req;
    rvx_status_t st;
    if (cap < len + GUARD) {
        free(buf);
        cap = len + GUARD;
        buf = (unsigned char *)malloc(cap);
        if (!buf) { fprintf(stderr, "FAIL: no memory\n"); exit(1); }
    }
    rvx_request_init(&req);
    if (me == 0) {
        t_fill(buf, len, seed);
        st = rvx_tag_send(ep, buf, len, seed, &req);
        if (st == RVX_INPROGRESS) st = t_wait(&req, "send of bytes", (long)len);
        T_CHECK(st == want, "send of %zu bytes: %s, want %s", len, rvx_status_str(st), rvx_status_str(want));
    } else {
        rvx_tag_info_t info;
        size_t i;
        memset(buf, 0xa5, len + GUARD);
        st = rvx_tag_recv(w, buf, len, seed, ~(uint64_t)0, &req, &info);
        if (st == RVX_INPROGRESS) st = t_wait(&req, "receive of bytes", (long)len);
        T_CHECK(st == want, "receive of %zu bytes: %s, want %s", len, rvx_status_str(st), rvx_status_str(want));
        if (st == RVX_OK)
            T_CHECK(info.length == len, "receive of %zu bytes: length %zu", len, (size_t)info.length);
        if (check && want == RVX_OK) {
            long bad = t_verify(buf, len, seed);
            T_CHECK(bad < 0, "%zu bytes: byte %ld differs", len, bad);
            for (i = 0; i < GUARD; i++)
                if (buf[len + i] != 0xa5) break;
            T_CHECK(i == GUARD, "%zu bytes: guard byte %zu behind the buffer overwritten", len, i);
        }
    }
}

static void one(size_t len, uint64_t seed, int check) { one_st(len, seed, check, RVX_OK); }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "sweep";
    size_t sizes[64];
    int n = 0, i, d;
    double t0;
    t_spawn(argc, argv, 2, 300);
    me = t_start(&ctx, &w);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    if (me == 0)
        printf("%s\nlanes: %u MB/s, %u MB/s; threshold %zu, stripe minimum %d\n", rvx_config_string(),
               rvx_lane_bw_mbs(ctx, 0), rvx_lane_bw_mbs(ctx, 1), (size_t)RVX_RNDV_THRESH_BYTES,
               RVX_LANE_STRIPE_MIN);
    T_OK(rvx_barrier(ctx));
    t0 = rvx__now_s();
    if (!strcmp(mode, "share")) {
        for (i = 0; i < NMSG; i++) one(SHARE_LEN, 1000 + (uint64_t)i, i == 0);
    } else if (!strcmp(mode, "fail")) {
        /* run with RVXSIM_RDMA_DENY=mlx5_1: lane 1 refuses every RDMA, lane 0 works */
        one_st((size_t)1 << 20, 1, 0, RVX_ERR_REMOTE_ACCESS);  /* a stripe fails: both sides know */
        one(RVX_LANE_STRIPE_MIN - 1, 2, 1);                    /* lane 0 alone: unaffected */
        one(1000, 3, 1);                                       /* eager */
        one_st((size_t)2 << 20, 4, 0, RVX_ERR_REMOTE_ACCESS);  /* lane 1 stays failed: no hang */
        one(RVX_RNDV_THRESH_BYTES, 5, 1);
    } else if (!strcmp(mode, "small")) {
        one(RVX_RNDV_THRESH_BYTES, 1, 1);
        one(RVX_RNDV_THRESH_BYTES + 1, 2, 1);
        one(RVX_LANE_STRIPE_MIN - 1, 3, 1);
    } else {
        const size_t base[] = {1, 4096, RVX_RNDV_THRESH_BYTES, RVX_LANE_STRIPE_MIN,
                               RVX_LANE_STRIPE_MIN + 64, RVX_PIPE_EAGER + RVX_PIPE_BOUNCE,
                               RVX_PIPE_EAGER + RVX_PIPE_BOUNCE + RVX_PIPE_CHUNK, (size_t)1 << 20,
                               ((size_t)3 << 20) + 4099, (size_t)4 << 20};
        for (i = 0; i < (int)(sizeof(base) / sizeof(base[0])); i++)
            for (d = -1; d <= 1; d++) sizes[n++] = base[i] + (size_t)d;
        for (i = 0; i < n; i++)
            if (sizes[i]) one(sizes[i], (uint64_t)i + 1, 1);
    }
    T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "operations left in flight: %u, queued %u",
            w->proto_pending, w->proto_queued);
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    printf("rank %d: %s done in %.1f s\n", me, mode, rvx__now_s() - t0);
    return t_exit();
}
