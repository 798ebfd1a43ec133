/* icount_pair: the instruction counts of a pair build (shm for peers on the node, rc_mlx5 for the
 * rest), counted as icount_shm and icount_rc count theirs: one noinline wrapper per operation,
 * run N and 2N times under callgrind with only the wrapper collected (bench/icount.sh).
 *
 * Three ranks: 0 and 1 on node 0, 2 on node 1 (RVX_NODE per rank). Rank 0 runs the counted
 * operation through its endpoint to rank 1 (the on-node path, "_intra") or to rank 2 (the
 * network path, "_inter"); ranks 1 and 2 serve (progress) until rank 0 sends STOP, then check
 * that what was sent arrived. Everything that keeps queues and credits from running out
 * (flushes, waiting for the receiver's ack of every 8 messages) runs between the counted calls.
 *
 *   rvxrun -n 3 sh -c 'RVX_NODE=$((RVX_RANK / 2)) exec icount_pair <op> <N>'
 *   op: put8_intra put8_inter am_short8_intra am_short8_inter progress_idle progress_live_empty
 *       and, built with RVX_TAG=1 (icount_tag_pair): tag_send8_intra tag_send8_inter */
#ifndef RVX_TL
#define RVX_TL RVX_TL_RC_MLX5
#endif
#ifndef RVX_TL_INTRA
#define RVX_TL_INTRA RVX_TL_SHM
#endif
#define RVX_AM_HANDLERS(X) X(SINK, on_sink) X(ACK, on_ack) X(STOP, on_stop)
#include "bench_common.h"

#include <unistd.h>

#define ACK_EVERY 8

static uint64_t sunk, got, stop_n;   /* a serving rank: the SINK arguments' sum and count */
static long reply_errors;
static volatile uint64_t acks;       /* rank 0: acks received */
static volatile int stop;

static void on_sink(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)n; (void)p; (void)len;
    sunk += a[0];
    if (++got % ACK_EVERY == 0) reply_errors += rvx_am_reply_short(t, RVX_AM_ACK, NULL, 0) != RVX_OK;
}

static void on_ack(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    acks++;
}

static void on_stop(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)n; (void)p; (void)len;
    stop_n = a[0];
    stop = 1;
}

/* The wrappers: the bodies of bench_common.h's, which the single-transport rows count. */
RVX_NOINLINE rvx_status_t bench_put8(rvx_ep_t *ep, const uint64_t *src, uint64_t raddr, const rvx_rkey_t *rk)
{
    return rvx_put(ep, src, 8, raddr, rk);
}

RVX_NOINLINE int bench_progress_idle(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE int bench_progress_live_empty(rvx_worker_t *w) { return rvx_progress(w); }

RVX_NOINLINE rvx_status_t bench_am_short8(rvx_ep_t *ep, uint64_t arg)
{
    return rvx_am_short(ep, RVX_AM_SINK, &arg, 1);
}

#if RVX_TAG
RVX_NOINLINE rvx_status_t bench_tag_send8(rvx_ep_t *ep, const uint64_t *src, uint64_t tag)
{
    return rvx_tag_send(ep, src, 8, tag, NULL);
}
#endif

typedef struct pair_env {
    rvx_context_t *ctx;
    rvx_worker_t  *w, *idle;   /* idle: a worker with no endpoint */
    rvx_ep_t      *ep[3];      /* rank 0: to 1 and 2; ranks 1, 2: ep[0] */
    rvx_rkey_t     rk[3];
    uint64_t       base[3];    /* every rank's page */
    rvx_mem_t     *mem;
    uint64_t       src;
    long           sent[3];    /* SINK messages sent to each peer */
    long           retries;    /* am_short8 calls refused for lack of credit (counted: should be 0) */
} pair_env_t;

typedef long (*pair_loop_t)(pair_env_t *e, int peer, long n);

static long loop_put8(pair_env_t *e, int peer, long n)
{
    /* flushed every 128 puts, as icount_rc does (the network path's send queue would fill) */
    long i, errors = 0, mask = 127;
    for (i = 0; i < n; i++) {
        errors += bench_put8(e->ep[peer], &e->src, e->base[peer] + 64, &e->rk[peer]) != RVX_OK;
        if (mask && (i & mask) == mask) errors += rvx_ep_flush(e->ep[peer]) != RVX_OK;
    }
    return errors;
}

static long loop_am_short8(pair_env_t *e, int peer, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_status_t st;
        while ((st = bench_am_short8(e->ep[peer], (uint64_t)i)) == RVX_ERR_NO_RESOURCE) {
            e->retries++;
            rvx_progress(e->w);
        }
        errors += st != RVX_OK;
        if (i % ACK_EVERY == ACK_EVERY - 1) { /* the receiver has taken them all: credits come back */
            errors += rvx_ep_flush(e->ep[peer]) != RVX_OK;
            while (acks != (uint64_t)(i + 1) / ACK_EVERY) rvx_progress(e->w);
            while (rvx_progress(e->w)) {}
        }
    }
    e->sent[peer] = n;
    return errors;
}

