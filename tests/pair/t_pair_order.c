/* On one endpoint, an atomic and the put after it land in the order they were posted, also when
 * the endpoint's peer is on the node: in a pair build the put goes through shared memory and the
 * atomic through the NIC (so that on-node and off-node atomics on one word stay atomic), and the
 * put must not overtake it. 2 ranks on one node: rank 0 adds 1 to word 0 of rank 1's region and
 * then puts i into word 8, N times; rank 1 watches and fails if it ever sees word 8 ahead of
 * word 0. Built as a pair and as rc_mlx5 alone (tests/t_pair_local.sh). */
#include <rvx/rvx.h>
#include "testlib.h"

#define N 3000

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    rvx_ep_t *ep;
    rvx_rkey_t rk;
    t_remote_t *rm;
    uint64_t i;
    int me, bad = 0;

    setenv("RVXRUN_NODES", "1", 1); /* both ranks on one node: the shared-memory path */
    t_spawn(argc, argv, 2, 120);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, 4096, &mem));
    memset(rvx_mem_addr(mem), 0, 4096);
    rm = t_exchange(ctx, mem);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    T_OK(rvx_rkey_unpack(ep, rm[1 - me].packed, &rk));
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        for (i = 1; i <= N && !t_failures; i++) {
            rvx_status_t st = rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, rm[1].addr, &rk, NULL, NULL);
            T_CHECK(st >= 0, "atomic %llu: status %d", (unsigned long long)i, (int)st);
            T_OK(rvx_put(ep, &i, 8, rm[1].addr + 64, &rk));
        }
        T_OK(rvx_ep_flush(ep));
    } else {
        volatile uint64_t *x = (volatile uint64_t *)rvx_mem_addr(mem), *y = x + 8;
        uint64_t yv = 0, xv;
        double until = t_now() + 60;
        while (yv < N && t_now() < until) {
            yv = __atomic_load_n(y, __ATOMIC_ACQUIRE);
            xv = __atomic_load_n(x, __ATOMIC_ACQUIRE);
            if (xv < yv && ++bad <= 5)
                fprintf(stderr, "rank 1: put %llu seen before its atomic (word 0 is %llu)\n",
                        (unsigned long long)yv, (unsigned long long)xv);
        }
        T_CHECK(yv == N, "rank 1: the last put (%d) did not arrive in 60 s (word 8 is %llu)", N,
                (unsigned long long)yv);
        T_CHECK(bad == 0, "rank 1: %d puts seen before the atomic posted ahead of them", bad);
        T_CHECK(*x == N, "rank 1: word 0 is %llu after %d atomic adds", (unsigned long long)*x, N);
        printf("rank 1: %d atomics and puts, %d out of order\n", N, bad);
    }
    T_OK(rvx_barrier(ctx));
    return t_finish(ctx, w, mem, &rk, 1, rm);
}
