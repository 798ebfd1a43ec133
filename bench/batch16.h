/* batch16.h: a batch of 16 8-byte puts to consecutive words at raddr, one doorbell (docs/api.md,
 * "Batches"): the loop an application streaming puts would write. Inlined into the wrappers that
 * make icount counts (bench_common.h) and make explain reads (explain.c). */
#ifndef BENCH_BATCH16_H
#define BENCH_BATCH16_H

RVX_INLINE rvx_status_t bench_batch16(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr,
                                      const rvx_rkey_t *rk)
{
    rvx_batch_t b;
    int i;
    rvx_batch_begin(&b, ep);
    for (i = 0; i < 16; i++) {
        rvx_status_t st = rvx_batch_put(&b, &src[i], 8, raddr + 8 * (uint64_t)i, rk);
        if (RVX_UNLIKELY(st != RVX_OK)) {
            rvx_batch_end(&b);
            return st;
        }
    }
    rvx_batch_end(&b);
    return RVX_OK;
}

#endif /* BENCH_BATCH16_H */
