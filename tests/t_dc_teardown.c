/* t_dc_teardown: a job that ends after a clean barrier ends quietly and at once, on dc_mlx5 and
 * on both pairs (shm + rc_mlx5, shm + dc_mlx5: tests/run.sh runs it on 8 ranks as 2 nodes).
 * README's program on n ranks (RVX_TEST_RANKS, 2 to 32; 2 by default): a few rounds of each rank
 * pinging the next and answering the previous, then one ping to every rank (at 32 ranks more
 * peers hold credits than there are DCIs), then a barrier. The odd ranks destroy their worker
 * first; after a second barrier the even ones destroy theirs, every one with a neighbour that has
 * left. Credits are swept only every 10 s here, so every rank still holds credits for frames its
 * neighbours took but did not report: endpoint destruction must give them back without asking the
 * peer (which, for the even ranks, is gone), and on dc_mlx5 not at all to a peer that said its
 * worker was going (check_left).
 * Checked by events: nothing rvx or rvxsim writes on stderr during the destruction reports a
 * failure or a retry. Also, loosely, by time: the model's retries are set to 8 s
 * (RVXSIM_RETRY_TIMEOUT_MS), so a destroy that waited for a departed peer takes 8 s and one that
 * did not takes milliseconds; the bound of 4 s lies between, far from what load adds to the
 * latter (the time is printed). Before the fix: 8 s per departed neighbour (16 s on 4 ranks) and
 * "transport retries exceeded"; after: 4 ms at 2 ranks to 315 ms at 32 on 2 cores, the CPU work
 * of the destruction (3 to 11 ms a process, most of it unmapping) queued for the cores. */
#define RVX_DC_CREDIT_IDLE_US 10000000 /* no sweep reports frames taken during the test */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong)
#include <rvx/rvx.h>
#include "testlib.h"

#define ROUNDS 3 /* frames per neighbour, well under half a batch of credits: none reported */

static volatile int pongs;

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

/* A ping to ep; waits (progressing) until `want` pongs have come in all. */
static void ping(rvx_worker_t *w, rvx_ep_t *ep, int want)
{
    uint64_t a = (uint64_t)want;
    double t0 = t_now();
    rvx_status_t st;
    rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_PING, &a, 1));
    T_OK(st);
    while (pongs < want && t_now() - t0 < 60) rvx_progress(w);
    T_CHECK(pongs == want, "%d pongs of %d", pongs, want);
}

