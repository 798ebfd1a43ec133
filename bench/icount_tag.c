/* icount_tag: noinline wrappers of the tag-matching fast paths, for bench/icount.sh (callgrind
 * runs each N and 2N times; the difference over N is one call). Single process, loopback
 * endpoint, RVX_TAG=1 build; built for shm (icount_tag) and for rc_mlx5 (icount_tag_rc, run on
 * rvxsim).
 *
 *   icount_tag <op> <N>   op: tag_send8       an 8-byte eager send (the messages are received, and
 *                                             over rc_mlx5 the credits flushed back, outside the
 *                                             counted wrapper)
 *                             tag_recv8       a matched, expected receive, the tag layer's part:
 *                                             post the receive, then the tl's upcall with the
 *                                             8-byte message (match, copy, complete)
 *                             tag_recv8_progress  the same through the transport: post, then the
 *                                             progress call that polls the ring and delivers (the
 *                                             message is sent outside the wrapper; shm only: over
 *                                             rc_mlx5 a message is not there at once)
 *                             progress_idle   progress of a tag build with nothing to do */
#define RVX_TAG 1
#include <rvx/rvx.h>

#include <stdio.h>

RVX_NOINLINE rvx_status_t bench_tag_send8(rvx_ep_t *ep, const uint64_t *src, uint64_t tag)
{
    return rvx_tag_send(ep, src, 8, tag, NULL);
}

/* A received frame as a tl sees it: header words (read at run time, as from a ring) and body. */
struct bench_frame {
    uint32_t info, len;
    uint64_t body[2];
};

/* The tag layer's part of a receive: post it, then take the frame the transport hands over
 * (rvx__rx_deliver, the upcall of the tl contract, in line as in the tl's poll loop). The info
 * word and length come from the frame, so nothing is folded at compile time. */
RVX_NOINLINE void bench_tag_recv8(rvx_worker_t *w, rvx_ep_t *ep, const struct bench_frame *f,
                                  uint64_t *dst, uint64_t tag, rvx_request_t *req, rvx_tag_info_t *info)
{
    rvx_tag_recv(w, dst, 8, tag, ~0ull, req, info);
    rvx__rx_deliver(&ep->tl[0], RVX__CHAN_REQUEST, f->info, (void *)(uintptr_t)f->body, f->len);
}

/* The whole receive on shm: post, then the progress call that polls the ring and delivers. */
RVX_NOINLINE int bench_tag_recv8_progress(rvx_worker_t *w, uint64_t *dst, uint64_t tag,
                                          rvx_request_t *req, rvx_tag_info_t *info)
{
    rvx_tag_recv(w, dst, 8, tag, ~0ull, req, info);
    return rvx_progress(w);
}

RVX_NOINLINE int bench_tag_progress_idle(rvx_worker_t *w) { return rvx_progress(w); }

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w, *idle;
    rvx_ep_t *ep;
    const char *op = argc > 2 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0, i, errors = 0;
    uint64_t src = 42, dst = 0;
    rvx_request_t req;
    rvx_tag_info_t info;

    if (n < 1) {
        fprintf(stderr, "usage: icount_tag <op> <N>\n");
        return 2;
    }
    if (rvx_init(&ctx) || rvx_worker_create(ctx, &w) || rvx_worker_create(ctx, &idle) ||
        rvx_ep_create(w, 0, &ep))
        return 1;
    if (!strcmp(op, "tag_send8")) {
        for (i = 0; i < n; i++) {
            errors += bench_tag_send8(ep, &src, (uint64_t)i) != RVX_OK;
            if ((i & 15) == 15) { /* receive them, outside the counted call */
                long k;
                for (k = 0; k < 16; k++) {
                    rvx_tag_recv(w, &dst, 8, 0, 0, &req, &info);
                    while (req.status == RVX_INPROGRESS) rvx_progress(w);
                }
                /* over rc_mlx5 the receiver's credits travel back as an RDMA WRITE on this same
                 * loopback connection: a flush makes sure they are in before the next batch */
                if (rvx_ep_flush(ep) != RVX_OK) errors++;
            }
        }
    } else if (!strcmp(op, "tag_recv8")) {
        struct bench_frame f;
        f.info = RVX__TAG_CLASS | RVX__TF_EAGER;
        f.len = 16;
        for (i = 0; i < n; i++) {
            f.body[0] = (uint64_t)i; /* the tag */
            f.body[1] = (uint64_t)i; /* 8 bytes of data */
            bench_tag_recv8(w, ep, &f, &dst, (uint64_t)i, &req, &info);
            errors += req.status != RVX_OK || dst != (uint64_t)i || info.length != 8 || info.tag != (uint64_t)i;
        }
    } else if (!strcmp(op, "tag_recv8_progress")) {
        for (i = 0; i < n; i++) {
            src = (uint64_t)i;
            errors += rvx_tag_send(ep, &src, 8, (uint64_t)i, NULL) != RVX_OK;
            errors += bench_tag_recv8_progress(w, &dst, (uint64_t)i, &req, &info) != 1;
            errors += req.status != RVX_OK || dst != (uint64_t)i || info.length != 8 || info.tag != (uint64_t)i;
        }
    } else if (!strcmp(op, "progress_idle")) {
        for (i = 0; i < n; i++) errors += bench_tag_progress_idle(idle) != 0;
    } else {
        fprintf(stderr, "icount_tag: unknown op %s\n", op);
        return 2;
    }
    if (errors) {
        fprintf(stderr, "icount_tag: %ld of %ld %s calls failed\n", errors, n, op);
        return 1;
    }
    printf("%s x %ld done (%s)\n", op, n, rvx_config_string());
    rvx_worker_destroy(w);
    rvx_worker_destroy(idle);
    rvx_finalize(ctx);
    return 0;
}