#if RVX_TAG
/* 8-byte eager tag sends (tag i): the receiver takes them in order and acks every ACK_EVERY */
static long loop_tag_send8(pair_env_t *e, int peer, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        errors += bench_tag_send8(e->ep[peer], &e->src, (uint64_t)i) != RVX_OK;
        if (i % ACK_EVERY == ACK_EVERY - 1) {
            errors += rvx_ep_flush(e->ep[peer]) != RVX_OK;
            while (acks != (uint64_t)(i + 1) / ACK_EVERY) rvx_progress(e->w);
            while (rvx_progress(e->w)) {}
        }
    }
    return errors;
}

/* The target of tag_send8: n receives of any tag, each checked (tag i, 42), an ack every
 * ACK_EVERY. */
static long recv_tags(pair_env_t *e, long n)
{
    long i, errors = 0;
    for (i = 0; i < n; i++) {
        rvx_request_t req;
        rvx_tag_info_t info;
        uint64_t dst = 0;
        rvx_status_t st = RVX_OK;
        rvx_tag_recv(e->w, &dst, 8, 0, 0, &req, &info);
        while (req.status == RVX_INPROGRESS)
            if (!rvx_progress(e->w)) usleep(20); /* as serve(): the counted rank needs the CPU */
        errors += req.status != RVX_OK || dst != 42 || info.tag != (uint64_t)i || info.length != 8;
        if (i % ACK_EVERY == ACK_EVERY - 1) {
            rvx_am_retry(e->w, st, rvx_am_short(e->ep[0], RVX_AM_ACK, NULL, 0));
            errors += st != RVX_OK;
        }
    }
    if (errors) fprintf(stderr, "icount_pair: %ld of %ld tag messages wrong\n", errors, n);
    return errors;
}
#endif

static long loop_progress_idle(pair_env_t *e, int peer, long n)
{
    long i, errors = 0;
    (void)peer;
    for (i = 0; i < n; i++) errors += bench_progress_idle(e->idle) != 0;
    return errors;
}

static long loop_progress_live_empty(pair_env_t *e, int peer, long n)
{
    long i, errors = 0;
    (void)peer;
    for (i = 0; i < n; i++) errors += bench_progress_live_empty(e->w) != 0;
    return errors;
}

typedef struct pair_op {
    const char *name;
    pair_loop_t loop;
    int         peer;  /* whose endpoint: 1 on the node, 2 on the other node */
    int         put;   /* the peer checks the put's word */
    int         tag;   /* the peer receives the tag messages */
} pair_op_t;

static const pair_op_t ops[] = {
    {"put8_intra", loop_put8, 1, 1, 0}, {"put8_inter", loop_put8, 2, 1, 0},
    {"am_short8_intra", loop_am_short8, 1, 0, 0}, {"am_short8_inter", loop_am_short8, 2, 0, 0},
    {"progress_idle", loop_progress_idle, 1, 0, 0}, {"progress_live_empty", loop_progress_live_empty, 1, 0, 0},
#if RVX_TAG
    {"tag_send8_intra", loop_tag_send8, 1, 0, 1}, {"tag_send8_inter", loop_tag_send8, 2, 0, 1},
#endif
};

/* A serving rank: progress until STOP, sleeping a little when idle (the counted rank runs under
 * callgrind, far slower; spinning would only take its CPU). */
static long serve(pair_env_t *e, const pair_op_t *op, int me, long n)
{
    long errors = 0;
#if RVX_TAG
    if (op->tag && op->peer == me) errors += recv_tags(e, n);
#else
    (void)n;
#endif
    while (!stop)
        if (!rvx_progress(e->w)) usleep(20);
    while (rvx_progress(e->w)) {}
    if (got != stop_n || sunk != stop_n * (stop_n ? stop_n - 1 : 0) / 2) {
        fprintf(stderr, "icount_pair: rank %d: %llu messages, sum %llu (%llu sent)\n", me,
                (unsigned long long)got, (unsigned long long)sunk, (unsigned long long)stop_n);
        errors++;
    }
    if (op->put && op->peer == me && *(uint64_t *)(void *)((uint8_t *)rvx_mem_addr(e->mem) + 64) != 42) {
        fprintf(stderr, "icount_pair: rank %d: the puts did not land\n", me);
        errors++;
    }
    return errors + reply_errors;
}

