/* t_robust: what a user may get wrong is refused at the call, with a status, on every transport:
 * absurd lengths, requests in any initial state, calls a handler may not make. Two ranks, an
 * AM + tag build; the same source runs on shm (build/tests) and rc_mlx5 (build/tests-rc). */
#define RVX_TAG 1
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(TRY, on_try) X(LONGT, on_long)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int pings;
static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    pings++;
}

/* A handler tries the requests it may not send; what they returned is checked outside. */
static volatile int tries;
static rvx_status_t try_short, try_medium, try_tag, try_reply;
static void on_try(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    static const char pay[4] = "abc";
    uint64_t x = 1;
    (void)a; (void)n; (void)p; (void)len;
    try_short = rvx_am_short(t->ep, RVX_AM_PING, &x, 1);
    try_medium = rvx_am_medium(t->ep, RVX_AM_PING, NULL, 0, pay, sizeof(pay));
    try_tag = rvx_tag_send(t->ep, pay, sizeof(pay), 5, NULL); /* a tag send is a request too */
    try_reply = rvx_am_reply_short(t, RVX_AM_PING, &x, 1); /* a reply is what it may send */
    tries++;
}

static volatile int longs;
static void on_long(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    longs++;
}

/* Progress until *counter reaches want (the loopback frame has come round), 10 s at most. */
static int t_progress_until(rvx_worker_t *w, volatile int *counter, int want, volatile uint64_t *alt,
                            uint64_t alt_want)
{
    double t0 = t_now();
    while (*counter < want && (!alt || *alt < alt_want) && t_now() - t0 < 10) rvx_progress(w);
    return *counter >= want || (alt && *alt >= alt_want);
}

/* Requests from inside a handler are refused (a request could wait for ring room that only the
 * handler's return frees); the handler's one reply goes; outside, requests work again. */
static void requests_from_handler(rvx_worker_t *w, rvx_ep_t *self)
{
    int p0 = pings;
    T_OK(rvx_am_short(self, RVX_AM_TRY, NULL, 0));
    T_CHECK(t_progress_until(w, &tries, 1, NULL, 0), "the handler never ran");
    T_STATUS(try_short, RVX_ERR_INVALID_PARAM);
    T_STATUS(try_medium, RVX_ERR_INVALID_PARAM);
    T_STATUS(try_tag, RVX_ERR_INVALID_PARAM);
    T_STATUS(try_reply, RVX_OK);
    T_CHECK(t_progress_until(w, &pings, p0 + 1, NULL, 0), "the reply never arrived");
    T_CHECK(w->in_handler == 0, "in_handler left at %u", w->in_handler);
    T_OK(rvx_am_short(self, RVX_AM_PING, NULL, 0));
    T_CHECK(t_progress_until(w, &pings, p0 + 2, NULL, 0), "a request after the handler did not arrive");
    T_CHECK(pings == p0 + 2, "a refused request was delivered after all (%d pings)", pings - p0);
}

/* A long AM's target must lie in what the application registered: not in the slack of a page
 * that the registration cache pinned whole, nor in the cache's registration at all. The frames
 * are written below the AM layer, as a hostile peer would. */
static void inject_long(rvx_worker_t *w, rvx_ep_t *ep, uint64_t raddr, uint64_t len)
{
    uint8_t *b;
    while (!(b = (uint8_t *)rvx__tl_am_claim(&ep->tl[0], RVX__CHAN_REQUEST, 16))) rvx_progress(w);
    memcpy(b, &raddr, 8);
    memcpy(b + 8, &len, 8);
    rvx__tl_am_publish(&ep->tl[0], RVX__CHAN_REQUEST, b, 16, RVX__AM_INFO(RVX_AM_LONGT, RVX__AM_LONG, 0));
}

