/* t_pair_local: traffic between ranks of one node never reaches the NIC in a build that pairs
 * shared memory with an mlx5 transport (RVX_PAIR), checked from rvxsim's own count of the send
 * WQEs its engine took from this process's queues (rvxsim_counters: wqes=, wqe_bytes=). Every
 * packet the model's adapter sends, and every RDMA READ or atomic response it returns, starts
 * from such a WQE of the requester, so a requester whose count does not move sent nothing
 * through the adapter. Each rank checks its own count; every rank is a requester in turn.
 *
 * 4 ranks as 2 emulated nodes (it starts itself under rvxrun -n 4 --nodes 2): node of rank r is
 * r / 2, its on-node peer r ^ 1, an off-node peer r ^ 2. Phases, each ended by flushes and a
 * barrier, each moving the same operations to one peer, data checked byte for byte:
 *   1  on-node: puts (8 B, 1 KiB, 64 KiB), gets, AM short, medium and long, tag messages
 *      eager and rendezvous. Pair build: this rank's wqes do not move.
 *   2  off-node: the same. wqes move (so the counter sees this traffic: the check can fail).
 *   3  on-node atomics (fetching ADDs on the peer's word): they go through the NIC by design, so
 *      that on-node and off-node atomics on one word stay atomic; wqes move, the sum is exact.
 * Built without RVX_PAIR (rc_mlx5 alone: tests/t_pair_local.sh builds both), phase 1 goes
 * through the NIC like everything else and the test checks that its count moved: the counter
 * catches on-node traffic that does reach the adapter. Before phase 1, a tag message in the eager
 * zero-copy range to the on-node peer and back: in the pair it registers nothing with the NIC
 * (rvxsim's mr_bytes= stays), as shared memory copies it; with rc_mlx5 alone the registration
 * cache registers the buffer (mr_bytes= grows). Public API only (rvx.h). */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#ifndef RVX_RNDV_THRESH
#define RVX_RNDV_THRESH 16384
#endif
#define RVX_AM_HANDLERS(X) X(HIT, on_hit)
#include <rvx/rvx.h>
#include <dlfcn.h>
#include "testlib.h"

#if defined(RVX_PAIR) && RVX_PAIR
#define PAIR_BUILD 1
#else
#define PAIR_BUILD 0
#endif

#define NR      4
#define SLOT    (256u << 10)          /* per sender in each rank's region */
#define BIG     (64u << 10)
#define RNDV    (RVX_RNDV_THRESH + 4096)
#define AM_LONG 2048

#define MAX_PHASE 8
#define MAX_RANK  16
/* AMs counted by the phase and sender that sent them (the seed says the phase): a peer ahead of
 * this rank may send its next phase's AMs while this rank still waits in the last one */
static volatile int hits[MAX_PHASE][MAX_RANK];
static volatile int bad_hits;
static int me;

/* args: sender, kind, seed (phase * 1000 + sender * 10 + ...); a medium AM's payload is checked
 * here (valid during the handler) */
static void on_hit(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t;
    if (n != 3 || a[0] >= MAX_RANK || a[2] / 1000 >= MAX_PHASE) { bad_hits++; return; }
    if (a[1] == 1 && (len != 200 || t_verify(p, len, a[2]) >= 0)) bad_hits++;
    hits[a[2] / 1000][a[0]]++;
}

typedef struct { unsigned long long wqes, bytes; } counts_t;

static int (*counters_fn)(char *, size_t);

/* the bytes this process has registered with the model's adapter (rvxsim_counters: mr_bytes=) */
static long long mr_bytes(void)
{
    char line[1024];
    const char *m;
    counters_fn(line, sizeof(line));
    m = strstr(line, " mr_bytes=");
    if (!m) {
        fprintf(stderr, "FAIL: rvxsim_counters has no mr_bytes=: %s\n", line);
        exit(1);
    }
    return strtoll(m + 10, NULL, 10);
}

/* One tag message of EZC bytes each way with the peer (the eager zero-copy range), checked. */
#define EZC 3000
static void eager_zcopy(rvx_worker_t *w, rvx_ep_t *ep, int peer)
{
    unsigned char *src = (unsigned char *)malloc(EZC), *back = (unsigned char *)calloc(1, EZC);
    rvx_request_t req, rreq;
    rvx_status_t st, rst;
    t_fill(src, EZC, 500 + (uint64_t)me);
    rst = rvx_tag_recv_from(w, peer, back, EZC, 77, ~0ull, &rreq, NULL);
    st = rvx_tag_send(ep, src, EZC, 77, &req);
    if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "tag send", EZC);
    T_OK(st);
    st = rst == RVX_INPROGRESS ? t_wait_req(w, &rreq, "tag recv", EZC) : rst;
    T_CHECK(st == RVX_OK && t_verify(back, EZC, 500 + (uint64_t)peer) < 0,
            "eager zero-copy range: tag message of %d bytes from rank %d: %s", EZC, peer,
            rvx_status_str(st));
    free(src);
    free(back);
}

