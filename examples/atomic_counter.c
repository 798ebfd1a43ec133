/* atomic_counter: every rank adds to one counter on rank 0, with non-fetching ADD and with
 * fetching INC; rank 0 checks the total, and every rank checks each value it fetched was below it.
 *
 *   rvxrun -n 4 build/examples/atomic_counter [adds per rank] */
#include <rvx/rvx.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rkey;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    uint64_t raddr, *counter;
    long k = argc > 1 ? atol(argv[1]) : 10000, i;
    int me, n, ok = 1;
    rvx_status_t st;

    if (k < 1) { fprintf(stderr, "usage: atomic_counter [adds per rank >= 1]\n"); return 2; }
    if ((st = rvx_init(&ctx)) != RVX_OK || (st = rvx_worker_create(ctx, &w)) != RVX_OK) {
        fprintf(stderr, "atomic_counter: init: %s\n", rvx_status_str(st));
        return 1;
    }
    me = rvx_rank(ctx);
    n = rvx_size(ctx);
    /* Rank 0 owns the counter. */
    if (me == 0 && (st = rvx_mem_alloc(ctx, sizeof(uint64_t), &mem)) != RVX_OK) return 1;
    if (me == 0) {
        rvx_rkey_pack(mem, packed);
        raddr = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    }
    /* rank 0's key and address to everyone: an allgather where only rank 0's part is used */
    {
        unsigned char *all = (unsigned char *)malloc((size_t)n * (sizeof(packed) + 8));
        unsigned char mine[sizeof(packed) + 8];
        memset(mine, 0, sizeof(mine));
        if (me == 0) { memcpy(mine, packed, sizeof(packed)); memcpy(mine + sizeof(packed), &raddr, 8); }
        rvx_allgather(ctx, mine, sizeof(mine), all);
        memcpy(packed, all, sizeof(packed));
        memcpy(&raddr, all + sizeof(packed), 8);
        free(all);
    }
    if ((st = rvx_ep_create(w, 0, &ep)) != RVX_OK || (st = rvx_rkey_unpack(ep, packed, &rkey)) != RVX_OK) {
        fprintf(stderr, "atomic_counter: rank %d: connect: %s\n", me, rvx_status_str(st));
        return 1;
    }
    if (me == 0) printf("atomic_counter: %s, %d rank(s), %ld adds each\n", rvx_config_string(), n, k);
    rvx_barrier(ctx);

    for (i = 0; i < k && st >= 0; i++) {
        uint64_t old = 0;
        rvx_request_t req;
        req.status = RVX_INPROGRESS;
        if (i & 1) {
            st = rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, &rkey, NULL, NULL);
        } else {
            st = rvx_atomic64(ep, RVX_AMO_INC, 0, 0, raddr, &rkey, &old, &req);
            if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
            /* a fetched value must be below the final total */
            if (st == RVX_OK && old >= (uint64_t)k * (uint64_t)n) ok = 0;
        }
    }
    if (st >= 0) st = rvx_ep_flush(ep);
    if (st < 0) { fprintf(stderr, "atomic_counter: rank %d: %s\n", me, rvx_status_str(st)); return 1; }
    rvx_barrier(ctx);
    if (me == 0) {
        counter = (uint64_t *)rvx_mem_addr(mem);
        printf("atomic_counter: total %llu, expected %llu: %s\n", (unsigned long long)counter[0],
               (unsigned long long)k * (unsigned long long)n,
               counter[0] == (uint64_t)k * (uint64_t)n && ok ? "correct" : "WRONG");
        if (counter[0] != (uint64_t)k * (uint64_t)n) ok = 0;
    }
    rvx_barrier(ctx);
    rvx_rkey_release(&rkey);
    rvx_worker_destroy(w);
    if (me == 0) rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return ok ? 0 : 1;
}
