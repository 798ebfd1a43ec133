/* t_batch_doorbells: a batch tells the NIC once. One process, an endpoint to itself, on rvxsim
 * with its MMIO counts on (RVXSIM_COUNT_MMIO=1: the test re-runs itself with it). Read around
 * each call: a batch of 16 puts, of 8 short AMs, and of one put each make one doorbell record
 * write and one doorbell; an ordinary put makes one of each too (a BlueFlame copy); and the data
 * all lands. On a real adapter there are no counts: the test skips. */
#define RVX_AM_HANDLERS(X) X(SINK, on_sink)
#include <rvx/rvx.h>
#include <dlfcn.h>
#include "testlib.h"

static uint64_t sunk, nsunk;

static void on_sink(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    sunk += a[0];
    nsunk++;
}

static int (*counts)(uint64_t *);

/* The writes that told the NIC since *c (updated): doorbell records in w[0], doorbells and
 * BlueFlame copies together in w[1]. */
static void told(uint64_t c[3], uint64_t w[2])
{
    uint64_t now[3];
    counts(now);
    w[0] = now[0] - c[0];
    w[1] = (now[1] - c[1]) + (now[2] - c[2]);
    memcpy(c, now, sizeof(now));
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mem;
    rvx_rkey_t rk;
    rvx_batch_t b;
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    uint64_t c[3], wr[2], base, v[16], *dst;
    int i, k;

    (void)argc;
    if (!getenv("RVXSIM_COUNT_MMIO")) { /* the model reads it when it loads */
        setenv("RVXSIM_COUNT_MMIO", "1", 1);
        execv("/proc/self/exe", argv);
        perror("t_batch_doorbells: re-run");
        return 1;
    }
    t_rank = 0;
    T_OK(rvx_init(&ctx));
    T_OK(rvx_worker_create(ctx, &w));
    T_OK(rvx_ep_create(w, 0, &ep));
    counts = (int (*)(uint64_t *))dlsym(RTLD_DEFAULT, "rvxsim_mmio_counts");
    if (!counts || counts(c)) {
        printf("SKIP: no doorbell counts (not on rvxsim, or its counting mode is unavailable here)\n");
        return 77;
    }
    T_OK(rvx_mem_alloc(ctx, 4096, &mem));
    rvx_rkey_pack(mem, packed);
    T_OK(rvx_rkey_unpack(ep, packed, &rk));
    base = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    dst = (uint64_t *)rvx_mem_addr(mem);

    for (k = 0; k < 8; k++) { /* batches of 16 puts */
        for (i = 0; i < 16; i++) v[i] = 1000 * (uint64_t)k + (uint64_t)i;
        counts(c);
        rvx_batch_begin(&b, ep);
        for (i = 0; i < 16; i++) T_OK(rvx_batch_put(&b, &v[i], 8, base + 8 * (uint64_t)i, &rk));
        rvx_batch_end(&b);
        told(c, wr);
        T_CHECK(wr[0] == 1 && wr[1] == 1, "batch %d of 16 puts: %llu doorbell records, %llu doorbells",
                k, (unsigned long long)wr[0], (unsigned long long)wr[1]);
        T_OK(rvx_ep_flush(ep));
        for (i = 0; i < 16; i++) T_CHECK(dst[i] == v[i], "batch %d, put %d: %llu", k, i, (unsigned long long)dst[i]);
    }

    v[0] = 77; /* a batch of one, then an ordinary put */
    counts(c);
    rvx_batch_begin(&b, ep);
    T_OK(rvx_batch_put(&b, &v[0], 8, base + 256, &rk));
    rvx_batch_end(&b);
    told(c, wr);
    T_CHECK(wr[0] == 1 && wr[1] == 1, "a batch of one: %llu, %llu", (unsigned long long)wr[0],
            (unsigned long long)wr[1]);
    T_OK(rvx_put(ep, &v[0], 8, base + 264, &rk));
    told(c, wr);
    T_CHECK(wr[0] == 1 && wr[1] == 1, "an ordinary put: %llu, %llu", (unsigned long long)wr[0],
            (unsigned long long)wr[1]);
    T_OK(rvx_ep_flush(ep));
    T_CHECK(dst[32] == 77 && dst[33] == 77, "the batch of one and the put landed");

    /* short AMs: one first (dc_mlx5's first message to a peer claims credits from its pool, a
     * WQE of its own), then batches of 8, within the credits */
    T_OK(rvx_am_short(ep, RVX_AM_SINK, v, 1));
    T_OK(rvx_ep_flush(ep));
    for (i = 0; i < 1000000 && nsunk < 1; i++) rvx_progress(w);
    for (k = 0; k < 4; k++) {
        rvx_status_t st = RVX_OK;
        counts(c);
        rvx_batch_begin(&b, ep);
        for (i = 0; i < 8 && st == RVX_OK; i++) {
            uint64_t a = 1;
            st = rvx_batch_am_short(&b, RVX_AM_SINK, &a, 1);
        }
        rvx_batch_end(&b);
        told(c, wr);
        T_OK(st);
        T_CHECK(wr[0] == 1 && wr[1] == 1, "batch %d of 8 AMs: %llu doorbell records, %llu doorbells",
                k, (unsigned long long)wr[0], (unsigned long long)wr[1]);
        T_OK(rvx_ep_flush(ep));
        for (i = 0; i < 1000000 && nsunk < 1 + 8 * (uint64_t)(k + 1); i++) rvx_progress(w);
    }
    T_CHECK(sunk == 77 + 32 && nsunk == 33, "AMs delivered: %llu of 33", (unsigned long long)nsunk);

    rvx_rkey_release(&rk);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    return t_exit();
}