static counts_t counts(void)
{
    char line[1024];
    const char *w, *b;
    counts_t c = {0, 0};
    counters_fn(line, sizeof(line));
    w = strstr(line, " wqes=");       /* the space keeps srq_wqes= out */
    b = strstr(line, " wqe_bytes=");
    if (!w || !b) {
        fprintf(stderr, "FAIL: rvxsim_counters has no wqes=/wqe_bytes= (an older rvxsim?): %s\n", line);
        exit(1);
    }
    c.wqes = strtoull(w + 6, NULL, 10);
    c.bytes = strtoull(b + 11, NULL, 10);
    return c;
}

/* One peer's worth of traffic: puts then gets back, three AM kinds, two tag messages each way.
 * Both ranks of the pair run it at once, each on the other's region at its own slot. */
static void traffic(rvx_worker_t *w, rvx_ep_t *ep, int peer, const rvx_rkey_t *rk, uint64_t rbase,
                    unsigned char *mine, unsigned phase)
{
    static const size_t sizes[] = {8, 1024, BIG};
    unsigned char *src = (unsigned char *)malloc(BIG + RNDV), *back = (unsigned char *)malloc(BIG + RNDV);
    uint64_t slot = rbase + (uint64_t)me * SLOT, seed = phase * 1000 + (uint64_t)me * 10;
    rvx_request_t req, rreq;
    rvx_status_t st;
    unsigned k;

    for (k = 0; k < 3; k++) {
        t_fill(src, sizes[k], seed + k);
        T_OK(rvx_put(ep, src, sizes[k], slot, rk));
        T_OK(rvx_ep_flush(ep));
        memset(back, 0, sizes[k]);
        st = rvx_get(ep, back, sizes[k], slot, rk, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get", (long)sizes[k]);
        T_CHECK(st == RVX_OK && t_verify(back, sizes[k], seed + k) < 0,
                "phase %u: put/get of %zu bytes to rank %d: %s", phase, sizes[k], peer, rvx_status_str(st));
    }
    {
        uint64_t a[3] = {(uint64_t)me, 0, seed};
        t_fill(src, 200, seed + 5);
        rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_HIT, a, 3));
        T_OK(st);
        a[1] = 1; a[2] = seed + 5;
        rvx_am_retry(w, st, rvx_am_medium(ep, RVX_AM_HIT, a, 3, src, 200));
        T_OK(st);
        a[1] = 2; a[2] = seed + 6;
        t_fill(src, AM_LONG, seed + 6);
        rvx_am_retry(w, st, rvx_am_long(ep, RVX_AM_HIT, a, 3, src, AM_LONG, slot + BIG, rk));
        T_OK(st);
    }
    for (k = 0; k < 2; k++) {
        size_t len = k ? RNDV : 100;
        uint64_t tag = (uint64_t)phase << 32 | (uint64_t)k;
        t_fill(src, len, seed + 7 + k);
        memset(back, 0, len);
        rvx_status_t rst = rvx_tag_recv_from(w, peer, back, len, tag, ~0ull, &rreq, NULL);
        st = rvx_tag_send(ep, src, len, tag, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "tag send", (long)len);
        T_CHECK(st == RVX_OK, "phase %u: tag send of %zu bytes to rank %d: %s", phase, len, peer,
                rvx_status_str(st));
        st = rst == RVX_INPROGRESS ? t_wait_req(w, &rreq, "tag recv", (long)len) : rst;
        /* the peer sends the same length with its own seed */
        T_CHECK(st == RVX_OK && t_verify(back, len, phase * 1000 + (uint64_t)peer * 10 + 7 + k) < 0,
                "phase %u: tag message of %zu bytes from rank %d: %s", phase, len, peer,
                rvx_status_str(st));
    }
    {
        double t0 = t_now();
        while (hits[phase][peer] < 3 && t_now() - t0 < 30) rvx_progress(w);
        T_CHECK(hits[phase][peer] == 3 && !bad_hits, "phase %u: %d of 3 AMs from rank %d (%d bad)",
                phase, hits[phase][peer], peer, bad_hits);
    }
    T_OK(rvx_ep_flush(ep));
    /* the peer's long AM landed in my region at its slot, before its handler ran */
    T_CHECK(t_verify(mine + (size_t)peer * SLOT + BIG, AM_LONG, phase * 1000 + (uint64_t)peer * 10 + 6) < 0,
            "phase %u: long AM payload from rank %d", phase, peer);
    free(src);
    free(back);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *eps[NR];
    rvx_rkey_t rk[NR];
    rvx_mem_t *mem;
    t_remote_t *rm;
    counts_t c0, c1, c2, c3;
    long long mr0, mr1;
    uint64_t *word, fetched;
    rvx_request_t req;
    rvx_status_t st;
    int r, near, far, i;

    setenv("RVXRUN_NODES", "2", 1); /* rvxrun --nodes 2: the default it takes for --nodes */
    t_spawn(argc, argv, 4, 120);
    counters_fn = (int (*)(char *, size_t))dlsym(RTLD_DEFAULT, "rvxsim_counters");
    if (!counters_fn) {
        printf("SKIP: not on rvxsim (no rvxsim_counters): run with LD_LIBRARY_PATH=build/sim\n");
        return 77;
    }
    me = t_start(&ctx, &w);
    T_CHECK(rvx_size(ctx) == NR, "size %d, expected %d", rvx_size(ctx), NR);
    near = me ^ 1;
    far = me ^ 2;
    T_CHECK(getenv("RVX_NODE") && atoi(getenv("RVX_NODE")) == me / 2,
            "RVX_NODE=%s, expected %d: start under rvxrun -n 4 --nodes 2", getenv("RVX_NODE"), me / 2);
    T_OK(rvx_mem_alloc(ctx, (size_t)NR * SLOT, &mem));
    memset(rvx_mem_addr(mem), 0, (size_t)NR * SLOT);
    /* phase 3's word: the first of this rank's own slot, which no peer's puts touch */
    word = (uint64_t *)((char *)rvx_mem_addr(mem) + (size_t)me * SLOT);
    rm = t_exchange(ctx, mem);
    for (r = 0; r < NR; r++) {
        T_OK(rvx_ep_create(w, r, &eps[r]));
        T_OK(rvx_rkey_unpack(eps[r], rm[r].packed, &rk[r]));
    }
    T_OK(rvx_barrier(ctx));
    if (me == 0) printf("build: %s (%s)\n", rvx_config_string(), PAIR_BUILD ? "pair" : "one transport");

    mr0 = mr_bytes();
    eager_zcopy(w, eps[near], near);
    mr1 = mr_bytes();
    if (PAIR_BUILD)
        T_CHECK(mr1 == mr0, "an on-node eager message of %d bytes registered %lld bytes with the NIC",
                EZC, mr1 - mr0);
    else
        T_CHECK(mr1 > mr0, "one-transport build: the eager zero-copy message registered nothing "
                "(mr_bytes %lld -> %lld): the check cannot fail", mr0, mr1);
    T_OK(rvx_barrier(ctx));

    c0 = counts();
    traffic(w, eps[near], near, &rk[near], rm[near].addr, (unsigned char *)rvx_mem_addr(mem), 1);
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    c1 = counts();
    traffic(w, eps[far], far, &rk[far], rm[far].addr, (unsigned char *)rvx_mem_addr(mem), 2);
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    c2 = counts();
    /* ranks 1 and 0 add to rank 0's word, 3 and 2 to rank 2's: on-node atomics only */
    for (i = 0; i < 100; i++) {
        int t = me & ~1;
        st = rvx_atomic64(eps[t], RVX_AMO_ADD, (uint64_t)me + 1, 0, rm[t].addr + (uint64_t)t * SLOT,
                          &rk[t], &fetched, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "atomic add", i);
        T_OK(st);
    }
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    c3 = counts();
    if (!(me & 1))
        T_CHECK(*word == (uint64_t)(100 * ((me + 1) + (me + 2))), "rank %d's word %llu after 200 adds",
                me, (unsigned long long)*word);

    printf("rank %d node %d: wqes (bytes) on-node %llu (%llu), off-node %llu (%llu), "
           "on-node atomics %llu (%llu)\n", me, me / 2, c1.wqes - c0.wqes, c1.bytes - c0.bytes,
           c2.wqes - c1.wqes, c2.bytes - c1.bytes, c3.wqes - c2.wqes, c3.bytes - c2.bytes);
    if (PAIR_BUILD)
        T_CHECK(c1.wqes == c0.wqes, "on-node traffic took %llu WQEs (%llu bytes) through the NIC",
                c1.wqes - c0.wqes, c1.bytes - c0.bytes);
    else
        T_CHECK(c1.wqes > c0.wqes, "one-transport build: on-node traffic went through the NIC but "
                "the counter did not move");
    T_CHECK(c2.wqes - c1.wqes >= 10 && c2.bytes - c1.bytes >= 2 * BIG,
            "off-node traffic: only %llu WQEs, %llu bytes counted", c2.wqes - c1.wqes, c2.bytes - c1.bytes);
    T_CHECK(c3.wqes - c2.wqes >= 100, "on-node atomics: %llu WQEs counted, 100 expected through the NIC",
            c3.wqes - c2.wqes);
    T_OK(rvx_barrier(ctx));
    if (!t_failures) printf("rank %d: %s\n", me, PAIR_BUILD ? "on-node traffic stayed off the NIC"
                                                           : "on-node traffic seen on the NIC");
    for (r = 0; r < NR; r++) rvx_rkey_release(&rk[r]);
    for (r = 0; r < NR; r++) rvx_ep_destroy(eps[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
