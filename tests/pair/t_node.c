/* t_node: the node number the bootstrap gives each rank (ctx->boot.node), gathered and checked
 * on rank 0 against what the launcher was told:
 *   t_node blocks K   node of rank r is r*K/N (rvxrun --nodes K, or RVX_NODE set per rank)
 *   t_node same       every rank has the same node, whatever its value (one machine under mpirun)
 * Every rank prints "rank R node X"; rank 0 prints "nodes ok: ..." when all match.
 * Each rank's place on its node (ctx->boot.local of nlocal, which a pair build sizes its mailbox
 * by) is checked too: on every node the local ranks are distinct, below one shared size; under
 * rvxrun --nodes (blocks, local bootstrap) they are exact: rank r's index in its block, of the
 * block's size; with RVX_NODE set per rank under PMIx (no RVX_LOCAL_*) the rank in the job, of
 * the job's size. Rank 0 prints "local ranks ok: ...". Built for the
 * local bootstrap (started by rvxrun) and for PMIx (started by mpirun), by tests/t_nodes.sh; the
 * PMIx build also checks the PMIX_LOCAL_PEERS fallback's parser (Open MPI gives PMIX_NODEID). */
#include <rvx/rvx.h>
#include "testlib.h"

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    int me, n, r, k = argc > 2 ? atoi(argv[2]) : 1, *all, *place, q;
    int blocks = argc > 1 && !strcmp(argv[1], "blocks");

#if RVX_BOOT == RVX_BOOT_PMIX
    T_CHECK(rvx__pmix_lowest_local("3,1,2") == 1 && rvx__pmix_lowest_local("5") == 5 &&
            rvx__pmix_lowest_local("0,1,") == 0, "PMIX_LOCAL_PEERS lists");
    T_CHECK(rvx__pmix_lowest_local("") == -1 && rvx__pmix_lowest_local("1,x") == -1 &&
            rvx__pmix_lowest_local("-2,3") == -1, "malformed PMIX_LOCAL_PEERS lists");
#endif
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    printf("rank %d node %d\n", me, ctx->boot.node);
    all = (int *)calloc((size_t)n, sizeof(int));
    T_OK(rvx_allgather(ctx, &ctx->boot.node, sizeof(int), all));
    if (me == 0) {
        for (r = 0; r < n; r++) {
            if (blocks)
                T_CHECK(all[r] == (int)((long)r * k / n), "rank %d is on node %d, expected %d of %d",
                        r, all[r], (int)((long)r * k / n), k);
            else
                T_CHECK(all[r] == all[0], "rank %d is on node %d, rank 0 on node %d", r, all[r], all[0]);
        }
        if (!t_failures)
            printf("nodes ok: %d ranks, %s %d (%s)\n", n, blocks ? "blocks of" : "all on node",
                   blocks ? k : all[0], RVX_BOOT_NAME);
    }
    place = (int *)calloc((size_t)n * 3, sizeof(int));
    {
        int mine[3] = {ctx->boot.node, ctx->boot.local, ctx->boot.nlocal};
        T_OK(rvx_allgather(ctx, mine, sizeof(mine), place));
    }
    if (me == 0) {
        int exact = blocks && RVX_BOOT != RVX_BOOT_PMIX, jobwide = blocks && !exact, bad = t_failures;
        for (r = 0; r < n; r++) {
            int node = place[3 * r], local = place[3 * r + 1], nlocal = place[3 * r + 2];
            int first = (int)(((long)node * n + k - 1) / k), next = (int)(((long)(node + 1) * n + k - 1) / k);
            T_CHECK(local >= 0 && local < nlocal, "rank %d: local rank %d of %d", r, local, nlocal);
            for (q = 0; q < r; q++)
                if (place[3 * q] == node)
                    T_CHECK(place[3 * q + 1] != local && place[3 * q + 2] == nlocal,
                            "ranks %d and %d on node %d: local %d of %d and %d of %d", q, r, node,
                            place[3 * q + 1], place[3 * q + 2], local, nlocal);
            if (exact)
                T_CHECK(local == r - first && nlocal == next - first,
                        "rank %d: local rank %d of %d, expected %d of %d", r, local, nlocal,
                        r - first, next - first);
            if (jobwide)
                T_CHECK(local == r && nlocal == n, "rank %d: local rank %d of %d, expected %d of %d "
                        "(RVX_NODE without RVX_LOCAL_*)", r, local, nlocal, r, n);
        }
        if (t_failures == bad)
            printf("local ranks ok: %d ranks (%s)\n", n,
                   exact ? "blocks" : jobwide ? "the job's ranks" : "distinct on each node");
    }
    free(place);
    free(all);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
