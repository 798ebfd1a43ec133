/* t_robust: what a user may get wrong is refused at the call, with a status, on every transport:
 * absurd lengths, requests in any initial state, calls a handler may not make. Two ranks, an
 * AM + tag build; the same source runs on shm (build/tests) and rc_mlx5 (build/tests-rc). */
#define RVX_TAG 1
#define RVX_AM_HANDLERS(X) X(PING, on_ping)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int pings;
static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    pings++;
}

/* A tag send longer than any peer accepts is refused at once, and leaves nothing pending. */
static void absurd_tag_length(rvx_worker_t *w, rvx_ep_t *ep)
{
    static const size_t lens[] = {(size_t)1 << 40, (size_t)1 << 47, SIZE_MAX};
    static char buf[64];
    unsigned i;
    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        rvx_request_t req;
        rvx_status_t st;
        memset(&req, 0, sizeof(req));
        st = rvx_tag_send(ep, buf, lens[i], 77, &req);
        T_CHECK(st == RVX_ERR_EXCEEDS_LIMIT, "tag send of %zu bytes: %s", lens[i], rvx_status_str(st));
        T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "tag send of %zu bytes left work behind",
                lens[i]);
    }
}

/* Lengths no process can have: refused with a status (no crash), and nothing registered. */
static void absurd_mem_lengths(rvx_context_t *ctx)
{
    static char small[100];
    rvx_mem_t *mem = (rvx_mem_t *)1;
    rvx_status_t st;
    st = rvx_mem_alloc(ctx, SIZE_MAX, &mem);
    T_CHECK(st == RVX_ERR_NO_MEMORY && mem == NULL, "mem_alloc(SIZE_MAX): %s", rvx_status_str(st));
    st = rvx_mem_alloc(ctx, SIZE_MAX - 4095, &mem);
    T_CHECK(st == RVX_ERR_NO_MEMORY && mem == NULL, "mem_alloc(SIZE_MAX - 4095): %s", rvx_status_str(st));
    st = rvx_mem_reg(ctx, small, (size_t)1 << 40, &mem);
    T_CHECK(st == RVX_ERR_INVALID_PARAM && mem == NULL, "mem_reg of 2^40 bytes over 100: %s",
            rvx_status_str(st));
    st = rvx_mem_reg(ctx, small, SIZE_MAX, &mem);
    T_CHECK(st == RVX_ERR_INVALID_PARAM && mem == NULL, "mem_reg(SIZE_MAX): %s", rvx_status_str(st));
    st = rvx_mem_reg(ctx, (void *)(UINTPTR_MAX - 50), 100, &mem);
    T_CHECK(st == RVX_ERR_INVALID_PARAM && mem == NULL, "mem_reg of a range that wraps: %s",
            rvx_status_str(st));
    T_OK(rvx_mem_reg(ctx, small, sizeof(small), &mem)); /* the sane one still works */
    if (mem) rvx_mem_dereg(mem);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    int me;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    T_OK(rvx_barrier(ctx));
    absurd_tag_length(w, ep);
    absurd_mem_lengths(ctx);
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
