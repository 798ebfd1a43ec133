/* ring: a ring allgather over N ranks. Every rank starts with one block of its own. In each of
 * N-1 steps it puts the block it received last into its right neighbour's memory, at that block's
 * slot, and tells the neighbour with an active message; after N-1 steps every rank holds all N
 * blocks, and checks each byte. A rank writes into its neighbour's slots again only after the
 * neighbour has said it is done with the previous round (a credit message), so nothing is
 * overwritten while it is still being read.
 *
 *   rvxrun -n 4 build/examples/ring [block_bytes] [rounds]          local bootstrap
 *   mpirun -np 4 build/examples/ring-pmix [block_bytes] [rounds]    the PMIx build of this file
 *   srun --mpi=pmix -n 4 build/examples/ring-pmix                   the same under Slurm */
#define RVX_AM_HANDLERS(X) X(ARRIVED, on_arrived) X(CREDIT, on_credit)
#include <rvx/rvx.h>

#include <stdio.h>
#include <stdlib.h>

#define WAIT_MS 30000 /* a neighbour silent this long is reported, not waited on for ever */

static volatile int *arrived;     /* arrived[step]: the left neighbour's block of this step is here */
static volatile int credit;       /* the right neighbour finished reading the previous round */
static volatile uint64_t cur_round;
static volatile int out_of_order; /* a message that names another round than ours */

static void on_arrived(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n != 2 || a[0] != cur_round) { out_of_order++; return; }
    arrived[a[1]] = 1;
}

static void on_credit(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    credit = 1;
}

static unsigned char pattern(int origin, uint64_t round, size_t i)
{
    return (unsigned char)(origin * 131 + round * 31 + i * 7 + (i >> 8));
}

#define CHECK(call)                                                                            \
    do {                                                                                       \
        rvx_status_t st_ = (call);                                                             \
        if (st_ != RVX_OK) {                                                                   \
            fprintf(stderr, "ring: rank %d: %s: %s\n", me, #call, rvx_status_str(st_));        \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    size_t block = argc > 1 ? strtoul(argv[1], NULL, 0) : 4096;
    uint64_t rounds = argc > 2 ? strtoull(argv[2], NULL, 0) : 100, round;
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *left, *right;
    rvx_mem_t *mem;
    rvx_rkey_t rkey;
    unsigned char packed[RVX_RKEY_PACKED_SIZE], *pall, *buf;
    uint64_t mine, *addrs;
    long bad = 0, *bads;
    int me = -1, n, l, r, step;
    double t0, t1;
    rvx_status_t st;

    if (!block || !rounds) {
        fprintf(stderr, "usage: ring [block_bytes > 0] [rounds > 0]\n");
        return 2;
    }
    CHECK(rvx_init(&ctx));
    me = rvx_rank(ctx);
    n = rvx_size(ctx);
    l = (me + n - 1) % n;
    r = (me + 1) % n;
    if (me == 0) printf("ring: %s\n", rvx_config_string());

    CHECK(rvx_worker_create(ctx, &w));
    CHECK(rvx_mem_alloc(ctx, (size_t)n * block, &mem));   /* slot k holds rank k's block */
    buf = (unsigned char *)rvx_mem_addr(mem);
    CHECK(rvx_ep_create(w, l, &left));
    CHECK(rvx_ep_create(w, r, &right));
    arrived = (volatile int *)calloc((size_t)n, sizeof(int));
    pall = (unsigned char *)malloc((size_t)n * sizeof(packed));
    addrs = (uint64_t *)malloc((size_t)n * sizeof(*addrs));
    bads = (long *)malloc((size_t)n * sizeof(*bads));
    if (!arrived || !pall || !addrs || !bads) return 1;

    /* the right neighbour's region: its key and address, through the bootstrap */
    CHECK(rvx_rkey_pack(mem, packed));
    mine = (uint64_t)(uintptr_t)buf;
    CHECK(rvx_allgather(ctx, packed, sizeof(packed), pall));
    CHECK(rvx_allgather(ctx, &mine, sizeof(mine), addrs));
    CHECK(rvx_rkey_unpack(right, pall + (size_t)r * sizeof(packed), &rkey));
    CHECK(rvx_barrier(ctx));

    t0 = rvx__now_s();
    for (round = 0; round < rounds; round++) {
        size_t i;
        int k;
        cur_round = round;
        for (i = 0; i < block; i++) buf[(size_t)me * block + i] = pattern(me, round, i);
        if (round > 0 && n > 1) {
            CHECK(rvx_wait_flag(w, right, &credit, WAIT_MS));
            credit = 0;
        }
        for (step = 0; step < n - 1; step++) {
            int origin = (me - step + n) % n;                 /* the block passed on now */
            uint64_t args[2];
            args[0] = round;
            args[1] = (uint64_t)step;
            CHECK(rvx_put(right, buf + (size_t)origin * block, block,
                          addrs[r] + (uint64_t)origin * block, &rkey));
            /* same endpoint, so the put reaches the neighbour before this message */
            rvx_am_retry(w, st, rvx_am_short(right, RVX_AM_ARRIVED, args, 2));
            CHECK(st);
            CHECK(rvx_wait_flag(w, left, &arrived[step], WAIT_MS));
            arrived[step] = 0;
        }
        for (k = 0; k < n; k++)
            for (i = 0; i < block; i++)
                if (buf[(size_t)k * block + i] != pattern(k, round, i)) {
                    if (!bad)
                        fprintf(stderr, "ring: rank %d, round %llu: byte %zu of rank %d's block "
                                "is %u, expected %u\n", me, (unsigned long long)round, i, k,
                                buf[(size_t)k * block + i], pattern(k, round, i));
                    bad++;
                }
        if (n > 1 && round + 1 < rounds) { /* done reading: the left neighbour may write again */
            rvx_am_retry(w, st, rvx_am_short(left, RVX_AM_CREDIT, NULL, 0));
            CHECK(st);
        }
    }
    t1 = rvx__now_s();
    bad += out_of_order;
    CHECK(rvx_allgather(ctx, &bad, sizeof(bad), bads));
    if (me == 0) {
        long total = 0;
        int k;
        for (k = 0; k < n; k++) total += bads[k];
        printf("ring: %d rank%s, %llu rounds of %d step%s, %zu-byte blocks: %s (%.1f us per round)\n",
               n, n == 1 ? "" : "s", (unsigned long long)rounds, n - 1, n == 2 ? "" : "s", block,
               total ? "WRONG DATA" : "every block correct on every rank",
               1e6 * (t1 - t0) / (double)rounds);
    }
    CHECK(rvx_worker_flush(w)); /* everything sent has landed (on a NIC: acknowledged) */
    CHECK(rvx_barrier(ctx));      /* nobody unmaps before everyone is done */
    rvx_rkey_release(&rkey);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free((void *)arrived);
    free(pall);
    free(addrs);
    free(bads);
    return bad ? 1 : 0;
}
