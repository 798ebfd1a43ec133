/* t_am: three processes send each other short, medium and long active messages at the same time;
 * every request is answered by a reply carrying a checksum of what arrived. Checks arguments,
 * payload bytes, in-order delivery per pair, and full rings (many laps, rvx_am_retry).
 * On more ranks (RVX_TEST_RANKS) every rank still sends to every rank, N_MSG*NR/N messages
 * to each (as many per sender as on NR ranks), long payloads into a slice of REGION/N per sender. */
#define RVX_AM_HANDLERS(X) X(REQ_SHORT, on_short) X(REQ_MEDIUM, on_medium) X(REQ_LONG, on_long) \
                           X(ACK, on_ack) X(DONE, on_done)
#include <rvx/rvx.h>
#include "testlib.h"

#define NR     3
#define N_MSG  6000
#define REGION (64 * 1024)
#define MAXR   32

static int nr, n_msg; /* ranks, messages to each */
static int next_seq[MAXR], bad[MAXR], acks, acks_bad, done;
static uint64_t long_base[MAXR]; /* where each sender's long payloads land in our region */

static uint64_t checksum(const void *p, size_t len)
{
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    size_t i;
    for (i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Arguments: args[0] = sequence number, args[1] = sender rank, args[2..] = seq * k. */
static int args_ok(const uint64_t *a, unsigned n)
{
    unsigned k;
    if (n < 2 || a[1] >= (uint64_t)nr || a[0] != (uint64_t)next_seq[a[1]]) return 0;
    for (k = 2; k < n; k++)
        if (a[k] != a[0] * k) return 0;
    return 1;
}

static void ack(rvx_am_token_t *t, uint64_t seq, uint64_t sum)
{
    uint64_t a[2];
    a[0] = seq;
    a[1] = sum;
    T_OK(rvx_am_reply_short(t, RVX_AM_ACK, a, 2));
}

static void on_short(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    if (!args_ok(args, nargs) || p || len) bad[rvx_ep_rank(t->ep)]++;
    next_seq[rvx_ep_rank(t->ep)]++;
    ack(t, args[0], 0);
}

static void on_medium(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (!args_ok(args, nargs) || (len && t_verify(p, len, args[0] * 7 + (uint64_t)src) >= 0)) bad[src]++;
    next_seq[src]++;
    ack(t, args[0], checksum(p, len));
}

static void on_long(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (!args_ok(args, nargs) || (uint64_t)(uintptr_t)p != long_base[src] ||
        t_verify(p, len, args[0] * 7 + (uint64_t)src) >= 0)
        bad[src]++;
    next_seq[src]++;
    /* a long reply: the checksum comes back as a medium payload */
    {
        uint64_t a[2], sum = checksum(p, len);
        a[0] = args[0];
        a[1] = sum;
        T_OK(rvx_am_reply_medium(t, RVX_AM_ACK, a, 2, &sum, sizeof(sum)));
    }
}

static uint64_t *expect_sum; /* [peer * n_msg + seq] */
static int ack_from[MAXR];

static void on_ack(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    int src = rvx_ep_rank(t->ep);
    if (t->is_request || nargs != 2 || args[0] != (uint64_t)ack_from[src] ||
        args[1] != expect_sum[src * n_msg + (int)(args[0] % (uint64_t)n_msg)] ||
        (len && (len != 8 || memcmp(p, &args[1], 8))))
        acks_bad++;
    ack_from[src]++;
    acks++;
}

static void on_done(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    done++;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *eps[MAXR];
    rvx_rkey_t rks[MAXR];
    rvx_mem_t *mem;
    t_remote_t *rm;
    static unsigned char payload[REGION];
    int me, r, i, sent[MAXR];
    rvx_status_t st;

    t_spawn_upto(argc, argv, NR, MAXR, 300);
    me = t_start(&ctx, &w);
    nr = rvx_size(ctx);
    n_msg = nr > NR ? N_MSG * NR / nr : N_MSG;
    expect_sum = (uint64_t *)calloc((size_t)nr * (size_t)n_msg, sizeof(*expect_sum));
    T_OK(rvx_mem_alloc(ctx, REGION, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < nr; r++) {
        T_OK(rvx_ep_create(w, r, &eps[r]));
        T_OK(rvx_rkey_unpack(eps[r], rm[r].packed, &rks[r]));
        /* sender r's long payloads land in the r-th slice of the target's region */
        long_base[r] = (uint64_t)(uintptr_t)rvx_mem_addr(mem) + (uint64_t)r * (REGION / nr);
        sent[r] = 0;
    }
    T_OK(rvx_barrier(ctx));

    /* Round-robin over peers (ourselves included): kind and size vary with the sequence. */
    for (i = 0; i < n_msg; i++) {
        for (r = 0; r < nr; r++) {
            uint64_t a[RVX_AM_MAX_ARGS];
            unsigned nargs = 2 + (unsigned)(i % (RVX_AM_MAX_ARGS - 1)), k;
            int kind = i % 3;
            size_t len = kind == 1 ? (size_t)(i * 131) % (RVX_AM_MAX_MEDIUM + 1)
                                   : (size_t)(i * 61) % (REGION / nr);
            a[0] = (uint64_t)i;
            a[1] = (uint64_t)me;
            for (k = 2; k < nargs; k++) a[k] = (uint64_t)i * k;
            if (kind == 0) {
                expect_sum[r * n_msg + i] = 0;
                rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_REQ_SHORT, a, nargs));
            } else {
                t_fill(payload, len, (uint64_t)i * 7 + (uint64_t)me);
                expect_sum[r * n_msg + i] = checksum(payload, len);
                if (kind == 1) {
                    rvx_am_retry(w, st, rvx_am_medium(eps[r], RVX_AM_REQ_MEDIUM, a, nargs, payload, len));
                } else {
                    /* a long AM overwrites the slice: wait for the previous one's ack first */
                    rvx_status_t ws = RVX_OK;
                    unsigned idle = 0;
                    while (ack_from[r] < sent[r] && ws == RVX_OK) {
                        if (rvx_progress(w)) continue;
                        if ((++idle & 4095) == 0) ws = rvx_ep_status(eps[r]);
                        rvx__backoff(&idle);
                    }
                    rvx_am_retry(w, st, rvx_am_long(eps[r], RVX_AM_REQ_LONG, a, nargs, payload, len,
                                                    rm[r].addr + (uint64_t)me * (REGION / nr), &rks[r]));
                }
            }
            T_CHECK(st == RVX_OK, "send %d to %d: %s", i, r, rvx_status_str(st));
            sent[r]++;
        }
        rvx_progress(w);
    }
    /* all acks back, then tell everyone we are done and wait for their word */
    {
        unsigned idle = 0;
        while (acks < nr * n_msg)
            if (!rvx_progress(w)) rvx__backoff(&idle);
    }
    for (r = 0; r < nr; r++) rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_DONE, NULL, 0));
    while (done < nr) rvx_progress(w);
    for (r = 0; r < nr; r++) {
        T_CHECK(next_seq[r] == n_msg && bad[r] == 0, "from rank %d: %d delivered, %d wrong", r,
                next_seq[r], bad[r]);
    }
    T_CHECK(acks_bad == 0, "%d replies wrong", acks_bad);
    {
        rvx_worker_stats_t s;
        rvx_worker_stats(w, &s);
        T_CHECK(!s.am_unknown_id && !s.am_bad_frame && !s.am_bad_long_target, "bad input counted");
    }
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < nr; r++) rvx_rkey_release(&rks[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    printf("rank %d: %d messages to each of %d ranks, all answered\n", me, n_msg, nr);
    free(expect_sum);
    return t_exit();
}
