/* hello_put: every rank puts a greeting into the next rank's memory, flushes, and checks what
 * the previous rank left in its own. One-sided: the target does nothing but wait at a barrier.
 *
 *   rvxrun -n 2 build/examples/hello_put */
#include <rvx/rvx.h>

#include <stdio.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        rvx_status_t st_ = (call);                                                         \
        if (st_ < 0) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, rvx_status_str(st_)); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rkey;
    char msg[64], expect[64];
    unsigned char packed[RVX_RKEY_PACKED_SIZE], *all;
    int me, n, next, prev;
    uint64_t *addrs, mine;

    CHECK(rvx_init(&ctx));
    me = rvx_rank(ctx);
    n = rvx_size(ctx);
    next = (me + 1) % n;
    prev = (me + n - 1) % n;
    if (me == 0) printf("hello_put: %s, %d rank(s)\n", rvx_config_string(), n);

    CHECK(rvx_worker_create(ctx, &w));
    CHECK(rvx_mem_alloc(ctx, 4096, &mem));
    CHECK(rvx_ep_create(w, next, &ep));

    /* Exchange the region's rkey and address with everyone through the bootstrap. */
    all = (unsigned char *)malloc((size_t)n * sizeof(packed));
    addrs = (uint64_t *)malloc((size_t)n * sizeof(*addrs));
    CHECK(rvx_rkey_pack(mem, packed));
    mine = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    CHECK(rvx_allgather(ctx, packed, sizeof(packed), all));
    CHECK(rvx_allgather(ctx, &mine, sizeof(mine), addrs));
    CHECK(rvx_rkey_unpack(ep, all + (size_t)next * sizeof(packed), &rkey));

    snprintf(msg, sizeof(msg), "hello from rank %d", me);
    CHECK(rvx_put(ep, msg, sizeof(msg), addrs[next], &rkey));
    CHECK(rvx_ep_flush(ep));  /* remote completion: the greeting is at rank `next` */
    CHECK(rvx_barrier(ctx));  /* everyone's greeting has arrived */

    snprintf(expect, sizeof(expect), "hello from rank %d", prev);
    if (strcmp((char *)rvx_mem_addr(mem), expect)) {
        fprintf(stderr, "rank %d: found \"%s\", expected \"%s\"\n", me,
                (char *)rvx_mem_addr(mem), expect);
        return 1;
    }
    printf("rank %d received: %s\n", me, (char *)rvx_mem_addr(mem));

    CHECK(rvx_barrier(ctx)); /* nobody unmaps before everyone has checked */
    rvx_rkey_release(&rkey);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(all);
    free(addrs);
    return 0;
}
