/* t_batch: batches of operations with one doorbell (rvx_batch_begin, _put, _am_short, _end)
 * between two processes, each working on the other.
 *  - 8-byte puts in batches of 16 (and a batch of one): every value lands
 *  - an ended batch lands with no flush after it (the end alone tells the NIC)
 *  - puts of every short size in one batch: every byte lands
 *  - one batch larger than the send queue: its waits for room tell the NIC, so nothing is lost
 *    and nothing hangs
 *  - short AMs in batches of 16: all delivered, in order, with their arguments; a request that
 *    finds no room has told the NIC of the batch before it (else the retry would wait forever)
 *  - a batch to a peer whose worker is gone: noticed within a bounded time (by the flush after a
 *    batch on a NIC, by the endpoint's status on shm), and from then on the flush after a batch
 *    reports RVX_ERR_PEER_FAILED */
#define RVX_AM_HANDLERS(X) X(SEQ, on_seq)
#include <rvx/rvx.h>
#include "testlib.h"

#define NPUT8  1024           /* phase A: 64 batches of 16 */
#define NBIG   20000          /* phase C: more than any send queue holds */
#define NAM    512            /* phase D: 32 batches of 16 */
#define VAR_AT (NBIG * 8)     /* phase B's area, after phase C's */
#define REGION (VAR_AT + 64 * 1024)

static volatile unsigned got, order_bad;

/* args: the sender's sequence number; they must come in order */
static void on_seq(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n != 1 || a[0] != got) order_bad++;
    got++;
}

static uint64_t val(int rank, unsigned i, unsigned phase)
{
    return (uint64_t)phase << 56 | (uint64_t)rank << 40 | 0x5a5a0000u | i;
}

/* Phase A: NPUT8 puts of 8 bytes in batches of 16, the first batch of one. */
static void put8_batches(rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t base, int me)
{
    rvx_batch_t b;
    unsigned i = 0;
    uint64_t v = val(me, 0, 1);
    rvx_batch_begin(&b, ep);
    T_OK(rvx_batch_put(&b, &v, 8, base, rk));
    rvx_batch_end(&b);
    rvx_batch_begin(&b, ep);
    for (i = 1; i < NPUT8; i++) {
        v = val(me, i, 1);
        T_OK(rvx_batch_put(&b, &v, 8, base + 8 * (uint64_t)i, rk));
        if (i % 16 == 0) {
            rvx_batch_end(&b);
            rvx_batch_begin(&b, ep);
        }
    }
    rvx_batch_end(&b);
    T_OK(rvx_ep_flush(ep));
}

/* A batch of 16 puts; *st: the first failure, if any. */
static void put8_16(rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t base, rvx_status_t *st)
{
    rvx_batch_t b;
    unsigned i;
    rvx_batch_begin(&b, ep);
    for (i = 0; i < 16 && *st == RVX_OK; i++) {
        uint64_t v = 0x1000 + i;
        *st = rvx_batch_put(&b, &v, 8, base + 8 * (uint64_t)i, rk);
    }
    rvx_batch_end(&b);
}

/* Phase B: one put of each size 1..RVX_PUT_SHORT_MAX, in one batch. */
static void var_batch(rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t base, int me)
{
    static unsigned char src[2 * RVX_PUT_SHORT_MAX]; /* room the compiler cannot rule out */
    size_t len;
    uint64_t off = 0;
    rvx_batch_t b;
    rvx_batch_begin(&b, ep);
    for (len = 1; len <= RVX_PUT_SHORT_MAX; len++) {
        t_fill(src, len, (uint64_t)me << 16 | len);
        T_OK(rvx_batch_put(&b, src, len, base + off, rk));
        off += len;
    }
    rvx_batch_end(&b);
    T_OK(rvx_ep_flush(ep));
}

static void var_check(const unsigned char *p, int peer)
{
    size_t len;
    for (len = 1; len <= RVX_PUT_SHORT_MAX; len++) {
        long bad = t_verify(p, len, (uint64_t)peer << 16 | len);
        T_CHECK(bad < 0, "put of %zu bytes in a batch: byte %ld wrong", len, bad);
        p += len;
    }
}

/* Phase C: NBIG puts in one batch. */
static void big_batch(rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t base, int me)
{
    rvx_batch_t b;
    unsigned i;
    rvx_batch_begin(&b, ep);
    for (i = 0; i < NBIG; i++) {
        uint64_t v = val(me, i, 3);
        T_OK(rvx_batch_put(&b, &v, 8, base + 8 * (uint64_t)i, rk));
    }
    rvx_batch_end(&b);
    T_OK(rvx_ep_flush(ep));
}

/* Phase D: NAM short AMs in batches of 16; without room the batch ends, progress, and the rest
 * goes in a new one. */
