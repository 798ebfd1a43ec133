/* The application's own memory (rvx_mem_reg, not rvx_mem_alloc's shared memory) in a pair build,
 * and an on-node endpoint created again. 3 ranks as 2 emulated nodes: 0 and 1 on node 0, 2 on
 * node 1. Rank 0 registers a buffer of its own heap; ranks 1 (on the node: shared memory) and 2
 * (off it: the NIC) at once
 *   - add to one word of it, fetching, K times each: the sum must be exact (the NIC performs every
 *     atomic, on-node ones too, so they stay atomic against each other),
 *   - put a pattern into their own slot of it and get it back, byte for byte.
 * Then ranks 0 and 1 destroy their endpoints to each other and create them again (a
 * re-connection on the shared-memory path) and do it once more: put, get, an atomic and a tag
 * message each way. Built as a pair and as rc_mlx5 alone (tests/t_pair_local.sh). */
#define RVX_TAG 1
#include <rvx/rvx.h>
#include "testlib.h"

#define NR   3
#define LEN  (64u << 10)
#define SLOT (16u << 10)
#define K    300

static void put_get(rvx_worker_t *w, rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t raddr, uint64_t seed)
{
    unsigned char src[SLOT / 2], back[SLOT / 2];
    rvx_request_t req;
    rvx_status_t st;
    t_fill(src, sizeof(src), seed);
    T_OK(rvx_put(ep, src, sizeof(src), raddr, rk));
    T_OK(rvx_ep_flush(ep));
    memset(back, 0, sizeof(back));
    st = rvx_get(ep, back, sizeof(back), raddr, rk, &req);
    if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get", (long)sizeof(back));
    T_CHECK(st == RVX_OK && t_verify(back, sizeof(back), seed) < 0, "rank %d: get after put (seed %llu): %s",
            t_rank, (unsigned long long)seed, rvx_status_str(st));
}

static void adds(rvx_worker_t *w, rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t raddr, int n, uint64_t v)
{
    rvx_request_t req;
    uint64_t old;
    rvx_status_t st;
    int i;
    for (i = 0; i < n && !t_failures; i++) {
        st = rvx_atomic64(ep, RVX_AMO_ADD, v, 0, raddr, rk, &old, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "atomic add", i);
        T_OK(st);
    }
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *eps[NR];
    rvx_rkey_t rk[NR];
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *buf;
    volatile uint64_t *word;
    rvx_request_t req;
    rvx_status_t st;
    int me, r;

    setenv("RVXRUN_NODES", "2", 1);
    t_spawn(argc, argv, NR, 180);
    me = t_start(&ctx, &w);
    buf = (unsigned char *)aligned_alloc(4096, LEN);
    memset(buf, 0, LEN);
    word = (volatile uint64_t *)(void *)buf;
    T_OK(rvx_mem_reg(ctx, buf, LEN, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < NR; r++) {
        T_OK(rvx_ep_create(w, r, &eps[r]));
        T_OK(rvx_rkey_unpack(eps[r], rm[r].packed, &rk[r]));
    }
    T_OK(rvx_barrier(ctx));

    /* ranks 1 and 2 at once on rank 0's registered heap */
    if (me) {
        adds(w, eps[0], &rk[0], rm[0].addr, K, (uint64_t)me);
        put_get(w, eps[0], &rk[0], rm[0].addr + (uint64_t)me * SLOT, 100 + (uint64_t)me);
    }
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        T_CHECK(*word == (uint64_t)K * (1 + 2), "rank 0: the word is %llu after %d adds of 1 (on the "
                "node) and %d of 2 (off it), %d expected", (unsigned long long)*word, K, K, K * 3);
        for (r = 1; r < NR; r++)
            T_CHECK(t_verify(buf + (size_t)r * SLOT, SLOT / 2, 100 + (uint64_t)r) < 0,
                    "rank 0: rank %d's put into registered heap", r);
    }
    T_OK(rvx_barrier(ctx));

    /* ranks 0 and 1: the on-node endpoints again, from scratch */
    if (me < 2) {
        int peer = 1 - me;
        uint64_t tag = 9, seed = 200 + (uint64_t)me;
        unsigned char msg[512], in[512];
        rvx_request_t rreq;
        rvx_status_t rst;
        rvx_rkey_release(&rk[peer]);
        rvx_ep_destroy(eps[peer]);
        T_OK(rvx_ep_create(w, peer, &eps[peer]));
        T_OK(rvx_rkey_unpack(eps[peer], rm[peer].packed, &rk[peer]));
        put_get(w, eps[peer], &rk[peer], rm[peer].addr + (uint64_t)me * SLOT + SLOT / 2, seed);
        adds(w, eps[peer], &rk[peer], rm[peer].addr + 8, 10, 5);
        t_fill(msg, sizeof(msg), seed);
        memset(in, 0, sizeof(in));
        rst = rvx_tag_recv_from(w, peer, in, sizeof(in), tag, ~0ull, &rreq, NULL);
        st = rvx_tag_send(eps[peer], msg, sizeof(msg), tag, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "tag send", (long)sizeof(msg));
        T_OK(st);
        st = rst == RVX_INPROGRESS ? t_wait_req(w, &rreq, "tag recv", (long)sizeof(in)) : rst;
        T_CHECK(st == RVX_OK && t_verify(in, sizeof(in), 200 + (uint64_t)peer) < 0,
                "rank %d: tag message from rank %d after re-creating the endpoint: %s", me, peer,
                rvx_status_str(st));
    }
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    if (me < 2) {
        int peer = 1 - me;
        T_CHECK(word[1] == 50, "rank %d: word 1 is %llu after 10 adds of 5 by rank %d", me,
                (unsigned long long)word[1], peer);
        T_CHECK(t_verify(buf + (size_t)peer * SLOT + SLOT / 2, SLOT / 2, 200 + (uint64_t)peer) < 0,
                "rank %d: rank %d's put after re-creating the endpoint", me, peer);
    }
    if (!t_failures && me == 0)
        printf("rank 0: registered heap reached both ways, atomics exact; on-node endpoints re-created\n");
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < NR; r++) rvx_rkey_release(&rk[r]);
    for (r = 0; r < NR; r++) rvx_ep_destroy(eps[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(buf);
    free(rm);
    return t_exit();
}
