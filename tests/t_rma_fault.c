/* t_rma_fault: a copied or zero-copy put or get that meets a remote access error stops there. It
 * returns RVX_ERR_REMOTE_ACCESS (from the call, its request or the flush after it), writes
 * nothing at the target, leaves the local buffer untouched, and a get of an absurd length returns
 * at once. 3 ranks; rank 0 is the initiator, ranks 1 and 2 the targets.
 *
 * Every transport: a transfer of 264 KiB whose first 256 KiB lie below the target's region and
 * whose last 8 KiB lie inside it (longer than one bounce ring) is refused at the call; the
 * endpoint stays usable.
 * rc_mlx5 and dc_mlx5 alone: the same transfer through a key whose base and length were stretched
 * by 256 KiB (a peer's key is only a claim: the NIC holds the real bounds), so the NIC refuses
 * the first chunk and the transport must stop the rest; then a SIZE_MAX get on that failed
 * endpoint, and the failed endpoint's status and sends name the access error. */
#define RVX_AM_HANDLERS(X) X(NOTE, on_note)
#include <rvx/rvx.h>
#include "testlib.h"

static void on_note(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
}

#define NR      3
#define REGION  (32 * 1024)         /* each target's region */
#define GUARD   (16 * 1024)         /* its first part, which the faulty transfers end in */
#define BELOW   (256 * 1024)        /* how far below the region they start */
#define XFER    (BELOW + 8 * 1024)  /* their length */
#define GOOD    4096                /* a valid put and get after the refusals, at GUARD */

#if RVX_TL != RVX_TL_SHM && !defined(RVX_TL_INTRA)
#define STRETCH 1                   /* the key is rvx__mlx5's: base and length can be forged */
#else
#define STRETCH 0
#endif

static volatile size_t absurd = SIZE_MAX; /* not a constant: no compile-time bound check */
static uint8_t *lbuf;               /* rank 0's local buffer of XFER bytes (registered) */
static rvx_mem_t *lmem;

/* The final status of an operation that may have returned RVX_INPROGRESS, then of a flush of
 * its endpoint when it did not fail by itself (a put's error may surface there). */
static rvx_status_t settle(rvx_worker_t *w, rvx_ep_t *ep, rvx_status_t st, rvx_request_t *req,
                           const char *what)
{
    if (st == RVX_INPROGRESS) st = t_wait_req(w, req, what, XFER);
    if (st == RVX_OK) {
        rvx_request_t f;
        st = rvx_ep_flush_nb(ep, &f);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &f, "flush after", XFER);
    }
    return st;
}

/* Each faulty transfer at raddr through key rk: refused with RVX_ERR_REMOTE_ACCESS, the local
 * buffer of a get untouched. Puts go first when the endpoint is to fail on the first error. */
static void faulty(rvx_worker_t *w, rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t raddr,
                   int gets, int puts, const char *how)
{
    rvx_request_t req;
    rvx_status_t st;
    long bad;
    if (puts) {
        t_fill(lbuf, XFER, 7);
        st = settle(w, ep, rvx_put(ep, lbuf, XFER, raddr, rk), NULL, "put");
        T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "%s: copied put of %d B: %s, not a remote access error",
                how, XFER, rvx_status_str(st));
        if (puts > 1) {
            st = settle(w, ep, rvx_put_zcopy(ep, lbuf, XFER, lmem, raddr, rk, &req), &req, "put_zcopy");
            T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "%s: zero-copy put: %s, not a remote access error",
                    how, rvx_status_str(st));
        }
    }
    if (gets) {
        memset(lbuf, 0xee, XFER);
        st = rvx_get(ep, lbuf, XFER, raddr, rk, &req);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get", XFER);
        T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "%s: copied get of %d B: %s, not a remote access error",
                how, XFER, rvx_status_str(st));
        for (bad = 0; bad < XFER && lbuf[bad] == 0xee; bad++) {}
        T_CHECK(bad == XFER, "%s: the failed get wrote its buffer at byte %ld", how, bad);
        if (gets > 1) {
            st = rvx_get_zcopy(ep, lbuf, XFER, lmem, raddr, rk, &req);
            if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get_zcopy", XFER);
            T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "%s: zero-copy get: %s, not a remote access error",
                    how, rvx_status_str(st));
        }
    }
}