/* Lines of rvx or rvxsim in the file that report a failure or a retry (each is echoed). */
static int failure_lines(FILE *f)
{
    char line[512];
    int n = 0;
    rewind(f);
    while (fgets(line, sizeof(line), f)) {
        fputs(line, stdout);
        if (strncmp(line, "rvx", 3) != 0) continue;
        if (strstr(line, "fail") || strstr(line, "retr") || strstr(line, "gone")) n++;
    }
    return n;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* rvx_worker_destroy with stderr captured; returns its time, *cpu the calling thread's CPU time
 * in it (the model's engine thread not counted), *bad the failure lines. */
static double destroy_quietly(rvx_worker_t *w, double *cpu, int *bad)
{
    FILE *log = tmpfile();
    int saved;
    double t0, c0, took;
    if (!log) { perror("tmpfile"); exit(1); }
    fflush(stderr);
    saved = dup(2);
    dup2(fileno(log), 2);
    t0 = t_now();
    c0 = thread_cpu();
    rvx_worker_destroy(w);
    *cpu = thread_cpu() - c0;
    took = t_now() - t0;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *bad = failure_lines(log);
    fclose(log);
    return took;
}

#if RVX_TL == RVX_TL_DC_MLX5
/* The worker's dc_mlx5 interface (in a pair, its network side). */
static rvx__dc_iface_t *dc_iface(rvx_worker_t *w)
{
#if RVX_PAIR
    return &w->iface[0].net;
#else
    return &w->iface[0];
#endif
}
#endif

/* dc_mlx5 and its pair: a neighbour whose worker is gone said so in its last report
 * (RVX__DC_LEFT), and the endpoint to it then gives nothing back, its pool being gone: nothing
 * released, nothing held. Where the report did not come (the neighbour's DCIs can be destroyed
 * before their engine sent it, on a loaded machine) nothing is checked, and the line says so.
 * In the pair, a neighbour on this node sends its messages through shm and holds no dc_mlx5
 * credits: its worker sends no dc_mlx5 report at all (rvx__dc_ep_no_msgs). */
static void check_left(rvx_worker_t *w, rvx_ep_t *ep, int rank)
{
#if RVX_TL == RVX_TL_DC_MLX5
    rvx__dc_iface_t *ifc = dc_iface(w);
    unsigned long released = ifc->released;
    uint32_t held = ifc->peers[rank].claimed;
#if RVX_PAIR
    if (ep->tl[0].intra) {
        T_CHECK(!rvx__dc_peer_left(ifc, rank) && !held,
                "rank %d, on this node, %s", rank, held ? "holds dc_mlx5 credits" :
                "sent a dc_mlx5 report as its worker went (its messages go through shm)");
        return;
    }
#endif
    if (!rvx__dc_peer_left(ifc, rank)) {
        printf("rank %d was not told that rank %d left: not checked\n", rvx_rank(w->ctx), rank);
        return;
    }
    if (RVX_PAIR && !held) return;
    T_CHECK(held > 0, "no credits held at rank %d after pinging it", rank);
    rvx_ep_destroy(ep);
    T_CHECK(ifc->released == released && ifc->peers[rank].claimed == 0,
            "credits given back to rank %d, whose worker had left (%lu released, %u held)", rank,
            ifc->released - released, ifc->peers[rank].claimed);
#else
    (void)w; (void)ep; (void)rank;
#endif
}

/* dc_mlx5 (and the pair's network lane): the worker's first step of going gives back every
 * credit it holds, each right behind that peer's last report, so that no endpoint's teardown
 * has a give-back left to post. Called while every peer is there: each holds credits. */
static void check_leave_gives_back(rvx_worker_t *w)
{
#if RVX_TL == RVX_TL_DC_MLX5
    rvx__dc_iface_t *ifc = dc_iface(w);
    uint64_t held = 0;
    int r;
    for (r = 0; r < ifc->nranks; r++) held += ifc->peers[r].claimed;
    T_CHECK(held > 0, "rank %d holds no credits after pinging every rank", rvx_rank(w->ctx));
    rvx__tl_iface_leave(&w->iface[0]); /* what rvx_worker_destroy does first (once) */
    for (r = 0; r < ifc->nranks; r++)
        T_CHECK(ifc->peers[r].claimed == 0 || rvx__dc_peer_left(ifc, r),
                "rank %d's %u credits are still held once the worker began to go", r,
                ifc->peers[r].claimed);
#else
    (void)w;
#endif
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *next, *prev, *eps[32];
    double took, cpu;
    int me, n, i, bad;

    setenv("RVXSIM_RETRY_TIMEOUT_MS", "8000", 0); /* waiting for a departed peer takes 8 s */
    t_spawn_upto(argc, argv, 2, 32, 120);
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    T_OK(rvx_ep_create(w, (me + 1) % n, &next));
    T_OK(rvx_ep_create(w, (me + n - 1) % n, &prev));
    T_OK(rvx_barrier(ctx));
    for (i = 0; i < ROUNDS; i++) ping(w, next, i + 1);
    for (i = 1; i < n; i++) T_OK(rvx_ep_create(w, (me + i) % n, &eps[i])); /* a ping's answer */
    T_OK(rvx_barrier(ctx)); /* comes once the pinged rank has an endpoint back */
    for (i = 1; i < n; i++) ping(w, eps[i], ROUNDS + i); /* more peers hold credits than DCIs */
    T_OK(rvx_barrier(ctx)); /* every rank has had its pongs: the exchange is over */
    if (me % 2) {
        check_leave_gives_back(w);
        took = destroy_quietly(w, &cpu, &bad);
        T_OK(rvx_barrier(ctx));
    } else {
        T_OK(rvx_barrier(ctx)); /* the odd ranks' workers are gone */
        check_left(w, next, (me + 1) % n);
        took = destroy_quietly(w, &cpu, &bad);
    }
    printf("rank %d of %d: worker destroyed in %.1f ms, %.1f ms of its CPU (%s), %d failure line(s)\n",
           me, n, took * 1e3, cpu * 1e3, me % 2 ? "neighbours there" : "a neighbour gone", bad);
    T_CHECK(bad == 0, "a clean job reported %d failure(s) at teardown", bad);
    T_CHECK(took < 4.0, "rvx_worker_destroy waited %.2f s for a peer that had left", took);
    T_OK(rvx_barrier(ctx));
    rvx_finalize(ctx);
    return t_exit();
}