int main(int argc, char **argv)
{
    pair_env_t e;
    unsigned char packed[RVX_RKEY_PACKED_SIZE], all[3][RVX_RKEY_PACKED_SIZE];
    const char *opname = argc > 2 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0, errors = 0;
    const pair_op_t *op = NULL;
    uint64_t mine;
    int k, me;
    rvx_status_t st = RVX_OK;

    for (k = 0; k < (int)(sizeof(ops) / sizeof(ops[0])); k++)
        if (!strcmp(opname, ops[k].name)) op = &ops[k];
    if (n < 1 || !op) {
        fprintf(stderr, "usage: rvxrun -n 3 icount_pair <op> <N> (ranks 0, 1 on node 0; 2 on node 1)\n");
        return 2;
    }
    memset(&e, 0, sizeof(e));
    e.src = 42;
    if (rvx_init(&e.ctx) || rvx_worker_create(e.ctx, &e.w) || rvx_worker_create(e.ctx, &e.idle)) return 1;
    me = rvx_rank(e.ctx);
    if (rvx_size(e.ctx) != 3) {
        fprintf(stderr, "icount_pair: run 3 ranks (rvxrun -n 3), not %d\n", rvx_size(e.ctx));
        return 2;
    }
    for (k = 0; k < 3; k++)
        if ((me == 0) != (k == 0) && (me == 0 || k == 0) && rvx_ep_create(e.w, k, &e.ep[k])) return 1;
#if defined(RVX_PAIR) && RVX_PAIR
    /* the rows measure the path they name only if the bootstrap placed the ranks as asked */
    if (me == 0 && (!e.ep[1]->tl[0].intra || e.ep[2]->tl[0].intra)) {
        fprintf(stderr, "icount_pair: rank 1 must be on this node and rank 2 off it (RVX_NODE=0, 0, 1): "
                        "endpoint to 1 %s, to 2 %s\n", e.ep[1]->tl[0].intra ? "on-node" : "off-node",
                e.ep[2]->tl[0].intra ? "on-node" : "off-node");
        return 1;
    }
#endif
    if (rvx_mem_alloc(e.ctx, 4096, &e.mem)) return 1;
    rvx_rkey_pack(e.mem, packed);
    mine = (uint64_t)(uintptr_t)rvx_mem_addr(e.mem);
    rvx_allgather(e.ctx, packed, sizeof(packed), all);
    rvx_allgather(e.ctx, &mine, 8, e.base);
    for (k = 0; k < 3; k++)
        if (e.ep[k] && rvx_rkey_unpack(e.ep[k], all[k], &e.rk[k])) return 1;
    rvx_barrier(e.ctx);

    if (me == 0) {
        errors = op->loop(&e, op->peer, n);
        for (k = 1; k < 3; k++) {
            uint64_t sent = (uint64_t)e.sent[k];
            errors += rvx_ep_flush(e.ep[k]) != RVX_OK;
            rvx_am_retry(e.w, st, rvx_am_short(e.ep[k], RVX_AM_STOP, &sent, 1));
            errors += st != RVX_OK;
            errors += rvx_ep_flush(e.ep[k]) != RVX_OK;
        }
        if (e.retries) fprintf(stderr, "icount_pair: %ld am_short8 calls refused for credit (counted)\n", e.retries);
    } else {
        errors = serve(&e, op, me, n);
    }
    rvx_barrier(e.ctx);
    if (errors) {
        fprintf(stderr, "icount_pair: rank %d: %ld errors in %s x %ld\n", me, errors, opname, n);
        return 1;
    }
    if (me == 0) printf("%s x %ld done (%s)\n", opname, n, rvx_config_string());
    fflush(stdout);
    for (k = 0; k < 3; k++)
        if (e.ep[k]) rvx_rkey_release(&e.rk[k]);
    rvx_worker_destroy(e.w);
    rvx_worker_destroy(e.idle);
    rvx_mem_dereg(e.mem);
    rvx_finalize(e.ctx);
    return 0;
}
