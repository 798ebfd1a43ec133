/* t_fetch: the calls that wait for their own answer (a get of a small constant length without a
 * request, a 64-bit fetching add or compare-and-swap without one: on rc_mlx5 and dc_mlx5 the
 * fetch path of tl/mlx5/fetch.h) return exactly the remote bytes, whatever else is in flight.
 * Two ranks, each reading and updating the other's region at once:
 *  - gets of 1, 8, 13 and 64 bytes, many times the depth of the send queue, the CQ and the bounce
 *    ring (so that all of them wrap), each checked byte for byte;
 *  - the same behind unsignaled puts, behind a get with a request still in flight (an op record:
 *    the general path), and with a flush pending: everything completes, in order;
 *  - fetching adds from both ranks on one word: every old value seen once, the sum exact; a
 *    compare-and-swap increment loop on another;
 *  - last, rank 1 reads past rank 0's region: RVX_ERR_REMOTE_ACCESS, the buffer untouched, and
 *    through a NIC (rc_mlx5, dc_mlx5, the pair between nodes) the next get on that endpoint
 *    fails too (it does not hang).
 * The pair runs it between nodes (pair, pair-dc: the NIC's fetch path) and on one (pair1).
 * Built with small ROUNDS and ADDS and run under RVXSIM_DELAY_US=20000, every wait outlasts the
 * fetch path's and takes the general one: the same checks pass. */
#include <rvx/rvx.h>
#include "testlib.h"

#define REGION 65536
#ifndef ROUNDS
#define ROUNDS 3000 /* several times any queue's depth */
#endif
#ifndef ADDS
#define ADDS   2000
#endif

