/* t_boot: the bootstrap contract, checked the same way for each bootstrap. Built as usual it is
 * the local bootstrap and starts itself on 3 ranks under rvxrun; built with
 * -DRVX_BOOT=RVX_BOOT_PMIX (build/pmix/t_boot) it is started by tests/t_mpirun.sh with
 * `mpirun -np 3`. Checked: every rank has a distinct rank and the same size; allgathers of 0, 1,
 * 8, 1000 and 65536 bytes arrive in rank order; 200 collectives in a row; and a rank already
 * waiting in a collective still answers an active message that another rank waits for before it
 * joins (a bootstrap whose wait did not let core progress the workers would deadlock here). */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int pongs;

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)p; (void)len;
    T_OK(rvx_am_reply_short(t, RVX_AM_PONG, a, n));
}

static void on_pong(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    pongs++;
}

int main(int argc, char **argv)
{
    static const size_t lens[] = {0, 1, 8, 1000, 65536};
    int want = argc > 1 ? atoi(argv[1]) : 3;
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    int me, n, r, i;
    unsigned k;
    double t0;

#if RVX_BOOT != RVX_BOOT_PMIX
    t_spawn(argc, argv, 3, 60);
#endif
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    T_CHECK(n == want, "size %d, expected %d", n, want);
    T_CHECK(me >= 0 && me < n, "rank %d of %d", me, n);
    T_CHECK(strstr(rvx_config_string(), " boot=" RVX_BOOT_NAME " ") != NULL, "config string: %s",
            rvx_config_string());

    /* distinct ranks: each rank's own number, gathered, is 0 .. n-1 in order */
    {
        int *all = (int *)calloc((size_t)n, sizeof(int));
        T_OK(rvx_allgather(ctx, &me, sizeof(me), all));
        for (r = 0; r < n; r++) T_CHECK(all[r] == r, "slot %d holds rank %d", r, all[r]);
        free(all);
    }

    /* sizes, rank order, and nothing written past the end */
    for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        unsigned char *mine = (unsigned char *)malloc(len + 1);
        unsigned char *all = (unsigned char *)malloc((size_t)n * len + 64);
        t_fill(mine, len, (uint64_t)me * 100 + k);
        memset(all, 0xA5, (size_t)n * len + 64);
        T_OK(rvx_allgather(ctx, mine, len, all));
        for (r = 0; r < n; r++) {
            long bad = t_verify(all + (size_t)r * len, len, (uint64_t)r * 100 + k);
            T_CHECK(bad < 0, "allgather of %zu bytes: rank %d's part differs at byte %ld", len, r, bad);
        }
        for (i = 0; i < 64; i++)
            T_CHECK(all[(size_t)n * len + (size_t)i] == 0xA5, "allgather of %zu bytes wrote past "
                    "the end", len);
        free(mine);
        free(all);
    }

    /* many rounds in a row: every round is its own, none is read in place of another */
    t0 = rvx__now_s();
    for (i = 0; i < 200; i++) {
        uint64_t v = (uint64_t)i * 1000 + (uint64_t)me, *all = (uint64_t *)calloc((size_t)n, 8);
        if (i % 2) T_OK(rvx_barrier(ctx));
        T_OK(rvx_allgather(ctx, &v, sizeof(v), all));
        for (r = 0; r < n; r++)
            T_CHECK(all[r] == (uint64_t)i * 1000 + (uint64_t)r, "round %d: rank %d sent %llu", i, r,
                    (unsigned long long)all[r]);
        free(all);
    }
    if (me == 0) printf("300 collectives in %.3f s\n", rvx__now_s() - t0);

    /* rank 0 goes straight into a barrier; rank 1 first needs rank 0's answer to a ping */
    for (r = 0; r < n; r++) T_OK(rvx_ep_create(w, r, &ep));
    T_OK(rvx_barrier(ctx));
    if (me == 1) {
        uint64_t a = 7;
        T_OK(rvx_ep_create(w, 0, &ep));
        T_OK(rvx_am_short(ep, RVX_AM_PING, &a, 1));
        T_OK(rvx_wait_flag(w, ep, &pongs, 10000));
    }
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));

    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    if (!t_failures) printf("rank %d of %d: bootstrap (%s) ok\n", me, n, RVX_BOOT_NAME);
    return t_exit();
}