/* A valid put and get of GOOD bytes at raddr: the endpoint still works. */
static void works(rvx_worker_t *w, rvx_ep_t *ep, const rvx_rkey_t *rk, uint64_t raddr)
{
    rvx_request_t req;
    rvx_status_t st;
    t_fill(lbuf, GOOD, 11);
    T_OK(rvx_put(ep, lbuf, GOOD, raddr, rk));
    T_OK(rvx_ep_flush(ep));
    memset(lbuf, 0, GOOD);
    st = rvx_get(ep, lbuf, GOOD, raddr, rk, &req);
    if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "get", GOOD);
    T_CHECK(st == RVX_OK && t_verify(lbuf, GOOD, 11) < 0,
            "after the refusals a put and get on the same endpoint: %s", rvx_status_str(st));
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    t_remote_t *rm;
    rvx_rkey_t rk[NR];
    rvx_ep_t *ep[NR];
    int me, r;

    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    T_OK(rvx_mem_alloc(ctx, me == 0 ? XFER : REGION, &mem));
    t_fill(rvx_mem_addr(mem), me == 0 ? XFER : REGION, (uint64_t)me);
    lbuf = (uint8_t *)rvx_mem_addr(mem);
    lmem = mem;
    rm = t_exchange(ctx, mem);
    t_connect_from0(w, me, NR, rm, ep, rk);
    T_OK(rvx_barrier(ctx));
    if (me == 0) {
        rvx_request_t req;
        rvx_status_t st;
        double t0;
        /* Outside the key's own region: refused at the call, the endpoint goes on (in a pair
         * build rank 1 is on rank 0's node and rank 2 on the other: both paths). */
        for (r = 1; r < NR; r++) {
            faulty(w, ep[r], &rk[r], rm[r].addr - BELOW, 2, 2, "below the region");
            works(w, ep[r], &rk[r], rm[r].addr + GUARD);
            st = rvx_get(ep[r], lbuf, absurd, rm[r].addr, &rk[r], &req);
            if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "SIZE_MAX get", 0);
            T_CHECK(st == RVX_ERR_REMOTE_ACCESS, "a SIZE_MAX get to rank %d: %s", r, rvx_status_str(st));
        }
#if STRETCH
        {
            /* A stretched key: the NIC's refusal of the first chunk stops the whole transfer. */
            rvx_rkey_t s1 = rk[1], s2 = rk[2];
            s1.base -= BELOW; s1.len += BELOW;
            s2.base -= BELOW; s2.len += BELOW;
            faulty(w, ep[1], &s1, rm[1].addr - BELOW, 1, 0, "stretched key, get");
            /* the endpoint failed by an access error: its peer answered, so it is not "gone" */
            T_STATUS(rvx_ep_status(ep[1]), RVX_ERR_REMOTE_ACCESS);
            T_STATUS(rvx_am_short(ep[1], RVX_AM_NOTE, NULL, 0), RVX_ERR_REMOTE_ACCESS);
            T_STATUS(rvx_am_long(ep[1], RVX_AM_NOTE, NULL, 0, lbuf, 64, rm[1].addr, &rk[1]),
                     RVX_ERR_REMOTE_ACCESS);
            faulty(w, ep[2], &s2, rm[2].addr - BELOW, 0, 1, "stretched key, put");
            t0 = t_now();
            st = rvx_get(ep[1], lbuf, absurd, rm[1].addr, &s1, &req);
            if (st == RVX_INPROGRESS) st = t_wait_req(w, &req, "SIZE_MAX get", 0);
            T_CHECK(st != RVX_OK, "a SIZE_MAX get on the failed endpoint: %s", rvx_status_str(st));
            printf("rank 0: SIZE_MAX get on a failed endpoint: %s after %.3f s\n",
                   rvx_status_str(st), t_now() - t0);
        }
#else
        (void)t0;
        printf("rank 0: stretched keys: not on this transport (its keys are checked at the call)\n");
#endif
    }
    T_OK(rvx_barrier(ctx));
    if (me != 0) { /* nothing written in the guard; the valid put where it belongs */
        long bad = t_verify(rvx_mem_addr(mem), GUARD, (uint64_t)me);
        T_CHECK(bad < 0, "rank %d: the refused transfers wrote its region at byte %ld", me, bad);
        T_CHECK(t_verify((uint8_t *)rvx_mem_addr(mem) + GUARD, GOOD, 11) < 0,
                "rank %d: the valid put is not there", me);
    }
    T_OK(rvx_barrier(ctx));
    t_disconnect(ep, rk, NR);
    return t_finish(ctx, w, mem, rk, 0, rm);
}