/* A blocking get of the constant length LEN at offset off of the peer's region, checked. */
#define GET_CHECK(LEN, off)                                                                   \
    do {                                                                                      \
        unsigned char b_[LEN + 2];                                                            \
        size_t o_ = (off) % (REGION / 2 - (LEN));                                            \
        b_[0] = b_[LEN + 1] = 0x5a;                                                           \
        T_OK(rvx_get(ep, b_ + 1, LEN, rm[peer].addr + o_, &rk, NULL));                        \
        T_CHECK(memcmp(b_ + 1, expect + o_, LEN) == 0 && b_[0] == 0x5a && b_[LEN + 1] == 0x5a, \
                "get of %d bytes at %zu", LEN, o_);                                           \
    } while (0)

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_rkey_t rk;
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *base, *expect;
    uint64_t *seen;
    int me, peer;
    long i;

    t_spawn(argc, argv, 2, 300);
    me = t_start(&ctx, &w);
    peer = 1 - me;
    T_OK(rvx_mem_alloc(ctx, REGION, &mem));
    base = (unsigned char *)rvx_mem_addr(mem);
    /* the lower half: each rank's stream of bytes; the upper half: words to update */
    t_fill(base, REGION / 2, (uint64_t)me);
    memset(base + REGION / 2, 0, REGION / 2);
    expect = (unsigned char *)malloc(REGION / 2);
    t_fill(expect, REGION / 2, (uint64_t)peer);
    rm = t_exchange(ctx, mem);
    T_OK(rvx_ep_create(w, peer, &ep));
    T_OK(rvx_rkey_unpack(ep, rm[peer].packed, &rk));
    T_OK(rvx_barrier(ctx));

    /* gets of every kind, around the rings */
    for (i = 0; i < ROUNDS; i++) {
        GET_CHECK(8, (size_t)i * 8);
        GET_CHECK(1, (size_t)i * 7);
        GET_CHECK(13, (size_t)i * 29);
        GET_CHECK(64, (size_t)i * 64);
    }

    /* behind unsignaled puts (to the upper half: a word of its own per rank), then the puts are
     * there after a flush, read back by the same kind of get */
    for (i = 0; i < 200; i++) {
        uint64_t v = (uint64_t)i << 8 | (uint64_t)me, back = 0;
        uint64_t at = rm[peer].addr + REGION / 2 + 4096 + 64 * (uint64_t)(i % 32) + 8 * (uint64_t)me;
        T_OK(rvx_put(ep, &v, 8, at, &rk));
        GET_CHECK(8, (size_t)i * 24);
        T_OK(rvx_ep_flush(ep));
        T_OK(rvx_get(ep, &back, 8, at, &rk, NULL));
        T_CHECK(back == v, "read back %llx, wrote %llx", (unsigned long long)back, (unsigned long long)v);
    }

    /* behind a get with a request (its op record is still there) and a pending flush */
    for (i = 0; i < 200; i++) {
        unsigned char big[256];
        rvx_request_t req, fl;
        rvx_status_t st, fst;
        size_t o = (size_t)(i * 97) % (REGION / 2 - sizeof(big));
        rvx_request_init(&req);
        st = rvx_get(ep, big, sizeof(big), rm[peer].addr + o, &rk, &req);
        T_CHECK(st == RVX_OK || st == RVX_INPROGRESS, "get with a request: %s", rvx_status_str(st));
        rvx_request_init(&fl);
        fst = rvx_ep_flush_nb(ep, &fl);
        GET_CHECK(8, (size_t)i * 40);
        GET_CHECK(64, (size_t)i * 88);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get with a request", i);
        T_OK(st);
        T_CHECK(memcmp(big, expect + o, sizeof(big)) == 0, "get with a request at %zu", o);
        if (fst == RVX_INPROGRESS) fst = t_wait_req(w, &fl, "flush", i);
        T_OK(fst);
    }
    T_OK(rvx_barrier(ctx));

    /* fetching adds on rank 0's word at REGION/2 from both ranks; every old value once */
    seen = (uint64_t *)calloc(2 * ADDS, sizeof(*seen));
    {
        rvx_ep_t *e0 = me == 0 ? NULL : ep;
        rvx_ep_t *self = NULL;
        rvx_rkey_t rk0;
        uint64_t a0 = rm[0].addr + REGION / 2, old;
        if (me == 0) { /* rank 0 adds through an endpoint to itself */
            T_OK(rvx_ep_create(w, 0, &self));
            T_OK(rvx_rkey_unpack(self, rm[0].packed, &rk0));
            e0 = self;
        } else {
            rk0 = rk;
        }
        T_OK(rvx_barrier(ctx));
        for (i = 0; i < ADDS; i++) {
            old = ~0ull;
            T_OK(rvx_atomic64(e0, RVX_AMO_ADD, 1, 0, a0, &rk0, &old, NULL));
            T_CHECK(old < 2 * ADDS, "fetched %llu", (unsigned long long)old);
            if (old < 2 * ADDS) seen[old]++;
        }
        /* a compare-and-swap increment loop on the next word */
        for (i = 0; i < ADDS / 4; i++) {
            uint64_t cur = 0;
            T_OK(rvx_atomic64(e0, RVX_AMO_GET, 0, 0, a0 + 8, &rk0, &cur, NULL));
            for (;;) {
                old = ~0ull;
                T_OK(rvx_atomic64(e0, RVX_AMO_CAS, cur + 1, cur, a0 + 8, &rk0, &old, NULL));
                if (old == cur) break;
                cur = old;
            }
        }
        T_OK(rvx_barrier(ctx));
        if (me == 0) {
            uint64_t *word = (uint64_t *)(void *)(base + REGION / 2);
            T_CHECK(word[0] == 2 * ADDS, "the adds' sum: %llu", (unsigned long long)word[0]);
            T_CHECK(word[1] == 2 * (ADDS / 4), "the compare-and-swap count: %llu", (unsigned long long)word[1]);
        }
        /* each rank saw distinct old values: together every one once (gathered through rank 0) */
        {
            uint64_t *both = (uint64_t *)calloc(2 * 2 * ADDS, sizeof(*both));
            T_OK(rvx_allgather(ctx, seen, 2 * ADDS * sizeof(*seen), both));
            if (me == 0)
                for (i = 0; i < 2 * ADDS; i++)
                    if (both[i] + both[2 * ADDS + i] != 1) {
                        T_CHECK(0, "old value %ld fetched %llu times", i,
                                (unsigned long long)(both[i] + both[2 * ADDS + i]));
                        break;
                    }
            free(both);
        }
        if (self) {
            rvx_rkey_release(&rk0);
            rvx_ep_destroy(self);
        }
    }
    T_OK(rvx_barrier(ctx));

    /* last: a get past the end of rank 0's region fails with its status, nothing written */
    if (me == 1) {
        unsigned char b[10];
        rvx_status_t st;
        int nic_free = rvx_rkey_ptr(&rk, rm[0].addr, 8) != NULL;
        memset(b, 0x77, sizeof(b));
        st = rvx_get(ep, b + 1, 8, rm[0].addr + REGION - 4, &rk, NULL);
        T_STATUS(st, RVX_ERR_REMOTE_ACCESS);
        T_CHECK(b[0] == 0x77 && b[1] == 0x77 && b[8] == 0x77 && b[9] == 0x77, "a refused get wrote");
        /* an mlx5 endpoint fails with the error; shm (and the pair's on-node path, where the
         * process maps the peer's region) refuses at the call */
        if (!nic_free) {
            st = rvx_get(ep, b + 1, 8, rm[0].addr, &rk, NULL);
            T_CHECK(st != RVX_OK, "a get on the failed endpoint: %s", rvx_status_str(st));
        }
    }
    T_OK(rvx_barrier(ctx));
    free(seen);
    free(expect);
    return t_finish(ctx, w, mem, &rk, 1, rm);
}