static void long_am_not_into_cache_slack(rvx_context_t *ctx, rvx_worker_t *w, rvx_ep_t *self)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), blen = 100;
    uint8_t *area = (uint8_t *)aligned_alloc(pg, 2 * pg), *buf = area + 64;
    rvx_mem_t *cached, *app;
    rvx_worker_stats_t s;
    uint64_t bad0;
    int l0 = longs;
    memset(area, 0x5a, 2 * pg);
    T_OK(rvx__tag_reg(rvx__tag_of(w), buf, blen, &cached)); /* pins the whole page */
    T_CHECK(rvx_mem_len(cached) >= pg, "the cache registered %zu bytes", rvx_mem_len(cached));
    rvx_worker_stats(w, &s);
    bad0 = s.am_bad_long_target;
    inject_long(w, self, (uint64_t)(uintptr_t)(buf + blen), 64); /* the page's slack */
    T_CHECK(t_progress_until(w, &longs, l0 + 1, &w->stats.am_bad_long_target, bad0 + 1), "no answer");
    inject_long(w, self, (uint64_t)(uintptr_t)buf, blen);       /* the cache's, not the app's */
    T_CHECK(t_progress_until(w, &longs, l0 + 1, &w->stats.am_bad_long_target, bad0 + 2), "no answer");
    T_OK(rvx_mem_reg(ctx, buf, blen, &app));
    inject_long(w, self, (uint64_t)(uintptr_t)buf, blen);       /* now the application's */
    T_CHECK(t_progress_until(w, &longs, l0 + 1, NULL, 0), "the long AM into registered memory never ran");
    inject_long(w, self, (uint64_t)(uintptr_t)(buf + blen), 64); /* still not past it */
    T_CHECK(t_progress_until(w, &longs, l0 + 2, &w->stats.am_bad_long_target, bad0 + 3), "no answer");
    rvx_worker_stats(w, &s);
    T_CHECK(longs == l0 + 1, "long AMs run: %d (only the one into registered memory may)", longs - l0);
    T_CHECK(s.am_bad_long_target == bad0 + 3, "long AMs refused: %llu of 3",
            (unsigned long long)(s.am_bad_long_target - bad0));
    rvx_mem_dereg(app);
    rvx__tag_dereg(rvx__tag_of(w), cached);
    rvx_tag_mem_invalidate(w, area, 2 * pg);
    free(area);
}

#if RVX_TL == RVX_TL_SHM
/* A key of this very process (a loopback endpoint) is bounded by what the process registered,
 * not by its own length word: stretched or moved, it is refused. */
static void loopback_key_bounded(rvx_context_t *ctx, rvx_ep_t *self)
{
    static uint8_t user[256];
    rvx_mem_t *mems[2];
    unsigned i;
    T_OK(rvx_mem_alloc(ctx, 4096, &mems[0]));
    T_OK(rvx_mem_reg(ctx, user, sizeof(user), &mems[1]));
    for (i = 0; i < 2; i++) {
        rvx__shm_packed_rkey_t p;
        rvx_rkey_t k;
        uint8_t buf[RVX_RKEY_PACKED_SIZE];
        T_OK(rvx_rkey_pack(mems[i], buf));
        memcpy(&p, buf, sizeof(p));
        p.len = (uint64_t)1 << 20;
        memcpy(buf, &p, sizeof(p));
        T_STATUS(rvx_rkey_unpack(self, buf, &k), RVX_ERR_INVALID_PARAM);
        p.len = rvx_mem_len(mems[i]);
        p.base += 8;
        memcpy(buf, &p, sizeof(p));
        T_STATUS(rvx_rkey_unpack(self, buf, &k), RVX_ERR_INVALID_PARAM);
        T_OK(rvx_rkey_pack(mems[i], buf));
        T_OK(rvx_rkey_unpack(self, buf, &k));
        T_OK(rvx_put(self, "xyz", 3, (uint64_t)(uintptr_t)rvx_mem_addr(mems[i]), &k));
        T_STATUS(rvx_put(self, "xyz", 3, (uint64_t)(uintptr_t)rvx_mem_addr(mems[i]) + rvx_mem_len(mems[i]) - 2, &k),
                 RVX_ERR_REMOTE_ACCESS);
        rvx_rkey_release(&k);
        T_CHECK(memcmp(rvx_mem_addr(mems[i]), "xyz", 3) == 0, "loopback put did not land");
    }
    rvx_mem_dereg(mems[0]);
    rvx_mem_dereg(mems[1]);
}

/* The peer's address record as the bootstrap brought it, with its mailbox length changed: the
 * rings sit at offsets the job's size gives, so any other length is refused (a shorter one was
 * mapped short, and the rings read past it). */
static void hostile_address_refused(rvx_worker_t *w, int peer)
{
    static const uint64_t lens[] = {4096, 1, 0};
    unsigned i;
    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        rvx__tl_addr_t a;
        rvx__tl_ep_t tep;
        memcpy(&a, w->addrs + (size_t)peer * RVX__ADDR_STRIDE(rvx_size(w->ctx)), sizeof(a));
        a.mbox_len = lens[i];
        T_STATUS(rvx__tl_ep_connect(&w->iface[0], &tep, peer, &a), RVX_ERR_INVALID_PARAM);
    }
}
#endif

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

