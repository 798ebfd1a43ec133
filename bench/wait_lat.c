/* wait_lat: what a blocking call costs when the operation it waits for is short. One process, an
 * rc_mlx5 endpoint to itself: 8-byte fetching adds, each waited for with rvx_complete (so through
 * rvx_wait's spin, then sleep), median over 9 blocks. On rvxsim the model's engine thread has the
 * other core to itself here, so the figure is rvx's wait plus the model's loopback round trip.
 *   wait_lat [operations per block]                      -> "rvx wait_amo_lat_ns <x>" */
#include "bench_common.h"

int main(int argc, char **argv)
{
    long per = argc > 1 ? atol(argv[1]) : 2000, i;
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    double lat[9], t0;
    uint64_t addr, old = 0;
    rvx_request_t req;
    rvx_status_t st = RVX_OK;
    int b;

    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w)) return 1;
    if (rvx_ep_create(w, rvx_rank(ctx), &ep) || rvx_mem_alloc(ctx, 4096, &mem)) return 1;
    rvx_rkey_pack(mem, packed);
    if (rvx_rkey_unpack(ep, packed, &rk)) return 1;
    addr = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    for (b = 0; b < 9 && st == RVX_OK; b++) {
        t0 = bench_now_ns();
        for (i = 0; i < per && st == RVX_OK; i++)
            st = rvx_complete(w, rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, addr, &rk, &old, &req), &req);
        lat[b] = (bench_now_ns() - t0) / (double)per;
    }
    if (st != RVX_OK || old != (uint64_t)(9 * per - 1)) {
        fprintf(stderr, "wait_lat: fetching add failed (%s, last old value %llu)\n",
                rvx_status_str(st), (unsigned long long)old);
        return 1;
    }
    qsort(lat, 9, sizeof(double), bench_cmp_double);
    printf("# %s, RVX_WAIT_SPIN_NS %d\n", rvx_config_string(), RVX_WAIT_SPIN_NS);
    printf("rvx wait_amo_lat_ns %.1f\n", lat[4]);
    printf("# one waited fetching add, ns: min %.1f median %.1f max %.1f over 9 blocks of %ld\n",
           lat[0], lat[4], lat[8], per);
    rvx_rkey_release(&rk);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return 0;
}
