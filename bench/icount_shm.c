/* icount_shm: one noinline wrapper per operation, for counting instructions with callgrind
 * (bench/icount.sh runs each N and 2N times; the difference over N is the cost of one call,
 * with set-up cancelled). Single process, loopback endpoint, so only this thread runs.
 *
 *   icount_shm <op> <N>     op: put8 ref_put8 get8 flush_idle progress_idle
 *                               progress_live_empty am_short8 amo_add8 */
#define RVX_AM_HANDLERS(X) X(SINK, on_sink)
#include <rvx/rvx.h>

#include <stdio.h>

static uint64_t sunk;
static void on_sink(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    sunk += a[0];
}

/* The operations, each exactly what an application would write. */
RVX_NOINLINE rvx_status_t bench_put8(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_put(ep, src, 8, raddr, rk);
}

/* The floor: what hand-written code does with a mapping it already has, no checks at all. */
RVX_NOINLINE rvx_status_t ref_put8(uint8_t *mapped, uint64_t off, const uint64_t *src)
{
    memcpy(mapped + off, src, 8);
    return RVX_OK;
}

RVX_NOINLINE rvx_status_t bench_get8(rvx_ep_t *ep, uint64_t *dst, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_get(ep, dst, 8, raddr, rk, NULL);
}

RVX_NOINLINE rvx_status_t bench_flush_idle(rvx_ep_t *ep) { return rvx_ep_flush_nb(ep, NULL); }

RVX_NOINLINE int bench_progress_idle(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE int bench_progress_live_empty(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE rvx_status_t bench_am_short8(rvx_ep_t *ep, uint64_t arg)
{
    return rvx_am_short(ep, RVX_AM_SINK, &arg, 1);
}

RVX_NOINLINE rvx_status_t bench_amo_add8(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rk, NULL, NULL);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w, *idle;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    const char *op = argc > 2 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0, i;
    uint64_t src = 42, dst = 0, base;
    long errors = 0;

    if (n < 1) {
        fprintf(stderr, "usage: icount_shm <op> <N>\n");
        return 2;
    }
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w) || rvx_worker_create(ctx, &idle) ||
        rvx_ep_create(w, 0, &ep) || rvx_mem_alloc(ctx, 4096, &mem))
        return 1;
    rvx_rkey_pack(mem, packed);
    if (rvx_rkey_unpack(ep, packed, &rk)) return 1;
    base = (uint64_t)(uintptr_t)rvx_mem_addr(mem);

    if (!strcmp(op, "put8")) {
        for (i = 0; i < n; i++) errors += bench_put8(ep, &src, base + 64, &rk) != RVX_OK;
    } else if (!strcmp(op, "ref_put8")) {
        for (i = 0; i < n; i++) errors += ref_put8(rk.lbase, 64, &src) != RVX_OK;
    } else if (!strcmp(op, "get8")) {
        for (i = 0; i < n; i++) errors += bench_get8(ep, &dst, base + 64, &rk) != RVX_OK;
    } else if (!strcmp(op, "flush_idle")) {
        for (i = 0; i < n; i++) errors += bench_flush_idle(ep) != RVX_OK;
    } else if (!strcmp(op, "progress_idle")) {
        for (i = 0; i < n; i++) errors += bench_progress_idle(idle) != 0;
    } else if (!strcmp(op, "progress_live_empty")) {
        for (i = 0; i < n; i++) errors += bench_progress_live_empty(w) != 0;
    } else if (!strcmp(op, "am_short8")) {
        for (i = 0; i < n; i++) {
            errors += bench_am_short8(ep, (uint64_t)i) != RVX_OK;
            if ((i & 63) == 63) while (rvx_progress(w)) {} /* drain, outside the counted call */
        }
    } else if (!strcmp(op, "amo_add8")) {
        for (i = 0; i < n; i++) errors += bench_amo_add8(ep, base, &rk) != RVX_OK;
    } else {
        fprintf(stderr, "icount_shm: unknown op %s\n", op);
        return 2;
    }
    if (errors) {
        fprintf(stderr, "icount_shm: %ld of %ld %s calls failed\n", errors, n, op);
        return 1;
    }
    printf("%s x %ld done (%s)\n", op, n, rvx_config_string());
    rvx_rkey_release(&rk);
    rvx_worker_destroy(w);
    rvx_worker_destroy(idle);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return 0;
}