/* A call that returns RVX_INPROGRESS has set its request pending itself: a request that starts
 * zeroed (RVX_OK) must not read as done before the data is there. */
#define REGION (256 * 1024)
static void requests_start_pending(rvx_context_t *ctx, rvx_worker_t *w, rvx_ep_t *ep, int me)
{
    static unsigned char dst[REGION];
    rvx_mem_t *mem;
    t_remote_t *all;
    rvx_rkey_t rkey;
    rvx_request_t req;
    rvx_status_t st;
    uint64_t *mine, old = 0;
    uint32_t old32 = 0;
    static const size_t lens[] = {8, 4096, REGION};
    unsigned i;

    T_OK(rvx_mem_alloc(ctx, REGION, &mem));
    t_fill(rvx_mem_addr(mem), REGION, 40 + (uint64_t)me);
    mine = (uint64_t *)rvx_mem_addr(mem);
    mine[0] = 1000;
    all = t_exchange(ctx, mem);
    /* a key used on the wrong endpoint: our own key on the endpoint to the other rank */
    T_STATUS(rvx_rkey_unpack(ep, all[me].packed, &rkey), RVX_ERR_INVALID_PARAM);
#if RVX_TL == RVX_TL_SHM
    {
        /* a peer's key whose length is stretched past the memory behind it is refused */
        unsigned char forged[RVX_RKEY_PACKED_SIZE];
        rvx__shm_packed_rkey_t k;
        memcpy(&k, all[1 - me].packed, sizeof(k));
        k.len = 64 * (uint64_t)REGION;
        memcpy(forged, all[1 - me].packed, sizeof(forged));
        memcpy(forged, &k, sizeof(k));
        T_STATUS(rvx_rkey_unpack(ep, forged, &rkey), RVX_ERR_INVALID_PARAM);
    }
#endif
    T_OK(rvx_rkey_unpack(ep, all[1 - me].packed, &rkey));
    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memset(dst, 0, sizeof(dst));
        memset(&req, 0, sizeof(req));
        st = rvx_get(ep, dst + 8, lens[i] - 8, all[1 - me].addr + 8, &rkey, &req);
        T_CHECK(st != RVX_INPROGRESS || req.status == RVX_INPROGRESS,
                "get of %zu bytes returned RVX_INPROGRESS with its request not pending", lens[i]);
        st = rvx_complete(w, st, &req);
        T_OK(st);
        if (lens[i] > 8) {
            unsigned char want[64];
            t_fill(want, sizeof(want), 40 + (uint64_t)(1 - me));
            T_CHECK(memcmp(dst + 8, want + 8, lens[i] < 64 ? lens[i] - 8 : 56) == 0,
                    "get of %zu bytes: data not there when its request completed", lens[i]);
        }
    }
    T_OK(rvx_barrier(ctx));
    memset(&req, 0, sizeof(req));
    st = rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, all[1 - me].addr, &rkey, &old, &req);
    T_CHECK(st != RVX_INPROGRESS || req.status == RVX_INPROGRESS,
            "atomic64 returned RVX_INPROGRESS with its request not pending");
    T_OK(rvx_complete(w, st, &req));
    T_CHECK(old == 1000, "atomic64 fetched %llu before its request completed", (unsigned long long)old);
    T_OK(rvx_barrier(ctx));
    memset(&req, 0, sizeof(req));
    st = rvx_atomic32(ep, RVX_AMO_ADD, 1, 0, all[1 - me].addr, &rkey, &old32, &req);
    T_CHECK(st != RVX_INPROGRESS || req.status == RVX_INPROGRESS,
            "atomic32 returned RVX_INPROGRESS with its request not pending");
    T_OK(rvx_complete(w, st, &req));
    T_CHECK(old32 == 1001, "atomic32 fetched %u before its request completed", old32);
    /* flushes: after a large put, a zeroed request must not read as flushed */
    T_OK(rvx_put(ep, dst, REGION / 2, all[1 - me].addr + REGION / 2, &rkey));
    memset(&req, 0, sizeof(req));
    st = rvx_ep_flush_nb(ep, &req);
    T_CHECK(st != RVX_INPROGRESS || req.status == RVX_INPROGRESS,
            "ep flush returned RVX_INPROGRESS with its request not pending");
    T_OK(rvx_complete(w, st, &req));
    T_OK(rvx_put(ep, dst, REGION / 2, all[1 - me].addr + REGION / 2, &rkey));
    memset(&req, 0, sizeof(req));
    st = rvx_worker_flush_nb(w, &req);
    T_CHECK(st != RVX_INPROGRESS || req.status == RVX_INPROGRESS,
            "worker flush returned RVX_INPROGRESS with its request not pending");
    T_OK(rvx_complete(w, st, &req));
    T_OK(rvx_barrier(ctx));
    T_CHECK(mine[0] == 1002, "target holds %llu", (unsigned long long)mine[0]);
    T_OK(rvx_barrier(ctx));
    rvx_rkey_release(&rkey);
    rvx_mem_dereg(mem);
    free(all);
}