static void am_batches(rvx_worker_t *w, rvx_ep_t *ep)
{
    double t0 = t_now();
    uint64_t i = 0;
    rvx_batch_t b;
    rvx_batch_begin(&b, ep);
    while (i < NAM && t_now() - t0 < 60) {
        rvx_status_t st = rvx_batch_am_short(&b, RVX_AM_SEQ, &i, 1);
        if (st == RVX_OK) {
            if (++i % 16 == 0) {
                rvx_batch_end(&b);
                rvx_batch_begin(&b, ep);
            }
        } else if (st == RVX_ERR_NO_RESOURCE) {
            rvx_batch_end(&b);
            rvx_progress(w);
            rvx_batch_begin(&b, ep);
        } else {
            T_STATUS(st, RVX_OK);
            rvx_batch_end(&b);
            return;
        }
    }
    rvx_batch_end(&b);
    T_CHECK(i == NAM, "sent %u of %d messages in 60 s", (unsigned)i, NAM);
    t0 = t_now();
    while (got < NAM && t_now() - t0 < 60) rvx_progress(w);
    T_CHECK(got == NAM && !order_bad, "received %u of %d messages, %u out of order", got, NAM,
            order_bad);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    rvx_ep_t *ep;
    rvx_rkey_t rk;
    t_remote_t *rm;
    uint64_t base, *mine;
    unsigned i, bad = 0;
    int me, peer;

    t_spawn(argc, argv, 2, 240);
    me = t_start(&ctx, &w);
    peer = 1 - me;
    T_OK(rvx_mem_alloc(ctx, REGION, &mem));
    memset(rvx_mem_addr(mem), 0, REGION);
    rm = t_exchange(ctx, mem);
    T_OK(rvx_ep_create(w, peer, &ep));
    T_OK(rvx_rkey_unpack(ep, rm[peer].packed, &rk));
    base = rm[peer].addr;
    mine = (uint64_t *)rvx_mem_addr(mem);

    put8_batches(ep, &rk, base, me);
    T_OK(rvx_barrier(ctx)); /* the peer's flush returned: its puts are here */
    for (i = 0; i < NPUT8; i++) bad += mine[i] != val(peer, i, 1);
    T_CHECK(!bad, "%u of %d 8-byte puts in batches of 16 are wrong", bad, NPUT8);

    /* an ended batch lands with no flush: the end alone told the NIC */
    {
        rvx_status_t st = RVX_OK;
        double t0 = t_now();
        put8_16(ep, &rk, base + 8 * NPUT8, &st);
        T_OK(st);
        for (i = 0; i < 16 && t_now() - t0 < 60; )
            if (rvx_load_acquire_u64(&mine[NPUT8 + i]) == 0x1000 + i) i++;
            else rvx_progress(w);
        T_CHECK(i == 16, "an ended batch of 16 puts, never flushed: %u of 16 landed in 60 s", i);
        T_OK(rvx_barrier(ctx));
        T_OK(rvx_ep_flush(ep));
    }

    var_batch(ep, &rk, base + VAR_AT, me);
    T_OK(rvx_barrier(ctx));
    var_check((const unsigned char *)rvx_mem_addr(mem) + VAR_AT, peer);

    big_batch(ep, &rk, base, me);
    T_OK(rvx_barrier(ctx));
    for (i = 0, bad = 0; i < NBIG; i++) bad += mine[i] != val(peer, i, 3);
    T_CHECK(!bad, "%u of %d puts of a batch larger than the send queue are wrong", bad, NBIG);

    am_batches(w, ep);
    T_OK(rvx_barrier(ctx));

    /* the peer's worker goes; a batch to it then fails at the flush, without hanging */
    if (me == 1) {
        rvx_rkey_release(&rk);
        rvx_worker_destroy(w);
        T_OK(rvx_barrier(ctx));
    } else {
        rvx_status_t st = RVX_OK;
        double t0;
        T_OK(rvx_barrier(ctx));
        t0 = t_now();
        while (st == RVX_OK && t_now() - t0 < 60) {
            put8_16(ep, &rk, base, &st);
            if (st == RVX_OK) st = rvx_ep_flush(ep);  /* a NIC learns of it here */
            if (st == RVX_OK) st = rvx_ep_status(ep); /* shm, here */
            rvx_progress(w);
        }
        T_STATUS(st, RVX_ERR_PEER_FAILED);
        st = RVX_OK; /* known failed: a batch to it fails at its flush at the latest */
        put8_16(ep, &rk, base, &st);
        T_CHECK(st == RVX_OK || st == RVX_ERR_PEER_FAILED, "a put to a failed peer: %s",
                rvx_status_str(st));
        T_STATUS(rvx_ep_flush(ep), RVX_ERR_PEER_FAILED);
        rvx_rkey_release(&rk);
        rvx_worker_destroy(w);
    }
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
