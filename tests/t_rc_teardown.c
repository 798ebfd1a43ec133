/* t_rc_teardown: a clean job ends quietly and at once over rc_mlx5. Rank 1 sends rank 0 enough
 * messages that rank 0 owes it credit returns, then destroys its worker; only then does rank 0
 * consume the messages (so its credit returns go to QPs that no longer exist), destroy its
 * endpoint, progress while those writes run out of retries, and destroy its worker. A peer that
 * has left needs none of that: rvx_ep_destroy and rvx_worker_destroy must not wait for it (the
 * QP's retries: about 2 s on rvxsim, 8.6 s with the hardware defaults), and nothing may be
 * reported as a failure. What rvx writes on stderr meanwhile is captured and checked: both
 * destroys take under 0.5 s (before the fix: 2 s and "transport retries exceeded"). */
#define RVX_AM_HANDLERS(X) X(MSG, on_msg)
#include <rvx/rvx.h>
#include "testlib.h"

#define NMSG (RVX_MLX5_RX_DEPTH / 2) /* within the credits: rank 1 never waits for rank 0 */

static int got;

static void on_msg(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 1 && a[0] == (uint64_t)got) got++;
}

/* Lines rvx wrote to the file since offset 0 that report a failure. */
static int failure_lines(FILE *f)
{
    char line[512];
    int n = 0;
    rewind(f);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "rvx:", 4) != 0) continue;
        fputs(line, stdout);
        if (strstr(line, "failed") || strstr(line, "retr")) n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    double t0, took;
    int me, i, saved, bad;
    FILE *log;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    T_OK(rvx_barrier(ctx));
    if (me == 1) {
        rvx_status_t st = RVX_OK;
        for (i = 0; i < NMSG && st == RVX_OK; i++) {
            uint64_t a = (uint64_t)i;
            st = rvx_am_short(ep, RVX_AM_MSG, &a, 1);
        }
        T_OK(st);
        T_OK(rvx_ep_flush(ep)); /* rank 0's NIC has every frame */
        rvx_worker_destroy(w);
        T_OK(rvx_barrier(ctx)); /* rank 0 may consume them now */
        T_OK(rvx_barrier(ctx));
        rvx_finalize(ctx);
        return t_exit();
    }
    T_OK(rvx_barrier(ctx)); /* rank 1's worker and QPs are gone */
    log = tmpfile();
    if (!log) { perror("tmpfile"); return 1; }
    fflush(stderr);
    saved = dup(2);
    dup2(fileno(log), 2);
    t0 = t_now();
    while (got < NMSG && t_now() - t0 < 10) rvx_progress(w); /* credit returns go out */
    T_CHECK(got == NMSG, "%d of %d messages from rank 1", got, NMSG);
    t0 = t_now();
    rvx_ep_destroy(ep);
    took = t_now() - t0;
    /* the worker lives on: the credit returns run out of retries meanwhile (2 s on rvxsim) */
    t0 = t_now();
    while (t_now() - t0 < 2.5) rvx_progress(w);
    t0 = t_now();
    rvx_worker_destroy(w);
    took += t_now() - t0;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    bad = failure_lines(log);
    fclose(log);
    printf("rank 0: endpoint and worker destroyed in %.3f s after the peer left, %d failure line(s)\n", took, bad);
    T_CHECK(took < 0.5, "rvx_ep_destroy and rvx_worker_destroy waited %.2f s for a peer that had left", took);
    T_CHECK(bad == 0, "a clean exchange reported %d failure(s) at teardown", bad);
    T_OK(rvx_barrier(ctx));
    rvx_finalize(ctx);
    return t_exit();
}