#if RVX_RNDV == RVX_RNDV_GET
/* A peer's ATS completes our rendezvous send with the status it carries: only a real status is
 * taken; any other word fails the send with RVX_ERR_BAD_MESSAGE and is counted. Rank 0 sends,
 * rank 1 answers the RTS with a forged ATS instead of reading. */
static void peer_status_checked(rvx_context_t *ctx, rvx_worker_t *w, rvx_ep_t *ep, int me)
{
    static const int32_t words[] = {-1000, 5};
    static unsigned char big[2 * RVX_RNDV_THRESH_BYTES + 64];
    unsigned i;
    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        uint64_t tag = 500 + i;
        if (me == 0) {
            rvx_request_t req;
            rvx_worker_stats_t s;
            rvx_status_t st = rvx_tag_send(ep, big, sizeof(big), tag, &req);
            st = st == RVX_INPROGRESS ? t_wait_req(w, &req, "forged-ATS send", (long)i) : st;
            T_CHECK(st == RVX_ERR_BAD_MESSAGE, "a send completed by ATS word %d: %d (%s)", words[i],
                    (int)st, rvx_status_str(st));
            rvx_worker_stats(w, &s);
            T_CHECK(s.tag_bad_frame == i + 1, "bad frames counted: %llu", (unsigned long long)s.tag_bad_frame);
        } else {
            rvx_tag_info_t info;
            rvx__tag_op_t *u;
            uint8_t body[8], *p;
            double t0 = t_now();
            while (rvx_tag_probe(w, tag, ~0ull, &info) != RVX_OK && t_now() - t0 < 30) rvx_progress(w);
            for (u = rvx__tag_of(w)->unx_head; u && u->tag != tag; u = u->next) {}
            T_CHECK(u != NULL, "no rendezvous request arrived");
            if (!u) return;
            rvx__tag_st32(body, u->peer_id);
            rvx__tag_st32(body + 4, (uint32_t)words[i]);
            while (!(p = (uint8_t *)rvx__tl_am_claim(&ep->tl[0], RVX__CHAN_REPLY, 8))) rvx_progress(w);
            memcpy(p, body, 8);
            rvx__tl_am_publish(&ep->tl[0], RVX__CHAN_REPLY, p, 8, RVX__TAG_CLASS | RVX__TF_ATS);
        }
        T_OK(rvx_barrier(ctx));
    }
}
#endif

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
    {
        rvx_ep_t *self;
        T_OK(rvx_ep_create(w, me, &self));
        requests_from_handler(w, self);
        long_am_not_into_cache_slack(ctx, w, self);
#if RVX_TL == RVX_TL_SHM
        loopback_key_bounded(ctx, self);
        hostile_address_refused(w, 1 - me);
#endif
        rvx_ep_destroy(self);
    }
    T_OK(rvx_barrier(ctx));
    absurd_tag_length(w, ep);
    absurd_mem_lengths(ctx);
    requests_start_pending(ctx, w, ep, me);
#if RVX_RNDV == RVX_RNDV_GET
    peer_status_checked(ctx, w, ep, me);
#endif
    T_OK(rvx_barrier(ctx));
    {
        /* receives nothing will match: the worker's end completes them (the lone one, one from
         * a source, one from anyone) */
        static char rb[3][64];
        rvx_request_t rr[3];
        T_STATUS(rvx_tag_recv(w, rb[0], 64, 991, ~0ull, &rr[0], NULL), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv_from(w, 1 - me, rb[1], 64, 992, ~0ull, &rr[1], NULL), RVX_INPROGRESS);
        T_STATUS(rvx_tag_recv(w, rb[2], 64, 993, ~0ull, &rr[2], NULL), RVX_INPROGRESS);
        rvx_worker_destroy(w);
        for (int i = 0; i < 3; i++)
            T_CHECK(rr[i].status == RVX_ERR_CANCELED, "receive %d after the worker's end: %s", i,
                    rvx_status_str((rvx_status_t)rr[i].status));
    }
    rvx_finalize(ctx);
    return t_exit();
}
