/* rndv_pipeline: rendezvous transfer rate with first-time buffers against reused ones, for the
 * PIPELINE protocol (build/bench/rndv_pipeline) and GET (build/bench/rndv_pipeline_get), built from
 * this one source. It uses the tag API only, so it runs on any transport: on shm registration
 * costs nothing and both columns should agree; on rvxsim with a registration cost
 * (RVXSIM_REG_COST_NS_PER_PAGE) the first-time column shows what the pipeline hides.
 *   first-time  every transfer uses buffers never used before (on both ranks), so every
 *               registration is a cache miss
 *   reused      the same two buffers every time (after one warm-up): cache hits, and PIPELINE
 *               skips its phases (one transfer after the CTS)
 * One transfer at a time: rank 0 sends, rank 1 receives and answers with a 0-byte message; each
 * transfer is timed on its own and the rate is bytes / the median transfer time (a preempted
 * transfer on a busy machine moves the median little). Pages are touched before the clock starts.
 * Output: a table, then per size "rvx rndv_first_MBs <size> <x>" and "rvx rndv_reused_MBs <size> <x>".
 * Usage (it starts its two ranks itself through build/bin/rvxrun):
 *   rndv_pipeline [max_size_bytes [transfers_per_size]]     (default 8 MiB, 8) */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#ifndef RVX_RNDV
#define RVX_RNDV RVX_RNDV_PIPELINE
#endif
#include "bench_common.h"

#define TAG_DATA 1
#define TAG_ACK  2

static rvx_worker_t *w;
static rvx_ep_t *ep;

/* Spin on progress (no backoff: a sleep would be measured, not the protocol). */
static void check(rvx_request_t *req, rvx_status_t st)
{
    if (st == RVX_INPROGRESS) {
        while (req->status == RVX_INPROGRESS) rvx_progress(w);
        st = (rvx_status_t)req->status;
    }
    if (st != RVX_OK) {
        fprintf(stderr, "rndv_pipeline: %s\n", rvx_status_str(st));
        exit(1);
    }
}

/* One transfer of `len` bytes from `buf` (rank 0) into `buf` (rank 1), acknowledged. */
static void transfer(int me, unsigned char *buf, size_t len)
{
    rvx_request_t r, a;
    if (me == 0) {
        rvx_status_t as = rvx_tag_recv(w, NULL, 0, TAG_ACK, ~0ull, &a, NULL);
        check(&r, rvx_tag_send(ep, buf, len, TAG_DATA, &r));
        check(&a, as);
    } else {
        check(&r, rvx_tag_recv(w, buf, len, TAG_DATA, ~0ull, &r, NULL));
        check(&a, rvx_tag_send(ep, NULL, 0, TAG_ACK, &a));
    }
}

int main(int argc, char **argv)
{
    size_t maxlen = argc > 1 ? (size_t)atol(argv[1]) : (size_t)8 << 20, len;
    long iters = argc > 2 ? atol(argv[2]) : 8, i;
    rvx_context_t *ctx;
    struct rvx__tag_state *t;
    int me;

    bench_self_launch(argv, "rndv_pipeline", 600);
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w)) return 1;
    me = rvx_rank(ctx);
    if (rvx_ep_create(w, 1 - me, &ep)) return 1;
    t = rvx__tag_of(w);
    rvx_barrier(ctx);
    if (me == 0) {
        printf("# %s\n", rvx_config_string());
        printf("# rendezvous from %zu bytes; PIPELINE phases: eager %d, bounce %d in %d-byte buffers, chunks of %d\n",
               (size_t)RVX_RNDV_THRESH_BYTES, (int)RVX_PIPE_EAGER, (int)RVX_PIPE_BOUNCE, (int)RVX_PIPE_FRAG,
               (int)RVX_PIPE_CHUNK);
        printf("# %10s %14s %14s   %s\n", "size", "first_MBs", "reused_MBs",
               "sender's steps per transfer, first-time / reused: bounce writes, chunk writes, pinned");
    }
    for (len = 64 << 10; len <= maxlen; len *= 4) {
        size_t arena_len = len * (size_t)iters;
        unsigned char *arena, *one;
        double t0, first, reused, *dt = (double *)malloc(sizeof(double) * (size_t)iters);
        uint64_t b0, c0, p0, bf, cf, pf, b1, c1, p1;
        if (len < RVX_RNDV_THRESH_BYTES) continue;
        /* page-aligned buffers of whole pages: neighbours' registrations share no page (the cache
         * would merge them and register the earlier ones again) */
        if (posix_memalign((void **)&arena, 4096, arena_len) || posix_memalign((void **)&one, 4096, len)) return 1;
        memset(arena, me + 1, arena_len); /* touch every page before the clock starts */
        memset(one, me + 1, len);
        rvx_barrier(ctx);
        b0 = t->n_pipe_bounce, c0 = t->n_pipe_chunks, p0 = t->n_pipe_pinned;
        for (i = 0; i < iters; i++) {
            t0 = bench_now_ns();
            transfer(me, arena + (size_t)i * len, len);
            dt[i] = bench_now_ns() - t0;
        }
        first = bench_median(dt, (int)iters) / 1e9;
        bf = t->n_pipe_bounce, cf = t->n_pipe_chunks, pf = t->n_pipe_pinned;
        transfer(me, one, len); /* warm-up: registers `one` and leaves it pinned */
        rvx_barrier(ctx);
        b1 = t->n_pipe_bounce, c1 = t->n_pipe_chunks, p1 = t->n_pipe_pinned;
        for (i = 0; i < iters; i++) {
            t0 = bench_now_ns();
            transfer(me, one, len);
            dt[i] = bench_now_ns() - t0;
        }
        reused = bench_median(dt, (int)iters) / 1e9;
        free(dt);
        if (me == 0) {
            double fr = (double)len / first / 1e6, rr = (double)len / reused / 1e6;
            printf("  %10zu %14.1f %14.1f   %s: %.1f %.1f %.1f / %.1f %.1f %.1f\n", len, fr, rr, RVX_RNDV_NAME,
                   (double)(bf - b0) / (double)iters, (double)(cf - c0) / (double)iters,
                   (double)(pf - p0) / (double)iters,
                   (double)(t->n_pipe_bounce - b1) / (double)iters, (double)(t->n_pipe_chunks - c1) / (double)iters,
                   (double)(t->n_pipe_pinned - p1) / (double)iters);
            printf("rvx rndv_first_MBs %zu %.1f\n", len, fr);
            printf("rvx rndv_reused_MBs %zu %.1f\n", len, rr);
            fflush(stdout);
        }
        /* the arena goes back to malloc: its registrations must not outlive it */
        rvx_tag_mem_invalidate(w, arena, arena_len);
        rvx_tag_mem_invalidate(w, one, len);
        free(arena);
        free(one);
    }
    rvx_barrier(ctx);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return 0;
}
